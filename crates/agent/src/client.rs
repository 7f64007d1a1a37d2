//! The controller side: a typed client for one agent over any byte stream pair.
//!
//! A reader thread takes every line the agent writes: responses go to the request waiting on
//! their `id`, `sample` and `stressor_exited` events are queued. So requests can be made from
//! several threads at once (a `ping` or `cancel_probe` while `run_probe` waits), and every
//! request has a deadline: an agent that stops answering gives [`AgentError::Timeout`] naming
//! it, which the controller records as DNR (did not respond).

use std::collections::{HashMap, VecDeque};
use std::io::{self, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Child;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use isobench_workloads::netserve::ServerStats;
use isobench_workloads::{ParamValues, StressReport};

use crate::protocol::{
    Caps, ErrorBody, ErrorCode, Hello, Params, ProbeResult, ProtocolVersion, Reply, Request,
    RunProbe, RunScenario, Sample, ScenarioDone, StartService, StartStressor, StoppedStressor,
    StressorExit, Token, MAX_LINE_BYTES, PROTOCOL_VERSION,
};
use crate::wire::{self, Line};

/// Most samples kept unread; older ones are dropped (and counted) beyond this.
const MAX_QUEUED_SAMPLES: usize = 100_000;

/// Why a request to an agent failed.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The agent answered with an error.
    #[error("agent `{agent}`: {request} failed: {error}")]
    Remote {
        /// Agent (tenant) name.
        agent: String,
        /// The request type.
        request: &'static str,
        /// What the agent said.
        error: Box<ErrorBody>,
    },
    /// No answer before the deadline.
    #[error("agent `{agent}` did not answer {request} within {:.1} s", .after.as_secs_f64())]
    Timeout {
        /// Agent (tenant) name.
        agent: String,
        /// The request type.
        request: &'static str,
        /// The deadline that passed.
        after: Duration,
    },
    /// The connection is gone (the agent exited, crashed or was killed).
    #[error("agent `{agent}` closed the connection ({reason})")]
    Disconnected {
        /// Agent (tenant) name.
        agent: String,
        /// What the reader saw.
        reason: String,
    },
    /// The agent speaks another major protocol version.
    #[error(
        "agent `{agent}` speaks protocol {theirs}, this controller speaks {ours}: the major \
         versions must match; run the same isobench version on both sides"
    )]
    VersionMismatch {
        /// Agent (tenant) name.
        agent: String,
        /// Our version.
        ours: ProtocolVersion,
        /// The agent's version, or `unknown`.
        theirs: String,
    },
    /// Connecting or writing failed.
    #[error("agent `{agent}`: {context}: {source}")]
    Io {
        /// Agent (tenant) name.
        agent: String,
        /// What was being done.
        context: String,
        /// The I/O error.
        source: io::Error,
    },
    /// The agent sent something that is not a valid answer.
    #[error("agent `{agent}` broke the protocol: {message}")]
    Protocol {
        /// Agent (tenant) name.
        agent: String,
        /// What was wrong.
        message: String,
    },
}

impl AgentError {
    /// The agent (tenant) the error is about.
    pub fn agent(&self) -> &str {
        match self {
            AgentError::Remote { agent, .. }
            | AgentError::Timeout { agent, .. }
            | AgentError::Disconnected { agent, .. }
            | AgentError::VersionMismatch { agent, .. }
            | AgentError::Io { agent, .. }
            | AgentError::Protocol { agent, .. } => agent,
        }
    }

    /// The agent's error code, for [`AgentError::Remote`].
    pub fn code(&self) -> Option<&ErrorCode> {
        match self {
            AgentError::Remote { error, .. } => Some(&error.code),
            _ => None,
        }
    }

    /// True when the agent stopped answering or went away (record the trial as DNR), as
    /// opposed to answering with an error.
    pub fn is_unresponsive(&self) -> bool {
        matches!(
            self,
            AgentError::Timeout { .. } | AgentError::Disconnected { .. } | AgentError::Io { .. }
        )
    }
}

