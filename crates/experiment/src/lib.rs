//! Experiments: scenario files, plans, the orchestrator that runs trials, and the analysis of
//! what it stored.
//!
//! Why a crate of its own: this is where isobench's main question is answered end to end. A
//! scenario is parsed and validated ([`scenario`]), then resolved against the host into a
//! [`plan::Plan`] by [`resolve`] (two phases, so a file can be checked anywhere and sized
//! where it runs). What a run asks is its kind ([`kinds`]): one module per kind plans its
//! conditions over the shared tenant pool, orders its trials and analyses them.
//! The [`orchestrator`] drives tenants through the [`backend::Backend`] trait while a
//! [`backend::Clock`] keeps time (both have fakes in [`fake`], so planning, interleaving and
//! the stopping rule are tested deterministically; [`real`] is the backend on
//! `isobench-platform` and `isobench-agent`), commits every trial to the store the moment it
//! ends, and decides how many rounds to run from [`analysis`], which computes every
//! degradation and its confidence interval only through `isobench-stats`, from the store.
#![deny(missing_docs)]

pub mod analysis;
pub mod backend;
pub mod cause;
pub mod cells;
pub mod error;
pub mod facts;
pub mod fake;
pub mod fields;
pub mod kinds;
mod latency;
pub mod memcheck;
pub mod onoff;
pub mod orchestrator;
pub mod orphans;
pub mod plan;
pub mod progress;
pub mod real;
pub mod resolve;
pub mod resolver;
pub mod scenario;
pub mod schedule;
pub mod scheduled;
pub mod serving;
pub mod session;
pub mod source;
pub mod stored;
pub mod tenant_agent;

pub use analysis::{analyze, Results};

/// The results database every command uses when none is given.
pub const DEFAULT_DB: &str = "isobench.db";
pub use plan::{HostView, Plan, PlanOptions};
pub use scenario::{Kind, PlatformChoice, Role, Scenario};
pub use source::{ScenarioError, ScenarioErrors, Source, Span};
