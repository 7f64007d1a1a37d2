//! The results document: everything reported about one run ([`Results`]), versioned
//! ([`RESULTS_SCHEMA_VERSION`]), as the engine computes it from the store and every renderer
//! (terminal, Markdown, CSV, HTML, the web API) reads it.

use std::collections::BTreeMap;

use isobench_common::{Class, Direction};
use isobench_stats::{Comparison, DegradationCi, PairedEstimate};
use isobench_store::{Fact, TrialRecord};
use serde::{Deserialize, Serialize};

use crate::{Cause, Design, Section};

/// Version of the [`Results`] document (JSON export). Bumped when its shape changes; 2 adds
/// the experiment kind (`kind`) and each condition's per-tenant `assignments` in the plan; 3
/// adds the kind's own `sections` and the plan's kind `settings`; 4 adds each section's
/// `plot` (what its rows hold as a figure); 5 adds `latency`, the latency distributions
/// pooled the way the estimates pool their trials; 6 adds `usage` (each tenant's pressure
/// stalls and delivered I/O per condition), each trial's `tenant_usage`, and the trust's
/// `victim_pressure_measured` and `victim_stalls`.
pub const RESULTS_SCHEMA_VERSION: u32 = 6;

/// Probe name recorded for a trial in which the aggressor ran alone (no probe).
pub const SOLO_PROBE: &str = "(alone)";

/// The run as a whole, for headers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// Run id.
    pub id: String,
    /// Scenario name.
    pub scenario: String,
    /// `running`, `complete`, `interrupted`, `failed`.
    pub status: String,
    /// Why it ended so.
    pub status_reason: Option<String>,
    /// Seed.
    pub seed: u64,
    /// isobench version that ran it.
    pub tool_version: String,
    /// Store schema version when it was created.
    pub store_schema_version: u32,
    /// Start time, RFC 3339.
    pub started_at: String,
    /// End time, RFC 3339.
    pub ended_at: Option<String>,
    /// Platform.
    pub platform: String,
    /// Platform version / description.
    pub platform_version: String,
    /// Caveats about the platform's figures on this machine (a guest under software
    /// emulation), from the platform itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caveats: Vec<String>,
    /// Host facts.
    pub host: serde_json::Value,
}

/// A tenant as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantInfo {
    /// Name.
    pub name: String,
    /// `victim` or `aggressor`.
    pub role: String,
    /// Limits as recorded (JSON).
    pub limits: serde_json::Value,
}

/// Why a cell has no usable figure, or what it must say beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dnr {
    /// Trials that did not respond.
    pub count: u32,
    /// Trials in all.
    pub of: u32,
    /// The first reason given.
    pub reason: String,
}

/// One degradation: a metric of a tenant under a condition against its baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Tenant measured.
    pub tenant: String,
    /// Probe id (for the aggressor: [`SOLO_PROBE`]-relative rates of its stressor).
    pub probe: String,
    /// Resource class of the probe (victims) or of the stressor (aggressor).
    pub probe_class: Option<Class>,
    /// Metric name.
    pub metric: String,
    /// Unit.
    pub unit: String,
    /// Better direction.
    pub direction: Direction,
    /// `stressor@intensity`.
    pub condition: String,
    /// Resource class the stressor contends for.
    pub stressor_class: Option<Class>,
    /// Baseline values (raw, in trial order).
    pub baseline: Vec<f64>,
    /// Contended values (raw, in trial order).
    pub contended: Vec<f64>,
    /// Statistics, when both sides have values.
    pub comparison: Option<Comparison>,
    /// Why there are no statistics.
    pub problem: Option<String>,
    /// Trials that did not respond, when any.
    pub dnr: Option<Dnr>,
    /// True once the interval is within the target (or nothing more can be learned: DNR).
    pub settled: bool,
    /// Values (either side) from trials kept although load from outside the run disturbed
    /// them (their repeats were used up, or the load persisted).
    #[serde(default)]
    pub disturbed: u32,
    /// How the reported degradation was measured (on/off cycles or paired trials); `None` for
    /// the aggressor's own rate and for runs stored before designs existed (independent
    /// samples).
    #[serde(default)]
    pub design: Option<Design>,
    /// The time-adjacent estimate behind `comparison` (cycles or pairs), with its p-value.
    #[serde(default)]
    pub paired: Option<PairedEstimate>,
    /// p-value corrected for multiple comparisons across the victim cells of the run.
    #[serde(default)]
    pub p_adjusted: Option<f64>,
    /// The independent two-sample estimate on the same values (baseline and contended as two
    /// samples, ignoring which were measured together), kept for comparison.
    #[serde(default)]
    pub independent: Option<Comparison>,
    /// The independent two-sample interval of the same statistic the design estimates (the
    /// ratio of geometric means, Welch t on the logarithms) on the same units: it differs
    /// from `paired` only in ignoring which values were measured together, so the ratio of
    /// their half-widths is what the design gained. `independent` estimates a ratio of
    /// medians instead.
    #[serde(default)]
    pub independent_welch: Option<DegradationCi>,
    /// The placement that caused the result (shared CPUs, the disk's IRQ CPU, softirq work,
    /// idle states), each with the measured numbers; empty when the evidence names none.
    #[serde(default)]
    pub causes: Vec<Cause>,
}

