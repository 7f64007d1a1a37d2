//! isobench's web UI and HTTP API (`isobench serve`): queue runs, watch them live, stop and
//! resume them, and browse, compare and download stored results from a browser.
//!
//! Why it looks like this: a measurement must not share the machine with another, so the
//! server is a queue with one worker that runs each job as a child `isobench run
//! --json-stream` (the same run as on the command line, and one that cannot crash the server);
//! results are read from the same SQLite database with the same library functions as the
//! terminal commands. The queue survives a crash of the server (it is saved on every change
//! and an interrupted run is resumed), and everything but the static UI files needs the token
//! on a non-loopback address. The HTTP contract is docs/server.md.
//!
//! Holes it keeps closed (docs/security.md): a token has at least [`MIN_TOKEN_LEN`]
//! characters; wrong tokens make their address wait ([`throttle`]); a client has
//! [`HEADER_TIMEOUT`] to send a request's headers; one server per state directory
//! ([`statelock`]); a JSON body with an unknown field is refused, naming it ([`fields`]).
#![deny(missing_docs)]

pub mod api;
pub mod app;
pub mod auth;
pub mod error;
pub mod events;
pub mod fields;
pub mod fleet;
pub mod metrics;
pub mod private;
pub mod queue;
pub mod results;
pub mod runner;
pub mod statelock;
pub mod throttle;
pub mod tune;
pub mod validate;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, HeaderName, HeaderValue};
use axum::middleware::{from_fn, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::set_header::SetResponseHeaderLayer;
use utoipa::OpenApi;

pub use app::{App, Config};

/// The largest request body accepted (413 past it).
pub const BODY_LIMIT: usize = 1 << 20;

/// The shortest token accepted (`--token-file`).
pub const MIN_TOKEN_LEN: usize = 16;

/// How long a client may take to send a request's headers (and how long a connection may
/// sit idle between requests) before it is closed: a client that sends its headers a byte
/// at a time cannot hold connections open.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(15);

/// The UI's page.
pub const INDEX_HTML: &str = include_str!("../ui/index.html");
/// The UI's script.
pub const APP_JS: &str = include_str!("../ui/app.js");
/// The UI's style sheet.
pub const STYLE_CSS: &str = include_str!("../ui/style.css");

/// Why the server will not start.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A non-loopback address without a token.
    #[error(
        "--listen {0} is reachable from other machines, so a token is required: write one to a \
         file and pass --token-file FILE (or listen on 127.0.0.1)"
    )]
    TokenRequired(SocketAddr),
    /// The token file could not be read, or holds no token.
    #[error(
        "--token-file {path}: {why}; write a token of at least 16 random characters into it \
         (e.g. `head -c 24 /dev/urandom | base64 > {path}`), or remove it and a fresh one is \
         made"
    )]
    BadTokenFile {
        /// The file.
        path: String,
        /// What is wrong.
        why: String,
    },
    /// The token file can be read or changed by other users.
    #[error(
        "--token-file {path} can be read or changed by other users (mode {mode:03o}): \
         restrict it with `chmod 600 {path}`"
    )]
    ExposedTokenFile {
        /// The file.
        path: String,
        /// Its permission bits.
        mode: u32,
    },
    /// The token is too short to be a secret.
    #[error(
        "{from} holds a token of {len} character(s), fewer than the {MIN_TOKEN_LEN} required: \
         a short token is guessed; replace it with a random one (e.g. `head -c 24 \
         /dev/urandom | base64 > FILE`), or remove the file and a fresh one is made"
    )]
    WeakToken {
        /// Where the token came from (`--token-file FILE`).
        from: String,
        /// Its length in characters.
        len: usize,
    },
    /// Another server uses the state directory, or its lock could not be taken.
    #[error(transparent)]
    Locked(#[from] statelock::LockError),
}

/// Refuses a token shorter than [`MIN_TOKEN_LEN`] characters; `from` says where it came from.
pub fn check_token_strength(token: &str, from: &str) -> Result<(), ConfigError> {
    let len = token.chars().count();
    if len < MIN_TOKEN_LEN {
        return Err(ConfigError::WeakToken {
            from: from.to_string(),
            len,
        });
    }
    Ok(())
}

