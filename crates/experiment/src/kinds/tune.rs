//! `tune`: the loosest setting of an isolation knob at which the victim's service level
//! objective still holds, with an interval on that boundary, what the setting costs the
//! aggressor, and the isolation-efficiency frontier of each knob.
//!
//! Each knob (`[[tune.knob]]`: a tenant's live limit between a tight and a loose end) is
//! searched on its own, against each stressor of the scenario, by a noisy bisection
//! ([`isobench_stats::BoundarySearch`]: Karp & Kleinberg's repeated-query noisy binary
//! search, each point judged by a sequential t-test): the search asks for a setting, the
//! run measures paired trials there (the victim's probe beside the stressor with the knob
//! set in place on the live tenant, next to a baseline block), and the figures decide
//! whether the SLO holds, fails, or is within the noise of its bound there. Every setting a
//! search can ask for is one of [`settings::GRID`] + 1 steps of the range, each a condition
//! of the plan; only those asked for are measured.
//!
//! The search is replayed from the stored trials at every analysis, so the next round's
//! blocks, a resumed run and the report all see the same search. Every point visited
//! records the victim's figure and the aggressor's own throughput beside it: over the points
//! of a knob they are its frontier, and knobs against the same stressor are compared at
//! equal aggressor throughput.

mod boundaries;
pub mod compose;
mod frontier;
mod recipe;
pub mod settings;

use std::collections::BTreeMap;

use isobench_results::{Column, Guide, Plot, Section, Value};
use isobench_stats::{BoundaryOutcome, BoundarySearch, SearchStep, Verdict};
use isobench_store::{Condition as StoreCondition, StressorMode, TrialRecord};

pub use settings::{KnobRange, Slo, TuneSettings, GRID};
use settings::{ISOL_RATE, ISOL_TARGET};

use super::kind::{ExperimentKind, NothingToRun};
use super::matrix::{self, stressor_conditions, Variant};
use crate::cells::{paired_trials, paired_units, Analysis, Inputs, Results};
use crate::fields::Fields;
use crate::plan::{Condition, Design, Estimate, KnobOverride, Overrides, Plan, Platform};
use crate::resolver::Resolver;
use crate::scenario::Scenario;
use crate::schedule::Needs;
use crate::source::Span;

/// The `tune` kind.
pub struct Tune;

/// The section listing every point the searches visited; [`Tune::needs`] reads the points
/// still measuring from it.
pub const POINTS: &str = "tune-points";

/// Most rounds of a run: far more than a search of the finest resolution needs.
const MAX_ROUNDS: u32 = 1000;

/// Most pairs of blocks a point gets in one round.
const MAX_ROUND_PAIRS: usize = 8;

