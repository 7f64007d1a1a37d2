//! What the orchestrator drives: tenants behind a trait, and time behind another.
//!
//! The real backend ([`crate::real`]) creates tenants with `isobench-platform` and talks to an
//! `isobench agent` inside each through `isobench-agent`. The fake backend ([`crate::fake`])
//! answers from a model with a seeded generator and advances a fake clock, so planning, the
//! trial order, the stopping rule and the rendered tables can be tested exactly.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use isobench_platform::LimitChanges;
use isobench_workloads::{Metric, ParamValues, StressReport};
use serde::{Deserialize, Serialize};

use crate::plan::PlannedTenant;

/// Time as the orchestrator sees it.
pub trait Clock: Send + Sync {
    /// Monotonic time since the clock was created.
    fn now(&self) -> Duration;
    /// Waits.
    fn sleep(&self, d: Duration);
    /// Wall-clock time, milliseconds since the Unix epoch (for the record).
    fn unix_ms(&self) -> i64;
    /// `CLOCK_MONOTONIC` nanoseconds: the clock probes stamp their windows with, so the
    /// aggressors' switches line up with the windows.
    fn mono_ns(&self) -> u64;
}

/// The machine's clock.
#[derive(Debug)]
pub struct SystemClock {
    start: Instant,
}

impl SystemClock {
    /// A clock starting now.
    pub fn new() -> Self {
        SystemClock {
            start: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }
    fn sleep(&self, d: Duration) {
        std::thread::sleep(d)
    }
    fn unix_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    }
    fn mono_ns(&self) -> u64 {
        isobench_workloads::timer::now_ns()
    }
}

/// CPU time, split when the source can split it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CpuTimes {
    /// User plus system, nanoseconds.
    pub total_ns: u64,
    /// User only, nanoseconds, when known.
    pub user_ns: Option<u64>,
}

impl From<isobench_platform::cgroup::cpu::CgroupCpu> for CpuTimes {
    fn from(c: isobench_platform::cgroup::cpu::CgroupCpu) -> CpuTimes {
        CpuTimes {
            total_ns: c.total_ns,
            user_ns: c.user_ns,
        }
    }
}

/// One probe run, as asked of a victim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRun {
    /// Probe name.
    pub name: String,
    /// Parameters.
    pub params: ParamValues,
    /// Wall-time budget.
    pub budget: Duration,
    /// CPU of the measuring thread.
    pub pin: Option<usize>,
    /// CPU of helpers.
    pub pin_peer: Option<usize>,
    /// Give up and call the tenant unresponsive after this long.
    pub timeout: Duration,
    /// Window length of the series a windowed probe returns (on/off design), when wanted.
    #[serde(default)]
    pub window: Option<Duration>,
}

/// What a probe run returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeOutcome {
    /// Metrics.
    pub metrics: Vec<Metric>,
    /// Parameters actually used (defaults and derived sizes filled in).
    pub params: ParamValues,
    /// Wall time of the probe, seconds.
    pub elapsed_s: f64,
    /// What the agent's threads did during the run, measured by the agent (run-queue wait,
    /// timeslices), when it measures it.
    #[serde(default)]
    pub context: Option<isobench_agent::ProbeContext>,
}

/// One stressor start, as asked of an aggressor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StressorRun {
    /// Stressor name.
    pub name: String,
    /// Intensity 0..=100.
    pub intensity: u8,
    /// Parameters.
    pub params: ParamValues,
    /// CPUs for its workers.
    pub pin: Option<Vec<usize>>,
    /// Whether the tenant contains it (cgroup limits); false means it runs capped.
    pub contained: bool,
    /// Give up and call the tenant unresponsive after this long.
    pub timeout: Duration,
}

/// Progress of a running stressor: operations so far at an agent-side time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct StressProgress {
    /// Operations since the stressor started.
    pub ops: u64,
    /// Seconds since the stressor started, when `ops` was read.
    pub elapsed_s: f64,
}

impl StressProgress {
    /// Operations per second of running time between two readings: the `frozen_s` of the
    /// interval the stressor spent frozen does not count. `None` when less than a millisecond
    /// (or less than a twentieth of the interval) was running time.
    pub fn rate_since_running(&self, earlier: &StressProgress, frozen_s: f64) -> Option<f64> {
        let dt = self.elapsed_s - earlier.elapsed_s;
        let running = dt - frozen_s.max(0.0);
        (dt > 1e-3 && running > 1e-3 && running >= dt / 20.0)
            .then(|| self.ops.saturating_sub(earlier.ops) as f64 / running)
    }
}

