//! `fidelity`: how faithfully a CPU limit is provided (paper 002). A victim tenant's CPU
//! limit is swept over settings `s` (a share of its CPUs, 10..100%), with its neighbours idle
//! and with a stressor loading them; at each setting the probe achieves `v`, where the limit
//! promises `v_ref x s`, and the efficiency is `q = v / (v_ref x s)`. `v_ref` is the probe
//! alone: the same tenant with no CPU limit and idle neighbours, which is every run's
//! baseline.
//!
//! Each (setting, load) is a condition of the matrix engine that sets the victim's CPU limit
//! for its trials (the planned limit comes back after them) and, when loaded, gives every
//! aggressor the load stressor. Every condition is measured with paired trials next to the
//! baseline, so `v / v_ref` comes from comparisons close together in time: the degradation
//! `d` of each cell is turned into the performance ratio (`1 - d` for higher-is-better
//! metrics, `1 / (1 + d)` for times), its interval with it. The profile of the paper
//! (setting x benchmark x load x cores) is the kind's section.

use isobench_results::{Column, Section, Value};
use isobench_store::LoadedRun;
use isobench_workloads::{Class, Direction};
use serde::{Deserialize, Serialize};

use super::matrix::{self, stressor_conditions, Variant};
use super::{Analysis, ExperimentKind};
use crate::analysis::{Cell, StatsSettings, Stored};
use crate::fields::Fields;
use crate::plan::{Condition, Design, LimitOverride, Plan, Platform};
use crate::resolve::Resolver;
use crate::scenario::{Placement, Role, Scenario};
use crate::source::{ScenarioError, Span};

/// The `fidelity` kind.
pub struct Fidelity;

/// What a `[fidelity]` table says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FidelitySettings {
    /// The victim whose CPU limit is swept.
    pub tenant: String,
    /// Settings `s`, % of the tenant's CPUs, increasing.
    pub limits: Vec<u8>,
    /// The id of the `[[stressor]]` the aggressors run in the loaded conditions.
    pub load: String,
    /// The CPUs of the tenant's own cpuset, what 100% stands for; 0 when it has none (every
    /// CPU the plan gives it then stands for 100%).
    #[serde(default)]
    pub cores: usize,
}

/// Settings when the table gives none, %.
const DEFAULT_LIMITS: &[u8] = &[10, 25, 50, 75, 100];

impl FidelitySettings {
    fn of(v: &serde_json::Value) -> Option<FidelitySettings> {
        serde_json::from_value(v.clone()).ok()
    }

    /// The condition id of setting `s` with no load (`50%`) or with `load` (`50%+cpu@100`).
    fn condition_id(s: u8, load: Option<(&str, u8)>) -> String {
        match load {
            None => format!("{s}%"),
            Some((id, i)) => format!("{s}%+{id}@{i}"),
        }
    }

    /// The CPUs setting `s` leaves the tenant.
    fn cpus(&self, s: u8) -> f64 {
        self.cores.max(1) as f64 * f64::from(s) / 100.0
    }

    /// Setting and load of condition `c`, when it is one of these settings'.
    fn point_of(&self, c: &Condition) -> Option<(u8, bool)> {
        self.limits.iter().find_map(|&s| {
            if c.id == Self::condition_id(s, None) {
                Some((s, false))
            } else if c.id == Self::condition_id(s, Some((&self.load, c.intensity))) {
                Some((s, true))
            } else {
                None
            }
        })
    }
}

