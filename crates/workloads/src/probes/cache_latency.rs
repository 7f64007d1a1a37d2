//! `cache-latency`: load-to-use latency of each cache level.
//!
//! For each level a ring of cache-line-spaced elements (64 bytes apart) is linked in a random
//! single cycle and followed with dependent loads, each address being the value of the
//! previous load, so neither prefetchers nor out-of-order execution can overlap them.
//!
//! Ring sizes must be the same in every process on the same machine, or the figure follows
//! the ring rather than the cache: on a VM the LLC edge the latency-vs-size sweep
//! ([`crate::cachesize`]) finds moves with the other tenants' use of the host's L3 (1.4 to
//! 17 MiB from one process to the next on the Zen 5 VM, and sysfs' 32 MiB when a sweep
//! found no LLC), and a ring of half that LLC measured 15 ns in one process and memory
//! latency (130+ ns) in the next. L1 and L2 come out of the sweep within a few tens of
//! percent, so the rings are sized from them, with the sysfs size used when the sweep
//! confirms it (within a factor of two):
//! - L1: half of L1;
//! - L2: a quarter of L2 (at least twice L1, so it misses L1): a ring of half of L2 measured
//!   3.8 to 5.7 ns from process to process (conflict misses that depend on which physical
//!   pages back it), a quarter 3.8 to 4.3 ns;
//! - LLC: 4x L2 (so at most about a quarter of the loads hit L2), lowered to a power of two
//!   under 3/4 of the measured LLC when the sweep found the LLC that small (never below 2x
//!   L2).
//!
//! On the Zen 5 VM that is 16 KiB, 128 KiB and 2 MiB, the last in the middle of the 1-4 MiB
//! stretch where the LLC latency is flat (about 15 ns).
//!
//! Rings live on 2 MiB huge pages by default so the figure is the cache's, not the TLB's
//! (`pages=normal` keeps 4 KiB pages; `huge_pages_pct` records the share the kernel really
//! backed with huge pages). Each ring is warmed by two full passes, then timed in batches of
//! at least 0.5 ms over the budget; the result is the median ns per load. With a window
//! ([`ProbeCtx::window`]) the batches are shorter (a twentieth of a window, 20-500 us) and
//! the metric also carries the median ns per load of each window's batches; with `level=all` each
//! level's series covers its third of the budget, so pick one level for the on/off design.

use std::time::Duration;

use isobench_common::format_size;
use serde::Deserialize;

use super::cm_common::{info, lower, per_op_median};
use crate::cachesize::{
    build_ring, chase, chase_windowed, CacheSizes, ChaseBuf, HostCaches, Order, LINE,
};
use crate::metric::{Metric, MetricSpec, Window};
use crate::params::{ParamKind, ParamSpec, ParamValues};
use crate::{Class, Env, Probe, ProbeCtx, Unsupported};

/// The `cache-latency` probe.
pub struct CacheLatency;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    level: String,
    l1_size: Option<u64>,
    l2_size: Option<u64>,
    llc_size: Option<u64>,
    pages: String,
}

const SIZE: ParamKind = ParamKind::Size {
    min: 4 << 10,
    max: 1 << 30,
};

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "level",
        help: "which level(s) to measure",
        kind: ParamKind::Choice {
            options: &["all", "l1", "l2", "llc"],
        },
        default: "all",
    },
    ParamSpec {
        name: "l1_size",
        help: "ring size for L1 (auto: half of L1)",
        kind: SIZE,
        default: "",
    },
    ParamSpec {
        name: "l2_size",
        help: "ring size for L2 (auto: a quarter of L2, at least twice L1)",
        kind: SIZE,
        default: "",
    },
    ParamSpec {
        name: "llc_size",
        help: "ring size for the LLC (auto: 4x L2, lowered to a power of two under 3/4 of the \
               measured LLC when that is smaller, at least 2x L2)",
        kind: SIZE,
        default: "",
    },
    ParamSpec {
        name: "pages",
        help: "huge: rings on 2 MiB transparent huge pages (no TLB misses); normal: 4 KiB pages",
        kind: ParamKind::Choice {
            options: &["huge", "normal"],
        },
        default: "huge",
    },
];

