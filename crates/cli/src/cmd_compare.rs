//! `isobench compare RUN_A RUN_B [RUN_C ...]`: stored runs cell by cell against the first (the
//! reference), each difference with its interval and a p-value corrected across all of them,
//! and what the runs do not share. Reads the database only.

use std::process::ExitCode;

use isobench_experiment::stored::{fleet_link, linked};
use isobench_report::compare::{
    comparison_csv, comparison_json, comparison_markdown, render_comparison,
};
use isobench_report::{html_comparison, Style};
use isobench_results::compare::RunComparison;
use isobench_store::RunId;

use crate::args::{CompareArgs, CompareFormat};
use crate::exit::bad_input;
use crate::output::style;
use crate::stores::{existing_store, find_run, load_alone};

/// Refuses a run named twice (the same id, or `latest` and its id): a run against itself
/// compares nothing, and its differences would all read as zero.
fn refuse_repeats(given: &[String], ids: &[RunId]) -> anyhow::Result<()> {
    for (i, id) in ids.iter().enumerate() {
        if let Some(j) = ids[..i].iter().position(|earlier| earlier == id) {
            let named = if given[i] == given[j] {
                format!("`{}` is given twice", given[i])
            } else {
                format!("`{}` and `{}` are the same run ({id})", given[j], given[i])
            };
            return Err(bad_input(format!(
                "{named}; compare takes different runs, the first as the reference (see \
                 `isobench runs`)"
            )));
        }
    }
    Ok(())
}

/// `isobench compare`.
pub fn run(a: &CompareArgs) -> anyhow::Result<ExitCode> {
    let store = existing_store(&a.db.path)?;
    let ids = a
        .runs
        .iter()
        .map(|id| find_run(&store, id))
        .collect::<anyhow::Result<Vec<_>>>()?;
    refuse_repeats(&a.runs, &ids)?;
    let mut runs = ids
        .iter()
        .map(|id| load_alone(&store, id))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if let [one] = runs.as_slice() {
        // One run of a linked set (platforms, or a fleet's hosts): the whole set.
        let mut set: Vec<String> = linked(one).into_iter().map(|(_, id)| id).collect();
        if set.len() < 2 {
            if let Some(fleet) = fleet_link(&store, one) {
                set = fleet.hosts.into_iter().map(|m| m.run).collect();
            }
        }
        if set.len() < 2 {
            return Err(bad_input(format!(
                "compare needs two runs or more; run {} ran alone (give another RUN_ID, see \
                 `isobench runs`)",
                one.run.id
            )));
        }
        runs = set
            .iter()
            .map(|id| load_alone(&store, &RunId::new(id.clone())))
            .collect::<anyhow::Result<Vec<_>>>()?;
    }
    let comparison = RunComparison::new(&runs);
    let bytes = match a.format {
        // Colour only on a terminal, never in a file.
        CompareFormat::Text if a.output.is_none() => {
            render_comparison(&comparison, style()).into_bytes()
        }
        CompareFormat::Text => render_comparison(&comparison, Style::default()).into_bytes(),
        CompareFormat::Html => html_comparison(&comparison).into_bytes(),
        CompareFormat::Md => comparison_markdown(&comparison).into_bytes(),
        CompareFormat::Json => comparison_json(&comparison),
        CompareFormat::Csv => comparison_csv(&comparison),
    };
    match &a.output {
        Some(p) => crate::outfile::write(p, &bytes)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", p.display()))?,
        None => crate::output::write_stdout(&bytes)?,
    }
    Ok(ExitCode::SUCCESS)
}
