//! The agent side of a session: reads requests, runs workloads, writes replies.
//!
//! The reading loop never runs a workload itself. A probe runs in a worker thread (one at a
//! time: two probes at once in one tenant would measure each other); each stressor runs in
//! its own thread with a sampler thread beside it that streams `sample` events. So `ping`,
//! `cancel_probe` and `stop_stressor` are answered while work is under way. Every thread
//! writes whole lines through one shared, locked writer, so lines never interleave.
//!
//! The session ends on `bye`, at end of input, or on a failed handshake; every stressor,
//! probe and service it started is stopped first.

use std::collections::BTreeMap;
use std::io::{self, BufReader, Read, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use isobench_workloads::ctx::StressCaps;
use isobench_workloads::{
    nearest_names, Env, HostFacts, ParamError, ParamSpec, ParamValues, Probe, ProbeCtx, StressCtx,
    StressReport, Stressor, SCHEMA_VERSION,
};
use serde::Serialize;
use serde_json::Value;

use crate::catalog::{Catalog, RunningService, ServiceError};
use crate::mechanism;
use crate::protocol::{
    ErrorBody, ErrorCode, Hello, Params, ProbeResult, ProtocolVersion, Reply, Request, RunProbe,
    RunScenario, Sample, ScenarioDone, StartService, StartStressor, StoppedStressor, StressorExit,
    Token, DEFAULT_SAMPLE_INTERVAL, MAX_HELLO_LINE_BYTES, MAX_LINE_BYTES, PROTOCOL_VERSION,
};
use crate::scenario::{chunks, ScenarioRunner, RUN_DATA_CHUNK_BYTES};
use crate::wire::{self, Line};

/// Errors travel boxed inside the agent: they are rare and `ErrorBody` is large.
pub(crate) type Failure = Box<ErrorBody>;

/// How an agent behaves, whatever the transport.
#[derive(Clone)]
pub struct AgentConfig {
    /// What the agent can run.
    pub catalog: Catalog,
    /// When set, `hello` must carry this token (compared in constant time).
    pub token: Option<Token>,
    /// On socket transports, how long a new connection may take to send `hello`.
    pub handshake_timeout: Duration,
    /// At the end of a session, how long to wait for workloads to stop before leaving them.
    pub stop_timeout: Duration,
    /// The protocol version this agent speaks (tests set others to check negotiation).
    pub protocol_version: ProtocolVersion,
    /// How a host agent runs whole scenarios (`run_scenario`); `None` inside a tenant.
    pub scenarios: Option<Arc<dyn ScenarioRunner>>,
}

impl std::fmt::Debug for AgentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentConfig")
            .field("catalog", &self.catalog)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("handshake_timeout", &self.handshake_timeout)
            .field("stop_timeout", &self.stop_timeout)
            .field("protocol_version", &self.protocol_version)
            .field("scenarios", &self.scenarios.is_some())
            .finish()
    }
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            catalog: Catalog::builtin(),
            token: None,
            handshake_timeout: Duration::from_secs(10),
            stop_timeout: Duration::from_secs(30),
            protocol_version: PROTOCOL_VERSION,
            scenarios: None,
        }
    }
}

impl AgentConfig {
    /// Requires `token` in `hello`.
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(Token(token.into()));
        self
    }

    /// Runs whole scenarios with `runner` (a host agent).
    pub fn with_scenarios(mut self, runner: Arc<dyn ScenarioRunner>) -> Self {
        self.scenarios = Some(runner);
        self
    }

    /// Uses `catalog` instead of the built-in one.
    pub fn with_catalog(mut self, catalog: Catalog) -> Self {
        self.catalog = catalog;
        self
    }
}

/// How a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEnd {
    /// The controller said `bye`.
    Bye,
    /// The controller closed its end.
    Eof,
    /// The handshake failed (bad token, version mismatch, no `hello`); carries the reason.
    Refused(String),
    /// Reading failed; carries the error.
    Lost(String),
}

/// Serves one session over any byte stream pair (a pipe pair, a socket, a serial line).
///
/// Returns when the session ends; by then every workload it started has been stopped (or
/// left behind after [`AgentConfig::stop_timeout`] if it ignored its stop flag).
pub fn serve_connection<R, W>(reader: R, writer: W, config: &AgentConfig) -> SessionEnd
where
    R: Read,
    W: Write + Send + 'static,
{
    run_session(reader, writer, config, &mut || Ok(()))
}

