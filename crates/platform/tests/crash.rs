//! A controller that dies (SIGKILL), is interrupted (Ctrl-C) or panics with live tenants
//! leaves nothing behind once cleanup has run.

mod common;

use std::sync::Mutex;
use std::time::Duration;

use common::*;
use isobench_platform::{cleanup, ObjectKind};

/// The tests of this file sweep dead runs: run them one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn helper() {
    run_helper_if_requested();
}

fn assert_objects_exist(id: &isobench_platform::RunId) {
    let found = leftovers(id);
    for kind in [
        "cgroup ", "netns ", "link ", "process ", "state ", "workdir ",
    ] {
        assert!(
            found.iter().any(|l| l.starts_with(kind)),
            "the run should have a {kind}object before the crash: {found:#?}"
        );
    }
}

#[test]
fn sigkilled_controller_is_cleaned_up() {
    if !net_or_skip("sigkilled_controller_is_cleaned_up") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (mut child, id) = start_crash_helper("crash-run", &dir.path().join("run"));
    assert_objects_exist(&id);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // Its tenants outlive it until cleanup.
    assert!(!leftovers(&id).is_empty());
    let report = cleanup(false);
    eprint!("{report}");
    let left = leftovers(&id);
    assert!(left.is_empty(), "left behind after cleanup: {left:#?}");
    let mine: Vec<_> = report
        .removed
        .iter()
        .filter(|r| r.run == id.as_str())
        .collect();
    for kind in [
        ObjectKind::Process,
        ObjectKind::Cgroup,
        ObjectKind::Netns,
        ObjectKind::Link,
        ObjectKind::Workdir,
        ObjectKind::StateDir,
    ] {
        assert!(
            mine.iter().any(|r| r.kind == kind),
            "cleanup should list a removed {kind}: {report}"
        );
    }
    assert!(
        !report.failed.iter().any(|f| f.run == id.as_str()),
        "cleanup failures: {report}"
    );
}

#[test]
fn ctrl_c_tears_everything_down() {
    if !net_or_skip("ctrl_c_tears_everything_down") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (mut child, id) = start_crash_helper("ctrlc-run", &dir.path().join("run"));
    assert_objects_exist(&id);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = wait_timeout(&mut child, Duration::from_secs(60)).expect("helper exits on SIGINT");
    assert_eq!(status.code(), Some(130));
    let left = leftovers(&id);
    assert!(left.is_empty(), "left behind after Ctrl-C: {left:#?}");
}

#[test]
fn panic_tears_everything_down() {
    if !net_or_skip("panic_tears_everything_down") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (mut child, id) = start_crash_helper("panic-run", &out);
    assert_objects_exist(&id);
    std::fs::write(out.with_extension("go"), "").unwrap();
    let status = wait_timeout(&mut child, Duration::from_secs(60)).expect("helper exits");
    assert!(!status.success());
    let left = leftovers(&id);
    assert!(left.is_empty(), "left behind after a panic: {left:#?}");
}

#[test]
fn objects_named_like_ours_without_a_run_id_are_never_swept() {
    if !net_or_skip("objects_named_like_ours_without_a_run_id_are_never_swept") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    // Someone else's cgroup and namespace that merely start with our prefix.
    let cg = std::path::Path::new("/sys/fs/cgroup/cpu/isobench-notarun-x");
    std::fs::create_dir_all(cg).unwrap();
    let ip = |args: &[&str]| {
        std::process::Command::new("ip")
            .args(args)
            .status()
            .unwrap()
            .success()
    };
    assert!(ip(&["netns", "add", "isobench-notarun"]));
    let report = cleanup(false);
    let kept = (
        cg.exists(),
        std::path::Path::new("/run/netns/isobench-notarun").exists(),
    );
    let _ = std::fs::remove_dir(cg);
    ip(&["netns", "del", "isobench-notarun"]);
    assert_eq!(kept, (true, true), "{report}");
    assert!(
        !report.removed.iter().any(|r| r.name.contains("notarun")),
        "{report}"
    );
}
