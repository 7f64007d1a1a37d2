//! The orchestrator end to end on the fake platform and the fake clock: deterministic, so the
//! plan, the trial order, the stopping rule, DNR, disturbance, refusal and resume are checked
//! exactly.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use isobench_experiment::analysis::{self, analyze};
use isobench_experiment::backend::Clock;
use isobench_experiment::fake::{FakeBackend, FakeScript};
use isobench_experiment::kinds::matrix::schedule::{first_needs, round_blocks, FIRST_PAIRS};
use isobench_experiment::orchestrator::{
    create_run, prepare_resume, Engine, EngineIo, EngineOptions,
};
use isobench_experiment::progress::{Event, Progress, Transcript};
use isobench_experiment::schedule::{TrialKey, TrialWhat};
use isobench_experiment::{HostView, Plan, PlanOptions, Scenario, Source};
use isobench_store::{OpenOptions, RunId, RunStatus, Store, TrialStatus};

const SMALL: &str = r#"
name = "small"
kind = "matrix"
seed = 7

[trial]
duration = "200ms"
warmup = "100ms"
solo = "200ms"
baseline_every = 1

[repetitions]
min = 3
max = 6
ci_half_width = 2.0

[[tenant]]
name = "victim"
role = "victim"
limits = { memory = "512M", pids = 128 }

[[tenant]]
name = "aggressor"
role = "aggressor"
limits = { memory = "512M", pids = 64 }

[[probe]]
name = "cpu-int"

[[probe]]
name = "syscall"

[[stressor]]
name = "cpu"

[[stressor]]
name = "forkbomb"
"#;

fn plan_of(text: &str, cgroup: bool) -> Plan {
    let sc = Scenario::parse(Source::new("small.toml", text)).expect("valid scenario");
    let host = HostView::synthetic(2, 8 << 30, cgroup);
    Plan::resolve(&sc, &host, &PlanOptions::default()).expect("plan resolves")
}

struct Ran {
    store: Store,
    run: RunId,
    /// The fake clock at the end of the run.
    elapsed: std::time::Duration,
    transcript: Vec<String>,
    status: RunStatus,
    reason: String,
    /// What the fake platform was asked to do.
    log: Vec<String>,
}

fn run_with(plan: &Plan, script: FakeScript, stop: Arc<AtomicBool>) -> Ran {
    let mut store = Store::open_in_memory().unwrap();
    let (mut backend, clock) = FakeBackend::new(plan.seed, script);
    let run = create_run(&mut store, plan, SMALL, "fake", serde_json::json!({}), 0).unwrap();
    let mut t = Transcript::default();
    let out = Engine::new(
        plan,
        run.clone(),
        EngineIo {
            store: &mut store,
            backend: &mut backend,
            clock: &clock,
            progress: &mut t,
            stop,
        },
        EngineOptions::default(),
    )
    .execute()
    .unwrap();
    Ran {
        store,
        run,
        elapsed: clock.now(),
        transcript: t.lines,
        status: out.status,
        reason: out.reason,
        log: backend.log(),
    }
}

/// A run of `plan` on the fake backend with the default script, not interrupted.
fn run_default(plan: &Plan) -> Ran {
    run_with(
        plan,
        FakeScript::default(),
        Arc::new(AtomicBool::new(false)),
    )
}

#[test]
fn plan_and_estimate_are_deterministic() {
    let plan = plan_of(SMALL, true);
    assert_eq!(plan.seed, 7);
    assert_eq!(plan.conditions.len(), 2);
    // Per round: 2 contended on/off blocks x 2 probes and 2 solo trials (on/off needs no
    // baseline blocks).
    assert_eq!(plan.estimate.trials_per_round, 6);
    assert_eq!(plan.estimate.trials_min, 18);
    assert_eq!(plan.estimate.trials_max, 36);
    insta::assert_snapshot!("small_plan_summary", plan.summary());
}

