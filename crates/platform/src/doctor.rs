//! `isobench doctor`: for each platform and control, whether it works here and why not.
//!
//! Every check is done for real: a throwaway cgroup per controller with a limit written,
//! a process started inside one and killed by freezing, a throwaway namespace, bridge, veth
//! pair and tbf qdisc, the container and VM tools asked for their version, /dev/kvm opened.
//! The throwaway objects belong to a run of their own and are removed before returning.

use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

use crate::blockdev::device_for_path;
use crate::cgroup::{self, placement, CgroupFs, CgroupVersion, Controller, TenantCgroup};
use crate::cmd;
use crate::guard::RunGuard;
use crate::hostinfo::HostInfo;
use crate::limits::{CpuList, Limits};
use crate::procs;
use crate::run::{self, RunContext, RunId, LINK_PREFIX};
use crate::sentinel::{Sentinel, SentinelConfig};

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// What was checked (`cgroup memory`, `netns`, `docker`, ...).
    pub name: String,
    /// Whether it works here.
    pub ok: bool,
    /// What was found, or why it does not work and what to do.
    pub detail: String,
}

impl std::fmt::Display for Check {
    /// `ok   name  detail` or `FAIL name  detail`, one line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = if self.ok { "ok" } else { "FAIL" };
        write!(f, "{status:<4} {:<20} {}", self.name, self.detail)
    }
}

impl Check {
    fn new(name: impl Into<String>, r: Result<String>) -> Check {
        match r {
            Ok(detail) => Check {
                name: name.into(),
                ok: true,
                detail,
            },
            Err(e) => Check {
                name: name.into(),
                ok: false,
                detail: format!("{e:#}"),
            },
        }
    }
}

/// Runs every check. Needs no privileges; without root most checks fail with the reason.
pub fn doctor() -> Vec<Check> {
    let mut checks = Vec::new();
    let root = procs::euid() == 0;
    checks.push(Check::new(
        "root",
        if root {
            Ok("running as root".into())
        } else {
            Err(anyhow!(
                "running as uid {}: the cgroup platform, network namespaces and tc need root; \
                 run isobench as root",
                procs::euid()
            ))
        },
    ));
    let host = HostInfo::detect();
    checks.push(Check::new(
        "host",
        host.as_ref()
            .map(|h| {
                format!(
                    "CPUs {} ({}), memory nodes {}, {} MiB RAM",
                    h.cpus,
                    h.cpus.len(),
                    h.mems,
                    h.memory_bytes >> 20
                )
            })
            .map_err(|e| anyhow!("{e:#}")),
    ));
    checks.push(Check::new(
        "platform host",
        Ok("plain processes, no isolation (the baseline)".into()),
    ));

    let guard = RunGuard::start_without_sweep();
    let ctx = guard.as_ref().ok().map(|g| g.context());
    let run = match &guard {
        Ok(g) => Some(g.id().clone()),
        Err(e) => {
            checks.push(Check::new(
                "state dir",
                Err(anyhow!("{e:#}").context(format!(
                    "creating a run under {}",
                    run::state_root().display()
                ))),
            ));
            None
        }
    };

    checks.extend(cgroup_checks(root, ctx.as_ref(), host.as_ref().ok()));
    checks.extend(net_checks(root, run.as_ref()));
    checks.push(Check::new("workdir device", {
        let p = run::default_workdir_root();
        device_for_path(&p)
            .map(|d| format!("{} is on {d}: io limits apply there", p.display()))
            .map_err(|why| anyhow!("{}: {why}; io limits need a workdir on a disk", p.display()))
    }));
    checks.push(Check::new("sentinel", sentinel_check()));
    checks.extend(oci_checks());
    checks.push(Check::new(
        "qemu",
        tool_version("qemu-system-x86_64", &["--version"]),
    ));
    checks.push(Check::new("kvm", kvm_check()));
    checks.extend(vm_checks());

    if let Ok(g) = guard {
        let report = g.finish();
        if !report.failed.is_empty() {
            checks.push(Check::new(
                "doctor cleanup",
                Err(anyhow!("could not remove: {}", report.to_string().trim())),
            ));
        }
    }
    checks
}

fn need_root(root: bool) -> Result<()> {
    if !root {
        bail!("needs root");
    }
    Ok(())
}