/// Reads a token file: its text, trimmed, which must not be empty. A file that group or
/// others may read or write is refused (as ssh refuses such a key): the token would not be
/// a secret.
pub fn read_token(path: &Path) -> Result<String, ConfigError> {
    use std::os::unix::fs::PermissionsExt as _;
    let bad = |why: String| ConfigError::BadTokenFile {
        path: path.display().to_string(),
        why,
    };
    let file = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    let mode = file
        .metadata()
        .map_err(|e| bad(e.to_string()))?
        .permissions()
        .mode()
        & 0o777;
    if mode & 0o077 != 0 {
        return Err(ConfigError::ExposedTokenFile {
            path: path.display().to_string(),
            mode,
        });
    }
    let text = std::io::read_to_string(file).map_err(|e| bad(e.to_string()))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(bad("it is empty".into()));
    }
    check_token_strength(token, &format!("--token-file {}", path.display()))?;
    Ok(token.to_string())
}

/// The token of `--token-file path`: read from the file ([`read_token`]), or, when there is
/// no file yet, a fresh random one (128 bits from the thread's CSPRNG, as hex) written to a new file of mode 0600.
/// The flag is true when the token was made here.
pub fn token_from_file(path: &Path) -> Result<(String, bool), ConfigError> {
    let bad = |why: String| ConfigError::BadTokenFile {
        path: path.display().to_string(),
        why,
    };
    if std::fs::symlink_metadata(path).is_ok() {
        return Ok((read_token(path)?, false));
    }
    let token = app::random_hex(16);
    match private::write_new(path, format!("{token}\n").as_bytes()) {
        Ok(()) => Ok((token, true)),
        // Made by someone else in the meantime: theirs is the token.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok((read_token(path)?, false)),
        Err(e) => Err(bad(format!("creating it: {e}"))),
    }
}

/// Refuses a non-loopback address without a token, and a token shorter than
/// [`MIN_TOKEN_LEN`] characters on any address.
pub fn check_listen(listen: SocketAddr, token: Option<&str>) -> Result<(), ConfigError> {
    if !listen.ip().is_loopback() && token.is_none() {
        return Err(ConfigError::TokenRequired(listen));
    }
    if let Some(t) = token {
        check_token_strength(t, "the token")?;
    }
    Ok(())
}

/// Makes the state directory `dir` (0700) and takes its lock ([`statelock`]): refused, with
/// the other server's process id and address, when another server uses it.
pub fn lock_state_dir(dir: &Path) -> anyhow::Result<statelock::StateLock> {
    private::create_dir_all(&dir.join("jobs")).map_err(|e| {
        anyhow::anyhow!(
            "creating the state directory {}: {e}; pass --state-dir a writable directory",
            dir.display()
        )
    })?;
    Ok(statelock::StateLock::acquire(dir).map_err(ConfigError::from)?)
}

/// The OpenAPI document of the API.
#[derive(OpenApi)]
#[openapi(
    info(title = "isobench", description = "Queue, watch and browse isobench runs (docs/server.md)."),
    paths(
        api::session, api::login, api::runs, api::run, api::report, api::export, api::resume,
        api::compare, api::jobs, api::create_job, api::job, api::stop, api::move_job,
        api::cancel, events::events, openapi, metrics::metrics
    ),
    components(schemas(
        api::Session, api::PresetInfo, api::Login, api::RunList, api::Comparison,
        api::JobList, api::NewJob, api::Move, api::ExportFormat, app::PlatformInfo, app::RunEvent,
        error::ErrorBody, error::Problem, fleet::NewHost, queue::Job, queue::JobSpec,
        queue::JobHost, queue::JobState, queue::Progress, queue::PlatformStep, results::RunView,
        results::RunDetail, results::FleetView, results::FleetHostView, results::CrossView, results::TableView,
        results::CrossRunView, results::Headline, results::ResourceHeadline, tune::NewTune,
        tune::TuneSlo, tune::SloOp, tune::TuneKnob, api::TuneChoices, api::ProbeChoice
    )),
    modifiers(&Security),
    security((), ("bearer" = []), ("cookie" = []))
)]
pub struct ApiDoc;

