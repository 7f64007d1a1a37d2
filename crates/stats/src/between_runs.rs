//! The difference between two runs' degradations of the same cell: did a change of setting,
//! platform or host make a tenant's degradation larger or smaller, beyond what the two
//! intervals allow?
//!
//! Why from the intervals: a stored run keeps each degradation with its interval, not always
//! its units (and never the bootstrap replicates), and the two runs are independent
//! measurements. Each interval was built on the logarithm of a ratio, so its width on that
//! scale gives back the standard error the run used; two independent standard errors add in
//! quadrature. Everything here is pure and takes no seed.

use serde::{Deserialize, Serialize};

use crate::bootstrap::{CiMethod, DegradationCi};
use crate::degradation::Direction;
use crate::multiple::{adjust_p_values, Correction};
use crate::normal::{normal_cdf, normal_quantile, student_t_quantile, student_t_two_sided_p};
use crate::paired::{log_ratio_to_degradation, PairedEstimate};

/// Why two degradations cannot be compared: what is wrong with one run's interval.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Untestable {
    /// The estimate or a bound is infinite or NaN.
    #[error(
        "its interval is not finite ({lower} to {upper}): a resample met a zero baseline, so \
         the interval says nothing about the spread"
    )]
    NotFinite {
        /// Lower bound, percent.
        lower: f64,
        /// Upper bound, percent.
        upper: f64,
    },
    /// A bound reaches a contended/baseline ratio of 0 or below, which has no logarithm.
    #[error(
        "its interval reaches {value:+.1}%, a contended/baseline ratio of 0 or below, which has \
         no logarithm"
    )]
    BeyondLogScale {
        /// The bound (or estimate), percent.
        value: f64,
    },
    /// The confidence level is not strictly between 0 and 1.
    #[error("its confidence level {level} is not between 0 and 1")]
    Level {
        /// The level.
        level: f64,
    },
    /// The degrees of freedom given are not a positive number.
    #[error("its degrees of freedom {df} are not a positive number")]
    DegreesOfFreedom {
        /// The value.
        df: f64,
    },
}

/// One run's degradation on the scale its interval was computed on: the logarithm of the
/// contended/baseline ratio (of geometric means for the time-adjacent designs, of medians or
/// means for the two-sample bootstrap), with the standard error the interval implies.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LogScale {
    /// `ln(contended / baseline)` of the estimate.
    pub log_ratio: f64,
    /// Standard error of `log_ratio`, recovered from the interval's width.
    pub se: f64,
    /// Degrees of freedom of the interval's t quantile; `None` when it was not a t interval
    /// (the normal distribution is then used).
    pub df: Option<f64>,
}

/// The log ratio `ln(contended / baseline)` whose degradation is `d` percent: the inverse of
/// [`log_ratio_to_degradation`], `ln(1 - d/100)` when higher is better and `ln(1 + d/100)`
/// when lower is better. `None` when that ratio is 0 or below, or `d` is not finite.
pub fn degradation_to_log_ratio(d: f64, direction: Direction) -> Option<f64> {
    let x = match direction {
        Direction::Higher => -d / 100.0,
        Direction::Lower => d / 100.0,
    };
    (x.is_finite() && x > -1.0).then(|| x.ln_1p())
}

