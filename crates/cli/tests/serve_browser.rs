//! The web UI in a real browser: `isobench serve` on the slow fake platform (real time passes,
//! so a run can be watched), and headless Chromium driven by `tests/browser/ui_flow.py`
//! (Playwright, set up by `scripts/test`): sign in with the token, launch the quick preset,
//! watch it progress, stop it, resume it, read its report, reorder and cancel queued jobs,
//! and see a scenario's error at its line; and, by `tests/browser/fleet_flow.py`, launch a
//! fleet run on two host agents on loopback and read its fleet table; and, by
//! `tests/browser/cross_flow.py`, launch a run on two platforms and read the table across
//! them; and, by `tests/browser/tune_flow.py`, launch a tune from the launch form (a bad knob
//! refused at its row first) and read its answer in the report. Screenshots land in
//! `target/tmp/ui-screenshots`, `target/tmp/fleet-screenshots`, `target/tmp/cross-screenshots`
//! and `target/tmp/tune-screenshots` (`CARGO_TARGET_TMPDIR`).

use std::path::Path;

mod common;
use common::served::{browser_python, repo_root, FakeAgents, Server};
use common::text;

/// Runs the browser flow `tests/browser/<script>` with `args` against `server`, its
/// screenshots in `CARGO_TARGET_TMPDIR/<shots>` (emptied first); fails naming `what`, with
/// the flow's output and the server's log.
fn run_flow(
    python: &Path,
    script: &str,
    shots: &str,
    args: &[String],
    server: &Server,
    what: &str,
) {
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join(shots);
    let _ = std::fs::remove_dir_all(&shots);
    std::fs::create_dir_all(&shots).unwrap();
    let out = std::process::Command::new(python)
        .arg(repo_root().join("tests/browser").join(script))
        .arg("--screenshots")
        .arg(&shots)
        .args(args)
        .arg(format!("{}/", server.url))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}\nthe server said:\n{}",
        text(&out.stdout),
        text(&out.stderr),
        server.log()
    );
    eprintln!("{}screenshots in {}", text(&out.stdout), shots.display());
}

#[test]
fn the_web_ui_launches_watches_stops_resumes_and_reports_a_run() {
    let Some(python) = browser_python("the web UI's browser test") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let token = "ui-flow-token-1234567890";
    let token_file = common::write_private(dir.path(), "token", &format!("{token}\n"));
    let server = Server::start(
        &dir.path().join("ui.db"),
        "slow",
        &["--listen", "127.0.0.1:0", "--token-file", &token_file],
    );
    let args = ["--token".to_string(), token.to_string()];
    run_flow(
        &python,
        "ui_flow.py",
        "ui-screenshots",
        &args,
        &server,
        "the browser flow",
    );
}

#[test]
fn the_web_ui_launches_a_fleet_run_on_two_hosts_and_shows_its_fleet_table() {
    let Some(python) = browser_python("the web UI's fleet browser test") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let agents = FakeAgents::start(dir.path(), 2, "1");
    let server = Server::start(
        &dir.path().join("fleet.db"),
        "1",
        &["--listen", "127.0.0.1:0"],
    );
    let mut args = vec!["--agent-token".to_string(), agents.token.clone()];
    for (i, addr) in agents.addrs.iter().enumerate() {
        args.push("--host".into());
        args.push(format!("{addr} host{i} type{i}"));
    }
    let what = "the fleet browser flow";
    run_flow(
        &python,
        "fleet_flow.py",
        "fleet-screenshots",
        &args,
        &server,
        what,
    );
}

#[test]
fn the_web_ui_launches_a_run_on_two_platforms_and_shows_the_table_across_them() {
    let Some(python) = browser_python("the web UI's browser test on two platforms") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("cross.db"),
        "1",
        &["--listen", "127.0.0.1:0"],
    );
    // The form offers the platforms that work here (the fake runs stand in for them): host
    // always, and cgroup where this test runs as root. The server finds them out after it
    // starts listening.
    let start = std::time::Instant::now();
    let session = loop {
        let session = server.get("/api/v1/session", &[]).json();
        let known = session["platforms"]
            .as_array()
            .is_some_and(|p| !p.is_empty());
        if known || start.elapsed() > std::time::Duration::from_secs(60) {
            break session;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let available: Vec<String> = session["platforms"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["available"] == true)
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect();
    let mut platforms: Vec<&str> = vec!["host"];
    match ["cgroup", "oci", "vm"]
        .into_iter()
        .find(|p| available.iter().any(|a| a == p))
    {
        Some(p) => platforms.push(p),
        None => {
            common::skip(
                "a second platform",
                &format!("only {available:?} work here (cgroup needs root)"),
            );
            return;
        }
    }
    let args: Vec<String> = platforms
        .iter()
        .flat_map(|p| ["--platform".to_string(), p.to_string()])
        .collect();
    let what = "the browser flow on two platforms";
    run_flow(
        &python,
        "cross_flow.py",
        "cross-screenshots",
        &args,
        &server,
        what,
    );
}

#[test]
fn the_web_ui_launches_a_tune_from_its_form_and_shows_the_answer() {
    let Some(python) = browser_python("the web UI's tune browser test") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("tune.db"),
        "1",
        &["--listen", "127.0.0.1:0"],
    );
    let what = "the tune browser flow";
    run_flow(
        &python,
        "tune_flow.py",
        "tune-screenshots",
        &[],
        &server,
        what,
    );
}
