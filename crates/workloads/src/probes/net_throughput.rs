//! `net-throughput`: bulk TCP and UDP throughput, client to server, in Mbit/s.
//!
//! TCP, like `iperf3 -c`: each stream writes `msg_size` buffers (default 128 KiB, iperf3's
//! default) for `duration`, then shuts down its write half; the server (a `tcp-sink`)
//! answers with the number of bytes it received. The rate is the bytes the server received
//! over the time from the common start to the last stream's answer, so data still queued in
//! socket buffers when the sender stops is not counted as delivered.
//!
//! UDP: each stream sends `msg_size`-byte datagrams (default 1460, iperf3's UDP default) as
//! fast as it can, or paced to `rate_mbps`; each datagram carries a session id and sequence
//! number. Afterwards the client asks the server (a `udp-sink`) how many of its datagrams
//! arrived. `udp_send_mbps` is what was offered, `udp_mbps` what arrived (over the same send
//! interval), `udp_loss_pct` the share lost. Datagram payload bytes are counted, as iperf3
//! does; 1 Mbit = 10^6 bits.
//!
//! The server is our own on `addr` (port 0, pinned to `ctx.pin_peer`), in a process of its
//! own as iperf3's is (`isobench netserve`; threads of this process when the context has no
//! server executable), or an external `tcp-sink` / `udp-sink` started in another tenant with
//! `netserve::start_server`.
//!
//! With a window length, `tcp_mbps` and `udp_send_mbps` also come as window series of the
//! bytes the streams handed to the kernel in each window (send side: the sink counts
//! arrivals only once, at the end), over the interval in which every stream was sending,
//! after a warm-up tenth. On TCP the sender can only run ahead of the receiver by the
//! socket buffers, so the send rate per window tracks delivery; `udp_mbps` (arrivals) has
//! no series.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, UdpSocket};
use std::sync::Barrier;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Deserialize;

use crate::metric::{Metric, MetricSpec};
use crate::netserve::{is_timeout, le_u64, set_buffer, ServerKind, UDP_HEADER, UDP_STATS_REQUEST};
use crate::params::{peer_addr, peer_port, peer_proto, ParamKind, ParamSpec, ParamValues};
use crate::probes::io_net::{connect_tcp, fresh_seed, metric_table, part_duration, Peer};
use crate::probes::series::rate_series;
use crate::timer::now_ns;
use crate::{Class, Env, Probe, ProbeCtx, Unsupported};

/// The `net-throughput` probe.
pub struct NetThroughput;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    addr: String,
    port: u16,
    proto: String,
    msg_size: Option<u64>,
    duration: Option<f64>,
    streams: u32,
    rate_mbps: f64,
    timeout_ms: u64,
}

/// iperf3's default TCP write size.
const TCP_DEFAULT_MSG: u64 = 128 << 10;
/// iperf3's default UDP datagram payload (fits a 1500-byte Ethernet frame).
const UDP_DEFAULT_MSG: u64 = 1460;
/// Largest UDP payload over IPv4.
const UDP_MAX_MSG: u64 = 65507;

const PARAMS: &[ParamSpec] = &[
    peer_addr("address of the sink server; with port=0 our own server binds here"),
    peer_port(
        "port of an external tcp-sink/udp-sink server; 0 starts our own on addr, \
         in a process of its own pinned to the peer CPU",
    ),
    peer_proto(
        "tcp, udp or both (the budget is split between them)",
        &["tcp", "udp", "both"],
    ),
    ParamSpec {
        name: "msg_size",
        help: "bytes per write (TCP) or per datagram (UDP, at most 65507); empty = 128K for \
               TCP, 1460 for UDP (iperf3's defaults)",
        kind: ParamKind::Size {
            min: 16,
            max: 16 << 20,
        },
        default: "",
    },
    ParamSpec {
        name: "duration",
        help: "seconds of sending per protocol; empty = the run's budget split over the \
               protocols",
        kind: ParamKind::Float {
            min: 0.01,
            max: 86400.0,
        },
        default: "",
    },
    ParamSpec {
        name: "streams",
        help: "parallel connections (TCP) or sockets (UDP), one thread each",
        kind: ParamKind::Int { min: 1, max: 64 },
        default: "1",
    },
    ParamSpec {
        name: "rate_mbps",
        help: "UDP only: total offered rate in Mbit/s, spread over the streams; 0 = as fast as \
               the sender can",
        kind: ParamKind::Float { min: 0.0, max: 1e6 },
        default: "0",
    },
    ParamSpec {
        name: "timeout_ms",
        help: "longest wait for a connect, a blocked write or the server's count",
        kind: ParamKind::Int {
            min: 1,
            max: 600_000,
        },
        default: "5000",
    },
];

