//! Probes and stressors: the measurement code of isobench.
//!
//! Everything here is plain Rust and libc, with no async and no knowledge of platforms,
//! storage or rendering. A probe runs in a well-behaved tenant and returns [`Metric`]s; a
//! stressor misbehaves at an intensity until told to stop and reports its own work rate, so
//! the misbehaving tenant's own slowdown can be measured too.
//!
//! The catalogue is two explicit tables, [`PROBES`] and [`STRESSORS`]. A workload that cannot
//! run on this host stays listed; its `supported` says why.
#![deny(missing_docs)]

pub mod cachesize;
pub mod canary;
pub mod ctx;
pub mod env;
pub mod metric;
pub mod netserve;
pub mod params;
pub mod probes;
pub mod stressors;
pub mod timer;
pub mod util;

pub use ctx::{ProbeCtx, StressCtx};
pub use env::{CacheInfo, Env, HostFacts, Unsupported};
pub use metric::{Aggregate, Direction, LatencyHistogram, Metric, MetricSpec, Window};
pub use params::{ParamError, ParamKind, ParamSpec, ParamValues};
pub use probes::PROBES;
pub use stressors::STRESSORS;

/// Version of the JSON documents isobench writes (probe, stress and list output).
pub const SCHEMA_VERSION: u32 = 1;

/// The kind of resource a workload measures or contends for.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    /// CPU time.
    Cpu,
    /// Shared caches.
    Cache,
    /// Memory bandwidth, latency and capacity.
    Memory,
    /// Block I/O.
    Disk,
    /// Networking.
    Net,
    /// Process creation, scheduling and system calls.
    Process,
    /// Application-level workloads (HTTP).
    App,
}

impl Class {
    /// Lower-case name, as shown by `isobench list`.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Cpu => "cpu",
            Class::Cache => "cache",
            Class::Memory => "memory",
            Class::Disk => "disk",
            Class::Net => "net",
            Class::Process => "process",
            Class::App => "app",
        }
    }
}

/// A victim micro-benchmark.
///
/// `run` measures for real and returns at least the metrics listed by `metrics`.
pub trait Probe: Sync {
    /// Unique kebab-case name (`cache-latency`).
    fn name(&self) -> &'static str;
    /// One paragraph: what is measured and how.
    fn help(&self) -> &'static str;
    /// Resource class.
    fn class(&self) -> Class;
    /// Parameters with defaults and ranges.
    fn params(&self) -> &'static [ParamSpec];
    /// The metrics `run` returns (names may carry a variant suffix documented in `help`).
    fn metrics(&self) -> &'static [MetricSpec];
    /// Whether the probe can run here, and if not why.
    fn supported(&self, env: &Env) -> Result<(), Unsupported>;
    /// Runs the probe once with validated parameters.
    fn run(&self, ctx: &ProbeCtx, params: &ParamValues) -> anyhow::Result<Vec<Metric>>;
    /// True when `run` returns a window series ([`Metric::series`]) for its main metrics
    /// whenever [`ProbeCtx::window`] is set. Such a probe can be measured with the on/off
    /// design; the others only with paired trials.
    fn windowed(&self) -> bool {
        false
    }
}

/// What a stressor did while it ran.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StressReport {
    /// Operations completed (the unit is `op_unit`).
    pub ops: u64,
    /// Wall time of the run loop, seconds.
    pub elapsed_s: f64,
    /// `ops / elapsed_s`.
    pub ops_per_sec: f64,
    /// What one operation is ("copy of 1 MiB", "fork+exit", "datagram").
    pub op_unit: String,
    /// Threads or processes the stressor used.
    pub workers: u32,
    /// Bytes moved, when the stressor moves bytes (disk, net, membw), else 0.
    pub bytes: u64,
    /// Extra facts worth recording (e.g. `oom_survived`, `fork_failures`).
    pub notes: Vec<String>,
}

/// An aggressor: misbehaves at an intensity until its context's stop flag is set.
pub trait Stressor: Sync {
    /// Unique kebab-case name (`membw`).
    fn name(&self) -> &'static str;
    /// One paragraph: what the misbehaviour is.
    fn help(&self) -> &'static str;
    /// Resource class contended.
    fn class(&self) -> Class;
    /// How `intensity` 0..=100 maps to the stressor's knob (documented text).
    fn intensity_knob(&self) -> &'static str;
    /// Parameters with defaults and ranges (intensity-independent knobs).
    fn params(&self) -> &'static [ParamSpec];
    /// True for stressors that can take the host down unless contained (fork bomb,
    /// memory hog, disk flood): refused on the unisolated host platform without an
    /// explicit override.
    fn aggressive(&self) -> bool {
        false
    }
    /// Whether the stressor can run here, and if not why.
    fn supported(&self, env: &Env) -> Result<(), Unsupported>;
    /// Runs the stress loop until `ctx.running()` turns false; counts work with `ctx.add_ops`.
    fn run(&self, ctx: &StressCtx, params: &ParamValues) -> anyhow::Result<StressReport>;
    /// What of the stressor's effect outlasts a freeze of its tenant (memory it holds, pids
    /// it keeps, dirty page cache being written back), when something does. Such a stressor
    /// is measured with paired trials (stopped, then started), never with the on/off design,
    /// which freezes and thaws it.
    fn lingering_effect(&self, _params: &ParamValues) -> Option<&'static str> {
        None
    }
}

/// Finds a probe by name.
pub fn probe(name: &str) -> Option<&'static dyn Probe> {
    PROBES.iter().copied().find(|p| p.name() == name)
}

/// Finds a stressor by name.
pub fn stressor(name: &str) -> Option<&'static dyn Stressor> {
    STRESSORS.iter().copied().find(|s| s.name() == name)
}

/// Names closest to `name` among `candidates`, best first (for "did you mean").
pub fn nearest_names<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Vec<&'a str> {
    let mut scored: Vec<(usize, &str)> = candidates
        .into_iter()
        .map(|c| {
            let d = util::edit_distance(name, c);
            let bonus = if c.contains(name) || name.contains(c) {
                0
            } else {
                1
            };
            (d * 2 + bonus, c)
        })
        .filter(|(d, c)| *d <= (c.len().max(name.len()) + 1).max(4))
        .collect();
    scored.sort();
    scored.into_iter().take(3).map(|(_, c)| c).collect()
}
