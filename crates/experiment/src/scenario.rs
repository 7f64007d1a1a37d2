//! Scenario files: TOML in, a validated [`Scenario`] out.
//!
//! This is the first of the two configuration phases. It only reads and checks: every field
//! against its allowed values, every probe and stressor against the catalogue, every workload
//! parameter against the workload's own table. It looks at nothing on the host; resolving
//! sizes, CPUs and the trial order is the job of [`crate::plan`]. All problems are reported
//! together, each with file, line, column, field, allowed values and fix
//! ([`ScenarioErrors`]). `docs/scenario.md` documents every field.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use isobench_platform::PlatformKind;
use isobench_stats::Estimator;
use isobench_workloads::{nearest_names, ParamError, ParamValues, PROBES, STRESSORS};
use serde::{Deserialize, Serialize};
use toml::{Spanned, Value};

use crate::fields;
use crate::source::{ScenarioError, ScenarioErrors, Source, Span};

/// The built-in `quick` scenario (`isobench run` with no file).
pub const QUICK_TOML: &str = include_str!("../../../examples/quick.toml");

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
        include_str!("../../../examples/standard.toml"),
    ),
    (
        "null",
        "A/A: the quick matrix against an aggressor that does nothing (false-positive rate)",
        include_str!("../../../examples/null.toml"),
    ),
    (
        "sensitivity",
        "each stressor's intensity swept: sensitivity curves and the tolerated pressure",
        include_str!("../../../examples/sensitivity.toml"),
    ),
    (
        "xen-timeline",
        "paper 003 fig. 10: ping RTT while CPU hogs start and stop in four neighbours",
        include_str!("../../../examples/xen-timeline.toml"),
    ),
    (
        "xen-pairwise",
        "every pair of CPU, DISK and NET in two tenants: each side's time to complete",
        include_str!("../../../examples/xen-pairwise.toml"),
    ),
    (
        "vits",
        "VITS figures 5-7: cache, memory latency and bandwidth, local communication",
        include_str!("../../../examples/vits.toml"),
    ),
    (
        "vits-disk",
        "VITS figure 8: the target's file I/O as the interference request size grows",
        include_str!("../../../examples/vits-disk.toml"),
    ),
    (
        "vits-net",
        "VITS figure 10: the target's bandwidth as the interference datagram size grows",
        include_str!("../../../examples/vits-net.toml"),
    ),
    (
        "vits-scale",
        "VITS figure 9: the target's file I/O as 1..8 neighbours run the disk program",
        include_str!("../../../examples/vits-scale.toml"),
    ),
    (
        "hyperv-fidelity",
        "paper 002: a tenant's CPU limit swept 10..100% of 1 and 2 cores, neighbour idle and loaded; q = v / (v_ref x s)",
        include_str!("../../../examples/hyperv-fidelity.toml"),
    ),
    (
        "ibs",
        "paper 001, Table 2: four web servers, one misbehaving; good-response rate per tenant",
        include_str!("../../../examples/ibs.toml"),
    ),
    (
        "protection",
        "a service at its target load against each aggressor: isol%, lat-imp%, SLO seconds, work conserved",
        include_str!("../../../examples/protection.toml"),
    ),
    (
        "protection-knobs",
        "the protection preset under no limits, the v1 limits and the cgroup v2 knobs, side by side",
        include_str!("../../../examples/protection-knobs.toml"),
    ),
    (
        "artifacts",
        "paper 004: relay ring in one tenant and across three, null tests, every iteration kept",
        include_str!("../../../examples/artifacts.toml"),
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

pub use crate::kinds::Kind;

/// The words of `kind`: every kind of [`crate::kinds::KINDS`].
fn kind_words() -> Vec<(&'static str, Kind)> {
    crate::kinds::KINDS
        .iter()
        .filter_map(|k| Some((k.name(), Kind::named(k.name())?)))
        .collect()
}

/// Kinds that exist in the design but are not implemented yet, for a helpful error.
const PLANNED_KINDS: &[&str] = &[];

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

fn span_of<T>(s: &Spanned<T>) -> Span {
    s.span().into()
}

// ---------------------------------------------------------------------------------------------

/// Collects errors while a scenario is checked.
pub(crate) struct Checker<'a> {
    pub(crate) src: &'a Source,
    errors: Vec<ScenarioError>,
}

impl Checker<'_> {
    pub(crate) fn err(
        &mut self,
        span: Span,
        field: &str,
        problem: String,
        allowed: &str,
        fix: String,
    ) {
        self.errors
            .push(self.src.error(span, field, problem, allowed, fix));
    }
}

const DURATION_ALLOWED: &str =
    "a duration: a string such as \"250ms\", \"2s\", \"1.5s\" or \"1m\", or a number of seconds";

/// Parses `"250ms"`, `"2s"`, `"1.5s"`, `"1m"`, `"100us"`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let idx = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(idx);
    let v: f64 = num.parse().ok()?;
    let secs = match unit.trim() {
        "" | "s" | "sec" | "secs" => v,
        "ms" => v / 1e3,
        "us" | "µs" => v / 1e6,
        "m" | "min" => v * 60.0,
        _ => return None,
    };
    if !secs.is_finite() || !(0.0..=86_400.0).contains(&secs) {
        return None;
    }
    Some(Duration::from_secs_f64(secs))
}

