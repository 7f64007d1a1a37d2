//! `mem-latency`: main-memory load latency, sequential and random.
//!
//! A dependent pointer chase (each address is the value of the previous load) over a buffer
//! of at least 8x the *measured* LLC ([`crate::cachesize`]) and at least 64 MiB, so nearly
//! every load of the random walk misses every cache; never more than a quarter of the memory
//! this process may use (its cgroup limit), nor 1 GiB by default.
//!
//! - `seq`: elements `seq_stride` bytes apart (default 64, every cache line) linked in
//!   address order. The loads are still dependent, but the hardware prefetchers see the
//!   stream and run ahead, so this is the latency of a prefetched sequential walk; it is
//!   sensitive to memory-bandwidth contention.
//! - `rand`: elements `rand_stride` bytes apart (default 128, one per adjacent-line pair, so
//!   the spatial prefetcher that fetches a line's buddy never brings the next element) linked
//!   in one random cycle over the whole buffer: a true miss to memory per load.
//!
//! TLB: by default the buffer is on 2 MiB transparent huge pages (`pages=huge`), so the walk
//! misses the caches but rarely the TLB, and the figure is memory latency rather than page
//! walks; `huge_pages_pct` reports how much of the buffer the kernel really backed with huge
//! pages. `pages=normal` uses 4 KiB pages: then every random load also misses the TLB and the
//! figure includes a page walk (as a program with a large random working set sees it).
//!
//! Setup: one sequential touch of the buffer, then the ring (a Fisher-Yates shuffle of
//! element indices, then one pass of writes): well under a second for 64 MiB.

use std::time::Duration;

use isobench_common::format_size;
use serde::Deserialize;

use super::cm_common::{info, lower, per_op_median};
use crate::cachesize::{
    build_ring, cache_sizes, chase, chase_windowed, ChaseBuf, HostCaches, Order,
};
use crate::metric::{Metric, MetricSpec};
use crate::params::{ParamKind, ParamSpec, ParamValues};
use crate::{Class, Env, Probe, ProbeCtx, Unsupported};

/// The `mem-latency` probe.
pub struct MemLatency;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    mode: String,
    size: Option<u64>,
    seq_stride: u64,
    rand_stride: u64,
    pages: String,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "mode",
        help: "which walk(s) to time: sequential, random or both",
        kind: ParamKind::Choice {
            options: &["all", "seq", "rand"],
        },
        default: "all",
    },
    ParamSpec {
        name: "size",
        help: "buffer size (auto: max(8x measured LLC, 64M), at most 1G and a quarter of the \
               memory this process may use)",
        kind: ParamKind::Size {
            min: 1 << 20,
            max: 64 << 30,
        },
        default: "",
    },
    ParamSpec {
        name: "seq_stride",
        help: "bytes between elements of the sequential walk (multiple of 8)",
        kind: ParamKind::Int { min: 8, max: 4096 },
        default: "64",
    },
    ParamSpec {
        name: "rand_stride",
        help: "bytes between elements of the random walk (multiple of 8); 128 keeps the \
               adjacent-line prefetcher from fetching the next element",
        kind: ParamKind::Int { min: 8, max: 4096 },
        default: "128",
    },
    ParamSpec {
        name: "pages",
        help: "huge: 2 MiB transparent huge pages (memory latency without TLB misses); \
               normal: 4 KiB pages (random loads also pay a page walk)",
        kind: ParamKind::Choice {
            options: &["huge", "normal"],
        },
        default: "huge",
    },
];

const METRICS: &[MetricSpec] = &[
    lower("seq_ns", "ns"),
    lower("rand_ns", "ns"),
    info("buffer_bytes", "bytes"),
    info("llc_bytes", "bytes"),
    info("huge_pages_pct", "%"),
];

/// Smallest automatic buffer.
const MIN_AUTO: u64 = 64 << 20;
/// Largest automatic buffer.
const MAX_AUTO: u64 = 1 << 30;