/// Options of one probe run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProbeOpts {
    /// CPU for the measuring thread.
    pub pin: Option<usize>,
    /// CPU for the probe's helper (peer) thread or process.
    pub pin_peer: Option<usize>,
    /// Rough wall-time budget (agent default: 1 s).
    pub budget: Option<Duration>,
    /// Directory for files (agent default: its working directory).
    pub workdir: Option<std::path::PathBuf>,
    /// Client-side deadline for the answer (default: the client's timeout plus ten budgets).
    pub deadline: Option<Duration>,
    /// Window length of the series a windowed probe returns (the on/off design).
    pub window: Option<Duration>,
}

/// Options of one stressor.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StressOpts {
    /// CPUs for the workers, round-robin.
    pub pin: Option<Vec<usize>>,
    /// Caps for aggressive stressors outside a bounded tenant.
    pub caps: Caps,
    /// The tenant bounds pids, memory and io, so aggressive stressors may run uncapped.
    pub contained: bool,
    /// Directory for files (agent default: its working directory).
    pub workdir: Option<std::path::PathBuf>,
    /// Interval of `sample` events (agent default 250 ms); `Some(Duration::ZERO)` turns them
    /// off.
    pub sample_interval: Option<Duration>,
}

type Waiter = mpsc::Sender<Result<Reply, String>>;

struct Pending {
    waiters: HashMap<u64, Waiter>,
    /// Why the connection ended, once it has.
    closed: Option<String>,
}

#[derive(Default)]
struct Events {
    samples: VecDeque<Sample>,
    exits: Vec<StressorExit>,
    dropped_samples: u64,
    /// Errors the agent sent without an `id` (it could not read a request's id).
    notices: Vec<ErrorBody>,
    /// Progress lines of a running scenario, not yet taken.
    progress: VecDeque<String>,
    /// Pieces of a finished scenario's run, not yet taken.
    run_data: Vec<(u32, String)>,
}

struct Shared {
    pending: Mutex<Pending>,
    events: Mutex<Events>,
    events_cv: Condvar,
}

/// A connection to one agent.
pub struct AgentClient {
    name: String,
    shared: Arc<Shared>,
    writer: Mutex<Option<Box<dyn Write + Send>>>,
    closer: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    reader: Mutex<Option<JoinHandle<()>>>,
    next_id: AtomicU64,
    timeout: Duration,
    token: Option<Token>,
    offer: ProtocolVersion,
    negotiated: Mutex<Option<ProtocolVersion>>,
}

impl std::fmt::Debug for AgentClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentClient")
            .field("name", &self.name)
            .field("timeout", &self.timeout)
            .field("negotiated", &*lock(&self.negotiated))
            .finish_non_exhaustive()
    }
}

fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl AgentClient {
    /// A client over any reader/writer pair. `name` names the agent (its tenant) in errors.
    /// The default request timeout is 10 s.
    pub fn new(
        name: impl Into<String>,
        reader: impl Read + Send + 'static,
        writer: impl Write + Send + 'static,
    ) -> Self {
        let name = name.into();
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending {
                waiters: HashMap::new(),
                closed: None,
            }),
            events: Mutex::new(Events::default()),
            events_cv: Condvar::new(),
        });
        let s = shared.clone();
        let reader = thread::Builder::new()
            .name(format!("agent-client-{name}"))
            .spawn(move || reader_loop(reader, &s))
            .expect("starting the agent client's reader thread");
        AgentClient {
            name,
            shared,
            writer: Mutex::new(Some(Box::new(writer))),
            closer: Mutex::new(None),
            reader: Mutex::new(Some(reader)),
            next_id: AtomicU64::new(1),
            timeout: Duration::from_secs(10),
            token: None,
            offer: PROTOCOL_VERSION,
            negotiated: Mutex::new(None),
        }
    }

    /// A client over the standard input and output of a spawned `isobench agent` (spawned
    /// with both piped). Takes the pipes out of `child`; the caller keeps the child to wait
    /// for or kill it.
    pub fn from_child(name: impl Into<String>, child: &mut Child) -> Result<Self, AgentError> {
        let name = name.into();
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(AgentError::Io {
                agent: name,
                context: "attaching to the agent process".into(),
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "spawn the agent with stdin and stdout piped",
                ),
            });
        };
        Ok(AgentClient::new(name, stdout, stdin))
    }

    /// Connects to an agent's unix socket.
    pub fn connect_unix(
        name: impl Into<String>,
        path: impl AsRef<Path>,
    ) -> Result<Self, AgentError> {
        let name = name.into();
        let path = path.as_ref();
        let s = UnixStream::connect(path).map_err(|source| AgentError::Io {
            agent: name.clone(),
            context: format!("connecting to {}", path.display()),
            source,
        })?;
        AgentClient::from_unix_stream(name, s)
    }

    /// A client over a connected unix stream (a socket pair end, an accepted connection).
    /// Dropping the client shuts the stream down, so the agent sees end of input.
    pub fn from_unix_stream(name: impl Into<String>, s: UnixStream) -> Result<Self, AgentError> {
        let name = name.into();
        let io_err = |source| AgentError::Io {
            agent: name.clone(),
            context: "duplicating the socket".into(),
            source,
        };
        let (r, w) = (
            s.try_clone().map_err(io_err)?,
            s.try_clone().map_err(io_err)?,
        );
        Ok(AgentClient::new(name.clone(), r, w).on_close(move || {
            let _ = s.shutdown(Shutdown::Both);
        }))
    }

    /// A client over a connected TCP stream. Dropping the client shuts the stream down.
    pub fn from_tcp_stream(name: impl Into<String>, s: TcpStream) -> Result<Self, AgentError> {
        let name = name.into();
        let io_err = |source| AgentError::Io {
            agent: name.clone(),
            context: "duplicating the socket".into(),
            source,
        };
        let _ = s.set_nodelay(true);
        let (r, w) = (
            s.try_clone().map_err(io_err)?,
            s.try_clone().map_err(io_err)?,
        );
        Ok(AgentClient::new(name.clone(), r, w).on_close(move || {
            let _ = s.shutdown(Shutdown::Both);
        }))
    }

    /// Runs `f` when the client closes (after `bye`, or on drop), after its writer is
    /// dropped: for transports where dropping the writer alone does not end the stream
    /// (sockets whose reading half is a duplicate of the same descriptor).
    pub fn on_close(self, f: impl FnOnce() + Send + 'static) -> Self {
        *lock(&self.closer) = Some(Box::new(f));
        self
    }

    /// Connects to an agent over TCP (connect timeout 10 s). The token is sent in `hello`.
    pub fn connect_tcp(
        name: impl Into<String>,
        addr: impl ToSocketAddrs,
        token: Option<&str>,
    ) -> Result<Self, AgentError> {
        let name = name.into();
        let io_err = |context: String, source| AgentError::Io {
            agent: name.clone(),
            context,
            source,
        };
        let addrs: Vec<_> = addr
            .to_socket_addrs()
            .map_err(|e| io_err("resolving the agent address".into(), e))?
            .collect();
        let mut last = io::Error::new(io::ErrorKind::NotFound, "the address resolves to nothing");
        let mut stream = None;
        for a in &addrs {
            match TcpStream::connect_timeout(a, Duration::from_secs(10)) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = e,
            }
        }
        let ctx = format!(
            "connecting to {}",
            addrs.first().map_or_else(|| "?".into(), |a| a.to_string())
        );
        let s = stream.ok_or_else(|| io_err(ctx, last))?;
        let mut c = AgentClient::from_tcp_stream(name, s)?;
        c.token = token.map(|t| Token(t.to_string()));
        Ok(c)
    }

    /// Connects to an agent listening on a unix socket or TCP (the token is taken from the
    /// transport). `stdio` cannot be connected to: spawn the agent and use
    /// [`AgentClient::from_child`].
    pub fn connect(
        name: impl Into<String>,
        transport: &crate::transport::Transport,
    ) -> Result<Self, AgentError> {
        use crate::transport::Transport;
        let name = name.into();
        match transport {
            Transport::Unix(p) => AgentClient::connect_unix(name, p),
            Transport::Tcp { addr, token } => {
                AgentClient::connect_tcp(name, addr.as_str(), token.as_ref().map(|t| t.0.as_str()))
            }
            Transport::Stdio => Err(AgentError::Io {
                agent: name,
                context: "connecting".into(),
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "stdio is not connectable: spawn `isobench agent` with piped stdio and use \
                     AgentClient::from_child",
                ),
            }),
            Transport::Serial(p) => Err(AgentError::Io {
                agent: name,
                context: "connecting".into(),
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "serial:{} is the agent's end of a serial line: connect to the host's \
                         end (for a VM, the unix socket of its chardev) instead",
                        p.display()
                    ),
                ),
            }),
        }
    }

    /// Sets the default deadline of every request.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the token sent in `hello`.
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(Token(token.into()));
        self
    }

    /// Offers another protocol version in `hello` (for compatibility tests).
    pub fn with_protocol_version(mut self, v: ProtocolVersion) -> Self {
        self.offer = v;
        self
    }

    /// The agent's (tenant's) name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The default request deadline.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The protocol version agreed in `hello`, once it succeeded.
    pub fn negotiated_version(&self) -> Option<ProtocolVersion> {
        *lock(&self.negotiated)
    }

    /// Opens the session: negotiates the protocol version (and sends the token). Must be the
    /// first request.
    pub fn hello(&self) -> Result<Hello, AgentError> {
        let req = Request::Hello {
            protocol_version: self.offer,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            token: self.token.clone(),
        };
        let reply = match self.request(&req, self.timeout) {
            Err(AgentError::Remote { error, .. }) if error.code == ErrorCode::VersionMismatch => {
                return Err(AgentError::VersionMismatch {
                    agent: self.name.clone(),
                    ours: self.offer,
                    theirs: error
                        .protocol_version
                        .map_or_else(|| "unknown".into(), |v| v.to_string()),
                })
            }
            r => r?,
        };
        let Reply::Hello(h) = reply else {
            return Err(self.unexpected("hello", &reply));
        };
        let Some(v) = self.offer.negotiate(h.agent_protocol_version) else {
            return Err(AgentError::VersionMismatch {
                agent: self.name.clone(),
                ours: self.offer,
                theirs: h.agent_protocol_version.to_string(),
            });
        };
        *lock(&self.negotiated) = Some(v);
        Ok(*h)
    }

    /// Checks the agent answers; returns the round-trip time.
    pub fn ping(&self) -> Result<Duration, AgentError> {
        let t0 = Instant::now();
        match self.request(&Request::Ping {}, self.timeout)? {
            Reply::Pong {} => Ok(t0.elapsed()),
            r => Err(self.unexpected("pong", &r)),
        }
    }

    /// Runs a probe once and waits for its metrics. On timeout the probe is cancelled (best
    /// effort) and [`AgentError::Timeout`] is returned.
    pub fn run_probe(
        &self,
        name: &str,
        params: impl Into<Params>,
        opts: &ProbeOpts,
    ) -> Result<ProbeResult, AgentError> {
        let budget = opts.budget.unwrap_or(Duration::from_secs(1));
        let deadline = opts.deadline.unwrap_or(self.timeout + budget * 10);
        let req = Request::RunProbe(RunProbe {
            name: name.to_string(),
            params: params.into(),
            pin: opts.pin,
            pin_peer: opts.pin_peer,
            budget_ms: opts.budget.map(|b| b.as_millis().max(1) as u64),
            workdir: opts.workdir.clone(),
            window_ms: opts.window.map(|w| w.as_secs_f64() * 1e3),
        });
        match self.request(&req, deadline) {
            Ok(Reply::ProbeResult(r)) => Ok(r),
            Ok(r) => Err(self.unexpected("probe_result", &r)),
            Err(e @ AgentError::Timeout { .. }) => {
                let _ = self.send_only(&Request::CancelProbe {});
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Asks the running probe to stop early; true when one was running.
    pub fn cancel_probe(&self) -> Result<bool, AgentError> {
        match self.request(&Request::CancelProbe {}, self.timeout)? {
            Reply::ProbeCancelled { was_running } => Ok(was_running),
            r => Err(self.unexpected("probe_cancelled", &r)),
        }
    }

    /// Starts a stressor under the controller-chosen `id`; returns the parameters it runs
    /// with. Samples then arrive (see [`AgentClient::take_samples`]).
    pub fn start_stressor(
        &self,
        id: &str,
        name: &str,
        intensity: u8,
        params: impl Into<Params>,
        opts: &StressOpts,
    ) -> Result<ParamValues, AgentError> {
        let req = Request::StartStressor(StartStressor {
            stressor_id: id.to_string(),
            name: name.to_string(),
            intensity,
            params: params.into(),
            pin: opts.pin.clone(),
            caps: opts.caps,
            contained: opts.contained,
            workdir: opts.workdir.clone(),
            sample_ms: opts.sample_interval.map(|d| d.as_millis() as u64),
        });
        match self.request(&req, self.timeout)? {
            Reply::StressorStarted { params, .. } => Ok(params),
            r => Err(self.unexpected("stressor_started", &r)),
        }
    }

    /// Stops a stressor and returns what it did. No sample of it arrives after this returns.
    pub fn stop_stressor(&self, id: &str) -> Result<StressReport, AgentError> {
        let req = Request::StopStressor {
            stressor_id: id.to_string(),
        };
        match self.request(&req, self.timeout)? {
            Reply::StressorStopped { report, .. } => Ok(report),
            r => Err(self.unexpected("stressor_stopped", &r)),
        }
    }

    /// Starts a network service (`kind` as in [`StartService::kind`], `bind` as `ip:port`);
    /// returns the address it listens on.
    pub fn start_service(
        &self,
        id: &str,
        kind: &str,
        bind: &str,
        pin: Option<usize>,
    ) -> Result<String, AgentError> {
        let req = Request::StartService(StartService {
            service_id: id.to_string(),
            kind: kind.to_string(),
            bind: bind.to_string(),
            pin,
        });
        match self.request(&req, self.timeout)? {
            Reply::ServiceStarted { addr, .. } => Ok(addr),
            r => Err(self.unexpected("service_started", &r)),
        }
    }

    /// Stops a network service and returns what it served.
    pub fn stop_service(&self, id: &str) -> Result<ServerStats, AgentError> {
        let req = Request::StopService {
            service_id: id.to_string(),
        };
        match self.request(&req, self.timeout)? {
            Reply::ServiceStopped { stats, .. } => Ok(stats),
            r => Err(self.unexpected("service_stopped", &r)),
        }
    }

    /// Ends the session: the agent stops whatever still runs, answers and exits. Returns what
    /// the stressors still running did.
    pub fn bye(self) -> Result<Vec<StoppedStressor>, AgentError> {
        let r = self.request(&Request::Bye {}, self.timeout);
        self.close();
        let handle = lock(&self.reader).take();
        if let Some(h) = handle {
            let deadline = Instant::now() + self.timeout;
            while !h.is_finished() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(2));
            }
            if h.is_finished() {
                let _ = h.join();
            }
        }
        match r? {
            Reply::Bye { stopped } => Ok(stopped),
            r => Err(self.unexpected("bye", &r)),
        }
    }

    /// Samples received and not yet taken, oldest first.
    pub fn take_samples(&self) -> Vec<Sample> {
        lock(&self.shared.events).samples.drain(..).collect()
    }

    /// Waits up to `timeout` for the next sample.
    pub fn next_sample(&self, timeout: Duration) -> Option<Sample> {
        let deadline = Instant::now() + timeout;
        let mut ev = lock(&self.shared.events);
        loop {
            if let Some(s) = ev.samples.pop_front() {
                return Some(s);
            }
            let now = Instant::now();
            if now >= deadline || lock(&self.shared.pending).closed.is_some() {
                return None;
            }
            ev = self
                .shared
                .events_cv
                .wait_timeout(ev, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Stressors that ended on their own (failed or finished) since the last call.
    pub fn take_exits(&self) -> Vec<StressorExit> {
        std::mem::take(&mut lock(&self.shared.events).exits)
    }

    /// Samples dropped because nobody took them (more than 100,000 queued).
    pub fn dropped_samples(&self) -> u64 {
        lock(&self.shared.events).dropped_samples
    }

    /// Errors the agent sent without an `id` (it could not read a request), since the last
    /// call.
    pub fn take_notices(&self) -> Vec<ErrorBody> {
        std::mem::take(&mut lock(&self.shared.events).notices)
    }

    /// Why the connection ended, once it has.
    pub fn closed_reason(&self) -> Option<String> {
        lock(&self.shared.pending).closed.clone()
    }

    /// Sends a request and waits up to `deadline` for its answer; errors answered by the
    /// agent come back as [`AgentError::Remote`].
    pub fn request(&self, req: &Request, deadline: Duration) -> Result<Reply, AgentError> {
        self.request_ticking(req, deadline, &mut || {})
    }

    /// [`AgentClient::request`], calling `tick` at least every 100 ms while it waits (and once
    /// after the answer came), so events can be handled as they arrive.
    fn request_ticking(
        &self,
        req: &Request,
        deadline: Duration,
        tick: &mut dyn FnMut(),
    ) -> Result<Reply, AgentError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        {
            let mut p = lock(&self.shared.pending);
            if let Some(reason) = &p.closed {
                return Err(AgentError::Disconnected {
                    agent: self.name.clone(),
                    reason: reason.clone(),
                });
            }
            p.waiters.insert(id, tx);
        }
        if let Err(e) = self.write(id, req) {
            lock(&self.shared.pending).waiters.remove(&id);
            return Err(e);
        }
        let end = Instant::now() + deadline;
        let reply = loop {
            let left = end.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left.min(Duration::from_millis(100))) {
                Ok(r) => break r,
                Err(mpsc::RecvTimeoutError::Timeout) if !left.is_zero() => tick(),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    lock(&self.shared.pending).waiters.remove(&id);
                    return Err(AgentError::Timeout {
                        agent: self.name.clone(),
                        request: req.kind(),
                        after: deadline,
                    });
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    tick();
                    return Err(AgentError::Disconnected {
                        agent: self.name.clone(),
                        reason: self
                            .closed_reason()
                            .unwrap_or_else(|| "connection closed".into()),
                    });
                }
            }
        };
        tick();
        match reply {
            Ok(Reply::Error(error)) => Err(AgentError::Remote {
                agent: self.name.clone(),
                request: req.kind(),
                error: Box::new(error),
            }),
            Ok(r) => Ok(r),
            Err(message) => Err(AgentError::Protocol {
                agent: self.name.clone(),
                message: format!("answer to {}: {message}", req.kind()),
            }),
        }
    }

    /// Runs a whole scenario on a host agent and waits for it to end, however long it takes
    /// (a lost connection ends the wait), calling `progress` with each line of its progress.
    /// Returns how it ended and the stored run (JSON).
    pub fn run_scenario(
        &self,
        req: RunScenario,
        progress: &mut dyn FnMut(&str),
    ) -> Result<(ScenarioDone, String), AgentError> {
        let mut data: Vec<(u32, String)> = Vec::new();
        let mut drain = || {
            let mut ev = lock(&self.shared.events);
            let lines: Vec<String> = ev.progress.drain(..).collect();
            data.append(&mut ev.run_data);
            drop(ev);
            for l in &lines {
                progress(l);
            }
        };
        // Long enough for any run: the connection's end is what stops the wait early.
        let forever = Duration::from_secs(10 * 365 * 24 * 3600);
        let reply = self.request_ticking(&Request::RunScenario(req), forever, &mut drain);
        let done = match reply? {
            Reply::ScenarioDone(d) => d,
            r => return Err(self.unexpected("scenario_done", &r)),
        };
        let in_order = data
            .iter()
            .enumerate()
            .all(|(i, (seq, _))| *seq as usize == i);
        let run: String = data.into_iter().map(|(_, c)| c).collect();
        if !in_order || run.len() as u64 != done.bytes {
            return Err(AgentError::Protocol {
                agent: self.name.clone(),
                message: format!(
                    "run {} came in pieces out of order or incomplete: {} of {} bytes",
                    done.run_id,
                    run.len(),
                    done.bytes
                ),
            });
        }
        Ok((done, run))
    }

    /// Sends a request without waiting for its answer (the answer is discarded).
    fn send_only(&self, req: &Request) -> Result<(), AgentError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.write(id, req)
    }

    fn write(&self, id: u64, req: &Request) -> Result<(), AgentError> {
        let mut w = lock(&self.writer);
        let Some(w) = w.as_mut() else {
            return Err(AgentError::Disconnected {
                agent: self.name.clone(),
                reason: "the client was closed".into(),
            });
        };
        wire::write_message(w, Some(id), req).map_err(|source| AgentError::Io {
            agent: self.name.clone(),
            context: format!("sending {}", req.kind()),
            source,
        })
    }

    fn unexpected(&self, wanted: &str, got: &Reply) -> AgentError {
        let got = serde_json::to_value(got)
            .ok()
            .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(String::from))
            .unwrap_or_else(|| "?".into());
        AgentError::Protocol {
            agent: self.name.clone(),
            message: format!("expected {wanted}, got {got}"),
        }
    }

    /// Closes the writing side (the agent sees end of input and stops everything).
    fn close(&self) {
        lock(&self.writer).take();
        if let Some(c) = lock(&self.closer).take() {
            c();
        }
    }
}

