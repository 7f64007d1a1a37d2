//! Tenant resource limits: one typed struct, parsed from `key=value` lists such as
//! `cpus=1.5,memory=1G,pids=64,cpuset=0`.
//!
//! Parsing only checks syntax and ranges ([`Limits::parse`]); whether the limits fit this host
//! (a cpuset on CPUs that exist, a quota no larger than the machine) is a separate step,
//! [`Limits::validate`], so a scenario file can be checked anywhere and resolved on the host
//! that runs it. Every error names the key, the value and the fix.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use isobench_common::{format_size, format_size_exact, parse_size};
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::hostinfo::HostInfo;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

/// Pids limit applied to an aggressor tenant when the user sets none.
pub const SAFE_PIDS: u64 = 256;
/// Write bandwidth limit (bytes/s) applied to an aggressor tenant's workdir device when the user
/// sets none: a bound on a runaway writer, set above what a disk stressor is meant to deliver
/// (the reference, `stress-ng --hdd 1`, wrote 716 MB/s to this machine's disk; at 256 MiB/s the
/// cap, not the stressor, set the pressure). The files' size cap keeps the disk from filling.
pub const SAFE_IO_WRITE_BPS: u64 = GIB;
/// Divisor of host RAM giving the memory limit of an aggressor tenant when the user sets none.
pub const SAFE_MEMORY_DIVISOR: u64 = 4;

/// CFS period used for CPU quotas, in microseconds.
pub const CPU_PERIOD_US: u64 = 100_000;

pub(crate) mod cpu;
mod error;
mod keys;
mod units;

pub use cpu::{CpuList, CpuWeight, CpusetPartition};
pub use error::LimitError;
use error::{bad, parse_int};
use keys::key_spec;
pub use keys::{nearest_key, LimitKey, LIMIT_KEYS};
pub use units::{format_micros, format_rate, parse_micros, parse_rate};

/// The resource limits of one tenant. `None` means "not limited".
///
/// Written as a comma-separated `key=value` list; the keys are those of [`LIMIT_KEYS`]:
///
/// | key | value | enforced by |
/// |---|---|---|
/// | `cpus` | CPUs of quota, e.g. `1.5` | v1 `cpu.cfs_quota_us`, v2 `cpu.max` |
/// | `shares` / `weight` | CPU weight (v1 / v2 scale) | `cpu.shares` / `cpu.weight` |
/// | `cpuset` | CPU list, e.g. `0-1,3` | `cpuset.cpus` |
/// | `mems` | memory node list | `cpuset.mems` |
/// | `memory` | bytes, e.g. `512M`, `2G` (binary units), swap off | `memory.limit_in_bytes` / `memory.max` |
/// | `memory_min`, `memory_low` | bytes protected from reclaim (hard / best effort) | v2 `memory.min` / `memory.low` |
/// | `memory_high` | bytes above which the tenant is throttled and reclaimed | v2 `memory.high` |
/// | `swap` | bytes of swap the tenant may use | v2 `memory.swap.max`, v1 `memory.memsw.limit_in_bytes` (memory + swap) |
/// | `cpu_burst` | CPU time a quota may borrow, e.g. `20ms` (needs `cpus`) | v2 `cpu.max.burst`, v1 `cpu.cfs_burst_us` |
/// | `cpuset_partition` | `root` or `isolated` (needs `cpuset`) | v2 `cpuset.cpus.partition` |
/// | `io_weight` | I/O weight 1..10000 (default 100) | v2 `io.weight` (or `io.bfq.weight`), v1 `blkio.bfq.weight` |
/// | `io_latency` | latency target on the workdir device, e.g. `10ms` | v2 `io.latency` |
/// | `pids` | max processes and threads | `pids.max` |
/// | `io_read_bps`, `io_write_bps` | bytes/s on the workdir device, e.g. `50M` | blkio throttle / `io.max` |
/// | `io_read_iops`, `io_write_iops` | operations/s on the workdir device | blkio throttle / `io.max` |
/// | `net_rate` | both directions, e.g. `100mbit` | tc tbf on the tenant's veth pair |
/// | `net_egress`, `net_ingress` | one direction | tc tbf |
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Limits {
    /// CPU quota, in CPUs (1.5 = one and a half CPUs of time per period).
    pub cpus: Option<f64>,
    /// CPU weight relative to other tenants.
    pub cpu_weight: Option<CpuWeight>,
    /// CPUs the tenant may run on.
    pub cpuset: Option<CpuList>,
    /// Memory nodes the tenant may allocate from.
    pub mems: Option<CpuList>,
    /// Memory limit in bytes (swap is kept off for the tenant).
    pub memory: Option<u64>,
    /// Maximum number of processes and threads.
    pub pids: Option<u64>,
    /// Read bandwidth on the workdir's block device, bytes/s.
    pub io_read_bps: Option<u64>,
    /// Write bandwidth on the workdir's block device, bytes/s.
    pub io_write_bps: Option<u64>,
    /// Read operations per second on the workdir's block device.
    pub io_read_iops: Option<u64>,
    /// Write operations per second on the workdir's block device.
    pub io_write_iops: Option<u64>,
    /// Memory protected from reclaim whatever the pressure, bytes (v2 `memory.min`).
    pub memory_min: Option<u64>,
    /// Memory protected from reclaim unless no unprotected memory is left, bytes (v2
    /// `memory.low`).
    pub memory_low: Option<u64>,
    /// Memory above which the tenant is throttled and reclaimed, bytes (v2 `memory.high`).
    pub memory_high: Option<u64>,
    /// Swap the tenant may use, bytes (v2 `memory.swap.max`). Unset with `memory` set means
    /// no swap.
    pub swap: Option<u64>,
    /// CPU time a quota may accumulate and spend in a later period, microseconds (v2
    /// `cpu.max.burst`).
    pub cpu_burst: Option<u64>,
    /// The cpuset partition the tenant's CPUs form (v2 `cpuset.cpus.partition`).
    pub cpuset_partition: Option<CpusetPartition>,
    /// I/O weight relative to other tenants, 1..=10000, default 100 (v2 `io.weight`).
    pub io_weight: Option<u64>,
    /// I/O latency target on the workdir's block device, microseconds (v2 `io.latency`).
    pub io_latency: Option<u64>,
    /// Rate of traffic leaving the tenant's network namespace, bits/s.
    pub net_egress: Option<u64>,
    /// Rate of traffic entering the tenant's network namespace, bits/s.
    pub net_ingress: Option<u64>,
}

