//! Scenario files: TOML in, a validated [`Scenario`] out.
//!
//! This is the first of the two configuration phases. It only reads and checks: every field
//! against its allowed values, every probe and stressor against the catalogue, every workload
//! parameter against the workload's own table. It looks at nothing on the host; resolving
//! sizes, CPUs and the trial order is the job of [`crate::plan`]. All problems are reported
//! together, each with file, line, column, field, allowed values and fix
//! ([`ScenarioErrors`]). `docs/scenario.md` documents every field.

use std::collections::BTreeMap;
use std::time::Duration;

use isobench_platform::PlatformKind;
use isobench_stats::Estimator;
use isobench_workloads::ParamValues;
use serde::{Deserialize, Serialize, Serializer};
use toml::{Spanned, Value};

use crate::source::{Source, Span};

pub(crate) mod checker;
mod duration;
mod kind;
mod parse;
mod probes;
mod repetitions;
mod stressors;
mod tenants;
mod top;
mod trial;
mod workloads;

pub use duration::{fmt_duration, parse_duration};
pub(crate) use duration::{value_duration, DURATION_ALLOWED};

/// The built-in `quick` scenario (`isobench run` with no file).
pub const QUICK_TOML: &str = include_str!("../../../../examples/quick.toml");

/// Name under which the built-in scenario is reported.
pub const QUICK_NAME: &str = "<builtin:quick>";

/// The built-in presets (`isobench run --preset NAME`): name, what it is for, scenario text.
pub const PRESETS: &[(&str, &str, &str)] = &[
    (
        "quick",
        "every stressor against a quick probe set, +/-5 points in about five minutes",
        QUICK_TOML,
    ),
    (
        "standard",
        "the quick matrix to +/-2 points, in about fifteen minutes",
        include_str!("../../../../examples/standard.toml"),
    ),
    (
        "null",
        "A/A: the quick matrix against an aggressor that does nothing (false-positive rate)",
        include_str!("../../../../examples/null.toml"),
    ),
    (
        "sensitivity",
        "each stressor's intensity swept: sensitivity curves and the tolerated pressure",
        include_str!("../../../../examples/sensitivity.toml"),
    ),
    (
        "xen-timeline",
        "paper 003 fig. 10: ping RTT while CPU hogs start and stop in four neighbours",
        include_str!("../../../../examples/xen-timeline.toml"),
    ),
    (
        "xen-pairwise",
        "every pair of CPU, DISK and NET in two tenants: each side's time to complete",
        include_str!("../../../../examples/xen-pairwise.toml"),
    ),
    (
        "vits",
        "VITS figures 5-7: cache, memory latency and bandwidth, local communication",
        include_str!("../../../../examples/vits.toml"),
    ),
    (
        "vits-disk",
        "VITS figure 8: the target's file I/O as the interference request size grows",
        include_str!("../../../../examples/vits-disk.toml"),
    ),
    (
        "vits-net",
        "VITS figure 10: the target's bandwidth as the interference datagram size grows",
        include_str!("../../../../examples/vits-net.toml"),
    ),
    (
        "vits-scale",
        "VITS figure 9: the target's file I/O as 1..8 neighbours run the disk program",
        include_str!("../../../../examples/vits-scale.toml"),
    ),
    (
        "hyperv-fidelity",
        "paper 002: a tenant's CPU limit swept 10..100% of 1 and 2 cores, neighbour idle and loaded; q = v / (v_ref x s)",
        include_str!("../../../../examples/hyperv-fidelity.toml"),
    ),
    (
        "ibs",
        "paper 001, Table 2: four web servers, one misbehaving; good-response rate per tenant",
        include_str!("../../../../examples/ibs.toml"),
    ),
    (
        "protection",
        "a service at its target load against each aggressor: isol%, lat-imp%, SLO seconds, work conserved",
        include_str!("../../../../examples/protection.toml"),
    ),
    (
        "protection-knobs",
        "the protection preset under no limits, the v1 limits and the cgroup v2 knobs, side by side",
        include_str!("../../../../examples/protection-knobs.toml"),
    ),
    (
        "tune-cpu",
        "the loosest CPU quota and weight of a batch job that keep a service within its SLO",
        include_str!("../../../../examples/tune-cpu.toml"),
    ),
    (
        "tune-io",
        "the loosest write bandwidth and IOPS cap of a disk flood that keep a service within its SLO",
        include_str!("../../../../examples/tune-io.toml"),
    ),
    (
        "artifacts",
        "paper 004: relay ring in one tenant and across three, null tests, every iteration kept",
        include_str!("../../../../examples/artifacts.toml"),
    ),
];

