//! `isobench run --platform k8s --nodes SELECTOR`: one scenario on every Kubernetes node the
//! label selector matches, each through a runner pod on the node (`isobench_fleet::nodes`);
//! the rest is [`crate::fleetrun`]'s.
//!
//! `ISOBENCH_DEBUG_FAKE_NODES=FILE` (hidden, for tests) takes the nodes from FILE (`kubectl
//! get nodes -o json`) instead of a cluster, matches the selector here, and runs each
//! node's host agent as a local child in fake mode; a node's label
//! `isobench.debug/fake-scale` scales its stressors' effects (a noisy node).

use std::path::PathBuf;
use std::process::ExitCode;

use isobench_fleet::nodes::{self, NodesRequest, ENV_FAKE_NODES};

use crate::args::RunArgs;
use crate::exit::{bad_input, session_error};
use crate::fleetrun::{check_args, coordinate, scenario_request};

/// `isobench run --platform k8s --nodes SELECTOR`.
pub fn run(a: &RunArgs, selector: &str) -> anyhow::Result<ExitCode> {
    check_args(a, "--nodes")?;
    if a.platform.first().map(|p| p.as_str()) != Some("k8s") {
        return Err(bad_input(
            "--nodes runs the scenario on Kubernetes nodes; add --platform k8s",
        ));
    }
    let selector = selector.trim();
    if selector.is_empty() {
        return Err(bad_input(
            "--nodes is empty; give a label selector, e.g. --nodes \
             node.kubernetes.io/instance-type=m5.large (or --nodes kubernetes.io/os=linux for \
             every node)",
        ));
    }
    let req = NodesRequest {
        selector: selector.to_string(),
        scenario: scenario_request(a)?,
        fake_nodes: std::env::var_os(ENV_FAKE_NODES)
            .filter(|f| !f.is_empty())
            .map(PathBuf::from),
        exe: std::env::current_exe()?,
    };
    let (fleet, cleanup) =
        nodes::prepare(req, &mut |note| eprintln!("isobench: {note}")).map_err(session_error)?;
    let ran = coordinate(a, fleet);
    // The runner pods go once the fleet is shown.
    drop(cleanup);
    ran
}
