//! The commands that serve others until stopped: `agent` and `serve`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use super::DbArgs;

/// `isobench agent`.
#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Listen on this unix socket path instead of stdio.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["tcp", "serial"])]
    pub unix: Option<PathBuf>,
    /// Serve on this serial port instead of stdio: a character device, or the name of a
    /// virtio-serial port (e.g. isobench.agent, found in /sys/class/virtio-ports). Waits for
    /// the host to connect. This is how the agent runs inside a VM guest.
    #[arg(long, value_name = "PATH", conflicts_with = "tcp")]
    pub serial: Option<PathBuf>,
    /// Listen on this TCP address (e.g. 127.0.0.1:7878). A token of at least 16 characters
    /// is required on every address, loopback included (ISOBENCH_AGENT_TOKEN, --token or
    /// --token-file).
    #[arg(long, value_name = "ADDR")]
    pub tcp: Option<String>,
    /// Token clients must present (TCP; at least 16 characters). Also read from
    /// ISOBENCH_AGENT_TOKEN, which does not show in process listings.
    #[arg(
        long,
        env = "ISOBENCH_AGENT_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// Run as a host agent: listen on this TCP address for coordinators (`isobench run
    /// --hosts`), which send whole scenarios to run on this host, one after another. Serves
    /// until SIGINT or SIGTERM. Needs --token-file.
    #[arg(
        long,
        value_name = "ADDR",
        conflicts_with_all = ["unix", "serial", "tcp", "token"],
        requires = "token_file"
    )]
    pub listen: Option<String>,
    /// Run as a host agent on standard input and output: one coordinator session, reached
    /// through a stream its platform already authenticates (a Kubernetes node's runner pod,
    /// started by `isobench run --platform k8s --nodes`, through `kubectl exec`). Runs the
    /// scenarios it is sent on this host, into --db.
    #[arg(
        long,
        conflicts_with_all = ["unix", "serial", "tcp", "token", "listen", "token_file"]
    )]
    pub runner: bool,
    /// File holding the token coordinators must present (at least 16 characters; readable
    /// by its owner only).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// With --listen or --runner: this host's results database, where its runs are stored (and can be
    /// resumed) before they are sent to the coordinator.
    #[command(flatten)]
    pub db: DbArgs,
}

/// `isobench serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port). A token is required unless the
    /// address is loopback.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR", value_parser = parse_listen)]
    pub listen: SocketAddr,
    /// File holding the token clients must present (Bearer or the login cookie); only its
    /// owner may read it (mode 0600). A missing file is created with a fresh random token.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    #[command(flatten)]
    pub db: DbArgs,
    /// Where the job queue and uploaded scenarios are kept (default: DB.serve/ beside the
    /// database).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

/// `--listen`: `IP:PORT` or `HOST:PORT` (the first address the name resolves to).
fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs as _;
    s.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            format!("`{s}` is not an address: write IP:PORT, e.g. 127.0.0.1:8080 (port 0 picks a free one)")
        })
}
