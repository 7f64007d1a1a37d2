//! `isobench run --platform k8s` on a real cluster (`KUBECONFIG=$(scripts/k8s-up)`): the
//! quick preset's tenants, placement and limits (with short trials), and a run killed with
//! SIGKILL that the next command's sweep cleans up.
//!
//! Needs root and a cluster whose API answers, with its node on this machine (see
//! `isobench_platform::k8s::available`); without them each test prints SKIP with the reason
//! and passes. `scripts/test` brings the cluster up when it can.

mod common;

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use common::{code, isobench, spawnable, text};
use isobench_platform::k8s::{self, Kubectl};

/// One run on the cluster at a time: the node has one allocatable CPU.
fn serial() -> MutexGuard<'static, ()> {
    static CLUSTER: Mutex<()> = Mutex::new(());
    CLUSTER.lock().unwrap_or_else(|p| p.into_inner())
}

fn cluster_or_skip(test: &str) -> bool {
    if unsafe { libc::geteuid() } != 0 {
        common::skip_test("root", test, "needs root");
        return false;
    }
    // Set by `scripts/test` to why it could not bring a cluster up.
    if let Some(why) = std::env::var_os("ISOBENCH_K8S_SKIP") {
        common::skip_test("k8s", test, &why.to_string_lossy());
        return false;
    }
    match k8s::available() {
        Ok(()) => true,
        Err(e) => {
            common::skip_test("k8s", test, &e.to_string());
            false
        }
    }
}

/// The quick preset with short trials and a small time budget: the same tenants, limits,
/// placement, probes and stressors.
fn short_quick(max_time: &str) -> String {
    let mut s = include_str!("../../../examples/quick.toml").to_string();
    for (from, to) in [
        ("warmup = \"300ms\"", "warmup = \"100ms\"".to_string()),
        ("pilot = \"1.2s\"", "pilot = \"0.5s\"".to_string()),
        ("onoff_max = \"4s\"", "onoff_max = \"1s\"".to_string()),
        ("max = 10", "max = 1".to_string()),
        ("max_time = \"5m\"", format!("max_time = \"{max_time}\"")),
    ] {
        assert!(s.contains(from), "examples/quick.toml has no `{from}`");
        s = s.replacen(from, &to, 1);
    }
    s
}

/// The live namespaces of isobench runs on the cluster.
fn run_namespaces(k: &Kubectl) -> BTreeSet<String> {
    let sel = k8s::RUN_LABEL;
    let v = k
        .json(&["get", "namespaces", "-l", sel])
        .expect("kubectl get namespaces");
    v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|n| n["status"]["phase"].as_str() == Some("Active"))
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

/// Whether namespace `ns` exists at all (also while it is being deleted).
fn namespace_exists(k: &Kubectl, ns: &str) -> bool {
    k.json(&["get", "namespace", ns, "--ignore-not-found"])
        .map(|v| v.as_object().is_some_and(|o| !o.is_empty()))
        .unwrap_or(false)
}

fn running_pods(k: &Kubectl, ns: &str) -> usize {
    k.json(&["get", "pods", "-n", ns])
        .map(|v| {
            v["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["status"]["phase"].as_str() == Some("Running"))
                .count()
        })
        .unwrap_or(0)
}

/// Polls `ready` every half second until it gives something, while `child` runs; panics
/// with the child's standard error when it ends first, or after `secs` seconds.
fn until_while_running<T>(
    child: &mut std::process::Child,
    what: &str,
    secs: u64,
    mut ready: impl FnMut() -> Option<T>,
) -> T {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(t) = ready() {
            return t;
        }
        if let Ok(Some(st)) = child.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("the run ended ({st}) before {what}:\n{err}");
        }
        assert!(Instant::now() < end, "not within {secs} s: {what}");
        thread::sleep(Duration::from_millis(500));
    }
}

