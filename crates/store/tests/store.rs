//! Behaviour of the store on real files: round trip, migrations, refusals, locking, resume.

use std::path::Path;
use std::time::Duration;

use isobench_store::{
    Condition, CpuSample, CpuSeries, Direction, Fact, HistogramRecord, Modulation, NewRun,
    OpenOptions, Role, RunId, RunStatus, SampleRecord, ScheduledSwitch, SeriesRecord, StallRecord,
    Store, StoreError, StressorMode, StressorReport, Switch, TenantRecord, TenantUsageRecord,
    Timeline, Timestamp, TrialKey, TrialRecord, TrialStatus, WindowRecord, SCHEMA_VERSION,
};
use serde_json::json;

fn new_run() -> NewRun {
    NewRun {
        scenario_name: "cache-vs-cpu".into(),
        scenario_text: "[experiment]\nkind = \"matrix\"\n".into(),
        seed: u64::MAX - 7,
        tool_version: "0.1.0".into(),
        started_at: Timestamp::from_unix_millis(1_767_225_600_000),
        host_facts: json!({"cpu_model": "Test CPU", "cores": 8, "cgroup": "v2"}),
        platform: "cgroup".into(),
        platform_version: "v2".into(),
    }
}

fn tenants() -> Vec<TenantRecord> {
    vec![
        TenantRecord {
            name: "victim".into(),
            role: Role::Victim,
            platform: "cgroup".into(),
            limits: json!({"cpuset": "0-1", "memory": 1_073_741_824u64}),
        },
        TenantRecord {
            name: "noisy".into(),
            role: Role::Aggressor,
            platform: "cgroup".into(),
            limits: json!({"cpuset": "2-3", "pids": 256}),
        },
    ]
}

/// Trial number `n` of a plan: one trial per block, two blocks per round.
fn key(n: u32) -> TrialKey {
    TrialKey {
        round: n / 2,
        block: n % 2,
        slot: 0,
        attempt: 0,
    }
}

fn trial(n: u32, condition: Condition, value: f64) -> TrialRecord {
    let contended = condition != Condition::Baseline;
    TrialRecord {
        key: key(n),
        probe: "cache-latency".into(),
        tenant: "victim".into(),
        condition,
        repetition: n / 2,
        status: TrialStatus::Ok,
        started_at: Timestamp::from_unix_millis(1_767_225_600_000 + n as i64 * 1000),
        ended_at: Timestamp::from_unix_millis(1_767_225_600_900 + n as i64 * 1000),
        load_note: Some("loadavg 0.10".into()),
        samples: vec![
            SampleRecord {
                metric: "l2_ns".into(),
                unit: "ns".into(),
                direction: Direction::Lower,
                value,
            },
            SampleRecord {
                metric: "accesses_per_s".into(),
                unit: "ops/s".into(),
                direction: Direction::Higher,
                value: 1e9 / value,
            },
        ],
        histograms: vec![HistogramRecord {
            metric: "l2_ns".into(),
            base64: "HISTFAAAAB14nJNpmSzMwMDAxAABzFCaEUzOmNZg/wEAOaEEHQ==".into(),
        }],
        stressor_reports: if contended {
            vec![StressorReport {
                tenant: "noisy".into(),
                stressor: "cache".into(),
                intensity: 50,
                mode: StressorMode::Contended,
                ops: 12_345.0,
                ops_per_sec: 24_690.0,
            }]
        } else {
            vec![]
        },
        series: if contended {
            vec![SeriesRecord {
                metric: "l2_ns".into(),
                windows: vec![
                    WindowRecord {
                        start_ns: 1_000,
                        end_ns: 21_000,
                        value,
                    },
                    WindowRecord {
                        start_ns: 21_000,
                        end_ns: 41_000,
                        value: value * 1.5,
                    },
                ],
            }]
        } else {
            Vec::new()
        },
        modulation: contended.then(|| Modulation {
            period_ns: 40_000,
            guard_ns: 5_000,
            initially_on: true,
            start_ns: 0,
            end_ns: 41_000,
            switches: vec![Switch {
                requested_ns: 20_000,
                done_ns: 20_500,
                on: false,
            }],
        }),
        noise: contended.then(|| serde_json::json!({"steal_cpus": 0.01, "canary_speed": 0.98})),
        mechanism: Some(
            serde_json::json!({"on": {"runq_wait_s": 0.02}, "off": {"runq_wait_s": 0.001}}),
        ),
        timeline: None,
        limits: contended.then(|| serde_json::json!({"victim": {"cpus": 0.5}})),
        tenant_usage: usage(contended),
    }
}

