//! Tenants: the slots a platform creates, the processes started in them, their usage and
//! their teardown.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fmt;
use std::fs::{self, File};
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

use crate::agent::{AgentConnection, AgentLaunch};
use crate::blockdev::BlockDevice;
use crate::cgroup::cpu::{self, CgroupCpu};
use crate::cgroup::{RealTree, TenantCgroup};
use crate::limits::Limits;
use crate::live::LimitChanges;
use crate::net::{NetSpec, TenantNet};
use crate::procs;
use crate::run::RunContext;
use crate::usage::Usage;
use crate::userimage::{self, FoundImage};
use crate::watchdog::Watchdog;
use crate::PlatformKind;

pub use isobench_common::Role;

/// What to create.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantSpec {
    /// Name, unique within the run (letters, digits, `_`, `-`; up to 40).
    pub name: String,
    /// Victim or aggressor.
    pub role: Role,
    /// Resource limits.
    pub limits: Limits,
    /// Its own network namespace on the run's bridge, or `None` to share the host's network.
    pub network: Option<NetSpec>,
    /// Directory under which the tenant's working directory `isobench-<run>-<name>` is
    /// created (default `/var/tmp`). io limits apply to this directory's disk.
    pub workdir: Option<PathBuf>,
    /// Time after which the watchdog kills every process of the tenant.
    pub deadline: Option<Duration>,
    /// The user's container image the tenant runs from (`name:tag`, already in the
    /// engine's or node's store; never pulled), with the agent mounted into it; `None`
    /// runs the agent's own image. Only where [`crate::Capabilities::runs_images`].
    pub image: Option<String>,
}

impl TenantSpec {
    /// A tenant with no limits, no network, the default workdir and no deadline.
    pub fn new(name: impl Into<String>, role: Role) -> TenantSpec {
        TenantSpec {
            name: name.into(),
            role,
            limits: Limits::default(),
            network: None,
            workdir: None,
            deadline: None,
            image: None,
        }
    }

    /// With these limits.
    pub fn with_limits(mut self, limits: Limits) -> TenantSpec {
        self.limits = limits;
        self
    }

    /// With its own network namespace.
    pub fn with_network(mut self, net: NetSpec) -> TenantSpec {
        self.network = Some(net);
        self
    }

    /// With its working directory under `parent`.
    pub fn with_workdir(mut self, parent: impl Into<PathBuf>) -> TenantSpec {
        self.workdir = Some(parent.into());
        self
    }

    /// With a deadline.
    pub fn with_deadline(mut self, deadline: Duration) -> TenantSpec {
        self.deadline = Some(deadline);
        self
    }

    /// Running from the user's image `reference` (`name:tag`).
    pub fn with_image(mut self, reference: impl Into<String>) -> TenantSpec {
        self.image = Some(reference.into());
        self
    }
}

/// The checks every platform makes before it creates anything: the name (valid, not one of
/// `taken`), an image only on a platform of `kind` that runs them, the limits against the
/// host, and no network rate without a network.
pub(crate) fn check_spec(
    spec: &TenantSpec,
    taken: &std::collections::BTreeSet<String>,
    host: &crate::HostInfo,
    kind: PlatformKind,
) -> Result<()> {
    validate_tenant_name(&spec.name)?;
    check_image(spec, kind)?;
    if taken.contains(&spec.name) {
        return Err(crate::PlatformError::DuplicateTenant {
            name: spec.name.clone(),
        }
        .into());
    }
    spec.limits.validate(host)?;
    if spec.network.is_none() {
        let key = match (spec.limits.net_egress, spec.limits.net_ingress) {
            (Some(e), Some(i)) if e == i => Some("net_rate"),
            (Some(_), _) => Some("net_egress"),
            (None, Some(_)) => Some("net_ingress"),
            (None, None) => None,
        };
        if let Some(key) = key {
            return Err(crate::PlatformError::NetLimitWithoutNetwork { key }.into());
        }
    }
    Ok(())
}

