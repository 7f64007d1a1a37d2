//! A scheduled trial: one long probe run in a victim, measuring in windows, while stressors in
//! aggressor tenants start and stop at planned offsets and every tenant's CPU time is sampled
//! at a fixed interval (paper 003, set 2: a pinged tenant beside CPU hogs that start and stop
//! every 50 s, each domain's CPU share read every second).
//!
//! Why a trial of its own: the matrix's trials hold one condition each, and the on/off design
//! freezes and thaws every aggressor together with a short period. A timeline asks what
//! happens *at* each switch and as neighbours pile up, so the probe runs once for the whole
//! schedule, the controller makes each switch when it falls due, and the switches are stored
//! as they happened (asked for, done, failed) beside the probe's windows and the CPU series,
//! all on the same `CLOCK_MONOTONIC` time line the probe stamps its windows with.
//!
//! The loop only waits on the [`Clock`]: on the fake backend time moves only when it sleeps,
//! so a schedule of minutes runs in milliseconds and gives the same record every time.

use std::time::Duration;

use isobench_store::{CpuSample, CpuSeries, ScheduledSwitch, Timeline};

use crate::backend::{Clock, ProbeOutcome, ProbeRun, StressorRun, TenantDriver, TenantFailure};

/// Longest sleep of the controller between looks at the victim's probe.
pub const POLL: Duration = Duration::from_millis(20);

/// One stressor in one aggressor tenant, from `start` to `stop` after the trial starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Index of the aggressor tenant among the drivers.
    pub tenant: usize,
    /// What the tenant runs.
    pub run: StressorRun,
    /// Offset of the start.
    pub start: Duration,
    /// Offset of the stop; at the latest, the end of the trial stops it.
    pub stop: Duration,
}

/// What one scheduled trial does.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// Index of the victim tenant among the drivers.
    pub victim: usize,
    /// The victim's probe: its budget is the trial's length, its window the series' window.
    pub probe: ProbeRun,
    /// The stressors, each in its tenant; one at a time per tenant.
    pub entries: Vec<Entry>,
    /// Interval of the CPU samples.
    pub cpu_every: Duration,
}

/// What one scheduled trial measured.
#[derive(Debug)]
pub struct Outcome {
    /// The victim's probe.
    pub probe: Result<ProbeOutcome, TenantFailure>,
    /// The switches as they happened and every tenant's CPU series.
    pub timeline: Timeline,
}

/// The scheduled trial of probe `p` of `plan` with `settings`: the probe in the settings'
/// victim for the whole length in the settings' windows, each schedule entry's stressor in
/// its tenant (pinned and contained as the plan's aggressors are). Tenants are indexed as in
/// the plan. Errors name a tenant of the settings the plan does not have.
pub fn spec_for(
    plan: &crate::plan::Plan,
    settings: &crate::kinds::timeline::settings::TimelineSettings,
    p: usize,
) -> anyhow::Result<Spec> {
    let index = |name: &str| {
        plan.tenants
            .iter()
            .position(|t| t.name == name)
            .ok_or_else(|| {
                anyhow::anyhow!("the timeline names tenant {name}, which the plan lacks")
            })
    };
    let victim = index(&settings.victim)?;
    let vt = &plan.tenants[victim];
    let probe = &plan.probes[p];
    let mut entries = Vec::new();
    for e in &settings.schedule {
        let tenant = index(&e.tenant)?;
        let t = &plan.tenants[tenant];
        entries.push(Entry {
            tenant,
            run: StressorRun {
                name: e.name.clone(),
                intensity: e.intensity,
                params: e.params.clone(),
                pin: t.pin.map(|_| t.cpus.clone()),
                contained: plan.platform.capabilities().contains_aggressors,
                timeout: plan.trial.timeout,
            },
            start: e.start,
            stop: e.stop,
        });
    }
    Ok(Spec {
        victim,
        probe: ProbeRun {
            name: probe.name.clone(),
            params: probe.params.clone(),
            budget: settings.length,
            pin: vt.pin,
            pin_peer: vt.pin_peer,
            timeout: settings.length + plan.trial.timeout,
            window: Some(settings.window),
        },
        entries,
        cpu_every: settings.cpu_every,
    })
}

/// The victim's index among the tenants and what its probe returned.
pub type VictimOutcome = (usize, Result<ProbeOutcome, TenantFailure>);

