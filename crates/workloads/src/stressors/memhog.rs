//! `memhog`: allocate memory and never free it (the memory-intensive test of Matthews et al.,
//! and the memory-consumption program of VITS section 4.3).
//!
//! The hog maps anonymous memory in chunks up to a target (intensity% of the memory the
//! tenant may use, never above `caps.max_bytes`). With `touch=true` (Matthews: "allocating and
//! touching memory without freeing it") each chunk is written before the next is mapped,
//! and once the target is held the hog keeps rewriting all of it, pass after pass, so the
//! pages stay hot and cannot be reclaimed quietly. With `touch=false` (VITS: "invokes malloc()
//! constantly, but does not initiate the memory") it only maps, and idles once the target is
//! mapped: virtual size and commit charge grow, resident memory does not.
//!
//! The hog is a child process of its own (oom_score_adj 1000). Inside a tenant with a memory
//! limit it may be OOM-killed: that is the point of the test (the tenant contains it); the
//! process driving it survives, counts the kill (`hog_killed` note) and starts a new hog so
//! the pressure stays on. A failed mapping stops the growth and is reported in the notes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;

use isobench_common::format_size;
use serde::Deserialize;

use crate::params::{ParamKind, ParamSpec, ParamValues};
use crate::{Class, Env, Pressure, StressCtx, StressReport, Stressor, Unsupported};

/// The `memhog` stressor.
pub struct Memhog;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    touch: bool,
    chunk: u64,
    write: String,
    grow: u64,
    grow_disk: f64,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "touch",
        help: "write the memory (true) or only allocate it, as the VITS variant (false)",
        kind: ParamKind::Bool,
        default: "true",
    },
    ParamSpec {
        name: "chunk",
        help: "bytes allocated at a time",
        kind: ParamKind::Size {
            min: 4 << 10,
            max: 1 << 30,
        },
        default: "64M",
    },
    ParamSpec {
        name: "write",
        help: "what a touch writes in each page: line (one word in every cache line: the held \
               memory is also streamed, like a busy tenant) or page (one byte per page: just \
               enough to fault it in and keep it referenced)",
        kind: ParamKind::Choice {
            options: &["line", "page"],
        },
        default: "line",
    },
    ParamSpec {
        name: "grow",
        help: "growth speed with touch=true, bytes per second (0: as fast as it can write);                resctl-bench grows its hog at a share of the disk's write rate, see grow_disk",
        kind: ParamKind::Size {
            min: 0,
            max: 1 << 40,
        },
        default: "0",
    },
    ParamSpec {
        name: "grow_disk",
        help: "growth speed with touch=true as a share of the workdir disk's sequential write                rate, measured when the hog starts (64 MiB of 1 MiB direct writes): 0.1, 0.25,                0.5, 1 or 2 as resctl-bench does; 0 = off (grow decides)",
        kind: ParamKind::Float { min: 0.0, max: 100.0 },
        default: "0",
    },
];

/// Bytes touched between two checks of the stop flag.
const SLICE: usize = 1 << 20;

/// Counters shared between the hog process and the stressor thread that watches it: a
/// `MAP_SHARED` page, so the hog can update them without any system call.
#[repr(C)]
struct Shared {
    stop: AtomicU64,
    /// Pages written (touch) or mapped (no touch) so far.
    pages: AtomicU64,
    /// Bytes mapped.
    mapped: AtomicU64,
    /// Bytes touched for the first time.
    touched: AtomicU64,
    /// Completed rewrite passes.
    passes: AtomicU64,
    /// errno of a failed mapping (0 = none), and how much was held then.
    failed_errno: AtomicU64,
    failed_at: AtomicU64,
    /// Bytes the hog may have grown to by now (`u64::MAX`: no pacing), raised by the
    /// stressor thread as time passes.
    allowed: AtomicU64,
}

/// What the hog process does.
#[derive(Clone, Copy)]
struct Plan {
    target: usize,
    chunk: usize,
    touch: bool,
    stride: usize,
    page: usize,
}

