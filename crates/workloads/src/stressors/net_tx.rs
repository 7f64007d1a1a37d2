//! `net-tx`: N threads constantly sending UDP datagrams (the network-transmit test of
//! Matthews et al.: 4 threads of 60 KiB datagrams; the datagram-size interference of VITS
//! section 5.5).
//!
//! Unpaced, each thread hands the kernel `batch` datagrams (default 32) per `sendmmsg` call:
//! the same CPU share sends more (about 330,000 instead of 280,000 60 KiB datagrams/s from
//! two threads here), since fewer system calls are made per datagram.
//!
//! Without a `target` the stressor opens its own sink socket on 127.0.0.1 and never reads
//! it: the kernel still runs the whole loopback transmit and receive path for every datagram
//! and drops it at the full socket buffer, so all the work is charged to this tenant and no
//! byte leaves the host. With `target=ADDR:PORT` (for example another tenant's `net-rx`
//! with `sender=external`) the datagrams go there instead; a missing receiver only makes
//! sends fail now and then (ICMP port unreachable), which is counted, not fatal.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context as _;
use serde::Deserialize;

use super::pool::{run_pool, Shape};
use super::udp::{datagram_size, Sender, MAX_BATCH, RATE_PARAM, SIZE_KNOB, SIZE_PARAM};
use crate::params::{ParamKind, ParamSpec, ParamValues};
use crate::{Class, Env, StressCtx, StressReport, Stressor, Unsupported};

/// The `net-tx` stressor.
pub struct NetTx;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    threads: u32,
    target: Option<String>,
    size: Option<u32>,
    rate: u64,
    batch: u32,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "threads",
        help: "sender threads, each with its own socket",
        kind: ParamKind::Int { min: 1, max: 256 },
        default: "4",
    },
    ParamSpec {
        name: "target",
        help: "where to send, ADDR:PORT (default: a sink socket of the stressor's own on \
               127.0.0.1, never read)",
        kind: ParamKind::Text,
        default: "",
    },
    SIZE_PARAM,
    RATE_PARAM,
    ParamSpec {
        name: "batch",
        help: "datagrams per sendmmsg call when unpaced (1 = one send call per datagram); \
               paced senders send one at a time",
        kind: ParamKind::Int {
            min: 1,
            max: MAX_BATCH as i64,
        },
        default: "32",
    },
];

impl Stressor for NetTx {
    fn name(&self) -> &'static str {
        "net-tx"
    }
    fn help(&self) -> &'static str {
        "N threads (default 4) constantly sending UDP datagrams (default 60 KiB), 32 per \
         sendmmsg call, to a target, by default a loopback sink socket of the stressor's own \
         that is never read (the kernel drops at its full buffer). One operation is one \
         datagram sent. Pressure: datagrams_per_sec and bytes_per_sec (payload) sent."
    }
    fn class(&self) -> Class {
        Class::Net
    }
    fn intensity_knob(&self) -> &'static str {
        SIZE_KNOB
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
        let size = datagram_size(ctx, o.size);
        let unit = format!("datagram of {size} bytes sent");
        if ctx.intensity == 0 {
            return Ok(super::pool::idle_report(ctx, unit));
        }
        let (target, sink) = match o.target.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
            Some(t) => {
                let a: SocketAddr = t.parse().with_context(|| {
                    format!("net-tx: target `{t}` is not ADDR:PORT (for example 10.0.0.2:9000)")
                })?;
                (a, None)
            }
            None => {
                let s = UdpSocket::bind("127.0.0.1:0").context("net-tx: binding the sink")?;
                (s.local_addr()?, Some(s))
            }
        };
        let threads = o.threads.min(ctx.caps.max_tasks.unwrap_or(u32::MAX)).max(1);
        let per_thread = o.rate as f64 / f64::from(threads);
        let sent = AtomicU64::new(0);
        let errors = AtomicU64::new(0);
        let out = run_pool(
            ctx,
            self.name(),
            Shape::busy(threads),
            |_| {
                Sender::new(target, size, per_thread, &sent, &errors)
                    .map(|s| s.with_batch(o.batch as usize))
            },
            Sender::step,
        )?;
        drop(sink);
        let notes = vec![
            format!(
                "target={target}{}",
                if o.target.as_deref().unwrap_or("").trim().is_empty() {
                    " (own sink, never read)"
                } else {
                    ""
                }
            ),
            format!(
                "size={size} rate={}",
                if o.rate == 0 {
                    format!("unpaced batch={}", o.batch)
                } else {
                    format!("{}/s", o.rate)
                }
            ),
            format!("send_errors={}", errors.load(Ordering::Relaxed)),
        ];
        let pressure = vec![
            out.ops_rate("datagrams_per_sec", "datagrams/s"),
            out.bytes_per_sec(),
        ];
        let mut r = out.report(unit, notes);
        r.pressure = pressure;
        Ok(r)
    }
}