/// What a preset's header says it reproduces and how long it takes here: its `# reproduces:`
/// and `# takes:` comment lines (continuation lines indented), when it has them.
pub fn preset_header(text: &str) -> (Option<String>, Option<String>) {
    let mut found: [Option<String>; 2] = [None, None];
    let mut current: Option<usize> = None;
    for line in text.lines() {
        let Some(c) = line.strip_prefix('#') else {
            break;
        };
        let c = c.strip_prefix(' ').unwrap_or(c);
        if let Some(rest) = c.strip_prefix("reproduces:") {
            found[0] = Some(rest.trim().to_string());
            current = Some(0);
        } else if let Some(rest) = c.strip_prefix("takes:") {
            found[1] = Some(rest.trim().to_string());
            current = Some(1);
        } else if let (Some(i), true) = (current, c.starts_with("  ")) {
            let s = found[i].get_or_insert_with(String::new);
            s.push(' ');
            s.push_str(c.trim());
        } else {
            current = None;
        }
    }
    let [a, b] = found;
    (a, b)
}

/// The text of preset `name`.
pub fn preset(name: &str) -> Option<&'static str> {
    PRESETS.iter().find(|p| p.0 == name).map(|p| p.2)
}

/// An experiment kind of [`crate::kinds::KINDS`], by name; stored and exported as its name.
/// Made only by the table ([`Kind::named`], [`Kind::default`], and reading one back).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Kind(pub(crate) &'static str);

impl Kind {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        self.0
    }
}

impl std::fmt::Debug for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl Serialize for Kind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}

/// Which platform creates the tenants: `auto`, or one of the platforms of this build
/// ([`isobench_platform::PLATFORMS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlatformChoice {
    /// The first platform that isolates and can work here (cgroup when running as root
    /// with cgroups mounted), else host.
    Auto,
    /// That platform.
    Named(PlatformKind),
}

impl PlatformChoice {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            PlatformChoice::Auto => "auto",
            PlatformChoice::Named(k) => k.name(),
        }
    }

    /// The platform, once one is named.
    pub fn kind(self) -> Option<PlatformKind> {
        match self {
            PlatformChoice::Auto => None,
            PlatformChoice::Named(k) => Some(k),
        }
    }

    /// `auto` and every platform name and alias of this build, for parsing scenario words.
    pub fn table() -> Vec<(&'static str, PlatformChoice)> {
        let mut t = vec![("auto", PlatformChoice::Auto)];
        for e in isobench_platform::PLATFORMS {
            t.push((e.kind.name(), PlatformChoice::Named(e.kind)));
            t.extend(
                e.aliases
                    .iter()
                    .map(|a| (*a, PlatformChoice::Named(e.kind))),
            );
        }
        t
    }
}

impl From<PlatformKind> for PlatformChoice {
    fn from(k: PlatformKind) -> PlatformChoice {
        PlatformChoice::Named(k)
    }
}

impl Serialize for PlatformChoice {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for PlatformChoice {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<PlatformChoice, D::Error> {
        let name = String::deserialize(d)?;
        if name == "auto" {
            return Ok(PlatformChoice::Auto);
        }
        name.parse::<PlatformKind>()
            .map(PlatformChoice::Named)
            .map_err(serde::de::Error::custom)
    }
}

/// Platforms of the design that this build does not provide yet.
const PLANNED_PLATFORMS: &[&str] = &[];

pub use isobench_common::Role;

/// What to do with stressors that can take a host down (fork bomb, memory hog, disk flood)
/// when the tenants are plain host processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnsafeOnHost {
    /// Stop before anything runs, with an explanation (the default).
    Refuse,
    /// Leave them out of the run and say so.
    Skip,
    /// Run them, capped (64 tasks, a quarter of usable memory, 1 GiB of files).
    Allow,
}

