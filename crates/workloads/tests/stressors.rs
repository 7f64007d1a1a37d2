//! Every stressor, run for real and briefly: it works, it stops when told, intensity 0 is
//! idle, and it leaves nothing behind (processes, files) and keeps to its caps.
//!
//! Assertions are about behaviour, never speed: the machine is shared and noisy. The tests
//! take a lock so that two stressors never run at once (they would only measure each other,
//! and the memory test reads this process's resident size).

use std::collections::HashSet;
use std::io::Read as _;
use std::net::UdpSocket;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use isobench_workloads::ctx::StressCaps;
use isobench_workloads::{stressor, Env, ParamValues, StressCtx, StressReport, STRESSORS};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A context in a fresh temporary directory on disk (not tmpfs).
fn ctx(intensity: u8) -> (StressCtx, tempfile::TempDir) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut env = Env::detect();
    env.workdir = dir.path().to_path_buf();
    let mut c = StressCtx::new(env, intensity);
    c.workdir = dir.path().to_path_buf();
    (c, dir)
}

/// Runs `name` with `settings`, setting the stop flag after `run_for`. Returns the report
/// and how long `run` took to return after the flag was set.
fn run(
    name: &str,
    c: &StressCtx,
    settings: &[&str],
    run_for: Duration,
) -> anyhow::Result<(StressReport, Duration)> {
    let s = stressor(name).unwrap_or_else(|| panic!("no stressor {name}"));
    let params = ParamValues::from_settings(name, s.params(), settings)?;
    // Contexts are reused across runs in one test: each run starts with the flag down.
    c.stop.store(false, Ordering::SeqCst);
    // The flag goes up `run_for` after the first operation is counted (setup such as a
    // cache-size sweep may take a while first), or after 20 s without one.
    let stop = c.stop.clone();
    let ops = c.ops.clone();
    let base = ops.load(Ordering::SeqCst);
    // Nothing to wait for where no operation will ever be counted.
    let idle = c.intensity == 0 || name == "null";
    let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped_at = Arc::new(Mutex::new(None));
    let (at, fin) = (stopped_at.clone(), finished.clone());
    let timer = thread::Builder::new()
        .name("test-timer".into())
        .spawn(move || {
            let t0 = Instant::now();
            while !idle
                && !fin.load(Ordering::SeqCst)
                && ops.load(Ordering::SeqCst) == base
                && t0.elapsed() < Duration::from_secs(20)
            {
                thread::sleep(Duration::from_millis(1));
            }
            let t1 = Instant::now();
            while !fin.load(Ordering::SeqCst) && t1.elapsed() < run_for {
                thread::sleep(Duration::from_millis(1));
            }
            *at.lock().unwrap() = Some(Instant::now());
            stop.store(true, Ordering::SeqCst);
        })?;
    let r = s.run(c, &params);
    let returned = Instant::now();
    // An early error returns before the timer fires: let it fire so nothing outlives the test.
    finished.store(true, Ordering::SeqCst);
    timer.join().unwrap();
    let stopped = stopped_at.lock().unwrap().unwrap();
    Ok((r?, returned.saturating_duration_since(stopped)))
}

fn assert_worked(name: &str, r: &StressReport, stop_latency: Duration) {
    eprintln!(
        "{name}: {:.0} ops/s ({} ops of {}, {} workers, {} bytes, {:.3} s, stopped in {:?}) {:?}",
        r.ops_per_sec, r.ops, r.op_unit, r.workers, r.bytes, r.elapsed_s, stop_latency, r.notes
    );
    assert!(r.ops > 0, "{name} did no work: {r:?}");
    assert!(
        r.ops_per_sec.is_finite() && r.ops_per_sec > 0.0,
        "{name}: {r:?}"
    );
    assert!(
        r.elapsed_s > 0.0 && r.elapsed_s.is_finite(),
        "{name}: {r:?}"
    );
    assert!(r.workers >= 1, "{name}: {r:?}");
    assert!(!r.op_unit.is_empty(), "{name}: {r:?}");
    // Every working stressor says what it delivered, in physical units.
    assert!(!r.pressure.is_empty(), "{name} reports no pressure: {r:?}");
    let mut seen = HashSet::new();
    for p in &r.pressure {
        assert!(seen.insert(p.name.as_str()), "{name}: {} twice", p.name);
        assert!(!p.unit.is_empty(), "{name}: {} has no unit", p.name);
        assert!(p.value.is_finite() && p.value >= 0.0, "{name}: {p:?}");
    }
    // Generous: catches a stressor that ignores the flag, not a slow machine.
    assert!(
        stop_latency < Duration::from_secs(3),
        "{name} took {stop_latency:?} to stop"
    );
}

