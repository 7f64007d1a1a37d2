//! `net-rtt`: request/response round-trip time over UDP and TCP.
//!
//! A ping-pong like `sockperf ping-pong`: the client sends a `size`-byte message carrying a
//! sequence number, the peer echoes it, the client times send to matching reply. TCP runs
//! with Nagle off (TCP_NODELAY) on both ends. The peer is our own echo server on loopback
//! (port 0, pinned to `ctx.pin_peer`), in a process of its own as sockperf's and qperf's are
//! (`isobench netserve`; threads of this process when the context has no server executable),
//! or an external `udp-echo` / `tcp-echo` server started in another tenant with
//! `netserve::start_server`.
//!
//! Closed loop (`rate=0`) sends the next message as soon as the reply arrives. Open loop
//! (`rate>0`) schedules message `i` at `start + i/rate` and times it from that *intended*
//! send time, not from when it actually left: a stall that delays later messages shows up
//! in their latencies instead of being hidden (no coordinated omission). A UDP reply that
//! does not come within `timeout_ms` counts as lost and is not in the histogram.
//!
//! sockperf prints one-way latency (RTT / 2); this probe reports the full round trip.
//!
//! With a window length, each protocol runs for its whole duration (`count` is ignored) and
//! its RTT mean and p50 also come as window series (per-window mean and median of the round
//! trips that ended in the window); p99 and p99.9 series only when every window holds
//! enough round trips (see `series`).

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Deserialize;
use std::io::{Read, Write};

use crate::metric::{latency_metrics, LatencyHistogram, Metric, MetricSpec};
use crate::netserve::{is_timeout, le_u64, ServerKind};
use crate::params::{peer_addr, peer_port, peer_proto, ParamKind, ParamSpec, ParamValues};
use crate::probes::io_net::{
    connect_tcp, hist_record, metric_table, part_duration, wait_until, Peer, TightTimerSlack,
};
use crate::probes::series::{attach_latency, Event};
use crate::timer::now_ns;
use crate::{Class, Env, Probe, ProbeCtx, Unsupported};

/// The `net-rtt` probe.
pub struct NetRtt;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    addr: String,
    port: u16,
    proto: String,
    size: u64,
    duration: Option<f64>,
    count: u64,
    rate: u64,
    warmup: u64,
    timeout_ms: u64,
}

const PARAMS: &[ParamSpec] = &[
    peer_addr("address of the echo server; with port=0 our own server binds here"),
    peer_port(
        "port of an external udp-echo/tcp-echo server; 0 starts our own on addr, \
         in a process of its own pinned to the peer CPU",
    ),
    peer_proto(
        "udp, tcp or both (the budget is split between them)",
        &["udp", "tcp", "both"],
    ),
    ParamSpec {
        name: "size",
        help: "message bytes (sockperf's default is 64)",
        kind: ParamKind::Size { min: 8, max: 65507 },
        default: "64",
    },
    ParamSpec {
        name: "duration",
        help: "seconds per protocol; empty = the run's budget split over the protocols",
        kind: ParamKind::Float {
            min: 0.001,
            max: 86400.0,
        },
        default: "",
    },
    ParamSpec {
        name: "count",
        help: "stop after this many timed round trips per protocol (0 = as many as the \
               duration allows); with count set and no duration, count alone decides",
        kind: ParamKind::Int {
            min: 0,
            max: 1_000_000_000,
        },
        default: "0",
    },
    ParamSpec {
        name: "rate",
        help: "open loop: messages per second, each timed from its intended send time; \
               0 = closed loop (next message when the reply is in)",
        kind: ParamKind::Int {
            min: 0,
            max: 10_000_000,
        },
        default: "0",
    },
    ParamSpec {
        name: "warmup",
        help: "untimed round trips first",
        kind: ParamKind::Int {
            min: 0,
            max: 1_000_000,
        },
        default: "100",
    },
    ParamSpec {
        name: "timeout_ms",
        help: "a UDP reply later than this is lost; a TCP reply later than this is an error",
        kind: ParamKind::Int {
            min: 1,
            max: 600_000,
        },
        default: "1000",
    },
];

const METRICS: &[MetricSpec] = metric_table![
    lat "udp_rtt" "ns";
    "udp_rate_pps" "1/s" Higher HarmonicMean;
    "udp_lost_pct" "%" Lower Mean;
    lat "tcp_rtt" "ns";
    "tcp_rate_pps" "1/s" Higher HarmonicMean;
];

