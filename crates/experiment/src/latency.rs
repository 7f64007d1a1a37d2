//! Which trials the latency view pools: for each victim probe's latency metric under each
//! condition, the trials the condition's estimate used, chosen by the same functions that
//! chose its units ([`paired_trials`], [`onoff_trials`]); the pooling itself, and what is
//! read from it, is the results crate's ([`isobench_results::latency`]).

use isobench_results::latency::{self, LatencyView, Selection};
use isobench_results::{Cell, Design};
use isobench_store::TrialRecord;

use crate::cells::{condition_text, onoff_trials, paired_trials, Stored, SOLO_PROBE};

/// The latency views of a run: every victim latency metric with stored histograms, pooled
/// the way the estimates of `cells` pooled their trials.
pub fn views(stored: &Stored<'_>, cells: &[Cell]) -> Vec<LatencyView> {
    latency::views(&selections(stored, cells), cells)
}

/// For every victim latency metric with stored histograms and every condition, the trials
/// its condition's estimate used (the estimate of that metric, else of its probe's first
/// estimated metric there); every usable trial per condition for a probe no estimate
/// compares.
fn selections<'a>(stored: &Stored<'a>, cells: &'a [Cell]) -> Vec<Selection<'a>> {
    let trials = stored.trials;
    // (tenant, probe, metric) with a histogram, in the order first stored.
    let mut metrics: Vec<(&str, &str, &str)> = Vec::new();
    for t in trials.iter().filter(|t| victim(stored, t)) {
        for h in &t.histograms {
            let k = (t.tenant.as_str(), t.probe.as_str(), h.metric.as_str());
            if !metrics.contains(&k) {
                metrics.push(k);
            }
        }
    }
    let mut selections: Vec<Selection<'_>> = Vec::new();
    for &(tenant, probe, metric) in &metrics {
        let estimated: Vec<&Cell> = cells
            .iter()
            .filter(|c| c.tenant == tenant && c.probe == probe && c.design.is_some())
            .collect();
        if estimated.is_empty() {
            selections.extend(per_condition(stored, tenant, probe, metric));
            continue;
        }
        // Per condition, the trials of its estimate: of this metric's cell, else of the
        // probe's first estimated metric there.
        let mut conds: Vec<&str> = Vec::new();
        for c in &estimated {
            if !conds.contains(&c.condition.as_str()) {
                conds.push(&c.condition);
            }
        }
        for cond in conds {
            let Some(cell) = estimated
                .iter()
                .find(|c| c.condition == cond && c.metric == metric)
                .or_else(|| estimated.iter().find(|c| c.condition == cond))
            else {
                continue;
            };
            let selection = of_estimate(stored, cell, (tenant, probe, metric), cond);
            if !selection.trials.is_empty() {
                selections.push(selection);
            }
        }
    }
    selections
}

/// A usable trial of a victim's own probe (not the solo probe).
fn victim(stored: &Stored<'_>, t: &TrialRecord) -> bool {
    stored.is_victim(&t.tenant) && t.probe != SOLO_PROBE && stored.usable(t)
}

/// For a probe no estimate compares: every usable trial per condition, the baseline first.
fn per_condition<'a>(
    stored: &Stored<'a>,
    tenant: &'a str,
    probe: &'a str,
    metric: &'a str,
) -> Vec<Selection<'a>> {
    let trials = stored.trials;
    let mut conds: Vec<String> = vec!["baseline".to_string()];
    for t in trials
        .iter()
        .filter(|t| t.tenant == tenant && t.probe == probe)
    {
        let c = condition_text(&t.condition);
        if !conds.contains(&c) {
            conds.push(c);
        }
    }
    let mut selections = Vec::new();
    for cond in conds {
        let of_cond: Vec<&TrialRecord> = trials
            .iter()
            .copied()
            .filter(|t| {
                victim(stored, t)
                    && t.tenant == tenant
                    && t.probe == probe
                    && condition_text(&t.condition) == cond
            })
            .collect();
        if of_cond.is_empty() {
            continue;
        }
        selections.push(Selection {
            tenant,
            probe,
            metric,
            condition: cond,
            design: None,
            chosen_by: None,
            reference: Vec::new(),
            trials: of_cond,
        });
    }
    selections
}

