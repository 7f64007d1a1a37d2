//! Window series: a probe's main metrics cut into consecutive short windows of the run, so a
//! controller that freezes and thaws a neighbour with a fixed period can compare the windows
//! in which the neighbour ran against the neighbouring windows in which it was frozen (the
//! on/off design). Comparisons seconds apart measure this machine's drifting vCPU speed, not
//! the neighbour; windows tens of ms apart do not.
//!
//! The helpers turn what probes already record into windows:
//! - rates, from logs of (time, cumulative units) per thread ([`rate_series`]): the units
//!   done in a window (a chunk straddling an edge counted in proportion to its time), summed
//!   over threads, per second of the window;
//! - latencies, from timed events or batches ([`latency_series`]), each placed in the window
//!   holding its time stamp: the window's median (for p50 metrics) or mean (for mean
//!   metrics).
//!
//! Every series tiles the measured interval `[begin, end]` (warm-up excluded): windows in
//! time order, each `start_ns < end_ns`, each starting where the previous one ended, the
//! first at `begin` and the last ending at `end`. Times are `CLOCK_MONOTONIC` ns
//! ([`crate::timer::now_ns`]).
//!
//! The rule for latency windows ([`latency_series`]):
//! - median and mean: a window needs at least [`MIN_EVENTS`] events; one with fewer is
//!   merged into the next window (the last one into the one before), so the tiling stays
//!   whole and no window value rests on one or two events;
//! - a tail quantile q (p99, p99.9): a series is returned only when *every* window of the
//!   plain tiling holds at least `10 / (1 - q)` events (1,000 for p99, 10,000 for p99.9), so
//!   each window's quantile rests on at least ten events beyond it; otherwise none (a
//!   per-window p99 from a few dozen events is the window's maximum, not its p99).

use isobench_common::median;

use crate::metric::{Metric, Window};

/// Fewest events behind a window's median or mean; sparser windows are merged.
pub(super) const MIN_EVENTS: usize = 5;

/// Boundaries of about `width_ns`-long windows tiling `[begin, end]`: `n = round(span /
/// width)` windows (at least one, at most one per ns) of equal length up to rounding.
pub(super) fn tile(begin: u64, end: u64, width_ns: u64) -> Vec<(u64, u64)> {
    let span = end.saturating_sub(begin);
    if span == 0 {
        return Vec::new();
    }
    let width = width_ns.max(1);
    let n = ((span + width / 2) / width).clamp(1, span);
    let at = |i: u64| begin + (span as u128 * i as u128 / n as u128) as u64;
    (0..n).map(|i| (at(i), at(i + 1))).collect()
}

/// Cumulative units done by time `t`, linear between logged points (the log's first and last
/// values outside it).
pub(super) fn done_at(log: &[(u64, f64)], t: f64) -> f64 {
    let i = log.partition_point(|&(ts, _)| (ts as f64) <= t);
    if i == 0 {
        return log[0].1;
    }
    if i == log.len() {
        return log[i - 1].1;
    }
    let (t0, d0) = log[i - 1];
    let (t1, d1) = log[i];
    d0 + (d1 - d0) * (t - t0 as f64) / (t1 - t0) as f64
}

/// Rate per second in windows of about `width_ns` tiling `[begin, end]`, summed over the
/// threads' logs of (time ns, cumulative units) and multiplied by `scale` (an overhead
/// correction or a unit change).
pub(super) fn rate_series(
    logs: &[Vec<(u64, f64)>],
    begin: u64,
    end: u64,
    width_ns: u64,
    scale: f64,
) -> Vec<Window> {
    tile(begin, end, width_ns)
        .into_iter()
        .map(|(a, b)| {
            let units: f64 = logs
                .iter()
                .filter(|l| !l.is_empty())
                .map(|l| done_at(l, b as f64) - done_at(l, a as f64))
                .sum();
            Window {
                start_ns: a,
                end_ns: b,
                value: units / (b - a) as f64 * 1e9 * scale,
            }
        })
        .collect()
}

/// What a latency window reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Stat {
    /// The median of the window's events.
    Median,
    /// The mean of the window's events.
    Mean,
    /// A tail quantile in (0, 1), e.g. 0.99.
    Quantile(f64),
}

/// One timed event or batch: when it happened (its end, or a batch's midpoint) and its value
/// (a latency, a batch's time per operation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Event {
    /// Time stamp, `CLOCK_MONOTONIC` ns.
    pub t_ns: u64,
    /// The value, in the metric's unit.
    pub value: f64,
}

