//! The messages of the agent protocol, as Rust types.
//!
//! One type per direction: [`Request`] (controller to agent) and [`Reply`] (agent to
//! controller: responses and unsolicited events). On the wire every message is one JSON
//! object on one line; its `type` field names the variant and, for requests and their
//! responses, an `id` field carries the request number (see [`crate::wire`]).
//! `docs/agent-protocol.md` documents every message with an example; keep the two in step.
//!
//! Compatibility rules: receivers ignore fields they do not know, so a minor version may add
//! optional fields and new message types; anything else needs a new major version.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use isobench_workloads::netserve::ServerStats;
use isobench_workloads::{Env, HostFacts, Metric, ParamValues, StressReport};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The protocol version this build speaks.
pub const PROTOCOL_VERSION: ProtocolVersion = ProtocolVersion { major: 1, minor: 1 };

/// Longest line either side accepts, in bytes, newline excluded. Probe results carry latency
/// histograms, so the limit is generous; a longer line is answered with `bad_request`.
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// Longest line the agent accepts before a successful `hello`, so an unauthenticated peer
/// cannot make it buffer much.
pub const MAX_HELLO_LINE_BYTES: usize = 64 << 10;

/// How often a running stressor is sampled unless the request says otherwise.
pub const DEFAULT_SAMPLE_INTERVAL: Duration = Duration::from_millis(250);

/// A protocol version, `major.minor` on the wire (`"1.0"`).
///
/// Two sides can talk when their majors are equal; they then use the smaller minor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProtocolVersion {
    /// Incompatible changes bump the major.
    pub major: u32,
    /// Compatible additions (optional fields, new message types) bump the minor.
    pub minor: u32,
}

impl ProtocolVersion {
    /// The version both sides use, or `None` when the majors differ.
    pub fn negotiate(self, other: ProtocolVersion) -> Option<ProtocolVersion> {
        (self.major == other.major).then(|| ProtocolVersion {
            major: self.major,
            minor: self.minor.min(other.minor),
        })
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl FromStr for ProtocolVersion {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("`{s}` is not a protocol version: expected major.minor such as 1.0");
        let (a, b) = s.trim().split_once('.').ok_or_else(bad)?;
        Ok(ProtocolVersion {
            major: a.parse().map_err(|_| bad())?,
            minor: b.parse().map_err(|_| bad())?,
        })
    }
}

impl Serialize for ProtocolVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ProtocolVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// A shared secret for the TCP transport. Its `Debug` output never shows the secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Token(pub String);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// Workload parameters as sent on the wire: name to value.
///
/// A string is read the way a user writes it (`"64M"`, `"rand"`); a number or boolean is read
/// as its decimal text; both are range-checked by the agent against the workload's table.
/// `null` asks for the value to be derived at run time. Missing parameters take their default.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Params(pub BTreeMap<String, Value>);

impl Params {
    /// No parameters: every default.
    pub fn new() -> Self {
        Params::default()
    }

    /// Adds one `name = value` setting written as text.
    pub fn set(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.0.insert(name.into(), Value::String(value.into()));
        self
    }
}

impl From<BTreeMap<String, String>> for Params {
    fn from(m: BTreeMap<String, String>) -> Self {
        Params(m.into_iter().map(|(k, v)| (k, Value::String(v))).collect())
    }
}

impl From<ParamValues> for Params {
    fn from(v: ParamValues) -> Self {
        Params(v.0)
    }
}

impl From<&ParamValues> for Params {
    fn from(v: &ParamValues) -> Self {
        Params(v.0.clone())
    }
}

impl<K: Into<String>, V: Into<String>, const N: usize> From<[(K, V); N]> for Params {
    fn from(a: [(K, V); N]) -> Self {
        Params(
            a.into_iter()
                .map(|(k, v)| (k.into(), Value::String(v.into())))
                .collect(),
        )
    }
}

/// Limits for a stressor that runs without a containing tenant (wire form of
/// [`isobench_workloads::ctx::StressCaps`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Caps {
    /// Most processes or threads the stressor may create at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tasks: Option<u32>,
    /// Most bytes of memory or file the stressor may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

impl Caps {
    /// True when neither cap is set.
    pub fn is_none(&self) -> bool {
        self.max_tasks.is_none() && self.max_bytes.is_none()
    }
}

/// `run_probe`: run one probe once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunProbe {
    /// Probe name (`syscall`).
    pub name: String,
    /// Parameters; missing ones take their default.
    #[serde(default, skip_serializing_if = "is_empty_params")]
    pub params: Params,
    /// CPU for the measuring thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<usize>,
    /// CPU for a helper thread or process (the peer of a ping-pong).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin_peer: Option<usize>,
    /// Rough wall-time budget of the run, milliseconds (agent default: 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_ms: Option<u64>,
    /// Directory for files (agent default: its working directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<PathBuf>,
    /// Window length, milliseconds: a windowed probe also returns its main metrics as a
    /// series of windows of about this length (the on/off design). Fractions allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_ms: Option<f64>,
}

