//! `service`: a latency-sensitive service held at a target request rate, in the spirit of
//! rd-hashd, the simulated service of resctl-bench (Meta's resource-control benchmark).
//!
//! The service is isobench's own request server ([`server`]: each request hashes pieces of
//! a memory and file working set with a hot/cold skew, burns a fixed CPU time and optionally
//! reads blocks from the disk directly), the user's server started in the tenant
//! (`server_cmd`, on `port`), or a server isobench only points at (`port`). An open-loop
//! load generator ([`loadgen`]) in the probe's process drives it at `rate` requests per
//! second, HTTP/1.1 or a line protocol (Redis's, for one), each request's latency from its
//! *due* time.
//!
//! With `rate = 0` the probe first **calibrates**, within `calibrate_s`: steps of about a
//! second at rising rates (doubling from 100/s) until one misses the SLO (its p99 above
//! `slo_ms`, or fewer than 95% of its requests answered in time to be counted), then a
//! bisection between the last rate that met it and the first that did not. It then holds
//! `share` of the highest rate that met it for the rest of the budget. Either way the
//! metrics cover the hold only.
//!
//! Metrics over the hold: `rate_rps` (answered requests per second), `target_rps` (the
//! rate held), `max_rps` (the calibrated maximum; 0 when the rate was given), `lat_p50_ms`,
//! `lat_p99_ms`, `lat_p999_ms` and `errors`. With a window ([`crate::ProbeCtx::window`]),
//! `rate_rps`, `lat_p50_ms` and `lat_p99_ms` also come as series tiling the hold, each
//! window holding the requests *answered* in it. Unlike the other probes' tail series, a
//! window's p99 is given however few requests it holds: a service in trouble answers few,
//! and its consumer (the `protection` kind) counts such windows and says so. Whether the
//! service met its target (isol%) or its SLO is for the analysis to say, not the probe.
//!
//! A service that never reaches its target is reported with the rate it reached; a server
//! that cannot be reached is an error naming its address.

pub mod loadgen;
pub mod server;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::Deserialize;

use self::loadgen::{drive, Clock, Conn, Done, Exchange, Monotonic, Protocol, Slice};
use crate::metric::{Aggregate, Direction, Metric, MetricSpec, Window};
use crate::params::{peer_addr, peer_port, ParamKind, ParamSpec, ParamValues};
use crate::probes::series::tile;
use crate::{Class, Env, Probe, ProbeCtx, Unsupported};

/// The `service` probe.
pub struct Service;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    addr: String,
    port: u16,
    protocol: String,
    request: Option<String>,
    server_cmd: Option<String>,
    mem: u64,
    file: u64,
    touch: u64,
    hot_pct: u32,
    hot_share: u32,
    cpu_us: u64,
    io_reads: u32,
    rate: u64,
    share: f64,
    slo_ms: f64,
    calibrate_s: f64,
    connections: u32,
    duration: Option<f64>,
    timeout_ms: u64,
}