impl Probe for NetRtt {
    fn name(&self) -> &'static str {
        "net-rtt"
    }
    fn help(&self) -> &'static str {
        "Round-trip time of a small message (64 B) over UDP and TCP (Nagle off), ping-pong \
         against an echo server (our own on loopback in a process of its own, or one in \
         another tenant): mean, p50, p99, p99.9, max in ns with the histogram, achieved round \
         trips per second, UDP loss. \
         rate>0 runs open loop, timing each message from its intended send time so stalls \
         are not hidden. sockperf reports half of these figures (one-way). With a window \
         length each protocol runs for its whole duration (count ignored) and mean and p50 \
         also come as window series of the round trips ending in each window."
    }
    fn windowed(&self) -> bool {
        true
    }
    fn class(&self) -> Class {
        Class::Net
    }
    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }
    fn metrics(&self) -> &'static [MetricSpec] {
        METRICS
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        UdpSocket::bind("127.0.0.1:0")
            .map(drop)
            .map_err(|e| Unsupported::new(format!("cannot open a loopback UDP socket: {e}")))
    }
    fn run(&self, ctx: &ProbeCtx, params: &ParamValues) -> anyhow::Result<Vec<Metric>> {
        let o: Opts = params.decode(self.name())?;
        ctx.pin_self()?;
        let protos: &[&str] = match o.proto.as_str() {
            "udp" => &["udp"],
            "tcp" => &["tcp"],
            _ => &["udp", "tcp"],
        };
        let mut out = Vec::new();
        for p in protos {
            out.extend(
                ping_pong(ctx, &o, p, protos.len())
                    .with_context(|| format!("net-rtt {p} to {}:{}", o.addr, o.port))?,
            );
        }
        Ok(out)
    }
}

enum Conn {
    Udp(UdpSocket),
    Tcp(std::net::TcpStream),
}

impl Conn {
    fn open(proto: &str, peer: SocketAddr, timeout: Duration) -> anyhow::Result<Conn> {
        if proto == "udp" {
            let any: SocketAddr = if peer.is_ipv4() {
                "0.0.0.0:0".parse()?
            } else {
                "[::]:0".parse()?
            };
            let s = UdpSocket::bind(any)?;
            s.connect(peer)?;
            s.set_read_timeout(Some(timeout))?;
            s.set_write_timeout(Some(timeout))?;
            Ok(Conn::Udp(s))
        } else {
            Ok(Conn::Tcp(connect_tcp(peer, timeout, true)?))
        }
    }

    /// One round trip of `msg` (whose first 8 bytes are `seq`). False when a UDP reply did
    /// not come in time.
    fn round_trip(&mut self, msg: &[u8], reply: &mut [u8], seq: u64) -> anyhow::Result<bool> {
        match self {
            Conn::Udp(s) => {
                s.send(msg).map_err(refused_hint)?;
                loop {
                    match s.recv(reply) {
                        Ok(n) if n >= 8 && le_u64(reply) == seq => return Ok(true),
                        // A late reply to an earlier, already lost message.
                        Ok(_) => continue,
                        Err(e) if is_timeout(&e) => return Ok(false),
                        Err(e) => return Err(refused_hint(e)),
                    }
                }
            }
            Conn::Tcp(s) => {
                s.write_all(msg).context("sending")?;
                s.read_exact(reply).map_err(|e| {
                    if is_timeout(&e) {
                        anyhow::anyhow!("no echo within the timeout")
                    } else {
                        anyhow::Error::from(e).context("reading the echo")
                    }
                })?;
                let got = le_u64(reply);
                if got != seq {
                    bail!("echo out of order: sent {seq}, got {got}");
                }
                Ok(true)
            }
        }
    }
}

fn refused_hint(e: std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::ConnectionRefused {
        anyhow::anyhow!("nothing listens there (ICMP port unreachable): start a udp-echo server")
    } else {
        e.into()
    }
}

fn ping_pong(ctx: &ProbeCtx, o: &Opts, proto: &str, parts: usize) -> anyhow::Result<Vec<Metric>> {
    let kind = if proto == "udp" {
        ServerKind::UdpEcho
    } else {
        ServerKind::TcpEcho
    };
    let peer = Peer::new(ctx, kind, &o.addr, o.port)?;
    let r = measure(ctx, o, proto, parts, peer.addr);
    let fin = peer.finish();
    let out = r?;
    fin?;
    Ok(out)
}

