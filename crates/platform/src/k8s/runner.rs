//! Runner pods: how a fleet run on Kubernetes (`isobench run --platform k8s --nodes
//! SELECTOR`) measures on every node it selects.
//!
//! A run of the `k8s` platform reads and freezes its tenants' cgroups, so it must run on the
//! node of its tenants. The coordinator therefore puts one runner pod on each selected node,
//! in a namespace of its own (`isobench-<fleet id>`): privileged, in the node's PID and
//! network namespaces, with the node's root filesystem mounted at `/host`, running only a
//! sleeper. Through `kubectl exec` (the API server's stream; no port is exposed) it starts
//! a host agent on the node itself: the image's static isobench is copied to
//! `/var/lib/isobench/runner/` on the node ([`prepare_node`]) and run there with `chroot
//! /host` ([`agent_argv`], argument vectors only, no shell), so it
//! sees the node as a host agent would (its cgroups, `/run/isobench` and the measurement
//! slot, containerd, kubectl). The coordinator then speaks the agent protocol over the
//! stream and sends `run_scenario`: the node runs the scenario with its tenants pinned to
//! itself ([`ENV_NODE`]), into the node's own database, and sends the stored run back.
//!
//! The runner reaches the API server with the coordinator's kubeconfig, given to the pod
//! as a Secret and copied to the node's `/run/isobench/runner/<fleet id>.kubeconfig` while
//! the fleet runs. The node needs `kubectl` on its `PATH` (or `ISOBENCH_KUBECTL`) and `ctr`.
//!
//! The namespace carries the fleet's run label, so the sweep of dead runs deletes it when
//! the coordinator dies; and the host label ([`HOST_LABEL`]), so a sweep on another machine
//! (a node's own run) never takes it for one of its own dead runs.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use serde_json::{json, Value};

use super::kubectl::Kubectl;
use super::tenant::RUN_LABEL;
use super::{host_label, pod_name, HOST_LABEL};
use crate::cgroup::{CgroupFs, CgroupVersion, Controller};
use crate::leftovers::{CleanupReport, ObjectKind};
use crate::oci::image::IMAGE_EXE;
use crate::run::RunId;

/// The variable that names the node a run's pods go to (set on a runner by its coordinator).
pub const ENV_NODE: &str = "ISOBENCH_K8S_NODE";
/// The label that marks a fleet's namespace (`isobench.role=fleet`).
pub const ROLE_LABEL: &str = "isobench.role";
/// The Secret holding the coordinator's kubeconfig.
const SECRET: &str = "runner-kubeconfig";
/// Where the Secret is mounted in a runner pod.
const SECRET_DIR: &str = "/etc/isobench-runner";
/// The node's directory for the runner's binary and database.
pub const RUNNER_DIR: &str = "/var/lib/isobench/runner";
/// The node's directory (a tmpfs on most machines) for the runner's kubeconfig.
const RUNNER_RUN_DIR: &str = "/run/isobench/runner";
/// The container of a runner pod.
const CONTAINER: &str = "runner";

/// A runner pod's name on `node`.
pub fn runner_pod(node: &str) -> String {
    let mut name = format!("runner-{}", pod_name(node));
    name.truncate(63);
    name.trim_end_matches(['-', '.']).to_string()
}

/// The fleet's namespace: `isobench-<fleet id>`.
pub fn fleet_namespace(fleet: &RunId) -> String {
    fleet.prefix()
}

