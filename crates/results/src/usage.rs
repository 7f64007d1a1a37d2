//! Each tenant's pressure stalls and delivered I/O, per condition: what the kernel says the
//! tenant went through while it was measured (docs/scenario.md, "Pressure stalls
//! and delivered I/O per tenant").
//!
//! Every trial records, for every tenant, the share of its wall time the tenant's tasks were
//! stalled on CPU, memory and I/O (pressure-stall information of the tenant's own cgroup:
//! `some` = at least one task stalled, `full` = every non-idle task at once) and the block
//! I/O it was delivered (`io.stat`, v1 `blkio`), per second. [`usage_rows`] summarises them
//! per tenant and condition (medians over the condition's trials), [`notable_stalls`] picks
//! a victim's stalls worth naming in the trust line, and [`usage_section`] is the table the
//! report draws. A figure the platform does not have (cgroup v1 has no per-cgroup pressure)
//! stays `None` and shows as `n/a`, never as zero.

use std::collections::BTreeMap;

use isobench_common::median;
use isobench_store::{StallRecord, TrialRecord};
use serde::{Deserialize, Serialize};

use crate::{Column, Section, Value};

/// A victim's stall is named in the trust line when, in the median trial of a condition, its
/// tasks were stalled (`some`) at least this share of the trial's wall time. The same 10% at
/// which the noise causes name a tenant's pressure: below it a probe loses little time, and
/// a quiet tenant on a 2-vCPU machine here stalls a few percent on CPU from the run's own
/// agent and controller.
pub const NOTABLE_STALL: f64 = 0.10;

/// A tenant's stalls on one resource over a condition's trials.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StallSummary {
    /// Median share of a trial with at least one task stalled, 0..=1.
    pub some_median: f64,
    /// Largest such share in one trial.
    pub some_max: f64,
    /// Median share with every non-idle task stalled, where the kernel reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_median: Option<f64>,
}

/// One tenant under one condition: its stalls and delivered I/O, medians over the trials.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageRow {
    /// Tenant name.
    pub tenant: String,
    /// `victim` or `aggressor`.
    pub role: String,
    /// Condition (`baseline`, `cpu@100`).
    pub condition: String,
    /// Trials the figures are medians over.
    pub trials: u32,
    /// Stalled waiting for a CPU (`None`: not available on the platform).
    pub cpu: Option<StallSummary>,
    /// Stalled on memory (reclaim, refaults, swap-in).
    pub memory: Option<StallSummary>,
    /// Stalled on block I/O.
    pub io: Option<StallSummary>,
    /// Bytes read per second.
    pub read_bytes_per_s: Option<f64>,
    /// Bytes written per second.
    pub write_bytes_per_s: Option<f64>,
    /// Read operations per second.
    pub read_ops_per_s: Option<f64>,
    /// Write operations per second.
    pub write_ops_per_s: Option<f64>,
}

impl UsageRow {
    /// The stalls by resource, in a fixed order: `cpu`, `memory`, `io`.
    pub fn stalls(&self) -> [(&'static str, Option<StallSummary>); 3] {
        [("cpu", self.cpu), ("memory", self.memory), ("io", self.io)]
    }
}

/// A victim's stall worth naming: its median share under a condition reached
/// [`NOTABLE_STALL`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotableStall {
    /// Victim tenant.
    pub tenant: String,
    /// Condition.
    pub condition: String,
    /// `cpu`, `memory` or `io`.
    pub resource: String,
    /// The stalls.
    pub stall: StallSummary,
    /// Trials they are the median of.
    pub trials: u32,
}

/// Per tenant (in `tenants` order) and condition (in `conditions` order, then any other in
/// order of appearance), the medians of what `trials` recorded. `tenants` holds each
/// tenant's name and role; a tenant not in it is left out.
pub fn usage_rows(
    trials: &[&TrialRecord],
    tenants: &[(String, String)],
    conditions: &[String],
) -> Vec<UsageRow> {
    let mut order: Vec<String> = conditions.to_vec();
    let mut by: BTreeMap<(usize, usize), Vec<&isobench_store::TenantUsageRecord>> = BTreeMap::new();
    for t in trials {
        let cond = t.condition.to_string();
        let c = match order.iter().position(|x| *x == cond) {
            Some(c) => c,
            None => {
                order.push(cond);
                order.len() - 1
            }
        };
        for u in &t.tenant_usage {
            if let Some(k) = tenants.iter().position(|(n, _)| *n == u.tenant) {
                by.entry((k, c)).or_default().push(u);
            }
        }
    }
    by.into_iter()
        .map(|((k, c), us)| {
            let stall = |get: fn(&isobench_store::TenantUsageRecord) -> Option<StallRecord>| {
                summarize(us.iter().filter_map(|u| get(u)).collect())
            };
            let rate = |get: fn(&isobench_store::TenantUsageRecord) -> Option<f64>| {
                let v: Vec<f64> = us.iter().filter_map(|u| get(u)).collect();
                (!v.is_empty()).then(|| median(&v))
            };
            UsageRow {
                tenant: tenants[k].0.clone(),
                role: tenants[k].1.clone(),
                condition: order[c].clone(),
                trials: us.len() as u32,
                cpu: stall(|u| u.cpu),
                memory: stall(|u| u.memory),
                io: stall(|u| u.io),
                read_bytes_per_s: rate(|u| u.read_bytes_per_s),
                write_bytes_per_s: rate(|u| u.write_bytes_per_s),
                read_ops_per_s: rate(|u| u.read_ops_per_s),
                write_ops_per_s: rate(|u| u.write_ops_per_s),
            }
        })
        .collect()
}

