//! The `k8s` platform: one pod per tenant on a Kubernetes node of this machine.
//!
//! Draft. `kubectl` is the client ([`kubectl`]), driven with argument vectors and an explicit
//! `--kubeconfig`; manifests are JSON on its stdin (`kubectl apply -f -`). A run's pods live
//! in the namespace `isobench-<run id>` (so [`RunId::from_object_name`] reads the run from
//! it), labelled `isobench.run=<run id>`, and each pod carries `isobench.run` and
//! `isobench.tenant`; the sweep ([`sweep`]) deletes the namespaces of dead runs.
//!
//! Each pod is pinned with `nodeName` to the node of this machine (the one `scripts/k8s-up`
//! labels `isobench/k8s-up=true`, or the only node), because isobench reads the tenant's
//! limits and usage from the pod's cgroups here, and freezes them directly. Limits become
//! `requests = limits` (Guaranteed QoS when both cpus and memory are set; the QoS class is
//! recorded in the tenant's notes); the pids limit is the kubelet's `podPidsLimit`, the same
//! for every pod, so a tenant may only ask for exactly that. What Kubernetes cannot express
//! per pod (cpuset, memory nodes, CPU weight, io limits, network rates, an own network on the
//! run's bridge) is refused before anything is created, with the reason.
//!
//! The image is the `oci` platform's root filesystem imported into the node's containerd
//! ([`image`]). The agent is `/isobench agent` started with `kubectl exec -i`, over its
//! standard streams. Each tenant's workdir is a `hostPath` volume mounted at the same path.

mod image;
pub mod kubectl;
mod sweep;
mod tenant;

pub use image::{containerd_socket, ENV_CONTAINERD};
pub use kubectl::{Kubectl, ENV_KUBECTL};
pub use tenant::{RUN_LABEL, TENANT_LABEL};

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::agent::Transport;
use crate::cgroup::{CgroupFs, TenantCgroup};
use crate::error::PlatformError;
use crate::hostinfo::HostInfo;
use crate::limits::Limits;
use crate::oci::ImageSource;
use crate::run::{RunContext, RunId};
use crate::tenant::{Role, Tenant, TenantInfo, TenantSpec};
use crate::{Capabilities, Platform, PlatformEntry, PlatformKind, PlatformOptions};

/// The platform's name.
pub const KIND: PlatformKind = PlatformKind::new("k8s");

/// The label `scripts/k8s-up` puts on its node.
const NODE_LABEL: &str = "isobench/k8s-up=true";
/// The container of a tenant's pod.
const CONTAINER: &str = "tenant";

/// What pods can do here.
pub const CAPS: Capabilities = Capabilities {
    enforces_limits: true,
    // Kubernetes bounds no block io per pod, so a disk flood is not contained.
    contains_aggressors: false,
    // The static CPU manager chooses a Guaranteed pod's CPUs; isobench cannot.
    pins_cpus: false,
    freezer: true,
    // The kubelet owns the pod's CPU quota.
    live_cpu_limit: false,
    own_network: false,
    exec: true,
    agent: Transport::Stdio,
};

/// The `k8s` line of [`crate::PLATFORMS`].
pub(crate) static ENTRY: PlatformEntry = PlatformEntry {
    kind: KIND,
    aliases: &["kubernetes", "pod", "pods"],
    summary: "one pod per tenant on this machine's Kubernetes node (kubectl), requests = \
              limits, the agent started with kubectl exec",
    caps: CAPS,
    build,
    available,
    sweep: sweep::sweep,
};

fn unavailable(why: impl Into<String>, fix: impl Into<String>) -> PlatformError {
    PlatformError::Unavailable {
        kind: KIND.name().into(),
        why: why.into(),
        fix: fix.into(),
    }
}

const FIX_UP: &str = "start a local cluster with `KUBECONFIG=$(scripts/k8s-up)`";

