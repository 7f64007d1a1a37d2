//! Each run's results document, stored once so that a reader (`show`, `report`, `export`,
//! the web server) does not analyse the run again from its raw rows: the bootstrap of a
//! run's analysis costs far more than reading a document back.
//!
//! The store does not know the document's type: it keeps bytes and the name of their
//! encoding, under a key of two parts, and gives them back only when both still hold:
//! - the id of the code that computed it (the caller's: a change of the analysis makes
//!   every stored document unreadable);
//! - the fingerprint of the run's rows the analysis reads ([`Store::run_fingerprint`]).
//!
//! A stale document is worse than none (a number that looks precise but is wrong), so it is
//! kept out three ways: every write to those rows drops the run's document in the same
//! transaction (triggers of migration 6, whatever path or program writes), the fingerprint
//! is checked again on every read, and a document is stored only if the rows it was
//! computed from are still the run's rows ([`Store::store_document`]).

use rusqlite::blob::Blob;
use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, DatabaseName, OptionalExtension, TransactionBehavior};
use sha2::{Digest, Sha256};

use crate::error::StoreError;
use crate::file::DbFile;
use crate::model::{LoadedRun, RunId};
use crate::rows::RUN_COLUMNS;
use crate::store::{load_run_in, Store};

/// A stored document's bytes, read in pieces ([`Store::with_document`]).
pub struct DocumentBytes<'a> {
    blob: Blob<'a>,
}

impl DocumentBytes<'_> {
    /// The document's length in bytes.
    pub fn len(&self) -> usize {
        self.blob.len()
    }

    /// Whether the document is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes in `range`; `None` when it reaches past the end or they cannot be read.
    pub fn read(&self, range: std::ops::Range<usize>) -> Option<Vec<u8>> {
        if range.start > range.end || range.end > self.len() {
            return None;
        }
        let mut buf = vec![0; range.len()];
        self.blob.read_at_exact(&mut buf, range.start).ok()?;
        Some(buf)
    }
}

/// The tables of a run's trials (`trial_id`), fingerprinted by how many rows they hold and
/// the last one (they are written only with their trial; a change in place drops the
/// document by trigger).
const TRIAL_TABLES: &[&str] = &[
    "samples",
    "histograms",
    "stressor_reports",
    "trial_details",
    "tenant_usage",
];

/// The queries whose rows make a run's fingerprint (`?1` the run), in order.
fn fingerprint_queries() -> Vec<String> {
    let mut q = vec![
        // Every column but `controller` (who runs it; the analysis does not read it).
        format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"),
        "SELECT * FROM tenants WHERE run_id = ?1 ORDER BY rowid".to_string(),
        "SELECT * FROM facts WHERE run_id = ?1 ORDER BY scope, key".to_string(),
        "SELECT * FROM trials WHERE run_id = ?1 ORDER BY id".to_string(),
    ];
    q.extend(TRIAL_TABLES.iter().map(|t| {
        format!(
            "SELECT count(*), max(c.rowid) FROM {t} c JOIN trials t ON t.id = c.trial_id
             WHERE t.run_id = ?1"
        )
    }));
    q
}

/// The fingerprint of `run`'s rows in `conn` (inside the caller's transaction): SHA-256 of
/// every value the queries give, typed and length-prefixed, as hex.
fn fingerprint_in(db: &DbFile, conn: &Connection, run: &RunId) -> Result<String, StoreError> {
    const CONTEXT: &str = "fingerprinting a run";
    let mut h = Sha256::new();
    for sql in fingerprint_queries() {
        h.update((sql.len() as u64).to_le_bytes());
        h.update(sql.as_bytes());
        let mut stmt = conn.prepare_cached(&sql).map_err(|e| db.err(CONTEXT, e))?;
        let columns = stmt.column_count();
        let mut rows = stmt.query([run.as_str()]).map_err(|e| db.err(CONTEXT, e))?;
        while let Some(row) = rows.next().map_err(|e| db.err(CONTEXT, e))? {
            h.update([b'r']);
            for i in 0..columns {
                match row.get_ref(i).map_err(|e| db.err(CONTEXT, e))? {
                    ValueRef::Null => h.update([0]),
                    ValueRef::Integer(v) => {
                        h.update([1]);
                        h.update(v.to_le_bytes());
                    }
                    ValueRef::Real(v) => {
                        h.update([2]);
                        h.update(v.to_bits().to_le_bytes());
                    }
                    ValueRef::Text(b) | ValueRef::Blob(b) => {
                        h.update([3]);
                        h.update((b.len() as u64).to_le_bytes());
                        h.update(b);
                    }
                }
            }
        }
    }
    Ok(format!("{:x}", h.finalize()))
}

