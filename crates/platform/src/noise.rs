//! Noise attribution: what the host did to a trial besides the run's own tenants.
//!
//! This machine is itself a tenant of a busy host, so a degradation can come from outside the
//! run (steal time), from interrupt work charged to whoever happens to run on a CPU (irq and
//! softirq time), from tasks stalled on a resource (pressure-stall information) or from a
//! tenant's own CPU quota (throttling). A [`HostNoise`] snapshot is read before and after each
//! trial (a handful of small `/proc` and cgroupfs files, well under a millisecond);
//! [`delta`] turns two snapshots into rates over the interval ([`NoiseDelta`]) and
//! [`causes`] names the ones above documented [`Thresholds`] in words a report can print
//! ("steal 0.31 CPUs", "softirq 0.62 CPUs on cpu1").
//!
//! [`irq_affinity`] records where the disk's and network devices' interrupts are delivered,
//! because a cpuset split can leave a victim's interrupts on the aggressor's CPU.
//!
//! Parsing is pure (`*_from_text` functions, unit-tested on sample text); `/proc/stat` and
//! the pressure files are parsed by the `procfs` crate.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use procfs::{CpuPressure, ExplicitSystemInfo, FromBufRead, FromBufReadSI, KernelStats};
use serde::{Deserialize, Serialize};

use crate::flatkeyed::keyed;

/// Cumulative time of one CPU (or of all CPUs added up) by state, seconds, from `/proc/stat`.
///
/// `/proc/stat` counts in clock ticks (usually 10 ms), so differences over intervals shorter
/// than a few hundred milliseconds are coarse.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuTimes {
    /// User time (guest time included, as the kernel counts it).
    pub user_s: f64,
    /// Niced user time.
    pub nice_s: f64,
    /// System time.
    pub system_s: f64,
    /// Idle time.
    pub idle_s: f64,
    /// Idle time with I/O outstanding.
    pub iowait_s: f64,
    /// Hard interrupt time (zero when the kernel does not account it separately).
    pub irq_s: f64,
    /// Softirq time (network receive, block completion, timers, RCU...).
    pub softirq_s: f64,
    /// Time the hypervisor ran something else while this CPU wanted to run.
    pub steal_s: f64,
}

impl CpuTimes {
    /// Every state added up: the CPU's elapsed time as `/proc/stat` sees it.
    pub fn total_s(&self) -> f64 {
        self.user_s
            + self.nice_s
            + self.system_s
            + self.idle_s
            + self.iowait_s
            + self.irq_s
            + self.softirq_s
            + self.steal_s
    }

    fn from_procfs(c: &procfs::CpuTime, ticks_per_second: u64) -> CpuTimes {
        let s = |t: u64| t as f64 / ticks_per_second.max(1) as f64;
        let o = |t: Option<u64>| s(t.unwrap_or(0));
        CpuTimes {
            user_s: s(c.user),
            nice_s: s(c.nice),
            system_s: s(c.system),
            idle_s: s(c.idle),
            iowait_s: o(c.iowait),
            irq_s: o(c.irq),
            softirq_s: o(c.softirq),
            steal_s: o(c.steal),
        }
    }
}

/// Per-CPU and total CPU times parsed from the text of `/proc/stat`.
///
/// Per-CPU entries are in file order, which is CPU number order when every CPU is online.
pub fn cpu_times_from_text(stat: &str, ticks_per_second: u64) -> Result<(CpuTimes, Vec<CpuTimes>)> {
    let si = ExplicitSystemInfo {
        boot_time_secs: 0,
        ticks_per_second,
        page_size: 4096,
        is_little_endian: cfg!(target_endian = "little"),
    };
    let ks = KernelStats::from_buf_read(stat.as_bytes(), &si).context("parsing /proc/stat")?;
    Ok((
        CpuTimes::from_procfs(&ks.total, ticks_per_second),
        ks.cpu_time
            .iter()
            .map(|c| CpuTimes::from_procfs(c, ticks_per_second))
            .collect(),
    ))
}

/// Cumulative stall time of one resource from a pressure file (`/proc/pressure/cpu`,
/// `<cgroup>/io.pressure`, ...), microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stall {
    /// Time at least one task was stalled on the resource.
    pub some_us: u64,
    /// Time every non-idle task was stalled at once (absent in old kernels' CPU files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_us: Option<u64>,
}