impl Cell {
    /// Degradation estimate, percent.
    pub fn estimate(&self) -> Option<f64> {
        self.comparison.as_ref().map(|c| c.degradation.estimate)
    }

    /// Interval half-width, points.
    pub fn half_width(&self) -> Option<f64> {
        self.comparison.as_ref().map(|c| c.degradation.half_width())
    }

    /// True when every trial of the cell did not respond.
    pub fn all_dnr(&self) -> bool {
        self.dnr.as_ref().is_some_and(|d| d.count >= d.of)
            || (self.comparison.is_none() && self.dnr.is_some())
    }
}

/// For one resource class: the worst victim degradation (the largest significant one; the
/// largest estimate when none is significant).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassSummary {
    /// Resource class the stressors contend for.
    pub class: Class,
    /// Conditions of that class.
    pub conditions: Vec<String>,
    /// The worst victim cell: tenant, probe, metric, condition.
    pub worst: Option<WorstCell>,
    /// Victim cells of that class that did not respond.
    pub dnr_cells: u32,
}

/// A reference to the worst cell of a class, with its figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorstCell {
    /// Tenant.
    pub tenant: String,
    /// Probe id.
    pub probe: String,
    /// Metric.
    pub metric: String,
    /// Condition.
    pub condition: String,
    /// Degradation, percent.
    pub estimate: f64,
    /// Interval lower bound.
    pub lower: f64,
    /// Interval upper bound.
    pub upper: f64,
    /// Significant.
    pub significant: bool,
}

/// How far to trust the run as a whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Trust {
    /// Trials (one per probe run or aggressor-alone window; tenants counted once).
    pub trials: u32,
    /// Of which measured normally.
    pub ok: u32,
    /// Marked disturbed by load from outside the run.
    pub disturbed: u32,
    /// Repeated because they were disturbed.
    pub repeated: u32,
    /// Disturbed and kept (flagged): repeats used up, or the load persisted.
    #[serde(default)]
    pub disturbed_kept: u32,
    /// With a tenant that did not respond.
    pub dnr: u32,
    /// Failed (a workload error).
    pub failed: u32,
    /// Largest load from outside the run seen during a trial, CPUs.
    pub outside_load_max: Option<f64>,
    /// Median load from outside the run, CPUs.
    pub outside_load_median: Option<f64>,
    /// Median coefficient of variation of the victims' baselines (noise of the machine).
    pub baseline_cv_median: Option<f64>,
    /// Cells whose interval is wider than the target.
    pub wide: u32,
    /// Cells flagged untrustworthy (too few values, too noisy); a wide interval alone is counted
    /// in `wide`, not here.
    pub untrustworthy: u32,
    /// Cells where contention improved the metric (negative degradation, significant).
    pub improved: u32,
    /// Rounds run.
    pub rounds: u32,
    /// Victim cells per design (`onoff`, `paired`).
    #[serde(default)]
    pub designs: BTreeMap<String, u32>,
    /// Correction of significance across the victim cells.
    #[serde(default)]
    pub correction: String,
    /// Victim cells with an estimate.
    #[serde(default)]
    pub victim_cells: u32,
    /// Of which significant after the correction.
    #[serde(default)]
    pub significant: u32,
    /// Of which the interval contains 0 (in an A/A run: the coverage of the intervals).
    #[serde(default)]
    pub covering_zero: u32,
    /// Largest steal time seen during a trial, CPUs.
    #[serde(default)]
    pub steal_max: Option<f64>,
    /// Median share of a trial in which some task waited for a CPU (pressure-stall
    /// information), when the kernel has it.
    #[serde(default)]
    pub cpu_pressure_median: Option<f64>,
    /// Slowest and median speed of the fixed-work canary relative to its calibration (the
    /// machine's own drift; 1 = as calibrated).
    #[serde(default)]
    pub canary_speed_min: Option<f64>,
    /// Median canary speed.
    #[serde(default)]
    pub canary_speed_median: Option<f64>,
    /// Trials during which the host showed each kind of noise (steal, softirq on a CPU,
    /// pressure, throttling), by kind.
    #[serde(default)]
    pub noise_causes: BTreeMap<String, u32>,
    /// Whether the victims' own pressure stalls were measured: `None` when no tenant usage
    /// was recorded (a platform without cgroups, a run before schema 6), `Some(false)` where
    /// the platform has no per-tenant pressure (cgroup v1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub victim_pressure_measured: Option<bool>,
    /// The victims' stalls at or above [`crate::usage::NOTABLE_STALL`] of a trial (median
    /// over a condition's trials), worst first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub victim_stalls: Vec<crate::usage::NotableStall>,
}

