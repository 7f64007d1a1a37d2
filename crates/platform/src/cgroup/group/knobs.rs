//! The isolation knobs beyond the basic limits: memory protections (`memory.min`,
//! `memory.low`), the throttling threshold (`memory.high`), swap, CPU burst, cpuset
//! partitions, I/O weight and the I/O latency target.
//!
//! Each is checked before anything is created (a knob the kernel or the cgroup version lacks
//! is refused with the reason), written after the limits it builds on, and read back at once:
//! a kernel that holds something other than what was written fails the tenant's creation,
//! naming the file, the value written and the value held.

use std::path::Path;

use anyhow::{anyhow, Result};

use super::{io_err, TenantCgroup, V1_UNLIMITED};
use crate::blockdev::DevNum;
use crate::cgroup::{CgroupFs, CgroupVersion, Controller};
use crate::error::PlatformError;
use crate::limits::{CpusetPartition, Limits};

/// The default of v2 `io.weight` and of v1 `blkio.bfq.weight`.
pub(super) const IO_WEIGHT_DEFAULT: u64 = 100;

/// v1 CFQ's `blkio.weight` is 10..=1000 with default 500: five times the v2 scale.
pub(crate) const CFQ_PER_WEIGHT: u64 = 5;

fn refused(key: &'static str, why: impl Into<String>, fix: impl Into<String>) -> PlatformError {
    PlatformError::Refused {
        key,
        platform: "cgroup",
        why: why.into(),
        fix: fix.into(),
    }
}

/// What the kernel's page counters keep of a byte value: whole pages.
pub(super) fn page_rounded(v: u64) -> u64 {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = if page > 0 { page as u64 } else { 4096 };
    v / page * page
}

/// Whether a cgroup below the tenants' root would have the v2 file `file` of controller
/// `c`: `Some` when the tree says so, `None` when nothing tells before a cgroup exists.
///
/// Controller files appear in a cgroup whose parent enables the controller, and most knobs
/// are absent from the root cgroup (which has no `cgroup.type`) whatever the kernel. So the
/// tenants' root answers when it is not the root cgroup and has the controller; otherwise a
/// child of it that has the controller does.
fn v2_child_has(fs: &CgroupFs, c: Controller, file: &str) -> Option<bool> {
    let name = c.v2_name()?;
    let root = &fs.hierarchies().first()?.root;
    let tree = fs.tree();
    let has_controller = |dir: &Path| {
        tree.read(&dir.join("cgroup.controllers"))
            .map(|t| t.split_whitespace().any(|w| w == name))
            .unwrap_or(false)
    };
    if tree.exists(&root.join("cgroup.type")) && has_controller(root) {
        return Some(tree.exists(&root.join(file)));
    }
    tree.children(root)
        .unwrap_or_default()
        .into_iter()
        .map(|child| root.join(child))
        .find(|d| has_controller(d))
        .map(|d| tree.exists(&d.join(file)))
}

impl TenantCgroup {
    /// Refuses, before anything is created, the knobs this cgroup version or this kernel
    /// cannot hold, saying why and what to do instead.
    pub fn check_knobs(fs: &CgroupFs, l: &Limits) -> Result<(), PlatformError> {
        match fs.version() {
            CgroupVersion::V1 => check_v1(fs, l),
            CgroupVersion::V2 => check_v2(fs, l),
        }
    }

    /// Writes `value` to `name` and reads the file back; `held` says whether the kernel's
    /// text holds what was written.
    pub(super) fn write_checked(
        &self,
        c: Controller,
        name: &str,
        value: &str,
        held: impl Fn(&str) -> bool,
    ) -> Result<()> {
        self.write(c, name, value)?;
        let path = self.file(c, name)?;
        let got = self
            .fs
            .tree()
            .read(&path)
            .map_err(|e| io_err(e, format!("reading back {}", path.display())))?;
        if held(&got) {
            return Ok(());
        }
        Err(anyhow!(
            "{}: wrote `{value}`, but the kernel holds `{}`",
            path.display(),
            got.trim().replace('\n', "; ")
        ))
    }

