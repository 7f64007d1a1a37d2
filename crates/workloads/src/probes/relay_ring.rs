//! `relay-ring`: a message relayed around a ring of TCP hops, timed per iteration, with the
//! "null test" variants of Matthews, Coady and Neville (seed 004).
//!
//! `variant=network` (the ring): a master and `hops - 1` forwarders connected in a ring over
//! TCP with Nagle off. The master writes an 8-byte message (the iteration number) to the
//! first forwarder, each forwarder relays it to the next, the last one relays it back to the
//! master, and the master times write-to-return. With `hops=1` the master relays to itself.
//! The forwarders are `netserve` `relay-forwarder` threads (pinned to `ctx.pin_peer`), or,
//! with `first_hop` set, forwarders in other tenants: then the last of them must relay to
//! this probe's `listen` address, and `hops` is whatever that chain is.
//!
//! Null tests keep the same timed loop and take the network out: `nosyscall` times an
//! iteration with no system call in it (a dependent integer update of the message), `write`
//! one `write(2)` of the message to `/dev/null` (the paper used `puts`). Artifacts that show
//! in `network` but not in `write` come from the network path; those in `write` but not in
//! `nosyscall` from system calls in general.
//!
//! The run is `runs` x `iterations` (the paper: 50 x 10,000; here 10 x 1,000 by default).
//! Every run opens fresh connections around the ring, as the paper's runs were separate
//! executions; the ring's connections then stay open for the run's iterations (the paper
//! connected per message, which would time connection setup instead of relaying). Each run
//! starts with `warmup` untimed iterations. No new run starts once the run's budget is
//! spent (one always completes).
//!
//! Reported: per-iteration latency in ns (mean, p50, p99, p99.9, max with the histogram,
//! plus min and standard deviation), the spread of the per-run means (coefficient of
//! variation, %, which shows a "memory between runs"), and the iterations timed. With
//! `raw=true` also every iteration itself, for the paper's run x iteration surface:
//! `iter_ns` carries one window per timed iteration (its start, end and latency) and
//! `run_mean_ns` one window per run (its first start, last end and mean), so each iteration
//! is placed in its run by time.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Deserialize;

use crate::metric::{latency_metrics, LatencyHistogram, Metric, MetricSpec, Window};
use crate::netserve::{self, ServerHandle, ServerKind, ServerOptions};
use crate::params::{ParamKind, ParamSpec, ParamValues};
use crate::probes::io_net::{
    accept_timeout, connect_tcp, hist_record, metric_table, parse_socket_addr,
};
use crate::timer::now_ns;
use crate::{Class, Env, Probe, ProbeCtx, Unsupported};

/// The `relay-ring` probe.
pub struct RelayRing;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    hops: u32,
    runs: u64,
    iterations: u64,
    warmup: u64,
    variant: String,
    first_hop: Option<String>,
    listen: String,
    timeout_ms: u64,
    raw: bool,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "hops",
        help: "TCP hops around the ring: the master plus hops-1 forwarders (1 = the master \
               relays to itself)",
        kind: ParamKind::Int { min: 1, max: 64 },
        default: "3",
    },
    ParamSpec {
        name: "runs",
        help: "runs, each on fresh connections (the paper: 50)",
        kind: ParamKind::Int {
            min: 1,
            max: 100_000,
        },
        default: "10",
    },
    ParamSpec {
        name: "iterations",
        help: "timed iterations per run (the paper: 10,000)",
        kind: ParamKind::Int {
            min: 1,
            max: 100_000_000,
        },
        default: "1000",
    },
    ParamSpec {
        name: "warmup",
        help: "untimed iterations at the start of every run",
        kind: ParamKind::Int {
            min: 0,
            max: 1_000_000,
        },
        default: "10",
    },
    ParamSpec {
        name: "variant",
        help: "network: the real ring; nosyscall: the timed loop with no system call; write: \
               one write(2) to /dev/null per iteration",
        kind: ParamKind::Choice {
            options: &["network", "nosyscall", "write"],
        },
        default: "network",
    },
    ParamSpec {
        name: "first_hop",
        help: "ip:port of the first forwarder of an external ring (forwarders started in \
               other tenants, the last relaying to `listen`); empty = our own forwarders",
        kind: ParamKind::Text,
        default: "",
    },
    ParamSpec {
        name: "listen",
        help: "ip:port where the master takes the message back (give a fixed port for an \
               external ring)",
        kind: ParamKind::Text,
        default: "127.0.0.1:0",
    },
    ParamSpec {
        name: "timeout_ms",
        help: "longest wait for a connection or for the message to come back",
        kind: ParamKind::Int {
            min: 1,
            max: 600_000,
        },
        default: "2000",
    },
    ParamSpec {
        name: "raw",
        help: "also return every timed iteration (start, end, ns) and every run's mean as \
               series of iter_ns and run_mean_ns, for the run x iteration surface",
        kind: ParamKind::Bool,
        default: "false",
    },
];

