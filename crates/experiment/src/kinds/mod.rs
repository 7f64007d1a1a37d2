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
pub mod tune;
pub mod webapp;

mod kind;

pub use kind::ExperimentKind;

use serde::{Deserialize, Deserializer};

pub use crate::cells::Analysis;
pub use crate::scenario::Kind;

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
    &tune::Tune,
];

impl Kind {
    /// The kind named `name`, when [`KINDS`] has one.
    pub fn named(name: &str) -> Option<Kind> {
        KINDS
            .iter()
            .find(|k| k.name() == name)
            .map(|k| Kind(k.name()))
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
