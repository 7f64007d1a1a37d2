//! `disk-io`: file I/O throughput and per-request latency.
//!
//! The VITS file-I/O probe (seed 000, sections 4.4 and 5.4) on one file of `blocks` x
//! `block_size` (20,000 x 8 KiB = 160 MB by default), plus random read and fsync-write from
//! Rzecki et al. (seed 002). The operations, always run in this order:
//!
//! | op | what is timed |
//! |---|---|
//! | `write` | buffered sequential writes to the new (empty) file, then one `fsync` (included, as `iozone -e`), so the figure is the device's and not only the page cache's |
//! | `rewrite` | the same over the existing blocks, then one `fsync` |
//! | `read` | cold buffered sequential read: the file's own pages are dropped first (`fsync` + `posix_fadvise(DONTNEED)` on this file only, never the host's whole cache); `pread` of `block_size` each, with no access-pattern advice (the kernel's default readahead) |
//! | `reread` | buffered sequential read of pages just read (warm cache) |
//! | `dioread` | `O_DIRECT` sequential read |
//! | `diowrite` | `O_DIRECT` sequential overwrite |
//! | `randread` | `O_DIRECT` reads at seeded random 4 KiB-aligned offsets, `blocks` of them |
//! | `fsyncwrite` | buffered write + `fsync` (or `fdatasync`) of every block, `sync_blocks` of them, overwriting the first blocks of the laid-out file in place (no allocation, no size change); the file's pages are dropped first, so every write lands on a page not in the cache whatever op ran before |
//!
//! Each op reports MB/s (10^6 bytes per second, over the whole op) and the latency of its
//! individual requests in microseconds (mean, p50, p99, p99.9, max, with the histogram).
//! The file lives in `dir` (default: the run's work directory), is named `isobench-disk-io-*`
//! and is removed at the end, also on error or stop. `bytes_written` counts every byte this
//! run wrote (including the untimed fill when a read op runs without `write`) and
//! `file_bytes` is the file's size as the filesystem reported it before removal.
//!
//! How these differ from fio's jobs of the same names (`bench/compare.py` runs fio the same
//! way, so the ratios compare like with like):
//! - `read` reads a file this probe wrote moments before (the untimed fill, or `write` and
//!   `rewrite`), as iozone's read follows its write. On a virtual disk whose host caches
//!   writes, the host may still be writing that data back during the read: here a read
//!   right after the write ran at 0.6-0.8 of the same read ten seconds later, which is the
//!   gap to fio reading a file laid out long before. The probe gives no access advice;
//!   fio's default `fadvise_hint=1` calls `posix_fadvise(SEQUENTIAL)`, which doubles the
//!   file's readahead window. Compare with `fio --fadvise_hint=0` on a freshly written file.
//! - `fsyncwrite` overwrites allocated blocks, so `fsync` writes the block and flushes the
//!   device cache, and commits the journal only when the write changed the file's
//!   timestamps (at most once per clock tick): fio `rw=write fsync=1` over a laid-out file
//!   with `invalidate=1` does the same. fio's figure also counts opening the file and its
//!   `fadvise` calls and rounds its runtime up to whole milliseconds, which weighs on a
//!   job of a few tens of ms.
//!
//! The counts, not the run's budget, decide how long this probe runs (about 1-3 s here at
//! the defaults); `ctx.stop` aborts it.
//!
//! With a window length (`ctx.window`) the budget decides instead: each op runs for its
//! share of the budget, going round its `blocks` (or `sync_blocks`) requests again as often
//! as needed (a cold `read` drops the file's pages before each new round; `write` becomes
//! an overwrite after the first round), and its MB/s, latency mean and p50 also come as
//! window series over the op (MB/s from the requests completed in each window, with
//! `write`'s and `rewrite`'s closing fsync in the last windows; p50 the window's median
//! request; p99 and p99.9 only when every window holds enough requests, see `series`).
//! Filling the file for a read op, and warming the cache for `reread`, happen before the
//! op's measured interval, and so does dropping the pages before each new round of a cold
//! `read` or of `fsyncwrite`: the op's MB/s counts its requests only (the window series
//! stay on the wall clock, where such a drop shows as a gap).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use isobench_common::format_size;
use serde::Deserialize;

