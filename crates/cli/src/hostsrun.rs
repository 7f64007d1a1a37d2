//! `isobench run --hosts hosts.toml`: one scenario on many hosts without Kubernetes, each
//! through its host agent (`isobench_fleet::hosts`); the rest is [`crate::fleetrun`]'s.

use std::path::Path;
use std::process::ExitCode;

use isobench_fleet::hosts::{self, host_slots, raise_open_files, FDS_PER_HOST};

use crate::args::RunArgs;
use crate::exit::session_error;
use crate::fleetrun::{check_args, coordinate, scenario_request};

/// `isobench run --hosts FILE`.
pub fn run(a: &RunArgs, file: &Path) -> anyhow::Result<ExitCode> {
    check_args(a, "--hosts")?;
    let (hosts, type_label) = hosts::load_hosts(file).map_err(session_error)?;
    let req = scenario_request(a)?;
    let nofile = raise_open_files();
    let slots = host_slots(hosts.len(), nofile);
    if slots < hosts.len() {
        eprintln!(
            "isobench: {slots} hosts at a time (the open-file limit is {nofile}, and each host \
             takes {FDS_PER_HOST}); the others wait for a free slot"
        );
    }
    let fleet = hosts::fleet(hosts, type_label, req, slots);
    coordinate(a, fleet)
}
