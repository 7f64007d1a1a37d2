//! A trial's rows: written together inside the caller's transaction, and read back for a whole
//! run with one query per table (never one per trial).

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{is_unique_violation, StoreError};
use crate::file::DbFile;
use crate::model::{RunId, TrialRecord};
use crate::rows::{self, columns, insert_all, row_params, Table, TrialDetails};

/// Writes one trial's rows (the trial, its samples, histograms, stressor reports, usage and
/// details) inside the caller's transaction, after checking that every tenant it names was
/// added.
pub(crate) fn insert_trial(
    db: &DbFile,
    tx: &Connection,
    run: &RunId,
    trial: &TrialRecord,
) -> Result<(), StoreError> {
    check_tenants(db, tx, run, trial)?;
    tx.prepare_cached(&TrialRecord::insert_sql())
        .and_then(|mut ins| ins.execute(row_params(&run.as_str(), trial)))
        .map_err(|e| {
            if is_unique_violation(&e) {
                StoreError::DuplicateTrial {
                    run: run.to_string(),
                    key: trial.key,
                    tenant: trial.tenant.clone(),
                }
            } else {
                db.err(TrialRecord::RECORDING, e)
            }
        })?;
    let trial_id = tx.last_insert_rowid();
    insert_all(db, tx, &trial_id, &trial.samples)?;
    insert_all(db, tx, &trial_id, &trial.histograms)?;
    insert_all(db, tx, &trial_id, &trial.stressor_reports)?;
    insert_all(db, tx, &trial_id, &trial.tenant_usage)?;
    if let Some(details) = TrialDetails::of(trial) {
        tx.execute(
            "INSERT INTO trial_details (trial_id, data) VALUES (?1, ?2)",
            params![trial_id, details],
        )
        .map_err(|e| db.err("recording trial details", e))?;
    }
    Ok(())
}

/// Refuses a trial that names a tenant (as its own, in a stressor report, its timeline or its
/// usage) not added to the run.
fn check_tenants(
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
    let mut known = tx
        .prepare_cached("SELECT 1 FROM tenants WHERE run_id = ?1 AND name = ?2")
        .map_err(|e| db.err("looking up a tenant", e))?;
    for tenant in tenants {
        let found: Option<i64> = known
            .query_row(params![run.as_str(), tenant], |r| r.get(0))
            .optional()
            .map_err(|e| db.err("looking up a tenant", e))?;
        if found.is_none() {
            return Err(StoreError::UnknownTenant {
                run: run.to_string(),
                tenant: tenant.to_string(),
            });
        }
    }
    Ok(())
}

/// Every trial of the run in plan order, each with the rows of the tables that belong to it.
pub(crate) fn load_trials(
    db: &DbFile,
    tx: &Connection,
    run: &RunId,
) -> Result<Vec<TrialRecord>, StoreError> {
    let mut samples = rows::of_trials(db, tx, run)?;
    let mut histograms = rows::of_trials(db, tx, run)?;
    let mut reports = rows::of_trials(db, tx, run)?;
    let mut usage = rows::of_trials(db, tx, run)?;
    let mut details = load_details(db, tx, run)?;
    let sql = format!(
        "SELECT t.id, {} FROM trials t WHERE t.run_id = ?1
         ORDER BY t.round, t.block, t.slot, t.attempt, t.plan_seq",
        columns::<TrialRecord>("t")
    );
    rows::query(db, tx, TrialRecord::LOADING, &sql, [run.as_str()], |c| {
        let id: i64 = c.get()?;
        let mut trial = TrialRecord::read(c)?;
        trial.samples = samples.remove(&id).unwrap_or_default();
        trial.histograms = histograms.remove(&id).unwrap_or_default();
        trial.stressor_reports = reports.remove(&id).unwrap_or_default();
        trial.tenant_usage = usage.remove(&id).unwrap_or_default();
        if let Some(d) = details.remove(&id) {
            d.fill(&mut trial);
        }
        Ok(trial)
    })
}

/// The `trial_details` of the run's trials, by trial id.
fn load_details(
    db: &DbFile,
    tx: &Connection,
    run: &RunId,
) -> Result<BTreeMap<i64, TrialDetails>, StoreError> {
    const LOADING: &str = "loading trial details";
    let rows = rows::query(
        db,
        tx,
        LOADING,
        "SELECT d.trial_id, d.data
         FROM trial_details d JOIN trials t ON t.id = d.trial_id
         WHERE t.run_id = ?1",
        [run.as_str()],
        |c| Ok((c.get::<i64>()?, c.get::<String>()?)),
    )?;
    rows.into_iter()
        .map(|(id, data)| Ok((id, TrialDetails::parse(db, id, &data)?)))
        .collect()
}
