//! The on/off design, as pure functions: which windows of a probe's series fall in which
//! phase of the aggressors' modulation, the cycles compared, and the pilot that sizes windows,
//! periods and trials from the measured noise.
//!
//! Why: this machine's speed drifts from moment to moment (other guests on the host), so a
//! comparison of trials seconds apart measures the host. Freezing and thawing the aggressor
//! tenant with a fixed period while the victim's probe measures in short windows compares
//! contended and uncontended windows a fraction of a second apart, so slow drift cancels
//! (the phasing of Bubble-Flux, Yang et al., ISCA 2013; the side-by-side idea of duet
//! benchmarking, Bulej et al., ICPE 2020).
//!
//! A *phase* is a stretch with the aggressors either running or frozen; a *switch* takes some
//! time (the freezer waits for every task), and its effect takes a little longer to settle
//! (caches refill, queues drain), so windows overlapping a switch or the guard time after it
//! are dropped. A *cycle* compares one on-phase with the mean of the off-phases on either side
//! of it, so a linear drift across the three cancels.

use std::time::Duration;

use isobench_common::median;
use isobench_stats::Pair;
use isobench_store::{Modulation, WindowRecord};
use serde::{Deserialize, Serialize};

/// One phase of a modulated trial.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Phase {
    /// First instant in the phase (the previous switch done), ns.
    pub start_ns: u64,
    /// Last instant (the next switch requested), ns.
    pub end_ns: u64,
    /// Aggressors running.
    pub on: bool,
}

/// The phases of a modulated trial, in time order.
pub fn phases(m: &Modulation) -> Vec<Phase> {
    let mut out = Vec::with_capacity(m.switches.len() + 1);
    let mut start = m.start_ns;
    let mut on = m.initially_on;
    for s in &m.switches {
        if s.requested_ns > start {
            out.push(Phase {
                start_ns: start,
                end_ns: s.requested_ns,
                on,
            });
        }
        start = s.done_ns;
        on = s.on;
    }
    if m.end_ns > start {
        out.push(Phase {
            start_ns: start,
            end_ns: m.end_ns,
            on,
        });
    }
    out
}

/// Mean value of the windows lying wholly inside each phase after its guard time; `None` for
/// a phase with no such window. Windows straddling a switch are dropped.
pub fn phase_means(windows: &[WindowRecord], m: &Modulation) -> Vec<(Phase, Option<f64>)> {
    phases(m)
        .into_iter()
        .map(|p| {
            let from = p.start_ns + m.guard_ns;
            let vals: Vec<f64> = windows
                .iter()
                .filter(|w| w.start_ns >= from && w.end_ns <= p.end_ns && w.value.is_finite())
                .map(|w| w.value)
                .collect();
            let mean = (!vals.is_empty()).then(|| vals.iter().sum::<f64>() / vals.len() as f64);
            (p, mean)
        })
        .collect()
}

/// The cycles of a modulated trial: each on-phase with a value, against the mean of the
/// off-phases next to it that have values (both when both do, so a linear drift cancels).
/// Values must be positive to enter a ratio; others are skipped.
pub fn cycles(windows: &[WindowRecord], m: &Modulation) -> Vec<Pair> {
    let ph = phase_means(windows, m);
    let mut out = Vec::new();
    for i in 0..ph.len() {
        let (p, Some(on)) = ph[i] else { continue };
        if !p.on || on <= 0.0 {
            continue;
        }
        let off = |j: Option<usize>| {
            j.and_then(|j| ph.get(j))
                .filter(|(q, _)| !q.on)
                .and_then(|(_, v)| *v)
                .filter(|v| *v > 0.0)
        };
        let before = off(i.checked_sub(1));
        let after = off(Some(i + 1));
        let baseline = match (before, after) {
            (Some(a), Some(b)) => (a + b) / 2.0,
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => continue,
        };
        out.push(Pair {
            baseline,
            contended: on,
        });
    }
    out
}

/// Time the aggressors were frozen during a modulated trial: the off-phases, switches counted
/// as half. An aggressor's own rate counts only the rest (its time to work) of the interval
/// between two readings of its progress that enclose the trial.
pub fn frozen_time(m: &Modulation) -> Duration {
    let off: u64 = phases(m)
        .iter()
        .filter(|p| !p.on)
        .map(|p| p.end_ns - p.start_ns)
        .sum();
    let switching: u64 = m
        .switches
        .iter()
        .map(|s| s.done_ns.saturating_sub(s.requested_ns))
        .sum();
    Duration::from_nanos(off + switching / 2)
}

