//! `fidelity`: how faithfully a CPU limit is provided (paper 002). A victim tenant's CPU
//! limit is swept over settings `s` (a share of its CPUs, 10..100%), with its neighbours idle
//! and with a stressor loading them; at each setting the probe achieves `v`, where the limit
//! promises `v_ref x s`, and the efficiency is `q = v / (v_ref x s)`. `v_ref` is the probe
//! alone: the same tenant with no CPU limit and idle neighbours, which is every run's
//! baseline.
//!
//! The paper measures each VM with one vCPU and with every core (its 1-vCPU and max-vCPU
//! profiles): `cores = [1, 2]` sweeps the core count `k` too. Each probe is then measured
//! as one variant per count (`cpu-int-2c`: its `threads` set to `k`), whose own baseline is
//! `v_ref` on `k` cores, and the limit of a condition on `k` cores is `s x k` CPUs. A
//! variant is measured only under the conditions of its own count.
//!
//! Each (setting, load, cores) is a condition of the matrix engine that sets the victim's
//! CPU limit for its trials (the planned limit comes back after them) and, when loaded,
//! gives every aggressor the load stressor. Every condition is measured with paired trials
//! next to the baseline, so `v / v_ref` comes from comparisons close together in time: the
//! degradation `d` of each cell is turned into the performance ratio (`1 - d` for
//! higher-is-better metrics, `1 / (1 + d)` for times), its interval with it. The profile of
//! the paper (setting x benchmark x load x cores) is the kind's section.

use isobench_results::{Column, Guide, Plot, Section, Value};
use isobench_workloads::{Class, Direction};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::kind::{ExperimentKind, NothingToRun};
use super::matrix::{self, stressor_conditions, Variant};
use crate::cells::{Analysis, Cell, Inputs, Results};
use crate::fields::Fields;
use crate::plan::{Condition, Design, Estimate, LimitOverride, Plan, Platform};
use crate::resolver::Resolver;
use crate::scenario::{Placement, Role, Scenario};
use crate::schedule::Needs;
use crate::source::Span;

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
    /// The CPUs of the tenant's own cpuset; 0 when it has none (every CPU the plan gives it
    /// then counts). With no `core_counts`, what 100% stands for.
    #[serde(default)]
    pub cores: usize,
    /// The core counts `k` swept (`cores = [1, 2]` in the table), increasing, each at most
    /// [`FidelitySettings::cores`]; each probe runs with `threads = k` under the conditions
    /// of `k`. Empty when the table gives none: one count, `cores`, the probes as written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub core_counts: Vec<usize>,
}

/// Settings when the table gives none, %.
const DEFAULT_LIMITS: &[u8] = &[10, 25, 50, 75, 100];

impl FidelitySettings {
    fn of(v: &serde_json::Value) -> Option<FidelitySettings> {
        serde_json::from_value(v.clone()).ok()
    }

    /// The core counts measured: those written, else the tenant's CPUs alone.
    fn counts(&self) -> Vec<usize> {
        if self.core_counts.is_empty() {
            vec![self.cores.max(1)]
        } else {
            self.core_counts.clone()
        }
    }

    /// The core count `k` as ids name it: only when more than one is swept, so a run of one
    /// count keeps the ids it always had.
    fn named(&self, k: usize) -> Option<usize> {
        (self.core_counts.len() > 1).then_some(k)
    }

    /// The condition id of setting `s` with no load (`50%`) or with `load` (`50%+cpu@100`);
    /// on `k` cores when ids name it (`50%/2c`, `50%/2c+cpu@100`).
    fn condition_id(s: u8, k: Option<usize>, load: Option<(&str, u8)>) -> String {
        let point = match k {
            None => format!("{s}%"),
            Some(k) => format!("{s}%/{k}c"),
        };
        match load {
            None => point,
            Some((id, i)) => format!("{point}+{id}@{i}"),
        }
    }

    /// The id of probe `id`'s variant on `k` cores when ids name it (`cpu-int-2c`; the
    /// characters of a scenario id), else `id`.
    fn probe_id(id: &str, k: Option<usize>) -> String {
        match k {
            None => id.to_string(),
            Some(k) => format!("{id}-{k}c"),
        }
    }

