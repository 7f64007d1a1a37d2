//! The records the store reads and writes. They are plain data with serde, so a loaded run can
//! be exported as JSON as is.

use std::fmt;
use std::str::FromStr;

use isobench_common::{Direction, Role};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::time::Timestamp;

/// How histograms are encoded in the store: base64 of the HdrHistogram V2 + DEFLATE encoding,
/// which any HdrHistogram implementation can read.
pub const HISTOGRAM_ENCODING: &str = "hdr-v2-deflate-base64";

/// A run's id: `YYYYMMDD-HHMMSS-xxxxxx` (UTC start time and 24 random bits), short enough to
/// type, sortable by start time.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunId(String);

impl RunId {
    /// Wraps an id read from elsewhere (command line, URL).
    pub fn new(id: impl Into<String>) -> Self {
        RunId(id.into())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Defines a small text enum with `as_str`, `Display` and `FromStr`, stored as its word.
macro_rules! text_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $($(#[$vdoc])* $variant),+
        }

        impl $name {
            /// The word stored in the database.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(format!(
                        "{other:?} is not a valid {}; expected one of: {}",
                        stringify!($name),
                        [$($text),+].join(", ")
                    )),
                }
            }
        }
    };
}

text_enum! {
    /// Where a run stands.
    RunStatus {
        /// Trials are being measured (or the process died; see `ended_at`).
        Running => "running",
        /// Every planned trial was measured.
        Complete => "complete",
        /// Stopped early (Ctrl-C, timeout); can be resumed.
        Interrupted => "interrupted",
        /// Stopped by an error; the reason is recorded.
        Failed => "failed",
    }
}

text_enum! {
    /// Whether a stressor report was measured with the victim idle or busy.
    StressorMode {
        /// The stressor ran with no probe beside it.
        Alone => "alone",
        /// The stressor ran while the victim's probe ran.
        Contended => "contended",
    }
}

/// What the neighbours do during a trial. Text form: `baseline`, or the id the plan gives a
/// contended condition: `stressor@intensity` for the matrix (`cache@50`), the kind's own
/// label for other kinds (`disk:blocks=4`, `n=8`). Databases written when every condition
/// was `stressor@intensity` read the same.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Condition {
    /// Neighbours idle.
    Baseline,
    /// A contended condition, by its id in the plan.
    Contended(String),
}

/// Longest condition id.
const MAX_CONDITION_ID: usize = 128;

impl Condition {
    /// The matrix's condition of a stressor at an intensity (`cache@50`).
    pub fn stressor(name: impl std::fmt::Display, intensity: u8) -> Self {
        Condition::Contended(format!("{name}@{intensity}"))
    }

    /// A contended condition by its id.
    pub fn contended(id: impl Into<String>) -> Self {
        Condition::Contended(id.into())
    }

    /// Checks the id: 1 to 128 printable characters without spaces, not `baseline`.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            Condition::Baseline => Ok(()),
            Condition::Contended(id) => {
                if id.is_empty()
                    || id == "baseline"
                    || id.len() > MAX_CONDITION_ID
                    || id.chars().any(|c| c.is_whitespace() || c.is_control())
                {
                    return Err(format!(
                        "condition id {id:?} must be 1 to {MAX_CONDITION_ID} printable \
                         characters without spaces, and not \"baseline\""
                    ));
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Condition::Baseline => f.write_str("baseline"),
            Condition::Contended(id) => f.write_str(id),
        }
    }
}

impl FromStr for Condition {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s == "baseline" {
            return Ok(Condition::Baseline);
        }
        let c = Condition::contended(s);
        c.validate().map_err(|e| format!("condition {s:?}: {e}"))?;
        Ok(c)
    }
}

impl Serialize for Condition {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Condition {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// The outcome of a trial.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", content = "reason", rename_all = "snake_case")]
pub enum TrialStatus {
    /// Measured normally.
    Ok,
    /// Did not respond: the tenant or its agent stopped answering.
    Dnr(String),
    /// Measured, but something disturbed it (a neighbour outside the plan, throttling).
    Disturbed(String),
    /// The probe failed.
    Failed(String),
}

impl TrialStatus {
    /// The word stored in the database.
    pub fn as_str(&self) -> &'static str {
        match self {
            TrialStatus::Ok => "ok",
            TrialStatus::Dnr(_) => "dnr",
            TrialStatus::Disturbed(_) => "disturbed",
            TrialStatus::Failed(_) => "failed",
        }
    }

