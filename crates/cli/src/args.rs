//! Command-line arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use isobench_experiment::PlatformChoice;
use isobench_platform::PlatformKind;
use isobench_report::Format;

/// Measure performance isolation: how much a misbehaving tenant slows down its neighbours.
#[derive(Debug, Parser)]
#[command(name = "isobench", version, about, long_about = None, max_term_width = 100)]
pub struct Cli {
    /// Print more of what isobench does on stderr, before the command: -v infos, -vv
    /// debug lines, -vvv traces (by default warnings and errors). RUST_LOG, when set,
    /// wins (RUST_LOG=debug, RUST_LOG=isobench_platform=trace).
    #[arg(long, short = 'v', action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Print fewer messages on stderr, before the command: -q errors only, -qq none
    /// (`run -q` is another flag: no progress). RUST_LOG, when set, wins.
    #[arg(long, short = 'q', action = clap::ArgAction::Count)]
    pub quiet: u8,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List every probe and stressor with its parameters and whether it can run here.
    List(ListArgs),
    /// Run one probe (a victim micro-benchmark) and print its metrics.
    Probe(ProbeArgs),
    /// Run one stressor (an aggressor) until the duration ends or Ctrl-C, then print ops/s.
    Stress(StressArgs),
    /// Report, for each platform and control, whether it works here and why not.
    Doctor(DoctorArgs),
    /// Remove what crashed or killed runs left behind (cgroups, namespaces, links,
    /// processes, files) and list it.
    Cleanup(CleanupArgs),
    /// Build the container image of the `oci` platform's agents (offline, from the static
    /// isobench binary and busybox) and print its tag.
    #[command(subcommand)]
    Image(crate::cmd_image::ImageCommand),
    /// Run as an agent: execute workloads on a controller's command (JSON lines; see
    /// docs/agent-protocol.md). Speaks on stdin/stdout unless --unix, --serial or --tcp is
    /// given.
    Agent(AgentArgs),
    /// Run a scenario: probes in the victims while each stressor misbehaves in an aggressor,
    /// against a baseline; report the degradation of both with confidence intervals. Without
    /// a file: the built-in `quick` scenario.
    Run(crate::cmd_run::RunArgs),
    /// List the built-in presets (`isobench run --preset NAME`), each with what it is for,
    /// what it reproduces and how long it takes.
    Presets,
    /// List the runs stored in the database.
    Runs(crate::cmd_results::RunsArgs),
    /// Compare stored runs cell by cell against the first: each difference with its interval
    /// and a corrected p-value, and what the runs do not share.
    Compare(crate::cmd_compare::CompareArgs),
    /// Print a stored run's results (the same report as the end of `isobench run`).
    Show(crate::cmd_results::ShowArgs),
    /// Export a stored run's results as JSON (with raw samples), CSV or Markdown.
    Export(crate::cmd_results::ExportArgs),
    /// Write a stored run's report: one self-contained HTML file with charts (opens with no
    /// network access).
    Report(crate::cmd_report::ReportArgs),
    /// Print the shell completion script for bash, zsh, fish, elvish or powershell.
    Completions(crate::cmd_docs::CompletionsArgs),
    /// Print the man page of isobench (roff), or write one page per command into a
    /// directory.
    Man(crate::cmd_docs::ManArgs),
    /// Touch memory page by page and print the timings (run inside tenants by `run`).
    #[command(hide = true)]
    Memcheck(crate::cmd_run::MemcheckArgs),
    /// Run one network server until stdin ends (the peer a network probe starts for itself).
    #[command(hide = true)]
    Netserve(crate::cmd_netserve::NetserveArgs),
    /// Run as a container's first process: start the command, reap every orphan, pass
    /// signals on, exit with the command's code (the `oci` platform's init when the host has
    /// no static catatonit, tini or dumb-init).
    #[command(hide = true, name = "container-init")]
    ContainerInit(ContainerInitArgs),
    /// Serve the web UI and HTTP API: queue runs, watch them live, stop and resume them,
    /// browse, compare and download results (docs/server.md).
    Serve(crate::cmd_serve::ServeArgs),
    /// Prepare the `vm` platform: fetch the guest kernel, build the initramfs, check KVM.
    Vm(crate::cmd_vm::VmArgs),
    /// Check the kernel's memory protection as its own cgroup selftest does (cgroup v2,
    /// root): a parent limited to 200M, a child protected by 50M whose children hold page
    /// cache under their own protections, then pressure; each figure printed beside the
    /// kernel test's expected one.
    Check(CheckArgs),
    /// A helper process of `check` (page cache filler, one allocation).
    #[command(hide = true, name = "memprot-helper")]
    MemprotHelper(MemprotHelperArgs),
}

