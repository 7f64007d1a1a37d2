//! The router and the worker, driven in-process: authentication, CSRF, limits, run ids, the
//! queue through the API, a restart, and runs of a stand-in for `isobench run`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{to_bytes, Body};
use axum::http::{header, Request, StatusCode};
use isobench_experiment::session::Mode;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::queue::JobState;
use crate::{open, router, App, Config};

const TOKEN: &str = "s3cret-token-0123456789";

fn config(dir: &Path, token: Option<&str>, exe: PathBuf) -> Config {
    Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        token: token.map(str::to_string),
        db: dir.join("r.db"),
        state_dir: dir.join("r.db.serve"),
        exe,
        mode: Mode::Fake {
            real_time: 0.0,
            effect_scale: 1.0,
        },
        header_timeout: crate::HEADER_TIMEOUT,
    }
}

fn app(dir: &Path, token: Option<&str>) -> Arc<App> {
    open(config(dir, token, "/bin/false".into())).unwrap().0
}

async fn call(app: &Arc<App>, req: Request<Body>) -> (StatusCode, Value) {
    let resp = router(app.clone()).oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = to_bytes(resp.into_body(), usize::MAX).await.unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn get(uri: &str) -> axum::http::request::Builder {
    Request::get(uri)
}

fn post(uri: &str, app: &App) -> axum::http::request::Builder {
    Request::post(uri).header("x-isobench-csrf", &app.csrf)
}

fn json_body(v: Value) -> Body {
    Body::from(v.to_string())
}

#[tokio::test]
async fn with_a_token_every_api_request_needs_it() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path(), Some(TOKEN));
    let (s, body) = call(&app, get("/api/v1/jobs").body(Body::empty()).unwrap()).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert!(body["error"].as_str().unwrap().contains("token"));
    let bearer = get("/api/v1/jobs").header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
    assert_eq!(
        call(&app, bearer.body(Body::empty()).unwrap()).await.0,
        StatusCode::OK
    );
    let wrong = get("/api/v1/jobs").header(header::AUTHORIZATION, "Bearer s3cret-token-012345678X");
    assert_eq!(
        call(&app, wrong.body(Body::empty()).unwrap()).await.0,
        StatusCode::UNAUTHORIZED
    );
    let cookie = get("/metrics").header(header::COOKIE, format!("a=b; isobench_token={TOKEN}"));
    assert_eq!(
        call(&app, cookie.body(Body::empty()).unwrap()).await.0,
        StatusCode::OK
    );
    // The API's description and the UI's files are open.
    let doc = get("/api/v1/openapi.json").body(Body::empty()).unwrap();
    assert_eq!(call(&app, doc).await.0, StatusCode::OK);
    let page = router(app.clone())
        .oneshot(get("/").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert_eq!(page.headers()["x-frame-options"], "SAMEORIGIN");
    assert_eq!(page.headers()["x-content-type-options"], "nosniff");
}

#[tokio::test]
async fn login_sets_a_strict_http_only_cookie_for_the_right_token_only() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path(), Some(TOKEN));
    let req = |t: &str| {
        Request::post("/api/v1/login")
            .body(json_body(json!({ "token": t })))
            .unwrap()
    };
    let resp = router(app.clone()).oneshot(req(TOKEN)).await.unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let cookie = resp.headers()[header::SET_COOKIE].to_str().unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert_eq!(call(&app, req("nope")).await.0, StatusCode::UNAUTHORIZED);
    let foreign = Request::post("/api/v1/login")
        .header(header::HOST, "127.0.0.1:8080")
        .header(header::ORIGIN, "http://evil.example")
        .body(json_body(json!({ "token": TOKEN })))
        .unwrap();
    assert_eq!(call(&app, foreign).await.0, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn state_changing_requests_need_the_csrf_value_unless_bearer() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path(), None);
    let body = || json_body(json!({ "preset": "quick" }));
    let bare = Request::post("/api/v1/jobs").body(body()).unwrap();
    assert_eq!(call(&app, bare).await.0, StatusCode::FORBIDDEN);
    let wrong = Request::post("/api/v1/jobs")
        .header("x-isobench-csrf", "0000")
        .body(body())
        .unwrap();
    assert_eq!(call(&app, wrong).await.0, StatusCode::FORBIDDEN);
    let (s, job) = call(&app, post("/api/v1/jobs", &app).body(body()).unwrap()).await;
    assert_eq!(s, StatusCode::CREATED, "{job}");
    assert_eq!(job["state"], "queued");
    let bearer = Request::post("/api/v1/jobs")
        .header(header::AUTHORIZATION, "Bearer anything")
        .body(body())
        .unwrap();
    assert_eq!(call(&app, bearer).await.0, StatusCode::CREATED);
    let cross = post("/api/v1/jobs", &app)
        .header(header::HOST, "127.0.0.1:8080")
        .header(header::ORIGIN, "http://127.0.0.1:9999")
        .body(body())
        .unwrap();
    assert_eq!(call(&app, cross).await.0, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn without_a_token_only_loopback_names_are_answered() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path(), None);
    for (host, status) in [
        ("127.0.0.1:8080", StatusCode::OK),
        ("localhost:8080", StatusCode::OK),
        ("[::1]:8080", StatusCode::OK),
        ("evil.example:8080", StatusCode::FORBIDDEN),
        ("10.0.0.1", StatusCode::FORBIDDEN),
    ] {
        let req = get("/api/v1/session").header(header::HOST, host);
        assert_eq!(
            call(&app, req.body(Body::empty()).unwrap()).await.0,
            status,
            "{host}"
        );
    }
    let with_token = self::app(tempfile::tempdir().unwrap().path(), Some(TOKEN));
    let req = get("/api/v1/session")
        .header(header::HOST, "isobench.example")
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
    assert_eq!(
        call(&with_token, req.body(Body::empty()).unwrap()).await.0,
        StatusCode::OK
    );
}

