//! Running one workload inside a fresh tenant: the `--platform`/`--limits` path of
//! `isobench probe` and `isobench stress`.
//!
//! Everything is checked before anything is created (platform name, limit keys and values,
//! limits against the host). Then a run is started (sweeping dead runs), the tenant is
//! created, `isobench agent` is started inside it and driven over its stdio. The run guard
//! tears the tenant down on every exit path: normal end, error, Ctrl-C, panic.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::Context as _;
use isobench_agent::AgentClient;
use isobench_experiment::PlatformChoice;
use isobench_platform::{
    platform, AgentLaunch, AgentProcess, Limits, Platform, PlatformKind, PlatformOptions, Role,
    RunContext, RunGuard, Tenant, TenantSpec,
};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use crate::exit::{bad_input, unsupported};

/// What the user asked for, validated.
pub struct TenantRequest {
    pub kind: PlatformKind,
    pub limits: Limits,
}

/// The run Ctrl-C and a panic act on: the latest one [`install_interrupt`] was given (runs
/// on several platforms follow each other in one process).
struct Interrupt {
    run: Option<RunContext>,
    stop: Option<Arc<AtomicBool>>,
}

static CURRENT: Mutex<Interrupt> = Mutex::new(Interrupt {
    run: None,
    stop: None,
});
static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();

/// Installs the Ctrl-C and panic handling of a run: the first Ctrl-C (or SIGTERM, SIGHUP)
/// sets `stop` when there is one (the caller then ends the run normally and exits with 128 +
/// the signal: 130, 143, 129); otherwise, or on a second signal, every object of the run is
/// removed at once and the process exits with that code. A panic removes
/// everything too before the default panic report. Called again for a later run, the
/// handling moves to it (the handlers themselves are installed once per process).
pub fn install_interrupt(run: RunContext, stop: Option<Arc<AtomicBool>>) -> anyhow::Result<()> {
    install(Some(run), stop)
}

/// The same for a run with nothing to remove (the fake platform): Ctrl-C sets `stop`.
pub fn install_stop(stop: Arc<AtomicBool>) -> anyhow::Result<()> {
    install(None, Some(stop))
}

fn install(run: Option<RunContext>, stop: Option<Arc<AtomicBool>>) -> anyhow::Result<()> {
    *CURRENT.lock().unwrap_or_else(|p| p.into_inner()) = Interrupt { run, stop };
    let installed = INSTALLED.get_or_init(|| {
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
            .map_err(|e| format!("installing the signal handlers: {e}"))?;
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                for (n, signal) in signals.forever().enumerate() {
                    crate::exit::note_signal(signal);
                    let cur = CURRENT.lock().unwrap_or_else(|p| p.into_inner());
                    match (&cur.stop, n) {
                        (Some(s), 0) => s.store(true, Ordering::SeqCst),
                        _ => {
                            eprintln!("isobench: interrupted; removing the run's tenants");
                            if let Some(run) = &cur.run {
                                let r = run.cleanup_now();
                                for f in &r.failed {
                                    eprintln!("isobench: could not remove {f}");
                                }
                            }
                            std::process::exit(i32::from(crate::exit::interrupted()));
                        }
                    }
                }
            })
            .map_err(|e| format!("starting the signal thread: {e}"))?;
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // A panic while the state is held must still report.
            if let Ok(cur) = CURRENT.try_lock() {
                if let Some(run) = &cur.run {
                    let _ = run.cleanup_now();
                }
            }
            default_hook(info);
        }));
        Ok(())
    });
    installed.clone().map_err(anyhow::Error::msg)
}

/// Parses `--limits` for a tenant on `kind` (clap has parsed `--platform`), without creating
/// anything.
pub fn parse_request(
    platform: PlatformChoice,
    limits: Option<&str>,
) -> anyhow::Result<TenantRequest> {
    // The tenant's `--platform` parser accepts no `auto`.
    let kind = platform.kind().unwrap_or(PlatformKind::HOST);
    let limits = match limits {
        Some(s) => Limits::parse(s).map_err(|e| bad_input(format!("--limits: {e}")))?,
        None => Limits::none(),
    };
    Ok(TenantRequest { kind, limits })
}

/// A live tenant with an agent inside. Field order is drop order: the agent goes first,
/// then the tenant, the platform, and last the run guard that removes whatever is left.
pub struct Session {
    pub client: AgentClient,
    process: AgentProcess,
    pub tenant: Box<dyn Tenant>,
    platform: Box<dyn Platform>,
    pub guard: RunGuard,
    /// Containment limits filled in for an aggressive stressor, for the record.
    pub filled: Vec<String>,
}

impl Session {
    /// Creates the tenant and starts the agent in it.
    ///
    /// `aggressive`: the workload is a fork bomb, memory hog or disk flood: on `cgroup` the
    /// missing containment limits are filled with safe defaults.
    pub fn open(
        req: &TenantRequest,
        tenant_name: &str,
        role: Role,
        aggressive: bool,
        deadline: Option<Duration>,
        stop: Option<Arc<AtomicBool>>,
    ) -> anyhow::Result<Session> {
        let guard = RunGuard::start().context("starting a run")?;
        install_interrupt(guard.context(), stop)?;
        for line in guard.swept().summary() {
            eprintln!("isobench: removed what a dead run left: {line}");
        }
        let mut platform =
            platform(req.kind, PlatformOptions::new(guard.context())).map_err(|e| {
                match e.downcast_ref::<isobench_platform::PlatformError>() {
                    Some(pe) => unsupported(pe.to_string()),
                    None => e,
                }
            })?;
        req.limits
            .validate(platform.host())
            .map_err(|e| bad_input(format!("--limits: {e}")))?;
        let mut limits = req.limits.clone();
        let mut filled = Vec::new();
        if aggressive && platform.capabilities().contains_aggressors {
            (limits, filled) = limits.with_safe_defaults(platform.host());
        }
        let mut spec = TenantSpec::new(tenant_name, role).with_limits(limits);
        if let Some(d) = deadline {
            spec = spec.with_deadline(d);
        }
        let tenant = platform
            .create_tenant(&spec)
            .with_context(|| format!("creating tenant {tenant_name} on {}", req.kind))?;
        let launch = AgentLaunch {
            exe: std::env::current_exe().context("locating the isobench binary")?,
            // The agent's complaints go where this command's do; a guest's console (its
            // kernel's messages) to a file in its workdir.
            log: if req.kind.capabilities().agent == isobench_platform::Transport::Stdio {
                "/dev/stderr".into()
            } else {
                tenant.workdir().join("console.log")
            },
        };
        let (reader, writer, process) = tenant
            .start_agent(&launch)
            .context("starting the agent in the tenant")?
            .split();
        let client = AgentClient::new(tenant_name, reader, writer);
        client.hello().context("greeting the agent")?;
        Ok(Session {
            client,
            process,
            tenant,
            platform,
            guard,
            filled,
        })
    }

    /// Says bye to the agent, tears the tenant down and removes the run's objects.
    pub fn close(self) -> anyhow::Result<()> {
        let Session {
            client,
            mut process,
            tenant,
            mut platform,
            guard,
            ..
        } = self;
        let _ = client.bye();
        process.close(Duration::from_secs(5));
        tenant.teardown()?;
        platform.teardown()?;
        let report = guard.finish();
        for f in &report.failed {
            tracing::warn!("could not remove {f}");
        }
        Ok(())
    }
}
