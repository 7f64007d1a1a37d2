//! `command`: the user's own program as the aggressor (stress-ng, a batch job, `dd`), run
//! in the aggressor tenant until the stressor is stopped.
//!
//! The program is a child of the stressor's process, so it is in the tenant's cgroup:
//! frozen and thawed with the tenant like the built-in stressors, with nothing to do here
//! (while frozen, the threads that watch it are frozen too, and pick up where they were).
//! When the stressor is stopped, the program's process group gets `stop_signal` (SIGTERM by
//! default; stress-ng prints its metrics on either SIGTERM or SIGINT), then SIGKILL after
//! `grace`; see [`crate::program`] for how it is started and cleaned up.
//!
//! A program that exits by itself is started again (`restart = true`, the default): a batch
//! job aggressor keeps its neighbour busy for the whole trial, and its completed runs are its
//! progress. With `restart = false` the copy waits, idle, for the stop. A run that exits
//! non-zero is an error when no run has succeeded yet (the command is wrong) or after three
//! failures in a row; otherwise it is counted (`failed_runs`) and the program restarted.
//!
//! Progress (`progress`), so the work the aggressor got done beside a protected victim can
//! be compared with its work alone:
//! - `runs`: completed runs (exit code 0), counted as each ends;
//! - `regex:PATTERN`: a running total the program prints, matched on each line of `stream`
//!   (the number as for the `command` probe: first capture group or whole match, the last
//!   match of a line). Within one run the progress follows the highest value seen, counted
//!   into the live operation counter as each line arrives; across runs the runs' totals add
//!   up. A completed run in which the pattern matched nothing is an error;
//! - `json:PATH` or `csv:ROW/COLUMN`: read from the whole `stream` of each run once it ends,
//!   including the run ended by the stop (stress-ng's `--metrics-brief --yaml`, or `fio
//!   --output-format=json`); the runs' values add up. A completed run whose output does not
//!   hold the value is an error; the stopped run's missing value is noted, not an error.
//!
//! Operations are whole numbers: fractional progress is rounded down. stress-ng prints its
//! bogo-ops only when it ends, so its live counter stays at 0 until the stop: declare it
//! with `counted = "at-stop"`, and the engine starts the program for each trial and reads
//! the trial's rate from the total it printed when stopped.
//!
//! Intensity: 0 is idle (nothing runs); any other intensity runs `ceil(copies x intensity /
//! 100)` copies of the program, at least one (with the default `copies = 1`, every intensity
//! above 0 runs one copy). The program's own intensity is set in its command line; `{intensity}`
//! in `cmd` is replaced by the intensity (0..=100) and `{copy}` by the copy's index, e.g.
//! `stress-ng --cpu 1 --cpu-load {intensity}`.
//!
//! Pressure: `cpu_threads`, the CPU time of the program's runs (and of the children they
//! waited for) per second of the stressor's wall time.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use serde::Deserialize;

use crate::extract::{show_tail, Extract};
use crate::params::{ParamKind, ParamSpec, ParamValues};
use crate::program::{split_command, End, Finished, Launch, Running, Stream};
use crate::{Class, Env, Pressure, StressCtx, StressReport, Stressor, Unsupported};

