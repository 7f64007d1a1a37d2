//! One tenant of the `oci` platform: a container that lives as long as the tenant.
//!
//! The container's own process is the engine's init (`--init`: it reaps the orphans a fork
//! bomb leaves) with a sleeping child; the agent and every other process are started with
//! `exec`, so they land in the container's cgroups and namespaces. The container exists from
//! `create_tenant` on: its cgroups (read back, frozen, throttled by isobench directly) and
//! its network are known before the first process starts, and a restarted agent finds the
//! same tenant.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io;
use std::net::IpAddr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

use super::engine::Engine;
use super::exec::{is_isobench, ExecImage};
use crate::agent::{AgentConnection, AgentLaunch};
use crate::cgroup::TenantCgroup;
use crate::limits::Limits;
use crate::live::{Knob, KnobSet, LimitChanges};
use crate::net::TenantNet;
use crate::procs;
use crate::run::RunContext;
use crate::tenant::{Killer, Tenant, TenantInfo, Usage};
use crate::watchdog::Watchdog;

/// Label carrying the run id on every container.
pub const RUN_LABEL: &str = "isobench.run";
/// Label carrying the tenant name on every container.
pub const TENANT_LABEL: &str = "isobench.tenant";

/// The knobs `docker update` and `podman update` both have a flag for: `--cpus`,
/// `--cpu-shares`, `--memory` with `--memory-swap`, `--memory-reservation` (memory_low),
/// `--pids-limit` and `--blkio-weight`. (Only podman's has `--device-*-bps`.)
pub(crate) const UPDATE_KNOBS: KnobSet = KnobSet::of(&[
    Knob::Cpus,
    Knob::CpuWeight,
    Knob::Memory,
    Knob::MemoryLow,
    Knob::Swap,
    Knob::Pids,
    Knob::IoWeight,
]);

/// The flags of the engine's `update` for the knobs `changes` sets, on a container whose
/// limits are `now` (`--memory-swap` is memory plus swap, so it follows either).
pub(crate) fn update_args(changes: &LimitChanges, now: &Limits) -> Result<Vec<String>> {
    let target = changes.applied_to(now);
    let set = KnobSet::set_in(&changes.set);
    let mut a = Vec::new();
    let mut flag = |k: &str, v: String| {
        a.push(k.to_string());
        a.push(v);
    };
    if let Some(c) = changes.set.cpus {
        flag("--cpus", format!("{c}"));
    }
    if let Some(w) = changes.set.cpu_weight {
        flag("--cpu-shares", w.as_shares().to_string());
    }
    if set.contains(Knob::Memory) || set.contains(Knob::Swap) {
        let Some(m) = target.memory else {
            bail!(
                "`swap` on the `oci` platform is --memory-swap, memory plus swap, so it needs a \
                 memory limit; set `memory` too"
            );
        };
        flag("--memory", m.to_string());
        flag("--memory-swap", (m + target.swap.unwrap_or(0)).to_string());
    }
    if let Some(r) = changes.set.memory_low {
        flag("--memory-reservation", r.to_string());
    }
    if let Some(p) = changes.set.pids {
        flag("--pids-limit", p.to_string());
    }
    if let Some(w) = changes.set.io_weight {
        if !(10..=1000).contains(&w) {
            bail!("io_weight={w} becomes --blkio-weight, which takes 10..1000; use a weight in that range");
        }
        flag("--blkio-weight", w.to_string());
    }
    Ok(a)
}

/// What `create_tenant` made, shared with the killer and the watchdog.
pub(crate) struct Inner {
    pub(crate) info: TenantInfo,
    /// Where the static isobench is in the container: the agent image's `/isobench`, or
    /// the one mounted into a user's image.
    pub(crate) exe: &'static str,
    pub(crate) engine: Engine,
    /// The container's name (`isobench-<run>-<tenant>`).
    pub(crate) container: String,
    /// The engine's init and its sleeping child: the container ends when they do, so the
    /// killer spares them.
    pub(crate) keep: Vec<i32>,
    pub(crate) cgroup: TenantCgroup,
    pub(crate) net: Mutex<Option<TenantNet>>,
    pub(crate) run: RunContext,
    pub(crate) torn_down: AtomicBool,
}

impl Inner {
    /// Kills every process of the tenant but the container's own.
    pub(crate) fn kill_processes(&self) -> Result<usize> {
        Ok(self
            .cgroup
            .kill_all_except(&self.keep, Duration::from_secs(10))
            .with_context(|| format!("killing the processes of tenant {}", self.info.name))?
            .len())
    }

