//! The handlers of `/api/v1`, each with its OpenAPI description (the document at
//! `/api/v1/openapi.json` is derived from these, so it cannot drift from the code).

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use isobench_report::Format;
use isobench_store::RunStatus;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::app::{App, PlatformInfo};
use crate::auth::{check_token, login_cookie, ClientAddr};
use crate::error::{ApiError, ErrorBody, JsonBody};
use crate::fleet::{self, NewHost};
use crate::queue::{Job, JobSpec, QueueError};
use crate::results::{self, check_run_id, RunDetail, RunView};
use crate::tune::{self, NewTune};
use crate::validate::{self, Input};

/// The shared state, as handlers take it.
pub type AppState = State<Arc<App>>;

/// Runs `f` on the blocking pool (database reads, planning).
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(ApiError::internal)?
}

impl From<QueueError> for ApiError {
    fn from(e: QueueError) -> ApiError {
        match e {
            QueueError::Unknown(_) => ApiError::not_found(e.to_string()),
            QueueError::State { .. } => ApiError::conflict(e.to_string()),
        }
    }
}

/// 500 for a queue that could not be saved.
fn save_error(e: std::io::Error) -> ApiError {
    ApiError::internal(format!("saving the queue: {e}"))
}

/// A preset's name and what it is for.
#[derive(Debug, Serialize, ToSchema)]
pub struct PresetInfo {
    /// Name (`isobench run --preset NAME`).
    pub name: String,
    /// What it is for.
    pub summary: String,
}

/// What the UI needs to start.
#[derive(Debug, Serialize, ToSchema)]
pub struct Session {
    /// isobench's version.
    pub version: String,
    /// The value to send as `X-Isobench-Csrf` on state-changing requests.
    pub csrf: String,
    /// Whether the server requires a token.
    pub auth: bool,
    /// The results database.
    pub db: String,
    /// The built-in presets.
    pub presets: Vec<PresetInfo>,
    /// The platforms and whether each works here.
    pub platforms: Vec<PlatformInfo>,
    /// What a tune's parts are chosen from.
    pub tune: TuneChoices,
}

/// What a tune's parts are chosen from (the launch form's tune).
#[derive(Debug, Serialize, ToSchema)]
pub struct TuneChoices {
    /// The preset a tune starts from without a scenario or a preset.
    pub preset: String,
    /// The probes, each with its metrics (the ones an SLO can bound).
    pub probes: Vec<ProbeChoice>,
    /// The stressors' names.
    pub stressors: Vec<String>,
    /// The keys of the limits that can change while tenants run (a knob's `key`).
    pub knobs: Vec<String>,
}

/// A probe and its metrics.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProbeChoice {
    /// Its name.
    pub name: String,
    /// Its metrics' names.
    pub metrics: Vec<String>,
}

impl TuneChoices {
    fn of_this_build() -> TuneChoices {
        let probes = isobench_workloads::PROBES.iter().map(|p| ProbeChoice {
            name: p.name().to_string(),
            metrics: p.metrics().iter().map(|m| m.name.to_string()).collect(),
        });
        let stressors = isobench_workloads::STRESSORS.iter().map(|s| s.name());
        TuneChoices {
            preset: tune::DEFAULT_PRESET.to_string(),
            probes: probes.collect(),
            stressors: stressors.map(str::to_string).collect(),
            knobs: isobench_platform::Knob::ALL
                .iter()
                .map(|k| k.key().to_string())
                .collect(),
        }
    }
}

/// `GET /api/v1/session`.
#[utoipa::path(get, path = "/api/v1/session", tag = "session",
    responses((status = 200, body = Session), (status = 401, body = ErrorBody)))]
pub async fn session(State(app): AppState) -> Json<Session> {
    let presets = isobench_experiment::scenario::PRESETS
        .iter()
        .map(|(name, summary, _)| PresetInfo {
            name: name.to_string(),
            summary: summary.to_string(),
        })
        .collect();
    let platforms = app
        .platforms
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    Json(Session {
        version: env!("CARGO_PKG_VERSION").to_string(),
        csrf: app.csrf.clone(),
        auth: app.config.token.is_some(),
        db: app.config.db.display().to_string(),
        presets,
        platforms,
        tune: TuneChoices::of_this_build(),
    })
}