impl LogScale {
    /// Recovers a run's log ratio and its standard error from its degradation interval.
    ///
    /// The designs' intervals are `m +/- q se` on the mean log ratio `m`, with `q` the
    /// `1 - (1 - level)/2` quantile of Student's t with `df` degrees of freedom, mapped to
    /// percent by [`log_ratio_to_degradation`]. Mapping the bounds back with
    /// [`degradation_to_log_ratio`] gives `se = (l_upper - l_lower) / (2 q)` exactly. A
    /// bootstrap interval (given `df = None`) need not be symmetric on the log scale; its
    /// width is then read as `2 z se`, a normal approximation, and the estimate is its centre.
    pub fn recover(
        ci: &DegradationCi,
        direction: Direction,
        df: Option<f64>,
    ) -> Result<LogScale, Untestable> {
        if !(ci.level.is_finite() && ci.level > 0.0 && ci.level < 1.0) {
            return Err(Untestable::Level { level: ci.level });
        }
        if let Some(df) = df.filter(|d| !(d.is_finite() && *d > 0.0)) {
            return Err(Untestable::DegreesOfFreedom { df });
        }
        if !(ci.estimate.is_finite() && ci.lower.is_finite() && ci.upper.is_finite()) {
            return Err(Untestable::NotFinite {
                lower: ci.lower,
                upper: ci.upper,
            });
        }
        let log = |d: f64| {
            degradation_to_log_ratio(d, direction).ok_or(Untestable::BeyondLogScale { value: d })
        };
        let (m, a, b) = (log(ci.estimate)?, log(ci.lower)?, log(ci.upper)?);
        let q = two_sided_quantile(ci.level, df);
        let se = ((a - b).abs() / (2.0 * q)).max(0.0);
        Ok(LogScale {
            log_ratio: m,
            se,
            df,
        })
    }
}

/// The degrees of freedom of a degradation's interval, when it was a t interval whose units
/// are known: `n - 1` for the paired and on/off t intervals ([`CiMethod::PairedLogT`],
/// [`CiMethod::CycleT`]; `n` units) and for the trial-level interval ([`CiMethod::TrialT`];
/// `n` trials). `None` for the bootstrap intervals and whenever `paired` is missing or is not
/// the estimate behind `ci`.
pub fn interval_df(ci: &DegradationCi, paired: Option<&PairedEstimate>) -> Option<f64> {
    let p = paired?;
    let t_interval = matches!(
        ci.method,
        CiMethod::PairedLogT | CiMethod::CycleT | CiMethod::TrialT
    );
    (t_interval && p.degradation.method == ci.method && p.n >= 2).then(|| (p.n - 1) as f64)
}

/// The difference between two runs' degradations of one cell, `B - A`, with the reference
/// `A` first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DegradationDifference {
    /// `B - A`, percentage points (positive: the cell degrades more in `B`).
    pub estimate: f64,
    /// Lower bound of the interval, percentage points.
    #[serde(with = "crate::float_serde")]
    pub lower: f64,
    /// Upper bound of the interval, percentage points.
    #[serde(with = "crate::float_serde")]
    pub upper: f64,
    /// Two-sided confidence level of the interval (the reference's).
    pub level: f64,
    /// `ln(R_B / R_A)`, the difference of the two log ratios.
    pub log_difference: f64,
    /// Its standard error, `sqrt(se_A^2 + se_B^2)`.
    pub se: f64,
    /// Welch-Satterthwaite degrees of freedom; `None` when the normal distribution was used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub df: Option<f64>,
    /// Two-sided p-value of H0 "the two runs' degradations are equal".
    pub p_value: f64,
    /// `p_value` adjusted for the family of differences ([`correct_differences`]); the raw
    /// value until then.
    pub p_adjusted: f64,
    /// The correction behind `p_adjusted`.
    pub correction: Correction,
    /// True when `p_adjusted < 1 - level`.
    pub significant: bool,
}

impl DegradationDifference {
    /// True when the interval lies entirely on one side of 0.
    pub fn excludes_zero(&self) -> bool {
        self.lower > 0.0 || self.upper < 0.0
    }
}

