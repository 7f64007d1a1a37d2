//! Platforms: what creates isolated tenants, runs processes inside them, reads their usage
//! back and tears everything down again.
//!
//! A [`Platform`] creates [`Tenant`]s from a [`TenantSpec`] (name, role, [`Limits`], an
//! optional own network, a workdir, a deadline). `host` runs plain processes (the
//! no-isolation baseline); `cgroup` puts each tenant in its own cgroup, v1 or v2 detected at
//! run time, through a thin layer over cgroupfs ([`cgroup`]); `oci` runs each tenant in a
//! container made by Docker or Podman ([`oci`]); `k8s` runs each tenant in a pod on this
//! machine's Kubernetes node, through kubectl ([`k8s`]). A tenant can also get its own network
//! namespace on a per-run bridge, with rate limits ([`net`]).
//!
//! Safety is part of the contract, not an option: the child of [`Tenant::spawn`] joins its
//! cgroup and namespace before it executes; aggressors always run under pids, memory and io
//! limits; every tenant can have a deadline ([`Watchdog`]); the [`Sentinel`] notices a host
//! that stops responding; teardown freezes and kills every process and removes every object,
//! on drop too. Every object is named after its run ([`RunId`]), so [`cleanup()`] can remove
//! what a killed run left behind, and each new run ([`RunGuard::start`]) sweeps dead runs first.
//!
//! Configuration errors ([`LimitError`], [`PlatformError`]) name the value and the fix, and
//! are raised before anything is created.
#![deny(missing_docs)]

pub mod agent;
pub mod apply;
pub mod beside;
pub mod blockdev;
pub mod cgroup;
pub mod cleanup;
mod cmd;
mod container;
pub mod doctor;
pub mod error;
mod flatkeyed;
pub mod guard;
pub mod hostinfo;
pub mod iocost;
pub mod k8s;
pub mod leftovers;
pub mod limits;
pub mod live;
mod local;
pub mod lockfile;
pub mod memprot;
pub mod net;
pub mod noise;
pub mod oci;
pub mod procs;
pub mod run;
pub mod sched;
pub mod sentinel;
pub mod staticexe;
pub mod tenant;
/// Skipping a unit test with its reason, recorded for `scripts/test`'s list (test-only).
#[cfg(test)]
#[path = "../../../tests/skip.rs"]
pub(crate) mod test_skip;
pub mod usage;
pub mod userimage;
pub mod vm;
pub mod watchdog;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use anyhow::Result;
use serde::Serialize;

pub use agent::{AgentConnection, AgentLaunch, AgentProcess, Transport};
pub use beside::Beside;
pub use blockdev::{device_for_path, BlockDevice, DevNum};
pub use cgroup::{CgroupFs, CgroupVersion, Controller};
pub use cleanup::{cleanup, CleanupReport, Failure, ObjectKind, Removed};
pub use doctor::{doctor, Check};
pub use error::PlatformError;
pub use guard::RunGuard;
pub use hostinfo::HostInfo;
pub use iocost::IoCost;
pub use limits::{CpuList, CpuWeight, CpusetPartition, LimitError, Limits};
pub use live::{Knob, KnobSet, LimitChanges, LiveKnobs};
pub use net::NetSpec;
pub use run::{Liveness, MeasureSlot, RunContext, RunController, RunId, SharedSlot, SlotHolder};
pub use sentinel::{Sentinel, SentinelConfig, SentinelPriority, Stall};
pub use tenant::{Killer, Role, Tenant, TenantInfo, TenantSpec};
pub use usage::{Usage, UsageRates};
pub use watchdog::Watchdog;

/// A platform's name: `host`, `cgroup`, ... Each platform module defines its own, and
/// [`PLATFORMS`] lists them; the engine never tests a name, it asks [`Capabilities`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PlatformKind(&'static str);

impl PlatformKind {
    /// Plain processes, no isolation: the baseline.
    pub const HOST: PlatformKind = PlatformKind::new("host");
    /// One cgroup per tenant (v1 or v2).
    pub const CGROUP: PlatformKind = PlatformKind::new("cgroup");

