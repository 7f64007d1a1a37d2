//! One tenant's cgroup: a directory in every hierarchy (v1) or one directory (v2), its limits,
//! its usage counters, and its teardown (freeze, kill every task, remove).

use std::collections::BTreeSet;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::{CgroupFs, CgroupVersion, Controller};
use crate::blockdev::DevNum;
use crate::error::PlatformError;
use crate::limits::{CpuList, CpuWeight, Limits, CPU_PERIOD_US};
use crate::procs;
use crate::tenant::Usage;

/// v1 reports "no memory limit" as a huge page-aligned number; anything above this is "none".
const V1_UNLIMITED: u64 = 1 << 62;

/// The cgroup(s) of one tenant.
#[derive(Debug, Clone)]
pub struct TenantCgroup {
    fs: CgroupFs,
    name: String,
    dirs: Vec<(PathBuf, Vec<Controller>)>,
}

fn controller_for(key: &str) -> Controller {
    match key {
        "cpus" | "shares" | "weight" => Controller::Cpu,
        "cpuset" | "mems" => Controller::Cpuset,
        "memory" => Controller::Memory,
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
        if limits.has_io() && device.is_none() {
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
        if let Some(cpus) = l.cpus {
            self.write(
                Controller::Cpu,
                "cpu.cfs_period_us",
                &CPU_PERIOD_US.to_string(),
            )?;
            self.write(
                Controller::Cpu,
                "cpu.cfs_quota_us",
                &quota_us(cpus).to_string(),
            )?;
        }
        if let Some(w) = l.cpu_weight {
            self.write(Controller::Cpu, "cpu.shares", &w.as_shares().to_string())?;
        }
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
        if let Some(m) = l.memory {
            self.write(Controller::Memory, "memory.limit_in_bytes", &m.to_string())?;
            if self.exists(Controller::Memory, "memory.memsw.limit_in_bytes") {
                // memory+swap = memory: the tenant cannot swap.
                self.write(
                    Controller::Memory,
                    "memory.memsw.limit_in_bytes",
                    &m.to_string(),
                )?;
            } else {
                self.write(Controller::Memory, "memory.swappiness", "0")?;
            }
        }
        if let Some(p) = l.pids {
            self.write(Controller::Pids, "pids.max", &p.to_string())?;
        }
        if let Some(dev) = dev {
            for (file, v) in [
                ("blkio.throttle.read_bps_device", l.io_read_bps),
                ("blkio.throttle.write_bps_device", l.io_write_bps),
                ("blkio.throttle.read_iops_device", l.io_read_iops),
                ("blkio.throttle.write_iops_device", l.io_write_iops),
            ] {
                if let Some(v) = v {
                    self.write(Controller::Io, file, &format!("{dev} {v}"))?;
                }
            }
        }
        Ok(())
    }

    fn apply_v2(&self, l: &Limits, dev: Option<DevNum>) -> Result<()> {
        if let Some(cpus) = l.cpus {
            self.write(
                Controller::Cpu,
                "cpu.max",
                &format!("{} {CPU_PERIOD_US}", quota_us(cpus)),
            )?;
        }
        if let Some(w) = l.cpu_weight {
            self.write(Controller::Cpu, "cpu.weight", &w.as_weight().to_string())?;
        }
        if let Some(s) = &l.cpuset {
            self.write(Controller::Cpuset, "cpuset.cpus", &s.to_string())?;
        }
        if let Some(s) = &l.mems {
            self.write(Controller::Cpuset, "cpuset.mems", &s.to_string())?;
        }
        if let Some(m) = l.memory {
            self.write(Controller::Memory, "memory.max", &m.to_string())?;
            if self.exists(Controller::Memory, "memory.swap.max") {
                self.write(Controller::Memory, "memory.swap.max", "0")?;
            }
        }
        if let Some(p) = l.pids {
            self.write(Controller::Pids, "pids.max", &p.to_string())?;
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
                self.write(Controller::Io, "io.max", &line)?;
            }
        }
        Ok(())
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

    fn wait_state(&self, file: &Path, want: &str, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        loop {
            if let Ok(t) = self.fs.tree().read(file) {
                if t.lines().any(|l| l.trim() == want) {
                    return true;
                }
            }
            if Instant::now() >= end {
                return false;
            }
            thread::sleep(Duration::from_millis(2));
        }
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

    /// Freezes (`true`) or thaws (`false`) every task of the cgroup and waits, polling every
    /// 200 us up to `timeout`, until the kernel reports the new state. v1 uses the freezer
    /// controller (`freezer.state`), v2 the core `cgroup.freeze` and `cgroup.events`.
    pub fn set_frozen(&self, frozen: bool, timeout: Duration) -> Result<()> {
        let tree = self.fs.tree();
        let (file, value, state_file, want) = match self.fs.version() {
            CgroupVersion::V2 => {
                let dir = &self.dirs[0].0;
                (
                    dir.join("cgroup.freeze"),
                    if frozen { "1" } else { "0" },
                    dir.join("cgroup.events"),
                    if frozen { "frozen 1" } else { "frozen 0" },
                )
            }
            CgroupVersion::V1 => {
                let dir = self
                    .dir_of(Controller::Freezer)
                    .ok_or_else(|| anyhow::anyhow!("the tenant has no freezer cgroup"))?;
                let state = dir.join("freezer.state");
                let want = if frozen { "FROZEN" } else { "THAWED" };
                (state.clone(), want, state, want)
            }
        };
        tree.write(&file, value)
            .with_context(|| format!("writing {value} to {}", file.display()))?;
        if !tree.is_real() {
            return Ok(());
        }
        let end = Instant::now() + timeout;
        loop {
            if let Ok(t) = tree.read(&state_file) {
                if t.lines().any(|l| l.trim() == want) {
                    return Ok(());
                }
            }
            if Instant::now() >= end {
                anyhow::bail!(
                    "{} did not reach `{want}` within {} ms",
                    state_file.display(),
                    timeout.as_millis()
                );
            }
            thread::sleep(Duration::from_micros(200));
        }
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
                    let _ = tree.write(&dir.join("cgroup.freeze"), "1");
                    self.wait_state(
                        &dir.join("cgroup.events"),
                        "frozen 1",
                        Duration::from_secs(2),
                    );
                    kill_list(self.procs(), &mut killed);
                    let _ = tree.write(&dir.join("cgroup.freeze"), "0");
                }
            }
            CgroupVersion::V1 => {
                if let Some(dir) = self.dir_of(Controller::Freezer) {
                    if tree.exists(dir) {
                        let state = dir.join("freezer.state");
                        let _ = tree.write(&state, "FROZEN");
                        self.wait_state(&state, "FROZEN", Duration::from_secs(2));
                        kill_list(self.procs(), &mut killed);
                        let _ = tree.write(&state, "THAWED");
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
        u
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
                                (d == dev.to_string()).then(|| v.trim().parse().ok())?
                            })
                        }))
                    };
                    l.io_read_bps = get("blkio.throttle.read_bps_device")?;
                    l.io_write_bps = get("blkio.throttle.write_bps_device")?;
                    l.io_read_iops = get("blkio.throttle.read_iops_device")?;
                    l.io_write_iops = get("blkio.throttle.write_iops_device")?;
                }
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
        let text = std::fs::read_to_string(&file).with_context(|| format!("reading {file}"))?;
        TenantCgroup::from_proc_cgroup(fs, &text)
            .with_context(|| format!("finding the cgroups of process {pid} in {file}"))
    }

    /// The cgroups listed in the text of a `/proc/<pid>/cgroup` file (`id:controllers:path`
    /// lines; `0::path` for v2), relative to each hierarchy's root of `fs`.
    pub fn from_proc_cgroup(fs: &CgroupFs, text: &str) -> Result<TenantCgroup> {
        let lines: Vec<(Vec<&str>, &str)> = text
            .lines()
            .filter_map(|l| {
                let mut it = l.splitn(3, ':');
                let (_, ctrls, path) = (it.next()?, it.next()?, it.next()?);
                Some((ctrls.split(',').filter(|c| !c.is_empty()).collect(), path))
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
        let freeze = match self.fs.version() {
            CgroupVersion::V1 => self.dir_of(Controller::Freezer).map(|d| {
                let state = d.join("freezer.state");
                (state.clone(), state, "FROZEN", "THAWED", "FROZEN")
            }),
            CgroupVersion::V2 => {
                let d = &self.dirs[0].0;
                Some((
                    d.join("cgroup.freeze"),
                    d.join("cgroup.events"),
                    "1",
                    "0",
                    "frozen 1",
                ))
            }
        };
        let frozen = freeze.as_ref().is_some_and(|(file, state, on, _, want)| {
            tree.write(file, on).is_ok() && self.wait_state(state, want, Duration::from_secs(2))
        });
        for p in others() {
            if procs::kill9(p) {
                killed.insert(p);
            }
        }
        if let Some((file, _, _, off, _)) = &freeze {
            if frozen || tree.exists(file) {
                let _ = tree.write(file, off);
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

fn quota_us(cpus: f64) -> u64 {
    ((cpus * CPU_PERIOD_US as f64).round() as u64).max(1000)
}

/// The value of `key` in a "key value" per line file.
pub(crate) fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next()? == key).then(|| it.next()?.parse().ok())?
    })
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
    use super::*;

    #[test]
    fn keyed_and_blkio_parsers() {
        assert_eq!(
            keyed("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", "oom_kill"),
            Some(3)
        );
        assert_eq!(keyed("max 0\n", "oom"), None);
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