/// [`serve_connection`] with a hook called once `hello` has passed the token and version
/// checks; an error from it is sent back and ends the session.
pub(crate) fn run_session<R, W>(
    reader: R,
    writer: W,
    config: &AgentConfig,
    on_hello: &mut dyn FnMut() -> Result<(), Failure>,
) -> SessionEnd
where
    R: Read,
    W: Write + Send + 'static,
{
    let mut s = Session {
        cfg: config,
        out: Outbox(Arc::new(Mutex::new(Box::new(writer)))),
        negotiated: None,
        probe: Arc::new(Mutex::new(None)),
        probe_threads: Vec::new(),
        stressors: BTreeMap::new(),
        stoppers: Vec::new(),
        services: BTreeMap::new(),
        scenario: None,
    };
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let mut buf = Vec::new();
    let end = loop {
        let max = if s.negotiated.is_none() {
            MAX_HELLO_LINE_BYTES
        } else {
            MAX_LINE_BYTES
        };
        let line = match wire::read_line(&mut reader, &mut buf, max) {
            Ok(l) => l,
            Err(e) if s.negotiated.is_none() && is_timeout(&e) => {
                break SessionEnd::Refused("no hello before the handshake timeout".into())
            }
            Err(e) => break SessionEnd::Lost(e.to_string()),
        };
        match line {
            Line::Eof => break SessionEnd::Eof,
            Line::TooLong(n) => {
                s.out.send(
                    None,
                    &Reply::Error(ErrorBody::new(
                        ErrorCode::BadRequest,
                        format!("line of {n} bytes is longer than the limit of {max}"),
                    )),
                );
                if s.negotiated.is_none() && s.cfg.token.is_some() {
                    break SessionEnd::Refused("oversized line before hello".into());
                }
            }
            Line::Line => {
                if buf.iter().all(u8::is_ascii_whitespace) {
                    // Before `hello` on a token-protected agent, nothing but `hello` keeps
                    // the connection: not even blank lines, which could hold it open.
                    if s.negotiated.is_none() && s.cfg.token.is_some() {
                        break SessionEnd::Refused("blank line before hello".into());
                    }
                    continue;
                }
                if let Some(end) = s.handle_line(&buf, on_hello) {
                    break end;
                }
            }
        }
    };
    if end != SessionEnd::Bye {
        s.shutdown();
    }
    end
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// The writing half, shared by every thread of a session.
#[derive(Clone)]
struct Outbox(Arc<Mutex<Box<dyn Write + Send>>>);

impl Outbox {
    /// Writes one message; a failed write is ignored (the reading side sees the end).
    fn send<T: Serialize>(&self, id: Option<u64>, body: &T) {
        let line = wire::encode(id, body);
        let mut w = lock(&self.0);
        let _ = w.write_all(&line).and_then(|_| w.flush());
    }

    fn error(&self, id: Option<u64>, e: impl Into<Failure>) {
        self.send(id, &Reply::Error(*e.into()));
    }
}

fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The probe that is running, if any.
struct ActiveProbe {
    stop: Arc<AtomicBool>,
    cancelled: Arc<AtomicBool>,
}

struct ActiveStressor {
    stop: Arc<AtomicBool>,
    worker: JoinHandle<Result<StressReport, Failure>>,
    /// The stressor's live operation count, for an answer when its workers are slow to stop.
    ops: Arc<AtomicU64>,
    started: Instant,
}

/// How long `stop_stressor` waits for a stressor's threads before it answers from the live
/// counters: well under a client's request timeout (10 s by default). A worker may be in an
/// uninterruptible wait in the kernel (writeback throttled by the tenant's io limit); the
/// stop must still be answered. The threads are joined later, or end with the tenant.
const STOP_ANSWER_WAIT: Duration = Duration::from_secs(4);

/// The answer to a stop whose stressor has not finished within [`STOP_ANSWER_WAIT`]: the
/// operations counted until then, and no bytes or pressure (not known before the stressor
/// itself reports).
fn late_stop_report(ops: u64, elapsed_s: f64, waited: Duration) -> StressReport {
    StressReport {
        ops,
        elapsed_s,
        ops_per_sec: if elapsed_s > 0.0 {
            ops as f64 / elapsed_s
        } else {
            0.0
        },
        op_unit: "operation".into(),
        workers: 0,
        bytes: 0,
        notes: vec![format!(
            "stop_not_finished: the stressor's threads had not stopped {:.1} s after the stop \
             (blocked in the kernel, e.g. writeback throttled by the tenant's io limit): \
             operations counted until then; bytes and delivered pressure unknown",
            waited.as_secs_f64()
        )],
        pressure: Vec::new(),
    }
}

struct Session<'a> {
    cfg: &'a AgentConfig,
    out: Outbox,
    negotiated: Option<ProtocolVersion>,
    probe: Arc<Mutex<Option<ActiveProbe>>>,
    probe_threads: Vec<JoinHandle<()>>,
    stressors: BTreeMap<String, ActiveStressor>,
    stoppers: Vec<JoinHandle<()>>,
    services: BTreeMap<String, Box<dyn RunningService>>,
    /// The scenario running, if any: its stop flag and thread.
    scenario: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
}

