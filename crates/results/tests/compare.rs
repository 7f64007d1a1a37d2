//! Comparing hand-built runs: cells matched across runs (by role, probe, metric and condition,
//! tenant names only where a run has several), the difference tested and corrected, and
//! everything the runs do not share listed.

mod common;

use common::{cell, run};
use isobench_common::Role;
use isobench_results::compare::{RunComparison, COMPARISON_SCHEMA_VERSION};
use isobench_results::{Column, Dnr, Section, Value, SOLO_PROBE};
use serde_json::json;

fn row<'a>(s: &'a Section, label: &str) -> &'a [Value] {
    &s.rows
        .iter()
        .find(|r| r[0].text() == label)
        .unwrap_or_else(|| panic!("no row {label} in {:?}", s.text_rows()))[..]
}

fn section<'a>(c: &'a RunComparison, id: &str) -> &'a Section {
    c.sections
        .iter()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("no section {id}"))
}

#[test]
fn shared_cells_are_tested_and_the_rest_is_listed() {
    let a = run(
        "RA",
        "quick",
        &["victim"],
        vec![
            cell("victim", "cpu-int", "ops_per_sec", "cpu@100", 0.80),
            cell("victim", "cpu-int", "ops_per_sec", "cache@100", 0.97),
            cell("victim", "cpu-int", "ops_per_sec", "membw@100", 0.90),
        ],
    );
    // The only victim has another name in B; cache gets no worse, cpu much worse; membw is
    // not measured; a probe metric only B has.
    let mut b = run(
        "RB",
        "other",
        &["web"],
        vec![
            cell("web", "cpu-int", "ops_per_sec", "cpu@100", 0.60),
            cell("web", "cpu-int", "ops_per_sec", "cache@100", 0.97),
            cell("web", "syscall", "getppid_ns", "cpu@100", 1.0),
        ],
    );
    b.run.platform = "host".into();
    b.cells[1].comparison.as_mut().unwrap().trustworthy = false;
    b.run.seed = 99;
    b.plan = Some(json!({"trial": {"duration": 0.8}, "repetitions": {"confidence": 0.95}}));

    let c = RunComparison::new(&[a, b]);
    assert_eq!(c.schema_version, COMPARISON_SCHEMA_VERSION);
    assert_eq!(c.labels(), ["A", "B"]);
    assert_eq!(c.cells.len(), 2);
    assert_eq!(c.tested, 2);

    let cpu = &c.cells[0];
    assert_eq!(cpu.condition, "cpu@100");
    assert_eq!(cpu.tenants, [Some("victim".into()), Some("web".into())]);
    assert!(!cpu.by_tenant_name);
    let d = cpu.versus[0].difference.as_ref().unwrap();
    assert!((d.estimate - 20.0).abs() < 0.5, "{d:?}");
    assert!(d.significant && d.lower > 0.0, "{d:?}");
    let same = c.cells[1].versus[0].difference.as_ref().unwrap();
    assert!(same.estimate.abs() < 1e-9 && !same.significant, "{same:?}");
    assert_eq!(c.significant, 1);

    let victims = section(&c, "victims");
    assert_eq!(
        victims.headers(),
        [
            "probe metric @ condition",
            "A [%]",
            "B [%]",
            "B-A [points]",
            "p adj",
            "sig"
        ]
    );
    let r = row(victims, "cpu-int ops_per_sec @ cpu@100");
    assert_eq!(r[1].text(), "20.0");
    assert_eq!(r[2].text(), "40.0");
    assert_eq!(r[5].text(), "*");
    let r = row(victims, "cpu-int ops_per_sec @ cache@100");
    assert_eq!(r[2].text(), "3.0?", "untrustworthy in B");
    assert_eq!(r[5].text(), "");
    assert!(
        victims.notes.iter().any(|n| n.contains("Holm")),
        "{victims:?}"
    );

    let not_shared: Vec<(String, Vec<String>)> = c
        .not_shared
        .iter()
        .map(|n| (n.what.clone(), n.runs.clone()))
        .collect();
    assert_eq!(
        not_shared,
        [
            ("condition membw@100".to_string(), vec!["A".to_string()]),
            (
                "probe metric syscall getppid_ns".to_string(),
                vec!["B".to_string()]
            ),
        ]
    );
    assert_eq!(c.not_shared[0].why, "not measured in B");

    let settings: Vec<&str> = c.settings.iter().map(|s| s.setting.as_str()).collect();
    assert_eq!(
        settings,
        ["scenario", "platform", "victim tenants", "trial.duration"],
        "the seed is free to differ"
    );
    let platform = &c.settings[1];
    assert_eq!(platform.values, ["cgroup", "host"]);
    assert_eq!(section(&c, "settings").rows.len(), 4);
    assert_eq!(section(&c, "runs").rows.len(), 2);

    // The flat table: one row per cell, every figure with its interval.
    let t = c.table();
    assert_eq!(t.rows.len(), 2);
    assert!(t.headers().contains(&"B-A p adj".to_string()));
    assert_eq!(t.rows[0][1].text(), "victim/web");

    // Reads back (serde_json parses floats to within the last bit, so compare the text).
    let json = serde_json::to_value(&c).unwrap();
    assert_eq!(json["schema_version"], COMPARISON_SCHEMA_VERSION);
    let back: RunComparison = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(serde_json::to_value(&back).unwrap(), json);
}