/// Fewest events a window needs for `stat` (see the module's rule).
pub(super) fn min_events(stat: Stat) -> usize {
    match stat {
        Stat::Median | Stat::Mean => MIN_EVENTS,
        Stat::Quantile(q) => (10.0 / (1.0 - q.clamp(0.0, 0.999_999))).ceil() as usize,
    }
}

/// The series of `stat` over events in windows of about `width_ns` tiling `[begin, end]`
/// (events outside it are ignored), or `None` when the events cannot support it (see the
/// module's rule). `events` need not be sorted.
pub(super) fn latency_series(
    events: &[Event],
    begin: u64,
    end: u64,
    width_ns: u64,
    stat: Stat,
) -> Option<Vec<Window>> {
    let bounds = tile(begin, end, width_ns);
    if bounds.is_empty() {
        return None;
    }
    let mut groups: Vec<Vec<f64>> = vec![Vec::new(); bounds.len()];
    for e in events {
        if e.t_ns < begin || e.t_ns > end {
            continue;
        }
        let i = bounds
            .partition_point(|&(_, b)| b <= e.t_ns)
            .min(bounds.len() - 1);
        groups[i].push(e.value);
    }
    let need = min_events(stat);
    let mut merged: Vec<((u64, u64), Vec<f64>)> = Vec::new();
    if matches!(stat, Stat::Quantile(_)) {
        if groups.iter().any(|g| g.len() < need) {
            return None;
        }
        merged = bounds.into_iter().zip(groups).collect();
    } else {
        // Carry sparse windows forward into the next one.
        let mut carry: Option<((u64, u64), Vec<f64>)> = None;
        for (bd, g) in bounds.into_iter().zip(groups) {
            let (bd, g) = match carry.take() {
                Some(((a, _), mut v)) => {
                    v.extend(g);
                    ((a, bd.1), v)
                }
                None => (bd, g),
            };
            if g.len() >= need {
                merged.push((bd, g));
            } else {
                carry = Some((bd, g));
            }
        }
        if let Some(((_, b), v)) = carry {
            match merged.last_mut() {
                Some(last) => {
                    last.0 .1 = b;
                    last.1.extend(v);
                }
                None if v.is_empty() => return None,
                // Too few events in the whole interval for windows: one window of them all.
                None => merged.push(((begin, b), v)),
            }
        }
    }
    Some(
        merged
            .into_iter()
            .map(|((a, b), v)| Window {
                start_ns: a,
                end_ns: b,
                value: value_of(&v, stat),
            })
            .collect(),
    )
}

fn value_of(v: &[f64], stat: Stat) -> f64 {
    match stat {
        Stat::Median => median(v),
        Stat::Mean => v.iter().sum::<f64>() / v.len() as f64,
        Stat::Quantile(q) => {
            let mut s = v.to_vec();
            s.sort_by(f64::total_cmp);
            let i = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1;
            s[i]
        }
    }
}

/// Attaches series to the metrics made by [`crate::metric::latency_metrics`] with `prefix`
/// and `unit`: the median series to `*_p50_*`, the mean series to `*_mean_*`, and p99 and
/// p99.9 series when every window has enough events (see the module's rule). Event values
/// are in `unit`.
pub(super) fn attach_latency(
    metrics: &mut [Metric],
    prefix: &str,
    unit: &str,
    events: &[Event],
    begin: u64,
    end: u64,
    width_ns: u64,
) {
    for (suffix, stat) in [
        ("p50", Stat::Median),
        ("mean", Stat::Mean),
        ("p99", Stat::Quantile(0.99)),
        ("p999", Stat::Quantile(0.999)),
    ] {
        let name = format!("{prefix}_{suffix}_{unit}");
        if let Some(m) = metrics.iter_mut().find(|m| m.name == name) {
            m.series = latency_series(events, begin, end, width_ns, stat);
        }
    }
}

