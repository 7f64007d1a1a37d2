//! The `k8s` platform: one pod per tenant on a Kubernetes node of this machine.
//!
//! `kubectl` is the client ([`kubectl`]), driven with argument vectors and an explicit
//! `--kubeconfig`; manifests are JSON on its stdin (`kubectl apply -f -`). A run's pods live
//! in the namespace `isobench-<run id>` (so [`RunId::from_object_name`] reads the run from
//! it), labelled `isobench.run=<run id>`, and each pod carries `isobench.run` and
//! `isobench.tenant`; the sweep ([`sweep`]) deletes the namespaces of dead runs.
//!
//! Each pod is pinned with `nodeName` to the node of this machine (the one `scripts/k8s-up`
//! labels `isobench/k8s-up=true`, or the only node), because isobench reads the tenant's
//! limits and usage from the pod's cgroups here, and freezes them directly. Limits become
//! `requests = limits` (Guaranteed QoS when both cpus and memory are set; the QoS class is
//! recorded in the tenant's notes).
//!
//! CPUs: Kubernetes cannot hold a pod to CPUs the user chooses, only give a Guaranteed pod
//! with whole CPUs that many CPUs of its own, chosen by the kubelet's static CPU manager. So
//! a `cpuset` of N CPUs asks for N exclusive CPUs ([`cpu_placement`]); the engine does not
//! pin to CPU numbers on this platform ([`Capabilities::chooses_cpus`]). When the pod cannot
//! have them (no static policy, no memory limit, too little allocatable CPU left) it runs in
//! the node's shared pool, which excludes every exclusive CPU. Either way the CPUs the pod
//! got are read back from its cgroup and stated in the tenant's notes and limits.
//!
//! pids: the kubelet's `podPidsLimit` bounds every pod alike; a tenant's own lower `pids`
//! is written by isobench to the pod's container cgroup (`pids.max`) before anything runs in
//! it, where every process of the tenant lives ([`pids_plan`]). A higher one is refused.
//! What Kubernetes cannot express per pod (memory nodes, CPU weight, io limits, network
//! rates, an own network on the run's bridge) is refused before anything is created, with
//! the reason.
//!
//! The image is the `oci` platform's root filesystem imported into the node's containerd
//! ([`image`]). The agent is `/isobench agent` started with `kubectl exec -i`, over its
//! standard streams. A tenant with `image` runs from the user's own image instead, which
//! must already be in the node's containerd (`imagePullPolicy: Never`; import it with
//! `scripts/k8s-up --image IMAGE.tar`), with the static isobench and busybox mounted
//! read-only from this machine (`hostPath`) under `/.isobench` ([`crate::userimage`]). Each tenant's workdir is a `hostPath` volume mounted at the same path.

pub mod cluster;
mod image;
pub mod kubectl;
pub mod runner;
mod sweep;
mod tenant;

pub use image::{containerd_socket, ENV_CONTAINERD};
pub use kubectl::{Kubectl, ENV_KUBECTL};
pub use tenant::{RUN_LABEL, TENANT_LABEL};

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use cluster::KubeletConfig;

use crate::agent::Transport;
use crate::cgroup::{CgroupFs, Controller, TenantCgroup};
use crate::container::Container;
use crate::error::PlatformError;
use crate::hostinfo::HostInfo;
use crate::limits::{CpuList, Limits};
use crate::oci::ImageSource;
use crate::run::{RunContext, RunId};
use crate::tenant::{Role, Tenant, TenantInfo, TenantSpec};
use crate::userimage::{self, FoundImage, INJECTED_BUSYBOX, INJECTED_EXE};
use crate::{Capabilities, Platform, PlatformEntry, PlatformKind, PlatformOptions};

/// The platform's name.
pub const KIND: PlatformKind = PlatformKind::new("k8s");

/// The label naming the machine whose isobench made a namespace: a sweep of dead runs leaves
/// other machines' namespaces alone (it cannot tell whether their runs live).
pub const HOST_LABEL: &str = "isobench.host";

/// This machine's [`HOST_LABEL`] value: its host name as a label value (at most 63 of
/// `[A-Za-z0-9._-]`, starting and ending alphanumeric).
pub fn host_label() -> String {
    label_value(&crate::run::hostname())
}

