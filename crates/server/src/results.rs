//! Reading stored runs for the API: the list with each run's headline, one run's details, its
//! report and exports, and comparisons. Everything goes through the same library functions as
//! `isobench runs`, `show`, `report`, `export` and `compare`, so a run reads the same in the
//! browser as in the terminal. The database is opened per request (WAL: a reader never blocks
//! the writing run); analysing a run is costly, so each finished run's facts are cached by
//! (run id, end time).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Mutex;

use isobench_experiment::stored::{
    analyzed, cross_section, fleet_link, fleet_section, linked, with_linked, FleetLink, Trials,
};
use isobench_experiment::Results;
use isobench_report::compare::{comparison_markdown, render_comparison};
use isobench_report::{html_report, serialize, Format, Style};
use isobench_results::compare::RunComparison;
use isobench_results::Section;
use isobench_store::{RunStatus, RunSummary, Store, StoreError};
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::ApiError;

/// A run's headline as the API, the runs list and `/metrics` give it: the figures of
/// [`isobench_results::Headline`], the same that `isobench show` prints first.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Headline {
    /// What `value` is: `worst significant victim degradation`.
    pub label: String,
    /// The worst resource's figure, percent (one decimal): its significant degradation, or
    /// 100 when a victim stopped answering; `None` when no resource has either.
    pub value: Option<f64>,
    /// The unit of `value`: `%`.
    pub unit: String,
    /// The worst resource (`disk`), when there is one.
    pub resource: Option<String>,
    /// The headline in one line, as the runs list shows it.
    pub text: String,
    /// Every resource measured in a victim, worst first.
    pub resources: Vec<ResourceHeadline>,
    /// How the figures were chosen.
    pub rule: String,
}

/// One resource of a [`Headline`].
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ResourceHeadline {
    /// The victim probe's class: cpu, cache, memory, disk, net, process, app or other.
    pub resource: String,
    /// `dnr`, `loss`, `flagged_loss`, `no_significant_loss` or `no_result`.
    pub verdict: String,
    /// The figure as shown: `+96.9%`, `+11.3%?` (flagged), `n.s. (+1.2%)`, `DNR`.
    pub figure: String,
    /// The figure an alert compares, percent (one decimal): the significant degradation, 0
    /// when none is significant, 100 for a DNR.
    pub loss_pct: Option<f64>,
    /// The cell behind the figure: its degradation, percent.
    pub estimate: Option<f64>,
    /// The cell's own interval (not adjusted for the run's other comparisons).
    pub lower: Option<f64>,
    /// See `lower`.
    pub upper: Option<f64>,
    /// The p-value behind the significance after the run's correction for multiple
    /// comparisons; `None` when the cell was tested alone.
    pub p_adjusted: Option<f64>,
    /// `tenant probe metric under condition`.
    pub cell: Option<String>,
    /// Everything said beside the figure, as `isobench show` prints it.
    pub detail: String,
}

impl Headline {
    /// The API's view of a run's headline.
    pub fn of(h: &isobench_results::Headline) -> Headline {
        let worst = h.worst();
        Headline {
            label: "worst significant victim degradation".into(),
            value: worst.and_then(|w| w.loss_pct()).map(round1),
            unit: "%".into(),
            resource: worst.map(|w| w.resource.clone()),
            text: h.summary(),
            resources: h
                .resources
                .iter()
                .map(|x| {
                    let c = x.dnr_cell.as_ref().or(x.cell.as_ref());
                    ResourceHeadline {
                        resource: x.resource.clone(),
                        verdict: x.verdict.as_str().into(),
                        figure: x.figure(),
                        loss_pct: x.loss_pct().map(round1),
                        estimate: x.cell.as_ref().and_then(|c| c.estimate),
                        lower: x.cell.as_ref().and_then(|c| c.lower),
                        upper: x.cell.as_ref().and_then(|c| c.upper),
                        p_adjusted: x.cell.as_ref().and_then(|c| c.p_adjusted),
                        cell: c.map(|c| c.place(true)),
                        detail: x.detail(),
                    }
                })
                .collect(),
            rule: h.rule.clone(),
        }
    }
}