impl Limits {
    /// No limits at all.
    pub fn none() -> Limits {
        Limits::default()
    }

    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        *self == Limits::default()
    }

    /// Parses a comma-separated `key=value` list. Commas inside CPU lists are allowed
    /// (`cpuset=0,2,memory=1G`). Only syntax and ranges are checked here; see
    /// [`Limits::validate`] for the host.
    pub fn parse(s: &str) -> Result<Limits, LimitError> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for item in s.split(',') {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            match item.split_once('=') {
                Some((k, v)) => pairs.push((k.trim().to_string(), v.trim().to_string())),
                None => match pairs.last_mut() {
                    // `cpuset=0,2`: the `2` continues the list of the previous key.
                    Some((k, v)) if k == "cpuset" || k == "mems" => {
                        v.push(',');
                        v.push_str(item);
                    }
                    _ => {
                        return Err(LimitError::NotKeyValue {
                            item: item.to_string(),
                        })
                    }
                },
            }
        }
        Limits::from_pairs(pairs)
    }

    /// Builds limits from key/value pairs (as found in a TOML table, values as strings).
    pub fn from_pairs<K, V>(pairs: impl IntoIterator<Item = (K, V)>) -> Result<Limits, LimitError>
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut l = Limits::default();
        let mut seen: BTreeSet<&'static str> = BTreeSet::new();
        for (k, v) in pairs {
            let (k, v) = (k.as_ref().trim(), v.as_ref().trim());
            let spec = key_spec(k).ok_or_else(|| LimitError::UnknownKey {
                key: k.to_string(),
                suggestion: nearest_key(k),
            })?;
            let key = spec.key;
            if !seen.insert(key) {
                return Err(LimitError::Duplicate { key: key.into() });
            }
            if v.is_empty() {
                return Err(bad(key, v, "the value is empty"));
            }
            l.set(key, v)?;
        }
        if seen.contains("shares") && seen.contains("weight") {
            return Err(LimitError::Conflict {
                first: "shares",
                second: "weight",
                what: "the CPU weight",
            });
        }
        if seen.contains("net_rate")
            && (seen.contains("net_egress") || seen.contains("net_ingress"))
        {
            let second = if seen.contains("net_egress") {
                "net_egress"
            } else {
                "net_ingress"
            };
            return Err(LimitError::Conflict {
                first: "net_rate",
                second,
                what: "the network rate",
            });
        }
        l.check_pairs()?;
        Ok(l)
    }

    /// The rules between keys: the memory protections nest, a burst needs a quota no
    /// smaller than itself, a partition needs a cpuset. `swap=0` beside `memory` is what
    /// `memory` means already and is kept as unset.
    fn check_pairs(&mut self) -> Result<(), LimitError> {
        if self.memory.is_some() && self.swap == Some(0) {
            self.swap = None;
        }
        let order = [
            ("memory_min", self.memory_min),
            ("memory_low", self.memory_low),
            ("memory_high", self.memory_high),
            ("memory", self.memory),
        ];
        for (i, (lower, lo)) in order.iter().enumerate() {
            for (upper, hi) in &order[i + 1..] {
                if let (Some(lo), Some(hi)) = (lo, hi) {
                    if lo > hi {
                        return Err(LimitError::Order {
                            lower,
                            lower_value: format_size_exact(*lo),
                            upper,
                            upper_value: format_size_exact(*hi),
                            rule: "the kernel's memory bounds nest as memory_min <= memory_low \
                                   <= memory_high <= memory"
                                .into(),
                        });
                    }
                }
            }
        }
        if let Some(burst) = self.cpu_burst {
            let Some(cpus) = self.cpus else {
                return Err(LimitError::Requires {
                    key: "cpu_burst",
                    needs: "cpus",
                    why: "a burst lets a CPU quota save unused time, and without `cpus` there \
                          is no quota",
                    example: "cpus=1,cpu_burst=20ms",
                });
            };
            let quota = ((cpus * CPU_PERIOD_US as f64).round() as u64).max(1000);
            if burst > quota {
                return Err(LimitError::Order {
                    lower: "cpu_burst",
                    lower_value: format_micros(burst),
                    upper: "cpus",
                    upper_value: format_cpus(cpus),
                    rule: format!(
                        "the kernel takes a burst of at most one period's quota ({} per {} \
                         period)",
                        format_micros(quota),
                        format_micros(CPU_PERIOD_US)
                    ),
                });
            }
        }
        if self.cpuset_partition.is_some() && self.cpuset.is_none() {
            return Err(LimitError::Requires {
                key: "cpuset_partition",
                needs: "cpuset",
                why: "a partition is made of the tenant's own CPUs",
                example: "cpuset=2-3,cpuset_partition=root",
            });
        }
        Ok(())
    }

    fn set(&mut self, key: &'static str, v: &str) -> Result<(), LimitError> {
        match key {
            "cpus" => {
                let x: f64 = v.parse().map_err(|_| bad(key, v, "not a number of CPUs"))?;
                if !x.is_finite() || x < 0.01 {
                    return Err(bad(key, v, "must be at least 0.01"));
                }
                if x > 4096.0 {
                    return Err(bad(key, v, "must be at most 4096"));
                }
                self.cpus = Some(x);
            }
            "shares" => {
                self.cpu_weight = Some(CpuWeight::Shares(parse_int(key, v, 2, 262_144)?));
            }
            "weight" => {
                self.cpu_weight = Some(CpuWeight::Weight(parse_int(key, v, 1, 10_000)?));
            }
            "cpuset" | "mems" => {
                let list = CpuList::parse(v).map_err(|p| bad(key, v, p))?;
                if list.is_empty() {
                    return Err(bad(key, v, "the list is empty"));
                }
                if key == "cpuset" {
                    self.cpuset = Some(list);
                } else {
                    self.mems = Some(list);
                }
            }
            "memory" => {
                let n = parse_size(v).map_err(|e| bad(key, v, e.problem.to_string()))?;
                if n < 4 * MIB {
                    return Err(bad(key, v, "is below 4M, too small to start a process"));
                }
                self.memory = Some(n);
            }
            "memory_min" | "memory_low" | "memory_high" | "swap" => {
                let n = parse_size(v).map_err(|e| bad(key, v, e.problem.to_string()))?;
                let slot = match key {
                    "memory_min" => &mut self.memory_min,
                    "memory_low" => &mut self.memory_low,
                    "memory_high" => &mut self.memory_high,
                    _ => &mut self.swap,
                };
                if key == "memory_high" && n < 4 * MIB {
                    return Err(bad(key, v, "is below 4M, too small to start a process"));
                }
                if n == 0 && key != "swap" {
                    return Err(bad(
                        key,
                        v,
                        "must be above 0 (0 is the kernel's default; remove the key instead)",
                    ));
                }
                *slot = Some(n);
            }
            "cpu_burst" | "io_latency" => {
                let n = parse_micros(v).map_err(|p| bad(key, v, p))?;
                if n == 0 {
                    return Err(bad(key, v, "must be above 0; remove the key instead"));
                }
                if key == "cpu_burst" {
                    self.cpu_burst = Some(n);
                } else {
                    if n > 1_000_000_000 {
                        return Err(bad(key, v, "must be at most 1000s"));
                    }
                    self.io_latency = Some(n);
                }
            }
            "cpuset_partition" => {
                self.cpuset_partition = Some(match v.to_ascii_lowercase().as_str() {
                    "root" => CpusetPartition::Root,
                    "isolated" => CpusetPartition::Isolated,
                    _ => return Err(bad(key, v, "must be `root` or `isolated`")),
                });
            }
            "io_weight" => self.io_weight = Some(parse_int(key, v, 1, 10_000)?),
            "pids" => self.pids = Some(parse_int(key, v, 1, 4_194_304)?),
            "io_read_bps" | "io_write_bps" => {
                let n = parse_size(v).map_err(|e| bad(key, v, e.problem.to_string()))?;
                if n == 0 {
                    return Err(bad(key, v, "must be above 0"));
                }
                if key == "io_read_bps" {
                    self.io_read_bps = Some(n);
                } else {
                    self.io_write_bps = Some(n);
                }
            }
            "io_read_iops" => self.io_read_iops = Some(parse_int(key, v, 1, u32::MAX as u64)?),
            "io_write_iops" => self.io_write_iops = Some(parse_int(key, v, 1, u32::MAX as u64)?),
            "net_rate" | "net_egress" | "net_ingress" => {
                let r = parse_rate(v).map_err(|p| bad(key, v, p))?;
                if r < 64_000 {
                    return Err(bad(key, v, "is below 64kbit, too slow for a tbf shaper"));
                }
                if key != "net_ingress" {
                    self.net_egress = Some(r);
                }
                if key != "net_egress" {
                    self.net_ingress = Some(r);
                }
            }
            _ => unreachable!("key_spec returned an unhandled key {key}"),
        }
        Ok(())
    }

    /// Checks the limits against this host: CPUs and nodes in `cpuset`/`mems` must be online,
    /// `cpus` may not exceed the CPUs available to the tenant, `memory` may not exceed RAM.
    pub fn validate(&self, host: &HostInfo) -> Result<(), LimitError> {
        if let Some(set) = &self.cpuset {
            let missing = set.missing_from(&host.cpus);
            if !missing.is_empty() {
                return Err(LimitError::NotOnHost {
                    key: "cpuset",
                    value: set.to_string(),
                    problem: format!(
                        "CPU {} is not online on this host (online CPUs: {})",
                        CpuList::from_cpus(missing),
                        host.cpus
                    ),
                    fix: format!("choose CPUs within {}", host.cpus),
                });
            }
        }
        if let Some(mems) = &self.mems {
            let missing = mems.missing_from(&host.mems);
            if !missing.is_empty() {
                return Err(LimitError::NotOnHost {
                    key: "mems",
                    value: mems.to_string(),
                    problem: format!(
                        "memory node {} is not online on this host (online nodes: {})",
                        CpuList::from_cpus(missing),
                        host.mems
                    ),
                    fix: format!("choose nodes within {}", host.mems),
                });
            }
        }
        if let Some(cpus) = self.cpus {
            let avail = self.cpuset.as_ref().map_or(host.cpus.len(), |s| s.len());
            if cpus > avail as f64 + 1e-9 {
                let within = if self.cpuset.is_some() {
                    "the CPUs of its cpuset"
                } else {
                    "the online CPUs of this host"
                };
                return Err(LimitError::NotOnHost {
                    key: "cpus",
                    value: format_cpus(cpus),
                    problem: format!("the tenant can use at most {avail} CPUs ({within})"),
                    fix: format!("use cpus={avail} or less, or remove the key"),
                });
            }
        }
        if let Some(mem) = self.memory {
            if host.memory_bytes > 0 && mem > host.memory_bytes {
                return Err(LimitError::NotOnHost {
                    key: "memory",
                    value: format_size_exact(mem),
                    problem: format!(
                        "exceeds this host's RAM ({})",
                        format_size(host.memory_bytes)
                    ),
                    fix: "use a smaller limit or remove the key".into(),
                });
            }
        }
        Ok(())
    }

    /// Limits for a tenant that runs aggressive workloads (fork bomb, memory hog, disk
    /// flood): keeps every limit the user set and fills in the missing containment limits:
    /// `pids` = [`SAFE_PIDS`], `memory` = 1/[`SAFE_MEMORY_DIVISOR`] of host RAM and
    /// `io_write_bps` = [`SAFE_IO_WRITE_BPS`] on the tenant's workdir device. Returns the new
    /// limits and, for the record, which defaults were filled in.
    pub fn with_safe_defaults(&self, host: &HostInfo) -> (Limits, Vec<String>) {
        let mut l = self.clone();
        let mut filled = Vec::new();
        if l.pids.is_none() {
            l.pids = Some(SAFE_PIDS);
            filled.push(format!("pids={SAFE_PIDS}"));
        }
        if l.memory.is_none() {
            let quarter = (host.memory_bytes / SAFE_MEMORY_DIVISOR).max(64 * MIB);
            // Round down to whole MiB so the value reads well and is page aligned.
            let m = quarter / MIB * MIB;
            l.memory = Some(m);
            filled.push(format!("memory={}", format_size_exact(m)));
        }
        if l.io_write_bps.is_none() {
            l.io_write_bps = Some(SAFE_IO_WRITE_BPS);
            filled.push(format!(
                "io_write_bps={}",
                format_size_exact(SAFE_IO_WRITE_BPS)
            ));
        }
        (l, filled)
    }

    /// Whether any block I/O limit is set.
    pub fn has_io(&self) -> bool {
        self.io_read_bps.is_some()
            || self.io_write_bps.is_some()
            || self.io_read_iops.is_some()
            || self.io_write_iops.is_some()
    }

    /// Whether a limit needs the block device of the tenant's workdir: the throttles and
    /// the latency target are per device.
    pub fn needs_device(&self) -> bool {
        self.has_io() || self.io_latency.is_some()
    }

    /// Whether any network rate is set.
    pub fn has_net(&self) -> bool {
        self.net_egress.is_some() || self.net_ingress.is_some()
    }

    /// Every limit that is set, by key: [`Limits::resource_keys`], then `net_egress` and
    /// `net_ingress` (`net_rate` sets both).
    pub fn keys_set(&self) -> Vec<&'static str> {
        let mut v = self.resource_keys();
        if self.net_egress.is_some() {
            v.push("net_egress");
        }
        if self.net_ingress.is_some() {
            v.push("net_ingress");
        }
        v
    }

    /// The limits that need a resource controller (everything but network rates).
    pub fn resource_keys(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.cpus.is_some() {
            v.push("cpus");
        }
        match self.cpu_weight {
            Some(CpuWeight::Shares(_)) => v.push("shares"),
            Some(CpuWeight::Weight(_)) => v.push("weight"),
            None => {}
        }
        for (set, k) in [
            (self.cpuset.is_some(), "cpuset"),
            (self.mems.is_some(), "mems"),
            (self.memory.is_some(), "memory"),
            (self.memory_min.is_some(), "memory_min"),
            (self.memory_low.is_some(), "memory_low"),
            (self.memory_high.is_some(), "memory_high"),
            (self.swap.is_some(), "swap"),
            (self.cpu_burst.is_some(), "cpu_burst"),
            (self.cpuset_partition.is_some(), "cpuset_partition"),
            (self.pids.is_some(), "pids"),
            (self.io_read_bps.is_some(), "io_read_bps"),
            (self.io_write_bps.is_some(), "io_write_bps"),
            (self.io_read_iops.is_some(), "io_read_iops"),
            (self.io_write_iops.is_some(), "io_write_iops"),
            (self.io_weight.is_some(), "io_weight"),
            (self.io_latency.is_some(), "io_latency"),
        ] {
            if set {
                v.push(k);
            }
        }
        v
    }
}

