//! The `host` and `cgroup` platforms: tenants made of local processes, contained (or not) by
//! a cgroup, with an optional network namespace.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::agent::Transport;
use crate::cgroup::placement::{self, Delegation};
use crate::cgroup::{CgroupFs, TenantCgroup};
use crate::error::PlatformError;
use crate::hostinfo::HostInfo;
use crate::leftovers::{CleanupReport, RunFilter};
use crate::net::{self, RunNet};
use crate::run::RunContext;
use crate::tenant::{Inner, Jail, LocalTenant, Role, Tenant, TenantInfo, TenantSpec};
use crate::PlatformOptions;
use crate::{detect_cgroup_platform, Capabilities, Platform, PlatformEntry, PlatformKind};

/// `host`: plain processes, no isolation (the baseline every platform is measured against).
pub(crate) static HOST: PlatformEntry = PlatformEntry {
    kind: PlatformKind::HOST,
    aliases: &[],
    summary: "plain processes, no isolation (the baseline)",
    caps: Capabilities {
        enforces_limits: false,
        contains_aggressors: false,
        pins_cpus: false,
        chooses_cpus: false,
        freezer: false,
        live_cpu_limit: false,
        live_knobs: crate::LiveKnobs {
            knobs: crate::KnobSet::NONE,
            why_not: "it runs plain processes without isolation, so no knob applies; use the \
                      `cgroup` platform",
        },
        own_network: true,
        exec: true,
        agent: Transport::Stdio,
        runs_images: false,
    },
    build: |opts, host| {
        Ok(Box::new(LocalPlatform::new(
            PlatformKind::HOST,
            opts.run,
            host,
            None,
            opts.workdir_root,
        )))
    },
    available: || Ok(()),
    sweep: no_sweep,
};

/// `cgroup`: one cgroup per tenant, v1 or v2.
pub(crate) static CGROUP: PlatformEntry = PlatformEntry {
    kind: PlatformKind::CGROUP,
    aliases: &["cgroups"],
    summary: "one cgroup per tenant (v1 or v2), with an optional network namespace",
    caps: Capabilities {
        enforces_limits: true,
        contains_aggressors: true,
        pins_cpus: true,
        chooses_cpus: false,
        freezer: true,
        live_cpu_limit: true,
        live_knobs: crate::LiveKnobs {
            knobs: crate::KnobSet::ALL,
            why_not: "every knob can change",
        },
        own_network: true,
        exec: true,
        agent: Transport::Stdio,
        runs_images: false,
    },
    build: build_cgroup,
    available: || detect_cgroup_platform().map(|_| ()),
    sweep: no_sweep,
};

fn build_cgroup(opts: PlatformOptions, host: HostInfo) -> Result<Box<dyn Platform>> {
    let fs = match opts.cgroup_fs {
        Some(fs) => fs,
        None => detect_cgroup_platform()?,
    };
    let io_cost = match &opts.io_cost {
        None => None,
        Some(cost) => {
            let dev = crate::blockdev::device_for_path(&opts.workdir_root).map_err(|why| {
                anyhow::anyhow!(
                    "--io-cost {cost}: io.cost is set for the disk of the workdirs {}, but {why}",
                    opts.workdir_root.display()
                )
            })?;
            Some(crate::iocost::apply(
                &fs,
                dev.dev,
                cost,
                opts.run.id().as_str(),
            )?)
        }
    };
    let mut p = LocalPlatform::cgroup(opts.run, host, fs, opts.workdir_root)?;
    p.io_cost = io_cost;
    Ok(Box::new(p))
}

/// Local tenants leave only what the shared sweep removes (cgroups, namespaces, links,
/// processes, workdirs).
fn no_sweep(_: &mut dyn RunFilter, _: &mut CleanupReport) {}

pub(crate) struct LocalPlatform {
    kind: PlatformKind,
    run: RunContext,
    host: HostInfo,
    fs: Option<CgroupFs>,
    net: std::sync::Arc<RunNet>,
    names: BTreeSet<String>,
    workdir_root: PathBuf,
    /// io.cost as the run set it, put back at teardown.
    io_cost: Option<crate::iocost::IoCostSetting>,
    /// Where the tenants' cgroups go on v2 (a systemd scope, a given cgroup), held for the
    /// run; declared last, so it goes after everything else.
    delegation: Option<Delegation>,
}

impl LocalPlatform {
    pub(crate) fn new(
        kind: PlatformKind,
        run: RunContext,
        host: HostInfo,
        fs: Option<CgroupFs>,
        workdir_root: PathBuf,
    ) -> LocalPlatform {
        LocalPlatform {
            kind,
            net: RunNet::for_run(run.id()),
            run,
            host,
            fs,
            names: BTreeSet::new(),
            workdir_root,
            io_cost: None,
            delegation: None,
        }
    }

    /// The `cgroup` platform on `fs`: on cgroup v2 the run's tenants go where
    /// [`placement::for_run`] puts them (a delegated systemd scope under systemd).
    pub(crate) fn cgroup(
        run: RunContext,
        host: HostInfo,
        fs: CgroupFs,
        workdir_root: PathBuf,
    ) -> Result<LocalPlatform> {
        let (fs, delegation) = placement::for_run(fs, &run)?;
        let mut p = LocalPlatform::new(PlatformKind::CGROUP, run, host, Some(fs), workdir_root);
        p.delegation = delegation;
        Ok(p)
    }
}