/// The hog itself. Runs in a forked child of a possibly multi-threaded process, so it uses
/// nothing but system calls and plain memory writes: no allocation, no locks, no panics.
///
/// touch=true: one region of the target size is reserved and written chunk by chunk (the
/// growth), then rewritten pass after pass. touch=false: chunks are mapped one after another
/// and never written.
fn hog(sh: &Shared, plan: Plan) -> ! {
    // SAFETY: plain system calls on valid arguments; `_exit` never returns.
    unsafe {
        // The hog, not the agent beside it, is what the OOM killer should take.
        let path = b"/proc/self/oom_score_adj\0";
        let fd = libc::open(path.as_ptr().cast(), libc::O_WRONLY);
        if fd >= 0 {
            libc::write(fd, b"1000".as_ptr().cast(), 4);
            libc::close(fd);
        }
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        let map = |len: usize, flags: i32| {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags,
                -1,
                0,
            )
        };
        let fail = |mapped: usize| {
            sh.failed_errno
                .store(*libc::__errno_location() as u64, Ordering::Relaxed);
            sh.failed_at.store(mapped as u64, Ordering::Relaxed);
        };
        let running = || sh.stop.load(Ordering::Relaxed) == 0;
        if !plan.touch {
            let mut mapped = 0;
            while running() {
                if mapped < plan.target {
                    let len = plan.chunk.min(plan.target - mapped);
                    if map(len, 0) == libc::MAP_FAILED {
                        fail(mapped);
                        mapped = plan.target;
                    } else {
                        mapped += len;
                        sh.mapped.store(mapped as u64, Ordering::Relaxed);
                        sh.pages
                            .fetch_add((len / plan.page) as u64, Ordering::Relaxed);
                    }
                } else {
                    libc::usleep(10_000);
                }
            }
            libc::_exit(0);
        }
        let base = map(plan.target, libc::MAP_NORESERVE);
        if base == libc::MAP_FAILED {
            fail(0);
            while running() {
                libc::usleep(10_000);
            }
            libc::_exit(0);
        }
        let base = base as *mut u8;
        sh.mapped.store(plan.target as u64, Ordering::Relaxed);
        let mut grown = 0usize;
        let mut at = 0usize;
        let mut pass = 0u64;
        while running() {
            if at >= grown {
                if grown < plan.target {
                    let allowed = sh.allowed.load(Ordering::Relaxed).min(usize::MAX as u64);
                    let room = (allowed as usize).saturating_sub(grown) / plan.page * plan.page;
                    if room == 0 {
                        // Paced: wait for the allowance to grow.
                        libc::usleep(1_000);
                        continue;
                    }
                    grown = (grown + plan.chunk.min(room)).min(plan.target);
                } else {
                    pass += 1;
                    sh.passes.store(pass, Ordering::Relaxed);
                    at = 0;
                }
            }
            let end = (at + SLICE).min(grown);
            let mut off = at;
            while off < end {
                (base.add(off) as *mut u64).write_volatile(pass.wrapping_add(1));
                off += plan.stride;
            }
            if pass == 0 {
                sh.touched.fetch_add((end - at) as u64, Ordering::Relaxed);
            }
            sh.pages
                .fetch_add(((end - at) / plan.page) as u64, Ordering::Relaxed);
            at = end;
        }
        libc::_exit(0)
    }
}

/// The shared counter page, unmapped on drop.
struct SharedPage(*mut Shared);

impl SharedPage {
    fn new() -> anyhow::Result<Self> {
        // SAFETY: an anonymous shared mapping; zeroed by the kernel, which is a valid
        // `Shared` (all atomics at 0).
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                std::mem::size_of::<Shared>(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error()).context("mapping the hog's counters");
        }
        Ok(SharedPage(p.cast()))
    }

    fn get(&self) -> &Shared {
        // SAFETY: valid for the page's life, only accessed through atomics.
        unsafe { &*self.0 }
    }
}

