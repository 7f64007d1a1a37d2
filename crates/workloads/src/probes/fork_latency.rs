//! `fork-latency`: the cost of creating a process.
//!
//! Two operations, each timed one by one (every one lasts tens of microseconds or more, far
//! above the timer's resolution) with the timer overhead subtracted:
//! - `fork`: `fork()`, the child calls `_exit(0)` at once, the parent `waitpid`s it;
//! - `exec`: `fork()`, the child `execve`s `exec_path` (default `/bin/true`) with an empty
//!   environment, the parent `waitpid`s it and checks it exited with status 0.
//!
//! The first few operations are warm-up. Every duration goes into an HdrHistogram and the
//! probe reports mean, p50, p99, p99.9 and max per operation (`fork_*_ns`, `exec_*_ns`; the
//! histogram rides on the p50 metric). The cost depends on the parent's size (page tables
//! are copied), so it is measured from the probe's own process as the agent runs it.
//! Every child is waited for before the next fork: none is ever left behind.
//!
//! With a window length the probe runs for its whole budget and each mode's mean and p50
//! also come as window series over its timed operations (p99 and p99.9 only when every
//! window holds enough operations; see `series`).

use std::ffi::CString;

use serde::Deserialize;

use super::cm_common::lower;
use super::cm_proc::wait_pid;
use super::series::{attach_latency, Event};
use crate::metric::{latency_metrics, LatencyHistogram, Metric, MetricSpec};
use crate::params::{ParamKind, ParamSpec, ParamValues};
use crate::timer::now_ns;
use crate::{Class, Env, Probe, ProbeCtx, Unsupported};

/// The `fork-latency` probe.
pub struct ForkLatency;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    mode: String,
    exec_path: String,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "mode",
        help: "fork: fork+_exit+waitpid; exec: fork+execve+waitpid; all: both",
        kind: ParamKind::Choice {
            options: &["all", "fork", "exec"],
        },
        default: "all",
    },
    ParamSpec {
        name: "exec_path",
        help: "program the exec operation runs (no arguments, empty environment); it must \
               exit with status 0",
        kind: ParamKind::Text,
        default: "/bin/true",
    },
];

const METRICS: &[MetricSpec] = &[
    lower("fork_mean_ns", "ns"),
    lower("fork_p50_ns", "ns"),
    lower("fork_p99_ns", "ns"),
    lower("fork_p999_ns", "ns"),
    lower("fork_max_ns", "ns"),
    lower("exec_mean_ns", "ns"),
    lower("exec_p50_ns", "ns"),
    lower("exec_p99_ns", "ns"),
    lower("exec_p999_ns", "ns"),
    lower("exec_max_ns", "ns"),
];

/// Operations discarded at the start of each mode.
const WARMUP: u32 = 5;
/// Fewest operations timed per mode, even past the budget.
const MIN_OPS: u64 = 20;

impl Probe for ForkLatency {
    fn name(&self) -> &'static str {
        "fork-latency"
    }
    fn help(&self) -> &'static str {
        "Process creation cost, each operation timed on its own: fork (fork, child _exit(0), \
         parent waitpid) and exec (fork, child execve exec_path=/bin/true, parent waitpid, \
         exit status checked). Reports fork_{mean,p50,p99,p999,max}_ns and the same for exec \
         from an HdrHistogram of every operation after 5 warm-up ones. Depends on the size of \
         the forking process."
    }
    fn windowed(&self) -> bool {
        true
    }
    fn class(&self) -> Class {
        Class::Process
    }
    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }
    fn metrics(&self) -> &'static [MetricSpec] {
        METRICS
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        if !is_executable("/bin/true") {
            return Err(Unsupported::new(
                "/bin/true is missing or not executable (the exec operation runs it; set \
                 exec_path to another program that exits 0, or mode=fork)",
            ));
        }
        Ok(())
    }
    fn run(&self, ctx: &ProbeCtx, params: &ParamValues) -> anyhow::Result<Vec<Metric>> {
        let o: Opts = params.decode(self.name())?;
        ctx.pin_self()?;
        let modes: Vec<bool> = match o.mode.as_str() {
            "fork" => vec![false],
            "exec" => vec![true],
            _ => vec![false, true],
        };
        if modes.contains(&true) {
            anyhow::ensure!(
                is_executable(&o.exec_path),
                "fork-latency: exec_path={} is not an executable file",
                o.exec_path
            );
        }
        let path = CString::new(o.exec_path.clone())
            .map_err(|_| anyhow::anyhow!("fork-latency: exec_path contains a NUL byte"))?;
        let budget_ns = (ctx.budget / modes.len() as u32).as_nanos() as u64;
        let mut out = Vec::new();
        for exec in modes {
            let (h, timed) = time_ops(ctx, exec.then_some(&path), budget_ns)?;
            let prefix = if exec { "exec" } else { "fork" };
            let mut ms = latency_metrics(prefix, "ns", &h);
            if let Some(w) = ctx.window.filter(|_| !timed.events.is_empty()) {
                attach_latency(
                    &mut ms,
                    prefix,
                    "ns",
                    &timed.events,
                    timed.begin,
                    timed.end,
                    w.as_nanos() as u64,
                );
            }
            out.extend(ms);
        }
        Ok(out)
    }
}