fn measure(
    ctx: &ProbeCtx,
    o: &Opts,
    proto: &str,
    parts: usize,
    peer: SocketAddr,
) -> anyhow::Result<Vec<Metric>> {
    let timeout = Duration::from_millis(o.timeout_ms);
    let mut conn = Conn::open(proto, peer, timeout)?;
    let size = o.size as usize;
    let mut msg = vec![0xA5u8; size];
    let mut reply = vec![0u8; size];
    let mut seq = 0u64;
    let mut next = |msg: &mut [u8]| {
        seq += 1;
        msg[..8].copy_from_slice(&seq.to_le_bytes());
        seq
    };
    // Warm-up; also proves the peer answers before the clock starts.
    warm_up(ctx, o, peer, &mut || {
        let s = next(&mut msg);
        conn.round_trip(&msg, &mut reply, s)
    })?;

    // With a window length the run lasts its whole duration, whatever `count` says, so the
    // series covers it.
    let count = if ctx.window.is_some() { 0 } else { o.count };
    let limit_ns = if count > 0 && o.duration.is_none() {
        u64::MAX
    } else {
        part_duration(o.duration, ctx, parts).as_nanos() as u64
    };
    let period_ns = if o.rate > 0 { 1e9 / o.rate as f64 } else { 0.0 };
    let _slack = (o.rate > 0).then(TightTimerSlack::new);
    let over = ctx.timer_overhead_ns;
    let mut h = LatencyHistogram::new();
    let (mut done, mut lost) = (0u64, 0u64);
    let mut events = Vec::new();
    let start = now_ns();
    let end = start.saturating_add(limit_ns);
    let mut i = 0u64;
    loop {
        if (count > 0 && i >= count) || ctx.stopped() {
            break;
        }
        let t0 = if o.rate > 0 {
            let intended = start + (i as f64 * period_ns) as u64;
            if intended >= end {
                break;
            }
            wait_until(intended);
            intended
        } else {
            let t = now_ns();
            if t >= end {
                break;
            }
            t
        };
        let s = next(&mut msg);
        if conn.round_trip(&msg, &mut reply, s)? {
            let t1 = now_ns();
            let rtt = ((t1 - t0) as f64 - over).max(1.0);
            hist_record(&mut h, rtt as u64);
            if ctx.window.is_some() {
                events.push(Event {
                    t_ns: t1,
                    value: rtt,
                });
            }
            done += 1;
        } else {
            lost += 1;
            if done == 0 && lost >= 3 {
                bail!(
                    "no echo from {peer} within {} ms, 3 times in a row",
                    o.timeout_ms
                );
            }
        }
        i += 1;
    }
    let stop = now_ns();
    rtt_metrics(ctx, proto, &h, &events, (start, stop), (done, lost))
}

/// `o.warmup` round trips (`round_trip`: false when the echo did not come in time), untimed;
/// an error when 3 in a row go unanswered.
fn warm_up(
    ctx: &ProbeCtx,
    o: &Opts,
    peer: SocketAddr,
    round_trip: &mut dyn FnMut() -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let mut in_a_row = 0;
    for _ in 0..o.warmup {
        if ctx.stopped() {
            break;
        }
        if round_trip()? {
            in_a_row = 0;
        } else {
            in_a_row += 1;
            if in_a_row >= 3 {
                bail!(
                    "no echo from {peer} within {} ms, 3 times in a row",
                    o.timeout_ms
                );
            }
        }
    }
    Ok(())
}

/// The metrics of one protocol's timed run from `start` to `stop` (ns): the round trips'
/// latency (with window series when asked for), their rate and, for UDP, the loss.
fn rtt_metrics(
    ctx: &ProbeCtx,
    proto: &str,
    h: &LatencyHistogram,
    events: &[Event],
    (start, stop): (u64, u64),
    (done, lost): (u64, u64),
) -> anyhow::Result<Vec<Metric>> {
    let elapsed_s = (stop - start) as f64 / 1e9;
    if h.is_empty() {
        bail!("no round trip completed (stopped, or duration too short)");
    }
    let prefix = format!("{proto}_rtt");
    let mut out = latency_metrics(&prefix, "ns", h);
    if let Some(w) = ctx.window {
        attach_latency(
            &mut out,
            &prefix,
            "ns",
            events,
            start,
            stop,
            w.as_nanos() as u64,
        );
    }
    let spec = |name: &str| crate::util::declared(METRICS, name);
    out.push(spec(&format!("{proto}_rate_pps")).value(done as f64 / elapsed_s.max(1e-9)));
    if proto == "udp" {
        out.push(spec("udp_lost_pct").value(100.0 * lost as f64 / (done + lost) as f64));
    }
    Ok(out)
}
