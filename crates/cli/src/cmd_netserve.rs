//! `isobench netserve KIND --bind ADDR` (hidden): one network server in a process of its own,
//! the peer a network probe starts for itself (`isobench_workloads::netserve::process`).
//!
//! It prints `{"event":"ready","addr":...}` on stdout once bound, serves until a line or the
//! end of stdin, then prints `{"event":"stopped",...}` with its counters and any failure.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use isobench_workloads::netserve::process::serve_until_stopped;
use isobench_workloads::netserve::{ServerKind, ServerOptions};

use crate::exit::bad_input;

/// `isobench netserve`.
#[derive(Debug, Args)]
pub struct NetserveArgs {
    /// Server kind: udp-echo, tcp-echo, tcp-sink, udp-sink, http[:<body bytes>],
    /// relay-forwarder:<ip:port>.
    pub kind: String,
    /// Address to bind, `ip:port` (port 0 picks a free one; the ready line has it).
    #[arg(long, value_name = "ADDR")]
    pub bind: SocketAddr,
    /// Pin every server thread to this CPU.
    #[arg(long, value_name = "CPU")]
    pub pin: Option<usize>,
    /// Longest a write (or a relay's connect to its next hop) may block, milliseconds.
    #[arg(long, default_value_t = 5000, value_name = "MS")]
    pub io_timeout_ms: u64,
}

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
