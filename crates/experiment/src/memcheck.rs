//! The memory-availability check (paper 000, VITS, section 4.1).
//!
//! A tenant whose workloads need more memory than it really has measures page faults and
//! paging, not isolation. VITS guards against that by touching every page the workloads will
//! need and timing each access: when the access time jumps, the process has reached the
//! memory bound it really has (which can be lower than its limit when the host is short of
//! memory, or a balloon driver took some back). isobench does the same before the first
//! trial: [`touch_and_time`] runs inside each tenant (`isobench memcheck`, spawned by the
//! real backend) and walks the memory in chunks, timing each; [`analyze`] finds the jump.
//! The orchestrator then waits and retries, or refuses the run with the numbers.

use std::time::Instant;

use isobench_common::median;
use serde::{Deserialize, Serialize};

use crate::backend::MemCheck;

/// Bytes touched between two timings.
pub const CHUNK: usize = 1 << 20;

/// Chunks in the rolling window compared with the base access time.
pub const WINDOW: usize = 8;

/// A window whose median page time is this many times the base is a jump...
pub const JUMP_FACTOR: f64 = 10.0;

/// ...and at least this much slower per page, ns (a page fault served from RAM costs well
/// under this; one served from swap or a balloon costs far more).
pub const JUMP_MIN_NS: f64 = 20_000.0;

/// Per-chunk timings of one walk, as `isobench memcheck` prints them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Walk {
    /// Bytes the walk was asked to touch.
    pub wanted: u64,
    /// Page size used.
    pub page: u64,
    /// Bytes per chunk.
    pub chunk: u64,
    /// Mean ns per page of each chunk, in order.
    pub page_ns: Vec<f64>,
    /// Why the walk stopped before `wanted`, when it did.
    pub stopped: Option<String>,
}

/// Touches `bytes` of fresh anonymous memory one page at a time, timing each 1 MiB chunk.
/// Stops early when `stop` says so (given the chunk index and its ns per page). Call it in a
/// process of its own: if the memory is not there, the kernel may kill it.
pub fn touch_and_time(bytes: u64, mut stop: impl FnMut(usize, f64) -> bool) -> Walk {
    let page = page_size();
    let chunks = (bytes as usize).div_ceil(CHUNK);
    let mut walk = Walk {
        wanted: bytes,
        page: page as u64,
        chunk: CHUNK as u64,
        page_ns: Vec::with_capacity(chunks),
        stopped: None,
    };
    let len = chunks * CHUNK;
    if len == 0 {
        return walk;
    }
    // SAFETY: a fresh private anonymous mapping; checked for failure below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        walk.stopped = Some(format!(
            "could not map {} bytes: {}",
            len,
            std::io::Error::last_os_error()
        ));
        return walk;
    }
    // No transparent huge pages: the check is about pages, one fault each.
    // SAFETY: advising our own mapping.
    unsafe { libc::madvise(p, len, libc::MADV_NOHUGEPAGE) };
    let base = p as *mut u8;
    for c in 0..chunks {
        let t = Instant::now();
        let mut off = c * CHUNK;
        let end = off + CHUNK;
        while off < end {
            // SAFETY: `off < len`, inside the mapping.
            unsafe { std::ptr::write_volatile(base.add(off), 1) };
            off += page;
        }
        let ns = t.elapsed().as_nanos() as f64 / (CHUNK / page) as f64;
        walk.page_ns.push(ns);
        if stop(c, ns) {
            walk.stopped = Some("stopped at the access-time jump".into());
            break;
        }
    }
    // SAFETY: unmapping what we mapped.
    unsafe { libc::munmap(p, len) };
    walk
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// Detects the jump in a walk's page times: the base is the median of the first chunks (at
/// least [`WINDOW`], at most a tenth of the walk); the jump is the first window of
/// [`WINDOW`] chunks whose median is [`JUMP_FACTOR`] times the base and at least
/// [`JUMP_MIN_NS`] slower per page. Returns the index of the first slow chunk of that window,
/// the base and the median page time from there on.
pub fn find_jump(page_ns: &[f64]) -> Option<(usize, f64, f64)> {
    if page_ns.len() < 2 * WINDOW {
        return None;
    }
    let base_n = (page_ns.len() / 10).max(WINDOW);
    let base = median(&page_ns[..base_n]);
    let slow = |x: f64| x >= base * JUMP_FACTOR && x - base >= JUMP_MIN_NS;
    let start = (base_n.saturating_sub(WINDOW)..=page_ns.len() - WINDOW)
        .find(|&i| slow(median(&page_ns[i..i + WINDOW])))?;
    // The jump is at the first slow chunk of that window; its size is the median after it.
    let knee = (start..start + WINDOW)
        .find(|&i| slow(page_ns[i]))
        .unwrap_or(start);
    Some((knee, base, median(&page_ns[knee..])))
}