/// `s` as a label value: other characters become `_`, cut to 63, trimmed to alphanumerics.
fn label_value(s: &str) -> String {
    let mut v: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    v.truncate(63);
    v.trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

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
    // A cpuset of N CPUs becomes N exclusive CPUs the kubelet chooses.
    chooses_cpus: true,
    freezer: true,
    // The kubelet owns the pod's CPU quota.
    live_cpu_limit: false,
    live_knobs: crate::LiveKnobs {
        knobs: crate::KnobSet::NONE,
        why_not: "the kubelet owns a pod's cgroup limits, and a pod's resources change only \
                  by recreating it; use the `cgroup` or `oci` platform",
    },
    own_network: false,
    exec: true,
    agent: Transport::Stdio,
    runs_images: true,
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

pub(crate) const FIX_UP: &str = "start a local cluster with `KUBECONFIG=$(scripts/k8s-up)`";

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

/// Why a pod cannot choose its memory nodes.
pub(crate) const MEMS_WHY: &str = "a pod cannot choose its memory nodes";
/// Why a pod has no CPU weight of its own.
pub(crate) const CPU_WEIGHT_WHY: &str =
    "the kubelet derives a pod's CPU weight from its CPU request";
/// Why a pod has no block io limits.
pub(crate) const IO_LIMITS_WHY: &str = "Kubernetes has no per-pod block io limits";
/// Why a pod's network rates are not the run's.
pub(crate) const NET_WHY: &str = "pods have no network on the run's bridge to shape";
/// The knobs a pod spec has no field for, and why.
pub(crate) const NO_POD_FIELD: &[(&str, &str)] = &[
    (
        "memory_min",
        "a pod spec has no field for memory.min (the kubelet's MemoryQoS feature gate derives \
         it from the memory request, for every pod alike)",
    ),
    ("memory_low", "a pod spec has no field for memory.low"),
    (
        "memory_high",
        "a pod spec has no field for memory.high (the kubelet's MemoryQoS feature gate derives \
         it from the memory limit)",
    ),
    (
        "swap",
        "a pod's swap is the node's swapBehavior, not a per-pod setting",
    ),
    ("cpu_burst", "a pod spec has no field for the CFS burst"),
    (
        "cpuset_partition",
        "the kubelet's CPU manager owns the cpusets and makes no partitions",
    ),
    ("io_weight", "Kubernetes has no per-pod I/O weight"),
    ("io_latency", "Kubernetes has no per-pod I/O latency target"),
];

/// Refuses what a pod cannot express, naming the limit and why.
fn refuse_unexpressible(l: &Limits, spec: &TenantSpec) -> Result<(), PlatformError> {
    const CGROUP: &str = "the `cgroup` platform";
    const CGROUP_OR_OCI: &str = "the `cgroup` or `oci` platform";
    PlatformError::refuse_set(l, "k8s", CGROUP, &[("mems", MEMS_WHY)])?;
    if l.cpu_weight.is_some() {
        return Err(PlatformError::NotEnforceable {
            key: "shares",
            platform: "k8s",
            why: CPU_WEIGHT_WHY,
            fix: "`cpus` (the request sets the weight)",
        });
    }
    PlatformError::refuse_set(
        l,
        "k8s",
        CGROUP_OR_OCI,
        &[
            "io_read_bps",
            "io_write_bps",
            "io_read_iops",
            "io_write_iops",
        ]
        .map(|key| (key, IO_LIMITS_WHY)),
    )?;
    PlatformError::refuse_set(l, "k8s", CGROUP, NO_POD_FIELD)?;
    PlatformError::refuse_set(
        l,
        "k8s",
        CGROUP_OR_OCI,
        &["net_egress", "net_ingress"].map(|key| (key, NET_WHY)),
    )?;
    if spec.network.is_some() {
        return Err(PlatformError::Unavailable {
            kind: "network on the run's bridge".into(),
            why: "a pod's network is the cluster's, not the run's bridge".into(),
            fix: "give the tenant no network on the `k8s` platform".into(),
        });
    }
    Ok(())
}

/// How a tenant's pids limit is enforced.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PidsPlan {
    /// What isobench writes to the container's `pids.max`, when it writes anything.
    container: Option<u64>,
    /// The limit the tenant's processes are under.
    effective: Option<u64>,
    /// What was decided, for the tenant's notes.
    note: String,
}

