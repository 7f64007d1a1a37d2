//! Properties of the multiple-comparison corrections (Holm 1979; Benjamini & Hochberg 1995).

use isobench_stats::{adjust_p_values, Correction};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

const ALL: [Correction; 3] = [
    Correction::None,
    Correction::Holm,
    Correction::BenjaminiHochberg,
];

fn fixed(cases: u32) -> Config {
    Config {
        cases,
        rng_seed: RngSeed::Fixed(0x3017_b4a1),
        failure_persistence: None,
        ..Config::default()
    }
}

/// p-values in [0, 1], some of them NaN (untested cells), with ties.
fn p_values() -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(
        prop_oneof![
            8 => 0.0f64..=1.0,
            1 => Just(f64::NAN),
            1 => prop::sample::select(vec![0.0, 0.01, 0.05, 1.0]),
        ],
        0..40,
    )
}

#[test]
fn holm_on_one_test_is_the_raw_p_value() {
    assert_eq!(adjust_p_values(&[0.03], Correction::Holm), vec![0.03]);
    assert_eq!(
        adjust_p_values(&[0.03], Correction::BenjaminiHochberg),
        vec![0.03]
    );
}

#[test]
fn holm_and_bh_on_equal_p_values() {
    // Four equal p-values: Holm multiplies the smallest by 4 and carries the maximum; BH's
    // step-up leaves them at m p / m = p.
    let p = [0.01; 4];
    assert_eq!(adjust_p_values(&p, Correction::Holm), vec![0.04; 4]);
    assert_eq!(
        adjust_p_values(&p, Correction::BenjaminiHochberg),
        vec![0.01; 4]
    );
}

proptest! {
    #![proptest_config(fixed(256))]

    /// Adjusted p-values are at least the raw ones, at most 1, NaN where the input is NaN.
    #[test]
    fn adjusted_are_between_raw_and_one(p in p_values()) {
        for c in ALL {
            let adj = adjust_p_values(&p, c);
            prop_assert_eq!(adj.len(), p.len());
            for (a, raw) in adj.iter().zip(&p) {
                if raw.is_nan() {
                    prop_assert!(a.is_nan());
                } else {
                    prop_assert!(*a >= *raw && *a <= 1.0, "{}: {} -> {}", c.name(), raw, a);
                }
            }
        }
    }

    /// The adjustment is monotone: a smaller raw p-value never gets a larger adjusted one,
    /// so the order of the tests is preserved.
    #[test]
    fn order_is_preserved(p in p_values()) {
        for c in ALL {
            let adj = adjust_p_values(&p, c);
            for i in 0..p.len() {
                for j in 0..p.len() {
                    if p[i] <= p[j] {
                        prop_assert!(adj[i] <= adj[j], "{}: {:?} -> {:?}", c.name(), p, adj);
                    }
                }
            }
        }
    }

    /// Holm's adjusted p-values are never below BH's, so at any level Holm never rejects more
    /// tests than Benjamini-Hochberg (family-wise error control is the stricter promise).
    #[test]
    fn holm_never_rejects_more_than_bh(p in p_values(), alpha in 0.001f64..0.2) {
        let holm = adjust_p_values(&p, Correction::Holm);
        let bh = adjust_p_values(&p, Correction::BenjaminiHochberg);
        for (h, b) in holm.iter().zip(&bh) {
            if !h.is_nan() {
                prop_assert!(h >= b, "holm {} < bh {}", h, b);
            }
        }
        let rejected = |adj: &[f64]| adj.iter().filter(|&&a| a <= alpha).count();
        prop_assert!(rejected(&holm) <= rejected(&bh));
    }

    /// The adjustment does not depend on the order the tests are listed in.
    #[test]
    fn adjustment_follows_a_permutation(p in p_values(), seed in any::<u64>()) {
        let n = p.len();
        let mut perm: Vec<usize> = (0..n).collect();
        let mut s = seed;
        for i in (1..n).rev() {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            perm.swap(i, (s >> 33) as usize % (i + 1));
        }
        let shuffled: Vec<f64> = perm.iter().map(|&i| p[i]).collect();
        for c in ALL {
            let adj = adjust_p_values(&p, c);
            let adj_shuffled = adjust_p_values(&shuffled, c);
            for (k, &i) in perm.iter().enumerate() {
                let (a, b) = (adj[i], adj_shuffled[k]);
                prop_assert!((a.is_nan() && b.is_nan()) || (a - b).abs() < 1e-12);
            }
        }
    }

    /// Adding a test to the family never makes Holm's other adjusted p-values smaller. (BH's
    /// can fall: a new tiny p-value raises every other test's rank.)
    #[test]
    fn a_larger_family_never_lowers_holm_values(p in p_values(), extra in 0.0f64..=1.0) {
        for c in [Correction::Holm] {
            let before = adjust_p_values(&p, c);
            let mut more = p.clone();
            more.push(extra);
            let after = adjust_p_values(&more, c);
            for (a, b) in after.iter().zip(&before) {
                if !b.is_nan() {
                    prop_assert!(a + 1e-12 >= *b, "{}: {} -> {}", c.name(), b, a);
                }
            }
        }
    }
}