/// The difference between the degradation `b` of a cell in one run and its degradation `a`
/// in the reference run, two independent estimates, with its interval and p-value.
///
/// Method: each interval is read back on the log scale it was built on
/// ([`LogScale::recover`]; `df_a` and `df_b` from [`interval_df`]), giving log ratios `l_A`,
/// `l_B` with standard errors `s_A`, `s_B`. The difference `D = l_B - l_A = ln(R_B / R_A)`
/// has standard error `s = sqrt(s_A^2 + s_B^2)` (independent runs). When both degrees of
/// freedom are known, `D / s` is referred to Student's t with the Welch-Satterthwaite degrees
/// of freedom `s^4 / (s_A^4 / df_A + s_B^4 / df_B)` (Welch 1947, *The generalization of
/// "Student's" problem when several different population variances are involved*, Biometrika
/// 34; Satterthwaite 1946, *An approximate distribution of estimates of variance components*,
/// Biometrics Bulletin 2); a side with unknown degrees of freedom counts as infinite, and with
/// neither known the normal distribution is used. The interval `D +/- q s` at the reference's
/// level and the two-sided p-value `P(|T| >= |D| / s)` follow.
///
/// In percentage points the estimate is `d_B - d_A`, and the interval is the log interval
/// mapped back as the change it makes to the reference's degradation:
/// `f(l_A + D_lower) - f(l_A)` to `f(l_A + D_upper) - f(l_A)` with `f` =
/// [`log_ratio_to_degradation`] (bounds ordered). So the interval excludes 0 exactly when the
/// test rejects at the interval's level; swapping the runs flips the sign of the estimate and
/// keeps the p-value, while the bounds in points, being relative to the reference, are not
/// exactly mirrored.
///
/// With both standard errors 0 the interval has zero width and the p-value is 1 for equal log
/// ratios, 0 otherwise. `significant` and `p_adjusted` are those of a single test until
/// [`correct_differences`] adjusts the family.
///
/// Errors ([`Untestable`]) when either interval cannot be read on the log scale: infinite,
/// reaching a ratio of 0, or with an invalid level or degrees of freedom.
pub fn degradation_difference(
    a: &DegradationCi,
    df_a: Option<f64>,
    b: &DegradationCi,
    df_b: Option<f64>,
    direction: Direction,
) -> Result<DegradationDifference, Untestable> {
    let la = LogScale::recover(a, direction, df_a)?;
    let lb = LogScale::recover(b, direction, df_b)?;
    Ok(log_difference(&la, &lb, direction, a.level))
}

/// [`degradation_difference`] on log scales already recovered, at `level`.
pub fn log_difference(
    a: &LogScale,
    b: &LogScale,
    direction: Direction,
    level: f64,
) -> DegradationDifference {
    let d = b.log_ratio - a.log_ratio;
    let (va, vb) = (a.se * a.se, b.se * b.se);
    let se = (va + vb).sqrt();
    let df = welch_satterthwaite(va, a.df, vb, b.df);
    let (lo, hi, p_value) = if se > 0.0 {
        let q = two_sided_quantile(level, df);
        (d - q * se, d + q * se, two_sided_p(d / se, df))
    } else {
        (d, d, if d == 0.0 { 1.0 } else { 0.0 })
    };
    let f = |l: f64| log_ratio_to_degradation(l, direction);
    let reference = f(a.log_ratio);
    let (x, y) = (
        f(a.log_ratio + lo) - reference,
        f(a.log_ratio + hi) - reference,
    );
    let estimate = f(b.log_ratio) - reference;
    DegradationDifference {
        estimate,
        lower: x.min(y).min(estimate),
        upper: x.max(y).max(estimate),
        level,
        log_difference: d,
        se,
        df,
        p_value,
        p_adjusted: p_value,
        correction: Correction::None,
        significant: p_value < 1.0 - level,
    }
}

/// Adjusts the p-values of a family of differences for multiple comparisons
/// ([`adjust_p_values`]; Holm controls the chance of any false "changed") and marks each
/// significant when its adjusted p-value is below `1 - level`.
pub fn correct_differences<'a>(
    family: impl IntoIterator<Item = &'a mut DegradationDifference>,
    correction: Correction,
) {
    let mut family: Vec<&mut DegradationDifference> = family.into_iter().collect();
    let raw: Vec<f64> = family.iter().map(|d| d.p_value).collect();
    let adjusted = adjust_p_values(&raw, correction);
    for (d, p) in family.iter_mut().zip(adjusted) {
        d.p_adjusted = p;
        d.correction = correction;
        d.significant = p < 1.0 - d.level;
    }
}