/// Parses the text of a pressure file: a `some` line and, where the kernel has it, a `full`
/// line, each `avg10=.. avg60=.. avg300=.. total=<µs>`.
pub fn stall_from_text(text: &str) -> Result<Stall> {
    // The two-line layout (io, memory, and cpu since Linux 5.13) first, then the
    // `some`-only layout of older CPU files.
    if let Ok(p) = procfs::IoPressure::from_buf_read(text.as_bytes()) {
        return Ok(Stall {
            some_us: p.some.total,
            full_us: Some(p.full.total),
        });
    }
    let p = CpuPressure::from_buf_read(text.as_bytes())
        .map_err(|e| anyhow::anyhow!("not pressure-stall text ({e}): {text:?}"))?;
    Ok(Stall {
        some_us: p.some.total,
        full_us: None,
    })
}

/// Stall counters of the three resources; `None` where the file does not exist (a kernel
/// without PSI, cgroup v1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pressure {
    /// CPU: runnable tasks waiting for a CPU.
    pub cpu: Option<Stall>,
    /// I/O: tasks waiting on block I/O.
    pub io: Option<Stall>,
    /// Memory: tasks in reclaim, refaults, compaction.
    pub memory: Option<Stall>,
}

impl Pressure {
    /// Reads `<dir>/<prefix>cpu<suffix>` and the like, e.g. `/proc/pressure/cpu` (prefix
    /// `""`, suffix `""`) or `<cgroup>/cpu.pressure` (suffix `".pressure"`).
    fn read(dir: &Path, suffix: &str) -> Pressure {
        Pressure::read_with(|r| fs::read_to_string(dir.join(format!("{r}{suffix}"))).ok())
    }

    /// Parses the text `read` gives for each resource (`"cpu"`, `"io"`, `"memory"`); a
    /// resource without text, or with text that is not pressure-stall information (a kernel
    /// booted with `psi=0` refuses the read), is `None`, never zero.
    pub fn read_with(read: impl Fn(&str) -> Option<String>) -> Pressure {
        let one = |r: &str| read(r).and_then(|t| stall_from_text(&t).ok());
        Pressure {
            cpu: one("cpu"),
            io: one("io"),
            memory: one("memory"),
        }
    }

    /// The host's pressure files, `/proc/pressure/{cpu,io,memory}`.
    pub fn host() -> Pressure {
        Pressure::read(Path::new("/proc/pressure"), "")
    }

    /// A cgroup v2 directory's `cpu.pressure`, `io.pressure` and `memory.pressure`.
    pub fn cgroup(dir: &Path) -> Pressure {
        Pressure::read(dir, ".pressure")
    }
}

/// CPU bandwidth-control counters of a cgroup's `cpu.stat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuThrottle {
    /// Enforcement periods that had runnable tasks.
    pub nr_periods: u64,
    /// Periods in which the quota ran out.
    pub nr_throttled: u64,
    /// Time the cgroup's tasks spent throttled, ns.
    pub throttled_ns: u64,
}

/// Parses a cpu controller's `cpu.stat`: v1 (`throttled_time` in ns) or v2
/// (`throttled_usec`). `None` when it has no throttling counters.
pub fn cpu_throttle_from_text(text: &str) -> Option<CpuThrottle> {
    let throttled_ns = keyed(text, "throttled_time")
        .or_else(|| keyed(text, "throttled_usec").map(|us| us.saturating_mul(1000)))?;
    Some(CpuThrottle {
        nr_periods: keyed(text, "nr_periods")?,
        nr_throttled: keyed(text, "nr_throttled")?,
        throttled_ns,
    })
}

/// One tenant's cgroup counters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantNoise {
    /// The tenant's name (as the caller gave it).
    pub name: String,
    /// CPU throttling from the cpu controller's `cpu.stat`, when there is one.
    pub throttle: Option<CpuThrottle>,
    /// The cgroup's own pressure files (cgroup v2), where present.
    pub pressure: Pressure,
}

impl TenantNoise {
    /// Reads a tenant's counters from its cgroup directories: one for v2, one per hierarchy
    /// for v1 (as in [`crate::TenantInfo::cgroups`]). The first directory with a `cpu.stat`
    /// holding throttling counters and the first with pressure files are used.
    pub fn read(name: &str, dirs: &[PathBuf]) -> TenantNoise {
        let throttle = dirs.iter().find_map(|d| {
            fs::read_to_string(d.join("cpu.stat"))
                .ok()
                .and_then(|t| cpu_throttle_from_text(&t))
        });
        let pressure = dirs
            .iter()
            .map(|d| Pressure::cgroup(d))
            .find(|p| p.cpu.is_some() || p.io.is_some() || p.memory.is_some())
            .unwrap_or_default();
        TenantNoise {
            name: name.to_string(),
            throttle,
            pressure,
        }
    }
}

