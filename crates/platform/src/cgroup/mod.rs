//! A thin layer over cgroupfs, v1 and v2, detected at run time.
//!
//! Everything goes through a [`CgroupTree`] (mkdir, rmdir, read, write on cgroup files) and
//! a [`CgroupFs`] saying where each controller lives. The real tree writes to the kernel's
//! files; [`FakeTree`] emulates the few kernel behaviours isobench relies on (default files
//! in a new cgroup, `cgroup.subtree_control` merging) in a temporary directory, so the v2 code
//! is tested on hosts that only have v1.

pub mod cpu;
pub(crate) mod group;
pub mod placement;

pub(crate) use group::remove_tree;
pub use group::{TenantCgroup, FREEZE_TIMEOUT};

use std::collections::BTreeSet;
use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use serde::Serialize;

/// Which cgroup interface the host offers for resource control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    /// One hierarchy per controller (or group of controllers).
    V1,
    /// The unified hierarchy.
    V2,
}

impl fmt::Display for CgroupVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CgroupVersion::V1 => "v1",
            CgroupVersion::V2 => "v2",
        })
    }
}

/// The resource controllers isobench uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Controller {
    /// CPU quota and weight.
    Cpu,
    /// CPU time accounting (v1 only; part of the core in v2).
    Cpuacct,
    /// CPU and memory node placement.
    Cpuset,
    /// Memory limit and accounting.
    Memory,
    /// Block I/O throttling (`blkio` in v1, `io` in v2).
    Io,
    /// Process count limit.
    Pids,
    /// Freezing tasks (v1 only; part of the core in v2).
    Freezer,
}

impl Controller {
    /// Every controller isobench uses.
    pub const ALL: [Controller; 7] = [
        Controller::Cpu,
        Controller::Cpuacct,
        Controller::Cpuset,
        Controller::Memory,
        Controller::Io,
        Controller::Pids,
        Controller::Freezer,
    ];

    /// The controller's name in v1 mount options.
    pub fn v1_name(self) -> &'static str {
        match self {
            Controller::Cpu => "cpu",
            Controller::Cpuacct => "cpuacct",
            Controller::Cpuset => "cpuset",
            Controller::Memory => "memory",
            Controller::Io => "blkio",
            Controller::Pids => "pids",
            Controller::Freezer => "freezer",
        }
    }

    /// The controller's name in v2 `cgroup.controllers`; `None` for features of the v2 core.
    pub fn v2_name(self) -> Option<&'static str> {
        match self {
            Controller::Cpu => Some("cpu"),
            Controller::Cpuset => Some("cpuset"),
            Controller::Memory => Some("memory"),
            Controller::Io => Some("io"),
            Controller::Pids => Some("pids"),
            Controller::Cpuacct | Controller::Freezer => None,
        }
    }

    fn from_v1(name: &str) -> Option<Controller> {
        Controller::ALL.into_iter().find(|c| c.v1_name() == name)
    }
}

impl fmt::Display for Controller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.v1_name())
    }
}

/// File operations on a cgroup tree: the kernel's, or a fake one for tests.
pub trait CgroupTree: Send + Sync + fmt::Debug {
    /// Creates a cgroup directory.
    fn mkdir(&self, dir: &Path) -> io::Result<()>;
    /// Removes an (empty of tasks) cgroup directory.
    fn rmdir(&self, dir: &Path) -> io::Result<()>;
    /// Writes `value` to a cgroup file in one write.
    fn write(&self, file: &Path, value: &str) -> io::Result<()>;
    /// Reads a cgroup file.
    fn read(&self, file: &Path) -> io::Result<String>;
    /// Opens a cgroup's `cgroup.procs` for writing, to join it from a child before exec.
    fn open_procs(&self, dir: &Path) -> io::Result<OwnedFd>;
    /// Whether the tree is the kernel's: only then are the pids it lists real processes to
    /// signal.
    fn is_real(&self) -> bool;
    /// Whether a file or directory exists.
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    /// Names of the child cgroups of `dir`.
    fn children(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut v = Vec::new();
        for e in fs::read_dir(dir)? {
            let e = e?;
            if e.file_type()?.is_dir() {
                v.push(e.file_name().to_string_lossy().into_owned());
            }
        }
        v.sort();
        Ok(v)
    }
}

/// The kernel's cgroupfs.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealTree;

