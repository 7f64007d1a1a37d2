//! The `protection` kind end to end on the fake platform and the fake clock: the service's
//! rate calibrated once and held by every episode, each episode's aggressor started after
//! the stable period and stopped before the recovery, an aggressor-alone trial after each
//! episode, and the summary's isolation and work-conserved figures read from the records.

use isobench_experiment::analysis::{analyze, Results};
use isobench_experiment::fake::{FakeBackend, FakeScript};
use isobench_experiment::orchestrator::{create_run, Engine, EngineIo, EngineOptions};
use isobench_experiment::progress::Transcript;
use isobench_experiment::{HostView, Plan, PlanOptions, Scenario, Source};
use isobench_store::{RunStatus, Store};
use isobench_workloads::Class;

/// The service in `svc` and a CPU hog in `batch`: the tenants, probe and first stressor of
/// every scenario here.
macro_rules! tenants {
    () => {
        r#"
[[tenant]]
name = "svc"
role = "victim"
limits = { memory = "512M", pids = 128 }

[[tenant]]
name = "batch"
role = "aggressor"
limits = { memory = "512M", pids = 64 }

[[probe]]
name = "service"
params = { rate = 0, calibrate_s = 4 }

[[stressor]]
name = "cpu"
"#
    };
}

const SCENARIO: &str = concat!(
    r#"
name = "prot"
kind = "protection"
seed = 5
placement = "shared"

[trial]
warmup = "100ms"
solo = "2s"
timeout = "10s"
max_retries = 0

[repetitions]
min = 1
max = 1

[protection]
settle = "2s"
stable = "8s"
aggressor = "10s"
recover = "8s"
episodes = 3
window = "1s"
slo_ms = 5
"#,
    tenants!(),
    r#"
[[stressor]]
name = "cache"
"#
);

