//! `isobench run`: the main question end to end. Parse and validate the scenario (the
//! built-in `quick` one without a file), resolve the plan against this host, open the
//! database, create the tenants, run the trials (committing each as it ends), then render the
//! results from the database. `--resume RUN_ID` continues an interrupted run. One run
//! measures on a host at a time: a second one refuses, or waits with `--wait`.
//!
//! Also the hidden `isobench memcheck BYTES` that the memory-availability check starts inside
//! each tenant.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use isobench_experiment::analysis::Results;
use isobench_experiment::memcheck;
use isobench_experiment::progress::{JsonLines, NoProgress, Progress};
use isobench_experiment::session::{Mode, NewRun, Session, SessionError, Start};
use isobench_experiment::stored::analyzed;
use isobench_experiment::PlatformChoice;
use isobench_report::{render, serialize, Style};
use isobench_store::{RunId, RunStatus, Store, StoreError};

use crate::args::{DbArgs, ExportFormat, PlatformParser};
use crate::exit::{self, bad_input, unsupported};
use crate::live::LiveProgress;

/// `isobench run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Scenario file (TOML, see docs/scenario.md). Without one: the built-in `quick`
    /// scenario (one victim, one aggressor, a quick probe set under every stressor).
    #[arg(value_name = "FILE.toml")]
    pub scenario: Option<PathBuf>,
    /// A built-in scenario instead of a file: quick (the default), standard (+/-2 points),
    /// null (A/A: an aggressor that does nothing, for the false-positive rate), or one of the
    /// papers' experiments; `isobench presets` lists them all with what each reproduces.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["scenario", "resume"])]
    pub preset: Option<String>,
    /// Continue an interrupted run (its id, `latest`, or the start of an id no other run
    /// shares): the trials it stored are kept, the rest are run.
    #[arg(long, value_name = "RUN_ID", conflicts_with = "scenario")]
    pub resume: Option<String>,
    #[command(flatten)]
    pub db: DbArgs,
    /// Platform instead of the scenario's. Several, comma-separated (`host,cgroup,oci,vm`),
    /// run the scenario on each in turn, store the runs linked, and print one table across
    /// the platforms (paper 001's layout) with an isolation score for each.
    #[arg(
        long,
        value_name = "PLATFORM[,PLATFORM...]",
        conflicts_with = "resume",
        value_delimiter = ',',
        value_parser = PlatformParser::run()
    )]
    pub platform: Vec<PlatformChoice>,
    /// Seed instead of the scenario's.
    #[arg(long, value_name = "N", conflicts_with = "resume")]
    pub seed: Option<u64>,
    /// Time budget instead of the scenario's `repetitions.max_time` (`90s`, `10m`, `2.5m`, or
    /// seconds; at most 24 hours): no round starts that would end past it, and results
    /// whose interval is still wider than the target are flagged. The run's plan keeps it,
    /// so `--resume` does too.
    #[arg(
        long,
        value_name = "DURATION",
        conflicts_with = "resume",
        value_parser = parse_max_time
    )]
    pub max_time: Option<std::time::Duration>,
    /// io.cost on the disk of the tenants' workdirs for the run (`cgroup` platform on cgroup
    /// v2): `on` writes `MAJ:MIN enable=1` to the root's io.cost.qos, `off` `enable=0`, or
    /// io.cost.qos parameters (`enable=1 ctrl=user rlat=5000 wlat=5000`) and io.cost.model
    /// ones (`rbps=200000000 rrandiops=20000`, or `model=auto`). Read back, recorded with the
    /// run, shared with overlapping runs that ask the same, and put back as it was when the
    /// last of them ends; `io_weight` acts through it.
    #[arg(
        long,
        value_name = "on|off|PARAMS",
        conflicts_with = "resume",
        value_parser = parse_io_cost
    )]
    pub io_cost: Option<isobench_platform::IoCost>,
    /// Run the scenario on every host of this file at once, each through its host agent
    /// (`isobench agent --listen`), import their runs here, linked, and print the fleet
    /// table: per host type, the isolation summary, and the hosts that differ from the
    /// others of their type (docs/fleet.md).
    #[arg(long, value_name = "HOSTS.toml", conflicts_with_all = ["resume", "dry_run"])]
    pub hosts: Option<PathBuf>,
    /// With --platform k8s: run the scenario on every Kubernetes node this label selector
    /// matches (e.g. `node.kubernetes.io/instance-type=m5.large`), one run at a time on a
    /// node and all nodes at once, each through a runner pod on the node; import their runs
    /// here, linked, and print the fleet table per node type, with the noisy nodes
    /// (docs/fleet.md).
    #[arg(
        long,
        value_name = "SELECTOR",
        conflicts_with_all = ["resume", "dry_run", "hosts"]
    )]
    pub nodes: Option<String>,
    /// Check the scenario and print the plan, without running anything.
    #[arg(long)]
    pub dry_run: bool,
    /// When another run is measuring on this host, wait for it to end instead of refusing
    /// (two runs at once would disturb each other's figures).
    #[arg(
        long,
        env = "ISOBENCH_WAIT",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub wait: bool,
    /// No live progress (the results are still printed).
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Instead of the progress bar and the results table, write the run's events as JSON
    /// lines on stdout (planned, tenants_ready, trial_started, trial_ended, round_ended,
    /// note, finished; docs/cli.md), for a program that watches the run.
    #[arg(long, conflicts_with = "dry_run")]
    pub json_stream: bool,
    #[command(flatten)]
    pub export: ExportFiles,
}