/// A tenant's image: a well-formed reference, on a platform that runs images.
pub(crate) fn check_image(spec: &TenantSpec, kind: PlatformKind) -> Result<()> {
    let Some(image) = &spec.image else {
        return Ok(());
    };
    if !kind.capabilities().runs_images {
        bail!(
            "tenant {}: `image = \"{image}\"` needs a container platform, and the `{kind}` \
             platform runs no images; use `platform = \"oci\"` or `platform = \"k8s\"`, or \
             remove `image`",
            spec.name
        );
    }
    userimage::check_reference(image).map_err(|why| {
        anyhow!(
            "tenant {}: `image`: {why}; write a reference such as `image = \"redis:7\"`",
            spec.name
        )
    })
}

/// The preflight of a platform that runs images: every tenant's image is checked
/// ([`check_image`]) and looked up with `find` (tenant, reference), and every missing one
/// is named in one error.
pub(crate) fn preflight_images(
    specs: &[TenantSpec],
    kind: PlatformKind,
    mut find: impl FnMut(&str, &str) -> Result<FoundImage>,
) -> Result<()> {
    let mut missing = Vec::new();
    for spec in specs {
        check_image(spec, kind)?;
        if let Some(r) = &spec.image {
            if let Err(e) = find(&spec.name, r) {
                missing.push(format!("{e:#}"));
            }
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        bail!("{}", missing.join("\n"))
    }
}

/// The parent of a tenant's workdir (its own, else `default_root`), checked, and the disk
/// `limits`' io limits apply to. An io limit only a safe default asked for is dropped (with a
/// note) where the workdir has no disk: a tmpfs cannot be flooded.
pub(crate) fn workdir_device(
    spec: &TenantSpec,
    default_root: &Path,
    limits: &mut Limits,
    notes: &mut Vec<String>,
) -> Result<(PathBuf, Option<BlockDevice>)> {
    let parent = spec
        .workdir
        .clone()
        .unwrap_or_else(|| default_root.to_path_buf());
    if !parent.is_dir() {
        bail!(
            "the workdir parent {} of tenant {} is not a directory; create it or choose another",
            parent.display(),
            spec.name
        );
    }
    // io_weight has a default line for every device and names the workdir's when it can.
    if !limits.needs_device() && limits.io_weight.is_none() {
        return Ok((parent, None));
    }
    match crate::blockdev::device_for_path(&parent) {
        Ok(d) => Ok((parent, Some(d))),
        Err(why) if spec.limits.needs_device() => Err(crate::PlatformError::NoBlockDevice {
            path: parent.display().to_string(),
            why,
        }
        .into()),
        Err(why) => {
            if limits.io_write_bps.is_some() {
                limits.io_write_bps = None;
                notes.retain(|n| !n.contains("io_write_bps"));
                notes.push(format!("io_write_bps not applied: {why}"));
            }
            Ok((parent, None))
        }
    }
}

/// Checks a tenant name: it becomes part of cgroup, namespace and directory names.
pub fn validate_tenant_name(name: &str) -> Result<(), crate::PlatformError> {
    let bad = |why| {
        Err(crate::PlatformError::BadTenantName {
            name: name.to_string(),
            why,
        })
    };
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.len() > 40 {
        return bad("it is longer than 40 characters");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return bad("it has characters other than letters, digits, `_` and `-`");
    }
    if name.starts_with('-') {
        return bad("it starts with `-`");
    }
    Ok(())
}

/// Everything known about a created tenant, for the record of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TenantInfo {
    /// Tenant name.
    pub name: String,
    /// Victim or aggressor.
    pub role: Role,
    /// The platform that created it.
    pub platform: PlatformKind,
    /// `isobench-<run>-<name>`: its cgroup, namespace and workdir name.
    pub object_name: String,
    /// The limits in force (the user's, plus safe defaults).
    pub limits: Limits,
    /// Safe defaults that were filled in (`pids=256`, ...), and limits that were skipped,
    /// with the reason.
    pub notes: Vec<String>,
    /// Cgroup directories.
    pub cgroups: Vec<PathBuf>,
    /// Network namespace.
    pub netns: Option<String>,
    /// Address on the run's bridge.
    pub address: Option<Ipv4Addr>,
    /// The host end of the tenant's veth pair (its ingress shaper sits here).
    pub host_link: Option<String>,
    /// The tenant's end of the veth pair, inside its namespace (its egress shaper sits here).
    pub netns_link: Option<String>,
    /// Working directory.
    pub workdir: PathBuf,
    /// Disk the io limits apply to.
    pub io_device: Option<BlockDevice>,
    /// Deadline in seconds.
    pub deadline_s: Option<f64>,
    /// The user's image it runs from, as found in the store (`None`: the agent's own).
    pub image: Option<FoundImage>,
}

