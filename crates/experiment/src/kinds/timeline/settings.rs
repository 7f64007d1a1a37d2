//! The `[timeline]` table of a scenario: which victim and probe measure, in what windows,
//! for how long, and the schedule of the aggressors' stressors.
//!
//! ```toml
//! [timeline]
//! probe = "net-rtt"     # a [[probe]] id (default: the only probe)
//! window = "1s"         # window of the probe's series
//! cpu_every = "1s"      # interval of the tenants' CPU samples
//! length = "400s"       # the trial (default: the last stop plus the quiet time before the first start)
//!
//! [[timeline.schedule]]
//! tenant = "dom2"       # an aggressor tenant
//! stressor = "cpu"      # a [[stressor]] id
//! intensity = 100       # default: the stressor's first intensity
//! start = "50s"
//! stop = "250s"
//! ```
//!
//! Checking only reads the table against the rest of the scenario (tenants, probes,
//! stressors); every problem is reported with its file, line, column, field and fix.

use std::collections::BTreeMap;
use std::time::Duration;

use isobench_stats::TransitionConfig;
use isobench_workloads::ParamValues;
use serde::{Deserialize, Serialize};
use toml::{Spanned, Value};

use crate::scenario::{
    fmt_duration, value_duration, ProbeSpec, Role, StressorSpec, TenantSpec, DURATION_ALLOWED,
};
use crate::source::{Source, Span};

/// Default window of the probe's series.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(1);

/// Default interval of the CPU samples (paper 003 reads xentop every second).
pub const DEFAULT_CPU_EVERY: Duration = Duration::from_secs(1);

/// Shortest window: a window must hold enough events for its median.
pub const MIN_WINDOW: Duration = Duration::from_millis(10);

/// Longest trial.
pub const MAX_LENGTH: Duration = Duration::from_secs(24 * 3600);

/// One stressor of the schedule, checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScheduleEntry {
    /// The aggressor tenant.
    pub tenant: String,
    /// The `[[stressor]]` id.
    pub stressor: String,
    /// Stressor name, as in the registry.
    pub name: String,
    /// Intensity, 0..=100.
    pub intensity: u8,
    /// The stressor's parameters (from its `[[stressor]]`).
    pub params: ParamValues,
    /// Offset of the start from the trial's start.
    #[serde(with = "crate::scenario::secs")]
    pub start: Duration,
    /// Offset of the stop.
    #[serde(with = "crate::scenario::secs")]
    pub stop: Duration,
}

/// The `timeline` kind's settings, checked; stored in the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineSettings {
    /// The victim tenant whose probe measures.
    pub victim: String,
    /// The `[[probe]]` id.
    pub probe: String,
    /// Window of the probe's series.
    #[serde(with = "crate::scenario::secs")]
    pub window: Duration,
    /// Interval of the CPU samples.
    #[serde(with = "crate::scenario::secs")]
    pub cpu_every: Duration,
    /// Length of one scheduled trial.
    #[serde(with = "crate::scenario::secs")]
    pub length: Duration,
    /// Scheduled trials (the schedule run again from the start each time).
    pub repeat: u32,
    /// The band and persistence rule of the times to degrade and recover.
    pub transition: TransitionConfig,
    /// The schedule, by start time.
    pub schedule: Vec<ScheduleEntry>,
}

/// The `[timeline]` table as decoded (types loose, spans kept). Keys it does not know are
/// left to the caller to report.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RawTimeline {
    victim: Option<Spanned<String>>,
    probe: Option<Spanned<String>>,
    window: Option<Spanned<Value>>,
    cpu_every: Option<Spanned<Value>>,
    length: Option<Spanned<Value>>,
    repeat: Option<Spanned<Value>>,
    sustain: Option<Spanned<Value>>,
    band_k: Option<Spanned<Value>>,
    band_min: Option<Spanned<Value>>,
    #[serde(default)]
    schedule: Vec<Spanned<RawEntry>>,
}

/// One `[[timeline.schedule]]` entry as decoded.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    tenant: Option<Spanned<String>>,
    stressor: Option<Spanned<String>>,
    intensity: Option<Spanned<Value>>,
    start: Option<Spanned<Value>>,
    stop: Option<Spanned<Value>>,
}

/// Where the check reports a problem: its place, the key under `[timeline]`
/// (`schedule[1].stop`), the problem, the allowed values and the fix.
pub type Report<'r> = &'r mut dyn FnMut(Span, &str, String, &str, String);