impl ExperimentKind for Fidelity {
    fn name(&self) -> &'static str {
        "fidelity"
    }

    fn help(&self) -> &'static str {
        "a tenant's CPU limit swept, neighbours idle and loaded: efficiency q = v / (v_ref x s)"
    }

    fn settings(&self, f: &mut Fields<'_, '_>, sc: &Scenario) -> serde_json::Value {
        let victims: Vec<&str> = sc
            .tenants_with(Role::Victim)
            .map(|t| t.name.as_str())
            .collect();
        let ids: Vec<&str> = sc.stressors.iter().map(|s| s.id.as_str()).collect();
        // Every key is read first, so a problem with one leaves none of the others unknown.
        let (tenant, load, limits) = (
            f.string("tenant"),
            f.string("load"),
            f.int_list("limits", (1, 100)),
        );
        let tenant = match tenant {
            Some(t) if victims.contains(&t.get_ref().as_str()) => Some(t.into_inner()),
            Some(t) => {
                f.error(
                    t.span().into(),
                    "tenant",
                    format!("`{}` is not a victim tenant of this file", t.get_ref()),
                    &victims.join(", "),
                    format!(
                        "write tenant = \"{}\" (the limit is swept where the probes run)",
                        victims.first().copied().unwrap_or("victim")
                    ),
                );
                None
            }
            None => victims.first().map(|v| v.to_string()),
        };
        let load = match load {
            Some(l) if ids.contains(&l.get_ref().as_str()) => Some(l.into_inner()),
            Some(l) => {
                f.error(
                    l.span().into(),
                    "load",
                    format!("no [[stressor]] has the id `{}`", l.get_ref()),
                    &ids.join(", "),
                    format!(
                        "write load = \"{}\", or add a [[stressor]] with that name or label",
                        ids.first().copied().unwrap_or("cpu")
                    ),
                );
                None
            }
            None => ids.first().map(|id| id.to_string()),
        };
        let limits = match limits {
            None => DEFAULT_LIMITS.to_vec(),
            Some((span, steps)) => {
                let mut sorted = steps.clone();
                sorted.sort_unstable();
                sorted.dedup();
                if sorted != steps {
                    f.error(
                        span,
                        "limits",
                        "the settings are not increasing".into(),
                        "distinct % of the tenant's CPUs in 1..=100, increasing",
                        format!(
                            "write limits = [{}]",
                            sorted
                                .iter()
                                .map(|i| i.to_string())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    );
                }
                sorted.into_iter().map(|i| i as u8).collect()
            }
        };
        let (Some(tenant), Some(load)) = (tenant, load) else {
            return serde_json::Value::Null;
        };
        // What 100% stands for: the tenant's own cpuset, else every CPU of the host (known
        // only when the plan is resolved).
        let spec = sc.tenants.iter().find(|t| t.name == tenant);
        let cores = spec
            .and_then(|t| t.limits.iter().find(|e| e.key == "cpuset"))
            .and_then(|e| isobench_platform::CpuList::parse(&e.value).ok())
            .map_or(0, |c| c.len());
        if let Some(cpus) = spec.and_then(|t| t.limits.iter().find(|e| e.key == "cpus")) {
            f.error(
                cpus.key_span,
                "tenant",
                format!(
                    "tenant `{tenant}` has a CPU limit of its own, so its baseline is not the \
                     probe alone without a limit (v_ref)"
                ),
                "a victim without `cpus`",
                "remove `cpus` from the tenant's limits: [fidelity] sets it in each condition"
                    .into(),
            );
        }
        serde_json::to_value(FidelitySettings {
            tenant,
            limits,
            load,
            cores,
        })
        .expect("settings serialize")
    }

    /// Each setting twice: with the neighbours idle and with the load stressor in every
    /// aggressor; the swept tenant's CPU limit set for the condition's trials. Paired trials.
    fn conditions(&self, r: &mut Resolver, platform: Platform) -> Vec<Condition> {
        let Some(mut set) = FidelitySettings::of(&r.scenario().settings) else {
            return Vec::new();
        };
        let sc = r.scenario();
        if set.cores == 0 {
            set.cores = r.host().cpus().len();
            if sc.placement == Placement::Split {
                r.error(sc.source.error(
                    Span::default(),
                    "placement",
                    format!(
                        "[fidelity] sweeps a share of tenant {}'s CPUs, and placement = \
                         \"split\" would choose them",
                        set.tenant
                    ),
                    "placement = \"shared\", or a cpuset on the swept tenant",
                    "give the tenant a cpuset (e.g. cpuset = \"0\" for one core), or remove \
                     placement = \"split\"",
                ));
            }
        }
        if platform == Platform::Host {
            r.error(sc.source.error(
                Span::default(),
                "platform",
                "[fidelity] changes a tenant's CPU limit, and the host platform enforces no limit",
                "platform = \"cgroup\" (or auto as root)",
                "run as root so tenants are cgroups",
            ));
        }
        let limit = |s: u8| {
            [(
                set.tenant.clone(),
                LimitOverride {
                    cpus: Some(set.cpus(s)),
                },
            )]
            .into_iter()
            .collect()
        };
        let loaded = stressor_conditions(r, platform, |st| {
            if st.id != set.load {
                return Vec::new();
            }
            let i = st.intensities.first().copied().unwrap_or(100);
            set.limits
                .iter()
                .map(|&s| Variant {
                    id: FidelitySettings::condition_id(s, Some((&st.id, i))),
                    intensity: i,
                    params: st.params.clone(),
                })
                .collect()
        });
        let mut conditions = Vec::new();
        for &s in &set.limits {
            conditions.push(Condition {
                id: FidelitySettings::condition_id(s, None),
                stressor_id: set.load.clone(),
                name: "cpu-limit".into(),
                class: Class::Cpu,
                intensity: 0,
                params: Default::default(),
                assignments: Default::default(),
                aggressive: false,
                design: Design::Paired,
                design_reason: "paired: the neighbours are idle, nothing to switch".into(),
                capped: false,
                limits: limit(s),
            });
            if let Some(c) = loaded.iter().find(|c| set.point_of(c) == Some((s, true))) {
                let mut c = c.clone();
                c.limits = limit(s);
                c.design = Design::Paired;
                c.design_reason =
                    "paired: the limit is set for the whole block, so the load runs throughout"
                        .into();
                conditions.push(c);
            }
        }
        r.note(format!(
            "fidelity: tenant {}'s CPU limit at {} of its {} CPU(s), neighbours idle and with {}",
            set.tenant,
            set.limits
                .iter()
                .map(|s| format!("{s}%"))
                .collect::<Vec<_>>()
                .join(", "),
            set.cores,
            set.load
        ));
        conditions
    }

    fn nothing_to_run(&self, r: &Resolver) -> ScenarioError {
        r.scenario().source.error(
            Span::default(),
            "fidelity.limits",
            "no CPU limit setting is left to measure",
            "settings in 1..=100 (% of the tenant's CPUs)",
            "write limits = [10, 25, 50, 75, 100] in [fidelity]",
        )
    }

    fn analyze(
        &self,
        run: &LoadedRun,
        plan: Option<&Plan>,
        stored: &Stored,
        settings: &StatsSettings,
    ) -> Analysis {
        let mut a = matrix::analysis::analyze(run, plan, stored, settings);
        let Some((plan, mut set)) =
            plan.and_then(|p| Some((p, FidelitySettings::of(&p.settings)?)))
        else {
            return a;
        };
        if set.cores == 0 {
            // No cpuset of its own: 100% was every CPU the plan gave it.
            set.cores = plan
                .tenants
                .iter()
                .find(|t| t.name == set.tenant)
                .map_or(1, |t| t.cpus.len());
        }
        a.sections.push(profile(plan, &set, &a.cells));
        a
    }
}

