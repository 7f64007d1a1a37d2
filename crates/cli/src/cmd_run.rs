//! `isobench run`: the main question end to end. Parse and validate the scenario (the
//! built-in `quick` one without a file), resolve the plan against this host, open the
//! database, create the tenants, run the trials (committing each as it ends), then render the
//! results from the database. `--resume RUN_ID` continues an interrupted run. One run
//! measures on a host at a time: a second one refuses, or waits with `--wait`.
//!
//! Also the hidden `isobench memcheck BYTES` that the memory-availability check starts inside
//! each tenant.

use std::path::Path;
use std::process::ExitCode;

use isobench_experiment::analysis::Results;
use isobench_experiment::memcheck;
use isobench_experiment::progress::{JsonLines, NoProgress, Progress};
use isobench_experiment::session::{NewRun, Session, SessionError, Start};
use isobench_experiment::stored::{analyzed, Trials};
use isobench_experiment::PlatformChoice;
use isobench_report::{render, serialize};
use isobench_store::{RunId, RunStatus, StoreError};

use crate::args::{ExportFiles, ExportFormat, MemcheckArgs, RunArgs};
use crate::exit::{self, bad_input, session_error, store_error, unsupported};
use crate::live::LiveProgress;
use crate::mode::mode;
use crate::output::{color_enabled, style};

// The flags are in `args`; checking and writing their files is the run's.
impl ExportFiles {
    /// Each requested file with its flag and format, in the order of the flags.
    fn requested(&self) -> Vec<(&'static str, ExportFormat, &Path)> {
        [
            ("--export-json", ExportFormat::Json, &self.export_json),
            ("--export-csv", ExportFormat::Csv, &self.export_csv),
            (
                "--export-markdown",
                ExportFormat::Markdown,
                &self.export_markdown,
            ),
        ]
        .into_iter()
        .filter_map(|(flag, format, path)| Some((flag, format, path.as_deref()?)))
        .collect()
    }

    /// Refuses, before anything runs, a file whose directory does not exist: a long run
    /// should not end in an export that could never be written.
    fn check(&self) -> anyhow::Result<()> {
        let report = self.report.as_ref().and_then(|r| r.as_deref());
        let files = self
            .requested()
            .into_iter()
            .map(|(flag, _, path)| (flag, path))
            .chain(report.map(|p| ("--report", p)));
        for (flag, path) in files {
            let dir = match path.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            if !dir.is_dir() {
                return Err(bad_input(format!(
                    "{flag} {}: there is no directory {}; create it or choose another file",
                    path.display(),
                    dir.display()
                )));
            }
        }
        Ok(())
    }

    /// Writes every requested file, each with the bytes `isobench export` gives, and says so
    /// on stderr. A file that cannot be written is named with its flag; the others are still
    /// written. Returns whether all were.
    fn write(&self, results: &Results, run: &RunId) -> bool {
        let mut all = true;
        for (flag, format, path) in self.requested() {
            match crate::outfile::write(path, &serialize(results, format.into())) {
                Ok(()) => eprintln!("isobench: wrote {}", path.display()),
                Err(e) => {
                    all = false;
                    eprintln!(
                        "isobench: error: {flag} {}: {e}; the run is stored, `isobench export \
                         {run} --format {} --output FILE` writes it again",
                        path.display(),
                        format.name()
                    );
                }
            }
        }
        if let Some(file) = &self.report {
            let path = file
                .clone()
                .unwrap_or_else(|| crate::cmd_report::default_path(run.as_str()));
            match crate::cmd_report::write_report(results, &path) {
                Ok(()) => eprintln!("isobench: wrote the report {}", path.display()),
                Err(e) => {
                    all = false;
                    eprintln!(
                        "isobench: error: --report: {e:#}; the run is stored, `isobench report \
                         {run} -o FILE` writes it again"
                    );
                }
            }
        }
        all
    }
}

/// The run `a` asks for (a scenario file, a preset, or the quick scenario), on `platform`.
fn new_run(a: &RunArgs, platform: Option<PlatformChoice>) -> anyhow::Result<NewRun> {
    let mut new = match &a.scenario {
        _ if a.scenario_text.is_some() => {
            let (name, text) = a.scenario_text.clone().expect("checked");
            NewRun::scenario(name, text)
        }
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| bad_input(format!("cannot read scenario {}: {e}", p.display())))?;
            NewRun::scenario(p.display().to_string(), text)
        }
        None => NewRun::preset(a.preset.as_deref()).map_err(|e| bad_input(format!("--{e}")))?,
    };
    new.platform = platform;
    new.seed = a.seed;
    new.max_time = a.max_time;
    new.io_cost = a.io_cost.clone();
    Ok(new)
}

/// `isobench run`.
pub fn run(a: &RunArgs) -> anyhow::Result<ExitCode> {
    a.export.check()?;
    if let Some(hosts) = &a.hosts {
        return crate::hostsrun::run(a, hosts);
    }
    if let Some(selector) = &a.nodes {
        return crate::nodesrun::run(a, selector);
    }
    if a.platform.len() > 1 {
        return crate::crossrun::run(a, |p| run_one(a, Some(p), false));
    }
    run_one(a, a.platform.first().copied(), true).map(|(code, _)| ExitCode::from(code))
}

