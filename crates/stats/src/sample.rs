//! [`Sample`]: a validated, non-empty set of finite values, and the descriptive statistics of
//! one sample (location, spread, quantiles, outliers).

use isobench_common::median_of_sorted;
use serde::{Deserialize, Serialize};

use crate::error::{invalid, StatsError};
use crate::summary::Summary;

/// Modified z-score above which a value is an outlier (Iglewicz & Hoaglin 1993).
pub const MODIFIED_Z_THRESHOLD: f64 = 3.5;

/// `Phi^-1(3/4)`: makes the MAD a consistent estimator of the standard deviation for normal
/// data (`sigma ~ MAD / 0.6745`).
const MAD_TO_Z: f64 = 0.674_489_750_196_081_7;

/// `sqrt(pi/2)`: makes the mean absolute deviation around the median a consistent estimator
/// of the standard deviation for normal data.
const MEAN_AD_TO_SIGMA: f64 = 1.253_314_137_315_500_3;

/// A non-empty set of finite values: the repetitions of one metric under one condition.
///
/// The constructor checks the invariants once, so every statistic below is total: no NaN can
/// appear and nothing divides by a zero count. Statistics are computed from the sorted values,
/// so they do not depend on the order the values were given in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Vec<f64>", into = "Vec<f64>")]
pub struct Sample {
    values: Vec<f64>,
    sorted: Vec<f64>,
}

impl TryFrom<Vec<f64>> for Sample {
    type Error = StatsError;

    fn try_from(values: Vec<f64>) -> Result<Self, StatsError> {
        Sample::new(values)
    }
}

impl From<Sample> for Vec<f64> {
    fn from(s: Sample) -> Vec<f64> {
        s.values
    }
}

/// The outliers of a sample, by position in the values as given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outliers {
    /// Positions of outliers below the median.
    pub low: Vec<usize>,
    /// Positions of outliers above the median.
    pub high: Vec<usize>,
}

impl Outliers {
    /// Number of outliers on both sides.
    pub fn count(&self) -> usize {
        self.low.len() + self.high.len()
    }

    /// True when there are no outliers.
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }
}

impl Sample {
    /// A sample of `values`; errors if it is empty or holds a NaN or an infinity.
    pub fn new(values: Vec<f64>) -> Result<Self, StatsError> {
        if values.is_empty() {
            return Err(StatsError::Empty);
        }
        if let Some((index, &value)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(StatsError::NonFinite { index, value });
        }
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        // -0.0 and 0.0 compare apart under total_cmp but are the same number; normalise so
        // that order-independence holds bit for bit.
        for v in &mut sorted {
            if *v == 0.0 {
                *v = 0.0;
            }
        }
        Ok(Sample { values, sorted })
    }

    /// A sample copied from a slice; see [`Sample::new`].
    pub fn from_slice(values: &[f64]) -> Result<Self, StatsError> {
        Sample::new(values.to_vec())
    }

    /// Number of values (at least 1).
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Always false: a `Sample` is never empty. Present for API symmetry with `len`.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The values in the order they were given.
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// The values in ascending order.
    pub fn sorted(&self) -> &[f64] {
        &self.sorted
    }

    /// Smallest value.
    pub fn min(&self) -> f64 {
        self.sorted[0]
    }

    /// Largest value.
    pub fn max(&self) -> f64 {
        self.sorted[self.sorted.len() - 1]
    }

    /// Arithmetic mean, summed in ascending order.
    pub fn mean(&self) -> f64 {
        mean_of(&self.sorted)
    }

    /// Unbiased sample variance (divisor `n - 1`, Bessel's correction), computed with the
    /// two-pass algorithm (Chan, Golub & LeVeque 1983) for accuracy; 0 for a single value.
    pub fn variance(&self) -> f64 {
        let n = self.sorted.len();
        if n < 2 {
            return 0.0;
        }
        let m = self.mean();
        let (ss, comp) = self.sorted.iter().fold((0.0, 0.0), |(ss, c), &x| {
            let d = x - m;
            (ss + d * d, c + d)
        });
        // The compensation term corrects the rounding error left in the mean.
        ((ss - comp * comp / n as f64) / (n - 1) as f64).max(0.0)
    }

    /// Sample standard deviation, `sqrt(variance)`.
    pub fn stddev(&self) -> f64 {
        self.variance().sqrt()
    }

    /// Coefficient of variation `stddev / |mean|` (a ratio, not a percentage); `None` when the
    /// mean is 0.
    pub fn cv(&self) -> Option<f64> {
        let m = self.mean();
        (m != 0.0).then(|| self.stddev() / m.abs())
    }

    /// The `q`-quantile, `0 <= q <= 1`.
    ///
    /// Method: linear interpolation between the order statistics at `h = (n - 1) q`
    /// (Hyndman & Fan 1996, definition 7; the default of R and NumPy). Monotone in `q`,
    /// equal to the minimum at 0 and the maximum at 1.
    pub fn quantile(&self, q: f64) -> Result<f64, StatsError> {
        if !(0.0..=1.0).contains(&q) {
            return Err(invalid("q", q, "a quantile between 0 and 1"));
        }
        Ok(quantile_sorted(&self.sorted, q))
    }