/// `isobench check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// What to check.
    #[arg(value_enum)]
    pub what: CheckWhat,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// The checks of `isobench check`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum CheckWhat {
    /// memory.low (test_memcg_low).
    MemoryLow,
    /// memory.min (test_memcg_min).
    MemoryMin,
}

/// `isobench memprot-helper`.
#[derive(Debug, Args)]
pub struct MemprotHelperArgs {
    #[command(subcommand)]
    pub job: MemprotJob,
}

/// The helper's jobs.
#[derive(Debug, clap::Subcommand)]
pub enum MemprotJob {
    /// Bring CGROUP's usage to BYTES with page cache in an unlinked file in DIR, say
    /// `ready`, wait.
    FillPagecache {
        bytes: u64,
        dir: std::path::PathBuf,
        cgroup: std::path::PathBuf,
    },
    /// Bring CGROUP's usage to BYTES with anonymous memory, then exit.
    AllocAnon {
        bytes: u64,
        cgroup: std::path::PathBuf,
    },
}

/// `isobench container-init` (internal).
#[derive(Debug, Args)]
pub struct ContainerInitArgs {
    /// The command and its arguments (after `--`).
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<std::ffi::OsString>,
}

/// `isobench list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON (with schema version, tool version and host facts).
    #[arg(long)]
    pub json: bool,
}

/// `isobench probe`.
#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// Probe name (see `isobench list`).
    pub name: String,
    /// Set a parameter: `--set key=value` (repeatable).
    #[arg(long = "set", short = 's', value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// When a run is measuring on this host, wait for it to end instead of refusing (this
    /// command would disturb its figures).
    #[arg(
        long,
        env = "ISOBENCH_WAIT",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub wait: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Pin the measuring thread to this CPU.
    #[arg(long, value_name = "CPU")]
    pub pin: Option<usize>,
    /// Pin the peer process or thread (server, reader) to this CPU.
    #[arg(long, value_name = "CPU")]
    pub pin_peer: Option<usize>,
    /// Wall-time budget of one run, seconds; probes repeat their measurement within it.
    #[arg(long, default_value_t = 1.0, value_name = "SECS")]
    pub budget: f64,
    /// Directory for files (disk probes).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Repeat the whole probe this many times and report each run and the median.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub repeat: u32,
    /// Also return the main metrics as a series of windows of this many milliseconds
    /// (probes that support it; shown with --json).
    #[arg(long, value_name = "MS")]
    pub window: Option<f64>,
    /// Run inside a fresh tenant on this platform through an agent, instead of in this
    /// process.
    #[arg(long, value_name = "PLATFORM", value_parser = PlatformParser::tenant())]
    pub platform: Option<PlatformChoice>,
    /// Limits of that tenant, e.g. `cpus=1,memory=1G,pids=64,cpuset=0,io_write_bps=50M`.
    #[arg(long, value_name = "K=V,...", requires = "platform")]
    pub limits: Option<String>,
    /// In a tenant: the host sentinel kills the tenant when its heartbeat wakes later than
    /// this many milliseconds (default 1000).
    #[arg(long, value_name = "MS", requires = "platform", hide = true)]
    pub sentinel_threshold: Option<u64>,
    /// In a tenant: a drill of the host sentinel. This many seconds after the stressor
    /// starts, its threshold drops to zero, so its next heartbeat counts as a stall and it
    /// kills the tenant as on a real one; the JSON says how long that took.
    #[arg(long, value_name = "SECS", requires = "platform", hide = true)]
    pub sentinel_drill: Option<f64>,
}

