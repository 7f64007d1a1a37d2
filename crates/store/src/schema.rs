//! The schema, as a list of forward migrations. `PRAGMA user_version` holds the number of
//! migrations applied; migration `i` takes a database from version `i` to `i + 1`.
//!
//! Rules for changing the schema: never edit a migration that has shipped; append a new one.
//! A database whose version is above [`SCHEMA_VERSION`] is refused, not touched.

use rusqlite::{Connection, TransactionBehavior};

use crate::error::StoreError;
use crate::file::DbFile;

/// Migration 1: the first schema.
///
/// Timestamps are RFC 3339 UTC text with milliseconds; JSON columns are checked with
/// `json_valid`; seeds are decimal text because SQLite integers are signed 64-bit.
const V1: &str = r#"
CREATE TABLE runs (
    id               TEXT PRIMARY KEY,
    scenario_name    TEXT NOT NULL,
    scenario_text    TEXT NOT NULL,
    seed             TEXT NOT NULL,
    status           TEXT NOT NULL
                     CHECK (status IN ('running', 'complete', 'interrupted', 'failed')),
    status_reason    TEXT,
    tool_version     TEXT NOT NULL,
    schema_version   INTEGER NOT NULL,
    started_at       TEXT NOT NULL,
    ended_at         TEXT,
    host_facts       TEXT NOT NULL CHECK (json_valid(host_facts)),
    platform         TEXT NOT NULL,
    platform_version TEXT NOT NULL
) STRICT;

CREATE TABLE tenants (
    run_id   TEXT NOT NULL REFERENCES runs (id),
    name     TEXT NOT NULL,
    role     TEXT NOT NULL CHECK (role IN ('victim', 'aggressor')),
    platform TEXT NOT NULL,
    limits   TEXT NOT NULL CHECK (json_valid(limits)),
    PRIMARY KEY (run_id, name)
) STRICT;

CREATE TABLE trials (
    id         INTEGER PRIMARY KEY,
    run_id     TEXT NOT NULL REFERENCES runs (id),
    plan_seq   INTEGER NOT NULL CHECK (plan_seq >= 0),
    probe      TEXT NOT NULL,
    tenant     TEXT NOT NULL,
    condition  TEXT NOT NULL,
    repetition INTEGER NOT NULL CHECK (repetition >= 0),
    status     TEXT NOT NULL CHECK (status IN ('ok', 'dnr', 'disturbed', 'failed')),
    reason     TEXT CHECK ((status = 'ok') = (reason IS NULL)),
    started_at TEXT NOT NULL,
    ended_at   TEXT NOT NULL,
    load_note  TEXT,
    UNIQUE (run_id, plan_seq),
    FOREIGN KEY (run_id, tenant) REFERENCES tenants (run_id, name)
) STRICT;

CREATE INDEX trials_by_measurement ON trials (run_id, tenant, probe, condition);

CREATE TABLE samples (
    trial_id  INTEGER NOT NULL REFERENCES trials (id),
    metric    TEXT NOT NULL,
    unit      TEXT NOT NULL,
    direction TEXT NOT NULL CHECK (direction IN ('higher', 'lower')),
    value     REAL NOT NULL,
    PRIMARY KEY (trial_id, metric)
) STRICT;

CREATE TABLE histograms (
    trial_id INTEGER NOT NULL REFERENCES trials (id),
    metric   TEXT NOT NULL,
    encoding TEXT NOT NULL,
    data     TEXT NOT NULL,
    PRIMARY KEY (trial_id, metric)
) STRICT;

CREATE TABLE stressor_reports (
    trial_id    INTEGER NOT NULL REFERENCES trials (id),
    tenant      TEXT NOT NULL,
    stressor    TEXT NOT NULL,
    intensity   INTEGER NOT NULL CHECK (intensity BETWEEN 0 AND 100),
    mode        TEXT NOT NULL CHECK (mode IN ('alone', 'contended')),
    ops         REAL NOT NULL,
    ops_per_sec REAL NOT NULL,
    PRIMARY KEY (trial_id, tenant, stressor)
) STRICT;

