//! Shared output pieces: the JSON envelope every document carries, workload lookup with
//! "did you mean", number formatting, standard output that may be a closed pipe, and the
//! style of the report on this terminal.

use std::io::{IsTerminal as _, Write as _};

use isobench_report::Style;
use isobench_workloads::{
    nearest_names, HostFacts, Probe, Stressor, PROBES, SCHEMA_VERSION, STRESSORS,
};
use serde_json::{json, Value};

use crate::exit::bad_input;

/// The fields every JSON document starts with: schema version, tool version, host facts.
pub fn envelope(kind: &str) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("schema_version".into(), json!(SCHEMA_VERSION));
    m.insert("tool".into(), json!("isobench"));
    m.insert("tool_version".into(), json!(env!("CARGO_PKG_VERSION")));
    m.insert("kind".into(), json!(kind));
    m.insert(
        "host".into(),
        serde_json::to_value(HostFacts::detect()).unwrap_or(Value::Null),
    );
    m
}

/// Standard output was closed by its reader (`isobench runs --json | head -1`): the normal
/// end of a command whose output nobody wants any more, not a failure. `main` exits 0 on it,
/// quietly, as ripgrep does.
#[derive(Debug, thiserror::Error)]
#[error("standard output was closed")]
pub struct StdoutClosed;

/// Writes `bytes` to standard output; a closed pipe is [`StdoutClosed`].
pub fn write_stdout(bytes: &[u8]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(StdoutClosed.into()),
        Err(e) => Err(StdoutFailed(e).into()),
        Ok(()) => Ok(()),
    }
}

/// Standard output could not be written for another reason than its reader leaving (a
/// full disk, an I/O error): the command fails with this error.
#[derive(Debug, thiserror::Error)]
#[error("writing to standard output: {0}")]
pub struct StdoutFailed(pub std::io::Error);

/// What the crate's `print!` and `println!` (defined in `main.rs`) do: write to standard
/// output, and on a closed pipe unwind to `main` with a [`StdoutClosed`] payload, which runs
/// every destructor on the way (tenants are removed) and prints no panic message
/// (`resume_unwind` skips the panic hook). Any other write error unwinds the same way with
/// [`StdoutFailed`], which `main` reports as the command's error.
pub fn print_stdout(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    match out.write_fmt(args) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            drop(out);
            std::panic::resume_unwind(Box::new(StdoutClosed))
        }
        Err(e) => {
            drop(out);
            std::panic::resume_unwind(Box::new(StdoutFailed(e)))
        }
    }
}

/// What the crate's `eprint!` and `eprintln!` (defined in `main.rs`) do: write to standard
/// error, and lose the text when that fails (its reader gone, `2>&1 | head`): there is
/// nowhere left to say anything, and the command goes on to its end and its exit code
/// (`std`'s `eprintln!` panics instead, exit 101).
pub fn print_stderr(args: std::fmt::Arguments<'_>) {
    let _ = std::io::stderr().lock().write_fmt(args);
}

/// Prints a JSON value, pretty, to stdout.
pub fn print_json(v: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).expect("JSON values serialize")
    );
}

/// Finds a probe or explains the nearest names.
pub fn find_probe(name: &str) -> anyhow::Result<&'static dyn Probe> {
    if let Some(p) = isobench_workloads::probe(name) {
        return Ok(p);
    }
    if isobench_workloads::stressor(name).is_some() {
        return Err(bad_input(format!(
            "`{name}` is a stressor, not a probe: run `isobench stress {name}`"
        )));
    }
    Err(bad_input(unknown(
        "probe",
        name,
        PROBES.iter().map(|p| p.name()),
    )))
}

/// Finds a stressor or explains the nearest names.
pub fn find_stressor(name: &str) -> anyhow::Result<&'static dyn Stressor> {
    if let Some(s) = isobench_workloads::stressor(name) {
        return Ok(s);
    }
    if isobench_workloads::probe(name).is_some() {
        return Err(bad_input(format!(
            "`{name}` is a probe, not a stressor: run `isobench probe {name}`"
        )));
    }
    Err(bad_input(unknown(
        "stressor",
        name,
        STRESSORS.iter().map(|s| s.name()),
    )))
}

fn unknown<'a>(what: &str, name: &str, all: impl Iterator<Item = &'a str> + Clone) -> String {
    let near = nearest_names(name, all.clone());
    let hint = if near.is_empty() {
        format!("known {what}s: {}", all.collect::<Vec<_>>().join(", "))
    } else {
        format!("did you mean `{}`?", near.join("`, `"))
    };
    format!("unknown {what} `{name}`; {hint} (`isobench list` shows every workload)")
}

/// Formats a value with about four significant digits.
pub fn fmt_value(v: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.4}")
    }
}

/// Parses a CPU list (`0`, `0,2`, `0-3`, `0-1,4`) with the platform's parser.
pub fn parse_cpu_list(s: &str) -> anyhow::Result<Vec<usize>> {
    let list = isobench_platform::CpuList::parse(s).map_err(|e| {
        bad_input(format!(
            "`{s}` is not a CPU list ({e}): write it like 0, 0,2 or 0-3"
        ))
    })?;
    if list.is_empty() {
        return Err(bad_input(format!(
            "`{s}` names no CPU: write it like 0, 0,2 or 0-3"
        )));
    }
    Ok(list.iter().map(|c| c as usize).collect())
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
