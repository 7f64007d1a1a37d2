//! From a run's stored trials to cells: what every kind's analysis shares.
//!
//! [`Stored`] (the trials that count), [`StatsSettings`], `make_cell`, the paired and
//! on/off designs (`apply_design`), the causes of noise and the correction of significance
//! for multiple comparisons, and what a kind's analysis finds ([`Analysis`]). Every estimate
//! is computed only through `isobench-stats`. The kinds ([`crate::kinds`]) build on this;
//! [`crate::analysis`] asks a run's kind for its [`Analysis`] and adds what every run
//! reports.

use std::collections::{BTreeMap, BTreeSet};

use isobench_platform::sched::{Phases, SchedTotals};
use isobench_results::Section;
use isobench_stats::{
    adjust_p_values, compare, paired_degradation, welch_log_degradation, BootstrapConfig, CiMethod,
    CompareConfig, Comparison, Correction, Direction, Estimator, Flag, Pair, PairedConfig,
    PairedEstimate, PairedMethod, Sample, Side,
};
use isobench_store::{
    Condition as StoreCondition, LoadedRun, Modulation, SeriesRecord, StressorMode, TrialRecord,
    TrialStatus,
};
use isobench_workloads::Class;
use serde::{Deserialize, Serialize};

use crate::cause::{attribute, disk_irq, Evidence, Rules};
use crate::plan::{Design, Plan};
use crate::schedule::paired_baseline_block;
pub use isobench_results::{Cell, ClassSummary, Dnr, Results, WorstCell, SOLO_PROBE};

/// Settings of the statistics, taken from the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct StatsSettings {
    /// Seed of the bootstraps.
    pub seed: u64,
    /// Confidence level.
    pub confidence: f64,
    /// Target half-width, points.
    pub target: f64,
    /// Values per side below which a result is flagged.
    pub min_samples: usize,
    /// Bootstrap replicates.
    pub resamples: usize,
    /// Statistic compared.
    pub estimator: Estimator,
    /// Correction of significance for multiple comparisons.
    pub correction: Correction,
}

impl StatsSettings {
    /// From a plan.
    pub fn from_plan(plan: &Plan) -> Self {
        StatsSettings {
            seed: plan.seed,
            confidence: plan.repetitions.confidence,
            target: plan.repetitions.ci_half_width,
            min_samples: plan.repetitions.min as usize,
            resamples: 2000,
            estimator: plan.repetitions.estimator,
            correction: plan.repetitions.correction,
        }
    }

    fn config(&self, label: &str) -> CompareConfig {
        CompareConfig {
            bootstrap: BootstrapConfig {
                estimator: self.estimator,
                method: CiMethod::Percentile,
                level: self.confidence,
                resamples: self.resamples,
                seed: self.seed ^ fnv1a(label),
            },
            alpha: 1.0 - self.confidence,
            target_half_width: self.target,
            min_samples: self.min_samples,
            max_cv: 0.25,
        }
    }
}

/// FNV-1a of a label: a stable per-cell seed whatever the cell order.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// One physical quantity an aggressor delivered under a condition: the median over the
/// blocks that ran it, per tenant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivered {
    /// Aggressor tenant.
    pub tenant: String,
    /// What (`bytes_per_sec`, `iops`, `cpu_threads`, ...).
    pub name: String,
    /// Unit (`B/s`, `IO/s`, `CPUs`, ...).
    pub unit: String,
    /// Median over the condition's blocks (rates per second of running time).
    pub value: f64,
    /// Blocks it is the median of.
    pub blocks: usize,
}

/// What each aggressor's stressor delivered under condition `condition`, from the facts the
/// run recorded ([`crate::facts::PRESSURE_FACT`]), in the order first seen.
pub fn delivered_pressure(run: &LoadedRun, condition: &str) -> Vec<Delivered> {
    let mut seen: Vec<(String, String, String)> = Vec::new();
    let mut values: BTreeMap<(String, String, String), Vec<f64>> = BTreeMap::new();
    for f in run
        .facts
        .iter()
        .filter(|f| f.scope == crate::facts::PRESSURE_FACT)
        .filter(|f| f.value["condition"].as_str() == Some(condition))
    {
        let tenant = f.value["tenant"].as_str().unwrap_or_default().to_string();
        for p in f.value["pressure"].as_array().into_iter().flatten() {
            let (Some(name), Some(unit), Some(v)) =
                (p["name"].as_str(), p["unit"].as_str(), p["value"].as_f64())
            else {
                continue;
            };
            let key = (tenant.clone(), name.to_string(), unit.to_string());
            if !seen.contains(&key) {
                seen.push(key.clone());
            }
            values.entry(key).or_default().push(v);
        }
    }
    seen.into_iter()
        .map(|k| {
            let v = &values[&k];
            Delivered {
                tenant: k.0,
                name: k.1,
                unit: k.2,
                value: isobench_common::median(v),
                blocks: v.len(),
            }
        })
        .collect()
}

