//! Changing a live cgroup's knobs in place ([`TenantCgroup::update_limits`]): the CPU quota,
//! weight and burst, the cpuset's CPUs, the memory limit with swap, the v2 memory protections and throttle, the
//! pids limit, the io throttles, weight and latency target.
//!
//! Every knob the change sets is checked first, as at creation (a v2 knob on a v1 host, a
//! knob this kernel lacks), so a refused change writes nothing. A lifted knob goes back to
//! the kernel's default; lifting a knob this cgroup version does not have is nothing to do.

use anyhow::{anyhow, bail, Context, Result};

use super::knobs::{CFQ_PER_WEIGHT, IO_WEIGHT_DEFAULT};
use super::{io_err, TenantCgroup};
use crate::blockdev::DevNum;
use crate::cgroup::{CgroupVersion, Controller};
use crate::limits::{CpuList, Limits};
use crate::live::{Knob, KnobSet, LimitChanges};

/// The default of v1 `cpu.shares` and v2 `cpu.weight`.
const SHARES_DEFAULT: u64 = 1024;
const WEIGHT_DEFAULT: u64 = 100;

/// The io throttle knobs, with their v1 file and v2 `io.max` key.
const THROTTLES: [(Knob, &str, &str); 4] = [
    (Knob::IoReadBps, "blkio.throttle.read_bps_device", "rbps"),
    (Knob::IoWriteBps, "blkio.throttle.write_bps_device", "wbps"),
    (Knob::IoReadIops, "blkio.throttle.read_iops_device", "riops"),
    (
        Knob::IoWriteIops,
        "blkio.throttle.write_iops_device",
        "wiops",
    ),
];

impl TenantCgroup {
    /// Makes `changes` on the live cgroup; `device` is the disk the io knobs apply to (the
    /// tenant's workdir's). Knobs the change does not name are left as they are. See the
    /// module header for what is checked before anything is written.
    pub fn update_limits(&self, changes: &LimitChanges, device: Option<DevNum>) -> Result<()> {
        changes.check().map_err(|e| anyhow!(e))?;
        let knobs = changes.knobs();
        let io_device = [
            Knob::IoReadBps,
            Knob::IoWriteBps,
            Knob::IoReadIops,
            Knob::IoWriteIops,
            Knob::IoLatency,
        ];
        // Lifting a disk's knob without a disk is nothing to do: none was ever set.
        let set = KnobSet::set_in(&changes.set);
        if device.is_none() && io_device.iter().any(|k| set.contains(*k)) {
            bail!(
                "io throttles and the io latency target apply to the block device of the \
                 tenant's workdir, and the tenant has none; give it a workdir on a disk"
            );
        }
        let now = self.read_limits(device)?;
        let target = changes.applied_to(&now);
        // What this change sets, checked as at creation (with the memory limit in force, which
        // v1's swap builds on).
        let mut asked = Limits::default();
        for k in set.iter() {
            k.copy(&target, &mut asked);
        }
        TenantCgroup::check(&self.fs, &asked)?;
        if changes.set.swap.is_some() {
            asked.memory = target.memory;
        }
        TenantCgroup::check_knobs(&self.fs, &asked)?;
        if set.contains(Knob::Cpuset) && now.cpuset_partition.is_some() {
            bail!(
                "the tenant's cpuset is a partition (cpuset_partition), whose CPUs are made \
                 with it; remove `cpuset_partition` to move its CPUs while it lives"
            );
        }

        let v1 = self.fs.version() == CgroupVersion::V1;
        let has = |k| knobs.contains(k);
        self.update_cpu(knobs, &target)?;
        if has(Knob::Cpuset) {
            self.update_cpuset(target.cpuset.as_ref())?;
        }
        if has(Knob::Memory) || has(Knob::Swap) {
            if v1 {
                self.update_memory_v1(&now, &target)?;
            } else {
                self.update_memory_v2(&target)?;
            }
        }
        for (k, file, lifted) in [
            (Knob::MemoryHigh, "memory.high", "max"),
            (Knob::MemoryLow, "memory.low", "0"),
            (Knob::MemoryMin, "memory.min", "0"),
        ] {
            if !has(k) {
                continue;
            }
            let mut one = Limits::default();
            k.copy(&target, &mut one);
            match [one.memory_high, one.memory_low, one.memory_min]
                .into_iter()
                .flatten()
                .next()
            {
                Some(v) => self.write_bytes(file, v)?,
                // v1 has none of them (refused above when set): lifted already.
                None if v1 => {}
                None => {
                    self.write_checked(Controller::Memory, file, lifted, |g| g.trim() == lifted)?
                }
            }
        }
        if has(Knob::Pids) {
            let v = target
                .pids
                .map_or_else(|| "max".to_string(), |p| p.to_string());
            self.write_checked(Controller::Pids, "pids.max", &v, |got| got.trim() == v)?;
        }
        if let Some(dev) = device {
            self.update_throttles(knobs, &target, dev)?;
        }
        if has(Knob::IoWeight) {
            self.update_io_weight(target.io_weight, device)?;
        }
        if let (true, Some(dev)) = (has(Knob::IoLatency), device) {
            match target.io_latency {
                Some(t) => {
                    let line = format!("{dev} target={t}");
                    self.write_checked(Controller::Io, "io.latency", &line, |got| {
                        got.lines().any(|g| g.trim() == line)
                    })?;
                }
                None if !v1 && self.exists(Controller::Io, "io.latency") => {
                    self.write(Controller::Io, "io.latency", &format!("{dev} target=max"))?;
                }
                None => {}
            }
        }
        Ok(())
    }

