//! Noise attribution on fake cgroup trees (v1 and v2: `cpu.stat` throttling counters and v2
//! pressure files, written by the test as the kernel would) and one real read of this host's
//! `/proc`. Needs no root.

use std::fs;

use isobench_platform::cgroup::TenantCgroup;
use isobench_platform::noise::{
    causes, delta, interrupts, irq_affinity, CauseKind, HostNoise, Thresholds, WatchedTenant,
};
use isobench_platform::{CgroupFs, Limits};

fn watched(cg: &TenantCgroup) -> Vec<WatchedTenant> {
    vec![WatchedTenant {
        name: "aggressor".into(),
        cgroups: cg.dirs(),
    }]
}

#[test]
fn v2_throttling_and_pressure_are_read_from_the_cgroup() {
    let root = tempfile::tempdir().unwrap();
    let fs_v2 = CgroupFs::fake_v2(root.path()).unwrap();
    let cg = TenantCgroup::create(&fs_v2, "isobench-0000abcd-a", &Limits::default(), None).unwrap();
    let dir = &cg.dirs()[0];
    let write = |f: &str, t: &str| fs::write(dir.join(f), t).unwrap();
    let psi = |some: u64, full: u64| {
        format!(
            "some avg10=0.00 avg60=0.00 avg300=0.00 total={some}\n\
             full avg10=0.00 avg60=0.00 avg300=0.00 total={full}\n"
        )
    };
    write(
        "cpu.stat",
        "usage_usec 0\nuser_usec 0\nsystem_usec 0\nnr_periods 100\nnr_throttled 40\nthrottled_usec 1000\n",
    );
    write("cpu.pressure", &psi(0, 0));
    write("io.pressure", &psi(0, 0));
    let mut before = HostNoise::read(&watched(&cg)).unwrap();
    write(
        "cpu.stat",
        "usage_usec 9\nuser_usec 9\nsystem_usec 0\nnr_periods 120\nnr_throttled 52\nthrottled_usec 401000\n",
    );
    write("cpu.pressure", &psi(800_000, 100_000));
    write("io.pressure", &psi(1_000, 0));
    let mut after = HostNoise::read(&watched(&cg)).unwrap();
    // A fixed 2 s interval, whatever the test's own timing.
    before.at_s = 100.0;
    after.at_s = 102.0;

    let t = &after.tenants[0];
    assert_eq!(t.throttle.unwrap().nr_throttled, 52);
    assert_eq!(t.pressure.cpu.unwrap().full_us, Some(100_000));
    assert_eq!(
        t.pressure.memory.map(|s| s.some_us),
        Some(0),
        "the fake tree's memory.pressure starts at zero"
    );

    let d = delta(&before, &after);
    let th = d.tenants[0].throttle.unwrap();
    assert_eq!((th.periods, th.throttled_periods), (20, 12));
    assert!((th.throttled_s - 0.4).abs() < 1e-12);
    let cpu = d.tenants[0].pressure.cpu.unwrap();
    assert!((cpu.some - 0.4).abs() < 1e-12);
    assert_eq!(cpu.full, Some(0.05));

    let found: Vec<_> = causes(&d, &Thresholds::default())
        .into_iter()
        .filter(|c| c.tenant.as_deref() == Some("aggressor"))
        .map(|c| (c.kind, c.text))
        .collect();
    assert_eq!(
        found,
        [
            (
                CauseKind::Throttling,
                "aggressor throttled 12 of 20 periods (0.40 s)".to_string()
            ),
            (
                CauseKind::CpuPressure,
                "aggressor CPU pressure 40% of the interval".to_string()
            ),
        ]
    );
}

#[test]
fn v1_throttling_is_read_from_the_cpu_hierarchy() {
    let root = tempfile::tempdir().unwrap();
    let fs_v1 = CgroupFs::fake_v1(root.path()).unwrap();
    let cg = TenantCgroup::create(&fs_v1, "isobench-0000abcd-b", &Limits::default(), None).unwrap();
    let cpu_dir = cg
        .dirs()
        .into_iter()
        .find(|d| d.starts_with(root.path().join("cpu")))
        .unwrap();
    fs::write(
        cpu_dir.join("cpu.stat"),
        "nr_periods 20\nnr_throttled 12\nthrottled_time 300000000\n",
    )
    .unwrap();
    let now = HostNoise::read(&watched(&cg)).unwrap();
    let th = now.tenants[0].throttle.unwrap();
    assert_eq!((th.nr_periods, th.nr_throttled), (20, 12));
    assert_eq!(th.throttled_ns, 300_000_000);
    assert_eq!(
        now.tenants[0].pressure.cpu, None,
        "v1 has no pressure files"
    );
}

#[test]
fn a_tenant_without_cgroup_files_reads_as_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let w = [WatchedTenant {
        name: "gone".into(),
        cgroups: vec![dir.path().join("missing")],
    }];
    let n = HostNoise::read(&w).unwrap();
    assert_eq!(n.tenants[0].throttle, None);
    assert_eq!(n.tenants[0].pressure.cpu, None);
}

#[test]
fn real_host_snapshot_and_interrupts() {
    let a = HostNoise::read(&[]).unwrap();
    let online = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        a.per_cpu.len() >= online,
        "{} CPUs in /proc/stat, {online} usable",
        a.per_cpu.len()
    );
    assert!(a.total.idle_s + a.total.user_s > 0.0);
    if std::path::Path::new("/proc/pressure/cpu").exists() {
        assert!(a.pressure.cpu.is_some(), "PSI file exists but was not read");
    }
    // Some work between the snapshots so the interval is not empty.
    let mut x = 0u64;
    for i in 0..200_000u64 {
        x = x.wrapping_mul(31).wrapping_add(i);
    }
    std::hint::black_box(x);
    let b = HostNoise::read(&[]).unwrap();
    let d = delta(&a, &b);
    assert!(d.interval_s > 0.0);
    assert_eq!(d.per_cpu.len(), a.per_cpu.len());
    assert!(d
        .per_cpu
        .iter()
        .all(|c| (0.0..=1.0).contains(&c.idle_share)));

    let irqs = interrupts().unwrap();
    assert!(irqs.iter().any(|i| i.irq == "LOC"), "no local timer line");
    for i in irqs.iter().filter(|i| i.irq.parse::<u32>().is_ok()) {
        assert!(i.per_cpu.len() <= a.per_cpu.len(), "{i:?}");
    }
    // Devices may have no interrupts (virtual disks and interfaces are left out), but each
    // one listed refers to lines of /proc/interrupts.
    for dev in irq_affinity().unwrap() {
        for i in &dev.irqs {
            assert!(irqs.iter().any(|j| j.irq == i.irq), "{dev:?}");
        }
    }
}
