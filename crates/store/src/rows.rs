//! The row mapping, written once: for each table, the columns a model type is stored in, how
//! a row is read back into it and the values it is written with. Every query of the store
//! names a table's columns through these, so a column is added (or renamed) in one place, and
//! a value is read back by the same code whether it was written by a run or by an import.

use std::collections::HashMap;

use rusqlite::types::{FromSql, ToSql};
use rusqlite::{params_from_iter, Connection, Row};

use crate::error::StoreError;
use crate::file::DbFile;
use crate::model::{
    Condition, Fact, HistogramRecord, Modulation, NewRun, RunId, RunRecord, SampleRecord,
    SeriesRecord, StallRecord, StressorReport, TenantRecord, TenantUsageRecord, Timeline, TrialKey,
    TrialRecord, TrialStatus, HISTOGRAM_ENCODING,
};
use crate::time::Timestamp;

/// The cells of one row, read in column order; every error names the file and what was being
/// read.
pub(crate) struct Cells<'r, 's> {
    row: &'r Row<'s>,
    next: usize,
    db: &'r DbFile,
    context: &'static str,
}

impl<'r, 's> Cells<'r, 's> {
    pub(crate) fn new(row: &'r Row<'s>, db: &'r DbFile, context: &'static str) -> Self {
        Cells {
            row,
            next: 0,
            db,
            context,
        }
    }

    /// The next cell as it is stored.
    pub(crate) fn get<T: FromSql>(&mut self) -> Result<T, StoreError> {
        let value = self
            .row
            .get(self.next)
            .map_err(|e| self.db.err(self.context, e));
        self.next += 1;
        value
    }

    /// The next cell, text parsed as `T` (`what` names it when it does not parse).
    pub(crate) fn parse<T: std::str::FromStr>(&mut self, what: &str) -> Result<T, StoreError>
    where
        T::Err: std::fmt::Display,
    {
        let text: String = self.get()?;
        self.db.parse(&text, what)
    }

    /// The next cell, an RFC 3339 time.
    pub(crate) fn time(&mut self) -> Result<Timestamp, StoreError> {
        let text: String = self.get()?;
        self.db.time(&text)
    }

    /// The next cell, an RFC 3339 time or NULL.
    pub(crate) fn time_opt(&mut self) -> Result<Option<Timestamp>, StoreError> {
        let text: Option<String> = self.get()?;
        text.map(|t| self.db.time(&t)).transpose()
    }

    /// The next cell, JSON text (`what` names it when it does not parse).
    pub(crate) fn json(&mut self, what: &str) -> Result<serde_json::Value, StoreError> {
        let text: String = self.get()?;
        self.db.json(&text, what)
    }

    /// A stall share pair (`some`, `full`): `None` when `some` is NULL.
    fn stall(&mut self) -> Result<Option<StallRecord>, StoreError> {
        let some: Option<f64> = self.get()?;
        let full: Option<f64> = self.get()?;
        Ok(some.map(|some| StallRecord { some, full }))
    }

    /// A trial key, in the four columns of [`KEY_COLUMNS`].
    pub(crate) fn key(&mut self) -> Result<TrialKey, StoreError> {
        Ok(TrialKey {
            round: self.get()?,
            block: self.get()?,
            slot: self.get()?,
            attempt: self.get()?,
        })
    }
}

/// The values a row is written with, in column order.
pub(crate) type Values<'a> = Vec<Box<dyn ToSql + 'a>>;

/// A model type stored as rows of one table, each belonging to a run or to a trial (its owner).
pub(crate) trait Table: Sized {
    /// The table.
    const TABLE: &'static str;
    /// The column naming the owner: `run_id` or `trial_id`.
    const OWNER: &'static str;
    /// The columns the type is stored in, after the owner's, in the order of `read` and
    /// `values`.
    const COLUMNS: &'static [&'static str];
    /// What reading the rows is called in errors.
    const LOADING: &'static str;
    /// What writing the rows is called in errors.
    const RECORDING: &'static str;
    /// What writing one row is called in errors.
    const RECORDING_ONE: &'static str;

    /// Reads one row, from the cell of its first column on.
    fn read(cells: &mut Cells<'_, '_>) -> Result<Self, StoreError>;

    /// The values of [`Table::COLUMNS`].
    fn values(&self) -> Values<'_>;

    /// The statement that writes one row: the owner as `?1`, then the columns.
    fn insert_sql() -> String {
        let marks: Vec<String> = (1..=Self::COLUMNS.len() + 1)
            .map(|i| format!("?{i}"))
            .collect();
        format!(
            "INSERT INTO {} ({}, {}) VALUES ({})",
            Self::TABLE,
            Self::OWNER,
            Self::COLUMNS.join(", "),
            marks.join(", ")
        )
    }
}