impl ExperimentKind for Tune {
    fn name(&self) -> &'static str {
        "tune"
    }

    fn help(&self) -> &'static str {
        "the loosest setting of each knob at which the victim's SLO holds, with its interval, \
         its cost to the aggressor, and each knob's isolation-efficiency frontier"
    }

    fn settings(&self, f: &mut Fields<'_, '_>, sc: &Scenario) -> serde_json::Value {
        serde_json::to_value(settings::read(f, sc)).expect("settings serialize")
    }

    /// Every stressor at its first intensity, with each knob at each step of its grid.
    fn conditions(&self, r: &mut Resolver, platform: Platform) -> Vec<Condition> {
        let Some(set) = TuneSettings::of(&r.scenario().settings) else {
            return Vec::new();
        };
        let base = stressor_conditions(r, platform, |s| {
            vec![Variant::at(
                s,
                s.intensities.first().copied().unwrap_or(100),
            )]
        });
        let mut out = Vec::new();
        for k in &set.knobs {
            let overrides = |g: usize| -> Overrides {
                let o =
                    KnobOverride::from_pairs([(k.key.as_str(), Some(k.value_text(g).as_str()))])
                        .expect("a setting written as the limit syntax reads");
                [(k.tenant.clone(), o)].into_iter().collect()
            };
            if let Some(why) = overrides(0).refusal(platform) {
                let sc = r.scenario();
                r.error(sc.source.error(
                    Span::default(),
                    "tune.knob",
                    format!(
                        "the {platform} platform cannot set {} on a live tenant: {why}",
                        k.name()
                    ),
                    "a knob the platform changes in place (isobench doctor lists them)",
                    "search another knob, or run on a platform that has this one (cgroup as root; \
                     a cgroup v2 host for memory_low, io_weight and io_latency)",
                ));
                continue;
            }
            // A split's loosest list names CPUs 0..N-1: each must be on the host.
            let loosest = &overrides(GRID)[&k.tenant].set;
            if let (true, Err(e)) = (
                k.knob() == isobench_platform::Knob::Cpuset,
                loosest.validate(&r.host().info),
            ) {
                let sc = r.scenario();
                r.error(sc.source.error(
                    Span::default(),
                    "tune.knob",
                    format!("{} splits CPUs 0..N-1 of its range: {e}", k.name()),
                    "range = [1, N] with N at most the host's CPUs",
                    "count no more CPUs than the host has",
                ));
                continue;
            }
            for c in &base {
                for g in 0..=GRID {
                    let id = point_id(&c.id, k, g);
                    // Steps that round to the same setting are one condition.
                    if out.iter().any(|x: &Condition| x.id == id) {
                        continue;
                    }
                    let mut p = c.clone();
                    p.id = id;
                    p.candidate = true;
                    p.limits = overrides(g);
                    p.design = Design::Paired;
                    p.window = set.window();
                    p.design_reason =
                        "paired: the knob is set for the whole block, so the load runs throughout"
                            .into();
                    out.push(p);
                }
            }
        }
        r.note(format!(
            "tune: {} against {}, searching {} to resolution {} of each range",
            set.slo.text(&set.metric),
            base.iter()
                .map(|c| c.id.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            set.knobs
                .iter()
                .map(KnobRange::name)
                .collect::<Vec<_>>()
                .join(", "),
            set.resolution
        ));
        out
    }

    fn nothing_to_run(&self) -> NothingToRun {
        NothingToRun {
            field: "tune.knob",
            problem: "no knob and stressor are left to search",
            allowed: "[[tune.knob]] tables naming a live knob of a tenant, and a [[stressor]]",
            fix: "add [[tune.knob]] tenant = \"batch\" key = \"cpus\" range = [0.1, 2] and a \
                  [[stressor]] the platform runs",
        }
    }

    /// A search's usual course: both ends, then a bisection to the resolution, each point
    /// at its first look (at least) or its last (at most).
    fn estimate(&self, plan: &Plan) -> Estimate {
        let Some(set) = TuneSettings::of(&plan.settings) else {
            return matrix::schedule::estimate(plan);
        };
        // Each search's points, at its own knob's resolution (a cpuset's is whole CPUs).
        let points: usize = searches_of(&set, plan)
            .iter()
            .map(|(_, ki)| 2 + (1.0 / set.config_for(*ki).resolution).log2().ceil() as usize)
            .sum();
        let per_trial = plan.trial.duration.as_secs_f64()
            + plan.trial.warmup.as_secs_f64()
            + matrix::schedule::TRIAL_OVERHEAD_S;
        // A pair of trials per figure: the contended one and its baseline.
        let trials = |n: usize| (points * n * 2) as u32;
        Estimate {
            trials_per_round: trials(1),
            trials_min: trials(set.min_trials),
            trials_max: trials(set.max_trials),
            secs_min: f64::from(trials(set.min_trials)) * per_trial,
            secs_max: f64::from(trials(set.max_trials)) * per_trial,
        }
    }

    /// One round of first points, then as many as the searches ask for: the time budget
    /// ends a search that has not.
    fn rounds(&self, _plan: &Plan) -> (u32, u32) {
        (1, MAX_ROUNDS)
    }

    fn stopping_rule(&self, plan: &Plan) -> String {
        match TuneSettings::of(&plan.settings) {
            Some(set) => format!(
                "rounds until every search's boundary interval is within {} of its knob's \
                 range, or its points are within the noise of the bound ({}..{} paired \
                 trials a point)",
                set.resolution, set.min_trials, set.max_trials
            ),
            None => "rounds until every search ends".into(),
        }
    }

    /// Each search's first point, before anything is measured.
    fn first_needs(&self, plan: &Plan) -> Needs {
        let Some(set) = TuneSettings::of(&plan.settings) else {
            return Needs::default();
        };
        let searches = replay(&set, plan, &[], &|_| true);
        needs_of(plan, &set, searches.iter().filter_map(|s| s.next.clone()))
    }

    fn analyze(&self, i: Inputs<'_>) -> Analysis {
        let stored = i.stored;
        matrix::analysis_with(i, TuneSettings::of, |a, plan, set| {
            // Only the settings measured have cells.
            let measured = |cond: &str| {
                stored
                    .trials
                    .iter()
                    .any(|t| t.condition == StoreCondition::Contended(cond.to_string()))
            };
            a.cells.retain(|c| measured(&c.condition));
            a.aggressor.retain(|c| measured(&c.condition));
            let searches = replay(&set, plan, stored.trials, &|t| stored.usable(t));
            let mut answer = answer_section(&set, &searches);
            answer.notes.extend(coarse_windows(&set, stored.trials));
            answer
                .notes
                .extend(coarse_tail(&set, stored.trials, plan.trial.duration));
            a.sections.push(answer);
            let recommended: Vec<(String, usize, usize)> = searches
                .iter()
                .filter_map(|x| match &x.outcome {
                    Some(BoundaryOutcome::Boundary {
                        recommended: Some(r),
                        ..
                    }) => Some((x.stressor.clone(), x.knob, recommended_step(*r))),
                    _ => None,
                })
                .collect();
            a.sections.extend(recipe::section(&set, &recommended));
            a.sections.push(points_section(&set, &searches));
            a.sections.extend(frontier_sections(&set, &searches));
            a.sections.extend(frontier::sections(&set, &searches));
            a.sections.push(boundaries::section(&set, &searches));
        })
    }

    /// The points the searches still measure, from the points section.
    fn needs(&self, plan: &Plan, results: &Results) -> Needs {
        let Some(set) = TuneSettings::of(&plan.settings) else {
            return Needs::default();
        };
        let Some(s) = results.sections.iter().find(|s| s.id == POINTS) else {
            return Needs::default();
        };
        let col = |name: &str| s.columns.iter().position(|c| c.name == name);
        let (Some(cond), Some(wanted)) = (col("condition"), col("trials wanted")) else {
            return Needs::default();
        };
        let wants = s.rows.iter().filter_map(|r| {
            let id = r.get(cond)?.text();
            let n = r.get(wanted)?.as_f64()? as usize;
            (n > 0).then_some(Wanted {
                condition: id,
                pairs: n,
            })
        });
        needs_of(plan, &set, wants)
    }

    fn finished(&self, _plan: &Plan, rounds: u32) -> String {
        format!("every knob's search ended after {rounds} rounds")
    }
}