impl Session<'_> {
    /// Handles one line; `Some` ends the session.
    fn handle_line(
        &mut self,
        line: &[u8],
        on_hello: &mut dyn FnMut() -> Result<(), Failure>,
    ) -> Option<SessionEnd> {
        let d = wire::decode::<Request>(line);
        let guarded = self.negotiated.is_none() && self.cfg.token.is_some();
        let req = match d.body {
            Ok(r) => r,
            Err(why) => {
                let known = d.kind.as_deref().is_some_and(is_known_request);
                let e = match (&d.kind, d.id) {
                    (Some(k), Some(_)) if !known => ErrorBody::new(
                        ErrorCode::UnknownRequest,
                        format!(
                            "unknown request type `{k}` (this agent speaks protocol {})",
                            self.cfg.protocol_version
                        ),
                    ),
                    (_, None) if d.kind.is_some() => ErrorBody::new(
                        ErrorCode::BadRequest,
                        "the request has no `id` (a non-negative integer)",
                    ),
                    _ => ErrorBody::new(ErrorCode::BadRequest, format!("malformed request: {why}")),
                };
                self.out.error(d.id, e);
                return guarded.then(|| SessionEnd::Refused("malformed first message".into()));
            }
        };
        let Some(id) = d.id else {
            self.out.error(
                None,
                ErrorBody::new(
                    ErrorCode::BadRequest,
                    format!(
                        "`{}` request has no `id` (a non-negative integer)",
                        req.kind()
                    ),
                ),
            );
            return guarded.then(|| SessionEnd::Refused("request without id".into()));
        };
        if self.negotiated.is_none() && !matches!(req, Request::Hello { .. }) {
            self.out.error(
                Some(id),
                ErrorBody::new(
                    ErrorCode::HelloRequired,
                    format!(
                        "`{}` before `hello`: start every session with hello",
                        req.kind()
                    ),
                ),
            );
            return guarded.then(|| SessionEnd::Refused("request before hello".into()));
        }
        match req {
            Request::Hello {
                protocol_version,
                token,
                ..
            } => return self.hello(id, protocol_version, token, on_hello),
            Request::Ping {} => self.out.send(Some(id), &Reply::Pong {}),
            Request::RunProbe(r) => self.run_probe(id, r),
            Request::CancelProbe {} => {
                let was_running = match lock(&self.probe).as_ref() {
                    Some(p) => {
                        p.cancelled.store(true, Ordering::SeqCst);
                        p.stop.store(true, Ordering::SeqCst);
                        true
                    }
                    None => false,
                };
                self.out
                    .send(Some(id), &Reply::ProbeCancelled { was_running });
            }
            Request::StartStressor(r) => {
                self.start_stressor(id, r);
                self.reap_stoppers();
            }
            Request::StopStressor { stressor_id } => self.stop_stressor(id, stressor_id),
            Request::StartService(r) => self.start_service(id, r),
            Request::StopService { service_id } => self.stop_service(id, service_id),
            Request::RunScenario(r) => self.run_scenario(id, r),
            Request::Bye {} => {
                let stopped = self.shutdown();
                self.out.send(Some(id), &Reply::Bye { stopped });
                return Some(SessionEnd::Bye);
            }
        }
        None
    }

    fn hello(
        &mut self,
        id: u64,
        theirs: ProtocolVersion,
        token: Option<Token>,
        on_hello: &mut dyn FnMut() -> Result<(), Failure>,
    ) -> Option<SessionEnd> {
        if self.negotiated.is_some() {
            self.out.error(
                Some(id),
                ErrorBody::new(ErrorCode::BadRequest, "hello was already received"),
            );
            return None;
        }
        if let Some(expected) = &self.cfg.token {
            let ok = token
                .as_ref()
                .is_some_and(|t| crate::token::tokens_match(expected.0.as_bytes(), t.0.as_bytes()));
            if !ok {
                let what = if token.is_none() { "missing" } else { "wrong" };
                self.out.error(
                    Some(id),
                    ErrorBody::new(
                        ErrorCode::Unauthorized,
                        format!("token {what}: this agent requires the token it was started with"),
                    ),
                );
                return Some(SessionEnd::Refused(format!("token {what}")));
            }
        }
        let ours = self.cfg.protocol_version;
        let Some(v) = ours.negotiate(theirs) else {
            let mut e = ErrorBody::new(
                ErrorCode::VersionMismatch,
                format!(
                    "the controller speaks protocol {theirs}, this agent speaks {ours}: the major \
                     versions must match; run the same isobench version on both sides"
                ),
            );
            e.protocol_version = Some(ours);
            self.out.error(Some(id), e);
            return Some(SessionEnd::Refused(format!(
                "protocol version mismatch (controller {theirs}, agent {ours})"
            )));
        };
        if let Err(e) = on_hello() {
            let why = e.message.clone();
            self.out.error(Some(id), e);
            return Some(SessionEnd::Refused(why));
        }
        self.negotiated = Some(v);
        let cat = &self.cfg.catalog;
        let hello = Hello {
            protocol_version: v,
            agent_protocol_version: ours,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            schema_version: SCHEMA_VERSION,
            pid: std::process::id(),
            host: HostFacts::detect(),
            env: Env::detect(),
            probes: cat.probe_names().into_iter().map(String::from).collect(),
            stressors: cat.stressor_names().into_iter().map(String::from).collect(),
            services: cat.service_kinds(),
        };
        self.out.send(Some(id), &Reply::Hello(Box::new(hello)));
        None
    }

    fn run_probe(&mut self, id: u64, r: RunProbe) {
        let (probe, params) = match self.check_probe_request(&r) {
            Ok(p) => p,
            Err(e) => return self.out.error(Some(id), e),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let cancelled = Arc::new(AtomicBool::new(false));
        if let Err(e) = self.claim_probe_slot(&r.name, &stop, &cancelled) {
            return self.out.error(Some(id), e);
        }
        let out = self.out.clone();
        let slot = self.probe.clone();
        let spawned = thread::Builder::new()
            .name(format!("probe-{}", probe.name()))
            .spawn(move || {
                let result =
                    catch_unwind(AssertUnwindSafe(|| measure_probe(probe, r, stop, params)));
                let result = match result {
                    Ok(r) => r,
                    Err(p) => Err(panicked("probe", probe.name(), p)),
                };
                let result = if cancelled.load(Ordering::SeqCst) {
                    Err(ErrorBody::new(
                        ErrorCode::Cancelled,
                        format!("probe `{}` was cancelled", probe.name()),
                    )
                    .into())
                } else {
                    result
                };
                // Free the slot before answering, so the next run_probe is never refused.
                *lock(&slot) = None;
                match result {
                    Ok(res) => out.send(Some(id), &Reply::ProbeResult(res)),
                    Err(e) => out.error(Some(id), e),
                }
            });
        match spawned {
            Ok(h) => {
                self.probe_threads.retain(|h| !h.is_finished());
                self.probe_threads.push(h);
            }
            Err(e) => {
                *lock(&self.probe) = None;
                self.out.error(
                    Some(id),
                    ErrorBody::new(ErrorCode::Internal, format!("cannot start a thread: {e}")),
                );
            }
        }
    }

    /// The probe a `run_probe` names and its resolved parameters, once its CPUs are checked.
    fn check_probe_request(
        &self,
        r: &RunProbe,
    ) -> Result<(&'static dyn Probe, ParamValues), Failure> {
        let cat = &self.cfg.catalog;
        let Some(probe) = cat.probe(&r.name) else {
            let mut e = unknown_workload("probe", &r.name, cat.probe_names());
            if cat.stressor(&r.name).is_some() {
                e.message = format!(
                    "`{}` is a stressor, not a probe: start it with start_stressor",
                    r.name
                );
            }
            return Err(e);
        };
        let params = resolve_params(probe.name(), probe.params(), &r.params)?;
        let pins: Vec<(&str, usize)> = [("pin", r.pin), ("pin_peer", r.pin_peer)]
            .into_iter()
            .filter_map(|(n, c)| c.map(|c| (n, c)))
            .collect();
        check_cpus(&pins)?;
        Ok((probe, params))
    }

    /// Takes the agent's one probe slot for probe `name`; `Busy` while another probe runs.
    fn claim_probe_slot(
        &self,
        name: &str,
        stop: &Arc<AtomicBool>,
        cancelled: &Arc<AtomicBool>,
    ) -> Result<(), Failure> {
        let mut slot = lock(&self.probe);
        if slot.is_some() {
            return Err(ErrorBody::new(
                ErrorCode::Busy,
                format!(
                    "a probe is already running in this agent; probes run one at a \
                     time (cancel it with cancel_probe, or wait), so `{name}` was not started"
                ),
            )
            .into());
        }
        *slot = Some(ActiveProbe {
            stop: stop.clone(),
            cancelled: cancelled.clone(),
        });
        Ok(())
    }

    /// Starts a stressor and answers `stressor_started`.
    fn start_stressor(&mut self, id: u64, r: StartStressor) {
        match self.try_start_stressor(id, r) {
            Ok(()) => {}
            Err(e) => self.out.error(Some(id), e),
        }
    }

    /// The stressor a `start_stressor` names, once its id is free and its intensity in range.
    fn check_stressor_request(&self, r: &StartStressor) -> Result<&'static dyn Stressor, Failure> {
        if r.stressor_id.is_empty() {
            return Err(ErrorBody::new(
                ErrorCode::BadRequest,
                "`stressor_id` is empty: give each running stressor a name",
            )
            .into());
        }
        if self.stressors.contains_key(&r.stressor_id) {
            return Err(ErrorBody::new(
                ErrorCode::Busy,
                format!(
                    "stressor id `{}` is in use: stop it first (stop_stressor also collects its \
                     report)",
                    r.stressor_id
                ),
            )
            .into());
        }
        let cat = &self.cfg.catalog;
        let Some(stressor) = cat.stressor(&r.name) else {
            let mut e = unknown_workload("stressor", &r.name, cat.stressor_names());
            if cat.probe(&r.name).is_some() {
                e.message = format!(
                    "`{}` is a probe, not a stressor: run it with run_probe",
                    r.name
                );
            }
            return Err(e);
        };
        if r.intensity > 100 {
            let mut e = ErrorBody::new(
                ErrorCode::BadParameter,
                format!(
                    "{}: `intensity={}` is out of range: allowed 0..=100",
                    r.name, r.intensity
                ),
            );
            e.param = Some("intensity".into());
            e.range = Some("0..=100".into());
            return Err(e.into());
        }
        Ok(stressor)
    }

    fn try_start_stressor(&mut self, id: u64, r: StartStressor) -> Result<(), Failure> {
        let stressor = self.check_stressor_request(&r)?;
        let params = resolve_params(stressor.name(), stressor.params(), &r.params)?;
        if let Some(pin) = &r.pin {
            let pins: Vec<(&str, usize)> = pin.iter().map(|&c| ("pin", c)).collect();
            check_cpus(&pins)?;
        }
        if stressor.aggressive() && !r.contained && r.caps.is_none() {
            return Err(ErrorBody::new(
                ErrorCode::Refused,
                format!(
                    "stressor `{}` can take the host down unless contained: run it in a tenant \
                     that bounds pids, memory and io (contained=true) or give caps \
                     (max_tasks, max_bytes)",
                    r.name
                ),
            )
            .into());
        }
        let env = Env::detect();
        if let Err(u) = stressor.supported(&env) {
            return Err(ErrorBody::new(
                ErrorCode::Unsupported,
                format!("stressor `{}` cannot run here: {}", r.name, u.reason),
            )
            .into());
        }
        let mut ctx = StressCtx::new(env, r.intensity);
        ctx.pin = r.pin;
        ctx.caps = StressCaps {
            max_tasks: r.caps.max_tasks,
            max_bytes: r.caps.max_bytes,
        };
        if let Some(w) = r.workdir {
            ctx.workdir = w;
        }
        let interval = match r.sample_ms {
            Some(0) => None,
            Some(ms) => Some(Duration::from_millis(ms)),
            None => Some(DEFAULT_SAMPLE_INTERVAL),
        };
        let stop = ctx.stop.clone();
        let ops = ctx.ops.clone();
        let started_at = Instant::now();
        let out = self.out.clone();
        let sid = r.stressor_id.clone();
        let started = params.clone();
        // Answer before the worker can emit its first sample or exit event.
        self.out.send(
            Some(id),
            &Reply::StressorStarted {
                stressor_id: sid.clone(),
                params: started,
            },
        );
        let worker = thread::Builder::new()
            .name(format!("stressor-{sid}"))
            .spawn(move || stressor_thread(stressor, ctx, params, sid, interval, out));
        match worker {
            Ok(worker) => {
                self.stressors.insert(
                    r.stressor_id,
                    ActiveStressor {
                        stop,
                        worker,
                        ops,
                        started: started_at,
                    },
                );
                Ok(())
            }
            Err(e) => {
                // The start was already acknowledged: report the failure as an exit.
                self.out.send(
                    None,
                    &Reply::StressorExited(StressorExit {
                        stressor_id: r.stressor_id,
                        report: None,
                        error: Some(ErrorBody::new(
                            ErrorCode::Internal,
                            format!("cannot start a thread: {e}"),
                        )),
                    }),
                );
                Ok(())
            }
        }
    }

    fn stop_stressor(&mut self, id: u64, stressor_id: String) {
        let Some(st) = self.stressors.remove(&stressor_id) else {
            return self.out.error(
                Some(id),
                ErrorBody::new(
                    ErrorCode::NotFound,
                    format!("no running stressor has id `{stressor_id}`"),
                ),
            );
        };
        st.stop.store(true, Ordering::SeqCst);
        let stop_at = Instant::now();
        let (ops, started) = (st.ops, st.started);
        // Joining happens on a thread of its own so the session stays responsive. When no
        // thread can be started (a fork bomb in this tenant has used every pid), it happens
        // here instead: a stop must never fail for want of a thread.
        let worker = Arc::new(Mutex::new(Some(st.worker)));
        let finish = {
            let out = self.out.clone();
            move |worker: &Mutex<Option<_>>, stressor_id: String| {
                let Some(w) = worker.lock().unwrap_or_else(|p| p.into_inner()).take() else {
                    return;
                };
                if !wait_until_finished(&w, stop_at + STOP_ANSWER_WAIT) {
                    let report = late_stop_report(
                        ops.load(Ordering::Relaxed),
                        stop_at.duration_since(started).as_secs_f64(),
                        stop_at.elapsed(),
                    );
                    out.send(
                        Some(id),
                        &Reply::StressorStopped {
                            stressor_id: stressor_id.clone(),
                            report,
                        },
                    );
                    let _ = w.join();
                    return;
                }
                match join_worker(w, &stressor_id) {
                    Ok(report) => out.send(
                        Some(id),
                        &Reply::StressorStopped {
                            stressor_id,
                            report,
                        },
                    ),
                    Err(e) => out.error(Some(id), e),
                }
            }
        };
        let (w2, sid2, finish2) = (worker.clone(), stressor_id.clone(), finish.clone());
        let joiner = thread::Builder::new()
            .name(format!("stop-{stressor_id}"))
            .spawn(move || finish2(&w2, sid2));
        match joiner {
            Ok(h) => self.stoppers.push(h),
            Err(_) => finish(&worker, stressor_id),
        }
        self.reap_stoppers();
    }

    fn reap_stoppers(&mut self) {
        self.stoppers.retain(|h| !h.is_finished());
    }

    fn start_service(&mut self, id: u64, r: StartService) {
        let cat = &self.cfg.catalog;
        let kinds = cat.service_kinds();
        let base = r.kind.split(':').next().unwrap_or("").trim();
        let starter = match cat.services() {
            Some(s) if kinds.iter().any(|k| k == base) => s.clone(),
            _ => {
                let names: Vec<&str> = kinds.iter().map(String::as_str).collect();
                return self
                    .out
                    .error(Some(id), unknown_workload("service", &r.kind, names));
            }
        };
        if r.service_id.is_empty() {
            return self.out.error(
                Some(id),
                ErrorBody::new(
                    ErrorCode::BadRequest,
                    "`service_id` is empty: give each running service a name",
                ),
            );
        }
        if self.services.contains_key(&r.service_id) {
            return self.out.error(
                Some(id),
                ErrorBody::new(
                    ErrorCode::Busy,
                    format!("service id `{}` is in use: stop it first", r.service_id),
                ),
            );
        }
        match starter.start(&r.kind, &r.bind, r.pin) {
            Ok(svc) => {
                let addr = svc.addr();
                self.services.insert(r.service_id.clone(), svc);
                self.out.send(
                    Some(id),
                    &Reply::ServiceStarted {
                        service_id: r.service_id,
                        addr,
                    },
                );
            }
            Err(ServiceError::Invalid(why)) => {
                let mut e = ErrorBody::new(
                    ErrorCode::BadParameter,
                    format!("service `{}` on {}: {why}", r.kind, r.bind),
                );
                e.param = Some("kind/bind".into());
                self.out.error(Some(id), e);
            }
            Err(ServiceError::Failed(why)) => self.out.error(
                Some(id),
                ErrorBody::new(
                    ErrorCode::WorkloadFailed,
                    format!("service `{}` on {} did not start: {why}", r.kind, r.bind),
                ),
            ),
        }
    }

    fn stop_service(&mut self, id: u64, service_id: String) {
        let Some(svc) = self.services.remove(&service_id) else {
            return self.out.error(
                Some(id),
                ErrorBody::new(
                    ErrorCode::NotFound,
                    format!("no running service has id `{service_id}`"),
                ),
            );
        };
        match svc.stop() {
            Ok(stats) => self
                .out
                .send(Some(id), &Reply::ServiceStopped { service_id, stats }),
            Err(why) => self.out.error(
                Some(id),
                ErrorBody::new(
                    ErrorCode::WorkloadFailed,
                    format!("service `{service_id}` failed while running: {why}"),
                ),
            ),
        }
    }

    /// Stops everything the session started; returns what the stressors did.
    /// Runs a whole scenario in a thread of its own: progress lines as `run_progress` events,
    /// then the stored run in `run_data` pieces, then `scenario_done`. One at a time.
    fn run_scenario(&mut self, id: u64, r: RunScenario) {
        let Some(runner) = self.cfg.scenarios.clone() else {
            return self.out.error(
                Some(id),
                ErrorBody::new(
                    ErrorCode::Unsupported,
                    "this agent runs workloads inside a tenant, not scenarios; start a host \
                     agent with `isobench agent --listen ADDR --token-file FILE`",
                ),
            );
        };
        if self
            .scenario
            .as_ref()
            .is_some_and(|(_, h)| !h.is_finished())
        {
            return self.out.error(
                Some(id),
                ErrorBody::new(
                    ErrorCode::Busy,
                    "a scenario is already running in this session; wait for its \
                     scenario_done",
                ),
            );
        }
        if let Some((_, h)) = self.scenario.take() {
            let _ = h.join();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let out = self.out.clone();
        let flag = stop.clone();
        let spawned = thread::Builder::new()
            .name("scenario".into())
            .spawn(move || {
                let mut progress = |line: &str| {
                    out.send(
                        None,
                        &Reply::RunProgress {
                            line: line.to_string(),
                        },
                    )
                };
                let ran = catch_unwind(AssertUnwindSafe(|| runner.run(&r, &mut progress, &flag)))
                    .unwrap_or_else(|p| Err(panicked("scenario", &r.file_name, p)));
                match ran {
                    Ok(done) => {
                        let pieces = chunks(&done.run, RUN_DATA_CHUNK_BYTES);
                        for (seq, chunk) in pieces.iter().enumerate() {
                            out.send(
                                None,
                                &Reply::RunData {
                                    seq: seq as u32,
                                    chunk: chunk.to_string(),
                                },
                            );
                        }
                        out.send(
                            Some(id),
                            &Reply::ScenarioDone(ScenarioDone {
                                run_id: done.run_id,
                                status: done.status,
                                exit_code: done.exit_code,
                                chunks: pieces.len() as u32,
                                bytes: done.run.len() as u64,
                            }),
                        );
                    }
                    Err(e) => out.error(Some(id), e),
                }
            });
        match spawned {
            Ok(h) => self.scenario = Some((stop, h)),
            Err(e) => self.out.error(
                Some(id),
                ErrorBody::new(
                    ErrorCode::Internal,
                    format!("cannot start the scenario thread: {e}"),
                ),
            ),
        }
    }

    fn shutdown(&mut self) -> Vec<StoppedStressor> {
        let deadline = Instant::now() + self.cfg.stop_timeout;
        if let Some((stop, h)) = self.scenario.take() {
            stop.store(true, Ordering::SeqCst);
            if wait_until_finished(&h, deadline) {
                let _ = h.join();
            }
        }
        if let Some(p) = lock(&self.probe).as_ref() {
            p.cancelled.store(true, Ordering::SeqCst);
            p.stop.store(true, Ordering::SeqCst);
        }
        for st in self.stressors.values() {
            st.stop.store(true, Ordering::SeqCst);
        }
        let mut stopped = Vec::new();
        for (stressor_id, st) in std::mem::take(&mut self.stressors) {
            let (report, error) = if wait_until_finished(&st.worker, deadline) {
                match join_worker(st.worker, &stressor_id) {
                    Ok(r) => (Some(r), None),
                    Err(e) => (None, Some(*e)),
                }
            } else {
                (
                    None,
                    Some(ErrorBody::new(
                        ErrorCode::Internal,
                        format!("stressor `{stressor_id}` did not stop in time; left running"),
                    )),
                )
            };
            stopped.push(StoppedStressor {
                stressor_id,
                report,
                error,
            });
        }
        for (_, svc) in std::mem::take(&mut self.services) {
            let _ = svc.stop();
        }
        for h in self.stoppers.drain(..).chain(self.probe_threads.drain(..)) {
            if wait_until_finished(&h, deadline) {
                let _ = h.join();
            }
        }
        stopped
    }
}