struct Security;

impl utoipa::Modify for Security {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{
            ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme,
        };
        let c = doc.components.get_or_insert_with(Default::default);
        c.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        c.add_security_scheme(
            "cookie",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::new(auth::COOKIE))),
        );
    }
}

/// Links from the answers that create a job to the operations on it, so a client (or
/// a fuzzer) can follow them. (Added to the JSON: utoipa 5 writes a link's `operationId` in
/// snake case.)
fn add_links(doc: &mut serde_json::Value) {
    const JOB_OPS: &[&str] = &["job", "stop", "move_job", "cancel"];
    let links = [
        ("/api/v1/jobs", "post", "201", "$response.body#/id", JOB_OPS),
        (
            "/api/v1/runs/{id}/resume",
            "post",
            "201",
            "$response.body#/id",
            JOB_OPS,
        ),
    ];
    for (path, method, status, id, ops) in links {
        let Some(resp) = doc["paths"][path][method]["responses"][status].as_object_mut() else {
            continue;
        };
        let links: serde_json::Map<String, serde_json::Value> = ops
            .iter()
            .map(|op| {
                let link = serde_json::json!({"operationId": op, "parameters": {"id": id}});
                (op.to_string(), link)
            })
            .collect();
        resp.insert("links".into(), links.into());
    }
}

/// `GET /api/v1/openapi.json`.
#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "session", security(()),
    responses((status = 200, description = "this document", body = Object)))]
pub async fn openapi() -> axum::Json<serde_json::Value> {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
    add_links(&mut doc);
    axum::Json(doc)
}

/// The policy of the UI's page: its own files, and its own reports in a frame.
const UI_CSP: &str = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; \
                      frame-src 'self'; frame-ancestors 'self'";

/// The headers of an HTML answer (or a file of the UI): its type, its content security
/// policy, and framing by this origin only.
pub fn html_headers(h: &mut axum::http::HeaderMap, mime: &'static str, csp: &'static str) {
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(mime));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(csp),
    );
    h.insert(
        header::X_FRAME_OPTIONS,
        HeaderValue::from_static("SAMEORIGIN"),
    );
}

fn static_file(body: &'static str, mime: &'static str) -> Response {
    let mut resp = body.into_response();
    html_headers(resp.headers_mut(), mime, UI_CSP);
    resp
}