/// The scheduled trial of probe `p` of `plan`, run with `params`, on `tenants` (in the plan's order), from the
/// kind's settings in the plan: the victim's outcome, by its index, and the timeline.
pub fn measure(
    plan: &crate::plan::Plan,
    p: usize,
    params: isobench_workloads::ParamValues,
    clock: &dyn Clock,
    tenants: &mut [&mut dyn TenantDriver],
) -> anyhow::Result<(VictimOutcome, Timeline)> {
    let settings = crate::kinds::timeline::settings_of(&plan.settings).ok_or_else(|| {
        anyhow::anyhow!(
            "the plan of this run has no timeline schedule; it was made by another version"
        )
    })?;
    let mut spec = spec_for(plan, &settings, p)?;
    spec.probe.params = params;
    let out = run(clock, tenants, &spec);
    Ok(((spec.victim, out.probe), out.timeline))
}

/// A start or a stop due at an offset.
#[derive(Debug, Clone, Copy)]
struct Action {
    at: Duration,
    entry: usize,
    on: bool,
}

/// The starts and stops of `entries` in the order they fall due (a stop before a start at
/// the same offset, so a tenant can hand over from one stressor to the next).
fn actions(entries: &[Entry]) -> Vec<Action> {
    let mut a: Vec<Action> = entries
        .iter()
        .enumerate()
        .flat_map(|(i, e)| {
            [
                Action {
                    at: e.start,
                    entry: i,
                    on: true,
                },
                Action {
                    at: e.stop,
                    entry: i,
                    on: false,
                },
            ]
        })
        .collect();
    a.sort_by_key(|x| (x.at, x.on, x.entry));
    a
}

/// Runs one scheduled trial on `tenants` (indexed as the spec's entries say) and returns
/// what it measured. Switches that fail are recorded with the reason and the schedule goes
/// on; stressors still running when the probe ends are stopped then. The trial ends when the
/// probe does, or at its budget plus its timeout.
pub fn run(clock: &dyn Clock, tenants: &mut [&mut dyn TenantDriver], spec: &Spec) -> Outcome {
    let t0 = clock.now();
    let start_ns = clock.mono_ns();
    let mut cpu: Vec<CpuSeries> = tenants
        .iter()
        .map(|t| CpuSeries {
            tenant: t.name().to_string(),
            samples: Vec::new(),
        })
        .collect();
    let sample = |tenants: &mut [&mut dyn TenantDriver], cpu: &mut Vec<CpuSeries>| {
        let at_ns = clock.mono_ns();
        for (t, series) in tenants.iter_mut().zip(cpu.iter_mut()) {
            if let Some(c) = t.cpu() {
                series.samples.push(CpuSample {
                    at_ns,
                    cpu_ns: c.total_ns,
                });
            }
        }
    };
    sample(tenants, &mut cpu);
    let mut switches = Vec::new();
    let mut running = vec![false; spec.entries.len()];
    let probe = tenants[spec.victim].begin_probe(&spec.probe);
    if let Err(e) = probe {
        return Outcome {
            probe: Err(e),
            timeline: Timeline {
                start_ns,
                end_ns: clock.mono_ns(),
                switches,
                cpu,
            },
        };
    }
    let plan = actions(&spec.entries);
    let mut next_action = 0;
    let mut next_cpu = spec.cpu_every;
    let deadline = spec.probe.budget + spec.probe.timeout;
    loop {
        let elapsed = clock.now() - t0;
        if tenants[spec.victim].probe_finished() || elapsed > deadline {
            break;
        }
        if let Some(a) = plan.get(next_action).filter(|a| a.at <= elapsed) {
            let a = *a;
            next_action += 1;
            // A stressor that did not start is not stopped.
            if a.on || running[a.entry] {
                let s = switch(clock, tenants, &spec.entries[a.entry], a.on, a.at);
                running[a.entry] = a.on && s.error.is_none();
                switches.push(s);
            }
            continue;
        }
        if !spec.cpu_every.is_zero() && next_cpu <= elapsed {
            sample(tenants, &mut cpu);
            while next_cpu <= elapsed {
                next_cpu += spec.cpu_every;
            }
            continue;
        }
        let next_due = plan
            .get(next_action)
            .map(|a| a.at)
            .into_iter()
            .chain((!spec.cpu_every.is_zero()).then_some(next_cpu))
            .chain(std::iter::once(spec.probe.budget))
            .min()
            .unwrap_or(spec.probe.budget);
        let wait = next_due
            .saturating_sub(elapsed)
            .clamp(Duration::from_millis(1), POLL);
        clock.sleep(wait);
    }
    // Whatever still runs stops with the trial.
    let end = clock.now() - t0;
    for (i, e) in spec.entries.iter().enumerate() {
        if running[i] {
            switches.push(switch(clock, tenants, e, false, e.stop.min(end)));
        }
    }
    sample(tenants, &mut cpu);
    let probe = tenants[spec.victim].end_probe();
    Outcome {
        probe,
        timeline: Timeline {
            start_ns,
            end_ns: clock.mono_ns(),
            switches,
            cpu,
        },
    }
}

