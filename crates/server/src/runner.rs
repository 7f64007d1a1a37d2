//! The worker: runs the queued jobs one at a time, each as a child `isobench run
//! --json-stream` (a crash of a run cannot take the server down, and the run is the same as
//! on the command line). It reads the child's events line by line, keeps the last progress,
//! learns the run id from `planned`, passes every event on to the live views, and keeps the
//! tail of the child's stderr as the job's error when it fails. A stop is a SIGINT to the
//! child: the run ends gracefully, stored and resumable.
//!
//! A job on several platforms is one child `isobench run --platform A,B`: its stream is each
//! platform's run stream in turn, each after a `platform_started` (docs/events.md). The job's
//! run is the first one planned (a page follows it; every run of the set carries the table
//! across the platforms), and its progress is the current platform's trials, with the
//! platform.
//!
//! A fleet job's stream is the coordinator's events (`member_progress`, `member_imported`,
//! ...; docs/events.md): its progress is every host's trials together, its run the first
//! one planned ([`FleetProgress`]).

use std::collections::VecDeque;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};

use crate::app::{App, Broadcast, RunEvent};
use crate::fleet::FleetProgress;
use crate::queue::{Job, JobState, PlatformStep, Progress};

/// Exit code of a run stopped by SIGINT.
const INTERRUPTED: i32 = 130;
/// How long a run may take to stop gracefully when the server shuts down.
const STOP_GRACE: Duration = Duration::from_secs(60);
/// Lines of the child's stderr kept for a failure's message.
const STDERR_LINES: usize = 12;

/// The command line of a job's run, as an argument vector. The values a client chose (a run
/// id, a preset, a platform) were checked when the job was queued, and are also written
/// joined to their flag (`--preset=VALUE`), so even a value that starts with `-` is that
/// flag's value and never an option of its own.
pub fn run_args(app: &App, job: &Job) -> Vec<String> {
    let mut args = vec!["run".to_string()];
    let spec = &job.spec;
    if let Some(run) = &spec.resume {
        args.push(format!("--resume={run}"));
    } else {
        if let Some(p) = &spec.preset {
            args.push(format!("--preset={p}"));
        } else if spec.scenario_name.is_some() {
            args.push(app.scenario_path(&job.id).display().to_string());
        }
        if spec.is_fleet() {
            args.push(format!("--hosts={}", app.hosts_path(&job.id).display()));
        }
        if let Some(p) = &spec.platform {
            args.push(format!("--platform={p}"));
        }
        if spec.is_cross() {
            args.push(format!("--platform={}", spec.platforms.join(",")));
        }
        if let Some(s) = spec.seed {
            args.push(format!("--seed={s}"));
        }
    }
    args.extend([
        format!("--db={}", app.config.db.display()),
        "--json-stream".into(),
        // A run measuring on this host from a shell: the job waits for it, saying so.
        "--wait".into(),
    ]);
    args
}

/// Runs jobs until the server shuts down.
pub async fn worker(app: Arc<App>, previous_child: Option<u32>) {
    if let Some(pid) = previous_child {
        wait_gone(pid, STOP_GRACE).await;
    }
    loop {
        if app.shutting_down.load(Ordering::SeqCst) {
            return;
        }
        let next = app.queue().next().cloned();
        match next {
            Some(job) => run_job(&app, job).await,
            None => app.wake.notified().await,
        }
    }
}

/// Waits until process `pid` (a run of a server that died) has ended.
async fn wait_gone(pid: u32, limit: Duration) {
    let start = tokio::time::Instant::now();
    while std::path::Path::new(&format!("/proc/{pid}")).exists() && start.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn now() -> String {
    isobench_store::Timestamp::now().to_rfc3339()
}

async fn run_job(app: &Arc<App>, job: Job) {
    let mut cmd = Command::new(&app.config.exe);
    cmd.arg0("isobench")
        .args(run_args(app, &job))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(false)
        // Its own process group: a Ctrl-C at the server's terminal reaches the server only,
        // which then stops the run itself.
        .process_group(0);
    stop_with_parent(&mut cmd);
    let child = cmd.spawn();
    let resume = job.spec.resume.clone();
    let _ = app.update_jobs(|q| {
        let j = q.get_mut(&job.id).expect("the worker's job");
        j.state = JobState::Running;
        j.started_at = Some(now());
        j.run = resume.or(j.run.take());
        if let Ok(c) = &child {
            q.child_pid = c.id();
        }
        ((), vec![job.id.clone()])
    });
    match child {
        Ok(child) => supervise(app, &job.id, child).await,
        Err(e) => finish(
            app,
            &job.id,
            JobState::Failed,
            None,
            Some(format!("could not start {}: {e}", app.config.exe.display())),
        ),
    }
}

/// Asks the kernel to send the run SIGINT if the server dies (a kill -9), so the run stops
/// gracefully and the restarted server can resume it.
///
/// SIGINT is how a run is stopped, so the run gets it at its default disposition: a server
/// started in the background of a shell (`isobench serve &`) has SIGINT ignored, an ignored
/// signal stays ignored across exec, and a shell-script run could not then trap it.
///
/// The kernel ties the signal to the thread that spawned the child: [`worker`] runs on the
/// runtime's worker threads, which live as long as the server (never spawn a run from
/// `spawn_blocking`, whose threads end when idle).
fn stop_with_parent(cmd: &mut Command) {
    // SAFETY: prctl and signal are async-signal-safe and touch no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGINT);
            Ok(())
        });
    }
}

