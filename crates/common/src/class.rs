//! [`Class`]: the resource a workload measures or contends for.

use serde::{Deserialize, Serialize};

/// The kind of resource a workload measures or contends for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    /// CPU time.
    Cpu,
    /// Shared caches.
    Cache,
    /// Memory bandwidth, latency and capacity.
    Memory,
    /// Block I/O.
    Disk,
    /// Networking.
    Net,
    /// Process creation, scheduling and system calls.
    Process,
    /// Application-level workloads (HTTP).
    App,
}

impl Class {
    /// Lower-case name, as shown by `isobench list`.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Cpu => "cpu",
            Class::Cache => "cache",
            Class::Memory => "memory",
            Class::Disk => "disk",
            Class::Net => "net",
            Class::Process => "process",
            Class::App => "app",
        }
    }
}