/// The trials the estimate of `cell` under `cond` used for `(tenant, probe, metric)`.
fn of_estimate<'a>(
    stored: &Stored<'a>,
    cell: &'a Cell,
    (tenant, probe, metric): (&'a str, &'a str, &'a str),
    cond: &str,
) -> Selection<'a> {
    let trials = stored.trials;
    let usable = |t: &TrialRecord| stored.usable(t);
    let by = cell.metric.as_str();
    let chosen_by = (by != metric).then_some(by);
    match cell.design {
        Some(Design::Paired) => {
            let pairs = paired_trials(trials, &usable, tenant, probe, cond, by);
            let mut reference: Vec<&TrialRecord> = Vec::new();
            for (b, _) in &pairs {
                if !reference.iter().any(|r| r.key == b.key) {
                    reference.push(b);
                }
            }
            Selection {
                tenant,
                probe,
                metric,
                condition: cond.to_string(),
                design: Some(Design::Paired),
                chosen_by,
                reference,
                trials: pairs.into_iter().map(|(_, c)| c).collect(),
            }
        }
        _ => Selection {
            tenant,
            probe,
            metric,
            condition: cond.to_string(),
            design: Some(Design::OnOff),
            chosen_by,
            reference: Vec::new(),
            // The trials with at least one cycle: the others gave the estimate nothing.
            trials: onoff_trials(trials, &usable, tenant, probe, cond, by)
                .into_iter()
                .filter(|(_, m, s)| !crate::onoff::cycles(&s.windows, m).is_empty())
                .map(|(t, _, _)| t)
                .collect(),
        },
    }
}

#[cfg(test)]
mod tests {

    use isobench_results::latency::Role;
    use isobench_store::{Condition as StoreCondition, LoadedRun, Store};
    use isobench_workloads::LatencyHistogram;

    use super::*;
    use crate::analysis::analyze;
    use crate::fake::{FakeBackend, FakeScript};
    use crate::orchestrator::{create_run, Engine, EngineIo, EngineOptions};
    use crate::progress::Transcript;
    use crate::{HostView, Plan, PlanOptions, Scenario, Source};

    /// Fork latency under a CPU hog (on/off: its effect stops when frozen) and a memory hog
    /// (paired trials: its held memory outlasts a freeze), as in the quick scenario.
    const SCENARIO: &str = r#"
name = "pooling"
kind = "matrix"
seed = 3
placement = "split"

[trial]
duration = "400ms"
warmup = "100ms"
solo = "0s"
design = "auto"
pilot = "1.2s"
onoff_max = "2s"

[repetitions]
min = 2
max = 2
ci_half_width = 5.0

[[tenant]]
name = "victim"
role = "victim"
limits = { memory = "1G", pids = 256 }

[[tenant]]
name = "aggressor"
role = "aggressor"
limits = { memory = "1G", pids = 128 }

[[probe]]
name = "fork-latency"
params = { mode = "fork" }
metrics = ["fork_p50_ns"]

[[stressor]]
name = "cpu"

[[stressor]]
name = "memhog"
"#;

    fn fake_run() -> LoadedRun {
        let sc = Scenario::parse(Source::new("pooling.toml", SCENARIO)).expect("valid");
        let host = HostView::synthetic(2, 8 << 30, true);
        let plan = Plan::resolve(&sc, &host, &PlanOptions::default()).expect("plan");
        let mut store = Store::open_in_memory().unwrap();
        let (mut backend, clock) = FakeBackend::new(plan.seed, FakeScript::default());
        let run = create_run(
            &mut store,
            &plan,
            SCENARIO,
            "fake",
            serde_json::json!({}),
            0,
        )
        .unwrap();
        let mut t = Transcript::default();
        Engine::new(
            &plan,
            run.clone(),
            EngineIo::new(&mut store, &mut backend, &clock, &mut t),
            EngineOptions::default(),
        )
        .execute()
        .unwrap();
        store.load_run(&run).unwrap()
    }

