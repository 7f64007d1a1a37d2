//! `isobench tune`: a `tune` scenario, from a file, a preset or flags.

use clap::Args;

use super::RunArgs;

/// `isobench tune`.
#[derive(Debug, Args)]
pub struct TuneArgs {
    /// The victim's probe (a name from `isobench list`), instead of the scenario's: its
    /// figure is what the SLO bounds.
    #[arg(long, value_name = "NAME", conflicts_with = "resume")]
    pub probe: Option<String>,
    /// The SLO on the victim's figure: `METRIC<=BOUND` (a p99 in ms: `lat_p99_ms<=10`),
    /// `METRIC>=BOUND` (a rate), `METRIC loss<=PCT` (at most PCT% worse than alone:
    /// `ops_per_sec loss<=5`), or `isol_p01>=PCT` (a `service` probe keeps PCT% of its
    /// target rate at the 1st percentile of its 100 ms windows: `isol_p01>=90`).
    #[arg(long, value_name = "SLO", conflicts_with = "resume")]
    pub slo: Option<String>,
    /// The aggressor's stressor (a name from `isobench list`) at full intensity, instead of
    /// the scenario's; repeat for several, each searched on its own.
    #[arg(long, value_name = "NAME", conflicts_with = "resume")]
    pub stressor: Vec<String>,
    /// A knob to search, instead of the scenario's: `TENANT.KEY=A..B`, a live limit key of
    /// a tenant (`batch.cpus=0.05..1`, `batch.io_write_bps=1M..200M`, `service.memory_low=
    /// 64M..1G`) between two settings; repeat for several. An aggressor's knob is tightest at
    /// its lower setting, a victim's (a protection) at its higher one.
    #[arg(long, value_name = "TENANT.KEY=A..B", conflicts_with = "resume")]
    pub knob: Vec<String>,
    /// The widest boundary interval to stop at, as a share of each knob's range (0.05).
    #[arg(long, value_name = "SHARE", conflicts_with = "resume")]
    pub resolution: Option<f64>,
    #[command(flatten)]
    pub run: RunArgs,
}
