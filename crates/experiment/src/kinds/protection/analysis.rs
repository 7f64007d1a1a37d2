//! The protection kind's analysis: each episode's record read into per-window service
//! figures ([`isobench_stats::episode_figures`]), each aggressor-alone trial beside it into
//! the aggressor's work conserved, and per condition the mean of every figure over the
//! episodes with its bootstrap interval ([`isobench_stats::episode_interval`]), isolation
//! and efficiency in one table; then per condition the service's per-window timeline (the
//! median over episodes at each offset), with the aggressor's run shaded and the SLO drawn.

use std::collections::BTreeMap;

use isobench_results::{Column, Plot, Section, Span as PlotSpan, Value};
use isobench_stats::{
    episode_figures, episode_interval, EpisodeFigures, EpisodeSpec, ServiceWindow,
};
use isobench_store::{
    Condition as StoreCondition, LoadedRun, StressorMode, TrialRecord, TrialStatus,
};

use super::settings::{ProtectionSettings, SLO_PARAM};
use crate::cells::{Analysis, StatsSettings};
use crate::plan::Plan;

/// The service's achieved rate, per window and over the episode.
pub const RATE: &str = "rate_rps";
/// The rate the service was held to.
pub const TARGET: &str = "target_rps";
/// The service's p99 latency, ms.
pub const P99: &str = "lat_p99_ms";

/// One analysed episode.
#[derive(Debug, Clone)]
pub struct EpisodeResult {
    /// The condition (`memhog@100`).
    pub condition: String,
    /// Its trial's block.
    pub block: u32,
    /// The service's figures.
    pub figures: EpisodeFigures,
    /// The rate the service held, requests per second.
    pub target_rps: f64,
    /// The aggressors' rate beside the service, ops/s.
    pub beside_ops: Option<f64>,
    /// The aggressors' rate alone in the trial after it, ops/s.
    pub alone_ops: Option<f64>,
    /// The windows, offsets from the episode's first window in s, with isol% and p99.
    pub windows: Vec<(f64, f64, Option<f64>)>,
    /// When the aggressor ran, offsets in s.
    pub aggressor: (f64, Option<f64>),
    /// What the aggressor's switches reported as failing (a start refused, a death).
    pub notes: Vec<String>,
}

impl EpisodeResult {
    /// Work conserved, percent: the aggressor's rate beside the service over its rate alone.
    pub fn work_conserved(&self) -> Option<f64> {
        match (self.beside_ops, self.alone_ops) {
            (Some(b), Some(a)) if a > 0.0 => Some(100.0 * b / a),
            _ => None,
        }
    }
}

fn series<'a>(t: &'a TrialRecord, metric: &str) -> Option<&'a [isobench_store::WindowRecord]> {
    t.series
        .iter()
        .find(|s| s.metric == metric)
        .map(|s| s.windows.as_slice())
}

fn sample(t: &TrialRecord, metric: &str) -> Option<f64> {
    t.samples
        .iter()
        .find(|s| s.metric == metric)
        .map(|s| s.value)
        .filter(|v| v.is_finite())
}

/// The SLO of the run: the settings', else the service probe's parameter.
pub fn slo_ms(set: &ProtectionSettings, plan: Option<&Plan>) -> Option<f64> {
    set.slo_ms.or_else(|| {
        plan?
            .probes
            .iter()
            .find(|p| p.id == set.probe)?
            .params
            .0
            .get(SLO_PARAM)?
            .as_f64()
    })
}

