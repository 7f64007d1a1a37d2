//! The result store opening a damaged database: whatever the file holds, `Store::open`
//! either refuses it with an error or opens it, and then listing its runs and loading each
//! run (trials, tenants, facts, the keys a resume skips) returns data or an error. No panic,
//! no hang, no crash inside SQLite.
//!
//! The first byte of the input chooses how the file is made:
//! - even: the rest of the input is the file, byte for byte;
//! - odd: a small valid database (one run, its tenants and facts, and trials of every
//!   shape), damaged by the rest of the input, read as patches `[offset: 3 bytes LE]
//!   [n: 1 byte][n bytes]` that overwrite bytes at `offset` (modulo the file size), or,
//!   with `n` = 0, cut the file there. This way most inputs get past SQLite's header checks
//!   into the pages that hold isobench's rows.
//!
//! Files live in one temporary directory (in memory when `/dev/shm` exists), created once,
//! removed at exit. With `ISOBENCH_FUZZ_SEEDS=<dir>` set, the target first writes the valid
//! databases it builds into `<dir>` (as raw-mode inputs), to seed the corpus.
#![no_main]

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use isobench_store::{
    Condition, Direction, Fact, HistogramRecord, Modulation, NewRun, Role, RunStatus, SampleRecord,
    ScheduledSwitch, SeriesRecord, Store, StressorMode, StressorReport, Switch, TenantRecord,
    Timeline, Timestamp, TrialKey, TrialRecord, TrialStatus, WindowRecord,
};
use isobench_store::{CpuSample, CpuSeries, RunId};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
static TEMPLATE: OnceLock<Vec<u8>> = OnceLock::new();

extern "C" fn remove_dir() {
    if let Some(d) = DIR.get() {
        let _ = fs::remove_dir_all(d.path());
    }
}

fn dir() -> &'static Path {
    DIR.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        let b = tempfile::Builder::new()
            .prefix("isobench-fuzz-store-")
            .tempdir_in(if shm.is_dir() {
                shm.to_path_buf()
            } else {
                std::env::temp_dir()
            });
        let d = b.expect("creating the fuzz directory");
        // SAFETY: registers a plain function with no captured state, called once at exit.
        unsafe { libc::atexit(remove_dir) };
        d
    })
    .path()
}

/// Removes a database and its WAL, shared-memory and journal files.
fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = fs::remove_file(PathBuf::from(p));
    }
}

/// The bytes of a fresh database at `name` after `fill` wrote into it, checkpointed and
/// closed (everything in the main file, no WAL left).
fn build(name: &str, fill: impl FnOnce(&mut Store)) -> Vec<u8> {
    let path = dir().join(name);
    remove_db(&path);
    let mut store = Store::open(&path).expect("creating a database");
    fill(&mut store);
    drop(store);
    let bytes = fs::read(&path).expect("reading the database back");
    remove_db(&path);
    bytes
}

fn trial(n: u32, condition: Condition, status: TrialStatus) -> TrialRecord {
    let contended = condition != Condition::Baseline;
    let value = 10.0 + n as f64;
    TrialRecord {
        key: TrialKey {
            round: n / 2,
            block: n % 2,
            slot: 0,
            attempt: 0,
        },
        probe: "cache-latency".into(),
        tenant: "victim".into(),
        condition,
        repetition: n / 2,
        status,
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
            Vec::new()
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
        noise: contended.then(|| json!({"steal_cpus": 0.01, "canary_speed": 0.98})),
        mechanism: Some(json!({"on": {"runq_wait_s": 0.02}, "off": {"runq_wait_s": 0.001}})),
        timeline: (n == 3).then(|| Timeline {
            start_ns: 0,
            end_ns: 2_000_000,
            switches: vec![ScheduledSwitch {
                tenant: "noisy".into(),
                stressor: "cpu".into(),
                intensity: 100,
                on: true,
                planned_ns: 1_000_000,
                requested_ns: 1_000_100,
                done_ns: 1_000_900,
                error: None,
                ops_per_sec: Some(1e6),
            }],
            cpu: vec![CpuSeries {
                tenant: "noisy".into(),
                samples: vec![
                    CpuSample {
                        at_ns: 0,
                        cpu_ns: 0,
                    },
                    CpuSample {
                        at_ns: 1_000_000,
                        cpu_ns: 900_000,
                    },
                ],
            }],
        }),
        limits: contended.then(|| json!({"victim": {"cpus": 0.5}})),
    }
}