use crate::metric::{latency_metrics, LatencyHistogram, Metric, MetricSpec};
use crate::params::{ParamKind, ParamSpec, ParamValues};
use crate::probes::io_net::{hist_record, metric_table};
use crate::probes::series::{attach_latency, rate_series, Event};
use crate::timer::now_ns;
use crate::util::{AlignedBuf, SplitMix64};
use crate::{Class, Env, Probe, ProbeCtx, Unsupported};

/// The `disk-io` probe.
pub struct DiskIo;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    blocks: u64,
    block_size: u64,
    ops: String,
    dir: Option<String>,
    sync_blocks: u64,
    sync: String,
    seed: u64,
}

/// Every op, in the order they run.
const OPS: &[&str] = &[
    "write",
    "rewrite",
    "read",
    "reread",
    "dioread",
    "diowrite",
    "randread",
    "fsyncwrite",
];

/// O_DIRECT alignment: offsets, lengths and buffers are multiples of this.
const ALIGN: u64 = 4096;

/// Free space kept on top of the file, so the probe never fills a filesystem.
const SPARE_BYTES: u64 = 256 << 20;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "blocks",
        help: "blocks per op (VITS: 20,000)",
        kind: ParamKind::Int {
            min: 1,
            max: 100_000_000,
        },
        default: "20000",
    },
    ParamSpec {
        name: "block_size",
        help: "bytes per request, a multiple of 4K (VITS: 8K)",
        kind: ParamKind::Size {
            min: 4096,
            max: 64 << 20,
        },
        default: "8K",
    },
    ParamSpec {
        name: "ops",
        help: "`all` or a comma list of write, rewrite, read, reread, dioread, diowrite, \
               randread, fsyncwrite (they always run in that order)",
        kind: ParamKind::Text,
        default: "all",
    },
    ParamSpec {
        name: "dir",
        help: "directory for the test file, on the filesystem to measure (not tmpfs: it \
               refuses O_DIRECT); empty = the run's work directory",
        kind: ParamKind::Text,
        default: "",
    },
    ParamSpec {
        name: "sync_blocks",
        help: "blocks written by fsyncwrite (at most `blocks`; each waits for the device, \
               1-5 ms here)",
        kind: ParamKind::Int {
            min: 1,
            max: 100_000_000,
        },
        default: "300",
    },
    ParamSpec {
        name: "sync",
        help: "the call fsyncwrite makes after every block",
        kind: ParamKind::Choice {
            options: &["fsync", "fdatasync"],
        },
        default: "fsync",
    },
    ParamSpec {
        name: "seed",
        help: "seed of randread's offsets and of the data written",
        kind: ParamKind::Int {
            min: 0,
            max: i64::MAX,
        },
        default: "1",
    },
];

const METRICS: &[MetricSpec] = metric_table![
    "write_mbps" "MB/s" Higher HarmonicMean;
    lat "write_lat" "us";
    "rewrite_mbps" "MB/s" Higher HarmonicMean;
    lat "rewrite_lat" "us";
    "read_mbps" "MB/s" Higher HarmonicMean;
    lat "read_lat" "us";
    "reread_mbps" "MB/s" Higher HarmonicMean;
    lat "reread_lat" "us";
    "dioread_mbps" "MB/s" Higher HarmonicMean;
    lat "dioread_lat" "us";
    "diowrite_mbps" "MB/s" Higher HarmonicMean;
    lat "diowrite_lat" "us";
    "randread_mbps" "MB/s" Higher HarmonicMean;
    lat "randread_lat" "us";
    "fsyncwrite_mbps" "MB/s" Higher HarmonicMean;
    lat "fsyncwrite_lat" "us";
    "bytes_written" "B" Higher Total;
    "file_bytes" "B" Higher Max;
];

fn spec(name: &str) -> &'static MetricSpec {
    crate::util::declared(METRICS, name)
}