fn format_cpus(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl fmt::Display for Limits {
    /// The canonical `key=value` list, keys in [`LIMIT_KEYS`] order; parses back to the same
    /// limits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        if let Some(c) = self.cpus {
            parts.push(format!("cpus={}", format_cpus(c)));
        }
        if let Some(b) = self.cpu_burst {
            parts.push(format!("cpu_burst={}", format_micros(b)));
        }
        match self.cpu_weight {
            Some(CpuWeight::Shares(s)) => parts.push(format!("shares={s}")),
            Some(CpuWeight::Weight(w)) => parts.push(format!("weight={w}")),
            None => {}
        }
        if let Some(s) = &self.cpuset {
            parts.push(format!("cpuset={s}"));
        }
        if let Some(p) = self.cpuset_partition {
            parts.push(format!("cpuset_partition={p}"));
        }
        if let Some(s) = &self.mems {
            parts.push(format!("mems={s}"));
        }
        if let Some(m) = self.memory {
            parts.push(format!("memory={}", format_size_exact(m)));
        }
        for (k, v) in [
            ("memory_min", self.memory_min),
            ("memory_low", self.memory_low),
            ("memory_high", self.memory_high),
            ("swap", self.swap),
        ] {
            if let Some(v) = v {
                parts.push(format!("{k}={}", format_size_exact(v)));
            }
        }
        if let Some(p) = self.pids {
            parts.push(format!("pids={p}"));
        }
        if let Some(v) = self.io_read_bps {
            parts.push(format!("io_read_bps={}", format_size_exact(v)));
        }
        if let Some(v) = self.io_write_bps {
            parts.push(format!("io_write_bps={}", format_size_exact(v)));
        }
        if let Some(v) = self.io_read_iops {
            parts.push(format!("io_read_iops={v}"));
        }
        if let Some(v) = self.io_write_iops {
            parts.push(format!("io_write_iops={v}"));
        }
        if let Some(v) = self.io_weight {
            parts.push(format!("io_weight={v}"));
        }
        if let Some(v) = self.io_latency {
            parts.push(format!("io_latency={}", format_micros(v)));
        }
        match (self.net_egress, self.net_ingress) {
            (Some(e), Some(i)) if e == i => parts.push(format!("net_rate={}", format_rate(e))),
            (e, i) => {
                if let Some(e) = e {
                    parts.push(format!("net_egress={}", format_rate(e)));
                }
                if let Some(i) = i {
                    parts.push(format!("net_ingress={}", format_rate(i)));
                }
            }
        }
        f.write_str(&parts.join(","))
    }
}