    /// The declared probe a variant on `k` cores was derived from (its id without the
    /// count), for the profile's benchmark column.
    fn benchmark<'i>(&self, id: &'i str, k: usize) -> &'i str {
        match self.named(k) {
            Some(k) => id.strip_suffix(&format!("-{k}c")).unwrap_or(id),
            None => id,
        }
    }

    /// The CPUs setting `s` on `k` cores leaves the tenant.
    fn cpus(s: u8, k: usize) -> f64 {
        k as f64 * f64::from(s) / 100.0
    }

    /// Setting, load and core count of condition `c`, when it is one of these settings'.
    fn point_of(&self, c: &Condition) -> Option<(u8, bool, usize)> {
        self.counts().into_iter().find_map(|k| {
            self.limits.iter().find_map(|&s| {
                let load = (self.load.as_str(), c.intensity);
                if c.id == Self::condition_id(s, self.named(k), None) {
                    Some((s, false, k))
                } else if c.id == Self::condition_id(s, self.named(k), Some(load)) {
                    Some((s, true, k))
                } else {
                    None
                }
            })
        })
    }

    /// The core count of probe variant `id`, when it is one of these settings'.
    fn probe_cores(&self, id: &str) -> Option<usize> {
        let counts = self.counts();
        if self.core_counts.len() <= 1 {
            return counts.first().copied();
        }
        let (_, suffix) = id.rsplit_once('-')?;
        let k: usize = suffix.strip_suffix('c')?.parse().ok()?;
        counts.contains(&k).then_some(k)
    }

    /// Whether the plan measures probe `p` under condition `c`: a variant only under the
    /// conditions of its own core count (a cell of another count would measure `k` threads
    /// against a limit of `s x j` CPUs, which the profile has no row for).
    fn measures(&self, plan: &Plan, p: usize, c: usize) -> bool {
        let probe = plan.probes.get(p).and_then(|x| self.probe_cores(&x.id));
        let cond = plan
            .conditions
            .get(c)
            .and_then(|x| self.point_of(x))
            .map(|x| x.2);
        match (probe, cond) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        }
    }

    /// Leaves out of `needs` the cells the plan does not measure.
    fn keep_measured(&self, plan: &Plan, needs: &mut Needs) {
        needs.cells.retain(|&(p, c)| self.measures(plan, p, c));
    }
}

