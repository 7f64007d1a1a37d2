//! Transitions of a windowed time series at known switch times: how long after a neighbour
//! starts the victim's metric takes to degrade, how long after it stops the metric takes to
//! recover, and how much worse one phase is than the phase before it.
//!
//! Why: a timeline (paper 003, set 2: CPU hogs starting and stopping every 50 s beside a
//! pinged tenant) answers *when* isolation breaks, not only by how much. A scheduler that
//! reacts within one timeslice and one that takes seconds give the same phase means; only
//! the time to leave and to return to the normal band tells them apart.
//!
//! The method, for one episode (a stressor started at `start` and stopped at `stop`):
//! 1. **Band.** From the windows lying wholly inside a reference stretch before `start` (the
//!    preceding off-phase), the band is `median +/- max(k * 1.4826 * MAD, r * |median|)`
//!    ([`Band::robust`]): the median absolute deviation scaled to a normal standard
//!    deviation (Hampel 1974; Rousseeuw & Croux 1993, JASA 88), so one wild window does not
//!    widen the band, with a floor of a share `r` of the level so a very quiet series does
//!    not flag a shift too small to matter.
//! 2. **Time to degrade** ([`time_to_leave`]): the first run of `m` consecutive windows after
//!    `start` whose values all lie outside the band, on the same side; the time is the end of
//!    the run's first window minus `start` (when the departure could first be seen, accurate
//!    to one window). A run must begin before `stop`; shorter excursions (one slow window) do
//!    not count.
//! 3. **Time to recover** ([`time_to_return`]): after a departure, the first run of `m`
//!    consecutive windows after `stop` whose values all lie inside the band, measured the
//!    same way from `stop`, searched until the next switch (or the end of the series).
//!    Recovery is only asked of an episode that degraded.
//!
//! Windows whose value is not finite break a run. Times are `CLOCK_MONOTONIC` nanoseconds,
//! as probes stamp their windows.
//!
//! The degradation of a phase against the phase before it ([`phase_degradation`]) uses
//! non-overlapping batch means (Schmeiser 1982, *Batch size effects in the analysis of
//! simulation output*, Operations Research 30): consecutive windows are correlated (the
//! machine's speed drifts), so each side's windows are grouped into batches long enough for
//! the batch means to be nearly independent (the batch length of [`crate::auto_block_length`]
//! from the larger lag-1 autocorrelation of the two sides), and the ratio of the sides'
//! geometric means of batch means gets Welch's t interval on the logarithms
//! ([`crate::welch_log_degradation`]).

use serde::{Deserialize, Serialize};

use crate::bootstrap::DegradationCi;
use crate::degradation::Direction;
use crate::error::{invalid, StatsError};
use crate::paired::{auto_block_length, lag1_autocorrelation};
use crate::sample::Sample;
use crate::welch::welch_log_degradation;

/// Scale of the median absolute deviation to a normal standard deviation.
const MAD_TO_SD: f64 = 1.4826;

/// One window of a series: its span and the metric's value over it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TimedValue {
    /// Start, ns.
    pub start_ns: u64,
    /// End, ns.
    pub end_ns: u64,
    /// Value in the metric's unit.
    pub value: f64,
}

/// The rule that decides when a series has left its band and when it is back.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TransitionConfig {
    /// Half-width of the band in robust standard deviations (`k`); default 3.
    pub k: f64,
    /// Smallest half-width, as a share of the band's centre (`r`); default 0.05 (5%).
    pub min_rel_width: f64,
    /// Consecutive windows a departure or a return must last (`m`); default 3.
    pub sustain: usize,
}

impl Default for TransitionConfig {
    fn default() -> Self {
        TransitionConfig {
            k: 3.0,
            min_rel_width: 0.05,
            sustain: 3,
        }
    }
}