    /// Writes a byte value (a page counter: the kernel keeps whole pages).
    pub(super) fn write_bytes(&self, name: &str, v: u64) -> Result<()> {
        let want = [v.to_string(), page_rounded(v).to_string()];
        self.write_checked(Controller::Memory, name, &v.to_string(), |got| {
            want.iter().any(|w| w == got.trim())
        })
    }

    /// v2: the knobs, after the limits they build on (`cpu.max`, `cpuset.cpus`,
    /// `memory.max`, `io.max`).
    pub(super) fn apply_knobs_v2(&self, l: &Limits, dev: Option<DevNum>) -> Result<()> {
        if let Some(b) = l.cpu_burst {
            let v = b.to_string();
            self.write_checked(Controller::Cpu, "cpu.max.burst", &v, |got| got.trim() == v)?;
        }
        if let Some(p) = l.cpuset_partition {
            self.write_partition(p)?;
        }
        if let Some(s) = l.swap {
            if !self.exists(Controller::Memory, "memory.swap.max") {
                return Err(refused(
                    "swap",
                    "the tenant's cgroup has no memory.swap.max: this kernel does not account \
                     swap per cgroup",
                    "remove `swap`, or boot a kernel with swap accounting \
                     (CONFIG_MEMCG_SWAP, and no swapaccount=0)",
                )
                .into());
            }
            self.write_bytes("memory.swap.max", s)?;
        }
        for (name, v) in [
            ("memory.high", l.memory_high),
            ("memory.low", l.memory_low),
            ("memory.min", l.memory_min),
        ] {
            if let Some(v) = v {
                self.write_bytes(name, v)?;
            }
        }
        if let Some(w) = l.io_weight {
            self.write_io_weight_v2(w, dev)?;
        }
        if let Some(t) = l.io_latency {
            let Some(dev) = dev else {
                return Err(anyhow!(
                    "io_latency needs the block device of the tenant's workdir, and none was found"
                ));
            };
            if !self.exists(Controller::Io, "io.latency") {
                return Err(refused("io_latency", NO_IO_LATENCY, IO_LATENCY_FIX).into());
            }
            let line = format!("{dev} target={t}");
            self.write_checked(Controller::Io, "io.latency", &line, |got| {
                got.lines().any(|g| g.trim() == line)
            })?;
        }
        Ok(())
    }

    /// Makes the cpuset a partition. The kernel takes the word and then reports whether the
    /// partition is valid (`root invalid (reason)` when the CPUs cannot form one); an older
    /// kernel refuses the write itself.
    fn write_partition(&self, p: CpusetPartition) -> Result<()> {
        let path = self.file(Controller::Cpuset, "cpuset.cpus.partition")?;
        if !self.fs.tree().exists(&path) {
            return Err(refused(
                "cpuset_partition",
                "the tenant's cgroup has no cpuset.cpus.partition (cpuset partitions came in \
                 Linux 5.11)",
                "remove `cpuset_partition`, or use a newer kernel",
            )
            .into());
        }
        let fix = "give the tenant CPUs no other tenant uses and leave at least one CPU to the \
                   parent, or remove `cpuset_partition`";
        if let Err(e) = self.fs.tree().write(&path, p.as_str()) {
            return Err(io_err(
                e,
                format!(
                    "writing `{p}` to {}: the kernel refused the partition; {fix}",
                    path.display()
                ),
            ));
        }
        let got = self
            .fs
            .tree()
            .read(&path)
            .map_err(|e| io_err(e, format!("reading back {}", path.display())))?;
        let got = got.trim();
        if got == p.as_str() {
            return Ok(());
        }
        let reason = match got.split_once('(') {
            Some((_, r)) => format!(": {}", r.trim_end_matches(')')),
            None => String::new(),
        };
        Err(anyhow!(
            "{}: wrote `{p}`, but the kernel holds `{got}` (the partition is invalid{reason}); \
             {fix}",
            path.display()
        ))
    }