/// A tenant to watch: a name and its cgroup directories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedTenant {
    /// Name used in the causes ("aggressor throttled ...").
    pub name: String,
    /// Its cgroup directories (one for v2, one per hierarchy for v1).
    pub cgroups: Vec<PathBuf>,
}

/// A snapshot of the host's noise counters, cheap enough to read around every trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostNoise {
    /// `CLOCK_MONOTONIC` when the snapshot was read, seconds.
    pub at_s: f64,
    /// All CPUs added up.
    pub total: CpuTimes,
    /// Each CPU, in CPU number order.
    pub per_cpu: Vec<CpuTimes>,
    /// Host-wide pressure-stall counters.
    pub pressure: Pressure,
    /// Watched tenants' cgroup counters.
    pub tenants: Vec<TenantNoise>,
}

/// `CLOCK_MONOTONIC`, nanoseconds (the clock of window series and switches).
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `CLOCK_MONOTONIC`, seconds.
fn monotonic_s() -> f64 {
    monotonic_ns() as f64 * 1e-9
}

impl HostNoise {
    /// Reads the host's counters and those of `tenants`.
    pub fn read(tenants: &[WatchedTenant]) -> Result<HostNoise> {
        let at_s = monotonic_s();
        let stat = fs::read_to_string("/proc/stat").context("reading /proc/stat")?;
        let (total, per_cpu) = cpu_times_from_text(&stat, procfs::ticks_per_second())?;
        Ok(HostNoise {
            at_s,
            total,
            per_cpu,
            pressure: Pressure::host(),
            tenants: tenants
                .iter()
                .map(|t| TenantNoise::read(&t.name, &t.cgroups))
                .collect(),
        })
    }
}

/// One CPU's noise over an interval. Times are CPU-seconds per second of the interval
/// (0.25 = a quarter of that CPU).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuNoise {
    /// CPU number.
    pub cpu: usize,
    /// Steal.
    pub steal: f64,
    /// Hard interrupts.
    pub irq: f64,
    /// Softirqs.
    pub softirq: f64,
    /// Idle with I/O outstanding.
    pub iowait: f64,
    /// Share of the CPU's accounted time spent idle (iowait excluded), 0..=1.
    pub idle_share: f64,
}

/// Share of an interval stalled on one resource, 0..=1.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StallShare {
    /// Share with at least one task stalled.
    pub some: f64,
    /// Share with every non-idle task stalled, where the kernel reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full: Option<f64>,
}

/// Shares of an interval stalled on each resource; `None` where not measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PressureShare {
    /// CPU.
    pub cpu: Option<StallShare>,
    /// I/O.
    pub io: Option<StallShare>,
    /// Memory.
    pub memory: Option<StallShare>,
}

/// Throttling of one cgroup over an interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ThrottleDelta {
    /// Enforcement periods that had runnable tasks.
    pub periods: u64,
    /// Periods in which the quota ran out.
    pub throttled_periods: u64,
    /// Time spent throttled, seconds (summed over the cgroup's CPUs).
    pub throttled_s: f64,
}

/// One tenant's noise over an interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantNoiseDelta {
    /// Tenant name.
    pub name: String,
    /// CPU throttling, when the tenant has a cpu controller.
    pub throttle: Option<ThrottleDelta>,
    /// Shares of the interval the tenant's tasks were stalled (cgroup v2).
    pub pressure: PressureShare,
}

/// What happened on the host between two snapshots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NoiseDelta {
    /// Length of the interval, seconds (monotonic clock).
    pub interval_s: f64,
    /// Steal summed over CPUs, CPUs (CPU-seconds per second).
    pub steal: f64,
    /// Irq summed over CPUs, CPUs.
    pub irq: f64,
    /// Softirq summed over CPUs, CPUs.
    pub softirq: f64,
    /// Iowait summed over CPUs, CPUs.
    pub iowait: f64,
    /// Per CPU.
    pub per_cpu: Vec<CpuNoise>,
    /// Host-wide stall shares.
    pub pressure: PressureShare,
    /// Watched tenants present in both snapshots.
    pub tenants: Vec<TenantNoiseDelta>,
}

