//! A tenant's resource usage as its platform reads it back ([`Usage`]), and what it went
//! through between two readings ([`UsageRates`]).

use serde::Serialize;

use crate::noise::{pressure_share, Pressure, PressureShare};

/// Resource usage of a tenant, read back from the platform. `None` where the platform has
/// no such counter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// CPU time, nanoseconds.
    pub cpu_time_ns: Option<u64>,
    /// User CPU time, nanoseconds.
    pub cpu_user_ns: Option<u64>,
    /// System CPU time, nanoseconds.
    pub cpu_system_ns: Option<u64>,
    /// CFS periods with runnable tasks.
    pub cpu_periods: Option<u64>,
    /// Periods in which the quota ran out.
    pub cpu_throttled_periods: Option<u64>,
    /// Time throttled, nanoseconds.
    pub cpu_throttled_ns: Option<u64>,
    /// Memory in use now, bytes.
    pub memory_current: Option<u64>,
    /// Peak memory use, bytes.
    pub memory_peak: Option<u64>,
    /// Processes killed by the OOM killer inside the tenant.
    pub oom_kills: Option<u64>,
    /// Processes and threads now.
    pub pids_current: Option<u64>,
    /// Forks refused because of the pids limit.
    pub pids_limit_hits: Option<u64>,
    /// Bytes read from block devices.
    pub io_read_bytes: Option<u64>,
    /// Bytes written to block devices.
    pub io_write_bytes: Option<u64>,
    /// Read operations.
    pub io_read_ops: Option<u64>,
    /// Write operations.
    pub io_write_ops: Option<u64>,
    /// Pressure-stall counters of the tenant's own cgroup (`cpu.pressure`,
    /// `memory.pressure`, `io.pressure`): cgroup v2 on a kernel with PSI. Each resource is
    /// `None` where the platform has no per-tenant pressure (cgroup v1 has none), never zero.
    pub pressure: Pressure,
}

impl Usage {
    /// What the tenant went through between `before` and this reading, `interval_s` seconds
    /// of wall time apart: the share of the interval its tasks were stalled on each resource,
    /// and the I/O it was delivered, per second. A figure is `None` where either reading
    /// lacks its counter, or the interval is not a positive time; a counter that went
    /// backwards (a cgroup recreated) counts as zero.
    pub fn rates_since(&self, before: &Usage, interval_s: f64) -> UsageRates {
        if !(interval_s.is_finite() && interval_s > 0.0) {
            return UsageRates::default();
        }
        let rate = |b: Option<u64>, a: Option<u64>| Some(a?.saturating_sub(b?) as f64 / interval_s);
        UsageRates {
            interval_s,
            pressure: pressure_share(&before.pressure, &self.pressure, interval_s),
            read_bytes_per_s: rate(before.io_read_bytes, self.io_read_bytes),
            write_bytes_per_s: rate(before.io_write_bytes, self.io_write_bytes),
            read_ops_per_s: rate(before.io_read_ops, self.io_read_ops),
            write_ops_per_s: rate(before.io_write_ops, self.io_write_ops),
        }
    }
}

/// A tenant's pressure stalls and delivered I/O over an interval ([`Usage::rates_since`]).
/// `None` where not measured, never zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct UsageRates {
    /// Length of the interval, seconds.
    pub interval_s: f64,
    /// Shares of the interval the tenant's tasks were stalled (`some`: at least one task;
    /// `full`: every non-idle task at once), per resource.
    pub pressure: PressureShare,
    /// Bytes read from block devices, per second.
    pub read_bytes_per_s: Option<f64>,
    /// Bytes written to block devices, per second.
    pub write_bytes_per_s: Option<f64>,
    /// Read operations per second.
    pub read_ops_per_s: Option<f64>,
    /// Write operations per second.
    pub write_ops_per_s: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noise::{Stall, StallShare};

    fn stall(some_us: u64, full_us: Option<u64>) -> Option<Stall> {
        Some(Stall { some_us, full_us })
    }

    #[test]
    fn rates_over_a_trial_are_shares_of_its_wall_time_and_io_per_second() {
        let before = Usage {
            io_read_bytes: Some(1_000),
            io_write_bytes: Some(0),
            io_read_ops: Some(10),
            io_write_ops: Some(0),
            pressure: Pressure {
                cpu: stall(1_000_000, Some(0)),
                memory: stall(0, Some(0)),
                io: stall(50, None),
            },
            ..Usage::default()
        };
        let after = Usage {
            io_read_bytes: Some(4_001_000),
            io_write_bytes: Some(1 << 20),
            io_read_ops: Some(410),
            io_write_ops: Some(64),
            pressure: Pressure {
                cpu: stall(1_500_000, Some(100_000)),
                memory: stall(1_000_000, Some(400_000)),
                io: stall(2_000_050, None),
            },
            ..Usage::default()
        };
        let r = after.rates_since(&before, 2.0);
        assert_eq!(r.interval_s, 2.0);
        assert_eq!(
            r.pressure.cpu,
            Some(StallShare {
                some: 0.25,
                full: Some(0.05)
            })
        );
        assert_eq!(
            r.pressure.memory,
            Some(StallShare {
                some: 0.5,
                full: Some(0.2)
            })
        );
        // Stalled longer than the interval (counters read a little apart): at most all of it;
        // a file without a `full` line has no full share.
        assert_eq!(
            r.pressure.io,
            Some(StallShare {
                some: 1.0,
                full: None
            })
        );
        assert_eq!(r.read_bytes_per_s, Some(2_000_000.0));
        assert_eq!(r.write_bytes_per_s, Some(524_288.0));
        assert_eq!(r.read_ops_per_s, Some(200.0));
        assert_eq!(r.write_ops_per_s, Some(32.0));
        // Counters that went backwards (a cgroup recreated) count as zero.
        let back = before.rates_since(&after, 2.0);
        assert_eq!(back.read_bytes_per_s, Some(0.0));
        assert_eq!(back.pressure.cpu.map(|s| s.some), Some(0.0));
        // No interval, no rates.
        assert_eq!(after.rates_since(&before, 0.0), UsageRates::default());
    }

    /// cgroup v1 has no per-cgroup pressure files: the figures are not available, and must
    /// not read as "no stall".
    #[test]
    fn without_pressure_counters_the_shares_are_not_available_not_zero() {
        let v1 = Usage {
            io_read_bytes: Some(0),
            ..Usage::default()
        };
        let later = Usage {
            io_read_bytes: Some(300),
            ..Usage::default()
        };
        let r = later.rates_since(&v1, 3.0);
        assert_eq!(r.pressure, PressureShare::default());
        assert_eq!(r.pressure.cpu, None);
        assert_eq!(r.read_bytes_per_s, Some(100.0));
        assert_eq!(r.write_bytes_per_s, None, "no counter, no rate");
        // One reading without pressure (the file appeared later): still not available.
        let with = Usage {
            pressure: Pressure {
                cpu: stall(5, None),
                ..Pressure::default()
            },
            ..Usage::default()
        };
        assert_eq!(with.rates_since(&v1, 1.0).pressure.cpu, None);
    }
}