/// Files in `dir` whose name starts with `isobench-`.
fn isobench_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("isobench-"))
        .collect()
}

/// (pid, ppid, pgrp) of every process.
fn processes() -> Vec<(i32, i32, i32)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() > 3 {
            out.push((pid, f[1].parse().unwrap_or(0), f[2].parse().unwrap_or(0)));
        }
    }
    out
}

/// The value of pressure `key`, which must be reported.
fn pressure(r: &StressReport, key: &str) -> f64 {
    r.pressure(key)
        .unwrap_or_else(|| panic!("no pressure {key} in {:?}", r.pressure))
        .value
}

/// `bytes_per_sec` is the report's own bytes over its own elapsed time.
fn assert_bytes_rate(r: &StressReport) {
    let want = r.bytes as f64 / r.elapsed_s;
    let got = pressure(r, "bytes_per_sec");
    assert!((got - want).abs() <= want * 1e-9 + 1e-9, "{got} vs {want}");
}

fn note_value(r: &StressReport, key: &str) -> Option<String> {
    r.notes.iter().find_map(|n| {
        n.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{key}=")).map(String::from))
    })
}

/// Threads of this process that a stressor's pool started (named `isobench-NAME-I`); other
/// tests' threads come and go beside them.
fn stressor_threads() -> usize {
    task_names().filter(|c| c.starts_with("isobench-")).count()
}

fn task_names() -> impl Iterator<Item = String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .map(|c| c.trim_end().to_string())
}

/// Resident memory of this process and the memory its direct children (the memory hog runs in
/// a forked child of its own) hold on their own: a forked child's plain resident size also
/// counts every page it still shares with this process.
fn vm_rss() -> u64 {
    let me = procfs::process::Process::myself().unwrap();
    let own = me.status().unwrap().vmrss.unwrap_or(0) * 1024;
    let children: u64 = processes()
        .into_iter()
        .filter(|&(_, ppid, _)| ppid == me.pid)
        .filter_map(|(pid, _, _)| {
            let rollup = procfs::process::Process::new(pid)
                .ok()?
                .smaps_rollup()
                .ok()?;
            let map = &rollup.memory_map_rollup.0.first()?.extension.map;
            Some(map.get("Private_Clean").unwrap_or(&0) + map.get("Private_Dirty").unwrap_or(&0))
        })
        .sum();
    own + children
}

const BRIEF: Duration = Duration::from_millis(300);

#[test]
fn cpu_runs_and_stops() {
    let _g = serial();
    let (c, _d) = ctx(50);
    let (r, lat) = run("cpu", &c, &[], BRIEF).unwrap();
    assert_worked("cpu", &r, lat);
    assert_eq!(c.ops(), r.ops, "the shared counter saw every operation");
    // CPU-seconds per second: some, and never more than the workers could get.
    let busy = pressure(&r, "cpu_threads");
    assert!(busy > 0.0 && busy <= f64::from(r.workers) * 1.05, "{busy}");
}

#[test]
fn cpu_low_intensity_is_a_duty_cycle() {
    let _g = serial();
    let (mut c, _d) = ctx(25);
    c.env.cpus = vec![0, 1];
    let (r, lat) = run("cpu", &c, &[], BRIEF).unwrap();
    assert_worked("cpu", &r, lat);
    assert_eq!(r.workers, 1);
    assert!(r.notes.iter().any(|n| n == "duty=50%"), "{:?}", r.notes);
}