fn stall_share(b: Option<Stall>, a: Option<Stall>, interval_us: f64) -> Option<StallShare> {
    let (b, a) = (b?, a?);
    let share = |d: u64| (d as f64 / interval_us).clamp(0.0, 1.0);
    Some(StallShare {
        some: share(a.some_us.saturating_sub(b.some_us)),
        full: match (b.full_us, a.full_us) {
            (Some(b), Some(a)) => Some(share(a.saturating_sub(b))),
            _ => None,
        },
    })
}

/// Shares of an interval of `interval_s` seconds stalled on each resource, between two
/// readings; a resource missing from either reading is `None`.
pub(crate) fn pressure_share(b: &Pressure, a: &Pressure, interval_s: f64) -> PressureShare {
    let us = interval_s * 1e6;
    PressureShare {
        cpu: stall_share(b.cpu, a.cpu, us),
        io: stall_share(b.io, a.io, us),
        memory: stall_share(b.memory, a.memory, us),
    }
}

/// The noise between two snapshots as rates over the interval. Counters that went
/// backwards (a CPU taken offline, a cgroup recreated) count as zero.
pub fn delta(before: &HostNoise, after: &HostNoise) -> NoiseDelta {
    let interval_s = (after.at_s - before.at_s).max(1e-9);
    let rate = |b: f64, a: f64| ((a - b) / interval_s).max(0.0);
    let per_cpu: Vec<CpuNoise> = before
        .per_cpu
        .iter()
        .zip(&after.per_cpu)
        .enumerate()
        .map(|(cpu, (b, a))| {
            let total = a.total_s() - b.total_s();
            CpuNoise {
                cpu,
                steal: rate(b.steal_s, a.steal_s),
                irq: rate(b.irq_s, a.irq_s),
                softirq: rate(b.softirq_s, a.softirq_s),
                iowait: rate(b.iowait_s, a.iowait_s),
                idle_share: if total > 0.0 {
                    ((a.idle_s - b.idle_s) / total).clamp(0.0, 1.0)
                } else {
                    0.0
                },
            }
        })
        .collect();
    let tenants = after
        .tenants
        .iter()
        .filter_map(|a| {
            let b = before.tenants.iter().find(|b| b.name == a.name)?;
            let throttle = match (b.throttle, a.throttle) {
                (Some(b), Some(a)) => Some(ThrottleDelta {
                    periods: a.nr_periods.saturating_sub(b.nr_periods),
                    throttled_periods: a.nr_throttled.saturating_sub(b.nr_throttled),
                    throttled_s: a.throttled_ns.saturating_sub(b.throttled_ns) as f64 * 1e-9,
                }),
                _ => None,
            };
            Some(TenantNoiseDelta {
                name: a.name.clone(),
                throttle,
                pressure: pressure_share(&b.pressure, &a.pressure, interval_s),
            })
        })
        .collect();
    NoiseDelta {
        interval_s,
        steal: rate(before.total.steal_s, after.total.steal_s),
        irq: rate(before.total.irq_s, after.total.irq_s),
        softirq: rate(before.total.softirq_s, after.total.softirq_s),
        iowait: rate(before.total.iowait_s, after.total.iowait_s),
        per_cpu,
        pressure: pressure_share(&before.pressure, &after.pressure, interval_s),
        tenants,
    }
}

/// The levels above which [`causes`] names a source of noise.
///
/// The defaults are chosen against this project's measurements: a quiet 2-vCPU guest shows
/// steal and softirq of a few hundredths of a CPU, and a trial's probe is disturbed in a way
/// a report should mention once a tenth of a CPU (or of the interval) goes elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// Steal summed over CPUs, CPUs. Default 0.05 (5% of one CPU).
    pub steal_cpus: f64,
    /// Hard-interrupt time on one CPU, CPUs. Default 0.10.
    pub irq_cpus: f64,
    /// Softirq time on one CPU, CPUs. Default 0.10.
    pub softirq_cpus: f64,
    /// Share of the interval with some task stalled (`some`), host-wide or in a tenant.
    /// Default 0.10.
    pub pressure_some: f64,
    /// Share of throttled enforcement periods of a tenant. Default 0.10 (and at least one
    /// throttled period).
    pub throttled_share: f64,
}

impl Default for Thresholds {
    fn default() -> Thresholds {
        Thresholds {
            steal_cpus: 0.05,
            irq_cpus: 0.10,
            softirq_cpus: 0.10,
            pressure_some: 0.10,
            throttled_share: 0.10,
        }
    }
}

