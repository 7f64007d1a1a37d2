//! Usable cache sizes, measured rather than believed.
//!
//! Sysfs cache sizes can lie on virtual machines (a guest may be told its last-level cache is
//! hundreds of MiB while the share it can really use is a few MiB), and an SMT sibling running
//! someone else's code halves what is left of L1 and L2. Working sets that are meant to "fit
//! in the LLC" or be "8x the LLC" must therefore be sized from what the caches do, not from
//! what sysfs says.
//!
//! [`cache_profile`] runs a latency-vs-size sweep once per process: a dependent pointer chase
//! over rings of cache-line-spaced elements in random order (so neither the prefetchers nor
//! out-of-order execution can hide a miss), on 2 MiB transparent huge pages when the kernel
//! gives them (so TLB misses do not blur the cache knees), growing by sqrt(2) per step from
//! 4 KiB until latency has settled on the memory plateau (or a cap of 256 MiB, and never more
//! than a quarter of the memory the process may use). Each size is timed five times in each
//! of three passes over the sizes (the later passes largest first) and the minimum kept:
//! interference only ever adds time, and a burst of it rarely hits one size in all three
//! passes. [`find_levels`] then reads the plateaus off the curve. The sweep takes about half
//! a second and runs on a thread of its own, pinned to the first CPU the caller may use, so
//! the caller's affinity is left alone.
//!
//! [`cache_sizes`] turns the profile into the sizes workloads use, with the sysfs figures
//! kept beside the measured ones. The pointer-chase primitives here ([`ChaseBuf`],
//! [`build_ring`], [`chase`]) are shared with the `cache-latency` and `mem-latency` probes.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::metric::Window;
use crate::timer::now_ns;
use crate::util::SplitMix64;
use crate::Env;

/// Cache sizes a workload should size its working set from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheSizes {
    /// L1 data cache, bytes (measured when the sweep found it, else sysfs).
    pub l1: u64,
    /// L2, bytes (measured when the sweep found it, else sysfs).
    pub l2: u64,
    /// Last-level cache as used for sizing, bytes (measured when possible).
    pub llc: u64,
    /// Last-level cache as sysfs reports it, bytes.
    pub llc_sysfs: Option<u64>,
    /// Last-level cache as measured, bytes (None when the sweep could not tell).
    pub llc_measured: Option<u64>,
}

/// One point of the latency-vs-size sweep.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Ring size in bytes.
    pub bytes: u64,
    /// Nanoseconds per dependent load (minimum of the repetitions).
    pub ns: f64,
}

/// A cache level read off the sweep.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Level {
    /// Usable capacity in bytes: the ring size at which latency has climbed a quarter of the
    /// way from this level's plateau to the next one.
    pub bytes: u64,
    /// Latency of a hit in this level (the plateau), ns.
    pub ns: f64,
}

/// The measured cache hierarchy of this process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheProfile {
    /// The sweep, smallest ring first (empty when the sweep could not run).
    pub points: Vec<SweepPoint>,
    /// Cache levels found, L1 first.
    pub levels: Vec<Level>,
    /// Latency of the plateau beyond the last cache level (memory), ns.
    pub beyond_ns: Option<f64>,
    /// Whether the sweep buffer was backed by huge pages (at least 90% of what it touched).
    pub huge_pages: bool,
    /// Largest ring the sweep was allowed to build, bytes.
    pub max_bytes: u64,
    /// Wall time of the sweep, ms.
    pub elapsed_ms: f64,
    /// Why the sweep did not run or found nothing, when that happened.
    pub note: Option<String>,
}

/// The cache profile of this process: measured by the first call, then returned from a
/// per-process cache (later calls ignore `env`). Call it while the machine is quiet (during
/// calibration, before any stressor starts): a busy neighbour shrinks the cache it measures.
pub fn cache_profile(env: &Env) -> &'static CacheProfile {
    static PROFILE: OnceLock<CacheProfile> = OnceLock::new();
    PROFILE.get_or_init(|| measure_profile(env))
}

/// Cache sizes for `env`: L1, L2 and LLC from the measured profile ([`cache_profile`]),
/// falling back level by level to sysfs (then to 32 KiB / 1 MiB / 8 MiB) when the sweep could
/// not find one. The sysfs LLC figure is kept in `llc_sysfs`.
pub fn cache_sizes(env: &Env) -> CacheSizes {
    sizes_from(env, cache_profile(env))
}

/// A machine's caches as its controller saw them, measured once while the machine was quiet,
/// with the sysfs figures beside them: what a plan sizes working sets from, so every tenant's
/// process gets the same sizes without a sweep of its own (a sweep in a busy tenant, or one
/// slower than the probe's deadline on an emulated CPU, would not give them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostCaches {
    /// From this process's sweep ([`cache_sizes`]).
    pub measured: CacheSizes,
    /// From sysfs alone ([`cache_sizes_from_sysfs`]).
    pub sysfs: CacheSizes,
}

impl HostCaches {
    /// This process's caches: the sweep (run now if it has not run yet) and sysfs.
    pub fn detect(env: &Env) -> HostCaches {
        HostCaches {
            measured: cache_sizes(env),
            sysfs: cache_sizes_from_sysfs(env),
        }
    }

