//! Transports: standard input/output, a unix socket, TCP, a serial port.
//!
//! The protocol is the same on all of them (see [`crate::server::serve_connection`]); a
//! transport only decides where the bytes come from and who may connect.
//!
//! - stdio: the controller spawned the agent and owns its pipes. The protocol moves to a
//!   private copy of file descriptor 1 and descriptor 1 is pointed at standard error, so a
//!   stray print from a workload cannot corrupt the protocol stream.
//! - unix socket: the socket file is created mode 0600; a stale file is replaced, a live one
//!   is an error.
//! - TCP: a token of at least [`MIN_TOKEN_LEN`] characters is required on every address,
//!   loopback included: a loopback port is open to every local user and to every web page the
//!   machine's browser shows (a page can send an HTTP request, whose body may hold JSON
//!   lines, to `127.0.0.1`). Before `hello` has passed, the first line that is not a `hello`
//!   with the token closes the connection, so nothing in an HTTP request is ever run; a
//!   refused connection does not end the agent.
//! - serial: a character device, in practice a VM guest's virtio-serial port whose host end
//!   is a socket only the controller can open. The agent waits until the host end is
//!   connected (the port reports hang-up until then), then serves one session on it.
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
use crate::token::{check_token_strength, MIN_TOKEN_LEN};

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
    /// A serial port (a character device such as a guest's virtio-serial port): a path, or
    /// the name of a virtio-serial port (`isobench.agent`), looked up in
    /// `/sys/class/virtio-ports`.
    Serial(PathBuf),
    /// TCP at `host:port`; the token is required on every address.
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
        } else if let Some(p) = s.strip_prefix("serial:") {
            if p.is_empty() {
                return Err(
                    "`serial:` needs a device path or port name, as in serial:isobench.agent"
                        .into(),
                );
            }
            Ok(Transport::Serial(PathBuf::from(p)))
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
                "`{s}` is not a transport: use stdio, unix:<path>, serial:<device> or tcp:<host:port>"
            ))
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Stdio => f.write_str("stdio"),
            Transport::Unix(p) => write!(f, "unix:{}", p.display()),
            Transport::Serial(p) => write!(f, "serial:{}", p.display()),
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
        Transport::Serial(p) => serve_serial_with(p, &config, SERIAL_CONNECT_TIMEOUT),
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

/// Serves one session on TCP with the built-in catalogue. `token` is required (at least
/// [`MIN_TOKEN_LEN`] characters), on loopback too.
pub fn serve_tcp(addr: impl ToSocketAddrs, token: Option<String>) -> anyhow::Result<SessionEnd> {
    let config = AgentConfig {
        token: token.map(Token),
        ..AgentConfig::default()
    };
    AgentListener::bind_tcp(addr, config)?.serve()
}

/// How long a serial agent waits for the host to connect to its port before giving up.
pub const SERIAL_CONNECT_TIMEOUT: Duration = Duration::from_secs(600);

/// Where virtio-serial ports are listed, each with its `name`.
const VIRTIO_PORTS: &str = "/sys/class/virtio-ports";

/// The device of a serial transport: `path` itself when it exists, else the virtio-serial
/// port whose name is the last component of `path` (`/dev/virtio-ports/isobench.agent` and
/// `isobench.agent` both find `/dev/vportNpM` named `isobench.agent` without udev).
pub fn resolve_serial(path: &Path) -> anyhow::Result<PathBuf> {
    resolve_serial_in(path, Path::new(VIRTIO_PORTS), Path::new("/dev"))
}

fn resolve_serial_in(path: &Path, ports: &Path, dev: &Path) -> anyhow::Result<PathBuf> {
    if path.exists() {
        return Ok(path.to_path_buf());
    }
    let Some(want) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        bail!("{} is not a serial device", path.display());
    };
    let mut names = Vec::new();
    if let Ok(rd) = std::fs::read_dir(ports) {
        for e in rd.flatten() {
            let name = std::fs::read_to_string(e.path().join("name")).unwrap_or_default();
            let name = name.trim();
            if name == want {
                return Ok(dev.join(e.file_name()));
            }
            if !name.is_empty() {
                names.push(name.to_string());
            }
        }
    }
    bail!(
        "no serial device {} and no virtio-serial port named `{want}` (ports: {}); start the \
         VM with `-device virtserialport,name={want},...`",
        path.display(),
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    )
}