fn plan_of(text: &str) -> Plan {
    let sc = Scenario::parse(Source::new("prot.toml", text)).unwrap_or_else(|e| panic!("{e}"));
    let host = HostView::synthetic(2, 8 << 30, true);
    Plan::resolve(&sc, &host, &PlanOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// In this model a CPU hog costs the service half its speed, the cache thrasher nothing.
fn effect(probe: Class, stressor: Class, intensity: u8) -> f64 {
    match (probe, stressor) {
        (Class::App, Class::Cpu) => intensity as f64 / 100.0,
        _ => 0.0,
    }
}

fn run(text: &str) -> (Results, isobench_store::LoadedRun, Vec<String>) {
    run_scripted(
        text,
        FakeScript {
            effect,
            ..FakeScript::default()
        },
    )
}

fn run_scripted(
    text: &str,
    script: FakeScript,
) -> (Results, isobench_store::LoadedRun, Vec<String>) {
    let plan = plan_of(text);
    let mut store = Store::open_in_memory().unwrap();
    let (mut backend, clock) = FakeBackend::new(plan.seed, script);
    let run = create_run(&mut store, &plan, text, "fake", serde_json::json!({}), 0).unwrap();
    let mut t = Transcript::default();
    let out = Engine::new(
        &plan,
        run.clone(),
        EngineIo::new(&mut store, &mut backend, &clock, &mut t),
        EngineOptions::default(),
    )
    .execute()
    .unwrap();
    assert_eq!(out.status, RunStatus::Complete, "{}", out.reason);
    let loaded = store.load_run(&run).unwrap();
    (analyze(&loaded), loaded, backend.log())
}

#[test]
fn every_episode_holds_the_calibrated_rate_and_switches_its_aggressor_on_time() {
    let (_, loaded, log) = run(SCENARIO);
    let fact = loaded
        .facts
        .iter()
        .find(|f| f.key == "service_calibration")
        .expect("the calibration is recorded");
    let target = fact.value[0]["target_rps"].as_f64().unwrap();
    assert!(target > 0.0, "{fact:?}");
    // One calibration run, then 3 episodes of each of the 2 conditions.
    let probes: Vec<&String> = log.iter().filter(|l| l.starts_with("probe svc")).collect();
    assert_eq!(probes.len(), 1 + 6, "{probes:#?}");
    let episodes: Vec<_> = loaded
        .trials
        .iter()
        .filter(|t| t.timeline.is_some())
        .collect();
    assert_eq!(episodes.len(), 6);
    for t in &episodes {
        let tl = t.timeline.as_ref().unwrap();
        let on: Vec<_> = tl.switches.iter().filter(|s| s.on).collect();
        let off: Vec<_> = tl.switches.iter().filter(|s| !s.on).collect();
        assert_eq!((on.len(), off.len()), (1, 1), "{tl:?}");
        let at = |ns: u64| (ns - tl.start_ns) as f64 / 1e9;
        assert!((at(on[0].requested_ns) - 8.0).abs() < 0.1, "{tl:?}");
        assert!((at(off[0].requested_ns) - 18.0).abs() < 0.1, "{tl:?}");
        assert!(off[0].ops_per_sec.unwrap() > 0.0);
    }
    // Each episode is followed by the aggressor alone, the service idle.
    let solos = loaded
        .trials
        .iter()
        .filter(|t| t.probe == isobench_experiment::analysis::SOLO_PROBE)
        .count();
    assert_eq!(solos, 6);
}

#[test]
fn the_summary_shows_the_loss_beside_the_hog_and_none_beside_the_harmless_one() {
    let (results, _, _) = run(SCENARIO);
    let s = results
        .sections
        .iter()
        .find(|s| s.id == "protection")
        .expect("the summary section");
    let col = |name: &str| s.column(name).unwrap();
    let row = |c: &str| {
        s.rows
            .iter()
            .find(|r| r[0].text() == c)
            .unwrap_or_else(|| panic!("no row {c}: {:?}", s.text_rows()))
    };
    let num = |r: &Vec<isobench_results::Value>, c: &str| r[col(c)].as_f64().unwrap();
    let cpu = row("cpu@100");
    let cache = row("cache@100");
    // The fake serves its rate at a level of its own; the hog halves it while it runs.
    let ratio = num(cpu, "isol mean") / num(cache, "isol mean");
    assert!((ratio - 0.5).abs() < 0.05, "{ratio}: {:?}", s.text_rows());
    assert!(num(cpu, "lat-imp") > 80.0, "{:?}", s.text_rows());
    assert!(num(cache, "lat-imp").abs() < 5.0, "{:?}", s.text_rows());
    assert_eq!(cpu[col("episodes")].text(), "3");
    assert!(num(cpu, "work conserved") > 0.0);
    // One timeline per aggressor, with the aggressor's run shaded.
    let tl = results
        .sections
        .iter()
        .find(|s| s.id == "protection-timeline-cpu@100")
        .expect("the timeline section");
    assert_eq!(tl.rows.len(), 26, "{:?}", tl.text_rows());
}

#[test]
fn protection_settings_are_checked_where_they_are_written() {
    let bad = SCENARIO.replace("settle = \"2s\"", "settle = \"9s\"");
    let sc = Scenario::parse(Source::new("prot.toml", &bad));
    let e = match sc {
        Err(e) => e.to_string(),
        Ok(sc) => {
            let host = HostView::synthetic(2, 8 << 30, true);
            match Plan::resolve(&sc, &host, &PlanOptions::default()) {
                Ok(_) => panic!("a settle longer than stable was accepted"),
                Err(e) => e.to_string(),
            }
        }
    };
    assert!(e.contains("protection.settle"), "{e}");
    assert!(e.contains("stable"), "{e}");
}

#[test]
fn a_stable_period_too_short_for_a_whole_window_alone_leaves_lat_imp_empty_and_says_why() {
    let text = SCENARIO
        .replace("settle = \"2s\"", "settle = \"1500ms\"")
        .replace("stable = \"8s\"", "stable = \"2s\"")
        .replace("episodes = 3", "episodes = 1");
    let (results, _, _) = run(&text);
    let s = results
        .sections
        .iter()
        .find(|s| s.id == "protection")
        .expect("the summary section");
    let col = s.column("lat-imp").unwrap();
    let cpu = s.rows.iter().find(|r| r[0].text() == "cpu@100").unwrap();
    assert!(cpu[col].as_f64().is_none(), "{:?}", s.text_rows());
    assert!(
        s.notes
            .iter()
            .any(|n| n.contains("lat-imp is empty") && n.contains("lengthen `stable`")),
        "{:?}",
        s.notes
    );
}

/// `slo_ms` in `[protection]` is the run's SLO: it was read as present and then taken as the
/// default (10 ms), since looking for it took it out of the table.
#[test]
fn the_protection_tables_slo_is_kept_not_replaced_by_the_default() {
    use isobench_experiment::kinds::protection::ProtectionSettings;
    let plan = plan_of(SCENARIO);
    let set = ProtectionSettings::of(&plan.settings).expect("protection settings");
    assert_eq!(set.slo_ms, Some(5.0));
    let without = SCENARIO.replace("slo_ms = 5\n", "");
    let set = ProtectionSettings::of(&plan_of(&without).settings).unwrap();
    assert_eq!(set.slo_ms, None, "the service's own slo_ms applies");
}

/// A service in the other kinds' trials (a tune's paired trials here) holds the rate
/// calibrated once, as an episode does: without it each trial would search for its rate
/// again, under whatever load the trial has, and hold it only for what is left.
#[test]
fn a_calibrated_service_holds_its_rate_in_every_paired_trial() {
    let text = concat!(
        r#"
name = "svc-tune"
kind = "tune"
seed = 5
placement = "shared"

[trial]
duration = "2s"
warmup = "100ms"
solo = "0s"
timeout = "10s"

[repetitions]
max_time = "10m"

[tune]
probe = "service"
metric = "lat_p99_ms"
slo_max = 10
resolution = 0.25
min_trials = 2
max_trials = 4

[[tune.knob]]
tenant = "batch"
key = "cpus"
range = [0.1, 1.0]
"#,
        tenants!()
    );
    let (r, loaded, log) = run(text);
    // The fake service answers at most 150 requests/s: a 2 s trial's p99 rests on its 3
    // worst, and the answer says so.
    let notes = &r.sections[0].notes;
    let coarse = notes.iter().find(|n| n.starts_with("Coarse"));
    let coarse = coarse.unwrap_or_else(|| panic!("{notes:?}"));
    assert!(
        coarse.contains("the service's lat_p99_ms rests on about"),
        "{coarse}"
    );
    assert!(
        coarse.contains("s or more (duration in [trial])"),
        "{coarse}"
    );
    let fact = loaded
        .facts
        .iter()
        .find(|f| f.key == "service_calibration")
        .expect("the calibration is recorded");
    let rate = fact.value[0]["target_rps"]
        .as_f64()
        .unwrap()
        .round()
        .max(1.0) as u64;
    let probes: Vec<&String> = log.iter().filter(|l| l.starts_with("probe svc")).collect();
    let trials = loaded
        .trials
        .iter()
        .filter(|t| t.probe == "service")
        .count();
    assert!(trials >= 4, "{trials} trials");
    // The calibration's own run searches; every later run holds the rate.
    assert_eq!(probes[0], "probe svc service", "{probes:#?}");
    let held = format!("probe svc service rate={rate}");
    assert_eq!(
        probes.iter().filter(|l| **l == &held).count(),
        probes.len() - 1,
        "{probes:#?}"
    );
    assert!(probes.len() > trials, "{probes:#?}");
}

/// A tune of the batch job's quota against the service's isol% at p01.
const ISOL_TUNE: &str = concat!(
    r#"
name = "svc-isol"
kind = "tune"
seed = 5
placement = "shared"

[trial]
duration = "2s"
warmup = "100ms"
solo = "0s"
timeout = "10s"

[repetitions]
max_time = "30m"

[tune]
probe = "service"
slo_isol_p01 = 10
window = "100ms"
resolution = 0.1
min_trials = 2
max_trials = 8

[[tune.knob]]
tenant = "batch"
key = "cpus"
range = [0.1, 1.0]
"#,
    tenants!()
);

/// A tune whose SLO is the service's isol% at p01: every trial beside a setting records the
/// service's rate in windows of the SLO's length, each trial's figure is the 1st percentile
/// of its windows' rate over the target, and the search finds where that crosses the bound.
#[test]
fn a_tune_on_isol_at_p01_finds_the_quota_from_the_windows_of_each_trial() {
    let text = ISOL_TUNE;
    let plan = plan_of(text);
    let windowed = plan.conditions.iter().filter(|c| c.window.is_some());
    assert_eq!(windowed.count(), plan.conditions.len());
    // The fake's service answers 150 requests/s of the 921 it is asked for (isol% 16.3)
    // alone; a CPU hog under a quota of q CPUs slows it by 1 + q, so its isol% is
    // 16.3 / (1 + q): at least 10% while q <= 0.629 (a little less at the p01 of the
    // windows' noise).
    let script = FakeScript {
        effect,
        quota_scales_harm: true,
        noise: 0.003,
        ..FakeScript::default()
    };
    let (r, loaded, _) = run_scripted(text, script);
    let contended: Vec<_> = loaded
        .trials
        .iter()
        .filter(|t| t.probe == "service" && t.condition != isobench_store::Condition::Baseline)
        .collect();
    assert!(!contended.is_empty());
    for t in &contended {
        let rate = t.series.iter().find(|s| s.metric == "rate_rps");
        assert_eq!(
            rate.map(|s| s.windows.len()),
            Some(20),
            "2 s in 100 ms windows"
        );
    }
    let answer = &r.sections[0];
    let col = |name: &str| answer.columns.iter().position(|c| c.name == name).unwrap();
    let row = answer.text_rows().remove(0);
    let shown = format!("{:?}", answer.text_rows());
    assert!(
        answer.title.contains("isol% at p01 >= 10%"),
        "{}",
        answer.title
    );
    assert!(row[col("answer")].starts_with("boundary"), "{shown}");
    let recommended: f64 = row[col("recommended")].parse().unwrap();
    assert!((0.5..=0.629).contains(&recommended), "{shown}");
    assert!(
        !answer.notes.iter().any(|n| n.starts_with("Coarse")),
        "92 requests a window: {:?}",
        answer.notes
    );
    let points = r.sections.iter().find(|s| s.id == "tune-points").unwrap();
    assert!(
        points
            .columns
            .iter()
            .any(|c| c.name == "isol% at p01 of 100 ms windows"),
        "the figure is labelled as what it is: {:?}",
        points.columns
    );
}

/// An isol% SLO is a figure of the service's rate windows: another metric, or a window
/// outside 10 ms..10 s, is refused at its field.
#[test]
fn an_isol_slo_on_another_metric_or_window_is_refused_at_its_field() {
    for (from, to, field) in [
        (
            "slo_isol_p01 = 10\n",
            "slo_isol_p01 = 10\nmetric = \"lat_p99_ms\"\n",
            "tune.metric",
        ),
        ("window = \"100ms\"", "window = \"20s\"", "tune.window"),
        (
            "slo_isol_p01 = 10",
            "slo_isol_p01 = 120",
            "tune.slo_isol_p01",
        ),
    ] {
        let bad = ISOL_TUNE.replace(from, to);
        let e = Scenario::parse(Source::new("isol.toml", &bad))
            .err()
            .unwrap_or_else(|| panic!("{to} was accepted"))
            .to_string();
        assert!(e.contains(field), "{to}: {e}");
    }
}

/// Windows that hold few requests at the service's target rate make a coarse isol%: the
/// answer says so, with the window that would hold enough.
#[test]
fn an_isol_slo_on_windows_of_few_requests_is_called_coarse() {
    let text = ISOL_TUNE.replace("window = \"100ms\"", "window = \"10ms\"");
    let (r, _, _) = run_scripted(
        &text,
        FakeScript {
            effect,
            quota_scales_harm: true,
            noise: 0.003,
            ..FakeScript::default()
        },
    );
    let answer = &r.sections[0];
    let coarse = answer.notes.iter().find(|n| n.starts_with("Coarse"));
    // The fake's service is asked for 921 requests/s: 9.2 in 10 ms, 20 in 22 ms.
    let coarse = coarse.unwrap_or_else(|| panic!("{:?}", answer.notes));
    assert!(
        coarse.contains("about 9.2 requests in a 10 ms window"),
        "{coarse}"
    );
    assert!(coarse.contains("a window of 22 ms or more"), "{coarse}");
}
