//! The `timeline` kind end to end on the fake platform and the fake clock: its `[timeline]`
//! table checked where it is written, the scheduled trial stored with its switches and CPU
//! series, and the sections of its results pinned as text.

use isobench_experiment::analysis::{analyze, Results};
use isobench_experiment::fake::{FakeBackend, FakeScript};
use isobench_experiment::orchestrator::{create_run, Engine, EngineIo, EngineOptions};
use isobench_experiment::progress::Transcript;
use isobench_experiment::{HostView, Plan, PlanOptions, Scenario, Source};
use isobench_results::Section;
use isobench_store::{RunStatus, Store};

/// Paper 003's stacking schedule, shortened: hogs start in two tenants 10 s apart and stop in
/// the same order; the victim's cpu-int measures in 1-s windows.
const SCENARIO: &str = r#"
name = "tl"
kind = "timeline"
seed = 3

[trial]
duration = "200ms"
warmup = "100ms"
timeout = "10s"
max_retries = 0

[repetitions]
min = 1
max = 1

[timeline]
window = "1s"
length = "50s"

[[timeline.schedule]]
tenant = "dom2"
stressor = "cpu"
start = "10s"
stop = "30s"

[[timeline.schedule]]
tenant = "dom3"
stressor = "cpu"
intensity = 50
start = "20s"
stop = "40s"

[[tenant]]
name = "dom1"
role = "victim"
limits = { memory = "512M", pids = 128 }

[[tenant]]
name = "dom2"
role = "aggressor"
limits = { memory = "256M", pids = 64 }

[[tenant]]
name = "dom3"
role = "aggressor"
limits = { memory = "256M", pids = 64 }

[[probe]]
name = "cpu-int"
metrics = ["ops_per_sec"]

[[stressor]]
name = "cpu"
"#;

fn plan_of(text: &str) -> Plan {
    let sc = Scenario::parse(Source::new("tl.toml", text)).unwrap_or_else(|e| panic!("{e}"));
    let host = HostView::synthetic(2, 8 << 30, true);
    Plan::resolve(&sc, &host, &PlanOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn run(text: &str) -> (Results, isobench_store::LoadedRun, Vec<String>) {
    let plan = plan_of(text);
    let mut store = Store::open_in_memory().unwrap();
    let (mut backend, clock) = FakeBackend::new(plan.seed, FakeScript::default());
    let run = create_run(&mut store, &plan, text, "fake", serde_json::json!({}), 0).unwrap();
    let mut t = Transcript::default();
    let out = Engine::new(
        &plan,
        run.clone(),
        EngineIo::new(&mut store, &mut backend, &clock, &mut t),
        EngineOptions::default(),
    )
    .execute()
    .unwrap();
    assert_eq!(out.status, RunStatus::Complete, "{}", out.reason);
    let loaded = store.load_run(&run).unwrap();
    (analyze(&loaded), loaded, backend.log())
}

/// A section as aligned text: title, headers, rows, notes.
fn text(s: &Section) -> String {
    let mut rows = vec![s.headers()];
    rows.extend(s.text_rows());
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = format!("{} [{}]\n", s.title, s.id);
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:>w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    for n in &s.notes {
        out.push_str(&format!("  {n}\n"));
    }
    out
}

#[test]
fn a_timeline_runs_its_schedule_in_one_trial_and_reports_each_switch() {
    let (r, loaded, log) = run(SCENARIO);
    // One scheduled trial, stored with its timeline: four switches, three CPU series.
    let with_tl: Vec<_> = loaded
        .trials
        .iter()
        .filter(|t| t.timeline.is_some())
        .collect();
    assert_eq!(with_tl.len(), 1, "{:?}", loaded.trials);
    let tl = with_tl[0].timeline.as_ref().unwrap();
    assert_eq!(tl.switches.len(), 4);
    assert_eq!(tl.cpu.len(), 3);
    assert!(log.contains(&"start dom3 cpu@50".to_string()), "{log:?}");
    let ids: Vec<&str> = r.sections.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["episodes", "phases", "series"]);
    // The fake slows cpu-int by a factor 1 + 0.3 x intensity: both starts degrade it.
    let episodes = &r.sections[0];
    for row in &episodes.rows {
        assert!(row[7].as_f64().is_some(), "a time to degrade: {row:?}");
    }
    insta::assert_snapshot!("timeline_episodes", text(&r.sections[0]));
    insta::assert_snapshot!("timeline_phases", text(&r.sections[1]));
    insta::assert_snapshot!("timeline_series", text(&r.sections[2]));
}

#[test]
fn timeline_settings_are_checked_where_they_are_written() {
    let bad = SCENARIO.replace("stressor = \"cpu\"\nintensity = 50", "stressor = \"cache\"");
    let e = Scenario::parse(Source::new("tl.toml", bad)).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("timeline.schedule[1].stressor"), "{text}");
    assert!(text.contains("there is no [[stressor]] `cache`"), "{text}");
    let unknown = SCENARIO.replace("window = \"1s\"", "windw = \"1s\"");
    let e = Scenario::parse(Source::new("tl.toml", unknown)).unwrap_err();
    assert!(e.to_string().contains("did you mean `window`"), "{e}");
    let missing = SCENARIO.replace("[timeline]", "[timelinx]");
    assert!(Scenario::parse(Source::new("tl.toml", missing)).is_err());
}
