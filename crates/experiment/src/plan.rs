//! A resolved scenario: the [`Plan`] every later step borrows, and what the planner knows
//! about the host ([`HostView`]).
//!
//! A plan holds everything that depends on where the run happens: the platform (`auto`
//! becomes `cgroup` as root, else `host`), each tenant's limits checked against the host, the
//! CPUs it may use and where its probes are pinned, the sizes its workloads use (derived from
//! the tenant's own memory limit and CPUs, never from host-wide figures), how much memory
//! those workloads need (checked against the limit now, and by touching it before the first
//! trial), which stressors are left out on an unisolated host, the seed, and the estimated
//! duration. [`crate::resolve`] makes one from a scenario; the trial order is derived from
//! the plan and the seed by [`crate::schedule`]. This module depends on neither. A plan is
//! serializable and stored with the run, so a resumed run follows exactly the same plan.

use std::collections::BTreeMap;

use isobench_common::format_size as fmt_bytes;
use isobench_platform::{HostInfo, Knob, KnobSet, LimitChanges, Limits};
use isobench_workloads::cachesize::HostCaches;
use isobench_workloads::{Class, Env, ParamValues};
use serde::{Deserialize, Serialize};

pub use isobench_results::Design;

use crate::scenario::{fmt_duration, Kind, PlatformChoice, RepetitionPolicy, Role, TrialSettings};

const MIB: u64 = 1 << 20;

/// Memory an agent process needs besides its workloads (binary, threads, buffers).
pub const AGENT_OVERHEAD: u64 = 48 * MIB;

/// Smallest memory limit a tenant may have (the agent alone needs about this much).
pub const MIN_TENANT_MEMORY: u64 = 64 * MIB;

/// Smallest pids limit a victim may have (the agent, its worker threads, probe helpers).
pub const MIN_VICTIM_PIDS: u64 = 32;

/// The platform a run uses, once `auto` is decided.
pub type Platform = isobench_platform::PlatformKind;

/// What the planner needs to know about the host.
#[derive(Debug, Clone)]
pub struct HostView {
    /// CPUs, memory nodes, RAM.
    pub info: HostInfo,
    /// The controller's own environment: caches, page size, available memory.
    pub env: Env,
    /// Platforms known not to work here, with why (by platform name).
    pub unavailable: BTreeMap<String, String>,
    /// Whether a platform not in `unavailable` is checked on this host when first asked
    /// about (a run on cgroups never asks the container engines), or assumed to work (a
    /// synthetic host).
    pub check_live: bool,
    /// The answers of the live checks so far.
    checked: std::sync::Arc<std::sync::Mutex<BTreeMap<String, Option<String>>>>,
    /// The caches as this process's latency sweep found them (sysfs can lie on virtual
    /// machines), with the sysfs figures beside them; workloads are sized from them at plan
    /// time, so every tenant gets the same sizes.
    pub caches: HostCaches,
    /// The disk whose interrupts the host delivers to some CPUs only, and those CPUs (when
    /// exactly one disk raises interrupts); `placement = "split"` gives them to the victims.
    pub disk_irq: Option<crate::cause::DiskIrq>,
}

impl HostView {
    /// Reads this host.
    pub fn detect() -> anyhow::Result<HostView> {
        let env = Env::detect();
        let caches = HostCaches::detect(&env);
        Ok(HostView {
            info: HostInfo::detect()?,
            unavailable: BTreeMap::new(),
            check_live: true,
            checked: Default::default(),
            caches,
            disk_irq: isobench_platform::noise::irq_affinity()
                .ok()
                .and_then(|irqs| serde_json::to_value(irqs).ok())
                .and_then(|v| crate::cause::disk_irq(&v)),
            env,
        })
    }