/// Whether probe `name` has a `threads` parameter (it can use `k` cores).
fn has_threads(name: &str) -> bool {
    isobench_workloads::probe(name).is_some_and(|p| p.params().iter().any(|x| x.name == "threads"))
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
        let (tenant, load, limits, counts) = (
            f.string("tenant"),
            f.string("load"),
            f.int_list("limits", (1, 100)),
            f.int_list("cores", (1, 256)),
        );
        let tenant = one_of(
            f,
            "tenant",
            tenant,
            &victims,
            |t| format!("`{t}` is not a victim tenant of this file"),
            format!(
                "write tenant = \"{}\" (the limit is swept where the probes run)",
                victims.first().copied().unwrap_or("victim")
            ),
        );
        let load = one_of(
            f,
            "load",
            load,
            &ids,
            |l| format!("no [[stressor]] has the id `{l}`"),
            format!(
                "write load = \"{}\", or add a [[stressor]] with that name or label",
                ids.first().copied().unwrap_or("cpu")
            ),
        );
        let limits = match limits {
            None => DEFAULT_LIMITS.to_vec(),
            Some((span, steps)) => f
                .increasing(
                    span,
                    "limits",
                    "the settings",
                    "distinct % of the tenant's CPUs in 1..=100, increasing",
                    &steps,
                )
                .into_iter()
                .map(|i| i as u8)
                .collect(),
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
        let core_counts = match counts {
            None => Vec::new(),
            Some((span, counts)) => core_counts(f, sc, &tenant, cores, span, counts),
        };
        serde_json::to_value(FidelitySettings {
            tenant,
            limits,
            load,
            cores,
            core_counts,
        })
        .expect("settings serialize")
    }

    /// Each setting on each core count twice: with the neighbours idle and with the load
    /// stressor in every aggressor; the swept tenant's CPU limit set for the condition's
    /// trials. Paired trials. With `cores`, the probes are replaced by their variants.
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
        if !platform.capabilities().live_cpu_limit {
            r.error(sc.source.error(
                Span::default(),
                "platform",
                format!(
                    "[fidelity] changes a tenant's CPU limit, and the {platform} platform enforces no limit \
                     it can change while a tenant runs"
                ),
                "platform = \"cgroup\" (or auto as root)",
                "run as root so tenants are cgroups",
            ));
        }
        let counts = set.counts();
        if !set.core_counts.is_empty() {
            r.replace_probes(variants(r.planned_probes(), &set));
        }
        let limit = |s: u8, k: usize| {
            [(
                set.tenant.clone(),
                LimitOverride {
                    cpus: Some(FidelitySettings::cpus(s, k)),
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
            counts
                .iter()
                .flat_map(|&k| set.limits.iter().map(move |&s| (s, k)))
                .map(|(s, k)| Variant {
                    id: FidelitySettings::condition_id(s, set.named(k), Some((&st.id, i))),
                    intensity: i,
                    params: st.params.clone(),
                })
                .collect()
        });
        let mut conditions = Vec::new();
        for (k, s) in counts
            .iter()
            .flat_map(|&k| set.limits.iter().map(move |&s| (k, s)))
        {
            conditions.push(Condition {
                id: FidelitySettings::condition_id(s, set.named(k), None),
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
                limits: limit(s, k),
                candidate: false,
                window: None,
            });
            if let Some(c) = loaded
                .iter()
                .find(|c| set.point_of(c) == Some((s, true, k)))
            {
                let mut c = c.clone();
                c.limits = limit(s, k);
                c.design = Design::Paired;
                c.design_reason =
                    "paired: the limit is set for the whole block, so the load runs throughout"
                        .into();
                conditions.push(c);
            }
        }
        let cores = if set.core_counts.is_empty() {
            format!("its {} CPU(s)", set.cores)
        } else {
            format!(
                "{} core(s) (each probe with as many threads)",
                join(counts.iter().map(|k| k.to_string()))
            )
        };
        r.note(format!(
            "fidelity: tenant {}'s CPU limit at {} of {cores}, neighbours idle and with {}",
            set.tenant,
            join(set.limits.iter().map(|s| format!("{s}%"))),
            set.load
        ));
        conditions
    }

    /// The matrix's size and duration, counting only the cells measured.
    fn estimate(&self, plan: &Plan) -> Estimate {
        match FidelitySettings::of(&plan.settings) {
            Some(set) => matrix::schedule::estimate_cells(plan, &|p, c| set.measures(plan, p, c)),
            None => matrix::schedule::estimate(plan),
        }
    }

    /// The matrix's first rounds, each probe variant under the conditions of its count only.
    fn first_needs(&self, plan: &Plan) -> Needs {
        let mut needs = matrix::schedule::first_needs(plan);
        if let Some(set) = FidelitySettings::of(&plan.settings) {
            set.keep_measured(plan, &mut needs);
        }
        needs
    }

    /// The matrix's stopping rule over the cells measured.
    fn needs(&self, plan: &Plan, results: &Results) -> Needs {
        let mut needs = matrix::analysis::needs(plan, results);
        if let Some(set) = FidelitySettings::of(&plan.settings) {
            set.keep_measured(plan, &mut needs);
        }
        needs
    }

    fn nothing_to_run(&self) -> NothingToRun {
        NothingToRun {
            field: "fidelity.limits",
            problem: "no CPU limit setting is left to measure",
            allowed: "settings in 1..=100 (% of the tenant's CPUs)",
            fix: "write limits = [10, 25, 50, 75, 100] in [fidelity]",
        }
    }

    fn analyze(&self, i: Inputs<'_>) -> Analysis {
        matrix::analysis_with(i, FidelitySettings::of, |a, plan, mut set| {
            // A variant's cells under the conditions of another core count were never measured.
            let index = |probe: &str, cond: &str| {
                Some((
                    plan.probes.iter().position(|p| p.id == probe)?,
                    plan.conditions.iter().position(|c| c.id == cond)?,
                ))
            };
            a.cells.retain(|c| {
                index(&c.probe, &c.condition).is_none_or(|(p, ci)| set.measures(plan, p, ci))
            });
            if set.cores == 0 {
                // No cpuset of its own: 100% was every CPU the plan gave it.
                set.cores = plan
                    .tenants
                    .iter()
                    .find(|t| t.name == set.tenant)
                    .map_or(1, |t| t.cpus.len());
            }
            a.sections.push(profile(plan, &set, &a.cells));
        })
    }
}

/// Checks `cores = [...]` (written at `span`) against tenant `tenant`, whose cpuset has
/// `cpuset` CPUs (0: none), and the scenario's probes: increasing counts, a cpuset with as
/// many CPUs as the largest, and a `threads` parameter in every probe when one is above 1.
fn core_counts(
    f: &mut Fields<'_, '_>,
    sc: &Scenario,
    tenant: &str,
    cpuset: usize,
    span: Span,
    counts: Vec<i64>,
) -> Vec<usize> {
    let sorted: Vec<usize> = f
        .increasing(
            span,
            "cores",
            "the core counts",
            "distinct core counts, 1..=the CPUs of the tenant's cpuset, increasing",
            &counts,
        )
        .into_iter()
        .map(|k| k as usize)
        .collect();
    let most = sorted.last().copied().unwrap_or(1);
    let example = if most == 1 {
        "cpuset = \"0\"".to_string()
    } else {
        format!("cpuset = \"0-{}\"", most - 1)
    };
    if cpuset == 0 {
        f.error(
            span,
            "cores",
            format!(
                "tenant `{tenant}` has no cpuset, so the {most} core(s) it is measured on are \
                 not its own"
            ),
            "core counts up to the CPUs of the swept tenant's cpuset",
            format!(
                "give tenant `{tenant}` a cpuset of {most} CPU(s) ({example}), or remove `cores`"
            ),
        );
    } else if most > cpuset {
        let fit: Vec<String> = sorted
            .iter()
            .filter(|&&k| k <= cpuset)
            .map(|k| k.to_string())
            .collect();
        let write = if fit.is_empty() {
            String::new()
        } else {
            format!("write cores = [{}], or ", fit.join(", "))
        };
        f.error(
            span,
            "cores",
            format!("tenant `{tenant}`'s cpuset has {cpuset} CPU(s), fewer than {most} cores"),
            &format!("1..={cpuset}"),
            format!("{write}give tenant `{tenant}` a cpuset of {most} CPU(s) ({example})"),
        );
    }
    if most > 1 {
        let threaded: Vec<&str> = isobench_workloads::PROBES
            .iter()
            .map(|p| p.name())
            .filter(|n| has_threads(n))
            .collect();
        for p in sc.probes.iter().filter(|p| !has_threads(&p.name)) {
            f.error(
                span,
                "cores",
                format!(
                    "probe `{}` ({}) has no `threads` parameter, so it cannot run on {most} \
                     cores",
                    p.id, p.name
                ),
                &format!(
                    "with a core count above 1, probes with `threads` ({})",
                    threaded.join(", ")
                ),
                format!(
                    "write cores = [1], or remove the [[probe]] {} from this file",
                    p.name
                ),
            );
        }
    }
    sorted
}

/// Every planned probe once per core count of `set`, with `threads` set to the count (a
/// probe without the parameter runs as written: the settings refused it above one core),
/// each named after its count when ids name it.
fn variants(
    probes: &[crate::plan::PlannedProbe],
    set: &FidelitySettings,
) -> Vec<crate::plan::PlannedProbe> {
    set.counts()
        .into_iter()
        .flat_map(|k| {
            probes.iter().map(move |p| {
                let mut v = p.clone();
                v.id = FidelitySettings::probe_id(&p.id, set.named(k));
                if has_threads(&p.name) {
                    v.params.set("threads", serde_json::Value::from(k as u64));
                }
                v
            })
        })
        .collect()
}

/// `a, b, c`.
fn join(xs: impl Iterator<Item = String>) -> String {
    xs.collect::<Vec<_>>().join(", ")
}

/// Why q under a limit is flagged when the trial's rate windows are shorter than the CFS
/// period.
const SHORT_WINDOWS: &str = "untrustworthy: v is the median of windows shorter than the CPU \
     quota's 100 ms period, so windows that fall wholly in a throttled stretch pull it down; \
     it understates what the limit gave (longer trials fix it: at least 2.3 s)";

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
    let short_windows = isobench_workloads::probes::nominal_rate_window(plan.trial.duration)
        < std::time::Duration::from_micros(isobench_platform::limits::CPU_PERIOD_US);
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
    )
    .with_plot(Plot::Curve {
        x: 0,
        y: vec![9],
        by: vec![2, 3, 4],
        limit: Some(Guide {
            at: 100.0,
            label: "q = 100%: the limit holds exactly".into(),
        }),
        marks: Vec::new(),
        y2: Vec::new(),
    });
    for c in &plan.conditions {
        let Some((s, loaded, k)) = set.point_of(c) else {
            continue;
        };
        for cell in cells
            .iter()
            .filter(|x| x.condition == c.id && x.tenant == set.tenant)
        {
            let mut row = vec![
                Value::number(f64::from(s), 0),
                Value::number(FidelitySettings::cpus(s, k), 2),
                Value::text_of(if loaded {
                    format!("{}@{}", set.load, c.intensity)
                } else {
                    "none".to_string()
                }),
                Value::text_of(format!(
                    "{} {} [{}]",
                    set.benchmark(&cell.probe, k),
                    cell.metric,
                    cell.unit
                )),
                Value::number(k as f64, 0),
            ];
            row.extend(measured_values(cell, s, short_windows));
            section.push(row);
        }
    }
    section.notes.extend(profile_notes(set, short_windows));
    section
}

