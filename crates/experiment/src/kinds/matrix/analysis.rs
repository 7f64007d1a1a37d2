//! The matrix's analysis: each victim metric under each condition against its baseline,
//! measured with the condition's design; each aggressor's own rate beside the probes against
//! its rate alone; the worst degradation per resource class; and what still needs data.

use std::collections::{BTreeMap, BTreeSet};

use isobench_stats::{Comparison, Direction};
use isobench_store::{
    Condition as StoreCondition, LoadedRun, StressorMode, TrialRecord, TrialStatus,
};
use isobench_workloads::Class;

use super::schedule::{paired_only, FIRST_PAIRS, MAX_PAIRS};
use crate::cells::{
    apply_design, attach_causes, cell_design, condition_text, correct_significance, make_cell,
    onoff_units, paired_units, solo_pairs, units_to_target, Analysis, Cell, CellOf, ClassSummary,
    Dnr, Results, StatsSettings, Stored, WorstCell, SOLO_PROBE,
};
use crate::plan::{Design, Plan};
use crate::schedule::Needs;

/// The matrix's cells from the stored trials.
pub fn analyze(
    run: &LoadedRun,
    plan: Option<&Plan>,
    stored: &Stored,
    settings: &StatsSettings,
) -> Analysis {
    let labels = Labels::new(plan, stored.trials);
    let mut cells = victim_cells(plan, stored, &labels, settings);
    correct_significance(&mut cells, settings);
    if let Some(p) = plan {
        attach_causes(&mut cells, p, &run.run.host_facts, stored.trials, &|t| {
            stored.usable(t)
        });
    }
    let aggressor = aggressor_cells(run, plan, stored, &labels, settings);
    let classes = plan.map_or_else(Vec::new, |p| class_summaries(p, &cells));
    Analysis {
        cells,
        aggressor,
        classes,
        sections: Vec::new(),
    }
}

/// What the plan says about probes and conditions, for labelling cells.
struct Labels {
    probe_class: BTreeMap<String, Class>,
    stressor_class: BTreeMap<String, Class>,
    /// Conditions in plan order, else in order of appearance.
    conditions: Vec<String>,
}

impl Labels {
    fn new(plan: Option<&Plan>, trials: &[&TrialRecord]) -> Self {
        let probe_class = plan
            .map(|p| p.probes.iter().map(|x| (x.id.clone(), x.class)).collect())
            .unwrap_or_default();
        let stressor_class = plan
            .map(|p| {
                p.conditions
                    .iter()
                    .map(|c| (c.id.clone(), c.class))
                    .collect()
            })
            .unwrap_or_default();
        let mut conditions: Vec<String> = plan
            .map(|p| p.conditions.iter().map(|c| c.id.clone()).collect())
            .unwrap_or_default();
        for t in trials {
            if t.condition != StoreCondition::Baseline {
                let c = condition_text(&t.condition);
                if !conditions.contains(&c) {
                    conditions.push(c);
                }
            }
        }
        Labels {
            probe_class,
            stressor_class,
            conditions,
        }
    }
}

/// A victim's metric to report: tenant, probe, metric, unit and direction. An empty metric
/// stands for a probe that never produced a value.
type MetricRow = (String, String, String, String, Direction);

/// Victim rows: (tenant, probe, metric) seen in any ok trial, in plan order of the probes;
/// probes that never produced a value still get a row, so DNR shows.
fn victim_metrics(plan: Option<&Plan>, stored: &Stored) -> Vec<MetricRow> {
    let mut metrics: Vec<MetricRow> = Vec::new();
    let mut seen = BTreeSet::new();
    let probe_order: Vec<String> = plan
        .map(|p| p.probes.iter().map(|x| x.id.clone()).collect())
        .unwrap_or_default();
    let mut victim_trials: Vec<&&TrialRecord> = stored
        .trials
        .iter()
        .filter(|t| stored.is_victim(&t.tenant) && t.probe != SOLO_PROBE)
        .collect();
    victim_trials.sort_by_key(|t| {
        (
            probe_order
                .iter()
                .position(|p| p == &t.probe)
                .unwrap_or(usize::MAX),
            t.key,
        )
    });
    for t in &victim_trials {
        for s in &t.samples {
            if plan.is_some_and(|p| !p.tracks(&t.probe, &s.metric)) {
                continue;
            }
            let key = (t.tenant.clone(), t.probe.clone(), s.metric.clone());
            if seen.insert(key.clone()) {
                metrics.push((key.0, key.1, key.2, s.unit.clone(), s.direction));
            }
        }
    }
    for t in &victim_trials {
        if !metrics.iter().any(|m| m.0 == t.tenant && m.1 == t.probe) {
            let key = (t.tenant.clone(), t.probe.clone(), String::new());
            if seen.insert(key.clone()) {
                metrics.push((key.0, key.1, key.2, String::new(), Direction::Higher));
            }
        }
    }
    metrics
}

