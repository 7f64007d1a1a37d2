//! `disk`: N threads alternating a sequential write pass and a sequential read pass over
//! their own file (the disk-intensive test of Matthews et al., `iozone -i0 -i1 -t 10`), with
//! the request size of VITS section 4.4 (1..16 blocks of 8 KiB).
//!
//! Each thread creates its file in the work directory (`isobench-disk-<pid>-<n>-<i>`) and
//! unlinks it at once, keeping only the open descriptor: the space comes back when the run
//! ends, and nothing is left behind even if the process is killed. The file is written
//! first (the read pass needs data), then read, then rewritten, and so on. Buffered mode goes
//! through the page cache like iozone without `-I` (`cache=keep`, default): a file that fits
//! in memory is read from the cache and rewritten in it, and writes reach the disk by the
//! kernel's writeback, unless `fsync` (the default) flushes each write pass to the device
//! (iozone `-e`; the pass is written back in windows as it goes, see below): without it, nothing of a 64 MiB file rewritten in the cache reached this
//! machine's disk in six seconds, while `stress-ng --hdd 1` wrote 716 MB/s there; with it the
//! stressor wrote 1085 MB/s. With `cache=drop` every pass reaches the device, as iozone's passes
//! do over a file larger than memory: a write pass ends by writing the file back and waiting
//! (`sync_file_range`) and dropping its pages (`posix_fadvise(DONTNEED)`), so the read pass
//! reads from the device through readahead. The wait serialises the passes: in two short
//! runs here `drop` degraded a neighbour's direct reads less than `keep`, not more. Flushing in
//! the stressor's own context also makes cgroup v1 blkio attribute (and limit) the writes;
//! direct mode (`O_DIRECT`, aligned buffers) puts every request on the device, one at a time
//! per thread.
//!
//! With fsync or cache=drop, a write pass is written back as it goes: each window (128 KiB at
//! first, so the first wait is short even under a low limit) is started with
//! `sync_file_range` and the one before it waited for, and the window halves after a wait
//! over 200 ms and doubles (up to 16 MiB) after one under 50 ms. A single flush at the end of
//! a 64 MiB pass under a tenant io limit of a few MB/s (cgroup v2 charges buffered writeback
//! to the writer's cgroup) waits for minutes in the kernel, where no stop flag is seen; with
//! the window, the waits stay near 200 ms once it has adapted (all threads share the limit),
//! and a pass stopped midway is not flushed. Flushed writes count as bytes moved once they
//! are on the device, not when they enter the page cache.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use isobench_common::format_size;
use serde::Deserialize;

use super::pool::{run_pool, Done, Shape};
use crate::params::{ParamKind, ParamSpec, ParamValues};
use crate::util::{AlignedBuf, SplitMix64};
use crate::{Class, Env, StressCtx, StressReport, Stressor, Unsupported};

/// The `disk` stressor.
pub struct Disk;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    threads: u32,
    blocks: Option<u32>,
    file_size: u64,
    direct: bool,
    fsync: bool,
    cache: String,
}

/// One block: requests are 1..=16 of these.
const BLOCK: u64 = 8 << 10;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "threads",
        help: "threads, each with its own file (iozone -t 10)",
        kind: ParamKind::Int { min: 1, max: 256 },
        default: "10",
    },
    ParamSpec {
        name: "blocks",
        help: "request size in 8 KiB blocks (auto: from intensity)",
        kind: ParamKind::Int { min: 1, max: 16 },
        default: "",
    },
    ParamSpec {
        name: "file_size",
        help: "bytes per thread's file (all files together are held under caps.max_bytes and \
               half the free space)",
        kind: ParamKind::Size {
            min: 128 << 10,
            max: 1 << 40,
        },
        default: "64M",
    },
    ParamSpec {
        name: "direct",
        help: "O_DIRECT requests (every request reaches the device) instead of buffered I/O",
        kind: ParamKind::Bool,
        default: "false",
    },
    ParamSpec {
        name: "fsync",
        help: "buffered mode: fdatasync after every write pass (iozone -e), so the pass reaches \
               the device; false leaves it to the kernel's writeback, which a file that fits \
               in memory may never reach",
        kind: ParamKind::Bool,
        default: "true",
    },
    ParamSpec {
        name: "cache",
        help: "buffered mode only: keep (leave the file in the page cache: reads are cache \
               hits, dirty pages are written back when the kernel decides) or drop (write each \
               pass back, wait, and drop the file's pages, so the read pass reads from the \
               device)",
        kind: ParamKind::Choice {
            options: &["keep", "drop"],
        },
        default: "keep",
    },
];