/// `--export-json FILE`, `--export-csv FILE`, `--export-markdown FILE`: the run's results
/// written at its end, also when it ended early (a time budget, Ctrl-C), as `isobench export`
/// writes them.
#[derive(Debug, Args)]
#[command(next_help_heading = "Export")]
pub struct ExportFiles {
    /// At the end of the run, write its results as JSON (the document of `isobench export
    /// --format json`) to FILE.
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,
    /// At the end of the run, write one row per degradation as CSV to FILE.
    #[arg(long, value_name = "FILE")]
    pub export_csv: Option<PathBuf>,
    /// At the end of the run, write the report's tables as Markdown to FILE.
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,
    /// At the end of the run, write its HTML report (charts and tables in one file that opens
    /// offline; `isobench report` writes the same) and print its path; to
    /// isobench-RUN_ID.html unless `--report=FILE` names one.
    #[arg(long, value_name = "FILE", num_args = 0..=1, require_equals = true)]
    pub report: Option<Option<PathBuf>>,
}

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

/// `isobench memcheck` (internal).
#[derive(Debug, Args)]
pub struct MemcheckArgs {
    /// Bytes to touch.
    pub bytes: u64,
}

/// Hidden test mode: `ISOBENCH_DEBUG_FAKE=1` runs on the fake platform and clock (instant),
/// `=slow` lets real time pass as well; `ISOBENCH_DEBUG_FAKE_SCALE=F` multiplies every
/// stressor's effect by F (a host with worse isolation, for fleet tests).
pub fn mode() -> Mode {
    let effect_scale = std::env::var("ISOBENCH_DEBUG_FAKE_SCALE")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|f| f.is_finite() && *f >= 0.0)
        .unwrap_or(1.0);
    match std::env::var("ISOBENCH_DEBUG_FAKE").as_deref() {
        Err(_) | Ok("" | "0") => Mode::Real,
        Ok("slow") => Mode::Fake {
            real_time: 1.0,
            effect_scale,
        },
        Ok(_) => Mode::Fake {
            real_time: 0.0,
            effect_scale,
        },
    }
}

/// Whether to colour the output: a terminal, and `NO_COLOR` unset.
pub fn color_enabled() -> bool {
    let no_color = matches!(std::env::var_os("NO_COLOR"), Some(v) if !v.is_empty());
    !no_color && std::io::stdout().is_terminal()
}

/// The report style for this terminal.
pub fn style() -> Style {
    let width = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .filter(|&w: &usize| w >= 40)
        .unwrap_or(100);
    Style {
        width,
        color: color_enabled(),
    }
}

/// Opens the results database, turning its errors into exit codes: a newer schema or a file
/// that is not a database is bad input; a lock held by another writer is a failure. Nothing
/// is modified in either case.
pub fn open_store(path: &Path) -> anyhow::Result<Store> {
    Store::open(path).map_err(store_error)
}

/// Maps a store error to a coded error where the user has to act: a `--db` that is not a
/// usable database (a directory, not SQLite, damaged or truncated, newer, read-only where a
/// write is needed) and a run id that names no run or several are bad input (exit code 2).
pub fn store_error(e: StoreError) -> anyhow::Error {
    match e {
        StoreError::NewerSchema { .. }
        | StoreError::NotADatabase { .. }
        | StoreError::NoDirectory { .. }
        | StoreError::ReadOnly { .. }
        | StoreError::NeedsMigration { .. }
        | StoreError::UnreadableLog { .. }
        | StoreError::AmbiguousRun { .. }
        | StoreError::NoRuns { .. } => bad_input(e.to_string()),
        StoreError::UnknownRun { .. } => bad_input(format!("{e}; `isobench runs` lists the runs")),
        other => anyhow::Error::new(other),
    }
}

/// The run `a` asks for (a scenario file, a preset, or the quick scenario), on `platform`.
fn new_run(a: &RunArgs, platform: Option<PlatformChoice>) -> anyhow::Result<NewRun> {
    let mut new = match &a.scenario {
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

/// `--io-cost`: `on`, `off` or io.cost.qos and io.cost.model parameters.
fn parse_io_cost(s: &str) -> Result<isobench_platform::IoCost, String> {
    s.parse()
}

/// `--max-time`: a duration as scenario files write it (`90s`, `10m`, `2.5m`, seconds),
/// above zero.
fn parse_max_time(s: &str) -> Result<std::time::Duration, String> {
    match isobench_experiment::scenario::parse_duration(s) {
        Some(d) if d.is_zero() => Err("a budget of zero runs nothing; give e.g. 10m".into()),
        Some(d) => Ok(d),
        None => Err(
            "not a duration; write it like 90s, 10m, 2.5m or a number of seconds, at most \
             24 hours (1440m)"
                .into(),
        ),
    }
}

/// The exit-coded error for a session's.
pub fn session_error(e: SessionError) -> anyhow::Error {
    match e {
        SessionError::BadInput(m) => bad_input(m),
        SessionError::Scenario(_) => bad_input(e.to_string()),
        SessionError::Unsupported(m) => unsupported(m),
        SessionError::Store(se) => store_error(se),
        e @ SessionError::Busy(_) => exit::busy(e.to_string()),
        SessionError::Other(e) => e,
    }
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
        return crate::crossrun::run(a);
    }
    run_one(a, a.platform.first().copied(), true).map(|(code, _)| ExitCode::from(code))
}

/// Every platform's plan, each checked as its run would check it (`--dry-run` of several
/// platforms).
pub fn dry_run(a: &RunArgs, platform: Option<PlatformChoice>) -> anyhow::Result<()> {
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
pub fn run_one(
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
    let results = analyzed(&store, outcome.run.as_str()).map_err(store_error)?;
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
    let Ok(store) = crate::cmd_results::existing_store(db) else {
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
