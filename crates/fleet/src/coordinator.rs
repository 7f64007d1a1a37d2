//! The coordinator of a fleet run: one scenario on many members (hosts reached through their
//! host agents, Kubernetes nodes reached through a runner pod each). It sends every member
//! the scenario at once, reports their progress as events tagged with the member's name,
//! imports each member's stored run into its own database as it arrives, tagged with the
//! member's name, address and labels, and links them as one fleet run, which the caller shows
//! (per member type, the isolation summary with intervals, and the members that differ
//! significantly from the others of their type).
//!
//! A member measures only its own tenants, so members run in parallel; two runs on one
//! member wait for each other (that member's measurement slot). A member that cannot be
//! reached or fails does not stop the others: it is listed as not run, with why.
//!
//! How a member is reached is a [`Driver`]'s business; everything else is here.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use isobench_agent::{RunScenario, ScenarioDone};
use isobench_experiment::progress::Event;
use isobench_experiment::session::{NewRun, SessionError};
use isobench_experiment::stored::{link_fleet, FleetLink, FleetMember};
use isobench_store::{Fact, LoadedRun, RunStatus, Store};
use serde::{Deserialize, Serialize};

use crate::Ending;

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

/// A fleet run, ready to start.
pub struct Fleet {
    /// Its members, in the order they were given.
    pub members: Vec<Member>,
    /// The label that names a member's type.
    pub type_label: String,
    /// The scenario every member runs.
    pub scenario: RunScenario,
    /// How the members are reached.
    pub driver: Arc<dyn Driver>,
    /// How many members run at once (at least one).
    pub slots: usize,
    /// Whether the members' progress is reported ([`FleetEvent::Progress`]).
    pub progress: bool,
    /// Set to stop: the members stop their runs (what they stored stays there). A flag of
    /// its own when the fleet is made; keep a clone, or put the caller's in its place.
    pub stop: Arc<AtomicBool>,
}

impl Fleet {
    /// The fleet run of `scenario` on `members`, reached through `driver`, `slots` at a
    /// time; its progress reported, with a stop flag of its own.
    pub fn new(
        members: Vec<Member>,
        type_label: String,
        scenario: RunScenario,
        driver: Arc<dyn Driver>,
        slots: usize,
    ) -> Fleet {
        Fleet {
            members,
            type_label,
            scenario,
            driver,
            slots,
            progress: true,
            stop: Arc::default(),
        }
    }
}

/// What happens during a fleet run, in the order it happens. With `--json-stream` these are
/// the lines of the fleet run's event stream (docs/events.md), so their tags and fields are a
/// public interface: [`FleetEvent::NAMES`] lists the tags, none of which a run's own events
/// or a run on several platforms use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum FleetEvent {
    /// The members were sent the scenario.
    #[serde(rename = "fleet_started")]
    Started {
        /// The scenario's file name.
        scenario: String,
        /// What the members are called: "hosts", "nodes".
        noun: String,
        /// The members' names.
        members: Vec<String>,
    },
    /// Something the caller may want to say (how many members run at once, runner pods).
    #[serde(rename = "fleet_note")]
    Note {
        /// What happened.
        text: String,
    },
    /// A member's run progressed (its plan, every tenth trial, a trial that did not end
    /// ok, a note), or the member said something that is not an event of its run.
    #[serde(rename = "member_progress")]
    Progress(MemberProgress),
    /// A member's run could not run, or its run could not be imported.
    #[serde(rename = "member_not_run")]
    NotRun {
        /// The member.
        member: String,
        /// Why.
        why: String,
    },
    /// A member's run ended and was imported.
    #[serde(rename = "member_imported")]
    Imported {
        /// The member.
        member: String,
        /// How its run ended.
        done: ScenarioDone,
    },
    /// The stop flag was seen: the members stop their runs.
    #[serde(rename = "fleet_stopping")]
    Stopping,
    /// Progress lines that were dropped because too many waited.
    #[serde(rename = "fleet_dropped")]
    Dropped {
        /// How many.
        lines: usize,
        /// How many may wait.
        backlog: usize,
    },
}

