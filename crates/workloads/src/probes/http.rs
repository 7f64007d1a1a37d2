//! `http`: open-loop HTTP/1.1 load against a small keep-alive server, with the
//! good-response rate of SPECweb (seed 001): the share of requests answered within a
//! threshold.
//!
//! The server is our own (`netserve` `http`, port 0, pinned to `ctx.pin_peer`, bodies of
//! `body` bytes) in a process of its own (`isobench netserve`; threads of this process when the
//! context has no server executable), or an external one, typically an isobench `http`
//! service in another tenant (it answers `GET /<n>` with `n` bytes; for another server set
//! `path`).
//!
//! The client keeps `connections` keep-alive connections (connected before the clock
//! starts), one thread each, and spreads `rate` requests per second over them on a fixed
//! schedule: request `k` of connection `c` is due at `start + (k * connections + c) / rate`.
//! Each request's latency runs from its *due* time to the end of its response, so a slow
//! response delays the following requests and their latencies show it (no coordinated
//! omission). HTTP/1.1 without pipelining allows one request in flight per connection, so
//! when the server cannot keep up, latencies grow instead of requests piling up.
//!
//! A request is good when it got a `200` within `good_ms` of its due time; `good_pct` is the
//! good share of all scheduled requests. `errors` counts scheduled requests without a `200`
//! (connection errors, timeouts, other statuses, and requests abandoned because the run was
//! already `timeout_ms` past its end). A connection that fails is reopened for the next
//! request.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Barrier;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Deserialize;

use crate::metric::{latency_metrics, LatencyHistogram, Metric, MetricSpec};
use crate::netserve::{header_end, header_value, ServerKind};
use crate::params::{peer_addr, peer_port, ParamKind, ParamSpec, ParamValues};
use crate::probes::io_net::{
    connect_tcp, hist_record, metric_table, part_duration, wait_until, Peer, TightTimerSlack,
};
use crate::timer::now_ns;
use crate::{Class, Env, Probe, ProbeCtx, Unsupported};

/// The `http` probe.
pub struct Http;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    addr: String,
    port: u16,
    body: u64,
    path: Option<String>,
    rate: u64,
    connections: u32,
    duration: Option<f64>,
    good_ms: f64,
    timeout_ms: u64,
}

const PARAMS: &[ParamSpec] = &[
    peer_addr("address of the HTTP server; with port=0 our own server binds here"),
    peer_port(
        "port of an external HTTP server; 0 starts our own on addr, in a process of its \
         own pinned to the peer CPU",
    ),
    ParamSpec {
        name: "body",
        help: "response body bytes (requested as GET /<body> from an isobench server)",
        kind: ParamKind::Size {
            min: 0,
            max: 64 << 20,
        },
        default: "4K",
    },
    ParamSpec {
        name: "path",
        help: "request path for a server that is not isobench's (e.g. /index.html); empty = \
               /<body>",
        kind: ParamKind::Text,
        default: "",
    },
    ParamSpec {
        name: "rate",
        help: "requests per second, all connections together (open loop)",
        kind: ParamKind::Int {
            min: 1,
            max: 10_000_000,
        },
        default: "1000",
    },
    ParamSpec {
        name: "connections",
        help: "keep-alive connections, one client thread each",
        kind: ParamKind::Int { min: 1, max: 256 },
        default: "4",
    },
    ParamSpec {
        name: "duration",
        help: "seconds of load; empty = the run's budget",
        kind: ParamKind::Float {
            min: 0.01,
            max: 86400.0,
        },
        default: "",
    },
    ParamSpec {
        name: "good_ms",
        help: "a response is good when complete within this many ms of its due time \
               (SPECweb's idea; set it to the service's objective)",
        kind: ParamKind::Float {
            min: 0.001,
            max: 600_000.0,
        },
        default: "10",
    },
    ParamSpec {
        name: "timeout_ms",
        help: "longest wait for a connect or a response",
        kind: ParamKind::Int {
            min: 1,
            max: 600_000,
        },
        default: "2000",
    },
];

const METRICS: &[MetricSpec] = metric_table![
    "good_pct" "%" Higher Mean;
    lat "req_lat" "us";
    "rps" "req/s" Higher HarmonicMean;
    "errors" "requests" Lower Total;
];

fn spec(name: &str) -> &'static MetricSpec {
    crate::util::declared(METRICS, name)
}