/// Welch-Satterthwaite degrees of freedom of a sum of two variances with `df_a` and `df_b`
/// degrees of freedom (`None`: infinite); `None` when neither is known or nothing varies.
fn welch_satterthwaite(va: f64, df_a: Option<f64>, vb: f64, df_b: Option<f64>) -> Option<f64> {
    if df_a.is_none() && df_b.is_none() {
        return None;
    }
    let term = |v: f64, df: Option<f64>| df.map_or(0.0, |k| v * v / k);
    let den = term(va, df_a) + term(vb, df_b);
    let num = (va + vb) * (va + vb);
    (den > 0.0 && num > 0.0).then(|| num / den)
}

/// The `1 - (1 - level)/2` quantile of Student's t with `df` degrees of freedom, or of the
/// standard normal without.
fn two_sided_quantile(level: f64, df: Option<f64>) -> f64 {
    let p = 1.0 - (1.0 - level) / 2.0;
    match df {
        Some(k) => student_t_quantile(p, k),
        None => normal_quantile(p),
    }
}

/// `P(|T| >= |t|)` for Student's t with `df` degrees of freedom, or the standard normal.
fn two_sided_p(t: f64, df: Option<f64>) -> f64 {
    match df {
        Some(k) => student_t_two_sided_p(t, k),
        None => (2.0 * normal_cdf(-t.abs())).clamp(0.0, 1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::degradation::Estimator;
    use crate::paired::{paired_degradation, Pair, PairedConfig, PairedMethod};

    fn ci(estimate: f64, lower: f64, upper: f64) -> DegradationCi {
        DegradationCi {
            estimate,
            lower,
            upper,
            level: 0.95,
            estimator: Estimator::Mean,
            method: CiMethod::PairedLogT,
            resamples: 0,
            seed: 0,
        }
    }

    fn log_t(units: &[(f64, f64)], direction: Direction) -> PairedEstimate {
        let u: Vec<Pair> = units.iter().map(|&(b, c)| Pair::new(b, c)).collect();
        let cfg = PairedConfig {
            method: PairedMethod::LogT,
            ..Default::default()
        };
        paired_degradation(&u, direction, &cfg).unwrap()
    }

    #[test]
    fn recovers_the_standard_error_of_a_paired_t_interval_exactly() {
        let units = [
            (1.0, 0.80),
            (1.0, 0.85),
            (1.0, 0.78),
            (1.0, 0.83),
            (1.0, 0.9),
        ];
        for direction in [Direction::Higher, Direction::Lower] {
            let e = log_t(&units, direction);
            let df = interval_df(&e.degradation, Some(&e));
            assert_eq!(df, Some(4.0));
            let l = LogScale::recover(&e.degradation, direction, df).unwrap();
            assert!((l.log_ratio - e.log_ratio_mean).abs() < 1e-12, "{l:?}");
            let se = e.log_ratio_sd / 5f64.sqrt();
            assert!((l.se - se).abs() < 1e-12, "{l:?} vs {se}");
        }
    }

    #[test]
    fn matches_a_hand_computed_welch_difference() {
        // Run A: log ratios ln 0.8 +/- ... from 5 units; run B: 9 units, a larger effect.
        let a = log_t(
            &[
                (1.0, 0.80),
                (1.0, 0.85),
                (1.0, 0.78),
                (1.0, 0.83),
                (1.0, 0.9),
            ],
            Direction::Higher,
        );
        let b_units: Vec<(f64, f64)> = (0..9)
            .map(|i| (1.0, 0.7 + 0.01 * f64::from(i % 4)))
            .collect();
        let b = log_t(&b_units, Direction::Higher);
        let d = degradation_difference(
            &a.degradation,
            interval_df(&a.degradation, Some(&a)),
            &b.degradation,
            interval_df(&b.degradation, Some(&b)),
            Direction::Higher,
        )
        .unwrap();
        let (va, vb) = (a.log_ratio_sd.powi(2) / 5.0, b.log_ratio_sd.powi(2) / 9.0);
        let df = (va + vb).powi(2) / (va * va / 4.0 + vb * vb / 8.0);
        let diff = b.log_ratio_mean - a.log_ratio_mean;
        let se = (va + vb).sqrt();
        assert!((d.df.unwrap() - df).abs() < 1e-9, "{d:?}");
        assert!((d.se - se).abs() < 1e-12);
        assert!((d.log_difference - diff).abs() < 1e-12);
        let p = student_t_two_sided_p(diff / se, df);
        assert!((d.p_value - p).abs() < 1e-12);
        let want = b.degradation.estimate - a.degradation.estimate;
        assert!((d.estimate - want).abs() < 1e-9, "{} vs {want}", d.estimate);
        // Higher is better: f(l) = (1 - e^l) 100 decreases, so the upper bound in points
        // comes from the lower log bound.
        let t = student_t_quantile(0.975, df);
        let f = |l: f64| -l.exp_m1() * 100.0;
        let upper = f(a.log_ratio_mean + diff - t * se) - f(a.log_ratio_mean);
        let lower = f(a.log_ratio_mean + diff + t * se) - f(a.log_ratio_mean);
        assert!((d.upper - upper).abs() < 1e-9 && (d.lower - lower).abs() < 1e-9);
        assert!(
            d.estimate > 0.0 && d.significant && d.excludes_zero(),
            "{d:?}"
        );
    }

    #[test]
    fn identical_estimates_differ_by_nothing() {
        let c = ci(12.0, 10.0, 14.0);
        let d = degradation_difference(&c, Some(9.0), &c, Some(9.0), Direction::Lower).unwrap();
        assert_eq!(d.estimate, 0.0);
        assert_eq!(d.log_difference, 0.0);
        assert_eq!(d.p_value, 1.0);
        assert!(!d.significant && !d.excludes_zero());
        assert!(d.lower < 0.0 && d.upper > 0.0);
        // Two intervals of zero width: equal means not different, unequal means different.
        let z = ci(5.0, 5.0, 5.0);
        let same = degradation_difference(&z, None, &z, None, Direction::Lower).unwrap();
        assert_eq!((same.p_value, same.lower, same.upper), (1.0, 0.0, 0.0));
        let other = ci(6.0, 6.0, 6.0);
        let d = degradation_difference(&z, None, &other, None, Direction::Lower).unwrap();
        assert_eq!(d.p_value, 0.0);
        assert!((d.estimate - 1.0).abs() < 1e-9);
    }

    #[test]
    fn without_degrees_of_freedom_the_normal_is_used() {
        // A symmetric log interval with z: se is exactly 0.1 on each side.
        let z = normal_quantile(0.975);
        let make = |l: f64| {
            let f = |x: f64| x.exp_m1() * 100.0;
            DegradationCi {
                method: CiMethod::Percentile,
                estimator: Estimator::Median,
                ..ci(f(l), f(l - z * 0.1), f(l + z * 0.1))
            }
        };
        let (a, b) = (make(0.1), make(0.5));
        let d = degradation_difference(&a, None, &b, None, Direction::Lower).unwrap();
        assert_eq!(d.df, None);
        assert!((d.se - 0.1 * 2f64.sqrt()).abs() < 1e-12, "{d:?}");
        let want = 2.0 * normal_cdf(-0.4 / d.se);
        assert!((d.p_value - want).abs() < 1e-12, "{d:?}");
        // One side with known degrees of freedom: Welch-Satterthwaite with the other infinite.
        let d = degradation_difference(&a, Some(4.0), &b, None, Direction::Lower).unwrap();
        let va = LogScale::recover(&a, Direction::Lower, Some(4.0))
            .unwrap()
            .se
            .powi(2);
        let vb = 0.1f64.powi(2);
        let want = (va + vb).powi(2) / (va * va / 4.0);
        assert!((d.df.unwrap() - want).abs() < 1e-9, "{d:?}");
    }

    #[test]
    fn intervals_that_have_no_log_say_why() {
        let bad = ci(10.0, f64::NEG_INFINITY, 20.0);
        let good = ci(10.0, 5.0, 15.0);
        let e = degradation_difference(&good, None, &bad, None, Direction::Lower).unwrap_err();
        assert!(matches!(e, Untestable::NotFinite { .. }), "{e}");
        assert!(e.to_string().contains("zero baseline"), "{e}");
        // Higher is better: a loss of 100% or more is a ratio of 0 or below.
        let all = ci(90.0, 60.0, 100.0);
        let e = degradation_difference(&good, None, &all, None, Direction::Higher).unwrap_err();
        assert_eq!(e, Untestable::BeyondLogScale { value: 100.0 });
        assert!(e.to_string().contains("+100.0%"), "{e}");
        // Lower is better: an improvement of 100% or more.
        let e = degradation_difference(
            &ci(-100.0, -100.0, -90.0),
            None,
            &good,
            None,
            Direction::Lower,
        )
        .unwrap_err();
        assert!(matches!(e, Untestable::BeyondLogScale { .. }), "{e}");
        let e =
            degradation_difference(&good, Some(0.0), &good, None, Direction::Lower).unwrap_err();
        assert!(matches!(e, Untestable::DegreesOfFreedom { .. }), "{e}");
        let odd = DegradationCi {
            level: 1.0,
            ..good.clone()
        };
        assert!(matches!(
            degradation_difference(&odd, None, &good, None, Direction::Lower),
            Err(Untestable::Level { .. })
        ));
    }

    #[test]
    fn df_only_for_t_intervals_with_their_units() {
        let e = log_t(&[(1.0, 1.1), (1.0, 1.2), (1.0, 1.15)], Direction::Lower);
        assert_eq!(interval_df(&e.degradation, Some(&e)), Some(2.0));
        assert_eq!(interval_df(&e.degradation, None), None);
        let boot = DegradationCi {
            method: CiMethod::Percentile,
            ..e.degradation.clone()
        };
        assert_eq!(interval_df(&boot, Some(&e)), None);
    }

    #[test]
    fn holm_across_the_family_decides_significance() {
        let mk = |p: f64| DegradationDifference {
            estimate: 1.0,
            lower: 0.5,
            upper: 1.5,
            level: 0.95,
            log_difference: 0.01,
            se: 0.005,
            df: None,
            p_value: p,
            p_adjusted: p,
            correction: Correction::None,
            significant: p < 0.05,
        };
        let mut family = [mk(0.01), mk(0.04), mk(0.03), mk(0.005)];
        assert!(family.iter().all(|d| d.significant));
        correct_differences(family.iter_mut(), Correction::Holm);
        let adj: Vec<f64> = family.iter().map(|d| d.p_adjusted).collect();
        let want = [0.03, 0.06, 0.06, 0.02];
        assert!(
            adj.iter().zip(want).all(|(a, w)| (a - w).abs() < 1e-12),
            "{adj:?}"
        );
        let sig: Vec<bool> = family.iter().map(|d| d.significant).collect();
        assert_eq!(sig, [true, false, false, true]);
        assert!(family.iter().all(|d| d.correction == Correction::Holm));
    }

    #[test]
    fn serializes_and_reads_back() {
        let c = ci(12.0, 10.0, 14.0);
        let d =
            degradation_difference(&c, Some(9.0), &ci(20.0, 18.0, 22.0), None, Direction::Lower)
                .unwrap();
        let json = serde_json::to_string(&d).unwrap();
        assert!(json.contains("\"correction\":\"none\""), "{json}");
        assert_eq!(
            serde_json::from_str::<DegradationDifference>(&json).unwrap(),
            d
        );
    }
}
