//! [`compare`]: everything isobench reports about one metric under one condition, with the
//! reasons a result should not be trusted.

use serde::{Deserialize, Serialize};

use crate::bootstrap::{bootstrap_degradation, BootstrapConfig, DegradationCi};
use crate::degradation::Direction;
use crate::error::{check_level, invalid, StatsError};
use crate::sample::Sample;
use crate::significance::{mann_whitney_u, MannWhitney};
use crate::summary::Summary;

/// Which sample a flag is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The values measured with idle neighbours.
    Baseline,
    /// The values measured under the stressor.
    Contended,
}

/// Something a reader of a result must know.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Flag {
    /// Fewer values than the configured minimum on one side: untrustworthy.
    TooFewSamples {
        /// The side with too few values.
        side: Side,
        /// How many it has.
        n: usize,
        /// How many are needed.
        min: usize,
    },
    /// The interval is wider than the target: the figure is less precise than asked for, and
    /// its interval says by how much. Informational: an honest wide interval is not a wrong
    /// number (the run's time budget or round cap ended before the target was reached), so it
    /// does not make the result untrustworthy; the run counts such results apart.
    WideInterval {
        /// Half-width, percentage points (may be infinite).
        #[serde(with = "crate::float_serde")]
        half_width: f64,
        /// Target, percentage points.
        target: f64,
    },
    /// One side varies too much between repetitions to compare: untrustworthy.
    HighVariation {
        /// The noisy side.
        side: Side,
        /// Its coefficient of variation (ratio; infinite when the mean is 0).
        #[serde(with = "crate::float_serde")]
        cv: f64,
        /// The configured limit.
        limit: f64,
    },
    /// Outliers (modified z-score > 3.5) on one side; informational, the median resists them.
    Outliers {
        /// The side with outliers.
        side: Side,
        /// How many.
        count: usize,
    },
    /// Contention made the metric significantly *better*; informational (for example, a busy
    /// neighbour keeps CPUs out of deep idle states). The negative degradation is kept.
    Improved,
    /// The effect differs between the trials of a result by more than the noise within them
    /// allows (one-way analysis of variance of the cycles' log ratios): it depends on
    /// something that changes from trial to trial, such as where the scheduler placed the
    /// tenants' threads or the host's own load. Informational: the estimate and its interval
    /// are then taken over the trials' means (`trial_level_degradation`), so the interval
    /// spans the variation; with few trials it is wide, and that flag is the untrustworthy one.
    VariesBetweenTrials {
        /// Trials compared.
        trials: usize,
        /// Lowest and highest degradation of a single trial, percent.
        lowest: f64,
        /// See `lowest`.
        highest: f64,
        /// p-value of the F test.
        p_value: f64,
    },
}

impl Flag {
    /// True for flags that make the result untrustworthy: too few values, or values too noisy
    /// to compare. A wide interval is not one of them ([`Flag::WideInterval`]).
    pub fn is_untrustworthy(&self) -> bool {
        matches!(
            self,
            Flag::TooFewSamples { .. } | Flag::HighVariation { .. }
        )
    }

    /// One sentence for a human.
    pub fn describe(&self) -> String {
        let side = |s: &Side| match s {
            Side::Baseline => "baseline",
            Side::Contended => "contended",
        };
        match self {
            Flag::TooFewSamples { side: s, n, min } => {
                format!("only {n} {} values (need {min})", side(s))
            }
            Flag::WideInterval { half_width, target } => format!(
                "confidence interval is +/-{half_width:.1} points, wider than the +/-{target:.1} target"
            ),
            Flag::HighVariation { side: s, cv, limit } => format!(
                "{} values vary by {:.1}% (coefficient of variation), above the {:.1}% limit",
                side(s),
                cv * 100.0,
                limit * 100.0
            ),
            Flag::Outliers { side: s, count } => {
                format!("{count} outlier(s) among the {} values", side(s))
            }
            Flag::Improved => "contention improved this metric (negative degradation)".to_string(),
            Flag::VariesBetweenTrials {
                trials,
                lowest,
                highest,
                p_value,
            } => format!(
                "the effect differs between its {trials} trials ({lowest:+.1}% to {highest:+.1}%, \
                 F test p = {p_value:.1e}): it depends on something that changes from trial to \
                 trial, such as where the tenants' threads were placed or the host's own load; the \
                 estimate and interval are over the trials' means"
            ),
        }
    }
}

