//! Why a run session, a fleet or a lone tenant could not start or run: one error type for
//! every caller of the run path, which the CLI maps to its exit codes and the server to its
//! HTTP statuses.

use isobench_platform::SlotHolder;
use isobench_store::StoreError;

use crate::source::ScenarioErrors;

/// Why a session could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// A flag, preset or run id the user gave is wrong.
    #[error("{0}")]
    BadInput(String),
    /// The scenario has problems, each located in it.
    #[error("{}", .0.to_string().trim_end())]
    Scenario(ScenarioErrors),
    /// The platform cannot run here.
    #[error("{0}")]
    Unsupported(String),
    /// The database refused.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Another run is measuring on this host: two at once would disturb each other's figures.
    #[error(
        "{0} is measuring on this host; two runs at once would disturb each other's figures. \
         Wait for it to end (`--wait`), or stop it first"
    )]
    Busy(SlotHolder),
    /// Anything else (I/O, a platform that failed while setting up).
    #[error("{0:#}")]
    Other(anyhow::Error),
}
