//! `isobench agent`: the same binary, inside a tenant, driven by a controller; or, with
//! `--listen` (TCP) or `--runner` (stdio), a host agent that runs whole scenarios for a fleet
//! run's coordinator.

use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use isobench_agent::{AgentConfig, AgentListener};

use crate::args::AgentArgs;
use crate::exit::bad_input;
use isobench_fleet::hostagent::HostRunner;

pub fn run(a: &AgentArgs) -> anyhow::Result<ExitCode> {
    if let Some(addr) = &a.listen {
        return listen(a, addr);
    }
    if a.runner {
        if let Err(e) = isobench_platform::k8s::runner::leave_pod_cpu_cgroup() {
            tracing::warn!("{e:#}");
        }
        let config = AgentConfig::default().with_scenarios(Arc::new(host_runner(a)?));
        isobench_agent::serve_stdio_with(&config)?;
        return Ok(ExitCode::SUCCESS);
    }
    let token = match &a.token_file {
        Some(f) => Some(read_token(f)?),
        None => a.token.clone(),
    };
    if let Some(path) = &a.unix {
        isobench_agent::serve_unix(path)?;
    } else if let Some(path) = &a.serial {
        isobench_agent::serve_serial(path, isobench_agent::SERIAL_CONNECT_TIMEOUT)?;
    } else if let Some(addr) = &a.tcp {
        if let Some(t) = &token {
            check_strength(t, a)?;
        }
        let listener = AgentListener::bind_tcp(
            addr.as_str(),
            AgentConfig {
                token: token.map(isobench_agent::Token),
                ..AgentConfig::default()
            },
        )
        .map_err(|e| bad_input(format!("--tcp {addr}: {e:#}")))?;
        eprintln!("isobench: agent listening on {}", listener.local_addr());
        listener.serve()?;
    } else {
        isobench_agent::serve_stdio()?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A host agent on `addr` until a stopping signal.
fn listen(a: &AgentArgs, addr: &str) -> anyhow::Result<ExitCode> {
    let file = a.token_file.as_deref().expect("clap requires --token-file");
    let token = read_token(file)?;
    check_strength(&token, a)?;
    let config = AgentConfig::default()
        .with_token(token)
        .with_scenarios(Arc::new(host_runner(a)?));
    let listener = AgentListener::bind_tcp(addr, config)
        .map_err(|e| bad_input(format!("--listen {addr}: {e:#}")))?;
    eprintln!(
        "isobench: host agent listening on {} (database {}); stop it with Ctrl-C",
        listener.local_addr(),
        a.db.path.display()
    );
    let stop = Arc::new(AtomicBool::new(false));
    crate::tenant::install_stop(stop.clone())?;
    listener.serve_forever(&stop)?;
    Ok(ExitCode::SUCCESS)
}

/// Runs scenarios with this binary, into the database of `a`.
fn host_runner(a: &AgentArgs) -> anyhow::Result<HostRunner> {
    Ok(HostRunner {
        exe: std::env::current_exe()?,
        db: std::path::absolute(&a.db.path)?,
    })
}

/// Refuses a token shorter than 16 characters, naming where it came from.
fn check_strength(token: &str, a: &AgentArgs) -> anyhow::Result<()> {
    isobench_agent::token::check_token_strength(token).map_err(|why| {
        let from = match &a.token_file {
            Some(f) => format!("--token-file {}", f.display()),
            None => format!("--token (or {})", isobench_agent::TOKEN_ENV),
        };
        bad_input(format!("{from}: {why}"))
    })
}

/// The token in `file`: its first line, trimmed (see [`isobench_fleet::hosts::read_token`]).
pub fn read_token(file: &Path) -> anyhow::Result<String> {
    isobench_fleet::hosts::read_token(file).map_err(bad_input)
}
