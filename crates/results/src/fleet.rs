//! A fleet run: one scenario on many hosts (Kubernetes nodes or remote hosts), compared type
//! by type, and the noisy hosts among them.
//!
//! Hosts are grouped by their type (the `node.kubernetes.io/instance-type` label, or what the
//! caller names). For each group and each victim cell (tenant, probe, metric, stress test),
//! the table gives the type's degradation: a random-effects pool of its hosts' own estimates
//! ([`isobench_stats::pool_random_effects`]), so hosts that disagree widen the interval
//! instead of hiding behind it.
//!
//! A host is **noisy** when it is significantly worse than the others of its type: it
//! degrades more under some stress test, or its baseline (the probe alone) is slower. Each
//! host is tested against the pool of the others, for every cell and every baseline; the
//! p-values of a group are corrected together (Holm), and a difference counts only when it is
//! also at least the run's target half-width (a difference the run was not asked to resolve
//! is not a finding). With two hosts of a type, only the worse one can be flagged.

use std::collections::BTreeMap;

use isobench_stats::{
    correct_differences, interval_df, log_difference, log_ratio_to_degradation,
    pool_random_effects, robust_log_level, Correction, DegradationCi, DegradationDifference,
    Direction, LogScale,
};
use serde::{Deserialize, Serialize};

use crate::view::{Column, Section, Value};
use crate::{Cell, Design, Results};

/// The label that names a node's type, as Kubernetes sets it.
pub const TYPE_LABEL: &str = "node.kubernetes.io/instance-type";

/// A host without a type label.
pub const UNTYPED: &str = "(no type)";

/// The correction applied across each group's tests.
const CORRECTION: Correction = Correction::Holm;

/// One host's run.
#[derive(Debug, Clone)]
pub struct FleetHost<'a> {
    /// The host's (node's) name.
    pub name: String,
    /// Its labels (instance type, kernel, kubelet version, ...).
    pub labels: BTreeMap<String, String>,
    /// Its run's results.
    pub results: &'a Results,
}

/// The fleet's figures, type by type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fleet {
    /// The label the hosts were grouped by.
    pub type_label: String,
    /// One group per host type, in order of first appearance.
    pub groups: Vec<HostGroup>,
}

/// The hosts of one type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostGroup {
    /// The type ([`UNTYPED`] for hosts without the label).
    pub host_type: String,
    /// Its hosts' names, in the order given.
    pub hosts: Vec<String>,
    /// Their runs' ids, in the same order.
    pub runs: Vec<String>,
    /// One row per victim cell.
    pub rows: Vec<FleetRow>,
    /// The hosts significantly worse than the others of this type.
    pub noisy: Vec<NoisyHost>,
}

/// One victim cell across the hosts of a type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetRow {
    /// Victim tenant.
    pub tenant: String,
    /// Probe.
    pub probe: String,
    /// Metric.
    pub metric: String,
    /// Its unit.
    pub unit: String,
    /// Its better direction.
    pub direction: Direction,
    /// Stress test (`stressor@intensity`).
    pub condition: String,
    /// Each host's degradation with its interval (`None`: not measured there, or no estimate).
    pub hosts: Vec<Option<DegradationCi>>,
    /// The type's degradation: the random-effects pool of the hosts' estimates.
    pub pooled: Option<Pooled>,
}

/// A pooled degradation, percent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pooled {
    /// Estimate.
    pub estimate: f64,
    /// Lower bound.
    pub lower: f64,
    /// Upper bound.
    pub upper: f64,
    /// Confidence level.
    pub level: f64,
    /// Hosts pooled.
    pub hosts: usize,
    /// Between-host variance on the log scale beyond the hosts' own errors (0: they agree).
    pub tau_squared: f64,
}

/// A host significantly worse than the others of its type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NoisyHost {
    /// The host.
    pub host: String,
    /// Its run.
    pub run: String,
    /// Where it is worse, largest first.
    pub differs: Vec<HostDifference>,
}

/// What a host is compared on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// The degradation under a stress test.
    Degradation,
    /// The probe alone (its baseline level).
    Baseline,
}

/// One comparison of a host with the others of its type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostDifference {
    /// Degradation or baseline.
    pub measure: Measure,
    /// Victim tenant.
    pub tenant: String,
    /// Probe.
    pub probe: String,
    /// Metric.
    pub metric: String,
    /// Stress test (`None` for a baseline).
    pub condition: Option<String>,
    /// Points by which the host is worse than the others' pool (negative: better). For a
    /// degradation, the difference of degradations; for a baseline, how much slower (or
    /// costlier) its level is, percent.
    pub difference: DegradationDifference,
}

