//! `isobench report RUN_ID [-o FILE]`: the self-contained HTML report of a stored run (charts
//! and tables, no network needed to open it).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use isobench_experiment::stored::Trials;
use isobench_report::html_report;
use isobench_results::Results;

use crate::args::ReportArgs;
use crate::stores::load;

/// The file a run's report goes to when none is named.
pub fn default_path(run_id: &str) -> PathBuf {
    PathBuf::from(format!("isobench-{run_id}.html"))
}

/// Writes the HTML report of `r` to `path`.
pub fn write_report(r: &Results, path: &Path) -> anyhow::Result<()> {
    crate::outfile::write(path, html_report(r).as_bytes())
        .map_err(|e| anyhow::anyhow!("writing the report to {}: {e}", path.display()))
}

/// `isobench report RUN_ID`.
pub fn run(a: &ReportArgs) -> anyhow::Result<ExitCode> {
    let r = load(&a.db.path, &a.run_id, Trials::Left)?;
    let path = a.output.clone().unwrap_or_else(|| default_path(&r.run.id));
    write_report(&r, &path)?;
    println!("{}", path.display());
    Ok(ExitCode::SUCCESS)
}