#[tokio::test]
async fn bodies_over_a_mebibyte_are_refused_with_json() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path(), None);
    let big = "x".repeat(crate::BODY_LIMIT + 1);
    let req = post("/api/v1/jobs", &app)
        .header(header::CONTENT_LENGTH, big.len())
        .body(json_body(json!({ "scenario": big })))
        .unwrap();
    let (s, body) = call(&app, req).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(body["error"].is_string(), "{body}");
}

#[tokio::test]
async fn malformed_bodies_and_unknown_routes_answer_json() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path(), None);
    let (s, body) = call(
        &app,
        post("/api/v1/jobs", &app).body(Body::from("{")).unwrap(),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(body["error"].is_string());
    let shape = post("/api/v1/jobs", &app)
        .body(json_body(json!({ "seed": "x" })))
        .unwrap();
    assert_eq!(call(&app, shape).await.0, StatusCode::UNPROCESSABLE_ENTITY);
    let (s, body) = call(&app, get("/api/v1/nothing").body(Body::empty()).unwrap()).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert!(body["error"].is_string());
    let (s, body) = call(
        &app,
        get("/api/v1/jobs/j-1/stop").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    assert!(body["error"].is_string());
}

#[tokio::test]
async fn run_ids_that_could_name_a_path_never_reach_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path(), None);
    for uri in [
        "/api/v1/runs/..%2F..%2Fetc%2Fpasswd",
        "/api/v1/runs/..%2F..%2Fetc%2Fpasswd/report",
        "/api/v1/runs/a.b/export?format=json",
    ] {
        let (s, body) = call(&app, get(uri).body(Body::empty()).unwrap()).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{uri}: {body}");
    }
    let (s, _) = call(
        &app,
        get("/api/v1/runs/20990101-000000-aa")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert!(
        !dir.path().join("r.db").exists(),
        "reading creates no database"
    );
    let (s, _) = call(
        &app,
        get("/api/v1/runs/x/export?format=pdf")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_broken_scenario_is_refused_with_its_problems() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path(), None);
    let text = "name = \"x\"\nkind = \"matrix\"\nseed = \"one\"\n";
    let req = post("/api/v1/jobs", &app)
        .body(json_body(json!({ "scenario": text, "name": "x.toml" })))
        .unwrap();
    let (s, body) = call(&app, req).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let seed = body["problems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["field"] == "seed")
        .expect("the seed's problem");
    assert_eq!(seed["line"], 3, "{body}");
    let req = post("/api/v1/jobs", &app)
        .body(json_body(json!({ "preset": "nope" })))
        .unwrap();
    assert_eq!(call(&app, req).await.0, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(app.queue().list().is_empty());
}

async fn queue_preset(app: &Arc<App>) -> String {
    let req = post("/api/v1/jobs", app)
        .body(json_body(json!({ "preset": "quick" })))
        .unwrap();
    let (s, job) = call(app, req).await;
    assert_eq!(s, StatusCode::CREATED);
    job["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn queued_jobs_move_and_cancel_through_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path(), None);
    for _ in 0..3 {
        queue_preset(&app).await;
    }
    let req = post("/api/v1/jobs/j-3/move", &app)
        .body(json_body(json!({ "position": 1 })))
        .unwrap();
    let (s, list) = call(&app, req).await;
    assert_eq!(s, StatusCode::OK);
    let ids: Vec<&str> = list["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["j-3", "j-1", "j-2"]);
    let del = Request::delete("/api/v1/jobs/j-1").header("x-isobench-csrf", &app.csrf);
    assert_eq!(
        call(&app, del.body(Body::empty()).unwrap()).await.0,
        StatusCode::NO_CONTENT
    );
    let (s, job) = call(
        &app,
        post("/api/v1/jobs/j-2/stop", &app)
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED);
    assert_eq!(job["state"], "cancelled");
    let again = post("/api/v1/jobs/j-2/stop", &app)
        .body(Body::empty())
        .unwrap();
    assert_eq!(call(&app, again).await.0, StatusCode::CONFLICT);
    let moved = post("/api/v1/jobs/j-1/move", &app)
        .body(json_body(json!({ "position": 1 })))
        .unwrap();
    assert_eq!(call(&app, moved).await.0, StatusCode::CONFLICT);
    let unknown = get("/api/v1/jobs/j-99").body(Body::empty()).unwrap();
    assert_eq!(call(&app, unknown).await.0, StatusCode::NOT_FOUND);
    // The queue on disk is the queue shown.
    let saved = crate::queue::Queue::load(&app.queue_path()).unwrap();
    assert_eq!(saved.list(), app.queue().list());
}

#[tokio::test]
async fn a_restart_puts_the_job_it_died_under_first_as_a_resume() {
    let dir = tempfile::tempdir().unwrap();
    let first = app(dir.path(), None);
    queue_preset(&first).await;
    queue_preset(&first).await;
    first
        .update(|q| {
            let j = q.get_mut("j-2").unwrap();
            j.state = JobState::Running;
            j.run = Some("20261125-000000-abcd".into());
        })
        .unwrap();
    // The app (and with it the state directory's lock) goes when its last holder does: a
    // request's blocking task may still hold it for a moment after its answer came back.
    let mut first = first;
    let t0 = std::time::Instant::now();
    while let Err(still) = Arc::try_unwrap(first) {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(30),
            "app still held"
        );
        first = still;
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let back = reopen(dir.path());
    let list = back.queue().list();
    assert_eq!(list[0].id, "j-2");
    assert_eq!(list[0].state, JobState::Queued);
    assert_eq!(list[0].spec.resume.as_deref(), Some("20261125-000000-abcd"));
    assert_eq!(list[1].id, "j-1");
}

/// [`app`] again on a state directory whose previous app is gone. Its lock can still be
/// held for a moment after: a child that another test of this process forks (with a
/// `pre_exec`, so by `fork`) shares every descriptor, the lock's among them, until its
/// `exec` closes it.
fn reopen(dir: &Path) -> Arc<App> {
    let t0 = std::time::Instant::now();
    loop {
        match open(config(dir, None, "/bin/false".into())) {
            Ok((app, _)) => return app,
            Err(e) if e.to_string().contains("another isobench serve") => {
                assert!(t0.elapsed() < Duration::from_secs(30), "{e}");
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn a_non_loopback_address_needs_a_token() {
    let any = "0.0.0.0:8080".parse().unwrap();
    let e = crate::check_listen(any, None).unwrap_err().to_string();
    assert!(e.contains("--token-file"), "{e}");
    crate::check_listen(any, Some(TOKEN)).unwrap();
    crate::check_listen("127.0.0.1:8080".parse().unwrap(), None).unwrap();
    crate::check_listen("[::1]:8080".parse().unwrap(), None).unwrap();
}

/// Writes `text` to a token file of mode 0600.
fn token_file(dir: &std::path::Path, text: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let f = dir.join("token");
    std::fs::write(&f, text).unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    f
}

#[test]
fn a_token_file_must_hold_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let f = token_file(dir.path(), "  \n");
    assert!(crate::read_token(&f)
        .unwrap_err()
        .to_string()
        .contains("empty"));
    let f = token_file(dir.path(), " 0123456789abcdef \n");
    assert_eq!(crate::read_token(&f).unwrap(), "0123456789abcdef");
    assert!(crate::read_token(&dir.path().join("none")).is_err());
}

/// Defect: `serve --listen 0.0.0.0:PORT --token-file F` started with a one-character token.
#[test]
fn serve_refuses_a_short_token() {
    let dir = tempfile::tempdir().unwrap();
    for short in ["x", "0123456789abcde"] {
        let f = token_file(dir.path(), &format!("{short}\n"));
        let e = crate::read_token(&f).unwrap_err().to_string();
        assert!(
            e.contains(&format!("--token-file {}", f.display()))
                && e.contains(&format!("{} character", short.len()))
                && e.contains("16")
                && e.contains("/dev/urandom"),
            "{e}"
        );
        // (The file's path is named, and a random temp path may hold the token's letters.)
        let path = f.display().to_string();
        assert!(
            !e.replace(&path, "").contains(short),
            "the token is not echoed: {e}"
        );
        assert!(crate::token_from_file(&f).is_err());
    }
    let any = "0.0.0.0:8080".parse().unwrap();
    let e = crate::check_listen(any, Some("x")).unwrap_err().to_string();
    assert!(e.contains("fewer than the 16"), "{e}");
    let lo = "127.0.0.1:8080".parse().unwrap();
    assert!(
        crate::check_listen(lo, Some("x")).is_err(),
        "on loopback too"
    );
}

#[test]
fn a_token_file_other_users_can_read_is_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let f = token_file(dir.path(), "a-secret-of-some-length\n");
    for mode in [0o644, 0o640, 0o604, 0o620, 0o602] {
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
        let e = crate::read_token(&f).unwrap_err().to_string();
        assert!(e.contains(&format!("mode {mode:03o}")), "{e}");
        assert!(e.contains("chmod 600"), "{e}");
    }
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o400)).unwrap();
    assert_eq!(crate::read_token(&f).unwrap(), "a-secret-of-some-length");
}

#[test]
fn a_missing_token_file_gets_a_fresh_token_only_its_owner_can_read() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("new-token");
    let (token, made) = crate::token_from_file(&f).unwrap();
    assert!(made);
    assert_eq!(token.len(), 32, "{token}");
    assert!(token.chars().all(|c| c.is_ascii_hexdigit()), "{token}");
    let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // The next start reads the same token back; another file gets another one.
    assert_eq!(crate::token_from_file(&f).unwrap(), (token.clone(), false));
    let (other, _) = crate::token_from_file(&dir.path().join("other")).unwrap();
    assert_ne!(other, token);
}

#[test]
fn token_comparison_is_exact_and_constant_time_by_construction() {
    // `same` compares through `subtle::ConstantTimeEq`; what it must decide:
    assert!(crate::auth::same("s3cret-token", "s3cret-token"));
    for wrong in [
        "",
        "s",
        "s3cret-toke",
        "s3cret-tokeN",
        "s3cret-token ",
        "S3cret-token",
    ] {
        assert!(!crate::auth::same(wrong, "s3cret-token"), "{wrong:?}");
    }
}

/// A stand-in for `isobench run --json-stream`: plans run R-1 with 3 trials, reports them,
/// then behaves as `tail` says (the rest of a shell script).
fn stand_in(dir: &Path, tail: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("fake-isobench");
    let script = format!(
        "#!/bin/sh\n\
         echo '{{\"event\":\"planned\",\"run\":\"R-1\",\"trials\":3,\"done\":0}}'\n\
         echo 'not an event'\n\
         echo '{{\"event\":\"trial_started\",\"n\":1,\"of\":3,\"round\":0,\"condition\":\"cpu@100\",\"what\":\"cpu-int\",\"eta_s\":2.0}}'\n\
         echo 'something went wrong' >&2\n\
         {tail}\n"
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

async fn run_one(tail: &str) -> (Arc<App>, crate::queue::Job) {
    let dir = tempfile::tempdir().unwrap();
    let exe = stand_in(dir.path(), tail);
    let (app, _) = open(config(dir.path(), None, exe)).unwrap();
    let mut events = app.events.subscribe();
    queue_preset(&app).await;
    let worker = tokio::spawn(crate::runner::worker(app.clone(), None));
    let job = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if let Ok(crate::app::Broadcast::Job(j)) = events.recv().await {
                if j.state.finished() {
                    return j;
                }
                if j.state == JobState::Running && j.progress.as_ref().is_some_and(|p| p.n == 1) {
                    // A stop arrives while the run measures.
                    if tail.contains("INT") {
                        let req = post(&format!("/api/v1/jobs/{}/stop", j.id), &app);
                        call(&app, req.body(Body::empty()).unwrap()).await;
                    }
                }
            }
        }
    })
    .await
    .expect("the job ends");
    worker.abort();
    std::mem::forget(dir);
    (app, *job)
}

#[tokio::test]
async fn the_worker_follows_a_run_to_its_end() {
    let (_, job) = run_one("exit 4").await;
    assert_eq!(job.state, JobState::Done);
    assert_eq!(job.exit_code, Some(4));
    assert_eq!(job.run.as_deref(), Some("R-1"));
    assert_eq!(job.progress.unwrap().what, "cpu-int");
}

#[tokio::test]
async fn a_stopped_run_is_interrupted_and_resumable() {
    let (_, job) = run_one("trap 'exit 130' INT\nwhile true; do sleep 0.05; done").await;
    assert_eq!(job.state, JobState::Interrupted);
    assert_eq!(job.exit_code, Some(130));
}

#[tokio::test]
async fn a_failing_run_fails_its_job_with_the_end_of_its_stderr() {
    let (_, job) = run_one("exit 1").await;
    assert_eq!(job.state, JobState::Failed);
    assert!(
        job.error
            .as_deref()
            .unwrap()
            .contains("something went wrong"),
        "{job:?}"
    );
    let (_, job) = run_one("kill -9 $$").await;
    assert_eq!(job.state, JobState::Failed);
    assert!(
        job.error.as_deref().unwrap().contains("signal 9"),
        "{job:?}"
    );
}

#[tokio::test]
async fn shutting_down_stops_the_run_and_keeps_it_first_as_a_resume() {
    let dir = tempfile::tempdir().unwrap();
    let exe = stand_in(
        dir.path(),
        "trap 'exit 130' INT\nwhile true; do sleep 0.05; done",
    );
    let (app, _) = open(config(dir.path(), None, exe)).unwrap();
    queue_preset(&app).await;
    queue_preset(&app).await;
    let worker = tokio::spawn(crate::runner::worker(app.clone(), None));
    tokio::time::timeout(Duration::from_secs(30), async {
        while app.queue().view("j-1").and_then(|j| j.progress).is_none() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the run starts");
    crate::runner::shutdown(&app, worker).await;
    let saved = crate::queue::Queue::load(&app.queue_path()).unwrap().list();
    assert_eq!(saved[0].id, "j-1");
    assert_eq!(saved[0].state, JobState::Queued);
    assert_eq!(saved[0].spec.resume.as_deref(), Some("R-1"));
    assert_eq!(saved[1].id, "j-2");
    assert_eq!(saved[1].state, JobState::Queued, "no other job started");
}

#[tokio::test]
async fn the_api_document_describes_every_route_once() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path(), None);
    let (s, doc) = call(
        &app,
        get("/api/v1/openapi.json").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let paths = doc["paths"].as_object().unwrap();
    for path in [
        "/api/v1/session",
        "/api/v1/login",
        "/api/v1/runs",
        "/api/v1/runs/{id}",
        "/api/v1/runs/{id}/report",
        "/api/v1/runs/{id}/export",
        "/api/v1/runs/{id}/resume",
        "/api/v1/compare",
        "/api/v1/jobs",
        "/api/v1/jobs/{id}",
        "/api/v1/jobs/{id}/stop",
        "/api/v1/jobs/{id}/move",
        "/api/v1/events",
        "/api/v1/openapi.json",
        "/metrics",
    ] {
        assert!(paths.contains_key(path), "{path}");
    }
    for (path, ops) in paths {
        for (method, op) in ops.as_object().unwrap() {
            let params: Vec<&str> = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| p["name"].as_str().unwrap())
                .collect();
            let mut unique = params.clone();
            unique.dedup();
            assert_eq!(params, unique, "{method} {path}");
        }
    }
    let link = &paths["/api/v1/jobs"]["post"]["responses"]["201"]["links"]["stop"];
    assert_eq!(link["operationId"], "stop", "{link}");
}

#[test]
fn a_jobs_client_chosen_values_stay_values_of_their_flags() {
    use crate::queue::{JobSpec, Queue};
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path(), None);
    let mut q = Queue::default();
    let hostile = "--db=/tmp/elsewhere";
    let job = q.push(JobSpec {
        preset: Some(hostile.into()),
        platform: Some("-x".into()),
        seed: Some(7),
        ..JobSpec::default()
    });
    let args = crate::runner::run_args(&app, &job);
    assert_eq!(args[0], "run");
    assert!(args.contains(&format!("--preset={hostile}")), "{args:?}");
    assert!(args.contains(&"--platform=-x".to_string()), "{args:?}");
    assert!(args.contains(&"--seed=7".to_string()), "{args:?}");
    // Only the server's own database is passed as --db.
    let dbs: Vec<&String> = args.iter().filter(|a| a.starts_with("--db")).collect();
    assert_eq!(dbs.len(), 1, "{args:?}");
    let resume = q.push(JobSpec {
        resume: Some("-r".into()),
        ..JobSpec::default()
    });
    let args = crate::runner::run_args(&app, &resume);
    assert_eq!(args[1], "--resume=-r", "{args:?}");
}

/// Queues `spec` in `app`; its job's id.
fn queued(app: &App, spec: crate::queue::JobSpec) -> String {
    app.update_jobs(|q| {
        let job = q.push(spec);
        (job.id.clone(), vec![job.id])
    })
    .unwrap()
}

#[test]
fn a_fleet_job_takes_its_run_and_progress_from_the_coordinators_events() {
    use crate::fleet::FleetProgress;
    use crate::queue::{JobHost, JobSpec};
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path(), None);
    let hosts: Vec<JobHost> = ["a", "b"]
        .iter()
        .map(|n| JobHost {
            name: n.to_string(),
            address: format!("{n}:7878"),
            host_type: None,
        })
        .collect();
    let spec = JobSpec {
        preset: Some("quick".into()),
        hosts: hosts.clone(),
        ..JobSpec::default()
    };
    let id = queued(&app, spec);
    let mut fleet = FleetProgress::new(&hosts);
    let mut on = |e: Value| crate::runner::on_fleet_event(&app, &id, &mut fleet, e);
    let progress = |member: &str, run: &str, n: u64| {
        json!({"event": "member_progress", "member": member, "run": run, "n": n, "of": 10,
               "status": null, "line": "..."})
    };
    on(
        json!({"event": "fleet_started", "scenario": "quick.toml", "noun": "hosts",
              "members": ["a", "b"]}),
    );
    on(progress("b", "R-b", 0));
    on(progress("a", "R-a", 0));
    on(progress("a", "R-a", 10));
    let job = app.queue().view(&id).unwrap();
    assert_eq!(job.run.as_deref(), Some("R-b"), "the first planned");
    let p = job.progress.unwrap();
    assert_eq!((p.n, p.of, p.what.as_str()), (10, 20, "0 of 2 hosts done"));
    on(json!({"event": "member_not_run", "member": "b", "why": "refused"}));
    on(json!({"event": "member_imported", "member": "a",
              "done": {"run_id": "R-a", "status": "complete", "exit_code": 0, "chunks": 1,
                       "bytes": 10}}));
    let job = app.queue().view(&id).unwrap();
    assert_eq!(job.run.as_deref(), Some("R-a"), "b stored no run here");
    let p = job.progress.unwrap();
    assert_eq!((p.n, p.of, p.what.as_str()), (20, 20, "2 of 2 hosts done"));
}