pub(crate) fn condition_text(c: &StoreCondition) -> String {
    c.to_string()
}

/// The trials under analysis, with what decides which of them count: shared by every
/// kind's analysis.
pub struct Stored<'a> {
    /// The trials.
    pub trials: &'a [&'a TrialRecord],
    /// Role of each tenant, by name.
    role_of: BTreeMap<&'a str, &'a str>,
    /// The last attempt of each scheduled trial (round, block, slot).
    last_attempt: BTreeMap<(u32, u32, u32), u32>,
}

impl<'a> Stored<'a> {
    /// The trials `trials` of run `run`.
    pub fn new(run: &'a LoadedRun, trials: &'a [&'a TrialRecord]) -> Self {
        let role_of = run
            .tenants
            .iter()
            .map(|t| (t.name.as_str(), t.role.as_str()))
            .collect();
        let mut last_attempt: BTreeMap<(u32, u32, u32), u32> = BTreeMap::new();
        for t in trials {
            let k = t.key;
            let e = last_attempt.entry((k.round, k.block, k.slot)).or_insert(0);
            *e = (*e).max(k.attempt);
        }
        Stored {
            trials,
            role_of,
            last_attempt,
        }
    }

    /// Whether `tenant` is a victim.
    pub fn is_victim(&self, tenant: &str) -> bool {
        self.role_of.get(tenant).copied() == Some("victim")
    }

    /// A disturbed trial whose repeats were used up (or not attempted, because the load
    /// persisted) is kept, flagged: its values count, and the cell says so.
    pub fn kept_disturbed(&self, t: &TrialRecord) -> bool {
        let k = t.key;
        matches!(t.status, TrialStatus::Disturbed(_))
            && self.last_attempt.get(&(k.round, k.block, k.slot)) == Some(&k.attempt)
    }

    /// Whether a trial's values count.
    pub fn usable(&self, t: &TrialRecord) -> bool {
        t.status == TrialStatus::Ok || self.kept_disturbed(t)
    }

    /// The usable values of `metric` of a tenant's probe under a condition.
    pub fn values(&self, tenant: &str, probe: &str, cond: &str, metric: &str) -> Vec<f64> {
        self.trials
            .iter()
            .filter(|t| {
                self.usable(t)
                    && t.tenant == tenant
                    && t.probe == probe
                    && condition_text(&t.condition) == cond
            })
            .flat_map(|t| {
                t.samples
                    .iter()
                    .filter(|s| s.metric == metric)
                    .map(|s| s.value)
            })
            .collect()
    }

    /// The trials of a tenant's probe under a condition that did not respond, when any.
    pub fn dnr(&self, tenant: &str, probe: &str, cond: &str) -> Option<Dnr> {
        let ts: Vec<&&TrialRecord> = self
            .trials
            .iter()
            .filter(|t| {
                t.tenant == tenant && t.probe == probe && condition_text(&t.condition) == cond
            })
            .filter(|t| !matches!(t.status, TrialStatus::Disturbed(_)) || self.kept_disturbed(t))
            .collect();
        let dnr: Vec<&&&TrialRecord> = ts
            .iter()
            .filter(|t| matches!(t.status, TrialStatus::Dnr(_)))
            .collect();
        (!dnr.is_empty()).then(|| Dnr {
            count: dnr.len() as u32,
            of: ts.len() as u32,
            reason: dnr[0].status.reason().unwrap_or("").to_string(),
        })
    }

    /// Kept disturbed trials of a tenant's probe under a condition or its baseline.
    pub fn disturbed(&self, tenant: &str, probe: &str, cond: &str) -> u32 {
        self.trials
            .iter()
            .filter(|t| {
                self.kept_disturbed(t) && t.tenant == tenant && t.probe == probe && {
                    let c = condition_text(&t.condition);
                    c == cond || c == "baseline"
                }
            })
            .count() as u32
    }
}

/// What a cell compares: whose metric, of which class, under which condition.
pub(crate) struct CellOf<'a> {
    pub(crate) tenant: &'a str,
    pub(crate) probe: &'a str,
    pub(crate) probe_class: Option<Class>,
    pub(crate) metric: &'a str,
    pub(crate) unit: &'a str,
    pub(crate) direction: Direction,
    pub(crate) condition: &'a str,
    /// The class of the condition's stressor.
    pub(crate) stressor_class: Option<Class>,
}