#[test]
fn cache_runs_and_stops() {
    let _g = serial();
    let (c, _d) = ctx(50);
    let (r, lat) = run("cache", &c, &["size=2M"], BRIEF).unwrap();
    assert_worked("cache", &r, lat);
    assert_eq!(note_value(&r, "ring").as_deref(), Some("2M"));
    assert_eq!(pressure(&r, "ring_bytes"), f64::from(2u32 << 20));
    assert_bytes_rate(&r);
    let (r, lat) = run("cache", &c, &["size=2M", "order=rand", "threads=2"], BRIEF).unwrap();
    assert_worked("cache rand", &r, lat);
    assert_eq!(r.workers, 2);
}

#[test]
fn membw_runs_and_stops() {
    let _g = serial();
    let (c, _d) = ctx(50);
    let (r, lat) = run("membw", &c, &["block=4M"], BRIEF).unwrap();
    assert_worked("membw", &r, lat);
    assert!(
        r.bytes >= r.ops * (4 << 20),
        "bytes count every block copied: {r:?}"
    );
    assert_bytes_rate(&r);
    assert!(pressure(&r, "cpu_threads") > 0.0);
}

#[test]
fn memhog_touch_keeps_to_max_bytes() {
    let _g = serial();
    let cap: u64 = 48 << 20;
    let (mut c, _d) = ctx(100);
    c.caps = StressCaps {
        max_tasks: None,
        max_bytes: Some(cap),
    };
    let base = vm_rss();
    let peak = Arc::new(Mutex::new(base));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (peak.clone(), done.clone());
        thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                let v = vm_rss();
                let mut p = peak.lock().unwrap();
                *p = (*p).max(v);
                drop(p);
                thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let (r, lat) = run("memhog", &c, &["chunk=8M"], Duration::from_millis(500)).unwrap();
    done.store(true, Ordering::SeqCst);
    sampler.join().unwrap();
    assert_worked("memhog", &r, lat);
    let held: u64 = note_value(&r, "held_bytes").unwrap().parse().unwrap();
    assert!(held > 0 && held <= cap, "held {held} > cap {cap}");
    let resident = pressure(&r, "resident_bytes") as u64;
    assert!(
        resident >= held / 2 && resident <= cap + (16 << 20),
        "resident {resident}, held {held}, cap {cap}"
    );
    assert!(pressure(&r, "bytes_per_sec") > 0.0);
    let grew = peak.lock().unwrap().saturating_sub(base);
    eprintln!(
        "memhog: resident grew by {} MiB (cap {} MiB)",
        grew >> 20,
        cap >> 20
    );
    assert!(
        grew <= cap + (16 << 20),
        "resident memory grew by {grew} bytes, cap {cap}"
    );
    assert!(
        grew >= held / 2,
        "touched memory must be resident: grew {grew}"
    );
    // Everything is given back when the run ends.
    assert!(vm_rss() < base + (16 << 20));
}

#[test]
fn memhog_without_touch_maps_but_stays_out_of_memory() {
    let _g = serial();
    let cap: u64 = 256 << 20;
    let (mut c, _d) = ctx(100);
    c.caps.max_bytes = Some(cap);
    // The hog is forked from this process: what this process holds resident is not the hog's.
    let ballast = vec![1u8; 64 << 20];
    let base = vm_rss();
    let (r, lat) = run("memhog", &c, &["touch=false", "chunk=32M"], BRIEF).unwrap();
    assert_eq!(
        std::hint::black_box(&ballast)
            .iter()
            .map(|&b| b as usize)
            .sum::<usize>(),
        64 << 20
    );
    assert_worked("memhog no-touch", &r, lat);
    let held: u64 = note_value(&r, "held_bytes").unwrap().parse().unwrap();
    assert!(held > 0 && held <= cap, "{r:?}");
    assert_eq!(r.bytes, 0, "nothing is written");
    assert!(
        pressure(&r, "resident_bytes") < (16 << 20) as f64,
        "mapped, not resident: {:?}",
        r.pressure
    );
    assert!(r.op_unit.contains("without being touched"), "{r:?}");
    assert!(
        vm_rss() < base + (16 << 20),
        "untouched memory is not resident"
    );
}