    /// The CPU time knobs of `knobs` (quota, weight, burst) set to `target`'s, or lifted.
    fn update_cpu(&self, knobs: KnobSet, target: &Limits) -> Result<()> {
        let v1 = self.fs.version() == CgroupVersion::V1;
        let has = |k| knobs.contains(k);
        if has(Knob::Cpus) {
            self.set_cpu_quota(target.cpus)?;
        }
        if has(Knob::CpuWeight) {
            let (file, v) = if v1 {
                let v = target.cpu_weight.map_or(SHARES_DEFAULT, |w| w.as_shares());
                ("cpu.shares", v)
            } else {
                let v = target.cpu_weight.map_or(WEIGHT_DEFAULT, |w| w.as_weight());
                ("cpu.weight", v)
            };
            let v = v.to_string();
            self.write_checked(Controller::Cpu, file, &v, |got| got.trim() == v)?;
        }
        if has(Knob::CpuBurst) {
            let file = if v1 {
                "cpu.cfs_burst_us"
            } else {
                "cpu.max.burst"
            };
            if target.cpu_burst.is_some() || self.exists(Controller::Cpu, file) {
                let v = target.cpu_burst.unwrap_or(0).to_string();
                self.write_checked(Controller::Cpu, file, &v, |got| got.trim() == v)?;
            }
        }
        Ok(())
    }

    /// The CPUs the tenant may run on, `cpuset.cpus`; lifted, the parent's: on v1 its list
    /// (a v1 cpuset admits no task without one), on v2 an empty list, which the kernel
    /// reads as the parent's CPUs. The kernel moves the tenant's tasks off CPUs taken away.
    fn update_cpuset(&self, cpus: Option<&CpuList>) -> Result<()> {
        if !self.fs.has(Controller::Cpuset) {
            // Lifted without the controller: the tenant runs on every CPU already.
            return Ok(());
        }
        let v = match cpus {
            Some(c) => c.to_string(),
            None if self.fs.version() == CgroupVersion::V1 => self
                .parent_value(Controller::Cpuset, "cpuset.cpus")
                .context("reading the parent's cpuset.cpus")?,
            None => String::new(),
        };
        let want = CpuList::parse(&v).map_err(|e| anyhow!("cpuset `{v}`: {e}"))?;
        self.write_checked(Controller::Cpuset, "cpuset.cpus", &v, |got| {
            CpuList::parse(got).is_ok_and(|g| g == want)
        })
    }