const PARAMS: &[ParamSpec] = &[
    peer_addr("address of the server (loopback of the tenant unless it is elsewhere)"),
    peer_port("port of the user's server; 0 starts isobench's own"),
    ParamSpec {
        name: "protocol",
        help: "http (GET request) or line (request and CRLF, one line or Redis reply back); \
               isobench's own server speaks line",
        kind: ParamKind::Choice {
            options: &["line", "http"],
        },
        default: "line",
    },
    ParamSpec {
        name: "request",
        help: "the request: a path for http (/index.html), a line for line (PING, GET key); \
               empty: / or the own server's",
        kind: ParamKind::Text,
        default: "",
    },
    ParamSpec {
        name: "server_cmd",
        help: "the user's server, started in the tenant for the run and stopped after (it \
               must listen on addr:port); empty: none started",
        kind: ParamKind::Text,
        default: "",
    },
    ParamSpec {
        name: "mem",
        help: "own server: anonymous memory of the working set",
        kind: ParamKind::Size {
            min: 4096,
            max: 64 << 30,
        },
        default: "64M",
    },
    ParamSpec {
        name: "file",
        help: "own server: file part of the working set, read through the page cache (0: none)",
        kind: ParamKind::Size {
            min: 0,
            max: 1 << 40,
        },
        default: "0",
    },
    ParamSpec {
        name: "touch",
        help: "own server: bytes hashed per request from the memory (and as many from the file)",
        kind: ParamKind::Size {
            min: 0,
            max: 64 << 20,
        },
        default: "16K",
    },
    ParamSpec {
        name: "hot_pct",
        help: "own server: percent of accesses that go to the hot part of the set",
        kind: ParamKind::Int { min: 0, max: 100 },
        default: "90",
    },
    ParamSpec {
        name: "hot_share",
        help: "own server: percent of the set that is hot",
        kind: ParamKind::Int { min: 1, max: 100 },
        default: "10",
    },
    ParamSpec {
        name: "cpu_us",
        help: "own server: CPU time burnt per request, microseconds",
        kind: ParamKind::Int {
            min: 0,
            max: 1_000_000,
        },
        default: "100",
    },
    ParamSpec {
        name: "io_reads",
        help: "own server: 4 KiB direct reads from the file per request (needs file > 0)",
        kind: ParamKind::Int { min: 0, max: 64 },
        default: "0",
    },
    ParamSpec {
        name: "rate",
        help: "requests per second held (open loop); 0: calibrate first, then hold share of \
               the highest rate within the SLO",
        kind: ParamKind::Int {
            min: 0,
            max: 10_000_000,
        },
        default: "0",
    },
    ParamSpec {
        name: "share",
        help: "share of the calibrated maximum held when rate = 0",
        kind: ParamKind::Float {
            min: 0.01,
            max: 1.0,
        },
        default: "0.8",
    },
    ParamSpec {
        name: "slo_ms",
        help: "the service's objective: p99 latency, ms (what calibration holds it to)",
        kind: ParamKind::Float {
            min: 0.001,
            max: 600_000.0,
        },
        default: "10",
    },
    ParamSpec {
        name: "calibrate_s",
        help: "seconds of the calibration when rate = 0 (part of the budget)",
        kind: ParamKind::Float {
            min: 1.0,
            max: 3600.0,
        },
        default: "10",
    },
    ParamSpec {
        name: "connections",
        help: "keep-alive connections, one client thread each (at most this many requests in \
               flight)",
        kind: ParamKind::Int { min: 1, max: 512 },
        default: "16",
    },
    ParamSpec {
        name: "duration",
        help: "seconds of the hold; empty: the run's budget less the calibration",
        kind: ParamKind::Float {
            min: 0.01,
            max: 86400.0,
        },
        default: "",
    },
    ParamSpec {
        name: "timeout_ms",
        help: "longest wait for one answer before the connection is counted failed and \
               replaced",
        kind: ParamKind::Int {
            min: 1,
            max: 600_000,
        },
        default: "2000",
    },
];

const METRICS: &[MetricSpec] = &[
    MetricSpec {
        name: "rate_rps",
        unit: "req/s",
        direction: Direction::Higher,
        aggregate: Aggregate::HarmonicMean,
    },
    MetricSpec {
        name: "target_rps",
        unit: "req/s",
        direction: Direction::Higher,
        aggregate: Aggregate::Max,
    },
    MetricSpec {
        name: "max_rps",
        unit: "req/s",
        direction: Direction::Higher,
        aggregate: Aggregate::Max,
    },
    MetricSpec {
        name: "lat_p50_ms",
        unit: "ms",
        direction: Direction::Lower,
        aggregate: Aggregate::Mean,
    },
    MetricSpec {
        name: "lat_p99_ms",
        unit: "ms",
        direction: Direction::Lower,
        aggregate: Aggregate::Mean,
    },
    MetricSpec {
        name: "lat_p999_ms",
        unit: "ms",
        direction: Direction::Lower,
        aggregate: Aggregate::Mean,
    },
    MetricSpec {
        name: "errors",
        unit: "requests",
        direction: Direction::Lower,
        aggregate: Aggregate::Total,
    },
];

/// Quantile `q` of sorted latencies (nearest rank), ms.
fn quantile_ms(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i] as f64 / 1e6
}

/// What one stretch of load gave.
struct Load {
    done: Vec<Done>,
    begin: u64,
    end: u64,
}

impl Load {
    fn ok_latencies(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .done
            .iter()
            .filter(|d| d.ok)
            .map(|d| d.latency_ns)
            .collect();
        v.sort_unstable();
        v
    }

    fn rate(&self) -> f64 {
        let secs = self.end.saturating_sub(self.begin) as f64 / 1e9;
        self.done.iter().filter(|d| d.ok).count() as f64 / secs.max(1e-9)
    }

