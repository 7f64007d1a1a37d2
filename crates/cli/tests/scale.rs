//! A large tenant pool and the kinds built on it, for real: a `[[tenant]]` table with
//! `count = 64` becomes 64 cgroup tenants, each with its own agent, that run a short trial
//! through the engine and are all gone afterwards (cgroups, processes); one small run each of
//! the `scale` and `fidelity` kinds. Needs root and cgroup controllers; skips with the reason
//! otherwise.

use std::collections::BTreeSet;
use std::time::Duration;

use isobench_store::{RunId, RunStatus, Store};

mod common;
use common::{cgroup_missing, code, isobench, text, write};

/// The pool is 64 aggressors beside one victim; each runs a light CPU stressor in the
/// contended block, so every agent answers at least once.
const POOL: &str = r#"
name = "pool"
kind = "matrix"
seed = 3
platform = "cgroup"

[trial]
duration = "100ms"
warmup = "100ms"
solo = "0s"
pilot = "0s"
max_retries = 0
design = "paired"
timeout = "30s"

[repetitions]
min = 1
max = 1

[[tenant]]
name = "victim"
role = "victim"
limits = { memory = "256M", pids = 64 }

[[tenant]]
name = "agg"
count = 64
role = "aggressor"
limits = { memory = "96M", pids = 16 }

[[probe]]
name = "syscall"
metrics = ["getppid_ns"]

[[stressor]]
name = "cpu"
intensity = 1
"#;

/// Cgroup directories, in every hierarchy, whose names start with `prefix`.
fn cgroups_with(prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(mounts) = std::fs::read_dir("/sys/fs/cgroup") else {
        return out;
    };
    for m in mounts.flatten() {
        if let Ok(rd) = std::fs::read_dir(m.path()) {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().to_string();
                if n.starts_with(prefix) {
                    out.push(e.path().display().to_string());
                }
            }
        }
    }
    out
}

/// Processes whose environment tags them with run `run`.
fn processes_of(run: &str) -> Vec<u32> {
    let tag = format!("ISOBENCH_RUN={run}");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) {
            if env.split(|&b| b == 0).any(|kv| kv == tag.as_bytes()) {
                out.push(pid);
            }
        }
    }
    out
}

#[test]
fn sixty_four_cgroup_tenants_run_and_leave_nothing_behind() {
    if let Some(why) = cgroup_missing(&["cpu", "memory", "pids"]) {
        common::skip("cgroup", &why);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "pool.toml", POOL);
    let db = dir.path().join("pool.db");
    let out = isobench()
        .args(["run", &f, "-q", "--db"])
        .arg(&db)
        .timeout(Duration::from_secs(180))
        .output()
        .unwrap();
    // 4 = ran, but some results are untrustworthy (one short round on a shared machine).
    assert!([0, 4].contains(&code(&out)), "{}", text(&out.stderr));

    let store = Store::open(&db).unwrap();
    let runs = store.list_runs().unwrap();
    let loaded = store.load_run(&RunId::new(runs[0].id.as_str())).unwrap();
    assert_eq!(
        loaded.run.status,
        RunStatus::Complete,
        "{:?}",
        loaded.run.status_reason
    );
    let names: BTreeSet<&str> = loaded.tenants.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names.len(), 65, "{names:?}");
    assert!(names.contains("agg-1") && names.contains("agg-64"));

    // Every tenant had its own cgroup and its own agent.
    let facts: Vec<&serde_json::Value> = loaded
        .facts
        .iter()
        .filter(|f| f.key == "tenant")
        .map(|f| &f.value)
        .collect();
    assert_eq!(facts.len(), 65);
    let pids: BTreeSet<u64> = facts
        .iter()
        .filter_map(|f| f["details"]["agent"]["agent_pid"].as_u64())
        .collect();
    assert_eq!(pids.len(), 65, "one agent per tenant");
    let object = facts[0]["details"]["object_name"]
        .as_str()
        .expect("object name");
    let run = object.split('-').nth(1).expect("run id in the object name");

    // Each aggressor ran the stressor in the contended block and reported its rate.
    let reporting: BTreeSet<&str> = loaded
        .trials
        .iter()
        .flat_map(|t| t.stressor_reports.iter().map(|r| r.tenant.as_str()))
        .collect();
    assert_eq!(reporting.len(), 64, "{reporting:?}");

    // Nothing is left: no cgroup of the run in any hierarchy, no process of the run.
    let left = cgroups_with(&format!("isobench-{run}-"));
    assert!(left.is_empty(), "left behind: {left:?}");
    let procs = processes_of(run);
    assert!(procs.is_empty(), "processes left: {procs:?}");
}