/// The five measured columns of a profile row (v, v_ref, v_ref x s, v / v_ref, q) for setting
/// `s` %: the paired comparison's, or the reason it did not run, or empty.
fn measured_values(cell: &Cell, s: u8, short_windows: bool) -> Vec<Value> {
    let share = f64::from(s) / 100.0;
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
            } else if s < 100 && short_windows {
                ratio_v = ratio_v.flagged(SHORT_WINDOWS);
                q = q.flagged(SHORT_WINDOWS);
            }
            vec![
                Value::number(v, digits(v)),
                Value::number(v_ref, digits(v_ref)),
                Value::number(expected, digits(expected)),
                ratio_v,
                q,
            ]
        }
        None if cell.all_dnr() => {
            let reason = cell
                .dnr
                .as_ref()
                .map(|d| d.reason.clone())
                .unwrap_or_default();
            (0..5)
                .map(|_| Value::Dnr {
                    reason: reason.clone(),
                })
                .collect()
        }
        None => (0..5).map(|_| Value::Empty).collect(),
    }
}

/// The notes under the profile: what its columns mean, and why short windows are flagged.
fn profile_notes(set: &FidelitySettings, short_windows: bool) -> Vec<String> {
    let mut notes = Vec::new();
    if short_windows && set.limits.iter().any(|&s| s < 100) {
        notes.push(format!(
            "{} under a limit below 100%: {}",
            isobench_results::UNTRUSTWORTHY_MARK,
            SHORT_WINDOWS.trim_start_matches("untrustworthy: ")
        ));
    }
    if set.core_counts.is_empty() {
        notes.push(format!(
            "s: the CPU limit as a share of the tenant's {} CPU(s) (cpus = s x cores); v: the \
             probe's median under the limit; v_ref: its median alone with no limit (the \
             baseline trials, paired in time); q = v / (v_ref x s), 100% = the limit provided \
             exactly, with the confidence interval of the paired comparison.",
            set.cores
        ));
        notes.push(
            "A probe that uses one CPU cannot use more than one: with more than one core, q \
             above 100% at low settings says the limit left it a whole CPU, not that the \
             platform gave more than promised."
                .into(),
        );
    } else {
        notes.push(format!(
            "cores: the number k of CPUs measured ({} of the tenant's {}), each probe run with \
             k threads; s: the CPU limit as a share of those k (cpus = s x cores); v: the \
             probe's median under the limit; v_ref: its median on k cores alone with no limit \
             (the baseline trials of the same k threads, paired in time); q = v / (v_ref x s), \
             100% = the limit provided exactly, with the confidence interval of the paired \
             comparison.",
            join(set.core_counts.iter().map(|k| k.to_string())),
            set.cores
        ));
    }
    notes
}

