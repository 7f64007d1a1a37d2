//! The command line as a user meets it.

use assert_cmd::Command;
use predicates::prelude::*;

fn isobench() -> Command {
    Command::cargo_bin("isobench").expect("binary built")
}

#[test]
fn list_json_lists_every_workload_with_host_facts() {
    let out = isobench().args(["list", "--json"]).output().unwrap();
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema_version"], 1);
    assert!(doc["tool_version"].is_string());
    assert!(doc["host"]["cores"].as_u64().unwrap() >= 1);
    assert!(doc["host"]["kernel"].is_string());
    let probes = doc["probes"].as_array().unwrap();
    let stressors = doc["stressors"].as_array().unwrap();
    assert!(probes.len() >= 14);
    assert!(stressors.len() >= 8);
    for p in probes.iter().chain(stressors) {
        assert!(p["name"].is_string());
        assert!(p["class"].is_string());
        assert!(p["supported"]["ok"].is_boolean());
        if p["supported"]["ok"] == false {
            assert!(p["supported"]["reason"].is_string());
        }
        for param in p["params"].as_array().unwrap() {
            assert!(param["default"].is_string(), "{param}");
            assert!(param["range"].is_string(), "{param}");
        }
    }
}

#[test]
fn probe_runs_and_prints_json_metrics() {
    let out = isobench()
        .args(["probe", "syscall", "--budget", "0.1", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["kind"], "probe");
    assert_eq!(doc["workload"], "syscall");
    let metrics = doc["metrics"].as_array().unwrap();
    assert_eq!(metrics.len(), 3);
    for m in metrics {
        let v = m["value"].as_f64().unwrap();
        assert!(v > 0.0 && v.is_finite(), "{m}");
        assert_eq!(m["unit"], "ns");
        assert_eq!(m["direction"], "lower");
    }
}

#[test]
fn unknown_probe_suggests_the_nearest_names() {
    isobench()
        .args(["probe", "cache-latncy"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("did you mean `cache-latency`"));
}

#[test]
fn a_stressor_name_given_to_probe_says_which_command() {
    isobench()
        .args(["probe", "forkbomb"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("isobench stress forkbomb"));
}

#[test]
fn bad_parameter_names_range_and_default() {
    isobench()
        .args(["probe", "syscall", "--set", "path=everything"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("path=everything"))
        .stderr(predicate::str::contains("default all"));
    isobench()
        .args(["probe", "syscall", "--set", "pth=read"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("did you mean `path`"));
}

#[test]
fn aggressive_stressors_are_refused_on_the_host_without_the_flag() {
    for name in ["forkbomb", "memhog", "disk"] {
        isobench()
            .args(["stress", name, "--duration", "0.2"])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("--allow-unsafe-host"));
    }
}

#[test]
fn stress_intensity_out_of_range_is_bad_input() {
    isobench()
        .args(["stress", "cpu", "--intensity", "101", "--duration", "0.1"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("0..=100"));
}