    /// The `p`-th percentile, `0 <= p <= 100`; see [`Sample::quantile`].
    pub fn percentile(&self, p: f64) -> Result<f64, StatsError> {
        if !(0.0..=100.0).contains(&p) {
            return Err(invalid("p", p, "a percentile between 0 and 100"));
        }
        Ok(quantile_sorted(&self.sorted, p / 100.0))
    }

    /// Median: the 0.5-quantile (mean of the two middle values when `n` is even).
    pub fn median(&self) -> f64 {
        median_of_sorted(&self.sorted)
    }

    /// 50th percentile (same as [`Sample::median`]).
    pub fn p50(&self) -> f64 {
        self.median()
    }

    /// 99th percentile.
    pub fn p99(&self) -> f64 {
        quantile_sorted(&self.sorted, 0.99)
    }

    /// 99.9th percentile.
    pub fn p999(&self) -> f64 {
        quantile_sorted(&self.sorted, 0.999)
    }

    /// Median absolute deviation `median(|x_i - median(x)|)`, unscaled (Hampel 1974). Multiply
    /// by 1.4826 to estimate the standard deviation of normal data.
    pub fn mad(&self) -> f64 {
        let med = self.median();
        let mut dev: Vec<f64> = self.sorted.iter().map(|x| (x - med).abs()).collect();
        dev.sort_by(f64::total_cmp);
        quantile_sorted(&dev, 0.5)
    }

    /// Modified z-score of every value, in input order:
    /// `M_i = 0.6745 (x_i - median) / MAD` (Iglewicz & Hoaglin 1993, *How to Detect and Handle
    /// Outliers*, section 3.3).
    ///
    /// When the MAD is 0 (more than half the values are equal) the mean absolute deviation
    /// around the median, scaled by `sqrt(pi/2)` to estimate the standard deviation, takes its
    /// place; when that is also 0 every value equals the median and every score is 0.
    pub fn modified_z_scores(&self) -> Vec<f64> {
        let med = self.median();
        let mad = self.mad();
        let scale = if mad > 0.0 {
            mad / MAD_TO_Z
        } else {
            let mean_ad = mean_of(
                &self
                    .sorted
                    .iter()
                    .map(|x| (x - med).abs())
                    .collect::<Vec<_>>(),
            );
            mean_ad * MEAN_AD_TO_SIGMA
        };
        self.values
            .iter()
            .map(|&x| if scale > 0.0 { (x - med) / scale } else { 0.0 })
            .collect()
    }

    /// Values whose modified z-score exceeds [`MODIFIED_Z_THRESHOLD`] (3.5) in absolute value
    /// (Iglewicz & Hoaglin 1993). Robust: the median and MAD are not moved by the outliers
    /// themselves, unlike a mean/stddev rule.
    pub fn outliers(&self) -> Outliers {
        let mut out = Outliers::default();
        for (i, z) in self.modified_z_scores().into_iter().enumerate() {
            if z > MODIFIED_Z_THRESHOLD {
                out.high.push(i);
            } else if z < -MODIFIED_Z_THRESHOLD {
                out.low.push(i);
            }
        }
        out
    }

    /// All descriptive statistics at once.
    pub fn summary(&self) -> Summary {
        let outliers = self.outliers();
        Summary {
            n: self.len(),
            mean: self.mean(),
            median: self.median(),
            stddev: self.stddev(),
            min: self.min(),
            max: self.max(),
            p50: self.p50(),
            p99: self.p99(),
            p999: self.p999(),
            cv: self.cv(),
            mad: self.mad(),
            outliers_low: outliers.low.len(),
            outliers_high: outliers.high.len(),
        }
    }
}

/// Arithmetic mean of a non-empty slice, summed in slice order. Falls back to summing `x / n`
/// if the plain sum overflows.
pub(crate) fn mean_of(xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let sum: f64 = xs.iter().sum();
    if sum.is_finite() {
        sum / n
    } else {
        xs.iter().map(|x| x / n).sum()
    }
}

/// Type-7 quantile of an ascending, non-empty slice; see [`Sample::quantile`].
pub(crate) fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    quantile_by(sorted.len(), q, |i| sorted[i])
}

