//! A fake platform and a fake clock, for deterministic tests of everything above the
//! workloads: planning, the trial order, the stopping rule, DNR and disturbance handling,
//! resume, and the rendered tables.
//!
//! Probes answer from a model: every metric the probe declares, a base value derived from
//! its name, slowed down by the running stressor according to the resource classes, with
//! seeded noise. Time passes only when the orchestrator sleeps or a probe "runs" (by exactly
//! its budget), so two runs with the same seed produce the same database.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use isobench_workloads::{Class, Direction, StressReport};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::backend::{
    Backend, Clock, CpuTimes, MemCheck, ProbeOutcome, ProbeRun, StressProgress, StressorRun,
    TenantDriver, TenantFacts, TenantFailure,
};
use crate::plan::{is_run_fact, PlannedTenant};

/// Relative slowdown of a probe of class `probe` beside a stressor of class `stressor` at
/// `intensity` (0.3 = 30% worse; negative = better).
pub type Effect = fn(probe: Class, stressor: Class, intensity: u8) -> f64;

/// The default model: a stressor hurts its own resource class most, CPU hogs hurt a little
/// everywhere, and network latency gets *better* beside a CPU hog (idle states avoided).
pub fn default_effect(probe: Class, stressor: Class, intensity: u8) -> f64 {
    let i = intensity as f64 / 100.0;
    let s = match (probe, stressor) {
        (Class::Net, Class::Cpu) => -0.2,
        (p, s) if p == s => 0.3,
        (Class::Cache, Class::Memory) | (Class::Memory, Class::Cache) => 0.15,
        (_, Class::Cpu) => 0.08,
        _ => 0.005,
    };
    s * i
}

/// What the fake platform does beyond the model.
#[derive(Debug, Clone)]
pub struct FakeScript {
    /// Relative standard deviation of the noise on every value.
    pub noise: f64,
    /// `(tenant, stressor)`: the tenant stops answering while that stressor runs.
    pub dnr_under: Vec<(String, String)>,
    /// Probe runs (0-based, in the order they happen) during which load from outside the run
    /// appears (one full CPU).
    pub disturb: BTreeSet<usize>,
    /// Probe runs (0-based, in the order they happen) that outlive their deadline and the
    /// cancel, as a probe stuck in a slow setup does: the call does not answer, and the
    /// tenant's agent refuses every later probe as busy until it is restarted.
    pub overrun: BTreeSet<usize>,
    /// After this many probe runs, the stop flag is raised (as Ctrl-C would).
    pub interrupt_after: Option<(usize, Arc<AtomicBool>)>,
    /// `(tenant, bytes)`: the tenant's memory check jumps after this many bytes.
    pub memory_short: Option<(String, u64)>,
    /// Slowdown model.
    pub effect: Effect,
    /// Let real time pass too (each fake second also sleeps this many real seconds), so a
    /// test can interrupt a run from outside the process.
    pub real_time: f64,
    /// The victims report scheduler marks on two CPUs shared with the aggressor: while a
    /// stressor runs (not frozen) they wait on a run queue 40% of the time and the CPUs do
    /// not idle, a network stressor adds 0.3 CPUs of softirq per CPU; alone they wait 1% and
    /// the CPUs idle 80%.
    pub placement: bool,
    /// Every stressor's harm (a positive effect) is multiplied by this (1: the model as it
    /// is; 2: a host whose isolation is twice as bad).
    pub effect_scale: f64,
    /// Every tenant reports pressure-stall and block I/O counters, as on cgroup v2
    /// ([`fake_usage_rates`] says how fast they grow); without it no tenant has them, as on
    /// a platform without cgroups.
    pub usage: bool,
    /// An aggressor under a CPU quota of `q` CPUs does `min(q, 1)` of its harm and of its
    /// work (it burns the CPU it shares with the victim only that share of the time), as on
    /// one shared CPU.
    pub quota_scales_harm: bool,
    /// A stressor in another tenant harms a probe only when their tenants' cpusets share a
    /// CPU (a tenant without a cpuset runs on every CPU), as on CPUs shared or split.
    pub cpuset_gates_harm: bool,
}