    /// Removes the container: kills everything in its cgroups first (thawing them, lifting
    /// io throttles), so the engine never waits on a frozen or throttled task.
    fn remove_container(&self) -> Result<()> {
        let _ = self.cgroup.kill_all(Duration::from_secs(10));
        self.engine.remove_container(&self.container)
    }

    pub(crate) fn teardown(&self) -> Result<()> {
        if self.torn_down.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let mut errors: Vec<String> = Vec::new();
        if let Err(e) = self.remove_container() {
            errors.push(format!("{e:#}"));
        }
        if let Some(mut net) = self.net.lock().unwrap_or_else(|p| p.into_inner()).take() {
            if let Err(e) = net.teardown() {
                errors.push(format!("{e:#}"));
            }
        }
        match fs::remove_dir_all(&self.info.workdir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => errors.push(format!("removing {}: {e}", self.info.workdir.display())),
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(anyhow!(
                "tearing down tenant {} (run {}): {}",
                self.info.name,
                self.run.id(),
                errors.join("; ")
            ))
        }
    }
}

/// A tenant of the `oci` platform.
pub(crate) struct OciTenant {
    inner: Arc<Inner>,
    expired: Arc<AtomicBool>,
    watchdog: Mutex<Option<Watchdog>>,
}

impl OciTenant {
    pub(crate) fn new(inner: Inner) -> OciTenant {
        let inner = Arc::new(inner);
        let target = inner.clone();
        let (watchdog, expired) =
            Watchdog::for_tenant(&inner.info.name, inner.info.deadline_s, move || {
                target.kill_processes()
            });
        OciTenant {
            inner,
            expired,
            watchdog: Mutex::new(watchdog),
        }
    }

    /// The `exec` arguments (after the engine's global ones) that run `program args` in the
    /// container, in `dir`, with `env` added.
    fn exec_args(
        &self,
        program: OsString,
        args: impl IntoIterator<Item = OsString>,
        dir: &Path,
        env: Vec<(OsString, OsString)>,
    ) -> Vec<OsString> {
        let inner = &self.inner;
        let mut v: Vec<OsString> = inner
            .engine
            .global_args()
            .into_iter()
            .map(OsString::from)
            .collect();
        v.extend(["exec", "-i", "-w"].map(OsString::from));
        v.push(dir.as_os_str().to_owned());
        let tags = [
            (procs::ENV_RUN, OsString::from(inner.run.id().as_str())),
            (procs::ENV_TENANT, OsString::from(&inner.info.object_name)),
            (
                procs::ENV_WORKDIR,
                inner.info.workdir.as_os_str().to_owned(),
            ),
        ];
        for (k, val) in tags
            .into_iter()
            .map(|(k, v)| (OsString::from(k), v))
            .chain(env)
        {
            let mut kv = k;
            kv.push("=");
            kv.push(val);
            v.push("-e".into());
            v.push(kv);
        }
        v.push(OsString::from(&inner.container));
        v.push(program);
        v.extend(args);
        v
    }
}

impl Tenant for OciTenant {
    fn name(&self) -> &str {
        &self.inner.info.name
    }

    fn info(&self) -> &TenantInfo {
        &self.inner.info
    }