/// The columns of `T`, each prefixed with the table alias `alias`.
pub(crate) fn columns<T: Table>(alias: &str) -> String {
    let named: Vec<String> = T::COLUMNS.iter().map(|c| format!("{alias}.{c}")).collect();
    named.join(", ")
}

/// The parameters of [`Table::insert_sql`] for `row` of `owner`.
pub(crate) fn row_params<'a, T: Table>(
    owner: &'a dyn ToSql,
    row: &'a T,
) -> rusqlite::ParamsFromIter<Values<'a>> {
    let mut values: Values<'a> = vec![Box::new(owner)];
    values.extend(row.values());
    params_from_iter(values)
}

/// Writes `rows` of `owner`, inside the caller's transaction.
pub(crate) fn insert_all<T: Table>(
    db: &DbFile,
    tx: &Connection,
    owner: &dyn ToSql,
    rows: &[T],
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut ins = tx
        .prepare_cached(&T::insert_sql())
        .map_err(|e| db.err(T::RECORDING, e))?;
    for row in rows {
        ins.execute(row_params(owner, row))
            .map_err(|e| db.err(T::RECORDING_ONE, e))?;
    }
    Ok(())
}

/// Runs `sql` with `params` and maps each row with `read`.
pub(crate) fn query<T>(
    db: &DbFile,
    conn: &Connection,
    context: &'static str,
    sql: &str,
    params: impl rusqlite::Params,
    mut read: impl FnMut(&mut Cells<'_, '_>) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let mut stmt = conn.prepare_cached(sql).map_err(|e| db.err(context, e))?;
    let mut rows = stmt.query(params).map_err(|e| db.err(context, e))?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(|e| db.err(context, e))? {
        out.push(read(&mut Cells::new(row, db, context))?);
    }
    Ok(out)
}

/// The run's rows of a table owned by the run (`run_id`), in the order `order_by`.
pub(crate) fn of_run<T: Table>(
    db: &DbFile,
    conn: &Connection,
    run: &RunId,
    order_by: &str,
) -> Result<Vec<T>, StoreError> {
    let sql = format!(
        "SELECT {} FROM {} c WHERE c.run_id = ?1 ORDER BY {order_by}",
        columns::<T>("c"),
        T::TABLE
    );
    query(db, conn, T::LOADING, &sql, [run.as_str()], T::read)
}

/// The rows of a table owned by trials (`trial_id`) for every trial of the run, by trial id,
/// each trial's rows in the order they were written.
pub(crate) fn of_trials<T: Table>(
    db: &DbFile,
    conn: &Connection,
    run: &RunId,
) -> Result<HashMap<i64, Vec<T>>, StoreError> {
    let sql = format!(
        "SELECT c.trial_id, {} FROM {} c JOIN trials t ON t.id = c.trial_id
         WHERE t.run_id = ?1 ORDER BY c.rowid",
        columns::<T>("c"),
        T::TABLE
    );
    let rows = query(db, conn, T::LOADING, &sql, [run.as_str()], |c| {
        Ok((c.get::<i64>()?, T::read(c)?))
    })?;
    let mut by_trial: HashMap<i64, Vec<T>> = HashMap::new();
    for (trial_id, row) in rows {
        by_trial.entry(trial_id).or_default().push(row);
    }
    Ok(by_trial)
}

/// The columns of a [`TrialKey`].
pub(crate) const KEY_COLUMNS: &str = "round, block, slot, attempt";

/// The columns of a [`RunRecord`], `id` first.
pub(crate) const RUN_COLUMNS: &str = "id, scenario_name, scenario_text, seed, status, \
     status_reason, tool_version, schema_version, started_at, ended_at, host_facts, platform, \
     platform_version";

