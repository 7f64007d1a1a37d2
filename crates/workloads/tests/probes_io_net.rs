//! Integration tests of the disk and network probes (`disk-io`, `net-throughput`, `net-rtt`,
//! `http`, `relay-ring`) and of `netserve`.
//!
//! Each probe runs briefly with small parameters on loopback or a temporary directory on
//! disk (not tmpfs: O_DIRECT needs a real filesystem) and must return sane values. Nothing
//! here asserts speed: the machine is shared and noisy.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use isobench_workloads::netserve::{self, ServerKind};
use isobench_workloads::{probe, Metric, ParamValues, ProbeCtx};

fn ctx(budget_ms: u64) -> ProbeCtx {
    let mut c = ProbeCtx::detect();
    c.budget = Duration::from_millis(budget_ms);
    c
}

fn run(name: &str, ctx: &ProbeCtx, settings: &[&str]) -> anyhow::Result<BTreeMap<String, Metric>> {
    let p = probe(name).unwrap_or_else(|| panic!("probe {name} is registered"));
    p.supported(&ctx.env)
        .unwrap_or_else(|u| panic!("{name} unsupported here: {u}"));
    let values = ParamValues::from_settings(name, p.params(), settings)?;
    let ms = p.run(ctx, &values)?;
    let declared: Vec<&str> = p.metrics().iter().map(|m| m.name).collect();
    let mut out = BTreeMap::new();
    for m in ms {
        assert!(
            declared.contains(&m.name.as_str()),
            "{name} returned undeclared metric {}",
            m.name
        );
        assert!(m.value.is_finite(), "{name}: {} = {}", m.name, m.value);
        assert!(m.value >= 0.0, "{name}: {} = {}", m.name, m.value);
        assert!(
            out.insert(m.name.clone(), m).is_none(),
            "{name}: duplicate metric"
        );
    }
    Ok(out)
}

fn v(ms: &BTreeMap<String, Metric>, name: &str) -> f64 {
    ms.get(name)
        .unwrap_or_else(|| panic!("metric {name} missing; have {:?}", ms.keys()))
        .value
}

/// mean/p50/p99/p999/max of one latency prefix are ordered and the histogram rides along.
fn assert_latency(ms: &BTreeMap<String, Metric>, prefix: &str, unit: &str) {
    let g = |s: &str| v(ms, &format!("{prefix}_{s}_{unit}"));
    assert!(g("p50") > 0.0, "{prefix} p50");
    assert!(g("p50") <= g("p99"), "{prefix}: p50 <= p99");
    assert!(g("p99") <= g("p999"), "{prefix}: p99 <= p999");
    assert!(g("p999") <= g("max"), "{prefix}: p999 <= max");
    assert!(g("mean") <= g("max"), "{prefix}: mean <= max");
    let h = ms[&format!("{prefix}_p50_{unit}")]
        .histogram
        .as_ref()
        .expect("histogram on p50");
    assert!(!h.is_empty());
}

fn lo() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

// ---------------------------------------------------------------------------------------
// net-rtt

#[test]
fn net_rtt_both_protocols_on_loopback() {
    let c = ctx(400);
    let ms = run("net-rtt", &c, &["count=300", "warmup=20"]).unwrap();
    // Without the isobench binary the own servers are threads of this process, and say so.
    let servers = c.take_own_servers();
    let kinds: Vec<&str> = servers.iter().map(|s| s.kind.as_str()).collect();
    assert_eq!(kinds, ["udp-echo", "tcp-echo"]);
    assert!(servers
        .iter()
        .all(|s| !s.separate_process && s.pid == std::process::id()));
    assert_latency(&ms, "udp_rtt", "ns");
    assert_latency(&ms, "tcp_rtt", "ns");
    assert!(v(&ms, "udp_rate_pps") > 0.0);
    assert!(v(&ms, "tcp_rate_pps") > 0.0);
    let lost = v(&ms, "udp_lost_pct");
    assert!((0.0..=100.0).contains(&lost));
    let h = ms["udp_rtt_p50_ns"].histogram.as_ref().unwrap();
    assert_eq!(h.len(), 300, "count=300 round trips timed");
}

