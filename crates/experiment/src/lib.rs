//! Experiments: scenario files, plans, the orchestrator that runs trials, and the analysis of
//! what it stored.
//!
//! Why a crate of its own: this is where isobench's main question is answered end to end. It
//! turns a scenario into a [`plan::Plan`] (two phases: parse and validate, then resolve against
//! the host), drives tenants through the [`backend::Backend`] trait while a
//! [`backend::Clock`] keeps time (both have fakes, so planning, interleaving and the stopping
//! rule are tested deterministically), commits every trial to the store the moment it ends,
//! and computes degradations with their confidence intervals only through `isobench-stats`.
#![deny(missing_docs)]

pub mod backend;
pub mod plan;
pub mod scenario;
pub mod schedule;
pub mod source;

pub use scenario::{Kind, PlatformChoice, Role, Scenario};
pub use source::{ScenarioError, ScenarioErrors, Source, Span};
