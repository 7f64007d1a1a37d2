//! `cpu`: a tight integer + floating-point loop on N threads (the CPU-intensive test of
//! Matthews et al., table 2).
//!
//! The loop mixes a 64-bit multiply-add generator, shifts and rotates with a dependent chain
//! of double-precision multiplies, adds and conversions, all in registers: it contends for
//! CPU time and execution units, not for caches or memory. Intensity is a share of the CPUs
//! the stressor may use (see [`super::pool::cpu_share`]): whole threads plus a duty cycle,
//! so intensity 25 on two CPUs is one thread busy half of every 20 ms period.

use serde::Deserialize;

use super::pool::{cpu_share, run_pool, Done};
use crate::params::{share_duty, share_threads, ParamSpec, ParamValues};
use crate::{Class, Env, StressCtx, StressReport, Stressor, Unsupported};

/// The `cpu` stressor.
pub struct Cpu;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    threads: Option<u32>,
    duty: Option<u32>,
}

const PARAMS: &[ParamSpec] = &[
    share_threads(
        "worker threads (auto: ceil(cpus x intensity / 100)); when set, each thread is \
         busy intensity% of the time",
    ),
    share_duty(
        "percent of each 20 ms period a thread computes, sleeping the rest (auto: from \
         intensity)",
    ),
];

/// Loop iterations in one counted operation (about 10-30 us of work).
const ITERS: u64 = 10_000;

/// Register state of one worker's loop, carried across blocks so nothing is recomputed.
struct Mix {
    x: u64,
    y: u64,
    f: f64,
    g: f64,
}

impl Mix {
    fn new(seed: u64) -> Self {
        Mix {
            x: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            y: seed,
            f: 1.0,
            g: 0.5,
        }
    }

    /// One block of `ITERS` iterations.
    #[inline(never)]
    fn block(&mut self) {
        let (mut x, mut y, mut f, mut g) = (self.x, self.y, self.f, self.g);
        for _ in 0..ITERS {
            x = x
                .wrapping_mul(0x5851_F42D_4C95_7F2D)
                .wrapping_add(0x1405_7B7E_F767_814F);
            y = (y ^ (x >> 17)).rotate_left(7).wrapping_add(x);
            f = f * 0.999_999_9 + (y & 0xff) as f64;
            g = (g + f) * 0.5 - (x >> 60) as f64;
        }
        self.x = std::hint::black_box(x);
        self.y = std::hint::black_box(y);
        self.f = std::hint::black_box(f);
        self.g = std::hint::black_box(g);
    }
}

impl Stressor for Cpu {
    fn name(&self) -> &'static str {
        "cpu"
    }
    fn help(&self) -> &'static str {
        "Tight integer + floating-point loop on N threads, all in registers: contends for CPU \
         time only. One operation is a block of 10,000 loop iterations. Pressure: cpu_threads \
         (CPU-seconds per second the workers actually got)."
    }
    fn class(&self) -> Class {
        Class::Cpu
    }
    fn intensity_knob(&self) -> &'static str {
        "share of the allowed CPUs kept busy: ceil(cpus x intensity / 100) threads, each busy \
         for the part of every 20 ms period that makes the total cpus x intensity / 100 CPUs \
         (2 CPUs: 25 = one thread at 50%, 50 = one thread, 100 = two threads); 0 = idle"
    }
    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        Ok(())
    }
    fn run(&self, ctx: &StressCtx, params: &ParamValues) -> anyhow::Result<StressReport> {
        let o: Opts = params.decode(self.name())?;
        let shape = cpu_share(ctx, o.threads, o.duty);
        let unit = format!("block of {ITERS} integer+float loop iterations");
        if shape.workers == 0 {
            return Ok(super::pool::idle_report(ctx, unit));
        }
        let out = run_pool(
            ctx,
            self.name(),
            shape,
            |i| Ok(Mix::new(i as u64 + 1)),
            |m| {
                m.block();
                Ok(Done::new(1, 0))
            },
        )?;
        let notes = vec![format!("duty={:.0}%", shape.duty * 100.0)];
        let pressure = vec![out.cpu_threads()];
        let mut r = out.report(unit, notes);
        r.pressure = pressure;
        Ok(r)
    }
}
