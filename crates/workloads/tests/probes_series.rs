//! With a window length, windowed probes return their main metrics as window series: this
//! runs each one for real, briefly (budget ~400 ms, 20 ms windows), and checks the series
//! exists, is in time order, tiles its interval without gaps or overlaps, has a plausible
//! number of windows and agrees with the metric's own value (a rate is the mean of its equal
//! windows; a median or a rate over the run lies within the range of its windows' values).
//! Behavioural and generous: the machine is shared and its speed drifts.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use isobench_workloads::{probe, Metric, ParamValues, ProbeCtx};

/// Probes are timed; running two at once would only add noise to both.
static SERIAL: Mutex<()> = Mutex::new(());

const WINDOW_MS: u64 = 20;
const BUDGET_MS: u64 = 400;

fn ctx(window: Option<u64>) -> ProbeCtx {
    let mut c = ProbeCtx::detect();
    c.budget = Duration::from_millis(BUDGET_MS);
    c.window = window.map(Duration::from_millis);
    c.pin = c.env.cpus.first().copied();
    c
}

fn run(name: &str, settings: &[&str], window: Option<u64>) -> BTreeMap<String, Metric> {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let p = probe(name).unwrap_or_else(|| panic!("probe {name} is registered"));
    assert!(p.windowed(), "{name} says it is windowed");
    let c = ctx(window);
    if let Err(u) = p.supported(&c.env) {
        panic!("{name} unsupported here: {u}");
    }
    let values = ParamValues::from_settings(name, p.params(), settings).unwrap();
    let ms = p
        .run(&c, &values)
        .unwrap_or_else(|e| panic!("{name}: {e:#}"));
    ms.into_iter().map(|m| (m.name.clone(), m)).collect()
}

/// Checks `metric`'s series: present, time-ordered, tiling, covering at least 60% of the
/// `budget_ms / parts` it ran for, with a plausible window count, and the metric's value
/// within the range of the window values (a median of all events, or a rate over the run).
fn check_series(ms: &BTreeMap<String, Metric>, metric: &str, parts: u64) {
    check_series_by(ms, metric, parts, Some(false))
}

/// Like [`check_series`] for a mean latency, without the closeness check: windows hold
/// different numbers of events (an open-loop backlog drains in a burst), so the plain mean
/// of window means need not be near the mean of all events on a busy machine.
fn check_series_shape(ms: &BTreeMap<String, Metric>, metric: &str, parts: u64) {
    check_series_by(ms, metric, parts, None)
}

/// Like [`check_series`] for a rate over the whole time (bytes / seconds): equal windows
/// tiling the interval average to it.
fn check_series_mean(ms: &BTreeMap<String, Metric>, metric: &str, parts: u64) {
    check_series_by(ms, metric, parts, Some(true))
}

fn check_series_by(ms: &BTreeMap<String, Metric>, metric: &str, parts: u64, by_mean: Option<bool>) {
    let m = ms
        .get(metric)
        .unwrap_or_else(|| panic!("metric {metric} missing; have {:?}", ms.keys()));
    let s = m
        .series
        .as_ref()
        .unwrap_or_else(|| panic!("{metric}: no series"));
    assert!(!s.is_empty(), "{metric}: empty series");
    for w in s {
        assert!(w.start_ns < w.end_ns, "{metric}: {w:?}");
        assert!(w.value.is_finite() && w.value >= 0.0, "{metric}: {w:?}");
    }
    for p in s.windows(2) {
        assert_eq!(p[0].end_ns, p[1].start_ns, "{metric}: gap or overlap {p:?}");
    }
    let span_ms = (s[s.len() - 1].end_ns - s[0].start_ns) as f64 / 1e6;
    let share = BUDGET_MS as f64 / parts as f64;
    assert!(
        span_ms >= 0.6 * share,
        "{metric}: series spans {span_ms:.0} ms of a {share:.0} ms share"
    );
    let full = span_ms / WINDOW_MS as f64;
    let n = s.len() as f64;
    // Rate series tile the time exactly; latency windows with fewer than a handful of events
    // are merged into their neighbours, which a slow moment of a shared machine can do to
    // most of them (the merge rule has its own tests), so only the upper bound holds there.
    let fewest = if by_mean == Some(true) {
        (full / 3.0).floor().max(1.0)
    } else {
        1.0
    };
    assert!(
        n <= full.round() + 1.0 && n >= fewest,
        "{metric}: {n} windows over {span_ms:.0} ms"
    );
    let Some(by_mean) = by_mean else {
        return;
    };
    let mut vals: Vec<f64> = s.iter().map(|w| w.value).collect();
    if by_mean {
        // Equal windows of a rate average to the rate over the whole time.
        let mean = vals.iter().sum::<f64>() / n;
        let rel = (mean - m.value).abs() / m.value;
        assert!(
            rel < 0.3,
            "{metric}: mean of windows {mean} vs value {} ({:.0}% off)",
            m.value,
            rel * 100.0
        );
    } else {
        // The median of all events lies between the smallest and the largest window median
        // (were every window's median above it, more than half of the events would be). How
        // close it is to the median of the window medians depends on how many events each
        // window holds, which a busy moment changes, so that is not asserted.
        vals.sort_by(f64::total_cmp);
        let (lo, hi) = (vals[0], vals[vals.len() - 1]);
        // Slack for histogram quantiles (3 significant digits) and a merged last window.
        let slack = 0.02 * m.value.abs();
        assert!(
            lo - slack <= m.value && m.value <= hi + slack,
            "{metric}: value {} outside the window medians [{lo}, {hi}]",
            m.value
        );
    }
}