#[test]
fn a_job_on_several_platforms_keeps_its_first_run_and_says_which_platform_runs() {
    use crate::queue::{JobSpec, PlatformStep};
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path(), None);
    let spec = JobSpec {
        preset: Some("quick".into()),
        platforms: vec!["host".into(), "cgroup".into()],
        ..JobSpec::default()
    };
    let id = queued(&app, spec);
    let args = crate::runner::run_args(&app, &app.queue().view(&id).unwrap());
    assert!(
        args.contains(&"--platform=host,cgroup".to_string()),
        "{args:?}"
    );
    let on = |e: Value| crate::runner::on_event(&app, &id, e);
    on(json!({"event": "platform_started", "platform": "host", "n": 1, "of": 2}));
    on(json!({"event": "planned", "run": "R-host", "trials": 4, "done": 0}));
    on(json!({"event": "platform_started", "platform": "cgroup", "n": 2, "of": 2}));
    on(json!({"event": "planned", "run": "R-cgroup", "trials": 6, "done": 0}));
    on(
        json!({"event": "trial_ended", "n": 2, "of": 6, "round": 0, "condition": "baseline",
              "what": "cpu-int", "eta_s": null, "status": "ok", "reason": null}),
    );
    let job = app.queue().view(&id).unwrap();
    assert_eq!(
        job.run.as_deref(),
        Some("R-host"),
        "the first run stays the job's"
    );
    let p = job.progress.unwrap();
    assert_eq!((p.n, p.of), (2, 6), "the current platform's trials");
    assert_eq!(
        p.platform,
        Some(PlatformStep {
            name: "cgroup".into(),
            n: 2,
            of: 2
        })
    );
    // Put back after a restart, it runs again from its spec: a resume is of one run.
    app.update(|q| q.requeue_front(&id)).unwrap();
    let job = app.queue().view(&id).unwrap();
    assert_eq!((job.run, job.spec.resume), (None, None));
}

