//! The `vm` platform on a real QEMU: a guest boots (TCG here), its agent answers over the
//! virtio-serial port and runs a probe; a memory hog in one guest is held by the guest's
//! memory while its neighbour carries on; a killed run leaves no QEMU process or TAP device
//! once cleanup has run.
//!
//! Needs root, QEMU, busybox-static, the guest kernel (`isobench vm setup`) and the static
//! isobench (`scripts/build-static --debug`); `scripts/test` prepares all of them. Without
//! them the tests skip with the reason, except under `CI=true`, where they fail. Guests boot
//! in seconds under TCG, so the tests boot few of them, concurrently.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::*;
use isobench_agent::{AgentClient, Params, ProbeOpts, StressOpts};
use isobench_platform::{
    cleanup, platform, vm, AgentLaunch, Limits, NetSpec, ObjectKind, Platform, PlatformOptions,
    Role, RunGuard, RunId, Tenant, TenantSpec,
};

/// The tests of this file boot guests and sweep dead runs: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

const HELPER_RUN_FILE: &str = "ISOBENCH_TEST_VM_RUN_FILE";
const READY: &str = "vm-run-helper-ready";

#[test]
fn helper() {
    if std::env::var(HELPER_ENV).as_deref() == Ok("vm-run") {
        std::process::exit(vm_run_helper());
    }
    run_helper_if_requested();
}

/// Whether guests can boot here; prints why not (and fails under CI=true, where everything
/// must be installed).
fn vm_or_skip(test: &str) -> bool {
    if !root_or_skip(test) {
        return false;
    }
    let missing = if let Err(e) = vm::qemu::qemu_version() {
        Some(format!("{e:#}"))
    } else if vm::kernel::recorded().ok().flatten().is_none() {
        Some("no guest kernel: run `isobench vm setup`".to_string())
    } else if let Err(e) = isobench_platform::staticexe::find() {
        Some(format!("{e:#}"))
    } else if !Path::new(vm::initramfs::BUSYBOX).is_file() {
        Some("busybox-static is not installed".to_string())
    } else {
        None
    };
    match missing {
        None => true,
        Some(why) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("{test}: the vm platform cannot run under CI: {why} (scripts/test sets it up)")
        }
        Some(why) => {
            skip("vm", test, &why);
            false
        }
    }
}

fn vm_platform(guard: &RunGuard, workdir_root: &Path) -> Box<dyn Platform> {
    let mut opts = PlatformOptions::new(guard.context());
    opts.workdir_root = workdir_root.to_path_buf();
    platform(vm::KIND, opts).expect("building the vm platform")
}

fn launch(tenant: &dyn Tenant) -> AgentLaunch {
    AgentLaunch {
        exe: isobench_platform::staticexe::find().unwrap(),
        log: tenant.workdir().join("agent.log"),
    }
}

/// Boots the guest of `tenant` and says hello to its agent.
fn connect(
    tenant: &dyn Tenant,
) -> (
    AgentClient,
    isobench_platform::AgentProcess,
    Duration,
    isobench_agent::Hello,
) {
    let t0 = Instant::now();
    let conn = tenant
        .start_agent(&launch(tenant))
        .unwrap_or_else(|e| panic!("starting the agent of {}: {e:#}", tenant.name()));
    let boot = t0.elapsed();
    let (reader, writer, process) = conn.split();
    let client = AgentClient::new(tenant.name(), reader, writer);
    let hello = client.hello().unwrap_or_else(|e| {
        let console =
            std::fs::read_to_string(tenant.workdir().join("console.log")).unwrap_or_default();
        panic!(
            "hello to the agent of {}: {e:#}; its console:\n{console}",
            tenant.name()
        )
    });
    (client, process, boot, hello)
}

fn mib(n: u64) -> u64 {
    n << 20
}