impl Probe for DiskIo {
    fn name(&self) -> &'static str {
        "disk-io"
    }
    fn help(&self) -> &'static str {
        "File I/O on 20,000 x 8 KiB blocks (VITS): write, rewrite (each with its closing fsync), \
         cold read (the file's pages dropped first; plain pread with no fadvise hint, of a \
         file written moments before, as iozone reads after writing: on a virtual disk \
         whose host caches writes this is slower than fio reading an old file with its \
         default fadvise_hint=1), reread, O_DIRECT read and write, O_DIRECT random read \
         (4K-aligned, seeded) and write+fsync per block (an in-place overwrite of the first \
         sync_blocks blocks with none of the file's pages cached, as fio rw=write fsync=1 \
         invalidate=1 on a laid-out file): MB/s per op and per-request latency (us, \
         p50/p99/p99.9 with the histogram). Setup (filling, dropping pages) is never timed. \
         The file is removed at the end. \
         With a window length the budget decides how long each op runs (its share, going \
         round the file again as needed) and MB/s, mean and p50 latency also come as window \
         series"
    }
    fn windowed(&self) -> bool {
        true
    }
    fn class(&self) -> Class {
        Class::Disk
    }
    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }
    fn metrics(&self) -> &'static [MetricSpec] {
        METRICS
    }
    fn supported(&self, env: &Env) -> Result<(), Unsupported> {
        check_dir(&env.workdir, true).map_err(Unsupported::new)
    }
    fn run(&self, ctx: &ProbeCtx, params: &ParamValues) -> anyhow::Result<Vec<Metric>> {
        let o: Opts = params.decode(self.name())?;
        let ops = parse_ops(&o.ops)?;
        if o.block_size % ALIGN != 0 {
            bail!(
                "disk-io: block_size={} is not a multiple of 4K (O_DIRECT needs aligned requests)",
                format_size(o.block_size)
            );
        }
        let dir = match o.dir.as_deref().map(str::trim) {
            Some(d) if !d.is_empty() => PathBuf::from(d),
            _ => ctx.workdir.clone(),
        };
        let needs_direct = ops
            .iter()
            .any(|op| matches!(*op, "dioread" | "diowrite" | "randread"));
        check_dir(&dir, needs_direct).map_err(|e| anyhow::anyhow!("disk-io: {e}"))?;
        let size = o
            .blocks
            .checked_mul(o.block_size)
            .context("disk-io: blocks x block_size overflows")?;
        let free = free_bytes(&dir)?;
        if free < size + SPARE_BYTES {
            bail!(
                "disk-io: the file would be {} but {} has only {} free (keeping {} spare): \
                 lower blocks or pick another dir",
                format_size(size),
                dir.display(),
                format_size(free),
                format_size(SPARE_BYTES)
            );
        }
        ctx.pin_self()?;
        let file = TestFile::create(&dir)?;
        let r = Runner::new(ctx, &o, &file, size).and_then(|mut r| r.run_all(&ops));
        // The guard removes the file on every path; report the metrics only after that.
        drop(file);
        r
    }
}

fn parse_ops(text: &str) -> anyhow::Result<Vec<&'static str>> {
    let text = text.trim();
    if text.is_empty() || text == "all" {
        return Ok(OPS.to_vec());
    }
    let mut chosen = Vec::new();
    for w in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        if !OPS.contains(&w) {
            let near = crate::nearest_names(w, OPS.iter().copied());
            let hint = if near.is_empty() {
                String::new()
            } else {
                format!(" (did you mean `{}`?)", near.join("`, `"))
            };
            bail!(
                "disk-io: unknown op `{w}`{hint}; ops are all or a comma list of {}",
                OPS.join(", ")
            );
        }
        chosen.push(w);
    }
    Ok(OPS.iter().copied().filter(|o| chosen.contains(o)).collect())
}

/// The test file; removed when dropped.
struct TestFile {
    path: PathBuf,
    file: File,
}

impl TestFile {
    fn create(dir: &Path) -> anyhow::Result<TestFile> {
        let path = unique_path(dir, "isobench-disk-io");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("disk-io: creating {}", path.display()))?;
        Ok(TestFile { path, file })
    }

    fn open_direct(&self) -> anyhow::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(&self.path)
            .with_context(|| format!("disk-io: opening {} with O_DIRECT", self.path.display()))
    }
}