impl FromStr for Limits {
    type Err = LimitError;
    fn from_str(s: &str) -> Result<Limits, LimitError> {
        Limits::parse(s)
    }
}

impl Serialize for Limits {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Limits {
    /// Accepts either the string form (`"cpus=1,memory=1G"`) or a table
    /// (`{ cpus = 1, memory = "1G" }`).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Limits, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Limits;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a limit list like \"cpus=1,memory=1G\" or a table of limits")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Limits, E> {
                Limits::parse(v).map_err(E::custom)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Limits, A::Error> {
                let mut pairs = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Scalar>()? {
                    pairs.push((k, v.0));
                }
                Limits::from_pairs(pairs).map_err(de::Error::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A scalar table value (string, integer, float or bool) kept as text.
struct Scalar(String);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Scalar, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or a number")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> HostInfo {
        HostInfo {
            cpus: CpuList::parse("0-1").unwrap(),
            mems: CpuList::parse("0").unwrap(),
            memory_bytes: 24 * GIB,
        }
    }

    #[test]
    fn parses_every_key() {
        let l = Limits::parse(
            "cpus=1.5,shares=512,cpuset=0,2-3,mems=0,memory=1G,pids=64,io_read_bps=10M,\
             io_write_bps=20M,io_read_iops=100,io_write_iops=200,net_rate=100mbit",
        )
        .unwrap();
        assert_eq!(l.cpus, Some(1.5));
        assert_eq!(l.cpu_weight, Some(CpuWeight::Shares(512)));
        assert_eq!(l.cpuset.as_ref().unwrap().to_string(), "0,2-3");
        assert_eq!(l.memory, Some(GIB));
        assert_eq!(l.pids, Some(64));
        assert_eq!(l.io_read_bps, Some(10 * MIB));
        assert_eq!(l.io_write_bps, Some(20 * MIB));
        assert_eq!(l.io_read_iops, Some(100));
        assert_eq!(l.io_write_iops, Some(200));
        assert_eq!(l.net_egress, Some(100_000_000));
        assert_eq!(l.net_ingress, Some(100_000_000));
    }

    #[test]
    fn display_round_trips() {
        for s in [
            "",
            "cpus=1.5,weight=50,cpuset=0-1,memory=1536M,pids=64",
            "io_write_bps=1G,io_read_iops=7,net_egress=5mbit,net_ingress=1gbit",
            "mems=0,net_rate=64kbit,memory=5000000",
        ] {
            let l = Limits::parse(s).unwrap();
            let again = Limits::parse(&l.to_string()).unwrap();
            assert_eq!(l, again, "{s} -> {l}");
        }
        assert_eq!(
            Limits::parse("memory=1.5G,cpus=0.25").unwrap().to_string(),
            "cpus=0.25,memory=1536M"
        );
    }

    #[test]
    fn unknown_key_suggests_nearest() {
        let e = Limits::parse("memroy=1G").unwrap_err();
        assert_eq!(
            e,
            LimitError::UnknownKey {
                key: "memroy".into(),
                suggestion: Some("memory")
            }
        );
        let msg = e.to_string();
        assert!(
            msg.contains("`memroy`") && msg.contains("did you mean `memory`"),
            "{msg}"
        );
        assert_eq!(nearest_key("cpu"), Some("cpus"));
        assert_eq!(nearest_key("io_write_bp"), Some("io_write_bps"));
        assert_eq!(nearest_key("zzzzzz"), None);
    }

    #[test]
    fn malformed_values_name_key_value_and_fix() {
        let e = Limits::parse("memory=12X").unwrap_err().to_string();
        assert!(e.contains("memory=12X") && e.contains("memory=512M"), "{e}");
        let e = Limits::parse("cpuset=0-x").unwrap_err().to_string();
        assert!(e.contains("cpuset=0-x") && e.contains("cpuset=0-1"), "{e}");
        let e = Limits::parse("cpuset=3-1").unwrap_err().to_string();
        assert!(e.contains("backwards"), "{e}");
        let e = Limits::parse("cpus=0").unwrap_err().to_string();
        assert!(e.contains("at least 0.01"), "{e}");
        let e = Limits::parse("net_rate=10mbps").unwrap_err().to_string();
        assert!(e.contains("ambiguous") && e.contains("100mbit"), "{e}");
        let e = Limits::parse("pids=-1").unwrap_err().to_string();
        assert!(e.contains("pids=-1"), "{e}");
        assert!(matches!(
            Limits::parse("pids").unwrap_err(),
            LimitError::NotKeyValue { .. }
        ));
        assert!(matches!(
            Limits::parse("pids=1,pids=2").unwrap_err(),
            LimitError::Duplicate { .. }
        ));
        assert!(matches!(
            Limits::parse("shares=100,weight=10").unwrap_err(),
            LimitError::Conflict { .. }
        ));
        assert!(matches!(
            Limits::parse("net_rate=1mbit,net_egress=2mbit").unwrap_err(),
            LimitError::Conflict { .. }
        ));
    }

    #[test]
    fn host_validation() {
        let h = host();
        Limits::parse("cpuset=0-1,cpus=2,memory=1G")
            .unwrap()
            .validate(&h)
            .unwrap();
        let e = Limits::parse("cpuset=0-3")
            .unwrap()
            .validate(&h)
            .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("cpuset=0-3") && msg.contains("CPU 2-3") && msg.contains("within 0-1"),
            "{msg}"
        );
        let e = Limits::parse("cpus=1.5,cpuset=1")
            .unwrap()
            .validate(&h)
            .unwrap_err();
        assert!(e.to_string().contains("at most 1 CPUs"), "{e}");
        let e = Limits::parse("mems=1").unwrap().validate(&h).unwrap_err();
        assert!(e.to_string().contains("node 1"), "{e}");
        let e = Limits::parse("memory=100G")
            .unwrap()
            .validate(&h)
            .unwrap_err();
        assert!(e.to_string().contains("RAM"), "{e}");
    }

