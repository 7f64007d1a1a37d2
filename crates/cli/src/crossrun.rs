//! `isobench run --platform host,cgroup,oci,vm`: the same scenario on each platform in turn,
//! stored as linked runs, and one table across them in the layout of paper 001's Table 2
//! with an isolation score per platform.
//!
//! The link is a fact of every run of the set (`isobench_experiment::stored`), so `isobench
//! show`, `report` and `export` of any of them carry the table, and `isobench compare` of one
//! of them compares the whole set.

use std::process::ExitCode;

use isobench_experiment::stored::{link, with_linked};
use isobench_experiment::Results;
use isobench_report::render_sections;
use isobench_store::RunId;

use crate::cmd_run::{open_store, run_one, store_error, style, RunArgs};
use crate::exit::{self, bad_input};

/// Runs `a`'s scenario on each of its platforms.
pub fn run(a: &RunArgs) -> anyhow::Result<ExitCode> {
    let e = &a.export;
    if e.export_json.is_some() || e.export_csv.is_some() || e.export_markdown.is_some() {
        return Err(bad_input(
            "--export-json/--export-csv/--export-markdown take one run; with several platforms \
             each run is stored, and `isobench export RUN_ID` writes any of them (with the \
             table across platforms); --report writes the set's report",
        ));
    }
    let mut seen = Vec::new();
    for p in &a.platform {
        if seen.contains(p) {
            return Err(bad_input(format!(
                "--platform names {} twice; name each platform once",
                p.as_str()
            )));
        }
        seen.push(*p);
    }
    let n = a.platform.len();
    if a.dry_run {
        for (i, p) in a.platform.iter().enumerate() {
            println!("== platform {} ({}/{n})", p.as_str(), i + 1);
            crate::cmd_run::dry_run(a, Some(*p))?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut runs: Vec<(String, RunId)> = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    let mut worst = exit::OK;
    for (i, p) in a.platform.iter().enumerate() {
        eprintln!("isobench: platform {} ({}/{n})", p.as_str(), i + 1);
        match run_one(a, Some(*p), false) {
            Ok((code, run)) => {
                worst = worse(worst, code);
                if let Some(run) = run {
                    runs.push((p.as_str().to_string(), run));
                }
                if exit::is_interrupted(code) {
                    eprintln!(
                        "isobench: interrupted: the platforms after {} are not run",
                        p.as_str()
                    );
                    break;
                }
            }
            Err(e) => {
                // One platform that cannot run here does not stop the others.
                eprintln!("isobench: platform {}: {e:#}", p.as_str());
                failed.push(format!("{}: {e:#}", p.as_str()));
                worst = worse(worst, exit::PARTIAL);
            }
        }
    }
    if runs.is_empty() {
        return Err(anyhow::anyhow!(
            "no platform could run the scenario: {}",
            failed.join("; ")
        ));
    }
    let mut store = open_store(&a.db.path)?;
    link(&mut store, &runs, &failed).map_err(store_error)?;
    let first = &runs[0].1;
    let results = with_linked(&store, first.as_str()).map_err(store_error)?;
    Ok(ExitCode::from(show_set(
        a,
        &results,
        first.as_str(),
        worst,
        || {},
    )))
}

/// Prints a linked set's table (the first of the sections of `results`, the run `first`
/// read with its set), then what `more` prints, and with `--report` writes the set's report.
/// Returns `worst`, made worse when the report could not be written.
pub(crate) fn show_set(
    a: &RunArgs,
    results: &Results,
    first: &str,
    mut worst: u8,
    more: impl FnOnce(),
) -> u8 {
    if let Some(section) = results.sections.first() {
        print!(
            "{}",
            render_sections(std::slice::from_ref(section), first, style())
        );
    }
    more();
    if let Some(file) = &a.export.report {
        let path = file
            .clone()
            .unwrap_or_else(|| crate::cmd_report::default_path(first));
        match crate::cmd_report::write_report(results, &path) {
            Ok(()) => eprintln!("isobench: wrote the report {}", path.display()),
            Err(e) => {
                eprintln!("isobench: error: --report: {e:#}");
                worst = worse(worst, exit::FAILURE);
            }
        }
    }
    worst
}

/// The more serious of two exit codes.
pub(crate) fn worse(a: u8, b: u8) -> u8 {
    let rank = |c: u8| match c {
        exit::OK => 0,
        exit::PARTIAL => 1,
        c if exit::is_interrupted(c) => 2,
        _ => 3,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

/// The runs linked with `r` (see [`isobench_experiment::stored::linked`]).
pub use isobench_experiment::stored::linked;