/// The kind of a [`Cause`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CauseKind {
    /// The hypervisor ran something else.
    Steal,
    /// Hard-interrupt work on a CPU.
    Irq,
    /// Softirq work on a CPU (network receive, block completion).
    Softirq,
    /// Tasks stalled waiting for a CPU.
    CpuPressure,
    /// Tasks stalled on block I/O.
    IoPressure,
    /// Tasks stalled on memory.
    MemoryPressure,
    /// A tenant's CPU quota ran out.
    Throttling,
}

/// One named source of noise over an interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cause {
    /// What it is.
    pub kind: CauseKind,
    /// The CPU it happened on, for per-CPU causes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
    /// The tenant it concerns, for per-tenant causes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Its size: CPUs for steal/irq/softirq, a share 0..=1 for pressure and throttling.
    pub value: f64,
    /// The cause in words ("softirq 0.62 CPUs on cpu1").
    pub text: String,
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn pressure_causes(p: &PressureShare, tenant: Option<&str>, limit: f64, out: &mut Vec<Cause>) {
    for (kind, label, s) in [
        (CauseKind::CpuPressure, "CPU", p.cpu),
        (CauseKind::IoPressure, "I/O", p.io),
        (CauseKind::MemoryPressure, "memory", p.memory),
    ] {
        let Some(s) = s else { continue };
        if s.some < limit {
            continue;
        }
        let who = tenant.map(|t| format!("{t} ")).unwrap_or_default();
        let full = match s.full {
            Some(f) if f >= limit => format!(" (all tasks {:.0}%)", f * 100.0),
            _ => String::new(),
        };
        out.push(Cause {
            kind,
            cpu: None,
            tenant: tenant.map(str::to_string),
            value: s.some,
            text: format!(
                "{who}{label} pressure {:.0}% of the interval{full}",
                s.some * 100.0
            ),
        });
    }
}

/// The sources of noise in `d` at or above `t`, largest first within each kind, in the order
/// steal, irq, softirq, host pressure, tenant throttling, tenant pressure.
pub fn causes(d: &NoiseDelta, t: &Thresholds) -> Vec<Cause> {
    let mut out = Vec::new();
    if d.steal >= t.steal_cpus {
        out.push(Cause {
            kind: CauseKind::Steal,
            cpu: None,
            tenant: None,
            value: d.steal,
            text: format!("steal {:.2} CPUs", d.steal),
        });
    }
    for (kind, label, limit, get) in [
        (
            CauseKind::Irq,
            "irq",
            t.irq_cpus,
            (|c: &CpuNoise| c.irq) as fn(&CpuNoise) -> f64,
        ),
        (CauseKind::Softirq, "softirq", t.softirq_cpus, |c| c.softirq),
    ] {
        let mut cpus: Vec<&CpuNoise> = d.per_cpu.iter().filter(|c| get(c) >= limit).collect();
        cpus.sort_by(|a, b| get(b).total_cmp(&get(a)));
        out.extend(cpus.into_iter().map(|c| Cause {
            kind,
            cpu: Some(c.cpu),
            tenant: None,
            value: get(c),
            text: format!("{label} {:.2} CPUs on cpu{}", get(c), c.cpu),
        }));
    }
    pressure_causes(&d.pressure, None, t.pressure_some, &mut out);
    for tn in &d.tenants {
        if let Some(th) = tn.throttle {
            let share = if th.periods > 0 {
                th.throttled_periods as f64 / th.periods as f64
            } else {
                0.0
            };
            if th.throttled_periods > 0 && share >= t.throttled_share {
                out.push(Cause {
                    kind: CauseKind::Throttling,
                    cpu: None,
                    tenant: Some(tn.name.clone()),
                    value: share,
                    text: format!(
                        "{} throttled {} of {} periods ({:.2} s)",
                        tn.name, th.throttled_periods, th.periods, th.throttled_s
                    ),
                });
            }
        }
    }
    for tn in &d.tenants {
        pressure_causes(&tn.pressure, Some(&tn.name), t.pressure_some, &mut out);
    }
    out
}

