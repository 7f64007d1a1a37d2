//! Containment as a user meets it: aggressive stressors in cgroup tenants, from the command
//! line. Needs root and cgroup controllers; skips with the reason otherwise.

use std::process::{Command as StdCommand, Stdio};
use std::time::Duration;

use assert_cmd::Command;

fn isobench() -> Command {
    Command::cargo_bin("isobench").expect("binary built")
}

/// Why the cgroup platform cannot be used here, if it cannot.
fn skip_reason() -> Option<String> {
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root".into());
    }
    for c in ["pids", "memory", "cpu"] {
        let v1 = format!("/sys/fs/cgroup/{c}");
        let v2 = "/sys/fs/cgroup/cgroup.controllers";
        let has_v2 = std::fs::read_to_string(v2).is_ok_and(|s| s.contains(c));
        if !std::path::Path::new(&v1).exists() && !has_v2 {
            return Some(format!("cgroup controller {c} is missing"));
        }
    }
    None
}

/// The tests look at every isobench cgroup on the host, so they run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

macro_rules! require_cgroup {
    () => {
        let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(why) = skip_reason() {
            eprintln!("skipped: {why}");
            return;
        }
    };
}

fn isobench_objects() -> Vec<String> {
    let mut out = Vec::new();
    for c in ["cpu", "memory", "pids", "blkio", "cpuset", "freezer"] {
        if let Ok(rd) = std::fs::read_dir(format!("/sys/fs/cgroup/{c}")) {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().to_string();
                if n.starts_with("isobench-") {
                    out.push(format!("{c}/{n}"));
                }
            }
        }
    }
    out
}

fn json_of(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "status {:?}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON output")
}

fn note(doc: &serde_json::Value, key: &str) -> Option<u64> {
    doc["report"]["notes"].as_array()?.iter().find_map(|n| {
        n.as_str()?
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{key}="))?.parse().ok())
    })
}

#[test]
fn memhog_beyond_its_limit_is_oom_killed_inside_its_tenant_only() {
    require_cgroup!();
    // A neighbour outside the tenant that must survive.
    let mut neighbour = StdCommand::new("sleep")
        .arg("30")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let out = isobench()
        .args([
            "stress",
            "memhog",
            "--platform",
            "cgroup",
            "--limits",
            "memory=64M",
        ])
        .args(["--duration", "2", "--json"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let doc = json_of(&out);
    let oom = doc["tenant"]["usage"]["oom_kills"].as_u64().unwrap();
    assert!(
        oom >= 1,
        "no OOM kill read back: {}",
        doc["tenant"]["usage"]
    );
    assert!(note(&doc, "hog_killed").unwrap() >= 1, "{}", doc["report"]);
    // The stressor's own driver survived to report, and so did the neighbour.
    assert!(doc["report"]["ops"].as_u64().unwrap() > 0);
    assert!(
        neighbour.try_wait().unwrap().is_none(),
        "the neighbour died"
    );
    neighbour.kill().unwrap();
    let _ = neighbour.wait();
    assert!(
        isobench_objects().is_empty(),
        "left behind: {:?}",
        isobench_objects()
    );
}

#[test]
fn forkbomb_is_held_at_its_pids_limit_and_leaves_nothing() {
    require_cgroup!();
    let out = isobench()
        .args([
            "stress",
            "forkbomb",
            "--platform",
            "cgroup",
            "--limits",
            "pids=64",
        ])
        .args(["--duration", "2", "--json"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let doc = json_of(&out);
    let peak = note(&doc, "peak_population").unwrap();
    assert!(
        peak < 64,
        "bomb population {peak} reached the tenant's limit of 64 tasks"
    );
    let hits = doc["tenant"]["usage"]["pids_limit_hits"].as_u64().unwrap();
    assert!(
        hits > 0,
        "the bomb never reached the limit: {}",
        doc["tenant"]["usage"]
    );
    assert!(doc["report"]["ops"].as_u64().unwrap() > 0);
    assert!(
        isobench_objects().is_empty(),
        "left behind: {:?}",
        isobench_objects()
    );
}

#[test]
fn a_probe_runs_inside_a_limited_cgroup_tenant() {
    require_cgroup!();
    let out = isobench()
        .args([
            "probe",
            "syscall",
            "--platform",
            "cgroup",
            "--limits",
            "cpus=1,memory=256M,pids=64",
        ])
        .args(["--budget", "0.2", "--json"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let doc = json_of(&out);
    assert_eq!(
        doc["tenant"]["info"]["limits"],
        "cpus=1,memory=256M,pids=64"
    );
    assert!(doc["metrics"][0]["value"].as_f64().unwrap() > 0.0);
    assert!(
        isobench_objects().is_empty(),
        "left behind: {:?}",
        isobench_objects()
    );
}

#[test]
fn bad_limits_create_nothing() {
    require_cgroup!();
    let before = isobench_objects();
    for (limits, says) in [
        ("memry=1G", "did you mean `memory`"),
        ("memory=lots", "memory=lots"),
        ("cpuset=0-99", "cpuset"),
    ] {
        let out = isobench()
            .args([
                "probe",
                "syscall",
                "--platform",
                "cgroup",
                "--limits",
                limits,
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{limits}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{limits}: {err}");
    }
    assert_eq!(isobench_objects(), before);
}

#[test]
fn a_controller_killed_mid_run_is_cleaned_up_by_cleanup() {
    require_cgroup!();
    let bin = assert_cmd::cargo::cargo_bin("isobench");
    let mut child = StdCommand::new(&bin)
        .args([
            "stress",
            "cpu",
            "--platform",
            "cgroup",
            "--limits",
            "cpus=0.5",
            "--duration",
            "60",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until its tenant exists.
    let t0 = std::time::Instant::now();
    while isobench_objects().is_empty() && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !isobench_objects().is_empty(),
        "the run never created its tenant"
    );
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap(); // SIGKILL: no handler runs
    child.wait().unwrap();
    let out = isobench().args(["cleanup"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.contains("removed"),
        "cleanup listed nothing: {listed}"
    );
    assert!(
        isobench_objects().is_empty(),
        "left behind: {:?}",
        isobench_objects()
    );
    // No agent of that run is left either.
    let ps = StdCommand::new("ps")
        .args(["-eo", "args"])
        .output()
        .unwrap();
    let agents = String::from_utf8_lossy(&ps.stdout)
        .lines()
        .filter(|l| l.contains("isobench agent"))
        .count();
    assert_eq!(agents, 0, "an agent survived");
}
