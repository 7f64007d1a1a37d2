//! `run_scenario` on a host agent: progress streams back, the stored run arrives whole however
//! large, one scenario runs at a time, and an agent inside a tenant says it cannot.

mod common;

use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use isobench_agent::{
    serve_connection, AgentClient, AgentConfig, AgentError, ErrorBody, ErrorCode, RunScenario,
    ScenarioOutput, ScenarioRunner, SessionEnd,
};

/// A runner that reports three lines and returns a run of `bytes` bytes (non-ASCII included,
/// so pieces must split on character boundaries), or waits for its stop flag when `hold`.
struct Canned {
    bytes: usize,
    hold: bool,
    stopped: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<RunScenario>>>,
}

impl ScenarioRunner for Canned {
    fn run(
        &self,
        req: &RunScenario,
        progress: &mut dyn FnMut(&str),
        stop: &AtomicBool,
    ) -> Result<ScenarioOutput, Box<ErrorBody>> {
        self.seen.lock().unwrap().push(req.clone());
        for i in 0..3 {
            progress(&format!("trial {i} of 3"));
        }
        if self.hold {
            let t0 = Instant::now();
            while !stop.load(Ordering::SeqCst) && t0.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(5));
            }
            self.stopped.store(true, Ordering::SeqCst);
            return Err(Box::new(ErrorBody::new(ErrorCode::Cancelled, "stopped")));
        }
        let unit = "{\"v\":\"\u{e9}\u{1f600}\"},";
        Ok(ScenarioOutput {
            run_id: "20261125-000000-abcdef".into(),
            status: "complete".into(),
            exit_code: 0,
            run: unit.repeat(self.bytes / unit.len() + 1),
        })
    }
}

fn canned(bytes: usize, hold: bool) -> (Arc<Canned>, AgentConfig) {
    let c = Arc::new(Canned {
        bytes,
        hold,
        stopped: Arc::new(AtomicBool::new(false)),
        seen: Arc::new(Mutex::new(Vec::new())),
    });
    let config = AgentConfig::default().with_scenarios(c.clone());
    (c, config)
}

fn request() -> RunScenario {
    RunScenario {
        scenario: "name = \"s\"\n".into(),
        file_name: "s.toml".into(),
        preset: None,
        seed: Some(7),
        platform: Some("cgroup".into()),
    }
}

#[test]
fn progress_streams_back_and_a_large_run_arrives_whole() {
    let (runner, config) = canned(5 << 20, false);
    let p = pair_with(config);
    p.client.hello().unwrap();
    let mut lines = Vec::new();
    let (done, run) = p
        .client
        .run_scenario(request(), &mut |l| lines.push(l.to_string()))
        .unwrap();
    assert_eq!(lines, ["trial 0 of 3", "trial 1 of 3", "trial 2 of 3"]);
    assert_eq!(done.run_id, "20261125-000000-abcdef");
    assert_eq!((done.status.as_str(), done.exit_code), ("complete", 0));
    assert!(done.chunks >= 5, "{done:?}");
    assert_eq!(run.len() as u64, done.bytes);
    assert!(run.len() >= 5 << 20);
    assert!(run.starts_with("{\"v\":\"\u{e9}\u{1f600}\"},"));
    assert_eq!(runner.seen.lock().unwrap().as_slice(), [request()]);
    // The session goes on: a second scenario runs after the first.
    let (again, _) = p.client.run_scenario(request(), &mut |_| {}).unwrap();
    assert_eq!(again.bytes, done.bytes);
}

#[test]
fn a_coordinator_that_leaves_stops_the_scenario() {
    let (runner, config) = canned(10, true);
    let (a, b) = UnixStream::pair().unwrap();
    let agent = std::thread::spawn(move || {
        let w = a.try_clone().unwrap();
        serve_connection(a, w, &config)
    });
    let coordinator_end = b.try_clone().unwrap();
    let client = AgentClient::from_unix_stream("host-a", b).unwrap();
    client.hello().unwrap();
    let waiting = std::thread::spawn(move || client.run_scenario(request(), &mut |_| {}));
    assert!(eventually(|| !runner.seen.lock().unwrap().is_empty()));
    assert!(!runner.stopped.load(Ordering::SeqCst));
    // The coordinator dies: its end of the connection goes away.
    coordinator_end.shutdown(Shutdown::Both).unwrap();
    assert_eq!(agent.join().unwrap(), SessionEnd::Eof);
    assert!(
        runner.stopped.load(Ordering::SeqCst),
        "the runner saw its stop flag"
    );
    let e = waiting.join().unwrap().unwrap_err();
    assert!(matches!(e, AgentError::Disconnected { .. }), "{e}");
}

#[test]
fn an_agent_inside_a_tenant_does_not_run_scenarios() {
    let p = pair();
    let e = p.client.run_scenario(request(), &mut |_| {}).unwrap_err();
    match &e {
        AgentError::Remote { error, .. } => {
            assert_eq!(error.code, ErrorCode::Unsupported);
            assert!(error.message.contains("isobench agent --listen"), "{e}");
        }
        other => panic!("expected unsupported, got {other}"),
    }
}