    /// A platform named `name` (lower case; what the command line and scenarios use).
    pub const fn new(name: &'static str) -> PlatformKind {
        PlatformKind(name)
    }

    /// The name used on the command line and in scenario files.
    pub fn name(self) -> &'static str {
        self.0
    }

    /// The platform's line in [`PLATFORMS`].
    pub fn entry(self) -> &'static PlatformEntry {
        PLATFORMS
            .iter()
            .find(|e| e.kind == self)
            .expect("every PlatformKind comes from the PLATFORMS table")
    }

    /// What the platform can do.
    pub fn capabilities(self) -> Capabilities {
        self.entry().caps
    }
}

impl fmt::Display for PlatformKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

impl Serialize for PlatformKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for PlatformKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<PlatformKind, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// What a platform can do. The engine asks these, never which platform it runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Capabilities {
    /// Resource limits (cpus, memory, pids, io) are enforced.
    pub enforces_limits: bool,
    /// Aggressive stressors (fork bomb, memory hog, disk flood) stay inside their tenant.
    pub contains_aggressors: bool,
    /// A tenant can be held to a set of CPUs.
    pub pins_cpus: bool,
    /// The platform chooses a tenant's CPUs itself: a `cpuset` of N CPUs asks for N CPUs of
    /// the tenant's own, not for those CPU numbers, so the engine pins nothing to CPU
    /// numbers and the tenant's notes say which CPUs it got.
    pub chooses_cpus: bool,
    /// Freezing a tenant stops every process at once (a freezer), not by signals.
    pub freezer: bool,
    /// The CPU limit can change while the tenant runs (the same as `live_knobs` holding
    /// [`Knob::Cpus`]).
    pub live_cpu_limit: bool,
    /// The knobs that can change while a tenant runs ([`Tenant::update_limits`]), and why
    /// the others cannot.
    pub live_knobs: LiveKnobs,
    /// A tenant can have its own address on the run's bridge.
    pub own_network: bool,
    /// [`Tenant::spawn`] can start more processes inside a tenant.
    pub exec: bool,
    /// How the agent is reached.
    pub agent: Transport,
    /// A tenant can run from the user's own container image (`TenantSpec::image`), with
    /// the agent mounted into it.
    pub runs_images: bool,
}

/// One platform: its name, what it can do, how to build it, and its cleanup sweep.
pub struct PlatformEntry {
    /// Its name.
    pub kind: PlatformKind,
    /// Other names accepted on the command line and in scenarios.
    pub aliases: &'static [&'static str],
    /// One line for listings.
    pub summary: &'static str,
    /// What it can do.
    pub caps: Capabilities,
    /// Builds it. Errors with [`PlatformError::Unavailable`] (why, and the fix) when it
    /// cannot work here; nothing is created then.
    pub build: fn(PlatformOptions, HostInfo) -> Result<Box<dyn Platform>>,
    /// Whether it can work here, cheaply and without creating anything.
    pub available: fn() -> Result<(), PlatformError>,
    /// Removes what runs on this platform left behind (containers, guests, ...), for the
    /// runs the filter selects. Runs before the sweep of cgroups, namespaces, links and
    /// workdirs that every platform shares.
    pub sweep: fn(&mut dyn cleanup::RunFilter, &mut CleanupReport),
}

impl fmt::Debug for PlatformEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlatformEntry")
            .field("kind", &self.kind)
            .field("caps", &self.caps)
            .finish_non_exhaustive()
    }
}

/// Every platform of this build: adding a platform is a module and a line here. Their
/// sweeps run in this order: `vm`'s (processes, at once) before `oci`'s, whose engine queries
/// take a moment in which an orphaned guest could power off unrecorded; `k8s`'s last (it
/// asks an API server, and gives up quietly after a few seconds when none answers).
pub static PLATFORMS: &[&PlatformEntry] = &[
    &local::HOST,
    &local::CGROUP,
    &vm::ENTRY,
    &oci::ENTRY,
    &k8s::ENTRY,
];