/// How long [`available`] waits for the API server.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// kubectl and a kubeconfig whose API server answers, or why not.
fn client(explicit: Option<&Path>) -> Result<Kubectl, PlatformError> {
    if crate::procs::euid() != 0 {
        return Err(unavailable(
            format!(
                "isobench runs as uid {} and reading and freezing pods' cgroups needs root",
                crate::procs::euid()
            ),
            "run it as root",
        ));
    }
    let k = Kubectl::new(explicit).map_err(|e| unavailable(format!("{e:#}"), FIX_UP))?;
    k.ready(PROBE_TIMEOUT).map_err(|e| {
        unavailable(
            format!(
                "the API server of {} does not answer: {e:#}",
                k.kubeconfig().display()
            ),
            FIX_UP,
        )
    })?;
    Ok(k)
}

/// Whether pods can be made here: root, kubectl, a kubeconfig whose API server answers
/// within a few seconds, the static isobench binary and busybox for the image. Creates
/// nothing.
pub fn available() -> Result<(), PlatformError> {
    client(None)?;
    ImageSource::find().map_err(|e| {
        unavailable(
            format!("the agent's image cannot be built: {e:#}"),
            "build the static binary with `scripts/build-static` and install busybox-static",
        )
    })?;
    Ok(())
}

fn build(opts: PlatformOptions, host: HostInfo) -> Result<Box<dyn Platform>> {
    Ok(Box::new(K8sPlatform::new(opts, host)?))
}

/// The run's namespace: `isobench-<run id>`.
pub fn namespace(run: &RunId) -> String {
    run.prefix()
}

/// A pod name (a DNS label) for a tenant: the name in lower case with `_` as `-`, and a
/// hash of the original when that changed it, so `A` and `a` stay apart.
pub fn pod_name(tenant: &str) -> String {
    let clean: String = tenant
        .chars()
        .map(|c| match c {
            '_' => '-',
            c => c.to_ascii_lowercase(),
        })
        .collect();
    if clean == tenant {
        return clean;
    }
    let mut h: u32 = 0x811c_9dc5;
    for b in tenant.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{clean}-{:06x}", h & 0xff_ffff)
}

/// Refuses what a pod cannot express, naming the limit and why.
fn refuse_unexpressible(l: &Limits, spec: &TenantSpec) -> Result<(), PlatformError> {
    let no = |key, why, fix| PlatformError::NotEnforceable {
        key,
        platform: "k8s",
        why,
        fix,
    };
    if l.cpuset.is_some() {
        return Err(no(
            "cpuset",
            "the kubelet's static CPU manager chooses a Guaranteed pod's CPUs itself",
            "whole `cpus` with `memory` (a Guaranteed pod gets exclusive CPUs), or the `cgroup` \
             platform",
        ));
    }
    if l.mems.is_some() {
        return Err(no(
            "mems",
            "a pod cannot choose its memory nodes",
            "the `cgroup` platform",
        ));
    }
    if l.cpu_weight.is_some() {
        return Err(no(
            "shares",
            "the kubelet derives a pod's CPU weight from its CPU request",
            "`cpus` (the request sets the weight)",
        ));
    }
    for (key, set) in [
        ("io_read_bps", l.io_read_bps.is_some()),
        ("io_write_bps", l.io_write_bps.is_some()),
        ("io_read_iops", l.io_read_iops.is_some()),
        ("io_write_iops", l.io_write_iops.is_some()),
    ] {
        if set {
            return Err(no(
                key,
                "Kubernetes has no per-pod block io limits",
                "the `cgroup` or `oci` platform",
            ));
        }
    }
    for (key, set) in [
        ("net_egress", l.net_egress.is_some()),
        ("net_ingress", l.net_ingress.is_some()),
    ] {
        if set {
            return Err(no(
                key,
                "pods have no network on the run's bridge to shape",
                "the `cgroup` or `oci` platform",
            ));
        }
    }
    if spec.network.is_some() {
        return Err(PlatformError::Unavailable {
            kind: "network on the run's bridge".into(),
            why: "a pod's network is the cluster's, not the run's bridge".into(),
            fix: "give the tenant no network on the `k8s` platform".into(),
        });
    }
    Ok(())
}