CREATE TABLE facts (
    run_id TEXT NOT NULL REFERENCES runs (id),
    scope  TEXT NOT NULL,
    key    TEXT NOT NULL,
    value  TEXT NOT NULL CHECK (json_valid(value)),
    PRIMARY KEY (run_id, scope, key)
) STRICT;
"#;

/// Every migration, in order.
/// Version 2: per-trial details of the on/off design and of noise attribution (window
/// series, the aggressors' switches, what disturbed the machine), one JSON document per trial.
const V2: &str = r#"
CREATE TABLE trial_details (
    trial_id INTEGER PRIMARY KEY REFERENCES trials (id),
    data     TEXT NOT NULL CHECK (json_valid(data))
) STRICT;
"#;

/// Version 3: a trial's key in columns of their own (round, block, slot, attempt), unique with
/// the tenant, so a plan has no limit on rounds, blocks, slots, attempts or tenants. Before,
/// the key and the tenant's number were packed into `plan_seq` (10, 8, 8, 2 and 4 bits); the
/// migration unpacks the stored ones. `plan_seq` stays, as the order records were written in.
const V3: &str = r#"
ALTER TABLE trials ADD COLUMN round   INTEGER NOT NULL DEFAULT 0 CHECK (round >= 0);
ALTER TABLE trials ADD COLUMN block   INTEGER NOT NULL DEFAULT 0 CHECK (block >= 0);
ALTER TABLE trials ADD COLUMN slot    INTEGER NOT NULL DEFAULT 0 CHECK (slot >= 0);
ALTER TABLE trials ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0);
UPDATE trials SET round   = plan_seq >> 22,
                  block   = (plan_seq >> 14) & 255,
                  slot    = (plan_seq >> 6) & 255,
                  attempt = (plan_seq >> 4) & 3;
CREATE UNIQUE INDEX trials_by_key ON trials (run_id, round, block, slot, attempt, tenant);
"#;

/// Version 4: who is running a run: the controller process (host, boot, pid, start time) as
/// JSON, written when the run starts or resumes. A run left `running` whose controller is
/// gone was killed, and is marked interrupted by the next command that finds it.
const V4: &str = r#"
ALTER TABLE runs ADD COLUMN controller TEXT CHECK (controller IS NULL OR json_valid(controller));
"#;

/// Version 5: each tenant's pressure stalls and delivered I/O over a trial, one row per
/// trial and tenant: the share of the trial's wall time its tasks were stalled on CPU,
/// memory and I/O (`some` and `full`, pressure-stall information) and the bytes and
/// operations its block I/O was delivered, per second. NULL where the platform has no such
/// counter (cgroup v1 has no per-cgroup pressure), never zero.
const V5: &str = r#"
CREATE TABLE tenant_usage (
    trial_id          INTEGER NOT NULL REFERENCES trials (id),
    tenant            TEXT NOT NULL,
    interval_s        REAL NOT NULL CHECK (interval_s > 0),
    cpu_some          REAL CHECK (cpu_some BETWEEN 0 AND 1),
    cpu_full          REAL CHECK (cpu_full IS NULL
                      OR (cpu_full BETWEEN 0 AND 1 AND cpu_some IS NOT NULL)),
    memory_some       REAL CHECK (memory_some BETWEEN 0 AND 1),
    memory_full       REAL CHECK (memory_full IS NULL
                      OR (memory_full BETWEEN 0 AND 1 AND memory_some IS NOT NULL)),
    io_some           REAL CHECK (io_some BETWEEN 0 AND 1),
    io_full           REAL CHECK (io_full IS NULL
                      OR (io_full BETWEEN 0 AND 1 AND io_some IS NOT NULL)),
    read_bytes_per_s  REAL CHECK (read_bytes_per_s >= 0),
    write_bytes_per_s REAL CHECK (write_bytes_per_s >= 0),
    read_ops_per_s    REAL CHECK (read_ops_per_s >= 0),
    write_ops_per_s   REAL CHECK (write_ops_per_s >= 0),
    PRIMARY KEY (trial_id, tenant)
) STRICT;
"#;

