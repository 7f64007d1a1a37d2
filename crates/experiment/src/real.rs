//! The real backend: tenants from `isobench-platform`, each with an `isobench agent` inside
//! driven over its standard input and output with `isobench-agent`'s client.
//!
//! The memory-availability check runs `isobench memcheck` inside the tenant (a process of its
//! own, so the kernel can kill it without killing the agent). Host-wide and tenant CPU time
//! come from the platform's cgroup counters; the controller's own from `getrusage`.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use isobench_agent::{AgentClient, AgentError, Caps, ErrorCode, ProbeOpts, StressOpts};
use isobench_platform::{
    platform, AgentLaunch, Killer, NetSpec, Platform, PlatformOptions, RunContext, Sentinel,
    SentinelConfig, Tenant, TenantSpec,
};
use isobench_workloads::{ParamValues, StressReport};

use crate::backend::{
    Backend, CpuTimes, MemCheck, ProbeOutcome, ProbeRun, StressProgress, StressorRun, TenantDriver,
    TenantFacts, TenantFailure,
};
use crate::memcheck::{self, Walk};
use crate::plan::{Plan, PlannedTenant};
use crate::scenario::Role;
use crate::tenant_agent::{contained, create_tenant, TenantAgent};

/// Interval of the stressors' progress samples.
const SAMPLE_INTERVAL: Duration = Duration::from_millis(50);

/// Tenants on a real platform.
pub struct RealBackend {
    platform: Box<dyn Platform>,
    exe: PathBuf,
    deadline: Duration,
    agent_timeout: Duration,
    /// Kill switches of the aggressor tenants, for the sentinel.
    aggressors: Arc<Mutex<Vec<Killer>>>,
    /// Addresses of the tenants with their own network namespace, for `@tenant` in
    /// workload parameters.
    addresses: Addresses,
    /// The host sentinel: a high-priority heartbeat that kills every aggressor when the host
    /// stops responding (the trials then end as DNR with the reason, and the run goes on).
    sentinel: Option<Sentinel>,
    /// Tenants whose throttling and pressure are read around each trial.
    watched: Vec<isobench_platform::noise::WatchedTenant>,
    /// The fixed-work canary, calibrated when the backend starts.
    canary: isobench_workloads::canary::Canary,
    /// The snapshot and canary speed taken by `noise_begin`.
    noise_start: Option<(isobench_platform::noise::HostNoise, f64)>,
    /// The run's id, for processes started beside tenants.
    run_id: String,
    /// What each tenant created is, for a place beside it.
    infos: std::collections::BTreeMap<String, isobench_platform::TenantInfo>,
}

impl RealBackend {
    /// The platform of `plan`, for run `run`; `exe` is the isobench binary started as the
    /// agent inside each tenant.
    pub fn new(plan: &Plan, run: RunContext, exe: PathBuf) -> Result<RealBackend> {
        let kind = plan.platform;
        let run_id = run.id().as_str().to_string();
        let mut opts = PlatformOptions::new(run);
        if let Some(c) = &plan.io_cost {
            opts.io_cost = Some(
                c.parse()
                    .map_err(|e: String| anyhow::anyhow!("the plan's io_cost: {e}"))?,
            );
        }
        let platform = platform(kind, opts)?;
        // A watchdog deadline well past the longest the run can take.
        let deadline = Duration::from_secs_f64(plan.estimate.secs_max * 3.0 + 900.0);
        let aggressors: Arc<Mutex<Vec<Killer>>> = Arc::new(Mutex::new(Vec::new()));
        let sentinel = {
            let aggressors = aggressors.clone();
            Sentinel::start(SentinelConfig::default(), move |stall| {
                tracing::error!(
                    "the host stopped responding (heartbeat {} ms late): killing the \
                     aggressor tenants",
                    stall.late_by.as_millis()
                );
                for k in aggressors.lock().unwrap_or_else(|p| p.into_inner()).iter() {
                    let _ = k.kill();
                }
            })
            .context("starting the host sentinel")?
        };
        Ok(RealBackend {
            platform,
            exe,
            deadline,
            agent_timeout: plan.trial.timeout.max(Duration::from_secs(5)),
            aggressors,
            addresses: Addresses::default(),
            sentinel: Some(sentinel),
            watched: Vec::new(),
            canary: isobench_workloads::canary::Canary::calibrate(),
            noise_start: None,
            run_id,
            infos: std::collections::BTreeMap::new(),
        })
    }
}