#[test]
fn net_rtt_open_loop_keeps_the_schedule() {
    // 2000/s for 0.1 s: about 200 messages, never more than the schedule allows.
    let ms = run(
        "net-rtt",
        &ctx(400),
        &["proto=udp", "rate=2000", "duration=0.1", "warmup=10"],
    )
    .unwrap();
    assert_latency(&ms, "udp_rtt", "ns");
    let n = ms["udp_rtt_p50_ns"].histogram.as_ref().unwrap().len();
    assert!((1..=201).contains(&n), "{n} messages in 0.1 s at 2000/s");
}

#[test]
fn net_rtt_against_external_echo_servers() {
    let stop = Arc::new(AtomicBool::new(false));
    let udp = netserve::start_server(ServerKind::UdpEcho, lo(), stop.clone()).unwrap();
    let tcp = netserve::start_server(ServerKind::TcpEcho, lo(), stop.clone()).unwrap();
    for (proto, h) in [("udp", &udp), ("tcp", &tcp)] {
        let port = format!("port={}", h.local_addr().port());
        let ms = run(
            "net-rtt",
            &ctx(200),
            &[&format!("proto={proto}"), &port, "count=100"],
        )
        .unwrap();
        assert_latency(&ms, &format!("{proto}_rtt"), "ns");
    }
    let st = udp.stop().unwrap();
    assert!(st.datagrams >= 100, "the external server did the echoing");
    assert!(tcp.stop().unwrap().connections >= 1);
}

#[test]
fn net_rtt_dead_peer_is_an_error_not_a_hang() {
    // Bind a TCP port and close it again: nothing listens there afterwards.
    let port = std::net::TcpListener::bind(lo())
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let t0 = std::time::Instant::now();
    let e = run(
        "net-rtt",
        &ctx(200),
        &["proto=tcp", &format!("port={port}"), "timeout_ms=200"],
    )
    .unwrap_err();
    assert!(format!("{e:#}").contains("connect"), "{e:#}");
    let udp = std::net::UdpSocket::bind(lo()).unwrap();
    let port = udp.local_addr().unwrap().port(); // bound but never answers
    let e = run(
        "net-rtt",
        &ctx(200),
        &["proto=udp", &format!("port={port}"), "timeout_ms=50"],
    )
    .unwrap_err();
    assert!(format!("{e:#}").contains("no echo"), "{e:#}");
    assert!(t0.elapsed() < Duration::from_secs(10));
}

// ---------------------------------------------------------------------------------------
// disk-io

/// A temporary directory on disk (the target dir), never tmpfs.
fn disk_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir in the target dir")
}

fn isobench_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("isobench-"))
        .collect()
}

#[test]
fn disk_io_writes_the_bytes_it_says_and_removes_its_file() {
    let d = disk_dir();
    let dir = format!("dir={}", d.path().display());
    let ms = run(
        "disk-io",
        &ctx(500),
        &["ops=write", "blocks=64", "block_size=8K", &dir],
    )
    .unwrap();
    assert_eq!(v(&ms, "bytes_written"), (64 * 8192) as f64);
    assert_eq!(
        v(&ms, "file_bytes"),
        (64 * 8192) as f64,
        "the filesystem agrees"
    );
    assert!(v(&ms, "write_mbps") > 0.0);
    assert_latency(&ms, "write_lat", "us");
    assert_eq!(
        ms["write_lat_p50_us"].histogram.as_ref().unwrap().len(),
        64,
        "one latency per request"
    );
    assert!(
        ms.keys().all(|k| !k.starts_with("read")),
        "only the asked op ran"
    );
    assert!(isobench_files(d.path()).is_empty(), "file left behind");
}

#[test]
fn disk_io_all_ops_report_sane_values() {
    let d = disk_dir();
    let dir = format!("dir={}", d.path().display());
    let ms = run(
        "disk-io",
        &ctx(500),
        &["blocks=256", "block_size=16K", "sync_blocks=8", &dir],
    )
    .unwrap();
    for op in [
        "write",
        "rewrite",
        "read",
        "reread",
        "dioread",
        "diowrite",
        "randread",
        "fsyncwrite",
    ] {
        assert!(v(&ms, &format!("{op}_mbps")) > 0.0, "{op}");
        assert_latency(&ms, &format!("{op}_lat"), "us");
    }
    let bs = 16384.0;
    // write + rewrite + diowrite of every block, fsyncwrite of 8.
    assert_eq!(v(&ms, "bytes_written"), 3.0 * 256.0 * bs + 8.0 * bs);
    assert_eq!(v(&ms, "file_bytes"), 256.0 * bs);
    assert!(isobench_files(d.path()).is_empty(), "file left behind");
}

