//! The cgroup platform for real (as root, on the host's cgroups): containment of a fork bomb
//! and a memory hog, limits written and read back, safe defaults, bad input, deadlines, the
//! sentinel, v2 teardown on the real unified hierarchy, the host platform and doctor.

mod common;

use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use isobench_platform::cgroup::RealTree;
use isobench_platform::{
    doctor, platform, CgroupFs, Controller, CpuWeight, LimitError, Limits, NetSpec, Platform,
    PlatformError, PlatformKind, PlatformOptions, Role, RunGuard, Sentinel, SentinelConfig,
    TenantSpec,
};

#[test]
fn helper() {
    run_helper_if_requested();
}

fn cgroup_platform(guard: &RunGuard) -> Box<dyn Platform> {
    platform(PlatformKind::CGROUP, PlatformOptions::new(guard.context())).expect("cgroup platform")
}

fn tagged_with(key_value: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(env) = fs::read(format!("/proc/{pid}/environ")) {
            if env.split(|&b| b == 0).any(|kv| kv == key_value.as_bytes()) && alive(pid) {
                v.push(pid);
            }
        }
    }
    v
}

#[test]
fn forkbomb_is_held_at_pids_max_and_the_neighbour_keeps_running() {
    if !root_or_skip("forkbomb") {
        return;
    }
    let guard = RunGuard::start().unwrap();
    let mut p = cgroup_platform(&guard);
    let victim = p
        .create_tenant(&TenantSpec::new("victim", Role::Victim))
        .unwrap();
    let bomb = p
        .create_tenant(
            &TenantSpec::new("bomb", Role::Aggressor).with_limits("pids=64".parse().unwrap()),
        )
        .unwrap();
    let mut v = victim.spawn(helper_cmd("idle")).unwrap();
    let mut b = bomb.spawn(helper_cmd("forkbomb")).unwrap();

    let pids_dir = bomb
        .info()
        .cgroups
        .iter()
        .find(|d| d.starts_with("/sys/fs/cgroup/pids"))
        .cloned();
    let end = Instant::now() + Duration::from_secs(60);
    let mut max_seen = 0;
    let mut samples_at_limit = 0;
    while samples_at_limit < 100 {
        let u = bomb.usage().unwrap();
        let cur = u.pids_current.expect("pids.current");
        max_seen = max_seen.max(cur);
        assert!(cur <= 64, "pids.current {cur} exceeds pids.max 64");
        if let Some(d) = &pids_dir {
            let tasks = fs::read_to_string(d.join("tasks")).unwrap_or_default();
            assert!(
                tasks.lines().count() <= 64,
                "{} tasks",
                tasks.lines().count()
            );
        }
        if u.pids_limit_hits.unwrap_or(0) > 0 {
            samples_at_limit += 1;
        }
        assert!(
            Instant::now() < end,
            "the fork bomb never reached its limit (max {max_seen})"
        );
        thread::sleep(Duration::from_millis(5));
    }
    assert!(
        max_seen >= 60,
        "the bomb should fill its limit, saw {max_seen}"
    );

    // The neighbour still runs and can still start processes.
    assert!(alive(v.id()));
    let out = victim.spawn(Command::new("true")).unwrap().wait().unwrap();
    assert!(out.success());

    let name = bomb.info().object_name.clone();
    let dirs = bomb.info().cgroups.clone();
    bomb.teardown().unwrap();
    let status = b.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    assert!(dirs.iter().all(|d| !d.exists()), "cgroups left: {dirs:?}");
    assert!(
        tagged_with(&format!("ISOBENCH_TENANT={name}")).is_empty(),
        "bomb processes left after teardown"
    );
    assert!(alive(v.id()), "the neighbour died with the bomb");
    victim.teardown().unwrap();
    v.wait().unwrap();
    drop(p);
    let report = guard.finish();
    assert!(report.failed.is_empty(), "{report}");
}