/// A request from `ip` (as the server's accept loop marks every request).
fn from(ip: &str, mut req: Request<Body>) -> Request<Body> {
    let addr: std::net::SocketAddr = format!("{ip}:40000").parse().unwrap();
    req.extensions_mut()
        .insert(axum::extract::ConnectInfo(addr));
    req
}

fn login_req(ip: &str, token: &str) -> Request<Body> {
    from(
        ip,
        Request::post("/api/v1/login")
            .body(json_body(json!({ "token": token })))
            .unwrap(),
    )
}

/// Defect: 300 wrong logins in a row got 300 401s, with no slowdown.
#[tokio::test]
async fn repeated_wrong_tokens_are_answered_429_with_retry_after() {
    use crate::throttle::FREE_FAILURES;
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path(), Some(TOKEN));
    let attacker = "192.0.2.66";
    for i in 0..FREE_FAILURES {
        let (s, _) = call(&app, login_req(attacker, &format!("guess-guess-guess-{i}"))).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "wrong token {i}");
    }
    // Now the address waits, whatever it sends: a wrong token, the right one, a Bearer.
    for req in [
        login_req(attacker, "guess-guess-guess-x"),
        login_req(attacker, TOKEN),
        from(
            attacker,
            get("/api/v1/jobs")
                .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
                .body(Body::empty())
                .unwrap(),
        ),
    ] {
        let resp = router(app.clone()).oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        let wait: u64 = resp.headers()[header::RETRY_AFTER]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=60).contains(&wait), "{wait}");
        let body = to_bytes(resp.into_body(), usize::MAX).await.unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert!(
            body["error"].as_str().unwrap().contains("try again in"),
            "{body}"
        );
    }
    // A wrong cookie is answered 401 and cleared, so a browser stops sending it.
    let req = from(
        "203.0.113.9",
        get("/api/v1/jobs")
            .header(header::COOKIE, "isobench_token=from-an-earlier-server")
            .body(Body::empty())
            .unwrap(),
    );
    let resp = router(app.clone()).oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let cleared = resp.headers()[header::SET_COOKIE].to_str().unwrap();
    assert!(
        cleared.starts_with("isobench_token=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
    // The owner, elsewhere, is not locked out.
    let (s, _) = call(&app, login_req("198.51.100.5", TOKEN)).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    // A request without any token is not a guess: answered 401, not counted.
    let owner = "198.51.100.6";
    for _ in 0..3 * FREE_FAILURES {
        let req = from(owner, get("/api/v1/jobs").body(Body::empty()).unwrap());
        assert_eq!(call(&app, req).await.0, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(
        call(&app, login_req(owner, TOKEN)).await.0,
        StatusCode::NO_CONTENT
    );
}

/// Defect: `Authorization: bearer TOKEN` was refused; RFC 7235 makes the scheme's name
/// case-insensitive.
#[tokio::test]
async fn bearer_scheme_is_case_insensitive() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path(), Some(TOKEN));
    for value in [
        format!("Bearer {TOKEN}"),
        format!("bearer {TOKEN}"),
        format!("BEARER {TOKEN}"),
        format!("bEaReR   {TOKEN} "),
        format!("bearer\t{TOKEN}"),
    ] {
        let req = get("/api/v1/jobs").header(header::AUTHORIZATION, &value);
        assert_eq!(
            call(&app, req.body(Body::empty()).unwrap()).await.0,
            StatusCode::OK,
            "{value:?}"
        );
    }
    for value in [
        format!("Basic {TOKEN}"),
        format!("Bearer{TOKEN}"),
        "bearer".into(),
    ] {
        let req = get("/api/v1/jobs").header(header::AUTHORIZATION, &value);
        assert_eq!(
            call(&app, req.body(Body::empty()).unwrap()).await.0,
            StatusCode::UNAUTHORIZED,
            "{value:?}"
        );
    }
    // A lower-case bearer authenticates a state-changing request without the CSRF value,
    // as `Bearer` does.
    let req = Request::post("/api/v1/jobs")
        .header(header::AUTHORIZATION, format!("bearer {TOKEN}"))
        .body(json_body(json!({ "preset": "quick" })))
        .unwrap();
    assert_eq!(call(&app, req).await.0, StatusCode::CREATED);
}

/// Defect: `POST /api/v1/jobs {"preset": "quick", "platfrom": "host"}` queued a job on the
/// scenario's platform, the misspelt field ignored.
#[tokio::test]
async fn unknown_json_field_is_422_with_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path(), None);
    let req = post("/api/v1/jobs", &app)
        .body(json_body(json!({ "preset": "quick", "platfrom": "host" })))
        .unwrap();
    let (s, body) = call(&app, req).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let e = body["error"].as_str().unwrap();
    assert!(
        e.contains("\"platfrom\"") && e.contains("did you mean \"platform\""),
        "{e}"
    );
    assert_eq!(body["field"], "platfrom");
    assert!(app.queue().list().is_empty(), "nothing was queued");

    let req = Request::post("/api/v1/login")
        .body(json_body(json!({ "token": "x", "remember": true })))
        .unwrap();
    let (s, body) = call(&app, req).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["field"], "remember");
    assert!(!body["error"].as_str().unwrap().contains("did you mean"));

    let (_, job) = call(
        &app,
        post("/api/v1/jobs", &app)
            .body(json_body(json!({ "preset": "quick" })))
            .unwrap(),
    )
    .await;
    let req = post(
        &format!("/api/v1/jobs/{}/move", job["id"].as_str().unwrap()),
        &app,
    )
    .body(json_body(json!({ "position": 1, "postion": 2 })))
    .unwrap();
    let (s, body) = call(&app, req).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("did you mean \"position\""),
        "{body}"
    );
    // A whole number past the int64 the API document gives the field is refused too.
    let req = post(
        &format!("/api/v1/jobs/{}/move", job["id"].as_str().unwrap()),
        &app,
    )
    .body(Body::from(r#"{"position": 9223372036854775808}"#))
    .unwrap();
    let (s, body) = call(&app, req).await;
    assert!(s.is_client_error(), "{s} {body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("from 0 to 9223372036854775807"),
        "{body}"
    );
    // The API's description says so too.
    let (_, doc) = call(
        &app,
        get("/api/v1/openapi.json").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(
        doc["components"]["schemas"]["NewJob"]["additionalProperties"],
        false
    );
}

/// Defect: `GET /api/v1/compare?runs=` with one run id repeated 1,000 times took 304 s and
/// left the server at 4.4 GB.
#[tokio::test]
async fn compare_api_caps_and_dedups_runs() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path(), None);
    let ask = |runs: String| get(&format!("/api/v1/compare?runs={runs}")).body(Body::empty());
    let thousand = vec!["20261125-000000-abcd"; 1000].join(",");
    let (s, body) = call(&app, ask(thousand).unwrap()).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let e = body["error"].as_str().unwrap();
    assert!(e.contains("named twice"), "{e}");

    let (s, body) = call(&app, ask("r-1,r-1".into()).unwrap()).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("run r-1 is named twice"),
        "{body}"
    );
    let (s, body) = call(&app, ask("r-1".into()).unwrap()).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(body["error"].as_str().unwrap().contains("at least two"));

    let many: Vec<String> = (0..crate::api::MAX_COMPARE_RUNS + 1)
        .map(|i| format!("r-{i}"))
        .collect();
    let (s, body) = call(&app, ask(many.join(",")).unwrap()).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(
        body["error"].as_str().unwrap().contains("at most 8 runs"),
        "{body}"
    );
    // Eight different runs get through to the store (which has none of them).
    let (s, body) = call(
        &app,
        ask(many[..crate::api::MAX_COMPARE_RUNS].join(",")).unwrap(),
    )
    .await;
    assert_ne!(s, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        crate::api::compare_ids("a, b").unwrap(),
        vec!["a".to_string(), "b".to_string()]
    );
}

