//! `VmPlatform` and `VmTenant`: a guest per tenant, its QEMU process inside a cgroup tenant
//! of the `cgroup` platform (so the host-side limits hold for the whole guest), its disk a
//! sparse file in the tenant's workdir, its network a TAP device on the run's bridge.

use std::fs;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::guest;
use super::initramfs;
use super::kernel::{self, Kernel};
use super::qemu::{self, Accel, GuestConfig};
use crate::agent::{AgentConnection, AgentLaunch, Transport};
use crate::cgroup::CgroupFs;
use crate::cmd;
use crate::error::PlatformError;
use crate::hostinfo::HostInfo;
use crate::limits::Limits;
use crate::local::LocalPlatform;
use crate::net::{RunNet, TenantTap};
use crate::tenant::{Killer, Role, Tenant, TenantInfo, TenantSpec};
use crate::usage::Usage;
use crate::{Platform, PlatformKind, PlatformOptions};

/// Guest memory when the tenant has no memory limit.
pub const DEFAULT_GUEST_MEMORY: u64 = 512 << 20;

/// Memory the QEMU process needs beyond the guest's (its own heap, device buffers, TCG's
/// translation cache): the tenant's cgroup holds guest memory plus this plus the initramfs.
pub const QEMU_OVERHEAD: u64 = (192 + qemu::TCG_TB_SIZE_MIB) << 20;

/// pids limit of the QEMU process's cgroup (its threads; the guest's own processes are
/// limited inside the guest).
const QEMU_PIDS: u64 = 512;

/// Size of a guest's disk (a sparse file: only what the guest writes takes space).
pub const DISK_BYTES: u64 = 4 << 30;

/// The disk image, agent socket and console names in a tenant's workdir.
pub(crate) const DISK_FILE: &str = "guest-disk.img";
pub(crate) const AGENT_SOCKET: &str = "agent.sock";

/// The pids limit an aggressor guest gets inside when none is given.
const SAFE_GUEST_PIDS: u64 = 256;

/// The `vm` platform.
pub(crate) struct VmPlatform {
    host: HostInfo,
    cgroup: LocalPlatform,
    net: Arc<RunNet>,
    kernel: Kernel,
    initrd: PathBuf,
    accel: Accel,
    qemu_version: String,
}

/// Checks the cheap prerequisites: root, cgroups, QEMU on the PATH, a kernel, busybox.
pub(crate) fn available() -> Result<(), PlatformError> {
    let unavailable = |why: String, fix: &str| PlatformError::Unavailable {
        kind: "vm".into(),
        why,
        fix: fix.into(),
    };
    crate::detect_cgroup_platform().map_err(|e| {
        unavailable(
            format!("its QEMU processes run in cgroups: {e}"),
            "run isobench as root on a host with cgroups",
        )
    })?;
    if !on_path(qemu::QEMU) {
        return Err(unavailable(
            format!("{} is not installed", qemu::QEMU),
            "install it (`apt-get install qemu-system-x86`)",
        ));
    }
    if !Path::new(initramfs::BUSYBOX).is_file() {
        return Err(unavailable(
            format!("{} is missing", initramfs::BUSYBOX),
            "install busybox-static (`apt-get install busybox-static`)",
        ));
    }
    match kernel::recorded() {
        Ok(Some(_)) => {}
        _ => {
            return Err(unavailable(
                "no guest kernel is set up".into(),
                "run `isobench vm setup` (or pass --kernel)",
            ))
        }
    }
    crate::staticexe::find().map_err(|e| {
        unavailable(
            format!("{e:#}"),
            "guests carry a static isobench: run `scripts/build-static`",
        )
    })?;
    Ok(())
}

fn on_path(prog: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
        .unwrap_or(false)
}

