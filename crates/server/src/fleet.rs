//! Fleet jobs: one scenario on several hosts at once, run as a child `isobench run --hosts
//! FILE` (docs/fleet.md), exactly as on the command line. The hosts a client sends are
//! checked here (each error names its field), written as that hosts file into the state
//! directory (each token in a file of its own, mode 0600, never shown by the API), and the
//! coordinator's events are read back into the job's progress.
//!
//! The child runs with `--json-stream`, so its stdout holds the fleet's events
//! (docs/events.md, "Fleet runs"): `member_progress` carries each host's run id once
//! planned and its trials done and planned, and `member_imported` / `member_not_run` end a
//! host. [`FleetProgress`] reads those; the events themselves are passed on to the live views
//! as they are.

use std::path::Path;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::ApiError;
use crate::queue::{JobHost, Progress};

/// The most hosts one job may name.
pub const MAX_HOSTS: usize = 1000;

/// The longest name, type or token accepted.
const MAX_FIELD: usize = 256;

/// One host of `POST /api/v1/jobs` `hosts`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewHost {
    /// `ADDR:PORT` of its host agent (`isobench agent --listen ADDR:PORT`).
    pub address: String,
    /// Its name in the fleet table (default: its address); unique within the job.
    pub name: Option<String>,
    /// Its type: hosts of one type are pooled in one column of the fleet table.
    #[serde(rename = "type")]
    pub host_type: Option<String>,
    /// The token of its agent (the contents of the agent's `--token-file`).
    pub token: String,
}

/// A name, type or token: not empty, at most [`MAX_FIELD`] characters, no control
/// characters (the hosts file is line-based).
fn check_text(field: String, text: &str) -> Result<(), ApiError> {
    if text.trim().is_empty() {
        return Err(ApiError::field(field, "is empty"));
    }
    if text.chars().count() > MAX_FIELD {
        return Err(ApiError::field(
            field,
            format!("is longer than {MAX_FIELD} characters"),
        ));
    }
    if text.chars().any(char::is_control) {
        return Err(ApiError::field(
            field,
            "holds a control character (a line break, a tab)",
        ));
    }
    Ok(())
}

/// `ADDR:PORT` (an IPv6 address in brackets): a host part and a port from 1 to 65535. Not
/// resolved here: the run says so when a name does not resolve.
fn check_address(field: String, address: &str) -> Result<(), ApiError> {
    let fix = "is not ADDR:PORT (e.g. 10.0.0.7:7878, the address given to `isobench agent \
               --listen` on that host)";
    let (host, port) = address
        .rsplit_once(':')
        .ok_or_else(|| ApiError::field(field.clone(), fix))?;
    let port_ok = port.parse::<u16>().is_ok_and(|p| p > 0);
    let host_ok = !host.is_empty()
        && !host.chars().any(|c| c.is_whitespace() || c.is_control())
        && (host.starts_with('[') == host.ends_with(']'));
    if !port_ok || !host_ok || address.chars().count() > MAX_FIELD {
        return Err(ApiError::field(field, fix));
    }
    Ok(())
}

/// The hosts of a job, checked: at least one, at most [`MAX_HOSTS`], each with an address,
/// a token, and a name no other has. Returns them as the job keeps them, and their tokens
/// in the same order.
pub fn check_hosts(hosts: &[NewHost]) -> Result<(Vec<JobHost>, Vec<String>), ApiError> {
    if hosts.is_empty() {
        return Err(ApiError::field(
            "hosts",
            "is empty; give one {\"address\": \"ADDR:PORT\", \"token\": ...} per host, or \
             leave hosts out to run here",
        ));
    }
    if hosts.len() > MAX_HOSTS {
        return Err(ApiError::field(
            "hosts",
            format!("names {} hosts, more than {MAX_HOSTS}", hosts.len()),
        ));
    }
    let mut out: Vec<JobHost> = Vec::with_capacity(hosts.len());
    let mut tokens = Vec::with_capacity(hosts.len());
    for (i, h) in hosts.iter().enumerate() {
        let at = |f: &str| format!("hosts[{i}].{f}");
        let address = h.address.trim().to_string();
        check_address(at("address"), &address)?;
        let name = match &h.name {
            Some(n) => {
                check_text(at("name"), n)?;
                n.trim().to_string()
            }
            None => address.clone(),
        };
        if out.iter().any(|o| o.name == name) {
            return Err(ApiError::field(
                at("name"),
                format!("`{name}` is given twice; host names must be unique"),
            ));
        }
        let host_type = match &h.host_type {
            Some(t) => {
                check_text(at("type"), t)?;
                Some(t.trim().to_string())
            }
            None => None,
        };
        check_text(at("token"), &h.token)?;
        tokens.push(h.token.trim().to_string());
        out.push(JobHost {
            name,
            address,
            host_type,
        });
    }
    Ok((out, tokens))
}

