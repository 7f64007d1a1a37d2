//! `membw`: repeated block copy between two buffers (the memory-bandwidth interference
//! program of VITS, section 4.3: "repeatedly copy data from one memory block to another").
//!
//! Each thread owns a source and a destination block (default 64 MiB each, as the RAM
//! bandwidth test of Rzecki et al.), both far larger than the last-level cache, so every copy
//! streams from and to DRAM. Both blocks are written before the start gate, so page faults
//! are never part of the loop. A block is copied in 1 MiB slices so the stop flag and the
//! duty cycle are checked often; one operation is one whole block copied.
//!
//! Stores are non-temporal by default (`store=nt`): 32-byte AVX streaming stores
//! (`vmovntdq`, chosen at run time when the CPU has AVX), else 16-byte SSE2 ones. They skip
//! the read-for-ownership a cached store pays on every destination line and do not fill the
//! caches with a block that is never reread, so each copied byte is one DRAM read and one
//! DRAM write and the copy reaches the machine's peak copy bandwidth (what `likwid-bench -t
//! copy_mem_avx` measures). A plain `memcpy` of 1 MiB slices (`store=cached`, below
//! glibc's own non-temporal threshold) pays a read-for-ownership on every destination line,
//! so a third of its traffic is overhead and it copies less. Either way the stressor
//! contends for memory bandwidth, not for cache capacity.

use isobench_common::format_size;
use serde::Deserialize;

use super::mapping::Mapping;
use super::pool::{cpu_share, planned_workers, run_pool, Done};
use crate::cachesize::cache_sizes;
use crate::params::{share_duty, share_threads, ParamKind, ParamSpec, ParamValues};
use crate::util::SplitMix64;
use crate::{Class, Env, StressCtx, StressReport, Stressor, Unsupported};

/// The `membw` stressor.
pub struct Membw;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    block: u64,
    store: String,
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
        name: "store",
        help: "nt: non-temporal (streaming) stores, AVX when the CPU has it, else SSE2 (the \
               machine's peak copy bandwidth); cached: plain memcpy through the caches",
        kind: ParamKind::Choice {
            options: &["nt", "cached"],
        },
        default: "nt",
    },
    share_threads("copying threads (auto: ceil(cpus x intensity / 100))"),
    share_duty("percent of each 20 ms period a thread copies (auto: from intensity)"),
];

/// Bytes copied between two checks of the stop flag.
const SLICE: usize = 1 << 20;

/// How a slice is copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Store {
    /// 32-byte AVX streaming stores.
    NtAvx,
    /// 16-byte SSE2 streaming stores (every x86-64 CPU has SSE2).
    NtSse2,
    /// `memcpy` through the caches.
    Cached,
}

impl Store {
    /// The best kind of store this CPU has for `nt` (true) or plain `memcpy` (false).
    fn detect(nt: bool) -> Store {
        if !nt {
            return Store::Cached;
        }
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx") {
                Store::NtAvx
            } else {
                Store::NtSse2
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Store::Cached
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Store::NtAvx => "nt-avx",
            Store::NtSse2 => "nt-sse2",
            Store::Cached => "cached",
        }
    }

    /// Copies `src` to `dst` (same length).
    fn copy(self, dst: &mut [u8], src: &[u8]) {
        assert_eq!(dst.len(), src.len());
        #[cfg(target_arch = "x86_64")]
        {
            // Streaming stores need aligned destinations; the blocks are page-aligned and
            // slices start at multiples of SLICE, so only a ragged tail goes through memcpy.
            let aligned = (dst.as_ptr() as usize | src.as_ptr() as usize) % 64 == 0;
            let body = dst.len() / 128 * 128;
            if self != Store::Cached && aligned && body > 0 {
                // SAFETY: both ranges are valid for `body` bytes and 64-byte aligned; the
                // AVX path only runs when `detect` saw AVX.
                unsafe {
                    match self {
                        Store::NtAvx => nt::copy_avx(dst.as_mut_ptr(), src.as_ptr(), body),
                        _ => nt::copy_sse2(dst.as_mut_ptr(), src.as_ptr(), body),
                    }
                }
                dst[body..].copy_from_slice(&src[body..]);
                return;
            }
        }
        dst.copy_from_slice(src);
    }
}

/// Non-temporal copy loops.
#[cfg(target_arch = "x86_64")]
mod nt {
    use std::arch::x86_64::*;

    /// The loop of a streaming copy: rounds of four aligned loads and four streaming stores
    /// of the vector type `$v`, `len / (4 * size_of::<$v>())` of them, then a store fence.
    /// A macro rather than a function so the intrinsics expand inside the caller's
    /// `target_feature` (a call would not be inlined across it).
    macro_rules! stream_copy {
        ($v:ty, $load:ident, $stream:ident, $dst:expr, $src:expr, $len:expr) => {{
            let (mut d, mut s) = ($dst.cast::<$v>(), $src.cast::<$v>());
            for _ in 0..$len / (4 * std::mem::size_of::<$v>()) {
                let a = $load(s);
                let b = $load(s.add(1));
                let c = $load(s.add(2));
                let e = $load(s.add(3));
                $stream(d, a);
                $stream(d.add(1), b);
                $stream(d.add(2), c);
                $stream(d.add(3), e);
                d = d.add(4);
                s = s.add(4);
            }
            // Streaming stores are weakly ordered: fence before anyone reads the block.
            _mm_sfence();
        }};
    }