/// Serves one session on a serial device (a path or a virtio-serial port name) with the
/// built-in catalogue, waiting up to `connect_timeout` for the host to connect.
pub fn serve_serial(
    path: impl AsRef<Path>,
    connect_timeout: Duration,
) -> anyhow::Result<SessionEnd> {
    serve_serial_with(path.as_ref(), &AgentConfig::default(), connect_timeout)
}

/// Serves one session on a serial device: waits until the host end is connected, then runs
/// the protocol over it until `bye` or until the host goes away.
pub fn serve_serial_with(
    path: &Path,
    config: &AgentConfig,
    connect_timeout: Duration,
) -> anyhow::Result<SessionEnd> {
    let dev = resolve_serial(path)?;
    let port = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&dev)
        .with_context(|| format!("opening the serial port {}", dev.display()))?;
    wait_for_host(&port, connect_timeout)
        .with_context(|| format!("waiting for the host on {}", dev.display()))?;
    let writer = port
        .try_clone()
        .with_context(|| format!("duplicating {}", dev.display()))?;
    Ok(serve_connection(port, writer, config))
}

/// Waits until the other end of a serial port is connected. A virtio-serial port reports
/// hang-up while its host end is closed (a read would return end of file at once); a plain
/// serial line never does, so it is taken as connected.
fn wait_for_host(port: &File, timeout: Duration) -> anyhow::Result<()> {
    use std::os::fd::AsRawFd;
    let end = std::time::Instant::now() + timeout;
    loop {
        let mut p = libc::pollfd {
            fd: port.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut p, 1, 100) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e).context("poll");
        }
        let hung_up = n > 0 && p.revents & libc::POLLHUP != 0 && p.revents & libc::POLLIN == 0;
        if !hung_up {
            return Ok(());
        }
        if std::time::Instant::now() >= end {
            bail!("nobody connected within {timeout:?}");
        }
        thread::sleep(Duration::from_millis(50));
    }
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
    /// Binds a TCP address. Refuses to, on any address (loopback included), without a token
    /// of at least [`MIN_TOKEN_LEN`] characters.
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
        self.set_nonblocking()?;
        loop {
            if let Some(end) = result.lock().unwrap_or_else(|e| e.into_inner()).take() {
                return Ok(end);
            }
            let Some(conn) = self.accept()? else {
                continue;
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

    /// Serves every connection, each in a session of its own and at the same time, until
    /// `stop` is raised (a host agent, which coordinators come to one after another).
    pub fn serve_forever(self, stop: &AtomicBool) -> anyhow::Result<()> {
        self.set_nonblocking()?;
        while !stop.load(Ordering::SeqCst) {
            let Some(conn) = self.accept()? else {
                continue;
            };
            let config = self.config.clone();
            thread::Builder::new()
                .name("agent-session".into())
                .spawn(move || conn.session(&config, &AtomicBool::new(false)))
                .context("starting a session thread")?;
        }
        Ok(())
    }

    fn set_nonblocking(&self) -> io::Result<()> {
        match &self.socket {
            Socket::Tcp(l) => l.set_nonblocking(true),
            Socket::Unix(l, _) => l.set_nonblocking(true),
        }
    }

    /// The next connection; `None` after a short sleep when there is none yet.
    fn accept(&self) -> anyhow::Result<Option<Conn>> {
        let accepted = match &self.socket {
            Socket::Tcp(l) => l.accept().map(|(s, _)| Conn::Tcp(s)),
            Socket::Unix(l, _) => l.accept().map(|(s, _)| Conn::Unix(s)),
        };
        match accepted {
            Ok(c) => Ok(Some(c)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(10));
                Ok(None)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(None),
            Err(e) if is_transient_accept_error(&e) => {
                thread::sleep(Duration::from_millis(50));
                Ok(None)
            }
            Err(e) => Err(e).context("accepting an agent connection"),
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

/// A TCP agent needs a token on every address: loopback is reachable by every local user
/// and by any web page open in a browser on this machine.
fn check_tcp_token(addrs: &[SocketAddr], token: Option<&Token>) -> anyhow::Result<()> {
    let shown = addrs
        .first()
        .map_or_else(|| "this address".to_string(), |a| a.to_string());
    let Some(token) = token else {
        bail!(
            "refusing to listen on {shown} without a token: every TCP agent needs one, also on \
             loopback (local users and web pages can reach it); set {TOKEN_ENV} (or pass \
             --token) to at least {MIN_TOKEN_LEN} random characters, e.g. `export \
             {TOKEN_ENV}=$(head -c 24 /dev/urandom | base64)`, or use --unix PATH"
        );
    };
    if let Err(why) = check_token_strength(&token.0) {
        bail!("the agent token for {shown} is too weak: {why}");
    }
    Ok(())
}

enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

/// What a session needs of a socket: clones for the two halves, a read timeout, shutdown.
trait Stream: io::Read + io::Write + Send + Sized + 'static {
    fn try_clone(&self) -> io::Result<Self>;
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()>;
    fn shutdown(&self) -> io::Result<()>;
}

impl Stream for TcpStream {
    fn try_clone(&self) -> io::Result<Self> {
        TcpStream::try_clone(self)
    }
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        TcpStream::set_read_timeout(self, t)
    }
    fn shutdown(&self) -> io::Result<()> {
        TcpStream::shutdown(self, std::net::Shutdown::Both)
    }
}

impl Stream for UnixStream {
    fn try_clone(&self) -> io::Result<Self> {
        UnixStream::try_clone(self)
    }
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        UnixStream::set_read_timeout(self, t)
    }
    fn shutdown(&self) -> io::Result<()> {
        UnixStream::shutdown(self, std::net::Shutdown::Both)
    }
}

/// The reading half of a connection that has not passed `hello` yet: every read waits at
/// most until one deadline for the whole handshake, so a peer that trickles a byte at a
/// time cannot hold the connection open (a read timeout alone restarts on every byte).
struct Handshake<S> {
    s: S,
    deadline: std::time::Instant,
    passed: Arc<AtomicBool>,
}

impl<S: Stream> io::Read for Handshake<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !self.passed.load(Ordering::SeqCst) {
            let left = self
                .deadline
                .saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(io::ErrorKind::TimedOut.into());
            }
            self.s.set_read_timeout(Some(left))?;
        }
        self.s.read(buf)
    }
}

