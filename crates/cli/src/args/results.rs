//! The commands that read stored runs: `runs`, `show`, `export`, `compare` and `report`.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use isobench_report::Format;

use super::DbArgs;

/// `isobench runs`.
#[derive(Debug, Args)]
pub struct RunsArgs {
    /// Print JSON (with schema version and tool version): every run's summary under `runs`.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub db: DbArgs,
}

/// `isobench show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The run: its id, `latest` (the run started last), or the start of an id that no other
    /// run shares (of the whole id or of its last part, e.g. `c87b`); see `isobench runs`.
    pub run_id: String,
    /// Print JSON: the document of `isobench export RUN_ID --format json`.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub db: DbArgs,
}

/// `isobench export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The run: its id, `latest` (the run started last), or the start of an id that no other
    /// run shares (of the whole id or of its last part, e.g. `c87b`); see `isobench runs`.
    pub run_id: String,
    /// What to write.
    #[arg(long, short = 'f', default_value = "json", value_name = "FORMAT")]
    pub format: ExportFormat,
    /// Write to this file instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// With --format csv: one of the kind's own sections (a curve, a pairwise grid) instead
    /// of the degradations; `isobench show` lists them.
    #[arg(long, value_name = "ID")]
    pub section: Option<String>,
    /// With --format json: every trial's window series too (the raw per-window values of
    /// on/off trials, most of a run's bytes); left out otherwise.
    #[arg(long)]
    pub series: bool,
    #[command(flatten)]
    pub db: DbArgs,
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

/// `isobench compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The runs (see `isobench runs`), each by its id, `latest`, or the start of an id that
    /// no other run shares: the first is the reference, each other run is compared against
    /// it. One run of a set run across platforms (`run --platform a,b,...`) stands for its
    /// whole set. A run given twice is refused.
    #[arg(value_name = "RUN_ID", num_args = 1.., required = true)]
    pub runs: Vec<String>,
    /// text (the tables as `show` prints them), html (one self-contained file with the runs
    /// side by side and the differences as charts), md, json (the comparison document) or
    /// csv (one row per compared cell).
    #[arg(long, short = 'f', value_enum, default_value_t = CompareFormat::Text)]
    pub format: CompareFormat,
    /// Write to this file instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub db: DbArgs,
}

/// What `isobench compare` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompareFormat {
    /// Tables for the terminal.
    Text,
    /// One self-contained HTML file: the runs side by side and each difference with its
    /// interval, as charts, then every table.
    Html,
    /// Markdown.
    #[value(alias = "markdown")]
    Md,
    /// The comparison document, with its schema version.
    Json,
    /// One row per compared cell.
    Csv,
}

/// `isobench report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The run: its id, `latest` (the run started last), or the start of an id that no other
    /// run shares (of the whole id or of its last part, e.g. `c87b`); see `isobench runs`.
    pub run_id: String,
    /// Write the report here (default: isobench-RUN_ID.html in the current directory).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub db: DbArgs,
}