/// The HTTP routes of a server with state `app`.
pub fn router(app: Arc<App>) -> Router {
    let guarded = Router::new()
        .route("/api/v1/session", get(api::session))
        .route("/api/v1/login", post(api::login))
        .route("/api/v1/runs", get(api::runs))
        .route("/api/v1/runs/{id}", get(api::run))
        .route("/api/v1/runs/{id}/report", get(api::report))
        .route("/api/v1/runs/{id}/export", get(api::export))
        .route("/api/v1/runs/{id}/resume", post(api::resume))
        .route("/api/v1/compare", get(api::compare))
        .route("/api/v1/jobs", get(api::jobs).post(api::create_job))
        .route("/api/v1/jobs/{id}", get(api::job).delete(api::cancel))
        .route("/api/v1/jobs/{id}/stop", post(api::stop))
        .route("/api/v1/jobs/{id}/move", post(api::move_job))
        .route("/api/v1/events", get(events::events))
        .route("/api/v1/openapi.json", get(openapi))
        .route("/metrics", get(metrics::metrics))
        .route_layer(from_fn_with_state(app.clone(), auth::guard));
    let ui = Router::new()
        .route(
            "/",
            get(|| async { static_file(INDEX_HTML, "text/html; charset=utf-8") }),
        )
        .route(
            "/ui/app.js",
            get(|| async { static_file(APP_JS, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/ui/style.css",
            get(|| async { static_file(STYLE_CSS, "text/css; charset=utf-8") }),
        );
    guarded
        .merge(ui)
        .fallback(error::not_found)
        .with_state(app)
        .layer(RequestBodyLimitLayer::new(BODY_LIMIT))
        .layer(from_fn(error::json_errors))
        .layer(SetResponseHeaderLayer::if_not_present(
            HeaderName::from_static("x-content-type-options"),
            HeaderValue::from_static("nosniff"),
        ))
}

/// Each platform of this build and whether it works here (may run docker or podman, so
/// it runs once, at start).
fn platforms() -> Vec<app::PlatformInfo> {
    isobench_platform::PLATFORMS
        .iter()
        .map(|e| {
            let why = (e.available)().err().map(|e| e.to_string());
            app::PlatformInfo {
                name: e.kind.name().to_string(),
                available: why.is_none(),
                why,
            }
        })
        .collect()
}

/// The state of a server with `config`: its state directory made and locked (refused when
/// another server uses it), its queue read back (a job it died under put back at the head).
/// Returns the state and the process of that job's run, which may still be ending.
pub fn open(config: Config) -> anyhow::Result<(Arc<App>, Option<u32>)> {
    let lock = lock_state_dir(&config.state_dir)?;
    open_locked(config, lock)
}

/// [`open`] with the state directory's lock already taken ([`lock_state_dir`]).
pub fn open_locked(
    config: Config,
    lock: statelock::StateLock,
) -> anyhow::Result<(Arc<App>, Option<u32>)> {
    let dir = &config.state_dir;
    let mut queue = queue::Queue::load(&dir.join("queue.json"))?;
    let previous = queue.recover();
    let app = App::new(config, queue, lock);
    app.update(|_| ())
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", app.queue_path().display()))?;
    Ok((app, previous))
}

/// Serves until Ctrl-C or SIGTERM; then stops the running run gracefully, puts it back at
/// the head of the queue as a resume, and returns. `lock` is the state directory's lock
/// when the caller took it already ([`lock_state_dir`]); otherwise it is taken here, before
/// the address is bound. `on_ready` is called with the bound address once the server
/// accepts connections.
pub async fn serve(
    config: Config,
    lock: Option<statelock::StateLock>,
    on_ready: impl FnOnce(SocketAddr),
) -> anyhow::Result<()> {
    check_listen(config.listen, config.token.as_deref())?;
    let mut lock = match lock {
        Some(l) => l,
        None => lock_state_dir(&config.state_dir)?,
    };
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| anyhow::anyhow!("--listen {}: {e}", config.listen))?;
    let addr = listener.local_addr()?;
    lock.record(Some(addr))
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", lock.path().display()))?;
    let header_timeout = config.header_timeout;
    let (app, previous) = open_locked(config, lock)?;
    let probe = app.clone();
    tokio::task::spawn_blocking(move || {
        *probe.platforms.lock().unwrap_or_else(|e| e.into_inner()) = platforms();
    });
    let worker = tokio::spawn(runner::worker(app.clone(), previous));
    on_ready(addr);
    serve_http(
        listener,
        router(app.clone()),
        header_timeout,
        shutdown_signal(app.clone()),
    )
    .await;
    runner::shutdown(&app, worker).await;
    Ok(())
}

/// Serves HTTP/1.1 with `router` on `listener` until `shutdown` completes, then waits for
/// the open connections to finish. Each request carries its client's address
/// ([`axum::extract::ConnectInfo`]); a client that has not sent a request's headers within
/// `header_timeout` (also between requests on a kept-alive connection) is disconnected.
pub async fn serve_http(
    listener: tokio::net::TcpListener,
    router: Router,
    header_timeout: Duration,
    shutdown: impl std::future::Future<Output = ()>,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use tower::Layer as _;
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(_) => {
                    // Out of descriptors or an aborted connection: wait, then go on.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let service = axum::Extension(axum::extract::ConnectInfo(peer)).layer(router.clone());
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout)
            .serve_connection(
                TokioIo::new(stream),
                hyper_util::service::TowerToHyperService::new(service),
            );
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _ = conn.await;
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

async fn shutdown_signal(app: Arc<App>) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    app.begin_shutdown();
}