#[test]
fn disk_io_read_alone_fills_the_file_first() {
    let d = disk_dir();
    let dir = format!("dir={}", d.path().display());
    let ms = run(
        "disk-io",
        &ctx(500),
        &["ops=read,randread", "blocks=32", &dir],
    )
    .unwrap();
    assert_eq!(
        v(&ms, "bytes_written"),
        (32 * 8192) as f64,
        "the untimed fill"
    );
    assert!(v(&ms, "read_mbps") > 0.0 && v(&ms, "randread_mbps") > 0.0);
    assert!(!ms.contains_key("write_mbps"));
    assert!(isobench_files(d.path()).is_empty());
}

#[test]
fn disk_io_removes_its_file_on_error_and_stop() {
    let d = disk_dir();
    let dir = format!("dir={}", d.path().display());
    let c = ctx(500);
    c.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let e = run("disk-io", &c, &["blocks=512", &dir]).unwrap_err();
    assert!(format!("{e:#}").contains("stopped"), "{e:#}");
    assert!(
        isobench_files(d.path()).is_empty(),
        "file left behind after stop"
    );
}

#[test]
fn disk_io_explains_bad_inputs() {
    let d = disk_dir();
    let dir = format!("dir={}", d.path().display());
    let e = run("disk-io", &ctx(200), &["ops=dioreed", &dir]).unwrap_err();
    assert!(e.to_string().contains("did you mean `dioread`"), "{e}");
    let e = run("disk-io", &ctx(200), &["block_size=6K", &dir]).unwrap_err();
    assert!(e.to_string().contains("multiple of 4K"), "{e}");
    let e = run("disk-io", &ctx(200), &["dir=/nonexistent/isobench"]).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/isobench"), "{e}");
    if Path::new("/dev/shm").is_dir() {
        if let Err(e) = run("disk-io", &ctx(200), &["dir=/dev/shm", "blocks=4"]) {
            assert!(e.to_string().contains("dir="), "{e}");
        }
    }
    assert!(isobench_files(d.path()).is_empty());
}

// ---------------------------------------------------------------------------------------
// net-throughput

#[test]
fn net_throughput_tcp_and_udp_on_loopback() {
    let ms = run("net-throughput", &ctx(300), &["duration=0.15"]).unwrap();
    assert!(v(&ms, "tcp_mbps") > 0.0);
    assert!(v(&ms, "udp_mbps") > 0.0);
    assert!(v(&ms, "udp_send_mbps") >= v(&ms, "udp_mbps"));
    assert!((0.0..=100.0).contains(&v(&ms, "udp_loss_pct")));
}

#[test]
fn net_throughput_parallel_streams_and_paced_udp() {
    let ms = run(
        "net-throughput",
        &ctx(300),
        &["proto=tcp", "streams=3", "msg_size=16K", "duration=0.1"],
    )
    .unwrap();
    assert!(v(&ms, "tcp_mbps") > 0.0);
    // 20 Mbit/s of 1000-byte datagrams for 0.2 s: the offered rate is the pace.
    let ms = run(
        "net-throughput",
        &ctx(300),
        &["proto=udp", "rate_mbps=20", "msg_size=1000", "duration=0.2"],
    )
    .unwrap();
    let sent = v(&ms, "udp_send_mbps");
    assert!(
        sent > 0.0 && sent < 30.0,
        "paced at 20 Mbit/s, offered {sent}"
    );
}

#[test]
fn net_throughput_against_external_sinks() {
    let stop = Arc::new(AtomicBool::new(false));
    let tcp = netserve::start_server(ServerKind::TcpSink, lo(), stop.clone()).unwrap();
    let udp = netserve::start_server(ServerKind::UdpSink, lo(), stop.clone()).unwrap();
    let ms = run(
        "net-throughput",
        &ctx(200),
        &[
            "proto=tcp",
            &format!("port={}", tcp.local_addr().port()),
            "duration=0.1",
        ],
    )
    .unwrap();
    assert!(v(&ms, "tcp_mbps") > 0.0);
    let ms = run(
        "net-throughput",
        &ctx(200),
        &[
            "proto=udp",
            &format!("port={}", udp.local_addr().port()),
            "duration=0.1",
        ],
    )
    .unwrap();
    assert!(v(&ms, "udp_mbps") > 0.0);
    assert!(tcp.stop().unwrap().bytes_in > 0);
    assert!(udp.stop().unwrap().datagrams > 0);
}