impl Drop for SharedPage {
    fn drop(&mut self) {
        // SAFETY: mapped in `new` with this size.
        unsafe { libc::munmap(self.0.cast(), std::mem::size_of::<Shared>()) };
    }
}

/// Starts the hog process.
fn spawn_hog(page: &SharedPage, plan: Plan) -> anyhow::Result<libc::pid_t> {
    // SAFETY: the child runs only `hog`, which is async-signal-safe (see there).
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(std::io::Error::last_os_error()).context("starting the memory hog process"),
        0 => hog(page.get(), plan),
        pid => Ok(pid),
    }
}

/// Bytes resident in process `pid` that only it maps (`Private_*` of its `smaps_rollup`), None
/// when they cannot be read. The hog is forked, so its plain resident size (`statm`) would also
/// count every page it still shares with the process it was forked from.
fn resident_bytes(pid: libc::pid_t) -> Option<u64> {
    let rollup = procfs::process::Process::new(pid)
        .ok()?
        .smaps_rollup()
        .ok()?;
    let map = &rollup.memory_map_rollup.0.first()?.extension.map;
    Some(
        ["Private_Clean", "Private_Dirty", "Private_Hugetlb"]
            .iter()
            .filter_map(|k| map.get(*k))
            .sum(),
    )
}

/// Bytes the disk behind `dir` writes per second: 64 MiB of 1 MiB `O_DIRECT` writes to a
/// file made there, synced, then removed (buffered with a final `fdatasync` where the file
/// system refuses `O_DIRECT`).
fn disk_write_rate(dir: &std::path::Path) -> anyhow::Result<f64> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    const REQ: usize = 1 << 20;
    const TOTAL: usize = 64 << 20;
    let path = dir.join(format!(".isobench-memhog-rate-{}", std::process::id()));
    let open = |direct: bool| {
        let mut o = std::fs::OpenOptions::new();
        o.write(true).create(true).truncate(true);
        if direct {
            o.custom_flags(libc::O_DIRECT);
        }
        o.open(&path)
    };
    let mut f = open(true).or_else(|_| open(false)).with_context(|| {
        format!(
            "memhog grow_disk: creating {} to time the disk",
            path.display()
        )
    })?;
    let buf = crate::util::AlignedBuf::new(REQ, 4096);
    let t0 = crate::timer::now_ns();
    let written = (|| -> std::io::Result<()> {
        for _ in 0..TOTAL / REQ {
            f.write_all(buf.as_slice())?;
        }
        f.sync_data()
    })();
    let secs = (crate::timer::now_ns() - t0) as f64 / 1e9;
    let _ = std::fs::remove_file(&path);
    written.with_context(|| format!("memhog grow_disk: writing {}", path.display()))?;
    Ok(TOTAL as f64 / secs.max(1e-6))
}

/// Kills and reaps the hog.
fn reap(pid: libc::pid_t) {
    // SAFETY: `pid` is our child; waiting reaps it.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        let mut st = 0;
        libc::waitpid(pid, &mut st, 0);
    }
}

/// How fast a touching hog may grow: bytes per second (None: unpaced), and the workdir
/// disk's measured write rate when `grow_disk` set it.
#[derive(Clone, Copy)]
struct Growth {
    bps: Option<f64>,
    disk_bps: Option<f64>,
}

impl Growth {
    /// From the options: `grow_disk` times the workdir's disk first; only a touching hog is
    /// paced.
    fn from_opts(o: &Opts, ctx: &StressCtx) -> anyhow::Result<Self> {
        Ok(if o.touch && o.grow_disk > 0.0 {
            let d = disk_write_rate(&ctx.workdir)?;
            Growth {
                bps: Some(d * o.grow_disk),
                disk_bps: Some(d),
            }
        } else if o.touch && o.grow > 0 {
            Growth {
                bps: Some(o.grow as f64),
                disk_bps: None,
            }
        } else {
            Growth {
                bps: None,
                disk_bps: None,
            }
        })
    }
}

