//! Timing: `CLOCK_MONOTONIC` in nanoseconds, the measured cost of reading it, and a helper
//! that grows a loop until one timed region is long enough to be trusted.
//!
//! Rules (docs/ARCHITECTURE.md, "Timing"): never time a single event shorter than about a microsecond; measure the
//! timer's own overhead and subtract it.

use std::time::Duration;

/// Monotonic time in nanoseconds.
#[inline(always)]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Reads the time-stamp counter (x86_64 only; 0 elsewhere).
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdtsc has no preconditions on x86_64.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    0
}

/// The measured cost of one `now_ns()` call, in nanoseconds: the median over many
/// back-to-back pairs (the minimum is too optimistic, the mean too noisy).
pub fn timer_overhead_ns() -> f64 {
    let deltas: Vec<f64> = (0..2001)
        .map(|_| {
            let a = now_ns();
            let b = now_ns();
            (b - a) as f64
        })
        .collect();
    isobench_common::median(&deltas)
}

/// Runs `f(iterations)` with a growing iteration count until one call lasts at least
/// `min_time`, then returns the iteration count that does. `f` returns nothing; callers time
/// the real measurement separately with the returned count.
pub fn calibrate_iterations(min_time: Duration, mut f: impl FnMut(u64)) -> u64 {
    let min_ns = min_time.as_nanos() as u64;
    let mut n: u64 = 1;
    loop {
        let t0 = now_ns();
        f(n);
        let dt = now_ns() - t0;
        if dt >= min_ns || n >= 1 << 40 {
            return n;
        }
        let grow = if dt == 0 {
            16.0
        } else {
            (min_ns as f64 / dt as f64 * 1.2).clamp(1.5, 16.0)
        };
        n = ((n as f64) * grow).ceil() as u64;
    }
}

/// Times `f()` and returns its duration in nanoseconds minus the timer overhead.
#[inline]
pub fn time_ns(overhead_ns: f64, f: impl FnOnce()) -> f64 {
    let t0 = now_ns();
    f();
    let t1 = now_ns();
    ((t1 - t0) as f64 - overhead_ns).max(0.0)
}

/// Per-operation times of repeated batches.
///
/// Calibrates a batch size so that one batch lasts at least `min_batch`, then runs batches
/// until `budget` is spent (at least 5, at most 10,000 batches) or `stop` is set. Returns the
/// time per operation of each batch in nanoseconds, timer overhead subtracted. The first
/// (calibration) batches are discarded as warm-up.
pub fn per_op_batches(
    budget: Duration,
    min_batch: Duration,
    overhead_ns: f64,
    stop: &std::sync::atomic::AtomicBool,
    mut batch: impl FnMut(u64),
) -> Vec<f64> {
    let iters = calibrate_iterations(min_batch, &mut batch);
    let deadline = now_ns() + budget.as_nanos() as u64;
    let mut out = Vec::new();
    while out.len() < 10_000 {
        let dt = time_ns(overhead_ns, || batch(iters));
        out.push(dt / iters as f64);
        if out.len() >= 5
            && (now_ns() >= deadline || stop.load(std::sync::atomic::Ordering::Relaxed))
        {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_and_cheap() {
        let a = now_ns();
        let b = now_ns();
        assert!(b >= a);
        let o = timer_overhead_ns();
        assert!(o < 100_000.0, "timer overhead {o} ns is absurd");
    }

    #[test]
    fn calibration_reaches_min_time() {
        let n = calibrate_iterations(Duration::from_millis(2), |n| {
            let mut x = 0u64;
            for i in 0..n {
                x = std::hint::black_box(x.wrapping_add(i));
            }
        });
        assert!(n > 1);
    }
}