/// `run_scenario`: run a scenario on the agent's host, as `isobench run` would there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunScenario {
    /// The scenario file's text (TOML).
    pub scenario: String,
    /// Its file name, for messages (`quick.toml`).
    pub file_name: String,
    /// Run this built-in preset of the host's isobench instead of `scenario` (which then
    /// holds its text, for the record): a preset skips what cannot run there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// The seed of every random choice; the host picks one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The platform to run on (`host`, `cgroup`, ...); the host's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
}

/// Answer to `run_scenario`: how the run ended. The stored run came before it, as `run_data`
/// events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioDone {
    /// The run's id.
    pub run_id: String,
    /// Its final status (`complete`, `interrupted`, `failed`).
    pub status: String,
    /// The exit code `isobench run` ended with on the host.
    pub exit_code: i32,
    /// How many `run_data` events carried the run.
    pub chunks: u32,
    /// Their total length in bytes (the run's JSON).
    pub bytes: u64,
}

/// `start_stressor`: start a stressor that runs until `stop_stressor`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartStressor {
    /// Controller-chosen name for this running instance, unique among running stressors.
    pub stressor_id: String,
    /// Stressor name (`cpu`).
    pub name: String,
    /// Intensity 0..=100.
    pub intensity: u8,
    /// Parameters; missing ones take their default.
    #[serde(default, skip_serializing_if = "is_empty_params")]
    pub params: Params,
    /// CPUs for the stressor's workers, round-robin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<Vec<usize>>,
    /// Caps for aggressive stressors when the tenant does not bound them.
    #[serde(default, skip_serializing_if = "Caps::is_none")]
    pub caps: Caps,
    /// The controller vouches that the tenant bounds pids, memory and io, so an aggressive
    /// stressor may run without caps.
    #[serde(default, skip_serializing_if = "is_false")]
    pub contained: bool,
    /// Directory for files (agent default: its working directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<PathBuf>,
    /// Interval between `sample` events in milliseconds; 0 turns sampling off
    /// (agent default: 250).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_ms: Option<u64>,
}

/// `start_service`: start the server half of a network probe inside this tenant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartService {
    /// Controller-chosen name for this running service, unique among running services.
    pub service_id: String,
    /// Service kind, one of the `hello` reply's `services`, with its argument after a colon
    /// where it takes one (`tcp-echo`, `http:4K`, `relay-forwarder:10.0.0.2:7000`).
    pub kind: String,
    /// Address to bind, `ip:port` (`0.0.0.0:0` picks a free port on every interface).
    pub bind: String,
    /// CPU for the service's threads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<usize>,
}

/// A message from the controller to the agent. Every request carries an `id` on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    /// First message of a session: version negotiation and, when required, the token.
    Hello {
        /// The controller's protocol version.
        protocol_version: ProtocolVersion,
        /// The controller's isobench version.
        tool_version: String,
        /// The shared secret, when the agent requires one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<Token>,
    },
    /// Liveness check, answered at once even while a probe runs.
    Ping {},
    /// Runs a probe in a worker thread and answers with `probe_result`.
    RunProbe(RunProbe),
    /// Asks the running probe to stop early; its `run_probe` then fails with `cancelled`.
    CancelProbe {},
    /// Starts a stressor; answered with `stressor_started`, then `sample` events follow.
    StartStressor(StartStressor),
    /// Stops a stressor and answers with its report.
    StopStressor {
        /// The id given to `start_stressor`.
        stressor_id: String,
    },
    /// Starts a network service (the server half of a network probe).
    StartService(StartService),
    /// Stops a network service.
    StopService {
        /// The id given to `start_service`.
        service_id: String,
    },
    /// Runs a whole scenario on the agent's host (a host agent only, since 1.1): `run_progress`
    /// events follow, then `run_data` events carrying the stored run, then `scenario_done`.
    RunScenario(RunScenario),
    /// Ends the session: the agent stops everything, answers and exits.
    Bye {},
}