fn cgroup_checks(root: bool, ctx: Option<&RunContext>, host: Option<&HostInfo>) -> Vec<Check> {
    let run = ctx.map(|c| c.id());
    let mut checks = Vec::new();
    let fs = CgroupFs::detect();
    checks.push(Check::new(
        "cgroup",
        fs.as_ref()
            .map(|fs| fs.describe())
            .map_err(|e| anyhow!("{e:#}")),
    ));
    if let Ok(fs) = &fs {
        hybrid_checks(fs, &mut checks);
    }
    // On v2, the tenants go where the run's placement puts them (a delegated scope under
    // systemd): say where and why, and check there.
    // The delegation (a systemd scope and its holder) lives until every check below has run:
    // dropping it ends the scope.
    let (fs, _delegation) = match (fs, ctx) {
        (Ok(fs), Some(run)) if fs.version() == CgroupVersion::V2 && root => {
            placement_checks(fs, run, &mut checks)
        }
        (fs, _) => (fs, None),
    };
    let (Ok(fs), Some(run), Some(host)) = (fs, run, host) else {
        checks.push(Check::new(
            "platform cgroup",
            Err(anyhow!("no usable cgroup filesystem, run or host facts")),
        ));
        return checks;
    };
    let dev = device_for_path(&run::default_workdir_root()).ok();
    let tests: [(Controller, &str); 5] = [
        (Controller::Cpu, "cpus=0.5,shares=512"),
        (Controller::Cpuset, "cpuset=0"),
        (Controller::Memory, "memory=64M"),
        (Controller::Pids, "pids=16"),
        (Controller::Io, "io_write_bps=100M"),
    ];
    let mut essentials_ok = root;
    for (c, limits) in tests {
        let r = need_root(root)
            .and_then(|()| controller_check(&fs, run, host, dev.as_ref(), c, limits));
        if r.is_err() && matches!(c, Controller::Cpu | Controller::Memory | Controller::Pids) {
            essentials_ok = false;
        }
        checks.push(Check::new(
            format!("cgroup {}", c.v2_name().unwrap_or(c.v1_name())),
            r,
        ));
    }
    checks.push(Check::new("cgroup memory swap", swap_check(&fs)));
    let r = need_root(root).and_then(|()| freeze_kill_check(&fs, run));
    if r.is_err() {
        essentials_ok = false;
    }
    checks.push(Check::new("cgroup freeze+kill", r));
    checks.push(Check::new(
        "platform cgroup",
        if essentials_ok {
            Ok(format!("cgroup {} tenants work", fs.version()))
        } else {
            Err(anyhow!(
                "see the cgroup checks above; use `--platform host` meanwhile"
            ))
        },
    ));
    checks
}

/// On a v1 host, says which cgroup2 mounts there are beside it (a hybrid layout) and that
/// isobench uses v1.
fn hybrid_checks(fs: &CgroupFs, checks: &mut Vec<Check>) {
    if fs.version() != CgroupVersion::V1 {
        return;
    }
    let mounts = cgroup::host_mounts().unwrap_or_default();
    for m in mounts.iter().filter(|m| m.fstype == "cgroup2") {
        let ctl = if m.controllers.is_empty() {
            "no controllers".to_string()
        } else {
            format!("controllers: {}", m.controllers.join(" "))
        };
        checks.push(Check::new(
            "cgroup v2 (hybrid)",
            Ok(format!(
                "{} is cgroup2 with {ctl}; the resource controllers are bound to v1, so \
                 isobench uses v1",
                m.path.display()
            )),
        ));
    }
}

/// On v2, whether systemd manages the tree and where run `run`'s placement puts the
/// tenants; returns the cgroup filesystem the tenants then use, and the delegation, which
/// must be kept while its scope is used.
fn placement_checks(
    fs: CgroupFs,
    run: &RunContext,
    checks: &mut Vec<Check>,
) -> (Result<CgroupFs>, Option<placement::Delegation>) {
    let mount = fs.hierarchies()[0].root.clone();
    let facts = placement::V2Facts::detect(&mount);
    checks.push(Check::new(
        "cgroup v2 systemd",
        Ok(if facts.systemd {
            "systemd is the init: it owns the cgroups it made".to_string()
        } else {
            "no systemd: nothing else manages the cgroup tree".to_string()
        }),
    ));
    match placement::for_run(fs, run) {
        Ok((fs, d)) => {
            checks.push(Check::new(
                "cgroup placement",
                Ok(d.as_ref()
                    .map_or_else(|| fs.describe(), |d| d.describe().to_string())),
            ));
            (Ok(fs), d)
        }
        Err(e) => {
            checks.push(Check::new("cgroup placement", Err(anyhow!("{e:#}"))));
            (Err(e), None)
        }
    }
}