const METRICS: &[MetricSpec] = &[
    lower("l1_ns", "ns"),
    lower("l2_ns", "ns"),
    lower("llc_ns", "ns"),
    info("l1_ring_bytes", "bytes"),
    info("l2_ring_bytes", "bytes"),
    info("llc_ring_bytes", "bytes"),
    info("huge_pages_pct", "%"),
];

impl Probe for CacheLatency {
    fn name(&self) -> &'static str {
        "cache-latency"
    }
    fn help(&self) -> &'static str {
        "Load-to-use latency of L1, L2 and the LLC: a dependent pointer chase over a ring of \
         64-byte-spaced elements in random order. Ring sizes follow the measured L1 and L2 \
         (sysfs when the sweep confirms it), not the measured LLC edge, which other tenants \
         move: L1 ring = L1/2; L2 ring = L2/4 (>= 2x L1); LLC ring = 4x L2, lowered to a \
         power of two under 3/4 of the measured LLC when that is smaller (>= 2x L2). l1_ns, \
         l2_ns, llc_ns: median ns per load over batches of >= 0.5 ms after two warm-up \
         passes; with --window, also the median ns per load of each window. *_ring_bytes \
         record the ring sizes used and huge_pages_pct the share of the rings on 2 MiB pages \
         (pages=huge, the default, keeps TLB misses out of the figure)."
    }
    fn class(&self) -> Class {
        Class::Cache
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
        if env.mem_usable < 64 << 20 {
            return Err(Unsupported::new(format!(
                "needs 64 MiB of memory to size and build its rings; {} MiB may be used here",
                env.mem_usable >> 20
            )));
        }
        Ok(())
    }
    /// Twice the usable LLC: a bound on its three rings, the largest of which stays under
    /// the LLC.
    fn memory_need(&self, _params: &ParamValues, llc: u64) -> u64 {
        2 * llc
    }
    /// The three ring sizes not given, from the controller's caches: a sweep in each
    /// tenant's process could differ from one process to the next (a busy neighbour shrinks
    /// what it finds) and, on an emulated CPU, take longer than the probe's deadline.
    fn fit_sizes(
        &self,
        params: &mut ParamValues,
        _budget: u64,
        caches: &HostCaches,
    ) -> Option<String> {
        let o: Opts = params.decode(self.name()).ok()?;
        let given = [o.l1_size, o.l2_size, o.llc_size];
        if given.iter().all(Option::is_some) {
            return None;
        }
        let auto = ring_sizes(caches.measured, caches.sysfs);
        let mut chosen = Vec::new();
        for (l, name) in ["l1_size", "l2_size", "llc_size"].into_iter().enumerate() {
            if given[l].is_none() {
                params.set(name, auto[l].into());
                chosen.push(format!("{name} {}", format_size(auto[l])));
            }
        }
        Some(format!(
            "rings {} from this host's cache sweep",
            chosen.join(", ")
        ))
    }
    fn run(&self, ctx: &ProbeCtx, params: &ParamValues) -> anyhow::Result<Vec<Metric>> {
        let o: Opts = params.decode(self.name())?;
        ctx.pin_self()?;
        let levels: Vec<usize> = match o.level.as_str() {
            "l1" => vec![0],
            "l2" => vec![1],
            "llc" => vec![2],
            _ => vec![0, 1, 2],
        };
        let needs_sizes = o.l1_size.is_none() || o.l2_size.is_none() || o.llc_size.is_none();
        let auto = if needs_sizes {
            let caches = HostCaches::detect(&ctx.env);
            ring_sizes(caches.measured, caches.sysfs)
        } else {
            [0; 3]
        };
        let sizes = [
            o.l1_size.unwrap_or(auto[0]),
            o.l2_size.unwrap_or(auto[1]),
            o.llc_size.unwrap_or(auto[2]),
        ];
        let limit = ctx.env.mem_usable / 4;
        for &l in &levels {
            anyhow::ensure!(
                sizes[l] <= limit,
                "cache-latency: {}_size={} is more than a quarter of the {} MiB this process \
                 may use; lower it",
                ["l1", "l2", "llc"][l],
                format_size(sizes[l]),
                ctx.env.mem_usable >> 20
            );
        }
        let budget = ctx.budget / levels.len() as u32;
        let mut out = Vec::new();
        let mut huge_min: f64 = 100.0;
        for &l in &levels {
            let r = ring_latency(ctx, sizes[l], o.pages == "huge", budget, l as u64)?;
            huge_min = huge_min.min(r.huge_pct);
            let m = METRICS[l].value(r.ns);
            out.push(match r.series {
                Some(series) => m.with_series(series),
                None => m,
            });
        }
        for &l in &levels {
            out.push(METRICS[3 + l].value(sizes[l] as f64));
        }
        out.push(METRICS[6].value(huge_min));
        Ok(out)
    }
}