/// `isobench stress`.
#[derive(Debug, Args)]
pub struct StressArgs {
    /// Stressor name (see `isobench list`).
    pub name: String,
    /// Intensity 0..=100 (each stressor documents what it maps to).
    #[arg(long, short = 'i', default_value_t = 100, value_name = "N")]
    pub intensity: u8,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long, short = 'd', value_name = "SECS")]
    pub duration: Option<f64>,
    /// Set a parameter: `--set key=value` (repeatable).
    #[arg(long = "set", short = 's', value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// When a run is measuring on this host, wait for it to end instead of refusing (this
    /// command would disturb its figures).
    #[arg(
        long,
        env = "ISOBENCH_WAIT",
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub wait: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Pin workers to these CPUs, round-robin (e.g. `0,1` or `0-1`).
    #[arg(long, value_name = "CPUS")]
    pub pin: Option<String>,
    /// Directory for files (disk stressor).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Allow fork bombs, memory hogs and disk floods to run on the host without a containing
    /// tenant. They are then capped (64 tasks, a quarter of usable memory, 1 GiB of files).
    #[arg(long)]
    pub allow_unsafe_host: bool,
    /// Run inside a fresh tenant on this platform through an agent, instead of in this
    /// process.
    #[arg(long, value_name = "PLATFORM", value_parser = PlatformParser::tenant())]
    pub platform: Option<PlatformChoice>,
    /// Limits of that tenant, e.g. `cpus=1,memory=1G,pids=64,cpuset=0,io_write_bps=50M`.
    #[arg(long, value_name = "K=V,...", requires = "platform")]
    pub limits: Option<String>,
    /// In a tenant: the host sentinel kills the tenant when its heartbeat wakes later than
    /// this many milliseconds (default 1000).
    #[arg(long, value_name = "MS", requires = "platform", hide = true)]
    pub sentinel_threshold: Option<u64>,
    /// In a tenant: a drill of the host sentinel. This many seconds after the stressor
    /// starts, its threshold drops to zero, so its next heartbeat counts as a stall and it
    /// kills the tenant as on a real one; the JSON says how long that took.
    #[arg(long, value_name = "SECS", requires = "platform", hide = true)]
    pub sentinel_drill: Option<f64>,
}

/// `isobench agent`.
#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Listen on this unix socket path instead of stdio.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["tcp", "serial"])]
    pub unix: Option<PathBuf>,
    /// Serve on this serial port instead of stdio: a character device, or the name of a
    /// virtio-serial port (e.g. isobench.agent, found in /sys/class/virtio-ports). Waits for
    /// the host to connect. This is how the agent runs inside a VM guest.
    #[arg(long, value_name = "PATH", conflicts_with = "tcp")]
    pub serial: Option<PathBuf>,
    /// Listen on this TCP address (e.g. 127.0.0.1:7878). A token of at least 16 characters
    /// is required on every address, loopback included (ISOBENCH_AGENT_TOKEN, --token or
    /// --token-file).
    #[arg(long, value_name = "ADDR")]
    pub tcp: Option<String>,
    /// Token clients must present (TCP; at least 16 characters). Also read from
    /// ISOBENCH_AGENT_TOKEN, which does not show in process listings.
    #[arg(
        long,
        env = "ISOBENCH_AGENT_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// Run as a host agent: listen on this TCP address for coordinators (`isobench run
    /// --hosts`), which send whole scenarios to run on this host, one after another. Serves
    /// until SIGINT or SIGTERM. Needs --token-file.
    #[arg(
        long,
        value_name = "ADDR",
        conflicts_with_all = ["unix", "serial", "tcp", "token"],
        requires = "token_file"
    )]
    pub listen: Option<String>,
    /// Run as a host agent on standard input and output: one coordinator session, reached
    /// through a stream its platform already authenticates (a Kubernetes node's runner pod,
    /// started by `isobench run --platform k8s --nodes`, through `kubectl exec`). Runs the
    /// scenarios it is sent on this host, into --db.
    #[arg(
        long,
        conflicts_with_all = ["unix", "serial", "tcp", "token", "listen", "token_file"]
    )]
    pub runner: bool,
    /// File holding the token coordinators must present (at least 16 characters; readable
    /// by its owner only).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// With --listen or --runner: this host's results database, where its runs are stored (and can be
    /// resumed) before they are sent to the coordinator.
    #[command(flatten)]
    pub db: DbArgs,
}