/// A stored run, as listed.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RunView {
    /// Run id.
    pub id: String,
    /// Scenario name.
    pub scenario: String,
    /// Experiment kind.
    pub kind: String,
    /// running, complete, interrupted or failed.
    pub status: String,
    /// Platform.
    pub platform: String,
    /// Host name.
    pub host: String,
    /// Start (RFC 3339).
    pub started_at: String,
    /// End (RFC 3339).
    pub ended_at: Option<String>,
    /// Seconds from start to end.
    pub duration_s: Option<f64>,
    /// Trials stored.
    pub trials: u64,
    /// Of which measured normally.
    pub trials_ok: u64,
    /// Its headline number, once finished.
    pub headline: Option<Headline>,
    /// The job that ran it.
    pub job: Option<String>,
    /// Whether `POST /api/v1/runs/{id}/resume` would queue it.
    pub resumable: bool,
}

/// A stored run with its details.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RunDetail {
    /// The run as listed.
    #[serde(flatten)]
    pub run: RunView,
    /// Why it ended as it did.
    pub reason: Option<String>,
    /// The platform's caveats about its figures.
    pub caveats: Vec<String>,
    /// Its seed.
    pub seed: u64,
    /// The fleet run it is part of (`isobench run --hosts`), when it is.
    pub fleet: Option<FleetView>,
    /// The set of runs on several platforms it is part of (`isobench run --platform A,B`),
    /// when it is.
    pub cross: Option<CrossView>,
}

/// A table as `isobench show` prints it (every figure as text, from the results).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TableView {
    /// The table's title.
    pub title: String,
    /// Column headers: the name, with the unit in brackets when it has one.
    pub columns: Vec<String>,
    /// The rows, one text per column (`12.3 [10.1, 14.6]`).
    pub rows: Vec<Vec<String>>,
    /// The lines under the table (for a fleet: the hosts that differ from their type, the
    /// hosts not run; across platforms: the platforms not run).
    pub notes: Vec<String>,
}

impl TableView {
    fn of(section: Section) -> TableView {
        TableView {
            title: section.title.clone(),
            columns: section.headers(),
            rows: section.text_rows(),
            notes: section.notes,
        }
    }
}

/// The set of runs on several platforms a run is part of: the table across the platforms,
/// and each platform's run.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CrossView {
    /// The table across the platforms.
    #[serde(flatten)]
    pub table: TableView,
    /// Each platform's run, in the order they ran.
    pub runs: Vec<CrossRunView>,
}

/// One run of a [`CrossView`].
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CrossRunView {
    /// Its platform.
    pub platform: String,
    /// The run.
    pub run: String,
}

/// The fleet run a run is part of: the fleet table, and the hosts with their runs.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FleetView {
    /// The fleet table.
    #[serde(flatten)]
    pub table: TableView,
    /// The label the hosts are grouped by.
    pub type_label: String,
    /// The hosts that ran, in the order they were given, each with its run.
    pub hosts: Vec<FleetHostView>,
}

/// One host of a [`FleetView`].
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FleetHostView {
    /// Its name.
    pub host: String,
    /// Its run, stored in this database.
    pub run: String,
    /// Its labels (its type among them).
    pub labels: BTreeMap<String, String>,
}

impl FleetView {
    /// The fleet of `link`, read from `store`.
    fn of(store: &Store, link: &FleetLink) -> FleetView {
        FleetView {
            table: TableView::of(fleet_section(store, link, None)),
            type_label: link.type_label.clone(),
            hosts: link
                .hosts
                .iter()
                .map(|m| FleetHostView {
                    host: m.host.clone(),
                    run: m.run.clone(),
                    labels: m.labels.clone(),
                })
                .collect(),
        }
    }
}

impl CrossView {
    /// The set run `id` is part of, read from `store`; `None` when it ran alone.
    fn of(store: &Store, id: &str) -> Result<Option<CrossView>, ApiError> {
        let r = analyzed(store, id, Trials::Left).map_err(store_error)?;
        let runs = linked(&r)
            .into_iter()
            .map(|(platform, run)| CrossRunView { platform, run })
            .collect();
        Ok(cross_section(store, &r).map(|section| CrossView {
            table: TableView::of(section),
            runs,
        }))
    }
}

/// What analysing a run tells the list.
#[derive(Debug, Clone)]
struct Facts {
    kind: String,
    host: String,
    headline: Option<Headline>,
    reason: Option<String>,
    caveats: Vec<String>,
    /// The fleet run it is part of.
    fleet: Option<FleetLink>,
    /// Whether it is one of a set of runs on several platforms.
    linked: bool,
}

/// Analysed facts of runs, by (id, end time), and how many times runs were forgotten: facts
/// computed while a run was forgotten are not kept (they may predate what made it stale).
#[derive(Debug, Default)]
pub struct RunCache(
    Mutex<HashMap<(String, Option<i64>), Facts>>,
    std::sync::atomic::AtomicU64,
);

