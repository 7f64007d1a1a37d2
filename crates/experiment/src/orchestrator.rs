//! The orchestrator: runs a [`Plan`] and commits every trial to the store as it ends.
//!
//! Order of a run: create the tenants and start their agents, record them; check that each
//! tenant really has the memory its workloads need ([`crate::memcheck`]); then rounds of
//! blocks of trials ([`crate::schedule`]) until the stopping rule is met or the cap is hit.
//! Each trial snapshots the machine's CPU time, the tenants' and the controller's own before
//! and after, so load from outside the run is seen and the trial marked disturbed and
//! repeated. A tenant that stops answering is recorded as DNR with the reason and its agent
//! restarted; the run goes on. Ctrl-C (the stop flag) ends the run between trials as
//! `interrupted`; `resume` continues it later without losing or repeating a trial. Whatever
//! happens, the tenants are torn down.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use isobench_store::{
    Condition as StoreCondition, Fact, LoadedRun, Modulation, NewRun, RunId, RunStatus, Store,
    StoreError, Timestamp, TrialRecord,
};

use crate::analysis::{self, StatsSettings};
use crate::backend::{
    Backend, Clock, CpuTimes, ProbeOutcome, StressProgress, StressorRun, TenantDriver, TenantFacts,
    TenantFailure,
};
use crate::facts::PLAN_FACT;
use crate::onoff::Tuning;
use crate::plan::{Assignment, Design, Plan};
pub use crate::progress::RunOutcome;
use crate::progress::{Event, Progress, TrialDone, TrialView};
use crate::scenario::Role;
use crate::schedule::{Block, Needs, ScheduledTrial, TrialKey, TrialWhat, SETTLE_WINDOW};
use isobench_platform::sched::{Phases, SchedMark};

mod designs;
mod records;
mod served;
mod service;
mod setup;
mod stressors;
mod usage;

use records::TrialCommon;

/// Window length of the pilot runs (short, so longer windows can be formed from them).
pub const PILOT_WINDOW: Duration = Duration::from_millis(5);

/// Longest wait for the machine to settle before a baseline block.
pub const SETTLE_MAX: Duration = Duration::from_secs(2);

/// Knobs of the orchestrator that are not part of a scenario.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Memory checks before giving up (the first plus retries).
    pub memcheck_attempts: u32,
    /// Wait between memory checks.
    pub memcheck_wait: Duration,
    /// Skip the memory check (tests with backends that cannot touch memory).
    pub skip_memcheck: bool,
    /// How long a measured trial waits, beyond the store's own busy timeout, for a database
    /// another process holds locked before the run gives up on storing it.
    pub lock_patience: Duration,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            memcheck_attempts: 3,
            memcheck_wait: Duration::from_secs(10),
            skip_memcheck: false,
            lock_patience: Duration::from_secs(60),
        }
    }
}

/// Creates a run in the store for `plan`: the run record and the plan itself (so a resume
/// follows the same plan).
pub fn create_run(
    store: &mut Store,
    plan: &Plan,
    scenario_text: &str,
    platform_version: &str,
    host_facts: serde_json::Value,
    started_unix_ms: i64,
) -> Result<RunId, StoreError> {
    let id = store.create_run(&NewRun {
        scenario_name: plan.scenario.clone(),
        scenario_text: scenario_text.to_string(),
        seed: plan.seed,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at: Timestamp::from_unix_millis(started_unix_ms),
        host_facts,
        platform: plan.platform.name().to_string(),
        platform_version: platform_version.to_string(),
    })?;
    store.record_fact(
        &id,
        &Fact {
            scope: PLAN_FACT.0.into(),
            key: PLAN_FACT.1.into(),
            value: serde_json::to_value(plan).expect("plans serialize"),
        },
    )?;
    Ok(id)
}

/// Prepares an interrupted run for resuming: checks it can be resumed, marks it running
/// again, and returns the plan it follows.
pub fn prepare_resume(store: &mut Store, run: &RunId) -> Result<Plan> {
    let loaded = store.load_run(run)?;
    if loaded.run.status == RunStatus::Complete {
        anyhow::bail!(
            "run {run} is complete: every trial it planned is stored; `isobench show {run}` \
             prints its results"
        );
    }
    let fact = loaded
        .facts
        .iter()
        .find(|f| f.scope == PLAN_FACT.0 && f.key == PLAN_FACT.1)
        .ok_or_else(|| {
            anyhow!(
                "run {run} has no stored plan (it was not started by `isobench run`); it cannot \
                 be resumed"
            )
        })?;
    let plan = Plan::from_stored(fact.value.clone()).map_err(|e| {
        anyhow!(
            "run {run} was planned by isobench {} and its plan does not read in this version \
             ({e}); resume it with that version",
            loaded.run.tool_version
        )
    })?;
    store.resume_run(run)?;
    Ok(plan)
}

/// One tenant of the run, with its driver once created.
struct Slot {
    index: usize,
    name: String,
    role: Role,
    driver: Box<dyn TenantDriver>,
    /// Why the tenant is down (its agent could not be restarted), when it is.
    down: Option<String>,
}