#[test]
fn a_guest_runs_a_probe_and_holds_a_memory_hog_while_its_neighbour_carries_on() {
    if !vm_or_skip("a_guest_runs_a_probe_and_holds_a_memory_hog_while_its_neighbour_carries_on") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let guard = RunGuard::start().unwrap();
    let mut p = vm_platform(&guard, Path::new("/var/tmp"));
    assert_eq!(p.kind(), vm::KIND);
    assert!(!p.capabilities().exec);
    eprintln!("platform: {}", p.describe());
    for n in p.notes() {
        eprintln!("note: {n}");
    }
    if p.describe().contains(" tcg ") {
        assert!(
            p.notes().iter().any(|n| n.contains("not representative")),
            "a TCG platform must warn about its speed figures: {:?}",
            p.notes()
        );
    }

    let victim = p
        .create_tenant(
            &TenantSpec::new("victim", Role::Victim)
                .with_limits(Limits::parse("cpus=1,memory=256M,net_rate=100M").unwrap())
                .with_network(NetSpec::default()),
        )
        .unwrap();
    let aggressor = p
        .create_tenant(
            &TenantSpec::new("hog", Role::Aggressor)
                .with_limits(Limits::parse("cpuset=1,memory=192M").unwrap()),
        )
        .unwrap();
    assert!(victim.address().is_some());
    let tap = victim.info().host_link.clone().expect("the victim's TAP");
    assert!(Path::new("/sys/class/net").join(&tap).exists(), "{tap}");
    // Both directions shaped: the TAP for what the guest receives, an ifb device for
    // what it sends.
    let ifb = format!("{}i{}", &tap[..8], &tap[9..]);
    assert!(Path::new("/sys/class/net").join(&ifb).exists(), "{ifb}");
    let limits = victim.effective_limits().unwrap();
    assert_eq!(limits.net_egress, Some(100_000_000));
    assert_eq!(limits.net_ingress, Some(100_000_000));
    assert_eq!(
        victim.effective_limits().unwrap().memory,
        Some(mib(256)),
        "the guest's memory is the tenant's memory limit"
    );
    // A guest runs nothing but its agent.
    let e = victim
        .spawn(std::process::Command::new("true"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("`vm` platform"), "{e}");

    // Both guests boot at once.
    let (v, a) = std::thread::scope(|s| {
        let v = s.spawn(|| connect(victim.as_ref()));
        let a = s.spawn(|| connect(aggressor.as_ref()));
        (v.join().unwrap(), a.join().unwrap())
    });
    let (vc, mut vproc, vboot, hello) = v;
    let (ac, mut aproc, aboot, ahello) = a;
    assert_eq!(
        ahello.env.cpus,
        [1],
        "a guest's CPUs are numbered as the host's: the agent of cpuset=1 runs on vCPU 1"
    );
    eprintln!("boot (to agent ready): victim {vboot:?}, aggressor {aboot:?}");
    assert!(
        hello.env.mem_usable <= mib(256),
        "the agent sees the guest's memory: {:?}",
        hello.env
    );
    assert_eq!(
        hello.env.cpus.len(),
        1,
        "one vCPU for cpus=1: {:?}",
        hello.env
    );
    assert_eq!(
        hello.env.workdir,
        victim.workdir(),
        "the guest's workdir is the tenant's (its disk is mounted there)"
    );

    // The guest answers on its address on the run's bridge (through its TAP device).
    let ip = victim.address().unwrap().to_string();
    let ping = std::process::Command::new(vm::initramfs::BUSYBOX)
        .args(["ping", "-c", "1", "-W", "10", &ip])
        .output()
        .unwrap();
    assert!(
        ping.status.success(),
        "ping {ip}: {}",
        String::from_utf8_lossy(&ping.stdout)
    );
    assert_eq!(victim.service_address(), victim.address());

    let opts = ProbeOpts {
        budget: Some(Duration::from_millis(300)),
        deadline: Some(Duration::from_secs(60)),
        ..ProbeOpts::default()
    };
    let r = vc.run_probe("cpu-int", Params::new(), &opts).unwrap();
    assert!(!r.metrics.is_empty(), "{r:?}");
    assert!(r
        .metrics
        .iter()
        .all(|m| m.value.is_finite() && m.value > 0.0));

    // The hog asks for all the guest's memory: the guest's kernel kills it, not the host's
    // kernel QEMU.
    ac.start_stressor(
        "hog",
        "memhog",
        100,
        Params::new().set("chunk", "16M"),
        &StressOpts {
            contained: true,
            ..StressOpts::default()
        },
    )
    .unwrap();
    std::thread::sleep(Duration::from_secs(6));
    let again = vc.run_probe("cpu-int", Params::new(), &opts).unwrap();
    assert!(!again.metrics.is_empty());
    ac.ping().expect("the aggressor's agent survives its hog");
    let report = ac.stop_stressor("hog").unwrap();
    eprintln!("memhog: {report:?}");
    assert!(!aproc.exited() && !vproc.exited(), "both guests still run");
    let ausage = aggressor.usage().unwrap();
    assert_eq!(
        ausage.oom_kills.unwrap_or(0),
        0,
        "the host's OOM killer stayed out of the aggressor's QEMU: {ausage:?}"
    );
    assert!(victim.usage().unwrap().cpu_time_ns.unwrap_or(0) > 0);

    // Freezing the guest stops QEMU; thawing resumes it.
    aggressor.set_frozen(true).unwrap();
    aggressor.set_frozen(false).unwrap();
    ac.ping().unwrap();

    // `bye` ends the agent; the guest powers off and QEMU exits.
    vc.bye().unwrap();
    ac.bye().unwrap();
    vproc.close(Duration::from_secs(30));
    aproc.close(Duration::from_secs(30));
    // The guest's console was copied to the agent's log.
    std::thread::sleep(Duration::from_millis(300));
    let log = std::fs::read_to_string(victim.workdir().join("agent.log")).unwrap();
    assert!(
        log.contains("isobench-init: ready") && log.contains("powering off"),
        "{log}"
    );

    victim.teardown().unwrap();
    aggressor.teardown().unwrap();
    victim.teardown().unwrap();
    assert!(!Path::new("/sys/class/net").join(&tap).exists(), "{tap}");
    assert!(!Path::new("/sys/class/net").join(&ifb).exists(), "{ifb}");
    p.teardown().unwrap();
    drop(p);
    let id = guard.id().clone();
    guard.finish();
    assert!(leftovers(&id).is_empty(), "{:#?}", leftovers(&id));
}

/// Helper: builds the vm platform, a tenant with a network, boots its guest, writes the run
/// id to the file named by ISOBENCH_TEST_VM_RUN_FILE, then waits to be killed.
fn vm_run_helper() -> i32 {
    let out = PathBuf::from(std::env::var(HELPER_RUN_FILE).unwrap());
    let guard = RunGuard::start().unwrap();
    let mut p = vm_platform(&guard, Path::new("/var/tmp"));
    let t = p
        .create_tenant(
            &TenantSpec::new("doomed", Role::Victim)
                .with_limits(Limits::parse("memory=192M").unwrap())
                .with_network(NetSpec::default()),
        )
        .unwrap();
    let (client, _process, _, _) = connect(t.as_ref());
    client.ping().unwrap();
    std::fs::write(&out, format!("{}\n", guard.id())).unwrap();
    println!("\n{READY}");
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn a_killed_run_leaves_no_guest_after_cleanup() {
    if !vm_or_skip("a_killed_run_leaves_no_guest_after_cleanup") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let run_file = dir.path().join("run");
    let mut child = helper_cmd("vm-run")
        .env(HELPER_RUN_FILE, &run_file)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // The harness prints its own lines before the helper's.
    let mut seen = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    loop {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 {
            let _ = child.kill();
            panic!("the helper did not boot its guest: {seen}");
        }
        if line.contains(READY) {
            break;
        }
        seen.push_str(&line);
    }
    let id = RunId::parse(std::fs::read_to_string(&run_file).unwrap().trim()).unwrap();
    let qemu_of_run = || -> Vec<u32> {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                comm.starts_with("qemu-system")
                    && String::from_utf8_lossy(&cmdline).contains(&id.prefix())
                    && alive(*pid)
            })
            .collect()
    };
    assert_eq!(qemu_of_run().len(), 1, "the helper's guest runs");
    child.kill().unwrap(); // SIGKILL: no teardown
    child.wait().unwrap();
    assert_eq!(qemu_of_run().len(), 1, "the guest outlives its controller");

    let report = cleanup(false);
    eprint!("{report}");
    assert!(qemu_of_run().is_empty(), "QEMU left: {:?}", qemu_of_run());
    let left = leftovers(&id);
    assert!(left.is_empty(), "left behind after cleanup: {left:#?}");
    let mine: Vec<_> = report
        .removed
        .iter()
        .filter(|r| r.run == id.as_str())
        .collect();
    for kind in [ObjectKind::Tap, ObjectKind::Cgroup, ObjectKind::Workdir] {
        assert!(
            mine.iter().any(|r| r.kind == kind),
            "cleanup should list a removed {kind}: {report}"
        );
    }
    // The guest's agent sees its controller's end of the port close, ends, and the guest
    // powers off by itself; cleanup kills a guest that is still running.
    if !mine.iter().any(|r| r.kind == ObjectKind::Guest) {
        eprintln!("the guest powered off before cleanup reached it");
    }
    assert!(
        !report.failed.iter().any(|f| f.run == id.as_str()),
        "cleanup failures: {report}"
    );
}