#[test]
fn forkbomb_keeps_to_max_tasks_and_leaves_no_process() {
    let _g = serial();
    let (mut c, _d) = ctx(100);
    c.caps.max_tasks = Some(8);
    let me = std::process::id() as i32;
    let (r, lat) = run("forkbomb", &c, &[], BRIEF).unwrap();
    assert_worked("forkbomb", &r, lat);
    let peak: u32 = note_value(&r, "peak_population").unwrap().parse().unwrap();
    assert!(
        (1..=7).contains(&peak),
        "population {peak} over max_tasks - 1"
    );
    let leader: i32 = note_value(&r, "leader_pid").unwrap().parse().unwrap();
    let pgid: i32 = note_value(&r, "bomb_pgid").unwrap().parse().unwrap();
    assert!(leader > 1 && pgid > 1, "{:?}", r.notes);
    let rate = pressure(&r, "forks_per_sec");
    assert!(
        (rate - r.ops_per_sec).abs() <= 1e-9 * rate.max(1.0),
        "{rate}"
    );
    let left: Vec<_> = processes()
        .into_iter()
        .filter(|&(pid, ppid, pgrp)| pid == leader || pgrp == pgid || pgrp == leader || ppid == me)
        .collect();
    assert!(left.is_empty(), "left behind (pid, ppid, pgrp): {left:?}");
}

/// At its population limit a spinning tree (the tree's default) yields and tries again, so
/// none of its processes sleeps; a blocking one waits in `waitpid` and never spins. Either
/// way the leader reaps the whole bomb, so its CPU time is reported.
#[test]
fn forkbomb_tree_spins_at_its_limit_unless_told_to_block() {
    let _g = serial();
    let (mut c, _d) = ctx(100);
    c.caps.max_tasks = Some(8);
    for (mode, spins) in [
        ("", true),
        ("at_limit=spin", true),
        ("at_limit=block", false),
    ] {
        let settings: Vec<&str> = ["max_procs=2", "child=fork", mode]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect();
        let (r, lat) = run("forkbomb", &c, &settings, BRIEF).unwrap();
        assert_worked("forkbomb", &r, lat);
        let spun: u64 = note_value(&r, "limit_spins").unwrap().parse().unwrap();
        let waited: u64 = note_value(&r, "limit_waits").unwrap().parse().unwrap();
        assert!(
            waited > 0,
            "{mode}: the limit of 2 was never reached: {:?}",
            r.notes
        );
        if spins {
            assert!(spun > 0, "{mode}: never spun: {:?}", r.notes);
        } else {
            assert_eq!(spun, 0, "{mode}: spun: {:?}", r.notes);
        }
        let cpu: f64 = note_value(&r, "bomb_cpu_s").unwrap().parse().unwrap();
        assert!(cpu > 0.0, "{mode}: {:?}", r.notes);
    }
}