/// Bytes the hog should hold: intensity% of the memory the tenant may use, never above
/// `caps.max_bytes`, in whole pages only, so rounding never passes the target or the cap.
fn target_bytes(ctx: &StressCtx, page: u64) -> u64 {
    let mut target = ctx.env.mem_usable / 100 * u64::from(ctx.intensity);
    if let Some(cap) = ctx.caps.max_bytes {
        target = target.min(cap);
    }
    target / page * page
}

impl Plan {
    fn new(o: &Opts, ctx: &StressCtx, target: u64, page: u64) -> Self {
        Plan {
            target: target as usize,
            chunk: ((o.chunk / page * page).max(page)) as usize,
            touch: o.touch,
            stride: if o.write == "page" {
                page as usize
            } else {
                (ctx.env.line_size() as usize).clamp(8, page as usize)
            },
            page: page as usize,
        }
    }
}

/// What the stressor thread saw of its hogs, over every hog it started.
struct Watched {
    ops: u64,
    elapsed_s: f64,
    /// Hogs that died without being asked to.
    killed: u64,
    touched: u64,
    mapped: u64,
    passes: u64,
    /// The last hog's private resident bytes at the stop.
    resident: Option<u64>,
}

/// Runs hogs until `ctx` stops: counts their pages as operations, raises the paced
/// allowance, and starts a new hog whenever one dies (the OOM killer, most likely).
fn watch(
    ctx: &StressCtx,
    shared: &SharedPage,
    plan: Plan,
    grow_bps: Option<f64>,
) -> anyhow::Result<Watched> {
    let allow = |sh: &Shared, since: u64| {
        let bytes = grow_bps.map_or(u64::MAX, |r| {
            (r * crate::timer::now_ns().saturating_sub(since) as f64 / 1e9) as u64
        });
        sh.allowed.store(bytes, Ordering::Relaxed);
    };
    let t0 = crate::timer::now_ns();
    let mut spawned = t0;
    allow(shared.get(), spawned);
    let mut pid = spawn_hog(shared, plan)?;
    let (mut ops, mut counted, mut killed, mut touched, mut mapped) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut passes = 0u64;
    let mut resident: Option<u64> = None;
    loop {
        let sh = shared.get();
        let now = sh.pages.load(Ordering::Relaxed);
        ctx.add_ops(now - counted);
        ops += now - counted;
        counted = now;
        if !ctx.running() {
            // What the hog holds at the end, read before it is asked to stop.
            resident = resident_bytes(pid);
            sh.stop.store(1, Ordering::Relaxed);
            reap(pid);
            break;
        }
        let mut st = 0;
        // SAFETY: `pid` is our child.
        if unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) } == pid {
            // The hog died without being asked to: the OOM killer (or a signal from
            // outside). Record it and start another.
            killed += 1;
            touched = touched.max(sh.touched.load(Ordering::Relaxed));
            mapped = mapped.max(sh.mapped.load(Ordering::Relaxed));
            passes += sh.passes.load(Ordering::Relaxed);
            for c in [&sh.pages, &sh.touched, &sh.mapped, &sh.passes] {
                c.store(0, Ordering::Relaxed);
            }
            counted = 0;
            std::thread::sleep(Duration::from_millis(50));
            if !ctx.running() {
                break;
            }
            spawned = crate::timer::now_ns();
            allow(sh, spawned);
            pid = spawn_hog(shared, plan)?;
            continue;
        }
        allow(sh, spawned);
        std::thread::sleep(Duration::from_millis(5));
    }
    let elapsed_s = (crate::timer::now_ns() - t0) as f64 / 1e9;
    let sh = shared.get();
    Ok(Watched {
        ops,
        elapsed_s,
        killed,
        touched: touched.max(sh.touched.load(Ordering::Relaxed)),
        mapped: mapped.max(sh.mapped.load(Ordering::Relaxed)),
        passes: passes + sh.passes.load(Ordering::Relaxed),
        resident,
    })
}

