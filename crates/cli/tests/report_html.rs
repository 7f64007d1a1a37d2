//! The HTML report: for a run of every experiment kind (on the fake platform), the file
//! `isobench report` writes holds the charts that kind must show and opens offline; then
//! headless Chromium opens every file, finds no console error and sees each chart drawn
//! (`tests/browser/check_html.py`, set up by `scripts/test`), saving a screenshot of each.

use std::path::{Path, PathBuf};

mod common;
use common::{fake, fake_run_of, isobench, text};

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

/// Opens the files in headless Chromium through the checker `scripts/test` sets up; without
/// it, skips with the reason, except in CI, where the browser test must run.
fn open_in_browser(files: &[PathBuf]) {
    let Some(python) = std::env::var_os("ISOBENCH_BROWSER_PYTHON") else {
        assert!(
            std::env::var("CI").map_or(true, |v| v.is_empty() || v == "false"),
            "CI must run the browser test: scripts/test sets ISOBENCH_BROWSER_PYTHON"
        );
        common::skip(
            "browser",
            "ISOBENCH_BROWSER_PYTHON is not set (scripts/test sets it up)",
        );
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