    /// Caches taken from sysfs alone, as if a sweep had confirmed them (a synthetic host).
    pub fn from_sysfs(env: &Env) -> HostCaches {
        let sysfs = cache_sizes_from_sysfs(env);
        HostCaches {
            measured: CacheSizes {
                llc_measured: Some(sysfs.llc),
                ..sysfs
            },
            sysfs,
        }
    }

    /// The usable last-level cache, bytes (measured when the sweep could tell, else sysfs).
    pub fn llc(&self) -> u64 {
        self.measured.llc
    }
}

/// Cache sizes from sysfs alone, without measuring (cheap; may be wrong on virtual machines).
pub fn cache_sizes_from_sysfs(env: &Env) -> CacheSizes {
    let l1 = env.cache_size(1).unwrap_or(32 << 10);
    let l2 = env.cache_size(2).unwrap_or(1 << 20).max(l1);
    let llc_sysfs = env.llc_size();
    CacheSizes {
        l1,
        l2,
        llc: llc_sysfs.unwrap_or(8 << 20).clamp(l2, 64 << 20),
        llc_sysfs,
        llc_measured: None,
    }
}

fn sizes_from(env: &Env, p: &CacheProfile) -> CacheSizes {
    let sys = cache_sizes_from_sysfs(env);
    let lv = &p.levels;
    // Two levels: the second is both L2 and LLC. Three or more: the last is the LLC.
    let l1 = lv.first().map_or(sys.l1, |l| l.bytes);
    let l2 = lv.get(1).map_or(sys.l2, |l| l.bytes).max(l1);
    let llc_measured = (lv.len() >= 2).then(|| lv[lv.len() - 1].bytes.max(l2));
    CacheSizes {
        l1,
        l2,
        llc: llc_measured.unwrap_or(sys.llc.max(l2)),
        llc_sysfs: sys.llc_sysfs,
        llc_measured,
    }
}

fn measure_profile(env: &Env) -> CacheProfile {
    let cpu = crate::env::affinity_cpus().first().copied();
    let max = (env.mem_usable / 4).min(256 << 20) & !(HUGE_PAGE as u64 - 1);
    let empty = |note: String| CacheProfile {
        points: Vec::new(),
        levels: Vec::new(),
        beyond_ns: None,
        huge_pages: false,
        max_bytes: max,
        elapsed_ms: 0.0,
        note: Some(note),
    };
    if max < 4 << 20 {
        return empty(format!(
            "not measured: only {} MiB of memory may be used",
            env.mem_usable >> 20
        ));
    }
    let joined = std::thread::Builder::new()
        .name("cache-sweep".into())
        .spawn(move || {
            if let Some(c) = cpu {
                let _ = crate::util::pin_to_cpu(c);
            }
            sweep(max as usize)
        })
        .map_err(|e| e.to_string())
        .and_then(|h| h.join().map_err(|_| "sweep thread panicked".to_string()));
    match joined {
        Ok(Ok(p)) => p,
        Ok(Err(e)) | Err(e) => empty(format!("not measured: {e}")),
    }
}

fn sweep(max: usize) -> Result<CacheProfile, String> {
    let t0 = now_ns();
    let overhead = crate::timer::timer_overhead_ns();
    let mut buf = ChaseBuf::new(max, true).map_err(|e| format!("mmap of {max} bytes: {e}"))?;
    let mut sizes = Vec::new();
    let mut size = 4096usize;
    while size <= max {
        sizes.push(size);
        size = (((size as f64) * std::f64::consts::SQRT_2) as usize).next_multiple_of(LINE);
    }
    // SAFETY (the closure): every size is at most max <= buf.len(), and the ring
    // lives in buf, which outlives the chase.
    let mut measure = |k: usize, size: usize, pass: u64| unsafe {
        let n = size / LINE;
        let head = build_ring(
            &mut buf,
            n,
            LINE,
            Order::Random(0x15_0BE7 + 64 * pass + k as u64),
        );
        time_ring(head, n, overhead)
    };
    // First pass: grow until latency settles on memory.
    let mut points: Vec<SweepPoint> = Vec::new();
    for (k, &size) in sizes.iter().enumerate() {
        let ns = measure(k, size, 0);
        points.push(SweepPoint {
            bytes: size as u64,
            ns,
        });
        if settled_on_memory(&points) {
            break;
        }
    }
    // Two more passes, largest ring first, keeping each size's minimum: a burst of
    // interference rarely hits the same size three times. The memory plateau the first pass
    // ended on (its first point excepted) is not repeated: rings there are slow to build
    // and their latency is not in doubt.
    for pass in 1..SWEEP_PASSES {
        if now_ns() - t0 > SWEEP_SOFT_LIMIT_NS {
            break;
        }
        let settled = settled_on_memory(&points);
        let last = points.len() - if settled { TAIL } else { 1 };
        for k in (0..=last).rev() {
            let ns = measure(k, points[k].bytes as usize, pass);
            points[k].ns = points[k].ns.min(ns);
        }
    }
    let huge_pages = buf.huge_fraction().is_some_and(|f| f >= 0.9);
    let (levels, beyond_ns) = find_levels(&points);
    let note = (levels.len() < 2).then(|| {
        format!(
            "sweep found {} cache level(s); sysfs fills the rest",
            levels.len()
        )
    });
    Ok(CacheProfile {
        points,
        levels,
        beyond_ns,
        huge_pages,
        max_bytes: max as u64,
        elapsed_ms: (now_ns() - t0) as f64 / 1e6,
        note,
    })
}