/// The report's notes on what was held, how fast it grew, kills and a failed mapping.
fn held_notes(o: &Opts, target: u64, growth: Growth, w: &Watched, sh: &Shared) -> Vec<String> {
    let held_bytes = if o.touch { w.touched } else { w.mapped };
    let mut notes: Vec<String> = vec![
        format!("held_bytes={held_bytes} target_bytes={target}"),
        growth.bps.map_or_else(
            || "grow_bps=unpaced".to_string(),
            |g| format!("grow_bps={g:.0}"),
        ),
        format!(
            "held={} target={}",
            format_size(held_bytes),
            format_size(target)
        ),
        format!("mapped={}", format_size(w.mapped)),
        format!("hog_killed={}", w.killed),
    ];
    if o.touch {
        if let Some(d) = growth.disk_bps {
            notes.push(format!("disk_write_bps={d:.0}"));
        }
        notes.push(format!("touched={}", format_size(w.touched)));
        notes.push(format!("rewrite_passes={} write={}", w.passes, o.write));
    }
    let errno = sh.failed_errno.load(Ordering::Relaxed);
    if errno != 0 {
        notes.push(format!(
            "allocation failed at {} held: {}",
            format_size(sh.failed_at.load(Ordering::Relaxed)),
            std::io::Error::from_raw_os_error(errno as i32)
        ));
    }
    notes
}

