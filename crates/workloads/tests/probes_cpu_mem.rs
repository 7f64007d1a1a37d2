//! The CPU, cache, memory and process probes run for real, briefly, and return sane values.
//!
//! The machine these run on is shared and noisy, so the assertions are about behaviour and
//! about orderings with wide margins (an L1 hit is faster than a trip to memory, creating a
//! process costs more than switching to one), never about absolute speed.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use isobench_workloads::cachesize::{cache_profile, cache_sizes};
use isobench_workloads::{probe, ParamValues, ProbeCtx};

/// Probes are timed; running two at once would only add noise to both.
static SERIAL: Mutex<()> = Mutex::new(());

fn ctx(budget_ms: u64) -> ProbeCtx {
    let mut ctx = ProbeCtx::detect();
    ctx.budget = Duration::from_millis(budget_ms);
    ctx.pin = ctx.env.cpus.first().copied();
    ctx
}

/// Runs a probe with `key=value` settings; returns metric name -> value after checking
/// every returned metric is declared and finite.
fn run(name: &str, settings: &[&str], budget_ms: u64) -> BTreeMap<String, f64> {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    run_unlocked(name, settings, budget_ms).unwrap_or_else(|e| panic!("{name}: {e:#}"))
}

fn run_unlocked(
    name: &str,
    settings: &[&str],
    budget_ms: u64,
) -> anyhow::Result<BTreeMap<String, f64>> {
    let p = probe(name).unwrap_or_else(|| panic!("probe {name} is not registered"));
    let ctx = ctx(budget_ms);
    p.supported(&ctx.env)
        .unwrap_or_else(|u| panic!("{name} unsupported here: {u}"));
    let params = ParamValues::from_settings(name, p.params(), settings)?;
    let metrics = p.run(&ctx, &params)?;
    assert_no_children_left(name);
    let declared: Vec<&str> = p.metrics().iter().map(|m| m.name).collect();
    let mut out = BTreeMap::new();
    for m in metrics {
        assert!(
            declared.contains(&m.name.as_str()),
            "{name} returned undeclared metric {}",
            m.name
        );
        assert!(m.value.is_finite(), "{name}: {} = {}", m.name, m.value);
        assert!(m.value >= 0.0, "{name}: {} = {}", m.name, m.value);
        out.insert(m.name, m.value);
    }
    Ok(out)
}

/// Fails when this process still has a child (running or zombie).
fn assert_no_children_left(name: &str) {
    let mut status = 0;
    // SAFETY: WNOHANG never blocks; status is a valid out-pointer.
    let r = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
    let errno = std::io::Error::last_os_error().raw_os_error();
    assert!(
        r == -1 && errno == Some(libc::ECHILD),
        "{name} left a child process behind (waitpid returned {r})"
    );
}

fn positive(m: &BTreeMap<String, f64>, key: &str) -> f64 {
    let v = *m
        .get(key)
        .unwrap_or_else(|| panic!("metric {key} missing: {m:?}"));
    assert!(v > 0.0 && v.is_finite(), "{key} = {v}");
    v
}

fn param_error(name: &str, settings: &[&str]) -> String {
    let p = probe(name).unwrap();
    ParamValues::from_settings(name, p.params(), settings)
        .expect_err("settings should be rejected")
        .to_string()
}

fn run_error(name: &str, settings: &[&str]) -> String {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    match run_unlocked(name, settings, 100) {
        Ok(m) => panic!("{name} {settings:?} should fail, returned {m:?}"),
        Err(e) => format!("{e:#}"),
    }
}