/// The condition id of knob `k` at grid step `g` beside stressor condition `cid`
/// (`cpu@100+batch.cpus=0.55`).
fn point_id(cid: &str, k: &KnobRange, g: usize) -> String {
    format!("{cid}+{}={}", k.name(), k.value_text(g))
}

/// A point a search wants measured: its condition and the pairs of blocks until its next
/// look.
#[derive(Debug, Clone)]
struct Wanted {
    condition: String,
    pairs: usize,
}

/// The needs of the points `wanted`: the victim probe's cell under each, with its pairs.
fn needs_of(plan: &Plan, set: &TuneSettings, wanted: impl Iterator<Item = Wanted>) -> Needs {
    let mut n = Needs::default();
    let Some(p) = plan.probes.iter().position(|x| x.id == set.probe) else {
        return n;
    };
    for w in wanted {
        if let Some(c) = plan.conditions.iter().position(|x| x.id == w.condition) {
            n.cells.insert((p, c));
            n.pairs.insert(c, w.pairs.clamp(1, MAX_ROUND_PAIRS) as u32);
        }
    }
    n
}

/// One point a search visited, with what was measured there.
#[derive(Debug, Clone)]
struct Seen {
    /// Its grid step.
    grid: usize,
    /// The victim's figure, trial by trial.
    figures: Vec<f64>,
    verdict: Verdict,
    /// The aggressors' own throughput beside the victim, mean over the contended trials,
    /// ops/s; `None` when no stressor reported.
    aggressor: Option<f64>,
}

impl Seen {
    /// The victim's mean figure; `None` before a figure.
    fn mean(&self) -> Option<f64> {
        mean(&self.figures)
    }
}

/// The mean of `xs`; `None` for none.
fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// One knob's search against one stressor, replayed from the stored trials.
#[derive(Debug, Clone)]
struct Search {
    /// The stressor's condition id (`cpu@100`).
    stressor: String,
    /// The knob's index in the settings.
    knob: usize,
    /// How it ended; `None` while it still measures.
    outcome: Option<BoundaryOutcome>,
    /// The point it measures next.
    next: Option<Wanted>,
    /// Every point visited, in the order visited.
    seen: Vec<Seen>,
    /// Figures it used.
    trials: usize,
    /// The fewest a grid at the same resolution would have needed.
    grid_trials: Option<usize>,
    /// Seconds its trials ran: each contended trial at its points and the baseline trial
    /// paired with it, whatever their outcome.
    trial_secs: f64,
}

impl Search {
    /// The bracket a search still measuring has so far, as grid steps: the loosest point
    /// shown to hold, and the tightest looser one shown to fail. What a run stopped before
    /// its searches ended (its time budget, a stop) can say; `None` once the search ended,
    /// or while one side is still unknown.
    fn bracket(&self) -> Option<(usize, usize)> {
        if self.outcome.is_some() {
            return None;
        }
        let step = |v: Verdict| {
            self.seen
                .iter()
                .filter(move |p| p.verdict == v)
                .map(|p| p.grid)
        };
        let fails = step(Verdict::Fails).min()?;
        let holds = step(Verdict::Holds).filter(|&g| g < fails).max()?;
        Some((holds, fails))
    }
}

/// Every search of the plan, replayed over `trials` (those `usable` count).
fn replay(
    set: &TuneSettings,
    plan: &Plan,
    trials: &[&TrialRecord],
    usable: &dyn Fn(&TrialRecord) -> bool,
) -> Vec<Search> {
    searches_of(set, plan)
        .into_iter()
        .map(|(s, ki)| search_one(set, &s, ki, trials, usable))
        .collect()
}

/// Every search of the plan: each stressor condition with each knob planned beside it.
fn searches_of(set: &TuneSettings, plan: &Plan) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for c in &plan.conditions {
        for (ki, k) in set.knobs.iter().enumerate() {
            let tight = format!("+{}={}", k.name(), k.value_text(0));
            if let Some(s) = c.id.strip_suffix(&tight) {
                if !out.iter().any(|(x, i)| x == s && *i == ki) {
                    out.push((s.to_string(), ki));
                }
            }
        }
    }
    out
}

/// The grid step of a position the search asks for.
fn grid_step(position: f64) -> usize {
    ((position * GRID as f64).round() as usize).min(GRID)
}

/// The grid step to recommend for a search's recommended position: its own step when it
/// is one (a point visited), else the step at or below it (the tight end of a fitted
/// interval falls between steps; rounding it up would recommend a setting looser than the
/// one shown to hold).
fn recommended_step(position: f64) -> usize {
    let x = position * GRID as f64;
    if (x - x.round()).abs() < 1e-6 {
        grid_step(position)
    } else {
        (x.floor() as usize).min(GRID)
    }
}

