//! The `isobench run --json-stream` events are a public interface (the server, the host agent
//! and the fleet coordinator read them from child processes, perhaps of another version):
//! a recorded stream must still decode into the declared types with nothing lost, and
//! `docs/events.md` must declare every event and field the stream carries. A run on several
//! platforms (`--platform A,B`) writes each platform's run stream after a `CrossEvent` of
//! its own, and a fleet run (`--hosts FILE`) writes its `FleetEvent`s; both are checked the
//! same way.

use std::path::PathBuf;

use isobench_experiment::progress::{Event, EVENTS_SCHEMA};
use isobench_fleet::cross::CrossEvent;
use isobench_fleet::FleetEvent;
use serde::Deserialize;
use serde_json::Value;

mod common;
use common::{agent, code, fake, fleet_token, text};

/// A stream `isobench run --json-stream` wrote on the fake platform (the builtin scenario),
/// kept as it was: re-record it only with a schema change.
const RECORDED: &str = include_str!("fixtures/json-stream.jsonl");

/// The stream of `isobench run --platform host,cgroup --json-stream` on the fake platform
/// (the builtin scenario), kept as it was.
const RECORDED_CROSS: &str = include_str!("fixtures/json-stream-cross.jsonl");

/// The stream of `isobench run --hosts FILE --json-stream` against two host agents on the
/// fake platform (the builtin scenario), kept as it was.
const RECORDED_FLEET: &str = include_str!("fixtures/json-stream-fleet.jsonl");

/// One line of a stream: an event of a run, of a run on several platforms, or of a fleet run.
#[derive(Debug, Deserialize, serde::Serialize)]
#[serde(untagged)]
enum Line {
    Run(Event),
    Cross(CrossEvent),
    Fleet(FleetEvent),
}

impl Line {
    fn name(&self) -> &'static str {
        match self {
            Line::Run(e) => e.name(),
            Line::Cross(e) => e.name(),
            Line::Fleet(e) => e.name(),
        }
    }
}

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
    decode_lines(stream)
        .into_iter()
        .map(|(raw, line)| match line {
            Line::Run(e) => (raw, e),
            Line::Cross(e) => panic!("a run on one platform wrote {e:?}"),
            Line::Fleet(e) => panic!("a run on one platform wrote {e:?}"),
        })
        .collect()
}

/// Decodes each line into a [`Line`] and checks that writing it again keeps every field.
fn decode_lines(stream: &str) -> Vec<(Value, Line)> {
    stream
        .lines()
        .map(|line| {
            let event: Line = serde_json::from_str(line)
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
fn a_recorded_stream_on_two_platforms_is_each_platforms_run_between_its_events() {
    let lines = decode_lines(RECORDED_CROSS);
    let names: Vec<&str> = lines
        .iter()
        .map(|(_, l)| l.name())
        .filter(|n| {
            [
                "platform_started",
                "planned",
                "finished",
                "platforms_linked",
            ]
            .contains(n)
        })
        .collect();
    assert_eq!(
        names,
        [
            "platform_started",
            "planned",
            "finished",
            "platform_started",
            "planned",
            "finished",
            "platforms_linked"
        ]
    );
    let Some((_, Line::Cross(CrossEvent::Linked { runs }))) = lines.last() else {
        panic!("platforms_linked is not last")
    };
    let planned: Vec<&Value> = lines
        .iter()
        .filter(|(_, l)| l.name() == "planned")
        .map(|(raw, _)| &raw["run"])
        .collect();
    let linked: Vec<&str> = runs.iter().map(|r| r.run.as_str()).collect();
    assert_eq!(planned, linked, "the linked runs are the planned ones");
}

#[test]
fn the_stream_on_two_platforms_of_this_binary_decodes() {
    let dir = tempfile::tempdir().unwrap();
    let out = fake()
        .args(["run", "--platform", "host,cgroup", "--json-stream", "--db"])
        .arg(dir.path().join("r.db"))
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines = decode_lines(&stdout);
    assert!(matches!(
        lines.first(),
        Some((_, Line::Cross(CrossEvent::Platform { n: 1, of: 2, .. })))
    ));
    assert!(matches!(
        lines.last(),
        Some((_, Line::Cross(CrossEvent::Linked { .. })))
    ));
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

/// Checks a fleet run's stream: fleet events only (the members' runs are told in
/// `member_progress`), `fleet_started` first, each member's planned run in its progress and
/// imported.
fn check_fleet_stream(stream: &str) {
    let lines = decode_lines(stream);
    let fleet: Vec<&FleetEvent> = lines
        .iter()
        .map(|(_, l)| match l {
            Line::Fleet(e) => e,
            other => panic!("a fleet run wrote {other:?}"),
        })
        .collect();
    let Some(FleetEvent::Started { members, .. }) = fleet.first() else {
        panic!("fleet_started is not first")
    };
    assert_eq!(members, &["h0", "h1"]);
    for m in members {
        let planned = fleet.iter().find_map(|e| match e {
            FleetEvent::Progress(p) if &p.member == m && p.run.is_some() => p.run.clone(),
            _ => None,
        });
        let imported = fleet.iter().find_map(|e| match e {
            FleetEvent::Imported { member, done } if member == m => Some(done.run_id.clone()),
            _ => None,
        });
        assert!(planned.is_some(), "{m}: no planned run in {stream}");
        assert_eq!(
            planned, imported,
            "{m}: the run imported is the one planned"
        );
    }
}

#[test]
fn a_recorded_fleet_stream_decodes_into_the_declared_events() {
    check_fleet_stream(RECORDED_FLEET);
}

#[test]
fn the_fleet_stream_of_this_binary_decodes() {
    let dir = tempfile::tempdir().unwrap();
    fleet_token(dir.path());
    let mut agents = Vec::new();
    let mut hosts = String::from("token_file = \"token\"\n");
    for n in 0..2 {
        let (child, addr) = agent(dir.path(), n);
        agents.push(child);
        hosts.push_str(&format!(
            "\n[[host]]\nname = \"h{n}\"\naddress = \"{addr}\"\ntype = \"t\"\n"
        ));
    }
    std::fs::write(dir.path().join("hosts.toml"), hosts).unwrap();
    let out = fake()
        .current_dir(dir.path())
        .args([
            "run",
            "--hosts",
            "hosts.toml",
            "--seed",
            "1",
            "--db",
            "coord.db",
            "--json-stream",
        ])
        .output()
        .unwrap();
    for mut a in agents {
        let _ = a.kill();
        let _ = a.wait();
    }
    let stdout = text(&out.stdout);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    if let Ok(path) = std::env::var("ISOBENCH_RECORD_FLEET") {
        std::fs::write(path, &stdout).unwrap();
    }
    check_fleet_stream(&stdout);
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
    let declared: Vec<&str> = Event::NAMES
        .iter()
        .chain(CrossEvent::NAMES)
        .chain(FleetEvent::NAMES)
        .copied()
        .collect();
    assert_eq!(
        named, declared,
        "docs/events.md: one section per event, in order (a run's, a run on several \
         platforms', a fleet run's)"
    );
    let doc = std::fs::read_to_string(repo_file("docs/events.md")).unwrap();
    assert!(
        doc.contains(&format!("Current schema: **{EVENTS_SCHEMA}**")),
        "docs/events.md: the schema version"
    );
    let recorded = decode(RECORDED)
        .into_iter()
        .map(|(raw, e)| (raw, Line::Run(e)));
    let others = decode_lines(RECORDED_CROSS)
        .into_iter()
        .chain(decode_lines(RECORDED_FLEET));
    for (raw, event) in recorded.chain(others) {
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
