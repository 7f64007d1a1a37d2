//! `net-rx`: N threads constantly receiving UDP datagrams (the network-receive test of
//! Matthews et al.: 4 threads reading 60 KiB datagrams).
//!
//! The receivers share one socket bound to `bind` (default 127.0.0.1 on a free port) with a
//! large receive buffer; each waits at most 50 ms per receive so the stop flag is seen
//! promptly. With `sender=self` (default) the stressor also runs its own sender threads
//! aimed at that socket over loopback, so it works alone: receive work and the matching send
//! work are both charged to this tenant. With `sender=external` it only receives, from
//! another tenant's `net-tx` pointed at it (give `bind` a fixed port for that).

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use serde::Deserialize;

use super::pool::{run_pool, Done, Shape};
use super::udp::{datagram_size, reachable, set_buffer, Sender, RATE_PARAM, SIZE_PARAM};
use crate::params::{ParamKind, ParamSpec, ParamValues};
use crate::{Class, Env, StressCtx, StressReport, Stressor, Unsupported};

/// The `net-rx` stressor.
pub struct NetRx;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    threads: u32,
    bind: String,
    sender: String,
    senders: Option<u32>,
    size: Option<u32>,
    rate: u64,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "threads",
        help: "receiver threads, sharing one socket",
        kind: ParamKind::Int { min: 1, max: 256 },
        default: "4",
    },
    ParamSpec {
        name: "bind",
        help: "address to receive on, ADDR:PORT (port 0 = any free port)",
        kind: ParamKind::Text,
        default: "127.0.0.1:0",
    },
    ParamSpec {
        name: "sender",
        help: "self: also run loopback sender threads aimed at the socket; external: only \
               receive (another tenant's net-tx sends)",
        kind: ParamKind::Choice {
            options: &["self", "external"],
        },
        default: "self",
    },
    ParamSpec {
        name: "senders",
        help: "sender threads with sender=self (auto: as many as receivers)",
        kind: ParamKind::Int { min: 1, max: 256 },
        default: "",
    },
    SIZE_PARAM,
    RATE_PARAM,
];

/// Longest a receiver blocks before checking the stop flag.
const RECV_WAIT: Duration = Duration::from_millis(50);

enum Role<'a> {
    Receiver { sock: &'a UdpSocket, buf: Vec<u8> },
    Sender(Sender<'a>),
}

impl Role<'_> {
    fn step(&mut self) -> anyhow::Result<Done> {
        match self {
            Role::Receiver { sock, buf } => match sock.recv(buf) {
                Ok(n) => Ok(Done::new(1, n as u64)),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) =>
                {
                    Ok(Done::NOTHING)
                }
                Err(e) => Err(e).context("receiving a UDP datagram"),
            },
            // Sent datagrams are counted by the sender, not as this stressor's operations.
            Role::Sender(s) => s.step().map(|_| Done::NOTHING),
        }
    }
}

impl Stressor for NetRx {
    fn name(&self) -> &'static str {
        "net-rx"
    }
    fn help(&self) -> &'static str {
        "N threads (default 4) constantly receiving UDP datagrams (default 60 KiB) on one \
         socket; with sender=self it also sends them to itself over loopback, with \
         sender=external it only receives. One operation is one datagram received. Pressure: \
         datagrams_per_sec and bytes_per_sec (payload) received."
    }
    fn class(&self) -> Class {
        Class::Net
    }
    fn intensity_knob(&self) -> &'static str {
        "with sender=self, the datagram size its senders use: ceil(61440 x intensity / 100) \
         bytes (50 = 30 KiB, 100 = 60 KiB; the size parameter overrides it); with \
         sender=external the sender decides and intensity only switches receiving on; 0 = idle"
    }
    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        UdpSocket::bind("127.0.0.1:0")
            .map(drop)
            .map_err(|e| Unsupported::new(format!("cannot open a UDP socket on 127.0.0.1: {e}")))
    }
    fn run(&self, ctx: &StressCtx, params: &ParamValues) -> anyhow::Result<StressReport> {
        let o: Opts = params.decode(self.name())?;
        let unit = "datagram received";
        if ctx.intensity == 0 {
            return Ok(super::pool::idle_report(ctx, unit));
        }
        let bind: SocketAddr = o.bind.trim().parse().with_context(|| {
            format!(
                "net-rx: bind `{}` is not ADDR:PORT (for example 127.0.0.1:9000)",
                o.bind
            )
        })?;
        let sock = UdpSocket::bind(bind).with_context(|| format!("net-rx: binding {bind}"))?;
        sock.set_read_timeout(Some(RECV_WAIT))?;
        set_buffer(&sock, libc::SO_RCVBUF, 8 << 20);
        let local = sock.local_addr()?;
        let self_send = o.sender == "self";
        let size = datagram_size(ctx, o.size);

        let mut receivers = o.threads.max(1);
        let mut senders = if self_send {
            o.senders.unwrap_or(receivers).max(1)
        } else {
            0
        };
        if let Some(t) = ctx.caps.max_tasks {
            if receivers + senders > t {
                receivers = if self_send { (t / 2).max(1) } else { t.max(1) };
                senders = if self_send {
                    t.saturating_sub(receivers).max(1)
                } else {
                    0
                };
            }
        }
        let per_sender = o.rate as f64 / f64::from(senders.max(1));
        let target = reachable(local);
        let sent = AtomicU64::new(0);
        let errors = AtomicU64::new(0);
        let out = run_pool(
            ctx,
            self.name(),
            Shape::busy(receivers + senders),
            |i| {
                if (i as u32) < receivers {
                    Ok(Role::Receiver {
                        sock: &sock,
                        buf: vec![0u8; 65_536],
                    })
                } else {
                    Sender::new(target, size, per_sender, &sent, &errors).map(Role::Sender)
                }
            },
            Role::step,
        )?;
        let mut notes = vec![format!("bound={local} receivers={receivers}")];
        if self_send {
            notes.push(format!(
                "sender=self senders={senders} size={size} sent={} send_errors={}",
                sent.load(Ordering::Relaxed),
                errors.load(Ordering::Relaxed)
            ));
        } else {
            notes.push("sender=external".into());
        }
        // Receivers count operations and bytes; the senders' work is only in the notes.
        let pressure = vec![
            out.ops_rate("datagrams_per_sec", "datagrams/s"),
            out.bytes_per_sec(),
        ];
        let mut report = out.report(unit, notes);
        report.workers = receivers + senders;
        report.pressure = pressure;
        Ok(report)
    }
}