impl CgroupTree for RealTree {
    fn mkdir(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir(dir)
    }
    fn rmdir(&self, dir: &Path) -> io::Result<()> {
        fs::remove_dir(dir)
    }
    fn write(&self, file: &Path, value: &str) -> io::Result<()> {
        // No O_CREAT: a missing file means a missing controller, not something to create.
        let mut f = OpenOptions::new().write(true).open(file)?;
        let n = f.write(value.as_bytes())?;
        if n != value.len() {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "short write"));
        }
        Ok(())
    }
    fn read(&self, file: &Path) -> io::Result<String> {
        fs::read_to_string(file)
    }
    fn open_procs(&self, dir: &Path) -> io::Result<OwnedFd> {
        let f = OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))?;
        Ok(f.into())
    }
    fn is_real(&self) -> bool {
        true
    }
}

/// A fake cgroup tree in an ordinary directory, for tests.
///
/// A new cgroup gets the default files of the version (`cgroup.procs`, `memory.max` = `max`,
/// `memory.events`, `cpu.stat`, ...); writes create or replace files; writes to
/// `cgroup.subtree_control` merge `+ctrl`/`-ctrl` tokens as the kernel does, a child's
/// `cgroup.controllers` reads as its parent's `cgroup.subtree_control`, a pid written to
/// `cgroup.procs` is added to its list (tests empty the list they move from), and a freeze or thaw takes
/// effect at once (v1 `freezer.state` holds what was written; a v2 write to `cgroup.freeze`
/// sets `frozen` in `cgroup.events`), as for a cgroup without tasks. Tests write counters
/// (`memory.events`, `io.stat`, `cpu.pressure`, ...) directly to check what isobench reads
/// back.
#[derive(Debug, Clone, Copy)]
pub struct FakeTree {
    version: CgroupVersion,
}

const FAKE_V2_FILES: &[(&str, &str)] = &[
    ("cgroup.procs", ""),
    ("cgroup.subtree_control", ""),
    ("cgroup.events", "populated 0\nfrozen 0\n"),
    ("cgroup.freeze", "0\n"),
    ("cgroup.kill", ""),
    ("cgroup.type", "domain\n"),
    ("cpu.max", "max 100000\n"),
    ("cpu.max.burst", "0\n"),
    ("cpu.weight", "100\n"),
    (
        "cpu.stat",
        "usage_usec 0\nuser_usec 0\nsystem_usec 0\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
    ),
    ("cpuset.cpus", "\n"),
    ("cpuset.mems", "\n"),
    ("cpuset.cpus.partition", "member\n"),
    ("memory.min", "0\n"),
    ("memory.low", "0\n"),
    ("memory.high", "max\n"),
    ("memory.max", "max\n"),
    ("memory.swap.max", "max\n"),
    ("memory.current", "0\n"),
    ("memory.peak", "0\n"),
    ("memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n"),
    ("pids.max", "max\n"),
    ("pids.current", "0\n"),
    ("pids.events", "max 0\n"),
    ("io.max", ""),
    ("io.weight", "default 100\n"),
    ("io.stat", ""),
    (
        "cpu.pressure",
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
    ),
    (
        "memory.pressure",
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
    ),
    (
        "io.pressure",
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
    ),
];

/// Files of v2 controllers a kernel may be built without (`io.latency`: Debian's kernels
/// lack CONFIG_BLK_CGROUP_IOLATENCY): a new cgroup of the fake tree has one when its parent
/// has it, so a test gives the kernel the feature by writing the file into the root.
const FAKE_V2_OPTIONAL_FILES: &[(&str, &str)] =
    &[("io.latency", ""), ("io.bfq.weight", "default 100\n")];

/// Files whose lines are keyed by their first word (a device, or `default`): a write
/// replaces the line of its key and keeps the others, as the kernel's files do.
const FAKE_KEYED_FILES: &[&str] = &["io.weight", "io.bfq.weight", "io.latency", "io.cost.qos"];

/// Files only the v2 root cgroup has (io.cost is set for a whole device, at the root).
const FAKE_V2_ROOT_FILES: &[(&str, &str)] = &[("io.cost.qos", ""), ("io.cost.model", "")];

