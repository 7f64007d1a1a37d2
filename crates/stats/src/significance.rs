//! Significance of a change between two independent samples: the Mann-Whitney U test and a
//! seeded permutation test.

use serde::{Deserialize, Serialize};

use crate::degradation::Estimator;
use crate::error::{invalid, StatsError};
use crate::normal::normal_cdf;
use crate::rng;
use crate::sample::Sample;

/// Result of a two-sided Mann-Whitney U test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MannWhitney {
    /// `U` of the contended sample: the number of (baseline, contended) pairs where the
    /// contended value is larger, ties counting one half.
    pub u: f64,
    /// Standardised statistic, with continuity and tie corrections (0 when every value ties).
    pub z: f64,
    /// Two-sided p-value of the normal approximation.
    pub p_value: f64,
    /// `U / (n_baseline * n_contended)`: the probability that a random contended value exceeds
    /// a random baseline value (ties half), the common-language effect size. 0.5 means no shift.
    pub prob_greater: f64,
    /// Number of baseline values.
    pub n_baseline: usize,
    /// Number of contended values.
    pub n_contended: usize,
}

/// Two-sided Mann-Whitney U (Wilcoxon rank-sum) test of whether the contended values tend to
/// differ from the baseline values.
///
/// Method: Mann & Whitney (1947). Values are ranked together, ties getting their average rank;
/// `U = R_contended - n_c (n_c + 1) / 2`. The p-value uses the normal approximation with mean
/// `n_b n_c / 2`, the tie-corrected variance
/// `n_b n_c / 12 * ((N + 1) - sum(t^3 - t) / (N (N - 1)))` over tie groups of size `t`
/// (Lehmann 1975, *Nonparametrics*, section 1.4), and a continuity correction of 1/2 towards
/// the mean. The approximation is fair from about 8 values per sample; with fewer, treat the
/// p-value as a rough guide (or use [`permutation_test`]).
///
/// Rank-based, so the same whether a metric is higher- or lower-is-better and unaffected by
/// outliers beyond their rank.
pub fn mann_whitney_u(baseline: &Sample, contended: &Sample) -> MannWhitney {
    let (nb, nc) = (baseline.len(), contended.len());
    // Merge the two sorted samples, tagging contended values.
    let mut all: Vec<(f64, bool)> = Vec::with_capacity(nb + nc);
    all.extend(baseline.sorted().iter().map(|&x| (x, false)));
    all.extend(contended.sorted().iter().map(|&x| (x, true)));
    all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));

    let n = all.len();
    let mut rank_sum_c = 0.0;
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        while j < n && all[j].0 == all[i].0 {
            j += 1;
        }
        // Positions i..j share the average of ranks i+1 ..= j.
        let avg_rank = (i + 1 + j) as f64 / 2.0;
        let in_c = all[i..j].iter().filter(|e| e.1).count() as f64;
        rank_sum_c += avg_rank * in_c;
        let t = (j - i) as f64;
        tie_term += t * t * t - t;
        i = j;
    }
    let (nbf, ncf, nf) = (nb as f64, nc as f64, n as f64);
    let u = rank_sum_c - ncf * (ncf + 1.0) / 2.0;
    let mean = nbf * ncf / 2.0;
    let var = nbf * ncf / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)));
    let diff = u - mean;
    let z = if var > 0.0 && diff.abs() > 0.5 {
        (diff - 0.5 * diff.signum()) / var.sqrt()
    } else {
        0.0
    };
    let p_value = (2.0 * normal_cdf(-z.abs())).min(1.0);
    MannWhitney {
        u,
        z,
        p_value,
        prob_greater: u / (nbf * ncf),
        n_baseline: nb,
        n_contended: nc,
    }
}

/// Result of a two-sided permutation test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermutationTest {
    /// Observed difference `statistic(contended) - statistic(baseline)`, in the metric's unit.
    pub observed: f64,
    /// Two-sided p-value `(1 + #{|permuted| >= |observed|}) / (1 + resamples)`.
    pub p_value: f64,
    /// Statistic compared.
    pub estimator: Estimator,
    /// Number of random relabellings.
    pub resamples: usize,
    /// Seed used.
    pub seed: u64,
}