/// Makes a throwaway cgroup with `limits` for controller `c` and reads them back.
fn controller_check(
    fs: &CgroupFs,
    run: &RunId,
    host: &HostInfo,
    dev: Option<&crate::blockdev::BlockDevice>,
    c: Controller,
    limits: &str,
) -> Result<String> {
    if !fs.has(c) {
        bail!("not available ({})", fs.describe());
    }
    let mut l = Limits::parse(limits)?;
    if c == Controller::Cpuset {
        let first_cpu = host.cpus.iter().next().unwrap_or(0);
        l.cpuset = Some(CpuList::from_cpus([first_cpu]));
    }
    let d = if c == Controller::Io {
        Some(
            dev.context("no block device under /var/tmp to throttle")?
                .dev,
        )
    } else {
        None
    };
    let name = run.object_name(&format!("doctor-{c}"));
    let cg = TenantCgroup::create(fs, &name, &l, d)?;
    let back = cg.read_limits(d);
    let removed = cg.remove(Duration::from_secs(5));
    let back = back?;
    removed?;
    Ok(read_back(c, &back))
}

/// How swap is turned off per tenant.
fn swap_check(fs: &CgroupFs) -> Result<String> {
    let file = match fs.version() {
        CgroupVersion::V1 => "memory.memsw.limit_in_bytes",
        CgroupVersion::V2 => "memory.swap.max",
    };
    match fs.hierarchy_of(Controller::Memory) {
        Some(h) if h.root.join(file).exists() || fs.version() == CgroupVersion::V2 => {
            Ok(format!("swap is turned off per tenant with {file}"))
        }
        Some(_) => Ok(format!(
            "{file} is missing: swap is turned off with memory.swappiness=0"
        )),
        None => Err(anyhow!("no memory controller")),
    }
}

