//! [`Store`]: the typed API over the SQLite file.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::error::{
    is_busy, is_cannot_open, is_full, is_read_only, is_unique_violation, unusable, StoreError,
    Unusable,
};
use crate::model::{
    Condition, Fact, HistogramRecord, LoadedRun, NewRun, RunId, RunRecord, RunStatus, RunSummary,
    SampleRecord, StallRecord, StressorReport, TenantRecord, TenantUsageRecord, TrialKey,
    TrialRecord, TrialStatus, HISTOGRAM_ENCODING,
};
use crate::schema::{check_not_newer, migrate, user_version, MIGRATIONS, SCHEMA_VERSION};
use crate::time::Timestamp;

/// How to open a database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenOptions {
    /// How long a write waits for another writer's lock before failing with
    /// [`StoreError::Locked`] (default 5 s).
    pub busy_timeout: Duration,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            busy_timeout: Duration::from_secs(5),
        }
    }
}

/// The database file and how errors about it are phrased.
pub(crate) struct DbFile {
    pub(crate) path: PathBuf,
    pub(crate) busy_timeout: Duration,
}

impl DbFile {
    /// Wraps a SQLite error with the file name, recognising lock timeouts, a full disk, a
    /// read-only database and files that are not (or no longer) usable databases.
    pub(crate) fn err(&self, context: &'static str, e: rusqlite::Error) -> StoreError {
        if is_full(&e) {
            StoreError::Full {
                path: self.path.clone(),
                context,
            }
        } else if is_busy(&e) {
            StoreError::Locked {
                path: self.path.clone(),
                timeout: self.busy_timeout,
            }
        } else if let Some(why) = unusable(&e) {
            StoreError::NotADatabase {
                path: self.path.clone(),
                why,
            }
        } else if is_read_only(&e) {
            StoreError::ReadOnly {
                path: self.path.clone(),
                context,
            }
        } else {
            StoreError::Sqlite {
                path: self.path.clone(),
                context,
                sqlite: e,
            }
        }
    }

    /// Wraps an error of opening the file.
    fn open_err(&self, e: rusqlite::Error) -> StoreError {
        match unusable(&e) {
            Some(why) => StoreError::NotADatabase {
                path: self.path.clone(),
                why,
            },
            None => StoreError::Open {
                path: self.path.clone(),
                sqlite: e,
            },
        }
    }

    fn corrupt(&self, what: impl Into<String>) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            what: what.into(),
        }
    }

    fn unknown_run(&self, run: &RunId) -> StoreError {
        StoreError::UnknownRun {
            path: self.path.clone(),
            run: run.to_string(),
        }
    }
}

/// Creates `path` empty with mode 0600 unless something is there already, so that SQLite
/// opens a file only its owner can read: results and the server's jobs name the host, its
/// tenants and their scenarios. SQLite gives the `-wal`, `-shm` and `-journal` files it makes
/// beside a database the database's own mode, so they are 0600 too. There is no moment with
/// a wider mode (`O_CREAT|O_EXCL` with the mode, never a chmod after), and an existing file
/// is neither opened here nor changed. Failures are left to SQLite's open, which reports them
/// with its own error (a missing directory, no permission).
fn create_private(path: &Path) {
    use std::os::unix::fs::OpenOptionsExt as _;
    let special = path.as_os_str() == ":memory:" || path.to_string_lossy().starts_with("file:");
    if special || path.as_os_str().is_empty() {
        return;
    }
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path);
}

/// Whether `path` names a file or a place for a new one (as opposed to a directory, or an
/// in-memory or URI name, which are left to SQLite).
fn check_not_directory(path: &Path) -> Result<(), StoreError> {
    if path.is_dir() {
        return Err(StoreError::NotADatabase {
            path: path.to_path_buf(),
            why: Unusable::Directory,
        });
    }
    Ok(())
}

/// Whether this process may write `path` and create files beside it (SQLite's `-wal`,
/// `-shm` and `-journal`). Asks the kernel (`access(2)` with the effective ids), so a
/// read-only file system and an immutable file say no even to root, whose permission bits
/// are not checked.
pub(crate) fn writable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt as _;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let may_write = |p: &Path| {
        let Ok(c) = std::ffi::CString::new(p.as_os_str().as_bytes()) else {
            return false;
        };
        // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
        unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::W_OK, libc::AT_EACCESS) == 0 }
    };
    (!path.exists() || may_write(path)) && may_write(dir)
}

/// The `file:` URI of `path` for SQLite, with `query` (`mode=ro`, `immutable=1`): every byte
/// but unreserved ones and `/` percent-encoded, so `?`, `#` and `%` in a name stay part of it.
fn sqlite_uri(path: &Path, query: &str) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let mut uri = String::from(if path.is_absolute() {
        "file://"
    } else {
        "file:"
    });
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push('?');
    uri.push_str(query);
    uri
}

/// Refuses a database file cut short (a copy that stopped, a full disk while it was
/// written): an SQLite file whose header gives its size (page size times page count, valid
/// when the header's change counter matches its version-valid-for number) but that holds
/// fewer bytes. SQLite itself would only notice at the first page it cannot read, maybe in
/// the middle of a command. A file that is not SQLite is left to SQLite to name.
///
/// A writer checkpointing its log into the file (another process's run) writes the header
/// before the pages that extend the file: a file that is short for a moment is read again,
/// and only one that stays short for [`SHORT_FILE_PATIENCE`] is refused. A file left short
/// by a checkpoint that could not extend it (the disk filled) is not damaged while its log
/// still holds changes: SQLite reads the pages from the log, and the next checkpoint
/// completes the file.
fn check_length(path: &Path) -> Result<(), StoreError> {
    let deadline = std::time::Instant::now() + SHORT_FILE_PATIENCE;
    loop {
        match short_file(path) {
            Ok(()) => return Ok(()),
            Err(e) if std::time::Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(50)),
        }
    }
}

/// How long a database file may look shorter than its header says before it is refused as
/// cut short: a checkpoint of a busy run takes a few milliseconds to tens of them.
const SHORT_FILE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(1);

/// One look of [`check_length`].
fn short_file(path: &Path) -> Result<(), StoreError> {
    use std::io::Read as _;
    let mut head = [0u8; 100];
    let Ok(mut file) = std::fs::File::open(path) else {
        return Ok(());
    };
    let read = file.read(&mut head).unwrap_or(0);
    // The length after the header: a checkpoint that grew the file since is seen whole.
    let len = file.metadata().map_or(0, |m| m.len());
    if read < 16 || &head[..16] != b"SQLite format 3\0" {
        return Ok(());
    }
    let damaged = |what: String| StoreError::NotADatabase {
        path: path.to_path_buf(),
        why: Unusable::Damaged { detail: what },
    };
    if read < head.len() {
        return Err(damaged(format!(
            "the file has {len} bytes, less than SQLite's 100-byte header"
        )));
    }
    let be32 = |at: usize| u32::from_be_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
    let page_size = match u16::from_be_bytes([head[16], head[17]]) {
        1 => 65_536,
        n => u64::from(n),
    };
    let pages = u64::from(be32(28));
    let expected = page_size * pages;
    if be32(24) == be32(92) && pages > 0 && len < expected && !log_has_changes(path) {
        return Err(damaged(format!(
            "the file has {len} bytes, its header says {expected} ({pages} pages of \
             {page_size})"
        )));
    }
    Ok(())
}

