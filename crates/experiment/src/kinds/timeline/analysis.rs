//! What a scheduled trial shows: for each stressor run of the schedule (an *episode*), how
//! much worse the victim's metric was while it ran than just before, how long the metric took
//! to leave its normal band after the start and to come back after the stop; for each phase
//! between switches, the metric's level and every tenant's CPU use.
//!
//! The method, on the victim's window series and the switches as they happened:
//! - **Phases** run from one switch to the next (a switch counts from when it was asked
//!   for); a phase's *settled part* is its later half, so a slow transition does not blur
//!   the level.
//! - **Degradation** of an episode: the settled part of the phase its start opens against
//!   the settled part of the phase before it, with the batch-means interval of
//!   [`isobench_stats::phase_degradation`].
//! - **Time to degrade**: [`isobench_stats::time_to_leave`] of the band of the phase
//!   before the start ([`isobench_stats::Band::robust`] of its settled part), searched from
//!   the start until the next switch of any tenant, so a later neighbour's effect is not
//!   blamed on this one.
//! - **Time to recover**, asked only of an episode that degraded:
//!   [`isobench_stats::time_to_return`] from the stop until the next switch, into the band
//!   before the start when the same stressors run after the stop as before the start (the
//!   neighbours are back where they were), else into the band of the settled part of the
//!   phase after the stop (the metric has settled at the new level).

use isobench_stats::{
    phase_degradation, time_to_leave, time_to_return, Band, DegradationCi, Detected, Direction,
    TimedValue, TransitionConfig,
};
use isobench_store::{ScheduledSwitch, Timeline, TrialRecord};
use serde::{Deserialize, Serialize};

/// One stressor run of the schedule, as measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeRow {
    /// The scheduled trial (0 for the first).
    pub trial: u32,
    /// The aggressor tenant.
    pub tenant: String,
    /// Stressor name.
    pub stressor: String,
    /// Intensity, 0..=100.
    pub intensity: u8,
    /// When it started, seconds after the trial's start (as asked for).
    pub start_s: f64,
    /// When it stopped, seconds, when it did.
    pub stop_s: Option<f64>,
    /// The median of the settled part of the phase before the start, in the metric's unit.
    pub before: Option<f64>,
    /// The median of the settled part of the phase the start opens.
    pub during: Option<f64>,
    /// Degradation of `during` against `before`, percent, with its interval.
    pub degradation: Option<DegradationCi>,
    /// Seconds from the start until the metric left the band of before, when it did.
    pub time_to_degrade_s: Option<f64>,
    /// Seconds from the stop until the metric was back in its band, when it came back.
    pub time_to_recover_s: Option<f64>,
    /// Which band the recovery was measured into (`before the start` or `after the stop`).
    pub recovered_to: Option<String>,
    /// The stressor's own rate while it ran, operations per second.
    pub aggressor_ops_per_sec: Option<f64>,
    /// Why a value is missing or should be read with care.
    pub notes: Vec<String>,
}

/// One phase between switches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseRow {
    /// The scheduled trial.
    pub trial: u32,
    /// Start, seconds after the trial's start.
    pub from_s: f64,
    /// End, seconds.
    pub to_s: f64,
    /// What ran: `tenant:stressor@intensity`, in tenant order; empty when all were idle.
    pub running: Vec<String>,
    /// Windows of the settled part.
    pub windows: usize,
    /// Median of the settled part, in the metric's unit.
    pub median: Option<f64>,
    /// Mean CPUs used per tenant over the phase, in the timeline's tenant order.
    pub cpu: Vec<(String, f64)>,
}

/// A scheduled trial's series, for export: the metric's windows and every tenant's CPU use,
/// in seconds after the trial's start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesExport {
    /// The scheduled trial.
    pub trial: u32,
    /// `(window start s, window end s, value)`.
    pub windows: Vec<(f64, f64, f64)>,
    /// Per tenant: `(time s, CPUs used since the previous sample)`.
    pub cpu: Vec<(String, Vec<(f64, f64)>)>,
    /// The switches: `(time s, tenant, stressor@intensity, on, error)`.
    pub switches: Vec<(f64, String, String, bool, Option<String>)>,
}