/// What is left in /var/tmp of the run whose namespace is `ns` (its tenants' workdirs).
fn workdirs_of(ns: &str) -> Vec<String> {
    let prefix = format!("{ns}-");
    names_in("/var/tmp", |n| n.starts_with(&prefix))
}

/// The names in `dir` that `keep` keeps.
fn names_in(dir: &str, keep: impl Fn(&str) -> bool) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| keep(n))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn k8s_quick_preset_runs_and_prints_its_table() {
    let test = "k8s_quick_preset_runs_and_prints_its_table";
    if !cluster_or_skip(test) {
        return;
    }
    let _one = serial();
    let k = Kubectl::new(None).unwrap();
    let before = run_namespaces(&k);
    let dir = tempfile::tempdir().unwrap();
    let scenario = common::write(dir.path(), "quick.toml", &short_quick("20s"));
    let db = dir.path().join("runs.db");
    let t0 = Instant::now();
    let out = isobench()
        .args(["run", &scenario, "--platform", "k8s", "--db"])
        .arg(&db)
        .timeout(Duration::from_secs(600))
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    eprintln!(
        "k8s: the short quick run took {:?}, exit {}\n{stdout}",
        t0.elapsed(),
        code(&out)
    );
    // 4: it ran, but some results are flagged (this shared machine is noisy).
    assert!(
        [0, 4].contains(&code(&out)),
        "exit {}\nstderr: {stderr}",
        code(&out)
    );
    assert!(stdout.contains("platform k8s"), "{stdout}");
    assert!(
        stdout.contains("Degradation of the victim") && stdout.contains("cpu@100"),
        "{stdout}"
    );
    for line in [
        "the k8s platform chooses each tenant's CPUs itself",
        "1 CPU(s) of its own, chosen by the kubelet's static CPU manager",
        "pids=256 written by isobench to the container's cgroup",
        "pids=128 written by isobench to the container's cgroup",
        "left out on the k8s platform",
    ] {
        assert!(stderr.contains(line), "no `{line}` in:\n{stderr}");
    }
    // The aggressor gets no CPU of its own on a node with one allocatable CPU, and says so;
    // on a bigger node it gets one.
    assert!(
        stderr.contains("NOT given") || stderr.matches("CPU(s) of its own, chosen").count() == 2,
        "{stderr}"
    );
    let after = run_namespaces(&k);
    let left: Vec<_> = after.difference(&before).collect();
    assert!(left.is_empty(), "namespaces left: {left:?}");
}

#[test]
fn k8s_killed_run_leaves_nothing_after_the_next_command() {
    let test = "k8s_killed_run_leaves_nothing_after_the_next_command";
    if !cluster_or_skip(test) {
        return;
    }
    let _one = serial();
    let k = Kubectl::new(None).unwrap();
    let before = run_namespaces(&k);
    let dir = tempfile::tempdir().unwrap();
    let scenario = common::write(dir.path(), "quick.toml", &short_quick("5m"));
    let db = dir.path().join("runs.db");
    let mut child = spawnable()
        .args(["run", &scenario, "--platform", "k8s", "-q", "--db"])
        .arg(&db)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the run's namespace with both pods running.
    let ns = until_while_running(&mut child, "its pods ran", 180, || {
        let new: Vec<String> = run_namespaces(&k).difference(&before).cloned().collect();
        match new.as_slice() {
            [ns] if running_pods(&k, ns) == 2 => Some(ns.clone()),
            _ => None,
        }
    });
    // Let the agents start, then kill the controller the hard way.
    thread::sleep(Duration::from_secs(3));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        namespace_exists(&k, &ns),
        "the killed run left no namespace"
    );
    assert!(
        !workdirs_of(&ns).is_empty(),
        "the killed run left no workdir"
    );

    // The next command sweeps what dead runs left before it starts its own.
    let out = isobench()
        .args([
            "probe",
            "syscall",
            "--platform",
            "cgroup",
            "--budget",
            "0.2",
            "--json",
        ])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "stderr: {}", text(&out.stderr));
    let end = Instant::now() + Duration::from_secs(90);
    while namespace_exists(&k, &ns) {
        assert!(Instant::now() < end, "namespace {ns} is still there");
        thread::sleep(Duration::from_millis(500));
    }
    let sel = format!("{}={}", k8s::RUN_LABEL, ns.trim_start_matches("isobench-"));
    let pods = k.json(&["get", "pods", "-A", "-l", &sel]).unwrap();
    assert_eq!(pods["items"].as_array().map_or(0, Vec::len), 0, "{pods}");
    assert!(workdirs_of(&ns).is_empty(), "left: {:?}", workdirs_of(&ns));
}