    /// A made-up host for tests and the fake backend: `cpus` CPUs, `memory` bytes of RAM
    /// (all available), 48K/1M/32M caches, cgroups usable when `cgroup` is true.
    pub fn synthetic(cpus: usize, memory: u64, cgroup: bool) -> HostView {
        use isobench_platform::CpuList;
        use isobench_workloads::CacheInfo;
        let cache = |level, size| CacheInfo {
            level,
            kind: if level == 1 { "Data" } else { "Unified" }.into(),
            size,
            line: 64,
            shared_cpus: format!("0-{}", cpus - 1),
        };
        let env = Env {
            cpus: (0..cpus).collect(),
            host_cpus: cpus,
            mem_usable: memory,
            mem_limit: None,
            caches: vec![cache(1, 48 << 10), cache(2, 1 << 20), cache(3, 32 << 20)],
            page_size: 4096,
            is_root: cgroup,
            workdir: std::env::temp_dir(),
        };
        HostView {
            info: HostInfo {
                cpus: CpuList::from_cpus(0..cpus as u32),
                mems: CpuList::from_cpus([0]),
                memory_bytes: memory,
            },
            caches: HostCaches::from_sysfs(&env),
            env,
            unavailable: (!cgroup)
                .then(|| {
                    (
                        "cgroup".to_string(),
                        "isobench runs as uid 1000 and creating cgroups needs root".to_string(),
                    )
                })
                .into_iter()
                .collect(),
            check_live: false,
            checked: Default::default(),
            disk_irq: None,
        }
    }

    /// Why `kind` cannot be used here, when it cannot.
    pub fn unavailable(&self, kind: Platform) -> Option<String> {
        if let Some(why) = self.unavailable.get(kind.name()) {
            return Some(why.clone());
        }
        if !self.check_live {
            return None;
        }
        let mut checked = self.checked.lock().unwrap_or_else(|p| p.into_inner());
        checked
            .entry(kind.name().to_string())
            .or_insert_with(|| (kind.entry().available)().err().map(|e| e.to_string()))
            .clone()
    }

    /// Host CPUs as plain numbers.
    pub fn cpus(&self) -> Vec<usize> {
        self.info.cpus.iter().map(|c| c as usize).collect()
    }
}

/// Choices the command line can override, and what to do with unsupported workloads.
#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    /// Platform instead of the scenario's.
    pub platform: Option<PlatformChoice>,
    /// Seed instead of the scenario's.
    pub seed: Option<u64>,
    /// Seed used when neither the scenario nor the options give one.
    pub random_seed: u64,
    /// Leave out (with a note) probes and stressors that cannot run here, instead of
    /// refusing the scenario. Used for the built-in scenario.
    pub skip_unsupported: bool,
}

/// A tenant, resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedTenant {
    /// Name.
    pub name: String,
    /// Victim or aggressor.
    pub role: Role,
    /// The limits the user set, checked against the host (the platform adds safe defaults
    /// for aggressors and records them).
    pub limits: Limits,
    /// Own network namespace.
    pub netns: bool,
    /// CPUs the tenant may run on.
    pub cpus: Vec<usize>,
    /// Memory the tenant may use, bytes (its limit, or the host's available memory).
    pub memory: u64,
    /// Memory its workloads need at most, bytes (checked before the first trial).
    pub mem_need: u64,
    /// CPU for the measuring thread of its probes (first CPU of its cpuset, when it has one).
    pub pin: Option<usize>,
    /// CPU for probe helpers (second CPU of its cpuset, else the first).
    pub pin_peer: Option<usize>,
    /// The user's container image it runs from (`name:tag`), else the agent's own.
    #[serde(default)]
    pub image: Option<String>,
}

/// A probe, resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedProbe {
    /// Unique id (label or name).
    pub id: String,
    /// Probe name.
    pub name: String,
    /// Resource class.
    pub class: Class,
    /// Parameters, sizes resolved from the victims' limits where the probe sizes from memory.
    pub params: ParamValues,
    /// Metrics reported; empty means every metric except run facts.
    pub metrics: Vec<String>,
    /// Whether the probe returns window series (it can be measured with the on/off design).
    #[serde(default)]
    pub windowed: bool,
    /// Services its trials need in tenants and where it runs against them; `None`: it runs
    /// in every victim on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<crate::serving::Serving>,
}

/// What one tenant runs during a condition: a stressor at an intensity, with its parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assignment {
    /// Stressor name.
    pub stressor: String,
    /// Intensity 0..=100.
    pub intensity: u8,
    /// Parameters.
    pub params: ParamValues,
}

impl Assignment {
    /// This assignment for each of `tenants`.
    pub fn to_each<'a>(
        &self,
        tenants: impl IntoIterator<Item = &'a str>,
    ) -> BTreeMap<String, Assignment> {
        tenants
            .into_iter()
            .map(|t| (t.to_string(), self.clone()))
            .collect()
    }
}