#[test]
fn net_throughput_rejects_udp_datagrams_that_cannot_exist() {
    let e = run("net-throughput", &ctx(200), &["proto=udp", "msg_size=128K"]).unwrap_err();
    assert!(e.to_string().contains("65507"), "{e}");
}

// ---------------------------------------------------------------------------------------
// http

#[test]
fn http_good_rate_and_latencies_on_loopback() {
    let ms = run(
        "http",
        &ctx(300),
        &["rate=400", "duration=0.25", "connections=2", "body=1K"],
    )
    .unwrap();
    let good = v(&ms, "good_pct");
    assert!((0.0..=100.0).contains(&good), "good_pct {good}");
    assert_latency(&ms, "req_lat", "us");
    assert!(v(&ms, "rps") > 0.0);
    assert_eq!(v(&ms, "errors"), 0.0);
    let n = ms["req_lat_p50_us"].histogram.as_ref().unwrap().len();
    assert!((1..=100).contains(&n), "{n} responses for 400/s x 0.25 s");
}

#[test]
fn http_impossible_threshold_gives_zero_good() {
    // 1 us: no HTTP response over TCP is that fast.
    let ms = run(
        "http",
        &ctx(300),
        &["rate=200", "duration=0.1", "good_ms=0.001"],
    )
    .unwrap();
    assert_eq!(v(&ms, "good_pct"), 0.0);
}

#[test]
fn http_against_an_external_server() {
    let h = netserve::start_server(ServerKind::Http { body: 100 }, lo(), Arc::default()).unwrap();
    let port = format!("port={}", h.local_addr().port());
    let ms = run(
        "http",
        &ctx(300),
        &[&port, "rate=300", "duration=0.2", "body=2K"],
    )
    .unwrap();
    assert!((0.0..=100.0).contains(&v(&ms, "good_pct")));
    let st = h.stop().unwrap();
    assert!(st.requests > 0);
    assert!(st.bytes_out > st.requests * 2048, "GET /2048 was honoured");
    // A path the server does not have: every response is an error status.
    let h = netserve::start_server(ServerKind::Http { body: 100 }, lo(), Arc::default()).unwrap();
    let port = format!("port={}", h.local_addr().port());
    let e = run(
        "http",
        &ctx(300),
        &[&port, "path=/missing", "rate=100", "duration=0.05"],
    )
    .unwrap_err();
    assert!(format!("{e:#}").contains("status 404"), "{e:#}");
}

// ---------------------------------------------------------------------------------------
// relay-ring

#[test]
fn relay_ring_network_is_slower_than_the_null_tests() {
    let c = ctx(2000);
    let small = ["runs=3", "iterations=200"];
    let net = run("relay-ring", &c, &[small[0], small[1], "variant=network"]).unwrap();
    let wr = run("relay-ring", &c, &[small[0], small[1], "variant=write"]).unwrap();
    let none = run("relay-ring", &c, &[small[0], small[1], "variant=nosyscall"]).unwrap();
    for ms in [&net, &wr, &none] {
        assert_latency(ms, "iter", "ns");
        assert_eq!(v(ms, "iterations"), 600.0);
        assert!(v(ms, "iter_min_ns") <= v(ms, "iter_p50_ns"));
        assert!(v(ms, "run_mean_cv_pct") >= 0.0);
    }
    assert!(
        v(&net, "iter_p50_ns") > v(&none, "iter_p50_ns"),
        "three TCP hops take longer than no system call"
    );
    assert!(v(&net, "iter_min_ns") > v(&wr, "iter_min_ns"));
}

#[test]
fn relay_ring_one_hop_relays_to_itself() {
    let ms = run(
        "relay-ring",
        &ctx(1000),
        &["hops=1", "runs=2", "iterations=50"],
    )
    .unwrap();
    assert_eq!(v(&ms, "iterations"), 100.0);
}

