//! `timeline`: a latency probe sampled for the whole run while stressors in several aggressor
//! tenants start and stop on a schedule, every tenant's CPU use read each second; how much
//! each start hurts, how long the victim takes to degrade and to recover (paper 003, set 2).
//!
//! The scenario's `[timeline]` table gives the schedule ([`settings`]); planning makes one
//! condition (`schedule`) whose blocks each hold one scheduled trial
//! ([`crate::scheduled`]: the executor starts and stops the stressors itself, so the condition
//! assigns nothing); [`analysis`] reads each trial's window series against its switches.

pub mod analysis;
pub mod settings;

use isobench_results::{Column, Plot, Section, Value};
use isobench_store::{Direction, TrialRecord};
use serde::Deserialize;
use toml::Spanned;

use self::analysis::{analyze_trial, TrialAnalysis};
use self::settings::{Context, RawTimeline, TimelineSettings};
use super::kind::{ExperimentKind, NothingToRun};
use crate::cells::{Analysis, Inputs, Results};
use crate::fields::Fields;
use crate::plan::{Condition, Design, Estimate, Plan, Platform};
use crate::resolver::Resolver;
use crate::scenario::{Scenario, UnsafeOnHost};
use crate::schedule::{Block, Needs, ScheduledTrial, TrialWhat};
use crate::source::Span;

/// The `timeline` kind.
pub struct Timeline;

/// Id of the one condition of a timeline.
pub const CONDITION: &str = "schedule";

/// The keys of `[timeline]`.
const KEYS: &[&str] = &[
    "victim",
    "probe",
    "window",
    "cpu_every",
    "length",
    "repeat",
    "sustain",
    "band_k",
    "band_min",
    "schedule",
];

/// The settings stored in a plan or a scenario, when they read.
pub fn settings_of(v: &serde_json::Value) -> Option<TimelineSettings> {
    serde_json::from_value(v.clone()).ok()
}

/// The scenario file with its `[timeline]` table, spans kept.
#[derive(Deserialize)]
struct Doc {
    timeline: Option<Spanned<RawTimeline>>,
}

