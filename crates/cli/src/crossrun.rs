//! `isobench run --platform host,cgroup,oci,vm`: the same scenario on each platform in turn
//! (`isobench_fleet::cross`), stored as linked runs, and one table across them in the layout
//! of paper 001's Table 2 with an isolation score per platform.
//!
//! The link is a fact of every run of the set (`isobench_experiment::stored`), so `isobench
//! show`, `report` and `export` of any of them carry the table, and `isobench compare` of one
//! of them compares the whole set.

use std::process::ExitCode;

use isobench_experiment::stored::{with_linked, Trials};
use isobench_experiment::{PlatformChoice, Results};
use isobench_fleet::cross::{self, CrossEvent};
use isobench_fleet::Ending;
use isobench_report::render_sections;
use isobench_store::RunId;

use crate::args::RunArgs;
use crate::exit::{self, bad_input, session_error, store_error};
use crate::output::style;

/// Runs `a`'s scenario on each of its platforms, each with `run_one`: the run on one
/// platform (its plan with `--dry-run`), its exit code and the run once one was stored.
pub fn run(
    a: &RunArgs,
    mut run_one: impl FnMut(PlatformChoice) -> anyhow::Result<(u8, Option<RunId>)>,
) -> anyhow::Result<ExitCode> {
    let e = &a.export;
    if e.export_json.is_some() || e.export_csv.is_some() || e.export_markdown.is_some() {
        return Err(bad_input(
            "--export-json/--export-csv/--export-markdown take one run; with several platforms \
             each run is stored, and `isobench export RUN_ID` writes any of them (with the \
             table across platforms); --report writes the set's report",
        ));
    }
    cross::check_platforms(&a.platform).map_err(session_error)?;
    let n = a.platform.len();
    if a.dry_run {
        for (i, p) in a.platform.iter().enumerate() {
            println!("== platform {} ({}/{n})", p.as_str(), i + 1);
            run_one(*p)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let (done, store) = cross::run_each(
        &a.platform,
        &mut |p| {
            // A stop that came between two platforms' runs: the next one is not started.
            if exit::signalled() {
                return Ok((Ending::Interrupted, None));
            }
            run_one(p).map(|(code, run)| (exit::ending(code), run))
        },
        &mut |ev| {
            if a.json_stream {
                write_event(&ev)
            } else {
                show_event(ev)
            }
        },
        || isobench_store::Store::open(&a.db.path).map_err(Into::into),
    )
    .map_err(session_error)?;
    let first = &done.runs[0].1;
    let results = with_linked(&store, first.as_str(), Trials::Left).map_err(store_error)?;
    let worst = exit::for_ending(done.ending);
    Ok(ExitCode::from(show_set(
        a,
        &results,
        first.as_str(),
        worst,
        || {},
    )))
}

/// Writes an event of a run on several platforms or of a fleet run as a line of the
/// `--json-stream` stream, between the lines of the runs' own events (docs/events.md).
pub(crate) fn write_event(ev: &impl serde::Serialize) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    if let Ok(line) = serde_json::to_string(ev) {
        // As the run's own events: a reader that went away does not stop the run.
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    }
}

/// Shows an event of a run on several platforms on stderr.
fn show_event(ev: CrossEvent) {
    match ev {
        CrossEvent::Platform { platform, n, of } => {
            eprintln!("isobench: platform {platform} ({n}/{of})")
        }
        CrossEvent::Failed { platform, why } => eprintln!("isobench: platform {platform}: {why}"),
        CrossEvent::Interrupted { platform } => {
            eprintln!("isobench: interrupted: the platforms after {platform} are not run")
        }
        // The table across the platforms says it.
        CrossEvent::Linked { .. } => {}
    }
}

/// Prints a linked set's table (the first of the sections of `results`, the run `first`
/// read with its set), then what `more` prints, and with `--report` writes the set's report.
/// With `--json-stream` nothing is printed: standard output holds the events alone.
/// Returns `worst`, made worse when the report could not be written.
pub(crate) fn show_set(
    a: &RunArgs,
    results: &Results,
    first: &str,
    mut worst: u8,
    more: impl FnOnce(),
) -> u8 {
    if !a.json_stream {
        if let Some(section) = results.sections.first() {
            print!(
                "{}",
                render_sections(std::slice::from_ref(section), first, style())
            );
        }
        more();
    }
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
