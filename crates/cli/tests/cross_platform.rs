//! `isobench run --platform a,b`: one scenario on several platforms, stored as linked runs
//! and shown as one table across the platforms (paper 001's Table 2 layout) with an
//! isolation score per platform. On the fake platform, so every run is instant.

use isobench_store::Store;

mod common;
use common::{code, fake, text};

#[test]
fn a_scenario_runs_on_each_platform_and_the_linked_runs_show_one_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let report = dir.path().join("set.html");
    let out = fake()
        .args([
            "run",
            "-q",
            "--preset",
            "ibs",
            "--platform",
            "host,cgroup",
            "--db",
        ])
        .arg(&db)
        .arg(format!("--report={}", report.display()))
        .output()
        .unwrap();
    assert!([0, 4].contains(&code(&out)), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("Degradation across platforms"), "{stdout}");
    let table = &stdout[stdout.find("Degradation across platforms").unwrap()..];
    for column in [
        "host good [%]",
        "host bad [%]",
        "cgroup good [%]",
        "cgroup bad [%]",
    ] {
        assert!(table.contains(column), "{column}: {table}");
    }
    // The host platform contains nothing, so the preset leaves the fork bomb out there: the
    // table says so instead of a number, and the score says how many tests it covers.
    let fork = table.lines().find(|l| l.starts_with("fork@100")).unwrap();
    assert!(fork.split_whitespace().nth(1) == Some("-"), "{fork}");
    assert!(
        table.contains("isolation score") && table.contains("(3 of 6 tests)"),
        "{table}"
    );

    // Two runs, each knowing the other.
    let runs = Store::open(&db).unwrap().list_runs().unwrap();
    assert_eq!(runs.len(), 2);
    for r in &runs {
        let out = fake()
            .args(["show", r.id.as_str(), "--db"])
            .arg(&db)
            .output()
            .unwrap();
        let shown = text(&out.stdout);
        assert!(shown.contains("Degradation across platforms"), "{shown}");
        for other in &runs {
            assert!(shown.contains(other.id.as_str()), "{shown}");
        }
    }
    // One run stands for its set in `compare`.
    let out = fake()
        .args(["compare", runs[0].id.as_str(), "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("Comparison of 2 runs"));
    // The set's report carries the table.
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("Degradation across platforms"));
}

#[test]
fn several_platforms_refuse_single_run_exports_and_repeated_platforms() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let json = dir.path().join("x.json");
    let out = fake()
        .args(["run", "-q", "--platform", "host,cgroup", "--export-json"])
        .arg(&json)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    assert!(text(&out.stderr).contains("isobench export RUN_ID"));
    let out = fake()
        .args(["run", "-q", "--platform", "host,host", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    assert!(text(&out.stderr).contains("names host twice"));
    assert!(!db.exists() || Store::open(&db).unwrap().list_runs().unwrap().is_empty());
}

/// A small matrix scenario: one probe, one stressor, short trials.
const TINY: &str = r#"
name = "tiny"
kind = "matrix"
seed = 5

[trial]
duration = "100ms"
warmup = "50ms"
solo = "0s"
pilot = "0s"

[repetitions]
min = 2
max = 2

[[tenant]]
name = "victim"
role = "victim"
limits = { memory = "256M", pids = 64 }

[[tenant]]
name = "aggressor"
role = "aggressor"
limits = { memory = "256M", pids = 64 }

[[probe]]
name = "syscall"
metrics = ["getppid_ns"]

[[stressor]]
name = "cpu"
"#;

#[test]
fn for_real_each_platform_runs_in_the_same_process() {
    // Each platform's run installs the Ctrl-C and panic handling again, in one process.
    if let Some(why) = common::cgroup_missing(&["cpu", "memory", "pids"]) {
        common::skip("cgroup", &why);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let scenario = dir.path().join("tiny.toml");
    std::fs::write(&scenario, TINY).unwrap();
    let out = common::isobench()
        .arg("run")
        .arg(&scenario)
        .args(["-q", "--platform", "host,cgroup", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!([0, 4].contains(&code(&out)), "{stderr}");
    assert!(!stderr.contains("not run"), "{stderr}");
    let stdout = text(&out.stdout);
    assert!(stdout.contains("cgroup good [%]"), "{stdout}");
    assert!(!stdout.contains("not run:"), "{stdout}");
    let runs = Store::open(&db).unwrap().list_runs().unwrap();
    let platforms: Vec<String> = runs.iter().map(|r| r.platform.clone()).collect();
    assert_eq!(runs.len(), 2, "{platforms:?}");
    assert!(platforms.contains(&"host".to_string()) && platforms.contains(&"cgroup".to_string()));
}