/// One episode's record, read. `Err` says why it cannot be analysed.
fn episode(
    t: &TrialRecord,
    solo: Option<&TrialRecord>,
    set: &ProtectionSettings,
    slo: f64,
) -> Result<EpisodeResult, String> {
    let condition = match &t.condition {
        StoreCondition::Contended(id) => id.clone(),
        StoreCondition::Baseline => return Err("a baseline record".into()),
    };
    let tl = t
        .timeline
        .as_ref()
        .ok_or("the record has no timeline of the aggressor")?;
    let rate = series(t, RATE).ok_or("the service reported no per-window rate")?;
    let first = rate.first().ok_or("the service's rate series is empty")?;
    let target = sample(t, TARGET).ok_or("the service reported no target rate")?;
    let p99: BTreeMap<u64, f64> = series(t, P99)
        .map(|ws| ws.iter().map(|w| (w.start_ns, w.value)).collect())
        .unwrap_or_default();
    let windows: Vec<ServiceWindow> = rate
        .iter()
        .map(|w| ServiceWindow {
            start_ns: w.start_ns,
            end_ns: w.end_ns,
            rate: w.value,
            p99_ms: p99.get(&w.start_ns).copied().filter(|v| v.is_finite()),
        })
        .collect();
    let mut notes: Vec<String> = tl
        .switches
        .iter()
        .filter_map(|s| {
            s.error.as_ref().map(|e| {
                format!(
                    "{} {} {}: {e}",
                    s.tenant,
                    s.stressor,
                    if s.on { "start" } else { "stop" }
                )
            })
        })
        .collect();
    let start = tl
        .switches
        .iter()
        .filter(|s| s.on && s.error.is_none())
        .map(|s| s.done_ns)
        .min()
        .ok_or_else(|| {
            format!(
                "the aggressor did not start{}",
                notes.first().map(|n| format!(" ({n})")).unwrap_or_default()
            )
        })?;
    let stops: Vec<&isobench_store::ScheduledSwitch> =
        tl.switches.iter().filter(|s| !s.on).collect();
    let stop = stops.iter().map(|s| s.requested_ns).max();
    let beside: Vec<f64> = stops.iter().filter_map(|s| s.ops_per_sec).collect();
    let beside_ops = (!beside.is_empty()).then(|| beside.iter().sum());
    let alone_ops = solo.and_then(alone_ops);
    let spec = EpisodeSpec {
        target_rps: target,
        slo_ms: slo,
        settled_ns: first.start_ns + set.settle.as_nanos() as u64,
        start_ns: start,
        stop_ns: stop,
        sustain: set.sustain as usize,
        recovered_isol_pct: set.recovered_isol,
    };
    let figures = episode_figures(&windows, &spec).map_err(|e| e.to_string())?;
    let alone_s = start.saturating_sub(first.start_ns) as f64 / 1e9;
    notes.extend(figure_notes(&figures, alone_s, set));
    let t0 = first.start_ns;
    let off = |ns: u64| ns.saturating_sub(t0) as f64 / 1e9;
    Ok(EpisodeResult {
        condition,
        block: t.key.block,
        windows: windows
            .iter()
            .map(|w| (off(w.start_ns), 100.0 * w.rate / target, w.p99_ms))
            .collect(),
        aggressor: (off(start), stop.map(off)),
        figures,
        target_rps: target,
        beside_ops,
        alone_ops,
        notes,
    })
}

/// The stressor's ops/s alone, summed over its reports in the solo record.
fn alone_ops(solo: &TrialRecord) -> Option<f64> {
    let r: Vec<f64> = solo
        .stressor_reports
        .iter()
        .filter(|r| r.mode == StressorMode::Alone)
        .map(|r| r.ops_per_sec)
        .collect();
    (!r.is_empty()).then(|| r.iter().sum())
}

/// Why an episode's figures are missing or weak: no baseline p99 (the service had `alone_s`
/// seconds alone), or windows with too few requests for their p99.
fn figure_notes(figures: &EpisodeFigures, alone_s: f64, set: &ProtectionSettings) -> Vec<String> {
    let mut notes = Vec::new();
    if figures.baseline_p99_ms.is_none() {
        notes.push(
            if alone_s <= set.settle.as_secs_f64() + set.window.as_secs_f64() {
                format!(
                "lat-imp is empty: the service's first window began only {alone_s:.1} s before \
                 the aggressor started (its server or load started late), which leaves no \
                 whole window alone after its settle of {:.1} s; lengthen `stable`",
                set.settle.as_secs_f64()
            )
            } else {
                "lat-imp is empty: no window of the service alone after its settle had a p99 (it \
             answered nothing then)"
                    .to_string()
            },
        );
    }
    if figures.few_event_windows > 0 {
        notes.push(format!(
            "{} window(s) from the aggressor's start on completed fewer than {} requests: their \
             p99 is the near-maximum of a few (a violation there is certain, a pass is not)",
            figures.few_event_windows,
            isobench_stats::FEW_EVENTS
        ));
    }
    notes
}

/// Every episode of the run, by condition in plan order, and why records were left out.
pub fn episodes(
    run: &LoadedRun,
    plan: Option<&Plan>,
) -> (Vec<EpisodeResult>, Vec<String>, Option<ProtectionSettings>) {
    let Some(set) = plan.and_then(|p| ProtectionSettings::of(&p.settings)) else {
        return (Vec::new(), Vec::new(), None);
    };
    let Some(slo) = slo_ms(&set, plan) else {
        return (
            Vec::new(),
            vec!["no SLO: set slo_ms in [protection] or in the service's params".into()],
            Some(set),
        );
    };
    let mut out = Vec::new();
    let mut left_out = Vec::new();
    for t in run
        .trials
        .iter()
        .filter(|t| t.timeline.is_some() && t.probe == set.probe && t.tenant == set.victim)
    {
        if matches!(t.status, TrialStatus::Dnr(_) | TrialStatus::Failed(_)) {
            left_out.push(format!(
                "episode in block {} ({}): {}",
                t.key.block,
                t.condition,
                t.status.reason().unwrap_or("failed")
            ));
            continue;
        }
        let solo = run.trials.iter().find(|s| {
            s.key.round == t.key.round
                && s.key.block == t.key.block + 1
                && s.condition == t.condition
                && s.timeline.is_none()
        });
        match episode(t, solo, &set, slo) {
            Ok(mut e) => {
                if let Some(why) = t.status.reason() {
                    e.notes.push(format!("disturbed: {why}"));
                }
                out.push(e)
            }
            Err(why) => left_out.push(format!(
                "episode in block {} ({}): {why}",
                t.key.block, t.condition
            )),
        }
    }
    if let Some(p) = plan {
        let order = |c: &str| p.conditions.iter().position(|x| x.id == c);
        out.sort_by_key(|e| (order(&e.condition), e.block));
    }
    (out, left_out, Some(set))
}