/// One interrupt line of `/proc/interrupts`, with its affinity where the kernel exposes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Irq {
    /// The IRQ number, or the name of a per-CPU interrupt (`LOC`, `RES`).
    pub irq: String,
    /// Interrupts delivered to each CPU so far.
    pub per_cpu: Vec<u64>,
    /// The rest of the line: chip, hardware IRQ and the handlers' names
    /// (`PCI-MSIX-0000:00:02.0 1-edge virtio1-req.0`).
    pub desc: String,
    /// The CPUs the IRQ may be delivered to (`/proc/irq/N/smp_affinity_list`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<String>,
    /// The CPUs it is actually delivered to (`effective_affinity_list`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_affinity: Option<String>,
}

impl Irq {
    /// The handler's name: the last word of the description (`virtio1-req.0`).
    pub fn handler(&self) -> &str {
        self.desc.split_whitespace().last().unwrap_or("")
    }
}

/// Parses `/proc/interrupts`: the header names the CPUs, each line an IRQ and its counts.
/// Lines with fewer counts than CPUs (`ERR`, `MIS`) keep the counts they have.
// By hand: procfs reads /proc/stat (`KernelStats`, above) but has no reader for
// /proc/interrupts, neither 0.17 (the locked version) nor 0.18 (the latest, 2026-11).
pub fn interrupts_from_text(text: &str) -> Vec<Irq> {
    let mut lines = text.lines();
    let ncpu = lines
        .next()
        .map(|h| {
            h.split_whitespace()
                .filter(|w| w.starts_with("CPU"))
                .count()
        })
        .unwrap_or(0);
    lines
        .filter_map(|l| {
            let (irq, rest) = l.split_once(':')?;
            let mut per_cpu = Vec::new();
            let mut rest = rest.trim_start();
            while per_cpu.len() < ncpu {
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                let Ok(n) = rest[..end].parse::<u64>() else {
                    break;
                };
                per_cpu.push(n);
                rest = rest[end..].trim_start();
            }
            Some(Irq {
                irq: irq.trim().to_string(),
                per_cpu,
                desc: rest.split_whitespace().collect::<Vec<_>>().join(" "),
                affinity: None,
                effective_affinity: None,
            })
        })
        .collect()
}

/// Every interrupt of `/proc/interrupts` with its affinity from `/proc/irq/N/`.
pub fn interrupts() -> Result<Vec<Irq>> {
    let text = fs::read_to_string("/proc/interrupts").context("reading /proc/interrupts")?;
    let mut irqs = interrupts_from_text(&text);
    for i in &mut irqs {
        if i.irq.parse::<u32>().is_err() {
            continue;
        }
        let read = |f: &str| {
            fs::read_to_string(format!("/proc/irq/{}/{f}", i.irq))
                .ok()
                .map(|s| s.trim().to_string())
        };
        i.affinity = read("smp_affinity_list");
        i.effective_affinity = read("effective_affinity_list");
    }
    Ok(irqs)
}

/// Whether a block or network device is a disk or a network interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    /// A block device (`/sys/block/*`).
    Disk,
    /// A network interface (`/sys/class/net/*`).
    Net,
}

/// A device and the interrupts it raises.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceIrqs {
    /// `vda`, `eth0`.
    pub device: String,
    /// Disk or network.
    pub kind: DeviceKind,
    /// Its interrupt lines, with affinity and counts.
    pub irqs: Vec<Irq>,
}

/// The MSI interrupt numbers of a sysfs device (its own or its parent's `msi_irqs`, as for a
/// virtio device on PCI) or its legacy `irq`.
fn sysfs_irq_numbers(device: &Path) -> Vec<String> {
    let Ok(dev) = fs::canonicalize(device) else {
        return Vec::new();
    };
    for d in dev.ancestors().take(2) {
        if let Ok(rd) = fs::read_dir(d.join("msi_irqs")) {
            let mut v: Vec<String> = rd
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            v.sort_by_key(|n| n.parse::<u32>().unwrap_or(u32::MAX));
            return v;
        }
        if let Ok(n) = fs::read_to_string(d.join("irq")) {
            let n = n.trim();
            if n != "0" && !n.is_empty() {
                return vec![n.to_string()];
            }
        }
    }
    Vec::new()
}