/// A handle that kills every process of a tenant; cheap to clone and usable from any thread
/// (the sentinel's callback, a watchdog).
#[derive(Clone)]
pub struct Killer {
    name: String,
    f: Arc<dyn Fn() -> Result<usize> + Send + Sync>,
}

impl Killer {
    /// A killer calling `f`.
    pub fn new(
        name: impl Into<String>,
        f: impl Fn() -> Result<usize> + Send + Sync + 'static,
    ) -> Killer {
        Killer {
            name: name.into(),
            f: Arc::new(f),
        }
    }

    /// The tenant's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Kills every process of the tenant; returns how many were signalled.
    pub fn kill(&self) -> Result<usize> {
        (self.f)()
    }
}

impl fmt::Debug for Killer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Killer").field("name", &self.name).finish()
    }
}

/// One isolated slot on a platform.
pub trait Tenant: Send + Sync {
    /// The tenant's name.
    fn name(&self) -> &str;

    /// What was created, with the limits in force.
    fn info(&self) -> &TenantInfo;

    /// Starts `cmd` inside the tenant. The child joins the tenant's cgroups and network
    /// namespace before it executes (so it starts contained), starts in the tenant's workdir
    /// unless `cmd` sets a directory, in a new process group, with `ISOBENCH_RUN`,
    /// `ISOBENCH_TENANT` and `ISOBENCH_WORKDIR` in its environment. The caller waits for it.
    fn spawn(&self, cmd: Command) -> Result<Child>;

    /// Starts the agent inside the tenant, the platform's way, and returns the connection
    /// to it (standard input and output of a local process, a container's `run -i`, a
    /// guest's virtio-serial port).
    fn start_agent(&self, launch: &AgentLaunch) -> Result<AgentConnection>;

    /// Current usage counters.
    fn usage(&self) -> Result<Usage>;

    /// CPU time of the tenant, split into user time where the platform can: on cgroup v1
    /// from the same counters as the host root's ([`crate::cgroup::cpu`]), else from
    /// [`Tenant::usage`].
    fn cpu_time(&self) -> Option<CgroupCpu> {
        cpu::tenant_in(&RealTree, &self.info().cgroups, || self.usage().ok())
    }

    /// The limits as the kernel holds them, read back (no limits on the host platform).
    fn effective_limits(&self) -> Result<Limits>;

    /// The tenant's own address, when it has its own network namespace.
    fn address(&self) -> Option<IpAddr>;

    /// The address the tenant's network services bind to so that a process beside the
    /// tenant (on the host, in its network) reaches them; `None`: the tenant's loopback.
    /// A guest with its own kernel has a loopback nothing beside it can reach.
    fn service_address(&self) -> Option<IpAddr> {
        None
    }

    /// The tenant's working directory (created empty, removed at teardown).
    fn workdir(&self) -> &Path;

    /// A handle that kills every process of the tenant.
    fn killer(&self) -> Killer;

