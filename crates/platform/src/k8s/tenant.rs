//! One tenant of the `k8s` platform: a pod that lives as long as the tenant.
//!
//! The pod's container runs a sleeper; the agent and every other process are started with
//! `kubectl exec -i`, so they land in the container's cgroups and namespaces. The pod's
//! cgroups on this machine (found through the sleeper) are read back, frozen and killed in
//! by isobench directly.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io;
use std::net::IpAddr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

use super::kubectl::Kubectl;
use super::CONTAINER;
use crate::agent::{AgentConnection, AgentLaunch};
use crate::cgroup::{Controller, TenantCgroup};
use crate::limits::Limits;
use crate::oci::exec::{is_isobench, ExecImage};
use crate::run::RunContext;
use crate::tenant::{Killer, Tenant, TenantInfo, Usage};
use crate::watchdog::Watchdog;

/// Label carrying the run id on every namespace and pod.
pub const RUN_LABEL: &str = "isobench.run";
/// Label carrying the tenant name on every pod.
pub const TENANT_LABEL: &str = "isobench.tenant";

/// busybox's `env` in the image: sets the caller's extra variables, then executes the
/// program (not a shell; nothing is interpolated). kubectl exec passes no environment.
pub(crate) const ENV: &str = "/bin/env";

/// Deletes a pod, waiting for it to go.
pub(crate) fn delete_pod(k: &Kubectl, ns: &str, pod: &str) -> Result<()> {
    k.run(
        &[
            "delete",
            "pod",
            "-n",
            ns,
            pod,
            "--ignore-not-found",
            "--grace-period=1",
            "--wait=true",
            "--timeout=60s",
        ],
        None,
        Duration::from_secs(70),
    )?;
    Ok(())
}

/// What `create_tenant` made, shared with the killer and the watchdog.
pub(crate) struct Inner {
    pub(crate) info: TenantInfo,
    /// Where the static isobench is in the container: the agent image's `/isobench`, or
    /// the one mounted into a user's image.
    pub(crate) exe: &'static str,
    /// The program that sets a process's extra variables: the agent image's busybox
    /// `env`, or the mounted busybox's in a user's image.
    pub(crate) env: Vec<&'static str>,
    pub(crate) kubectl: Kubectl,
    pub(crate) namespace: String,
    pub(crate) pod: String,
    /// The container's sleeper: the pod ends when it does, so the killer spares it.
    pub(crate) keep: Vec<i32>,
    pub(crate) cgroup: TenantCgroup,
    pub(crate) run: RunContext,
    pub(crate) torn_down: AtomicBool,
}

impl Inner {
    pub(crate) fn kill_processes(&self) -> Result<usize> {
        Ok(self
            .cgroup
            .kill_all_except(&self.keep, Duration::from_secs(10))
            .with_context(|| format!("killing the processes of tenant {}", self.info.name))?
            .len())
    }

    pub(crate) fn teardown(&self) -> Result<()> {
        if self.torn_down.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let mut errors: Vec<String> = Vec::new();
        // Thaws and kills everything first, the sleeper too: the kubelet then only has an
        // ended container to remove.
        let _ = self.cgroup.kill_all(Duration::from_secs(10));
        if let Err(e) = delete_pod(&self.kubectl, &self.namespace, &self.pod) {
            errors.push(format!("{e:#}"));
        }
        match fs::remove_dir_all(&self.info.workdir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => errors.push(format!("removing {}: {e}", self.info.workdir.display())),
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(anyhow!(
                "tearing down tenant {} (run {}): {}",
                self.info.name,
                self.run.id(),
                errors.join("; ")
            ))
        }
    }
}

/// A tenant of the `k8s` platform.
pub(crate) struct K8sTenant {
    inner: Arc<Inner>,
    expired: Arc<AtomicBool>,
    watchdog: Mutex<Option<Watchdog>>,
}

impl K8sTenant {
    pub(crate) fn new(inner: Inner) -> K8sTenant {
        let inner = Arc::new(inner);
        let target = inner.clone();
        let (watchdog, expired) =
            Watchdog::for_tenant(&inner.info.name, inner.info.deadline_s, move || {
                target.kill_processes()
            });
        K8sTenant {
            inner,
            expired,
            watchdog: Mutex::new(watchdog),
        }
    }

    /// kubectl's arguments that run `program args` in the pod with `env` added. The process
    /// starts in the container's working directory (the workdir) and inherits the
    /// container's environment, which carries the tenant's tags.
    fn exec_args(
        &self,
        program: OsString,
        args: impl IntoIterator<Item = OsString>,
        env: Vec<(OsString, OsString)>,
    ) -> Vec<OsString> {
        let inner = &self.inner;
        let mut v: Vec<OsString> = inner
            .kubectl
            .global_args()
            .into_iter()
            .map(OsString::from)
            .collect();
        v.extend(
            [
                "exec",
                "-i",
                "-n",
                &inner.namespace,
                &inner.pod,
                "-c",
                CONTAINER,
                "--",
            ]
            .map(OsString::from),
        );
        if !env.is_empty() {
            v.extend(inner.env.iter().map(OsString::from));
            for (k, val) in env {
                let mut kv = k;
                kv.push("=");
                kv.push(val);
                v.push(kv);
            }
        }
        v.push(program);
        v.extend(args);
        v
    }
}