fn search_one(
    set: &TuneSettings,
    stressor: &str,
    ki: usize,
    trials: &[&TrialRecord],
    usable: &dyn Fn(&TrialRecord) -> bool,
) -> Search {
    let k = &set.knobs[ki];
    let mut search = BoundarySearch::new(set.config_for(ki)).expect("settings checked when read");
    // By condition: grid steps that round to one setting share its trials, each figure
    // used once.
    let mut figures: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut used: BTreeMap<String, usize> = BTreeMap::new();
    let mut next = None;
    let mut outcome = None;
    loop {
        match search.step() {
            SearchStep::Done(o) => {
                outcome = Some(o);
                break;
            }
            SearchStep::Measure(p) => {
                let g = grid_step(p);
                let cond = point_id(stressor, k, g);
                let have = figures
                    .entry(cond.clone())
                    .or_insert_with(|| victim_figures(set, trials, usable, &cond));
                let n = used.entry(cond.clone()).or_insert(0);
                match have.get(*n) {
                    Some(&f) if search.record(f).is_ok() => *n += 1,
                    Some(_) => break,
                    None => {
                        next = Some(Wanted {
                            condition: cond,
                            pairs: to_next_look(*n, set.min_trials, set.max_trials),
                        });
                        break;
                    }
                }
            }
        }
    }
    let seen = search
        .visited()
        .iter()
        .map(|v| {
            let g = grid_step(v.position);
            Seen {
                grid: g,
                figures: v.figures.clone(),
                verdict: v.verdict,
                aggressor: aggressor_rate(trials, usable, &point_id(stressor, k, g)),
            }
        })
        .collect();
    Search {
        stressor: stressor.to_string(),
        knob: ki,
        outcome,
        next,
        seen,
        trials: search.trials(),
        grid_trials: search.grid_trials_at_least(),
        trial_secs: figures
            .keys()
            .flat_map(|cond| {
                paired_trials(
                    trials,
                    &|_| true,
                    &set.victim,
                    &set.probe,
                    cond,
                    &set.metric,
                )
            })
            .flat_map(|(b, c)| [b, c])
            .map(|t| (t.ended_at.unix_millis() - t.started_at.unix_millis()).max(0) as f64 / 1e3)
            .sum(),
    }
}

/// Pairs until a point with `n` figures is looked at next: the first look at `min`, then
/// each time the count doubles, the last at `max`.
fn to_next_look(n: usize, min: usize, max: usize) -> usize {
    let look = if n < min { min } else { (2 * n).min(max) };
    look.saturating_sub(n).max(1)
}

/// The victim's figure in each usable contended trial under `cond`, in time order: the
/// metric's value (an SLO on the value), or its loss against the baseline trial paired
/// with it, % (an SLO on the loss).
fn victim_figures(
    set: &TuneSettings,
    trials: &[&TrialRecord],
    usable: &dyn Fn(&TrialRecord) -> bool,
    cond: &str,
) -> Vec<f64> {
    match set.slo {
        Slo::Loss { .. } => {
            let direction = trials
                .iter()
                .flat_map(|t| t.samples.iter())
                .find(|s| s.metric == set.metric)
                .map(|s| s.direction);
            let Some(direction) = direction else {
                return Vec::new();
            };
            paired_units(trials, usable, &set.victim, &set.probe, cond, &set.metric)
                .iter()
                .map(|p| isobench_stats::log_ratio_to_degradation(p.log_ratio(), direction))
                .collect()
        }
        Slo::Max { .. } | Slo::Min { .. } => contended_victim(set, trials, usable, cond)
            .filter_map(|t| t.samples.iter().find(|s| s.metric == set.metric))
            .map(|s| s.value)
            .filter(|v| v.is_finite())
            .collect(),
        Slo::IsolP01 { .. } => contended_victim(set, trials, usable, cond)
            .filter_map(|t| {
                let target = t.samples.iter().find(|s| s.metric == ISOL_TARGET)?.value;
                let rates: Vec<f64> = t
                    .series
                    .iter()
                    .find(|s| s.metric == set.metric)?
                    .windows
                    .iter()
                    .map(|w| w.value)
                    .collect();
                isobench_stats::isolation(&rates, target).map(|i| i.p01)
            })
            .filter(|v| v.is_finite())
            .collect(),
    }
}

/// Requests a window should hold at the target rate for its isol% to move in steps of 5
/// points or finer.
const FINE_WINDOW_REQUESTS: f64 = 20.0;

/// With an isol% SLO, what a window of the service holds at its target rate, when that is
/// too few for a fine figure: a window's isol% moves in steps of 100 / (its requests)
/// points, so the p01 over them is coarse (one request late across a window's end moves it
/// a step). `None` otherwise.
fn coarse_windows(set: &TuneSettings, trials: &[&TrialRecord]) -> Option<String> {
    let Slo::IsolP01 { window_ms, .. } = set.slo else {
        return None;
    };
    let target = victim_median(set, trials, ISOL_TARGET)?;
    let per_window = target * window_ms as f64 / 1e3;
    (per_window < FINE_WINDOW_REQUESTS).then(|| {
        format!(
            "Coarse: at its target of {target:.0} requests/s the service answers about \
             {per_window:.1} requests in a {window_ms} ms window, so a window's isol% moves in \
             steps of about {:.0} points and one request late across a window's end moves it a \
             step; a window of {:.0} ms or more (window in [tune]) holds {FINE_WINDOW_REQUESTS:.0}.",
            100.0 / per_window,
            (FINE_WINDOW_REQUESTS / target * 1e3).ceil()
        )
    })
}