impl Probe for Http {
    fn name(&self) -> &'static str {
        "http"
    }
    fn help(&self) -> &'static str {
        "Open-loop HTTP/1.1 load (1000 req/s over 4 keep-alive connections, 4 KiB bodies) \
         against our own small server (a process of its own) or one in another tenant: \
         good-response rate (share answered 200 within good_ms of the due time, as SPECweb), \
         latency from the due time (us, p50/p99/p99.9 with the histogram), achieved responses \
         per second and errors."
    }
    fn class(&self) -> Class {
        Class::App
    }
    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }
    fn metrics(&self) -> &'static [MetricSpec] {
        METRICS
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        crate::util::loopback_tcp()
    }
    fn run(&self, ctx: &ProbeCtx, params: &ParamValues) -> anyhow::Result<Vec<Metric>> {
        let o: Opts = params.decode(self.name())?;
        let path = match o.path.as_deref().map(str::trim) {
            Some(p) if !p.is_empty() => {
                if !p.starts_with('/') || p.chars().any(|c| c.is_whitespace() || c.is_control()) {
                    bail!("http: path=`{p}` must start with / and contain no spaces");
                }
                p.to_string()
            }
            _ => format!("/{}", o.body),
        };
        ctx.pin_self()?;
        let peer = Peer::new(
            ctx,
            ServerKind::Http {
                body: o.body as usize,
            },
            &o.addr,
            o.port,
        )?;
        let r = load(ctx, &o, peer.addr, &path)
            .with_context(|| format!("http load on {}{path}", peer.addr));
        let fin = peer.finish();
        let out = r?;
        fin?;
        Ok(out)
    }
}

#[derive(Default)]
struct ConnResult {
    h: LatencyHistogram,
    scheduled: u64,
    ok: u64,
    good: u64,
    errors: u64,
    first_error: Option<String>,
    /// When the thread's last request ended.
    finished_ns: u64,
}

impl ConnResult {
    fn error(&mut self, e: impl std::fmt::Display) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(e.to_string());
        }
    }

    /// The result of a client thread that panicked.
    fn panicked() -> Self {
        ConnResult {
            first_error: Some("client thread panicked".into()),
            errors: 1,
            ..ConnResult::default()
        }
    }

    /// Adds another connection's counts and histogram to these.
    fn merge(&mut self, r: ConnResult) {
        self.h.merge(&r.h);
        self.scheduled += r.scheduled;
        self.ok += r.ok;
        self.good += r.good;
        self.errors += r.errors;
        self.finished_ns = self.finished_ns.max(r.finished_ns);
        if self.first_error.is_none() {
            self.first_error = r.first_error;
        }
    }

    /// The probe's metrics from the merged result of a load that started at `t_start` (ns)
    /// and was to last `dur_ns`.
    fn metrics(&self, t_start: u64, dur_ns: u64) -> anyhow::Result<Vec<Metric>> {
        if self.ok == 0 {
            bail!(
                "no successful response out of {} requests; first error: {}",
                self.scheduled,
                self.first_error.as_deref().unwrap_or("none")
            );
        }
        // Over the time the load really took (longer than `duration` when responses lag).
        let secs = (self.finished_ns.saturating_sub(t_start) as f64 / 1e9).max(dur_ns as f64 / 1e9);
        let mut out =
            vec![spec("good_pct").value(100.0 * self.good as f64 / self.scheduled as f64)];
        out.extend(latency_metrics("req_lat", "us", &self.h));
        out.push(spec("rps").value(self.ok as f64 / secs));
        out.push(spec("errors").value(self.errors as f64));
        Ok(out)
    }
}

/// The GET request for `path` on `peer`.
fn get_request(peer: SocketAddr, path: &str) -> String {
    let host = match peer {
        SocketAddr::V4(a) => a.to_string(),
        SocketAddr::V6(a) => format!("[{}]:{}", a.ip(), a.port()),
    };
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: isobench\r\n\r\n")
}

