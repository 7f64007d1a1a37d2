//! Small shared helpers: CPU pinning, aligned buffers, a seeded RNG, edit distance, the
//! states of a process group's members.

use std::alloc::{alloc_zeroed, dealloc, Layout};

use crate::{MetricSpec, Unsupported};

/// The metric of `table` named `name`. Panics when it is not there: a workload asking for a
/// metric it did not declare is a bug in the workload.
pub(crate) fn declared(table: &'static [MetricSpec], name: &str) -> &'static MetricSpec {
    table
        .iter()
        .find(|m| m.name == name)
        .expect("declared metric")
}

/// Ok when a TCP socket can listen on loopback here (the probes whose server is our own).
pub(crate) fn loopback_tcp() -> Result<(), Unsupported> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .map(drop)
        .map_err(|e| Unsupported::new(format!("cannot listen on loopback TCP: {e}")))
}

/// The state letters (`R`, `S`, `Z`, ...) of the processes of group `pgid` now, from their
/// `/proc/PID/stat`; `None` when `/proc` cannot be listed.
pub fn group_states(pgid: i32) -> Option<Vec<char>> {
    let procs = procfs::process::all_processes().ok()?;
    Some(
        procs
            .flatten()
            .filter_map(|p| p.stat().ok())
            .filter(|s| s.pgrp == pgid)
            .map(|s| s.state)
            .collect(),
    )
}

/// Pins the calling thread to one CPU.
pub fn pin_to_cpu(cpu: usize) -> std::io::Result<()> {
    pin_to_cpus(&[cpu])
}

/// Restricts the calling thread to a set of CPUs.
pub fn pin_to_cpus(cpus: &[usize]) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A zeroed heap buffer with a chosen alignment (O_DIRECT needs 4 KiB alignment).
pub struct AlignedBuf {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: AlignedBuf owns its allocation exclusively.
unsafe impl Send for AlignedBuf {}
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// Allocates `len` zeroed bytes aligned to `align` (a power of two).
    pub fn new(len: usize, align: usize) -> Self {
        let layout = Layout::from_size_align(len.max(1), align).expect("valid layout");
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuf { ptr, layout }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.layout.size()
    }

    /// True when empty (never, by construction).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes for the buffer's life.
        unsafe { std::slice::from_raw_parts(self.ptr, self.layout.size()) }
    }

    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for len bytes and uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in `new`.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

/// SplitMix64: a small, fast, seedable generator (Steele et al. 2014), enough for shuffling
/// rings and picking offsets reproducibly.
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// Next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Fisher-Yates shuffle.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_in_its_own_group() {
        // SAFETY: getpgrp and getpid cannot fail.
        let (pgrp, me) = unsafe { (libc::getpgrp(), libc::getpid()) };
        let states = group_states(pgrp).unwrap();
        assert!(!states.is_empty(), "the group of pid {me}");
        assert_eq!(group_states(-1), Some(Vec::new()));
    }

    #[test]
    fn aligned_buffers_are_aligned() {
        let b = AlignedBuf::new(8192, 4096);
        assert_eq!(b.as_slice().as_ptr() as usize % 4096, 0);
        assert_eq!(b.len(), 8192);
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut v: Vec<u32> = (0..100).collect();
        SplitMix64(7).shuffle(&mut v);
        let mut s = v.clone();
        s.sort();
        assert_eq!(s, (0..100).collect::<Vec<_>>());
        assert_ne!(v, s);
    }
}
