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
        usage: true,
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
    assert_eq!(v["schema_version"], 6);
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
fn window_series_are_exported_only_when_asked_for() {
    let (mut r, _) = results(script());
    let series = serde_json::from_value(serde_json::json!({
        "metric": "getppid_ns",
        "windows": [{ "start_ns": 0, "end_ns": 1000, "value": 2.5 }],
    }))
    .unwrap();
    r.trials[0].series = vec![series];
    let doc = |with: bool| -> serde_json::Value {
        serde_json::from_slice(&isobench_report::export::json_document(&r, with)).unwrap()
    };
    let plain = doc(false);
    let trials = plain["results"]["trials"].as_array().unwrap();
    assert!(trials.iter().all(|t| t.get("series").is_none()));
    // Everything else is there: the samples, and the same document as the default export.
    assert!(trials[0]["samples"].is_array());
    assert_eq!(
        plain,
        serde_json::from_slice::<serde_json::Value>(&serialize(&r, Format::Json)).unwrap()
    );
    let full = doc(true);
    assert_eq!(
        full["results"]["trials"][0]["series"][0]["windows"][0]["value"],
        2.5
    );
    // The default export is the whole document less each trial's `series`, byte for byte.
    let mut less = serde_json::json!({
        "schema_version": r.schema_version,
        "tool": "isobench",
        "tool_version": r.run.tool_version,
        "kind": "results",
        "headline": r.headline(),
        "results": r,
    });
    for t in less["results"]["trials"].as_array_mut().unwrap() {
        t.as_object_mut().unwrap().remove("series");
    }
    let mut bytes = serde_json::to_vec_pretty(&less).unwrap();
    bytes.push(b'\n');
    assert!(bytes == isobench_report::export::json_document(&r, false));
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

/// Defect: the runs list, the API and `/metrics` gave a score from the first victim metric
/// alone. The headline comes from every resource, and `show`, the Markdown and the JSON
/// export give the same figures, each of which the JSON export's cells hold; the HTML
/// report's opening verdict has the same rows and figures.
#[test]
fn the_headline_is_the_same_in_show_markdown_json_and_the_report() {
    let (r, _) = results(script());
    let h = r.headline();
    let resources: Vec<&str> = h.resources.iter().map(|x| x.resource.as_str()).collect();
    assert_eq!(resources, ["cpu", "process", "net"], "{h:#?}");
    let table = render(&r, Style::default());
    let md = String::from_utf8(serialize(&r, Format::Markdown)).unwrap();
    assert!(table.contains(&h.rule) && md.contains(&h.rule));
    for x in &h.resources {
        let line = table
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{} ", x.resource)))
            .unwrap_or_else(|| panic!("no line for {} in\n{table}", x.resource));
        assert!(
            line.contains(&x.figure()) && line.contains(&x.detail()),
            "{line}"
        );
        let row = format!("| {} | {} | {} |", x.resource, x.figure(), x.detail());
        assert!(md.contains(&row), "{row}\nnot in\n{md}");
    }
    // The HTML report opens with the same rows, in the same order, the same figures.
    let html = isobench_report::html_report(&r);
    let verdict = html
        .split(r#"<table class="verdict">"#)
        .nth(1)
        .and_then(|s| s.split("</table>").next())
        .expect("the report opens with a verdict table");
    let rows: Vec<&str> = verdict.split("<tr class=").skip(1).collect();
    assert_eq!(rows.len(), h.resources.len(), "{verdict}");
    for (row, x) in rows.iter().zip(&h.resources) {
        assert!(row.contains(&format!("<th>{}</th>", x.resource)), "{row}");
        assert!(
            row.contains(&format!(">{}<", x.figure())),
            "{} not in {row}",
            x.figure()
        );
    }
    assert!(
        html.contains(&h.rule.replace('\'', "&#39;")),
        "the report gives the headline's rule"
    );
    // The headline comes before the tables in both.
    assert!(table.find("Headline:") < table.find("Degradation of the victim"));
    assert!(md.find("## Headline") < md.find("## Degradation of the victim"));
    let v: serde_json::Value = serde_json::from_slice(&serialize(&r, Format::Json)).unwrap();
    // (Both through the same parser: it may round the last digit of a float.)
    let expected: serde_json::Value =
        serde_json::from_slice(&serde_json::to_vec(&h).unwrap()).unwrap();
    assert_eq!(v["headline"], expected);
    // Every figure the headline names is a cell's in the export.
    for x in v["headline"]["resources"].as_array().unwrap() {
        for c in [&x["cell"], &x["dnr_cell"]] {
            if c.is_null() {
                continue;
            }
            let cell = v["results"]["cells"]
                .as_array()
                .unwrap()
                .iter()
                .find(|k| {
                    k["tenant"] == c["tenant"]
                        && k["probe"] == c["probe"]
                        && k["metric"] == c["metric"]
                        && k["condition"] == c["condition"]
                })
                .unwrap_or_else(|| panic!("no cell for {c}"));
            if !c["estimate"].is_null() {
                let d = &cell["comparison"]["degradation"];
                assert_eq!(c["estimate"], d["estimate"]);
                assert_eq!(c["lower"], d["lower"]);
                assert_eq!(c["upper"], d["upper"]);
                assert_eq!(c["p_adjusted"], cell["p_adjusted"]);
                assert_eq!(c["p_value"], cell["paired"]["p_value"]);
            }
        }
    }
}

/// Defect: `show` and the Markdown said "median" while every cell's estimate was a mean of
/// log ratios.
#[test]
fn labels_name_the_statistic_the_cells_used() {
    let (r, _) = results(script());
    assert!(r
        .cells
        .iter()
        .filter_map(|c| c.comparison.as_ref())
        .all(|c| c.degradation.estimator.as_str() == "mean"));
    // The plan asked for the median: the cells did not use it, and no label says it.
    assert_eq!(
        r.plan.as_ref().unwrap()["repetitions"]["estimator"],
        "median"
    );
    assert_eq!(r.estimator(), "mean");
    let table = render(&r, Style::default());
    let md = String::from_utf8(serialize(&r, Format::Markdown)).unwrap();
    for text in [&table, &md] {
        // (The trust line's "median CV" and "median load" are medians indeed.)
        for line in text.lines().filter(|l| {
            l.contains("Degradation of")
                || l.contains("Percent, positive")
                || l.to_lowercase().starts_with("statistic")
        }) {
            assert!(!line.contains("median"), "{line}");
        }
        assert!(
            text.contains("geometric mean ratio (mean of log ratios)"),
            "{text}"
        );
        assert!(text.contains("t over on/off cycles"), "{text}");
        assert!(text.contains("cycle_t on 6 cell(s)"), "{text}");
    }
}

fn csv_rows(r: &Results) -> Vec<std::collections::BTreeMap<String, String>> {
    let csv = serialize(r, Format::Csv);
    let mut rd = csv::Reader::from_reader(&csv[..]);
    let head: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
    rd.records()
        .map(|rec| {
            head.iter()
                .cloned()
                .zip(rec.unwrap().iter().map(String::from))
                .collect()
        })
        .collect()
}

/// Defect: `baseline_median` and `contended_median` implied the opposite sign to
/// `degradation_pct` in 6 of 56 rows.
#[test]
fn csv_has_no_column_that_contradicts_the_estimate() {
    let (r, _) = results(script());
    let rows = csv_rows(&r);
    assert!(
        rows[0].keys().all(|k| !k.contains("median")),
        "{:?}",
        rows[0]
    );
    for row in rows.iter().filter(|x| !x["degradation_pct"].is_empty()) {
        assert_eq!(row["estimator"], "mean", "{row:?}");
        assert!(!row["ci_method"].is_empty(), "{row:?}");
    }
}

/// Defect: the CSV's `p_value` was an unadjusted Mann-Whitney p, not the test behind
/// `significant` (0.002 beside `significant = false`).
#[test]
fn csv_has_the_adjusted_p_behind_significant() {
    let (r, _) = results(script());
    let rows = csv_rows(&r);
    assert!(rows[0].contains_key("p_adjusted") && !rows[0].contains_key("p_value"));
    let mut adjusted = 0;
    for row in rows.iter().filter(|x| !x["significant"].is_empty()) {
        let p: f64 = if row["p_adjusted"].is_empty() {
            assert_eq!(row["correction"], "none", "{row:?}");
            row["p_unadjusted"].parse().unwrap()
        } else {
            adjusted += 1;
            assert_eq!(row["correction"], "Holm", "{row:?}");
            row["p_adjusted"].parse().unwrap()
        };
        assert_eq!(row["significant"] == "true", p < 0.05, "{row:?}");
        assert_eq!(row["test"], row["ci_method"], "{row:?}");
        assert!(
            row["p_adjusted"].is_empty()
                || row["p_adjusted"].parse::<f64>().unwrap()
                    >= row["p_unadjusted"].parse::<f64>().unwrap()
        );
    }
    assert_eq!(adjusted, 6, "every victim cell with an estimate");
}

/// Defect: 10 of 56 cells showed a 95% interval that excluded 0 beside "not significant"
/// (Holm-adjusted) with no word on why.
#[test]
fn the_interval_beside_a_significance_mark_says_it_is_not_adjusted() {
    let (r, _) = results(script());
    let table = render(&r, Style::default());
    let md = String::from_utf8(serialize(&r, Format::Markdown)).unwrap();
    for text in [&table, &md] {
        assert!(
            text.contains("95% interval of each cell alone")
                && text.contains("not adjusted for the run's 6 comparisons")
                && text.contains("one that excludes 0 can sit beside a cell without *"),
            "{text}"
        );
    }
    for row in csv_rows(&r)
        .iter()
        .filter(|x| !x["degradation_pct"].is_empty())
    {
        assert_eq!(row["ci_adjusted"], "false");
    }
    for x in r.headline().resources {
        assert!(
            x.detail().contains("CI of this cell, unadjusted"),
            "{}",
            x.detail()
        );
    }
}

/// Defect: the reason line said "4 result(s) ... flagged" while the table marked 5 cells.
#[test]
fn the_reason_counts_the_flagged_results_the_table_marks() {
    let (mut r, _) = results(script());
    // A reason as stored by earlier versions, with a count of its own.
    r.run.status_reason = Some(
        "time budget reached: no further round fits in 5m (4 result(s) without an interval \
         within +/-2 points, flagged)"
            .into(),
    );
    // One more flagged cell than the run had.
    let before = r.flagged_count();
    let c = r.cells.iter_mut().find(|c| c.comparison.is_some()).unwrap();
    c.comparison.as_mut().unwrap().trustworthy = false;
    let table = render(&r, Style::default());
    let marked: usize = table
        .lines()
        .skip_while(|l| !l.starts_with("probe metric"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| l.matches('?').count())
        .sum();
    assert_eq!(marked, before + 1, "{table}");
    let reason = r.reason_line().unwrap();
    assert_eq!(
        reason,
        format!(
            "time budget reached: no further round fits in 5m; {marked} result(s) flagged \
             untrustworthy (? in the tables)"
        )
    );
    assert!(table.contains(&reason));
    assert!(
        table.contains(&format!(", {marked} untrustworthy")),
        "{table}"
    );
    let md = String::from_utf8(serialize(&r, Format::Markdown)).unwrap();
    assert!(md.contains(&reason));
}

/// Each tenant's pressure stalls and delivered I/O: a table in the Markdown and the HTML
/// report, the same figures in the JSON, and the victim's stall named in the trust line.
#[test]
fn pressure_and_delivered_io_are_shown_from_the_results() {
    let (r, _store) = results(script());
    let table = isobench_results::usage::usage_section(&r.usage).unwrap();
    let md = String::from_utf8(serialize(&r, Format::Markdown)).unwrap();
    assert!(md.contains(&format!("## {}", table.title)), "{md}");
    assert!(md.contains(&table.headers().join(" | ")), "{md}");
    let html = isobench_report::html_report(&r);
    assert!(html.contains(r#"id="section-usage""#));
    for cell in &table.text_rows()[0] {
        assert!(
            html.contains(&format!(">{cell}<")),
            "{cell} not in the HTML table"
        );
    }
    let json: serde_json::Value = serde_json::from_slice(&serialize(&r, Format::Json)).unwrap();
    let rows = json["results"]["usage"].as_array().unwrap();
    assert_eq!(rows.len(), r.usage.len());
    assert_eq!(rows[0]["tenant"], r.usage[0].tenant);
    assert_eq!(
        rows[0]["cpu"]["some_median"].as_f64(),
        r.usage[0].cpu.map(|c| c.some_median)
    );
    let worst = &r.trust.victim_stalls[0];
    let line = isobench_report::table::trust_line(&r);
    assert!(
        line.contains(&format!(
            "victim stalled: {} on {} {:.0}% of the time under {}",
            worst.tenant,
            worst.resource,
            worst.stall.some_median * 100.0,
            worst.condition
        )),
        "{line}"
    );
}

/// The trust line on the victims' pressure: the worst stall and how many more, under the
/// threshold, not available (cgroup v1), or nothing when no tenant usage was recorded.
#[test]
fn the_trust_line_names_the_victims_pressure_only_when_it_says_something() {
    let (mut r, _store) = results(script());
    let said = |r: &Results| {
        let line = isobench_report::table::trust_line(r);
        line.split("; ")
            .find(|p| p.starts_with("victim "))
            .map(str::to_string)
    };
    let worst = r.trust.victim_stalls[0].clone();
    r.trust.victim_stalls = vec![worst.clone(), worst.clone()];
    assert_eq!(
        said(&r).unwrap(),
        format!(
            "victim stalled: victim on {} {:.0}% of the time under {} (median of {} trial(s), \
             all tasks {:.0}%), 1 more at or over 10%",
            worst.resource,
            worst.stall.some_median * 100.0,
            worst.condition,
            worst.trials,
            worst.stall.full_median.unwrap() * 100.0
        )
    );
    r.trust.victim_stalls.clear();
    assert_eq!(
        said(&r).as_deref(),
        Some("victim pressure under 10% of the time")
    );
    r.trust.victim_pressure_measured = Some(false);
    assert_eq!(
        said(&r).as_deref(),
        Some("victim pressure n/a (no per-cgroup PSI, as on cgroup v1)")
    );
    r.trust.victim_pressure_measured = None;
    assert_eq!(said(&r), None);
}
