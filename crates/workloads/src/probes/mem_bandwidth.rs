//! `mem-bandwidth`: memory bandwidth of block copy, read and write (RAMspeed/STREAM-like).
//!
//! Each thread owns a source and a destination block of `size` bytes (default 64 MiB, the
//! block size of RAMspeed in the Hyper-V study and of `mbw`'s default runs), faulted in and
//! filled before timing. One operation is one pass over the block:
//! - copy: `memcpy(dst, src, size)` (the C library's memcpy, as `mbw`'s memcpy test does);
//! - read: load every 64-bit word of `src` and sum them (vectorised, eight accumulators);
//! - write: store a 64-bit pattern to every word of `dst` with ordinary (cached) stores.
//!
//! Every figure counts the bytes *of the block* once per operation: `copy_gbps` is
//! `size / seconds per memcpy / 1e9`, although memcpy moves 2 x size bytes across the bus
//! (STREAM would report twice that). This is the quantity `mbw` reports for its memcpy test,
//! in MiB/s: `copy_gbps = mbw_MiB_per_s * 1048576 / 1e9`. Beware of mbw 1.2.2 (Debian 12):
//! its labels are swapped, the row printed as `MEMCPY` (`-t0`) runs the 8-byte assignment
//! loop and the row printed as `DUMB` (`-t1`) runs memcpy, so compare with `mbw -t1` there
//! (mbw 1.4 and later fixed this). Two smaller differences remain: blocks start on a page
//! boundary here, while mbw's calloc'd blocks start 16 bytes into a page (`offset=16`
//! reproduces that layout); and the figure is the median of wall-clock windows, while mbw's
//! is total bytes over total time (they agree on a quiet machine). With `threads` > 1 the
//! threads copy their own blocks at once and the figures are totals.

use std::time::Duration;

use isobench_common::format_size;
use serde::Deserialize;

use super::cm_common::{chunk_size, info, measure_rate, rate, worker_cpus, Chunk};
use crate::cachesize::HostCaches;
use crate::metric::{Metric, MetricSpec};
use crate::params::{ParamKind, ParamSpec, ParamValues};
use crate::util::AlignedBuf;
use crate::{Class, Env, Probe, ProbeCtx, Unsupported};

/// The `mem-bandwidth` probe.
pub struct MemBandwidth;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    size: Option<u64>,
    op: String,
    threads: u32,
    offset: u64,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "size",
        help: "block size per thread (auto: 64M, halved until 2 blocks per thread fit in a \
               quarter of the memory this process may use)",
        kind: ParamKind::Size {
            min: 4 << 10,
            max: 16 << 30,
        },
        default: "",
    },
    ParamSpec {
        name: "op",
        help: "which operation(s) to time",
        kind: ParamKind::Choice {
            options: &["all", "copy", "read", "write"],
        },
        default: "all",
    },
    ParamSpec {
        name: "threads",
        help: "threads working on their own blocks at once; figures are totals",
        kind: ParamKind::Int { min: 1, max: 256 },
        default: "1",
    },
    ParamSpec {
        name: "offset",
        help: "bytes from a page boundary to the start of each block (multiple of 8); 16 \
               reproduces the layout of mbw's calloc'd blocks",
        kind: ParamKind::Int { min: 0, max: 4088 },
        default: "0",
    },
];

const METRICS: &[MetricSpec] = &[
    rate("copy_gbps", "GB/s"),
    rate("read_gbps", "GB/s"),
    rate("write_gbps", "GB/s"),
    info("block_bytes", "bytes"),
];

/// Default block size.
const DEFAULT_BLOCK: u64 = 64 << 20;

