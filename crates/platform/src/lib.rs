//! Platforms: what creates isolated tenants, runs processes inside them, reads their usage
//! back and tears everything down again.
//!
//! A [`Platform`] creates [`Tenant`]s from a [`TenantSpec`] (name, role, [`Limits`], an
//! optional own network, a workdir, a deadline). `host` runs plain processes (the
//! no-isolation baseline); `cgroup` puts each tenant in its own cgroup, v1 or v2 detected at
//! run time, through a thin layer over cgroupfs ([`cgroup`]). A tenant can also get its own
//! network namespace on a per-run bridge, with rate limits ([`net`]).
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

pub mod beside;
pub mod blockdev;
pub mod cgroup;
pub mod cleanup;
mod cmd;
pub mod doctor;
pub mod error;
pub mod hostinfo;
pub mod limits;
mod local;
pub mod net;
pub mod noise;
pub mod procs;
pub mod run;
pub mod sched;
pub mod sentinel;
pub mod tenant;
pub mod vm;
pub mod watchdog;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use anyhow::Result;
use serde::Serialize;

pub use beside::Beside;
pub use blockdev::{device_for_path, BlockDevice, DevNum};
pub use cgroup::{CgroupFs, CgroupVersion, Controller};
pub use cleanup::{cleanup, CleanupReport, Failure, ObjectKind, Removed};
pub use doctor::{doctor, Check};
pub use error::PlatformError;
pub use hostinfo::HostInfo;
pub use limits::{CpuList, CpuWeight, LimitError, Limits};
pub use net::NetSpec;
pub use run::{RunContext, RunGuard, RunId};
pub use sentinel::{Sentinel, SentinelConfig, SentinelPriority, Stall};
pub use tenant::{Killer, Role, Tenant, TenantInfo, TenantSpec, Usage};
pub use watchdog::Watchdog;

/// The platforms isobench can create tenants on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlatformKind {
    /// Plain processes, no isolation: the baseline.
    Host,
    /// One cgroup per tenant (v1 or v2).
    Cgroup,
}

impl PlatformKind {
    /// Every platform of this build.
    pub const ALL: [PlatformKind; 2] = [PlatformKind::Host, PlatformKind::Cgroup];

    /// The name used on the command line and in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            PlatformKind::Host => "host",
            PlatformKind::Cgroup => "cgroup",
        }
    }
}

impl fmt::Display for PlatformKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Platforms of the design that this build does not provide yet.
const PLANNED: &[&str] = &["oci", "docker", "podman", "vm", "qemu", "k8s", "kubernetes"];

impl FromStr for PlatformKind {
    type Err = PlatformError;
    fn from_str(s: &str) -> Result<PlatformKind, PlatformError> {
        let lower = s.trim().to_ascii_lowercase();
        match lower.as_str() {
            "host" => Ok(PlatformKind::Host),
            "cgroup" | "cgroups" => Ok(PlatformKind::Cgroup),
            p if PLANNED.contains(&p) => Err(PlatformError::Unavailable {
                kind: p.to_string(),
                why: "this build of isobench does not implement it yet".into(),
                fix: "use `host` or `cgroup`".into(),
            }),
            _ => {
                let suggestion = PlatformKind::ALL
                    .iter()
                    .map(|k| (strsim::jaro_winkler(&lower, k.name()), k.name()))
                    .filter(|(score, _)| *score >= 0.7)
                    .max_by(|a, b| a.0.total_cmp(&b.0))
                    .map(|(_, n)| n);
                Err(PlatformError::UnknownPlatform {
                    name: s.to_string(),
                    suggestion,
                })
            }
        }
    }
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
}

impl PlatformOptions {
    /// Options with detection of everything and workdirs under `/var/tmp`.
    pub fn new(run: RunContext) -> PlatformOptions {
        PlatformOptions {
            run,
            cgroup_fs: None,
            workdir_root: run::default_workdir_root(),
            host: None,
        }
    }
}

/// What creates tenants.
pub trait Platform: Send {
    /// Which platform this is.
    fn kind(&self) -> PlatformKind;

    /// One line for the record of a run (e.g. the cgroup version and controller mounts).
    fn describe(&self) -> String;

    /// Whether the platform enforces resource limits (false for `host`).
    fn enforces_limits(&self) -> bool;

    /// The host facts limits are checked against.
    fn host(&self) -> &HostInfo;

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
    let host = match opts.host {
        Some(h) => h,
        None => HostInfo::detect()?,
    };
    let fs = match kind {
        PlatformKind::Host => None,
        PlatformKind::Cgroup => Some(match opts.cgroup_fs {
            Some(fs) => fs,
            None => detect_cgroup_platform()?,
        }),
    };
    Ok(Box::new(local::LocalPlatform::new(
        kind,
        opts.run,
        host,
        fs,
        opts.workdir_root,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platform_names() {
        assert_eq!("host".parse::<PlatformKind>().unwrap(), PlatformKind::Host);
        assert_eq!(
            "CGroup".parse::<PlatformKind>().unwrap(),
            PlatformKind::Cgroup
        );
        let e = "cgrop".parse::<PlatformKind>().unwrap_err().to_string();
        assert!(e.contains("did you mean `cgroup`"), "{e}");
        let e = "docker".parse::<PlatformKind>().unwrap_err().to_string();
        assert!(
            e.contains("not available") && e.contains("use `host` or `cgroup`"),
            "{e}"
        );
    }
}
