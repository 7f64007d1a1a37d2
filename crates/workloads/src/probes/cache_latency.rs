//! `cache-latency`: load-to-use latency of each cache level.
//!
//! For each level a ring of cache-line-spaced elements (64 bytes apart) is linked in a random
//! single cycle and followed with dependent loads, each address being the value of the
//! previous load, so neither prefetchers nor out-of-order execution can overlap them. The
//! ring is sized to fit the level with room to spare, from the *measured* cache sizes
//! ([`crate::cachesize`]), not from sysfs:
//! - L1: half the usable L1;
//! - L2: half the usable L2 (at least twice L1, so it misses L1);
//! - LLC: half the usable LLC, but at least twice L2 when that still leaves a quarter of the
//!   LLC free (so it misses L2 and hits the LLC even where the LLC is barely larger than L2).
//!
//! Rings live on 2 MiB huge pages by default so the figure is the cache's, not the TLB's
//! (`pages=normal` keeps 4 KiB pages). Each ring is warmed by two full passes, then timed in
//! batches of at least 0.5 ms over the budget; the result is the median ns per load.

use std::time::Duration;

use serde::Deserialize;

use super::cm_common::{info, lower, per_op_median};
use crate::cachesize::{build_ring, cache_sizes, chase, chase_windowed, ChaseBuf, Order, LINE};
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
        help: "ring size for L1 (auto: half the measured L1)",
        kind: SIZE,
        default: "",
    },
    ParamSpec {
        name: "l2_size",
        help: "ring size for L2 (auto: half the measured L2, at least twice L1)",
        kind: SIZE,
        default: "",
    },
    ParamSpec {
        name: "llc_size",
        help: "ring size for the LLC (auto: half the measured LLC, at least twice L2 when that \
               leaves a quarter of the LLC free)",
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
         64-byte-spaced elements in random order, sized from the measured (not sysfs) cache \
         sizes: L1 ring = L1/2; L2 ring = L2/2 (>= 2x L1); LLC ring = LLC/2, raised to 2x L2 \
         when that still leaves a quarter of the LLC free. l1_ns, l2_ns, llc_ns: median ns per \
         load over batches of >= 0.5 ms after two warm-up passes. *_ring_bytes record the ring \
         sizes used and huge_pages_pct the share of the rings on 2 MiB pages (pages=huge, the \
         default, keeps TLB misses out of the figure)."
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
            ring_sizes(cache_sizes(&ctx.env))
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
                crate::params::fmt_size(sizes[l]),
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

/// Ring sizes for L1, L2 and LLC from usable cache sizes (see the module docs).
pub(crate) fn ring_sizes(s: crate::cachesize::CacheSizes) -> [u64; 3] {
    let line = LINE as u64;
    let l1 = (s.l1 / 2).max(4 << 10);
    let l2 = (s.l2 / 2).max((2 * s.l1).min(s.l2)).max(l1);
    let llc = (s.llc / 2).max((2 * s.l2).min(s.llc * 3 / 4)).max(l2);
    [l1, l2, llc].map(|b| b.next_multiple_of(line))
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
    use crate::cachesize::CacheSizes;

    #[test]
    fn rings_fit_their_level_and_miss_the_one_below() {
        let s = CacheSizes {
            l1: 48 << 10,
            l2: 1536 << 10,
            llc: 5 << 20,
            llc_sysfs: Some(480 << 20),
            llc_measured: Some(5 << 20),
        };
        let [l1, l2, llc] = ring_sizes(s);
        assert_eq!(l1, 24 << 10);
        assert_eq!(l2, 768 << 10);
        assert!(llc > s.l2 && llc < s.llc, "{llc}");
        let big = CacheSizes {
            l1: 32 << 10,
            l2: 1 << 20,
            llc: 32 << 20,
            llc_sysfs: Some(32 << 20),
            llc_measured: Some(32 << 20),
        };
        assert_eq!(ring_sizes(big), [16 << 10, 512 << 10, 16 << 20]);
    }
}
