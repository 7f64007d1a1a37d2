//! From what the store holds to what isobench reports: [`analyze`] turns a stored run into
//! [`Results`], every degradation with its confidence interval, significance and trust
//! flags, computed only through `isobench-stats`.
//!
//! Everything rendered (the table at the end of `isobench run`, `isobench show`, the exports)
//! comes from here, and this reads only the store, so a run shows the same whenever and
//! wherever it is shown. The same function feeds the stopping rule while the run is going.

use std::collections::{BTreeMap, BTreeSet};

use isobench_stats::{Correction, Estimator, Sample};
use isobench_store::{LoadedRun, RunStatus, TrialRecord, TrialStatus};

pub use crate::cells::{delivered_pressure, units_to_target, Delivered, StatsSettings, Stored};
use crate::cells::{Analysis, Inputs};
use crate::facts::PLAN_FACT;
use crate::kinds::Kind;
use crate::plan::Plan;
pub use isobench_results::{
    Cell, ClassSummary, Dnr, Results, RunInfo, TenantInfo, Trust, WorstCell,
    RESULTS_SCHEMA_VERSION, SOLO_PROBE,
};

/// The plan stored with a run.
pub fn stored_plan(run: &LoadedRun) -> Option<Plan> {
    run.facts
        .iter()
        .find(|f| f.scope == PLAN_FACT.0 && f.key == PLAN_FACT.1)
        .and_then(|f| Plan::from_stored(f.value.clone()).ok())
}

/// Parses the outside load out of a trial's load note (`outside load 0.031 CPUs ...`).
pub fn outside_load(t: &TrialRecord) -> Option<f64> {
    let note = t.load_note.as_deref()?;
    let rest = note.strip_prefix("outside load ")?;
    rest.split_whitespace().next()?.parse().ok()
}

/// Analyzes a whole stored run.
pub fn analyze(run: &LoadedRun) -> Results {
    let plan = stored_plan(run);
    let settings = plan.as_ref().map_or(
        StatsSettings {
            seed: run.run.seed,
            confidence: 0.95,
            target: 2.0,
            min_samples: 3,
            resamples: 2000,
            estimator: Estimator::Median,
            correction: Correction::Holm,
        },
        StatsSettings::from_plan,
    );
    let trials: Vec<&TrialRecord> = run.trials.iter().collect();
    let mut r = analyze_trials(run, plan, &trials, &settings);
    r.latency = crate::latency::views(&Stored::new(run, &trials), &r.cells);
    r.trials = run.trials.clone();
    r.facts = run.facts.clone();
    r
}

/// Analyzes the given trials of a run (the stopping rule looks only at finished rounds).
pub fn analyze_trials(
    run: &LoadedRun,
    plan: Option<Plan>,
    trials: &[&TrialRecord],
    settings: &StatsSettings,
) -> Results {
    let stored = Stored::new(run, trials);
    let kind = plan.as_ref().map_or_else(Kind::default, |p| p.kind);
    let Analysis {
        cells,
        aggressor,
        classes,
        sections,
    } = kind.experiment().analyze(Inputs {
        run,
        plan: plan.as_ref(),
        stored: &stored,
        settings,
    });
    let mut trust = trust(&stored, &cells, &aggressor, settings);
    let usage = tenant_usage(run, plan.as_ref(), &stored);
    trust.victim_pressure_measured = isobench_results::usage::pressure_measured(&usage);
    trust.victim_stalls =
        isobench_results::usage::notable_stalls(&usage, isobench_results::usage::NOTABLE_STALL);
    Results {
        schema_version: RESULTS_SCHEMA_VERSION,
        run: run_info(run),
        kind: kind.as_str().to_string(),
        plan: plan.map(|p| serde_json::to_value(p).expect("a plan serializes")),
        tenants: run
            .tenants
            .iter()
            .map(|t| TenantInfo {
                name: t.name.clone(),
                role: t.role.as_str().to_string(),
                limits: t.limits.clone(),
            })
            .collect(),
        cells,
        aggressor,
        classes,
        sections,
        latency: Vec::new(),
        usage,
        trust,
        target_half_width: settings.target,
        confidence: settings.confidence,
        trials: Vec::new(),
        facts: Vec::new(),
    }
}

