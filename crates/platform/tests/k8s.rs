//! The `k8s` platform against a real cluster (`KUBECONFIG=$(scripts/k8s-up)`).
//!
//! Needs root, a cluster whose API answers (the kubeconfig from `KUBECONFIG` or
//! `scripts/k8s-up`'s), its node on this machine, the static isobench binary
//! (`scripts/build-static --debug`, or `ISOBENCH_STATIC_EXE`) and busybox-static. Without
//! them each test prints SKIP with the reason and passes; `scripts/test` brings the cluster up
//! when it can be built here, lists the skips at its end, and under `CI=true` fails when the
//! cluster could not come up.
//!
//! The tests that make pods hold one lock ([`serial`]): the node has a single allocatable CPU,
//! and a test that asks for CPUs of a pod's own must not find another test's pods on it.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use isobench_agent::{AgentClient, Params, ProbeOpts, StressOpts};
use isobench_platform::k8s::{self, Kubectl};
use isobench_platform::{
    platform, AgentLaunch, Limits, ObjectKind, Platform, PlatformOptions, Role, RunGuard, Tenant,
    TenantSpec,
};

/// Set by `scripts/test` to why it could not bring a cluster up.
const SKIP_ENV: &str = "ISOBENCH_K8S_SKIP";

/// The helper mode of this test binary that leaves a pod behind and waits to be killed.
const ORPHAN_ENV: &str = "ISOBENCH_K8S_ORPHAN";

/// One pod-making test at a time.
fn serial() -> MutexGuard<'static, ()> {
    static CLUSTER: Mutex<()> = Mutex::new(());
    CLUSTER.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether the test can run; prints why not.