/// Whether `path-wal` exists and holds something (changes not yet copied into the file).
fn log_has_changes(path: &Path) -> bool {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(wal).is_ok_and(|m| m.len() > 0)
}

/// An open isobench results database.
///
/// Writes take `&mut self`; one `Store` per thread. Several processes may open the same file:
/// readers never block, and writers queue for up to the busy timeout.
pub struct Store {
    conn: Connection,
    db: DbFile,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.db.path)
            .finish()
    }
}

impl Store {
    /// Opens (creating if needed) the database at `path` and migrates it to
    /// [`SCHEMA_VERSION`]; see [`Store::open_with`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, &OpenOptions::default())
    }

    /// Opens (creating if needed) the database at `path`: refuses it if its schema is newer
    /// than this build ([`StoreError::NewerSchema`], before writing anything), switches it to
    /// WAL mode, enables foreign keys and full sync, and applies any missing migrations.
    ///
    /// A new database is created with mode 0600 (see [`create_private`]); an existing one
    /// keeps its mode. A directory is [`StoreError::NotADatabase`]; a database this process
    /// cannot write (a read-only file, directory or file system) is [`StoreError::ReadOnly`]:
    /// [`Store::open_read_only`] reads it.
    pub fn open_with(path: impl AsRef<Path>, options: &OpenOptions) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        check_not_directory(&path)?;
        check_length(&path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let special =
                path.as_os_str() == ":memory:" || path.to_string_lossy().starts_with("file:");
            if !special && !dir.is_dir() {
                return Err(StoreError::NoDirectory {
                    path: path.clone(),
                    dir: dir.to_path_buf(),
                });
            }
        }
        create_private(&path);
        let db = DbFile {
            path: path.clone(),
            busy_timeout: options.busy_timeout,
        };
        let conn = Connection::open(&path).map_err(|e| db.open_err(e))?;
        Self::init(conn, db, MIGRATIONS).map_err(|e| match e {
            // SQLite opens a file it cannot write read-only, and fails at the first write or
            // at the `-shm` file it cannot create: say why.
            StoreError::Sqlite { .. } if !writable(&path) => StoreError::ReadOnly {
                path: path.clone(),
                context: "opening it to write",
            },
            e => e,
        })
    }

    /// Opens the existing database at `path` for reading only: nothing is written to it, so
    /// a database in a read-only directory or on a read-only file system (a CI artifact, a
    /// mounted backup) is read as it is, by root too.
    ///
    /// SQLite reads a WAL database read-only when it can open (or create) the `-shm` file
    /// beside it; in a read-only directory without one, the file is opened as immutable,
    /// which is exact when no write-ahead log holds changes (and nothing can write there);
    /// one that does is [`StoreError::UnreadableLog`]. A database of an older schema is
    /// migrated when it is writable (as [`Store::open`] does), and
    /// [`StoreError::NeedsMigration`] when it is not. The store refuses every write with
    /// [`StoreError::ReadOnly`].
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_read_only_with(path, &OpenOptions::default())
    }

    /// [`Store::open_read_only`] with options.
    pub fn open_read_only_with(
        path: impl AsRef<Path>,
        options: &OpenOptions,
    ) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        check_not_directory(&path)?;
        let db = DbFile {
            path: path.clone(),
            busy_timeout: options.busy_timeout,
        };
        check_length(&path)?;
        if !path.exists() {
            return Err(db.open_err(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
                Some("no such file".into()),
            )));
        }
        let conn = match Self::connect_read_only(&db, "mode=ro") {
            Err(StoreError::Sqlite { sqlite, .. }) if is_cannot_open(&sqlite) => {
                if log_has_changes(&path) {
                    return Err(StoreError::UnreadableLog { path });
                }
                Self::connect_read_only(&db, "immutable=1")?
            }
            other => other?,
        };
        let found = user_version(&conn, &db)?;
        check_not_newer(found, MIGRATIONS, &db)?;
        if found < SCHEMA_VERSION {
            drop(conn);
            return Self::open_with(&path, options).map_err(|e| match e {
                StoreError::ReadOnly { .. } => StoreError::NeedsMigration {
                    path,
                    found,
                    supported: SCHEMA_VERSION,
                },
                e => e,
            });
        }
        Ok(Store { conn, db })
    }

    /// A read-only connection to `db` with the URI parameter `query`, checked by reading the
    /// schema (SQLite opens files lazily).
    fn connect_read_only(db: &DbFile, query: &str) -> Result<Connection, StoreError> {
        use rusqlite::OpenFlags;
        let conn = Connection::open_with_flags(
            sqlite_uri(&db.path, query),
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| db.open_err(e))?;
        conn.busy_timeout(db.busy_timeout)
            .map_err(|e| db.err("setting the busy timeout", e))?;
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
            r.get::<_, i64>(0)
        })
        .map_err(|e| db.err("reading the schema", e))?;
        Ok(conn)
    }

    /// Whether this store only reads (opened with [`Store::open_read_only`], or a file SQLite
    /// could only open read-only).
    pub fn is_read_only(&self) -> bool {
        self.conn
            .is_readonly(rusqlite::DatabaseName::Main)
            .unwrap_or(true)
    }

    /// Whether this process can write the database at `path` (or create it there): the file
    /// and its directory take writes. Root is asked as any user: a read-only file system or
    /// an immutable file says no.
    pub fn is_writable(path: impl AsRef<Path>) -> bool {
        writable(path.as_ref())
    }

    /// A private in-memory database, for tests.
    pub fn open_in_memory() -> Result<Self, StoreError> {
        let path = PathBuf::from(":memory:");
        let conn = Connection::open_in_memory().map_err(|sqlite| StoreError::Open {
            path: path.clone(),
            sqlite,
        })?;
        Self::init(
            conn,
            DbFile {
                path,
                busy_timeout: OpenOptions::default().busy_timeout,
            },
            MIGRATIONS,
        )
    }

    pub(crate) fn init(
        mut conn: Connection,
        db: DbFile,
        steps: &[&str],
    ) -> Result<Self, StoreError> {
        conn.busy_timeout(db.busy_timeout)
            .map_err(|e| db.err("setting the busy timeout", e))?;
        // Check the version before anything writes to the file.
        let found = user_version(&conn, &db)?;
        check_not_newer(found, steps, &db)?;
        // WAL is persistent in the file; on a WAL database this is a no-op.
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))
            .map_err(|e| db.err("switching to WAL mode", e))?;
        // Durable on power loss too: each trial commit reaches the disk before the next trial.
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(|e| db.err("setting synchronous mode", e))?;
        conn.pragma_update(None, "foreign_keys", true)
            .map_err(|e| db.err("enabling foreign keys", e))?;
        migrate(&mut conn, &db, steps)?;
        Ok(Store { conn, db })
    }

    /// The database file (`:memory:` for an in-memory store).
    pub fn path(&self) -> &Path {
        &self.db.path
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        user_version(&self.conn, &self.db)
    }

    /// Records a new run with status `running` and returns its id
    /// (`YYYYMMDD-HHMMSS-xxxxxx` from `started_at` and random bits).
    pub fn create_run(&mut self, run: &NewRun) -> Result<RunId, StoreError> {
        nonempty("scenario_name", &run.scenario_name)?;
        nonempty("tool_version", &run.tool_version)?;
        nonempty("platform", &run.platform)?;
        let host_facts = run.host_facts.to_string();
        for _attempt in 0..8 {
            let id = RunId::new(format!(
                "{}-{:06x}",
                run.started_at.compact(),
                rand::random::<u32>() & 0xff_ffff
            ));
            let inserted = self.conn.execute(
                "INSERT INTO runs (id, scenario_name, scenario_text, seed, status, tool_version,
                                   schema_version, started_at, host_facts, platform,
                                   platform_version)
                 VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    id.as_str(),
                    run.scenario_name,
                    run.scenario_text,
                    run.seed.to_string(),
                    run.tool_version,
                    SCHEMA_VERSION,
                    run.started_at.to_rfc3339(),
                    host_facts,
                    run.platform,
                    run.platform_version,
                ],
            );
            match inserted {
                Ok(_) => return Ok(id),
                Err(e) if is_unique_violation(&e) => continue,
                Err(e) => return Err(self.db.err("creating a run", e)),
            }
        }
        Err(StoreError::InvalidRecord(
            "could not find a free run id after 8 attempts".to_string(),
        ))
    }

    /// Stores a run measured elsewhere (another host's database, sent whole): the run with
    /// its id, status and times, its tenants, facts and trials in plan order, in one
    /// transaction, so a failed import leaves nothing. Refused when a run with this id is
    /// already here ([`StoreError::DuplicateRun`]) or when a record is inconsistent.
    pub fn import_run(&mut self, loaded: &LoadedRun) -> Result<RunId, StoreError> {
        let run = &loaded.run;
        nonempty("scenario_name", &run.scenario_name)?;
        nonempty("tool_version", &run.tool_version)?;
        nonempty("platform", &run.platform)?;
        for t in &loaded.trials {
            validate_trial(t).map_err(StoreError::InvalidRecord)?;
        }
        let db = &self.db;
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| db.err("starting an import", e))?;
        let inserted = tx.execute(
            "INSERT INTO runs (id, scenario_name, scenario_text, seed, status, tool_version,
                               schema_version, started_at, host_facts, platform,
                               platform_version)
             VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                run.id.as_str(),
                run.scenario_name,
                run.scenario_text,
                run.seed.to_string(),
                run.tool_version,
                run.schema_version,
                run.started_at.to_rfc3339(),
                run.host_facts.to_string(),
                run.platform,
                run.platform_version,
            ],
        );
        match inserted {
            Err(e) if is_unique_violation(&e) => {
                return Err(StoreError::DuplicateRun {
                    run: run.id.to_string(),
                    path: db.path.clone(),
                })
            }
            r => r.map_err(|e| db.err("importing a run", e))?,
        };
        for t in &loaded.tenants {
            nonempty("tenant name", &t.name)?;
            tx.execute(
                "INSERT INTO tenants (run_id, name, role, platform, limits)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    run.id.as_str(),
                    t.name,
                    t.role.as_str(),
                    t.platform,
                    t.limits.to_string()
                ],
            )
            .map_err(|e| db.err("importing a tenant", e))?;
        }
        for f in &loaded.facts {
            nonempty("fact scope", &f.scope)?;
            nonempty("fact key", &f.key)?;
            tx.execute(
                "INSERT INTO facts (run_id, scope, key, value) VALUES (?1, ?2, ?3, ?4)",
                params![run.id.as_str(), f.scope, f.key, f.value.to_string()],
            )
            .map_err(|e| db.err("importing a fact", e))?;
        }
        for t in &loaded.trials {
            insert_trial(db, &tx, &run.id, t)?;
        }
        tx.execute(
            "UPDATE runs SET status = ?2, status_reason = ?3, ended_at = ?4 WHERE id = ?1",
            params![
                run.id.as_str(),
                run.status.as_str(),
                run.status_reason,
                run.ended_at.map(|t| t.to_rfc3339())
            ],
        )
        .map_err(|e| db.err("importing a run", e))?;
        tx.commit().map_err(|e| db.err("committing an import", e))?;
        Ok(run.id.clone())
    }

    /// Adds a tenant to a run. Names are unique in a run.
    pub fn add_tenant(&mut self, run: &RunId, tenant: &TenantRecord) -> Result<(), StoreError> {
        nonempty("tenant name", &tenant.name)?;
        nonempty("tenant platform", &tenant.platform)?;
        self.run_status(&self.conn, run)?;
        self.conn
            .execute(
                "INSERT INTO tenants (run_id, name, role, platform, limits)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    run.as_str(),
                    tenant.name,
                    tenant.role.as_str(),
                    tenant.platform,
                    tenant.limits.to_string(),
                ],
            )
            .map_err(|e| {
                if is_unique_violation(&e) {
                    StoreError::DuplicateTenant {
                        run: run.to_string(),
                        tenant: tenant.name.clone(),
                    }
                } else {
                    self.db.err("adding a tenant", e)
                }
            })?;
        Ok(())
    }

    /// Records a fact about the run (host, platform or tenant scope). Recording the same
    /// scope and key again replaces the value: a fact is the latest thing known.
    pub fn record_fact(&mut self, run: &RunId, fact: &Fact) -> Result<(), StoreError> {
        nonempty("fact scope", &fact.scope)?;
        nonempty("fact key", &fact.key)?;
        self.run_status(&self.conn, run)?;
        self.conn
            .execute(
                "INSERT INTO facts (run_id, scope, key, value) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (run_id, scope, key) DO UPDATE SET value = excluded.value",
                params![run.as_str(), fact.scope, fact.key, fact.value.to_string()],
            )
            .map_err(|e| self.db.err("recording a fact", e))?;
        Ok(())
    }

    /// Records one finished trial with its samples, histograms and stressor reports, in one
    /// transaction: after this returns, the trial survives a crash; if it fails, nothing of the
    /// trial was written.
    ///
    /// Refused when the run is unknown or not running, when the trial or a stressor report
    /// names a tenant not added to the run, when a trial with the same key and tenant is already
    /// recorded ([`StoreError::DuplicateTrial`]), or when the record is inconsistent (a
    /// non-finite value, a metric twice, a non-ok status without a reason).
    pub fn record_trial(&mut self, run: &RunId, trial: &TrialRecord) -> Result<(), StoreError> {
        validate_trial(trial).map_err(StoreError::InvalidRecord)?;
        let db = &self.db;
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| db.err("starting a trial transaction", e))?;

        let status = run_status_in(db, &tx, run)?;
        if status != RunStatus::Running {
            return Err(StoreError::RunNotRunning {
                run: run.to_string(),
                status: status.to_string(),
            });
        }
        insert_trial(db, &tx, run, trial)?;
        tx.commit().map_err(|e| db.err("committing a trial", e))
    }

    /// The key and tenant of every trial already recorded for the run, whatever its status. A
    /// resumed run skips exactly these: nothing measured is repeated, nothing is lost.
    pub fn completed_trial_keys(
        &self,
        run: &RunId,
    ) -> Result<BTreeSet<(TrialKey, String)>, StoreError> {
        self.run_status(&self.conn, run)?;
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT round, block, slot, attempt, tenant FROM trials WHERE run_id = ?1",
            )
            .map_err(|e| self.db.err("listing recorded trials", e))?;
        let keys = stmt
            .query_map([run.as_str()], |r| {
                Ok((trial_key_at(r, 0)?, r.get::<_, String>(4)?))
            })
            .and_then(|rows| rows.collect::<Result<BTreeSet<_>, _>>())
            .map_err(|e| self.db.err("listing recorded trials", e))?;
        Ok(keys)
    }

    /// Sets a run's final status (`complete`, `interrupted` or `failed`), with an optional
    /// reason and the end time.
    pub fn finish_run(
        &mut self,
        run: &RunId,
        status: RunStatus,
        reason: Option<&str>,
        ended_at: Timestamp,
    ) -> Result<(), StoreError> {
        if status == RunStatus::Running {
            return Err(StoreError::InvalidRecord(
                "finish_run needs a final status (complete, interrupted or failed); \
                 use resume_run to mark a run running again"
                    .to_string(),
            ));
        }
        let n = self
            .conn
            .execute(
                "UPDATE runs SET status = ?2, status_reason = ?3, ended_at = ?4 WHERE id = ?1",
                params![run.as_str(), status.as_str(), reason, ended_at.to_rfc3339()],
            )
            .map_err(|e| self.db.err("finishing a run", e))?;
        if n == 0 {
            return Err(self.db.unknown_run(run));
        }
        Ok(())
    }

    /// Marks an interrupted or failed run (or one left `running` by a crash) as running again,
    /// clearing its end time and reason, so [`Store::record_trial`] accepts its remaining
    /// trials. A complete run cannot be resumed.
    pub fn resume_run(&mut self, run: &RunId) -> Result<(), StoreError> {
        let status = self.run_status(&self.conn, run)?;
        if status == RunStatus::Complete {
            return Err(StoreError::InvalidRecord(format!(
                "run {run} is complete; there is nothing to resume"
            )));
        }
        self.conn
            .execute(
                "UPDATE runs SET status = 'running', status_reason = NULL, ended_at = NULL
                 WHERE id = ?1",
                [run.as_str()],
            )
            .map_err(|e| self.db.err("resuming a run", e))?;
        Ok(())
    }

    /// Records the process running `run` now (opaque JSON the caller can check for
    /// liveness later): set when a run starts or resumes.
    pub fn claim_run(&mut self, run: &RunId, controller: &str) -> Result<(), StoreError> {
        let n = self
            .conn
            .execute(
                "UPDATE runs SET controller = ?2 WHERE id = ?1",
                params![run.as_str(), controller],
            )
            .map_err(|e| self.db.err("recording a run's controller", e))?;
        if n == 0 {
            return Err(self.db.unknown_run(run));
        }
        Ok(())
    }

    /// The runs whose status is `running`, each with its recorded controller (`None` for
    /// runs from before controllers were recorded).
    pub fn running_runs(&self) -> Result<Vec<(RunId, Option<String>)>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, controller FROM runs WHERE status = 'running' ORDER BY id")
            .map_err(|e| self.db.err("listing running runs", e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    RunId::new(r.get::<_, String>(0)?),
                    r.get::<_, Option<String>>(1)?,
                ))
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.db.err("listing running runs", e))?;
        Ok(rows)
    }

    /// The run that `wanted` names: `latest` (the run started last, the last line of
    /// [`Store::list_runs`]), a whole run id, or the start of one that no other run shares:
    /// of the whole id (`20260101-0930`) or of its last part, the random digits after the
    /// time (`c87b`). Several runs that start so are [`StoreError::AmbiguousRun`], naming
    /// them, newest first; none is [`StoreError::UnknownRun`] ([`StoreError::NoRuns`] for
    /// `latest` in an empty database).
    pub fn resolve_run(&self, wanted: &str) -> Result<RunId, StoreError> {
        /// How many candidates an ambiguous prefix names.
        const SHOWN: usize = 8;
        let db = &self.db;
        let ids: Vec<String> = self
            .conn
            .prepare("SELECT id FROM runs ORDER BY started_at DESC, rowid DESC")
            .and_then(|mut stmt| {
                stmt.query_map([], |r| r.get::<_, String>(0))?
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(|e| db.err("finding a run", e))?;
        if wanted == "latest" {
            return ids
                .into_iter()
                .next()
                .map(RunId::new)
                .ok_or_else(|| StoreError::NoRuns {
                    path: db.path.clone(),
                });
        }
        if ids.iter().any(|id| id == wanted) {
            return Ok(RunId::new(wanted));
        }
        let unknown = || StoreError::UnknownRun {
            path: db.path.clone(),
            run: wanted.to_string(),
        };
        if wanted.is_empty() {
            return Err(unknown());
        }
        let mut found: Vec<String> = ids
            .into_iter()
            .filter(|id| {
                id.starts_with(wanted)
                    || id.rsplit('-').next().is_some_and(|r| r.starts_with(wanted))
            })
            .collect();
        match found.len() {
            0 => Err(unknown()),
            1 => Ok(RunId::new(found.remove(0))),
            n => {
                found.truncate(SHOWN);
                Err(StoreError::AmbiguousRun {
                    path: db.path.clone(),
                    wanted: wanted.to_string(),
                    candidates: found,
                    more: n.saturating_sub(SHOWN),
                })
            }
        }
    }

    /// Every run, oldest first, with trial counts.
    pub fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT r.id, r.scenario_name, r.status, r.started_at, r.ended_at, r.platform,
                        r.seed,
                        (SELECT count(*) FROM trials t WHERE t.run_id = r.id),
                        (SELECT count(*) FROM trials t WHERE t.run_id = r.id AND t.status = 'ok')
                 FROM runs r ORDER BY r.started_at, r.rowid",
            )
            .map_err(|e| self.db.err("listing runs", e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, i64>(7)?,
                    r.get::<_, i64>(8)?,
                ))
            })
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.db.err("listing runs", e))?;
        rows.into_iter()
            .map(
                |(id, scenario_name, status, started, ended, platform, seed, trials, ok)| {
                    Ok(RunSummary {
                        id: RunId::new(id),
                        scenario_name,
                        status: self.parse(&status, "run status")?,
                        started_at: self.time(&started)?,
                        ended_at: ended.map(|e| self.time(&e)).transpose()?,
                        platform,
                        seed: self.parse(&seed, "seed")?,
                        trials: trials as u64,
                        trials_ok: ok as u64,
                    })
                },
            )
            .collect()
    }

    /// Everything stored about a run, read in one snapshot.
    pub fn load_run(&self, run: &RunId) -> Result<LoadedRun, StoreError> {
        let db = &self.db;
        let tx = self
            .conn
            .unchecked_transaction()
            .map_err(|e| db.err("starting a read", e))?;
        let record = self.load_run_record(&tx, run)?;

        let tenants = {
            let mut stmt = tx
                .prepare("SELECT name, role, platform, limits FROM tenants WHERE run_id = ?1 ORDER BY rowid")
                .map_err(|e| db.err("loading tenants", e))?;
            let rows = stmt
                .query_map([run.as_str()], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                    ))
                })
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                .map_err(|e| db.err("loading tenants", e))?;
            rows.into_iter()
                .map(|(name, role, platform, limits)| {
                    Ok(TenantRecord {
                        role: self.parse(&role, "tenant role")?,
                        limits: self.json(&limits, "tenant limits")?,
                        name,
                        platform,
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()?
        };

        let mut samples: HashMap<i64, Vec<SampleRecord>> = HashMap::new();
        {
            let mut stmt = tx
                .prepare(
                    "SELECT s.trial_id, s.metric, s.unit, s.direction, s.value
                     FROM samples s JOIN trials t ON t.id = s.trial_id
                     WHERE t.run_id = ?1 ORDER BY s.rowid",
                )
                .map_err(|e| db.err("loading samples", e))?;
            let rows = stmt
                .query_map([run.as_str()], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, f64>(4)?,
                    ))
                })
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                .map_err(|e| db.err("loading samples", e))?;
            for (trial_id, metric, unit, direction, value) in rows {
                samples.entry(trial_id).or_default().push(SampleRecord {
                    metric,
                    unit,
                    direction: direction
                        .parse()
                        .map_err(|e| db.corrupt(format!("sample direction: {e}")))?,
                    value,
                });
            }
        }

        let mut histograms: HashMap<i64, Vec<HistogramRecord>> = HashMap::new();
        {
            let mut stmt = tx
                .prepare(
                    "SELECT h.trial_id, h.metric, h.encoding, h.data
                     FROM histograms h JOIN trials t ON t.id = h.trial_id
                     WHERE t.run_id = ?1 ORDER BY h.rowid",
                )
                .map_err(|e| db.err("loading histograms", e))?;
            let rows = stmt
                .query_map([run.as_str()], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                    ))
                })
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                .map_err(|e| db.err("loading histograms", e))?;
            for (trial_id, metric, encoding, data) in rows {
                if encoding != HISTOGRAM_ENCODING {
                    return Err(db.corrupt(format!(
                        "histogram of {metric} has encoding {encoding:?}, expected {HISTOGRAM_ENCODING:?}"
                    )));
                }
                histograms
                    .entry(trial_id)
                    .or_default()
                    .push(HistogramRecord {
                        metric,
                        base64: data,
                    });
            }
        }

        let mut reports: HashMap<i64, Vec<StressorReport>> = HashMap::new();
        {
            let mut stmt = tx
                .prepare(
                    "SELECT r.trial_id, r.tenant, r.stressor, r.intensity, r.mode, r.ops, r.ops_per_sec
                     FROM stressor_reports r JOIN trials t ON t.id = r.trial_id
                     WHERE t.run_id = ?1 ORDER BY r.rowid",
                )
                .map_err(|e| db.err("loading stressor reports", e))?;
            let rows = stmt
                .query_map([run.as_str()], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, u8>(3)?,
                        r.get::<_, String>(4)?,
                        r.get::<_, f64>(5)?,
                        r.get::<_, f64>(6)?,
                    ))
                })
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                .map_err(|e| db.err("loading stressor reports", e))?;
            for (trial_id, tenant, stressor, intensity, mode, ops, ops_per_sec) in rows {
                reports.entry(trial_id).or_default().push(StressorReport {
                    tenant,
                    stressor,
                    intensity,
                    mode: self.parse(&mode, "stressor mode")?,
                    ops,
                    ops_per_sec,
                });
            }
        }

        let mut usage: HashMap<i64, Vec<TenantUsageRecord>> = HashMap::new();
        {
            let mut stmt = tx
                .prepare(
                    "SELECT u.trial_id, u.tenant, u.interval_s, u.cpu_some, u.cpu_full,
                            u.memory_some, u.memory_full, u.io_some, u.io_full,
                            u.read_bytes_per_s, u.write_bytes_per_s,
                            u.read_ops_per_s, u.write_ops_per_s
                     FROM tenant_usage u JOIN trials t ON t.id = u.trial_id
                     WHERE t.run_id = ?1 ORDER BY u.rowid",
                )
                .map_err(|e| db.err("loading tenant usage", e))?;
            let rows = stmt
                .query_map([run.as_str()], |r| {
                    let stall = |i: usize| -> rusqlite::Result<Option<StallRecord>> {
                        let full: Option<f64> = r.get(i + 1)?;
                        Ok(r.get::<_, Option<f64>>(i)?
                            .map(|some| StallRecord { some, full }))
                    };
                    Ok((
                        r.get::<_, i64>(0)?,
                        TenantUsageRecord {
                            tenant: r.get(1)?,
                            interval_s: r.get(2)?,
                            cpu: stall(3)?,
                            memory: stall(5)?,
                            io: stall(7)?,
                            read_bytes_per_s: r.get(9)?,
                            write_bytes_per_s: r.get(10)?,
                            read_ops_per_s: r.get(11)?,
                            write_ops_per_s: r.get(12)?,
                        },
                    ))
                })
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                .map_err(|e| db.err("loading tenant usage", e))?;
            for (trial_id, u) in rows {
                usage.entry(trial_id).or_default().push(u);
            }
        }

        let mut details: BTreeMap<i64, TrialDetails> = BTreeMap::new();
        {
            let mut stmt = tx
                .prepare(
                    "SELECT d.trial_id, d.data
                     FROM trial_details d JOIN trials t ON t.id = d.trial_id
                     WHERE t.run_id = ?1",
                )
                .map_err(|e| db.err("loading trial details", e))?;
            let rows = stmt
                .query_map([run.as_str()], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
                })
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                .map_err(|e| db.err("loading trial details", e))?;
            for (trial_id, data) in rows {
                let d: TrialDetails = serde_json::from_str(&data)
                    .map_err(|e| db.corrupt(format!("details of trial {trial_id}: {e}")))?;
                details.insert(trial_id, d);
            }
        }

        let trials = {
            let mut stmt = tx
                .prepare(
                    "SELECT id, round, block, slot, attempt, probe, tenant, condition,
                            repetition, status, reason, started_at, ended_at, load_note
                     FROM trials WHERE run_id = ?1
                     ORDER BY round, block, slot, attempt, plan_seq",
                )
                .map_err(|e| db.err("loading trials", e))?;
            let rows = stmt
                .query_map([run.as_str()], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        trial_key_at(r, 1)?,
                        r.get::<_, String>(5)?,
                        r.get::<_, String>(6)?,
                        r.get::<_, String>(7)?,
                        r.get::<_, u32>(8)?,
                        r.get::<_, String>(9)?,
                        r.get::<_, Option<String>>(10)?,
                        r.get::<_, String>(11)?,
                        r.get::<_, String>(12)?,
                        r.get::<_, Option<String>>(13)?,
                    ))
                })
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                .map_err(|e| db.err("loading trials", e))?;
            rows.into_iter()
                .map(
                    |(
                        id,
                        key,
                        probe,
                        tenant,
                        condition,
                        repetition,
                        status,
                        reason,
                        started,
                        ended,
                        load_note,
                    )| {
                        Ok(TrialRecord {
                            key,
                            probe,
                            tenant,
                            condition: condition.parse::<Condition>().map_err(|e| db.corrupt(e))?,
                            repetition,
                            status: TrialStatus::from_parts(&status, reason)
                                .map_err(|e| db.corrupt(e))?,
                            started_at: self.time(&started)?,
                            ended_at: self.time(&ended)?,
                            load_note,
                            samples: samples.remove(&id).unwrap_or_default(),
                            histograms: histograms.remove(&id).unwrap_or_default(),
                            stressor_reports: reports.remove(&id).unwrap_or_default(),
                            series: Vec::new(),
                            modulation: None,
                            noise: None,
                            mechanism: None,
                            timeline: None,
                            limits: None,
                            tenant_usage: usage.remove(&id).unwrap_or_default(),
                        }
                        .with_details(details.remove(&id)))
                    },
                )
                .collect::<Result<Vec<_>, StoreError>>()?
        };

        let facts = {
            let mut stmt = tx
                .prepare(
                    "SELECT scope, key, value FROM facts WHERE run_id = ?1 ORDER BY scope, key",
                )
                .map_err(|e| db.err("loading facts", e))?;
            let rows = stmt
                .query_map([run.as_str()], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                    ))
                })
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                .map_err(|e| db.err("loading facts", e))?;
            rows.into_iter()
                .map(|(scope, key, value)| {
                    Ok(Fact {
                        value: self.json(&value, "fact value")?,
                        scope,
                        key,
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()?
        };
        tx.finish().map_err(|e| db.err("ending a read", e))?;
        Ok(LoadedRun {
            run: record,
            tenants,
            trials,
            facts,
        })
    }

    fn load_run_record(&self, conn: &Connection, run: &RunId) -> Result<RunRecord, StoreError> {
        let db = &self.db;
        let row = conn
            .query_row(
                "SELECT id, scenario_name, scenario_text, seed, status, status_reason,
                        tool_version, schema_version, started_at, ended_at, host_facts,
                        platform, platform_version
                 FROM runs WHERE id = ?1",
                [run.as_str()],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, String>(4)?,
                        r.get::<_, Option<String>>(5)?,
                        r.get::<_, String>(6)?,
                        r.get::<_, u32>(7)?,
                        r.get::<_, String>(8)?,
                        r.get::<_, Option<String>>(9)?,
                        r.get::<_, String>(10)?,
                        r.get::<_, String>(11)?,
                        r.get::<_, String>(12)?,
                    ))
                },
            )
            .optional()
            .map_err(|e| db.err("loading a run", e))?
            .ok_or_else(|| db.unknown_run(run))?;
        let (
            id,
            scenario_name,
            scenario_text,
            seed,
            status,
            status_reason,
            tool_version,
            schema_version,
            started,
            ended,
            host_facts,
            platform,
            platform_version,
        ) = row;
        Ok(RunRecord {
            id: RunId::new(id),
            scenario_name,
            scenario_text,
            seed: self.parse(&seed, "seed")?,
            status: self.parse(&status, "run status")?,
            status_reason,
            tool_version,
            schema_version,
            started_at: self.time(&started)?,
            ended_at: ended.map(|e| self.time(&e)).transpose()?,
            host_facts: self.json(&host_facts, "host facts")?,
            platform,
            platform_version,
        })
    }

    /// The run's status; [`StoreError::UnknownRun`] if there is no such run.
    fn run_status(&self, conn: &Connection, run: &RunId) -> Result<RunStatus, StoreError> {
        run_status_in(&self.db, conn, run)
    }

    fn parse<T: std::str::FromStr>(&self, text: &str, what: &str) -> Result<T, StoreError>
    where
        T::Err: std::fmt::Display,
    {
        text.parse()
            .map_err(|e| self.db.corrupt(format!("{what} {text:?}: {e}")))
    }

    fn time(&self, text: &str) -> Result<Timestamp, StoreError> {
        Timestamp::parse_rfc3339(text).map_err(|e| self.db.corrupt(e))
    }

    fn json(&self, text: &str, what: &str) -> Result<serde_json::Value, StoreError> {
        serde_json::from_str(text).map_err(|e| self.db.corrupt(format!("{what}: {e}")))
    }
}