impl RealBackend {
    /// What the platform is asked to create for `t`, and the notes on what was decided.
    fn spec(&self, t: &PlannedTenant) -> (TenantSpec, Vec<String>) {
        let role = t.role;
        let mut limits = t.limits.clone();
        let mut notes = Vec::new();
        if !self.platform.enforces_limits() && !limits.is_empty() {
            // The plan still sizes the workloads from these limits; nothing enforces them.
            notes.push(format!(
                "limits {limits} used for sizing only: the {} platform does not enforce them",
                self.platform.kind()
            ));
            limits = isobench_platform::Limits::none();
        }
        // Containment limits only where the platform can hold an aggressor to all of them
        // (a platform that cannot, e.g. `k8s` without io limits, bounds what it can itself,
        // and the plan caps the aggressive stressors).
        let (limits, filled) = contained(self.platform.as_ref(), limits, role == Role::Aggressor);
        for f in filled {
            notes.push(format!("containment limit filled in: {f}"));
        }
        let mut spec = TenantSpec::new(&t.name, role)
            .with_limits(limits)
            .with_deadline(self.deadline);
        if t.netns {
            spec = spec.with_network(NetSpec::default());
        }
        if let Some(image) = &t.image {
            spec = spec.with_image(image);
        }
        (spec, notes)
    }

    /// The driver of `tenant`, its agent started; `memory` is what the plan gives it.
    fn driver(
        &self,
        name: &str,
        tenant: Box<dyn Tenant>,
        memory: u64,
        notes: Vec<String>,
    ) -> Result<Box<dyn TenantDriver>> {
        let launch = AgentLaunch {
            exe: self.exe.clone(),
            log: log_path(tenant.workdir()),
        };
        let mut driver = RealTenant {
            name: name.to_string(),
            inner: TenantAgent::new(name, tenant, launch, Some(self.agent_timeout)),
            exe: self.exe.clone(),
            stressor: None,
            seq: 0,
            last: None,
            notes,
            hello: serde_json::Value::Null,
            memory,
            addresses: self.addresses.clone(),
            pending: None,
        };
        driver.inner.start_agent()?;
        driver.agent_started();
        Ok(Box::new(driver))
    }
}

impl Backend for RealBackend {
    fn describe(&self) -> String {
        self.platform.describe()
    }

    fn caveats(&self) -> Vec<String> {
        self.platform.notes()
    }

    fn preflight(&mut self, tenants: &[PlannedTenant]) -> Result<()> {
        let specs: Vec<TenantSpec> = tenants.iter().map(|t| self.spec(t).0).collect();
        self.platform.preflight(&specs)
    }

    fn create_tenant(&mut self, t: &PlannedTenant) -> Result<Box<dyn TenantDriver>> {
        let (spec, mut notes) = self.spec(t);
        let tenant = create_tenant(self.platform.as_mut(), &spec)?;
        notes.extend(tenant.info().notes.iter().cloned());
        self.infos.insert(t.name.clone(), tenant.info().clone());
        self.watched.push(isobench_platform::noise::WatchedTenant {
            name: t.name.clone(),
            cgroups: tenant.info().cgroups.clone(),
        });
        if let Some(ip) = tenant.address() {
            self.addresses
                .0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(t.name.clone(), ip);
        }
        if t.role == Role::Aggressor {
            self.aggressors
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(tenant.killer());
        }
        self.driver(&t.name, tenant, t.memory, notes)
    }

    fn noise_begin(&mut self) {
        let speed = self.canary.speed();
        self.noise_start = isobench_platform::noise::HostNoise::read(&self.watched)
            .ok()
            .map(|n| (n, speed));
    }

    fn noise_end(&mut self) -> Option<serde_json::Value> {
        use isobench_platform::noise;
        let speed_after = self.canary.speed();
        let (before, speed_before) = self.noise_start.take()?;
        let after = noise::HostNoise::read(&self.watched).ok()?;
        let d = noise::delta(&before, &after);
        let causes: Vec<String> = noise::causes(&d, &noise::Thresholds::default())
            .iter()
            .map(|c| c.text.clone())
            .collect();
        let throttled: Vec<serde_json::Value> = d
            .tenants
            .iter()
            .filter_map(|t| {
                t.throttle.as_ref().map(|th| {
                    serde_json::json!({
                        "tenant": t.name,
                        "periods": th.periods,
                        "throttled_periods": th.throttled_periods,
                        "throttled_s": th.throttled_s,
                    })
                })
            })
            .collect();
        Some(serde_json::json!({
            "interval_s": d.interval_s,
            "steal_cpus": d.steal,
            "irq_cpus": d.irq,
            "softirq_cpus": d.softirq,
            "iowait_cpus": d.iowait,
            "idle_share": d.per_cpu.iter().map(|c| c.idle_share).collect::<Vec<_>>(),
            "softirq_per_cpu": d.per_cpu.iter().map(|c| c.softirq).collect::<Vec<_>>(),
            "cpu_pressure_some": d.pressure.cpu.map(|p| p.some),
            "io_pressure_some": d.pressure.io.map(|p| p.some),
            "memory_pressure_some": d.pressure.memory.map(|p| p.some),
            "throttled": throttled,
            "canary_speed": [speed_before, speed_after],
            "causes": causes,
        }))
    }