    /// v2 `io.weight` (`default N`, and `MAJ:MIN N` for the workdir's device when io.cost
    /// controls it), or `io.bfq.weight` where only BFQ offers a weight.
    pub(super) fn write_io_weight_v2(&self, w: u64, dev: Option<DevNum>) -> Result<()> {
        let (file, max) = if self.exists(Controller::Io, "io.weight") {
            ("io.weight", 10_000)
        } else if self.exists(Controller::Io, "io.bfq.weight") {
            ("io.bfq.weight", 1000)
        } else {
            return Err(refused(
                "io_weight",
                "the tenant's cgroup has neither io.weight (the io.cost controller, \
                 CONFIG_BLK_CGROUP_IOCOST) nor io.bfq.weight (the bfq scheduler)",
                "remove `io_weight`, or select bfq for the disk \
                 (`echo bfq > /sys/block/DEV/queue/scheduler`)",
            )
            .into());
        };
        if w > max {
            return Err(refused(
                "io_weight",
                format!("only {file} is available, and it takes 1..{max}"),
                format!("use io_weight={max} or less"),
            )
            .into());
        }
        let line = format!("default {w}");
        self.write_checked(Controller::Io, file, &line, |got| {
            got.lines().any(|g| g.trim() == line)
        })?;
        if let (Some(dev), "io.weight") = (dev, file) {
            if io_cost_enabled(&self.fs, dev) {
                let line = format!("{dev} {w}");
                self.write_checked(Controller::Io, file, &line, |got| {
                    got.lines().any(|g| g.trim() == line)
                })?;
            } else if self.exists(Controller::Io, "io.bfq.weight") {
                // Without io.cost on the disk, io.weight weighs nothing there; when bfq is
                // its scheduler, bfq's own weight does (1..1000).
                if w <= 1000 {
                    self.write_checked(Controller::Io, "io.bfq.weight", &line, |got| {
                        got.lines().any(|g| g.trim() == line)
                    })?;
                } else {
                    tracing::warn!(
                        "io_weight={w}: io.cost is off for the disk {dev} and bfq's \
                         io.bfq.weight takes 1..1000, so it stays at its default; use \
                         io_weight=1000 or less, or --io-cost on"
                    );
                }
            }
        }
        Ok(())
    }

    /// v1: the knobs v1 has an equivalent of (CFS burst, the BFQ or CFQ weight); swap is
    /// part of `memory.memsw.limit_in_bytes`, written with the memory limit.
    pub(super) fn apply_knobs_v1(&self, l: &Limits) -> Result<()> {
        if let Some(b) = l.cpu_burst {
            let v = b.to_string();
            self.write_checked(Controller::Cpu, "cpu.cfs_burst_us", &v, |got| {
                got.trim() == v
            })?;
        }
        if let Some(w) = l.io_weight {
            if self.exists(Controller::Io, "blkio.bfq.weight") {
                if w > 1000 {
                    return Err(refused(
                        "io_weight",
                        "cgroup v1's blkio.bfq.weight takes 1..1000",
                        "use io_weight=1000 or less",
                    )
                    .into());
                }
                let v = w.to_string();
                self.write_checked(Controller::Io, "blkio.bfq.weight", &v, |got| {
                    got.trim() == v
                })?;
            } else if self.exists(Controller::Io, "blkio.weight") {
                let v = w * CFQ_PER_WEIGHT;
                if !(10..=1000).contains(&v) {
                    return Err(refused(
                        "io_weight",
                        format!(
                            "cgroup v1's blkio.weight (CFQ) takes 10..1000, {CFQ_PER_WEIGHT} \
                             times the v2 scale, so io_weight 2..200"
                        ),
                        "use io_weight between 2 and 200",
                    )
                    .into());
                }
                let v = v.to_string();
                self.write_checked(Controller::Io, "blkio.weight", &v, |got| got.trim() == v)?;
            } else {
                return Err(refused(
                    "io_weight",
                    "the tenant's blkio cgroup has neither blkio.bfq.weight nor blkio.weight \
                     (no proportional I/O scheduler is built in)",
                    "remove `io_weight`, or use a kernel with BFQ (CONFIG_BFQ_GROUP_IOSCHED)",
                )
                .into());
            }
        }
        Ok(())
    }

