//! The latency view-model: the HdrHistograms a run's trials stored, pooled per victim, probe,
//! metric and condition the way the degradation estimate pools its trials, read as
//! percentiles and as the share of values per logarithmic bin. Computed once here; the HTML
//! report draws it and the JSON export carries it ([`crate::Results::latency`]).
//!
//! Why the pooling matters: a run's estimate compares values measured close together in
//! time. Under the paired design each contended trial is compared with the baseline trial
//! paired with it; under the on/off design the aggressors are frozen and thawed *within*
//! each trial, and each on-phase is compared with the off-phases beside it, so the separate
//! baseline trials play no part. Merging every baseline trial against every contended trial
//! compares trials of different kinds and times (here a fork's p50 read 514 us at baseline
//! and 339 us under a CPU hog whose estimate was 2.1% worse). So:
//!
//! - a paired condition shows two distributions: the baseline trials the estimate paired
//!   with its contended trials, and those contended trials;
//! - an on/off condition shows its trials whole, on- and off-phases together (a trial's
//!   histogram does not separate them), said so in its label and its pooling note, with the
//!   off- and on-phase figures the estimate itself compared beside it;
//! - a metric no estimate compares shows every usable trial per condition, said so.
//!
//! Which trials an estimate used is the analysis's to say ([`Selection`]); this module only
//! pools, reads and labels them.

use base64::Engine as _;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
use isobench_store::TrialRecord;
use serde::{Deserialize, Serialize};

use crate::{Cell, Design};

/// Percentiles read from every distribution.
pub const PERCENTILES: &[f64] = &[50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99];

/// Logarithmic bins of the histogram view.
const BINS: usize = 30;

/// The trials behind one victim probe's metric under one condition, as the analysis chose
/// them for the condition's estimate.
#[derive(Debug, Clone)]
pub struct Selection<'a> {
    /// Victim tenant.
    pub tenant: &'a str,
    /// Probe.
    pub probe: &'a str,
    /// The metric whose histograms are pooled.
    pub metric: &'a str,
    /// Condition (`baseline`, `cpu@100`).
    pub condition: String,
    /// How the estimate pooled them; `None` when no estimate compares these trials.
    pub design: Option<Design>,
    /// The metric of the estimate that chose the trials, when it is not `metric` itself (a
    /// metric measured beside the one the run estimates).
    pub chosen_by: Option<&'a str>,
    /// Paired design: the baseline trials paired with `trials`, in time order; empty
    /// otherwise.
    pub reference: Vec<&'a TrialRecord>,
    /// The trials under the condition (for `baseline` without an estimate, the baseline
    /// trials).
    pub trials: Vec<&'a TrialRecord>,
}

/// One latency metric of a victim's probe, under every condition it was measured in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyView {
    /// Victim tenant.
    pub tenant: String,
    /// Probe.
    pub probe: String,
    /// The metric the histograms belong to (a probe's p50 metric carries the distribution
    /// of every operation it timed).
    pub metric: String,
    /// Unit of the values.
    pub unit: String,
    /// True when the run estimates this metric's degradation (a cell of the matrix).
    pub estimated: bool,
    /// The percentiles each distribution gives, in order ([`PERCENTILES`]).
    pub percentiles: Vec<f64>,
    /// The distributions, per condition in plan order (a paired condition's baseline just
    /// before it).
    pub distributions: Vec<Distribution>,
    /// Stored histograms that did not decode and are left out.
    pub undecoded: u32,
}

/// What a distribution is to its condition's estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The baseline trials a paired estimate compared with the condition's trials.
    Reference,
    /// The condition's trials the estimate used (on/off: each whole, both phases).
    Contended,
    /// Every usable trial of the condition; no estimate compares them.
    Every,
}

/// One pooled distribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    /// Condition it belongs to.
    pub condition: String,
    /// What it is to the estimate.
    pub role: Role,
    /// The design of the estimate that chose its trials.
    pub design: Option<Design>,
    /// Its name in a legend: `baseline paired with memhog@100`, `memhog@100`, `cpu@100
    /// (on/off, both phases)`, `baseline`.
    pub label: String,
    /// How it was pooled, in a sentence.
    pub pooling: String,
    /// Trials pooled.
    pub trials: u32,
    /// Values recorded in them.
    pub values: u64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// The value at each of the view's percentiles.
    pub quantiles: Vec<f64>,
    /// Share of the values in each logarithmic bin; every distribution of a view has the
    /// same bins.
    pub bins: Vec<Bin>,
    /// For a condition's trials: what the estimate compared, from its cell.
    pub estimate: Option<EstimateNote>,
}

/// A bin of a [`Distribution`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bin {
    /// Lower edge.
    pub from: f64,
    /// Upper edge.
    pub to: f64,
    /// Share of the values, 0..=1.
    pub share: f64,
}