#[test]
fn a_fork_bomb_freezes_and_thaws_while_busy_loops_hold_every_cpu() {
    // The bug: beside a busy neighbour, freezing a fork bomb's tenant took longer than the
    // 2 s allowed and failed the trial. Behaviour only: each freeze finishes and is undone by
    // the thaw; how long it takes is not asserted.
    if !root_or_skip("freeze under contention") {
        return;
    }
    let guard = RunGuard::start().unwrap();
    let mut p = cgroup_platform(&guard);
    let bomb = p
        .create_tenant(
            &TenantSpec::new("bomb", Role::Aggressor).with_limits("pids=128".parse().unwrap()),
        )
        .unwrap();
    let Some(freezer) = bomb
        .info()
        .cgroups
        .iter()
        .find(|d| d.join("freezer.state").exists())
        .cloned()
    else {
        skip(
            "cgroup v1 freezer",
            "freeze under contention",
            "no v1 freezer hierarchy here",
        );
        return;
    };
    let read = |f: &str| fs::read_to_string(freezer.join(f)).unwrap();
    let mut b = bomb.spawn(helper_cmd("forkbomb")).unwrap();
    let spinners = Spinners::per_cpu();
    let end = Instant::now() + Duration::from_secs(60);
    while read("tasks").lines().count() < 100 {
        assert!(Instant::now() < end, "the fork bomb did not grow");
        thread::sleep(Duration::from_millis(20));
    }
    for i in 0..10 {
        if let Err(e) = bomb.set_frozen(true) {
            panic!("freeze {i}: {e:#}");
        }
        assert_eq!(read("freezer.state").trim(), "FROZEN", "freeze {i}");
        let tasks = read("tasks");
        thread::sleep(Duration::from_millis(20));
        assert_eq!(read("tasks"), tasks, "the frozen bomb forked or exited");
        bomb.set_frozen(false).unwrap();
        assert_eq!(read("freezer.state").trim(), "THAWED", "thaw {i}");
        thread::sleep(Duration::from_millis(50));
    }
    drop(spinners);
    let dirs = bomb.info().cgroups.clone();
    bomb.teardown().unwrap();
    assert_eq!(b.wait().unwrap().signal(), Some(libc::SIGKILL));
    assert!(dirs.iter().all(|d| !d.exists()), "cgroups left: {dirs:?}");
    drop(p);
    let report = guard.finish();
    assert!(report.failed.is_empty(), "{report}");
}

#[test]
fn memhog_is_oom_killed_inside_its_tenant_only() {
    if !root_or_skip("memhog") {
        return;
    }
    let guard = RunGuard::start().unwrap();
    let mut p = cgroup_platform(&guard);
    let limits: Limits = "memory=64M".parse().unwrap();
    let victim = p
        .create_tenant(&TenantSpec::new("victim", Role::Victim).with_limits(limits.clone()))
        .unwrap();
    let hog = p
        .create_tenant(&TenantSpec::new("hog", Role::Aggressor).with_limits(limits))
        .unwrap();
    let mut v = victim.spawn(helper_cmd("idle")).unwrap();
    let mut cmd = helper_cmd("memhog");
    cmd.env("ISOBENCH_TEST_BYTES", (256u64 << 20).to_string());
    let mut h = hog.spawn(cmd).unwrap();
    let status = wait_timeout(&mut h, Duration::from_secs(120)).expect("the memhog should end");
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "the memhog should be OOM-killed, got {status}"
    );
    let u = hog.usage().unwrap();
    assert!(
        u.oom_kills.unwrap_or(0) >= 1,
        "OOM count not read back: {u:?}"
    );
    assert!(
        u.memory_peak.unwrap() <= 64 << 20,
        "peak {:?} above the limit",
        u.memory_peak
    );
    assert!(alive(v.id()), "the other tenant's process died");
    assert_eq!(victim.usage().unwrap().oom_kills, Some(0));
    drop(hog);
    drop(victim);
    v.wait().unwrap();
}

#[test]
fn limits_are_written_and_read_back_from_cgroupfs() {
    if !root_or_skip("limits read back") {
        return;
    }
    let fs_layout = CgroupFs::detect().unwrap();
    let guard = RunGuard::start().unwrap();
    let mut p = cgroup_platform(&guard);
    let asked: Limits = "cpus=1.5,shares=512,cpuset=0-1,mems=0,memory=96M,pids=50,\
                         io_read_bps=10M,io_write_bps=20M,io_read_iops=300,io_write_iops=400"
        .parse()
        .unwrap();
    let t = p
        .create_tenant(&TenantSpec::new("limited", Role::Victim).with_limits(asked.clone()))
        .unwrap();
    let back = t.effective_limits().unwrap();
    assert_eq!(back, asked, "limits read back differ");
    assert_eq!(back.cpu_weight, Some(CpuWeight::Shares(512)));

    // The exact files, as the kernel holds them.
    let dev = t.info().io_device.clone().expect("workdir device").dev;
    let name = &t.info().object_name;
    let read = |ctl: Controller, file: &str| -> String {
        let h = fs_layout
            .hierarchy_of(ctl)
            .unwrap_or_else(|| panic!("no {ctl} hierarchy"));
        fs::read_to_string(h.root.join(name).join(file))
            .unwrap_or_else(|e| panic!("{ctl}/{file}: {e}"))
            .trim()
            .to_string()
    };
    match fs_layout.version() {
        isobench_platform::CgroupVersion::V1 => {
            assert_eq!(read(Controller::Cpu, "cpu.cfs_quota_us"), "150000");
            assert_eq!(read(Controller::Cpu, "cpu.cfs_period_us"), "100000");
            assert_eq!(read(Controller::Cpu, "cpu.shares"), "512");
            assert_eq!(read(Controller::Cpuset, "cpuset.cpus"), "0-1");
            assert_eq!(
                read(Controller::Memory, "memory.limit_in_bytes"),
                (96u64 << 20).to_string()
            );
            if fs_layout
                .hierarchies()
                .iter()
                .any(|h| h.root.join("memory.memsw.limit_in_bytes").exists())
            {
                assert_eq!(
                    read(Controller::Memory, "memory.memsw.limit_in_bytes"),
                    (96u64 << 20).to_string()
                );
            }
            assert_eq!(read(Controller::Pids, "pids.max"), "50");
            assert_eq!(
                read(Controller::Io, "blkio.throttle.write_bps_device"),
                format!("{dev} {}", 20u64 << 20)
            );
            assert_eq!(
                read(Controller::Io, "blkio.throttle.read_iops_device"),
                format!("{dev} 300")
            );
        }
        isobench_platform::CgroupVersion::V2 => {
            assert_eq!(read(Controller::Cpu, "cpu.max"), "150000 100000");
            assert_eq!(read(Controller::Memory, "memory.swap.max"), "0");
        }
    }
    let dirs = t.info().cgroups.clone();
    drop(t);
    assert!(dirs.iter().all(|d| !d.exists()), "cgroups left: {dirs:?}");
}