pub(crate) fn make_cell(
    of: CellOf<'_>,
    baseline: Vec<f64>,
    contended: Vec<f64>,
    dnr: Option<Dnr>,
    label: &str,
    settings: &StatsSettings,
) -> Cell {
    let CellOf {
        tenant,
        probe,
        probe_class,
        metric,
        unit,
        direction,
        condition,
        stressor_class,
    } = of;
    let (comparison, problem) = match (
        Sample::from_slice(&baseline),
        Sample::from_slice(&contended),
    ) {
        (Ok(b), Ok(c)) if b.len() >= 2 && c.len() >= 2 => {
            match compare(&b, &c, direction, &settings.config(label)) {
                Ok(cmp) => (Some(cmp), None),
                Err(e) => (None, Some(e.to_string())),
            }
        }
        (Ok(_), Ok(_)) => (None, Some("fewer than 2 values on a side".to_string())),
        (Err(_), _) if baseline.is_empty() => (None, Some("no baseline values".to_string())),
        (_, Err(_)) if contended.is_empty() => (None, Some("no contended values".to_string())),
        (Err(e), _) | (_, Err(e)) => (None, Some(e.to_string())),
    };
    let settled = dnr.is_some() || comparison.as_ref().is_some_and(|c| enough(c, settings));
    Cell {
        tenant: tenant.to_string(),
        probe: probe.to_string(),
        probe_class,
        metric: metric.to_string(),
        unit: unit.to_string(),
        direction,
        condition: condition.to_string(),
        stressor_class,
        baseline,
        contended,
        comparison,
        problem,
        dnr,
        settled,
        disturbed: 0,
        design: None,
        paired: None,
        p_adjusted: None,
        independent: None,
        independent_welch: None,
        causes: Vec::new(),
    }
}

/// Units (pairs or cycles) a time-adjacent estimate needs in all for its interval to reach
/// `target` points: `n = (z s / target)^2 (1 + 2 rho)`, with the target in log-ratio terms at
/// the estimated ratio, `rho` the neighbour correlation the interval allows for, and a fifth
/// more for the t quantile over the normal one `z`.
pub fn units_to_target(est: &PairedEstimate, target: f64, z: f64) -> f64 {
    let target = target / 100.0 / est.log_ratio_mean.exp().max(0.05);
    let rho = est.neighbour_correlation.unwrap_or(0.0);
    ((z * est.log_ratio_sd / target).powi(2) * (1.0 + 2.0 * rho) * 1.2).ceil()
}

/// What a kind's analysis reads: the stored run, its plan (`None` for a run stored without
/// one), the trials that count and the settings of the statistics.
#[derive(Clone, Copy)]
pub struct Inputs<'a> {
    /// The run as stored.
    pub run: &'a LoadedRun,
    /// Its plan.
    pub plan: Option<&'a Plan>,
    /// The trials under analysis.
    pub stored: &'a Stored<'a>,
    /// Settings of the statistics.
    pub settings: &'a StatsSettings,
}

/// What a kind's analysis finds: the cells the run reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    /// Victim degradations.
    pub cells: Vec<Cell>,
    /// Aggressor degradations.
    pub aggressor: Vec<Cell>,
    /// Per resource class, the worst victim degradation.
    pub classes: Vec<ClassSummary>,
    /// The kind's own views (a curve as rows, a pairwise grid), rendered by every renderer.
    pub sections: Vec<Section>,
}

