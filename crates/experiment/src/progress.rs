//! A run's progress as a stream of serializable [`Event`]s. The orchestrator emits them in
//! order; every consumer (the terminal progress bar, `isobench run --json-stream`, the web
//! server) reads the same events, and none of them can change what is measured: measurement
//! never waits on a display.
//!
//! Order: `planned`, `tenants_ready`, `memory_checked` (per tenant), then per block
//! `block_started` and per trial `trial_started` / `trial_ended`, `round_ended` per round,
//! `note`s anywhere, and `finished` last.
//!
//! The stream is a public interface (the server, the host agent and the fleet coordinator read
//! it from child processes, maybe of another version); `docs/events.md` declares it, and
//! [`EVENTS_SCHEMA`] in `planned` says which declaration a stream follows.

use std::io::Write;
use std::time::Duration;

use isobench_store::{RunId, RunStatus};
use serde::{Deserialize, Serialize};

use crate::backend::{MemCheck, TenantFacts};
use crate::plan::Plan;

/// The version of the event stream's declaration (`docs/events.md`), carried by `planned`.
/// Adding an event or a field keeps it; renaming or removing one, or changing a field's type
/// or meaning, raises it. Streams from before the field was written are version 1.
pub const EVENTS_SCHEMA: u32 = 1;

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// Run id.
    pub run: RunId,
    /// Final status.
    pub status: RunStatus,
    /// Why (stopping rule met, cap reached, interrupted, error).
    pub reason: String,
    /// Trials run by this invocation (all attempts).
    pub trials_run: usize,
    /// Trials found already stored (resume).
    pub trials_skipped: usize,
}

/// One trial as a display sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialView {
    /// 1-based number of this trial in the run (resumed trials included).
    pub n: usize,
    /// Trials planned so far (grows when the stopping rule asks for more rounds).
    pub of: usize,
    /// Round, from 0.
    pub round: u32,
    /// `baseline` or `stressor@intensity`.
    pub condition: String,
    /// Probe id, or `aggressor alone`.
    pub what: String,
    /// Estimated seconds left, once a few trials have run.
    pub eta_s: Option<f64>,
}

/// How a finished trial went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialDone {
    /// The trial.
    #[serde(flatten)]
    pub view: TrialView,
    /// `ok`, `dnr`, `disturbed` or `failed`.
    pub status: String,
    /// The reason, unless ok.
    pub reason: Option<String>,
}

/// A tenant that is ready, as the events show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TenantReady {
    /// Tenant name.
    pub name: String,
    /// The limits in force, canonical text (empty: none).
    pub limits: String,
    /// The platform's notes on it.
    pub notes: Vec<String>,
}

/// One step of a run. Serialized as one JSON object tagged by `event`
/// (`{"event":"trial_started","n":3,...}`); consumers ignore fields and events they do not
/// know, so the stream can grow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The plan is fixed and stored; `done` trials were already stored (resume).
    Planned {
        /// The stream's [`EVENTS_SCHEMA`] (absent, from writers before it: 1).
        #[serde(default = "schema_one")]
        schema: u32,
        /// The run's id.
        run: String,
        /// Scenario name.
        scenario: String,
        /// Platform the tenants live on.
        platform: String,
        /// Experiment kind.
        kind: String,
        /// The plan as text (what `--dry-run` prints).
        summary: String,
        /// Probes planned.
        probes: usize,
        /// Conditions planned.
        conditions: usize,
        /// Trials planned at least.
        trials: usize,
        /// Trials already stored.
        done: usize,
    },
    /// Tenants are created and their agents answer.
    TenantsReady {
        /// Each tenant.
        tenants: Vec<TenantReady>,
    },
    /// A tenant's memory-availability check finished.
    MemoryChecked {
        /// Tenant name.
        tenant: String,
        /// Bytes the check tried to touch.
        wanted: u64,
        /// Bytes it touched at full speed.
        touched: u64,
        /// Whether the memory the plan needs is there.
        ok: bool,
        /// What it found, as a sentence.
        text: String,
    },
    /// The run waits (memory not available yet, a tenant restarting).
    Waiting {
        /// Why.
        why: String,
        /// For how long, seconds.
        seconds: f64,
    },
    /// A block starts: its condition is being set up (stressors started, warm-up).
    BlockStarted {
        /// The condition.
        condition: String,
    },
    /// A trial starts.
    TrialStarted(TrialView),
    /// A trial ended and is committed.
    TrialEnded(TrialDone),
    /// A round ended; `open` results still need data.
    RoundEnded {
        /// Round, from 0.
        round: u32,
        /// Results still wider than the target.
        open: usize,
    },
    /// Something worth a line (a tenant restarted, a stressor died, a platform caveat).
    Note {
        /// The line.
        text: String,
    },
    /// The run ended; always the last event.
    Finished {
        /// The run's id.
        run: String,
        /// `complete`, `interrupted` or `failed`.
        status: String,
        /// Why it ended so.
        reason: String,
        /// Trials run by this invocation.
        trials_run: usize,
        /// Trials found already stored (resume).
        trials_skipped: usize,
    },
}