const FAKE_V1_FILES: &[(&str, &str)] = &[
    ("cgroup.procs", ""),
    ("tasks", ""),
    ("cpu.cfs_period_us", "100000\n"),
    ("cpu.cfs_quota_us", "-1\n"),
    ("cpu.shares", "1024\n"),
    ("cpu.cfs_burst_us", "0\n"),
    (
        "cpu.stat",
        "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n",
    ),
    ("cpuacct.usage", "0\n"),
    ("cpuacct.stat", "user 0\nsystem 0\n"),
    ("cpuset.cpus", "\n"),
    ("cpuset.mems", "\n"),
    ("memory.limit_in_bytes", "9223372036854771712\n"),
    ("memory.memsw.limit_in_bytes", "9223372036854771712\n"),
    ("memory.soft_limit_in_bytes", "9223372036854771712\n"),
    ("memory.swappiness", "60\n"),
    ("memory.usage_in_bytes", "0\n"),
    ("memory.max_usage_in_bytes", "0\n"),
    (
        "memory.oom_control",
        "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
    ),
    ("pids.max", "max\n"),
    ("pids.current", "0\n"),
    ("pids.events", "max 0\n"),
    ("blkio.throttle.read_bps_device", ""),
    ("blkio.throttle.write_bps_device", ""),
    ("blkio.throttle.read_iops_device", ""),
    ("blkio.throttle.write_iops_device", ""),
    ("blkio.throttle.io_service_bytes", "Total 0\n"),
    ("blkio.throttle.io_serviced", "Total 0\n"),
    ("blkio.bfq.weight", "100\n"),
    ("freezer.state", "THAWED\n"),
];

impl FakeTree {
    /// A fake tree of the given version.
    pub fn new(version: CgroupVersion) -> FakeTree {
        FakeTree { version }
    }

    fn defaults(&self) -> &'static [(&'static str, &'static str)] {
        match self.version {
            CgroupVersion::V1 => FAKE_V1_FILES,
            CgroupVersion::V2 => FAKE_V2_FILES,
        }
    }

    /// Fills `root` with the files of a root cgroup; for v2 `controllers` is the content of
    /// `cgroup.controllers` (e.g. `["cpu", "memory"]`).
    pub fn populate_root(&self, root: &Path, controllers: &[&str]) -> io::Result<()> {
        fs::create_dir_all(root)?;
        for (name, content) in self.defaults() {
            fs::write(root.join(name), content)?;
        }
        match self.version {
            CgroupVersion::V2 => {
                fs::write(
                    root.join("cgroup.controllers"),
                    controllers.join(" ") + "\n",
                )?;
                for (name, content) in FAKE_V2_ROOT_FILES {
                    fs::write(root.join(name), content)?;
                }
            }
            CgroupVersion::V1 => {
                fs::write(root.join("cpuset.cpus"), "0-1\n")?;
                fs::write(root.join("cpuset.mems"), "0\n")?;
            }
        }
        Ok(())
    }
}

