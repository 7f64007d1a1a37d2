//! The few host facts that limits are checked against: online CPUs, memory nodes and RAM.

use std::fs;

use anyhow::{Context, Result};
use procfs::{Current, Meminfo};

use crate::limits::cpu::CpuList;

/// Online CPUs, memory nodes and RAM of this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostInfo {
    /// Online CPUs (`/sys/devices/system/cpu/online`).
    pub cpus: CpuList,
    /// Online memory nodes (`/sys/devices/system/node/online`, `0` when absent).
    pub mems: CpuList,
    /// Total RAM in bytes (`MemTotal` of `/proc/meminfo`).
    pub memory_bytes: u64,
}

impl HostInfo {
    /// Reads the host facts from sysfs and procfs.
    pub fn detect() -> Result<HostInfo> {
        let path = "/sys/devices/system/cpu/online";
        let text = fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
        let cpus = CpuList::parse(&text)
            .map_err(|e| anyhow::anyhow!("parsing {path} ({}): {e}", text.trim()))?;
        let mems = match fs::read_to_string("/sys/devices/system/node/online") {
            Ok(t) => CpuList::parse(&t).unwrap_or_else(|_| CpuList::from_cpus([0])),
            Err(_) => CpuList::from_cpus([0]),
        };
        let memory_bytes = Meminfo::current()
            .context("reading /proc/meminfo")?
            .mem_total;
        Ok(HostInfo {
            cpus,
            mems,
            memory_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_this_host() {
        let h = HostInfo::detect().unwrap();
        assert!(!h.cpus.is_empty());
        assert!(h.memory_bytes > 0);
    }
}