/// Window, period and trial length of the on/off design for one probe, with the reasons.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tuning {
    /// Probe id.
    pub probe: String,
    /// Window length.
    #[serde(with = "crate::scenario::secs")]
    pub window: Duration,
    /// Full on+off cycle.
    #[serde(with = "crate::scenario::secs")]
    pub period: Duration,
    /// Windows after each switch that are dropped, as time.
    #[serde(with = "crate::scenario::secs")]
    pub guard: Duration,
    /// Length of one modulated trial (a whole number of cycles).
    #[serde(with = "crate::scenario::secs")]
    pub trial: Duration,
    /// Coefficient of variation of the pilot's windows at the chosen length.
    pub window_cv: Option<f64>,
    /// Lag-1 autocorrelation of the pilot's windows (how long the noise stays correlated).
    pub lag1: Option<f64>,
    /// Standard deviation of a cycle's log ratio in the pilot (an A/A comparison).
    pub cycle_sd: Option<f64>,
    /// Cycles the target needs at that noise.
    pub cycles_needed: Option<u32>,
    /// How the choice was made, for the plan.
    pub why: String,
}

/// How much wider a cycle's spread is assumed to be under contention than in the idle pilot.
pub const CONTENTION_SPREAD: f64 = 2.0;

/// Limits of the pilot's choice.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TuningLimits {
    /// Target half-width, points.
    pub target: f64,
    /// Two-sided normal quantile of the confidence level (1.96 at 95%).
    pub z: f64,
    /// Shortest phase (half period): a switch takes about a millisecond and effects need a
    /// few to settle.
    pub min_phase: Duration,
    /// Longest phase.
    pub max_phase: Duration,
    /// Shortest and longest trial.
    pub min_trial: Duration,
    /// Longest trial.
    pub max_trial: Duration,
    /// Guard time after a switch (at least one window is dropped anyway).
    pub min_guard: Duration,
}

impl Default for TuningLimits {
    fn default() -> Self {
        TuningLimits {
            target: 2.0,
            z: 1.96,
            min_phase: Duration::from_millis(40),
            max_phase: Duration::from_millis(400),
            min_trial: Duration::from_secs(1),
            max_trial: Duration::from_secs(6),
            min_guard: Duration::from_millis(5),
        }
    }
}

/// Chooses window, period and trial length for a probe from an idle pilot series of short
/// windows: for each candidate window (1, 2, 4 or 8 pilot windows) and phase length (3 to 16
/// windows), the pilot itself is cut into pseudo on/off cycles (every starting offset, the
/// first two windows of each phase dropped: the guard, and the window a trial's unaligned
/// windows may lose after it) and the standard deviation of their log
/// ratios measured: an A/A run of the design on real noise, drift included. The cycles needed
/// for the target follow from it (`n = (z sd / target)^2`); the choice is the least wall time.
/// Falls back to `fallback` when the pilot is too short to say.
pub fn tune(
    probe: &str,
    pilot: &[WindowRecord],
    limits: &TuningLimits,
    fallback: (Duration, Duration),
) -> Tuning {
    let fixed = |why: String| Tuning {
        probe: probe.to_string(),
        window: fallback.0,
        period: fallback.1,
        guard: fallback.0.max(limits.min_guard),
        trial: limits.max_trial.min(limits.min_trial * 3),
        window_cv: None,
        lag1: None,
        cycle_sd: None,
        cycles_needed: None,
        why,
    };
    let vals: Vec<f64> = pilot
        .iter()
        .map(|w| w.value)
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    if vals.len() < 24 {
        return fixed(format!(
            "pilot gave {} windows, too few to size from; defaults used",
            vals.len()
        ));
    }
    let w0 = median_width(pilot);
    let target = limits.target / 100.0;
    let mut best: Option<(f64, Tuning)> = None;
    for k in [1usize, 2, 4, 8] {
        let agg: Vec<f64> = vals
            .chunks_exact(k)
            .map(|c| c.iter().sum::<f64>() / k as f64)
            .collect();
        let window = w0 * k as u32;
        for m in [3usize, 4, 6, 8, 12, 16] {
            let phase = window * m as u32;
            if phase < limits.min_phase || phase > limits.max_phase {
                continue;
            }
            let Some((sd, count)) = aa_cycle_sd(&agg, m) else {
                continue;
            };
            if count < 6 {
                continue;
            }
            let period = phase * 2;
            // The pilot sees only the idle machine; a running neighbour adds its own
            // variation (measured here: cycle spreads 1.5-3x the idle ones), so size for
            // twice the idle spread.
            let n = ((limits.z * CONTENTION_SPREAD * sd / target).powi(2))
                .ceil()
                .max(4.0);
            let secs = n * period.as_secs_f64();
            let trial = Duration::from_secs_f64(secs).clamp(limits.min_trial, limits.max_trial);
            let cycles = (trial.as_secs_f64() / period.as_secs_f64())
                .round()
                .max(1.0);
            let trial = period.mul_f64(cycles);
            let t = Tuning {
                probe: probe.to_string(),
                window,
                period,
                guard: window.max(limits.min_guard),
                trial,
                window_cv: cv(&agg),
                lag1: isobench_stats::lag1_autocorrelation(&agg),
                cycle_sd: Some(sd),
                cycles_needed: Some(n as u32),
                why: format!(
                    "pilot: {} windows of {} ms, CV {:.1}%, lag-1 autocorrelation {:.2}; an \
                     A/A split into {} ms phases gives cycles of sd {:.3}, so {} cycles reach \
                     +/-{} points",
                    agg.len(),
                    window.as_millis(),
                    cv(&agg).unwrap_or(f64::NAN) * 100.0,
                    isobench_stats::lag1_autocorrelation(&agg).unwrap_or(f64::NAN),
                    phase.as_millis(),
                    sd,
                    n as u32,
                    limits.target
                ),
            };
            if best.as_ref().is_none_or(|(s, _)| secs < *s) {
                best = Some((secs, t));
            }
        }
    }
    best.map(|(_, t)| t).unwrap_or_else(|| {
        fixed("the pilot was too short for any candidate period; defaults used".into())
    })
}