async fn supervise(app: &Arc<App>, id: &str, mut child: Child) {
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    // A fleet run's events are its hosts' progress (crate::fleet).
    let mut fleet = app
        .queue()
        .view(id)
        .filter(|j| j.spec.is_fleet())
        .map(|j| FleetProgress::new(&j.spec.hosts));
    let tail = tokio::spawn(stderr_tail(stderr));
    read_events(app, id, stdout, fleet.as_mut()).await;
    let status = child.wait().await;
    let tail = tail.await.unwrap_or_default();
    if let Some(f) = fleet {
        // Linked now: what was read of its runs before is stale.
        app.runs.forget(&f.runs());
    }
    let _ = app.update(|q| q.child_pid = None);
    match status {
        Ok(status) => ended(app, id, status, tail),
        Err(e) => finish(app, id, JobState::Failed, None, Some(e.to_string())),
    }
}

/// Reads the child's stderr to its end; returns its last lines.
async fn stderr_tail(stderr: impl AsyncRead + Unpin) -> String {
    let mut lines = BufReader::new(stderr).lines();
    let mut tail = VecDeque::new();
    while let Ok(Some(line)) = lines.next_line().await {
        if line.trim().is_empty() {
            continue;
        }
        if tail.len() == STDERR_LINES {
            tail.pop_front();
        }
        tail.push_back(line);
    }
    Vec::from(tail).join("\n")
}

/// Reads the child's events to their end; a fleet job's with its `fleet` progress.
async fn read_events(
    app: &Arc<App>,
    id: &str,
    stdout: impl AsyncRead + Unpin,
    mut fleet: Option<&mut FleetProgress>,
) {
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        // Anything that is not an event object is ignored, as unknown events are.
        let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let Some(kind) = event.get("event").and_then(|e| e.as_str()) else {
            continue;
        };
        match fleet.as_deref_mut() {
            Some(f) if FleetProgress::is_fleet_event(kind) => on_fleet_event(app, id, f, event),
            _ => on_event(app, id, event),
        }
    }
}

/// Applies one run event to its job and passes it on.
pub fn on_event(app: &App, id: &str, event: serde_json::Value) {
    let kind = event["event"].as_str().unwrap_or_default();
    let progress = progress_of(kind, &event);
    let planned = match kind {
        "planned" => event["run"].as_str().map(str::to_string),
        _ => None,
    };
    if kind == "platforms_linked" {
        // Linked now: what was read of the set's runs before is stale.
        let runs = event["runs"].as_array().into_iter().flatten();
        let runs: Vec<String> = runs
            .filter_map(|r| r["run"].as_str().map(str::to_string))
            .collect();
        app.runs.forget(&runs);
    }
    pass_on(app, id, planned, progress, event);
}

/// Applies one event of a fleet run's coordinator to its job (its run and progress, as
/// [`FleetProgress`] reads them), and passes it on.
pub(crate) fn on_fleet_event(
    app: &App,
    id: &str,
    fleet: &mut FleetProgress,
    event: serde_json::Value,
) {
    let (run, progress) = if fleet.read(&event) {
        (fleet.run(), Some(fleet.progress()))
    } else {
        (None, None)
    };
    pass_on(app, id, run, progress, event);
}

