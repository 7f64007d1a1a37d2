//! The results database as the commands open it: for writing, or read-only for the commands
//! that only read it (none creates one), with its errors mapped to exit codes; the run a name
//! stands for and its results; the runs a dead process left `running`, marked interrupted.

use std::path::Path;

use isobench_experiment::orphans;
use isobench_experiment::stored::Trials;
use isobench_store::{RunId, Store};

use crate::exit::{bad_input, store_error};

/// Opens the results database, turning its errors into exit codes: a newer schema or a file
/// that is not a database is bad input; a lock held by another writer is a failure. Nothing
/// is modified in either case.
pub fn open_store(path: &Path) -> anyhow::Result<Store> {
    Store::open(path).map_err(store_error)
}

/// The database at `path` for a command that only reads it: opened read-only, so a
/// database in a read-only directory or file system is read as it is (docs/cli.md).
pub(crate) fn existing_store(path: &Path) -> anyhow::Result<Store> {
    if !path.exists() && !path.is_symlink() {
        return Err(bad_input(format!(
            "there is no isobench database at {}; `isobench run` creates one, or pass --db FILE \
             (or set ISOBENCH_DB)",
            path.display()
        )));
    }
    Store::open_read_only(path).map_err(store_error)
}

/// The run `wanted` names in `store`: `latest`, a whole id, or a prefix only one run has
/// (of the id, or of its random last part).
pub(crate) fn find_run(store: &Store, wanted: &str) -> anyhow::Result<RunId> {
    store.resolve_run(wanted).map_err(store_error)
}

/// Loads and analyzes stored run `id` (`latest`, an id or a unique prefix) from database
/// `db` (which must exist), with its trials when `trials` asks for them.
pub fn load(db: &Path, id: &str, trials: Trials) -> anyhow::Result<isobench_experiment::Results> {
    let store = existing_store(db)?;
    let id = find_run(&store, id)?;
    isobench_experiment::stored::with_linked(&store, id.as_str(), trials).map_err(store_error)
}

/// A stored run's results alone, without the table of the runs linked with it (each run of
/// a comparison is one column; the set's table would be analysed again for every run).
pub fn load_alone(store: &Store, id: &RunId) -> anyhow::Result<isobench_experiment::Results> {
    isobench_experiment::stored::analyzed(store, id.as_str(), Trials::Left).map_err(store_error)
}

/// Marks the runs of the database `db` whose controller died as interrupted (nothing when
/// there is no database yet).
pub fn mark_orphans_of(db: &Path) -> anyhow::Result<Vec<orphans::Orphan>> {
    if !db.exists() {
        return Ok(Vec::new());
    }
    let mut store = open_store(db)?;
    orphans::mark_orphans(&mut store).map_err(store_error)
}