    /// Freezes (`true`) or thaws (`false`) every process of the tenant, returning once the
    /// change has taken effect. A cgroup tenant uses the freezer; a host tenant sends
    /// `SIGSTOP`/`SIGCONT` to its process groups. The on/off design switches an aggressor
    /// this way.
    fn set_frozen(&self, frozen: bool) -> Result<()>;

    /// Changes the tenant's CPU limit while it lives (its processes keep running):
    /// `Some(cpus)` caps it at `cpus` CPUs' worth of time per scheduling period (the `cpus`
    /// limit), `None` lifts the cap. The platform that cannot enforce a CPU limit (`host`)
    /// returns [`crate::PlatformError::NotEnforceable`], saying why.
    fn set_cpu_limit(&self, cpus: Option<f64>) -> Result<()> {
        self.update_limits(&LimitChanges::cpus(cpus)).map(|_| ())
    }

    /// Changes some of the tenant's knobs while it lives (its processes keep running): each
    /// knob `changes` sets takes its value, each it lifts goes back to the kernel's default,
    /// the others stay. Returns the limits as the kernel holds them afterwards, read back
    /// ([`Tenant::effective_limits`]); [`Tenant::info`] keeps the limits the tenant was made
    /// with.
    ///
    /// Which knobs a platform can change is [`crate::Capabilities::live_knobs`]; a knob
    /// outside it, or one this host cannot hold (a cgroup v2 knob on a v1 host), is refused
    /// with the reason before anything is written. A write the kernel refuses (a memory
    /// limit below what the tenant uses and cannot give back) fails naming the file, the
    /// value and the kernel's error; the knobs written before it stay changed.
    fn update_limits(&self, changes: &LimitChanges) -> Result<Limits>;

    /// Whether the deadline passed and the watchdog killed the tenant.
    fn expired(&self) -> bool;

    /// Kills every process, removes the cgroups, namespace, links and workdir. Idempotent;
    /// also runs on drop.
    fn teardown(&self) -> Result<()>;
}

/// What contains a local tenant's processes.
#[derive(Debug)]
pub(crate) enum Jail {
    /// Plain processes: tracked by process group and environment tag.
    Host {
        pgids: Mutex<Vec<i32>>,
        seen: Mutex<BTreeMap<i32, (u64, u64)>>,
    },
    /// A cgroup.
    Cgroup(TenantCgroup),
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) info: TenantInfo,
    pub(crate) jail: Jail,
    pub(crate) net: Mutex<Option<TenantNet>>,
    pub(crate) netns_path: Option<PathBuf>,
    pub(crate) workdir_created: bool,
    pub(crate) run: RunContext,
    pub(crate) torn_down: AtomicBool,
}

impl Inner {
    /// Kills every process of the tenant.
    pub(crate) fn kill_processes(&self) -> Result<usize> {
        let mut n = 0;
        if let Jail::Cgroup(cg) = &self.jail {
            n += cg.kill_all(Duration::from_secs(10))?.len();
        }
        // Processes started for this tenant carry its tag; on the host platform also their
        // process groups (a recorded group is only signalled while a tagged member is in it,
        // so a reused id is never hit).
        let mine: Vec<i32> = procs::tagged(procs::ENV_TENANT)
            .into_iter()
            .filter(|(_, v)| *v == self.info.object_name)
            .map(|(p, _)| p)
            .collect();
        if let Jail::Host { pgids, .. } = &self.jail {
            let recorded = pgids.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let live_groups: std::collections::BTreeSet<i32> = mine
                .iter()
                .filter_map(|&p| procs::pgrp(p))
                .filter(|g| recorded.contains(g))
                .collect();
            for g in live_groups {
                if procs::killpg9(g) {
                    n += 1;
                }
            }
        }
        for &p in &mine {
            if procs::kill9(p) {
                n += 1;
            }
        }
        let left = procs::wait_gone(&mine, Duration::from_secs(5));
        if !left.is_empty() {
            bail!(
                "processes {left:?} of tenant {} survived SIGKILL",
                self.info.name
            );
        }
        Ok(n)
    }

