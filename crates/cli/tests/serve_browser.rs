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
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui-screenshots");
    let _ = std::fs::remove_dir_all(&shots);
    std::fs::create_dir_all(&shots).unwrap();
    let out = std::process::Command::new(python)
        .arg(repo_root().join("tests/browser/ui_flow.py"))
        .arg("--screenshots")
        .arg(&shots)
        .args(["--token", token])
        .arg(format!("{}/", server.url))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the browser flow failed:\n{}\n{}\nthe server said:\n{}",
        text(&out.stdout),
        text(&out.stderr),
        server.log()
    );
    eprintln!("{}screenshots in {}", text(&out.stdout), shots.display());
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
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fleet-screenshots");
    let _ = std::fs::remove_dir_all(&shots);
    std::fs::create_dir_all(&shots).unwrap();
    let mut cmd = std::process::Command::new(python);
    cmd.arg(repo_root().join("tests/browser/fleet_flow.py"))
        .arg("--screenshots")
        .arg(&shots)
        .args(["--agent-token", &agents.token]);
    for (i, addr) in agents.addrs.iter().enumerate() {
        cmd.arg("--host").arg(format!("{addr} host{i} type{i}"));
    }
    let out = cmd.arg(format!("{}/", server.url)).output().unwrap();
    assert!(
        out.status.success(),
        "the fleet browser flow failed:\n{}\n{}\nthe server said:\n{}",
        text(&out.stdout),
        text(&out.stderr),
        server.log()
    );
    eprintln!("{}screenshots in {}", text(&out.stdout), shots.display());
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
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cross-screenshots");
    let _ = std::fs::remove_dir_all(&shots);
    std::fs::create_dir_all(&shots).unwrap();
    let mut cmd = std::process::Command::new(python);
    cmd.arg(repo_root().join("tests/browser/cross_flow.py"))
        .arg("--screenshots")
        .arg(&shots);
    for p in &platforms {
        cmd.args(["--platform", p]);
    }
    let out = cmd.arg(format!("{}/", server.url)).output().unwrap();
    assert!(
        out.status.success(),
        "the browser flow on two platforms failed:\n{}\n{}\nthe server said:\n{}",
        text(&out.stdout),
        text(&out.stderr),
        server.log()
    );
    eprintln!("{}screenshots in {}", text(&out.stdout), shots.display());
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
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tune-screenshots");
    let _ = std::fs::remove_dir_all(&shots);
    std::fs::create_dir_all(&shots).unwrap();
    let out = std::process::Command::new(python)
        .arg(repo_root().join("tests/browser/tune_flow.py"))
        .arg("--screenshots")
        .arg(&shots)
        .arg(format!("{}/", server.url))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the tune browser flow failed:\n{}\n{}\nthe server said:\n{}",
        text(&out.stdout),
        text(&out.stderr),
        server.log()
    );
    eprintln!("{}screenshots in {}", text(&out.stdout), shots.display());
}