/// Starts (`on`) or stops entry `e`'s stressor, timing it.
fn switch(
    clock: &dyn Clock,
    tenants: &mut [&mut dyn TenantDriver],
    e: &Entry,
    on: bool,
    planned: Duration,
) -> ScheduledSwitch {
    let requested_ns = clock.mono_ns();
    let t = &mut tenants[e.tenant];
    let (error, ops_per_sec) = if on {
        (t.start_stressor(&e.run).err().map(|e| e.to_string()), None)
    } else {
        match t.stop_stressor() {
            Ok(r) => (None, Some(r.ops_per_sec).filter(|r| r.is_finite())),
            Err(e) => (Some(e.to_string()), None),
        }
    };
    ScheduledSwitch {
        tenant: t.name().to_string(),
        stressor: e.run.name.clone(),
        intensity: e.run.intensity,
        on,
        planned_ns: planned.as_nanos() as u64,
        requested_ns,
        done_ns: clock.mono_ns(),
        error,
        ops_per_sec,
    }
}

#[cfg(test)]
mod tests {
    use isobench_workloads::ParamValues;

    use super::*;
    use crate::backend::Backend;
    use crate::fake::{FakeBackend, FakeScript, FAKE_MONO_NS};
    use crate::plan::PlannedTenant;
    use crate::scenario::Role;

    fn tenant(name: &str, role: Role) -> PlannedTenant {
        PlannedTenant {
            name: name.into(),
            role,
            limits: Default::default(),
            netns: false,
            cpus: vec![0, 1],
            memory: 1 << 30,
            mem_need: 0,
            pin: None,
            pin_peer: None,
            image: None,
        }
    }

    fn cpu_hog(tenant: usize, start: u64, stop: u64) -> Entry {
        Entry {
            tenant,
            run: StressorRun {
                name: "cpu".into(),
                intensity: 100,
                params: ParamValues::default(),
                pin: None,
                contained: true,
                timeout: Duration::from_secs(10),
            },
            start: Duration::from_secs(start),
            stop: Duration::from_secs(stop),
        }
    }

    /// The stacking schedule of paper 003 (table 3), shortened: hogs start in two tenants one
    /// after the other and stop in the same order.
    fn spec() -> Spec {
        Spec {
            victim: 0,
            probe: ProbeRun {
                name: "cpu-int".into(),
                params: ParamValues::default(),
                budget: Duration::from_secs(50),
                pin: None,
                pin_peer: None,
                timeout: Duration::from_secs(10),
                window: Some(Duration::from_millis(500)),
            },
            entries: vec![cpu_hog(1, 10, 30), cpu_hog(2, 20, 40)],
            cpu_every: Duration::from_secs(1),
        }
    }

    fn run_fake(spec: &Spec) -> (Outcome, Vec<String>) {
        let (mut backend, clock) = FakeBackend::new(7, FakeScript::default());
        let mut drivers: Vec<Box<dyn TenantDriver>> = [
            tenant("victim", Role::Victim),
            tenant("agg1", Role::Aggressor),
            tenant("agg2", Role::Aggressor),
        ]
        .iter()
        .map(|t| backend.create_tenant(t).unwrap())
        .collect();
        let mut refs: Vec<&mut dyn TenantDriver> = drivers
            .iter_mut()
            .map(|d| d.as_mut() as &mut dyn TenantDriver)
            .collect();
        let out = run(&clock, &mut refs, spec);
        (out, backend.log())
    }