/// How fast a fake tenant's counters grow ([`FakeScript::usage`]), per second of fake time,
/// given the classes of the other tenants' stressors running unfrozen and, when it runs one
/// itself, its own stressor's class: the shares of time stalled on CPU, memory and I/O
/// (`some`, `full`) and the bytes and operations read and written.
///
/// A tenant beside a running stressor stalls on that stressor's resource (CPU 30% some and
/// 10% full beside a CPU hog, memory 25%/10% beside a memory stressor, I/O 40%/20% beside a
/// disk stressor) on top of 2% CPU stall, and reads 1 MB/s in 50 ops/s; a tenant running a
/// stressor stalls 5% on CPU, and writes 40 MB/s in 320 ops/s when its stressor is a disk one.
pub fn fake_usage_rates(others: &[Class], own: Option<Class>) -> [f64; 10] {
    let beside = |c: Class| others.contains(&c);
    let (cpu, mem, io) = if own.is_some() {
        ((0.05, 0.0), (0.0, 0.0), (0.0, 0.0))
    } else {
        let on = |c: Class, some: f64, full: f64| {
            if beside(c) {
                (some, full)
            } else {
                (0.0, 0.0)
            }
        };
        let (cs, cf) = on(Class::Cpu, 0.3, 0.1);
        (
            (0.02 + cs, cf),
            on(Class::Memory, 0.25, 0.1),
            on(Class::Disk, 0.4, 0.2),
        )
    };
    let (rbytes, rios, wbytes, wios) = match own {
        None => (1e6, 50.0, 0.0, 0.0),
        Some(Class::Disk) => (0.0, 0.0, 40e6, 320.0),
        Some(_) => (0.0, 0.0, 0.0, 0.0),
    };
    [
        cpu.0, cpu.1, mem.0, mem.1, io.0, io.1, rbytes, wbytes, rios, wios,
    ]
}

impl Default for FakeScript {
    fn default() -> Self {
        FakeScript {
            noise: 0.01,
            dnr_under: Vec::new(),
            disturb: BTreeSet::new(),
            overrun: BTreeSet::new(),
            interrupt_after: None,
            memory_short: None,
            effect: default_effect,
            real_time: 0.0,
            placement: false,
            effect_scale: 1.0,
            usage: false,
            quota_scales_harm: false,
            cpuset_gates_harm: false,
        }
    }
}

/// A running stressor's class and intensity.
type Stressing = (Class, u8);

#[derive(Debug)]
struct Running {
    frozen: bool,
    name: String,
    class: Class,
    intensity: u8,
    ops: f64,
    elapsed: f64,
}

#[derive(Debug)]
struct State {
    now: Duration,
    rng: ChaCha8Rng,
    script: FakeScript,
    /// Running stressor per aggressor tenant.
    stressors: BTreeMap<String, Running>,
    /// CPU ns per tenant.
    cpu: BTreeMap<String, u64>,
    outside_ns: u64,
    probe_calls: usize,
    /// Class of the probe running now, if one runs.
    probe_class: Option<Class>,
    /// Calls that were made, in order (for assertions).
    log: Vec<String>,
    /// Freezes and thaws: (time, tenant, frozen after).
    switches: Vec<(Duration, String, bool)>,
    /// Stressor starts and stops: (time, tenant, class and intensity after a start, `None`
    /// after a stop), so a probe's windows see each stressor only while it ran.
    history: Vec<(Duration, String, Option<Stressing>)>,
    /// CPU time given so far to each tenant's running probe, ns.
    probing: BTreeMap<String, u64>,
    /// Tenants whose agent still runs a probe that overran ([`FakeScript::overrun`]).
    stuck: BTreeSet<String>,
    /// CPU limit in force per tenant, CPUs (absent: no quota).
    cpu_limits: BTreeMap<String, f64>,
    /// Every limit in force per tenant: the planned ones, as the conditions changed them.
    limits: BTreeMap<String, isobench_platform::Limits>,
    /// The victims' scheduler counters so far ([`FakeScript::placement`]).
    sched: FakeSched,
    /// Loopback ports handed out so far (services and reserved ports), from 40001.
    ports: u16,
    /// Each tenant's pressure (µs) and I/O counters so far ([`FakeScript::usage`]), in the
    /// order of [`fake_usage_rates`].
    usage: BTreeMap<String, [f64; 10]>,
}

/// Scheduler counters of the fake victims and CPUs.
#[derive(Debug, Default, Clone, Copy)]
struct FakeSched {
    run_ns: u64,
    wait_ns: u64,
    slices: u64,
    idle_s: f64,
    softirq_s: f64,
}

impl State {
    fn noise(&mut self) -> f64 {
        // Sum of uniforms: close enough to normal, bounded, platform independent.
        let u: f64 = (0..4).map(|_| self.rng.gen::<f64>() - 0.5).sum::<f64>();
        1.0 + self.script.noise * u * 1.732
    }

