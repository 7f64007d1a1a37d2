//! Every error the API answers is one JSON shape, `{"error": "...", "problems": [...]?}`,
//! whoever produced it: a handler ([`ApiError`]), axum's own rejections, the body-size limit
//! or an unknown route ([`json_errors`] rewrites those), so a client never has to parse text.

use axum::body::{to_bytes, Body};
use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;
use serde::Serialize;
use utoipa::ToSchema;

/// One problem of a scenario, at its place in the text.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Problem {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// Dotted field name (`tenant[0].limits.memory`).
    pub field: String,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub fix: String,
}

/// The body of every error answer.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong, and what to do.
    pub error: String,
    /// A scenario's problems (422 of `POST /api/v1/jobs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problems: Option<Vec<Problem>>,
    /// The request body's field that is wrong, when one is (422 of an unknown field).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// An error answer: its status and body.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Body.
    pub body: ErrorBody,
    /// `Retry-After` (seconds), on a 429.
    pub retry_after: Option<HeaderValue>,
}

impl ApiError {
    /// An error with `status` and `message`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            body: ErrorBody {
                error: message.into(),
                problems: None,
                field: None,
            },
            retry_after: None,
        }
    }

    /// 400.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    /// 409.
    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, message)
    }

    /// 422.
    pub fn unprocessable(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message)
    }

    /// 422 naming the request body's `field` that is wrong (`hosts[1].name`), the message
    /// starting with it.
    pub fn field(field: impl Into<String>, why: impl std::fmt::Display) -> ApiError {
        let field = field.into();
        let mut e = ApiError::unprocessable(format!("{field}: {why}"));
        e.body.field = Some(field);
        e
    }

    /// 500, for failures of the server itself (the database, the disk); logged, since the
    /// client sees only the message.
    pub fn internal(err: impl std::fmt::Display) -> ApiError {
        tracing::error!("answered 500: {err}");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, err.to_string())
    }

    /// Whether it is a failure of the server itself (500).
    pub fn is_internal(&self) -> bool {
        self.status == StatusCode::INTERNAL_SERVER_ERROR
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (self.status, Json(self.body)).into_response();
        if let Some(v) = self.retry_after {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
        resp
    }
}

/// A JSON request body: 400 when it is not JSON, 422 when it is JSON of the wrong shape
/// (an unknown field is named, with the known field nearest to it), 413 past the size
/// limit; whatever its `Content-Type` says.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::new(e.status(), e.body_text()))?;
        parse_body(&bytes).map(JsonBody)
    }
}

/// Reads a request body of type `T`: 400 when it is not JSON, 422 naming an unknown field
/// or what else is wrong with its shape.
pub fn parse_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
        let status = match e.classify() {
            serde_json::error::Category::Data => StatusCode::UNPROCESSABLE_ENTITY,
            _ => StatusCode::BAD_REQUEST,
        };
        ApiError::new(status, format!("the request body: {e}"))
    })?;
    if let (Some(object), Some(known)) = (value.as_object(), crate::fields::of::<T>()) {
        if let Some(name) = object.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(unknown_field(name, known));
        }
    }
    serde_json::from_value(value)
        .map_err(|e| ApiError::unprocessable(format!("the request body: {e}")))
}

/// 422 for a field the body's type does not have.
fn unknown_field(name: &str, known: &[&str]) -> ApiError {
    let shown: String = name.chars().take(64).flat_map(char::escape_debug).collect();
    let hint = match crate::fields::nearest(name, known) {
        Some(n) => format!("did you mean \"{n}\"? "),
        None => String::new(),
    };
    let mut e = ApiError::unprocessable(format!(
        "the request body has an unknown field \"{shown}\": {hint}the fields are {}",
        known
            .iter()
            .map(|k| format!("\"{k}\""))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    e.body.field = Some(name.chars().take(256).collect());
    e
}

/// Rewrites an error answer that is not JSON (axum's rejections, the body limit's 413, a
/// method not allowed) as `{"error": <its text>}` with the same status.
pub async fn json_errors(req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    let status = resp.status();
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let text = to_bytes(body, 64 * 1024).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text).trim().to_string();
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_lowercase()
    } else {
        text
    };
    let body = serde_json::to_vec(&ErrorBody {
        error: message,
        problems: None,
        field: None,
    })
    .unwrap_or_default();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Response::from_parts(parts, Body::from(body))
}

/// The answer to a route that does not exist.
pub async fn not_found() -> ApiError {
    ApiError::not_found("no such route; GET /api/v1/openapi.json lists the API")
}
