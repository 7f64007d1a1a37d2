//! The comparison of deterministic runs on the fake platform, pinned by snapshots: a
//! reference, a run whose CPU hog hurts twice as much, and a run of another scenario that
//! shares only part of the first's cells.

use isobench_experiment::analysis::analyze;
use isobench_experiment::fake::{default_effect, run_fake, FakeScript};
use isobench_experiment::progress::NoProgress;
use isobench_experiment::{HostView, Plan, PlanOptions, Results, Scenario, Source};
use isobench_report::compare::{
    comparison_csv, comparison_json, comparison_markdown, render_comparison,
};
use isobench_report::Style;
use isobench_results::compare::RunComparison;
use isobench_store::Store;

const SCENARIO: &str = r#"
name = "compare-test"
kind = "matrix"
seed = 3

[trial]
duration = "200ms"
warmup = "100ms"
solo = "200ms"

[repetitions]
min = 3
max = 4

[[tenant]]
name = "victim"
role = "victim"
limits = { memory = "512M" }

[[tenant]]
name = "aggressor"
role = "aggressor"
limits = { memory = "512M", pids = 64 }

[[probe]]
name = "cpu-int"
metrics = ["ops_per_sec"]

[[probe]]
name = "syscall"
metrics = ["getppid_ns"]

[[stressor]]
name = "cpu"

[[stressor]]
name = "cache"
"#;

fn results(scenario: &str, script: FakeScript) -> Results {
    let sc = Scenario::parse(Source::new("compare-test.toml", scenario)).unwrap();
    let plan = Plan::resolve(
        &sc,
        &HostView::synthetic(2, 8 << 30, true),
        &PlanOptions::default(),
    )
    .unwrap();
    let mut store = Store::open_in_memory().unwrap();
    let out = run_fake(&mut store, &plan, scenario, script, &mut NoProgress).unwrap();
    analyze(&store.load_run(&out.run).unwrap())
}

/// The reference, the harsher hog, and another scenario: membw instead of cache, a
/// longer trial, and the victim called `web`.
fn runs() -> Vec<Results> {
    let other = SCENARIO
        .replace("name = \"compare-test\"", "name = \"compare-other\"")
        .replace("name = \"cache\"", "name = \"membw\"")
        .replace("duration = \"200ms\"", "duration = \"300ms\"")
        .replace("name = \"victim\"", "name = \"web\"");
    vec![
        results(SCENARIO, FakeScript::default()),
        results(
            SCENARIO,
            FakeScript {
                // The CPU hog hurts twice as much as in the default model.
                effect: |probe, stressor, intensity| {
                    let e = default_effect(probe, stressor, intensity);
                    if stressor.as_str() == "cpu" {
                        2.0 * e
                    } else {
                        e
                    }
                },
                ..FakeScript::default()
            },
        ),
        results(&other, FakeScript::default()),
    ]
}

/// Run ids carry random bits: replace them by their labels.
fn normalize(text: &str, runs: &[Results]) -> String {
    let mut s = text.to_string();
    for (r, l) in runs.iter().zip(["A", "B", "C"]) {
        s = s.replace(&r.run.id, &format!("RUN-{l}"));
    }
    s
}

#[test]
fn two_runs_in_the_terminal() {
    let runs = runs();
    let c = RunComparison::new(&runs[..2]);
    let text = render_comparison(&c, Style::default());
    insta::assert_snapshot!(normalize(&text, &runs));
    // The hog's victims differ, the cache thrasher's do not.
    let cpu = c
        .cells
        .iter()
        .find(|x| x.probe == "cpu-int" && x.condition == "cpu@100")
        .unwrap();
    let d = cpu.versus[0].difference.as_ref().unwrap();
    assert!(d.significant && d.estimate > 5.0, "{d:?}");
    let cache = c
        .cells
        .iter()
        .find(|x| x.probe == "cpu-int" && x.condition == "cache@100")
        .unwrap();
    assert!(!cache.versus[0].difference.as_ref().unwrap().significant);
}

#[test]
fn a_run_of_another_scenario_in_the_terminal() {
    let runs = runs();
    let c = RunComparison::new(&[runs[0].clone(), runs[2].clone()]);
    let text = render_comparison(&c, Style::default());
    insta::assert_snapshot!(normalize(&text, &runs));
    assert!(text.contains("condition cache@100"), "{text}");
    assert!(text.contains("condition membw@100"), "{text}");
}

#[test]
fn three_runs_as_markdown_csv_and_json() {
    let runs = runs();
    let c = RunComparison::new(&runs);
    insta::assert_snapshot!(normalize(&comparison_markdown(&c), &runs));
    let csv = String::from_utf8(comparison_csv(&c)).unwrap();
    let header = csv.lines().next().unwrap();
    assert!(
        header.starts_with("role,tenant,probe,metric,unit,condition,A [%],A [%] lower"),
        "{header}"
    );
    assert!(
        header.contains("C-A p adj,C-A significant,C-A no test"),
        "{header}"
    );
    assert_eq!(csv.lines().count(), 1 + c.cells.len());
    let json: serde_json::Value = serde_json::from_slice(&comparison_json(&c)).unwrap();
    assert_eq!(json["schema_version"], 1);
    assert_eq!(json["runs"].as_array().unwrap().len(), 3);
    assert_eq!(json["correction"], "holm");
}

/// Defect: `compare` marked an untrustworthy figure `!` where `show` marked it `?`.
#[test]
fn untrustworthy_mark_is_the_same_in_show_and_compare() {
    let mut runs = runs();
    runs.truncate(2);
    let i = runs[1]
        .cells
        .iter()
        .position(|c| c.probe == "syscall" && c.condition == "cache@100")
        .unwrap();
    runs[1].cells[i].comparison.as_mut().unwrap().trustworthy = false;
    let show = isobench_report::render(&runs[1], Style::default());
    let row = show.lines().find(|l| l.starts_with("syscall")).unwrap();
    assert!(row.ends_with('?'), "{row}");
    let c = RunComparison::new(&runs);
    let text = render_comparison(&c, Style::default());
    let row = text
        .lines()
        .find(|l| l.starts_with("syscall getppid_ns @ cache@100"))
        .unwrap_or_else(|| panic!("{text}"));
    let b = row.split_whitespace().nth(5).unwrap();
    assert!(b.ends_with(isobench_results::UNTRUSTWORTHY_MARK), "{row}");
    assert!(!text.contains('!'), "{text}");
    assert!(text.contains("? untrustworthy in that run"), "{text}");
    let md = comparison_markdown(&c);
    assert!(!md.contains('!') && md.contains('?'), "{md}");
}