#[test]
fn aggressors_get_safe_defaults() {
    if !root_or_skip("safe defaults") {
        return;
    }
    let guard = RunGuard::start().unwrap();
    let mut p = cgroup_platform(&guard);
    let t = p
        .create_tenant(
            &TenantSpec::new("agg", Role::Aggressor).with_limits("pids=100".parse().unwrap()),
        )
        .unwrap();
    let l = &t.info().limits;
    assert_eq!(l.pids, Some(100), "the user's pids limit is kept");
    let quarter = p.host().memory_bytes / 4;
    let mem = l.memory.expect("memory default");
    assert!(
        mem <= quarter && mem > quarter - (1 << 20),
        "memory {mem} vs quarter {quarter}"
    );
    assert_eq!(
        l.io_write_bps,
        Some(isobench_platform::limits::SAFE_IO_WRITE_BPS)
    );
    assert!(
        t.info()
            .notes
            .iter()
            .any(|n| n.contains("safe default memory=")),
        "{:?}",
        t.info().notes
    );
    let back = t.effective_limits().unwrap();
    assert_eq!(
        (back.pids, back.memory, back.io_write_bps),
        (l.pids, l.memory, l.io_write_bps)
    );
    // A victim gets nothing it did not ask for.
    let v = p
        .create_tenant(&TenantSpec::new("vic", Role::Victim))
        .unwrap();
    assert_eq!(v.info().limits, Limits::default());
}

#[test]
fn spawned_processes_start_inside_their_cgroup() {
    if !root_or_skip("spawn placement") {
        return;
    }
    let guard = RunGuard::start().unwrap();
    let mut p = cgroup_platform(&guard);
    let t = p
        .create_tenant(&TenantSpec::new("placed", Role::Victim))
        .unwrap();
    let mut cmd = Command::new("cat");
    cmd.arg("/proc/self/cgroup").stdout(Stdio::piped());
    let out = t.spawn(cmd).unwrap().wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let name = &t.info().object_name;
    for ctl in ["pids", "memory", "freezer"] {
        assert!(
            text.lines()
                .any(|l| l.contains(ctl) && l.ends_with(&format!("/{name}"))),
            "cat was not in the {ctl} cgroup when it ran:\n{text}"
        );
    }
    // The working directory and environment.
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "pwd; echo $ISOBENCH_RUN"])
        .stdout(Stdio::piped());
    let out = t.spawn(cmd).unwrap().wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&t.workdir().display().to_string()), "{text}");
    assert!(text.contains(guard.id().as_str()), "{text}");
}

fn cgroups_named(name: &str) -> Vec<String> {
    let mut v = Vec::new();
    for d in fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        if d.path().join(name).exists() {
            v.push(d.path().join(name).display().to_string());
        }
    }
    v
}