/// How a tenant failed a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum TenantFailure {
    /// The tenant stopped answering (timeout, agent gone, killed): recorded as DNR.
    #[error("did not respond: {0}")]
    NoResponse(String),
    /// The tenant answered with an error (the workload failed or was refused).
    #[error("failed: {0}")]
    Failed(String),
}

/// The result of touching memory page by page inside a tenant (paper 000, section 4.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemCheck {
    /// Bytes the check tried to touch.
    pub wanted: u64,
    /// Bytes touched before the access time jumped (or all of them).
    pub touched: u64,
    /// Median access time of a page in the first part of the walk, ns.
    pub base_ns: f64,
    /// Median access time of a page after the jump, ns, when there was one.
    pub jump_ns: Option<f64>,
    /// Offset where the access time jumped, bytes, when it did.
    pub knee: Option<u64>,
    /// Why the walk stopped early (killed, allocation refused), when it did.
    pub stopped: Option<String>,
}

impl MemCheck {
    /// True when all the memory could be touched at normal speed.
    pub fn ok(&self) -> bool {
        self.knee.is_none() && self.stopped.is_none() && self.touched >= self.wanted
    }
}

/// Facts about a created tenant, for the record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct TenantFacts {
    /// Tenant name.
    pub name: String,
    /// The limits in force (the user's plus safe defaults), canonical text.
    pub limits: String,
    /// Notes from the platform (safe defaults filled in, limits it could not apply).
    pub notes: Vec<String>,
    /// Free-form details (cgroup paths, agent version, the tenant's view of CPUs and memory).
    pub details: serde_json::Value,
}

/// Creates tenants and reads host-wide counters.
pub trait Backend {
    /// One line describing the platform, for the record.
    fn describe(&self) -> String;
    /// Caveats about the platform's figures on this machine (for example a guest under
    /// software emulation), stored with the run and shown with its results.
    fn caveats(&self) -> Vec<String> {
        Vec::new()
    }
    /// Checks, before the first tenant is created, what the platform can check of all of
    /// them at once (each tenant's own image is there). Creates nothing.
    fn preflight(&mut self, tenants: &[PlannedTenant]) -> anyhow::Result<()> {
        let _ = tenants;
        Ok(())
    }
    /// Creates a tenant and starts its agent.
    fn create_tenant(&mut self, tenant: &PlannedTenant) -> anyhow::Result<Box<dyn TenantDriver>>;
    /// CPU time of the whole machine so far (root cgroup), when readable.
    fn root_cpu(&mut self) -> Option<CpuTimes>;
    /// CPU time of the controller process itself so far.
    fn own_cpu(&mut self) -> CpuTimes;
    /// Removes shared objects. Tenants are torn down through their drivers first.
    fn teardown(&mut self) -> anyhow::Result<()>;
    /// Starts measuring what the machine does around a trial (steal time, pressure stalls,
    /// throttling, interrupts, a fixed-work canary's speed).
    fn noise_begin(&mut self) {}
    /// What the machine did since [`Backend::noise_begin`], as a JSON document with a
    /// `causes` list in words, when it can be measured.
    fn noise_end(&mut self) -> Option<serde_json::Value> {
        None
    }
    /// A driver for probes that run outside every tenant, on the host beside `tenant`: in no
    /// tenant's cgroups, in `tenant`'s network (its namespace when it has one), so a load
    /// generator reaches the tenant's servers on loopback. Its CPU time counts as the
    /// controller's own, not as load from outside the run.
    fn beside(&mut self, tenant: &PlannedTenant) -> anyhow::Result<Box<dyn TenantDriver>> {
        anyhow::bail!(
            "this platform cannot run a probe beside tenant {} (outside every tenant)",
            tenant.name
        )
    }
    /// A free TCP port on loopback, for an endpoint a probe binds later (a relay ring's
    /// master, where its last forwarder sends the message back).
    fn reserve_port(&mut self) -> anyhow::Result<u16> {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        Ok(l.local_addr()?.port())
    }
}