impl Stressor for Memhog {
    fn name(&self) -> &'static str {
        "memhog"
    }
    fn help(&self) -> &'static str {
        "Allocates memory in chunks without ever freeing it, up to intensity% of the memory \
         the tenant may use (never above the caps). touch=true writes each chunk and then \
         keeps rewriting all held memory; touch=false only allocates (the VITS variant). One \
         operation is one page written (touch) or mapped (no touch); bytes counts the \
         memory written by touches; the held_bytes note gives the memory held at the end. \
         grow or grow_disk paces the growth (bytes/s, or a share of the disk's measured write \
         rate, as resctl-bench grows its hog). \
         Pressure: resident_bytes (the memory only the hog holds resident at the stop) and, with touch, \
         bytes_per_sec rewritten. Frozen, the hog keeps what it holds (lingering)."
    }
    fn class(&self) -> Class {
        Class::Memory
    }
    fn intensity_knob(&self) -> &'static str {
        "bytes held: intensity% of the memory the tenant may use (its cgroup limit, else the \
         host's available memory), never above caps.max_bytes; 0 = idle"
    }
    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }
    fn aggressive(&self) -> bool {
        true
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        Ok(())
    }
    fn lingering_effect(&self, params: &ParamValues) -> Option<&'static str> {
        let touch = params
            .decode::<Opts>(self.name())
            .map(|o| o.touch)
            .unwrap_or(true);
        Some(if touch {
            "the memory it holds stays resident"
        } else {
            "the memory it maps stays committed (virtual size and commit charge)"
        })
    }
    fn run(&self, ctx: &StressCtx, params: &ParamValues) -> anyhow::Result<StressReport> {
        let o: Opts = params.decode(self.name())?;
        let page = ctx.env.page_size.max(4096);
        let target = target_bytes(ctx, page);
        let unit = if o.touch {
            "page written (first touch or rewrite)"
        } else {
            "page allocated without being touched"
        };
        if target == 0 {
            return Ok(super::pool::idle_report(ctx, unit));
        }
        let plan = Plan::new(&o, ctx, target, page);
        // The hog runs in a child process of its own: when a memory limit makes the OOM
        // killer act, it takes the hog (oom_score_adj 1000), not the process driving it, and
        // the stressor starts a new hog so the pressure stays on.
        let growth = Growth::from_opts(&o, ctx)?;
        let shared = SharedPage::new()?;
        let w = watch(ctx, &shared, plan, growth.bps)?;
        let (ops, elapsed_s) = (w.ops, w.elapsed_s);
        let held_bytes = if o.touch { w.touched } else { w.mapped };
        let mut notes = held_notes(&o, target, growth, &w, shared.get());
        // Bytes of memory written by the touches: every line of a page, or one line of it.
        let bytes = match (o.touch, o.write.as_str()) {
            (false, _) => 0,
            (true, "page") => ops * ctx.env.line_size().clamp(8, page),
            (true, _) => ops * page,
        };
        let mut pressure = vec![Pressure::new(
            "resident_bytes",
            "B",
            w.resident.unwrap_or(if o.touch { held_bytes } else { 0 }) as f64,
        )];
        if o.touch {
            pressure.push(Pressure::rate(
                "bytes_per_sec",
                "B/s",
                bytes as f64,
                elapsed_s,
            ));
        }
        notes.push(match w.resident {
            Some(r) => format!("resident_bytes={r} (the hog's private resident pages at the stop)"),
            None => {
                "resident_bytes from the bytes touched (the hog's smaps_rollup unreadable)".into()
            }
        });
        Ok(StressReport {
            ops,
            elapsed_s,
            ops_per_sec: if elapsed_s > 0.0 {
                ops as f64 / elapsed_s
            } else {
                0.0
            },
            op_unit: unit.into(),
            workers: 1,
            bytes,
            notes,
            pressure,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_memory_lingers_through_a_freeze() {
        let p = |s: &[&str]| ParamValues::from_settings("memhog", PARAMS, s).unwrap();
        assert_eq!(
            Memhog.lingering_effect(&p(&[])),
            Some("the memory it holds stays resident")
        );
        assert!(Memhog
            .lingering_effect(&p(&["touch=false"]))
            .is_some_and(|e| e.contains("committed")));
    }

    /// Paced, the hog holds no more than its speed allows (plus the page it is on).
    #[test]
    fn a_paced_hog_grows_at_its_speed() {
        let mut ctx = StressCtx::new(Env::detect(), 100);
        ctx.env.mem_usable = 512 << 20;
        let p = ParamValues::from_settings("memhog", PARAMS, &["grow=32M", "chunk=1M"]).unwrap();
        let stop = ctx.stop.clone();
        let h = std::thread::spawn(move || Memhog.run(&ctx, &p));
        std::thread::sleep(Duration::from_millis(600));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let r = h.join().unwrap().unwrap();
        let held: f64 = r
            .notes
            .iter()
            .find_map(|n| n.strip_prefix("held_bytes="))
            .and_then(|n| n.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap();
        let allowed = 32.0 * 1048576.0 * r.elapsed_s + 4096.0;
        assert!(
            held > 0.0 && held <= allowed,
            "{held} > {allowed}: {:?}",
            r.notes
        );
        assert!(
            r.notes.iter().any(|n| n == "grow_bps=33554432"),
            "{:?}",
            r.notes
        );
    }

    /// grow_disk times the workdir's disk and grows at that share of it.
    #[test]
    fn grow_disk_paces_from_the_measured_write_rate() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = StressCtx::new(Env::detect(), 100);
        ctx.env.mem_usable = 64 << 20;
        ctx.workdir = dir.path().to_path_buf();
        let p = ParamValues::from_settings("memhog", PARAMS, &["grow_disk=0.25"]).unwrap();
        let stop = ctx.stop.clone();
        let h = std::thread::spawn(move || Memhog.run(&ctx, &p));
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let r = h.join().unwrap().unwrap();
        let num = |key: &str| -> f64 {
            r.notes
                .iter()
                .find_map(|n| n.strip_prefix(key))
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no {key}: {:?}", r.notes))
        };
        let (disk, grow) = (num("disk_write_bps="), num("grow_bps="));
        assert!(disk > 0.0);
        assert!((grow / disk - 0.25).abs() < 0.01, "{grow} {disk}");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "timing file left"
        );
    }

    #[test]
    fn resident_size_of_this_process_is_read() {
        let r = resident_bytes(std::process::id() as libc::pid_t).unwrap();
        assert!(r > 0);
        assert_eq!(resident_bytes(-5), None);
    }
}