/// Distinguishes the files of concurrent runs in one process.
static RUN_SEQ: AtomicU64 = AtomicU64::new(0);

/// Request size in blocks for an intensity: ceil(16 x intensity / 100), 1..=16.
fn blocks_for(intensity: u8) -> u64 {
    (16 * u64::from(intensity)).div_ceil(100).clamp(1, 16)
}

/// Free bytes for an unprivileged writer on the filesystem of `dir`.
fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs fills a zeroed struct from a valid C string path.
    unsafe {
        let mut s: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut s) != 0 {
            return None;
        }
        Some(s.f_bavail as u64 * s.f_frsize as u64)
    }
}

/// Creates a file in `dir` and unlinks it at once; the open descriptor keeps it alive.
fn anonymous_file(dir: &Path, name: &str, direct: bool) -> anyhow::Result<File> {
    let path = dir.join(name);
    let mut oo = OpenOptions::new();
    oo.read(true).write(true).create_new(true);
    if direct {
        oo.custom_flags(libc::O_DIRECT);
    }
    let f = match oo.open(&path) {
        Ok(f) => f,
        Err(e) if direct && e.raw_os_error() == Some(libc::EINVAL) => {
            let _ = std::fs::remove_file(&path);
            anyhow::bail!(
                "disk: the filesystem of {} does not support O_DIRECT (tmpfs?): use direct=false \
                 or another --dir",
                dir.display()
            );
        }
        Err(e) => {
            return Err(e).with_context(|| format!("disk: creating {}", path.display()));
        }
    };
    std::fs::remove_file(&path).with_context(|| format!("disk: unlinking {}", path.display()))?;
    Ok(f)
}

/// `sync_file_range` over `[off, off + len)` with `flags`.
fn sync_range(file: &File, off: u64, len: u64, flags: libc::c_uint) -> anyhow::Result<()> {
    use std::os::fd::AsRawFd;
    if len == 0 {
        return Ok(());
    }
    // SAFETY: a plain system call on our own open descriptor.
    let rc = unsafe { libc::sync_file_range(file.as_raw_fd(), off as i64, len as i64, flags) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).context("disk: sync_file_range");
    }
    Ok(())
}

/// Drops the file's cached pages, so the next read pass reads from the device.
fn drop_pages(file: &File) {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain system call on our own open descriptor; length 0 means "to the end".
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
    }
}

/// Smallest and largest amount of a write pass a worker leaves in flight (written to the
/// page cache, its writeback started but not waited for) before it waits for the older part.
const MIN_WINDOW: u64 = 128 << 10;
const MAX_WINDOW: u64 = 16 << 20;
/// A wait for writeback longer than this halves the window, one shorter than a quarter of it
/// doubles it: the window follows what the device, or the tenant's io limit (cgroup v2
/// attributes buffered writeback to the writer's cgroup), drains, so a worker never sits in
/// an uninterruptible wait much longer than this and a stop is honoured promptly.
const TARGET_WAIT: Duration = Duration::from_millis(200);

/// Buffered writes that must reach the device (fsync or cache=drop), written back in windows
/// while the pass goes on (`sync_file_range`), rather than all at once at the end of a pass:
/// a single fdatasync of a whole pass waits for all of it, and under an io limit of a few
/// MB/s that is minutes, during which the worker cannot see the stop flag.
struct Flusher {
    /// Start of the part of this pass not yet known to be on the device.
    waited_to: u64,
    /// End of the part whose writeback was started.
    started_to: u64,
    /// Bytes to start writing back at once, adapted to how long the waits take.
    window: u64,
}

impl Flusher {
    fn new(req: u64) -> Self {
        Flusher {
            waited_to: 0,
            started_to: 0,
            window: MIN_WINDOW.max(req),
        }
    }