/// Defect: two `isobench serve` on one `--db` both started, both handed out job ids `j-1`
/// and `j-2`, and their queue file kept one server's jobs.
#[test]
fn second_server_on_one_state_dir_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let first = app(dir.path(), None);
    let e = open(config(dir.path(), None, "/bin/false".into()))
        .expect_err("a second server on the same state directory");
    let e = format!("{e:#}");
    assert!(
        e.contains("another isobench serve")
            && e.contains(&format!("pid {}", std::process::id()))
            && e.contains(&first.config.state_dir.display().to_string()),
        "{e}"
    );
    // A server on another state directory is another server.
    let other = tempfile::tempdir().unwrap();
    drop(app(other.path(), None));
    // Once the first is gone, its directory is free again.
    drop(first);
    drop(reopen(dir.path()));
}

/// Serves `app` over real TCP with `header_timeout`; returns the address and a sender that
/// stops it.
async fn over_tcp(
    app: &Arc<App>,
    header_timeout: Duration,
) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(crate::serve_http(
        listener,
        router(app.clone()),
        header_timeout,
        async {
            let _ = stopped.await;
        },
    ));
    (addr, stop)
}

/// Sends `bytes` on a new connection and reads until the server closes it (a reset counts
/// as closed), waiting at most a minute.
async fn send_and_read(addr: std::net::SocketAddr, bytes: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(60), s.read_to_end(&mut out)).await;
    assert!(read.is_ok(), "the server kept the connection open");
    String::from_utf8_lossy(&out).into_owned()
}