/// `POST /api/v1/login` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Login {
    /// The server's token.
    pub token: String,
}

/// `POST /api/v1/login`: sets the token cookie.
#[utoipa::path(post, path = "/api/v1/login", tag = "session", request_body = Login,
    responses((status = 204, description = "logged in; the cookie is set"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 422, body = ErrorBody),
        (status = 429, body = ErrorBody, description = "too many wrong tokens from this \
            address: try again after `Retry-After` seconds")))]
pub async fn login(
    State(app): AppState,
    client: ClientAddr,
    JsonBody(body): JsonBody<Login>,
) -> Response {
    let Some(token) = &app.config.token else {
        return StatusCode::NO_CONTENT.into_response();
    };
    if let Err(e) = check_token(&app, client.0, body.token.trim(), token) {
        return e.into_response();
    }
    let mut resp = StatusCode::NO_CONTENT.into_response();
    if let Ok(v) = HeaderValue::from_str(&login_cookie(token)) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

/// The run of a `/api/v1/runs/{id}` path.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct RunPath {
    /// Run id (letters, digits and `-`).
    #[param(pattern = r"^[0-9A-Za-z-]{1,64}$")]
    pub id: String,
}

/// `{"runs": [...]}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunList {
    /// Newest first.
    pub runs: Vec<RunView>,
}

fn job_lookup(app: &App) -> impl Fn(&str) -> (Option<String>, bool) + '_ {
    move |run| {
        let q = app.queue();
        (q.job_of_run(run).map(str::to_string), q.has_live_run(run))
    }
}

/// `GET /api/v1/runs`.
#[utoipa::path(get, path = "/api/v1/runs", tag = "runs",
    responses((status = 200, body = RunList), (status = 401, body = ErrorBody)))]
pub async fn runs(State(app): AppState) -> Result<Json<RunList>, ApiError> {
    let runs = blocking(move || app.runs.list(&app.config.db, &job_lookup(&app))).await?;
    Ok(Json(RunList { runs }))
}

/// `GET /api/v1/runs/{id}`.
#[utoipa::path(get, path = "/api/v1/runs/{id}", tag = "runs",
    params(RunPath),
    responses((status = 200, body = RunDetail), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn run(
    State(app): AppState,
    Path(id): Path<String>,
) -> Result<Json<RunDetail>, ApiError> {
    check_run_id(&id)?;
    let detail = blocking(move || app.runs.detail(&app.config.db, &id, &job_lookup(&app))).await?;
    Ok(Json(detail))
}

/// `?download=1`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReportQuery {
    /// 1: as an attachment.
    #[param(maximum = 1)]
    pub download: Option<u8>,
}

/// `GET /api/v1/runs/{id}/report`: the self-contained HTML report.
#[utoipa::path(get, path = "/api/v1/runs/{id}/report", tag = "runs",
    params(RunPath, ReportQuery),
    responses((status = 200, content_type = "text/html", body = String),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub async fn report(
    State(app): AppState,
    Path(id): Path<String>,
    Query(q): Query<ReportQuery>,
) -> Result<Response, ApiError> {
    check_run_id(&id)?;
    let download = match q.download {
        None | Some(0) => false,
        Some(1) => true,
        Some(n) => {
            return Err(ApiError::bad_request(format!(
                "download={n}: write download=1 for an attachment, or leave it out"
            )))
        }
    };
    let name = id.clone();
    let html = blocking(move || results::report(&app.config.db, &id)).await?;
    let mut headers = HeaderMap::new();
    // The report is self-contained: inline scripts and styles, nothing from elsewhere.
    crate::html_headers(
        &mut headers,
        "text/html; charset=utf-8",
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
         img-src data:; frame-ancestors 'self'",
    );
    if download {
        attachment(&mut headers, &format!("isobench-{name}.html"));
    }
    Ok((headers, html).into_response())
}

fn attachment(headers: &mut HeaderMap, file: &str) {
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{file}\"")) {
        headers.insert(header::CONTENT_DISPOSITION, v);
    }
}

