//! `isobench serve` end to end, on the fake platform with real time passing: a job queued
//! over HTTP, followed live over server-sent events, stopped (its run interrupted and stored),
//! resumed to completion, read back as a report and exports, compared; a broken scenario
//! refused at its line; a server killed mid-run whose queue comes back and whose run
//! resumes to completion after a restart; and a fleet run on two host agents, whose run
//! shows the fleet table.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::served::{FakeAgents, Response, Server};
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

/// The test's view of a server: JSON calls with the CSRF value.
struct Api {
    server: Server,
    csrf: String,
}

impl Api {
    fn start(db: &Path) -> Api {
        let server = Server::start(db, "slow", &["--listen", "127.0.0.1:0"]);
        let csrf = server.csrf();
        Api { server, csrf }
    }

    fn get(&self, path: &str) -> Response {
        self.server.get(path, &[])
    }

    fn post(&self, path: &str, body: Value) -> Response {
        let body = body.to_string();
        self.server.request(
            "POST",
            path,
            &[
                ("X-Isobench-Csrf", &self.csrf),
                ("Content-Type", "application/json"),
            ],
            Some(&body),
        )
    }

    /// A POST without a body (stop, resume).
    fn post_empty(&self, path: &str) -> Response {
        self.server
            .request("POST", path, &[("X-Isobench-Csrf", &self.csrf)], None)
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
}

fn ended(state: &'static str) -> impl Fn(&Value) -> bool {
    move |j| j["state"] == state || j["state"] == "failed"
}

/// Waits for the `run` events of job `job` until `done` says so of one (its data: `run`,
/// `event`); panics when none comes within [`PATIENCE`].
fn until_run_event(
    events: &std::sync::mpsc::Receiver<(String, Value)>,
    job: &str,
    mut done: impl FnMut(&Value) -> bool,
) {
    let start = Instant::now();
    loop {
        let (event, data) = events
            .recv_timeout(PATIENCE.saturating_sub(start.elapsed()))
            .expect("run events arrive");
        if event == "run" && data["job"] == job && done(&data) {
            return;
        }
    }
}

#[test]
fn a_job_is_followed_stopped_resumed_read_and_survives_a_killed_server() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let server = Api::start(&db);

