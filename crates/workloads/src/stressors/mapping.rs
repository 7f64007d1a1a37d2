//! Anonymous memory mappings owned by a stressor and unmapped when dropped.
//!
//! Stressors map their working memory directly (not through the allocator) so that large
//! regions go back to the system the moment a run ends, so that the memory hog can map
//! without touching (the VITS variant), and so that the cache and copy buffers can ask for
//! transparent huge pages: the walk then contends for cache, not for the TLB.

use anyhow::Context as _;

/// Maps `len` bytes of anonymous memory, readable and writable, with `flags`
/// (`MAP_PRIVATE` or `MAP_SHARED`); `None` when the kernel refuses (errno says why). A bare
/// system call: safe in a forked child of a threaded process, which must not allocate.
pub(crate) fn map_anon(len: usize, flags: libc::c_int) -> Option<*mut u8> {
    // SAFETY: an anonymous mapping with no address hint; the result is checked.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p.cast())
}

/// A private anonymous mapping, page-aligned, unmapped on drop.
pub(crate) struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned exclusively; sharing `&Mapping` only gives out reads of the
// pointer value, and mutation goes through `&mut`.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes (rounded up to whole pages) readable and writable, untouched: no
    /// physical page is used until written.
    pub fn new(len: usize) -> anyhow::Result<Self> {
        let len = len.max(1);
        let Some(ptr) = map_anon(len, libc::MAP_PRIVATE) else {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("mapping {len} bytes of memory"));
        };
        Ok(Mapping { ptr, len })
    }

    /// Like [`Mapping::new`], asking for transparent huge pages (a hint; ignored where THP
    /// is off).
    pub fn new_huge(len: usize) -> anyhow::Result<Self> {
        let m = Self::new(len)?;
        // SAFETY: the range is exactly our mapping; madvise only changes paging policy.
        unsafe { libc::madvise(m.ptr.cast(), m.len, libc::MADV_HUGEPAGE) };
        Ok(m)
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Start address.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: valid for len bytes for the mapping's life.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: valid for len bytes and uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the range mapped in `new`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}