/// The kind's analysis: the summary table and a timeline per condition.
pub fn analyze(run: &LoadedRun, plan: Option<&Plan>, settings: &StatsSettings) -> Analysis {
    let (eps, left_out, set) = episodes(run, plan);
    let mut sections = Vec::new();
    if let Some(set) = set {
        let slo = slo_ms(&set, plan);
        sections.push(summary(&eps, &left_out, slo, settings));
        let mut conds: Vec<&str> = eps.iter().map(|e| e.condition.as_str()).collect();
        conds.dedup();
        for c in conds {
            let of: Vec<&EpisodeResult> = eps.iter().filter(|e| e.condition == c).collect();
            sections.push(timeline(c, &of, slo, &set));
        }
    }
    Analysis {
        cells: Vec::new(),
        aggressor: Vec::new(),
        classes: Vec::new(),
        sections,
    }
}

/// The median of the finite values, if any.
fn med(xs: Vec<f64>) -> Option<f64> {
    let v: Vec<f64> = xs.into_iter().filter(|x| x.is_finite()).collect();
    (!v.is_empty()).then(|| isobench_common::median(&v))
}

/// Id of the summary section.
pub const SUMMARY: &str = "protection";

fn interval(values: &[f64], settings: &StatsSettings, salt: u64, digits: u8) -> Value {
    match episode_interval(
        values,
        settings.confidence,
        settings.resamples.max(200),
        settings.seed ^ salt,
    ) {
        Ok(i) if i.n > 1 => Value::estimate(i.estimate, i.lower, i.upper, digits),
        Ok(i) => Value::number(i.estimate, digits),
        Err(_) => Value::Empty,
    }
}