    /// The reason, for every status but `Ok`.
    pub fn reason(&self) -> Option<&str> {
        match self {
            TrialStatus::Ok => None,
            TrialStatus::Dnr(r) | TrialStatus::Disturbed(r) | TrialStatus::Failed(r) => Some(r),
        }
    }

    pub(crate) fn from_parts(status: &str, reason: Option<String>) -> Result<Self, String> {
        let need =
            |r: Option<String>| r.ok_or_else(|| format!("trial status {status} without a reason"));
        match status {
            "ok" => Ok(TrialStatus::Ok),
            "dnr" => Ok(TrialStatus::Dnr(need(reason)?)),
            "disturbed" => Ok(TrialStatus::Disturbed(need(reason)?)),
            "failed" => Ok(TrialStatus::Failed(need(reason)?)),
            other => Err(format!("{other:?} is not a trial status")),
        }
    }
}

/// A run about to start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewRun {
    /// Scenario name.
    pub scenario_name: String,
    /// The scenario file as given, byte for byte, so the run can be repeated.
    pub scenario_text: String,
    /// Seed of every random choice (trial order, bootstrap).
    pub seed: u64,
    /// isobench version.
    pub tool_version: String,
    /// When the run started.
    pub started_at: Timestamp,
    /// Host facts: CPU model, cores, caches, kernel, cgroup version... (a JSON object).
    pub host_facts: serde_json::Value,
    /// Platform name (`host`, `cgroup`, `oci`, `vm`, `k8s`).
    pub platform: String,
    /// Platform version (runtime, hypervisor or cluster version).
    pub platform_version: String,
}

/// A stored run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run's id.
    pub id: RunId,
    /// Scenario name.
    pub scenario_name: String,
    /// The scenario file as given.
    pub scenario_text: String,
    /// Seed.
    pub seed: u64,
    /// Status.
    pub status: RunStatus,
    /// Why the run ended the way it did, if it was said.
    pub status_reason: Option<String>,
    /// isobench version that started the run.
    pub tool_version: String,
    /// Schema version of the database when the run was created.
    pub schema_version: u32,
    /// Start time.
    pub started_at: Timestamp,
    /// End time, once finished.
    pub ended_at: Option<Timestamp>,
    /// Host facts (JSON).
    pub host_facts: serde_json::Value,
    /// Platform name.
    pub platform: String,
    /// Platform version.
    pub platform_version: String,
}

/// One line of [`Store::list_runs`](crate::Store::list_runs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The run's id.
    pub id: RunId,
    /// Scenario name.
    pub scenario_name: String,
    /// Status.
    pub status: RunStatus,
    /// Start time.
    pub started_at: Timestamp,
    /// End time, once finished.
    pub ended_at: Option<Timestamp>,
    /// Platform name.
    pub platform: String,
    /// Seed.
    pub seed: u64,
    /// Trials recorded, any status.
    pub trials: u64,
    /// Trials recorded with status `ok`.
    pub trials_ok: u64,
}

/// A tenant of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantRecord {
    /// Name, unique in the run.
    pub name: String,
    /// Victim or aggressor.
    pub role: Role,
    /// Platform that created it.
    pub platform: String,
    /// The exact limits applied (cpus, cpuset, memory, io, pids, net), as JSON.
    pub limits: serde_json::Value,
}

/// One metric value of a trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleRecord {
    /// Metric name, unique within the trial.
    pub metric: String,
    /// Unit.
    pub unit: String,
    /// Whether larger is better.
    pub direction: Direction,
    /// The value (finite).
    pub value: f64,
}

/// The latency distribution behind a metric of a trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistogramRecord {
    /// Metric the histogram belongs to.
    pub metric: String,
    /// Base64 of the HdrHistogram V2 + DEFLATE encoding ([`HISTOGRAM_ENCODING`]).
    pub base64: String,
}