/// With `child = "exit"` the bomb is forkers whose children exit at once: half the population limit
/// of forkers (the population of 6 is 3 forkers and their 3 children), nearly every fork a
/// child that exited without forking, none of them spinning, and the population kept to
/// the limit.
#[test]
fn forkbomb_forkers_fork_children_that_exit_at_once() {
    let _g = serial();
    let (mut c, _d) = ctx(100);
    c.caps.max_tasks = Some(8);
    {
        let settings: &[&str] = &["max_procs=6", "child=exit"];
        let (r, lat) = run("forkbomb", &c, settings, BRIEF).unwrap();
        assert_worked("forkbomb", &r, lat);
        let value = |k: &str| -> u64 { note_value(&r, k).unwrap().parse().unwrap() };
        assert!(
            r.notes.iter().any(|n| n.contains("child=exit")),
            "{settings:?}: {:?}",
            r.notes
        );
        assert_eq!(value("forkers_planned"), 3, "{:?}", r.notes);
        assert_eq!(value("forkers"), 3, "{:?}", r.notes);
        let peak = value("peak_population");
        assert!((2..=6).contains(&peak), "population {peak}: {:?}", r.notes);
        assert_eq!(value("limit_spins"), 0, "{:?}", r.notes);
        // Every fork but the two extra forkers' made a child that exits at once (the count
        // goes on a little after the forks are counted, and a child killed at the stop
        // never counts itself).
        let quick = value("quick_exits");
        assert!(
            quick > 0 && 2 * quick >= r.ops,
            "{} forks, {quick} quick exits: {:?}",
            r.ops,
            r.notes
        );
        assert_eq!(value("leaf_exits"), 0, "no fork was refused: {:?}", r.notes);
    }
}

/// Set (to the cgroup directory) in the child process of the pids-limit test.
const PIDS_CHILD_ENV: &str = "ISOBENCH_TEST_PIDS_CGROUP";

/// Needs root and the cgroup v1 pids controller: the bomb runs, with no caps, in a child
/// process of this test binary moved into a pids cgroup of 24 tasks, so the kernel limit is
/// what stops it. In both shapes it must keep forking (leaves or forkers hand their slots
/// back), count the EAGAIN failures, and leave the cgroup empty.
#[test]
fn forkbomb_backs_off_at_a_pids_limit() {
    if let Some(cg) = std::env::var_os(PIDS_CHILD_ENV) {
        return forkbomb_in_pids_cgroup(Path::new(&cg));
    }
    let _g = serial();
    let root = Path::new("/sys/fs/cgroup/pids");
    // SAFETY: geteuid has no arguments.
    if unsafe { libc::geteuid() } != 0 || !root.join("cgroup.procs").exists() {
        eprintln!(
            "skipped: needs root and the cgroup v1 pids controller at {}",
            root.display()
        );
        return;
    }
    // Not named `isobench-...`: `isobench cleanup`, possibly running at the same time, kills
    // the tasks of every cgroup with that prefix.
    let cg = root.join(format!("wltest-forkbomb-{}", std::process::id()));
    std::fs::create_dir(&cg).unwrap();
    std::fs::write(cg.join("pids.max"), "24").unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "forkbomb_backs_off_at_a_pids_limit",
            "--test-threads=1",
        ])
        .arg("--nocapture")
        .env(PIDS_CHILD_ENV, &cg)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            break child.wait().unwrap();
        }
        thread::sleep(Duration::from_millis(20));
    };
    // A cleanup running elsewhere may already have removed the cgroup, which the kernel only
    // allows once it is empty.
    let left = std::fs::read_to_string(cg.join("cgroup.procs")).unwrap_or_default();
    for _ in 0..100 {
        if std::fs::remove_dir(&cg).is_ok() {
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
    let mut output = String::new();
    for pipe in [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read>),
    ]
    .into_iter()
    .flatten()
    {
        let mut pipe = pipe;
        let _ = pipe.read_to_string(&mut output);
    }
    eprintln!("{output}");
    assert!(
        status.success(),
        "the bomb's test process failed: {status}\n{output}"
    );
    assert!(left.trim().is_empty(), "left in the pids cgroup: {left}");
}

