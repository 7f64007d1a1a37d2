//! Command-line arguments: the clap definition of every command, and nothing that runs one.
//! The commands (`crate::cmd_*`) take their arguments from here; nothing here takes anything
//! from them, so help, completions and man pages are all read from this one definition.
//!
//! [`Cli`] and [`Command`] are the command line; the flags several commands share
//! ([`DbArgs`], [`PlatformParser`]) are here too; each group of commands has a file.

mod docs;
mod host;
mod internal;
mod results;
mod run;
mod services;
mod tune;
mod workloads;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use isobench_experiment::PlatformChoice;
use isobench_platform::PlatformKind;

pub use docs::{CompletionsArgs, ManArgs};
pub use host::{
    CheckArgs, CheckWhat, CleanupArgs, DoctorArgs, EngineArg, ImageBuildArgs, ImageCommand, VmArgs,
    VmCommand, VmSetupArgs,
};
pub use internal::{ContainerInitArgs, MemcheckArgs, MemprotHelperArgs, MemprotJob, NetserveArgs};
pub use results::{
    CompareArgs, CompareFormat, ExportArgs, ExportFormat, ReportArgs, RunsArgs, ShowArgs,
};
pub use run::{ExportFiles, RunArgs};
pub use services::{AgentArgs, ServeArgs};
pub use tune::TuneArgs;
pub use workloads::{ListArgs, ProbeArgs, StressArgs};

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
    Image(ImageCommand),
    /// Run as an agent: execute workloads on a controller's command (JSON lines; see
    /// docs/agent-protocol.md). Speaks on stdin/stdout unless --unix, --serial or --tcp is
    /// given.
    Agent(AgentArgs),
    /// Run a scenario: probes in the victims while each stressor misbehaves in an aggressor,
    /// against a baseline; report the degradation of both with confidence intervals. Without
    /// a file: the built-in `quick` scenario.
    Run(RunArgs),
    /// Find the loosest setting of each isolation knob (a CPU quota, an I/O bandwidth, a
    /// memory protection) at which the victim's SLO still holds, by a noisy bisection over
    /// the knob's range: the setting with its interval, its cost to the aggressor, the
    /// knobs' frontiers, and how to apply it. A `kind = "tune"` scenario file, a preset
    /// (tune-cpu without one), or flags that change either.
    #[command(
        mut_arg("scenario", |a| a.help(
            "Scenario file with kind = \"tune\" (TOML, see docs/scenario.md). Without one: \
             the built-in `tune-cpu` scenario"
        )),
        mut_arg("preset", |a| a.help(
            "A built-in tune scenario instead of a file: tune-cpu (the default) or tune-io; \
             `isobench presets` lists them"
        ))
    )]
    Tune(TuneArgs),
    /// List the built-in presets (`isobench run --preset NAME`), each with what it is for,
    /// what it reproduces and how long it takes.
    Presets,
    /// List the runs stored in the database.
    Runs(RunsArgs),
    /// Compare stored runs cell by cell against the first: each difference with its interval
    /// and a corrected p-value, and what the runs do not share.
    Compare(CompareArgs),
    /// Print a stored run's results (the same report as the end of `isobench run`).
    Show(ShowArgs),
    /// Export a stored run's results as JSON (with raw samples), CSV or Markdown.
    Export(ExportArgs),
    /// Write a stored run's report: one self-contained HTML file with charts (opens with no
    /// network access).
    Report(ReportArgs),
    /// Print the shell completion script for bash, zsh, fish, elvish or powershell.
    Completions(CompletionsArgs),
    /// Print the man page of isobench (roff), or write one page per command into a
    /// directory.
    Man(ManArgs),
    /// Touch memory page by page and print the timings (run inside tenants by `run`).
    #[command(hide = true)]
    Memcheck(MemcheckArgs),
    /// Run one network server until stdin ends (the peer a network probe starts for itself).
    #[command(hide = true)]
    Netserve(NetserveArgs),
    /// Run as a container's first process: start the command, reap every orphan, pass
    /// signals on, exit with the command's code (the `oci` platform's init when the host has
    /// no static catatonit, tini or dumb-init).
    #[command(hide = true, name = "container-init")]
    ContainerInit(ContainerInitArgs),
    /// Serve the web UI and HTTP API: queue runs, watch them live, stop and resume them,
    /// browse, compare and download results (docs/server.md).
    Serve(ServeArgs),
    /// Prepare the `vm` platform: fetch the guest kernel, build the initramfs, check KVM.
    Vm(VmArgs),
    /// Check the kernel's memory protection as its own cgroup selftest does (cgroup v2,
    /// root): a parent limited to 200M, a child protected by 50M whose children hold page
    /// cache under their own protections, then pressure; each figure printed beside the
    /// kernel test's expected one.
    Check(CheckArgs),
    /// A helper process of `check` (page cache filler, one allocation).
    #[command(hide = true, name = "memprot-helper")]
    MemprotHelper(MemprotHelperArgs),
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