/// What one scheduled trial shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialAnalysis {
    /// The episodes, by start.
    pub episodes: Vec<EpisodeRow>,
    /// The phases, in time order.
    pub phases: Vec<PhaseRow>,
    /// The series behind them.
    pub series: SeriesExport,
}

/// Analyses one scheduled trial: `record` holds the victim's window series of `metric`
/// (which is better in `direction`) and the timeline; `trial` numbers it. `None` when the
/// record has no timeline or no series of the metric.
pub fn analyze_trial(
    record: &TrialRecord,
    trial: u32,
    metric: &str,
    direction: Direction,
    config: &TransitionConfig,
    level: f64,
) -> Option<TrialAnalysis> {
    let tl = record.timeline.as_ref()?;
    let windows: Vec<TimedValue> = record
        .series
        .iter()
        .find(|s| s.metric == metric)?
        .windows
        .iter()
        .map(|w| TimedValue {
            start_ns: w.start_ns,
            end_ns: w.end_ns,
            value: w.value,
        })
        .collect();
    let secs = |ns: u64| ns.saturating_sub(tl.start_ns) as f64 / 1e9;
    let ok: Vec<&ScheduledSwitch> = tl.switches.iter().filter(|s| s.error.is_none()).collect();
    let bounds = boundaries(tl, &ok);
    let phases: Vec<PhaseRow> = bounds
        .windows(2)
        .enumerate()
        .map(|(i, b)| PhaseRow {
            trial,
            from_s: secs(b[0]),
            to_s: secs(b[1]),
            running: running_after(&ok, i),
            windows: settled(&windows, b[0], b[1]).len(),
            median: median(&settled(&windows, b[0], b[1])),
            cpu: tl
                .cpu
                .iter()
                .map(|c| (c.tenant.clone(), mean_cpu(c, b[0], b[1])))
                .collect(),
        })
        .collect();
    let mut episodes = Vec::new();
    for (k, s) in tl.switches.iter().enumerate().filter(|(_, s)| s.on) {
        let parts = TrialParts {
            tl,
            ok: &ok,
            bounds: &bounds,
            windows: &windows,
            trial,
        };
        episodes.push(episode(&parts, s, k, direction, config, level));
    }
    let series = SeriesExport {
        trial,
        windows: windows
            .iter()
            .map(|w| (secs(w.start_ns), secs(w.end_ns), w.value))
            .collect(),
        cpu: tl
            .cpu
            .iter()
            .map(|c| {
                (
                    c.tenant.clone(),
                    c.usage().into_iter().map(|(t, u)| (secs(t), u)).collect(),
                )
            })
            .collect(),
        switches: tl
            .switches
            .iter()
            .map(|s| {
                (
                    secs(s.requested_ns),
                    s.tenant.clone(),
                    format!("{}@{}", s.stressor, s.intensity),
                    s.on,
                    s.error.clone(),
                )
            })
            .collect(),
    };
    Some(TrialAnalysis {
        episodes,
        phases,
        series,
    })
}

/// The phases' boundaries: the trial's start, every successful switch (as asked for), the
/// trial's end.
fn boundaries(tl: &Timeline, ok: &[&ScheduledSwitch]) -> Vec<u64> {
    let mut b = vec![tl.start_ns];
    b.extend(ok.iter().map(|s| s.requested_ns.max(tl.start_ns)));
    b.push(tl.end_ns.max(*b.last().expect("one at least")));
    b
}

/// What runs after the first `n` successful switches.
fn running_after(ok: &[&ScheduledSwitch], n: usize) -> Vec<String> {
    let mut on: std::collections::BTreeMap<&str, String> = Default::default();
    for s in &ok[..n.min(ok.len())] {
        if s.on {
            on.insert(
                &s.tenant,
                format!("{}:{}@{}", s.tenant, s.stressor, s.intensity),
            );
        } else {
            on.remove(s.tenant.as_str());
        }
    }
    on.into_values().collect()
}