/// The node's kubeconfig copies of fleet runs' runners (removed when their agents end).
fn runner_kubeconfigs() -> Vec<String> {
    names_in("/run/isobench/runner", |n| n.ends_with(".kubeconfig"))
}

#[test]
fn k8s_nodes_fleet_run_measures_on_the_node_through_its_runner_pod() {
    let test = "k8s_nodes_fleet_run_measures_on_the_node_through_its_runner_pod";
    if !cluster_or_skip(test) {
        return;
    }
    let _one = serial();
    let k = Kubectl::new(None).unwrap();
    let before = run_namespaces(&k);
    let dir = tempfile::tempdir().unwrap();
    let scenario = common::write(dir.path(), "quick.toml", &short_quick("20s"));
    let db = dir.path().join("fleet.db");
    let t0 = Instant::now();
    let out = isobench()
        .args(["run", &scenario, "--platform", "k8s"])
        .args(["--nodes", "isobench/k8s-up=true", "--db"])
        .arg(&db)
        .timeout(Duration::from_secs(900))
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    eprintln!(
        "k8s: the fleet run took {:?}, exit {}\n{stdout}",
        t0.elapsed(),
        code(&out)
    );
    assert!(
        [0, 4].contains(&code(&out)),
        "exit {}\nstderr: {stderr}",
        code(&out)
    );
    assert!(
        stderr.contains("quick.toml on 1 nodes: isobench-k8s"),
        "{stderr}"
    );
    assert!(stderr.contains("[isobench-k8s] run "), "{stderr}");
    assert!(stderr.contains(", imported"), "{stderr}");
    assert!(stdout.contains("cpu@100"), "{stdout}");
    assert!(stdout.contains("\nNodes\n  isobench-k8s  run "), "{stdout}");
    for tag in ["kubelet=v1.37.2", "kernel=", "isobench/k8s-up=true"] {
        assert!(stdout.contains(tag), "no {tag} in {stdout}");
    }
    // The run was made on the node, by its runner: the node keeps its own copy.
    let ids = common::run_ids(&db);
    assert_eq!(ids.len(), 1, "{ids:?}");
    let on_node = common::run_ids(Path::new("/var/lib/isobench/runner/results.db"));
    assert!(on_node.contains(&ids[0]), "{ids:?} not in {on_node:?}");
    // Nothing is left: the run's namespace, the fleet's, the runner's credentials.
    let left: Vec<_> = run_namespaces(&k).difference(&before).cloned().collect();
    assert!(left.is_empty(), "namespaces left: {left:?}");
    assert!(
        runner_kubeconfigs().is_empty(),
        "{:?}",
        runner_kubeconfigs()
    );
}