/// A contended condition: what each tenant runs while the victims are measured. It is named
/// and classed after its stressor at one intensity (the matrix gives every aggressor that
/// stressor); what runs where is its set of [`Assignment`]s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Condition {
    /// `stressor-id@intensity` (`cpu@100`).
    pub id: String,
    /// The stressor's id (label or name).
    pub stressor_id: String,
    /// Stressor name.
    pub name: String,
    /// Resource class contended.
    pub class: Class,
    /// Intensity 0..=100.
    pub intensity: u8,
    /// Parameters.
    pub params: ParamValues,
    /// What each tenant runs, by tenant name; a tenant not listed is idle (victims run the
    /// trial's probe). Plans stored before conditions had assignments have none; loading
    /// them through [`Plan::from_stored`] gives every aggressor the condition's stressor, as
    /// those runs did.
    #[serde(default)]
    pub assignments: BTreeMap<String, Assignment>,
    /// A stressor that can take a host down (fork bomb, memory hog, disk flood).
    pub aggressive: bool,
    /// How its degradations are measured (windowed probes; the others are always paired).
    #[serde(default = "paired")]
    pub design: Design,
    /// Why that design.
    #[serde(default)]
    pub design_reason: String,
    /// Runs on the unisolated host with caps (`unsafe_on_host = "allow"`).
    pub capped: bool,
    /// The knobs the condition changes on tenants, by tenant name: applied before its block
    /// of trials, the planned values restored after, and recorded with every trial. Empty
    /// for a condition that changes no knob.
    #[serde(default, skip_serializing_if = "Overrides::is_empty")]
    pub limits: Overrides,
    /// A setting a search may visit (the `tune` kind's grid): measured only when the search
    /// asks for it, and shown only once measured.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub candidate: bool,
    /// Windows the victims' probe records in its whole (paired) trials beside this
    /// condition, when it measures in windows: the `tune` kind's isol% SLO is a quantile
    /// over them. `None`: no windows (the paired design needs none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<std::time::Duration>,
}

/// The CPU quota alone a condition sets on one tenant (`None` lifts it): the override the
/// fidelity kind makes. It collects into [`Overrides`] as a [`KnobOverride`] of one knob.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LimitOverride {
    /// CPU quota in CPUs (the `cpus` limit); `None` lifts the tenant's quota.
    pub cpus: Option<f64>,
}

impl From<LimitOverride> for KnobOverride {
    fn from(o: LimitOverride) -> KnobOverride {
        KnobOverride(LimitChanges::cpus(o.cpus))
    }
}

/// The knobs a condition changes on one tenant while its trials run: each knob it names is
/// set to its value, or lifted (back to no limit, the default weight, no protection) where
/// the value is `null`; a knob it does not name stays as planned.
///
/// Stored as a JSON object keyed by limit key, values in the limit syntax: `{"cpus": 0.5,
/// "memory": "512M", "memory_low": "256M", "weight": 50, "io_weight": 200,
/// "io_read_bps": "50M", "pids": null}`. Plans stored when only the CPU quota could change
/// (`{"cpus": 0.5}`, `{"cpus": null}`) read the same as before.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KnobOverride(pub LimitChanges);

impl std::ops::Deref for KnobOverride {
    type Target = LimitChanges;
    fn deref(&self) -> &LimitChanges {
        &self.0
    }
}

impl KnobOverride {
    /// Parses `key=value` pairs, a value of `None` lifting the knob; each key must be a live
    /// knob ([`Knob`]) and each value parse as that limit.
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Result<KnobOverride, String> {
        let mut c = LimitChanges::default();
        for (key, value) in pairs {
            let Some(knob) = Knob::from_key(key) else {
                return Err(format!(
                    "`{key}` is not a knob a condition can change; the knobs: {}",
                    KnobSet::ALL.keys()
                ));
            };
            if c.knobs().contains(knob) {
                return Err(format!("knob `{key}` is given twice; keep one"));
            }
            let Some(value) = value else {
                c.lift.insert(knob);
                continue;
            };
            // Each value on its own (a burst is checked against the quota when it is set).
            let pairs: Vec<(&str, &str)> = match knob {
                Knob::CpuBurst => vec![("cpus", "4096"), (key, value)],
                _ => vec![(key, value)],
            };
            let one = Limits::from_pairs(pairs).map_err(|e| e.to_string())?;
            knob.copy(&one, &mut c.set);
        }
        Ok(KnobOverride(c))
    }
}

