//! The `k8s` platform against a real cluster (`KUBECONFIG=$(scripts/k8s-up)`).
//!
//! Needs root, a cluster whose API answers (the kubeconfig from `KUBECONFIG` or
//! `scripts/k8s-up`'s), its node on this machine, the static isobench binary
//! (`scripts/build-static --debug`, or `ISOBENCH_STATIC_EXE`) and busybox-static. Without
//! them each test prints SKIP with the reason and passes (also under `CI=true`: the cluster
//! is not part of CI).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use isobench_agent::{AgentClient, Params, ProbeOpts};
use isobench_platform::k8s::{self, Kubectl};
use isobench_platform::{
    platform, AgentLaunch, Limits, ObjectKind, Platform, PlatformOptions, Role, RunGuard, Tenant,
    TenantSpec,
};

/// The helper mode of this test binary that leaves a pod behind and waits to be killed.
const ORPHAN_ENV: &str = "ISOBENCH_K8S_ORPHAN";

/// Whether the test can run; prints why not.
fn cluster_or_skip(test: &str) -> bool {
    if !common::root_or_skip(test) {
        return false;
    }
    match k8s::available() {
        Ok(()) => true,
        Err(e) => {
            common::skip(test, &e.to_string());
            false
        }
    }
}

fn k8s_platform(guard: &RunGuard) -> Box<dyn Platform> {
    platform(k8s::KIND, PlatformOptions::new(guard.context())).expect("building the k8s platform")
}

fn kubectl() -> Kubectl {
    Kubectl::new(None).expect("kubectl")
}

/// Whether namespace `ns` exists and is not being deleted.
fn namespace_live(ns: &str) -> bool {
    match kubectl().json(&["get", "namespace", ns, "--ignore-not-found"]) {
        Ok(v) => v["status"]["phase"].as_str() == Some("Active"),
        Err(_) => false,
    }
}

fn pods_of_run(run: &str) -> Vec<String> {
    let sel = format!("{}={run}", k8s::RUN_LABEL);
    let v = kubectl()
        .json(&["get", "pods", "-A", "-l", &sel])
        .expect("kubectl get pods");
    v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
        .collect()
}

fn launch(tenant: &dyn Tenant) -> AgentLaunch {
    AgentLaunch {
        exe: "isobench".into(),
        log: tenant.workdir().join("agent.log"),
    }
}

/// Runs `sh -c script` in the tenant and returns its exit code and standard output.
fn sh(tenant: &dyn Tenant, script: &str) -> (Option<i32>, String) {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = tenant.spawn(cmd).expect("spawn");
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let st = common::wait_timeout(&mut child, Duration::from_secs(60)).expect("exits");
    (st.code(), out)
}