/// Each tenant's pressure stalls and delivered I/O per condition, over every trial that
/// ran to the end of its measurement (a disturbed trial that was repeated is left out, as
/// its values are), tenants and conditions in plan order.
fn tenant_usage(
    run: &LoadedRun,
    plan: Option<&Plan>,
    stored: &Stored,
) -> Vec<isobench_results::usage::UsageRow> {
    let tenants: Vec<(String, String)> = run
        .tenants
        .iter()
        .map(|t| (t.name.clone(), t.role.as_str().to_string()))
        .collect();
    let conditions: Vec<String> = plan
        .map(|p| {
            std::iter::once("baseline".to_string())
                .chain(p.conditions.iter().map(|c| c.id.clone()))
                .collect()
        })
        .unwrap_or_default();
    let trials: Vec<&TrialRecord> = stored
        .trials
        .iter()
        .copied()
        .filter(|t| !matches!(t.status, TrialStatus::Disturbed(_)) || stored.kept_disturbed(t))
        .collect();
    isobench_results::usage::usage_rows(&trials, &tenants, &conditions)
}

/// How far to trust the run: its trials' fates, the load and noise seen, the cells' spread
/// and significance.
fn trust(stored: &Stored, cells: &[Cell], aggressor: &[Cell], settings: &StatsSettings) -> Trust {
    let mut trust = Trust::default();
    count_trials(&mut trust, stored);
    let mut cvs: Vec<f64> = Vec::new();
    let mut seen_baselines = BTreeSet::new();
    for c in cells {
        if seen_baselines.insert((&c.tenant, &c.probe, &c.metric)) {
            if let Some(cv) = c.comparison.as_ref().and_then(|x| x.baseline.cv) {
                cvs.push(cv);
            }
        }
    }
    trust.baseline_cv_median = Sample::new(cvs).ok().map(|s| s.median());
    trust.correction = settings.correction.name().to_string();
    for c in cells {
        if let Some(d) = c.design {
            *trust.designs.entry(d.as_str().to_string()).or_insert(0) += 1;
        }
        if let Some(cmp) = &c.comparison {
            trust.victim_cells += 1;
            trust.significant += u32::from(cmp.significant);
            trust.covering_zero +=
                u32::from(cmp.degradation.lower <= 0.0 && cmp.degradation.upper >= 0.0);
        }
    }
    count_noise(&mut trust, stored.trials);
    for c in cells.iter().chain(aggressor) {
        if let Some(cmp) = &c.comparison {
            if cmp.degradation.half_width() > settings.target {
                trust.wide += 1;
            }
            if !cmp.trustworthy {
                trust.untrustworthy += 1;
            }
            if cmp.significant && cmp.degradation.estimate < 0.0 {
                trust.improved += 1;
            }
        }
    }
    trust
}

