//! The coordinator of a fleet run: one scenario on many members (hosts reached through their
//! host agents, `--hosts`; Kubernetes nodes reached through a runner pod each, `--nodes`).
//! It sends every member the scenario at once, shows their progress prefixed with the
//! member's name, imports each member's stored run into its own database as it arrives,
//! tagged with the member's name, address and labels, links them as one fleet run, and
//! prints the fleet table: per member type, the isolation summary with intervals, and the
//! members that differ significantly from the others of their type.
//!
//! A member measures only its own tenants, so members run in parallel; two runs on one
//! member wait for each other (that member's measurement slot). A member that cannot be
//! reached or fails does not stop the others: it is listed as not run, with why.
//!
//! How a member is reached is a [`Driver`]'s business; everything else is here.

use std::collections::{BTreeMap, HashMap};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use isobench_agent::{RunScenario, ScenarioDone};
use isobench_experiment::progress::Event;
use isobench_experiment::stored::{link_fleet, with_linked, FleetLink, FleetMember};
use isobench_store::{Fact, LoadedRun, RunStatus};

use crate::cmd_run::{open_store, store_error, RunArgs};
use crate::crossrun::{show_set, worse};
use crate::exit::{self, bad_input};

/// One member of a fleet: a host or a node.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    /// Its name.
    pub name: String,
    /// Where it is reached (an agent's address, a node's internal IP), as recorded.
    pub address: String,
    /// Its labels, the type label included when known.
    pub labels: BTreeMap<String, String>,
}

/// What ends a member's session at once when the coordinator is interrupted (shutting its
/// socket down, killing its stream's process), by member index, while the session lasts.
#[derive(Default)]
pub struct Hangups(Mutex<HashMap<usize, Box<dyn FnOnce() + Send>>>);

impl Hangups {
    /// Registers how to end member `i`'s session.
    pub fn set(&self, i: usize, f: Box<dyn FnOnce() + Send>) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(i, f);
    }

    /// Member `i`'s session ended on its own.
    pub fn clear(&self, i: usize) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(&i);
    }

    fn all(&self) {
        let fs: Vec<_> = self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, f)| f)
            .collect();
        for f in fs {
            f();
        }
    }
}

/// How a fleet's members are reached.
pub trait Driver: Send + Sync {
    /// What the members are called in messages: "hosts", "nodes".
    fn noun(&self) -> &'static str;

    /// Runs `req` on member `i` and gives back how its run ended and the stored run (JSON),
    /// or why there is none. Registers a hangup for the session in `hangups` while it lasts.
    fn drive(
        &self,
        i: usize,
        m: &Member,
        req: RunScenario,
        hangups: &Hangups,
        progress: &mut dyn FnMut(&str),
    ) -> Result<(ScenarioDone, String), String>;
}

/// How many members' progress lines may wait for the coordinator's thread.
const INGEST_BACKLOG: usize = 1024;

/// What a member's thread tells the coordinator.
enum FromMember {
    /// A line of its run's progress, as shown.
    Progress(String),
    /// Its run ended: how, and the stored run; or why there is none.
    Done(Result<(ScenarioDone, String), String>),
}