impl Serialize for KnobOverride {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.to_json().serialize(s)
    }
}

impl<'de> Deserialize<'de> for KnobOverride {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<KnobOverride, D::Error> {
        use serde::de::Error;
        let map = BTreeMap::<String, serde_json::Value>::deserialize(d)?;
        let mut pairs: Vec<(String, Option<String>)> = Vec::new();
        for (k, v) in map {
            let v = match v {
                serde_json::Value::Null => None,
                serde_json::Value::String(s) => Some(s),
                serde_json::Value::Number(n) => Some(n.to_string()),
                other => {
                    return Err(D::Error::custom(format!(
                        "knob `{k}`: `{other}` is neither a value (a number or a string such \
                         as \"512M\") nor null (lift the knob)"
                    )))
                }
            };
            pairs.push((k, v));
        }
        KnobOverride::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_deref())))
            .map_err(D::Error::custom)
    }
}

/// The knobs a condition changes, by tenant name.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Overrides(pub BTreeMap<String, KnobOverride>);

impl Overrides {
    /// Whether the condition changes no knob.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The CPUs tenant `t` runs on under these overrides: the cpuset they set for it, else
    /// its planned CPUs (its stressor's workers pin to them).
    pub fn cpus_of(&self, t: &PlannedTenant) -> Vec<usize> {
        match self.0.get(&t.name).and_then(|o| o.set.cpuset.as_ref()) {
            Some(set) => set.iter().map(|c| c as usize).collect(),
            None => t.cpus.clone(),
        }
    }

    /// The first knob of these overrides that `platform` cannot change while a tenant
    /// lives, as `tenant T: why`.
    pub fn refusal(&self, platform: Platform) -> Option<String> {
        let live = platform.capabilities().live_knobs;
        self.0.iter().find_map(|(t, o)| {
            let why = o.check().err().or_else(|| {
                o.knobs()
                    .iter()
                    .find_map(|k| live.refusal(platform.name(), k))
            })?;
            Some(format!("tenant {t}: {why}"))
        })
    }
}

impl std::ops::Deref for Overrides {
    type Target = BTreeMap<String, KnobOverride>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Overrides {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl FromIterator<(String, KnobOverride)> for Overrides {
    fn from_iter<I: IntoIterator<Item = (String, KnobOverride)>>(iter: I) -> Overrides {
        Overrides(iter.into_iter().collect())
    }
}

impl FromIterator<(String, LimitOverride)> for Overrides {
    fn from_iter<I: IntoIterator<Item = (String, LimitOverride)>>(iter: I) -> Overrides {
        Overrides(iter.into_iter().map(|(t, o)| (t, o.into())).collect())
    }
}

/// Estimated size and duration of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Trials in one full round.
    pub trials_per_round: u32,
    /// Trials if the stopping rule is met after the minimum rounds.
    pub trials_min: u32,
    /// Trials if every round up to the cap runs in full.
    pub trials_max: u32,
    /// Seconds for `trials_min`.
    pub secs_min: f64,
    /// Seconds for `trials_max`.
    pub secs_max: f64,
}

impl Estimate {
    /// `~2m10s (up to 4m30s)`.
    pub fn text(&self) -> String {
        format!(
            "{} trials, about {} (up to {} trials, {})",
            self.trials_min,
            fmt_secs(self.secs_min),
            self.trials_max,
            fmt_secs(self.secs_max)
        )
    }
}

/// `1m05s`, `42s`.
pub fn fmt_secs(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// A resolved scenario: everything the orchestrator needs, nothing left to decide.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Scenario name.
    pub scenario: String,
    /// Scenario description.
    pub description: String,
    /// Experiment kind.
    pub kind: Kind,
    /// The kind's own settings, as the scenario's `[KIND]` table gave them (`null` for a kind
    /// without settings, and in plans stored before kinds had settings).
    #[serde(default)]
    pub settings: serde_json::Value,
    /// Seed of the trial order and the statistics.
    pub seed: u64,
    /// Platform.
    pub platform: Platform,
    /// Tenants, victims and aggressors in file order.
    pub tenants: Vec<PlannedTenant>,
    /// Probes.
    pub probes: Vec<PlannedProbe>,
    /// Contended conditions (the baseline is implicit).
    pub conditions: Vec<Condition>,
    /// Trial timing.
    pub trial: TrialSettings,
    /// Repetition policy.
    pub repetitions: RepetitionPolicy,
    /// What was decided and why (platform choice, stressors left out, sizes derived).
    pub notes: Vec<String>,
    /// Estimated size and duration.
    pub estimate: Estimate,
    /// io.cost on the workdirs' disk for the run (`run --io-cost`: `on`, `off` or io.cost.qos
    /// parameters); kept with the plan so `--resume` sets it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_cost: Option<String>,
}

impl Plan {
    /// A plan as stored with a run, written by this version or an older one: conditions
    /// stored without assignments and without limits (such a condition would be the
    /// baseline) ran the condition's stressor in every aggressor, and get those assignments.
    pub fn from_stored(value: serde_json::Value) -> serde_json::Result<Plan> {
        let mut plan: Plan = serde_json::from_value(value)?;
        let aggressors: Vec<String> = plan
            .tenants_with(Role::Aggressor)
            .map(|t| t.name.clone())
            .collect();
        for c in plan
            .conditions
            .iter_mut()
            .filter(|c| c.assignments.is_empty() && c.limits.is_empty())
        {
            let run = Assignment {
                stressor: c.name.clone(),
                intensity: c.intensity,
                params: c.params.clone(),
            };
            c.assignments = run.to_each(aggressors.iter().map(String::as_str));
        }
        Ok(plan)
    }