/// Where tenants without a `cpuset` of their own run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// On every CPU of the host, where the scheduler puts them (the default).
    Shared,
    /// Each on CPUs of its own: the victims first, on the CPUs that take the disk's
    /// interrupts when the host says which, the aggressors on the rest.
    Split,
}

/// Timing of trials and the rules for disturbed ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialSettings {
    /// Wall-time budget of one probe run.
    #[serde(with = "secs")]
    pub duration: Duration,
    /// Time before the first measurement of every block: the stressor ramps up, or the
    /// previous block's effects fade before a baseline.
    #[serde(with = "secs")]
    pub warmup: Duration,
    /// Window in which the aggressor's stressor is measured alone (victims idle) at the start
    /// of each contended block; zero turns the aggressor's own degradation off.
    #[serde(with = "secs")]
    pub solo: Duration,
    /// A tenant that has not answered this long after its trial should have ended is
    /// recorded as DNR (did not respond).
    #[serde(with = "secs")]
    pub timeout: Duration,
    /// CPUs of load from outside the run above which a trial is marked disturbed.
    pub max_outside_load: f64,
    /// How many times a disturbed trial is repeated before it is kept, flagged.
    pub max_retries: u32,
    /// A baseline block is placed before every `baseline_every` contended blocks.
    pub baseline_every: u32,
    /// How each degradation is measured (see [`DesignChoice`]).
    #[serde(default)]
    pub design: DesignChoice,
    /// Full on+off cycle of the on/off design; `None` = chosen by the pilot.
    #[serde(default)]
    pub period: Option<Duration>,
    /// Window length of the on/off design; `None` = chosen by the pilot.
    #[serde(default)]
    pub window: Option<Duration>,
    /// Length of the pilot run of each probe (noise and its correlation time, measured
    /// before the first trial with the neighbours idle); zero skips the pilot.
    #[serde(default = "default_pilot", with = "secs")]
    pub pilot: Duration,
    /// Longest on/off trial; the pilot sizes each probe's trial up to this.
    #[serde(default = "default_onoff_max", with = "secs")]
    pub onoff_max: Duration,
}

fn default_onoff_max() -> Duration {
    Duration::from_secs(4)
}

fn default_pilot() -> Duration {
    Duration::from_millis(1500)
}

/// How the degradations of a run are measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum DesignChoice {
    /// The on/off design where the stressor's effect stops when its tenant is frozen and the
    /// probe measures in windows; paired trials everywhere else.
    #[default]
    Auto,
    /// The on/off design wherever the probe measures in windows, even for stressors whose
    /// effect outlasts a freeze (the result then says so).
    OnOff,
    /// Paired trials everywhere: each contended trial next to a baseline trial.
    Paired,
}

impl DesignChoice {
    /// The word used in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            DesignChoice::Auto => "auto",
            DesignChoice::OnOff => "onoff",
            DesignChoice::Paired => "paired",
        }
    }
}

impl Default for TrialSettings {
    fn default() -> Self {
        TrialSettings {
            duration: Duration::from_secs(1),
            warmup: Duration::from_millis(500),
            solo: Duration::from_secs(1),
            timeout: Duration::from_secs(30),
            max_outside_load: 0.25,
            max_retries: 2,
            baseline_every: 1,
            design: DesignChoice::Auto,
            period: None,
            window: None,
            pilot: default_pilot(),
            onoff_max: default_onoff_max(),
        }
    }
}