impl Request {
    /// The `type` of this request on the wire.
    pub fn kind(&self) -> &'static str {
        match self {
            Request::Hello { .. } => "hello",
            Request::Ping {} => "ping",
            Request::RunProbe(_) => "run_probe",
            Request::CancelProbe {} => "cancel_probe",
            Request::StartStressor(_) => "start_stressor",
            Request::StopStressor { .. } => "stop_stressor",
            Request::StartService(_) => "start_service",
            Request::StopService { .. } => "stop_service",
            Request::RunScenario(_) => "run_scenario",
            Request::Bye {} => "bye",
        }
    }
}

/// The agent's answer to `hello`: who it is and what it can run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hello {
    /// The version the session uses (same major as both sides, smaller minor).
    pub protocol_version: ProtocolVersion,
    /// The agent's own protocol version.
    pub agent_protocol_version: ProtocolVersion,
    /// The agent's isobench version.
    pub tool_version: String,
    /// Version of the JSON documents the workloads write.
    pub schema_version: u32,
    /// Process id of the agent.
    pub pid: u32,
    /// Facts about the host the agent runs on.
    pub host: HostFacts,
    /// What the agent may use: its CPUs, usable memory, caches, working directory.
    pub env: Env,
    /// Probes this agent knows.
    pub probes: Vec<String>,
    /// Stressors this agent knows.
    pub stressors: Vec<String>,
    /// Service kinds `start_service` accepts.
    #[serde(default)]
    pub services: Vec<String>,
}

/// The answer to `run_probe`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeResult {
    /// Probe name.
    pub name: String,
    /// Measured metrics.
    pub metrics: Vec<Metric>,
    /// The parameters the probe ran with, every default filled in.
    pub params: ParamValues,
    /// Wall time of `run`, seconds.
    pub elapsed_s: f64,
    /// Measured cost of one timer read, ns (already subtracted by the probe).
    pub timer_overhead_ns: f64,
    /// What the agent's threads and the host's CPUs did during the run (absent from agents
    /// that do not measure it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ProbeContext>,
}

/// The mechanism behind one probe run, read by the agent around `run`: scheduler statistics
/// of its own threads and the host's per-CPU interrupt time. Times are seconds over the run,
/// not rates. Threads that exit during the run are missing from `run_s`, `runq_wait_s` and
/// `timeslices` (their context switches are counted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeContext {
    /// Wall time between the two readings, seconds.
    pub interval_s: f64,
    /// CPU time of the agent's threads (`/proc/self/task/*/schedstat`), seconds.
    pub run_s: f64,
    /// Time those threads were runnable but waited on a run queue, seconds.
    pub runq_wait_s: f64,
    /// Timeslices those threads ran.
    pub timeslices: u64,
    /// Voluntary context switches of the agent process (blocking: I/O, sleep, wake-ups).
    pub voluntary_switches: u64,
    /// Involuntary context switches (preemptions).
    pub involuntary_switches: u64,
    /// Threads that ran during the run.
    pub threads_ran: u32,
    /// CPUs the threads that ran were last seen on, sorted.
    pub cpus_used: Vec<u32>,
    /// The CPU the measuring thread was pinned to (`pin`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_cpu: Option<u32>,
    /// Softirq time on the pinned CPU during the run, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub softirq_s_on_pinned_cpu: Option<f64>,
    /// Softirq time on `cpus_used`, added up, seconds.
    pub softirq_s_on_cpus_used: f64,
    /// Softirq time per CPU (`/proc/stat`, clock-tick resolution), seconds.
    pub softirq_s_per_cpu: Vec<f64>,
    /// Hard-irq time per CPU, seconds (zero when the kernel does not account it apart).
    pub irq_s_per_cpu: Vec<f64>,
    /// Steal time per CPU, seconds.
    pub steal_s_per_cpu: Vec<f64>,
}