    /// Refuses a plan with a condition that changes a knob its platform cannot change while
    /// a tenant lives, naming the condition, the tenant, the knob and why; checked before
    /// any tenant exists.
    pub fn check_live_knobs(&self) -> Result<(), String> {
        match self
            .conditions
            .iter()
            .find_map(|c| Some((c, c.limits.refusal(self.platform)?)))
        {
            Some((c, why)) => Err(format!(
                "condition {} changes knobs while its tenants live, and {why}",
                c.id
            )),
            None => Ok(()),
        }
    }

    /// Tenants with `role`, in order.
    pub fn tenants_with(&self, role: Role) -> impl Iterator<Item = &PlannedTenant> {
        self.tenants.iter().filter(move |t| t.role == role)
    }

    /// How the degradation of probe `p` under condition `c` is measured: the condition's
    /// design when the probe measures in windows, paired trials otherwise.
    pub fn design(&self, p: usize, c: usize) -> Design {
        match self.conditions[c].design {
            Design::OnOff if self.probes[p].windowed => Design::OnOff,
            _ => Design::Paired,
        }
    }

    /// Whether any probe under condition `c` is measured with paired trials.
    pub fn has_paired(&self, c: usize) -> bool {
        (0..self.probes.len()).any(|p| self.design(p, c) == Design::Paired)
    }

    /// Whether the results report metric `metric` of probe `probe_id`: the scenario's
    /// list when it gives one, else every metric except run facts (sizes and counts that do
    /// not change between conditions). Metrics are stored either way.
    pub fn tracks(&self, probe_id: &str, metric: &str) -> bool {
        let Some(p) = self.probes.iter().find(|p| p.id == probe_id) else {
            return true;
        };
        if !p.metrics.is_empty() {
            return p.metrics.iter().any(|m| m == metric);
        }
        !isobench_workloads::probe(&p.name)
            .and_then(|w| {
                w.metrics_for(&p.params)
                    .into_iter()
                    .find(|m| m.name == metric)
            })
            .is_some_and(|m| is_run_fact(m.direction, m.aggregate))
    }