/// Reads a run in [`RUN_COLUMNS`].
pub(crate) fn read_run(c: &mut Cells<'_, '_>) -> Result<RunRecord, StoreError> {
    Ok(RunRecord {
        id: RunId::new(c.get::<String>()?),
        scenario_name: c.get()?,
        scenario_text: c.get()?,
        seed: c.parse("seed")?,
        status: c.parse("run status")?,
        status_reason: c.get()?,
        tool_version: c.get()?,
        schema_version: c.get()?,
        started_at: c.time()?,
        ended_at: c.time_opt()?,
        host_facts: c.json("host facts")?,
        platform: c.get()?,
        platform_version: c.get()?,
    })
}

/// Writes a run with status `running` (its end is written by an update).
pub(crate) fn insert_run(
    conn: &Connection,
    id: &RunId,
    run: &NewRun,
    schema_version: u32,
) -> rusqlite::Result<usize> {
    conn.execute(
        "INSERT INTO runs (id, scenario_name, scenario_text, seed, status, tool_version,
                           schema_version, started_at, host_facts, platform,
                           platform_version)
         VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7, ?8, ?9, ?10)",
        rusqlite::params![
            id.as_str(),
            run.scenario_name,
            run.scenario_text,
            run.seed.to_string(),
            run.tool_version,
            schema_version,
            run.started_at.to_rfc3339(),
            run.host_facts.to_string(),
            run.platform,
            run.platform_version,
        ],
    )
}

impl Table for TenantRecord {
    const TABLE: &'static str = "tenants";
    const OWNER: &'static str = "run_id";
    const COLUMNS: &'static [&'static str] = &["name", "role", "platform", "limits"];
    const LOADING: &'static str = "loading tenants";
    const RECORDING: &'static str = "adding a tenant";
    const RECORDING_ONE: &'static str = "adding a tenant";

    fn read(c: &mut Cells<'_, '_>) -> Result<Self, StoreError> {
        Ok(TenantRecord {
            name: c.get()?,
            role: c.parse("tenant role")?,
            platform: c.get()?,
            limits: c.json("tenant limits")?,
        })
    }

    fn values(&self) -> Values<'_> {
        vec![
            Box::new(&self.name),
            Box::new(self.role.as_str()),
            Box::new(&self.platform),
            Box::new(self.limits.to_string()),
        ]
    }
}

impl Table for Fact {
    const TABLE: &'static str = "facts";
    const OWNER: &'static str = "run_id";
    const COLUMNS: &'static [&'static str] = &["scope", "key", "value"];
    const LOADING: &'static str = "loading facts";
    const RECORDING: &'static str = "recording a fact";
    const RECORDING_ONE: &'static str = "recording a fact";

    fn read(c: &mut Cells<'_, '_>) -> Result<Self, StoreError> {
        Ok(Fact {
            scope: c.get()?,
            key: c.get()?,
            value: c.json("fact value")?,
        })
    }

    fn values(&self) -> Values<'_> {
        vec![
            Box::new(&self.scope),
            Box::new(&self.key),
            Box::new(self.value.to_string()),
        ]
    }
}