/// Starts a process inside a throwaway cgroup, checks it is there, kills it by freezing.
fn freeze_kill_check(fs: &CgroupFs, run: &RunId) -> Result<String> {
    let name = run.object_name("doctor-kill");
    let cg = TenantCgroup::create(fs, &name, &Limits::default(), None)?;
    let r = (|| -> Result<String> {
        let fds = cg.join_fds()?;
        let mut cmd = Command::new("sleep");
        cmd.arg("60").stdin(Stdio::null()).stdout(Stdio::null());
        // SAFETY: the closure only writes to descriptors it owns.
        unsafe {
            cmd.pre_exec(move || {
                for fd in &fds {
                    if libc::write(fd.as_raw_fd(), b"0".as_ptr().cast(), 1) != 1 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().context("starting `sleep` in the cgroup")?;
        let pid = child.id() as i32;
        let inside = cg.procs().contains(&pid);
        let killed = cg.kill_all(Duration::from_secs(5));
        let _ = child.kill();
        let _ = child.wait();
        let killed = killed?;
        if !inside {
            bail!("a started process was not in its cgroup");
        }
        if !killed.contains(&pid) {
            bail!("the process was not killed by the cgroup teardown");
        }
        Ok("a process started inside its cgroup was frozen and killed".into())
    })();
    let removed = cg.remove(Duration::from_secs(5));
    let r = r?;
    removed?;
    Ok(r)
}

fn net_checks(root: bool, run: Option<&RunId>) -> Vec<Check> {
    let mut checks = Vec::new();
    let Some(run) = run else {
        return checks;
    };
    let ns = run.object_name("doctor");
    checks.push(Check::new(
        "netns",
        (|| -> Result<String> {
            need_root(root)?;
            crate::net::check_available().map_err(|e| anyhow!(e))?;
            cmd::ip(&["netns", "add", &ns])?;
            crate::net::delete_netns(&ns)?;
            Ok("network namespace created and removed".into())
        })(),
    ));
    let br = format!("{LINK_PREFIX}{}b", run.tag());
    let h = format!("{LINK_PREFIX}{}h0", run.tag());
    let p = format!("{LINK_PREFIX}{}p0", run.tag());
    let links = (|| -> Result<String> {
        need_root(root)?;
        cmd::ip(&["link", "add", "name", &br, "type", "bridge"])?;
        cmd::ip(&[
            "link", "add", "name", &h, "type", "veth", "peer", "name", &p,
        ])?;
        cmd::ip(&["link", "set", "dev", &h, "master", &br])?;
        Ok("bridge and veth pair created".into())
    })();
    let links_ok = links.is_ok();
    checks.push(Check::new("bridge+veth", links));
    checks.push(Check::new(
        "tc tbf",
        (|| -> Result<String> {
            need_root(root)?;
            if !links_ok {
                bail!("no veth to test on");
            }
            cmd::tc(&[
                "qdisc", "add", "dev", &h, "root", "tbf", "rate", "10mbit", "burst", "16kb",
                "latency", "50ms",
            ])?;
            let shown = cmd::tc(&["qdisc", "show", "dev", &h])?;
            if !shown.contains("tbf") {
                bail!("the tbf qdisc does not show up: {}", shown.trim());
            }
            Ok("tbf rate limit applied to a veth".into())
        })(),
    ));
    if root {
        for l in [&h, &br] {
            if Path::new("/sys/class/net").join(l).exists() {
                let _ = cmd::ip(&["link", "del", l]);
            }
        }
    }
    if let Ok(out) = std::fs::read_to_string("/proc/sys/net/bridge/bridge-nf-call-iptables") {
        if out.trim() == "1" {
            checks.push(Check::new(
                "bridge netfilter",
                Ok(
                    "bridge-nf-call-iptables=1: iptables FORWARD rules also filter traffic \
                    between tenants; if tenants cannot reach each other, check them"
                        .into(),
                ),
            ));
        }
    }
    checks
}

/// What a controller's check wrote and read back, in the words of `--limits`
/// (`cpus=0.5,shares=512`), or that nothing came back.
fn read_back(c: Controller, back: &Limits) -> String {
    let only = match c {
        Controller::Cpu => Limits {
            cpus: back.cpus,
            cpu_weight: back.cpu_weight,
            ..Limits::default()
        },
        Controller::Cpuset => Limits {
            cpuset: back.cpuset.clone(),
            ..Limits::default()
        },
        Controller::Memory => Limits {
            memory: back.memory,
            ..Limits::default()
        },
        Controller::Pids => Limits {
            pids: back.pids,
            ..Limits::default()
        },
        _ => Limits {
            io_write_bps: back.io_write_bps,
            ..Limits::default()
        },
    };
    let text = only.to_string();
    if text.is_empty() {
        "limit written, but not read back".into()
    } else {
        format!("limit written and read back: {text}")
    }
}

fn sentinel_check() -> Result<String> {
    let s = Sentinel::start(SentinelConfig::default(), |_| {})?;
    let p = s.priority();
    s.stop();
    Ok(format!("heartbeat thread priority: {p}"))
}

fn tool_version(prog: &str, args: &[&str]) -> Result<String> {
    let out = cmd::run_with_timeout(prog, args, Duration::from_secs(15))
        .map_err(|e| anyhow!("{e:#}"))
        .with_context(|| format!("`{prog}` is not installed or not runnable"))?;
    if !out.success {
        let why = out
            .stderr
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
            .to_string();
        bail!("`{prog} {}` failed: {why}", args.join(" "));
    }
    Ok(out.stdout.lines().next().unwrap_or("").trim().to_string())
}

/// The `oci` platform: each engine (usable, or why not and the fix), and what the agent
/// image is built from (the static isobench binary and a static busybox).
fn oci_checks() -> Vec<Check> {
    use crate::oci::{image, Engine};
    let mut checks = vec![Check::new(
        "platform oci",
        crate::oci::available()
            .map_err(|e| anyhow!("{e}"))
            .and_then(|()| {
                let choice = crate::oci::engine_choice(None);
                let e = Engine::detect(choice.as_deref()).map_err(|u| anyhow!("{u}"))?;
                Ok(match choice {
                    Some(_) => format!("containers with {} ({})", e.kind(), crate::oci::ENV_ENGINE),
                    None => format!(
                        "containers with {} (by default; {}=docker|podman chooses)",
                        e.kind(),
                        crate::oci::ENV_ENGINE
                    ),
                })
            }),
    )];
    // Each engine, and the init its containers start with (the engine's, the host's
    // catatonit, tini or dumb-init, or isobench's own).
    for (name, found) in [("docker", Engine::docker()), ("podman", Engine::podman())] {
        match found {
            Ok(e) => {
                checks.push(Check::new(name, Ok(e.describe())));
                let init = crate::oci::InitRequest::from_option_or_env(None)
                    .and_then(|r| crate::oci::init::for_engine(&e, &r));
                checks.push(Check::new(
                    format!("{name} init"),
                    init.map(|i| format!("containers start with {i}")),
                ));
            }
            Err(u) => checks.push(Check::new(name, Err(anyhow!("{u}")))),
        }
    }
    checks.extend([
        Check::new(
            "static isobench",
            crate::staticexe::find()
                .map(|p| format!("{} (carried by container images)", p.display())),
        ),
        Check::new(
            "static busybox",
            image::find_busybox().map(|p| format!("{} (the images' shell and tools)", p.display())),
        ),
    ]);
    checks
}

fn kvm_check() -> Result<String> {
    const KVM_GET_API_VERSION: libc::c_ulong = 0xAE00;
    const KVM_CREATE_VM: libc::c_ulong = 0xAE01;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .context("opening /dev/kvm (VMs will use TCG emulation)")?;
    // SAFETY: KVM ioctls without argument on an open /dev/kvm descriptor.
    let api = unsafe { libc::ioctl(f.as_raw_fd(), KVM_GET_API_VERSION as _, 0) };
    if api != 12 {
        bail!("KVM API version {api}, expected 12");
    }
    // SAFETY: as above; the returned descriptor is closed right away.
    let vm = unsafe { libc::ioctl(f.as_raw_fd(), KVM_CREATE_VM as _, 0) };
    if vm < 0 {
        bail!("KVM_CREATE_VM failed: {}", std::io::Error::last_os_error());
    }
    // SAFETY: `vm` is a descriptor we own.
    unsafe { libc::close(vm) };
    Ok("/dev/kvm opens and creates a VM (guests may still be slow or hang when nested)".into())
}
/// The `vm` platform's prerequisites: busybox-static, the guest kernel, the static isobench
/// binary, and the accelerator guests get (KVM only when a guest really boots with it).
fn vm_checks() -> Vec<Check> {
    use crate::vm::{initramfs, kernel, qemu};
    let mut checks = vec![Check::new("vm busybox", {
        let p = Path::new(initramfs::BUSYBOX);
        match initramfs::is_static_elf(p) {
            Ok(true) => Ok(format!("{} is static", p.display())),
            Ok(false) => Err(anyhow!(
                "{} is dynamically linked; install busybox-static",
                p.display()
            )),
            Err(e) => Err(anyhow!("{e:#}; install busybox-static")),
        }
    })];
    let k = kernel::recorded().ok().flatten();
    checks.push(Check::new(
        "vm kernel",
        match &k {
            Some(k) => Ok(format!("{} ({})", k.image.display(), k.source)),
            None => Err(anyhow!("no guest kernel; run `isobench vm setup`")),
        },
    ));
    checks.push(Check::new(
        "vm static isobench",
        crate::staticexe::find().map(|p| p.display().to_string()),
    ));
    checks.push(Check::new(
        "vm kvm-or-tcg",
        match (&k, qemu::qemu_version()) {
            (_, Err(e)) => Err(e),
            (None, Ok(_)) => Err(anyhow!(
                "no kernel to boot a test guest with; run `isobench vm setup`"
            )),
            (Some(k), Ok(_)) => Ok(match qemu::accel(&k.image) {
                qemu::Accel::Kvm => "kvm: a test guest booted with it".to_string(),
                qemu::Accel::Tcg(why) => format!(
                    "tcg: {why}; guests run under software emulation (speed figures are not \
                     representative)"
                ),
            }),
        },
    ));
    checks
}
