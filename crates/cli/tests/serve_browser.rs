//! The web UI in a real browser: `isobench serve` on the slow fake platform (real time passes,
//! so a run can be watched), and headless Chromium driven by `tests/browser/ui_flow.py`
//! (Playwright, set up by `scripts/test`): sign in with the token, launch the quick preset,
//! watch it progress, stop it, resume it, read its report, reorder and cancel queued jobs,
//! and see a scenario's error at its line. Screenshots land in
//! `target/tmp/ui-screenshots` (`CARGO_TARGET_TMPDIR`).

use std::path::Path;

mod common;
use common::served::{browser_python, repo_root, Server};
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