fn forkbomb_in_pids_cgroup(cg: &Path) {
    std::fs::write(cg.join("cgroup.procs"), "0").unwrap();
    let (c, _d) = ctx(100);
    for shape in ["child=exit", "child=fork"] {
        let (r, lat) = run(
            "forkbomb",
            &c,
            &["max_procs=1000", shape],
            Duration::from_millis(400),
        )
        .unwrap();
        assert_worked(&format!("forkbomb {shape} at a pids limit"), &r, lat);
        let value = |k: &str| -> u64 { note_value(&r, k).unwrap().parse().unwrap() };
        let failures = value("fork_failures");
        let peak = value("peak_population");
        assert!(failures > 0, "the pids limit was never hit: {:?}", r.notes);
        assert!(peak < 24, "population {peak} above the pids limit");
        if shape == "child=exit" {
            // The root filled the tenant with forkers; those past three quarters of its room
            // left, so the rest fork on.
            let room = value("room_at_first_refusal");
            let alive = value("forkers_alive");
            assert!((10..24).contains(&room), "{:?}", r.notes);
            assert!(
                alive >= 1 && alive <= room * 3 / 4,
                "{alive} forkers of a room of {room}: {:?}",
                r.notes
            );
            assert!(value("quick_exits") > 0, "{:?}", r.notes);
        }
        let me = std::process::id().to_string();
        let procs = std::fs::read_to_string(cg.join("cgroup.procs")).unwrap();
        let others: Vec<&str> = procs.lines().filter(|p| *p != me).collect();
        assert!(
            others.is_empty(),
            "bomb processes left after {shape}: {others:?}"
        );
    }
}

#[test]
fn disk_runs_and_removes_its_files() {
    let _g = serial();
    let (c, d) = ctx(50);
    for mode in ["direct=false", "direct=true", "cache=drop"] {
        let settings = ["threads=2", "file_size=1M", mode];
        let (r, lat) = run("disk", &c, &settings, BRIEF).unwrap();
        assert_worked(&format!("disk {mode}"), &r, lat);
        assert!(
            r.op_unit.contains("64K"),
            "intensity 50 is 8 x 8 KiB: {}",
            r.op_unit
        );
        assert!(r.bytes > 0);
        assert_bytes_rate(&r);
        assert_eq!(pressure(&r, "iops"), r.ops_per_sec);
        assert!(isobench_files(d.path()).is_empty());
    }
}

#[test]
fn disk_keeps_files_under_max_bytes() {
    let _g = serial();
    let (mut c, d) = ctx(1);
    c.caps.max_bytes = Some(256 << 10);
    let (r, lat) = run("disk", &c, &["threads=4"], BRIEF).unwrap();
    assert_worked("disk capped", &r, lat);
    assert_eq!(note_value(&r, "file_size").as_deref(), Some("64K"));
    assert!(isobench_files(d.path()).is_empty());
}

#[test]
fn disk_error_leaves_nothing() {
    let _g = serial();
    let (mut c, d) = ctx(50);
    c.workdir = d.path().join("missing");
    let e = run("disk", &c, &["file_size=1M"], Duration::from_millis(50)).unwrap_err();
    assert!(e.to_string().contains("missing"), "{e:#}");
    assert!(isobench_files(d.path()).is_empty());
}

#[test]
fn net_tx_runs_and_stops() {
    let _g = serial();
    let (c, _d) = ctx(50);
    let (r, lat) = run("net-tx", &c, &["threads=2"], BRIEF).unwrap();
    assert_worked("net-tx", &r, lat);
    assert!(r.op_unit.contains("30720"), "{}", r.op_unit);
    assert_eq!(r.bytes, r.ops * 30720);
    assert_bytes_rate(&r);
    assert_eq!(pressure(&r, "datagrams_per_sec"), r.ops_per_sec);
    let e = run("net-tx", &c, &["target=nowhere"], Duration::from_millis(50)).unwrap_err();
    assert!(e.to_string().contains("nowhere"), "{e:#}");
}

/// Unpaced net-tx sends with sendmmsg, 32 datagrams a call by default: every datagram is
/// counted as an operation and its payload as bytes, with batching or without.
#[test]
fn net_tx_counts_every_datagram_of_a_batch() {
    let _g = serial();
    let (c, _d) = ctx(100);
    for (batch, want) in [
        ("", "batch=32"),
        ("batch=1", "batch=1"),
        ("batch=7", "batch=7"),
    ] {
        let settings: Vec<&str> = ["threads=1", "size=1000", batch]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect();
        let (r, lat) = run("net-tx", &c, &settings, BRIEF).unwrap();
        assert_worked("net-tx", &r, lat);
        assert!(
            r.notes.iter().any(|n| n.contains(want)),
            "{want}: {:?}",
            r.notes
        );
        assert_eq!(r.bytes, r.ops * 1000, "{want}");
        assert_eq!(pressure(&r, "datagrams_per_sec"), r.ops_per_sec);
    }
}