/// One tenant with its agent.
pub trait TenantDriver: Send {
    /// Tenant name.
    fn name(&self) -> &str;
    /// Facts for the record.
    fn facts(&self) -> TenantFacts;
    /// Touches `bytes` of memory page by page inside the tenant, timing each page.
    fn memory_check(&mut self, bytes: u64, timeout: Duration) -> Result<MemCheck, TenantFailure>;
    /// Runs one probe.
    fn run_probe(&mut self, run: &ProbeRun) -> Result<ProbeOutcome, TenantFailure>;
    /// Starts one probe and returns at once ([`TenantDriver::end_probe`] collects it), so the
    /// caller can switch other tenants on and off while it measures.
    fn begin_probe(&mut self, run: &ProbeRun) -> Result<(), TenantFailure>;
    /// Whether the probe started by `begin_probe` has finished.
    fn probe_finished(&mut self) -> bool;
    /// Waits for the probe started by `begin_probe` and returns its outcome.
    fn end_probe(&mut self) -> Result<ProbeOutcome, TenantFailure>;
    /// Freezes (`true`) or thaws (`false`) every process of the tenant; returns once done.
    fn set_frozen(&mut self, frozen: bool) -> Result<(), TenantFailure>;
    /// Changes the tenant's CPU limit while it lives: `Some(cpus)` caps it at that many CPUs'
    /// worth of time per scheduling period, `None` lifts the cap. A platform that cannot
    /// enforce a CPU limit answers [`TenantFailure::Failed`] saying why.
    fn set_cpu_limit(&mut self, cpus: Option<f64>) -> Result<(), TenantFailure> {
        self.update_limits(&LimitChanges::cpus(cpus)).map(|_| ())
    }
    /// Changes some of the tenant's knobs while it lives (each knob `changes` sets takes its
    /// value, each it lifts goes back to the kernel's default, the others stay) and returns
    /// the limits as the platform reads them back afterwards, or `None` where it cannot read
    /// them. A knob the platform cannot change answers [`TenantFailure::Failed`] saying why.
    fn update_limits(
        &mut self,
        changes: &LimitChanges,
    ) -> Result<Option<isobench_platform::Limits>, TenantFailure> {
        Err(TenantFailure::Failed(format!(
            "tenant {}: this backend cannot change a tenant's limits ({changes})",
            self.name()
        )))
    }
    /// Starts a stressor (one at a time per tenant).
    fn start_stressor(&mut self, run: &StressorRun) -> Result<(), TenantFailure>;
    /// Latest progress of the running stressor.
    fn stressor_progress(&mut self) -> Result<StressProgress, TenantFailure>;
    /// Stops the running stressor and returns its report.
    fn stop_stressor(&mut self) -> Result<StressReport, TenantFailure>;
    /// CPU time used by the tenant so far, when the platform counts it.
    fn cpu(&mut self) -> Option<CpuTimes>;
    /// The tenant's usage counters now, as its platform reads them (pressure stalls and
    /// block I/O among them); `None` where the tenant has none. Read around each trial.
    fn usage(&mut self) -> Option<isobench_platform::Usage> {
        None
    }
    /// The scheduler's view of the tenant's threads and of the host's CPUs now (run-queue
    /// wait, softirq, idle time), read at the aggressors' switches so a result's cause can be
    /// named; `None` where it cannot be read.
    fn sched_mark(&mut self) -> Option<isobench_platform::sched::SchedMark> {
        None
    }
    /// The address this tenant's services bind to so that a process beside it reaches them:
    /// its loopback, unless the tenant runs its own kernel (a guest), whose loopback only it
    /// can reach.
    fn service_host(&self) -> String {
        crate::serving::LOOPBACK.to_string()
    }

    /// Starts network service `kind` (`http:4K`, `relay-forwarder:127.0.0.1:7000`, as the
    /// agent's `start_service` takes it) bound to `bind` inside the tenant, named `id`;
    /// returns the address it listens on.
    fn start_service(&mut self, id: &str, kind: &str, bind: &str) -> Result<String, TenantFailure> {
        let _ = (id, bind);
        Err(TenantFailure::Failed(format!(
            "tenant {} cannot run network services (asked for {kind})",
            self.name()
        )))
    }
    /// Stops the service named `id`.
    fn stop_service(&mut self, id: &str) -> Result<(), TenantFailure> {
        Err(TenantFailure::Failed(format!(
            "tenant {} runs no service {id}",
            self.name()
        )))
    }
    /// After a DNR: kills whatever is left of the agent and starts a fresh one.
    fn restart(&mut self) -> anyhow::Result<()>;
    /// Stops the agent and removes the tenant.
    fn teardown(&mut self) -> anyhow::Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_counts_running_time_only() {
        let a = StressProgress {
            ops: 100,
            elapsed_s: 1.0,
        };
        let b = StressProgress {
            ops: 400,
            elapsed_s: 4.0,
        };
        assert_eq!(b.rate_since_running(&a, 0.0), Some(100.0));
        // Frozen for 1.5 of the 3 seconds: 300 ops in 1.5 s of running.
        assert_eq!(b.rate_since_running(&a, 1.5), Some(200.0));
        // Frozen (nearly) all the time, or no time passed: no rate.
        assert_eq!(b.rate_since_running(&a, 2.99), None);
        assert_eq!(a.rate_since_running(&a, 0.0), None);
    }
}
