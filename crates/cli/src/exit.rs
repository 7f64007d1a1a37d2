//! Exit codes (documented in docs/cli.md).

use std::process::ExitCode;

/// Success.
pub const OK: u8 = 0;
/// A runtime failure (I/O, a workload error).
pub const FAILURE: u8 = 1;
/// Bad input: unknown workload, bad parameter, malformed flag or file.
pub const BAD_INPUT: u8 = 2;
/// The workload or platform is not supported on this machine.
pub const UNSUPPORTED: u8 = 3;
/// Ran, but some trials failed, did not respond or are untrustworthy.
#[allow(dead_code)]
pub const PARTIAL: u8 = 4;
/// Interrupted (Ctrl-C) before anything was measured.
pub const INTERRUPTED: u8 = 130;

/// An error that knows its exit code.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CodedError {
    /// Exit code.
    pub code: u8,
    /// Message shown to the user.
    pub message: String,
}

/// A bad-input error.
pub fn bad_input(message: impl Into<String>) -> anyhow::Error {
    CodedError {
        code: BAD_INPUT,
        message: message.into(),
    }
    .into()
}

/// An unsupported-here error.
pub fn unsupported(message: impl Into<String>) -> anyhow::Error {
    CodedError {
        code: UNSUPPORTED,
        message: message.into(),
    }
    .into()
}

/// The exit code for an error.
pub fn code_for(err: &anyhow::Error) -> ExitCode {
    if let Some(c) = err.downcast_ref::<CodedError>() {
        return ExitCode::from(c.code);
    }
    if err
        .downcast_ref::<isobench_workloads::ParamError>()
        .is_some()
    {
        return ExitCode::from(BAD_INPUT);
    }
    ExitCode::from(FAILURE)
}

#[allow(dead_code)]
fn _all_used() -> [u8; 3] {
    [OK, FAILURE, INTERRUPTED]
}