/// Which design measured a cell: the plan's, else (runs without a plan) on/off when its
/// contended trials were modulated.
pub(crate) fn cell_design(
    plan: Option<&Plan>,
    probe: Option<&str>,
    cond: &str,
    trials: &[&TrialRecord],
) -> Design {
    if let Some(p) = plan {
        let ci = p.conditions.iter().position(|x| x.id == cond);
        match (probe, ci) {
            (None, Some(ci)) => return p.conditions[ci].design,
            (Some(probe), Some(ci)) => {
                if let Some(pi) = p.probes.iter().position(|x| x.id == probe) {
                    return p.design(pi, ci);
                }
            }
            (_, None) => {}
        }
    }
    let modulated = trials.iter().any(|t| {
        probe.is_none_or(|probe| t.probe == probe)
            && condition_text(&t.condition) == cond
            && t.modulation.is_some()
    });
    if modulated {
        Design::OnOff
    } else {
        Design::Paired
    }
}

/// The cycles of every usable on/off trial of a cell, trial by trial in time order.
pub(crate) fn onoff_units(
    trials: &[&TrialRecord],
    usable: &dyn Fn(&TrialRecord) -> bool,
    tenant: &str,
    probe: &str,
    cond: &str,
    metric: &str,
) -> Vec<Vec<Pair>> {
    onoff_trials(trials, usable, tenant, probe, cond, metric)
        .into_iter()
        .map(|(_, m, s)| crate::onoff::cycles(&s.windows, m))
        .collect()
}

/// The trials behind [`onoff_units`]: every usable modulated trial of a cell with a window
/// series of `metric`, in time order, with its modulation and that series.
pub(crate) fn onoff_trials<'a>(
    trials: &[&'a TrialRecord],
    usable: &dyn Fn(&TrialRecord) -> bool,
    tenant: &str,
    probe: &str,
    cond: &str,
    metric: &str,
) -> Vec<(&'a TrialRecord, &'a Modulation, &'a SeriesRecord)> {
    trials
        .iter()
        .copied()
        .filter(|t| {
            usable(t)
                && t.tenant == tenant
                && t.probe == probe
                && condition_text(&t.condition) == cond
        })
        .filter_map(|t| {
            Some((
                t,
                t.modulation.as_ref()?,
                t.series.iter().find(|s| s.metric == metric)?,
            ))
        })
        .collect()
}

/// p-value below which a result's trials are flagged as differing
/// ([`Flag::VariesBetweenTrials`]): strict, as every cell with two trials or more is tested.
const TRIALS_DIFFER_P: f64 = 0.001;

/// The flag of a result whose on/off trials differ by more than the noise within them allows
/// ([`isobench_stats::between_groups_p`] on the trials' cycles); `None` when they do not, or
/// with fewer than two trials of two cycles.
fn trials_differ(per_trial: &[Vec<Pair>], direction: Direction, rho: f64) -> Option<Flag> {
    let used = usable_trials(per_trial);
    let p_value = isobench_stats::between_groups_p(&used, rho)?;
    if p_value >= TRIALS_DIFFER_P {
        return None;
    }
    let each: Vec<f64> = used
        .iter()
        .map(|g| {
            let mean = g.iter().map(Pair::log_ratio).sum::<f64>() / g.len() as f64;
            isobench_stats::log_ratio_to_degradation(mean, direction)
        })
        .collect();
    Some(Flag::VariesBetweenTrials {
        trials: used.len(),
        lowest: each.iter().copied().fold(f64::INFINITY, f64::min),
        highest: each.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        p_value,
    })
}

/// The estimate of a result whose trials differ: from the trials' own means
/// ([`isobench_stats::trial_level_degradation`]), so the interval spans how much the effect
/// moves from trial to trial, not only the noise within trials. `None` with fewer than two
/// trials of two cycles.
fn trial_level(
    per_trial: &[Vec<Pair>],
    direction: Direction,
    confidence: f64,
) -> Option<PairedEstimate> {
    isobench_stats::trial_level_degradation(&usable_trials(per_trial), direction, confidence).ok()
}

/// The trials of a result that count in comparing trials: those with two cycles or more.
fn usable_trials(per_trial: &[Vec<Pair>]) -> Vec<&[Pair]> {
    per_trial
        .iter()
        .filter(|g| g.len() >= 2)
        .map(Vec::as_slice)
        .collect()
}

/// Each usable contended trial of a cell with the baseline trial of the same probe in the
/// block paired with its block ([`paired_baseline_block`]), in time order.
pub(crate) fn paired_units(
    trials: &[&TrialRecord],
    usable: &dyn Fn(&TrialRecord) -> bool,
    tenant: &str,
    probe: &str,
    cond: &str,
    metric: &str,
) -> Vec<Pair> {
    paired_trials(trials, usable, tenant, probe, cond, metric)
        .into_iter()
        .filter_map(|(b, c)| {
            Some(Pair {
                baseline: metric_value(b, metric)?,
                contended: metric_value(c, metric)?,
            })
        })
        .collect()
}

