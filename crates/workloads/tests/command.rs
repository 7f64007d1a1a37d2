//! The `command` probe and stressor, run for real with `sh -c` programs, fio and stress-ng:
//! the number is read, errors quote the program and name the parameter to fix, and nothing
//! the program started is left running.
//!
//! Assertions are about behaviour, never speed. The tests take a lock: each one looks for
//! the children of this process, which must be its own.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use isobench_workloads::{
    probe, stressor, Direction, Env, Metric, ParamValues, ProbeCtx, StressCtx, StressReport,
};

#[path = "../../../tests/skip.rs"]
mod skip;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn probe_ctx(dir: &Path) -> ProbeCtx {
    let mut c = ProbeCtx::detect();
    c.workdir = dir.to_path_buf();
    c
}

fn run_probe(dir: &Path, settings: &[&str]) -> anyhow::Result<Vec<Metric>> {
    let p = probe("command").expect("command probe listed");
    let params = ParamValues::from_settings("command", p.params(), settings)?;
    p.run(&probe_ctx(dir), &params)
}

fn one(ms: Vec<Metric>) -> Metric {
    assert_eq!(ms.len(), 1, "{ms:?}");
    ms.into_iter().next().unwrap()
}

/// (pid, ppid, pgrp) of every process but zombies (a killed orphan is one until the
/// machine's init reaps it, which may take a while; it holds nothing).
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
        if f.len() > 3 && f[0] != "Z" && f[0] != "X" {
            out.push((pid, f[1].parse().unwrap_or(0), f[2].parse().unwrap_or(0)));
        }
    }
    out
}

/// Process groups of this process's children that are groups of their own (the programs'),
/// sampled every 10 ms while `f` runs; then asserts that none of them has a member left
/// once `f` returned. Children left in this process's own group (other tests' helpers) are
/// not the program's.
fn leaves_no_process<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    let me = std::process::id() as i32;
    // SAFETY: getpgrp has no arguments and cannot fail.
    let own_group = unsafe { libc::getpgrp() };
    let done = std::sync::atomic::AtomicBool::new(false);
    let (out, groups) = thread::scope(|s| {
        let watcher = s.spawn(|| {
            let mut groups = HashSet::new();
            while !done.load(Ordering::SeqCst) {
                for (_, ppid, pgrp) in processes() {
                    if ppid == me && pgrp != me && pgrp != own_group {
                        groups.insert(pgrp);
                    }
                }
                thread::sleep(Duration::from_millis(10));
            }
            groups
        });
        let out = f();
        done.store(true, Ordering::SeqCst);
        (out, watcher.join().unwrap())
    });
    let left: Vec<_> = processes()
        .into_iter()
        .filter(|p| groups.contains(&p.2))
        .collect();
    assert!(
        left.is_empty(),
        "left running: {left:?} (groups {groups:?})"
    );
    out
}

#[test]
fn runtime_is_the_programs_wall_time() {
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    let m = one(run_probe(d.path(), &["cmd=sh -c 'sleep 0.2'"]).unwrap());
    assert_eq!((m.name.as_str(), m.unit.as_str()), ("value", "s"));
    assert_eq!(m.direction, Direction::Lower);
    assert!(m.value >= 0.2, "{m:?}");
}

#[test]
fn the_program_runs_in_the_working_directory() {
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("n.txt"), "answer: 42\n").unwrap();
    let m = one(run_probe(
        d.path(),
        &[
            "cmd=cat n.txt",
            "metric=regex:answer: (\\d+)",
            "unit=items",
            "direction=higher",
            "name=answer",
        ],
    )
    .unwrap());
    assert_eq!(m.name, "answer");
    assert_eq!(m.unit, "items");
    assert_eq!(m.direction, Direction::Higher);
    assert_eq!(m.value, 42.0);
}

#[test]
fn regex_last_and_stderr_stream() {
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    let cmd = "cmd=sh -c 'echo t=1 >&2; echo t=2 >&2; echo t=3'";
    let first = one(run_probe(
        d.path(),
        &[
            cmd,
            "metric=regex:t=(\\d)",
            "stream=stderr",
            "unit=x",
            "direction=lower",
        ],
    )
    .unwrap());
    assert_eq!(first.value, 1.0);
    let last = one(run_probe(
        d.path(),
        &[
            cmd,
            "metric=regex-last:t=(\\d)",
            "stream=stderr",
            "unit=x",
            "direction=lower",
        ],
    )
    .unwrap());
    assert_eq!(last.value, 2.0);
}

