//! Server halves of the network probes, startable on their own.
//!
//! A network probe measures a path between two ends. When both ends live in one tenant the
//! probe starts its own server on loopback, in a process of its own when it knows the
//! isobench binary ([`process::ServerProcess`], `isobench netserve`), else as threads of its own
//! process; to measure *between* tenants a controller starts the server in one tenant with
//! [`start_server`] (the agent's "start service" command) and points the probe in another
//! tenant at the returned address (`addr=... port=...`).
//!
//! Every server runs on plain threads (one acceptor or receiver thread, plus one thread per
//! TCP connection), checks its stop flags at least every [`POLL`] and never blocks forever:
//! reads poll the stop flags, writes time out after [`ServerOptions::io_timeout`]. Dropping
//! or [`ServerHandle::stop`]ping the handle stops and joins every thread and closes every
//! socket.
//!
//! # Wire protocols
//!
//! | kind | transport | what it does |
//! |---|---|---|
//! | [`ServerKind::UdpEcho`] | UDP | sends every datagram back to its sender unchanged |
//! | [`ServerKind::TcpEcho`] | TCP | writes back whatever it reads, per connection (TCP_NODELAY) |
//! | [`ServerKind::TcpSink`] | TCP | reads and discards; when the client shuts down its write half, replies with the byte count of that connection as 8 bytes little-endian, then closes |
//! | [`ServerKind::UdpSink`] | UDP | counts datagrams per session; answers a stats request (below) |
//! | [`ServerKind::Http`] | TCP | HTTP/1.1 with keep-alive: `GET /` returns `body` bytes, `GET /<n>` returns `n` bytes (at most 64 MiB) |
//! | [`ServerKind::RelayForwarder`] | TCP | for every accepted connection opens one to `next` and relays the bytes onward (one hop of a relay ring) |
//!
//! UDP sink datagrams start with a 16-byte header: session id (u64 LE, chosen by the client)
//! and sequence number (u64 LE). A datagram whose sequence number is `u64::MAX` is a stats
//! request; the reply is 24 bytes: session id, datagrams received, bytes received (u64 LE
//! each). Datagrams shorter than 16 bytes are counted under session 0.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub mod process;

/// How often blocked server threads look at their stop flags.
pub const POLL: Duration = Duration::from_millis(50);

/// Body size of `http` written without a size (the `http` probe's default too).
pub const HTTP_DEFAULT_BODY: usize = 4096;

/// Largest body the HTTP server sends for `GET /<n>`.
pub const HTTP_MAX_BODY: usize = 64 << 20;

/// Most TCP connections one server serves at once; further connections are closed at once.
pub const MAX_CONNECTIONS: usize = 1024;

/// Sequence number that marks a UDP sink stats request.
pub const UDP_STATS_REQUEST: u64 = u64::MAX;

/// Length of the UDP sink header (session id, sequence number).
pub const UDP_HEADER: usize = 16;

/// The server kinds by name, as [`ServerKind::name`] spells them (`http` and
/// `relay-forwarder` take an argument in their text form, see [`ServerKind`]'s `FromStr`).
pub const KIND_NAMES: &[&str] = &[
    "udp-echo",
    "tcp-echo",
    "tcp-sink",
    "udp-sink",
    "http",
    "relay-forwarder",
];

/// Which server to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ServerKind {
    /// UDP: every datagram goes back to its sender (peer of `net-rtt proto=udp`).
    UdpEcho,
    /// TCP: every byte read is written back (peer of `net-rtt proto=tcp`).
    TcpEcho,
    /// TCP: discard, then report the byte count (peer of `net-throughput proto=tcp`).
    TcpSink,
    /// UDP: count per session, answer stats requests (peer of `net-throughput proto=udp`).
    UdpSink,
    /// HTTP/1.1 keep-alive server with a fixed-size body (peer of `http`).
    Http {
        /// Bytes of body for `GET /`.
        body: usize,
    },
    /// One hop of a relay ring: relays every accepted connection to `next` (peer of
    /// `relay-ring`).
    RelayForwarder {
        /// Where to relay to (the next forwarder, or the ring's master).
        next: SocketAddr,
    },
}

