//! What the cluster says about itself, read with kubectl as JSON and parsed with serde: the
//! kubelet's configuration (`/configz`), the nodes, the server's version, and the CPU the
//! pods on a node already request. The platform uses it to map a tenant's limits, and
//! `isobench doctor` to report the cluster ([`report`]).
//!
//! The parsing is pure (tested on canned kubectl output); only [`Cluster::read`] and
//! [`report`] run kubectl.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;

use super::kubectl::{self, Kubectl};
use crate::doctor::Check;

/// The settings of a node's kubelet that decide how a pod's CPUs and pids are bounded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct KubeletConfig {
    /// `none` (the default) or `static` (a Guaranteed pod with whole CPUs gets them to itself).
    pub cpu_manager_policy: Option<String>,
    /// The CPUs kept for the system (never given to a pod exclusively), as a CPU list.
    #[serde(rename = "reservedSystemCPUs")]
    pub reserved_system_cpus: Option<String>,
    /// The pids limit of every pod (absent, 0 or -1: none).
    pub pod_pids_limit: Option<i64>,
}

impl KubeletConfig {
    /// Parses the kubelet's `/configz` document (`{"kubeletconfig": {...}}`).
    pub fn from_configz(text: &str) -> Result<KubeletConfig> {
        #[derive(Deserialize)]
        struct Configz {
            kubeletconfig: KubeletConfig,
        }
        let c: Configz =
            serde_json::from_str(text).context("parsing the kubelet's configz document")?;
        Ok(c.kubeletconfig)
    }

    /// The pids limit every pod gets, when the kubelet sets one.
    pub fn pids_limit(&self) -> Option<u64> {
        self.pod_pids_limit
            .filter(|p| *p > 0)
            .and_then(|p| u64::try_from(p).ok())
    }

    /// Whether Guaranteed pods with whole CPUs get exclusive CPUs.
    pub fn static_cpus(&self) -> bool {
        self.cpu_manager_policy.as_deref() == Some("static")
    }

