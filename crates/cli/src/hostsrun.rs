//! `isobench run --hosts hosts.toml`: one scenario on many hosts without Kubernetes, fio's
//! `--client` model. Each host runs a host agent (`isobench agent --listen ADDR --token-file
//! FILE`); the coordinator sends every host the scenario at once, shows their progress, imports
//! each host's stored run into its own database as it arrives, links them as one fleet run,
//! and prints the fleet table: per host type, the isolation summary with intervals, and the
//! hosts that differ significantly from the others of their type.
//!
//! A host measures only its own tenants, so hosts run in parallel; two runs on one host wait
//! for each other (the host's measurement slot). A host that cannot be reached or fails does
//! not stop the others: it is listed as not run, with why.
//!
//! Every host's session holds four descriptors and two threads here, so a fleet larger than
//! the open-file limit allows is driven through a pool of as many sessions as fit: the other
//! hosts wait for a free slot (bench/fleet-sim measured the coordinator at 100, 1,000 and
//! 10,000 hosts; without the pool, hosts past the limit failed with "Too many open files").

use std::collections::{BTreeMap, HashMap};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use isobench_agent::{AgentClient, ProtocolVersion, RunScenario, ScenarioDone};
use isobench_experiment::progress::Event;
use isobench_experiment::stored::{link_fleet, with_linked, FleetLink, FleetMember};
use isobench_results::fleet::TYPE_LABEL;
use isobench_store::{Fact, LoadedRun, RunStatus};
use serde::Deserialize;

use crate::cmd_run::{open_store, store_error, RunArgs};
use crate::crossrun::{show_set, worse};
use crate::exit::{self, bad_input};

/// The first protocol version with `run_scenario`.
const SCENARIOS_SINCE: ProtocolVersion = ProtocolVersion { major: 1, minor: 1 };

/// How long a host may take to accept the connection and answer `hello`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Descriptors one host's session holds: its socket, the agent client's reading and writing
/// duplicates, and the duplicate kept to shut it down on Ctrl-C.
const FDS_PER_HOST: u64 = 4;

/// Descriptors kept for everything else: the database and its journal, the terminal, the
/// scenario and hosts files.
const FDS_SPARE: u64 = 64;

/// How many hosts' sessions run at once under an open-file limit of `nofile`: every host
/// when the limit allows, else as many as fit (at least one).
fn host_slots(hosts: usize, nofile: u64) -> usize {
    let fit = (nofile.saturating_sub(FDS_SPARE) / FDS_PER_HOST).max(1);
    hosts.min(usize::try_from(fit).unwrap_or(usize::MAX)).max(1)
}

