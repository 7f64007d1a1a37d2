//! Errors of the store. Each names the database file and says what to do.

use std::path::PathBuf;
use std::time::Duration;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file could not be opened or created.
    #[error("cannot open the isobench database {}: {sqlite}", path.display())]
    Open {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        sqlite: rusqlite::Error,
    },
    /// The path is not a usable isobench database: a directory, a file that is not SQLite,
    /// or a damaged (truncated) database. Nothing was written to it.
    #[error("{}", why.describe(path))]
    NotADatabase {
        /// The path.
        path: PathBuf,
        /// What it is instead, and what to do.
        why: Unusable,
    },
    /// A write was refused because the database is read-only: the store was opened for
    /// reading, or the file, its directory or its file system does not take writes.
    #[error(
        "cannot write to the isobench database {} ({context}): it is read-only (the file, its \
         directory or its file system); the commands that only read it (runs, show, export, \
         report, compare) work as it is; to run or resume, pass --db a writable file or copy \
         it to a writable directory",
        path.display()
    )]
    ReadOnly {
        /// The database file.
        path: PathBuf,
        /// What the store was doing.
        context: &'static str,
    },
    /// A database of an older schema needs a migration to be read by this build, and it is
    /// read-only.
    #[error(
        "the isobench database {} has schema version {found}, older than the version \
         {supported} this isobench {tool} reads; reading it needs a migration, which writes to \
         it, and it is read-only (the file, its directory or its file system): copy it to a \
         writable directory and pass the copy with --db (the copy is migrated, the original is \
         left as it is), or read it with the isobench that wrote it",
        path.display(),
        tool = env!("CARGO_PKG_VERSION")
    )]
    NeedsMigration {
        /// The database file.
        path: PathBuf,
        /// Its schema version.
        found: u32,
        /// The schema version this build reads.
        supported: u32,
    },
    /// The database has a write-ahead log that cannot be read where it lies.
    #[error(
        "the isobench database {path} has changes in its write-ahead log {path}-wal that SQLite \
         can read only by creating {path}-shm beside them, and that directory is read-only: \
         copy {path} and {path}-wal together to a writable directory and pass the copy with \
         --db",
        path = path.display()
    )]
    UnreadableLog {
        /// The database file.
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
    /// `latest` asked of a database that holds no run.
    #[error(
        "the isobench database {} holds no run yet, so there is no latest; `isobench run` \
         makes one",
        path.display()
    )]
    NoRuns {
        /// The database file.
        path: PathBuf,
    },
    /// A run id prefix that more than one run starts with.
    #[error(
        "`{wanted}` could be any of {} runs in the isobench database {}: {}{}; give more of \
         the id",
        candidates.len() + more,
        path.display(),
        candidates.join(", "),
        if *more > 0 { format!(" and {more} more") } else { String::new() }
    )]
    AmbiguousRun {
        /// The database file.
        path: PathBuf,
        /// The prefix asked for.
        wanted: String,
        /// The first runs it matches, newest first.
        candidates: Vec<String>,
        /// How many more it matches.
        more: usize,
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
    #[error("{context} in the isobench database {}: {sqlite}", path.display())]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// What the store was doing.
        context: &'static str,
        /// What SQLite said (in the message, not as a source, so that it is said once).
        sqlite: rusqlite::Error,
    },
}

/// What a path given as a database is instead of one, each with the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unusable {
    /// A directory.
    Directory,
    /// A file that is not an SQLite database.
    NotSqlite,
    /// An SQLite database that is damaged, typically truncated (a copy cut short, a full
    /// disk while it was copied).
    Damaged {
        /// What shows it (SQLite's message, or the file's length against its header's).
        detail: String,
    },
}

impl Unusable {
    /// The whole message for the path `path`: what it is, and what to do.
    pub fn describe(&self, path: &std::path::Path) -> String {
        let p = path.display();
        let what = match self {
            Unusable::Directory => format!(
                "it is a directory; pass the database file itself (for example \
                 {}), or a new file name to create one",
                path.join("isobench.db").display()
            ),
            Unusable::NotSqlite => "it is not an SQLite database; pass the path of an isobench \
                                    results database, or a new file name to create one"
                .to_string(),
            Unusable::Damaged { detail } => format!(
                "it is damaged or truncated ({detail}); restore it from a complete copy, or \
                 pass a new file name to start a new database (`sqlite3 {p} .recover` may \
                 save what it holds)"
            ),
        };
        format!("{p} is not a usable isobench database: {what}")
    }
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

/// What the file is instead of a database, when SQLite says it is not one or that it is
/// damaged.
pub(crate) fn unusable(e: &rusqlite::Error) -> Option<Unusable> {
    match e.sqlite_error_code()? {
        rusqlite::ErrorCode::NotADatabase => Some(Unusable::NotSqlite),
        rusqlite::ErrorCode::DatabaseCorrupt => Some(Unusable::Damaged {
            detail: format!("SQLite says: {}", sqlite_message(e)),
        }),
        _ => None,
    }
}

/// True when SQLite refused a write because the database is read-only.
pub(crate) fn is_read_only(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::ReadOnly))
}

/// True when SQLite could not open the file (or a file beside it: a read-only connection
/// to a WAL database needs `-shm`).
pub(crate) fn is_cannot_open(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::CannotOpen | rusqlite::ErrorCode::ReadOnly)
    )
}

/// SQLite's own words for an error, once.
fn sqlite_message(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqliteFailure(_, Some(m)) if !m.is_empty() => m.clone(),
        rusqlite::Error::SqliteFailure(f, _) => f.to_string(),
        other => other.to_string(),
    }
}