/// A trial's value of `metric`, when finite and positive (what a pair can compare).
fn metric_value(t: &TrialRecord, metric: &str) -> Option<f64> {
    t.samples
        .iter()
        .find(|s| s.metric == metric)
        .map(|s| s.value)
        .filter(|v| v.is_finite() && *v > 0.0)
}

/// The trials behind [`paired_units`]: each usable contended trial with a value of `metric`,
/// with the last baseline trial with one in the block paired with its block, in time order.
pub(crate) fn paired_trials<'a>(
    trials: &[&'a TrialRecord],
    usable: &dyn Fn(&TrialRecord) -> bool,
    tenant: &str,
    probe: &str,
    cond: &str,
    metric: &str,
) -> Vec<(&'a TrialRecord, &'a TrialRecord)> {
    let value = |t: &TrialRecord| metric_value(t, metric);
    let mut out = Vec::new();
    for t in trials.iter().filter(|t| {
        usable(t) && t.tenant == tenant && t.probe == probe && condition_text(&t.condition) == cond
    }) {
        let k = t.key;
        // The how-manieth contended block of this condition in the round it is.
        let pair = trials
            .iter()
            .filter(|x| x.condition == t.condition)
            .map(|x| x.key)
            .filter(|kx| kx.round == k.round && kx.block < k.block)
            .map(|kx| kx.block)
            .collect::<BTreeSet<u32>>()
            .len() as u32;
        let Some(b) = paired_baseline_block(k.round, pair, k.block) else {
            continue;
        };
        let base = trials
            .iter()
            .copied()
            .filter(|x| {
                let kx = x.key;
                usable(x)
                    && kx.round == k.round
                    && kx.block == b
                    && x.tenant == tenant
                    && x.probe == probe
                    && x.condition == StoreCondition::Baseline
            })
            .filter(|x| value(x).is_some())
            .last();
        if let (Some(b), Some(_)) = (base, value(t)) {
            out.push((b, *t));
        }
    }
    out
}

/// An aggressor's own rate beside the victims against its rate alone in the solo trial of the
/// same block (seconds before), so the host's drift between blocks cancels: one pair per
/// block, the mean of its contended trials against its solo. Rates that are not positive (a
/// stressor that had not started) make no pair.
pub(crate) fn solo_pairs(
    trials: &[&TrialRecord],
    usable: &dyn Fn(&TrialRecord) -> bool,
    tenant: &str,
    cond: &str,
) -> Vec<Pair> {
    let mut alone: BTreeMap<(u32, u32), f64> = BTreeMap::new();
    let mut beside: BTreeMap<(u32, u32), Vec<f64>> = BTreeMap::new();
    for r in trials
        .iter()
        .filter(|r| usable(r) && condition_text(&r.condition) == cond)
    {
        let k = r.key;
        for s in r.stressor_reports.iter().filter(|s| s.tenant == tenant) {
            if !(s.ops_per_sec.is_finite() && s.ops_per_sec > 0.0) {
                continue;
            }
            match s.mode {
                StressorMode::Alone => {
                    alone.entry((k.round, k.block)).or_insert(s.ops_per_sec);
                }
                StressorMode::Contended => beside
                    .entry((k.round, k.block))
                    .or_default()
                    .push(s.ops_per_sec),
            }
        }
    }
    // One unit per block: its trials share the solo value, so they are not independent pairs.
    beside
        .into_iter()
        .filter_map(|(block, rates)| {
            Some(Pair {
                baseline: *alone.get(&block)?,
                contended: rates.iter().sum::<f64>() / rates.len() as f64,
            })
        })
        .collect()
}

/// Whether a comparison needs no more data: its interval is within the target, and it is not
/// flagged for too few values (a cell settled so would stay flagged, since the stopping rule
/// gives it no more).
fn enough(c: &Comparison, settings: &StatsSettings) -> bool {
    c.degradation.half_width() <= settings.target
        && !c
            .flags
            .iter()
            .any(|f| matches!(f, Flag::TooFewSamples { .. }))
}

