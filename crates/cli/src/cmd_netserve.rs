//! `isobench netserve KIND --bind ADDR` (hidden): one network server in a process of its own,
//! the peer a network probe starts for itself (`isobench_workloads::netserve::process`).
//!
//! It prints `{"event":"ready","addr":...}` on stdout once bound, serves until a line or the
//! end of stdin, then prints `{"event":"stopped",...}` with its counters and any failure.

use std::process::ExitCode;
use std::time::Duration;

use isobench_workloads::netserve::process::serve_until_stopped;
use isobench_workloads::netserve::{ServerKind, ServerOptions};

use crate::args::NetserveArgs;
use crate::exit::bad_input;

pub fn run(a: &NetserveArgs) -> anyhow::Result<ExitCode> {
    let kind: ServerKind = a.kind.parse().map_err(bad_input)?;
    // Started as /proc/self/exe, the process would be listed as `exe`.
    let _ = std::fs::write("/proc/self/comm", "isobench");
    let opts = ServerOptions {
        pin: a.pin,
        io_timeout: Duration::from_millis(a.io_timeout_ms.max(1)),
    };
    serve_until_stopped(kind, a.bind, opts, std::io::stdin(), std::io::stdout())?;
    Ok(ExitCode::SUCCESS)
}
