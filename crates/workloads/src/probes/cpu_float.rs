//! `cpu-float`: floating-point CPU throughput, Whetstone-like.
//!
//! One pass runs six small modules in double precision, each a dependent chain so the CPU's
//! latency (not only its width) shows: arithmetic on plain variables, the same on array
//! elements inside a non-inlined procedure, trigonometry (sin, cos, atan), a three-argument
//! procedure fed its own output, standard functions (ln, exp, sqrt) and a divide chain. The
//! inputs are re-read through `black_box` at the start of every pass (so nothing is folded
//! at compile time and values never drift into denormals) and every output feeds a checksum.
//!
//! Operations are counted per pass ([`OPS_PER_PASS`]): each `+ - * /` is one, and each call
//! of `sin cos atan ln exp sqrt` is one. `mflops` is counted operations per second / 1e6,
//! over all threads.

use std::hint::black_box;
use std::time::Duration;

use serde::Deserialize;

use super::cm_common::{measure_passes, rate};
use crate::metric::{Metric, MetricSpec};
use crate::params::{ParamKind, ParamSpec, ParamValues};
use crate::{Class, Env, Probe, ProbeCtx, Unsupported};

/// The `cpu-float` probe.
pub struct CpuFloat;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    threads: u32,
}

const PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "threads",
    help: "threads running the mix at once; the rate reported is their total",
    kind: ParamKind::Int { min: 1, max: 256 },
    default: "1",
}];

const METRICS: &[MetricSpec] = &[
    rate("mflops", "MFLOP/s"),
    rate("mflops_per_thread", "MFLOP/s"),
];

const CHUNK: Duration = Duration::from_millis(2);

impl Probe for CpuFloat {
    fn name(&self) -> &'static str {
        "cpu-float"
    }
    fn help(&self) -> &'static str {
        "Floating-point CPU throughput, Whetstone-like: per pass, dependent chains of double \
         arithmetic on variables and on array elements in a procedure, trigonometry (sin, cos, \
         atan), a three-argument procedure, standard functions (ln, exp, sqrt) and divides. \
         Each + - * / and each sin/cos/atan/ln/exp/sqrt counts as one operation (352 per \
         pass); mflops = counted operations per second / 1e6, total over `threads`; \
         mflops_per_thread = total / threads. Rate = median of ~20 wall-clock \
         windows (time spent descheduled counts) after a warm-up tenth of the budget. With a \
         window length, both rates also come as a series of wall-clock windows of that \
         length over the measured interval."
    }
    fn class(&self) -> Class {
        Class::Cpu
    }
    fn windowed(&self) -> bool {
        true
    }
    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }
    fn metrics(&self) -> &'static [MetricSpec] {
        METRICS
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        Ok(())
    }
    fn run(&self, ctx: &ProbeCtx, params: &ParamValues) -> anyhow::Result<Vec<Metric>> {
        let o: Opts = params.decode(self.name())?;
        let threads = o.threads.max(1) as usize;
        let work = || {
            |n: u64| {
                black_box(passes(n));
            }
        };
        let r = measure_passes(ctx, threads, CHUNK, OPS_PER_PASS, work)?;
        Ok(vec![
            r.metric(&METRICS[0], 1e-6),
            r.metric(&METRICS[1], 1e-6 / threads as f64),
        ])
    }
}

const M1_ROUNDS: u64 = 8; // 4 updates x 4 ops
const M2_ROUNDS: u64 = 6; // 4 updates x 4 ops
const M3_ROUNDS: u64 = 2; // 2 updates x 7 ops
const M4_CALLS: u64 = 8; // 6 ops
const M5_ROUNDS: u64 = 4; // 5 ops
const M6_ROUNDS: u64 = 8; // 4 ops

/// Counted floating-point operations in one pass.
pub(crate) const OPS_PER_PASS: u64 =
    M1_ROUNDS * 16 + M2_ROUNDS * 16 + M3_ROUNDS * 14 + M4_CALLS * 6 + M5_ROUNDS * 5 + M6_ROUNDS * 4;

/// Constants of the mix, read through `black_box` each pass.
#[derive(Clone, Copy)]
struct K {
    t: f64,
    t1: f64,
    t2: f64,
    one: f64,
}

/// Runs `n` passes and returns a checksum of their results.
fn passes(n: u64) -> f64 {
    let mut sum = 0.0;
    for _ in 0..n {
        sum += one_pass(black_box(K {
            t: 0.499_975,
            t1: 0.500_25,
            t2: 2.0,
            one: 1.0,
        }));
    }
    sum
}

#[inline(never)]
fn one_pass(k: K) -> f64 {
    let K { t, t1, t2, one } = k;

    // M1: plain variables.
    let (mut a, mut b, mut c, mut d) = (one, -one, -one, -one);
    for _ in 0..M1_ROUNDS {
        a = (a + b - c) * t + d;
        b = (b - c + d) * t - a;
        c = (c + d - a) * t + b;
        d = (d - a + b) * t - c;
    }

    // M2: array elements in a procedure.
    let mut e = [one, -one, -one, -one];
    array_rounds(&mut e, t, t1, M2_ROUNDS);

    // M3: trigonometry.
    let (mut x, mut y) = (t, t);
    for _ in 0..M3_ROUNDS {
        x = t * (x.sin() * y.cos() + t1).atan() * t2;
        y = t * (y.cos() - x.sin() * t1).atan() + t1;
    }

    // M4: a three-argument procedure fed its own result.
    let mut z = one;
    for _ in 0..M4_CALLS {
        three_args(one, z, &mut z, t, t2);
    }

    // M5: standard functions.
    let mut w = 0.75 * one;
    for _ in 0..M5_ROUNDS {
        w = (w.ln() * t).exp().sqrt() + t1;
    }

    // M6: divide chain.
    let mut q = one;
    for _ in 0..M6_ROUNDS {
        q = (q * t2 + t1) / (q + t2);
    }

    a + b + c + d + e[0] + e[1] + e[2] + e[3] + x + y + z + w + q
}

#[inline(never)]
fn array_rounds(e: &mut [f64; 4], t: f64, t1: f64, rounds: u64) {
    for _ in 0..rounds {
        e[0] = (e[0] + e[1]) * t - e[3] * t1;
        e[1] = (e[1] - e[2]) * t + e[0] * t1;
        e[2] = (e[2] + e[3]) * t - e[1] * t1;
        e[3] = (e[3] - e[0]) * t + e[2] * t1;
    }
}

#[inline(never)]
fn three_args(x: f64, y: f64, z: &mut f64, t: f64, t2: f64) {
    let x1 = t * (x + y);
    let y1 = t * (x1 + y);
    *z = (x1 + y1) / t2;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_is_finite_and_normal() {
        let v = passes(100);
        assert!(v.is_finite() && v.is_normal(), "{v}");
        assert_eq!(OPS_PER_PASS, 352);
    }
}