    /// The CPU manager policy, `none` when unset (the kubelet's default).
    pub fn policy(&self) -> &str {
        self.cpu_manager_policy.as_deref().unwrap_or("none")
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct List<T> {
    items: Vec<T>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Meta {
    name: String,
    labels: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct NodeStatus {
    allocatable: BTreeMap<String, String>,
    conditions: Vec<Condition>,
    node_info: NodeInfo,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Condition {
    #[serde(rename = "type")]
    kind: String,
    status: String,
    message: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct NodeInfo {
    kubelet_version: String,
    kernel_version: String,
    container_runtime_version: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct NodeJson {
    metadata: Meta,
    status: NodeStatus,
}

/// The label that names a node's instance type (and its older spelling).
pub const INSTANCE_TYPE_LABELS: [&str; 2] = [
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
];

/// One node, as `kubectl get nodes -o json` describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Its name.
    pub name: String,
    /// Whether its `Ready` condition is `True`.
    pub ready: bool,
    /// The `Ready` condition's message when it is not.
    pub not_ready_why: Option<String>,
    /// The kubelet's version (`v1.37.2`).
    pub kubelet_version: String,
    /// The kernel's version.
    pub kernel: String,
    /// The container runtime (`containerd://1.6.20`).
    pub runtime: String,
    /// Its instance type label, when it has one.
    pub instance_type: Option<String>,
    /// The CPU pods can request, in millicores (`status.allocatable.cpu`).
    pub allocatable_cpu_millis: Option<u64>,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
}

impl Node {
    fn from_json(n: NodeJson) -> Node {
        let ready = n.status.conditions.iter().find(|c| c.kind == "Ready");
        let instance_type = INSTANCE_TYPE_LABELS
            .iter()
            .find_map(|l| n.metadata.labels.get(*l).cloned());
        Node {
            name: n.metadata.name,
            ready: ready.is_some_and(|c| c.status == "True"),
            not_ready_why: ready
                .filter(|c| c.status != "True")
                .map(|c| c.message.clone())
                .or_else(|| ready.is_none().then(|| "no Ready condition".into())),
            kubelet_version: n.status.node_info.kubelet_version,
            kernel: n.status.node_info.kernel_version,
            runtime: n.status.node_info.container_runtime_version,
            instance_type,
            allocatable_cpu_millis: n
                .status
                .allocatable
                .get("cpu")
                .and_then(|q| cpu_millis(q).ok()),
            labels: n.metadata.labels,
        }
    }
}

/// Parses `kubectl get nodes -o json` (a `List` of nodes) or one node's document.
pub fn parse_nodes(text: &str) -> Result<Vec<Node>> {
    let v: serde_json::Value = serde_json::from_str(text).context("parsing the nodes' JSON")?;
    if v.get("items").is_some() {
        let l: List<NodeJson> = serde_json::from_value(v).context("reading the node list")?;
        Ok(l.items.into_iter().map(Node::from_json).collect())
    } else {
        let n: NodeJson = serde_json::from_value(v).context("reading the node")?;
        Ok(vec![Node::from_json(n)])
    }
}

/// A CPU quantity (`2`, `1500m`, `0.5`) in millicores.
pub fn cpu_millis(q: &str) -> Result<u64> {
    let q = q.trim();
    let bad = || anyhow!("`{q}` is not a CPU quantity (like `2`, `500m` or `1.5`)");
    if let Some(m) = q.strip_suffix('m') {
        return m.parse::<u64>().map_err(|_| bad());
    }
    let v: f64 = q.parse().map_err(|_| bad())?;
    if !v.is_finite() || v < 0.0 {
        return Err(bad());
    }
    Ok((v * 1000.0).ceil() as u64)
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PodJson {
    spec: PodSpecJson,
    status: PodStatusJson,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct PodSpecJson {
    containers: Vec<ContainerJson>,
    init_containers: Vec<ContainerJson>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ContainerJson {
    resources: ResourcesJson,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ResourcesJson {
    requests: BTreeMap<String, String>,
    limits: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PodStatusJson {
    phase: String,
}

impl ContainerJson {
    /// The CPU request; Kubernetes takes the limit when only that is set.
    fn cpu_request(&self) -> u64 {
        let r = &self.resources;
        r.requests
            .get("cpu")
            .or_else(|| r.limits.get("cpu"))
            .and_then(|q| cpu_millis(q).ok())
            .unwrap_or(0)
    }
}

/// The CPU requested by the pods of a `kubectl get pods -o json` list that still hold
/// their resources (not `Succeeded` or `Failed`), in millicores: the sum of the containers'
/// requests, or the largest init container's when that is more (as the scheduler counts).
pub fn requested_cpu_millis(pods_json: &str) -> Result<u64> {
    let l: List<PodJson> = serde_json::from_str(pods_json).context("parsing the pods' JSON")?;
    Ok(l.items
        .iter()
        .filter(|p| !matches!(p.status.phase.as_str(), "Succeeded" | "Failed"))
        .map(|p| {
            let run: u64 = p
                .spec
                .containers
                .iter()
                .map(ContainerJson::cpu_request)
                .sum();
            let init = p
                .spec
                .init_containers
                .iter()
                .map(ContainerJson::cpu_request)
                .max()
                .unwrap_or(0);
            run.max(init)
        })
        .sum())
}

/// The server's version (`serverVersion.gitVersion`) from `kubectl version -o json`.
pub fn parse_server_version(text: &str) -> Result<String> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Version {
        server_version: Option<Info>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Info {
        git_version: String,
    }
    let v: Version = serde_json::from_str(text).context("parsing `kubectl version -o json`")?;
    v.server_version
        .map(|i| i.git_version)
        .ok_or_else(|| anyhow!("kubectl reports no server version"))
}

/// The kubelet configuration of `node`, through the API server's node proxy.
pub fn kubelet_config(k: &Kubectl, node: &str) -> Result<KubeletConfig> {
    let path = format!("/api/v1/nodes/{node}/proxy/configz");
    let out = k
        .query(&["get", "--raw", &path])
        .with_context(|| format!("reading the kubelet configuration of node {node}"))?;
    KubeletConfig::from_configz(&out)
}

/// The nodes of the cluster.
pub fn nodes(k: &Kubectl) -> Result<Vec<Node>> {
    parse_nodes(&k.query(&["get", "nodes", "-o", "json"])?)
}

/// The CPU, in millicores, that the pods bound to `node` request.
pub fn node_requested_cpu_millis(k: &Kubectl, node: &str) -> Result<u64> {
    let sel = format!("spec.nodeName={node}");
    let out = k.query(&[
        "get",
        "pods",
        "--all-namespaces",
        "--field-selector",
        &sel,
        "-o",
        "json",
    ])?;
    requested_cpu_millis(&out)
}

fn passed(name: impl Into<String>, detail: String) -> Check {
    Check {
        name: name.into(),
        ok: true,
        detail,
    }
}

fn failed(name: impl Into<String>, detail: String) -> Check {
    Check {
        name: name.into(),
        ok: false,
        detail,
    }
}

/// How long `isobench doctor` waits for the API server.
const DOCTOR_TIMEOUT: Duration = Duration::from_secs(3);

/// `isobench doctor`'s lines about Kubernetes: the cluster (kubeconfig, context, server
/// version) and each node (Ready, kubelet, kernel, instance type, CPU manager policy,
/// podPidsLimit), or exactly why no cluster is usable.
pub fn report(explicit: Option<&Path>) -> Vec<Check> {
    let name = "k8s cluster";
    let Some(path) = kubectl::kubeconfig(explicit) else {
        return vec![failed(
            name,
            format!(
                "no kubeconfig: KUBECONFIG is not set and scripts/k8s-up's {} does not exist; \
                 {}",
                kubectl::k8s_up_state().join("admin.kubeconfig").display(),
                super::FIX_UP
            ),
        )];
    };
    let k = match Kubectl::new(Some(&path)) {
        Ok(k) => k,
        Err(e) => return vec![failed(name, format!("{e:#}"))],
    };
    if let Err(e) = k.ready(DOCTOR_TIMEOUT) {
        return vec![failed(
            name,
            format!(
                "the API server of {} does not answer: {e:#}; {}",
                path.display(),
                super::FIX_UP
            ),
        )];
    }
    let context = k
        .query(&["config", "current-context"])
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|e| format!("? ({e:#})"));
    let version = k
        .query(&["version", "-o", "json"])
        .and_then(|t| parse_server_version(&t))
        .unwrap_or_else(|e| format!("? ({e:#})"));
    let mut checks = vec![passed(
        name,
        format!(
            "context {context}, server {version}, kubeconfig {}, kubectl {}",
            path.display(),
            k.bin().display()
        ),
    )];
    match nodes(&k) {
        Ok(ns) if ns.is_empty() => checks.push(failed(
            "k8s nodes",
            "the cluster has no node; a tenant's pod needs one on this machine".to_string(),
        )),
        Ok(ns) => {
            for n in ns {
                let cfg = kubelet_config(&k, &n.name);
                checks.push(node_check(&n, cfg.as_ref().map_err(|e| format!("{e:#}"))));
            }
        }
        Err(e) => checks.push(failed("k8s nodes", format!("{e:#}"))),
    }
    checks
}

/// One node's doctor line.
pub fn node_check(n: &Node, cfg: Result<&KubeletConfig, String>) -> Check {
    let name = format!("k8s node {}", n.name);
    let mut parts = vec![
        if n.ready {
            "Ready".to_string()
        } else {
            format!(
                "NOT Ready ({})",
                n.not_ready_why.as_deref().unwrap_or("no reason given")
            )
        },
        format!("kubelet {}", n.kubelet_version),
        format!("kernel {}", n.kernel),
        format!(
            "instance type {}",
            n.instance_type.as_deref().unwrap_or("(no label)")
        ),
    ];
    match cfg {
        Ok(c) => {
            let mut cpu = format!("CPU manager {}", c.policy());
            if let Some(r) = c.reserved_system_cpus.as_deref().filter(|r| !r.is_empty()) {
                cpu.push_str(&format!(" (reserved CPUs {r})"));
            }
            parts.push(cpu);
            parts.push(match c.pids_limit() {
                Some(p) => format!("podPidsLimit {p}"),
                None => "no podPidsLimit".into(),
            });
        }
        Err(e) => parts.push(format!("kubelet configuration unreadable: {e}")),
    }
    if let Some(m) = n.allocatable_cpu_millis {
        parts.push(format!("allocatable CPU {}", millis_word(m)));
    }
    let detail = parts.join(", ");
    if n.ready {
        passed(name, detail)
    } else {
        failed(name, detail)
    }
}

/// `1`, `1.5` or `250m`.
pub fn millis_word(m: u64) -> String {
    if m % 1000 == 0 {
        (m / 1000).to_string()
    } else {
        format!("{m}m")
    }
}

/// Fails unless `cfg` gives Guaranteed pods exclusive CPUs.
pub fn require_static(cfg: &KubeletConfig, node: &str) -> Result<()> {
    if !cfg.static_cpus() {
        bail!(
            "the kubelet of node {node} runs the CPU manager policy `{}`, which gives no pod \
             CPUs of its own",
            cfg.policy()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIGZ: &str = r#"{"kubeletconfig":{"enableServer":true,"cpuManagerPolicy":"static",
        "reservedSystemCPUs":"0","podPidsLimit":1024,"cpuManagerReconcilePeriod":"10s"}}"#;

    const NODES: &str = r#"{"apiVersion":"v1","kind":"List","items":[
      {"metadata":{"name":"isobench-k8s","labels":{"isobench/k8s-up":"true",
         "kubernetes.io/hostname":"isobench-k8s"}},
       "status":{"allocatable":{"cpu":"1","memory":"24479292Ki","pods":"110"},
         "capacity":{"cpu":"2"},
         "conditions":[{"type":"MemoryPressure","status":"False","message":"ok"},
                       {"type":"Ready","status":"True","message":"kubelet is posting ready status"}],
         "nodeInfo":{"kubeletVersion":"v1.37.2","kernelVersion":"6.18.44-fc-v657",
                     "containerRuntimeVersion":"containerd://1.6.20"}}},
      {"metadata":{"name":"big-1","labels":{"node.kubernetes.io/instance-type":"m5.xlarge"}},
       "status":{"allocatable":{"cpu":"3500m"},
         "conditions":[{"type":"Ready","status":"Unknown","message":"Kubelet stopped posting node status."}],
         "nodeInfo":{"kubeletVersion":"v1.36.0","kernelVersion":"6.1.0"}}}]}"#;

    #[test]
    fn the_kubelet_configuration_is_read_from_configz() {
        let c = KubeletConfig::from_configz(CONFIGZ).unwrap();
        assert!(c.static_cpus());
        assert_eq!(c.reserved_system_cpus.as_deref(), Some("0"));
        assert_eq!(c.pids_limit(), Some(1024));
        let none = KubeletConfig::from_configz(r#"{"kubeletconfig":{"podPidsLimit":-1}}"#).unwrap();
        assert_eq!(none.policy(), "none");
        assert_eq!(none.pids_limit(), None);
        assert!(require_static(&none, "n").is_err());
        assert!(KubeletConfig::from_configz("{}").is_err());
    }

    #[test]
    fn nodes_are_read_with_their_facts() {
        let ns = parse_nodes(NODES).unwrap();
        assert_eq!(ns.len(), 2);
        let a = &ns[0];
        assert_eq!(a.name, "isobench-k8s");
        assert!(a.ready && a.not_ready_why.is_none());
        assert_eq!(a.kubelet_version, "v1.37.2");
        assert_eq!(a.kernel, "6.18.44-fc-v657");
        assert_eq!(a.instance_type, None);
        assert_eq!(a.allocatable_cpu_millis, Some(1000));
        let b = &ns[1];
        assert!(!b.ready);
        assert_eq!(
            b.not_ready_why.as_deref(),
            Some("Kubelet stopped posting node status.")
        );
        assert_eq!(b.instance_type.as_deref(), Some("m5.xlarge"));
        assert_eq!(b.allocatable_cpu_millis, Some(3500));
    }

    #[test]
    fn a_node_line_says_policy_pids_and_readiness() {
        let ns = parse_nodes(NODES).unwrap();
        let c = KubeletConfig::from_configz(CONFIGZ).unwrap();
        let ok = node_check(&ns[0], Ok(&c));
        assert!(ok.ok);
        assert_eq!(ok.name, "k8s node isobench-k8s");
        assert_eq!(
            ok.detail,
            "Ready, kubelet v1.37.2, kernel 6.18.44-fc-v657, instance type (no label), CPU \
             manager static (reserved CPUs 0), podPidsLimit 1024, allocatable CPU 1"
        );
        let bad = node_check(&ns[1], Err("the node proxy failed".into()));
        assert!(!bad.ok);
        assert!(
            bad.detail.starts_with("NOT Ready (Kubelet stopped posting")
                && bad.detail.contains("instance type m5.xlarge")
                && bad
                    .detail
                    .contains("kubelet configuration unreadable: the node proxy failed")
                && bad.detail.ends_with("allocatable CPU 3500m"),
            "{}",
            bad.detail
        );
    }

    #[test]
    fn cpu_quantities_are_millicores() {
        assert_eq!(cpu_millis("2").unwrap(), 2000);
        assert_eq!(cpu_millis("1500m").unwrap(), 1500);
        assert_eq!(cpu_millis("0.25").unwrap(), 250);
        assert!(cpu_millis("1Gi").is_err());
        assert!(cpu_millis("-1").is_err());
        assert_eq!(millis_word(2000), "2");
        assert_eq!(millis_word(250), "250m");
    }

    #[test]
    fn the_requested_cpu_counts_live_pods_only() {
        let pods = r#"{"items":[
          {"spec":{"containers":[{"resources":{"requests":{"cpu":"1"},"limits":{"cpu":"1"}}},
                                 {"resources":{"limits":{"cpu":"250m"}}}]},
           "status":{"phase":"Running"}},
          {"spec":{"containers":[{"resources":{}}],
                   "initContainers":[{"resources":{"requests":{"cpu":"500m"}}}]},
           "status":{"phase":"Pending"}},
          {"spec":{"containers":[{"resources":{"requests":{"cpu":"2"}}}]},
           "status":{"phase":"Succeeded"}}]}"#;
        assert_eq!(requested_cpu_millis(pods).unwrap(), 1750);
        assert_eq!(requested_cpu_millis(r#"{"items":[]}"#).unwrap(), 0);
    }

    #[test]
    fn the_server_version_is_read() {
        let v = r#"{"clientVersion":{"gitVersion":"v1.37.2"},
                    "serverVersion":{"major":"1","gitVersion":"v1.37.2"}}"#;
        assert_eq!(parse_server_version(v).unwrap(), "v1.37.2");
        assert!(parse_server_version(r#"{"clientVersion":{}}"#).is_err());
    }
}
