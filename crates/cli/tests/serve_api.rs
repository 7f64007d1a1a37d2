//! `isobench serve` end to end, on the fake platform with real time passing: a job queued
//! over HTTP, followed live over server-sent events, stopped (its run interrupted and stored),
//! resumed to completion, read back as a report and exports, compared; a broken scenario
//! refused at its line; and a server killed mid-run whose queue comes back and whose run
//! resumes to completion after a restart.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// A small scenario: one probe under one stressor, six rounds (tens of seconds here).
const TINY: &str = r#"name = "tiny"
kind = "matrix"
seed = 1
platform = "auto"

[trial]
duration = "400ms"
warmup = "100ms"
solo = "0s"
design = "paired"

[repetitions]
min = 6
max = 6

[[tenant]]
name = "victim"
role = "victim"
limits = { memory = "1G", pids = 64 }

[[tenant]]
name = "aggressor"
role = "aggressor"
limits = { memory = "1G", pids = 64 }

[[probe]]
name = "cpu-int"
metrics = ["ops_per_sec"]

[[stressor]]
name = "cpu"
"#;

/// How long any one step may take before the test gives up.
const PATIENCE: Duration = Duration::from_secs(240);

/// A running `isobench serve`, killed when dropped.
struct Server {
    child: Child,
    url: String,
    agent: ureq::Agent,
    csrf: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An answer: status, headers we look at, body.
struct Answer {
    status: u16,
    content_type: String,
    disposition: String,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

impl Server {
    fn start(db: &Path) -> Server {
        let mut child = common::spawnable()
            .args(["serve", "--listen", "127.0.0.1:0", "--db"])
            .arg(db)
            .env("ISOBENCH_DEBUG_FAKE", "slow")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("isobench serve starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .trim_end_matches('/')
            .to_string();
        let agent = ureq::Agent::new_with_config(
            ureq::config::Config::builder()
                .http_status_as_error(false)
                .build(),
        );
        let mut s = Server {
            child,
            url,
            agent,
            csrf: String::new(),
        };
        s.csrf = s.get("/api/v1/session").json()["csrf"]
            .as_str()
            .unwrap()
            .to_string();
        s
    }

    fn answer(resp: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Answer {
        let mut resp = resp.expect("the server answers");
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string()
        };
        let (content_type, disposition) = (header("content-type"), header("content-disposition"));
        Answer {
            status: resp.status().as_u16(),
            content_type,
            disposition,
            body: resp.body_mut().read_to_string().unwrap_or_default(),
        }
    }

    fn get(&self, path: &str) -> Answer {
        let url = format!("{}{path}", self.url);
        // A GET is repeated once on a kept-alive connection that was closed meanwhile, as
        // browsers do; a server that is gone fails both.
        let resp = self.agent.get(&url).call();
        Server::answer(resp.or_else(|_| self.agent.get(&url).call()))
    }

    fn post(&self, path: &str, body: Value) -> Answer {
        Server::answer(
            self.agent
                .post(format!("{}{path}", self.url))
                .header("X-Isobench-Csrf", &self.csrf)
                .content_type("application/json")
                .send(body.to_string()),
        )
    }

    /// A POST without a body (stop, resume).
    fn post_empty(&self, path: &str) -> Answer {
        Server::answer(
            self.agent
                .post(format!("{}{path}", self.url))
                .header("X-Isobench-Csrf", &self.csrf)
                .send_empty(),
        )
    }

    /// Queues `TINY` with `seed`; returns the job's id.
    fn queue_tiny(&self, seed: u64) -> String {
        let a = self.post(
            "/api/v1/jobs",
            json!({"scenario": TINY, "name": "tiny.toml", "seed": seed}),
        );
        assert_eq!(a.status, 201, "{}", a.body);
        a.json()["id"].as_str().unwrap().to_string()
    }

    /// Polls job `id` until `done` holds of it.
    fn wait_job(&self, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let job = self.get(&format!("/api/v1/jobs/{id}")).json();
            if done(&job) {
                return job;
            }
            assert!(start.elapsed() < PATIENCE, "job {id} never {what}: {job}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The server-sent events, one `(event, data)` per message, read on a thread.
    fn events(&self) -> Receiver<(String, Value)> {
        let resp = self
            .agent
            .get(format!("{}/api/v1/events", self.url))
            .call()
            .expect("the event stream opens");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let reader = BufReader::new(resp.into_body().into_reader());
            let mut event = String::new();
            for line in reader.lines().map_while(Result::ok) {
                if let Some(e) = line.strip_prefix("event: ") {
                    event = e.to_string();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    let data = serde_json::from_str(d).unwrap_or(Value::Null);
                    if tx.send((event.clone(), data)).is_err() {
                        return;
                    }
                }
            }
        });
        rx
    }
}

fn ended(state: &'static str) -> impl Fn(&Value) -> bool {
    move |j| j["state"] == state || j["state"] == "failed"
}

#[test]
fn a_job_is_followed_stopped_resumed_read_and_survives_a_killed_server() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let server = Server::start(&db);

