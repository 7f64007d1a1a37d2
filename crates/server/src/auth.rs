//! Who may use the API. With a token (required on a non-loopback address), every API request
//! carries it as `Authorization: Bearer TOKEN` or in the `isobench_token` cookie that
//! `POST /api/v1/login` sets; tokens are compared in constant time. A browser sends the
//! cookie on any request, also one a hostile page triggers, so a state-changing request that
//! is not authenticated by Bearer must also carry this process's CSRF value (which only a
//! page of this origin can read, from `GET /api/v1/session`), and a present `Origin` must
//! be this server.
//!
//! Wrong tokens are counted per client address ([`crate::throttle`]): after a few, that
//! address is answered 429 with `Retry-After` for a while, whatever it sends. The scheme
//! name `Bearer` is matched without regard to case (RFC 7235).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::app::App;
use crate::error::ApiError;
use crate::throttle::{self, Client};

/// The cookie that carries the token.
pub const COOKIE: &str = "isobench_token";
/// The header that carries the CSRF value.
pub const CSRF_HEADER: &str = "x-isobench-csrf";

/// Whether `given` is `expected`, in time that does not depend on where they differ.
pub fn same(given: &str, expected: &str) -> bool {
    given.len() == expected.len() && bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
}

/// The token of an `Authorization: Bearer TOKEN` header. The scheme's name is
/// case-insensitive (RFC 7235, section 2.1): `bearer` and `BEARER` are `Bearer`.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .trim_start();
    let (scheme, token) = v.split_once([' ', '\t'])?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// The address a request came from, when the server knows it (it does for every request
/// from the network; a request made in-process has none).
#[derive(Debug, Clone, Copy)]
pub struct ClientAddr(pub Client);

impl ClientAddr {
    /// The client address of a request with these extensions.
    pub fn of(extensions: &axum::http::Extensions) -> ClientAddr {
        ClientAddr(
            extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0.ip()),
        )
    }
}

impl<S: Send + Sync> FromRequestParts<S> for ClientAddr {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(ClientAddr::of(&parts.extensions))
    }
}

/// 429 for a client that must wait, with `Retry-After`.
pub fn too_many(wait: std::time::Duration) -> ApiError {
    let secs = throttle::retry_after_secs(wait);
    let mut e = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        format!(
            "too many wrong tokens from this address: try again in {secs} s (after {} wrong \
             tokens each one doubles the wait, up to {} s)",
            throttle::FREE_FAILURES,
            throttle::MAX_WAIT.as_secs()
        ),
    );
    e.retry_after = HeaderValue::from_str(&secs.to_string()).ok();
    e
}

/// Checks `given` against the server's token for `client`, counting a wrong one: `Ok` when
/// it is the token, 401 when it is not, 429 when the client must wait first.
pub fn check_token(app: &App, client: Client, given: &str, token: &str) -> Result<(), ApiError> {
    let now = Instant::now();
    app.throttle.check(client, now).map_err(too_many)?;
    if same(given, token) {
        return Ok(());
    }
    app.throttle.failed(client, now);
    Err(ApiError::new(
        StatusCode::UNAUTHORIZED,
        "wrong token: send the token of the server's --token-file",
    ))
}

fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The `Set-Cookie` value that logs a browser in.
pub fn login_cookie(token: &str) -> String {
    format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/")
}

fn state_changing(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

/// Whether a present `Origin` names this server (the `Host` it was asked as).
pub fn origin_ok(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let origin = origin.to_str().ok();
    match (origin, host) {
        (Some(o), Some(h)) => {
            let o = o
                .strip_prefix("http://")
                .or_else(|| o.strip_prefix("https://"));
            o == Some(h)
        }
        _ => false,
    }
}

/// Whether the `Host` a request was sent to is a loopback name or address. Without a token
/// the server answers only those: a page of another site whose name was made to resolve to
/// 127.0.0.1 (DNS rebinding) would otherwise be same-origin with it.
pub fn host_is_local(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return true;
    };
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(n, _)| n),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Requests that need no token: the login itself and the API's description.
fn open_route(method: &Method, path: &str) -> bool {
    (method == Method::POST && path == "/api/v1/login")
        || (method == Method::GET && path == "/api/v1/openapi.json")
}

/// Checks the token, the CSRF value and the origin of API and metrics requests.
pub async fn guard(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let client = ClientAddr::of(req.extensions()).0;
    match check(&app, client, req.method(), req.uri().path(), req.headers()) {
        Ok(()) => next.run(req).await,
        Err(e) => {
            // A wrong login cookie (one of a server that has since changed its token) is
            // removed, so a browser tab does not keep counting against its address.
            let stale = e.status == StatusCode::UNAUTHORIZED
                && bearer(req.headers()).is_none()
                && cookie(req.headers(), COOKIE).is_some();
            let mut resp = e.into_response();
            if stale {
                resp.headers_mut().append(
                    header::SET_COOKIE,
                    HeaderValue::from_static(
                        "isobench_token=; Max-Age=0; HttpOnly; SameSite=Strict; Path=/",
                    ),
                );
            }
            resp
        }
    }
}

fn check(
    app: &App,
    client: Client,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
) -> Result<(), ApiError> {
    if app.config.token.is_none() && !host_is_local(headers) {
        return Err(forbidden(
            "without a token this server answers only to localhost and loopback addresses; \
             give it --token-file to serve other names",
        ));
    }
    if open_route(method, path) {
        if state_changing(method) && !origin_ok(headers) {
            return Err(forbidden("the Origin of this request is not this server"));
        }
        return Ok(());
    }
    let by_bearer = bearer(headers).is_some();
    if let Some(token) = &app.config.token {
        let Some(given) = bearer(headers).or_else(|| cookie(headers, COOKIE)) else {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "a token is needed: send `Authorization: Bearer TOKEN`, or log in with POST \
                 /api/v1/login {\"token\": \"...\"}",
            ));
        };
        check_token(app, client, given, token)?;
    }
    if state_changing(method) {
        if !origin_ok(headers) {
            return Err(forbidden("the Origin of this request is not this server"));
        }
        let csrf = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
        if !by_bearer && !csrf.is_some_and(|c| same(c, &app.csrf)) {
            return Err(forbidden(
                "missing or wrong X-Isobench-Csrf header: send the `csrf` of GET \
                 /api/v1/session (or authenticate with Authorization: Bearer)",
            ));
        }
    }
    Ok(())
}

fn forbidden(message: &str) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, message)
}