/// The hosts file of `isobench run --hosts` (hostsrun.rs reads it).
#[derive(Serialize)]
struct HostsFile<'a> {
    host: Vec<HostEntry<'a>>,
}

#[derive(Serialize)]
struct HostEntry<'a> {
    name: &'a str,
    address: &'a str,
    /// Relative to the hosts file.
    token_file: String,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    host_type: Option<&'a str>,
}

/// Writes the hosts file `path` for `hosts`, and host `i`'s token to `PATH.token-i` beside
/// it, each a file of mode 0600.
pub fn write_hosts_file(path: &Path, hosts: &[JobHost], tokens: &[String]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    crate::private::create_dir_all(dir)?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut entries = Vec::with_capacity(hosts.len());
    for (i, (h, token)) in hosts.iter().zip(tokens).enumerate() {
        let token_file = format!("{file_name}.token-{i}");
        let at = dir.join(&token_file);
        crate::private::replace(
            &at,
            &at.with_extension("tmp"),
            format!("{token}\n").as_bytes(),
        )?;
        entries.push(HostEntry {
            name: &h.name,
            address: &h.address,
            token_file,
            host_type: h.host_type.as_deref(),
        });
    }
    let text = toml::to_string(&HostsFile { host: entries }).map_err(std::io::Error::other)?;
    crate::private::replace(path, &path.with_extension("toml.tmp"), text.as_bytes())
}

/// Where one host's run stands, as its events told.
#[derive(Debug, Clone, Default)]
struct HostProgress {
    /// Its run's id, once planned.
    run: Option<String>,
    /// Trials planned.
    of: u64,
    /// Trials done (every tenth is told).
    n: u64,
    /// Its run ended and was stored here.
    imported: bool,
    /// It ended without a run stored here.
    failed: bool,
}

/// The progress of a fleet job, from the coordinator's events.
#[derive(Debug, Clone)]
pub struct FleetProgress {
    names: Vec<String>,
    hosts: Vec<HostProgress>,
    /// The host whose run is the job's: the first one planned.
    chosen: Option<usize>,
}

impl FleetProgress {
    /// Nothing told yet of `hosts`.
    pub fn new(hosts: &[JobHost]) -> FleetProgress {
        FleetProgress {
            names: hosts.iter().map(|h| h.name.clone()).collect(),
            hosts: vec![HostProgress::default(); hosts.len()],
            chosen: None,
        }
    }

    /// Whether `kind` is an event of the fleet (docs/events.md, "Fleet runs"), which
    /// [`FleetProgress::read`] takes.
    pub fn is_fleet_event(kind: &str) -> bool {
        kind.starts_with("fleet_") || kind.starts_with("member_")
    }

    /// Reads one event of the coordinator; whether it changed a host's run or trials.
    pub fn read(&mut self, event: &serde_json::Value) -> bool {
        let member = event["member"].as_str();
        let Some(i) = member.and_then(|m| self.names.iter().position(|n| n == m)) else {
            return false;
        };
        let h = &mut self.hosts[i];
        let as_u64 = |f: &str| event[f].as_u64();
        match event["event"].as_str().unwrap_or_default() {
            "member_progress" => {
                let run = event["run"].as_str().map(str::to_string);
                let (n, of) = (as_u64("n"), as_u64("of"));
                if run.is_none() && n.is_none() && of.is_none() {
                    return false;
                }
                if run.is_some() {
                    h.run = run;
                    self.chosen.get_or_insert(i);
                }
                h.n = n.unwrap_or(h.n);
                h.of = of.unwrap_or(h.of);
            }
            "member_imported" => {
                h.imported = true;
                if let Some(run) = event["done"]["run_id"].as_str() {
                    h.run = Some(run.to_string());
                }
                h.n = h.of;
            }
            "member_not_run" => {
                h.failed = true;
                h.n = h.of;
            }
            _ => return false,
        }
        true
    }

    /// The job's run: the first one planned, kept while the run lasts (a page follows it;
    /// any host's run carries the fleet), unless its host ends without storing it here:
    /// then the first host's run that was stored.
    pub fn run(&self) -> Option<String> {
        let chosen = self.chosen.map(|i| &self.hosts[i]).filter(|h| !h.failed);
        chosen
            .or_else(|| self.hosts.iter().find(|h| h.imported))
            .and_then(|h| h.run.clone())
    }

    /// Every host's run that was planned.
    pub fn runs(&self) -> Vec<String> {
        self.hosts.iter().filter_map(|h| h.run.clone()).collect()
    }