impl TransitionConfig {
    /// Checks the ranges: `k > 0`, `0 <= r < 1`, `m >= 1`.
    pub fn validate(&self) -> Result<(), StatsError> {
        if !(self.k.is_finite() && self.k > 0.0) {
            return Err(invalid("k", self.k, "a positive number such as 3"));
        }
        if !(self.min_rel_width.is_finite() && (0.0..1.0).contains(&self.min_rel_width)) {
            return Err(invalid(
                "min_rel_width",
                self.min_rel_width,
                "a share in [0, 1) such as 0.05",
            ));
        }
        if self.sustain == 0 {
            return Err(invalid("sustain", 0, "at least 1 window"));
        }
        Ok(())
    }
}

/// The normal range of a series: `center +/- half_width`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Band {
    /// The median of the reference windows.
    pub center: f64,
    /// Half the band's width.
    pub half_width: f64,
    /// Reference windows the band was made from.
    pub windows: usize,
}

/// Which side of the band a value lies on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BandSide {
    /// Below the band.
    Below,
    /// Inside the band.
    Inside,
    /// Above the band.
    Above,
}

impl Band {
    /// The band of `values`: `median +/- max(k * 1.4826 * MAD, min_rel_width * |median|)`
    /// (see the module's method). Errors without values, with a value that is not finite, or
    /// with an invalid `k` or `min_rel_width`.
    pub fn robust(values: &[f64], k: f64, min_rel_width: f64) -> Result<Band, StatsError> {
        TransitionConfig {
            k,
            min_rel_width,
            sustain: 1,
        }
        .validate()?;
        let s = Sample::from_slice(values)?;
        let center = s.median();
        let spread = k * MAD_TO_SD * s.mad();
        Ok(Band {
            center,
            half_width: spread.max(min_rel_width * center.abs()),
            windows: values.len(),
        })
    }

    /// Lower edge.
    pub fn lower(&self) -> f64 {
        self.center - self.half_width
    }

    /// Upper edge.
    pub fn upper(&self) -> f64 {
        self.center + self.half_width
    }

    /// Where `v` lies; `None` when it is not finite.
    pub fn side(&self, v: f64) -> Option<BandSide> {
        if !v.is_finite() {
            None
        } else if v < self.lower() {
            Some(BandSide::Below)
        } else if v > self.upper() {
            Some(BandSide::Above)
        } else {
            Some(BandSide::Inside)
        }
    }
}

/// When a sustained change was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Detected {
    /// Time from the switch to the end of the first window of the sustained run, ns.
    pub after_ns: u64,
    /// Start of the first window of the run, ns.
    pub window_start_ns: u64,
    /// The side the run lies on ([`BandSide::Inside`] for a return).
    pub side: BandSide,
}

/// The first run of `sustain` consecutive windows that each end after `from_ns`, begin
/// before `until_ns`, and satisfy `keep` on the same side; windows are taken in time order.
fn first_run(
    windows: &[TimedValue],
    band: &Band,
    from_ns: u64,
    until_ns: u64,
    sustain: usize,
    keep: impl Fn(BandSide) -> bool,
) -> Option<Detected> {
    let sustain = sustain.max(1);
    let mut run: Option<(usize, BandSide, usize)> = None; // (first index, side, length)
    for (i, w) in windows.iter().enumerate() {
        if w.end_ns <= from_ns {
            continue;
        }
        if w.start_ns >= until_ns {
            break;
        }
        let side = band.side(w.value).filter(|s| keep(*s));
        run = match (run, side) {
            (Some((first, s, n)), Some(side)) if s == side => Some((first, s, n + 1)),
            (_, Some(side)) => Some((i, side, 1)),
            (_, None) => None,
        };
        if let Some((first, side, n)) = run {
            if n >= sustain {
                let w0 = windows[first];
                return Some(Detected {
                    after_ns: w0.end_ns.saturating_sub(from_ns),
                    window_start_ns: w0.start_ns,
                    side,
                });
            }
        }
    }
    None
}

