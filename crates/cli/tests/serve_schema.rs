//! The HTTP API against its own OpenAPI document: Schemathesis (installed by `scripts/test`
//! into the browser venv) reads GET /api/v1/openapi.json from a real `isobench serve` on the
//! instant fake platform and sends each operation generated requests, checking every answer
//! against the document (status codes, content types, response schemas, no server error).
//! State-changing requests carry the session's CSRF header, as the UI's do. The database
//! holds one finished run, which the operations on a run are sent (tests/browser/
//! schemathesis.toml), so its report and exports are checked too.

use std::path::Path;

mod common;
use common::served::{browser_python, repo_root, Server};
use common::{fake_run_of, text};

/// Test cases per operation: enough to reach each operation's answers, few enough to stay
/// within a minute or two on a busy machine.
const EXAMPLES: &str = "25";

#[test]
fn the_http_api_answers_as_its_openapi_document_says() {
    let Some(python) = browser_python("the Schemathesis check of the HTTP API") else {
        return;
    };
    let schemathesis = python.with_file_name("schemathesis");
    if !schemathesis.exists() {
        assert!(
            std::env::var("CI").map_or(true, |v| v.is_empty() || v == "false"),
            "CI must run the Schemathesis check: scripts/test installs it into the venv of {}",
            python.display()
        );
        common::skip(
            "schemathesis",
            &format!("no {} (scripts/test installs it)", schemathesis.display()),
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("schema.db");
    let run = fake_run_of(&db, &["--preset", "quick"]);
    let server = Server::start(&db, "1", &["--listen", "127.0.0.1:0"]);
    let session = server.get("/api/v1/session", &[]);
    assert_eq!(session.status, 200, "{}", session.body);
    let csrf = session.json()["csrf"]
        .as_str()
        .expect("the session has a csrf token")
        .to_string();
    let reports = Path::new(env!("CARGO_TARGET_TMPDIR")).join("schemathesis");
    std::fs::create_dir_all(&reports).unwrap();
    let out = std::process::Command::new(&schemathesis)
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .env("ISOBENCH_SCHEMA_RUN", &run)
        .arg("--config-file")
        .arg(repo_root().join("tests/browser/schemathesis.toml"))
        .arg("run")
        .arg(format!("{}/api/v1/openapi.json", server.url))
        // Every check runs (Schemathesis 4's default); `--checks all` is not given because on
        // the command line it would override the one check schemathesis.toml turns off for
        // one operation.
        .args(["--header", &format!("X-Isobench-Csrf: {csrf}")])
        .args(["--max-examples", EXAMPLES, "--seed", "1", "--workers", "1"])
        .args(["--generation-database", "none", "--request-timeout", "30"])
        // The event stream never ends by design: each request to it would wait out the
        // timeout; the browser test (serve_browser.rs) follows it end to end.
        .args(["--exclude-path", "/api/v1/events"])
        .args(["--report", "junit", "--report-dir"])
        .arg(&reports)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "Schemathesis found problems:\n{}\n{}\nthe server said:\n{}",
        text(&out.stdout),
        text(&out.stderr),
        server.log()
    );
    eprintln!("{}", text(&out.stdout));
}
