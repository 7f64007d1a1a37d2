//! The difference between two runs' degradations: invariants on arbitrary intervals, and, on
//! synthetic runs whose true effects are known, that the test rejects equal effects at about
//! its nominal rate and finds a real change.
//!
//! Each synthetic run is a set of paired units (baseline and contended values with log-normal
//! noise, contended = true ratio x baseline), estimated as the engine does with the paired t
//! interval; the two runs of a comparison are independent and may differ in size and noise.
//! With D comparisons the rejection rate's standard error at 5% is sqrt(0.05 * 0.95 / D).

mod common;

use common::{rng, std_normal};
use isobench_stats::{
    correct_differences, degradation_difference, interval_df, paired_degradation, CiMethod,
    Correction, DegradationCi, Direction, Estimator, Pair, PairedConfig, PairedEstimate,
    PairedMethod,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use rand_chacha::ChaCha8Rng;

fn fixed(cases: u32) -> Config {
    Config {
        cases,
        rng_seed: RngSeed::Fixed(0x0c0_ffee),
        failure_persistence: None,
        ..Config::default()
    }
}

fn direction() -> impl Strategy<Value = Direction> {
    prop_oneof![Just(Direction::Higher), Just(Direction::Lower)]
}

/// A degradation interval that has a logarithm in either direction: estimate within
/// (-90, 90) percent, bounds a little around it.
fn interval() -> impl Strategy<Value = DegradationCi> {
    (-80.0f64..80.0, 0.0f64..9.0, 0.0f64..9.0).prop_map(|(e, below, above)| DegradationCi {
        estimate: e,
        lower: e - below,
        upper: e + above,
        level: 0.95,
        estimator: Estimator::Mean,
        method: CiMethod::PairedLogT,
        resamples: 0,
        seed: 0,
    })
}

fn df() -> impl Strategy<Value = Option<f64>> {
    prop_oneof![Just(None), (1.0f64..200.0).prop_map(Some)]
}

proptest! {
    #![proptest_config(fixed(512))]

    #[test]
    fn a_run_against_itself_differs_by_nothing(a in interval(), k in df(), dir in direction()) {
        let d = degradation_difference(&a, k, &a, k, dir).unwrap();
        prop_assert_eq!(d.estimate, 0.0);
        prop_assert_eq!(d.p_value, 1.0);
        prop_assert!(!d.significant);
        prop_assert!(d.lower <= 0.0 && 0.0 <= d.upper);
    }

    #[test]
    fn swapping_the_runs_flips_the_sign_and_keeps_the_verdict(
        a in interval(), b in interval(), ka in df(), kb in df(), dir in direction()
    ) {
        let ab = degradation_difference(&a, ka, &b, kb, dir).unwrap();
        let ba = degradation_difference(&b, kb, &a, ka, dir).unwrap();
        prop_assert_eq!(ab.estimate, -ba.estimate);
        prop_assert_eq!(ab.log_difference, -ba.log_difference);
        prop_assert!((ab.p_value - ba.p_value).abs() < 1e-12);
        prop_assert_eq!(ab.df, ba.df);
        // Near the boundary the two mappings of the same log interval may round differently.
        if (ab.p_value - 0.05).abs() > 1e-9 {
            prop_assert_eq!(ab.significant, ba.significant);
            prop_assert_eq!(ab.excludes_zero(), ba.excludes_zero());
        }
    }

    #[test]
    fn the_interval_holds_the_estimate_and_agrees_with_the_test(
        a in interval(), b in interval(), ka in df(), kb in df(), dir in direction()
    ) {
        let d = degradation_difference(&a, ka, &b, kb, dir).unwrap();
        prop_assert!(d.lower <= d.estimate && d.estimate <= d.upper, "{:?}", d);
        prop_assert!((0.0..=1.0).contains(&d.p_value));
        prop_assert!((d.estimate - (b.estimate - a.estimate)).abs() < 1e-9 * (1.0 + b.estimate.abs()));
        if d.se > 0.0 && (d.p_value - 0.05).abs() > 1e-9 {
            prop_assert_eq!(d.excludes_zero(), d.p_value < 0.05, "{:?}", d);
        }
    }

    #[test]
    fn holm_never_makes_more_differences_significant(
        ps in prop::collection::vec((interval(), interval()), 1..20)
    ) {
        let mut family: Vec<_> = ps
            .iter()
            .map(|(a, b)| degradation_difference(a, None, b, None, Direction::Lower).unwrap())
            .collect();
        let before: Vec<bool> = family.iter().map(|d| d.significant).collect();
        correct_differences(family.iter_mut(), Correction::Holm);
        for (d, was) in family.iter().zip(before) {
            prop_assert!(d.p_adjusted >= d.p_value);
            prop_assert!(!d.significant || was);
        }
    }
}

/// One synthetic run of a cell: `n` paired units whose contended value is `ratio` x baseline
/// on average, with log-normal noise `noise` on each value, estimated with the paired t
/// interval.
fn run(r: &mut ChaCha8Rng, n: usize, noise: f64, ratio: f64, dir: Direction) -> PairedEstimate {
    let units: Vec<Pair> = (0..n)
        .map(|_| {
            let speed = (0.2 * std_normal(r)).exp();
            Pair::new(
                100.0 * speed * (noise * std_normal(r)).exp(),
                100.0 * ratio * speed * (noise * std_normal(r)).exp(),
            )
        })
        .collect();
    let cfg = PairedConfig {
        method: PairedMethod::LogT,
        ..Default::default()
    };
    paired_degradation(&units, dir, &cfg).unwrap()
}

fn difference(a: &PairedEstimate, b: &PairedEstimate, dir: Direction) -> (bool, f64) {
    let d = degradation_difference(
        &a.degradation,
        interval_df(&a.degradation, Some(a)),
        &b.degradation,
        interval_df(&b.degradation, Some(b)),
        dir,
    )
    .unwrap();
    (d.significant, d.estimate)
}

#[test]
fn equal_effects_are_called_different_at_about_the_nominal_rate() {
    // Runs of unequal size and noise, the case Welch-Satterthwaite is for.
    let mut r = rng(41);
    let comparisons = 4000;
    let mut rejected = 0;
    for i in 0..comparisons {
        let dir = if i % 2 == 0 {
            Direction::Higher
        } else {
            Direction::Lower
        };
        let a = run(&mut r, 5, 0.02, 0.85, dir);
        let b = run(&mut r, 16, 0.06, 0.85, dir);
        rejected += usize::from(difference(&a, &b, dir).0);
    }
    let rate = rejected as f64 / comparisons as f64;
    // Standard error about 0.0034; a normal test (ignoring the few units of A) would reject
    // far more often.
    assert!((rate - 0.05).abs() < 0.013, "rejection rate {rate}");
}

#[test]
fn a_real_change_is_found() {
    let mut r = rng(42);
    let mut found = 0;
    for _ in 0..200 {
        let a = run(&mut r, 10, 0.02, 0.90, Direction::Higher);
        let b = run(&mut r, 10, 0.02, 0.80, Direction::Higher);
        let (significant, estimate) = difference(&a, &b, Direction::Higher);
        assert!(estimate > 5.0 && estimate < 15.0, "{estimate}");
        found += usize::from(significant);
    }
    assert_eq!(found, 200);
}
