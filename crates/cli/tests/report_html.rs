//! The HTML report: for a run of every experiment kind (on the fake platform), the file
//! `isobench report` writes holds the charts that kind must show and opens offline; then
//! headless Chromium opens every file, finds no console error and sees each chart drawn
//! (`tests/browser/check_html.py`, set up by `scripts/test`), saving a screenshot of each.

use std::path::{Path, PathBuf};

mod common;
use common::{fake, fake_run_of, isobench, quota_fake_run, text, tune_scenario};

/// A preset per experiment kind, and a part of the id of each chart its report must hold.
const KINDS: &[(&str, &str, &[&str])] = &[
    (
        "quick",
        "matrix",
        &[
            "matrix-0-heat",
            "matrix-0-bars",
            "latency-0-percentiles",
            "latency-0-histogram",
        ],
    ),
    (
        "sensitivity",
        "sensitivity",
        &["curve-cpu", "curve-cache", "curve-membw"],
    ),
    ("vits-disk", "sweep", &["-curve"]),
    ("vits-scale", "scale", &["-scale"]),
    ("hyperv-fidelity", "fidelity", &["-fidelity"]),
    ("xen-pairwise", "pairwise", &["-pairs"]),
    ("xen-timeline", "timeline", &["-episodes", "-series"]),
    ("ibs", "webapp", &["-table2"]),
    (
        "artifacts",
        "artifacts",
        &["-table1", "-surface-", "-histogram"],
    ),
];

/// Runs `preset` on the fake platform into `db` and returns the run's id.
fn fake_run(db: &Path, preset: &str) -> String {
    fake_run_of(db, &["--preset", preset])
}

