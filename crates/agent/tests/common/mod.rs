//! Shared test helpers: an agent and a client joined by a socket pair inside the test
//! process, and test-only workloads injected through the catalogue.
#![allow(dead_code)]

#[path = "../../../../tests/skip.rs"]
mod skip_log;

/// Skips the running test for lack of `group`: prints the reason and records it for
/// `scripts/test`'s list.
pub fn skip(group: &str, why: &str) {
    skip_log::skip(group, why);
}

use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use isobench_agent::{serve_connection, AgentClient, AgentConfig, Catalog, SessionEnd};
use isobench_workloads::{
    Class, Env, Metric, MetricSpec, ParamKind, ParamSpec, ParamValues, Pressure, Probe, ProbeCtx,
    StressCtx, StressReport, Stressor, Unsupported,
};

/// A running in-process agent and a client talking to it.
pub struct Pair {
    pub client: AgentClient,
    pub agent: JoinHandle<SessionEnd>,
}

/// The built-in catalogue plus the test workloads below.
pub fn test_catalog() -> Catalog {
    Catalog::builtin()
        .with_probe(&WAIT_PROBE)
        .with_probe(&PANIC_PROBE)
        .with_stressor(&SPIN)
        .with_stressor(&FAIL_STRESSOR)
        .with_stressor(&BOMB)
        .with_stressor(&STUCK)
}

/// An agent over a socket pair with `config`, and a client (not yet said hello).
pub fn pair_with(config: AgentConfig) -> Pair {
    let (a, b) = UnixStream::pair().unwrap();
    let (ar, aw) = (a.try_clone().unwrap(), a);
    let agent = thread::spawn(move || {
        let end = serve_connection(ar, aw.try_clone().unwrap(), &config);
        let _ = aw.shutdown(std::net::Shutdown::Both);
        end
    });
    let client = AgentClient::from_unix_stream("tenant-a", b)
        .unwrap()
        .with_timeout(Duration::from_secs(30));
    Pair { client, agent }
}

/// An agent with the test catalogue, and a client that has said hello.
pub fn pair() -> Pair {
    let p = pair_with(AgentConfig::default().with_catalog(test_catalog()));
    p.client.hello().expect("hello");
    p
}

/// Probe `wait`: returns only when stopped (for busy, cancel and timeout tests).
pub struct WaitProbe;
pub static WAIT_PROBE: WaitProbe = WaitProbe;
/// Tags of the `wait` runs that have started (tests run in parallel, so each uses its own).
pub static WAIT_STARTED: Mutex<Vec<i64>> = Mutex::new(Vec::new());
const WAIT_PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "tag",
    help: "recorded in WAIT_STARTED when the run starts",
    kind: ParamKind::Int {
        min: 0,
        max: 1_000_000,
    },
    default: "0",
}];

/// True once a `wait` run with `tag` has started.
pub fn wait_started(tag: i64) -> bool {
    WAIT_STARTED.lock().unwrap().contains(&tag)
}

#[derive(serde::Deserialize)]
struct WaitOpts {
    tag: i64,
}
const WAIT_METRICS: &[MetricSpec] = &[MetricSpec {
    name: "waited",
    unit: "count",
    direction: isobench_workloads::Direction::Higher,
    aggregate: isobench_workloads::Aggregate::Total,
}];

impl Probe for WaitProbe {
    fn name(&self) -> &'static str {
        "wait"
    }
    fn help(&self) -> &'static str {
        "test probe: waits until stopped"
    }
    fn class(&self) -> Class {
        Class::Process
    }
    fn params(&self) -> &'static [ParamSpec] {
        WAIT_PARAMS
    }
    fn metrics(&self) -> &'static [MetricSpec] {
        WAIT_METRICS
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        Ok(())
    }
    fn run(&self, ctx: &ProbeCtx, p: &ParamValues) -> anyhow::Result<Vec<Metric>> {
        let o: WaitOpts = p.decode("wait")?;
        WAIT_STARTED.lock().unwrap().push(o.tag);
        while !ctx.stopped() {
            thread::sleep(Duration::from_millis(1));
        }
        Ok(vec![WAIT_METRICS[0].value(1.0)])
    }
}

/// Probe `panic`: panics.
pub struct PanicProbe;
pub static PANIC_PROBE: PanicProbe = PanicProbe;

impl Probe for PanicProbe {
    fn name(&self) -> &'static str {
        "panic"
    }
    fn help(&self) -> &'static str {
        "test probe: panics"
    }
    fn class(&self) -> Class {
        Class::Process
    }
    fn params(&self) -> &'static [ParamSpec] {
        &[]
    }
    fn metrics(&self) -> &'static [MetricSpec] {
        WAIT_METRICS
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        Ok(())
    }
    fn run(&self, _ctx: &ProbeCtx, _p: &ParamValues) -> anyhow::Result<Vec<Metric>> {
        panic!("deliberate test panic")
    }
}

/// Stressor `spin`: counts one op per loop (with a short sleep) until stopped.
pub struct Spin;
pub static SPIN: Spin = Spin;
/// Set by `spin` when it sees its stop flag (to check EOF stops stressors).
pub static SPIN_STOPPED: AtomicBool = AtomicBool::new(false);
const SPIN_PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "step",
    help: "ops counted per loop",
    kind: ParamKind::Int { min: 1, max: 1000 },
    default: "1",
}];

