//! `cache`: a circular linked list a little larger than the last-level cache, one cache line
//! per element, walked continuously (the cache interference program of VITS, section 4.2).
//!
//! Sizing: `factor x llc`, where `llc` is the usable LLC from [`crate::cachesize`] (measured
//! when a measurement is available, sysfs otherwise). The default factor 1.25 follows VITS
//! ("a little bigger than cache capacity"): under LRU-like replacement a cyclic walk over a
//! ring just larger than the cache misses on every line, so each lap pushes the whole LLC
//! out, other tenants' lines included, at the highest rate the walk can reach. A ring below
//! 1.0x ends up resident and only holds capacity; a ring many times the LLC still evicts,
//! but its time goes to DRAM and it becomes a memory-bandwidth stressor (`membw` is the
//! honest tool for that), so `factor` is capped at 16.
//!
//! One ring is shared by all threads (read-only while walked), each starting at an evenly
//! spaced element, so the footprint does not grow with the thread count. Elements are linked
//! in address order as in VITS (`order=seq`, prefetch-friendly, the highest line rate) or in
//! a seeded random cycle (`order=rand`, defeats the prefetcher: every hop is a full miss).

use isobench_common::format_size;
use serde::Deserialize;

use super::mapping::Mapping;
use super::pool::{cpu_share, planned_workers, run_pool, Done};
use crate::cachesize::cache_sizes;
use crate::params::{share_duty, share_threads, ParamKind, ParamSpec, ParamValues};
use crate::util::SplitMix64;
use crate::{Class, Env, Pressure, StressCtx, StressReport, Stressor, Unsupported};

/// The `cache` stressor.
pub struct Cache;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    factor: f64,
    size: Option<u64>,
    order: String,
    threads: Option<u32>,
    duty: Option<u32>,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "factor",
        help: "ring size as a multiple of the usable last-level cache",
        kind: ParamKind::Float {
            min: 0.1,
            max: 16.0,
        },
        default: "1.25",
    },
    ParamSpec {
        name: "size",
        help: "ring size in bytes, overriding factor x LLC",
        kind: ParamKind::Size {
            min: 64 << 10,
            max: 16 << 30,
        },
        default: "",
    },
    ParamSpec {
        name: "order",
        help: "link order: seq (address order, as VITS) or rand (seeded random cycle)",
        kind: ParamKind::Choice {
            options: &["seq", "rand"],
        },
        default: "seq",
    },
    share_threads("walker threads (auto: ceil(cpus x intensity / 100))"),
    share_duty("percent of each 20 ms period a thread walks (auto: from intensity)"),
];

/// Hops between two counts of the operation counter.
const HOPS: u64 = 4096;

/// The ring: element `i` lives at byte `i * line` and holds the address of the next one.
struct Ring {
    mem: Mapping,
    line: usize,
    elems: usize,
    /// Element indices in walk order (only kept for `rand`; `seq` is the identity).
    order: Option<Vec<u32>>,
}

impl Ring {
    fn build(bytes: u64, line: usize, random: bool, seed: u64) -> anyhow::Result<Ring> {
        let elems = ((bytes as usize) / line).max(2);
        anyhow::ensure!(
            elems <= u32::MAX as usize,
            "cache ring of {elems} elements is too large"
        );
        let mut mem = Mapping::new_huge(elems * line)?;
        let base = mem.as_ptr() as usize;
        let order: Option<Vec<u32>> = random.then(|| {
            let mut v: Vec<u32> = (0..elems as u32).collect();
            SplitMix64(seed).shuffle(&mut v);
            v
        });
        let at = |k: usize| order.as_ref().map_or(k, |o| o[k] as usize);
        let words = mem.as_mut_slice();
        for k in 0..elems {
            let this = at(k);
            let next = at((k + 1) % elems);
            let off = this * line;
            words[off..off + 8].copy_from_slice(&(base + next * line).to_ne_bytes());
        }
        Ok(Ring {
            mem,
            line,
            elems,
            order,
        })
    }

    /// Address of the `k`-th element in walk order.
    fn start(&self, k: usize) -> usize {
        let idx = self
            .order
            .as_ref()
            .map_or(k, |o| o[k % self.elems] as usize)
            % self.elems;
        self.mem.as_ptr() as usize + idx * self.line
    }
}

/// Follows `hops` links from `p`; returns where it stopped.
///
/// # Safety
/// `p` must point into a ring built by [`Ring::build`] that outlives the call.
#[inline(never)]
unsafe fn walk(mut p: *const usize, hops: u64) -> *const usize {
    for _ in 0..hops {
        p = p.read() as *const usize;
    }
    p
}