/// A periodic progress report of a running stressor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The running stressor.
    pub stressor_id: String,
    /// 0, 1, 2... per stressor.
    pub seq: u64,
    /// Seconds since the stressor started.
    pub elapsed_s: f64,
    /// Operations so far.
    pub ops: u64,
    /// Seconds covered by `ops_per_sec` (the measured interval since the previous sample).
    pub interval_s: f64,
    /// Operations per second over that interval.
    pub ops_per_sec: f64,
    /// CPU time (user + system) used by the whole agent process so far, seconds.
    pub cpu_s: f64,
}

/// Sent when a stressor ends without being asked to (it failed or finished on its own).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StressorExit {
    /// The stressor that ended.
    pub stressor_id: String,
    /// Its report, when it ended without error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<StressReport>,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

/// What happened to one stressor when the session ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoppedStressor {
    /// The stressor.
    pub stressor_id: String,
    /// Its report, when it stopped cleanly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<StressReport>,
    /// Why not, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

/// A message from the agent to the controller: a response (with the request's `id`) or an
/// event (`sample`, `stressor_exited`; no `id`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Reply {
    /// Answer to `hello`.
    Hello(Box<Hello>),
    /// Answer to `ping`.
    Pong {},
    /// Answer to `run_probe`.
    ProbeResult(ProbeResult),
    /// Answer to `cancel_probe`.
    ProbeCancelled {
        /// Whether a probe was running.
        was_running: bool,
    },
    /// Answer to `start_stressor`: the stressor runs.
    StressorStarted {
        /// Its id.
        stressor_id: String,
        /// The parameters it runs with, every default filled in.
        params: ParamValues,
    },
    /// Answer to `stop_stressor`.
    StressorStopped {
        /// Its id.
        stressor_id: String,
        /// What it did.
        report: StressReport,
    },
    /// Answer to `start_service`.
    ServiceStarted {
        /// Its id.
        service_id: String,
        /// The address it listens on (port resolved when `bind` asked for port 0).
        addr: String,
    },
    /// Answer to `stop_service`.
    ServiceStopped {
        /// Its id.
        service_id: String,
        /// What it served.
        stats: ServerStats,
    },
    /// Answer to `bye`; the agent closes the connection after it.
    Bye {
        /// Stressors not yet stopped by `stop_stressor` (running, or ended on their own), in
        /// id order, stopped by `bye`.
        stopped: Vec<StoppedStressor>,
    },
    /// A request failed.
    Error(ErrorBody),
    /// Event: progress of a running stressor.
    Sample(Sample),
    /// Event: a stressor ended without `stop_stressor`.
    StressorExited(StressorExit),
    /// Answer to `run_scenario`.
    ScenarioDone(ScenarioDone),
    /// Event: one line of a running scenario's progress.
    RunProgress {
        /// The line, without its newline.
        line: String,
    },
    /// Event: the next piece of the finished scenario's stored run (JSON text, split so no
    /// line exceeds the limit).
    RunData {
        /// 0, 1, 2... in order.
        seq: u32,
        /// The piece.
        chunk: String,
    },
}

/// Why a request failed: a machine-readable code, a message for people, and details.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong, for programs.
    pub code: ErrorCode,
    /// What went wrong and how to fix it, for people.
    pub message: String,
    /// Close names, for unknown workloads and parameters, best first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub suggestions: Vec<String>,
    /// The parameter at fault, for `bad_parameter`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
    /// Its allowed range, for `bad_parameter`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<String>,
    /// Its default, for `bad_parameter`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// The agent's protocol version, for `version_mismatch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<ProtocolVersion>,
}

impl ErrorBody {
    /// An error with only a code and a message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorBody {
            code,
            message: message.into(),
            suggestions: Vec::new(),
            param: None,
            range: None,
            default: None,
            protocol_version: None,
        }
    }
}

impl fmt::Display for ErrorBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// Machine-readable error codes. Unknown codes from a newer agent read as
/// [`ErrorCode::Other`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The line is not a JSON object, lacks `id` or `type`, has a field of the wrong type,
    /// or is longer than [`MAX_LINE_BYTES`].
    BadRequest,
    /// The `type` is not one this agent knows (it may speak an older minor version).
    UnknownRequest,
    /// A request other than `hello` came before a successful `hello`.
    HelloRequired,
    /// The token is missing or wrong.
    Unauthorized,
    /// The protocol majors differ.
    VersionMismatch,
    /// No probe or stressor of that name (see `suggestions`).
    UnknownWorkload,
    /// A parameter is unknown, malformed or out of range (see `param`, `range`, `default`).
    BadParameter,
    /// The workload cannot run here; the message says why.
    Unsupported,
    /// The agent will not do it for safety (an aggressive stressor without containment).
    Refused,
    /// A probe is already running, or the stressor or service id is in use.
    Busy,
    /// No running stressor or service has that id.
    NotFound,
    /// The workload started but failed.
    WorkloadFailed,
    /// The probe was cancelled by `cancel_probe` or by the end of the session.
    Cancelled,
    /// A bug in the agent (a panic in a workload is reported this way too).
    Internal,
    /// A code this build does not know.
    Other(String),
}

