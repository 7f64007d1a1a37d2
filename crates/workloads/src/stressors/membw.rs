//! `membw`: repeated block copy between two buffers (the memory-bandwidth interference
//! program of VITS, section 4.3: "repeatedly copy data from one memory block to another").
//!
//! Each thread owns a source and a destination block (default 64 MiB each, as the RAM
//! bandwidth test of Rzecki et al.), both far larger than the last-level cache, so every copy
//! streams from and to DRAM. Both blocks are written before the start gate, so page faults
//! are never part of the loop. A block is copied in 1 MiB slices (a `memcpy` each) so the
//! stop flag and the duty cycle are checked often; one operation is one whole block copied.

use serde::Deserialize;

use super::mapping::Mapping;
use super::pool::{cpu_share, run_pool, Done};
use crate::cachesize::cache_sizes;
use crate::params::{fmt_size, ParamKind, ParamSpec, ParamValues};
use crate::util::SplitMix64;
use crate::{Class, Env, StressCtx, StressReport, Stressor, Unsupported};

/// The `membw` stressor.
pub struct Membw;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    block: u64,
    threads: Option<u32>,
    duty: Option<u32>,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "block",
        help: "size of each of the two buffers a thread copies between (reduced to fit a \
               quarter of the memory the tenant may use)",
        kind: ParamKind::Size {
            min: 64 << 10,
            max: 4 << 30,
        },
        default: "64M",
    },
    ParamSpec {
        name: "threads",
        help: "copying threads (auto: ceil(cpus x intensity / 100))",
        kind: ParamKind::Int { min: 1, max: 1024 },
        default: "",
    },
    ParamSpec {
        name: "duty",
        help: "percent of each 20 ms period a thread copies (auto: from intensity)",
        kind: ParamKind::Int { min: 1, max: 100 },
        default: "",
    },
];

/// Bytes copied between two checks of the stop flag.
const SLICE: usize = 1 << 20;

struct Copier {
    src: Mapping,
    dst: Mapping,
    /// Offset of the next slice within the block.
    at: usize,
}

impl Copier {
    fn new(block: usize, seed: u64) -> anyhow::Result<Self> {
        let mut src = Mapping::new_huge(block)?;
        let mut dst = Mapping::new_huge(block)?;
        let mut rng = SplitMix64(seed);
        for chunk in src.as_mut_slice().chunks_mut(8) {
            let w = rng.next_u64().to_ne_bytes();
            chunk.copy_from_slice(&w[..chunk.len()]);
        }
        dst.as_mut_slice().fill(0x5a);
        Ok(Copier { src, dst, at: 0 })
    }

    /// Copies the next slice; returns (blocks completed, bytes copied).
    fn step(&mut self) -> (u64, u64) {
        let len = self.src.len();
        let end = (self.at + SLICE).min(len);
        let n = end - self.at;
        let at = self.at;
        self.dst.as_mut_slice()[at..end].copy_from_slice(&self.src.as_slice()[at..end]);
        std::hint::black_box(self.dst.as_ptr());
        if end == len {
            self.at = 0;
            (1, n as u64)
        } else {
            self.at = end;
            (0, n as u64)
        }
    }
}

impl Stressor for Membw {
    fn name(&self) -> &'static str {
        "membw"
    }
    fn help(&self) -> &'static str {
        "Repeated block copy between two buffers per thread (default 64 MiB each, far larger \
         than the LLC), memory-bandwidth competition. One operation is one whole block \
         copied; bytes counts every byte copied."
    }
    fn class(&self) -> Class {
        Class::Memory
    }
    fn intensity_knob(&self) -> &'static str {
        "share of the allowed CPUs spent copying: ceil(cpus x intensity / 100) threads, each \
         busy for its part of every 20 ms period (2 CPUs: 50 = one copier, 100 = two); the \
         block size does not change with intensity; 0 = idle"
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
        if shape.workers == 0 {
            return Ok(super::pool::idle_report(ctx, "copy of one block"));
        }
        let workers = shape
            .workers
            .min(ctx.caps.max_tasks.unwrap_or(u32::MAX))
            .max(1) as u64;
        // Two blocks per thread within a quarter of the usable memory (and the caps).
        let mut budget = ctx.env.mem_usable / 4;
        if let Some(b) = ctx.caps.max_bytes {
            budget = budget.min(b);
        }
        let page = ctx.env.page_size.max(4096);
        let fit = (budget / (2 * workers)) / page * page;
        let block = o.block.min(fit).max(page);
        let mut notes = vec![
            format!("block={}", fmt_size(block)),
            format!("duty={:.0}%", shape.duty * 100.0),
        ];
        if block < o.block {
            notes.push(format!(
                "block reduced from {} to fit the memory available",
                fmt_size(o.block)
            ));
        }
        let llc = cache_sizes(&ctx.env).llc;
        if block < 2 * llc {
            notes.push(format!(
                "block {} is under twice the LLC ({}): copies partly hit in cache",
                fmt_size(block),
                fmt_size(llc)
            ));
        }
        let out = run_pool(
            ctx,
            self.name(),
            shape,
            |i| Copier::new(block as usize, i as u64 + 1),
            |c| {
                let (blocks, bytes) = c.step();
                Ok(Done::new(blocks, bytes))
            },
        )?;
        let pressure = vec![out.bytes_per_sec(), out.cpu_threads()];
        let mut r = out.report(format!("copy of one {} block", fmt_size(block)), notes);
        r.pressure = pressure;
        Ok(r)
    }
}
