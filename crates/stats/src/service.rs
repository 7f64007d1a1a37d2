//! A service's protection, second by second: how much of its target rate it kept (isol%),
//! how much its tail latency rose (lat-imp%), how long and how far it broke its SLO, how
//! long it took to recover once the aggressor stopped, and, across repeated episodes, the
//! interval of each figure.
//!
//! Why: a platform engineer's question is not "which resource leaks" but "does my service
//! keep its SLO while the neighbour misbehaves, and what does that cost the neighbour".
//! resctl-bench (Meta's resource-control benchmark) answers it for cgroup2 with these
//! figures; they are defined here the same way, on one episode's per-window record:
//!
//! - **isol%** of a window: the rate the service achieved in it as a share of its target,
//!   in percent. Summarised over the windows while the aggressor ran as p01, p05, p50 and
//!   mean (resctl-bench reports p01 to max and the mean). Not clipped: a window above 100%
//!   (a backlog served late) is shown as it is.
//! - **lat-imp%**: the mean over the aggressor's windows of `p99 / baseline p99 - 1`, in
//!   percent, where the baseline is the median p99 of the stable windows before the
//!   aggressor started.
//! - **SLO seconds**: the share of the windows from the aggressor's start to the end of the
//!   episode whose p99 is above the SLO, and the **area** above it: the sum over those
//!   windows of `(p99 - slo) * width`, in ms x s, so a second at twice the SLO counts more
//!   than a second just above it.
//! - **Recovery**: from the aggressor's stop, the time until `sustain` consecutive windows
//!   are back (isol% at least `recovered_isol_pct` and p99 within the SLO); the end of the
//!   first such window, so it is accurate to one window. `Some(0)` when the service never
//!   left, `None` when it did not recover before the episode ended.
//!
//! A window's p99 that rests on fewer than [`FEW_EVENTS`] requests is the near-maximum of
//! a few, an estimate biased *low*: a violation it shows is certain, and a window it shows
//! within the SLO is counted as such but flagged ([`EpisodeFigures::few_event_windows`]).
//!
//! Intervals over episodes ([`episode_interval`]): each episode gives one value of a
//! figure; episodes are apart in time and start from a recovered service, so they are
//! treated as independent, and the interval of their mean is the percentile bootstrap
//! (Efron & Tibshirani 1993, ch. 13) over episodes, seeded.

use serde::{Deserialize, Serialize};

use crate::error::{invalid, StatsError};
use crate::rng;

/// Fewest requests behind a window's p99 for it to be more than the near-maximum of a few.
pub const FEW_EVENTS: f64 = 100.0;

/// One window of a service's record.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ServiceWindow {
    /// Start, ns.
    pub start_ns: u64,
    /// End, ns.
    pub end_ns: u64,
    /// Requests completed per second in the window.
    pub rate: f64,
    /// p99 latency of the requests completed in the window, ms (from their due times).
    pub p99_ms: Option<f64>,
}

impl ServiceWindow {
    fn secs(&self) -> f64 {
        self.end_ns.saturating_sub(self.start_ns) as f64 / 1e9
    }

    fn mid(&self) -> u64 {
        self.start_ns + (self.end_ns.saturating_sub(self.start_ns)) / 2
    }
}

/// When the aggressor ran in one episode, and what the service was held to.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EpisodeSpec {
    /// The target rate, requests per second.
    pub target_rps: f64,
    /// The p99 bound, ms.
    pub slo_ms: f64,
    /// Windows before this time are warm-up, ignored.
    pub settled_ns: u64,
    /// The aggressor started (its start was done).
    pub start_ns: u64,
    /// The aggressor stopped (or died), if it did within the episode.
    pub stop_ns: Option<u64>,
    /// Consecutive good windows that make a recovery.
    pub sustain: usize,
    /// isol% a window needs to count as recovered.
    pub recovered_isol_pct: f64,
}

/// isol% over the aggressor's windows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Isolation {
    /// 1st percentile.
    pub p01: f64,
    /// 5th percentile.
    pub p05: f64,
    /// Median.
    pub p50: f64,
    /// Mean.
    pub mean: f64,
}