impl Table for TrialRecord {
    const TABLE: &'static str = "trials";
    const OWNER: &'static str = "run_id";
    const COLUMNS: &'static [&'static str] = &[
        "round",
        "block",
        "slot",
        "attempt",
        "probe",
        "tenant",
        "condition",
        "repetition",
        "status",
        "reason",
        "started_at",
        "ended_at",
        "load_note",
    ];
    const LOADING: &'static str = "loading trials";
    const RECORDING: &'static str = "recording a trial";
    const RECORDING_ONE: &'static str = "recording a trial";

    /// The trial without what other tables hold (samples, histograms, reports, usage,
    /// details).
    fn read(c: &mut Cells<'_, '_>) -> Result<Self, StoreError> {
        let key = c.key()?;
        let probe = c.get()?;
        let tenant = c.get()?;
        let condition: String = c.get()?;
        let repetition = c.get()?;
        let status: String = c.get()?;
        let reason = c.get()?;
        Ok(TrialRecord {
            key,
            probe,
            tenant,
            condition: condition
                .parse::<Condition>()
                .map_err(|e| c.db.corrupt(e))?,
            repetition,
            status: TrialStatus::from_parts(&status, reason).map_err(|e| c.db.corrupt(e))?,
            started_at: c.time()?,
            ended_at: c.time()?,
            load_note: c.get()?,
            samples: Vec::new(),
            histograms: Vec::new(),
            stressor_reports: Vec::new(),
            series: Vec::new(),
            modulation: None,
            noise: None,
            mechanism: None,
            timeline: None,
            limits: None,
            tenant_usage: Vec::new(),
        })
    }

    fn values(&self) -> Values<'_> {
        vec![
            Box::new(self.key.round),
            Box::new(self.key.block),
            Box::new(self.key.slot),
            Box::new(self.key.attempt),
            Box::new(&self.probe),
            Box::new(&self.tenant),
            Box::new(self.condition.to_string()),
            Box::new(self.repetition),
            Box::new(self.status.as_str()),
            Box::new(self.status.reason()),
            Box::new(self.started_at.to_rfc3339()),
            Box::new(self.ended_at.to_rfc3339()),
            Box::new(&self.load_note),
        ]
    }

    /// `plan_seq` numbers the run's records in the order they were written.
    fn insert_sql() -> String {
        let marks: Vec<String> = (2..=Self::COLUMNS.len() + 1)
            .map(|i| format!("?{i}"))
            .collect();
        format!(
            "INSERT INTO trials (run_id, plan_seq, {})
             VALUES (?1, (SELECT COALESCE(MAX(plan_seq) + 1, 0) FROM trials WHERE run_id = ?1),
                     {})",
            Self::COLUMNS.join(", "),
            marks.join(", ")
        )
    }
}

impl Table for SampleRecord {
    const TABLE: &'static str = "samples";
    const OWNER: &'static str = "trial_id";
    const COLUMNS: &'static [&'static str] = &["metric", "unit", "direction", "value"];
    const LOADING: &'static str = "loading samples";
    const RECORDING: &'static str = "recording samples";
    const RECORDING_ONE: &'static str = "recording a sample";

    fn read(c: &mut Cells<'_, '_>) -> Result<Self, StoreError> {
        let metric = c.get()?;
        let unit = c.get()?;
        let direction: String = c.get()?;
        Ok(SampleRecord {
            metric,
            unit,
            direction: direction
                .parse()
                .map_err(|e| c.db.corrupt(format!("sample direction: {e}")))?,
            value: c.get()?,
        })
    }

    fn values(&self) -> Values<'_> {
        vec![
            Box::new(&self.metric),
            Box::new(&self.unit),
            Box::new(self.direction.as_str()),
            Box::new(self.value),
        ]
    }
}

impl Table for HistogramRecord {
    const TABLE: &'static str = "histograms";
    const OWNER: &'static str = "trial_id";
    const COLUMNS: &'static [&'static str] = &["metric", "encoding", "data"];
    const LOADING: &'static str = "loading histograms";
    const RECORDING: &'static str = "recording histograms";
    const RECORDING_ONE: &'static str = "recording a histogram";

    fn read(c: &mut Cells<'_, '_>) -> Result<Self, StoreError> {
        let metric: String = c.get()?;
        let encoding: String = c.get()?;
        if encoding != HISTOGRAM_ENCODING {
            return Err(c.db.corrupt(format!(
                "histogram of {metric} has encoding {encoding:?}, expected {HISTOGRAM_ENCODING:?}"
            )));
        }
        Ok(HistogramRecord {
            metric,
            base64: c.get()?,
        })
    }

    fn values(&self) -> Values<'_> {
        vec![
            Box::new(&self.metric),
            Box::new(HISTOGRAM_ENCODING),
            Box::new(&self.base64),
        ]
    }
}

