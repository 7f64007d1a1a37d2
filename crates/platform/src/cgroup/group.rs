//! One tenant's cgroup: a directory in every hierarchy (v1) or one directory (v2), its limits,
//! its usage counters, and its teardown (freeze, kill every task, remove).

pub(crate) mod knobs;
mod update;

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::{CgroupFs, CgroupTree, CgroupVersion, Controller};
use crate::blockdev::DevNum;
use crate::error::PlatformError;
use crate::flatkeyed::keyed;
use crate::limits::{CpuList, CpuWeight, Limits, CPU_PERIOD_US};
use crate::noise::Pressure;
use crate::procs;
use crate::usage::Usage;

/// v1 reports "no memory limit" as a huge page-aligned number; anything above this is "none".
const V1_UNLIMITED: u64 = 1 << 62;

/// How long freezing or thawing a tenant may take before it counts as failed; every
/// platform's `set_frozen` uses it.
///
/// A task freezes itself the next time it runs, and the controller that asks for the freeze
/// competes for the CPUs too, so on saturated CPUs a tenant of hundreds of runnable tasks
/// takes up to a few hundred milliseconds to freeze, and the controller's thaw (the write
/// and its return) up to 8 s (bench/RESULTS.md, "Freezing a busy tenant"). A task the
/// freezer cannot reach (blocked in the kernel) keeps a freeze from ever finishing; 10 s is
/// well past the first and still fails the trial clearly on the second.
pub const FREEZE_TIMEOUT: Duration = Duration::from_secs(10);

/// While a freeze is unfinished, the freeze is written again this often: v1 then asks every
/// task of the cgroup to freeze again, which catches a task the first request missed. (v2
/// ignores a repeated write, harmlessly.)
const FREEZE_RETRY: Duration = Duration::from_millis(100);

/// The first pause between two reads of the freezer state. It doubles after each read up to
/// [`FREEZE_POLL_MAX`]: a quick freeze is seen within a millisecond, and a slow one is not
/// slowed further by a poller that competes with the freezing tasks for the CPU and for the
/// freezer's lock (each v1 read walks every task of the cgroup).
const FREEZE_POLL_MIN: Duration = Duration::from_micros(200);

/// The longest pause between two reads of the freezer state.
const FREEZE_POLL_MAX: Duration = Duration::from_millis(5);

/// How long a kill waits for the freeze that precedes it. The kill does not need the freeze
/// to finish: a freezing cgroup's new children are frozen as they are forked, and the kill
/// loop signals stragglers until the cgroup is empty. A teardown (of a stalled host, say)
/// should not wait the full [`FREEZE_TIMEOUT`].
const KILL_FREEZE_WAIT: Duration = Duration::from_secs(2);

/// The files through which a cgroup is frozen and thawed: v1's freezer controller
/// (`freezer.state`), v2's core `cgroup.freeze` and `cgroup.events`.
#[derive(Debug, Clone)]
struct FreezerFiles {
    version: CgroupVersion,
    /// Written to freeze or thaw.
    control: PathBuf,
    /// Read to see which state the kernel has reached.
    state: PathBuf,
    /// The cgroup's tasks (threads), to say which ones are not frozen.
    threads: PathBuf,
}

impl FreezerFiles {
    fn v1(dir: &Path) -> FreezerFiles {
        FreezerFiles {
            version: CgroupVersion::V1,
            control: dir.join("freezer.state"),
            state: dir.join("freezer.state"),
            threads: dir.join("tasks"),
        }
    }

    fn v2(dir: &Path) -> FreezerFiles {
        FreezerFiles {
            version: CgroupVersion::V2,
            control: dir.join("cgroup.freeze"),
            state: dir.join("cgroup.events"),
            threads: dir.join("cgroup.threads"),
        }
    }

    /// What is written to ask for the state.
    fn request(&self, frozen: bool) -> &'static str {
        match (self.version, frozen) {
            (CgroupVersion::V1, true) => "FROZEN",
            (CgroupVersion::V1, false) => "THAWED",
            (CgroupVersion::V2, true) => "1",
            (CgroupVersion::V2, false) => "0",
        }
    }

    /// The line of the state file that says the state is reached.
    fn reached(&self, frozen: bool) -> &'static str {
        match (self.version, frozen) {
            (CgroupVersion::V1, true) => "FROZEN",
            (CgroupVersion::V1, false) => "THAWED",
            (CgroupVersion::V2, true) => "frozen 1",
            (CgroupVersion::V2, false) => "frozen 0",
        }
    }
}

/// How a wait for a freeze or thaw went.
#[derive(Debug)]
struct Switched {
    /// Whether the kernel reported the state asked for.
    reached: bool,
    /// From the first write to the last read.
    elapsed: Duration,
    /// How often the request was written.
    writes: u32,
    /// How often the state was read.
    reads: u32,
    /// The last state read (v1: `FREEZING`, ...), when one was read.
    last: Option<String>,
}

/// Asks the kernel to freeze (or thaw) the cgroup of `f` and waits up to `timeout` for it to
/// report the new state, reading the state with a growing pause (see [`FREEZE_POLL_MIN`]) and
/// writing a freeze again every `retry` until it is reached. Fails only when the first write
/// fails.
fn switch_freezer(
    tree: &dyn CgroupTree,
    f: &FreezerFiles,
    frozen: bool,
    timeout: Duration,
    retry: Duration,
) -> io::Result<Switched> {
    let (request, want) = (f.request(frozen), f.reached(frozen));
    let t0 = Instant::now();
    tree.write(&f.control, request)?;
    let mut written = Instant::now();
    let mut done = Switched {
        reached: false,
        elapsed: Duration::ZERO,
        writes: 1,
        reads: 0,
        last: None,
    };
    let mut pause = FREEZE_POLL_MIN;
    loop {
        if let Ok(t) = tree.read(&f.state) {
            done.reads += 1;
            done.reached = t.lines().any(|l| l.trim() == want);
            done.last = Some(t.trim().to_string());
        }
        done.elapsed = t0.elapsed();
        if done.reached || done.elapsed >= timeout {
            return Ok(done);
        }
        thread::sleep(pause.min(timeout - done.elapsed));
        pause = (pause * 2).min(FREEZE_POLL_MAX);
        if frozen && written.elapsed() >= retry && tree.write(&f.control, request).is_ok() {
            done.writes += 1;
            written = Instant::now();
        }
    }
}

/// One task of a cgroup as `/proc/<tid>/stat` shows it; `state` is `None` for a task that
/// has gone, or when the tree is a fake one.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TaskState {
    tid: i32,
    comm: String,
    state: Option<char>,
}

