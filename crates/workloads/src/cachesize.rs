//! Usable cache sizes (being written: a measured latency-vs-size sweep replaces the sysfs
//! figures here).

use serde::{Deserialize, Serialize};

use crate::Env;

/// Cache sizes a workload should size its working set from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheSizes {
    /// L1 data cache, bytes.
    pub l1: u64,
    /// L2, bytes.
    pub l2: u64,
    /// Last-level cache as used for sizing, bytes.
    pub llc: u64,
    /// Last-level cache as sysfs reports it, bytes.
    pub llc_sysfs: Option<u64>,
    /// Last-level cache as measured, bytes (None until measured).
    pub llc_measured: Option<u64>,
}

/// Cache sizes for `env`.
pub fn cache_sizes(env: &Env) -> CacheSizes {
    let l1 = env.cache_size(1).unwrap_or(32 << 10);
    let l2 = env.cache_size(2).unwrap_or(1 << 20);
    let llc_sysfs = env.llc_size();
    CacheSizes {
        l1,
        l2,
        llc: llc_sysfs.unwrap_or(8 << 20).min(64 << 20),
        llc_sysfs,
        llc_measured: None,
    }
}