/// Fewest units (cycles or pairs) for a trustworthy time-adjacent estimate.
fn min_units(design: Design, settings: &StatsSettings) -> usize {
    match design {
        Design::OnOff => 6,
        Design::Paired => settings.min_samples.max(3),
    }
}

/// Replaces a cell's reported comparison by the time-adjacent estimate of its design, keeping
/// the independent two-sample one beside it. The baseline and contended sides become the
/// units' values (cycle means, or the paired trials).
pub(crate) fn apply_design(
    cell: &mut Cell,
    design: Design,
    units: &[Pair],
    per_trial: &[Vec<Pair>],
    label: &str,
    settings: &StatsSettings,
) {
    cell.design = Some(design);
    cell.independent = cell.comparison.take();
    let baseline: Vec<f64> = units.iter().map(|u| u.baseline).collect();
    let contended: Vec<f64> = units.iter().map(|u| u.contended).collect();
    if design == Design::OnOff {
        // The independent estimate on the same data: off-phases against on-phases as two
        // samples.
        cell.independent = match (
            Sample::from_slice(&baseline),
            Sample::from_slice(&contended),
        ) {
            (Ok(b), Ok(c)) if b.len() >= 2 && c.len() >= 2 => {
                compare(&b, &c, cell.direction, &settings.config(label)).ok()
            }
            _ => None,
        };
    }
    cell.independent_welch =
        welch_log_degradation(&baseline, &contended, cell.direction, settings.confidence).ok();
    cell.baseline = baseline;
    cell.contended = contended;
    let config = PairedConfig {
        method: match design {
            Design::OnOff => PairedMethod::CycleT,
            Design::Paired => PairedMethod::LogT,
        },
        level: settings.confidence,
        resamples: settings.resamples,
        seed: settings.seed ^ fnv1a(label),
    };
    let need = min_units(design, settings);
    match paired_degradation(units, cell.direction, &config) {
        Ok(pooled) => {
            let mut flags: Vec<Flag> = Vec::new();
            if pooled.n < need {
                flags.push(Flag::TooFewSamples {
                    side: Side::Contended,
                    n: pooled.n,
                    min: need,
                });
            }
            let differ = trials_differ(
                per_trial,
                cell.direction,
                pooled.neighbour_correlation.unwrap_or(0.0),
            );
            let est = match differ {
                Some(flag) => {
                    flags.push(flag);
                    trial_level(per_trial, cell.direction, settings.confidence).unwrap_or(pooled)
                }
                None => pooled,
            };
            let hw = est.degradation.half_width();
            if hw > settings.target {
                flags.push(Flag::WideInterval {
                    half_width: hw,
                    target: settings.target,
                });
            }
            let significant = est.p_value < 1.0 - settings.confidence;
            if significant && est.degradation.estimate < 0.0 {
                flags.push(Flag::Improved);
            }
            let trustworthy = !flags.iter().any(Flag::is_untrustworthy);
            let (bs, cs) = (
                Sample::from_slice(&cell.baseline).map(|s| s.summary()),
                Sample::from_slice(&cell.contended).map(|s| s.summary()),
            );
            cell.comparison = match (bs, cs, &cell.independent) {
                (Ok(bs), Ok(cs), Some(ind)) => Some(Comparison {
                    direction: cell.direction,
                    baseline: bs,
                    contended: cs,
                    degradation: est.degradation.clone(),
                    mann_whitney: ind.mann_whitney.clone(),
                    significant,
                    flags,
                    trustworthy,
                }),
                _ => None,
            };
            match &cell.comparison {
                // What `make_cell` said of the trial-level values no longer applies.
                Some(_) => cell.problem = None,
                None => {
                    cell.problem
                        .get_or_insert_with(|| "too few units for a comparison".to_string());
                }
            }
            // Settled only when more data could not change the verdict: the interval within
            // the target from enough units, else a cell settled after a few cycles would
            // stay flagged for too few of them.
            cell.settled = cell.dnr.is_some()
                || cell
                    .comparison
                    .as_ref()
                    .is_some_and(|c| enough(c, settings));
            cell.paired = Some(est);
        }
        Err(e) => {
            cell.comparison = None;
            cell.problem = Some(match design {
                Design::OnOff => format!("no usable on/off cycles yet ({e})"),
                Design::Paired => format!("no usable pairs yet ({e})"),
            });
            cell.settled = cell.dnr.is_some();
        }
    }
}