/// How many times each condition is repeated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepetitionPolicy {
    /// Rounds always run.
    pub min: u32,
    /// Rounds never exceeded.
    pub max: u32,
    /// Target half-width of every degradation's confidence interval, percentage points.
    pub ci_half_width: f64,
    /// Confidence level of the intervals (0.95).
    pub confidence: f64,
    /// Statistic the degradation compares: the median (robust, the default) or the mean.
    #[serde(default = "median")]
    pub estimator: Estimator,
    /// Correction of significance for multiple comparisons across the matrix.
    #[serde(default)]
    pub correction: isobench_stats::Correction,
    /// Wall time after which no new round starts when the last one would overrun it (the
    /// cells still wide are counted as such); `None`: rounds run up to `max`.
    #[serde(default)]
    pub max_time: Option<Duration>,
}

fn median() -> Estimator {
    Estimator::Median
}

impl Default for RepetitionPolicy {
    fn default() -> Self {
        RepetitionPolicy {
            min: 3,
            max: 10,
            ci_half_width: 2.0,
            confidence: 0.95,
            estimator: Estimator::Median,
            correction: isobench_stats::Correction::Holm,
            max_time: None,
        }
    }
}

/// One `key = value` of a tenant's limits, as written, with where it was written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LimitEntry {
    /// Key (`memory`).
    pub key: String,
    /// Value as text (`"1G"`).
    pub value: String,
    /// Where the key is.
    pub key_span: Span,
    /// Where the value is.
    pub value_span: Span,
}

/// A tenant as the scenario declares it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantSpec {
    /// Unique name (`[a-z0-9-]`, used in cgroup names).
    pub name: String,
    /// Victim or aggressor.
    pub role: Role,
    /// Platform, when it overrides the scenario's.
    pub platform: Option<PlatformChoice>,
    /// Limits, including the network rates of `[tenant.network]` as `net_*` keys.
    pub limits: Vec<LimitEntry>,
    /// Whether the tenant gets its own network namespace.
    pub netns: bool,
    /// Where the tenant is declared.
    pub span: Span,
    /// Index of the `[[tenant]]` table that declares it (one table with `count = N` declares
    /// N tenants), for errors that name the field.
    #[serde(default)]
    pub table: usize,
    /// The table's own `name` when it declares a pool (`count`): the tenants are then named
    /// `NAME-1..NAME-N`, and `group` is `NAME`.
    #[serde(default)]
    pub group: Option<String>,
    /// The user's container image the tenant runs from (`name:tag`, already local: never
    /// pulled), with the agent mounted into it; only on the `oci` and `k8s` platforms.
    #[serde(default)]
    pub image: Option<String>,
    /// Where `image` is.
    #[serde(default)]
    pub image_span: Option<Span>,
}

/// Most tenants one `[[tenant]]` table may declare with `count`.
pub const MAX_TENANT_COUNT: i64 = 256;

/// A probe as the scenario declares it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeSpec {
    /// Unique id: the `label`, or the probe name.
    pub id: String,
    /// Probe name.
    pub name: String,
    /// Parameters, checked, defaults filled in (sizes may still be "auto" = null).
    pub params: ParamValues,
    /// Metrics to report; empty means every metric the probe declares.
    pub metrics: Vec<String>,
    /// Where the probe is declared.
    pub span: Span,
    /// Where its name is.
    pub name_span: Span,
}

/// A stressor as the scenario declares it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StressorSpec {
    /// Unique id: the `label`, or the stressor name.
    pub id: String,
    /// Stressor name.
    pub name: String,
    /// Intensities to run it at, 0..=100.
    pub intensities: Vec<u8>,
    /// Parameters, checked, defaults filled in.
    pub params: ParamValues,
    /// Where the stressor is declared.
    pub span: Span,
    /// Where its name is.
    pub name_span: Span,
}