/// Settings of [`compare`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CompareConfig {
    /// How the interval is computed.
    pub bootstrap: BootstrapConfig,
    /// Significance level of the Mann-Whitney test (default 0.05).
    pub alpha: f64,
    /// Interval half-width above which the result is flagged, in points (default 2.0).
    pub target_half_width: f64,
    /// Fewest values per side for a trustworthy result (default 5).
    pub min_samples: usize,
    /// Coefficient of variation above which a side is flagged as too noisy (default 0.25).
    pub max_cv: f64,
}

impl Default for CompareConfig {
    fn default() -> Self {
        CompareConfig {
            bootstrap: BootstrapConfig::default(),
            alpha: 0.05,
            target_half_width: 2.0,
            min_samples: 5,
            max_cv: 0.25,
        }
    }
}

/// Everything reported about one metric under one condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Whether larger values are better.
    pub direction: Direction,
    /// The baseline values, summarised.
    pub baseline: Summary,
    /// The contended values, summarised.
    pub contended: Summary,
    /// Degradation (percent, positive = worse) with its interval.
    pub degradation: DegradationCi,
    /// Rank test of baseline vs contended.
    pub mann_whitney: MannWhitney,
    /// True when the Mann-Whitney p-value is below `alpha`.
    pub significant: bool,
    /// Everything a reader must know; see [`Flag`].
    pub flags: Vec<Flag>,
    /// False when any flag makes the result untrustworthy.
    pub trustworthy: bool,
}

impl Comparison {
    /// The reasons this result is untrustworthy, one sentence each (empty when trustworthy).
    pub fn untrustworthy_reasons(&self) -> Vec<String> {
        self.flags
            .iter()
            .filter(|f| f.is_untrustworthy())
            .map(Flag::describe)
            .collect()
    }
}