impl Tenant for K8sTenant {
    fn name(&self) -> &str {
        &self.inner.info.name
    }

    fn info(&self) -> &TenantInfo {
        &self.inner.info
    }

    /// Runs `cmd` with `kubectl exec -i` in the pod: the isobench binary becomes the image's
    /// `/isobench`, the command's environment is passed through busybox `env` (the host's is
    /// not), and it runs in the workdir (mounted at the same path); another directory is
    /// refused. The returned child is kubectl, which relays the streams and the exit status.
    fn spawn(&self, mut cmd: Command) -> Result<Child> {
        let inner = &self.inner;
        if inner.torn_down.load(Ordering::SeqCst) {
            bail!("tenant {} has been torn down", inner.info.name);
        }
        let program = if is_isobench(cmd.get_program()) {
            OsString::from(inner.exe)
        } else {
            cmd.get_program().to_owned()
        };
        let shown = program.to_string_lossy().into_owned();
        let args: Vec<OsString> = cmd.get_args().map(|a| a.to_owned()).collect();
        if let Some(dir) = cmd.get_current_dir() {
            if dir != inner.info.workdir {
                bail!(
                    "tenant {}: `{shown}` asks for the directory {}, but `kubectl exec` starts \
                     processes only in the pod's working directory, the workdir {}",
                    inner.info.name,
                    dir.display(),
                    inner.info.workdir.display()
                );
            }
        }
        let env: Vec<(OsString, OsString)> = cmd
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
            .collect();
        let argv = self.exec_args(program, args, env);
        let image = ExecImage::new(inner.kubectl.bin(), &argv, std::env::vars_os())?;
        if !inner.info.workdir.is_dir() {
            cmd.current_dir("/");
        }
        cmd.process_group(0);
        // SAFETY: the closure only calls execve(2) with data prepared before the fork.
        unsafe {
            cmd.pre_exec(move || Err(image.exec()));
        }
        cmd.spawn().with_context(|| {
            format!(
                "starting `{shown}` in pod {}/{} of tenant {}",
                inner.namespace, inner.pod, inner.info.name
            )
        })
    }

    fn start_agent(&self, launch: &AgentLaunch) -> Result<AgentConnection> {
        let log = File::options()
            .create(true)
            .append(true)
            .open(&launch.log)
            .with_context(|| format!("opening the agent's log {}", launch.log.display()))?;
        let mut cmd = Command::new(self.inner.exe);
        cmd.arg("agent")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log));
        let child = self
            .spawn(cmd)
            .with_context(|| format!("starting the agent in tenant {}", self.name()))?;
        AgentConnection::stdio(child)
    }

    /// The container's cgroup usage; the pids limit's hits are counted where the limit is,
    /// on the pod's cgroup.
    fn usage(&self) -> Result<Usage> {
        let inner = &self.inner;
        let mut u = inner.cgroup.usage();
        if let Some(pod) = inner.cgroup.dir_of(Controller::Pids).and_then(Path::parent) {
            let hits = fs::read_to_string(pod.join("pids.events"))
                .ok()
                .and_then(|t| {
                    t.lines()
                        .find_map(|l| l.strip_prefix("max ").and_then(|n| n.trim().parse().ok()))
                });
            if let Some(h) = hits {
                u.pids_limit_hits = Some(u.pids_limit_hits.unwrap_or(0).max(h));
            }
        }
        Ok(u)
    }

    /// The container's cgroup limits; the pids limit is the pod's (the kubelet sets it on
    /// the pod's cgroup, the parent of the container's).
    fn effective_limits(&self) -> Result<Limits> {
        let inner = &self.inner;
        let mut l = inner.cgroup.read_limits(None).with_context(|| {
            format!(
                "reading the limits of pod {}/{}",
                inner.namespace, inner.pod
            )
        })?;
        if l.pids.is_none() {
            if let Some(dir) = inner.cgroup.dir_of(Controller::Pids) {
                if let Some(pod) = dir.parent() {
                    let f = pod.join("pids.max");
                    let t = fs::read_to_string(&f)
                        .with_context(|| format!("reading {}", f.display()))?;
                    l.pids = t.trim().parse().ok();
                }
            }
        }
        Ok(l)
    }

    fn address(&self) -> Option<IpAddr> {
        None
    }

    fn workdir(&self) -> &Path {
        &self.inner.info.workdir
    }

    fn killer(&self) -> Killer {
        let inner = self.inner.clone();
        Killer::new(self.inner.info.name.clone(), move || inner.kill_processes())
    }

    fn set_frozen(&self, frozen: bool) -> Result<()> {
        self.inner
            .cgroup
            .set_frozen(frozen, crate::cgroup::FREEZE_TIMEOUT)
    }

    fn update_limits(&self, changes: &crate::live::LimitChanges) -> Result<Limits> {
        super::CAPS
            .live_knobs
            .refuse("k8s", changes)
            .with_context(|| format!("changing the limits of tenant {}", self.inner.info.name))?;
        self.effective_limits()
    }

    fn expired(&self) -> bool {
        self.expired.load(Ordering::SeqCst)
    }

    fn teardown(&self) -> Result<()> {
        if let Some(w) = self
            .watchdog
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            w.cancel();
        }
        self.inner.teardown()
    }
}

impl Drop for K8sTenant {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            tracing::warn!("{e:#}");
        }
    }
}