/// The mechanism of the usable trials that `pick` selects: the time with the aggressors
/// running (`on`) or not, added up.
fn phase_totals(
    trials: &[&TrialRecord],
    pick: &dyn Fn(&TrialRecord) -> bool,
    on: bool,
) -> Option<SchedTotals> {
    let mut out: Option<SchedTotals> = None;
    for t in trials.iter().filter(|t| pick(t)) {
        let Some(p) = t
            .mechanism
            .as_ref()
            .and_then(|m| serde_json::from_value::<Phases>(m.clone()).ok())
        else {
            continue;
        };
        if let Some(x) = if on { &p.on } else { &p.off } {
            out.get_or_insert_with(SchedTotals::default).merge(x);
        }
    }
    out
}

/// Names the cause of each significant victim cell from its trials' mechanism
/// ([`crate::cause`]): under the stressor against alone (the off-phases of the same on/off
/// trials, or the baseline trials of paired cells).
pub(crate) fn attach_causes(
    cells: &mut [Cell],
    plan: &Plan,
    host: &serde_json::Value,
    trials: &[&TrialRecord],
    usable: &dyn Fn(&TrialRecord) -> bool,
) {
    // The causes reason from the tenants' CPUs; on a platform that chooses them, the plan's
    // CPU numbers are not the tenants', and no cause is better than a wrong one.
    if plan.platform.capabilities().chooses_cpus {
        return;
    }
    let aggressor_cpus: Vec<usize> = plan
        .tenants
        .iter()
        .filter(|t| t.role == crate::scenario::Role::Aggressor)
        .flat_map(|t| t.cpus.iter().copied())
        .collect();
    let driver = host.get("cpuidle_driver").and_then(|v| v.as_str());
    let irq = host.get("device_irqs").and_then(disk_irq);
    for c in cells.iter_mut() {
        let Some(cmp) = c.comparison.as_ref().filter(|x| x.significant) else {
            continue;
        };
        let Some(design) = c.design else { continue };
        let mine = |t: &TrialRecord| usable(t) && t.tenant == c.tenant && t.probe == c.probe;
        let under = |t: &TrialRecord| mine(t) && condition_text(&t.condition) == c.condition;
        let stressed = phase_totals(trials, &under, true);
        let alone = match design {
            Design::OnOff => phase_totals(trials, &under, false),
            Design::Paired => phase_totals(
                trials,
                &|t| mine(t) && t.condition == StoreCondition::Baseline,
                false,
            ),
        };
        let (Some(alone), Some(stressed)) = (alone, stressed) else {
            continue;
        };
        let victim_cpus = plan
            .tenants
            .iter()
            .find(|t| t.name == c.tenant)
            .map(|t| t.cpus.clone())
            .unwrap_or_default();
        c.causes = attribute(
            &Evidence {
                estimate: cmp.degradation.estimate,
                significant: true,
                lower_is_better: c.direction == Direction::Lower,
                disk_probe: c.probe_class == Some(Class::Disk),
                victim_cpus: &victim_cpus,
                aggressor_cpus: &aggressor_cpus,
                alone: &alone,
                stressed: &stressed,
                cpuidle_driver: driver,
                disk_irq: irq.as_ref(),
            },
            &Rules::default(),
        );
    }
}