/// The platforms `auto` tries, in order: the first that can work here is used.
pub const AUTO: &[PlatformKind] = &[PlatformKind::CGROUP, PlatformKind::HOST];

/// Platforms of the design that this build does not provide yet.
const PLANNED: &[&str] = &[];

impl FromStr for PlatformKind {
    type Err = PlatformError;
    fn from_str(s: &str) -> Result<PlatformKind, PlatformError> {
        let lower = s.trim().to_ascii_lowercase();
        if let Some(e) = PLATFORMS
            .iter()
            .find(|e| e.kind.name() == lower || e.aliases.contains(&lower.as_str()))
        {
            return Ok(e.kind);
        }
        if PLANNED.contains(&lower.as_str()) {
            return Err(PlatformError::Unavailable {
                kind: lower,
                why: "this build of isobench does not implement it yet".into(),
                fix: format!("use one of {}", platform_names().join(", ")),
            });
        }
        let suggestion = PLATFORMS
            .iter()
            .map(|e| (strsim::jaro_winkler(&lower, e.kind.name()), e.kind.name()))
            .filter(|(score, _)| *score >= 0.7)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, n)| n);
        Err(PlatformError::UnknownPlatform {
            name: s.to_string(),
            suggestion,
        })
    }
}

/// The names of every platform of this build, in table order.
pub fn platform_names() -> Vec<&'static str> {
    PLATFORMS.iter().map(|e| e.kind.name()).collect()
}

/// How to build a platform.
#[derive(Debug, Clone)]
pub struct PlatformOptions {
    /// The run the platform's objects belong to.
    pub run: RunContext,
    /// The cgroup layout to use instead of detecting the host's (e.g. a fake tree in tests).
    pub cgroup_fs: Option<CgroupFs>,
    /// Default parent of tenant workdirs.
    pub workdir_root: PathBuf,
    /// Host facts to check limits against instead of detecting them.
    pub host: Option<HostInfo>,
    /// The container engine of the `oci` platform (`docker` or `podman`); `None` picks
    /// docker when a daemon answers, else podman.
    pub oci_engine: Option<String>,
    /// The init of the `oci` platform's containers (`auto`, `isobench`, or the path of a
    /// static init binary; see [`oci::init`]); `None` reads `ISOBENCH_OCI_INIT`, else `auto`.
    pub oci_init: Option<String>,
    /// The kernel of the `vm` platform's guests; `None` uses the one `isobench vm setup`
    /// cached.
    pub vm_kernel: Option<PathBuf>,
    /// The kubeconfig of the `k8s` platform; `None` uses `KUBECONFIG`, else the one
    /// `scripts/k8s-up` writes.
    pub k8s_kubeconfig: Option<PathBuf>,
    /// io.cost on the workdir's device for the run (`cgroup` platform on cgroup v2 only; see
    /// [`iocost`]); `None` reads `ISOBENCH_IO_COST` (`on`, `off` or io.cost.qos
    /// parameters), else leaves io.cost as it is.
    pub io_cost: Option<IoCost>,
}

impl PlatformOptions {
    /// Options with detection of everything and workdirs under `/var/tmp`.
    pub fn new(run: RunContext) -> PlatformOptions {
        PlatformOptions {
            run,
            cgroup_fs: None,
            workdir_root: run::default_workdir_root(),
            host: None,
            oci_engine: None,
            oci_init: None,
            vm_kernel: None,
            k8s_kubeconfig: None,
            io_cost: None,
        }
    }
}

/// What creates tenants.
pub trait Platform: Send {
    /// Which platform this is.
    fn kind(&self) -> PlatformKind;

    /// One line for the record of a run (e.g. the cgroup version and controller mounts).
    fn describe(&self) -> String;

    /// What the platform can do.
    fn capabilities(&self) -> Capabilities {
        self.kind().capabilities()
    }

    /// Whether the platform enforces resource limits (false for `host`).
    fn enforces_limits(&self) -> bool {
        self.capabilities().enforces_limits
    }