/// Two-sided Monte Carlo permutation test of the difference of medians (or means) between two
/// independent samples.
///
/// Method: Fisher's randomisation test (Good 2005, *Permutation, Parametric and Bootstrap Tests
/// of Hypotheses*, ch. 3). Under "no effect" the labels baseline/contended are exchangeable, so
/// the pooled values are relabelled at random `resamples` times (Fisher-Yates shuffle, seeded
/// ChaCha8) and the observed absolute difference is ranked among the relabelled ones. The
/// `+1` in numerator and denominator counts the observed labelling itself, which keeps the
/// test exact at its level (Phipson & Smyth 2010). Differences within a relative 1e-9 of the
/// observed one count as reaching it, so rounding in a mean cannot hide a tie.
///
/// Errors if `resamples` is below 100.
pub fn permutation_test(
    baseline: &Sample,
    contended: &Sample,
    estimator: Estimator,
    resamples: usize,
    seed: u64,
) -> Result<PermutationTest, StatsError> {
    if resamples < 100 {
        return Err(invalid("resamples", resamples, "at least 100 relabellings"));
    }
    let observed = estimator.of(contended) - estimator.of(baseline);
    let threshold = observed.abs() * (1.0 - 1e-9);
    let nb = baseline.len();
    let mut pool: Vec<f64> = baseline
        .sorted()
        .iter()
        .chain(contended.sorted())
        .copied()
        .collect();
    let mut rng = rng::seeded(seed);
    let mut scratch = Vec::with_capacity(pool.len());
    let mut reached = 0usize;
    for _ in 0..resamples {
        rng::shuffle(&mut rng, &mut pool);
        scratch.clear();
        scratch.extend_from_slice(&pool);
        let (b, c) = scratch.split_at_mut(nb);
        let d = estimator.of_buf(c) - estimator.of_buf(b);
        if d.abs() >= threshold {
            reached += 1;
        }
    }
    Ok(PermutationTest {
        observed,
        p_value: (1 + reached) as f64 / (1 + resamples) as f64,
        estimator,
        resamples,
        seed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[f64]) -> Sample {
        Sample::from_slice(v).unwrap()
    }

    #[test]
    fn mann_whitney_reference_values() {
        // Complete separation, 3 vs 3: U = 9 for the larger group; mean 4.5, var 5.25,
        // z = (9 - 4.5 - 0.5) / sqrt(5.25) = 1.7457, p = 0.08086 (scipy.stats.mannwhitneyu,
        // method="asymptotic", use_continuity=True).
        let r = mann_whitney_u(&s(&[1.0, 2.0, 3.0]), &s(&[4.0, 5.0, 6.0]));
        assert_eq!(r.u, 9.0);
        assert!((r.z - 1.745_743_1).abs() < 1e-6, "{r:?}");
        assert!((r.p_value - 0.080_856_1).abs() < 1e-5, "{r:?}");
        assert_eq!(r.prob_greater, 1.0);

        // Reversed: same p, negative z, U = 0.
        let r2 = mann_whitney_u(&s(&[4.0, 5.0, 6.0]), &s(&[1.0, 2.0, 3.0]));
        assert_eq!(r2.u, 0.0);
        assert!((r2.p_value - r.p_value).abs() < 1e-12);
        assert!(r2.z < 0.0);
    }

    #[test]
    fn mann_whitney_with_ties() {
        // b = [1, 2, 2, 3], c = [2, 3, 3, 4]. Ranks: 1 -> 1; 2,2,2 -> 3; 3,3,3 -> 6; 4 -> 8.
        // R_c = 3 + 6 + 6 + 8 = 23, U_c = 23 - 10 = 13. Ties: two groups of 3 -> 2 * 24 = 48.
        // var = 16/12 * (9 - 48/56) = 10.857142...; z = (13 - 8 - 0.5)/sqrt(var) = 1.36572.
        let r = mann_whitney_u(&s(&[1.0, 2.0, 2.0, 3.0]), &s(&[2.0, 3.0, 3.0, 4.0]));
        assert_eq!(r.u, 13.0);
        let var: f64 = 16.0 / 12.0 * (9.0 - 48.0 / 56.0);
        assert!((r.z - 4.5 / var.sqrt()).abs() < 1e-12, "{r:?}");
        assert!((r.p_value - 2.0 * normal_cdf(-4.5 / var.sqrt())).abs() < 1e-12);
    }

    #[test]
    fn mann_whitney_all_tied_is_p_one() {
        let r = mann_whitney_u(&s(&[5.0; 4]), &s(&[5.0; 3]));
        assert_eq!(r.z, 0.0);
        assert_eq!(r.p_value, 1.0);
        assert_eq!(r.prob_greater, 0.5);
    }

    #[test]
    fn permutation_detects_a_clear_shift_and_not_noise() {
        let b = s(&[10.0, 10.1, 9.9, 10.05, 9.95, 10.2, 9.8, 10.0]);
        let c = s(&[12.0, 12.1, 11.9, 12.05, 11.95, 12.2, 11.8, 12.0]);
        let t = permutation_test(&b, &c, Estimator::Median, 2000, 7).unwrap();
        assert!((t.observed - 2.0).abs() < 1e-12);
        // Only the observed split (and its mirror, which has the opposite sign but the same
        // absolute difference) reaches 2.0: 2 of C(16, 8) = 12870 labellings.
        assert!(t.p_value < 0.01, "{t:?}");
        let same = permutation_test(&b, &b, Estimator::Mean, 2000, 7).unwrap();
        assert!(same.p_value > 0.5, "{same:?}");
        assert!(permutation_test(&b, &c, Estimator::Mean, 10, 7).is_err());
    }

    #[test]
    fn permutation_is_deterministic_for_a_seed() {
        let b = s(&[1.0, 3.0, 2.0, 5.0, 4.0]);
        let c = s(&[2.0, 4.0, 6.0, 3.0, 5.0]);
        let x = permutation_test(&b, &c, Estimator::Median, 500, 1).unwrap();
        let y = permutation_test(&b, &c, Estimator::Median, 500, 1).unwrap();
        assert_eq!(x, y);
    }
}