/// Passes over the sizes.
const SWEEP_PASSES: u64 = 3;
/// No further pass starts after this long.
const SWEEP_SOFT_LIMIT_NS: u64 = 900_000_000;

/// Nanoseconds per load on a ring of `n` elements: a warm-up pass (at most ~5 ms), a short
/// calibration, then the minimum over five timed repetitions of ~200 us each.
///
/// # Safety
/// `head` must point into a valid ring (see [`build_ring`]).
unsafe fn time_ring(head: *const usize, n: usize, overhead: f64) -> f64 {
    let mut p = head;
    let warm_until = now_ns() + 5_000_000;
    let mut warmed = 0;
    while warmed < n && now_ns() < warm_until {
        p = chase(p, 4096);
        warmed += 4096;
    }
    let t = now_ns();
    p = chase(p, 2048);
    let est = ((now_ns() - t) as f64 / 2048.0).max(0.1);
    let steps = ((200_000.0 / est) as u64).clamp(2048, 1 << 20);
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = now_ns();
        p = chase(p, steps);
        let dt = (now_ns() - t) as f64 - overhead;
        best = best.min(dt.max(0.0) / steps as f64);
    }
    std::hint::black_box(p);
    best
}

/// True once the last four points lie within 15% of each other, at 60 ns or more, from
/// rings of 8 MiB up: latency has reached a plateau that no cache has (memory).
fn settled_on_memory(points: &[SweepPoint]) -> bool {
    let Some(tail) = points.len().checked_sub(TAIL).map(|i| &points[i..]) else {
        return false;
    };
    let lo = tail.iter().map(|p| p.ns).fold(f64::INFINITY, f64::min);
    let hi = tail.iter().map(|p| p.ns).fold(0.0, f64::max);
    tail[0].bytes >= 8 << 20 && lo >= 60.0 && hi <= lo * 1.15
}

/// Points of the memory plateau the first pass ends on.
const TAIL: usize = 4;

/// Reads L1, L2 and the LLC off a latency-vs-size curve (sizes ascending). Returns the
/// levels found, L1 first, and the latency of the memory plateau beyond the last one.
///
/// Latency cannot fall as the ring grows, so each point is first lowered to the minimum of
/// itself and every later point (a point above a later one was inflated by interference).
/// Then:
/// - L1 hit latency `p1` is the median of the three smallest rings. Its knee is the first
///   ring more than 25% slower; the curve then climbs until two neighbours are within 20%:
///   the median there is the L2 hit latency `p2` (at least 1.6x `p1`, else nothing is
///   reported and sysfs is used).
/// - The memory latency `pm` is the median of the last three points when they lie within
///   20% of each other (the sweep reached memory); otherwise only L1 is reported.
/// - The LLC hit latency `p3` is the first run of three points within 20% of each other
///   between 1.6x `p2` and `pm`/2.5. On a virtual machine whose host LLC is shared with other
///   guests there may be no such plateau, only a ramp from L2 to memory; then `p3` is the
///   geometric mean of `p2` and `pm` (close to measured L3 latencies on x86 parts).
/// - Each capacity is where the curve crosses a quarter of the way from its level's latency
///   to the next one's, interpolated on log size. With random replacement, a ring of size S
///   over a cache of size C hits with probability about C/S, so that crossing is at about
///   4/3 C: a little above the size that fits, which is what "usable" means here.
pub fn find_levels(points: &[SweepPoint]) -> (Vec<Level>, Option<f64>) {
    const RISE: f64 = 1.25;
    const FLAT: f64 = 1.2;
    const STEP: f64 = 1.6;
    // Every real LLC is at least 2.5x faster than memory; a flat stretch closer to memory
    // latency is a mix of hits and misses that interference happened to flatten.
    const LLC_GAP: f64 = 2.5;
    let n = points.len();
    if n < 6 {
        return (Vec::new(), None);
    }
    let mut lat: Vec<f64> = points.iter().map(|p| p.ns).collect();
    for k in (0..n - 1).rev() {
        lat[k] = lat[k].min(lat[k + 1]);
    }
    let med3 = |k: usize| isobench_common::median(&lat[k.min(n - 3)..(k + 3).min(n)]);
    let flat3 = |k: usize| k + 3 <= n && lat[k + 2] <= lat[k] * FLAT;
    // First index m >= from whose latency exceeds thr, and the interpolated size there.
    let crossing = |from: usize, thr: f64| -> (usize, u64) {
        let m = (from.max(1)..n).find(|&m| lat[m] > thr).unwrap_or(n - 1);
        let (a, b) = (lat[m - 1], lat[m]);
        let frac = if b > a {
            ((thr - a) / (b - a)).clamp(0.0, 1.0)
        } else {
            1.0
        };
        let (sa, sb) = (points[m - 1].bytes as f64, points[m].bytes as f64);
        let bytes = sa * (sb / sa).powf(frac);
        (m, (bytes as u64).next_multiple_of(LINE as u64))
    };

    let p1 = med3(0);
    let Some(knee1) = (1..n).find(|&j| lat[j] > p1 * RISE) else {
        return (Vec::new(), None);
    };
    let mut k = knee1;
    while k + 1 < n && lat[k + 1] > lat[k] * FLAT {
        k += 1;
    }
    let p2 = med3(k);
    if p2 < p1 * STEP {
        return (Vec::new(), None);
    }
    let (_, l1) = crossing(1, p1 + 0.25 * (p2 - p1));
    let mut levels = vec![Level { bytes: l1, ns: p1 }];

    let tail = &lat[n - 3..];
    let pm = isobench_common::median(tail);
    if tail[2] > tail[0] * FLAT || pm < p2 * STEP * STEP {
        return (levels, None);
    }
    let p3 = (k + 1..n.saturating_sub(3))
        .find(|&m| flat3(m) && lat[m] >= p2 * STEP && lat[m + 2] <= pm / LLC_GAP)
        .map(med3)
        .unwrap_or_else(|| (p2 * pm).sqrt());
    let (m2, l2) = crossing(k, p2 + 0.25 * (p3 - p2));
    let (_, llc) = crossing(m2, p3 + 0.25 * (pm - p3));
    levels.push(Level { bytes: l2, ns: p2 });
    levels.push(Level {
        bytes: llc.max(l2),
        ns: p3,
    });
    (levels, Some(pm))
}

