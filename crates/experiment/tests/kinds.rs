//! Each experiment kind end to end on the fake platform and the fake clock: the plan it
//! makes of its `[KIND]` table, the run, and the sections of its results, pinned as text.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use isobench_experiment::analysis::{analyze, Results};
use isobench_experiment::fake::{FakeBackend, FakeScript};
use isobench_experiment::orchestrator::{create_run, Engine, EngineOptions};
use isobench_experiment::progress::Transcript;
use isobench_experiment::{HostView, Plan, PlanOptions, Scenario, Source};
use isobench_results::Section;
use isobench_store::{RunStatus, Store};

/// Tenants, timing and one probe of every kind's scenario here; the kind adds the rest.
const COMMON: &str = r#"
seed = 11

[trial]
duration = "200ms"
warmup = "100ms"
solo = "0s"
baseline_every = 1

[repetitions]
min = 3
max = 4
ci_half_width = 2.0

[[tenant]]
name = "victim"
role = "victim"
limits = { memory = "512M", pids = 128 }

[[tenant]]
name = "aggressor"
role = "aggressor"
limits = { memory = "512M", pids = 64 }

[[probe]]
name = "cpu-int"
"#;

fn plan_of(text: &str) -> Plan {
    let sc = Scenario::parse(Source::new("kind.toml", text)).unwrap_or_else(|e| panic!("{e}"));
    let host = HostView::synthetic(2, 8 << 30, true);
    Plan::resolve(&sc, &host, &PlanOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn run(text: &str) -> Results {
    let plan = plan_of(text);
    let mut store = Store::open_in_memory().unwrap();
    let (mut backend, clock) = FakeBackend::new(plan.seed, FakeScript::default());
    let run = create_run(&mut store, &plan, text, "fake", serde_json::json!({}), 0).unwrap();
    let mut t = Transcript::default();
    let out = Engine::new(
        &plan,
        run.clone(),
        &mut store,
        &mut backend,
        &clock,
        &mut t,
        Arc::new(AtomicBool::new(false)),
        EngineOptions::default(),
    )
    .execute()
    .unwrap();
    assert_eq!(out.status, RunStatus::Complete, "{}", out.reason);
    analyze(&store.load_run(&run).unwrap())
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
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:>w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    for n in &s.notes {
        out.push_str(&format!("  {n}\n"));
    }
    out
}

#[test]
fn sweep_runs_the_swept_setting_and_draws_its_curve() {
    let scenario = format!(
        "kind = \"sweep\"\n{COMMON}\n[[stressor]]\nname = \"cpu\"\n\n[[stressor]]\nname = \
         \"membw\"\n\n[sweep]\nstressor = \"cpu\"\nparam = \"intensity\"\nvalues = [25, 50, \
         100]\n"
    );
    let plan = plan_of(&scenario);
    let ids: Vec<&str> = plan.conditions.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["cpu@25", "cpu@50", "cpu@100"], "membw is not swept");
    let r = run(&scenario);
    assert_eq!(r.kind.as_str(), "sweep");
    assert_eq!(r.sections.len(), 1);
    insta::assert_snapshot!("sweep_curve", text(&r.sections[0]));
}

#[test]
fn sweep_of_a_parameter_names_each_point_after_it() {
    let scenario = format!(
        "kind = \"sweep\"\n{COMMON}\n[[stressor]]\nname = \"cpu\"\n\n[sweep]\nstressor = \
         \"cpu\"\nparam = \"threads\"\nvalues = [1, 2]\n"
    );
    let plan = plan_of(&scenario);
    let ids: Vec<&str> = plan.conditions.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["cpu:threads=1", "cpu:threads=2"]);
    let threads: Vec<String> = plan
        .conditions
        .iter()
        .map(|c| c.params.0["threads"].to_string())
        .collect();
    assert_eq!(threads, ["1", "2"]);
}

