//! The independent two-sample interval for the same estimate the time-adjacent designs make:
//! the ratio of the geometric means, with a Welch t interval on the logarithms.
//!
//! Why: a design's interval is only "narrower because of the design" when it is held against an
//! interval of the same statistic that ignores which values were measured together. The
//! default independent comparison ([`crate::compare`]) estimates a ratio of medians with a
//! percentile bootstrap, a different statistic; where drift splits the values into clusters
//! its interval can even be narrow while the values spread widely (the bootstrap median
//! sticks to one cluster). This interval differs from [`crate::paired_degradation`]'s only
//! in the pairing.

use crate::bootstrap::{CiMethod, DegradationCi};
use crate::degradation::{Direction, Estimator};
use crate::error::{check_level, StatsError};
use crate::normal::student_t_quantile;
use crate::paired::log_ratio_to_degradation;
use crate::sample::Sample;

/// The degradation of the geometric mean of `contended` against that of `baseline`, two
/// independent samples, with Welch's t interval on the difference of the mean logarithms
/// (Welch 1947, *The generalization of "Student's" problem when several different population
/// variances are involved*, Biometrika 34): `d = mean ln c - mean ln b`, standard error
/// `se = sqrt(s_b^2 / n_b + s_c^2 / n_c)`, degrees of freedom from the Welch-Satterthwaite
/// equation `(v_b + v_c)^2 / (v_b^2 / (n_b - 1) + v_c^2 / (n_c - 1))` with `v = s^2 / n`, and
/// the interval `d +/- t_(1 - alpha/2, df) se` mapped to percent as
/// [`log_ratio_to_degradation`] maps a paired mean log ratio. The estimate equals the paired
/// estimate's when the units are the same values, because the mean of differences is the
/// difference of means.
///
/// When both samples are constant the interval has zero width. Errors with fewer than 2 values
/// on a side, a value that is not finite or not greater than 0, or an invalid level.
pub fn welch_log_degradation(
    baseline: &[f64],
    contended: &[f64],
    direction: Direction,
    level: f64,
) -> Result<DegradationCi, StatsError> {
    check_level(level)?;
    let (mb, vb) = log_mean_var(baseline, "baseline")?;
    let (mc, vc) = log_mean_var(contended, "contended")?;
    let (nb, nc) = (baseline.len() as f64, contended.len() as f64);
    let d = mc - mb;
    let (eb, ec) = (vb / nb, vc / nc);
    let se = (eb + ec).sqrt();
    let (lo, hi) = if se > 0.0 {
        let df = (eb + ec).powi(2) / (eb * eb / (nb - 1.0) + ec * ec / (nc - 1.0));
        let t = student_t_quantile(1.0 - (1.0 - level) / 2.0, df);
        (d - t * se, d + t * se)
    } else {
        (d, d)
    };
    let to_pct = |l: f64| log_ratio_to_degradation(l, direction);
    let (a, b) = (to_pct(lo), to_pct(hi));
    Ok(DegradationCi {
        estimate: to_pct(d),
        lower: a.min(b),
        upper: a.max(b),
        level,
        estimator: Estimator::Mean,
        method: CiMethod::WelchLogT,
        resamples: 0,
        seed: 0,
    })
}

/// Mean and sample variance ([`Sample`]) of the logarithms of `xs` (the `side` named in
/// errors), checked.
fn log_mean_var(xs: &[f64], side: &'static str) -> Result<(f64, f64), StatsError> {
    if xs.len() < 2 {
        return Err(StatsError::TooFewUnits {
            n: xs.len(),
            min: 2,
        });
    }
    if let Some((index, &value)) = xs
        .iter()
        .enumerate()
        .find(|(_, v)| !(v.is_finite() && **v > 0.0))
    {
        return Err(StatsError::NonPositivePair { index, side, value });
    }
    let logs = Sample::new(xs.iter().map(|x| x.ln()).collect())?;
    Ok((logs.mean(), logs.variance()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_a_hand_computed_welch_interval() {
        // ln values: b = ln 10, ln 12, ln 11; c = ln 14, ln 13, ln 15, ln 12.
        let b = [10.0, 12.0, 11.0];
        let c = [14.0, 13.0, 15.0, 12.0];
        let e = welch_log_degradation(&b, &c, Direction::Lower, 0.95).unwrap();
        let lb: Vec<f64> = b.iter().map(|x: &f64| x.ln()).collect();
        let lc: Vec<f64> = c.iter().map(|x: &f64| x.ln()).collect();
        let m = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let var = |v: &[f64]| {
            let mm = m(v);
            v.iter().map(|x| (x - mm).powi(2)).sum::<f64>() / (v.len() as f64 - 1.0)
        };
        let (eb, ec) = (var(&lb) / 3.0, var(&lc) / 4.0);
        let df = (eb + ec).powi(2) / (eb * eb / 2.0 + ec * ec / 3.0);
        let t = student_t_quantile(0.975, df);
        let d = m(&lc) - m(&lb);
        let se = (eb + ec).sqrt();
        assert!((e.estimate - d.exp_m1() * 100.0).abs() < 1e-9);
        assert!((e.lower - (d - t * se).exp_m1() * 100.0).abs() < 1e-9);
        assert!((e.upper - (d + t * se).exp_m1() * 100.0).abs() < 1e-9);
        assert_eq!(e.method, CiMethod::WelchLogT);
        assert_eq!(e.estimator, Estimator::Mean);
    }

    #[test]
    fn higher_is_better_swaps_the_sign_and_keeps_bounds_ordered() {
        let e = welch_log_degradation(&[10.0, 11.0], &[8.0, 9.0], Direction::Higher, 0.95).unwrap();
        assert!(e.estimate > 0.0);
        assert!(e.lower <= e.estimate && e.estimate <= e.upper);
    }

    #[test]
    fn constant_samples_give_zero_width() {
        let e = welch_log_degradation(&[2.0, 2.0], &[3.0, 3.0], Direction::Lower, 0.95).unwrap();
        assert!((e.estimate - 50.0).abs() < 1e-9);
        assert_eq!(e.half_width(), 0.0);
    }

    #[test]
    fn rejects_short_and_non_positive_samples() {
        assert!(welch_log_degradation(&[1.0], &[1.0, 2.0], Direction::Lower, 0.95).is_err());
        assert!(welch_log_degradation(&[1.0, 0.0], &[1.0, 2.0], Direction::Lower, 0.95).is_err());
        assert!(welch_log_degradation(&[1.0, 2.0], &[1.0, 2.0], Direction::Lower, 1.5).is_err());
    }
}
