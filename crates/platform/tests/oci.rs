//! The `oci` platform against the real engines: Docker (a daemon at `DOCKER_HOST`) and
//! Podman. Each test runs once per engine.
//!
//! Needs root, the engine, the static isobench binary (`scripts/build-static --debug`, or
//! `ISOBENCH_STATIC_EXE`) and busybox-static; `scripts/test` sets all of them up. Without
//! them a test prints why and passes, except under `CI=true`, where a missing engine fails.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use isobench_agent::AgentClient;
use isobench_platform::oci::{self, Engine};
use isobench_platform::{
    platform, AgentLaunch, Limits, NetSpec, ObjectKind, Platform, PlatformOptions, Role, RunGuard,
    Tenant, TenantSpec,
};

/// The helper mode of this test binary that leaves a container behind and waits to be
/// killed.
const ORPHAN_ENV: &str = "ISOBENCH_OCI_ORPHAN";

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The engine if the test can run, else prints why (and fails under CI).
fn engine_or_skip(test: &str, engine: &str) -> Option<()> {
    if !common::root_or_skip(test) {
        return None;
    }
    let why = match engine {
        "docker" => Engine::docker().err(),
        _ => Engine::podman().err(),
    }
    .map(|e| e.to_string())
    .or_else(|| oci::ImageSource::find().err().map(|e| format!("{e:#}")));
    match why {
        None => Some(()),
        Some(why) if in_ci() => panic!("{test}: {engine} is required under CI=true: {why}"),
        Some(why) => {
            common::skip(engine, test, &why);
            None
        }
    }
}

fn oci_platform(guard: &RunGuard, engine: &str) -> Box<dyn Platform> {
    oci_platform_with_init(guard, engine, None)
}

/// The platform with its containers' init chosen (`isobench`, or a static init's path).
fn oci_platform_with_init(guard: &RunGuard, engine: &str, init: Option<&str>) -> Box<dyn Platform> {
    let mut opts = PlatformOptions::new(guard.context());
    opts.oci_engine = Some(engine.to_string());
    opts.oci_init = init.map(str::to_string);
    platform(oci::KIND, opts).expect("building the oci platform")
}

/// The host's first static init that is not catatonit (tini-static, which Docker pulls in,
/// or dumb-init), or why there is none (and a failure under CI, where scripts/test installs
/// tini).
fn static_init_other_than_catatonit(test: &str) -> Option<std::path::PathBuf> {
    let candidates: Vec<_> = oci::init::default_candidates()
        .into_iter()
        .filter(|p| !p.to_string_lossy().contains("catatonit"))
        .collect();
    match oci::init::find_static_init(&candidates).0 {
        Some(p) => Some(p),
        None if in_ci() => panic!("{test}: no static tini or dumb-init under CI=true"),
        None => {
            common::skip(
                "static init",
                test,
                "no static tini or dumb-init installed (apt-get install tini)",
            );
            None
        }
    }
}

/// The process id of a container's first process, from the engine.
fn container_pid(engine: &str, name: &str) -> i32 {
    let out = engine_cmd(engine)
        .args(["inspect", "--format", "{{.State.Pid}}", name])
        .output()
        .expect("engine inspect");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a pid")
}

/// The engine's CLI with its global arguments, for checks from outside isobench.
fn engine_cmd(engine: &str) -> Command {
    let e = match engine {
        "docker" => Engine::docker(),
        _ => Engine::podman(),
    }
    .expect("engine");
    let mut c = Command::new(e.cli());
    match e.host() {
        Some(h) => {
            c.args(["-H", h]);
        }
        None => {
            c.args(["--runtime", "runc", "--cgroup-manager", "cgroupfs"]);
        }
    }
    c
}

fn containers_named(engine: &str, name: &str) -> Vec<String> {
    let out = engine_cmd(engine)
        .args([
            "ps",
            "-a",
            "--filter",
            &format!("name={name}"),
            "--format",
            "{{.Names}}",
        ])
        .output()
        .expect("engine ps");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.trim() == name)
        .map(str::to_string)
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