#[test]
fn k8s_two_tenants_probe_and_limits() {
    let test = "k8s_two_tenants_probe_and_limits";
    if !cluster_or_skip(test) {
        return;
    }
    let guard = RunGuard::start().unwrap();
    let mut p = k8s_platform(&guard);
    assert_eq!(p.kind(), k8s::KIND);
    let ns = k8s::namespace(guard.id());

    // Refused before anything is created, naming the limit.
    for (limits, key) in [
        ("cpuset=1", "`cpuset`"),
        ("io_write_bps=1M", "`io_write_bps`"),
        ("pids=50", "`pids`"),
    ] {
        let e = p
            .create_tenant(
                &TenantSpec::new("refused", Role::Victim)
                    .with_limits(Limits::parse(limits).unwrap()),
            )
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains(key), "{e}");
    }
    assert!(!namespace_live(&ns), "nothing created for refused tenants");

    // Two tenants, both Guaranteed (the aggressor's memory is a safe default); the node has
    // one allocatable CPU (CPU 0 is reserved), so the CPU requests add up to less.
    let victim = p
        .create_tenant(
            &TenantSpec::new("victim", Role::Victim)
                .with_limits(Limits::parse("cpus=0.5,memory=128M").unwrap()),
        )
        .unwrap();
    let other = p
        .create_tenant(
            &TenantSpec::new("Noisy_1", Role::Aggressor)
                .with_limits(Limits::parse("cpus=0.25").unwrap()),
        )
        .unwrap();
    assert!(namespace_live(&ns));
    let mut pods = pods_of_run(guard.id().as_str());
    pods.sort();
    assert_eq!(pods.len(), 2, "{pods:?}");
    let notes = victim.info().notes.join("; ");
    assert!(notes.contains("QoS class Guaranteed"), "{notes}");
    let notes = other.info().notes.join("; ");
    assert!(
        notes.contains("QoS class Guaranteed") && notes.contains("safe default memory"),
        "{notes}"
    );

    // Limits read back from the pods' cgroups on this machine.
    let l = victim.effective_limits().unwrap();
    assert_eq!(l.cpus, Some(0.5), "{l:?}");
    assert_eq!(l.memory, Some(128 << 20), "{l:?}");
    assert_eq!(l.pids, Some(1024), "{l:?}");
    let l = other.effective_limits().unwrap();
    assert_eq!(l.cpus, Some(0.25), "{l:?}");
    assert_eq!(l.memory, other.info().limits.memory, "{l:?}");

    // The agent answers from inside the pod, sees the pod's limits and runs a probe.
    let conn = victim.start_agent(&launch(victim.as_ref())).unwrap();
    let (r, w, mut process) = conn.split();
    let client = AgentClient::new("victim", r, w).with_timeout(Duration::from_secs(60));
    let hello = client.hello().expect("hello from the pod's agent");
    assert_eq!(hello.env.mem_limit, Some(128 << 20), "{:?}", hello.env);
    client.ping().unwrap();
    let opts = ProbeOpts {
        budget: Some(Duration::from_millis(300)),
        ..ProbeOpts::default()
    };
    let res = client
        .run_probe("cpu-int", Params::new(), &opts)
        .expect("cpu-int in the pod");
    assert!(!res.metrics.is_empty(), "{res:?}");
    eprintln!("k8s: cpu-int in pod victim: {:?}", res.metrics[0]);

    // Processes run in the workdir with the tenant's tags; the freezer works.
    let (code, out) = sh(other.as_ref(), "echo $ISOBENCH_TENANT; pwd");
    assert_eq!(code, Some(0));
    assert_eq!(
        out,
        format!(
            "{}\n{}\n",
            other.info().object_name,
            other.workdir().display()
        )
    );
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "echo \"$FROM_CALLER\""])
        .env("FROM_CALLER", "a b;$c")
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let out = other.spawn(cmd).unwrap().wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "a b;$c\n");
    let mut cmd = Command::new("true");
    cmd.current_dir("/tmp");
    let e = other.spawn(cmd).unwrap_err().to_string();
    assert!(e.contains("working directory"), "{e}");
    victim.set_frozen(true).unwrap();
    victim.set_frozen(false).unwrap();
    client.ping().expect("the agent answers after a thaw");
    let u = victim.usage().unwrap();
    assert!(u.memory_current.is_some(), "{u:?}");
    drop(client);
    process.close(Duration::from_secs(5));

    // The killer ends the agent but not the pod; a new agent starts.
    let conn = victim.start_agent(&launch(victim.as_ref())).unwrap();
    let (r, w, mut process) = conn.split();
    let client = AgentClient::new("victim", r, w).with_timeout(Duration::from_secs(60));
    client.hello().unwrap();
    let killed = victim.killer().kill().unwrap();
    assert!(killed >= 1, "{killed}");
    assert!(client.ping().is_err(), "the agent is gone");
    drop(client);
    process.close(Duration::from_secs(5));
    let conn = victim.start_agent(&launch(victim.as_ref())).unwrap();
    let (r, w, mut process) = conn.split();
    let client = AgentClient::new("victim", r, w).with_timeout(Duration::from_secs(60));
    client.hello().expect("a restarted agent answers");
    drop(client);
    process.close(Duration::from_secs(5));

    let wd = victim.workdir().to_path_buf();
    victim.teardown().unwrap();
    assert!(!wd.exists());
    drop(victim);
    drop(other);
    assert!(pods_of_run(guard.id().as_str()).is_empty());
    p.teardown().unwrap();
    drop(p);
    assert!(!namespace_live(&ns));
    guard.finish();
}