/// The interrupts of the host's disks (`/sys/block/*` with a device) and network interfaces
/// (`/sys/class/net/*` with a device), with their affinity: for the record of a run. Virtual
/// devices (loop, lo, veth, ifb) raise no interrupts and are left out.
pub fn irq_affinity() -> Result<Vec<DeviceIrqs>> {
    let all = interrupts()?;
    let mut out = Vec::new();
    for (kind, class) in [
        (DeviceKind::Disk, "/sys/block"),
        (DeviceKind::Net, "/sys/class/net"),
    ] {
        let Ok(rd) = fs::read_dir(class) else {
            continue;
        };
        let mut names: Vec<String> = rd
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for name in names {
            let dev = Path::new(class).join(&name).join("device");
            if !dev.exists() {
                continue;
            }
            let numbers = sysfs_irq_numbers(&dev);
            let irqs: Vec<Irq> = all
                .iter()
                .filter(|i| numbers.contains(&i.irq))
                .cloned()
                .collect();
            out.push(DeviceIrqs {
                device: name,
                kind,
                irqs,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT_BEFORE: &str = "\
cpu  91644 0 28421 351675 3189 0 2594 1884 0 0
cpu0 45547 0 13718 177122 1167 0 1151 953 0 0
cpu1 46096 0 14703 174552 2021 0 1442 930 0 0
intr 1 2 3
ctxt 123
btime 1700000000
processes 10
procs_running 2
procs_blocked 0
";
    // 2 s later at 100 ticks/s: cpu0 steal +40 ticks, cpu1 softirq +124 ticks.
    const STAT_AFTER: &str = "\
cpu  91844 0 28521 351775 3199 0 2718 1924 0 0
cpu0 45647 0 13768 177172 1172 0 1151 993 0 0
cpu1 46196 0 14753 174602 2026 0 1566 930 0 0
ctxt 456
btime 1700000000
processes 12
";

    const PSI_CPU: &str = "some avg10=96.15 avg60=50.20 avg300=25.89 total=209623173\n\
                           full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";

    fn snap(at_s: f64, stat: &str, cpu_some: u64, tenants: Vec<TenantNoise>) -> HostNoise {
        let (total, per_cpu) = cpu_times_from_text(stat, 100).unwrap();
        HostNoise {
            at_s,
            total,
            per_cpu,
            pressure: Pressure {
                cpu: Some(Stall {
                    some_us: cpu_some,
                    full_us: Some(0),
                }),
                io: Some(Stall {
                    some_us: 10,
                    full_us: Some(5),
                }),
                memory: None,
            },
            tenants,
        }
    }

    #[test]
    fn proc_stat_is_read_in_seconds_per_cpu() {
        let (total, per_cpu) = cpu_times_from_text(STAT_BEFORE, 100).unwrap();
        assert_eq!(per_cpu.len(), 2);
        assert!((total.steal_s - 18.84).abs() < 1e-9);
        assert!((per_cpu[1].softirq_s - 14.42).abs() < 1e-9);
        assert!((per_cpu[0].idle_s - 1771.22).abs() < 1e-9);
        assert_eq!(per_cpu[0].irq_s, 0.0);
    }

    #[test]
    fn pressure_text_with_and_without_full() {
        let s = stall_from_text(PSI_CPU).unwrap();
        assert_eq!(s.some_us, 209623173);
        assert_eq!(s.full_us, Some(0));
        let old = stall_from_text("some avg10=0.00 avg60=0.00 avg300=0.00 total=12202\n").unwrap();
        assert_eq!(old.some_us, 12202);
        assert_eq!(old.full_us, None);
        assert!(stall_from_text("nr_periods 3\n").is_err());
    }

    #[test]
    fn cpu_stat_v1_and_v2() {
        let v1 = cpu_throttle_from_text("nr_periods 20\nnr_throttled 12\nthrottled_time 1500000\n")
            .unwrap();
        assert_eq!(
            v1,
            CpuThrottle {
                nr_periods: 20,
                nr_throttled: 12,
                throttled_ns: 1_500_000
            }
        );
        let v2 = cpu_throttle_from_text(
            "usage_usec 10\nuser_usec 5\nsystem_usec 5\nnr_periods 7\nnr_throttled 3\n\
             throttled_usec 250\nnr_bursts 0\nburst_usec 0\n",
        )
        .unwrap();
        assert_eq!(v2.throttled_ns, 250_000);
        assert_eq!(v2.nr_throttled, 3);
        assert_eq!(cpu_throttle_from_text("usage_usec 10\n"), None);
    }

    #[test]
    fn delta_gives_rates_and_shares_and_causes_name_them() {
        let tenant = |p, t, ns, cpu_some| TenantNoise {
            name: "aggressor".into(),
            throttle: Some(CpuThrottle {
                nr_periods: p,
                nr_throttled: t,
                throttled_ns: ns,
            }),
            pressure: Pressure {
                cpu: Some(Stall {
                    some_us: cpu_some,
                    full_us: Some(0),
                }),
                ..Pressure::default()
            },
        };
        let b = snap(10.0, STAT_BEFORE, 1_000_000, vec![tenant(100, 50, 0, 0)]);
        let a = snap(
            12.0,
            STAT_AFTER,
            1_800_000,
            vec![tenant(120, 62, 300_000_000, 200_000)],
        );
        let d = delta(&b, &a);
        assert!((d.interval_s - 2.0).abs() < 1e-12);
        assert!((d.steal - 0.2).abs() < 1e-9, "{}", d.steal);
        assert!((d.per_cpu[0].steal - 0.2).abs() < 1e-9);
        assert!((d.per_cpu[1].softirq - 0.62).abs() < 1e-9);
        assert_eq!(d.per_cpu[1].cpu, 1);
        // cpu1 accounted 100+50+50+5+124 = 329 ticks, 50 of them idle.
        assert!((d.per_cpu[1].idle_share - 50.0 / 329.0).abs() < 1e-9);
        let cpu = d.pressure.cpu.unwrap();
        assert!((cpu.some - 0.4).abs() < 1e-9);
        assert_eq!(cpu.full, Some(0.0));
        assert_eq!(d.pressure.memory, None);
        let th = d.tenants[0].throttle.unwrap();
        assert_eq!((th.periods, th.throttled_periods), (20, 12));
        assert!((th.throttled_s - 0.3).abs() < 1e-12);

        let texts: Vec<String> = causes(&d, &Thresholds::default())
            .into_iter()
            .map(|c| c.text)
            .collect();
        assert_eq!(
            texts,
            [
                "steal 0.20 CPUs",
                "softirq 0.62 CPUs on cpu1",
                "CPU pressure 40% of the interval",
                "aggressor throttled 12 of 20 periods (0.30 s)",
                "aggressor CPU pressure 10% of the interval",
            ]
        );
        // Above every threshold: nothing to say.
        let quiet = Thresholds {
            steal_cpus: 1.0,
            irq_cpus: 1.0,
            softirq_cpus: 1.0,
            pressure_some: 1.0,
            throttled_share: 1.0,
        };
        assert!(causes(&d, &quiet).is_empty());
    }

    #[test]
    fn counters_going_backwards_count_as_zero() {
        let b = snap(1.0, STAT_AFTER, 5, vec![]);
        let a = snap(2.0, STAT_BEFORE, 1, vec![]);
        let d = delta(&b, &a);
        assert_eq!(d.steal, 0.0);
        assert_eq!(d.pressure.cpu.unwrap().some, 0.0);
        assert!(d.per_cpu.iter().all(|c| c.softirq == 0.0));
    }

    #[test]
    fn interrupts_are_parsed_with_the_cpu_count_of_the_header() {
        let text = "           CPU0       CPU1       \n\
 26:          0          8  IO-APIC   4-edge      ttyS0\n\
 36:          0     443439 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n\
 39:       2940          0 PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0\n\
LOC:     225442     203434   Local timer interrupts\n\
ERR:          0\n";
        let irqs = interrupts_from_text(text);
        assert_eq!(irqs.len(), 5);
        assert_eq!(irqs[1].irq, "36");
        assert_eq!(irqs[1].per_cpu, vec![0, 443439]);
        assert_eq!(irqs[1].handler(), "virtio1-req.0");
        assert_eq!(irqs[1].desc, "PCI-MSIX-0000:00:02.0 1-edge virtio1-req.0");
        assert_eq!(irqs[3].irq, "LOC");
        assert_eq!(irqs[3].desc, "Local timer interrupts");
        assert_eq!(irqs[4].per_cpu, vec![0]);
    }

    #[test]
    fn snapshots_serialize() {
        let s = snap(1.0, STAT_BEFORE, 5, vec![]);
        let j = serde_json::to_string(&s).unwrap();
        let back: HostNoise = serde_json::from_str(&j).unwrap();
        assert_eq!(back, s);
        let d = delta(&s, &snap(2.0, STAT_AFTER, 6, vec![]));
        let j = serde_json::to_string(&d).unwrap();
        let back: NoiseDelta = serde_json::from_str(&j).unwrap();
        assert_eq!(back.per_cpu.len(), 2);
        assert!((back.per_cpu[1].softirq - d.per_cpu[1].softirq).abs() < 1e-12);
        assert_eq!(back.pressure.memory, None);
    }
}
