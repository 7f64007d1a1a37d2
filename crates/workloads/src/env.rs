//! What a workload may use here: the CPUs it is allowed on, the memory its cgroup lets it
//! have, the cache hierarchy; plus the host facts recorded with every result.
//!
//! Sizes are taken from the process's own limits (its affinity mask and its cgroup memory
//! limit), never only from host-wide figures, so a workload inside a tenant sizes itself to
//! the tenant.

use std::fs;
use std::path::{Path, PathBuf};

use procfs::process::Process;
use procfs::{CpuInfo, Current, Meminfo};
use serde::{Deserialize, Serialize};

/// Why a workload cannot run here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{reason}")]
pub struct Unsupported {
    /// Human-readable reason, with the fix where there is one.
    pub reason: String,
}

impl Unsupported {
    /// An `Unsupported` with this reason.
    pub fn new(reason: impl Into<String>) -> Self {
        Unsupported {
            reason: reason.into(),
        }
    }
}

/// One CPU cache, as sysfs describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheInfo {
    /// 1, 2, 3...
    pub level: u32,
    /// `Data`, `Instruction` or `Unified`.
    pub kind: String,
    /// Size in bytes as reported by sysfs (may lie on virtual machines).
    pub size: u64,
    /// Coherency line size in bytes.
    pub line: u64,
    /// CPUs sharing this cache (sysfs `shared_cpu_list`).
    pub shared_cpus: String,
}

/// The resources visible to this process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Env {
    /// CPUs in this process's affinity mask.
    pub cpus: Vec<usize>,
    /// Online CPUs of the host.
    pub host_cpus: usize,
    /// Bytes this process may use: the smaller of its cgroup memory limit and the host's
    /// available memory.
    pub mem_usable: u64,
    /// The cgroup memory limit, when one is set.
    pub mem_limit: Option<u64>,
    /// Data and unified caches, L1 first.
    pub caches: Vec<CacheInfo>,
    /// Page size in bytes.
    pub page_size: u64,
    /// Effective uid is 0.
    pub is_root: bool,
    /// Directory for files (disk workloads).
    pub workdir: PathBuf,
}

impl Env {
    /// Reads the environment of the calling process.
    pub fn detect() -> Self {
        let cpus = affinity_cpus();
        let host_cpus = online_cpus();
        let avail = Meminfo::current()
            .ok()
            .and_then(|m| m.mem_available)
            .unwrap_or(1 << 30);
        let mem_limit = cgroup_memory_limit();
        let mem_usable = mem_limit.map_or(avail, |l| l.min(avail));
        Env {
            cpus,
            host_cpus,
            mem_usable,
            mem_limit,
            caches: read_caches(Path::new("/sys/devices/system/cpu/cpu0/cache")),
            page_size: unsafe { libc::sysconf(libc::_SC_PAGESIZE) as u64 },
            is_root: unsafe { libc::geteuid() } == 0,
            workdir: std::env::current_dir().unwrap_or_else(|_| std::env::temp_dir()),
        }
    }

    /// Size of the data (or unified) cache at `level`, as sysfs reports it.
    pub fn cache_size(&self, level: u32) -> Option<u64> {
        self.caches
            .iter()
            .find(|c| c.level == level && c.kind != "Instruction")
            .map(|c| c.size)
    }

    /// The last-level cache size as sysfs reports it.
    pub fn llc_size(&self) -> Option<u64> {
        self.caches
            .iter()
            .rev()
            .find(|c| c.kind != "Instruction")
            .map(|c| c.size)
    }

    /// Cache line size (64 when unknown).
    pub fn line_size(&self) -> u64 {
        self.caches.first().map_or(64, |c| c.line.max(16))
    }
}

/// Facts about the host recorded with every result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostFacts {
    /// Host name.
    pub hostname: String,
    /// CPU model string.
    pub cpu_model: String,
    /// Online CPUs.
    pub cores: usize,
    /// Caches of CPU 0.
    pub caches: Vec<CacheInfo>,
    /// Total memory in bytes.
    pub mem_total: u64,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// `1`, `2`, `hybrid` or `none`.
    pub cgroup_version: String,
    /// Hypervisor vendor when the host is a virtual machine (from `/proc/cpuinfo` flags).
    pub virtualized: bool,
    /// Whether the TSC is invariant (`constant_tsc` and `nonstop_tsc`).
    pub invariant_tsc: bool,
    /// Active cpuidle governor, when cpuidle is present.
    pub cpuidle_governor: Option<String>,
    /// Active cpuidle driver (`none` when the kernel has none: an idle CPU just halts),
    /// when cpuidle is present.
    #[serde(default)]
    pub cpuidle_driver: Option<String>,
    /// CPU frequency governor of CPU 0, when cpufreq is present.
    pub cpufreq_governor: Option<String>,
}

