//! Trial designs: how one trial is measured. Each is a strategy behind [`TrialDesign`],
//! chosen by [`for_trial`] from what the plan says of the trial's probe and condition.
//! [`Engine`] is the loop around them: rounds and blocks, the stressors' starts and
//! restarts, the snapshots that judge a trial disturbed, and the records it commits, the
//! same whatever the design.

use std::time::Duration;

use anyhow::Result;
use isobench_store::{Modulation, Switch};

use super::{Engine, Measured, Outcome};
use crate::backend::{ProbeRun, TenantDriver, TenantFailure};
use crate::kinds::protection::ProtectionSettings;
use crate::onoff::Tuning;
use crate::plan::{Design, Plan};
use crate::schedule::TrialWhat;
use crate::scheduled::{Entry, Spec};

/// How one trial is measured, once the condition's stressors run.
pub(super) trait TrialDesign {
    /// Measures the trial under condition `cond` (`None`: the baseline, no aggressor
    /// runs): the victims' outcomes in slot order and, when the design switches the
    /// aggressors, the switches.
    fn measure(&self, e: &mut Engine<'_>, cond: Option<usize>) -> Result<Measured>;
}

/// The design of a trial of `what` under condition `cond`, from the plan.
pub(super) fn for_trial(plan: &Plan, what: TrialWhat, cond: Option<usize>) -> Box<dyn TrialDesign> {
    match what {
        TrialWhat::Solo => Box::new(Solo),
        TrialWhat::Scheduled(p) => Box::new(Scheduled { p }),
        TrialWhat::Episode(p) => Box::new(Episode { p }),
        TrialWhat::Probe(p) if plan.probes[p].serving.is_some() => Box::new(Served { p }),
        TrialWhat::Probe(p) => match cond {
            Some(c) if plan.design(p, c) == Design::OnOff => Box::new(OnOff { p, c }),
            _ => Box::new(Whole { p }),
        },
    }
}

/// The aggressors alone for the plan's solo time; no probe runs.
struct Solo;

impl TrialDesign for Solo {
    fn measure(&self, e: &mut Engine<'_>, _: Option<usize>) -> Result<Measured> {
        e.clock.sleep(e.plan.trial.solo);
        Ok((Vec::new(), None))
    }
}

/// Probe `p` run from end to end in every victim at once, the aggressors (if any) running
/// throughout: one half of a pair, or a baseline.
struct Whole {
    p: usize,
}

impl TrialDesign for Whole {
    fn measure(&self, e: &mut Engine<'_>, cond: Option<usize>) -> Result<Measured> {
        let (p, contended) = (self.p, cond.is_some());
        let plan = e.plan;
        let probe = &plan.probes[p];
        let budget = plan.trial.duration;
        let timeout = budget + plan.trial.timeout;
        let params = e.trial_params(p);
        let window = cond
            .and_then(|c| plan.conditions[c].window)
            .filter(|_| probe.windowed);
        let mut outcomes: Vec<Outcome> = Vec::new();
        let victims: Vec<usize> = e.victims();
        for &v in &victims {
            if let Some(why) = e.revive(v) {
                outcomes.push((v, Err(TenantFailure::NoResponse(why))));
            }
        }
        let runs: Vec<(usize, ProbeRun)> = victims
            .iter()
            .filter(|&&v| e.slots[v].down.is_none())
            .map(|&v| {
                let pt = &plan.tenants[v];
                (
                    v,
                    ProbeRun {
                        name: probe.name.clone(),
                        params: params.clone(),
                        budget,
                        pin: pt.pin,
                        pin_peer: pt.pin_peer,
                        timeout,
                        window,
                    },
                )
            })
            .collect();
        let measured: Vec<usize> = runs.iter().map(|(v, _)| *v).collect();
        e.mark_victims(&measured, contended);
        let mut drivers: Vec<(usize, &mut Box<dyn TenantDriver>)> = e
            .slots
            .iter_mut()
            .filter(|s| runs.iter().any(|(v, _)| *v == s.index))
            .map(|s| (s.index, &mut s.driver))
            .collect();
        if drivers.len() == 1 {
            let (v, d) = drivers.pop().expect("one driver");
            let run = &runs.iter().find(|(i, _)| *i == v).expect("its run").1;
            outcomes.push((v, d.run_probe(run)));
        } else {
            let results: Vec<Outcome> = std::thread::scope(|scope| {
                let handles: Vec<_> = drivers
                    .into_iter()
                    .map(|(v, d)| {
                        let run = runs
                            .iter()
                            .find(|(i, _)| *i == v)
                            .expect("its run")
                            .1
                            .clone();
                        scope.spawn(move || (v, d.run_probe(&run)))
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("probe threads do not panic"))
                    .collect()
            });
            outcomes.extend(results);
        }
        e.mark_victims(&measured, false);
        outcomes.sort_by_key(|(v, _)| *v);
        Ok((outcomes, None))
    }
}

/// Probe `p` under the on/off design: the victims measure in windows while every aggressor
/// of condition `c` is frozen and thawed with the tuned period.
struct OnOff {
    p: usize,
    c: usize,
}

impl TrialDesign for OnOff {
    fn measure(&self, e: &mut Engine<'_>, _: Option<usize>) -> Result<Measured> {
        let (p, c) = (self.p, self.c);
        let plan = e.plan;
        let probe = &plan.probes[p];
        let t = e.tuning.get(&p).cloned().unwrap_or_else(|| Tuning {
            probe: probe.id.clone(),
            window: Duration::from_millis(20),
            period: Duration::from_millis(200),
            guard: Duration::from_millis(20),
            trial: plan.trial.onoff_max.min(Duration::from_secs(3)),
            window_cv: None,
            lag1: None,
            cycle_sd: None,
            cycles_needed: None,
            why: "no pilot".into(),
        });
        let mut t = t;
        if let Some(len) = e.next_len.get(&(p, c)) {
            t.trial = *len;
        }
        let mut outcomes = Vec::new();
        let victims: Vec<usize> = e.victims();
        let mut started = Vec::new();
        for &v in &victims {
            if let Some(why) = e.revive(v) {
                outcomes.push((v, Err(TenantFailure::NoResponse(why))));
                continue;
            }
            let pt = &plan.tenants[v];
            let run = ProbeRun {
                name: probe.name.clone(),
                params: e.trial_params(p),
                budget: t.trial,
                pin: pt.pin,
                pin_peer: pt.pin_peer,
                timeout: t.trial + plan.trial.timeout,
                window: Some(t.window),
            };
            match e.slots[v].driver.begin_probe(&run) {
                Ok(()) => started.push(v),
                Err(e) => outcomes.push((v, Err(e))),
            }
        }
        let aggressors: Vec<usize> = e.aggressors(true);
        let start_ns = e.clock.mono_ns();
        e.mark_victims(&started, true);
        let half = t.period / 2;
        let mut next = e.clock.now() + half;
        let mut on = true;
        let mut switches = Vec::new();
        let mut failure: Option<String> = None;
        let deadline = e.clock.now() + t.trial + plan.trial.timeout;
        loop {
            if started.iter().all(|&v| e.slots[v].driver.probe_finished())
                || e.clock.now() > deadline
            {
                break;
            }
            let now = e.clock.now();
            if now >= next && failure.is_none() {
                let requested_ns = e.clock.mono_ns();
                for &a in &aggressors {
                    if let Err(e) = e.slots[a].driver.set_frozen(on) {
                        failure = Some(e.to_string());
                    }
                }
                on = !on;
                switches.push(Switch {
                    requested_ns,
                    done_ns: e.clock.mono_ns(),
                    on,
                });
                e.mark_victims(&started, on);
                next += half;
                continue;
            }
            let wait = if failure.is_none() {
                next.saturating_sub(now)
            } else {
                Duration::from_millis(5)
            };
            e.clock.sleep(wait.min(Duration::from_millis(2)));
        }
        e.mark_victims(&started, on);
        if !on {
            let requested_ns = e.clock.mono_ns();
            for &a in &aggressors {
                if let Err(e) = e.slots[a].driver.set_frozen(false) {
                    failure.get_or_insert(e.to_string());
                }
            }
            switches.push(Switch {
                requested_ns,
                done_ns: e.clock.mono_ns(),
                on: true,
            });
        }
        for v in started {
            let r = e.slots[v].driver.end_probe();
            let r = match (&failure, r) {
                (Some(f), Ok(_)) => Err(TenantFailure::Failed(format!(
                    "the aggressors could not be switched: {f}"
                ))),
                (_, r) => r,
            };
            outcomes.push((v, r));
        }
        outcomes.sort_by_key(|(v, _)| *v);
        let modulation = Modulation {
            period_ns: t.period.as_nanos() as u64,
            guard_ns: t.guard.as_nanos() as u64,
            initially_on: true,
            start_ns,
            end_ns: e.clock.mono_ns(),
            switches,
        };
        Ok((outcomes, Some(modulation)))
    }
}

/// Probe `p` served by a service in a tenant, run at every site of the trial at once.
struct Served {
    p: usize,
}

impl TrialDesign for Served {
    fn measure(&self, e: &mut Engine<'_>, cond: Option<usize>) -> Result<Measured> {
        let duration = e.plan.trial.duration;
        Ok((e.served_probe(self.p, cond.is_some(), duration), None))
    }
}

/// Probe `p` under the timeline kind's schedule: the neighbours start, stop and change on
/// their timeline while the victim measures; the timeline is kept for the victim's record.
struct Scheduled {
    p: usize,
}

impl TrialDesign for Scheduled {
    fn measure(&self, e: &mut Engine<'_>, _: Option<usize>) -> Result<Measured> {
        let params = e.trial_params(self.p);
        let mut drivers: Vec<&mut dyn TenantDriver> = e
            .slots
            .iter_mut()
            .map(|s| s.driver.as_mut() as &mut dyn TenantDriver)
            .collect();
        let (outcome, timeline) =
            crate::scheduled::measure(e.plan, self.p, params, e.clock, &mut drivers)?;
        e.timeline = Some(timeline);
        Ok((vec![outcome], None))
    }
}

/// Service probe `p` holds its load for one episode of the protection kind while the
/// stressors of the trial's condition start after the stable period and stop before the
/// recovery; the timeline of their switches is kept for the victim's record.
struct Episode {
    p: usize,
}

impl TrialDesign for Episode {
    fn measure(&self, e: &mut Engine<'_>, cond: Option<usize>) -> Result<Measured> {
        let plan = e.plan;
        let set = ProtectionSettings::of(&plan.settings)
            .ok_or_else(|| anyhow::anyhow!("the plan of this run has no [protection] settings"))?;
        let c = cond.ok_or_else(|| anyhow::anyhow!("an episode needs an aggressor"))?;
        let victim = plan
            .tenants
            .iter()
            .position(|t| t.name == set.victim)
            .ok_or_else(|| anyhow::anyhow!("the plan lacks the victim tenant {}", set.victim))?;
        if let Some(why) = e.revive(victim) {
            return Ok((vec![(victim, Err(TenantFailure::NoResponse(why)))], None));
        }
        let probe = &plan.probes[self.p];
        let vt = &plan.tenants[victim];
        let params = e.trial_params(self.p);
        let start = set.stable;
        let stop = set.stable + set.aggressor;
        let entries: Vec<Entry> = (0..e.slots.len())
            .filter_map(|i| {
                let run = e.stressor_run(c, i)?;
                Some(Entry {
                    tenant: i,
                    run,
                    start,
                    stop,
                })
            })
            .collect();
        let spec = Spec {
            victim,
            probe: ProbeRun {
                name: probe.name.clone(),
                params,
                budget: set.length(),
                pin: vt.pin,
                pin_peer: vt.pin_peer,
                timeout: set.length() + plan.trial.timeout,
                window: Some(set.window),
            },
            entries,
            cpu_every: Duration::from_secs(1),
        };
        e.mark_victims(&[victim], false);
        let mut drivers: Vec<&mut dyn TenantDriver> = e
            .slots
            .iter_mut()
            .map(|s| s.driver.as_mut() as &mut dyn TenantDriver)
            .collect();
        let out = crate::scheduled::run(e.clock, &mut drivers, &spec);
        e.timeline = Some(out.timeline);
        Ok((vec![(victim, out.probe)], None))
    }
}
