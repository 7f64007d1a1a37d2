//! A place *beside* a tenant: processes on the host, in no tenant's cgroups, but in the
//! tenant's network (its own namespace when it has one).
//!
//! Why: a load generator measuring a tenant's server from outside (paper 001 ran one client
//! machine per web server) must not share the served tenant's CPU, memory or pids limits, and
//! must reach the server on loopback, which for a tenant with its own network namespace is
//! the namespace's loopback. [`Beside`] implements [`Tenant`] so the same agent driver runs
//! probes there; it has no limits, cannot be frozen, and kills what it started at teardown.

use std::fs::{self, File};
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};

use crate::limits::Limits;
use crate::procs;
use crate::tenant::{Killer, Tenant, TenantInfo};
use crate::usage::Usage;

/// Processes beside a tenant: on the host, in the tenant's network.
#[derive(Debug)]
pub struct Beside {
    info: TenantInfo,
    netns: Option<PathBuf>,
    run: String,
    pids: Arc<Mutex<Vec<i32>>>,
}

impl Beside {
    /// A place beside the tenant described by `served`, for run `run`: named
    /// `beside-<tenant>`, with a workdir of its own next to the tenant's (created now,
    /// removed at teardown).
    pub fn new(served: &TenantInfo, run: &str) -> Result<Beside> {
        let mut info = served.clone();
        info.name = format!("beside-{}", served.name);
        info.object_name = format!("{}-beside", served.object_name);
        info.limits = Limits::none();
        info.notes = vec![format!(
            "outside every tenant, in the network of tenant {}",
            served.name
        )];
        info.cgroups = Vec::new();
        info.address = None;
        info.host_link = None;
        info.netns_link = None;
        info.io_device = None;
        info.deadline_s = None;
        info.workdir = served.workdir.with_file_name(format!(
            "{}-beside",
            served
                .workdir
                .file_name()
                .map_or_else(|| served.name.clone(), |n| n.to_string_lossy().into_owned())
        ));
        fs::create_dir_all(&info.workdir)
            .with_context(|| format!("creating {}", info.workdir.display()))?;
        Ok(Beside {
            netns: served
                .netns
                .as_ref()
                .map(|n| PathBuf::from("/run/netns").join(n)),
            info,
            run: run.to_string(),
            pids: Arc::new(Mutex::new(Vec::new())),
        })
    }

    fn kill_all(pids: &Mutex<Vec<i32>>) -> usize {
        let pids: Vec<i32> = std::mem::take(&mut *pids.lock().unwrap_or_else(|p| p.into_inner()));
        let killed: Vec<i32> = pids.into_iter().filter(|&p| procs::killpg9(p)).collect();
        procs::wait_gone(&killed, std::time::Duration::from_secs(5));
        killed.len()
    }
}

impl Tenant for Beside {
    fn name(&self) -> &str {
        &self.info.name
    }

    fn info(&self) -> &TenantInfo {
        &self.info
    }

    /// Starts `cmd` on the host (the caller's cgroups), in the served tenant's network
    /// namespace when it has one, in a new process group, with `ISOBENCH_RUN` set (so
    /// `isobench cleanup` finds it) but not `ISOBENCH_TENANT` (killing the served tenant's
    /// processes leaves it alone).
    fn start_agent(&self, launch: &crate::agent::AgentLaunch) -> Result<crate::AgentConnection> {
        crate::tenant::start_local_agent(self, launch)
    }

    fn spawn(&self, mut cmd: Command) -> Result<Child> {
        cmd.env(procs::ENV_RUN, &self.run)
            .env(procs::ENV_WORKDIR, &self.info.workdir);
        if cmd.get_current_dir().is_none() {
            cmd.current_dir(&self.info.workdir);
        }
        cmd.process_group(0);
        if let Some(p) = &self.netns {
            let fd: OwnedFd = File::open(p)
                .with_context(|| format!("opening network namespace {}", p.display()))?
                .into();
            // SAFETY: the closure only calls setns(2) on a descriptor it owns.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = cmd.spawn().with_context(|| {
            format!(
                "starting `{}` beside tenant {}",
                cmd.get_program().to_string_lossy(),
                self.info.name
            )
        })?;
        self.pids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(child.id() as i32);
        Ok(child)
    }

    /// CPU time of the processes started here that still run (utime + stime + reaped
    /// children's).
    fn usage(&self) -> Result<Usage> {
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        let pids = self.pids.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut ticks = 0;
        for p in pids {
            if let Some(stat) = procs::stat(p) {
                ticks += procs::cpu_ticks(&stat);
            }
        }
        Ok(Usage {
            cpu_time_ns: Some(ticks * (1_000_000_000 / hz)),
            ..Usage::default()
        })
    }

    fn effective_limits(&self) -> Result<Limits> {
        Ok(Limits::none())
    }

    fn address(&self) -> Option<IpAddr> {
        None
    }

    fn workdir(&self) -> &Path {
        &self.info.workdir
    }

    fn killer(&self) -> Killer {
        let pids = self.pids.clone();
        Killer::new(self.info.name.clone(), move || Ok(Beside::kill_all(&pids)))
    }

    fn set_frozen(&self, _frozen: bool) -> Result<()> {
        bail!(
            "{} is outside every tenant and cannot be frozen",
            self.info.name
        )
    }

    fn update_limits(&self, _changes: &crate::live::LimitChanges) -> Result<Limits> {
        bail!(
            "{} is outside every tenant and has no limits to change",
            self.info.name
        )
    }

    fn expired(&self) -> bool {
        false
    }

    fn teardown(&self) -> Result<()> {
        Beside::kill_all(&self.pids);
        if self.info.workdir.exists() {
            fs::remove_dir_all(&self.info.workdir)
                .with_context(|| format!("removing {}", self.info.workdir.display()))?;
        }
        Ok(())
    }
}

impl Drop for Beside {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}