impl ExperimentKind for Timeline {
    fn name(&self) -> &'static str {
        "timeline"
    }

    fn help(&self) -> &'static str {
        "a latency probe sampled throughout while stressors start and stop on a schedule: \
         degradation per switch, time to degrade and to recover, CPU use per tenant"
    }

    fn settings(&self, f: &mut Fields<'_, '_>, sc: &Scenario) -> serde_json::Value {
        for k in KEYS {
            f.get(k);
        }
        if !f.present() {
            f.missing(
                "schedule",
                "one [[timeline.schedule]] table per stressor run: tenant, stressor, start, stop",
                "[{ tenant = \"NAME\", stressor = \"cpu\", start = \"50s\", stop = \"250s\" }]",
            );
            return serde_json::Value::Null;
        }
        let source = f.source().clone();
        let table = f.span();
        let raw = match toml::from_str::<Doc>(&source.text) {
            Ok(Doc {
                timeline: Some(raw),
            }) => raw.into_inner(),
            Ok(Doc { timeline: None }) => return serde_json::Value::Null,
            Err(e) => {
                let span = e.span().map(Span::from).unwrap_or(table);
                f.error(
                    span,
                    "schedule",
                    e.message().to_string(),
                    "tenant, stressor, intensity, start and stop in each [[timeline.schedule]]",
                    "see docs/scenario.md, [timeline]".into(),
                );
                return serde_json::Value::Null;
            }
        };
        let cx = Context {
            source: &source,
            table,
            tenants: &sc.tenants,
            probes: &sc.probes,
            stressors: &sc.stressors,
        };
        let settings = raw.check(cx, &mut |span, key, problem, allowed, fix| {
            f.error(span, key, problem, allowed, fix)
        });
        settings.map_or(serde_json::Value::Null, |s| {
            serde_json::to_value(s).expect("settings serialize")
        })
    }

    /// One condition, `schedule`, that assigns nothing: the scheduled trial starts and stops
    /// the stressors. Stressors nothing would contain are refused on the host unless the
    /// scenario allows them capped.
    fn conditions(&self, r: &mut Resolver, platform: Platform) -> Vec<Condition> {
        let sc = r.scenario();
        let Some(set) = settings_of(&sc.settings) else {
            return Vec::new();
        };
        let host = r.host();
        let mut aggressive = false;
        let mut ok = true;
        for (i, e) in set.schedule.iter().enumerate() {
            let st = isobench_workloads::stressor(&e.name).expect("validated name");
            if let Err(u) = st.supported(&host.env) {
                r.error(sc.source.error(
                    Span::default(),
                    format!("timeline.schedule[{i}].stressor"),
                    format!("{} cannot run here: {}", e.name, u.reason),
                    "a stressor this platform supports (`isobench list`)",
                    "schedule another stressor",
                ));
                ok = false;
            }
            aggressive |= st.aggressive();
        }
        let capped = aggressive && !platform.capabilities().contains_aggressors;
        if capped && sc.unsafe_on_host != UnsafeOnHost::Allow {
            r.error(sc.source.error(
                Span::default(),
                "timeline.schedule",
                "the schedule runs a stressor that can take the whole machine down, and on the \
                 host platform nothing contains it",
                "on the host platform: stressors other than forkbomb, memhog and disk",
                "run as root so tenants are cgroups, or set unsafe_on_host = \"allow\" (run it \
                 capped)",
            ));
            ok = false;
        }
        if !ok {
            return Vec::new();
        }
        let first = &set.schedule[0];
        let st = isobench_workloads::stressor(&first.name).expect("validated name");
        vec![Condition {
            id: CONDITION.into(),
            stressor_id: CONDITION.into(),
            name: CONDITION.into(),
            class: st.class(),
            intensity: set.schedule.iter().map(|e| e.intensity).max().unwrap_or(0),
            params: Default::default(),
            assignments: Default::default(),
            limits: Default::default(),
            candidate: false,
            window: None,
            aggressive,
            design: Design::Paired,
            design_reason: "a scheduled trial: the stressors start and stop on the schedule \
                            while the probe measures in windows"
                .into(),
            capped,
        }]
    }

    fn nothing_to_run(&self) -> NothingToRun {
        NothingToRun {
            field: "timeline.schedule",
            problem: "the schedule has nothing to run on this platform",
            allowed: "stressors this platform supports (`isobench list`)",
            fix: "schedule other stressors, or run as root for cgroup tenants",
        }
    }

    /// `repeat` trials of `length` each, in the first round.
    fn estimate(&self, plan: &Plan) -> Estimate {
        let (n, secs) = settings_of(&plan.settings).map_or((0, 0.0), |s| {
            (
                s.repeat,
                s.repeat as f64 * (s.length + plan.trial.warmup).as_secs_f64(),
            )
        });
        Estimate {
            trials_per_round: n,
            trials_min: n,
            trials_max: n,
            secs_min: secs,
            secs_max: secs,
        }
    }

    fn first_needs(&self, plan: &Plan) -> Needs {
        let mut n = Needs::default();
        if !plan.conditions.is_empty() {
            n.cells.insert((0, 0));
        }
        n
    }

    /// Round 0: one block per repetition of the schedule, each one scheduled trial; later
    /// rounds have nothing to add.
    fn round_blocks(&self, plan: &Plan, round: u32, _needs: &Needs) -> Vec<Block> {
        let Some(set) = settings_of(&plan.settings) else {
            return Vec::new();
        };
        let Some(p) = plan.probes.iter().position(|p| p.id == set.probe) else {
            return Vec::new();
        };
        if round > 0 || plan.conditions.is_empty() {
            return Vec::new();
        }
        (0..set.repeat)
            .map(|i| Block {
                round,
                index: i,
                condition: Some(0),
                trials: vec![ScheduledTrial {
                    slot: 0,
                    what: TrialWhat::Scheduled(p),
                }],
            })
            .collect()
    }

    fn analyze(&self, i: Inputs<'_>) -> Analysis {
        let (run, plan, settings) = (i.run, i.plan, i.settings);
        let set = plan.and_then(|p| settings_of(&p.settings));
        let transition = set.as_ref().map(|s| s.transition).unwrap_or_default();
        let mut analyses: Vec<Analysed> = Vec::new();
        for t in run.trials.iter().filter(|t| t.timeline.is_some()) {
            for (metric, direction, unit) in metrics(t, plan) {
                if let Some(a) = analyze_trial(
                    t,
                    t.key.block,
                    &metric,
                    direction,
                    &transition,
                    settings.confidence,
                ) {
                    analyses.push(Analysed {
                        probe: t.probe.clone(),
                        metric,
                        unit,
                        a,
                    });
                }
            }
        }
        Analysis {
            cells: Vec::new(),
            aggressor: Vec::new(),
            classes: Vec::new(),
            sections: sections(&analyses, set.as_ref()),
        }
    }

    /// One round holds every scheduled trial; nothing is added after it.
    fn needs(&self, _plan: &Plan, _results: &Results) -> Needs {
        Needs::default()
    }

    fn finished(&self, plan: &Plan, _rounds: u32) -> String {
        let n = settings_of(&plan.settings).map_or(0, |s| s.repeat);
        format!("the schedule ran {n} time(s), as planned")
    }
}