    /// v1: `memory.limit_in_bytes` and, where the kernel accounts swap,
    /// `memory.memsw.limit_in_bytes` = memory + swap, in the order that keeps memory+swap at
    /// or above memory at every step (the kernel refuses anything else).
    fn update_memory_v1(&self, now: &Limits, target: &Limits) -> Result<()> {
        let memsw = self.exists(Controller::Memory, "memory.memsw.limit_in_bytes");
        let lowering = match (target.memory, now.memory) {
            (Some(new), Some(old)) => new < old,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let mem = target
            .memory
            .map_or_else(|| "-1".to_string(), |m| m.to_string());
        if lowering {
            self.write_memory_limit_v1(&mem, target.memory)?;
        }
        if memsw {
            let sum = target.memory.map(|m| m + target.swap.unwrap_or(0));
            let v = sum.map_or_else(|| "-1".to_string(), |s| s.to_string());
            let rounded = sum.map(|s| super::knobs::page_rounded(s).to_string());
            self.write_checked(
                Controller::Memory,
                "memory.memsw.limit_in_bytes",
                &v,
                |got| match &rounded {
                    Some(r) => got.trim() == v || got.trim() == r,
                    None => {
                        got.trim() == "-1" || got.trim().parse::<u64>().is_ok_and(|n| n >= 1 << 62)
                    }
                },
            )?;
        }
        if !lowering {
            self.write_memory_limit_v1(&mem, target.memory)?;
        }
        Ok(())
    }

    /// v1 `memory.limit_in_bytes`: a limit below what the tenant uses makes the kernel reclaim
    /// first, and it refuses the limit (EBUSY) when it cannot get below it.
    fn write_memory_limit_v1(&self, value: &str, bytes: Option<u64>) -> Result<()> {
        let path = self.file(Controller::Memory, "memory.limit_in_bytes")?;
        match self.fs.tree().write(&path, value) {
            Ok(()) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                let used = self
                    .read(Controller::Memory, "memory.usage_in_bytes")
                    .map(|t| t.trim().to_string())
                    .unwrap_or_else(|| "unknown".into());
                Err(io_err(
                    e,
                    format!(
                        "writing `{value}` to {}: the tenant uses {used} bytes, more than the \
                         new limit of {}, and the kernel could not reclaim enough to get below \
                         it (its memory is in use, and without swap it cannot be paged out); \
                         the limit is unchanged; choose a limit above the tenant's use, or let \
                         it free memory first",
                        path.display(),
                        bytes.map_or_else(|| "none".to_string(), |b| b.to_string()),
                    ),
                ))
            }
            Err(e) => Err(io_err(
                e,
                format!("writing `{value}` to {}", path.display()),
            )),
        }
    }

    /// v2 `memory.max` and `memory.swap.max`: a memory limit without `swap` means no swap, as
    /// at creation; no memory limit and no `swap`, unlimited swap. A limit below what the
    /// tenant uses makes the kernel reclaim, and kill inside the tenant when it cannot.
    fn update_memory_v2(&self, target: &Limits) -> Result<()> {
        let mem = target
            .memory
            .map_or_else(|| "max".to_string(), |m| m.to_string());
        let rounded = target
            .memory
            .map(|m| super::knobs::page_rounded(m).to_string());
        self.write_checked(Controller::Memory, "memory.max", &mem, |got| {
            got.trim() == mem || rounded.as_deref() == Some(got.trim())
        })?;
        if self.exists(Controller::Memory, "memory.swap.max") {
            match (target.swap, target.memory) {
                (Some(s), _) => self.write_bytes("memory.swap.max", s)?,
                (None, Some(_)) => self.write_bytes("memory.swap.max", 0)?,
                (None, None) => {
                    self.write_checked(Controller::Memory, "memory.swap.max", "max", |got| {
                        got.trim() == "max"
                    })?
                }
            }
        }
        Ok(())
    }

