//! Helpers every command-line test shares: the binary with a clean environment, its output
//! as text, JSON and exit code, the process tree, and why a cgroup test has to skip.

// Each test file is its own crate and uses only some of these.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Output};

use assert_cmd::Command;

/// The `isobench` binary, unaffected by the caller's `ISOBENCH_DB`, `RUST_LOG` and colours.
/// Real runs of tests running at once wait for each other (`ISOBENCH_WAIT`) instead of
/// refusing.
pub fn isobench() -> Command {
    let mut c = Command::cargo_bin("isobench").expect("binary built");
    c.env_remove("ISOBENCH_DB")
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .env("ISOBENCH_WAIT", "1");
    c
}

/// [`isobench`] on the fake platform (the hidden `ISOBENCH_DEBUG_FAKE` mode).
pub fn fake() -> Command {
    let mut c = isobench();
    c.env("ISOBENCH_DEBUG_FAKE", "1");
    c
}

/// [`isobench`] as a `std::process::Command`, for a process the test spawns and talks to
/// while it runs (assert_cmd's waits for the end).
pub fn spawnable() -> std::process::Command {
    let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("isobench"));
    c.env_remove("ISOBENCH_DB")
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .env("ISOBENCH_WAIT", "1");
    c
}

/// The exit code, -1 when a signal ended the process.
pub fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

/// Output bytes as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Standard output as JSON, after checking that the command succeeded.
pub fn json_of(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "status {:?}\nstderr: {}",
        out.status,
        text(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON output")
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// Writes `text` to `dir/name`, readable by its owner only (a token file), and returns the
/// path.
pub fn write_private(dir: &Path, name: &str, text: &str) -> String {
    use std::os::unix::fs::PermissionsExt as _;
    let p = write(dir, name, text);
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

/// The children of `pid` now.
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in rd.flatten() {
            if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
                out.extend(
                    text.split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                );
            }
        }
    }
    out
}

/// The processes below `pid` now (children, grandchildren...).
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        for c in children_of(p) {
            out.push(c);
            todo.push(c);
        }
    }
    out
}

/// The command line of `pid`, arguments separated by spaces (empty once it is gone).
pub fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// Why a test that needs cgroup tenants with these controllers cannot run here, if it
/// cannot: such tests print the reason and skip.
pub fn cgroup_missing(controllers: &[&str]) -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root".into());
    }
    let v2 = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers").unwrap_or_default();
    controllers
        .iter()
        .find(|c| !Path::new(&format!("/sys/fs/cgroup/{c}")).exists() && !v2.contains(*c))
        .map(|c| format!("cgroup controller {c} is missing"))
}

pub mod guest;
pub mod served;

#[path = "../../../../tests/skip.rs"]
mod skip_log;

/// Skips the running test for lack of `group` (root, cgroup, k8s, browser, ...): prints the
/// reason and records it for `scripts/test`'s list.
pub fn skip(group: &str, why: &str) {
    skip_log::skip(group, why);
}

/// As [`skip`], naming the test.
pub fn skip_test(group: &str, test: &str, why: &str) {
    skip_log::skip_test(group, test, why);
}

