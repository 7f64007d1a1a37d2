//! Seeded randomness. Every random choice in this crate goes through here so that a seed gives
//! the same numbers on every platform (indices are drawn as `u64`, never as `usize`).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A ChaCha8 generator for `seed`.
pub(crate) fn seeded(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// A uniform index in `0..n` (`n > 0`).
pub(crate) fn index(rng: &mut ChaCha8Rng, n: usize) -> usize {
    rng.gen_range(0..n as u64) as usize
}

/// Fisher-Yates shuffle (Knuth, TAOCP vol. 2, algorithm 3.4.2 P), platform independent.
pub(crate) fn shuffle(rng: &mut ChaCha8Rng, xs: &mut [f64]) {
    for i in (1..xs.len()).rev() {
        let j = rng.gen_range(0..=i as u64) as usize;
        xs.swap(i, j);
    }
}

/// A seed for the `index`-th independent sub-computation derived from `seed`
/// (one SplitMix64 step, Steele, Lea & Flood 2014), so sub-computations do not share streams.
pub(crate) fn derive_seed(seed: u64, index: u64) -> u64 {
    let mut z = seed.wrapping_add(index.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
