//! The cgroup v2 code on a fake cgroupfs tree (a temporary directory): controllers enabled,
//! limits written in v2 syntax and read back, usage parsed, teardown through `cgroup.kill`,
//! missing controllers refused before anything is created. Needs no root.

mod common;

use std::fs;
use std::path::Path;

use isobench_platform::cgroup::{CgroupTree, TenantCgroup};
use isobench_platform::{
    platform, CgroupFs, CgroupVersion, CpuWeight, HostInfo, Limits, PlatformError, PlatformKind,
    PlatformOptions, Role, RunGuard, TenantSpec,
};

fn host() -> HostInfo {
    HostInfo {
        cpus: isobench_platform::CpuList::parse("0-3").unwrap(),
        mems: isobench_platform::CpuList::parse("0").unwrap(),
        memory_bytes: 16 << 30,
    }
}

fn read(p: &Path) -> String {
    fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .trim()
        .to_string()
}

/// A workdir parent on a disk, so io limits have a device.
fn disk_dir() -> Option<tempfile::TempDir> {
    for parent in ["/var/tmp", "/tmp"] {
        if let Ok(d) = tempfile::tempdir_in(parent) {
            if isobench_platform::device_for_path(d.path()).is_ok() {
                return Some(d);
            }
        }
    }
    None
}

