//! [`Summary`]: the descriptive statistics of one sample, as stored and rendered.

use serde::{Deserialize, Serialize};

/// Descriptive statistics of one [`Sample`](crate::Sample), as produced by
/// [`Sample::summary`](crate::Sample::summary).
///
/// Percentiles use Hyndman & Fan type 7 interpolation; with few values the high percentiles
/// are close to the maximum and say little about the tail (p99.9 needs about 1000 values to be
/// more than an interpolation between the two largest).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of values.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Median.
    pub median: f64,
    /// Sample standard deviation (divisor `n - 1`; 0 for one value).
    pub stddev: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// 50th percentile (equal to `median`).
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Coefficient of variation `stddev / |mean|` as a ratio; absent when the mean is 0.
    pub cv: Option<f64>,
    /// Median absolute deviation (unscaled).
    pub mad: f64,
    /// Number of low outliers (modified z-score below -3.5).
    pub outliers_low: usize,
    /// Number of high outliers (modified z-score above 3.5).
    pub outliers_high: usize,
}