impl Drop for AgentClient {
    fn drop(&mut self) {
        self.close();
    }
}

fn reader_loop(reader: impl Read, shared: &Shared) {
    let mut r = BufReader::with_capacity(64 * 1024, reader);
    let mut buf = Vec::new();
    let reason = loop {
        match wire::read_line(&mut r, &mut buf, MAX_LINE_BYTES) {
            Ok(Line::Eof) => break "end of stream".to_string(),
            Err(e) => break format!("read failed: {e}"),
            Ok(Line::TooLong(n)) => {
                break format!("the agent sent a line of {n} bytes, over the limit")
            }
            Ok(Line::Line) => {}
        }
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let d = wire::decode::<Reply>(&buf);
        match d.id {
            Some(id) => {
                let waiter = lock(&shared.pending).waiters.remove(&id);
                if let Some(w) = waiter {
                    let _ = w.send(d.body);
                }
            }
            None => {
                let mut ev = lock(&shared.events);
                match d.body {
                    Ok(Reply::Sample(s)) => {
                        if ev.samples.len() >= MAX_QUEUED_SAMPLES {
                            ev.samples.pop_front();
                            ev.dropped_samples += 1;
                        }
                        ev.samples.push_back(s);
                    }
                    Ok(Reply::StressorExited(x)) => ev.exits.push(x),
                    Ok(Reply::RunProgress { line }) => {
                        if ev.progress.len() >= MAX_QUEUED_SAMPLES {
                            ev.progress.pop_front();
                        }
                        ev.progress.push_back(line)
                    }
                    Ok(Reply::RunData { seq, chunk }) => ev.run_data.push((seq, chunk)),
                    Ok(Reply::Error(e)) => ev.notices.push(e),
                    // Events of a newer minor version, or noise: ignored.
                    _ => {}
                }
                drop(ev);
                shared.events_cv.notify_all();
            }
        }
    };
    let mut p = lock(&shared.pending);
    p.closed = Some(reason);
    p.waiters.clear();
    drop(p);
    shared.events_cv.notify_all();
}