/// One row per condition: isolation and efficiency side by side.
fn summary(
    eps: &[EpisodeResult],
    left_out: &[String],
    slo: Option<f64>,
    settings: &StatsSettings,
) -> Section {
    let mut s = Section::new(
        SUMMARY,
        "Protection of the service: what it kept while each aggressor ran, and what the \
         aggressor kept",
        vec![
            Column::text("aggressor"),
            Column::text("episodes"),
            Column::unit("isol p01", "%"),
            Column::unit("isol p05", "%"),
            Column::unit("isol p50", "%"),
            Column::unit("isol mean", "%"),
            Column::unit("lat-imp", "%"),
            Column::unit("SLO seconds", "%"),
            Column::unit("above SLO", "ms x s"),
            Column::unit("recovery", "s"),
            Column::unit("work conserved", "%"),
            Column::unit("aggressor rate", "ops/s"),
        ],
    )
    .with_plot(Plot::Bars {
        label: vec![0],
        y: vec![5, 10],
        reference: Some(100.0),
    });
    let mut conds: Vec<&str> = eps.iter().map(|e| e.condition.as_str()).collect();
    conds.dedup();
    for (k, c) in conds.iter().enumerate() {
        let of: Vec<&EpisodeResult> = eps.iter().filter(|e| e.condition == *c).collect();
        let salt = (k as u64 + 1) << 8;
        let f = |get: &dyn Fn(&EpisodeResult) -> Option<f64>| -> Vec<f64> {
            of.iter().filter_map(|e| get(e)).collect()
        };
        let recovered = f(&|e| e.figures.recovery_s);
        let mut recovery = interval(&recovered, settings, salt + 7, 1);
        if recovered.len() < of.len() {
            recovery = recovery.flagged(format!(
                "{} of {} episode(s) had not recovered when they ended",
                of.len() - recovered.len(),
                of.len()
            ));
        }
        s.push(vec![
            Value::text_of(c.to_string()),
            Value::text_of(of.len().to_string()),
            interval(&f(&|e| Some(e.figures.isol.p01)), settings, salt, 1),
            interval(&f(&|e| Some(e.figures.isol.p05)), settings, salt + 1, 1),
            interval(&f(&|e| Some(e.figures.isol.p50)), settings, salt + 2, 1),
            interval(&f(&|e| Some(e.figures.isol.mean)), settings, salt + 3, 1),
            interval(&f(&|e| e.figures.lat_imp_pct), settings, salt + 4, 1),
            interval(
                &f(&|e| Some(e.figures.slo_violation_pct)),
                settings,
                salt + 5,
                1,
            ),
            interval(
                &f(&|e| Some(e.figures.slo_area_ms_s)),
                settings,
                salt + 6,
                1,
            ),
            recovery,
            interval(&f(&|e| e.work_conserved()), settings, salt + 8, 1),
            interval(&f(&|e| e.beside_ops), settings, salt + 9, 0),
        ]);
        if let (Some(t), Some(b)) = (
            med(of.iter().map(|e| e.target_rps).collect()),
            med(of
                .iter()
                .filter_map(|e| e.figures.baseline_p99_ms)
                .collect()),
        ) {
            s.notes.push(format!(
                "{c}: the service held {t:.0} requests/s; its p99 before the aggressor was \
                 {b:.2} ms (medians over episodes)"
            ));
        }
        for e in &of {
            for n in &e.notes {
                s.notes.push(format!("{c}, block {}: {n}", e.block));
            }
            if e.work_conserved().is_none() {
                s.notes.push(format!(
                    "{c}, block {}: no work conserved (the aggressor's rate {} was not \
                     measured)",
                    e.block,
                    if e.beside_ops.is_none() {
                        "beside the service"
                    } else {
                        "alone"
                    }
                ));
            }
        }
    }
    if let Some(slo) = slo {
        s.notes.push(format!(
            "isol%: the service's completed requests per second as a share of its target, over \
             the seconds the aggressor ran (p01, p05, p50, mean); lat-imp%: the mean over those \
             seconds of p99 / (median p99 before the aggressor) - 1; SLO seconds: the share of \
             the seconds from the aggressor's start to the episode's end whose p99 was above \
             {slo} ms, and above SLO the area over it; recovery: from the stop until 3 good \
             seconds in a row; work conserved: the aggressor's rate beside the service over its \
             rate alone under the same setting, and aggressor rate its own rate beside the service \
             (to compare settings at equal aggressor throughput). Means over episodes with \
             {:.0}% bootstrap intervals over episodes.",
            settings.confidence * 100.0
        ));
    }
    for l in left_out {
        s.notes.push(format!("left out: {l}"));
    }
    s
}

/// The service second by second under condition `c`: the median over its episodes at each
/// window's offset.
fn timeline(c: &str, of: &[&EpisodeResult], slo: Option<f64>, set: &ProtectionSettings) -> Section {
    let mut s = Section::new(
        &format!("protection-timeline-{c}"),
        format!(
            "The service second by second beside {c} (median of {} episode(s))",
            of.len()
        ),
        vec![
            Column::unit("time", "s"),
            Column::unit("isol", "%"),
            Column::unit("p99", "ms"),
            Column::unit("SLO", "ms"),
        ],
    );
    let n = of.iter().map(|e| e.windows.len()).max().unwrap_or(0);
    for i in 0..n {
        let at: Vec<&(f64, f64, Option<f64>)> =
            of.iter().filter_map(|e| e.windows.get(i)).collect();
        let t = med(at.iter().map(|w| w.0).collect()).unwrap_or(f64::NAN);
        let isol = med(at.iter().map(|w| w.1).collect());
        let p99 = med(at.iter().filter_map(|w| w.2).collect());
        s.push(vec![
            Value::number(t, 1),
            isol.map_or(Value::Empty, |v| Value::number(v, 1)),
            p99.map_or(Value::Empty, |v| Value::number(v, 2)),
            slo.map_or(Value::Empty, |v| Value::number(v, 2)),
        ]);
    }
    let starts: Vec<f64> = of.iter().map(|e| e.aggressor.0).collect();
    let stops: Vec<f64> = of.iter().filter_map(|e| e.aggressor.1).collect();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let from = if starts.is_empty() {
        set.stable.as_secs_f64()
    } else {
        mean(&starts)
    };
    let to = if stops.is_empty() {
        (set.stable + set.aggressor).as_secs_f64()
    } else {
        mean(&stops)
    };
    s = s.with_plot(Plot::Series {
        x: 0,
        y: vec![1, 2, 3],
        spans: vec![PlotSpan {
            from,
            to,
            label: c.to_string(),
        }],
    });
    s.notes.push(format!(
        "the shaded span is when {c} ran (mean of its episodes' starts and stops); times from \
         the first window of the service's hold"
    ));
    s
}