    /// After a write that ended at `pos`: once a window has been written since the last
    /// start, starts its writeback and waits for the previous window. Returns the bytes now
    /// known to be on the device.
    fn after_write(&mut self, file: &File, pos: u64, req: u64) -> anyhow::Result<u64> {
        if pos - self.started_to < self.window {
            return Ok(0);
        }
        let older = self.started_to;
        sync_range(
            file,
            self.started_to,
            pos - self.started_to,
            libc::SYNC_FILE_RANGE_WRITE,
        )?;
        self.started_to = pos;
        self.wait(file, older, req)
    }

    /// Writes back and waits for everything written in this pass up to `pos` (its end).
    fn finish_pass(&mut self, file: &File, pos: u64, req: u64) -> anyhow::Result<u64> {
        self.started_to = pos;
        let n = self.wait(file, pos, req)?;
        self.waited_to = 0;
        self.started_to = 0;
        Ok(n)
    }

    /// Halves the window after a long wait, doubles it after a short one.
    fn adapt(&mut self, took: Duration, req: u64) {
        if took > TARGET_WAIT {
            self.window = (self.window / 2).max(MIN_WINDOW).max(req);
        } else if took < TARGET_WAIT / 4 {
            self.window = (self.window * 2).min(MAX_WINDOW).max(req);
        }
    }

    /// Waits until `[waited_to, to)` is on the device and adapts the window to the wait.
    fn wait(&mut self, file: &File, to: u64, req: u64) -> anyhow::Result<u64> {
        let from = self.waited_to;
        if to <= from {
            return Ok(0);
        }
        let t0 = Instant::now();
        sync_range(
            file,
            from,
            to - from,
            libc::SYNC_FILE_RANGE_WAIT_BEFORE
                | libc::SYNC_FILE_RANGE_WRITE
                | libc::SYNC_FILE_RANGE_WAIT_AFTER,
        )?;
        self.adapt(t0.elapsed(), req);
        self.waited_to = to;
        Ok(to - from)
    }
}

struct Worker {
    file: File,
    buf: AlignedBuf,
    size: u64,
    pos: u64,
    writing: bool,
    fsync: bool,
    /// Buffered mode with cache=drop: flush and drop the file after each write pass.
    drop_cache: bool,
    /// Buffered mode with fsync or cache=drop: writes are counted once on the device.
    flusher: Option<Flusher>,
    /// The run's stop flag: a pass that ends after it is set is not flushed.
    stop: Arc<AtomicBool>,
}

impl Worker {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn step(&mut self) -> anyhow::Result<Done> {
        let req = self.buf.len() as u64;
        let n = if self.writing {
            // A changing first word, so no layer can deduplicate the requests.
            self.buf.as_mut_slice()[..8].copy_from_slice(&self.pos.to_ne_bytes());
            self.file
                .write_at(self.buf.as_slice(), self.pos)
                .context("disk: write")?
        } else {
            self.file
                .read_at(self.buf.as_mut_slice(), self.pos)
                .context("disk: read")?
        };
        self.pos += req;
        // Bytes moved: reads and direct or unflushed buffered writes when the call returns,
        // flushed buffered writes once they are on the device (not when queued in the cache).
        let mut bytes = n as u64;
        let pass_ends = n == 0 || self.pos + req > self.size;
        if self.writing {
            if let Some(f) = self.flusher.as_mut() {
                bytes = 0;
                if !pass_ends && !self.stop.load(Ordering::Relaxed) {
                    bytes = f.after_write(&self.file, self.pos, req)?;
                }
            }
        }
        if pass_ends {
            // A stop set during the pass skips its final flush: waiting for it is what made a
            // throttled tenant miss the stop, and its bytes are not counted.
            if self.writing && !self.stopping() {
                if let Some(f) = self.flusher.as_mut() {
                    bytes += f.finish_pass(&self.file, self.pos, req)?;
                }
                if self.fsync {
                    self.file.sync_data().context("disk: fdatasync")?;
                }
                if self.drop_cache {
                    drop_pages(&self.file);
                }
            }
            if let Some(f) = self.flusher.as_mut() {
                f.waited_to = 0;
                f.started_to = 0;
            }
            self.pos = 0;
            self.writing = !self.writing;
        }
        Ok(Done::new(1, bytes))
    }
}

