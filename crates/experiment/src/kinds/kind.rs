//! What every kind does ([`ExperimentKind`]): plan its conditions, order its trials and
//! analyse them, with the matrix's schedule and stopping rule as the defaults.

use super::matrix::analysis as matrix_analysis;
use super::matrix::schedule as matrix_schedule;
use crate::cells::{Analysis, Inputs, Results};
use crate::fields::Fields;
use crate::plan::{Condition, Estimate, Plan, Platform};
use crate::resolver::Resolver;
use crate::scenario::{ProbeSpec, Scenario};
use crate::schedule::{Block, Needs};
use crate::source::{ScenarioError, Source, Span};

/// One kind of experiment.
pub trait ExperimentKind: Sync {
    /// Name in scenario files, plans and results (`matrix`).
    fn name(&self) -> &'static str;
    /// One line: what the kind answers.
    fn help(&self) -> &'static str;
    /// Checks the scenario's table named after the kind (`[sweep]`) through `f`, reporting
    /// every problem there, and returns the kind's settings, stored with the scenario and the
    /// plan. The default takes no settings: any key of the table is reported as unknown.
    fn settings(&self, f: &mut Fields<'_, '_>, sc: &Scenario) -> serde_json::Value {
        let _ = (f, sc);
        serde_json::Value::Null
    }
    /// Plans the conditions over the tenant pool of the plan being resolved, reporting every
    /// problem to `r`.
    fn conditions(&self, r: &mut Resolver, platform: Platform) -> Vec<Condition>;
    /// The problem to report when planning left no condition to run; by default, that no
    /// stressor is left ([`NothingToRun::NO_STRESSOR`]).
    fn nothing_to_run(&self) -> NothingToRun {
        NothingToRun::NO_STRESSOR
    }
    /// Size and duration of a run of `plan`; by default, the matrix engine's schedule.
    fn estimate(&self, plan: &Plan) -> Estimate {
        matrix_schedule::estimate(plan)
    }
    /// What the first rounds (the scenario's minimum) measure; by default, the matrix's.
    fn first_needs(&self, plan: &Plan) -> Needs {
        matrix_schedule::first_needs(plan)
    }
    /// The blocks of round `round`, given what still needs data; by default, the matrix's.
    fn round_blocks(&self, plan: &Plan, round: u32, needs: &Needs) -> Vec<Block> {
        matrix_schedule::round_blocks(plan, round, needs)
    }
    /// The kind's results from the stored trials; by default, the matrix's.
    fn analyze(&self, i: Inputs<'_>) -> Analysis {
        matrix_analysis::analyze(i.run, i.plan, i.stored, i.settings)
    }
    /// The fewest and the most rounds of a run of `plan`; by default, the scenario's
    /// `[repetitions]` min and max. The rounds below the fewest measure
    /// [`ExperimentKind::first_needs`].
    fn rounds(&self, plan: &Plan) -> (u32, u32) {
        (plan.repetitions.min, plan.repetitions.max)
    }
    /// When a run stops, as the plan states it; by default, the matrix's stopping rule.
    fn stopping_rule(&self, plan: &Plan) -> String {
        let (min, max) = self.rounds(plan);
        format!(
            "{min}..{max} rounds until every CI is within +/-{} points at {}%",
            plan.repetitions.ci_half_width,
            plan.repetitions.confidence * 100.0
        )
    }
    /// What still needs data after `results`; by default, the matrix's stopping rule.
    fn needs(&self, plan: &Plan, results: &Results) -> Needs {
        matrix_analysis::needs(plan, results)
    }
    /// Why the run ended when [`ExperimentKind::needs`] left nothing to measure after
    /// `rounds` rounds; by default, the matrix's stopping rule.
    fn finished(&self, plan: &Plan, rounds: u32) -> String {
        format!(
            "stopping rule met: every victim degradation's {:.0}% interval is within +/-{} \
             points after {rounds} rounds",
            plan.repetitions.confidence * 100.0,
            plan.repetitions.ci_half_width
        )
    }
}

/// The problem a kind reports when planning left it no condition to run, at the top of the
/// scenario file: the field it names, what went wrong, what is allowed and the fix.
pub struct NothingToRun {
    /// The field named (`sweep.stressor`).
    pub field: &'static str,
    /// What went wrong.
    pub problem: &'static str,
    /// What is allowed.
    pub allowed: &'static str,
    /// How to fix it.
    pub fix: &'static str,
}

impl NothingToRun {
    /// No stressor of the scenario can run here: the matrix's problem, and that of every kind
    /// whose conditions are the matrix's.
    pub const NO_STRESSOR: NothingToRun = NothingToRun {
        field: "stressor",
        problem: "no stressor is left to run on this platform",
        allowed: "cpu, cache, membw, net-tx, net-rx on the host platform; all of them on cgroup",
        fix: "add a stressor that is safe on the host, or run as root for cgroup tenants",
    };

    /// The error, located at the top of `src`.
    pub fn error(&self, src: &Source) -> ScenarioError {
        src.error(
            Span::default(),
            self.field,
            self.problem,
            self.allowed,
            self.fix,
        )
    }
}

/// The one probe named `name` of a kind that runs exactly one; `None` after reporting to `r`
/// that the scenario has none (`missing`: the problem; `example`: the example scenario that
/// has it) or more than one (`second`: the problem, at the second).
pub(super) fn the_one_probe<'s>(
    r: &mut Resolver<'s>,
    name: &str,
    missing: &str,
    second: &str,
    example: &str,
) -> Option<&'s ProbeSpec> {
    let sc = r.scenario();
    let allowed = format!("one [[probe]] with name = \"{name}\"");
    let named: Vec<&ProbeSpec> = sc.probes.iter().filter(|p| p.name == name).collect();
    match named.as_slice() {
        [p] => return Some(p),
        [] => r.error(sc.source.error(
            Span::default(),
            "probe",
            missing,
            allowed,
            format!("add [[probe]] name = \"{name}\" (see examples/{example})"),
        )),
        [_, other, ..] => r.error(sc.source.error(
            other.name_span,
            "probe.name",
            second,
            allowed,
            format!("remove this second {name} probe"),
        )),
    }
    None
}