impl Table for StressorReport {
    const TABLE: &'static str = "stressor_reports";
    const OWNER: &'static str = "trial_id";
    const COLUMNS: &'static [&'static str] = &[
        "tenant",
        "stressor",
        "intensity",
        "mode",
        "ops",
        "ops_per_sec",
    ];
    const LOADING: &'static str = "loading stressor reports";
    const RECORDING: &'static str = "recording stressor reports";
    const RECORDING_ONE: &'static str = "recording a stressor report";

    fn read(c: &mut Cells<'_, '_>) -> Result<Self, StoreError> {
        Ok(StressorReport {
            tenant: c.get()?,
            stressor: c.get()?,
            intensity: c.get()?,
            mode: c.parse("stressor mode")?,
            ops: c.get()?,
            ops_per_sec: c.get()?,
        })
    }

    fn values(&self) -> Values<'_> {
        vec![
            Box::new(&self.tenant),
            Box::new(&self.stressor),
            Box::new(self.intensity),
            Box::new(self.mode.as_str()),
            Box::new(self.ops),
            Box::new(self.ops_per_sec),
        ]
    }
}

impl Table for TenantUsageRecord {
    const TABLE: &'static str = "tenant_usage";
    const OWNER: &'static str = "trial_id";
    const COLUMNS: &'static [&'static str] = &[
        "tenant",
        "interval_s",
        "cpu_some",
        "cpu_full",
        "memory_some",
        "memory_full",
        "io_some",
        "io_full",
        "read_bytes_per_s",
        "write_bytes_per_s",
        "read_ops_per_s",
        "write_ops_per_s",
    ];
    const LOADING: &'static str = "loading tenant usage";
    const RECORDING: &'static str = "recording tenant usage";
    const RECORDING_ONE: &'static str = "recording a tenant's usage";

    fn read(c: &mut Cells<'_, '_>) -> Result<Self, StoreError> {
        Ok(TenantUsageRecord {
            tenant: c.get()?,
            interval_s: c.get()?,
            cpu: c.stall()?,
            memory: c.stall()?,
            io: c.stall()?,
            read_bytes_per_s: c.get()?,
            write_bytes_per_s: c.get()?,
            read_ops_per_s: c.get()?,
            write_ops_per_s: c.get()?,
        })
    }

    fn values(&self) -> Values<'_> {
        let mut values: Values<'_> = vec![Box::new(&self.tenant), Box::new(self.interval_s)];
        for (_, stall) in self.stalls() {
            values.push(Box::new(stall.map(|s| s.some)));
            values.push(Box::new(stall.and_then(|s| s.full)));
        }
        values.push(Box::new(self.read_bytes_per_s));
        values.push(Box::new(self.write_bytes_per_s));
        values.push(Box::new(self.read_ops_per_s));
        values.push(Box::new(self.write_ops_per_s));
        values
    }
}

/// What `trial_details` holds for one trial: the parts of a [`TrialRecord`] kept as one JSON
/// document.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct TrialDetails {
    #[serde(default)]
    series: Vec<SeriesRecord>,
    #[serde(default)]
    modulation: Option<Modulation>,
    #[serde(default)]
    noise: Option<serde_json::Value>,
    #[serde(default)]
    mechanism: Option<serde_json::Value>,
    #[serde(default)]
    timeline: Option<Timeline>,
    limits: Option<serde_json::Value>,
}

impl TrialDetails {
    /// The `trial_details` document of `trial`, if it has anything to keep there.
    pub(crate) fn of(trial: &TrialRecord) -> Option<String> {
        if trial.series.is_empty()
            && trial.modulation.is_none()
            && trial.noise.is_none()
            && trial.mechanism.is_none()
            && trial.timeline.is_none()
            && trial.limits.is_none()
        {
            return None;
        }
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
        Some(details.to_string())
    }

    /// Reads a stored document (of the trial numbered `trial_id`, for errors).
    pub(crate) fn parse(db: &DbFile, trial_id: i64, data: &str) -> Result<Self, StoreError> {
        serde_json::from_str(data)
            .map_err(|e| db.corrupt(format!("details of trial {trial_id}: {e}")))
    }

    /// Puts the details into `trial`.
    pub(crate) fn fill(self, trial: &mut TrialRecord) {
        trial.series = self.series;
        trial.modulation = self.modulation;
        trial.noise = self.noise.filter(|n| !n.is_null());
        trial.mechanism = self.mechanism.filter(|n| !n.is_null());
        trial.timeline = self.timeline;
        trial.limits = self.limits.filter(|n| !n.is_null());
    }
}