/// Each tenant's pressure and delivered I/O: a victim on cgroup v2 stalled on memory
/// (contended), an aggressor on a platform without pressure counters (only its I/O).
fn usage(contended: bool) -> Vec<TenantUsageRecord> {
    let victim = TenantUsageRecord {
        tenant: "victim".into(),
        interval_s: 0.9,
        cpu: Some(StallRecord {
            some: 0.02,
            full: Some(0.0),
        }),
        memory: Some(StallRecord {
            some: if contended { 0.35 } else { 0.0 },
            full: Some(if contended { 0.1 } else { 0.0 }),
        }),
        io: Some(StallRecord {
            some: 0.01,
            full: None,
        }),
        read_bytes_per_s: Some(4096.0),
        write_bytes_per_s: Some(0.0),
        read_ops_per_s: Some(1.0),
        write_ops_per_s: Some(0.0),
    };
    let noisy = TenantUsageRecord {
        tenant: "noisy".into(),
        interval_s: 0.9,
        cpu: None,
        memory: None,
        io: None,
        read_bytes_per_s: Some(0.0),
        write_bytes_per_s: Some(52_428_800.0),
        read_ops_per_s: Some(0.0),
        write_ops_per_s: Some(400.0),
    };
    if contended {
        vec![victim, noisy]
    } else {
        vec![victim]
    }
}

fn setup(path: &Path) -> (Store, RunId) {
    let mut store = Store::open(path).unwrap();
    let run = store.create_run(&new_run()).unwrap();
    for t in tenants() {
        store.add_tenant(&run, &t).unwrap();
    }
    (store, run)
}

fn journal_mode(path: &Path) -> String {
    let c = rusqlite::Connection::open(path).unwrap();
    c.pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap()
}

#[test]
fn round_trip_of_a_whole_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.db");
    let (mut store, run) = setup(&path);
    assert!(run.as_str().starts_with("20260101-000000-"), "{run}");
    assert_eq!(run.as_str().len(), "20260101-000000-abcdef".len());

    let trials = vec![
        trial(0, Condition::Baseline, 4.0),
        trial(1, Condition::stressor("cache", 50), 9.5),
        TrialRecord {
            status: TrialStatus::Dnr("agent stopped answering after 30 s".into()),
            samples: vec![],
            histograms: vec![],
            ..trial(2, Condition::Baseline, 1.0)
        },
        trial(3, Condition::stressor("cache", 50), 9.0),
    ];
    for t in &trials {
        store.record_trial(&run, t).unwrap();
    }
    store
        .record_fact(
            &run,
            &Fact {
                scope: "host".into(),
                key: "llc_bytes_measured".into(),
                value: json!(8_388_608),
            },
        )
        .unwrap();
    store
        .record_fact(
            &run,
            &Fact {
                scope: "host".into(),
                key: "llc_bytes_measured".into(),
                value: json!(6_291_456),
            },
        )
        .unwrap();
    let ended = Timestamp::from_unix_millis(1_767_225_700_000);
    store
        .finish_run(&run, RunStatus::Complete, None, ended)
        .unwrap();
    drop(store);

    // A fresh process reads back exactly what was written.
    let store = Store::open(&path).unwrap();
    let loaded = store.load_run(&run).unwrap();
    let expected_run = new_run();
    assert_eq!(loaded.run.id, run);
    assert_eq!(loaded.run.seed, expected_run.seed);
    assert_eq!(loaded.run.scenario_text, expected_run.scenario_text);
    assert_eq!(loaded.run.host_facts, expected_run.host_facts);
    assert_eq!(loaded.run.status, RunStatus::Complete);
    assert_eq!(loaded.run.ended_at, Some(ended));
    assert_eq!(loaded.run.schema_version, SCHEMA_VERSION);
    assert_eq!(loaded.run.tool_version, "0.1.0");
    assert_eq!(loaded.run.platform_version, "v2");
    assert_eq!(loaded.tenants, tenants());
    assert_eq!(loaded.trials, trials);
    assert_eq!(loaded.facts.len(), 1);
    assert_eq!(loaded.facts[0].value, json!(6_291_456));

    // The statistics' input: ok trials only, in plan order.
    let contended = Condition::stressor("cache", 50);
    assert_eq!(
        loaded.values("victim", "cache-latency", &contended, "l2_ns"),
        vec![9.5, 9.0]
    );
    assert_eq!(
        loaded.values("victim", "cache-latency", &Condition::Baseline, "l2_ns"),
        vec![4.0]
    );
    assert_eq!(
        loaded.conditions(),
        vec![Condition::Baseline, contended.clone()]
    );

    // The whole run serializes to JSON and back.
    let json = serde_json::to_string(&loaded).unwrap();
    let back: isobench_store::LoadedRun = serde_json::from_str(&json).unwrap();
    assert_eq!(back, loaded);

    let runs = store.list_runs().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].id, run);
    assert_eq!(runs[0].trials, 4);
    assert_eq!(runs[0].trials_ok, 3);
    assert_eq!(runs[0].status, RunStatus::Complete);
}

