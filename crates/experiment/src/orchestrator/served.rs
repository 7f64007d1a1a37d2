//! The executor's part of [`crate::serving`]: services started in tenants for a probe's
//! trials, their addresses filled into the probe's parameters, and probes run inside or
//! beside tenants, all sites of a trial at once, each result stored against its tenant.

use std::collections::BTreeMap;

use isobench_store::{TrialRecord, TrialStatus};
use isobench_workloads::ParamValues;

use super::{Engine, Outcome};
use crate::backend::{CpuTimes, ProbeRun, TenantDriver, TenantFailure};
use crate::serving::{self, Keep, Site, LOOPBACK};

/// Services running and drivers beside tenants.
#[derive(Default)]
pub(super) struct Served {
    /// Per probe index, the services started for it.
    active: BTreeMap<usize, Active>,
    /// Drivers beside tenant slots, created when first needed.
    beside: BTreeMap<usize, Box<dyn TenantDriver>>,
}

/// The services of one probe.
struct Active {
    /// Endpoint name -> `ip:port` (services and reserved ports).
    endpoints: BTreeMap<String, String>,
    /// Services running: tenant slot, agent-side id.
    running: Vec<(usize, String)>,
    /// Services that did not start, with why.
    failed: BTreeMap<String, TenantFailure>,
    keep: Keep,
    /// A tenant running one of them was restarted: start them all again.
    stale: bool,
}