/// The metrics of a scheduled trial's record that have a window series (those the plan
/// tracks, when there is a plan), each with its better direction and its unit.
fn metrics(t: &TrialRecord, plan: Option<&Plan>) -> Vec<(String, Direction, String)> {
    let planned = plan.and_then(|p| p.probes.iter().find(|x| x.id == t.probe));
    let spec: Option<Vec<isobench_workloads::DeclaredMetric>> = planned
        .and_then(|x| isobench_workloads::probe(&x.name).map(|w| w.metrics_for(&x.params)))
        .or_else(|| {
            isobench_workloads::probe(&t.probe).map(|w| {
                w.metrics()
                    .iter()
                    .map(isobench_workloads::DeclaredMetric::from)
                    .collect()
            })
        });
    t.series
        .iter()
        .filter(|s| plan.is_none_or(|p| p.tracks(&t.probe, &s.metric)))
        .filter_map(|s| {
            let (direction, unit) = t
                .samples
                .iter()
                .find(|x| x.metric == s.metric)
                .map(|x| (x.direction, x.unit.clone()))
                .or_else(|| {
                    spec.as_ref()
                        .and_then(|m| m.iter().find(|m| m.name == s.metric))
                        .map(|m| (m.direction, m.unit.clone()))
                })?;
            Some((s.metric.clone(), direction, unit))
        })
        .collect()
}

/// One scheduled trial's analysis of one metric.
struct Analysed {
    probe: String,
    metric: String,
    unit: String,
    a: TrialAnalysis,
}

/// Seconds with millisecond resolution.
fn secs(x: f64) -> Value {
    Value::number(x, 3)
}

fn opt(x: Option<f64>, digits: u8) -> Value {
    x.map_or(Value::Empty, |v| Value::number(v, digits))
}