impl Conn {
    /// Serves one connection; `Some` when it was the accepted session.
    fn session(self, config: &AgentConfig, taken: &AtomicBool) -> Option<SessionEnd> {
        match self {
            Conn::Tcp(s) => {
                let _ = s.set_nodelay(true);
                let _ = s.set_nonblocking(false);
                serve_stream(s, config, taken)
            }
            Conn::Unix(s) => {
                let _ = s.set_nonblocking(false);
                serve_stream(s, config, taken)
            }
        }
    }
}

/// Runs the protocol on one accepted connection; `Some` when it was the accepted session.
fn serve_stream<S: Stream>(s: S, config: &AgentConfig, taken: &AtomicBool) -> Option<SessionEnd> {
    let mut won = false;
    let passed = Arc::new(AtomicBool::new(false));
    let (r, w) = match (s.try_clone(), s.try_clone()) {
        (Ok(r), Ok(w)) => (r, w),
        _ => return None,
    };
    let reader = Handshake {
        s: r,
        deadline: std::time::Instant::now() + config.handshake_timeout,
        passed: passed.clone(),
    };
    let end = run_session(reader, w, config, &mut || {
        claim(taken, &mut won)?;
        passed.store(true, Ordering::SeqCst);
        let _ = s.set_read_timeout(None);
        Ok(())
    });
    let _ = s.shutdown();
    won.then_some(end)
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
        assert!(e.contains("serial:<device> or tcp:<host:port>"), "{e}");
        assert_eq!(
            "serial:isobench.agent".parse::<Transport>().unwrap(),
            Transport::Serial(PathBuf::from("isobench.agent"))
        );
        assert!("serial:".parse::<Transport>().is_err());
        let t = "tcp:127.0.0.1:1"
            .parse::<Transport>()
            .unwrap()
            .with_token(Some("x".into()));
        assert!(matches!(t, Transport::Tcp { token: Some(_), .. }));
    }

    #[test]
    fn serial_ports_are_found_by_name() {
        let d = tempfile::tempdir().unwrap();
        let ports = d.path().join("ports");
        let dev = d.path().join("dev");
        std::fs::create_dir_all(ports.join("vport0p0")).unwrap();
        std::fs::create_dir_all(ports.join("vport1p1")).unwrap();
        std::fs::write(ports.join("vport0p0/name"), "\n").unwrap();
        std::fs::write(ports.join("vport1p1/name"), "isobench.agent\n").unwrap();
        let found =
            resolve_serial_in(Path::new("/dev/virtio-ports/isobench.agent"), &ports, &dev).unwrap();
        assert_eq!(found, dev.join("vport1p1"));
        let found = resolve_serial_in(Path::new("isobench.agent"), &ports, &dev).unwrap();
        assert_eq!(found, dev.join("vport1p1"));
        let e = resolve_serial_in(Path::new("other"), &ports, &dev)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("isobench.agent") && e.contains("virtserialport"),
            "{e}"
        );
        // An existing path is used as it is.
        let f = d.path().join("tty");
        std::fs::write(&f, "").unwrap();
        assert_eq!(resolve_serial_in(&f, &ports, &dev).unwrap(), f);
    }

    #[test]
    fn a_serial_port_serves_a_session() {
        // A pseudo-terminal in raw mode stands in for a serial line.
        // SAFETY: plain libc calls on descriptors this test owns.
        let (master, slave_path) = unsafe {
            let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
            assert!(m >= 0);
            assert_eq!(libc::grantpt(m), 0);
            assert_eq!(libc::unlockpt(m), 0);
            let mut buf = [0 as libc::c_char; 128];
            assert_eq!(libc::ptsname_r(m, buf.as_mut_ptr(), buf.len()), 0);
            let name = std::ffi::CStr::from_ptr(buf.as_ptr())
                .to_string_lossy()
                .into_owned();
            (File::from_raw_fd(m), PathBuf::from(name))
        };
        // Held open until the session ends: with no slave open, reading the master fails
        // (EIO) until the agent has opened its side.
        let s = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&slave_path)
            .unwrap();
        {
            use std::os::fd::AsRawFd;
            // SAFETY: termios calls on an open terminal.
            unsafe {
                let mut t: libc::termios = std::mem::zeroed();
                assert_eq!(libc::tcgetattr(s.as_raw_fd(), &mut t), 0);
                libc::cfmakeraw(&mut t);
                assert_eq!(libc::tcsetattr(s.as_raw_fd(), libc::TCSANOW, &t), 0);
            }
        }
        let agent =
            thread::spawn(move || serve_serial(&slave_path, Duration::from_secs(5)).unwrap());
        let client = crate::AgentClient::new("serial", master.try_clone().unwrap(), master);
        client.hello().unwrap();
        client.ping().unwrap();
        client.bye().unwrap();
        assert_eq!(agent.join().unwrap(), SessionEnd::Bye);
        drop(s);
    }

    #[test]
    fn token_rules() {
        let long = Token("0123456789abcdef".into());
        let short = Token("abcdef".into());
        for a in ["127.0.0.1:0", "[::1]:0", "0.0.0.0:0"] {
            let e = check_tcp_token(&addrs(a), None).unwrap_err().to_string();
            assert!(
                e.contains("without a token") && e.contains(TOKEN_ENV),
                "{e}"
            );
            let e = check_tcp_token(&addrs(a), Some(&short))
                .unwrap_err()
                .to_string();
            assert!(e.contains("too weak") && e.contains("6 character"), "{e}");
            assert!(check_tcp_token(&addrs(a), Some(&Token(String::new()))).is_err());
            assert!(check_tcp_token(&addrs(a), Some(&long)).is_ok());
        }
    }
}