#[test]
fn schedule_interleaves_baselines_and_is_seeded() {
    let plan = plan_of(SMALL, true);
    let mut text = String::new();
    for round in 0..3 {
        for b in round_blocks(&plan, round, &first_needs(&plan)) {
            let cond = b
                .condition
                .map_or("baseline".to_string(), |c| plan.conditions[c].id.clone());
            let trials: Vec<String> = b
                .trials
                .iter()
                .map(|t| match t.what.probe() {
                    Some(p) => plan.probes[p].id.clone(),
                    None => "solo".into(),
                })
                .collect();
            text.push_str(&format!(
                "r{round} b{} {cond}: {}\n",
                b.index,
                trials.join(" ")
            ));
        }
    }
    insta::assert_snapshot!("small_schedule", text);
    // On/off conditions need no baseline blocks: the off-windows are the baseline.
    let blocks = round_blocks(&plan, 0, &first_needs(&plan));
    assert!(blocks.iter().all(|b| b.condition.is_some()));
    // Paired trials: each contended block has its baseline block right next to it, with the
    // same probes in the same order. A condition measured only with paired trials repeats its
    // pair (FIRST_PAIRS times in a first round), the order alternating pair by pair (ABBA) and
    // round by round; the aggressor's own rate is measured in the first contended block only.
    let mut paired = plan.clone();
    for c in &mut paired.conditions {
        c.design = isobench_experiment::plan::Design::Paired;
    }
    let first = FIRST_PAIRS;
    for round in 0..2 {
        let blocks = round_blocks(&paired, round, &first_needs(&paired));
        assert_eq!(
            blocks.len(),
            2 * first as usize * paired.conditions.len(),
            "{blocks:?}"
        );
        for (i, pair) in blocks.chunks(2).enumerate() {
            let j = i as u32 % first;
            let (b, c) = if (round + j) % 2 == 0 {
                (&pair[0], &pair[1])
            } else {
                (&pair[1], &pair[0])
            };
            let solo = c.trials.iter().any(|t| t.what == TrialWhat::Solo);
            assert_eq!(solo, j == 0, "{c:?}");
            assert!(b.condition.is_none() && c.condition.is_some(), "{blocks:?}");
            let probes = |x: &isobench_experiment::schedule::Block| {
                x.trials
                    .iter()
                    .filter(|t| t.what != TrialWhat::Solo)
                    .map(|t| t.what)
                    .collect::<Vec<_>>()
            };
            assert_eq!(probes(b), probes(c));
            assert_eq!(
                isobench_experiment::schedule::paired_baseline_block(round, j, c.index),
                Some(b.index)
            );
        }
    }
    // Another seed, another order (over a few rounds).
    let mut other = plan.clone();
    other.seed = 8;
    let orders = |p: &Plan| {
        (0..6)
            .map(|r| {
                round_blocks(p, r, &first_needs(p))
                    .iter()
                    .map(|b| format!("{:?}{:?}", b.condition, b.trials))
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
    };
    assert_ne!(orders(&plan), orders(&other));
    assert_eq!(orders(&plan), orders(&plan.clone()));
}

#[test]
fn trial_keys_round_trip() {
    let k = TrialKey {
        round: 999,
        block: 200,
        slot: 17,
        attempt: 3,
    };
    // Keys order as trials run: round, block, slot, then attempt; nothing is packed.
    assert!(
        k < TrialKey {
            slot: 18,
            attempt: 0,
            ..k
        }
    );
    assert!(
        k < TrialKey {
            round: 1 << 20,
            block: 0,
            slot: 0,
            attempt: 0,
        }
    );
    assert_eq!(k.retry().attempt, 4);
    assert_eq!(k.retry().to_string(), "r999b200s17a4");
}

#[test]
fn full_run_is_deterministic_and_stops_by_the_rule() {
    let plan = plan_of(SMALL, true);
    let a = run_default(&plan);
    let b = run_default(&plan);
    assert_eq!(a.status, RunStatus::Complete, "{}", a.reason);
    assert_eq!(a.transcript, b.transcript);
    insta::assert_snapshot!("small_transcript", a.transcript.join("\n"));
    let loaded = a.store.load_run(&a.run).unwrap();
    let results = analyze(&loaded);
    // Every victim cell is within the target (the fake noise is 1%) after the minimum three
    // rounds, so the run stops there: no round repeats an aggressor's solo trial alone (it
    // would have no contended trial to be compared with).
    let in_round = |r: &str| {
        a.transcript
            .iter()
            .filter(|l| l.starts_with("trial") && l.contains(&format!(" {r} ")))
            .count()
    };
    assert!(in_round("r2") > 0);
    for r in ["r1", "r2", "r3"] {
        let probes = a
            .transcript
            .iter()
            .filter(|l| l.starts_with("trial") && l.contains(&format!(" {r} ")))
            .filter(|l| !l.contains("aggressor alone"))
            .count();
        assert!(probes > 0 || in_round(r) == 0, "{r}: solo trials only");
    }
    assert!(
        a.reason.contains("stopping rule met") || a.reason.contains("cap reached"),
        "{}",
        a.reason
    );
    let settled = results.cells.iter().filter(|c| c.settled).count();
    assert!(
        settled + 1 >= results.cells.len(),
        "{settled} of {}",
        results.cells.len()
    );
    // cpu-int under the cpu stressor: the default model slows a probe by 30% in its own class.
    let c = results
        .cells
        .iter()
        .find(|c| c.probe == "cpu-int" && c.condition == "cpu@100")
        .expect("cell");
    let d = c.estimate().unwrap();
    assert!((20.0..35.0).contains(&d), "{d}");
    assert!(c.comparison.as_ref().unwrap().significant);
    // The aggressor's own degradation is measured (the fake slows it by 1-5% beside a probe).
    assert_eq!(results.aggressor.len(), 2);
    assert!(results.aggressor.iter().all(|c| c.comparison.is_some()));
}

#[test]
fn dnr_is_recorded_with_the_reason_and_the_run_goes_on() {
    let plan = plan_of(SMALL, true);
    let script = FakeScript {
        dnr_under: vec![
            ("victim".into(), "forkbomb".into()),
            ("aggressor".into(), "forkbomb".into()),
        ],
        ..FakeScript::default()
    };
    let r = run_with(&plan, script, Arc::new(AtomicBool::new(false)));
    assert_eq!(r.status, RunStatus::Complete, "{}", r.reason);
    let results = analyze(&r.store.load_run(&r.run).unwrap());
    let cell = results
        .cells
        .iter()
        .find(|c| c.probe == "cpu-int" && c.condition == "forkbomb@100")
        .unwrap();
    let dnr = cell.dnr.as_ref().expect("DNR recorded");
    assert!(dnr.reason.contains("while forkbomb ran"), "{}", dnr.reason);
    assert!(cell.settled);
    let agg = results
        .aggressor
        .iter()
        .find(|c| c.condition == "forkbomb@100")
        .unwrap();
    assert!(agg.dnr.is_some());
    // The other cells are unaffected.
    assert!(results
        .cells
        .iter()
        .filter(|c| c.condition == "cpu@100")
        .all(|c| c.dnr.is_none() && c.comparison.is_some()));
    assert!(r.transcript.iter().any(|l| l.contains("agent restarted")));
}

#[test]
fn disturbed_trials_are_marked_and_repeated() {
    let plan = plan_of(SMALL, true);
    let script = FakeScript {
        // Calls 0 and 1 are the calibration runs of the two probes.
        disturb: [4, 7].into_iter().collect(),
        ..FakeScript::default()
    };
    let r = run_with(&plan, script, Arc::new(AtomicBool::new(false)));
    let loaded = r.store.load_run(&r.run).unwrap();
    let disturbed: Vec<_> = loaded
        .trials
        .iter()
        .filter(|t| matches!(t.status, TrialStatus::Disturbed(_)))
        .collect();
    assert_eq!(disturbed.len(), 2);
    for d in &disturbed {
        assert_eq!(d.key.attempt, 0);
        let again = loaded
            .trials
            .iter()
            .find(|t| t.key == d.key.retry() && t.tenant == d.tenant)
            .expect("repeated");
        assert_eq!(again.status, TrialStatus::Ok);
        assert!(d.status.reason().unwrap().contains("outside the run"));
    }
    let results = analyze(&loaded);
    assert_eq!(results.trust.disturbed, 2);
    assert_eq!(results.trust.repeated, 2);
}

#[test]
fn short_memory_refuses_before_the_first_trial() {
    let plan = plan_of(SMALL, true);
    let script = FakeScript {
        memory_short: Some(("victim".into(), 1 << 20)),
        ..FakeScript::default()
    };
    let r = run_with(&plan, script, Arc::new(AtomicBool::new(false)));
    assert_eq!(r.status, RunStatus::Failed);
    assert!(r.reason.contains("page access time jumped"), "{}", r.reason);
    let loaded = r.store.load_run(&r.run).unwrap();
    assert!(loaded.trials.is_empty());
    assert_eq!(
        r.transcript
            .iter()
            .filter(|l| l.starts_with("memory check victim"))
            .count(),
        3
    );
}

#[test]
fn an_interrupt_during_the_memory_check_is_an_interrupted_run() {
    let plan = plan_of(SMALL, true);
    let script = FakeScript {
        memory_short: Some(("victim".into(), 1 << 20)),
        ..FakeScript::default()
    };
    let r = run_with(&plan, script, Arc::new(AtomicBool::new(true)));
    assert_eq!(r.status, RunStatus::Interrupted, "{}", r.reason);
    assert!(r.reason.contains("--resume"), "{}", r.reason);
    let loaded = r.store.load_run(&r.run).unwrap();
    assert!(loaded.trials.is_empty());
}

/// Every (round, block, slot) the schedule asks for, given what the store holds.
fn expected_keys(plan: &Plan, store: &Store, run: &RunId) -> BTreeSet<(u32, u32, u32)> {
    let loaded = store.load_run(run).unwrap();
    let rounds = loaded.trials.iter().map(|t| t.key.round).max().unwrap();
    let mut keys = BTreeSet::new();
    for round in 0..=rounds {
        let needs = if round < plan.repetitions.min {
            first_needs(plan)
        } else {
            let trials: Vec<_> = loaded
                .trials
                .iter()
                .filter(|t| t.key.round < round)
                .collect();
            let res = analysis::analyze_trials(
                &loaded,
                Some(plan.clone()),
                &trials,
                &analysis::StatsSettings::from_plan(plan),
            );
            isobench_experiment::kinds::matrix::analysis::needs(plan, &res)
        };
        for b in round_blocks(plan, round, &needs) {
            for t in &b.trials {
                keys.insert((round, b.index, t.slot));
            }
        }
    }
    keys
}

#[test]
fn interrupted_run_resumes_with_every_trial_exactly_once() {
    let plan = plan_of(SMALL, true);
    let stop = Arc::new(AtomicBool::new(false));
    let script = FakeScript {
        interrupt_after: Some((13, stop.clone())),
        ..FakeScript::default()
    };
    let mut r = run_with(&plan, script, stop);
    assert_eq!(r.status, RunStatus::Interrupted);
    assert!(r.reason.contains("--resume"), "{}", r.reason);
    let before: BTreeSet<(TrialKey, String)> = r.store.completed_trial_keys(&r.run).unwrap();
    assert!(!before.is_empty());

    // Resume with a fresh platform, as a new process would.
    let plan2 = prepare_resume(&mut r.store, &r.run).unwrap();
    // The plan read back is the plan stored (floats go through JSON once).
    let stored: Plan = serde_json::from_value(serde_json::to_value(&plan).unwrap()).unwrap();
    assert_eq!(plan2, stored);
    assert_eq!(plan2.seed, plan.seed);
    assert_eq!(plan2.conditions, plan.conditions);
    let (mut backend, clock) = FakeBackend::new(99, FakeScript::default());
    let mut t = Transcript::default();
    let out = Engine::new(
        &plan2,
        r.run.clone(),
        EngineIo::new(&mut r.store, &mut backend, &clock, &mut t),
        EngineOptions::default(),
    )
    .execute()
    .unwrap();
    assert_eq!(out.status, RunStatus::Complete, "{}", out.reason);
    assert!(out.trials_skipped > 0);
    assert!(
        t.lines[0].contains(&format!("{} done", before.len())),
        "{}",
        t.lines[0]
    );

    // Nothing lost: every record stored before is still there, unchanged.
    let after = r.store.completed_trial_keys(&r.run).unwrap();
    assert!(before.is_subset(&after));
    // Nothing repeated and nothing missing: the stored trials are exactly the scheduled ones.
    let loaded = r.store.load_run(&r.run).unwrap();
    let mut stored = BTreeSet::new();
    for tr in &loaded.trials {
        let k = tr.key;
        assert_eq!(k.attempt, 0, "no disturbance was scripted");
        stored.insert((k.round, k.block, k.slot));
    }
    assert_eq!(stored, expected_keys(&plan, &r.store, &r.run));
    // Resuming a complete run is refused with a clear message.
    let e = prepare_resume(&mut r.store, &r.run)
        .unwrap_err()
        .to_string();
    assert!(e.contains("is complete"), "{e}");
}

#[test]
fn host_platform_leaves_unsafe_stressors_out_or_refuses() {
    // The small scenario says nothing about unsafe_on_host: refused, located.
    let sc = Scenario::parse(Source::new("small.toml", SMALL)).unwrap();
    let host = HostView::synthetic(2, 8 << 30, false);
    let e = Plan::resolve(&sc, &host, &PlanOptions::default()).unwrap_err();
    insta::assert_snapshot!("host_refuses_forkbomb", e.to_string());
    // With "skip" it is left out, with a note.
    let text = SMALL.replace("seed = 7", "seed = 7\nunsafe_on_host = \"skip\"");
    let plan = plan_of(&text, false);
    assert_eq!(plan.conditions.len(), 1);
    assert!(
        plan.notes.iter().any(|n| n.contains("forkbomb")),
        "{:?}",
        plan.notes
    );
}

#[test]
fn quick_scenario_fits_five_minutes_on_two_cores() {
    let sc = Scenario::quick();
    for cgroup in [true, false] {
        let host = HostView::synthetic(2, 24 << 30, cgroup);
        let plan = Plan::resolve(
            &sc,
            &host,
            &PlanOptions {
                skip_unsupported: true,
                ..PlanOptions::default()
            },
        )
        .unwrap();
        // One round (where most cells settle) fits in five minutes; the cap on rounds is
        // for the cells that stay wide.
        assert!(
            plan.estimate.secs_min < 300.0,
            "cgroup={cgroup}: {}",
            plan.estimate.text()
        );
        if !cgroup {
            assert!(plan
                .conditions
                .iter()
                .all(|c| !["forkbomb", "memhog", "disk"].contains(&c.name.as_str())));
        }
    }
}

#[test]
fn two_victims_run_each_probe_at_once_and_get_their_own_rows() {
    let text = SMALL.replace(
        "[[tenant]]\nname = \"aggressor\"",
        "[[tenant]]\nname = \"victim2\"\nrole = \"victim\"\n\n[[tenant]]\nname = \"aggressor\"",
    );
    let plan = plan_of(&text, true);
    assert_eq!(plan.tenants.len(), 3);
    let r = run_default(&plan);
    assert_eq!(r.status, RunStatus::Complete, "{}", r.reason);
    let loaded = r.store.load_run(&r.run).unwrap();
    // Every probe trial has one record per victim, with the same key but its own tenant.
    for t in loaded.trials.iter().filter(|t| t.tenant == "victim") {
        let other = loaded
            .trials
            .iter()
            .find(|x| x.key == t.key && x.tenant == "victim2")
            .unwrap();
        assert_eq!(other.probe, t.probe);
    }
    let results = analyze(&loaded);
    let tenants: BTreeSet<&str> = results.cells.iter().map(|c| c.tenant.as_str()).collect();
    assert_eq!(tenants, ["victim", "victim2"].into_iter().collect());
}

#[test]
fn the_mean_can_replace_the_median() {
    let text = SMALL.replace(
        "ci_half_width = 2.0",
        "ci_half_width = 2.0\nestimator = \"mean\"",
    );
    let plan = plan_of(&text, true);
    assert_eq!(plan.repetitions.estimator, isobench_stats::Estimator::Mean);
    let r = run_default(&plan);
    let results = analyze(&r.store.load_run(&r.run).unwrap());
    let c = results
        .cells
        .iter()
        .find(|c| c.comparison.is_some())
        .unwrap();
    assert_eq!(
        c.comparison.as_ref().unwrap().degradation.estimator,
        isobench_stats::Estimator::Mean
    );
}

#[test]
fn paired_conditions_repeat_their_pair_within_a_round() {
    // Every condition forced to paired trials: each round repeats a condition's pair of blocks
    // (three in the first round), so cells gather more pairs than the run has rounds, every
    // pair matched with the baseline block next to it.
    let text = SMALL.replace(
        "baseline_every = 1",
        "baseline_every = 1\ndesign = \"paired\"",
    );
    let plan = plan_of(&text, true);
    let ran = run_default(&plan);
    assert_eq!(ran.status, RunStatus::Complete, "{}", ran.reason);
    let loaded = ran.store.load_run(&ran.run).unwrap();
    let rounds = loaded.trials.iter().map(|t| t.key.round).max().unwrap() + 1;
    let results = analyze(&loaded);
    for c in &results.cells {
        assert_eq!(c.design, Some(isobench_experiment::plan::Design::Paired));
        let est = c.paired.as_ref().expect("paired estimate");
        assert!(
            est.n >= FIRST_PAIRS as usize && est.n as u32 > rounds,
            "{} {}: {} pairs in {rounds} rounds",
            c.probe,
            c.condition,
            est.n
        );
    }
    // The aggressor's own rate: once per round and condition, not once per pair.
    let solo = loaded
        .trials
        .iter()
        .filter(|t| t.probe == "(alone)")
        .count();
    assert!(
        solo as u32 <= rounds * plan.conditions.len() as u32,
        "{solo}"
    );
}

#[test]
fn a_time_budget_goes_to_the_cells_it_can_settle() {
    // A target no cell can reach: with a budget the run stops before it would end past it,
    // and its later rounds leave out the cells that would need the most time.
    let text = SMALL
        .replace(
            "ci_half_width = 2.0",
            "ci_half_width = 0.01\nmax_time = \"40s\"",
        )
        .replace("max = 6", "max = 50")
        .replace("min = 3", "min = 1");
    let plan = plan_of(&text, true);
    let ran = run_default(&plan);
    assert_eq!(ran.status, RunStatus::Complete, "{}", ran.reason);
    assert!(ran.reason.contains("time budget reached"), "{}", ran.reason);
    assert!(
        ran.elapsed <= std::time::Duration::from_secs(40),
        "ran {:?}",
        ran.elapsed
    );
    let (store, run) = (ran.store, ran.run);
    // Later rounds measured fewer cells than the first.
    let loaded = store.load_run(&run).unwrap();
    let per_round = |r: u32| {
        loaded
            .trials
            .iter()
            .filter(|x| x.key.round == r && x.tenant == "victim")
            .count()
    };
    let last = loaded.trials.iter().map(|x| x.key.round).max().unwrap();
    assert!(last >= plan.repetitions.min, "only {last} rounds");
    assert!(
        per_round(last) < per_round(0),
        "{} vs {}",
        per_round(last),
        per_round(0)
    );
}

const PLACEMENT: &str = r#"
name = "placement"
kind = "matrix"
seed = 5

[trial]
duration = "200ms"
warmup = "100ms"
solo = "200ms"

[repetitions]
min = 3
max = 4

[[tenant]]
name = "victim"
role = "victim"
limits = { memory = "512M", pids = 128 }

[[tenant]]
name = "aggressor"
role = "aggressor"
limits = { memory = "512M", pids = 64 }

[[probe]]
name = "cpu-int"
metrics = ["ops_per_sec"]

[[probe]]
name = "net-rtt"
metrics = ["udp_rtt_p50_ns"]

[[probe]]
name = "disk-io"
params = { ops = "dioread" }
metrics = ["dioread_mbps"]

[[stressor]]
name = "cpu"

[[stressor]]
name = "net-tx"
"#;

#[test]
fn placement_causes_are_named_from_the_trials_mechanism() {
    let plan = plan_of(PLACEMENT, true);
    let host = serde_json::json!({
        "cpuidle_driver": "none",
        "device_irqs": [{"device": "vda", "kind": "disk", "irqs": [
            {"irq": "36", "per_cpu": [0, 9865996], "desc": "PCI-MSIX-0000:00:02.0 1-edge virtio1-req.0"}
        ]}],
    });
    let cell_causes = |placement: bool| {
        let mut store = Store::open_in_memory().unwrap();
        let (mut backend, clock) = FakeBackend::new(
            plan.seed,
            FakeScript {
                placement,
                ..FakeScript::default()
            },
        );
        let run = create_run(&mut store, &plan, PLACEMENT, "fake", host.clone(), 0).unwrap();
        let mut t = Transcript::default();
        Engine::new(
            &plan,
            run.clone(),
            EngineIo::new(&mut store, &mut backend, &clock, &mut t),
            EngineOptions::default(),
        )
        .execute()
        .unwrap();
        let loaded = store.load_run(&run).unwrap();
        assert_eq!(
            loaded.trials.iter().any(|t| t.mechanism.is_some()),
            placement
        );
        analyze(&loaded)
    };
    let r = cell_causes(true);
    let kinds = |probe: &str, cond: &str| -> Vec<&str> {
        let c = r
            .cells
            .iter()
            .find(|c| c.probe == probe && c.condition == cond)
            .unwrap();
        c.causes.iter().map(|x| x.kind.as_str()).collect()
    };
    assert_eq!(kinds("cpu-int", "cpu@100"), ["shared-cpus"]);
    assert_eq!(kinds("disk-io", "cpu@100"), ["shared-cpus", "irq-cpu"]);
    assert_eq!(kinds("net-rtt", "cpu@100"), ["idle-states"]);
    assert_eq!(kinds("net-rtt", "net-tx@100"), ["shared-cpus", "softirq"]);
    let c = r
        .cells
        .iter()
        .find(|c| c.probe == "cpu-int" && c.condition == "cpu@100")
        .unwrap();
    assert!(
        c.causes[0].text.starts_with("shared CPUs: run-queue wait ")
            && c.causes[0].text.contains("(40% vs 1% of the time)"),
        "{}",
        c.causes[0].text
    );
    // The victim's own rows only: the aggressor's rate has no cause.
    assert!(r.aggressor.iter().all(|c| c.causes.is_empty()));
    // Without the evidence, no cause is named.
    assert!(cell_causes(false).cells.iter().all(|c| c.causes.is_empty()));
}

#[test]
fn each_aggressor_runs_its_own_assignment_and_an_idle_one_runs_nothing() {
    let two = SMALL.replace(
        "[[probe]]\nname = \"cpu-int\"",
        "[[tenant]]\nname = \"second\"\nrole = \"aggressor\"\nlimits = { memory = \"512M\", pids = 64 }\n\n[[probe]]\nname = \"cpu-int\"",
    );
    let mut plan = plan_of(&two, true);
    plan.conditions.truncate(1);
    let cpu = &mut plan.conditions[0];
    let own = cpu.assignments.get_mut("aggressor").unwrap();
    own.stressor = "cache".into();
    own.intensity = 50;
    assert!(cpu.assignments.remove("second").is_some());

    let r = run_default(&plan);
    let starts: Vec<&str> = r
        .log
        .iter()
        .map(String::as_str)
        .filter(|l| l.starts_with("start "))
        .collect();
    assert!(!starts.is_empty());
    assert!(
        starts.iter().all(|&l| l == "start aggressor cache@50"),
        "{starts:?}"
    );
    let loaded = r.store.load_run(&r.run).unwrap();
    let reports: Vec<_> = loaded
        .trials
        .iter()
        .flat_map(|t| &t.stressor_reports)
        .collect();
    assert!(!reports.is_empty());
    assert!(reports
        .iter()
        .all(|r| r.tenant == "aggressor" && r.stressor == "cache" && r.intensity == 50));
    assert!(loaded.trials.iter().all(|t| t.tenant != "second"));
}

#[test]
fn a_pool_table_declares_count_tenants_and_each_gets_an_agent() {
    let pool = SMALL.replace(
        "name = \"aggressor\"\nrole = \"aggressor\"",
        "name = \"agg\"\ncount = 64\nrole = \"aggressor\"",
    );
    let plan = plan_of(&pool, true);
    let names: Vec<&str> = plan.tenants.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names.len(), 65);
    assert_eq!(names[1], "agg-1");
    assert_eq!(names[64], "agg-64");
    assert!(plan.tenants[1..]
        .iter()
        .all(|t| t.limits.to_string() == plan.tenants[1].limits.to_string()));
    // Every aggressor of the pool runs the matrix's stressor.
    assert_eq!(plan.conditions[0].assignments.len(), 64);

    let mut plan = plan;
    plan.conditions.truncate(1);
    plan.repetitions.min = 1;
    plan.repetitions.max = 1;
    let r = run_default(&plan);
    assert_eq!(r.status, RunStatus::Complete, "{}", r.reason);
    let created = r.log.iter().filter(|l| l.starts_with("create ")).count();
    let torn = r
        .log
        .iter()
        .filter(|l| l.starts_with("teardown agg-"))
        .count();
    assert_eq!((created, torn), (65, 64));
    let started: BTreeSet<&str> = r
        .log
        .iter()
        .filter_map(|l| l.strip_prefix("start "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    assert_eq!(started.len(), 64);
}

#[test]
fn a_condition_sets_its_limits_for_its_trials_and_restores_them() {
    use isobench_experiment::plan::LimitOverride;
    let mut plan = plan_of(SMALL, true);
    plan.conditions.truncate(1);
    plan.repetitions.min = 1;
    plan.repetitions.max = 1;
    plan.conditions[0]
        .limits
        .insert("victim".into(), LimitOverride { cpus: Some(0.5) }.into());
    let r = run_default(&plan);
    assert_eq!(r.status, RunStatus::Complete, "{}", r.reason);

    // Set before the aggressors start, put back after they stop: every trial in between.
    let lines: Vec<&str> = r
        .log
        .iter()
        .map(String::as_str)
        .filter(|l| l.starts_with("limit ") || l.starts_with("start ") || l.starts_with("stop "))
        .collect();
    let set = lines
        .iter()
        .filter(|l| **l == "limit victim cpus=0.5")
        .count();
    let back = lines
        .iter()
        .filter(|l| **l == "limit victim cpus=none")
        .count();
    assert!(set >= 1 && set == back, "{lines:?}");
    for pair in lines.chunks(4) {
        assert_eq!(
            pair,
            [
                "limit victim cpus=0.5",
                "start aggressor cpu@100",
                "stop aggressor",
                "limit victim cpus=none"
            ],
            "{lines:?}"
        );
    }

    // The setting is stored with every contended trial, and with no baseline trial.
    let loaded = r.store.load_run(&r.run).unwrap();
    let mut contended = 0;
    for t in &loaded.trials {
        if t.condition.to_string() == "baseline" {
            assert_eq!(t.limits, None, "{t:?}");
        } else {
            contended += 1;
            assert_eq!(
                t.limits,
                Some(serde_json::json!({"victim": {"cpus": 0.5, "read_back": {"cpus": 0.5}}}))
            );
        }
    }
    assert!(contended > 0);
}

/// A progress sink that, at the first trial, has another connection take the database's
/// write lock (`BEGIN EXCLUSIVE`, as a `sqlite3` shell or a backup would) and hold it for
/// `hold`.
struct LockAtFirstTrial {
    path: std::path::PathBuf,
    hold: std::time::Duration,
    locker: Option<std::thread::JoinHandle<()>>,
    t: Transcript,
}

impl Progress for LockAtFirstTrial {
    fn event(&mut self, event: &Event) {
        if matches!(event, Event::TrialStarted(_)) && self.locker.is_none() {
            let (path, hold) = (self.path.clone(), self.hold);
            let (tx, rx) = std::sync::mpsc::channel();
            self.locker = Some(std::thread::spawn(move || {
                let c = rusqlite::Connection::open(path).unwrap();
                c.execute_batch("BEGIN EXCLUSIVE").unwrap();
                tx.send(()).unwrap();
                std::thread::sleep(hold);
                c.execute_batch("ROLLBACK").unwrap();
            }));
            rx.recv().unwrap();
        }
        self.t.event(event);
    }
}

/// Runs `plan` on the fake platform into a database file whose lock another connection
/// holds for `hold` from the first trial; the store gives up on a lock after 100 ms.
fn run_locked(
    plan: &Plan,
    hold: std::time::Duration,
    patience: std::time::Duration,
) -> (
    anyhow::Result<isobench_experiment::orchestrator::RunOutcome>,
    Vec<String>,
    Store,
    RunId,
    std::path::PathBuf,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let opts = OpenOptions {
        busy_timeout: std::time::Duration::from_millis(100),
    };
    let mut store = Store::open_with(&path, &opts).unwrap();
    let (mut backend, clock) = FakeBackend::new(plan.seed, FakeScript::default());
    let run = create_run(&mut store, plan, SMALL, "fake", serde_json::json!({}), 0).unwrap();
    let mut p = LockAtFirstTrial {
        path: path.clone(),
        hold,
        locker: None,
        t: Transcript::default(),
    };
    let out = Engine::new(
        plan,
        run.clone(),
        EngineIo::new(&mut store, &mut backend, &clock, &mut p),
        EngineOptions {
            lock_patience: patience,
            ..EngineOptions::default()
        },
    )
    .execute();
    p.locker.take().unwrap().join().unwrap();
    (out, p.t.lines, store, run, path, dir)
}

/// Regression: a database locked by another process for longer than the store's busy
/// timeout failed the run and lost the trial just measured.
#[test]
fn a_database_locked_mid_run_is_waited_for_and_no_trial_is_lost() {
    let plan = plan_of(SMALL, true);
    let ms = std::time::Duration::from_millis;
    let (out, lines, store, run, _, _dir) = run_locked(&plan, ms(600), ms(10_000));
    let out = out.expect("the run waits for the lock");
    assert_eq!(out.status, RunStatus::Complete, "{}", out.reason);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("is locked by another process")),
        "{lines:#?}"
    );
    let stored: BTreeSet<(u32, u32, u32)> = store
        .load_run(&run)
        .unwrap()
        .trials
        .iter()
        .map(|t| (t.key.round, t.key.block, t.key.slot))
        .collect();
    assert_eq!(stored, expected_keys(&plan, &store, &run));
}

#[test]
fn a_database_locked_past_the_patience_fails_naming_the_file_and_the_resume() {
    let plan = plan_of(SMALL, true);
    let ms = std::time::Duration::from_millis;
    let (out, _, _, run, path, _dir) = run_locked(&plan, ms(1_500), ms(0));
    let e = format!("{:#}", out.expect_err("the lock outlasts the patience"));
    assert!(e.contains(&path.display().to_string()), "{e}");
    assert!(e.contains("locked"), "{e}");
    assert!(e.contains(&format!("--resume {run}")), "{e}");
}

/// Every trial records every tenant's pressure stalls and delivered I/O, read from the
/// tenants before and after the measurement; the analysis summarises them per condition and
/// names the victim's stall in the trust. The fake tenants stall as `fake_usage_rates`
/// says: 2% on CPU alone, 32% beside a running CPU hog (less while it is frozen).
#[test]
fn each_trial_records_every_tenants_pressure_and_io_and_the_trust_names_the_victims_stall() {
    use isobench_experiment::fake::fake_usage_rates;
    use isobench_workloads::Class;
    let plan = plan_of(SMALL, true);
    let ran = run_with(
        &plan,
        FakeScript {
            usage: true,
            ..FakeScript::default()
        },
        Arc::new(AtomicBool::new(false)),
    );
    let loaded = ran.store.load_run(&ran.run).unwrap();
    let alone = fake_usage_rates(&[], None)[0];
    let beside_hog = fake_usage_rates(&[Class::Cpu], None)[0];
    let mut keys = BTreeSet::new();
    for t in &loaded.trials {
        if t.tenant_usage.is_empty() {
            continue;
        }
        assert!(keys.insert(t.key), "usage recorded twice for {}", t.key);
        let names: Vec<&str> = t.tenant_usage.iter().map(|u| u.tenant.as_str()).collect();
        assert_eq!(names, ["victim", "aggressor"], "{}", t.key);
        let v = &t.tenant_usage[0];
        assert!(v.interval_s > 0.0);
        let cpu = v.cpu.unwrap().some;
        match t.condition.to_string().as_str() {
            "baseline" => assert!((cpu - alone).abs() < 1e-4, "{}: {cpu}", t.key),
            "cpu@100" => assert!(
                cpu > alone + 0.05 && cpu <= beside_hog + 1e-4,
                "{}: {cpu}",
                t.key
            ),
            _ => {}
        }
        assert_eq!(v.memory.map(|m| m.some), Some(0.0));
        assert!((v.read_bytes_per_s.unwrap() - 1e6).abs() < 10.0, "{v:?}");
    }
    let all: BTreeSet<_> = loaded.trials.iter().map(|t| t.key).collect();
    assert_eq!(keys, all, "every trial has one record carrying the usage");

    let r = analyze(&loaded);
    let row = |tenant: &str, cond: &str| {
        r.usage
            .iter()
            .find(|u| u.tenant == tenant && u.condition == cond)
            .unwrap_or_else(|| panic!("no usage row for {tenant} under {cond}: {:?}", r.usage))
    };
    // Beside a fork bomb the fake victim stalls on nothing more; beside the CPU hog it does
    // (on/off trials hold both phases, so their figures cover the whole trial).
    let fork = row("victim", "forkbomb@100").cpu.unwrap();
    assert!((fork.some_median - alone).abs() < 1e-4, "{fork:?}");
    let hog = row("victim", "cpu@100").cpu.unwrap();
    assert!(
        hog.some_median > 0.1 && hog.some_max <= beside_hog + 1e-4,
        "{hog:?}"
    );
    assert_eq!(row("aggressor", "cpu@100").role, "aggressor");
    assert_eq!(r.trust.victim_pressure_measured, Some(true));
    let worst = &r.trust.victim_stalls[0];
    assert_eq!(
        (
            worst.tenant.as_str(),
            worst.condition.as_str(),
            worst.resource.as_str()
        ),
        ("victim", "cpu@100", "cpu")
    );

    // A platform without these counters records nothing, and the trust says nothing.
    let plain = run_default(&plan);
    let loaded = plain.store.load_run(&plain.run).unwrap();
    assert!(loaded.trials.iter().all(|t| t.tenant_usage.is_empty()));
    let r = analyze(&loaded);
    assert!(r.usage.is_empty());
    assert_eq!(r.trust.victim_pressure_measured, None);
}

#[test]
fn a_pilot_probe_that_outlives_its_cancel_gets_a_fresh_agent_and_the_trials_run() {
    let plan = plan_of(SMALL, true);
    let first = run_default(&plan);
    assert!(
        first.transcript.iter().any(|l| l.contains("pilot: ")),
        "this plan has on/off cells, so a pilot: {:?}",
        first.transcript
    );
    assert!(!first
        .transcript
        .iter()
        .any(|l| l.contains("agent restarted")));
    // Calibration runs each probe once in the one victim; the next probe run is the first
    // pilot. It overruns: the fake agent refuses every later probe as busy until restarted
    // (a real probe stuck in a slow setup under emulation did this).
    let script = FakeScript {
        overrun: [plan.probes.len()].into_iter().collect(),
        ..FakeScript::default()
    };
    let r = run_with(&plan, script, Arc::new(AtomicBool::new(false)));
    assert_eq!(r.status, RunStatus::Complete, "{}", r.reason);
    assert!(
        r.transcript.iter().any(|l| l.contains("pilot of")),
        "{:?}",
        r.transcript
    );
    assert!(
        r.transcript
            .iter()
            .any(|l| l.contains("victim: agent restarted")),
        "{:?}",
        r.transcript
    );
    let loaded = r.store.load_run(&r.run).unwrap();
    let busy: Vec<_> = loaded
        .trials
        .iter()
        .filter(|t| format!("{:?}", t.status).contains("busy"))
        .collect();
    assert!(busy.is_empty(), "{} trials refused busy", busy.len());
    let results = analyze(&loaded);
    assert!(results
        .cells
        .iter()
        .all(|c| c.dnr.is_none() && c.comparison.is_some()));
}

/// A condition that changes memory, io and weight knobs (and lifts one) sets them before
/// its aggressors start and puts the planned values back after they stop, and every
/// contended trial records them as set and as read back.
#[test]
fn a_condition_sets_any_knob_for_its_trials_and_restores_the_plan() {
    use isobench_experiment::plan::KnobOverride;
    let mut plan = plan_of(SMALL, true);
    plan.conditions.truncate(1);
    plan.repetitions.min = 1;
    plan.repetitions.max = 1;
    let stored = serde_json::json!({
        "memory": "256M", "memory_low": "128M", "weight": 50, "io_weight": 200,
        "io_read_bps": "10M", "pids": null
    });
    let o: KnobOverride = serde_json::from_value(stored.clone()).unwrap();
    plan.conditions[0].limits.insert("victim".into(), o);
    plan.check_live_knobs().unwrap();
    let r = run_default(&plan);
    assert_eq!(r.status, RunStatus::Complete, "{}", r.reason);

    let set = "limit victim weight=50,memory=256M,memory_low=128M,io_read_bps=10M,\
               io_weight=200,pids=none";
    let back = "limit victim memory=512M,pids=128,weight=none,memory_low=none,\
                io_read_bps=none,io_weight=none";
    let lines: Vec<&str> = r
        .log
        .iter()
        .map(String::as_str)
        .filter(|l| l.starts_with("limit ") || l.starts_with("start ") || l.starts_with("stop "))
        .collect();
    assert!(!lines.is_empty());
    for block in lines.chunks(4) {
        assert_eq!(
            block,
            [set, "start aggressor cpu@100", "stop aggressor", back],
            "{lines:?}"
        );
    }

    let mut recorded = stored.clone();
    recorded["read_back"] = stored;
    let loaded = r.store.load_run(&r.run).unwrap();
    let mut contended = 0;
    for t in &loaded.trials {
        if t.condition.to_string() == "baseline" {
            assert_eq!(t.limits, None, "{t:?}");
        } else {
            contended += 1;
            assert_eq!(
                t.limits,
                Some(serde_json::json!({ "victim": recorded.clone() }))
            );
        }
    }
    assert!(contended > 0);
}

/// A knob the platform cannot change while a tenant lives is refused before any tenant
/// exists, and, reached anyway, fails the condition's trials with the reason without
/// touching the tenant.
#[test]
fn a_knob_the_platform_cannot_change_live_fails_the_condition_with_the_reason() {
    use isobench_experiment::plan::KnobOverride;
    let mut plan = plan_of(SMALL, true);
    plan.platform = "host".parse().unwrap();
    plan.conditions.truncate(1);
    plan.repetitions.min = 1;
    plan.repetitions.max = 1;
    let o: KnobOverride = serde_json::from_value(serde_json::json!({"memory_low": "64M"})).unwrap();
    plan.conditions[0].limits.insert("victim".into(), o);
    let e = plan.check_live_knobs().unwrap_err();
    assert!(
        e.contains("changes knobs while its tenants live")
            && e.contains("tenant victim: the `host` platform cannot change `memory_low`")
            && e.contains("use the `cgroup` platform"),
        "{e}"
    );
    let r = run_default(&plan);
    assert!(
        !r.log.iter().any(|l| l.starts_with("limit ")),
        "the tenant is not touched: {:?}",
        r.log
    );
    let loaded = r.store.load_run(&r.run).unwrap();
    let failed: Vec<&TrialStatus> = loaded
        .trials
        .iter()
        .filter(|t| t.condition != isobench_store::Condition::Baseline)
        .map(|t| &t.status)
        .collect();
    assert!(!failed.is_empty());
    for s in failed {
        assert!(
            matches!(s, TrialStatus::Failed(why) if why.contains("cannot change `memory_low`")),
            "{s:?}"
        );
    }
}

#[test]
fn a_stressor_counted_at_its_stop_is_started_and_stopped_with_each_trial() {
    let text = SMALL.replace(
        "[[stressor]]\nname = \"cpu\"\n\n[[stressor]]\nname = \"forkbomb\"\n",
        "[[stressor]]\nname = \"command\"\nparams = { cmd = \"stress-ng --cpu 1\", progress = 'regex:cpu\\s+(\\d+)', counted = \"at-stop\" }\n",
    );
    let plan = plan_of(&text, true);
    let r = run_default(&plan);
    let loaded = r.store.load_run(&r.run).unwrap();
    let under: Vec<_> = loaded
        .trials
        .iter()
        .filter(|t| t.condition != isobench_store::Condition::Baseline)
        .collect();
    assert!(!under.is_empty());
    // One start and one stop per trial under the stressor (a victim's trial, or the
    // aggressor's alone), none left to the end of a block.
    let trials: BTreeSet<_> = under.iter().map(|t| t.key).collect();
    let count = |what: &str| r.log.iter().filter(|l| l.starts_with(what)).count();
    assert_eq!(count("start aggressor"), trials.len(), "{:?}", r.log);
    assert_eq!(count("stop aggressor"), trials.len(), "{:?}", r.log);
    // Every trial carries the rate read from its stop, alone and beside the probes.
    let reports: Vec<_> = under.iter().flat_map(|t| &t.stressor_reports).collect();
    assert_eq!(reports.len(), trials.len());
    assert!(reports.iter().all(|s| s.ops > 0.0 && s.ops_per_sec > 0.0));
}