#[test]
fn k8s_killed_run_is_swept() {
    let test = "k8s_killed_run_is_swept";
    if !cluster_or_skip(test) {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "orphan_helper",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ORPHAN_ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut found = None;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(rest) = line.split_once("ORPHAN ").map(|(_, r)| r) {
            found = Some(rest.trim().to_string());
            break;
        }
    }
    let run = found.expect("the helper reported its run");
    child.kill().unwrap();
    child.wait().unwrap();
    let ns = format!("isobench-{run}");
    assert!(namespace_live(&ns));
    assert_eq!(pods_of_run(&run).len(), 1);

    let t0 = Instant::now();
    let report = isobench_platform::cleanup(false);
    eprintln!("k8s: sweep took {:?}:\n{report}", t0.elapsed());
    assert!(
        report
            .removed
            .iter()
            .any(|r| r.kind == ObjectKind::Namespace && r.run == run && r.name == ns),
        "{report}"
    );
    // The namespace is deleted in the background; it goes once its frozen pod is gone.
    let end = Instant::now() + Duration::from_secs(90);
    while kubectl()
        .json(&["get", "namespace", &ns, "--ignore-not-found"])
        .map(|v| !v.is_null() && v.as_object().is_some_and(|o| !o.is_empty()))
        .unwrap_or(false)
    {
        assert!(Instant::now() < end, "namespace {ns} is still there");
        thread::sleep(Duration::from_millis(500));
    }
    assert!(pods_of_run(&run).is_empty());
}

/// The helper mode of this test binary that sweeps and prints what the sweep did.
const SWEEP_ENV: &str = "ISOBENCH_K8S_SWEEP";

/// With no cluster configured, or one that does not answer, the sweep does nothing, says
/// nothing and is quick.
#[test]
fn k8s_sweep_without_a_cluster_is_quiet() {
    let test = "k8s_sweep_without_a_cluster_is_quiet";
    if !common::root_or_skip(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dead = dir.path().join("dead.kubeconfig");
    std::fs::write(
        &dead,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: \
         https://127.0.0.1:1\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: \
         u\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n",
    )
    .unwrap();
    let missing = dir.path().join("missing.kubeconfig");
    for kubeconfig in [&dead, &missing] {
        let exe = std::env::current_exe().unwrap();
        let t0 = Instant::now();
        let out = Command::new(exe)
            .args(["--exact", "sweep_helper", "--nocapture", "--test-threads=1"])
            .env(SWEEP_ENV, "1")
            .env("KUBECONFIG", kubeconfig)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let took = t0.elapsed();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}");
        assert!(!text.contains("k8s-ns"), "{text}");
        assert!(took < Duration::from_secs(10), "the sweep took {took:?}");
        eprintln!(
            "k8s: sweep with KUBECONFIG={} took {took:?}",
            kubeconfig.display()
        );
    }
}

/// Not a test on its own: with `ISOBENCH_K8S_SWEEP` set, sweeps dead runs and prints the
/// report.
#[test]
fn sweep_helper() {
    if std::env::var(SWEEP_ENV).is_err() {
        return;
    }
    let report = isobench_platform::cleanup(false);
    let mut out = std::io::stdout().lock();
    writeln!(out, "SWEPT\n{report}").unwrap();
    for f in &report.failed {
        writeln!(out, "failed {f:?}").unwrap();
    }
}

/// Not a test on its own: with `ISOBENCH_K8S_ORPHAN` set, makes a frozen pod, reports its
/// run and waits to be killed.
#[test]
fn orphan_helper() {
    if std::env::var(ORPHAN_ENV).is_err() {
        return;
    }
    let guard = RunGuard::start().unwrap();
    let mut p = k8s_platform(&guard);
    let t = p
        .create_tenant(&TenantSpec::new("orphan", Role::Aggressor))
        .unwrap();
    t.set_frozen(true).unwrap();
    let mut out = std::io::stdout().lock();
    writeln!(out, "ORPHAN {}", guard.id()).unwrap();
    out.flush().unwrap();
    drop(out);
    std::mem::forget(t);
    std::mem::forget(p);
    std::mem::forget(guard);
    loop {
        thread::sleep(Duration::from_secs(1));
    }
}