    /// The io throttles this change names, on `dev` (0 on v1 and `max` on v2 lift one).
    fn update_throttles(&self, knobs: KnobSet, target: &Limits, dev: DevNum) -> Result<()> {
        let value = |k: Knob| {
            let mut one = Limits::default();
            k.copy(target, &mut one);
            [
                one.io_read_bps,
                one.io_write_bps,
                one.io_read_iops,
                one.io_write_iops,
            ]
            .into_iter()
            .flatten()
            .next()
        };
        match self.fs.version() {
            CgroupVersion::V1 => {
                for (k, file, _) in THROTTLES.iter().filter(|(k, _, _)| knobs.contains(*k)) {
                    let line = format!("{dev} {}", value(*k).unwrap_or(0));
                    self.write(Controller::Io, file, &line)?;
                }
            }
            CgroupVersion::V2 => {
                let mut line = dev.to_string();
                for (k, _, key) in THROTTLES.iter().filter(|(k, _, _)| knobs.contains(*k)) {
                    let v = value(*k).map_or_else(|| "max".to_string(), |v| v.to_string());
                    line.push_str(&format!(" {key}={v}"));
                }
                if line.contains('=') {
                    self.write(Controller::Io, "io.max", &line)?;
                }
            }
        }
        Ok(())
    }