/// Runs `scenario` for real and returns its run, after checking it completed.
fn run_real(
    dir: &std::path::Path,
    scenario: &str,
) -> (std::path::PathBuf, isobench_store::LoadedRun) {
    let f = write(dir, "kind.toml", scenario);
    let db = dir.join("kind.db");
    let out = isobench()
        .args(["run", &f, "-q", "--db"])
        .arg(&db)
        .timeout(Duration::from_secs(180))
        .output()
        .unwrap();
    assert!([0, 4].contains(&code(&out)), "{}", text(&out.stderr));
    let store = Store::open(&db).unwrap();
    let runs = store.list_runs().unwrap();
    let loaded = store.load_run(&RunId::new(runs[0].id.as_str())).unwrap();
    assert_eq!(
        loaded.run.status,
        RunStatus::Complete,
        "{:?}",
        loaded.run.status_reason
    );
    (db, loaded)
}

/// What `isobench show` prints for the run in `db`.
fn show(db: &std::path::Path, run: &str) -> String {
    let out = isobench()
        .args(["show", run, "--db"])
        .arg(db)
        .output()
        .unwrap();
    assert!([0, 4].contains(&code(&out)), "{}", text(&out.stderr));
    text(&out.stdout)
}

const SHORT: &str = r#"
seed = 5
platform = "cgroup"

[trial]
duration = "100ms"
warmup = "100ms"
solo = "0s"
pilot = "0s"
max_retries = 0
timeout = "30s"

[repetitions]
min = 1
max = 1
"#;

#[test]
fn scale_runs_one_then_all_aggressors_of_a_pool() {
    if let Some(why) = cgroup_missing(&["cpu", "memory", "pids"]) {
        common::skip("cgroup", &why);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let scenario = format!(
        r#"kind = "scale"
{SHORT}
[scale]
counts = [1, 3]

[[tenant]]
name = "victim"
role = "victim"
limits = {{ memory = "256M", pids = 64 }}

[[tenant]]
name = "agg"
count = 3
role = "aggressor"
limits = {{ memory = "128M", pids = 32 }}

[[probe]]
name = "syscall"
metrics = ["getppid_ns"]

[[stressor]]
name = "cpu"
intensity = 20
"#
    );
    let (db, loaded) = run_real(dir.path(), &scenario);
    // One aggressor reports in the first condition, all three in the second.
    for (cond, n) in [("cpu@20:aggressors=1", 1), ("cpu@20:aggressors=3", 3)] {
        let tenants: BTreeSet<&str> = loaded
            .trials
            .iter()
            .filter(|t| t.condition.to_string() == cond)
            .flat_map(|t| t.stressor_reports.iter().map(|r| r.tenant.as_str()))
            .collect();
        assert_eq!(tenants.len(), n, "{cond}: {tenants:?}");
    }
    let shown = show(&db, loaded.run.id.as_str());
    assert!(
        shown.contains("Victims with 1..3 aggressor tenants running cpu"),
        "{shown}"
    );
}

#[test]
fn fidelity_sets_the_limit_for_its_trials_and_reports_q() {
    if let Some(why) = cgroup_missing(&["cpu", "memory", "pids"]) {
        common::skip("cgroup", &why);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let scenario = format!(
        r#"kind = "fidelity"
{SHORT}
[fidelity]
limits = [10, 100]

[[tenant]]
name = "victim"
role = "victim"
limits = {{ cpuset = "0", memory = "256M", pids = 64 }}

[[tenant]]
name = "loading"
role = "aggressor"
limits = {{ memory = "256M", pids = 64 }}

[[probe]]
name = "cpu-int"
metrics = ["ops_per_sec"]

[[stressor]]
name = "cpu"
"#
    );
    let (db, loaded) = run_real(dir.path(), &scenario);
    // Every trial records the limit it ran under, as set and as read back; baselines ran
    // without one.
    for t in &loaded.trials {
        let want = match t.condition.to_string().as_str() {
            "baseline" => None,
            c if c.starts_with("10%") => Some(serde_json::json!(
                {"victim": {"cpus": 0.1, "read_back": {"cpus": 0.1}}}
            )),
            _ => Some(serde_json::json!({"victim": {"cpus": 1.0, "read_back": {"cpus": 1.0}}})),
        };
        assert_eq!(t.limits, want, "{}", t.condition);
    }
    // The kernel throttled the victim at a tenth of a core (in most trials: one the machine
    // starves below the quota is not), never in a baseline.
    let throttled = |t: &isobench_store::TrialRecord| -> Option<u64> {
        t.noise.as_ref()?["throttled"]
            .as_array()?
            .iter()
            .find(|x| x["tenant"] == "victim")?["throttled_periods"]
            .as_u64()
    };
    let at = |cond: &str| -> Vec<Option<u64>> {
        loaded
            .trials
            .iter()
            .filter(|t| t.condition.to_string() == cond)
            .map(throttled)
            .collect()
    };
    let tenth = at("10%");
    let throttled_trials = tenth.iter().filter(|n| n.is_some_and(|n| n > 0)).count();
    assert!(
        !tenth.is_empty() && throttled_trials * 2 > tenth.len(),
        "{tenth:?}"
    );
    assert!(
        at("baseline").iter().all(|n| n.unwrap_or(0) == 0),
        "{:?}",
        at("baseline")
    );
    let shown = show(&db, loaded.run.id.as_str());
    assert!(
        shown.contains("CPU limit fidelity of tenant victim"),
        "{shown}"
    );
}