/// Formats a duration the way scenario files write it (`250ms`, `2s`, `1.5s`, `2m`).
pub fn fmt_duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 1000.0 {
        format!("{}ms", ms.round())
    } else if d.as_secs_f64() < 120.0 {
        let s = d.as_secs_f64();
        if (s - s.round()).abs() < 1e-9 {
            format!("{}s", s.round())
        } else {
            format!("{s:.1}s")
        }
    } else {
        let m = d.as_secs_f64() / 60.0;
        if (m - m.round()).abs() < 1e-9 {
            format!("{}m", m.round())
        } else {
            format!("{m:.1}m")
        }
    }
}

fn value_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Integer(i) => Some(i.to_string()),
        Value::Float(f) => Some(f.to_string()),
        Value::Boolean(b) => Some(b.to_string()),
        Value::Array(a) => a
            .iter()
            .map(value_text)
            .collect::<Option<Vec<_>>>()
            .map(|v| v.join(",")),
        Value::Datetime(d) => Some(d.to_string()),
        Value::Table(_) => None,
    }
}

/// A value as it would be written in TOML: numbers and booleans bare, the rest quoted.
fn toml_value(text: &str) -> String {
    if text.parse::<f64>().is_ok() || text == "true" || text == "false" {
        text.to_string()
    } else {
        format!("\"{text}\"")
    }
}

pub(crate) fn value_kind(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a number",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a date",
        Value::Array(_) => "an array",
        Value::Table(_) => "a table",
    }
}

impl Checker<'_> {
    pub(crate) fn duration(
        &mut self,
        v: &Option<Spanned<Value>>,
        field: &str,
        default: Duration,
    ) -> Duration {
        let Some(v) = v else { return default };
        let parsed = match v.get_ref() {
            Value::String(s) => parse_duration(s),
            Value::Integer(i) if *i >= 0 => Some(Duration::from_secs(*i as u64)),
            Value::Float(f) if f.is_finite() && *f >= 0.0 => Some(Duration::from_secs_f64(*f)),
            _ => None,
        };
        match parsed {
            Some(d) => d,
            None => {
                let key = field.rsplit('.').next().unwrap_or(field);
                self.err(
                    span_of(v),
                    field,
                    format!(
                        "{} is not a duration",
                        value_text(v.get_ref()).map_or_else(
                            || value_kind(v.get_ref()).to_string(),
                            |t| format!("`{t}`")
                        )
                    ),
                    DURATION_ALLOWED,
                    format!("write {key} = \"{}\"", fmt_duration(default)),
                );
                default
            }
        }
    }

    /// A duration or `"auto"` (`None`), within `range`.
    fn auto_duration(
        &mut self,
        v: &Option<Spanned<Value>>,
        field: &str,
        range: (Duration, Duration),
    ) -> Option<Duration> {
        let v = v.as_ref()?;
        if matches!(v.get_ref(), Value::String(s) if s == "auto") {
            return None;
        }
        let d = self.duration(&Some(v.clone()), field, range.0);
        if d < range.0 || d > range.1 {
            let key = field.rsplit('.').next().unwrap_or(field);
            self.err(
                span_of(v),
                field,
                format!("{} is out of range", fmt_duration(d)),
                &format!(
                    "\"auto\" or a duration from {} to {}",
                    fmt_duration(range.0),
                    fmt_duration(range.1)
                ),
                format!("write {key} = \"auto\""),
            );
            return None;
        }
        Some(d)
    }

    pub(crate) fn int(
        &mut self,
        v: &Option<Spanned<Value>>,
        field: &str,
        range: (i64, i64),
        default: i64,
    ) -> i64 {
        let Some(v) = v else { return default };
        let key = field.rsplit('.').next().unwrap_or(field);
        match v.get_ref() {
            Value::Integer(i) if *i >= range.0 && *i <= range.1 => *i,
            other => {
                let problem = match other {
                    Value::Integer(i) => format!("{i} is out of range"),
                    o => format!("{} is not an integer", value_kind(o)),
                };
                self.err(
                    span_of(v),
                    field,
                    problem,
                    &format!("an integer in {}..={}", range.0, range.1),
                    format!("write {key} = {default}"),
                );
                default
            }
        }
    }

    pub(crate) fn float(
        &mut self,
        v: &Option<Spanned<Value>>,
        field: &str,
        ok: impl Fn(f64) -> bool,
        allowed: &str,
        default: f64,
    ) -> f64 {
        let Some(v) = v else { return default };
        let key = field.rsplit('.').next().unwrap_or(field);
        let x = match v.get_ref() {
            Value::Float(f) => Some(*f),
            Value::Integer(i) => Some(*i as f64),
            _ => None,
        };
        match x {
            Some(x) if x.is_finite() && ok(x) => x,
            _ => {
                let problem = match x {
                    Some(x) => format!("{x} is out of range"),
                    None => format!("{} is not a number", value_kind(v.get_ref())),
                };
                self.err(
                    span_of(v),
                    field,
                    problem,
                    allowed,
                    format!("write {key} = {default}"),
                );
                default
            }
        }
    }

    pub(crate) fn word<T: Copy>(
        &mut self,
        v: &Spanned<String>,
        field: &str,
        table: &[(&str, T)],
        planned: &[&str],
    ) -> Option<T> {
        let s = v.get_ref().as_str();
        if let Some((_, t)) = table.iter().find(|(w, _)| *w == s) {
            return Some(*t);
        }
        let words: Vec<&str> = table.iter().map(|(w, _)| *w).collect();
        let allowed = words.join(", ");
        let key = field.rsplit('.').next().unwrap_or(field);
        if planned.contains(&s) {
            self.err(
                span_of(v),
                field,
                format!("`{s}` is not available in this version of isobench yet"),
                &allowed,
                format!("use one of: {allowed}"),
            );
        } else {
            let near = nearest_names(s, words.iter().copied());
            let fix = match near.first() {
                Some(n) => format!("did you mean {key} = \"{n}\"?"),
                None => format!("write {key} = \"{}\"", words[0]),
            };
            self.err(
                span_of(v),
                field,
                format!("unknown value `{s}`"),
                &allowed,
                fix,
            );
        }
        None
    }
}