impl ServerKind {
    /// Short kebab-case name (`udp-echo`, `http`, `relay-forwarder`).
    pub fn name(&self) -> &'static str {
        match self {
            ServerKind::UdpEcho => "udp-echo",
            ServerKind::TcpEcho => "tcp-echo",
            ServerKind::TcpSink => "tcp-sink",
            ServerKind::UdpSink => "udp-sink",
            ServerKind::Http { .. } => "http",
            ServerKind::RelayForwarder { .. } => "relay-forwarder",
        }
    }

    /// True for the UDP servers.
    pub fn is_udp(&self) -> bool {
        matches!(self, ServerKind::UdpEcho | ServerKind::UdpSink)
    }
}

impl fmt::Display for ServerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerKind::Http { body } => write!(f, "http:{body}"),
            ServerKind::RelayForwarder { next } => write!(f, "relay-forwarder:{next}"),
            k => f.write_str(k.name()),
        }
    }
}

/// Parses the [`Display`](fmt::Display) form: `udp-echo`, `tcp-echo`, `tcp-sink`, `udp-sink`,
/// `http` ([`HTTP_DEFAULT_BODY`]), `http:<bytes>`, `relay-forwarder:<ip:port>`.
impl FromStr for ServerKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (name, arg) = match s.split_once(':') {
            Some((n, a)) => (n.trim(), Some(a.trim())),
            None => (s.trim(), None),
        };
        const KNOWN: &str = "udp-echo, tcp-echo, tcp-sink, udp-sink, http[:<body bytes>], \
                             relay-forwarder:<ip:port>";
        match (name, arg) {
            ("udp-echo", None) => Ok(ServerKind::UdpEcho),
            ("tcp-echo", None) => Ok(ServerKind::TcpEcho),
            ("tcp-sink", None) => Ok(ServerKind::TcpSink),
            ("udp-sink", None) => Ok(ServerKind::UdpSink),
            ("http", None) => Ok(ServerKind::Http {
                body: HTTP_DEFAULT_BODY,
            }),
            ("http", Some(a)) => isobench_common::parse_size(a)
                .ok()
                .filter(|&b| b as usize <= HTTP_MAX_BODY)
                .map(|b| ServerKind::Http { body: b as usize })
                .ok_or_else(|| format!("`{s}`: the body must be a size up to 64M, as in http:1K")),
            ("relay-forwarder", Some(a)) => a
                .parse()
                .map(|next| ServerKind::RelayForwarder { next })
                .map_err(|_| format!("`{s}`: write the next hop as ip:port")),
            ("relay-forwarder", None) => Err(format!(
                "`{s}`: a relay forwarder needs its next hop, as in relay-forwarder:127.0.0.1:7000"
            )),
            _ => Err(format!("unknown server `{s}`: known servers are {KNOWN}")),
        }
    }
}

/// Knobs of a server beyond its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerOptions {
    /// Pin every server thread to this CPU.
    pub pin: Option<usize>,
    /// Longest a write (or the relay's connect to its next hop) may block before the
    /// connection is given up.
    pub io_timeout: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            pin: None,
            io_timeout: Duration::from_secs(5),
        }
    }
}

/// What a server has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerStats {
    /// TCP connections accepted.
    pub connections: u64,
    /// TCP connections refused because [`MAX_CONNECTIONS`] were open.
    pub refused: u64,
    /// TCP connections that ended in an error (reset, timeout, relay next hop unreachable).
    pub conn_errors: u64,
    /// UDP datagrams received.
    pub datagrams: u64,
    /// HTTP requests answered.
    pub requests: u64,
    /// Payload bytes received.
    pub bytes_in: u64,
    /// Payload bytes sent.
    pub bytes_out: u64,
}