const METRICS: &[MetricSpec] = metric_table![
    lat "iter" "ns";
    "iter_min_ns" "ns" Lower Mean;
    "iter_std_ns" "ns" Lower Mean;
    "run_mean_cv_pct" "%" Lower Mean;
    "iterations" "iterations" Higher Total;
    "iter_ns" "ns" Lower Mean;
    "run_mean_ns" "ns" Lower Mean;
];

fn spec(name: &str) -> &'static MetricSpec {
    crate::util::declared(METRICS, name)
}

impl Probe for RelayRing {
    fn name(&self) -> &'static str {
        "relay-ring"
    }
    fn help(&self) -> &'static str {
        "A message relayed over N TCP hops (master and forwarders in a ring, Nagle off), runs x \
         iterations, each iteration timed: latency in ns (mean, std, min, p50, p99, p99.9, max \
         with the histogram) and the spread of run means. Null-test variants time the same \
         loop with no system call (nosyscall) or one write to /dev/null (write)."
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
        ctx.pin_self()?;
        let mut stats = Stats {
            raw: o.raw.then(Vec::new),
            ..Stats::default()
        };
        match o.variant.as_str() {
            "network" => network(ctx, &o, &mut stats)?,
            "write" => {
                let f = OpenOptions::new()
                    .write(true)
                    .open("/dev/null")
                    .context("opening /dev/null")?;
                let fd = f.as_raw_fd();
                local_loop(ctx, &o, &mut stats, |msg| {
                    let b = msg.to_le_bytes();
                    // SAFETY: fd is open for the loop; b is 8 valid bytes.
                    let n = unsafe { libc::write(fd, b.as_ptr().cast(), b.len()) };
                    std::hint::black_box(n);
                    msg + 1
                })?
            }
            _ => local_loop(ctx, &o, &mut stats, |msg| {
                std::hint::black_box(msg.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(7)) | 1
            })?,
        }
        stats.metrics()
    }
}

/// Per-iteration statistics over all runs.
#[derive(Default)]
struct Stats {
    h: LatencyHistogram,
    n: u64,
    mean: f64,
    m2: f64,
    min: f64,
    run_means: Vec<f64>,
    /// Every timed iteration, when asked for.
    raw: Option<Vec<Window>>,
    /// Every run: first start, last end, mean.
    runs: Vec<Window>,
}

impl Stats {
    /// Adds one iteration (Welford's running mean and variance).
    #[inline]
    fn add(&mut self, ns: f64) {
        self.n += 1;
        let d = ns - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (ns - self.mean);
        self.min = if self.n == 1 { ns } else { self.min.min(ns) };
        hist_record(&mut self.h, ns.round() as u64);
    }

    /// Adds one iteration timed from `t0` to `t1` (`ns` less the timer's overhead).
    #[inline]
    fn add_at(&mut self, t0: u64, t1: u64, ns: f64) {
        self.add(ns);
        if let Some(raw) = &mut self.raw {
            raw.push(Window {
                start_ns: t0,
                end_ns: t1,
                value: ns,
            });
        }
    }

    /// Ends a run of `k` iterations summing to `sum` ns, timed from `start` to `end`.
    fn end_run(&mut self, start: u64, end: u64, sum: f64, k: u64) {
        if k > 0 {
            let mean = sum / k as f64;
            self.run_means.push(mean);
            self.runs.push(Window {
                start_ns: start,
                end_ns: end.max(start + 1),
                value: mean,
            });
        }
    }

    fn metrics(self) -> anyhow::Result<Vec<Metric>> {
        if self.n == 0 {
            bail!("no iteration was timed (stopped before the first run finished)");
        }
        let std = if self.n > 1 {
            (self.m2 / (self.n - 1) as f64).sqrt()
        } else {
            0.0
        };
        let k = self.run_means.len() as f64;
        let mm = self.run_means.iter().sum::<f64>() / k;
        let cv = if k > 1.0 && mm > 0.0 {
            let var = self.run_means.iter().map(|m| (m - mm).powi(2)).sum::<f64>() / (k - 1.0);
            100.0 * var.sqrt() / mm
        } else {
            0.0
        };
        let mut out = latency_metrics("iter", "ns", &self.h);
        // The exact mean, not the histogram's bucketed one.
        if let Some(m) = out.iter_mut().find(|m| m.name == "iter_mean_ns") {
            m.value = self.mean;
        }
        out.push(spec("iter_min_ns").value(self.min));
        out.push(spec("iter_std_ns").value(std));
        out.push(spec("run_mean_cv_pct").value(cv));
        out.push(spec("iterations").value(self.n as f64));
        if let Some(raw) = self.raw {
            out.push(spec("iter_ns").value(self.mean).with_series(raw));
            out.push(spec("run_mean_ns").value(mm).with_series(self.runs));
        }
        Ok(out)
    }
}