    /// Copies `len` bytes (a multiple of 128) with 32-byte streaming stores.
    ///
    /// # Safety
    /// The CPU has AVX; `dst` and `src` are 32-byte aligned and valid for `len` bytes, and
    /// do not overlap.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn copy_avx(dst: *mut u8, src: *const u8, len: usize) {
        stream_copy!(
            __m256i,
            _mm256_load_si256,
            _mm256_stream_si256,
            dst,
            src,
            len
        );
    }

    /// Copies `len` bytes (a multiple of 128) with 16-byte streaming stores (SSE2).
    ///
    /// # Safety
    /// `dst` and `src` are 16-byte aligned and valid for `len` bytes, and do not overlap.
    pub(super) unsafe fn copy_sse2(dst: *mut u8, src: *const u8, len: usize) {
        stream_copy!(__m128i, _mm_load_si128, _mm_stream_si128, dst, src, len);
    }
}

struct Copier {
    src: Mapping,
    dst: Mapping,
    store: Store,
    /// Offset of the next slice within the block.
    at: usize,
}

impl Copier {
    fn new(block: usize, seed: u64, store: Store) -> anyhow::Result<Self> {
        let mut src = Mapping::new_huge(block)?;
        let mut dst = Mapping::new_huge(block)?;
        let mut rng = SplitMix64(seed);
        for chunk in src.as_mut_slice().chunks_mut(8) {
            let w = rng.next_u64().to_ne_bytes();
            chunk.copy_from_slice(&w[..chunk.len()]);
        }
        dst.as_mut_slice().fill(0x5a);
        Ok(Copier {
            src,
            dst,
            store,
            at: 0,
        })
    }

    /// Copies the next slice; returns (blocks completed, bytes copied).
    fn step(&mut self) -> (u64, u64) {
        let len = self.src.len();
        let end = (self.at + SLICE).min(len);
        let n = end - self.at;
        let at = self.at;
        self.store.copy(
            &mut self.dst.as_mut_slice()[at..end],
            &self.src.as_slice()[at..end],
        );
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
         than the LLC) with non-temporal AVX stores (SSE2 without AVX; store=cached for \
         memcpy): memory-bandwidth competition at the machine's peak copy rate. One operation \
         is one whole block copied; bytes counts every byte copied (DRAM traffic is twice \
         that: one read and one write per byte). Pressure: bytes_per_sec copied, cpu_threads."
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
    /// Two blocks per thread, within the quarter of the tenant's memory `run` keeps to.
    fn memory_need(&self, params: &ParamValues, env: &Env, intensity: u8, _llc: u64) -> u64 {
        let Ok(o) = params.decode::<Opts>(self.name()) else {
            return 0;
        };
        let threads = planned_workers(o.threads, env.cpus.len(), intensity);
        (2 * threads * o.block).min(env.mem_usable / 4)
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
        let store = Store::detect(o.store == "nt");
        let mut notes = vec![
            format!("block={} store={}", format_size(block), store.as_str()),
            format!("duty={:.0}%", shape.duty * 100.0),
        ];
        if block < o.block {
            notes.push(format!(
                "block reduced from {} to fit the memory available",
                format_size(o.block)
            ));
        }
        let llc = cache_sizes(&ctx.env).llc;
        if block < 2 * llc {
            notes.push(format!(
                "block {} is under twice the LLC ({}): copies partly hit in cache",
                format_size(block),
                format_size(llc)
            ));
        }
        let out = run_pool(
            ctx,
            self.name(),
            shape,
            |i| Copier::new(block as usize, i as u64 + 1, store),
            |c| {
                let (blocks, bytes) = c.step();
                Ok(Done::new(blocks, bytes))
            },
        )?;
        let pressure = vec![out.bytes_per_sec(), out.cpu_threads()];
        let mut r = out.report(format!("copy of one {} block", format_size(block)), notes);
        r.pressure = pressure;
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_store_kind_copies_exactly() {
        let mut kinds = vec![Store::Cached, Store::detect(true)];
        if cfg!(target_arch = "x86_64") {
            kinds.push(Store::NtSse2);
        }
        for store in kinds {
            // Aligned with a ragged tail, and unaligned (the memcpy path).
            for (off, len) in [(0, 4096 + 100), (0, 128), (8, 1000), (0, 50)] {
                let src: Vec<u8> = (0..len + 64).map(|i| (i * 7 + 3) as u8).collect();
                let mut m = Mapping::new(len + 64).unwrap();
                let dst = &mut m.as_mut_slice()[off..off + len];
                let mut s = Mapping::new(len + 64).unwrap();
                s.as_mut_slice()[off..off + len].copy_from_slice(&src[..len]);
                store.copy(dst, &s.as_slice()[off..off + len]);
                assert_eq!(dst, &src[..len], "{store:?} off={off} len={len}");
            }
        }
    }
}