#[test]
fn cpu_int_mix_and_primes_report_rates() {
    let mix = run("cpu-int", &[], 200);
    let ops = positive(&mix, "ops_per_sec");
    assert_eq!(mix["ops_per_sec_per_thread"], ops);
    assert!(!mix.contains_key("events_per_sec"));

    let primes = run("cpu-int", &["kernel=primes", "max_prime=2000"], 200);
    positive(&primes, "events_per_sec");
    // A smaller max_prime makes an event cheaper: many times more events per second.
    let big = run("cpu-int", &["kernel=primes", "max_prime=20000"], 200);
    assert!(
        primes["events_per_sec"] > 3.0 * big["events_per_sec"],
        "{primes:?} vs {big:?}"
    );
}

#[test]
fn cpu_int_threads_total_is_per_thread_times_threads() {
    let m = run("cpu-int", &["kernel=primes", "threads=2"], 300);
    let total = positive(&m, "events_per_sec");
    let per = positive(&m, "events_per_sec_per_thread");
    assert!((total - 2.0 * per).abs() <= 1e-9 * total, "{m:?}");
}

#[test]
fn cpu_float_reports_mflops() {
    let m = run("cpu-float", &[], 200);
    let total = positive(&m, "mflops");
    assert_eq!(m["mflops_per_thread"], total);
}

#[test]
fn cache_sizes_are_measured_and_ordered() {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let env = ProbeCtx::detect().env;
    let s = cache_sizes(&env);
    assert!(s.l1 >= 4 << 10 && s.l1 <= s.l2 && s.l2 <= s.llc, "{s:?}");
    assert!(s.llc <= 1 << 30, "{s:?}");
    assert_eq!(s.llc_sysfs, env.llc_size());
    let p = cache_profile(&env);
    assert!(p.elapsed_ms < 5_000.0, "sweep took {} ms", p.elapsed_ms);
    if p.note.is_none() {
        assert!(p.points.len() >= 10, "{p:?}");
        assert!(p.levels.len() >= 2 && s.llc_measured.is_some(), "{p:?}");
        // Memory is slower than L1 by far on any machine.
        assert!(p.beyond_ns.unwrap() > 3.0 * p.levels[0].ns, "{p:?}");
    }
}

#[test]
fn cache_latency_l1_is_faster_than_llc() {
    let m = run("cache-latency", &[], 450);
    let l1 = positive(&m, "l1_ns");
    let llc = positive(&m, "llc_ns");
    positive(&m, "l2_ns");
    assert!(l1 < llc, "{m:?}");
    assert!(m["l1_ring_bytes"] < m["l2_ring_bytes"], "{m:?}");
    assert!(m["l2_ring_bytes"] <= m["llc_ring_bytes"], "{m:?}");
    assert!(m["huge_pages_pct"] <= 100.0);
}

#[test]
fn cache_latency_one_level_with_explicit_size() {
    let m = run(
        "cache-latency",
        &["level=l1", "l1_size=8K", "pages=normal"],
        100,
    );
    positive(&m, "l1_ns");
    assert_eq!(m["l1_ring_bytes"], 8192.0);
    assert!(
        !m.contains_key("l2_ns") && !m.contains_key("llc_ns"),
        "{m:?}"
    );
}

#[test]
fn random_memory_latency_is_above_l1_latency() {
    let l1 = run("cache-latency", &["level=l1", "l1_size=16K"], 100)["l1_ns"];
    let m = run("mem-latency", &["size=64M"], 300);
    let rand = positive(&m, "rand_ns");
    positive(&m, "seq_ns");
    assert!(rand > 3.0 * l1, "rand {rand} ns vs l1 {l1} ns");
    assert_eq!(m["buffer_bytes"], (64u64 << 20) as f64);
}

#[test]
fn mem_latency_auto_size_covers_the_llc() {
    let m = run("mem-latency", &["mode=rand", "pages=normal"], 200);
    positive(&m, "rand_ns");
    assert!(!m.contains_key("seq_ns"));
    let llc = positive(&m, "llc_bytes");
    let buf = positive(&m, "buffer_bytes");
    let env = ProbeCtx::detect().env;
    assert!(
        buf >= (8.0 * llc)
            .min(1024.0 * 1048576.0)
            .min(env.mem_usable as f64 / 4.0)
            - 4e6
    );
    assert!(buf <= env.mem_usable as f64 / 4.0);
}