impl FleetEvent {
    /// Every event's tag, in the order docs/events.md declares them.
    pub const NAMES: &'static [&'static str] = &[
        "fleet_started",
        "fleet_note",
        "member_progress",
        "member_not_run",
        "member_imported",
        "fleet_stopping",
        "fleet_dropped",
    ];

    /// The event's tag, as serialized (one of [`FleetEvent::NAMES`]).
    pub fn name(&self) -> &'static str {
        match self {
            FleetEvent::Started { .. } => "fleet_started",
            FleetEvent::Note { .. } => "fleet_note",
            FleetEvent::Progress(_) => "member_progress",
            FleetEvent::NotRun { .. } => "member_not_run",
            FleetEvent::Imported { .. } => "member_imported",
            FleetEvent::Stopping => "fleet_stopping",
            FleetEvent::Dropped { .. } => "fleet_dropped",
        }
    }
}

/// Where a member's run stands, as a line of its progress told it ([`FleetEvent::Progress`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberProgress {
    /// The member.
    pub member: String,
    /// Its run's id, once planned.
    pub run: Option<String>,
    /// Trials done, when the line tells it (its plan: those already stored; a trial: its
    /// number).
    pub n: Option<usize>,
    /// Trials planned, when the line tells it.
    pub of: Option<usize>,
    /// How a trial that did not end ok ended (`dnr`, `disturbed`, `failed`); `null` on
    /// other lines.
    pub status: Option<String>,
    /// The line, briefly, as the terminal shows it.
    pub line: String,
}

/// How a fleet run ended.
#[derive(Debug, Clone)]
pub struct FleetOutcome {
    /// The members' runs, linked (as stored with every run).
    pub link: FleetLink,
    /// The first member's run, which holds the link.
    pub first: String,
    /// How it ended.
    pub ending: Ending,
}

/// How many members' progress lines may wait for the coordinator's thread.
pub const INGEST_BACKLOG: usize = 1024;

/// The exit code of `isobench run` whose results are partial or flagged (docs/cli.md).
const PARTIAL_EXIT: i32 = 4;

/// What a member's thread tells the coordinator.
enum FromMember {
    /// A line of its run's progress.
    Progress(MemberProgress),
    /// Its run ended: how, and the stored run; or why there is none.
    Done(Result<(ScenarioDone, String), String>),
}

/// The scenario a fleet run sends: the file `scenario`, else the preset (`quick` when none
/// is named), with the seed and platform to use instead of the scenario's.
pub fn scenario_request(
    scenario: Option<&Path>,
    preset: Option<&str>,
    seed: Option<u64>,
    platform: Option<&str>,
) -> Result<RunScenario, SessionError> {
    let (file_name, scenario, preset) = match scenario {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| {
                SessionError::BadInput(format!("cannot read scenario {}: {e}", p.display()))
            })?;
            (p.display().to_string(), text, None)
        }
        None => {
            let name = preset.unwrap_or("quick").to_string();
            let new = NewRun::preset(Some(&name))
                .map_err(|e| SessionError::BadInput(format!("--{e}")))?;
            (format!("{name}.toml"), new.source.text.clone(), Some(name))
        }
    };
    Ok(RunScenario {
        scenario,
        file_name,
        preset,
        seed,
        platform: platform.map(str::to_string),
    })
}

/// Progress lines waiting for the coordinator's thread. Past [`INGEST_BACKLOG`] a member's
/// line is dropped rather than queued: blocking the member instead would stall its agent's
/// stream and, behind it, the run measuring there.
#[derive(Default)]
struct Backlog {
    waiting: AtomicUsize,
    dropped: AtomicUsize,
}