/// Snapshot of CPU counters and stressor progress.
struct Snap {
    root: Option<CpuTimes>,
    own: CpuTimes,
    tenants: Vec<Option<CpuTimes>>,
    stress: Vec<Option<Result<StressProgress, TenantFailure>>>,
}

/// Runs a plan against a backend, recording into a store.
pub struct Engine<'a> {
    plan: &'a Plan,
    store: &'a mut Store,
    backend: &'a mut dyn Backend,
    clock: &'a dyn Clock,
    progress: &'a mut dyn Progress,
    stop: Arc<AtomicBool>,
    options: EngineOptions,
    run: RunId,
    slots: Vec<Slot>,
    /// Trial keys stored, per tenant, with their status word.
    stored: BTreeMap<(TrialKey, String), &'static str>,
    repetitions: BTreeMap<(String, String, String), u32>,
    done: usize,
    planned: usize,
    ran: usize,
    skipped: usize,
    started: Duration,
    /// The stressor of the current block, per aggressor slot it assigns one to: running or
    /// why not.
    running: BTreeMap<usize, Result<(), String>>,
    /// Whether each of the last trials was disturbed, newest last.
    recent: std::collections::VecDeque<bool>,
    /// Load from outside the run persists: disturbed trials are kept without repeats.
    persistent: bool,
    /// Window, period and trial length of the on/off design, per probe index.
    tuning: BTreeMap<usize, Tuning>,
    /// Length of the next on/off trial of a (probe, condition) still too wide.
    next_len: BTreeMap<(usize, usize), Duration>,
    /// Measuring time a (probe, condition) still too wide would need to reach the target,
    /// uncapped: what a round under a time budget weighs cells by.
    settle_cost: BTreeMap<(usize, usize), Duration>,
    /// Wall time of the last round over the measuring time planned for it (warm-ups, stressor
    /// starts, the controller's own work).
    overhead: f64,
    /// Scheduler marks of the current trial per victim slot, each with whether the
    /// aggressors run until the next one.
    marks: BTreeMap<usize, Vec<(bool, SchedMark)>>,
    /// Seconds the current block's aggressors spent frozen (on/off trials), so the pressure
    /// they report over the block is scaled to their running time.
    block_frozen_s: f64,
    /// The block's stressors are started and stopped with each trial: one of them counts
    /// its work only when stopped ([`isobench_workloads::Stressor::counts_at_stop`]).
    per_trial: bool,
    /// A per-trial block has not yet recorded what its stressors delivered (its first
    /// trial's stop does).
    pressure_pending: bool,
    /// Services started in tenants for served probes, and the places beside tenants.
    served: served::Served,
    /// What the neighbours did during the current scheduled trial, for its victim's record.
    timeline: Option<isobench_store::Timeline>,
    /// Limits the current block's condition set, by tenant name, as recorded with its
    /// trials, and why one could not be set (its trials then fail with the reason).
    limits: Option<(serde_json::Value, Option<String>)>,
    /// The calibrated target rate of each service probe that asked for one, per probe
    /// index ([`service`]).
    service_rates: BTreeMap<usize, f64>,
}

/// What an engine works through: the store it commits trials to, the backend that runs the
/// tenants, the clock, whom it tells how the run goes, and the flag that stops it between
/// trials (Ctrl-C).
pub struct EngineIo<'a> {
    /// Where the run and its trials are stored.
    pub store: &'a mut Store,
    /// Creates and drives the tenants.
    pub backend: &'a mut dyn Backend,
    /// The time source.
    pub clock: &'a dyn Clock,
    /// Receives the run's events.
    pub progress: &'a mut dyn Progress,
    /// Set to end the run between trials as `interrupted`.
    pub stop: Arc<AtomicBool>,
}