/// Whether `id` can be a run id: `[0-9A-Za-z-]{1,64}`. Checked before the store is asked.
pub fn valid_run_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// 400 for a malformed run id.
pub fn check_run_id(id: &str) -> Result<(), ApiError> {
    if valid_run_id(id) {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "`{id}` is not a run id (letters, digits and `-`, at most 64); GET /api/v1/runs \
             lists the runs"
        )))
    }
}

/// Maps a store error to an answer.
pub fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::UnknownRun { .. } => {
            ApiError::not_found(format!("{e}; GET /api/v1/runs lists the runs"))
        }
        other => ApiError::internal(other),
    }
}

/// Opens the database for reading only ([`Store::open_read_only`]: a database in a read-only
/// directory is browsed as it is); `None` when there is none yet.
pub fn open(db: &Path) -> Result<Option<Store>, ApiError> {
    if !db.exists() {
        return Ok(None);
    }
    Store::open_read_only(db).map(Some).map_err(store_error)
}

/// 409 when the runs of a job could not be stored in `db` (a read-only file or directory):
/// such a server browses, and refuses to queue, with the reason.
pub fn check_writable(db: &Path) -> Result<(), ApiError> {
    if Store::is_writable(db) {
        Ok(())
    } else {
        Err(ApiError::conflict(format!(
            "the database {} is read-only here: this server shows its runs but cannot store \
             new ones; serve a writable --db to queue runs",
            db.display()
        )))
    }
}

fn open_existing(db: &Path, id: &str) -> Result<Store, ApiError> {
    check_run_id(id)?;
    open(db)?.ok_or_else(|| ApiError::not_found(format!("no run {id}: no run is stored yet")))
}

/// The headline of analysed results ([`isobench_results::Results::headline`]); `None` when no
/// victim was measured.
pub fn headline(r: &Results) -> Option<Headline> {
    let h = r.headline();
    (!h.resources.is_empty()).then(|| Headline::of(&h))
}

fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

