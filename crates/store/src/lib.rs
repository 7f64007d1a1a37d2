//! The isobench result store: one SQLite file holding every run, its tenants, and every trial
//! with its samples, histograms and stressor reports.
//!
//! Why it looks like this: a run can last hours and must survive a crash, a Ctrl-C or a
//! vanished tenant without losing what was already measured. So each trial is committed in its
//! own transaction the moment it ends ([`Store::record_trial`]), trials carry a unique key in
//! plan order so an interrupted run can be resumed without repeating or losing one
//! ([`Store::completed_trial_keys`]), and nothing is ever deleted. Every run records the tool
//! and schema versions, the seed, host and platform facts and the exact tenant limits, so a
//! result can be re-rendered and reproduced later ([`Store::load_run`]).
//!
//! The database uses WAL mode (a web UI can read while a run writes), a busy timeout (a second
//! writer waits, then gets [`StoreError::Locked`]), and a schema version in
//! `PRAGMA user_version` with forward-only migrations ([`SCHEMA_VERSION`]). A database written
//! by a newer isobench is refused with [`StoreError::NewerSchema`] rather than misread.
#![deny(missing_docs)]

mod documents;
mod error;
mod file;
mod model;
mod rows;
mod schema;
mod store;
#[cfg(test)]
mod testdata;
mod time;
mod trials;
mod validate;

pub use documents::DocumentBytes;
pub use error::{StoreError, Unusable};
pub use isobench_common::{Direction, Role};
pub use model::{
    Condition, CpuSample, CpuSeries, Fact, HistogramRecord, LoadedRun, Modulation, NewRun, RunId,
    RunRecord, RunStatus, RunSummary, SampleRecord, ScheduledSwitch, SeriesRecord, StallRecord,
    StressorMode, StressorReport, Switch, TenantRecord, TenantUsageRecord, Timeline, TrialKey,
    TrialRecord, TrialStatus, WindowRecord, HISTOGRAM_ENCODING,
};
pub use schema::SCHEMA_VERSION;
pub use store::{OpenOptions, Store};
pub use time::Timestamp;
