//! `isobench completions` and `isobench man`.

use std::path::PathBuf;

use clap::Args;
use clap_complete::Shell;

/// `isobench completions`.
#[derive(Debug, Args)]
#[command(after_help = "Install, for example:\n  \
    bash: isobench completions bash > ~/.local/share/bash-completion/completions/isobench\n  \
    zsh:  isobench completions zsh > ~/.zfunc/_isobench   (with fpath+=~/.zfunc)\n  \
    fish: isobench completions fish > ~/.config/fish/completions/isobench.fish")]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_name = "SHELL")]
    pub shell: Shell,
}

/// `isobench man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write isobench.1 and one page per command (isobench-run.1, ...) into this directory
    /// (created if missing) instead of printing isobench.1 to standard output.
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output: Option<PathBuf>,
}