    /// Defect: the report's latency section merged every baseline trial against every
    /// contended trial, while the estimates compare trials close in time (pairs) or phases
    /// within one trial (on/off): a fork's p50 read 514 us at baseline and 339 us under a
    /// CPU hog whose estimate was +2.1%, and every condition looked better than baseline.
    /// The view pools exactly the estimate's trials: a paired condition's contended trials
    /// and the baseline trials paired with them, an on/off condition's trials with cycles
    /// (never the separate baseline trials); so baseline trials that differ move nothing
    /// an on/off condition shows.
    #[test]
    fn latency_percentiles_pooled_like_the_estimate() {
        let run = fake_run();
        let r = analyze(&run);
        let metric = "fork_p50_ns";
        let cell = |cond: &str| {
            r.cells
                .iter()
                .find(|c| c.metric == metric && c.condition == cond)
                .unwrap()
        };
        assert_eq!(cell("cpu@100").design, Some(Design::OnOff));
        assert_eq!(cell("memhog@100").design, Some(Design::Paired));

        // The selections are the estimate's own units' trials.
        let trials: Vec<&TrialRecord> = run.trials.iter().collect();
        let stored = Stored::new(&run, &trials);
        let sel = selections(&stored, &r.cells);
        let of = |cond: &str| sel.iter().find(|s| s.condition == cond).unwrap();
        let paired = of("memhog@100");
        let units = cell("memhog@100").baseline.len();
        assert!(units >= 2, "{units} pairs");
        assert_eq!(paired.trials.len(), units, "one contended trial per pair");
        assert_eq!(paired.reference.len(), units, "one baseline trial per pair");
        assert!(paired
            .reference
            .iter()
            .all(|t| t.condition == StoreCondition::Baseline));
        let onoff = of("cpu@100");
        assert!(onoff.reference.is_empty());
        assert!(onoff
            .trials
            .iter()
            .all(|t| condition_text(&t.condition) == "cpu@100" && t.modulation.is_some()));
        let cycles: usize = onoff
            .trials
            .iter()
            .map(|t| {
                let s = t.series.iter().find(|s| s.metric == metric).unwrap();
                crate::onoff::cycles(&s.windows, t.modulation.as_ref().unwrap()).len()
            })
            .sum();
        assert_eq!(
            cycles,
            cell("cpu@100").baseline.len(),
            "the estimate's cycles"
        );
        assert!(
            !sel.iter().any(|s| s.condition == "baseline"),
            "no distribution of every baseline trial beside the estimates"
        );

        // Baseline trials that read 1.6 times slower than the on/off trials (short paired
        // trials against long windowed ones, as in the run that found this) move no on/off
        // distribution, and are drawn only as the reference of the paired condition they
        // were paired in.
        let mut slow = run.clone();
        for t in slow
            .trials
            .iter_mut()
            .filter(|t| t.condition == StoreCondition::Baseline)
        {
            for h in t.histograms.iter_mut().filter(|h| h.metric == metric) {
                let fast = LatencyHistogram::from_base64(&h.base64).unwrap();
                let mut scaled = LatencyHistogram::new();
                for v in fast.0.iter_recorded() {
                    for _ in 0..v.count_at_value() {
                        scaled.record(v.value_iterated_to() * 16 / 10);
                    }
                }
                h.base64 = scaled.to_base64();
            }
        }
        let view = |r: &isobench_results::Results| {
            r.latency
                .iter()
                .find(|l| l.metric == metric)
                .cloned()
                .unwrap()
        };
        let (before, after) = (view(&r), view(&analyze(&slow)));
        assert!(before.estimated);
        assert_eq!(before.unit, "ns");
        assert_eq!(before.distributions.len(), after.distributions.len());
        // What a distribution holds (its bins span the whole view, so they may move).
        let held = |d: &isobench_results::latency::Distribution| {
            (
                d.trials,
                d.values,
                d.min,
                d.max,
                d.quantiles.clone(),
                d.estimate.clone(),
            )
        };
        for (a, b) in before.distributions.iter().zip(&after.distributions) {
            assert_eq!(a.label, b.label);
            match (a.role, a.design) {
                (Role::Contended, Some(Design::OnOff)) => {
                    assert_eq!(held(a), held(b), "{}: moved by baseline trials", a.label);
                    assert!(a.label.contains("both phases"), "{}", a.label);
                    let e = a.estimate.as_ref().expect("the estimate's phases");
                    let c = cell(&a.condition).comparison.as_ref().unwrap();
                    assert_eq!(e.degradation, c.degradation.estimate);
                    assert_eq!(e.reference_median, c.baseline.median);
                }
                (Role::Reference, Some(Design::Paired)) => {
                    assert_eq!(a.condition, "memhog@100");
                    assert_eq!(a.label, "baseline paired with memhog@100");
                    assert_eq!(a.trials as usize, units);
                    assert!(
                        b.quantiles[0] > a.quantiles[0] * 1.5,
                        "the paired baselines"
                    );
                }
                (Role::Contended, Some(Design::Paired)) => assert_eq!(held(a), held(b)),
                other => panic!("unexpected distribution {other:?}: {}", a.label),
            }
        }
    }
}