/// Type-7 quantile of an ascending sequence of `len > 0` values read through `get`.
///
/// Robust to infinite values (bootstrap replicates may hold them): the interpolation never
/// produces NaN and never leaves `[x_lo, x_hi]`.
pub(crate) fn quantile_by(len: usize, q: f64, get: impl Fn(usize) -> f64) -> f64 {
    debug_assert!(len > 0);
    let h = (len - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = (h.floor() as usize).min(len - 1);
    let hi = (lo + 1).min(len - 1);
    let frac = h - lo as f64;
    let (x_lo, x_hi) = (get(lo), get(hi));
    if frac == 0.0 || x_lo == x_hi {
        return x_lo;
    }
    let v = x_lo + frac * (x_hi - x_lo);
    if v.is_nan() {
        // Only with infinite endpoints: take the nearer one.
        return if frac < 0.5 { x_lo } else { x_hi };
    }
    v.clamp(x_lo, x_hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use isobench_common::median_in_place;

    fn s(v: &[f64]) -> Sample {
        Sample::from_slice(v).unwrap()
    }

    #[test]
    fn rejects_empty_and_non_finite() {
        assert_eq!(Sample::new(vec![]), Err(StatsError::Empty));
        assert_eq!(
            Sample::new(vec![1.0, f64::INFINITY]),
            Err(StatsError::NonFinite {
                index: 1,
                value: f64::INFINITY
            })
        );
        let err = Sample::new(vec![f64::NAN]).unwrap_err();
        assert!(matches!(err, StatsError::NonFinite { index: 0, .. }));
        assert!(err.to_string().contains("must be finite"));
    }

    #[test]
    fn basic_statistics() {
        let x = s(&[4.0, 1.0, 3.0, 2.0]);
        assert_eq!(x.len(), 4);
        assert_eq!(x.min(), 1.0);
        assert_eq!(x.max(), 4.0);
        assert_eq!(x.mean(), 2.5);
        assert_eq!(x.median(), 2.5);
        assert!((x.variance() - 5.0 / 3.0).abs() < 1e-12);
        assert!((x.stddev() - (5.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert!((x.cv().unwrap() - (5.0f64 / 3.0).sqrt() / 2.5).abs() < 1e-12);
        assert_eq!(x.values(), &[4.0, 1.0, 3.0, 2.0]);
        assert_eq!(x.sorted(), &[1.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    fn single_value() {
        let x = s(&[7.0]);
        assert_eq!(x.median(), 7.0);
        assert_eq!(x.p999(), 7.0);
        assert_eq!(x.variance(), 0.0);
        assert_eq!(x.mad(), 0.0);
        assert!(x.outliers().is_empty());
    }

    #[test]
    fn type7_quantiles_match_reference() {
        // Reference values: R `quantile(1:10, type = 7)` / NumPy `percentile(..., 'linear')`.
        let x = s(&(1..=10).map(f64::from).collect::<Vec<_>>());
        assert_eq!(x.quantile(0.0).unwrap(), 1.0);
        assert_eq!(x.quantile(1.0).unwrap(), 10.0);
        assert!((x.quantile(0.25).unwrap() - 3.25).abs() < 1e-12);
        assert!((x.p99() - 9.91).abs() < 1e-12);
        assert!((x.p999() - 9.991).abs() < 1e-12);
        assert!(x.quantile(1.5).is_err());
        assert!(x.percentile(-1.0).is_err());
        assert!((x.percentile(75.0).unwrap() - 7.75).abs() < 1e-12);
    }

    #[test]
    fn mad_and_outliers() {
        let x = s(&[10.0, 10.2, 9.9, 10.1, 9.8, 10.0, 10.3, 25.0, 1.0]);
        assert!((x.mad() - 0.2).abs() < 1e-12);
        let o = x.outliers();
        assert_eq!(o.high, vec![7]);
        assert_eq!(o.low, vec![8]);
        assert_eq!(o.count(), 2);
        let z = x.modified_z_scores();
        assert!((z[7] - 0.674_489_75 * 15.0 / 0.2).abs() < 1e-6);
    }

    #[test]
    fn outliers_when_mad_is_zero() {
        // More than half equal: MAD = 0, so the mean absolute deviation is the scale.
        let x = s(&[5.0, 5.0, 5.0, 5.0, 9.0]);
        assert_eq!(x.mad(), 0.0);
        assert_eq!(x.outliers().high, vec![4]);
        // All equal: no outliers, no NaN.
        let y = s(&[3.0; 6]);
        assert!(y.outliers().is_empty());
        assert!(y.modified_z_scores().iter().all(|z| *z == 0.0));
    }

    #[test]
    fn cv_undefined_at_zero_mean() {
        assert_eq!(s(&[-1.0, 1.0]).cv(), None);
    }

    #[test]
    fn median_in_place_matches_sorted_median() {
        for v in [
            vec![3.0],
            vec![2.0, 1.0],
            vec![5.0, 1.0, 4.0, 2.0],
            vec![9.0, 1.0, 8.0, 2.0, 7.0],
        ] {
            let mut buf = v.clone();
            assert_eq!(median_in_place(&mut buf), s(&v).median());
        }
    }

    #[test]
    fn quantile_with_infinities_is_never_nan() {
        let xs = [f64::NEG_INFINITY, 1.0, f64::INFINITY];
        for i in 0..=10 {
            assert!(!quantile_sorted(&xs, i as f64 / 10.0).is_nan());
        }
    }

    #[test]
    fn serde_round_trip_validates() {
        let x = s(&[1.0, 2.0, 3.0]);
        let json = serde_json::to_string(&x).unwrap();
        assert_eq!(json, "[1.0,2.0,3.0]");
        let back: Sample = serde_json::from_str(&json).unwrap();
        assert_eq!(back, x);
        assert!(serde_json::from_str::<Sample>("[]").is_err());
    }
}
