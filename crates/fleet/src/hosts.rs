//! One scenario on many hosts without Kubernetes, fio's `--client` model. Each host runs a
//! host agent (`isobench agent --listen ADDR --token-file FILE`), reached over TCP with its
//! token; the rest of the fleet run is [`crate::coordinator`]'s.
//!
//! Every host's session holds four descriptors and two threads here, so a fleet larger than
//! the open-file limit allows is driven through a pool of as many sessions as fit: the other
//! hosts wait for a free slot (bench/fleet-sim measured the coordinator at 100, 1,000 and
//! 10,000 hosts; without the pool, hosts past the limit failed with "Too many open files").

use std::collections::BTreeMap;
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use isobench_agent::{AgentClient, ProtocolVersion, RunScenario, ScenarioDone};
use isobench_experiment::session::SessionError;
use isobench_results::fleet::TYPE_LABEL;
use serde::Deserialize;

use crate::coordinator::{Driver, Fleet, Hangups, Member};

/// The first protocol version with `run_scenario`.
pub const SCENARIOS_SINCE: ProtocolVersion = ProtocolVersion { major: 1, minor: 1 };

/// How long a host may take to accept the connection and answer `hello`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Descriptors one host's session holds: its socket, the agent client's reading and writing
/// duplicates, and the duplicate kept to shut it down on Ctrl-C.
pub const FDS_PER_HOST: u64 = 4;

/// Descriptors kept for everything else: the database and its journal, the terminal, the
/// scenario and hosts files.
const FDS_SPARE: u64 = 64;

/// How many hosts' sessions run at once under an open-file limit of `nofile`: every host
/// when the limit allows, else as many as fit (at least one).
pub fn host_slots(hosts: usize, nofile: u64) -> usize {
    let fit = (nofile.saturating_sub(FDS_SPARE) / FDS_PER_HOST).max(1);
    hosts.min(usize::try_from(fit).unwrap_or(usize::MAX)).max(1)
}

/// The open-file limit, raised to its hard limit first (the soft one is often 1,024).
pub fn raise_open_files() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return 1024;
    }
    if r.rlim_cur < r.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: r.rlim_max,
            rlim_max: r.rlim_max,
        };
        // SAFETY: setrlimit only reads the struct it is given; on failure nothing changes.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            r.rlim_cur = r.rlim_max;
        }
    }
    r.rlim_cur
}

/// The hosts file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HostsFile {
    /// The label that names a host's type (default: Kubernetes' instance-type label).
    #[serde(default)]
    type_label: Option<String>,
    /// The token file of every host that names none.
    #[serde(default)]
    token_file: Option<PathBuf>,
    /// The hosts.
    #[serde(default, rename = "host")]
    hosts: Vec<HostEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HostEntry {
    name: String,
    /// `ADDR:PORT` of its host agent.
    address: String,
    #[serde(default)]
    token_file: Option<PathBuf>,
    /// Shorthand for the type label.
    #[serde(default, rename = "type")]
    host_type: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

/// One host, ready to connect to.
#[derive(Debug, Clone, PartialEq)]
pub struct Host {
    /// Its name.
    pub name: String,
    /// Its agent's address.
    pub address: String,
    /// The token its agent wants.
    pub token: String,
    /// Its labels, the type label included when given.
    pub labels: BTreeMap<String, String>,
}

/// The hosts of `file` and the label that names their type. Every error names the file and
/// the field, and says what to write instead.
pub fn load_hosts(file: &Path) -> Result<(Vec<Host>, String), SessionError> {
    let shown = file.display();
    let bad = |m: String| SessionError::BadInput(m);
    let text = std::fs::read_to_string(file).map_err(|e| bad(format!("--hosts {shown}: {e}")))?;
    let parsed: HostsFile = toml::from_str(&text)
        .map_err(|e| bad(format!("--hosts {shown}: {}", e.to_string().trim_end())))?;
    let type_label = parsed.type_label.unwrap_or_else(|| TYPE_LABEL.to_string());
    if parsed.hosts.is_empty() {
        return Err(bad(format!(
            "--hosts {shown}: no host; add one [[host]] table per host, with name, address \
             (ADDR:PORT of `isobench agent --listen`) and token_file"
        )));
    }
    let base = file.parent().unwrap_or(Path::new("."));
    let mut hosts: Vec<Host> = Vec::new();
    for (i, h) in parsed.hosts.into_iter().enumerate() {
        let at = format!("--hosts {shown}: host[{i}]");
        let host = host(
            h,
            &at,
            &hosts,
            parsed.token_file.as_deref(),
            base,
            &type_label,
        )
        .map_err(bad)?;
        hosts.push(host);
    }
    Ok((hosts, type_label))
}

/// One entry of the hosts file (`at` names it), checked against the hosts before it.
fn host(
    h: HostEntry,
    at: &str,
    before: &[Host],
    default_token: Option<&Path>,
    base: &Path,
    type_label: &str,
) -> Result<Host, String> {
    let name = h.name.trim().to_string();
    if name.is_empty() {
        return Err(format!("{at}.name is empty; give each host a name"));
    }
    if before.iter().any(|o| o.name == name) {
        return Err(format!(
            "{at}.name `{name}` is given twice; host names must be unique"
        ));
    }
    if h.address
        .to_socket_addrs()
        .map(|mut a| a.next())
        .ok()
        .flatten()
        .is_none()
    {
        return Err(format!(
            "{at}.address `{}` is not ADDR:PORT (e.g. 10.0.0.7:7878, the address given to \
             `isobench agent --listen` on that host)",
            h.address
        ));
    }
    let Some(token_file) = h.token_file.as_deref().or(default_token) else {
        return Err(format!(
            "{at} has no token_file, and the file gives none for every host; add \
             token_file = \"PATH\" (the file given to that host's `isobench agent \
             --token-file`)"
        ));
    };
    let token = read_token(&base.join(token_file)).map_err(|e| format!("{at}.token_file: {e}"))?;
    let mut labels = h.labels;
    if let Some(t) = h.host_type {
        labels.insert(type_label.to_string(), t);
    }
    Ok(Host {
        name,
        address: h.address,
        token,
        labels,
    })
}

/// The token in `file`: its first line, trimmed. Refused when the file cannot be read, is
/// empty, or others than its owner may read it.
pub fn read_token(file: &Path) -> Result<String, String> {
    let shown = file.display();
    let meta = std::fs::metadata(file).map_err(|e| format!("--token-file {shown}: {e}"))?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "--token-file {shown} may be read by others than its owner (mode {:o}); \
             run `chmod 600 {shown}`",
            meta.permissions().mode() & 0o777
        ));
    }
    let text = std::fs::read_to_string(file).map_err(|e| format!("--token-file {shown}: {e}"))?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.is_empty() {
        return Err(format!(
            "--token-file {shown} is empty; put a token of at least 16 characters in it \
             (e.g. `head -c 24 /dev/urandom | base64 > {shown}`)"
        ));
    }
    Ok(token)
}