/// Runs `runs` x `iterations` of `step` (a null test), timing each step.
fn local_loop(
    ctx: &ProbeCtx,
    o: &Opts,
    stats: &mut Stats,
    mut step: impl FnMut(u64) -> u64,
) -> anyhow::Result<()> {
    let over = ctx.timer_overhead_ns;
    let deadline = now_ns() + ctx.budget.as_nanos() as u64;
    let mut msg = 1u64;
    for run in 0..o.runs {
        if ctx.stopped() || (run > 0 && now_ns() > deadline) {
            break;
        }
        for _ in 0..o.warmup {
            msg = step(msg);
        }
        let (mut sum, mut k) = (0.0, 0u64);
        let (mut first, mut last) = (0, 0);
        for _ in 0..o.iterations {
            if ctx.stopped() {
                break;
            }
            let t0 = now_ns();
            msg = step(msg);
            let t1 = now_ns();
            let ns = ((t1 - t0) as f64 - over).max(0.0);
            stats.add_at(t0, t1, ns);
            if k == 0 {
                first = t0;
            }
            last = t1;
            sum += ns;
            k += 1;
        }
        stats.end_run(first, last, sum, k);
    }
    std::hint::black_box(msg);
    Ok(())
}

fn network(ctx: &ProbeCtx, o: &Opts, stats: &mut Stats) -> anyhow::Result<()> {
    let timeout = Duration::from_millis(o.timeout_ms);
    let listen = parse_socket_addr("listen", &o.listen)?;
    let listener =
        TcpListener::bind(listen).with_context(|| format!("relay-ring: binding {listen}"))?;
    let back = listener.local_addr()?;
    // Our own forwarders, last hop first (each must know its next hop).
    let mut forwarders: Vec<ServerHandle> = Vec::new();
    let first = match o.first_hop.as_deref().map(str::trim) {
        Some(f) if !f.is_empty() => parse_socket_addr("first_hop", f)?,
        _ => {
            let mut next = back;
            let opts = ServerOptions {
                pin: ctx.pin_peer,
                io_timeout: timeout,
            };
            for _ in 1..o.hops {
                let h = netserve::start_server_with(
                    ServerKind::RelayForwarder { next },
                    SocketAddr::new(back.ip(), 0),
                    ctx.stop.clone(),
                    opts,
                )
                .context("relay-ring: starting a forwarder")?;
                next = h.local_addr();
                forwarders.push(h);
            }
            next
        }
    };
    let r = ring_runs(ctx, o, stats, &listener, first, timeout);
    // Stop the forwarders and surface what went wrong in them (a refused next hop, say).
    let mut fwd_err: Option<String> = None;
    for h in forwarders {
        let conn_err = h.last_conn_error();
        if let Err(e) = h.stop() {
            fwd_err.get_or_insert(e.to_string());
        }
        if let Some(e) = conn_err {
            fwd_err.get_or_insert(e);
        }
    }
    match (r, fwd_err) {
        (Err(e), Some(f)) => Err(e.context(format!("a forwarder reported: {f}"))),
        (Err(e), None) => Err(e),
        (Ok(()), _) => Ok(()),
    }
}

fn ring_runs(
    ctx: &ProbeCtx,
    o: &Opts,
    stats: &mut Stats,
    listener: &TcpListener,
    first: SocketAddr,
    timeout: Duration,
) -> anyhow::Result<()> {
    let over = ctx.timer_overhead_ns;
    let deadline = now_ns() + ctx.budget.as_nanos() as u64;
    let mut seq = 0u64;
    for run in 0..o.runs {
        if ctx.stopped() || (run > 0 && now_ns() > deadline) {
            break;
        }
        let mut out = connect_tcp(first, timeout, true)
            .with_context(|| format!("relay-ring run {run}: connecting to the first hop"))?;
        let mut inc = accept_timeout(listener, timeout, &ctx.stop).with_context(|| {
            format!(
                "relay-ring run {run}: waiting for the ring to connect back to {}",
                listener
                    .local_addr()
                    .map_or_else(|_| "?".into(), |a| a.to_string())
            )
        })?;
        inc.set_nodelay(true)?;
        inc.set_read_timeout(Some(timeout))?;
        inc.set_write_timeout(Some(timeout))?;
        let mut back = [0u8; 8];
        let mut trip = |seq: u64| -> anyhow::Result<()> {
            out.write_all(&seq.to_le_bytes())
                .context("sending to the first hop")?;
            inc.read_exact(&mut back).map_err(|e| {
                if netserve::is_timeout(&e) {
                    anyhow::anyhow!("the message did not come back within {timeout:?}")
                } else {
                    anyhow::Error::from(e).context("reading the message back")
                }
            })?;
            let got = u64::from_le_bytes(back);
            if got != seq {
                bail!("the ring returned message {got}, expected {seq}");
            }
            Ok(())
        };
        for _ in 0..o.warmup {
            seq += 1;
            trip(seq)?;
        }
        let (mut sum, mut k) = (0.0, 0u64);
        let (mut first, mut last) = (0, 0);
        for _ in 0..o.iterations {
            if ctx.stopped() {
                break;
            }
            seq += 1;
            let t0 = now_ns();
            trip(seq)?;
            let t1 = now_ns();
            let ns = ((t1 - t0) as f64 - over).max(0.0);
            stats.add_at(t0, t1, ns);
            if k == 0 {
                first = t0;
            }
            last = t1;
            sum += ns;
            k += 1;
        }
        stats.end_run(first, last, sum, k);
        // Closing our end makes every forwarder of this run close its connections too.
    }
    Ok(())
}
