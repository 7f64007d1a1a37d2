//! `isobench run`, `runs`, `show` and `export` as a user meets them: on the fake platform
//! (the hidden `ISOBENCH_DEBUG_FAKE` mode) for exact behaviour, and for real on cgroup tenants
//! when the tests run as root.

use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::{Duration, Instant};

use isobench_store::{RunId, RunStatus, Store, TrialKey, TrialStatus};

mod common;
use common::{cgroup_missing, code, fake, isobench, spawnable, text, write};

const SMALL: &str = r#"
name = "small"
kind = "matrix"
seed = 11

[trial]
duration = "100ms"
warmup = "50ms"
solo = "100ms"

[repetitions]
min = 3
max = 4

[[tenant]]
name = "victim"
role = "victim"
limits = { memory = "256M", pids = 64 }

[[tenant]]
name = "aggressor"
role = "aggressor"
limits = { memory = "256M", pids = 64 }

[[probe]]
name = "cpu-int"
metrics = ["ops_per_sec"]

[[probe]]
name = "syscall"
metrics = ["getppid_ns"]

[[stressor]]
name = "cpu"

[[stressor]]
name = "cache"
"#;

#[test]
fn dry_run_of_the_builtin_scenario_prints_the_plan() {
    let out = fake().args(["run", "--dry-run"]).output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("scenario quick (matrix)"), "{s}");
    assert!(s.contains("estimate:"), "{s}");
}

#[test]
fn malformed_scenario_is_refused_with_location_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "bad.toml",
        "kind = \"matrix\"\n[[probe]]\nname = \"cpu-itn\"\n",
    );
    let db = dir.path().join("r.db");
    let out = fake().args(["run", &f, "--db"]).arg(&db).output().unwrap();
    assert_eq!(code(&out), 2);
    let e = text(&out.stderr);
    assert!(
        e.contains("bad.toml:3:8: `probe[0].name`: unknown probe `cpu-itn`"),
        "{e}"
    );
    assert!(e.contains("did you mean name = \"cpu-int\""), "{e}");
    assert!(e.contains("nothing was run"), "{e}");
    // The database is opened after the scenario is checked.
    assert!(!db.exists());
}