impl Probe for MemBandwidth {
    fn name(&self) -> &'static str {
        "mem-bandwidth"
    }
    fn help(&self) -> &'static str {
        "Memory bandwidth over blocks of `size` (default 64 MiB) per thread. copy_gbps: bytes \
         of the block copied per second by the C library memcpy, / 1e9 (the block counted \
         once, as mbw's memcpy test reports it: copy_gbps = mbw MiB/s x 1.048576e-3; mbw \
         1.2.2 prints that test as DUMB, -t1). read_gbps: bytes of the block loaded and \
         summed per second / 1e9. write_gbps: bytes of the \
         block stored (ordinary stores) per second / 1e9. Totals over `threads`. Blocks \
         start on a page boundary; offset=16 reproduces mbw's calloc'd layout. Rate = median \
         of ~20 wall-clock windows (time spent descheduled counts) after a warm-up tenth of \
         the budget. block_bytes records the block size used. With a window length, each \
         op's rate also comes as a series of wall-clock windows over that op's share of the \
         budget (pick one op for an on/off run, so its series covers the whole run)."
    }
    fn class(&self) -> Class {
        Class::Memory
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
    fn supported(&self, env: &Env) -> Result<(), Unsupported> {
        if env.mem_usable < 16 << 20 {
            return Err(Unsupported::new(format!(
                "needs at least 16 MiB of memory; {} MiB may be used here",
                env.mem_usable >> 20
            )));
        }
        Ok(())
    }
    /// `size`: 64M, halved (down to 64K) until two blocks per thread fit in a quarter of
    /// the budget.
    fn fit_sizes(
        &self,
        params: &mut ParamValues,
        budget: u64,
        _caches: &HostCaches,
    ) -> Option<String> {
        let o: Opts = params.decode(self.name()).ok()?;
        if o.size.is_some() {
            return None;
        }
        let threads = u64::from(o.threads.max(1));
        let mut block = DEFAULT_BLOCK;
        while block > 64 << 10 && 2 * threads * block > budget / 4 {
            block /= 2;
        }
        params.set("size", block.into());
        Some(format!("block size {}", format_size(block)))
    }
    /// Two blocks per thread.
    fn memory_need(&self, params: &ParamValues, _llc: u64) -> u64 {
        params.decode::<Opts>(self.name()).map_or(0, |o| {
            2 * u64::from(o.threads.max(1)) * o.size.unwrap_or(DEFAULT_BLOCK)
        })
    }
    fn run(&self, ctx: &ProbeCtx, params: &ParamValues) -> anyhow::Result<Vec<Metric>> {
        let o: Opts = params.decode(self.name())?;
        let threads = o.threads.max(1) as usize;
        let room = ctx.env.mem_usable / 4;
        let size = match o.size {
            Some(s) => {
                anyhow::ensure!(
                    2 * s * threads as u64 <= ctx.env.mem_usable / 2,
                    "mem-bandwidth: 2 blocks of size={} for each of {threads} thread(s) need \
                     more than half of the {} this process may use; lower size or threads",
                    format_size(s),
                    format_size(ctx.env.mem_usable)
                );
                s
            }
            None => {
                let mut s = DEFAULT_BLOCK;
                while 2 * s * threads as u64 > room && s > 1 << 20 {
                    s /= 2;
                }
                anyhow::ensure!(
                    2 * s * threads as u64 <= room,
                    "mem-bandwidth: {threads} thread(s) with 1 MiB blocks do not fit in a \
                     quarter of the {} this process may use; lower threads",
                    format_size(ctx.env.mem_usable)
                );
                s
            }
        };
        let size = (size as usize).next_multiple_of(64);
        let ops: Vec<usize> = match o.op.as_str() {
            "copy" => vec![0],
            "read" => vec![1],
            "write" => vec![2],
            _ => vec![0, 1, 2],
        };

        anyhow::ensure!(
            o.offset % 8 == 0,
            "mem-bandwidth: `offset={}` must be a multiple of 8",
            o.offset
        );
        // Allocate and fault in every block before timing anything.
        let mut blocks: Vec<(Block, Block)> = (0..threads)
            .map(|i| {
                let mut src = Block::new(size, o.offset as usize);
                let mut dst = Block::new(size, o.offset as usize);
                fill(src.words_mut(), 0x0123_4567_89AB_CDEF ^ i as u64);
                fill(dst.words_mut(), 0);
                (src, dst)
            })
            .collect();

        let cpus = worker_cpus(ctx, threads);
        let budget = ctx.budget / ops.len() as u32;
        let mut out = Vec::new();
        for &op in &ops {
            // Blocks per chunk: enough for 1 ms (one 64 MiB block is several ms).
            let (s0, d0) = &mut blocks[0];
            let per_chunk = chunk_size(Duration::from_millis(1), |n| {
                for _ in 0..n {
                    block_op(op, s0, d0, n);
                }
            });
            let workers = blocks
                .iter_mut()
                .zip(&cpus)
                .map(|((src, dst), &cpu)| {
                    let mut pass = 0u64;
                    let chunk: Chunk = Box::new(move || {
                        for _ in 0..per_chunk {
                            pass += 1;
                            block_op(op, src, dst, pass);
                        }
                        (per_chunk as usize * size) as f64
                    });
                    (cpu, chunk)
                })
                .collect();
            let r = measure_rate(ctx, budget, workers)?;
            out.push(r.metric(&METRICS[op], 1e-9));
        }
        out.push(METRICS[3].value(size as f64));
        Ok(out)
    }
}

