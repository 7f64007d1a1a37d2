//! Lifecycle hooks of a run, for live progress displays. Every hook has a no-op default, so a
//! display implements only what it shows; [`NoProgress`] shows nothing (`--quiet`, tests).
//! Measurement never waits on a display.

use std::time::Duration;

use crate::backend::{MemCheck, TenantFacts};
use crate::plan::Plan;

/// One trial as the display sees it.
#[derive(Debug, Clone, PartialEq)]
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
    /// Estimated time left, once a few trials have run.
    pub eta: Option<Duration>,
}

/// How a finished trial went, for the display.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialDone {
    /// The trial.
    pub view: TrialView,
    /// `ok`, `dnr`, `disturbed` or `failed`.
    pub status: &'static str,
    /// The reason, unless ok.
    pub reason: Option<String>,
}

/// Hooks called by the orchestrator, in this order: `planned`, `tenants_ready`,
/// `memory_checked` (per tenant), then per block `block_started` and per trial
/// `trial_started` / `trial_finished`, `round_finished` per round, and `finished`.
pub trait Progress {
    /// The plan is fixed; `done` trials were already stored (resume).
    fn planned(&mut self, _plan: &Plan, _run_id: &str, _done: usize) {}
    /// Tenants are created and their agents answer.
    fn tenants_ready(&mut self, _tenants: &[TenantFacts]) {}
    /// A tenant's memory-availability check finished.
    fn memory_checked(&mut self, _tenant: &str, _check: &MemCheck) {}
    /// The run waits (memory not available yet, a tenant restarting).
    fn waiting(&mut self, _why: &str, _for: Duration) {}
    /// A block starts: the condition is being set up (stressor started, warm-up).
    fn block_started(&mut self, _condition: &str) {}
    /// A trial starts.
    fn trial_started(&mut self, _trial: &TrialView) {}
    /// A trial ended and is committed.
    fn trial_finished(&mut self, _trial: &TrialDone) {}
    /// A round ended; `open` cells still need data.
    fn round_finished(&mut self, _round: u32, _open: usize) {}
    /// Something worth a line (a tenant restarted, a stressor that died).
    fn note(&mut self, _text: &str) {}
    /// The run ended (successfully or not).
    fn finished(&mut self) {}
}

/// Shows nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProgress;

impl Progress for NoProgress {}

/// Records every hook as a line of text: for tests and `--debug` logs.
#[derive(Debug, Default, Clone)]
pub struct Transcript {
    /// One line per hook call.
    pub lines: Vec<String>,
}

impl Progress for Transcript {
    fn planned(&mut self, plan: &Plan, _run_id: &str, done: usize) {
        self.lines.push(format!(
            "planned: {} probes x {} conditions, {} done",
            plan.probes.len(),
            plan.conditions.len(),
            done
        ));
    }
    fn tenants_ready(&mut self, tenants: &[TenantFacts]) {
        let names: Vec<&str> = tenants.iter().map(|t| t.name.as_str()).collect();
        self.lines
            .push(format!("tenants ready: {}", names.join(", ")));
    }
    fn memory_checked(&mut self, tenant: &str, check: &MemCheck) {
        self.lines.push(format!(
            "memory check {tenant}: {} of {} bytes{}",
            check.touched,
            check.wanted,
            if check.ok() { "" } else { " (short)" }
        ));
    }
    fn waiting(&mut self, why: &str, d: Duration) {
        self.lines
            .push(format!("waiting {:.1}s: {why}", d.as_secs_f64()));
    }
    fn block_started(&mut self, condition: &str) {
        self.lines.push(format!("block {condition}"));
    }
    fn trial_finished(&mut self, t: &TrialDone) {
        self.lines.push(format!(
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
        ));
    }
    fn round_finished(&mut self, round: u32, open: usize) {
        self.lines.push(format!("round {round} done, {open} open"));
    }
    fn note(&mut self, text: &str) {
        self.lines.push(format!("note: {text}"));
    }
    fn finished(&mut self) {
        self.lines.push("finished".into());
    }
}
