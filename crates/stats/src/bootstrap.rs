//! Seeded bootstrap confidence intervals for the degradation between two independent samples.

use serde::{Deserialize, Serialize};

use crate::degradation::{raw_degradation, Direction, Estimator};
use crate::error::{check_level, invalid, StatsError};
use crate::normal::{normal_cdf, normal_quantile};
use crate::rng;
use crate::sample::{quantile_by, quantile_sorted, Sample};

/// How the bootstrap distribution is turned into an interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CiMethod {
    /// Percentile interval: the `alpha/2` and `1 - alpha/2` quantiles of the bootstrap
    /// replicates (Efron & Tibshirani 1993, *An Introduction to the Bootstrap*, ch. 13).
    /// The default: simple, and well behaved for medians.
    Percentile,
    /// Bias-corrected and accelerated interval (Efron 1987, *Better Bootstrap Confidence
    /// Intervals*, JASA 82; Efron & Tibshirani 1993, ch. 14). Corrects the percentile
    /// interval for median bias and skewness; second-order accurate for smooth statistics such
    /// as the mean. The acceleration comes from the jackknife (see [`bootstrap_degradation`]).
    Bca,
    /// Student t interval on the mean of the log ratios `ln(contended / baseline)` of paired,
    /// time-adjacent units (see [`crate::paired_degradation`]).
    #[serde(rename = "paired_log_t")]
    PairedLogT,
    /// Moving-block bootstrap (Kuensch 1989) over time-ordered paired units (see
    /// [`crate::paired_degradation`]).
    #[serde(rename = "block_bootstrap")]
    BlockBootstrap,
    /// Student t interval on the mean log ratio of on/off cycles, allowing for neighbouring
    /// cycles' correlation (see [`crate::PairedMethod::CycleT`]).
    #[serde(rename = "cycle_t")]
    CycleT,
    /// Welch t interval on the difference of the mean logarithms of two independent samples
    /// (see [`crate::welch_log_degradation`]).
    #[serde(rename = "welch_log_t")]
    WelchLogT,
    /// Student t interval on the trials' mean log ratios, for a result whose trials differ
    /// (see [`crate::trial_level_degradation`]).
    #[serde(rename = "trial_t")]
    TrialT,
}

impl CiMethod {
    /// `"percentile"`, `"bca"`, `"paired_log_t"`, `"block_bootstrap"`, `"cycle_t"`,
    /// `"welch_log_t"` or `"trial_t"`, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            CiMethod::Percentile => "percentile",
            CiMethod::Bca => "bca",
            CiMethod::PairedLogT => "paired_log_t",
            CiMethod::BlockBootstrap => "block_bootstrap",
            CiMethod::CycleT => "cycle_t",
            CiMethod::WelchLogT => "welch_log_t",
            CiMethod::TrialT => "trial_t",
        }
    }
}

/// Settings of a bootstrap interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BootstrapConfig {
    /// Statistic compared between the samples (default: median).
    pub estimator: Estimator,
    /// Interval construction (default: percentile).
    pub method: CiMethod,
    /// Two-sided confidence level, strictly between 0 and 1 (default: 0.95).
    pub level: f64,
    /// Number of bootstrap replicates, at least 100 (default: 2000).
    pub resamples: usize,
    /// Seed of the ChaCha8 generator; the same seed gives the same interval (default: 0).
    pub seed: u64,
}

impl Default for BootstrapConfig {
    fn default() -> Self {
        BootstrapConfig {
            estimator: Estimator::Median,
            method: CiMethod::Percentile,
            level: 0.95,
            resamples: 2000,
            seed: 0,
        }
    }
}

