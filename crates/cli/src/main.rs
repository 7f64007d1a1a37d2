//! `isobench`: measures how much a misbehaving tenant slows down its well-behaved neighbours.
//!
//! `main` only maps the outcome of [`run`] to an exit code; every command is parse -> plan ->
//! execute -> render in its own module.

/// `print!` for this crate, ahead of every module so that it replaces `std`'s: standard
/// output closed by its reader ends the command quietly (see [`output::print_stdout`])
/// instead of panicking with "failed printing to stdout: Broken pipe".
macro_rules! print {
    ($($arg:tt)*) => {
        $crate::output::print_stdout(format_args!($($arg)*))
    };
}

/// `println!` for this crate, as [`print!`] with a newline.
macro_rules! println {
    () => {
        $crate::output::print_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::print_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprint!` for this crate: standard error closed by its reader (`2>&1 | head -c 100`) or
/// failing loses the message instead of panicking (see [`output::print_stderr`]).
#[allow(unused_macros)]
macro_rules! eprint {
    ($($arg:tt)*) => {
        $crate::output::print_stderr(format_args!($($arg)*))
    };
}

/// `eprintln!` for this crate, as [`eprint!`] with a newline.
macro_rules! eprintln {
    () => {
        $crate::output::print_stderr(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::print_stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

mod args;
mod cmd_agent;
mod cmd_check;
mod cmd_compare;
mod cmd_docs;
mod cmd_doctor;
mod cmd_image;
mod cmd_list;
mod cmd_netserve;
mod cmd_probe;
mod cmd_report;
mod cmd_results;
mod cmd_run;
mod cmd_serve;
mod cmd_stress;
mod cmd_tune;
mod cmd_vm;
mod crossrun;
mod exit;
mod fleetrun;
mod hostsrun;
mod live;
mod logger;
mod mode;
mod nodesrun;
mod outfile;
mod output;
mod slot;
mod stores;
mod tenant;

use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;

/// Maps the outcome of [`run`] to an exit code. Standard output closed by its reader
/// (`isobench runs --json | head -1`) is a normal end: exit 0 and no message, ripgrep's
/// convention (docs/cli.md, "Exit codes"), whether it surfaced as an error or as the unwind
/// of a `print!`; standard output failing otherwise (a full disk) is an error. The error's
/// text may echo what the user gave (a tenant's name, a run id): its control characters
/// are shown escaped, never sent to the terminal.
fn main() -> ExitCode {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run));
    let err = match outcome {
        Ok(Ok(code)) => return code,
        Ok(Err(err)) if err.downcast_ref::<output::StdoutClosed>().is_some() => {
            return ExitCode::SUCCESS
        }
        Ok(Err(err)) => err,
        Err(payload) if payload.is::<output::StdoutClosed>() => return ExitCode::SUCCESS,
        Err(payload) => match payload.downcast::<output::StdoutFailed>() {
            Ok(failed) => anyhow::Error::new(*failed),
            Err(payload) => std::panic::resume_unwind(payload),
        },
    };
    let text = format!("{err:#}");
    eprintln!(
        "isobench: error: {}",
        isobench_common::escape_controls(&text, "\n\t")
    );
    exit::code_for(&err)
}

fn run() -> anyhow::Result<ExitCode> {
    let cli = args::Cli::parse();
    logger::init(cli.verbose, cli.quiet);
    if let Some(exe) = own_exe() {
        let file = std::fs::read_link(&exe).unwrap_or_else(|_| exe.clone());
        tracing::debug!("probes start their own servers from {}", file.display());
        isobench_workloads::ctx::set_default_server_exe(exe);
    }
    match cli.command {
        args::Command::List(a) => cmd_list::run(&a),
        args::Command::Probe(a) => cmd_probe::run(&a),
        args::Command::Stress(a) => cmd_stress::run(&a),
        args::Command::Agent(a) => cmd_agent::run(&a),
        args::Command::Doctor(a) => cmd_doctor::doctor(&a),
        args::Command::Cleanup(a) => cmd_doctor::cleanup(&a),
        args::Command::Image(a) => cmd_image::run(&a),
        args::Command::Presets => cmd_list::presets(),
        args::Command::Run(a) => cmd_run::run(&a),
        args::Command::Tune(a) => cmd_tune::tune(a),
        args::Command::Runs(a) => cmd_results::runs(&a),
        args::Command::Compare(a) => cmd_compare::run(&a),
        args::Command::Show(a) => cmd_results::show(&a),
        args::Command::Export(a) => cmd_results::export(&a),
        args::Command::Report(a) => cmd_report::run(&a),
        args::Command::Completions(a) => cmd_docs::completions(&a),
        args::Command::Man(a) => cmd_docs::man(&a),
        args::Command::Memcheck(a) => cmd_run::memcheck(&a),
        args::Command::Netserve(a) => cmd_netserve::run(&a),
        args::Command::ContainerInit(a) => {
            let code = isobench_platform::oci::init::run_own_init(&a.command)?;
            Ok(ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX)))
        }
        args::Command::Serve(a) => {
            cmd_serve::run(&a, own_exe().context("locating the isobench binary")?)
        }
        args::Command::Vm(a) => cmd_vm::run(&a),
        args::Command::Check(a) => cmd_check::run(&a),
        args::Command::MemprotHelper(a) => cmd_check::helper(&a),
    }
}

/// This binary, for the probes to start their own servers with (`isobench netserve`).
/// `/proc/self/exe` names the running file even after a rebuild has replaced or removed it
/// at its path, so a server is always the same build as its probe.
fn own_exe() -> Option<std::path::PathBuf> {
    let proc_exe = std::path::Path::new("/proc/self/exe");
    if proc_exe.exists() {
        return Some(proc_exe.to_path_buf());
    }
    std::env::current_exe().ok()
}