/// What the check needs of the rest of the scenario.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The file, for error positions.
    pub source: &'a Source,
    /// Where the `[timeline]` table is (or the file's start when it is missing).
    pub table: Span,
    /// The scenario's tenants.
    pub tenants: &'a [TenantSpec],
    /// Its probes.
    pub probes: &'a [ProbeSpec],
    /// Its stressors.
    pub stressors: &'a [StressorSpec],
}

fn span_of<T>(s: &Spanned<T>) -> Span {
    s.span().into()
}

/// Reports the problems of one table.
struct Check<'a, 'r> {
    cx: Context<'a>,
    report: Report<'r>,
    errors: usize,
}

impl Check<'_, '_> {
    fn err(&mut self, span: Span, field: &str, problem: String, allowed: &str, fix: String) {
        self.errors += 1;
        (self.report)(span, field, problem, allowed, fix);
    }

    /// A duration within `range`, or `default` when absent (or wrong, after reporting it).
    fn duration(
        &mut self,
        v: &Option<Spanned<Value>>,
        field: &str,
        range: (Duration, Duration),
        default: Duration,
    ) -> Duration {
        let Some(v) = v else { return default };
        let parsed = value_duration(v.get_ref());
        let key = field.rsplit('.').next().unwrap_or(field);
        match parsed {
            Some(d) if d >= range.0 && d <= range.1 => d,
            Some(d) => {
                self.err(
                    span_of(v),
                    field,
                    format!("{} is out of range", fmt_duration(d)),
                    &format!(
                        "a duration from {} to {}",
                        fmt_duration(range.0),
                        fmt_duration(range.1)
                    ),
                    format!(
                        "write {key} = \"{}\"",
                        fmt_duration(d.clamp(range.0, range.1))
                    ),
                );
                default
            }
            None => {
                self.err(
                    span_of(v),
                    field,
                    format!("{} is not a duration", v.get_ref()),
                    DURATION_ALLOWED,
                    format!("write {key} = \"{}\"", fmt_duration(default)),
                );
                default
            }
        }
    }

    /// A number within `range` (integers accepted for floats).
    fn number(
        &mut self,
        v: &Option<Spanned<Value>>,
        field: &str,
        range: (f64, f64),
        integer: bool,
        default: f64,
    ) -> f64 {
        let Some(v) = v else { return default };
        let x = match v.get_ref() {
            Value::Integer(i) => Some(*i as f64),
            Value::Float(f) if !integer => Some(*f),
            _ => None,
        };
        let key = field.rsplit('.').next().unwrap_or(field);
        let what = if integer { "an integer" } else { "a number" };
        match x {
            Some(x) if x >= range.0 && x <= range.1 => x,
            _ => {
                self.err(
                    span_of(v),
                    field,
                    format!(
                        "{} is not {what} from {} to {}",
                        v.get_ref(),
                        range.0,
                        range.1
                    ),
                    &format!("{what} from {} to {}", range.0, range.1),
                    format!("write {key} = {default}"),
                );
                default
            }
        }
    }

    /// The tenant named by `v` with role `role`, or the only one when `v` is absent.
    fn tenant(&mut self, v: &Option<Spanned<String>>, field: &str, role: Role) -> Option<String> {
        let of_role: Vec<&str> = self
            .cx
            .tenants
            .iter()
            .filter(|t| t.role == role)
            .map(|t| t.name.as_str())
            .collect();
        let word = role.as_str();
        let key = field.rsplit('.').next().unwrap_or(field);
        match v {
            Some(name) => {
                if of_role.contains(&name.get_ref().as_str()) {
                    return Some(name.get_ref().clone());
                }
                let other = self.cx.tenants.iter().find(|t| &t.name == name.get_ref());
                self.err(
                    span_of(name),
                    field,
                    if let Some(t) = other {
                        format!(
                            "tenant `{}` is the {}, not the {word}, here",
                            name.get_ref(),
                            t.role.as_str()
                        )
                    } else {
                        format!("there is no tenant `{}`", name.get_ref())
                    },
                    &format!("a {word} tenant: {}", of_role.join(", ")),
                    format!(
                        "write {key} = \"{}\", or declare a [[tenant]] with role = \"{word}\"",
                        of_role.first().copied().unwrap_or("NAME")
                    ),
                );
                None
            }
            None if of_role.len() == 1 => Some(of_role[0].to_string()),
            None => {
                self.err(
                    self.cx.table,
                    field,
                    format!("the scenario has {} {word} tenants", of_role.len()),
                    &format!("a {word} tenant: {}", of_role.join(", ")),
                    format!("name one: {key} = \"NAME\""),
                );
                None
            }
        }
    }
}