#[derive(Default)]
struct Counters {
    last_error: Mutex<Option<String>>,
    connections: AtomicU64,
    refused: AtomicU64,
    conn_errors: AtomicU64,
    datagrams: AtomicU64,
    requests: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> ServerStats {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ServerStats {
            connections: g(&self.connections),
            refused: g(&self.refused),
            conn_errors: g(&self.conn_errors),
            datagrams: g(&self.datagrams),
            requests: g(&self.requests),
            bytes_in: g(&self.bytes_in),
            bytes_out: g(&self.bytes_out),
        }
    }

    fn add(a: &AtomicU64, n: u64) {
        a.fetch_add(n, Ordering::Relaxed);
    }

    fn conn_error(&self, e: &io::Error) {
        Counters::add(&self.conn_errors, 1);
        if let Ok(mut l) = self.last_error.lock() {
            *l = Some(e.to_string());
        }
    }
}

/// The caller's stop flag and the handle's own, seen as one.
#[derive(Clone)]
struct Stop {
    outer: Arc<AtomicBool>,
    own: Arc<AtomicBool>,
}

impl Stop {
    fn is_set(&self) -> bool {
        self.outer.load(Ordering::Relaxed) || self.own.load(Ordering::Relaxed)
    }
}

/// A running server. Dropping it stops the server and joins its threads.
pub struct ServerHandle {
    addr: SocketAddr,
    kind: ServerKind,
    stop: Stop,
    counters: Arc<Counters>,
    failure: Arc<Mutex<Option<String>>>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerHandle")
            .field("addr", &self.addr)
            .field("kind", &self.kind)
            .field("running", &self.is_running())
            .finish()
    }
}

impl ServerHandle {
    /// The address the server is bound to (with the real port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server's kind.
    pub fn kind(&self) -> &ServerKind {
        &self.kind
    }

    /// Counters so far.
    pub fn stats(&self) -> ServerStats {
        self.counters.snapshot()
    }

    /// The error that ended the most recent failed connection (a reset, a write timeout, a
    /// relay's next hop refusing), if any. Such errors do not stop the server; they are
    /// counted in [`ServerStats::conn_errors`].
    pub fn last_conn_error(&self) -> Option<String> {
        self.counters.last_error.lock().ok().and_then(|l| l.clone())
    }

    /// True until the server's main thread has ended (stopped, or failed: see
    /// [`ServerHandle::stop`] for the reason).
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops the server, joins every thread and returns its final counters, or the error
    /// that ended the server early.
    pub fn stop(mut self) -> io::Result<ServerStats> {
        self.shutdown();
        match self.failure.lock().map(|mut f| f.take()) {
            Ok(Some(msg)) => Err(io::Error::other(format!(
                "{} server on {} failed: {msg}",
                self.kind.name(),
                self.addr
            ))),
            _ => Ok(self.counters.snapshot()),
        }
    }