/// Cache line size assumed by the rings (every x86_64 and most arm64 parts).
pub(crate) const LINE: usize = 64;
/// Transparent huge page size on x86_64.
pub(crate) const HUGE_PAGE: usize = 2 << 20;

/// An anonymous mapping aligned to 2 MiB, its length a multiple of 2 MiB, with transparent
/// huge pages requested (`MADV_HUGEPAGE`) or refused (`MADV_NOHUGEPAGE`). Unmapped on drop.
pub(crate) struct ChaseBuf {
    map: *mut libc::c_void,
    map_len: usize,
    base: *mut u8,
    len: usize,
}

// SAFETY: ChaseBuf owns its mapping exclusively.
unsafe impl Send for ChaseBuf {}

impl ChaseBuf {
    /// Maps at least `len` bytes. Pages are faulted in by the first write (see `touch`).
    pub(crate) fn new(len: usize, huge: bool) -> std::io::Result<Self> {
        let len = len.max(1).next_multiple_of(HUGE_PAGE);
        let map_len = len + HUGE_PAGE;
        // SAFETY: anonymous private mapping, no fd; result checked.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let base = (map as usize).next_multiple_of(HUGE_PAGE) as *mut u8;
        let advice = if huge {
            libc::MADV_HUGEPAGE
        } else {
            libc::MADV_NOHUGEPAGE
        };
        // SAFETY: [base, base + len) lies inside the mapping. Failure (no THP support) only
        // means small pages, which huge_fraction() reports.
        unsafe { libc::madvise(base.cast(), len, advice) };
        Ok(ChaseBuf {
            map,
            map_len,
            base,
            len,
        })
    }

    /// Usable length in bytes (a multiple of 2 MiB).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Start of the usable region (2 MiB aligned).
    pub(crate) fn base(&self) -> *mut u8 {
        self.base
    }

    /// Writes one byte per 4 KiB page so every page is faulted in before timing.
    pub(crate) fn touch(&mut self) {
        for off in (0..self.len).step_by(4096) {
            // SAFETY: off < len.
            unsafe { self.base.add(off).write_volatile(0) };
        }
    }

    /// Share of the resident part of the region backed by transparent huge pages, from
    /// `/proc/self/smaps` (None when it cannot be read).
    pub(crate) fn huge_fraction(&self) -> Option<f64> {
        let maps = procfs::process::Process::myself().ok()?.smaps().ok()?;
        let (lo, hi) = (self.base as u64, self.base as u64 + self.len as u64);
        let (mut huge, mut rss) = (0u64, 0u64);
        for m in maps.iter().filter(|m| m.address.0 < hi && m.address.1 > lo) {
            let bytes = |key: &str| m.extension.map.get(key).copied().unwrap_or(0);
            huge += bytes("AnonHugePages");
            rss += bytes("Rss");
        }
        Some(if rss == 0 {
            0.0
        } else {
            (huge as f64 / rss as f64).min(1.0)
        })
    }
}

impl Drop for ChaseBuf {
    fn drop(&mut self) {
        // SAFETY: the mapping was created in new() with this address and length.
        unsafe { libc::munmap(self.map, self.map_len) };
    }
}

/// Order in which a ring visits its elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// Address order: element i points to element i+1 (prefetchers can follow).
    Sequential,
    /// A random single cycle through all elements, from this seed (defeats prefetchers).
    Random(u64),
}

/// Links `n` elements spaced `stride` bytes apart at the start of `buf` into one cycle that
/// visits every element once, and returns the head. Each element's first word holds the
/// address of the next element. Random order shuffles elements 1..n with element 0 first, so
/// the cycle always has length n (no short loops).
///
/// # Safety
/// `n >= 1`, `stride` a multiple of 8, and `n * stride <= buf.len()`.
pub(crate) unsafe fn build_ring(
    buf: &mut ChaseBuf,
    n: usize,
    stride: usize,
    order: Order,
) -> *const usize {
    assert!(n >= 1 && stride >= 8 && stride % 8 == 0 && n * stride <= buf.len());
    assert!(n <= u32::MAX as usize, "ring of {n} elements is too large");
    let base = buf.base();
    let at = |i: usize| base.add(i * stride) as *mut usize;
    match order {
        Order::Sequential => {
            for i in 0..n {
                *at(i) = at((i + 1) % n) as usize;
            }
        }
        Order::Random(seed) => {
            let mut perm: Vec<u32> = (0..n as u32).collect();
            SplitMix64(seed).shuffle(&mut perm[1..]);
            for w in 0..n {
                let (a, b) = (perm[w] as usize, perm[(w + 1) % n] as usize);
                *at(a) = at(b) as usize;
            }
        }
    }
    at(0)
}

