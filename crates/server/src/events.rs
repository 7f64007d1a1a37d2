//! `GET /api/v1/events`: the live view as server-sent events. A new subscriber first gets
//! every current job (`event: job`), then each change as it happens: `event: job` when a job
//! changes state or progresses, `event: run` for every event of a run; a comment every 15 s
//! keeps proxies from closing the connection. A subscriber too slow to keep up misses
//! events rather than slowing the runs down; the next `job` event brings it up to date.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use tokio_stream::wrappers::{BroadcastStream, WatchStream};
use tokio_stream::{Stream, StreamExt};

use crate::api::AppState;
use crate::app::Broadcast;
use crate::error::ErrorBody;

fn event(b: &Broadcast) -> Option<Event> {
    let (name, data) = match b {
        Broadcast::Job(j) => ("job", serde_json::to_string(j).ok()?),
        Broadcast::Run(r) => ("run", serde_json::to_string(r).ok()?),
    };
    Some(Event::default().event(name).data(data))
}

/// `GET /api/v1/events`.
#[utoipa::path(get, path = "/api/v1/events", tag = "jobs",
    responses((status = 200, content_type = "text/event-stream", body = String,
        description = "`event: job` (data: a Job) and `event: run` (data: a RunEvent)"),
        (status = 401, body = ErrorBody)))]
pub async fn events(State(app): AppState) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    // Subscribe before the snapshot, so no change falls between them.
    let live = BroadcastStream::new(app.events.subscribe())
        .filter_map(|m| m.ok())
        .filter_map(|b| event(&b));
    let snapshot: Vec<Event> = app
        .queue()
        .list()
        .into_iter()
        .filter_map(|j| event(&Broadcast::Job(Box::new(j))))
        .collect();
    // The stream ends when the server shuts down (an open one would hold the shutdown up).
    let stop = WatchStream::new(app.stopping())
        .filter(|stopping| *stopping)
        .map(|_| None);
    let stream = tokio_stream::iter(snapshot)
        .chain(live)
        .map(Some)
        .merge(stop)
        .map_while(|e| e)
        .map(Ok);
    Sse::new(stream).keep_alive(
        KeepAlive::new()
            .interval(Duration::from_secs(15))
            .text("keepalive"),
    )
}