impl HostFacts {
    /// Reads the facts of this host.
    pub fn detect() -> Self {
        let cpuinfo = CpuInfo::current().ok();
        let flags = cpuinfo
            .as_ref()
            .and_then(|c| c.flags(0))
            .unwrap_or_default();
        let has = |f: &str| flags.contains(&f);
        HostFacts {
            // procfs reads the kernel's release only as a number and has no hostname.
            hostname: read_trim("/proc/sys/kernel/hostname").unwrap_or_default(),
            cpu_model: cpuinfo
                .as_ref()
                .and_then(|c| c.model_name(0))
                .map_or_else(|| "unknown".into(), |m| m.trim().to_string()),
            cores: online_cpus(),
            caches: read_caches(Path::new("/sys/devices/system/cpu/cpu0/cache")),
            mem_total: Meminfo::current().map_or(0, |m| m.mem_total),
            kernel: read_trim("/proc/sys/kernel/osrelease").unwrap_or_default(),
            cgroup_version: cgroup_version(Path::new("/sys/fs/cgroup")).into(),
            virtualized: has("hypervisor"),
            invariant_tsc: has("constant_tsc") && has("nonstop_tsc"),
            cpuidle_governor: read_trim("/sys/devices/system/cpu/cpuidle/current_governor")
                .or_else(|| read_trim("/sys/devices/system/cpu/cpuidle/current_governor_ro")),
            cpuidle_driver: read_trim("/sys/devices/system/cpu/cpuidle/current_driver"),
            cpufreq_governor: read_trim("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        }
    }
}

fn read_trim(p: impl AsRef<Path>) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// Which cgroup version is mounted at `root`: `2` (unified with controllers), `1`, `hybrid`
/// (v1 controllers plus an empty v2 tree) or `none`.
pub fn cgroup_version(root: &Path) -> &'static str {
    let v2_controllers = read_trim(root.join("cgroup.controllers"))
        .map(|s| !s.is_empty())
        .unwrap_or(false);
    if v2_controllers {
        return "2";
    }
    let v1 = ["cpu", "memory", "pids"]
        .iter()
        .any(|c| root.join(c).join("tasks").exists())
        || root.join("cpu,cpuacct").exists();
    match (v1, root.join("unified").join("cgroup.controllers").exists()) {
        (true, true) => "hybrid",
        (true, false) => "1",
        (false, _) if root.join("cgroup.procs").exists() => "2",
        _ => "none",
    }
}

/// Reads the cache hierarchy from a sysfs `cpuN/cache` directory.
pub fn read_caches(dir: &Path) -> Vec<CacheInfo> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if !p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("index"))
        {
            continue;
        }
        let level = read_trim(p.join("level")).and_then(|s| s.parse().ok());
        let size = read_trim(p.join("size")).and_then(|s| isobench_common::parse_size(&s).ok());
        let (Some(level), Some(size)) = (level, size) else {
            continue;
        };
        out.push(CacheInfo {
            level,
            kind: read_trim(p.join("type")).unwrap_or_default(),
            size,
            line: read_trim(p.join("coherency_line_size"))
                .and_then(|s| s.parse().ok())
                .unwrap_or(64),
            shared_cpus: read_trim(p.join("shared_cpu_list")).unwrap_or_default(),
        });
    }
    out.sort_by(|a, b| (a.level, &a.kind).cmp(&(b.level, &b.kind)));
    out
}

/// CPUs in the calling thread's affinity mask.
pub fn affinity_cpus() -> Vec<usize> {
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return (0..online_cpus()).collect();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Number of online CPUs.
pub fn online_cpus() -> usize {
    unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN).max(1) as usize }
}

/// The memory limit of the calling process's cgroup (v1 or v2), walking up to the root, when
/// one is set below "unlimited".
pub fn cgroup_memory_limit() -> Option<u64> {
    let proc_cgroup = Process::myself().ok()?.cgroups().ok()?;
    let mut best: Option<u64> = None;
    let mut consider = |v: Option<u64>| {
        if let Some(v) = v.filter(|&v| v < (1u64 << 60)) {
            best = Some(best.map_or(v, |b| b.min(v)));
        }
    };
    for cg in proc_cgroup {
        let (base, file) = if cg.controllers.iter().any(|c| c == "memory") {
            (
                PathBuf::from("/sys/fs/cgroup/memory"),
                "memory.limit_in_bytes",
            )
        } else if cg.controllers.is_empty() {
            (PathBuf::from("/sys/fs/cgroup"), "memory.max")
        } else {
            continue;
        };
        let mut dir = base.join(cg.pathname.trim_start_matches('/'));
        loop {
            consider(read_trim(dir.join(file)).and_then(|s| s.parse().ok()));
            if dir == base || !dir.pop() {
                break;
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_something_sane() {
        let env = Env::detect();
        assert!(!env.cpus.is_empty());
        assert!(env.mem_usable > 0);
        assert!(env.page_size >= 4096);
        let facts = HostFacts::detect();
        assert!(facts.cores >= 1);
        assert!(!facts.kernel.is_empty());
    }

    #[test]
    fn cgroup_version_on_fake_trees() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(cgroup_version(d.path()), "none");
        fs::write(d.path().join("cgroup.controllers"), "cpu memory pids\n").unwrap();
        assert_eq!(cgroup_version(d.path()), "2");
    }
}