/// One finished run with two tenants, facts and trials of every status and shape.
fn fill_run(store: &mut Store) {
    let run = store
        .create_run(&NewRun {
            scenario_name: "cache-vs-cpu".into(),
            scenario_text: "[experiment]\nkind = \"matrix\"\n".into(),
            seed: 7,
            tool_version: "0.1.0".into(),
            started_at: Timestamp::from_unix_millis(1_767_225_600_000),
            host_facts: json!({"cpu_model": "Test CPU", "cores": 2, "cgroup": "v2"}),
            platform: "cgroup".into(),
            platform_version: "v2".into(),
        })
        .expect("creating a run");
    for (name, role, limits) in [
        (
            "victim",
            Role::Victim,
            json!({"cpuset": "0", "memory": 1 << 30}),
        ),
        (
            "noisy",
            Role::Aggressor,
            json!({"cpuset": "1", "pids": 256}),
        ),
    ] {
        let t = TenantRecord {
            name: name.into(),
            role,
            platform: "cgroup".into(),
            limits,
        };
        store.add_tenant(&run, &t).expect("adding a tenant");
    }
    let fact = Fact {
        scope: "host".into(),
        key: "llc_bytes_measured".into(),
        value: json!(33_554_432),
    };
    store.record_fact(&run, &fact).expect("recording a fact");
    let statuses = [
        TrialStatus::Ok,
        TrialStatus::Ok,
        TrialStatus::Disturbed("steal 12%".into()),
        TrialStatus::Ok,
        TrialStatus::Failed("probe exited".into()),
        TrialStatus::Dnr("agent silent".into()),
    ];
    for (n, status) in statuses.into_iter().enumerate() {
        let n = n as u32;
        let c = if n % 2 == 0 {
            Condition::Baseline
        } else {
            Condition::stressor("cache", 50)
        };
        store
            .record_trial(&run, &trial(n, c, status))
            .expect("recording a trial");
    }
    store
        .finish_run(
            &run,
            RunStatus::Complete,
            None,
            Timestamp::from_unix_millis(1_767_225_700_000),
        )
        .expect("finishing the run");
}

fn template() -> &'static [u8] {
    TEMPLATE.get_or_init(|| {
        let full = build("template", fill_run);
        if let Some(out) = std::env::var_os("ISOBENCH_FUZZ_SEEDS") {
            let out = PathBuf::from(out);
            let empty = build("empty", |_| {});
            for (name, bytes) in [("seed-one-run", &full), ("seed-empty", &empty)] {
                let mut raw = vec![0u8];
                raw.extend_from_slice(bytes);
                fs::write(out.join(name), raw).expect("writing a seed");
            }
            fs::write(out.join("seed-template"), [1u8]).expect("writing a seed");
        }
        full
    })
}

/// The template damaged by `patches` (see the module header).
fn damaged(mut patches: &[u8]) -> Vec<u8> {
    let mut file = template().to_vec();
    while patches.len() >= 4 && !file.is_empty() {
        let off = u32::from_le_bytes([patches[0], patches[1], patches[2], 0]) as usize % file.len();
        let n = patches[3] as usize;
        patches = &patches[4..];
        if n == 0 {
            file.truncate(off);
            continue;
        }
        let n = n.min(patches.len());
        let end = (off + n).min(file.len());
        file[off..end].copy_from_slice(&patches[..end - off]);
        patches = &patches[n..];
    }
    file
}

/// Opens the file and reads everything it offers; errors end the reading, quietly.
fn read_all(path: &Path) {
    let Ok(store) = Store::open(path) else {
        return;
    };
    let _ = store.schema_version();
    let _ = store.load_run(&RunId::new("20260101-000000-000000"));
    let Ok(runs) = store.list_runs() else {
        return;
    };
    for summary in runs {
        let _ = store.completed_trial_keys(&summary.id);
        let Ok(run) = store.load_run(&summary.id) else {
            continue;
        };
        for c in run.conditions() {
            for t in &run.trials {
                for s in &t.samples {
                    let _ = run.values(&t.tenant, &t.probe, &c, &s.metric);
                }
            }
        }
        for t in &run.trials {
            if let Some(tl) = &t.timeline {
                for series in &tl.cpu {
                    let _ = series.usage();
                }
            }
        }
        let _ = serde_json::to_vec(&run).expect("a loaded run exports as JSON");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let template = template();
    let bytes = if mode % 2 == 0 {
        rest.to_vec()
    } else {
        debug_assert!(!template.is_empty());
        damaged(rest)
    };
    let path = dir().join("fuzz.db");
    remove_db(&path);
    fs::write(&path, &bytes).expect("writing the input");
    read_all(&path);
    remove_db(&path);
});