/// Defect: no header-read timeout: a client sending its headers slowly (slowloris) held a
/// connection as long as it liked.
#[tokio::test]
async fn slow_headers_are_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path(), None);
    let (addr, stop) = over_tcp(&app, Duration::from_millis(200)).await;
    // Headers that never end: the server closes the connection without answering them.
    let answer = send_and_read(addr, b"GET /api/v1/session HTTP/1.1\r\nHost: 127.0.0.1\r\n").await;
    assert!(!answer.contains("200 OK"), "{answer}");
    // A whole request is answered, and the connection is then closed.
    let answer = send_and_read(
        addr,
        b"GET /api/v1/session HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let _ = stop.send(());
}

/// Wrong tokens sent over the network are counted for the address they came from.
#[tokio::test]
async fn wrong_tokens_over_the_network_are_counted_for_their_address() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path(), Some(TOKEN));
    let (addr, stop) = over_tcp(&app, crate::HEADER_TIMEOUT).await;
    let request = |token: &str| {
        format!(
            "GET /api/v1/jobs HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
             Connection: close\r\n\r\n"
        )
    };
    for _ in 0..crate::throttle::FREE_FAILURES {
        let answer = send_and_read(addr, request("not-the-token-at-all").as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    }
    let answer = send_and_read(addr, request(TOKEN).as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: "),
        "{answer}"
    );
    let _ = stop.send(());
}