/// The `command` stressor.
pub struct Command;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    cmd: Option<String>,
    copies: u32,
    restart: bool,
    progress: String,
    stream: String,
    op_unit: Option<String>,
    stop_signal: String,
    grace: f64,
    lingers: bool,
    counted: String,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "cmd",
        help: "required: the command line to run, split into words as a shell would but run \
               without one \
               (write `sh -c '...'` for pipes and redirections); `{intensity}` and `{copy}` \
               are replaced by the intensity and the copy's index",
        kind: ParamKind::Text,
        default: "",
    },
    ParamSpec {
        name: "copies",
        help: "copies of the program at intensity 100 (ceil(copies x intensity / 100) run, at \
               least 1; caps.max_tasks holds it lower when uncontained)",
        kind: ParamKind::Int { min: 1, max: 1024 },
        default: "1",
    },
    ParamSpec {
        name: "restart",
        help: "start the program again each time it exits by itself (a batch job); false: the \
               copy idles until the stop",
        kind: ParamKind::Bool,
        default: "true",
    },
    ParamSpec {
        name: "progress",
        help: "the work done: `runs` (completed runs), `regex:PATTERN` (a running total the \
               program prints, read line by line), `json:PATH` or `csv:ROW/COLUMN` (read from \
               each run's whole output when it ends); summed over runs and copies",
        kind: ParamKind::Text,
        default: "runs",
    },
    ParamSpec {
        name: "stream",
        help: "which output `progress` reads (stress-ng writes its metrics to stderr)",
        kind: ParamKind::Choice {
            options: &["stdout", "stderr"],
        },
        default: "stdout",
    },
    ParamSpec {
        name: "op_unit",
        help: "what one unit of progress is (bogo-op, MB, item); empty: `run` for \
               progress=runs, else `op`",
        kind: ParamKind::Text,
        default: "",
    },
    ParamSpec {
        name: "stop_signal",
        help: "the signal that stops the program's process group (SIGKILL follows after grace)",
        kind: ParamKind::Choice {
            options: &["TERM", "INT"],
        },
        default: "TERM",
    },
    ParamSpec {
        name: "grace",
        help: "seconds between stop_signal and SIGKILL",
        kind: ParamKind::Float {
            min: 0.0,
            max: 600.0,
        },
        default: "2",
    },
    ParamSpec {
        name: "lingers",
        help: "the program's effect outlasts a freeze of its tenant (memory it holds, dirty \
               pages being written back): measure it with paired trials, never frozen and \
               thawed",
        kind: ParamKind::Bool,
        default: "false",
    },
    ParamSpec {
        name: "counted",
        help: "when the program's progress can be read: `live` (as its runs end or as it \
               prints running totals), or `at-stop` (it prints its total only when stopped, \
               as stress-ng does): the program is then started for each trial and its rate \
               read from what it printed when the trial stopped it",
        kind: ParamKind::Choice {
            options: &["live", "at-stop"],
        },
        default: "live",
    },
];

/// How progress is counted.
enum Progress {
    Runs,
    Output(Extract),
}

impl Progress {
    fn parse(text: &str) -> anyhow::Result<Progress> {
        let text = text.trim();
        if text == "runs" {
            Ok(Progress::Runs)
        } else {
            Extract::parse("progress", text)
                .map(Progress::Output)
                .map_err(|e| anyhow!("{e} (or `runs` to count completed runs)"))
        }
    }
}

/// What the copies share.
struct Shared<'a> {
    ctx: &'a StressCtx,
    o: &'a Opts,
    progress: Progress,
    stream: Stream,
    signal: i32,
    grace: Duration,
    /// Set when a copy failed: the others stop.
    abort: AtomicBool,
    error: Mutex<Option<anyhow::Error>>,
    runs: AtomicU64,
    failed_runs: AtomicU64,
    stopped_without_progress: AtomicU64,
    cpu_ns: AtomicU64,
}

impl Shared<'_> {
    fn going(&self) -> bool {
        self.ctx.running() && !self.abort.load(Ordering::Relaxed)
    }

    fn fail(&self, e: anyhow::Error) {
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(e);
        }
        self.abort.store(true, Ordering::Relaxed);
    }
}

/// Progress of one run read line by line: the highest value seen and how much of it has
/// been counted.
#[derive(Default)]
struct LineProgress {
    seen: bool,
    counted: u64,
    bad: Option<String>,
}

