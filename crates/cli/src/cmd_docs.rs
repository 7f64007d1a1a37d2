//! `isobench completions SHELL` and `isobench man [--output DIR]`: the shell completion
//! script and the man pages, both generated from the one clap definition of the command line
//! ([`Cli`]), so they never disagree with `--help`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::CommandFactory as _;
use clap_mangen::Man;

use crate::args::{Cli, CompletionsArgs, ManArgs};

/// `isobench completions SHELL`.
pub fn completions(a: &CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "isobench", &mut out);
    crate::output::write_stdout(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// `isobench man [--output DIR]`.
pub fn man(a: &ManArgs) -> anyhow::Result<ExitCode> {
    let Some(dir) = &a.output else {
        let mut out = Vec::new();
        page(Cli::command()).render(&mut out)?;
        crate::output::write_stdout(&out)?;
        return Ok(ExitCode::SUCCESS);
    };
    std::fs::create_dir_all(dir).with_context(|| format!("--output {}", dir.display()))?;
    // Built, the subcommands know their full names (isobench-run) and so their pages' names.
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    for page in write_pages(&cmd, dir).with_context(|| format!("--output {}", dir.display()))? {
        eprintln!("isobench: wrote {}", page.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes the page of `cmd`, then those of its visible subcommands; returns the files.
fn write_pages(cmd: &clap::Command, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut written = vec![page(cmd.clone()).generate_to(dir)?];
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        written.extend(write_pages(sub, dir)?);
    }
    Ok(written)
}

/// The man page of one command; every page names isobench and its version as its source
/// (a subcommand has no version of its own).
fn page(cmd: clap::Command) -> Man {
    Man::new(cmd).source(concat!("isobench ", env!("CARGO_PKG_VERSION")))
}