/// Everything reported about a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// [`RESULTS_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The run.
    pub run: RunInfo,
    /// The experiment kind, which says what the kind's sections hold: for `matrix`, `cells`,
    /// `aggressor` and `classes`. Documents of schema 1 have none; they are of matrix runs.
    #[serde(default = "matrix_kind")]
    pub kind: String,
    /// The plan it followed, when stored: the engine's plan as it serialized it (tenants with
    /// their limits and CPUs, probes, conditions, repetitions, the kind's settings).
    pub plan: Option<serde_json::Value>,
    /// Tenants.
    pub tenants: Vec<TenantInfo>,
    /// Victim degradations: per victim, probe, metric and condition.
    pub cells: Vec<Cell>,
    /// Aggressor degradations: per aggressor and condition (its own rate alone vs. beside
    /// the probes).
    pub aggressor: Vec<Cell>,
    /// Per resource class, the worst victim degradation.
    pub classes: Vec<ClassSummary>,
    /// The kind's own views of its results (a curve, a pairwise grid, a series summary), in
    /// the order the kind shows them; the matrix has none beyond its table. Documents before
    /// schema 3 have none.
    #[serde(default)]
    pub sections: Vec<Section>,
    /// The victims' latency distributions, pooled the way each condition's estimate pools
    /// its trials ([`crate::latency`]); empty in documents before schema 5, and until the
    /// analysis of a whole stored run fills it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency: Vec<crate::latency::LatencyView>,
    /// Each tenant's pressure stalls and delivered I/O per condition ([`crate::usage`]);
    /// empty in documents before schema 6 and where no tenant has these counters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub usage: Vec<crate::usage::UsageRow>,
    /// Trust in the run as a whole.
    pub trust: Trust,
    /// Target interval half-width, points.
    pub target_half_width: f64,
    /// Confidence level.
    pub confidence: f64,
    /// Every trial as stored, with its raw samples (filled by [`analyze`], for exports).
    pub trials: Vec<TrialRecord>,
    /// Facts recorded with the run (memory checks, tenants as created).
    pub facts: Vec<Fact>,
}

impl Results {
    /// Conditions in plan order (or order of appearance); a search's candidate settings only
    /// once measured.
    pub fn conditions(&self) -> Vec<String> {
        let planned = self
            .plan
            .as_ref()
            .and_then(|p| p["conditions"].as_array())
            .map(|cs| {
                cs.iter()
                    .filter(|c| {
                        // A search's candidate setting shows once measured.
                        !c["candidate"].as_bool().unwrap_or(false)
                            || self
                                .cells
                                .iter()
                                .chain(&self.aggressor)
                                .any(|x| c["id"].as_str() == Some(x.condition.as_str()))
                    })
                    .filter_map(|c| c["id"].as_str().map(str::to_string))
                    .collect::<Vec<_>>()
            });
        if let Some(ids) = planned.filter(|ids| !ids.is_empty()) {
            return ids;
        }
        let mut seen = Vec::new();
        for c in self.cells.iter().chain(&self.aggressor) {
            if !seen.contains(&c.condition) {
                seen.push(c.condition.clone());
            }
        }
        seen
    }
}

fn matrix_kind() -> String {
    "matrix".to_string()
}
