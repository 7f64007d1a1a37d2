//! Experiment kinds: what a run asks (docs/scenario.md, "Experiment kinds";
//! adding one: docs/ARCHITECTURE.md, "Add an experiment kind").
//!
//! Every kind plans its conditions over the shared tenant pool, orders its trials for the
//! shared trial executor ([`crate::orchestrator`]), and analyses what the store holds. The
//! scenario, the plan's tenants and probes, the executor, the store and the statistics are
//! shared; what differs is one module per kind behind [`ExperimentKind`], listed once in
//! [`KINDS`]. Adding a kind is one module plus one line of that table.

pub mod artifacts;
pub(crate) mod curve;
pub mod fidelity;
pub mod matrix;
pub mod pairwise;
pub mod protection;
pub mod scale;
pub mod sensitivity;
pub mod sweep;
pub mod timeline;
pub mod webapp;

use isobench_results::Section;
use isobench_store::LoadedRun;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::analysis::{Cell, ClassSummary, Results, StatsSettings, Stored};
use crate::fields::Fields;
use crate::plan::{Condition, Estimate, Plan, Platform};
use crate::resolve::Resolver;
use crate::scenario::{ProbeSpec, Scenario};
use crate::schedule::{Block, Needs};
use crate::source::{ScenarioError, Span};

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
    /// The problem to report when planning left no condition to run.
    fn nothing_to_run(&self, r: &Resolver) -> ScenarioError;
    /// Size and duration of a run of `plan`; by default, the matrix engine's schedule.
    fn estimate(&self, plan: &Plan) -> Estimate {
        matrix::schedule::estimate(plan)
    }
    /// What the first rounds (the scenario's minimum) measure; by default, the matrix's.
    fn first_needs(&self, plan: &Plan) -> Needs {
        matrix::schedule::first_needs(plan)
    }
    /// The blocks of round `round`, given what still needs data; by default, the matrix's.
    fn round_blocks(&self, plan: &Plan, round: u32, needs: &Needs) -> Vec<Block> {
        matrix::schedule::round_blocks(plan, round, needs)
    }
    /// The kind's results from the stored trials.
    fn analyze(
        &self,
        run: &LoadedRun,
        plan: Option<&Plan>,
        stored: &Stored,
        settings: &StatsSettings,
    ) -> Analysis;
    /// What still needs data after `results`; by default, the matrix's stopping rule.
    fn needs(&self, plan: &Plan, results: &Results) -> Needs {
        matrix::analysis::needs(plan, results)
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

/// What a kind's analysis finds: the cells the run reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    /// Victim degradations.
    pub cells: Vec<Cell>,
    /// Aggressor degradations.
    pub aggressor: Vec<Cell>,
    /// Per resource class, the worst victim degradation.
    pub classes: Vec<ClassSummary>,
    /// The kind's own views (a curve as rows, a pairwise grid), rendered by every renderer.
    pub sections: Vec<Section>,
}

/// Every kind, one line each; the first is the default of a run stored without a plan.
#[rustfmt::skip]
pub const KINDS: &[&dyn ExperimentKind] = &[
    &matrix::Matrix,
    &sweep::Sweep,
    &sensitivity::Sensitivity,
    &pairwise::Pairwise,
    &scale::Scale,
    &fidelity::Fidelity,
    &timeline::Timeline,
    &webapp::Webapp,
    &artifacts::Artifacts,
    &protection::Protection,
];

/// An experiment kind of [`KINDS`], by name; stored and exported as its name.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Kind(&'static str);

impl Kind {
    /// The kind named `name`, when [`KINDS`] has one.
    pub fn named(name: &str) -> Option<Kind> {
        KINDS
            .iter()
            .find(|k| k.name() == name)
            .map(|k| Kind(k.name()))
    }

    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        self.0
    }

    /// The kind's planning and analysis.
    pub fn experiment(self) -> &'static dyn ExperimentKind {
        *KINDS
            .iter()
            .find(|k| k.name() == self.0)
            .expect("a Kind is made only from the table")
    }
}

impl Default for Kind {
    /// The first kind of the table.
    fn default() -> Self {
        Kind(KINDS[0].name())
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

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Kind::named(&name).ok_or_else(|| {
            let known: Vec<&str> = KINDS.iter().map(|k| k.name()).collect();
            serde::de::Error::custom(format!(
                "unknown experiment kind `{name}` (this version knows {})",
                known.join(", ")
            ))
        })
    }
}

/// The one probe named `name` of a kind that runs exactly one; `None` after reporting to `r`
/// that the scenario has none (`missing`: the problem; `example`: the example scenario that
/// has it) or more than one (`second`: the problem, at the second).
fn the_one_probe<'s>(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_have_unique_names_and_help() {
        let mut names: Vec<&str> = KINDS.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), KINDS.len(), "duplicate kind name");
        assert!(KINDS.iter().all(|k| !k.help().is_empty()));
    }

    #[test]
    fn a_kind_reads_and_writes_as_its_name() {
        let k = Kind::named("matrix").unwrap();
        assert_eq!(serde_json::to_string(&k).unwrap(), r#""matrix""#);
        assert_eq!(serde_json::from_str::<Kind>(r#""matrix""#).unwrap(), k);
        assert!(serde_json::from_str::<Kind>(r#""sideways""#).is_err());
        assert_eq!(Kind::default(), k);
    }
}