#[test]
fn several_victims_are_matched_by_name() {
    let cells = |r: f64| {
        vec![
            cell("v1", "cpu-int", "ops_per_sec", "cpu@100", 0.8),
            cell("v2", "cpu-int", "ops_per_sec", "cpu@100", r),
        ]
    };
    let a = run("RA", "s", &["v1", "v2"], cells(0.8));
    let mut b = run("RB", "s", &["v1", "v3"], cells(0.8));
    b.cells[1].tenant = "v3".into();
    let c = RunComparison::new(&[a, b]);
    assert_eq!(c.cells.len(), 1);
    assert!(c.cells[0].by_tenant_name);
    let victims = section(&c, "victims");
    assert_eq!(
        victims.rows[0][0].text(),
        "v1: cpu-int ops_per_sec @ cpu@100"
    );
    let whats: Vec<&str> = c.not_shared.iter().map(|n| n.what.as_str()).collect();
    assert_eq!(
        whats,
        [
            "v2: probe metric cpu-int ops_per_sec",
            "v3: probe metric cpu-int ops_per_sec"
        ]
    );
    assert!(c
        .settings
        .iter()
        .any(|s| s.setting == "victim tenants" && s.values == ["v1, v2", "v1, v3"]));
}

#[test]
fn a_cell_without_a_usable_interval_says_why_there_is_no_test() {
    let mut dnr = cell("victim", "fork-latency", "fork_p50_ns", "forkbomb@100", 0.9);
    dnr.comparison = None;
    dnr.dnr = Some(Dnr {
        count: 3,
        of: 3,
        reason: "agent did not answer".into(),
    });
    let mut wide = cell("victim", "cpu-int", "ops_per_sec", "cpu@100", 0.9);
    wide.comparison.as_mut().unwrap().degradation.upper = f64::INFINITY;
    let a = run("RA", "s", &["victim"], vec![dnr.clone(), wide.clone()]);
    let b = run(
        "RB",
        "s",
        &["victim"],
        vec![
            cell("victim", "fork-latency", "fork_p50_ns", "forkbomb@100", 0.9),
            cell("victim", "cpu-int", "ops_per_sec", "cpu@100", 0.9),
        ],
    );
    let c = RunComparison::new(&[a, b]);
    assert_eq!(c.tested, 0);
    let why: Vec<&str> = c
        .cells
        .iter()
        .map(|x| x.versus[0].no_test.as_deref().unwrap())
        .collect();
    assert_eq!(
        why[0],
        "A has no estimate: DNR in 3 of 3 trials (agent did not answer)"
    );
    assert!(
        why[1].starts_with("A: its interval is not finite"),
        "{}",
        why[1]
    );
    let victims = section(&c, "victims");
    assert_eq!(victims.rows[0][3].text(), "no test");
    assert!(
        victims
            .notes
            .iter()
            .any(|n| n
                .starts_with("no test for fork-latency fork_p50_ns @ forkbomb@100, B: A has no")),
        "{:?}",
        victims.notes
    );
}

