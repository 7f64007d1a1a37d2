//! `GET /metrics`: the queue and the runs for Prometheus, in OpenMetrics text. Built anew
//! for each scrape from the queue and the store, so it never disagrees with the API.

use std::sync::atomic::AtomicU64;

use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

use crate::api::{blocking, AppState};
use crate::error::{ApiError, ErrorBody};
use crate::queue::JobState;
use crate::results::RunView;

type Labels = Vec<(String, String)>;

/// The registry of one scrape.
fn registry(jobs: &[JobState], live: Option<(u64, u64)>, runs: &[RunView]) -> Registry {
    let mut reg = Registry::default();
    let queue = Family::<Labels, Gauge>::default();
    for state in JobState::ALL {
        let n = jobs.iter().filter(|s| **s == state).count();
        queue
            .get_or_create(&vec![("state".into(), state.as_str().into())])
            .set(n as i64);
    }
    reg.register("isobench_queue_jobs", "Jobs by state", queue);
    let (done, planned) = live.unwrap_or((0, 0));
    let g = Gauge::<i64>::default();
    g.set(done as i64);
    reg.register("isobench_run_trials_done", "Trials done by the live run", g);
    let g = Gauge::<i64>::default();
    g.set(planned as i64);
    reg.register(
        "isobench_run_trials_planned",
        "Trials planned by the live run",
        g,
    );
    // One metric per meaning: a score and a degradation are not the same quantity.
    let score = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    let worst = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    for r in runs {
        if let Some(h) = &r.headline {
            let labels = vec![
                ("run".into(), r.id.clone()),
                ("scenario".into(), r.scenario.clone()),
                ("platform".into(), r.platform.clone()),
            ];
            let family = if h.unit.is_empty() { &score } else { &worst };
            family.get_or_create(&labels).set(h.value);
        }
    }
    reg.register(
        "isobench_run_isolation_score",
        "Isolation score of each finished run (100 minus the well-behaved tenants' mean \
         degradation)",
        score,
    );
    reg.register(
        "isobench_run_worst_degradation_percent",
        "Worst victim degradation of each finished run without an isolation score, percent",
        worst,
    );
    let info = Info::new(vec![(
        "version".to_string(),
        env!("CARGO_PKG_VERSION").to_string(),
    )]);
    reg.register("isobench_server", "The server", info);
    reg
}

/// `GET /metrics`.
#[utoipa::path(get, path = "/metrics", tag = "metrics",
    responses((status = 200, content_type = "application/openmetrics-text", body = String),
        (status = 401, body = ErrorBody)))]
pub async fn metrics(State(app): AppState) -> Result<Response, ApiError> {
    let (jobs, live) = {
        let q = app.queue();
        let jobs: Vec<JobState> = q.all().iter().map(|j| j.state).collect();
        let live = q
            .active()
            .and_then(|j| j.progress.as_ref())
            .map(|p| (p.n, p.of));
        (jobs, live)
    };
    let runs = blocking(move || app.runs.list(&app.config.db, &|_| (None, false))).await?;
    let mut text = String::new();
    encode(&mut text, &registry(&jobs, live, &runs)).map_err(ApiError::internal)?;
    let mut resp = text.into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    Ok(resp)
}