    /// The job's progress: trials of every host together.
    pub fn progress(&self) -> Progress {
        let done = self.hosts.iter().filter(|h| h.imported || h.failed).count();
        Progress {
            n: self.hosts.iter().map(|h| h.n).sum(),
            of: self.hosts.iter().map(|h| h.of).sum(),
            round: 0,
            condition: String::new(),
            what: format!("{done} of {} hosts done", self.hosts.len()),
            eta_s: None,
            platform: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(address: &str, name: Option<&str>) -> NewHost {
        NewHost {
            address: address.into(),
            name: name.map(Into::into),
            host_type: None,
            token: "0123456789abcdef".into(),
        }
    }

    #[test]
    fn hosts_are_checked_each_error_naming_its_field() {
        let (hosts, tokens) =
            check_hosts(&[host("127.0.0.1:7001", None), host("[::1]:7002", Some("b"))]).unwrap();
        assert_eq!(hosts[0].name, "127.0.0.1:7001");
        assert_eq!(hosts[1].name, "b");
        assert_eq!(tokens.len(), 2);
        let field = |hosts: &[NewHost]| check_hosts(hosts).unwrap_err().body.field.unwrap();
        assert_eq!(field(&[]), "hosts");
        assert_eq!(field(&[host("nohost", None)]), "hosts[0].address");
        assert_eq!(field(&[host("a:0", None)]), "hosts[0].address");
        assert_eq!(field(&[host("a b:1", None)]), "hosts[0].address");
        assert_eq!(
            field(&[host("a:1", Some("x")), host("b:1", Some("x"))]),
            "hosts[1].name"
        );
        let mut no_token = host("a:1", None);
        no_token.token = " ".into();
        assert_eq!(field(&[no_token]), "hosts[0].token");
        let mut two_lines = host("a:1", None);
        two_lines.host_type = Some("t\n[[host]]".into());
        let e = check_hosts(&[two_lines]).unwrap_err();
        assert_eq!(e.status, 422);
        assert!(
            e.body.error.starts_with("hosts[0].type: "),
            "{}",
            e.body.error
        );
    }

    #[test]
    fn the_hosts_file_is_what_run_hosts_reads_with_private_tokens() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs/j-1.hosts.toml");
        let hosts = vec![
            JobHost {
                name: "a \"quoted\"".into(),
                address: "127.0.0.1:7001".into(),
                host_type: Some("small".into()),
            },
            JobHost {
                name: "b".into(),
                address: "127.0.0.1:7002".into(),
                host_type: None,
            },
        ];
        write_hosts_file(&path, &hosts, &["t0".into(), "t1".into()]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let back: toml::Value = toml::from_str(&text).unwrap();
        let h = back["host"].as_array().unwrap();
        assert_eq!(h[0]["name"].as_str(), Some("a \"quoted\""));
        assert_eq!(h[0]["type"].as_str(), Some("small"));
        assert_eq!(h[1].get("type"), None);
        let token = dir
            .path()
            .join("jobs")
            .join(h[1]["token_file"].as_str().unwrap());
        assert_eq!(std::fs::read_to_string(&token).unwrap(), "t1\n");
        let mode = std::fs::metadata(&token).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn the_coordinators_events_make_the_fleets_progress_and_run() {
        use serde_json::json;
        let hosts = check_hosts(&[host("127.0.0.1:1", Some("a")), host("[::1]:2", None)])
            .unwrap()
            .0;
        let mut p = FleetProgress::new(&hosts);
        let progress = |member: &str, run: &str, n: Option<u64>, of: Option<u64>| {
            json!({"event": "member_progress", "member": member, "run": run, "n": n, "of": of,
                   "status": null, "line": "..."})
        };
        assert!(FleetProgress::is_fleet_event("fleet_started"));
        assert!(!FleetProgress::is_fleet_event("planned"));
        assert!(
            !p.read(&json!({"event": "fleet_started", "scenario": "quick.toml",
                               "noun": "hosts", "members": ["a", "[::1]:2"]}))
        );
        assert!(p.read(&progress("[::1]:2", "R-b", Some(0), Some(8))));
        assert!(p.read(&progress("a", "R-a", Some(0), Some(12))));
        assert!(p.read(&progress("a", "R-a", Some(10), Some(12))));
        assert!(
            !p.read(
                &json!({"event": "member_progress", "member": "a", "run": null,
                            "n": null, "of": null, "status": null, "line": "busy"})
            ),
            "a line without facts"
        );
        assert!(p.read(&progress("a", "R-a", Some(11), Some(12))));
        assert_eq!(p.run().as_deref(), Some("R-b"), "the first planned, kept");
        assert_eq!((p.progress().n, p.progress().of), (11, 20));
        p.read(&json!({"event": "member_not_run", "member": "[::1]:2",
                       "why": "cannot connect to [::1]:2: refused"}));
        p.read(&json!({"event": "member_imported", "member": "a",
                       "done": {"run_id": "R-a", "status": "complete", "exit_code": 0,
                                "chunks": 1, "bytes": 10}}));
        assert_eq!(p.run().as_deref(), Some("R-a"), "its host stored none");
        assert_eq!(p.progress().what, "2 of 2 hosts done");
        assert_eq!(p.progress().n, 20);
    }
}