/// The kind's sections: the episodes of every scheduled trial and metric, then per trial its
/// phases and its series, one column per metric beside every tenant's CPU use.
fn sections(analyses: &[Analysed], set: Option<&TimelineSettings>) -> Vec<Section> {
    let many = analyses.len() > 1;
    let mut trials: Vec<u32> = analyses.iter().map(|x| x.a.series.trial).collect();
    trials.dedup();
    let many_trials = trials.len() > 1;
    let mut episodes = Vec::new();
    for Analysed {
        probe,
        metric,
        unit,
        a,
    } in analyses
    {
        let trial = a.series.trial;
        let (suffix, tail) = naming(
            many,
            &format!("trial {trial}, {metric}"),
            &format!("{trial}-{metric}"),
        );
        let id = |base: &str| format!("{base}{tail}");
        let unit = unit.as_str();
        let mut s = Section::new(
            &id("episodes"),
            format!(
                "Each stressor run against the phase before its start: {probe} {metric}{suffix}"
            ),
            vec![
                Column::text("tenant"),
                Column::text("stressor"),
                Column::unit("start", "s"),
                Column::unit("stop", "s"),
                Column::unit("before", unit),
                Column::unit("during", unit),
                Column::unit("degradation", "%"),
                Column::unit("time to degrade", "s"),
                Column::unit("time to recover", "s"),
                Column::text("recovered to"),
                Column::unit("aggressor rate", "ops/s"),
            ],
        )
        .with_plot(Plot::Bars {
            label: vec![0, 1, 2],
            y: vec![6],
            reference: Some(0.0),
        });
        for e in &a.episodes {
            let d = e.degradation.as_ref().map_or(Value::Empty, |d| {
                Value::estimate(d.estimate, d.lower, d.upper, 1)
            });
            s.push(vec![
                Value::text_of(e.tenant.clone()),
                Value::text_of(format!("{}@{}", e.stressor, e.intensity)),
                secs(e.start_s),
                opt(e.stop_s, 3),
                opt(e.before, 1),
                opt(e.during, 1),
                d,
                opt(e.time_to_degrade_s, 3),
                opt(e.time_to_recover_s, 3),
                e.recovered_to.clone().map_or(Value::Empty, Value::text_of),
                opt(e.aggressor_ops_per_sec, 0),
            ]);
            for n in &e.notes {
                s.notes.push(format!(
                    "{} {}@{} at {:.1} s: {n}",
                    e.tenant, e.stressor, e.intensity, e.start_s
                ));
            }
        }
        let cfg = set.map(|s| s.transition).unwrap_or_default();
        s.notes.push(format!(
            "degradation: the later half of the phase the start opens against the later half \
             of the phase before (batch means, Welch t); time to degrade: until {} windows in \
             a row leave the band of before (median +/- max({} x 1.4826 MAD, {}% of the \
             median)), before the next switch; time to recover: from the stop until {} windows \
             in a row are back in a band; accurate to one window",
            cfg.sustain,
            cfg.k,
            cfg.min_rel_width * 100.0,
            cfg.sustain
        ));
        episodes.push(s);
    }
    let mut out = episodes;
    for trial in trials {
        let of_trial: Vec<&Analysed> = analyses
            .iter()
            .filter(|x| x.a.series.trial == trial)
            .collect();
        let (suffix, tail) = naming(many_trials, &format!("trial {trial}"), &trial.to_string());
        let id = |base: &str| format!("{base}{tail}");
        out.push(phases_section(&of_trial, &id("phases"), &suffix));
        out.push(series_section(&of_trial, &id("series"), &suffix));
    }
    out
}

/// A section's title suffix (` (what)`) and id tail (`-tail`) when a run has several of it
/// (trials, or trials and metrics); both empty when it has one.
fn naming(many: bool, what: &str, tail: &str) -> (String, String) {
    if many {
        (format!(" ({what})"), format!("-{tail}"))
    } else {
        (String::new(), String::new())
    }
}

/// The tenants whose CPU use a trial's analysis sampled, in the timeline's order.
fn cpu_tenants(a: &TrialAnalysis) -> Vec<String> {
    a.series.cpu.iter().map(|(t, _)| t.clone()).collect()
}