    // Queued, and followed live: trial progress arrives as `run` events.
    let events = server.server.events();
    let job = server.queue_tiny(1);
    let mut trials = 0;
    let mut run_id = String::new();
    until_run_event(&events, &job, |data| {
        if data["event"]["event"] == "trial_ended" {
            trials += 1;
            run_id = data["run"].as_str().unwrap().to_string();
            assert!(data["event"]["of"].as_u64().unwrap() > 0, "{data}");
        }
        trials == 3
    });

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
    // The headline, from every resource: the same figures as `isobench show`.
    let headline = run["headline"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!headline.is_empty(), "{run}");
    assert_eq!(run["headline"]["resources"][0]["resource"], "cpu", "{run}");
    let show = common::isobench()
        .args(["show", &run_id, "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let show = common::text(&show.stdout);
    let detail = run["headline"]["resources"][0]["detail"].as_str().unwrap();
    assert!(show.contains(detail), "{detail}\nnot in\n{show}");
    let again = server.post_empty(&format!("/api/v1/runs/{run_id}/resume"));
    assert_eq!(again.status, 409, "a complete run is not resumed");

    // Read back: the report and each export.
    let report = server.get(&format!("/api/v1/runs/{run_id}/report"));
    assert_eq!(report.status, 200);
    assert!(report
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/html")));
    assert!(report.body.contains(&run_id));
    for (format, ext) in [("json", "json"), ("csv", "csv"), ("markdown", "md")] {
        let a = server.get(&format!("/api/v1/runs/{run_id}/export?format={format}"));
        assert_eq!(a.status, 200, "{format}: {}", a.body);
        assert!(a
            .header("content-disposition")
            .is_some_and(|d| d.contains(&format!("isobench-{run_id}.{ext}"))));
        assert!(a.body.contains("cpu-int"), "{format}");
    }

    // Prometheus sees the finished run's headline per resource, and the queue.
    let m = server.get("/metrics");
    assert_eq!(m.status, 200);
    let verdict = run["headline"]["resources"][0]["verdict"].as_str().unwrap();
    let loss = run["headline"]["resources"][0]["loss_pct"]
        .as_f64()
        .unwrap();
    let series = format!(
        "isobench_run_victim_degradation_percent{{run=\"{run_id}\",scenario=\"tiny\",\
         platform=\"{}\",resource=\"cpu\",verdict=\"{verdict}\"}} ",
        run["platform"].as_str().unwrap()
    );
    let value: Option<f64> = m
        .body
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.trim().parse().ok());
    assert_eq!(value, Some(loss), "{series}\n{}", m.body);
    assert!(
        m.body.contains("isobench_queue_jobs{state=\"done\"} 1"),
        "{}",
        m.body
    );

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
    let mut server = server;
    server.server.kill_hard();
    drop(server);
    let server = Api::start(&db);
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
    let mut server = Api::start(&db);
    // An open event stream does not hold the shutdown up.
    let _events = server.server.events();
    let job = server.queue_tiny(3);
    server.wait_job(&job, "progressed", |j| {
        j["progress"]["n"].as_u64().unwrap_or(0) >= 2 || j["state"] == "failed"
    });
    // SAFETY: kill(2) of the server this test started.
    unsafe { libc::kill(server.server.pid() as libc::pid_t, libc::SIGTERM) };
    let start = Instant::now();
    let status = loop {
        if let Some(s) = server.server.try_wait() {
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

/// A fleet job (`isobench run --hosts`) on two host agents on loopback, each of its own
/// type: bad hosts are refused naming their field, no token comes back, the hosts' progress
/// arrives, and the run's details carry the fleet table with a column per host.
#[test]
fn a_fleet_job_runs_on_two_hosts_and_its_run_carries_the_fleet_table() {
    let dir = tempfile::tempdir().unwrap();
    let agents = FakeAgents::start(dir.path(), 2, "slow");
    let server = Api::start(&dir.path().join("runs.db"));
    let queue = |hosts: Value, more: Value| {
        let mut body = json!({"scenario": TINY, "name": "tiny.toml", "hosts": hosts});
        body.as_object_mut()
            .unwrap()
            .extend(more.as_object().unwrap().clone());
        server.post("/api/v1/jobs", body)
    };

    let bad = queue(json!([{"address": "nohost", "token": "t"}]), json!({}));
    assert_eq!(bad.status, 422, "{}", bad.body);
    assert_eq!(bad.json()["field"], "hosts[0].address", "{}", bad.body);
    let hosts: Vec<Value> = agents
        .addrs
        .iter()
        .enumerate()
        .map(|(i, a)| json!({"address": a, "name": format!("h{i}"), "type": format!("t{i}"), "token": agents.token}))
        .collect();
    let bad = queue(json!(hosts), json!({"platform": "auto"}));
    assert_eq!(bad.status, 422, "{}", bad.body);
    assert!(bad.body.contains("platform"), "{}", bad.body);

    let events = server.server.events();
    let a = queue(json!(hosts), json!({}));
    assert_eq!(a.status, 201, "{}", a.body);
    assert!(
        !a.body.contains(&agents.token),
        "a token is never shown: {}",
        a.body
    );
    let job = a.json();
    assert_eq!(job["spec"]["hosts"][1]["name"], "h1", "{job}");
    let id = job["id"].as_str().unwrap().to_string();

    // The coordinator's events arrive as events of the job's run: a host's run once planned.
    until_run_event(&events, &id, |data| {
        let ev = &data["event"];
        ev["event"] == "member_progress" && ev["member"] == "h1" && ev["run"].is_string()
    });
    let job = server.wait_job(&id, "ended", ended("done"));
    assert_eq!(job["state"], "done", "{job}");
    let progress = &job["progress"];
    assert_eq!(progress["n"], progress["of"], "{job}");
    assert_eq!(progress["what"], "2 of 2 hosts done", "{job}");

    let run = job["run"].as_str().expect("the fleet's run");
    let detail = server.get(&format!("/api/v1/runs/{run}"));
    assert_eq!(detail.status, 200, "{}", detail.body);
    let detail = detail.json();
    assert_eq!(detail["resumable"], false, "{detail}");
    let fleet = &detail["fleet"];
    let names: Vec<&str> = fleet["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["host"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["h0", "h1"], "{fleet}");
    let columns = fleet["columns"].to_string();
    for t in ["t0 (1 hosts) [%]", "t1 (1 hosts) [%]"] {
        assert!(columns.contains(t), "{columns}");
    }
    assert!(!fleet["rows"].as_array().unwrap().is_empty(), "{fleet}");
    // Any host's run carries the same table.
    let other = fleet["hosts"][1]["run"].as_str().unwrap();
    let other = server.get(&format!("/api/v1/runs/{other}")).json();
    assert_eq!(other["fleet"]["rows"], fleet["rows"]);
}

/// A job on two platforms (`isobench run --platform host,cgroup`): bad platforms are refused
/// naming their field, the job's progress says which platform runs, its run is the first
/// platform's, and each run's details carry the table across the platforms. A second such
/// job stopped on its first platform ends interrupted, with that run stored and the next
/// platform not run.
#[test]
fn a_job_on_two_platforms_runs_each_and_its_runs_carry_the_table_across_them() {
    let dir = tempfile::tempdir().unwrap();
    let server = Api::start(&dir.path().join("runs.db"));
    let queue = |more: Value| {
        let mut body = json!({"scenario": TINY, "name": "tiny.toml"});
        body.as_object_mut()
            .unwrap()
            .extend(more.as_object().unwrap().clone());
        server.post("/api/v1/jobs", body)
    };
    let refused = |more: Value, field: &str| {
        let a = queue(more);
        assert_eq!(a.status, 422, "{}", a.body);
        assert_eq!(a.json()["field"], field, "{}", a.body);
    };
    refused(json!({"platforms": ["host", "mars"]}), "platforms[1]");
    refused(json!({"platforms": ["host", "host"]}), "platforms[1]");
    refused(json!({"platforms": ["host"]}), "platforms");
    refused(
        json!({"platforms": ["host", "cgroup"], "platform": "host"}),
        "platforms",
    );
    refused(
        json!({"platforms": ["host", "cgroup"],
               "hosts": [{"address": "127.0.0.1:7", "token": "t"}]}),
        "platforms",
    );

    let events = server.server.events();
    let a = queue(json!({"platforms": ["host", "cgroup"]}));
    assert_eq!(a.status, 201, "{}", a.body);
    let job = a.json();
    assert_eq!(job["spec"]["platforms"], json!(["host", "cgroup"]), "{job}");
    let id = job["id"].as_str().unwrap().to_string();

    // The second platform starts, as an event of the job's run.
    until_run_event(&events, &id, |data| {
        let ev = &data["event"];
        if ev["event"] != "platform_started" {
            return false;
        }
        assert!(data["run"].is_null() == (ev["n"] == 1), "{data}");
        if ev["platform"] != "cgroup" {
            return false;
        }
        assert_eq!((&ev["n"], &ev["of"]), (&json!(2), &json!(2)), "{data}");
        true
    });
    let job = server.wait_job(&id, "ended", ended("done"));
    assert_eq!(job["state"], "done", "{job}");
    let progress = &job["progress"];
    assert_eq!(
        progress["platform"],
        json!({"name": "cgroup", "n": 2, "of": 2}),
        "{job}"
    );
    assert_eq!(progress["n"], progress["of"], "{job}");

    let run = job["run"].as_str().expect("the job's run");
    let detail = server.get(&format!("/api/v1/runs/{run}")).json();
    assert_eq!(
        detail["platform"], "host",
        "the first platform's run: {detail}"
    );
    let cross = &detail["cross"];
    let platforms: Vec<&str> = cross["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["platform"].as_str().unwrap())
        .collect();
    assert_eq!(platforms, ["host", "cgroup"], "{cross}");
    assert_eq!(cross["runs"][0]["run"], run, "{cross}");
    let columns = cross["columns"].to_string();
    for p in ["host ", "cgroup "] {
        assert!(columns.contains(p), "{columns}");
    }
    assert!(!cross["rows"].as_array().unwrap().is_empty(), "{cross}");
    // Either run carries the same table.
    let other = cross["runs"][1]["run"].as_str().unwrap();
    let other = server.get(&format!("/api/v1/runs/{other}")).json();
    assert_eq!(other["cross"]["rows"], cross["rows"], "{other}");
    // A run alone carries none.
    let alone = server.queue_tiny(5);
    let alone = server.wait_job(&alone, "ended", ended("done"));
    let alone = alone["run"].as_str().unwrap();
    let alone = server.get(&format!("/api/v1/runs/{alone}")).json();
    assert!(alone["cross"].is_null(), "{alone}");

    // Stopped on its first platform: interrupted, and the second platform is not run.
    let b = queue(json!({"platforms": ["host", "cgroup"], "seed": 2}));
    assert_eq!(b.status, 201, "{}", b.body);
    let b = b.json()["id"].as_str().unwrap().to_string();
    server.wait_job(&b, "progressed", |j| {
        j["progress"]["n"].as_u64().unwrap_or(0) >= 2 || j["state"] == "failed"
    });
    let stop = server.post_empty(&format!("/api/v1/jobs/{b}/stop"));
    assert_eq!(stop.status, 202, "{}", stop.body);
    let job = server.wait_job(&b, "ended", ended("interrupted"));
    assert_eq!(job["state"], "interrupted", "{job}");
    assert_eq!(job["progress"]["platform"]["name"], "host", "{job}");
    let run = job["run"].as_str().unwrap();
    let detail = server.get(&format!("/api/v1/runs/{run}")).json();
    assert_eq!(detail["status"], "interrupted", "{detail}");
    let runs = server.get("/api/v1/runs").json();
    let of_b: Vec<&Value> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["job"] == b.as_str())
        .collect();
    assert_eq!(of_b.len(), 1, "the first platform's run alone: {runs}");
    assert_eq!(of_b[0]["platform"], "host", "{runs}");
}
