//! Does a 95% interval cover the true degradation about 95% of the time?
//!
//! Each check simulates many independent (baseline, contended) datasets from distributions
//! whose true median and mean are known, computes the bootstrap interval of each, and counts
//! how often it contains the true degradation. Everything is seeded, so the counts are the same
//! on every run. With D datasets the count's standard error at 95% is sqrt(0.95 * 0.05 / D);
//! tolerances are about four standard errors.

mod common;

use common::{rng, Dist};
use isobench_stats::{
    bootstrap_degradation, degradation_pct, BootstrapConfig, CiMethod, Direction, Estimator, Sample,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

/// How many datasets to simulate, of how many values per side, from which seed.
#[derive(Clone, Copy)]
struct Sim {
    n: usize,
    datasets: u64,
    seed: u64,
}

/// Coverage of the interval over `sim.datasets` simulated datasets of `sim.n` values per side.
fn coverage(
    base: Dist,
    cont: Dist,
    direction: Direction,
    estimator: Estimator,
    method: CiMethod,
    sim: Sim,
) -> f64 {
    let Sim { n, datasets, seed } = sim;
    let truth = match estimator {
        Estimator::Median => degradation_pct(base.median(), cont.median(), direction),
        Estimator::Mean => degradation_pct(base.mean(), cont.mean(), direction),
    }
    .unwrap();
    let mut r = rng(seed);
    let mut covered = 0;
    for k in 0..datasets {
        let b = Sample::new(base.sample(&mut r, n)).unwrap();
        let c = Sample::new(cont.sample(&mut r, n)).unwrap();
        let cfg = BootstrapConfig {
            estimator,
            method,
            level: 0.95,
            resamples: 1000,
            seed: seed ^ k,
        };
        if bootstrap_degradation(&b, &c, direction, &cfg)
            .unwrap()
            .contains(truth)
        {
            covered += 1;
        }
    }
    covered as f64 / datasets as f64
}

/// The synthetic cases: a throughput that drops 20% (normal), a latency that rises 30%
/// (log-normal, skewed), a latency with a floor and a tail that doubles (shifted exponential).
fn cases() -> Vec<(&'static str, Dist, Dist, Direction)> {
    vec![
        (
            "normal throughput",
            Dist::Normal {
                mean: 100.0,
                sd: 10.0,
            },
            Dist::Normal {
                mean: 80.0,
                sd: 15.0,
            },
            Direction::Higher,
        ),
        (
            "log-normal latency",
            Dist::LogNormal {
                scale: 100.0,
                sigma: 0.3,
            },
            Dist::LogNormal {
                scale: 130.0,
                sigma: 0.3,
            },
            Direction::Lower,
        ),
        (
            "floor+tail latency",
            Dist::ShiftedExp {
                shift: 50.0,
                mean: 10.0,
            },
            Dist::ShiftedExp {
                shift: 50.0,
                mean: 20.0,
            },
            Direction::Lower,
        ),
    ]
}

#[test]
fn median_intervals_cover_at_the_nominal_rate() {
    // 300 datasets: standard error 0.0126; accept 0.90 ..= 0.99.
    for (name, b, c, dir) in cases() {
        for method in [CiMethod::Percentile, CiMethod::Bca] {
            let cov = coverage(
                b,
                c,
                dir,
                Estimator::Median,
                method,
                Sim {
                    n: 30,
                    datasets: 300,
                    seed: 11,
                },
            );
            assert!(
                (0.90..=0.99).contains(&cov),
                "{name}, median, {}: coverage {cov}",
                method.as_str()
            );
        }
    }
}

#[test]
fn mean_intervals_cover_at_the_nominal_rate_with_enough_values() {
    for (name, b, c, dir) in cases() {
        for method in [CiMethod::Percentile, CiMethod::Bca] {
            let cov = coverage(
                b,
                c,
                dir,
                Estimator::Mean,
                method,
                Sim {
                    n: 40,
                    datasets: 300,
                    seed: 12,
                },
            );
            assert!(
                (0.90..=0.99).contains(&cov),
                "{name}, mean, {}: coverage {cov}",
                method.as_str()
            );
        }
    }
}

/// Pins the documented weakness of bootstrap intervals of the mean with few values: they are
/// too narrow (about 0.89 instead of 0.95 at 10 values per side). If this starts failing
/// because coverage improved, update the doc comment of `Estimator::Mean`.
#[test]
fn mean_intervals_with_ten_values_undercover_as_documented() {
    let (_, b, c, dir) = cases()[0];
    let cov = coverage(
        b,
        c,
        dir,
        Estimator::Mean,
        CiMethod::Percentile,
        Sim {
            n: 10,
            datasets: 300,
            seed: 13,
        },
    );
    assert!((0.83..0.95).contains(&cov), "coverage {cov}");
}

fn fixed(cases: u32) -> Config {
    Config {
        cases,
        rng_seed: RngSeed::Fixed(0x150b_e9c4),
        failure_persistence: None,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(fixed(6))]

    /// Whatever the location, spread, size of the effect and direction, the 95% percentile
    /// interval of the median degradation covers the truth about 95% of the time.
    #[test]
    fn coverage_holds_across_shapes(
        location in 10.0f64..1000.0,
        rel_sd in 0.02f64..0.3,
        effect in -0.4f64..0.6,
        higher in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let base = Dist::Normal { mean: location, sd: location * rel_sd };
        let cont = Dist::Normal { mean: location * (1.0 + effect), sd: location * rel_sd * 1.5 };
        let dir = if higher { Direction::Higher } else { Direction::Lower };
        let cov = coverage(base, cont, dir, Estimator::Median, CiMethod::Percentile, Sim { n: 25, datasets: 250, seed });
        // 250 datasets: standard error 0.0138.
        prop_assert!((0.89..=0.995).contains(&cov), "coverage {}", cov);
    }
}