impl CgroupTree for FakeTree {
    fn mkdir(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir(dir)?;
        for (name, content) in self.defaults() {
            fs::write(dir.join(name), content)?;
        }
        if self.version == CgroupVersion::V2 {
            let parent = dir.parent().unwrap_or(dir);
            let ctl = fs::read_to_string(parent.join("cgroup.subtree_control")).unwrap_or_default();
            fs::write(dir.join("cgroup.controllers"), ctl)?;
            for (name, content) in FAKE_V2_OPTIONAL_FILES {
                if parent.join(name).exists() {
                    fs::write(dir.join(name), content)?;
                }
            }
        }
        Ok(())
    }
    fn rmdir(&self, dir: &Path) -> io::Result<()> {
        fs::remove_dir_all(dir)
    }
    fn write(&self, file: &Path, value: &str) -> io::Result<()> {
        if file
            .file_name()
            .is_some_and(|n| n == "cgroup.subtree_control")
        {
            let dir = file.parent().unwrap_or(file);
            let avail: BTreeSet<String> = self
                .read(&dir.join("cgroup.controllers"))?
                .split_whitespace()
                .map(str::to_string)
                .collect();
            let mut on: BTreeSet<String> = fs::read_to_string(file)
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_string)
                .collect();
            for tok in value.split_whitespace() {
                let (add, name) = match tok.split_at(1) {
                    ("+", n) => (true, n),
                    ("-", n) => (false, n),
                    _ => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
                };
                if !avail.contains(name) {
                    return Err(io::Error::from_raw_os_error(libc::ENOENT));
                }
                if add {
                    on.insert(name.to_string());
                } else {
                    on.remove(name);
                }
            }
            let text = on.into_iter().collect::<Vec<_>>().join(" ") + "\n";
            return fs::write(file, text);
        }
        if file.file_name().is_some_and(|n| n == "cgroup.procs") && !value.is_empty() {
            // A process moves in: it is listed after the others.
            let mut f = OpenOptions::new().append(true).create(true).open(file)?;
            return writeln!(f, "{}", value.trim());
        }
        if file
            .file_name()
            .is_some_and(|n| FAKE_KEYED_FILES.iter().any(|k| n == *k))
        {
            let key = value.split_whitespace().next().unwrap_or_default();
            let mut lines: Vec<String> = fs::read_to_string(file)
                .unwrap_or_default()
                .lines()
                .filter(|l| l.split_whitespace().next() != Some(key))
                .map(str::to_string)
                .collect();
            lines.push(value.trim().to_string());
            return fs::write(file, lines.join("\n") + "\n");
        }
        if file.file_name().is_some_and(|n| n == "cgroup.freeze") {
            // v2: the (task-less) cgroup is frozen or thawed at once.
            let on = match value.trim() {
                "0" => "0",
                "1" => "1",
                _ => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
            };
            let events = file.with_file_name("cgroup.events");
            let text: String = fs::read_to_string(&events)
                .unwrap_or_default()
                .lines()
                .map(|l| match l.split_whitespace().next() {
                    Some("frozen") => format!("frozen {on}\n"),
                    _ => format!("{l}\n"),
                })
                .collect();
            fs::write(&events, text)?;
        }
        fs::write(file, value)
    }
    fn read(&self, file: &Path) -> io::Result<String> {
        // v2: what a cgroup offers its children is what its parent enables, now.
        if self.version == CgroupVersion::V2
            && file.file_name().is_some_and(|n| n == "cgroup.controllers")
        {
            if let Some(parent) = file.parent().and_then(Path::parent) {
                if let Ok(t) = fs::read_to_string(parent.join("cgroup.subtree_control")) {
                    return Ok(t);
                }
            }
        }
        fs::read_to_string(file)
    }
    fn open_procs(&self, dir: &Path) -> io::Result<OwnedFd> {
        let f = OpenOptions::new()
            .append(true)
            .create(true)
            .open(dir.join("cgroup.procs"))?;
        Ok(f.into())
    }
    fn is_real(&self) -> bool {
        false
    }
}

/// The root cgroup of a v2 layout (the mount point above the tenants' root): the topmost
/// directory, from the tenants' root up, that is still a cgroup.
pub(crate) fn v2_mount_root(fs: &CgroupFs) -> Option<PathBuf> {
    if fs.version() != CgroupVersion::V2 {
        return None;
    }
    let mut dir = fs.hierarchies().first()?.root.clone();
    while let Some(parent) = dir.parent() {
        if !fs.tree().exists(&parent.join("cgroup.controllers")) {
            break;
        }
        dir = parent.to_path_buf();
    }
    Some(dir)
}

/// One hierarchy: where it is and which of isobench's controllers it carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hierarchy {
    /// Directory under which tenant cgroups are created (a mount point, or a cgroup below
    /// one).
    pub root: PathBuf,
    /// Controllers available in this hierarchy.
    pub controllers: Vec<Controller>,
}

/// Where the cgroup controllers are, and how to touch them.
#[derive(Debug, Clone)]
pub struct CgroupFs {
    version: CgroupVersion,
    hierarchies: Vec<Hierarchy>,
    tree: Arc<dyn CgroupTree>,
}

/// One cgroup mount from `/proc/self/mounts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CgroupMount {
    /// Mount point.
    pub path: PathBuf,
    /// `cgroup` (v1) or `cgroup2`.
    pub fstype: String,
    /// v1: the controllers named in the mount options (including `name=...`); v2: the
    /// content of the root's `cgroup.controllers` when readable.
    pub controllers: Vec<String>,
}

/// Decodes the octal escapes (`\040`) of /proc/mounts fields.
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 4 <= b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let d = |k: usize| u32::from(b[i + k] - b'0');
            out.push((d(1) * 64 + d(2) * 8 + d(3)) as u8);
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup mounts listed in a `/proc/mounts` text.
// By hand: procfs's mount entries keep the options unordered and leave `\040` escaped.
pub fn parse_mounts(text: &str) -> Vec<CgroupMount> {
    let mut v: Vec<CgroupMount> = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 {
            continue;
        }
        let (path, fstype, opts) = (unescape_mount(f[1]), f[2], f[3]);
        let controllers = match fstype {
            "cgroup" => opts
                .split(',')
                .filter(|o| Controller::from_v1(o).is_some() || o.starts_with("name="))
                .map(str::to_string)
                .collect(),
            "cgroup2" => fs::read_to_string(Path::new(&path).join("cgroup.controllers"))
                .map(|t| t.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default(),
            _ => continue,
        };
        let path = PathBuf::from(path);
        if v.iter().any(|m| m.path == path) {
            continue;
        }
        v.push(CgroupMount {
            path,
            fstype: fstype.to_string(),
            controllers,
        });
    }
    v
}

