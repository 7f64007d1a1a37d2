//! The few host facts that limits are checked against: online CPUs, memory nodes and RAM.

use std::fs;

use anyhow::{Context, Result};

use crate::limits::CpuList;

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
        let meminfo = fs::read_to_string("/proc/meminfo").context("reading /proc/meminfo")?;
        let memory_bytes = parse_memtotal(&meminfo).context("no MemTotal line in /proc/meminfo")?;
        Ok(HostInfo {
            cpus,
            mems,
            memory_bytes,
        })
    }
}

fn parse_memtotal(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memtotal() {
        assert_eq!(
            parse_memtotal("MemTotal:       24684372 kB\nMemFree: 1 kB\n"),
            Some(24684372 * 1024)
        );
    }

    #[test]
    fn detects_this_host() {
        let h = HostInfo::detect().unwrap();
        assert!(!h.cpus.is_empty());
        assert!(h.memory_bytes > 0);
    }
}