/// What one episode shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeFigures {
    /// isol% while the aggressor ran.
    pub isol: Isolation,
    /// Mean rate before the aggressor, as a share of the target, percent.
    pub baseline_isol_pct: f64,
    /// Median p99 of the stable windows before the aggressor, ms.
    pub baseline_p99_ms: Option<f64>,
    /// Mean p99 while the aggressor ran, ms.
    pub during_p99_ms: Option<f64>,
    /// lat-imp%, when both sides have a p99.
    pub lat_imp_pct: Option<f64>,
    /// Share of the windows from the aggressor's start on whose p99 broke the SLO, percent.
    pub slo_violation_pct: f64,
    /// Area above the SLO from the aggressor's start on, ms x s.
    pub slo_area_ms_s: f64,
    /// Time from the stop to recovery, s (see the module header).
    pub recovery_s: Option<f64>,
    /// Windows while the aggressor ran.
    pub during_windows: usize,
    /// Windows (from the start on) whose p99 rests on fewer than [`FEW_EVENTS`] requests.
    pub few_event_windows: usize,
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

fn median(xs: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(quantile(&v, 0.5))
}

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// isol% over windows whose rates (requests/s) are `rates`, against `target_rps`: the
/// share of the target each window achieved, summarised (module docs). `None` without a
/// window or a positive target.
pub fn isolation(rates: &[f64], target_rps: f64) -> Option<Isolation> {
    if rates.is_empty() || !(target_rps > 0.0 && target_rps.is_finite()) {
        return None;
    }
    let mut isol: Vec<f64> = rates.iter().map(|r| 100.0 * r / target_rps).collect();
    isol.sort_by(f64::total_cmp);
    Some(Isolation {
        p01: quantile(&isol, 0.01),
        p05: quantile(&isol, 0.05),
        p50: quantile(&isol, 0.5),
        mean: mean(&isol).unwrap_or(f64::NAN),
    })
}

/// The figures of one episode's windows (in time order). Errors when the spec is not
/// usable (no target, no SLO) or no window falls while the aggressor ran.
pub fn episode_figures(
    windows: &[ServiceWindow],
    spec: &EpisodeSpec,
) -> Result<EpisodeFigures, StatsError> {
    if !(spec.target_rps > 0.0 && spec.target_rps.is_finite()) {
        return Err(invalid("target_rps", spec.target_rps, "a positive number"));
    }
    if !(spec.slo_ms > 0.0 && spec.slo_ms.is_finite()) {
        return Err(invalid("slo_ms", spec.slo_ms, "a positive number"));
    }
    let isol = |w: &ServiceWindow| 100.0 * w.rate / spec.target_rps;
    let stop = spec.stop_ns.unwrap_or(u64::MAX);
    let before: Vec<&ServiceWindow> = windows
        .iter()
        .filter(|w| w.start_ns >= spec.settled_ns && w.end_ns <= spec.start_ns)
        .collect();
    let during: Vec<&ServiceWindow> = windows
        .iter()
        .filter(|w| w.mid() >= spec.start_ns && w.mid() < stop)
        .collect();
    if during.is_empty() {
        return Err(invalid(
            "start_ns",
            spec.start_ns,
            "a time at which windows were measured",
        ));
    }
    let rates: Vec<f64> = during.iter().map(|w| w.rate).collect();
    let isolation = isolation(&rates, spec.target_rps).expect("windows while the aggressor ran");
    let b_isol: Vec<f64> = before.iter().map(|w| isol(w)).collect();
    let b_p99: Vec<f64> = before.iter().filter_map(|w| w.p99_ms).collect();
    let baseline_p99 = median(&b_p99).filter(|b| *b > 0.0);
    let d_p99: Vec<f64> = during.iter().filter_map(|w| w.p99_ms).collect();
    let lat_imp = baseline_p99.and_then(|b| {
        let r: Vec<f64> = d_p99.iter().map(|p| 100.0 * (p / b - 1.0)).collect();
        mean(&r)
    });
    let from_start: Vec<&ServiceWindow> = windows
        .iter()
        .filter(|w| w.mid() >= spec.start_ns)
        .collect();
    let over: Vec<&&ServiceWindow> = from_start
        .iter()
        .filter(|w| w.p99_ms.is_some_and(|p| p > spec.slo_ms))
        .collect();
    let slo_violation_pct = 100.0 * over.len() as f64 / from_start.len().max(1) as f64;
    let slo_area_ms_s = over
        .iter()
        .map(|w| (w.p99_ms.unwrap_or(0.0) - spec.slo_ms) * w.secs())
        .sum();
    let few_event_windows = from_start
        .iter()
        .filter(|w| w.rate * w.secs() < FEW_EVENTS)
        .count();
    let good = |w: &ServiceWindow| {
        isol(w) >= spec.recovered_isol_pct && w.p99_ms.is_some_and(|p| p <= spec.slo_ms)
    };
    let left = during.iter().any(|w| !good(w));
    let recovery_s = match spec.stop_ns {
        _ if !left => Some(0.0),
        None => None,
        Some(stop) => {
            let after: Vec<&ServiceWindow> =
                windows.iter().filter(|w| w.start_ns >= stop).collect();
            let need = spec.sustain.max(1);
            after
                .windows(need)
                .find(|run| run.iter().all(|w| good(w)))
                .map(|run| run[0].end_ns.saturating_sub(stop) as f64 / 1e9)
        }
    };
    Ok(EpisodeFigures {
        isol: isolation,
        baseline_isol_pct: mean(&b_isol).unwrap_or(f64::NAN),
        baseline_p99_ms: baseline_p99,
        during_p99_ms: mean(&d_p99),
        lat_imp_pct: lat_imp,
        slo_violation_pct,
        slo_area_ms_s,
        recovery_s,
        during_windows: during.len(),
        few_event_windows,
    })
}

