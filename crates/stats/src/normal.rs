//! The standard normal and Student t distributions, needed by the Mann-Whitney normal
//! approximation, BCa intervals and the paired t interval.
//!
//! Why thin wrappers: the distributions come from the `statrs` crate (its `erfc`/`erf_inv` are
//! accurate to near machine precision, including far tails, which keeps small p-values
//! meaningful), and the rest of isobench calls these two functions by name, so the crate
//! providing them can change without touching callers.

use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// The standard normal distribution.
fn standard_normal() -> Normal {
    Normal::standard()
}

/// Standard normal cumulative distribution function `P(Z <= x)`.
///
/// Method: `0.5 * erfc(-x / sqrt(2))` as computed by `statrs` (Boost-derived rational
/// approximations of `erfc`). Returns 0 or 1 at the infinities and NaN for NaN.
pub fn normal_cdf(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    standard_normal().cdf(x).clamp(0.0, 1.0)
}

/// Standard normal quantile function (inverse CDF): the `x` with `P(Z <= x) = p`.
///
/// Method: `-sqrt(2) * erfc_inv(2p)` as computed by `statrs`. Returns -inf at 0, +inf at 1 and
/// NaN outside [0, 1].
pub fn normal_quantile(p: f64) -> f64 {
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    standard_normal().inverse_cdf(p)
}

/// Quantile of Student's t distribution with `df > 0` degrees of freedom (`statrs`'
/// `StudentsT`, via the inverse regularized incomplete beta function).
pub fn student_t_quantile(p: f64, df: f64) -> f64 {
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) => t.inverse_cdf(p),
        Err(_) => f64::NAN,
    }
}

/// Two-sided p-value `P(|T| >= |t|)` for Student's t with `df > 0` degrees of freedom. Uses
/// the survival function, so tiny p-values keep their relative accuracy.
pub(crate) fn student_t_two_sided_p(t: f64, df: f64) -> f64 {
    if t.is_nan() {
        return f64::NAN;
    }
    match StudentsT::new(0.0, 1.0, df) {
        Ok(dist) => (2.0 * dist.sf(t.abs())).clamp(0.0, 1.0),
        Err(_) => f64::NAN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_known_values() {
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-7);
        assert!((normal_cdf(1.959_963_985) - 0.975).abs() < 1e-7);
        assert!((normal_cdf(-1.0) - 0.158_655_253_9).abs() < 1e-7);
        assert!((normal_cdf(3.0) - 0.998_650_101_97).abs() < 1e-7);
        // Far tail: relative accuracy matters for small p-values.
        let far = normal_cdf(-6.0);
        assert!((far / 9.865_876_450_377e-10 - 1.0).abs() < 1e-6, "{far}");
        assert_eq!(normal_cdf(f64::INFINITY), 1.0);
        assert_eq!(normal_cdf(f64::NEG_INFINITY), 0.0);
    }

    #[test]
    fn quantile_known_values() {
        assert_eq!(normal_quantile(0.5), 0.0);
        assert!((normal_quantile(0.975) - 1.959_963_985).abs() < 1e-8);
        assert!((normal_quantile(0.025) + 1.959_963_985).abs() < 1e-8);
        assert!((normal_quantile(0.995) - 2.575_829_304).abs() < 1e-8);
        assert!((normal_quantile(1e-6) + 4.753_424_309).abs() < 1e-7);
        assert_eq!(normal_quantile(0.0), f64::NEG_INFINITY);
        assert_eq!(normal_quantile(1.0), f64::INFINITY);
        assert!(normal_quantile(1.5).is_nan());
    }

    #[test]
    fn student_t_known_values() {
        // Tables: t_{0.975, 4} = 2.776445, t_{0.975, 29} = 2.045230, t_{0.995, 10} = 3.169273.
        assert!((student_t_quantile(0.975, 4.0) - 2.776_445).abs() < 1e-5);
        assert!((student_t_quantile(0.975, 29.0) - 2.045_230).abs() < 1e-5);
        assert!((student_t_quantile(0.995, 10.0) - 3.169_273).abs() < 1e-5);
        assert!((student_t_quantile(0.025, 4.0) + 2.776_445).abs() < 1e-5);
        assert!((student_t_two_sided_p(2.776_445, 4.0) - 0.05).abs() < 1e-6);
        assert!((student_t_two_sided_p(-2.776_445, 4.0) - 0.05).abs() < 1e-6);
        assert_eq!(student_t_two_sided_p(0.0, 7.0), 1.0);
        assert!(student_t_two_sided_p(f64::INFINITY, 7.0) == 0.0);
    }

    #[test]
    fn quantile_inverts_cdf() {
        for i in 1..1000 {
            let p = i as f64 / 1000.0;
            let back = normal_cdf(normal_quantile(p));
            assert!((back - p).abs() < 2e-7, "p={p} back={back}");
        }
    }
}