    /// Caveats about this platform's figures on this machine (for example that a guest runs
    /// under software emulation), printed with a run and stored in its record.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// The host facts limits are checked against.
    fn host(&self) -> &HostInfo;

    /// Checks, before the first tenant of a run is created, what can be checked of all of
    /// them at once (that each tenant's image is in the store). Creates nothing; the
    /// default checks nothing.
    fn preflight(&mut self, specs: &[TenantSpec]) -> Result<()> {
        let _ = specs;
        Ok(())
    }

    /// Creates a tenant. Every check (name, limits against the host, controllers, devices,
    /// network prerequisites) happens before anything is created; on error nothing is left.
    fn create_tenant(&mut self, spec: &TenantSpec) -> Result<Box<dyn Tenant>>;

    /// Removes the platform's shared objects (the run's bridge, once no tenant uses it).
    /// Tenants are torn down on their own. Idempotent; also runs on drop.
    fn teardown(&mut self) -> Result<()>;
}

/// Checks that the `cgroup` platform can work here and returns the host's cgroup layout.
pub fn detect_cgroup_platform() -> Result<CgroupFs, PlatformError> {
    let unavailable = |why: String, fix: &str| PlatformError::Unavailable {
        kind: "cgroup".into(),
        why,
        fix: fix.into(),
    };
    if procs::euid() != 0 {
        return Err(unavailable(
            format!(
                "isobench runs as uid {} and creating cgroups needs root",
                procs::euid()
            ),
            "run it as root, or use `--platform host`",
        ));
    }
    let fs = CgroupFs::detect()
        .map_err(|e| unavailable(format!("{e:#}"), "mount cgroupfs, or use `--platform host`"))?;
    for c in [Controller::Cpu, Controller::Memory, Controller::Pids] {
        if !fs.has(c) {
            return Err(unavailable(
                format!("the `{c}` controller is missing ({})", fs.describe()),
                "enable it (kernel config / mount options), or use `--platform host`",
            ));
        }
    }
    Ok(fs)
}

/// Builds a platform. Errors with [`PlatformError::Unavailable`] (naming why and the fix)
/// when it cannot work here; nothing is created then.
pub fn platform(kind: PlatformKind, opts: PlatformOptions) -> Result<Box<dyn Platform>> {
    let host = match opts.host.clone() {
        Some(h) => h,
        None => HostInfo::detect()?,
    };
    let mut opts = opts;
    if opts.io_cost.is_none() {
        if let Ok(v) = std::env::var("ISOBENCH_IO_COST") {
            if !v.trim().is_empty() {
                opts.io_cost = Some(
                    v.parse()
                        .map_err(|e: String| anyhow::anyhow!("ISOBENCH_IO_COST: {e}"))?,
                );
            }
        }
    }
    if opts.io_cost.is_some() && kind != PlatformKind::CGROUP {
        anyhow::bail!(
            "--io-cost applies to the `cgroup` platform only (io.cost is set in the host's \
             root cgroup for the tenants' disk); the `{kind}` platform cannot set it, so remove \
             --io-cost (or ISOBENCH_IO_COST) or use the `cgroup` platform"
        );
    }
    (kind.entry().build)(opts, host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_cost_is_refused_off_the_cgroup_platform() {
        let guard = RunGuard::start().unwrap();
        let mut opts = PlatformOptions::new(guard.context());
        opts.io_cost = Some(IoCost::on());
        let e = platform(PlatformKind::HOST, opts)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("--io-cost applies to the `cgroup` platform only") && e.contains("`host`"),
            "{e}"
        );
    }

    #[test]
    fn platform_names() {
        assert_eq!("host".parse::<PlatformKind>().unwrap(), PlatformKind::HOST);
        assert_eq!(
            "CGroup".parse::<PlatformKind>().unwrap(),
            PlatformKind::CGROUP
        );
        let e = "cgrop".parse::<PlatformKind>().unwrap_err().to_string();
        assert!(e.contains("did you mean `cgroup`"), "{e}");
        assert_eq!("kubernetes".parse::<PlatformKind>().unwrap(), k8s::KIND);
    }
}