#[test]
fn net_rx_with_its_own_sender() {
    let _g = serial();
    let (c, _d) = ctx(50);
    let (r, lat) = run("net-rx", &c, &["threads=2", "senders=1"], BRIEF).unwrap();
    assert_worked("net-rx", &r, lat);
    assert_eq!(r.workers, 3);
    assert_bytes_rate(&r);
    assert_eq!(pressure(&r, "datagrams_per_sec"), r.ops_per_sec);
}

#[test]
fn net_rx_external_receives_from_net_tx() {
    let _g = serial();
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (rx_ctx, _d1) = ctx(100);
    let (tx_ctx, _d2) = ctx(10);
    let bind = format!("bind=127.0.0.1:{port}");
    let target = format!("target=127.0.0.1:{port}");
    let rx = thread::spawn(move || {
        run(
            "net-rx",
            &rx_ctx,
            &["sender=external", &bind, "threads=2"],
            Duration::from_millis(500),
        )
    });
    thread::sleep(Duration::from_millis(100));
    let (t, _) = run(
        "net-tx",
        &tx_ctx,
        &[&target, "threads=1", "rate=2000"],
        BRIEF,
    )
    .unwrap();
    let (r, lat) = rx.join().unwrap().unwrap();
    assert_worked("net-rx external", &r, lat);
    assert!(r.ops <= t.ops, "received {} of {} sent", r.ops, t.ops);
    assert!(r.notes.iter().any(|n| n == "sender=external"));
}

#[test]
fn intensity_zero_is_idle() {
    let _g = serial();
    for s in STRESSORS {
        let (mut c, d) = ctx(0);
        c.caps = StressCaps {
            max_tasks: Some(8),
            max_bytes: Some(16 << 20),
        };
        // Watch this process's threads and children while the stressor idles.
        let me = std::process::id() as i32;
        // Threads of the earlier stressors of this loop may still be on their way out.
        let before = stressor_threads();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watcher = {
            let done = done.clone();
            thread::Builder::new()
                .name("test-watcher".into())
                .spawn(move || {
                    let (mut most_threads, mut children) = (0, 0);
                    while !done.load(Ordering::SeqCst) {
                        most_threads = most_threads.max(stressor_threads());
                        children += processes().iter().filter(|p| p.1 == me).count();
                        thread::sleep(Duration::from_millis(5));
                    }
                    (most_threads, children)
                })
                .unwrap()
        };
        let (r, lat) = run(s.name(), &c, &[], Duration::from_millis(100)).unwrap();
        done.store(true, Ordering::SeqCst);
        let (most_threads, children) = watcher.join().unwrap();
        eprintln!("{} at 0: {r:?}", s.name());
        assert_eq!(r.ops, 0, "{}", s.name());
        assert_eq!(c.ops(), 0, "{}", s.name());
        assert_eq!(r.ops_per_sec, 0.0, "{}", s.name());
        assert_eq!(r.workers, 0, "{}", s.name());
        assert!(r.pressure.is_empty(), "{}: {:?}", s.name(), r.pressure);
        assert!(lat < Duration::from_secs(3));
        assert!(isobench_files(d.path()).is_empty());
        // No worker thread (the pools name theirs `isobench-NAME-I`) and no child. Unnamed
        // threads are not counted: the harness's come and go beside a test.
        assert!(
            most_threads <= before,
            "{}: {most_threads} threads, {before} before",
            s.name()
        );
        assert_eq!(children, 0, "{}", s.name());
    }
}