const METRICS: &[MetricSpec] = metric_table![
    "tcp_mbps" "Mbit/s" Higher HarmonicMean;
    "udp_mbps" "Mbit/s" Higher HarmonicMean;
    "udp_send_mbps" "Mbit/s" Higher HarmonicMean;
    "udp_loss_pct" "%" Lower Mean;
];

fn spec(name: &str) -> &'static MetricSpec {
    crate::util::declared(METRICS, name)
}

impl Probe for NetThroughput {
    fn name(&self) -> &'static str {
        "net-throughput"
    }
    fn help(&self) -> &'static str {
        "Bulk throughput client -> server in Mbit/s: TCP streams of 128 KiB writes (as iperf3), \
         counted by what the server received; UDP datagrams of 1460 B, with the offered rate, \
         the received rate and the loss. The server is our own on loopback in a process of its \
         own, as iperf3's (port=0), or one started in another tenant."
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
        crate::util::loopback_tcp()
    }
    fn run(&self, ctx: &ProbeCtx, params: &ParamValues) -> anyhow::Result<Vec<Metric>> {
        let o: Opts = params.decode(self.name())?;
        let protos: &[&str] = match o.proto.as_str() {
            "tcp" => &["tcp"],
            "udp" => &["udp"],
            _ => &["tcp", "udp"],
        };
        if protos.contains(&"udp") && o.msg_size.is_some_and(|m| m > UDP_MAX_MSG) {
            bail!(
                "net-throughput: msg_size={} is too large for a UDP datagram (at most {UDP_MAX_MSG}); \
                 use proto=tcp or a smaller msg_size",
                o.msg_size.unwrap_or_default()
            );
        }
        ctx.pin_self()?;
        let dur = part_duration(o.duration, ctx, protos.len());
        let mut out = Vec::new();
        for &p in protos {
            let kind = if p == "tcp" {
                ServerKind::TcpSink
            } else {
                ServerKind::UdpSink
            };
            let peer = Peer::new(ctx, kind, &o.addr, o.port)?;
            let r = if p == "tcp" {
                tcp(ctx, &o, peer.addr, dur)
            } else {
                udp(ctx, &o, peer.addr, dur)
            };
            let fin = peer.finish();
            out.extend(r.with_context(|| format!("net-throughput {p} to {}", peer_text(&o)))?);
            fin?;
        }
        Ok(out)
    }
}

fn peer_text(o: &Opts) -> String {
    if o.port == 0 {
        format!("our own server on {}", o.addr)
    } else {
        format!("{}:{}", o.addr, o.port)
    }
}

fn pin_worker(ctx: &ProbeCtx) {
    if let Some(c) = ctx.pin {
        let _ = crate::util::pin_to_cpu(c);
    }
}