    fn advance(&mut self, d: Duration) {
        if self.script.real_time > 0.0 {
            std::thread::sleep(d.mul_f64(self.script.real_time));
        }
        self.now += d;
        let secs = d.as_secs_f64();
        if self.script.placement {
            let busy = self.stressors.values().filter(|s| !s.frozen);
            let net = busy.clone().any(|s| s.class == Class::Net);
            let busy = busy.count() > 0;
            let m = &mut self.sched;
            let wait = if busy { 0.4 } else { 0.01 };
            m.wait_ns += (secs * wait * 1e9) as u64;
            m.run_ns += (secs * (1.0 - wait) * 1e9) as u64;
            m.slices += (secs * 1000.0) as u64;
            m.idle_s += if busy { 0.0 } else { 0.8 * secs };
            m.softirq_s += if net { 0.3 * secs } else { 0.0 };
        }
        if self.script.usage {
            let running: Vec<(String, Class)> = self
                .stressors
                .iter()
                .filter(|(_, s)| !s.frozen)
                .map(|(t, s)| (t.clone(), s.class))
                .collect();
            for (t, counters) in self.usage.iter_mut() {
                let others: Vec<Class> = running
                    .iter()
                    .filter(|(o, _)| o != t)
                    .map(|(_, c)| *c)
                    .collect();
                let own = running.iter().find(|(o, _)| o == t).map(|(_, c)| *c);
                let rates = fake_usage_rates(&others, own);
                for (k, (c, r)) in counters.iter_mut().zip(rates).enumerate() {
                    // Stalls count in microseconds, as the kernel's `total=`.
                    *c += r * secs * if k < 6 { 1e6 } else { 1.0 };
                }
            }
        }
        for (t, given) in self.probing.iter_mut() {
            let ns = d.as_nanos() as u64;
            *given += ns;
            *self.cpu.entry(t.clone()).or_insert(0) += ns;
        }
        let probe_class = self.probe_class;
        let names: Vec<String> = self.stressors.keys().cloned().collect();
        for t in names {
            if let Some(s) = self.stressors.get_mut(&t).filter(|s| s.frozen) {
                // Frozen: time passes (the agent's clock runs on), no work is done.
                s.elapsed += secs;
                continue;
            }
            let n = self.noise();
            let quota = if self.script.quota_scales_harm {
                self.cpu_limits.get(&t).map_or(1.0, |q| q.min(1.0))
            } else {
                1.0
            };
            let s = self.stressors.get_mut(&t).expect("listed");
            let penalty = match probe_class {
                Some(c) if c == s.class => 0.05,
                Some(_) => 0.01,
                None => 0.0,
            };
            let rate = 1000.0 * s.intensity.max(1) as f64 / 100.0 * (1.0 - penalty) * quota * n;
            s.ops += rate * secs;
            s.elapsed += secs;
            *self.cpu.entry(t).or_insert(0) += (secs * 1e9 * s.intensity as f64 / 100.0) as u64;
        }
    }
}

/// The fake clock: time moves only when something sleeps or a probe runs.
#[derive(Debug, Clone)]
pub struct FakeClock {
    state: Arc<Mutex<State>>,
}

/// Fixed wall-clock start of every fake run: 2024-01-01T00:00:00Z.
pub const FAKE_EPOCH_MS: i64 = 1_704_067_200_000;

impl Clock for FakeClock {
    fn now(&self) -> Duration {
        self.state.lock().expect("fake state").now
    }
    fn sleep(&self, d: Duration) {
        self.state.lock().expect("fake state").advance(d);
    }
    fn unix_ms(&self) -> i64 {
        FAKE_EPOCH_MS + self.now().as_millis() as i64
    }
    fn mono_ns(&self) -> u64 {
        FAKE_MONO_NS + self.now().as_nanos() as u64
    }
}

/// `CLOCK_MONOTONIC` of the fake clock at its time zero.
pub const FAKE_MONO_NS: u64 = 1_000_000_000_000;

/// The fake platform.
#[derive(Debug)]
pub struct FakeBackend {
    state: Arc<Mutex<State>>,
}

impl FakeBackend {
    /// A fake platform and its clock, noise seeded with `seed`.
    pub fn new(seed: u64, script: FakeScript) -> (FakeBackend, FakeClock) {
        let state = Arc::new(Mutex::new(State {
            now: Duration::ZERO,
            rng: ChaCha8Rng::seed_from_u64(seed),
            script,
            stressors: BTreeMap::new(),
            cpu: BTreeMap::new(),
            outside_ns: 0,
            probe_calls: 0,
            probe_class: None,
            log: Vec::new(),
            switches: Vec::new(),
            history: Vec::new(),
            probing: BTreeMap::new(),
            stuck: BTreeSet::new(),
            cpu_limits: BTreeMap::new(),
            limits: BTreeMap::new(),
            sched: FakeSched::default(),
            ports: 0,
            usage: BTreeMap::new(),
        }));
        (
            FakeBackend {
                state: state.clone(),
            },
            FakeClock { state },
        )
    }

    /// Every call the tenants received, in order.
    pub fn log(&self) -> Vec<String> {
        self.state.lock().expect("fake state").log.clone()
    }
}

