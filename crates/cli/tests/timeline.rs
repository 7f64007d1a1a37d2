//! Scheduled trials (the `timeline` kind) on real cgroup tenants: stressors started and
//! stopped in two neighbours while the victim's UDP ping measures in windows and every
//! tenant's CPU time is sampled. Needs root and cgroup controllers; skips with the reason
//! otherwise.

use std::time::Duration;

use isobench_experiment::backend::{Backend, ProbeRun, StressorRun, SystemClock, TenantDriver};
use isobench_experiment::real::RealBackend;
use isobench_experiment::scheduled::{run, Entry, Spec};
use isobench_experiment::{HostView, Plan, PlanOptions, Scenario, Source};
use isobench_workloads::ParamValues;

mod common;
use common::cgroup_missing;

/// The tenants of the schedule (the plan's own kind does not matter here: only its tenants
/// and platform are used).
const TENANTS: &str = r#"
name = "tl-real"
kind = "matrix"
platform = "cgroup"

[[tenant]]
name = "victim"
role = "victim"
limits = { memory = "256M", pids = 128 }

[[tenant]]
name = "agg1"
role = "aggressor"
limits = { memory = "128M", pids = 64 }

[[tenant]]
name = "agg2"
role = "aggressor"
limits = { memory = "128M", pids = 64 }

[[probe]]
name = "net-rtt"
params = { proto = "udp", rate = 1000 }

[[stressor]]
name = "cpu"
"#;

fn hog(tenant: usize, start: u64, stop: u64) -> Entry {
    Entry {
        tenant,
        run: StressorRun {
            name: "cpu".into(),
            intensity: 100,
            params: ParamValues::default(),
            pin: None,
            contained: true,
            timeout: Duration::from_secs(20),
        },
        start: Duration::from_secs(start),
        stop: Duration::from_secs(stop),
    }
}

#[test]
fn a_schedule_runs_on_cgroup_tenants_with_its_cpu_series() {
    if let Some(why) = cgroup_missing(&["cpu", "cpuacct", "memory", "pids", "freezer"]) {
        eprintln!("skipped: {why}");
        return;
    }
    let sc = Scenario::parse(Source::new("tl.toml", TENANTS)).unwrap();
    let host = HostView::detect().unwrap();
    let plan = Plan::resolve(&sc, &host, &PlanOptions::default()).unwrap();
    let guard = isobench_platform::RunGuard::start().unwrap();
    let exe = assert_cmd::cargo::cargo_bin("isobench");
    let mut backend = RealBackend::new(&plan, guard.context(), exe).unwrap();
    let mut drivers: Vec<Box<dyn TenantDriver>> = plan
        .tenants
        .iter()
        .map(|t| backend.create_tenant(t).unwrap())
        .collect();
    let victim = plan
        .tenants
        .iter()
        .position(|t| t.name == "victim")
        .unwrap();
    let index = |n: &str| plan.tenants.iter().position(|t| t.name == n).unwrap();
    let spec = Spec {
        victim,
        probe: ProbeRun {
            name: "net-rtt".into(),
            params: plan.probes[0].params.clone(),
            budget: Duration::from_secs(16),
            pin: None,
            pin_peer: None,
            timeout: Duration::from_secs(20),
            window: Some(Duration::from_millis(500)),
        },
        entries: vec![hog(index("agg1"), 4, 10), hog(index("agg2"), 7, 13)],
        cpu_every: Duration::from_secs(1),
    };
    let clock = SystemClock::new();
    let out = {
        let mut refs: Vec<&mut dyn TenantDriver> = drivers
            .iter_mut()
            .map(|d| d.as_mut() as &mut dyn TenantDriver)
            .collect();
        run(&clock, &mut refs, &spec)
    };
    for d in &mut drivers {
        d.teardown().unwrap();
    }
    backend.teardown().unwrap();
    drop(guard);

    let tl = &out.timeline;
    let probe = out.probe.expect("the probe ran");
    // Four switches, each on time (within a second) and without error.
    assert_eq!(tl.switches.len(), 4, "{:?}", tl.switches);
    for s in &tl.switches {
        assert!(s.error.is_none(), "{s:?}");
        let late = (s.requested_ns - tl.start_ns) as i64 - s.planned_ns as i64;
        assert!((0..1_000_000_000).contains(&late), "{s:?}");
    }
    assert!(tl
        .switches
        .iter()
        .filter(|s| !s.on)
        .all(|s| s.ops_per_sec.unwrap() > 0.0));
    // The windows tile the trial and line up with the switches' clock.
    let series = probe
        .metrics
        .iter()
        .find(|m| m.name == "udp_rtt_p50_ns")
        .and_then(|m| m.series.as_ref())
        .expect("a p50 series");
    assert!(series.len() >= 28, "{} windows", series.len());
    assert!(series[0].start_ns >= tl.start_ns && series.last().unwrap().end_ns <= tl.end_ns);
    // CPU: each aggressor busy only while its hog ran.
    let usage_in = |tenant: &str, from: f64, to: f64| -> f64 {
        let c = tl.cpu.iter().find(|c| c.tenant == tenant).unwrap();
        let u: Vec<f64> = c
            .usage()
            .into_iter()
            .filter(|(t, _)| {
                let s = (*t - tl.start_ns) as f64 / 1e9;
                s > from && s <= to
            })
            .map(|(_, u)| u)
            .collect();
        u.iter().sum::<f64>() / u.len().max(1) as f64
    };
    assert!(usage_in("agg1", 0.0, 4.0) < 0.05, "{:?}", tl.cpu);
    assert!(usage_in("agg1", 5.0, 10.0) > 0.3, "{:?}", tl.cpu);
    assert!(usage_in("agg2", 8.0, 13.0) > 0.3, "{:?}", tl.cpu);
    assert!(usage_in("agg2", 14.0, 16.0) < 0.05, "{:?}", tl.cpu);
    assert!(usage_in("victim", 1.0, 15.0) > 0.01, "{:?}", tl.cpu);
}