impl Platform for LocalPlatform {
    fn kind(&self) -> PlatformKind {
        self.kind
    }

    fn describe(&self) -> String {
        let Some(fs) = &self.fs else {
            return "host: plain processes, no isolation".into();
        };
        let mut s = fs.describe();
        if let Some(d) = &self.delegation {
            s.push_str(&format!("; {}", d.describe()));
        }
        if let Some(cost) = &self.io_cost {
            s.push_str(&format!("; {}", cost.describe()));
        }
        s
    }

    fn notes(&self) -> Vec<String> {
        self.io_cost.iter().map(|c| c.describe()).collect()
    }

    fn host(&self) -> &HostInfo {
        &self.host
    }

    fn create_tenant(&mut self, spec: &TenantSpec) -> Result<Box<dyn Tenant>> {
        // ---- Checks: nothing is created before all of them pass. ----
        crate::tenant::check_spec(spec, &self.names, &self.host, self.kind)?;
        let mut limits = spec.limits.clone();
        let mut notes = Vec::new();
        match &self.fs {
            None => {
                if let Some(key) = limits.resource_keys().first() {
                    return Err(PlatformError::NotEnforceable {
                        key,
                        platform: "host",
                        why: "it runs plain processes without isolation",
                        fix: "the `cgroup` platform",
                    }
                    .into());
                }
                if spec.role == Role::Aggressor {
                    notes.push("host platform: no containment for aggressive workloads".into());
                }
            }
            Some(_) => {
                if spec.role == Role::Aggressor {
                    let (l, filled) = limits.with_safe_defaults(&self.host);
                    notes.extend(filled.into_iter().map(|f| format!("safe default {f}")));
                    limits = l;
                }
            }
        }
        let (parent, device) =
            crate::tenant::workdir_device(spec, &self.workdir_root, &mut limits, &mut notes)?;
        if let Some(fs) = &self.fs {
            TenantCgroup::check(fs, &limits)?;
            TenantCgroup::check_knobs(fs, &limits)?;
        }
        if spec.network.is_some() {
            net::check_available().map_err(|why| PlatformError::Unavailable {
                kind: "network namespace".into(),
                why,
                fix: "run isobench as root with iproute2 installed, or give the tenant no network"
                    .into(),
            })?;
        }

        // ---- Creation, undone step by step on error. ----
        let object = self.run.id().object_name(&spec.name);
        self.run.record_workdir_parent(&parent)?;
        let workdir = parent.join(&object);
        fs::create_dir(&workdir)
            .with_context(|| format!("creating the workdir {}", workdir.display()))?;
        let jail = match &self.fs {
            Some(fs) => {
                match TenantCgroup::create(fs, &object, &limits, device.as_ref().map(|d| d.dev)) {
                    Ok(cg) => Jail::Cgroup(cg),
                    Err(e) => {
                        let _ = fs::remove_dir_all(&workdir);
                        return Err(
                            e.context(format!("creating the cgroup of tenant {}", spec.name))
                        );
                    }
                }
            }
            None => Jail::Host {
                pgids: Mutex::new(Vec::new()),
                seen: Mutex::new(BTreeMap::new()),
            },
        };
        let tenant_net = match &spec.network {
            Some(ns) => match self.net.create_tenant(&object, ns, &limits) {
                Ok(n) => Some(n),
                Err(e) => {
                    if let Jail::Cgroup(cg) = &jail {
                        let _ = cg.remove(Duration::from_secs(5));
                    }
                    let _ = fs::remove_dir_all(&workdir);
                    return Err(e);
                }
            },
            None => None,
        };
        let info = TenantInfo {
            name: spec.name.clone(),
            role: spec.role,
            platform: self.kind,
            object_name: object,
            limits,
            notes,
            cgroups: match &jail {
                Jail::Cgroup(cg) => cg.dirs(),
                Jail::Host { .. } => Vec::new(),
            },
            netns: tenant_net.as_ref().map(|n| n.netns().to_string()),
            address: tenant_net.as_ref().map(|n| n.address()),
            host_link: tenant_net.as_ref().map(|n| n.host_link().to_string()),
            netns_link: tenant_net.as_ref().map(|n| n.netns_link().to_string()),
            workdir,
            io_device: device,
            deadline_s: spec.deadline.map(|d| d.as_secs_f64()),
            image: None,
        };
        let inner = Inner {
            netns_path: tenant_net.as_ref().map(|n| n.netns_path()),
            net: Mutex::new(tenant_net),
            info,
            jail,
            workdir_created: true,
            run: self.run.clone(),
            torn_down: AtomicBool::new(false),
        };
        self.names.insert(spec.name.clone());
        Ok(Box::new(LocalTenant::new(inner)))
    }

    fn teardown(&mut self) -> Result<()> {
        // The bridge goes with the last tenant that uses it; io.cost is put back as it was.
        match &mut self.io_cost {
            Some(c) => c.restore(),
            None => Ok(()),
        }
    }
}

impl Drop for LocalPlatform {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}
