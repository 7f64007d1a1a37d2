//! Stored results: `isobench runs` (the list), `isobench show RUN_ID` (the same report as
//! the end of `isobench run`) and `isobench export RUN_ID --format json|csv|md`. All read the
//! database only, opened read-only (one in a read-only directory is read as it is), and none
//! creates one. A run is named by its id, `latest`, or a prefix only it has. `runs --json` and `show --json` print documents for
//! scripts: the list in the envelope of every other JSON document, and the run as
//! `export --format json` writes it.

use std::path::Path;
use std::process::ExitCode;

use isobench_experiment::orphans;
use isobench_experiment::stored::Trials;
use isobench_report::export::json_document;
use isobench_report::{csv_section, render, render_runs, serialize, Format};
use isobench_store::{RunStatus, RunSummary, Store};
use serde_json::Value;

use crate::args::{ExportArgs, RunsArgs, ShowArgs};
use crate::exit::{bad_input, store_error};
use crate::output::{envelope, print_json, style};
use crate::stores::{existing_store, load};

/// Marks the runs of `store` left `running` by a process that is gone as interrupted, when
/// the database takes writes; a read-only one (an artifact of another machine) lists them
/// as stored. A database that takes no write now (its disk full, its lock held by another
/// process) is listed all the same, with a warning.
fn mark_orphans(store: &Store, path: &Path) {
    let running = store.running_runs().map(|r| !r.is_empty()).unwrap_or(false);
    if !running || !Store::is_writable(path) {
        return;
    }
    let marked = Store::open(path).and_then(|mut w| orphans::mark_orphans(&mut w));
    if let Err(e) = marked {
        tracing::warn!("{e}; a run left running by a process that is gone is listed as running");
    }
}

/// `isobench runs`.
pub fn runs(a: &RunsArgs) -> anyhow::Result<ExitCode> {
    let list = if a.db.path.exists() || a.db.path.is_symlink() {
        let store = existing_store(&a.db.path)?;
        // A run whose process was killed is listed as what it is: interrupted.
        mark_orphans(&store, &a.db.path);
        store.list_runs().map_err(store_error)?
    } else if a.json {
        // No database yet is no runs yet, not an error.
        Vec::new()
    } else {
        println!(
            "no runs: there is no database at {} yet; `isobench run` starts one",
            a.db.path.display()
        );
        return Ok(ExitCode::SUCCESS);
    };
    let resume = |r: &RunSummary| {
        (r.status == RunStatus::Interrupted).then(|| orphans::resume_command(&r.id, &a.db.path))
    };
    if a.json {
        let mut doc = envelope("runs");
        let runs = list
            .iter()
            .map(|r| {
                let mut v = serde_json::to_value(r)?;
                if let (Some(cmd), Some(obj)) = (resume(r), v.as_object_mut()) {
                    obj.insert("resume".into(), Value::String(cmd));
                }
                Ok(v)
            })
            .collect::<serde_json::Result<Vec<Value>>>()?;
        doc.insert("runs".into(), Value::Array(runs));
        print_json(&Value::Object(doc));
    } else {
        print!("{}", render_runs(&list));
        // The latest interrupted runs, newest last, each with the command that resumes it.
        let interrupted: Vec<String> = list.iter().filter_map(resume).collect();
        let shown = interrupted.len().saturating_sub(RESUME_HINTS);
        if !interrupted.is_empty() {
            println!();
            if shown > 0 {
                println!("({shown} older interrupted runs not shown)");
            }
        }
        for cmd in &interrupted[shown..] {
            println!("resume: {cmd}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// How many interrupted runs `isobench runs` shows the resume command of.
const RESUME_HINTS: usize = 5;

/// `isobench show RUN_ID`.
pub fn show(a: &ShowArgs) -> anyhow::Result<ExitCode> {
    let r = load(&a.db.path, &a.run_id, Trials::read_if(a.json))?;
    if a.json {
        crate::output::write_stdout(&serialize(&r, Format::Json))?;
    } else {
        print!("{}", render(&r, style()));
    }
    Ok(ExitCode::SUCCESS)
}

/// `isobench export RUN_ID`.
pub fn export(a: &ExportArgs) -> anyhow::Result<ExitCode> {
    let format = Format::from(a.format);
    // Only the whole JSON document carries the trials, and their series only with --series.
    let trials = match (format == Format::Json && a.section.is_none(), a.series) {
        (false, _) => Trials::Left,
        (true, false) => Trials::Read,
        (true, true) => Trials::WithSeries,
    };
    let r = load(&a.db.path, &a.run_id, trials)?;
    let run = &r.run.id;
    if a.series && format != Format::Json {
        return Err(bad_input(
            "--series is for --format json; csv and md carry no window series".to_string(),
        ));
    }
    let bytes = match &a.section {
        None if a.series => json_document(&r, true),
        None => serialize(&r, format),
        Some(id) => {
            let ids: Vec<&str> = r.sections.iter().map(|s| s.id.as_str()).collect();
            let Some(section) = r.sections.iter().find(|s| &s.id == id) else {
                return Err(bad_input(if ids.is_empty() {
                    format!(
                        "--section {id}: run {run} ({} kind) has no sections; leave --section out",
                        r.kind.as_str()
                    )
                } else {
                    format!(
                        "--section {id}: run {run} has no such section; its sections are {}",
                        ids.join(", ")
                    )
                }));
            };
            if format != Format::Csv {
                return Err(bad_input(format!(
                    "--section {id} is for --format csv; json and md carry every section"
                )));
            }
            csv_section(section)
        }
    };
    match &a.output {
        Some(p) => crate::outfile::write(p, &bytes)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", p.display()))?,
        None => crate::output::write_stdout(&bytes)?,
    }
    Ok(ExitCode::SUCCESS)
}
