//! `isobench agent --listen ADDR --token-file FILE`: a host agent, fio's `--server` for
//! isobench. A coordinator (`isobench run --hosts hosts.toml`) sends it a scenario; it runs
//! `isobench run --wait --json-stream` on this host, into this host's database, streams the
//! run's events back as progress, and sends the stored run, which the coordinator imports.
//!
//! The run is a child process of the agent, so everything a run does on its own (the
//! measurement slot, sweeping what dead runs left, signals, resume) holds here as well: runs
//! sent by several coordinators wait for each other, and a coordinator that leaves interrupts
//! its run as Ctrl-C would, keeping what was measured in this host's database.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use isobench_agent::{ErrorBody, ErrorCode, RunScenario, ScenarioOutput, ScenarioRunner};
use isobench_experiment::progress::Event;
use isobench_store::RunId;

/// Runs scenarios with this isobench binary, into `db`.
pub struct HostRunner {
    /// The isobench binary.
    pub exe: PathBuf,
    /// This host's results database.
    pub db: PathBuf,
}

impl ScenarioRunner for HostRunner {
    fn run(
        &self,
        req: &RunScenario,
        progress: &mut dyn FnMut(&str),
        stop: &AtomicBool,
    ) -> Result<ScenarioOutput, Box<ErrorBody>> {
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            Box::new(ErrorBody::new(
                ErrorCode::WorkloadFailed,
                format!("{what}: {e}"),
            ))
        };
        let dir = tempfile::tempdir().map_err(|e| failed("creating a scenario directory", &e))?;
        let mut cmd = Command::new(&self.exe);
        cmd.arg("run");
        match &req.preset {
            Some(p) => {
                cmd.args(["--preset", p]);
            }
            None => {
                let name = std::path::Path::new(&req.file_name)
                    .file_name()
                    .map(PathBuf::from)
                    .unwrap_or_else(|| "scenario.toml".into());
                let file = dir.path().join(name);
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
        let mut child = cmd
            .spawn()
            .map_err(|e| failed(&format!("starting {}", self.exe.display()), &e))?;
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
        let mut run: Option<String> = None;
        let mut status: Option<String> = None;
        let mut last_lines: Vec<String> = Vec::new();
        let mut interrupted = false;
        loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(line) => {
                    match serde_json::from_str::<Event>(&line) {
                        Ok(Event::Planned { run: id, .. }) => run = Some(id),
                        Ok(Event::Finished {
                            run: id, status: s, ..
                        }) => {
                            run = Some(id);
                            status = Some(s);
                        }
                        Ok(_) => {}
                        Err(_) => {
                            last_lines.push(line.clone());
                            if last_lines.len() > 20 {
                                last_lines.remove(0);
                            }
                        }
                    }
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
        let exit = child
            .wait()
            .map_err(|e| failed("waiting for the run", &e))?;
        let exit_code = exit.code().unwrap_or(128 + 9);
        let Some(run_id) = run else {
            return Err(Box::new(ErrorBody::new(
                ErrorCode::WorkloadFailed,
                format!(
                    "the run on this host ended (exit code {exit_code}) before it stored \
                     anything: {}",
                    last_lines.join(" | ")
                ),
            )));
        };
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