/// Time to leave `band`: the first run of `sustain` consecutive windows after `from_ns`
/// (beginning before `until_ns`) all outside the band on one side (see the module's method).
/// `None` when the series stays inside, or leaves only briefly.
pub fn time_to_leave(
    windows: &[TimedValue],
    band: &Band,
    from_ns: u64,
    until_ns: u64,
    sustain: usize,
) -> Option<Detected> {
    first_run(windows, band, from_ns, until_ns, sustain, |s| {
        s != BandSide::Inside
    })
}

/// Time to return into `band`: the first run of `sustain` consecutive windows after
/// `from_ns` (beginning before `until_ns`) all inside it. `None` when it does not return.
pub fn time_to_return(
    windows: &[TimedValue],
    band: &Band,
    from_ns: u64,
    until_ns: u64,
    sustain: usize,
) -> Option<Detected> {
    first_run(windows, band, from_ns, until_ns, sustain, |s| {
        s == BandSide::Inside
    })
}

/// The times of one episode: a stressor started at `start_ns` and stopped at `stop_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Episode {
    /// The band of the reference stretch before the start.
    pub band: Band,
    /// When the metric left the band after the start (before the stop), if it did.
    pub degrade: Option<Detected>,
    /// When the metric was back in the band after the stop, if it degraded and came back
    /// before `recover_until_ns`.
    pub recover: Option<Detected>,
}

/// Times to degrade and to recover of one episode (see the module's method): the band from
/// the windows wholly inside `reference` (`(from, to)` ns), the departure searched from
/// `start_ns` until `stop_ns`, the return from `stop_ns` until `recover_until_ns`.
///
/// Errors when no window lies wholly inside the reference stretch, or the configuration is
/// invalid.
pub fn episode(
    windows: &[TimedValue],
    reference: (u64, u64),
    start_ns: u64,
    stop_ns: u64,
    recover_until_ns: u64,
    config: &TransitionConfig,
) -> Result<Episode, StatsError> {
    config.validate()?;
    let refs: Vec<f64> = windows
        .iter()
        .filter(|w| w.start_ns >= reference.0 && w.end_ns <= reference.1 && w.value.is_finite())
        .map(|w| w.value)
        .collect();
    if refs.is_empty() {
        return Err(StatsError::TooFewUnits { n: 0, min: 1 });
    }
    let band = Band::robust(&refs, config.k, config.min_rel_width)?;
    let degrade = time_to_leave(windows, &band, start_ns, stop_ns, config.sustain);
    let recover = degrade
        .and_then(|_| time_to_return(windows, &band, stop_ns, recover_until_ns, config.sustain));
    Ok(Episode {
        band,
        degrade,
        recover,
    })
}