/// Whether `s` is a valid probe, stressor or tenant id ([`ID_ALLOWED`]).
pub(crate) fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 32
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && s.starts_with(|c: char| c.is_ascii_lowercase())
}

const ID_ALLOWED: &str =
    "1 to 32 characters: lower-case letters, digits and '-', starting with a letter";

fn id_fix(s: &str) -> String {
    let mut out: String = s
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(32)
        .collect();
    if !out.starts_with(|c: char| c.is_ascii_lowercase()) {
        out.insert(0, 't');
        out.truncate(32);
    }
    format!("write \"{out}\"")
}

impl Scenario {
    /// The built-in `quick` scenario.
    pub fn quick() -> Scenario {
        Scenario::parse(Source::new(QUICK_NAME, QUICK_TOML))
            .expect("the built-in quick scenario is valid")
    }

    /// Reads and checks a scenario file's text. Returns every problem found.
    pub fn parse(source: Source) -> Result<Scenario, ScenarioErrors> {
        let shared = fields::struct_fields::<RawScenario>();
        let kinds: Vec<&str> = kind_words()
            .iter()
            .map(|(w, _)| *w)
            .chain(PLANNED_KINDS.iter().copied())
            .collect();
        let decoded = fields::top_level(&source.text, shared, &kinds)
            .and_then(|top| Ok((top, toml::from_str::<RawScenario>(&source.text)?)));
        let (top, raw) = match decoded {
            Ok(r) => r,
            Err(e) => return Err(ScenarioErrors(vec![decode_error(&source, &e)])),
        };
        let mut c = Checker {
            src: &source,
            errors: Vec::new(),
        };
        for key in &top.unknown {
            unknown_top_level(&mut c, key, shared, &kinds);
        }
        let mut sc = check(&mut c, raw);
        sc.settings = kind_settings(&mut c, &sc, top.kind_tables);
        let mut errors = c.errors;
        if errors.is_empty() {
            Ok(Scenario { source, ..sc })
        } else {
            errors.sort_by_key(|e| (e.line, e.column));
            Err(ScenarioErrors(errors))
        }
    }

    /// The tenants with `role`.
    pub fn tenants_with(&self, role: Role) -> impl Iterator<Item = &TenantSpec> {
        self.tenants.iter().filter(move |t| t.role == role)
    }
}

/// Reports a top-level key that is neither a shared field nor a kind's table.
fn unknown_top_level(c: &mut Checker<'_>, key: &Spanned<String>, shared: &[&str], kinds: &[&str]) {
    let name = key.get_ref();
    let near = nearest_names(name, shared.iter().chain(kinds).copied());
    let fix = match near.first() {
        Some(n) => format!("did you mean `{n}`? (see docs/scenario.md)"),
        None => "remove it, or see docs/scenario.md for the fields of a scenario".into(),
    };
    c.err(
        span_of(key),
        name,
        format!("unknown field `{name}`"),
        &format!(
            "the fields {}, or a table named after the kind",
            shared.join(", ")
        ),
        fix,
    );
}

/// The scenario's kind checks its own `[KIND]` table; a table of another kind is an error.
fn kind_settings(
    c: &mut Checker<'_>,
    sc: &Scenario,
    tables: Vec<(Spanned<String>, Spanned<fields::RawTable>)>,
) -> serde_json::Value {
    let kind = sc.kind.experiment();
    let mut own = None;
    for (name, table) in tables {
        if name.get_ref() == kind.name() && own.is_none() {
            own = Some((span_of(&name), table.into_inner()));
        } else {
            let e = fields::other_kinds_table(c.src, &name, kind.name());
            c.errors.push(e);
        }
    }
    let present = own.is_some();
    let (span, table) = own.unwrap_or_default();
    let mut f = fields::Fields::new(c, kind.name(), span, table, present);
    let settings = kind.settings(&mut f, sc);
    f.finish();
    settings
}

