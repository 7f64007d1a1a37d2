//! One scenario on every Kubernetes node a label selector matches. Each node gets a runner
//! pod, and through it a host agent on the node itself, reached over the API server's exec
//! stream (`isobench_platform::k8s::runner`); the node runs the scenario with its tenants as
//! pods on itself. Runs never overlap on a node (one runner per node here, and the node's
//! measurement slot against other runs), and nodes run in parallel. The rest is
//! [`crate::coordinator`]'s: each node's run is imported here, tagged with the node's name
//! and labels (its instance type, kernel and kubelet version among them), and the runs are
//! linked.
//!
//! Fake nodes (a file of `kubectl get nodes -o json`, for tests) are matched against the
//! selector here, and each node's host agent runs as a local child in fake mode; a node's
//! label `isobench.debug/fake-scale` scales its stressors' effects (a noisy node).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use isobench_agent::{AgentClient, RunScenario, ScenarioDone};
use isobench_experiment::session::SessionError;
use isobench_platform::k8s::cluster::{parse_nodes, Node};
use isobench_platform::k8s::{runner, Kubectl};
use isobench_platform::RunGuard;
use isobench_results::fleet::TYPE_LABEL;

use crate::coordinator::{Driver, Fleet, Hangups, Member};
use crate::hosts::{host_slots, raise_open_files, run_scenario};

/// The hidden variable naming a file of fake nodes (read by the caller).
pub const ENV_FAKE_NODES: &str = "ISOBENCH_DEBUG_FAKE_NODES";
/// The fake node label that scales its stressors' effects.
const FAKE_SCALE_LABEL: &str = "isobench.debug/fake-scale";
/// How long a runner pod may take to start.
const RUNNER_START: Duration = Duration::from_secs(180);
/// How long a node's host agent may take to answer `hello` (its binary is copied first).
const HELLO_TIMEOUT: Duration = Duration::from_secs(60);

/// A run on the nodes a selector matches.
pub struct NodesRequest {
    /// The label selector (equality-based for fake nodes).
    pub selector: String,
    /// The scenario every node runs.
    pub scenario: RunScenario,
    /// Nodes from this file (`kubectl get nodes -o json`) instead of a cluster, each node's
    /// host agent a local child in fake mode.
    pub fake_nodes: Option<PathBuf>,
    /// The isobench binary the fake nodes' agents run.
    pub exe: PathBuf,
}

/// What a nodes' fleet run leaves to remove once it ends: dropped, it removes the runner
/// pods and what else the run created (warnings through `log` when that fails), or the fake
/// nodes' databases.
pub struct NodesCleanup {
    _pods: Option<RunnerPods>,
    _dir: Option<tempfile::TempDir>,
}

/// The runner pods of a fleet run, removed when dropped.
struct RunnerPods {
    kubectl: Kubectl,
    guard: Option<RunGuard>,
    names: Vec<String>,
}

impl Drop for RunnerPods {
    fn drop(&mut self) {
        let Some(guard) = self.guard.take() else {
            return;
        };
        if let Err(e) = runner::remove(&self.kubectl, guard.id(), &self.names) {
            tracing::warn!("{e:#}");
        }
        for f in &guard.finish().failed {
            tracing::warn!("could not remove {f}");
        }
    }
}

/// Finds the nodes `req` selects and starts a runner pod on each (`note` hears it), or
/// readies the fake nodes: the fleet run to coordinate, and what to remove after it.
pub fn prepare(
    req: NodesRequest,
    note: &mut dyn FnMut(String),
) -> Result<(Fleet, NodesCleanup), SessionError> {
    if let Some(file) = req.fake_nodes.clone() {
        return fake(req, &file);
    }
    let selector = req.selector.as_str();
    let k = Kubectl::new(None).map_err(|e| {
        SessionError::Unsupported(format!(
            "--nodes needs a cluster: {e:#}; start a local one with `KUBECONFIG=$(scripts/k8s-up)`"
        ))
    })?;
    let bad = |e: anyhow::Error| SessionError::BadInput(format!("--nodes {selector}: {e:#}"));
    let text = k
        .query(&["get", "nodes", "-l", selector, "-o", "json"])
        .map_err(bad)?;
    let nodes = parse_nodes(&text).map_err(bad)?;
    if nodes.is_empty() {
        return Err(SessionError::BadInput(format!(
            "--nodes {selector}: no node has these labels; `kubectl get nodes --show-labels` \
             lists them"
        )));
    }
    let guard = RunGuard::start_coordinator().map_err(SessionError::Other)?;
    let fleet = guard.id().clone();
    let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
    let (image, exe) = runner::runner_image().map_err(SessionError::Other)?;
    let kubeconfig = runner::flattened_kubeconfig(&k).map_err(SessionError::Other)?;
    note(format!(
        "starting a runner pod on each of {} nodes (namespace {})",
        names.len(),
        runner::fleet_namespace(&fleet)
    ));
    k.apply(&runner::manifest(&fleet, &names, &image, &kubeconfig))
        .map_err(SessionError::Other)?;
    let pods = RunnerPods {
        kubectl: k.clone(),
        guard: Some(guard),
        names,
    };
    let driver = Arc::new(Runners {
        kubectl: k,
        fleet,
        exe,
    });
    let fleet = Fleet::new(
        nodes.iter().map(member).collect(),
        TYPE_LABEL.to_string(),
        req.scenario,
        driver,
        host_slots(nodes.len(), raise_open_files()),
    );
    let cleanup = NodesCleanup {
        _pods: Some(pods),
        _dir: None,
    };
    Ok((fleet, cleanup))
}