/// Every victim row under every condition, each measured with its design.
fn victim_cells(
    plan: Option<&Plan>,
    stored: &Stored,
    labels: &Labels,
    settings: &StatsSettings,
) -> Vec<Cell> {
    let mut cells = Vec::new();
    for row in &victim_metrics(plan, stored) {
        for cond in &labels.conditions {
            cells.push(victim_cell(plan, stored, labels, row, cond, settings));
        }
    }
    cells
}

/// One victim row under one condition.
fn victim_cell(
    plan: Option<&Plan>,
    stored: &Stored,
    labels: &Labels,
    (tenant, probe, metric, unit, direction): &MetricRow,
    cond: &str,
    settings: &StatsSettings,
) -> Cell {
    let trials = stored.trials;
    let no_values = metric.is_empty();
    let (baseline, contended) = if no_values {
        (Vec::new(), Vec::new())
    } else {
        (
            stored.values(tenant, probe, "baseline", metric),
            stored.values(tenant, probe, cond, metric),
        )
    };
    let label = format!("{tenant}/{probe}/{metric}@{cond}");
    let mut c = make_cell(
        CellOf {
            tenant,
            probe,
            probe_class: labels.probe_class.get(probe).copied(),
            metric,
            unit,
            direction: *direction,
            condition: cond,
            stressor_class: labels.stressor_class.get(cond).copied(),
        },
        baseline,
        contended,
        stored.dnr(tenant, probe, cond),
        &label,
        settings,
    );
    c.disturbed = stored.disturbed(tenant, probe, cond);
    if no_values {
        // Nothing was ever measured (every trial failed): more trials will not help.
        c.settled = true;
        c.problem
            .get_or_insert_with(|| "no values were measured".into());
        return c;
    }
    let usable = |t: &TrialRecord| stored.usable(t);
    let design = cell_design(plan, Some(probe), cond, trials);
    let (units, per_trial) = match design {
        Design::OnOff => {
            let g = onoff_units(trials, &usable, tenant, probe, cond, metric);
            (g.concat(), g)
        }
        Design::Paired => (
            paired_units(trials, &usable, tenant, probe, cond, metric),
            Vec::new(),
        ),
    };
    apply_design(&mut c, design, &units, &per_trial, &label, settings);
    c
}

/// Aggressor cells: its stressor's rate alone vs. beside the probes, per aggressor and
/// condition (none when the scenario turned the solo trials off).
fn aggressor_cells(
    run: &LoadedRun,
    plan: Option<&Plan>,
    stored: &Stored,
    labels: &Labels,
    settings: &StatsSettings,
) -> Vec<Cell> {
    if plan.is_some_and(|p| p.trial.solo.is_zero()) {
        return Vec::new();
    }
    let mut aggressor = Vec::new();
    for t in run
        .tenants
        .iter()
        .filter(|t| t.role.as_str() == "aggressor")
    {
        for cond in &labels.conditions {
            if let Some(c) = aggressor_cell(plan, stored, labels, t, cond, None, settings) {
                aggressor.push(c);
            }
        }
    }
    aggressor
}

/// Aggressor `t`'s own rate under one condition, when it has any record there.
/// The aggressors' own degradation beside probe `probe` only: per aggressor and condition,
/// its rate alone against its rate while that probe ran (what `pairwise` reports for the
/// aggressor's side of each pair). The cells name the probe.
pub(crate) fn aggressor_cells_beside(
    run: &LoadedRun,
    plan: Option<&Plan>,
    stored: &Stored,
    settings: &StatsSettings,
    probe: &str,
) -> Vec<Cell> {
    let labels = Labels::new(plan, stored.trials);
    let mut out = Vec::new();
    for t in run
        .tenants
        .iter()
        .filter(|t| t.role.as_str() == "aggressor")
    {
        for cond in &labels.conditions {
            if let Some(mut c) =
                aggressor_cell(plan, stored, &labels, t, cond, Some(probe), settings)
            {
                c.probe = probe.to_string();
                out.push(c);
            }
        }
    }
    out
}

