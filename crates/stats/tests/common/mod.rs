//! Synthetic data with known true values, for the statistical tests.
#![allow(dead_code)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A distribution whose median and mean are known in closed form.
#[derive(Debug, Clone, Copy)]
pub enum Dist {
    /// Normal(mean, sd), by Box-Muller.
    Normal { mean: f64, sd: f64 },
    /// scale * exp(sigma Z): right-skewed like many latencies.
    LogNormal { scale: f64, sigma: f64 },
    /// shift + Exponential(mean): a floor plus a long tail.
    ShiftedExp { shift: f64, mean: f64 },
}

impl Dist {
    /// Draws one value.
    pub fn draw(&self, rng: &mut ChaCha8Rng) -> f64 {
        match *self {
            Dist::Normal { mean, sd } => mean + sd * std_normal(rng),
            Dist::LogNormal { scale, sigma } => scale * (sigma * std_normal(rng)).exp(),
            Dist::ShiftedExp { shift, mean } => {
                let u: f64 = rng.gen_range(f64::EPSILON..1.0);
                shift - mean * u.ln()
            }
        }
    }

    /// `n` draws.
    pub fn sample(&self, rng: &mut ChaCha8Rng, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.draw(rng)).collect()
    }

    /// The true median.
    pub fn median(&self) -> f64 {
        match *self {
            Dist::Normal { mean, .. } => mean,
            Dist::LogNormal { scale, .. } => scale,
            Dist::ShiftedExp { shift, mean } => shift + mean * std::f64::consts::LN_2,
        }
    }

    /// The true mean.
    pub fn mean(&self) -> f64 {
        match *self {
            Dist::Normal { mean, .. } => mean,
            Dist::LogNormal { scale, sigma } => scale * (sigma * sigma / 2.0).exp(),
            Dist::ShiftedExp { shift, mean } => shift + mean,
        }
    }
}

/// One standard normal draw (Box-Muller).
pub fn std_normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = rng.gen_range(f64::EPSILON..1.0);
    let u2: f64 = rng.gen();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// A seeded generator.
pub fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}