impl Stressor for Command {
    fn name(&self) -> &'static str {
        "command"
    }
    fn help(&self) -> &'static str {
        "Runs your own program (cmd: stress-ng, a batch job, dd) in the aggressor tenant until \
         stopped, restarting it when it exits (restart), and counts its progress: completed \
         runs, or a figure it prints (regex:, json:, csv:). Stopped with SIGTERM (or SIGINT) \
         to its process group, then SIGKILL; nothing it started in its group is left running."
    }
    fn class(&self) -> Class {
        Class::App
    }
    fn intensity_knob(&self) -> &'static str {
        "copies of the program: 0 = idle, otherwise ceil(copies x intensity / 100), at least \
         1; {intensity} in cmd passes the level to the program"
    }
    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }
    fn aggressive(&self) -> bool {
        // It can be anything, a fork bomb or a memory hog included.
        true
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        // The program is a parameter: it is looked for when the stressor runs.
        Ok(())
    }
    fn lingering_effect(&self, params: &ParamValues) -> Option<&'static str> {
        let lingers = params.decode::<Opts>("command").is_ok_and(|o| o.lingers);
        lingers.then_some("the program's effect outlasts a freeze (declared with lingers=true)")
    }
    fn counts_at_stop(&self, params: &ParamValues) -> Option<&'static str> {
        let at_stop = params
            .decode::<Opts>("command")
            .is_ok_and(|o| o.counted == "at-stop");
        at_stop.then_some("the program prints its progress only when stopped (counted=at-stop)")
    }
    fn run(&self, ctx: &StressCtx, params: &ParamValues) -> anyhow::Result<StressReport> {
        let o: Opts = params.decode("command")?;
        let progress = Progress::parse(&o.progress)?;
        let op_unit = match (&progress, o.op_unit.as_deref().unwrap_or("").trim()) {
            (_, u) if !u.is_empty() => u.to_string(),
            (Progress::Runs, _) => "run".to_string(),
            (Progress::Output(_), _) => "op".to_string(),
        };
        if ctx.intensity == 0 || !ctx.running() {
            return Ok(super::pool::idle_report(ctx, op_unit));
        }
        let argv = split_command("cmd", o.cmd.as_deref().unwrap_or(""))?;
        let mut copies = (o.copies as u64 * ctx.intensity as u64)
            .div_ceil(100)
            .max(1) as u32;
        if let Some(m) = ctx.caps.max_tasks {
            copies = copies.min(m.max(1));
        }
        let shared = Shared {
            ctx,
            o: &o,
            progress,
            stream: Stream::from_word(&o.stream),
            signal: if o.stop_signal == "INT" {
                libc::SIGINT
            } else {
                libc::SIGTERM
            },
            grace: Duration::from_secs_f64(o.grace),
            abort: AtomicBool::new(false),
            error: Mutex::new(None),
            runs: AtomicU64::new(0),
            failed_runs: AtomicU64::new(0),
            stopped_without_progress: AtomicU64::new(0),
            cpu_ns: AtomicU64::new(0),
        };
        let base = ctx.ops();
        let t0 = Instant::now();
        std::thread::scope(|s| {
            for i in 0..copies {
                let argv: Vec<String> = argv
                    .iter()
                    .map(|w| {
                        w.replace("{intensity}", &ctx.intensity.to_string())
                            .replace("{copy}", &i.to_string())
                    })
                    .collect();
                let shared = &shared;
                let spawned = std::thread::Builder::new()
                    .name(format!("isobench-command-{i}"))
                    .spawn_scoped(s, move || copy_loop(shared, i as usize, &argv));
                if let Err(e) = spawned {
                    shared.fail(anyhow!("cannot start copy {i} of the program: {e}"));
                }
            }
        });
        let elapsed_s = t0.elapsed().as_secs_f64();
        if let Some(e) = shared.error.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(e);
        }
        let ops = ctx.ops().saturating_sub(base);
        let cpu_s = shared.cpu_ns.load(Ordering::Relaxed) as f64 / 1e9;
        let mut notes = vec![
            format!("runs={}", shared.runs.load(Ordering::Relaxed)),
            format!("copies={copies}"),
        ];
        let failed = shared.failed_runs.load(Ordering::Relaxed);
        if failed > 0 {
            notes.push(format!("failed_runs={failed}"));
        }
        let unread = shared.stopped_without_progress.load(Ordering::Relaxed);
        if unread > 0 {
            notes.push(format!(
                "stopped_runs_without_progress={unread} (their output held no `{}`)",
                o.progress
            ));
        }
        Ok(StressReport {
            ops,
            elapsed_s,
            ops_per_sec: super::pool::rate(ops, elapsed_s),
            op_unit,
            workers: copies,
            bytes: 0,
            notes,
            pressure: vec![Pressure::rate("cpu_threads", "CPUs", cpu_s, elapsed_s)],
        })
    }
}