/// Every platform's plan, each checked as its run would check it (`--dry-run` of several
/// platforms).
fn dry_run(a: &RunArgs, platform: Option<PlatformChoice>) -> anyhow::Result<()> {
    let mode = mode();
    let host = mode.host()?;
    let plan = new_run(a, platform)?.plan(&host).map_err(|e| match e {
        SessionError::Unsupported(m) => unsupported(format!("--{m}")),
        e => session_error(e),
    })?;
    print!("{}", plan.summary());
    Ok(())
}

/// One run on `platform` (the scenario's when `None`): its exit code and the run, once
/// one was stored.
fn run_one(
    a: &RunArgs,
    platform: Option<PlatformChoice>,
    export: bool,
) -> anyhow::Result<(u8, Option<RunId>)> {
    if a.dry_run {
        dry_run(a, platform)?;
        return Ok((exit::OK, None));
    }
    let start = match &a.resume {
        Some(id) => Start::Resume(resume_id(&a.db.path, id)?),
        None => Start::New(new_run(a, platform)?),
    };
    let mut live;
    let mut json;
    let mut quiet = NoProgress;
    let sink: &mut dyn Progress = if a.json_stream {
        json = JsonLines::new(std::io::stdout());
        &mut json
    } else if a.quiet {
        &mut quiet
    } else {
        live = LiveProgress::new(color_enabled());
        &mut live
    };
    let Some(session) = open_session(a, start, platform, sink)? else {
        return Ok((exit::interrupted(), None));
    };
    match session.run_context() {
        Some(run) => crate::tenant::install_interrupt(run, Some(session.stop_flag()))?,
        None => crate::tenant::install_stop(session.stop_flag())?,
    }
    let (outcome, store) = session.execute(sink).map_err(session_error)?;

    // Render from the database, exactly as `isobench show` does (the results document the
    // session stored).
    let trials = Trials::read_if(a.export.export_json.is_some());
    let results = analyzed(&store, outcome.run.as_str(), trials).map_err(store_error)?;
    if !a.json_stream {
        print!("{}", render(&results, style()));
    }
    let run = Some(outcome.run.clone());
    // Partial results are results: the files are written however the run ended.
    let exported = !export || a.export.write(&results, &outcome.run);
    let code = match outcome.status {
        RunStatus::Complete => {
            let partial = results.trust.dnr > 0
                || results.trust.failed > 0
                || results.trust.untrustworthy > 0;
            if partial {
                exit::PARTIAL
            } else {
                exit::OK
            }
        }
        RunStatus::Interrupted => {
            eprintln!("isobench: {}", outcome.reason);
            exit::interrupted()
        }
        _ => {
            return Err(anyhow::anyhow!(
                "run {} stopped: {}",
                outcome.run,
                outcome.reason
            ))
        }
    };
    // The run is in the database either way; an export that failed is the failure left.
    Ok((if exported { code } else { exit::FAILURE }, run))
}

/// The run `--resume` names (its id, `latest`, or a prefix only it has). A name no stored run
/// answers to (or no database yet) is passed on as it is: opening the session first removes
/// what a killed run left on the host, then refuses it with the reason.
fn resume_id(db: &Path, wanted: &str) -> anyhow::Result<RunId> {
    let Ok(store) = crate::stores::existing_store(db) else {
        return Ok(RunId::new(wanted.to_string()));
    };
    match store.resolve_run(wanted) {
        Err(StoreError::UnknownRun { .. }) => Ok(RunId::new(wanted.to_string())),
        other => other.map_err(store_error),
    }
}

/// Opens the run's session; with `--wait`, while another run measures on this host, says so
/// and tries again every second. `None`: Ctrl-C while waiting.
fn open_session(
    a: &RunArgs,
    start: Start,
    platform: Option<PlatformChoice>,
    sink: &mut dyn Progress,
) -> anyhow::Result<Option<Session>> {
    let sink = std::cell::RefCell::new(sink);
    let got = crate::slot::take(
        a.wait,
        |n| sink.borrow_mut().note(n),
        || {
            let mut sink = sink.borrow_mut();
            match Session::open(start.clone(), a.db.path.clone(), mode(), *sink) {
                Err(SessionError::Busy(holder)) => Ok(Err(holder)),
                Err(SessionError::Unsupported(m)) if platform.is_some() => {
                    Err(unsupported(format!("--{m}")))
                }
                r => r.map(Ok).map_err(session_error),
            }
        },
    )?;
    match got {
        None => Ok(None),
        Some(Ok(session)) => Ok(Some(session)),
        Some(Err(holder)) => Err(session_error(SessionError::Busy(holder))),
    }
}

/// `isobench memcheck BYTES`: touches the memory page by page and prints the timings as JSON
/// (run by the memory-availability check inside each tenant).
pub fn memcheck(a: &MemcheckArgs) -> anyhow::Result<ExitCode> {
    let walk = memcheck::touch_and_time(a.bytes, memcheck::early_stop());
    println!("{}", serde_json::to_string(&walk)?);
    Ok(ExitCode::SUCCESS)
}
