//! The tenant both container platforms share: a container (`oci`) or a pod (`k8s`) that
//! lives as long as the tenant.
//!
//! Every process, the agent first, is started through the runtime's `exec -i`, so it lands
//! in the container's cgroups and namespaces; the container's cgroups on this machine are
//! read back, frozen and killed in by isobench directly. What differs between the
//! platforms (the exec command line, how the container goes, what its limits and usage
//! are read from) sits behind [`Runtime`].

use std::ffi::OsString;
use std::net::IpAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::agent::{AgentConnection, AgentLaunch};
use crate::cgroup::TenantCgroup;
use crate::limits::Limits;
use crate::live::LimitChanges;
use crate::oci::exec::{is_isobench, ExecImage};
use crate::run::RunContext;
use crate::tenant::{Killer, TeardownErrors, Tenant, TenantInfo};
use crate::usage::Usage;
use crate::watchdog::Watchdog;

/// What a container tenant keeps whatever runs the container.
pub(crate) struct Container {
    pub(crate) info: TenantInfo,
    /// Where the static isobench is in the container: the agent image's `/isobench`, or
    /// the one mounted into a user's image.
    pub(crate) exe: &'static str,
    /// The container's own processes: the container ends when they do, so the killer
    /// spares them.
    pub(crate) keep: Vec<i32>,
    pub(crate) cgroup: TenantCgroup,
    pub(crate) run: RunContext,
}

/// The part of a container tenant that depends on what runs the container.
pub(crate) trait Runtime: Send + Sync + 'static {
    /// The container as messages name it: `container <name>`, `pod <ns>/<pod>`.
    fn describe(&self) -> String;

    /// The program on the host that execs into the container (the engine's CLI, kubectl).
    fn cli(&self) -> &Path;

    /// The arguments of [`Runtime::cli`] that run `program args` in the container, in
    /// `dir`, with `env` added.
    fn exec_args(
        &self,
        c: &Container,
        program: OsString,
        args: Vec<OsString>,
        dir: &Path,
        env: Vec<(OsString, OsString)>,
    ) -> Result<Vec<OsString>>;

    /// Removes the container, whose processes are already killed.
    fn remove(&self) -> Result<()>;

    /// Releases what the container used besides itself (its network).
    fn release(&self) -> Result<()> {
        Ok(())
    }

    /// The container's resource usage.
    fn usage(&self, c: &Container) -> Result<Usage>;

    /// The limits in force on the container.
    fn effective_limits(&self, c: &Container) -> Result<Limits>;

    /// Changes the limits of the living container, returning the ones then in force.
    fn update_limits(&self, c: &Container, changes: &LimitChanges) -> Result<Limits>;

    /// The container's address on the run's bridge, if it has one.
    fn address(&self, c: &Container) -> Option<IpAddr>;
}

/// What `create_tenant` made, shared with the killer and the watchdog.
struct Inner<R> {
    container: Container,
    runtime: R,
    torn_down: AtomicBool,
}

impl<R: Runtime> Inner<R> {
    /// Kills every process of the tenant but the container's own.
    fn kill_processes(&self) -> Result<usize> {
        let c = &self.container;
        Ok(c.cgroup
            .kill_all_except(&c.keep, Duration::from_secs(10))
            .with_context(|| format!("killing the processes of tenant {}", c.info.name))?
            .len())
    }

    fn teardown(&self) -> Result<()> {
        if self.torn_down.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let c = &self.container;
        let mut errors = TeardownErrors::default();
        // Kills everything in the cgroups first, the container's own processes too
        // (thawing them, lifting io throttles), so the runtime never waits on a frozen or
        // throttled task and only has an ended container to remove.
        let _ = c.cgroup.kill_all(Duration::from_secs(10));
        errors.step(self.runtime.remove());
        errors.step(self.runtime.release());
        errors.remove_workdir(&c.info.workdir);
        errors.finish(&c.info, &c.run)
    }
}