/// One copy: run, count, restart until stopped.
fn copy_loop(sh: &Shared<'_>, copy: usize, argv: &[String]) {
    let mut failures_in_a_row = 0u32;
    while sh.going() {
        let live = Arc::new(Mutex::new(LineProgress::default()));
        let on_line = match &sh.progress {
            Progress::Output(x) if x.is_regex() => {
                let (x, live, ops) = (x.clone(), live.clone(), sh.ctx.ops.clone());
                let f: crate::program::LineFn = Box::new(move |line: &str| {
                    let Some(v) = x.in_line(line) else { return };
                    let mut p = live.lock().unwrap_or_else(|p| p.into_inner());
                    p.seen = true;
                    match v {
                        Ok(v) => {
                            let now = v.max(0.0).floor() as u64;
                            if now > p.counted {
                                ops.fetch_add(now - p.counted, Ordering::Relaxed);
                                p.counted = now;
                            }
                        }
                        Err(e) => p.bad = Some(e),
                    }
                });
                Some((sh.stream, f))
            }
            _ => None,
        };
        let keep_all = match &sh.progress {
            Progress::Output(x) if !x.is_regex() => Some(sh.stream),
            _ => None,
        };
        let launch = Launch {
            argv,
            workdir: &sh.ctx.workdir,
            cpu: sh.ctx.cpu_for_worker(copy),
            keep_all,
            on_line,
        };
        let running = match Running::start("cmd", launch) {
            Ok(r) => r,
            Err(e) => return sh.fail(e),
        };
        let done = running.finish(&|| !sh.going(), None, sh.signal, sh.grace);
        sh.cpu_ns
            .fetch_add(done.cpu.as_nanos() as u64, Ordering::Relaxed);
        let live = live.lock().unwrap_or_else(|p| p.into_inner());
        if done.end != End::Exited {
            count_stopped_run(sh, &done, &live);
            return;
        }
        if !done.status.success() {
            sh.failed_runs.fetch_add(1, Ordering::Relaxed);
            failures_in_a_row += 1;
            if sh.runs.load(Ordering::Relaxed) == 0 || failures_in_a_row >= 3 {
                let why = if failures_in_a_row >= 3 {
                    "three runs in a row failed"
                } else {
                    "its first run failed"
                };
                return sh.fail(anyhow!(
                    "`{}` failed ({}): {why}; fix `cmd`{}",
                    argv[0],
                    done.status,
                    done.stderr_tail()
                ));
            }
        } else {
            failures_in_a_row = 0;
            sh.runs.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = count_completed_run(sh, &done, &live) {
                return sh.fail(e);
            }
        }
        drop(live);
        if !sh.o.restart {
            while sh.going() {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// Counts the progress of a run that exited by itself with code 0.
fn count_completed_run(
    sh: &Shared<'_>,
    done: &Finished,
    live: &LineProgress,
) -> anyhow::Result<()> {
    let x = match &sh.progress {
        Progress::Runs => {
            sh.ctx.add_ops(1);
            return Ok(());
        }
        Progress::Output(x) => x,
    };
    let out = done.stream(sh.stream);
    if x.is_regex() {
        if let Some(bad) = &live.bad {
            anyhow::bail!(
                "progress={x}: {bad} in the program's {}; fix `progress`",
                sh.stream.as_str()
            );
        }
        if !live.seen {
            anyhow::bail!(
                "progress={x} matched no line of the program's {} in a completed run; fix \
                 `progress` or `stream`{}",
                sh.stream.as_str(),
                show_tail(sh.stream.as_str(), &out.text)
            );
        }
        return Ok(());
    }
    let v = x
        .value("progress", sh.stream.as_str(), &out.text)
        .map_err(|e| anyhow!("{e}\n  (the output of a run that completed)"))?;
    sh.ctx.add_ops(v.max(0.0).floor() as u64);
    Ok(())
}

/// Counts what the run ended by the stop reported, when its output holds it.
fn count_stopped_run(sh: &Shared<'_>, done: &Finished, live: &LineProgress) {
    match &sh.progress {
        // An unfinished run is no run.
        Progress::Runs => {}
        Progress::Output(x) if x.is_regex() => {
            if !live.seen {
                sh.stopped_without_progress.fetch_add(1, Ordering::Relaxed);
            }
        }
        Progress::Output(x) => {
            match x.value("progress", sh.stream.as_str(), &done.stream(sh.stream).text) {
                Ok(v) => sh.ctx.add_ops(v.max(0.0).floor() as u64),
                Err(_) => {
                    sh.stopped_without_progress.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}