fn tcp(ctx: &ProbeCtx, o: &Opts, peer: SocketAddr, dur: Duration) -> anyhow::Result<Vec<Metric>> {
    let timeout = Duration::from_millis(o.timeout_ms);
    let size = o.msg_size.unwrap_or(TCP_DEFAULT_MSG) as usize;
    // Connect every stream before the clock starts.
    let conns = (0..o.streams)
        .map(|_| connect_tcp(peer, timeout, false))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let barrier = Barrier::new(conns.len() + 1);
    let dur_ns = dur.as_nanos() as u64;
    let mut start = 0u64;
    let windowed = ctx.window.is_some();
    type Sent = (u64, u64, u64, Vec<(u64, f64)>);
    let results: Vec<anyhow::Result<Sent>> = std::thread::scope(|sc| {
        let handles: Vec<_> = conns
            .into_iter()
            .map(|mut s| {
                let barrier = &barrier;
                sc.spawn(move || -> anyhow::Result<Sent> {
                    pin_worker(ctx);
                    let buf = vec![0x5Au8; size];
                    barrier.wait();
                    let t0 = now_ns();
                    let end = t0 + dur_ns;
                    let mut sent = 0u64;
                    let mut log = Vec::new();
                    if windowed {
                        log.push((t0, 0.0));
                    }
                    loop {
                        let now = now_ns();
                        if windowed {
                            log.push((now, sent as f64));
                        }
                        if now >= end || ctx.stopped() {
                            break;
                        }
                        s.write_all(&buf).context("sending")?;
                        sent += size as u64;
                    }
                    s.shutdown(Shutdown::Write)?;
                    let mut b = [0u8; 8];
                    s.read_exact(&mut b).map_err(|e| {
                        if is_timeout(&e) || e.kind() == std::io::ErrorKind::UnexpectedEof {
                            anyhow::anyhow!(
                                "the server sent no byte count: is an isobench tcp-sink \
                                 listening there?"
                            )
                        } else {
                            anyhow::Error::from(e).context("reading the server's byte count")
                        }
                    })?;
                    Ok((sent, u64::from_le_bytes(b), now_ns(), log))
                })
            })
            .collect();
        barrier.wait();
        start = now_ns();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("sender panicked")))
            })
            .collect()
    });
    let (mut sent, mut received, mut last) = (0u64, 0u64, start);
    let mut logs = Vec::new();
    for r in results {
        let (s, r, t, log) = r?;
        sent += s;
        received += r;
        last = last.max(t);
        logs.push(log);
    }
    if received != sent {
        bail!("the server counted {received} bytes but {sent} were sent");
    }
    if ctx.stopped() {
        bail!("stopped");
    }
    let secs = (last - start) as f64 / 1e9;
    let m = spec("tcp_mbps").value(received as f64 * 8.0 / secs / 1e6);
    Ok(vec![with_send_series(ctx, m, &logs, dur_ns)])
}

fn udp(ctx: &ProbeCtx, o: &Opts, peer: SocketAddr, dur: Duration) -> anyhow::Result<Vec<Metric>> {
    let timeout = Duration::from_millis(o.timeout_ms);
    let size = o.msg_size.unwrap_or(UDP_DEFAULT_MSG).max(UDP_HEADER as u64) as usize;
    let any: SocketAddr = if peer.is_ipv4() {
        "0.0.0.0:0".parse()?
    } else {
        "[::]:0".parse()?
    };
    let socks = (0..o.streams)
        .map(|i| -> anyhow::Result<(UdpSocket, u64)> {
            let s = UdpSocket::bind(any)?;
            s.connect(peer)?;
            s.set_write_timeout(Some(timeout))?;
            s.set_read_timeout(Some(Duration::from_millis(100).min(timeout)))?;
            let _ = set_buffer(&s, libc::SO_SNDBUF, 4 << 20);
            Ok((s, fresh_seed(i as u64)))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    // Bytes per stream per ns when paced.
    let pace = (o.rate_mbps > 0.0).then(|| o.rate_mbps * 1e6 / 8.0 / 1e9 / o.streams as f64);
    let barrier = Barrier::new(socks.len() + 1);
    let dur_ns = dur.as_nanos() as u64;
    let mut start = 0u64;
    let windowed = ctx.window.is_some();
    type Sent = (u64, u64, Vec<(u64, f64)>);
    let results: Vec<anyhow::Result<Sent>> = std::thread::scope(|sc| {
        let handles: Vec<_> = socks
            .iter()
            .map(|(s, session)| {
                let barrier = &barrier;
                sc.spawn(move || -> anyhow::Result<Sent> {
                    pin_worker(ctx);
                    let mut buf = vec![0x3Cu8; size];
                    buf[0..8].copy_from_slice(&session.to_le_bytes());
                    barrier.wait();
                    let t0 = now_ns();
                    let end = t0 + dur_ns;
                    let mut seq = 0u64;
                    let mut now = t0;
                    let mut log = Vec::new();
                    if windowed {
                        log.push((t0, 0.0));
                    }
                    while now < end && !ctx.stopped() {
                        if let Some(p) = pace {
                            let due = t0 + ((seq * size as u64) as f64 / p) as u64;
                            if due > now {
                                crate::probes::io_net::wait_until(due.min(end));
                                now = now_ns();
                                continue;
                            }
                        }
                        buf[8..16].copy_from_slice(&seq.to_le_bytes());
                        match s.send(&buf) {
                            Ok(_) => {
                                seq += 1;
                                if windowed && seq % 16 == 0 {
                                    log.push((now_ns(), (seq * size as u64) as f64));
                                }
                            }
                            // The local queue is full: the datagram was not sent; try again.
                            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {}
                            Err(e) if is_timeout(&e) => {}
                            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                                bail!("nothing listens there (ICMP port unreachable): start a udp-sink server")
                            }
                            Err(e) => return Err(e.into()),
                        }
                        now = now_ns();
                    }
                    if windowed {
                        log.push((now, (seq * size as u64) as f64));
                    }
                    Ok((seq, now, log))
                })
            })
            .collect();
        barrier.wait();
        start = now_ns();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("sender panicked")))
            })
            .collect()
    });
    let mut sent = 0u64;
    let mut last = start;
    let mut per_stream = Vec::new();
    let mut logs = Vec::new();
    for r in results {
        let (n, t, log) = r?;
        sent += n;
        per_stream.push(n);
        last = last.max(t);
        logs.push(log);
    }
    if ctx.stopped() {
        bail!("stopped");
    }
    let mut received = 0u64;
    for ((s, session), n) in socks.iter().zip(&per_stream) {
        received += udp_stats(s, *session, *n, timeout)?;
    }
    let secs = (last - start) as f64 / 1e9;
    let mbps = |datagrams: u64| (datagrams * size as u64) as f64 * 8.0 / secs / 1e6;
    let loss = if sent == 0 {
        0.0
    } else {
        100.0 * sent.saturating_sub(received) as f64 / sent as f64
    };
    Ok(vec![
        spec("udp_mbps").value(mbps(received)),
        with_send_series(ctx, spec("udp_send_mbps").value(mbps(sent)), &logs, dur_ns),
        spec("udp_loss_pct").value(loss),
    ])
}