/// Ring sizes for L1, L2 and LLC from the measured cache sizes and the sysfs ones (see the
/// module docs): every process on the same machine must get the same rings, so the sizes
/// follow what is stable (L1 and L2, which the sweep finds within a few percent, checked
/// against sysfs) rather than the measured LLC edge, which other tenants move.
pub(crate) fn ring_sizes(measured: CacheSizes, sysfs: CacheSizes) -> [u64; 3] {
    let line = LINE as u64;
    let l1 = confirmed(measured.l1, sysfs.l1);
    let l2 = confirmed(measured.l2, sysfs.l2).max(2 * l1);
    let l1_ring = (l1 / 2).max(4 << 10);
    let l2_ring = (l2 / 4).max(2 * l1).max(l1_ring);
    // The LLC ring: 4x L2, so at most about a quarter of its loads can hit L2, lowered to a
    // power of two under 3/4 of the measured LLC when the sweep found a smaller one (never
    // below 2x L2). The sysfs LLC is not used: on a VM it can be far larger than the share
    // this guest can use.
    let mut llc_ring = 4 * l2;
    if let Some(llc) = measured.llc_measured {
        let room = pow2_floor(llc * 3 / 4).max(2 * l2);
        llc_ring = llc_ring.min(room);
    }
    [l1_ring, l2_ring, llc_ring.max(l2_ring)].map(|b| b.next_multiple_of(line))
}

/// The sysfs size when the sweep confirms it (measured within a factor of two: the sweep's
/// knee wanders by tens of percent from run to run, sysfs does not), else the measured one.
fn confirmed(measured: u64, sysfs: u64) -> u64 {
    if sysfs > 0 && measured >= sysfs / 2 && measured <= sysfs * 2 {
        sysfs
    } else {
        measured
    }
}

/// Largest power of two not above `x` (1 for 0).
fn pow2_floor(x: u64) -> u64 {
    if x == 0 {
        1
    } else {
        1 << (63 - x.leading_zeros())
    }
}

/// What [`ring_latency`] measured.
struct RingLatency {
    /// Median ns per dependent load over the timed batches.
    ns: f64,
    /// Share of the ring on 2 MiB pages, %.
    huge_pct: f64,
    /// Mean ns per load in each window, when the context asks for windows.
    series: Option<Vec<Window>>,
}