impl Backend for FakeBackend {
    fn describe(&self) -> String {
        "fake platform (tests)".into()
    }
    fn create_tenant(&mut self, t: &PlannedTenant) -> anyhow::Result<Box<dyn TenantDriver>> {
        let mut st = self.state.lock().expect("fake state");
        st.log.push(format!("create {}", t.name));
        st.cpu.insert(t.name.clone(), 0);
        st.usage.insert(t.name.clone(), [0.0; 10]);
        if let Some(c) = t.limits.cpus {
            st.cpu_limits.insert(t.name.clone(), c);
        }
        st.limits.insert(t.name.clone(), t.limits.clone());
        Ok(Box::new(FakeTenant {
            name: t.name.clone(),
            limits: t.limits.to_string(),
            memory: t.memory,
            state: self.state.clone(),
            pending: None,
            serves: None,
        }))
    }
    fn beside(&mut self, t: &PlannedTenant) -> anyhow::Result<Box<dyn TenantDriver>> {
        let name = format!("beside-{}", t.name);
        let mut st = self.state.lock().expect("fake state");
        st.log.push(format!("create {name}"));
        Ok(Box::new(FakeTenant {
            name,
            limits: String::new(),
            memory: t.memory,
            state: self.state.clone(),
            pending: None,
            serves: Some(t.name.clone()),
        }))
    }
    fn reserve_port(&mut self) -> anyhow::Result<u16> {
        let mut st = self.state.lock().expect("fake state");
        st.ports += 1;
        let port = 40_000 + st.ports;
        st.log.push(format!("reserve 127.0.0.1:{port}"));
        Ok(port)
    }
    fn root_cpu(&mut self) -> Option<CpuTimes> {
        let st = self.state.lock().expect("fake state");
        let total = st.cpu.values().sum::<u64>() + st.outside_ns;
        Some(CpuTimes {
            total_ns: total,
            user_ns: Some(total),
        })
    }
    fn own_cpu(&mut self) -> CpuTimes {
        CpuTimes {
            total_ns: 0,
            user_ns: Some(0),
        }
    }
    fn teardown(&mut self) -> anyhow::Result<()> {
        self.state
            .lock()
            .expect("fake state")
            .log
            .push("teardown platform".into());
        Ok(())
    }
}

/// A fake tenant.
#[derive(Debug)]
pub struct FakeTenant {
    name: String,
    limits: String,
    memory: u64,
    state: Arc<Mutex<State>>,
    /// The probe started by `begin_probe`: run, start time, call number.
    pending: Option<(ProbeRun, Duration, usize)>,
    /// For a place beside a tenant: the tenant whose servers it measures.
    serves: Option<String>,
}

/// Parameters that point a probe at a server; the fake logs them when set.
const ENDPOINT_PARAMS: &[&str] = &["addr", "port", "first_hop", "listen"];

/// How much more a stressor hurts a server in its own tenant than one next door.
pub const OWN_TENANT_FACTOR: f64 = 3.0;

impl FakeTenant {
    /// The tenant the probe measures: itself, or the one it sits beside.
    fn home(&self) -> &str {
        self.serves.as_deref().unwrap_or(&self.name)
    }

    fn unresponsive(&self, st: &State) -> Option<String> {
        st.script.dnr_under.iter().find_map(|(tenant, stressor)| {
            (tenant == self.home() && st.stressors.values().any(|s| &s.name == stressor))
                .then(|| format!("no answer within the timeout while {stressor} ran"))
        })
    }

    /// ` addr=... port=...` for the endpoint parameters set away from their defaults.
    fn endpoint_text(run: &ProbeRun) -> String {
        let Some(w) = isobench_workloads::probe(&run.name) else {
            return String::new();
        };
        let mut out = String::new();
        for spec in w
            .params()
            .iter()
            .filter(|s| ENDPOINT_PARAMS.contains(&s.name))
        {
            let Some(v) = run.params.0.get(spec.name) else {
                continue;
            };
            if *v == spec.default_value(&run.name) {
                continue;
            }
            let text = v.as_str().map_or_else(|| v.to_string(), str::to_string);
            out.push_str(&format!(" {}={text}", spec.name));
        }
        out
    }
}

/// Share of its speed a probe of `threads` threads keeps in a tenant limited to `cpus` CPUs:
/// the probe measures on one CPU per thread, so a limit of that many CPUs or more costs
/// nothing; below that it gets the limit's share of time, less an overhead that grows as
/// the limit shrinks (the scheduler's throttling costs more when periods are cut short), as
/// hypervisors show (paper 002).
pub fn cpu_limit_share(cpus: Option<f64>, threads: u32) -> f64 {
    let used = f64::from(threads.max(1));
    match cpus {
        Some(c) if c < used => {
            let c = c.max(0.0) / used;
            c * (1.0 - 0.1 * (1.0 - c))
        }
        _ => 1.0,
    }
}