/// The ids of the runs stored in `db` (none when it does not exist yet).
pub fn run_ids(db: &Path) -> Vec<String> {
    let runs = json_of(
        &isobench()
            .args(["runs", "--json", "--db"])
            .arg(db)
            .output()
            .unwrap(),
    );
    runs["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["id"].as_str().map(str::to_string))
        .collect()
}

/// Runs a scenario (`--preset NAME` or a file) on the fake platform into `db` and returns
/// the new run's id (fake runs share their start time, so it is found by what is new).
pub fn fake_run_of(db: &Path, scenario: &[&str]) -> String {
    let before = run_ids(db);
    let preset = scenario.join(" ");
    let out = fake()
        .arg("run")
        .args(scenario)
        .args(["-q", "--db"])
        .arg(db)
        .output()
        .unwrap();
    assert!(
        out.status.success() || out.status.code() == Some(4),
        "{preset}: {}",
        text(&out.stderr)
    );
    let mut new: Vec<String> = run_ids(db)
        .into_iter()
        .filter(|id| !before.contains(id))
        .collect();
    assert_eq!(new.len(), 1, "{preset}: one new run, got {new:?}");
    new.remove(0)
}

/// A matrix scenario of `head` (its name, trial and repetitions) with the usual pair: a
/// victim running cpu-int beside an aggressor running the cpu stressor.
pub fn one_cpu_pair(head: &str) -> String {
    format!(
        "{head}{}",
        r#"
[[tenant]]
name = "victim"
role = "victim"

[[tenant]]
name = "aggressor"
role = "aggressor"

[[probe]]
name = "cpu-int"
metrics = ["ops_per_sec"]

[[stressor]]
name = "cpu"
"#
    )
}

/// A tune of the aggressor's CPU quota and CPU weight against a loss bound of `slo_loss`%
/// on cpu-int beside the cpu stressor, seeded `seed`.
pub fn tune_scenario(slo_loss: f64, seed: u64) -> String {
    format!(
        r#"name = "tune-two"
kind = "tune"
seed = {seed}

[trial]
duration = "200ms"
warmup = "100ms"
solo = "0s"

[tune]
metric = "ops_per_sec"
slo_loss = {slo_loss}
resolution = 0.1

[[tune.knob]]
tenant = "aggressor"
key = "cpus"
range = [0.05, 1.0]

[[tune.knob]]
tenant = "aggressor"
key = "weight"
range = [1, 10000]

[[tenant]]
name = "victim"
role = "victim"
limits = {{ memory = "512M", pids = 128 }}

[[tenant]]
name = "aggressor"
role = "aggressor"
limits = {{ memory = "512M", pids = 64 }}

[[probe]]
name = "cpu-int"
metrics = ["ops_per_sec"]

[[stressor]]
name = "cpu"
"#
    )
}

/// Runs the scenario `text` into `db` on the fake platform with an aggressor whose harm
/// and work follow its CPU quota (so a tune of the quota has a boundary where the
/// arithmetic puts it), and returns the run's id. The command line's fake mode has no such
/// aggressor.
pub fn quota_fake_run(db: &Path, text: &str) -> String {
    use isobench_experiment::fake::{run_fake, FakeScript};
    use isobench_experiment::progress::NoProgress;
    use isobench_experiment::{HostView, Plan, PlanOptions, Scenario, Source};
    let sc = Scenario::parse(Source::new("tune.toml", text)).unwrap_or_else(|e| panic!("{e}"));
    let host = HostView::synthetic(2, 8 << 30, true);
    let plan = Plan::resolve(&sc, &host, &PlanOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let mut store = isobench_store::Store::open(db).unwrap();
    let script = FakeScript {
        quota_scales_harm: true,
        noise: 0.003,
        ..FakeScript::default()
    };
    let out = run_fake(&mut store, &plan, text, script, &mut NoProgress).unwrap();
    out.run.to_string()
}

/// Writes the token of [`agent`]s, `dir/token` (mode 0600), which a hosts file in `dir`
/// names as `token_file = "token"`.
pub fn fleet_token(dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let token = dir.join("token");
    std::fs::write(&token, "0123456789abcdef0123456789abcdef\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// A host agent in fake mode on a free loopback port, with the token of [`fleet_token`] in
/// `dir` and its database `agentN.db` there: the child and its address.
pub fn agent(dir: &Path, n: usize) -> (Child, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = spawnable()
        .env("ISOBENCH_DEBUG_FAKE", "1")
        .args(["agent", "--listen", &addr, "--token-file"])
        .arg(dir.join("token"))
        .arg("--db")
        .arg(dir.join(format!("agent{n}.db")))
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("isobench agent starts");
    // It says so once it listens.
    let mut line = String::new();
    BufReader::new(child.stderr.take().expect("piped"))
        .read_line(&mut line)
        .expect("agent stderr");
    assert!(line.contains("listening"), "agent said: {line}");
    (child, addr)
}