#[test]
fn csv_cell_of_a_redis_benchmark_style_table() {
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("out.csv"),
        "\"test\",\"rps\",\"avg_latency_ms\",\"p99_latency_ms\"\n\
         \"PING_INLINE\",\"99009.90\",\"0.271\",\"0.519\"\n\
         \"SET\",\"98039.22\",\"0.279\",\"0.527\"\n",
    )
    .unwrap();
    let m = one(run_probe(
        d.path(),
        &[
            "cmd=cat out.csv",
            "metric=csv:SET/p99_latency_ms",
            "unit=ms",
            "direction=lower",
        ],
    )
    .unwrap());
    assert_eq!(m.value, 0.527);
}

#[test]
fn a_failing_program_is_an_error_quoting_its_stderr() {
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    let script = "for i in $(seq 1 30); do echo \"line $i\" >&2; done; exit 3";
    let e = run_probe(d.path(), &[&format!("cmd=sh -c '{script}'")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("exit code 3"), "{e}");
    assert!(e.contains("fix `cmd`"), "{e}");
    // The tail: the last ten lines, not the first.
    assert!(e.contains("line 30") && e.contains("line 21"), "{e}");
    assert!(!e.contains("line 20\n"), "{e}");
}

#[test]
fn a_missing_program_is_a_clear_error() {
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    let e = run_probe(d.path(), &["cmd=isobench-no-such-program --x"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("`isobench-no-such-program` not found"), "{e}");
    assert!(e.contains("fix `cmd`"), "{e}");
    let e = run_probe(d.path(), &[]).unwrap_err().to_string();
    assert!(e.contains("`cmd` is empty"), "{e}");
    let e = run_probe(d.path(), &["cmd=sh -c 'unclosed"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("close its quotes"), "{e}");
}

#[test]
fn output_without_the_number_names_the_metric_param() {
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    let e = run_probe(
        d.path(),
        &[
            "cmd=sh -c 'echo no numbers here; echo warn: cache cold >&2'",
            "metric=regex:rate=(\\d+)",
            "unit=ops/s",
            "direction=higher",
        ],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("fix `metric`"), "{e}");
    assert!(e.contains("no numbers here"), "{e}");
    assert!(e.contains("warn: cache cold"), "{e}");
    // An extracted metric needs its unit and direction.
    let e = run_probe(d.path(), &["cmd=true", "metric=regex:(\\d+)"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("set `unit`"), "{e}");
    let e = run_probe(d.path(), &["cmd=true", "metric=regex:(\\d+)", "unit=ms"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("set `direction`"), "{e}");
    let e = run_probe(d.path(), &["cmd=true", "metric=jsn:a"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("expected regex:PATTERN"), "{e}");
}

#[test]
fn timeout_stops_the_program_and_its_children() {
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let e = leaves_no_process(|| {
        run_probe(
            d.path(),
            &[
                "cmd=sh -c 'sleep 1000 & sleep 1000 & echo started >&2; wait'",
                "timeout=0.5",
                "grace=0.5",
            ],
        )
        .unwrap_err()
        .to_string()
    });
    assert!(e.contains("timeout=0.5s"), "{e}");
    assert!(e.contains("started"), "{e}");
    // Generous: catches a probe that waits for the program, not a slow machine.
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
}

#[test]
fn the_stop_flag_ends_a_program_that_ignores_sigterm() {
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    let p = probe("command").unwrap();
    let params = ParamValues::from_settings(
        "command",
        p.params(),
        &["cmd=sh -c 'trap \"\" TERM; sleep 1000'", "grace=0.2"],
    )
    .unwrap();
    let ctx = probe_ctx(d.path());
    let stop = ctx.stop.clone();
    let e = leaves_no_process(|| {
        thread::scope(|s| {
            s.spawn(|| {
                thread::sleep(Duration::from_millis(300));
                stop.store(true, Ordering::SeqCst);
            });
            p.run(&ctx, &params).unwrap_err().to_string()
        })
    });
    assert!(e.contains("was stopped"), "{e}");
}

/// A tiny real fio job read through the JSON path in the form fio's documentation uses.
#[test]
fn fio_json_percentile_through_the_path() {
    let _g = serial();
    if which("fio").is_none() {
        skip::skip("fio", "fio is not installed (apt-get install fio)");
        return;
    }
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let job = "cmd=fio --name=probe --filename=fio.dat --size=1M --rw=randread --bs=4k \
               --ioengine=psync --output-format=json";
    let p99 = one(run_probe(
        d.path(),
        &[
            job,
            r#"metric=json:jobs[0].read.clat_ns.percentile["99.000000"]"#,
            "unit=ns",
            "direction=lower",
            "name=read_p99_ns",
        ],
    )
    .unwrap());
    eprintln!("fio: {p99:?}");
    assert_eq!(p99.name, "read_p99_ns");
    assert!(p99.value > 0.0, "{p99:?}");
    let iops = one(run_probe(
        d.path(),
        &[
            job,
            "metric=json:$.jobs[0].read.iops",
            "unit=IO/s",
            "direction=higher",
        ],
    )
    .unwrap());
    assert!(iops.value > 0.0, "{iops:?}");
    // A path fio's document does not have is an error naming `metric`.
    let e = run_probe(
        d.path(),
        &[
            job,
            "metric=json:jobs[0].read.clat_ns.percentile[\"99.5\"]",
            "unit=ns",
            "direction=lower",
        ],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("selects nothing") && e.contains("fix `metric`"),
        "{e}"
    );
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}

fn stress_ctx(dir: &Path, intensity: u8) -> StressCtx {
    let mut env = Env::detect();
    env.workdir = dir.to_path_buf();
    let mut c = StressCtx::new(env, intensity);
    c.workdir = dir.to_path_buf();
    c
}

/// Runs the command stressor for `run_for`, then stops it. Returns the report, the live
/// counter just before the stop, and how long it took to return after the stop.
fn run_stressor(
    c: &StressCtx,
    settings: &[&str],
    run_for: Duration,
) -> (anyhow::Result<StressReport>, u64, Duration) {
    let s = stressor("command").expect("command stressor listed");
    let params = ParamValues::from_settings("command", s.params(), settings).unwrap();
    let (returned_tx, returned_rx) = std::sync::mpsc::channel::<()>();
    thread::scope(|sc| {
        let timer = sc.spawn(move || {
            // A stressor that returns early (an error) ends the wait.
            let _ = returned_rx.recv_timeout(run_for);
            let live = c.ops();
            c.stop.store(true, Ordering::SeqCst);
            (live, Instant::now())
        });
        let r = s.run(c, &params);
        let returned = Instant::now();
        let _ = returned_tx.send(());
        let (live, stopped) = timer.join().unwrap();
        (r, live, returned.saturating_duration_since(stopped))
    })
}

fn note(r: &StressReport, key: &str) -> Option<u64> {
    r.notes
        .iter()
        .find_map(|n| n.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

#[test]
fn the_stressor_restarts_a_short_program_and_counts_its_runs() {
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    let c = stress_ctx(d.path(), 100);
    let (r, live, lat) = leaves_no_process(|| {
        run_stressor(&c, &["cmd=sh -c 'sleep 0.02'"], Duration::from_millis(800))
    });
    let r = r.unwrap();
    eprintln!("{r:?}");
    assert!(r.ops >= 2, "{r:?}");
    assert_eq!(note(&r, "runs"), Some(r.ops));
    assert_eq!(r.op_unit, "run");
    assert_eq!(r.workers, 1);
    assert!(live >= 1 && live <= r.ops, "live {live}, {r:?}");
    assert!(r.ops_per_sec > 0.0);
    assert!(r.pressure("cpu_threads").is_some(), "{r:?}");
    assert!(lat < Duration::from_secs(5), "{lat:?}");
}

#[test]
fn the_stressor_stops_the_program_and_everything_in_its_group() {
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    let c = stress_ctx(d.path(), 100);
    // Children that ignore SIGTERM, so SIGKILL has to follow.
    let (r, _, lat) = leaves_no_process(|| {
        run_stressor(
            &c,
            &[
                "cmd=sh -c 'trap \"\" TERM; sleep 1000 & sleep 1000 & wait'",
                "grace=0.3",
                "copies=2",
            ],
            Duration::from_millis(400),
        )
    });
    let r = r.unwrap();
    assert_eq!(r.workers, 2, "{r:?}");
    // Nothing completed: an unfinished run is not counted.
    assert_eq!(r.ops, 0, "{r:?}");
    assert!(lat < Duration::from_secs(10), "{lat:?}");
}

#[test]
fn restart_false_runs_once_then_idles() {
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    let c = stress_ctx(d.path(), 100);
    let (r, _, _) = run_stressor(
        &c,
        &["cmd=true", "restart=false"],
        Duration::from_millis(300),
    );
    let r = r.unwrap();
    assert_eq!(r.ops, 1, "{r:?}");
}

#[test]
fn a_stressor_program_that_fails_at_once_is_an_error() {
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    let c = stress_ctx(d.path(), 100);
    let (r, _, _) = run_stressor(
        &c,
        &["cmd=sh -c 'echo no such input file >&2; exit 2'"],
        Duration::from_secs(10),
    );
    let e = r.unwrap_err().to_string();
    assert!(
        e.contains("exit code 2") && e.contains("no such input file"),
        "{e}"
    );
    assert!(e.contains("fix `cmd`"), "{e}");
    let c = stress_ctx(d.path(), 100);
    let (r, _, _) = run_stressor(
        &c,
        &["cmd=isobench-no-such-program"],
        Duration::from_secs(10),
    );
    let e = r.unwrap_err().to_string();
    assert!(e.contains("not found"), "{e}");
}

#[test]
fn regex_progress_counts_live_and_sums_over_runs() {
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    let c = stress_ctx(d.path(), 100);
    // A running total printed line by line, forever.
    let forever = "cmd=sh -c 'i=0; while :; do i=$((i+1)); echo done $i; sleep 0.01; done'";
    let (r, live, _) = run_stressor(
        &c,
        &[forever, "progress=regex:done (\\d+)", "op_unit=item"],
        Duration::from_millis(600),
    );
    let r = r.unwrap();
    assert!(live > 0, "the live counter moved: {live}");
    assert!(r.ops >= live, "{r:?} vs {live}");
    assert_eq!(r.op_unit, "item");
    // Three items a run, summed over runs.
    let c = stress_ctx(d.path(), 100);
    let (r, _, _) = run_stressor(
        &c,
        &[
            "cmd=sh -c 'echo done 1; echo done 2; echo done 3'",
            "progress=regex:done (\\d+)",
        ],
        Duration::from_millis(500),
    );
    let r = r.unwrap();
    let runs = note(&r, "runs").unwrap();
    assert!(runs >= 1, "{r:?}");
    assert!(r.ops >= 3 * runs && r.ops <= 3 * runs + 3, "{r:?}");
    // A completed run without a match is an error naming `progress`.
    let c = stress_ctx(d.path(), 100);
    let (r, _, _) = run_stressor(
        &c,
        &["cmd=echo nothing", "progress=regex:done (\\d+)"],
        Duration::from_secs(5),
    );
    let e = r.unwrap_err().to_string();
    assert!(e.contains("fix `progress`") && e.contains("nothing"), "{e}");
}

#[test]
fn json_progress_is_read_from_the_run_ended_by_the_stop() {
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("job.sh"),
        "trap 'echo \"{\\\"done\\\": {\\\"items\\\": 7}}\"; exit 0' TERM\nwhile :; do sleep 0.05; done\n",
    )
    .unwrap();
    let c = stress_ctx(d.path(), 100);
    let (r, _, _) = run_stressor(
        &c,
        &["cmd=sh job.sh", "progress=json:done.items"],
        Duration::from_millis(300),
    );
    let r = r.unwrap();
    assert_eq!(r.ops, 7, "{r:?}");
}

#[test]
fn stress_ng_bogo_ops_are_the_progress() {
    let _g = serial();
    if which("stress-ng").is_none() {
        skip::skip(
            "stress-ng",
            "stress-ng is not installed (apt-get install stress-ng)",
        );
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let c = stress_ctx(d.path(), 100);
    // stress-ng writes its metrics to stderr when it ends, on SIGTERM as on SIGINT:
    // `stress-ng: metrc: [PID] cpu   2226   2.00   1.98 ...`.
    let (r, live, lat) = leaves_no_process(|| {
        run_stressor(
            &c,
            &[
                "cmd=stress-ng --cpu 1 --metrics-brief --timeout 0",
                r"progress=regex:metrc:.*\] cpu\s+(\d+)\s",
                "stream=stderr",
                "op_unit=bogo-op",
            ],
            Duration::from_millis(1500),
        )
    });
    let r = r.unwrap();
    eprintln!("stress-ng: {r:?}, live {live}, stopped in {lat:?}");
    // The figure comes only at the end, so the live counter stays at 0 until then.
    assert_eq!(live, 0);
    assert!(r.ops > 0, "{r:?}");
    assert_eq!(note(&r, "stopped_runs_without_progress"), None, "{r:?}");
    assert!(r.pressure("cpu_threads").unwrap().value > 0.0, "{r:?}");
    assert!(lat < Duration::from_secs(10), "{lat:?}");
}

#[test]
fn intensity_maps_to_copies_and_substitutes() {
    let _g = serial();
    let d = tempfile::tempdir().unwrap();
    let c = stress_ctx(d.path(), 50);
    let (r, _, _) = run_stressor(
        &c,
        &[
            "cmd=sh -c 'echo level {intensity} copy {copy}; sleep 0.02'",
            "copies=4",
            "progress=regex:level 50 copy ([0-9])",
        ],
        Duration::from_millis(400),
    );
    let r = r.unwrap();
    assert_eq!(r.workers, 2, "{r:?}");
    // Each completed run of copy 1 counts 1 (its highest value), copy 0 none.
    assert!(r.ops >= 1, "{r:?}");
}