/// Follows a ring for `steps` dependent loads and returns where it stopped (pass it back in
/// to continue). Each load's address is the value of the previous one, so loads cannot
/// overlap: the time per step is the load-to-use latency of wherever the ring lives.
///
/// # Safety
/// `p` must point into a ring built by [`build_ring`] whose buffer is still alive.
#[inline(never)]
pub(crate) unsafe fn chase(mut p: *const usize, steps: u64) -> *const usize {
    let mut left = steps;
    while left >= 16 {
        p = *p as *const usize;
        p = *p as *const usize;
        p = *p as *const usize;
        p = *p as *const usize;
        p = *p as *const usize;
        p = *p as *const usize;
        p = *p as *const usize;
        p = *p as *const usize;
        p = *p as *const usize;
        p = *p as *const usize;
        p = *p as *const usize;
        p = *p as *const usize;
        p = *p as *const usize;
        p = *p as *const usize;
        p = *p as *const usize;
        p = *p as *const usize;
        left -= 16;
    }
    while left > 0 {
        p = *p as *const usize;
        left -= 1;
    }
    p
}

/// One timed batch of a pointer chase: `steps` dependent loads between two clock reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Batch {
    /// Clock read before the batch, ns ([`now_ns`]).
    pub start_ns: u64,
    /// Clock read after the batch, ns.
    pub end_ns: u64,
    /// Loads in the batch.
    pub steps: u64,
    /// The thread was switched out (involuntarily) during the batch: its time is not the
    /// loads' alone.
    pub preempted: bool,
}

/// Involuntary context switches of the calling thread so far (0 when unknown).
fn involuntary_switches() -> i64 {
    // SAFETY: an all-zero rusage is valid, and getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
        return 0;
    }
    ru.ru_nivcsw
}

/// Follows the ring from `*p` in batches of `steps` loads until `budget` has passed (or
/// `stop` is set, after at least one batch) and returns every batch, in time order, each
/// marked when the thread was preempted during it (one `getrusage` between batches, outside
/// the timed region).
///
/// # Safety
/// `*p` must point into a ring built by [`build_ring`] whose buffer is still alive.
pub(crate) unsafe fn chase_batches(
    p: &mut *const usize,
    steps: u64,
    budget: std::time::Duration,
    stop: &std::sync::atomic::AtomicBool,
) -> Vec<Batch> {
    let steps = steps.max(1);
    let mut out = Vec::with_capacity(1024);
    let mut switches = involuntary_switches();
    let mut deadline = None;
    loop {
        let t = now_ns();
        // The budget counts from the first batch's own clock read, so the batches span it.
        let deadline = *deadline.get_or_insert(t + budget.as_nanos() as u64);
        *p = chase(*p, steps);
        let e = now_ns();
        let now_switches = involuntary_switches();
        out.push(Batch {
            start_ns: t,
            end_ns: e,
            steps,
            preempted: now_switches != switches,
        });
        switches = now_switches;
        if e >= deadline || stop.load(std::sync::atomic::Ordering::Relaxed) {
            return out;
        }
    }
}

/// Nanoseconds per load of each batch, `overhead_ns` (one clock read) taken out.
pub(crate) fn batch_ns(batches: &[Batch], overhead_ns: f64) -> Vec<f64> {
    batches.iter().map(|b| b.ns_per_load(overhead_ns)).collect()
}

impl Batch {
    fn busy_ns(&self, overhead_ns: f64) -> f64 {
        ((self.end_ns - self.start_ns) as f64 - overhead_ns).max(0.0)
    }
    fn ns_per_load(&self, overhead_ns: f64) -> f64 {
        self.busy_ns(overhead_ns) / self.steps as f64
    }
}

/// Cuts the interval from the first batch's start to the last batch's end into consecutive
/// windows of at least `window_ns` (a window closes at the end of the first batch that ends
/// `window_ns` or more after it opened; the next opens there), and returns each window's
/// median ns per load over its batches (one clock read per batch taken out), the same
/// statistic as the probe's whole-run value, so the two agree; a mean would follow the few
/// batches in which a neighbour elsewhere on the host flushed the shared cache. Batches
/// during which the thread was preempted are left out (time spent switched out is not load
/// latency), unless every batch of the window was. The
/// windows tile the interval with no gap or overlap; a last window shorter than half of
/// `window_ns` is merged into the one before it.
pub(crate) fn tile_windows(batches: &[Batch], window_ns: u64, overhead_ns: f64) -> Vec<Window> {
    struct Open {
        start: u64,
        end: u64,
        /// ns per load of the batches run undisturbed, and of all batches.
        clean: Vec<f64>,
        all: Vec<f64>,
    }
    impl Open {
        fn value(&self) -> f64 {
            isobench_common::median(if self.clean.is_empty() {
                &self.all
            } else {
                &self.clean
            })
        }
    }
    let window_ns = window_ns.max(1);
    let mut done: Vec<Open> = Vec::new();
    let mut open: Option<Open> = None;
    for b in batches {
        let start = done.last().map_or(b.start_ns, |w| w.end);
        let w = open.get_or_insert(Open {
            start,
            end: start,
            clean: Vec::new(),
            all: Vec::new(),
        });
        w.end = b.end_ns;
        let ns = b.ns_per_load(overhead_ns);
        w.all.push(ns);
        if !b.preempted {
            w.clean.push(ns);
        }
        if w.end - w.start >= window_ns {
            done.extend(open.take());
        }
    }
    if let Some(last) = open {
        match done.last_mut() {
            Some(prev) if last.end - last.start < window_ns / 2 => {
                prev.end = last.end;
                prev.clean.extend(last.clean);
                prev.all.extend(last.all);
            }
            _ => done.push(last),
        }
    }
    done.into_iter()
        .filter(|w| !w.all.is_empty() && w.end > w.start)
        .map(|w| Window {
            start_ns: w.start,
            end_ns: w.end,
            value: w.value(),
        })
        .collect()
}

