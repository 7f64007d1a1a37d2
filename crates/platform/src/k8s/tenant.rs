//! One tenant of the `k8s` platform: a pod that lives as long as the tenant (the tenant
//! itself is [`ContainerTenant`], shared with `oci`).
//!
//! The pod's container runs a sleeper; the agent and every other process are started with
//! `kubectl exec -i`, so they land in the container's cgroups and namespaces. The pod's
//! cgroups on this machine (found through the sleeper) are read back, frozen and killed in
//! by isobench directly.

use std::ffi::OsString;
use std::fs;
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::kubectl::Kubectl;
use super::CONTAINER;
use crate::cgroup::Controller;
use crate::container::{Container, ContainerTenant, Runtime};
use crate::limits::Limits;
use crate::live::LimitChanges;
use crate::usage::Usage;

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

/// The `k8s` side of a container tenant: the pod and how to reach it.
pub(crate) struct Pod {
    /// The program that sets a process's extra variables: the agent image's busybox
    /// `env`, or the mounted busybox's in a user's image.
    pub(crate) env: Vec<&'static str>,
    pub(crate) kubectl: Kubectl,
    pub(crate) namespace: String,
    pub(crate) pod: String,
}

/// A tenant of the `k8s` platform; the container's own process (its `keep`) is the
/// sleeper: the pod ends when it does.
pub(crate) type K8sTenant = ContainerTenant<Pod>;

impl Runtime for Pod {
    fn describe(&self) -> String {
        format!("pod {}/{}", self.namespace, self.pod)
    }

    fn cli(&self) -> &Path {
        self.kubectl.bin()
    }

    /// kubectl's arguments that run `program args` in the pod with `env` added. The process
    /// starts in the container's working directory (the workdir) and inherits the
    /// container's environment, which carries the tenant's tags; another directory is
    /// refused.
    fn exec_args(
        &self,
        c: &Container,
        program: OsString,
        args: Vec<OsString>,
        dir: &Path,
        env: Vec<(OsString, OsString)>,
    ) -> Result<Vec<OsString>> {
        if dir != c.info.workdir {
            bail!(
                "tenant {}: `{}` asks for the directory {}, but `kubectl exec` starts \
                 processes only in the pod's working directory, the workdir {}",
                c.info.name,
                program.to_string_lossy(),
                dir.display(),
                c.info.workdir.display()
            );
        }
        let mut v: Vec<OsString> = self
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
                &self.namespace,
                &self.pod,
                "-c",
                CONTAINER,
                "--",
            ]
            .map(OsString::from),
        );
        if !env.is_empty() {
            v.extend(self.env.iter().map(OsString::from));
            for (k, val) in env {
                let mut kv = k;
                kv.push("=");
                kv.push(val);
                v.push(kv);
            }
        }
        v.push(program);
        v.extend(args);
        Ok(v)
    }

    fn remove(&self) -> Result<()> {
        delete_pod(&self.kubectl, &self.namespace, &self.pod)
    }

    /// The container's cgroup usage; the pids limit's hits are counted where the limit is,
    /// on the pod's cgroup.
    fn usage(&self, c: &Container) -> Result<Usage> {
        let mut u = c.cgroup.usage();
        if let Some(pod) = c.cgroup.dir_of(Controller::Pids).and_then(Path::parent) {
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
    fn effective_limits(&self, c: &Container) -> Result<Limits> {
        let mut l = c
            .cgroup
            .read_limits(None)
            .with_context(|| format!("reading the limits of {}", self.describe()))?;
        if l.pids.is_none() {
            if let Some(dir) = c.cgroup.dir_of(Controller::Pids) {
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

    fn update_limits(&self, c: &Container, changes: &LimitChanges) -> Result<Limits> {
        super::CAPS
            .live_knobs
            .refuse("k8s", changes)
            .with_context(|| format!("changing the limits of tenant {}", c.info.name))?;
        self.effective_limits(c)
    }

    fn address(&self, _: &Container) -> Option<IpAddr> {
        None
    }
}