/// A node as a fleet member: its name, and its labels with its kernel and kubelet version.
fn member(n: &Node) -> Member {
    let mut labels: BTreeMap<String, String> = n.labels.clone();
    if let Some(t) = &n.instance_type {
        labels.insert(TYPE_LABEL.to_string(), t.clone());
    }
    for (k, v) in [("kernel", &n.kernel), ("kubelet", &n.kubelet_version)] {
        if !v.is_empty() {
            labels.insert(k.to_string(), v.clone());
        }
    }
    Member {
        name: n.name.clone(),
        address: format!("node/{}", n.name),
        labels,
    }
}

/// Nodes reached through their runner pods.
struct Runners {
    kubectl: Kubectl,
    fleet: isobench_platform::RunId,
    exe: String,
}

impl Driver for Runners {
    fn noun(&self) -> &'static str {
        "nodes"
    }

    fn drive(
        &self,
        i: usize,
        m: &Member,
        req: RunScenario,
        hangups: &Hangups,
        progress: &mut dyn FnMut(&str),
    ) -> Result<(ScenarioDone, String), String> {
        runner::wait_running(&self.kubectl, &self.fleet, &m.name, RUNNER_START)
            .map_err(|e| format!("{e:#}"))?;
        runner::prepare_node(&self.kubectl, &self.fleet, &m.name, &self.exe)
            .map_err(|e| format!("{e:#}"))?;
        let cmd = runner::agent_command(&self.kubectl, &self.fleet, &m.name, &self.exe);
        session(i, m, cmd, req, hangups, progress)
    }
}

/// Runs `req` through the host agent `cmd` starts on its standard streams. Its standard
/// error is kept and told when the session fails.
fn session(
    i: usize,
    m: &Member,
    mut cmd: Command,
    req: RunScenario,
    hangups: &Hangups,
    progress: &mut dyn FnMut(&str),
) -> Result<(ScenarioDone, String), String> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start its runner's agent: {e}"))?;
    let pid = child.id() as libc::pid_t;
    hangups.set(
        i,
        Box::new(move || {
            // SAFETY: signalling our own child; its stream closes, and the node's agent
            // stops its run as Ctrl-C would.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }),
    );
    let stderr = keep_stderr(&mut child);
    let ended = talk(m, &mut child, req, progress);
    // Ends the agent: its input closes once the client is gone.
    let exit = match &ended {
        Ok(_) => child.wait().ok(),
        Err(_) => {
            let _ = child.kill();
            child.wait().ok()
        }
    };
    ended.map_err(|why| {
        let said = stderr
            .lock()
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let tail: String = said.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
        match (tail.is_empty(), exit.and_then(|e| e.code())) {
            (true, _) => why,
            (false, code) => format!(
                "{why} (its agent{} said: {tail})",
                code.map(|c| format!(" exited {c} and")).unwrap_or_default()
            ),
        }
    })
}

fn talk(
    m: &Member,
    child: &mut Child,
    req: RunScenario,
    progress: &mut dyn FnMut(&str),
) -> Result<(ScenarioDone, String), String> {
    let client = AgentClient::from_child(m.name.clone(), child)
        .map_err(|e| e.to_string())?
        .with_timeout(HELLO_TIMEOUT);
    run_scenario(&client, req, progress, "")
}

/// Collects the child's standard error in a thread of its own (the last 64 KiB).
fn keep_stderr(child: &mut Child) -> Arc<Mutex<String>> {
    let kept = Arc::new(Mutex::new(String::new()));
    if let Some(mut err) = child.stderr.take() {
        let to = kept.clone();
        let _ = thread::Builder::new()
            .name("runner-stderr".into())
            .spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = err.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let mut s = to.lock().unwrap_or_else(|p| p.into_inner());
                    s.push_str(&String::from_utf8_lossy(&buf[..n]));
                    if s.len() > 65536 {
                        let cut = s.len() - 65536;
                        let cut = (cut..s.len()).find(|&c| s.is_char_boundary(c)).unwrap_or(0);
                        s.drain(..cut);
                    }
                }
            });
    }
    kept
}