/// The scenario `a` asks for, as a host agent takes it.
pub fn scenario_request(a: &RunArgs) -> anyhow::Result<RunScenario> {
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

/// Refuses what a fleet run cannot do: exports of one run, several platforms.
pub fn check_args(a: &RunArgs, flag: &str) -> anyhow::Result<()> {
    let e = &a.export;
    if e.export_json.is_some() || e.export_csv.is_some() || e.export_markdown.is_some() {
        return Err(bad_input(format!(
            "--export-json/--export-csv/--export-markdown take one run; with {flag} each \
             member's run is stored, and `isobench export RUN_ID` writes any of them (with the \
             fleet table); --report writes the fleet's report"
        )));
    }
    if a.platform.len() > 1 {
        return Err(bad_input(format!(
            "{flag} runs one platform on every member; give --platform once"
        )));
    }
    if a.max_time.is_some() {
        return Err(bad_input(format!(
            "--max-time is not sent to the members of {flag}; set the budget in the scenario \
             file instead (max_time under [repetitions], docs/scenario.md)"
        )));
    }
    if a.io_cost.is_some() {
        return Err(bad_input(format!(
            "--io-cost is not sent to the members of {flag}; set ISOBENCH_IO_COST in each \
             member's host agent environment instead"
        )));
    }
    Ok(())
}

/// Runs `req` on every member through `driver`, `slots` at a time, and shows the fleet.
pub fn coordinate(
    a: &RunArgs,
    members: Vec<Member>,
    type_label: String,
    req: RunScenario,
    driver: Arc<dyn Driver>,
    slots: usize,
) -> anyhow::Result<ExitCode> {
    let noun = driver.noun();
    let one = noun.trim_end_matches('s');
    let mut store = open_store(&a.db.path)?;
    let stop = Arc::new(AtomicBool::new(false));
    crate::tenant::install_stop(stop.clone())?;

    // Progress lines waiting for the coordinator's thread. Past INGEST_BACKLOG a member's
    // line is dropped rather than queued: blocking the member instead would stall its
    // agent's stream and, behind it, the run measuring there.
    let backlog = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel::<(usize, FromMember)>();
    let hangups = Arc::new(Hangups::default());
    let shared = Arc::new(members.clone());
    let next = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    for w in 0..slots.clamp(1, members.len().max(1)) {
        let (members, req, tx, hangups) =
            (shared.clone(), req.clone(), tx.clone(), hangups.clone());
        let (next, stop, driver) = (next.clone(), stop.clone(), driver.clone());
        let quiet = a.quiet;
        let (backlog, dropped) = (backlog.clone(), dropped.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("fleet-{w}"))
            .spawn(move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(m) = members.get(i) else { break };
                let ended = if stop.load(Ordering::SeqCst) {
                    Err("not started: interrupted".to_string())
                } else {
                    let ended = driver.drive(i, m, req.clone(), &hangups, &mut |line| {
                        // Parsed here, in the member's thread: the coordinator's one thread
                        // only prints and imports.
                        if quiet {
                            return;
                        }
                        let Some(l) = progress_line(line) else { return };
                        if backlog.fetch_add(1, Ordering::SeqCst) >= INGEST_BACKLOG {
                            backlog.fetch_sub(1, Ordering::SeqCst);
                            dropped.fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                        let _ = tx.send((i, FromMember::Progress(l)));
                    });
                    hangups.clear(i);
                    ended
                };
                let _ = tx.send((i, FromMember::Done(ended)));
            })?;
        threads.push(spawned);
    }
    drop(tx);
    eprintln!(
        "isobench: running {} on {} {noun}: {}",
        req.file_name,
        members.len(),
        members
            .iter()
            .map(|m| m.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );

    let mut done: Vec<Option<FleetMember>> = vec![None; members.len()];
    let mut not_run: Vec<String> = Vec::new();
    let mut worst = exit::OK;
    let mut leaving = false;
    loop {
        if !leaving && stop.load(Ordering::SeqCst) {
            leaving = true;
            eprintln!(
                "isobench: interrupted; the {noun} stop their runs (what they stored stays there)"
            );
            hangups.all();
        }
        let (i, msg) = match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(m) => m,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let m = &members[i];
        match msg {
            FromMember::Progress(line) => {
                backlog.fetch_sub(1, Ordering::SeqCst);
                eprintln!("[{}] {line}", m.name);
            }
            FromMember::Done(Err(why)) => {
                eprintln!("isobench: {one} {}: {why}", m.name);
                not_run.push(format!("{}: {why}", m.name));
                worst = worse(worst, exit::PARTIAL);
            }
            FromMember::Done(Ok((ended, json))) => match import(&mut store, m, &ended, &json) {
                Ok(fm) => {
                    eprintln!(
                        "isobench: {one} {}: run {} {} (exit code {}), imported",
                        m.name, ended.run_id, ended.status, ended.exit_code
                    );
                    // A member's run that ended incomplete, or with results it flagged (its
                    // exit code 4), makes the fleet run partial too.
                    if ended.status != RunStatus::Complete.to_string()
                        || ended.exit_code == i32::from(exit::PARTIAL)
                    {
                        worst = worse(worst, exit::PARTIAL);
                    }
                    done[i] = Some(fm);
                }
                Err(e) => {
                    eprintln!("isobench: {one} {}: {e:#}", m.name);
                    not_run.push(format!("{}: {e:#}", m.name));
                    worst = worse(worst, exit::PARTIAL);
                }
            },
        }
    }
    for t in threads {
        let _ = t.join();
    }
    let dropped = dropped.load(Ordering::Relaxed);
    if dropped > 0 {
        eprintln!(
            "isobench: {dropped} progress lines of the {noun} were not shown: more than \
             {INGEST_BACKLOG} waited while runs were imported"
        );
    }
    let done: Vec<FleetMember> = done.into_iter().flatten().collect();
    if leaving {
        worst = worse(worst, exit::interrupted());
    }
    let Some(first) = done.first().map(|m| m.run.clone()) else {
        return Err(anyhow::anyhow!(
            "no {one} ran the scenario: {}",
            not_run.join("; ")
        ));
    };
    let link = FleetLink {
        type_label,
        hosts: done,
        not_run,
    };
    link_fleet(&mut store, &link).map_err(store_error)?;
    let results = with_linked(&store, &first).map_err(store_error)?;
    let worst = show_set(a, &results, &first, worst, || print_members(&link, noun));
    Ok(ExitCode::from(worst))
}

/// Imports a member's run and tags it with the member: its name, address and labels (the
/// kernel its run found added when the labels do not give it).
fn import(
    store: &mut isobench_store::Store,
    m: &Member,
    done: &ScenarioDone,
    json: &str,
) -> anyhow::Result<FleetMember> {
    let loaded: LoadedRun = serde_json::from_str(json)
        .map_err(|e| anyhow::anyhow!("run {} cannot be read: {e}", done.run_id))?;
    let id = store.import_run(&loaded).map_err(store_error)?;
    let mut labels = m.labels.clone();
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
                    "name": m.name,
                    "address": m.address,
                    "labels": labels,
                }),
            },
        )
        .map_err(store_error)?;
    Ok(FleetMember {
        host: m.name.clone(),
        labels,
        run: id.to_string(),
    })
}

/// A member's progress line as shown here: its run's events, briefly (every tenth trial,
/// the trials that did not end ok, notes, rounds); other lines (its errors) as they are.
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

/// The members of the fleet run, each with its labels and run.
fn print_members(link: &FleetLink, noun: &str) {
    let mut title = noun.to_string();
    title[..1].make_ascii_uppercase();
    println!("\n{title}");
    for m in &link.hosts {
        let labels: Vec<String> = m.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("  {}  run {}  {}", m.host, m.run, labels.join(" "));
    }
    for n in &link.not_run {
        println!("  not run: {n}");
    }
}