    pub(crate) fn teardown(&self) -> Result<()> {
        if self.torn_down.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let mut errors = TeardownErrors::default();
        errors.step(self.kill_processes());
        if let Some(mut net) = self.net.lock().unwrap_or_else(|p| p.into_inner()).take() {
            errors.step(net.teardown());
        }
        if let Jail::Cgroup(cg) = &self.jail {
            errors.step(cg.remove(Duration::from_secs(10)));
        }
        if self.workdir_created {
            errors.remove_workdir(&self.info.workdir);
        }
        errors.finish(&self.info, &self.run)
    }

    fn host_usage(&self, seen: &Mutex<BTreeMap<i32, (u64, u64)>>) -> Usage {
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
        let pids: Vec<i32> = procs::tagged(procs::ENV_TENANT)
            .into_iter()
            .filter(|(_, v)| *v == self.info.object_name)
            .map(|(p, _)| p)
            .collect();
        for p in pids {
            let Ok(process) = procfs::process::Process::new(p) else {
                continue;
            };
            let Ok(stat) = process.stat() else {
                continue;
            };
            let ticks = procs::cpu_ticks(&stat);
            let hwm = process.status().ok().and_then(|s| s.vmhwm).unwrap_or(0) * 1024;
            let e = seen.entry(p).or_insert((0, 0));
            e.0 = e.0.max(ticks);
            e.1 = e.1.max(hwm);
        }
        Usage {
            cpu_time_ns: Some(seen.values().map(|v| v.0).sum::<u64>() * (1_000_000_000 / hz)),
            memory_peak: seen.values().map(|v| v.1).max(),
            ..Usage::default()
        }
    }
}

/// A tenant of the `host` or `cgroup` platform.
pub(crate) struct LocalTenant {
    pub(crate) inner: Arc<Inner>,
    pub(crate) expired: Arc<AtomicBool>,
    pub(crate) watchdog: Mutex<Option<Watchdog>>,
}

impl LocalTenant {
    pub(crate) fn new(inner: Inner) -> LocalTenant {
        let inner = Arc::new(inner);
        let target = inner.clone();
        let (watchdog, expired) =
            Watchdog::for_tenant(&inner.info.name, inner.info.deadline_s, move || {
                target.kill_processes()
            });
        LocalTenant {
            inner,
            expired,
            watchdog: Mutex::new(watchdog),
        }
    }
}

/// Joins the cgroups and network namespace; runs in the child between fork and exec, so it
/// only makes system calls (no allocation).
fn join_in_child(cgroups: &[OwnedFd], netns: Option<&OwnedFd>) -> io::Result<()> {
    for fd in cgroups {
        // SAFETY: writing 1 byte from a static buffer to an open fd.
        let n = unsafe { libc::write(fd.as_raw_fd(), b"0".as_ptr().cast(), 1) };
        if n != 1 {
            return Err(io::Error::last_os_error());
        }
    }
    if let Some(fd) = netns {
        // SAFETY: setns on an fd of a network namespace file.
        if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The agent of a tenant made of local processes: `exe agent` spawned in the tenant, over
/// its standard input and output.
pub fn start_local_agent(tenant: &dyn Tenant, launch: &AgentLaunch) -> Result<AgentConnection> {
    spawn_agent(tenant, &launch.exe, &launch.log)
}

/// `exe agent` spawned in `tenant` (the launch's binary, or the one a tenant carries), over
/// its standard input and output, its standard error appended to `log`.
pub(crate) fn spawn_agent(
    tenant: &dyn Tenant,
    exe: impl AsRef<OsStr>,
    log: &Path,
) -> Result<AgentConnection> {
    let log_file = File::options()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("opening the agent's log {}", log.display()))?;
    let mut cmd = Command::new(exe);
    cmd.arg("agent")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log_file));
    let child = tenant
        .spawn(cmd)
        .with_context(|| format!("starting the agent in tenant {}", tenant.name()))?;
    AgentConnection::stdio(child)
}