#[test]
fn bad_input_is_refused_and_creates_nothing() {
    if !root_or_skip("bad input") {
        return;
    }
    let guard = RunGuard::start().unwrap();
    let id = guard.id().clone();
    let mut p = cgroup_platform(&guard);
    let err = |spec: TenantSpec, p: &mut Box<dyn Platform>| -> anyhow::Error {
        match p.create_tenant(&spec) {
            Ok(t) => panic!("tenant {} should have been refused", t.name()),
            Err(e) => e,
        }
    };

    // A cpuset outside the host's CPUs.
    let e = err(
        TenantSpec::new("bad", Role::Victim).with_limits("cpuset=0,7".parse().unwrap()),
        &mut p,
    );
    let msg = e.to_string();
    assert!(
        msg.contains("cpuset=0,7") && msg.contains("CPU 7") && msg.contains("choose CPUs within"),
        "{msg}"
    );
    assert!(matches!(
        e.downcast_ref::<LimitError>(),
        Some(LimitError::NotOnHost { .. })
    ));

    // A network rate without a network.
    let e = err(
        TenantSpec::new("bad", Role::Victim).with_limits("net_rate=10mbit".parse().unwrap()),
        &mut p,
    );
    assert!(
        matches!(
            e.downcast_ref::<PlatformError>(),
            Some(PlatformError::NetLimitWithoutNetwork { key: "net_rate" })
        ),
        "{e}"
    );

    // io limits on a workdir without a disk.
    if Path::new("/dev/shm").is_dir() {
        let e = err(
            TenantSpec::new("bad", Role::Victim)
                .with_limits("io_write_bps=1M".parse().unwrap())
                .with_workdir("/dev/shm"),
            &mut p,
        );
        assert!(
            matches!(
                e.downcast_ref::<PlatformError>(),
                Some(PlatformError::NoBlockDevice { .. })
            ),
            "{e}"
        );
    }

    // A bad tenant name, then a duplicate one.
    let e = err(TenantSpec::new("a/b", Role::Victim), &mut p);
    assert!(e.to_string().contains("`a/b`"), "{e}");
    let ok = p
        .create_tenant(&TenantSpec::new("dup", Role::Victim))
        .unwrap();
    let e = err(TenantSpec::new("dup", Role::Victim), &mut p);
    assert!(
        matches!(
            e.downcast_ref::<PlatformError>(),
            Some(PlatformError::DuplicateTenant { .. })
        ),
        "{e}"
    );
    drop(ok);

    // The host platform cannot enforce resource limits.
    let mut host = platform(PlatformKind::HOST, PlatformOptions::new(guard.context())).unwrap();
    let e = err(
        TenantSpec::new("bad", Role::Victim).with_limits("memory=64M".parse().unwrap()),
        &mut host,
    );
    assert!(
        e.to_string().contains("`memory`") && e.to_string().contains("cgroup"),
        "{e}"
    );

    // Unknown platforms and keys.
    let e = "dokcer".parse::<PlatformKind>().unwrap_err();
    assert!(matches!(e, PlatformError::UnknownPlatform { .. }), "{e}");
    let e = "memroy=1G".parse::<Limits>().unwrap_err().to_string();
    assert!(e.contains("did you mean `memory`"), "{e}");

    // Nothing of the refused tenants exists.
    assert!(cgroups_named(&id.object_name("bad")).is_empty());
    assert!(cgroups_named(&id.object_name("a/b")).is_empty());
    let left = leftovers(&id);
    assert!(
        left.iter().all(|l| l.starts_with("state ")),
        "refused tenants left objects: {left:#?}"
    );
}

#[test]
fn the_watchdog_kills_a_tenant_past_its_deadline() {
    if !root_or_skip("watchdog") {
        return;
    }
    let guard = RunGuard::start().unwrap();
    let mut p = cgroup_platform(&guard);
    let t = p
        .create_tenant(
            &TenantSpec::new("late", Role::Victim).with_deadline(Duration::from_millis(200)),
        )
        .unwrap();
    let mut c = t.spawn(helper_cmd("idle")).unwrap();
    let status =
        wait_timeout(&mut c, Duration::from_secs(60)).expect("the watchdog should kill it");
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    assert!(t.expired());
    // A tenant within its deadline is left alone.
    let ok = p
        .create_tenant(
            &TenantSpec::new("ontime", Role::Victim).with_deadline(Duration::from_secs(3600)),
        )
        .unwrap();
    assert!(!ok.expired());
}

#[test]
fn a_sentinel_stall_kills_the_aggressors_only() {
    if !root_or_skip("sentinel") {
        return;
    }
    let guard = RunGuard::start().unwrap();
    let mut p = cgroup_platform(&guard);
    let victim = p
        .create_tenant(&TenantSpec::new("victim", Role::Victim))
        .unwrap();
    let agg = p
        .create_tenant(&TenantSpec::new("agg", Role::Aggressor))
        .unwrap();
    let mut v = victim.spawn(helper_cmd("idle")).unwrap();
    let mut a = agg.spawn(helper_cmd("idle")).unwrap();
    let killers = vec![agg.killer()];
    let fired = Arc::new(Mutex::new(0));
    let f = fired.clone();
    // A zero threshold makes every heartbeat a stall: the callback runs at once.
    let s = Sentinel::start(
        SentinelConfig {
            tick: Duration::from_millis(10),
            threshold: Duration::ZERO,
        },
        move |_| {
            let mut n = f.lock().unwrap();
            if *n == 0 {
                for k in &killers {
                    k.kill().unwrap();
                }
            }
            *n += 1;
        },
    )
    .unwrap();
    let status = wait_timeout(&mut a, Duration::from_secs(60)).expect("aggressor killed");
    let seen = s.stop();
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    assert!(*fired.lock().unwrap() >= 1);
    // The kill returns once the tenant is empty: the sentinel timed it as its reaction.
    let first = seen.first_stall.expect("the first stall is recorded");
    assert!(first.callback_ms > 0.0, "{seen:?}");
    assert_eq!(agg.usage().unwrap().pids_current.unwrap_or(0), 0);
    assert!(alive(v.id()), "the victim must survive");
    drop(victim);
    v.wait().unwrap();
}

