//! Errors of the store. Each names the database file and says what to do.

use std::path::PathBuf;
use std::time::Duration;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file could not be opened or created.
    #[error("cannot open the isobench database {}: {source}", path.display())]
    Open {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        source: rusqlite::Error,
    },
    /// The file exists but is not an SQLite database.
    #[error(
        "{} is not an SQLite database; pass the path of an isobench results database, \
         or a new file name to create one",
        path.display()
    )]
    NotADatabase {
        /// The file.
        path: PathBuf,
    },
    /// The database was written by a newer isobench.
    #[error(
        "the isobench database {} has schema version {found}, but this isobench {tool} \
         understands schema versions up to {supported}; upgrade isobench to read it \
         (it was not modified)",
        path.display(),
        tool = env!("CARGO_PKG_VERSION")
    )]
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// Its schema version.
        found: u32,
        /// The newest schema this build knows.
        supported: u32,
    },
    /// Another process held the write lock for longer than the busy timeout.
    #[error(
        "the isobench database {} is locked by another writer (waited {timeout:?}); another \
         isobench run is probably writing to it: wait for it to finish, or use a different \
         database file",
        path.display()
    )]
    Locked {
        /// The database file.
        path: PathBuf,
        /// How long this process waited.
        timeout: Duration,
    },
    /// The filesystem holding the database (or its write-ahead log) has no room left.
    #[error(
        "the disk holding the isobench database {} is full ({context}); free space on it, or \
         pass `--db` a file on another disk; what was stored before is kept and readable",
        path.display()
    )]
    Full {
        /// The database file.
        path: PathBuf,
        /// What the store was doing.
        context: &'static str,
    },
    /// No run with this id.
    #[error("run {run} is not in the isobench database {}", path.display())]
    UnknownRun {
        /// The database file.
        path: PathBuf,
        /// The id asked for.
        run: String,
    },
    /// A trial or stressor report names a tenant that was not added to the run.
    #[error(
        "tenant {tenant:?} is not part of run {run}; add it with add_tenant before recording \
         trials that name it"
    )]
    UnknownTenant {
        /// The run.
        run: String,
        /// The tenant name.
        tenant: String,
    },
    /// A tenant of this name was already added to the run.
    #[error(
        "run {run} already has a tenant named {tenant:?}; tenant names must be unique in a run"
    )]
    DuplicateTenant {
        /// The run.
        run: String,
        /// The tenant name.
        tenant: String,
    },
    /// A trial with this key was already recorded for the run and tenant.
    #[error(
        "trial {key} of {tenant} in run {run} is already recorded; a resumed run must skip the \
         trials listed by completed_trial_keys (trials are never recorded twice)"
    )]
    DuplicateTrial {
        /// The run.
        run: String,
        /// The trial's key.
        key: crate::TrialKey,
        /// The tenant of the record.
        tenant: String,
    },
    /// An imported run has the id of a run already in the database.
    #[error(
        "run {run} is already in {}; it was imported before (or ran here), and runs are never \
         stored twice",
        path.display()
    )]
    DuplicateRun {
        /// The run.
        run: String,
        /// The database file.
        path: PathBuf,
    },
    /// Trials can only be recorded while the run is running.
    #[error("run {run} is {status}, so it takes no more trials; resume it first")]
    RunNotRunning {
        /// The run.
        run: String,
        /// Its status.
        status: String,
    },
    /// A record is inconsistent (non-finite sample, duplicate metric, bad name...).
    #[error("invalid record: {0}")]
    InvalidRecord(String),
    /// A stored value cannot be read back by this build.
    #[error("the isobench database {} holds a value this build cannot read: {what}", path.display())]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What could not be read.
        what: String,
    },
    /// Any other SQLite failure.
    #[error("{context} in the isobench database {}: {source}", path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// What the store was doing.
        context: &'static str,
        /// What SQLite said.
        source: rusqlite::Error,
    },
}

/// True when SQLite gave up waiting for a lock.
pub(crate) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// True when the disk (or the file size limit) left no room for a write.
pub(crate) fn is_full(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DiskFull))
}

/// True for a UNIQUE or PRIMARY KEY constraint violation.
pub(crate) fn is_unique_violation(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error().map(|f| f.extended_code),
        Some(rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY)
    )
}

/// True when the file is not a database.
pub(crate) fn is_not_a_database(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::NotADatabase)
    )
}