/// Builds the platform: every check, the initramfs and the accelerator choice happen here.
pub(crate) fn build(opts: PlatformOptions, host: HostInfo) -> Result<Box<dyn Platform>> {
    let fs: CgroupFs = match opts.cgroup_fs.clone() {
        Some(fs) => fs,
        None => crate::detect_cgroup_platform().map_err(|e| PlatformError::Unavailable {
            kind: "vm".into(),
            why: format!("its QEMU processes run in cgroups: {e}"),
            fix: "run isobench as root on a host with cgroups".into(),
        })?,
    };
    let qemu_version = qemu::qemu_version().map_err(|e| PlatformError::Unavailable {
        kind: "vm".into(),
        why: format!("{e:#}"),
        fix: "install QEMU (`apt-get install qemu-system-x86`)".into(),
    })?;
    let kernel =
        kernel::resolve(opts.vm_kernel.as_deref()).map_err(|e| PlatformError::Unavailable {
            kind: "vm".into(),
            why: format!("{e:#}"),
            fix: "run `isobench vm setup`".into(),
        })?;
    let exe = crate::staticexe::find().map_err(|e| PlatformError::Unavailable {
        kind: "vm".into(),
        why: format!("{e:#}"),
        fix: "guests carry a static isobench: run `scripts/build-static`".into(),
    })?;
    let initrd = initramfs::build(&kernel::vm_cache_dir()?, &kernel, &exe)
        .context("building the guests' initramfs")?;
    let accel = qemu::accel(&kernel.image);
    let cgroup = LocalPlatform::cgroup(opts.run.clone(), host.clone(), fs, opts.workdir_root)?;
    Ok(Box::new(VmPlatform {
        net: RunNet::for_run(opts.run.id()),
        host,
        cgroup,
        kernel,
        initrd,
        accel,
        qemu_version,
    }))
}

/// The guest's vCPU count. With a cpuset, vCPUs are numbered as the host's CPUs (vCPU `n`
/// runs on host CPU `n`, the agent is held to the cpuset's numbers inside the guest, so a
/// CPU the controller names means the same CPU on both sides): up to the cpuset's highest
/// CPU. Without one: the CPU limit rounded up, or every host CPU.
pub(crate) fn guest_cpus(limits: &Limits, host: &HostInfo) -> u32 {
    if let Some(set) = &limits.cpuset {
        return set.iter().max().map_or(1, |m| m + 1);
    }
    match limits.cpus {
        Some(c) => c.ceil().max(1.0) as u32,
        None => (host.cpus.len() as u32).max(1),
    }
}

impl VmPlatform {
    fn unenforceable(key: &'static str, why: &'static str) -> anyhow::Error {
        PlatformError::NotEnforceable {
            key,
            platform: "vm",
            why,
            fix: "the `cgroup` platform",
        }
        .into()
    }
}

/// Refuses the memory knobs a guest cannot have. QEMU's cgroup holds the guest's whole
/// memory and QEMU's own, so a protection or a soft limit on it does not act on the guest's
/// page cache as it does on a tenant's; CPU, cpuset and io knobs act on QEMU's threads and
/// disk file as the quota and throttles do.
fn refuse_memory_knobs(l: &Limits) -> Result<(), PlatformError> {
    PlatformError::refuse_set(
        l,
        "vm",
        "the `cgroup` platform",
        &["memory_min", "memory_low", "memory_high", "swap"].map(|key| {
            (
                key,
                "the guest's memory is a fixed allocation inside QEMU's cgroup: a protection, \
                 threshold or swap on that cgroup does not act on the guest's own memory",
            )
        }),
    )
}