impl Stressor for Cache {
    fn name(&self) -> &'static str {
        "cache"
    }
    fn help(&self) -> &'static str {
        "Circular linked list a little larger than the last-level cache (factor x LLC, default \
         1.25), one cache line per element, walked continuously by N threads sharing one ring: \
         every lap evicts the whole LLC. One operation is one hop (a dependent load of one \
         cache line). Pressure: bytes_per_sec (cache lines touched x line size), ring_bytes, \
         cpu_threads."
    }
    fn class(&self) -> Class {
        Class::Cache
    }
    fn intensity_knob(&self) -> &'static str {
        "share of the allowed CPUs spent walking the ring: ceil(cpus x intensity / 100) \
         threads, each busy for its part of every 20 ms period (2 CPUs: 50 = one walker, 100 \
         = two); the ring size does not change with intensity; 0 = idle"
    }
    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        Ok(())
    }
    /// A ring of `size`, else `factor x llc`, counted once per walker thread: an upper
    /// bound, since the walkers share one ring.
    fn memory_need(&self, params: &ParamValues, env: &Env, intensity: u8, llc: u64) -> u64 {
        let Ok(o) = params.decode::<Opts>(self.name()) else {
            return 0;
        };
        let threads = planned_workers(o.threads, env.cpus.len(), intensity);
        threads * o.size.unwrap_or((llc as f64 * o.factor) as u64)
    }
    fn run(&self, ctx: &StressCtx, params: &ParamValues) -> anyhow::Result<StressReport> {
        let o: Opts = params.decode(self.name())?;
        let shape = cpu_share(ctx, o.threads, o.duty);
        if shape.workers == 0 {
            return Ok(super::pool::idle_report(ctx, "ring hop (one cache line)"));
        }
        let line = ctx.env.line_size().clamp(16, 4096) as usize;
        let mut notes = Vec::new();
        let wanted = match o.size {
            Some(s) => s,
            None => {
                // The usable LLC (measured once per process, sysfs as the fallback).
                let sizes = cache_sizes(&ctx.env);
                notes.push(format!(
                    "llc_used={} llc_sysfs={} llc_measured={} factor={}",
                    format_size(sizes.llc),
                    sizes.llc_sysfs.map_or("unknown".into(), format_size),
                    sizes.llc_measured.map_or("none".into(), format_size),
                    o.factor
                ));
                (sizes.llc as f64 * o.factor) as u64
            }
        };
        // Never more than half of what the tenant may use, nor more than the caps allow.
        let mut limit = ctx.env.mem_usable / 2;
        if let Some(b) = ctx.caps.max_bytes {
            limit = limit.min(b);
        }
        let bytes = wanted.min(limit).max(2 * line as u64);
        notes.insert(0, format!("ring={}", format_size(bytes)));
        notes.push(format!("order={} duty={:.0}%", o.order, shape.duty * 100.0));
        if bytes < wanted {
            notes.push(format!(
                "ring reduced from {} to fit the memory available",
                format_size(wanted)
            ));
        }
        let ring = Ring::build(bytes, line, o.order == "rand", 0x15_0BE7C4)?;
        let workers = shape.workers.max(1) as usize;
        let out = run_pool(
            ctx,
            self.name(),
            shape,
            |i| Ok(ring.start(i * ring.elems / workers) as *const usize),
            |p| {
                // SAFETY: `p` points into `ring`, which outlives the pool.
                *p = std::hint::black_box(unsafe { walk(*p, HOPS) });
                Ok(Done::new(HOPS, HOPS * line as u64))
            },
        )?;
        drop(ring);
        let pressure = vec![
            out.bytes_per_sec(),
            Pressure::new("ring_bytes", "B", bytes as f64),
            out.cpu_threads(),
        ];
        let mut r = out.report(
            format!("ring hop (dependent load of one {line}-byte line)"),
            notes,
        );
        r.pressure = pressure;
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_are_single_cycles() {
        for random in [false, true] {
            let ring = Ring::build(64 * 1000, 64, random, 3).unwrap();
            let start = ring.start(0) as *const usize;
            let mut p = start;
            let mut seen = std::collections::HashSet::new();
            for _ in 0..ring.elems {
                assert!(seen.insert(p as usize), "element visited twice");
                // SAFETY: p is inside the ring.
                p = unsafe { walk(p, 1) };
            }
            assert_eq!(p, start, "the walk must close the cycle");
            assert_eq!(seen.len(), 1000);
        }
    }
}
