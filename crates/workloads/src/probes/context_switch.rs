//! `context-switch`: the cost of switching between processes (lmbench `lat_ctx` style).
//!
//! `processes` processes (default 2: this one and a forked child) form a ring of pipes and
//! pass a 4-byte token around it: each reads the token from its own pipe, optionally sums its
//! private array of `footprint` bytes (to model a working set that must be reloaded after
//! the switch), and writes the token to the next process's pipe. With every process pinned
//! to the same CPU (`placement=same`, the default: `ctx.pin`, else the first allowed CPU),
//! each hop of the token is exactly one context switch, so
//!
//! ```text
//! switch_ns = round_trip_ns / processes - pipe_overhead_ns
//! ```
//!
//! where `pipe_overhead_ns` is the cost of one hop without a switch: one process writing the
//! token to a pipe and reading it back, plus one sum of its array, timed the same way. Both
//! are medians of batches of at least 100 us (timer overhead subtracted), measured in four
//! alternating rounds (a quarter of the budget for the overhead), so the result is
//! the cost of the switch itself (scheduler, register and address-space switch, and the
//! cache and TLB refills it causes). `placement=spread` puts the processes on different CPUs
//! (`ctx.pin`, `ctx.pin_peer`, then the others): then a hop is a cross-CPU wake-up, not a
//! switch on one CPU, and the figure measures that instead.
//!
//! Measurement runs on a thread of its own (pinned), so the caller's CPU affinity is left
//! as it was; the children are killed and reaped when the probe ends, whatever happens.

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use isobench_common::median;
use serde::Deserialize;

use super::cm_common::{batch_iters, batch_series, lower, time_batches, time_batches_at};
use super::cm_proc::{close_except, pin_raw, pipe, read_exact, write_all, Child};
use super::series::Event;
use crate::metric::{Metric, MetricSpec, Window};
use crate::params::{ParamKind, ParamSpec, ParamValues};
use crate::{Class, Env, Probe, ProbeCtx, Unsupported};

/// The `context-switch` probe.
pub struct ContextSwitch;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    processes: u32,
    footprint: u64,
    placement: String,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "processes",
        help: "processes in the token ring (one switch per hop)",
        kind: ParamKind::Int { min: 2, max: 64 },
        default: "2",
    },
    ParamSpec {
        name: "footprint",
        help: "bytes of a private array each process sums after receiving the token",
        kind: ParamKind::Size {
            min: 0,
            max: 64 << 20,
        },
        default: "0",
    },
    ParamSpec {
        name: "placement",
        help: "same: all processes on one CPU (each hop is one context switch); spread: on \
               different CPUs (each hop is a cross-CPU wake-up)",
        kind: ParamKind::Choice {
            options: &["same", "spread"],
        },
        default: "same",
    },
];

const METRICS: &[MetricSpec] = &[
    lower("switch_ns", "ns"),
    lower("pipe_overhead_ns", "ns"),
    lower("round_trip_ns", "ns"),
];

impl Probe for ContextSwitch {
    fn name(&self) -> &'static str {
        "context-switch"
    }
    fn help(&self) -> &'static str {
        "Context switch cost, lmbench lat_ctx style: `processes` (2) processes pinned to one \
         CPU pass a token around a ring of pipes, each summing a private `footprint`-byte \
         array (0) per hop. switch_ns = round_trip_ns / processes - pipe_overhead_ns, where \
         pipe_overhead_ns is one hop without a switch (one process writes the token to a \
         pipe, reads it back and sums its array). Medians of batches >= 100 us, timer \
         overhead subtracted. placement=spread puts the processes on different CPUs and \
         measures cross-CPU wake-ups instead."
    }
    fn windowed(&self) -> bool {
        true
    }
    fn class(&self) -> Class {
        Class::Process
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
    /// `footprint` eight times: a bound for rings of up to eight processes, each summing
    /// an array of its own.
    fn memory_need(&self, params: &ParamValues, _llc: u64) -> u64 {
        params
            .decode::<Opts>(self.name())
            .map_or(0, |o| 8 * o.footprint)
    }
    fn run(&self, ctx: &ProbeCtx, params: &ParamValues) -> anyhow::Result<Vec<Metric>> {
        let o: Opts = params.decode(self.name())?;
        let n = o.processes.max(2) as usize;
        let first = ctx.pin.or(ctx.env.cpus.first().copied()).unwrap_or(0);
        let cpus: Vec<usize> = if o.placement == "spread" {
            let mut order: Vec<usize> = vec![first];
            order.extend(ctx.pin_peer.filter(|&c| c != first));
            for &c in &ctx.env.cpus {
                if !order.contains(&c) {
                    order.push(c);
                }
            }
            (0..n).map(|i| order[i % order.len()]).collect()
        } else {
            vec![first; n]
        };
        let footprint = o.footprint as usize;
        // On a thread of its own, so pinning it does not change the caller's affinity.
        let (overhead, round_trip, trips) = std::thread::scope(|s| {
            s.spawn(|| -> anyhow::Result<(f64, f64, Vec<Event>)> {
                crate::util::pin_to_cpu(cpus[0])
                    .map_err(|e| anyhow::anyhow!("pinning to cpu {}: {e}", cpus[0]))?;
                measure(ctx, &cpus, footprint, ctx.budget)
            })
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("context-switch thread panicked")))
        })?;
        let switch = (round_trip / n as f64 - overhead).max(0.0);
        let with = |m: Metric, s: Option<Vec<Window>>| match s {
            Some(s) => m.with_series(s),
            None => m,
        };
        let per_switch = |t: f64| (t / n as f64 - overhead).max(0.0);
        Ok(vec![
            with(
                METRICS[0].value(switch),
                batch_series(ctx, &trips, per_switch),
            ),
            METRICS[1].value(overhead),
            with(
                METRICS[2].value(round_trip),
                batch_series(ctx, &trips, |t| t),
            ),
        ])
    }
}