/// Checks the tiling invariants of a series over `[begin, end]`; for tests.
#[cfg(test)]
pub(super) fn assert_tiles(s: &[Window], begin: u64, end: u64) {
    assert!(!s.is_empty());
    assert_eq!(s[0].start_ns, begin);
    assert_eq!(s[s.len() - 1].end_ns, end);
    for w in s {
        assert!(w.start_ns < w.end_ns, "{w:?}");
    }
    for p in s.windows(2) {
        assert_eq!(p[0].end_ns, p[1].start_ns, "{p:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn tiles_cover_the_interval_without_gaps() {
        for (b, e, w) in [
            (0, 100, 7),
            (5, 6, 1000),
            (1_000, 1_000_003, 333),
            (7, 1007, 1),
        ] {
            let t = tile(b, e, w);
            let s: Vec<Window> = t
                .iter()
                .map(|&(a, b)| Window {
                    start_ns: a,
                    end_ns: b,
                    value: 0.0,
                })
                .collect();
            assert_tiles(&s, b, e);
        }
        assert!(tile(5, 5, 10).is_empty());
        assert_eq!(tile(0, 100 * MS, 20 * MS).len(), 5);
    }

    fn const_log(start: u64, chunk_ns: u64, per_chunk: f64, n: u64) -> Vec<(u64, f64)> {
        (0..=n)
            .map(|i| (start + i * chunk_ns, i as f64 * per_chunk))
            .collect()
    }

    #[test]
    fn constant_rate_gives_exact_windows() {
        // 1000 units per 1.3 ms on two threads with staggered edges: 2 * 1000/1.3 per ms.
        let logs = vec![
            const_log(0, 1_300_000, 1000.0, 300),
            const_log(500_000, 1_300_000, 1000.0, 300),
        ];
        let s = rate_series(&logs, 10 * MS, 350 * MS, 20 * MS, 1.0);
        assert_tiles(&s, 10 * MS, 350 * MS);
        assert_eq!(s.len(), 17);
        let want = 2.0 * 1000.0 / 1.3e-3;
        for w in &s {
            assert!((w.value - want).abs() / want < 1e-9, "{w:?}");
        }
    }

    #[test]
    fn a_step_in_speed_shows_in_the_right_windows() {
        // 1 unit/us for 100 ms, then 2 units/us for 100 ms, in 1 ms chunks.
        let mut log = vec![(0u64, 0.0)];
        for i in 1..=200u64 {
            let per = if i <= 100 { 1000.0 } else { 2000.0 };
            log.push((i * MS, log.last().unwrap().1 + per));
        }
        let s = rate_series(&[log], 0, 200 * MS, 20 * MS, 1.0);
        assert_eq!(s.len(), 10);
        for (i, w) in s.iter().enumerate() {
            let want = if i < 5 { 1e6 } else { 2e6 };
            assert!((w.value - want).abs() / want < 1e-9, "{i} {w:?}");
        }
    }

    fn events(ts: impl Iterator<Item = u64>, f: impl Fn(u64) -> f64) -> Vec<Event> {
        ts.map(|t| Event {
            t_ns: t,
            value: f(t),
        })
        .collect()
    }

    #[test]
    fn latency_windows_take_median_and_mean_of_their_events() {
        // One event per 100 us; latency 10 before 50 ms, 30 after, one outlier per window.
        let ev = events((1..1000).map(|i| i * 100_000), |t| {
            if t % (10 * MS) == 0 {
                1000.0
            } else if t < 50 * MS {
                10.0
            } else {
                30.0
            }
        });
        let s = latency_series(&ev, 0, 100 * MS, 10 * MS, Stat::Median).unwrap();
        assert_tiles(&s, 0, 100 * MS);
        assert_eq!(s.len(), 10);
        for (i, w) in s.iter().enumerate() {
            assert_eq!(w.value, if i < 5 { 10.0 } else { 30.0 }, "{i}");
        }
        let m = latency_series(&ev, 0, 100 * MS, 10 * MS, Stat::Mean).unwrap();
        // Window 1 holds 99 events of 10 and the outlier at 10 ms.
        assert!(
            (m[1].value - (99.0 * 10.0 + 1000.0) / 100.0).abs() < 1e-9,
            "{:?}",
            m[1]
        );
    }

    #[test]
    fn sparse_windows_are_merged_and_tails_need_many_events() {
        // Events every 3 ms: 10 ms windows hold 3-4 events, fewer than MIN_EVENTS.
        let ev = events((1..34).map(|i| i * 3 * MS), |_| 5.0);
        let s = latency_series(&ev, 0, 100 * MS, 10 * MS, Stat::Median).unwrap();
        assert_tiles(&s, 0, 100 * MS);
        assert!(s.len() < 10 && s.len() >= 4, "{}", s.len());
        assert!(latency_series(&ev, 0, 100 * MS, 10 * MS, Stat::Quantile(0.99)).is_none());
        // 2000 events per window: enough for p99 but not for p99.9.
        let dense = events((0..20_000).map(|i| i * 5_000), |t| (t % 1000) as f64);
        let p99 = latency_series(&dense, 0, 100 * MS, 10 * MS, Stat::Quantile(0.99)).unwrap();
        assert_tiles(&p99, 0, 100 * MS);
        assert!(latency_series(&dense, 0, 100 * MS, 10 * MS, Stat::Quantile(0.999)).is_none());
        assert!(latency_series(&[], 0, 100 * MS, 10 * MS, Stat::Median).is_none());
    }
}