fn aggressor_cell(
    plan: Option<&Plan>,
    stored: &Stored,
    labels: &Labels,
    t: &isobench_store::TenantRecord,
    cond: &str,
    beside: Option<&str>,
    settings: &StatsSettings,
) -> Option<Cell> {
    let trials = stored.trials;
    // Alone, the aggressor's reports are on its solo trials; beside a probe, on the probe's.
    let counts = |r: &TrialRecord| {
        stored.usable(r) && (r.probe == SOLO_PROBE || beside.is_none_or(|p| r.probe == p))
    };
    let rate = |mode: StressorMode| -> Vec<f64> {
        trials
            .iter()
            .filter(|r| counts(r) && condition_text(&r.condition) == *cond)
            .flat_map(|r| {
                r.stressor_reports
                    .iter()
                    .filter(|s| s.tenant == t.name && s.mode == mode)
                    .map(|s| s.ops_per_sec)
            })
            .collect()
    };
    let alone = rate(StressorMode::Alone);
    let contended = rate(StressorMode::Contended);
    let idle = !alone.is_empty() && alone.iter().chain(&contended).all(|&x| x == 0.0);
    let dnr_trials: Vec<&&TrialRecord> = trials
        .iter()
        .filter(|r| r.tenant == t.name && condition_text(&r.condition) == *cond)
        .filter(|r| matches!(r.status, TrialStatus::Dnr(_)))
        .collect();
    if alone.is_empty() && contended.is_empty() && dnr_trials.is_empty() {
        return None;
    }
    let dnr = (!dnr_trials.is_empty()).then(|| Dnr {
        count: dnr_trials.len() as u32,
        of: (dnr_trials.len() + alone.len() + contended.len()) as u32,
        reason: dnr_trials[0].status.reason().unwrap_or("").to_string(),
    });
    let label = format!("{}/ops_per_sec@{cond}", t.name);
    let victims_down = contended.is_empty()
        && trials.iter().any(|r| {
            stored.is_victim(&r.tenant)
                && condition_text(&r.condition) == *cond
                && matches!(r.status, TrialStatus::Dnr(_))
        });
    let stressor_class = labels.stressor_class.get(cond).copied();
    let mut c = make_cell(
        CellOf {
            tenant: &t.name,
            probe: SOLO_PROBE,
            probe_class: stressor_class,
            metric: "ops_per_sec",
            unit: "ops/s",
            direction: Direction::Higher,
            condition: cond,
            stressor_class,
        },
        alone,
        contended,
        dnr,
        &label,
        settings,
    );
    // The design the victims of this condition were measured with.
    let design = cell_design(plan, None, cond, trials);
    let io_limit = io_limit(t);
    let throttled_burst =
        design == Design::OnOff && stressor_class == Some(Class::Disk) && io_limit.is_some();
    if throttled_burst {
        // Measured here: a disk stressor held to io_write_bps=256M ran at its limit alone
        // (2043 requests/s in six blocks) and at 2.5 times that per running second under
        // on/off: the throttle measures its budget over wall time, so the time frozen is
        // made up in bursts after each thaw.
        c.comparison = None;
        c.settled = true;
        c.problem = Some(format!(
            "not comparable under on/off: its io limit ({}) holds its rate over wall time, so \
             after each freeze it bursts to make up the time frozen; its rate per running \
             second says nothing about the victims",
            io_limit.map(|l| l.to_string()).unwrap_or_default()
        ));
    } else if !idle && !victims_down {
        let units = solo_pairs(trials, &counts, &t.name, cond);
        if !units.is_empty() {
            apply_design(&mut c, Design::Paired, &units, &[], &label, settings);
        }
    }
    if idle {
        // A stressor that does no work (the null stressor of an A/A run) has no own rate to
        // degrade; nothing more can be learned.
        c.settled = true;
        c.problem = Some("the stressor does no work (no own rate to compare)".into());
    }
    if victims_down {
        // Beside victims that do not answer there is no contended rate to measure.
        c.settled = true;
        c.problem = Some("no rate beside a responding victim (victims DNR)".into());
    }
    Some(c)
}

/// The io limits applied to a tenant, when it has any.
fn io_limit(t: &isobench_store::TenantRecord) -> Option<isobench_platform::Limits> {
    t.limits
        .get("applied")
        .and_then(|v| v.as_str())
        .and_then(|a| isobench_platform::Limits::parse(a).ok())
        .filter(isobench_platform::Limits::has_io)
        .map(|l| isobench_platform::Limits {
            io_read_bps: l.io_read_bps,
            io_write_bps: l.io_write_bps,
            io_read_iops: l.io_read_iops,
            io_write_iops: l.io_write_iops,
            ..Default::default()
        })
}