fn is_known_request(kind: &str) -> bool {
    matches!(
        kind,
        "hello"
            | "ping"
            | "run_probe"
            | "cancel_probe"
            | "start_stressor"
            | "stop_stressor"
            | "start_service"
            | "stop_service"
            | "run_scenario"
            | "bye"
    )
}

fn wait_until_finished<T>(h: &JoinHandle<T>, deadline: Instant) -> bool {
    while !h.is_finished() {
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(2));
    }
    true
}

fn join_worker(
    h: JoinHandle<Result<StressReport, Failure>>,
    stressor_id: &str,
) -> Result<StressReport, Failure> {
    h.join()
        .unwrap_or_else(|p| Err(panicked("stressor", stressor_id, p)))
}

fn panicked(what: &str, name: &str, p: Box<dyn std::any::Any + Send>) -> Failure {
    let msg = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into());
    Box::new(ErrorBody::new(
        ErrorCode::Internal,
        format!("{what} `{name}` panicked: {msg}"),
    ))
}

/// Checks that every pinned CPU is one this agent may run on.
fn check_cpus(pins: &[(&str, usize)]) -> Result<(), Failure> {
    if pins.is_empty() {
        return Ok(());
    }
    let allowed = isobench_workloads::env::affinity_cpus();
    for &(name, cpu) in pins {
        if !allowed.contains(&cpu) {
            let list: Vec<String> = allowed.iter().map(|c| c.to_string()).collect();
            let mut e = ErrorBody::new(
                ErrorCode::BadParameter,
                format!(
                    "`{name}={cpu}`: CPU {cpu} is not one this agent may use (its CPUs: {})",
                    list.join(",")
                ),
            );
            e.param = Some(name.to_string());
            e.range = Some(list.join(","));
            return Err(Box::new(e));
        }
    }
    Ok(())
}