#[derive(serde::Deserialize)]
struct SpinOpts {
    step: u64,
}

impl Stressor for Spin {
    fn name(&self) -> &'static str {
        "spin"
    }
    fn help(&self) -> &'static str {
        "test stressor: counts ops until stopped"
    }
    fn class(&self) -> Class {
        Class::Cpu
    }
    fn intensity_knob(&self) -> &'static str {
        "none"
    }
    fn params(&self) -> &'static [ParamSpec] {
        SPIN_PARAMS
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        Ok(())
    }
    fn run(&self, ctx: &StressCtx, p: &ParamValues) -> anyhow::Result<StressReport> {
        let o: SpinOpts = p.decode("spin")?;
        let t0 = std::time::Instant::now();
        while ctx.running() {
            ctx.add_ops(o.step);
            thread::sleep(Duration::from_micros(200));
        }
        SPIN_STOPPED.store(true, Ordering::SeqCst);
        let elapsed_s = t0.elapsed().as_secs_f64();
        Ok(StressReport {
            ops: ctx.ops(),
            elapsed_s,
            ops_per_sec: ctx.ops() as f64 / elapsed_s,
            op_unit: "loop".into(),
            workers: 1,
            bytes: 0,
            notes: vec![format!("intensity={}", ctx.intensity)],
            pressure: vec![Pressure::new("bytes_per_sec", "B/s", 1234.5)],
        })
    }
}

/// Stressor `fail`: fails at once.
pub struct FailStressor;
pub static FAIL_STRESSOR: FailStressor = FailStressor;

impl Stressor for FailStressor {
    fn name(&self) -> &'static str {
        "fail"
    }
    fn help(&self) -> &'static str {
        "test stressor: fails at once"
    }
    fn class(&self) -> Class {
        Class::Cpu
    }
    fn intensity_knob(&self) -> &'static str {
        "none"
    }
    fn params(&self) -> &'static [ParamSpec] {
        &[]
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        Ok(())
    }
    fn run(&self, _ctx: &StressCtx, _p: &ParamValues) -> anyhow::Result<StressReport> {
        anyhow::bail!("out of test budget")
    }
}

/// Stressor `bomb`: aggressive, otherwise like `spin` without parameters.
pub struct Bomb;
pub static BOMB: Bomb = Bomb;

impl Stressor for Bomb {
    fn name(&self) -> &'static str {
        "bomb"
    }
    fn help(&self) -> &'static str {
        "test stressor: aggressive"
    }
    fn class(&self) -> Class {
        Class::Process
    }
    fn intensity_knob(&self) -> &'static str {
        "none"
    }
    fn params(&self) -> &'static [ParamSpec] {
        &[]
    }
    fn aggressive(&self) -> bool {
        true
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        Ok(())
    }
    fn run(&self, ctx: &StressCtx, _p: &ParamValues) -> anyhow::Result<StressReport> {
        while ctx.running() {
            thread::sleep(Duration::from_millis(1));
        }
        Ok(StressReport {
            ops: 0,
            elapsed_s: 0.0,
            ops_per_sec: 0.0,
            op_unit: "nothing".into(),
            workers: ctx.caps.max_tasks.unwrap_or(0),
            bytes: 0,
            notes: vec![],
            pressure: vec![],
        })
    }
}

/// Stressor `stuck`: counts ops until stopped, then stays in its run (as a worker blocked in
/// an uninterruptible wait in the kernel does) until [`STUCK_RELEASE`] is set.
pub struct Stuck;
pub static STUCK: Stuck = Stuck;
/// Lets `stuck` return.
pub static STUCK_RELEASE: AtomicBool = AtomicBool::new(false);

impl Stressor for Stuck {
    fn name(&self) -> &'static str {
        "stuck"
    }
    fn help(&self) -> &'static str {
        "test stressor: slow to stop"
    }
    fn class(&self) -> Class {
        Class::Disk
    }
    fn intensity_knob(&self) -> &'static str {
        "none"
    }
    fn params(&self) -> &'static [ParamSpec] {
        &[]
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        Ok(())
    }
    fn run(&self, ctx: &StressCtx, _p: &ParamValues) -> anyhow::Result<StressReport> {
        while ctx.running() {
            ctx.add_ops(1);
            thread::sleep(Duration::from_millis(1));
        }
        while !STUCK_RELEASE.load(Ordering::SeqCst) {
            thread::sleep(Duration::from_millis(5));
        }
        Ok(StressReport {
            ops: ctx.ops(),
            elapsed_s: 1.0,
            ops_per_sec: 0.0,
            op_unit: "loop".into(),
            workers: 1,
            bytes: 1,
            notes: vec![],
            pressure: vec![Pressure::new("bytes_per_sec", "B/s", 1.0)],
        })
    }
}

/// Polls `f` until it is true (up to 30 s); for waiting on asynchronous effects without
/// asserting any duration.
pub fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        if f() {
            return true;
        }
        thread::sleep(Duration::from_millis(2));
    }
    false
}

/// A flag a test can share with a thread.
pub fn flag() -> Arc<AtomicBool> {
    Arc::new(AtomicBool::new(false))
}