impl Engine<'_> {
    fn slot_of(&self, tenant: &str) -> Option<usize> {
        self.slots.iter().position(|s| s.name == tenant)
    }

    /// Starts the services of probe `p` unless they run already (all of them, none stale).
    fn ensure_services(&mut self, p: usize) {
        let plan = self.plan;
        let Some(sv) = plan.probes[p].serving.as_ref() else {
            return;
        };
        if let Some(a) = self.served.active.get(&p) {
            if !a.stale && a.failed.is_empty() {
                return;
            }
            self.stop_services_of(p);
        }
        let mut a = Active {
            endpoints: BTreeMap::new(),
            running: Vec::new(),
            failed: BTreeMap::new(),
            keep: sv.keep,
            stale: false,
        };
        // A reserved endpoint is bound by the probe itself, in the tenant of its first site:
        // on that tenant's service address (a guest's own, or loopback).
        let probe_host = sv
            .sites
            .first()
            .and_then(|s| self.slot_of(&s.tenant))
            .map_or_else(
                || LOOPBACK.to_string(),
                |slot| self.slots[slot].driver.service_host(),
            );
        for r in &sv.reserve {
            match self.backend.reserve_port() {
                Ok(port) => {
                    a.endpoints
                        .insert(r.clone(), format!("{probe_host}:{port}"));
                }
                Err(e) => {
                    a.failed.insert(
                        r.clone(),
                        TenantFailure::Failed(format!("reserving a loopback port: {e:#}")),
                    );
                }
            }
        }
        for s in &sv.services {
            let Some(slot) = self.slot_of(&s.tenant) else {
                a.failed.insert(
                    s.id.clone(),
                    TenantFailure::Failed(format!("no tenant {}", s.tenant)),
                );
                continue;
            };
            let kind = match self.filled(&s.kind, &a) {
                Ok(k) => k,
                Err(f) => {
                    a.failed.insert(s.id.clone(), f);
                    continue;
                }
            };
            if let Some(why) = self.revive(slot) {
                a.failed
                    .insert(s.id.clone(), TenantFailure::NoResponse(why));
                continue;
            }
            let id = format!("{}.{}", plan.probes[p].id, s.id);
            let bind = format!("{}:0", self.slots[slot].driver.service_host());
            match self.slots[slot].driver.start_service(&id, &kind, &bind) {
                Ok(addr) => {
                    a.endpoints.insert(s.id.clone(), addr);
                    a.running.push((slot, id));
                }
                Err(e) => {
                    let e = match e {
                        TenantFailure::NoResponse(w) => {
                            self.restart(slot);
                            TenantFailure::NoResponse(format!("service {}: {w}", s.id))
                        }
                        TenantFailure::Failed(w) => {
                            TenantFailure::Failed(format!("service {}: {w}", s.id))
                        }
                    };
                    a.failed.insert(s.id.clone(), e);
                }
            }
        }
        self.served.active.insert(p, a);
    }

    /// Starts the services of the served probes of `block` before its stressors start, so
    /// the servers are up when the misbehaviour begins (as in paper 001).
    pub(super) fn start_block_services(&mut self, block: &crate::schedule::Block) {
        let plan = self.plan;
        let mut ps: Vec<usize> = block
            .trials
            .iter()
            .filter_map(|t| match t.what {
                crate::schedule::TrialWhat::Probe(p) if plan.probes[p].serving.is_some() => Some(p),
                _ => None,
            })
            .collect();
        ps.dedup();
        for p in ps {
            self.ensure_services(p);
        }
    }

    /// `template` filled from the endpoints of `a`; a placeholder naming a service that did
    /// not start gives that service's failure.
    fn filled(&self, template: &str, a: &Active) -> Result<String, TenantFailure> {
        for name in serving::references(template) {
            if let Some(f) = a.failed.get(&name) {
                return Err(f.clone());
            }
        }
        serving::fill(template, &a.endpoints).map_err(TenantFailure::Failed)
    }

    /// Stops the services of probe `p`.
    fn stop_services_of(&mut self, p: usize) {
        let Some(a) = self.served.active.remove(&p) else {
            return;
        };
        for (slot, id) in a.running {
            if self.slots[slot].down.is_some() {
                continue;
            }
            if let Err(e) = self.slots[slot].driver.stop_service(&id) {
                // Gone with a restarted agent, or the agent is in trouble: noted, not fatal.
                if !a.stale {
                    let name = self.slots[slot].name.clone();
                    self.progress
                        .note(&format!("tenant {name}: stopping service {id}: {e}"));
                }
            }
        }
    }

    /// Stops the services kept for `keep` (at the end of a trial or a block).
    pub(super) fn stop_services_kept(&mut self, keep: Keep) {
        let ps: Vec<usize> = self
            .served
            .active
            .iter()
            .filter(|(_, a)| a.keep == keep)
            .map(|(p, _)| *p)
            .collect();
        for p in ps {
            self.stop_services_of(p);
        }
    }

    /// Tenant slot `slot` got a fresh agent: the services it ran are gone.
    pub(super) fn forget_services(&mut self, slot: usize) {
        for a in self.served.active.values_mut() {
            if a.running.iter().any(|(s, _)| *s == slot) {
                a.running.retain(|(s, _)| *s != slot);
                a.stale = true;
            }
        }
    }

    /// Stops every service and removes the places beside tenants; returns what failed.
    pub(super) fn served_teardown(&mut self) -> Vec<String> {
        let ps: Vec<usize> = self.served.active.keys().copied().collect();
        for p in ps {
            self.stop_services_of(p);
        }
        let mut errors = Vec::new();
        for (_, mut d) in std::mem::take(&mut self.served.beside) {
            if let Err(e) = d.teardown() {
                errors.push(format!("{}: {e:#}", d.name()));
            }
        }
        errors
    }

    /// CPU time of the drivers beside tenants (counted as the controller's own).
    pub(super) fn beside_cpu(&mut self) -> CpuTimes {
        let mut t = CpuTimes {
            total_ns: 0,
            user_ns: Some(0),
        };
        for d in self.served.beside.values_mut() {
            match d.cpu() {
                Some(c) => {
                    t.total_ns += c.total_ns;
                    t.user_ns = t.user_ns.zip(c.user_ns).map(|(a, b)| a + b);
                }
                None => t.user_ns = None,
            }
        }
        t
    }

    /// Probe `p` at every site of its [`serving::Serving`] at once for `budget`, after starting the
    /// services it needs; the outcomes by the tenant slot each site measures. A site beside a
    /// tenant whose load generator gets no good answer records the tenant as not answering
    /// (DNR), as paper 001 did when the client reported only errors.
    pub(super) fn served_probe(
        &mut self,
        p: usize,
        contended: bool,
        budget: std::time::Duration,
    ) -> Vec<Outcome> {
        let plan = self.plan;
        let probe = &plan.probes[p];
        let sv = probe.serving.as_ref().expect("a served probe");
        let timeout = budget + plan.trial.timeout;
        self.ensure_services(p);
        let mut outcomes: Vec<Outcome> = Vec::new();
        let mut runs: Vec<(usize, Site, ProbeRun)> = Vec::new();
        for site in &sv.sites {
            let Some(slot) = self.slot_of(&site.tenant) else {
                continue;
            };
            match self.site_run(p, slot, site, budget, timeout) {
                Ok(run) => runs.push((slot, site.at, run)),
                // Beside a tenant whose server did not start, the load generator would get
                // no answer: the tenant is DNR, as paper 001 recorded it.
                Err(TenantFailure::Failed(why)) if site.at == Site::Beside => outcomes.push((
                    slot,
                    Err(TenantFailure::NoResponse(format!(
                        "its server did not start: {why}"
                    ))),
                )),
                Err(f) => outcomes.push((slot, Err(f))),
            }
        }
        self.create_places_beside(&runs);
        let measured: Vec<usize> = runs.iter().map(|(s, _, _)| *s).collect();
        self.mark_victims(&measured, contended);
        let mut jobs: Vec<(usize, Site, &mut Box<dyn TenantDriver>, ProbeRun)> = Vec::new();
        let mut missing: Vec<Outcome> = Vec::new();
        {
            let mut inside: BTreeMap<usize, &mut Box<dyn TenantDriver>> = self
                .slots
                .iter_mut()
                .map(|s| (s.index, &mut s.driver))
                .collect();
            let mut beside: BTreeMap<usize, &mut Box<dyn TenantDriver>> = self
                .served
                .beside
                .iter_mut()
                .map(|(k, v)| (*k, v))
                .collect();
            for (slot, at, run) in runs {
                let d = match at {
                    Site::In => inside.remove(&slot),
                    Site::Beside => beside.remove(&slot),
                };
                match d {
                    Some(d) => jobs.push((slot, at, d, run)),
                    None => missing.push((
                        slot,
                        Err(TenantFailure::Failed(format!(
                            "nowhere to run {} {} tenant {}",
                            probe.id,
                            if at == Site::In { "in" } else { "beside" },
                            plan.tenants[slot].name
                        ))),
                    )),
                }
            }
            let results: Vec<(usize, Site, Result<_, TenantFailure>)> =
                std::thread::scope(|scope| {
                    let handles: Vec<_> = jobs
                        .into_iter()
                        .map(|(slot, at, d, run)| {
                            scope.spawn(move || (slot, at, d.run_probe(&run)))
                        })
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| h.join().expect("probe threads do not panic"))
                        .collect()
                });
            for (slot, at, r) in results {
                let r = match (at, r) {
                    (Site::Beside, Err(TenantFailure::Failed(why))) => {
                        Err(TenantFailure::NoResponse(format!(
                            "its server did not answer the load generator beside it: {why}"
                        )))
                    }
                    (_, r) => r,
                };
                outcomes.push((slot, r));
            }
        }
        outcomes.extend(missing);
        self.mark_victims(&measured, false);
        self.restart_places_beside(&outcomes);
        if sv.keep == Keep::Trial {
            self.stop_services_of(p);
        }
        outcomes.sort_by_key(|(v, _)| *v);
        outcomes
    }

    /// Creates the places beside tenants that `runs` need and that do not exist yet.
    fn create_places_beside(&mut self, runs: &[(usize, Site, ProbeRun)]) {
        let plan = self.plan;
        for (slot, at, _) in runs {
            if *at == Site::Beside && !self.served.beside.contains_key(slot) {
                match self.backend.beside(&plan.tenants[*slot]) {
                    Ok(d) => {
                        self.served.beside.insert(*slot, d);
                    }
                    Err(e) => self.progress.note(&format!(
                        "no place beside tenant {}: {e:#}",
                        plan.tenants[*slot].name
                    )),
                }
            }
        }
    }

    /// A place beside a tenant that stopped answering gets a fresh agent (or is dropped,
    /// to be created again when next needed).
    fn restart_places_beside(&mut self, outcomes: &[Outcome]) {
        let dead: Vec<usize> = outcomes
            .iter()
            .filter(|(_, r)| matches!(r, Err(TenantFailure::NoResponse(_))))
            .map(|(s, _)| *s)
            .collect();
        for s in dead {
            if let Some(d) = self.served.beside.get_mut(&s) {
                if d.restart().is_err() {
                    self.served.beside.remove(&s);
                }
            }
        }
    }

    /// The probe run of one site: the probe's parameters with the site's filled in.
    fn site_run(
        &mut self,
        p: usize,
        slot: usize,
        site: &serving::ProbeSite,
        budget: std::time::Duration,
        timeout: std::time::Duration,
    ) -> Result<ProbeRun, TenantFailure> {
        let plan = self.plan;
        let probe = &plan.probes[p];
        if site.at == Site::In {
            if let Some(why) = self.revive(slot) {
                return Err(TenantFailure::NoResponse(why));
            }
        }
        let a = self
            .served
            .active
            .get(&p)
            .expect("ensure_services inserts it");
        let specs = isobench_workloads::probe(&probe.name)
            .map(|w| w.params())
            .unwrap_or(&[]);
        let mut params: ParamValues = probe.params.clone();
        for (k, template) in &site.params {
            let text = self.filled(template, a)?;
            let v = match specs.iter().find(|s| s.name == k.as_str()) {
                Some(spec) => spec
                    .parse(&probe.name, &text)
                    .map_err(|e| TenantFailure::Failed(e.to_string()))?,
                None => serde_json::Value::from(text),
            };
            params.set(k, v);
        }
        let pt = &plan.tenants[slot];
        Ok(ProbeRun {
            name: probe.name.clone(),
            params,
            budget,
            // Beside a tenant, nothing is pinned: the place has no CPUs of its own.
            pin: (site.at == Site::In).then_some(pt.pin).flatten(),
            pin_peer: (site.at == Site::In).then_some(pt.pin_peer).flatten(),
            timeout,
            window: None,
        })
    }
}

/// A trial's records with one per tenant: a tenant measured at a site that also runs a
/// stressor (a misbehaving web server) keeps its measured record, which takes the
/// stressor's DNR when the site itself measured fine.
pub(super) fn one_record_per_tenant(records: Vec<TrialRecord>) -> Vec<TrialRecord> {
    let mut out: Vec<TrialRecord> = Vec::with_capacity(records.len());
    for r in records {
        match out.iter_mut().find(|o| o.tenant == r.tenant) {
            Some(first) => {
                if first.status == TrialStatus::Ok && matches!(r.status, TrialStatus::Dnr(_)) {
                    first.status = r.status;
                }
                first.stressor_reports.extend(r.stressor_reports);
            }
            None => out.push(r),
        }
    }
    out
}
