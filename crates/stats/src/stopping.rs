//! The stopping rule: keep repeating interleaved baseline/contended trials until every
//! degradation is known to within a target, or a cap is reached.

use serde::{Deserialize, Serialize};

use crate::bootstrap::{bootstrap_degradation, BootstrapConfig, DegradationCi};
use crate::degradation::Direction;
use crate::error::{invalid, StatsError};
use crate::rng::derive_seed;
use crate::sample::Sample;

/// When a run has measured enough.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StoppingRule {
    /// Largest acceptable CI half-width of every degradation, in percentage points
    /// (default 2.0, i.e. +/-2 points).
    pub target_half_width: f64,
    /// Repetitions every condition needs before the rule may stop (default 5, at least 2).
    pub min_repetitions: usize,
    /// Repetitions after which the rule stops even if some interval is still too wide
    /// (default 30).
    pub max_repetitions: usize,
    /// How each interval is computed (default: percentile bootstrap of medians, 95%, 2000
    /// replicates). Condition `i` uses a seed derived from this seed and `i`.
    pub bootstrap: BootstrapConfig,
}

impl Default for StoppingRule {
    fn default() -> Self {
        StoppingRule {
            target_half_width: 2.0,
            min_repetitions: 5,
            max_repetitions: 30,
            bootstrap: BootstrapConfig::default(),
        }
    }
}

/// Baseline and contended values of one metric under one condition, as measured so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConditionSamples<'a> {
    /// What this is, for the report: e.g. `cache-latency/l2_ns @ cache@50`.
    pub label: &'a str,
    /// Whether larger values of the metric are better.
    pub direction: Direction,
    /// Values measured with idle neighbours.
    pub baseline: &'a [f64],
    /// Values measured under the stressor.
    pub contended: &'a [f64],
}

/// What the run should do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Measure another round.
    Continue,
    /// Every interval is within the target: stop.
    Done,
    /// The repetition cap is reached with some interval still too wide: stop, and mark those
    /// results as imprecise.
    CapReached,
}

/// How far one condition is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConditionStatus {
    /// The condition's label.
    pub label: String,
    /// Completed repetitions: `min(baseline values, contended values)`.
    pub repetitions: usize,
    /// The current interval, when one could be computed.
    pub ci: Option<DegradationCi>,
    /// True when the interval's half-width is within the target.
    pub converged: bool,
    /// Why no interval could be computed (no values yet, non-finite value, zero baseline).
    pub problem: Option<String>,
}

/// The decision, with the state of every condition behind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StopReport {
    /// What to do next.
    pub decision: Decision,
    /// Fewest repetitions of any condition.
    pub min_repetitions: usize,
    /// Most repetitions of any condition.
    pub max_repetitions: usize,
    /// One entry per condition, in input order.
    pub conditions: Vec<ConditionStatus>,
}

impl StopReport {
    /// Labels of the conditions whose interval is still too wide (or missing).
    pub fn unconverged(&self) -> impl Iterator<Item = &str> {
        self.conditions
            .iter()
            .filter(|c| !c.converged)
            .map(|c| c.label.as_str())
    }
}

impl StoppingRule {
    /// Checks the target, the repetition bounds and the bootstrap settings.
    pub fn validate(&self) -> Result<(), StatsError> {
        if !(self.target_half_width.is_finite() && self.target_half_width > 0.0) {
            return Err(invalid(
                "target_half_width",
                self.target_half_width,
                "a positive number of percentage points, such as 2.0",
            ));
        }
        if self.min_repetitions < 2 {
            return Err(invalid(
                "min_repetitions",
                self.min_repetitions,
                "at least 2 (an interval from one value per side is meaningless)",
            ));
        }
        if self.max_repetitions < self.min_repetitions {
            return Err(invalid(
                "max_repetitions",
                self.max_repetitions,
                "at least min_repetitions",
            ));
        }
        self.bootstrap.validate()
    }