    fn root_cpu(&mut self) -> Option<CpuTimes> {
        isobench_platform::cgroup::cpu::host().map(CpuTimes::from)
    }

    fn beside(&mut self, t: &PlannedTenant) -> Result<Box<dyn TenantDriver>> {
        let info = self.infos.get(&t.name).with_context(|| {
            format!(
                "tenant {} was not created, so nothing runs beside it",
                t.name
            )
        })?;
        let place = isobench_platform::Beside::new(info, &self.run_id)?;
        let name = place.name().to_string();
        self.driver(&name, Box::new(place), t.memory, Vec::new())
    }

    fn own_cpu(&mut self) -> CpuTimes {
        own_cpu()
    }

    fn teardown(&mut self) -> Result<()> {
        if let Some(s) = self.sentinel.take() {
            s.stop();
        }
        self.platform.teardown()
    }
}

/// CPU time of this process.
pub fn own_cpu() -> CpuTimes {
    // SAFETY: getrusage fills the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    let user = ns(ru.ru_utime);
    CpuTimes {
        total_ns: user + ns(ru.ru_stime),
        user_ns: Some(user),
    }
}

/// A probe started with `begin_probe`, measuring on a thread of its own.
type PendingProbe = std::thread::JoinHandle<Result<ProbeOutcome, AgentError>>;

/// A tenant with its agent.
pub struct RealTenant {
    name: String,
    /// The tenant and its agent.
    inner: TenantAgent,
    /// The isobench binary, for the memory check.
    exe: PathBuf,
    /// Id of the running stressor.
    stressor: Option<String>,
    seq: u32,
    last: Option<StressProgress>,
    notes: Vec<String>,
    hello: serde_json::Value,
    memory: u64,
    addresses: Addresses,
    /// The probe started by `begin_probe`.
    pending: Option<PendingProbe>,
}

/// Tenant addresses by tenant name (tenants with their own network namespace).
#[derive(Debug, Clone, Default)]
pub struct Addresses(Arc<Mutex<std::collections::BTreeMap<String, std::net::IpAddr>>>);

impl Addresses {
    /// Replaces `@tenant` and `@tenant:port` in text parameters by that tenant's address, so
    /// that network workloads can run between tenants (`target = "@victim:9"` sends a
    /// neighbour's datagrams into the victim's namespace over the shared bridge).
    pub fn resolve(&self, params: &ParamValues) -> Result<ParamValues, String> {
        let known = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = params.clone();
        for (key, v) in out.0.iter_mut() {
            let Some(text) = v.as_str() else { continue };
            let Some(rest) = text.strip_prefix('@') else {
                continue;
            };
            let (name, port) = match rest.split_once(':') {
                Some((n, p)) => (n, Some(p)),
                None => (rest, None),
            };
            let ip = known.get(name).ok_or_else(|| {
                format!(
                    "parameter `{key}={text}`: tenant `{name}` has no address of its own; give it \
                     `network = {{ namespace = true }}` (tenants with one: {})",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.keys().cloned().collect::<Vec<_>>().join(", ")
                    }
                )
            })?;
            *v = serde_json::Value::from(match port {
                Some(p) => format!("{ip}:{p}"),
                None => ip.to_string(),
            });
        }
        Ok(out)
    }
}

fn log_path(workdir: &Path) -> PathBuf {
    workdir.join("agent.log")
}