    #[test]
    fn switches_happen_on_schedule_and_are_recorded_as_they_happened() {
        let (out, log) = run_fake(&spec());
        let tl = &out.timeline;
        let at = |s: &ScheduledSwitch| (s.requested_ns - tl.start_ns) / 1_000_000;
        let got: Vec<(&str, bool, u64)> = tl
            .switches
            .iter()
            .map(|s| (s.tenant.as_str(), s.on, at(s)))
            .collect();
        assert_eq!(
            got,
            vec![
                ("agg1", true, 10_000),
                ("agg2", true, 20_000),
                ("agg1", false, 30_000),
                ("agg2", false, 40_000),
            ]
        );
        assert!(tl.switches.iter().all(|s| s.error.is_none()));
        assert!(tl
            .switches
            .iter()
            .filter(|s| !s.on)
            .all(|s| s.ops_per_sec.unwrap() > 0.0));
        assert_eq!(tl.start_ns, FAKE_MONO_NS);
        assert!(log.contains(&"start agg1 cpu@100".to_string()), "{log:?}");
        assert!(out.probe.is_ok());
    }

    #[test]
    fn cpu_is_sampled_every_second_and_shows_who_ran_when() {
        let (out, _) = run_fake(&spec());
        let tl = &out.timeline;
        assert_eq!(tl.cpu.len(), 3);
        for c in &tl.cpu {
            // At 0 s, every second to 50 s, and once more at the end.
            assert!(c.samples.len() >= 51, "{}: {}", c.tenant, c.samples.len());
            for w in c.samples.windows(2).take(50) {
                let dt = w[1].at_ns - w[0].at_ns;
                assert!(dt <= 1_000_000_000 + 20_000_000, "{dt}");
            }
        }
        // agg1 used a full CPU from 10 s to 30 s and nothing outside.
        let usage = tl.cpu[1].usage();
        let at = |s: f64| {
            usage
                .iter()
                .find(|(t, _)| (*t - tl.start_ns) as f64 / 1e9 >= s)
                .unwrap()
                .1
        };
        assert!(at(5.0) < 0.01, "{usage:?}");
        assert!((at(15.0) - 1.0).abs() < 0.05, "{usage:?}");
        assert!(at(35.0) < 0.01, "{usage:?}");
        // The victim ran its probe throughout.
        let v = tl.cpu[0].usage();
        assert!(v.iter().take(49).all(|(_, u)| *u > 0.5), "{v:?}");
    }

    #[test]
    fn the_windows_follow_the_schedule() {
        let (out, _) = run_fake(&spec());
        let probe = out.probe.unwrap();
        let m = probe.metrics.iter().find(|m| m.series.is_some()).unwrap();
        let ws = m.series.as_ref().unwrap();
        assert_eq!(ws.len(), 100);
        let mean_in = |a: f64, b: f64| {
            let v: Vec<f64> = ws
                .iter()
                .filter(|w| {
                    let s = (w.start_ns - FAKE_MONO_NS) as f64 / 1e9;
                    s >= a && s < b
                })
                .map(|w| w.value)
                .collect();
            v.iter().sum::<f64>() / v.len() as f64
        };
        // cpu-int is higher-is-better; in the fake's model each hog slows it by a factor 1.3.
        let idle = mean_in(0.0, 10.0);
        let one = mean_in(11.0, 20.0);
        let two = mean_in(21.0, 30.0);
        let after = mean_in(41.0, 50.0);
        assert!(one < idle * 0.95 && two < one * 0.95, "{idle} {one} {two}");
        assert!((after / idle - 1.0).abs() < 0.03, "{idle} {after}");
    }

    #[test]
    fn a_stop_after_the_end_happens_at_the_end_and_a_failed_start_is_recorded() {
        let mut s = spec();
        s.entries = vec![cpu_hog(1, 10, 500), {
            let mut e = cpu_hog(2, 20, 30);
            e.run.name = "no-such-stressor".into();
            e
        }];
        let (out, log) = run_fake(&s);
        let tl = &out.timeline;
        let last = tl.switches.last().unwrap();
        assert_eq!((last.tenant.as_str(), last.on), ("agg1", false));
        assert!(last.planned_ns <= 51_000_000_000, "{last:?}");
        let failed = tl.switches.iter().find(|s| s.tenant == "agg2").unwrap();
        assert!(failed
            .error
            .as_deref()
            .unwrap()
            .contains("unknown stressor"));
        // It has no stop; the other stressor is stopped once.
        assert_eq!(tl.switches.iter().filter(|s| s.tenant == "agg2").count(), 1);
        assert!(!log.iter().any(|l| l.starts_with("stop agg2")), "{log:?}");
        assert_eq!(log.iter().filter(|l| l.starts_with("stop agg1")).count(), 1);
    }
}