#[test]
fn k8s_killed_fleet_run_leaves_nothing_after_the_next_command() {
    let test = "k8s_killed_fleet_run_leaves_nothing_after_the_next_command";
    if !cluster_or_skip(test) {
        return;
    }
    let _one = serial();
    let k = Kubectl::new(None).unwrap();
    let before = run_namespaces(&k);
    let dir = tempfile::tempdir().unwrap();
    let scenario = common::write(dir.path(), "quick.toml", &short_quick("5m"));
    let mut child = spawnable()
        .args(["run", &scenario, "--platform", "k8s", "-q"])
        .args(["--nodes", "isobench/k8s-up=true", "--db"])
        .arg(dir.path().join("fleet.db"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the node's run: a namespace with its two tenants' pods running.
    let made = until_while_running(&mut child, "the node's pods ran", 240, || {
        let new: Vec<String> = run_namespaces(&k).difference(&before).cloned().collect();
        (new.len() == 2 && new.iter().any(|ns| running_pods(&k, ns) == 2)).then_some(new)
    });
    thread::sleep(Duration::from_secs(3));
    child.kill().unwrap();
    child.wait().unwrap();

    // The node's run stops when its stream closes, removing its own; the next command
    // sweeps the dead coordinator's runner namespace.
    let out = isobench()
        .args(["cleanup"])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "stderr: {}", text(&out.stderr));
    let end = Instant::now() + Duration::from_secs(120);
    loop {
        let left: Vec<&String> = made.iter().filter(|ns| namespace_exists(&k, ns)).collect();
        if left.is_empty() && runner_kubeconfigs().is_empty() {
            break;
        }
        assert!(
            Instant::now() < end,
            "left: {left:?}, {:?}",
            runner_kubeconfigs()
        );
        // A later command sweeps what the node's run had not removed yet.
        let _ = isobench()
            .args(["cleanup"])
            .timeout(Duration::from_secs(60))
            .output();
        thread::sleep(Duration::from_secs(1));
    }
    for ns in &made {
        assert!(workdirs_of(ns).is_empty(), "left: {:?}", workdirs_of(ns));
    }
}

/// `isobench doctor` reports the cluster: context, server version, and each node with its
/// readiness, kubelet, kernel, instance type, CPU manager policy and podPidsLimit.
#[test]
fn k8s_doctor_reports_the_cluster() {
    let test = "k8s_doctor_reports_the_cluster";
    if !cluster_or_skip(test) {
        return;
    }
    let out = isobench()
        .args(["doctor"])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    let line = |name: &str| {
        stdout
            .lines()
            .find(|l| l[4..].starts_with(name))
            .unwrap_or_else(|| panic!("no `{name}` line in:\n{stdout}"))
            .to_string()
    };
    let cluster = line("k8s cluster");
    eprintln!("k8s: {cluster}");
    assert!(
        cluster.starts_with("ok ")
            && cluster.contains("context ")
            && cluster.contains("server v1."),
        "{cluster}"
    );
    let node = line("k8s node ");
    eprintln!("k8s: {node}");
    for part in [
        "Ready",
        "kubelet v1.",
        "kernel ",
        "instance type ",
        "CPU manager ",
        "podPidsLimit",
    ] {
        assert!(node.contains(part), "no `{part}` in {node}");
    }
}

/// Without a cluster, `isobench doctor` says exactly why none is usable.
#[test]
fn doctor_says_why_no_cluster_is_usable() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.kubeconfig");
    let out = isobench()
        .args(["doctor", "--json"])
        .env("KUBECONFIG", &missing)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let doc = common::json_of(&out);
    let checks = doc["checks"].as_array().unwrap();
    let c = checks
        .iter()
        .find(|c| c["name"] == "k8s cluster")
        .unwrap_or_else(|| panic!("no k8s cluster check: {doc}"));
    assert_eq!(c["ok"], false, "{c}");
    let detail = c["detail"].as_str().unwrap();
    assert!(
        detail.contains(&missing.display().to_string()) && detail.contains("does not exist"),
        "{detail}"
    );
    let out = isobench()
        .args(["doctor", "--json"])
        .env_remove("KUBECONFIG")
        .env("ISOBENCH_K8S_STATE", dir.path().join("no-state"))
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let doc = common::json_of(&out);
    let c = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "k8s cluster")
        .unwrap()
        .clone();
    assert_eq!(c["ok"], false, "{c}");
    assert!(
        c["detail"]
            .as_str()
            .unwrap()
            .starts_with("no kubeconfig: KUBECONFIG is not set"),
        "{c}"
    );
}