/// Runs `probe` as `r` asks (on the probe thread): its context from the request, then the
/// probe itself, with the mechanism counters read around it.
fn measure_probe(
    probe: &'static dyn Probe,
    r: RunProbe,
    stop: Arc<AtomicBool>,
    params: ParamValues,
) -> Result<ProbeResult, Failure> {
    let mut ctx = ProbeCtx::detect();
    ctx.pin = r.pin;
    ctx.pin_peer = r.pin_peer;
    if let Some(ms) = r.budget_ms {
        ctx.budget = Duration::from_millis(ms.max(1));
    }
    ctx.window = r
        .window_ms
        .filter(|ms| ms.is_finite() && *ms > 0.0)
        .map(|ms| Duration::from_secs_f64(ms / 1e3));
    if let Some(w) = r.workdir {
        ctx.workdir = w;
    }
    ctx.stop = stop;
    if let Err(u) = probe.supported(&ctx.env) {
        return Err(ErrorBody::new(
            ErrorCode::Unsupported,
            format!("probe `{}` cannot run here: {}", probe.name(), u.reason),
        )
        .into());
    }
    let before = mechanism::Snapshot::read();
    let t0 = Instant::now();
    let metrics = probe.run(&ctx, &params).map_err(|e| {
        ErrorBody::new(
            ErrorCode::WorkloadFailed,
            format!("probe `{}` failed: {e:#}", probe.name()),
        )
    })?;
    Ok(ProbeResult {
        name: probe.name().to_string(),
        metrics,
        params,
        elapsed_s: t0.elapsed().as_secs_f64(),
        timer_overhead_ns: ctx.timer_overhead_ns,
        context: Some(mechanism::context_between(
            &before,
            &mechanism::Snapshot::read(),
            ctx.pin,
        )),
    })
}

