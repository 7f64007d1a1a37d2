//! Exit codes (documented in docs/cli.md), and the errors that carry them: the coded errors
//! of the commands, and the libraries' errors (the store's, a session's) mapped to them.

use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};

use isobench_experiment::session::SessionError;
use isobench_store::StoreError;

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
/// Another run is measuring on this host (see `isobench run --wait`).
pub const BUSY: u8 = 5;
/// Interrupted by Ctrl-C (SIGINT); SIGTERM gives 143 and SIGHUP 129 (128 + the signal), see
/// [`interrupted`].
pub const INTERRUPTED: u8 = 130;

/// The first stopping signal this process received (0: none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Records a stopping signal; the first one decides the exit code.
pub fn note_signal(signal: i32) {
    let _ = SIGNAL.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
}

/// Whether a stopping signal was received.
pub fn signalled() -> bool {
    SIGNAL.load(Ordering::SeqCst) != 0
}

/// The exit code of a command that a signal stopped: 128 + the signal, as shells report it
/// (130 when none was received: the stop came another way).
pub fn interrupted() -> u8 {
    match SIGNAL.load(Ordering::SeqCst) {
        s @ 1..=127 => 128 + s as u8,
        _ => INTERRUPTED,
    }
}

/// Whether `code` says the command was stopped by a signal.
pub fn is_interrupted(code: u8) -> bool {
    code == INTERRUPTED || code == interrupted()
}

/// The exit code of a run of many runs that ended so.
pub fn for_ending(e: isobench_fleet::Ending) -> u8 {
    match e {
        isobench_fleet::Ending::Complete => OK,
        isobench_fleet::Ending::Partial => PARTIAL,
        isobench_fleet::Ending::Interrupted => interrupted(),
        isobench_fleet::Ending::Failed => FAILURE,
    }
}

/// How a run that exited with `code` ended.
pub fn ending(code: u8) -> isobench_fleet::Ending {
    match code {
        OK => isobench_fleet::Ending::Complete,
        PARTIAL => isobench_fleet::Ending::Partial,
        c if is_interrupted(c) => isobench_fleet::Ending::Interrupted,
        _ => isobench_fleet::Ending::Failed,
    }
}

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

/// Another run measures on this host.
pub fn busy(message: impl Into<String>) -> anyhow::Error {
    CodedError {
        code: BUSY,
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

/// Maps a store error to a coded error where the user has to act: a `--db` that is not a
/// usable database (a directory, not SQLite, damaged or truncated, newer, read-only where a
/// write is needed) and a run id that names no run or several are bad input (exit code 2).
pub fn store_error(e: StoreError) -> anyhow::Error {
    match e {
        StoreError::NewerSchema { .. }
        | StoreError::NotADatabase { .. }
        | StoreError::NoDirectory { .. }
        | StoreError::ReadOnly { .. }
        | StoreError::NeedsMigration { .. }
        | StoreError::UnreadableLog { .. }
        | StoreError::AmbiguousRun { .. }
        | StoreError::NoRuns { .. } => bad_input(e.to_string()),
        StoreError::UnknownRun { .. } => bad_input(format!("{e}; `isobench runs` lists the runs")),
        other => anyhow::Error::new(other),
    }
}

/// The exit-coded error for a session's.
pub fn session_error(e: SessionError) -> anyhow::Error {
    match e {
        SessionError::BadInput(m) => bad_input(m),
        SessionError::Scenario(_) => bad_input(e.to_string()),
        SessionError::Unsupported(m) => unsupported(m),
        SessionError::Store(se) => store_error(se),
        e @ SessionError::Busy(_) => busy(e.to_string()),
        SessionError::Other(e) => e,
    }
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
