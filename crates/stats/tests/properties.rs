//! Property tests: invariants every statistic must keep, on arbitrary valid inputs.

mod common;

use common::{rng, Dist};
use isobench_stats::{
    bootstrap_degradation, degradation_pct, mann_whitney_u, permutation_test, BootstrapConfig,
    ConditionSamples, Decision, Direction, Estimator, Sample, StoppingRule,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

fn fixed(cases: u32) -> Config {
    Config {
        cases,
        rng_seed: RngSeed::Fixed(0x150b_e9c5),
        failure_persistence: None,
        ..Config::default()
    }
}

/// Plausible measurement values: positive, spanning several orders of magnitude.
fn values(max_len: usize) -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(1e-3f64..1e6, 1..max_len)
}

/// Any finite values, negative and zero included.
fn any_finite(max_len: usize) -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(-1e9f64..1e9, 1..max_len)
}

/// `xs` and a permutation of it.
fn with_permutation(max_len: usize) -> impl Strategy<Value = (Vec<f64>, Vec<f64>)> {
    values(max_len).prop_flat_map(|xs| {
        let p = Just(xs.clone()).prop_shuffle();
        (Just(xs), p)
    })
}

proptest! {
    #![proptest_config(fixed(256))]

    #[test]
    fn percentiles_are_ordered_and_bounded(xs in any_finite(200)) {
        let s = Sample::new(xs).unwrap();
        let sum = s.summary();
        prop_assert!(sum.min <= sum.p50);
        prop_assert!(sum.p50 <= sum.p99);
        prop_assert!(sum.p99 <= sum.p999);
        prop_assert!(sum.p999 <= sum.max);
        prop_assert_eq!(sum.median, sum.p50);
        prop_assert!(sum.min <= sum.mean && sum.mean <= sum.max);
        prop_assert!(sum.stddev >= 0.0);
        prop_assert!(sum.mad >= 0.0 && sum.mad <= sum.max - sum.min);
        prop_assert_eq!(s.quantile(0.0).unwrap(), sum.min);
        prop_assert_eq!(s.quantile(1.0).unwrap(), sum.max);
    }

    #[test]
    fn quantile_is_monotone(xs in any_finite(100), a in 0.0f64..=1.0, b in 0.0f64..=1.0) {
        let s = Sample::new(xs).unwrap();
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        prop_assert!(s.quantile(lo).unwrap() <= s.quantile(hi).unwrap());
    }

    #[test]
    fn at_least_half_the_values_lie_on_each_side_of_the_median(xs in any_finite(100)) {
        let s = Sample::new(xs.clone()).unwrap();
        let m = s.median();
        let n = xs.len();
        let le = xs.iter().filter(|&&x| x <= m).count();
        let ge = xs.iter().filter(|&&x| x >= m).count();
        prop_assert!(2 * le >= n && 2 * ge >= n);
    }

    #[test]
    fn location_and_spread_follow_an_affine_map(
        xs in values(100), scale in 0.1f64..100.0, shift in -1e3f64..1e3,
    ) {
        let s = Sample::new(xs.clone()).unwrap();
        let t = Sample::new(xs.iter().map(|x| x * scale + shift).collect()).unwrap();
        let tol = |v: f64| 1e-9 * (1.0 + v.abs()) * 1e3;
        prop_assert!((t.median() - (s.median() * scale + shift)).abs() <= tol(t.median()));
        prop_assert!((t.mean() - (s.mean() * scale + shift)).abs() <= tol(t.mean()));
        prop_assert!((t.mad() - s.mad() * scale).abs() <= tol(t.mad()));
        prop_assert!((t.stddev() - s.stddev() * scale).abs() <= tol(t.stddev()) + 1e-6 * t.stddev());
    }

    #[test]
    fn summary_is_independent_of_value_order((xs, ys) in with_permutation(60)) {
        let a = Sample::new(xs).unwrap();
        let b = Sample::new(ys).unwrap();
        prop_assert_eq!(a.summary(), b.summary());
    }

    #[test]
    fn tests_and_intervals_are_independent_of_value_order(
        (b1, b2) in with_permutation(25), (c1, c2) in with_permutation(25), seed in any::<u64>(),
    ) {
        let (b1, b2) = (Sample::new(b1).unwrap(), Sample::new(b2).unwrap());
        let (c1, c2) = (Sample::new(c1).unwrap(), Sample::new(c2).unwrap());
        let cfg = BootstrapConfig { seed, resamples: 200, ..Default::default() };
        prop_assert_eq!(
            bootstrap_degradation(&b1, &c1, Direction::Lower, &cfg).unwrap(),
            bootstrap_degradation(&b2, &c2, Direction::Lower, &cfg).unwrap()
        );
        prop_assert_eq!(mann_whitney_u(&b1, &c1), mann_whitney_u(&b2, &c2));
        prop_assert_eq!(
            permutation_test(&b1, &c1, Estimator::Median, 200, seed).unwrap(),
            permutation_test(&b2, &c2, Estimator::Median, 200, seed).unwrap()
        );
    }

    #[test]
    fn positive_degradation_means_worse(base in 1e-3f64..1e6, ratio in 0.01f64..10.0) {
        let cont = base * ratio;
        let hi = degradation_pct(base, cont, Direction::Higher).unwrap();
        let lo = degradation_pct(base, cont, Direction::Lower).unwrap();
        // Opposite directions are exact mirror images.
        prop_assert_eq!(hi, -lo);
        // Higher is better: less throughput is worse (positive).
        prop_assert_eq!(hi > 0.0, cont < base);
        // Lower is better: more latency is worse (positive).
        prop_assert_eq!(lo > 0.0, cont > base);
        prop_assert_eq!(hi == 0.0, cont == base);
        // Relative: the same for any unit.
        let k = 1000.0;
        let scaled = degradation_pct(base * k, cont * k, Direction::Lower).unwrap();
        prop_assert!((scaled - lo).abs() <= 1e-9 * (1.0 + lo.abs()));
        // Never clipped: an improvement can be large.
        if ratio < 0.5 {
            prop_assert!(lo < -50.0 + 1e-9);
        }
    }

    #[test]
    fn bootstrap_estimate_follows_the_sign_convention(
        b in values(20), factor in 0.2f64..5.0, seed in any::<u64>(),
    ) {
        let base = Sample::new(b.clone()).unwrap();
        let cont = Sample::new(b.iter().map(|x| x * factor).collect()).unwrap();
        let cfg = BootstrapConfig { seed, resamples: 200, ..Default::default() };
        let lower = bootstrap_degradation(&base, &cont, Direction::Lower, &cfg).unwrap();
        let higher = bootstrap_degradation(&base, &cont, Direction::Higher, &cfg).unwrap();
        prop_assert!(lower.lower <= lower.upper);
        prop_assert!((lower.estimate - (factor - 1.0) * 100.0).abs() < 1e-6 * (1.0 + lower.estimate.abs()));
        prop_assert!((higher.estimate + lower.estimate).abs() < 1e-9 * (1.0 + lower.estimate.abs()));
        // The same resamples with the opposite direction mirror the interval.
        prop_assert!((higher.lower + lower.upper).abs() < 1e-9 * (1.0 + lower.upper.abs()));
        prop_assert!((higher.upper + lower.lower).abs() < 1e-9 * (1.0 + lower.lower.abs()));
    }

    #[test]
    fn a_far_value_is_an_outlier(
        xs in prop::collection::vec(1e-3f64..1e6, 3..40), k in 20.0f64..1e3,
    ) {
        // At least 3 values padded to 7: with fewer, one far value is not 3.5 robust standard
        // deviations away from anything (with MAD = 0 and n values, its score is n / 1.2533).
        let s = Sample::new(xs.clone()).unwrap();
        // Far beyond the spread of the values, whatever they are.
        let spread = (s.max() - s.min()).max(s.median().abs()).max(1.0);
        let mut with = xs;
        with.extend(std::iter::repeat_n(s.median(), with.len()));
        with.push(s.median() + k * spread);
        let t = Sample::new(with).unwrap();
        // Padding with the median shrinks the MAD, so other values may be flagged too; the
        // far one always is, and nothing above it is missed.
        prop_assert!(t.outliers().high.contains(&(t.len() - 1)));
    }

    #[test]
    fn mann_whitney_is_symmetric(b in any_finite(30), c in any_finite(30)) {
        let (bs, cs) = (Sample::new(b).unwrap(), Sample::new(c).unwrap());
        let x = mann_whitney_u(&bs, &cs);
        let y = mann_whitney_u(&cs, &bs);
        prop_assert!((0.0..=1.0).contains(&x.p_value));
        prop_assert!((x.p_value - y.p_value).abs() < 1e-12);
        prop_assert_eq!(x.u + y.u, (bs.len() * cs.len()) as f64);
        prop_assert_eq!(x.z, -y.z);
    }
}