#[test]
fn v2_tenants_work_on_the_real_unified_hierarchy() {
    if !root_or_skip("v2 real") {
        return;
    }
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap();
    let Some(root) = mounts
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[2] == "cgroup2")
        .map(|f| f[1].to_string())
    else {
        skip("cgroup v2", "v2 real", "no cgroup2 mount");
        return;
    };
    let fs_v2 = CgroupFs::v2(Path::new(&root), Arc::new(RealTree)).unwrap();
    let guard = RunGuard::start().unwrap();
    let mut opts = PlatformOptions::new(guard.context());
    opts.cgroup_fs = Some(fs_v2);
    let mut p = platform(PlatformKind::CGROUP, opts).unwrap();
    let t = p
        .create_tenant(&TenantSpec::new("v2", Role::Victim))
        .unwrap();
    let dir = t.info().cgroups[0].clone();
    assert!(dir.starts_with(&root) && dir.is_dir());
    let mut c = t.spawn(helper_cmd("idle")).unwrap();
    let cg = fs::read_to_string(format!("/proc/{}/cgroup", c.id())).unwrap();
    assert!(
        cg.lines()
            .any(|l| l == format!("0::/{}", t.info().object_name)),
        "not in the v2 cgroup:\n{cg}"
    );
    assert!(t.usage().unwrap().cpu_time_ns.is_some());
    t.teardown().unwrap();
    assert_eq!(c.wait().unwrap().signal(), Some(libc::SIGKILL));
    assert!(!dir.exists());
}

#[test]
fn the_host_platform_runs_and_kills_plain_processes() {
    let guard = RunGuard::start().unwrap();
    let mut p = platform(PlatformKind::HOST, PlatformOptions::new(guard.context())).unwrap();
    assert!(!p.enforces_limits());
    let t = p
        .create_tenant(&TenantSpec::new("plain", Role::Victim))
        .unwrap();
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "sleep 1000 & sleep 1000"]);
    let mut c = t.spawn(cmd).unwrap();
    thread::sleep(Duration::from_millis(100));
    let tag = format!("ISOBENCH_TENANT={}", t.info().object_name);
    assert!(tagged_with(&tag).len() >= 2);
    assert!(t.usage().unwrap().cpu_time_ns.is_some());
    let workdir = t.workdir().to_path_buf();
    assert!(workdir.is_dir());
    t.teardown().unwrap();
    c.wait().unwrap();
    assert!(
        tagged_with(&tag).is_empty(),
        "the background sleep survived"
    );
    assert!(!workdir.exists());
    t.teardown().unwrap(); // idempotent
}

#[test]
fn doctor_checks_for_real() {
    if !root_or_skip("doctor") {
        return;
    }
    let checks = doctor();
    for c in &checks {
        eprintln!(
            "{:<22} {:<4} {}",
            c.name,
            if c.ok { "ok" } else { "FAIL" },
            c.detail
        );
        assert!(!c.detail.is_empty(), "{} has no detail", c.name);
    }
    let get = |n: &str| {
        checks
            .iter()
            .find(|c| c.name == n)
            .unwrap_or_else(|| panic!("no check {n}"))
    };
    for n in [
        "root",
        "cgroup",
        "cgroup cpu",
        "cgroup memory",
        "cgroup pids",
        "cgroup freeze+kill",
        "platform cgroup",
    ] {
        assert!(get(n).ok, "{n}: {}", get(n).detail);
    }
    if Command::new("ip").arg("-V").output().is_ok() {
        for n in ["netns", "bridge+veth", "tc tbf"] {
            assert!(get(n).ok, "{n}: {}", get(n).detail);
        }
    }
    for n in ["docker", "podman", "qemu", "kvm"] {
        get(n);
    }
    // Its throwaway objects are gone.
    for d in fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        for e in fs::read_dir(d.path()).into_iter().flatten().flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            assert!(
                !(n.starts_with("isobench-") && n.contains("-doctor")),
                "doctor left {n}"
            );
        }
    }
    let _ = NetSpec::default();
}

#[test]
fn usage_is_read_back_from_the_cgroup() {
    if !root_or_skip("usage") {
        return;
    }
    let guard = RunGuard::start().unwrap();
    let mut p = cgroup_platform(&guard);
    let t = p
        .create_tenant(
            &TenantSpec::new("busy", Role::Victim).with_limits("cpus=0.2".parse().unwrap()),
        )
        .unwrap();
    // CPU beyond the quota, then 1 MiB of direct writes in the workdir.
    let mut cmd = Command::new("sh");
    cmd.args([
        "-c",
        "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; \
         dd if=/dev/zero of=f bs=64k count=16 oflag=direct status=none",
    ]);
    let status = t.spawn(cmd).unwrap().wait().unwrap();
    assert!(status.success());
    let u = t.usage().unwrap();
    assert!(u.cpu_time_ns.unwrap() > 0, "{u:?}");
    assert!(
        u.cpu_user_ns.is_some() && u.cpu_system_ns.is_some(),
        "{u:?}"
    );
    assert!(
        u.cpu_throttled_periods.unwrap() > 0,
        "a busy loop at cpus=0.2 is throttled: {u:?}"
    );
    assert!(u.memory_peak.unwrap() > 0, "{u:?}");
    assert!(
        u.io_write_bytes.unwrap() >= 1 << 20,
        "direct writes are counted: {u:?}"
    );
    assert_eq!(u.oom_kills, Some(0));
    assert!(u.pids_current.is_some());
}