/// A tenant of a container platform.
pub(crate) struct ContainerTenant<R: Runtime> {
    inner: Arc<Inner<R>>,
    expired: Arc<AtomicBool>,
    watchdog: Mutex<Option<Watchdog>>,
}

impl<R: Runtime> ContainerTenant<R> {
    pub(crate) fn new(container: Container, runtime: R) -> ContainerTenant<R> {
        let inner = Arc::new(Inner {
            container,
            runtime,
            torn_down: AtomicBool::new(false),
        });
        let target = inner.clone();
        let info = &inner.container.info;
        let (watchdog, expired) =
            Watchdog::for_tenant(&info.name, info.deadline_s, move || target.kill_processes());
        ContainerTenant {
            inner,
            expired,
            watchdog: Mutex::new(watchdog),
        }
    }
}

impl<R: Runtime> Tenant for ContainerTenant<R> {
    fn name(&self) -> &str {
        &self.inner.container.info.name
    }

    fn info(&self) -> &TenantInfo {
        &self.inner.container.info
    }

    /// Runs `cmd` with the runtime's `exec -i` in the container: the isobench binary
    /// becomes the image's (`/isobench`, or the one mounted into a user's image), the
    /// command's environment is passed on (the host's is not), and its directory (else the
    /// workdir, mounted at the same path) is the working directory. The returned child is
    /// the runtime's CLI, which relays the streams and the exit status.
    fn spawn(&self, mut cmd: Command) -> Result<Child> {
        let Inner {
            container: c,
            runtime,
            torn_down,
        } = &*self.inner;
        if torn_down.load(Ordering::SeqCst) {
            bail!("tenant {} has been torn down", c.info.name);
        }
        let program = if is_isobench(cmd.get_program()) {
            OsString::from(c.exe)
        } else {
            cmd.get_program().to_owned()
        };
        let shown = program.to_string_lossy().into_owned();
        let args: Vec<OsString> = cmd.get_args().map(|a| a.to_owned()).collect();
        let dir: PathBuf = cmd
            .get_current_dir()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| c.info.workdir.clone());
        let env: Vec<(OsString, OsString)> = cmd
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
            .collect();
        let argv = runtime.exec_args(c, program, args, &dir, env)?;
        let image = ExecImage::new(runtime.cli(), &argv, std::env::vars_os())?;
        // The CLI runs on the host, in the directory the caller chose if it exists here
        // (the workdir does), else where isobench runs.
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
                "starting `{shown}` in {} of tenant {}",
                runtime.describe(),
                c.info.name
            )
        })
    }

    fn start_agent(&self, launch: &AgentLaunch) -> Result<AgentConnection> {
        crate::tenant::spawn_agent(self, self.inner.container.exe, &launch.log)
    }

    fn usage(&self) -> Result<Usage> {
        self.inner.runtime.usage(&self.inner.container)
    }

    fn effective_limits(&self) -> Result<Limits> {
        self.inner.runtime.effective_limits(&self.inner.container)
    }

    fn address(&self) -> Option<IpAddr> {
        self.inner.runtime.address(&self.inner.container)
    }

    fn workdir(&self) -> &Path {
        &self.inner.container.info.workdir
    }

    fn killer(&self) -> Killer {
        let inner = self.inner.clone();
        Killer::new(self.name().to_string(), move || inner.kill_processes())
    }

    fn set_frozen(&self, frozen: bool) -> Result<()> {
        self.inner
            .container
            .cgroup
            .set_frozen(frozen, crate::cgroup::FREEZE_TIMEOUT)
    }

    fn update_limits(&self, changes: &LimitChanges) -> Result<Limits> {
        self.inner
            .runtime
            .update_limits(&self.inner.container, changes)
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

impl<R: Runtime> Drop for ContainerTenant<R> {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            tracing::warn!("{e:#}");
        }
    }
}
