//! Run ids and the run's state directory.
//!
//! Every object a run creates carries its id: cgroups and network namespaces are named
//! `isobench-<run id>-<tenant>`, links `ib<tag><kind><n>` (the tag is the first six hex digits
//! of the id; link names must fit 15 bytes) with the alias `isobench-<run id>`, tenant
//! processes have `ISOBENCH_RUN=<run id>` in their environment. The state directory
//! `/run/isobench/<run id>/` holds the run's lock, taken by its controller for the run's
//! whole life (and its pid, for people): a run whose lock is free is dead, whatever killed
//! it, and the next run (or `isobench cleanup`) removes what it left. A sweep never touches
//! the objects of a run whose lock is held.
//!
//! One lock per host, [`MeasureSlot`], lets one run measure at a time: two runs would
//! disturb each other's figures.

use std::fmt;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::error::PlatformError;
use crate::lockfile::LockFile;
use crate::procs;

/// Prefix of every object isobench creates.
pub const PREFIX: &str = "isobench-";
/// Prefix of every network link isobench creates (followed by the run's tag).
pub const LINK_PREFIX: &str = "ib";

/// The id of one run: 8 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct RunId(String);

impl RunId {
    /// A fresh random id.
    pub fn generate() -> RunId {
        let mut b = [0u8; 4];
        // SAFETY: getrandom writes at most `b.len()` bytes into `b`.
        let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
        if n != b.len() as isize {
            // Fall back on time and pid; uniqueness is still checked against the state dir.
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos() ^ d.as_secs() as u32)
                .unwrap_or(0);
            b = (t ^ std::process::id().rotate_left(16)).to_le_bytes();
        }
        RunId(format!("{:08x}", u32::from_le_bytes(b)))
    }

    /// Parses an id written by [`RunId::as_str`].
    pub fn parse(s: &str) -> Result<RunId, PlatformError> {
        if s.len() == 8
            && s.bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
        {
            Ok(RunId(s.to_string()))
        } else {
            Err(PlatformError::BadRunId { id: s.to_string() })
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The six hex digits that name the run's network links.
    pub fn tag(&self) -> &str {
        &self.0[..6]
    }

    /// `isobench-<id>`: the prefix of the run's cgroups, namespaces and directories.
    pub fn prefix(&self) -> String {
        format!("{PREFIX}{}", self.0)
    }

    /// `isobench-<id>-<tenant>`: the name of a tenant's cgroup, namespace and workdir.
    pub fn object_name(&self, tenant: &str) -> String {
        format!("{PREFIX}{}-{tenant}", self.0)
    }

    /// The run id in an object name `isobench-<id>-...` or `isobench-<id>`.
    pub fn from_object_name(name: &str) -> Option<RunId> {
        let rest = name.strip_prefix(PREFIX)?;
        let id = rest.split('-').next()?;
        RunId::parse(id).ok()
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where run state directories live: `/run/isobench` as root, else
/// `$XDG_RUNTIME_DIR/isobench` or `/tmp/isobench-state-<uid>`.
pub fn state_root() -> PathBuf {
    if procs::euid() == 0 {
        return PathBuf::from("/run/isobench");
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d).join("isobench"),
        _ => PathBuf::from(format!("/tmp/isobench-state-{}", procs::euid())),
    }
}

/// Whether run `id` is live: its state directory, in any state root, is held by its
/// controller.
pub(crate) fn run_live(id: &str) -> bool {
    state_roots().iter().any(|root| {
        let d = root.join(id);
        d.is_dir() && state_dir_live(&d)
    })
}

/// Every place a run of any user may keep its state: [`state_root`] first, then
/// `/run/isobench`, `/run/user/*/isobench` and `/tmp/isobench-state-*`. A sweep looks at all of
/// them, so a root sweep does not take another user's live run for a dead one.
pub fn state_roots() -> Vec<PathBuf> {
    let mut roots = vec![state_root(), PathBuf::from("/run/isobench")];
    if let Ok(rd) = fs::read_dir("/run/user") {
        roots.extend(rd.flatten().map(|e| e.path().join("isobench")));
    }
    if let Ok(rd) = fs::read_dir("/tmp") {
        roots.extend(
            rd.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with("isobench-state-")
                })
                .map(|e| e.path()),
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    roots.retain(|r| r.is_dir() && seen.insert(r.clone()));
    roots
}

/// Default parent of tenant working directories (on disk, not tmpfs).
pub fn default_workdir_root() -> PathBuf {
    PathBuf::from("/var/tmp")
}

/// The lock a run's controller holds for the run's life, in its state directory.
const RUN_LOCK: &str = "lock";

/// Whether the run whose state directory is `dir` has a live controller: its lock is held
/// (a state directory from before run locks: its controller's pid and start time).
pub(crate) fn state_dir_live(dir: &Path) -> bool {
    if let Some(held) = LockFile::is_held(&dir.join(RUN_LOCK)) {
        return held;
    }
    let Ok(text) = fs::read_to_string(dir.join("pid")) else {
        return false;
    };
    let mut it = text.split_whitespace();
    let (Some(pid), Some(start)) = (
        it.next().and_then(|p| p.parse::<i32>().ok()),
        it.next().and_then(|s| s.parse::<u64>().ok()),
    ) else {
        return false;
    };
    procs::start_time(pid) == Some(start)
}

/// A cheap, cloneable handle on a run: its id and state directory. Platforms take one; a
/// Ctrl-C handler can keep one to call [`RunContext::cleanup_now`].
#[derive(Debug, Clone)]
pub struct RunContext {
    id: RunId,
    state_dir: PathBuf,
}

impl RunContext {
    /// The run id.
    pub fn id(&self) -> &RunId {
        &self.id
    }

    /// The run's state directory.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// Records a workdir parent so that cleanup looks there for leftovers.
    pub(crate) fn record_workdir_parent(&self, parent: &Path) -> Result<()> {
        self.record_line(WORKDIRS, parent)
    }

    /// Records the cgroup under which the run's tenants go (cgroup v2), so that cleanup
    /// looks there for leftovers.
    pub(crate) fn record_cgroup_parent(&self, parent: &Path) -> Result<()> {
        self.record_line(CGROUP_PARENTS, parent)
    }

    /// Records the cgroup path (cgroup v1, the same in every hierarchy) under which the
    /// run's tenants go, so that cleanup looks there for leftovers.
    pub(crate) fn record_v1_cgroup_parent(&self, parent: &Path) -> Result<()> {
        self.record_line(CGROUP_V1_PARENTS, parent)
    }

    fn record_line(&self, name: &str, path: &Path) -> Result<()> {
        let file = self.state_dir.join(name);
        let line = path.display().to_string();
        let known = fs::read_to_string(&file).unwrap_or_default();
        if known.lines().any(|l| l == line) {
            return Ok(());
        }
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&file)
            .with_context(|| format!("opening {}", file.display()))?;
        writeln!(f, "{line}").with_context(|| format!("writing {}", file.display()))
    }
}

/// The file of a run's state directory listing its workdir parents.
pub(crate) const WORKDIRS: &str = "workdirs";

/// The file of a run's state directory listing the cgroups its tenants went under (v2).
pub(crate) const CGROUP_PARENTS: &str = "cgroups";

/// The file of a run's state directory listing the cgroup paths its tenants went under in
/// every v1 hierarchy (`/shared`).
pub(crate) const CGROUP_V1_PARENTS: &str = "cgroups-v1";

/// The file that marks a coordinator's state directory
/// ([`crate::RunGuard::start_coordinator`]).
const COORDINATOR: &str = "coordinator";

/// Creates the state directory of a new run id under `root`, with the controller's pid and
/// start time (and the mark of a `coordinator`), and takes the run's lock: the run's handle
/// and the lock, which [`crate::RunGuard`] holds for the run's life.
pub(crate) fn create_state_dir(root: &Path, coordinator: bool) -> Result<(RunContext, LockFile)> {
    fs::create_dir_all(root).with_context(|| format!("creating {}", root.display()))?;
    let pid = std::process::id() as i32;
    let start = procs::start_time(pid).context("reading this process's start time")?;
    for _ in 0..100 {
        let id = RunId::generate();
        // Link names carry only the tag: it must be unique among the known runs.
        let taken = fs::read_dir(root)
            .with_context(|| format!("listing {}", root.display()))?
            .filter_map(|e| e.ok())
            .any(|e| e.file_name().to_string_lossy().starts_with(id.tag()));
        if taken {
            continue;
        }
        // Write into a temporary name and rename, so that a concurrent sweep never sees
        // a state directory without its pid file.
        let tmp = root.join(format!(".new-{id}-{pid}"));
        fs::create_dir(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        fs::write(tmp.join("pid"), format!("{pid} {start}\n"))
            .with_context(|| format!("writing {}/pid", tmp.display()))?;
        if coordinator {
            fs::write(tmp.join(COORDINATOR), "")
                .with_context(|| format!("writing {}/{COORDINATOR}", tmp.display()))?;
        }
        let lock = LockFile::try_lock(&tmp.join(RUN_LOCK))
            .with_context(|| format!("locking {}/{RUN_LOCK}", tmp.display()))?
            .context("a new run's lock is held by another process")?;
        let dir = root.join(id.as_str());
        if fs::rename(&tmp, &dir).is_err() {
            let _ = fs::remove_dir_all(&tmp);
            continue;
        }
        tracing::debug!("run {id}: state in {}", dir.display());
        return Ok((RunContext { id, state_dir: dir }, lock));
    }
    anyhow::bail!("could not find a free run id in {}", root.display())
}

/// The runs other than `me` live on this host now (their controllers are running),
/// coordinators left out.
pub(crate) fn others_live(me: &RunId) -> Vec<String> {
    let mut ids: Vec<String> = state_roots()
        .iter()
        .filter_map(|root| fs::read_dir(root).ok())
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            !name.starts_with('.')
                && name != me.as_str()
                && !e.path().join(COORDINATOR).exists()
                && state_dir_live(&e.path())
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// The process controlling a run, as recorded beside the run in its database: a run left
/// `running` whose controller is gone was killed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct RunController {
    /// The host's name.
    pub host: String,
    /// The kernel's boot id: a pid means nothing across a reboot.
    pub boot: String,
    /// The controller's pid.
    pub pid: i32,
    /// Its start time, in clock ticks since boot: a reused pid is another process.
    pub start: u64,
}

/// Whether a recorded controller still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// It runs.
    Live,
    /// It is gone (killed, crashed, or the host rebooted).
    Gone,
    /// It ran on another host; this one cannot tell.
    Unknown,
}

impl RunController {
    /// This process.
    pub fn current() -> Result<RunController> {
        let pid = std::process::id() as i32;
        Ok(RunController {
            host: hostname(),
            boot: boot_id().context("reading /proc/sys/kernel/random/boot_id")?,
            pid,
            start: procs::start_time(pid).context("reading this process's start time")?,
        })
    }

    /// Whether it still runs, as far as this host can tell.
    pub fn liveness(&self) -> Liveness {
        if self.host != hostname() {
            return Liveness::Unknown;
        }
        if boot_id().as_deref() != Some(self.boot.as_str()) {
            return Liveness::Gone;
        }
        if procs::start_time(self.pid) == Some(self.start) && procs::alive(self.pid) {
            Liveness::Live
        } else {
            Liveness::Gone
        }
    }
}

pub(crate) fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

fn boot_id() -> Option<String> {
    procfs::sys::kernel::random::boot_id()
        .ok()
        .map(|b| b.trim().to_string())
}

/// The host's measurement slot: the run holding it is the only one measuring here.
/// Held until dropped; the kernel frees it however its holder ends.
#[derive(Debug)]
pub struct MeasureSlot {
    lock: LockFile,
    holder: SlotHolder,
}

/// Who holds the measurement slot: a run, as it describes itself in the slot's file, or a
/// `probe` or `stress` command sharing it, named by its command line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct SlotHolder {
    /// The holder's pid.
    pub pid: i32,
    /// The stored run it measures, once created.
    pub run: Option<String>,
    /// The run's database.
    pub db: Option<PathBuf>,
    /// A sharing holder's command line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

impl SlotHolder {
    /// A process sharing the slot, named by its command line.
    fn sharing(pid: i32) -> SlotHolder {
        let cmdline = procfs::process::Process::new(pid).and_then(|p| p.cmdline());
        let command = cmdline.ok().map(|mut words| {
            // The program by its file name, not its path.
            if let Some(w) = words.first_mut() {
                *w = w.rsplit('/').next().unwrap_or_default().to_string();
            }
            words.join(" ")
        });
        SlotHolder {
            pid,
            command,
            ..SlotHolder::default()
        }
    }
}

impl fmt::Display for SlotHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.run, &self.command) {
            (Some(run), _) => write!(f, "run {run}")?,
            (None, Some(cmd)) => write!(f, "`{cmd}`")?,
            (None, None) => f.write_str("a run that is starting")?,
        }
        if self.pid > 0 {
            write!(f, " (pid {}", self.pid)?;
            if let Some(db) = &self.db {
                write!(f, ", database {}", db.display())?;
            }
            f.write_str(")")?;
        }
        Ok(())
    }
}

