//! `local-comm`: bandwidth between two processes of the tenant, through a pipe and through a
//! unix stream socket (VITS "local communication bandwidth", lmbench `bw_pipe`/`bw_unix`
//! style).
//!
//! The probe forks a reader. Each timed round, the writer (this process, pinned to
//! `ctx.pin` when set) sends `total` bytes in messages of `size` bytes; the reader (pinned to
//! `ctx.pin_peer` when set) reads them in reads of up to `size` bytes and, having received
//! all `total`, answers with one byte on a separate pipe. The round's time runs from the
//! first write to the answer, so it covers every byte received, not merely buffered. The
//! first round is warm-up; the result is the median of the rounds' `total / time`, in GB/s
//! (1e9 bytes per second). The pipe keeps the kernel's default capacity (64 KiB on Linux) and
//! the socket its default buffers. The reader is killed and reaped when the probe ends,
//! whatever happens.
//!
//! With a window length, each mode's GB/s also comes as a series: the median GB/s of the
//! rounds whose midpoint falls in each window (sparse windows merged, see `series`), like
//! the figure itself a median of rounds.

use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use isobench_common::median;
use serde::Deserialize;

use super::cm_common::{batch_series, rate};
use super::cm_proc::{close_except, pin_raw, pipe, raw, read_exact, socketpair, write_all, Child};
use super::series::Event;
use crate::metric::{Metric, MetricSpec};
use crate::params::{ParamKind, ParamSpec, ParamValues};
use crate::timer::now_ns;
use crate::{Class, Env, Probe, ProbeCtx, Unsupported};

/// The `local-comm` probe.
pub struct LocalComm;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    size: u64,
    total: u64,
    mode: String,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "size",
        help: "bytes per write (message size); the reader reads up to this much per call",
        kind: ParamKind::Size {
            min: 1,
            max: 16 << 20,
        },
        default: "64K",
    },
    ParamSpec {
        name: "total",
        help: "bytes sent per timed round",
        kind: ParamKind::Size {
            min: 64 << 10,
            max: 4 << 30,
        },
        default: "16M",
    },
    ParamSpec {
        name: "mode",
        help: "which channel(s) to time",
        kind: ParamKind::Choice {
            options: &["all", "pipe", "unix"],
        },
        default: "all",
    },
];

const METRICS: &[MetricSpec] = &[rate("pipe_gbps", "GB/s"), rate("unix_gbps", "GB/s")];

impl Probe for LocalComm {
    fn name(&self) -> &'static str {
        "local-comm"
    }
    fn help(&self) -> &'static str {
        "Bandwidth between two processes: a forked reader receives `total` bytes per round \
         sent in `size`-byte writes (default 64 KiB) and acknowledges the round with one byte. \
         pipe_gbps (through a pipe of default capacity) and unix_gbps (through a unix stream \
         socket pair): median over rounds of total bytes / round time, in 1e9 bytes per \
         second; first round is warm-up. Writer on ctx.pin, reader on ctx.pin_peer when set."
    }
    fn windowed(&self) -> bool {
        true
    }
    fn class(&self) -> Class {
        Class::Memory
    }
    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }
    fn metrics(&self) -> &'static [MetricSpec] {
        METRICS
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        Ok(())
    }
    /// Four messages of `size`: a bound on the writer's and the reader's buffers.
    fn memory_need(&self, params: &ParamValues, _llc: u64) -> u64 {
        params.decode::<Opts>(self.name()).map_or(0, |o| 4 * o.size)
    }
    fn run(&self, ctx: &ProbeCtx, params: &ParamValues) -> anyhow::Result<Vec<Metric>> {
        let o: Opts = params.decode(self.name())?;
        ctx.pin_self()?;
        let modes: Vec<usize> = match o.mode.as_str() {
            "pipe" => vec![0],
            "unix" => vec![1],
            _ => vec![0, 1],
        };
        let budget = ctx.budget / modes.len() as u32;
        let mut out = Vec::new();
        for m in modes {
            let (a, b) = if m == 0 { pipe()? } else { socketpair()? };
            // a pipe is (read end, write end); for sockets either end does both.
            let (rx, tx) = (a, b);
            let (gbps, rounds) = transfer(ctx, rx, tx, m == 1, o.size as usize, o.total, budget)?;
            let metric = METRICS[m].value(gbps);
            out.push(match batch_series(ctx, &rounds, |v| v) {
                Some(s) => metric.with_series(s),
                None => metric,
            });
        }
        Ok(out)
    }
}

/// Times rounds of `total` bytes from this process (writing `tx`) to a forked reader
/// (reading `rx`); returns the median GB/s and each timed round (its midpoint and GB/s).
fn transfer(
    ctx: &ProbeCtx,
    rx: OwnedFd,
    tx: OwnedFd,
    socket: bool,
    msg: usize,
    total: u64,
    budget: Duration,
) -> anyhow::Result<(f64, Vec<Event>)> {
    let (ack_r, ack_w) = pipe()?;
    let all = raw(&[&rx, &tx, &ack_r, &ack_w]);
    let (rx_fd, ack_w_fd) = (rx.as_raw_fd(), ack_w.as_raw_fd());
    let mut rbuf = vec![0u8; msg];
    let wbuf = vec![0x5Au8; msg];
    let peer = ctx.pin_peer;
    let child = Child::fork(|| {
        close_except(&all, &[rx_fd, ack_w_fd]);
        if !pin_raw(peer) {
            return 2;
        }
        loop {
            let mut got = 0u64;
            while got < total {
                let want = (msg as u64).min(total - got) as usize;
                // SAFETY: rbuf is valid for msg >= want bytes.
                let r = unsafe { libc::read(rx_fd, rbuf.as_mut_ptr().cast(), want) };
                if r == 0 {
                    return 0;
                }
                if r < 0 {
                    // SAFETY: reading errno is async-signal-safe.
                    if unsafe { *libc::__errno_location() } == libc::EINTR {
                        continue;
                    }
                    return 3;
                }
                got += r as u64;
            }
            let one = 1u8;
            // SAFETY: one is a valid 1-byte buffer.
            if unsafe { libc::write(ack_w_fd, (&one as *const u8).cast(), 1) } != 1 {
                return 4;
            }
        }
    })?;
    // The parent keeps only its write end and the answer's read end, so a dead reader shows
    // up as an error here instead of a hang.
    drop(rx);
    drop(ack_w);
    let deadline = now_ns() + budget.as_nanos() as u64;
    let mut rates = Vec::new();
    let mut ack = [0u8; 1];
    let mut rounds = 0u32;
    let mut log = Vec::new();
    loop {
        let t0 = now_ns();
        let mut sent = 0u64;
        while sent < total {
            let n = (msg as u64).min(total - sent) as usize;
            write_all(tx.as_raw_fd(), &wbuf[..n], socket)?;
            sent += n as u64;
        }
        read_exact(ack_r.as_raw_fd(), &mut ack)?;
        let t1 = now_ns();
        let dt = (t1 - t0) as f64 - ctx.timer_overhead_ns;
        rounds += 1;
        if rounds > 1 {
            let gbps = total as f64 / dt.max(1.0);
            rates.push(gbps);
            if ctx.window.is_some() {
                log.push(Event {
                    t_ns: t0 + (t1 - t0) / 2,
                    value: gbps,
                });
            }
        }
        if rates.len() >= 3 && (now_ns() >= deadline || ctx.stopped()) {
            break;
        }
    }
    drop(child);
    Ok((median(&rates), log))
}