/// The word `value` when it is one of `allowed`, else `None`, reported at the value
/// (`problem` of what is written, and `fix`); without a value, the first allowed.
fn one_of(
    f: &mut Fields<'_, '_>,
    key: &str,
    value: Option<Spanned<String>>,
    allowed: &[&str],
    problem: impl FnOnce(&str) -> String,
    fix: String,
) -> Option<String> {
    match value {
        Some(v) if allowed.contains(&v.get_ref().as_str()) => Some(v.into_inner()),
        Some(v) => {
            f.error(
                v.span().into(),
                key,
                problem(v.get_ref()),
                &allowed.join(", "),
                fix,
            );
            None
        }
        None => allowed.first().map(|a| a.to_string()),
    }
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
        assert_eq!(FidelitySettings::condition_id(50, None, None), "50%");
        assert_eq!(
            FidelitySettings::condition_id(50, None, Some(("cpu", 100))),
            "50%+cpu@100"
        );
        assert_eq!(FidelitySettings::condition_id(50, Some(2), None), "50%/2c");
        assert_eq!(
            FidelitySettings::condition_id(50, Some(2), Some(("cpu", 100))),
            "50%/2c+cpu@100"
        );
    }

    fn settings(cores: usize, counts: &[usize]) -> FidelitySettings {
        FidelitySettings {
            tenant: "victim".into(),
            limits: vec![50, 100],
            load: "cpu".into(),
            cores,
            core_counts: counts.to_vec(),
        }
    }

    #[test]
    fn ids_name_the_core_count_only_when_more_than_one_is_swept() {
        // No `cores`: one count, the cpuset's, and the ids of before.
        let one = settings(2, &[]);
        assert_eq!(one.counts(), [2]);
        assert_eq!(one.named(2), None);
        assert_eq!(one.probe_cores("cpu-int"), Some(2));
        // One count written: the same ids.
        let written = settings(2, &[1]);
        assert_eq!(written.counts(), [1]);
        assert_eq!(written.named(1), None);
        assert_eq!(
            FidelitySettings::probe_id("cpu-int", written.named(1)),
            "cpu-int"
        );
        // Two: every id says its count, and a variant's count reads back from its id.
        let two = settings(2, &[1, 2]);
        let id = FidelitySettings::probe_id("cpu-int", two.named(2));
        assert_eq!(id, "cpu-int-2c");
        assert!(crate::scenario::checker::valid_id(&id));
        assert_eq!(two.probe_cores(&id), Some(2));
        assert_eq!(two.probe_cores("cpu-int-1c"), Some(1));
        assert_eq!(two.probe_cores("cpu-int-3c"), None);
        assert_eq!(two.probe_cores("cpu-int"), None);
        assert_eq!(two.benchmark("cpu-int-2c", 2), "cpu-int");
        assert_eq!(one.benchmark("cpu-int", 2), "cpu-int");
        // A label ending in digits keeps its own: the count is after the last '-'.
        assert_eq!(two.probe_cores("ring-12-1c"), Some(1));
        assert_eq!(two.benchmark("ring-12-1c", 1), "ring-12");
    }

    #[test]
    fn the_limit_is_the_setting_times_the_core_count() {
        assert!((FidelitySettings::cpus(50, 2) - 1.0).abs() < 1e-12);
        assert!((FidelitySettings::cpus(25, 1) - 0.25).abs() < 1e-12);
        assert!((FidelitySettings::cpus(100, 2) - 2.0).abs() < 1e-12);
    }

    #[test]
    fn a_condition_reads_back_its_setting_load_and_count() {
        let two = settings(2, &[1, 2]);
        let cond = |id: &str| Condition {
            id: id.into(),
            stressor_id: "cpu".into(),
            name: "cpu".into(),
            class: Class::Cpu,
            intensity: 100,
            params: Default::default(),
            assignments: Default::default(),
            aggressive: false,
            design: Design::Paired,
            design_reason: String::new(),
            capped: false,
            limits: Default::default(),
            candidate: false,
            window: None,
        };
        assert_eq!(two.point_of(&cond("50%/2c")), Some((50, false, 2)));
        assert_eq!(two.point_of(&cond("100%/1c+cpu@100")), Some((100, true, 1)));
        assert_eq!(two.point_of(&cond("50%")), None, "one count's id");
        assert_eq!(
            settings(2, &[]).point_of(&cond("50%+cpu@100")),
            Some((50, true, 2))
        );
    }

    #[test]
    fn settings_stored_before_core_counts_read_as_one_count() {
        let old = serde_json::json!({
            "tenant": "victim", "limits": [50], "load": "cpu", "cores": 1
        });
        let set = FidelitySettings::of(&old).unwrap();
        assert!(set.core_counts.is_empty());
        assert_eq!(set.counts(), [1]);
        // And they write back as they were.
        assert_eq!(serde_json::to_value(&set).unwrap(), old);
    }
}