impl MeasureSlot {
    /// The slot's file.
    fn path() -> PathBuf {
        state_root().join("measuring.lock")
    }

    /// Takes the slot, or says who holds it.
    pub fn try_take() -> Result<Result<MeasureSlot, SlotHolder>> {
        let root = state_root();
        fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
        let path = MeasureSlot::path();
        match LockFile::try_lock(&path).with_context(|| format!("locking {}", path.display()))? {
            Some(lock) => {
                let mut slot = MeasureSlot {
                    lock,
                    holder: SlotHolder {
                        pid: std::process::id() as i32,
                        ..SlotHolder::default()
                    },
                };
                slot.write()?;
                Ok(Ok(slot))
            }
            None => Ok(Err(MeasureSlot::holder(&path))),
        }
    }

    /// Shares the slot, for a command that measures or loads the host without being a run
    /// (`probe`, `stress`): any number share it at once, but never beside a run. Or says
    /// which run holds it.
    pub fn try_share() -> Result<Result<SharedSlot, SlotHolder>> {
        let root = state_root();
        fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
        let path = MeasureSlot::path();
        match LockFile::try_lock_shared(&path)
            .with_context(|| format!("locking {}", path.display()))?
        {
            Some(lock) => Ok(Ok(SharedSlot { _lock: lock })),
            None => Ok(Err(MeasureSlot::holder(&path))),
        }
    }

