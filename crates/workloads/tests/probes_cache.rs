//! The pointer-chase probes (`cache-latency`, `mem-latency`): window series for the on/off
//! design, and ring sizes that do not follow the noise of one sweep.
//!
//! Assertions are about structure (windows tile the run, in order) and about agreement
//! between two summaries of the same measurement with wide margins, never about speed.

use std::sync::Mutex;
use std::time::Duration;

use isobench_workloads::{probe, Metric, ParamValues, ProbeCtx};

/// Probes are timed; running two at once would only add noise to both.
static SERIAL: Mutex<()> = Mutex::new(());

fn run(name: &str, settings: &[&str], budget_ms: u64, window_ms: Option<u64>) -> Vec<Metric> {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let p = probe(name).unwrap_or_else(|| panic!("probe {name} is not registered"));
    let mut ctx = ProbeCtx::detect();
    ctx.budget = Duration::from_millis(budget_ms);
    ctx.pin = ctx.env.cpus.first().copied();
    ctx.window = window_ms.map(Duration::from_millis);
    let params = ParamValues::from_settings(name, p.params(), settings).unwrap();
    p.run(&ctx, &params)
        .unwrap_or_else(|e| panic!("{name}: {e:#}"))
}

fn metric<'a>(ms: &'a [Metric], name: &str) -> &'a Metric {
    ms.iter()
        .find(|m| m.name == name)
        .unwrap_or_else(|| panic!("metric {name} missing: {ms:?}"))
}

/// Checks a window series: present, in time order, tiling one interval with no gap or
/// overlap, each window at least `window_ms` long (the last at least half), covering about
/// `span_ms`, and the metric's value within the range of the window values.
fn check_series(m: &Metric, window_ms: u64, span_ms: u64) {
    let s = m
        .series
        .as_ref()
        .unwrap_or_else(|| panic!("{} has no series", m.name));
    assert!(s.len() >= 3, "{}: {s:?}", m.name);
    for (i, w) in s.iter().enumerate() {
        assert!(w.start_ns < w.end_ns, "{}: {w:?}", m.name);
        assert!(w.value.is_finite() && w.value > 0.0, "{}: {w:?}", m.name);
        // A window lasts at least its length; only the last may be shorter, by half.
        let len = w.end_ns - w.start_ns;
        let min = if i + 1 == s.len() {
            window_ms / 2
        } else {
            window_ms
        };
        assert!(len >= min * 1_000_000, "{}: window {i} {w:?}", m.name);
    }
    for pair in s.windows(2) {
        assert_eq!(
            pair[0].end_ns, pair[1].start_ns,
            "{}: gap or overlap",
            m.name
        );
    }
    let covered = (s[s.len() - 1].end_ns - s[0].start_ns) as f64 / 1e6;
    assert!(
        covered >= 0.9 * span_ms as f64,
        "{}: windows cover {covered} ms of a {span_ms} ms run",
        m.name
    );
    // The run's value (the median of all undisturbed batches) lies within the range of the
    // windows' medians of the same batches.
    let lo = s.iter().map(|w| w.value).fold(f64::INFINITY, f64::min);
    let hi = s.iter().map(|w| w.value).fold(f64::NEG_INFINITY, f64::max);
    let slack = 0.02 * m.value;
    assert!(
        lo - slack <= m.value && m.value <= hi + slack,
        "{}: value {} outside the window medians [{lo}, {hi}]",
        m.name,
        m.value
    );
}

#[test]
fn chase_probes_say_they_are_windowed() {
    for name in ["cache-latency", "mem-latency"] {
        assert!(probe(name).unwrap().windowed(), "{name}");
    }
}

#[test]
fn cache_latency_window_series_tiles_the_whole_budget() {
    let ms = run("cache-latency", &["level=l1", "l1_size=16K"], 300, Some(20));
    check_series(metric(&ms, "l1_ns"), 20, 300);
    assert!(metric(&ms, "l1_ring_bytes").series.is_none());
}

#[test]
fn cache_latency_llc_window_series_with_explicit_ring() {
    let ms = run(
        "cache-latency",
        &["level=llc", "llc_size=2M"],
        300,
        Some(25),
    );
    check_series(metric(&ms, "llc_ns"), 25, 300);
}

#[test]
fn cache_latency_all_levels_each_have_a_series() {
    let ms = run(
        "cache-latency",
        &["l1_size=16K", "l2_size=128K", "llc_size=2M"],
        600,
        Some(20),
    );
    for name in ["l1_ns", "l2_ns", "llc_ns"] {
        check_series(metric(&ms, name), 20, 200);
    }
}

#[test]
fn mem_latency_window_series_for_both_walks() {
    let ms = run("mem-latency", &["size=32M"], 400, Some(20));
    check_series(metric(&ms, "seq_ns"), 20, 200);
    check_series(metric(&ms, "rand_ns"), 20, 200);
    assert!(metric(&ms, "buffer_bytes").series.is_none());
}

#[test]
fn without_a_window_there_is_no_series() {
    let ms = run("cache-latency", &["level=l1", "l1_size=16K"], 50, None);
    assert!(ms.iter().all(|m| m.series.is_none()), "{ms:?}");
    let ms = run("mem-latency", &["mode=rand", "size=16M"], 50, None);
    assert!(ms.iter().all(|m| m.series.is_none()), "{ms:?}");
}