/// Writes one trial's rows (the trial, its samples, histograms, stressor reports and details)
/// inside the caller's transaction, after checking that every tenant it names was added.
fn insert_trial(
    db: &DbFile,
    tx: &Connection,
    run: &RunId,
    trial: &TrialRecord,
) -> Result<(), StoreError> {
    let timeline = trial.timeline.iter();
    let tenants: BTreeSet<&str> = std::iter::once(trial.tenant.as_str())
        .chain(trial.stressor_reports.iter().map(|r| r.tenant.as_str()))
        .chain(
            timeline
                .clone()
                .flat_map(|t| t.switches.iter().map(|s| s.tenant.as_str())),
        )
        .chain(timeline.flat_map(|t| t.cpu.iter().map(|c| c.tenant.as_str())))
        .chain(trial.tenant_usage.iter().map(|u| u.tenant.as_str()))
        .collect();
    for tenant in tenants {
        let known: Option<i64> = tx
            .query_row(
                "SELECT 1 FROM tenants WHERE run_id = ?1 AND name = ?2",
                params![run.as_str(), tenant],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| db.err("looking up a tenant", e))?;
        if known.is_none() {
            return Err(StoreError::UnknownTenant {
                run: run.to_string(),
                tenant: tenant.to_string(),
            });
        }
    }
    let duplicate = || StoreError::DuplicateTrial {
        run: run.to_string(),
        key: trial.key,
        tenant: trial.tenant.clone(),
    };
    // `plan_seq` numbers the run's records in the order they were written.
    tx.execute(
        "INSERT INTO trials (run_id, plan_seq, round, block, slot, attempt, probe, tenant,
                             condition, repetition, status, reason, started_at, ended_at,
                             load_note)
         VALUES (?1, (SELECT COALESCE(MAX(plan_seq) + 1, 0) FROM trials WHERE run_id = ?1),
                 ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        params![
            run.as_str(),
            trial.key.round,
            trial.key.block,
            trial.key.slot,
            trial.key.attempt,
            trial.probe,
            trial.tenant,
            trial.condition.to_string(),
            trial.repetition,
            trial.status.as_str(),
            trial.status.reason(),
            trial.started_at.to_rfc3339(),
            trial.ended_at.to_rfc3339(),
            trial.load_note,
        ],
    )
    .map_err(|e| {
        if is_unique_violation(&e) {
            duplicate()
        } else {
            db.err("recording a trial", e)
        }
    })?;
    let trial_id = tx.last_insert_rowid();
    {
        let mut ins = tx
            .prepare_cached(
                "INSERT INTO samples (trial_id, metric, unit, direction, value)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(|e| db.err("recording samples", e))?;
        for s in &trial.samples {
            ins.execute(params![
                trial_id,
                s.metric,
                s.unit,
                s.direction.as_str(),
                s.value
            ])
            .map_err(|e| db.err("recording a sample", e))?;
        }
        let mut ins = tx
            .prepare_cached(
                "INSERT INTO histograms (trial_id, metric, encoding, data)
                 VALUES (?1, ?2, ?3, ?4)",
            )
            .map_err(|e| db.err("recording histograms", e))?;
        for h in &trial.histograms {
            ins.execute(params![trial_id, h.metric, HISTOGRAM_ENCODING, h.base64])
                .map_err(|e| db.err("recording a histogram", e))?;
        }
        let mut ins = tx
            .prepare_cached(
                "INSERT INTO stressor_reports (trial_id, tenant, stressor, intensity, mode,
                                               ops, ops_per_sec)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .map_err(|e| db.err("recording stressor reports", e))?;
        for r in &trial.stressor_reports {
            ins.execute(params![
                trial_id,
                r.tenant,
                r.stressor,
                r.intensity,
                r.mode.as_str(),
                r.ops,
                r.ops_per_sec
            ])
            .map_err(|e| db.err("recording a stressor report", e))?;
        }
        let mut ins = tx
            .prepare_cached(
                "INSERT INTO tenant_usage (trial_id, tenant, interval_s, cpu_some, cpu_full,
                                           memory_some, memory_full, io_some, io_full,
                                           read_bytes_per_s, write_bytes_per_s,
                                           read_ops_per_s, write_ops_per_s)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            )
            .map_err(|e| db.err("recording tenant usage", e))?;
        for u in &trial.tenant_usage {
            let some = |s: Option<StallRecord>| s.map(|s| s.some);
            let full = |s: Option<StallRecord>| s.and_then(|s| s.full);
            ins.execute(params![
                trial_id,
                u.tenant,
                u.interval_s,
                some(u.cpu),
                full(u.cpu),
                some(u.memory),
                full(u.memory),
                some(u.io),
                full(u.io),
                u.read_bytes_per_s,
                u.write_bytes_per_s,
                u.read_ops_per_s,
                u.write_ops_per_s
            ])
            .map_err(|e| db.err("recording a tenant's usage", e))?;
        }
        if !trial.series.is_empty()
            || trial.modulation.is_some()
            || trial.noise.is_some()
            || trial.mechanism.is_some()
            || trial.timeline.is_some()
            || trial.limits.is_some()
        {
            let mut details = serde_json::json!({
                "series": trial.series,
                "modulation": trial.modulation,
                "noise": trial.noise,
            });
            if let Some(m) = &trial.mechanism {
                details["mechanism"] = m.clone();
            }
            if let Some(t) = &trial.timeline {
                details["timeline"] = serde_json::to_value(t).expect("a timeline serializes");
            }
            if let Some(l) = &trial.limits {
                details["limits"] = l.clone();
            }
            tx.execute(
                "INSERT INTO trial_details (trial_id, data) VALUES (?1, ?2)",
                params![trial_id, details.to_string()],
            )
            .map_err(|e| db.err("recording trial details", e))?;
        }
    }
    Ok(())
}