/// A validated scenario. Host-independent: see [`crate::plan::Plan::resolve`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    /// The file it came from (kept so later phases can point into it).
    pub source: Source,
    /// Scenario name.
    pub name: String,
    /// One-line description.
    pub description: String,
    /// Experiment kind.
    pub kind: Kind,
    /// Seed of the trial order and of the statistics; `None` picks one at run time (and
    /// records it).
    pub seed: Option<u64>,
    /// Default platform of the tenants.
    pub platform: PlatformChoice,
    /// Policy for aggressive stressors on the host platform.
    pub unsafe_on_host: UnsafeOnHost,
    /// Where tenants without a cpuset run.
    pub placement: Placement,
    /// Trial timing.
    pub trial: TrialSettings,
    /// Repetition policy.
    pub repetitions: RepetitionPolicy,
    /// Tenants, in file order.
    pub tenants: Vec<TenantSpec>,
    /// Probes, in file order.
    pub probes: Vec<ProbeSpec>,
    /// Stressors, in file order.
    pub stressors: Vec<StressorSpec>,
    /// The kind's own settings, from its `[KIND]` table, as the kind checked them (`null`
    /// for a kind without settings).
    #[serde(default)]
    pub settings: serde_json::Value,
}

// ---------------------------------------------------------------------------------------------
// Raw form, as decoded by serde (types loose, spans kept).

/// The shared fields of the top level; [`crate::fields::top_level`] reports keys that are
/// neither these nor a kind's table, so serde need not deny them.
#[derive(Deserialize)]
struct RawScenario {
    name: Option<Spanned<String>>,
    description: Option<Spanned<String>>,
    kind: Option<Spanned<String>>,
    seed: Option<Spanned<Value>>,
    platform: Option<Spanned<String>>,
    unsafe_on_host: Option<Spanned<String>>,
    placement: Option<Spanned<String>>,
    trial: Option<RawTrial>,
    repetitions: Option<Spanned<RawRepetitions>>,
    #[serde(default)]
    tenant: Vec<Spanned<RawTenant>>,
    #[serde(default)]
    probe: Vec<Spanned<RawProbe>>,
    #[serde(default)]
    stressor: Vec<Spanned<RawStressor>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTrial {
    duration: Option<Spanned<Value>>,
    warmup: Option<Spanned<Value>>,
    solo: Option<Spanned<Value>>,
    timeout: Option<Spanned<Value>>,
    max_outside_load: Option<Spanned<Value>>,
    max_retries: Option<Spanned<Value>>,
    baseline_every: Option<Spanned<Value>>,
    design: Option<Spanned<String>>,
    period: Option<Spanned<Value>>,
    window: Option<Spanned<Value>>,
    pilot: Option<Spanned<Value>>,
    onoff_max: Option<Spanned<Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRepetitions {
    min: Option<Spanned<Value>>,
    max: Option<Spanned<Value>>,
    ci_half_width: Option<Spanned<Value>>,
    confidence: Option<Spanned<Value>>,
    estimator: Option<Spanned<String>>,
    correction: Option<Spanned<String>>,
    max_time: Option<Spanned<Value>>,
}

type RawTable = BTreeMap<Spanned<String>, Spanned<Value>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTenant {
    name: Option<Spanned<String>>,
    count: Option<Spanned<Value>>,
    role: Option<Spanned<String>>,
    platform: Option<Spanned<String>>,
    limits: Option<RawTable>,
    network: Option<Spanned<RawNetwork>>,
    image: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNetwork {
    namespace: Option<Spanned<bool>>,
    rate: Option<Spanned<Value>>,
    egress: Option<Spanned<Value>>,
    ingress: Option<Spanned<Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProbe {
    name: Option<Spanned<String>>,
    label: Option<Spanned<String>>,
    params: Option<RawTable>,
    metrics: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStressor {
    name: Option<Spanned<String>>,
    label: Option<Spanned<String>>,
    intensity: Option<Spanned<Value>>,
    params: Option<RawTable>,
}

impl Scenario {
    /// The tenants with `role`.
    pub fn tenants_with(&self, role: Role) -> impl Iterator<Item = &TenantSpec> {
        self.tenants.iter().filter(move |t| t.role == role)
    }
}

/// Serde helper: durations as seconds (f64) in JSON.
pub(crate) mod secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let v = f64::deserialize(d)?;
        if !v.is_finite() || v < 0.0 {
            return Err(serde::de::Error::custom(
                "a duration is a non-negative number",
            ));
        }
        Ok(Duration::from_secs_f64(v))
    }
}