/// Degradation of `contended` windows (a phase with a neighbour running) against `baseline`
/// windows (the phase before it), each in time order, with a `level` interval from batch
/// means (see the module's method). Errors when either side has fewer than two batches, a
/// value is not finite or not positive, or the level is invalid.
pub fn phase_degradation(
    baseline: &[f64],
    contended: &[f64],
    direction: Direction,
    level: f64,
) -> Result<DegradationCi, StatsError> {
    let n = baseline.len().min(contended.len());
    let rho = [baseline, contended]
        .iter()
        .filter_map(|xs| lag1_autocorrelation(xs))
        .fold(None, |acc: Option<f64>, r| {
            Some(acc.map_or(r, |a| a.max(r)))
        });
    let b = auto_block_length(n, rho);
    let batches = |xs: &[f64]| -> Vec<f64> {
        xs.chunks_exact(b)
            .map(|c| c.iter().sum::<f64>() / c.len() as f64)
            .collect()
    };
    welch_log_degradation(&batches(baseline), &batches(contended), direction, level)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const MS: u64 = 1_000_000;

    /// Windows of `w` ms from 0 for `n` windows; value from `f(start_ms)`.
    fn series(n: u64, w: u64, f: impl Fn(u64) -> f64) -> Vec<TimedValue> {
        (0..n)
            .map(|i| TimedValue {
                start_ns: i * w * MS,
                end_ns: (i + 1) * w * MS,
                value: f(i * w),
            })
            .collect()
    }

    /// A deterministic wiggle in [-1, 1].
    fn wiggle(i: u64) -> f64 {
        ((i.wrapping_mul(2654435761) % 1000) as f64 / 500.0) - 1.0
    }

    #[test]
    fn band_is_robust_and_has_a_floor() {
        let b = Band::robust(&[100.0, 101.0, 99.0, 100.0, 5000.0], 3.0, 0.0).unwrap();
        assert_eq!(b.center, 100.0);
        // MAD = 1: half-width 3 * 1.4826, the wild value left no mark.
        assert!((b.half_width - 4.4478).abs() < 1e-9, "{b:?}");
        let quiet = Band::robust(&[100.0; 10], 3.0, 0.05).unwrap();
        assert_eq!(quiet.half_width, 5.0);
        assert_eq!(quiet.side(104.0), Some(BandSide::Inside));
        assert_eq!(quiet.side(106.0), Some(BandSide::Above));
        assert_eq!(quiet.side(94.0), Some(BandSide::Below));
        assert_eq!(quiet.side(f64::NAN), None);
        assert!(Band::robust(&[], 3.0, 0.05).is_err());
        assert!(Band::robust(&[1.0], 0.0, 0.05).is_err());
        assert!(Band::robust(&[1.0], 3.0, 1.5).is_err());
    }

    #[test]
    fn a_step_is_seen_after_its_delay_and_a_return_after_the_stop() {
        // 10 ms windows; the neighbour starts at 1000 ms, the metric doubles from 1130 ms;
        // it stops at 2000 ms and the metric is back from 2250 ms.
        let s = series(300, 10, |ms| {
            let base = 100.0 + wiggle(ms);
            if (1130..2250).contains(&ms) {
                2.0 * base
            } else {
                base
            }
        });
        let e = episode(
            &s,
            (0, 1000 * MS),
            1000 * MS,
            2000 * MS,
            3000 * MS,
            &TransitionConfig::default(),
        )
        .unwrap();
        let d = e.degrade.unwrap();
        assert_eq!(d.side, BandSide::Above);
        // First window out is [1130, 1140): seen at its end, 140 ms after the start.
        assert_eq!(d.after_ns, 140 * MS);
        let r = e.recover.unwrap();
        assert_eq!(r.side, BandSide::Inside);
        assert_eq!(r.after_ns, 260 * MS);
    }

    #[test]
    fn a_short_excursion_is_not_a_departure() {
        // Two slow windows (fewer than m = 3) right after the start, then nothing.
        let s = series(200, 10, |ms| {
            if (1000..1020).contains(&ms) {
                500.0
            } else {
                100.0 + wiggle(ms)
            }
        });
        let e = episode(
            &s,
            (0, 1000 * MS),
            1000 * MS,
            1500 * MS,
            2000 * MS,
            &TransitionConfig::default(),
        )
        .unwrap();
        assert_eq!(e.degrade, None);
        assert_eq!(
            e.recover, None,
            "no recovery is asked of an episode that held"
        );
    }

    #[test]
    fn a_departure_must_start_before_the_stop_and_keep_one_side() {
        // Alternating above and below: never three on one side.
        let s = series(200, 10, |ms| {
            if ms >= 1000 {
                if (ms / 10) % 2 == 0 {
                    200.0
                } else {
                    50.0
                }
            } else {
                100.0
            }
        });
        let cfg = TransitionConfig::default();
        let band = Band::robust(&[100.0; 5], cfg.k, cfg.min_rel_width).unwrap();
        assert_eq!(
            time_to_leave(&s, &band, 1000 * MS, 2000 * MS, cfg.sustain),
            None
        );
        // With m = 1 the first window counts.
        let one = time_to_leave(&s, &band, 1000 * MS, 2000 * MS, 1).unwrap();
        assert_eq!((one.after_ns, one.side), (10 * MS, BandSide::Above));
        // A step after the stop belongs to no episode.
        let late = series(200, 10, |ms| if ms >= 1600 { 300.0 } else { 100.0 });
        assert_eq!(
            time_to_leave(&late, &band, 1000 * MS, 1500 * MS, cfg.sustain),
            None
        );
    }

    #[test]
    fn an_empty_reference_is_an_error() {
        let s = series(10, 10, |_| 1.0);
        assert!(episode(
            &s,
            (500 * MS, 600 * MS),
            0,
            1,
            2,
            &TransitionConfig::default()
        )
        .is_err());
        let bad = TransitionConfig {
            sustain: 0,
            ..TransitionConfig::default()
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn phase_degradation_finds_the_shift_with_an_interval() {
        let off: Vec<f64> = (0..100).map(|i| 100.0 + wiggle(i)).collect();
        let on: Vec<f64> = (0..100).map(|i| 150.0 + wiggle(i + 7)).collect();
        // Lower is better: 50% worse.
        let d = phase_degradation(&off, &on, Direction::Lower, 0.95).unwrap();
        assert!((d.estimate - 50.0).abs() < 1.0, "{d:?}");
        assert!(d.lower <= d.estimate && d.estimate <= d.upper, "{d:?}");
        assert!(d.upper - d.lower < 3.0, "{d:?}");
        // The same windows compared with themselves: no degradation, zero inside.
        let same = phase_degradation(&off, &off, Direction::Lower, 0.95).unwrap();
        assert!(same.estimate.abs() < 1e-9 && same.contains(0.0), "{same:?}");
        assert!(phase_degradation(&off[..1], &on, Direction::Lower, 0.95).is_err());
    }

    proptest! {
        /// A step of at least twice the band, `delay` after the switch, on windows of `w`:
        /// seen between `delay` and `delay + 2w` after the switch (the straddling window may
        /// or may not be out); the return after the stop likewise.
        #[test]
        fn step_is_seen_within_one_window_of_its_delay(
            w in 2u64..50,
            delay in 0u64..2000,
            back in 0u64..2000,
            factor in 1.3f64..5.0,
        ) {
            let start = 3000u64;
            let stop = start + 2500;
            let end = stop + 2500;
            let n = end / w + 1;
            let hi_from = start + delay;
            let hi_to = stop + back;
            let s: Vec<TimedValue> = (0..n)
                .map(|i| {
                    let (a, b) = (i * w, (i + 1) * w);
                    // The window's mean over a step inside it.
                    let overlap = b.min(hi_to).saturating_sub(a.max(hi_from)) as f64;
                    let share = overlap / w as f64;
                    TimedValue {
                        start_ns: a * MS,
                        end_ns: b * MS,
                        value: 100.0 * (1.0 + (factor - 1.0) * share),
                    }
                })
                .collect();
            let e = episode(
                &s,
                (0, start * MS),
                start * MS,
                stop * MS,
                end * MS,
                &TransitionConfig::default(),
            )
            .unwrap();
            let d = e.degrade.expect("a large step is seen");
            prop_assert!(d.after_ns >= delay * MS, "{d:?}");
            prop_assert!(d.after_ns <= (delay + 2 * w) * MS, "{d:?}");
            let r = e.recover.expect("the return is seen");
            prop_assert!(r.after_ns >= back * MS, "{r:?}");
            prop_assert!(r.after_ns <= (back + 2 * w) * MS, "{r:?}");
        }

        /// Noise inside the band (a constant series with a small wiggle) never departs.
        #[test]
        fn noise_within_the_band_never_departs(amp in 0.0f64..1.0, seed in 0u64..1000) {
            let s = series(400, 10, |ms| 100.0 + amp * wiggle(ms + seed));
            let e = episode(
                &s,
                (0, 2000 * MS),
                2000 * MS,
                3000 * MS,
                4000 * MS,
                &TransitionConfig::default(),
            )
            .unwrap();
            prop_assert_eq!(e.degrade, None);
        }
    }
}
