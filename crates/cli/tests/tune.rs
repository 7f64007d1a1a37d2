//! `isobench tune` for real, on cgroup tenants, for a knob whose answer follows from first
//! principles: the victim and the aggressor share one CPU, the aggressor burns it under a
//! CPU quota of `q` CPUs, so the victim keeps `1 - q` of the CPU (CFS gives each half
//! without a quota, so `q` counts up to 0.5) and loses `q` of its throughput. A loss bound
//! of 20% then sits at `q = 0.2`: the boundary's interval must hold it, the recommended
//! quota must not exceed it, and the aggressor's throughput must follow its quota. Needs
//! root and the cpu controller; skips with the reason otherwise.

use isobench_results::{Section, Value};

mod common;
use common::{cgroup_missing, code, isobench, json_of, run_ids, text, write};

/// The quota scenario: a loss bound of 20% on cpu-int beside the cpu stressor.
const QUOTA: &str = r#"
name = "tune-quota"
kind = "tune"
seed = 1
platform = "cgroup"
placement = "shared"

[tune]
probe = "cpu-int"
metric = "ops_per_sec"
slo_loss = 20
resolution = 0.1
min_trials = 3
max_trials = 8

[[tune.knob]]
tenant = "batch"
key = "cpus"
range = [0.05, 1.0]

[trial]
duration = "1s"
warmup = "300ms"
solo = "0s"
timeout = "20s"

[repetitions]
max_time = "15m"

[[tenant]]
name = "victim"
role = "victim"
limits = { cpuset = "1", memory = "256M", pids = 64 }

[[tenant]]
name = "batch"
role = "aggressor"
limits = { cpuset = "1", memory = "256M", pids = 64 }

[[probe]]
name = "cpu-int"
metrics = ["ops_per_sec"]

[[stressor]]
name = "cpu"
intensity = 100
"#;

/// Where the arithmetic puts the boundary, CPUs.
const EXPECTED: f64 = 0.2;

/// One step of the quota's grid: the search's positions are put on it.
const STEP: f64 = 0.95 / 64.0;

fn number(v: &Value) -> f64 {
    v.text().trim().parse().unwrap_or(f64::NAN)
}

fn column(s: &Section, name: &str) -> usize {
    s.columns
        .iter()
        .position(|c| c.name == name)
        .unwrap_or_else(|| panic!("section {} has no column {name}", s.id))
}

#[test]
fn a_cpu_quota_tune_finds_the_boundary_the_arithmetic_gives() {
    if let Some(why) = cgroup_missing(&["cpu", "cpuset", "memory", "pids"]) {
        common::skip("cgroup", &why);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "quota.toml", QUOTA);
    let db = dir.path().join("t.db");
    let out = isobench()
        .args(["tune", &file, "--db"])
        .arg(&db)
        .args(["--wait", "-q"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}{}", text(&out.stdout), text(&out.stderr));
    let report = text(&out.stdout);
    let run = run_ids(&db).remove(0);
    let doc = json_of(
        &isobench()
            .args(["export", "--format", "json", "--db"])
            .arg(&db)
            .arg(&run)
            .output()
            .unwrap(),
    );
    let sections: Vec<Section> =
        serde_json::from_value(doc["results"]["sections"].clone()).unwrap();
    let answer = sections
        .iter()
        .find(|s| s.id == "tune")
        .expect("tune section");
    let row = &answer.rows[0];
    // A boundary, resolved or not (a noisy host widens the interval; it must still hold the
    // arithmetic's answer): never an SLO that holds or fails everywhere, which it does not.
    let said = row[column(answer, "answer")].text();
    assert!(
        said.starts_with("boundary") || said.starts_with("held nowhere beyond doubt"),
        "the search found no boundary:\n{report}"
    );
    let points = sections.iter().find(|s| s.id == "tune-points").unwrap();
    let interval = row[column(answer, "boundary interval")].text();
    let (lo, hi) = interval
        .trim_matches(|c| c == '[' || c == ']')
        .split_once(", ")
        .map(|(a, b)| (a.parse::<f64>().unwrap(), b.parse::<f64>().unwrap()))
        .unwrap_or_else(|| panic!("interval {interval}"));
    assert!(
        lo - STEP <= EXPECTED && EXPECTED <= hi + STEP,
        "the boundary's interval [{lo}, {hi}] misses the arithmetic's {EXPECTED}:\n{report}"
    );
    // The recommendation, when there is one, is on the safe side of the arithmetic's, and it
    // costs the aggressor something.
    if said.starts_with("boundary") {
        let recommended = number(&row[column(answer, "recommended")]);
        assert!(
            recommended <= EXPECTED + STEP,
            "recommended {recommended} CPUs, beyond the arithmetic's {EXPECTED}:\n{report}"
        );
        let cost = number(&row[column(answer, "aggressor cost")]);
        assert!(cost > 0.0 && cost < 100.0, "cost {cost}:\n{report}");
    }
    // The aggressor's throughput follows its quota: at the tight end (0.05 CPUs) it does
    // far less than a fifth of what it does at the loose end (1 CPU, of which CFS gives it
    // about half beside the victim).
    let rate_at = |setting: &str| {
        points
            .rows
            .iter()
            .find(|r| r[column(points, "setting")].text() == setting)
            .map(|r| number(&r[column(points, "aggressor throughput")]))
            .unwrap_or_else(|| panic!("no point at {setting}:\n{report}"))
    };
    assert!(
        rate_at("0.05") * 5.0 < rate_at("1.00"),
        "the aggressor's throughput does not follow its quota:\n{report}"
    );
    // Every point visited is a condition of the run, and every figure came from its trials.
    let figures: f64 = points
        .rows
        .iter()
        .map(|r| number(&r[column(points, "figures")]))
        .sum();
    assert_eq!(
        figures,
        number(&row[column(answer, "figures")]),
        "the points' figures add up to the search's"
    );
    // The frontier and the knob's curve are there for the report.
    assert!(sections.iter().any(|s| s.id == "frontier-cpu@100"));
    assert!(sections.iter().any(|s| s.id == "knob-cpu@100-batch.cpus"));
}

#[test]
fn a_knob_the_platform_cannot_set_is_refused_before_any_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "host.toml",
        &QUOTA.replace("platform = \"cgroup\"", "platform = \"host\""),
    );
    let out = isobench()
        .args(["tune", &file, "--dry-run"])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_ne!(code(&out), 0, "{err}");
    assert!(err.contains("batch.cpus"), "{err}");
    assert!(err.contains("host"), "{err}");
}

#[test]
fn tune_flags_are_checked_and_named() {
    for (flag, value) in [
        ("--slo", "p99"),
        ("--knob", "batch.cpus"),
        ("--knob", "cpus=0.1..1"),
    ] {
        let out = isobench()
            .args(["tune", "--dry-run", flag, value])
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(code(&out), 2, "{flag} {value}: {err}");
        assert!(err.contains(flag), "{flag} {value}: {err}");
    }
    let out = isobench()
        .args(["tune", "--dry-run", "--preset", "quick"])
        .output()
        .unwrap();
    assert!(text(&out.stderr).contains("not \"tune\""));
}