impl RawTimeline {
    /// Checks the table against the scenario, reporting every problem to `report`. Returns
    /// the settings when there was none.
    pub fn check(&self, cx: Context<'_>, report: Report<'_>) -> Option<TimelineSettings> {
        let mut c = Check {
            cx,
            report,
            errors: 0,
        };
        let victim = c.tenant(&self.victim, "victim", Role::Victim);
        let probe = self.check_probe(&mut c);
        let window = c.duration(
            &self.window,
            "window",
            (MIN_WINDOW, Duration::from_secs(600)),
            DEFAULT_WINDOW,
        );
        let cpu_every = c.duration(
            &self.cpu_every,
            "cpu_every",
            (Duration::from_millis(100), Duration::from_secs(600)),
            DEFAULT_CPU_EVERY,
        );
        let repeat = c.number(&self.repeat, "repeat", (1.0, 100.0), true, 1.0) as u32;
        let d = TransitionConfig::default();
        let transition = TransitionConfig {
            sustain: c.number(
                &self.sustain,
                "sustain",
                (1.0, 1000.0),
                true,
                d.sustain as f64,
            ) as usize,
            k: c.number(&self.band_k, "band_k", (0.5, 100.0), false, d.k),
            min_rel_width: c.number(
                &self.band_min,
                "band_min",
                (0.0, 0.99),
                false,
                d.min_rel_width,
            ),
        };
        let schedule = self.check_schedule(&mut c);
        let last_stop = schedule.iter().map(|e| e.stop).max().unwrap_or_default();
        let first_start = schedule.iter().map(|e| e.start).min().unwrap_or_default();
        let default_length = last_stop + first_start.max(Duration::from_secs(10));
        let length = c.duration(
            &self.length,
            "length",
            (Duration::from_secs(1), MAX_LENGTH),
            default_length,
        );
        if let (Some(l), true) = (&self.length, length < last_stop) {
            c.err(
                span_of(l),
                "length",
                format!(
                    "the trial ends at {} but the schedule stops a stressor at {}",
                    fmt_duration(length),
                    fmt_duration(last_stop)
                ),
                "a length at least as long as the last stop",
                format!("write length = \"{}\"", fmt_duration(default_length)),
            );
        }
        if window * 4 > length && c.errors == 0 {
            let span = self.window.as_ref().map_or(cx.table, span_of);
            c.err(
                span,
                "window",
                format!(
                    "windows of {} give fewer than 4 in a {} trial",
                    fmt_duration(window),
                    fmt_duration(length)
                ),
                "a window at most a quarter of the trial",
                format!("write window = \"{}\"", fmt_duration(length / 50)),
            );
        }
        match (victim, probe, c.errors == 0) {
            (Some(victim), Some(probe), true) => Some(TimelineSettings {
                victim,
                probe,
                window,
                cpu_every,
                length,
                repeat,
                transition,
                schedule,
            }),
            _ => None,
        }
    }

    fn check_probe(&self, c: &mut Check<'_, '_>) -> Option<String> {
        let ids: Vec<&str> = c.cx.probes.iter().map(|p| p.id.as_str()).collect();
        let spec = match &self.probe {
            Some(id) => match c.cx.probes.iter().find(|p| &p.id == id.get_ref()) {
                Some(p) => (p, span_of(id)),
                None => {
                    c.err(
                        span_of(id),
                        "probe",
                        format!("there is no [[probe]] `{}`", id.get_ref()),
                        &format!("a probe id: {}", ids.join(", ")),
                        format!(
                            "write probe = \"{}\", or add a [[probe]] with that name or label",
                            ids.first().copied().unwrap_or("net-rtt")
                        ),
                    );
                    return None;
                }
            },
            None if c.cx.probes.len() == 1 => (&c.cx.probes[0], c.cx.probes[0].name_span),
            None => {
                c.err(
                    c.cx.table,
                    "probe",
                    format!(
                        "the scenario has {} probes and a timeline measures with one",
                        c.cx.probes.len()
                    ),
                    &format!("a probe id: {}", ids.join(", ")),
                    "name one: probe = \"ID\"".into(),
                );
                return None;
            }
        };
        let (p, span) = spec;
        let windowed = isobench_workloads::probe(&p.name).is_some_and(|x| x.windowed());
        if !windowed {
            let fit: Vec<&str> = isobench_workloads::PROBES
                .iter()
                .filter(|x| x.windowed())
                .map(|x| x.name())
                .collect();
            c.err(
                span,
                "probe",
                format!(
                    "probe {} cannot measure in windows, and a timeline needs its series",
                    p.name
                ),
                &format!("a probe with window series: {}", fit.join(", ")),
                "use one of those, e.g. net-rtt with proto = \"udp\"".into(),
            );
            return None;
        }
        Some(p.id.clone())
    }