/// Turns a TOML decoding error (syntax, wrong type, unknown field) into a located error.
fn decode_error(src: &Source, e: &toml::de::Error) -> ScenarioError {
    let span: Span = e.span().unwrap_or(0..0).into();
    let msg = e.message().trim().to_string();
    let field = src.field_at(span.start);
    let (allowed, fix) = if let Some(rest) = msg.strip_prefix("unknown field ") {
        let (name, expected) = rest.split_once(", expected ").unwrap_or((rest, ""));
        let name = name.trim_matches('`');
        let words: Vec<&str> = expected
            .split(['`', ','])
            .map(|w| w.trim().trim_start_matches("one of").trim())
            .map(|w| w.trim_start_matches("or ").trim())
            .filter(|w| !w.is_empty() && *w != "or")
            .collect();
        let near = nearest_names(name, words.iter().copied());
        let fix = match near.first() {
            Some(n) => format!("did you mean `{n}`? (see docs/scenario.md)"),
            None => "remove it, or see docs/scenario.md for the fields of this table".into(),
        };
        (format!("the fields {}", words.join(", ")), fix)
    } else if msg.starts_with("invalid type") {
        let expected = msg.split("expected ").nth(1).unwrap_or("").to_string();
        (
            expected.clone(),
            format!("write the value as {expected} (see docs/scenario.md)"),
        )
    } else if msg.starts_with("missing field") {
        (
            String::new(),
            "add the field (see docs/scenario.md)".to_string(),
        )
    } else {
        (
            "TOML syntax (https://toml.io)".to_string(),
            "fix the syntax at the marked position: check quotes, brackets and `key = value`"
                .to_string(),
        )
    };
    let problem = if msg.starts_with("unknown field") || msg.starts_with("invalid type") {
        msg.clone()
    } else {
        format!("the file is not valid TOML: {msg}")
    };
    src.error(span, field, problem, allowed, fix)
}

fn check(c: &mut Checker<'_>, raw: RawScenario) -> Scenario {
    let src = c.src;
    let eof = Span { start: 0, end: 0 };

    let name = match &raw.name {
        Some(n) if valid_id(n.get_ref()) => n.get_ref().clone(),
        Some(n) => {
            c.err(
                span_of(n),
                "name",
                format!("`{}` is not a valid scenario name", n.get_ref()),
                ID_ALLOWED,
                id_fix(n.get_ref()),
            );
            String::new()
        }
        None => {
            let stem = std::path::Path::new(&src.name)
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("scenario")
                .trim_start_matches("<builtin:")
                .trim_end_matches('>')
                .to_string();
            if valid_id(&stem) {
                stem
            } else {
                "scenario".into()
            }
        }
    };

    let kind = match &raw.kind {
        Some(k) => c
            .word(k, "kind", &kind_words(), PLANNED_KINDS)
            .unwrap_or_default(),
        None => {
            c.err(
                eof,
                "kind",
                "the scenario does not say what kind of experiment it is".into(),
                &kind_words()
                    .iter()
                    .map(|(w, _)| *w)
                    .collect::<Vec<_>>()
                    .join(", "),
                format!(
                    "add kind = \"{}\" at the top of the file",
                    Kind::default().as_str()
                ),
            );
            Kind::default()
        }
    };

    let seed = raw.seed.as_ref().and_then(|s| match s.get_ref() {
        Value::Integer(i) if *i >= 0 => Some(*i as u64),
        Value::String(t) if t == "random" => None,
        other => {
            c.err(
                span_of(s),
                "seed",
                format!(
                    "{} is not a seed",
                    value_text(other).map_or("this".into(), |t| format!("`{t}`"))
                ),
                "a non-negative integer, or \"random\" (a seed is then chosen and recorded)",
                "write seed = 1".into(),
            );
            None
        }
    });

    let platform_table = PlatformChoice::table();
    let platform = raw
        .platform
        .as_ref()
        .and_then(|p| c.word(p, "platform", &platform_table, PLANNED_PLATFORMS))
        .unwrap_or(PlatformChoice::Auto);

    let unsafe_on_host = raw
        .unsafe_on_host
        .as_ref()
        .and_then(|p| {
            c.word(
                p,
                "unsafe_on_host",
                &[
                    ("refuse", UnsafeOnHost::Refuse),
                    ("skip", UnsafeOnHost::Skip),
                    ("allow", UnsafeOnHost::Allow),
                ],
                &[],
            )
        })
        .unwrap_or(UnsafeOnHost::Refuse);

    let placement = raw
        .placement
        .as_ref()
        .and_then(|p| {
            c.word(
                p,
                "placement",
                &[("shared", Placement::Shared), ("split", Placement::Split)],
                &[],
            )
        })
        .unwrap_or(Placement::Shared);

    let d = TrialSettings::default();
    let trial = match &raw.trial {
        None => d,
        Some(t) => {
            let duration = c.duration(&t.duration, "trial.duration", d.duration);
            if duration < Duration::from_millis(10) && t.duration.is_some() {
                let s = t.duration.as_ref().map(span_of).unwrap_or_default();
                c.err(
                    s,
                    "trial.duration",
                    "a trial shorter than 10ms measures mostly start-up".into(),
                    "10ms or more",
                    "write duration = \"500ms\" or longer".into(),
                );
            }
            TrialSettings {
                duration,
                warmup: c.duration(&t.warmup, "trial.warmup", d.warmup),
                solo: c.duration(&t.solo, "trial.solo", d.solo),
                timeout: c.duration(&t.timeout, "trial.timeout", d.timeout),
                max_outside_load: c.float(
                    &t.max_outside_load,
                    "trial.max_outside_load",
                    |x| x > 0.0,
                    "a number of CPUs greater than 0, such as 0.25",
                    d.max_outside_load,
                ),
                max_retries: c.int(&t.max_retries, "trial.max_retries", (0, 3), 2) as u32,
                baseline_every: c.int(&t.baseline_every, "trial.baseline_every", (1, 100), 1)
                    as u32,
                design: t
                    .design
                    .as_ref()
                    .and_then(|e| {
                        c.word(
                            e,
                            "trial.design",
                            &[
                                ("auto", DesignChoice::Auto),
                                ("onoff", DesignChoice::OnOff),
                                ("paired", DesignChoice::Paired),
                            ],
                            &[],
                        )
                    })
                    .unwrap_or_default(),
                period: c.auto_duration(
                    &t.period,
                    "trial.period",
                    (Duration::from_millis(20), Duration::from_secs(10)),
                ),
                window: c.auto_duration(
                    &t.window,
                    "trial.window",
                    (Duration::from_millis(1), Duration::from_secs(1)),
                ),
                pilot: c.duration(&t.pilot, "trial.pilot", d.pilot),
                onoff_max: c.duration(&t.onoff_max, "trial.onoff_max", d.onoff_max),
            }
        }
    };

    let dr = RepetitionPolicy::default();
    let repetitions = match &raw.repetitions {
        None => dr,
        Some(r) => {
            let rs = span_of(r);
            let r = r.get_ref();
            let min = c.int(&r.min, "repetitions.min", (1, 1000), dr.min as i64) as u32;
            let max = c.int(&r.max, "repetitions.max", (1, 1000), dr.max.max(min) as i64) as u32;
            if max < min {
                let s = r.max.as_ref().map(span_of).unwrap_or(rs);
                c.err(
                    s,
                    "repetitions.max",
                    format!("max ({max}) is smaller than min ({min})"),
                    "an integer no smaller than min",
                    format!("write max = {min} or more"),
                );
            }
            RepetitionPolicy {
                min,
                max: max.max(min),
                ci_half_width: c.float(
                    &r.ci_half_width,
                    "repetitions.ci_half_width",
                    |x| x > 0.0 && x <= 100.0,
                    "percentage points, greater than 0 and at most 100, such as 2.0",
                    dr.ci_half_width,
                ),
                confidence: c.float(
                    &r.confidence,
                    "repetitions.confidence",
                    |x| (0.5..1.0).contains(&x),
                    "a level from 0.5 up to (not including) 1, such as 0.95",
                    dr.confidence,
                ),
                estimator: r
                    .estimator
                    .as_ref()
                    .and_then(|e| {
                        c.word(
                            e,
                            "repetitions.estimator",
                            &[("median", Estimator::Median), ("mean", Estimator::Mean)],
                            &[],
                        )
                    })
                    .unwrap_or(Estimator::Median),
                correction: r
                    .correction
                    .as_ref()
                    .and_then(|e| {
                        c.word(
                            e,
                            "repetitions.correction",
                            &[
                                ("holm", isobench_stats::Correction::Holm),
                                ("bh", isobench_stats::Correction::BenjaminiHochberg),
                                ("none", isobench_stats::Correction::None),
                            ],
                            &[],
                        )
                    })
                    .unwrap_or(isobench_stats::Correction::Holm),
                max_time: r
                    .max_time
                    .as_ref()
                    .map(|_| c.duration(&r.max_time, "repetitions.max_time", Duration::ZERO))
                    .filter(|d| !d.is_zero()),
            }
        }
    };

    let tenants = check_tenants(c, &raw.tenant, &platform_table);
    let probes = check_probes(c, &raw.probe);
    let stressors = check_stressors(c, &raw.stressor);

    Scenario {
        source: src.clone(),
        name,
        description: raw
            .description
            .as_ref()
            .map(|d| d.get_ref().clone())
            .unwrap_or_default(),
        kind,
        seed,
        platform,
        unsafe_on_host,
        placement,
        trial,
        repetitions,
        tenants,
        probes,
        stressors,
        settings: serde_json::Value::Null,
    }
}