#[test]
fn already_stopped_returns_at_once() {
    let _g = serial();
    for s in STRESSORS {
        let (mut c, d) = ctx(50);
        c.caps = StressCaps {
            max_tasks: Some(8),
            max_bytes: Some(32 << 20),
        };
        c.stop.store(true, Ordering::SeqCst);
        let settings: &[&str] = match s.name() {
            "cache" => &["size=1M"],
            "membw" => &["block=1M"],
            "disk" => &["file_size=1M", "threads=2"],
            _ => &[],
        };
        let params = ParamValues::from_settings(s.name(), s.params(), settings).unwrap();
        let t0 = Instant::now();
        let r = s.run(&c, &params).unwrap();
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "{}: {:?}",
            s.name(),
            t0.elapsed()
        );
        assert!(r.ops_per_sec.is_finite(), "{}: {r:?}", s.name());
        assert!(isobench_files(d.path()).is_empty());
    }
}

#[test]
fn pinned_workers_stay_on_their_cpus() {
    let _g = serial();
    let (mut c, _d) = ctx(100);
    let cpu = *c.env.cpus.last().unwrap();
    c.pin = Some(vec![cpu]);
    let (r, lat) = run("cpu", &c, &[], BRIEF).unwrap();
    assert_worked("cpu pinned", &r, lat);
    // One allowed CPU at intensity 100 is one thread.
    assert_eq!(r.workers, 1);
}

#[test]
fn every_stressor_is_documented_and_supported_here() {
    // Serial: other tests count this process's threads.
    let _g = serial();
    let env = Env::detect();
    let mut names = HashSet::new();
    for s in STRESSORS {
        assert!(names.insert(s.name()), "duplicate {}", s.name());
        assert!(!s.help().contains("being written"), "{}", s.name());
        assert!(s.intensity_knob().contains("0 = idle"), "{}", s.name());
        assert!(
            s.supported(&env).is_ok(),
            "{}: {:?}",
            s.name(),
            s.supported(&env)
        );
        ParamValues::defaults(s.name(), s.params())
            .decode::<serde_json::Value>(s.name())
            .unwrap();
    }
    let aggressive: Vec<_> = STRESSORS
        .iter()
        .filter(|s| s.aggressive())
        .map(|s| s.name())
        .collect();
    assert_eq!(aggressive, ["memhog", "forkbomb", "disk", "command"]);
}

#[test]
fn null_runs_nothing_until_stopped() {
    let _g = serial();
    let (c, d) = ctx(100);
    let me = std::process::id() as i32;
    let (r, lat) = run("null", &c, &[], Duration::from_millis(200)).unwrap();
    eprintln!("null: {r:?}");
    assert_eq!((r.ops, r.workers, r.bytes), (0, 0, 0));
    assert_eq!(r.ops_per_sec, 0.0);
    assert!(r.pressure.is_empty());
    // It waited for the stop flag rather than returning at once.
    assert!(r.elapsed_s >= 0.15, "{r:?}");
    assert!(lat < Duration::from_secs(1));
    assert_eq!(stressor_threads(), 0);
    assert!(processes().iter().all(|p| p.1 != me));
    assert!(isobench_files(d.path()).is_empty());
}

/// What outlasts a freeze decides between the on/off design and paired trials.
#[test]
fn lingering_effects_are_declared_where_freezing_cannot_stop_them() {
    // Serial: other tests count this process's threads.
    let _g = serial();
    let linger = |name: &str, settings: &[&str]| {
        let s = stressor(name).unwrap();
        s.lingering_effect(&ParamValues::from_settings(name, s.params(), settings).unwrap())
    };
    assert_eq!(
        linger("memhog", &[]),
        Some("the memory it holds stays resident")
    );
    assert!(linger("disk", &[]).is_some(), "buffered by default");
    assert!(linger("disk", &["direct=true"]).is_none());
    for name in [
        "null", "cpu", "cache", "membw", "forkbomb", "net-tx", "net-rx",
    ] {
        assert_eq!(linger(name, &[]), None, "{name}");
    }
}