impl VmPlatform {
    /// Refuses what a guest cannot have; returns the guest's memory.
    fn check_guest_spec(&self, spec: &TenantSpec) -> Result<u64> {
        crate::tenant::check_spec(spec, &Default::default(), &self.host, super::KIND)?;
        refuse_memory_knobs(&spec.limits)?;
        if spec.network.as_ref().is_some_and(|n| n.mtu.is_some()) {
            return Err(Self::unenforceable(
                "mtu",
                "the guest's interface keeps the default MTU",
            ));
        }
        if spec.network.is_some() {
            crate::net::check_available().map_err(|why| PlatformError::Unavailable {
                kind: "network (TAP)".into(),
                why,
                fix: "run isobench as root with iproute2 installed, or give the tenant no network"
                    .into(),
            })?;
        }
        let guest_memory = spec.limits.memory.unwrap_or(DEFAULT_GUEST_MEMORY);
        if guest_memory < (128 << 20) {
            bail!(
                "tenant {}: a guest needs at least 128 MiB of memory (memory={} MiB); raise \
                 the memory limit",
                spec.name,
                guest_memory >> 20
            );
        }
        Ok(guest_memory)
    }

    /// Makes what the guest needs in its `workdir` (the disk) and beside it (a TAP on the
    /// bridge); returns the disk, the agent's socket and the TAP.
    fn prepare_guest(
        &self,
        spec: &TenantSpec,
        workdir: &Path,
    ) -> Result<(PathBuf, PathBuf, Option<TenantTap>)> {
        let disk = workdir.join(DISK_FILE);
        let socket = workdir.join(AGENT_SOCKET);
        if socket.as_os_str().len() >= 100 {
            bail!(
                "the agent socket {} is too long for a unix socket; choose a shorter workdir",
                socket.display()
            );
        }
        make_disk(&disk).with_context(|| format!("making the disk of tenant {}", spec.name))?;
        // A guest's loopback is its own kernel's: without an address on the bridge nothing
        // beside it (a load generator, another tenant's forwarder) reaches its services, so
        // every guest gets one whenever this host can make it.
        let tap = if spec.network.is_some() || crate::net::check_available().is_ok() {
            Some(self.net.create_tap(&spec.limits)?)
        } else {
            None
        };
        Ok((disk, socket, tap))
    }
}

/// What the tenant's notes say about its guest.
fn guest_notes(
    spec: &TenantSpec,
    cpus: u32,
    guest_memory: u64,
    guest_pids: Option<u64>,
    initrd_bytes: u64,
) -> Vec<String> {
    let mut notes = Vec::new();
    if spec.limits.memory.is_none() {
        notes.push(format!(
            "guest memory {} MiB (no memory limit given)",
            DEFAULT_GUEST_MEMORY >> 20
        ));
    }
    if spec.limits.pids.is_none() && guest_pids.is_some() {
        notes.push(format!(
            "safe default pids={SAFE_GUEST_PIDS} inside the guest"
        ));
    }
    notes.push(format!(
        "{cpus} vCPU(s), {} MiB guest memory; QEMU's cgroup holds {} MiB (guest + QEMU)",
        guest_memory >> 20,
        (guest_memory + QEMU_OVERHEAD + initrd_bytes) >> 20
    ));
    if let Some(set) = &spec.limits.cpuset {
        notes.push(format!(
            "vCPUs numbered as the host's CPUs: the agent runs on vCPUs {set}, each pinned \
             to the host CPU of its number"
        ));
    }
    notes
}

/// The spec of the cgroup tenant QEMU runs in: CPU, cpuset and io limits as given,
/// `memory` for the guest plus QEMU, pids for QEMU's threads, no network.
fn qemu_spec(spec: &TenantSpec, memory: u64) -> TenantSpec {
    let mut host_limits = spec.limits.clone();
    host_limits.memory = Some(memory);
    host_limits.pids = Some(QEMU_PIDS);
    host_limits.net_egress = None;
    host_limits.net_ingress = None;
    TenantSpec {
        name: spec.name.clone(),
        role: spec.role,
        limits: host_limits,
        network: None,
        workdir: spec.workdir.clone(),
        deadline: spec.deadline,
        image: None,
    }
}

impl Platform for VmPlatform {
    fn kind(&self) -> PlatformKind {
        super::KIND
    }