/// An `unknown_workload` error with the closest names.
fn unknown_workload(what: &str, name: &str, known: Vec<&str>) -> Failure {
    let suggestions: Vec<String> = nearest_names(name, known.iter().copied())
        .into_iter()
        .map(String::from)
        .collect();
    let hint = if suggestions.is_empty() {
        format!("known {what}s: {}", known.join(", "))
    } else {
        format!("did you mean `{}`?", suggestions.join("`, `"))
    };
    let mut e = ErrorBody::new(
        ErrorCode::UnknownWorkload,
        format!("no {what} named `{name}`; {hint}"),
    );
    e.suggestions = suggestions;
    Box::new(e)
}

/// Checks wire parameters against a workload's table and fills in defaults.
fn resolve_params(
    workload: &str,
    specs: &[ParamSpec],
    given: &Params,
) -> Result<ParamValues, Failure> {
    let mut pairs = Vec::new();
    let mut nulls = Vec::new();
    for (k, v) in &given.0 {
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Null => {
                nulls.push(k.clone());
                continue;
            }
            _ => {
                let mut e = ErrorBody::new(
                    ErrorCode::BadParameter,
                    format!("{workload}: `{k}` must be a string, a number or a boolean"),
                );
                e.param = Some(k.clone());
                return Err(e.into());
            }
        };
        pairs.push((k.clone(), text));
    }
    // A null asks for the default; only its name is checked.
    for k in nulls {
        let key = k.replace('-', "_");
        if !specs.iter().any(|s| s.name == key) {
            let names = specs.iter().map(|s| s.name);
            return Err(param_error(ParamError::Unknown {
                workload: workload.into(),
                suggestions: nearest_names(&key, names)
                    .into_iter()
                    .map(String::from)
                    .collect(),
                known: specs.iter().map(|s| s.name).collect::<Vec<_>>().join(", "),
                name: k,
            }));
        }
    }
    ParamValues::from_pairs(workload, specs, pairs).map_err(param_error)
}

