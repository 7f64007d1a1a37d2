//! The CPU-side values of a limit list: the weight in either cgroup scale, the cpuset
//! partition and CPU (or memory node) lists.

use std::collections::BTreeSet;
use std::fmt;

/// The CPU weight of a tenant, in the scale the user wrote it in.
///
/// cgroup v1 uses `cpu.shares` (2..=262144, default 1024) and v2 uses `cpu.weight`
/// (1..=10000, default 100). They convert proportionally (1024 shares = weight 100), so the
/// default maps to the default on both versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuWeight {
    /// cgroup v1 scale, `shares=`.
    Shares(u64),
    /// cgroup v2 scale, `weight=`.
    Weight(u64),
}

impl CpuWeight {
    /// The value on the v1 `cpu.shares` scale.
    pub fn as_shares(self) -> u64 {
        match self {
            CpuWeight::Shares(s) => s,
            CpuWeight::Weight(w) => ((w * 1024 + 50) / 100).clamp(2, 262_144),
        }
    }

    /// The value on the v2 `cpu.weight` scale.
    pub fn as_weight(self) -> u64 {
        match self {
            CpuWeight::Weight(w) => w,
            CpuWeight::Shares(s) => ((s * 100 + 512) / 1024).clamp(1, 10_000),
        }
    }
}

/// What a tenant's cpuset becomes in the v2 cpuset controller (`cpuset.cpus.partition`).
///
/// A partition takes its CPUs away from the parent's other children: `root` keeps the
/// scheduler's load balancing on them, `isolated` turns it off (as `isolcpus=` does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpusetPartition {
    /// A partition root with load balancing.
    Root,
    /// A partition root without load balancing.
    Isolated,
}

impl CpusetPartition {
    /// The word written to `cpuset.cpus.partition`.
    pub fn as_str(self) -> &'static str {
        match self {
            CpusetPartition::Root => "root",
            CpusetPartition::Isolated => "isolated",
        }
    }
}

impl fmt::Display for CpusetPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A sorted set of CPU (or memory node) numbers, written in the kernel's list format
/// (`0-3,8,10-11`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuList(BTreeSet<u32>);

/// Largest CPU or node number accepted in a list.
const MAX_CPU: u32 = 4095;

impl CpuList {
    /// Parses the kernel list format. Empty input gives an empty list.
    pub fn parse(s: &str) -> Result<CpuList, String> {
        let mut set = BTreeSet::new();
        let s = s.trim();
        if s.is_empty() {
            return Ok(CpuList(set));
        }
        for part in s.split(',') {
            let part = part.trim();
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (parse_cpu(a)?, parse_cpu(b)?),
                None => {
                    let c = parse_cpu(part)?;
                    (c, c)
                }
            };
            if lo > hi {
                return Err(format!("range `{part}` goes backwards"));
            }
            set.extend(lo..=hi);
        }
        Ok(CpuList(set))
    }

    /// A list holding exactly these numbers.
    pub fn from_cpus(cpus: impl IntoIterator<Item = u32>) -> CpuList {
        CpuList(cpus.into_iter().collect())
    }

    /// The numbers, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }

    /// How many numbers the list holds.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `n` is in the list.
    pub fn contains(&self, n: u32) -> bool {
        self.0.contains(&n)
    }

    /// Numbers of `self` that are not in `other`.
    pub fn missing_from(&self, other: &CpuList) -> Vec<u32> {
        self.0.difference(&other.0).copied().collect()
    }
}

fn parse_cpu(s: &str) -> Result<u32, String> {
    let s = s.trim();
    let n: u32 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a CPU number"))?;
    if n > MAX_CPU {
        return Err(format!("CPU number {n} is larger than {MAX_CPU}"));
    }
    Ok(n)
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut iter = self.0.iter().copied().peekable();
        while let Some(start) = iter.next() {
            let mut end = start;
            while iter.peek() == Some(&(end + 1)) {
                end = iter.next().unwrap_or(end);
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}