    /// One paragraph describing the plan, shown before the run starts.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "scenario {} ({}), platform {}, seed {}\n",
            self.scenario,
            self.kind.as_str(),
            self.platform.name(),
            self.seed
        );
        for t in &self.tenants {
            let limits = t.limits.to_string();
            s.push_str(&format!(
                "  tenant {:<12} {:<9} limits: {}  cpus: {}  needs ~{}\n",
                t.name,
                t.role.as_str(),
                if limits.is_empty() { "none" } else { &limits },
                cpu_list(&t.cpus),
                fmt_bytes(t.mem_need)
            ));
            if let Some(image) = &t.image {
                s.push_str(&format!(
                    "  tenant {:<12} image: {image} (local only, never pulled; the agent is \
                     mounted into it)\n",
                    t.name
                ));
            }
        }
        s.push_str(&format!(
            "  probes:     {}\n",
            self.probes
                .iter()
                .map(|p| p.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        let fixed: Vec<&str> = std::iter::once("baseline")
            .chain(
                self.conditions
                    .iter()
                    .filter(|c| !c.candidate)
                    .map(|c| c.id.as_str()),
            )
            .collect();
        s.push_str(&format!("  conditions: {}\n", fixed.join(", ")));
        let candidates: Vec<&Condition> = self.conditions.iter().filter(|c| c.candidate).collect();
        if let (Some(first), Some(last)) = (candidates.first(), candidates.last()) {
            s.push_str(&format!(
                "  candidates: {} settings a search measures as it asks for them ({} .. {}), \
                 {}\n",
                candidates.len(),
                first.id,
                last.id,
                first.design_reason
            ));
        }
        let onoff: Vec<&str> = self
            .conditions
            .iter()
            .filter(|c| c.design == Design::OnOff)
            .map(|c| c.id.as_str())
            .collect();
        if !onoff.is_empty() {
            s.push_str(&format!(
                "  design: on/off (aggressor frozen and thawed, windows compared) for {}\n",
                onoff.join(", ")
            ));
        }
        for c in self
            .conditions
            .iter()
            .filter(|c| c.design == Design::Paired && !c.candidate)
        {
            s.push_str(&format!("  design: {} {}\n", c.id, c.design_reason));
        }
        let unwindowed: Vec<&str> = self
            .probes
            .iter()
            .filter(|p| !p.windowed)
            .map(|p| p.id.as_str())
            .collect();
        if !unwindowed.is_empty() && !onoff.is_empty() {
            s.push_str(&format!(
                "  design: paired for {} (no window series)\n",
                unwindowed.join(", ")
            ));
        }
        let solo = if self.trial.solo.is_zero() {
            "aggressors' own rate not measured (solo = 0s)".to_string()
        } else {
            format!("aggressor alone {}", fmt_duration(self.trial.solo))
        };
        s.push_str(&format!(
            "  trials of {}, warm-up {}, {solo}; {}\n",
            fmt_duration(self.trial.duration),
            fmt_duration(self.trial.warmup),
            self.kind.experiment().stopping_rule(self)
        ));
        if let Some(budget) = self.repetitions.max_time {
            s.push_str(&format!(
                "  time budget: {} (no round starts that would end past it)\n",
                fmt_duration(budget)
            ));
        }
        s.push_str(&format!("  estimate: {}\n", self.estimate.text()));
        for n in &self.notes {
            s.push_str(&format!("  note: {n}\n"));
        }
        s
    }
}

fn paired() -> Design {
    Design::Paired
}

/// Whether a metric with this shape is a run fact (a size used, a count) rather than a
/// measurement: the workloads declare facts as higher-is-better maxima.
pub fn is_run_fact(
    direction: isobench_workloads::Direction,
    agg: isobench_workloads::Aggregate,
) -> bool {
    direction == isobench_workloads::Direction::Higher && agg == isobench_workloads::Aggregate::Max
}

pub(crate) fn cpu_list(cpus: &[usize]) -> String {
    isobench_platform::CpuList::from_cpus(cpus.iter().map(|&c| c as u32)).to_string()
}

/// The environment a workload sees inside tenant `t`: its CPUs, its memory limit.
pub fn tenant_env(host: &HostView, t: &PlannedTenant) -> Env {
    let mut env = host.env.clone();
    env.cpus = t.cpus.clone();
    env.mem_limit = t.limits.memory;
    env.mem_usable = t.memory;
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(v: serde_json::Value) -> Result<KnobOverride, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn the_stored_cpu_only_forms_read_as_before() {
        let set = read(json!({"cpus": 0.5})).unwrap();
        assert_eq!(set, LimitOverride { cpus: Some(0.5) }.into());
        assert_eq!(set.set.cpus, Some(0.5));
        assert_eq!(serde_json::to_value(&set).unwrap(), json!({"cpus": 0.5}));
        // null lifts the quota.
        let lifted = read(json!({"cpus": null})).unwrap();
        assert_eq!(lifted, LimitOverride { cpus: None }.into());
        assert!(lifted.lift.contains(Knob::Cpus));
        assert_eq!(
            serde_json::to_value(&lifted).unwrap(),
            json!({"cpus": null})
        );
        // A whole condition as stored, and an empty map as none.
        let stored: Overrides = serde_json::from_value(json!({"victim": {"cpus": 1}})).unwrap();
        assert_eq!(stored["victim"].set.cpus, Some(1.0));
        assert!(serde_json::from_value::<Overrides>(json!({}))
            .unwrap()
            .is_empty());
    }

    #[test]
    fn every_knob_reads_sets_lifts_and_writes_back_the_same() {
        let v = json!({
            "cpus": 0.25, "shares": 512, "cpu_burst": "5ms", "cpuset": "1", "memory": "1G",
            "memory_min": "64M", "memory_low": "128M", "memory_high": "768M", "swap": null,
            "pids": 32, "io_read_bps": "50M", "io_write_bps": null, "io_read_iops": 1000,
            "io_write_iops": 500, "io_weight": 300, "io_latency": "10ms"
        });
        let o = read(v.clone()).unwrap();
        assert_eq!(o.knobs(), KnobSet::ALL);
        assert_eq!(o.lift.keys(), "swap, io_write_bps");
        assert_eq!(o.set.memory_low, Some(128 << 20));
        assert_eq!(o.set.cpu_burst, Some(5000));
        assert_eq!(
            o.set.cpu_weight,
            Some(isobench_platform::CpuWeight::Shares(512))
        );
        assert_eq!(serde_json::to_value(&o).unwrap(), v);
        assert_eq!(read(serde_json::to_value(&o).unwrap()).unwrap(), o);
    }

    #[test]
    fn a_bad_knob_or_value_names_it_and_the_fix() {
        let e = read(json!({"mems": "0"})).unwrap_err();
        assert!(
            e.contains("`mems` is not a knob a condition can change") && e.contains("memory_low"),
            "{e}"
        );
        let e = read(json!({"memory": "lots"})).unwrap_err();
        assert!(
            e.contains("limit `memory=lots`") && e.contains("e.g."),
            "{e}"
        );
        let e = read(json!({"memory": true})).unwrap_err();
        assert!(e.contains("neither a value"), "{e}");
        let e = read(json!({"shares": 512, "weight": 50})).unwrap_err();
        assert!(e.contains("given twice"), "{e}");
    }

    #[test]
    fn the_cpu_only_override_collects_into_the_knob_overrides() {
        let o: Overrides = [("victim".to_string(), LimitOverride { cpus: Some(0.5) })]
            .into_iter()
            .collect();
        assert_eq!(
            serde_json::to_value(&o).unwrap(),
            json!({"victim": {"cpus": 0.5}})
        );
    }

    #[test]
    fn a_knob_the_platform_cannot_change_live_is_named_with_the_platform() {
        let o: Overrides = serde_json::from_value(json!({
            "victim": {"cpus": 0.5, "memory_high": "1G"}
        }))
        .unwrap();
        assert_eq!(o.refusal(isobench_platform::PlatformKind::CGROUP), None);
        let why = o.refusal(isobench_platform::oci::KIND).unwrap();
        assert!(
            why.starts_with("tenant victim: the `oci` platform cannot change `memory_high`"),
            "{why}"
        );
        let why = o.refusal(isobench_platform::k8s::KIND).unwrap();
        assert!(why.contains("`k8s` platform cannot change `cpus`"), "{why}");
        // A CPU split changes in place on cgroup and oci; vm and k8s say why not.
        let split: Overrides = serde_json::from_value(json!({"batch": {"cpuset": "1-3"}})).unwrap();
        assert_eq!(split.refusal(isobench_platform::PlatformKind::CGROUP), None);
        assert_eq!(split.refusal(isobench_platform::oci::KIND), None);
        for kind in [isobench_platform::vm::KIND, isobench_platform::k8s::KIND] {
            let why = split.refusal(kind).unwrap();
            assert!(why.contains("cannot change `cpuset`"), "{why}");
        }
    }
}