/// A tune from the launch form's fields: the probe, the SLO, the stressor and two knobs.
fn tune_form(knobs: Value) -> Value {
    json!({
        "tune": {
            "probe": "service",
            "slo": { "metric": "lat_p99_ms", "op": "<=", "bound": 15 },
            "stressors": ["cpu"],
            "knobs": knobs,
            "resolution": 0.1
        }
    })
}

#[tokio::test]
async fn a_tune_from_form_fields_queues_as_its_tune_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path(), None);
    let knobs = json!([
        { "tenant": "batch", "key": "cpus", "from": "0.1", "to": "1" },
        { "tenant": "batch", "key": "weight", "from": "1", "to": "10000" }
    ]);
    let req = post("/api/v1/jobs", &app)
        .body(json_body(tune_form(knobs)))
        .unwrap();
    let (s, job) = call(&app, req).await;
    assert_eq!(s, StatusCode::CREATED, "{job}");
    assert_eq!(job["spec"]["scenario_name"], "tune-cpu.toml", "{job}");
    assert!(job["spec"]["preset"].is_null(), "{job}");
    let id = job["id"].as_str().unwrap();
    let text = std::fs::read_to_string(app.scenario_path(id)).unwrap();
    let doc: toml::Table = text.parse().unwrap();
    assert_eq!(doc["kind"].as_str(), Some("tune"), "{text}");
    let tune = doc["tune"].as_table().unwrap();
    assert_eq!(tune["metric"].as_str(), Some("lat_p99_ms"));
    assert_eq!(tune["slo_max"].as_float(), Some(15.0));
    assert_eq!(tune["resolution"].as_float(), Some(0.1));
    let knobs: Vec<(&str, &str)> = tune["knob"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (k["tenant"].as_str().unwrap(), k["key"].as_str().unwrap()))
        .collect();
    assert_eq!(knobs, [("batch", "cpus"), ("batch", "weight")]);
    assert_eq!(doc["stressor"][0]["name"].as_str(), Some("cpu"));
    assert_eq!(app.queue().list().len(), 1);
}