impl Event {
    /// `planned` for `plan`.
    pub fn planned(plan: &Plan, run: &str, done: usize) -> Event {
        Event::Planned {
            schema: EVENTS_SCHEMA,
            run: run.to_string(),
            scenario: plan.scenario.clone(),
            platform: plan.platform.name().to_string(),
            kind: plan.kind.as_str().to_string(),
            summary: plan.summary(),
            probes: plan.probes.len(),
            conditions: plan.conditions.len(),
            trials: plan.estimate.trials_min as usize,
            done,
        }
    }

    /// `finished` for an outcome.
    pub fn finished(outcome: &RunOutcome) -> Event {
        Event::Finished {
            run: outcome.run.to_string(),
            status: outcome.status.to_string(),
            reason: outcome.reason.clone(),
            trials_run: outcome.trials_run,
            trials_skipped: outcome.trials_skipped,
        }
    }

    /// Every event's tag, in the order a run first emits them: what `docs/events.md` declares.
    pub const NAMES: &'static [&'static str] = &[
        "planned",
        "tenants_ready",
        "memory_checked",
        "waiting",
        "block_started",
        "trial_started",
        "trial_ended",
        "round_ended",
        "note",
        "finished",
    ];

    /// The event's tag, as serialized (one of [`Event::NAMES`]).
    pub fn name(&self) -> &'static str {
        match self {
            Event::Planned { .. } => "planned",
            Event::TenantsReady { .. } => "tenants_ready",
            Event::MemoryChecked { .. } => "memory_checked",
            Event::Waiting { .. } => "waiting",
            Event::BlockStarted { .. } => "block_started",
            Event::TrialStarted(_) => "trial_started",
            Event::TrialEnded(_) => "trial_ended",
            Event::RoundEnded { .. } => "round_ended",
            Event::Note { .. } => "note",
            Event::Finished { .. } => "finished",
        }
    }
}

/// The schema of streams that do not say it.
fn schema_one() -> u32 {
    1
}

/// A consumer of a run's events.
pub trait Progress {
    /// One event, in the order the run emits them.
    fn event(&mut self, event: &Event);
}

/// The orchestrator's shorthands: each builds one event and hands it on.
impl dyn Progress + '_ {
    /// `planned`.
    pub fn planned(&mut self, plan: &Plan, run_id: &str, done: usize) {
        self.event(&Event::planned(plan, run_id, done));
    }
    /// `tenants_ready`.
    pub fn tenants_ready(&mut self, tenants: &[TenantFacts]) {
        self.event(&Event::TenantsReady {
            tenants: tenants
                .iter()
                .map(|t| TenantReady {
                    name: t.name.clone(),
                    limits: t.limits.clone(),
                    notes: t.notes.clone(),
                })
                .collect(),
        });
    }
    /// `memory_checked`.
    pub fn memory_checked(&mut self, tenant: &str, check: &MemCheck) {
        self.event(&Event::MemoryChecked {
            tenant: tenant.to_string(),
            wanted: check.wanted,
            touched: check.touched,
            ok: check.ok(),
            text: crate::memcheck::explain(tenant, check),
        });
    }
    /// `waiting`.
    pub fn waiting(&mut self, why: &str, d: Duration) {
        self.event(&Event::Waiting {
            why: why.to_string(),
            seconds: d.as_secs_f64(),
        });
    }
    /// `block_started`.
    pub fn block_started(&mut self, condition: &str) {
        self.event(&Event::BlockStarted {
            condition: condition.to_string(),
        });
    }
    /// `trial_started`.
    pub fn trial_started(&mut self, trial: &TrialView) {
        self.event(&Event::TrialStarted(trial.clone()));
    }
    /// `trial_ended`.
    pub fn trial_finished(&mut self, trial: TrialDone) {
        self.event(&Event::TrialEnded(trial));
    }
    /// `round_ended`.
    pub fn round_finished(&mut self, round: u32, open: usize) {
        self.event(&Event::RoundEnded { round, open });
    }
    /// `note`.
    pub fn note(&mut self, text: &str) {
        self.event(&Event::Note {
            text: text.to_string(),
        });
    }
}

/// Shows nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn event(&mut self, _event: &Event) {}
}

/// Writes each event as one line of JSON (`isobench run --json-stream`), flushed at once so
/// a reader sees it as it happens. A writer that fails (a closed pipe) is dropped quietly:
/// the run goes on and stores its trials.
pub struct JsonLines<W: Write> {
    out: Option<W>,
}

impl<W: Write> JsonLines<W> {
    /// Events to `out`.
    pub fn new(out: W) -> Self {
        JsonLines { out: Some(out) }
    }
}

impl<W: Write> Progress for JsonLines<W> {
    fn event(&mut self, event: &Event) {
        let Some(out) = &mut self.out else { return };
        let line = serde_json::to_string(event).expect("events serialize");
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            self.out = None;
        }
    }
}

/// Records every event as a line of text: for tests and `--debug` logs.
#[derive(Debug, Default, Clone)]
pub struct Transcript {
    /// One line per event.
    pub lines: Vec<String>,
}