/// The figures the condition's estimate compared, as its cell holds them: the median of its
/// units on either side (on/off: the off-phase level beside each on-phase and the on-phase
/// level, per cycle; paired: each pair's baseline and contended trial) and the degradation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EstimateNote {
    /// The metric estimated.
    pub metric: String,
    /// Units compared (cycles or pairs).
    pub units: usize,
    /// Median of the units' reference side, in the metric's unit.
    pub reference_median: f64,
    /// Median of the units' contended side.
    pub contended_median: f64,
    /// Degradation, percent (positive = worse).
    pub degradation: f64,
    /// Interval lower bound.
    pub lower: f64,
    /// Interval upper bound.
    pub upper: f64,
    /// Confidence level of the interval.
    pub level: f64,
    /// Significant (after the run's correction).
    pub significant: bool,
}

/// The latency views of the selections, in the order their metrics first appear; `cells`
/// are the run's victim cells (for each condition's estimate). A metric none of whose
/// selected trials stored a histogram has no view.
pub fn views(selections: &[Selection<'_>], cells: &[Cell]) -> Vec<LatencyView> {
    let mut keys: Vec<(&str, &str, &str)> = Vec::new();
    for s in selections {
        let k = (s.tenant, s.probe, s.metric);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.into_iter()
        .filter_map(|(tenant, probe, metric)| {
            let mine: Vec<&Selection<'_>> = selections
                .iter()
                .filter(|s| (s.tenant, s.probe, s.metric) == (tenant, probe, metric))
                .collect();
            view(tenant, probe, metric, &mine, cells)
        })
        .collect()
}

/// A pooled histogram before it is read: its place, its trials and the merged values.
struct Pooled<'s, 'a> {
    selection: &'s Selection<'a>,
    role: Role,
    trials: u32,
    histogram: Histogram<u64>,
}

fn view(
    tenant: &str,
    probe: &str,
    metric: &str,
    selections: &[&Selection<'_>],
    cells: &[Cell],
) -> Option<LatencyView> {
    let mut undecoded = 0;
    let mut pooled: Vec<Pooled<'_, '_>> = Vec::new();
    for s in selections {
        let sides: &[(Role, &Vec<&TrialRecord>)] = match s.design {
            Some(Design::Paired) => &[
                (Role::Reference, &s.reference),
                (Role::Contended, &s.trials),
            ],
            Some(Design::OnOff) => &[(Role::Contended, &s.trials)],
            None => &[(Role::Every, &s.trials)],
        };
        for (role, trials) in sides {
            let (histogram, n, bad) = merge(trials, metric);
            undecoded += bad;
            if let Some(histogram) = histogram {
                pooled.push(Pooled {
                    selection: s,
                    role: *role,
                    trials: n,
                    histogram,
                });
            }
        }
    }
    if pooled.is_empty() {
        return None;
    }
    let unit = selections
        .iter()
        .flat_map(|s| s.trials.iter().chain(&s.reference))
        .flat_map(|t| &t.samples)
        .find(|x| x.metric == metric)
        .map(|x| x.unit.clone())
        .unwrap_or_default();
    let lo = pooled
        .iter()
        .map(|p| p.histogram.min().max(1) as f64)
        .fold(f64::INFINITY, f64::min);
    let hi = pooled
        .iter()
        .map(|p| p.histogram.value_at_quantile(0.9999) as f64)
        .fold(0.0, f64::max)
        .max(lo * 1.01);
    let distributions = pooled
        .iter()
        .map(|p| distribution(p, metric, lo, hi, cells))
        .collect();
    Some(LatencyView {
        tenant: tenant.to_string(),
        probe: probe.to_string(),
        metric: metric.to_string(),
        unit,
        estimated: cells.iter().any(|c| {
            c.tenant == tenant && c.probe == probe && c.metric == metric && c.design.is_some()
        }),
        percentiles: PERCENTILES.to_vec(),
        distributions,
        undecoded,
    })
}

fn distribution(
    p: &Pooled<'_, '_>,
    metric: &str,
    lo: f64,
    hi: f64,
    cells: &[Cell],
) -> Distribution {
    let s = p.selection;
    let cond = s.condition.as_str();
    let n = p.trials;
    let by = s
        .chosen_by
        .map_or_else(String::new, |m| format!(" (chosen by the estimate of {m})"));
    let (label, pooling) = match (p.role, s.design) {
        (Role::Reference, _) => (
            format!("baseline paired with {cond}"),
            format!(
                "the {n} baseline trial(s) the paired estimate compared with its {cond} \
                 trials, each the one next to its contended trial in time{by}"
            ),
        ),
        (Role::Contended, Some(Design::OnOff)) => (
            format!("{cond} (on/off, both phases)"),
            format!(
                "the {n} on/off trial(s) the estimate used{by}, each whole: the aggressors \
                 ran and were frozen in turn, so these values mix both phases. The estimate \
                 compares each on-phase with the off-phases beside it in these same trials, \
                 which a trial's histogram cannot separate; the separate baseline trials \
                 play no part in it"
            ),
        ),
        (Role::Contended, _) => (
            cond.to_string(),
            format!(
                "the {n} {cond} trial(s) the paired estimate used, each with its baseline \
                 trial{by}"
            ),
        ),
        (Role::Every, _) => (
            cond.to_string(),
            format!("every usable {cond} trial ({n}); no estimate of this run compares them"),
        ),
    };
    // The estimate of this very metric: one of another metric (the trials' chooser) is in
    // another unit and says nothing of this distribution.
    let estimate = (p.role == Role::Contended && s.chosen_by.is_none())
        .then(|| {
            let c = cells.iter().find(|c| {
                c.tenant == s.tenant
                    && c.probe == s.probe
                    && c.condition == cond
                    && c.metric == metric
            })?;
            let cmp = c.comparison.as_ref()?;
            Some(EstimateNote {
                metric: c.metric.clone(),
                units: c.baseline.len().min(c.contended.len()),
                reference_median: cmp.baseline.median,
                contended_median: cmp.contended.median,
                degradation: cmp.degradation.estimate,
                lower: cmp.degradation.lower,
                upper: cmp.degradation.upper,
                level: cmp.degradation.level,
                significant: cmp.significant,
            })
        })
        .flatten();
    let h = &p.histogram;
    Distribution {
        condition: cond.to_string(),
        role: p.role,
        design: s.design,
        label,
        pooling,
        trials: n,
        values: h.len(),
        min: h.min() as f64,
        max: h.max() as f64,
        quantiles: PERCENTILES
            .iter()
            .map(|q| h.value_at_quantile(q / 100.0) as f64)
            .collect(),
        bins: log_bins(h, lo, hi, BINS),
        estimate,
    }
}

/// The histograms of `metric` in `trials` merged (each trial at most once), with the
/// trials merged and the histograms that did not decode.
fn merge(trials: &[&TrialRecord], metric: &str) -> (Option<Histogram<u64>>, u32, u32) {
    let mut out: Option<Histogram<u64>> = None;
    let (mut n, mut bad) = (0u32, 0u32);
    let mut seen: Vec<(&str, isobench_store::TrialKey)> = Vec::new();
    for t in trials {
        if seen.contains(&(t.tenant.as_str(), t.key)) {
            continue;
        }
        seen.push((t.tenant.as_str(), t.key));
        for h in t.histograms.iter().filter(|h| h.metric == metric) {
            let Some(hist) = decode(&h.base64) else {
                bad += 1;
                continue;
            };
            match out.as_mut() {
                Some(acc) => {
                    if acc.add(&hist).is_ok() {
                        n += 1;
                    } else {
                        bad += 1;
                    }
                }
                None => {
                    out = Some(hist);
                    n += 1;
                }
            }
        }
    }
    (out, n, bad)
}

fn decode(b64: &str) -> Option<Histogram<u64>> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    Deserializer::new().deserialize(&mut &bytes[..]).ok()
}

/// The share of recorded values in each of `bins` logarithmic bins between `lo` and `hi`
/// (bin edges), so distributions of different sizes read alike.
fn log_bins(h: &Histogram<u64>, lo: f64, hi: f64, bins: usize) -> Vec<Bin> {
    let total = h.len().max(1) as f64;
    let (l0, l1) = (lo.max(1.0).ln(), hi.max(lo.max(1.0) * 1.0001).ln());
    let step = (l1 - l0) / bins as f64;
    let mut counts = vec![0u64; bins];
    for v in h.iter_recorded() {
        let x = (v.value_iterated_to() as f64).max(1.0).ln();
        let i = (((x - l0) / step).floor().max(0.0) as usize).min(bins - 1);
        counts[i] += v.count_at_value();
    }
    counts
        .iter()
        .enumerate()
        .map(|(i, &c)| Bin {
            from: (l0 + step * i as f64).exp(),
            to: (l0 + step * (i + 1) as f64).exp(),
            share: c as f64 / total,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bins_hold_every_value_once() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in [100u64, 200, 400, 800, 1600] {
            h.record(v).unwrap();
        }
        let bins = log_bins(&h, 100.0, 1600.0, 4);
        let share: f64 = bins.iter().map(|b| b.share).sum();
        assert!((share - 1.0).abs() < 1e-9);
        assert!(bins[0].from <= 100.001 && bins[3].to >= 1599.0);
    }
}