impl RunCache {
    fn facts(&self, store: &Store, s: &RunSummary) -> Result<Facts, ApiError> {
        let key = (
            s.id.as_str().to_string(),
            s.ended_at.map(|t| t.unix_millis()),
        );
        if let Some(f) = self.lock().get(&key) {
            return Ok(f.clone());
        }
        let generation = self.1.load(std::sync::atomic::Ordering::SeqCst);
        let r = analyzed(store, s.id.as_str(), Trials::Left).map_err(store_error)?;
        let finished = s.status != RunStatus::Running;
        let facts = Facts {
            kind: r.kind.clone(),
            host: r.run.host["hostname"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            headline: if finished { headline(&r) } else { None },
            reason: r.run.status_reason.clone(),
            caveats: r.run.caveats.clone(),
            fleet: fleet_link(store, &r),
            linked: !linked(&r).is_empty(),
        };
        // A running run has no headline yet; its key changes when it ends.
        let mut cache = self.lock();
        if self.1.load(std::sync::atomic::Ordering::SeqCst) == generation {
            cache.insert(key, facts.clone());
        }
        Ok(facts)
    }

    /// Forgets what was cached of `runs`: the runs of a fleet, which is linked only once its
    /// last host's run is stored, after the others may have been read.
    pub fn forget(&self, runs: &[String]) {
        let mut cache = self.lock();
        self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        cache.retain(|(id, _), _| !runs.contains(id));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, Option<i64>), Facts>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every stored run, newest first. `job_of` names the job of a run and whether one is
    /// queued or running for it.
    pub fn list(
        &self,
        db: &Path,
        job_of: &dyn Fn(&str) -> (Option<String>, bool),
    ) -> Result<Vec<RunView>, ApiError> {
        let Some(store) = open(db)? else {
            return Ok(Vec::new());
        };
        let mut runs = store.list_runs().map_err(store_error)?;
        runs.reverse();
        runs.iter()
            .map(|s| Ok(view(s, &self.facts(&store, s)?, job_of)))
            .collect()
    }

    /// One stored run with its details.
    pub fn detail(
        &self,
        db: &Path,
        id: &str,
        job_of: &dyn Fn(&str) -> (Option<String>, bool),
    ) -> Result<RunDetail, ApiError> {
        // A read-only reader can meet the file mid-change (a run's writer closing, its WAL
        // checkpointed, as the next platform's run opens it): a failure of the database is
        // read once more, a moment later, before it is answered as one.
        match self.detail_once(db, id, job_of) {
            Err(e) if e.is_internal() => {
                std::thread::sleep(std::time::Duration::from_millis(250));
                self.detail_once(db, id, job_of)
            }
            r => r,
        }
    }

    fn detail_once(
        &self,
        db: &Path,
        id: &str,
        job_of: &dyn Fn(&str) -> (Option<String>, bool),
    ) -> Result<RunDetail, ApiError> {
        let store = open_existing(db, id)?;
        let summary = store
            .list_runs()
            .map_err(store_error)?
            .into_iter()
            .find(|s| s.id.as_str() == id)
            .ok_or_else(|| {
                ApiError::not_found(format!("no run {id}; GET /api/v1/runs lists the runs"))
            })?;
        let facts = self.facts(&store, &summary)?;
        let fleet = facts.fleet.as_ref().map(|link| FleetView::of(&store, link));
        let cross = if facts.linked {
            CrossView::of(&store, id)?
        } else {
            None
        };
        let mut run = view(&summary, &facts, job_of);
        // Its runs are the hosts': a fleet run is run again from its page's job, not resumed.
        run.resumable &= fleet.is_none();
        Ok(RunDetail {
            run,
            reason: facts.reason,
            caveats: facts.caveats,
            seed: summary.seed,
            fleet,
            cross,
        })
    }
}

fn view(s: &RunSummary, f: &Facts, job_of: &dyn Fn(&str) -> (Option<String>, bool)) -> RunView {
    let (job, live) = job_of(s.id.as_str());
    RunView {
        id: s.id.as_str().to_string(),
        scenario: s.scenario_name.clone(),
        kind: f.kind.clone(),
        status: s.status.as_str().to_string(),
        platform: s.platform.clone(),
        host: f.host.clone(),
        started_at: s.started_at.to_rfc3339(),
        ended_at: s.ended_at.map(|t| t.to_rfc3339()),
        duration_s: s
            .ended_at
            .map(|e| (e.unix_millis() - s.started_at.unix_millis()) as f64 / 1000.0),
        trials: s.trials,
        trials_ok: s.trials_ok,
        headline: f.headline.clone(),
        job,
        resumable: s.status != RunStatus::Complete && !live,
    }
}

/// A run's status, read from the store.
pub fn status(db: &Path, id: &str) -> Result<RunStatus, ApiError> {
    let store = open_existing(db, id)?;
    store
        .list_runs()
        .map_err(store_error)?
        .into_iter()
        .find(|s| s.id.as_str() == id)
        .map(|s| s.status)
        .ok_or_else(|| ApiError::not_found(format!("no run {id}; GET /api/v1/runs lists the runs")))
}

/// The self-contained HTML report of a run, as `isobench report` writes it.
pub fn report(db: &Path, id: &str) -> Result<String, ApiError> {
    let store = open_existing(db, id)?;
    Ok(html_report(
        &with_linked(&store, id, Trials::Left).map_err(store_error)?,
    ))
}

/// A run's export, as `isobench export` writes it.
pub fn export(db: &Path, id: &str, format: Format) -> Result<Vec<u8>, ApiError> {
    let store = open_existing(db, id)?;
    Ok(serialize(
        &with_linked(&store, id, Trials::read_if(format == Format::Json)).map_err(store_error)?,
        format,
    ))
}

/// The comparison of `ids` against the first: the terminal table and Markdown.
pub fn compare(db: &Path, ids: &[&str]) -> Result<(String, String), ApiError> {
    if ids.len() < 2 {
        return Err(ApiError::bad_request(
            "compare needs two runs or more: ?runs=A,B (the first is the reference)",
        ));
    }
    for id in ids {
        check_run_id(id)?;
    }
    let store = open_existing(db, ids[0])?;
    let runs = ids
        .iter()
        .map(|id| analyzed(&store, id, Trials::Left).map_err(store_error))
        .collect::<Result<Vec<_>, _>>()?;
    let c = RunComparison::new(&runs);
    Ok((
        render_comparison(&c, Style::default()),
        comparison_markdown(&c),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_checked_before_the_store_sees_them() {
        assert!(valid_run_id("20261125-101010-ab12"));
        for bad in [
            "",
            "../../etc/passwd",
            "a/b",
            "a b",
            "x.db",
            &"a".repeat(65),
        ] {
            assert!(!valid_run_id(bad), "{bad}");
        }
    }
}