/// Whether a node with `labels` matches an equality-based label selector (`k=v`, `k==v`,
/// `k!=v`, `k`, `!k`, comma-separated): what the fake nodes are selected with.
fn matches(selector: &str, labels: &BTreeMap<String, String>) -> Result<bool, String> {
    for req in selector.split(',').map(str::trim) {
        let ok = if let Some((k, v)) = req.split_once("!=") {
            labels.get(k.trim()).map(String::as_str) != Some(v.trim())
        } else if let Some((k, v)) = req.split_once("==").or_else(|| req.split_once('=')) {
            labels.get(k.trim()).map(String::as_str) == Some(v.trim())
        } else if let Some(k) = req.strip_prefix('!') {
            !labels.contains_key(k.trim())
        } else if !req.is_empty() && !req.contains([' ', '(', ')']) {
            labels.contains_key(req)
        } else {
            return Err(format!(
                "`{req}` is not an equality-based requirement (k=v, k!=v, k, !k)"
            ));
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The fake fleet: nodes from `file`, each node's host agent a local child in fake mode.
fn fake(req: NodesRequest, file: &Path) -> Result<(Fleet, NodesCleanup), SessionError> {
    let bad = SessionError::BadInput;
    let text = std::fs::read_to_string(file)
        .map_err(|e| bad(format!("{ENV_FAKE_NODES}={}: {e}", file.display())))?;
    let all = parse_nodes(&text)
        .map_err(|e| bad(format!("{ENV_FAKE_NODES}={}: {e:#}", file.display())))?;
    let mut nodes = Vec::new();
    for n in all {
        if matches(&req.selector, &n.labels).map_err(|e| bad(format!("--nodes: {e}")))? {
            nodes.push(n);
        }
    }
    if nodes.is_empty() {
        return Err(bad(format!(
            "--nodes {}: no node has these labels",
            req.selector
        )));
    }
    let dir = tempfile::tempdir().map_err(|e| SessionError::Other(e.into()))?;
    let driver = Arc::new(LocalAgents {
        exe: req.exe,
        dir: dir.path().to_path_buf(),
        scale: nodes
            .iter()
            .map(|n| n.labels.get(FAKE_SCALE_LABEL).cloned())
            .collect(),
    });
    let fleet = Fleet::new(
        nodes.iter().map(member).collect(),
        TYPE_LABEL.to_string(),
        req.scenario,
        driver,
        nodes.len(),
    );
    let cleanup = NodesCleanup {
        _pods: None,
        _dir: Some(dir),
    };
    Ok((fleet, cleanup))
}

/// Fake nodes: each node's host agent a local child in fake mode, with a database of its own.
struct LocalAgents {
    exe: PathBuf,
    dir: PathBuf,
    scale: Vec<Option<String>>,
}

impl Driver for LocalAgents {
    fn noun(&self) -> &'static str {
        "nodes"
    }

    fn drive(
        &self,
        i: usize,
        m: &Member,
        req: RunScenario,
        hangups: &Hangups,
        progress: &mut dyn FnMut(&str),
    ) -> Result<(ScenarioDone, String), String> {
        let mut cmd = Command::new(&self.exe);
        cmd.args(["agent", "--runner", "--db"])
            .arg(self.dir.join(format!("node{i}.db")))
            .env("ISOBENCH_DEBUG_FAKE", "1")
            .env(runner::ENV_NODE, &m.name);
        match &self.scale[i] {
            Some(s) => cmd.env("ISOBENCH_DEBUG_FAKE_SCALE", s),
            None => cmd.env_remove("ISOBENCH_DEBUG_FAKE_SCALE"),
        };
        session(i, m, cmd, req, hangups, progress)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn equality_selectors_match_as_kubectl_would() {
        let l = labels(&[("pool", "a"), ("zone", "z1")]);
        assert!(matches("pool=a", &l).unwrap());
        assert!(matches("pool==a,zone", &l).unwrap());
        assert!(!matches("pool=a,zone!=z1", &l).unwrap());
        assert!(matches("!gpu", &l).unwrap());
        assert!(!matches("gpu", &l).unwrap());
        assert!(matches("pool in (a,b)", &l).is_err());
    }

    #[test]
    fn a_node_is_tagged_with_its_type_kernel_and_kubelet() {
        let nodes = parse_nodes(
            r#"{"items":[{"metadata":{"name":"n1","labels":{"node.kubernetes.io/instance-type":"m5"}},
              "status":{"nodeInfo":{"kubeletVersion":"v1.37.2","kernelVersion":"6.1.0"}}}]}"#,
        )
        .unwrap();
        let m = member(&nodes[0]);
        assert_eq!(m.name, "n1");
        assert_eq!(m.labels[TYPE_LABEL], "m5");
        assert_eq!(m.labels["kernel"], "6.1.0");
        assert_eq!(m.labels["kubelet"], "v1.37.2");
    }
}