    /// Decides whether to measure another round.
    ///
    /// Rule (sequential estimation to a fixed precision, as in Chow & Robbins 1965, with the
    /// bootstrap interval of [`bootstrap_degradation`] in place of a normal one):
    /// 1. while any condition has fewer than `min_repetitions` repetitions: continue;
    /// 2. when every condition's CI half-width is `<= target_half_width`: done;
    /// 3. when any condition has reached `max_repetitions`: cap reached;
    /// 4. otherwise: continue.
    ///
    /// The cap counts the most-repeated condition, so a condition that keeps failing (and so
    /// never gains values) cannot keep a run going forever. A condition whose interval cannot
    /// be computed counts as not converged, with the reason in its status.
    ///
    /// Errors if the rule is invalid or `conditions` is empty.
    pub fn decide(&self, conditions: &[ConditionSamples<'_>]) -> Result<StopReport, StatsError> {
        self.validate()?;
        if conditions.is_empty() {
            return Err(StatsError::NoConditions);
        }
        let statuses: Vec<ConditionStatus> = conditions
            .iter()
            .enumerate()
            .map(|(i, c)| self.status(i, c))
            .collect();
        let min_reps = statuses.iter().map(|s| s.repetitions).min().unwrap_or(0);
        let max_reps = statuses.iter().map(|s| s.repetitions).max().unwrap_or(0);
        let decision = if min_reps < self.min_repetitions && max_reps < self.max_repetitions {
            Decision::Continue
        } else if min_reps >= self.min_repetitions && statuses.iter().all(|s| s.converged) {
            Decision::Done
        } else if max_reps >= self.max_repetitions {
            Decision::CapReached
        } else {
            Decision::Continue
        };
        Ok(StopReport {
            decision,
            min_repetitions: min_reps,
            max_repetitions: max_reps,
            conditions: statuses,
        })
    }

    fn status(&self, index: usize, c: &ConditionSamples<'_>) -> ConditionStatus {
        let repetitions = c.baseline.len().min(c.contended.len());
        let mut status = ConditionStatus {
            label: c.label.to_string(),
            repetitions,
            ci: None,
            converged: false,
            problem: None,
        };
        let cfg = BootstrapConfig {
            seed: derive_seed(self.bootstrap.seed, index as u64),
            ..self.bootstrap.clone()
        };
        let result = Sample::from_slice(c.baseline)
            .map_err(|e| format!("baseline: {e}"))
            .and_then(|b| {
                Sample::from_slice(c.contended)
                    .map_err(|e| format!("contended: {e}"))
                    .map(|c| (b, c))
            })
            .and_then(|(b, cs)| {
                bootstrap_degradation(&b, &cs, c.direction, &cfg).map_err(|e| e.to_string())
            });
        match result {
            Ok(ci) => {
                status.converged = ci.half_width() <= self.target_half_width;
                status.ci = Some(ci);
            }
            Err(problem) => status.problem = Some(problem),
        }
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond<'a>(label: &'a str, b: &'a [f64], c: &'a [f64]) -> ConditionSamples<'a> {
        ConditionSamples {
            label,
            direction: Direction::Higher,
            baseline: b,
            contended: c,
        }
    }

    const TIGHT_B: [f64; 6] = [100.0, 100.1, 99.9, 100.05, 99.95, 100.0];
    const TIGHT_C: [f64; 6] = [80.0, 80.1, 79.9, 80.05, 79.95, 80.0];
    const NOISY_B: [f64; 6] = [100.0, 140.0, 60.0, 120.0, 80.0, 100.0];
    const NOISY_C: [f64; 6] = [80.0, 30.0, 120.0, 50.0, 110.0, 70.0];

    #[test]
    fn done_when_every_interval_is_tight() {
        let rule = StoppingRule::default();
        let r = rule.decide(&[cond("a", &TIGHT_B, &TIGHT_C)]).unwrap();
        assert_eq!(r.decision, Decision::Done, "{r:?}");
        assert!(r.conditions[0].converged);
        assert_eq!(r.unconverged().count(), 0);
    }

    #[test]
    fn continues_below_min_repetitions_even_if_tight() {
        let rule = StoppingRule::default();
        let r = rule
            .decide(&[cond("a", &TIGHT_B[..3], &TIGHT_C[..4])])
            .unwrap();
        assert_eq!(r.min_repetitions, 3);
        assert_eq!(r.decision, Decision::Continue);
    }

    #[test]
    fn continues_while_noisy_then_caps() {
        let rule = StoppingRule {
            max_repetitions: 10,
            ..Default::default()
        };
        let r = rule
            .decide(&[
                cond("tight", &TIGHT_B, &TIGHT_C),
                cond("noisy", &NOISY_B, &NOISY_C),
            ])
            .unwrap();
        assert_eq!(r.decision, Decision::Continue);
        assert_eq!(r.unconverged().collect::<Vec<_>>(), vec!["noisy"]);

        let capped = StoppingRule {
            max_repetitions: 6,
            ..Default::default()
        };
        let r = capped
            .decide(&[
                cond("tight", &TIGHT_B, &TIGHT_C),
                cond("noisy", &NOISY_B, &NOISY_C),
            ])
            .unwrap();
        assert_eq!(r.decision, Decision::CapReached);
    }

    #[test]
    fn a_condition_without_values_cannot_keep_a_run_going() {
        let rule = StoppingRule {
            max_repetitions: 6,
            ..Default::default()
        };
        let r = rule
            .decide(&[cond("ok", &TIGHT_B, &TIGHT_C), cond("dnr", &[], &[])])
            .unwrap();
        assert_eq!(r.decision, Decision::CapReached);
        assert!(r.conditions[1]
            .problem
            .as_deref()
            .unwrap()
            .contains("baseline"));
    }

    #[test]
    fn zero_baseline_is_a_problem_not_a_panic() {
        let rule = StoppingRule::default();
        let zeros = [0.0; 6];
        let r = rule.decide(&[cond("z", &zeros, &TIGHT_C)]).unwrap();
        assert_eq!(r.decision, Decision::Continue);
        assert!(r.conditions[0].problem.as_deref().unwrap().contains("is 0"));
    }

    #[test]
    fn rejects_invalid_rules_and_no_conditions() {
        let rule = StoppingRule::default();
        assert_eq!(rule.decide(&[]), Err(StatsError::NoConditions));
        for bad in [
            StoppingRule {
                target_half_width: 0.0,
                ..Default::default()
            },
            StoppingRule {
                min_repetitions: 1,
                ..Default::default()
            },
            StoppingRule {
                min_repetitions: 10,
                max_repetitions: 5,
                ..Default::default()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn serde_defaults_fill_missing_fields() {
        let rule: StoppingRule = serde_json::from_str(r#"{"target_half_width": 1.0}"#).unwrap();
        assert_eq!(rule.target_half_width, 1.0);
        assert_eq!(rule.min_repetitions, 5);
        assert_eq!(rule.bootstrap.level, 0.95);
    }
}