    /// Who holds the slot at `path` that this process could not take.
    fn holder(path: &Path) -> SlotHolder {
        let holders = LockFile::holders(path);
        if !holders.iter().any(|&(_, exclusive)| exclusive) {
            if let Some(&(pid, _)) = holders.first() {
                return SlotHolder::sharing(pid);
            }
        }
        // A run that has not written its note yet (or a note left by a process that is
        // gone) is "a run that is starting".
        LockFile::note_of(path)
            .and_then(|t| serde_json::from_str::<SlotHolder>(&t).ok())
            .filter(|h| procs::alive(h.pid))
            .unwrap_or_default()
    }

    /// Names the stored run this slot measures, for whoever finds it taken.
    pub fn describe(&mut self, run: &str, db: &Path) -> Result<()> {
        self.holder.run = Some(run.to_string());
        self.holder.db = Some(std::path::absolute(db).unwrap_or_else(|_| db.to_path_buf()));
        self.write()
    }

    fn write(&mut self) -> Result<()> {
        let text = serde_json::to_string(&self.holder)?;
        self.lock
            .set_note(&text)
            .with_context(|| format!("writing {}", self.lock.path().display()))
    }
}

/// A share of the measurement slot ([`MeasureSlot::try_share`]), held until dropped.
#[derive(Debug)]
pub struct SharedSlot {
    _lock: LockFile,
}