#[test]
fn teardown_is_not_held_up_by_throttled_io() {
    if !root_or_skip("throttled io teardown") {
        return;
    }
    let guard = RunGuard::start().unwrap();
    let mut p = cgroup_platform(&guard);
    let t = p
        .create_tenant(
            &TenantSpec::new("slowdisk", Role::Aggressor)
                .with_limits("io_write_bps=64K".parse().unwrap()),
        )
        .unwrap();
    // 64 MiB of direct writes at 64 KiB/s would take a quarter of an hour.
    let mut cmd = Command::new("dd");
    cmd.args([
        "if=/dev/zero",
        "of=f",
        "bs=1M",
        "count=64",
        "oflag=direct",
        "status=none",
    ]);
    let mut c = t.spawn(cmd).unwrap();
    thread::sleep(Duration::from_millis(300));
    assert!(
        c.try_wait().unwrap().is_none(),
        "dd should still be throttled"
    );
    let dirs = t.info().cgroups.clone();
    t.teardown()
        .expect("teardown kills a task waiting on throttled I/O");
    assert_eq!(c.wait().unwrap().signal(), Some(libc::SIGKILL));
    assert!(dirs.iter().all(|d| !d.exists()));
}

#[test]
fn the_cpu_limit_changes_while_the_tenant_runs() {
    if !root_or_skip("cpu limit change") {
        return;
    }
    let fs_layout = CgroupFs::detect().unwrap();
    let guard = RunGuard::start().unwrap();
    let mut p = cgroup_platform(&guard);
    let t = p
        .create_tenant(
            &TenantSpec::new("swept", Role::Victim).with_limits("cpus=1".parse().unwrap()),
        )
        .unwrap();
    // A busy process that lives through every change.
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "while :; do :; done"]);
    let mut busy = t.spawn(cmd).unwrap();
    let quota = || -> String {
        let h = fs_layout.hierarchy_of(Controller::Cpu).unwrap();
        let file = match fs_layout.version() {
            isobench_platform::CgroupVersion::V1 => "cpu.cfs_quota_us",
            isobench_platform::CgroupVersion::V2 => "cpu.max",
        };
        fs::read_to_string(h.root.join(&t.info().object_name).join(file))
            .unwrap()
            .trim()
            .to_string()
    };

    t.set_cpu_limit(Some(0.1)).unwrap();
    assert_eq!(t.effective_limits().unwrap().cpus, Some(0.1));
    if fs_layout.version() == isobench_platform::CgroupVersion::V1 {
        assert_eq!(quota(), "10000");
    }
    let before = t.usage().unwrap().cpu_throttled_periods.unwrap();
    thread::sleep(Duration::from_millis(400));
    let after = t.usage().unwrap().cpu_throttled_periods.unwrap();
    assert!(
        after > before,
        "a busy loop at cpus=0.1 is throttled ({before} -> {after} throttled periods)"
    );
    assert!(
        alive(busy.id()),
        "the change must not stop the tenant's processes"
    );

    t.set_cpu_limit(Some(0.75)).unwrap();
    assert_eq!(t.effective_limits().unwrap().cpus, Some(0.75));
    t.set_cpu_limit(None).unwrap();
    assert_eq!(t.effective_limits().unwrap().cpus, None, "quota lifted");
    if fs_layout.version() == isobench_platform::CgroupVersion::V1 {
        assert_eq!(quota(), "-1");
    }
    assert!(t.set_cpu_limit(Some(0.0)).is_err());
    assert!(alive(busy.id()));
    t.teardown().unwrap();
    let _ = busy.wait();
}

#[test]
fn the_host_platform_cannot_change_a_cpu_limit_and_says_why() {
    let guard = RunGuard::start().unwrap();
    let mut p = platform(PlatformKind::HOST, PlatformOptions::new(guard.context())).unwrap();
    let t = p
        .create_tenant(&TenantSpec::new("plain", Role::Victim))
        .unwrap();
    let e = t.set_cpu_limit(Some(0.5)).unwrap_err();
    let why = e.downcast_ref::<PlatformError>().expect("a platform error");
    assert!(
        matches!(why, PlatformError::NotEnforceable { key: "cpus", .. }),
        "{why}"
    );
    let text = e.to_string();
    assert!(
        text.contains("host") && text.contains("cgroup"),
        "says why and what to use: {text}"
    );
}