#[test]
fn the_aggressor_rate_is_compared_in_its_own_table() {
    let agg = |r: f64| {
        let mut c = cell("aggressor", SOLO_PROBE, "ops_per_sec", "cpu@100", r);
        c.design = None;
        c
    };
    let mut a = run("RA", "s", &["victim"], Vec::new());
    a.aggressor = vec![agg(0.9)];
    let mut b = run("RB", "s", &["victim"], Vec::new());
    b.aggressor = vec![agg(0.7)];
    let c = RunComparison::new(&[a, b]);
    assert_eq!(c.cells[0].role, Role::Aggressor);
    let s = section(&c, "aggressor");
    assert_eq!(s.rows[0][0].text(), "own rate @ cpu@100");
    assert!(s.notes.iter().any(|n| n.contains("Holm")));
}

#[test]
fn kind_sections_are_set_side_by_side_when_their_rows_match() {
    let curve = |rows: &[(&str, f64)]| {
        let mut s = Section::new(
            "curve",
            "cpu-int under cpu",
            vec![Column::unit("intensity", "%"), Column::unit("loss", "%")],
        );
        for (label, v) in rows {
            s.push(vec![
                Value::text_of(*label),
                Value::estimate(*v, v - 1.0, v + 1.0, 1),
            ]);
        }
        s
    };
    let mut a = run("RA", "s", &["victim"], Vec::new());
    let mut b = run("RB", "s", &["victim"], Vec::new());
    a.sections = vec![
        curve(&[("25", 1.0), ("50", 2.0)]),
        Section::new("only-a", "only in A", vec![Column::text("x")]),
    ];
    b.sections = vec![curve(&[("25", 1.5), ("50", 3.0)])];
    let c = RunComparison::new(&[a.clone(), b.clone()]);
    let s = section(&c, "kind-curve");
    assert_eq!(s.headers(), ["intensity [%]", "loss A [%]", "loss B [%]"]);
    assert_eq!(s.text_rows()[1], ["50", "2.0 [1.0, 3.0]", "3.0 [2.0, 4.0]"]);
    assert_eq!(c.not_shared[0].what, "section only-a (only in A)");
    assert_eq!(c.not_shared[0].why, "not in B");

    // Rows only one run has: matched by label, the others empty, and listed.
    b.sections = vec![curve(&[("25", 1.5), ("75", 3.0)])];
    let c = RunComparison::new(&[a.clone(), b.clone()]);
    let s = section(&c, "kind-curve");
    assert_eq!(
        s.text_rows(),
        [
            ["25", "1.0 [0.0, 2.0]", "1.5 [0.5, 2.5]"],
            ["50", "2.0 [1.0, 3.0]", "-"],
            ["75", "-", "3.0 [2.0, 4.0]"],
        ]
    );
    let rows: Vec<(&str, &[String], &str)> = c
        .not_shared
        .iter()
        .filter(|n| n.what.contains("of section curve"))
        .map(|n| (n.what.as_str(), n.runs.as_slice(), n.why.as_str()))
        .collect();
    assert_eq!(
        rows,
        [
            (
                "row `50` of section curve",
                &["A".to_string()][..],
                "not in B"
            ),
            (
                "row `75` of section curve",
                &["B".to_string()][..],
                "not in A"
            ),
        ]
    );

    // No row in common: nothing to set side by side.
    b.sections = vec![curve(&[("75", 3.0)])];
    let c = RunComparison::new(&[a.clone(), b.clone()]);
    assert!(c.sections.iter().all(|s| s.id != "kind-curve"));
    let why = &c
        .not_shared
        .iter()
        .find(|n| n.what.starts_with("section curve"))
        .unwrap()
        .why;
    assert_eq!(why, "no row in common: A: 25, 50; B: 75");

    // Labels a section repeats can only be matched by position.
    a.sections = vec![curve(&[("25", 1.0), ("25", 2.0)])];
    b.sections = vec![curve(&[("25", 1.5), ("75", 3.0)])];
    let c = RunComparison::new(&[a, b]);
    assert!(c.sections.iter().all(|s| s.id != "kind-curve"));
    let why = &c
        .not_shared
        .iter()
        .find(|n| n.what.starts_with("section curve"))
        .unwrap()
        .why;
    assert_eq!(why, "row labels differ: A `25` where B has `75`");
}