/// The pids limit: the kubelet's `podPidsLimit`, the same for every pod; another value is
/// refused.
fn check_pids(asked: Option<u64>, kubelet: Option<u64>) -> Result<(), PlatformError> {
    match (asked, kubelet) {
        (None, _) => Ok(()),
        (Some(a), Some(k)) if a == k => Ok(()),
        (Some(a), Some(k)) => Err(PlatformError::Refused {
            key: "pids",
            platform: "k8s",
            why: format!(
                "the pids limit of every pod is the kubelet's podPidsLimit={k}, and a tenant \
                 cannot have its own ({a})"
            ),
            fix: format!("ask for pids={k} or remove `pids`"),
        }),
        (Some(a), None) => Err(PlatformError::Refused {
            key: "pids",
            platform: "k8s",
            why: format!(
                "the kubelet sets no podPidsLimit (or its configuration cannot be read), so \
                 pids={a} would not be enforced"
            ),
            fix: "remove `pids`, or configure podPidsLimit on the kubelet".into(),
        }),
    }
}

/// A CPU quantity in millicores.
fn cpu_quantity(cpus: f64) -> String {
    format!("{}m", (cpus * 1000.0).round() as u64)
}

/// The QoS class Kubernetes will give a pod with these limits (requests = limits).
fn expected_qos(l: &Limits) -> &'static str {
    match (l.cpus, l.memory) {
        (Some(_), Some(_)) => "Guaranteed",
        (None, None) => "BestEffort",
        _ => "Burstable",
    }
}

/// The pod's `resources`: requests = limits for cpu and memory.
fn resources(l: &Limits) -> Value {
    let mut r = serde_json::Map::new();
    if let Some(c) = l.cpus {
        r.insert("cpu".into(), Value::String(cpu_quantity(c)));
    }
    if let Some(m) = l.memory {
        r.insert("memory".into(), Value::String(m.to_string()));
    }
    json!({"requests": r.clone(), "limits": r})
}

/// What a pod is made from.
struct PodSpec<'a> {
    run: &'a RunId,
    tenant: &'a str,
    pod: &'a str,
    node: &'a str,
    image: &'a str,
    object: &'a str,
    workdir: &'a Path,
    limits: &'a Limits,
}

/// The manifest (a `List` of the run's namespace and the tenant's pod).
fn manifest(p: &PodSpec<'_>) -> Value {
    let ns = namespace(p.run);
    let w = p.workdir.to_string_lossy();
    json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": ns, "labels": {RUN_LABEL: p.run.as_str()}},
            },
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": p.pod,
                    "namespace": ns,
                    "labels": {RUN_LABEL: p.run.as_str(), TENANT_LABEL: p.tenant},
                },
                "spec": {
                    "nodeName": p.node,
                    "restartPolicy": "Never",
                    // The pause process is PID 1 and reaps the orphans a fork bomb leaves.
                    "shareProcessNamespace": true,
                    "terminationGracePeriodSeconds": 1,
                    "enableServiceLinks": false,
                    "automountServiceAccountToken": false,
                    "containers": [{
                        "name": CONTAINER,
                        "image": p.image,
                        "imagePullPolicy": "Never",
                        "command": ["/bin/sleep", "2147483647"],
                        "workingDir": w,
                        "env": [
                            {"name": crate::procs::ENV_RUN, "value": p.run.as_str()},
                            {"name": crate::procs::ENV_TENANT, "value": p.object},
                            {"name": crate::procs::ENV_WORKDIR, "value": w},
                        ],
                        "resources": resources(p.limits),
                        "volumeMounts": [{"name": "workdir", "mountPath": w}],
                    }],
                    "volumes": [{
                        "name": "workdir",
                        "hostPath": {"path": w, "type": "Directory"},
                    }],
                },
            },
        ],
    })
}

/// What the checks of a tenant settled.
struct Checked {
    limits: Limits,
    notes: Vec<String>,
    parent: PathBuf,
}