fn check_tenants(
    c: &mut Checker<'_>,
    raw: &[Spanned<RawTenant>],
    platform_table: &[(&str, PlatformChoice)],
) -> Vec<TenantSpec> {
    let mut out = Vec::new();
    let mut names = BTreeSet::new();
    for (i, t) in raw.iter().enumerate() {
        let span = span_of(t);
        let t = t.get_ref();
        let field = |f: &str| format!("tenant[{i}].{f}");
        let name = match &t.name {
            Some(n) if valid_id(n.get_ref()) => {
                if !names.insert(n.get_ref().clone()) {
                    c.err(
                        span_of(n),
                        &field("name"),
                        format!("tenant `{}` is declared twice", n.get_ref()),
                        "a name no other tenant uses",
                        format!("rename it, e.g. name = \"{}-2\"", n.get_ref()),
                    );
                }
                n.get_ref().clone()
            }
            Some(n) => {
                c.err(
                    span_of(n),
                    &field("name"),
                    format!("`{}` is not a valid tenant name", n.get_ref()),
                    ID_ALLOWED,
                    id_fix(n.get_ref()),
                );
                format!("tenant{i}")
            }
            None => {
                c.err(
                    span,
                    &field("name"),
                    "the tenant has no name".into(),
                    ID_ALLOWED,
                    format!("add name = \"tenant{i}\""),
                );
                format!("tenant{i}")
            }
        };
        let role = match &t.role {
            Some(r) => c.word(
                r,
                &field("role"),
                &[("victim", Role::Victim), ("aggressor", Role::Aggressor)],
                &[],
            ),
            None => {
                c.err(
                    span,
                    &field("role"),
                    format!("tenant `{name}` has no role"),
                    "victim, aggressor",
                    "add role = \"victim\" (runs probes) or role = \"aggressor\" (runs stressors)"
                        .into(),
                );
                None
            }
        }
        .unwrap_or(Role::Victim);
        let platform = t
            .platform
            .as_ref()
            .and_then(|p| c.word(p, &field("platform"), platform_table, PLANNED_PLATFORMS));

        let mut limits = Vec::new();
        if let Some(table) = &t.limits {
            for (k, v) in table {
                match value_text(v.get_ref()) {
                    Some(text) => limits.push(LimitEntry {
                        key: k.get_ref().clone(),
                        value: text,
                        key_span: span_of(k),
                        value_span: span_of(v),
                    }),
                    None => c.err(
                        span_of(v),
                        &field(&format!("limits.{}", k.get_ref())),
                        "a table is not a limit value".into(),
                        "a number or a string such as \"1G\"",
                        format!("write {} = \"...\"", k.get_ref()),
                    ),
                }
            }
        }
        let mut netns = false;
        if let Some(n) = &t.network {
            let ns = span_of(n);
            let n = n.get_ref();
            netns = n.namespace.as_ref().is_some_and(|b| *b.get_ref());
            for (key, v) in [
                ("net_rate", &n.rate),
                ("net_egress", &n.egress),
                ("net_ingress", &n.ingress),
            ] {
                let Some(v) = v else { continue };
                let short = key.trim_start_matches("net_");
                match value_text(v.get_ref()) {
                    Some(text) => {
                        if !netns {
                            c.err(
                                span_of(v),
                                &field(&format!("network.{short}")),
                                "a network rate needs the tenant's own network namespace".into(),
                                "namespace = true together with rate, egress or ingress",
                                "add namespace = true to this [tenant.network] table".into(),
                            );
                        }
                        limits.push(LimitEntry {
                            key: key.into(),
                            value: text,
                            key_span: span_of(v),
                            value_span: span_of(v),
                        })
                    }
                    None => c.err(
                        span_of(v),
                        &field(&format!("network.{short}")),
                        "a table is not a rate".into(),
                        "a rate in bits/s such as \"100mbit\"",
                        format!("write {short} = \"100mbit\""),
                    ),
                }
            }
            let _ = ns;
        }
        let count = tenant_count(c, &t.count, &field("count"));
        if let Some(img) = &t.image {
            if let Err(why) = isobench_platform::userimage::check_reference(img.get_ref()) {
                c.err(
                    span_of(img),
                    &field("image"),
                    why,
                    "an image reference: name, name:tag, registry/name:tag or name@sha256:...",
                    "write image = \"name:tag\", e.g. image = \"redis:7\"".into(),
                );
            }
        }
        let spec = TenantSpec {
            name,
            role,
            platform,
            limits,
            netns,
            span,
            table: i,
            group: None,
            image: t.image.as_ref().map(|i| i.get_ref().clone()),
            image_span: t.image.as_ref().map(span_of),
        };
        match count {
            None => out.push(spec),
            Some(n) => {
                let at = t.name.as_ref().map_or(span, span_of);
                for k in 1..=n {
                    let member = format!("{}-{k}", spec.name);
                    if valid_id(&member) && !names.insert(member.clone()) {
                        c.err(
                            at,
                            &field("name"),
                            format!(
                                "tenant `{member}` of this pool of {n} is also declared elsewhere"
                            ),
                            "names no other tenant uses (a pool NAME with count = N is \
                             NAME-1..NAME-N)",
                            format!(
                                "rename the pool or the other tenant, e.g. name = \"{}-pool\"",
                                spec.name
                            ),
                        );
                    }
                    out.push(TenantSpec {
                        name: member,
                        group: Some(spec.name.clone()),
                        ..spec.clone()
                    });
                }
                let longest = format!("{}-{n}", spec.name);
                if valid_id(&spec.name) && !valid_id(&longest) {
                    c.err(
                        at,
                        &field("name"),
                        format!(
                            "with count = {n} the last tenant would be called `{longest}`, \
                             longer than 32 characters"
                        ),
                        ID_ALLOWED,
                        format!(
                            "shorten the name to at most {} characters",
                            32 - (longest.len() - spec.name.len())
                        ),
                    );
                }
            }
        }
    }
    let whole = Span { start: 0, end: 0 };
    if raw.is_empty() {
        c.err(
            whole,
            "tenant",
            "the scenario declares no tenants".into(),
            "one or more [[tenant]] tables with role = \"victim\" and one or more with role = \"aggressor\"",
            "add [[tenant]] name = \"victim\" role = \"victim\" and [[tenant]] name = \"aggressor\" role = \"aggressor\" (see examples/quick.toml)".into(),
        );
    } else {
        for (role, other) in [(Role::Victim, "probes"), (Role::Aggressor, "stressors")] {
            if !out.iter().any(|t| t.role == role) {
                let last = out.last().map(|t| t.span).unwrap_or(whole);
                c.err(
                    last,
                    "tenant",
                    format!(
                        "no tenant has role = \"{role}\"; a matrix needs one to run the {other}"
                    ),
                    "at least one victim and one aggressor",
                    format!("add a [[tenant]] with role = \"{role}\""),
                );
            }
        }
    }
    out
}