#[test]
fn migrates_an_empty_database_and_reopens_without_migrating_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db");
    let store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(store.path(), path);
    drop(store);
    assert_eq!(journal_mode(&path), "wal");

    let c = rusqlite::Connection::open(&path).unwrap();
    let mut tables: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    tables.sort();
    assert_eq!(
        tables,
        [
            "facts",
            "histograms",
            "run_documents",
            "runs",
            "samples",
            "stressor_reports",
            "tenant_usage",
            "tenants",
            "trial_details",
            "trials"
        ]
    );
    drop(c);

    // Data survives a reopen.
    let (mut store, run) = setup(&path);
    store
        .record_trial(&run, &trial(0, Condition::Baseline, 4.0))
        .unwrap();
    drop(store);
    let store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(store.load_run(&run).unwrap().trials.len(), 1);
}

#[test]
fn refuses_a_database_from_a_newer_isobench_without_touching_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.db");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch("CREATE TABLE from_the_future (x INTEGER);")
            .unwrap();
        c.pragma_update(None, "user_version", SCHEMA_VERSION + 3)
            .unwrap();
    }
    let err = Store::open(&path).unwrap_err();
    match &err {
        StoreError::NewerSchema {
            path: p,
            found,
            supported,
        } => {
            assert_eq!(p, &path);
            assert_eq!(*found, SCHEMA_VERSION + 3);
            assert_eq!(*supported, SCHEMA_VERSION);
        }
        other => panic!("expected NewerSchema, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(
        msg.contains(&format!("schema version {}", SCHEMA_VERSION + 3)),
        "{msg}"
    );
    assert!(msg.contains(&format!("up to {SCHEMA_VERSION}")), "{msg}");
    assert!(msg.contains("upgrade isobench"), "{msg}");

    // Untouched: same version, no isobench tables, journal mode unchanged.
    let c = rusqlite::Connection::open(&path).unwrap();
    let v: u32 = c
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(v, SCHEMA_VERSION + 3);
    let runs: i64 = c
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'runs'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(runs, 0);
    drop(c);
    assert_eq!(journal_mode(&path), "delete");
}

#[test]
fn a_trial_key_is_recorded_once() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, run) = setup(&dir.path().join("dup.db"));
    store
        .record_trial(&run, &trial(5, Condition::Baseline, 4.0))
        .unwrap();
    let err = store
        .record_trial(&run, &trial(5, Condition::stressor("cache", 50), 99.0))
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::DuplicateTrial { key: k, .. } if *k == key(5)),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains(&format!(
            "trial r2b1s0 of victim in run {run} is already recorded"
        )),
        "{msg}"
    );
    assert!(msg.contains("completed_trial_keys"), "{msg}");
    // The first recording is intact and nothing of the second was written.
    let loaded = store.load_run(&run).unwrap();
    assert_eq!(loaded.trials, vec![trial(5, Condition::Baseline, 4.0)]);
}