fn summarize(s: Vec<StallRecord>) -> Option<StallSummary> {
    if s.is_empty() {
        return None;
    }
    let some: Vec<f64> = s.iter().map(|x| x.some).collect();
    let full: Vec<f64> = s.iter().filter_map(|x| x.full).collect();
    Some(StallSummary {
        some_median: median(&some),
        some_max: some.iter().copied().fold(0.0, f64::max),
        // A full share only when every trial has one, so the median is over the same trials.
        full_median: (full.len() == s.len()).then(|| median(&full)),
    })
}

/// Whether any row has a tenant's pressure: `None` when there are no rows (nothing was
/// recorded), `Some(false)` when the platform has no per-tenant pressure.
pub fn pressure_measured(rows: &[UsageRow]) -> Option<bool> {
    (!rows.is_empty()).then(|| {
        rows.iter()
            .any(|r| r.stalls().iter().any(|(_, s)| s.is_some()))
    })
}

/// The victims' stalls at or above `threshold` (median `some` share under a condition),
/// worst first.
pub fn notable_stalls(rows: &[UsageRow], threshold: f64) -> Vec<NotableStall> {
    let mut out: Vec<NotableStall> = rows
        .iter()
        .filter(|r| r.role == "victim")
        .flat_map(|r| {
            r.stalls().into_iter().filter_map(move |(resource, s)| {
                let s = s?;
                (s.some_median >= threshold).then(|| NotableStall {
                    tenant: r.tenant.clone(),
                    condition: r.condition.clone(),
                    resource: resource.to_string(),
                    stall: s,
                    trials: r.trials,
                })
            })
        })
        .collect();
    out.sort_by(|a, b| b.stall.some_median.total_cmp(&a.stall.some_median));
    out
}

/// The rows as a table: stall shares in percent (`some`, and `full` where the kernel reports
/// it), delivered I/O in MB/s and operations per second; `n/a` where not available. `None`
/// when nothing was recorded.
pub fn usage_section(rows: &[UsageRow]) -> Option<Section> {
    if rows.is_empty() {
        return None;
    }
    let mut columns = vec![
        Column::text("tenant"),
        Column::text("role"),
        Column::text("condition"),
        Column::text("trials"),
    ];
    for r in ["cpu", "memory", "io"] {
        columns.push(Column::unit(&format!("{r} stall some"), "%"));
        columns.push(Column::unit(&format!("{r} stall full"), "%"));
    }
    columns.extend([
        Column::unit("read", "MB/s"),
        Column::unit("write", "MB/s"),
        Column::unit("read", "IO/s"),
        Column::unit("write", "IO/s"),
    ]);
    let mut s = Section::new(
        "usage",
        "Pressure stalls and delivered I/O per tenant",
        columns,
    );
    let na = || Value::text_of("n/a");
    let num = |v: Option<f64>, scale: f64, digits: u8| match v {
        Some(v) => Value::number(v * scale, digits),
        None => na(),
    };
    for r in rows {
        let mut row = vec![
            Value::text_of(&r.tenant),
            Value::text_of(&r.role),
            Value::text_of(&r.condition),
            Value::text_of(r.trials.to_string()),
        ];
        for (_, st) in r.stalls() {
            row.push(num(st.map(|x| x.some_median), 100.0, 1));
            row.push(num(st.and_then(|x| x.full_median), 100.0, 1));
        }
        row.push(num(r.read_bytes_per_s, 1e-6, 2));
        row.push(num(r.write_bytes_per_s, 1e-6, 2));
        row.push(num(r.read_ops_per_s, 1.0, 0));
        row.push(num(r.write_ops_per_s, 1.0, 0));
        s.push(row);
    }
    s.notes.push(
        "Medians over each condition's trials. Stall: share of a trial's wall time the \
         tenant's tasks waited on the resource (pressure-stall information of its own cgroup: \
         some = at least one task, full = all at once). I/O: what the tenant's block I/O was \
         delivered (io.stat; blkio on cgroup v1). An on/off trial holds both phases, so its \
         figures cover the aggressors running and frozen. n/a: the platform has no such \
         counter (cgroup v1 has no per-cgroup pressure)."
            .to_string(),
    );
    Some(s)
}