impl<'a> EngineIo<'a> {
    /// An engine's I/O with a stop flag of its own that nothing sets (a run that is not
    /// interrupted from outside: tests, one-off runs).
    pub fn new(
        store: &'a mut Store,
        backend: &'a mut dyn Backend,
        clock: &'a dyn Clock,
        progress: &'a mut dyn Progress,
    ) -> Self {
        EngineIo {
            store,
            backend,
            clock,
            progress,
            stop: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl<'a> Engine<'a> {
    /// An engine for run `run` (created with [`create_run`] or prepared with
    /// [`prepare_resume`]).
    pub fn new(plan: &'a Plan, run: RunId, io: EngineIo<'a>, options: EngineOptions) -> Self {
        let EngineIo {
            store,
            backend,
            clock,
            progress,
            stop,
        } = io;
        Engine {
            plan,
            store,
            backend,
            clock,
            progress,
            stop,
            options,
            run,
            slots: Vec::new(),
            stored: BTreeMap::new(),
            repetitions: BTreeMap::new(),
            done: 0,
            planned: 0,
            ran: 0,
            skipped: 0,
            started: Duration::ZERO,
            running: BTreeMap::new(),
            block_frozen_s: 0.0,
            per_trial: false,
            pressure_pending: false,
            recent: std::collections::VecDeque::new(),
            persistent: false,
            tuning: BTreeMap::new(),
            next_len: BTreeMap::new(),
            settle_cost: BTreeMap::new(),
            overhead: 1.0,
            marks: BTreeMap::new(),
            served: served::Served::default(),
            timeline: None,
            limits: None,
            service_rates: BTreeMap::new(),
        }
    }

    /// Runs (or resumes) the run to its end, tears the tenants down and records the final
    /// status. Errors only when the store fails or the tenants cannot be set up; the run is
    /// then recorded as failed.
    pub fn execute(mut self) -> Result<RunOutcome> {
        let result = self.execute_inner();
        // Teardown happens whatever the result; the tenants at once, since each mostly waits
        // (for its agent to leave, its processes to die, its cgroups to empty).
        let mut teardown_errors = self.served_teardown();
        let tenant_errors: Vec<String> = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .slots
                .iter_mut()
                .map(|s| {
                    scope.spawn(|| {
                        s.driver
                            .teardown()
                            .map_err(|e| format!("{}: {e:#}", s.name))
                    })
                })
                .collect();
            handles
                .into_iter()
                .filter_map(|h| match h.join() {
                    Ok(r) => r.err(),
                    Err(_) => Some("a tenant's teardown panicked".to_string()),
                })
                .collect()
        });
        teardown_errors.extend(tenant_errors);
        if let Err(e) = self.backend.teardown() {
            teardown_errors.push(format!("platform: {e:#}"));
        }
        for e in &teardown_errors {
            self.progress.note(&format!("teardown: {e}"));
        }
        let end = Timestamp::from_unix_millis(self.clock.unix_ms());
        let outcome = match result {
            Ok((status, reason)) => {
                self.store
                    .finish_run(&self.run, status, Some(&reason), end)
                    .context("recording the end of the run")?;
                RunOutcome {
                    run: self.run.clone(),
                    status,
                    reason,
                    trials_run: self.ran,
                    trials_skipped: self.skipped,
                }
            }
            Err(e) => {
                let reason = format!("{e:#}");
                // Best effort: the error itself may be the store's.
                let _ = self
                    .store
                    .finish_run(&self.run, RunStatus::Failed, Some(&reason), end);
                self.progress.event(&Event::finished(&RunOutcome {
                    run: self.run.clone(),
                    status: RunStatus::Failed,
                    reason,
                    trials_run: self.ran,
                    trials_skipped: self.skipped,
                }));
                return Err(e);
            }
        };
        self.progress.event(&Event::finished(&outcome));
        Ok(outcome)
    }

    fn execute_inner(&mut self) -> Result<(RunStatus, String)> {
        let plan = self.plan;
        self.started = self.clock.now();
        let loaded = self.store.load_run(&self.run)?;
        self.load_stored(&loaded);
        self.progress
            .planned(plan, self.run.as_str(), self.stored_trials());

        self.create_tenants(&loaded)?;
        let refusal = if self.options.skip_memcheck {
            None
        } else {
            self.memory_check()?
        };
        // A check cut short by an interrupt is an interrupted run (resumable, exit 130), not
        // a refusal of the host's memory.
        if self.stop.load(Ordering::SeqCst) {
            return Ok((RunStatus::Interrupted, self.interrupted_reason()));
        }
        if let Some(refusal) = refusal {
            return Ok((RunStatus::Failed, refusal));
        }
        self.calibrate()?;
        // Services first: the pilot measures a service at the rate its trials hold.
        self.calibrate_services(&loaded)?;
        self.pilot(&loaded)?;

        let (min, max) = plan.kind.experiment().rounds(plan);
        let per_round = plan.estimate.trials_per_round as usize;
        let mut reason = String::new();
        for round in 0..max {
            let round_start = self.clock.now();
            let needs = if round < min {
                plan.kind.experiment().first_needs(plan)
            } else {
                let mut needs = self.needs_before(round)?;
                if let Some(budget) = plan.repetitions.max_time {
                    let spent = self.clock.now() - self.started;
                    let open = needs.cells.len() + needs.solo.len();
                    let remaining = budget.saturating_sub(spent);
                    self.fit_budget(&mut needs, remaining);
                    let fits = !needs.is_empty()
                        && self.planned_time(&needs).mul_f64(self.overhead) <= remaining;
                    if open > 0 && !fits {
                        // No count here: the reports count the flagged results from their
                        // own tables (`Results::reason_line`).
                        reason = format!(
                            "time budget reached: no further round fits in {}; results whose \
                             interval is wider than +/-{} points are flagged",
                            crate::scenario::fmt_duration(budget),
                            plan.repetitions.ci_half_width
                        );
                        break;
                    }
                }
                if needs.is_empty() {
                    reason = plan.kind.experiment().finished(plan, round);
                    break;
                }
                needs
            };
            let blocks = plan.kind.experiment().round_blocks(plan, round, &needs);
            let this_round: usize = blocks.iter().map(|b| b.trials.len()).sum();
            let later_min = min.saturating_sub(round + 1) as usize * per_round;
            self.planned = self
                .planned
                .max(self.done + self.pending_in(&blocks) + later_min)
                .max(self.done);
            let _ = this_round;
            for block in &blocks {
                if self.stop.load(Ordering::SeqCst) {
                    return Ok((RunStatus::Interrupted, self.interrupted_reason()));
                }
                self.run_block(block)?;
            }
            if self.stop.load(Ordering::SeqCst) {
                return Ok((RunStatus::Interrupted, self.interrupted_reason()));
            }
            let open = if round + 1 >= min {
                let n = self.needs_before(round + 1)?;
                n.cells.len() + n.solo.len()
            } else {
                needs.cells.len() + needs.solo.len()
            };
            self.progress.round_finished(round, open);
            let last_round = self.clock.now() - round_start;
            let planned = self.planned_time(&needs);
            if planned > Duration::ZERO {
                self.overhead = (last_round.as_secs_f64() / planned.as_secs_f64()).max(1.0);
            }
            if round + 1 == max {
                reason = if open == 0 {
                    plan.kind.experiment().finished(plan, max)
                } else {
                    format!(
                        "repetition cap reached: {max} rounds, {open} result(s) without an \
                         interval within +/-{} points (flagged)",
                        plan.repetitions.ci_half_width
                    )
                };
            }
        }
        Ok((RunStatus::Complete, reason))
    }

    fn interrupted_reason(&self) -> String {
        format!(
            "interrupted after {} trials; `isobench run --resume {}` continues it",
            self.done, self.run
        )
    }

    fn stored_trials(&self) -> usize {
        self.stored
            .keys()
            .map(|(k, _)| *k)
            .collect::<BTreeSet<_>>()
            .len()
    }

    fn load_stored(&mut self, loaded: &LoadedRun) {
        for t in &loaded.trials {
            self.stored
                .insert((t.key, t.tenant.clone()), t.status.as_str());
            let key = (t.tenant.clone(), t.probe.clone(), t.condition.to_string());
            let r = self.repetitions.entry(key).or_insert(0);
            *r = (*r).max(t.repetition + 1);
        }
        self.done = self.stored_trials();
    }

    /// The latest stored attempt of a trial (any tenant's record) and whether it was
    /// disturbed.
    fn stored_attempt(&self, key: TrialKey) -> Option<(u32, bool)> {
        let lo = (TrialKey { attempt: 0, ..key }, String::new());
        let hi = TrialKey {
            attempt: u32::MAX,
            ..key
        };
        let mut best: Option<(u32, bool)> = None;
        for ((k, _), &status) in self.stored.range(lo..).take_while(|((k, _), _)| *k <= hi) {
            let d = status == "disturbed";
            best = match best {
                Some((a, bd)) if a == k.attempt => Some((a, bd || d)),
                Some((a, bd)) if a > k.attempt => Some((a, bd)),
                _ => Some((k.attempt, d)),
            };
        }
        best
    }

    /// The attempt of a scheduled trial still to run, if any.
    fn next_attempt(&self, key: TrialKey) -> Option<TrialKey> {
        match self.stored_attempt(key) {
            None => Some(key),
            Some((a, true)) if a < self.plan.trial.max_retries => Some(TrialKey {
                attempt: a + 1,
                ..key
            }),
            Some(_) => None,
        }
    }

    fn pending_in(&self, blocks: &[Block]) -> usize {
        blocks
            .iter()
            .flat_map(|b| b.trials.iter().map(move |t| b.key(t)))
            .filter(|k| self.next_attempt(*k).is_some())
            .count()
    }

    fn needs_before(&mut self, round: u32) -> Result<Needs> {
        let loaded = self.store.load_run(&self.run)?;
        let trials: Vec<&TrialRecord> = loaded
            .trials
            .iter()
            .filter(|t| t.key.round < round)
            .collect();
        let results = analysis::analyze_trials(
            &loaded,
            Some(self.plan.clone()),
            &trials,
            &StatsSettings::from_plan(self.plan),
        );
        self.size_next_trials(&results);
        Ok(self.plan.kind.experiment().needs(self.plan, &results))
    }

    /// Sizes the next on/off trial of every cell still too wide from the spread of its cycles
    /// so far ([`analysis::units_to_target`], less the cycles it has, at the tuned period; at
    /// least the tuned trial, at most three times `trial.onoff_max`), and records what every
    /// cell still too wide would need to reach the target (on/off: those cycles; paired: the
    /// pairs still needed, two trials each). A pure function of the stored trials, so a
    /// resumed run sizes as the original would.
    fn size_next_trials(&mut self, results: &analysis::Results) {
        let plan = self.plan;
        self.next_len.clear();
        self.settle_cost.clear();
        let z = isobench_stats::normal_quantile(0.5 + plan.repetitions.confidence / 2.0);
        for c in results.cells.iter().filter(|c| !c.settled) {
            let (Some(est), Some(design)) = (&c.paired, c.design) else {
                continue;
            };
            let (Some(pi), Some(ci)) = (
                plan.probes.iter().position(|x| x.id == c.probe),
                plan.conditions.iter().position(|x| x.id == c.condition),
            ) else {
                continue;
            };
            let more = (analysis::units_to_target(est, plan.repetitions.ci_half_width, z)
                - est.n as f64)
                .max(1.0);
            let cost = match design {
                Design::OnOff => {
                    let Some(t) = self.tuning.get(&pi) else {
                        continue;
                    };
                    let need = t.period.mul_f64(more);
                    let len = need.clamp(t.trial, plan.trial.onoff_max * 3);
                    let e = self.next_len.entry((pi, ci)).or_insert(len);
                    *e = (*e).max(len);
                    need
                }
                Design::Paired => plan.trial.duration.mul_f64(2.0 * more),
            };
            let e = self.settle_cost.entry((pi, ci)).or_insert(cost);
            *e = (*e).max(cost);
        }
    }

    /// Measuring time the round for `needs` is planned to take: each on/off cell's trial, two
    /// trials per pair of each paired cell, and the aggressors' solo trials.
    fn planned_time(&self, needs: &Needs) -> Duration {
        let plan = self.plan;
        let cells: Duration = needs
            .cells
            .iter()
            .map(|&(p, c)| match plan.design(p, c) {
                Design::OnOff => self.next_len.get(&(p, c)).copied().unwrap_or_else(|| {
                    self.tuning
                        .get(&p)
                        .map_or(plan.trial.onoff_max, |t| t.trial)
                }),
                Design::Paired => {
                    plan.trial.duration * 2 * needs.pairs.get(&c).copied().unwrap_or(1)
                }
            })
            .sum();
        cells + plan.trial.solo * needs.solo.len() as u32
    }

    /// Keeps the round for `needs` within `remaining` wall time (its planned measuring time
    /// times the last round's overhead): leaves out, one at a time, the cell that would still
    /// need the most time to reach the target, so the budget goes to cells it can settle.
    fn fit_budget(&self, needs: &mut Needs, remaining: Duration) {
        while !needs.cells.is_empty() && self.planned_time(needs).mul_f64(self.overhead) > remaining
        {
            let Some(&worst) = needs.cells.iter().max_by_key(|k| {
                (
                    self.settle_cost.get(k).copied().unwrap_or(Duration::MAX),
                    std::cmp::Reverse(**k),
                )
            }) else {
                break;
            };
            needs.cells.remove(&worst);
        }
        needs
            .pairs
            .retain(|c, _| needs.cells.iter().any(|&(_, cc)| cc == *c));
    }

    /// The mechanism of victim slot `v` in the trial just run, for its record: the marks
    /// split into the time with and without the aggressors. A probe run from end to end
    /// (not modulated) runs in a thread that has exited by the closing mark, so its threads'
    /// part is the agent's own measurement of the run, when it has one.
    fn mechanism(
        &self,
        v: usize,
        outcome: &Result<ProbeOutcome, TenantFailure>,
        modulated: bool,
    ) -> Option<serde_json::Value> {
        let mut p = Phases::from_marks(self.marks.get(&v)?);
        if !modulated {
            let ctx = outcome.as_ref().ok().and_then(|o| o.context.as_ref());
            for t in [&mut p.on, &mut p.off].into_iter().flatten() {
                if let Some(c) = ctx {
                    t.run_s = c.run_s;
                    t.runq_wait_s = c.runq_wait_s;
                    t.timeslices = c.timeslices;
                }
            }
        }
        if p.on.is_none() && p.off.is_none() {
            return None;
        }
        serde_json::to_value(p).ok()
    }

    /// Takes a scheduler mark of each of `victims`; `on` says whether the aggressors run
    /// until the next mark.
    fn mark_victims(&mut self, victims: &[usize], on: bool) {
        for &v in victims {
            if let Some(m) = self.slots[v].driver.sched_mark() {
                self.marks.entry(v).or_default().push((on, m));
            }
        }
    }

    fn condition_label(&self, c: Option<usize>) -> String {
        c.map_or_else(
            || "baseline".to_string(),
            |c| self.plan.conditions[c].id.clone(),
        )
    }

    fn store_condition(&self, c: Option<usize>) -> StoreCondition {
        match c {
            None => StoreCondition::Baseline,
            Some(c) => {
                let cond = &self.plan.conditions[c];
                StoreCondition::contended(cond.id.clone())
            }
        }
    }

    /// What tenant slot `slot` runs under condition `c`, when it is not idle.
    fn assignment(&self, c: usize, slot: usize) -> Option<&Assignment> {
        self.plan.conditions[c]
            .assignments
            .get(&self.slots[slot].name)
    }

    /// The stressor tenant slot `slot` runs under condition `c`, when it is not idle.
    fn stressor_run(&self, c: usize, slot: usize) -> Option<StressorRun> {
        let a = self.assignment(c, slot)?;
        let t = &self.plan.tenants[slot];
        Some(StressorRun {
            name: a.stressor.clone(),
            intensity: a.intensity,
            params: a.params.clone(),
            pin: t.pin.map(|_| self.plan.conditions[c].limits.cpus_of(t)),
            contained: self.plan.platform.capabilities().contains_aggressors,
            timeout: self.plan.trial.timeout,
        })
    }

    /// Aggressor slots whose stressor is running (`running`), or whose stressor is not.
    fn aggressors(&self, running: bool) -> Vec<usize> {
        self.running
            .iter()
            .filter(|(_, r)| r.is_ok() == running)
            .map(|(&i, _)| i)
            .collect()
    }

    /// Victim slots, in order.
    fn victims(&self) -> Vec<usize> {
        self.slots
            .iter()
            .filter(|s| s.role == Role::Victim)
            .map(|s| s.index)
            .collect()
    }

    fn run_block(&mut self, block: &Block) -> Result<()> {
        let pending: Vec<(ScheduledTrial, TrialKey)> = block
            .trials
            .iter()
            .filter_map(|t| self.next_attempt(block.key(t)).map(|k| (*t, k)))
            .collect();
        let all = block.trials.len();
        self.skipped += all - pending.len();
        if pending.is_empty() {
            return Ok(());
        }
        let label = self.condition_label(block.condition);
        self.progress.block_started(&label);
        self.start_block_services(block);
        let switched = block.trials.iter().all(|t| t.what.switches_stressors());
        self.per_trial = !switched && block.condition.is_some_and(|c| self.counts_at_stop(c));
        self.pressure_pending = self.per_trial;
        if let Some(c) = block.condition {
            self.set_limits(c);
            if !switched && !self.per_trial {
                self.start_stressors(c);
            }
        }
        self.block_frozen_s = 0.0;
        self.clock.sleep(self.plan.trial.warmup);
        if block.condition.is_none() {
            self.settle();
        }
        let mut result = Ok(());
        for (t, key) in pending {
            if self.stop.load(Ordering::SeqCst) {
                break;
            }
            let mut key = key;
            loop {
                let r = self.run_trial(block, &t, key);
                if let Ok(d) = r {
                    self.note_disturbance(d);
                }
                match r {
                    Ok(true) if key.attempt < self.plan.trial.max_retries && !self.persistent => {
                        key = key.retry();
                        self.planned += 1;
                    }
                    Ok(_) => break,
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            }
            if result.is_err() {
                break;
            }
        }
        if let Some(c) = block.condition {
            let first = block.trials.first().map(|t| block.key(t));
            for (tenant, report) in self.stop_stressors() {
                self.record_pressure(&label, &tenant, first, report);
            }
            self.restore_limits(c);
        }
        self.stop_services_kept(crate::serving::Keep::Block);
        result
    }

    /// Applies the knobs condition `c` changes on tenants, remembering what is in force for
    /// the records of its trials: per tenant, each knob as set (`null`: lifted) and, under
    /// `read_back`, those knobs as the platform reads them back. A knob the platform cannot
    /// change live is refused without touching the tenant; any failure fails the
    /// condition's trials with the reason.
    fn set_limits(&mut self, c: usize) {
        let cond = &self.plan.conditions[c];
        if cond.limits.is_empty() {
            self.limits = None;
            return;
        }
        let platform = self.plan.platform;
        let live = platform.capabilities().live_knobs;
        let mut record = serde_json::Map::new();
        let mut failed = None;
        for (name, o) in cond.limits.iter() {
            let Some(i) = self.slots.iter().position(|s| &s.name == name) else {
                continue;
            };
            let mut rec = o.to_json();
            let done = match live.refuse(platform.name(), o) {
                Err(why) => Err(format!("{why:#}")),
                Ok(()) => self.slots[i]
                    .driver
                    .update_limits(o)
                    .map_err(|e| e.to_string()),
            };
            match done {
                Ok(Some(back)) => {
                    let knobs: serde_json::Map<String, serde_json::Value> = o
                        .knobs()
                        .iter()
                        .map(|k| (k.json_key(&back).to_string(), k.json(&back)))
                        .collect();
                    rec["read_back"] = serde_json::Value::Object(knobs);
                }
                Ok(None) => {}
                Err(e) => {
                    let why = format!(
                        "the limits of tenant {name} could not be set to {}: {e}",
                        o.0
                    );
                    self.progress.note(&why);
                    failed.get_or_insert(why);
                }
            }
            record.insert(name.clone(), rec);
        }
        self.limits = Some((serde_json::Value::Object(record), failed));
    }

    /// Puts back the planned value of every knob condition `c` changed (lifting the knobs
    /// the plan leaves unset); a tenant whose change the platform refused was not touched.
    fn restore_limits(&mut self, c: usize) {
        let cond = &self.plan.conditions[c];
        let platform = self.plan.platform;
        let live = platform.capabilities().live_knobs;
        for (name, o) in cond.limits.iter() {
            let Some(i) = self.slots.iter().position(|s| &s.name == name) else {
                continue;
            };
            if live.refuse(platform.name(), o).is_err() {
                continue;
            }
            let back = o.restoring(&self.plan.tenants[i].limits);
            if let Err(e) = self.slots[i].driver.update_limits(&back) {
                self.progress.note(&format!(
                    "tenant {name}: its planned limits ({back}) could not be restored: {e}"
                ));
            }
        }
        self.limits = None;
    }

    /// Before a baseline block: waits (in windows of [`SETTLE_WINDOW`], at most
    /// [`SETTLE_MAX`]) until the machine is quiet, counting kernel time too, so the previous
    /// stressor's after-effects (dirty pages being written back, reclaim) do not leak into
    /// the baseline.
    fn settle(&mut self) {
        let limit = self.plan.trial.max_outside_load;
        let t0 = self.clock.now();
        loop {
            let a = self.snapshot(false);
            self.clock.sleep(SETTLE_WINDOW);
            let b = self.snapshot(false);
            let total = |s: &Snap| Snap {
                root: s.root.map(|c| CpuTimes { user_ns: None, ..c }),
                own: s.own,
                tenants: s.tenants.clone(),
                stress: Vec::new(),
            };
            let load = self.outside_load(&total(&a), &total(&b), SETTLE_WINDOW.as_secs_f64());
            match load {
                Some(l) if l > limit && self.clock.now() - t0 < SETTLE_MAX => continue,
                Some(l) if l > limit => {
                    self.progress.note(&format!(
                        "the machine did not settle before a baseline block ({l:.2} CPUs busy \
                         outside the run after {:.1} s); measuring anyway",
                        SETTLE_MAX.as_secs_f64()
                    ));
                    break;
                }
                _ => break,
            }
        }
    }

    /// Tracks disturbed trials: when most of the recent ones were disturbed, the load from
    /// outside the run is persistent and repeating trials at once would only triple the run;
    /// they are then kept, flagged, until trials run clean again.
    fn note_disturbance(&mut self, disturbed: bool) {
        const WINDOW: usize = 6;
        self.recent.push_back(disturbed);
        while self.recent.len() > WINDOW {
            self.recent.pop_front();
        }
        let n = self.recent.iter().filter(|&&d| d).count();
        if !self.persistent && self.recent.len() == WINDOW && n * 3 >= WINDOW * 2 {
            self.persistent = true;
            self.progress.note(
                "load from outside the run persists: disturbed trials are now kept, flagged, \
                 without repeats (see the trust line)",
            );
        } else if self.persistent && n == 0 {
            self.persistent = false;
            self.progress
                .note("the load from outside the run is gone: disturbed trials are repeated again");
        }
    }

    fn snapshot(&mut self, contended: bool) -> Snap {
        let root = self.backend.root_cpu();
        let mut own = self.backend.own_cpu();
        let beside = self.beside_cpu();
        own.total_ns += beside.total_ns;
        own.user_ns = own.user_ns.zip(beside.user_ns).map(|(a, b)| a + b);
        let tenants = self.slots.iter_mut().map(|s| s.driver.cpu()).collect();
        let stress = (0..self.slots.len())
            .map(|i| {
                let running = contended && matches!(self.running.get(&i), Some(Ok(())));
                running.then(|| self.slots[i].driver.stressor_progress())
            })
            .collect();
        Snap {
            root,
            own,
            tenants,
            stress,
        }
    }

    /// CPUs of load from outside the run between two snapshots, when measurable. User time
    /// only when every source splits it (kernel threads working for the tenants, such as
    /// writeback, show up as system time of no tenant).
    fn outside_load(&self, a: &Snap, b: &Snap, secs: f64) -> Option<f64> {
        let (ra, rb) = (a.root?, b.root?);
        if secs <= 0.0 {
            return None;
        }
        let tenants: Option<Vec<(CpuTimes, CpuTimes)>> = a
            .tenants
            .iter()
            .zip(&b.tenants)
            .map(|(x, y)| Some(((*x)?, (*y)?)))
            .collect();
        let tenants = tenants?;
        let user_everywhere = ra.user_ns.is_some()
            && rb.user_ns.is_some()
            && a.own.user_ns.is_some()
            && b.own.user_ns.is_some()
            && tenants
                .iter()
                .all(|(x, y)| x.user_ns.is_some() && y.user_ns.is_some());
        let pick = |c: &CpuTimes| {
            if user_everywhere {
                c.user_ns.unwrap_or(0)
            } else {
                c.total_ns
            }
        };
        let root = pick(&rb).saturating_sub(pick(&ra)) as f64;
        let own = pick(&b.own).saturating_sub(pick(&a.own)) as f64;
        let ten: f64 = tenants
            .iter()
            .map(|(x, y)| pick(y).saturating_sub(pick(x)) as f64)
            .sum();
        Some(((root - own - ten) / 1e9 / secs).max(0.0))
    }

    fn next_repetition(&mut self, tenant: &str, probe: &str, cond: &StoreCondition) -> u32 {
        let r = self
            .repetitions
            .entry((tenant.to_string(), probe.to_string(), cond.to_string()))
            .or_insert(0);
        let v = *r;
        *r += 1;
        v
    }

    fn eta(&self) -> Option<Duration> {
        let ran = self.ran;
        if ran < 3 {
            return None;
        }
        let per = (self.clock.now() - self.started).as_secs_f64() / ran as f64;
        let left = self.planned.saturating_sub(self.done);
        Some(Duration::from_secs_f64(per * left as f64))
    }

    /// Runs one trial and records it. Returns true when it was disturbed.
    fn run_trial(&mut self, block: &Block, t: &ScheduledTrial, key: TrialKey) -> Result<bool> {
        let plan = self.plan;
        let cond = block.condition;
        let what = match t.what.probe() {
            Some(p) => plan.probes[p].id.clone(),
            None => "aggressor alone".to_string(),
        };
        let view = TrialView {
            n: self.done + 1,
            of: self.planned.max(self.done + 1),
            round: block.round,
            condition: self.condition_label(cond),
            what: what.clone(),
            eta_s: self.eta().map(|d| d.as_secs_f64()),
        };
        self.progress.trial_started(&view);
        if let Some(c) = cond.filter(|_| !t.what.switches_stressors()) {
            if self.per_trial {
                // No warm-up: the rate read at the stop covers the stressor's whole run,
                // which is then the trial with its start and stop.
                self.start_stressors(c);
            } else {
                self.restart_stressors(c);
            }
        }

        let started = self.clock.unix_ms();
        let t0 = self.clock.now();
        self.backend.noise_begin();
        self.marks.clear();
        let before = self.snapshot(cond.is_some());
        let usage_before = self.usage_mark();
        let (outcomes, modulation) = designs::for_trial(plan, t.what, cond).measure(self, cond)?;
        let usage_after = self.usage_mark();
        let after = self.snapshot(cond.is_some());
        let tenant_usage = self.tenant_usage(&usage_before, &usage_after);
        let noise = self.backend.noise_end();
        let elapsed = (self.clock.now() - t0).as_secs_f64();
        let outside = self.outside_load(&before, &after, elapsed);
        let stopped = match cond {
            Some(c) if self.per_trial => Some(self.stop_for_trial(c)),
            _ => None,
        };
        let common = TrialCommon {
            key,
            condition: self.store_condition(cond),
            started_at: Timestamp::from_unix_millis(started),
            ended_at: Timestamp::from_unix_millis(self.clock.unix_ms()),
            load_note: outside.map(|l| format!("outside load {l:.3} CPUs")),
            disturbed: outside
                .filter(|&l| l > plan.trial.max_outside_load)
                .map(|l| {
                    format!(
                        "load from outside the run: {l:.2} CPUs (limit {:.2})",
                        plan.trial.max_outside_load
                    )
                }),
            modulation,
            noise,
            limits: self.limits.clone(),
        };
        self.block_frozen_s += common.frozen_s();

        let solo = t.what == TrialWhat::Solo;
        let (mut reports, aggressor_dnr) = match (cond, &stopped) {
            (Some(c), Some(stopped)) => {
                if std::mem::take(&mut self.pressure_pending) {
                    self.record_stopped_pressure(c, block, stopped);
                }
                self.reports_at_stop(c, solo, stopped, &common)
            }
            (Some(c), None) => self.aggressor_reports(c, solo, &before, &after, &common),
            (None, _) => (Vec::new(), Vec::new()),
        };
        for (i, why) in &aggressor_dnr {
            self.running.insert(*i, Err(why.clone()));
            self.restart(*i);
        }
        let assigned: Vec<usize> = match &stopped {
            Some(s) => s.keys().copied().collect(),
            None => self.running.keys().copied().collect(),
        };

        // Records: one per victim (the first carries the aggressors' reports), one per
        // aggressor in a solo trial, and one per aggressor that did not respond.
        let mut records = self.victim_records(&outcomes, &what, &common, &mut reports);
        records.extend(self.aggressor_records(
            &assigned,
            solo,
            &what,
            &common,
            reports,
            &aggressor_dnr,
        ));
        let mut records = served::one_record_per_tenant(records);
        if let Some(first) = records.first_mut() {
            first.tenant_usage = tenant_usage;
        }
        let (status, reason) = self.commit(&records)?;
        self.ran += 1;
        self.done += 1;
        for (v, outcome) in &outcomes {
            if matches!(outcome, Err(TenantFailure::NoResponse(_))) {
                self.restart(*v);
            }
        }
        self.progress.trial_finished(TrialDone {
            view,
            status: status.to_string(),
            reason,
        });
        Ok(common.disturbed.is_some())
    }
}

/// A victim slot and what its probe returned.
type Outcome = (usize, Result<ProbeOutcome, TenantFailure>);

/// What a trial measured: the victims' outcomes and, under the on/off design, the switches.
type Measured = (Vec<Outcome>, Option<Modulation>);

/// Facts of a tenant, for callers that only need the list.
pub fn tenant_names(facts: &[TenantFacts]) -> Vec<String> {
    facts.iter().map(|f| f.name.clone()).collect()
}