impl Drop for TestFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn unique_path(dir: &Path, prefix: &str) -> PathBuf {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    dir.join(format!(
        "{prefix}-{}-{}-{n}.dat",
        std::process::id(),
        now_ns()
    ))
}

/// Checks that `dir` is a writable directory and, when `direct`, that O_DIRECT works there.
fn check_dir(dir: &Path, direct: bool) -> Result<(), String> {
    let md = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !md.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    if let Some(kind) = fs_type(dir).and_then(memory_fs) {
        return Err(format!(
            "{} is on {kind}, which keeps files in memory (and refuses or fakes O_DIRECT): \
             set dir= to a directory on a disk filesystem (ext4, xfs)",
            dir.display()
        ));
    }
    let path = unique_path(dir, "isobench-disk-io-check");
    let mut opts = OpenOptions::new();
    opts.read(true).write(true).create_new(true).mode(0o600);
    if direct {
        opts.custom_flags(libc::O_DIRECT);
    }
    let f = match opts.open(&path) {
        Ok(f) => f,
        Err(e) if direct && e.raw_os_error() == Some(libc::EINVAL) => {
            return Err(no_direct(dir));
        }
        Err(e) => {
            return Err(format!(
                "cannot create a file in {}: {e} (set dir= to a writable directory)",
                dir.display()
            ))
        }
    };
    let r = (|| -> io::Result<()> {
        if direct {
            let mut b = AlignedBuf::new(ALIGN as usize, ALIGN as usize);
            b.as_mut_slice()[0] = 1;
            f.write_all_at(b.as_slice(), 0)?;
            let mut back = AlignedBuf::new(ALIGN as usize, ALIGN as usize);
            f.read_exact_at(back.as_mut_slice(), 0)?;
        } else {
            f.write_all_at(b"x", 0)?;
        }
        Ok(())
    })();
    drop(f);
    let _ = std::fs::remove_file(&path);
    match r {
        Ok(()) => Ok(()),
        Err(e) if direct && e.raw_os_error() == Some(libc::EINVAL) => Err(no_direct(dir)),
        Err(e) => Err(format!("cannot write in {}: {e}", dir.display())),
    }
}

fn no_direct(dir: &Path) -> String {
    format!(
        "the filesystem of {} refuses O_DIRECT: set dir= to a directory on a disk filesystem \
         (ext4, xfs), or run only the buffered ops (ops=write,rewrite,read,reread,fsyncwrite)",
        dir.display()
    )
}

/// Names the filesystems that live in memory (statfs magic numbers).
fn memory_fs(magic: i64) -> Option<&'static str> {
    match magic {
        0x0102_1994 => Some("tmpfs"),
        0x8584_58f6 => Some("ramfs"),
        _ => None,
    }
}

fn statfs(dir: &Path) -> Option<libc::statfs> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: c is a valid C string; st is plain data written by statfs.
    unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        (libc::statfs(c.as_ptr(), &mut st) == 0).then_some(st)
    }
}

fn fs_type(dir: &Path) -> Option<i64> {
    // `f_type` is i64 on x86_64 but narrower on other targets.
    #[allow(clippy::unnecessary_cast)]
    statfs(dir).map(|s| s.f_type as i64)
}

fn free_bytes(dir: &Path) -> anyhow::Result<u64> {
    let st = statfs(dir).with_context(|| format!("disk-io: statfs {}", dir.display()))?;
    // The field types differ between targets.
    #[allow(clippy::unnecessary_cast)]
    let free = st.f_bavail as u64 * st.f_bsize as u64;
    Ok(free)
}

struct Runner<'a> {
    ctx: &'a ProbeCtx,
    o: &'a Opts,
    file: &'a TestFile,
    direct: Option<File>,
    buf: AlignedBuf,
    size: u64,
    /// The file holds `size` bytes of data.
    filled: bool,
    /// The file's pages are in the page cache (a buffered read just ran).
    cached: bool,
    bytes_written: u64,
    /// How many ops share the budget (with a window length, each op runs for its share).
    parts: usize,
    out: Vec<Metric>,
}