impl Stressor for Disk {
    fn name(&self) -> &'static str {
        "disk"
    }
    fn help(&self) -> &'static str {
        "N threads (default 10, as iozone -t 10) each alternating a sequential write pass and \
         a sequential read pass over its own file (iozone -i0 -i1), buffered or O_DIRECT, \
         requests of 1..16 x 8 KiB. Files are unlinked as soon as they are created. One \
         operation is one read or write request. Pressure: bytes_per_sec and iops (requests \
         issued; buffered requests may be served by the page cache). Buffered writes leave \
         dirty pages that are written back even while the tenant is frozen (lingering)."
    }
    fn class(&self) -> Class {
        Class::Disk
    }
    fn intensity_knob(&self) -> &'static str {
        "request size: ceil(16 x intensity / 100) blocks of 8 KiB (1 = 8 KiB ... 100 = 128 \
         KiB); the blocks parameter overrides it; 0 = idle"
    }
    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }
    fn aggressive(&self) -> bool {
        true
    }
    fn supported(&self, env: &Env) -> Result<(), Unsupported> {
        let name = format!("isobench-disk-check-{}", std::process::id());
        anonymous_file(&env.workdir, &name, false)
            .map(drop)
            .map_err(|e| {
                Unsupported::new(format!(
                    "work directory {} is not writable: {e:#}",
                    env.workdir.display()
                ))
            })
    }
    fn lingering_effect(&self, params: &ParamValues) -> Option<&'static str> {
        // Undecodable parameters fail in `run`; until then assume the default (buffered).
        let direct = params
            .decode::<Opts>(self.name())
            .map(|o| o.direct)
            .unwrap_or(false);
        (!direct).then_some(
            "buffered writes leave dirty page cache, which the kernel writes back while the \
             tenant is frozen",
        )
    }
    fn run(&self, ctx: &StressCtx, params: &ParamValues) -> anyhow::Result<StressReport> {
        let o: Opts = params.decode(self.name())?;
        let req = o.blocks.map_or(blocks_for(ctx.intensity), u64::from) * BLOCK;
        let unit = format!("read or write request of {}", format_size(req));
        if ctx.intensity == 0 {
            return Ok(super::pool::idle_report(ctx, unit));
        }
        let threads = o.threads.min(ctx.caps.max_tasks.unwrap_or(u32::MAX)).max(1);
        let mut notes = vec![format!(
            "request={} mode={}{}{}",
            format_size(req),
            if o.direct { "direct" } else { "buffered" },
            if o.fsync && !o.direct { "+fsync" } else { "" },
            if o.direct {
                ""
            } else if o.cache == "drop" {
                " cache=drop"
            } else {
                " cache=keep"
            }
        )];
        // All files together under the caps and half the free space.
        let mut total = o.file_size.saturating_mul(u64::from(threads));
        if let Some(cap) = ctx.caps.max_bytes {
            total = total.min(cap);
        }
        if let Some(free) = free_bytes(&ctx.workdir) {
            if total > free / 2 {
                notes.push(format!(
                    "files reduced to half of the {} free in {}",
                    format_size(free),
                    ctx.workdir.display()
                ));
                total = free / 2;
            }
        }
        let size = (total / u64::from(threads)).min(o.file_size) / req * req;
        anyhow::ensure!(
            size >= req,
            "disk: {} per file (from file_size, caps.max_bytes and the free space for {threads} \
             threads) is less than one {} request",
            format_size(size),
            format_size(req)
        );
        notes.push(format!("threads={threads} file_size={}", format_size(size)));
        let seq = RUN_SEQ.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let out = run_pool(
            ctx,
            self.name(),
            Shape::busy(threads),
            |i| {
                let name = format!("isobench-disk-{pid}-{seq}-{i}");
                let file = anonymous_file(&ctx.workdir, &name, o.direct)?;
                let mut buf = AlignedBuf::new(req as usize, 4096);
                let mut rng = SplitMix64(seq << 16 | i as u64);
                for chunk in buf.as_mut_slice().chunks_mut(8) {
                    let w = rng.next_u64().to_ne_bytes();
                    chunk.copy_from_slice(&w[..chunk.len()]);
                }
                Ok(Worker {
                    file,
                    buf,
                    size,
                    pos: 0,
                    writing: true,
                    fsync: o.fsync && !o.direct,
                    drop_cache: !o.direct && o.cache == "drop",
                    flusher: (!o.direct && (o.fsync || o.cache == "drop"))
                        .then(|| Flusher::new(req)),
                    stop: ctx.stop.clone(),
                })
            },
            Worker::step,
        )?;
        let pressure = vec![out.bytes_per_sec(), out.ops_rate("iops", "IO/s")];
        let mut r = out.report(unit, notes);
        r.pressure = pressure;
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(settings: &[&str]) -> ParamValues {
        ParamValues::from_settings("disk", PARAMS, settings).unwrap()
    }

    #[test]
    fn buffered_writes_linger_direct_io_does_not() {
        assert!(
            Disk.lingering_effect(&params(&[])).is_some(),
            "default is buffered"
        );
        assert!(Disk
            .lingering_effect(&params(&["direct=false", "fsync=true"]))
            .is_some());
        assert_eq!(Disk.lingering_effect(&params(&["direct=true"])), None);
    }

    #[test]
    fn request_size_follows_intensity() {
        assert_eq!(blocks_for(1), 1);
        assert_eq!(blocks_for(6), 1);
        assert_eq!(blocks_for(7), 2);
        assert_eq!(blocks_for(50), 8);
        assert_eq!(blocks_for(100), 16);
    }

    #[test]
    fn the_flush_window_follows_the_waits() {
        let req = 128 << 10;
        let mut f = Flusher::new(req);
        let start = f.window;
        for _ in 0..20 {
            f.adapt(TARGET_WAIT * 10, req);
        }
        assert_eq!(
            f.window, MIN_WINDOW,
            "long waits shrink the window to its floor"
        );
        f.adapt(TARGET_WAIT, req);
        assert_eq!(f.window, MIN_WINDOW, "a wait on target keeps it");
        for _ in 0..20 {
            f.adapt(Duration::ZERO, req);
        }
        assert_eq!(f.window, MAX_WINDOW, "short waits grow it to its ceiling");
        assert_eq!(
            start, MIN_WINDOW,
            "the first wait is for the smallest window"
        );
        let mut big = Flusher::new(MAX_WINDOW * 2);
        big.adapt(TARGET_WAIT * 10, MAX_WINDOW * 2);
        assert_eq!(big.window, MAX_WINDOW * 2, "never below one request");
    }

    fn worker(dir: &Path, size: u64, req: u64) -> Worker {
        let file = anonymous_file(dir, &format!("isobench-disk-test-{size}"), false).unwrap();
        Worker {
            file,
            buf: AlignedBuf::new(req as usize, 4096),
            size,
            pos: 0,
            writing: true,
            fsync: true,
            drop_cache: false,
            flusher: Some(Flusher::new(req)),
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    #[test]
    fn a_flushed_pass_counts_its_bytes_once_written_back() {
        let dir = tempfile::tempdir().unwrap();
        let req = 128 << 10;
        let size = 4 << 20;
        let mut w = worker(dir.path(), size, req);
        let mut bytes = 0;
        while w.writing {
            bytes += w.step().unwrap().bytes;
        }
        assert_eq!(bytes, size, "every byte of the pass, once flushed");
        let f = w.flusher.as_ref().unwrap();
        assert_eq!((f.waited_to, f.started_to), (0, 0));
    }

    #[test]
    fn a_pass_stopped_midway_ends_without_flushing_or_counting_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let req = 128 << 10;
        let size = 16 << 20;
        let mut w = worker(dir.path(), size, req);
        let mut bytes = 0;
        for _ in 0..8 {
            bytes += w.step().unwrap().bytes;
        }
        let waited = w.flusher.as_ref().unwrap().waited_to;
        assert_eq!(bytes, waited, "only what was waited for is counted");
        w.stop.store(true, Ordering::SeqCst);
        // The rest of the pass: nothing more is written back or counted, and the pass ends.
        let mut after = 0;
        while w.writing {
            after += w.step().unwrap().bytes;
        }
        assert_eq!(
            after, 0,
            "writes after the stop are not counted as delivered"
        );
        assert_eq!(w.pos, 0);
    }
}