#[tokio::test]
async fn a_tunes_bad_knob_is_refused_at_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path(), None);
    let good = json!({ "tenant": "batch", "key": "cpus", "from": "0.1", "to": "1" });
    for (bad, why) in [
        (
            json!({ "tenant": "batch", "key": "nope", "from": "1", "to": "2" }),
            "nope",
        ),
        (
            json!({ "tenant": "nobody", "key": "cpus", "from": "0.1", "to": "1" }),
            "nobody",
        ),
        (
            json!({ "tenant": "batch", "key": "cpus", "from": "", "to": "1" }),
            "empty",
        ),
    ] {
        let req = post("/api/v1/jobs", &app)
            .body(json_body(tune_form(json!([good, bad]))))
            .unwrap();
        let (s, body) = call(&app, req).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(body["field"], "tune.knobs[1]", "{body}");
        let e = body["error"].as_str().unwrap();
        assert!(e.starts_with("tune.knobs[1]: ") && e.contains(why), "{e}");
    }
    let mut form = tune_form(json!([good]));
    form["tune"]["stressors"] = json!(["no-such-stressor"]);
    let req = post("/api/v1/jobs", &app).body(json_body(form)).unwrap();
    let (s, body) = call(&app, req).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["field"], "tune.stressors[0]", "{body}");
    assert!(app.queue().list().is_empty(), "nothing was queued");
}