/// The formats of `isobench export`.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExportFormat {
    /// Everything, with raw samples.
    Json,
    /// One row per degradation.
    Csv,
    /// The report's tables.
    Markdown,
    /// Markdown, by its short name.
    Md,
}

/// `?format=json|csv|markdown`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExportQuery {
    /// What to export.
    pub format: ExportFormat,
}

/// `GET /api/v1/runs/{id}/export`: the bytes of `isobench export`.
#[utoipa::path(get, path = "/api/v1/runs/{id}/export", tag = "runs",
    params(RunPath, ExportQuery),
    responses((status = 200, description = "the export, as an attachment", content(
            (Object = "application/json"), (String = "text/csv"), (String = "text/markdown"))),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub async fn export(
    State(app): AppState,
    Path(id): Path<String>,
    Query(q): Query<ExportQuery>,
) -> Result<Response, ApiError> {
    check_run_id(&id)?;
    let (format, ext, mime) = match q.format {
        ExportFormat::Json => (Format::Json, "json", "application/json"),
        ExportFormat::Csv => (Format::Csv, "csv", "text/csv; charset=utf-8"),
        ExportFormat::Markdown | ExportFormat::Md => {
            (Format::Markdown, "md", "text/markdown; charset=utf-8")
        }
    };
    let name = format!("isobench-{id}.{ext}");
    let bytes = blocking(move || results::export(&app.config.db, &id, format)).await?;
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(mime));
    attachment(&mut headers, &name);
    Ok((headers, bytes).into_response())
}

/// `POST /api/v1/runs/{id}/resume`: queues the rest of a stored run.
#[utoipa::path(post, path = "/api/v1/runs/{id}/resume", tag = "runs",
    params(RunPath),
    responses((status = 201, body = Job), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn resume(
    State(app): AppState,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Job>), ApiError> {
    check_run_id(&id)?;
    results::check_writable(&app.config.db)?;
    let (db, run) = (app.config.db.clone(), id.clone());
    let status = blocking(move || results::status(&db, &run)).await?;
    if status == RunStatus::Complete {
        return Err(ApiError::conflict(format!(
            "run {id} is complete: every trial it planned is stored"
        )));
    }
    let job = app.update_jobs(|q| {
        if q.has_live_run(&id) {
            return (
                Err(ApiError::conflict(format!(
                    "run {id} is already queued or running"
                ))),
                Vec::new(),
            );
        }
        let job = q.push(JobSpec {
            resume: Some(id.clone()),
            ..JobSpec::default()
        });
        let ids = vec![job.id.clone()];
        (Ok(job), ids)
    });
    let job = job.map_err(save_error)??;
    app.wake.notify_one();
    Ok((StatusCode::CREATED, Json(job)))
}

/// The most runs one comparison may name.
pub const MAX_COMPARE_RUNS: usize = 8;

/// `?runs=A,B[,C...]`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CompareQuery {
    /// Run ids, comma-separated, 2 to 8 different ones; the first is the reference.
    #[param(pattern = r"^[0-9A-Za-z-]{1,64}(,[0-9A-Za-z-]{1,64}){1,7}$")]
    pub runs: String,
}

/// The run ids of `?runs=`: each checked, at most [`MAX_COMPARE_RUNS`] (400 otherwise), each
/// named once (422: the query is well-formed, but a run compared with itself means
/// nothing); all before any run is read.
pub fn compare_ids(runs: &str) -> Result<Vec<String>, ApiError> {
    let mut ids: Vec<String> = Vec::new();
    for id in runs.split(',').map(str::trim) {
        if ids.len() == MAX_COMPARE_RUNS {
            return Err(ApiError::bad_request(format!(
                "runs=: at most {MAX_COMPARE_RUNS} runs can be compared at once; name fewer"
            )));
        }
        check_run_id(id)?;
        if ids.iter().any(|i| i == id) {
            return Err(ApiError::unprocessable(format!(
                "runs=: run {id} is named twice; a run compared with itself shows no \
                 difference: name each run once, and at least two different runs"
            )));
        }
        ids.push(id.to_string());
    }
    if ids.len() < 2 {
        return Err(ApiError::bad_request(
            "runs=: name at least two different runs, comma-separated (the first is the \
             reference)",
        ));
    }
    Ok(ids)
}