/// The `count` of a `[[tenant]]` table: `None` when absent (one tenant named as written),
/// else how many tenants the table declares.
fn tenant_count(c: &mut Checker<'_>, v: &Option<Spanned<Value>>, field: &str) -> Option<i64> {
    let v = v.as_ref()?;
    match v.get_ref() {
        Value::Integer(n) if (1..=MAX_TENANT_COUNT).contains(n) => Some(*n),
        other => {
            let problem = match other {
                Value::Integer(n) => format!("count = {n} is out of range"),
                o => format!("{} is not a tenant count", value_kind(o)),
            };
            c.err(
                span_of(v),
                field,
                problem,
                &format!(
                    "an integer in 1..={MAX_TENANT_COUNT}: the table then declares that many \
                     tenants, NAME-1..NAME-N, with the same role, limits and network"
                ),
                "write count = 8, or remove count for a single tenant".into(),
            );
            None
        }
    }
}

fn check_params(
    c: &mut Checker<'_>,
    workload: &str,
    specs: &[isobench_workloads::ParamSpec],
    table: &Option<RawTable>,
    field: &str,
) -> ParamValues {
    let Some(table) = table else {
        return ParamValues::defaults(workload, specs);
    };
    let mut ok_pairs = Vec::new();
    for (k, v) in table {
        let key = k.get_ref();
        let Some(text) = value_text(v.get_ref()) else {
            c.err(
                span_of(v),
                &format!("{field}.{key}"),
                "a table is not a parameter value".into(),
                "a number, a string, a boolean or an array of them",
                format!("write {key} = \"...\""),
            );
            continue;
        };
        // Check each parameter alone so each error points at its own line.
        match ParamValues::from_pairs(workload, specs, [(key.clone(), text.clone())]) {
            Ok(_) => ok_pairs.push((key.clone(), text)),
            Err(e) => {
                let (span, allowed, fix) = match &e {
                    ParamError::Unknown {
                        suggestions, known, ..
                    } => (
                        span_of(k),
                        if known.is_empty() {
                            format!("{workload} takes no parameters")
                        } else {
                            known.clone()
                        },
                        match suggestions.first() {
                            Some(s) => format!("did you mean `{s}`?"),
                            None => "remove it (`isobench list` shows every parameter)".into(),
                        },
                    ),
                    ParamError::Malformed { range, default, .. }
                    | ParamError::OutOfRange { range, default, .. } => (
                        span_of(v),
                        range.clone(),
                        format!(
                            "write {key} = {} (the default) or a value in {range}",
                            toml_value(default)
                        ),
                    ),
                    _ => (span_of(v), String::new(), "see `isobench list`".into()),
                };
                c.err(
                    span,
                    &format!("{field}.{key}"),
                    e.to_string(),
                    &allowed,
                    fix,
                );
            }
        }
    }
    ParamValues::from_pairs(workload, specs, ok_pairs)
        .unwrap_or_else(|_| ParamValues::defaults(workload, specs))
}

