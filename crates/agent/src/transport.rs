//! Transports: standard input/output, a unix socket, TCP.
//!
//! The protocol is the same on all of them (see [`crate::server::serve_connection`]); a
//! transport only decides where the bytes come from and who may connect.
//!
//! - stdio: the controller spawned the agent and owns its pipes. The protocol moves to a
//!   private copy of file descriptor 1 and descriptor 1 is pointed at standard error, so a
//!   stray print from a workload cannot corrupt the protocol stream.
//! - unix socket: the socket file is created mode 0600; a stale file is replaced, a live one
//!   is an error.
//! - TCP: a token is required on any address other than loopback.
//!
//! On socket transports connections are accepted concurrently, but only one session gets
//! past `hello` at a time (others are answered `busy`), and a connection that does not send
//! `hello` within [`AgentConfig::handshake_timeout`] is dropped. The agent returns when its
//! one accepted session ends, on `bye` or end of input, like the stdio agent.

use std::fs::File;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::FromRawFd;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use anyhow::{bail, Context};

use crate::protocol::{ErrorBody, ErrorCode, Token};
use crate::server::{run_session, serve_connection, AgentConfig, Failure, SessionEnd};
use crate::token::MIN_REMOTE_TOKEN_LEN;

/// Environment variable the agent and the controller read the TCP token from, so it does
/// not show in process listings.
pub const TOKEN_ENV: &str = "ISOBENCH_AGENT_TOKEN";

/// Where an agent listens (or a controller connects): `stdio`, `unix:<path>` or
/// `tcp:<host:port>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// Standard input and output (the controller spawned the agent).
    Stdio,
    /// A unix socket at this path.
    Unix(PathBuf),
    /// TCP at `host:port`; the token is required unless the address is loopback.
    Tcp {
        /// `host:port`.
        addr: String,
        /// The shared secret.
        token: Option<Token>,
    },
}

impl std::str::FromStr for Transport {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "stdio" || s == "-" {
            Ok(Transport::Stdio)
        } else if let Some(p) = s.strip_prefix("unix:") {
            if p.is_empty() {
                return Err("`unix:` needs a socket path, as in unix:/run/isobench/a.sock".into());
            }
            Ok(Transport::Unix(PathBuf::from(p)))
        } else if let Some(a) = s.strip_prefix("tcp:") {
            if !a.contains(':') {
                return Err(format!("`{s}`: write the TCP address as tcp:host:port"));
            }
            Ok(Transport::Tcp {
                addr: a.to_string(),
                token: None,
            })
        } else {
            Err(format!(
                "`{s}` is not a transport: use stdio, unix:<path> or tcp:<host:port>"
            ))
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Stdio => f.write_str("stdio"),
            Transport::Unix(p) => write!(f, "unix:{}", p.display()),
            Transport::Tcp { addr, .. } => write!(f, "tcp:{addr}"),
        }
    }
}

impl Transport {
    /// Sets the TCP token (no effect on other transports).
    pub fn with_token(self, token: Option<String>) -> Self {
        match self {
            Transport::Tcp { addr, .. } => Transport::Tcp {
                addr,
                token: token.map(Token),
            },
            t => t,
        }
    }
}

/// Serves one session on `transport` with the built-in catalogue.
pub fn serve(transport: &Transport) -> anyhow::Result<SessionEnd> {
    serve_with(transport, AgentConfig::default())
}

/// Serves one session on `transport`. A TCP transport's token, when set, overrides
/// `config.token`.
pub fn serve_with(transport: &Transport, mut config: AgentConfig) -> anyhow::Result<SessionEnd> {
    match transport {
        Transport::Stdio => serve_stdio_with(&config),
        Transport::Unix(p) => AgentListener::bind_unix(p, config)?.serve(),
        Transport::Tcp { addr, token } => {
            if token.is_some() {
                config.token = token.clone();
            }
            AgentListener::bind_tcp(addr.as_str(), config)?.serve()
        }
    }
}

/// Serves one session on standard input and output with the built-in catalogue.
pub fn serve_stdio() -> anyhow::Result<SessionEnd> {
    serve_stdio_with(&AgentConfig::default())
}

/// Serves one session on standard input and output.
pub fn serve_stdio_with(config: &AgentConfig) -> anyhow::Result<SessionEnd> {
    // SAFETY: plain descriptor calls; the duplicate is owned by the File below.
    let proto = unsafe { libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3) };
    if proto < 0 {
        return Err(io::Error::last_os_error()).context("duplicating standard output");
    }
    // SAFETY: descriptors 1 and 2 are valid for the life of the process.
    if unsafe { libc::dup2(2, 1) } < 0 {
        return Err(io::Error::last_os_error())
            .context("pointing standard output at standard error");
    }
    // SAFETY: `proto` is a fresh descriptor nobody else owns.
    let writer = unsafe { File::from_raw_fd(proto) };
    Ok(serve_connection(io::stdin().lock(), writer, config))
}