/// A block of `len` bytes starting `offset` bytes after a page boundary, faulted in.
struct Block {
    buf: AlignedBuf,
    offset: usize,
    len: usize,
}

impl Block {
    fn new(len: usize, offset: usize) -> Block {
        Block {
            buf: AlignedBuf::new(len + offset, 4096),
            offset,
            len,
        }
    }

    fn bytes(&self) -> &[u8] {
        &self.buf.as_slice()[self.offset..self.offset + self.len]
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        let (o, l) = (self.offset, self.len);
        &mut self.buf.as_mut_slice()[o..o + l]
    }

    fn words(&self) -> &[u64] {
        let b = self.bytes();
        // SAFETY: the block starts on an 8-byte boundary (page-aligned buffer, offset a
        // multiple of 8) and any bit pattern is a valid u64.
        unsafe { std::slice::from_raw_parts(b.as_ptr().cast(), b.len() / 8) }
    }

    fn words_mut(&mut self) -> &mut [u64] {
        let b = self.bytes_mut();
        // SAFETY: as in `words`, and the borrow is unique.
        unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr().cast(), b.len() / 8) }
    }
}

/// One pass of operation `op` (0 copy, 1 read, 2 write) over a block.
fn block_op(op: usize, src: &mut Block, dst: &mut Block, pass: u64) {
    match op {
        0 => {
            dst.bytes_mut().copy_from_slice(src.bytes());
            std::hint::black_box(dst.bytes().as_ptr());
        }
        1 => {
            std::hint::black_box(read_sum(src.words()));
        }
        _ => {
            fill(dst.words_mut(), 0x5A5A_0000_0000_0000 | pass);
            std::hint::black_box(dst.bytes().as_ptr());
        }
    }
}

/// Sums every word with eight independent accumulators (the compiler vectorises this).
#[inline(never)]
fn read_sum(w: &[u64]) -> u64 {
    let mut acc = [0u64; 8];
    let chunks = w.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for i in 0..8 {
            acc[i] = acc[i].wrapping_add(c[i]);
        }
    }
    rest.iter()
        .chain(acc.iter())
        .fold(0u64, |a, &b| a.wrapping_add(b))
}

/// Stores `v` to every word with ordinary stores.
#[inline(never)]
fn fill(w: &mut [u64], v: u64) {
    for x in w {
        *x = v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_do_what_they_say() {
        let mut src = Block::new(4096, 16);
        let mut dst = Block::new(4096, 16);
        assert_eq!(src.bytes().as_ptr() as usize % 4096, 16);
        fill(src.words_mut(), 3);
        block_op(0, &mut src, &mut dst, 1);
        assert!(dst.words().iter().all(|&x| x == 3));
        assert_eq!(read_sum(src.words()), 3 * 512);
        block_op(2, &mut src, &mut dst, 7);
        assert!(dst.words().iter().all(|&x| x == 0x5A5A_0000_0000_0007));
        assert_eq!(dst.words().len(), 512);
    }
}