#[test]
fn a_second_writer_gets_a_clear_lock_error_after_the_busy_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locked.db");
    let (_, run) = setup(&path);

    // Another process holds the write lock.
    let holder = rusqlite::Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE;").unwrap();

    // Opening a current database needs no write, so it works; writing waits, then fails.
    let mut store = Store::open_with(
        &path,
        &OpenOptions {
            busy_timeout: Duration::from_millis(100),
        },
    )
    .unwrap();
    let err = store
        .record_trial(&run, &trial(0, Condition::Baseline, 4.0))
        .unwrap_err();
    assert!(matches!(err, StoreError::Locked { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains("locked by another writer"), "{msg}");
    assert!(msg.contains("100ms"), "{msg}");
    // Readers are not blocked by the writer (WAL).
    assert_eq!(store.completed_trial_keys(&run).unwrap().len(), 0);

    // Once the other writer is done, the same call succeeds.
    holder.execute_batch("COMMIT;").unwrap();
    store
        .record_trial(&run, &trial(0, Condition::Baseline, 4.0))
        .unwrap();
}

#[test]
fn an_interrupted_run_resumes_without_losing_or_repeating_a_trial() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("resume.db");
    let plan: Vec<TrialRecord> = (0..6)
        .map(|i| {
            let c = if i % 2 == 0 {
                Condition::Baseline
            } else {
                Condition::stressor("cache", 50)
            };
            trial(i, c, 4.0 + i as f64)
        })
        .collect();

    let (mut store, run) = setup(&path);
    for t in &plan[..3] {
        store.record_trial(&run, t).unwrap();
    }
    // The process dies here: no finish_run. A new process picks the run up.
    drop(store);

    let mut store = Store::open(&path).unwrap();
    let done = store.completed_trial_keys(&run).unwrap();
    let want: Vec<(TrialKey, String)> = (0..3).map(|n| (key(n), "victim".to_string())).collect();
    assert_eq!(done.iter().cloned().collect::<Vec<_>>(), want);
    store
        .finish_run(
            &run,
            RunStatus::Interrupted,
            Some("controller exited"),
            Timestamp::now(),
        )
        .unwrap();
    // Not running: refuses trials until resumed.
    let err = store.record_trial(&run, &plan[3]).unwrap_err();
    assert!(matches!(err, StoreError::RunNotRunning { .. }), "{err:?}");
    assert!(err.to_string().contains("is interrupted"), "{err}");

    store.resume_run(&run).unwrap();
    for t in plan
        .iter()
        .filter(|t| !done.contains(&(t.key, t.tenant.clone())))
    {
        store.record_trial(&run, t).unwrap();
    }
    store
        .finish_run(&run, RunStatus::Complete, None, Timestamp::now())
        .unwrap();
    let loaded = store.load_run(&run).unwrap();
    assert_eq!(loaded.trials, plan);
    assert_eq!(loaded.run.status_reason, None);
    // A complete run is not resumed.
    assert!(store.resume_run(&run).is_err());
}

#[test]
fn a_rejected_trial_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, run) = setup(&dir.path().join("atomic.db"));
    let mut bad = trial(1, Condition::stressor("cache", 50), 9.0);
    bad.stressor_reports[0].tenant = "ghost".into();
    let err = store.record_trial(&run, &bad).unwrap_err();
    assert!(
        matches!(&err, StoreError::UnknownTenant { tenant, .. } if tenant == "ghost"),
        "{err:?}"
    );
    assert!(err.to_string().contains("add_tenant"), "{err}");
    assert!(store.completed_trial_keys(&run).unwrap().is_empty());
    // The key is still free.
    store
        .record_trial(&run, &trial(1, Condition::stressor("cache", 50), 9.0))
        .unwrap();
}