/// Runs [`SMALL`] on the fake platform into `dir/r.db`; returns the database and the report
/// the run printed.
fn run_small(dir: &std::path::Path) -> (std::path::PathBuf, String) {
    let f = write(dir, "small.toml", SMALL);
    let db = dir.join("r.db");
    let out = fake()
        .args(["run", &f, "-q", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!([0, 4].contains(&code(&out)), "{}", text(&out.stderr));
    (db, text(&out.stdout))
}

#[test]
fn run_then_runs_show_and_export_agree() {
    let dir = tempfile::tempdir().unwrap();
    let (db, table) = run_small(dir.path());
    assert!(table.contains("Degradation of the victim"), "{table}");
    assert!(table.contains("aggressor (own rate)"), "{table}");
    assert!(table.contains("Headline:"), "{table}");
    assert!(table.contains("By the aggressor's resource"), "{table}");
    assert!(table.contains("Trust:"), "{table}");

    // ISOBENCH_DB names the database too.
    let runs = isobench()
        .arg("runs")
        .env("ISOBENCH_DB", &db)
        .output()
        .unwrap();
    assert_eq!(code(&runs), 0);
    let list = text(&runs.stdout);
    let id = list
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_string();
    assert!(
        list.contains("small") && list.contains("complete"),
        "{list}"
    );

    let show = isobench()
        .args(["show", &id, "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(code(&show), 0);
    assert_eq!(text(&show.stdout), table, "show prints what run printed");

    let schema = format!(
        "\"schema_version\": {}",
        isobench_results::RESULTS_SCHEMA_VERSION
    );
    for (format, check) in [
        ("json", schema.as_str()),
        ("csv", "run,tenant,role,probe,metric"),
        ("md", "## Degradation of the victim"),
    ] {
        let out = isobench()
            .args(["export", &id, "--format", format, "--db"])
            .arg(&db)
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{format}: {}", text(&out.stderr));
        assert!(text(&out.stdout).contains(check), "{format}");
    }
    let bad = isobench()
        .args(["export", &id, "--format", "xml", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(code(&bad), 2);
    let missing = isobench()
        .args(["show", "20990101-000000-000000", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(code(&missing), 2);
    assert!(text(&missing.stderr).contains("isobench runs"));
}

/// The results documents stored in `db`.
fn documents(db: &std::path::Path) -> i64 {
    rusqlite::Connection::open(db)
        .unwrap()
        .query_row("SELECT count(*) FROM run_documents", [], |r| r.get(0))
        .unwrap()
}

/// `show`, `report` and `export` give the same bytes whether they read the results document
/// the run stored or analyse the run again from its rows; a reader that had to analyse it
/// stores the document for the next one.
#[test]
fn show_report_and_export_are_the_same_with_and_without_the_stored_document() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = run_small(dir.path());
    assert_eq!(documents(&db), 1, "the run stored its results document");
    let html = dir.path().join("report.html");
    let commands: Vec<Vec<&str>> = vec![
        vec!["show", "latest"],
        vec!["export", "latest", "--format", "json"],
        vec!["export", "latest", "--format", "json", "--series"],
        vec!["export", "latest", "--format", "csv"],
        vec!["export", "latest", "--format", "md"],
        vec!["report", "latest", "-o", html.to_str().unwrap()],
    ];
    let output = |args: &[&str]| {
        let out = isobench().args(args).arg("--db").arg(&db).output().unwrap();
        assert_eq!(code(&out), 0, "{args:?}: {}", text(&out.stderr));
        let file = if args[0] == "report" {
            std::fs::read(&html).unwrap()
        } else {
            Vec::new()
        };
        (out.stdout, file)
    };
    for args in &commands {
        let stored = output(args);
        assert_eq!(documents(&db), 1);
        rusqlite::Connection::open(&db)
            .unwrap()
            .execute("DELETE FROM run_documents", [])
            .unwrap();
        let computed = output(args);
        assert!(stored == computed, "{args:?} differs without the document");
        assert_eq!(documents(&db), 1, "{args:?}: the reader stored it again");
    }
}

#[test]
fn a_plan_stored_before_conditions_had_assignments_opens_shows_and_exports() {
    let dir = tempfile::tempdir().unwrap();
    let (db, table) = run_small(dir.path());
    // The plan as older versions stored it: conditions without assignments.
    let id: String = {
        let c = rusqlite::Connection::open(&db).unwrap();
        let (id, value): (String, String) = c
            .query_row(
                "SELECT run_id, value FROM facts WHERE scope = 'run' AND key = 'plan'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        let mut plan: serde_json::Value = serde_json::from_str(&value).unwrap();
        for cond in plan["conditions"].as_array_mut().unwrap() {
            assert!(cond
                .as_object_mut()
                .unwrap()
                .remove("assignments")
                .is_some());
        }
        c.execute(
            "UPDATE facts SET value = ?1 WHERE scope = 'run' AND key = 'plan'",
            [plan.to_string()],
        )
        .unwrap();
        id
    };
    let show = isobench()
        .args(["show", &id, "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(code(&show), 0, "{}", text(&show.stderr));
    assert_eq!(
        text(&show.stdout),
        table,
        "the old plan shows as the run did"
    );
    let export = isobench()
        .args(["export", &id, "--format", "json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let doc = common::json_of(&export);
    let conds = doc["results"]["plan"]["conditions"].as_array().unwrap();
    assert_eq!(conds.len(), 2);
    for c in conds {
        assert_eq!(
            c["assignments"]["aggressor"]["stressor"], c["name"],
            "every aggressor ran the condition's stressor: {c}"
        );
    }
}

#[test]
fn a_killed_run_resumes_with_every_trial_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "small.toml", SMALL);
    let db = dir.path().join("r.db");
    // Real time passes in the slow fake mode, so the process can be killed mid-run.
    let mut child = common::spawnable()
        .args(["run", &f, "-q", "--db"])
        .arg(&db)
        .env("ISOBENCH_DEBUG_FAKE", "slow")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let run = loop {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no trials stored in time"
        );
        std::thread::sleep(Duration::from_millis(100));
        let Ok(store) = Store::open(&db) else {
            continue;
        };
        let Ok(runs) = store.list_runs() else {
            continue;
        };
        if let Some(r) = runs.first() {
            if r.trials >= 8 {
                break r.id.clone();
            }
        }
    };
    // SIGKILL: no chance to record anything more.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let before: Vec<((TrialKey, String), String)> = {
        let store = Store::open(&db).unwrap();
        let loaded = store.load_run(&run).unwrap();
        assert_eq!(loaded.run.status, RunStatus::Running, "killed mid-run");
        loaded
            .trials
            .iter()
            .map(|t| ((t.key, t.tenant.clone()), format!("{:?}", t.samples)))
            .collect()
    };
    // The next command finds the run's process gone: interrupted, with how to resume it.
    let out = isobench().args(["runs", "--db"]).arg(&db).output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let listing = text(&out.stdout);
    assert!(listing.contains("interrupted"), "{listing}");
    assert!(
        listing.contains(&format!(
            "resume: isobench run --resume {run} --db {}",
            db.display()
        )),
        "{listing}"
    );
    let reason = Store::open(&db)
        .unwrap()
        .load_run(&run)
        .unwrap()
        .run
        .status_reason;
    assert!(
        reason
            .as_deref()
            .is_some_and(|r| r.contains(&format!("pid {}", child.id()))),
        "{reason:?}"
    );

    let out = fake()
        .args(["run", "-q", "--resume", run.as_str(), "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!([0, 4].contains(&code(&out)), "{}", text(&out.stderr));

    let store = Store::open(&db).unwrap();
    let loaded = store.load_run(&run).unwrap();
    assert_eq!(loaded.run.status, RunStatus::Complete);
    // Nothing lost: every record from before the kill is there, unchanged.
    for ((key, tenant), samples) in &before {
        let t = loaded
            .trials
            .iter()
            .find(|t| t.key == *key && &t.tenant == tenant)
            .expect("kept");
        assert_eq!(&format!("{:?}", t.samples), samples);
    }
    // Nothing repeated: one record per (trial, tenant), and every round complete.
    let seqs: Vec<(TrialKey, &str)> = loaded
        .trials
        .iter()
        .map(|t| (t.key, t.tenant.as_str()))
        .collect();
    let unique: BTreeSet<(TrialKey, &str)> = seqs.iter().copied().collect();
    assert_eq!(seqs.len(), unique.len());
    let keys: BTreeSet<(u32, u32, u32)> = seqs
        .iter()
        .map(|(k, _)| (k.round, k.block, k.slot))
        .collect();
    // Round 0 of this plan: 2 contended on/off blocks of solo + 2 probes (the off-windows are
    // the baseline, so no baseline blocks).
    let round0: BTreeSet<(u32, u32, u32)> = keys.iter().copied().filter(|k| k.0 == 0).collect();
    assert_eq!(round0.len(), 6, "{round0:?}");
    assert!(loaded.trials.iter().all(|t| t.status == TrialStatus::Ok));
    // A complete run cannot be resumed again.
    let again = fake()
        .args(["run", "-q", "--resume", run.as_str(), "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(code(&again), 2);
    assert!(text(&again.stderr).contains("is complete"));
}

#[test]
fn a_database_from_a_newer_isobench_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("new.db");
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch("CREATE TABLE t (x); PRAGMA user_version = 999;")
            .unwrap();
    }
    let before = std::fs::read(&db).unwrap();
    let f = write(dir.path(), "small.toml", SMALL);
    for args in [vec!["run", f.as_str(), "-q"], vec!["runs"]] {
        let out = fake().args(&args).arg("--db").arg(&db).output().unwrap();
        assert_eq!(code(&out), 2, "{args:?}");
        let e = text(&out.stderr);
        assert!(
            e.contains("schema version 999") && e.contains("upgrade isobench"),
            "{e}"
        );
    }
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

#[test]
fn a_locked_database_fails_clearly_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "small.toml", SMALL);
    let db = dir.path().join("r.db");
    let first = fake()
        .args(["run", &f, "-q", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!([0, 4].contains(&code(&first)));
    let runs_before = Store::open(&db).unwrap().list_runs().unwrap();

    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE;").unwrap();
    let out = fake()
        .args(["run", &f, "-q", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    holder.execute_batch("ROLLBACK;").unwrap();
    assert_eq!(code(&out), 1, "{}", text(&out.stderr));
    let e = text(&out.stderr);
    assert!(e.contains("locked by another writer"), "{e}");
    let runs_after = Store::open(&db).unwrap().list_runs().unwrap();
    assert_eq!(runs_before, runs_after);
}

/// Real, on cgroup: a tiny matrix (one probe, two stressors, short trials) runs end to end
/// with the on/off design (the aggressor frozen and thawed while the probe measures in
/// windows) and lands in SQLite with its window series and switches.
#[test]
fn tiny_matrix_on_cgroup_lands_in_sqlite() {
    if let Some(why) = cgroup_missing(&["cpu"]) {
        common::skip("cgroup", &why);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "tiny.toml",
        r#"
name = "tiny"
kind = "matrix"
seed = 2
platform = "cgroup"

[trial]
duration = "150ms"
warmup = "100ms"
solo = "150ms"
max_retries = 0
pilot = "300ms"
onoff_max = "1s"

[repetitions]
min = 2
max = 2

[[tenant]]
name = "victim"
role = "victim"
limits = { memory = "256M", pids = 128 }

[[tenant]]
name = "aggressor"
role = "aggressor"
limits = { memory = "256M", pids = 128 }

[[probe]]
name = "syscall"
metrics = ["getppid_ns"]

[[stressor]]
name = "cpu"

[[stressor]]
name = "net-tx"
"#,
    );
    let db = dir.path().join("real.db");
    let out = isobench()
        .args(["run", &f, "-q", "--db"])
        .arg(&db)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    // 4 = ran, but some results are untrustworthy (a shared machine is noisy).
    assert!([0, 4].contains(&code(&out)), "{}", text(&out.stderr));
    let store = Store::open(&db).unwrap();
    let runs = store.list_runs().unwrap();
    assert_eq!(runs.len(), 1);
    let loaded = store.load_run(&RunId::new(runs[0].id.as_str())).unwrap();
    assert_eq!(
        loaded.run.status,
        RunStatus::Complete,
        "{:?}",
        loaded.run.status_reason
    );
    assert_eq!(loaded.run.platform, "cgroup");
    assert_eq!(loaded.tenants.len(), 2);
    // 2 rounds x (2 contended on/off probe trials + 2 solo trials); no baseline blocks: the
    // off-windows are the baseline.
    let keys: BTreeSet<TrialKey> = loaded.trials.iter().map(|t| t.key).collect();
    assert_eq!(keys.len(), 8, "{:#?}", loaded.trials);
    for t in loaded.trials.iter().filter(|t| t.probe == "syscall") {
        let m = t
            .modulation
            .as_ref()
            .expect("on/off trials record their switches");
        assert!(m.switches.len() >= 2, "{m:?}");
        assert!(m.switches.iter().all(|s| s.done_ns >= s.requested_ns));
        let s = t
            .series
            .iter()
            .find(|s| s.metric == "getppid_ns")
            .expect("a window series");
        assert!(s.windows.len() >= 4, "{s:?}");
        assert!(s.windows.windows(2).all(|w| w[0].end_ns <= w[1].start_ns));
    }
    assert!(loaded.facts.iter().any(|f| f.key == "onoff_tuning"));
    let probe_values: Vec<f64> = loaded
        .trials
        .iter()
        .filter(|t| t.probe == "syscall")
        .flat_map(|t| {
            t.samples
                .iter()
                .filter(|s| s.metric == "getppid_ns")
                .map(|s| s.value)
        })
        .collect();
    assert_eq!(probe_values.len(), 4);
    assert!(probe_values.iter().all(|v| *v > 0.0 && v.is_finite()));
    // The aggressor's own rate, alone and beside the probe.
    let modes: BTreeSet<String> = loaded
        .trials
        .iter()
        .flat_map(|t| t.stressor_reports.iter().map(|r| r.mode.to_string()))
        .collect();
    assert_eq!(
        modes,
        ["alone", "contended"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
    assert!(loaded.facts.iter().any(|f| f.key == "memory_check"));
    // The table was rendered from the database.
    assert!(text(&out.stdout).contains("syscall getppid_ns"));
    assert!(text(&out.stdout).contains("Holm"), "{}", text(&out.stdout));
}

/// Real, on cgroup: the `null` preset's design (A/A: an aggressor that runs nothing), kept
/// short. Its share of significant cells is reported, not asserted: on a shared machine one
/// short run says little; bench/ runs the preset several times and measures the rate.
#[test]
fn null_preset_runs_and_reports_its_false_positive_share() {
    if let Some(why) = cgroup_missing(&["cpu"]) {
        common::skip("cgroup", &why);
        return;
    }
    let preset = isobench_experiment::scenario::preset("null").expect("built in");
    // The preset's probes and designs, with fewer conditions and shorter trials.
    let (head, _) = preset
        .split_once("[[stressor]]")
        .expect("stressors at the end");
    let text_ = format!(
        "{}\n[[stressor]]\nname = \"null\"\nlabel = \"a\"\n\n[[stressor]]\nname = \"null\"\nlabel = \"b\"\n",
        head.replace("onoff_max = \"4s\"", "onoff_max = \"1s\"")
            .replace("pilot = \"1.2s\"", "pilot = \"400ms\"")
            .replace("max = 6", "max = 1")
    );
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "null.toml", &text_);
    let db = dir.path().join("null.db");
    let out = isobench()
        .args(["run", &f, "-q", "--db"])
        .arg(&db)
        .timeout(Duration::from_secs(600))
        .output()
        .unwrap();
    assert!([0, 4].contains(&code(&out)), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains("victim cells significant"))
        .unwrap_or_else(|| panic!("no significance share in:\n{stdout}"));
    eprintln!("null preset (short): {line}");
}

/// The events of `--json-stream`, one JSON object per stdout line.
fn events(stdout: &[u8]) -> Vec<serde_json::Value> {
    text(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[test]
fn json_stream_is_the_runs_events_and_nothing_else_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let out = fake()
        .args(["run", "--json-stream", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let ev = events(&out.stdout);
    let names: Vec<&str> = ev.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(names.first(), Some(&"planned"));
    assert_eq!(names.last(), Some(&"finished"));
    assert!(names.contains(&"tenants_ready"), "{names:?}");
    let run = ev[0]["run"].as_str().unwrap();
    assert_eq!(ev.last().unwrap()["run"], run);
    assert_eq!(ev.last().unwrap()["status"], "complete");
    // Every trial that started ended, numbered in order, and the count is the run's.
    let started = names.iter().filter(|n| **n == "trial_started").count();
    let ended: Vec<&serde_json::Value> =
        ev.iter().filter(|e| e["event"] == "trial_ended").collect();
    assert_eq!(started, ended.len());
    assert_eq!(
        ended.len() as u64,
        ev.last().unwrap()["trials_run"].as_u64().unwrap()
    );
    for (i, e) in ended.iter().enumerate() {
        assert_eq!(e["n"].as_u64(), Some(i as u64 + 1), "{e}");
        assert!(e["status"].is_string() && e["condition"].is_string(), "{e}");
    }
    let runs = Store::open(&db).unwrap().list_runs().unwrap();
    assert_eq!(runs[0].id.as_str(), run);
}

#[test]
fn json_stream_run_stopped_by_sigint_ends_interrupted_and_resumes_to_complete() {
    stopped_by_a_signal_ends_interrupted_and_resumes(libc::SIGINT, 130);
}

#[test]
fn a_run_stopped_by_sigterm_exits_143_interrupted_and_resumes_to_complete() {
    stopped_by_a_signal_ends_interrupted_and_resumes(libc::SIGTERM, 143);
}

/// A run stopped by `signal` after two trials: graceful end, `interrupted`, exit `code`
/// (128 + the signal), and `--resume` completes it.
fn stopped_by_a_signal_ends_interrupted_and_resumes(signal: i32, code_wanted: i32) {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let mut child = spawnable()
        .env("ISOBENCH_DEBUG_FAKE", "slow")
        .args(["run", "--json-stream", "--db"])
        .arg(&db)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    // Stop once two trials ended, as a watcher of the stream would.
    for line in lines.by_ref() {
        let e: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        let ended = e["event"] == "trial_ended";
        seen.push(e);
        if ended && seen.iter().filter(|e| e["event"] == "trial_ended").count() == 2 {
            break;
        }
    }
    // SAFETY: kill has no preconditions; the pid is our child's.
    unsafe { libc::kill(child.id() as i32, signal) };
    let rest: Vec<serde_json::Value> = lines
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    assert_eq!(child.wait().unwrap().code(), Some(code_wanted));
    let last = rest.last().expect("a finished event");
    assert_eq!(last["event"], "finished");
    assert_eq!(last["status"], "interrupted");
    let run = seen[0]["run"].as_str().unwrap().to_string();

    let out = fake()
        .args(["run", "--json-stream", "--resume", &run, "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let ev = events(&out.stdout);
    assert_eq!(ev[0]["event"], "planned");
    assert_eq!(ev[0]["run"], run.as_str());
    assert!(ev[0]["done"].as_u64().unwrap() >= 2, "{}", ev[0]);
    assert_eq!(ev.last().unwrap()["status"], "complete");
}

/// Holds the host's measurement slot as a run named `R-1` would (waiting while another test's
/// real run has it).
fn hold_the_measurement_slot(db: &std::path::Path) -> isobench_platform::MeasureSlot {
    let t0 = Instant::now();
    let mut slot = loop {
        match isobench_platform::MeasureSlot::try_take().unwrap() {
            Ok(slot) => break slot,
            Err(_) => {
                assert!(
                    t0.elapsed() < Duration::from_secs(600),
                    "the slot stays taken"
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    };
    slot.describe("R-1", db).unwrap();
    slot
}

#[test]
fn a_second_real_run_refuses_naming_the_measuring_run_or_waits_for_it() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "host.toml",
        r#"
name = "host-one"
kind = "matrix"
platform = "host"
unsafe_on_host = "skip"

[[tenant]]
name = "victim"
role = "victim"

[[tenant]]
name = "aggressor"
role = "aggressor"

[[probe]]
name = "syscall"
metrics = ["getppid_ns"]

[[stressor]]
name = "cpu"
"#,
    );
    let db = dir.path().join("second.db");
    let other_db = dir.path().join("first.db");
    let slot = hold_the_measurement_slot(&other_db);

    let out = isobench()
        .env_remove("ISOBENCH_WAIT")
        .args(["run", &f, "-q", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(code(&out), 5, "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!(
            "run R-1 (pid {}, database {}) is measuring on this host",
            std::process::id(),
            other_db.display()
        )),
        "{err}"
    );
    assert!(err.contains("--wait"), "{err}");
    // Refused before anything: no database, no run.
    assert!(!db.exists());

    let mut child = spawnable()
        .env_remove("ISOBENCH_WAIT")
        .args(["run", &f, "--wait", "--json-stream", "--db"])
        .arg(&db)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["event"], "note", "{first}");
    assert!(
        first["text"]
            .as_str()
            .is_some_and(|t| t.contains("run R-1") && t.contains("waiting for it to end")),
        "{first}"
    );
    drop(slot);
    // The slot is free: the run starts.
    let planned = lines
        .by_ref()
        .map(|l| serde_json::from_str::<serde_json::Value>(&l.unwrap()).unwrap())
        .find(|e| e["event"] == "planned")
        .expect("the run starts once the slot is free");
    assert_eq!(planned["scenario"], "host-one");
    // SAFETY: kill has no preconditions; the pid is our child's.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let last = lines.last().expect("a finished event").unwrap();
    assert!(last.contains(r#""status":"interrupted""#), "{last}");
    assert_eq!(child.wait().unwrap().code(), Some(130));
}

#[test]
fn probes_and_stressors_share_the_slot_with_each_other_but_never_with_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("measuring.db");
    let slot = hold_the_measurement_slot(&db);
    let mine = format!(
        "run R-1 (pid {}, database {}) is measuring on this host",
        std::process::id(),
        db.display()
    );
    for (args, what) in [
        (&["probe", "syscall", "--budget", "0.05"][..], "a probe"),
        (&["stress", "cpu", "-d", "0.1"][..], "a stressor"),
    ] {
        let out = isobench()
            .env_remove("ISOBENCH_WAIT")
            .args(args)
            .output()
            .unwrap();
        assert_eq!(code(&out), 5, "{}", text(&out.stderr));
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!("{mine}; {what} now would disturb its figures"))
                && err.contains("--wait"),
            "{err}"
        );
    }
    drop(slot);

    // A stressor shares the slot: a probe runs beside it, a run is refused naming it.
    let mut stress = spawnable()
        .args(["stress", "cpu", "-d", "120", "--json"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    loop {
        match isobench_platform::MeasureSlot::try_take().unwrap() {
            Err(h) if h.pid == stress.id() as i32 => break,
            other => drop(other),
        }
        assert!(
            t0.elapsed() < Duration::from_secs(600),
            "the stressor never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let probe = isobench()
        .env_remove("ISOBENCH_WAIT")
        .args(["probe", "syscall", "--budget", "0.05"])
        .output()
        .unwrap();
    let f = write(dir.path(), "small.toml", SMALL);
    let run = isobench()
        .env_remove("ISOBENCH_WAIT")
        .env_remove("ISOBENCH_DEBUG_FAKE")
        .args(["run", &f, "-q", "--db"])
        .arg(dir.path().join("second.db"))
        .output()
        .unwrap();
    // SAFETY: kill has no preconditions; the pid is our child's.
    unsafe { libc::kill(stress.id() as i32, libc::SIGTERM) };
    stress.wait().unwrap();
    assert_eq!(code(&probe), 0, "{}", text(&probe.stderr));
    assert_eq!(code(&run), 5, "{}", text(&run.stderr));
    let err = text(&run.stderr);
    assert!(
        err.contains(&format!(
            "`isobench stress cpu -d 120 --json` (pid {}) is measuring on this host",
            stress.id()
        )),
        "{err}"
    );
}