/// Median ns per dependent load on a random ring of `bytes`, the huge-page share, and the
/// window series when `ctx.window` is set.
fn ring_latency(
    ctx: &ProbeCtx,
    bytes: u64,
    huge: bool,
    budget: Duration,
    seed: u64,
) -> anyhow::Result<RingLatency> {
    let n = (bytes as usize / LINE).max(2);
    let mut buf = ChaseBuf::new(n * LINE, huge)?;
    buf.touch();
    // SAFETY: n * LINE <= buf.len(); the ring lives in buf, which outlives every chase below.
    let mut p = unsafe { build_ring(&mut buf, n, LINE, Order::Random(0xCAC4E + seed)) };
    let huge_pct = buf.huge_fraction().unwrap_or(0.0) * 100.0;
    // SAFETY: as above.
    p = unsafe { chase(p, (2 * n as u64).min(1 << 24)) };
    let (ns, series) = match ctx.window {
        // SAFETY: as above.
        Some(w) => {
            let (ns, series) = unsafe { chase_windowed(ctx, &mut p, budget, w) };
            (ns, Some(series))
        }
        None => {
            let ns = per_op_median(
                ctx,
                budget,
                Duration::from_micros(500),
                // SAFETY: as above.
                |steps| p = unsafe { chase(p, steps) },
            );
            (ns, None)
        }
    };
    std::hint::black_box(p);
    Ok(RingLatency {
        ns,
        huge_pct,
        series,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(l1: u64, l2: u64, llc: Option<u64>) -> CacheSizes {
        CacheSizes {
            l1,
            l2,
            llc: llc.unwrap_or(32 << 20),
            llc_sysfs: Some(32 << 20),
            llc_measured: llc,
        }
    }

    #[test]
    fn rings_fit_their_level_and_miss_the_one_below() {
        let sysfs = sizes(48 << 10, 1536 << 10, None);
        let [l1, l2, llc] = ring_sizes(sizes(50 << 10, 1400 << 10, Some(20 << 20)), sysfs);
        assert_eq!([l1, l2, llc], [24 << 10, 384 << 10, 6 << 20]);
        // A small measured LLC lowers the LLC ring, never below 2x L2.
        let [_, _, llc] = ring_sizes(sizes(50 << 10, 1400 << 10, Some(5 << 20)), sysfs);
        assert_eq!(llc, 3 << 20);
        let big = sizes(32 << 10, 1 << 20, Some(32 << 20));
        assert_eq!(ring_sizes(big, big), [16 << 10, 256 << 10, 4 << 20]);
    }

    /// Regression: the LLC ring was half the LLC measured by each process's sweep, which
    /// wandered from 1.4 to 17 MiB (and fell back to sysfs' 32 MiB when the sweep found no
    /// LLC), so llc_ns varied 84% across processes. The sweeps seen on the Zen 5 VM (sysfs:
    /// L1 32K, L2 512K, L3 32M) must all give the same rings.
    #[test]
    fn rings_do_not_follow_the_sweeps_noise() {
        let sysfs = sizes(32 << 10, 512 << 10, None);
        let sweeps = [
            (34, 467, Some(4775)),
            (34, 529, Some(4950)),
            (34, 461, Some(7045)),
            (34, 400, Some(8557)),
            (34, 325, Some(6038)),
            (34, 590, Some(3241)),
            (34, 339, Some(3379)),
            (34, 512, None),
        ];
        for (l1, l2, llc) in sweeps {
            let m = sizes(l1 << 10, l2 << 10, llc.map(|k: u64| k << 10));
            assert_eq!(
                ring_sizes(m, sysfs),
                [16 << 10, 128 << 10, 2 << 20],
                "{l1}K {l2}K {llc:?}"
            );
        }
    }

    #[test]
    fn sysfs_counts_only_when_the_sweep_confirms_it() {
        assert_eq!(confirmed(400 << 10, 512 << 10), 512 << 10);
        assert_eq!(confirmed(5 << 20, 512 << 10), 5 << 20);
        assert_eq!(confirmed(100 << 10, 512 << 10), 100 << 10);
        assert_eq!(pow2_floor(3 << 20), 2 << 20);
        assert_eq!(pow2_floor(0), 1);
    }
}