/// Runs `fleet` on every member, `fleet.slots` at a time, importing their runs into `store`
/// and linking them; `events` hears what happens. An error when no member ran.
pub fn coordinate(
    fleet: Fleet,
    store: &mut Store,
    events: &mut dyn FnMut(FleetEvent),
) -> Result<FleetOutcome, SessionError> {
    let noun = fleet.driver.noun();
    let one = noun.trim_end_matches('s');
    let backlog = Arc::new(Backlog::default());
    let hangups = Arc::new(Hangups::default());
    let (tx, rx) = mpsc::channel::<(usize, FromMember)>();
    let threads = spawn_members(&fleet, &backlog, &hangups, tx).map_err(|e| {
        SessionError::Other(anyhow::Error::new(e).context("starting the members' threads"))
    })?;
    events(FleetEvent::Started {
        scenario: fleet.scenario.file_name.clone(),
        noun: noun.to_string(),
        members: fleet.members.iter().map(|m| m.name.clone()).collect(),
    });

    let mut done: Vec<Option<FleetMember>> = vec![None; fleet.members.len()];
    let mut not_run: Vec<String> = Vec::new();
    let mut ending = Ending::Complete;
    let mut stopping = false;
    loop {
        if !stopping && fleet.stop.load(Ordering::SeqCst) {
            stopping = true;
            events(FleetEvent::Stopping);
            hangups.all();
        }
        let (i, msg) = match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(m) => m,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let m = &fleet.members[i];
        let ended = match msg {
            FromMember::Progress(p) => {
                backlog.waiting.fetch_sub(1, Ordering::SeqCst);
                events(FleetEvent::Progress(p));
                continue;
            }
            FromMember::Done(Err(why)) => Err(why),
            FromMember::Done(Ok((ended, json))) => import(store, m, &ended, &json)
                .map(|fm| (ended, fm))
                .map_err(|e| format!("{e:#}")),
        };
        match ended {
            Ok((ended, fm)) => {
                // A member's run that ended incomplete, or with results it flagged (its
                // exit code 4), makes the fleet run partial too.
                if ended.status != RunStatus::Complete.to_string()
                    || ended.exit_code == PARTIAL_EXIT
                {
                    ending = ending.worse(Ending::Partial);
                }
                done[i] = Some(fm);
                events(FleetEvent::Imported {
                    member: m.name.clone(),
                    done: ended,
                });
            }
            Err(why) => {
                events(FleetEvent::NotRun {
                    member: m.name.clone(),
                    why: why.clone(),
                });
                not_run.push(format!("{}: {why}", m.name));
                ending = ending.worse(Ending::Partial);
            }
        }
    }
    for t in threads {
        let _ = t.join();
    }
    let dropped = backlog.dropped.load(Ordering::Relaxed);
    if dropped > 0 {
        events(FleetEvent::Dropped {
            lines: dropped,
            backlog: INGEST_BACKLOG,
        });
    }
    if stopping {
        ending = ending.worse(Ending::Interrupted);
    }
    let done: Vec<FleetMember> = done.into_iter().flatten().collect();
    let Some(first) = done.first().map(|m| m.run.clone()) else {
        return Err(SessionError::Other(anyhow::anyhow!(
            "no {one} ran the scenario: {}",
            not_run.join("; ")
        )));
    };
    let link = FleetLink {
        type_label: fleet.type_label,
        hosts: done,
        not_run,
    };
    link_fleet(store, &link)?;
    Ok(FleetOutcome {
        link,
        first,
        ending,
    })
}