/// The host's cgroup layout when it is v1 (the knobs below are v1 mappings); skips otherwise.
fn v1_or_skip(test: &str) -> Option<CgroupFs> {
    if !root_or_skip(test) {
        return None;
    }
    let fs = CgroupFs::detect().unwrap();
    if fs.version() != isobench_platform::CgroupVersion::V1 {
        skip("cgroup v1", test, "the host's controllers are cgroup v2");
        return None;
    }
    Some(fs)
}

#[test]
fn v1_maps_swap_burst_and_io_weight_and_reads_them_back() {
    let Some(fs_layout) = v1_or_skip("v1 knobs") else {
        return;
    };
    let file_of =
        |ctl: Controller, file: &str| fs_layout.hierarchy_of(ctl).map(|h| h.root.join(file));
    if !file_of(Controller::Memory, "memory.memsw.limit_in_bytes").is_some_and(|f| f.exists()) {
        skip(
            "swapaccount",
            "v1 knobs",
            "the kernel accounts no swap per cgroup",
        );
        return;
    }
    let guard = RunGuard::start().unwrap();
    let mut p = cgroup_platform(&guard);
    let asked: Limits = "cpus=0.5,cpu_burst=10ms,memory=96M,swap=32M,io_weight=250"
        .parse()
        .unwrap();
    let t = p
        .create_tenant(&TenantSpec::new("knobs", Role::Victim).with_limits(asked.clone()))
        .unwrap();
    let name = t.info().object_name.clone();
    let read = |ctl: Controller, file: &str| -> String {
        let h = fs_layout.hierarchy_of(ctl).unwrap();
        fs::read_to_string(h.root.join(&name).join(file))
            .unwrap_or_else(|e| panic!("{file}: {e}"))
            .trim()
            .to_string()
    };
    // memory + swap, in v1's one file.
    assert_eq!(
        read(Controller::Memory, "memory.memsw.limit_in_bytes"),
        (128u64 << 20).to_string()
    );
    assert_eq!(read(Controller::Cpu, "cpu.cfs_burst_us"), "10000");
    assert_eq!(read(Controller::Io, "blkio.bfq.weight"), "250");
    let back = t.effective_limits().unwrap();
    assert_eq!(
        (
            back.cpus,
            back.cpu_burst,
            back.memory,
            back.swap,
            back.io_weight
        ),
        (
            asked.cpus,
            asked.cpu_burst,
            asked.memory,
            asked.swap,
            asked.io_weight
        ),
        "read back: {back}"
    );
    // Without `swap`, memory alone still means no swap.
    let plain = p
        .create_tenant(
            &TenantSpec::new("plain", Role::Victim).with_limits("memory=96M".parse().unwrap()),
        )
        .unwrap();
    assert_eq!(plain.effective_limits().unwrap().swap, None);
    let h = fs_layout.hierarchy_of(Controller::Memory).unwrap();
    assert_eq!(
        fs::read_to_string(
            h.root
                .join(&plain.info().object_name)
                .join("memory.memsw.limit_in_bytes")
        )
        .unwrap()
        .trim(),
        (96u64 << 20).to_string()
    );
    t.teardown().unwrap();
    plain.teardown().unwrap();
}

#[test]
fn v1_refuses_memory_low_and_partitions_before_creating_anything() {
    if v1_or_skip("v1 knob refusals").is_none() {
        return;
    }
    let guard = RunGuard::start().unwrap();
    let mut p = cgroup_platform(&guard);
    for (limits, key, why) in [
        (
            "memory=256M,memory_low=64M",
            "memory_low",
            "memory.soft_limit_in_bytes is not the same",
        ),
        ("memory_high=64M", "memory_high", "never throttles"),
        (
            "cpuset=0,cpuset_partition=root",
            "cpuset_partition",
            "exist only in cgroup v2",
        ),
        ("io_latency=5ms", "io_latency", "no latency target"),
    ] {
        let e = match p.create_tenant(
            &TenantSpec::new("refused", Role::Victim).with_limits(limits.parse().unwrap()),
        ) {
            Ok(_) => panic!("{limits} was accepted on cgroup v1"),
            Err(e) => e,
        };
        let msg = format!("{e:#}");
        assert!(
            msg.contains(&format!("limit `{key}` cannot be enforced")) && msg.contains(why),
            "{limits}: {msg}"
        );
        assert!(
            matches!(
                e.downcast_ref::<PlatformError>(),
                Some(PlatformError::Refused { .. })
            ),
            "{limits}: a refusal, not a failure: {msg}"
        );
    }
    // The run's own state directory lives as long as the run; nothing else may exist.
    let left: Vec<String> = leftovers(guard.context().id())
        .into_iter()
        .filter(|l| !l.starts_with("state "))
        .collect();
    assert_eq!(left, Vec::<String>::new(), "nothing is created");
}