impl Store {
    /// The fingerprint of everything stored for `run` that its analysis reads: its row (but
    /// the controller), tenants, facts and trials whole, and the rows of its trials' tables
    /// counted with their last row id. Any write through the store changes it or drops
    /// the run's document.
    pub fn run_fingerprint(&self, run: &RunId) -> Result<String, StoreError> {
        let (db, conn) = self.parts();
        fingerprint_in(db, conn, run)
    }

    /// [`Store::load_run`] with the fingerprint of what was read (one snapshot): the key a
    /// document computed from the run is stored under.
    pub fn load_run_keyed(&self, run: &RunId) -> Result<(LoadedRun, String), StoreError> {
        let (db, conn) = self.parts();
        let tx = conn
            .unchecked_transaction()
            .map_err(|e| db.err("starting a read", e))?;
        let loaded = load_run_in(db, &tx, run)?;
        let fingerprint = fingerprint_in(db, &tx, run)?;
        tx.finish().map_err(|e| db.err("ending a read", e))?;
        Ok((loaded, fingerprint))
    }

    /// The document stored for `run`, when it was computed by `code`, encoded as
    /// `encoding`, from the rows the run has now; `None` otherwise.
    pub fn document(
        &self,
        run: &RunId,
        code: &str,
        encoding: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .with_document(run, code, encoding, |d| d.read(0..d.len()))?
            .flatten())
    }

    /// What `read` makes of the document stored for `run` (under the key of
    /// [`Store::document`]), given its bytes to read in pieces, so a reader that needs part
    /// of a large document reads that part alone; `None` when no document holds.
    pub fn with_document<T>(
        &self,
        run: &RunId,
        code: &str,
        encoding: &str,
        read: impl FnOnce(&DocumentBytes<'_>) -> T,
    ) -> Result<Option<T>, StoreError> {
        let (db, conn) = self.parts();
        let tx = conn
            .unchecked_transaction()
            .map_err(|e| db.err("starting a read", e))?;
        let stored: Option<(i64, String)> = tx
            .query_row(
                "SELECT rowid, fingerprint FROM run_documents
                 WHERE run_id = ?1 AND code = ?2 AND encoding = ?3",
                params![run.as_str(), code, encoding],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| db.err("reading a run's document", e))?;
        let found = match stored {
            Some((rowid, fingerprint)) if fingerprint == fingerprint_in(db, &tx, run)? => {
                let blob = tx
                    .blob_open(DatabaseName::Main, "run_documents", "data", rowid, true)
                    .map_err(|e| db.err("reading a run's document", e))?;
                Some(read(&DocumentBytes { blob }))
            }
            _ => None,
        };
        tx.finish().map_err(|e| db.err("ending a read", e))?;
        Ok(found)
    }

    /// Stores `data` as `run`'s document, computed by `code` from the rows whose
    /// fingerprint is `fingerprint` (from [`Store::load_run_keyed`]), replacing the one
    /// stored before. Nothing is stored when the run's rows have changed since (`false`).
    pub fn store_document(
        &mut self,
        run: &RunId,
        code: &str,
        fingerprint: &str,
        encoding: &str,
        data: &[u8],
    ) -> Result<bool, StoreError> {
        let (db, conn) = self.parts_mut();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| db.err("starting to store a run's document", e))?;
        if fingerprint_in(db, &tx, run)? != fingerprint {
            return Ok(false);
        }
        tx.execute(
            "INSERT OR REPLACE INTO run_documents (run_id, code, fingerprint, encoding, data)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![run.as_str(), code, fingerprint, encoding, data],
        )
        .map_err(|e| db.err("storing a run's document", e))?;
        tx.commit()
            .map_err(|e| db.err("committing a run's document", e))?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Fact, NewRun, RunStatus, TenantRecord};
    use crate::testdata::trial;
    use crate::time::Timestamp;
    use isobench_common::Role;

    /// The tables of a run's own rows (`run_id`, or the run itself), fingerprinted whole
    /// by the first queries of [`fingerprint_queries`].
    const RUN_TABLES: &[&str] = &["runs", "tenants", "facts", "trials"];

    const CODE: &str = "code-1";
    const ENC: &str = "test";

    fn new_run() -> NewRun {
        NewRun {
            scenario_name: "s".into(),
            scenario_text: String::new(),
            seed: 1,
            tool_version: "0.1.0".into(),
            started_at: Timestamp::from_unix_millis(1_767_225_600_000),
            host_facts: serde_json::json!({}),
            platform: "fake".into(),
            platform_version: "1".into(),
        }
    }

    fn tenant(name: &str) -> TenantRecord {
        TenantRecord {
            name: name.into(),
            role: Role::Victim,
            platform: "fake".into(),
            limits: serde_json::json!({}),
        }
    }

    fn fact(key: &str, value: serde_json::Value) -> Fact {
        Fact {
            scope: "run".into(),
            key: key.into(),
            value,
        }
    }

    /// A running run with a tenant and a trial.
    fn store_with_run() -> (Store, RunId) {
        let mut store = Store::open_in_memory().unwrap();
        let run = store.create_run(&new_run()).unwrap();
        store.add_tenant(&run, &tenant("victim")).unwrap();
        store.record_trial(&run, &trial(0)).unwrap();
        (store, run)
    }

    /// Stores a document for `run` as it is now.
    fn remember(store: &mut Store, run: &RunId) {
        let (_, fp) = store.load_run_keyed(run).unwrap();
        assert!(store.store_document(run, CODE, &fp, ENC, b"doc").unwrap());
        assert_eq!(
            store.document(run, CODE, ENC).unwrap().as_deref(),
            Some(&b"doc"[..])
        );
    }

    /// How many documents are stored.
    fn documents(store: &Store) -> i64 {
        store
            .parts()
            .1
            .query_row("SELECT count(*) FROM run_documents", [], |r| r.get(0))
            .unwrap()
    }

    /// After `prepare` then `write`, the document stored between them is gone (dropped,
    /// and its key no longer holds: the fingerprint has changed).
    fn check_write_forgets(
        what: &str,
        prepare: impl FnOnce(&mut Store, &RunId),
        write: impl FnOnce(&mut Store, &RunId),
    ) {
        let (mut store, run) = store_with_run();
        prepare(&mut store, &run);
        remember(&mut store, &run);
        let before = store.run_fingerprint(&run).unwrap();
        write(&mut store, &run);
        assert_eq!(store.document(&run, CODE, ENC).unwrap(), None, "{what}");
        assert_eq!(
            documents(&store),
            0,
            "{what}: the trigger drops the document"
        );
        assert_ne!(store.run_fingerprint(&run).unwrap(), before, "{what}");
    }

    #[test]
    fn a_document_is_read_back_only_under_its_key() {
        let (mut store, run) = store_with_run();
        remember(&mut store, &run);
        assert_eq!(store.document(&run, "code-2", ENC).unwrap(), None);
        assert_eq!(store.document(&run, CODE, "other").unwrap(), None);
        let other = store.create_run(&new_run()).unwrap();
        assert_eq!(store.document(&other, CODE, ENC).unwrap(), None);
        // Another run's writes leave it.
        store.add_tenant(&other, &tenant("victim")).unwrap();
        store.record_trial(&other, &trial(0)).unwrap();
        assert!(store.document(&run, CODE, ENC).unwrap().is_some());
    }

    #[test]
    fn every_write_path_of_a_run_drops_its_document_and_changes_its_fingerprint() {
        let nothing = |_: &mut Store, _: &RunId| {};
        check_write_forgets("record_trial", nothing, |s, r| {
            s.record_trial(r, &trial(1)).unwrap()
        });
        check_write_forgets("add_tenant", nothing, |s, r| {
            s.add_tenant(r, &tenant("other")).unwrap()
        });
        check_write_forgets("record_fact (new)", nothing, |s, r| {
            s.record_fact(r, &fact("a", serde_json::json!(1))).unwrap()
        });
        check_write_forgets(
            "record_fact (replaced)",
            |s, r| s.record_fact(r, &fact("a", serde_json::json!(1))).unwrap(),
            |s, r| s.record_fact(r, &fact("a", serde_json::json!(2))).unwrap(),
        );
        check_write_forgets("finish_run", nothing, |s, r| {
            s.finish_run(r, RunStatus::Complete, None, Timestamp::now())
                .unwrap()
        });
        check_write_forgets(
            "resume_run",
            |s, r| {
                s.finish_run(r, RunStatus::Interrupted, Some("x"), Timestamp::now())
                    .unwrap()
            },
            |s, r| s.resume_run(r).unwrap(),
        );
    }

    /// A write outside the store's API (another program, a later migration) to a row of
    /// the run's trials keeps the counts the fingerprint reads: the trigger drops it.
    #[test]
    fn a_row_changed_in_place_drops_the_document() {
        let (mut store, run) = store_with_run();
        remember(&mut store, &run);
        store
            .parts()
            .1
            .execute(
                "UPDATE samples SET value = 2e9 WHERE trial_id IN
                     (SELECT id FROM trials WHERE run_id = ?1)",
                [run.as_str()],
            )
            .unwrap();
        assert_eq!(documents(&store), 0);
    }

    #[test]
    fn claiming_a_run_keeps_its_document() {
        let (mut store, run) = store_with_run();
        remember(&mut store, &run);
        store.claim_run(&run, "{\"pid\": 1}").unwrap();
        assert!(store.document(&run, CODE, ENC).unwrap().is_some());
    }

    #[test]
    fn an_imported_run_has_no_document_and_the_same_fingerprint() {
        let (mut store, run) = store_with_run();
        store
            .finish_run(&run, RunStatus::Complete, None, Timestamp::now())
            .unwrap();
        let loaded = store.load_run(&run).unwrap();
        let mut other = Store::open_in_memory().unwrap();
        other.import_run(&loaded).unwrap();
        assert_eq!(other.document(&run, CODE, ENC).unwrap(), None);
        let (again, fp) = other.load_run_keyed(&run).unwrap();
        assert_eq!(again, loaded);
        assert!(other.store_document(&run, CODE, &fp, ENC, b"d").unwrap());
    }

    #[test]
    fn a_document_of_rows_changed_since_is_not_stored() {
        let (mut store, run) = store_with_run();
        let (_, fp) = store.load_run_keyed(&run).unwrap();
        store.record_trial(&run, &trial(1)).unwrap();
        assert!(!store.store_document(&run, CODE, &fp, ENC, b"old").unwrap());
        assert_eq!(store.document(&run, CODE, ENC).unwrap(), None);
    }

    /// A table added to the schema is a table the analysis may read: it must be
    /// fingerprinted and drop the document when written (or this test says which).
    #[test]
    fn every_table_is_fingerprinted_and_drops_the_document_when_written() {
        let store = Store::open_in_memory().unwrap();
        let conn = store.parts().1;
        let names = |sql: &str| -> Vec<String> {
            let mut stmt = conn.prepare(sql).unwrap();
            let rows = stmt.query_map([], |r| r.get(0)).unwrap();
            rows.collect::<Result<_, _>>().unwrap()
        };
        let tables = names(
            "SELECT name FROM sqlite_master WHERE type = 'table'
             AND name NOT LIKE 'sqlite_%' AND name != 'run_documents' ORDER BY name",
        );
        let triggers = names("SELECT name FROM sqlite_master WHERE type = 'trigger'");
        for t in &tables {
            assert!(
                RUN_TABLES.contains(&t.as_str()) || TRIAL_TABLES.contains(&t.as_str()),
                "table {t} is not in the run's fingerprint (documents.rs)"
            );
            let events: &[&str] = if t == "runs" {
                &["changed", "removed"]
            } else {
                &["added", "changed", "removed"]
            };
            for e in events {
                let name = format!("{t}_{e}");
                assert!(triggers.contains(&name), "no trigger {name} (schema.rs)");
            }
        }
        assert_eq!(tables.len(), RUN_TABLES.len() + TRIAL_TABLES.len());
    }
}
