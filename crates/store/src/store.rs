//! [`Store`]: the typed API over the SQLite file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use crate::error::{is_cannot_open, is_unique_violation, StoreError};
use crate::file::{
    check_length, check_not_directory, create_private, log_has_changes, sqlite_uri, writable,
    DbFile,
};
use crate::model::{
    Fact, LoadedRun, NewRun, RunId, RunRecord, RunStatus, RunSummary, TenantRecord, TrialKey,
    TrialRecord,
};
use crate::rows::{self, row_params, Table, KEY_COLUMNS, RUN_COLUMNS};
use crate::schema::{check_not_newer, migrate, user_version, MIGRATIONS, SCHEMA_VERSION};
use crate::time::Timestamp;
use crate::trials::{insert_trial, load_trials};
use crate::validate::{nonempty, validate_trial};

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
        for _attempt in 0..8 {
            let id = RunId::new(format!(
                "{}-{:06x}",
                run.started_at.compact(),
                rand::random::<u32>() & 0xff_ffff
            ));
            match rows::insert_run(&self.conn, &id, run, SCHEMA_VERSION) {
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
        let new = NewRun {
            scenario_name: run.scenario_name.clone(),
            scenario_text: run.scenario_text.clone(),
            seed: run.seed,
            tool_version: run.tool_version.clone(),
            started_at: run.started_at,
            host_facts: run.host_facts.clone(),
            platform: run.platform.clone(),
            platform_version: run.platform_version.clone(),
        };
        match rows::insert_run(&tx, &run.id, &new, run.schema_version) {
            Err(e) if is_unique_violation(&e) => {
                return Err(StoreError::DuplicateRun {
                    run: run.id.to_string(),
                    path: db.path.clone(),
                })
            }
            r => r.map_err(|e| db.err("importing a run", e))?,
        };
        let owner = run.id.as_str();
        for t in &loaded.tenants {
            nonempty("tenant name", &t.name)?;
            tx.execute(&TenantRecord::insert_sql(), row_params(&owner, t))
                .map_err(|e| db.err("importing a tenant", e))?;
        }
        for f in &loaded.facts {
            nonempty("fact scope", &f.scope)?;
            nonempty("fact key", &f.key)?;
            tx.execute(&Fact::insert_sql(), row_params(&owner, f))
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
                &TenantRecord::insert_sql(),
                row_params(&run.as_str(), tenant),
            )
            .map_err(|e| {
                if is_unique_violation(&e) {
                    StoreError::DuplicateTenant {
                        run: run.to_string(),
                        tenant: tenant.name.clone(),
                    }
                } else {
                    self.db.err(TenantRecord::RECORDING, e)
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
                &format!(
                    "{} ON CONFLICT (run_id, scope, key) DO UPDATE SET value = excluded.value",
                    Fact::insert_sql()
                ),
                row_params(&run.as_str(), fact),
            )
            .map_err(|e| self.db.err(Fact::RECORDING, e))?;
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
        let sql = format!("SELECT {KEY_COLUMNS}, tenant FROM trials WHERE run_id = ?1");
        let keys = rows::query(
            &self.db,
            &self.conn,
            "listing recorded trials",
            &sql,
            [run.as_str()],
            |c| Ok((c.key()?, c.get::<String>()?)),
        )?;
        Ok(keys.into_iter().collect())
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
        rows::query(
            &self.db,
            &self.conn,
            "listing runs",
            "SELECT r.id, r.scenario_name, r.status, r.started_at, r.ended_at, r.platform,
                    r.seed,
                    (SELECT count(*) FROM trials t WHERE t.run_id = r.id),
                    (SELECT count(*) FROM trials t WHERE t.run_id = r.id AND t.status = 'ok')
             FROM runs r ORDER BY r.started_at, r.rowid",
            [],
            |c| {
                Ok(RunSummary {
                    id: RunId::new(c.get::<String>()?),
                    scenario_name: c.get()?,
                    status: c.parse("run status")?,
                    started_at: c.time()?,
                    ended_at: c.time_opt()?,
                    platform: c.get()?,
                    seed: c.parse("seed")?,
                    trials: c.get::<i64>()? as u64,
                    trials_ok: c.get::<i64>()? as u64,
                })
            },
        )
    }

    /// Everything stored about a run, read in one snapshot.
    pub fn load_run(&self, run: &RunId) -> Result<LoadedRun, StoreError> {
        let db = &self.db;
        let tx = self
            .conn
            .unchecked_transaction()
            .map_err(|e| db.err("starting a read", e))?;
        let loaded = load_run_in(db, &tx, run)?;
        tx.finish().map_err(|e| db.err("ending a read", e))?;
        Ok(loaded)
    }

    /// The connection and file, for the store's other modules.
    pub(crate) fn parts(&self) -> (&DbFile, &Connection) {
        (&self.db, &self.conn)
    }

    /// The connection and file, writable, for the store's other modules.
    pub(crate) fn parts_mut(&mut self) -> (&DbFile, &mut Connection) {
        (&self.db, &mut self.conn)
    }

    /// The run's status; [`StoreError::UnknownRun`] if there is no such run.
    fn run_status(&self, conn: &Connection, run: &RunId) -> Result<RunStatus, StoreError> {
        run_status_in(&self.db, conn, run)
    }
}

/// Everything stored about a run, read inside the caller's transaction.
pub(crate) fn load_run_in(
    db: &DbFile,
    conn: &Connection,
    run: &RunId,
) -> Result<LoadedRun, StoreError> {
    Ok(LoadedRun {
        run: load_run_record(db, conn, run)?,
        tenants: rows::of_run(db, conn, run, "c.rowid")?,
        trials: load_trials(db, conn, run)?,
        facts: rows::of_run(db, conn, run, "c.scope, c.key")?,
    })
}

/// The run's own row; [`StoreError::UnknownRun`] if there is no such run.
fn load_run_record(db: &DbFile, conn: &Connection, run: &RunId) -> Result<RunRecord, StoreError> {
    let sql = format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1");
    rows::query(
        db,
        conn,
        "loading a run",
        &sql,
        [run.as_str()],
        rows::read_run,
    )?
    .pop()
    .ok_or_else(|| db.unknown_run(run))
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

#[cfg(test)]
mod tests {
    use super::*;
    use isobench_common::Role;

    fn trial(n: u32) -> TrialRecord {
        TrialRecord {
            load_note: Some("x".repeat(2000)),
            ..crate::testdata::trial(n)
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