/// A figure's mean over episodes with its interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EpisodeInterval {
    /// Mean over the episodes.
    pub estimate: f64,
    /// Lower bound.
    pub lower: f64,
    /// Upper bound.
    pub upper: f64,
    /// Episodes behind it.
    pub n: usize,
}

/// The mean of `values` (one per episode, non-finite ones dropped) with its percentile
/// bootstrap interval at `level` over `resamples` resamples of the episodes, seeded. One
/// episode gives its value with no width (`lower == upper`): the caller says so. Errors on
/// no finite value or a level outside (0, 1).
pub fn episode_interval(
    values: &[f64],
    level: f64,
    resamples: usize,
    seed: u64,
) -> Result<EpisodeInterval, StatsError> {
    if !(level > 0.0 && level < 1.0) {
        return Err(invalid("level", level, "in (0, 1)"));
    }
    let mut xs: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if xs.is_empty() {
        return Err(invalid("values", values.len(), "at least one finite value"));
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    let estimate = xs.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return Ok(EpisodeInterval {
            estimate,
            lower: estimate,
            upper: estimate,
            n,
        });
    }
    let mut r = rng::seeded(seed);
    let mut means: Vec<f64> = (0..resamples.max(1))
        .map(|_| (0..n).map(|_| xs[rng::index(&mut r, n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    let alpha = 1.0 - level;
    Ok(EpisodeInterval {
        estimate,
        lower: quantile(&means, alpha / 2.0),
        upper: quantile(&means, 1.0 - alpha / 2.0),
        n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    /// 30 one-second windows at the target with p99 2 ms, the aggressor from 10 s to 20 s
    /// taking the rate to `hit` of the target and p99 to `p99_hit`, back `lag` s after the
    /// stop.
    fn episode(hit: f64, p99_hit: f64, lag: u64) -> Vec<ServiceWindow> {
        (0..30)
            .map(|i| {
                let bad = (10..20 + lag).contains(&i);
                ServiceWindow {
                    start_ns: i * S,
                    end_ns: (i + 1) * S,
                    rate: if bad { 1000.0 * hit } else { 1000.0 },
                    p99_ms: Some(if bad { p99_hit } else { 2.0 }),
                }
            })
            .collect()
    }

    fn spec() -> EpisodeSpec {
        EpisodeSpec {
            target_rps: 1000.0,
            slo_ms: 10.0,
            settled_ns: 2 * S,
            start_ns: 10 * S,
            stop_ns: Some(20 * S),
            sustain: 3,
            recovered_isol_pct: 90.0,
        }
    }

    #[test]
    fn an_untouched_service_keeps_everything() {
        let f = episode_figures(&episode(1.0, 2.0, 0), &spec()).unwrap();
        assert_eq!(f.isol.mean, 100.0);
        assert_eq!(f.isol.p01, 100.0);
        assert_eq!(f.lat_imp_pct, Some(0.0));
        assert_eq!(f.slo_violation_pct, 0.0);
        assert_eq!(f.slo_area_ms_s, 0.0);
        assert_eq!(f.recovery_s, Some(0.0));
        assert_eq!(f.during_windows, 10);
        assert_eq!(f.baseline_p99_ms, Some(2.0));
    }

    #[test]
    fn a_hurt_service_shows_its_loss_its_slo_seconds_and_its_recovery() {
        let f = episode_figures(&episode(0.5, 30.0, 4), &spec()).unwrap();
        assert_eq!(f.isol.mean, 50.0);
        assert_eq!(f.isol.p50, 50.0);
        // p99 from 2 to 30 ms: +1400%.
        assert!((f.lat_imp_pct.unwrap() - 1400.0).abs() < 1e-9);
        // From 10 s to the end (20 windows), 14 over the SLO, each 20 ms above for 1 s.
        assert!((f.slo_violation_pct - 70.0).abs() < 1e-9);
        assert!((f.slo_area_ms_s - 280.0).abs() < 1e-9);
        // Bad until 24 s; the first of three good windows is [24, 25): 5 s after the stop.
        assert_eq!(f.recovery_s, Some(5.0));
    }

    #[test]
    fn a_service_that_never_recovers_has_no_recovery_time() {
        let f = episode_figures(&episode(0.5, 30.0, 100), &spec()).unwrap();
        assert_eq!(f.recovery_s, None);
        let mut s = spec();
        s.stop_ns = None;
        assert_eq!(
            episode_figures(&episode(0.5, 30.0, 0), &s)
                .unwrap()
                .recovery_s,
            None
        );
    }

    #[test]
    fn isolation_quantiles_read_the_worst_seconds() {
        let mut w = episode(1.0, 2.0, 0);
        w[12].rate = 100.0;
        let f = episode_figures(&w, &spec()).unwrap();
        assert!(f.isol.p01 < 20.0, "{:?}", f.isol);
        assert_eq!(f.isol.p50, 100.0);
        assert!((f.isol.mean - 91.0).abs() < 1e-9);
    }

    #[test]
    fn sparse_windows_are_counted() {
        let f = episode_figures(&episode(0.05, 30.0, 0), &spec()).unwrap();
        assert_eq!(f.few_event_windows, 10);
    }

    #[test]
    fn bad_specs_and_empty_phases_are_refused() {
        let mut s = spec();
        s.target_rps = 0.0;
        assert!(episode_figures(&episode(1.0, 2.0, 0), &s).is_err());
        let mut s = spec();
        s.start_ns = 100 * S;
        assert!(episode_figures(&episode(1.0, 2.0, 0), &s).is_err());
    }

    #[test]
    fn the_interval_over_episodes_covers_the_mean_and_narrows_with_agreement() {
        let wide = episode_interval(&[40.0, 60.0, 50.0, 70.0, 30.0], 0.95, 2000, 7).unwrap();
        assert_eq!(wide.estimate, 50.0);
        assert!(wide.lower < 50.0 && wide.upper > 50.0);
        let tight = episode_interval(&[49.0, 51.0, 50.0, 50.5, 49.5], 0.95, 2000, 7).unwrap();
        assert!(tight.upper - tight.lower < wide.upper - wide.lower);
        let one = episode_interval(&[42.0, f64::NAN], 0.95, 2000, 7).unwrap();
        assert_eq!((one.lower, one.upper, one.n), (42.0, 42.0, 1));
        assert!(episode_interval(&[], 0.95, 10, 1).is_err());
        assert_eq!(
            episode_interval(&[1.0, 2.0, 3.0], 0.9, 500, 3).unwrap(),
            episode_interval(&[3.0, 1.0, 2.0], 0.9, 500, 3).unwrap()
        );
    }
}