/// The comparison of runs.
#[derive(Debug, Serialize, ToSchema)]
pub struct Comparison {
    /// The tables as `isobench compare` prints them.
    pub text: String,
    /// The same as Markdown.
    pub markdown: String,
}

/// `GET /api/v1/compare`.
#[utoipa::path(get, path = "/api/v1/compare", tag = "runs", params(CompareQuery),
    responses((status = 200, body = Comparison), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "a run is named twice")))]
pub async fn compare(
    State(app): AppState,
    Query(q): Query<CompareQuery>,
) -> Result<Json<Comparison>, ApiError> {
    let ids = compare_ids(&q.runs)?;
    let (text, markdown) = blocking(move || {
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        results::compare(&app.config.db, &ids)
    })
    .await?;
    Ok(Json(Comparison { text, markdown }))
}

/// `{"jobs": [...]}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobList {
    /// Running first, then queued in order, then the last 50 finished, newest first.
    pub jobs: Vec<Job>,
}

/// `GET /api/v1/jobs`.
#[utoipa::path(get, path = "/api/v1/jobs", tag = "jobs",
    responses((status = 200, body = JobList), (status = 401, body = ErrorBody)))]
pub async fn jobs(State(app): AppState) -> Json<JobList> {
    Json(JobList {
        jobs: app.queue().list(),
    })
}

/// `POST /api/v1/jobs` body: a preset or a scenario.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewJob {
    /// A built-in preset.
    #[schema(schema_with = preset_names)]
    pub preset: Option<String>,
    /// A scenario's TOML text.
    pub scenario: Option<String>,
    /// The scenario's file name (default `scenario.toml`).
    pub name: Option<String>,
    /// Platform instead of the scenario's (`auto` or a platform).
    #[schema(schema_with = platform_names)]
    pub platform: Option<String>,
    /// Run the scenario on each of these platforms in turn instead (`isobench run --platform
    /// A,B`), at least two, each once: the runs are stored linked, and each run's page shows
    /// the table across the platforms. Not given with `platform` or `hosts`.
    #[schema(schema_with = platform_list)]
    pub platforms: Option<Vec<String>>,
    /// Seed instead of the scenario's.
    #[serde(default, deserialize_with = "whole_number_opt")]
    pub seed: Option<u64>,
    /// Run on every one of these hosts at once, each through its host agent, instead of
    /// here (`isobench run --hosts`): the run's page then shows the fleet table. Each host
    /// runs the scenario's platform, so `platform` is not given with `hosts`.
    pub hosts: Option<Vec<NewHost>>,
    /// A tune (`isobench tune`): the victim's probe, the SLO, the stressors and the knobs,
    /// written into the `kind = "tune"` scenario of `scenario` or `preset` (`tune-cpu`
    /// without either), which then queues as a scenario; a part that is wrong is answered
    /// at its field (`tune.knobs[1]`).
    pub tune: Option<NewTune>,
}

/// A string that is one of `names`, or null.
fn one_of(names: Vec<String>, what: &str) -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::SchemaType;
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    let mut values: Vec<serde_json::Value> = names.into_iter().map(Into::into).collect();
    values.push(serde_json::Value::Null);
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .enum_values(Some(values))
        .description(Some(what))
        .build()
}

fn preset_names() -> utoipa::openapi::schema::Object {
    let names = isobench_experiment::scenario::PRESETS
        .iter()
        .map(|p| p.0.to_string());
    one_of(names.collect(), "A built-in preset (`isobench presets`).")
}

fn platform_names() -> utoipa::openapi::schema::Object {
    let names = std::iter::once("auto".to_string()).chain(
        isobench_platform::PLATFORMS
            .iter()
            .map(|e| e.kind.name().to_string()),
    );
    one_of(
        names.collect(),
        "Platform instead of the scenario's; one that cannot run here is refused (422).",
    )
}

fn platform_list() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, SchemaType, Type};
    let names = isobench_platform::PLATFORMS
        .iter()
        .map(|e| serde_json::Value::from(e.kind.name()));
    let item = utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(names));
    ArrayBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
        .items(item)
        .min_items(Some(2))
        .max_items(Some(isobench_platform::PLATFORMS.len()))
        .unique_items(true)
        .description(Some(
            "Platforms to run the scenario on, each in turn (at least two, each once); one \
             that cannot run here is refused (422).",
        ))
        .build()
}