    fn check_schedule(&self, c: &mut Check<'_, '_>) -> Vec<ScheduleEntry> {
        if self.schedule.is_empty() {
            c.err(
                c.cx.table,
                "schedule",
                "the timeline has no schedule".into(),
                "one [[timeline.schedule]] table per stressor run: tenant, stressor, start, stop",
                "add [[timeline.schedule]] tenant = \"NAME\" stressor = \"cpu\" start = \"50s\" \
                 stop = \"250s\""
                    .into(),
            );
            return Vec::new();
        }
        let out: Vec<(ScheduleEntry, Span)> = self
            .schedule
            .iter()
            .enumerate()
            .filter_map(|(i, e)| self.check_entry(c, i, e))
            .collect();
        report_overlaps(c, &out);
        let mut entries: Vec<ScheduleEntry> = out.into_iter().map(|(e, _)| e).collect();
        entries.sort_by(|a, b| (a.start, &a.tenant).cmp(&(b.start, &b.tenant)));
        entries
    }

    /// Entry `i` of the schedule with the span of its table, or `None` (after reporting)
    /// when its tenant or stressor is wrong.
    fn check_entry(
        &self,
        c: &mut Check<'_, '_>,
        i: usize,
        e: &Spanned<RawEntry>,
    ) -> Option<(ScheduleEntry, Span)> {
        let f = |k: &str| format!("schedule[{i}].{k}");
        let at = span_of(e);
        let e = e.get_ref();
        let tenant = match &e.tenant {
            Some(_) => c.tenant(&e.tenant, &f("tenant"), Role::Aggressor),
            None => {
                c.err(
                    at,
                    &f("tenant"),
                    "a schedule entry needs the aggressor tenant it runs in".into(),
                    "an aggressor tenant",
                    "add tenant = \"NAME\"".into(),
                );
                None
            }
        };
        let stressor = self.check_stressor(c, e, at, &f("stressor"));
        let default_intensity = stressor
            .and_then(|s| s.intensities.first().copied())
            .unwrap_or(100);
        let intensity = c.number(
            &e.intensity,
            &f("intensity"),
            (0.0, 100.0),
            true,
            default_intensity as f64,
        ) as u8;
        let (start, stop) = (
            c.duration(
                &e.start,
                &f("start"),
                (Duration::ZERO, MAX_LENGTH),
                Duration::ZERO,
            ),
            c.duration(
                &e.stop,
                &f("stop"),
                (Duration::ZERO, MAX_LENGTH),
                Duration::ZERO,
            ),
        );
        for (v, k) in [(&e.start, "start"), (&e.stop, "stop")] {
            if v.is_none() {
                c.err(
                    at,
                    &f(k),
                    format!("a schedule entry needs its {k} time"),
                    DURATION_ALLOWED,
                    format!("add {k} = \"50s\""),
                );
            }
        }
        if let (Some(s), Some(_)) = (&e.stop, &e.start) {
            if stop <= start {
                c.err(
                    span_of(s),
                    &f("stop"),
                    format!(
                        "the stop ({}) is not after the start ({})",
                        fmt_duration(stop),
                        fmt_duration(start)
                    ),
                    "a stop later than the start",
                    format!(
                        "write stop = \"{}\"",
                        fmt_duration(start + start.max(Duration::from_secs(10)))
                    ),
                );
            }
        }
        let (tenant, s) = (tenant?, stressor?);
        Some((
            ScheduleEntry {
                tenant,
                stressor: s.id.clone(),
                name: s.name.clone(),
                intensity,
                params: s.params.clone(),
                start,
                stop,
            },
            at,
        ))
    }