/// Stops a walk early once the jump is certain (so the check does not push the tenant into
/// paging for long): keeps the last window in memory.
pub fn early_stop() -> impl FnMut(usize, f64) -> bool {
    let mut seen: Vec<f64> = Vec::new();
    move |_, ns| {
        seen.push(ns);
        find_jump(&seen).is_some()
    }
}

/// Summarises a walk.
pub fn analyze(walk: &Walk) -> MemCheck {
    let chunk = walk.chunk.max(1);
    let jump = find_jump(&walk.page_ns);
    let touched = match jump {
        Some((i, _, _)) => i as u64 * chunk,
        None => (walk.page_ns.len() as u64 * chunk).min(walk.wanted),
    };
    let base_n = (walk.page_ns.len() / 10)
        .max(WINDOW)
        .min(walk.page_ns.len());
    MemCheck {
        wanted: walk.wanted,
        touched,
        base_ns: match jump {
            Some((_, base, _)) => base,
            None if walk.page_ns.is_empty() => 0.0,
            None => median(&walk.page_ns[..base_n]),
        },
        jump_ns: jump.map(|j| j.2),
        knee: jump.map(|(i, _, _)| i as u64 * chunk),
        stopped: match (&walk.stopped, jump) {
            (Some(_), Some(_)) => None,
            (s, _) => s.clone(),
        },
    }
}

/// One sentence on a failed check, with the fix.
pub fn explain(tenant: &str, check: &MemCheck) -> String {
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    match (check.knee, &check.stopped) {
        (Some(k), _) => format!(
            "tenant {tenant}: page access time jumped from {:.2} us to {:.1} us after {:.0} MiB \
             of the {:.0} MiB its workloads need, so its real memory bound is below that and \
             trials would measure paging; free memory on the host, raise the tenant's memory, \
             or give the workloads smaller sizes",
            check.base_ns / 1e3,
            check.jump_ns.unwrap_or(0.0) / 1e3,
            mib(k),
            mib(check.wanted)
        ),
        (None, Some(why)) => format!(
            "tenant {tenant}: could not touch the {:.0} MiB its workloads need ({why}, after \
             {:.0} MiB); raise the tenant's memory limit or give the workloads smaller sizes",
            mib(check.wanted),
            mib(check.touched)
        ),
        (None, None) => format!(
            "tenant {tenant}: touched {:.0} of {:.0} MiB at {:.2} us per page",
            mib(check.touched),
            mib(check.wanted),
            check.base_ns / 1e3
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_walk_has_no_jump() {
        let w = Walk {
            wanted: 64 << 20,
            page: 4096,
            chunk: CHUNK as u64,
            page_ns: vec![300.0; 64],
            stopped: None,
        };
        let c = analyze(&w);
        assert!(c.ok(), "{c:?}");
        assert_eq!(c.touched, 64 << 20);
    }

    #[test]
    fn jump_is_found_where_paging_starts() {
        let mut v = vec![300.0; 40];
        v.extend(vec![90_000.0; 24]);
        let w = Walk {
            wanted: 64 << 20,
            page: 4096,
            chunk: CHUNK as u64,
            page_ns: v,
            stopped: None,
        };
        let c = analyze(&w);
        assert!(!c.ok());
        let knee = c.knee.unwrap() >> 20;
        assert!((36..=40).contains(&knee), "knee at {knee} MiB");
        assert!(explain("victim", &c).contains("jumped from 0.30 us to 90.0 us"));
    }

    #[test]
    fn a_few_slow_chunks_are_not_a_jump() {
        let mut v = vec![300.0; 64];
        v[30] = 1e6;
        v[31] = 1e6;
        assert!(find_jump(&v).is_none());
    }

    #[test]
    fn real_walk_of_a_little_memory_is_fine() {
        let w = touch_and_time(32 << 20, early_stop());
        let c = analyze(&w);
        assert_eq!(w.page_ns.len(), 32);
        assert!(c.ok(), "{c:?}");
    }
}