/// Significance of the victim cells corrected for multiple comparisons (the run's family of
/// time-adjacent estimates; [`Correction`]).
pub(crate) fn correct_significance(cells: &mut [Cell], settings: &StatsSettings) {
    let idx: Vec<usize> = (0..cells.len())
        .filter(|&i| cells[i].paired.is_some() && cells[i].comparison.is_some())
        .collect();
    let raw: Vec<f64> = idx
        .iter()
        .map(|&i| cells[i].paired.as_ref().map_or(f64::NAN, |p| p.p_value))
        .collect();
    let adj = adjust_p_values(&raw, settings.correction);
    let alpha = 1.0 - settings.confidence;
    for (k, &i) in idx.iter().enumerate() {
        let c = &mut cells[i];
        c.p_adjusted = Some(adj[k]);
        if let Some(cmp) = c.comparison.as_mut() {
            cmp.significant = adj[k] < alpha;
            cmp.flags.retain(|f| *f != Flag::Improved);
            if cmp.significant && cmp.degradation.estimate < 0.0 {
                cmp.flags.push(Flag::Improved);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cycles(ratios: &[f64]) -> Vec<Pair> {
        ratios
            .iter()
            .map(|&r| Pair::new(100.0, 100.0 * r))
            .collect()
    }

    fn settings() -> StatsSettings {
        StatsSettings {
            seed: 1,
            confidence: 0.95,
            target: 5.0,
            min_samples: 5,
            resamples: 200,
            estimator: Estimator::Mean,
            correction: Correction::Holm,
        }
    }

    fn onoff_cell(units: &[Pair]) -> Cell {
        let s = settings();
        let mut c = make_cell(
            CellOf {
                tenant: "victim",
                probe: "cpu-int",
                probe_class: Some(Class::Cpu),
                metric: "ops_per_sec",
                unit: "ops/s",
                direction: Direction::Higher,
                condition: "cpu@100",
                stressor_class: Some(Class::Cpu),
            },
            vec![100.0],
            vec![99.0],
            None,
            "label",
            &s,
        );
        apply_design(&mut c, Design::OnOff, units, &[], "label", &s);
        c
    }

    /// Regression: a quick run exited 4 because three cpu-int cells settled after 5 on/off
    /// cycles (their intervals were within +/-2 points), got no more, and were then flagged
    /// "only 5 contended values (need 6)". A cell flagged for too few units is not settled;
    /// its stale "fewer than 2 values on a side" goes with the trial-level comparison.
    #[test]
    fn a_cell_with_too_few_cycles_is_not_settled_however_narrow() {
        let five = cycles(&[0.99, 1.00, 1.01, 1.00, 0.99]);
        let c = onoff_cell(&five);
        let cmp = c.comparison.as_ref().expect("a comparison");
        assert!(cmp.degradation.half_width() < 2.0, "{:?}", cmp.degradation);
        assert!(!cmp.trustworthy, "flagged for 5 cycles: {:?}", cmp.flags);
        assert!(!c.settled, "settled with 5 cycles of the 6 needed");
        assert_eq!(c.problem, None);
        let six = cycles(&[0.99, 1.00, 1.01, 1.00, 0.99, 1.00]);
        let c = onoff_cell(&six);
        assert!(c.comparison.as_ref().unwrap().trustworthy);
        assert!(c.settled);
    }

    #[test]
    fn trials_that_differ_are_flagged_with_each_trials_effect() {
        // Throughput 40% lower in one trial's on-phases, unchanged in the next.
        let a = cycles(&[0.60, 0.61, 0.59, 0.60, 0.62, 0.58]);
        let b = cycles(&[1.00, 0.99, 1.01, 1.00, 0.98, 1.02]);
        let Some(Flag::VariesBetweenTrials {
            trials,
            lowest,
            highest,
            p_value,
        }) = trials_differ(&[a.clone(), b.clone()], Direction::Higher, 0.0)
        else {
            panic!("not flagged");
        };
        assert_eq!(trials, 2);
        assert!(
            lowest.abs() < 1.0 && (highest - 40.0).abs() < 1.0,
            "{lowest} {highest}"
        );
        assert!(p_value < TRIALS_DIFFER_P);
        // Informational: the trial-level interval carries the variation (below).
        assert!(!Flag::VariesBetweenTrials {
            trials,
            lowest,
            highest,
            p_value
        }
        .is_untrustworthy());
        // Over the two trials' means the estimate is between the two effects and the interval
        // spans both, where the pooled cycles' interval would be a few points wide.
        let est = trial_level(&[a.clone(), b.clone()], Direction::Higher, 0.95).unwrap();
        assert_eq!(est.degradation.method, isobench_stats::CiMethod::TrialT);
        assert_eq!(est.n, 2);
        let d = &est.degradation;
        assert!(d.lower < 0.0 && d.upper > 40.0, "{d:?}");
        assert!((d.estimate - 22.5).abs() < 1.0, "{d:?}");
        // The same effect in both trials, one trial alone, or a trial of one cycle: no flag.
        let c = cycles(&[0.61, 0.59, 0.60, 0.62, 0.58, 0.60]);
        assert!(trials_differ(&[a.clone(), c], Direction::Higher, 0.0).is_none());
        assert!(trials_differ(std::slice::from_ref(&a), Direction::Higher, 0.0).is_none());
        assert!(trials_differ(&[a, cycles(&[1.0])], Direction::Higher, 0.0).is_none());
    }
}