#[test]
fn v2_limits_are_written_read_back_and_torn_down() {
    let Some(work) = disk_dir() else {
        common::skip(
            "disk",
            "v2 fake",
            "no directory on a block device for the io limits",
        );
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let fs_v2 = CgroupFs::fake_v2(root.path()).unwrap();
    assert_eq!(fs_v2.version(), CgroupVersion::V2);
    let guard = RunGuard::start().unwrap();
    let mut opts = PlatformOptions::new(guard.context());
    opts.cgroup_fs = Some(fs_v2);
    opts.host = Some(host());
    opts.workdir_root = work.path().to_path_buf();
    let mut p = platform(PlatformKind::CGROUP, opts).unwrap();

    let asked: Limits = "cpus=1.5,weight=50,cpuset=1-2,mems=0,memory=96M,pids=50,\
                         io_read_bps=10M,io_write_bps=20M,io_read_iops=300,io_write_iops=400"
        .parse()
        .unwrap();
    let t = p
        .create_tenant(&TenantSpec::new("v", Role::Victim).with_limits(asked.clone()))
        .unwrap();
    let dir = root.path().join(&t.info().object_name);
    assert_eq!(t.info().cgroups, vec![dir.clone()]);

    // Controllers enabled for the children of the root.
    assert_eq!(
        read(&root.path().join("cgroup.subtree_control")),
        "cpu cpuset io memory pids"
    );
    // v2 syntax.
    let dev = t.info().io_device.clone().unwrap().dev;
    assert_eq!(read(&dir.join("cpu.max")), "150000 100000");
    assert_eq!(read(&dir.join("cpu.weight")), "50");
    assert_eq!(read(&dir.join("cpuset.cpus")), "1-2");
    assert_eq!(read(&dir.join("cpuset.mems")), "0");
    assert_eq!(read(&dir.join("memory.max")), (96u64 << 20).to_string());
    assert_eq!(read(&dir.join("memory.swap.max")), "0");
    assert_eq!(read(&dir.join("pids.max")), "50");
    assert_eq!(
        read(&dir.join("io.max")),
        format!(
            "{dev} rbps={} wbps={} riops=300 wiops=400",
            10u64 << 20,
            20u64 << 20
        )
    );
    // Read back through the same code the real tree uses.
    let back = t.effective_limits().unwrap();
    assert_eq!(back, asked);
    assert_eq!(back.cpu_weight, Some(CpuWeight::Weight(50)));

    // Usage counters, as the kernel would write them.
    fs::write(
        dir.join("cpu.stat"),
        "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 10\nnr_throttled 4\nthrottled_usec 250\n",
    )
    .unwrap();
    fs::write(dir.join("memory.peak"), "12345678\n").unwrap();
    fs::write(dir.join("memory.current"), "2345678\n").unwrap();
    fs::write(
        dir.join("memory.events"),
        "low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\noom_group_kill 0\n",
    )
    .unwrap();
    fs::write(dir.join("pids.current"), "12\n").unwrap();
    fs::write(dir.join("pids.events"), "max 3\n").unwrap();
    fs::write(
        dir.join("io.stat"),
        format!("{dev} rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n8:16 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0\n"),
    )
    .unwrap();
    let u = t.usage().unwrap();
    assert_eq!(u.cpu_time_ns, Some(1_500_000));
    assert_eq!(u.cpu_user_ns, Some(1_000_000));
    assert_eq!(u.cpu_throttled_periods, Some(4));
    assert_eq!(u.cpu_throttled_ns, Some(250_000));
    assert_eq!(u.memory_peak, Some(12_345_678));
    assert_eq!(u.memory_current, Some(2_345_678));
    assert_eq!(u.oom_kills, Some(2));
    assert_eq!(u.pids_current, Some(12));
    assert_eq!(u.pids_limit_hits, Some(3));
    assert_eq!(u.io_read_bytes, Some(4097));
    assert_eq!(u.io_write_bytes, Some(8194));
    assert_eq!((u.io_read_ops, u.io_write_ops), (Some(4), Some(6)));

    // Teardown removes the cgroup; a second one is a no-op.
    let workdir = t.workdir().to_path_buf();
    t.teardown().unwrap();
    assert!(!dir.exists());
    assert!(!workdir.exists());
    t.teardown().unwrap();
}

#[test]
fn v2_teardown_writes_cgroup_kill() {
    let root = tempfile::tempdir().unwrap();
    let fs_v2 = CgroupFs::fake_v2(root.path()).unwrap();
    let cg = TenantCgroup::create(&fs_v2, "isobench-0000abcd-k", &Limits::default(), None).unwrap();
    let dir = root.path().join("isobench-0000abcd-k");
    assert!(dir.join("cgroup.procs").exists());
    cg.kill_all(std::time::Duration::from_secs(1)).unwrap();
    assert_eq!(read(&dir.join("cgroup.kill")), "1");
    cg.remove(std::time::Duration::from_secs(1)).unwrap();
    assert!(!dir.exists());
}

#[test]
fn aggressor_safe_defaults_in_v2_syntax() {
    let root = tempfile::tempdir().unwrap();
    let guard = RunGuard::start().unwrap();
    let mut opts = PlatformOptions::new(guard.context());
    opts.cgroup_fs = Some(CgroupFs::fake_v2(root.path()).unwrap());
    opts.host = Some(host());
    let Some(work) = disk_dir() else {
        common::skip("disk", "safe defaults v2", "no directory on a block device");
        return;
    };
    opts.workdir_root = work.path().to_path_buf();
    let mut p = platform(PlatformKind::CGROUP, opts).unwrap();
    let t = p
        .create_tenant(&TenantSpec::new("agg", Role::Aggressor))
        .unwrap();
    let dir = root.path().join(&t.info().object_name);
    assert_eq!(read(&dir.join("pids.max")), "256");
    assert_eq!(read(&dir.join("memory.max")), (4u64 << 30).to_string());
    assert!(read(&dir.join("io.max")).ends_with(&format!("wbps={}", 1u64 << 30)));
}

#[test]
fn a_missing_v2_controller_is_refused_before_anything_is_created() {
    let root = tempfile::tempdir().unwrap();
    let tree = isobench_platform::cgroup::FakeTree::new(CgroupVersion::V2);
    tree.populate_root(root.path(), &["cpu", "memory"]).unwrap();
    let fs_v2 = CgroupFs::v2(root.path(), std::sync::Arc::new(tree)).unwrap();
    let work = tempfile::tempdir().unwrap();
    let guard = RunGuard::start().unwrap();
    let mut opts = PlatformOptions::new(guard.context());
    opts.cgroup_fs = Some(fs_v2);
    opts.host = Some(host());
    opts.workdir_root = work.path().to_path_buf();
    let mut p = platform(PlatformKind::CGROUP, opts).unwrap();
    let e = match p.create_tenant(
        &TenantSpec::new("x", Role::Victim).with_limits("memory=64M,pids=10".parse().unwrap()),
    ) {
        Ok(_) => panic!("a pids limit without the pids controller must be refused"),
        Err(e) => e,
    };
    let msg = e.to_string();
    assert!(
        matches!(
            e.downcast_ref::<PlatformError>(),
            Some(PlatformError::MissingController { key: "pids", .. })
        ),
        "{msg}"
    );
    assert!(
        msg.contains("`pids`") && msg.contains("subtree_control"),
        "{msg}"
    );
    // Nothing created: no cgroup, no workdir, the root untouched.
    let entries: Vec<_> = fs::read_dir(root.path())
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .collect();
    assert!(entries.is_empty(), "{entries:?}");
    assert_eq!(fs::read_dir(work.path()).unwrap().count(), 0);
    assert_eq!(read(&root.path().join("cgroup.subtree_control")), "");
    let _ = tree.is_real();
}

#[test]
fn fake_v1_tree_round_trip() {
    let root = tempfile::tempdir().unwrap();
    let fs_v1 = CgroupFs::fake_v1(root.path()).unwrap();
    let l: Limits = "cpus=0.5,shares=2048,cpuset=1,memory=64M,pids=32"
        .parse()
        .unwrap();
    let cg = TenantCgroup::create(&fs_v1, "isobench-0000abcd-f", &l, None).unwrap();
    let back = cg.read_limits(None).unwrap();
    assert_eq!(back.cpus, Some(0.5));
    assert_eq!(back.cpu_weight, Some(CpuWeight::Shares(2048)));
    assert_eq!(back.cpuset.unwrap().to_string(), "1");
    assert_eq!(
        back.mems.unwrap().to_string(),
        "0",
        "mems copied from the parent"
    );
    assert_eq!(back.memory, Some(64 << 20));
    assert_eq!(back.pids, Some(32));
    assert_eq!(
        read(
            &root
                .path()
                .join("memory/isobench-0000abcd-f/memory.memsw.limit_in_bytes")
        ),
        (64u64 << 20).to_string()
    );
    cg.remove(std::time::Duration::from_secs(1)).unwrap();
    assert!(!cg.exists_any());
}

#[test]
fn v2_cpu_limit_changes_in_cpu_max() {
    let root = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let guard = RunGuard::start().unwrap();
    let mut opts = PlatformOptions::new(guard.context());
    opts.cgroup_fs = Some(CgroupFs::fake_v2(root.path()).unwrap());
    opts.host = Some(host());
    opts.workdir_root = work.path().to_path_buf();
    let mut p = platform(PlatformKind::CGROUP, opts).unwrap();
    let t = p
        .create_tenant(
            &TenantSpec::new("swept", Role::Victim).with_limits("cpuset=0-1".parse().unwrap()),
        )
        .unwrap();
    let dir = root.path().join(&t.info().object_name);
    assert_eq!(
        read(&dir.join("cpu.max")),
        "max 100000",
        "no quota at first"
    );

    t.set_cpu_limit(Some(0.3)).unwrap();
    assert_eq!(read(&dir.join("cpu.max")), "30000 100000");
    assert_eq!(t.effective_limits().unwrap().cpus, Some(0.3));
    t.set_cpu_limit(Some(2.0)).unwrap();
    assert_eq!(read(&dir.join("cpu.max")), "200000 100000");
    t.set_cpu_limit(None).unwrap();
    assert_eq!(read(&dir.join("cpu.max")), "max 100000");
    assert_eq!(t.effective_limits().unwrap().cpus, None);

    // More than its cpuset holds, or nothing at all: refused, the setting unchanged.
    let e = t.set_cpu_limit(Some(3.0)).unwrap_err().to_string();
    assert!(e.contains("cpus=2 or less"), "{e}");
    assert!(t.set_cpu_limit(Some(-1.0)).is_err());
    assert_eq!(read(&dir.join("cpu.max")), "max 100000");
}

#[test]
fn v1_cpu_limit_changes_in_the_cfs_files() {
    let root = tempfile::tempdir().unwrap();
    let fs_v1 = CgroupFs::fake_v1(root.path()).unwrap();
    let cg = TenantCgroup::create(&fs_v1, "isobench-0000abcd-q", &Limits::default(), None).unwrap();
    let dir = root.path().join("cpu/isobench-0000abcd-q");
    cg.set_cpu_quota(Some(0.25)).unwrap();
    assert_eq!(read(&dir.join("cpu.cfs_period_us")), "100000");
    assert_eq!(read(&dir.join("cpu.cfs_quota_us")), "25000");
    assert_eq!(cg.read_limits(None).unwrap().cpus, Some(0.25));
    cg.set_cpu_quota(None).unwrap();
    assert_eq!(read(&dir.join("cpu.cfs_quota_us")), "-1");
    assert_eq!(cg.read_limits(None).unwrap().cpus, None);
    cg.remove(std::time::Duration::from_secs(1)).unwrap();
}

/// Pressure-stall counters as a v2 kernel writes them, read back through the tenant's usage
/// with its delivered I/O; the fake tree starts them at zero.
#[test]
fn v2_pressure_and_io_are_read_from_the_tenants_cgroup() {
    use isobench_platform::noise::{Stall, StallShare};
    let root = tempfile::tempdir().unwrap();
    let fs_v2 = CgroupFs::fake_v2(root.path()).unwrap();
    let cg = TenantCgroup::create(&fs_v2, "isobench-0000abcd-p", &Limits::default(), None).unwrap();
    let dir = root.path().join("isobench-0000abcd-p");
    let zero = Stall {
        some_us: 0,
        full_us: Some(0),
    };
    let before = cg.usage();
    assert_eq!(before.pressure.cpu, Some(zero));
    assert_eq!(before.pressure.memory, Some(zero));
    assert_eq!(before.pressure.io, Some(zero));

    let psi = |some: u64, full: u64| {
        format!(
            "some avg10=1.00 avg60=0.50 avg300=0.10 total={some}\n\
             full avg10=0.00 avg60=0.00 avg300=0.00 total={full}\n"
        )
    };
    fs::write(dir.join("cpu.pressure"), psi(200_000, 0)).unwrap();
    fs::write(dir.join("memory.pressure"), psi(1_500_000, 500_000)).unwrap();
    fs::write(dir.join("io.pressure"), psi(400_000, 100_000)).unwrap();
    fs::write(
        dir.join("io.stat"),
        "8:0 rbytes=8192 wbytes=4000000 rios=2 wios=1000 dbytes=0 dios=0\n",
    )
    .unwrap();
    let after = cg.usage();
    assert_eq!(
        after.pressure.memory,
        Some(Stall {
            some_us: 1_500_000,
            full_us: Some(500_000)
        })
    );
    let r = after.rates_since(&before, 2.0);
    assert_eq!(
        r.pressure.memory,
        Some(StallShare {
            some: 0.75,
            full: Some(0.25)
        })
    );
    assert_eq!(r.pressure.cpu.map(|s| s.some), Some(0.1));
    assert_eq!(r.pressure.io.map(|s| s.full), Some(Some(0.05)));
    assert_eq!(r.write_bytes_per_s, Some(2_000_000.0));
    assert_eq!(r.write_ops_per_s, Some(500.0));
    assert_eq!(r.read_ops_per_s, Some(1.0));

    // A kernel booted with psi=0 refuses the read: not available, not zero.
    fs::remove_file(dir.join("io.pressure")).unwrap();
    assert_eq!(cg.usage().pressure.io, None);
}

/// cgroup v1 has no per-cgroup pressure: the tenant's pressure is not available (never
/// zero), while its delivered I/O comes from blkio.
#[test]
fn v1_has_no_tenant_pressure_but_counts_io() {
    let root = tempfile::tempdir().unwrap();
    let fs_v1 = CgroupFs::fake_v1(root.path()).unwrap();
    let cg = TenantCgroup::create(&fs_v1, "isobench-0000abcd-o", &Limits::default(), None).unwrap();
    let before = cg.usage();
    let blkio = root.path().join("blkio/isobench-0000abcd-o");
    fs::write(
        blkio.join("blkio.throttle.io_service_bytes"),
        "8:0 Read 0\n8:0 Write 3000000\nTotal 3000000\n",
    )
    .unwrap();
    fs::write(
        blkio.join("blkio.throttle.io_serviced"),
        "8:0 Read 0\n8:0 Write 300\nTotal 300\n",
    )
    .unwrap();
    let r = cg.usage().rates_since(&before, 3.0);
    assert_eq!(
        r.pressure,
        isobench_platform::noise::PressureShare::default()
    );
    assert_eq!(r.pressure.memory, None);
    assert_eq!(r.write_bytes_per_s, Some(1_000_000.0));
    assert_eq!(r.write_ops_per_s, Some(100.0));
    assert_eq!(r.read_bytes_per_s, Some(0.0));
}