    fn check_stressor<'s>(
        &self,
        c: &mut Check<'s, '_>,
        e: &RawEntry,
        at: Span,
        field: &str,
    ) -> Option<&'s StressorSpec> {
        let ids: Vec<&str> = c.cx.stressors.iter().map(|s| s.id.as_str()).collect();
        let Some(id) = &e.stressor else {
            c.err(
                at,
                field,
                "a schedule entry needs the stressor it runs".into(),
                &format!("a [[stressor]] id: {}", ids.join(", ")),
                format!(
                    "add stressor = \"{}\"",
                    ids.first().copied().unwrap_or("cpu")
                ),
            );
            return None;
        };
        let stressors = c.cx.stressors;
        match stressors.iter().find(|s| &s.id == id.get_ref()) {
            Some(s) => Some(s),
            None => {
                c.err(
                    span_of(id),
                    field,
                    format!("there is no [[stressor]] `{}`", id.get_ref()),
                    &format!("a [[stressor]] id: {}", ids.join(", ")),
                    format!(
                        "add [[stressor]] name = \"{}\", or use one of those",
                        id.get_ref()
                    ),
                );
                None
            }
        }
    }
}

/// Reports the entries that would start a stressor in a tenant while another still runs
/// there: a tenant runs one stressor at a time.
fn report_overlaps(c: &mut Check<'_, '_>, out: &[(ScheduleEntry, Span)]) {
    let mut by_tenant: BTreeMap<&str, Vec<(usize, &ScheduleEntry)>> = BTreeMap::new();
    for (i, (e, _)) in out.iter().enumerate() {
        by_tenant.entry(e.tenant.as_str()).or_default().push((i, e));
    }
    let mut overlaps = Vec::new();
    for list in by_tenant.values_mut() {
        list.sort_by_key(|(_, e)| e.start);
        for w in list.windows(2) {
            let ((_, a), (j, b)) = (w[0], w[1]);
            if b.start < a.stop {
                overlaps.push((j, a.clone(), b.clone()));
            }
        }
    }
    for (j, a, b) in overlaps {
        let span = out[j].1;
        c.err(
            span,
            &format!("schedule[{j}].start"),
            format!(
                "tenant {} would run {} from {} while {} still runs (until {}); a tenant \
                 runs one stressor at a time",
                b.tenant,
                b.stressor,
                fmt_duration(b.start),
                a.stressor,
                fmt_duration(a.stop)
            ),
            "entries of one tenant that do not overlap",
            format!(
                "start it at {} or later, or run it in another aggressor tenant",
                fmt_duration(a.stop)
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;
    use crate::source::ScenarioError;

    const BASE: &str = r#"
name = "t"
kind = "matrix"

[[tenant]]
name = "victim"
role = "victim"

[[tenant]]
name = "dom1"
role = "aggressor"

[[tenant]]
name = "dom2"
role = "aggressor"

[[probe]]
name = "net-rtt"
params = { proto = "udp" }

[[stressor]]
name = "cpu"
intensity = [100]
"#;

    #[derive(Deserialize)]
    struct Doc {
        timeline: Spanned<RawTimeline>,
    }

    /// Checks `[timeline]` text appended to the base scenario.
    fn check(timeline: &str) -> Result<TimelineSettings, Vec<ScenarioError>> {
        let sc = Scenario::parse(Source::new("t.toml", BASE)).unwrap();
        let text = format!("{BASE}\n{timeline}");
        let src = Source::new("t.toml", text.clone());
        let doc: Doc = toml::from_str(&text).unwrap();
        let cx = Context {
            source: &src,
            table: span_of(&doc.timeline),
            tenants: &sc.tenants,
            probes: &sc.probes,
            stressors: &sc.stressors,
        };
        let mut errors: Vec<ScenarioError> = Vec::new();
        let settings = doc
            .timeline
            .get_ref()
            .check(cx, &mut |span, key, problem, allowed, fix| {
                errors.push(src.error(span, format!("timeline.{key}"), problem, allowed, fix))
            });
        settings.ok_or(errors)
    }

    /// `[[timeline.schedule]]` entries, one per `(tenant, stressor, start, stop)`.
    fn schedule(entries: &[(&str, &str, &str, &str)]) -> String {
        entries
            .iter()
            .map(|(tenant, stressor, start, stop)| {
                format!(
                    "\n[[timeline.schedule]]\ntenant = \"{tenant}\"\nstressor = \"{stressor}\"\n\
                     start = \"{start}\"\nstop = \"{stop}\"\n"
                )
            })
            .collect()
    }

    fn problems(timeline: &str) -> Vec<String> {
        check(timeline)
            .unwrap_err()
            .iter()
            .map(|e| {
                format!(
                    "{}:{} {}: {} (fix: {})",
                    e.line, e.column, e.field, e.problem, e.fix
                )
            })
            .collect()
    }

    #[test]
    fn the_stacking_schedule_of_paper_003_checks() {
        let s = check(
            r#"
[timeline]
window = "500ms"

[[timeline.schedule]]
tenant = "dom2"
stressor = "cpu"
start = "100s"
stop = "300s"

[[timeline.schedule]]
tenant = "dom1"
stressor = "cpu"
intensity = 50
start = 50
stop = "250s"
"#,
        )
        .unwrap();
        assert_eq!(s.victim, "victim");
        assert_eq!(s.probe, "net-rtt");
        assert_eq!(s.window, Duration::from_millis(500));
        assert_eq!(s.cpu_every, DEFAULT_CPU_EVERY);
        // The last stop plus the quiet time before the first start.
        assert_eq!(s.length, Duration::from_secs(350));
        assert_eq!(s.repeat, 1);
        let order: Vec<(&str, u8, u64)> = s
            .schedule
            .iter()
            .map(|e| (e.tenant.as_str(), e.intensity, e.start.as_secs()))
            .collect();
        assert_eq!(order, vec![("dom1", 50, 50), ("dom2", 100, 100)]);
        assert_eq!(s.schedule[0].name, "cpu");
    }

    #[test]
    fn schedule_problems_name_the_entry_and_the_fix() {
        let entries = schedule(&[
            ("victim", "cpu", "10s", "20s"),
            ("dom1", "disk", "10s", "5s"),
            ("dom2", "cpu", "10s", "200s"),
        ]);
        let p = problems(&format!("[timeline]\nlength = \"100s\"\n{entries}"));
        let all = p.join("\n");
        assert!(
            all.contains(
                "timeline.schedule[0].tenant: tenant `victim` is the victim, not the aggressor"
            ),
            "{all}"
        );
        assert!(
            all.contains("timeline.schedule[1].stressor: there is no [[stressor]] `disk`"),
            "{all}"
        );
        assert!(
            all.contains("timeline.schedule[1].stop: the stop (5s) is not after the start (10s)"),
            "{all}"
        );
        assert!(all.contains("timeline.length: the trial ends at"), "{all}");
        // Positions point into the [timeline] part of the file.
        let base_lines = BASE.lines().count();
        assert!(
            p.iter()
                .all(|l| l.split(':').next().unwrap().parse::<usize>().unwrap() > base_lines),
            "{all}"
        );
    }

    #[test]
    fn a_tenant_runs_one_stressor_at_a_time() {
        let entries = schedule(&[("dom1", "cpu", "10s", "30s"), ("dom1", "cpu", "20s", "40s")]);
        let p = problems(&format!("[timeline]\n{entries}"));
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("timeline.schedule[1].start"), "{p:?}");
        assert!(p[0].contains("one stressor at a time"), "{p:?}");
        assert!(p[0].contains("start it at 30s or later"), "{p:?}");
    }

    #[test]
    fn an_empty_schedule_and_bad_knobs_are_refused() {
        let p = problems("[timeline]\nwindow = \"1ms\"\nsustain = 0\nband_k = \"wide\"\n");
        let all = p.join("\n");
        assert!(
            all.contains("timeline.window: 1ms is out of range"),
            "{all}"
        );
        assert!(all.contains("timeline.sustain"), "{all}");
        assert!(all.contains("timeline.band_k"), "{all}");
        assert!(
            all.contains("timeline.schedule: the timeline has no schedule"),
            "{all}"
        );
        let p = problems("[timeline]\nprobe = \"ping\"\nvictim = \"dom1\"\n");
        let all = p.join("\n");
        assert!(
            all.contains("timeline.probe: there is no [[probe]] `ping`"),
            "{all}"
        );
        assert!(
            all.contains("timeline.victim: tenant `dom1` is the aggressor, not the victim"),
            "{all}"
        );
    }
}