/// The manifest of the fleet's namespace, Secret and one runner pod per node.
pub fn manifest(fleet: &RunId, nodes: &[String], image: &str, kubeconfig: &str) -> Value {
    let ns = fleet_namespace(fleet);
    let labels = json!({RUN_LABEL: fleet.as_str(), ROLE_LABEL: "fleet", HOST_LABEL: host_label()});
    let mut items = vec![
        json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": ns, "labels": labels},
        }),
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": SECRET, "namespace": ns, "labels": labels},
            "type": "Opaque",
            "stringData": {"kubeconfig": kubeconfig},
        }),
    ];
    for node in nodes {
        items.push(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": runner_pod(node),
                "namespace": ns,
                "labels": {RUN_LABEL: fleet.as_str(), ROLE_LABEL: "runner"},
            },
            "spec": {
                "nodeName": node,
                "restartPolicy": "Never",
                "hostPID": true,
                "hostNetwork": true,
                "automountServiceAccountToken": false,
                "terminationGracePeriodSeconds": 1,
                // A runner goes where the fleet run sends it, tainted or not.
                "tolerations": [{"operator": "Exists"}],
                "containers": [{
                    "name": CONTAINER,
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["/bin/sleep", "2147483647"],
                    "securityContext": {"privileged": true},
                    // No CPU request: it would take from the node's allocatable CPU, and a
                    // tenant could no longer have whole CPUs of its own. The runner's agent
                    // takes its CPU share from the node's root CPU cgroup instead (the script).
                    "resources": {"requests": {"memory": "64Mi"}},
                    "volumeMounts": [
                        {"name": "host", "mountPath": "/host"},
                        {"name": "kubeconfig", "mountPath": SECRET_DIR, "readOnly": true},
                    ],
                }],
                "volumes": [
                    {"name": "host", "hostPath": {"path": "/", "type": "Directory"}},
                    {"name": "kubeconfig", "secret": {"secretName": SECRET, "defaultMode": 0o400}},
                ],
            },
        }));
    }
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}

/// Runs `argv` in the runner pod on `node` (`kubectl exec`, an argument vector: no shell).
fn exec_in(k: &Kubectl, fleet: &RunId, node: &str, argv: &[&str]) -> Result<String> {
    let ns = fleet_namespace(fleet);
    let pod = runner_pod(node);
    let mut a = vec!["exec", "-n", &ns, &pod, "-c", CONTAINER, "--"];
    a.extend_from_slice(argv);
    k.run(&a, None, Duration::from_secs(120))
}

/// Prepares the node for its runner's agent: the image's static isobench copied to
/// `RUNNER_DIR/exe` (once per build: `exe` is `isobench-<version and hash>`), and the
/// coordinator's kubeconfig to `RUNNER_RUN_DIR/<fleet>.kubeconfig` (mode 400, as the Secret).
pub fn prepare_node(k: &Kubectl, fleet: &RunId, node: &str, exe: &str) -> Result<()> {
    let (dir, run_dir) = (
        format!("/host{RUNNER_DIR}"),
        format!("/host{RUNNER_RUN_DIR}"),
    );
    exec_in(k, fleet, node, &["/bin/mkdir", "-p", &dir, &run_dir])?;
    let target = format!("{dir}/{exe}");
    if exec_in(k, fleet, node, &["/bin/test", "-x", &target]).is_err() {
        // Copied under a name of this fleet's, then renamed: another fleet's runner never
        // runs a half-copied binary.
        let part = format!("{target}.{fleet}");
        exec_in(k, fleet, node, &["/bin/cp", IMAGE_EXE, &part])?;
        exec_in(k, fleet, node, &["/bin/mv", "-f", &part, &target])?;
    }
    let kc = format!("{run_dir}/{fleet}.kubeconfig");
    let secret = format!("{SECRET_DIR}/kubeconfig");
    exec_in(k, fleet, node, &["/bin/cp", &secret, &kc])?;
    exec_in(k, fleet, node, &["/bin/chmod", "400", &kc])
        .with_context(|| format!("preparing node {node} for its runner"))?;
    Ok(())
}

