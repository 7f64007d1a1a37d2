//! The `timeline` kind from the command line: a short schedule on the fake platform through
//! `run`, `show` and `export --section`, and for real on cgroup tenants, through `isobench
//! run` and through the scheduled trial alone (stressors started and stopped in two
//! neighbours while the victim's UDP ping measures in windows and every tenant's CPU time is
//! sampled). The real ones need root and cgroup controllers and skip with the reason
//! otherwise.

use std::time::Duration;

use isobench_experiment::backend::{Backend, ProbeRun, StressorRun, SystemClock, TenantDriver};
use isobench_experiment::real::RealBackend;
use isobench_experiment::scheduled::{run, Entry, Spec};
use isobench_experiment::{HostView, Plan, PlanOptions, Scenario, Source};
use isobench_workloads::ParamValues;

mod common;
use common::{cgroup_missing, code, fake, isobench, json_of, text, write};

/// The real tests measure CPU use, so they run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

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
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(why) = cgroup_missing(&["cpu", "cpuacct", "memory", "pids", "freezer"]) {
        common::skip("cgroup", &why);
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

/// Two CPU hogs in two neighbours, 8 s each, overlapping, beside a UDP ping in the victim.
const KIND_SCENARIO: &str = r#"
name = "tl-short"
kind = "timeline"
seed = 5
platform = "cgroup"

[trial]
timeout = "20s"
max_retries = 0

[repetitions]
min = 1
max = 1

[timeline]
window = "500ms"
length = "24s"

[[timeline.schedule]]
tenant = "agg1"
stressor = "cpu"
start = "6s"
stop = "14s"

[[timeline.schedule]]
tenant = "agg2"
stressor = "cpu"
start = "10s"
stop = "18s"

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
metrics = ["udp_rtt_p50_ns"]

[[stressor]]
name = "cpu"
"#;

/// Runs `scenario` (fake or real) into a database in `dir`; returns the database, the run id
/// and its JSON export.
fn run_cli(
    cmd: fn() -> assert_cmd::Command,
    dir: &std::path::Path,
) -> (String, String, serde_json::Value) {
    let file = write(dir, "tl.toml", KIND_SCENARIO);
    let db = dir.join("r.db").display().to_string();
    let out = cmd()
        .args(["run", &file, "--db", &db])
        .timeout(std::time::Duration::from_secs(180))
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "stderr: {}", text(&out.stderr));
    let runs = isobench().args(["runs", "--db", &db]).output().unwrap();
    let id = text(&runs.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_string();
    let export = isobench()
        .args(["export", &id, "--format", "json", "--db", &db])
        .output()
        .unwrap();
    (db, id, json_of(&export))
}

fn section<'a>(doc: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    doc["results"]["sections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("no section {id}: {doc}"))
}

#[test]
fn a_timeline_shows_its_episodes_and_exports_its_series() {
    let dir = tempfile::tempdir().unwrap();
    let (db, id, doc) = run_cli(fake, dir.path());
    let episodes = section(&doc, "episodes");
    assert_eq!(episodes["rows"].as_array().unwrap().len(), 2);
    let show = isobench()
        .args(["show", &id, "--db", &db])
        .output()
        .unwrap();
    assert_eq!(code(&show), 0);
    let shown = text(&show.stdout);
    assert!(
        shown.contains("Each stressor run against the phase before its start"),
        "{shown}"
    );
    assert!(shown.contains("time to degrade"), "{shown}");
    let csv = isobench()
        .args([
            "export",
            &id,
            "--format",
            "csv",
            "--section",
            "series",
            "--db",
            &db,
        ])
        .output()
        .unwrap();
    assert_eq!(code(&csv), 0, "{}", text(&csv.stderr));
    let csv = text(&csv.stdout);
    assert!(
        csv.starts_with("window start [s],window end [s],udp_rtt_p50_ns [ns]"),
        "{csv}"
    );
    // 24 s in windows of 500 ms.
    assert_eq!(csv.lines().count(), 1 + 48, "{csv}");
}

#[test]
fn a_short_timeline_on_cgroup_tenants() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(why) = cgroup_missing(&["cpu", "cpuacct", "memory", "pids", "freezer"]) {
        common::skip("cgroup", &why);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_, _, doc) = run_cli(isobench, dir.path());
    // Every switch happened.
    let series = section(&doc, "series");
    let notes = series["notes"].to_string();
    assert!(!notes.contains("failed"), "{notes}");
    assert_eq!(notes.matches(" start ").count(), 2, "{notes}");
    assert_eq!(notes.matches(" stop ").count(), 2, "{notes}");
    let rows = series["rows"].as_array().unwrap();
    assert!(rows.len() >= 40, "{} windows", rows.len());
    // The phase with both hogs: each aggressor used CPU, while before the first start they
    // used none.
    let phases = section(&doc, "phases");
    let num = |v: &serde_json::Value| {
        v["Number"]["value"]
            .as_f64()
            .or_else(|| v["value"].as_f64())
    };
    let cols: Vec<String> = phases["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    let col = |name: &str| cols.iter().position(|c| c == name).unwrap();
    let prow = phases["rows"].as_array().unwrap();
    assert_eq!(prow.len(), 5, "{phases}");
    let both = &prow[2];
    assert!(num(&both[col("agg1 CPU")]).unwrap() > 0.3, "{both}");
    assert!(num(&both[col("agg2 CPU")]).unwrap() > 0.3, "{both}");
    assert!(num(&prow[0][col("agg1 CPU")]).unwrap() < 0.1, "{}", prow[0]);
}