fn cluster_or_skip(test: &str) -> bool {
    if !common::root_or_skip(test) {
        return false;
    }
    if let Some(why) = std::env::var_os(SKIP_ENV) {
        common::skip("k8s", test, &why.to_string_lossy());
        return false;
    }
    match k8s::available() {
        Ok(()) => true,
        Err(e) => {
            common::skip("k8s", test, &e.to_string());
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
    let _one = serial();
    let guard = RunGuard::start().unwrap();
    let mut p = k8s_platform(&guard);
    assert_eq!(p.kind(), k8s::KIND);
    let ns = k8s::namespace(guard.id());

    // Refused before anything is created, naming the limit.
    for (limits, key) in [
        ("shares=512", "`shares`"),
        ("io_write_bps=1M", "`io_write_bps`"),
        // More than the kubelet's podPidsLimit (1024 under scripts/k8s-up).
        ("pids=100000", "`pids`"),
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
    // Half a CPU is not a CPU of its own: the pod runs in the shared pool, read back.
    assert!(
        notes.contains("CPUs: the node's shared pool, now cpu "),
        "{notes}"
    );
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
    let _one = serial();
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

/// The cgroup directory of a tenant's container in the hierarchy that has `file`.
fn cgroup_with(tenant: &dyn Tenant, file: &str) -> std::path::PathBuf {
    tenant
        .info()
        .cgroups
        .iter()
        .find(|d| d.join(file).is_file())
        .unwrap_or_else(|| panic!("no cgroup of {} has {file}", tenant.name()))
        .clone()
}

fn read_u64(path: &std::path::Path) -> u64 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .parse()
        .unwrap()
}

/// The kubelet's reserved CPUs on this machine's node (never a pod's own).
fn reserved_cpus() -> Vec<u32> {
    let k = kubectl();
    let nodes = k8s::cluster::nodes(&k).unwrap();
    let node = nodes
        .iter()
        .find(|n| n.labels.contains_key("isobench/k8s-up"))
        .or(nodes.first())
        .unwrap();
    let cfg = k8s::cluster::kubelet_config(&k, &node.name).unwrap();
    cfg.reserved_system_cpus
        .map(|r| {
            isobench_platform::CpuList::parse(&r)
                .unwrap()
                .iter()
                .collect()
        })
        .unwrap_or_default()
}

/// A cpuset of one CPU becomes one CPU of the pod's own, chosen by the kubelet's static CPU
/// manager and read back from the pod's cgroup (the agent inside sees it too); a second
/// tenant that cannot have one (the node has one allocatable CPU) runs in the shared pool,
/// away from the first one's CPU, and its notes say so.
#[test]
fn k8s_cpuset_becomes_cpus_of_the_pods_own() {
    let test = "k8s_cpuset_becomes_cpus_of_the_pods_own";
    if !cluster_or_skip(test) {
        return;
    }
    let _one = serial();
    let reserved = reserved_cpus();
    let guard = RunGuard::start().unwrap();
    let mut p = k8s_platform(&guard);
    let own = p
        .create_tenant(
            &TenantSpec::new("own", Role::Victim)
                .with_limits(Limits::parse("cpuset=0,memory=128M").unwrap()),
        )
        .unwrap();
    let notes = own.info().notes.join("; ");
    eprintln!("k8s: tenant own: {} ({notes})", own.info().limits);
    assert!(
        notes.contains("1 CPU(s) of its own, chosen by the kubelet's static CPU manager")
            && notes.contains("QoS class Guaranteed"),
        "{notes}"
    );
    let mine: Vec<u32> = own.info().limits.cpuset.as_ref().unwrap().iter().collect();
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert!(!reserved.contains(&mine[0]), "{mine:?} is reserved");
    let read = own.effective_limits().unwrap();
    assert_eq!(read.cpuset, own.info().limits.cpuset, "{read:?}");
    let conn = own.start_agent(&launch(own.as_ref())).unwrap();
    let (r, w, mut process) = conn.split();
    let client = AgentClient::new("own", r, w).with_timeout(Duration::from_secs(60));
    let hello = client.hello().unwrap();
    assert_eq!(
        hello.env.cpus,
        vec![mine[0] as usize],
        "the agent's CPUs in the pod"
    );
    drop(client);
    process.close(Duration::from_secs(5));

    let shared = p
        .create_tenant(
            &TenantSpec::new("shared", Role::Aggressor)
                .with_limits(Limits::parse("cpuset=1,memory=128M").unwrap()),
        )
        .unwrap();
    let notes = shared.info().notes.join("; ");
    eprintln!("k8s: tenant shared: {} ({notes})", shared.info().limits);
    assert!(
        notes.contains("NOT given") && notes.contains("shared pool"),
        "{notes}"
    );
    let theirs: Vec<u32> = shared
        .effective_limits()
        .unwrap()
        .cpuset
        .unwrap()
        .iter()
        .collect();
    assert!(
        !theirs.is_empty() && !theirs.contains(&mine[0]),
        "{theirs:?}"
    );
    drop(own);
    drop(shared);
    p.teardown().unwrap();
    guard.finish();
}

/// A fork bomb in a pod is held at the tenant's pids limit (isobench's, on the container,
/// under the kubelet's podPidsLimit on the pod): the pod's task count stays at the limit,
/// forks outside the pod (on the host and in a neighbouring pod) keep working, and nothing
/// of it is left after the teardown.
#[test]
fn k8s_fork_bomb_is_contained_in_its_pod() {
    let test = "k8s_fork_bomb_is_contained_in_its_pod";
    if !cluster_or_skip(test) {
        return;
    }
    let _one = serial();
    const LIMIT: u64 = 64;
    let guard = RunGuard::start().unwrap();
    let mut p = k8s_platform(&guard);
    let ns = k8s::namespace(guard.id());
    let bomb = p
        .create_tenant(
            &TenantSpec::new("bomb", Role::Aggressor)
                .with_limits(Limits::parse(&format!("pids={LIMIT},memory=256M")).unwrap()),
        )
        .unwrap();
    let neighbour = p
        .create_tenant(
            &TenantSpec::new("neighbour", Role::Victim)
                .with_limits(Limits::parse("memory=128M").unwrap()),
        )
        .unwrap();
    let notes = bomb.info().notes.join("; ");
    assert!(notes.contains("written by isobench"), "{notes}");
    assert_eq!(bomb.effective_limits().unwrap().pids, Some(LIMIT));
    let pids = cgroup_with(bomb.as_ref(), "pids.current");
    let pod_pids = pids.parent().unwrap().to_path_buf();
    let pod_limit = std::fs::read_to_string(pod_pids.join("pids.max")).unwrap();

    let conn = bomb.start_agent(&launch(bomb.as_ref())).unwrap();
    let (r, w, mut process) = conn.split();
    let client = AgentClient::new("bomb", r, w).with_timeout(Duration::from_secs(60));
    client.hello().unwrap();
    let opts = StressOpts {
        contained: true,
        sample_interval: Some(Duration::from_millis(250)),
        ..StressOpts::default()
    };
    client
        .start_stressor("fb", "forkbomb", 100, Params::new(), &opts)
        .expect("the fork bomb starts");
    let (mut peak, mut at_limit, mut looks) = (0, 0, 0);
    let mut host_forks = 0;
    let end = Instant::now() + Duration::from_secs(4);
    while Instant::now() < end {
        let n = read_u64(&pids.join("pids.current"));
        peak = peak.max(n);
        looks += 1;
        if n == LIMIT {
            at_limit += 1;
        }
        let st = Command::new("true").status().expect("a fork on the host");
        assert!(st.success());
        host_forks += 1;
        thread::sleep(Duration::from_millis(20));
    }
    let (code, out) = sh(neighbour.as_ref(), "echo forked");
    assert_eq!(
        (code, out.as_str()),
        (Some(0), "forked\n"),
        "the neighbour pod forks"
    );
    let hits = bomb.usage().unwrap().pids_limit_hits.unwrap_or(0);
    let report = client.stop_stressor("fb").expect("the fork bomb stops");
    eprintln!(
        "k8s: fork bomb: pids.current peak {peak} (limit {LIMIT}, pod limit {}), at the limit \
         in {at_limit} of {looks} looks, {hits} fork(s) refused by the limit, {host_forks} \
         forks on the host meanwhile; report {:?}",
        pod_limit.trim(),
        report.notes
    );
    assert!(peak <= LIMIT, "{peak} tasks in a pod limited to {LIMIT}");
    assert!(
        at_limit > 0,
        "the bomb never reached the limit (peak {peak})"
    );
    assert!(hits > 0, "the limit refused no fork");
    drop(client);
    process.close(Duration::from_secs(5));

    let dirs: Vec<std::path::PathBuf> = bomb
        .info()
        .cgroups
        .iter()
        .chain(neighbour.info().cgroups.iter())
        .cloned()
        .collect();
    let workdirs = [
        bomb.workdir().to_path_buf(),
        neighbour.workdir().to_path_buf(),
    ];
    bomb.teardown().unwrap();
    neighbour.teardown().unwrap();
    drop(bomb);
    drop(neighbour);
    p.teardown().unwrap();
    drop(p);
    assert!(pods_of_run(guard.id().as_str()).is_empty());
    assert!(!namespace_live(&ns));
    for w in &workdirs {
        assert!(!w.exists(), "{} is left", w.display());
    }
    // The kubelet removes the pods' cgroups once it has seen them go.
    let end = Instant::now() + Duration::from_secs(60);
    while let Some(d) = dirs.iter().find(|d| d.exists()) {
        assert!(Instant::now() < end, "{} is left", d.display());
        thread::sleep(Duration::from_millis(500));
    }
    guard.finish();
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