/// Sets job `id`'s run and progress to those given, and passes `event` on to the live views
/// with the job's run.
fn pass_on(
    app: &App,
    id: &str,
    planned: Option<String>,
    progress: Option<Progress>,
    event: serde_json::Value,
) {
    // Only the plan and the trials change the job (and so the saved queue).
    let run = if planned.is_none() && progress.is_none() {
        app.queue().view(id).and_then(|j| j.run)
    } else {
        app.update_jobs(|q| {
            let Some(job) = q.get_mut(id) else {
                return (None, Vec::new());
            };
            // A run on several platforms keeps its first run as the job's.
            if let Some(r) = planned.filter(|_| !(job.spec.is_cross() && job.run.is_some())) {
                job.run = Some(r);
            }
            if let Some(mut p) = progress {
                // The platform stays until the next one starts.
                if p.platform.is_none() {
                    p.platform = job.progress.take().and_then(|o| o.platform);
                }
                job.progress = Some(p);
            }
            (job.run.clone(), vec![id.to_string()])
        })
        .unwrap_or(None)
    };
    let _ = app.events.send(Broadcast::Run(RunEvent {
        job: id.to_string(),
        run,
        event,
    }));
}

fn progress_of(kind: &str, e: &serde_json::Value) -> Option<Progress> {
    match kind {
        "trial_started" | "trial_ended" => Some(Progress {
            n: e["n"].as_u64()?,
            of: e["of"].as_u64()?,
            round: e["round"].as_u64().unwrap_or(0),
            condition: e["condition"].as_str().unwrap_or_default().to_string(),
            what: e["what"].as_str().unwrap_or_default().to_string(),
            eta_s: e["eta_s"].as_f64(),
            platform: None,
        }),
        "planned" => Some(Progress {
            n: e["done"].as_u64().unwrap_or(0),
            of: e["trials"].as_u64()?,
            round: 0,
            condition: String::new(),
            what: String::new(),
            eta_s: None,
            platform: None,
        }),
        "platform_started" => Some(Progress {
            n: 0,
            of: 0,
            round: 0,
            condition: String::new(),
            what: String::new(),
            eta_s: None,
            platform: Some(PlatformStep {
                name: e["platform"].as_str()?.to_string(),
                n: e["n"].as_u64()?,
                of: e["of"].as_u64()?,
            }),
        }),
        _ => None,
    }
}

/// Records how a run ended.
fn ended(app: &App, id: &str, status: ExitStatus, tail: String) {
    use std::os::unix::process::ExitStatusExt;
    let code = status.code();
    let shutting_down = app.shutting_down.load(Ordering::SeqCst);
    let stopping = app
        .queue()
        .view(id)
        .is_some_and(|j| j.state == JobState::Stopping);
    if shutting_down && !stopping {
        // The server stopped the run to shut down: it goes on after the restart.
        let _ = app.update_jobs(|q| {
            q.requeue_front(id);
            ((), vec![id.to_string()])
        });
        return;
    }
    let (state, error) = match (code, status.signal()) {
        (Some(0 | 4), _) => (JobState::Done, None),
        (Some(INTERRUPTED), _) => (JobState::Interrupted, None),
        (Some(c), _) => (
            JobState::Failed,
            Some(failure(&format!("exit code {c}"), &tail)),
        ),
        (None, Some(sig)) => (
            JobState::Failed,
            Some(failure(
                &format!("the run was killed by signal {sig}"),
                &tail,
            )),
        ),
        (None, None) => (JobState::Failed, Some(failure("the run ended", &tail))),
    };
    finish(app, id, state, code, error);
}

fn failure(what: &str, tail: &str) -> String {
    if tail.is_empty() {
        what.to_string()
    } else {
        format!("{what}: {tail}")
    }
}

fn finish(app: &App, id: &str, state: JobState, code: Option<i32>, error: Option<String>) {
    let _ = app.update_jobs(|q| {
        if let Some(j) = q.get_mut(id) {
            j.state = state;
            j.ended_at = Some(now());
            j.exit_code = code;
            j.error = error;
        }
        ((), vec![id.to_string()])
    });
    app.announce_all();
}

/// Sends SIGINT to the running job's run: it ends gracefully, stored and resumable.
pub fn interrupt(app: &App) -> bool {
    let Some(pid) = app.queue().child_pid else {
        return false;
    };
    // SAFETY: kill(2) with a pid this server started and has not reaped yet.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) == 0 }
}

/// Shuts the worker down: stops the running run gracefully (waiting up to a minute, then
/// killing it), after which its job is back at the head of the queue as a resume.
pub async fn shutdown(app: &Arc<App>, worker: tokio::task::JoinHandle<()>) {
    app.begin_shutdown();
    interrupt(app);
    let abort = worker.abort_handle();
    if tokio::time::timeout(STOP_GRACE, worker).await.is_err() {
        if let Some(pid) = app.queue().child_pid {
            // SAFETY: as in `interrupt`.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
        abort.abort();
        let active = app.queue().active().map(|j| j.id.clone());
        if let Some(id) = active {
            let _ = app.update(|q| {
                q.child_pid = None;
                q.requeue_front(&id)
            });
        }
    }
}