/// Sums an array of words (the per-hop working set). Async-signal-safe.
#[inline(never)]
fn touch(w: &[u64]) -> u64 {
    w.iter().fold(0u64, |a, &b| a.wrapping_add(b))
}

/// Returns (ns per hop without a switch, ns per trip of the token around the ring, the
/// trip batches).
///
/// The ring has `cpus.len()` processes, this one first. The two are measured in four
/// alternating rounds, so a burst of interference weighs on both alike; with a window
/// length in one round (hops first, then trips for the rest of the budget), so the trips
/// cover one unbroken interval for the window series.
fn measure(
    ctx: &ProbeCtx,
    cpus: &[usize],
    footprint: usize,
    budget: Duration,
) -> anyhow::Result<(f64, f64, Vec<Event>)> {
    let rounds: u32 = if ctx.window.is_some() { 1 } else { 4 };
    let n = cpus.len();
    // pipes[i] carries the token into process i.
    let pipes: Vec<(OwnedFd, OwnedFd)> = (0..n).map(|_| pipe()).collect::<Result<_, _>>()?;
    let all: Vec<i32> = pipes
        .iter()
        .flat_map(|(r, w)| [r.as_raw_fd(), w.as_raw_fd()])
        .collect();
    let mut array = vec![1u64; footprint / 8];
    let mut children = Vec::with_capacity(n - 1);
    for i in 1..n {
        let (rin, wout) = (pipes[i].0.as_raw_fd(), pipes[(i + 1) % n].1.as_raw_fd());
        let cpu = cpus[i];
        let all = &all;
        let array = &mut array;
        children.push(Child::fork(move || {
            close_except(all, &[rin, wout]);
            if !pin_raw(Some(cpu)) {
                return 2;
            }
            // Make the array this process's own (copy-on-write breaks here, not later).
            for x in array.iter_mut().step_by(512) {
                *x = 1;
            }
            let mut token = [0u8; 4];
            loop {
                if read_exact(rin, &mut token).is_err() {
                    return 0;
                }
                std::hint::black_box(touch(array));
                if write_all(wout, &token, false).is_err() {
                    return 0;
                }
            }
        })?);
    }
    let rin = pipes[0].0.as_raw_fd();
    let wout = pipes[1 % n].1.as_raw_fd();
    // Keep only this process's two ends, so a dead child ends the ring with an error.
    let mut keep = Vec::new();
    for (i, (r, w)) in pipes.into_iter().enumerate() {
        if i == 0 {
            keep.push(r);
        }
        if i == 1 % n {
            keep.push(w);
        }
    }
    for x in array.iter_mut().step_by(512) {
        *x = 1;
    }
    let (self_r, self_w) = pipe()?;
    let mut token = [0u8; 4];
    let mut hop_err = None;
    let mut hop = |hops: u64| {
        for _ in 0..hops {
            let res = write_all(self_w.as_raw_fd(), &token, false)
                .and_then(|_| read_exact(self_r.as_raw_fd(), &mut token));
            if let Err(e) = res {
                hop_err.get_or_insert(e);
                return;
            }
            std::hint::black_box(touch(&array));
        }
    };
    let mut ring_token = [0u8; 4];
    let mut trip_err = None;
    let mut trip = |trips: u64| {
        for _ in 0..trips {
            let res =
                write_all(wout, &ring_token, false).and_then(|_| read_exact(rin, &mut ring_token));
            if let Err(e) = res {
                trip_err.get_or_insert(e);
                return;
            }
            std::hint::black_box(touch(&array));
        }
    };
    let min_batch = Duration::from_micros(100);
    let hop_iters = batch_iters(min_batch, &mut hop);
    let trip_iters = batch_iters(min_batch, &mut trip);
    let (mut hops, mut trips) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        hops.extend(time_batches(
            ctx,
            hop_iters,
            budget / (4 * rounds),
            3,
            &mut hop,
        ));
        trips.extend(time_batches_at(
            ctx,
            trip_iters,
            budget * 3 / (4 * rounds),
            3,
            &mut trip,
        ));
        if ctx.stopped() {
            break;
        }
    }
    drop(children);
    drop(keep);
    if let Some(e) = hop_err {
        return Err(anyhow::anyhow!("pipe to self failed: {e}"));
    }
    if let Some(e) = trip_err {
        return Err(anyhow::anyhow!(
            "token ring broke (did a process die?): {e}"
        ));
    }
    let trip_ns: Vec<f64> = trips.iter().map(|e| e.value).collect();
    Ok((median(&hops), median(&trip_ns), trips))
}