/// The pids limit: the kubelet's `podPidsLimit` bounds every pod; a tenant's own lower
/// limit (or, without a podPidsLimit, any limit, and an aggressor's safe default) is written
/// by isobench to the container's cgroup. More than the podPidsLimit is refused: the pod
/// could never have it.
fn pids_plan(
    asked: Option<u64>,
    kubelet: Option<u64>,
    safe_default: Option<u64>,
) -> Result<PidsPlan, PlatformError> {
    const HOW: &str = "written by isobench to the container's cgroup (pids.max) before \
                       anything runs in it: a pod spec has no pids field";
    Ok(match (asked, kubelet) {
        (Some(a), Some(k)) if a > k => {
            return Err(PlatformError::Refused {
                key: "pids",
                platform: "k8s",
                why: format!(
                    "the kubelet's podPidsLimit={k} bounds every pod, so pids={a} cannot be had"
                ),
                fix: format!("ask for pids={k} or less, or raise podPidsLimit on the kubelet"),
            })
        }
        (Some(a), Some(k)) if a == k => PidsPlan {
            container: None,
            effective: Some(k),
            note: format!("pids={k} is the kubelet's podPidsLimit (the pod's cgroup)"),
        },
        (Some(a), Some(k)) => PidsPlan {
            container: Some(a),
            effective: Some(a),
            note: format!("pids={a} {HOW}; the kubelet's podPidsLimit={k} bounds the pod"),
        },
        (Some(a), None) => PidsPlan {
            container: Some(a),
            effective: Some(a),
            note: format!("pids={a} {HOW}; the kubelet sets no podPidsLimit"),
        },
        (None, Some(k)) => PidsPlan {
            container: None,
            effective: Some(k),
            note: format!("pids={k} is the kubelet's podPidsLimit (the pod's cgroup)"),
        },
        (None, None) => match safe_default {
            Some(d) => PidsPlan {
                container: Some(d),
                effective: Some(d),
                note: format!("safe default pids={d} {HOW}; the kubelet sets no podPidsLimit"),
            },
            None => PidsPlan {
                container: None,
                effective: None,
                note: "no pids limit: the kubelet sets no podPidsLimit".into(),
            },
        },
    })
}

/// Where a tenant's pod runs, CPU-wise.
#[derive(Debug, Clone, PartialEq)]
enum CpuPlacement {
    /// No cpuset asked: wherever the kubelet puts a pod of its QoS class.
    Any,
    /// N CPUs of its own, chosen by the kubelet (a Guaranteed pod with cpu = N).
    Exclusive(u32),
    /// The cpuset asked for, in the node's shared pool, and why it has no CPUs of its own.
    Shared(String),
}

/// How a `cpuset` maps: N exclusive CPUs when the pod can have them (static CPU manager,
/// a memory limit and whole `cpus` for a Guaranteed pod, enough allocatable CPU left on
/// the node, `free_millis`), else the shared pool, with the reason.
fn cpu_placement(l: &Limits, cfg: &KubeletConfig, free_millis: Option<u64>) -> CpuPlacement {
    let Some(set) = &l.cpuset else {
        return CpuPlacement::Any;
    };
    let n = set.len() as u32;
    if !cfg.static_cpus() {
        return CpuPlacement::Shared(format!(
            "the kubelet's CPU manager policy is `{}`, which gives no pod CPUs of its own",
            cfg.policy()
        ));
    }
    if l.memory.is_none() {
        return CpuPlacement::Shared(
            "CPUs of its own need a Guaranteed pod, and the tenant has no memory limit".into(),
        );
    }
    if let Some(c) = l.cpus {
        if (c - f64::from(n)).abs() > 1e-9 {
            return CpuPlacement::Shared(format!(
                "CPUs of its own need cpus equal to the cpuset's {n} whole CPU(s), and the \
                 tenant asks for cpus={c}"
            ));
        }
    }
    match free_millis {
        Some(f) if f < u64::from(n) * 1000 => CpuPlacement::Shared(format!(
            "the node has {} of allocatable CPU left, less than {n} whole CPU(s) (the \
             kubelet's reserved CPUs are never given)",
            cluster::millis_word(f)
        )),
        _ => CpuPlacement::Exclusive(n),
    }
}

/// The CPUs a cgroup's processes may use (`cpuset.cpus.effective` on v2, `cpuset.cpus` on
/// v1).
fn read_cpuset(dir: &Path) -> Result<CpuList> {
    let f = ["cpuset.cpus.effective", "cpuset.cpus"]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
        .with_context(|| format!("{} has no cpuset file", dir.display()))?;
    let t = fs::read_to_string(&f).with_context(|| format!("reading {}", f.display()))?;
    CpuList::parse(t.trim()).map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))
}

/// A CPU quantity in millicores.
pub(crate) fn cpu_quantity(cpus: f64) -> String {
    format!("{}m", (cpus * 1000.0).round() as u64)
}