proptest! {
    #![proptest_config(fixed(64))]

    #[test]
    fn stopping_decisions_keep_their_promises(
        b in values(40), c in values(40), target in 0.5f64..50.0, min in 2usize..10, extra in 0usize..30,
    ) {
        let rule = StoppingRule {
            target_half_width: target,
            min_repetitions: min,
            max_repetitions: min + extra,
            bootstrap: BootstrapConfig { resamples: 200, ..Default::default() },
        };
        let conds = [ConditionSamples { label: "x", direction: Direction::Lower, baseline: &b, contended: &c }];
        let r = rule.decide(&conds).unwrap();
        let reps = b.len().min(c.len());
        match r.decision {
            Decision::Done => {
                prop_assert!(reps >= min);
                let ci = r.conditions[0].ci.as_ref().unwrap();
                prop_assert!(ci.half_width() <= target);
            }
            Decision::CapReached => prop_assert!(reps >= rule.max_repetitions),
            Decision::Continue => prop_assert!(reps < rule.max_repetitions),
        }
    }
}

/// Under "no difference" a test at level 0.05 rejects about 5% of the time.
#[test]
fn rank_and_permutation_tests_hold_their_level_under_the_null() {
    let d = Dist::LogNormal {
        scale: 100.0,
        sigma: 0.5,
    };
    let mut r = rng(21);
    let (mut mw_rej, mut perm_rej) = (0, 0);
    let datasets = 400;
    for k in 0..datasets {
        let b = Sample::new(d.sample(&mut r, 15)).unwrap();
        let c = Sample::new(d.sample(&mut r, 15)).unwrap();
        if mann_whitney_u(&b, &c).p_value < 0.05 {
            mw_rej += 1;
        }
        if permutation_test(&b, &c, Estimator::Median, 400, k)
            .unwrap()
            .p_value
            < 0.05
        {
            perm_rej += 1;
        }
    }
    // Standard error of a 5% rate over 400 datasets: 0.011.
    let mw = mw_rej as f64 / datasets as f64;
    let perm = perm_rej as f64 / datasets as f64;
    assert!(
        (0.01..=0.09).contains(&mw),
        "Mann-Whitney type I error {mw}"
    );
    assert!(
        (0.01..=0.09).contains(&perm),
        "permutation type I error {perm}"
    );
}

/// A real shift of one standard deviation is found almost always with 20 values per side.
#[test]
fn rank_test_has_power_against_a_clear_shift() {
    let mut r = rng(22);
    let base = Dist::Normal {
        mean: 100.0,
        sd: 5.0,
    };
    let cont = Dist::Normal {
        mean: 105.0,
        sd: 5.0,
    };
    let found = (0..200)
        .filter(|_| {
            let b = Sample::new(base.sample(&mut r, 20)).unwrap();
            let c = Sample::new(cont.sample(&mut r, 20)).unwrap();
            mann_whitney_u(&b, &c).p_value < 0.05
        })
        .count();
    // Theory: about 0.85 for a t-test; Mann-Whitney is ~95% as efficient.
    assert!(found >= 150, "power {found}/200");
}