    #[test]
    fn keys_set_name_every_limit_set_and_both_directions_of_a_net_rate() {
        let l = Limits::parse("net_rate=100mbit,memory_min=64M,pids=10").unwrap();
        assert_eq!(
            l.keys_set(),
            ["memory_min", "pids", "net_egress", "net_ingress"]
        );
        let l = Limits::parse("net_ingress=1mbit").unwrap();
        assert_eq!(l.keys_set(), ["net_ingress"]);
        assert!(Limits::default().keys_set().is_empty());
    }

    #[test]
    fn safe_defaults_fill_only_missing() {
        let h = host();
        let (l, filled) = Limits::parse("pids=32").unwrap().with_safe_defaults(&h);
        assert_eq!(l.pids, Some(32));
        assert_eq!(l.memory, Some(6 * GIB));
        assert_eq!(l.io_write_bps, Some(SAFE_IO_WRITE_BPS));
        assert_eq!(
            filled,
            vec!["memory=6G".to_string(), "io_write_bps=1G".into()]
        );
        let (l, _) = Limits::none().with_safe_defaults(&h);
        assert_eq!(l.pids, Some(SAFE_PIDS));
    }

    #[test]
    fn weight_conversion_keeps_defaults() {
        assert_eq!(CpuWeight::Shares(1024).as_weight(), 100);
        assert_eq!(CpuWeight::Weight(100).as_shares(), 1024);
        assert_eq!(CpuWeight::Shares(2).as_weight(), 1);
        assert_eq!(CpuWeight::Weight(10_000).as_shares(), 102_400);
        assert_eq!(CpuWeight::Shares(262_144).as_weight(), 10_000);
    }