/// The median positive value of the victim probe's `metric` over its trials.
fn victim_median(set: &TuneSettings, trials: &[&TrialRecord], metric: &str) -> Option<f64> {
    let mut values: Vec<f64> = trials
        .iter()
        .filter(|t| t.tenant == set.victim && t.probe == set.probe)
        .filter_map(|t| t.samples.iter().find(|s| s.metric == metric))
        .map(|s| s.value)
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied()
}

/// Requests above a trial's quantile for it to be more than its few worst requests.
const FINE_TAIL_REQUESTS: f64 = 10.0;

/// The quantile a metric's name says it is (`lat_p99_ms`: 0.99, `lat_p999_ms`: 0.999,
/// `lat_p50_ms`: 0.5), `None` for a metric that is not one.
fn quantile_of(metric: &str) -> Option<f64> {
    let digits = metric
        .split('_')
        .find_map(|part| part.strip_prefix('p'))
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))?;
    let q: f64 = format!("0.{digits}").parse().ok()?;
    (q > 0.0 && q < 1.0).then_some(q)
}

/// With an SLO on a `service` probe's latency quantile, what a trial's quantile rests on
/// when that is too few requests for a steady figure: at the rate the service answered
/// (its median over the victim's trials) over the trial's length, the requests above the
/// quantile. A p99 of 130 requests is their second-worst: one stall moves it anywhere, and
/// the search meets that as noise it cannot settle. `None` otherwise.
fn coarse_tail(
    set: &TuneSettings,
    trials: &[&TrialRecord],
    duration: std::time::Duration,
) -> Option<String> {
    if matches!(set.slo, Slo::IsolP01 { .. }) {
        return None;
    }
    let q = quantile_of(&set.metric)?;
    let rate = victim_median(set, trials, ISOL_RATE)?;
    let secs = duration.as_secs_f64();
    let requests = rate * secs;
    let above = (1.0 - q) * requests;
    (above < FINE_TAIL_REQUESTS).then(|| {
        format!(
            "Coarse: answering about {rate:.0} requests/s over a {secs:.1} s trial, the service's \
             {} rests on about {} requests above it of {requests:.0}: one stall moves it \
             anywhere, which the search meets as noise at the bound; trials of {:.0} s or more \
             (duration in [trial]) put {FINE_TAIL_REQUESTS:.0} above it.",
            set.metric,
            above.round().max(1.0),
            (FINE_TAIL_REQUESTS / ((1.0 - q) * rate)).ceil()
        )
    })
}

/// The victim's usable contended trials under `cond`, in time order.
fn contended_victim<'a>(
    set: &'a TuneSettings,
    trials: &'a [&TrialRecord],
    usable: &'a dyn Fn(&TrialRecord) -> bool,
    cond: &'a str,
) -> impl Iterator<Item = &'a TrialRecord> {
    let mut ts: Vec<&TrialRecord> = trials
        .iter()
        .copied()
        .filter(|t| {
            usable(t)
                && t.tenant == set.victim
                && t.probe == set.probe
                && t.condition == StoreCondition::Contended(cond.to_string())
        })
        .collect();
    ts.sort_by_key(|t| t.key);
    ts.into_iter()
}

/// The aggressors' throughput beside the victim under `cond`: per contended trial the sum
/// of every aggressor's ops/s, then the mean over trials.
fn aggressor_rate(
    trials: &[&TrialRecord],
    usable: &dyn Fn(&TrialRecord) -> bool,
    cond: &str,
) -> Option<f64> {
    let per_trial: Vec<f64> = trials
        .iter()
        .filter(|t| usable(t) && t.condition == StoreCondition::Contended(cond.to_string()))
        .filter_map(|t| {
            let rates: Vec<f64> = t
                .stressor_reports
                .iter()
                .filter(|s| s.mode == StressorMode::Contended && s.ops_per_sec.is_finite())
                .map(|s| s.ops_per_sec)
                .collect();
            (!rates.is_empty()).then(|| rates.iter().sum())
        })
        .collect();
    (!per_trial.is_empty()).then(|| per_trial.iter().sum::<f64>() / per_trial.len() as f64)
}

/// The mean of `xs` with its Student t interval at `level` (the mean alone with one value).
fn mean_interval(xs: &[f64], level: f64) -> Value {
    let n = xs.len();
    let Some(m) = mean(xs) else {
        return Value::Empty;
    };
    if n < 2 {
        return Value::number(m, 2);
    }
    let var = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64;
    let t = isobench_stats::student_t_quantile(0.5 + level / 2.0, (n - 1) as f64);
    let h = t * (var / n as f64).sqrt();
    Value::Estimate {
        value: m,
        lower: m - h,
        upper: m + h,
        digits: 2,
        flag: None,
    }
}

fn verdict_text(v: Verdict) -> &'static str {
    match v {
        Verdict::Measuring => "measuring",
        Verdict::Holds => "holds",
        Verdict::Fails => "fails",
        Verdict::Edge => "edge",
    }
}

/// The aggressor's throughput lost at grid step `g` against the loose end, %: its
/// throughput there (interpolated between the points beside it when not visited) over its
/// throughput at the loose end.
fn cost_at(x: &Search, g: usize) -> Option<f64> {
    let loose = x.seen.iter().find(|p| p.grid == GRID)?.aggressor?;
    let a = at_step(&x.seen, g, |p| p.aggressor)?;
    (loose > 0.0).then(|| (1.0 - a / loose) * 100.0)
}

