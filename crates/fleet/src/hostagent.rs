//! The runner of a host agent (`isobench agent --listen ADDR --token-file FILE`, or
//! `--runner` in a node's runner pod), fio's `--server` for isobench. A coordinator sends it
//! a scenario; it runs `isobench run --wait --json-stream` on this host, into this host's
//! database, streams the run's events back as progress, and sends the stored run, which the
//! coordinator imports.
//!
//! The run is a child process of the agent, so everything a run does on its own (the
//! measurement slot, sweeping what dead runs left, signals, resume) holds here as well: runs
//! sent by several coordinators wait for each other, and a coordinator that leaves interrupts
//! its run as Ctrl-C would, keeping what was measured in this host's database.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use isobench_agent::{ErrorBody, ErrorCode, RunScenario, ScenarioOutput, ScenarioRunner};
use isobench_experiment::progress::Event;
use isobench_store::RunId;

/// How many of the run's last lines that are not events are kept to tell why it failed.
const KEPT_LINES: usize = 20;

/// Runs scenarios with this isobench binary, into `db`.
pub struct HostRunner {
    /// The isobench binary.
    pub exe: PathBuf,
    /// This host's results database.
    pub db: PathBuf,
}

/// The error a scenario fails with: `what` failed with `e`.
fn failed(what: &str, e: &dyn std::fmt::Display) -> Box<ErrorBody> {
    Box::new(ErrorBody::new(
        ErrorCode::WorkloadFailed,
        format!("{what}: {e}"),
    ))
}

/// What the run's output said, read to its end.
#[derive(Default)]
struct Followed {
    /// The run's id, once it was planned.
    run: Option<String>,
    /// Its final status, once it finished.
    status: Option<String>,
    /// Its last lines that were not events (its errors).
    last_lines: Vec<String>,
}

impl ScenarioRunner for HostRunner {
    fn run(
        &self,
        req: &RunScenario,
        progress: &mut dyn FnMut(&str),
        stop: &AtomicBool,
    ) -> Result<ScenarioOutput, Box<ErrorBody>> {
        let dir = tempfile::tempdir().map_err(|e| failed("creating a scenario directory", &e))?;
        let mut child = self
            .command(req, dir.path())?
            .spawn()
            .map_err(|e| failed(&format!("starting {}", self.exe.display()), &e))?;
        let followed = follow(&mut child, progress, stop);
        let exit = child
            .wait()
            .map_err(|e| failed("waiting for the run", &e))?;
        let exit_code = exit.code().unwrap_or(128 + 9);
        let Some(run_id) = followed.run else {
            return Err(Box::new(ErrorBody::new(
                ErrorCode::WorkloadFailed,
                format!(
                    "the run on this host ended (exit code {exit_code}) before it stored \
                     anything: {}",
                    followed.last_lines.join(" | ")
                ),
            )));
        };
        self.stored(run_id, followed.status, exit_code)
    }
}

impl HostRunner {
    /// The `isobench run` of `req`, its scenario file (when it is no preset) written in `dir`.
    fn command(&self, req: &RunScenario, dir: &Path) -> Result<Command, Box<ErrorBody>> {
        let mut cmd = Command::new(&self.exe);
        cmd.arg("run");
        match &req.preset {
            Some(p) => {
                cmd.args(["--preset", p]);
            }
            None => {
                let name = Path::new(&req.file_name)
                    .file_name()
                    .map(PathBuf::from)
                    .unwrap_or_else(|| "scenario.toml".into());
                let file = dir.join(name);
                std::fs::write(&file, &req.scenario)
                    .map_err(|e| failed("writing the scenario", &e))?;
                cmd.arg(file);
            }
        }
        cmd.arg("--db").arg(&self.db);
        cmd.args(["--wait", "--json-stream"]);
        if let Some(s) = req.seed {
            cmd.args(["--seed", &s.to_string()]);
        }
        if let Some(p) = &req.platform {
            cmd.args(["--platform", p]);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Ok(cmd)
    }

    /// The stored run `run_id`, as the coordinator imports it.
    fn stored(
        &self,
        run_id: String,
        status: Option<String>,
        exit_code: i32,
    ) -> Result<ScenarioOutput, Box<ErrorBody>> {
        let store = isobench_store::Store::open(&self.db)
            .map_err(|e| failed("opening this host's database", &e))?;
        let loaded = store
            .load_run(&RunId::new(run_id.clone()))
            .map_err(|e| failed(&format!("loading run {run_id}"), &e))?;
        let status = status.unwrap_or_else(|| loaded.run.status.to_string());
        let run = serde_json::to_string(&loaded).map_err(|e| failed("encoding the run", &e))?;
        Ok(ScenarioOutput {
            run_id,
            status,
            exit_code,
            run,
        })
    }
}

/// Passes every line of the run's output to `progress` until it ends, noting its id and
/// status; `stop` set interrupts it as Ctrl-C would.
fn follow(child: &mut Child, progress: &mut dyn FnMut(&str), stop: &AtomicBool) -> Followed {
    let (tx, rx) = mpsc::channel::<String>();
    let readers = [
        forward(
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
            &tx,
        ),
        forward(
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
            &tx,
        ),
    ];
    drop(tx);
    let mut seen = Followed::default();
    let mut interrupted = false;
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => {
                seen.note(&line);
                progress(&line);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if !interrupted && stop.load(Ordering::SeqCst) {
            // The coordinator left: stop the run as Ctrl-C would (it keeps what it stored).
            interrupted = true;
            // SAFETY: signalling our own child.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
        }
    }
    for r in readers.into_iter().flatten() {
        let _ = r.join();
    }
    seen
}

impl Followed {
    /// Notes what a line of the run's output says.
    fn note(&mut self, line: &str) {
        match serde_json::from_str::<Event>(line) {
            Ok(Event::Planned { run: id, .. }) => self.run = Some(id),
            Ok(Event::Finished {
                run: id, status: s, ..
            }) => {
                self.run = Some(id);
                self.status = Some(s);
            }
            Ok(_) => {}
            Err(_) => {
                self.last_lines.push(line.to_string());
                if self.last_lines.len() > KEPT_LINES {
                    self.last_lines.remove(0);
                }
            }
        }
    }
}

/// Sends each line of `from` to `to`, in a thread of its own.
fn forward(
    from: Option<Box<dyn Read + Send>>,
    to: &mpsc::Sender<String>,
) -> Option<thread::JoinHandle<()>> {
    let from = from?;
    let to = to.clone();
    thread::Builder::new()
        .name("run-output".into())
        .spawn(move || {
            for line in BufReader::new(from).lines().map_while(Result::ok) {
                if to.send(line).is_err() {
                    break;
                }
            }
        })
        .ok()
}