/// Per resource class of the plan's conditions: the worst victim degradation.
fn class_summaries(p: &Plan, cells: &[Cell]) -> Vec<ClassSummary> {
    let mut classes: Vec<ClassSummary> = Vec::new();
    let mut seen_classes: Vec<Class> = Vec::new();
    for c in &p.conditions {
        if !seen_classes.contains(&c.class) {
            seen_classes.push(c.class);
        }
    }
    for class in seen_classes {
        let conds: Vec<String> = p
            .conditions
            .iter()
            .filter(|c| c.class == class)
            .map(|c| c.id.clone())
            .collect();
        let of_class: Vec<&Cell> = cells
            .iter()
            .filter(|c| conds.contains(&c.condition))
            .collect();
        classes.push(ClassSummary {
            class,
            worst: worst_cell(&of_class),
            conditions: conds,
            dnr_cells: of_class.iter().filter(|c| c.dnr.is_some()).count() as u32,
        });
    }
    classes
}

/// The worst significant degradation among `cells`; only when none is significant, the
/// largest estimate (then marked not significant).
fn worst_cell(cells: &[&Cell]) -> Option<WorstCell> {
    let with_stats: Vec<(&&Cell, &Comparison)> = cells
        .iter()
        .filter_map(|c| c.comparison.as_ref().map(|cmp| (c, cmp)))
        .collect();
    let significant: Vec<(&&Cell, &Comparison)> = with_stats
        .iter()
        .copied()
        .filter(|(_, cmp)| cmp.significant)
        .collect();
    let pool = if significant.is_empty() {
        with_stats
    } else {
        significant
    };
    pool.into_iter()
        .max_by(|a, b| {
            a.1.degradation
                .estimate
                .total_cmp(&b.1.degradation.estimate)
        })
        .map(|(c, cmp)| WorstCell {
            tenant: c.tenant.clone(),
            probe: c.probe.clone(),
            metric: c.metric.clone(),
            condition: c.condition.clone(),
            estimate: cmp.degradation.estimate,
            lower: cmp.degradation.lower,
            upper: cmp.degradation.upper,
            significant: cmp.significant,
        })
}

/// What still needs data after the given results: cells not settled, mapped back to plan
/// indices.
pub fn needs(plan: &Plan, results: &Results) -> Needs {
    let mut n = Needs::default();
    let cond_index = |id: &str| plan.conditions.iter().position(|c| c.id == id);
    let probe_index = |id: &str| plan.probes.iter().position(|p| p.id == id);
    for c in &results.cells {
        if !c.settled {
            if let (Some(p), Some(ci)) = (probe_index(&c.probe), cond_index(&c.condition)) {
                n.cells.insert((p, ci));
            }
        }
    }
    n.pairs = pairs_needed(plan, results, &n);
    // Probes that produced no tracked metric at all (every trial failed) settle as failed.
    // An aggressor's own rate is compared with the contended trials of the same block, so a
    // solo trial helps only where the round also measures the condition's victims.
    if plan.trial.solo > std::time::Duration::ZERO {
        for c in &results.aggressor {
            if !c.settled {
                if let Some(ci) = cond_index(&c.condition) {
                    if n.cells.iter().any(|&(_, cc)| cc == ci) {
                        n.solo.insert(ci);
                    }
                }
            }
        }
    }
    n
}

/// Pairs of blocks the next round gives each condition measured with paired trials only that
/// still needs data: enough for its widest cell to reach the target, from that cell's spread
/// of log ratios so far ([`units_to_target`]), less the pairs it has; between 1 and
/// [`MAX_PAIRS`], and [`FIRST_PAIRS`] while a cell has no spread yet.
fn pairs_needed(plan: &Plan, results: &Results, needs: &Needs) -> BTreeMap<usize, u32> {
    let z = isobench_stats::normal_quantile(0.5 + results.confidence / 2.0);
    let mut out = BTreeMap::new();
    for &(p, c) in &needs.cells {
        if !paired_only(plan, c) {
            continue;
        }
        let cell = results
            .cells
            .iter()
            .find(|x| x.probe == plan.probes[p].id && x.condition == plan.conditions[c].id);
        let want = match cell.and_then(|x| x.paired.as_ref()) {
            Some(est) if est.n >= 2 && est.log_ratio_sd > 0.0 => {
                let more = units_to_target(est, results.target_half_width, z) - est.n as f64;
                more.clamp(1.0, MAX_PAIRS as f64) as u32
            }
            _ => FIRST_PAIRS,
        };
        let e = out.entry(c).or_insert(want);
        *e = (*e).max(want);
    }
    out
}
