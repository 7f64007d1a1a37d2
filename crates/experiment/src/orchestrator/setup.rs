//! Before the first trial: the tenants are created and recorded, their memory checked, every
//! probe run once to warm it, and the on/off design sized from a pilot run.

use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, Result};
use isobench_store::{Fact, LoadedRun, TenantRecord, WindowRecord};
use serde_json::json;

use super::records::window_records;
use super::{service, Engine, Slot, PILOT_WINDOW};
use crate::backend::ProbeRun;
use crate::facts::TUNING_FACT;
use crate::memcheck;
use crate::onoff::{Tuning, TuningLimits};
use crate::plan::{Design, Plan};
use crate::scenario::Role;

impl Engine<'_> {
    pub(super) fn create_tenants(&mut self, loaded: &LoadedRun) -> Result<()> {
        let plan = self.plan;
        self.backend
            .preflight(&plan.tenants)
            .context("checking the tenants before creating any")?;
        let mut facts = Vec::new();
        for (index, t) in plan.tenants.iter().enumerate() {
            let driver = self
                .backend
                .create_tenant(t)
                .with_context(|| format!("creating tenant {}", t.name))?;
            let f = driver.facts();
            if !loaded.tenants.iter().any(|x| x.name == t.name) {
                self.store.add_tenant(
                    &self.run,
                    &TenantRecord {
                        name: t.name.clone(),
                        role: t.role,
                        platform: plan.platform.name().to_string(),
                        limits: json!({
                            "applied": f.limits,
                            "requested": t.limits.to_string(),
                            "notes": f.notes,
                            "cpus": t.cpus,
                            "pin": t.pin,
                            "pin_peer": t.pin_peer,
                            "memory_need": t.mem_need,
                        }),
                    },
                )?;
            }
            self.store.record_fact(
                &self.run,
                &Fact {
                    scope: t.name.clone(),
                    key: "tenant".into(),
                    value: serde_json::to_value(&f).unwrap_or_default(),
                },
            )?;
            facts.push(f);
            self.slots.push(Slot {
                index,
                name: t.name.clone(),
                role: t.role,
                driver,
                down: None,
            });
        }
        self.progress.tenants_ready(&facts);
        Ok(())
    }

    /// Returns a refusal when a tenant cannot hold its workloads' memory.
    pub(super) fn memory_check(&mut self) -> Result<Option<String>> {
        if !self.plan.platform.capabilities().exec {
            // The check is a process of its own beside the agent, so the kernel can kill it
            // alone; a platform that starts nothing but the agent (a guest) cannot run it.
            // A guest's memory is its own, held by its kernel.
            let why = format!(
                "memory check not run: the {} platform starts no process in a tenant besides \
                 its agent (a guest's memory is its own: its kernel holds it)",
                self.plan.platform
            );
            self.progress.note(&why);
            for i in 0..self.slots.len() {
                let name = self.slots[i].name.clone();
                self.store.record_fact(
                    &self.run,
                    &Fact {
                        scope: name,
                        key: "memory_check".into(),
                        value: serde_json::json!({ "skipped": why }),
                    },
                )?;
            }
            return Ok(None);
        }
        let timeout = self.plan.trial.timeout.max(Duration::from_secs(30));
        for i in 0..self.slots.len() {
            let need = self.plan.tenants[i].mem_need;
            let name = self.slots[i].name.clone();
            let mut attempt = 0;
            loop {
                attempt += 1;
                let check = match self.slots[i].driver.memory_check(need, timeout) {
                    Ok(c) => c,
                    Err(e) => crate::backend::MemCheck {
                        wanted: need,
                        touched: 0,
                        base_ns: 0.0,
                        jump_ns: None,
                        knee: None,
                        stopped: Some(e.to_string()),
                    },
                };
                self.progress.memory_checked(&name, &check);
                self.store.record_fact(
                    &self.run,
                    &Fact {
                        scope: name.clone(),
                        key: "memory_check".into(),
                        value: serde_json::to_value(&check).unwrap_or_default(),
                    },
                )?;
                if check.ok() {
                    break;
                }
                let why = memcheck::explain(&name, &check);
                if attempt >= self.options.memcheck_attempts {
                    return Ok(Some(format!("refused before the first trial: {why}")));
                }
                self.progress.waiting(&why, self.options.memcheck_wait);
                self.clock.sleep(self.options.memcheck_wait);
                if self.stop.load(Ordering::SeqCst) {
                    // Not a refusal: the caller ends the run as interrupted.
                    return Ok(None);
                }
                if let Err(e) = self.slots[i].driver.restart() {
                    return Ok(Some(format!(
                        "tenant {name}: its agent did not come back after the memory check: {e:#}"
                    )));
                }
            }
        }
        Ok(None)
    }

    /// One discarded run of every probe in every victim before the first trial: first runs
    /// pay for things later runs do not (the cache-size sweep, page faults on fresh buffers,
    /// files created), and a probe that cannot run at all shows up now, not in every trial.
    pub(super) fn calibrate(&mut self) -> Result<()> {
        let plan = self.plan;
        let mut facts = Vec::new();
        for (p, probe) in plan.probes.iter().enumerate() {
            if service::asks_calibration(probe) {
                // Its own calibration, next, pays the first-run costs.
                continue;
            }
            if probe.serving.is_some() {
                // A short run: services started and reached, first-run costs paid.
                let budget = plan.trial.duration.min(Duration::from_millis(500));
                for (i, r) in self.served_probe(p, false, budget) {
                    let name = self.slots[i].name.clone();
                    facts.push(match r {
                        Ok(o) => json!({"tenant": name, "probe": probe.id, "params": o.params}),
                        Err(e) => {
                            self.progress.note(&format!(
                                "calibration: probe {} for tenant {name}: {e}",
                                probe.id
                            ));
                            self.restart_if_unresponsive(i, &e);
                            json!({"tenant": name, "probe": probe.id, "error": e.to_string()})
                        }
                    });
                }
                continue;
            }
            for i in 0..self.slots.len() {
                if self.slots[i].role != Role::Victim {
                    continue;
                }
                let run = probe_run(plan, p, i, plan.trial.duration, None);
                let t0 = self.clock.now();
                let r = self.slots[i].driver.run_probe(&run);
                let secs = (self.clock.now() - t0).as_secs_f64();
                let name = self.slots[i].name.clone();
                match r {
                    Ok(o) => facts.push(json!({
                        "tenant": name, "probe": probe.id, "secs": secs, "params": o.params,
                    })),
                    Err(e) => {
                        self.progress.note(&format!(
                            "calibration: probe {} in tenant {name}: {e}",
                            probe.id
                        ));
                        facts.push(json!({
                            "tenant": name, "probe": probe.id, "secs": secs, "error": e.to_string(),
                        }));
                        self.restart_if_unresponsive(i, &e);
                    }
                }
            }
        }
        self.store.record_fact(
            &self.run,
            &Fact {
                scope: "run".into(),
                key: "calibration".into(),
                value: json!(facts),
            },
        )?;
        Ok(())
    }

    /// Sizes the on/off design of every windowed probe from a pilot run with the neighbours
    /// idle ([`crate::onoff::tune`]), or reads the sizes back from the run's facts on resume,
    /// so a resumed run measures as it started.
    pub(super) fn pilot(&mut self, loaded: &LoadedRun) -> Result<()> {
        let plan = self.plan;
        let wanted: Vec<usize> = (0..plan.probes.len())
            .filter(|&p| (0..plan.conditions.len()).any(|c| plan.design(p, c) == Design::OnOff))
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        if let Some(f) = loaded
            .facts
            .iter()
            .find(|f| f.scope == "run" && f.key == TUNING_FACT)
        {
            if let Ok(ts) = serde_json::from_value::<Vec<Tuning>>(f.value.clone()) {
                for t in ts {
                    if let Some(p) = plan.probes.iter().position(|x| x.id == t.probe) {
                        self.tuning.insert(p, t);
                    }
                }
            }
        }
        let limits = TuningLimits {
            target: plan.repetitions.ci_half_width,
            z: isobench_stats::normal_quantile(0.5 + plan.repetitions.confidence / 2.0),
            min_trial: Duration::from_secs(1).min(plan.trial.onoff_max),
            max_trial: plan.trial.onoff_max,
            ..TuningLimits::default()
        };
        let fallback = (
            plan.trial.window.unwrap_or(Duration::from_millis(20)),
            plan.trial.period.unwrap_or(Duration::from_millis(200)),
        );
        let victim = self.slots.iter().position(|s| s.role == Role::Victim);
        for p in wanted {
            if self.tuning.contains_key(&p) {
                continue;
            }
            let probe = &plan.probes[p];
            let mut series: Vec<Vec<WindowRecord>> = Vec::new();
            if let (Some(v), true) = (victim, plan.trial.pilot > Duration::ZERO) {
                let mut run = probe_run(plan, p, v, plan.trial.pilot, Some(PILOT_WINDOW));
                run.params = self.trial_params(p);
                self.progress.note(&format!(
                    "pilot: {} (noise and its correlation time)",
                    probe.id
                ));
                match self.slots[v].driver.run_probe(&run) {
                    Ok(o) => {
                        for m in &o.metrics {
                            if !plan.tracks(&probe.id, &m.name) {
                                continue;
                            }
                            if let Some(ws) = &m.series {
                                series.push(window_records(ws));
                            }
                        }
                    }
                    Err(e) => {
                        self.progress.note(&format!(
                            "pilot of {} failed ({e}); defaults used",
                            probe.id
                        ));
                        self.restart_if_unresponsive(v, &e);
                    }
                }
            }
            // The metric that needs the longest trial decides.
            let mut best: Option<Tuning> = None;
            for s in &series {
                let t = crate::onoff::tune(&probe.id, s, &limits, fallback);
                if best
                    .as_ref()
                    .is_none_or(|b| (t.trial, t.cycles_needed) > (b.trial, b.cycles_needed))
                {
                    best = Some(t);
                }
            }
            let mut t =
                best.unwrap_or_else(|| crate::onoff::tune(&probe.id, &[], &limits, fallback));
            if let Some(w) = plan.trial.window {
                t.window = w;
                t.guard = w.max(limits.min_guard);
                t.why.push_str("; window set by the scenario");
            }
            if let Some(per) = plan.trial.period {
                t.period = per;
                t.why.push_str("; period set by the scenario");
            }
            self.progress.note(&format!(
                "on/off {}: windows of {} ms, cycles of {} ms, trials of {:.1} s ({})",
                probe.id,
                t.window.as_millis(),
                t.period.as_millis(),
                t.trial.as_secs_f64(),
                t.why
            ));
            self.tuning.insert(p, t);
        }
        let all: Vec<&Tuning> = self.tuning.values().collect();
        self.store.record_fact(
            &self.run,
            &Fact {
                scope: "run".into(),
                key: TUNING_FACT.into(),
                value: serde_json::to_value(&all).unwrap_or_default(),
            },
        )?;
        Ok(())
    }
}

/// A run of probe `p` in tenant `tenant`, pinned as the plan pins it, for `budget` and the
/// plan's grace after it.
fn probe_run(
    plan: &Plan,
    p: usize,
    tenant: usize,
    budget: Duration,
    window: Option<Duration>,
) -> ProbeRun {
    let probe = &plan.probes[p];
    let pt = &plan.tenants[tenant];
    ProbeRun {
        name: probe.name.clone(),
        params: probe.params.clone(),
        budget,
        pin: pt.pin,
        pin_peer: pt.pin_peer,
        timeout: budget + plan.trial.timeout,
        window,
    }
}