/// An aggressor's own work rate during a trial, so its degradation is measured too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StressorReport {
    /// The aggressor tenant.
    pub tenant: String,
    /// Stressor name.
    pub stressor: String,
    /// Intensity, 0..=100.
    pub intensity: u8,
    /// Alone or beside the probe.
    pub mode: StressorMode,
    /// Operations completed.
    pub ops: f64,
    /// Operations per second.
    pub ops_per_sec: f64,
}

/// Identity of one trial within a run: where it stands in the plan. Stable across resumes, and
/// with the tenant's name unique among a run's records. The order of keys (round, block, slot,
/// attempt) is the order trials run in. Each field is a full `u32`: nothing is packed.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default,
)]
pub struct TrialKey {
    /// Round, from 0.
    pub round: u32,
    /// Block within the round, from 0.
    pub block: u32,
    /// Trial within the block, from 0.
    pub slot: u32,
    /// 0 for the first attempt; a disturbed trial is repeated with the next attempt number.
    pub attempt: u32,
}

impl fmt::Display for TrialKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}b{}s{}", self.round, self.block, self.slot)?;
        if self.attempt > 0 {
            write!(f, "a{}", self.attempt)?;
        }
        Ok(())
    }
}

impl TrialKey {
    /// The same trial's next attempt.
    pub fn retry(&self) -> TrialKey {
        TrialKey {
            attempt: self.attempt + 1,
            ..*self
        }
    }
}

/// One trial: one timed measurement of one probe under one condition, with everything it
/// produced. Recorded atomically by [`Store::record_trial`](crate::Store::record_trial).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialRecord {
    /// Position in the plan; with `tenant`, unique in the run: the key used to resume.
    pub key: TrialKey,
    /// Probe name.
    pub probe: String,
    /// The victim tenant the probe ran in.
    pub tenant: String,
    /// What the neighbours did.
    pub condition: Condition,
    /// Repetition number of this (probe, tenant, condition).
    pub repetition: u32,
    /// Outcome, with the reason unless ok.
    #[serde(flatten)]
    pub status: TrialStatus,
    /// Start time.
    pub started_at: Timestamp,
    /// End time.
    pub ended_at: Timestamp,
    /// Host load observed around the trial (load average, other busy processes), if noted.
    pub load_note: Option<String>,
    /// Metric values.
    pub samples: Vec<SampleRecord>,
    /// Latency histograms.
    pub histograms: Vec<HistogramRecord>,
    /// Aggressors' own work rates.
    pub stressor_reports: Vec<StressorReport>,
    /// Window series of metrics (on/off design), one per metric that has one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<SeriesRecord>,
    /// When the aggressors were switched on and off during the trial (on/off design).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modulation: Option<Modulation>,
    /// What the machine did around the trial that could disturb it (steal time, load from
    /// outside the run, pressure stalls, throttling, the canary's speed), as measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<serde_json::Value>,
    /// What the victim's threads and the host's CPUs did while the aggressors ran and while
    /// they did not (run-queue wait, softirq, idle time), as measured: the evidence the
    /// analysis names a result's cause from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mechanism: Option<serde_json::Value>,
    /// What the neighbours did, when, during a scheduled trial (the `timeline` kind): the
    /// stressors' starts and stops as they happened and every tenant's CPU time sampled
    /// through the trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Timeline>,
    /// Limits the trial's condition set on tenants for its trials, by tenant name (e.g.
    /// `{"victim": {"cpus": 0.5}}`): the setting every trial ran under, when a condition
    /// changed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<serde_json::Value>,
    /// Every tenant's pressure stalls and delivered I/O over the trial, as its platform
    /// counted them (one entry per tenant that has any of these counters). A trial's first
    /// record carries them for all its tenants, as it carries the aggressors' reports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tenant_usage: Vec<TenantUsageRecord>,
}

/// The share of a trial's wall time a tenant's tasks were stalled on one resource
/// (pressure-stall information), each 0..=1.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StallRecord {
    /// At least one of the tenant's tasks stalled.
    pub some: f64,
    /// Every non-idle task of the tenant stalled at once, where the kernel reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full: Option<f64>,
}