fn check_probes(c: &mut Checker<'_>, raw: &[Spanned<RawProbe>]) -> Vec<ProbeSpec> {
    let mut out = Vec::new();
    let mut ids = BTreeSet::new();
    let all: Vec<&str> = PROBES.iter().map(|p| p.name()).collect();
    for (i, p) in raw.iter().enumerate() {
        let span = span_of(p);
        let p = p.get_ref();
        let field = format!("probe[{i}]");
        let Some(name) = &p.name else {
            c.err(
                span,
                &format!("{field}.name"),
                "the probe has no name".into(),
                &all.join(", "),
                "add name = \"cpu-int\" (`isobench list` shows every probe)".into(),
            );
            continue;
        };
        let Some(probe) = isobench_workloads::probe(name.get_ref()) else {
            let n = name.get_ref();
            let near = nearest_names(n, all.iter().copied());
            let fix = if isobench_workloads::stressor(n).is_some() {
                format!("`{n}` is a stressor: move it to a [[stressor]] table")
            } else if let Some(s) = near.first() {
                format!("did you mean name = \"{s}\"?")
            } else {
                "pick a probe from `isobench list`".into()
            };
            c.err(
                span_of(name),
                &format!("{field}.name"),
                format!("unknown probe `{n}`"),
                &all.join(", "),
                fix,
            );
            continue;
        };
        let id = label(c, &p.label, name, &field, &mut ids, "probe");
        let params = check_params(
            c,
            probe.name(),
            probe.params(),
            &p.params,
            &format!("{field}.params"),
        );
        let mut metrics = Vec::new();
        if let Some(ms) = &p.metrics {
            let specs = probe.metrics_for(&params);
            let declared: Vec<&str> = specs.iter().map(|m| m.name.as_str()).collect();
            if ms.get_ref().is_empty() {
                c.err(
                    span_of(ms),
                    &format!("{field}.metrics"),
                    "the metric list is empty".into(),
                    &declared.join(", "),
                    "remove `metrics` to report every metric, or name at least one".into(),
                );
            }
            for m in ms.get_ref() {
                if declared.contains(&m.get_ref().as_str()) {
                    metrics.push(m.get_ref().clone());
                } else {
                    let near = nearest_names(m.get_ref(), declared.iter().copied());
                    c.err(
                        span_of(m),
                        &format!("{field}.metrics"),
                        format!(
                            "{} does not report a metric `{}`",
                            probe.name(),
                            m.get_ref()
                        ),
                        &declared.join(", "),
                        match near.first() {
                            Some(n) => format!("did you mean \"{n}\"?"),
                            None => format!(
                                "name a metric {} reports with these params (allowed, above)",
                                probe.name()
                            ),
                        },
                    );
                }
            }
        }
        out.push(ProbeSpec {
            id,
            name: probe.name().to_string(),
            params,
            metrics,
            span,
            name_span: span_of(name),
        });
    }
    if raw.is_empty() {
        c.err(
            Span::default(),
            "probe",
            "the scenario declares no probes".into(),
            &all.join(", "),
            "add a [[probe]] table, e.g. [[probe]] name = \"cpu-int\"".into(),
        );
    }
    out
}