    /// The io weight, or its default when lifted: v2 `io.weight` (with the disk's own line
    /// under io.cost) or `io.bfq.weight`; v1 `blkio.bfq.weight` or CFQ's `blkio.weight`.
    fn update_io_weight(&self, w: Option<u64>, dev: Option<DevNum>) -> Result<()> {
        let v1 = self.fs.version() == CgroupVersion::V1;
        let any = if v1 {
            ["blkio.bfq.weight", "blkio.weight"]
        } else {
            ["io.weight", "io.bfq.weight"]
        }
        .iter()
        .any(|f| self.exists(Controller::Io, f));
        if w.is_none() && !any {
            // No proportional io scheduler: the weight is at its default already.
            return Ok(());
        }
        let w = w.unwrap_or(IO_WEIGHT_DEFAULT);
        if v1 {
            let one = Limits {
                io_weight: Some(w),
                ..Limits::default()
            };
            debug_assert_eq!(CFQ_PER_WEIGHT * IO_WEIGHT_DEFAULT, 500);
            self.apply_knobs_v1(&one)
        } else {
            self.write_io_weight_v2(w, dev)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::Path;

    use super::*;
    use crate::cgroup::CgroupFs;

    const DEV: DevNum = DevNum { major: 8, minor: 0 };

    fn read(p: &Path) -> String {
        fs::read_to_string(p).unwrap().trim().to_string()
    }

    fn l(s: &str) -> Limits {
        s.parse().unwrap()
    }

    fn change(set: &str, lift: &[Knob]) -> LimitChanges {
        LimitChanges {
            set: l(set),
            lift: KnobSet::of(lift),
        }
    }

    #[test]
    fn v2_knobs_change_in_place_and_lift_to_the_kernel_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let fs = CgroupFs::fake_v2(dir.path()).unwrap();
        fs::write(dir.path().join("io.cost.qos"), "8:0 enable=1 ctrl=auto\n").unwrap();
        let planned = l("cpus=1,weight=100,memory=1G,pids=64,io_write_bps=100M");
        let cg = TenantCgroup::create(&fs, "t", &planned, Some(DEV)).unwrap();
        let t = dir.path().join("t");
        let c = change(
            "cpus=0.5,weight=50,cpu_burst=10ms,memory=512M,memory_low=256M,memory_high=384M,\
             memory_min=64M,pids=32,io_read_bps=10M,io_weight=300",
            &[Knob::IoWriteBps],
        );
        cg.update_limits(&c, Some(DEV)).unwrap();
        assert_eq!(read(&t.join("cpu.max")), "50000 100000");
        assert_eq!(read(&t.join("cpu.weight")), "50");
        assert_eq!(read(&t.join("cpu.max.burst")), "10000");
        assert_eq!(read(&t.join("memory.max")), (512u64 << 20).to_string());
        assert_eq!(
            read(&t.join("memory.swap.max")),
            "0",
            "memory alone: no swap"
        );
        assert_eq!(read(&t.join("memory.low")), (256u64 << 20).to_string());
        assert_eq!(read(&t.join("memory.high")), (384u64 << 20).to_string());
        assert_eq!(read(&t.join("memory.min")), (64u64 << 20).to_string());
        assert_eq!(read(&t.join("pids.max")), "32");
        assert_eq!(read(&t.join("io.max")), "8:0 rbps=10485760 wbps=max");
        // Under io.cost the disk gets its own weight line.
        assert_eq!(read(&t.join("io.weight")), "default 300\n8:0 300");
        let back = cg.read_limits(Some(DEV)).unwrap();
        assert_eq!(back, c.applied_to(&planned));

        // Putting the plan back lifts what it leaves unset.
        let restore = c.restoring(&planned);
        assert_eq!(
            restore.lift.keys(),
            "cpu_burst, memory_min, memory_low, memory_high, io_read_bps, io_weight"
        );
        cg.update_limits(&restore, Some(DEV)).unwrap();
        assert_eq!(read(&t.join("cpu.max.burst")), "0");
        assert_eq!(read(&t.join("memory.low")), "0");
        assert_eq!(read(&t.join("memory.high")), "max");
        assert_eq!(read(&t.join("memory.min")), "0");
        assert_eq!(read(&t.join("io.weight")), "default 100\n8:0 100");
        assert_eq!(cg.read_limits(Some(DEV)).unwrap(), planned);

        // Lifting the quota and the memory limit: unlimited, swap too.
        cg.update_limits(&change("", &[Knob::Cpus, Knob::Memory]), Some(DEV))
            .unwrap();
        assert_eq!(read(&t.join("cpu.max")), "max 100000");
        assert_eq!(read(&t.join("memory.max")), "max");
        assert_eq!(read(&t.join("memory.swap.max")), "max");
    }

    #[test]
    fn v1_knobs_change_in_place_keeping_memsw_above_memory() {
        let dir = tempfile::tempdir().unwrap();
        let fs = CgroupFs::fake_v1(dir.path()).unwrap();
        let planned = l("cpus=1,shares=1024,memory=1G,pids=64");
        let cg = TenantCgroup::create(&fs, "t", &planned, Some(DEV)).unwrap();
        let f = |c: &str, n: &str| read(&dir.path().join(c).join("t").join(n));
        let c = change(
            "cpus=0.25,shares=256,memory=256M,swap=64M,pids=16,io_read_bps=1M,\
             io_write_iops=500,io_weight=50",
            &[],
        );
        cg.update_limits(&c, Some(DEV)).unwrap();
        assert_eq!(f("cpu", "cpu.cfs_quota_us"), "25000");
        assert_eq!(f("cpu", "cpu.shares"), "256");
        assert_eq!(
            f("memory", "memory.limit_in_bytes"),
            (256u64 << 20).to_string()
        );
        assert_eq!(
            f("memory", "memory.memsw.limit_in_bytes"),
            (320u64 << 20).to_string()
        );
        assert_eq!(f("pids", "pids.max"), "16");
        assert_eq!(f("blkio", "blkio.throttle.read_bps_device"), "8:0 1048576");
        assert_eq!(f("blkio", "blkio.throttle.write_iops_device"), "8:0 500");
        assert_eq!(f("blkio", "blkio.bfq.weight"), "50");
        let mut back = cg.read_limits(Some(DEV)).unwrap();
        back.cpuset = None;
        back.mems = None;
        assert_eq!(back, c.applied_to(&planned));

        let restore = c.restoring(&planned);
        cg.update_limits(&restore, Some(DEV)).unwrap();
        assert_eq!(f("blkio", "blkio.throttle.read_bps_device"), "8:0 0");
        assert_eq!(f("blkio", "blkio.bfq.weight"), "100");
        assert_eq!(
            f("memory", "memory.memsw.limit_in_bytes"),
            (1u64 << 30).to_string()
        );
        let mut back = cg.read_limits(Some(DEV)).unwrap();
        back.cpuset = None;
        back.mems = None;
        assert_eq!(back, planned);

        cg.update_limits(&change("", &[Knob::Cpus, Knob::Memory, Knob::Pids]), None)
            .unwrap();
        assert_eq!(f("cpu", "cpu.cfs_quota_us"), "-1");
        assert_eq!(f("memory", "memory.limit_in_bytes"), "-1");
        assert_eq!(f("memory", "memory.memsw.limit_in_bytes"), "-1");
        assert_eq!(f("pids", "pids.max"), "max");
    }

    #[test]
    fn v1_refuses_the_v2_knobs_before_writing_and_lifting_them_is_nothing_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let fs = CgroupFs::fake_v1(dir.path()).unwrap();
        let cg = TenantCgroup::create(&fs, "t", &l("cpus=1"), None).unwrap();
        let e = cg
            .update_limits(&change("cpus=0.5,memory_low=64M", &[]), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("limit `memory_low` cannot be enforced by the `cgroup` platform")
                && e.contains("cgroup v1 has no reclaim protection"),
            "{e}"
        );
        let quota = dir.path().join("cpu/t/cpu.cfs_quota_us");
        assert_eq!(read(&quota), "100000", "nothing was written");
        cg.update_limits(
            &change("", &[Knob::MemoryLow, Knob::MemoryHigh, Knob::IoLatency]),
            None,
        )
        .unwrap();
        // io knobs need the workdir's disk.
        let e = cg
            .update_limits(&change("io_read_bps=1M", &[]), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("block device of the tenant's workdir"), "{e}");
    }