/// The three triggers that drop a run's document when a row of `$table` is added, changed or
/// removed; `$new`, `$both` and `$old` end the `DELETE` with the `WHERE` that finds the run of
/// the row written (`NEW`, `OLD` and `NEW`, `OLD`).
#[rustfmt::skip]
macro_rules! document_triggers {
    ($table:literal, $new:expr, $both:expr, $old:expr) => {
        concat!(
            "CREATE TRIGGER ", $table, "_added AFTER INSERT ON ", $table, "\n",
            "BEGIN DELETE FROM run_documents", $new, " END;\n",
            "CREATE TRIGGER ", $table, "_changed AFTER UPDATE ON ", $table, "\n",
            "BEGIN DELETE FROM run_documents", $both, " END;\n",
            "CREATE TRIGGER ", $table, "_removed AFTER DELETE ON ", $table, "\n",
            "BEGIN DELETE FROM run_documents", $old, " END;\n",
        )
    };
}

/// [`document_triggers`] of a table whose rows name their run in a `run_id` column.
macro_rules! run_row_triggers {
    ($table:literal) => {
        document_triggers!(
            $table,
            " WHERE run_id = NEW.run_id;",
            " WHERE run_id IN (OLD.run_id, NEW.run_id);",
            " WHERE run_id = OLD.run_id;"
        )
    };
}

/// [`document_triggers`] of a table whose rows name their trial in a `trial_id` column.
macro_rules! trial_row_triggers {
    ($table:literal) => {
        document_triggers!(
            $table,
            "\n      WHERE run_id = (SELECT run_id FROM trials WHERE id = NEW.trial_id);",
            concat!(
                "\n      WHERE run_id IN (SELECT run_id FROM trials",
                " WHERE id IN (OLD.trial_id, NEW.trial_id));"
            ),
            "\n      WHERE run_id = (SELECT run_id FROM trials WHERE id = OLD.trial_id);"
        )
    };
}

/// Version 6: each run's results document, stored once so a reader does not analyse the run
/// again (`documents.rs`): the encoded document with the key it was computed under (the id
/// of the analysis code and the fingerprint of the run's rows). Every write to a row the
/// analysis reads drops the run's document in the same transaction (the triggers below), so
/// no path of the store, nor a later migration that rewrites rows, can leave a stale one;
/// the key is checked on every read besides. The run's controller is not read by the
/// analysis, so claiming a run keeps it.
const V6: &str = concat!(
    r#"
CREATE TABLE run_documents (
    run_id      TEXT PRIMARY KEY REFERENCES runs (id),
    code        TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    encoding    TEXT NOT NULL,
    data        BLOB NOT NULL
) STRICT;

CREATE TRIGGER runs_changed AFTER UPDATE OF id, scenario_name, scenario_text, seed, status,
    status_reason, tool_version, schema_version, started_at, ended_at, host_facts, platform,
    platform_version ON runs
BEGIN DELETE FROM run_documents WHERE run_id IN (OLD.id, NEW.id); END;
CREATE TRIGGER runs_removed AFTER DELETE ON runs
BEGIN DELETE FROM run_documents WHERE run_id = OLD.id; END;
"#,
    "\n",
    run_row_triggers!("tenants"),
    "\n",
    run_row_triggers!("facts"),
    "\n",
    run_row_triggers!("trials"),
    "\n",
    trial_row_triggers!("samples"),
    "\n",
    trial_row_triggers!("histograms"),
    "\n",
    trial_row_triggers!("stressor_reports"),
    "\n",
    trial_row_triggers!("trial_details"),
    "\n",
    trial_row_triggers!("tenant_usage"),
);

/// Version 6: each run's results document, stored once so a reader does not analyse the run
/// again (`documents.rs`): the encoded document with the key it was computed under (the id
/// of the analysis code and the fingerprint of the run's rows). Every write to a row the
/// analysis reads drops the run's document in the same transaction (the triggers below), so
/// no path of the store, nor a later migration that rewrites rows, can leave a stale one;
/// the key is checked on every read besides. The run's controller is not read by the
/// analysis, so claiming a run keeps it.
pub(crate) const MIGRATIONS: &[&str] = &[V1, V2, V3, V4, V5, V6];