/// What `f` says at grid step `g`: at the point visited there, else interpolated linearly
/// (in steps) between the nearest points visited on either side; `None` beyond them.
fn at_step(seen: &[Seen], g: usize, f: impl Fn(&Seen) -> Option<f64>) -> Option<f64> {
    let known: Vec<(usize, f64)> = seen.iter().filter_map(|p| Some((p.grid, f(p)?))).collect();
    if let Some(&(_, v)) = known.iter().find(|(s, _)| *s == g) {
        return Some(v);
    }
    let below = known
        .iter()
        .filter(|(s, _)| *s < g)
        .max_by_key(|(s, _)| *s)?;
    let above = known
        .iter()
        .filter(|(s, _)| *s > g)
        .min_by_key(|(s, _)| *s)?;
    let t = (g - below.0) as f64 / (above.0 - below.0) as f64;
    Some(below.1 + t * (above.1 - below.1))
}

/// The setting at a position, interpolated on the knob's grid scale.
fn setting_at(k: &KnobRange, position: f64) -> f64 {
    let lo = grid_step(position);
    let a = k.setting(lo);
    if lo == GRID {
        return a;
    }
    let b = k.setting(lo + 1);
    let frac = position * GRID as f64 - lo as f64;
    a + frac * (b - a)
}

/// Each search's answer: the recommended setting with its interval, what the victim and the
/// aggressor do there, and what the search spent against a grid.
fn answer_section(set: &TuneSettings, searches: &[Search]) -> Section {
    let mut s = Section::new(
        "tune",
        format!("Loosest setting keeping {}", set.slo.text(&set.metric)),
        vec![
            Column::text("aggressor"),
            Column::text("knob"),
            Column::text("answer"),
            Column::text("recommended"),
            Column::text("boundary interval"),
            Column::text("victim there"),
            Column::unit("aggressor cost", "%"),
            Column::unit("points", ""),
            Column::unit("figures", ""),
            Column::unit("grid figures at least", ""),
            Column::unit("trial time", "s"),
        ],
    );
    for x in searches {
        let k = &set.knobs[x.knob];
        let at = |g: usize| x.seen.iter().find(|p| p.grid == g);
        let (answer, recommended, interval, there, cost): (
            String,
            Option<usize>,
            String,
            Value,
            Option<f64>,
        ) = match &x.outcome {
            None => match x.bracket() {
                Some((holds, fails)) => (
                    "bracketed so far, still measuring".to_string(),
                    Some(holds),
                    format!("[{}, {}]", k.value_text(holds), k.value_text(fails)),
                    at(holds).map_or(Value::Empty, |p| mean_interval(&p.figures, set.level)),
                    cost_at(x, holds),
                ),
                None => (
                    "still measuring".to_string(),
                    None,
                    String::new(),
                    Value::Empty,
                    None,
                ),
            },
            Some(BoundaryOutcome::HoldsEverywhere) => (
                format!("holds even at the loose end ({})", k.value_text(GRID)),
                None,
                String::new(),
                at(GRID).map_or(Value::Empty, |p| mean_interval(&p.figures, set.level)),
                None,
            ),
            Some(BoundaryOutcome::FailsEverywhere) => (
                format!("fails even at the tight end ({})", k.value_text(0)),
                None,
                String::new(),
                at(0).map_or(Value::Empty, |p| mean_interval(&p.figures, set.level)),
                None,
            ),
            Some(BoundaryOutcome::Boundary {
                low,
                high,
                recommended,
                resolved,
                ..
            }) => {
                let g = recommended.map(recommended_step);
                let cost = g.and_then(|g| cost_at(x, g));
                (
                    match (recommended, resolved) {
                        (None, _) => "held nowhere beyond doubt: the tight end is within the \
                                      noise of the bound"
                            .to_string(),
                        (Some(_), true) => "boundary".to_string(),
                        (Some(_), false) => "boundary, wider than the resolution asked".to_string(),
                    },
                    g,
                    format!(
                        "[{}, {}]",
                        k.text(setting_at(k, *low)),
                        k.text(setting_at(k, *high))
                    ),
                    g.map_or(Value::Empty, |g| match at(g) {
                        Some(p) => mean_interval(&p.figures, set.level),
                        None => at_step(&x.seen, g, Seen::mean)
                            .map_or(Value::Empty, |v| Value::number(v, 2)),
                    }),
                    cost,
                )
            }
        };
        s.push(vec![
            Value::text_of(x.stressor.clone()),
            Value::text_of(k.name()),
            Value::text_of(answer),
            recommended.map_or(Value::Empty, |g| Value::text_of(k.value_text(g))),
            Value::text_of(interval),
            there,
            cost.map_or(Value::Empty, |c| Value::number(c, 1)),
            Value::number(x.seen.len() as f64, 0),
            Value::number(x.trials as f64, 0),
            x.grid_trials
                .map_or(Value::Empty, |g| Value::number(g as f64, 0)),
            Value::number(x.trial_secs, 0),
        ]);
    }
    s.notes.push(answer_note(set.level));
    s
}