fn load(ctx: &ProbeCtx, o: &Opts, peer: SocketAddr, path: &str) -> anyhow::Result<Vec<Metric>> {
    let timeout = Duration::from_millis(o.timeout_ms);
    let request = get_request(peer, path);
    let conns = (0..o.connections)
        .map(|_| HttpConn::open(peer, timeout))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let n = conns.len() as u64;
    let period_ns = 1e9 / o.rate as f64;
    let dur_ns = part_duration(o.duration, ctx, 1).as_nanos() as u64;
    let timeout_ns = timeout.as_nanos() as u64;
    let good_ns = (o.good_ms * 1e6) as u64;
    let over = ctx.timer_overhead_ns;
    let barrier = Barrier::new(conns.len() + 1);
    // Every thread is ready at the first barrier; the start time is published before the
    // second.
    let start = std::sync::atomic::AtomicU64::new(0);
    let mut t_start = 0;
    let results: Vec<ConnResult> = std::thread::scope(|sc| {
        let handles: Vec<_> = conns
            .into_iter()
            .enumerate()
            .map(|(c, conn)| {
                let (barrier, start, request) = (&barrier, &start, request.as_bytes());
                sc.spawn(move || {
                    if let Some(cpu) = ctx.pin {
                        let _ = crate::util::pin_to_cpu(cpu);
                    }
                    let _slack = TightTimerSlack::new();
                    let mut conn = Some(conn);
                    let mut r = ConnResult::default();
                    barrier.wait();
                    barrier.wait();
                    let start = start.load(std::sync::atomic::Ordering::Acquire);
                    let end = start + dur_ns;
                    for k in 0u64.. {
                        let due = start + ((k * n + c as u64) as f64 * period_ns) as u64;
                        if due >= end || ctx.stopped() {
                            break;
                        }
                        r.scheduled += 1;
                        if now_ns() > end + timeout_ns {
                            r.error("abandoned: the run was already past its end");
                            continue;
                        }
                        wait_until(due);
                        if conn.is_none() {
                            match HttpConn::open(peer, timeout) {
                                Ok(s) => conn = Some(s),
                                Err(e) => {
                                    r.error(format!("{e:#}"));
                                    continue;
                                }
                            }
                        }
                        let c = conn.as_mut().expect("connected");
                        match c.request(request) {
                            Ok((status, keep)) => {
                                let t1 = now_ns();
                                if status == 200 {
                                    let lat = ((t1 - due) as f64 - over).max(0.0) as u64;
                                    hist_record(&mut r.h, (lat + 500) / 1000);
                                    r.ok += 1;
                                    if lat <= good_ns {
                                        r.good += 1;
                                    }
                                } else {
                                    r.error(format!("status {status}"));
                                }
                                if !keep {
                                    conn = None;
                                }
                            }
                            Err(e) => {
                                r.error(format!("{e:#}"));
                                conn = None;
                            }
                        }
                    }
                    r.finished_ns = now_ns();
                    r
                })
            })
            .collect();
        barrier.wait();
        t_start = now_ns() + 100_000;
        start.store(t_start, std::sync::atomic::Ordering::Release);
        barrier.wait();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| ConnResult::panicked()))
            .collect()
    });
    if ctx.stopped() {
        bail!("stopped");
    }
    let mut all = ConnResult::default();
    for r in results {
        all.merge(r);
    }
    all.metrics(t_start, dur_ns)
}

/// One keep-alive client connection with its read buffer.
struct HttpConn {
    s: TcpStream,
    buf: Vec<u8>,
    chunk: Vec<u8>,
}

/// Longest response head the client accepts.
const MAX_HEAD: usize = 64 << 10;

impl HttpConn {
    fn open(peer: SocketAddr, timeout: Duration) -> anyhow::Result<HttpConn> {
        Ok(HttpConn {
            s: connect_tcp(peer, timeout, true)?,
            buf: Vec::with_capacity(8192),
            chunk: vec![0u8; 64 << 10],
        })
    }

    /// Sends one request and reads the whole response. Returns the status and whether the
    /// connection stays open.
    fn request(&mut self, req: &[u8]) -> anyhow::Result<(u16, bool)> {
        self.s.write_all(req).context("sending the request")?;
        let end = loop {
            if let Some(e) = header_end(&self.buf) {
                break e;
            }
            if self.buf.len() > MAX_HEAD {
                bail!("response head longer than {MAX_HEAD} bytes");
            }
            let n = self.read_some()?;
            self.buf.extend_from_slice(&self.chunk[..n]);
        };
        let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("malformed status line: {:?}", head.lines().next()))?;
        if header_value(&head, "transfer-encoding").is_some() {
            bail!("chunked responses are not supported: use an isobench http server or a fixed-size file");
        }
        let len: usize = header_value(&head, "content-length")
            .context("the response has no Content-Length")?
            .parse()
            .context("bad Content-Length")?;
        let keep = !header_value(&head, "connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
            && head.starts_with("HTTP/1.1");
        // Body: part may already be buffered.
        let have = self.buf.len() - end;
        if have >= len {
            self.buf.drain(..end + len);
        } else {
            self.buf.clear();
            let mut left = len - have;
            while left > 0 {
                let want = left.min(self.chunk.len());
                let n = self.read_into(want)?;
                left -= n;
            }
        }
        Ok((status, keep))
    }

    fn read_some(&mut self) -> anyhow::Result<usize> {
        let want = self.chunk.len();
        self.read_into(want)
    }

    fn read_into(&mut self, want: usize) -> anyhow::Result<usize> {
        match self.s.read(&mut self.chunk[..want]) {
            Ok(0) => bail!("the server closed the connection"),
            Ok(n) => Ok(n),
            Err(e) if crate::netserve::is_timeout(&e) => bail!("no response within the timeout"),
            Err(e) => Err(anyhow::Error::from(e).context("reading the response")),
        }
    }
}
