//! A fixed-work canary: how fast this CPU runs right now, compared with when it was calibrated.
//!
//! The machine isobench runs on is often itself a tenant of a busy host, and its vCPUs change
//! speed from moment to moment (here, a bimodal 50% swing every 0.5-2 s). A probe's slowdown
//! during a trial can come from the tenants being measured or from that drift. The canary
//! separates the two: a short integer loop of fixed work (~100 µs), timed with
//! `CLOCK_MONOTONIC`, read by the controller on its own CPU before and after a trial. Its
//! speed factor (1.0 = as fast as at calibration, 0.7 = 30% slower) says how much of the
//! slowdown the whole machine felt.
//!
//! The loop is a dependent chain of multiplies, xors and shifts on one register: no memory
//! traffic, no branch a predictor could miss, nothing a compiler can fold, so its time is the
//! core's speed and nothing else. Each reading keeps the fastest of a few runs, since
//! interruptions only ever make a run longer.

use std::hint::black_box;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::timer::now_ns;

/// Runs of the loop per reading; the fastest counts.
const RUNS_PER_READING: usize = 5;
/// Runs at calibration; the fastest is the reference.
const CALIBRATION_RUNS: usize = 31;

/// The fixed work: `iterations` steps of a dependent integer chain. Returns a checksum that
/// depends on every step, the same for the same `iterations` on every machine.
#[inline(never)]
pub fn work(iterations: u64) -> u64 {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in 0..black_box(iterations) {
        // xorshift64* step mixed with the counter: each step needs the previous one.
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        x = x.wrapping_mul(0x2545_F491_4F6C_DD1D).wrapping_add(i);
    }
    black_box(x)
}

/// Wall time of one run of [`work`], ns (at least 1).
fn time_once(iterations: u64) -> u64 {
    let t0 = now_ns();
    black_box(work(iterations));
    (now_ns() - t0).max(1)
}

/// The fastest of `runs` runs, ns.
fn fastest(iterations: u64, runs: usize) -> u64 {
    (0..runs.max(1))
        .map(|_| time_once(iterations))
        .min()
        .unwrap_or(1)
}

/// One reading of the canary.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CanaryReading {
    /// Speed relative to calibration: reference time / time now (1.0 = same, < 1 slower).
    pub speed: f64,
    /// The fastest run's time, ns.
    pub ns: u64,
}

/// A calibrated canary: a fixed iteration count and the time it took at calibration.
///
/// Serializable, so the controller can record the reference with a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Canary {
    iterations: u64,
    reference_ns: u64,
}

impl Canary {
    /// Calibrates for runs of about 100 µs.
    pub fn calibrate() -> Canary {
        Canary::calibrate_for(Duration::from_micros(100))
    }

    /// Calibrates for runs of about `target` (clamped to 10 µs..=10 ms): grows the iteration
    /// count until one run lasts `target`, then takes the fastest of 31 runs as the reference.
    pub fn calibrate_for(target: Duration) -> Canary {
        let target_ns = (target.as_nanos() as u64).clamp(10_000, 10_000_000);
        let mut iterations: u64 = 256;
        loop {
            let ns = fastest(iterations, 3);
            if ns >= target_ns || iterations >= 1 << 32 {
                break;
            }
            let grow = (target_ns as f64 / ns as f64).clamp(1.1, 16.0);
            iterations = ((iterations as f64) * grow).ceil() as u64;
        }
        Canary {
            iterations,
            reference_ns: fastest(iterations, CALIBRATION_RUNS),
        }
    }

    /// A canary with a known iteration count and reference (e.g. read back from a record).
    pub fn from_reference(iterations: u64, reference_ns: u64) -> Canary {
        Canary {
            iterations: iterations.max(1),
            reference_ns: reference_ns.max(1),
        }
    }

    /// Iterations of [`work`] per run.
    pub fn iterations(&self) -> u64 {
        self.iterations
    }

    /// The fastest run's time at calibration, ns.
    pub fn reference_ns(&self) -> u64 {
        self.reference_ns
    }

    /// Reads the canary now (fastest of 5 runs, about half a millisecond).
    pub fn read(&self) -> CanaryReading {
        let ns = fastest(self.iterations, RUNS_PER_READING);
        CanaryReading {
            speed: self.reference_ns as f64 / ns as f64,
            ns,
        }
    }

    /// The CPU's speed now relative to calibration (1.0 = same, < 1 slower, > 1 faster).
    pub fn speed(&self) -> f64 {
        self.read().speed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_is_deterministic_and_depends_on_every_step() {
        assert_eq!(work(1000), work(1000));
        assert_ne!(work(1000), work(1001));
        assert_eq!(work(0), 0x9E37_79B9_7F4A_7C15);
        // Values computed independently (Python, 64-bit wrapping), so a change of the loop,
        // and so of the work, is noticed.
        assert_eq!(work(3), 0x230d_4819_4dfe_dd77);
        assert_eq!(work(1000), 0x6755_a18c_236a_f937);
    }

    #[test]
    fn calibration_and_readings_are_positive() {
        let c = Canary::calibrate();
        assert!(c.iterations() >= 256);
        assert!(c.reference_ns() > 0);
        let r = c.read();
        assert!(r.ns > 0);
        assert!(r.speed.is_finite() && r.speed > 0.0, "{r:?}");
        assert!(c.speed() > 0.0);
    }

    #[test]
    fn a_recorded_reference_round_trips() {
        let c = Canary::from_reference(1234, 100_000);
        let j = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<Canary>(&j).unwrap(), c);
        assert_eq!(Canary::from_reference(0, 0).iterations(), 1);
    }
}