#[test]
fn sensitivity_finds_the_tolerated_intensity_of_each_stressor() {
    let scenario = format!(
        "kind = \"sensitivity\"\n{COMMON}\n[[stressor]]\nname = \"cpu\"\n\n[[stressor]]\nname \
         = \"membw\"\n\n[sensitivity]\nintensities = [10, 25, 50, 100]\nlimit = 5\n"
    );
    let r = run(&scenario);
    let ids: Vec<&str> = r.sections.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["tolerated", "curve-cpu", "curve-membw"]);
    // The fake slows a CPU probe by 30% x intensity beside the cpu stressor: 3% at 10,
    // 7.5% at 25, so 10 is the highest intensity under 5%; beside membw, by 8% x intensity
    // at most... 0.5% x intensity (another class), never 5%.
    let tol = text(&r.sections[0]);
    assert!(tol.contains("cpu-int ops_per_sec"), "{tol}");
    insta::assert_snapshot!("sensitivity_tolerated", tol);
    insta::assert_snapshot!("sensitivity_curve_cpu", text(&r.sections[1]));
}

#[test]
fn pairwise_reports_both_sides_of_every_pair() {
    let scenario = format!(
        "kind = \"pairwise\"\n{}\n[[probe]]\nname = \"disk-io\"\nlabel = \"disk\"\n\n\
         [[stressor]]\nname = \"cpu\"\n\n[[stressor]]\nname = \"disk\"\n\n[pairwise]\n\
         workloads = [\"cpu\", \"disk\"]\n",
        COMMON.replace("solo = \"0s\"", "solo = \"200ms\"").replace(
            "name = \"cpu-int\"",
            "name = \"cpu-int\"\nlabel = \"cpu\"\nmetrics = [\"ops_per_sec\"]"
        )
    );
    let r = run(&scenario);
    let pairs = r.sections.iter().find(|s| s.id == "pairs").expect("pairs");
    assert_eq!(pairs.rows.len(), 4, "cpu and disk on each side");
    // Same resource, the fake slows each side by about 30%: both take longer than alone.
    let row = &pairs.rows[0];
    assert_eq!(row[0].text(), "cpu");
    assert_eq!(row[1].text(), "cpu");
    assert!(row[2].as_f64().unwrap() > 1.1, "{}", row[2].text());
    insta::assert_snapshot!("pairwise_pairs", text(pairs));
    let bad = scenario.replace("solo = \"200ms\"", "solo = \"0s\"");
    let e = Scenario::parse(Source::new("kind.toml", bad))
        .expect_err("pairwise without solo")
        .to_string();
    assert!(e.contains("needs its rate alone"), "{e}");
}

#[test]
fn kind_settings_are_checked_where_they_are_written() {
    let bad = format!(
        "kind = \"sweep\"\n{COMMON}\n[[stressor]]\nname = \"cpu\"\n\n[sweep]\nstressor = \
         \"cpu\"\nparam = \"thread\"\nvalues = [1, 2]\n"
    );
    let e = Scenario::parse(Source::new("kind.toml", bad))
        .expect_err("unknown parameter")
        .to_string();
    insta::assert_snapshot!("sweep_unknown_param", e);
    let missing = format!("kind = \"sweep\"\n{COMMON}\n[[stressor]]\nname = \"cpu\"\n");
    let e = Scenario::parse(Source::new("kind.toml", missing))
        .expect_err("no [sweep]")
        .to_string();
    assert!(e.contains("needs a [sweep] table"), "{e}");
    let unsorted = format!(
        "kind = \"sensitivity\"\n{COMMON}\n[[stressor]]\nname = \"cpu\"\n\n[sensitivity]\n\
         intensities = [50, 10]\nlimits = 3\n"
    );
    let e = Scenario::parse(Source::new("kind.toml", unsorted))
        .expect_err("unsorted, and a misspelt key")
        .to_string();
    insta::assert_snapshot!("sensitivity_bad_table", e);
}

#[test]
fn every_preset_parses_and_says_what_it_reproduces_and_how_long_it_takes() {
    use isobench_experiment::scenario::{preset_header, PRESETS};
    for (name, what, text) in PRESETS {
        let sc = Scenario::parse(Source::new(format!("<preset:{name}>"), *text))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(&sc.name, name);
        assert!(!what.is_empty());
        let (reproduces, takes) = preset_header(text);
        assert!(
            reproduces.is_some_and(|r| r.len() > 20),
            "{name}: no `# reproduces:`"
        );
        assert!(
            takes.is_some_and(|t| t.contains("minute")),
            "{name}: no `# takes:`"
        );
    }
}