    fn shutdown(&mut self) {
        self.stop.own.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                if let Ok(mut f) = self.failure.lock() {
                    f.get_or_insert_with(|| "a server thread panicked".into());
                }
            }
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Starts a server of `kind` bound to `bind` (port 0 picks a free port: read it back with
/// [`ServerHandle::local_addr`]). The server runs until `stop` is set or the handle is
/// stopped or dropped; the handle never sets `stop` itself.
pub fn start_server(
    kind: ServerKind,
    bind: SocketAddr,
    stop: Arc<AtomicBool>,
) -> io::Result<ServerHandle> {
    start_server_with(kind, bind, stop, ServerOptions::default())
}

/// [`start_server`] with options (CPU pinning, I/O timeout).
pub fn start_server_with(
    kind: ServerKind,
    bind: SocketAddr,
    stop: Arc<AtomicBool>,
    opts: ServerOptions,
) -> io::Result<ServerHandle> {
    let stop = Stop {
        outer: stop,
        own: Arc::new(AtomicBool::new(false)),
    };
    let counters = Arc::new(Counters::default());
    let failure = Arc::new(Mutex::new(None));
    let thread_name = format!("isobench-{}", kind.name());
    let ctx = ServerCtx {
        kind: kind.clone(),
        stop: stop.clone(),
        counters: counters.clone(),
        opts,
    };
    let fail = failure.clone();
    let (addr, thread) = if kind.is_udp() {
        let sock = UdpSocket::bind(bind).map_err(|e| with_addr(e, "bind udp", bind))?;
        sock.set_read_timeout(Some(POLL))?;
        sock.set_write_timeout(Some(opts.io_timeout))?;
        // A larger receive buffer loses fewer datagrams in bursts; the kernel caps it at
        // net.core.rmem_max, which is fine.
        let _ = set_buffer(&sock, libc::SO_RCVBUF, 4 << 20);
        let addr = sock.local_addr()?;
        let t = std::thread::Builder::new()
            .name(thread_name)
            .spawn(move || {
                ctx.pin();
                let r = if ctx.kind == ServerKind::UdpEcho {
                    udp_echo(&ctx, &sock)
                } else {
                    udp_sink(&ctx, &sock)
                };
                record_failure(&fail, r);
            })?;
        (addr, t)
    } else {
        let listener = TcpListener::bind(bind).map_err(|e| with_addr(e, "bind tcp", bind))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let t = std::thread::Builder::new()
            .name(thread_name)
            .spawn(move || {
                ctx.pin();
                let r = tcp_accept_loop(&ctx, &listener);
                record_failure(&fail, r);
            })?;
        (addr, t)
    };
    Ok(ServerHandle {
        addr,
        kind,
        stop,
        counters,
        failure,
        thread: Some(thread),
    })
}

fn with_addr(e: io::Error, what: &str, addr: SocketAddr) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {addr}: {e}"))
}

fn record_failure(fail: &Mutex<Option<String>>, r: io::Result<()>) {
    if let Err(e) = r {
        if let Ok(mut f) = fail.lock() {
            *f = Some(e.to_string());
        }
    }
}

#[derive(Clone)]
struct ServerCtx {
    kind: ServerKind,
    stop: Stop,
    counters: Arc<Counters>,
    opts: ServerOptions,
}

impl ServerCtx {
    fn pin(&self) {
        if let Some(cpu) = self.opts.pin {
            // Pinning is a placement wish; a CPU outside the tenant's cpuset is not fatal.
            let _ = crate::util::pin_to_cpu(cpu);
        }
    }
}

/// True for the errors a read or write timeout produces.
pub(crate) fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Sets a socket buffer size option (`SO_RCVBUF` / `SO_SNDBUF`).
pub(crate) fn set_buffer(fd: &impl AsRawFd, opt: libc::c_int, bytes: usize) -> io::Result<()> {
    let v = bytes as libc::c_int;
    // SAFETY: fd is an open socket; v lives for the call.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Waits up to `timeout` for `fd` to become readable. Returns false on timeout.
pub(crate) fn wait_readable(fd: &impl AsRawFd, timeout: Duration) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: p is a valid pollfd for the call.
    let r = unsafe { libc::poll(&mut p, 1, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(r > 0)
}

fn udp_echo(ctx: &ServerCtx, sock: &UdpSocket) -> io::Result<()> {
    let mut buf = vec![0u8; 65536];
    while !ctx.stop.is_set() {
        match sock.recv_from(&mut buf) {
            Ok((n, from)) => {
                Counters::add(&ctx.counters.datagrams, 1);
                Counters::add(&ctx.counters.bytes_in, n as u64);
                // A full send buffer or an unreachable sender only loses this echo.
                if sock.send_to(&buf[..n], from).is_ok() {
                    Counters::add(&ctx.counters.bytes_out, n as u64);
                }
            }
            Err(e) if is_timeout(&e) => {}
            // ICMP errors from earlier sends surface here on some kernels: not fatal.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Sessions a UDP sink remembers; older ones are forgotten first.
const UDP_SESSIONS: usize = 4096;

fn udp_sink(ctx: &ServerCtx, sock: &UdpSocket) -> io::Result<()> {
    let mut buf = vec![0u8; 65536];
    // session -> (datagrams, bytes, last touched)
    let mut sessions: HashMap<u64, (u64, u64, u64)> = HashMap::new();
    let mut tick = 0u64;
    while !ctx.stop.is_set() {
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::ConnectionRefused => continue,
            Err(e) => return Err(e),
        };
        tick += 1;
        let (session, seq) = if n >= UDP_HEADER {
            (le_u64(&buf[0..8]), le_u64(&buf[8..16]))
        } else {
            (0, 0)
        };
        if seq == UDP_STATS_REQUEST {
            let (count, bytes, _) = sessions.get(&session).copied().unwrap_or_default();
            let mut reply = [0u8; 24];
            reply[0..8].copy_from_slice(&session.to_le_bytes());
            reply[8..16].copy_from_slice(&count.to_le_bytes());
            reply[16..24].copy_from_slice(&bytes.to_le_bytes());
            let _ = sock.send_to(&reply, from);
            continue;
        }
        Counters::add(&ctx.counters.datagrams, 1);
        Counters::add(&ctx.counters.bytes_in, n as u64);
        if !sessions.contains_key(&session) && sessions.len() >= UDP_SESSIONS {
            if let Some(oldest) = sessions.iter().min_by_key(|(_, v)| v.2).map(|(k, _)| *k) {
                sessions.remove(&oldest);
            }
        }
        let e = sessions.entry(session).or_default();
        e.0 += 1;
        e.1 += n as u64;
        e.2 = tick;
    }
    Ok(())
}

pub(crate) fn le_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

fn tcp_accept_loop(ctx: &ServerCtx, listener: &TcpListener) -> io::Result<()> {
    let mut conns: Vec<JoinHandle<()>> = Vec::new();
    let result = loop {
        if ctx.stop.is_set() {
            break Ok(());
        }
        conns.retain(|t| !t.is_finished());
        match wait_readable(listener, POLL) {
            Ok(false) => continue,
            Ok(true) => {}
            Err(e) => break Err(e),
        }
        let (stream, _) = match listener.accept() {
            Ok(x) => x,
            Err(e) if is_timeout(&e) => continue,
            // The peer gave up between poll and accept, or we are out of descriptors for a
            // moment: keep serving the others.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
                ) || e.raw_os_error() == Some(libc::EMFILE)
                    || e.raw_os_error() == Some(libc::ENFILE) =>
            {
                Counters::add(&ctx.counters.conn_errors, 1);
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            Err(e) => break Err(e),
        };
        if conns.len() >= MAX_CONNECTIONS {
            Counters::add(&ctx.counters.refused, 1);
            drop(stream);
            continue;
        }
        Counters::add(&ctx.counters.connections, 1);
        let c = ctx.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("isobench-{}-conn", ctx.kind.name()))
            .spawn(move || {
                c.pin();
                if let Err(e) = serve_connection(&c, stream) {
                    c.counters.conn_error(&e);
                }
            });
        match spawned {
            Ok(t) => conns.push(t),
            Err(_) => Counters::add(&ctx.counters.refused, 1),
        }
    };
    // Connection threads see the stop flag within POLL; when the accept loop failed on its
    // own, tell them to stop too so the join below cannot wait forever.
    ctx.stop.own.store(true, Ordering::Relaxed);
    for t in conns {
        let _ = t.join();
    }
    result
}

fn serve_connection(ctx: &ServerCtx, s: TcpStream) -> io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(POLL))?;
    s.set_write_timeout(Some(ctx.opts.io_timeout))?;
    match &ctx.kind {
        ServerKind::TcpEcho => tcp_echo(ctx, s),
        ServerKind::TcpSink => tcp_sink(ctx, s),
        ServerKind::Http { body } => http_conn(ctx, s, *body),
        ServerKind::RelayForwarder { next } => relay_conn(ctx, s, *next),
        ServerKind::UdpEcho | ServerKind::UdpSink => Ok(()),
    }
}

/// Reads into `buf`, retrying on the poll timeout until data, EOF or stop. Returns 0 on
/// EOF or stop.
pub(crate) fn read_polling(
    s: &mut impl Read,
    buf: &mut [u8],
    stop: &dyn Fn() -> bool,
) -> io::Result<usize> {
    loop {
        match s.read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if is_timeout(&e) => {
                if stop() {
                    return Ok(0);
                }
            }
            Err(e) => return Err(e),
        }
    }
}

fn tcp_echo(ctx: &ServerCtx, mut s: TcpStream) -> io::Result<()> {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = read_polling(&mut s, &mut buf, &|| ctx.stop.is_set())?;
        if n == 0 {
            return Ok(());
        }
        Counters::add(&ctx.counters.bytes_in, n as u64);
        s.write_all(&buf[..n])?;
        Counters::add(&ctx.counters.bytes_out, n as u64);
    }
}