fn label(
    c: &mut Checker<'_>,
    label: &Option<Spanned<String>>,
    name: &Spanned<String>,
    field: &str,
    ids: &mut BTreeSet<String>,
    what: &str,
) -> String {
    let (id, span) = match label {
        Some(l) => {
            if !valid_id(l.get_ref()) {
                c.err(
                    span_of(l),
                    &format!("{field}.label"),
                    format!("`{}` is not a valid label", l.get_ref()),
                    ID_ALLOWED,
                    id_fix(l.get_ref()),
                );
            }
            (l.get_ref().clone(), span_of(l))
        }
        None => (name.get_ref().clone(), span_of(name)),
    };
    if !ids.insert(id.clone()) {
        c.err(
            span,
            &format!("{field}.label"),
            format!("a second {what} is called `{id}`"),
            &format!("a label no other {what} uses"),
            format!("give one of them a label, e.g. label = \"{id}-2\""),
        );
    }
    id
}

fn check_stressors(c: &mut Checker<'_>, raw: &[Spanned<RawStressor>]) -> Vec<StressorSpec> {
    let mut out = Vec::new();
    let mut ids = BTreeSet::new();
    let all: Vec<&str> = STRESSORS.iter().map(|s| s.name()).collect();
    for (i, s) in raw.iter().enumerate() {
        let span = span_of(s);
        let s = s.get_ref();
        let field = format!("stressor[{i}]");
        let Some(name) = &s.name else {
            c.err(
                span,
                &format!("{field}.name"),
                "the stressor has no name".into(),
                &all.join(", "),
                "add name = \"cpu\" (`isobench list` shows every stressor)".into(),
            );
            continue;
        };
        let Some(stressor) = isobench_workloads::stressor(name.get_ref()) else {
            let n = name.get_ref();
            let near = nearest_names(n, all.iter().copied());
            let fix = if isobench_workloads::probe(n).is_some() {
                format!("`{n}` is a probe: move it to a [[probe]] table")
            } else if let Some(s) = near.first() {
                format!("did you mean name = \"{s}\"?")
            } else {
                "pick a stressor from `isobench list`".into()
            };
            c.err(
                span_of(name),
                &format!("{field}.name"),
                format!("unknown stressor `{n}`"),
                &all.join(", "),
                fix,
            );
            continue;
        };
        let id = label(c, &s.label, name, &field, &mut ids, "stressor");
        let mut intensities = Vec::new();
        let ifield = format!("{field}.intensity");
        let allowed = "an integer 0..=100, or an array of them such as [50, 100]";
        match &s.intensity {
            None => intensities.push(100),
            Some(v) => {
                let items: Vec<&Value> = match v.get_ref() {
                    Value::Array(a) => a.iter().collect(),
                    other => vec![other],
                };
                if items.is_empty() {
                    c.err(
                        span_of(v),
                        &ifield,
                        "the intensity list is empty".into(),
                        allowed,
                        "write intensity = 100".into(),
                    );
                }
                for it in items {
                    match it {
                        Value::Integer(n) if (0..=100).contains(n) => {
                            let n = *n as u8;
                            if intensities.contains(&n) {
                                c.err(
                                    span_of(v),
                                    &ifield,
                                    format!("intensity {n} is listed twice"),
                                    allowed,
                                    format!("remove the second {n}"),
                                );
                            } else {
                                intensities.push(n);
                            }
                        }
                        other => c.err(
                            span_of(v),
                            &ifield,
                            format!(
                                "{} is not an intensity",
                                value_text(other).map_or("this".into(), |t| format!("`{t}`"))
                            ),
                            allowed,
                            "write intensity = 100 (`isobench list` says what it sets for this stressor)"
                                .to_string(),
                        ),
                    }
                }
            }
        }
        let params = check_params(
            c,
            stressor.name(),
            stressor.params(),
            &s.params,
            &format!("{field}.params"),
        );
        out.push(StressorSpec {
            id,
            name: stressor.name().to_string(),
            intensities,
            params,
            span,
            name_span: span_of(name),
        });
    }
    if raw.is_empty() {
        c.err(
            Span::default(),
            "stressor",
            "the scenario declares no stressors".into(),
            &all.join(", "),
            "add a [[stressor]] table, e.g. [[stressor]] name = \"cpu\"".into(),
        );
    }
    out
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