impl BootstrapConfig {
    /// Checks the level, the number of resamples and that the method is a two-sample one.
    pub fn validate(&self) -> Result<(), StatsError> {
        check_level(self.level)?;
        if matches!(
            self.method,
            CiMethod::PairedLogT
                | CiMethod::BlockBootstrap
                | CiMethod::CycleT
                | CiMethod::WelchLogT
                | CiMethod::TrialT
        ) {
            return Err(invalid(
                "method",
                self.method.as_str(),
                "\"percentile\" or \"bca\" for two independent samples \
                 (paired methods take paired units: see paired_degradation)",
            ));
        }
        if self.resamples < 100 {
            return Err(invalid(
                "resamples",
                self.resamples,
                "at least 100 bootstrap replicates (2000 or more for a 95% interval)",
            ));
        }
        Ok(())
    }
}

/// A degradation estimate (percent, positive = worse) with its bootstrap confidence interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DegradationCi {
    /// Degradation of the observed statistics, in percent.
    pub estimate: f64,
    /// Lower bound of the interval, in percent. May be `-inf` if resamples hit a zero baseline
    /// (serialized as the string `"-inf"`).
    #[serde(with = "crate::float_serde")]
    pub lower: f64,
    /// Upper bound of the interval, in percent. May be `+inf` if resamples hit a zero baseline
    /// (serialized as the string `"inf"`).
    #[serde(with = "crate::float_serde")]
    pub upper: f64,
    /// Two-sided confidence level of the interval.
    pub level: f64,
    /// Statistic compared.
    pub estimator: Estimator,
    /// Interval construction.
    pub method: CiMethod,
    /// Number of bootstrap replicates.
    pub resamples: usize,
    /// Seed used.
    pub seed: u64,
}

impl DegradationCi {
    /// Half the width of the interval, in percentage points: `(upper - lower) / 2`; infinite
    /// when a bound is.
    pub fn half_width(&self) -> f64 {
        if self.lower.is_finite() && self.upper.is_finite() {
            (self.upper - self.lower) / 2.0
        } else {
            f64::INFINITY
        }
    }

    /// True when `value` (percent) lies inside the closed interval.
    pub fn contains(&self, value: f64) -> bool {
        self.lower <= value && value <= self.upper
    }

    /// True when the interval lies entirely on one side of 0.
    pub fn excludes_zero(&self) -> bool {
        self.lower > 0.0 || self.upper < 0.0
    }
}

/// Bootstrap confidence interval of the degradation between the `estimator` (median or mean)
/// of `baseline` and of `contended`, two independent samples.
///
/// Method: the two-sample (stratified) nonparametric bootstrap (Efron & Tibshirani 1993,
/// section 8.3): each replicate resamples the baseline and the contended values independently,
/// with replacement and at their own sizes, and computes the degradation of the two resampled
/// statistics. The interval is then read off the replicates with [`CiMethod::Percentile`] or
/// [`CiMethod::Bca`].
///
/// For BCa, the bias correction is `z0 = Phi^-1((#{replicates < estimate} + #{= estimate}/2)
/// / B)` (the half-count of ties matters for medians, whose replicates repeat), and the
/// acceleration comes from the two-sample jackknife: leaving out each value of each sample in
/// turn gives influence values `U_ji = (n_j - 1)(mean_i theta_(ji) - theta_(ji))`, and
/// `a = sum_j n_j^-3 sum_i U_ji^3 / (6 (sum_j n_j^-2 sum_i U_ji^2)^(3/2))` (Efron 1987,
/// section 6; equal to the one-sample formula when there is one sample).
///
/// Resampling reads the sorted values, so the interval does not depend on the order the values
/// were given in, and a seed gives the same interval on every platform.
///
/// Errors if the configuration is invalid or the observed baseline statistic is 0.
pub fn bootstrap_degradation(
    baseline: &Sample,
    contended: &Sample,
    direction: Direction,
    config: &BootstrapConfig,
) -> Result<DegradationCi, StatsError> {
    config.validate()?;
    let est = config.estimator;
    let base_stat = est.of(baseline);
    if base_stat == 0.0 {
        return Err(StatsError::ZeroBaseline {
            estimator: est.as_str(),
        });
    }
    let estimate = raw_degradation(base_stat, est.of(contended), direction);

    let mut replicates = replicates(baseline.sorted(), contended.sorted(), direction, config);
    replicates.sort_by(f64::total_cmp);

    let alpha = 1.0 - config.level;
    let (q_lo, q_hi) = match config.method {
        CiMethod::Percentile => (alpha / 2.0, 1.0 - alpha / 2.0),
        // Rejected by `validate` above.
        CiMethod::PairedLogT
        | CiMethod::BlockBootstrap
        | CiMethod::CycleT
        | CiMethod::WelchLogT
        | CiMethod::TrialT => (alpha / 2.0, 1.0 - alpha / 2.0),
        CiMethod::Bca => {
            let z0 = bias_correction(&replicates, estimate);
            let a = acceleration(baseline.sorted(), contended.sorted(), direction, est);
            (
                bca_level(z0, a, alpha / 2.0),
                bca_level(z0, a, 1.0 - alpha / 2.0),
            )
        }
    };
    Ok(DegradationCi {
        estimate,
        lower: quantile_sorted(&replicates, q_lo),
        upper: quantile_sorted(&replicates, q_hi),
        level: config.level,
        estimator: est,
        method: config.method,
        resamples: config.resamples,
        seed: config.seed,
    })
}