fn param_error(e: ParamError) -> Failure {
    let mut b = ErrorBody::new(ErrorCode::BadParameter, e.to_string());
    match e {
        ParamError::Unknown {
            name, suggestions, ..
        } => {
            b.param = Some(name);
            b.suggestions = suggestions;
        }
        ParamError::Malformed {
            name,
            range,
            default,
            ..
        }
        | ParamError::OutOfRange {
            name,
            range,
            default,
            ..
        } => {
            b.param = Some(name);
            b.range = Some(range);
            b.default = Some(default);
        }
        ParamError::NoEquals(_) | ParamError::Decode { .. } => {}
    }
    Box::new(b)
}

/// CPU time of the whole process so far (user + system), seconds.
fn process_cpu_s() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Runs one stressor with its sampler; returns its report once it stops.
fn stressor_thread(
    stressor: &'static dyn isobench_workloads::Stressor,
    ctx: StressCtx,
    params: ParamValues,
    stressor_id: String,
    interval: Option<Duration>,
    out: Outbox,
) -> Result<StressReport, Failure> {
    let (quit, quit_rx) = mpsc::channel::<()>();
    let sampler = interval.and_then(|every| {
        let ops = ctx.ops.clone();
        let out = out.clone();
        let sid = stressor_id.clone();
        thread::Builder::new()
            .name(format!("sampler-{stressor_id}"))
            .spawn(move || sampler_loop(&sid, &ops, every, &quit_rx, &out))
            .ok()
    });
    let result = catch_unwind(AssertUnwindSafe(|| stressor.run(&ctx, &params)));
    // Stop sampling before anything else is said about this stressor.
    drop(quit);
    if let Some(h) = sampler {
        let _ = h.join();
    }
    let result = match result {
        Ok(Ok(report)) => Ok(report),
        Ok(Err(e)) => Err(ErrorBody::new(
            ErrorCode::WorkloadFailed,
            format!("stressor `{}` failed: {e:#}", stressor.name()),
        )
        .into()),
        Err(p) => Err(panicked("stressor", stressor.name(), p)),
    };
    if ctx.running() {
        let (report, error) = match &result {
            Ok(r) => (Some(r.clone()), None),
            Err(e) => (None, Some(ErrorBody::clone(e))),
        };
        out.send(
            None,
            &Reply::StressorExited(StressorExit {
                stressor_id,
                report,
                error,
            }),
        );
    }
    result
}

/// Emits a `sample` every `every` until `quit` is dropped.
fn sampler_loop(
    stressor_id: &str,
    ops: &AtomicU64,
    every: Duration,
    quit: &mpsc::Receiver<()>,
    out: &Outbox,
) {
    let start = Instant::now();
    let mut prev_t = start;
    let mut prev_ops = ops.load(Ordering::Relaxed);
    let mut seq = 0u64;
    while let Err(mpsc::RecvTimeoutError::Timeout) = quit.recv_timeout(every) {
        let now = Instant::now();
        let n = ops.load(Ordering::Relaxed);
        let interval_s = now.duration_since(prev_t).as_secs_f64();
        let ops_per_sec = if interval_s > 0.0 {
            n.saturating_sub(prev_ops) as f64 / interval_s
        } else {
            0.0
        };
        out.send(
            None,
            &Reply::Sample(Sample {
                stressor_id: stressor_id.to_string(),
                seq,
                elapsed_s: now.duration_since(start).as_secs_f64(),
                ops: n,
                interval_s,
                ops_per_sec,
                cpu_s: process_cpu_s(),
            }),
        );
        seq += 1;
        prev_t = now;
        prev_ops = n;
    }
}