/// The QoS class Kubernetes will give a pod with these limits (requests = limits).
pub(crate) fn expected_qos(l: &Limits) -> &'static str {
    match (l.cpus, l.memory) {
        (Some(_), Some(_)) => "Guaranteed",
        (None, None) => "BestEffort",
        _ => "Burstable",
    }
}

/// The pod's `resources`: requests = limits for cpu and memory.
pub(crate) fn resources(l: &Limits) -> Value {
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
    /// The agent's files mounted into a user's image (`None`: the agent's own image).
    inject: Option<&'a ImageSource>,
    object: &'a str,
    workdir: &'a Path,
    limits: &'a Limits,
}

/// The manifest (a `List` of the run's namespace and the tenant's pod).
fn manifest(p: &PodSpec<'_>) -> Value {
    let mut m = own_manifest(p);
    if let Some(src) = p.inject {
        let c = &mut m["items"][1]["spec"]["containers"][0];
        c["command"] = json!([INJECTED_BUSYBOX, "sleep", "2147483647"]);
        // Root, as in the agent's own image, whatever USER the image names.
        c["securityContext"] = json!({"runAsUser": 0, "runAsGroup": 0});
        let mut mounts = Vec::new();
        let mut volumes = Vec::new();
        for (name, host, inside) in [
            ("isobench-exe", &src.exe, INJECTED_EXE),
            ("isobench-busybox", &src.busybox, INJECTED_BUSYBOX),
        ] {
            mounts.push(json!({"name": name, "mountPath": inside, "readOnly": true}));
            volumes.push(json!({
                "name": name,
                "hostPath": {"path": host.to_string_lossy(), "type": "File"},
            }));
        }
        if let Some(a) = c["volumeMounts"].as_array_mut() {
            a.extend(mounts);
        }
        if let Some(a) = m["items"][1]["spec"]["volumes"].as_array_mut() {
            a.extend(volumes);
        }
    }
    m
}

