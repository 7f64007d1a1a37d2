//! The test command itself: skipped tests are recorded and listed last, grouped, with their
//! reasons; every package is installed explicitly; the suite runs to the end.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

const HELPER_ENV: &str = "ISOBENCH_SKIPS_HELPER";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// With `ISOBENCH_SKIPS_HELPER` set: skips three tests of two groups, as tests do.
#[test]
fn skip_helper() {
    if std::env::var_os(HELPER_ENV).is_none() {
        return;
    }
    common::skip("k8s", "first", "scripts/k8s-up failed:\tno Go");
    common::skip("k8s", "second", "scripts/k8s-up failed:\tno Go");
    common::skip("root", "third", "needs root\n(running as uid 1000)");
}

#[test]
fn a_run_that_skips_tests_ends_by_listing_each_group_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("skipped.tsv");
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "skip_helper", "--nocapture", "--test-threads=1"])
        .env(HELPER_ENV, "1")
        .env("ISOBENCH_SKIP_LOG", &log)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // Printed past the harness's capture too.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("SKIP first (k8s): scripts/k8s-up failed: no Go"),
        "{stderr}"
    );

    let listed = Command::new("bash")
        .arg(repo().join("scripts/list-skips"))
        .arg(&log)
        .output()
        .unwrap();
    assert!(listed.status.success(), "{listed:?}");
    assert_eq!(
        String::from_utf8_lossy(&listed.stdout),
        "scripts/test: skipped test groups (2):\n\
         scripts/test:   k8s (2 tests): scripts/k8s-up failed: no Go\n\
         scripts/test:   root (1 test): needs root (running as uid 1000)\n"
    );
    let none = Command::new("bash")
        .arg(repo().join("scripts/list-skips"))
        .arg(dir.path().join("absent"))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&none.stdout),
        "scripts/test: no test skipped\n"
    );
}

/// The defect: docker.io and podman installed together left podman's `--init` without
/// catatonit (docker.io's tini satisfied podman's recommendation), and the first failing
/// test binary stopped the suite.
#[test]
fn the_test_command_installs_podmans_init_explicitly_and_runs_to_the_end() {
    let script = std::fs::read_to_string(repo().join("scripts/test")).unwrap();
    let pkgs = script
        .split_once("pkgs=(")
        .and_then(|(_, rest)| rest.split_once("\n)"))
        .map(|(list, _)| list)
        .expect("scripts/test names its packages in pkgs=( ... )");
    let named: Vec<&str> = pkgs
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .flat_map(str::split_whitespace)
        .collect();
    for p in [
        "catatonit",
        "tini",
        "podman",
        "runc",
        "docker.io",
        "busybox-static",
        "qemu-system-x86",
        "etcd-server",
        "containerd",
        "containernetworking-plugins",
        "chromium",
        "python3-venv",
    ] {
        assert!(
            named.contains(&p),
            "scripts/test does not name {p}: {named:?}"
        );
    }
    assert!(script.contains("--no-install-recommends"));
    assert!(script.contains("--no-fail-fast"));
    assert!(script.contains("scripts/list-skips"));
}