impl RealTenant {
    /// Records the agent just started: its `hello`, and no stressor yet.
    fn agent_started(&mut self) {
        if let Some(a) = self.inner.agent() {
            let hello = &a.hello;
            self.hello = serde_json::json!({
                "agent_pid": hello.pid,
                "agent_version": hello.tool_version,
                "protocol": hello.protocol_version.to_string(),
                "cpus": hello.env.cpus,
                "mem_usable": hello.env.mem_usable,
                "mem_limit": hello.env.mem_limit,
                "workdir": self.inner.tenant().workdir(),
                "transport": a.process.transport,
            });
        }
        self.stressor = None;
        self.last = None;
    }

    /// The tail of the agent's log, to explain why it went away.
    fn log_tail(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = File::open(log_path(self.inner.tenant().workdir())) {
            let _ = f.read_to_string(&mut s);
        }
        s.lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| format!(" (agent log: {})", l.trim()))
            .unwrap_or_default()
    }

    fn fail(&self, e: AgentError) -> TenantFailure {
        if e.is_unresponsive() {
            let mut why = e.to_string();
            if let Ok(u) = self.inner.tenant().usage() {
                if u.oom_kills.is_some_and(|k| k > 0) {
                    why.push_str(&format!(
                        " ({} process(es) of the tenant killed for lack of memory)",
                        u.oom_kills.unwrap_or(0)
                    ));
                }
            }
            why.push_str(&self.log_tail());
            TenantFailure::NoResponse(why)
        } else {
            TenantFailure::Failed(e.to_string())
        }
    }

    fn client(&self) -> Result<&Arc<AgentClient>, TenantFailure> {
        self.inner
            .agent()
            .map(|a| &a.client)
            .ok_or_else(|| TenantFailure::NoResponse(format!("tenant {} has no agent", self.name)))
    }

    fn latest_progress(&mut self) -> Result<StressProgress, TenantFailure> {
        let id = self
            .stressor
            .clone()
            .ok_or_else(|| TenantFailure::Failed("no stressor runs".into()))?;
        let client = self.client()?;
        if let Some(exit) = client
            .take_exits()
            .into_iter()
            .find(|e| e.stressor_id == id)
        {
            let why = exit
                .error
                .map(|e| e.to_string())
                .unwrap_or_else(|| "it ended on its own".into());
            self.stressor = None;
            return Err(TenantFailure::NoResponse(format!(
                "the stressor stopped: {why}"
            )));
        }
        if let Some(reason) = client.closed_reason() {
            return Err(TenantFailure::NoResponse(format!(
                "agent `{}` closed the connection ({reason}){}",
                self.name,
                self.log_tail()
            )));
        }
        let mut latest = None;
        for s in client.take_samples() {
            if s.stressor_id == id {
                latest = Some(s);
            }
        }
        // A fresh sample, so the window edges are at most one interval off.
        let deadline = Instant::now() + SAMPLE_INTERVAL * 4;
        while Instant::now() < deadline {
            match client.next_sample(deadline.saturating_duration_since(Instant::now())) {
                Some(s) if s.stressor_id == id => {
                    latest = Some(s);
                    break;
                }
                Some(_) => continue,
                None => break,
            }
        }
        match latest {
            Some(s) => {
                let p = StressProgress {
                    ops: s.ops,
                    elapsed_s: s.elapsed_s,
                };
                self.last = Some(p);
                Ok(p)
            }
            None => match self.last {
                Some(p) => Ok(p),
                None => Err(TenantFailure::NoResponse(format!(
                    "no progress from the stressor of tenant {} within {} ms",
                    self.name,
                    (SAMPLE_INTERVAL * 4).as_millis()
                ))),
            },
        }
    }
}

impl TenantDriver for RealTenant {
    fn name(&self) -> &str {
        &self.name
    }

    fn facts(&self) -> TenantFacts {
        let info = self.inner.tenant().info();
        TenantFacts {
            name: self.name.clone(),
            limits: info.limits.to_string(),
            notes: self.notes.clone(),
            details: serde_json::json!({
                "object_name": info.object_name,
                "platform": info.platform,
                "cgroups": info.cgroups,
                "netns": info.netns,
                "address": info.address,
                "workdir": info.workdir,
                "io_device": info.io_device.as_ref().map(|d| format!("{d:?}")),
                "image": info.image,
                "agent": self.hello,
            }),
        }
    }