/// The timed operations of one mode, for window series.
struct Timed {
    /// Each timed operation: its end and its latency, ns.
    events: Vec<Event>,
    /// Start of the first timed operation (after the warm-up).
    begin: u64,
    /// End of the last one.
    end: u64,
}

/// Times fork(+exec)+wait operations for `budget_ns` (at least `MIN_OPS` after warm-up);
/// with a window length, also keeps each timed operation.
fn time_ops(
    ctx: &ProbeCtx,
    exec: Option<&CString>,
    budget_ns: u64,
) -> anyhow::Result<(LatencyHistogram, Timed)> {
    // Everything the child touches is prepared before fork.
    let argv: Vec<*const libc::c_char> = exec
        .map(|p| vec![p.as_ptr(), std::ptr::null()])
        .unwrap_or_default();
    let envp: [*const libc::c_char; 1] = [std::ptr::null()];
    let mut h = LatencyHistogram::new();
    let deadline = now_ns() + budget_ns;
    let mut done = 0u32;
    let mut timed = Timed {
        events: Vec::new(),
        begin: 0,
        end: 0,
    };
    loop {
        let t0 = now_ns();
        // SAFETY: the child only calls execve and _exit, both async-signal-safe, on data
        // prepared before the fork.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: see above.
            unsafe {
                if let Some(p) = exec {
                    libc::execve(p.as_ptr(), argv.as_ptr(), envp.as_ptr());
                    libc::_exit(127);
                }
                libc::_exit(0);
            }
        }
        if pid < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        let status = wait_pid(pid)?;
        let t1 = now_ns();
        let dt = (t1 - t0) as f64 - ctx.timer_overhead_ns;
        if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
            anyhow::bail!(
                "fork-latency: child {} (wait status {status:#x})",
                match exec {
                    Some(p) => format!("running {} did not exit 0", p.to_string_lossy()),
                    None => "did not exit 0".to_string(),
                }
            );
        }
        done += 1;
        if done > WARMUP {
            // `Histogram::record` grows the histogram to fit; `LatencyHistogram::record`
            // (saturating) would clamp to the histogram's current highest value.
            h.0.record(dt.max(1.0) as u64)
                .map_err(|e| anyhow::anyhow!("fork-latency: histogram: {e:?}"))?;
            if ctx.window.is_some() {
                if timed.events.is_empty() {
                    timed.begin = t0;
                }
                timed.events.push(Event {
                    t_ns: t1,
                    value: dt.max(1.0),
                });
                timed.end = t1;
            }
        }
        if h.len() >= MIN_OPS && (now_ns() >= deadline || ctx.stopped()) {
            break;
        }
    }
    Ok((h, timed))
}

fn is_executable(path: &str) -> bool {
    let Ok(c) = CString::new(path) else {
        return false;
    };
    // SAFETY: c is a valid NUL-terminated string.
    let ok = unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0;
    ok && std::path::Path::new(path).is_file()
}