impl HostDifference {
    /// `probe metric` and, for a degradation, `under CONDITION`.
    pub fn label(&self) -> String {
        match &self.condition {
            Some(c) => format!("{} {} under {c}", self.probe, self.metric),
            None => format!("{} {} alone", self.probe, self.metric),
        }
    }
}

/// A victim cell's identity across runs.
type CellKey = (String, String, String, String);

fn key(c: &Cell) -> CellKey {
    (
        c.tenant.clone(),
        c.probe.clone(),
        c.metric.clone(),
        c.condition.clone(),
    )
}

/// The victim cell `k` of a run (compared in place: this runs hosts x cells x cells times).
fn find_cell<'r>(r: &'r Results, k: &CellKey) -> Option<&'r Cell> {
    r.cells
        .iter()
        .find(|c| c.tenant == k.0 && c.probe == k.1 && c.metric == k.2 && c.condition == k.3)
}

impl Fleet {
    /// The fleet of `hosts`, grouped by the label `type_label`.
    pub fn new(hosts: &[FleetHost<'_>], type_label: &str) -> Fleet {
        let mut order: Vec<String> = Vec::new();
        let mut by_type: BTreeMap<String, Vec<&FleetHost<'_>>> = BTreeMap::new();
        for h in hosts {
            let t = h
                .labels
                .get(type_label)
                .cloned()
                .unwrap_or_else(|| UNTYPED.to_string());
            if !order.contains(&t) {
                order.push(t.clone());
            }
            by_type.entry(t).or_default().push(h);
        }
        Fleet {
            type_label: type_label.to_string(),
            groups: order
                .into_iter()
                .map(|t| {
                    let members = &by_type[&t];
                    HostGroup::new(t, members)
                })
                .collect(),
        }
    }

    /// Every noisy host of the fleet, with its type.
    pub fn noisy(&self) -> Vec<(&str, &NoisyHost)> {
        self.groups
            .iter()
            .flat_map(|g| g.noisy.iter().map(move |n| (g.host_type.as_str(), n)))
            .collect()
    }

    /// The fleet table: per host type, each victim cell's pooled degradation with its
    /// interval; noisy hosts are named under it.
    pub fn section(&self) -> Section {
        let mut columns = vec![
            Column::text("victim"),
            Column::text("probe"),
            Column::text("stress test"),
        ];
        for g in &self.groups {
            columns.push(Column::unit(
                &format!("{} ({} hosts)", g.host_type, g.hosts.len()),
                "%",
            ));
        }
        let mut s = Section::new(
            "fleet",
            "Degradation per host type (random-effects pool of its hosts)",
            columns,
        );
        // Rows: every cell of any group, in first-seen order.
        let mut keys: Vec<CellKey> = Vec::new();
        for g in &self.groups {
            for r in &g.rows {
                let k = (
                    r.tenant.clone(),
                    r.probe.clone(),
                    r.metric.clone(),
                    r.condition.clone(),
                );
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
        }
        for k in &keys {
            let mut row = vec![
                Value::text_of(k.0.clone()),
                Value::text_of(format!("{} {}", k.1, k.2)),
                Value::text_of(k.3.clone()),
            ];
            for g in &self.groups {
                let cell = g.rows.iter().find(|r| {
                    (&r.tenant, &r.probe, &r.metric, &r.condition) == (&k.0, &k.1, &k.2, &k.3)
                });
                row.push(match cell.and_then(|r| r.pooled.as_ref()) {
                    Some(p) => Value::estimate(p.estimate, p.lower, p.upper, 1),
                    None => Value::text_of("-"),
                });
            }
            s.push(row);
        }
        for (t, n) in self.noisy() {
            let what: Vec<String> = n
                .differs
                .iter()
                .take(3)
                .map(|d| {
                    format!(
                        "{} {:+.1} points [{:+.1}, {:+.1}], adjusted p {:.3}",
                        d.label(),
                        d.difference.estimate,
                        d.difference.lower,
                        d.difference.upper,
                        d.difference.p_adjusted
                    )
                })
                .collect();
            let more = n.differs.len().saturating_sub(3);
            s.notes.push(format!(
                "noisy host: {} ({t}, run {}) is worse than the others of its type: {}{}",
                n.host,
                n.run,
                what.join("; "),
                if more > 0 {
                    format!("; and {more} more")
                } else {
                    String::new()
                }
            ));
        }
        if self.noisy().is_empty() && self.groups.iter().any(|g| g.hosts.len() > 1) {
            s.notes
                .push("no host differs significantly from the others of its type".into());
        }
        s
    }
}

impl HostGroup {
    fn new(host_type: String, members: &[&FleetHost<'_>]) -> HostGroup {
        let mut keys: Vec<CellKey> = Vec::new();
        for m in members {
            for c in &m.results.cells {
                let k = key(c);
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
        }
        let rows: Vec<FleetRow> = keys
            .iter()
            .filter_map(|k| {
                let cells: Vec<Option<&Cell>> =
                    members.iter().map(|m| find_cell(m.results, k)).collect();
                let first = cells.iter().flatten().next()?;
                let hosts: Vec<Option<DegradationCi>> = cells
                    .iter()
                    .map(|c| {
                        c.as_ref()
                            .and_then(|c| c.comparison.as_ref())
                            .map(|x| x.degradation.clone())
                    })
                    .collect();
                let scales: Vec<LogScale> =
                    cells.iter().flatten().filter_map(|c| scale(c)).collect();
                let level = hosts
                    .iter()
                    .flatten()
                    .map(|ci| ci.level)
                    .next()
                    .unwrap_or(0.95);
                Some(FleetRow {
                    tenant: k.0.clone(),
                    probe: k.1.clone(),
                    metric: k.2.clone(),
                    unit: first.unit.clone(),
                    direction: first.direction,
                    condition: k.3.clone(),
                    pooled: pooled(&scales, first.direction, level),
                    hosts,
                })
            })
            .collect();
        let noisy = if members.len() < 2 {
            Vec::new()
        } else {
            noisy_hosts(members, &keys)
        };
        HostGroup {
            host_type,
            hosts: members.iter().map(|m| m.name.clone()).collect(),
            runs: members.iter().map(|m| m.results.run.id.clone()).collect(),
            rows,
            noisy,
        }
    }
}

/// A cell's degradation on the log scale, when it has one that can be read there.
fn scale(c: &Cell) -> Option<LogScale> {
    let ci = &c.comparison.as_ref()?.degradation;
    LogScale::recover(ci, c.direction, interval_df(ci, c.paired.as_ref())).ok()
}

/// The random-effects pool of `scales` as a degradation with its interval.
fn pooled(scales: &[LogScale], direction: Direction, level: f64) -> Option<Pooled> {
    let (p, tau_squared) = pool_random_effects(scales)?;
    // The interval of the pool alone: a difference against a reference of exactly 0.
    let zero = LogScale {
        log_ratio: 0.0,
        se: 0.0,
        df: None,
    };
    let d = log_difference(&zero, &p, direction, level);
    Some(Pooled {
        estimate: log_ratio_to_degradation(p.log_ratio, direction),
        lower: d.lower,
        upper: d.upper,
        level,
        hosts: scales.len(),
        tau_squared,
    })
}

/// A host's cell of one key, with its scale when it has one.
type Found<'r> = Option<(&'r Cell, Option<LogScale>)>;

/// Each host tested against the pool of the others, on every cell and baseline; Holm across
/// the group; the hosts with a significant, large enough difference for the worse.
fn noisy_hosts(members: &[&FleetHost<'_>], keys: &[CellKey]) -> Vec<NoisyHost> {
    let mut tests = cell_differences(members, keys);
    tests.extend(baseline_differences(members, keys));
    correct_differences(tests.iter_mut().map(|(_, t)| &mut t.difference), CORRECTION);
    let mut noisy: Vec<NoisyHost> = Vec::new();
    for (i, m) in members.iter().enumerate() {
        let min_effect = m.results.target_half_width.max(0.0);
        let mut differs: Vec<HostDifference> = tests
            .iter()
            .filter(|(j, t)| {
                *j == i
                    && t.difference.significant
                    && t.difference.estimate > 0.0
                    && t.difference.estimate >= min_effect
            })
            .map(|(_, t)| t.clone())
            .collect();
        if differs.is_empty() {
            continue;
        }
        differs.sort_by(|a, b| b.difference.estimate.total_cmp(&a.difference.estimate));
        noisy.push(NoisyHost {
            host: m.name.clone(),
            run: m.results.run.id.clone(),
            differs,
        });
    }
    noisy
}

/// Each host's degradation in every cell against the pool of the other hosts' (not yet
/// corrected for multiplicity), with the host's index.
fn cell_differences(members: &[&FleetHost<'_>], keys: &[CellKey]) -> Vec<(usize, HostDifference)> {
    let mut tests: Vec<(usize, HostDifference)> = Vec::new();
    // Each host's cell and scale, per cell key, found once (not once per host compared).
    let found: Vec<Vec<Found<'_>>> = keys
        .iter()
        .map(|k| {
            members
                .iter()
                .map(|m| find_cell(m.results, k).map(|c| (c, scale(c))))
                .collect()
        })
        .collect();
    for (i, _) in members.iter().enumerate() {
        for (k, cells) in keys.iter().zip(&found) {
            let Some((mine, Some(me))) = cells[i] else {
                continue;
            };
            let others: Vec<LogScale> = cells
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .filter_map(|(_, c)| c.and_then(|c| c.1))
                .collect();
            let Some((pool, _)) = pool_random_effects(&others) else {
                continue;
            };
            let level = mine
                .comparison
                .as_ref()
                .map_or(0.95, |c| c.degradation.level);
            tests.push((
                i,
                HostDifference {
                    measure: Measure::Degradation,
                    tenant: k.0.clone(),
                    probe: k.1.clone(),
                    metric: k.2.clone(),
                    condition: Some(k.3.clone()),
                    difference: log_difference(&pool, &me, mine.direction, level),
                },
            ));
        }
    }
    tests
}

/// Each host's baseline level of every (tenant, probe, metric) against the pool of the other
/// hosts' (not yet corrected for multiplicity), with the host's index.
fn baseline_differences(
    members: &[&FleetHost<'_>],
    keys: &[CellKey],
) -> Vec<(usize, HostDifference)> {
    let mut tests: Vec<(usize, HostDifference)> = Vec::new();
    // Baselines: per (tenant, probe, metric), the cell with the most baseline values.
    let mut levels: Vec<(String, String, String)> = Vec::new();
    for k in keys {
        let l = (k.0.clone(), k.1.clone(), k.2.clone());
        if !levels.contains(&l) {
            levels.push(l);
        }
    }
    for l in &levels {
        // The host's level: from the cell with the most baseline values, trial-level ones
        // (paired trials) before on/off cycles', whose windows have heavy tails; robustly
        // (the median), since one window in which the probe hardly ran reads thousands of
        // times lower and would dominate a mean.
        let baseline = |m: &FleetHost<'_>| -> Option<(LogScale, Direction, f64)> {
            let c = m
                .results
                .cells
                .iter()
                .filter(|c| (&c.tenant, &c.probe, &c.metric) == (&l.0, &l.1, &l.2))
                .max_by_key(|c| (c.design != Some(Design::OnOff), c.baseline.len()))?;
            let level = c.comparison.as_ref().map_or(0.95, |x| x.degradation.level);
            Some((robust_log_level(&c.baseline)?, c.direction, level))
        };
        let all: Vec<Option<(LogScale, Direction, f64)>> =
            members.iter().map(|m| baseline(m)).collect();
        for (i, mine) in all.iter().enumerate() {
            let Some((me, direction, level)) = mine else {
                continue;
            };
            let others: Vec<LogScale> = all
                .iter()
                .enumerate()
                .filter(|&(j, o)| j != i && o.as_ref().is_some_and(|o| o.1 == *direction))
                .filter_map(|(_, o)| o.as_ref().map(|o| o.0))
                .collect();
            let Some((pool, _)) = pool_random_effects(&others) else {
                continue;
            };
            // How much worse this level is than the others': a "degradation" of the ratio
            // of the two levels.
            let reference = LogScale {
                log_ratio: 0.0,
                ..pool
            };
            let shifted = LogScale {
                log_ratio: me.log_ratio - pool.log_ratio,
                ..*me
            };
            tests.push((
                i,
                HostDifference {
                    measure: Measure::Baseline,
                    tenant: l.0.clone(),
                    probe: l.1.clone(),
                    metric: l.2.clone(),
                    condition: None,
                    difference: log_difference(&reference, &shifted, *direction, *level),
                },
            ));
        }
    }
    tests
}