/// Compares a metric's baseline and contended values: both summaries, the degradation with its
/// bootstrap interval ([`bootstrap_degradation`]), the Mann-Whitney test ([`mann_whitney_u`]),
/// and the flags that say when the figure should not be trusted.
///
/// Errors if the configuration is invalid or the baseline statistic is 0.
pub fn compare(
    baseline: &Sample,
    contended: &Sample,
    direction: Direction,
    config: &CompareConfig,
) -> Result<Comparison, StatsError> {
    check_level(config.alpha).map_err(|_| invalid("alpha", config.alpha, "between 0 and 1"))?;
    if config.max_cv.is_nan() || config.max_cv <= 0.0 {
        return Err(invalid(
            "max_cv",
            config.max_cv,
            "a positive ratio, such as 0.25",
        ));
    }
    let degradation = bootstrap_degradation(baseline, contended, direction, &config.bootstrap)?;
    let mw = mann_whitney_u(baseline, contended);
    let significant = mw.p_value < config.alpha;
    let (bs, cs) = (baseline.summary(), contended.summary());

    let mut flags = Vec::new();
    for (side, s) in [(Side::Baseline, &bs), (Side::Contended, &cs)] {
        if s.n < config.min_samples {
            flags.push(Flag::TooFewSamples {
                side,
                n: s.n,
                min: config.min_samples,
            });
        }
    }
    let half_width = degradation.half_width();
    if half_width > config.target_half_width {
        flags.push(Flag::WideInterval {
            half_width,
            target: config.target_half_width,
        });
    }
    for (side, s) in [(Side::Baseline, &bs), (Side::Contended, &cs)] {
        let cv =
            s.cv.unwrap_or(if s.stddev > 0.0 { f64::INFINITY } else { 0.0 });
        if cv > config.max_cv {
            flags.push(Flag::HighVariation {
                side,
                cv,
                limit: config.max_cv,
            });
        }
    }
    for (side, s) in [(Side::Baseline, &bs), (Side::Contended, &cs)] {
        let count = s.outliers_low + s.outliers_high;
        if count > 0 {
            flags.push(Flag::Outliers { side, count });
        }
    }
    if significant && degradation.estimate < 0.0 {
        flags.push(Flag::Improved);
    }
    let trustworthy = !flags.iter().any(Flag::is_untrustworthy);
    Ok(Comparison {
        direction,
        baseline: bs,
        contended: cs,
        degradation,
        mann_whitney: mw,
        significant,
        flags,
        trustworthy,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[f64]) -> Sample {
        Sample::from_slice(v).unwrap()
    }

    #[test]
    fn clean_significant_degradation_is_trustworthy() {
        let b = s(&[100.0, 100.5, 99.5, 100.2, 99.8, 100.1, 99.9, 100.0]);
        let c = s(&[90.0, 90.5, 89.5, 90.2, 89.8, 90.1, 89.9, 90.0]);
        let r = compare(&b, &c, Direction::Higher, &CompareConfig::default()).unwrap();
        assert!(r.trustworthy, "{:?}", r.flags);
        assert!(r.significant);
        assert!((r.degradation.estimate - 10.0).abs() < 0.1);
        assert!(r.flags.is_empty());
        assert!(r.untrustworthy_reasons().is_empty());
    }

    #[test]
    fn improvement_is_flagged_and_kept_negative() {
        let b = s(&[50.0, 51.0, 49.0, 50.5, 49.5, 50.2, 49.8, 50.0]);
        let c = s(&[20.0, 20.4, 19.6, 20.2, 19.8, 20.1, 19.9, 20.0]);
        let r = compare(&b, &c, Direction::Lower, &CompareConfig::default()).unwrap();
        assert!(r.degradation.estimate < -50.0);
        assert!(r.flags.contains(&Flag::Improved));
        assert!(r.trustworthy);
    }

    #[test]
    fn noisy_and_small_samples_are_untrustworthy_with_reasons() {
        let b = s(&[100.0, 40.0, 160.0]);
        let c = s(&[90.0, 20.0, 170.0]);
        let r = compare(&b, &c, Direction::Higher, &CompareConfig::default()).unwrap();
        assert!(!r.trustworthy);
        let reasons = r.untrustworthy_reasons().join("; ");
        assert!(
            reasons.contains("only 3 baseline values (need 5)"),
            "{reasons}"
        );
        assert!(!reasons.contains("confidence interval"), "{reasons}");
        assert!(reasons.contains("vary by"), "{reasons}");
        assert!(r
            .flags
            .iter()
            .any(|f| matches!(f, Flag::WideInterval { .. })));
    }

    /// A quick run that ended at its time budget with one cell at +/-5.5 exited 4, as if its
    /// figure were wrong: a wide interval is imprecise, and says so, but it is not untrustworthy.
    #[test]
    fn a_wide_interval_alone_is_not_untrustworthy() {
        let b = s(&[100.0, 101.0, 99.0, 100.5, 99.5, 100.2, 99.8, 100.0]);
        let c = s(&[90.0, 91.0, 89.0, 90.5, 89.5, 90.2, 89.8, 90.0]);
        let config = CompareConfig {
            target_half_width: 0.01,
            ..CompareConfig::default()
        };
        let r = compare(&b, &c, Direction::Higher, &config).unwrap();
        assert!(r
            .flags
            .iter()
            .any(|f| matches!(f, Flag::WideInterval { .. })));
        assert!(r.trustworthy, "{:?}", r.flags);
        assert!(r.untrustworthy_reasons().is_empty());
    }

    #[test]
    fn serializes_with_tagged_flags() {
        let b = s(&[1.0, 1.0, 1.0, 1.0, 9.0]);
        let c = s(&[2.0, 2.0, 2.0, 2.0, 2.0]);
        let r = compare(&b, &c, Direction::Lower, &CompareConfig::default()).unwrap();
        let json = serde_json::to_value(&r).unwrap();
        let kinds: Vec<&str> = json["flags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["kind"].as_str().unwrap())
            .collect();
        assert!(kinds.contains(&"outliers"), "{json}");
        let back: Comparison = serde_json::from_value(json).unwrap();
        assert_eq!(back, r);
    }
}