/// Loads per batch for a windowed chase: batches of about a twentieth of a window, between
/// 20 us and 500 us (never a single short event: a batch is thousands of dependent loads),
/// from a calibration on the ring itself.
///
/// # Safety
/// `*p` must point into a ring built by [`build_ring`] whose buffer is still alive.
pub(crate) unsafe fn window_batch_steps(p: &mut *const usize, window: std::time::Duration) -> u64 {
    let target = (window / 20).clamp(
        std::time::Duration::from_micros(20),
        std::time::Duration::from_micros(500),
    );
    let mut best = 0;
    for _ in 0..3 {
        best = best.max(crate::timer::calibrate_iterations(target, |n| {
            *p = chase(*p, n)
        }));
    }
    best.max(16)
}

/// Times a ring for `budget` in batches sized for `window` and returns the median ns per
/// load over the batches not preempted (all of them if every one was) and the window series ([`tile_windows`]). Calibrating the batch
/// size is warm-up and is not in the series.
///
/// # Safety
/// `*p` must point into a ring built by [`build_ring`] whose buffer is still alive.
pub(crate) unsafe fn chase_windowed(
    ctx: &crate::ProbeCtx,
    p: &mut *const usize,
    budget: std::time::Duration,
    window: std::time::Duration,
) -> (f64, Vec<Window>) {
    let steps = window_batch_steps(p, window);
    let b = chase_batches(p, steps, budget, &ctx.stop);
    // Batches during which the thread was switched out are left out, as in the windows.
    let clean: Vec<Batch> = b.iter().filter(|x| !x.preempted).copied().collect();
    let ns = isobench_common::median(&batch_ns(
        if clean.is_empty() { &b } else { &clean },
        ctx.timer_overhead_ns,
    ));
    let series = tile_windows(&b, window.as_nanos() as u64, ctx.timer_overhead_ns);
    (ns, series)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A curve from its points, written as `KiB ns` pairs separated by commas
    /// (`"4 1.35, 8 1.35"`): a measured sweep of 30 sizes fits in five lines.
    fn curve(points: &str) -> Vec<SweepPoint> {
        points
            .split(',')
            .map(|p| match p.split_whitespace().collect::<Vec<_>>()[..] {
                [kib, ns] => SweepPoint {
                    bytes: kib.parse::<u64>().unwrap() << 10,
                    ns: ns.parse().unwrap(),
                },
                _ => panic!("not a `KiB ns` pair: {p:?}"),
            })
            .collect()
    }

    /// A curve measured on the development VM (sysfs claims a 480 MiB L3).
    #[test]
    fn finds_three_levels_on_a_vm_curve() {
        let pts = curve(
            "4 1.35, 5 1.35, 8 1.35, 11 1.35, 16 1.34, 22 1.32, 32 1.32, 44 1.35, 62 4.27, \
             88 4.21, 125 4.21, 177 4.21, 251 4.26, 355 4.29, 502 4.79, 710 5.14, 1004 6.02, \
             1420 8.26, 2009 16.45, 2841 31.23, 4018 35.10, 5683 78.27, 8037 139.81, \
             11366 178.56, 16074 194.43, 22732 221.72, 32148 224.99, 45464 231.86, \
             64296 238.84",
        );
        let (lv, beyond) = find_levels(&pts);
        assert_eq!(lv.len(), 3, "{lv:?}");
        assert!((44 << 10..=62 << 10).contains(&lv[0].bytes), "{lv:?}");
        assert!((1004 << 10..=2009 << 10).contains(&lv[1].bytes), "{lv:?}");
        assert!((4018 << 10..=8037 << 10).contains(&lv[2].bytes), "{lv:?}");
        assert!((lv[0].ns - 1.35).abs() < 0.1 && lv[2].ns > 25.0);
        assert!(beyond.unwrap() > 150.0);
    }

    /// The same VM under load: no LLC plateau, a ramp from L2 to memory.
    #[test]
    fn finds_the_llc_on_a_ramp() {
        let pts = curve(
            "4 1.28, 8 1.28, 16 1.28, 32 1.28, 46 1.28, 65 4.09, 92 4.10, 130 4.10, 260 4.10, \
             368 4.10, 521 4.57, 737 4.97, 1042 5.24, 1474 5.43, 2085 15.81, 2949 27.05, \
             4171 32.31, 5899 35.33, 8343 43.73, 11799 54.24, 16686 67.00, 23598 96.41, \
             33373 120.73, 47197 140.60, 66747 152.86, 94395 152.50, 133495 151.45",
        );
        let (lv, beyond) = find_levels(&pts);
        assert_eq!(lv.len(), 3, "{lv:?}");
        assert!((46 << 10..=65 << 10).contains(&lv[0].bytes), "{lv:?}");
        assert!((1474 << 10..=2085 << 10).contains(&lv[1].bytes), "{lv:?}");
        assert!((8343 << 10..=23598 << 10).contains(&lv[2].bytes), "{lv:?}");
        assert!((beyond.unwrap() - 151.45).abs() < 2.0);
    }

    /// A bare-metal-like curve with a long, flat L3 plateau.
    #[test]
    fn finds_a_flat_l3_plateau() {
        let (lv, beyond) = find_levels(&curve(
            "4 1.0, 8 1.0, 16 1.0, 32 1.05, 64 3.5, 128 3.5, 256 3.5, 512 3.6, 1024 5.0, \
             2048 12.0, 4096 12.0, 8192 12.5, 16384 13.0, 32768 40.0, 65536 85.0, 131072 90.0, \
             262144 92.0",
        ));
        assert_eq!(lv.len(), 3, "{lv:?}");
        assert!((32 << 10..=64 << 10).contains(&lv[0].bytes), "{lv:?}");
        assert!((512 << 10..=2048 << 10).contains(&lv[1].bytes), "{lv:?}");
        assert!((16 << 20..=32 << 20).contains(&lv[2].bytes), "{lv:?}");
        assert!((lv[2].ns - 12.0).abs() < 1.0, "{lv:?}");
        assert!(beyond.unwrap() >= 85.0);
    }

    /// Regression: interference flattened a stretch of half-hits, half-misses at ~72 ns
    /// (memory ~173 ns), which was taken for the LLC and put the LLC at 12 MiB.
    #[test]
    fn a_flat_stretch_near_memory_latency_is_not_the_llc() {
        let pts = curve(
            "4 1.35, 8 1.35, 16 1.35, 32 1.35, 46 1.35, 65 4.26, 130 4.26, 260 4.26, 521 4.81, \
             737 5.24, 1042 6.40, 1474 10.65, 2085 17.35, 2949 49.75, 4171 71.65, 5899 71.91, \
             8343 75.38, 11799 97.90, 16686 143.97, 23598 154.04, 33373 160.89, 47197 169.85, \
             66747 185.25, 94395 181.54, 133495 172.90, 188791 173.40",
        );
        let (lv, beyond) = find_levels(&pts);
        assert_eq!(lv.len(), 3, "{lv:?}");
        assert!((2949 << 10..=5899 << 10).contains(&lv[2].bytes), "{lv:?}");
        assert!(lv[2].ns < 40.0, "{lv:?}");
        assert!((beyond.unwrap() - 172.9).abs() < 1.0);
    }

    #[test]
    fn spikes_do_not_move_the_knees() {
        let (lv, _) = find_levels(&curve(
            "4 1.0, 8 1.0, 16 9.0, 32 1.0, 64 4.0, 128 4.0, 256 4.0, 512 30.0, 1024 30.0, \
             2048 31.0, 4096 200.0, 8192 90.0, 16384 95.0, 32768 95.0, 65536 96.0",
        ));
        assert_eq!(lv.len(), 3, "{lv:?}");
        assert!(lv[0].bytes > 32 << 10 && lv[0].bytes < 64 << 10, "{lv:?}");
        assert!(lv[2].bytes > 2 << 20 && lv[2].bytes < 4 << 20, "{lv:?}");
    }

    #[test]
    fn unsettled_sweep_reports_l1_only() {
        let pts = curve("4 1.0, 8 1.0, 16 1.0, 32 4.0, 64 4.0, 128 8.0");
        let (lv, beyond) = find_levels(&pts);
        assert_eq!(lv.len(), 1, "{lv:?}");
        assert_eq!(beyond, None);
    }

    #[test]
    fn flat_curve_has_no_levels() {
        let pts = curve("4 2.0, 8 2.1, 16 2.0, 32 2.2, 64 2.1, 128 2.0");
        assert_eq!(find_levels(&pts), (Vec::new(), None));
    }

    fn batches(ns_per_load: &[f64], steps: u64) -> Vec<Batch> {
        let mut t = 1_000;
        ns_per_load
            .iter()
            .map(|&ns| {
                let start = t;
                t += (ns * steps as f64) as u64;
                Batch {
                    start_ns: start,
                    end_ns: t,
                    steps,
                    preempted: false,
                }
            })
            .collect()
    }

    #[test]
    fn windows_tile_the_batches_and_average_them() {
        // 100 batches of 1000 loads at 10 ns (10 us each), then 100 at 20 ns (20 us each).
        let mut ns = vec![10.0; 100];
        ns.extend(vec![20.0; 100]);
        let b = batches(&ns, 1000);
        let w = tile_windows(&b, 100_000, 0.0);
        assert_eq!(w.first().unwrap().start_ns, b[0].start_ns);
        assert_eq!(w.last().unwrap().end_ns, b.last().unwrap().end_ns);
        for pair in w.windows(2) {
            assert_eq!(pair[0].end_ns, pair[1].start_ns, "{w:?}");
        }
        assert!(w
            .iter()
            .all(|x| x.start_ns < x.end_ns && x.end_ns - x.start_ns >= 100_000));
        assert_eq!(w.len(), 10 + 20, "{w:?}");
        assert!(
            w[..10].iter().all(|x| (x.value - 10.0).abs() < 1e-9),
            "{w:?}"
        );
        assert!(
            w[10..].iter().all(|x| (x.value - 20.0).abs() < 1e-9),
            "{w:?}"
        );
    }

    #[test]
    fn a_short_last_window_is_merged_and_overhead_is_taken_out() {
        // 25 batches of 10 us in windows of 100 us: two full windows, and 5 batches (50 us,
        // half a window) left, which stand alone; with 24 batches the 40 us tail is merged.
        let b = batches(&[10.0; 25], 1000);
        assert_eq!(tile_windows(&b, 100_000, 0.0).len(), 3);
        let w = tile_windows(&b[..24], 100_000, 500.0);
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!(w[1].end_ns, b[23].end_ns);
        assert!((w[0].value - 9.5).abs() < 1e-9, "{w:?}");
        assert!(tile_windows(&[], 100_000, 0.0).is_empty());
    }

    #[test]
    fn preempted_batches_stay_out_of_the_window() {
        // One window of 10 batches at 10 ns per load; one batch was switched out for 1 ms.
        let mut b = batches(&[10.0; 10], 1000);
        b[4].end_ns += 1_000_000;
        for x in &mut b[5..] {
            x.start_ns += 1_000_000;
            x.end_ns += 1_000_000;
        }
        b[4].preempted = true;
        let w = tile_windows(&b, 50_000, 0.0);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w.iter().all(|x| (x.value - 10.0).abs() < 1e-9), "{w:?}");
        // Every batch preempted: the window keeps them all rather than report nothing.
        for x in &mut b {
            x.preempted = true;
        }
        let w = tile_windows(&b[4..6], 10_000_000, 0.0);
        assert_eq!(w.len(), 1);
        assert!(w[0].value > 100.0, "{w:?}");
    }

    #[test]
    fn a_few_slow_batches_do_not_move_the_window() {
        // 20 batches at 30 ns per load, 6 of them at 300 ns (the shared cache flushed by a
        // neighbour elsewhere): the window reports the typical batch, as the run's value does.
        let mut ns = vec![30.0; 20];
        for i in [2, 5, 9, 12, 15, 18] {
            ns[i] = 300.0;
        }
        let b = batches(&ns, 1000);
        let w = tile_windows(&b, 10_000_000, 0.0);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!((w[0].value - 30.0).abs() < 1e-9, "{w:?}");
        let run = isobench_common::median(&batch_ns(&b, 0.0));
        assert_eq!(w[0].value, run);
    }

    #[test]
    fn windows_tile_batches_with_gaps_between_them() {
        // Batches 10 us long with 1 us between them (the preemption check).
        let b: Vec<Batch> = (0..100u64)
            .map(|i| Batch {
                start_ns: i * 11_000,
                end_ns: i * 11_000 + 10_000,
                steps: 1000,
                preempted: false,
            })
            .collect();
        let w = tile_windows(&b, 100_000, 0.0);
        assert_eq!(w[0].start_ns, 0);
        assert!(w.windows(2).all(|p| p[0].end_ns == p[1].start_ns), "{w:?}");
        assert!(w.iter().all(|x| (x.value - 10.0).abs() < 1e-9), "{w:?}");
    }

    #[test]
    fn chase_batches_are_in_order_and_fill_the_budget() {
        let mut buf = ChaseBuf::new(64 << 10, true).unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        // SAFETY: 1024 * 64 bytes fit in the buffer; the ring lives in buf.
        let b = unsafe {
            let mut p = build_ring(&mut buf, 1024, LINE, Order::Random(1));
            chase_batches(&mut p, 4096, std::time::Duration::from_millis(20), &stop)
        };
        assert!(b.len() >= 2);
        assert!(b.iter().all(|x| x.start_ns < x.end_ns));
        assert!(b.windows(2).all(|w| w[0].end_ns <= w[1].start_ns));
        assert!(b.last().unwrap().end_ns - b[0].start_ns >= 20_000_000);
    }

    #[test]
    fn rings_visit_every_element_once() {
        let mut buf = ChaseBuf::new(1 << 20, true).unwrap();
        for order in [Order::Sequential, Order::Random(3)] {
            let n = 1000;
            // SAFETY: 1000 * 128 bytes fit in the buffer; the ring lives in buf.
            unsafe {
                let head = build_ring(&mut buf, n, 128, order);
                let mut seen = std::collections::HashSet::new();
                let mut p = head;
                for _ in 0..n {
                    assert!(seen.insert(p as usize));
                    p = chase(p, 1);
                }
                assert_eq!(p, head);
                assert_eq!(chase(head, n as u64 * 3), head);
            }
        }
    }

    #[test]
    fn sizes_fall_back_to_sysfs_when_nothing_was_measured() {
        let env = Env::detect();
        let p = CacheProfile {
            points: Vec::new(),
            levels: Vec::new(),
            beyond_ns: None,
            huge_pages: false,
            max_bytes: 0,
            elapsed_ms: 0.0,
            note: None,
        };
        let s = sizes_from(&env, &p);
        assert_eq!(s, cache_sizes_from_sysfs(&env));
        assert!(s.l1 <= s.l2 && s.l2 <= s.llc);
    }
}