/// With a window length: attaches the send-side series to `m`, Mbit/s in windows over the
/// interval in which every stream was sending, after a warm-up tenth of `dur_ns`, from the
/// streams' logs of (time, bytes sent).
fn with_send_series(ctx: &ProbeCtx, m: Metric, logs: &[Vec<(u64, f64)>], dur_ns: u64) -> Metric {
    let Some(w) = ctx.window else {
        return m;
    };
    let begin = logs.iter().filter_map(|l| l.first()).map(|p| p.0).max();
    let end = logs.iter().filter_map(|l| l.last()).map(|p| p.0).min();
    match (begin, end) {
        (Some(b), Some(e)) if e > b => {
            let b = b + (dur_ns / 10).min((e - b) / 2);
            m.with_series(rate_series(logs, b, e, w.as_nanos() as u64, 8e-6))
        }
        _ => m,
    }
}

/// Asks the sink how many datagrams of `session` arrived, until the count settles (the sink
/// may still be draining its receive buffer) or reaches `sent`.
fn udp_stats(s: &UdpSocket, session: u64, sent: u64, timeout: Duration) -> anyhow::Result<u64> {
    let mut req = [0u8; UDP_HEADER];
    req[0..8].copy_from_slice(&session.to_le_bytes());
    req[8..16].copy_from_slice(&UDP_STATS_REQUEST.to_le_bytes());
    let deadline = now_ns() + timeout.as_nanos() as u64;
    let mut last: Option<u64> = None;
    let mut reply = [0u8; 64];
    while now_ns() < deadline {
        s.send(&req).context("asking the udp-sink for its count")?;
        let got = match s.recv(&mut reply) {
            Ok(24) if le_u64(&reply[0..8]) == session => Some(le_u64(&reply[8..16])),
            Ok(_) => None,
            Err(e) if is_timeout(&e) => None,
            Err(e) => return Err(e).context("reading the udp-sink's count"),
        };
        if let Some(n) = got {
            if n >= sent || last == Some(n) {
                return Ok(n.min(sent));
            }
            last = Some(n);
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    match last {
        Some(n) => Ok(n.min(sent)),
        None => {
            bail!("the server never reported a count: is an isobench udp-sink listening there?")
        }
    }
}