/// The median length of the pilot's windows.
fn median_width(ws: &[WindowRecord]) -> Duration {
    let w: Vec<f64> = ws
        .iter()
        .map(|w| w.end_ns.saturating_sub(w.start_ns) as f64)
        .collect();
    Duration::from_nanos((median(&w) as u64).max(1))
}

/// Standard deviation of pseudo-cycle log ratios of an idle series cut into phases of `m`
/// windows (the first two windows of each phase dropped), over every starting offset; with the number
/// of cycles per offset.
fn aa_cycle_sd(xs: &[f64], m: usize) -> Option<(f64, usize)> {
    if m < 3 {
        return None;
    }
    let mut ratios = Vec::new();
    let mut per_offset = 0;
    for offset in 0..2 * m {
        let phase_mean = |i: usize| -> Option<f64> {
            // A real trial's windows are not aligned with its switches: after the guard (one
            // window) the next whole window may start up to a window later, so a phase of m
            // windows is sure to hold m - 2 of them (a phase of 2 may hold none).
            let a = offset + i * m + 2;
            let b = offset + (i + 1) * m;
            (b <= xs.len()).then(|| xs[a..b].iter().sum::<f64>() / (b - a) as f64)
        };
        let mut count = 0;
        // Phases alternate off, on, off, ...: cycle j is on-phase 2j+1 between 2j and 2j+2.
        let mut j = 0;
        while let (Some(a), Some(on), Some(b)) = (
            phase_mean(2 * j),
            phase_mean(2 * j + 1),
            phase_mean(2 * j + 2),
        ) {
            ratios.push((on / ((a + b) / 2.0)).ln());
            count += 1;
            j += 1;
        }
        if offset == 0 {
            per_offset = count;
        }
    }
    if ratios.len() < 3 {
        return None;
    }
    let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
    let var = ratios.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (ratios.len() - 1) as f64;
    Some((var.sqrt(), per_offset))
}

/// Coefficient of variation of positive values; `None` below two values.
fn cv(xs: &[f64]) -> Option<f64> {
    isobench_stats::Sample::from_slice(xs)
        .ok()
        .filter(|s| s.len() >= 2)
        .and_then(|s| s.cv())
}

#[cfg(test)]
mod tests {
    use isobench_store::Switch;

    use super::*;

    /// Windows of 10 ms from 0 to `n` windows; value from `f(start_ms)`.
    fn series(n: u64, mut f: impl FnMut(u64) -> f64) -> Vec<WindowRecord> {
        (0..n)
            .map(|i| WindowRecord {
                start_ns: i * 10_000_000,
                end_ns: (i + 1) * 10_000_000,
                value: f(i * 10),
            })
            .collect()
    }

