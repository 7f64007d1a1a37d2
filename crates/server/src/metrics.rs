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
    // The headline of each finished run (`Results::headline`): every resource, and the worst.
    let per_resource = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    let worst = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    for r in runs {
        let Some(h) = &r.headline else { continue };
        let labels = |resource: &str, verdict: &str| -> Labels {
            vec![
                ("run".into(), r.id.clone()),
                ("scenario".into(), r.scenario.clone()),
                ("platform".into(), r.platform.clone()),
                ("resource".into(), resource.into()),
                ("verdict".into(), verdict.into()),
            ]
        };
        for x in &h.resources {
            if let Some(v) = x.loss_pct {
                per_resource
                    .get_or_create(&labels(&x.resource, &x.verdict))
                    .set(v);
            }
        }
        if let (Some(v), Some(w)) = (h.value, h.resources.first()) {
            worst.get_or_create(&labels(&w.resource, &w.verdict)).set(v);
        }
    }
    reg.register(
        "isobench_run_victim_degradation_percent",
        "Headline of each finished run per resource (victim probe class): its worst \
         significant victim degradation, 0 when none is significant (verdict \
         no_significant_loss), 100 when a victim stopped answering (verdict dnr); verdict \
         flagged_loss marks an untrustworthy figure",
        per_resource,
    );
    reg.register(
        "isobench_run_worst_victim_degradation_percent",
        "Headline of each finished run: its worst resource's significant victim degradation \
         (100 for a DNR); absent when no resource has one",
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Headline, RunView};
    use isobench_results::{HeadlineCell, ResourceHeadline, Verdict, HEADLINE_RULE};

    fn resource(name: &str, verdict: Verdict, estimate: f64) -> ResourceHeadline {
        ResourceHeadline {
            resource: name.into(),
            verdict,
            dnr_cell: None,
            cell: Some(HeadlineCell {
                tenant: "victim".into(),
                probe: "p".into(),
                metric: "m".into(),
                condition: "c@100".into(),
                estimate: Some(estimate),
                lower: Some(estimate - 1.0),
                upper: Some(estimate + 1.0),
                level: Some(0.95),
                estimator: None,
                method: None,
                test: Some("cycle_t".into()),
                p_value: Some(0.0001),
                p_adjusted: Some(0.001),
                significant: verdict == Verdict::Loss,
                flags: Vec::new(),
                dnr: None,
                disturbed: 0,
            }),
            cells: 4,
            significant_losses: u32::from(verdict == Verdict::Loss),
            flagged: 0,
            dnr: 0,
        }
    }

    /// Defect: `/metrics` gave a run whose direct-I/O reads lost 96.9% an "isolation score"
    /// of 98.3, from the first victim metric (cpu-int) alone.
    #[test]
    fn metrics_give_the_headline_of_every_resource() {
        let h = isobench_results::Headline {
            resources: vec![
                resource("disk", Verdict::Loss, 96.94),
                resource("memory", Verdict::Loss, 26.5),
                resource("cpu", Verdict::NoSignificantLoss, 1.7),
            ],
            rule: HEADLINE_RULE.into(),
            correction: "Holm".into(),
        };
        let view = Headline::of(&h);
        assert_eq!(view.value, Some(96.9));
        assert_eq!(view.resource.as_deref(), Some("disk"));
        assert_eq!(view.text, h.summary());
        let run = RunView {
            id: "r1".into(),
            scenario: "quick".into(),
            kind: "matrix".into(),
            status: "complete".into(),
            platform: "cgroup".into(),
            host: "h".into(),
            started_at: String::new(),
            ended_at: None,
            duration_s: None,
            trials: 1,
            trials_ok: 1,
            headline: Some(view),
            job: None,
            resumable: false,
        };
        let mut text = String::new();
        encode(&mut text, &registry(&[], None, &[run])).unwrap();
        let labels = |r: &str, v: &str| {
            format!(
                "{{run=\"r1\",scenario=\"quick\",platform=\"cgroup\",resource=\"{r}\",verdict=\"{v}\"}}"
            )
        };
        for line in [
            format!(
                "isobench_run_victim_degradation_percent{} 96.9",
                labels("disk", "loss")
            ),
            format!(
                "isobench_run_victim_degradation_percent{} 26.5",
                labels("memory", "loss")
            ),
            format!(
                "isobench_run_victim_degradation_percent{} 0.0",
                labels("cpu", "no_significant_loss")
            ),
            format!(
                "isobench_run_worst_victim_degradation_percent{} 96.9",
                labels("disk", "loss")
            ),
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\nnot in\n{text}");
        }
        assert!(!text.contains("isolation_score"), "{text}");
    }
}