/// The bootstrap replicates of the degradation, in generation order.
fn replicates(
    base: &[f64],
    cont: &[f64],
    direction: Direction,
    config: &BootstrapConfig,
) -> Vec<f64> {
    let mut rng = rng::seeded(config.seed);
    let mut bbuf = vec![0.0; base.len()];
    let mut cbuf = vec![0.0; cont.len()];
    (0..config.resamples)
        .map(|_| {
            for slot in bbuf.iter_mut() {
                *slot = base[rng::index(&mut rng, base.len())];
            }
            for slot in cbuf.iter_mut() {
                *slot = cont[rng::index(&mut rng, cont.len())];
            }
            let b = config.estimator.of_buf(&mut bbuf);
            let c = config.estimator.of_buf(&mut cbuf);
            raw_degradation(b, c, direction)
        })
        .collect()
}

/// BCa bias correction `z0` from sorted replicates, clamped so it stays finite when every
/// replicate falls on one side of the estimate.
fn bias_correction(sorted: &[f64], estimate: f64) -> f64 {
    let b = sorted.len() as f64;
    let below = sorted.partition_point(|&x| x < estimate) as f64;
    let up_to = sorted.partition_point(|&x| x <= estimate) as f64;
    let p = (below + 0.5 * (up_to - below)) / b;
    normal_quantile(p.clamp(0.5 / b, 1.0 - 0.5 / b))
}

/// The BCa-adjusted quantile level for nominal level `q` (Efron & Tibshirani 1993, eq. 14.10).
fn bca_level(z0: f64, a: f64, q: f64) -> f64 {
    let zq = z0 + normal_quantile(q);
    let denom = 1.0 - a * zq;
    if denom <= 0.0 {
        // Acceleration so large the correction breaks down: fall back to the extreme.
        return if q < 0.5 { 0.0 } else { 1.0 };
    }
    normal_cdf(z0 + zq / denom)
}

/// Jackknife estimate of the BCa acceleration for the two-sample degradation; see
/// [`bootstrap_degradation`].
fn acceleration(base: &[f64], cont: &[f64], direction: Direction, est: Estimator) -> f64 {
    let b_full = stat_sorted(base, est);
    let c_full = stat_sorted(cont, est);
    let mut num = 0.0;
    let mut den = 0.0;
    for (j, xs) in [base, cont].into_iter().enumerate() {
        let n = xs.len();
        if n < 2 {
            continue;
        }
        let theta: Vec<f64> = (0..n)
            .map(|i| {
                let s = leave_one_out(xs, i, est);
                if j == 0 {
                    raw_degradation(s, c_full, direction)
                } else {
                    raw_degradation(b_full, s, direction)
                }
            })
            .collect();
        if theta.iter().any(|t| !t.is_finite()) {
            return 0.0;
        }
        let mean = theta.iter().sum::<f64>() / n as f64;
        let nf = n as f64;
        let (mut s2, mut s3) = (0.0, 0.0);
        for t in &theta {
            let u = (nf - 1.0) * (mean - t);
            s2 += u * u;
            s3 += u * u * u;
        }
        num += s3 / (nf * nf * nf);
        den += s2 / (nf * nf);
    }
    if den > 0.0 {
        num / (6.0 * den.powf(1.5))
    } else {
        0.0
    }
}