impl<'a> Runner<'a> {
    fn new(ctx: &'a ProbeCtx, o: &'a Opts, file: &'a TestFile, size: u64) -> anyhow::Result<Self> {
        let mut buf = AlignedBuf::new(o.block_size as usize, ALIGN as usize);
        // Incompressible data, so a virtual disk that compresses or deduplicates does not
        // flatter the figures.
        let mut rng = SplitMix64(o.seed ^ 0x6469_736b);
        for chunk in buf.as_mut_slice().chunks_mut(8) {
            let r = rng.next_u64().to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
        Ok(Runner {
            ctx,
            o,
            file,
            direct: None,
            buf,
            size,
            filled: false,
            cached: false,
            bytes_written: 0,
            parts: 1,
            out: Vec::new(),
        })
    }

    fn run_all(&mut self, ops: &[&'static str]) -> anyhow::Result<Vec<Metric>> {
        self.parts = ops.len();
        for &op in ops {
            self.run_op(op)
                .with_context(|| format!("disk-io {op} in {}", self.file.path.display()))?;
        }
        let st = self.file.file.metadata()?;
        let mut out = std::mem::take(&mut self.out);
        out.push(spec("bytes_written").value(self.bytes_written as f64));
        out.push(spec("file_bytes").value(st.len() as f64));
        Ok(out)
    }

    /// Opens the O_DIRECT descriptor once.
    fn direct(&mut self) -> anyhow::Result<()> {
        if self.direct.is_none() {
            self.direct = Some(self.file.open_direct()?);
        }
        Ok(())
    }

    fn run_op(&mut self, op: &'static str) -> anyhow::Result<()> {
        let bs = self.o.block_size;
        let n = self.o.blocks;
        if op != "write" && !self.filled {
            self.fill()?;
        }
        let (bs_done, r) = match op {
            "write" | "rewrite" => {
                let f = &self.file.file;
                let buf = self.buf.as_slice();
                let r = timed(
                    self.ctx,
                    n,
                    self.parts,
                    |i| f.write_all_at(buf, i * bs),
                    || Ok(()),
                    || f.sync_all(),
                )?;
                self.bytes_written += r.ops * bs;
                self.filled = true;
                self.cached = false;
                (bs, r)
            }
            "read" | "reread" => {
                if op == "read" {
                    drop_cache(&self.file.file)?;
                } else if !self.cached {
                    // reread means re-reading what was just read: warm the cache first.
                    self.read_pass()?;
                }
                let f = &self.file.file;
                let buf = self.buf.as_mut_slice();
                // Going round again, a cold read drops the pages it read first.
                let cold = op == "read";
                let r = timed(
                    self.ctx,
                    n,
                    self.parts,
                    |i| f.read_exact_at(buf, i * bs),
                    || if cold { drop_cache_io(f) } else { Ok(()) },
                    || Ok(()),
                )?;
                self.cached = true;
                (bs, r)
            }
            "dioread" | "randread" => (bs, self.direct_read(op == "randread")?),
            "diowrite" => {
                self.direct()?;
                let f = self.direct.as_ref().expect("opened");
                let buf = self.buf.as_slice();
                let r = timed(
                    self.ctx,
                    n,
                    self.parts,
                    |i| f.write_all_at(buf, i * bs),
                    || Ok(()),
                    || Ok(()),
                )?;
                self.bytes_written += r.ops * bs;
                self.cached = false;
                (bs, r)
            }
            "fsyncwrite" => (bs, self.fsync_write()?),
            _ => unreachable!("ops are validated"),
        };
        self.push_metrics(op, bs_done, r);
        Ok(())
    }

    /// `dioread` (in order) or `randread` (seeded random 4K-aligned offsets): O_DIRECT reads.
    fn direct_read(&mut self, rand: bool) -> anyhow::Result<Timed> {
        let bs = self.o.block_size;
        let seed = self.o.seed;
        let slots = (self.size - bs) / ALIGN + 1;
        let mut rng = SplitMix64(seed);
        let mut buf = AlignedBuf::new(bs as usize, ALIGN as usize);
        self.direct()?;
        let f = self.direct.as_ref().expect("opened");
        let ctx = self.ctx;
        timed(
            ctx,
            self.o.blocks,
            self.parts,
            |i| {
                let off = if rand {
                    rng.below(slots) * ALIGN
                } else {
                    i * bs
                };
                f.read_exact_at(buf.as_mut_slice(), off)
            },
            || Ok(()),
            || Ok(()),
        )
    }

    /// `fsyncwrite`: the first `sync_blocks` blocks overwritten, each followed by its sync.
    fn fsync_write(&mut self) -> anyhow::Result<Timed> {
        let bs = self.o.block_size;
        let m = self.o.sync_blocks.min(self.o.blocks);
        // Start from the same state whatever ran before (after `diowrite` the pages
        // are gone, after the fill or `write` they are cached): none cached.
        drop_cache(&self.file.file)?;
        let f = &self.file.file;
        let buf = self.buf.as_slice();
        let datasync = self.o.sync == "fdatasync";
        let r = timed(
            self.ctx,
            m,
            self.parts,
            |i| {
                f.write_all_at(buf, i * bs)?;
                if datasync {
                    f.sync_data()
                } else {
                    f.sync_all()
                }
            },
            || drop_cache_io(f),
            || Ok(()),
        )?;
        self.bytes_written += r.ops * bs;
        self.cached = false;
        Ok(r)
    }

    /// The op's MB/s and latency metrics (with their window series when asked for).
    fn push_metrics(&mut self, op: &str, bs_done: u64, r: Timed) {
        let bytes = r.ops * bs_done;
        let mut mbps = spec(&format!("{op}_mbps")).value(bytes as f64 / r.secs.max(1e-9) / 1e6);
        let prefix = format!("{op}_lat");
        let mut lat = latency_metrics(&prefix, "us", &r.h);
        if let (Some(w), Some(&(begin, _)), Some(&(end, _))) =
            (self.ctx.window, r.log.first(), r.log.last())
        {
            let w = w.as_nanos() as u64;
            mbps = mbps.with_series(rate_series(&[r.log], begin, end, w, bs_done as f64 / 1e6));
            attach_latency(&mut lat, &prefix, "us", &r.events, begin, end, w);
        }
        self.out.push(mbps);
        self.out.extend(lat);
    }

    /// Writes the whole file, untimed (for read ops that run without `write`).
    fn fill(&mut self) -> anyhow::Result<()> {
        let bs = self.o.block_size;
        let f = &self.file.file;
        for i in 0..self.o.blocks {
            if i % 256 == 0 && self.ctx.stopped() {
                bail!("stopped");
            }
            f.write_all_at(self.buf.as_slice(), i * bs)?;
        }
        f.sync_all()?;
        self.bytes_written += self.size;
        self.filled = true;
        Ok(())
    }

    /// Reads the whole file through the page cache, untimed.
    fn read_pass(&mut self) -> anyhow::Result<()> {
        let bs = self.o.block_size;
        let f = &self.file.file;
        let buf = self.buf.as_mut_slice();
        for i in 0..self.o.blocks {
            f.read_exact_at(buf, i * bs)?;
        }
        self.cached = true;
        Ok(())
    }
}

/// [`drop_cache`] with an `io::Error`.
fn drop_cache_io(f: &File) -> io::Result<()> {
    drop_cache(f).map_err(io::Error::other)
}

/// Drops this file's pages from the page cache (dirty pages are written first, or
/// `DONTNEED` would keep them).
fn drop_cache(f: &File) -> anyhow::Result<()> {
    f.sync_all()?;
    // SAFETY: fd is open for the call.
    let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if r != 0 {
        bail!(
            "posix_fadvise(DONTNEED): {}",
            io::Error::from_raw_os_error(r)
        );
    }
    Ok(())
}

/// What [`timed`] measured.
struct Timed {
    h: LatencyHistogram,
    /// Seconds the whole loop and `finish` took.
    secs: f64,
    /// Operations done.
    ops: u64,
    /// With a window length: each request's end and latency (us).
    events: Vec<Event>,
    /// With a window length: (time, requests done), from the start to the end of `finish`.
    log: Vec<(u64, f64)>,
}

/// Runs `op(i)` for `i in 0..n`, timing each call (in us, timer overhead subtracted), then
/// `finish()` (a closing fsync). With a window length (`ctx.window`) it runs instead until
/// `ctx.budget / parts` has passed, going round the `n` requests again as often as needed
/// (calling `wrap()` before each new round), and keeps every request for the window series.
///
/// `secs` covers the requests and `finish` only: the time `wrap()` takes (dropping the
/// file's pages for the next cold round) is setup, left out as the setup before the first
/// round is. The window series stay on the wall clock (a round's `wrap` shows as a gap).
fn timed(
    ctx: &ProbeCtx,
    n: u64,
    parts: usize,
    op: impl FnMut(u64) -> io::Result<()>,
    wrap: impl FnMut() -> io::Result<()>,
    finish: impl FnOnce() -> io::Result<()>,
) -> anyhow::Result<Timed> {
    timed_on(&now_ns, ctx, n, parts, op, wrap, finish)
}

/// [`timed`] reading time from `clock` (ns), so tests can drive it.
fn timed_on(
    clock: &dyn Fn() -> u64,
    ctx: &ProbeCtx,
    n: u64,
    parts: usize,
    mut op: impl FnMut(u64) -> io::Result<()>,
    mut wrap: impl FnMut() -> io::Result<()>,
    finish: impl FnOnce() -> io::Result<()>,
) -> anyhow::Result<Timed> {
    let over = ctx.timer_overhead_ns;
    let windowed = ctx.window.is_some();
    let mut h = LatencyHistogram::new();
    let mut events = Vec::new();
    let start = clock();
    let mut log = vec![(start, 0.0)];
    let deadline = start + (ctx.budget / parts.max(1) as u32).as_nanos() as u64;
    let mut k = 0u64;
    // Time spent in `wrap()`, left out of `secs`.
    let mut setup_ns = 0u64;
    loop {
        if windowed {
            if k > 0 && clock() >= deadline {
                break;
            }
        } else if k >= n {
            break;
        }
        let i = k % n.max(1);
        if k % 256 == 0 && ctx.stopped() {
            bail!("stopped");
        }
        if k > 0 && i == 0 {
            let w0 = clock();
            wrap()?;
            setup_ns += clock() - w0;
        }
        let t0 = clock();
        op(i)?;
        let t1 = clock();
        let us = (((t1 - t0) as f64 - over) / 1000.0).round().max(1.0);
        hist_record(&mut h, us as u64);
        k += 1;
        if windowed {
            events.push(Event {
                t_ns: t1,
                value: us,
            });
            log.push((t1, k as f64));
        }
    }
    finish()?;
    let end = clock();
    if windowed {
        log.push((end, k as f64));
    }
    Ok(Timed {
        h,
        secs: (end - start - setup_ns) as f64 / 1e9,
        ops: k,
        events,
        log,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_parse_in_canonical_order() {
        assert_eq!(parse_ops("all").unwrap(), OPS.to_vec());
        assert_eq!(parse_ops("reread, write").unwrap(), vec!["write", "reread"]);
        let e = parse_ops("dioreed").unwrap_err().to_string();
        assert!(e.contains("did you mean `dioread`"), "{e}");
    }

    #[test]
    fn every_op_has_its_metrics_declared() {
        for op in OPS {
            for suffix in ["mbps", "lat_p50_us", "lat_p99_us", "lat_max_us"] {
                let name = format!("{op}_{suffix}");
                assert!(METRICS.iter().any(|m| m.name == name), "{name}");
            }
        }
    }

    /// Pages of `f` in `[off, off + len)` that are in the page cache (mincore).
    fn resident_pages(f: &File, off: u64, len: u64) -> usize {
        let page = 4096u64;
        // SAFETY: a shared read-only mapping of an open file, unmapped before returning;
        // mincore writes one byte per page into `v`, which is long enough.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                len as usize,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                off as libc::off_t,
            );
            assert_ne!(p, libc::MAP_FAILED, "{}", io::Error::last_os_error());
            let mut v = vec![0u8; len.div_ceil(page) as usize];
            let r = libc::mincore(p, len as usize, v.as_mut_ptr());
            libc::munmap(p, len as usize);
            assert_eq!(r, 0, "{}", io::Error::last_os_error());
            v.iter().filter(|&&b| b & 1 == 1).count()
        }
    }

    fn opts(blocks: u64, sync_blocks: u64) -> Opts {
        Opts {
            blocks,
            block_size: 8192,
            ops: "fsyncwrite".into(),
            dir: None,
            sync_blocks,
            sync: "fsync".into(),
            seed: 1,
        }
    }

    /// Regression: `fsyncwrite` alone overwrote pages still cached from the fill, and after
    /// `diowrite` pages that were not, so its figure depended on the ops before it (and fio's
    /// `invalidate=1` job matched neither); it now starts with none of the file's pages cached.
    #[test]
    fn fsyncwrite_overwrites_in_place_starting_from_no_cached_pages() {
        let dir = std::env::temp_dir();
        if fs_type(&dir).and_then(memory_fs).is_some() {
            crate::test_skip::skip(
                "disk on a disk",
                &format!("{} keeps files in memory", dir.display()),
            );
            return;
        }
        let (blocks, m, bs) = (64, 4, 8192);
        let o = opts(blocks, m);
        let ctx = ProbeCtx::detect();
        let file = TestFile::create(&dir).unwrap();
        let mut r = Runner::new(&ctx, &o, &file, blocks * bs).unwrap();
        r.fill().unwrap();
        r.read_pass().unwrap();
        let f = &file.file;
        assert!(
            resident_pages(f, 0, blocks * bs) > 0,
            "the read pass cached pages"
        );
        r.run_op("fsyncwrite").unwrap();
        assert_eq!(
            resident_pages(f, m * bs, (blocks - m) * bs),
            0,
            "the blocks fsyncwrite did not touch were dropped before it ran"
        );
        assert_eq!(
            f.metadata().unwrap().len(),
            blocks * bs,
            "an overwrite, no growth"
        );
        assert_eq!(r.bytes_written, (blocks + m) * bs);
        let hist = r
            .out
            .iter()
            .find(|x| x.name == "fsyncwrite_lat_p50_us")
            .and_then(|x| x.histogram.as_ref())
            .expect("latency histogram");
        assert_eq!(hist.len(), m, "one timed write+fsync per block");
    }

    /// The time `wrap()` takes between rounds (dropping pages for the next cold round) is
    /// setup: left out of the op's time, as the drop before the first round is.
    #[test]
    fn rounds_leave_the_page_drop_out_of_the_op_time() {
        use std::cell::Cell;
        let t = Cell::new(0u64);
        // Each clock read advances 1 us; a wrap takes 1 s.
        let clock = || {
            t.set(t.get() + 1_000);
            t.get()
        };
        let mut ctx = ProbeCtx::detect();
        ctx.window = Some(std::time::Duration::from_millis(1));
        ctx.budget = std::time::Duration::from_millis(2);
        let mut wraps = 0;
        let r = timed_on(
            &clock,
            &ctx,
            4,
            1,
            |_| Ok(()),
            || {
                wraps += 1;
                t.set(t.get() + 1_000_000_000);
                Ok(())
            },
            || Ok(()),
        )
        .unwrap();
        assert!(
            wraps >= 1 && r.ops > 4,
            "went round again: {wraps} wraps, {} ops",
            r.ops
        );
        assert!(r.secs < 0.01, "the wrap's second was counted: {} s", r.secs);

        // Without a window no round repeats and nothing is left out.
        ctx.window = None;
        let r = timed_on(&clock, &ctx, 4, 1, |_| Ok(()), || unreachable!(), || Ok(())).unwrap();
        assert_eq!(r.ops, 4);
        assert!(r.secs > 0.0);
    }

    #[test]
    fn tmpfs_is_refused_by_name() {
        let shm = Path::new("/dev/shm");
        if fs_type(shm).and_then(memory_fs) != Some("tmpfs") {
            crate::test_skip::skip("tmpfs", "/dev/shm is not tmpfs here");
            return;
        }
        let e = check_dir(shm, true).unwrap_err();
        assert!(e.contains("tmpfs") && e.contains("dir="), "{e}");
    }
}
