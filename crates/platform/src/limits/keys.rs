//! The accepted limit keys, with an example each, and the nearest key to a typo.

/// One accepted limit key, with an example and what it does.
#[derive(Debug, Clone, Copy)]
pub struct LimitKey {
    /// The key as written.
    pub key: &'static str,
    /// A valid example.
    pub example: &'static str,
    /// One-line description.
    pub help: &'static str,
}

/// Every accepted limit key, in canonical order.
pub const LIMIT_KEYS: &[LimitKey] = &[
    LimitKey {
        key: "cpus",
        example: "cpus=1.5",
        help: "CPU quota in CPUs",
    },
    LimitKey {
        key: "cpu_burst",
        example: "cpu_burst=20ms",
        help: "CPU time a quota may save and spend later (us, ms or s; needs cpus)",
    },
    LimitKey {
        key: "shares",
        example: "shares=512",
        help: "CPU weight, cgroup v1 scale 2..262144 (default 1024)",
    },
    LimitKey {
        key: "weight",
        example: "weight=50",
        help: "CPU weight, cgroup v2 scale 1..10000 (default 100)",
    },
    LimitKey {
        key: "cpuset",
        example: "cpuset=0-1",
        help: "CPUs the tenant may run on",
    },
    LimitKey {
        key: "cpuset_partition",
        example: "cpuset_partition=root",
        help: "make the cpuset a partition, root or isolated (cgroup v2; needs cpuset)",
    },
    LimitKey {
        key: "mems",
        example: "mems=0",
        help: "memory nodes the tenant may use",
    },
    LimitKey {
        key: "memory",
        example: "memory=512M",
        help: "memory limit, binary units K/M/G/T, swap off",
    },
    LimitKey {
        key: "memory_min",
        example: "memory_min=256M",
        help: "memory never reclaimed from the tenant (cgroup v2 memory.min)",
    },
    LimitKey {
        key: "memory_low",
        example: "memory_low=256M",
        help: "memory reclaimed only when nothing unprotected is left (memory.low)",
    },
    LimitKey {
        key: "memory_high",
        example: "memory_high=1G",
        help: "memory above which the tenant is throttled and reclaimed (memory.high)",
    },
    LimitKey {
        key: "swap",
        example: "swap=256M",
        help: "swap the tenant may use (memory.swap.max; default with memory: none)",
    },
    LimitKey {
        key: "pids",
        example: "pids=64",
        help: "maximum processes and threads",
    },
    LimitKey {
        key: "io_read_bps",
        example: "io_read_bps=50M",
        help: "read bytes/s on the workdir device",
    },
    LimitKey {
        key: "io_write_bps",
        example: "io_write_bps=50M",
        help: "write bytes/s on the workdir device",
    },
    LimitKey {
        key: "io_read_iops",
        example: "io_read_iops=1000",
        help: "read operations/s on the workdir device",
    },
    LimitKey {
        key: "io_write_iops",
        example: "io_write_iops=1000",
        help: "write operations/s on the workdir device",
    },
    LimitKey {
        key: "io_weight",
        example: "io_weight=200",
        help: "I/O weight 1..10000 (default 100), cgroup v2 io.weight",
    },
    LimitKey {
        key: "io_latency",
        example: "io_latency=10ms",
        help: "I/O latency target on the workdir device (cgroup v2 io.latency)",
    },
    LimitKey {
        key: "net_rate",
        example: "net_rate=100mbit",
        help: "network rate both ways (kbit/mbit/gbit)",
    },
    LimitKey {
        key: "net_egress",
        example: "net_egress=100mbit",
        help: "network rate out of the tenant",
    },
    LimitKey {
        key: "net_ingress",
        example: "net_ingress=100mbit",
        help: "network rate into the tenant",
    },
];

pub(super) fn key_names() -> String {
    LIMIT_KEYS
        .iter()
        .map(|k| k.key)
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn key_spec(key: &str) -> Option<&'static LimitKey> {
    LIMIT_KEYS.iter().find(|k| k.key == key)
}

/// The accepted key closest to `key`, if any is close enough to be a likely typo.
pub fn nearest_key(key: &str) -> Option<&'static str> {
    let key = key.to_ascii_lowercase();
    // A few words people naturally use for a key.
    let synonyms: &[(&str, &str)] = &[
        ("cpu", "cpus"),
        ("cpu_quota", "cpus"),
        ("quota", "cpus"),
        ("mem", "memory"),
        ("memory_limit", "memory"),
        ("ram", "memory"),
        ("cpus_set", "cpuset"),
        ("cpu_set", "cpuset"),
        ("pid", "pids"),
        ("pids_max", "pids"),
        ("cpu_shares", "shares"),
        ("cpu_weight", "weight"),
        ("rate", "net_rate"),
        ("burst", "cpu_burst"),
        ("partition", "cpuset_partition"),
        ("memory_swap", "swap"),
        ("swap_max", "swap"),
        ("blkio_weight", "io_weight"),
        ("bandwidth", "net_rate"),
    ];
    if let Some((_, k)) = synonyms.iter().find(|(s, _)| *s == key) {
        return Some(k);
    }
    LIMIT_KEYS
        .iter()
        .map(|k| (strsim::jaro_winkler(&key, k.key), k.key))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}