/// Whether two tenants' limits give them cpusets without a CPU in common.
fn cpusets_apart(
    a: Option<&isobench_platform::Limits>,
    b: Option<&isobench_platform::Limits>,
) -> bool {
    match (
        a.and_then(|l| l.cpuset.as_ref()),
        b.and_then(|l| l.cpuset.as_ref()),
    ) {
        (Some(x), Some(y)) => !x.iter().any(|c| y.contains(c)),
        _ => false,
    }
}

fn base_value(probe: &str, metric: &str) -> f64 {
    let h = probe
        .bytes()
        .chain(metric.bytes())
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
        });
    100.0 + (h % 900) as f64
}

impl TenantDriver for FakeTenant {
    fn name(&self) -> &str {
        &self.name
    }
    fn facts(&self) -> TenantFacts {
        TenantFacts {
            name: self.name.clone(),
            limits: self.limits.clone(),
            notes: Vec::new(),
            details: serde_json::json!({"fake": true}),
        }
    }
    fn memory_check(&mut self, bytes: u64, _timeout: Duration) -> Result<MemCheck, TenantFailure> {
        let mut st = self.state.lock().expect("fake state");
        st.log.push(format!("memcheck {} {bytes}", self.name));
        st.advance(Duration::from_millis(50));
        let short = st
            .script
            .memory_short
            .as_ref()
            .filter(|(t, _)| t == &self.name)
            .map(|(_, b)| *b);
        Ok(match short {
            Some(limit) if limit < bytes => MemCheck {
                wanted: bytes,
                touched: limit,
                base_ns: 300.0,
                jump_ns: Some(80_000.0),
                knee: Some(limit),
                stopped: None,
            },
            _ => MemCheck {
                wanted: bytes,
                touched: bytes.min(self.memory.max(bytes)),
                base_ns: 300.0,
                jump_ns: None,
                knee: None,
                stopped: None,
            },
        })
    }
    fn run_probe(&mut self, run: &ProbeRun) -> Result<ProbeOutcome, TenantFailure> {
        self.begin_probe(run)?;
        self.end_probe()
    }
    fn begin_probe(&mut self, run: &ProbeRun) -> Result<(), TenantFailure> {
        let probe = isobench_workloads::probe(&run.name)
            .ok_or_else(|| TenantFailure::Failed(format!("unknown probe {}", run.name)))?;
        let mut st = self.state.lock().expect("fake state");
        let call = st.probe_calls;
        st.probe_calls += 1;
        let endpoints = Self::endpoint_text(run);
        // A rate the run holds (a calibrated service's) is part of what the probe was asked.
        let rate = run
            .params
            .0
            .get("rate")
            .filter(|v| v.as_f64().is_some_and(|r| r > 0.0))
            .map_or(String::new(), |v| format!(" rate={v}"));
        st.log
            .push(format!("probe {} {}{endpoints}{rate}", self.name, run.name));
        if let Some((n, flag)) = &st.script.interrupt_after {
            if call + 1 >= *n {
                flag.store(true, Ordering::SeqCst);
            }
        }
        if st.stuck.contains(&self.name) {
            return Err(TenantFailure::Failed(format!(
                "busy: a probe is already running in this agent, so `{}` was not started",
                run.name
            )));
        }
        if let Some(why) = self.unresponsive(&st) {
            st.advance(run.timeout);
            return Err(TenantFailure::NoResponse(why));
        }
        if st.script.overrun.contains(&call) {
            st.advance(run.timeout);
            st.stuck.insert(self.name.clone());
            return Err(TenantFailure::NoResponse(format!(
                "no answer to {} within {:.1} s",
                run.name,
                run.timeout.as_secs_f64()
            )));
        }
        st.probe_class = Some(probe.class());
        st.probing.insert(self.name.clone(), 0);
        self.pending = Some((run.clone(), st.now, call));
        Ok(())
    }
    fn probe_finished(&mut self) -> bool {
        let st = self.state.lock().expect("fake state");
        self.pending
            .as_ref()
            .is_none_or(|(run, t0, _)| st.now >= *t0 + run.budget)
    }
    fn end_probe(&mut self) -> Result<ProbeOutcome, TenantFailure> {
        let (run, t0, call) = self
            .pending
            .take()
            .ok_or_else(|| TenantFailure::Failed("no probe was started".into()))?;
        let probe = isobench_workloads::probe(&run.name).expect("checked at the start");
        let mut st = self.state.lock().expect("fake state");
        let end = t0 + run.budget;
        if st.now < end {
            let d = end - st.now;
            st.advance(d);
        }
        st.probe_class = None;
        // The probe's CPU time: what passing time gave it already, the rest now.
        let given = st.probing.remove(&self.name).unwrap_or(0);
        *st.cpu.entry(self.name.clone()).or_insert(0) +=
            (run.budget.as_nanos() as u64).saturating_sub(given);
        if st.script.disturb.contains(&call) {
            st.outside_ns += run.budget.as_nanos() as u64;
        }
        // The slowdown at an instant: every stressor running then and not frozen. A stressor
        // in the measured tenant itself hurts OWN_TENANT_FACTOR times more.
        let home = self.home().to_string();
        let slowdown_at = |st: &State, t: Duration| -> f64 {
            let tenants: BTreeSet<&String> = st.history.iter().map(|(_, who, _)| who).collect();
            tenants
                .into_iter()
                .filter_map(|tenant| {
                    let state = st
                        .history
                        .iter()
                        .rfind(|(at, who, _)| who == tenant && *at <= t)
                        .and_then(|(_, _, s)| *s)?;
                    let frozen = st
                        .switches
                        .iter()
                        .rev()
                        .find(|(at, who, _)| *at <= t && who == tenant)
                        .is_some_and(|(_, _, frozen)| *frozen);
                    let own = if *tenant == home {
                        OWN_TENANT_FACTOR
                    } else if st.script.quota_scales_harm {
                        st.cpu_limits.get(tenant).map_or(1.0, |q| q.min(1.0))
                    } else {
                        1.0
                    };
                    let apart = st.script.cpuset_gates_harm
                        && *tenant != home
                        && cpusets_apart(st.limits.get(tenant), st.limits.get(&home));
                    (!frozen && !apart).then(|| {
                        let e = (st.script.effect)(probe.class(), state.0, state.1);
                        own * if e > 0.0 {
                            e * st.script.effect_scale
                        } else {
                            e
                        }
                    })
                })
                .sum()
        };
        let window = run.window.filter(|w| !w.is_zero());
        let mut metrics = Vec::new();
        for spec in probe.metrics_for(&run.params) {
            let base = base_value(probe.name(), &spec.name);
            if is_run_fact(spec.direction, spec.aggregate) {
                metrics.push(spec.value(base));
                continue;
            }
            let threads = run.params.0.get("threads").and_then(|v| v.as_u64());
            let share = cpu_limit_share(
                st.cpu_limits.get(&self.name).copied(),
                threads.map_or(1, |t| t.min(u64::from(u32::MAX)) as u32),
            );
            let value_at = |st: &mut State, t: Duration| -> f64 {
                let slowdown = slowdown_at(st, t);
                let n = st.noise();
                match spec.direction {
                    Direction::Lower => base * (1.0 + slowdown) / share * n,
                    Direction::Higher => base / (1.0 + slowdown) * share * n,
                }
            };
            let metric = match window {
                None => {
                    let v = value_at(&mut st, t0 + run.budget / 2);
                    spec.value(v)
                }
                Some(w) => {
                    let count = (run.budget.as_nanos() / w.as_nanos()).max(1) as u32;
                    let mut series = Vec::new();
                    for k in 0..count {
                        let a = t0 + w * k;
                        let v = value_at(&mut st, a + w / 2);
                        series.push(isobench_workloads::Window {
                            start_ns: FAKE_MONO_NS + a.as_nanos() as u64,
                            end_ns: FAKE_MONO_NS + (a + w).as_nanos() as u64,
                            value: v,
                        });
                    }
                    let mean = series.iter().map(|x| x.value).sum::<f64>() / series.len() as f64;
                    spec.value(mean).with_series(series)
                }
            };
            metrics.push(with_fake_iterations(
                with_fake_histogram(metric),
                window.is_some(),
            ));
        }
        Ok(ProbeOutcome {
            metrics,
            params: run.params.clone(),
            elapsed_s: run.budget.as_secs_f64(),
            context: None,
        })
    }
    fn sched_mark(&mut self) -> Option<isobench_platform::sched::SchedMark> {
        use isobench_platform::noise::CpuTimes as HostCpu;
        use isobench_platform::sched::{SchedMark, ThreadSched};
        let st = self.state.lock().expect("fake state");
        if !st.script.placement {
            return None;
        }
        let m = st.sched;
        let cpu = HostCpu {
            idle_s: m.idle_s,
            softirq_s: m.softirq_s,
            ..HostCpu::default()
        };
        Some(SchedMark {
            at_ns: FAKE_MONO_NS + st.now.as_nanos() as u64,
            threads: [(
                1,
                ThreadSched {
                    run_ns: m.run_ns,
                    wait_ns: m.wait_ns,
                    slices: m.slices,
                },
            )]
            .into_iter()
            .collect(),
            cpus: vec![cpu, cpu],
        })
    }
    fn set_frozen(&mut self, frozen: bool) -> Result<(), TenantFailure> {
        let mut st = self.state.lock().expect("fake state");
        st.log.push(format!(
            "{} {}",
            if frozen { "freeze" } else { "thaw" },
            self.name
        ));
        let now = st.now;
        st.switches.push((now, self.name.clone(), frozen));
        if let Some(s) = st.stressors.get_mut(&self.name) {
            s.frozen = frozen;
        }
        st.advance(Duration::from_micros(500));
        Ok(())
    }
    /// Logs `limit NAME k=v,...` (a lifted knob as `k=none`), keeps the limits in force
    /// (the CPU model uses the quota), and reads them back as set.
    fn update_limits(
        &mut self,
        changes: &isobench_platform::LimitChanges,
    ) -> Result<Option<isobench_platform::Limits>, TenantFailure> {
        changes.check().map_err(TenantFailure::Failed)?;
        let mut st = self.state.lock().expect("fake state");
        let mut parts: Vec<String> = Vec::new();
        let set = changes.set.to_string();
        if !set.is_empty() {
            parts.push(set);
        }
        parts.extend(changes.lift.iter().map(|k| format!("{k}=none")));
        st.log
            .push(format!("limit {} {}", self.name, parts.join(",")));
        let now = changes.applied_to(&st.limits.get(&self.name).cloned().unwrap_or_default());
        match now.cpus {
            Some(c) => st.cpu_limits.insert(self.name.clone(), c),
            None => st.cpu_limits.remove(&self.name),
        };
        st.limits.insert(self.name.clone(), now.clone());
        Ok(Some(now))
    }