/// The cgroup mounts of this host.
pub fn host_mounts() -> Result<Vec<CgroupMount>> {
    let text = fs::read_to_string("/proc/self/mounts").context("reading /proc/self/mounts")?;
    Ok(parse_mounts(&text))
}

impl CgroupFs {
    /// Detects the host's cgroup interface: v1 when any resource controller is mounted as a
    /// v1 hierarchy (a hybrid host keeps its controllers there), else v2 at the cgroup2
    /// mount (preferring `/sys/fs/cgroup`).
    pub fn detect() -> Result<CgroupFs> {
        CgroupFs::from_mounts(&host_mounts()?)
    }

    /// Chooses the interface from a list of mounts (see [`CgroupFs::detect`]).
    pub fn from_mounts(mounts: &[CgroupMount]) -> Result<CgroupFs> {
        let mut hierarchies: Vec<Hierarchy> = Vec::new();
        for m in mounts.iter().filter(|m| m.fstype == "cgroup") {
            let ctrls: Vec<Controller> = m
                .controllers
                .iter()
                .filter_map(|c| Controller::from_v1(c))
                .collect();
            if ctrls.is_empty() {
                continue;
            }
            // The same hierarchy can be mounted twice; keep the first mount.
            if hierarchies.iter().any(|h| h.controllers == ctrls) {
                continue;
            }
            hierarchies.push(Hierarchy {
                root: m.path.clone(),
                controllers: ctrls,
            });
        }
        let resource = [
            Controller::Cpu,
            Controller::Memory,
            Controller::Pids,
            Controller::Cpuset,
            Controller::Io,
        ];
        if hierarchies
            .iter()
            .any(|h| h.controllers.iter().any(|c| resource.contains(c)))
        {
            return Ok(CgroupFs::v1(hierarchies, Arc::new(RealTree)));
        }
        let v2 = mounts
            .iter()
            .filter(|m| m.fstype == "cgroup2")
            .min_by_key(|m| m.path != Path::new("/sys/fs/cgroup"));
        match v2 {
            Some(m) => CgroupFs::v2(&m.path, Arc::new(RealTree)),
            None => bail!(
                "no cgroup filesystem is mounted (neither v1 controllers nor cgroup2 in \
                 /proc/self/mounts); mount one, e.g. `mount -t cgroup2 none /sys/fs/cgroup`"
            ),
        }
    }

    /// A v1 layout with the given hierarchies.
    pub fn v1(hierarchies: Vec<Hierarchy>, tree: Arc<dyn CgroupTree>) -> CgroupFs {
        CgroupFs {
            version: CgroupVersion::V1,
            hierarchies,
            tree,
        }
    }

