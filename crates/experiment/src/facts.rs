//! The names of the facts a run records beside its trials, in one place: the orchestrator
//! writes them and the analysis reads them back, and neither has to know the other for it.

/// Fact scope and key under which the plan of a run is stored.
pub const PLAN_FACT: (&str, &str) = ("run", "plan");

/// Fact scope of what each aggressor's stressor delivered over a block, in physical units
/// (read back by [`crate::analysis::delivered_pressure`]).
pub const PRESSURE_FACT: &str = "pressure";

/// Fact key (scope `run`) of the on/off sizes chosen by the pilot.
pub const TUNING_FACT: &str = "onoff_tuning";