/// The values of the windows wholly inside the later half of `[from, to)`.
fn settled(windows: &[TimedValue], from: u64, to: u64) -> Vec<f64> {
    let mid = from + (to.saturating_sub(from)) / 2;
    windows
        .iter()
        .filter(|w| w.start_ns >= mid && w.end_ns <= to && w.value.is_finite())
        .map(|w| w.value)
        .collect()
}

fn median(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| isobench_common::median(xs))
}

/// Mean CPUs used by a tenant between `from` and `to`: the CPU time between the samples
/// nearest inside the interval over the time between them.
fn mean_cpu(c: &isobench_store::CpuSeries, from: u64, to: u64) -> f64 {
    let inside: Vec<&isobench_store::CpuSample> = c
        .samples
        .iter()
        .filter(|s| s.at_ns >= from && s.at_ns <= to)
        .collect();
    match (inside.first(), inside.last()) {
        (Some(a), Some(b)) if b.at_ns > a.at_ns => {
            b.cpu_ns.saturating_sub(a.cpu_ns) as f64 / (b.at_ns - a.at_ns) as f64
        }
        _ => 0.0,
    }
}

/// One scheduled trial as its episodes read it: the timeline, the switches that succeeded,
/// the phases' boundaries, the victim's windows, and the trial's number.
struct TrialParts<'a> {
    tl: &'a Timeline,
    ok: &'a [&'a ScheduledSwitch],
    bounds: &'a [u64],
    windows: &'a [TimedValue],
    trial: u32,
}

/// The row of the episode started by switch `k` of the timeline.
fn episode(
    parts: &TrialParts<'_>,
    start: &ScheduledSwitch,
    k: usize,
    direction: Direction,
    config: &TransitionConfig,
    level: f64,
) -> EpisodeRow {
    let TrialParts {
        tl,
        ok,
        bounds,
        windows,
        trial,
    } = *parts;
    let secs = |ns: u64| ns.saturating_sub(tl.start_ns) as f64 / 1e9;
    let stop = tl.switches[k + 1..]
        .iter()
        .find(|s| !s.on && s.tenant == start.tenant);
    let mut row = EpisodeRow {
        trial,
        tenant: start.tenant.clone(),
        stressor: start.stressor.clone(),
        intensity: start.intensity,
        start_s: secs(start.requested_ns),
        stop_s: stop.map(|s| secs(s.requested_ns)),
        before: None,
        during: None,
        degradation: None,
        time_to_degrade_s: None,
        time_to_recover_s: None,
        recovered_to: None,
        aggressor_ops_per_sec: stop.and_then(|s| s.ops_per_sec),
        notes: Vec::new(),
    };
    if let Some(e) = &start.error {
        row.notes.push(format!("did not start: {e}"));
        return row;
    }
    // Position of the start among the successful switches: phase `i` ends at it.
    let i = ok
        .iter()
        .position(|s| std::ptr::eq(*s, start))
        .expect("a successful switch is listed");
    let (prev_from, at, next) = (bounds[i], bounds[i + 1], bounds[i + 2]);
    let before = settled(windows, prev_from, at);
    let during = settled(windows, at, next);
    row.before = median(&before);
    row.during = median(&during);
    match phase_degradation(&before, &during, direction, level) {
        Ok(d) => row.degradation = Some(d),
        Err(e) => row.notes.push(format!("no degradation interval: {e}")),
    }
    let Ok(band) = Band::robust(&before, config.k, config.min_rel_width) else {
        row.notes
            .push("no window in the phase before the start: no band to leave".into());
        return row;
    };
    let degrade = time_to_leave(windows, &band, at, next, config.sustain);
    row.time_to_degrade_s = degrade.map(|d: Detected| d.after_ns as f64 / 1e9);
    if degrade.is_none() {
        row.notes.push(format!(
            "stayed within the band of before ({:.4} +/- {:.4}) until the next switch",
            band.center, band.half_width
        ));
        return row;
    }
    let Some(stop) = stop.filter(|s| s.error.is_none()) else {
        if stop.is_some() {
            row.notes.push("its stop failed".into());
        }
        return row;
    };
    let j = ok
        .iter()
        .position(|s| std::ptr::eq(*s, stop))
        .expect("a successful switch is listed");
    let (stop_at, after_next) = (bounds[j + 1], bounds[j + 2]);
    let same_neighbours = running_after(ok, i) == running_after(ok, j + 1);
    let (target, word) = if same_neighbours {
        (Some(band), "before the start")
    } else {
        (
            Band::robust(
                &settled(windows, stop_at, after_next),
                config.k,
                config.min_rel_width,
            )
            .ok(),
            "after the stop",
        )
    };
    let Some(target) = target else {
        row.notes
            .push("no window in the phase after the stop: no band to return to".into());
        return row;
    };
    row.recovered_to = Some(word.to_string());
    let back = time_to_return(windows, &target, stop_at, after_next, config.sustain);
    row.time_to_recover_s = back.map(|d| d.after_ns as f64 / 1e9);
    if back.is_none() {
        row.notes.push(format!(
            "not back in the band {word} before the next switch"
        ));
    }
    row
}