    /// A v2 layout whose tenants are created under `root`; the available controllers are read
    /// from `root/cgroup.controllers`.
    pub fn v2(root: &Path, tree: Arc<dyn CgroupTree>) -> Result<CgroupFs> {
        let file = root.join("cgroup.controllers");
        let text = tree
            .read(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        let mut controllers = vec![Controller::Cpuacct, Controller::Freezer];
        for name in text.split_whitespace() {
            if let Some(c) = Controller::ALL
                .into_iter()
                .find(|c| c.v2_name() == Some(name))
            {
                controllers.push(c);
            }
        }
        controllers.sort();
        Ok(CgroupFs {
            version: CgroupVersion::V2,
            hierarchies: vec![Hierarchy {
                root: root.to_path_buf(),
                controllers,
            }],
            tree,
        })
    }

    /// A fake v1 layout under `dir` (one directory per controller), for tests.
    pub fn fake_v1(dir: &Path) -> Result<CgroupFs> {
        let tree = FakeTree::new(CgroupVersion::V1);
        let mut hierarchies = Vec::new();
        for c in Controller::ALL {
            let root = dir.join(c.v1_name());
            tree.populate_root(&root, &[])
                .with_context(|| format!("creating {}", root.display()))?;
            hierarchies.push(Hierarchy {
                root,
                controllers: vec![c],
            });
        }
        Ok(CgroupFs::v1(hierarchies, Arc::new(tree)))
    }

    /// A fake v2 root at `dir` offering every controller, for tests.
    pub fn fake_v2(dir: &Path) -> Result<CgroupFs> {
        let tree = FakeTree::new(CgroupVersion::V2);
        tree.populate_root(dir, &["cpuset", "cpu", "io", "memory", "pids", "hugetlb"])
            .with_context(|| format!("creating {}", dir.display()))?;
        CgroupFs::v2(dir, Arc::new(tree))
    }

    /// The interface version.
    pub fn version(&self) -> CgroupVersion {
        self.version
    }

    /// The hierarchies tenants are created in.
    pub fn hierarchies(&self) -> &[Hierarchy] {
        &self.hierarchies
    }

    /// The hierarchy carrying `c`.
    pub fn hierarchy_of(&self, c: Controller) -> Option<&Hierarchy> {
        self.hierarchies.iter().find(|h| h.controllers.contains(&c))
    }

    /// Whether controller `c` is available.
    pub fn has(&self, c: Controller) -> bool {
        self.hierarchy_of(c).is_some()
    }

    /// The file operations.
    pub fn tree(&self) -> &Arc<dyn CgroupTree> {
        &self.tree
    }

    /// Whether this is the kernel's tree (not a fake).
    pub fn is_real(&self) -> bool {
        self.tree.is_real()
    }

    /// One line for reports: version and controller locations.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .hierarchies
            .iter()
            .map(|h| {
                let names: Vec<&str> = h.controllers.iter().map(|c| c.v1_name()).collect();
                format!("{} at {}", names.join(","), h.root.display())
            })
            .collect();
        format!("cgroup {}: {}", self.version, parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,relatime,cpu,cpuacct 0 0
cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup /sys/fs/cgroup/devices cgroup rw,relatime,devices 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0
cgroup2 /nonexistent/unified cgroup2 rw,relatime 0 0
";

    #[test]
    fn combined_v1_mounts_are_one_hierarchy() {
        let fs = CgroupFs::from_mounts(&parse_mounts(HYBRID)).unwrap();
        assert_eq!(fs.version(), CgroupVersion::V1);
        let cpu = fs.hierarchy_of(Controller::Cpu).unwrap();
        assert_eq!(cpu.root, Path::new("/sys/fs/cgroup/cpu,cpuacct"));
        assert_eq!(cpu.controllers, vec![Controller::Cpu, Controller::Cpuacct]);
        assert!(fs.has(Controller::Memory));
        assert!(!fs.has(Controller::Pids));
        // devices and name=systemd carry none of isobench's controllers.
        assert_eq!(fs.hierarchies().len(), 3);
    }

    #[test]
    fn pure_v2_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        FakeTree::new(CgroupVersion::V2)
            .populate_root(dir.path(), &["cpu", "memory", "pids"])
            .unwrap();
        let mounts = vec![CgroupMount {
            path: dir.path().to_path_buf(),
            fstype: "cgroup2".into(),
            controllers: vec![],
        }];
        let fs = CgroupFs::from_mounts(&mounts).unwrap();
        assert_eq!(fs.version(), CgroupVersion::V2);
        assert!(fs.has(Controller::Memory) && fs.has(Controller::Freezer));
        assert!(!fs.has(Controller::Io));
    }

    #[test]
    fn no_cgroups_is_an_error_with_a_fix() {
        let e = CgroupFs::from_mounts(&[]).unwrap_err().to_string();
        assert!(e.contains("mount -t cgroup2"), "{e}");
    }

    #[test]
    fn mount_escapes() {
        assert_eq!(unescape_mount("/a\\040b"), "/a b");
        assert_eq!(unescape_mount("/plain"), "/plain");
    }

    #[test]
    fn fake_subtree_control_merges() {
        let dir = tempfile::tempdir().unwrap();
        let t = FakeTree::new(CgroupVersion::V2);
        t.populate_root(dir.path(), &["cpu", "memory"]).unwrap();
        let f = dir.path().join("cgroup.subtree_control");
        t.write(&f, "+cpu").unwrap();
        t.write(&f, "+memory").unwrap();
        assert_eq!(t.read(&f).unwrap().trim(), "cpu memory");
        assert!(t.write(&f, "+io").is_err());
        t.mkdir(&dir.path().join("child")).unwrap();
        assert_eq!(
            t.read(&dir.path().join("child/cgroup.controllers"))
                .unwrap()
                .trim(),
            "cpu memory"
        );
    }
}