    fn describe(&self) -> String {
        format!(
            "vm: {}, {} ({}), kernel {} ({}); QEMU in {}",
            self.qemu_version,
            self.accel.name(),
            match &self.accel {
                Accel::Kvm => "hardware virtualization".to_string(),
                Accel::Tcg(why) => format!("software emulation: {why}"),
            },
            self.kernel.image.display(),
            self.kernel.source,
            self.cgroup.describe()
        )
    }

    fn notes(&self) -> Vec<String> {
        match &self.accel {
            Accel::Kvm => Vec::new(),
            Accel::Tcg(why) => vec![format!(
                "vm: guests run under TCG software emulation ({why}); their speed figures are \
                 not representative of a virtual machine with hardware virtualization (a \
                 guest runs several times slower than the host), so compare degradations \
                 within this run only"
            )],
        }
    }

    fn host(&self) -> &HostInfo {
        &self.host
    }

    fn create_tenant(&mut self, spec: &TenantSpec) -> Result<Box<dyn Tenant>> {
        // ---- Checks: nothing is created before all of them pass. ----
        let guest_memory = self.check_guest_spec(spec)?;
        let cpus = guest_cpus(&spec.limits, &self.host);
        let guest_pids = spec.limits.pids.or(match spec.role {
            Role::Aggressor => Some(SAFE_GUEST_PIDS),
            Role::Victim => None,
        });
        let initrd_bytes = fs::metadata(&self.initrd).map(|m| m.len()).unwrap_or(0);
        let notes = guest_notes(spec, cpus, guest_memory, guest_pids, initrd_bytes);

        // ---- The cgroup QEMU runs in: CPU, cpuset and io limits as given, memory for the
        // guest plus QEMU, pids for QEMU's threads. ----
        let jail = self.cgroup.create_tenant(&qemu_spec(
            spec,
            guest_memory + QEMU_OVERHEAD + initrd_bytes,
        ))?;
        let workdir = jail.workdir().to_path_buf();
        let (disk, socket, tap) = match self.prepare_guest(spec, &workdir) {
            Ok(made) => made,
            Err(e) => {
                let _ = jail.teardown();
                return Err(e);
            }
        };
        let mut info = jail.info().clone();
        info.platform = super::KIND;
        info.limits = spec.limits.clone();
        if info.limits.memory.is_none() {
            info.limits.memory = Some(guest_memory);
        }
        info.limits.pids = guest_pids;
        info.limits.io_write_bps = jail.info().limits.io_write_bps;
        info.notes
            .retain(|n| !n.contains("memory=") && !n.contains("pids="));
        info.notes.extend(notes);
        info.address = tap.as_ref().map(|t| t.address());
        info.host_link = tap.as_ref().map(|t| t.name().to_string());
        let config = GuestConfig {
            name: info.object_name.clone(),
            kernel: self.kernel.image.clone(),
            initrd: self.initrd.clone(),
            cpus,
            memory_mib: guest_memory >> 20,
            agent_socket: socket,
            console_log: workdir.join("console.log"),
            guest_workdir: workdir.display().to_string(),
            disk: Some(disk),
            net: tap.as_ref().map(|t| (t.name().to_string(), t.address())),
            pids: guest_pids,
            agent_cpus: spec.limits.cpuset.as_ref().map(|c| c.to_string()),
            accel: self.accel.clone(),
        };
        Ok(Box::new(VmTenant {
            info,
            jail,
            config,
            cpuset: spec.limits.cpuset.as_ref().map(|s| s.iter().collect()),
            tap: Mutex::new(tap),
            running: Mutex::new(None),
        }))
    }

    fn teardown(&mut self) -> Result<()> {
        self.cgroup.teardown()
    }
}