/// Refuses a CPU quota larger than the tenant's cpuset (as planned, or as the change sets
/// it): the kernel would take it, and the tenant could never use it.
pub(crate) fn check_cpus_in_cpuset(info: &TenantInfo, changes: &LimitChanges) -> Result<()> {
    let cpuset = changes
        .set
        .cpuset
        .as_ref()
        .or(info.limits.cpuset.as_ref())
        .filter(|_| !changes.lift.contains(crate::Knob::Cpuset));
    if let (Some(c), Some(set)) = (changes.set.cpus, cpuset) {
        if c > set.len() as f64 + 1e-9 {
            bail!(
                "tenant {}: a CPU limit of {c} CPUs is more than the {} CPU(s) of its cpuset \
                 {set}; use cpus={} or less",
                info.name,
                set.len(),
                set.len()
            );
        }
    }
    Ok(())
}

impl Tenant for LocalTenant {
    fn name(&self) -> &str {
        &self.inner.info.name
    }

    fn info(&self) -> &TenantInfo {
        &self.inner.info
    }

    fn spawn(&self, mut cmd: Command) -> Result<Child> {
        let inner = &self.inner;
        if inner.torn_down.load(Ordering::SeqCst) {
            bail!("tenant {} has been torn down", inner.info.name);
        }
        cmd.env(procs::ENV_RUN, inner.run.id().as_str())
            .env(procs::ENV_TENANT, &inner.info.object_name)
            .env(procs::ENV_WORKDIR, &inner.info.workdir);
        if cmd.get_current_dir().is_none() {
            cmd.current_dir(&inner.info.workdir);
        }
        cmd.process_group(0);
        let cgroup_fds = match &inner.jail {
            Jail::Cgroup(cg) => cg.join_fds()?,
            Jail::Host { .. } => Vec::new(),
        };
        let netns_fd: Option<OwnedFd> = match &inner.netns_path {
            Some(p) => Some(
                File::open(p)
                    .with_context(|| format!("opening network namespace {}", p.display()))?
                    .into(),
            ),
            None => None,
        };
        // SAFETY: the closure only calls write(2) and setns(2) on descriptors it owns.
        unsafe {
            cmd.pre_exec(move || join_in_child(&cgroup_fds, netns_fd.as_ref()));
        }
        let child = cmd.spawn().with_context(|| {
            format!(
                "starting `{}` in tenant {}",
                cmd.get_program().to_string_lossy(),
                inner.info.name
            )
        })?;
        if let Jail::Host { pgids, .. } = &inner.jail {
            pgids
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(child.id() as i32);
        }
        Ok(child)
    }

    fn start_agent(&self, launch: &AgentLaunch) -> Result<AgentConnection> {
        start_local_agent(self, launch)
    }

    fn usage(&self) -> Result<Usage> {
        Ok(match &self.inner.jail {
            Jail::Cgroup(cg) => cg.usage(),
            Jail::Host { seen, .. } => self.inner.host_usage(seen),
        })
    }

    fn effective_limits(&self) -> Result<Limits> {
        let mut l = match &self.inner.jail {
            Jail::Cgroup(cg) => {
                cg.read_limits(self.inner.info.io_device.as_ref().map(|d| d.dev))?
            }
            Jail::Host { .. } => Limits::default(),
        };
        // Rates live in tc, as configured.
        l.net_egress = self.inner.info.limits.net_egress;
        l.net_ingress = self.inner.info.limits.net_ingress;
        Ok(l)
    }

    fn address(&self) -> Option<IpAddr> {
        self.inner.info.address.map(IpAddr::V4)
    }

    fn workdir(&self) -> &Path {
        &self.inner.info.workdir
    }

    fn killer(&self) -> Killer {
        let inner = self.inner.clone();
        Killer::new(self.inner.info.name.clone(), move || inner.kill_processes())
    }

    fn expired(&self) -> bool {
        self.expired.load(Ordering::SeqCst)
    }

