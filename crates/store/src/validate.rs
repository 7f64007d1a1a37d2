//! Checks of records before anything is written, so an error names the field at fault and a
//! refused record leaves nothing behind.

use std::collections::HashSet;

use crate::error::StoreError;
use crate::model::{TenantUsageRecord, Timeline, TrialRecord};

pub(crate) fn nonempty(what: &str, value: &str) -> Result<(), StoreError> {
    if value.trim().is_empty() {
        return Err(StoreError::InvalidRecord(format!("{what} is empty")));
    }
    Ok(())
}

/// Checks a trial before anything is written, so errors name the field at fault.
pub(crate) fn validate_trial(t: &TrialRecord) -> Result<(), String> {
    let at = |msg: String| format!("trial {} ({} in {}): {msg}", t.key, t.probe, t.tenant);
    if t.probe.trim().is_empty() || t.tenant.trim().is_empty() {
        return Err(at("probe and tenant names must not be empty".into()));
    }
    t.condition.validate().map_err(at)?;
    if let Some(reason) = t.status.reason() {
        if reason.trim().is_empty() {
            return Err(at(format!("status {} needs a reason", t.status.as_str())));
        }
    }
    let mut seen = HashSet::new();
    for s in &t.samples {
        if s.metric.trim().is_empty() || s.unit.trim().is_empty() {
            return Err(at("a sample has an empty metric name or unit".into()));
        }
        if !s.value.is_finite() {
            return Err(at(format!(
                "sample {} is {}; values must be finite",
                s.metric, s.value
            )));
        }
        if !seen.insert(s.metric.as_str()) {
            return Err(at(format!("metric {} appears twice", s.metric)));
        }
    }
    let mut seen = HashSet::new();
    for h in &t.histograms {
        if h.base64.is_empty() {
            return Err(at(format!("histogram of {} is empty", h.metric)));
        }
        if !seen.insert(h.metric.as_str()) {
            return Err(at(format!("histogram of {} appears twice", h.metric)));
        }
    }
    let mut seen = HashSet::new();
    for r in &t.stressor_reports {
        if r.intensity > 100 {
            return Err(at(format!(
                "stressor {} has intensity {} > 100",
                r.stressor, r.intensity
            )));
        }
        if !(r.ops.is_finite() && r.ops >= 0.0 && r.ops_per_sec.is_finite() && r.ops_per_sec >= 0.0)
        {
            return Err(at(format!(
                "stressor {} in {} reports ops {} and ops/s {}; both must be finite and >= 0",
                r.stressor, r.tenant, r.ops, r.ops_per_sec
            )));
        }
        if !seen.insert((r.tenant.as_str(), r.stressor.as_str())) {
            return Err(at(format!(
                "stressor {} in {} reported twice",
                r.stressor, r.tenant
            )));
        }
    }
    if let Some(tl) = &t.timeline {
        validate_timeline(tl).map_err(at)?;
    }
    let mut seen = HashSet::new();
    for u in &t.tenant_usage {
        validate_usage(u).map_err(at)?;
        if !seen.insert(u.tenant.as_str()) {
            return Err(at(format!(
                "the usage of tenant {} appears twice",
                u.tenant
            )));
        }
    }
    Ok(())
}

/// A tenant's usage over a trial: a positive interval, shares within 0..=1 (a `full` only
/// beside its `some`), rates finite and >= 0.
fn validate_usage(u: &TenantUsageRecord) -> Result<(), String> {
    if !(u.interval_s.is_finite() && u.interval_s > 0.0) {
        return Err(format!(
            "the usage of {} covers {} s; the interval must be positive",
            u.tenant, u.interval_s
        ));
    }
    let share = |x: f64| x.is_finite() && (0.0..=1.0).contains(&x);
    for (resource, s) in u.stalls() {
        if let Some(s) = s {
            if !share(s.some) || s.full.is_some_and(|f| !share(f)) {
                return Err(format!(
                    "the {resource} pressure of {} is some {} full {:?}; shares are 0..=1",
                    u.tenant, s.some, s.full
                ));
            }
        }
    }
    for (name, r) in [
        ("read bytes/s", u.read_bytes_per_s),
        ("write bytes/s", u.write_bytes_per_s),
        ("read ops/s", u.read_ops_per_s),
        ("write ops/s", u.write_ops_per_s),
    ] {
        if r.is_some_and(|r| !(r.is_finite() && r >= 0.0)) {
            return Err(format!(
                "the {name} of {} is {r:?}; rates must be finite and >= 0",
                u.tenant
            ));
        }
    }
    Ok(())
}

/// A scheduled trial's switches and CPU series: times in order, values in range.
fn validate_timeline(tl: &Timeline) -> Result<(), String> {
    if tl.end_ns < tl.start_ns {
        return Err(format!(
            "timeline ends ({} ns) before it starts ({} ns)",
            tl.end_ns, tl.start_ns
        ));
    }
    for s in &tl.switches {
        if s.intensity > 100 {
            return Err(format!(
                "timeline switch of {} in {} has intensity {} > 100",
                s.stressor, s.tenant, s.intensity
            ));
        }
        if s.done_ns < s.requested_ns {
            return Err(format!(
                "timeline switch of {} in {} is done ({} ns) before it was asked for ({} ns)",
                s.stressor, s.tenant, s.done_ns, s.requested_ns
            ));
        }
        if s.ops_per_sec.is_some_and(|r| !(r.is_finite() && r >= 0.0)) {
            return Err(format!(
                "timeline switch of {} in {} reports a rate that is not finite and >= 0",
                s.stressor, s.tenant
            ));
        }
    }
    for c in &tl.cpu {
        if c.samples.windows(2).any(|w| w[1].at_ns < w[0].at_ns) {
            return Err(format!(
                "the CPU samples of {} are not in time order",
                c.tenant
            ));
        }
    }
    Ok(())
}