    /// Runs `cmd` with `exec -i` in the container: the isobench binary becomes the image's
    /// `/isobench` (`/.isobench/isobench` in a user's image), the command's environment is passed with `-e` (the host's is not), its
    /// directory (else the workdir, mounted at the same path) is the working directory. The
    /// returned child is the engine's CLI, which relays the streams and the exit status.
    fn spawn(&self, mut cmd: Command) -> Result<Child> {
        let inner = &self.inner;
        if inner.torn_down.load(Ordering::SeqCst) {
            bail!("tenant {} has been torn down", inner.info.name);
        }
        let program = if is_isobench(cmd.get_program()) {
            OsString::from(inner.exe)
        } else {
            cmd.get_program().to_owned()
        };
        let shown = program.to_string_lossy().into_owned();
        let args: Vec<OsString> = cmd.get_args().map(|a| a.to_owned()).collect();
        let dir = cmd
            .get_current_dir()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| inner.info.workdir.clone());
        let env: Vec<(OsString, OsString)> = cmd
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
            .collect();
        let argv = self.exec_args(program, args, &dir, env);
        let image = ExecImage::new(inner.engine.cli(), &argv, std::env::vars_os())?;
        // The engine's CLI runs on the host, in the directory the caller chose if it exists
        // here (the workdir does), else where isobench runs.
        if !dir.is_dir() {
            cmd.current_dir("/");
        }
        cmd.process_group(0);
        // SAFETY: the closure only calls execve(2) with data prepared before the fork.
        unsafe {
            cmd.pre_exec(move || Err(image.exec()));
        }
        cmd.spawn().with_context(|| {
            format!(
                "starting `{shown}` in container {} of tenant {}",
                inner.container, inner.info.name
            )
        })
    }

    fn start_agent(&self, launch: &AgentLaunch) -> Result<AgentConnection> {
        let log = File::options()
            .create(true)
            .append(true)
            .open(&launch.log)
            .with_context(|| format!("opening the agent's log {}", launch.log.display()))?;
        let mut cmd = Command::new(self.inner.exe);
        cmd.arg("agent")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log));
        let child = self
            .spawn(cmd)
            .with_context(|| format!("starting the agent in tenant {}", self.name()))?;
        AgentConnection::stdio(child)
    }

    fn usage(&self) -> Result<Usage> {
        Ok(self.inner.cgroup.usage())
    }

    fn effective_limits(&self) -> Result<Limits> {
        let inner = &self.inner;
        let mut l = inner
            .cgroup
            .read_limits(inner.info.io_device.as_ref().map(|d| d.dev))
            .with_context(|| format!("reading the limits of container {}", inner.container))?;
        l.net_egress = inner.info.limits.net_egress;
        l.net_ingress = inner.info.limits.net_ingress;
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

    fn set_frozen(&self, frozen: bool) -> Result<()> {
        self.inner
            .cgroup
            .set_frozen(frozen, crate::cgroup::FREEZE_TIMEOUT)
    }

    fn update_limits(&self, changes: &LimitChanges) -> Result<Limits> {
        let inner = &self.inner;
        let name = &inner.info.name;
        super::CAPS
            .live_knobs
            .refuse("oci", changes)
            .with_context(|| format!("changing the limits of tenant {name}"))?;
        crate::tenant::check_cpus_in_cpuset(&inner.info, changes)?;
        let now = self.effective_limits()?;
        let args = update_args(changes, &now)?;
        if !args.is_empty() {
            let mut argv: Vec<&str> = vec!["update"];
            argv.extend(args.iter().map(String::as_str));
            argv.push(&inner.container);
            inner
                .engine
                .change(&argv)
                .with_context(|| format!("changing the limits of tenant {name}"))?;
        }
        // The engine's update has no "unlimited" for most knobs: a lift goes to the
        // container's own cgroups, as freezing does.
        let lifts = LimitChanges {
            set: Limits::default(),
            lift: changes.lift,
        };
        if !lifts.is_empty() {
            inner
                .cgroup
                .update_limits(&lifts, inner.info.io_device.as_ref().map(|d| d.dev))
                .with_context(|| format!("lifting limits of tenant {name}"))?;
        }
        self.effective_limits()
    }

    fn expired(&self) -> bool {
        self.expired.load(Ordering::SeqCst)
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

impl Drop for OciTenant {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            tracing::warn!("{e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(s: &str) -> Limits {
        s.parse().unwrap()
    }

    #[test]
    fn a_change_becomes_the_engines_update_flags() {
        let now = l("cpus=1,memory=1G,swap=64M,pids=64");
        let c = LimitChanges {
            set: l("cpus=0.5,shares=512,memory=512M,memory_low=256M,pids=32,io_weight=200"),
            lift: KnobSet::NONE,
        };
        assert_eq!(
            update_args(&c, &now).unwrap().join(" "),
            "--cpus 0.5 --cpu-shares 512 --memory 536870912 --memory-swap 603979776 \
             --memory-reservation 268435456 --pids-limit 32 --blkio-weight 200"
        );
        // Swap alone follows the memory in force; a lift is no flag.
        let c = LimitChanges {
            set: l("swap=128M"),
            lift: KnobSet::of(&[Knob::Cpus]),
        };
        assert_eq!(
            update_args(&c, &now).unwrap().join(" "),
            "--memory 1073741824 --memory-swap 1207959552"
        );
        let e = update_args(&c, &l("cpus=1")).unwrap_err().to_string();
        assert!(e.contains("needs a memory limit"), "{e}");
    }

    #[test]
    fn the_knobs_without_an_update_flag_are_refused_with_the_reason() {
        for (set, key) in [
            ("memory_high=1G", "memory_high"),
            ("memory_min=1G", "memory_min"),
            ("io_read_bps=1M", "io_read_bps"),
            ("cpus=1,cpu_burst=1ms", "cpu_burst"),
        ] {
            let c = LimitChanges {
                set: l(set),
                lift: KnobSet::NONE,
            };
            let e = super::super::CAPS
                .live_knobs
                .refuse("oci", &c)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("cannot change `{key}` while a tenant lives"))
                    && e.contains("`docker update` has flags only for"),
                "{e}"
            );
        }
    }
}
