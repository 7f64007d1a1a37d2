//! Latency distributions of a run: the HdrHistograms its trials stored, merged per victim,
//! probe, metric and condition, read as percentiles and as a histogram.

use std::collections::BTreeMap;

use base64::Engine as _;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
use isobench_results::Results;
use isobench_store::TrialStatus;

/// Merged histograms by (tenant, probe, metric, condition): trials merged and the histogram.
type Merged = BTreeMap<(String, String, String, String), (usize, Histogram<u64>)>;

/// Percentiles the percentile plot shows.
pub const PERCENTILES: &[f64] = &[50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99];

/// One metric's distribution under one condition, every usable trial merged.
pub struct Distribution {
    /// Condition (`baseline`, `cpu@100`).
    pub condition: String,
    /// Trials merged.
    pub trials: usize,
    /// The merged histogram.
    pub histogram: Histogram<u64>,
}

/// A latency metric of a probe in a victim, under every condition it was measured in.
pub struct Latency {
    /// Victim.
    pub tenant: String,
    /// Probe.
    pub probe: String,
    /// Metric.
    pub metric: String,
    /// Baseline first, then the conditions in plan order.
    pub by_condition: Vec<Distribution>,
}

/// The run's latency metrics with stored histograms, in the order first seen; a histogram
/// that does not decode is left out (and counted in the second value).
pub fn latencies(r: &Results) -> (Vec<Latency>, usize) {
    let mut bad = 0;
    let mut merged: Merged = BTreeMap::new();
    let mut order: Vec<(String, String, String)> = Vec::new();
    for t in r
        .trials
        .iter()
        .filter(|t| matches!(t.status, TrialStatus::Ok))
    {
        for h in &t.histograms {
            let Some(hist) = decode(&h.base64) else {
                bad += 1;
                continue;
            };
            let id = (t.tenant.clone(), t.probe.clone(), h.metric.clone());
            if !order.contains(&id) {
                order.push(id.clone());
            }
            let key = (id.0, id.1, id.2, t.condition.to_string());
            match merged.get_mut(&key) {
                Some((n, acc)) => {
                    if acc.add(&hist).is_ok() {
                        *n += 1;
                    }
                }
                None => {
                    merged.insert(key, (1, hist));
                }
            }
        }
    }
    let mut conditions = vec!["baseline".to_string()];
    conditions.extend(r.conditions());
    let out = order
        .into_iter()
        .map(|(tenant, probe, metric)| {
            let mut by_condition = Vec::new();
            let mut known: Vec<String> = conditions.clone();
            for ((te, p, m, c), _) in merged.iter() {
                if *te == tenant && *p == probe && *m == metric && !known.contains(c) {
                    known.push(c.clone());
                }
            }
            for c in known {
                if let Some((n, h)) =
                    merged.remove(&(tenant.clone(), probe.clone(), metric.clone(), c.clone()))
                {
                    by_condition.push(Distribution {
                        condition: c,
                        trials: n,
                        histogram: h,
                    });
                }
            }
            Latency {
                tenant,
                probe,
                metric,
                by_condition,
            }
        })
        .collect();
    (out, bad)
}

fn decode(b64: &str) -> Option<Histogram<u64>> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    Deserializer::new().deserialize(&mut &bytes[..]).ok()
}

/// The share of recorded values in each of `bins` logarithmic bins between `lo` and `hi`
/// (bin edges), for a histogram plot that shows distributions of different sizes alike.
pub fn log_bins(h: &Histogram<u64>, lo: f64, hi: f64, bins: usize) -> Vec<(f64, f64, f64)> {
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
        .map(|(i, &c)| {
            let a = (l0 + step * i as f64).exp();
            let b = (l0 + step * (i + 1) as f64).exp();
            (a, b, c as f64 / total)
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
        let share: f64 = bins.iter().map(|b| b.2).sum();
        assert!((share - 1.0).abs() < 1e-9);
        assert!(bins[0].0 <= 100.001 && bins[3].1 >= 1599.0);
    }
}