    /// v2: the knobs as the kernel holds them, into `l`. A knob at the kernel's default
    /// (`memory.low` 0, `memory.high` max, `io.weight` 100, a `member` cpuset) reads back as
    /// unset.
    pub(super) fn read_knobs_v2(&self, l: &mut Limits, device: Option<DevNum>) -> Result<()> {
        let bytes = |name: &str| -> Result<Option<u64>> {
            match self.read(Controller::Memory, name) {
                None => Ok(None),
                Some(t) => match t.trim() {
                    "max" | "0" => Ok(None),
                    v => Ok(Some(v.parse::<u64>().map_err(|_| {
                        anyhow!("{name} holds `{v}`, which is not a number of bytes")
                    })?)),
                },
            }
        };
        l.memory_min = bytes("memory.min")?;
        l.memory_low = bytes("memory.low")?;
        l.memory_high = bytes("memory.high")?;
        l.swap = match self.read(Controller::Memory, "memory.swap.max") {
            // `memory=` alone means no swap.
            Some(t) if t.trim() == "0" && l.memory.is_some() => None,
            Some(t) if t.trim() == "0" => Some(0),
            _ => bytes("memory.swap.max")?,
        };
        l.cpu_burst = self
            .read(Controller::Cpu, "cpu.max.burst")
            .and_then(|t| t.trim().parse::<u64>().ok())
            .filter(|b| *b > 0);
        l.cpuset_partition = match self.read(Controller::Cpuset, "cpuset.cpus.partition") {
            Some(t) if t.trim() == "root" => Some(CpusetPartition::Root),
            Some(t) if t.trim() == "isolated" => Some(CpusetPartition::Isolated),
            _ => None,
        };
        let dev = device.map(|d| d.to_string());
        let weight = |file: &str| -> Option<u64> {
            let t = self.read(Controller::Io, file)?;
            let value = |key: &str| {
                t.lines().find_map(|line| {
                    let mut it = line.split_whitespace();
                    (it.next()? == key).then(|| it.next()?.parse::<u64>().ok())?
                })
            };
            dev.as_deref()
                .and_then(value)
                .or_else(|| value("default"))
                .filter(|w| *w != IO_WEIGHT_DEFAULT)
        };
        l.io_weight = weight("io.weight").or_else(|| weight("io.bfq.weight"));
        l.io_latency = match (&dev, self.read(Controller::Io, "io.latency")) {
            (Some(dev), Some(t)) => t.lines().find_map(|line| {
                let mut it = line.split_whitespace();
                if it.next()? != dev {
                    return None;
                }
                it.find_map(|kv| kv.strip_prefix("target=")?.parse::<u64>().ok())
            }),
            _ => None,
        };
        Ok(())
    }

    /// v1: the knobs v1 maps, into `l` (swap from `memory.memsw.limit_in_bytes` less the
    /// memory limit).
    pub(super) fn read_knobs_v1(&self, l: &mut Limits) -> Result<()> {
        let num = |c, f| self.read(c, f).and_then(|t| t.trim().parse::<u64>().ok());
        if let (Some(m), Some(sw)) = (
            l.memory,
            num(Controller::Memory, "memory.memsw.limit_in_bytes"),
        ) {
            l.swap = (sw < V1_UNLIMITED && sw > m).then(|| sw - m);
        }
        l.cpu_burst = num(Controller::Cpu, "cpu.cfs_burst_us").filter(|b| *b > 0);
        l.io_weight = match num(Controller::Io, "blkio.bfq.weight") {
            Some(w) => Some(w),
            None => num(Controller::Io, "blkio.weight").map(|w| w / CFQ_PER_WEIGHT),
        }
        .filter(|w| *w != IO_WEIGHT_DEFAULT);
        Ok(())
    }
}

const NO_IO_LATENCY: &str = "this kernel has no io.latency: it is built without \
                             CONFIG_BLK_CGROUP_IOLATENCY (Debian's kernels are)";
