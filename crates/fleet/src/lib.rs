//! Runs of one scenario on many members: a fleet of hosts reached through their host agents
//! ([`hosts`]), a fleet of Kubernetes nodes reached through runner pods ([`nodes`]), the same
//! scenario on several platforms in turn ([`cross`]), and the runner a host agent runs the
//! scenarios it is sent with ([`hostagent`]).
//!
//! Why a crate of its own: this is the coordinator of many runs, above the one run that
//! `isobench-experiment` measures, and the command line and the web server both start it.
//! It returns values and errors and reports what happens as events ([`FleetEvent`],
//! [`cross::CrossEvent`]); it never prints, never parses command-line arguments and never
//! exits the process. A run is stopped through the flag its request carries.
#![deny(missing_docs)]

pub mod coordinator;
pub mod cross;
pub mod hostagent;
pub mod hosts;
pub mod nodes;

pub use coordinator::{
    coordinate, scenario_request, Driver, Fleet, FleetEvent, FleetOutcome, Hangups, Member,
    MemberProgress,
};

use serde::Serialize;

/// How a run of many runs ended, from the best to the worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// Every run ended complete, with results it trusts.
    Complete,
    /// Some member or platform did not run, or its run ended incomplete or flagged.
    Partial,
    /// Stopped before its end (the stop flag, a signal).
    Interrupted,
    /// Something failed after the runs (writing what they produced).
    Failed,
}

impl Ending {
    /// The worse of two endings.
    pub fn worse(self, other: Ending) -> Ending {
        self.max(other)
    }
}
