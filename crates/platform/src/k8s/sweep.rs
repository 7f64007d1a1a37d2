//! What the `k8s` platform leaves behind when a run is killed: the run's namespace (and
//! the pods in it), labelled `isobench.run=<run id>`.
//!
//! Without a kubeconfig, a kubectl or an API server that answers within a few seconds, the
//! sweep does nothing and reports nothing: there is no cluster to clean.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::kubectl::{self, Kubectl};
use super::tenant::RUN_LABEL;
use crate::cgroup::{CgroupFs, Controller};
use crate::leftovers::{CleanupReport, ObjectKind, RunFilter};
use crate::run::RunId;

/// How long the sweep waits for the API server before it gives up quietly.
const REACH: Duration = Duration::from_secs(3);

/// Deletes the namespaces of the runs `filter` selects.
pub(crate) fn sweep(filter: &mut dyn RunFilter, report: &mut CleanupReport) {
    if kubectl::kubeconfig(None).is_none() {
        return;
    }
    let Ok(k) = Kubectl::new(None) else {
        return;
    };
    let t = format!("--request-timeout={}s", REACH.as_secs());
    let listed_at = std::time::SystemTime::now();
    let Ok(out) = k.run(
        &[&t, "get", "namespaces", "-l", RUN_LABEL, "-o", "json"],
        None,
        REACH + Duration::from_secs(2),
    ) else {
        return;
    };
    let Ok(v) = serde_json::from_str::<Value>(&out) else {
        return;
    };
    // The namespaces that stay (not going, not deleted below): a runner's kubeconfig copy
    // whose fleet namespace is not among them is removed after the loop.
    let mut kept: std::collections::BTreeSet<String> = v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|ns| ns["status"]["phase"].as_str() != Some("Terminating"))
        .filter_map(|ns| ns["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    let freezer = CgroupFs::detect()
        .ok()
        .and_then(|fs| fs.hierarchy_of(Controller::Freezer).map(|h| h.root.clone()));
    for ns in v["items"].as_array().into_iter().flatten() {
        let Some(name) = ns["metadata"]["name"].as_str() else {
            continue;
        };
        let label = ns["metadata"]["labels"][RUN_LABEL].as_str().unwrap_or("");
        let run = match RunId::parse(label) {
            Ok(r) => r.to_string(),
            Err(_) => RunId::from_object_name(name).map_or_else(|| "?".into(), |r| r.to_string()),
        };
        // Another machine's run: whether it lives cannot be told from here.
        let host = ns["metadata"]["labels"][super::HOST_LABEL].as_str();
        if host.is_some_and(|h| h != super::host_label()) {
            continue;
        }
        if !filter.selected(&run) {
            continue;
        }
        if ns["status"]["phase"].as_str() == Some("Terminating") {
            // Already going; thawing its pods is all that may be needed.
            thaw_pods(&k, name, freezer.as_deref());
            continue;
        }
        thaw_pods(&k, name, freezer.as_deref());
        let deleted = k
            .run(
                &[
                    "delete",
                    "pods",
                    "--all",
                    "-n",
                    name,
                    "--grace-period=0",
                    "--force",
                    "--wait=false",
                ],
                None,
                Duration::from_secs(30),
            )
            .and_then(|_| {
                k.run(
                    &[
                        "delete",
                        "namespace",
                        name,
                        "--ignore-not-found",
                        "--wait=false",
                    ],
                    None,
                    Duration::from_secs(30),
                )
            });
        match deleted {
            Ok(_) => {
                kept.remove(name);
                report.ok(ObjectKind::Namespace, name, &run)
            }
            Err(e) => report.fail(ObjectKind::Namespace, name, &run, e),
        }
    }
    super::runner::sweep_credentials(&kept, listed_at, report);
}

/// Thaws the pods of namespace `ns` that a killed run left frozen (the on/off design), so
/// the kubelet can stop them.
fn thaw_pods(k: &Kubectl, ns: &str, freezer: Option<&Path>) {
    let Some(root) = freezer else {
        return;
    };
    let Ok(v) = k.json(&["get", "pods", "-n", ns]) else {
        return;
    };
    for pod in v["items"].as_array().into_iter().flatten() {
        let Some(uid) = pod["metadata"]["uid"].as_str() else {
            continue;
        };
        for dir in pod_dirs(root, uid) {
            for d in std::iter::once(dir.clone()).chain(subdirs(&dir)) {
                let _ = std::fs::write(d.join("freezer.state"), "THAWED");
            }
        }
    }
}

/// The pod's cgroup directories under `root/kubepods` (any QoS class).
fn pod_dirs(root: &Path, uid: &str) -> Vec<PathBuf> {
    let pod = format!("pod{uid}");
    ["", "burstable", "besteffort"]
        .iter()
        .map(|q| root.join("kubepods").join(q).join(&pod))
        .filter(|d| d.is_dir())
        .collect()
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default()
}