const IO_LATENCY_FIX: &str = "remove `io_latency`, or protect the tenant with `io_weight` \
                              under io.cost (`--io-cost on`) or bound its neighbours with \
                              `io_read_bps`/`io_write_bps`; a kernel built with \
                              CONFIG_BLK_CGROUP_IOLATENCY=y has it";

/// Whether the root's `io.cost.qos` has io.cost enabled for `dev`.
fn io_cost_enabled(fs: &CgroupFs, dev: DevNum) -> bool {
    let Some(root) = crate::cgroup::v2_mount_root(fs) else {
        return false;
    };
    let want = dev.to_string();
    fs.tree()
        .read(&root.join("io.cost.qos"))
        .unwrap_or_default()
        .lines()
        .any(|l| {
            let mut it = l.split_whitespace();
            it.next() == Some(want.as_str()) && it.any(|kv| kv == "enable=1")
        })
}

/// The knobs cgroup v1 has no file for: the key, why, and what to do instead.
pub(crate) const V1_ABSENT: &[(&str, &str, &str)] = &[
    (
        "memory_min",
        "cgroup v1 has no reclaim protection (memory.min is a cgroup v2 file); v1's \
         memory.soft_limit_in_bytes is not the same: it is where global reclaim pushes a \
         cgroup down to first, not memory kept from reclaim",
        "remove `memory_min`, or run on a cgroup v2 host",
    ),
    (
        "memory_low",
        "cgroup v1 has no reclaim protection (memory.low is a cgroup v2 file); v1's \
         memory.soft_limit_in_bytes is not the same: it is where global reclaim pushes a \
         cgroup down to first, not memory kept from reclaim",
        "remove `memory_low`, or run on a cgroup v2 host (the `oci` platform maps it to \
         docker's --memory-reservation, which is the soft limit on v1)",
    ),
    (
        "memory_high",
        "cgroup v1 has no throttling threshold below the limit (memory.high is a cgroup v2 \
         file; v1's memory.soft_limit_in_bytes steers global reclaim and never throttles)",
        "use `memory` for a hard limit, or run on a cgroup v2 host",
    ),
    (
        "cpuset_partition",
        "cpuset partitions (cpuset.cpus.partition) exist only in cgroup v2; v1's \
         cpuset.cpu_exclusive keeps siblings off the CPUs but leaves them in the parent's \
         scheduling domain",
        "remove `cpuset_partition`, or run on a cgroup v2 host",
    ),
    (
        "io_latency",
        "io.latency is a cgroup v2 controller; v1's blkio has no latency target",
        "remove `io_latency`, or run on a cgroup v2 host",
    ),
];

/// Why cgroup v1 bounds swap only beside a memory limit.
pub(crate) const V1_SWAP_NEEDS_MEMORY: &str = "cgroup v1 bounds swap only together with memory \
     (memory.memsw.limit_in_bytes = memory + swap), which needs a memory limit";

fn check_v1(fs: &CgroupFs, l: &Limits) -> Result<(), PlatformError> {
    let set = l.keys_set();
    if let Some(&(key, why, fix)) = V1_ABSENT.iter().find(|(k, _, _)| set.contains(k)) {
        return Err(refused(key, why, fix));
    }
    if let Some(s) = l.swap {
        if l.memory.is_none() {
            return Err(refused(
                "swap",
                V1_SWAP_NEEDS_MEMORY,
                "add `memory`, or remove `swap`",
            ));
        }
        let has_memsw = fs.hierarchy_of(Controller::Memory).is_some_and(|h| {
            fs.tree()
                .exists(&h.root.join("memory.memsw.limit_in_bytes"))
        });
        if s > 0 && !has_memsw {
            return Err(refused(
                "swap",
                "this kernel does not account swap per cgroup (there is no \
                 memory.memsw.limit_in_bytes)",
                "boot with swapaccount=1, or remove `swap`",
            ));
        }
    }
    if l.cpu_burst.is_some() {
        let has = fs
            .hierarchy_of(Controller::Cpu)
            .is_some_and(|h| fs.tree().exists(&h.root.join("cpu.cfs_burst_us")));
        if !has {
            return Err(refused(
                "cpu_burst",
                "this kernel has no cpu.cfs_burst_us (CFS burst came in Linux 5.14)",
                "remove `cpu_burst`, or use a newer kernel",
            ));
        }
    }
    Ok(())
}

