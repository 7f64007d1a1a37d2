//! Each tenant's pressure stalls and delivered I/O over a trial: the engine asks every
//! tenant for its usage counters just before and just after the measurement, and records
//! what changed as shares of the interval and rates per second (docs/scenario.md,
//! "Pressure stalls and delivered I/O per tenant": pressure-stall information where the
//! kernel has it).

use std::time::Duration;

use isobench_platform::{Usage, UsageRates};
use isobench_store::{StallRecord, TenantUsageRecord};

use super::Engine;

/// Every tenant's usage counters at one moment, in slot order.
pub(super) struct UsageMark {
    at: Duration,
    tenants: Vec<Option<Usage>>,
}

impl Engine<'_> {
    /// Asks each tenant for its counters now.
    pub(super) fn usage_mark(&mut self) -> UsageMark {
        let tenants = self.slots.iter_mut().map(|s| s.driver.usage()).collect();
        UsageMark {
            at: self.clock.now(),
            tenants,
        }
    }

    /// What each tenant went through between two marks, for the trial's record.
    pub(super) fn tenant_usage(
        &self,
        before: &UsageMark,
        after: &UsageMark,
    ) -> Vec<TenantUsageRecord> {
        let secs = after.at.saturating_sub(before.at).as_secs_f64();
        self.slots
            .iter()
            .zip(before.tenants.iter().zip(&after.tenants))
            .filter_map(|(slot, pair)| match pair {
                (Some(b), Some(a)) => usage_record(&slot.name, &a.rates_since(b, secs)),
                _ => None,
            })
            .collect()
    }
}

/// A tenant's rates as the store records them; `None` when the tenant has none of these
/// counters (a platform without cgroups) or the interval was empty.
pub(super) fn usage_record(tenant: &str, r: &UsageRates) -> Option<TenantUsageRecord> {
    let stall = |s: Option<isobench_platform::noise::StallShare>| {
        s.map(|s| StallRecord {
            some: s.some,
            full: s.full,
        })
    };
    let u = TenantUsageRecord {
        tenant: tenant.to_string(),
        interval_s: r.interval_s,
        cpu: stall(r.pressure.cpu),
        memory: stall(r.pressure.memory),
        io: stall(r.pressure.io),
        read_bytes_per_s: r.read_bytes_per_s,
        write_bytes_per_s: r.write_bytes_per_s,
        read_ops_per_s: r.read_ops_per_s,
        write_ops_per_s: r.write_ops_per_s,
    };
    let any = u.stalls().iter().any(|(_, s)| s.is_some())
        || [
            u.read_bytes_per_s,
            u.write_bytes_per_s,
            u.read_ops_per_s,
            u.write_ops_per_s,
        ]
        .iter()
        .any(Option::is_some);
    (any && r.interval_s > 0.0).then_some(u)
}

#[cfg(test)]
mod tests {
    use isobench_platform::noise::{Pressure, Stall};

    use super::*;

    #[test]
    fn a_tenant_without_counters_has_no_record_and_one_without_pressure_keeps_none() {
        let none = Usage::default();
        assert_eq!(usage_record("t", &none.rates_since(&none, 1.0)), None);

        // cgroup v1: block I/O counted, no pressure: the record says not available.
        let b = Usage {
            io_write_bytes: Some(0),
            ..Usage::default()
        };
        let a = Usage {
            io_write_bytes: Some(2_000),
            ..Usage::default()
        };
        let r = usage_record("agg", &a.rates_since(&b, 2.0)).unwrap();
        assert_eq!(r.tenant, "agg");
        assert_eq!(r.write_bytes_per_s, Some(1_000.0));
        assert_eq!((r.cpu, r.memory, r.io), (None, None, None));

        // cgroup v2: stalls as shares of the interval.
        let p = |us| Pressure {
            memory: Some(Stall {
                some_us: us,
                full_us: Some(us / 2),
            }),
            ..Pressure::default()
        };
        let b = Usage {
            pressure: p(0),
            ..Usage::default()
        };
        let a = Usage {
            pressure: p(500_000),
            ..Usage::default()
        };
        let r = usage_record("victim", &a.rates_since(&b, 2.0)).unwrap();
        assert_eq!(
            r.memory,
            Some(StallRecord {
                some: 0.25,
                full: Some(0.125)
            })
        );
        assert_eq!(r.read_bytes_per_s, None);
        // An empty interval records nothing.
        assert_eq!(usage_record("victim", &a.rates_since(&b, 0.0)), None);
    }
}
