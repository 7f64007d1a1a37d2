//! Calibration of services: a service probe whose `rate` is 0 asks for the highest rate at
//! which it meets its SLO, times its `share`. The engine finds that rate once per run,
//! before the first trial, in the first victim with the neighbours idle, records it as a run
//! fact, and every trial of the probe then holds it, so every episode of a run and its
//! resumption measure the same load.

use std::time::Duration;

use anyhow::{anyhow, Result};
use isobench_store::{Fact, LoadedRun};
use serde::{Deserialize, Serialize};

use super::Engine;
use crate::backend::ProbeRun;
use crate::plan::PlannedProbe;
use crate::scenario::Role;
use isobench_workloads::ParamValues;

/// Fact key of the calibrated rates.
pub const SERVICE_FACT: &str = "service_calibration";

/// How long the service holds its calibrated rate after the search, so the run sees it
/// reached.
const HOLD: Duration = Duration::from_secs(2);

/// What the search found for one probe.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Calibrated {
    probe: String,
    tenant: String,
    max_rps: f64,
    target_rps: f64,
}

/// True when probe `p` is a service that asks for its rate to be calibrated.
pub(super) fn asks_calibration(p: &PlannedProbe) -> bool {
    p.params.0.get("rate").and_then(|v| v.as_f64()) == Some(0.0)
        && isobench_workloads::probe(&p.name)
            .is_some_and(|w| w.metrics_for(&p.params).iter().any(|m| m.name == "max_rps"))
}

fn metric(o: &crate::backend::ProbeOutcome, name: &str) -> Option<f64> {
    o.metrics
        .iter()
        .find(|m| m.name == name)
        .map(|m| m.value)
        .filter(|v| v.is_finite())
}

impl Engine<'_> {
    /// Probe `p`'s parameters as its trials run it: a calibrated service's with the rate the
    /// run holds (a service left at `rate = 0` would search for its rate again in every
    /// trial, under whatever load the trial has, and hold it only for what is left).
    pub(super) fn trial_params(&self, p: usize) -> ParamValues {
        let mut params = self.plan.probes[p].params.clone();
        if let Some(rate) = self.service_rates.get(&p) {
            params.set("rate", serde_json::json!(rate.round().max(1.0) as u64));
        }
        params
    }

    /// Calibrates every service probe that asks for it, or reads the rates back from the
    /// run's facts on resume. A service that cannot be reached fails the run with why; one
    /// that meets its SLO at no rate at all holds the lowest rate the search tried, and says
    /// so.
    pub(super) fn calibrate_services(&mut self, loaded: &LoadedRun) -> Result<()> {
        let plan = self.plan;
        let wanted: Vec<usize> = (0..plan.probes.len())
            .filter(|&p| asks_calibration(&plan.probes[p]))
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let mut found: Vec<Calibrated> = loaded
            .facts
            .iter()
            .find(|f| f.scope == "run" && f.key == SERVICE_FACT)
            .and_then(|f| serde_json::from_value(f.value.clone()).ok())
            .unwrap_or_default();
        let victim = self
            .slots
            .iter()
            .position(|s| s.role == Role::Victim)
            .ok_or_else(|| anyhow!("a service needs a victim tenant to run in"))?;
        for p in wanted {
            let probe = &plan.probes[p];
            if let Some(c) = found.iter().find(|c| c.probe == probe.id) {
                self.service_rates.insert(p, c.target_rps);
                continue;
            }
            let search = probe
                .params
                .0
                .get("calibrate_s")
                .and_then(|v| v.as_f64())
                .filter(|s| s.is_finite() && *s > 0.0)
                .map_or(Duration::from_secs(10), Duration::from_secs_f64);
            let pt = &plan.tenants[victim];
            let run = ProbeRun {
                name: probe.name.clone(),
                params: probe.params.clone(),
                budget: search + HOLD,
                pin: pt.pin,
                pin_peer: pt.pin_peer,
                timeout: search + HOLD + plan.trial.timeout,
                window: None,
            };
            let tenant = self.slots[victim].name.clone();
            self.progress.note(&format!(
                "calibration: {} in {tenant}, the highest rate within its SLO ({:.0} s)",
                probe.id,
                search.as_secs_f64()
            ));
            let o = self.slots[victim].driver.run_probe(&run).map_err(|e| {
                anyhow!(
                    "service {}: its calibration in tenant {tenant} failed: {e}",
                    probe.id
                )
            })?;
            let (Some(max_rps), Some(target_rps)) =
                (metric(&o, "max_rps"), metric(&o, "target_rps"))
            else {
                return Err(anyhow!(
                    "service {}: its calibration in tenant {tenant} reported no max_rps and \
                     target_rps",
                    probe.id
                ));
            };
            self.progress.note(&format!(
                "calibration: {} meets its SLO up to {max_rps:.0} requests/s; it holds \
                 {target_rps:.0}/s",
                probe.id
            ));
            self.service_rates.insert(p, target_rps);
            found.push(Calibrated {
                probe: probe.id.clone(),
                tenant,
                max_rps,
                target_rps,
            });
        }
        self.store.record_fact(
            &self.run,
            &Fact {
                scope: "run".into(),
                key: SERVICE_FACT.into(),
                value: serde_json::to_value(&found).unwrap_or_default(),
            },
        )?;
        Ok(())
    }
}