/// One tenant's pressure stalls and delivered I/O over one trial. `None` where the platform
/// has no such counter (cgroup v1 has no per-cgroup pressure), never zero.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantUsageRecord {
    /// Tenant name.
    pub tenant: String,
    /// The interval the figures cover, seconds (the trial, from just before the probe
    /// started to just after it ended).
    pub interval_s: f64,
    /// Stalled waiting for a CPU (`cpu.pressure`).
    #[serde(default)]
    pub cpu: Option<StallRecord>,
    /// Stalled on memory: reclaim, refaults, swap-in (`memory.pressure`).
    #[serde(default)]
    pub memory: Option<StallRecord>,
    /// Stalled on block I/O (`io.pressure`).
    #[serde(default)]
    pub io: Option<StallRecord>,
    /// Bytes read from block devices per second (`io.stat` rbytes, v1 blkio).
    #[serde(default)]
    pub read_bytes_per_s: Option<f64>,
    /// Bytes written to block devices per second.
    #[serde(default)]
    pub write_bytes_per_s: Option<f64>,
    /// Read operations per second.
    #[serde(default)]
    pub read_ops_per_s: Option<f64>,
    /// Write operations per second.
    #[serde(default)]
    pub write_ops_per_s: Option<f64>,
}

impl TenantUsageRecord {
    /// The stall shares by resource, in a fixed order: `cpu`, `memory`, `io`.
    pub fn stalls(&self) -> [(&'static str, Option<StallRecord>); 3] {
        [("cpu", self.cpu), ("memory", self.memory), ("io", self.io)]
    }
}

/// The value of a metric over one window of a probe run (`CLOCK_MONOTONIC` ns).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WindowRecord {
    /// Start, ns.
    pub start_ns: u64,
    /// End, ns.
    pub end_ns: u64,
    /// Value in the metric's unit.
    pub value: f64,
}

/// A metric's window series within one trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesRecord {
    /// Metric name.
    pub metric: String,
    /// Windows in time order.
    pub windows: Vec<WindowRecord>,
}

/// One switch of the aggressors during an on/off trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Switch {
    /// When the switch was asked for, `CLOCK_MONOTONIC` ns.
    pub requested_ns: u64,
    /// When every aggressor had switched, ns.
    pub done_ns: u64,
    /// The state after the switch: true = running (thawed), false = frozen.
    pub on: bool,
}

/// How the aggressors were modulated during an on/off trial.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Modulation {
    /// Full on+off cycle, ns.
    pub period_ns: u64,
    /// Time after each switch during which windows are dropped (the effect settling), ns.
    pub guard_ns: u64,
    /// State before the first switch (true = running).
    pub initially_on: bool,
    /// Start of the trial, ns.
    pub start_ns: u64,
    /// End of the trial, ns.
    pub end_ns: u64,
    /// The switches, in time order.
    pub switches: Vec<Switch>,
}

/// One scheduled start or stop of a stressor in an aggressor tenant during a scheduled trial,
/// as it happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScheduledSwitch {
    /// The aggressor tenant.
    pub tenant: String,
    /// Stressor name.
    pub stressor: String,
    /// Intensity, 0..=100.
    pub intensity: u8,
    /// True for a start, false for a stop.
    pub on: bool,
    /// When the schedule wanted it, ns after the trial's start.
    pub planned_ns: u64,
    /// When it was asked for, `CLOCK_MONOTONIC` ns.
    pub requested_ns: u64,
    /// When the tenant had done it (or failed), ns.
    pub done_ns: u64,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// At a stop: the stressor's own rate over the time it ran, operations per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ops_per_sec: Option<f64>,
}

/// A tenant's CPU time at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuSample {
    /// When it was read, `CLOCK_MONOTONIC` ns.
    pub at_ns: u64,
    /// CPU time the tenant had used so far (user plus system), ns.
    pub cpu_ns: u64,
}

/// One tenant's CPU time sampled through a scheduled trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuSeries {
    /// The tenant.
    pub tenant: String,
    /// Samples in time order.
    pub samples: Vec<CpuSample>,
}