/// The performance ratio `v / v_ref` a degradation of `d` % stands for: `1 - d` for a
/// higher-is-better metric, `1 / (1 + d)` for a time (its speed is the inverse). Monotone
/// decreasing in `d`, so the bounds of an interval map to bounds.
pub fn performance_ratio(direction: Direction, d: f64) -> f64 {
    let d = d / 100.0;
    match direction {
        Direction::Higher => 1.0 - d,
        Direction::Lower => 1.0 / (1.0 + d),
    }
}

/// Decimals that show a value of this size with about three significant digits.
fn digits(v: f64) -> u8 {
    match v.abs() {
        x if x >= 100.0 => 0,
        x if x >= 10.0 => 1,
        _ => 2,
    }
}

/// The profile: one row per setting, load and victim result of the swept tenant.
fn profile(plan: &Plan, set: &FidelitySettings, cells: &[Cell]) -> Section {
    let columns = vec![
        Column::unit("s", "%"),
        Column::text("cpus"),
        Column::text("load"),
        Column::text("benchmark"),
        Column::text("cores"),
        Column::text("v"),
        Column::text("v_ref"),
        Column::text("v_ref x s"),
        Column::unit("v / v_ref", "%"),
        Column::unit("q", "%"),
    ];
    let mut section = Section::new(
        "fidelity",
        format!(
            "CPU limit fidelity of tenant {}: q = v / (v_ref x s), neighbours idle and loaded",
            set.tenant
        ),
        columns,
    );
    for c in &plan.conditions {
        let Some((s, loaded)) = set.point_of(c) else {
            continue;
        };
        let share = f64::from(s) / 100.0;
        for cell in cells
            .iter()
            .filter(|x| x.condition == c.id && x.tenant == set.tenant)
        {
            let mut row = vec![
                Value::number(f64::from(s), 0),
                Value::number(set.cpus(s), 2),
                Value::text_of(if loaded {
                    format!("{}@{}", set.load, c.intensity)
                } else {
                    "none".to_string()
                }),
                Value::text_of(format!("{} {} [{}]", cell.probe, cell.metric, cell.unit)),
                Value::number(set.cores as f64, 0),
            ];
            match &cell.comparison {
                Some(cmp) => {
                    let (v, v_ref) = (cmp.contended.median, cmp.baseline.median);
                    let expected = match cell.direction {
                        Direction::Higher => v_ref * share,
                        Direction::Lower => v_ref / share,
                    };
                    let d = &cmp.degradation;
                    let r = |x: f64| 100.0 * performance_ratio(cell.direction, x);
                    let (ratio, lo, hi) = (r(d.estimate), r(d.upper), r(d.lower));
                    let mut ratio_v = Value::estimate(ratio, lo, hi, 1);
                    let mut q = Value::estimate(ratio / share, lo / share, hi / share, 1);
                    if !cmp.trustworthy {
                        ratio_v = ratio_v.flagged("untrustworthy: see the notes of the run");
                        q = q.flagged("untrustworthy: see the notes of the run");
                    }
                    row.extend([
                        Value::number(v, digits(v)),
                        Value::number(v_ref, digits(v_ref)),
                        Value::number(expected, digits(expected)),
                        ratio_v,
                        q,
                    ]);
                }
                None if cell.all_dnr() => {
                    let reason = cell
                        .dnr
                        .as_ref()
                        .map(|d| d.reason.clone())
                        .unwrap_or_default();
                    row.extend((0..5).map(|_| Value::Dnr {
                        reason: reason.clone(),
                    }));
                }
                None => row.extend((0..5).map(|_| Value::Empty)),
            }
            section.push(row);
        }
    }
    section.notes.push(format!(
        "s: the CPU limit as a share of the tenant's {} CPU(s) (cpus = s x cores); v: the \
         probe's median under the limit; v_ref: its median alone with no limit (the baseline \
         trials, paired in time); q = v / (v_ref x s), 100% = the limit provided exactly, with \
         the confidence interval of the paired comparison.",
        set.cores
    ));
    section.notes.push(
        "A probe that uses one CPU cannot use more than one: with more than one core, q above \
         100% at low settings says the limit left it a whole CPU, not that the platform gave \
         more than promised."
            .into(),
    );
    section
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ratio_is_one_minus_the_loss_or_the_inverse_slowdown() {
        assert!((performance_ratio(Direction::Higher, 50.0) - 0.5).abs() < 1e-12);
        assert!((performance_ratio(Direction::Lower, 100.0) - 0.5).abs() < 1e-12);
        assert!((performance_ratio(Direction::Higher, 0.0) - 1.0).abs() < 1e-12);
        // Decreasing in the degradation, so an interval's bounds swap ends.
        assert!(
            performance_ratio(Direction::Lower, 10.0) > performance_ratio(Direction::Lower, 20.0)
        );
    }

    #[test]
    fn condition_ids_name_the_setting_and_the_load() {
        assert_eq!(FidelitySettings::condition_id(50, None), "50%");
        assert_eq!(
            FidelitySettings::condition_id(50, Some(("cpu", 100))),
            "50%+cpu@100"
        );
    }
}