#[test]
fn inconsistent_records_are_refused_with_the_field_named() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, run) = setup(&dir.path().join("invalid.db"));
    let mut nan = trial(0, Condition::Baseline, 4.0);
    nan.samples[0].value = f64::NAN;
    let err = store.record_trial(&run, &nan).unwrap_err().to_string();
    assert!(err.contains("sample l2_ns is NaN"), "{err}");

    let mut twice = trial(0, Condition::Baseline, 4.0);
    twice.samples[1].metric = "l2_ns".into();
    let err = store.record_trial(&run, &twice).unwrap_err().to_string();
    assert!(err.contains("metric l2_ns appears twice"), "{err}");

    let mut stalled = trial(0, Condition::Baseline, 4.0);
    stalled.tenant_usage[0].memory = Some(StallRecord {
        some: 1.5,
        full: None,
    });
    let err = store.record_trial(&run, &stalled).unwrap_err().to_string();
    assert!(
        err.contains("the memory pressure of victim is some 1.5") && err.contains("0..=1"),
        "{err}"
    );
    let mut negative = trial(0, Condition::Baseline, 4.0);
    negative.tenant_usage[0].write_bytes_per_s = Some(-1.0);
    let err = store.record_trial(&run, &negative).unwrap_err().to_string();
    assert!(err.contains("the write bytes/s of victim"), "{err}");
    let mut twice = trial(0, Condition::Baseline, 4.0);
    twice.tenant_usage.push(twice.tenant_usage[0].clone());
    let err = store.record_trial(&run, &twice).unwrap_err().to_string();
    assert!(
        err.contains("the usage of tenant victim appears twice"),
        "{err}"
    );
    let mut stranger = trial(0, Condition::Baseline, 4.0);
    stranger.tenant_usage[0].tenant = "stranger".into();
    let err = store.record_trial(&run, &stranger).unwrap_err();
    assert!(matches!(err, StoreError::UnknownTenant { .. }), "{err:?}");

    let mut no_reason = trial(0, Condition::Baseline, 4.0);
    no_reason.status = TrialStatus::Failed(" ".into());
    let err = store
        .record_trial(&run, &no_reason)
        .unwrap_err()
        .to_string();
    assert!(err.contains("needs a reason"), "{err}");

    let err = store
        .add_tenant(&run, &tenants()[0])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("already has a tenant named \"victim\""),
        "{err}"
    );

    let ghost = RunId::new("20000101-000000-000000");
    let err = store.completed_trial_keys(&ghost).unwrap_err();
    assert!(matches!(err, StoreError::UnknownRun { .. }), "{err:?}");
    assert!(err.to_string().contains("20000101-000000-000000"));
    assert!(store.load_run(&ghost).is_err());
    assert!(store
        .finish_run(&ghost, RunStatus::Failed, None, Timestamp::now())
        .is_err());
    assert!(store
        .finish_run(&run, RunStatus::Running, None, Timestamp::now())
        .is_err());
    assert!(store.completed_trial_keys(&run).unwrap().is_empty());
}

#[test]
fn a_file_that_is_not_a_database_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    std::fs::write(
        &path,
        "these are not the results you are looking for\n".repeat(100),
    )
    .unwrap();
    let err = Store::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::NotADatabase { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("notes.txt is not a usable isobench database: it is not an SQLite database"),
        "{err}"
    );
}

#[test]
fn in_memory_store_works_for_tests() {
    let mut store = Store::open_in_memory().unwrap();
    let run = store.create_run(&new_run()).unwrap();
    for t in tenants() {
        store.add_tenant(&run, &t).unwrap();
    }
    store
        .record_trial(&run, &trial(0, Condition::Baseline, 4.0))
        .unwrap();
    assert_eq!(store.list_runs().unwrap()[0].trials, 1);
}

#[test]
fn many_runs_get_distinct_ids_even_in_the_same_second() {
    let mut store = Store::open_in_memory().unwrap();
    let ids: std::collections::HashSet<RunId> = (0..50)
        .map(|_| store.create_run(&new_run()).unwrap())
        .collect();
    assert_eq!(ids.len(), 50);
    assert_eq!(store.list_runs().unwrap().len(), 50);
}