fn lifecycle(engine: &str) {
    let test = &format!("{engine}_lifecycle");
    if engine_or_skip(test, engine).is_none() {
        return;
    }
    let guard = RunGuard::start().unwrap();
    let mut p = oci_platform(&guard, engine);
    assert_eq!(p.kind(), oci::KIND);
    assert!(p.capabilities().freezer && p.capabilities().exec);
    let limits = Limits::parse("cpus=0.5,cpuset=0,memory=96M,pids=40").unwrap();
    let t = p
        .create_tenant(&TenantSpec::new("victim", Role::Victim).with_limits(limits.clone()))
        .unwrap();
    let name = t.info().object_name.clone();
    assert_eq!(containers_named(engine, &name), std::slice::from_ref(&name));
    assert!(!t.info().cgroups.is_empty());
    // Refused before anything is created, naming the fix.
    let e = p
        .create_tenant(&TenantSpec::new("victim", Role::Victim))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("already exists"), "{e}");
    let e = p
        .create_tenant(
            &TenantSpec::new("shaped", Role::Victim)
                .with_limits(Limits::parse("net_rate=10mbit").unwrap()),
        )
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("give the tenant a network"), "{e}");
    let shaped = guard.id().object_name("shaped");
    assert!(containers_named(engine, &shaped).is_empty());

    // The agent answers from inside the container, and sees the container's limits.
    let conn = t.start_agent(&launch(t.as_ref())).unwrap();
    let (r, w, mut process) = conn.split();
    let client = AgentClient::new("victim", r, w).with_timeout(Duration::from_secs(30));
    let hello = client.hello().expect("hello from the container's agent");
    assert_eq!(hello.tool_version, env!("CARGO_PKG_VERSION"));
    assert_eq!(hello.env.cpus, vec![0], "{:?}", hello.env);
    assert_eq!(hello.env.mem_limit, Some(96 << 20), "{:?}", hello.env);
    client.ping().unwrap();

    // Limits read back from the container's cgroups.
    let l = t.effective_limits().unwrap();
    assert_eq!(l.cpus, Some(0.5));
    assert_eq!(l.memory, Some(96 << 20));
    assert_eq!(l.pids, Some(40));
    assert_eq!(
        l.cpuset.as_ref().map(|c| c.to_string()).as_deref(),
        Some("0")
    );
    let u = t.usage().unwrap();
    assert!(
        u.memory_current.is_some() && u.pids_current.unwrap_or(0) >= 3,
        "{u:?}"
    );

    // The live CPU limit and the freezer act on the container's cgroups.
    t.set_cpu_limit(Some(0.25)).unwrap();
    assert_eq!(t.effective_limits().unwrap().cpus, Some(0.25));
    assert!(
        t.set_cpu_limit(Some(2.0)).is_err(),
        "more CPUs than the cpuset"
    );
    t.set_cpu_limit(None).unwrap();
    assert_eq!(t.effective_limits().unwrap().cpus, None);
    t.set_frozen(true).unwrap();
    t.set_frozen(false).unwrap();
    client.ping().expect("the agent answers after a thaw");

    // Other processes: the isobench binary is the image's, the workdir is shared.
    let mut mc = Command::new("isobench");
    mc.args(["memcheck", &(8u64 << 20).to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let out = t.spawn(mc).unwrap().wait_with_output().unwrap();
    assert!(out.status.success(), "memcheck in the container");
    let (code, out) = sh(
        t.as_ref(),
        "echo $ISOBENCH_TENANT; pwd; echo hi > from-container",
    );
    assert_eq!(code, Some(0));
    let wd = t.workdir().display().to_string();
    assert_eq!(out, format!("{name}\n{wd}\n"));
    assert_eq!(
        std::fs::read_to_string(t.workdir().join("from-container")).unwrap(),
        "hi\n"
    );

    // The killer ends the agent but not the container; a new agent starts.
    drop(client);
    process.close(Duration::from_secs(5));
    let _ = t.killer().kill().unwrap();
    let conn = t.start_agent(&launch(t.as_ref())).unwrap();
    let (r, w, mut process) = conn.split();
    let client = AgentClient::new("victim", r, w).with_timeout(Duration::from_secs(30));
    client.hello().expect("a restarted agent answers");
    drop(client);
    process.close(Duration::from_secs(5));

    t.teardown().unwrap();
    t.teardown().unwrap();
    assert!(containers_named(engine, &name).is_empty(), "removed");
    assert!(!t.workdir().exists());
    drop(t);
    p.teardown().unwrap();
    drop(p);
    let id = guard.id().clone();
    guard.finish();
    assert!(
        common::leftovers(&id).is_empty(),
        "{:?}",
        common::leftovers(&id)
    );
}

fn fork_bomb(engine: &str) {
    let test = &format!("{engine}_fork_bomb");
    if engine_or_skip(test, engine).is_none() {
        return;
    }
    fork_bomb_with_init(engine, None, |_| {});
}

/// A fork bomb held at its pids limit, killed, and every one of its processes reaped by the
/// container's init (`init` as [`oci_platform_with_init`] takes it); `check_init` is given
/// the init's process id.
fn fork_bomb_with_init(engine: &str, init: Option<&str>, check_init: impl Fn(i32)) {
    let guard = RunGuard::start().unwrap();
    let mut p = oci_platform_with_init(&guard, engine, init);
    let bomb = p
        .create_tenant(
            &TenantSpec::new("bomb", Role::Aggressor)
                .with_limits(Limits::parse("pids=50").unwrap()),
        )
        .unwrap();
    check_init(container_pid(engine, &bomb.info().object_name));
    let victim = p
        .create_tenant(&TenantSpec::new("neighbour", Role::Victim))
        .unwrap();
    // Safe defaults filled in for the aggressor (memory), the user's pids kept.
    let l = bomb.effective_limits().unwrap();
    assert_eq!(l.pids, Some(50));
    assert_eq!(l.memory, bomb.info().limits.memory);
    assert!(l.memory.is_some());
    // The default write bandwidth cap is on the workdir's disk.
    assert_eq!(l.io_write_bps, bomb.info().limits.io_write_bps);
    assert_eq!(
        l.io_write_bps.is_some(),
        bomb.info().io_device.is_some(),
        "{:?}",
        bomb.info()
    );

    let mut cmd = Command::new("sh");
    cmd.args(["-c", "b() { b | b & }; b; sleep 1000"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = bomb.spawn(cmd).unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let u = bomb.usage().unwrap();
        if u.pids_limit_hits.unwrap_or(0) > 0 {
            assert!(u.pids_current.unwrap() <= 50, "{u:?}");
            break;
        }
        assert!(
            Instant::now() < end,
            "the fork bomb never reached its limit: {u:?}"
        );
        thread::sleep(Duration::from_millis(50));
    }
    // The neighbour still starts processes and runs its agent.
    let (code, out) = sh(victim.as_ref(), "echo alive");
    assert_eq!((code, out.as_str()), (Some(0), "alive\n"));
    let conn = victim.start_agent(&launch(victim.as_ref())).unwrap();
    let (r, w, mut process) = conn.split();
    let client = AgentClient::new("neighbour", r, w).with_timeout(Duration::from_secs(30));
    client.hello().expect("the neighbour's agent answers");
    drop(client);
    process.close(Duration::from_secs(5));

    // The killer stops the bomb and leaves the container.
    bomb.killer().kill().unwrap();
    let _ = common::wait_timeout(&mut child, Duration::from_secs(20));
    // Killed tasks count until the container's init has reaped them.
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let left = bomb.usage().unwrap().pids_current.unwrap();
        if left <= 2 {
            break;
        }
        assert!(
            Instant::now() < end,
            "only the container's init and sleeper are left: {left}"
        );
        thread::sleep(Duration::from_millis(20));
    }
    let name = bomb.info().object_name.clone();
    assert_eq!(containers_named(engine, &name).len(), 1);
    drop(bomb);
    drop(victim);
    assert!(containers_named(engine, &name).is_empty());
    drop(p);
    guard.finish();
}

fn deadline(engine: &str) {
    let test = &format!("{engine}_deadline");
    if engine_or_skip(test, engine).is_none() {
        return;
    }
    let guard = RunGuard::start().unwrap();
    let mut p = oci_platform(&guard, engine);
    let t = p
        .create_tenant(&TenantSpec::new("late", Role::Victim).with_deadline(Duration::from_secs(2)))
        .unwrap();
    let mut cmd = Command::new("sleep");
    cmd.arg("1000").stdin(Stdio::null());
    let mut child = t.spawn(cmd).unwrap();
    let st = common::wait_timeout(&mut child, Duration::from_secs(30));
    assert!(st.is_some(), "the watchdog ended the process");
    assert!(t.expired());
    // The tenant's container stays, with only its own processes left.
    let name = t.info().object_name.clone();
    assert_eq!(containers_named(engine, &name).len(), 1);
    let end = Instant::now() + Duration::from_secs(20);
    while t.usage().unwrap().pids_current.unwrap() > 2 {
        assert!(Instant::now() < end, "{:?}", t.usage());
        thread::sleep(Duration::from_millis(20));
    }
    drop(t);
    assert!(containers_named(engine, &name).is_empty());
    drop(p);
    guard.finish();
}

fn network(engine: &str) {
    let test = &format!("{engine}_network");
    if engine_or_skip(test, engine).is_none() || !common::net_or_skip(test) {
        return;
    }
    let guard = RunGuard::start().unwrap();
    let mut p = oci_platform(&guard, engine);
    let t = p
        .create_tenant(&TenantSpec::new("net", Role::Victim).with_network(NetSpec::default()))
        .unwrap();
    let addr = t.info().address.expect("an address on the run's bridge");
    let o = addr.octets();
    let bridge = std::net::Ipv4Addr::new(o[0], o[1], o[2], 1);
    let (code, out) = sh(t.as_ref(), "ip -4 -o addr show");
    assert_eq!(code, Some(0));
    assert!(out.contains(&format!("{addr}/24")), "{out}");
    // The container reaches a listener on the bridge, and nothing else is routed.
    let l = TcpListener::bind((bridge, 0)).unwrap();
    let port = l.local_addr().unwrap().port();
    let server = thread::spawn(move || {
        let (s, from) = l.accept().unwrap();
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).unwrap();
        (from.ip(), line)
    });
    let (code, _) = sh(t.as_ref(), &format!("echo hello | nc {bridge} {port}"));
    assert_eq!(code, Some(0));
    let (from, line) = server.join().unwrap();
    assert_eq!(
        (from, line.as_str()),
        (std::net::IpAddr::V4(addr), "hello\n")
    );
    let (_, routes) = sh(t.as_ref(), "ip -4 route");
    assert!(!routes.contains("default"), "{routes}");

    let netns = t.info().netns.clone().unwrap();
    drop(t);
    assert!(!std::path::Path::new("/run/netns").join(&netns).exists());
    drop(p);
    let id = guard.id().clone();
    guard.finish();
    assert!(
        common::leftovers(&id).is_empty(),
        "{:?}",
        common::leftovers(&id)
    );
}