    /// 100 ms phases starting on, switches taking 1 ms, guard 5 ms.
    fn modulation(n_switches: u64) -> Modulation {
        Modulation {
            period_ns: 200_000_000,
            guard_ns: 5_000_000,
            initially_on: true,
            start_ns: 0,
            end_ns: (n_switches + 1) * 100_000_000,
            switches: (1..=n_switches)
                .map(|k| Switch {
                    requested_ns: k * 100_000_000,
                    done_ns: k * 100_000_000 + 1_000_000,
                    on: k % 2 == 0,
                })
                .collect(),
        }
    }

    #[test]
    fn phases_follow_the_switches() {
        let p = phases(&modulation(2));
        assert_eq!(p.len(), 3);
        assert!(p[0].on && !p[1].on && p[2].on);
        assert_eq!(p[1].start_ns, 101_000_000);
        assert_eq!(p[1].end_ns, 200_000_000);
    }

    #[test]
    fn transition_windows_are_dropped() {
        // The window straddling each switch (and the first one after it: the guard) carries a
        // wild value; none of them may reach a phase mean.
        let m = modulation(4);
        let ws = series(50, |ms| {
            let in_phase = ms % 100;
            if in_phase == 0 {
                1e9
            } else if (ms / 100) % 2 == 0 {
                50.0
            } else {
                100.0
            }
        });
        for (p, mean) in phase_means(&ws, &m) {
            let want = if p.on { 50.0 } else { 100.0 };
            // The first phase starts at 0 with no switch: its first window (value 1e9) has no
            // guard to drop it, so leave that phase out.
            if p.start_ns == 0 {
                continue;
            }
            assert_eq!(mean, Some(want), "{p:?}");
        }
    }

    #[test]
    fn cycles_compare_each_on_phase_with_its_neighbours() {
        // Linear drift: off-phases around an on-phase average to the drift at its middle.
        let m = modulation(4);
        let ws = series(50, |ms| {
            let drift = 100.0 + ms as f64 * 0.1;
            if (ms / 100) % 2 == 0 {
                drift * 0.5
            } else {
                drift
            }
        });
        let cs = cycles(&ws, &m);
        // On-phases 0, 2, 4; the first has only an off-phase after it, the last only one
        // before it; the middle one has both, so the drift cancels exactly there.
        assert_eq!(cs.len(), 3);
        let r = cs[1].contended / cs[1].baseline;
        assert!((r - 0.5).abs() < 1e-9, "{:?}", cs[1]);
        for c in [cs[0], cs[2]] {
            let r = c.contended / c.baseline;
            assert!((r - 0.5).abs() < 0.1, "{c:?}");
        }
        // Frozen: 2 of the 5 phases, and half of the switching.
        let total = Duration::from_nanos(m.end_ns - m.start_ns);
        let share = frozen_time(&m).as_secs_f64() / total.as_secs_f64();
        assert!((share - 0.4).abs() < 0.01, "{share}");
    }

    #[test]
    fn pilot_sizes_from_noise_and_prefers_less_time() {
        // Quiet series: few cycles needed, so a short trial.
        let quiet = series(150, |ms| 100.0 + ((ms / 10) % 3) as f64 * 0.1);
        let t = tune("p", &quiet, &TuningLimits::default(), (ms(20), ms(200)));
        assert!(t.cycle_sd.is_some(), "{t:?}");
        assert!(t.trial <= Duration::from_secs(2), "{t:?}");
        assert!(t.period >= ms(80), "{t:?}");
        // Noisy series needs more.
        let mut x: u64 = 7;
        let noisy = series(150, |_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            100.0 * (1.0 + ((x >> 33) as f64 / (1u64 << 31) as f64 - 0.5) * 0.6)
        });
        let n = tune("p", &noisy, &TuningLimits::default(), (ms(20), ms(200)));
        assert!(n.cycles_needed > t.cycles_needed, "{n:?} vs {t:?}");
        // Too short a pilot falls back.
        let f = tune(
            "p",
            &quiet[..10],
            &TuningLimits::default(),
            (ms(20), ms(200)),
        );
        assert_eq!((f.window, f.period), (ms(20), ms(200)));
        assert!(f.why.contains("too few"), "{}", f.why);
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }
}
