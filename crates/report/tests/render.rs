//! The rendered report and the exports of a deterministic run on the fake platform,
//! pinned by snapshots.

use isobench_experiment::analysis::analyze;
use isobench_experiment::fake::{run_fake, FakeScript};
use isobench_experiment::progress::NoProgress;
use isobench_experiment::{HostView, Plan, PlanOptions, Results, Scenario, Source};
use isobench_report::{render, serialize, Format, Style};
use isobench_store::Store;

const SCENARIO: &str = r#"
name = "report-test"
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
name = "net-rtt"
metrics = ["udp_rtt_p50_ns"]

[[probe]]
name = "syscall"
metrics = ["getppid_ns"]

[[stressor]]
name = "cpu"

[[stressor]]
name = "forkbomb"

[[stressor]]
name = "membw"
"#;

fn results(script: FakeScript) -> (Results, Store) {
    let sc = Scenario::parse(Source::new("report-test.toml", SCENARIO)).unwrap();
    let plan = Plan::resolve(
        &sc,
        &HostView::synthetic(2, 8 << 30, true),
        &PlanOptions::default(),
    )
    .unwrap();
    let mut store = Store::open_in_memory().unwrap();
    let out = run_fake(&mut store, &plan, SCENARIO, script, &mut NoProgress).unwrap();
    let r = analyze(&store.load_run(&out.run).unwrap());
    (r, store)
}

fn script() -> FakeScript {
    FakeScript {
        dnr_under: vec![("victim".into(), "forkbomb".into())],
        disturb: [7].into_iter().collect(),
        ..FakeScript::default()
    }
}

/// Run ids carry random bits: replace them.
fn normalize(s: &str, id: &str) -> String {
    s.replace(id, "RUN-ID")
}

#[test]
fn terminal_table() {
    let (r, _) = results(script());
    let text = render(
        &r,
        Style {
            width: 100,
            color: false,
        },
    );
    insta::assert_snapshot!(normalize(&text, &r.run.id));
}

#[test]
fn narrow_terminal_splits_columns() {
    let (r, _) = results(script());
    let text = render(
        &r,
        Style {
            width: 60,
            color: false,
        },
    );
    for line in text.lines().filter(|l| l.starts_with("cpu-int")) {
        assert!(line.chars().count() <= 60, "{line}");
    }
    insta::assert_snapshot!(normalize(&text, &r.run.id));
}

#[test]
fn colour_only_when_asked() {
    let (r, _) = results(script());
    assert!(!render(
        &r,
        Style {
            width: 100,
            color: false
        }
    )
    .contains('\x1b'));
    assert!(render(
        &r,
        Style {
            width: 100,
            color: true
        }
    )
    .contains('\x1b'));
}

#[test]
fn show_renders_the_same_as_the_end_of_run() {
    // Rendering reads only the store: analysing the same stored run again gives the same text.
    let (r, store) = results(script());
    let again = analyze(
        &store
            .load_run(&isobench_store::RunId::new(r.run.id.clone()))
            .unwrap(),
    );
    assert_eq!(
        render(&r, Style::default()),
        render(&again, Style::default())
    );
}

#[test]
fn markdown_export() {
    let (r, _) = results(script());
    let md = String::from_utf8(serialize(&r, Format::Markdown)).unwrap();
    insta::assert_snapshot!(normalize(&md, &r.run.id));
}

#[test]
fn csv_export() {
    let (r, _) = results(script());
    let csv = String::from_utf8(serialize(&r, Format::Csv)).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    let cols = lines[0].split(',').count();
    assert_eq!(lines.len(), 1 + r.cells.len() + r.aggressor.len());
    assert!(lines[0].starts_with("run,tenant,role,probe,metric"));
    assert!(lines
        .iter()
        .any(|l| l.contains("forkbomb@100") && l.contains(",victim,")));
    assert!(cols >= 20);
    insta::assert_snapshot!(normalize(&csv, &r.run.id));
}

#[test]
fn json_export_has_schema_version_and_raw_samples() {
    let (r, _) = results(script());
    let bytes = serialize(&r, Format::Json);
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["schema_version"], 5);
    assert_eq!(v["tool"], "isobench");
    assert_eq!(v["kind"], "results");
    let res = &v["results"];
    assert_eq!(res["kind"], "matrix");
    assert_eq!(
        res["plan"]["conditions"][0]["assignments"]["aggressor"]["stressor"],
        res["plan"]["conditions"][0]["name"]
    );
    assert_eq!(res["run"]["seed"], 3);
    assert!(res["plan"]["tenants"].is_array());
    let trials = res["trials"].as_array().unwrap();
    assert!(!trials.is_empty());
    assert!(trials
        .iter()
        .any(|t| !t["samples"].as_array().unwrap().is_empty()));
    let cell = &res["cells"][0];
    assert!(cell["baseline"].is_array() && cell["comparison"]["degradation"]["lower"].is_number());
    // Round trip: the document reads back into the same results.
    let back: Results = serde_json::from_value(res.clone()).unwrap();
    assert_eq!(back.cells.len(), r.cells.len());
    // A document of schema 1 has no kind: it is of a matrix run.
    let mut old = res.clone();
    old.as_object_mut().unwrap().remove("kind");
    let back: Results = serde_json::from_value(old).unwrap();
    assert_eq!(back.kind.as_str(), "matrix");
}

#[test]
fn a_cause_is_marked_in_the_table_and_carried_by_the_exports() {
    use isobench_experiment::cause::{Cause, CauseKind};
    let (mut r, _) = results(script());
    let text = "shared CPUs: run-queue wait 85 us per timeslice under the stressor vs 4 us \
                alone (42% vs 2% of the time); victim and aggressor both on cpus 0-1";
    let i = r
        .cells
        .iter()
        .position(|c| c.probe == "cpu-int" && c.condition == "cpu@100")
        .unwrap();
    r.cells[i].causes = vec![Cause {
        kind: CauseKind::SharedCpus,
        text: text.into(),
    }];
    let table = render(&r, Style::default());
    let row = table.lines().find(|l| l.starts_with("cpu-int")).unwrap();
    assert!(row.contains("[1]"), "{row}");
    let legend: Vec<&str> = table
        .lines()
        .skip_while(|l| !l.starts_with("[n]"))
        .take(2)
        .collect();
    insta::assert_snapshot!(legend.join("\n"), @r"
    [n] caused by placement, as measured (victim alone vs under the stressor):
      [1] cpu-int ops_per_sec @ cpu@100: (shared-cpus) shared CPUs: run-queue wait 85 us per timeslice under the stressor vs 4 us alone (42% vs 2% of the time); victim and aggressor both on cpus 0-1
    ");
    let md = String::from_utf8(serialize(&r, Format::Markdown)).unwrap();
    assert!(md
        .lines()
        .any(|l| l.starts_with("| cpu-int |") && l.contains("[1]")));
    assert!(md.contains(&format!(
        "- [1] cpu-int ops_per_sec @ cpu@100: (shared-cpus) {text}"
    )));
    let csv = String::from_utf8(serialize(&r, Format::Csv)).unwrap();
    assert!(csv.contains(&format!("shared-cpus: {text}")));
    let v: serde_json::Value = serde_json::from_slice(&serialize(&r, Format::Json)).unwrap();
    let cell = &v["results"]["cells"][i];
    assert_eq!(cell["causes"][0]["kind"], "shared-cpus");
    assert_eq!(cell["causes"][0]["text"], text);
    let back: Results = serde_json::from_value(v["results"].clone()).unwrap();
    assert_eq!(back.cells[i].causes, r.cells[i].causes);
}