/// What the answer table's columns say, at the searches' `level`.
fn answer_note(level: f64) -> String {
    format!(
        "Recommended: the loosest setting at which every trial-level test says the SLO holds \
         ({:.0}% for all verdicts of a search together), a point visited or the tight end of \
         the interval fitted near the boundary, at the grid step at or below it. Boundary \
         interval: from there to the tightest setting at which it fails. Victim there: its \
         figure's mean with its interval at a point visited, else interpolated between the \
         points beside it. Aggressor cost: its throughput beside the victim there \
         (interpolated likewise), against the loose end. Figures: trials of the victim's \
         figure the search used (each with its paired baseline trial); grid: the fewest a \
         sweep of every setting at the same resolution would need (min_trials at each; a \
         floor, as its settings near the bound would need more). Trial time: how long the \
         search's trials and their baselines ran (the run's settling and set-up come on \
         top). Bracketed so far: a search the run left before it ended (its time budget, a \
         stop) gives the loosest setting it showed to hold and the tightest it showed to \
         fail.",
        level * 100.0
    )
}

/// Every point visited, in the order visited, with the trials the next look wants.
fn points_section(set: &TuneSettings, searches: &[Search]) -> Section {
    let mut s = Section::new(
        POINTS,
        "Points the searches visited",
        vec![
            Column::text("aggressor"),
            Column::text("knob"),
            Column::text("setting"),
            Column::text("condition"),
            Column::text(&set.figure()),
            Column::text("verdict"),
            Column::unit("figures", ""),
            Column::unit("aggressor throughput", "ops/s"),
            Column::unit("trials wanted", ""),
        ],
    );
    for x in searches {
        let k = &set.knobs[x.knob];
        for p in &x.seen {
            let cond = point_id(&x.stressor, k, p.grid);
            let wanted = x
                .next
                .as_ref()
                .filter(|w| w.condition == cond)
                .map_or(0, |w| w.pairs);
            s.push(vec![
                Value::text_of(x.stressor.clone()),
                Value::text_of(k.name()),
                Value::text_of(k.value_text(p.grid)),
                Value::text_of(cond),
                mean_interval(&p.figures, set.level),
                Value::text_of(verdict_text(p.verdict)),
                Value::number(p.figures.len() as f64, 0),
                p.aggressor.map_or(Value::Empty, |a| Value::number(a, 0)),
                Value::number(wanted as f64, 0),
            ]);
        }
        // A point asked for but not measured yet.
        if let Some(w) = &x.next {
            if !x
                .seen
                .iter()
                .any(|p| point_id(&x.stressor, k, p.grid) == w.condition)
            {
                let g = (0..=GRID)
                    .find(|&g| point_id(&x.stressor, k, g) == w.condition)
                    .unwrap_or(0);
                s.push(vec![
                    Value::text_of(x.stressor.clone()),
                    Value::text_of(k.name()),
                    Value::text_of(k.value_text(g)),
                    Value::text_of(w.condition.clone()),
                    Value::Empty,
                    Value::text_of("measuring"),
                    Value::number(0.0, 0),
                    Value::Empty,
                    Value::number(w.pairs as f64, 0),
                ]);
            }
        }
    }
    s
}

/// Per stressor, the frontier of every knob: the victim's figure against the aggressor's
/// throughput, the SLO's bound drawn; then per knob, the figure against the setting, the
/// recommendation marked.
fn frontier_sections(set: &TuneSettings, searches: &[Search]) -> Vec<Section> {
    let (bound, _) = set.slo.bound();
    let slo = Guide {
        at: bound,
        label: set.slo.text(&set.metric),
    };
    let mut out = Vec::new();
    let mut stressors: Vec<&str> = searches.iter().map(|x| x.stressor.as_str()).collect();
    stressors.dedup();
    for st in stressors {
        let mut f = Section::new(
            &format!("frontier-{st}"),
            format!("Isolation-efficiency frontier against {st}"),
            vec![
                Column::text("knob"),
                Column::text("setting"),
                Column::unit("aggressor throughput", "ops/s"),
                Column::text(&set.figure()),
            ],
        );
        f.plot = Some(Plot::Curve {
            x: 2,
            y: vec![3],
            by: vec![0],
            limit: Some(slo.clone()),
            marks: Vec::new(),
            y2: Vec::new(),
        });
        let mut knobs = Vec::new();
        for x in searches.iter().filter(|x| x.stressor == st) {
            let k = &set.knobs[x.knob];
            let mut per_knob = Section::new(
                &format!("knob-{st}-{}", k.name()),
                format!("{} against {st}", k.name()),
                vec![
                    Column::unit(&k.key, unit_of(k)),
                    Column::text(&set.figure()),
                    Column::unit("aggressor throughput", "ops/s"),
                    Column::text("verdict"),
                ],
            );
            let mut marks = Vec::new();
            if let Some(BoundaryOutcome::Boundary {
                recommended: Some(r),
                ..
            }) = &x.outcome
            {
                let g = recommended_step(*r);
                marks.push(Guide {
                    at: k.setting(g),
                    label: format!("recommended {}", k.value_text(g)),
                });
            }
            per_knob.plot = Some(Plot::Curve {
                x: 0,
                y: vec![1],
                by: Vec::new(),
                limit: Some(slo.clone()),
                marks,
                y2: vec![2],
            });
            let mut pts: Vec<&Seen> = x.seen.iter().collect();
            pts.sort_by_key(|p| p.grid);
            for p in pts {
                let fig = mean_interval(&p.figures, set.level);
                per_knob.push(vec![
                    Value::number(k.setting(p.grid), k.digits()),
                    fig.clone(),
                    p.aggressor.map_or(Value::Empty, |a| Value::number(a, 0)),
                    Value::text_of(verdict_text(p.verdict)),
                ]);
                if let Some(a) = p.aggressor {
                    f.push(vec![
                        Value::text_of(k.name()),
                        Value::text_of(k.value_text(p.grid)),
                        Value::number(a, 0),
                        fig,
                    ]);
                }
            }
            knobs.push(per_knob);
        }
        out.push(f);
        out.append(&mut knobs);
    }
    out
}