impl Probe for MemLatency {
    fn name(&self) -> &'static str {
        "mem-latency"
    }
    fn help(&self) -> &'static str {
        "Memory load latency by dependent pointer chase over a buffer of max(8x measured LLC, \
         64M) (at most 1G and a quarter of the process's usable memory). seq_ns: elements \
         seq_stride (64) bytes apart in address order, the latency of a prefetched sequential \
         walk. rand_ns: elements rand_stride (128) bytes apart in one random cycle, a miss to \
         memory per load. Median ns per load over batches of >= 1 ms. pages=huge (default) \
         puts the buffer on 2 MiB pages so TLB misses stay out of the figure \
         (huge_pages_pct says how much was); pages=normal includes page walks. buffer_bytes \
         and llc_bytes record the buffer and the measured LLC it was sized from."
    }
    fn class(&self) -> Class {
        Class::Memory
    }
    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }
    fn metrics(&self) -> &'static [MetricSpec] {
        METRICS
    }
    fn windowed(&self) -> bool {
        true
    }
    fn supported(&self, env: &Env) -> Result<(), Unsupported> {
        if env.mem_usable < 32 << 20 {
            return Err(Unsupported::new(format!(
                "needs at least 32 MiB of memory for a buffer larger than the caches; {} MiB \
                 may be used here",
                env.mem_usable >> 20
            )));
        }
        Ok(())
    }
    /// `size`: max(8 x LLC, 64M), at most 1G and a quarter of the budget, at least 1M.
    fn fit_sizes(
        &self,
        params: &mut ParamValues,
        budget: u64,
        caches: &HostCaches,
    ) -> Option<String> {
        let o: Opts = params.decode(self.name()).ok()?;
        if o.size.is_some() {
            return None;
        }
        let size = (8 * caches.llc())
            .clamp(MIN_AUTO, MAX_AUTO)
            .min(budget / 4)
            .max(1 << 20);
        params.set("size", size.into());
        Some(format!("buffer {}", format_size(size)))
    }
    /// The buffer.
    fn memory_need(&self, params: &ParamValues, _llc: u64) -> u64 {
        params
            .decode::<Opts>(self.name())
            .map_or(0, |o| o.size.unwrap_or(MIN_AUTO))
    }
    fn run(&self, ctx: &ProbeCtx, params: &ParamValues) -> anyhow::Result<Vec<Metric>> {
        let o: Opts = params.decode(self.name())?;
        for (name, v) in [("seq_stride", o.seq_stride), ("rand_stride", o.rand_stride)] {
            anyhow::ensure!(
                v % 8 == 0,
                "mem-latency: `{name}={v}` must be a multiple of 8 (an element holds a pointer)"
            );
        }
        ctx.pin_self()?;
        let llc = cache_sizes(&ctx.env).llc;
        let size = match o.size {
            Some(s) => {
                anyhow::ensure!(
                    s <= ctx.env.mem_usable / 2,
                    "mem-latency: `size={}` is more than half of the {} this process may use; \
                     lower it or leave it out (auto)",
                    format_size(s),
                    format_size(ctx.env.mem_usable)
                );
                s
            }
            None => auto_size(llc, ctx.env.mem_usable),
        };
        let size = size as usize;
        let mut buf = ChaseBuf::new(size, o.pages == "huge")?;
        buf.touch();
        let huge_pct = buf.huge_fraction().unwrap_or(0.0) * 100.0;
        let walks: Vec<(usize, Order, &MetricSpec)> = [
            ("seq", o.seq_stride as usize, Order::Sequential, &METRICS[0]),
            (
                "rand",
                o.rand_stride as usize,
                Order::Random(0x3E3),
                &METRICS[1],
            ),
        ]
        .into_iter()
        .filter(|(m, ..)| o.mode == "all" || o.mode == *m)
        .map(|(_, stride, order, spec)| (stride, order, spec))
        .collect();
        let budget = ctx.budget / walks.len() as u32;
        let mut out = Vec::new();
        for (stride, order, spec) in walks {
            let n = size / stride;
            anyhow::ensure!(n >= 2, "mem-latency: buffer too small for stride {stride}");
            // SAFETY: n * stride <= size <= buf.len(); the ring lives in buf, which outlives
            // every chase below.
            let mut p = unsafe { build_ring(&mut buf, n, stride, order) };
            // Warm-up: enough loads to flush the caches of anything but this walk.
            // SAFETY: as above.
            p = unsafe { chase(p, (n as u64).min(1 << 16)) };
            let m = match ctx.window {
                Some(w) => {
                    // SAFETY: as above.
                    let (ns, series) = unsafe { chase_windowed(ctx, &mut p, budget, w) };
                    spec.value(ns).with_series(series)
                }
                None => spec.value(per_op_median(
                    ctx,
                    budget,
                    Duration::from_millis(1),
                    // SAFETY: as above.
                    |steps| p = unsafe { chase(p, steps) },
                )),
            };
            std::hint::black_box(p);
            out.push(m);
        }
        out.push(METRICS[2].value(size as f64));
        out.push(METRICS[3].value(llc as f64));
        out.push(METRICS[4].value(huge_pct));
        Ok(out)
    }
}

/// Automatic buffer size: max(8x LLC, 64 MiB), at most 1 GiB and a quarter of `usable`,
/// rounded down to 2 MiB.
pub(crate) fn auto_size(llc: u64, usable: u64) -> u64 {
    let want = (8 * llc).clamp(MIN_AUTO, MAX_AUTO);
    let room = (usable / 4).max(2 << 20);
    want.min(room) & !((2 << 20) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_size_is_bounded_by_llc_and_memory() {
        assert_eq!(auto_size(4 << 20, 24 << 30), 64 << 20);
        assert_eq!(auto_size(32 << 20, 24 << 30), 256 << 20);
        assert_eq!(auto_size(480 << 20, 24 << 30), 1 << 30);
        assert_eq!(auto_size(32 << 20, 200 << 20), 50 << 20);
    }
}
