//! CPU time of a cgroup, read from the same counters for a tenant and for the host's root
//! cgroup, so the user/system split is made the same way on both sides of a subtraction.
//!
//! v1 has `cpuacct.usage` and `cpuacct.usage_user` (nanoseconds; `cpuacct.stat` splits by
//! clock ticks, which drifts for fault-heavy workloads); v2 has `usage_usec` and `user_usec`
//! in `cpu.stat`.

use std::path::{Path, PathBuf};

use super::{CgroupTree, RealTree};
use crate::flatkeyed::keyed;
use crate::usage::Usage;

/// Where the kernel's cgroup filesystems are mounted.
const CGROUP_MOUNT: &str = "/sys/fs/cgroup";

/// CPU time of a cgroup, split when the kernel splits it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CgroupCpu {
    /// User plus system, nanoseconds.
    pub total_ns: u64,
    /// User only, nanoseconds, when known.
    pub user_ns: Option<u64>,
}

/// v1: `cpuacct.usage`, and `cpuacct.usage_user` when the kernel has it.
pub fn read_v1(tree: &dyn CgroupTree, dir: &Path) -> Option<CgroupCpu> {
    let num = |f: &str| {
        tree.read(&dir.join(f))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
    };
    Some(CgroupCpu {
        total_ns: num("cpuacct.usage")?,
        user_ns: num("cpuacct.usage_user"),
    })
}

/// v2: `usage_usec` and `user_usec` of `cpu.stat`.
pub fn read_v2(tree: &dyn CgroupTree, dir: &Path) -> Option<CgroupCpu> {
    let stat = tree.read(&dir.join("cpu.stat")).ok()?;
    let us = |k: &str| keyed(&stat, k).map(|v| v * 1000);
    Some(CgroupCpu {
        total_ns: us("usage_usec")?,
        user_ns: us("user_usec"),
    })
}

/// CPU time of the root cgroup under `mount`: the v1 `cpuacct` hierarchy (alone or mounted
/// with `cpu`), else the v2 root.
pub fn root_in(tree: &dyn CgroupTree, mount: &Path) -> Option<CgroupCpu> {
    ["cpuacct", "cpu,cpuacct"]
        .iter()
        .find_map(|h| read_v1(tree, &mount.join(h)))
        .or_else(|| read_v2(tree, mount))
}

/// CPU time of the whole machine, from the kernel's root cgroup.
pub fn host() -> Option<CgroupCpu> {
    root_in(&RealTree, Path::new(CGROUP_MOUNT))
}

/// CPU time of a tenant whose cgroup directories are `dirs`: v1's `cpuacct.usage` and
/// `cpuacct.usage_user` from the first directory that has both (the counters the host root is
/// read from), else the CPU time `usage` counts (v2's `cpu.stat`, a guest's or a pod's own).
pub fn tenant_in(
    tree: &dyn CgroupTree,
    dirs: &[PathBuf],
    usage: impl FnOnce() -> Option<Usage>,
) -> Option<CgroupCpu> {
    dirs.iter()
        .find_map(|d| read_v1(tree, d).filter(|c| c.user_ns.is_some()))
        .or_else(|| {
            let u = usage()?;
            Some(CgroupCpu {
                total_ns: u.cpu_time_ns?,
                user_ns: u.cpu_user_ns,
            })
        })
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::cgroup::{CgroupFs, CgroupVersion, Controller, FakeTree, TenantCgroup};
    use crate::limits::Limits;

    fn tenant_cpu(cg: &TenantCgroup) -> Option<CgroupCpu> {
        tenant_in(cg.tree().as_ref(), &cg.dirs(), || Some(cg.usage()))
    }

    #[test]
    fn v1_tenant_splits_by_cpuacct_usage_user_else_by_ticks() {
        let dir = tempfile::tempdir().unwrap();
        let fs = CgroupFs::fake_v1(dir.path()).unwrap();
        let cg = TenantCgroup::create(&fs, "t", &Limits::default(), None).unwrap();
        let acct = cg.dir_of(Controller::Cpuacct).unwrap().to_path_buf();
        fs::write(acct.join("cpuacct.usage"), "9000000000\n").unwrap();
        fs::write(acct.join("cpuacct.stat"), "user 500\nsystem 400\n").unwrap();
        // Without `cpuacct.usage_user` the split comes from `cpuacct.stat`'s ticks.
        let ticks = tenant_cpu(&cg).unwrap();
        assert_eq!(ticks.total_ns, 9_000_000_000);
        assert_eq!(
            ticks.user_ns,
            cg.usage().cpu_user_ns,
            "the split of the usage counters"
        );
        fs::write(acct.join("cpuacct.usage_user"), "6000000000\n").unwrap();
        assert_eq!(
            tenant_cpu(&cg),
            Some(CgroupCpu {
                total_ns: 9_000_000_000,
                user_ns: Some(6_000_000_000)
            })
        );
    }

    #[test]
    fn v2_tenant_reads_cpu_stat() {
        let dir = tempfile::tempdir().unwrap();
        let fs = CgroupFs::fake_v2(dir.path()).unwrap();
        let cg = TenantCgroup::create(&fs, "t", &Limits::default(), None).unwrap();
        let d = cg.dir_of(Controller::Cpu).unwrap().to_path_buf();
        fs::write(
            d.join("cpu.stat"),
            "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 10\nnr_throttled 4\n",
        )
        .unwrap();
        assert_eq!(
            tenant_cpu(&cg),
            Some(CgroupCpu {
                total_ns: 1_500_000,
                user_ns: Some(1_000_000)
            })
        );
        assert_eq!(cg.usage().cpu_throttled_periods, Some(4));
    }

    #[test]
    fn a_tenant_without_cpu_counters_has_no_cpu_time() {
        assert_eq!(tenant_in(&RealTree, &[], || Some(Usage::default())), None);
    }

    #[test]
    fn v1_root_reads_cpuacct_with_or_without_the_user_split() {
        let dir = tempfile::tempdir().unwrap();
        let tree = FakeTree::new(CgroupVersion::V1);
        let root = dir.path().join("cpu,cpuacct");
        tree.populate_root(&root, &[]).unwrap();
        fs::write(root.join("cpuacct.usage"), "5000\n").unwrap();
        assert_eq!(
            root_in(&tree, dir.path()),
            Some(CgroupCpu {
                total_ns: 5000,
                user_ns: None
            })
        );
        fs::write(root.join("cpuacct.usage_user"), "3000\n").unwrap();
        assert_eq!(
            root_in(&tree, dir.path()),
            Some(CgroupCpu {
                total_ns: 5000,
                user_ns: Some(3000)
            })
        );
    }

    #[test]
    fn v2_root_reads_cpu_stat_in_microseconds() {
        let dir = tempfile::tempdir().unwrap();
        let tree = FakeTree::new(CgroupVersion::V2);
        tree.populate_root(dir.path(), &["cpu"]).unwrap();
        fs::write(
            dir.path().join("cpu.stat"),
            "usage_usec 7\nuser_usec 4\nsystem_usec 3\nnr_periods 0\nnr_throttled 0\n",
        )
        .unwrap();
        assert_eq!(
            root_in(&tree, dir.path()),
            Some(CgroupCpu {
                total_ns: 7000,
                user_ns: Some(4000)
            })
        );
        assert_eq!(read_v1(&tree, dir.path()), None);
    }

    #[test]
    fn no_cgroup_no_cpu_time() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(root_in(&FakeTree::new(CgroupVersion::V2), dir.path()), None);
    }
}
