//! The aggressors' stressors: started per block (or per trial), stopped, revived when
//! their tenant went down, and what they delivered recorded as pressure facts.

use std::collections::BTreeMap;

use isobench_store::{Fact, StressorMode, StressorReport};

use super::records::TrialCommon;
use super::{Engine, Snap};
use crate::backend::{StressProgress, StressorRun, TenantFailure};
use crate::facts::PRESSURE_FACT;
use crate::scenario::Role;
use crate::schedule::{Block, TrialKey};

impl Engine<'_> {
    /// Starts each aggressor's own assignment under condition `c`; idle ones stay idle.
    pub(super) fn start_stressors(&mut self, c: usize) {
        self.running.clear();
        for i in 0..self.slots.len() {
            if self.slots[i].role != Role::Aggressor {
                continue;
            }
            if let Some(run) = self.stressor_run(c, i) {
                let r = self.start_one(i, &run);
                self.running.insert(i, r);
            }
        }
    }

    pub(super) fn start_one(&mut self, i: usize, run: &StressorRun) -> Result<(), String> {
        if let Some(why) = self.revive(i) {
            return Err(why);
        }
        match self.slots[i].driver.start_stressor(run) {
            Ok(()) => Ok(()),
            Err(e) => {
                let why = format!("{} did not start: {e}", run.name);
                self.restart_if_unresponsive(i, &e);
                Err(why)
            }
        }
    }

    /// Whether condition `c` runs a stressor whose work is known only once it is stopped,
    /// so that its stressors are started and stopped with each trial.
    pub(super) fn counts_at_stop(&self, c: usize) -> bool {
        (0..self.slots.len())
            .filter_map(|i| self.stressor_run(c, i))
            .any(|run| {
                isobench_workloads::stressor(&run.name)
                    .is_some_and(|s| s.counts_at_stop(&run.params).is_some())
            })
    }

    /// Stops the block's stressors; returns each one's own report, by tenant.
    pub(super) fn stop_stressors(&mut self) -> Vec<(String, isobench_workloads::StressReport)> {
        self.stop_stressors_by_slot()
            .into_iter()
            .filter_map(|(i, r)| Some((self.slots[i].name.clone(), r.ok()?)))
            .collect()
    }

    /// Stops condition `c`'s stressors at the end of a per-trial block's trial: each
    /// aggressor's stop report, or why it has none (it did not start, or did not stop), by
    /// slot.
    pub(super) fn stop_for_trial(
        &mut self,
        c: usize,
    ) -> BTreeMap<usize, Result<isobench_workloads::StressReport, String>> {
        let not_started: Vec<(usize, String)> = self
            .running
            .iter()
            .filter_map(|(&i, r)| r.clone().err().map(|why| (i, why)))
            .collect();
        let mut stopped: BTreeMap<usize, Result<isobench_workloads::StressReport, String>> = self
            .stop_stressors_by_slot()
            .into_iter()
            .map(|(i, r)| {
                let name = self.assignment(c, i).map_or("", |a| a.stressor.as_str());
                (i, r.map_err(|e| format!("{name}: {e}")))
            })
            .collect();
        stopped.extend(not_started.into_iter().map(|(i, why)| (i, Err(why))));
        stopped
    }

    /// Stops the running stressors; returns each one's report, or why it gave none, by slot.
    pub(super) fn stop_stressors_by_slot(
        &mut self,
    ) -> BTreeMap<usize, Result<isobench_workloads::StressReport, TenantFailure>> {
        let running: Vec<usize> = self.aggressors(true);
        let mut reports = BTreeMap::new();
        for i in running {
            let r = self.slots[i].driver.stop_stressor();
            if let Err(e) = &r {
                let name = &self.slots[i].name;
                self.progress
                    .note(&format!("tenant {name}: stopping its stressor: {e}"));
                self.restart_if_unresponsive(i, e);
            }
            reports.insert(i, r);
        }
        self.running.clear();
        reports
    }

    /// Tries to bring a down tenant back; returns why it is still down.
    pub(super) fn revive(&mut self, i: usize) -> Option<String> {
        self.slots[i].down.as_ref()?;
        self.restart(i);
        self.slots[i].down.clone()
    }

    /// Restarts slot `i`'s agent when `e` says it stopped answering: a request past its
    /// deadline (a probe that outlived its cancel) may still run there, and a fresh agent
    /// keeps every later request from being refused busy.
    pub(super) fn restart_if_unresponsive(&mut self, i: usize, e: &TenantFailure) {
        if matches!(e, TenantFailure::NoResponse(_)) {
            self.restart(i);
        }
    }

    pub(super) fn restart(&mut self, i: usize) {
        self.forget_services(i);
        let name = self.slots[i].name.clone();
        match self.slots[i].driver.restart() {
            Ok(()) => {
                self.slots[i].down = None;
                self.progress.note(&format!(
                    "tenant {name}: agent restarted after it stopped answering"
                ));
            }
            Err(e) => {
                let why = format!("tenant {name} is down: its agent could not be restarted: {e:#}");
                self.progress.note(&why);
                self.slots[i].down = Some(why);
            }
        }
    }

    /// Aggressors that died since the block started get the stressor of condition `c` back.
    pub(super) fn restart_stressors(&mut self, c: usize) {
        let down: Vec<usize> = self.aggressors(false);
        for i in down {
            if self.slots[i].down.is_none() {
                let run = self.stressor_run(c, i).expect("only assigned slots run");
                let r = self.start_one(i, &run);
                if r.is_ok() {
                    self.clock.sleep(self.plan.trial.warmup);
                }
                self.running.insert(i, r);
            }
        }
    }

    /// Records what the stressors stopped at the end of a per-trial block's first trial
    /// delivered, as [`Engine::record_pressure`] does for a whole block.
    pub(super) fn record_stopped_pressure(
        &mut self,
        c: usize,
        block: &Block,
        stopped: &BTreeMap<usize, Result<isobench_workloads::StressReport, String>>,
    ) {
        let label = self.condition_label(Some(c));
        let first = block.trials.first().map(|t| block.key(t));
        for (&i, r) in stopped {
            if let Ok(report) = r {
                let tenant = self.slots[i].name.clone();
                self.record_pressure(&label, &tenant, first, report.clone());
            }
        }
    }

    /// The own rates of the aggressors whose stressors were stopped at the end of a trial
    /// under condition `c` (`stopped`, by slot), read from their stop reports: operations
    /// over the running time of the run, which spans the trial and its warm-up.
    pub(super) fn reports_at_stop(
        &self,
        c: usize,
        solo: bool,
        stopped: &BTreeMap<usize, Result<isobench_workloads::StressReport, String>>,
        common: &TrialCommon,
    ) -> (Vec<StressorReport>, Vec<(usize, String)>) {
        let mut reports = Vec::new();
        let mut dnr = Vec::new();
        for (&i, r) in stopped {
            match r {
                Ok(r) => {
                    // The whole run, from its start (no operations, no time) to its stop.
                    let end = StressProgress {
                        ops: r.ops,
                        elapsed_s: r.elapsed_s,
                    };
                    let rate = end
                        .rate_since_running(&StressProgress::default(), common.frozen_s())
                        .unwrap_or(0.0);
                    reports.push(self.stressor_report(c, i, solo, r.ops as f64, rate));
                }
                Err(why) => dnr.push((i, why.clone())),
            }
        }
        (reports, dnr)
    }

    /// Aggressor slot `i`'s own rate under condition `c` in one trial.
    pub(super) fn stressor_report(
        &self,
        c: usize,
        i: usize,
        solo: bool,
        ops: f64,
        ops_per_sec: f64,
    ) -> StressorReport {
        let run = self.assignment(c, i).expect("only assigned slots run");
        StressorReport {
            tenant: self.slots[i].name.clone(),
            stressor: run.stressor.clone(),
            intensity: run.intensity,
            mode: if solo {
                StressorMode::Alone
            } else {
                StressorMode::Contended
            },
            ops,
            ops_per_sec,
        }
    }

    /// Records what an aggressor's stressor delivered over a block, in physical units
    /// (fact scope [`PRESSURE_FACT`], one per condition, tenant and block), with its rates
    /// scaled to the time it was not frozen.
    pub(super) fn record_pressure(
        &mut self,
        condition: &str,
        tenant: &str,
        first: Option<TrialKey>,
        report: isobench_workloads::StressReport,
    ) {
        let running = (report.elapsed_s - self.block_frozen_s).max(0.0);
        let scale = if running > 0.05 * report.elapsed_s && running > 0.0 {
            report.elapsed_s / running
        } else {
            1.0
        };
        let pressure: Vec<serde_json::Value> = report
            .pressure
            .iter()
            .map(|p| {
                let per_time = !matches!(p.unit.as_str(), "B" | "CPUs");
                serde_json::json!({
                    "name": p.name,
                    "unit": p.unit,
                    "value": if per_time { p.value * scale } else { p.value },
                })
            })
            .collect();
        let key = match first {
            Some(k) => format!("{condition}/{tenant}/{}.{}", k.round, k.block),
            None => format!("{condition}/{tenant}"),
        };
        let fact = Fact {
            scope: PRESSURE_FACT.to_string(),
            key,
            value: serde_json::json!({
                "condition": condition,
                "tenant": tenant,
                "elapsed_s": report.elapsed_s,
                "frozen_s": self.block_frozen_s,
                "pressure": pressure,
            }),
        };
        if let Err(e) = self.store.record_fact(&self.run, &fact) {
            self.progress
                .note(&format!("recording the pressure {tenant} delivered: {e}"));
        }
    }

    /// The own rates of the aggressors running a stressor over the trial under condition `c`,
    /// and those that did not respond, with why.
    pub(super) fn aggressor_reports(
        &self,
        c: usize,
        solo: bool,
        before: &Snap,
        after: &Snap,
        common: &TrialCommon,
    ) -> (Vec<StressorReport>, Vec<(usize, String)>) {
        let mut reports = Vec::new();
        let mut dnr = Vec::new();
        for &i in self.running.keys() {
            let run = self.assignment(c, i).expect("only assigned slots run");
            match (&before.stress[i], &after.stress[i]) {
                (Some(Ok(a)), Some(Ok(b))) => {
                    // Frozen time is no time to work: the rate counts the running time
                    // between the two readings (which enclose the trial and its set-up).
                    let rate = b.rate_since_running(a, common.frozen_s()).unwrap_or(0.0);
                    let ops = b.ops.saturating_sub(a.ops) as f64;
                    reports.push(self.stressor_report(c, i, solo, ops, rate));
                }
                (Some(Err(e)), _) | (_, Some(Err(e))) => {
                    dnr.push((i, format!("{}: {e}", run.stressor)));
                }
                _ => {
                    let why = match self.running.get(&i) {
                        Some(Err(w)) => w.clone(),
                        _ => "stressor not running".to_string(),
                    };
                    dnr.push((i, why));
                }
            }
        }
        (reports, dnr)
    }
}