/// Serves one session on a unix socket at `path` with the built-in catalogue.
pub fn serve_unix(path: impl AsRef<Path>) -> anyhow::Result<SessionEnd> {
    AgentListener::bind_unix(path, AgentConfig::default())?.serve()
}

/// Serves one session on TCP with the built-in catalogue. `token` may be omitted only on a
/// loopback address.
pub fn serve_tcp(addr: impl ToSocketAddrs, token: Option<String>) -> anyhow::Result<SessionEnd> {
    let config = AgentConfig {
        token: token.map(Token),
        ..AgentConfig::default()
    };
    AgentListener::bind_tcp(addr, config)?.serve()
}

enum Socket {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

/// A bound socket transport, ready to serve (bind first to learn the address, then serve).
pub struct AgentListener {
    socket: Socket,
    config: AgentConfig,
}

impl AgentListener {
    /// Binds a TCP address. Refuses a non-loopback address without a token of at least
    /// [`MIN_REMOTE_TOKEN_LEN`] characters, and an empty token anywhere.
    pub fn bind_tcp(addr: impl ToSocketAddrs, config: AgentConfig) -> anyhow::Result<Self> {
        let addrs: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .context("resolving the agent's TCP address")?
            .collect();
        let Some(first) = addrs.first().copied() else {
            bail!("the agent's TCP address resolves to nothing");
        };
        check_tcp_token(&addrs, config.token.as_ref())?;
        let l = TcpListener::bind(&addrs[..])
            .with_context(|| format!("binding the agent to {first}"))?;
        Ok(AgentListener {
            socket: Socket::Tcp(l),
            config,
        })
    }

