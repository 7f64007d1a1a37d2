//! `pairwise`: two tenants each run a workload at once, for every pair of a chosen set (CPU,
//! DISK, NET: the same and different), and each side's time to complete its work against
//! running alone (paper 003, experiment set 1).
//!
//! A workload is a probe and a stressor of the same id in the scenario (`[[probe]] label =
//! "cpu"` and `[[stressor]] name = "cpu"`): the victim runs the probe, the aggressor the
//! stressor, so one trial measures both sides at once. The victim's side is the probe's
//! degradation under the stressor, as the matrix measures it; the aggressor's side is the
//! stressor's own rate beside that probe against its rate alone (`[trial] solo`). A rate
//! that falls to `r` of its value alone takes `1 / r` times as long to do the same work, so
//! each side is reported as its time to complete relative to alone (x 1.00 = unaffected),
//! with the interval mapped the same way.

use isobench_results::{Column, Plot, Section, Value};
use isobench_stats::Direction;
use serde::{Deserialize, Serialize};

use super::kind::{ExperimentKind, NothingToRun};
use super::matrix::{self, stressor_conditions, Variant};
use crate::cells::{Analysis, Cell, Inputs};
use crate::fields::Fields;
use crate::plan::{Condition, Platform};
use crate::resolver::Resolver;
use crate::scenario::Scenario;

/// The `pairwise` kind.
pub struct Pairwise;

/// What a `[pairwise]` table says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairwiseSettings {
    /// The workloads paired: ids that are both a probe and a stressor of the scenario.
    pub workloads: Vec<String>,
}

impl PairwiseSettings {
    fn of(v: &serde_json::Value) -> Option<PairwiseSettings> {
        serde_json::from_value(v.clone()).ok()
    }
}

impl ExperimentKind for Pairwise {
    fn name(&self) -> &'static str {
        "pairwise"
    }

    fn help(&self) -> &'static str {
        "two tenants each running a workload at once (every pair of cpu, disk, net): each \
         side's time to complete against running alone"
    }

    fn settings(&self, f: &mut Fields<'_, '_>, sc: &Scenario) -> serde_json::Value {
        let both: Vec<&str> = sc
            .probes
            .iter()
            .map(|p| p.id.as_str())
            .filter(|id| sc.stressors.iter().any(|s| s.id == *id))
            .collect();
        let listed = f.array("workloads");
        let workloads: Vec<String> = match listed {
            None => both.iter().map(|s| s.to_string()).collect(),
            Some((span, values)) => {
                let mut out = Vec::new();
                for v in values {
                    let name = v.as_str().unwrap_or_default().to_string();
                    if !both.contains(&name.as_str()) {
                        f.error(
                            span,
                            "workloads",
                            format!(
                                "`{name}` is not both a [[probe]] and a [[stressor]] id of this \
                                 file"
                            ),
                            &format!("ids that are both: {}", both.join(", ")),
                            format!(
                                "add a [[probe]] and a [[stressor]] with id `{name}` (a `label` \
                                 sets the id), or leave it out"
                            ),
                        );
                        return serde_json::Value::Null;
                    }
                    out.push(name);
                }
                out
            }
        };
        if workloads.is_empty() {
            let span = f.span();
            f.error(
                span,
                "workloads",
                "no workload is both a [[probe]] and a [[stressor]] of this file".into(),
                "ids that are both a probe's and a stressor's",
                "give the probe and the stressor of each workload the same id, e.g. `label = \
                 \"cpu\"` on the cpu-int probe"
                    .into(),
            );
            return serde_json::Value::Null;
        }
        if sc.trial.solo.is_zero() {
            let span = f.span();
            f.error(
                span,
                "workloads",
                "the aggressor's side of each pair needs its rate alone, and [trial] solo = \
                 \"0s\" measures none"
                    .into(),
                "a [trial] solo duration above 0",
                "set solo = \"1s\" in [trial]".into(),
            );
        }
        serde_json::to_value(PairwiseSettings { workloads }).expect("settings serialize")
    }

    /// The workloads' stressors, each at its intensities; other stressors are not run.
    fn conditions(&self, r: &mut Resolver, platform: Platform) -> Vec<Condition> {
        let Some(set) = PairwiseSettings::of(&r.scenario().settings) else {
            return Vec::new();
        };
        stressor_conditions(r, platform, |s| {
            if !set.workloads.contains(&s.id) {
                return Vec::new();
            }
            s.intensities.iter().map(|&i| Variant::at(s, i)).collect()
        })
    }

    fn nothing_to_run(&self) -> NothingToRun {
        NothingToRun {
            field: "pairwise.workloads",
            problem: "no workload's stressor can run on this platform",
            allowed: "stressors this platform supports (`isobench list`)",
            fix: "run as root for cgroup tenants",
        }
    }

    fn analyze(&self, i: Inputs<'_>) -> Analysis {
        let (run, stored, settings) = (i.run, i.stored, i.settings);
        matrix::analysis_with(i, PairwiseSettings::of, |a, plan, set| {
            let mut section = Section::new(
                "pairs",
                "Time to complete beside each other, relative to alone (x 1.00 = unaffected)",
                vec![
                    Column::text("victim runs"),
                    Column::text("aggressor runs"),
                    Column::unit("victim's time", "x"),
                    Column::unit("aggressor's time", "x"),
                ],
            )
            .with_plot(Plot::Bars {
                label: vec![0, 1],
                y: vec![2, 3],
                reference: Some(1.0),
            });
            for x in &set.workloads {
                let beside =
                    matrix::analysis::aggressor_cells_beside(run, Some(plan), stored, settings, x);
                for c in plan
                    .conditions
                    .iter()
                    .filter(|c| set.workloads.contains(&c.stressor_id))
                {
                    let victim = a.cells.iter().find(|v| {
                        &v.probe == x && v.condition == c.id && plan.tracks(x, &v.metric)
                    });
                    let aggressor = beside.iter().find(|v| v.condition == c.id);
                    section.push(vec![
                        Value::text_of(x.clone()),
                        Value::text_of(if c.intensity == 100 {
                            c.stressor_id.clone()
                        } else {
                            c.id.clone()
                        }),
                        time_factor(victim),
                        time_factor(aggressor),
                    ]);
                }
            }
            section.notes.push(format!(
                "The victim's time is its probe's, from its first metric's degradation; the \
                 aggressor's, from its stressor's rate beside that probe against its rate alone. \
                 A rate that falls to r of its rate alone takes 1/r times as long; latencies \
                 scale the time directly. {} = untrustworthy (the run's notes say why).",
                isobench_results::UNTRUSTWORTHY_MARK
            ));
            a.sections.push(section);
        })
    }
}

/// A degradation (% worse) as a time to complete relative to alone, with its interval.
fn time_factor(c: Option<&Cell>) -> Value {
    let Some(cell) = c else {
        return Value::Empty;
    };
    let v = super::curve::degradation(Some(cell));
    let factor = |d: f64| match cell.direction {
        // A rate lower by d% takes 1 / (1 - d/100) as long.
        Direction::Higher if d < 100.0 => 1.0 / (1.0 - d / 100.0),
        Direction::Higher => f64::INFINITY,
        // A time or latency higher by d% is d% longer.
        Direction::Lower => 1.0 + d / 100.0,
    };
    match v {
        Value::Estimate {
            value,
            lower,
            upper,
            flag,
            ..
        } => Value::Estimate {
            value: factor(value),
            lower: factor(lower),
            upper: factor(upper),
            digits: 2,
            flag,
        },
        other => other,
    }
}
