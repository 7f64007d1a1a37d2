//! `isobench serve` on a non-loopback address with `--token-file` (without one it refuses
//! to start: serve_api.rs): the API and /metrics answer only with the token (as
//! `Authorization: Bearer` or the cookie POST /api/v1/login sets), the page's own files and
//! the OpenAPI document stay open, a login from another origin is refused, and a cookie alone
//! cannot change state without the CSRF header.

mod common;
use common::served::Server;

#[test]
fn a_server_with_a_token_answers_only_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let token = "token-for-the-test-0123456789";
    let file = common::write_private(dir.path(), "token", &format!("{token}\n"));
    let server = Server::start(
        &dir.path().join("t.db"),
        "1",
        &["--listen", "0.0.0.0:0", "--token-file", &file],
    );
    let bearer = format!("Bearer {token}");

    // Without the token: 401 with a JSON error, for the API and the metrics.
    for path in [
        "/api/v1/session",
        "/api/v1/runs",
        "/api/v1/jobs",
        "/metrics",
    ] {
        let r = server.get(path, &[]);
        assert_eq!(r.status, 401, "{path}: {}", r.body);
        if path.starts_with("/api/") {
            assert!(r.json()["error"].is_string(), "{path}: {}", r.body);
        }
    }
    let wrong = server.get("/api/v1/session", &[("Authorization", "Bearer nope")]);
    assert_eq!(wrong.status, 401, "{}", wrong.body);
    // The page's own files and the API's description hold no data: open.
    for path in ["/", "/ui/app.js", "/ui/style.css", "/api/v1/openapi.json"] {
        let r = server.get(path, &[]);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
    }

    // With the token as a bearer.
    let session = server.get("/api/v1/session", &[("Authorization", &bearer)]);
    assert_eq!(session.status, 200, "{}", session.body);
    let session = session.json();
    assert_eq!(session["auth"], true, "{session}");
    let csrf = session["csrf"].as_str().unwrap().to_string();
    let metrics = server.get("/metrics", &[("Authorization", &bearer)]);
    assert_eq!(metrics.status, 200, "{}", metrics.body);

    // Logging in: a wrong token is refused, the right one sets an HttpOnly, SameSite=Strict
    // cookie that then opens the API.
    let json = [("Content-Type", "application/json")];
    let bad = server.request("POST", "/api/v1/login", &json, Some(r#"{"token":"nope"}"#));
    assert_eq!(bad.status, 401, "{}", bad.body);
    let body = format!(r#"{{"token":"{token}"}}"#);
    let login = server.request("POST", "/api/v1/login", &json, Some(&body));
    assert_eq!(login.status, 204, "{}", login.body);
    let cookie = login.header("set-cookie").expect("a cookie").to_string();
    assert!(cookie.starts_with("isobench_token="), "{cookie}");
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    let pair = cookie.split(';').next().unwrap().to_string();
    let by_cookie = server.get("/api/v1/session", &[("Cookie", &pair)]);
    assert_eq!(by_cookie.status, 200, "{}", by_cookie.body);

    // A login from another site's page is refused.
    let foreign = server.request(
        "POST",
        "/api/v1/login",
        &[
            ("Content-Type", "application/json"),
            ("Origin", "http://evil.example"),
        ],
        Some(&body),
    );
    assert_eq!(foreign.status, 403, "{}", foreign.body);

    // A state change with the cookie needs the CSRF header; the bearer does not.
    let job = r#"{"preset":"no-such-preset"}"#;
    let no_csrf = server.request(
        "POST",
        "/api/v1/jobs",
        &[("Cookie", &pair), ("Content-Type", "application/json")],
        Some(job),
    );
    assert_eq!(no_csrf.status, 403, "{}", no_csrf.body);
    let with_csrf = server.request(
        "POST",
        "/api/v1/jobs",
        &[
            ("Cookie", &pair),
            ("Content-Type", "application/json"),
            ("X-Isobench-Csrf", &csrf),
        ],
        Some(job),
    );
    assert!(
        matches!(with_csrf.status, 400 | 422),
        "an unknown preset passes the CSRF check and is refused as bad input: {} {}",
        with_csrf.status,
        with_csrf.body
    );
    let bearer_post = server.request(
        "POST",
        "/api/v1/jobs",
        &[
            ("Authorization", &bearer),
            ("Content-Type", "application/json"),
        ],
        Some(job),
    );
    assert!(
        matches!(bearer_post.status, 400 | 422),
        "{} {}",
        bearer_post.status,
        bearer_post.body
    );
}