/// The manifest of a pod of the agent's own image.
fn own_manifest(p: &PodSpec<'_>) -> Value {
    let ns = namespace(p.run);
    let w = p.workdir.to_string_lossy();
    json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": ns,
                    "labels": {RUN_LABEL: p.run.as_str(), HOST_LABEL: host_label()},
                },
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
    /// The limits the tenant is under (its own, plus what the platform decided).
    limits: Limits,
    /// The limits the pod is made with (`cpus` = N for N exclusive CPUs).
    pod: Limits,
    notes: Vec<String>,
    parent: PathBuf,
    pids: PidsPlan,
    cpus: CpuPlacement,
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
    /// The users' images found in the node's containerd, by reference.
    user_images: BTreeMap<String, FoundImage>,
    node: String,
    kubelet: KubeletConfig,
    /// Why the kubelet's configuration could not be read, when it could not.
    kubelet_unread: Option<String>,
    pods_pids_limit: Option<u64>,
    names: BTreeSet<String>,
    /// The cpuset cgroups of this run's tenants in the shared pool, by tenant.
    shared_pool: Vec<(String, PathBuf)>,
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
        let (kubelet, kubelet_unread) = match cluster::kubelet_config(&kubectl, &node) {
            Ok(c) => (c, None),
            Err(e) => (KubeletConfig::default(), Some(format!("{e:#}"))),
        };
        let pods_pids_limit = kubelet.pids_limit();
        Ok(K8sPlatform {
            kubectl,
            socket: image::containerd_socket(),
            run: opts.run,
            host,
            fs,
            source,
            image: Mutex::new(None),
            user_images: BTreeMap::new(),
            node,
            kubelet,
            kubelet_unread,
            pods_pids_limit,
            names: BTreeSet::new(),
            shared_pool: Vec::new(),
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

    /// The user's image `reference` of tenant `tenant` as the node's containerd has it
    /// (looked up once per run), or an error naming the tenant, the image and how to get it
    /// there.
    fn user_image(&mut self, tenant: &str, reference: &str) -> Result<FoundImage> {
        if let Some(f) = self.user_images.get(reference) {
            return Ok(f.clone());
        }
        let digest = image::local_image(&self.socket, reference).with_context(|| {
            format!(
                "listing the images of the node's containerd ({}; set {ENV_CONTAINERD} for \
                 another socket)",
                self.socket.display()
            )
        })?;
        let Some(digest) = digest else {
            return Err(userimage::missing(
                tenant,
                reference,
                &format!(
                    "the node's containerd ({}, namespace k8s.io, where the kubelet looks for \
                     it as {})",
                    self.socket.display(),
                    userimage::normalized(reference)
                ),
                &format!(
                    "import it there first: `docker save {reference} -o IMAGE.tar` (or \
                     `podman save`), then `scripts/k8s-up --image IMAGE.tar` or `ctr --address \
                     {} -n k8s.io images import IMAGE.tar`",
                    self.socket.display()
                ),
            ));
        };
        let f = FoundImage {
            reference: reference.to_string(),
            id: Some(digest),
            user: None,
        };
        self.user_images.insert(reference.to_string(), f.clone());
        Ok(f)
    }

    fn check(&self, spec: &TenantSpec) -> Result<Checked> {
        crate::tenant::check_spec(spec, &self.names, &self.host, KIND)?;
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
        if let Some(why) = &self.kubelet_unread {
            notes.push(format!(
                "the kubelet's configuration could not be read ({why}): no podPidsLimit and \
                 no static CPU manager assumed"
            ));
        }
        let safe = (spec.role == Role::Aggressor).then(|| limits.with_safe_defaults(&self.host));
        let pids = pids_plan(
            limits.pids,
            self.pods_pids_limit,
            safe.as_ref().and_then(|(l, _)| l.pids),
        )?;
        if let Some((safe, filled)) = &safe {
            if limits.memory.is_none() {
                limits.memory = safe.memory;
                notes.extend(
                    filled
                        .iter()
                        .filter(|f| f.starts_with("memory="))
                        .map(|f| format!("safe default {f}")),
                );
            }
        }
        limits.pids = pids.effective;
        notes.push(pids.note.clone());
        let free = match &limits.cpuset {
            Some(_) => Some(self.free_cpu_millis()?),
            None => None,
        };
        let cpus = cpu_placement(&limits, &self.kubelet, free);
        let mut pod = limits.clone();
        if let CpuPlacement::Exclusive(n) = cpus {
            if pod.cpus.is_none() {
                notes.push(format!(
                    "cpus={n}: CPUs of its own need a Guaranteed pod whose CPU request and \
                     limit are the whole CPUs"
                ));
            }
            pod.cpus = Some(f64::from(n));
            limits.cpus = pod.cpus;
        }
        if spec.role == Role::Aggressor {
            notes.push("block io is not bounded: Kubernetes has no per-pod io limits".into());
        }
        let mut scratch = limits.clone();
        let (parent, _device) =
            crate::tenant::workdir_device(spec, &self.workdir_root, &mut scratch, &mut notes)?;
        Ok(Checked {
            limits,
            pod,
            notes,
            parent,
            pids,
            cpus,
        })
    }

    /// The CPU still allocatable on the node, in millicores: its allocatable CPU less what
    /// the pods bound to it request.
    fn free_cpu_millis(&self) -> Result<u64> {
        let node = cluster::nodes(&self.kubectl)?
            .into_iter()
            .find(|n| n.name == self.node)
            .with_context(|| format!("node {} is gone", self.node))?;
        let Some(alloc) = node.allocatable_cpu_millis else {
            bail!("node {} reports no allocatable CPU", self.node);
        };
        let used = cluster::node_requested_cpu_millis(&self.kubectl, &self.node)?;
        Ok(alloc.saturating_sub(used))
    }

    /// Reads back the CPUs a new tenant got and says in its notes how they came about;
    /// when they are its own, waits until this run's tenants in the shared pool have left
    /// them (the kubelet shrinks the shared pool within its reconcile period). Whether the
    /// tenant has CPUs of its own.
    fn settle_cpus(
        &self,
        spec: &TenantSpec,
        cgroup: &TenantCgroup,
        pod: &Limits,
        placement: &CpuPlacement,
        limits: &mut Limits,
        notes: &mut Vec<String>,
    ) -> Result<bool> {
        let (name, asked) = (&spec.name, &spec.limits);
        let Some(dir) = cgroup.dir_of(Controller::Cpuset) else {
            if asked.cpuset.is_some() {
                bail!("tenant {name}: its pod has no cpuset cgroup to read its CPUs from");
            }
            return Ok(false);
        };
        let got = read_cpuset(dir)?;
        let reserved = self
            .kubelet
            .reserved_system_cpus
            .clone()
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| "none".into());
        let shared_pool = |got: &CpuList| {
            format!(
                "the node's shared pool, now cpu {got} ({} CPU(s)), which excludes every pod's \
                 own CPUs but includes the kubelet's reserved CPUs ({reserved}) where the \
                 cluster's own processes run, and changes as Guaranteed pods come and go",
                got.len()
            )
        };
        let own =
            match placement {
                CpuPlacement::Any => {
                    let whole = pod.cpus.is_some_and(|c| c >= 1.0 && c.fract() == 0.0);
                    let own = self.kubelet.static_cpus() && whole && pod.memory.is_some();
                    notes.push(if own {
                        format!(
                            "CPUs: cpu {got}, its own (a Guaranteed pod with whole CPUs under the \
                         static CPU manager), read back from its cgroup"
                        )
                    } else {
                        format!("CPUs: {}, read back from its cgroup", shared_pool(&got))
                    });
                    own
                }
                CpuPlacement::Exclusive(n) => {
                    if got.len() != *n as usize {
                        bail!(
                        "tenant {name}: the kubelet gave its Guaranteed pod cpu {got}, not {n} \
                         CPU(s) of its own (is the CPU manager's state stale?)"
                    );
                    }
                    notes.push(format!(
                    "cpuset {} asked: {n} CPU(s) of its own, chosen by the kubelet's static CPU \
                     manager: cpu {got}",
                    asked.cpuset.as_ref().map(ToString::to_string).unwrap_or_default()
                ));
                    true
                }
                CpuPlacement::Shared(why) => {
                    notes.push(format!(
                        "cpuset {} asked, NOT given: {why}; it runs in {}",
                        asked
                            .cpuset
                            .as_ref()
                            .map(ToString::to_string)
                            .unwrap_or_default(),
                        shared_pool(&got)
                    ));
                    false
                }
            };
        if own {
            self.wait_shared_pool_leaves(name, &got)?;
        }
        if asked.cpuset.is_some() {
            limits.cpuset = Some(got);
        }
        Ok(own)
    }

    /// Waits until none of this run's tenants in the shared pool runs on `got`, which
    /// tenant `name` now holds.
    fn wait_shared_pool_leaves(&self, name: &str, got: &CpuList) -> Result<()> {
        let end = Instant::now() + Duration::from_secs(30);
        for (other, dir) in &self.shared_pool {
            loop {
                let theirs = read_cpuset(dir)?;
                if !theirs.iter().any(|c| got.iter().any(|g| g == c)) {
                    break;
                }
                if Instant::now() > end {
                    bail!(
                        "tenant {other} in the shared pool still runs on cpu {theirs} 30 s after \
                         tenant {name} got cpu {got} to itself"
                    );
                }
                std::thread::sleep(Duration::from_millis(250));
            }
        }
        Ok(())
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

/// The node of the run's pods: the one [`runner::ENV_NODE`] names (a fleet run's runner on
/// that node), else the one `scripts/k8s-up` labels, else the only one.
fn find_node(k: &Kubectl) -> Result<String> {
    if let Some(n) = std::env::var(runner::ENV_NODE)
        .ok()
        .filter(|n| !n.is_empty())
    {
        k.query(&["get", "node", &n, "-o", "name"]).map_err(|e| {
            unavailable(
                format!("{}={n}: {e:#}", runner::ENV_NODE),
                "name a node of `kubectl get nodes`",
            )
        })?;
        return Ok(n);
    }
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

impl Platform for K8sPlatform {
    fn kind(&self) -> PlatformKind {
        KIND
    }

    fn describe(&self) -> String {
        format!(
            "k8s: node {}, kubeconfig {}, kubectl {}, image {}, CPU manager {}, podPidsLimit {}; \
             {}",
            self.node,
            self.kubectl.kubeconfig().display(),
            self.kubectl.bin().display(),
            self.image
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
                .unwrap_or_else(|| "not imported yet".into()),
            self.kubelet.policy(),
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

    /// Every tenant's image is in the node's containerd: all missing ones in one error.
    fn preflight(&mut self, specs: &[TenantSpec]) -> Result<()> {
        crate::tenant::preflight_images(specs, KIND, |t, r| self.user_image(t, r))
    }

    fn create_tenant(&mut self, spec: &TenantSpec) -> Result<Box<dyn Tenant>> {
        // ---- Checks: nothing is created before all of them pass. ----
        let Checked {
            mut limits,
            pod: pod_limits,
            mut notes,
            parent,
            pids,
            cpus,
        } = self.check(spec)?;
        let (image, exe, found) = match &spec.image {
            Some(r) => {
                let found = self.user_image(&spec.name, r)?;
                notes.extend(found.notes());
                (r.clone(), INJECTED_EXE, Some(found))
            }
            None => (self.image()?, crate::oci::image::IMAGE_EXE, None),
        };
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
            inject: found.as_ref().map(|_| &self.source),
            object: &object,
            workdir: &workdir,
            limits: &pod_limits,
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
        let started = self.wait_running(&ns, &pod).and_then(|(qos, cid)| {
            let (pid, cgroup) = self.container_cgroup(&cid)?;
            if let Some(max) = pids.container {
                write_container_pids(&cgroup, max)?;
            }
            let own =
                self.settle_cpus(spec, &cgroup, &pod_limits, &cpus, &mut limits, &mut notes)?;
            Ok((qos, (pid, cgroup), own))
        });
        let (qos, (pid, cgroup), own) = match started {
            Ok(s) => s,
            Err(e) => {
                undo(&self.kubectl);
                let from = match &found {
                    Some(_) => format!(" from the image {image}"),
                    None => String::new(),
                };
                return Err(e.context(format!("starting the pod of tenant {}{from}", spec.name)));
            }
        };
        notes.extend(qos_notes(&qos, &pod_limits));
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
            image: found,
        };
        self.names.insert(spec.name.clone());
        if !own {
            if let Some(d) = cgroup.dir_of(Controller::Cpuset) {
                self.shared_pool.push((spec.name.clone(), d.to_path_buf()));
            }
        }
        let env = if info.image.is_some() {
            vec![INJECTED_BUSYBOX, "env"]
        } else {
            vec![tenant::ENV]
        };
        let container = Container {
            info,
            exe,
            keep: vec![pid],
            cgroup,
            run: self.run.clone(),
        };
        let runtime = tenant::Pod {
            env,
            kubectl: self.kubectl.clone(),
            namespace: ns,
            pod,
        };
        Ok(Box::new(tenant::K8sTenant::new(container, runtime)))
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
            tracing::warn!("{e:#}");
        }
    }
}

/// Caps the pod's container's own pids cgroup at `max` (the pod's limit leaves room for the
/// pause container).
fn write_container_pids(cgroup: &TenantCgroup, max: u64) -> Result<()> {
    let dir = cgroup
        .dir_of(Controller::Pids)
        .context("the pod's container has no pids cgroup")?;
    let f = dir.join("pids.max");
    fs::write(&f, max.to_string()).with_context(|| format!("writing {max} to {}", f.display()))
}

/// The tenant's notes on the QoS class the cluster gave its pod.
fn qos_notes(qos: &str, pod_limits: &Limits) -> Vec<String> {
    let expected = expected_qos(pod_limits);
    let mut notes = vec![format!("QoS class {qos}")];
    if qos != expected {
        notes.push(format!(
            "expected QoS class {expected}, the cluster chose {qos}"
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_name_becomes_a_label_value() {
        assert_eq!(label_value("web-1.example"), "web-1.example");
        assert_eq!(label_value("-a b+"), "a_b");
        assert_eq!(label_value(&"h".repeat(70)).len(), 63);
    }

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
            ("mems=0", "mems"),
            ("shares=512", "shares"),
            ("io_write_bps=1M", "io_write_bps"),
            ("memory=1G,memory_min=64M", "memory_min"),
            ("memory_low=64M", "memory_low"),
            ("memory_high=64M", "memory_high"),
            ("memory=1G,swap=1G", "swap"),
            ("cpus=1,cpu_burst=1ms", "cpu_burst"),
            ("cpuset=1,cpuset_partition=root", "cpuset_partition"),
            ("io_weight=50", "io_weight"),
            ("io_latency=1ms", "io_latency"),
        ] {
            let e = refuse_unexpressible(&Limits::parse(text).unwrap(), &spec)
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("`{key}`")), "{e}");
        }
        assert!(refuse_unexpressible(&Limits::parse("cpus=1,memory=1G").unwrap(), &spec).is_ok());
        // A cpuset is mapped (to CPUs of the pod's own), not refused.
        assert!(refuse_unexpressible(&Limits::parse("cpuset=1,memory=1G").unwrap(), &spec).is_ok());
    }

    #[test]
    fn a_pids_limit_is_the_kubelets_or_a_lower_one_on_the_container() {
        let p = pids_plan(None, Some(1024), None).unwrap();
        assert_eq!((p.container, p.effective), (None, Some(1024)));
        assert!(p.note.contains("podPidsLimit"), "{}", p.note);
        let p = pids_plan(Some(1024), Some(1024), None).unwrap();
        assert_eq!((p.container, p.effective), (None, Some(1024)));
        let p = pids_plan(Some(128), Some(1024), Some(4096)).unwrap();
        assert_eq!((p.container, p.effective), (Some(128), Some(128)));
        assert!(
            p.note
                .contains("pids=128 written by isobench to the container's cgroup")
                && p.note.contains("podPidsLimit=1024 bounds the pod"),
            "{}",
            p.note
        );
        let p = pids_plan(Some(50), None, None).unwrap();
        assert_eq!((p.container, p.effective), (Some(50), Some(50)));
        assert!(p.note.contains("no podPidsLimit"), "{}", p.note);
        // An aggressor without a limit anywhere gets the safe default, a victim none.
        let p = pids_plan(None, None, Some(4096)).unwrap();
        assert_eq!((p.container, p.effective), (Some(4096), Some(4096)));
        assert!(p.note.starts_with("safe default pids=4096"), "{}", p.note);
        let p = pids_plan(None, None, None).unwrap();
        assert_eq!((p.container, p.effective), (None, None));
        let e = pids_plan(Some(2048), Some(1024), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`pids`") && e.contains("podPidsLimit=1024"),
            "{e}"
        );
    }

    #[test]
    fn a_cpuset_asks_for_that_many_cpus_of_the_pods_own() {
        let stat: KubeletConfig =
            KubeletConfig::from_configz(r#"{"kubeletconfig":{"cpuManagerPolicy":"static"}}"#)
                .unwrap();
        let l = |t| Limits::parse(t).unwrap();
        assert_eq!(
            cpu_placement(&l("memory=1G"), &stat, Some(1000)),
            CpuPlacement::Any
        );
        assert_eq!(
            cpu_placement(&l("cpuset=0-1,memory=1G"), &stat, Some(2000)),
            CpuPlacement::Exclusive(2)
        );
        assert_eq!(
            cpu_placement(&l("cpuset=3,cpus=1,memory=1G"), &stat, Some(1000)),
            CpuPlacement::Exclusive(1)
        );
        let shared = |p: CpuPlacement| match p {
            CpuPlacement::Shared(why) => why,
            other => panic!("{other:?}"),
        };
        let why = shared(cpu_placement(&l("cpuset=0-1,memory=1G"), &stat, Some(1000)));
        assert!(why.contains("1 of allocatable CPU left"), "{why}");
        let why = shared(cpu_placement(&l("cpuset=1"), &stat, Some(1000)));
        assert!(why.contains("no memory limit"), "{why}");
        let why = shared(cpu_placement(
            &l("cpuset=1,cpus=0.5,memory=1G"),
            &stat,
            Some(1000),
        ));
        assert!(why.contains("cpus=0.5"), "{why}");
        let why = shared(cpu_placement(
            &l("cpuset=1,memory=1G"),
            &KubeletConfig::default(),
            Some(1000),
        ));
        assert!(why.contains("policy is `none`"), "{why}");
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
            inject: None,
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
        assert_eq!(c["command"][0], "/bin/sleep");
    }

    #[test]
    fn a_users_image_gets_the_agent_mounted_and_runs_its_sleeper() {
        let id = RunId::parse("1f2e3d4c").unwrap();
        let l = Limits::default();
        let src = ImageSource {
            exe: "/opt/isobench-static".into(),
            busybox: "/bin/busybox".into(),
        };
        let m = manifest(&PodSpec {
            run: &id,
            tenant: "victim",
            pod: "victim",
            node: "n1",
            image: "redis:7",
            inject: Some(&src),
            object: "isobench-1f2e3d4c-victim",
            workdir: Path::new("/var/tmp/isobench-1f2e3d4c-victim"),
            limits: &l,
        });
        let spec = &m["items"][1]["spec"];
        let c = &spec["containers"][0];
        assert_eq!(c["image"], "redis:7");
        assert_eq!(c["imagePullPolicy"], "Never");
        assert_eq!(
            c["command"],
            json!(["/.isobench/busybox", "sleep", "2147483647"])
        );
        assert_eq!(c["securityContext"]["runAsUser"], 0);
        let mounts = c["volumeMounts"].as_array().unwrap();
        assert!(mounts
            .iter()
            .any(|v| v["mountPath"] == "/.isobench/isobench"
                && v["readOnly"] == true
                && v["name"] == "isobench-exe"));
        let vols = spec["volumes"].as_array().unwrap();
        assert!(vols.iter().any(|v| v["name"] == "isobench-exe"
            && v["hostPath"]["path"] == "/opt/isobench-static"
            && v["hostPath"]["type"] == "File"));
        assert!(vols.iter().any(|v| v["hostPath"]["path"] == "/bin/busybox"));
    }
}