/// kubectl's arguments that start the host agent of the runner on `node` (prepared by
/// [`prepare_node`]) on the exec stream's standard input and output: busybox `env` with a
/// clean environment, then `chroot /host` and the binary, as an argument vector.
pub fn agent_argv(k: &Kubectl, fleet: &RunId, node: &str, exe: &str) -> Vec<String> {
    let mut a = k.global_args();
    let kubeconfig = format!("KUBECONFIG={RUNNER_RUN_DIR}/{fleet}.kubeconfig");
    let node_var = format!("{ENV_NODE}={node}");
    let bin = format!("{RUNNER_DIR}/{exe}");
    let db = format!("{RUNNER_DIR}/results.db");
    a.extend(
        [
            "exec",
            "-i",
            "-n",
            &fleet_namespace(fleet),
            &runner_pod(node),
            "-c",
            CONTAINER,
            "--",
            "/bin/env",
            "-i",
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME=/root",
            &kubeconfig,
            &node_var,
            "/bin/chroot",
            "/host",
            &bin,
            "agent",
            "--runner",
            "--db",
            &db,
        ]
        .map(str::to_string),
    );
    a
}

/// `kubectl exec -i` into the runner on `node`, starting its host agent.
pub fn agent_command(k: &Kubectl, fleet: &RunId, node: &str, exe: &str) -> Command {
    let mut c = Command::new(k.bin());
    c.args(agent_argv(k, fleet, node, exe));
    c
}

/// For a runner's agent started in its pod: moves this process into the node's root CPU
/// cgroup (cgroup v1), as a host agent has. The run's controller is no tenant: in the
/// pod's CPU cgroup (a share of 2 beside a busy tenant's 1024) it would starve. Its other
/// cgroups stay the pod's, so deleting the pod still ends it. Does nothing outside a pod or
/// on cgroup v2.
pub fn leave_pod_cpu_cgroup() -> Result<()> {
    let fs = CgroupFs::detect()?;
    if fs.version() != CgroupVersion::V1 {
        return Ok(());
    }
    let Some(cpu) = fs.hierarchy_of(Controller::Cpu) else {
        return Ok(());
    };
    let own = procfs::process::Process::myself()
        .and_then(|p| p.cgroups())
        .context("reading this process's cgroups")?;
    let in_pod = own
        .into_iter()
        .any(|g| g.controllers.iter().any(|c| c == "cpu") && g.pathname.contains("kubepods"));
    if !in_pod {
        return Ok(());
    }
    let procs = cpu.root.join("cgroup.procs");
    std::fs::write(&procs, std::process::id().to_string())
        .with_context(|| format!("moving the runner's agent to {}", procs.display()))
}

/// Waits until the runner pod on `node` runs; why not otherwise (the pod's own reason: an
/// image the node lacks, no room, a node that is down).
pub fn wait_running(k: &Kubectl, fleet: &RunId, node: &str, timeout: Duration) -> Result<()> {
    let ns = fleet_namespace(fleet);
    let pod = runner_pod(node);
    let t = format!("--timeout={}s", timeout.as_secs().max(1));
    let waited = k.run(
        &[
            "wait",
            "-n",
            &ns,
            "--for=condition=Ready",
            &format!("pod/{pod}"),
            &t,
        ],
        None,
        timeout + Duration::from_secs(10),
    );
    if waited.is_ok() {
        return Ok(());
    }
    let why = k
        .json(&["get", "pod", "-n", &ns, &pod])
        .ok()
        .and_then(|v| pod_problem(&v))
        .unwrap_or_else(|| format!("not ready within {} s", timeout.as_secs()));
    anyhow::bail!("its runner pod {ns}/{pod} did not start: {why}")
}

/// What keeps a pod from running, from its status: a waiting container's reason and message,
/// else an unmet condition's.
pub fn pod_problem(pod: &Value) -> Option<String> {
    let st = &pod["status"];
    for c in st["containerStatuses"].as_array().into_iter().flatten() {
        let w = &c["state"]["waiting"];
        if let Some(r) = w["reason"].as_str() {
            let msg = w["message"].as_str().unwrap_or("");
            return Some(
                format!("{r}: {msg}")
                    .trim_end_matches([':', ' '])
                    .to_string(),
            );
        }
        let t = &c["state"]["terminated"];
        if let Some(r) = t["reason"].as_str() {
            return Some(format!("terminated: {r}"));
        }
    }
    for c in st["conditions"].as_array().into_iter().flatten() {
        if c["status"].as_str() == Some("False") {
            if let Some(m) = c["message"].as_str().or(c["reason"].as_str()) {
                return Some(m.to_string());
            }
        }
    }
    st["phase"].as_str().map(|p| format!("phase {p}"))
}