#[cfg(test)]
mod tests {
    use isobench_store::{
        Condition, CpuSample, CpuSeries, SeriesRecord, Timestamp, TrialKey, TrialStatus,
        WindowRecord,
    };

    use super::*;

    const S: u64 = 1_000_000_000;
    const T0: u64 = 5 * S;

    fn switch(tenant: &str, on: bool, at_s: f64) -> ScheduledSwitch {
        let at = T0 + (at_s * 1e9) as u64;
        ScheduledSwitch {
            tenant: tenant.into(),
            stressor: "cpu".into(),
            intensity: 100,
            on,
            planned_ns: (at_s * 1e9) as u64,
            requested_ns: at,
            done_ns: at + 1_000_000,
            error: None,
            ops_per_sec: (!on).then_some(1000.0),
        }
    }

    /// 100 ms windows for `len` s; `f(t_s)` gives the value at a window's start.
    fn record(len: f64, switches: Vec<ScheduledSwitch>, f: impl Fn(f64) -> f64) -> TrialRecord {
        let n = (len * 10.0) as u64;
        let windows = (0..n)
            .map(|i| WindowRecord {
                start_ns: T0 + i * S / 10,
                end_ns: T0 + (i + 1) * S / 10,
                value: f(i as f64 / 10.0) * (1.0 + 0.002 * ((i * 7919 % 11) as f64 - 5.0)),
            })
            .collect();
        let cpu = |tenant: &str, busy: &dyn Fn(f64) -> bool| CpuSeries {
            tenant: tenant.into(),
            samples: (0..=len as u64)
                .scan(0u64, |acc, s| {
                    let at = s as f64;
                    if s > 0 && busy(at - 0.5) {
                        *acc += S;
                    }
                    Some(CpuSample {
                        at_ns: T0 + s * S,
                        cpu_ns: *acc,
                    })
                })
                .collect(),
        };
        TrialRecord {
            key: TrialKey::default(),
            probe: "net-rtt".into(),
            tenant: "victim".into(),
            condition: Condition::Baseline,
            repetition: 0,
            status: TrialStatus::Ok,
            started_at: Timestamp::from_unix_millis(0),
            ended_at: Timestamp::from_unix_millis(0),
            load_note: None,
            samples: Vec::new(),
            histograms: Vec::new(),
            stressor_reports: Vec::new(),
            series: vec![SeriesRecord {
                metric: "udp_rtt_mean".into(),
                windows,
            }],
            modulation: None,
            noise: None,
            mechanism: None,
            limits: None,
            tenant_usage: Vec::new(),
            timeline: Some(Timeline {
                start_ns: T0,
                end_ns: T0 + (len * 1e9) as u64,
                switches,
                cpu: vec![
                    cpu("victim", &|_| true),
                    cpu("a1", &|t| (10.0..30.0).contains(&t)),
                ],
            }),
        }
    }

    fn analyze(r: &TrialRecord) -> TrialAnalysis {
        analyze_trial(
            r,
            0,
            "udp_rtt_mean",
            Direction::Lower,
            &TransitionConfig::default(),
            0.95,
        )
        .unwrap()
    }