/// The open-file limit, raised to its hard limit first (the soft one is often 1,024).
fn raise_open_files() -> u64 {
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
pub fn load_hosts(file: &Path) -> anyhow::Result<(Vec<Host>, String)> {
    let shown = file.display();
    let text =
        std::fs::read_to_string(file).map_err(|e| bad_input(format!("--hosts {shown}: {e}")))?;
    let parsed: HostsFile = toml::from_str(&text)
        .map_err(|e| bad_input(format!("--hosts {shown}: {}", e.to_string().trim_end())))?;
    let type_label = parsed.type_label.unwrap_or_else(|| TYPE_LABEL.to_string());
    if parsed.hosts.is_empty() {
        return Err(bad_input(format!(
            "--hosts {shown}: no host; add one [[host]] table per host, with name, address \
             (ADDR:PORT of `isobench agent --listen`) and token_file"
        )));
    }
    let base = file.parent().unwrap_or(Path::new("."));
    let mut hosts: Vec<Host> = Vec::new();
    for (i, h) in parsed.hosts.into_iter().enumerate() {
        let at = format!("--hosts {shown}: host[{i}]");
        let name = h.name.trim().to_string();
        if name.is_empty() {
            return Err(bad_input(format!(
                "{at}.name is empty; give each host a name"
            )));
        }
        if hosts.iter().any(|o| o.name == name) {
            return Err(bad_input(format!(
                "{at}.name `{name}` is given twice; host names must be unique"
            )));
        }
        if h.address
            .to_socket_addrs()
            .map(|mut a| a.next())
            .ok()
            .flatten()
            .is_none()
        {
            return Err(bad_input(format!(
                "{at}.address `{}` is not ADDR:PORT (e.g. 10.0.0.7:7878, the address given to \
                 `isobench agent --listen` on that host)",
                h.address
            )));
        }
        let Some(token_file) = h.token_file.or_else(|| parsed.token_file.clone()) else {
            return Err(bad_input(format!(
                "{at} has no token_file, and the file gives none for every host; add \
                 token_file = \"PATH\" (the file given to that host's `isobench agent \
                 --token-file`)"
            )));
        };
        let token_file = base.join(token_file);
        let token = crate::cmd_agent::read_token(&token_file)
            .map_err(|e| bad_input(format!("{at}.token_file: {e}")))?;
        let mut labels = h.labels;
        if let Some(t) = h.host_type {
            labels.insert(type_label.clone(), t);
        }
        hosts.push(Host {
            name,
            address: h.address,
            token,
            labels,
        });
    }
    Ok((hosts, type_label))
}

/// What a host's thread tells the coordinator.
enum FromHost {
    /// A line of its run's progress.
    Progress(String),
    /// Its run ended: how, and the stored run; or why there is none.
    Done(Result<(ScenarioDone, String), String>),
}

/// The scenario `a` asks for, as a host agent takes it.
fn scenario_request(a: &RunArgs) -> anyhow::Result<RunScenario> {
    let (file_name, scenario, preset) = match &a.scenario {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| bad_input(format!("cannot read scenario {}: {e}", p.display())))?;
            (p.display().to_string(), text, None)
        }
        None => {
            let name = a.preset.clone().unwrap_or_else(|| "quick".into());
            let new = isobench_experiment::session::NewRun::preset(Some(&name))
                .map_err(|e| bad_input(format!("--{e}")))?;
            (format!("{name}.toml"), new.source.text.clone(), Some(name))
        }
    };
    Ok(RunScenario {
        scenario,
        file_name,
        preset,
        seed: a.seed,
        platform: a.platform.first().map(|p| p.as_str().to_string()),
    })
}