impl Progress for Transcript {
    fn event(&mut self, event: &Event) {
        let line = match event {
            Event::Planned {
                probes,
                conditions,
                done,
                ..
            } => format!("planned: {probes} probes x {conditions} conditions, {done} done"),
            Event::TenantsReady { tenants } => {
                let names: Vec<&str> = tenants.iter().map(|t| t.name.as_str()).collect();
                format!("tenants ready: {}", names.join(", "))
            }
            Event::MemoryChecked {
                tenant,
                wanted,
                touched,
                ok,
                ..
            } => format!(
                "memory check {tenant}: {touched} of {wanted} bytes{}",
                if *ok { "" } else { " (short)" }
            ),
            Event::Waiting { why, seconds } => format!("waiting {seconds:.1}s: {why}"),
            Event::BlockStarted { condition } => format!("block {condition}"),
            Event::TrialStarted(_) => return,
            Event::TrialEnded(t) => format!(
                "trial {}/{} r{} {} {}: {}{}",
                t.view.n,
                t.view.of,
                t.view.round,
                t.view.condition,
                t.view.what,
                t.status,
                t.reason
                    .as_ref()
                    .map_or(String::new(), |r| format!(" ({r})"))
            ),
            Event::RoundEnded { round, open } => format!("round {round} done, {open} open"),
            Event::Note { text } => format!("note: {text}"),
            Event::Finished { .. } => "finished".into(),
        };
        self.lines.push(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_tagged_json_lines_that_read_back() {
        let events = [
            Event::TrialStarted(TrialView {
                n: 3,
                of: 40,
                round: 0,
                condition: "cpu@50".into(),
                what: "cpu-int".into(),
                eta_s: Some(12.0),
            }),
            Event::TrialEnded(TrialDone {
                view: TrialView {
                    n: 3,
                    of: 40,
                    round: 0,
                    condition: "cpu@50".into(),
                    what: "cpu-int".into(),
                    eta_s: None,
                },
                status: "dnr".into(),
                reason: Some("agent silent".into()),
            }),
            Event::Note {
                text: "hello".into(),
            },
        ];
        let mut out = Vec::new();
        let mut sink = JsonLines::new(&mut out);
        for e in &events {
            sink.event(e);
        }
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with(r#"{"event":"trial_started","n":3,"of":40"#));
        assert!(lines[1].contains(r#""status":"dnr""#), "{}", lines[1]);
        for (line, e) in lines.iter().zip(&events) {
            let back: Event = serde_json::from_str(line).unwrap();
            assert_eq!(&back, e);
            assert_eq!(
                serde_json::from_str::<serde_json::Value>(line).unwrap()["event"],
                e.name()
            );
        }
    }

    #[test]
    fn names_lists_every_event_once() {
        let view = TrialView {
            n: 1,
            of: 2,
            round: 0,
            condition: "baseline".into(),
            what: "cpu-int".into(),
            eta_s: None,
        };
        // One event of each variant: their `name`s are `NAMES`, in order. A new variant
        // belongs in `name`, in `NAMES`, here and in docs/events.md.
        let each = [
            r#"{"event":"planned","schema":1,"run":"R-1","scenario":"s","platform":"fake","kind":"matrix","summary":"","probes":1,"conditions":1,"trials":2,"done":0}"#,
            r#"{"event":"tenants_ready","tenants":[]}"#,
            r#"{"event":"memory_checked","tenant":"v","wanted":1,"touched":1,"ok":true,"text":""}"#,
            r#"{"event":"waiting","why":"w","seconds":1.0}"#,
            r#"{"event":"block_started","condition":"baseline"}"#,
        ]
        .iter()
        .map(|l| serde_json::from_str::<Event>(l).unwrap())
        .chain([
            Event::TrialStarted(view.clone()),
            Event::TrialEnded(TrialDone {
                view,
                status: "ok".into(),
                reason: None,
            }),
            Event::RoundEnded { round: 0, open: 0 },
            Event::Note { text: "n".into() },
            serde_json::from_str(r#"{"event":"finished","run":"R-1","status":"complete","reason":"","trials_run":2,"trials_skipped":0}"#).unwrap(),
        ]);
        let names: Vec<&str> = each.map(|e| e.name()).collect();
        assert_eq!(names, Event::NAMES);
    }

    #[test]
    fn a_planned_event_without_a_schema_is_version_1() {
        let old = r#"{"event":"planned","run":"R-1","scenario":"s","platform":"fake","kind":"matrix","summary":"","probes":1,"conditions":1,"trials":2,"done":0}"#;
        let Event::Planned { schema, .. } = serde_json::from_str(old).unwrap() else {
            panic!("not planned")
        };
        assert_eq!(schema, 1);
        assert_eq!(
            EVENTS_SCHEMA, 1,
            "a new schema: say what changed in docs/events.md"
        );
    }

    #[test]
    fn a_closed_writer_does_not_stop_the_run() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut sink = JsonLines::new(Closed);
        sink.event(&Event::Note { text: "a".into() });
        sink.event(&Event::Note { text: "b".into() });
        assert!(sink.out.is_none());
    }
}