fn run_status_in(db: &DbFile, conn: &Connection, run: &RunId) -> Result<RunStatus, StoreError> {
    let status: Option<String> = conn
        .query_row(
            "SELECT status FROM runs WHERE id = ?1",
            [run.as_str()],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| db.err("looking up a run", e))?;
    let status = status.ok_or_else(|| db.unknown_run(run))?;
    status
        .parse()
        .map_err(|e: String| db.corrupt(format!("run status: {e}")))
}

fn nonempty(what: &str, value: &str) -> Result<(), StoreError> {
    if value.trim().is_empty() {
        return Err(StoreError::InvalidRecord(format!("{what} is empty")));
    }
    Ok(())
}

/// The trial key in the four columns `round, block, slot, attempt` of a row, from `first`.
fn trial_key_at(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<TrialKey> {
    Ok(TrialKey {
        round: r.get(first)?,
        block: r.get(first + 1)?,
        slot: r.get(first + 2)?,
        attempt: r.get(first + 3)?,
    })
}

/// Checks a trial before anything is written, so errors name the field at fault.
fn validate_trial(t: &TrialRecord) -> Result<(), String> {
    let at = |msg: String| format!("trial {} ({} in {}): {msg}", t.key, t.probe, t.tenant);
    if t.probe.trim().is_empty() || t.tenant.trim().is_empty() {
        return Err(at("probe and tenant names must not be empty".into()));
    }
    t.condition.validate().map_err(at)?;
    if let Some(reason) = t.status.reason() {
        if reason.trim().is_empty() {
            return Err(at(format!("status {} needs a reason", t.status.as_str())));
        }
    }
    let mut seen = HashSet::new();
    for s in &t.samples {
        if s.metric.trim().is_empty() || s.unit.trim().is_empty() {
            return Err(at("a sample has an empty metric name or unit".into()));
        }
        if !s.value.is_finite() {
            return Err(at(format!(
                "sample {} is {}; values must be finite",
                s.metric, s.value
            )));
        }
        if !seen.insert(s.metric.as_str()) {
            return Err(at(format!("metric {} appears twice", s.metric)));
        }
    }
    let mut seen = HashSet::new();
    for h in &t.histograms {
        if h.base64.is_empty() {
            return Err(at(format!("histogram of {} is empty", h.metric)));
        }
        if !seen.insert(h.metric.as_str()) {
            return Err(at(format!("histogram of {} appears twice", h.metric)));
        }
    }
    let mut seen = HashSet::new();
    for r in &t.stressor_reports {
        if r.intensity > 100 {
            return Err(at(format!(
                "stressor {} has intensity {} > 100",
                r.stressor, r.intensity
            )));
        }
        if !(r.ops.is_finite() && r.ops >= 0.0 && r.ops_per_sec.is_finite() && r.ops_per_sec >= 0.0)
        {
            return Err(at(format!(
                "stressor {} in {} reports ops {} and ops/s {}; both must be finite and >= 0",
                r.stressor, r.tenant, r.ops, r.ops_per_sec
            )));
        }
        if !seen.insert((r.tenant.as_str(), r.stressor.as_str())) {
            return Err(at(format!(
                "stressor {} in {} reported twice",
                r.stressor, r.tenant
            )));
        }
    }
    if let Some(tl) = &t.timeline {
        validate_timeline(tl).map_err(at)?;
    }
    let mut seen = HashSet::new();
    for u in &t.tenant_usage {
        validate_usage(u).map_err(at)?;
        if !seen.insert(u.tenant.as_str()) {
            return Err(at(format!(
                "the usage of tenant {} appears twice",
                u.tenant
            )));
        }
    }
    Ok(())
}

/// A tenant's usage over a trial: a positive interval, shares within 0..=1 (a `full` only
/// beside its `some`), rates finite and >= 0.
fn validate_usage(u: &TenantUsageRecord) -> Result<(), String> {
    if !(u.interval_s.is_finite() && u.interval_s > 0.0) {
        return Err(format!(
            "the usage of {} covers {} s; the interval must be positive",
            u.tenant, u.interval_s
        ));
    }
    let share = |x: f64| x.is_finite() && (0.0..=1.0).contains(&x);
    for (resource, s) in u.stalls() {
        if let Some(s) = s {
            if !share(s.some) || s.full.is_some_and(|f| !share(f)) {
                return Err(format!(
                    "the {resource} pressure of {} is some {} full {:?}; shares are 0..=1",
                    u.tenant, s.some, s.full
                ));
            }
        }
    }
    for (name, r) in [
        ("read bytes/s", u.read_bytes_per_s),
        ("write bytes/s", u.write_bytes_per_s),
        ("read ops/s", u.read_ops_per_s),
        ("write ops/s", u.write_ops_per_s),
    ] {
        if r.is_some_and(|r| !(r.is_finite() && r >= 0.0)) {
            return Err(format!(
                "the {name} of {} is {r:?}; rates must be finite and >= 0",
                u.tenant
            ));
        }
    }
    Ok(())
}

/// A scheduled trial's switches and CPU series: times in order, values in range.
fn validate_timeline(tl: &crate::model::Timeline) -> Result<(), String> {
    if tl.end_ns < tl.start_ns {
        return Err(format!(
            "timeline ends ({} ns) before it starts ({} ns)",
            tl.end_ns, tl.start_ns
        ));
    }
    for s in &tl.switches {
        if s.intensity > 100 {
            return Err(format!(
                "timeline switch of {} in {} has intensity {} > 100",
                s.stressor, s.tenant, s.intensity
            ));
        }
        if s.done_ns < s.requested_ns {
            return Err(format!(
                "timeline switch of {} in {} is done ({} ns) before it was asked for ({} ns)",
                s.stressor, s.tenant, s.done_ns, s.requested_ns
            ));
        }
        if s.ops_per_sec.is_some_and(|r| !(r.is_finite() && r >= 0.0)) {
            return Err(format!(
                "timeline switch of {} in {} reports a rate that is not finite and >= 0",
                s.stressor, s.tenant
            ));
        }
    }
    for c in &tl.cpu {
        if c.samples.windows(2).any(|w| w[1].at_ns < w[0].at_ns) {
            return Err(format!(
                "the CPU samples of {} are not in time order",
                c.tenant
            ));
        }
    }
    Ok(())
}

/// What `trial_details` holds for one trial.
#[derive(Debug, Default, serde::Deserialize)]
struct TrialDetails {
    #[serde(default)]
    series: Vec<crate::model::SeriesRecord>,
    #[serde(default)]
    modulation: Option<crate::model::Modulation>,
    #[serde(default)]
    noise: Option<serde_json::Value>,
    #[serde(default)]
    mechanism: Option<serde_json::Value>,
    #[serde(default)]
    timeline: Option<crate::model::Timeline>,
    limits: Option<serde_json::Value>,
}

impl TrialRecord {
    fn with_details(mut self, d: Option<TrialDetails>) -> TrialRecord {
        if let Some(d) = d {
            self.series = d.series;
            self.modulation = d.modulation;
            self.noise = d.noise.filter(|n| !n.is_null());
            self.mechanism = d.mechanism.filter(|n| !n.is_null());
            self.timeline = d.timeline;
            self.limits = d.limits.filter(|n| !n.is_null());
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Condition, TrialKey};
    use isobench_common::{Direction, Role};

    fn trial(n: u32) -> TrialRecord {
        TrialRecord {
            key: TrialKey {
                round: n,
                block: 0,
                slot: 0,
                attempt: 0,
            },
            probe: "cpu-int".into(),
            tenant: "victim".into(),
            condition: Condition::Baseline,
            repetition: n,
            status: TrialStatus::Ok,
            started_at: Timestamp::from_unix_millis(1_767_225_600_000),
            ended_at: Timestamp::from_unix_millis(1_767_225_601_000),
            load_note: Some("x".repeat(2000)),
            samples: vec![SampleRecord {
                metric: "ops_per_sec".into(),
                unit: "ops/s".into(),
                direction: Direction::Higher,
                value: 1e9,
            }],
            histograms: Vec::new(),
            stressor_reports: Vec::new(),
            series: Vec::new(),
            modulation: None,
            noise: None,
            mechanism: None,
            timeline: None,
            limits: None,
            tenant_usage: Vec::new(),
        }
    }

    /// Regression: a full disk gave "database or disk is full" without what to do; the
    /// trials stored before it stay readable.
    #[test]
    fn a_full_disk_names_the_database_and_the_fix_and_keeps_what_was_stored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("full.db");
        let mut store = Store::open(&path).unwrap();
        let run = store
            .create_run(&NewRun {
                scenario_name: "s".into(),
                scenario_text: String::new(),
                seed: 1,
                tool_version: "0.1.0".into(),
                started_at: Timestamp::from_unix_millis(1_767_225_600_000),
                host_facts: serde_json::json!({}),
                platform: "cgroup".into(),
                platform_version: "v1".into(),
            })
            .unwrap();
        store
            .add_tenant(
                &run,
                &TenantRecord {
                    name: "victim".into(),
                    role: Role::Victim,
                    platform: "cgroup".into(),
                    limits: serde_json::json!({}),
                },
            )
            .unwrap();
        // The file may not grow past its size now, as on a disk with no room left.
        let pages: i64 = store
            .conn
            .query_row("PRAGMA page_count", [], |r| r.get(0))
            .unwrap();
        store
            .conn
            .pragma_update(None, "max_page_count", pages + 2)
            .unwrap();
        let mut stored = 0;
        let err = loop {
            match store.record_trial(&run, &trial(stored)) {
                Ok(()) => stored += 1,
                Err(e) => break e,
            }
            assert!(stored < 1000, "the database never filled");
        };
        assert!(matches!(err, StoreError::Full { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(msg.contains("is full"), "{msg}");
        assert!(msg.contains("free space"), "{msg}");
        assert!(msg.contains("--db"), "{msg}");
        assert_eq!(
            store.completed_trial_keys(&run).unwrap().len(),
            stored as usize
        );
        assert_eq!(store.load_run(&run).unwrap().trials.len(), stored as usize);
    }
}