/// Says which of `tasks` are not frozen, for the error of a freeze that timed out. A frozen
/// task reports state `D`, so any other letter is a task still to freeze (`R`: waiting for a
/// CPU to freeze itself on; `S`: asleep where the freezer does not reach); a `D` is frozen or
/// blocked in the kernel, which the kernel does not tell apart.
fn describe_unfrozen(tasks: &[TaskState]) -> String {
    const SHOWN: usize = 8;
    let live: Vec<&TaskState> = tasks.iter().filter(|t| t.state.is_some()).collect();
    let unfrozen: Vec<&TaskState> = live
        .iter()
        .copied()
        .filter(|t| t.state != Some('D'))
        .collect();
    if tasks.is_empty() {
        return "the cgroup lists no task".to_string();
    }
    if live.is_empty() {
        let tids: Vec<String> = tasks
            .iter()
            .take(SHOWN)
            .map(|t| t.tid.to_string())
            .collect();
        return format!(
            "{} tasks listed, states unknown (tids {}{})",
            tasks.len(),
            tids.join(", "),
            if tasks.len() > SHOWN { ", ..." } else { "" }
        );
    }
    if unfrozen.is_empty() {
        return format!(
            "all {} tasks report state D: frozen, or blocked in the kernel where the freezer \
             cannot reach them (uninterruptible I/O, vfork)",
            live.len()
        );
    }
    let mut by_state: BTreeMap<char, usize> = BTreeMap::new();
    for t in &unfrozen {
        *by_state.entry(t.state.unwrap_or('?')).or_default() += 1;
    }
    let counts: Vec<String> = by_state.iter().map(|(s, n)| format!("{s} {n}")).collect();
    let shown: Vec<String> = unfrozen
        .iter()
        .take(SHOWN)
        .map(|t| format!("{} {} {}", t.tid, t.comm, t.state.unwrap_or('?')))
        .collect();
    format!(
        "{} of {} tasks not frozen (by /proc/PID/stat state: {}): {}{}",
        unfrozen.len(),
        live.len(),
        counts.join(", "),
        shown.join(", "),
        if unfrozen.len() > SHOWN { ", ..." } else { "" }
    )
}

/// The cgroup(s) of one tenant.
#[derive(Debug, Clone)]
pub struct TenantCgroup {
    fs: CgroupFs,
    name: String,
    dirs: Vec<(PathBuf, Vec<Controller>)>,
}

fn controller_for(key: &str) -> Controller {
    match key {
        "cpus" | "shares" | "weight" | "cpu_burst" => Controller::Cpu,
        "cpuset" | "mems" | "cpuset_partition" => Controller::Cpuset,
        "memory" | "memory_min" | "memory_low" | "memory_high" | "swap" => Controller::Memory,
        "pids" => Controller::Pids,
        _ => Controller::Io,
    }
}

fn io_err(e: io::Error, what: String) -> anyhow::Error {
    anyhow!(e).context(what)
}

impl TenantCgroup {
    /// Checks that every controller the limits need is available, before anything is
    /// created.
    pub fn check(fs: &CgroupFs, limits: &Limits) -> Result<(), PlatformError> {
        for key in limits.resource_keys() {
            let c = controller_for(key);
            if !fs.has(c) {
                let (name, fix) = match fs.version() {
                    CgroupVersion::V1 => (
                        c.v1_name().to_string(),
                        format!("mount it (`mount -t cgroup -o {0} cgroup /sys/fs/cgroup/{0}`) or remove `{key}`", c.v1_name()),
                    ),
                    CgroupVersion::V2 => {
                        let n = c.v2_name().unwrap_or(c.v1_name());
                        (
                            n.to_string(),
                            format!("enable it in the parent's cgroup.subtree_control or remove `{key}`"),
                        )
                    }
                };
                return Err(PlatformError::MissingController {
                    key,
                    controller: name,
                    detail: fs.describe(),
                    fix,
                });
            }
        }
        Ok(())
    }

    /// Describes the cgroup `name` without touching the tree (to remove a leftover, or to
    /// read one).
    pub fn open(fs: &CgroupFs, name: &str) -> TenantCgroup {
        let dirs = fs
            .hierarchies()
            .iter()
            .map(|h| (h.root.join(name), h.controllers.clone()))
            .collect();
        TenantCgroup {
            fs: fs.clone(),
            name: name.to_string(),
            dirs,
        }
    }

    /// Creates the cgroup `name` with `limits`; `device` is the block device the io limits
    /// apply to. On error nothing is left behind.
    pub fn create(
        fs: &CgroupFs,
        name: &str,
        limits: &Limits,
        device: Option<DevNum>,
    ) -> Result<TenantCgroup> {
        TenantCgroup::check(fs, limits)?;
        TenantCgroup::check_knobs(fs, limits)?;
        if limits.needs_device() && device.is_none() {
            bail!("io limits need the block device of the tenant's workdir, and none was found");
        }
        let cg = TenantCgroup::open(fs, name);
        if fs.version() == CgroupVersion::V2 {
            cg.enable_controllers()?;
        }
        let tree = fs.tree();
        let mut made: Vec<PathBuf> = Vec::new();
        for (dir, _) in &cg.dirs {
            if let Err(e) = tree.mkdir(dir) {
                for d in made.iter().rev() {
                    let _ = tree.rmdir(d);
                }
                let hint = if e.kind() == io::ErrorKind::AlreadyExists {
                    " (a tenant of that name already exists in this run)"
                } else {
                    ""
                };
                return Err(io_err(
                    e,
                    format!("creating cgroup {}{hint}", dir.display()),
                ));
            }
            made.push(dir.clone());
        }
        if let Err(e) = cg.apply(limits, device) {
            let _ = cg.remove(Duration::from_secs(2));
            return Err(e);
        }
        Ok(cg)
    }

    /// The file operations of the cgroup's tree.
    pub fn tree(&self) -> std::sync::Arc<dyn CgroupTree> {
        self.fs.tree().clone()
    }

    /// Writes the limits that `limits` sets (the others stay as they are), as at creation;
    /// no io limits (they need the device).
    pub fn apply_limits(&self, limits: &Limits) -> Result<()> {
        self.apply(limits, None)
    }

    /// Reads one file of the cgroup, in the directory of controller `c`.
    pub fn read_file(&self, c: Controller, name: &str) -> Option<String> {
        self.read(c, name)
    }