/// The `k8s` platform.
pub struct K8sPlatform {
    kubectl: Kubectl,
    run: RunContext,
    host: HostInfo,
    fs: CgroupFs,
    source: ImageSource,
    socket: PathBuf,
    image: Mutex<Option<String>>,
    node: String,
    pods_pids_limit: Option<u64>,
    names: BTreeSet<String>,
    workdir_root: PathBuf,
    /// Whether the run's namespace may exist (a tenant was applied).
    namespace_made: bool,
}

impl K8sPlatform {
    /// Finds kubectl and the kubeconfig (`opts.k8s_kubeconfig`, else `KUBECONFIG`, else
    /// `scripts/k8s-up`'s), checks the API answers, finds this machine's node and its
    /// kubelet's pids limit. Creates nothing; the image is imported with the first tenant.
    pub fn new(opts: PlatformOptions, host: HostInfo) -> Result<K8sPlatform> {
        let kubectl = client(opts.k8s_kubeconfig.as_deref())?;
        let fs = CgroupFs::detect()
            .map_err(|e| unavailable(format!("{e:#}"), "mount cgroupfs (the kubelet needs it)"))?;
        let source = ImageSource::find().map_err(|e| {
            unavailable(
                format!("the agent's image cannot be built: {e:#}"),
                "build the static binary with `scripts/build-static` and install busybox-static",
            )
        })?;
        let node = find_node(&kubectl)?;
        let pods_pids_limit = kubelet_pids_limit(&kubectl, &node);
        Ok(K8sPlatform {
            kubectl,
            socket: image::containerd_socket(),
            run: opts.run,
            host,
            fs,
            source,
            image: Mutex::new(None),
            node,
            pods_pids_limit,
            names: BTreeSet::new(),
            workdir_root: opts.workdir_root,
            namespace_made: false,
        })
    }

    /// The node pods are pinned to.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The agent image's tag, built and imported the first time the node lacks it.
    pub fn image(&self) -> Result<String> {
        let mut slot = self.image.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = slot.as_ref() {
            return Ok(t.clone());
        }
        let tag = image::ensure(&self.socket, &self.source).with_context(|| {
            format!(
                "making the agent image in the node's containerd ({}; set {ENV_CONTAINERD} \
                 for another socket)",
                self.socket.display()
            )
        })?;
        *slot = Some(tag.clone());
        Ok(tag)
    }

    fn check(&self, spec: &TenantSpec) -> Result<Checked> {
        crate::tenant::check_spec(spec, &self.names, &self.host)?;
        let n = &spec.name;
        if !n.starts_with(|c: char| c.is_ascii_alphanumeric())
            || !n.ends_with(|c: char| c.is_ascii_alphanumeric())
        {
            return Err(PlatformError::BadTenantName {
                name: n.clone(),
                why: "a pod's label value must begin and end with a letter or digit",
            }
            .into());
        }
        let mut limits = spec.limits.clone();
        let mut notes = Vec::new();
        refuse_unexpressible(&limits, spec)?;
        check_pids(limits.pids, self.pods_pids_limit)?;
        if spec.role == Role::Aggressor && limits.memory.is_none() {
            let (safe, filled) = limits.with_safe_defaults(&self.host);
            limits.memory = safe.memory;
            notes.extend(
                filled
                    .into_iter()
                    .filter(|f| f.starts_with("memory="))
                    .map(|f| format!("safe default {f}")),
            );
        }
        match self.pods_pids_limit {
            Some(k) => {
                limits.pids = Some(k);
                notes.push(format!("pids={k} is the kubelet's podPidsLimit"));
            }
            None => notes.push("no pids limit: the kubelet sets no podPidsLimit".into()),
        }
        if spec.role == Role::Aggressor {
            notes.push("block io is not bounded: Kubernetes has no per-pod io limits".into());
        }
        let mut scratch = limits.clone();
        let (parent, _device) =
            crate::tenant::workdir_device(spec, &self.workdir_root, &mut scratch, &mut notes)?;
        Ok(Checked {
            limits,
            notes,
            parent,
        })
    }