/// A scheduled trial (the `timeline` kind): the stressors' switches as they happened and the
/// tenants' CPU series come back as they were recorded, with the window series beside them.
#[test]
fn a_timeline_round_trips_with_its_trial() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, run) = setup(&dir.path().join("t.db"));
    let switch = |on: bool, at: u64| ScheduledSwitch {
        tenant: "noisy".into(),
        stressor: "cpu".into(),
        intensity: 100,
        on,
        planned_ns: at,
        requested_ns: 1_000 + at,
        done_ns: 1_200 + at,
        error: None,
        ops_per_sec: (!on).then_some(1234.5),
    };
    let cpu = |tenant: &str, per_s: u64| CpuSeries {
        tenant: tenant.into(),
        samples: (0..4)
            .map(|i| CpuSample {
                at_ns: 1_000 + i * 1_000_000_000,
                cpu_ns: i * per_s,
            })
            .collect(),
    };
    let timeline = Timeline {
        start_ns: 1_000,
        end_ns: 3_000_001_000,
        switches: vec![switch(true, 1_000_000_000), switch(false, 2_000_000_000)],
        cpu: vec![cpu("victim", 100_000_000), cpu("noisy", 1_000_000_000)],
    };
    let t = TrialRecord {
        timeline: Some(timeline.clone()),
        ..trial(1, Condition::stressor("cpu", 100), 4.0)
    };
    store.record_trial(&run, &t).unwrap();
    let loaded = store.load_run(&run).unwrap();
    assert_eq!(loaded.trials[0].timeline.as_ref(), Some(&timeline));
    assert_eq!(loaded.trials[0].series, t.series);
    // One full CPU for the aggressor, a tenth for the victim.
    let usage = timeline.cpu[1].usage();
    assert_eq!(usage.len(), 3);
    assert!(
        usage.iter().all(|(_, u)| (u - 1.0).abs() < 1e-9),
        "{usage:?}"
    );

    // A switch in a tenant the run does not have is refused, naming it.
    let mut bad = t.clone();
    bad.key = key(3);
    bad.timeline.as_mut().unwrap().switches[0].tenant = "ghost".into();
    let err = store.record_trial(&run, &bad).unwrap_err();
    assert!(err.to_string().contains("ghost"), "{err}");
    // CPU samples out of order are refused.
    let mut bad = t.clone();
    bad.key = key(3);
    bad.timeline.as_mut().unwrap().cpu[0].samples.reverse();
    let err = store.record_trial(&run, &bad).unwrap_err();
    assert!(err.to_string().contains("time order"), "{err}");
}

