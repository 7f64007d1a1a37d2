//! The hidden commands that isobench starts in other processes: `memcheck` (in tenants),
//! `netserve` (a network probe's peer), `container-init` and `memprot-helper`.

use std::net::SocketAddr;

use clap::Args;

/// `isobench memcheck` (internal).
#[derive(Debug, Args)]
pub struct MemcheckArgs {
    /// Bytes to touch.
    pub bytes: u64,
}

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

/// `isobench container-init` (internal).
#[derive(Debug, Args)]
pub struct ContainerInitArgs {
    /// The command and its arguments (after `--`).
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<std::ffi::OsString>,
}

/// `isobench memprot-helper`.
#[derive(Debug, Args)]
pub struct MemprotHelperArgs {
    #[command(subcommand)]
    pub job: MemprotJob,
}

/// The helper's jobs.
#[derive(Debug, clap::Subcommand)]
pub enum MemprotJob {
    /// Bring CGROUP's usage to BYTES with page cache in an unlinked file in DIR, say
    /// `ready`, wait.
    FillPagecache {
        bytes: u64,
        dir: std::path::PathBuf,
        cgroup: std::path::PathBuf,
    },
    /// Bring CGROUP's usage to BYTES with anonymous memory, then exit.
    AllocAnon {
        bytes: u64,
        cgroup: std::path::PathBuf,
    },
}