/// `POST /api/v1/jobs`: checks the scenario and queues it.
#[utoipa::path(post, path = "/api/v1/jobs", tag = "jobs", request_body = NewJob,
    responses((status = 201, body = Job), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 413, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn create_job(
    State(app): AppState,
    JsonBody(body): JsonBody<NewJob>,
) -> Result<(StatusCode, Json<Job>), ApiError> {
    results::check_writable(&app.config.db)?;
    let (hosts, tokens) = match &body.hosts {
        Some(_) if body.platform.is_some() => {
            return Err(ApiError::unprocessable(
                "platform: a run on hosts runs the scenario's platform on each of them; \
                 leave platform out, or set it in the scenario",
            ))
        }
        Some(_) if body.platforms.is_some() => {
            return Err(ApiError::field(
                "platforms",
                "a run on hosts runs the scenario's platform on each of them; leave \
                 platforms out, or run on several platforms here without hosts",
            ))
        }
        Some(h) => fleet::check_hosts(h)?,
        None => (Vec::new(), Vec::new()),
    };
    let platforms = match &body.platforms {
        Some(_) if body.platform.is_some() => {
            return Err(ApiError::field(
                "platforms",
                "give either platform (one) or platforms (each in turn), not both",
            ))
        }
        Some(p) => validate::platforms(p)?,
        None => Vec::new(),
    };
    // A tune is written into its scenario's text first, and queues as that scenario.
    let (preset, scenario, name) = match &body.tune {
        Some(t) => {
            let text = tune::scenario(t, body.preset.as_deref(), body.scenario.as_deref())?;
            let base = body.preset.as_deref().unwrap_or(tune::DEFAULT_PRESET);
            let name = body
                .name
                .clone()
                .or_else(|| body.scenario.is_none().then(|| format!("{base}.toml")));
            (None, Some(text), name)
        }
        None => (
            body.preset.clone(),
            body.scenario.clone(),
            body.name.clone(),
        ),
    };
    let is_tune = body.tune.is_some();
    let spec = JobSpec {
        preset,
        scenario_name: scenario
            .as_ref()
            .map(|_| name.unwrap_or_else(|| "scenario.toml".into())),
        platform: body.platform.clone(),
        platforms,
        seed: body.seed,
        resume: None,
        hosts,
    };
    let mode = app.config.mode;
    let checked = spec.clone();
    let text = scenario.clone();
    blocking(move || {
        let input = match (&checked.preset, &checked.scenario_name, &text) {
            (Some(p), None, _) => Input::Preset(p),
            (None, Some(name), Some(text)) => Input::Scenario { name, text },
            _ => {
                return Err(ApiError::unprocessable(
                    "give either \"preset\" or \"scenario\" (TOML text, with \"name\")",
                ))
            }
        };
        let outcome = if checked.is_fleet() {
            validate::check_for_hosts(input, checked.seed, mode)
        } else if checked.is_cross() {
            validate::check_on_each(input, &checked.platforms, checked.seed, mode)
        } else {
            validate::check(input, checked.platform.as_deref(), checked.seed, mode)
        };
        outcome.map_err(|e| if is_tune { tune::at_field(e) } else { e })
    })
    .await?;
    let job = app.update_jobs(|q| {
        let job = q.push(spec);
        let written = match &scenario {
            Some(text) => write_scenario(&app.scenario_path(&job.id), text),
            None => Ok(()),
        }
        .and_then(|()| {
            if job.spec.is_fleet() {
                fleet::write_hosts_file(&app.hosts_path(&job.id), &job.spec.hosts, &tokens)
            } else {
                Ok(())
            }
        });
        let ids = vec![job.id.clone()];
        (written.map(|()| job), ids)
    });
    let job = job
        .and_then(|r| r)
        .map_err(|e| ApiError::internal(format!("saving the job: {e}")))?;
    app.wake.notify_one();
    Ok((StatusCode::CREATED, Json(job)))
}

fn write_scenario(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        crate::private::create_dir_all(dir)?;
    }
    crate::private::replace(path, &path.with_extension("toml.tmp"), text.as_bytes())
}