    /// Binds a unix socket at `path` (mode 0600). A stale socket file is replaced; a socket
    /// another agent is listening on is an error.
    pub fn bind_unix(path: impl AsRef<Path>, config: AgentConfig) -> anyhow::Result<Self> {
        let path = path.as_ref().to_path_buf();
        if let Ok(meta) = std::fs::symlink_metadata(&path) {
            if !meta.file_type().is_socket() {
                bail!(
                    "{} exists and is not a socket: choose another path",
                    path.display()
                );
            }
            if UnixStream::connect(&path).is_ok() {
                bail!(
                    "an agent is already listening on {}: stop it or choose another path",
                    path.display()
                );
            }
            std::fs::remove_file(&path)
                .with_context(|| format!("removing the stale socket {}", path.display()))?;
        }
        let l = UnixListener::bind(&path)
            .with_context(|| format!("binding the agent to {}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("restricting {} to its owner", path.display()))?;
        Ok(AgentListener {
            socket: Socket::Unix(l, path),
            config,
        })
    }

    /// The bound address: `host:port` for TCP, the path for a unix socket.
    pub fn local_addr(&self) -> String {
        match &self.socket {
            Socket::Tcp(l) => l
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_else(|_| "?".into()),
            Socket::Unix(_, p) => p.display().to_string(),
        }
    }

    /// Accepts connections until one session has passed `hello` and ended; returns how it
    /// ended.
    pub fn serve(self) -> anyhow::Result<SessionEnd> {
        let taken = Arc::new(AtomicBool::new(false));
        let result: Arc<Mutex<Option<SessionEnd>>> = Arc::new(Mutex::new(None));
        match &self.socket {
            Socket::Tcp(l) => l.set_nonblocking(true)?,
            Socket::Unix(l, _) => l.set_nonblocking(true)?,
        }
        loop {
            if let Some(end) = result.lock().unwrap_or_else(|e| e.into_inner()).take() {
                return Ok(end);
            }
            let accepted = match &self.socket {
                Socket::Tcp(l) => l.accept().map(|(s, _)| Conn::Tcp(s)),
                Socket::Unix(l, _) => l.accept().map(|(s, _)| Conn::Unix(s)),
            };
            let conn = match accepted {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    thread::sleep(Duration::from_millis(10));
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if is_transient_accept_error(&e) => {
                    thread::sleep(Duration::from_millis(50));
                    continue;
                }
                Err(e) => return Err(e).context("accepting an agent connection"),
            };
            let config = self.config.clone();
            let taken = taken.clone();
            let result = result.clone();
            thread::Builder::new()
                .name("agent-session".into())
                .spawn(move || {
                    if let Some(end) = conn.session(&config, &taken) {
                        *result.lock().unwrap_or_else(|e| e.into_inner()) = Some(end);
                    }
                })
                .context("starting a session thread")?;
        }
    }
}

impl Drop for AgentListener {
    fn drop(&mut self) {
        if let Socket::Unix(_, p) = &self.socket {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn is_transient_accept_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM | libc::ECONNABORTED)
    )
}

fn check_tcp_token(addrs: &[SocketAddr], token: Option<&Token>) -> anyhow::Result<()> {
    if token.is_some_and(|t| t.0.is_empty()) {
        bail!("the agent token is empty: pass a real secret (for example 32 random hex digits)");
    }
    let remote = addrs.iter().find(|a| !a.ip().is_loopback());
    if let Some(a) = remote {
        match token {
            None => bail!(
                "refusing to listen on {a} without a token: anything reachable from other hosts \
                 requires one (pass a token of at least {MIN_REMOTE_TOKEN_LEN} characters, or \
                 bind 127.0.0.1)"
            ),
            Some(t) if t.0.chars().count() < MIN_REMOTE_TOKEN_LEN => bail!(
                "the agent token is too short for {a}: use at least {MIN_REMOTE_TOKEN_LEN} \
                 characters"
            ),
            Some(_) => {}
        }
    }
    Ok(())
}

enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Conn {
    /// Serves one connection; `Some` when it was the accepted session.
    fn session(self, config: &AgentConfig, taken: &AtomicBool) -> Option<SessionEnd> {
        let mut won = false;
        let end = match self {
            Conn::Tcp(s) => {
                let _ = s.set_nodelay(true);
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(config.handshake_timeout));
                let (r, w) = match (s.try_clone(), s.try_clone()) {
                    (Ok(r), Ok(w)) => (r, w),
                    _ => return None,
                };
                let end = run_session(r, w, config, &mut || {
                    claim(taken, &mut won)?;
                    let _ = s.set_read_timeout(None);
                    Ok(())
                });
                let _ = s.shutdown(std::net::Shutdown::Both);
                end
            }
            Conn::Unix(s) => {
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(config.handshake_timeout));
                let (r, w) = match (s.try_clone(), s.try_clone()) {
                    (Ok(r), Ok(w)) => (r, w),
                    _ => return None,
                };
                let end = run_session(r, w, config, &mut || {
                    claim(taken, &mut won)?;
                    let _ = s.set_read_timeout(None);
                    Ok(())
                });
                let _ = s.shutdown(std::net::Shutdown::Both);
                end
            }
        };
        won.then_some(end)
    }
}

/// Takes the one session slot of a listener.
fn claim(taken: &AtomicBool, won: &mut bool) -> Result<(), Failure> {
    if taken
        .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return Err(Box::new(ErrorBody::new(
            ErrorCode::Busy,
            "another controller is already connected to this agent",
        )));
    }
    *won = true;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(s: &str) -> Vec<SocketAddr> {
        vec![s.parse().unwrap()]
    }

    #[test]
    fn transports_parse_and_print() {
        for t in [
            "stdio",
            "unix:/tmp/a.sock",
            "tcp:127.0.0.1:7000",
            "tcp:[::1]:7",
        ] {
            assert_eq!(t.parse::<Transport>().unwrap().to_string(), t);
        }
        assert!("tcp:7000".parse::<Transport>().is_err());
        assert!("unix:".parse::<Transport>().is_err());
        let e = "vsock:3:7000".parse::<Transport>().unwrap_err();
        assert!(e.contains("stdio, unix:<path> or tcp:<host:port>"), "{e}");
        let t = "tcp:127.0.0.1:1"
            .parse::<Transport>()
            .unwrap()
            .with_token(Some("x".into()));
        assert!(matches!(t, Transport::Tcp { token: Some(_), .. }));
    }

    #[test]
    fn token_rules() {
        let long = Token("0123456789abcdef".into());
        let short = Token("abc".into());
        assert!(check_tcp_token(&addrs("127.0.0.1:0"), None).is_ok());
        assert!(check_tcp_token(&addrs("[::1]:0"), Some(&short)).is_ok());
        let e = check_tcp_token(&addrs("0.0.0.0:0"), None).unwrap_err();
        assert!(e.to_string().contains("without a token"), "{e}");
        assert!(check_tcp_token(&addrs("0.0.0.0:0"), Some(&short)).is_err());
        assert!(check_tcp_token(&addrs("0.0.0.0:0"), Some(&long)).is_ok());
        assert!(check_tcp_token(&addrs("127.0.0.1:0"), Some(&Token(String::new()))).is_err());
    }
}