/// Statistic of a sorted slice.
fn stat_sorted(sorted: &[f64], est: Estimator) -> f64 {
    match est {
        Estimator::Median => quantile_sorted(sorted, 0.5),
        Estimator::Mean => crate::sample::mean_of(sorted),
    }
}

/// Statistic of a sorted slice without its `k`-th element, in O(1) for the median.
fn leave_one_out(sorted: &[f64], k: usize, est: Estimator) -> f64 {
    let m = sorted.len() - 1;
    match est {
        Estimator::Median => quantile_by(m, 0.5, |i| if i < k { sorted[i] } else { sorted[i + 1] }),
        Estimator::Mean => {
            let sum: f64 = sorted.iter().sum();
            (sum - sorted[k]) / m as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[f64]) -> Sample {
        Sample::from_slice(v).unwrap()
    }

    #[test]
    fn estimate_and_interval_are_sensible() {
        let base = s(&[100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8, 100.1]);
        let cont = s(&[80.0, 81.0, 79.0, 80.5, 79.5, 80.2, 79.8, 80.1]);
        for method in [CiMethod::Percentile, CiMethod::Bca] {
            for estimator in [Estimator::Median, Estimator::Mean] {
                let cfg = BootstrapConfig {
                    method,
                    estimator,
                    ..Default::default()
                };
                let ci = bootstrap_degradation(&base, &cont, Direction::Higher, &cfg).unwrap();
                assert!((ci.estimate - 20.0).abs() < 0.2, "{ci:?}");
                assert!(ci.lower <= ci.estimate && ci.estimate <= ci.upper, "{ci:?}");
                assert!(ci.half_width() < 1.5, "{ci:?}");
                assert!(ci.excludes_zero());
            }
        }
    }

    #[test]
    fn same_seed_same_interval_other_seed_other_interval() {
        let base = s(&[10.0, 12.0, 11.0, 13.0, 9.0, 10.5, 11.5]);
        let cont = s(&[12.0, 14.0, 15.0, 13.5, 12.5, 16.0, 11.0]);
        let cfg = BootstrapConfig {
            seed: 42,
            ..Default::default()
        };
        let a = bootstrap_degradation(&base, &cont, Direction::Lower, &cfg).unwrap();
        let b = bootstrap_degradation(&base, &cont, Direction::Lower, &cfg).unwrap();
        assert_eq!(a, b);
        let cfg2 = BootstrapConfig {
            seed: 43,
            estimator: Estimator::Mean,
            ..Default::default()
        };
        let cfg1 = BootstrapConfig {
            seed: 42,
            ..cfg2.clone()
        };
        let c1 = bootstrap_degradation(&base, &cont, Direction::Lower, &cfg1).unwrap();
        let c2 = bootstrap_degradation(&base, &cont, Direction::Lower, &cfg2).unwrap();
        assert_ne!((c1.lower, c1.upper), (c2.lower, c2.upper));
    }

    #[test]
    fn negative_degradation_is_not_clipped() {
        let base = s(&[100.0, 102.0, 98.0, 101.0, 99.0]);
        let cont = s(&[50.0, 51.0, 49.0, 50.5, 49.5]);
        let ci =
            bootstrap_degradation(&base, &cont, Direction::Lower, &Default::default()).unwrap();
        assert!((ci.estimate + 50.0).abs() < 1e-9);
        assert!(ci.upper < 0.0);
    }

    #[test]
    fn rejects_bad_config_and_zero_baseline() {
        let x = s(&[1.0, 2.0]);
        let bad_level = BootstrapConfig {
            level: 1.0,
            ..Default::default()
        };
        assert!(bootstrap_degradation(&x, &x, Direction::Higher, &bad_level).is_err());
        let few = BootstrapConfig {
            resamples: 10,
            ..Default::default()
        };
        assert!(bootstrap_degradation(&x, &x, Direction::Higher, &few).is_err());
        let zero = s(&[0.0, 0.0, 1.0]);
        let err =
            bootstrap_degradation(&zero, &x, Direction::Higher, &Default::default()).unwrap_err();
        assert_eq!(
            err,
            StatsError::ZeroBaseline {
                estimator: "median"
            }
        );
    }

    #[test]
    fn paired_methods_are_refused_for_independent_samples() {
        let x = s(&[1.0, 2.0, 3.0]);
        for method in [
            CiMethod::PairedLogT,
            CiMethod::BlockBootstrap,
            CiMethod::CycleT,
            CiMethod::WelchLogT,
            CiMethod::TrialT,
        ] {
            let cfg = BootstrapConfig {
                method,
                ..Default::default()
            };
            let err = bootstrap_degradation(&x, &x, Direction::Higher, &cfg).unwrap_err();
            assert!(err.to_string().contains("paired_degradation"), "{err}");
        }
    }

    #[test]
    fn zero_baseline_resamples_give_infinite_not_nan_bounds() {
        // Median 1 but many zeros: some replicates have a zero baseline median.
        let base = s(&[0.0, 0.0, 1.0, 1.0, 1.0]);
        let cont = s(&[1.0, 2.0, 2.0, 2.0, 3.0]);
        for method in [CiMethod::Percentile, CiMethod::Bca] {
            let cfg = BootstrapConfig {
                method,
                ..Default::default()
            };
            let ci = bootstrap_degradation(&base, &cont, Direction::Lower, &cfg).unwrap();
            assert!(!ci.lower.is_nan() && !ci.upper.is_nan(), "{ci:?}");
        }
    }

    #[test]
    fn infinite_bounds_survive_json() {
        let ci = DegradationCi {
            estimate: 1.0,
            lower: f64::NEG_INFINITY,
            upper: f64::INFINITY,
            level: 0.95,
            estimator: Estimator::Median,
            method: CiMethod::Percentile,
            resamples: 100,
            seed: 3,
        };
        let json = serde_json::to_string(&ci).unwrap();
        assert!(
            json.contains(r#""lower":"-inf""#) && json.contains(r#""upper":"inf""#),
            "{json}"
        );
        let back: DegradationCi = serde_json::from_str(&json).unwrap();
        assert_eq!(back, ci);
        let finite: DegradationCi =
            serde_json::from_str(&json.replace(r#""-inf""#, "-2.5")).unwrap();
        assert_eq!(finite.lower, -2.5);
    }

    #[test]
    fn leave_one_out_median_matches_direct() {
        let xs = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0];
        for k in 0..xs.len() {
            let mut rest: Vec<f64> = xs.to_vec();
            rest.remove(k);
            let direct = s(&rest).median();
            assert_eq!(leave_one_out(&xs, k, Estimator::Median), direct);
            assert!((leave_one_out(&xs, k, Estimator::Mean) - s(&rest).mean()).abs() < 1e-12);
        }
    }

    #[test]
    fn acceleration_is_zero_for_symmetric_data() {
        let xs = [1.0, 2.0, 3.0, 4.0, 5.0];
        let a = acceleration(&xs, &xs, Direction::Lower, Estimator::Mean);
        // Degradation is a ratio, so not exactly symmetric; it must be small.
        assert!(a.abs() < 0.05, "{a}");
    }
}