impl Drop for MeasureSlot {
    fn drop(&mut self) {
        // The next holder writes its own; until then nobody is named.
        let _ = self.lock.set_note("");
    }
}

/// The cache directory kept between runs (`$XDG_CACHE_HOME/isobench`, else
/// `~/.cache/isobench`): static binary, VM kernels, images.
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d).join("isobench"));
    }
    std::env::var_os("HOME")
        .filter(|d| !d.is_empty())
        .map(|h| PathBuf::from(h).join(".cache").join("isobench"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_measurement_slot_is_taken_once_and_names_its_holder() {
        // One test holds the slot at a time: the slot is the host's.
        let mut slot = loop {
            match MeasureSlot::try_take().unwrap() {
                Ok(slot) => break slot,
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(200)),
            }
        };
        let holder = MeasureSlot::try_take().unwrap().unwrap_err();
        assert_eq!(holder.pid, std::process::id() as i32);
        assert_eq!(holder.run, None);
        assert!(holder
            .to_string()
            .starts_with("a run that is starting (pid "));
        slot.describe("20261125-033942-817990", Path::new("/tmp/x.db"))
            .unwrap();
        let holder = MeasureSlot::try_take().unwrap().unwrap_err();
        assert_eq!(
            holder.to_string(),
            format!(
                "run 20261125-033942-817990 (pid {}, database /tmp/x.db)",
                std::process::id()
            )
        );
        // A probe or stressor cannot share it with a run.
        assert_eq!(MeasureSlot::try_share().unwrap().unwrap_err(), holder);
        drop(slot);

        // Probes and stressors share it with each other, never with a run, which names one.
        let a = crate::lockfile::eventually("a share", || MeasureSlot::try_share().unwrap().ok());
        let b = MeasureSlot::try_share().unwrap().unwrap();
        let holder = MeasureSlot::try_take().unwrap().unwrap_err();
        assert_eq!(holder.pid, std::process::id() as i32);
        let program = std::env::current_exe().unwrap();
        let program = program.file_name().unwrap().to_string_lossy();
        assert!(
            holder.to_string().starts_with(&format!("`{program}")),
            "{holder}"
        );
        drop((a, b));
        crate::lockfile::eventually("the slot", || MeasureSlot::try_take().unwrap().ok());
    }

    #[test]
    fn a_controller_is_live_while_its_process_runs() {
        let me = RunController::current().unwrap();
        assert_eq!(me.liveness(), Liveness::Live);
        let reused_pid = RunController {
            start: me.start + 1,
            ..me.clone()
        };
        assert_eq!(reused_pid.liveness(), Liveness::Gone);
        let rebooted = RunController {
            boot: "another boot".into(),
            ..me.clone()
        };
        assert_eq!(rebooted.liveness(), Liveness::Gone);
        let elsewhere = RunController {
            host: format!("not-{}", me.host),
            ..me
        };
        assert_eq!(elsewhere.liveness(), Liveness::Unknown);
    }

    #[test]
    fn run_ids() {
        let id = RunId::generate();
        assert_eq!(RunId::parse(id.as_str()).unwrap(), id);
        assert_eq!(id.tag().len(), 6);
        assert!(RunId::parse("ABCDEF12").is_err());
        assert!(RunId::parse("abc").is_err());
        let name = id.object_name("victim-1");
        assert_eq!(RunId::from_object_name(&name), Some(id.clone()));
        assert_eq!(RunId::from_object_name(&id.prefix()), Some(id));
        assert_eq!(RunId::from_object_name("isobench-zz-x"), None);
    }

    #[test]
    fn state_dir_liveness() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id() as i32;
        let start = procs::start_time(me).unwrap();
        fs::write(dir.path().join("pid"), format!("{me} {start}\n")).unwrap();
        assert!(state_dir_live(dir.path()));
        // Same pid, other start time: a reused pid is not the run's controller.
        fs::write(dir.path().join("pid"), format!("{me} {}\n", start + 1)).unwrap();
        assert!(!state_dir_live(dir.path()));
        fs::remove_file(dir.path().join("pid")).unwrap();
        assert!(!state_dir_live(dir.path()));
    }
}