/// Starts `fleet.slots` threads that take the members in turn and drive each, telling `tx`.
fn spawn_members(
    fleet: &Fleet,
    backlog: &Arc<Backlog>,
    hangups: &Arc<Hangups>,
    tx: mpsc::Sender<(usize, FromMember)>,
) -> std::io::Result<Vec<JoinHandle<()>>> {
    let members = Arc::new(fleet.members.clone());
    let next = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    for w in 0..fleet.slots.clamp(1, members.len().max(1)) {
        let (members, req, tx, hangups) = (
            members.clone(),
            fleet.scenario.clone(),
            tx.clone(),
            hangups.clone(),
        );
        let (next, stop, driver) = (next.clone(), fleet.stop.clone(), fleet.driver.clone());
        let (shown, backlog) = (fleet.progress, backlog.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("fleet-{w}"))
            .spawn(move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(m) = members.get(i) else { break };
                let ended = if stop.load(Ordering::SeqCst) {
                    Err("not started: interrupted".to_string())
                } else {
                    // The member's run, once planned: every later line carries it.
                    let mut run = None;
                    let ended = driver.drive(i, m, req.clone(), &hangups, &mut |line| {
                        // Parsed here, in the member's thread: the coordinator's one thread
                        // only reports and imports.
                        if !shown {
                            return;
                        }
                        let Some(l) = member_progress(&m.name, &mut run, line) else {
                            return;
                        };
                        if backlog.waiting.fetch_add(1, Ordering::SeqCst) >= INGEST_BACKLOG {
                            backlog.waiting.fetch_sub(1, Ordering::SeqCst);
                            backlog.dropped.fetch_add(1, Ordering::Relaxed);
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
    Ok(threads)
}

/// Imports a member's run and tags it with the member: its name, address and labels (the
/// kernel its run found added when the labels do not give it).
fn import(
    store: &mut Store,
    m: &Member,
    done: &ScenarioDone,
    json: &str,
) -> anyhow::Result<FleetMember> {
    let loaded: LoadedRun = serde_json::from_str(json)
        .map_err(|e| anyhow::anyhow!("run {} cannot be read: {e}", done.run_id))?;
    let id = store.import_run(&loaded)?;
    let mut labels = m.labels.clone();
    if let Some(k) = loaded.run.host_facts["kernel"].as_str() {
        labels
            .entry("kernel".into())
            .or_insert_with(|| k.to_string());
    }
    store.record_fact(
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
    )?;
    Ok(FleetMember {
        host: m.name.clone(),
        labels,
        run: id.to_string(),
    })
}

/// A member's progress line, as its run's facts and briefly: its run's events (its plan,
/// every tenth trial, the trials that did not end ok, notes, rounds); other lines (its
/// errors) as they are. `run` is the member's run once planned.
fn member_progress(member: &str, run: &mut Option<String>, line: &str) -> Option<MemberProgress> {
    let told = |n: Option<usize>, of: Option<usize>, status: Option<String>, line: String| {
        Some((n, of, status, line))
    };
    let (n, of, status, line) = match serde_json::from_str::<Event>(line) {
        Err(_) if line.trim().is_empty() => None,
        Err(_) => told(None, None, None, line.to_string()),
        Ok(Event::Planned {
            run: id,
            platform,
            trials,
            done,
            ..
        }) => {
            let line = format!("run {id}: at least {trials} trials on {platform}");
            *run = Some(id);
            told(Some(done), Some(trials), None, line)
        }
        Ok(Event::TrialEnded(t)) if t.status != "ok" => {
            let line = format!(
                "trial {}/{} {} under {}: {}{}",
                t.view.n,
                t.view.of,
                t.view.what,
                t.view.condition,
                t.status,
                t.reason.map(|r| format!(" ({r})")).unwrap_or_default()
            );
            told(Some(t.view.n), Some(t.view.of), Some(t.status), line)
        }
        Ok(Event::TrialEnded(t)) if t.view.n % 10 == 0 => {
            let line = format!("trial {}/{}", t.view.n, t.view.of);
            told(Some(t.view.n), Some(t.view.of), None, line)
        }
        Ok(Event::Waiting { why, .. }) => told(None, None, None, format!("waiting: {why}")),
        Ok(Event::Note { text }) => told(None, None, None, text),
        Ok(Event::RoundEnded { round, open }) => told(
            None,
            None,
            None,
            format!(
                "round {} ended; {open} results still wider than the target",
                round + 1
            ),
        ),
        Ok(Event::Finished { status, reason, .. }) => {
            told(None, None, None, format!("{status}: {reason}"))
        }
        Ok(_) => None,
    }?;
    Some(MemberProgress {
        member: member.to_string(),
        run: run.clone(),
        n,
        of,
        status,
        line,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Members that cannot be reached.
    struct Unreachable;

    impl Driver for Unreachable {
        fn noun(&self) -> &'static str {
            "hosts"
        }

        fn drive(
            &self,
            _: usize,
            m: &Member,
            _: RunScenario,
            _: &Hangups,
            _: &mut dyn FnMut(&str),
        ) -> Result<(ScenarioDone, String), String> {
            Err(format!("cannot connect to {}", m.address))
        }
    }

    fn fleet(names: &[&str]) -> Fleet {
        let members = names
            .iter()
            .map(|n| Member {
                name: n.to_string(),
                address: format!("{n}:7878"),
                labels: BTreeMap::new(),
            })
            .collect();
        let scenario = scenario_request(None, None, Some(1), None).unwrap();
        Fleet::new(members, "type".into(), scenario, Arc::new(Unreachable), 2)
    }

    #[test]
    fn members_that_cannot_be_reached_are_events_and_no_run_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path().join("f.db")).unwrap();
        let mut seen = Vec::new();
        let err = coordinate(fleet(&["a", "b"]), &mut store, &mut |e| seen.push(e)).unwrap_err();
        assert!(
            err.to_string().starts_with("no host ran the scenario: "),
            "{err}"
        );
        assert!(matches!(&seen[0], FleetEvent::Started { members, .. } if members.len() == 2));
        let not_run = seen
            .iter()
            .filter(|e| matches!(e, FleetEvent::NotRun { .. }))
            .count();
        assert_eq!(not_run, 2);
    }

    #[test]
    fn a_fleet_stopped_before_it_starts_starts_no_member() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path().join("f.db")).unwrap();
        let f = fleet(&["a"]);
        f.stop.store(true, Ordering::SeqCst);
        let mut seen = Vec::new();
        let err = coordinate(f, &mut store, &mut |e| seen.push(e)).unwrap_err();
        assert!(
            err.to_string().contains("not started: interrupted"),
            "{err}"
        );
        assert!(seen.contains(&FleetEvent::Stopping));
    }

    #[test]
    fn a_members_progress_carries_its_run_and_trials_and_a_trial_that_did_not_end_ok() {
        let mut run = None;
        let mut read = |line: &str| member_progress("a", &mut run, line);
        let planned = r#"{"event":"planned","schema":1,"run":"R-1","scenario":"s","platform":"fake","kind":"matrix","summary":"","probes":1,"conditions":1,"trials":20,"done":0}"#;
        let p = read(planned).unwrap();
        assert_eq!(
            (p.run.as_deref(), p.n, p.of, p.status),
            (Some("R-1"), Some(0), Some(20), None)
        );
        assert_eq!(p.line, "run R-1: at least 20 trials on fake");
        let trial = |n: usize, status: &str| {
            format!(
                r#"{{"event":"trial_ended","n":{n},"of":20,"round":0,"condition":"cpu@100","what":"cpu-int","eta_s":null,"status":"{status}","reason":null}}"#
            )
        };
        assert_eq!(read(&trial(3, "ok")), None, "not every trial is told");
        let p = read(&trial(10, "ok")).unwrap();
        assert_eq!(
            (p.run.as_deref(), p.n, p.of),
            (Some("R-1"), Some(10), Some(20))
        );
        let p = read(&trial(11, "failed")).unwrap();
        assert_eq!((p.n, p.status.as_deref()), (Some(11), Some("failed")));
        let p = read("cannot start: busy").unwrap();
        assert_eq!(
            (p.run.as_deref(), p.n, p.line.as_str()),
            (Some("R-1"), None, "cannot start: busy")
        );
        assert_eq!(read("  "), None);
    }

    #[test]
    fn fleet_events_are_named_as_serialized() {
        let ev = FleetEvent::Dropped {
            lines: 1,
            backlog: 2,
        };
        let json = serde_json::to_value(&ev).unwrap();
        assert_eq!(json["event"], ev.name());
        assert!(FleetEvent::NAMES.contains(&ev.name()));
    }
}