/// A sparse raw disk image with an ext4 file system (made on the host; the guest's kernel
/// has ext4 built in).
fn make_disk(path: &Path) -> Result<()> {
    let f = fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    f.set_len(DISK_BYTES)
        .with_context(|| format!("sizing {}", path.display()))?;
    drop(f);
    let p = path.display().to_string();
    let o = cmd::run_with_timeout(
        "mkfs.ext4",
        &[
            "-q",
            "-F",
            "-m",
            "0",
            "-E",
            "lazy_itable_init=1,lazy_journal_init=1",
            &p,
        ],
        Duration::from_secs(60),
    )
    .context("running mkfs.ext4 (install e2fsprogs)")?;
    if !o.success {
        bail!("mkfs.ext4 {p} failed: {}", o.stderr.trim());
    }
    Ok(())
}

/// A tenant of the `vm` platform.
pub(crate) struct VmTenant {
    info: TenantInfo,
    /// The cgroup tenant QEMU runs in (it owns the workdir).
    jail: Box<dyn Tenant>,
    config: GuestConfig,
    cpuset: Option<Vec<u32>>,
    tap: Mutex<Option<TenantTap>>,
    /// The pid of the QEMU process of the running guest.
    running: Mutex<Option<u32>>,
}

impl VmTenant {
    /// Starts QEMU in the tenant's cgroup and waits for the guest's agent. The guest's
    /// console goes to `console.log` in the workdir (where the boot is watched) and is
    /// copied to `log` as it grows; QEMU's own messages go to `log` directly.
    fn boot(&self, log: &Path) -> Result<(std::os::unix::net::UnixStream, Child, Duration)> {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pid) = *running {
            if crate::procs::alive(pid as i32) {
                bail!(
                    "tenant {}: its guest (QEMU pid {pid}) is still running; close its agent \
                     connection first",
                    self.info.name
                );
            }
        }
        let config = &self.config;
        let _ = fs::remove_file(&config.agent_socket);
        let offset = fs::metadata(&config.console_log)
            .map(|m| m.len())
            .unwrap_or(0);
        let cmd: Command = guest::command(config, log)?;
        let mut child = self
            .jail
            .spawn(cmd)
            .with_context(|| format!("starting QEMU for tenant {}", self.info.name))?;
        *running = Some(child.id());
        drop(running);
        guest::copy_console(&config.console_log, offset, log, child.id());
        let started = Instant::now();
        let result = (|| {
            self.pin_vcpus(child.id())?;
            guest::wait_ready(&mut child, config, offset, guest::BOOT_TIMEOUT)
        })();
        match result {
            Ok((stream, _)) => Ok((stream, child, started.elapsed())),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(e.context(format!("booting the guest of tenant {}", self.info.name)))
            }
        }
    }

    /// Pins vCPU `n` to host CPU `n` when the cpuset has it, else (a vCPU the agent does not
    /// use) to the cpuset's first CPU.
    fn pin_vcpus(&self, pid: u32) -> Result<()> {
        let Some(set) = &self.cpuset else {
            return Ok(());
        };
        let t0 = Instant::now();
        loop {
            let threads = qemu::vcpu_threads(pid);
            let all = threads.iter().any(|(_, v)| v.is_none());
            if all || threads.len() >= self.config.cpus as usize {
                for (tid, v) in threads {
                    let cpus = match v {
                        Some(n) if set.contains(&n) => vec![n],
                        Some(_) => vec![set[0]],
                        None => set.clone(),
                    };
                    qemu::pin_thread(tid, &cpus)?;
                }
                return Ok(());
            }
            if t0.elapsed() > Duration::from_secs(20) || !crate::procs::alive(pid as i32) {
                // QEMU died or never named its threads: the cgroup's cpuset still holds.
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Tenant for VmTenant {
    fn name(&self) -> &str {
        &self.info.name
    }

    fn info(&self) -> &TenantInfo {
        &self.info
    }

    fn spawn(&self, cmd: Command) -> Result<Child> {
        bail!(
            "tenant {} is a guest of the `vm` platform: `{}` cannot be started inside it from \
             the host; everything in a guest runs through its agent",
            self.info.name,
            cmd.get_program().to_string_lossy()
        )
    }

    fn start_agent(&self, launch: &AgentLaunch) -> Result<AgentConnection> {
        let (stream, child, _) = self.boot(&launch.log)?;
        let reader = stream
            .try_clone()
            .context("duplicating the agent's socket")?;
        Ok(AgentConnection::new(
            reader,
            stream,
            Transport::VirtioSerial,
            Some(child),
        ))
    }

    fn usage(&self) -> Result<Usage> {
        self.jail.usage()
    }

    fn effective_limits(&self) -> Result<Limits> {
        let mut l = self.jail.effective_limits()?;
        // The guest's own memory and pids, not QEMU's cgroup's.
        l.memory = self.info.limits.memory;
        l.pids = self.info.limits.pids;
        // Rates live in tc, as configured.
        l.net_ingress = self.info.limits.net_ingress;
        l.net_egress = self.info.limits.net_egress;
        Ok(l)
    }

    fn address(&self) -> Option<IpAddr> {
        self.info.address.map(IpAddr::V4)
    }

    /// A guest's loopback is its own kernel's: services bind to its address on the bridge.
    fn service_address(&self) -> Option<IpAddr> {
        self.address()
    }

    fn workdir(&self) -> &Path {
        self.jail.workdir()
    }

    fn killer(&self) -> Killer {
        let inner = self.jail.killer();
        Killer::new(self.info.name.clone(), move || inner.kill())
    }

    fn set_frozen(&self, frozen: bool) -> Result<()> {
        self.jail.set_frozen(frozen)
    }

    fn update_limits(&self, changes: &crate::live::LimitChanges) -> Result<Limits> {
        super::KIND
            .capabilities()
            .live_knobs
            .refuse("vm", changes)
            .with_context(|| format!("changing the limits of tenant {}", self.info.name))?;
        self.jail.update_limits(changes)?;
        self.effective_limits()
    }

    fn expired(&self) -> bool {
        self.jail.expired()
    }

    fn teardown(&self) -> Result<()> {
        let r = self.jail.teardown();
        if let Some(mut tap) = self.tap.lock().unwrap_or_else(|p| p.into_inner()).take() {
            tap.teardown()?;
        }
        r
    }
}

impl Drop for VmTenant {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::CpuList;

    #[test]
    fn the_memory_knobs_a_guest_cannot_have_are_refused_by_name() {
        for (text, key) in [
            ("memory_min=64M", "memory_min"),
            ("memory_low=64M", "memory_low"),
            ("memory_high=64M", "memory_high"),
            ("memory=1G,swap=1G", "swap"),
            ("memory_low=64M,memory_min=64M", "memory_min"),
        ] {
            let e = refuse_memory_knobs(&Limits::parse(text).unwrap()).unwrap_err();
            assert!(
                matches!(e, PlatformError::NotEnforceable { key: k, platform: "vm", .. } if k == key),
                "{text}: {e:?}"
            );
        }
        refuse_memory_knobs(&Limits::parse("cpus=1,memory=1G,io_weight=50").unwrap()).unwrap();
    }

    #[test]
    fn vcpus_follow_the_limits() {
        let host = HostInfo {
            cpus: CpuList::from_cpus([0, 1, 2, 3]),
            mems: CpuList::from_cpus([0]),
            memory_bytes: 8 << 30,
        };
        let mut l = Limits::default();
        assert_eq!(guest_cpus(&l, &host), 4);
        l.cpus = Some(1.5);
        assert_eq!(guest_cpus(&l, &host), 2);
        l.cpus = Some(0.2);
        assert_eq!(guest_cpus(&l, &host), 1);
        // With a cpuset, vCPU numbers are the host's: up to its highest CPU.
        l.cpuset = Some(CpuList::from_cpus([3]));
        assert_eq!(guest_cpus(&l, &host), 4);
        l.cpuset = Some(CpuList::from_cpus([0, 1]));
        assert_eq!(guest_cpus(&l, &host), 2);
    }
}