impl ErrorCode {
    /// The code as written on the wire.
    pub fn as_str(&self) -> &str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::UnknownRequest => "unknown_request",
            ErrorCode::HelloRequired => "hello_required",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::VersionMismatch => "version_mismatch",
            ErrorCode::UnknownWorkload => "unknown_workload",
            ErrorCode::BadParameter => "bad_parameter",
            ErrorCode::Unsupported => "unsupported",
            ErrorCode::Refused => "refused",
            ErrorCode::Busy => "busy",
            ErrorCode::NotFound => "not_found",
            ErrorCode::WorkloadFailed => "workload_failed",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::Internal => "internal",
            ErrorCode::Other(s) => s,
        }
    }

    /// Every code this build knows.
    pub const ALL: &'static [ErrorCode] = &[
        ErrorCode::BadRequest,
        ErrorCode::UnknownRequest,
        ErrorCode::HelloRequired,
        ErrorCode::Unauthorized,
        ErrorCode::VersionMismatch,
        ErrorCode::UnknownWorkload,
        ErrorCode::BadParameter,
        ErrorCode::Unsupported,
        ErrorCode::Refused,
        ErrorCode::Busy,
        ErrorCode::NotFound,
        ErrorCode::WorkloadFailed,
        ErrorCode::Cancelled,
        ErrorCode::Internal,
    ];

    fn parse(s: &str) -> ErrorCode {
        ErrorCode::ALL
            .iter()
            .find(|c| c.as_str() == s)
            .cloned()
            .unwrap_or_else(|| ErrorCode::Other(s.to_string()))
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(ErrorCode::parse(&String::deserialize(d)?))
    }
}

fn is_empty_params(p: &Params) -> bool {
    p.0.is_empty()
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_negotiate_on_major() {
        let a = ProtocolVersion { major: 1, minor: 3 };
        let b = ProtocolVersion { major: 1, minor: 1 };
        assert_eq!(a.negotiate(b), Some(b));
        assert_eq!(b.negotiate(a), Some(b));
        assert_eq!(a.negotiate(ProtocolVersion { major: 2, minor: 0 }), None);
        assert_eq!("1.1".parse::<ProtocolVersion>().unwrap(), PROTOCOL_VERSION);
        assert!("1".parse::<ProtocolVersion>().is_err());
    }

    #[test]
    fn error_codes_round_trip_and_unknown_codes_survive() {
        for c in ErrorCode::ALL {
            let j = serde_json::to_string(c).unwrap();
            assert_eq!(&serde_json::from_str::<ErrorCode>(&j).unwrap(), c);
        }
        let c: ErrorCode = serde_json::from_str("\"quota_exceeded\"").unwrap();
        assert_eq!(c, ErrorCode::Other("quota_exceeded".into()));
    }

    #[test]
    fn token_debug_is_redacted() {
        let t = Token("s3cret".into());
        assert!(!format!("{t:?}").contains("s3cret"));
    }

    #[test]
    fn requests_round_trip() {
        let r = Request::StartStressor(StartStressor {
            stressor_id: "hog".into(),
            name: "cpu".into(),
            intensity: 50,
            params: Params::new().set("threads", "2"),
            pin: Some(vec![0, 1]),
            caps: Caps::default(),
            contained: false,
            workdir: None,
            sample_ms: Some(100),
        });
        let j = serde_json::to_string(&r).unwrap();
        assert!(j.starts_with("{\"type\":\"start_stressor\""), "{j}");
        assert!(!j.contains("caps"), "{j}");
        assert_eq!(serde_json::from_str::<Request>(&j).unwrap(), r);
        let p: Request = serde_json::from_str(r#"{"type":"ping","later_field":1}"#).unwrap();
        assert_eq!(p, Request::Ping {});
    }
}