fn cleanup_after_kill(engine: &str) {
    let test = &format!("{engine}_cleanup_after_kill");
    if engine_or_skip(test, engine).is_none() {
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
        .env(ORPHAN_ENV, engine)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut found = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        // The harness may have started the line (`test orphan_helper ... `).
        if let Some(rest) = line.split_once("ORPHAN ").map(|(_, r)| r) {
            let (run, name) = rest.split_once(' ').unwrap();
            found = Some((run.to_string(), name.to_string()));
            break;
        }
    }
    let (run, name) = found.expect("the helper reported its container");
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(containers_named(engine, &name), std::slice::from_ref(&name));

    let report = isobench_platform::cleanup(false);
    assert!(
        report
            .removed
            .iter()
            .any(|r| r.kind == ObjectKind::Container && r.run == run && r.name.contains(&name)),
        "{report}"
    );
    assert!(containers_named(engine, &name).is_empty(), "{report}");
    let id = isobench_platform::RunId::parse(&run).unwrap();
    assert!(
        common::leftovers(&id).is_empty(),
        "{:?}",
        common::leftovers(&id)
    );
}

/// With `ISOBENCH_OCI_ORPHAN=<engine>`: starts a run with one container (frozen, as the
/// on/off design may leave it), reports it and waits to be killed.
#[test]
fn orphan_helper() {
    let Ok(engine) = std::env::var(ORPHAN_ENV) else {
        return;
    };
    let guard = RunGuard::start().unwrap();
    let mut p = oci_platform(&guard, &engine);
    let t = p
        .create_tenant(&TenantSpec::new("orphan", Role::Aggressor))
        .unwrap();
    t.set_frozen(true).unwrap();
    // Straight to the descriptor: the test harness may capture `println!`.
    let mut out = std::io::stdout().lock();
    writeln!(out, "ORPHAN {} {}", guard.id(), t.info().object_name).unwrap();
    out.flush().unwrap();
    drop(out);
    std::mem::forget(t);
    std::mem::forget(p);
    std::mem::forget(guard);
    loop {
        thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn docker_lifecycle() {
    lifecycle("docker");
}

#[test]
fn docker_fork_bomb() {
    fork_bomb("docker");
}

#[test]
fn docker_deadline() {
    deadline("docker");
}

#[test]
fn podman_deadline() {
    deadline("podman");
}

#[test]
fn docker_network() {
    network("docker");
}

#[test]
fn docker_cleanup_after_kill() {
    cleanup_after_kill("docker");
}

#[test]
fn podman_lifecycle() {
    lifecycle("podman");
}

#[test]
fn podman_fork_bomb() {
    fork_bomb("podman");
}

#[test]
fn podman_network() {
    network("podman");
}

#[test]
fn podman_cleanup_after_kill() {
    cleanup_after_kill("podman");
}

/// Podman's bare `--init` needs catatonit, which a host with Docker's tini may lack: the
/// containers start with the host's tini instead (`--init-path`), which reaps the bomb.
#[test]
fn podman_without_catatonit_uses_another_init() {
    let test = "podman_without_catatonit_uses_another_init";
    if engine_or_skip(test, "podman").is_none() {
        return;
    }
    let Some(tini) = static_init_other_than_catatonit(test) else {
        return;
    };
    fork_bomb_with_init("podman", Some(&tini.display().to_string()), |pid| {
        assert!(
            oci::init::runs_file(pid, &tini).unwrap(),
            "the container's first process runs {}",
            tini.display()
        );
    });
}

/// Docker without its daemon's docker-init: the host's static init, bind-mounted.
#[test]
fn docker_without_its_init_uses_the_hosts() {
    let test = "docker_without_its_init_uses_the_hosts";
    if engine_or_skip(test, "docker").is_none() {
        return;
    }
    let Some(tini) = static_init_other_than_catatonit(test) else {
        return;
    };
    fork_bomb_with_init("docker", Some(&tini.display().to_string()), |pid| {
        assert!(oci::init::runs_file(pid, &tini).unwrap());
    });
}

/// With no static init on the host, the container starts without `--init` and the image's
/// isobench is its first process; it reaps the killed bomb's processes just the same.
fn own_init(engine: &str) {
    let test = &format!("{engine}_with_no_init_binary_uses_isobench_own_init");
    if engine_or_skip(test, engine).is_none() {
        return;
    }
    fork_bomb_with_init(engine, Some("isobench"), |pid| {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        let args: Vec<_> = cmdline
            .split(|b| *b == 0)
            .map(String::from_utf8_lossy)
            .collect();
        assert_eq!(args[..3], ["/isobench", "container-init", "--"], "{args:?}");
    });
}

#[test]
fn podman_with_no_init_binary_uses_isobench_own_init() {
    own_init("podman");
}

#[test]
fn docker_with_no_init_binary_uses_isobench_own_init() {
    own_init("docker");
}