    /// The cgroup's name (the same in every hierarchy).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The cgroup's directories, one per hierarchy.
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|(d, _)| d.clone()).collect()
    }

    /// The directory carrying controller `c`.
    pub fn dir_of(&self, c: Controller) -> Option<&Path> {
        self.dirs
            .iter()
            .find(|(_, cs)| cs.contains(&c))
            .map(|(d, _)| d.as_path())
    }

    fn file(&self, c: Controller, name: &str) -> Result<PathBuf> {
        let dir = self
            .dir_of(c)
            .ok_or_else(|| anyhow!("controller {c} is not available"))?;
        Ok(dir.join(name))
    }

    fn write(&self, c: Controller, name: &str, value: &str) -> Result<()> {
        let path = self.file(c, name)?;
        self.fs
            .tree()
            .write(&path, value)
            .map_err(|e| io_err(e, format!("writing `{value}` to {}", path.display())))
    }

    fn read(&self, c: Controller, name: &str) -> Option<String> {
        let path = self.file(c, name).ok()?;
        self.fs.tree().read(&path).ok()
    }

    fn exists(&self, c: Controller, name: &str) -> bool {
        self.file(c, name)
            .map(|p| self.fs.tree().exists(&p))
            .unwrap_or(false)
    }

    /// v2: enables isobench's controllers for the children of the root.
    fn enable_controllers(&self) -> Result<()> {
        let h = &self.fs.hierarchies()[0];
        let tree = self.fs.tree();
        let sub = h.root.join("cgroup.subtree_control");
        let on: BTreeSet<String> = tree
            .read(&sub)
            .with_context(|| format!("reading {}", sub.display()))?
            .split_whitespace()
            .map(str::to_string)
            .collect();
        let want: Vec<String> = h
            .controllers
            .iter()
            .filter_map(|c| c.v2_name())
            .filter(|n| !on.contains(*n))
            .map(|n| format!("+{n}"))
            .collect();
        if want.is_empty() {
            return Ok(());
        }
        let value = want.join(" ");
        tree.write(&sub, &value).map_err(|e| {
            let hint = if e.raw_os_error() == Some(libc::EBUSY) {
                " (the cgroup holds processes itself; v2 allows controllers only for cgroups \
                 without processes, so run isobench from a cgroup whose parent has none)"
            } else {
                ""
            };
            io_err(e, format!("writing `{value}` to {}{hint}", sub.display()))
        })
    }

    fn parent_value(&self, c: Controller, name: &str) -> Option<String> {
        let dir = self.dir_of(c)?;
        let parent = dir.parent()?;
        let v = self.fs.tree().read(&parent.join(name)).ok()?;
        let v = v.trim().to_string();
        (!v.is_empty()).then_some(v)
    }

    fn apply(&self, l: &Limits, dev: Option<DevNum>) -> Result<()> {
        match self.fs.version() {
            CgroupVersion::V1 => self.apply_v1(l, dev),
            CgroupVersion::V2 => self.apply_v2(l, dev),
        }
    }

    fn apply_v1(&self, l: &Limits, dev: Option<DevNum>) -> Result<()> {
        if self.fs.has(Controller::Cpuset) {
            // A v1 cpuset admits no task until both lists are set.
            let cpus = match &l.cpuset {
                Some(s) => s.to_string(),
                None => self
                    .parent_value(Controller::Cpuset, "cpuset.cpus")
                    .context("reading the parent's cpuset.cpus")?,
            };
            let mems = match &l.mems {
                Some(s) => s.to_string(),
                None => self
                    .parent_value(Controller::Cpuset, "cpuset.mems")
                    .context("reading the parent's cpuset.mems")?,
            };
            self.write(Controller::Cpuset, "cpuset.cpus", &cpus)?;
            self.write(Controller::Cpuset, "cpuset.mems", &mems)?;
        }
        let dev = dev.map(|d| d.to_string());
        for (c, file, v) in v1_limit_files(l, dev.as_deref()) {
            self.write(c, file, &v)?;
        }
        if let Some(m) = l.memory {
            if self.exists(Controller::Memory, "memory.memsw.limit_in_bytes") {
                // memory+swap = memory (the tenant cannot swap) plus the swap it may use.
                // The kernel keeps whole pages: a limit not on a page boundary reads back
                // rounded down.
                let sum = m + l.swap.unwrap_or(0);
                let memsw = sum.to_string();
                let rounded = knobs::page_rounded(sum).to_string();
                self.write_checked(
                    Controller::Memory,
                    "memory.memsw.limit_in_bytes",
                    &memsw,
                    |got| got.trim() == memsw || got.trim() == rounded,
                )?;
            } else {
                self.write(Controller::Memory, "memory.swappiness", "0")?;
            }
        }
        self.apply_knobs_v1(l)
    }

    fn apply_v2(&self, l: &Limits, dev: Option<DevNum>) -> Result<()> {
        let dev_text = dev.map(|d| d.to_string());
        for (c, file, v) in v2_limit_files(l, dev_text.as_deref()) {
            self.write(c, file, &v)?;
        }
        if l.memory.is_some()
            && l.swap.is_none()
            && self.exists(Controller::Memory, "memory.swap.max")
        {
            self.write(Controller::Memory, "memory.swap.max", "0")?;
        }
        self.apply_knobs_v2(l, dev)
    }

    /// Changes the CPU quota while the tenant lives: `Some(cpus)` lets its tasks run for
    /// `cpus` CPUs' worth of time in every period of [`CPU_PERIOD_US`] (v1
    /// `cpu.cfs_period_us` and `cpu.cfs_quota_us`, v2 `cpu.max`); `None` lifts the quota.
    /// Takes effect from the next period; nothing restarts.
    pub fn set_cpu_quota(&self, cpus: Option<f64>) -> Result<()> {
        if let Some(c) = cpus {
            if !(c.is_finite() && c > 0.0) {
                bail!("a CPU quota of {c} CPUs is not a positive number of CPUs");
            }
        }
        if !self.fs.has(Controller::Cpu) {
            bail!(
                "the `cpu` controller is not available ({}), so the CPU quota cannot be set",
                self.fs.describe()
            );
        }
        match self.fs.version() {
            CgroupVersion::V1 => {
                self.write(
                    Controller::Cpu,
                    "cpu.cfs_period_us",
                    &CPU_PERIOD_US.to_string(),
                )?;
                let quota = cpus.map_or_else(|| "-1".to_string(), |c| quota_us(c).to_string());
                self.write(Controller::Cpu, "cpu.cfs_quota_us", &quota)
            }
            CgroupVersion::V2 => {
                let quota = cpus.map_or_else(|| "max".to_string(), |c| quota_us(c).to_string());
                self.write(
                    Controller::Cpu,
                    "cpu.max",
                    &format!("{quota} {CPU_PERIOD_US}"),
                )
            }
        }
    }

    /// Opens `cgroup.procs` of every directory, for a child to join before exec (writing
    /// `0` to each).
    pub fn join_fds(&self) -> Result<Vec<OwnedFd>> {
        self.dirs
            .iter()
            .map(|(d, _)| {
                self.fs
                    .tree()
                    .open_procs(d)
                    .map_err(|e| io_err(e, format!("opening {}/cgroup.procs", d.display())))
            })
            .collect()
    }

    /// The processes in the cgroup (the union over hierarchies).
    pub fn procs(&self) -> Vec<i32> {
        let mut set = BTreeSet::new();
        for (d, _) in &self.dirs {
            if let Ok(t) = self.fs.tree().read(&d.join("cgroup.procs")) {
                set.extend(t.split_whitespace().filter_map(|p| p.parse::<i32>().ok()));
            }
        }
        set.into_iter().collect()
    }

    /// Lifts the io throttle, so that killed tasks waiting on throttled I/O can exit.
    fn lift_io_limits(&self) {
        let Some(dir) = self.dir_of(Controller::Io) else {
            return;
        };
        let tree = self.fs.tree();
        let devices = |file: &str| -> Vec<String> {
            tree.read(&dir.join(file))
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.split_whitespace().next())
                .filter(|d| d.contains(':'))
                .map(str::to_string)
                .collect()
        };
        match self.fs.version() {
            CgroupVersion::V1 => {
                for file in [
                    "blkio.throttle.read_bps_device",
                    "blkio.throttle.write_bps_device",
                    "blkio.throttle.read_iops_device",
                    "blkio.throttle.write_iops_device",
                ] {
                    for dev in devices(file) {
                        let _ = tree.write(&dir.join(file), &format!("{dev} 0"));
                    }
                }
            }
            CgroupVersion::V2 => {
                for dev in devices("io.max") {
                    let _ = tree.write(
                        &dir.join("io.max"),
                        &format!("{dev} rbps=max wbps=max riops=max wiops=max"),
                    );
                }
            }
        }
    }

    /// The freezer files of the cgroup.
    fn freezer(&self) -> Result<FreezerFiles> {
        match self.fs.version() {
            CgroupVersion::V2 => Ok(FreezerFiles::v2(&self.dirs[0].0)),
            CgroupVersion::V1 => self
                .dir_of(Controller::Freezer)
                .map(FreezerFiles::v1)
                .ok_or_else(|| anyhow!("the tenant has no freezer cgroup")),
        }
    }

    /// The tasks of the cgroup with their states (read from `/proc` on the kernel's tree).
    fn task_states(&self, f: &FreezerFiles) -> Vec<TaskState> {
        let tree = self.fs.tree();
        let text = tree.read(&f.threads).unwrap_or_default();
        text.split_whitespace()
            .filter_map(|t| t.parse::<i32>().ok())
            .map(|tid| {
                let st = tree.is_real().then(|| procs::task_state(tid)).flatten();
                TaskState {
                    tid,
                    comm: st.as_ref().map(|s| s.0.clone()).unwrap_or_default(),
                    state: st.map(|s| s.1),
                }
            })
            .collect()
    }

    /// Freezes (`true`) or thaws (`false`) every task of the cgroup and waits up to `timeout`
    /// (callers pass [`FREEZE_TIMEOUT`]) until the kernel reports the new state, writing the
    /// freeze again while it is unfinished (see [`FREEZE_RETRY`]).
    ///
    /// A freeze that times out is undone (the cgroup is thawed again, so no task stays frozen
    /// or half-frozen) and fails with how long it waited and which tasks were not frozen.
    pub fn set_frozen(&self, frozen: bool, timeout: Duration) -> Result<()> {
        let tree = self.fs.tree();
        let f = self.freezer()?;
        let done = switch_freezer(tree.as_ref(), &f, frozen, timeout, FREEZE_RETRY)
            .with_context(|| format!("writing {} to {}", f.request(frozen), f.control.display()))?;
        if done.reached {
            return Ok(());
        }
        let mut msg =
            format!(
            "{} did not reach `{}` in {} ms (limit {} ms; last state `{}`; requested {} times, \
             read {} times)",
            f.state.display(),
            f.reached(frozen),
            done.elapsed.as_millis(),
            timeout.as_millis(),
            done.last.as_deref().unwrap_or("unreadable").replace('\n', " "),
            done.writes,
            done.reads,
        );
        if frozen {
            msg.push_str(&format!("; {}", describe_unfrozen(&self.task_states(&f))));
            match tree.write(&f.control, f.request(false)) {
                Ok(()) => msg.push_str("; the cgroup was thawed again"),
                Err(e) => msg.push_str(&format!("; thawing it again failed too: {e}")),
            }
        }
        Err(anyhow!(msg))
    }

    /// Stops every process of the cgroup: freeze (so a fork bomb cannot outrun the kill),
    /// SIGKILL each task, thaw, and wait until the cgroup is empty. Uses `cgroup.kill` where
    /// the kernel has it. Returns the processes that were signalled.
    pub fn kill_all(&self, timeout: Duration) -> Result<Vec<i32>> {
        let tree = self.fs.tree();
        let real = tree.is_real();
        let mut killed: BTreeSet<i32> = BTreeSet::new();
        self.lift_io_limits();
        let kill_list = |pids: Vec<i32>, killed: &mut BTreeSet<i32>| {
            if real {
                for p in pids {
                    if procs::kill9(p) {
                        killed.insert(p);
                    }
                }
            }
        };
        match self.fs.version() {
            CgroupVersion::V2 => {
                let dir = &self.dirs[0].0;
                if !tree.exists(dir) {
                    return Ok(Vec::new());
                }
                let kill = dir.join("cgroup.kill");
                let before = self.procs();
                if tree.exists(&kill) && tree.write(&kill, "1").is_ok() {
                    killed.extend(before);
                } else if tree.exists(&dir.join("cgroup.freeze")) {
                    let f = FreezerFiles::v2(dir);
                    let _ = switch_freezer(tree.as_ref(), &f, true, KILL_FREEZE_WAIT, FREEZE_RETRY);
                    kill_list(self.procs(), &mut killed);
                    let _ = tree.write(&f.control, f.request(false));
                }
            }
            CgroupVersion::V1 => {
                if let Some(dir) = self.dir_of(Controller::Freezer) {
                    if tree.exists(dir) {
                        let f = FreezerFiles::v1(dir);
                        let _ =
                            switch_freezer(tree.as_ref(), &f, true, KILL_FREEZE_WAIT, FREEZE_RETRY);
                        kill_list(self.procs(), &mut killed);
                        let _ = tree.write(&f.control, f.request(false));
                    }
                }
            }
        }
        if !real {
            return Ok(killed.into_iter().collect());
        }
        let end = Instant::now() + timeout;
        loop {
            let left = self.procs();
            if left.is_empty() {
                return Ok(killed.into_iter().collect());
            }
            if Instant::now() >= end {
                bail!(
                    "{} processes still in cgroup {} after {:?} (pids {:?})",
                    left.len(),
                    self.name,
                    timeout,
                    &left[..left.len().min(8)]
                );
            }
            kill_list(left, &mut killed);
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Removes the cgroup directories (and any child cgroups), retrying while exiting tasks
    /// still hold them. The cgroup must be empty; see [`TenantCgroup::kill_all`].
    pub fn remove(&self, timeout: Duration) -> Result<()> {
        let mut first_err = None;
        for (d, _) in &self.dirs {
            if let Err(e) = remove_tree(self.fs.tree().as_ref(), d, timeout) {
                first_err.get_or_insert(e);
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Whether any directory of the cgroup still exists.
    pub fn exists_any(&self) -> bool {
        self.dirs.iter().any(|(d, _)| self.fs.tree().exists(d))
    }

    /// The cgroup's usage counters, as far as the controllers offer them.
    pub fn usage(&self) -> Usage {
        match self.fs.version() {
            CgroupVersion::V1 => self.usage_v1(),
            CgroupVersion::V2 => self.usage_v2(),
        }
    }

    fn usage_v1(&self) -> Usage {
        let mut u = Usage::default();
        let num = |c, f| self.read(c, f).and_then(|t| t.trim().parse::<u64>().ok());
        u.cpu_time_ns = num(Controller::Cpuacct, "cpuacct.usage");
        if let Some(t) = self.read(Controller::Cpuacct, "cpuacct.stat") {
            let tick_ns = 1_000_000_000 / clock_ticks();
            u.cpu_user_ns = keyed(&t, "user").map(|v| v * tick_ns);
            u.cpu_system_ns = keyed(&t, "system").map(|v| v * tick_ns);
        }
        if let Some(t) = self.read(Controller::Cpu, "cpu.stat") {
            u.cpu_periods = keyed(&t, "nr_periods");
            u.cpu_throttled_periods = keyed(&t, "nr_throttled");
            u.cpu_throttled_ns = keyed(&t, "throttled_time");
        }
        u.memory_current = num(Controller::Memory, "memory.usage_in_bytes");
        u.memory_peak = num(Controller::Memory, "memory.max_usage_in_bytes");
        if let Some(t) = self.read(Controller::Memory, "memory.oom_control") {
            u.oom_kills = keyed(&t, "oom_kill");
        }
        u.pids_current = num(Controller::Pids, "pids.current");
        if let Some(t) = self.read(Controller::Pids, "pids.events") {
            u.pids_limit_hits = keyed(&t, "max");
        }
        if let Some(t) = self.read(Controller::Io, "blkio.throttle.io_service_bytes") {
            u.io_read_bytes = Some(blkio_sum(&t, "Read"));
            u.io_write_bytes = Some(blkio_sum(&t, "Write"));
        }
        if let Some(t) = self.read(Controller::Io, "blkio.throttle.io_serviced") {
            u.io_read_ops = Some(blkio_sum(&t, "Read"));
            u.io_write_ops = Some(blkio_sum(&t, "Write"));
        }
        u
    }

    fn usage_v2(&self) -> Usage {
        let mut u = Usage::default();
        let num = |c, f| self.read(c, f).and_then(|t| t.trim().parse::<u64>().ok());
        if let Some(t) = self.read(Controller::Cpuacct, "cpu.stat") {
            let us = |k| keyed(&t, k).map(|v| v * 1000);
            u.cpu_time_ns = us("usage_usec");
            u.cpu_user_ns = us("user_usec");
            u.cpu_system_ns = us("system_usec");
            u.cpu_periods = keyed(&t, "nr_periods");
            u.cpu_throttled_periods = keyed(&t, "nr_throttled");
            u.cpu_throttled_ns = us("throttled_usec");
        }
        u.memory_current = num(Controller::Memory, "memory.current");
        u.memory_peak = num(Controller::Memory, "memory.peak");
        if let Some(t) = self.read(Controller::Memory, "memory.events") {
            u.oom_kills = keyed(&t, "oom_kill");
        }
        u.pids_current = num(Controller::Pids, "pids.current");
        if let Some(t) = self.read(Controller::Pids, "pids.events") {
            u.pids_limit_hits = keyed(&t, "max");
        }
        if let Some(t) = self.read(Controller::Io, "io.stat") {
            let sum = |k: &str| -> u64 {
                t.lines()
                    .flat_map(|l| l.split_whitespace().skip(1))
                    .filter_map(|kv| kv.split_once('='))
                    .filter(|(key, _)| *key == k)
                    .filter_map(|(_, v)| v.parse::<u64>().ok())
                    .sum()
            };
            u.io_read_bytes = Some(sum("rbytes"));
            u.io_write_bytes = Some(sum("wbytes"));
            u.io_read_ops = Some(sum("rios"));
            u.io_write_ops = Some(sum("wios"));
        }
        u.pressure = self.pressure_v2();
        u
    }

    /// v2: the cgroup's pressure-stall counters. `cpu.pressure`, `memory.pressure` and
    /// `io.pressure` are core files of every cgroup on a kernel with PSI, whatever
    /// controllers are enabled; a file missing or refused stays `None`.
    fn pressure_v2(&self) -> Pressure {
        let Some((dir, _)) = self.dirs.first() else {
            return Pressure::default();
        };
        let tree = self.fs.tree();
        Pressure::read_with(|r| tree.read(&dir.join(format!("{r}.pressure"))).ok())
    }

    /// Reads the limits back from the cgroup files, as the kernel holds them. Values at
    /// their "unlimited" setting read back as `None`; the CPU weight and (v1) the cpuset
    /// always read back. `device` selects the io throttle line.
    pub fn read_limits(&self, device: Option<DevNum>) -> Result<Limits> {
        let mut l = Limits::default();
        let need = |c: Controller, f: &str| -> Result<Option<String>> {
            if self.dir_of(c).is_none() {
                return Ok(None);
            }
            let path = self.file(c, f)?;
            self.fs
                .tree()
                .read(&path)
                .map(|t| Some(t.trim().to_string()))
                .map_err(|e| io_err(e, format!("reading {}", path.display())))
        };
        let list = |s: Option<String>| -> Result<Option<CpuList>> {
            match s {
                Some(s) if !s.is_empty() => Ok(Some(
                    CpuList::parse(&s).map_err(|e| anyhow!("bad cpu list `{s}`: {e}"))?,
                )),
                _ => Ok(None),
            }
        };
        let int = |s: &str| -> Result<u64> {
            s.parse::<u64>()
                .map_err(|_| anyhow!("`{s}` is not a number"))
        };
        match self.fs.version() {
            CgroupVersion::V1 => {
                if let (Some(q), Some(p)) = (
                    need(Controller::Cpu, "cpu.cfs_quota_us")?,
                    need(Controller::Cpu, "cpu.cfs_period_us")?,
                ) {
                    if q != "-1" {
                        l.cpus = Some(int(&q)? as f64 / int(&p)? as f64);
                    }
                }
                if let Some(s) = need(Controller::Cpu, "cpu.shares")? {
                    l.cpu_weight = Some(CpuWeight::Shares(int(&s)?));
                }
                l.cpuset = list(need(Controller::Cpuset, "cpuset.cpus")?)?;
                l.mems = list(need(Controller::Cpuset, "cpuset.mems")?)?;
                if let Some(m) = need(Controller::Memory, "memory.limit_in_bytes")? {
                    let m = int(&m)?;
                    l.memory = (m < V1_UNLIMITED).then_some(m);
                }
                if let Some(p) = need(Controller::Pids, "pids.max")? {
                    l.pids = if p == "max" { None } else { Some(int(&p)?) };
                }
                if let Some(dev) = device {
                    let get = |file: &str| -> Result<Option<u64>> {
                        Ok(need(Controller::Io, file)?.and_then(|t| {
                            t.lines().find_map(|line| {
                                let (d, v) = line.split_once(' ')?;
                                // The kernel drops a line set to 0 (no throttle).
                                (d == dev.to_string())
                                    .then(|| v.trim().parse().ok().filter(|v: &u64| *v > 0))?
                            })
                        }))
                    };
                    l.io_read_bps = get("blkio.throttle.read_bps_device")?;
                    l.io_write_bps = get("blkio.throttle.write_bps_device")?;
                    l.io_read_iops = get("blkio.throttle.read_iops_device")?;
                    l.io_write_iops = get("blkio.throttle.write_iops_device")?;
                }
                self.read_knobs_v1(&mut l)?;
            }
            CgroupVersion::V2 => {
                if let Some(m) = need(Controller::Cpu, "cpu.max")? {
                    let mut it = m.split_whitespace();
                    match (it.next(), it.next()) {
                        (Some("max"), _) | (None, _) => {}
                        (Some(q), Some(p)) => l.cpus = Some(int(q)? as f64 / int(p)? as f64),
                        (Some(q), None) => l.cpus = Some(int(q)? as f64 / CPU_PERIOD_US as f64),
                    }
                }
                if let Some(w) = need(Controller::Cpu, "cpu.weight")? {
                    l.cpu_weight = Some(CpuWeight::Weight(int(&w)?));
                }
                l.cpuset = list(need(Controller::Cpuset, "cpuset.cpus")?)?;
                l.mems = list(need(Controller::Cpuset, "cpuset.mems")?)?;
                if let Some(m) = need(Controller::Memory, "memory.max")? {
                    l.memory = if m == "max" { None } else { Some(int(&m)?) };
                }
                if let Some(p) = need(Controller::Pids, "pids.max")? {
                    l.pids = if p == "max" { None } else { Some(int(&p)?) };
                }
                if let (Some(dev), Some(t)) = (device, need(Controller::Io, "io.max")?) {
                    let want = dev.to_string();
                    if let Some(line) = t
                        .lines()
                        .find(|line| line.split_whitespace().next() == Some(want.as_str()))
                    {
                        for kv in line.split_whitespace().skip(1) {
                            let Some((k, v)) = kv.split_once('=') else {
                                continue;
                            };
                            let v = if v == "max" { None } else { Some(int(v)?) };
                            match k {
                                "rbps" => l.io_read_bps = v,
                                "wbps" => l.io_write_bps = v,
                                "riops" => l.io_read_iops = v,
                                "wiops" => l.io_write_iops = v,
                                _ => {}
                            }
                        }
                    }
                }
                self.read_knobs_v2(&mut l, device)?;
            }
        }
        Ok(l)
    }
}

/// Cgroups made by someone else (a container engine), adopted by process: isobench reads
/// their limits and usage, freezes them and kills inside them, but never creates or removes
/// them.
impl TenantCgroup {
    /// The cgroups of process `pid`, from `/proc/<pid>/cgroup`, in each hierarchy of `fs`.
    pub fn of_process(fs: &CgroupFs, pid: i32) -> Result<TenantCgroup> {
        let file = format!("/proc/{pid}/cgroup");
        let cgroups = procfs::process::Process::new(pid)
            .and_then(|p| p.cgroups())
            .with_context(|| format!("reading {file}"))?;
        TenantCgroup::from_process_cgroups(fs, &cgroups)
            .with_context(|| format!("finding the cgroups of process {pid} in {file}"))
    }

    /// The cgroups listed in the text of a `/proc/<pid>/cgroup` file (`id:controllers:path`
    /// lines; `0::path` for v2), relative to each hierarchy's root of `fs`.
    pub fn from_proc_cgroup(fs: &CgroupFs, text: &str) -> Result<TenantCgroup> {
        use procfs::FromBufRead;
        let cgroups = procfs::ProcessCGroups::from_buf_read(text.as_bytes())
            .context("parsing a /proc/<pid>/cgroup text")?;
        TenantCgroup::from_process_cgroups(fs, &cgroups)
    }

    /// The cgroups a process is in (procfs's reading of its `/proc/<pid>/cgroup`), relative
    /// to each hierarchy's root of `fs`.
    fn from_process_cgroups(
        fs: &CgroupFs,
        cgroups: &procfs::ProcessCGroups,
    ) -> Result<TenantCgroup> {
        let lines: Vec<(Vec<&str>, &str)> = cgroups
            .0
            .iter()
            .map(|c| {
                (
                    c.controllers.iter().map(String::as_str).collect(),
                    c.pathname.as_str(),
                )
            })
            .collect();
        let mut dirs = Vec::new();
        for h in fs.hierarchies() {
            let path = match fs.version() {
                CgroupVersion::V2 => lines.iter().find(|(c, _)| c.is_empty()).map(|(_, p)| *p),
                CgroupVersion::V1 => lines
                    .iter()
                    .find(|(c, _)| h.controllers.iter().any(|hc| c.contains(&hc.v1_name())))
                    .map(|(_, p)| *p),
            };
            let Some(path) = path else {
                bail!("no line for the hierarchy at {}", h.root.display());
            };
            let rel = path.trim_start_matches('/');
            if rel.is_empty() {
                bail!(
                    "the process is in the root cgroup of {}, not in a cgroup of its own",
                    h.root.display()
                );
            }
            dirs.push((h.root.join(rel), h.controllers.clone()));
        }
        let name = dirs
            .first()
            .and_then(|(d, _)| d.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(TenantCgroup {
            fs: fs.clone(),
            name,
            dirs,
        })
    }

    /// Kills every task of the cgroup except those in `keep` (the container's init, which
    /// the engine owns): freeze, SIGKILL, thaw, then wait up to `timeout` until only `keep`
    /// is left. The limits stay as they are. Returns the processes that were signalled.
    pub fn kill_all_except(&self, keep: &[i32], timeout: Duration) -> Result<Vec<i32>> {
        let tree = self.fs.tree();
        if !tree.is_real() {
            return Ok(Vec::new());
        }
        let others = || -> Vec<i32> {
            self.procs()
                .into_iter()
                .filter(|p| !keep.contains(p))
                .collect()
        };
        let mut killed: BTreeSet<i32> = BTreeSet::new();
        let freezer = self.freezer().ok();
        if let Some(f) = &freezer {
            let _ = switch_freezer(tree.as_ref(), f, true, KILL_FREEZE_WAIT, FREEZE_RETRY);
        }
        for p in others() {
            if procs::kill9(p) {
                killed.insert(p);
            }
        }
        if let Some(f) = &freezer {
            if tree.exists(&f.control) {
                let _ = tree.write(&f.control, f.request(false));
            }
        }
        let end = Instant::now() + timeout;
        loop {
            let left = others();
            if left.is_empty() {
                return Ok(killed.into_iter().collect());
            }
            if Instant::now() >= end {
                bail!(
                    "{} processes still in cgroup {} after {:?} (pids {:?})",
                    left.len(),
                    self.name,
                    timeout,
                    &left[..left.len().min(8)]
                );
            }
            for p in left {
                if procs::kill9(p) {
                    killed.insert(p);
                }
            }
            thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Removes a cgroup directory and its child cgroups, deepest first, retrying on EBUSY.
pub(crate) fn remove_tree(
    tree: &dyn super::CgroupTree,
    dir: &Path,
    timeout: Duration,
) -> Result<()> {
    if !tree.exists(dir) {
        return Ok(());
    }
    if tree.is_real() {
        for child in tree.children(dir).unwrap_or_default() {
            remove_tree(tree, &dir.join(child), timeout)?;
        }
    }
    let end = Instant::now() + timeout;
    loop {
        match tree.rmdir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < end => {
                thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(io_err(e, format!("removing cgroup {}", dir.display()))),
        }
    }
}

/// The v1 files of the basic limits with their values, in the order they are written:
/// `cpu.cfs_period_us` and `cpu.cfs_quota_us`, `cpu.shares`, `memory.limit_in_bytes`,
/// `pids.max`, and the blkio throttles of the device `dev` (`MAJ:MIN`; none without one).
/// The cpuset lists and `memory.memsw.limit_in_bytes` depend on the tree and are not here.
pub(crate) fn v1_limit_files(
    l: &Limits,
    dev: Option<&str>,
) -> Vec<(Controller, &'static str, String)> {
    let mut f = Vec::new();
    if let Some(cpus) = l.cpus {
        f.push((
            Controller::Cpu,
            "cpu.cfs_period_us",
            CPU_PERIOD_US.to_string(),
        ));
        f.push((
            Controller::Cpu,
            "cpu.cfs_quota_us",
            quota_us(cpus).to_string(),
        ));
    }
    if let Some(w) = l.cpu_weight {
        f.push((Controller::Cpu, "cpu.shares", w.as_shares().to_string()));
    }
    if let Some(m) = l.memory {
        f.push((Controller::Memory, "memory.limit_in_bytes", m.to_string()));
    }
    if let Some(p) = l.pids {
        f.push((Controller::Pids, "pids.max", p.to_string()));
    }
    if let Some(dev) = dev {
        for (file, v) in [
            ("blkio.throttle.read_bps_device", l.io_read_bps),
            ("blkio.throttle.write_bps_device", l.io_write_bps),
            ("blkio.throttle.read_iops_device", l.io_read_iops),
            ("blkio.throttle.write_iops_device", l.io_write_iops),
        ] {
            if let Some(v) = v {
                f.push((Controller::Io, file, format!("{dev} {v}")));
            }
        }
    }
    f
}

/// The v2 files of the basic limits with their values, in the order they are written:
/// `cpu.max`, `cpu.weight`, `cpuset.cpus`, `cpuset.mems`, `memory.max`, `pids.max`, and
/// `io.max` of the device `dev` (`MAJ:MIN`; none without one). Turning swap off beside
/// `memory` depends on the kernel and is not here.
pub(crate) fn v2_limit_files(
    l: &Limits,
    dev: Option<&str>,
) -> Vec<(Controller, &'static str, String)> {
    let mut f = Vec::new();
    if let Some(cpus) = l.cpus {
        f.push((
            Controller::Cpu,
            "cpu.max",
            format!("{} {CPU_PERIOD_US}", quota_us(cpus)),
        ));
    }
    if let Some(w) = l.cpu_weight {
        f.push((Controller::Cpu, "cpu.weight", w.as_weight().to_string()));
    }
    if let Some(s) = &l.cpuset {
        f.push((Controller::Cpuset, "cpuset.cpus", s.to_string()));
    }
    if let Some(s) = &l.mems {
        f.push((Controller::Cpuset, "cpuset.mems", s.to_string()));
    }
    if let Some(m) = l.memory {
        f.push((Controller::Memory, "memory.max", m.to_string()));
    }
    if let Some(p) = l.pids {
        f.push((Controller::Pids, "pids.max", p.to_string()));
    }
    if let Some(dev) = dev {
        let mut line = dev.to_string();
        for (k, v) in [
            ("rbps", l.io_read_bps),
            ("wbps", l.io_write_bps),
            ("riops", l.io_read_iops),
            ("wiops", l.io_write_iops),
        ] {
            if let Some(v) = v {
                line.push_str(&format!(" {k}={v}"));
            }
        }
        if line.contains('=') {
            f.push((Controller::Io, "io.max", line));
        }
    }
    f
}

fn quota_us(cpus: f64) -> u64 {
    ((cpus * CPU_PERIOD_US as f64).round() as u64).max(1000)
}

/// Sum of the `op` column over devices of a v1 blkio stat file (`8:0 Read 4096`).
fn blkio_sum(text: &str, op: &str) -> u64 {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && f[1] == op).then(|| f[2].parse::<u64>().ok())?
        })
        .sum()
}

fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::super::{FakeTree, Hierarchy};
    use super::*;

    /// A fake v1 tree whose freezer stays `FREEZING` until the freeze has been written
    /// `writes_needed` times, as when the first request misses a task; `u32::MAX` never
    /// freezes (a task the freezer cannot reach).
    #[derive(Debug)]
    struct SlowFreezer {
        inner: FakeTree,
        writes_needed: u32,
        written: Mutex<Vec<String>>,
    }

    impl SlowFreezer {
        fn cgroup(dir: &Path, writes_needed: u32) -> (Arc<SlowFreezer>, TenantCgroup) {
            let tree = Arc::new(SlowFreezer {
                inner: FakeTree::new(CgroupVersion::V1),
                writes_needed,
                written: Mutex::new(Vec::new()),
            });
            let mut hierarchies = Vec::new();
            for c in Controller::ALL {
                let root = dir.join(c.v1_name());
                tree.inner.populate_root(&root, &[]).unwrap();
                hierarchies.push(Hierarchy {
                    root,
                    controllers: vec![c],
                });
            }
            let fs = CgroupFs::v1(hierarchies, tree.clone());
            let cg = TenantCgroup::create(&fs, "t", &Limits::default(), None).unwrap();
            (tree, cg)
        }

        fn written(&self) -> Vec<String> {
            self.written.lock().unwrap().clone()
        }
    }

    impl CgroupTree for SlowFreezer {
        fn mkdir(&self, dir: &Path) -> io::Result<()> {
            self.inner.mkdir(dir)
        }
        fn rmdir(&self, dir: &Path) -> io::Result<()> {
            self.inner.rmdir(dir)
        }
        fn write(&self, file: &Path, value: &str) -> io::Result<()> {
            if file.ends_with("freezer.state") {
                self.written.lock().unwrap().push(value.to_string());
            }
            self.inner.write(file, value)
        }
        fn read(&self, file: &Path) -> io::Result<String> {
            if !file.ends_with("freezer.state") {
                return self.inner.read(file);
            }
            let w = self.written.lock().unwrap();
            let since_thaw = w.iter().rev().take_while(|v| *v != "THAWED").count();
            Ok(match (w.last().map(String::as_str), since_thaw) {
                (None | Some("THAWED"), _) => "THAWED\n",
                (_, n) if n as u64 >= u64::from(self.writes_needed) => "FROZEN\n",
                _ => "FREEZING\n",
            }
            .to_string())
        }
        fn open_procs(&self, dir: &Path) -> io::Result<OwnedFd> {
            self.inner.open_procs(dir)
        }
        fn is_real(&self) -> bool {
            false
        }
    }

    #[test]
    fn a_freeze_left_freezing_is_requested_again_until_frozen() {
        // The bug: FROZEN was written once, so a task the first request missed kept the
        // cgroup FREEZING until the timeout failed the trial.
        let dir = tempfile::tempdir().unwrap();
        let (tree, cg) = SlowFreezer::cgroup(dir.path(), 3);
        cg.set_frozen(true, FREEZE_TIMEOUT).unwrap();
        assert_eq!(tree.written(), ["FROZEN"; 3]);
        cg.set_frozen(false, FREEZE_TIMEOUT).unwrap();
        assert_eq!(tree.written().last().map(String::as_str), Some("THAWED"));
    }

    #[test]
    fn a_freeze_that_times_out_is_undone_and_says_how_long_and_which_tasks() {
        let dir = tempfile::tempdir().unwrap();
        let (tree, cg) = SlowFreezer::cgroup(dir.path(), u32::MAX);
        let tasks = cg.dir_of(Controller::Freezer).unwrap().join("tasks");
        fs_write(&tasks, "4242\n4243\n");
        let e = cg
            .set_frozen(true, Duration::from_millis(300))
            .unwrap_err()
            .to_string();
        assert!(e.contains("did not reach `FROZEN` in 3"), "{e}");
        assert!(e.contains("limit 300 ms"), "{e}");
        assert!(e.contains("last state `FREEZING`"), "{e}");
        assert!(
            e.contains("2 tasks listed") && e.contains("4242, 4243"),
            "{e}"
        );
        assert!(e.ends_with("the cgroup was thawed again"), "{e}");
        let w = tree.written();
        assert!(
            w.len() >= 3,
            "the freeze is written again while it waits: {w:?}"
        );
        assert_eq!(w.last().map(String::as_str), Some("THAWED"), "{w:?}");
        let state = cg
            .dir_of(Controller::Freezer)
            .unwrap()
            .join("freezer.state");
        assert_eq!(tree.read(&state).unwrap().trim(), "THAWED");
    }

    fn fs_write(path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn a_thaw_is_not_written_again() {
        let dir = tempfile::tempdir().unwrap();
        let (tree, cg) = SlowFreezer::cgroup(dir.path(), 1);
        cg.set_frozen(true, FREEZE_TIMEOUT).unwrap();
        cg.set_frozen(false, FREEZE_TIMEOUT).unwrap();
        assert_eq!(tree.written(), ["FROZEN", "THAWED"]);
    }

    #[test]
    fn the_fake_v2_tree_freezes_and_thaws() {
        let dir = tempfile::tempdir().unwrap();
        let fs = CgroupFs::fake_v2(dir.path()).unwrap();
        let cg = TenantCgroup::create(&fs, "t", &Limits::default(), None).unwrap();
        let events = dir.path().join("t/cgroup.events");
        cg.set_frozen(true, FREEZE_TIMEOUT).unwrap();
        let text = std::fs::read_to_string(&events).unwrap();
        assert!(
            text.contains("frozen 1") && text.contains("populated 0"),
            "{text}"
        );
        cg.set_frozen(false, FREEZE_TIMEOUT).unwrap();
        assert!(std::fs::read_to_string(&events)
            .unwrap()
            .contains("frozen 0"));
    }

    #[test]
    fn unfrozen_tasks_are_counted_by_state_and_named() {
        let t = |tid, comm: &str, state| TaskState {
            tid,
            comm: comm.to_string(),
            state,
        };
        let mut tasks = vec![
            t(10, "bomb", Some('D')),
            t(11, "bomb", Some('R')),
            t(12, "cpu", Some('R')),
            t(13, "agent", Some('S')),
            t(14, "gone", None),
        ];
        assert_eq!(
            describe_unfrozen(&tasks),
            "3 of 4 tasks not frozen (by /proc/PID/stat state: R 2, S 1): 11 bomb R, 12 cpu R, \
             13 agent S"
        );
        tasks.retain(|t| t.state == Some('D'));
        assert!(describe_unfrozen(&tasks).starts_with("all 1 tasks report state D"));
        for i in 0..10 {
            tasks.push(t(20 + i, "bomb", Some('R')));
        }
        let d = describe_unfrozen(&tasks);
        assert!(
            d.starts_with("10 of 11 tasks not frozen") && d.ends_with("27 bomb R, ..."),
            "{d}"
        );
        assert_eq!(describe_unfrozen(&[]), "the cgroup lists no task");
    }

    #[test]
    fn blkio_parser() {
        let t = "254:0 Read 4096\n254:0 Write 8192\n254:0 Sync 0\n8:0 Read 1\nTotal 12289\n";
        assert_eq!(blkio_sum(t, "Read"), 4097);
        assert_eq!(blkio_sum(t, "Write"), 8192);
    }

    #[test]
    fn quota_rounds_and_has_a_floor() {
        assert_eq!(quota_us(1.5), 150_000);
        assert_eq!(quota_us(0.001), 1000);
    }
    #[test]
    fn cgroups_of_a_process_are_adopted_per_hierarchy() {
        let dir = tempfile::tempdir().unwrap();
        let fs = CgroupFs::fake_v1(dir.path()).unwrap();
        let text = "12:pids:/docker/abc\n4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n\
                    3:cpuset:/docker/abc\n5:blkio:/docker/abc\n6:freezer:/docker/abc\n\
                    1:name=systemd:/docker/abc\n0::/\n";
        let cg = TenantCgroup::from_proc_cgroup(&fs, text).unwrap();
        assert_eq!(cg.name(), "abc");
        let mem = cg.dir_of(Controller::Memory).unwrap();
        assert!(mem.ends_with("memory/docker/abc"), "{}", mem.display());
        assert_eq!(cg.dirs().len(), fs.hierarchies().len());
        let e = TenantCgroup::from_proc_cgroup(&fs, "4:memory:/\n").unwrap_err();
        assert!(format!("{e:#}").contains("no line") || format!("{e:#}").contains("root cgroup"));
    }
}
