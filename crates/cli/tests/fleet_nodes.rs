//! `isobench run --platform k8s --nodes SELECTOR` with fake nodes (the hidden
//! `ISOBENCH_DEBUG_FAKE_NODES`: the nodes' JSON from a file, each node's host agent a local
//! child on the fake platform, with deterministic figures): the selector, the node's tags,
//! the fleet table per node type, and the noisy node flagged. The real cluster's run is in
//! tests/k8s.rs.

mod common;

use std::path::Path;

use common::{code, fake, run_ids, text, write};

/// Two m5 nodes in pool p (n2 noisy: its stressors hurt 1.6 times as much), an m5 node in
/// pool q, and a node of no type in pool p.
const NODES: &str = r#"{"apiVersion":"v1","kind":"List","items":[
 {"metadata":{"name":"n1","labels":{"pool":"p","node.kubernetes.io/instance-type":"m5"}},
  "status":{"nodeInfo":{"kubeletVersion":"v1.37.2","kernelVersion":"6.1.0"}}},
 {"metadata":{"name":"n2","labels":{"pool":"p","node.kubernetes.io/instance-type":"m5",
  "isobench.debug/fake-scale":"1.6"}},
  "status":{"nodeInfo":{"kubeletVersion":"v1.37.2","kernelVersion":"6.1.0"}}},
 {"metadata":{"name":"n3","labels":{"pool":"q","node.kubernetes.io/instance-type":"m5"}},
  "status":{"nodeInfo":{"kubeletVersion":"v1.36.0","kernelVersion":"6.1.0"}}},
 {"metadata":{"name":"n4","labels":{"pool":"p","gpu":"yes"}},
  "status":{"nodeInfo":{"kubeletVersion":"v1.37.2","kernelVersion":"6.12.0"}}}
]}"#;

fn nodes_run(dir: &Path, selector: &str, extra: &[&str]) -> (i32, String, String) {
    let nodes = write(dir, "nodes.json", NODES);
    let out = fake()
        .env("ISOBENCH_DEBUG_FAKE_NODES", nodes)
        .args([
            "run",
            "--platform",
            "k8s",
            "--nodes",
            selector,
            "-q",
            "--db",
        ])
        .arg(dir.join("fleet.db"))
        .args(extra)
        .output()
        .unwrap();
    (code(&out), text(&out.stdout), text(&out.stderr))
}

#[test]
fn two_nodes_of_one_type_give_the_fleet_table_with_the_noisy_one_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = nodes_run(dir.path(), "pool=p,!gpu", &[]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("running quick.toml on 2 nodes: n1, n2"),
        "{stderr}"
    );
    assert!(stdout.contains("m5 (2 hosts)"), "{stdout}");
    assert!(stdout.contains("noisy host: n2 (m5, run "), "{stdout}");
    assert!(!stdout.contains("noisy host: n1 "), "{stdout}");
    // Each node's run is tagged with its name, type, kernel and kubelet version.
    assert!(stdout.contains("\nNodes\n"), "{stdout}");
    for tag in [
        "kernel=6.1.0",
        "kubelet=v1.37.2",
        "node.kubernetes.io/instance-type=m5",
    ] {
        assert!(stdout.contains(tag), "no {tag} in {stdout}");
    }
    assert!(!stdout.contains("n3") && !stdout.contains("n4"), "{stdout}");
    // The runs are stored here, linked: either one's `show` gives the fleet table.
    let db = dir.path().join("fleet.db");
    let ids = run_ids(&db);
    assert_eq!(ids.len(), 2, "{ids:?}");
    let shown = fake()
        .args(["show", &ids[1], "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(
        text(&shown.stdout).contains("noisy host: n2"),
        "{}",
        text(&shown.stdout)
    );
    // The HTML report of either run shows the fleet: the table per type, the noisy node.
    let html = dir.path().join("report.html");
    let out = fake()
        .args(["report", &ids[0], "-o"])
        .arg(&html)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 0, "{}", text(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Degradation per host type"), "{page}");
    assert!(page.contains("noisy host: n2"), "{page}");
}

#[test]
fn a_selector_that_matches_nothing_or_no_k8s_platform_is_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, stderr) = nodes_run(dir.path(), "pool=zzz", &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--nodes pool=zzz: no node has these labels"),
        "{stderr}"
    );
    let (code, _, stderr) = nodes_run(dir.path(), "pool in (p)", &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("not an equality-based requirement"),
        "{stderr}"
    );

    let out = fake()
        .args(["run", "--nodes", "pool=p", "--db"])
        .arg(dir.path().join("x.db"))
        .output()
        .unwrap();
    assert_eq!(common::code(&out), 2);
    assert!(
        text(&out.stderr).contains("add --platform k8s"),
        "{}",
        text(&out.stderr)
    );
    assert!(run_ids(&dir.path().join("fleet.db")).is_empty());
}