/// A protection run's summary under two settings beside a run that left one of them out
/// (a cgroup v2 setting on a v1 host): the shared setting's figures side by side with their
/// intervals, the other listed, and the bar chart kept, a bar per run.
#[test]
fn protection_summaries_are_side_by_side_by_setting_and_aggressor() {
    let summary = |rows: &[(&str, f64, f64)]| {
        let mut s = Section::new(
            "protection",
            "Protection of the service",
            vec![
                Column::text("aggressor"),
                Column::text("episodes"),
                Column::unit("isol mean", "%"),
                Column::unit("work conserved", "%"),
            ],
        )
        .with_plot(isobench_results::Plot::Bars {
            label: vec![0],
            y: vec![2, 3],
            reference: Some(100.0),
        });
        for (label, isol, wc) in rows {
            s.push(vec![
                Value::text_of(*label),
                Value::text_of("2"),
                Value::estimate(*isol, isol - 2.0, isol + 2.0, 1),
                Value::estimate(*wc, wc - 5.0, wc + 5.0, 1),
            ]);
        }
        s
    };
    let mut a = run("RA", "s", &["svc"], Vec::new());
    let mut b = run("RB", "s", &["svc"], Vec::new());
    a.sections = vec![summary(&[
        ("none/cpu@100", 60.0, 100.0),
        ("v2-weight/cpu@100", 97.0, 70.0),
    ])];
    b.sections = vec![summary(&[("none/cpu@100", 55.0, 98.0)])];
    a.sections[0].notes = vec!["held 900 requests/s".into(), "isol%: the method".into()];
    b.sections[0].notes = vec!["held 880 requests/s".into(), "isol%: the method".into()];
    let c = RunComparison::new(&[a, b]);
    let s = section(&c, "kind-protection");
    assert_eq!(
        s.notes,
        [
            "A: held 900 requests/s",
            "B: held 880 requests/s",
            "isol%: the method"
        ],
        "a note every run has is said once"
    );
    assert_eq!(
        s.headers(),
        [
            "aggressor",
            "episodes A",
            "episodes B",
            "isol mean A [%]",
            "isol mean B [%]",
            "work conserved A [%]",
            "work conserved B [%]",
        ]
    );
    assert_eq!(
        s.text_rows()[0],
        [
            "none/cpu@100",
            "2",
            "2",
            "60.0 [58.0, 62.0]",
            "55.0 [53.0, 57.0]",
            "100.0 [95.0, 105.0]",
            "98.0 [93.0, 103.0]",
        ]
    );
    assert_eq!(s.text_rows()[1][4], "-");
    assert_eq!(
        s.plot,
        Some(isobench_results::Plot::Bars {
            label: vec![0],
            y: vec![3, 4, 5, 6],
            reference: Some(100.0),
        })
    );
    let n = c
        .not_shared
        .iter()
        .find(|n| n.what == "row `v2-weight/cpu@100` of section protection")
        .unwrap();
    assert_eq!(
        (n.runs.as_slice(), n.why.as_str()),
        (&["A".to_string()][..], "not in B")
    );
}

#[test]
fn a_third_run_is_compared_against_the_reference_too() {
    let one = |id: &str, r: f64| {
        run(
            id,
            "s",
            &["victim"],
            vec![cell("victim", "cpu-int", "ops_per_sec", "cpu@100", r)],
        )
    };
    let c = RunComparison::new(&[one("RA", 0.8), one("RB", 0.8), one("RC", 0.5)]);
    assert_eq!(c.cells[0].versus.len(), 2);
    assert_eq!(c.tested, 2);
    let headers = section(&c, "victims").headers();
    assert_eq!(headers[7], "C-A [points]");
    assert!(
        !c.cells[0].versus[0]
            .difference
            .as_ref()
            .unwrap()
            .significant
    );
    assert!(
        c.cells[0].versus[1]
            .difference
            .as_ref()
            .unwrap()
            .significant
    );
}