fn chart_ids(html: &str) -> Vec<String> {
    html.split(r#"<figure class="chart" data-chart=""#)
        .skip(1)
        .map(|s| s.split('"').next().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn every_kind_gets_a_report_with_its_charts_that_opens_offline_in_a_browser() {
    let dir = tempfile::tempdir().unwrap();
    let mut files: Vec<PathBuf> = Vec::new();
    for (preset, kind, charts) in KINDS {
        let db = dir.path().join(format!("{preset}.db"));
        let id = fake_run(&db, preset);
        let file = dir.path().join(format!("{kind}.html"));
        let out = isobench()
            .args(["report", &id, "-o"])
            .arg(&file)
            .arg("--db")
            .arg(&db)
            .output()
            .unwrap();
        assert!(out.status.success(), "{kind}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout).trim(), file.display().to_string());
        let html = std::fs::read_to_string(&file).unwrap();
        let ids = chart_ids(&html);
        for want in *charts {
            assert!(
                ids.iter().any(|i| i.contains(want)),
                "{kind}: no chart {want} in {ids:?}"
            );
        }
        assert!(
            html.contains(&format!("isobench run {id}")),
            "{kind}: header"
        );
        assert!(html.contains("How far to trust it"), "{kind}: trust notes");
        assert!(html.contains("@media print"), "{kind}: print stylesheet");
        for external in ["http://", "https://", "<script src", "<link "] {
            assert!(
                !html.contains(external),
                "{kind}: the report must open offline ({external})"
            );
        }
        files.push(file);
    }
    files.push(comparison(dir.path()));
    open_in_browser(&files);
}

/// Two runs of different scenarios in one database, compared as HTML: the runs side by side
/// and the differences, each a chart.
fn comparison(dir: &Path) -> PathBuf {
    let db = dir.join("compare.db");
    let a = fake_run(&db, "quick");
    let quick = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/quick.toml");
    let shared = std::fs::read_to_string(quick)
        .unwrap()
        .replace(r#"name = "quick""#, r#"name = "quick-shared""#)
        .replace(r#"placement = "split""#, r#"placement = "shared""#);
    let file = common::write(dir, "quick-shared.toml", &shared);
    let b = fake_run_of(&db, &[file.as_str()]);
    assert_ne!(a, b);
    let file = dir.join("compare.html");
    let out = isobench()
        .args(["compare", &a, &b, "--format", "html", "-o"])
        .arg(&file)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let html = std::fs::read_to_string(&file).unwrap();
    let ids = chart_ids(&html);
    for want in ["compare-victims-runs", "compare-victims-differences"] {
        assert!(ids.iter().any(|i| i == want), "no chart {want} in {ids:?}");
    }
    assert!(
        html.contains("Settings that differ"),
        "the scenarios differ"
    );
    file
}

#[test]
fn run_with_report_writes_it_and_prints_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let out = fake()
        .current_dir(dir.path())
        .args(["run", "-q", "--report", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(
        out.status.success() || out.status.code() == Some(4),
        "{}",
        text(&out.stderr)
    );
    let stderr = text(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains("report") && l.contains(".html"))
        .unwrap_or_else(|| panic!("no report line in {stderr}"));
    let path = line.rsplit(' ').next().unwrap();
    let path = dir.path().join(path);
    let html = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(html.contains("matrix-0-heat"));
}

#[test]
fn a_report_of_an_unknown_run_says_where_the_runs_are() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    fake_run(&db, "null");
    let out = isobench()
        .args(["report", "nope", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("isobench runs"),
        "{}",
        text(&out.stderr)
    );
}

/// A fake run of the quick scenario, edited by `edit`, and its HTML report.
fn quick_report(dir: &Path, name: &str, edit: &dyn Fn(String) -> String) -> (PathBuf, String) {
    let quick = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/quick.toml");
    let scenario = edit(std::fs::read_to_string(quick).unwrap());
    let file = common::write(dir, &format!("{name}.toml"), &scenario);
    let db = dir.join(format!("{name}.db"));
    let id = fake_run_of(&db, &[file.as_str()]);
    let html = dir.join(format!("{name}.html"));
    let out = isobench()
        .args(["report", &id, "-o"])
        .arg(&html)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    (html, page)
}

/// The text of every element `<tag ...>TEXT</tag>` of the page, markup inside removed.
fn texts_of(html: &str, tag: &str) -> Vec<String> {
    html.split(&format!("<{tag}"))
        .skip(1)
        .filter_map(|s| {
            let body = s.split_once('>')?.1;
            let inner = body.split(&format!("</{tag}>")).next()?;
            let mut out = String::new();
            let mut in_tag = false;
            for ch in inner.chars() {
                match ch {
                    '<' => in_tag = true,
                    '>' => in_tag = false,
                    c if !in_tag => out.push(c),
                    _ => {}
                }
            }
            Some(out)
        })
        .collect()
}

/// Defect: the report opened with a screen of run metadata, and its per-resource summary
/// came last, some 8,400 px down. It must open with the verdict per resource (what leaks,
/// how much, how sure, which results not to trust), each figure linked to its cell in the
/// matrix, and the run's metadata below; the browser check measures the positions.
#[test]
fn report_opens_with_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let (file, html) = quick_report(dir.path(), "verdict", &|s| s);
    let h2: Vec<&str> = html
        .split("<h2 id=\"")
        .skip(1)
        .map(|s| s.split('"').next().unwrap())
        .collect();
    assert_eq!(h2.first(), Some(&"verdict"), "sections: {h2:?}");
    let at = |id: &str| h2.iter().position(|x| *x == id).unwrap();
    assert!(
        at("verdict") < at("matrix") && at("matrix") < at("run"),
        "{h2:?}"
    );
    assert_eq!(
        h2.last(),
        Some(&"run"),
        "the run's metadata comes last: {h2:?}"
    );
    // A row per resource, each with its figure, interval, test and a link to its cell.
    let verdict = html
        .split(r#"<table class="verdict">"#)
        .nth(1)
        .and_then(|s| s.split("</table>").next())
        .expect("a verdict table");
    for resource in ["cpu", "cache", "memory", "disk", "net"] {
        assert!(
            verdict.contains(&format!("<th>{resource}</th>")),
            "no row for {resource}"
        );
    }
    for head in ["victim loss", "how sure", "not to trust"] {
        assert!(verdict.contains(head), "no column {head}");
    }
    assert!(verdict.contains("adjusted p"), "how sure names the p-value");
    let links: Vec<&str> = verdict
        .split("href=\"#")
        .skip(1)
        .map(|s| s.split('"').next().unwrap())
        .collect();
    assert!(links.len() >= 5, "{links:?}");
    for id in links {
        assert!(
            html.contains(&format!(r#"<td id="{id}""#)),
            "the link to #{id} leads to no cell of the matrix"
        );
    }
    open_in_browser(&[file]);
}

/// Defect: a heading read "Degradation of victim victim" (the tenant named after its role,
/// and the role said again). No heading or caption says the role twice, whatever the name.
#[test]
fn no_heading_repeats_the_role() {
    let dir = tempfile::tempdir().unwrap();
    let (_, named_victim) = quick_report(dir.path(), "victim", &|s| s);
    let (_, named_web) = quick_report(dir.path(), "web", &|s| {
        s.replace(r#"name = "victim""#, r#"name = "web""#)
    });
    for (html, who) in [(&named_victim, "victim"), (&named_web, "web")] {
        let mut headings = Vec::new();
        for tag in ["h1", "h2", "h3", "figcaption", "caption"] {
            headings.extend(texts_of(html, tag));
        }
        assert!(headings.len() > 10, "{headings:?}");
        for h in &headings {
            let words: Vec<String> = h
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .map(str::to_lowercase)
                .collect();
            assert!(
                !words.windows(2).any(|w| w[0] == w[1]),
                "{who}: a heading repeats a word: {h:?}"
            );
            assert!(
                words.iter().filter(|w| *w == "victim").count() <= 1,
                "{who}: a heading says victim twice: {h:?}"
            );
        }
        assert!(
            headings.iter().any(|h| h
                == match who {
                    "victim" => "Victim",
                    _ => "Victim web",
                }),
            "{who}: {headings:?}"
        );
    }
}

/// Defect: the bar chart's title promised the aggressors' own rate and showed none (the quick
/// scenario does not measure it). The title names what the bars show; without the
/// aggressors' rate, a note says why; with it, their bars are there under their own colour.
#[test]
fn bar_chart_title_promises_only_what_it_shows() {
    let dir = tempfile::tempdir().unwrap();
    let caption = |html: &str| {
        html.split(r#"data-chart="matrix-0-bars"><figcaption>"#)
            .nth(1)
            .and_then(|s| s.split("</figcaption>").next())
            .expect("a bar chart")
            .to_string()
    };
    let (_, without) = quick_report(dir.path(), "nosolo", &|s| s);
    assert!(
        !caption(&without).contains("aggressor"),
        "{}",
        caption(&without)
    );
    assert!(
        without.contains("The aggressors' own rate is not shown: this run did not measure it"),
        "no note says why the aggressors' rate is missing"
    );
    // One round leaves one pair per condition, too few for an estimate: the note says so.
    let (_, one_round) = quick_report(dir.path(), "oneround", &|s| {
        s.replace(r#"solo = "0s""#, r#"solo = "400ms""#)
    });
    assert!(!caption(&one_round).contains("aggressor"));
    assert!(
        one_round.contains(
            "own rate is not shown: no aggressor result has an estimate (under cpu@100, cache@100"
        ),
        "no note says why the aggressors' rate is missing"
    );
    let (_, with) = quick_report(dir.path(), "solo", &|s| {
        s.replace(r#"solo = "0s""#, r#"solo = "400ms""#)
            .replace("min = 1\n", "min = 3\n")
    });
    assert!(
        caption(&with).contains("and of the aggressors&#39; own rate"),
        "{}",
        caption(&with)
    );
    let bars = with
        .split(r#"data-chart="matrix-0-bars""#)
        .nth(1)
        .and_then(|s| s.split("</figure>").next())
        .unwrap();
    assert!(
        bars.contains("aggressor (own rate) under"),
        "no aggressor bar"
    );
    assert!(!with.contains("own rate is not shown"));
}

/// Defect: legend entries overlapped (`membw@100` over `memhog@100`). The browser check
/// measures every legend entry of every chart; here on the report with the most of them.
#[test]
fn legend_labels_do_not_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let (file, html) = quick_report(dir.path(), "legends", &|s| s);
    assert!(html.contains(r#"class="key""#), "legends are drawn as keys");
    open_in_browser(&[file]);
}

/// Defect: the latency section merged every baseline trial against every contended trial
/// (a fork's p50 read 514 us at baseline, 339 us under a CPU hog estimated 2.1% worse). Each
/// condition's distribution now pools the trials its estimate used, as the JSON export's
/// `latency` holds them: on/off conditions whole with the phases the estimate compared
/// beside them, the paired condition with the baseline trials paired with it, and no line of
/// every baseline trial drawn against the on/off conditions.
#[test]
fn latency_percentiles_pooled_like_the_estimate() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("l.db");
    let id = fake_run(&db, "quick");
    let file = dir.path().join("l.html");
    let out = isobench()
        .args(["report", &id, "-o"])
        .arg(&file)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let html = std::fs::read_to_string(&file).unwrap();
    let out = isobench()
        .args(["export", &id, "--format", "json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let doc = common::json_of(&out);
    let views = doc["results"]["latency"]
        .as_array()
        .expect("a latency view");
    let fork = views
        .iter()
        .find(|v| v["metric"] == "fork_p50_ns")
        .expect("the fork latency");
    assert_eq!(fork["unit"], "ns");
    assert_eq!(fork["estimated"], true);
    let labels: Vec<&str> = fork["distributions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["label"].as_str().unwrap())
        .collect();
    assert!(!labels.contains(&"baseline"), "{labels:?}");
    assert!(
        labels.contains(&"baseline paired with memhog@100"),
        "{labels:?}"
    );
    assert!(
        labels.contains(&"cpu@100 (on/off, both phases)"),
        "{labels:?}"
    );
    // The report draws those distributions, with the figures of the export.
    let section = html
        .split(r#"<h3>fork-latency fork_p50_ns</h3>"#)
        .nth(1)
        .and_then(|s| s.split("<h3").next())
        .expect("the fork latency in the report");
    for d in fork["distributions"].as_array().unwrap() {
        let p50 = d["quantiles"][0].as_f64().unwrap();
        let row = format!(
            r#"<td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{p50:.0}</td>"#,
            d["label"].as_str().unwrap(),
            d["trials"],
            d["values"]
        );
        assert!(section.contains(&row), "no row {row}");
        if d["design"] == "onoff" {
            let e = &d["estimate"];
            assert!(
                section.contains(&format!(
                    "off-phases {:.1} &rarr; on-phases {:.1}",
                    e["reference_median"].as_f64().unwrap(),
                    e["contended_median"].as_f64().unwrap()
                )),
                "the estimate's phases beside {}",
                d["label"]
            );
        }
    }
    assert!(
        section.contains("a trial&#39;s histogram cannot separate"),
        "how it pools"
    );
}

/// Defect: the latency tables had no units. Every percentile column names its unit.
#[test]
fn latency_tables_give_units() {
    let dir = tempfile::tempdir().unwrap();
    let (_, html) = quick_report(dir.path(), "units", &|s| s);
    let tables: Vec<&str> = html
        .split(r#"<table class="latency">"#)
        .skip(1)
        .map(|t| t.split("</thead>").next().unwrap())
        .collect();
    assert!(tables.len() >= 2, "latency tables");
    for head in tables {
        assert!(
            head.contains("<th>p50 [ns]</th>") || head.contains("<th>p50 [us]</th>"),
            "{head}"
        );
        assert!(head.contains("<th>p99.9 ["), "{head}");
        assert!(head.contains("median of its units ["), "{head}");
    }
    assert!(html.contains("fork_p50_ns, ns"), "the axis names its unit");
}

/// The checker itself: it passes a good page and names each fault of a bad one
/// (`tests/browser/selftest.sh`).
#[test]
fn the_browser_check_names_each_fault_of_a_bad_report() {
    let Some(python) = browser_python() else {
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser-selftest");
    let out = std::process::Command::new("bash")
        .arg(root.join("tests/browser/selftest.sh"))
        .arg(&shots)
        .env("ISOBENCH_BROWSER_PYTHON", python)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// Opens the files in headless Chromium through the checker `scripts/test` sets up; without
/// it, skips with the reason, except in CI, where the browser test must run.
fn open_in_browser(files: &[PathBuf]) {
    let Some(python) = browser_python() else {
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let out = std::process::Command::new(python)
        .arg(root.join("tests/browser/check_html.py"))
        .arg("--screenshots")
        .arg(&shots)
        .args(files)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the browser check failed:\n{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    eprintln!("{}screenshots in {}", text(&out.stdout), shots.display());
}

/// The python with Playwright that `scripts/test` sets up; without it `None` (the caller
/// skips, said on stderr), except in CI, where the browser checks must run.
fn browser_python() -> Option<std::ffi::OsString> {
    let python = std::env::var_os("ISOBENCH_BROWSER_PYTHON");
    if python.is_none() {
        assert!(
            std::env::var("CI").map_or(true, |v| v.is_empty() || v == "false"),
            "CI must run the browser test: scripts/test sets ISOBENCH_BROWSER_PYTHON"
        );
        common::skip(
            "browser",
            "ISOBENCH_BROWSER_PYTHON is not set (scripts/test sets it up)",
        );
    }
    python
}

/// The figure of the chart whose id ends with `suffix`.
fn figure<'a>(html: &'a str, suffix: &str) -> &'a str {
    html.split(r#"<figure class="chart" data-chart=""#)
        .skip(1)
        .find(|f| f.split('"').next().is_some_and(|id| id.ends_with(suffix)))
        .and_then(|f| f.split("</figure>").next())
        .unwrap_or_else(|| panic!("no chart {suffix}"))
}

#[test]
fn a_tune_report_draws_each_knobs_frontier_and_its_setting() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tune.db");
    let id = quota_fake_run(&db, &tune_scenario(10.0, 1));
    let file = dir.path().join("tune.html");
    let out = isobench()
        .args(["report", &id, "-o"])
        .arg(&file)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let html = std::fs::read_to_string(&file).unwrap();
    let slo = "ops_per_sec at most 10% worse than alone";
    let lines = |f: &str| f.matches(r#"class="mark line""#).count();
    // The frontier: a line per knob (victim figure against aggressor throughput), with
    // bands, and the SLO.
    let f = figure(&html, "-frontier-cpu@100");
    assert_eq!(lines(f), 2, "a line per knob: {f}");
    for knob in ["aggressor.cpus", "aggressor.weight"] {
        assert!(
            f.contains(&format!(">{knob}</text>")),
            "{knob} in the legend"
        );
    }
    assert!(f.contains("aggressor throughput [ops/s]"), "the x axis");
    assert!(f.contains(r#"class="band""#), "the intervals");
    assert!(
        f.contains(r#"class="limit""#) && f.contains(slo),
        "the SLO line"
    );
    // Each knob: the victim's figure and, under it, the aggressor's throughput against the
    // setting, the SLO and the recommendation marked.
    let k = figure(&html, "-knob-cpu@100-aggressor.cpus");
    assert_eq!(lines(k), 2, "the figure and the throughput: {k}");
    assert!(
        k.contains(">aggressor throughput</text>"),
        "the second panel"
    );
    assert!(k.contains(slo), "the SLO line");
    assert_eq!(
        k.matches(">recommended 0.").count(),
        1,
        "the recommendation: {k}"
    );
    // The knobs at equal throughput: the weight's frontier is not extrapolated to the
    // quota's.
    assert!(html.contains("Knobs at equal aggressor throughput against cpu@100"));
    assert!(html.contains("not comparable"), "no extrapolation");
    open_in_browser(&[file]);
}