/// The fleet run of `scenario` on `hosts`, `slots` at a time.
pub fn fleet(hosts: Vec<Host>, type_label: String, scenario: RunScenario, slots: usize) -> Fleet {
    let members = hosts
        .iter()
        .map(|h| Member {
            name: h.name.clone(),
            address: h.address.clone(),
            labels: h.labels.clone(),
        })
        .collect();
    let driver = Arc::new(Agents {
        tokens: hosts.into_iter().map(|h| h.token).collect(),
    });
    Fleet::new(members, type_label, scenario, driver, slots)
}

/// Host agents over TCP, each with its token (by member index).
struct Agents {
    tokens: Vec<String>,
}

impl Driver for Agents {
    fn noun(&self) -> &'static str {
        "hosts"
    }

    fn drive(
        &self,
        i: usize,
        m: &Member,
        req: RunScenario,
        hangups: &Hangups,
        progress: &mut dyn FnMut(&str),
    ) -> Result<(ScenarioDone, String), String> {
        session(i, m, &self.tokens[i], req, hangups, progress)
    }
}

/// One host's run, start to end: connect, `hello`, `run_scenario`. The host's stream is
/// shut down by its hangup (Ctrl-C).
fn session(
    i: usize,
    h: &Member,
    token: &str,
    req: RunScenario,
    hangups: &Hangups,
    progress: &mut dyn FnMut(&str),
) -> Result<(ScenarioDone, String), String> {
    let addr = h
        .address
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("address {} resolves to nothing", h.address))?;
    let stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).map_err(|e| {
        format!(
            "cannot connect to {}: {e}; is `isobench agent --listen {}` running there?",
            h.address, h.address
        )
    })?;
    if let Ok(s) = stream.try_clone() {
        hangups.set(
            i,
            Box::new(move || {
                let _ = s.shutdown(Shutdown::Both);
            }),
        );
    }
    let client = AgentClient::from_tcp_stream(h.name.clone(), stream)
        .map_err(|e| e.to_string())?
        .with_timeout(CONNECT_TIMEOUT)
        .with_token(token.to_string());
    run_scenario(
        &client,
        req,
        progress,
        "; install this isobench version there",
    )
}

/// Greets a host agent and runs `req` through it, when it speaks a protocol that can;
/// `advice` ends the refusal when it cannot.
pub(crate) fn run_scenario(
    client: &AgentClient,
    req: RunScenario,
    progress: &mut dyn FnMut(&str),
    advice: &str,
) -> Result<(ScenarioDone, String), String> {
    client.hello().map_err(|e| e.to_string())?;
    match client.negotiated_version() {
        Some(v) if v >= SCENARIOS_SINCE => {}
        v => {
            return Err(format!(
                "its agent speaks protocol {}, and running a scenario needs {SCENARIOS_SINCE}\
                 {advice}",
                v.map_or_else(|| "?".into(), |v| v.to_string())
            ))
        }
    }
    client
        .run_scenario(req, progress)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_host_at_once_when_the_open_file_limit_allows() {
        assert_eq!(host_slots(3, 1024), 3);
        assert_eq!(host_slots(1_000, 20_000), 1_000);
    }

    #[test]
    fn too_many_open_files_at_10000_hosts_is_avoided_by_a_pool() {
        // 10,000 hosts under a limit of 20,000 descriptors: 4 each, 64 spare.
        assert_eq!(host_slots(10_000, 20_000), 4_984);
        assert_eq!(host_slots(10_000, 1024), 240);
    }

    #[test]
    fn at_least_one_host_at_a_time() {
        assert_eq!(host_slots(5, 10), 1);
        assert_eq!(host_slots(5, 0), 1);
    }
}