    /// Whether the stretch met the SLO at `rate`.
    fn meets(&self, rate: f64, slo_ms: f64) -> bool {
        let lat = self.ok_latencies();
        !lat.is_empty() && quantile_ms(&lat, 0.99) <= slo_ms && self.rate() >= 0.95 * rate
    }
}

/// Where and how the load goes.
struct Target {
    addr: SocketAddr,
    proto: Protocol,
    conns: u32,
    timeout: Duration,
}

/// Open-loop load at `rate` for `len`, all connections at once.
fn load(
    t: &Target,
    rate: f64,
    len: Duration,
    stop: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<Load> {
    let conns = (0..t.conns)
        .map(|_| Conn::open(t.addr, &t.proto, t.timeout))
        .collect::<anyhow::Result<Vec<Conn>>>()?;
    let clock = Monotonic;
    let n = conns.len() as u64;
    let begin = clock.now_ns() + 5_000_000;
    let end = begin + len.as_nanos() as u64;
    let stopped = || stop.load(std::sync::atomic::Ordering::Relaxed);
    let mut done: Vec<Done> = std::thread::scope(|s| {
        let handles: Vec<_> = conns
            .into_iter()
            .enumerate()
            .map(|(c, mut conn)| {
                let clock = &clock;
                let stopped = &stopped;
                s.spawn(move || {
                    let _slack = crate::probes::io_net::TightTimerSlack::new();
                    let mut reconnect = || -> Option<Box<dyn Exchange>> {
                        Conn::open(t.addr, &t.proto, t.timeout)
                            .ok()
                            .map(|c| Box::new(c) as Box<dyn Exchange>)
                    };
                    drive(
                        clock,
                        Slice {
                            start: begin,
                            end,
                            conn: c as u64,
                            conns: n,
                            rate,
                        },
                        &mut conn,
                        &mut reconnect,
                        stopped,
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    done.sort_by_key(|d| d.done_ns);
    Ok(Load { done, begin, end })
}

/// The calibration: the highest rate whose step met the SLO, and the steps as (rate, met).
fn calibrate(
    t: &Target,
    slo_ms: f64,
    budget: Duration,
    stop: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<(f64, Vec<(f64, bool)>)> {
    let t0 = Instant::now();
    let step = Duration::from_millis(900);
    let mut steps = Vec::new();
    let (mut good, mut bad): (Option<f64>, Option<f64>) = (None, None);
    let mut rate = 100.0;
    while t0.elapsed() + step + Duration::from_millis(100) <= budget {
        let l = load(t, rate, step, stop)?;
        let met = l.meets(rate, slo_ms);
        steps.push((rate, met));
        if met {
            good = Some(rate);
        } else {
            bad = Some(rate);
        }
        rate = match (good, bad) {
            (Some(g), None) => g * 2.0,
            (Some(g), Some(b)) if b > g => (g + b) / 2.0,
            (None, Some(b)) => b / 2.0,
            _ => rate,
        };
        if rate < 1.0 || good.zip(bad).is_some_and(|(g, b)| b - g < 0.02 * g) {
            break;
        }
        // Let the answers of the last step drain before the next.
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok((good.unwrap_or(0.0), steps))
}

/// The hold's metrics and, with a window, its series.
fn metrics(l: &Load, target: f64, max: f64, window: Option<Duration>) -> Vec<Metric> {
    let spec = |name: &str| crate::util::declared(METRICS, name);
    let lat = l.ok_latencies();
    let errors = l.done.iter().filter(|d| !d.ok).count() as f64;
    let mut rate = spec("rate_rps").value(l.rate());
    let mut p50 = spec("lat_p50_ms").value(quantile_ms(&lat, 0.5));
    let mut p99 = spec("lat_p99_ms").value(quantile_ms(&lat, 0.99));
    if let Some(w) = window.filter(|w| !w.is_zero()) {
        let tiles = tile(l.begin, l.end, w.as_nanos() as u64);
        let (mut rs, mut r50, mut r99) = (Vec::new(), Vec::new(), Vec::new());
        let mut at = 0;
        for (a, b) in tiles {
            let mut in_w: Vec<u64> = Vec::new();
            let mut count = 0usize;
            while at < l.done.len() && l.done[at].done_ns < b {
                if l.done[at].done_ns >= a && l.done[at].ok {
                    in_w.push(l.done[at].latency_ns);
                    count += 1;
                }
                at += 1;
            }
            in_w.sort_unstable();
            let secs = (b - a) as f64 / 1e9;
            let win = |value: f64| Window {
                start_ns: a,
                end_ns: b,
                value,
            };
            rs.push(win(count as f64 / secs));
            // A window with no answer has no latency; its tail is the wait so far.
            let empty = (b.saturating_sub(a) as f64) / 1e6;
            r50.push(win(if in_w.is_empty() {
                empty
            } else {
                quantile_ms(&in_w, 0.5)
            }));
            r99.push(win(if in_w.is_empty() {
                empty
            } else {
                quantile_ms(&in_w, 0.99)
            }));
        }
        rate = rate.with_series(rs);
        p50 = p50.with_series(r50);
        p99 = p99.with_series(r99);
    }
    vec![
        rate,
        spec("target_rps").value(target),
        spec("max_rps").value(max),
        p50,
        p99,
        spec("lat_p999_ms").value(quantile_ms(&lat, 0.999)),
        spec("errors").value(errors),
    ]
}

/// Waits until `addr` accepts a connection, for at most `limit`.
fn wait_listening(addr: SocketAddr, limit: Duration) -> anyhow::Result<()> {
    let t0 = Instant::now();
    loop {
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        if t0.elapsed() > limit {
            bail!(
                "service: the server started by server_cmd does not accept connections on \
                 {addr} after {:.0} s: fix server_cmd or port",
                limit.as_secs_f64()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Probe for Service {
    fn name(&self) -> &'static str {
        "service"
    }
    fn help(&self) -> &'static str {
        "A latency-sensitive service at a target request rate (rd-hashd's idea): isobench's \
         own server (requests hash a memory and file working set with a hot/cold skew, burn \
         CPU, optionally read the disk) or the user's (server_cmd/port, HTTP or a line \
         protocol such as Redis's), driven by an open-loop generator whose latencies run \
         from each request's due time. rate=0 calibrates the highest rate within slo_ms and \
         holds share of it. Windows give rate and p50/p99 per window."
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
        Ok(())
    }
    fn windowed(&self) -> bool {
        true
    }
    fn memory_need(&self, params: &ParamValues, _llc: u64) -> u64 {
        params
            .decode::<Opts>(self.name())
            .map_or(0, |o| if o.port == 0 { o.mem } else { 0 })
    }

    fn run(&self, ctx: &ProbeCtx, params: &ParamValues) -> anyhow::Result<Vec<Metric>> {
        let o: Opts = params.decode(self.name())?;
        let request = o.request.clone().unwrap_or_default();
        let server_cmd = o.server_cmd.clone().unwrap_or_default();
        let started = Instant::now();
        let mut own = None;
        let mut user = None;
        let addr: SocketAddr = if o.port == 0 {
            if !server_cmd.is_empty() {
                bail!("service: server_cmd needs the port its server listens on: set port");
            }
            let s = server::Server::start(server::Work {
                mem: o.mem as usize,
                file: o.file,
                touch: o.touch as usize,
                hot_pct: o.hot_pct,
                hot_share: o.hot_share,
                cpu_us: o.cpu_us,
                io_reads: o.io_reads,
                dir: ctx.workdir.clone(),
            })?;
            let a = s.addr();
            own = Some(s);
            a
        } else {
            let a = crate::probes::io_net::resolve(&o.addr, o.port)?;
            if !server_cmd.is_empty() {
                let argv = crate::program::split_command("server_cmd", &server_cmd)?;
                let r = crate::program::Running::start(
                    "server_cmd",
                    crate::program::Launch {
                        argv: &argv,
                        workdir: &ctx.workdir,
                        cpu: ctx.pin_peer,
                        keep_all: None,
                        on_line: None,
                    },
                )?;
                user = Some(r);
                wait_listening(a, Duration::from_secs(10))?;
            }
            a
        };
        if own.is_some() && o.protocol == "http" {
            bail!("service: isobench's own server speaks protocol=line; protocol=http needs port");
        }
        let proto = match o.protocol.as_str() {
            "http" => Protocol::Http {
                path: if request.is_empty() {
                    "/".into()
                } else {
                    request.clone()
                },
            },
            _ => Protocol::Line {
                request: if request.is_empty() {
                    "HASH".into()
                } else {
                    request.clone()
                },
            },
        };
        let t = Target {
            addr,
            proto,
            conns: o.connections,
            timeout: Duration::from_millis(o.timeout_ms),
        };
        let result = (|| -> anyhow::Result<Vec<Metric>> {
            let (target, max) = if o.rate == 0 {
                let budget = Duration::from_secs_f64(o.calibrate_s);
                let (max, steps) = calibrate(&t, o.slo_ms, budget, &ctx.stop)?;
                // Hold from the end of the calibration's budget, so the caller knows when.
                let left = budget.saturating_sub(started.elapsed());
                std::thread::sleep(left);
                let target = if max > 0.0 {
                    max * o.share
                } else {
                    // Not even the lowest rate met the SLO: hold the lowest tried.
                    steps
                        .iter()
                        .map(|s| s.0)
                        .fold(f64::INFINITY, f64::min)
                        .max(1.0)
                        * o.share
                };
                (target, max)
            } else {
                (o.rate as f64, 0.0)
            };
            let hold = match o.duration {
                Some(d) => Duration::from_secs_f64(d),
                None => ctx
                    .budget
                    .saturating_sub(started.elapsed())
                    .max(Duration::from_millis(200)),
            };
            let l =
                load(&t, target, hold, &ctx.stop).with_context(|| format!("service at {addr}"))?;
            Ok(metrics(&l, target, max, ctx.window))
        })();
        if let Some(s) = own {
            s.stop();
        }
        if let Some(r) = user {
            let f = r.finish(&|| true, None, libc::SIGTERM, Duration::from_secs(2));
            if result.is_err() {
                return result.with_context(|| {
                    format!("the server's stderr ends with:\n{}", f.stderr_tail())
                });
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(budget: Duration, window: Option<Duration>) -> ProbeCtx {
        let mut c = ProbeCtx::detect();
        c.budget = budget;
        c.window = window;
        c.workdir = std::env::temp_dir();
        c
    }

    fn get<'a>(m: &'a [Metric], name: &str) -> &'a Metric {
        m.iter().find(|x| x.name == name).unwrap()
    }

    #[test]
    fn the_own_service_holds_a_given_rate_and_gives_windows() {
        let p = ParamValues::from_settings(
            "service",
            PARAMS,
            &["rate=400", "mem=8M", "file=4M", "io_reads=1", "cpu_us=50"],
        )
        .unwrap();
        let m = Service
            .run(
                &ctx(
                    Duration::from_millis(1500),
                    Some(Duration::from_millis(500)),
                ),
                &p,
            )
            .unwrap();
        assert_eq!(get(&m, "target_rps").value, 400.0);
        assert_eq!(get(&m, "max_rps").value, 0.0);
        let rate = get(&m, "rate_rps");
        assert!(rate.value > 200.0, "{}", rate.value);
        let p99 = get(&m, "lat_p99_ms");
        assert!(p99.value > 0.0 && p99.value.is_finite());
        assert!(get(&m, "lat_p50_ms").value <= p99.value);
        let rs = rate.series.as_ref().unwrap();
        let ps = p99.series.as_ref().unwrap();
        assert_eq!(rs.len(), 3);
        assert_eq!(rs.len(), ps.len());
        assert!(rs.windows(2).all(|w| w[0].end_ns == w[1].start_ns));
        assert_eq!(get(&m, "errors").value, 0.0);
    }

    #[test]
    fn calibration_finds_a_rate_and_holds_its_share() {
        let p = ParamValues::from_settings(
            "service",
            PARAMS,
            &[
                "rate=0",
                "calibrate_s=3",
                "share=0.5",
                "mem=4M",
                "slo_ms=50",
            ],
        )
        .unwrap();
        let m = Service
            .run(&ctx(Duration::from_millis(3600), None), &p)
            .unwrap();
        // How high depends on the machine's speed at the time; that it found one does not.
        let max = get(&m, "max_rps").value;
        assert!(max > 0.0, "{max}");
        assert!((get(&m, "target_rps").value - max * 0.5).abs() < 1e-6);
    }

    /// A server on a loopback port chosen by the kernel, `serve` run on each connection (its
    /// reading and writing halves) in a thread of its own; returns the port.
    fn serve_on_loopback(
        serve: fn(std::io::BufReader<std::net::TcpStream>, std::net::TcpStream),
    ) -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let w = s.try_clone().unwrap();
                std::thread::spawn(move || serve(std::io::BufReader::new(s), w));
            }
        });
        port
    }

    #[test]
    fn a_line_server_of_the_users_is_driven_and_its_replies_read() {
        // A Redis-like server: PING -> +PONG, GET -> a bulk string.
        let port = serve_on_loopback(|mut r, mut w| {
            use std::io::{BufRead, Write};
            let mut line = String::new();
            while r.read_line(&mut line).unwrap_or(0) > 0 {
                let reply: &[u8] = if line.starts_with("GET") {
                    b"$5\r\nhello\r\n"
                } else {
                    b"+PONG\r\n"
                };
                if w.write_all(reply).is_err() {
                    return;
                }
                line.clear();
            }
        });
        for req in ["PING", "GET k"] {
            let p = ParamValues::from_settings(
                "service",
                PARAMS,
                &[
                    &format!("port={port}"),
                    "rate=300",
                    &format!("request={req}"),
                    "connections=4",
                ],
            )
            .unwrap();
            let m = Service
                .run(&ctx(Duration::from_millis(600), None), &p)
                .unwrap();
            assert_eq!(get(&m, "errors").value, 0.0, "{req}");
            assert!(get(&m, "rate_rps").value > 150.0, "{req}");
        }
    }

    #[test]
    fn an_http_server_that_closes_after_each_answer_is_connected_to_again() {
        // As BusyBox's httpd does: `Connection: close` on every answer, then the close; a
        // missing file is a 404.
        let port = serve_on_loopback(|mut r, mut w| {
            use std::io::{BufRead, Write};
            let mut first = String::new();
            if r.read_line(&mut first).unwrap_or(0) == 0 {
                return;
            }
            let mut line = String::new();
            while r.read_line(&mut line).unwrap_or(0) > 2 {
                line.clear();
            }
            let answer = if first.starts_with("GET /here ") {
                "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 3\r\n\r\nok\n"
            } else {
                "HTTP/1.0 404 Not Found\r\n\r\nno such file\n"
            };
            let _ = w.write_all(answer.as_bytes());
        });
        let run = |path: &str| {
            let p = ParamValues::from_settings(
                "service",
                PARAMS,
                &[
                    &format!("port={port}"),
                    "protocol=http",
                    "rate=200",
                    &format!("request={path}"),
                    "connections=2",
                ],
            )
            .unwrap();
            Service
                .run(&ctx(Duration::from_millis(600), None), &p)
                .unwrap()
        };
        let m = run("/here");
        assert_eq!(get(&m, "errors").value, 0.0);
        assert!(
            get(&m, "rate_rps").value > 100.0,
            "{}",
            get(&m, "rate_rps").value
        );
        // Every answer to a path the server lacks is an error, each on a new connection.
        let m = run("/gone");
        assert_eq!(get(&m, "rate_rps").value, 0.0);
        assert!(
            get(&m, "errors").value > 50.0,
            "{}",
            get(&m, "errors").value
        );
    }

    #[test]
    fn closing_answers_are_told_from_keep_alive_ones() {
        use super::loadgen::closes_after;
        assert!(closes_after("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"));
        assert!(closes_after(
            "HTTP/1.1 200 OK\r\nconnection: Keep-Alive, Close\r\n\r\n"
        ));
        assert!(closes_after("HTTP/1.0 200 OK\r\n\r\n"));
        assert!(!closes_after(
            "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n"
        ));
        assert!(!closes_after(
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
        ));
    }

    #[test]
    fn a_server_that_is_not_there_is_named() {
        let p = ParamValues::from_settings("service", PARAMS, &["port=1", "rate=10"]).unwrap();
        let e = Service
            .run(&ctx(Duration::from_millis(300), None), &p)
            .unwrap_err();
        assert!(format!("{e:#}").contains("127.0.0.1:1"), "{e:#}");
    }

    #[test]
    fn a_quantile_is_a_nearest_rank() {
        let v: Vec<u64> = (1..=100).map(|x| x * 1_000_000).collect();
        assert_eq!(quantile_ms(&v, 0.99), 99.0);
        assert_eq!(quantile_ms(&v, 0.5), 50.0);
        assert!(quantile_ms(&[], 0.5).is_nan());
    }
}
