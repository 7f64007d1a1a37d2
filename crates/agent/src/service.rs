//! What a network service is to the agent: a starter of services of some kinds, and a
//! running service it can stop. The catalogue holds a starter; `services` has the built-in one.

use isobench_workloads::netserve::ServerStats;

/// A running network service (the server half of a network probe).
pub trait RunningService: Send {
    /// The address it listens on, with the port resolved.
    fn addr(&self) -> String;
    /// Stops it, waits for it to finish and returns its counters, or why it failed.
    fn stop(self: Box<Self>) -> Result<ServerStats, String>;
}

/// Why a service did not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    /// The kind's argument or the bind address is invalid (answered `bad_parameter`).
    #[error("{0}")]
    Invalid(String),
    /// Binding or starting failed (answered `workload_failed`).
    #[error("{0}")]
    Failed(String),
}

/// Starts network services of some kinds.
pub trait ServiceStarter: Send + Sync {
    /// The kind names `start` accepts (an argument may follow a colon: `http:1K`).
    fn kinds(&self) -> Vec<String>;
    /// Starts a service of `kind` bound to `bind`, its threads pinned to `pin` when given.
    fn start(
        &self,
        kind: &str,
        bind: &str,
        pin: Option<usize>,
    ) -> Result<Box<dyn RunningService>, ServiceError>;
}