fn no_series(ms: &BTreeMap<String, Metric>) {
    for m in ms.values() {
        assert!(
            m.series.is_none(),
            "{} has a series without a window",
            m.name
        );
    }
}

#[test]
fn cpu_int_series() {
    let ms = run("cpu-int", &[], Some(WINDOW_MS));
    check_series(&ms, "ops_per_sec", 1);
    check_series(&ms, "ops_per_sec_per_thread", 1);
    no_series(&run("cpu-int", &[], None));
}

#[test]
fn cpu_float_series() {
    let ms = run("cpu-float", &[], Some(WINDOW_MS));
    check_series(&ms, "mflops", 1);
}

#[test]
fn mem_bandwidth_series() {
    let ms = run("mem-bandwidth", &["op=copy", "size=8M"], Some(WINDOW_MS));
    check_series(&ms, "copy_gbps", 1);
    no_series(&run("mem-bandwidth", &["op=read", "size=8M"], None));
}

#[test]
fn fork_latency_series() {
    let ms = run("fork-latency", &["mode=fork"], Some(WINDOW_MS));
    check_series(&ms, "fork_p50_ns", 1);
    check_series_shape(&ms, "fork_mean_ns", 1);
    // A few hundred forks in 20 ms windows are far too few for a per-window p99.
    assert!(ms["fork_p99_ns"].series.is_none());
    no_series(&run("fork-latency", &["mode=fork"], None));
}

#[test]
fn net_rtt_series_open_loop() {
    for proto in ["udp", "tcp"] {
        let ms = run(
            "net-rtt",
            &[&format!("proto={proto}"), "rate=1000"],
            Some(WINDOW_MS),
        );
        check_series(&ms, &format!("{proto}_rtt_p50_ns"), 1);
        check_series_shape(&ms, &format!("{proto}_rtt_mean_ns"), 1);
    }
    no_series(&run("net-rtt", &["proto=udp", "rate=1000"], None));
}

#[test]
fn net_rtt_window_ignores_count() {
    // count would stop after 50 round trips; with a window the run lasts its duration.
    let ms = run("net-rtt", &["proto=udp", "count=50"], Some(WINDOW_MS));
    check_series(&ms, "udp_rtt_p50_ns", 1);
}

#[test]
fn disk_io_series() {
    let dir = tempfile::Builder::new()
        .prefix("isobench-series-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let d = format!("dir={}", dir.path().display());
    let ms = run(
        "disk-io",
        &[&d, "ops=randread,dioread", "blocks=2000"],
        Some(WINDOW_MS),
    );
    for op in ["randread", "dioread"] {
        check_series_mean(&ms, &format!("{op}_mbps"), 2);
        check_series(&ms, &format!("{op}_lat_p50_us"), 2);
    }
    no_series(&run("disk-io", &[&d, "ops=randread", "blocks=2000"], None));
}

#[test]
fn syscall_series() {
    let ms = run("syscall", &["path=getppid"], Some(WINDOW_MS));
    check_series(&ms, "getppid_ns", 1);
    no_series(&run("syscall", &["path=getppid"], None));
}

#[test]
fn context_switch_series() {
    let ms = run("context-switch", &[], Some(WINDOW_MS));
    // The trips take three quarters of the budget.
    check_series(&ms, "round_trip_ns", 1);
    let s = ms["switch_ns"].series.as_ref().expect("switch_ns series");
    assert_eq!(s.len(), ms["round_trip_ns"].series.as_ref().unwrap().len());
}

#[test]
fn local_comm_series() {
    let ms = run("local-comm", &["mode=pipe", "total=1M"], Some(WINDOW_MS));
    check_series(&ms, "pipe_gbps", 1);
    no_series(&run("local-comm", &["mode=pipe", "total=1M"], None));
}

#[test]
fn net_throughput_series() {
    let ms = run("net-throughput", &["proto=tcp"], Some(WINDOW_MS));
    check_series(&ms, "tcp_mbps", 1);
    let ms = run("net-throughput", &["proto=udp"], Some(WINDOW_MS));
    check_series(&ms, "udp_send_mbps", 1);
    assert!(ms["udp_mbps"].series.is_none());
}