    #[test]
    fn v2_cpuset_changes_in_place_and_lifts_to_the_parents_cpus() {
        let dir = tempfile::tempdir().unwrap();
        let fs = CgroupFs::fake_v2(dir.path()).unwrap();
        let planned = l("cpuset=0,weight=100,memory=1G");
        let cg = TenantCgroup::create(&fs, "t", &planned, None).unwrap();
        let file = dir.path().join("t/cpuset.cpus");
        let c = change("cpuset=0-1", &[]);
        cg.update_limits(&c, None).unwrap();
        assert_eq!(read(&file), "0-1");
        assert_eq!(cg.read_limits(None).unwrap(), c.applied_to(&planned));
        cg.update_limits(&c.restoring(&planned), None).unwrap();
        assert_eq!(read(&file), "0");
        assert_eq!(cg.read_limits(None).unwrap(), planned);

        // Planned without a cpuset: the restore lifts it to the parent's (an empty list).
        let free = TenantCgroup::create(&fs, "u", &l("memory=1G"), None).unwrap();
        let c = change("cpuset=1", &[]);
        free.update_limits(&c, None).unwrap();
        assert_eq!(read(&dir.path().join("u/cpuset.cpus")), "1");
        free.update_limits(&c.restoring(&l("memory=1G")), None)
            .unwrap();
        assert_eq!(read(&dir.path().join("u/cpuset.cpus")), "");
        assert_eq!(free.read_limits(None).unwrap().cpuset, None);
    }

    #[test]
    fn v1_cpuset_changes_in_place_and_lifts_to_the_parents_list() {
        let dir = tempfile::tempdir().unwrap();
        let fs = CgroupFs::fake_v1(dir.path()).unwrap();
        let cg = TenantCgroup::create(&fs, "t", &l("cpus=1"), None).unwrap();
        let file = dir.path().join("cpuset/t/cpuset.cpus");
        let parent = read(&dir.path().join("cpuset/cpuset.cpus"));
        assert_eq!(read(&file), parent, "created with the parent's CPUs");
        let c = change("cpuset=1", &[]);
        cg.update_limits(&c, None).unwrap();
        assert_eq!(read(&file), "1");
        assert_eq!(cg.read_limits(None).unwrap().cpuset, l("cpuset=1").cpuset);
        let back = c.restoring(&l("cpus=1"));
        assert_eq!(back.lift.keys(), "cpuset");
        cg.update_limits(&back, None).unwrap();
        assert_eq!(read(&file), parent);
    }

    #[test]
    fn a_partitions_cpuset_is_refused_before_writing() {
        let dir = tempfile::tempdir().unwrap();
        let fs = CgroupFs::fake_v2(dir.path()).unwrap();
        let cg =
            TenantCgroup::create(&fs, "t", &l("cpuset=0,cpuset_partition=root"), None).unwrap();
        let e = cg
            .update_limits(&change("cpuset=1", &[]), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is a partition"), "{e}");
        assert_eq!(read(&dir.path().join("t/cpuset.cpus")), "0");
    }
}
