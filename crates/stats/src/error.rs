//! The one error type of the statistics crate.

/// Why a statistic could not be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatsError {
    /// A sample must hold at least one value.
    #[error("a sample needs at least one value, got none")]
    Empty,
    /// A sample value is NaN or infinite.
    #[error("value #{index} of the sample is {value}; every value must be finite")]
    NonFinite {
        /// Position of the offending value in the input.
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// The baseline statistic is zero, so a relative change is undefined.
    #[error(
        "the baseline {estimator} is 0, so a relative degradation is undefined; \
         check that the probe reports a non-zero value when the host is idle"
    )]
    ZeroBaseline {
        /// The statistic that was zero (`median` or `mean`).
        estimator: &'static str,
    },
    /// A parameter is outside its valid range.
    #[error("invalid {name} = {value}: expected {expected}")]
    InvalidParameter {
        /// Parameter name, as in the config struct.
        name: &'static str,
        /// The value given.
        value: String,
        /// What would have been valid.
        expected: &'static str,
    },
    /// A paired unit holds a value whose logarithm is undefined.
    #[error(
        "unit #{index}: the {side} value is {value}; a paired comparison takes the log of \
         contended/baseline, so both values must be finite and greater than 0 \
         (check the probe's output for that trial or cycle)"
    )]
    NonPositivePair {
        /// Position of the offending unit in the input.
        index: usize,
        /// `"baseline"` or `"contended"`.
        side: &'static str,
        /// The offending value.
        value: f64,
    },
    /// Too few paired units to estimate a spread.
    #[error(
        "a paired comparison needs at least {min} units (pairs of trials or on/off cycles), \
         got {n}; run more repetitions or cycles"
    )]
    TooFewUnits {
        /// Units given.
        n: usize,
        /// Units needed.
        min: usize,
    },
    /// The stopping rule was asked to decide with nothing to decide on.
    #[error("the stopping rule needs at least one condition to compare, got none")]
    NoConditions,
}

/// Shorthand for building an [`StatsError::InvalidParameter`].
pub(crate) fn invalid(
    name: &'static str,
    value: impl ToString,
    expected: &'static str,
) -> StatsError {
    StatsError::InvalidParameter {
        name,
        value: value.to_string(),
        expected,
    }
}

/// Checks a two-sided confidence level.
pub(crate) fn check_level(level: f64) -> Result<(), StatsError> {
    if level.is_finite() && level > 0.0 && level < 1.0 {
        Ok(())
    } else {
        Err(invalid(
            "level",
            level,
            "a confidence level strictly between 0 and 1, such as 0.95",
        ))
    }
}