    #[test]
    fn sizes_and_rates() {
        let memory = |v: &str| v.parse::<Limits>().map(|l| l.memory);
        assert_eq!(memory("memory=64M").unwrap(), Some(64 * MIB));
        assert_eq!(memory("memory=64MiB").unwrap(), Some(64 * MIB));
        assert_eq!(memory("memory=2g").unwrap(), Some(2 * GIB));
        assert_eq!(memory("memory=4194304").unwrap(), Some(4 * MIB));
        assert_eq!(
            memory("memory=1Q").unwrap_err().to_string(),
            "limit `memory=1Q`: unknown size unit `q` (use K, M, G or T); write e.g. `memory=512M`"
        );
        assert!(memory("memory=G").is_err());
        assert_eq!(
            "memory=1536M".parse::<Limits>().unwrap().to_string(),
            "memory=1536M"
        );
        assert_eq!(parse_rate("1.5mbit").unwrap(), 1_500_000);
        assert_eq!(format_rate(1_500_000), "1500kbit");
    }

    #[test]
    fn deserializes_string_or_table() {
        let l: Limits = serde_json::from_str(r#""cpus=1,memory=1G""#).unwrap();
        assert_eq!(l.memory, Some(GIB));
        let l: Limits =
            serde_json::from_str(r#"{"cpus": 0.5, "pids": 64, "memory": "64M"}"#).unwrap();
        assert_eq!(
            (l.cpus, l.pids, l.memory),
            (Some(0.5), Some(64), Some(64 * MIB))
        );
        let e = serde_json::from_str::<Limits>(r#"{"cpu": 1}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean `cpus`"), "{e}");
        assert_eq!(
            serde_json::to_string(&l).unwrap(),
            r#""cpus=0.5,memory=64M,pids=64""#
        );
    }

    #[test]
    fn the_v2_knobs_parse_display_and_round_trip() {
        let l = Limits::parse(
            "cpus=1,cpu_burst=20ms,cpuset=2-3,cpuset_partition=isolated,memory=1G,\
             memory_min=64M,memory_low=128M,memory_high=768M,swap=256M,io_weight=300,\
             io_latency=2500us",
        )
        .unwrap();
        assert_eq!(l.cpu_burst, Some(20_000));
        assert_eq!(l.cpuset_partition, Some(CpusetPartition::Isolated));
        assert_eq!(
            (l.memory_min, l.memory_low, l.memory_high, l.swap),
            (
                Some(64 * MIB),
                Some(128 * MIB),
                Some(768 * MIB),
                Some(256 * MIB)
            )
        );
        assert_eq!((l.io_weight, l.io_latency), (Some(300), Some(2500)));
        assert_eq!(
            l.to_string(),
            "cpus=1,cpu_burst=20ms,cpuset=2-3,cpuset_partition=isolated,memory=1G,\
             memory_min=64M,memory_low=128M,memory_high=768M,swap=256M,io_weight=300,\
             io_latency=2500us"
        );
        assert_eq!(Limits::parse(&l.to_string()).unwrap(), l);
        let back: Limits = serde_json::from_str(&serde_json::to_string(&l).unwrap()).unwrap();
        assert_eq!(back, l);
        let t: Limits = serde_json::from_str(
            r#"{"memory_low": "50M", "io_weight": 50, "cpus": 0.5, "cpu_burst": 1000}"#,
        )
        .unwrap();
        assert_eq!(
            t.to_string(),
            "cpus=0.5,cpu_burst=1ms,memory_low=50M,io_weight=50"
        );
        for k in [
            "memory_min",
            "memory_low",
            "memory_high",
            "swap",
            "cpu_burst",
            "cpuset_partition",
            "io_weight",
            "io_latency",
        ] {
            assert!(
                l.resource_keys().contains(&k),
                "{k} needs its controller checked"
            );
        }
        assert!(Limits::parse("io_latency=1ms").unwrap().needs_device());
        assert!(!Limits::parse("io_weight=10").unwrap().needs_device());
    }

    #[test]
    fn swap_zero_beside_memory_is_what_memory_means() {
        let l = Limits::parse("memory=1G,swap=0").unwrap();
        assert_eq!(l.swap, None);
        assert_eq!(l.to_string(), "memory=1G");
        let alone = Limits::parse("swap=0").unwrap();
        assert_eq!(alone.swap, Some(0));
        assert_eq!(alone.to_string(), "swap=0");
    }

    #[test]
    fn memory_bounds_out_of_order_name_both_keys() {
        let e = Limits::parse("memory_low=512M,memory_high=256M").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("limit `memory_low=512M` is above `memory_high=256M`")
                && msg.contains("memory_min <= memory_low <= memory_high <= memory")
                && msg.ends_with("lower `memory_low` or raise `memory_high`"),
            "{msg}"
        );
        let e = Limits::parse("memory=1G,memory_min=2G").unwrap_err();
        assert!(
            matches!(
                &e,
                LimitError::Order {
                    lower: "memory_min",
                    upper: "memory",
                    ..
                }
            ),
            "{e}"
        );
        // Equal values are in order.
        Limits::parse("memory_min=1G,memory_low=1G,memory_high=1G,memory=1G").unwrap();
    }

    #[test]
    fn burst_and_partition_need_their_base_key() {
        let e = Limits::parse("cpu_burst=10ms").unwrap_err().to_string();
        assert!(
            e.contains("`cpu_burst` needs `cpus`") && e.contains("cpus=1,cpu_burst=20ms"),
            "{e}"
        );
        let e = Limits::parse("cpus=0.5,cpu_burst=60ms")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`cpu_burst=60ms` is above `cpus=0.5`") && e.contains("50ms per 100ms"),
            "{e}"
        );
        Limits::parse("cpus=0.5,cpu_burst=50ms").unwrap();
        let e = Limits::parse("cpuset_partition=root")
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs `cpuset`"), "{e}");
        let e = Limits::parse("cpuset=1,cpuset_partition=member")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`root` or `isolated`"), "{e}");
    }

    #[test]
    fn knob_values_out_of_range_are_refused() {
        for (s, want) in [
            ("io_weight=0", "between 1 and 10000"),
            ("io_weight=10001", "between 1 and 10000"),
            ("memory_low=0", "must be above 0"),
            ("memory_high=1M", "below 4M"),
            ("io_latency=5min", "unknown duration unit `min`"),
            ("cpus=1,cpu_burst=0", "must be above 0"),
        ] {
            let e = Limits::parse(s).unwrap_err().to_string();
            assert!(e.contains(want), "{s}: {e}");
        }
        assert_eq!(parse_micros("1.5s").unwrap(), 1_500_000);
        assert_eq!(parse_micros("250").unwrap(), 250);
        assert_eq!(format_micros(1_500_000), "1500ms");
        assert_eq!(format_micros(7), "7us");
        assert_eq!(nearest_key("burst"), Some("cpu_burst"));
        assert_eq!(nearest_key("memory.low"), Some("memory_low"));
    }
}
