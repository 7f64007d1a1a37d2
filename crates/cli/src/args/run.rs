//! `isobench run`, with the files it exports at its end.

use std::path::PathBuf;

use clap::Args;
use isobench_experiment::PlatformChoice;

use super::{DbArgs, PlatformParser};

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
    /// A scenario given as text instead of a file or a preset (name, text): what `isobench
    /// tune` composes from its flags.
    #[arg(skip)]
    pub scenario_text: Option<(String, String)>,
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
