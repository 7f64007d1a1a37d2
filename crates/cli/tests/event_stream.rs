//! The `isobench run --json-stream` events are a public interface (the server, the host agent
//! and the fleet coordinator read them from child processes, perhaps of another version):
//! a recorded stream must still decode into the declared types with nothing lost, and
//! `docs/events.md` must declare every event and field the stream carries.

use std::path::PathBuf;

use isobench_experiment::progress::{Event, EVENTS_SCHEMA};
use serde_json::Value;

mod common;
use common::{code, fake, text};

/// A stream `isobench run --json-stream` wrote on the fake platform (the builtin scenario),
/// kept as it was: re-record it only with a schema change.
const RECORDED: &str = include_str!("fixtures/json-stream.jsonl");

fn repo_file(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

/// Whether every field of `recorded` is in `now` with the same value (`now` may have more).
fn keeps(recorded: &Value, now: &Value) -> bool {
    match (recorded, now) {
        (Value::Object(r), Value::Object(n)) => {
            r.iter().all(|(k, v)| n.get(k).is_some_and(|w| keeps(v, w)))
        }
        (Value::Array(r), Value::Array(n)) => {
            r.len() == n.len() && r.iter().zip(n).all(|(v, w)| keeps(v, w))
        }
        _ => recorded == now,
    }
}

/// Decodes each line into an [`Event`] and checks that writing it again keeps every field.
fn decode(stream: &str) -> Vec<(Value, Event)> {
    stream
        .lines()
        .map(|line| {
            let event: Event = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("the declared types no longer read ({e}): {line}"));
            let raw: Value = serde_json::from_str(line).unwrap();
            let again = serde_json::to_value(&event).unwrap();
            assert!(
                keeps(&raw, &again),
                "lost or changed a field:\n{raw}\n{again}"
            );
            (raw, event)
        })
        .collect()
}

#[test]
fn a_recorded_stream_decodes_into_the_declared_events() {
    let events = decode(RECORDED);
    assert!(matches!(events.first(), Some((_, Event::Planned { .. }))));
    assert!(matches!(events.last(), Some((_, Event::Finished { .. }))));
    assert_eq!(
        events[0].0["schema"], EVENTS_SCHEMA,
        "the recording's schema"
    );
}

#[test]
fn the_stream_of_this_binary_decodes_and_says_its_schema() {
    let dir = tempfile::tempdir().unwrap();
    let out = fake()
        .args(["run", "--json-stream", "--db"])
        .arg(dir.path().join("r.db"))
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let events = decode(&text(&out.stdout));
    let Some((_, Event::Planned { schema, .. })) = events.first() else {
        panic!("planned is not first")
    };
    assert_eq!(*schema, EVENTS_SCHEMA);
}

/// `docs/events.md` by event: the text under each `` ### `name` `` heading.
fn doc_sections() -> Vec<(String, String)> {
    let doc = std::fs::read_to_string(repo_file("docs/events.md")).unwrap();
    doc.split("\n### `")
        .skip(1)
        .map(|s| {
            let (name, body) = s.split_once('`').unwrap();
            let body = body.split("\n## ").next().unwrap();
            (name.to_string(), body.to_string())
        })
        .collect()
}

#[test]
fn docs_events_md_declares_every_event_and_recorded_field() {
    let sections = doc_sections();
    let named: Vec<&str> = sections.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        named,
        Event::NAMES,
        "docs/events.md: one section per event, in order"
    );
    let doc = std::fs::read_to_string(repo_file("docs/events.md")).unwrap();
    assert!(
        doc.contains(&format!("Current schema: **{EVENTS_SCHEMA}**")),
        "docs/events.md: the schema version"
    );
    for (raw, event) in decode(RECORDED) {
        let body = &sections.iter().find(|(n, _)| n == event.name()).unwrap().1;
        for field in raw.as_object().unwrap().keys().filter(|k| *k != "event") {
            assert!(
                body.contains(&format!("`{field}`")),
                "docs/events.md, `{}`: field `{field}` is not declared",
                event.name()
            );
        }
    }
}