/// `isobench run --hosts FILE`.
pub fn run(a: &RunArgs, file: &Path) -> anyhow::Result<ExitCode> {
    let e = &a.export;
    if e.export_json.is_some() || e.export_csv.is_some() || e.export_markdown.is_some() {
        return Err(bad_input(
            "--export-json/--export-csv/--export-markdown take one run; with --hosts each \
             host's run is stored, and `isobench export RUN_ID` writes any of them (with the \
             fleet table); --report writes the fleet's report",
        ));
    }
    if a.platform.len() > 1 {
        return Err(bad_input(
            "--hosts runs one platform on every host; give --platform once",
        ));
    }
    let (hosts, type_label) = load_hosts(file)?;
    let req = scenario_request(a)?;
    let mut store = open_store(&a.db.path)?;
    let stop = Arc::new(AtomicBool::new(false));
    crate::tenant::install_stop(stop.clone())?;

    let (tx, rx) = mpsc::channel::<(usize, FromHost)>();
    let streams: Arc<Mutex<HashMap<usize, TcpStream>>> = Arc::new(Mutex::new(HashMap::new()));
    let nofile = raise_open_files();
    let slots = host_slots(hosts.len(), nofile);
    let shared = Arc::new(hosts.clone());
    let next = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    for w in 0..slots {
        let (hosts, req, tx, streams) = (shared.clone(), req.clone(), tx.clone(), streams.clone());
        let (next, stop) = (next.clone(), stop.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("hosts-{w}"))
            .spawn(move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(h) = hosts.get(i) else { break };
                let ended = if stop.load(Ordering::SeqCst) {
                    Err("not started: interrupted".to_string())
                } else {
                    drive(i, h, req.clone(), &streams, &mut |line| {
                        let _ = tx.send((i, FromHost::Progress(line.to_string())));
                    })
                };
                let _ = tx.send((i, FromHost::Done(ended)));
            })?;
        threads.push(spawned);
    }
    drop(tx);
    if slots < hosts.len() {
        eprintln!(
            "isobench: {slots} hosts at a time (the open-file limit is {nofile}, and each host \
             takes {FDS_PER_HOST}); the others wait for a free slot"
        );
    }
    eprintln!(
        "isobench: running {} on {} hosts: {}",
        req.file_name,
        hosts.len(),
        hosts
            .iter()
            .map(|h| h.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );

    let mut members: Vec<Option<FleetMember>> = vec![None; hosts.len()];
    let mut not_run: Vec<String> = Vec::new();
    let mut worst = exit::OK;
    let mut leaving = false;
    loop {
        if !leaving && stop.load(Ordering::SeqCst) {
            leaving = true;
            eprintln!(
                "isobench: interrupted; the hosts stop their runs (what they stored stays there)"
            );
            for s in streams.lock().unwrap_or_else(|p| p.into_inner()).values() {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        let (i, msg) = match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(m) => m,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let h = &hosts[i];
        match msg {
            FromHost::Progress(line) => {
                if !a.quiet {
                    if let Some(l) = progress_line(&line) {
                        eprintln!("[{}] {l}", h.name);
                    }
                }
            }
            FromHost::Done(Err(why)) => {
                eprintln!("isobench: host {}: {why}", h.name);
                not_run.push(format!("{}: {why}", h.name));
                worst = worse(worst, exit::PARTIAL);
            }
            FromHost::Done(Ok((done, json))) => match import(&mut store, h, &done, &json) {
                Ok(m) => {
                    eprintln!(
                        "isobench: host {}: run {} {} (exit code {}), imported",
                        h.name, done.run_id, done.status, done.exit_code
                    );
                    // A host's run that ended incomplete, or with results it flagged (its
                    // exit code 4), makes the fleet run partial too.
                    if done.status != RunStatus::Complete.to_string()
                        || done.exit_code == i32::from(exit::PARTIAL)
                    {
                        worst = worse(worst, exit::PARTIAL);
                    }
                    members[i] = Some(m);
                }
                Err(e) => {
                    eprintln!("isobench: host {}: {e:#}", h.name);
                    not_run.push(format!("{}: {e:#}", h.name));
                    worst = worse(worst, exit::PARTIAL);
                }
            },
        }
    }
    for t in threads {
        let _ = t.join();
    }
    let members: Vec<FleetMember> = members.into_iter().flatten().collect();
    if leaving {
        worst = worse(worst, exit::interrupted());
    }
    let Some(first) = members.first().map(|m| m.run.clone()) else {
        return Err(anyhow::anyhow!(
            "no host ran the scenario: {}",
            not_run.join("; ")
        ));
    };
    let link = FleetLink {
        type_label,
        hosts: members,
        not_run,
    };
    link_fleet(&mut store, &link).map_err(store_error)?;
    let results = with_linked(&store, &first).map_err(store_error)?;
    let worst = show_set(a, &results, &first, worst, || print_hosts(&link));
    Ok(ExitCode::from(worst))
}

/// One host's run, start to end: connect, `hello`, `run_scenario`. The host's stream is in
/// `streams` (under its index `i`) while the session lasts, so Ctrl-C can shut it down.
fn drive(
    i: usize,
    h: &Host,
    req: RunScenario,
    streams: &Mutex<HashMap<usize, TcpStream>>,
    progress: &mut dyn FnMut(&str),
) -> Result<(ScenarioDone, String), String> {
    let ended = session(i, h, req, streams, progress);
    streams.lock().unwrap_or_else(|p| p.into_inner()).remove(&i);
    ended
}

fn session(
    i: usize,
    h: &Host,
    req: RunScenario,
    streams: &Mutex<HashMap<usize, TcpStream>>,
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
        streams
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(i, s);
    }
    let client = AgentClient::from_tcp_stream(h.name.clone(), stream)
        .map_err(|e| e.to_string())?
        .with_timeout(CONNECT_TIMEOUT)
        .with_token(h.token.clone());
    client.hello().map_err(|e| e.to_string())?;
    match client.negotiated_version() {
        Some(v) if v >= SCENARIOS_SINCE => {}
        v => {
            return Err(format!(
                "its agent speaks protocol {}, and running a scenario needs {SCENARIOS_SINCE}; \
                 install this isobench version there",
                v.map_or_else(|| "?".into(), |v| v.to_string())
            ))
        }
    }
    client
        .run_scenario(req, progress)
        .map_err(|e| e.to_string())
}

/// Imports a host's run and tags it with the host: its name, address and labels (the host's
/// kernel added when the labels do not give it).
fn import(
    store: &mut isobench_store::Store,
    h: &Host,
    done: &ScenarioDone,
    json: &str,
) -> anyhow::Result<FleetMember> {
    let loaded: LoadedRun = serde_json::from_str(json)
        .map_err(|e| anyhow::anyhow!("run {} cannot be read: {e}", done.run_id))?;
    let id = store.import_run(&loaded).map_err(store_error)?;
    let mut labels = h.labels.clone();
    if let Some(k) = loaded.run.host_facts["kernel"].as_str() {
        labels
            .entry("kernel".into())
            .or_insert_with(|| k.to_string());
    }
    store
        .record_fact(
            &id,
            &Fact {
                scope: "fleet".into(),
                key: "host".into(),
                value: serde_json::json!({
                    "name": h.name,
                    "address": h.address,
                    "labels": labels,
                }),
            },
        )
        .map_err(store_error)?;
    Ok(FleetMember {
        host: h.name.clone(),
        labels,
        run: id.to_string(),
    })
}

/// A host's progress line as shown here: its run's events, briefly (every tenth trial, the
/// trials that did not end ok, notes, rounds); other lines (its errors) as they are.
fn progress_line(line: &str) -> Option<String> {
    let Ok(ev) = serde_json::from_str::<Event>(line) else {
        return (!line.trim().is_empty()).then(|| line.to_string());
    };
    match ev {
        Event::Planned {
            run,
            platform,
            trials,
            ..
        } => Some(format!("run {run}: at least {trials} trials on {platform}")),
        Event::TrialEnded(t) if t.status != "ok" => Some(format!(
            "trial {}/{} {} under {}: {}{}",
            t.view.n,
            t.view.of,
            t.view.what,
            t.view.condition,
            t.status,
            t.reason.map(|r| format!(" ({r})")).unwrap_or_default()
        )),
        Event::TrialEnded(t) if t.view.n % 10 == 0 => {
            Some(format!("trial {}/{}", t.view.n, t.view.of))
        }
        Event::Waiting { why, .. } => Some(format!("waiting: {why}")),
        Event::Note { text } => Some(text),
        Event::RoundEnded { round, open } => Some(format!(
            "round {} ended; {open} results still wider than the target",
            round + 1
        )),
        Event::Finished { status, reason, .. } => Some(format!("{status}: {reason}")),
        _ => None,
    }
}

/// The hosts of the fleet run, each with its labels and run.
fn print_hosts(link: &FleetLink) {
    println!("\nHosts");
    for m in &link.hosts {
        let labels: Vec<String> = m.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("  {}  run {}  {}", m.host, m.run, labels.join(" "));
    }
    for n in &link.not_run {
        println!("  not run: {n}");
    }
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