    fn start_stressor(&mut self, run: &StressorRun) -> Result<(), TenantFailure> {
        let st_class = isobench_workloads::stressor(&run.name)
            .ok_or_else(|| TenantFailure::Failed(format!("unknown stressor {}", run.name)))?
            .class();
        let mut st = self.state.lock().expect("fake state");
        st.log.push(format!(
            "start {} {}@{}",
            self.name, run.name, run.intensity
        ));
        let now = st.now;
        st.history
            .push((now, self.name.clone(), Some((st_class, run.intensity))));
        st.stressors.insert(
            self.name.clone(),
            Running {
                name: run.name.clone(),
                class: st_class,
                intensity: run.intensity,
                ops: 0.0,
                elapsed: 0.0,
                frozen: false,
            },
        );
        Ok(())
    }
    fn start_service(&mut self, id: &str, kind: &str, bind: &str) -> Result<String, TenantFailure> {
        let mut st = self.state.lock().expect("fake state");
        if let Some(why) = self.unresponsive(&st) {
            st.log
                .push(format!("service {} {id} {kind}: no answer", self.name));
            return Err(TenantFailure::NoResponse(why));
        }
        st.ports += 1;
        let ip = bind.rsplit_once(':').map_or(bind, |(ip, _)| ip);
        let addr = format!("{ip}:{}", 40_000 + st.ports);
        st.log
            .push(format!("service {} {id} {kind} -> {addr}", self.name));
        Ok(addr)
    }
    fn stop_service(&mut self, id: &str) -> Result<(), TenantFailure> {
        let mut st = self.state.lock().expect("fake state");
        st.log.push(format!("stop service {} {id}", self.name));
        Ok(())
    }
    fn stressor_progress(&mut self) -> Result<StressProgress, TenantFailure> {
        let st = self.state.lock().expect("fake state");
        if let Some(why) = self.unresponsive(&st) {
            return Err(TenantFailure::NoResponse(why));
        }
        let s = st
            .stressors
            .get(&self.name)
            .ok_or_else(|| TenantFailure::Failed("no stressor runs".into()))?;
        Ok(StressProgress {
            ops: s.ops as u64,
            elapsed_s: s.elapsed,
        })
    }
    fn stop_stressor(&mut self) -> Result<StressReport, TenantFailure> {
        let mut st = self.state.lock().expect("fake state");
        st.log.push(format!("stop {}", self.name));
        let now = st.now;
        st.history.push((now, self.name.clone(), None));
        let s = st
            .stressors
            .remove(&self.name)
            .ok_or_else(|| TenantFailure::Failed("no stressor runs".into()))?;
        Ok(StressReport {
            ops: s.ops as u64,
            elapsed_s: s.elapsed,
            ops_per_sec: if s.elapsed > 0.0 {
                s.ops / s.elapsed
            } else {
                0.0
            },
            op_unit: "op".into(),
            workers: 1,
            bytes: 0,
            notes: Vec::new(),
            pressure: vec![isobench_workloads::Pressure::new(
                "cpu_threads",
                "CPUs",
                f64::from(s.intensity) / 100.0,
            )],
        })
    }
    fn cpu(&mut self) -> Option<CpuTimes> {
        let st = self.state.lock().expect("fake state");
        let ns = st.cpu.get(&self.name).copied().unwrap_or(0);
        Some(CpuTimes {
            total_ns: ns,
            user_ns: Some(ns),
        })
    }
    fn usage(&mut self) -> Option<isobench_platform::Usage> {
        use isobench_platform::noise::{Pressure, Stall};
        let st = self.state.lock().expect("fake state");
        if !st.script.usage {
            return None;
        }
        let c = st.usage.get(&self.name)?;
        let stall = |k: usize| {
            Some(Stall {
                some_us: c[k] as u64,
                full_us: Some(c[k + 1] as u64),
            })
        };
        Some(isobench_platform::Usage {
            pressure: Pressure {
                cpu: stall(0),
                memory: stall(2),
                io: stall(4),
            },
            io_read_bytes: Some(c[6] as u64),
            io_write_bytes: Some(c[7] as u64),
            io_read_ops: Some(c[8] as u64),
            io_write_ops: Some(c[9] as u64),
            ..isobench_platform::Usage::default()
        })
    }
    fn restart(&mut self) -> anyhow::Result<()> {
        let mut st = self.state.lock().expect("fake state");
        st.log.push(format!("restart {}", self.name));
        st.stuck.remove(&self.name);
        if st.stressors.remove(&self.name).is_some() {
            let now = st.now;
            st.history.push((now, self.name.clone(), None));
        }
        Ok(())
    }
    fn teardown(&mut self) -> anyhow::Result<()> {
        let mut st = self.state.lock().expect("fake state");
        st.log.push(format!("teardown {}", self.name));
        if st.stressors.remove(&self.name).is_some() {
            let now = st.now;
            st.history.push((now, self.name.clone(), None));
        }
        Ok(())
    }
}