/// The agent image in this machine's node's containerd (built and imported when missing),
/// for the runner pods: its tag, and the name the runner's binary gets on a node
/// (`isobench-<version and hash>`). Other nodes need the same image loaded (`isobench image
/// export`, then `ctr -n k8s.io images import` there): pods never pull it.
pub fn runner_image() -> Result<(String, String)> {
    let src = crate::oci::ImageSource::find()?;
    let socket = super::containerd_socket();
    let tag = super::image::ensure(&socket, &src).with_context(|| {
        format!(
            "making the agent image in the node's containerd ({}; set {} for another socket)",
            socket.display(),
            super::ENV_CONTAINERD
        )
    })?;
    let version = tag.rsplit_once(':').map_or(tag.as_str(), |(_, v)| v);
    let exe = format!("isobench-{version}");
    Ok((tag, exe))
}

/// The coordinator's kubeconfig, self-contained (`--flatten --minify`), for the runners.
pub fn flattened_kubeconfig(k: &Kubectl) -> Result<String> {
    k.query(&["config", "view", "--raw", "--flatten", "--minify"])
        .context("reading the kubeconfig for the runner pods")
}

/// Removes the runners' kubeconfig copies from their nodes, then the fleet's namespace
/// (without waiting for it to go).
pub fn remove(k: &Kubectl, fleet: &RunId, nodes: &[String]) -> Result<()> {
    let ns = fleet_namespace(fleet);
    for node in nodes {
        let kc = format!("/host{RUNNER_RUN_DIR}/{fleet}.kubeconfig");
        let _ = k.run(
            &[
                "exec",
                "-n",
                &ns,
                &runner_pod(node),
                "-c",
                CONTAINER,
                "--",
                "/bin/rm",
                "-f",
                &kc,
            ],
            None,
            Duration::from_secs(20),
        );
    }
    k.run(
        &[
            "delete",
            "namespace",
            &ns,
            "--ignore-not-found",
            "--wait=false",
        ],
        None,
        Duration::from_secs(30),
    )
    .with_context(|| format!("deleting the fleet's namespace {ns}"))?;
    Ok(())
}

/// Removes the runners' kubeconfig copies on this machine whose fleet's namespace is gone or
/// going (`active` holds the live namespaces, listed at `listed_at`): what a runner killed
/// with its pod could not remove. A copy written after the listing is left for the next
/// sweep (its fleet may have started since).
pub(crate) fn sweep_credentials(
    active: &BTreeSet<String>,
    listed_at: SystemTime,
    report: &mut CleanupReport,
) {
    sweep_credentials_in(Path::new(RUNNER_RUN_DIR), active, listed_at, report);
}