impl CpuSeries {
    /// CPUs used between consecutive samples (CPU seconds per second), each stamped with
    /// the interval's end.
    pub fn usage(&self) -> Vec<(u64, f64)> {
        self.samples
            .windows(2)
            .filter(|w| w[1].at_ns > w[0].at_ns)
            .map(|w| {
                let cpu = w[1].cpu_ns.saturating_sub(w[0].cpu_ns) as f64;
                (w[1].at_ns, cpu / (w[1].at_ns - w[0].at_ns) as f64)
            })
            .collect()
    }
}

/// What the neighbours did during a scheduled trial (the `timeline` kind).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// Start of the trial (time zero of the schedule), `CLOCK_MONOTONIC` ns.
    pub start_ns: u64,
    /// End of the trial, ns.
    pub end_ns: u64,
    /// The stressors' starts and stops, in the order they were made.
    pub switches: Vec<ScheduledSwitch>,
    /// Every tenant's CPU time through the trial.
    pub cpu: Vec<CpuSeries>,
}

/// A fact about the run's host, platform or a tenant, recorded as it is learned (measured LLC
/// size, CPU placement, idle states, IRQ affinity...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fact {
    /// `host`, `platform`, or a tenant name.
    pub scope: String,
    /// Fact name, e.g. `llc_bytes_measured`.
    pub key: String,
    /// The value, as JSON.
    pub value: serde_json::Value,
}

/// Everything stored about one run: enough to re-render every table and report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadedRun {
    /// The run.
    pub run: RunRecord,
    /// Its tenants, in the order they were added.
    pub tenants: Vec<TenantRecord>,
    /// Its trials, in plan order.
    pub trials: Vec<TrialRecord>,
    /// Facts, by scope and key.
    pub facts: Vec<Fact>,
}

impl LoadedRun {
    /// Values of `metric` from the `ok` trials of `probe` in `tenant` under `condition`, in
    /// plan order: the input of the statistics.
    pub fn values(
        &self,
        tenant: &str,
        probe: &str,
        condition: &Condition,
        metric: &str,
    ) -> Vec<f64> {
        self.trials
            .iter()
            .filter(|t| {
                t.status == TrialStatus::Ok
                    && t.tenant == tenant
                    && t.probe == probe
                    && &t.condition == condition
            })
            .flat_map(|t| {
                t.samples
                    .iter()
                    .filter(|s| s.metric == metric)
                    .map(|s| s.value)
            })
            .collect()
    }

    /// The distinct conditions of the run's trials, sorted (baseline first).
    pub fn conditions(&self) -> Vec<Condition> {
        let mut c: Vec<Condition> = self.trials.iter().map(|t| t.condition.clone()).collect();
        c.sort();
        c.dedup();
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn condition_text_round_trip() {
        for text in ["baseline", "cache@50", "net-tx@100", "cpu@0"] {
            let c: Condition = text.parse().unwrap();
            assert_eq!(c.to_string(), text);
        }
        assert_eq!(
            "cache@50".parse::<Condition>().unwrap(),
            Condition::stressor("cache", 50)
        );
        assert_eq!(
            "disk:blocks=4".parse::<Condition>().unwrap(),
            Condition::contended("disk:blocks=4")
        );
        for bad in ["", "a b@5", "tab\there", &"x".repeat(129)] {
            assert!(bad.parse::<Condition>().is_err(), "{bad}");
        }
        assert!(Condition::Baseline < Condition::stressor("a", 0));
    }

    #[test]
    fn trial_status_json_shape() {
        let j = serde_json::to_value(TrialStatus::Dnr("agent timeout".into())).unwrap();
        assert_eq!(
            j,
            serde_json::json!({"status": "dnr", "reason": "agent timeout"})
        );
        let ok = serde_json::to_value(TrialStatus::Ok).unwrap();
        assert_eq!(ok, serde_json::json!({"status": "ok"}));
        assert!(TrialStatus::from_parts("failed", None).is_err());
        assert_eq!(
            TrialStatus::from_parts("failed", Some("x".into())).unwrap(),
            TrialStatus::Failed("x".into())
        );
    }

    #[test]
    fn text_enums() {
        assert_eq!(
            "interrupted".parse::<RunStatus>().unwrap(),
            RunStatus::Interrupted
        );
        assert!("done"
            .parse::<RunStatus>()
            .unwrap_err()
            .contains("running, complete"));
        assert_eq!(StressorMode::Alone.as_str(), "alone");
    }
}