/// Trials by fate (ok, disturbed, DNR, failed; repeated), rounds, and the outside load.
fn count_trials(trust: &mut Trust, stored: &Stored) {
    let mut trial_keys: BTreeMap<(u32, u32, u32, u32), Vec<&TrialRecord>> = BTreeMap::new();
    for t in stored.trials {
        let k = t.key;
        trial_keys
            .entry((k.round, k.block, k.slot, k.attempt))
            .or_default()
            .push(t);
    }
    let mut loads = Vec::new();
    for ((round, _, _, attempt), recs) in &trial_keys {
        trust.trials += 1;
        trust.rounds = trust.rounds.max(round + 1);
        if *attempt > 0 {
            trust.repeated += 1;
        }
        let any = |f: &dyn Fn(&TrialStatus) -> bool| recs.iter().any(|r| f(&r.status));
        if any(&|s| matches!(s, TrialStatus::Disturbed(_))) {
            trust.disturbed += 1;
            if recs.iter().any(|r| stored.kept_disturbed(r)) {
                trust.disturbed_kept += 1;
            }
        } else if any(&|s| matches!(s, TrialStatus::Dnr(_))) {
            trust.dnr += 1;
        } else if any(&|s| matches!(s, TrialStatus::Failed(_))) {
            trust.failed += 1;
        } else {
            trust.ok += 1;
        }
        if let Some(l) = recs.iter().find_map(|r| outside_load(r)) {
            loads.push(l);
        }
    }
    if !loads.is_empty() {
        trust.outside_load_max = loads.iter().copied().reduce(f64::max);
        trust.outside_load_median = Sample::new(loads).ok().map(|s| s.median());
    }
}

/// Steal time, CPU pressure, the canary's speed and the kinds of host noise the trials saw.
fn count_noise(trust: &mut Trust, trials: &[&TrialRecord]) {
    let mut steal = Vec::new();
    let mut psi = Vec::new();
    let mut canary = Vec::new();
    for t in trials {
        let Some(n) = &t.noise else { continue };
        if let Some(x) = n.get("steal_cpus").and_then(|v| v.as_f64()) {
            steal.push(x);
        }
        if let Some(x) = n.get("cpu_pressure_some").and_then(|v| v.as_f64()) {
            psi.push(x);
        }
        if let Some(a) = n.get("canary_speed").and_then(|v| v.as_array()) {
            canary.extend(a.iter().filter_map(|v| v.as_f64()));
        }
        let mut kinds = BTreeSet::new();
        for c in n
            .get("causes")
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
        {
            if let Some(text) = c.as_str() {
                kinds.insert(cause_kind(text));
            }
        }
        for k in kinds {
            *trust.noise_causes.entry(k).or_insert(0) += 1;
        }
    }
    trust.steal_max = steal.iter().copied().reduce(f64::max);
    trust.cpu_pressure_median = Sample::new(psi).ok().map(|s| s.median());
    trust.canary_speed_min = canary.iter().copied().reduce(f64::min);
    trust.canary_speed_median = Sample::new(canary).ok().map(|s| s.median());
}

/// The run as a whole, for headers.
fn run_info(run: &LoadedRun) -> RunInfo {
    RunInfo {
        id: run.run.id.to_string(),
        scenario: run.run.scenario_name.clone(),
        status: run.run.status.as_str().to_string(),
        status_reason: run.run.status_reason.clone(),
        seed: run.run.seed,
        tool_version: run.run.tool_version.clone(),
        store_schema_version: run.run.schema_version,
        started_at: run.run.started_at.to_rfc3339(),
        ended_at: run.run.ended_at.map(|t| t.to_rfc3339()),
        platform: run.run.platform.clone(),
        platform_version: run.run.platform_version.clone(),
        caveats: run
            .facts
            .iter()
            .find(|f| f.scope == "platform" && f.key == "caveats")
            .and_then(|f| serde_json::from_value(f.value.clone()).ok())
            .unwrap_or_default(),
        host: run.run.host_facts.clone(),
    }
}

/// True when the run's status says it can be resumed.
pub fn resumable(status: RunStatus) -> bool {
    matches!(
        status,
        RunStatus::Running | RunStatus::Interrupted | RunStatus::Failed
    )
}

/// The kind of a noise cause, its numbers taken out ("softirq 0.62 CPUs on cpu1" ->
/// "softirq on cpu1").
fn cause_kind(text: &str) -> String {
    text.split_whitespace()
        .filter(|w| {
            !w.chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit() || c == '(')
                && !matches!(*w, "CPUs" | "of" | "the" | "interval" | "periods" | "s)")
        })
        .collect::<Vec<_>>()
        .join(" ")
}