/// `GET /api/v1/jobs/{id}`.
#[utoipa::path(get, path = "/api/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "job id")),
    responses((status = 200, body = Job), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub async fn job(State(app): AppState, Path(id): Path<String>) -> Result<Json<Job>, ApiError> {
    let job = app.queue().view(&id);
    job.map(Json).ok_or_else(|| QueueError::Unknown(id).into())
}

/// `POST /api/v1/jobs/{id}/stop`: a running job's run stops gracefully; a queued job is
/// cancelled.
#[utoipa::path(post, path = "/api/v1/jobs/{id}/stop", tag = "jobs",
    params(("id" = String, Path, description = "job id")),
    responses((status = 202, body = Job), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub async fn stop(
    State(app): AppState,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Job>), ApiError> {
    use crate::queue::JobState;
    let signal = app.update_jobs(|q| {
        let state = match q.view(&id) {
            Some(j) => j.state,
            None => return (Err(QueueError::Unknown(id.clone())), Vec::new()),
        };
        let out = match state {
            JobState::Queued => q.cancel(&id).map(|()| false),
            JobState::Running => {
                q.get_mut(&id).expect("listed").state = JobState::Stopping;
                Ok(true)
            }
            JobState::Stopping => Ok(false),
            s => Err(QueueError::State {
                id: id.clone(),
                state: s.as_str(),
                what: "it has finished",
            }),
        };
        (out, vec![id.clone()])
    });
    let signal = signal.map_err(save_error)??;
    if signal {
        crate::runner::interrupt(&app);
    }
    app.announce_all();
    let job = app.queue().view(&id).ok_or(QueueError::Unknown(id))?;
    Ok((StatusCode::ACCEPTED, Json(job)))
}

/// A non-negative integer, also written as a whole float (`3.0` is the integer 3 in JSON
/// Schema).
/// A whole number from 0 to `i64::MAX`: the range of the `int64` the API document gives
/// such a field (utoipa's format for a `u64`), so a value it calls invalid is refused.
fn whole_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let n = serde_json::Number::deserialize(d)?;
    n.as_u64()
        .or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && (0.0..9.2e18).contains(f))
                .map(|f| f as u64)
        })
        .filter(|&v| i64::try_from(v).is_ok())
        .ok_or_else(|| {
            serde::de::Error::custom(format!("{n} is not a whole number from 0 to {}", i64::MAX))
        })
}

fn whole_number_opt<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Option::<serde_json::Value>::deserialize(d)?
        .filter(|v| !v.is_null())
        .map(|v| whole_number(v).map_err(serde::de::Error::custom))
        .transpose()
}

/// `POST /api/v1/jobs/{id}/move` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Move {
    /// 1-based place among the queued jobs.
    #[schema(minimum = 1)]
    #[serde(deserialize_with = "whole_number")]
    pub position: u64,
}

/// `POST /api/v1/jobs/{id}/move`: reorders the queue.
#[utoipa::path(post, path = "/api/v1/jobs/{id}/move", tag = "jobs", request_body = Move,
    params(("id" = String, Path, description = "job id")),
    responses((status = 200, body = JobList), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
pub async fn move_job(
    State(app): AppState,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<Move>,
) -> Result<Json<JobList>, ApiError> {
    if body.position == 0 {
        return Err(ApiError::unprocessable(
            "position is 1-based: 1 is the head of the queue",
        ));
    }
    app.update(|q| q.move_to(&id, body.position as usize))
        .map_err(save_error)??;
    app.announce_all();
    Ok(Json(JobList {
        jobs: app.queue().list(),
    }))
}

/// `DELETE /api/v1/jobs/{id}`: cancels a queued job.
#[utoipa::path(delete, path = "/api/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "job id")),
    responses((status = 204, description = "cancelled"), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub async fn cancel(State(app): AppState, Path(id): Path<String>) -> Result<StatusCode, ApiError> {
    let out = app.update_jobs(|q| (q.cancel(&id), vec![id.clone()]));
    out.map_err(save_error)??;
    app.announce_all();
    Ok(StatusCode::NO_CONTENT)
}