fn sweep_credentials_in(
    dir: &Path,
    active: &BTreeSet<String>,
    listed_at: SystemTime,
    report: &mut CleanupReport,
) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(fleet) = name
            .strip_suffix(".kubeconfig")
            .and_then(|id| RunId::parse(id).ok())
        else {
            continue;
        };
        if active.contains(&fleet_namespace(&fleet)) {
            continue;
        }
        let written = e.metadata().and_then(|m| m.modified());
        if written.map_or(true, |w| w >= listed_at) {
            continue;
        }
        let path = e.path();
        let shown = path.display().to_string();
        match std::fs::remove_file(&path) {
            Ok(()) => report.ok(ObjectKind::File, &shown, fleet.as_str()),
            Err(err) => report.fail(ObjectKind::File, &shown, fleet.as_str(), err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runner_pod_is_privileged_on_its_node_with_the_host_mounted() {
        let fleet = RunId::parse("1f2e3d4c").unwrap();
        let m = manifest(
            &fleet,
            &["n-1".into(), "N_2".into()],
            "img:1",
            "apiVersion: v1",
        );
        let items = m["items"].as_array().unwrap();
        assert_eq!(items.len(), 4);
        assert_eq!(items[0]["metadata"]["name"], "isobench-1f2e3d4c");
        assert_eq!(items[0]["metadata"]["labels"][ROLE_LABEL], "fleet");
        assert_eq!(items[1]["stringData"]["kubeconfig"], "apiVersion: v1");
        let pod = &items[2];
        assert_eq!(pod["metadata"]["name"], "runner-n-1");
        assert_eq!(pod["spec"]["nodeName"], "n-1");
        assert_eq!(pod["spec"]["hostPID"], true);
        assert_eq!(
            pod["spec"]["containers"][0]["securityContext"]["privileged"],
            true
        );
        assert_eq!(pod["spec"]["volumes"][0]["hostPath"]["path"], "/");
        assert!(items[3]["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("runner-n-2-"));
    }

    #[test]
    fn a_dead_fleets_credentials_are_swept_and_a_live_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["1f2e3d4c.kubeconfig", "0a0b0c0d.kubeconfig", "notes.txt"] {
            std::fs::write(dir.path().join(f), "x").unwrap();
        }
        let active: BTreeSet<String> = ["isobench-0a0b0c0d".to_string()].into();
        let mut r = CleanupReport::default();
        // Written after the listing: kept, its fleet may be new.
        sweep_credentials_in(dir.path(), &active, SystemTime::UNIX_EPOCH, &mut r);
        assert!(dir.path().join("1f2e3d4c.kubeconfig").exists());
        let later = SystemTime::now() + Duration::from_secs(5);
        sweep_credentials_in(dir.path(), &active, later, &mut r);
        assert!(!dir.path().join("1f2e3d4c.kubeconfig").exists());
        assert!(dir.path().join("0a0b0c0d.kubeconfig").exists());
        assert!(dir.path().join("notes.txt").exists());
        assert!(r.failed.is_empty());
    }

    #[test]
    fn a_long_node_name_still_makes_a_pod_name() {
        let n = runner_pod(&"x".repeat(80));
        assert!(n.len() <= 63);
        assert!(n.starts_with("runner-x"));
    }

    #[test]
    fn a_pod_that_cannot_start_says_why() {
        let v: Value = serde_json::from_str(
            r#"{"status":{"phase":"Pending","containerStatuses":[{"state":{"waiting":
            {"reason":"ErrImageNeverPull","message":"image not present with pull policy Never"}}}]}}"#,
        )
        .unwrap();
        assert_eq!(
            pod_problem(&v).unwrap(),
            "ErrImageNeverPull: image not present with pull policy Never"
        );
        let v: Value = serde_json::from_str(
            r#"{"status":{"phase":"Pending","conditions":[{"type":"PodScheduled","status":"False",
            "message":"0/1 nodes are available"}]}}"#,
        )
        .unwrap();
        assert_eq!(pod_problem(&v).unwrap(), "0/1 nodes are available");
    }

    #[test]
    fn the_agent_is_started_on_the_node_with_its_name_as_an_argument() {
        let fleet = RunId::parse("1f2e3d4c").unwrap();
        let k = Kubectl::with_paths("/bin/kubectl".into(), "/k.conf".into());
        let a = agent_argv(&k, &fleet, "node-a; rm -rf /", "isobench-1");
        assert_eq!(a[0], "--kubeconfig");
        assert!(a.contains(&"ISOBENCH_K8S_NODE=node-a; rm -rf /".to_string()));
        let chroot = a.iter().position(|s| s == "/bin/chroot").unwrap();
        assert_eq!(a[chroot + 1], "/host");
        assert_eq!(a[chroot + 2], "/var/lib/isobench/runner/isobench-1");
        assert!(a.contains(&"KUBECONFIG=/run/isobench/runner/1f2e3d4c.kubeconfig".to_string()));
    }
}