fn tcp_sink(ctx: &ServerCtx, mut s: TcpStream) -> io::Result<()> {
    // Page-aligned, as iperf3's (an mmap). A plain 256 KiB Vec is a fresh mmap from glibc
    // that starts 16 bytes into a page; receiving into it ran at 19-23 Gbit/s on one CPU
    // where a page-aligned or heap buffer ran at 31-37.
    let mut buf = crate::util::AlignedBuf::new(256 << 10, 4096);
    let buf = buf.as_mut_slice();
    let mut total = 0u64;
    loop {
        let n = read_polling(&mut s, buf, &|| ctx.stop.is_set())?;
        if n == 0 {
            break;
        }
        total += n as u64;
        Counters::add(&ctx.counters.bytes_in, n as u64);
    }
    if !ctx.stop.is_set() {
        // The client may not wait for the count (a plain traffic generator): ignore errors.
        let _ = s.write_all(&total.to_le_bytes());
    }
    Ok(())
}

fn relay_conn(ctx: &ServerCtx, mut up: TcpStream, next: SocketAddr) -> io::Result<()> {
    let mut down = TcpStream::connect_timeout(&next, ctx.opts.io_timeout)
        .map_err(|e| with_addr(e, "relay connect", next))?;
    down.set_nodelay(true)?;
    down.set_write_timeout(Some(ctx.opts.io_timeout))?;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = read_polling(&mut up, &mut buf, &|| ctx.stop.is_set())?;
        if n == 0 {
            let _ = down.shutdown(Shutdown::Write);
            return Ok(());
        }
        Counters::add(&ctx.counters.bytes_in, n as u64);
        down.write_all(&buf[..n])?;
        Counters::add(&ctx.counters.bytes_out, n as u64);
    }
}