    // Queued, and followed live: trial progress arrives as `run` events.
    let events = server.events();
    let job = server.queue_tiny(1);
    let mut trials = 0;
    let mut run_id = String::new();
    let start = Instant::now();
    while trials < 3 {
        let (event, data) = events
            .recv_timeout(PATIENCE.saturating_sub(start.elapsed()))
            .expect("run events arrive");
        if event == "run" && data["event"]["event"] == "trial_ended" && data["job"] == job {
            trials += 1;
            run_id = data["run"].as_str().unwrap().to_string();
            assert!(data["event"]["of"].as_u64().unwrap() > 0, "{data}");
        }
    }

    // Stopped: the run is interrupted, stored and resumable.
    let a = server.post_empty(&format!("/api/v1/jobs/{job}/stop"));
    assert_eq!(a.status, 202, "{}", a.body);
    let stopped = server.wait_job(&job, "was interrupted", ended("interrupted"));
    assert_eq!(stopped["state"], "interrupted", "{stopped}");
    assert_eq!(stopped["run"], run_id.as_str());
    let run = server.get(&format!("/api/v1/runs/{run_id}")).json();
    assert_eq!(run["status"], "interrupted", "{run}");
    assert_eq!(run["resumable"], true, "{run}");

    // Resumed to completion.
    let a = server.post_empty(&format!("/api/v1/runs/{run_id}/resume"));
    assert_eq!(a.status, 201, "{}", a.body);
    let resumed = a.json()["id"].as_str().unwrap().to_string();
    let done = server.wait_job(&resumed, "was done", ended("done"));
    assert_eq!(done["state"], "done", "{done}");
    let run = server.get(&format!("/api/v1/runs/{run_id}")).json();
    assert_eq!(run["status"], "complete", "{run}");
    assert!(run["headline"]["value"].is_number(), "{run}");
    let again = server.post_empty(&format!("/api/v1/runs/{run_id}/resume"));
    assert_eq!(again.status, 409, "a complete run is not resumed");

    // Read back: the report and each export.
    let report = server.get(&format!("/api/v1/runs/{run_id}/report"));
    assert_eq!(report.status, 200);
    assert!(report.content_type.starts_with("text/html"));
    assert!(report.body.contains(&run_id));
    for (format, ext) in [("json", "json"), ("csv", "csv"), ("markdown", "md")] {
        let a = server.get(&format!("/api/v1/runs/{run_id}/export?format={format}"));
        assert_eq!(a.status, 200, "{format}: {}", a.body);
        assert!(a.disposition.contains(&format!("isobench-{run_id}.{ext}")));
        assert!(a.body.contains("cpu-int"), "{format}");
    }

    // A broken scenario is refused, with the problem at its line.
    let broken = TINY.replace("seed = 1", "seed = \"one\"");
    let a = server.post(
        "/api/v1/jobs",
        json!({"scenario": broken, "name": "broken.toml"}),
    );
    assert_eq!(a.status, 422, "{}", a.body);
    let problems = a.json()["problems"].clone();
    assert!(
        problems
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["line"] == 3 && p["field"] == "seed"),
        "{problems}"
    );

    // Killed mid-run: after a restart the job is back first, and its run completes.
    let job = server.queue_tiny(2);
    let running = server.wait_job(&job, "progressed", |j| {
        j["progress"]["n"].as_u64().unwrap_or(0) >= 2 || j["state"] == "failed"
    });
    let second = running["run"].as_str().expect("a run id").to_string();
    drop(server);
    let server = Server::start(&db);
    let first = server.get("/api/v1/jobs").json()["jobs"][0].clone();
    assert_eq!(first["id"], job.as_str(), "{first}");
    assert_eq!(first["spec"]["resume"], second.as_str(), "{first}");
    let done = server.wait_job(&job, "was done", ended("done"));
    assert_eq!(done["state"], "done", "{done}");
    let run = server.get(&format!("/api/v1/runs/{second}")).json();
    assert_eq!(run["status"], "complete", "{run}");

    // The two runs compared.
    let a = server.get(&format!("/api/v1/compare?runs={run_id},{second}"));
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(a.json()["text"].as_str().unwrap().contains("cpu-int"));
    let a = server.get(&format!("/api/v1/compare?runs={run_id}"));
    assert_eq!(a.status, 400);
}

#[test]
fn sigterm_stops_the_run_keeps_it_first_as_a_resume_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let mut server = Server::start(&db);
    // An open event stream does not hold the shutdown up.
    let _events = server.events();
    let job = server.queue_tiny(3);
    server.wait_job(&job, "progressed", |j| {
        j["progress"]["n"].as_u64().unwrap_or(0) >= 2 || j["state"] == "failed"
    });
    // SAFETY: kill(2) of the server this test started.
    unsafe { libc::kill(server.child.id() as libc::pid_t, libc::SIGTERM) };
    let start = Instant::now();
    let status = loop {
        if let Some(s) = server.child.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < PATIENCE, "the server did not exit");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status.code(), Some(0));
    let queue: Value = serde_json::from_slice(
        &std::fs::read(dir.path().join("runs.db.serve/queue.json")).unwrap(),
    )
    .unwrap();
    let saved = &queue["jobs"][0];
    assert_eq!(saved["id"], job.as_str(), "{queue}");
    assert_eq!(saved["state"], "queued", "{queue}");
    assert!(saved["spec"]["resume"].is_string(), "{queue}");
}

#[test]
fn a_non_loopback_address_without_a_token_is_refused() {
    let out = common::isobench()
        .args(["serve", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 2);
    assert!(common::text(&out.stderr).contains("--token-file"));
}
