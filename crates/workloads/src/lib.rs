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
pub mod extract;
pub mod metric;
pub mod netserve;
pub mod params;
pub mod probes;
pub mod program;
pub mod stressors;
/// Skipping a unit test with its reason, recorded for `scripts/test`'s list (test-only).
#[cfg(test)]
#[path = "../../../tests/skip.rs"]
pub(crate) mod test_skip;
pub mod timer;
pub mod util;

pub use ctx::{ProbeCtx, StressCtx};
pub use env::{CacheInfo, Env, HostFacts, Unsupported};
pub use metric::{
    Aggregate, DeclaredMetric, Direction, LatencyHistogram, Metric, MetricSpec, Window,
};
pub use params::{ParamError, ParamKind, ParamSpec, ParamValues};
pub use probes::PROBES;
pub use stressors::STRESSORS;

/// Version of the JSON documents isobench writes (probe, stress and list output).
pub const SCHEMA_VERSION: u32 = 1;

pub use isobench_common::Class;

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
    /// The metrics `run` returns (names may carry a variant suffix documented in `help`),
    /// as the catalogue lists them. A probe whose metrics depend on its parameters lists
    /// placeholders here; [`Probe::metrics_for`] gives the real ones.
    fn metrics(&self) -> &'static [MetricSpec];
    /// The metrics `run` returns with `params`: what a scenario's `metrics = [...]` may
    /// name and what a plan reads directions and units from. The default is
    /// [`Probe::metrics`]; a probe whose parameters name its metric (`command`) returns that
    /// one. Parameters too broken to say fall back to [`Probe::metrics`]: the run reports
    /// what is wrong with them.
    fn metrics_for(&self, _params: &ParamValues) -> Vec<DeclaredMetric> {
        self.metrics().iter().map(DeclaredMetric::from).collect()
    }
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
    /// Fills in the sizes the probe would otherwise derive at run time from the memory it
    /// may use, so that a plan records them: `budget` is what its tenant leaves to workloads
    /// (the memory limit less the agent's share), `caches` the machine's caches as the
    /// controller measured them. Returns what was chosen (`block size 64M`), or `None` when
    /// the parameters leave nothing to derive.
    fn fit_sizes(
        &self,
        _params: &mut ParamValues,
        _budget: u64,
        _caches: &cachesize::HostCaches,
    ) -> Option<String> {
        None
    }
    /// Memory the probe touches at most with `params`, bytes, where the usable last-level
    /// cache is `llc`: what its tenant's memory limit must hold besides the agent, so a plan
    /// can refuse a limit that would measure paging instead of isolation.
    fn memory_need(&self, _params: &ParamValues, _llc: u64) -> u64 {
        0
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
    /// What the stressor actually delivered, in physical units (bytes/s, IOPS, datagrams/s,
    /// forks/s, resident bytes, busy CPUs), so intensities compare across platforms and
    /// machines where ops/s ("bogo-ops") do not. Empty for an idle run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pressure: Vec<Pressure>,
}

impl StressReport {
    /// The pressure named `name`, if the stressor reported it.
    pub fn pressure(&self, name: &str) -> Option<&Pressure> {
        self.pressure.iter().find(|p| p.name == name)
    }
}

/// One physical quantity a stressor delivered over its whole run.
///
/// Rates (`*_per_sec`, `cpu_threads`) are totals over all workers divided by the run loop's
/// wall time (`StressReport::elapsed_s`): they aggregate across tenants by summing. Levels
/// (`resident_bytes`, `ring_bytes`) are the amount held at the end of the run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Pressure {
    /// What is measured: `bytes_per_sec`, `iops`, `datagrams_per_sec`, `forks_per_sec`,
    /// `resident_bytes`, `ring_bytes` or `cpu_threads` (CPU-seconds per second).
    pub name: String,
    /// Unit of `value` (`B/s`, `IO/s`, `datagrams/s`, `forks/s`, `B`, `CPUs`).
    pub unit: String,
    /// The amount.
    pub value: f64,
}

impl Pressure {
    /// A pressure of `value` `unit`.
    pub fn new(name: &str, unit: &str, value: f64) -> Self {
        Pressure {
            name: name.into(),
            unit: unit.into(),
            value: if value.is_finite() { value } else { 0.0 },
        }
    }

    /// `amount` spread over `elapsed_s` seconds (0 when no time passed).
    pub fn rate(name: &str, unit: &str, amount: f64, elapsed_s: f64) -> Self {
        let v = if elapsed_s > 0.0 && elapsed_s.is_finite() {
            amount / elapsed_s
        } else {
            0.0
        };
        Self::new(name, unit, v)
    }
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
    /// Why the stressor's work is known only once it is stopped (a program that prints
    /// its total when it ends, as stress-ng does), when it is: its live counter then says
    /// nothing about a trial, so the engine starts it for each trial and reads its rate from
    /// the report of its stop.
    fn counts_at_stop(&self, _params: &ParamValues) -> Option<&'static str> {
        None
    }
    /// Memory the stressor touches at most with `params` at `intensity` in a tenant whose
    /// CPUs and memory `env` describes, bytes, where the usable last-level cache is `llc`.
    /// A stressor whose job is to exhaust memory (memhog) needs nothing here: its tenant's
    /// limit is what contains it.
    fn memory_need(&self, _params: &ParamValues, _env: &Env, _intensity: u8, _llc: u64) -> u64 {
        0
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
            let d = strsim::levenshtein(name, c);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_names_puts_one_typo_first() {
        let names = ["cache-latency", "cpu-latency", "disk-io"];
        assert_eq!(nearest_names("cache-latncy", names)[0], "cache-latency");
        assert!(nearest_names("zzzzzzzzzzzzzzzz", names).is_empty());
    }

    fn report(pressure: Vec<Pressure>) -> StressReport {
        StressReport {
            ops: 10,
            elapsed_s: 2.0,
            ops_per_sec: 5.0,
            op_unit: "op".into(),
            workers: 1,
            bytes: 0,
            notes: vec![],
            pressure,
        }
    }

    #[test]
    fn pressure_round_trips_and_is_optional_on_the_wire() {
        let r = report(vec![Pressure::rate("iops", "IO/s", 10.0, 2.0)]);
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains(r#""pressure":[{"name":"iops","unit":"IO/s","value":5.0}]"#));
        assert_eq!(serde_json::from_str::<StressReport>(&text).unwrap(), r);
        // A report without pressure (an idle run, or an older agent) omits and accepts it.
        let idle = report(vec![]);
        let text = serde_json::to_string(&idle).unwrap();
        assert!(!text.contains("pressure"), "{text}");
        assert_eq!(serde_json::from_str::<StressReport>(&text).unwrap(), idle);
    }

    #[test]
    fn pressure_rates_are_never_nan() {
        assert_eq!(Pressure::rate("x", "u", 5.0, 0.0).value, 0.0);
        assert_eq!(Pressure::new("x", "u", f64::NAN).value, 0.0);
    }
}