fn check_v2(fs: &CgroupFs, l: &Limits) -> Result<(), PlatformError> {
    let absent = |c, file| v2_child_has(fs, c, file) == Some(false);
    if l.io_latency.is_some() && absent(Controller::Io, "io.latency") {
        return Err(refused("io_latency", NO_IO_LATENCY, IO_LATENCY_FIX));
    }
    if l.cpu_burst.is_some() && absent(Controller::Cpu, "cpu.max.burst") {
        return Err(refused(
            "cpu_burst",
            "this kernel has no cpu.max.burst (CFS burst came in Linux 5.14)",
            "remove `cpu_burst`, or use a newer kernel",
        ));
    }
    if l.cpuset_partition.is_some() && absent(Controller::Cpuset, "cpuset.cpus.partition") {
        return Err(refused(
            "cpuset_partition",
            "this kernel has no cpuset.cpus.partition (cpuset partitions came in Linux 5.11)",
            "remove `cpuset_partition`, or use a newer kernel",
        ));
    }
    if l.swap.is_some() && absent(Controller::Memory, "memory.swap.max") {
        return Err(refused(
            "swap",
            "this kernel does not account swap per cgroup (there is no memory.swap.max)",
            "boot a kernel with swap accounting (no swapaccount=0), or remove `swap`",
        ));
    }
    if l.io_weight.is_some()
        && absent(Controller::Io, "io.weight")
        && absent(Controller::Io, "io.bfq.weight")
    {
        return Err(refused(
            "io_weight",
            "this kernel offers no I/O weight: neither io.weight (the io.cost controller, \
             CONFIG_BLK_CGROUP_IOCOST) nor io.bfq.weight (the bfq scheduler)",
            "remove `io_weight`, or select bfq for the disk \
             (`echo bfq > /sys/block/DEV/queue/scheduler`)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::io;
    use std::os::fd::OwnedFd;
    use std::sync::Arc;

    use super::*;
    use crate::cgroup::{CgroupTree, FakeTree};

    const DEV: DevNum = DevNum { major: 8, minor: 0 };

    fn read(p: &Path) -> String {
        fs::read_to_string(p).unwrap().trim().to_string()
    }

    fn limits(s: &str) -> Limits {
        s.parse().unwrap()
    }

    #[test]
    fn pages_round_down() {
        assert_eq!(page_rounded(8192 + 100) % 4096, 0);
        assert!(page_rounded(8192 + 100) <= 8192 + 100);
    }

    #[test]
    fn every_v2_knob_is_written_after_its_base_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let fs = CgroupFs::fake_v2(dir.path()).unwrap();
        let asked = limits(
            "cpus=1,cpu_burst=20ms,weight=100,cpuset=1,cpuset_partition=isolated,mems=0,\
             memory=1G,memory_min=64M,memory_low=128M,memory_high=512M,swap=256M,\
             io_weight=300",
        );
        let cg = TenantCgroup::create(&fs, "t", &asked, Some(DEV)).unwrap();
        let t = dir.path().join("t");
        assert_eq!(read(&t.join("cpu.max")), "100000 100000");
        assert_eq!(read(&t.join("cpu.max.burst")), "20000");
        assert_eq!(read(&t.join("cpuset.cpus.partition")), "isolated");
        assert_eq!(read(&t.join("memory.min")), (64u64 << 20).to_string());
        assert_eq!(read(&t.join("memory.low")), (128u64 << 20).to_string());
        assert_eq!(read(&t.join("memory.high")), (512u64 << 20).to_string());
        assert_eq!(read(&t.join("memory.swap.max")), (256u64 << 20).to_string());
        // Without io.cost on the device, only the default line.
        assert_eq!(read(&t.join("io.weight")), "default 300");
        assert_eq!(cg.read_limits(Some(DEV)).unwrap(), asked);
    }

    #[test]
    fn memory_alone_still_turns_swap_off_and_reads_back_as_memory() {
        let dir = tempfile::tempdir().unwrap();
        let fs = CgroupFs::fake_v2(dir.path()).unwrap();
        let asked = limits("memory=256M,weight=100");
        let cg = TenantCgroup::create(&fs, "t", &asked, None).unwrap();
        assert_eq!(read(&dir.path().join("t/memory.swap.max")), "0");
        assert_eq!(cg.read_limits(None).unwrap(), asked);
        let swap_only = limits("swap=0,weight=100");
        let cg = TenantCgroup::create(&fs, "u", &swap_only, None).unwrap();
        assert_eq!(cg.read_limits(None).unwrap(), swap_only);
    }

    #[test]
    fn the_workdir_device_gets_its_own_weight_line_under_io_cost() {
        let dir = tempfile::tempdir().unwrap();
        let fs = CgroupFs::fake_v2(dir.path()).unwrap();
        fs::write(dir.path().join("io.cost.qos"), "8:0 enable=1 ctrl=auto\n").unwrap();
        let cg = TenantCgroup::create(&fs, "t", &limits("io_weight=40"), Some(DEV)).unwrap();
        assert_eq!(read(&dir.path().join("t/io.weight")), "default 40\n8:0 40");
        assert_eq!(cg.read_limits(Some(DEV)).unwrap().io_weight, Some(40));
    }

    #[test]
    fn io_latency_is_refused_before_anything_exists_where_the_kernel_lacks_it() {
        let dir = tempfile::tempdir().unwrap();
        let fs = CgroupFs::fake_v2(dir.path()).unwrap();
        let e = TenantCgroup::create(&fs, "t", &limits("io_latency=5ms"), Some(DEV))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("limit `io_latency` cannot be enforced by the `cgroup` platform")
                && e.contains("CONFIG_BLK_CGROUP_IOLATENCY")
                && e.contains("remove `io_latency`"),
            "{e}"
        );
        assert!(!dir.path().join("t").exists(), "nothing is created");
    }

    #[test]
    fn io_latency_is_written_and_read_back_where_the_kernel_has_it() {
        let dir = tempfile::tempdir().unwrap();
        let fs = CgroupFs::fake_v2(dir.path()).unwrap();
        fs::write(dir.path().join("io.latency"), "").unwrap();
        let asked = limits("io_latency=2500us,weight=100");
        let cg = TenantCgroup::create(&fs, "t", &asked, Some(DEV)).unwrap();
        assert_eq!(read(&dir.path().join("t/io.latency")), "8:0 target=2500");
        assert_eq!(cg.read_limits(Some(DEV)).unwrap(), asked);
        // The target is per device: without the workdir's, nothing to write it to.
        let e = TenantCgroup::create(&fs, "u", &asked, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("block device"), "{e}");
    }

    /// A fake v2 tree whose kernel shows `shows` in `file` whatever was written.
    #[derive(Debug)]
    struct Kernel {
        inner: FakeTree,
        file: &'static str,
        shows: &'static str,
    }

    impl CgroupTree for Kernel {
        fn mkdir(&self, dir: &Path) -> io::Result<()> {
            self.inner.mkdir(dir)
        }
        fn rmdir(&self, dir: &Path) -> io::Result<()> {
            self.inner.rmdir(dir)
        }
        fn write(&self, file: &Path, value: &str) -> io::Result<()> {
            self.inner.write(file, value)
        }
        fn read(&self, file: &Path) -> io::Result<String> {
            // The tenant's file, not the root's.
            if file.ends_with(Path::new("t").join(self.file)) {
                return Ok(format!("{}\n", self.shows));
            }
            self.inner.read(file)
        }
        fn open_procs(&self, dir: &Path) -> io::Result<OwnedFd> {
            self.inner.open_procs(dir)
        }
        fn is_real(&self) -> bool {
            false
        }
    }

    fn kernel(dir: &Path, file: &'static str, shows: &'static str) -> CgroupFs {
        let inner = FakeTree::new(CgroupVersion::V2);
        inner
            .populate_root(dir, &["cpuset", "cpu", "io", "memory", "pids"])
            .unwrap();
        CgroupFs::v2(dir, Arc::new(Kernel { inner, file, shows })).unwrap()
    }

    #[test]
    fn an_invalid_partition_fails_with_the_kernels_reason_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let fs = kernel(
            dir.path(),
            "cpuset.cpus.partition",
            "root invalid (Cpu list in cpuset.cpus not exclusive)",
        );
        let e = TenantCgroup::create(&fs, "t", &limits("cpuset=1,cpuset_partition=root"), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cpuset.cpus.partition: wrote `root`, but the kernel holds `root invalid")
                && e.contains("the partition is invalid: Cpu list in cpuset.cpus not exclusive")
                && e.contains("CPUs no other tenant uses"),
            "{e}"
        );
        assert!(!dir.path().join("t").exists());
    }

    #[test]
    fn a_value_the_kernel_does_not_hold_names_the_file_and_both_values() {
        let dir = tempfile::tempdir().unwrap();
        let fs = kernel(dir.path(), "memory.low", "0");
        let e = TenantCgroup::create(&fs, "t", &limits("memory_low=64M"), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("t/memory.low: wrote `67108864`, but the kernel holds `0`"),
            "{e}"
        );
    }

    #[test]
    fn v1_maps_swap_burst_and_weight_and_reads_them_back() {
        let dir = tempfile::tempdir().unwrap();
        let fs = CgroupFs::fake_v1(dir.path()).unwrap();
        let asked =
            limits("cpus=0.5,cpu_burst=10ms,shares=1024,memory=256M,swap=64M,io_weight=250");
        let cg = TenantCgroup::create(&fs, "t", &asked, None).unwrap();
        let f = |c: &str, n: &str| read(&dir.path().join(c).join("t").join(n));
        assert_eq!(
            f("memory", "memory.memsw.limit_in_bytes"),
            (320u64 << 20).to_string()
        );
        assert_eq!(f("cpu", "cpu.cfs_burst_us"), "10000");
        assert_eq!(f("blkio", "blkio.bfq.weight"), "250");
        let mut back = cg.read_limits(None).unwrap();
        // v1 reads the cpuset back always.
        back.cpuset = None;
        back.mems = None;
        assert_eq!(back, asked);
        // A bfq weight has 1..1000.
        let e = TenantCgroup::create(&fs, "u", &limits("io_weight=2000"), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("blkio.bfq.weight takes 1..1000"), "{e}");
    }

    #[test]
    fn v1_refuses_what_it_has_no_equivalent_of_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let fs = CgroupFs::fake_v1(dir.path()).unwrap();
        for (s, key, why) in [
            (
                "memory_min=64M",
                "memory_min",
                "soft_limit_in_bytes is not the same",
            ),
            ("memory_low=64M", "memory_low", "--memory-reservation"),
            ("memory_high=64M", "memory_high", "never throttles"),
            (
                "cpuset=1,cpuset_partition=root",
                "cpuset_partition",
                "only in cgroup v2",
            ),
            ("io_latency=1ms", "io_latency", "no latency target"),
            ("swap=64M", "swap", "needs a memory limit"),
        ] {
            let e = TenantCgroup::create(&fs, "t", &limits(s), Some(DEV))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("limit `{key}` cannot be enforced by the `cgroup`"))
                    && e.contains(why),
                "{s}: {e}"
            );
            assert!(
                !dir.path().join("memory/t").exists(),
                "{s}: nothing is created"
            );
        }
        // A kernel without swap accounting.
        fs::remove_file(dir.path().join("memory/memory.memsw.limit_in_bytes")).unwrap();
        let e = TenantCgroup::check_knobs(&fs, &limits("memory=1G,swap=1G"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("swapaccount=1"), "{e}");
    }
}