    fn update_limits(&self, changes: &LimitChanges) -> Result<Limits> {
        let info = &self.inner.info;
        match &self.inner.jail {
            Jail::Cgroup(cg) => {
                check_cpus_in_cpuset(info, changes)?;
                cg.update_limits(changes, info.io_device.as_ref().map(|d| d.dev))
                    .with_context(|| format!("changing the limits of tenant {}", info.name))?;
                self.effective_limits()
            }
            Jail::Host { .. } => {
                let key = changes.knobs().iter().next().map_or("cpus", |k| k.key());
                Err(crate::PlatformError::NotEnforceable {
                    key,
                    platform: "host",
                    why: "it runs plain processes without isolation, so no limit applies",
                    fix: "the `cgroup` platform",
                }
                .into())
            }
        }
    }

    fn set_frozen(&self, frozen: bool) -> Result<()> {
        match &self.inner.jail {
            Jail::Cgroup(cg) => cg.set_frozen(frozen, crate::cgroup::FREEZE_TIMEOUT),
            Jail::Host { pgids, .. } => {
                let recorded = pgids.lock().unwrap_or_else(|p| p.into_inner()).clone();
                let live: std::collections::BTreeSet<i32> = procs::tagged(procs::ENV_TENANT)
                    .into_iter()
                    .filter(|(_, v)| *v == self.inner.info.object_name)
                    .filter_map(|(p, _)| procs::pgrp(p))
                    .filter(|g| recorded.contains(g))
                    .collect();
                let sig = if frozen { libc::SIGSTOP } else { libc::SIGCONT };
                for g in live {
                    // SAFETY: signals a process group this tenant started and still owns.
                    if unsafe { libc::killpg(g, sig) } != 0 {
                        let e = std::io::Error::last_os_error();
                        anyhow::bail!("signalling process group {g}: {e}");
                    }
                }
                Ok(())
            }
        }
    }

    fn teardown(&self) -> Result<()> {
        if let Some(w) = self
            .watchdog
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            w.cancel();
        }
        self.inner.teardown()
    }
}

impl Drop for LocalTenant {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            tracing::warn!("{e:#}");
        }
    }
}

/// The errors of a tenant's teardown steps: every step runs, and the errors are reported
/// together.
#[derive(Default)]
pub(crate) struct TeardownErrors(Vec<String>);

impl TeardownErrors {
    /// Keeps the error of one step.
    pub(crate) fn step<T>(&mut self, result: Result<T>) {
        if let Err(e) = result {
            self.0.push(format!("{e:#}"));
        }
    }

    /// Removes the tenant's workdir (gone already is fine).
    pub(crate) fn remove_workdir(&mut self, dir: &Path) {
        match fs::remove_dir_all(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => self.0.push(format!("removing {}: {e}", dir.display())),
        }
    }

    /// One error naming the tenant and the run, if any step failed.
    pub(crate) fn finish(self, info: &TenantInfo, run: &RunContext) -> Result<()> {
        if self.0.is_empty() {
            return Ok(());
        }
        Err(anyhow!(
            "tearing down tenant {} (run {}): {}",
            info.name,
            run.id(),
            self.0.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_names_that_could_become_a_path_or_an_option_are_refused() {
        validate_tenant_name("victim").unwrap();
        validate_tenant_name("agg-1_b").unwrap();
        // Each would reach a path (`../x`, `a/b`, `.`), end or split a C string or a
        // command line (NUL, space, newline), or read as an option of ip/tc (`-x`), or end
        // a QEMU option value (`,`).
        for bad in [
            "",
            "a b",
            "a/b",
            "../x",
            ".",
            "..",
            "a\0b",
            "a\nb",
            "-x",
            "--help",
            "a,b",
            "a:b",
            "$(x)",
            &"x".repeat(41),
            "é",
        ] {
            let e = validate_tenant_name(bad).unwrap_err().to_string();
            assert!(e.contains("e.g. `victim`"), "{e}");
        }
    }
}