    fn memory_check(&mut self, bytes: u64, timeout: Duration) -> Result<MemCheck, TenantFailure> {
        let mut cmd = Command::new(&self.exe);
        cmd.arg("memcheck")
            .arg(bytes.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = self
            .inner
            .tenant()
            .spawn(cmd)
            .map_err(|e| TenantFailure::Failed(format!("starting the memory check: {e:#}")))?;
        let mut out = child.stdout.take().expect("piped");
        // Its answer is one short line; what runs inside the tenant is read at most 64 KiB
        // into memory, the rest drained so it never blocks on a full pipe.
        let reader = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = (&mut out).take(64 << 10).read_to_string(&mut s);
            let _ = std::io::copy(&mut out, &mut std::io::sink());
            s
        });
        let t0 = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(st)) => break Some(st),
                Ok(None) if t0.elapsed() < timeout => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
            }
        };
        let text = reader.join().unwrap_or_default();
        let walk: Option<Walk> = serde_json::from_str(text.trim()).ok();
        let stopped = match status {
            None => Some(format!("no result within {} s", timeout.as_secs())),
            Some(st) if !st.success() => {
                use std::os::unix::process::ExitStatusExt;
                Some(match st.signal() {
                    Some(9) => "the kernel killed it (out of memory)".to_string(),
                    Some(s) => format!("it died of signal {s}"),
                    None => format!("it failed ({st})"),
                })
            }
            _ => None,
        };
        let mut check = match walk {
            Some(w) => memcheck::analyze(&w),
            None => MemCheck {
                wanted: bytes,
                touched: 0,
                base_ns: 0.0,
                jump_ns: None,
                knee: None,
                stopped: Some("it printed no result".into()),
            },
        };
        if check.stopped.is_none() {
            check.stopped = stopped;
        }
        let _ = self.memory;
        Ok(check)
    }

    fn run_probe(&mut self, run: &ProbeRun) -> Result<ProbeOutcome, TenantFailure> {
        self.begin_probe(run)?;
        self.end_probe()
    }

    fn begin_probe(&mut self, run: &ProbeRun) -> Result<(), TenantFailure> {
        let client = self.client()?.clone();
        let opts = ProbeOpts {
            pin: run.pin,
            pin_peer: run.pin_peer,
            budget: Some(run.budget),
            workdir: None,
            deadline: Some(run.timeout),
            window: run.window,
        };
        let params = self
            .addresses
            .resolve(&run.params)
            .map_err(TenantFailure::Failed)?;
        let name = run.name.clone();
        let h = std::thread::Builder::new()
            .name("probe-client".into())
            .spawn(move || {
                client
                    .run_probe(&name, &params, &opts)
                    .map(|r| ProbeOutcome {
                        metrics: r.metrics,
                        params: r.params,
                        elapsed_s: r.elapsed_s,
                        context: r.context,
                    })
            })
            .map_err(|e| TenantFailure::Failed(format!("cannot start a thread: {e}")))?;
        self.pending = Some(h);
        Ok(())
    }

    fn probe_finished(&mut self) -> bool {
        self.pending.as_ref().is_none_or(|h| h.is_finished())
    }

    fn end_probe(&mut self) -> Result<ProbeOutcome, TenantFailure> {
        let h = self
            .pending
            .take()
            .ok_or_else(|| TenantFailure::Failed("no probe was started".into()))?;
        match h.join() {
            Ok(Ok(o)) => Ok(o),
            Ok(Err(e)) if is_busy(&e) => {
                // An earlier probe still runs in the agent (it outlived its deadline and the
                // cancel): the agent is restarted so the next probe is not refused too.
                let restarted = match self.restart() {
                    Ok(()) => "the agent was restarted".to_string(),
                    Err(r) => format!("restarting the agent failed: {r:#}"),
                };
                Err(TenantFailure::Failed(format!(
                    "{e}; an earlier probe outlived its deadline and its cancel, so {restarted}"
                )))
            }
            Ok(Err(e)) => Err(self.fail(e)),
            Err(_) => Err(TenantFailure::Failed(
                "the probe's client thread panicked".into(),
            )),
        }
    }

    fn set_frozen(&mut self, frozen: bool) -> Result<(), TenantFailure> {
        self.inner.tenant().set_frozen(frozen).map_err(|e| {
            TenantFailure::Failed(format!(
                "{} tenant {}: {e:#}",
                if frozen { "freezing" } else { "thawing" },
                self.name
            ))
        })
    }

    fn update_limits(
        &mut self,
        changes: &isobench_platform::LimitChanges,
    ) -> Result<Option<isobench_platform::Limits>, TenantFailure> {
        self.inner
            .tenant()
            .update_limits(changes)
            .map(Some)
            .map_err(|e| TenantFailure::Failed(format!("{e:#}")))
    }

    fn start_stressor(&mut self, run: &StressorRun) -> Result<(), TenantFailure> {
        self.seq += 1;
        let id = format!("{}-{}", run.name, self.seq);
        let caps = if run.contained {
            Caps::default()
        } else {
            {
                let c = isobench_workloads::ctx::StressCaps::uncontained(self.memory);
                Caps {
                    max_tasks: c.max_tasks,
                    max_bytes: c.max_bytes,
                }
            }
        };
        let opts = StressOpts {
            pin: run.pin.clone(),
            caps,
            contained: run.contained,
            workdir: None,
            sample_interval: Some(SAMPLE_INTERVAL),
        };
        let client = self.client()?;
        let _ = client.take_samples();
        let _ = client.take_exits();
        let params = self
            .addresses
            .resolve(&run.params)
            .map_err(TenantFailure::Failed)?;
        match client.start_stressor(&id, &run.name, run.intensity, &params, &opts) {
            Ok(_) => {
                self.stressor = Some(id);
                self.last = None;
                Ok(())
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    fn stressor_progress(&mut self) -> Result<StressProgress, TenantFailure> {
        self.latest_progress()
    }

    fn service_host(&self) -> String {
        self.inner
            .tenant()
            .service_address()
            .map_or_else(|| crate::serving::LOOPBACK.to_string(), |ip| ip.to_string())
    }

    fn start_service(&mut self, id: &str, kind: &str, bind: &str) -> Result<String, TenantFailure> {
        let client = self.client()?;
        client
            .start_service(id, kind, bind, None)
            .map_err(|e| self.fail(e))
    }

    fn stop_service(&mut self, id: &str) -> Result<(), TenantFailure> {
        let client = self.client()?;
        client.stop_service(id).map(drop).map_err(|e| self.fail(e))
    }

    fn stop_stressor(&mut self) -> Result<StressReport, TenantFailure> {
        let id = self
            .stressor
            .take()
            .ok_or_else(|| TenantFailure::Failed("no stressor runs".into()))?;
        let client = self.client()?;
        let r = client.stop_stressor(&id);
        let _ = client.take_samples();
        r.map_err(|e| self.fail(e))
    }

    fn sched_mark(&mut self) -> Option<isobench_platform::sched::SchedMark> {
        use isobench_platform::sched::{SchedMark, TaskSource};
        let source = TaskSource {
            cgroups: self.inner.tenant().info().cgroups.clone(),
            pid: self
                .hello
                .get("agent_pid")
                .and_then(|p| p.as_u64())
                .and_then(|p| u32::try_from(p).ok()),
        };
        let m = SchedMark::read(&source);
        (!m.threads.is_empty()).then_some(m)
    }

    fn cpu(&mut self) -> Option<CpuTimes> {
        self.inner.tenant().cpu_time().map(CpuTimes::from)
    }

    fn usage(&mut self) -> Option<isobench_platform::Usage> {
        self.inner.tenant().usage().ok()
    }

    fn restart(&mut self) -> Result<()> {
        self.inner.restart_agent()?;
        self.agent_started();
        Ok(())
    }

    fn teardown(&mut self) -> Result<()> {
        // A probe thread still holding the client is waited for (its deadline bounds it).
        if self.inner.agent().is_some() {
            if let Some(h) = self.pending.take() {
                let _ = h.join();
            }
        }
        self.inner.teardown()
    }
}

/// The agent refused the request because an earlier probe still runs there.
fn is_busy(e: &AgentError) -> bool {
    matches!(e, AgentError::Remote { error, .. } if error.code == ErrorCode::Busy)
}

#[cfg(test)]
mod address_tests {
    use super::*;

    #[test]
    fn tenant_references_become_addresses() {
        let a = Addresses::default();
        a.0.lock()
            .unwrap()
            .insert("victim".into(), "10.213.5.2".parse().unwrap());
        let mut p = ParamValues::default();
        p.set("target", serde_json::Value::from("@victim:9"));
        p.set("addr", serde_json::Value::from("@victim"));
        p.set("size", serde_json::Value::from(100));
        let r = a.resolve(&p).unwrap();
        assert_eq!(r.0["target"], "10.213.5.2:9");
        assert_eq!(r.0["addr"], "10.213.5.2");
        assert_eq!(r.0["size"], 100);
        p.set("target", serde_json::Value::from("@nobody:9"));
        let e = a.resolve(&p).unwrap_err();
        assert!(e.contains("tenant `nobody` has no address"), "{e}");
        assert!(e.contains("namespace = true"), "{e}");
    }
}
