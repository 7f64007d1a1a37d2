//! The commands of single workloads: `list`, `probe` and `stress`, the last two in this
//! process or in a fresh tenant.

use std::path::PathBuf;

use clap::Args;
use isobench_experiment::PlatformChoice;

use super::PlatformParser;

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
    #[command(flatten)]
    pub flags: WorkloadFlags,
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
    #[command(flatten)]
    pub tenant: TenantArgs,
}

/// The flags `isobench probe` and `isobench stress` share: the workload's parameters, how
/// to treat a run measuring on this host, and the output's form.
#[derive(Debug, Args)]
pub struct WorkloadFlags {
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
    #[command(flatten)]
    pub flags: WorkloadFlags,
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
    #[command(flatten)]
    pub tenant: TenantArgs,
}

/// `--platform`, `--limits` and the sentinel's flags of `isobench probe` and `isobench stress`:
/// a fresh tenant to run the workload in, instead of this process.
#[derive(Debug, Args)]
pub struct TenantArgs {
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