/// One trial's phases between switches: what ran, the median of each metric's settled
/// windows and each tenant's CPU use.
fn phases_section(of_trial: &[&Analysed], id: &str, suffix: &str) -> Section {
    let first = &of_trial[0].a;
    let probe = &of_trial[0].probe;
    let tenants: Vec<String> = first
        .phases
        .first()
        .map(|p| p.cpu.iter().map(|c| c.0.clone()).collect())
        .unwrap_or_else(|| cpu_tenants(first));
    let mut cols = vec![
        Column::unit("from", "s"),
        Column::unit("to", "s"),
        Column::text("running"),
        Column::text("windows"),
    ];
    cols.extend(
        of_trial
            .iter()
            .map(|x| Column::unit(&format!("{} median", x.metric), &x.unit)),
    );
    cols.extend(
        tenants
            .iter()
            .map(|t| Column::unit(&format!("{t} CPU"), "CPUs")),
    );
    let mut s = Section::new(
        id,
        format!("Phases between switches: {probe}{suffix}"),
        cols,
    );
    for (i, p) in first.phases.iter().enumerate() {
        let mut row = vec![
            secs(p.from_s),
            secs(p.to_s),
            Value::text_of(if p.running.is_empty() {
                "idle".to_string()
            } else {
                p.running.join(" ")
            }),
            Value::number(p.windows as f64, 0),
        ];
        // Every metric of a trial comes from the same windows, so its phases line up.
        row.extend(of_trial.iter().map(|x| {
            x.a.phases
                .get(i)
                .filter(|q| q.from_s == p.from_s)
                .map_or(Value::Empty, |q| opt(q.median, 1))
        }));
        row.extend(p.cpu.iter().map(|c| Value::number(c.1, 2)));
        s.push(row);
    }
    s.notes.push(
        "median: of the windows in the later half of the phase; CPU: mean CPUs the tenant used \
         over the phase"
            .into(),
    );
    s
}

/// One trial's window series: each metric per window and the CPU use of each tenant in the
/// sample interval the window ends in, with the switches as they happened.
fn series_section(of_trial: &[&Analysed], id: &str, suffix: &str) -> Section {
    let first = &of_trial[0].a;
    let probe = &of_trial[0].probe;
    let mut cols = vec![
        Column::unit("window start", "s"),
        Column::unit("window end", "s"),
    ];
    cols.extend(of_trial.iter().map(|x| Column::unit(&x.metric, &x.unit)));
    cols.extend(
        first
            .series
            .cpu
            .iter()
            .map(|(t, _)| Column::unit(&format!("{t} CPU"), "CPUs")),
    );
    let spans = first
        .phases
        .iter()
        .filter(|p| !p.running.is_empty())
        .map(|p| isobench_results::Span {
            from: p.from_s,
            to: p.to_s,
            label: p.running.join(" "),
        })
        .collect();
    let n = cols.len();
    let mut s = Section::new(
        id,
        format!("The series: {probe} per window, each tenant's CPU use{suffix}"),
        cols,
    )
    .with_plot(Plot::Series {
        x: 0,
        y: (2..n).collect(),
        spans,
    });
    for (i, &(a0, b0, _)) in first.series.windows.iter().enumerate() {
        let mut row = vec![secs(a0), secs(b0)];
        row.extend(of_trial.iter().map(|x| {
            x.a.series
                .windows
                .get(i)
                .filter(|w| w.0 == a0)
                .map_or(Value::Empty, |w| Value::number(w.2, 1))
        }));
        row.extend(first.series.cpu.iter().map(|(_, xs)| {
            xs.iter()
                .find(|(t, _)| *t >= b0)
                .or(xs.last())
                .map_or(Value::Empty, |(_, u)| Value::number(*u, 2))
        }));
        s.push(row);
    }
    s.notes.push(format!(
        "switches: {}",
        first
            .series
            .switches
            .iter()
            .map(|(t, who, what, on, err)| format!(
                "{t:.3} s {who} {} {what}{}",
                if *on { "start" } else { "stop" },
                err.as_ref()
                    .map_or(String::new(), |e| format!(" (failed: {e})"))
            ))
            .collect::<Vec<_>>()
            .join("; ")
    ));
    s
}