#[test]
fn mem_bandwidth_all_ops_are_positive() {
    let m = run("mem-bandwidth", &["size=8M"], 300);
    for k in ["copy_gbps", "read_gbps", "write_gbps"] {
        positive(&m, k);
    }
    assert_eq!(m["block_bytes"], (8u64 << 20) as f64);
    let two = run("mem-bandwidth", &["size=4M", "op=read", "threads=2"], 200);
    positive(&two, "read_gbps");
    assert!(!two.contains_key("copy_gbps"));
}

#[test]
fn local_comm_moves_bytes_through_pipe_and_socket() {
    let m = run("local-comm", &["total=1M"], 200);
    positive(&m, "pipe_gbps");
    positive(&m, "unix_gbps");
    let small = run("local-comm", &["mode=unix", "size=100", "total=64K"], 100);
    positive(&small, "unix_gbps");
    assert!(!small.contains_key("pipe_gbps"));
}

#[test]
fn fork_costs_more_than_a_context_switch() {
    let cs = run("context-switch", &[], 300);
    let switch = cs["switch_ns"];
    let rt = positive(&cs, "round_trip_ns");
    positive(&cs, "pipe_overhead_ns");
    assert!(switch < rt, "{cs:?}");
    let f = run("fork-latency", &[], 400);
    let fork = positive(&f, "fork_p50_ns");
    let exec = positive(&f, "exec_p50_ns");
    assert!(fork > switch, "fork {fork} ns vs switch {switch} ns");
    assert!(fork > rt, "fork {fork} ns vs token round trip {rt} ns");
    assert!(exec > fork, "exec {exec} ns vs fork {fork} ns");
    assert!(f["fork_p50_ns"] <= f["fork_p99_ns"] && f["fork_p99_ns"] <= f["fork_max_ns"]);
}

#[test]
fn context_switch_ring_and_spread_placement_run() {
    let ring = run("context-switch", &["processes=4", "footprint=16K"], 200);
    positive(&ring, "round_trip_ns");
    let spread = run("context-switch", &["placement=spread"], 200);
    positive(&spread, "round_trip_ns");
}

#[test]
fn parameter_errors_name_the_parameter() {
    let e = param_error("cpu-int", &["thread=2"]);
    assert!(e.contains("did you mean `threads`"), "{e}");
    let e = param_error("cpu-int", &["kernel=fibonacci"]);
    assert!(e.contains("mix, primes"), "{e}");
    let e = param_error("cpu-float", &["threads=0"]);
    assert!(e.contains("out of range") && e.contains("1..=256"), "{e}");
    let e = param_error("mem-bandwidth", &["size=lots"]);
    assert!(e.contains("size"), "{e}");
    let e = param_error("context-switch", &["processes=1"]);
    assert!(e.contains("2..=64"), "{e}");
    let e = param_error("local-comm", &["mode=tcp"]);
    assert!(e.contains("all, pipe, unix"), "{e}");
}

#[test]
fn run_time_errors_explain_the_fix() {
    let e = run_error("mem-latency", &["seq_stride=12"]);
    assert!(
        e.contains("seq_stride=12") && e.contains("multiple of 8"),
        "{e}"
    );
    let e = run_error("mem-bandwidth", &["size=16G", "threads=256"]);
    assert!(
        e.contains("size=16G") && e.contains("lower size or threads"),
        "{e}"
    );
    let e = run_error("fork-latency", &["exec_path=/nonexistent/prog"]);
    assert!(e.contains("exec_path=/nonexistent/prog"), "{e}");
    let e = run_error("fork-latency", &["exec_path=/bin/false", "mode=exec"]);
    assert!(e.contains("did not exit 0"), "{e}");
}