#[test]
fn a_memory_limit_off_a_page_boundary_is_held_as_the_kernel_rounds_it() {
    // The bug: memory.memsw.limit_in_bytes was checked for the exact bytes written, and the
    // kernel keeps whole pages, so a vm tenant (guest RAM plus QEMU's own, in bytes) failed
    // with "wrote `549955429`, but the kernel holds `549953536`".
    if !root_or_skip("a_memory_limit_off_a_page_boundary") {
        return;
    }
    let guard = RunGuard::start().unwrap();
    let mut p = cgroup_platform(&guard);
    let limits = Limits {
        memory: Some((256 << 20) + 12345),
        ..Limits::default()
    };
    let t = p
        .create_tenant(&TenantSpec::new("odd", Role::Victim).with_limits(limits))
        .expect("a limit off a page boundary is accepted");
    let back = t.effective_limits().unwrap();
    assert_eq!(back.memory, Some((256 << 20) + 12288), "{back:?}");
}

/// Every knob the host's cgroups hold changes in place while the tenant's processes run, a
/// memory limit below what the tenant uses is refused with the kernel's reason, and the
/// planned limits come back.
#[test]
fn the_knobs_change_while_the_tenant_runs_and_come_back() {
    use isobench_platform::{Knob, KnobSet, LimitChanges};
    if !root_or_skip("live knob change") {
        return;
    }
    let fs_layout = CgroupFs::detect().unwrap();
    let guard = RunGuard::start().unwrap();
    let mut p = cgroup_platform(&guard);
    let planned: Limits = "cpus=1,shares=1024,memory=256M,pids=64,io_write_bps=1G"
        .parse()
        .unwrap();
    let t = p
        .create_tenant(&TenantSpec::new("knobbed", Role::Victim).with_limits(planned.clone()))
        .unwrap();
    if t.info().io_device.is_none() {
        skip(
            "disk",
            "live knob change",
            "the workdir has no block device",
        );
        return;
    }
    // A process holding 64 MiB of anonymous memory (no swap here: it cannot be reclaimed).
    let mut cmd = Command::new("python3");
    cmd.args([
        "-c",
        "import sys,time\nb=b'a'*(64<<20)\nprint('ok',flush=True)\ntime.sleep(60)",
    ])
    .stdout(Stdio::piped());
    let mut holder = t.spawn(cmd).unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ok");

    let change = LimitChanges {
        set: "cpus=0.5,shares=256,memory=128M,pids=32,io_read_bps=10M"
            .parse()
            .unwrap(),
        lift: KnobSet::of(&[Knob::IoWriteBps]),
    };
    let back = t.update_limits(&change).unwrap();
    assert_eq!(back.cpus, Some(0.5));
    assert_eq!(back.memory, Some(128 << 20));
    assert_eq!(back.pids, Some(32));
    assert_eq!(back.io_read_bps, Some(10 << 20));
    assert_eq!(back.io_write_bps, None, "lifted");
    match fs_layout.version() {
        isobench_platform::CgroupVersion::V1 => {
            assert_eq!(
                back.cpu_weight,
                Some(isobench_platform::CpuWeight::Shares(256))
            )
        }
        isobench_platform::CgroupVersion::V2 => {
            assert_eq!(back.cpu_weight.map(|w| w.as_shares()), Some(256))
        }
    }
    assert!(alive(holder.id()), "the change must not stop the tenant");

    // Below what the tenant holds: v1 refuses (EBUSY) and says so; the limit stays.
    if fs_layout.version() == isobench_platform::CgroupVersion::V1 {
        let lower = LimitChanges {
            set: "memory=16M".parse().unwrap(),
            lift: KnobSet::NONE,
        };
        let e = format!("{:#}", t.update_limits(&lower).unwrap_err());
        assert!(
            e.contains("memory.limit_in_bytes")
                && e.contains("could not reclaim enough")
                && e.contains("the limit is unchanged")
                && e.contains("busy"),
            "{e}"
        );
        assert_eq!(t.effective_limits().unwrap().memory, Some(128 << 20));
        assert!(alive(holder.id()));
        // A v2 knob on v1: refused with the reason, nothing written.
        let low = LimitChanges {
            set: "memory_low=64M".parse().unwrap(),
            lift: KnobSet::NONE,
        };
        let e = format!("{:#}", t.update_limits(&low).unwrap_err());
        assert!(e.contains("cgroup v1 has no reclaim protection"), "{e}");
    }

    let restored = t.update_limits(&change.restoring(&planned)).unwrap();
    assert_eq!(restored.cpus, planned.cpus);
    assert_eq!(restored.memory, planned.memory);
    assert_eq!(restored.pids, planned.pids);
    assert_eq!(restored.io_read_bps, None);
    assert_eq!(restored.io_write_bps, planned.io_write_bps);
    assert_eq!(
        restored.cpu_weight.map(|w| w.as_shares()),
        Some(1024),
        "{restored}"
    );
    assert!(alive(holder.id()));
    t.teardown().unwrap();
    let _ = holder.wait();
}