/// `isobench doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `isobench cleanup`.
#[derive(Debug, Args)]
pub struct CleanupArgs {
    /// Also remove objects of runs that are still alive.
    #[arg(long)]
    pub all: bool,
    /// The results database whose runs left `running` by a dead process are marked
    /// interrupted (nothing is created when the file does not exist).
    #[command(flatten)]
    pub db: DbArgs,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `--db FILE`, the results database: one definition for every command that reads or writes
/// results (`run`, `runs`, `show`, `export`).
#[derive(Debug, Clone, Args)]
pub struct DbArgs {
    /// Results database.
    #[arg(
        id = "db",
        long = "db",
        env = "ISOBENCH_DB",
        default_value = isobench_experiment::DEFAULT_DB,
        value_name = "FILE"
    )]
    pub path: PathBuf,
}

/// `--platform`: a platform of this build (from the platform table, so help, errors and
/// completions list every one with what it is), or `auto` where a run allows it.
#[derive(Debug, Clone, Copy)]
pub struct PlatformParser {
    auto: bool,
}

impl PlatformParser {
    /// `auto` or a platform (`isobench run`).
    pub fn run() -> PlatformParser {
        PlatformParser { auto: true }
    }

    /// A platform (`isobench probe` and `isobench stress`).
    pub fn tenant() -> PlatformParser {
        PlatformParser { auto: false }
    }
}

impl clap::builder::TypedValueParser for PlatformParser {
    type Value = PlatformChoice;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<PlatformChoice, clap::Error> {
        let s = value.to_string_lossy();
        if self.auto && s.eq_ignore_ascii_case("auto") {
            return Ok(PlatformChoice::Auto);
        }
        if let Ok(kind) = s.parse::<PlatformKind>() {
            return Ok(PlatformChoice::Named(kind));
        }
        // clap's own message: the flag, the value and the possible values.
        let values = clap::builder::PossibleValuesParser::new(self.possible_values().unwrap());
        values
            .parse_ref(cmd, arg, value)
            .map(|_| PlatformChoice::Auto)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        use clap::builder::PossibleValue;
        let auto = self.auto.then(|| {
            PossibleValue::new("auto")
                .help("the first platform that isolates and works here (cgroup as root), else host")
        });
        Some(Box::new(auto.into_iter().chain(
            isobench_platform::PLATFORMS.iter().map(|e| {
                PossibleValue::new(e.kind.name())
                    .help(e.summary)
                    .aliases(e.aliases.iter().copied())
            }),
        )))
    }
}

/// `--format` of `isobench export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// everything: estimates, flags, plan, host facts and every trial's raw samples
    Json,
    /// one row per degradation (victims and aggressors), or one section with --section
    Csv,
    /// the report's tables, for notes and pull requests (also `markdown`)
    #[value(name = "md", alias = "markdown")]
    Markdown,
}

impl ExportFormat {
    /// The value of `--format` that selects it.
    pub fn name(self) -> String {
        self.to_possible_value()
            .expect("no format is skipped")
            .get_name()
            .to_owned()
    }
}

impl From<ExportFormat> for Format {
    fn from(f: ExportFormat) -> Format {
        match f {
            ExportFormat::Json => Format::Json,
            ExportFormat::Csv => Format::Csv,
            ExportFormat::Markdown => Format::Markdown,
        }
    }
}
