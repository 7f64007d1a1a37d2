//! The isobench agent: the same binary running inside a tenant, executing probes and
//! stressors on the controller's command and streaming results back.
//!
//! Why a protocol of its own: the controller drives every workload through an agent, whether
//! the tenant is a process group, a cgroup, a container, a VM or a pod, so the conversation
//! must not depend on how the bytes travel. It is versioned JSON lines (one object per line;
//! `docs/agent-protocol.md` documents every message), and it runs over any byte stream:
//! standard input/output of a spawned agent, a unix socket, a VM's serial port, or TCP with a
//! token.
//!
//! - [`protocol`]: the messages as Rust types, the protocol version and error codes.
//! - [`wire`]: framing (line length limit, `id` first).
//! - [`server`]: the agent loop ([`serve_connection`]); [`transport`]: stdio, unix socket and
//!   TCP entry points ([`serve`] with a [`Transport`] parsed from `stdio`, `unix:<path>` or
//!   `tcp:<host:port>`; [`serve_stdio`], [`serve_unix`], [`serve_tcp`]; [`AgentListener`] to
//!   bind first and learn the address); [`serve_serial`] on a serial port (a VM guest's
//!   virtio-serial port, `serial:<device>`).
//! - [`scenario`]: whole scenarios on a host agent ([`ScenarioRunner`], given by the command
//!   line to `isobench agent --listen`).
//! - [`services`]: the network services (server halves of the network probes).
//! - [`client`]: [`AgentClient`], the controller side, with a deadline on every request.
//! - [`mechanism`]: scheduler and interrupt statistics around each probe run, returned as the
//!   result's [`ProbeContext`].
//! - [`catalog`]: what an agent can run (injectable, so tests can add their own workloads).
#![deny(missing_docs)]

pub mod catalog;
pub mod client;
pub mod mechanism;
pub mod protocol;
pub mod scenario;
pub mod server;
pub mod service;
pub mod services;
pub mod token;
pub mod transport;
pub mod wire;

pub use catalog::{Catalog, RunningService, ServiceError, ServiceStarter};
pub use client::{AgentClient, AgentError, ProbeOpts, StressOpts};
pub use protocol::{
    Caps, ErrorBody, ErrorCode, Hello, Params, ProbeContext, ProbeResult, ProtocolVersion, Reply,
    Request, RunScenario, Sample, ScenarioDone, StoppedStressor, StressorExit, Token,
    MAX_HELLO_LINE_BYTES, MAX_LINE_BYTES, PROTOCOL_VERSION,
};
pub use scenario::{ScenarioOutput, ScenarioRunner};
pub use server::{serve_connection, AgentConfig, SessionEnd};
pub use token::{generate_token, tokens_match};
pub use transport::{
    resolve_serial, serve, serve_serial, serve_serial_with, serve_stdio, serve_stdio_with,
    serve_tcp, serve_unix, serve_with, AgentListener, Transport, SERIAL_CONNECT_TIMEOUT, TOKEN_ENV,
};
