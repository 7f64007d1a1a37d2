//! What a running workload is given: the environment, a stop flag, CPU pinning, a time
//! budget and, for stressors, the intensity and a shared operation counter that can be
//! sampled while the stressor runs.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::env::Env;
use crate::netserve::process::OwnServer;

/// The executable [`ProbeCtx::detect`] puts in [`ProbeCtx::server_exe`].
static DEFAULT_SERVER_EXE: OnceLock<PathBuf> = OnceLock::new();

/// Tells every [`ProbeCtx::detect`] of this process which executable runs `serve` (the
/// isobench binary calls this once at start, so probes it runs, directly or as an agent, start
/// their own servers as processes). Returns false when it was already set.
pub fn set_default_server_exe(exe: PathBuf) -> bool {
    DEFAULT_SERVER_EXE.set(exe).is_ok()
}

/// What [`set_default_server_exe`] set, if anything.
pub fn default_server_exe() -> Option<&'static Path> {
    DEFAULT_SERVER_EXE.get().map(PathBuf::as_path)
}

/// Context of one probe run.
#[derive(Debug, Clone)]
pub struct ProbeCtx {
    /// The environment the probe sizes itself from.
    pub env: Env,
    /// Measured cost of one timer read, ns (subtracted from timed regions).
    pub timer_overhead_ns: f64,
    /// Pin the measuring thread to this CPU (and helpers to `pin_peer`).
    pub pin: Option<usize>,
    /// CPU for a second process or thread (peer of a ping-pong, reader of a pipe).
    pub pin_peer: Option<usize>,
    /// Rough wall-time budget for one run; probes scale their repetitions to it.
    pub budget: Duration,
    /// Directory for files.
    pub workdir: PathBuf,
    /// Set to abort early.
    pub stop: Arc<AtomicBool>,
    /// When set, a probe that can ([`crate::Probe::windowed`]) also returns its main metrics
    /// as a series of consecutive windows of about this length ([`crate::metric::Window`])
    /// covering the whole budget, warm-up excluded, so a neighbour switched on and off during
    /// the run can be compared window by window (the on/off design).
    pub window: Option<Duration>,
    /// The isobench binary, to run a network probe's own server in a process of its own
    /// (`EXE serve ...`, see [`crate::netserve::process`]). `None` (a library without the
    /// binary, as in tests): the server runs as threads of the probe's process.
    pub server_exe: Option<PathBuf>,
    /// Where the probe's own servers ran, appended as the probe starts them; the caller takes
    /// them after `run` to keep with the results.
    pub own_servers: Arc<Mutex<Vec<OwnServer>>>,
}

impl ProbeCtx {
    /// A context for the calling process with default budget (1 s), no pinning and the
    /// server executable of [`set_default_server_exe`].
    pub fn detect() -> Self {
        let env = Env::detect();
        ProbeCtx {
            workdir: env.workdir.clone(),
            env,
            timer_overhead_ns: crate::timer::timer_overhead_ns(),
            pin: None,
            pin_peer: None,
            budget: Duration::from_secs(1),
            stop: Arc::new(AtomicBool::new(false)),
            window: None,
            server_exe: default_server_exe().map(Path::to_path_buf),
            own_servers: Arc::default(),
        }
    }

    /// Takes the record of where the probe's own servers ran (see [`ProbeCtx::own_servers`]).
    pub fn take_own_servers(&self) -> Vec<OwnServer> {
        std::mem::take(&mut *self.own_servers.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// True when asked to abort.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Pins the calling thread to `self.pin`, if set.
    pub fn pin_self(&self) -> std::io::Result<()> {
        match self.pin {
            Some(cpu) => crate::util::pin_to_cpu(cpu),
            None => Ok(()),
        }
    }
}

/// Caps applied to aggressive stressors when they run without a containing tenant
/// (`--allow-unsafe-host`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StressCaps {
    /// Most processes or threads the stressor may create at once.
    pub max_tasks: Option<u32>,
    /// Most bytes of memory (memhog) or file (disk) the stressor may use.
    pub max_bytes: Option<u64>,
}

impl StressCaps {
    /// The caps of an aggressive stressor with no containing tenant (`--allow-unsafe-host`):
    /// 64 tasks, a quarter of `mem_usable` bytes and at most 1 GiB.
    pub fn uncontained(mem_usable: u64) -> Self {
        StressCaps {
            max_tasks: Some(64),
            max_bytes: Some((mem_usable / 4).min(1 << 30)),
        }
    }
}

/// Context of one stressor run.
#[derive(Debug, Clone)]
pub struct StressCtx {
    /// The environment the stressor sizes itself from.
    pub env: Env,
    /// Intensity 0..=100, mapped by each stressor to its knob.
    pub intensity: u8,
    /// Set to stop the run loop.
    pub stop: Arc<AtomicBool>,
    /// Operations so far (shared, so a controller can sample the live rate).
    pub ops: Arc<AtomicU64>,
    /// CPUs the stressor's workers are pinned to, round-robin.
    pub pin: Option<Vec<usize>>,
    /// Directory for files.
    pub workdir: PathBuf,
    /// Caps when uncontained.
    pub caps: StressCaps,
}

impl StressCtx {
    /// A context for the calling process at `intensity` with a fresh stop flag.
    pub fn new(env: Env, intensity: u8) -> Self {
        StressCtx {
            workdir: env.workdir.clone(),
            env,
            intensity: intensity.min(100),
            stop: Arc::new(AtomicBool::new(false)),
            ops: Arc::new(AtomicU64::new(0)),
            pin: None,
            caps: StressCaps::default(),
        }
    }

    /// True while the stressor should keep going.
    #[inline]
    pub fn running(&self) -> bool {
        !self.stop.load(Ordering::Relaxed)
    }

    /// Counts `n` operations.
    #[inline]
    pub fn add_ops(&self, n: u64) {
        self.ops.fetch_add(n, Ordering::Relaxed);
    }

    /// Operations so far.
    pub fn ops(&self) -> u64 {
        self.ops.load(Ordering::Relaxed)
    }

    /// Linear map of the intensity onto `lo..=hi` (intensity 0 gives `lo`, 100 gives `hi`).
    pub fn scale(&self, lo: u64, hi: u64) -> u64 {
        lo + (hi.saturating_sub(lo)) * self.intensity as u64 / 100
    }

    /// Number of worker threads for an intensity-scaled stressor: 1 at intensity 1..=50 on a
    /// 2-CPU tenant, one per allowed CPU at 100. Intensity 0 means zero workers (idle).
    pub fn workers_for_cpus(&self) -> u32 {
        if self.intensity == 0 {
            return 0;
        }
        let n = self.env.cpus.len().max(1) as u64;
        ((n * self.intensity as u64).div_ceil(100)).max(1) as u32
    }

    /// CPU for worker `i`, when pinning was asked for.
    pub fn cpu_for_worker(&self, i: usize) -> Option<usize> {
        self.pin
            .as_ref()
            .filter(|p| !p.is_empty())
            .map(|p| p[i % p.len()])
    }
}