/// The unit a knob's number is in.
fn unit_of(k: &KnobRange) -> &'static str {
    use isobench_platform::Knob;
    match k.knob() {
        Knob::Cpus | Knob::Cpuset => "CPUs",
        Knob::CpuWeight | Knob::IoWeight => "",
        Knob::CpuBurst | Knob::IoLatency => "us",
        Knob::Memory | Knob::MemoryMin | Knob::MemoryLow | Knob::MemoryHigh | Knob::Swap => "B",
        Knob::Pids => "",
        Knob::IoReadBps | Knob::IoWriteBps => "B/s",
        Knob::IoReadIops | Knob::IoWriteIops => "IO/s",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_look_doubles_up_to_the_cap() {
        assert_eq!(to_next_look(0, 3, 12), 3);
        assert_eq!(to_next_look(3, 3, 12), 3);
        assert_eq!(to_next_look(6, 3, 12), 6);
        assert_eq!(to_next_look(10, 3, 12), 2);
        assert_eq!(to_next_look(12, 3, 12), 1);
    }

    #[test]
    fn values_between_points_are_interpolated_and_never_beyond_them() {
        let seen = |grid: usize, a: f64| Seen {
            grid,
            figures: vec![a],
            verdict: Verdict::Holds,
            aggressor: Some(a),
        };
        let pts = [seen(10, 100.0), seen(30, 300.0)];
        let a = |p: &Seen| p.aggressor;
        assert_eq!(at_step(&pts, 10, a), Some(100.0));
        assert_eq!(at_step(&pts, 20, a), Some(200.0));
        assert_eq!(at_step(&pts, 5, a), None);
        assert_eq!(at_step(&pts, 31, a), None);
    }

    #[test]
    fn a_search_cut_short_gives_the_bracket_it_has_and_no_more() {
        let seen = |grid: usize, verdict: Verdict| Seen {
            grid,
            figures: vec![1.0],
            verdict,
            aggressor: None,
        };
        let search = |seen: Vec<Seen>| Search {
            stressor: "cpu@100".into(),
            knob: 0,
            outcome: None,
            next: None,
            seen,
            trials: 0,
            grid_trials: None,
            trial_secs: 0.0,
        };
        // Holds at 0 and 40, undecided at 60 and 200, fails at 80 and 256; a noisy hold
        // looser than a failure does not widen the bracket.
        let x = search(vec![
            seen(256, Verdict::Fails),
            seen(0, Verdict::Holds),
            seen(80, Verdict::Fails),
            seen(40, Verdict::Holds),
            seen(60, Verdict::Edge),
            seen(200, Verdict::Holds),
            seen(120, Verdict::Measuring),
        ]);
        assert_eq!(x.bracket(), Some((40, 80)));
        // One side unknown: no bracket.
        assert_eq!(
            search(vec![seen(0, Verdict::Holds), seen(9, Verdict::Edge)]).bracket(),
            None
        );
        assert_eq!(search(vec![seen(256, Verdict::Fails)]).bracket(), None);
        // An ended search has its outcome instead.
        let mut ended = x.clone();
        ended.outcome = Some(BoundaryOutcome::HoldsEverywhere);
        assert_eq!(ended.bracket(), None);
    }

    #[test]
    fn a_quantile_is_read_from_its_metrics_name() {
        assert_eq!(quantile_of("lat_p99_ms"), Some(0.99));
        assert_eq!(quantile_of("lat_p999_ms"), Some(0.999));
        assert_eq!(quantile_of("lat_p50_ms"), Some(0.5));
        assert_eq!(quantile_of("rate_rps"), None);
        assert_eq!(quantile_of("ops_per_sec"), None);
        assert_eq!(quantile_of("lat_pmax_ms"), None);
    }

    #[test]
    fn a_recommendation_between_steps_rounds_to_the_tighter_one() {
        let at = |x: f64| x / GRID as f64;
        assert_eq!(recommended_step(at(110.0)), 110);
        assert_eq!(
            recommended_step(at(110.7)),
            110,
            "never looser than shown to hold"
        );
        assert_eq!(recommended_step(at(110.2)), 110);
        assert_eq!(recommended_step(1.0), GRID);
        assert_eq!(recommended_step(0.0), 0);
    }

    #[test]
    fn grid_steps_are_the_positions_of_a_bisection() {
        assert_eq!(grid_step(0.0), 0);
        assert_eq!(grid_step(1.0), GRID);
        assert_eq!(grid_step(0.5), GRID / 2);
        assert_eq!(grid_step(0.375), 96);
        assert_eq!(grid_step(1.0 / 256.0), 1);
        assert_eq!(grid_step(0.3 + 0.4 / 256.0), 77);
    }
}