/// Finds the end of an HTTP header block (index just past `\r\n\r\n`).
pub(crate) fn header_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

/// Value of a header (case-insensitive name) in a header block.
pub(crate) fn header_value<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.split("\r\n").skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Longest request header block the HTTP server accepts.
const HTTP_MAX_HEAD: usize = 64 << 10;

fn http_conn(ctx: &ServerCtx, mut s: TcpStream, default_body: usize) -> io::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    let mut chunk = vec![0u8; 16 << 10];
    let pattern = vec![b'x'; 64 << 10];
    let stop = || ctx.stop.is_set();
    loop {
        // Read one request head.
        let end = loop {
            if let Some(e) = header_end(&buf) {
                break e;
            }
            if buf.len() > HTTP_MAX_HEAD {
                let _ = s.write_all(
                    b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
                return Ok(());
            }
            let n = read_polling(&mut s, &mut chunk, &stop)?;
            if n == 0 {
                return Ok(());
            }
            Counters::add(&ctx.counters.bytes_in, n as u64);
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        let mut first = head.lines().next().unwrap_or("").split_whitespace();
        let (method, path, version) = (
            first.next().unwrap_or(""),
            first.next().unwrap_or(""),
            first.next().unwrap_or(""),
        );
        let req_body: usize = match header_value(&head, "content-length") {
            Some(v) => match v.parse() {
                Ok(n) => n,
                Err(_) => {
                    let _ = s.write_all(
                        b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                    return Ok(());
                }
            },
            None => 0,
        };
        // Skip a request body, if any.
        let mut have = buf.len() - end;
        while have < req_body {
            let n = read_polling(&mut s, &mut chunk, &stop)?;
            if n == 0 {
                return Ok(());
            }
            Counters::add(&ctx.counters.bytes_in, n as u64);
            buf.extend_from_slice(&chunk[..n]);
            have += n;
        }
        buf.drain(..end + req_body);
        let conn_hdr = header_value(&head, "connection").map(|v| v.to_ascii_lowercase());
        let keep_alive = match version {
            "HTTP/1.1" => conn_hdr.as_deref() != Some("close"),
            "HTTP/1.0" => conn_hdr.as_deref() == Some("keep-alive"),
            _ => false,
        };
        let (status, body_len) = if !version.starts_with("HTTP/1.") {
            ("400 Bad Request", 0)
        } else if method != "GET" && method != "HEAD" {
            ("405 Method Not Allowed", 0)
        } else {
            match path.trim_start_matches('/') {
                "" => ("200 OK", default_body),
                p => match p.parse::<usize>() {
                    Ok(n) if n <= HTTP_MAX_BODY => ("200 OK", n),
                    _ => ("404 Not Found", 0),
                },
            }
        };
        let send_body = if method == "HEAD" { 0 } else { body_len };
        let mut out = format!(
            "HTTP/1.1 {status}\r\nServer: isobench\r\nContent-Type: application/octet-stream\r\n\
             Content-Length: {body_len}\r\n{}\r\n",
            if keep_alive {
                "Connection: keep-alive\r\n"
            } else {
                "Connection: close\r\n"
            }
        )
        .into_bytes();
        // Small responses go out in one write (one segment with TCP_NODELAY).
        let first = send_body.min(pattern.len());
        out.extend_from_slice(&pattern[..first]);
        s.write_all(&out)?;
        let mut left = send_body - first;
        while left > 0 {
            let n = left.min(pattern.len());
            s.write_all(&pattern[..n])?;
            left -= n;
        }
        Counters::add(
            &ctx.counters.bytes_out,
            (out.len() + send_body - first) as u64,
        );
        Counters::add(&ctx.counters.requests, 1);
        if !keep_alive {
            let _ = s.shutdown(Shutdown::Write);
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lo() -> SocketAddr {
        "127.0.0.1:0".parse().unwrap()
    }

    #[test]
    fn kinds_round_trip_through_text_and_json() {
        for k in [
            ServerKind::UdpEcho,
            ServerKind::TcpEcho,
            ServerKind::TcpSink,
            ServerKind::UdpSink,
            ServerKind::Http { body: 2048 },
            ServerKind::RelayForwarder {
                next: "127.0.0.1:7000".parse().unwrap(),
            },
        ] {
            assert_eq!(k.to_string().parse::<ServerKind>().unwrap(), k);
            let j = serde_json::to_string(&k).unwrap();
            assert_eq!(serde_json::from_str::<ServerKind>(&j).unwrap(), k);
        }
        assert_eq!(
            "http:1K".parse::<ServerKind>().unwrap(),
            ServerKind::Http { body: 1024 }
        );
        let e = "tcp-echoo".parse::<ServerKind>().unwrap_err();
        assert!(e.contains("known servers"), "{e}");
        assert!("relay-forwarder"
            .parse::<ServerKind>()
            .unwrap_err()
            .contains("next hop"));
    }

    #[test]
    fn tcp_echo_echoes_and_stops() {
        let stop = Arc::new(AtomicBool::new(false));
        let h = start_server(ServerKind::TcpEcho, lo(), stop.clone()).unwrap();
        let mut c = TcpStream::connect(h.local_addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(b"hello").unwrap();
        let mut b = [0u8; 5];
        c.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"hello");
        drop(c);
        let st = h.stop().unwrap();
        assert_eq!(st.connections, 1);
        assert_eq!(st.bytes_in, 5);
        assert!(
            !stop.load(Ordering::Relaxed),
            "the caller's flag is left alone"
        );
    }

    #[test]
    fn outer_stop_flag_ends_the_server() {
        let stop = Arc::new(AtomicBool::new(false));
        let h = start_server(ServerKind::UdpEcho, lo(), stop.clone()).unwrap();
        assert!(h.is_running());
        stop.store(true, Ordering::Relaxed);
        let t0 = std::time::Instant::now();
        while h.is_running() && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!h.is_running());
    }

    #[test]
    fn tcp_sink_reports_its_count() {
        let h = start_server(ServerKind::TcpSink, lo(), Arc::default()).unwrap();
        let mut c = TcpStream::connect(h.local_addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(&vec![7u8; 100_000]).unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let mut b = [0u8; 8];
        c.read_exact(&mut b).unwrap();
        assert_eq!(u64::from_le_bytes(b), 100_000);
    }

    #[test]
    fn udp_sink_counts_per_session() {
        let h = start_server(ServerKind::UdpSink, lo(), Arc::default()).unwrap();
        let c = UdpSocket::bind(lo()).unwrap();
        c.connect(h.local_addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut d = [0u8; 100];
        d[0..8].copy_from_slice(&42u64.to_le_bytes());
        for i in 0..10u64 {
            d[8..16].copy_from_slice(&i.to_le_bytes());
            c.send(&d).unwrap();
        }
        let mut req = [0u8; 16];
        req[0..8].copy_from_slice(&42u64.to_le_bytes());
        req[8..16].copy_from_slice(&UDP_STATS_REQUEST.to_le_bytes());
        let mut r = [0u8; 24];
        let mut got = (0, 0);
        for _ in 0..20 {
            c.send(&req).unwrap();
            if let Ok(24) = c.recv(&mut r) {
                got = (le_u64(&r[8..16]), le_u64(&r[16..24]));
                if got.0 == 10 {
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(got, (10, 1000));
    }

    #[test]
    fn http_serves_keep_alive_and_sizes() {
        let h = start_server(ServerKind::Http { body: 10 }, lo(), Arc::default()).unwrap();
        let mut c = TcpStream::connect(h.local_addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut all = Vec::new();
        c.read_to_end(&mut all).unwrap();
        let text = String::from_utf8(all).unwrap();
        assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");
        assert!(text.contains("Content-Length: 10\r\n"));
        assert!(text.ends_with("\r\n\r\nxxx"), "{text}");
        assert_eq!(h.stop().unwrap().requests, 2);
    }

    #[test]
    fn an_http_request_head_over_the_limit_is_answered_431_and_closed() {
        let h = start_server(ServerKind::Http { body: 10 }, lo(), Arc::default()).unwrap();
        let mut c = TcpStream::connect(h.local_addr()).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        // One byte over the limit and no blank line: the server reads all of it (so it
        // closes with nothing unread), answers and hangs up.
        let mut head = b"GET / HTTP/1.1\r\nX: ".to_vec();
        head.resize(HTTP_MAX_HEAD + 1, b'a');
        c.write_all(&head).unwrap();
        let mut all = Vec::new();
        c.read_to_end(&mut all).unwrap();
        let text = String::from_utf8(all).unwrap();
        assert!(text.starts_with("HTTP/1.1 431 "), "{text}");
        assert_eq!(h.stop().unwrap().requests, 0);
    }

    #[test]
    fn relay_forwarder_reports_an_unreachable_next_hop() {
        let dead = TcpListener::bind(lo()).unwrap().local_addr().unwrap();
        let h = start_server(
            ServerKind::RelayForwarder { next: dead },
            lo(),
            Arc::default(),
        )
        .unwrap();
        let _c = TcpStream::connect(h.local_addr()).unwrap();
        let t0 = std::time::Instant::now();
        while h.stats().conn_errors == 0 && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let e = h
            .last_conn_error()
            .expect("the refused connect is recorded");
        assert!(e.contains(&dead.to_string()), "{e}");
    }

    #[test]
    fn relay_forwarder_relays_to_next() {
        let sink = TcpListener::bind(lo()).unwrap();
        let h = start_server(
            ServerKind::RelayForwarder {
                next: sink.local_addr().unwrap(),
            },
            lo(),
            Arc::default(),
        )
        .unwrap();
        let mut c = TcpStream::connect(h.local_addr()).unwrap();
        c.write_all(b"ring").unwrap();
        let (mut down, _) = sink.accept().unwrap();
        down.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut b = [0u8; 4];
        down.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"ring");
    }
}