/// The schema version this build writes and understands: the number of migrations.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Reads `PRAGMA user_version`.
pub(crate) fn user_version(conn: &Connection, db: &DbFile) -> Result<u32, StoreError> {
    conn.pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0))
        .map(|v| v as u32)
        .map_err(|e| db.err("reading the schema version", e))
}

/// Refuses a database newer than `steps` knows.
pub(crate) fn check_not_newer(found: u32, steps: &[&str], db: &DbFile) -> Result<(), StoreError> {
    let supported = steps.len() as u32;
    if found > supported {
        return Err(StoreError::NewerSchema {
            path: db.path.clone(),
            found,
            supported,
        });
    }
    Ok(())
}

/// Brings the database up to `steps.len()`, applying the missing steps in one immediate
/// transaction (so two processes opening a new file at once cannot both migrate it). Returns
/// the version found before migrating.
pub(crate) fn migrate(
    conn: &mut Connection,
    db: &DbFile,
    steps: &[&str],
) -> Result<u32, StoreError> {
    let found = user_version(conn, db)?;
    check_not_newer(found, steps, db)?;
    if found as usize == steps.len() {
        return Ok(found);
    }
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| db.err("starting the schema migration", e))?;
    // Another process may have migrated while we waited for the lock.
    let now = user_version(&tx, db)?;
    check_not_newer(now, steps, db)?;
    for step in &steps[now as usize..] {
        tx.execute_batch(step)
            .map_err(|e| db.err("migrating the schema", e))?;
    }
    tx.pragma_update(None, "user_version", steps.len() as i64)
        .map_err(|e| db.err("setting the schema version", e))?;
    tx.commit()
        .map_err(|e| db.err("committing the schema migration", e))?;
    Ok(found)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rusqlite::Connection;

    use super::*;
    use crate::file::DbFile;
    use crate::store::Store;

    fn db(path: &std::path::Path) -> DbFile {
        DbFile {
            path: path.to_path_buf(),
            busy_timeout: Duration::from_secs(1),
        }
    }

    /// The macros write the triggers of migration 6 as they shipped, to the letter (SQLite
    /// keeps the text of each trigger in the file).
    #[test]
    fn document_triggers_read_as_shipped() {
        let facts = "
CREATE TRIGGER facts_added AFTER INSERT ON facts
BEGIN DELETE FROM run_documents WHERE run_id = NEW.run_id; END;
CREATE TRIGGER facts_changed AFTER UPDATE ON facts
BEGIN DELETE FROM run_documents WHERE run_id IN (OLD.run_id, NEW.run_id); END;
CREATE TRIGGER facts_removed AFTER DELETE ON facts
BEGIN DELETE FROM run_documents WHERE run_id = OLD.run_id; END;
";
        let samples = "
CREATE TRIGGER samples_added AFTER INSERT ON samples
BEGIN DELETE FROM run_documents
      WHERE run_id = (SELECT run_id FROM trials WHERE id = NEW.trial_id); END;
CREATE TRIGGER samples_changed AFTER UPDATE ON samples
BEGIN DELETE FROM run_documents
      WHERE run_id IN (SELECT run_id FROM trials WHERE id IN (OLD.trial_id, NEW.trial_id)); END;
CREATE TRIGGER samples_removed AFTER DELETE ON samples
BEGIN DELETE FROM run_documents
      WHERE run_id = (SELECT run_id FROM trials WHERE id = OLD.trial_id); END;
";
        assert!(V6.contains(facts), "{V6}");
        assert!(V6.contains(samples), "{V6}");
        assert_eq!(V6.matches("CREATE TRIGGER").count(), 2 + 8 * 3);
    }

    #[test]
    fn schema_version_is_the_number_of_migrations() {
        assert_eq!(SCHEMA_VERSION as usize, MIGRATIONS.len());
        let store = Store::open_in_memory().unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    }

    #[test]
    fn later_migrations_apply_forward_and_keep_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        let v1: &[&str] = &["CREATE TABLE t (a INTEGER NOT NULL) STRICT;"];
        let v3: &[&str] = &[
            v1[0],
            "ALTER TABLE t ADD COLUMN b TEXT NOT NULL DEFAULT 'x';",
            "CREATE TABLE u (c INTEGER) STRICT; INSERT INTO u SELECT a FROM t;",
        ];
        {
            let store = Store::init(Connection::open(&path).unwrap(), db(&path), v1).unwrap();
            assert_eq!(store.schema_version().unwrap(), 1);
        }
        {
            let c = Connection::open(&path).unwrap();
            c.execute("INSERT INTO t (a) VALUES (42)", []).unwrap();
        }
        {
            let store = Store::init(Connection::open(&path).unwrap(), db(&path), v3).unwrap();
            assert_eq!(store.schema_version().unwrap(), 3);
        }
        let c = Connection::open(&path).unwrap();
        let (a, b): (i64, String) = c
            .query_row("SELECT a, b FROM t", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap();
        assert_eq!((a, b.as_str()), (42, "x"));
        let copied: i64 = c.query_row("SELECT c FROM u", [], |r| r.get(0)).unwrap();
        assert_eq!(copied, 42);
        drop(c);
        // The older build now refuses the newer file.
        let err = Store::init(Connection::open(&path).unwrap(), db(&path), v1).unwrap_err();
        assert!(
            matches!(
                err,
                crate::StoreError::NewerSchema {
                    found: 3,
                    supported: 1,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    /// A database of schema 2 packed each trial's key and tenant number into `plan_seq`
    /// (round, block, slot, attempt, tenant in 10, 8, 8, 2 and 4 bits); migration 3 unpacks
    /// them, the run loads in plan order, and new records continue after the old ones.
    #[test]
    fn packed_trial_keys_are_unpacked_by_migration_3() {
        use crate::model::{RunId, TrialKey};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v2.db");
        Store::init(
            Connection::open(&path).unwrap(),
            db(&path),
            &MIGRATIONS[..2],
        )
        .unwrap();
        let pack = |round: u32, block: u32, slot: u32, attempt: u32, tenant: u32| {
            (round << 22) | (block << 14) | (slot << 6) | (attempt << 4) | tenant
        };
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(
                "INSERT INTO runs VALUES ('20260101-000000-000001', 'quick', '', '1', 'running',
                     NULL, '0.1.0', 2, '2026-01-01T00:00:00.000Z', NULL, '{}', 'fake', '1');
                 INSERT INTO tenants VALUES ('20260101-000000-000001', 'victim', 'victim',
                     'fake', '{}');
                 INSERT INTO tenants VALUES ('20260101-000000-000001', 'aggressor',
                     'aggressor', 'fake', '{}');",
            )
            .unwrap();
            // Written out of order, as a resumed run may.
            for (seq, tenant) in [
                (pack(1, 0, 0, 0, 0), "victim"),
                (pack(0, 2, 3, 1, 1), "aggressor"),
                (pack(0, 2, 3, 1, 0), "victim"),
                (pack(0, 2, 3, 0, 0), "victim"),
            ] {
                c.execute(
                    "INSERT INTO trials (run_id, plan_seq, probe, tenant, condition, repetition,
                         status, reason, started_at, ended_at)
                     VALUES ('20260101-000000-000001', ?1, 'cpu-int', ?2, 'baseline', 0, 'ok',
                         NULL, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:01.000Z')",
                    rusqlite::params![seq, tenant],
                )
                .unwrap();
            }
        }
        let mut store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        let run = RunId::new("20260101-000000-000001");
        let key = |round, block, slot, attempt| TrialKey {
            round,
            block,
            slot,
            attempt,
        };
        let loaded = store.load_run(&run).unwrap();
        let keys: Vec<(TrialKey, &str)> = loaded
            .trials
            .iter()
            .map(|t| (t.key, t.tenant.as_str()))
            .collect();
        assert_eq!(
            keys,
            vec![
                (key(0, 2, 3, 0), "victim"),
                (key(0, 2, 3, 1), "victim"),
                (key(0, 2, 3, 1), "aggressor"),
                (key(1, 0, 0, 0), "victim"),
            ]
        );
        // Beyond what the packing could hold: round 5000, block 300, attempt 9.
        let mut t = loaded.trials[0].clone();
        t.key = key(5000, 300, 0, 9);
        store.record_trial(&run, &t).unwrap();
        let again = store.record_trial(&run, &t).unwrap_err();
        assert!(
            matches!(again, crate::StoreError::DuplicateTrial { .. }),
            "{again:?}"
        );
        let loaded = store.load_run(&run).unwrap();
        assert_eq!(loaded.trials.last().unwrap().key, key(5000, 300, 0, 9));
    }

    /// A database of schema 4 has no tenant usage: migration 5 adds the table, the old
    /// trials load with none, and a new trial's usage round-trips, a missing figure as NULL.
    #[test]
    fn tenant_usage_arrives_with_migration_5_and_old_trials_load_without_it() {
        use crate::model::{
            Condition, RunId, StallRecord, TenantUsageRecord, TrialKey, TrialStatus,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v4.db");
        Store::init(
            Connection::open(&path).unwrap(),
            db(&path),
            &MIGRATIONS[..4],
        )
        .unwrap();
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(
                "INSERT INTO runs VALUES ('20260101-000000-000001', 'quick', '', '1', 'running',
                     NULL, '0.1.0', 4, '2026-01-01T00:00:00.000Z', NULL, '{}', 'cgroup', 'v1',
                     NULL);
                 INSERT INTO tenants VALUES ('20260101-000000-000001', 'victim', 'victim',
                     'cgroup', '{}');
                 INSERT INTO trials (run_id, plan_seq, probe, tenant, condition, repetition,
                     status, reason, started_at, ended_at)
                 VALUES ('20260101-000000-000001', 0, 'cpu-int', 'victim', 'baseline', 0, 'ok',
                     NULL, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:01.000Z');",
            )
            .unwrap();
        }
        let mut store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        let run = RunId::new("20260101-000000-000001");
        let loaded = store.load_run(&run).unwrap();
        assert_eq!(loaded.trials.len(), 1);
        assert!(loaded.trials[0].tenant_usage.is_empty());

        let mut t = loaded.trials[0].clone();
        t.key = TrialKey { round: 1, ..t.key };
        t.condition = Condition::stressor("memhog", 80);
        t.status = TrialStatus::Ok;
        t.tenant_usage = vec![TenantUsageRecord {
            tenant: "victim".into(),
            interval_s: 1.0,
            cpu: None,
            memory: Some(StallRecord {
                some: 0.4,
                full: None,
            }),
            io: None,
            read_bytes_per_s: None,
            write_bytes_per_s: Some(1e6),
            read_ops_per_s: None,
            write_ops_per_s: Some(250.0),
        }];
        store.record_trial(&run, &t).unwrap();
        let loaded = store.load_run(&run).unwrap();
        assert_eq!(loaded.trials[1].tenant_usage, t.tenant_usage);
        let c = Connection::open(&path).unwrap();
        let (cpu, full): (Option<f64>, Option<f64>) = c
            .query_row("SELECT cpu_some, memory_full FROM tenant_usage", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!((cpu, full), (None, None), "not available is NULL, not 0");
    }

    #[test]
    fn a_failing_migration_leaves_the_database_at_its_old_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.db");
        let v1: &[&str] = &["CREATE TABLE t (a INTEGER) STRICT;"];
        let broken: &[&str] = &[v1[0], "CREATE TABLE ok (x INTEGER); SELECT * FROM missing;"];
        Store::init(Connection::open(&path).unwrap(), db(&path), v1).unwrap();
        assert!(Store::init(Connection::open(&path).unwrap(), db(&path), broken).is_err());
        let c = Connection::open(&path).unwrap();
        let v: u32 = c
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(v, 1);
        let ok_exists: i64 = c
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'ok'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(ok_exists, 0, "the half-applied step was rolled back");
    }
}