#[test]
fn relay_ring_raw_keeps_every_iteration_inside_its_run() {
    for variant in ["network", "write", "nosyscall"] {
        let ms = run(
            "relay-ring",
            &ctx(1000),
            &[
                "hops=2",
                "runs=3",
                "iterations=40",
                "raw=true",
                &format!("variant={variant}"),
            ],
        )
        .unwrap();
        let series = |name: &str| {
            ms.get(name)
                .and_then(|m| m.series.clone())
                .unwrap_or_else(|| panic!("{variant}: no series for {name}"))
        };
        let iters = series("iter_ns");
        let runs = series("run_mean_ns");
        assert_eq!(iters.len(), 120, "{variant}");
        assert_eq!(runs.len(), 3, "{variant}");
        for (r, run) in runs.iter().enumerate() {
            let inside: Vec<f64> = iters
                .iter()
                .filter(|w| w.start_ns >= run.start_ns && w.end_ns <= run.end_ns)
                .map(|w| w.value)
                .collect();
            assert_eq!(inside.len(), 40, "{variant}: run {r}");
            let mean = inside.iter().sum::<f64>() / 40.0;
            assert!(
                (mean - run.value).abs() <= 1e-6 * mean.max(1.0),
                "{variant}"
            );
        }
    }
    // Without raw, no series.
    let ms = run(
        "relay-ring",
        &ctx(1000),
        &["hops=1", "runs=1", "iterations=5"],
    )
    .unwrap();
    assert!(ms.values().all(|m| m.series.is_none()));
}

#[test]
fn relay_ring_through_external_forwarders() {
    // The master's return port must be known before the forwarders start.
    let back = std::net::TcpListener::bind(lo())
        .unwrap()
        .local_addr()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let f2 = netserve::start_server(
        ServerKind::RelayForwarder { next: back },
        lo(),
        stop.clone(),
    )
    .unwrap();
    let f1 = netserve::start_server(
        ServerKind::RelayForwarder {
            next: f2.local_addr(),
        },
        lo(),
        stop.clone(),
    )
    .unwrap();
    let ms = run(
        "relay-ring",
        &ctx(1000),
        &[
            &format!("first_hop={}", f1.local_addr()),
            &format!("listen={back}"),
            "runs=2",
            "iterations=100",
        ],
    )
    .unwrap();
    assert_eq!(v(&ms, "iterations"), 200.0);
    assert!(
        f1.stop().unwrap().connections >= 2,
        "one connection per run"
    );
    assert!(f2.stop().unwrap().bytes_in >= 200 * 8);
}

#[test]
fn relay_ring_broken_ring_is_an_error_not_a_hang() {
    let dead = std::net::TcpListener::bind(lo())
        .unwrap()
        .local_addr()
        .unwrap();
    let t0 = std::time::Instant::now();
    let e = run(
        "relay-ring",
        &ctx(500),
        &[&format!("first_hop={dead}"), "timeout_ms=300", "runs=1"],
    )
    .unwrap_err();
    assert!(format!("{e:#}").contains("first hop"), "{e:#}");
    assert!(t0.elapsed() < Duration::from_secs(10));
}

// ---------------------------------------------------------------------------------------
// registry and netserve

#[test]
fn io_net_probes_are_registered_and_supported_here() {
    let c = ctx(100);
    for name in ["disk-io", "net-throughput", "net-rtt", "http", "relay-ring"] {
        let p = probe(name).unwrap();
        assert!(!p.help().contains("being written"), "{name}");
        assert!(!p.metrics().is_empty());
        ParamValues::defaults(name, p.params())
            .decode::<serde_json::Value>(name)
            .unwrap();
        // The work dir of tests is the crate dir, on disk.
        p.supported(&c.env)
            .unwrap_or_else(|u| panic!("{name}: {u}"));
    }
}

#[test]
fn netserve_servers_stop_and_release_their_ports() {
    for kind in [
        ServerKind::UdpEcho,
        ServerKind::TcpEcho,
        ServerKind::TcpSink,
        ServerKind::UdpSink,
        ServerKind::Http { body: 10 },
    ] {
        let h = netserve::start_server(kind.clone(), lo(), Arc::default()).unwrap();
        let addr = h.local_addr();
        assert!(h.is_running());
        h.stop().unwrap();
        // The port is free again: bind it ourselves.
        if kind.is_udp() {
            std::net::UdpSocket::bind(addr).unwrap();
        } else {
            std::net::TcpListener::bind(addr).unwrap();
        }
    }
}