    #[test]
    fn an_on_off_episode_degrades_and_recovers_to_where_it_was() {
        // RTT doubles 0.35 s after the start at 10 s, and is back 0.75 s after the stop at 30 s.
        let r = record(
            40.0,
            vec![switch("a1", true, 10.0), switch("a1", false, 30.0)],
            |t| {
                if (10.35..30.75).contains(&t) {
                    200.0
                } else {
                    100.0
                }
            },
        );
        let a = analyze(&r);
        assert_eq!(a.episodes.len(), 1);
        let e = &a.episodes[0];
        assert_eq!((e.start_s, e.stop_s), (10.0, Some(30.0)));
        let d = e.degradation.as_ref().unwrap();
        assert!((d.estimate - 100.0).abs() < 2.0, "{d:?}");
        assert!(d.lower > 90.0, "{d:?}");
        // The first window out is [10.4, 10.5) (values follow a window's start); it is seen
        // at its end.
        let t = e.time_to_degrade_s.unwrap();
        assert!((0.35..=0.55).contains(&t), "{t}");
        let r = e.time_to_recover_s.unwrap();
        assert!((0.75..=0.95).contains(&r), "{r}");
        assert_eq!(e.recovered_to.as_deref(), Some("before the start"));
        assert_eq!(e.aggressor_ops_per_sec, Some(1000.0));
        // Three phases; the middle one has the hog and its tenant's CPU.
        assert_eq!(a.phases.len(), 3);
        assert_eq!(a.phases[1].running, vec!["a1:cpu@100".to_string()]);
        assert!(
            (a.phases[1].cpu[1].1 - 1.0).abs() < 0.01,
            "{:?}",
            a.phases[1]
        );
        assert!(a.phases[0].cpu[1].1 < 0.01);
        assert_eq!(a.series.windows.len(), 400);
        assert_eq!(a.series.switches.len(), 2);
    }

    #[test]
    fn stacked_neighbours_recover_to_the_new_level_and_blame_no_one_for_the_next() {
        // a1 from 10 to 30 s (no effect), a2 from 20 to 40 s (RTT x3 from 20.5 s to 40 s).
        let r = record(
            50.0,
            vec![
                switch("a1", true, 10.0),
                switch("a2", true, 20.0),
                switch("a1", false, 30.0),
                switch("a2", false, 40.0),
            ],
            |t| {
                if (20.5..40.0).contains(&t) {
                    300.0
                } else {
                    100.0
                }
            },
        );
        let a = analyze(&r);
        let a1 = a.episodes.iter().find(|e| e.tenant == "a1").unwrap();
        assert_eq!(a1.time_to_degrade_s, None, "a2's effect is not a1's");
        assert!(a1.degradation.as_ref().unwrap().estimate.abs() < 1.0);
        assert!(
            a1.notes.iter().any(|n| n.contains("stayed within")),
            "{a1:?}"
        );
        let a2 = a.episodes.iter().find(|e| e.tenant == "a2").unwrap();
        assert!(a2.time_to_degrade_s.unwrap() > 0.5);
        // Before a2 started, a1 ran; after a2 stops, nothing does: the new level counts.
        assert_eq!(a2.recovered_to.as_deref(), Some("after the stop"));
        assert!(a2.time_to_recover_s.unwrap() <= 0.2);
        assert_eq!(
            a.phases[2].running,
            vec!["a1:cpu@100".to_string(), "a2:cpu@100".to_string()]
        );
    }

    #[test]
    fn a_failed_start_is_a_row_with_the_reason() {
        let mut bad = switch("a1", true, 10.0);
        bad.error = Some("failed: unknown stressor".into());
        let r = record(20.0, vec![bad], |_| 100.0);
        let a = analyze(&r);
        assert_eq!(a.episodes.len(), 1);
        assert!(a.episodes[0].notes[0].contains("did not start"));
        assert_eq!(a.phases.len(), 1, "a failed switch opens no phase");
        assert!(analyze_trial(
            &r,
            0,
            "no_such_metric",
            Direction::Lower,
            &TransitionConfig::default(),
            0.95
        )
        .is_none());
    }
}