#[test]
fn a_running_run_names_its_controller_until_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, run) = setup(&dir.path().join("r.db"));
    assert_eq!(store.running_runs().unwrap(), vec![(run.clone(), None)]);
    store.claim_run(&run, r#"{"pid":42,"start":7}"#).unwrap();
    assert_eq!(
        store.running_runs().unwrap(),
        vec![(run.clone(), Some(r#"{"pid":42,"start":7}"#.to_string()))]
    );
    assert!(store
        .claim_run(&RunId::new("nope"), "{}")
        .is_err_and(|e| matches!(e, StoreError::UnknownRun { .. })));
    store
        .finish_run(
            &run,
            RunStatus::Interrupted,
            Some("killed"),
            Timestamp::now(),
        )
        .unwrap();
    assert!(store.running_runs().unwrap().is_empty());
}

#[test]
fn a_run_from_another_database_is_imported_whole_once_and_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let (mut there, run) = setup(&dir.path().join("there.db"));
    for t in [
        trial(0, Condition::Baseline, 4.0),
        trial(1, Condition::stressor("cache", 50), 9.5),
        TrialRecord {
            status: TrialStatus::Dnr("agent stopped answering after 30 s".into()),
            samples: vec![],
            histograms: vec![],
            ..trial(2, Condition::Baseline, 1.0)
        },
    ] {
        there.record_trial(&run, &t).unwrap();
    }
    let fact = Fact {
        scope: "host".into(),
        key: "name".into(),
        value: json!("node-a"),
    };
    there.record_fact(&run, &fact).unwrap();
    let ended = Timestamp::from_unix_millis(1_767_225_700_000);
    there
        .finish_run(&run, RunStatus::Interrupted, Some("stopped"), ended)
        .unwrap();
    // Sent as JSON, as a remote host sends it.
    let sent: isobench_store::LoadedRun =
        serde_json::from_str(&serde_json::to_string(&there.load_run(&run).unwrap()).unwrap())
            .unwrap();

    let here_path = dir.path().join("here.db");
    let mut here = Store::open(&here_path).unwrap();
    assert_eq!(here.import_run(&sent).unwrap(), run);
    assert_eq!(here.load_run(&run).unwrap(), sent);
    assert_eq!(here.list_runs().unwrap()[0].status, RunStatus::Interrupted);

    // Twice is refused, naming the run and the database; nothing changes.
    let e = here.import_run(&sent).unwrap_err();
    assert!(matches!(e, StoreError::DuplicateRun { .. }), "{e}");
    assert!(e.to_string().contains(run.as_str()), "{e}");
    assert!(e.to_string().contains("here.db"), "{e}");
    assert_eq!(here.list_runs().unwrap().len(), 1);

    // A run whose last trial names an unknown tenant leaves nothing at all.
    let mut bad = sent.clone();
    bad.run.id = RunId::new("20260101-000000-badbad".to_string());
    bad.trials.last_mut().unwrap().tenant = "nobody".into();
    let e = here.import_run(&bad).unwrap_err();
    assert!(matches!(e, StoreError::UnknownTenant { .. }), "{e}");
    assert_eq!(here.list_runs().unwrap().len(), 1);
    assert!(here.load_run(&bad.run.id).is_err());
}

#[test]
fn runs_are_found_by_latest_and_by_unique_prefixes() {
    let mut store = Store::open_in_memory().unwrap();
    assert!(matches!(
        store.resolve_run("latest").unwrap_err(),
        StoreError::NoRuns { .. }
    ));
    let mut runs = Vec::new();
    // The same start time (as fake runs have): the last stored is the latest.
    for _ in 0..3 {
        runs.push(store.create_run(&new_run()).unwrap());
    }
    assert_eq!(store.resolve_run("latest").unwrap(), runs[2]);
    let listed: Vec<RunId> = store
        .list_runs()
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(listed, runs, "listed in the order they were stored");
    for run in &runs {
        assert_eq!(&store.resolve_run(run.as_str()).unwrap(), run);
        // The random part alone, as far as it is unique: among the random parts, and among
        // the whole ids (a random part "2a..." starts as every id's date does).
        let tail = run.as_str().rsplit('-').next().unwrap();
        let unique = (1..=tail.len())
            .map(|n| &tail[..n])
            .find(|p| {
                runs.iter()
                    .filter(|r| {
                        r.as_str().starts_with(p)
                            || r.as_str().rsplit('-').next().unwrap().starts_with(p)
                    })
                    .count()
                    == 1
            })
            .unwrap();
        assert_eq!(&store.resolve_run(unique).unwrap(), run);
    }
    // A prefix every run shares names them all, newest first.
    let shared = &runs[0].as_str()[..9];
    match store.resolve_run(shared).unwrap_err() {
        StoreError::AmbiguousRun {
            candidates, more, ..
        } => {
            assert_eq!(more, 0);
            let newest_first: Vec<String> = runs.iter().rev().map(|r| r.to_string()).collect();
            assert_eq!(candidates, newest_first);
        }
        e => panic!("{e:?}"),
    }
    let msg = store.resolve_run(shared).unwrap_err().to_string();
    assert!(msg.contains("could be any of 3 runs"), "{msg}");
    assert!(runs.iter().all(|r| msg.contains(r.as_str())), "{msg}");
    for unknown in ["", "zzz", "2099"] {
        assert!(
            matches!(
                store.resolve_run(unknown).unwrap_err(),
                StoreError::UnknownRun { .. }
            ),
            "{unknown:?}"
        );
    }
}