/// Runs `plan` on the fake platform into `store`: the whole pipeline of a real run (create,
/// execute, record), deterministic. For tests and the hidden fake mode of the command line.
pub fn run_fake(
    store: &mut isobench_store::Store,
    plan: &crate::plan::Plan,
    scenario_text: &str,
    script: FakeScript,
    progress: &mut dyn crate::progress::Progress,
) -> anyhow::Result<crate::orchestrator::RunOutcome> {
    let (mut backend, clock) = FakeBackend::new(plan.seed, script);
    let host = serde_json::json!({
        "hostname": "fake",
        "cpu_model": "Fake CPU @ 2.6GHz",
        "cores": 2,
        "kernel": "6.0.0-fake",
        "cgroup_version": "1",
    });
    let run = crate::orchestrator::create_run(
        store,
        plan,
        scenario_text,
        &backend.describe(),
        host,
        FAKE_EPOCH_MS,
    )?;
    crate::orchestrator::Engine::new(
        plan,
        run,
        crate::orchestrator::EngineIo::new(store, &mut backend, &clock, progress),
        crate::orchestrator::EngineOptions::default(),
    )
    .execute()
}

/// Runs and iterations per run of the fake relay ring's series.
const FAKE_RUNS: u64 = 6;
const FAKE_ITERATIONS: u64 = 50;