    /// Waits for the pod to run; its QoS class and container id.
    fn wait_running(&self, ns: &str, pod: &str) -> Result<(String, String)> {
        let end = Instant::now() + Duration::from_secs(90);
        loop {
            let v = self.kubectl.json(&["get", "pod", "-n", ns, pod])?;
            let phase = v["status"]["phase"].as_str().unwrap_or("");
            let cs = &v["status"]["containerStatuses"][0];
            if phase == "Running" && cs["state"]["running"].is_object() {
                let qos = v["status"]["qosClass"].as_str().unwrap_or("?").to_string();
                let cid = cs["containerID"].as_str().unwrap_or("");
                let cid = cid.split_once("://").map_or(cid, |(_, id)| id).to_string();
                if cid.is_empty() {
                    bail!("pod {ns}/{pod} runs but reports no container id");
                }
                return Ok((qos, cid));
            }
            if matches!(phase, "Failed" | "Succeeded") {
                bail!("pod {ns}/{pod} ended ({phase}): {}", status_reason(&v));
            }
            if Instant::now() > end {
                bail!(
                    "pod {ns}/{pod} is not running after 90 s (phase `{phase}`): {}",
                    status_reason(&v)
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The container's main process and its cgroups.
    fn container_cgroup(&self, cid: &str) -> Result<(i32, TenantCgroup)> {
        let pid = container_pid(&self.socket, cid)?;
        let cg = TenantCgroup::of_process(&self.fs, pid)?;
        Ok((pid, cg))
    }

    fn delete_namespace(&self) -> Result<()> {
        let ns = namespace(self.run.id());
        self.kubectl
            .run(
                &[
                    "delete",
                    "namespace",
                    &ns,
                    "--ignore-not-found",
                    "--wait=true",
                    "--timeout=60s",
                ],
                None,
                Duration::from_secs(70),
            )
            .with_context(|| format!("deleting the run's namespace {ns}"))?;
        Ok(())
    }
}

/// Why a pod is not running, from its status (waiting reasons and messages, conditions).
fn status_reason(v: &Value) -> String {
    let mut why = Vec::new();
    if let Some(m) = v["status"]["message"].as_str() {
        why.push(m.to_string());
    }
    if let Some(cs) = v["status"]["containerStatuses"].as_array() {
        for c in cs {
            for k in ["waiting", "terminated"] {
                let s = &c["state"][k];
                if s.is_object() {
                    why.push(format!(
                        "{k}: {} {}",
                        s["reason"].as_str().unwrap_or(""),
                        s["message"].as_str().unwrap_or("")
                    ));
                }
            }
        }
    }
    if why.is_empty() {
        "no reason given".into()
    } else {
        why.join("; ")
    }
}

/// The main process of container `cid`, from containerd (`ctr task ls`).
fn container_pid(socket: &Path, cid: &str) -> Result<i32> {
    let sock = socket.to_string_lossy();
    let out = crate::cmd::run_with_timeout(
        "ctr",
        &["--address", &sock, "-n", "k8s.io", "task", "ls"],
        Duration::from_secs(20),
    )?;
    if !out.success {
        bail!("`ctr task ls` failed: {}", out.stderr.trim());
    }
    for l in out.stdout.lines() {
        let mut f = l.split_whitespace();
        if f.next() == Some(cid) {
            if let Some(pid) = f.next().and_then(|p| p.parse::<i32>().ok()) {
                if pid > 0 {
                    return Ok(pid);
                }
            }
        }
    }
    bail!(
        "containerd at {} has no running task for container {cid}",
        socket.display()
    )
}

/// This machine's node: the one `scripts/k8s-up` labels, else the only one.
fn find_node(k: &Kubectl) -> Result<String> {
    let names = |sel: Option<&str>| -> Result<Vec<String>> {
        let mut a = vec!["get", "nodes"];
        if let Some(s) = sel {
            a.extend(["-l", s]);
        }
        let v = k.json(&a)?;
        Ok(v["items"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default())
    };
    let labelled = names(Some(NODE_LABEL))?;
    if let [one] = labelled.as_slice() {
        return Ok(one.clone());
    }
    match names(None)?.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(unavailable("the cluster has no node", FIX_UP).into()),
        many => Err(unavailable(
            format!(
                "the cluster has {} nodes ({}) and none is labelled {NODE_LABEL}",
                many.len(),
                many.join(", ")
            ),
            "label the node of this machine `isobench/k8s-up=true`",
        )
        .into()),
    }
}

/// The kubelet's `podPidsLimit` (from its `configz`), if it sets one.
fn kubelet_pids_limit(k: &Kubectl, node: &str) -> Option<u64> {
    let path = format!("/api/v1/nodes/{node}/proxy/configz");
    let out = k.query(&["get", "--raw", &path]).ok()?;
    let v: Value = serde_json::from_str(&out).ok()?;
    v["kubeletconfig"]["podPidsLimit"]
        .as_i64()
        .filter(|p| *p > 0)
        .map(|p| p as u64)
}

impl Platform for K8sPlatform {
    fn kind(&self) -> PlatformKind {
        KIND
    }

    fn describe(&self) -> String {
        format!(
            "k8s: node {}, kubeconfig {}, kubectl {}, image {}, podPidsLimit {}; {}",
            self.node,
            self.kubectl.kubeconfig().display(),
            self.kubectl.bin().display(),
            self.image
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
                .unwrap_or_else(|| "not imported yet".into()),
            self.pods_pids_limit
                .map_or_else(|| "none".into(), |p| p.to_string()),
            self.fs.describe()
        )
    }

    fn capabilities(&self) -> Capabilities {
        CAPS
    }

    fn host(&self) -> &HostInfo {
        &self.host
    }

    fn create_tenant(&mut self, spec: &TenantSpec) -> Result<Box<dyn Tenant>> {
        // ---- Checks: nothing is created before all of them pass. ----
        let Checked {
            limits,
            mut notes,
            parent,
        } = self.check(spec)?;
        let image = self.image()?;
        let object = self.run.id().object_name(&spec.name);
        let workdir = parent.join(&object);
        let ns = namespace(self.run.id());
        let pod = pod_name(&spec.name);
        let m = manifest(&PodSpec {
            run: self.run.id(),
            tenant: &spec.name,
            pod: &pod,
            node: &self.node,
            image: &image,
            object: &object,
            workdir: &workdir,
            limits: &limits,
        });

        // ---- Creation, undone step by step on error. ----
        self.run.record_workdir_parent(&parent)?;
        fs::create_dir(&workdir)
            .with_context(|| format!("creating the workdir {}", workdir.display()))?;
        self.namespace_made = true;
        let undo = |k: &Kubectl| {
            let _ = tenant::delete_pod(k, &ns, &pod);
            let _ = fs::remove_dir_all(&workdir);
        };
        if let Err(e) = self.kubectl.apply(&m) {
            undo(&self.kubectl);
            return Err(e.context(format!("creating the pod of tenant {}", spec.name)));
        }
        let started = self
            .wait_running(&ns, &pod)
            .and_then(|(qos, cid)| Ok((qos, self.container_cgroup(&cid)?)));
        let (qos, (pid, cgroup)) = match started {
            Ok(s) => s,
            Err(e) => {
                undo(&self.kubectl);
                return Err(e.context(format!("starting the pod of tenant {}", spec.name)));
            }
        };
        let expected = expected_qos(&limits);
        notes.push(format!("QoS class {qos}"));
        if qos != expected {
            notes.push(format!(
                "expected QoS class {expected}, the cluster chose {qos}"
            ));
        }
        let info = TenantInfo {
            name: spec.name.clone(),
            role: spec.role,
            platform: KIND,
            object_name: object.clone(),
            limits,
            notes,
            cgroups: cgroup.dirs(),
            netns: None,
            address: None,
            host_link: None,
            netns_link: None,
            workdir,
            io_device: None,
            deadline_s: spec.deadline.map(|d| d.as_secs_f64()),
        };
        self.names.insert(spec.name.clone());
        Ok(Box::new(tenant::K8sTenant::new(tenant::Inner {
            info,
            kubectl: self.kubectl.clone(),
            namespace: ns,
            pod,
            keep: vec![pid],
            cgroup,
            run: self.run.clone(),
            torn_down: AtomicBool::new(false),
        })))
    }

    fn teardown(&mut self) -> Result<()> {
        if !std::mem::take(&mut self.namespace_made) {
            return Ok(());
        }
        self.delete_namespace()
    }
}

impl Drop for K8sPlatform {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("isobench: warning: {e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_names_are_dns_labels_and_stay_apart() {
        assert_eq!(pod_name("victim"), "victim");
        assert_eq!(pod_name("web-1"), "web-1");
        let a = pod_name("Victim");
        let b = pod_name("victim_");
        assert!(
            a.starts_with("victim-") && a.len() == "victim-".len() + 6,
            "{a}"
        );
        assert_ne!(a, pod_name("VICTIM"));
        assert!(b.starts_with("victim--"), "{b}");
    }

    #[test]
    fn the_namespace_parses_as_the_runs_object() {
        let id = RunId::parse("1f2e3d4c").unwrap();
        assert_eq!(namespace(&id), "isobench-1f2e3d4c");
        assert_eq!(RunId::from_object_name(&namespace(&id)), Some(id));
    }

    #[test]
    fn limits_become_requests_equal_to_limits() {
        let l = Limits::parse("cpus=1.5,memory=256M").unwrap();
        let r = resources(&l);
        assert_eq!(r["requests"], r["limits"]);
        assert_eq!(r["limits"]["cpu"], "1500m");
        assert_eq!(r["limits"]["memory"], "268435456");
        assert_eq!(expected_qos(&l), "Guaranteed");
        assert_eq!(expected_qos(&Limits::parse("cpus=1").unwrap()), "Burstable");
        assert_eq!(expected_qos(&Limits::default()), "BestEffort");
    }

    #[test]
    fn unexpressible_limits_are_refused_by_name() {
        let spec = TenantSpec::new("t", Role::Victim);
        for (text, key) in [
            ("cpuset=0", "cpuset"),
            ("shares=512", "shares"),
            ("io_write_bps=1M", "io_write_bps"),
        ] {
            let e = refuse_unexpressible(&Limits::parse(text).unwrap(), &spec)
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("`{key}`")), "{e}");
        }
        assert!(refuse_unexpressible(&Limits::parse("cpus=1,memory=1G").unwrap(), &spec).is_ok());
    }

    #[test]
    fn a_pids_limit_must_be_the_kubelets() {
        assert!(check_pids(None, Some(1024)).is_ok());
        assert!(check_pids(Some(1024), Some(1024)).is_ok());
        let e = check_pids(Some(50), Some(1024)).unwrap_err().to_string();
        assert!(
            e.contains("`pids`") && e.contains("podPidsLimit=1024"),
            "{e}"
        );
        let e = check_pids(Some(50), None).unwrap_err().to_string();
        assert!(e.contains("no podPidsLimit"), "{e}");
    }

    #[test]
    fn the_manifest_pins_the_pod_and_labels_it() {
        let id = RunId::parse("1f2e3d4c").unwrap();
        let l = Limits::parse("cpus=0.5,memory=64M").unwrap();
        let m = manifest(&PodSpec {
            run: &id,
            tenant: "victim",
            pod: "victim",
            node: "n1",
            image: "isobench.local/isobench-agent:x",
            object: "isobench-1f2e3d4c-victim",
            workdir: Path::new("/var/tmp/isobench-1f2e3d4c-victim"),
            limits: &l,
        });
        assert_eq!(m["items"][0]["metadata"]["name"], "isobench-1f2e3d4c");
        let pod = &m["items"][1];
        assert_eq!(pod["metadata"]["namespace"], "isobench-1f2e3d4c");
        assert_eq!(pod["metadata"]["labels"][RUN_LABEL], "1f2e3d4c");
        assert_eq!(pod["metadata"]["labels"][TENANT_LABEL], "victim");
        assert_eq!(pod["spec"]["nodeName"], "n1");
        let c = &pod["spec"]["containers"][0];
        assert_eq!(c["imagePullPolicy"], "Never");
        assert_eq!(c["resources"]["limits"]["cpu"], "500m");
    }
}
