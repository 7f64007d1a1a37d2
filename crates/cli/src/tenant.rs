//! Running one workload inside a fresh tenant: the `--platform`/`--limits` path of
//! `isobench probe` and `isobench stress`.
//!
//! The flags are checked here (platform name, limit keys and values); the library's
//! [`LoneTenant`] checks the limits against the host, starts a run (sweeping dead runs),
//! creates the tenant and starts `isobench agent` inside it. This module wires that to the
//! terminal: the signal and panic handling that tears the run down on every exit path
//! (normal end, error, Ctrl-C, panic), and the report of what was swept.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use isobench_experiment::session::SessionError;
use isobench_experiment::tenant_agent::{LoneTenant, TenantRequest};
use isobench_experiment::PlatformChoice;
use isobench_platform::{Limits, PlatformKind, Role, RunContext};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use crate::exit::{bad_input, unsupported};

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

/// Opens the lone tenant of `probe`/`stress --platform` (see [`LoneTenant::open`]): Ctrl-C
/// and a panic remove the run's objects from the moment the run exists (Ctrl-C sets `stop`
/// first when there is one), and what dead runs left and the run swept is reported.
pub fn open(
    req: &TenantRequest,
    tenant_name: &str,
    role: Role,
    aggressive: bool,
    deadline: Option<Duration>,
    stop: Option<Arc<AtomicBool>>,
) -> anyhow::Result<LoneTenant> {
    LoneTenant::open(req, tenant_name, role, aggressive, deadline, |guard| {
        install_interrupt(guard.context(), stop)?;
        for line in guard.swept().summary() {
            eprintln!("isobench: removed what a dead run left: {line}");
        }
        Ok(())
    })
    .map_err(|e| match e {
        SessionError::BadInput(m) => bad_input(format!("--limits: {m}")),
        SessionError::Unsupported(m) => unsupported(m),
        SessionError::Other(e) => e,
        e => anyhow::Error::new(e),
    })
}