/// The relay ring's `iter_ns` (one window per iteration) and `run_mean_ns` (one per run)
/// series, which the real probe always returns (the artifacts kind's run x iteration
/// surface), around the metric's value; other metrics, and any under a window, unchanged.
fn with_fake_iterations(
    m: isobench_workloads::Metric,
    windowed: bool,
) -> isobench_workloads::Metric {
    let per_run = match m.name.as_str() {
        "iter_ns" if !windowed => FAKE_ITERATIONS,
        "run_mean_ns" if !windowed => 1,
        _ => return m,
    };
    let step = 1_000_000;
    let windows = (0..FAKE_RUNS * per_run)
        .map(|k| {
            let wobble = 1.0 + 0.05 * ((k % 7) as f64 - 3.0) / 3.0;
            isobench_workloads::Window {
                start_ns: FAKE_MONO_NS + k * step,
                end_ns: FAKE_MONO_NS + (k + 1) * step,
                value: m.value * wobble,
            }
        })
        .collect();
    m.with_series(windows)
}

/// A latency metric (ns or us, lower is better) with the distribution a real probe would
/// record: 200 values spread around its value with a tail, so that what reads histograms
/// (the HTML report's latency charts) has them in fake runs too.
fn with_fake_histogram(m: isobench_workloads::Metric) -> isobench_workloads::Metric {
    if !(matches!(m.unit.as_str(), "ns" | "us")
        && m.direction == Direction::Lower
        && m.name.contains("p50"))
        || m.value <= 0.0
    {
        return m;
    }
    let mut h = isobench_workloads::LatencyHistogram::new();
    for k in 0..200u32 {
        let spread = 0.8 + 0.4 * f64::from(k % 20) / 20.0;
        let tail = if k % 50 == 49 { 4.0 } else { 1.0 };
        h.record((m.value * spread * tail).round() as u64);
    }
    m.with_histogram(h)
}
