//! `isobench agent`: the same binary, inside a tenant, driven by a controller.

use std::process::ExitCode;

use crate::args::AgentArgs;

pub fn run(a: &AgentArgs) -> anyhow::Result<ExitCode> {
    if let Some(path) = &a.unix {
        isobench_agent::serve_unix(path)?;
    } else if let Some(path) = &a.serial {
        isobench_agent::serve_serial(path, isobench_agent::SERIAL_CONNECT_TIMEOUT)?;
    } else if let Some(addr) = &a.tcp {
        isobench_agent::serve_tcp(addr.as_str(), a.token.clone())?;
    } else {
        isobench_agent::serve_stdio()?;
    }
    Ok(ExitCode::SUCCESS)
}
