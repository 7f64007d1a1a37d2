//! Containment as a user meets it: aggressive stressors in cgroup tenants, from the command
//! line. Needs root and cgroup controllers; skips with the reason otherwise.

use std::process::{Command as StdCommand, Stdio};
use std::time::Duration;

mod common;
use common::{cgroup_missing, descendants, isobench, json_of};

/// The tests look at every isobench cgroup on the host, so they run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

macro_rules! require_cgroup {
    () => {
        let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(why) = cgroup_missing(&["pids", "memory", "cpu"]) {
            common::skip("cgroup", &why);
            return;
        }
    };
}

fn isobench_objects() -> Vec<String> {
    let mut out = Vec::new();
    for c in ["cpu", "memory", "pids", "blkio", "cpuset", "freezer"] {
        if let Ok(rd) = std::fs::read_dir(format!("/sys/fs/cgroup/{c}")) {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().to_string();
                if n.starts_with("isobench-") {
                    out.push(format!("{c}/{n}"));
                }
            }
        }
    }
    out
}

/// Objects of one run (`isobench-<run>-`), taken from a tenant's object name.
fn run_prefix(doc: &serde_json::Value) -> String {
    let name = doc["tenant"]["info"]["object_name"]
        .as_str()
        .expect("tenant object name");
    let run = name.split('-').nth(1).expect("run id in the object name");
    format!("isobench-{run}-")
}

/// What is left of a run (other runs on the machine are none of these tests' business).
fn left_of(prefix: &str) -> Vec<String> {
    isobench_objects()
        .into_iter()
        .filter(|o| o.split('/').nth(1).is_some_and(|n| n.starts_with(prefix)))
        .collect()
}

fn note(doc: &serde_json::Value, key: &str) -> Option<u64> {
    doc["report"]["notes"].as_array()?.iter().find_map(|n| {
        n.as_str()?
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{key}="))?.parse().ok())
    })
}

#[test]
fn memhog_beyond_its_limit_is_oom_killed_inside_its_tenant_only() {
    require_cgroup!();
    // A neighbour outside the tenant that must survive.
    let mut neighbour = StdCommand::new("sleep")
        .arg("30")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let out = isobench()
        .args([
            "stress",
            "memhog",
            "--platform",
            "cgroup",
            "--limits",
            "memory=64M",
        ])
        .args(["--duration", "2", "--json"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let doc = json_of(&out);
    let oom = doc["tenant"]["usage"]["oom_kills"].as_u64().unwrap();
    assert!(
        oom >= 1,
        "no OOM kill read back: {}",
        doc["tenant"]["usage"]
    );
    assert!(note(&doc, "hog_killed").unwrap() >= 1, "{}", doc["report"]);
    // The stressor's own driver survived to report, and so did the neighbour.
    assert!(doc["report"]["ops"].as_u64().unwrap() > 0);
    assert!(
        neighbour.try_wait().unwrap().is_none(),
        "the neighbour died"
    );
    neighbour.kill().unwrap();
    let _ = neighbour.wait();
    let left = left_of(&run_prefix(&doc));
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn forkbomb_is_held_at_its_pids_limit_and_leaves_nothing() {
    require_cgroup!();
    let out = isobench()
        .args([
            "stress",
            "forkbomb",
            "--platform",
            "cgroup",
            "--limits",
            "pids=64",
        ])
        .args(["--duration", "2", "--json"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let doc = json_of(&out);
    let peak = note(&doc, "peak_population").unwrap();
    assert!(
        peak < 64,
        "bomb population {peak} reached the tenant's limit of 64 tasks"
    );
    let hits = doc["tenant"]["usage"]["pids_limit_hits"].as_u64().unwrap();
    assert!(
        hits > 0,
        "the bomb never reached the limit: {}",
        doc["tenant"]["usage"]
    );
    assert!(doc["report"]["ops"].as_u64().unwrap() > 0);
    let left = left_of(&run_prefix(&doc));
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn a_sentinel_drill_kills_the_tenant_and_reports_its_reaction_time() {
    require_cgroup!();
    let out = isobench()
        .args([
            "stress",
            "forkbomb",
            "--platform",
            "cgroup",
            "--limits",
            "pids=64",
        ])
        .args(["--duration", "30", "--sentinel-drill", "1", "--json"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let doc = json_of(&out);
    let sentinel = &doc["sentinel"];
    assert_eq!(sentinel["killed_tenant"], true, "{sentinel}");
    assert_eq!(sentinel["drill_after_s"], 1.0);
    assert!(sentinel["kill_error"].is_null(), "{sentinel}");
    let reaction = sentinel["first_stall"]["callback_ms"].as_f64().unwrap();
    assert!(reaction > 0.0, "{sentinel}");
    // The stressor's report died with its tenant. (The kill returns once no task is left in
    // the cgroup; `pids_current` may still count bomb children that died after their parent
    // and wait as zombies for pid 1 to reap them.)
    assert!(doc["report"].is_null());
    let left = left_of(&run_prefix(&doc));
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn without_a_drill_the_sentinel_reports_its_heartbeat_and_stays_quiet() {
    require_cgroup!();
    let out = isobench()
        .args([
            "stress",
            "cpu",
            "--platform",
            "cgroup",
            "--limits",
            "cpus=1",
        ])
        .args(["--duration", "1", "--json"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let doc = json_of(&out);
    let sentinel = &doc["sentinel"];
    assert_eq!(sentinel["threshold_ms"], 1000.0);
    assert!(sentinel["ticks"].as_u64().unwrap() > 0, "{sentinel}");
    assert!(sentinel["max_lateness_ms"].as_f64().is_some());
    assert_eq!(sentinel["killed_tenant"], false);
    assert!(doc["report"]["ops"].as_u64().unwrap() > 0);
}

#[test]
fn a_probe_runs_inside_a_limited_cgroup_tenant() {
    require_cgroup!();
    let out = isobench()
        .args([
            "probe",
            "syscall",
            "--platform",
            "cgroup",
            "--limits",
            "cpus=1,memory=256M,pids=64",
        ])
        .args(["--budget", "0.2", "--json"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let doc = json_of(&out);
    assert_eq!(
        doc["tenant"]["info"]["limits"],
        "cpus=1,memory=256M,pids=64"
    );
    assert!(doc["metrics"][0]["value"].as_f64().unwrap() > 0.0);
    let left = left_of(&run_prefix(&doc));
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn bad_limits_create_nothing() {
    require_cgroup!();
    let before = isobench_objects();
    for (limits, says) in [
        ("memry=1G", "did you mean `memory`"),
        ("memory=lots", "memory=lots"),
        ("cpuset=0-99", "cpuset"),
    ] {
        let out = isobench()
            .args([
                "probe",
                "syscall",
                "--platform",
                "cgroup",
                "--limits",
                limits,
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{limits}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{limits}: {err}");
    }
    let created: Vec<String> = isobench_objects()
        .into_iter()
        .filter(|o| !before.contains(o))
        .collect();
    assert!(
        !created.iter().any(|o| o.ends_with("-probe")),
        "a refused tenant was created: {created:?}"
    );
}

#[test]
fn a_controller_killed_mid_run_is_cleaned_up_by_cleanup() {
    require_cgroup!();
    let before = isobench_objects();
    let mut child = common::spawnable()
        .args([
            "stress",
            "cpu",
            "--platform",
            "cgroup",
            "--limits",
            "cpus=0.5",
            "--duration",
            "60",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until its tenant exists.
    let prefix = new_run_prefix(&before, "-stress");
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap(); // SIGKILL: no handler runs
    child.wait().unwrap();
    assert!(
        !left_of(&prefix).is_empty(),
        "a killed run should leave its tenant behind"
    );
    let out = isobench().args(["cleanup"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(
        listed.contains("removed"),
        "cleanup listed nothing: {listed}"
    );
    let left = left_of(&prefix);
    assert!(left.is_empty(), "left behind: {left:?}");
    // No process of that run is left either (processes carry ISOBENCH_RUN).
    let survivors = processes_of(&prefix);
    assert!(
        survivors.is_empty(),
        "processes of the killed run survived: {survivors:?}"
    );
}

/// The processes of the run whose objects start with `prefix` (`isobench-<run>-`): they
/// carry `ISOBENCH_RUN=<run>`.
fn processes_of(prefix: &str) -> Vec<String> {
    let run = prefix.trim_start_matches("isobench-").trim_end_matches('-');
    let tag = format!("ISOBENCH_RUN={run}");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .chars()
                .all(|c| c.is_ascii_digit())
        })
        .filter(|e| {
            std::fs::read(e.path().join("environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|kv| kv == tag.as_bytes()))
        })
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect()
}

/// Waits for a cgroup named `isobench-<run>-<suffix>` that was not in `before`; its run's
/// object prefix.
fn new_run_prefix(before: &[String], suffix: &str) -> String {
    let t0 = std::time::Instant::now();
    loop {
        let found = isobench_objects()
            .into_iter()
            .filter(|o| !before.contains(o) && o.ends_with(suffix))
            .find_map(|o| {
                let run = o.split('/').nth(1)?.split('-').nth(1)?.to_string();
                Some(format!("isobench-{run}-"))
            });
        if let Some(p) = found {
            return p;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(180),
            "the run never created its tenant"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_run_killed_with_sigkill_leaves_nothing_after_the_next_plain_run() {
    require_cgroup!();
    let dir = tempfile::tempdir().unwrap();
    let killed = KilledRun::new(dir.path());

    // The user just runs again.
    let out = killed.command().arg(&killed.scenario).output().unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 4)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    killed.assert_healed_by(&out);
}

#[test]
fn a_next_command_that_fails_still_removes_what_a_killed_run_left() {
    require_cgroup!();
    let dir = tempfile::tempdir().unwrap();
    let killed = KilledRun::new(dir.path());

    // A resume of a run this database does not hold: refused, after healing the host.
    let out = killed
        .command()
        .args(["--resume", "20990101-000000-abcdef"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    killed.assert_healed_by(&out);
}

/// A tiny cgroup run killed with SIGKILL once its first trial is stored.
struct KilledRun {
    scenario: std::path::PathBuf,
    db: std::path::PathBuf,
    /// The prefix of the killed run's object names.
    prefix: String,
    /// Its id in the database.
    stored: isobench_store::RunId,
}

impl KilledRun {
    fn new(dir: &std::path::Path) -> KilledRun {
        let scenario = dir.join("tiny.toml");
        std::fs::write(&scenario, TINY_RUN).unwrap();
        let db = dir.join("k.db");
        let before = isobench_objects();
        let log = dir.join("killed.log");
        let mut child = common::spawnable()
            .arg("run")
            .arg(&scenario)
            .arg("-q")
            .arg("--db")
            .arg(&db)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let prefix = new_run_prefix(&before, "-victim");
        // Until a trial is stored: killed mid-run, not mid-setup.
        let t0 = std::time::Instant::now();
        let stored = loop {
            let runs = isobench_store::Store::open(&db).and_then(|s| s.list_runs());
            if let Some(r) = runs.ok().and_then(|r| r.into_iter().find(|r| r.trials > 0)) {
                break r.id;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(180) && child.try_wait().unwrap().is_none(),
                "no trial stored: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        child.kill().unwrap(); // SIGKILL: no handler runs
        child.wait().unwrap();
        assert!(
            !left_of(&prefix).is_empty(),
            "a killed run leaves its tenants"
        );
        KilledRun {
            scenario,
            db,
            prefix,
            stored,
        }
    }

    /// `isobench run --json-stream --db DB`, waiting for the host when it is busy.
    fn command(&self) -> StdCommand {
        let mut c = common::spawnable();
        c.arg("run").arg("--json-stream").arg("--db").arg(&self.db);
        c
    }

    /// The command that gave `out` said what it removed and how to resume the killed run,
    /// and nothing of that run is left on the host.
    fn assert_healed_by(&self, out: &std::process::Output) {
        let notes: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["event"] == "note")
            .filter_map(|e| e["text"].as_str().map(str::to_string))
            .collect();
        let run_id = self
            .prefix
            .trim_start_matches("isobench-")
            .trim_end_matches('-');
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with(&format!("removed what a dead run left: run {run_id}: "))),
            "{notes:?}"
        );
        let stored = &self.stored;
        assert!(
            notes
                .iter()
                .any(|n| n.contains(&format!("run {stored} was left running"))
                    && n.contains(&format!("isobench run --resume {stored} --db "))),
            "{notes:?}"
        );
        let left = left_of(&self.prefix);
        assert!(left.is_empty(), "left behind: {left:?}");
        assert!(processes_of(&self.prefix).is_empty());
        assert!(!std::path::Path::new("/run/isobench").join(run_id).exists());
        let store = isobench_store::Store::open(&self.db).unwrap();
        let killed = store.load_run(stored).unwrap().run;
        assert_eq!(killed.status, isobench_store::RunStatus::Interrupted);
    }
}

/// A run of a few seconds on cgroup tenants.
const TINY_RUN: &str = r#"
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
min = 3
max = 3

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
"#;

#[test]
fn a_net_probe_s_own_server_process_runs_in_the_probe_s_cgroup() {
    require_cgroup!();
    let child = common::spawnable()
        .args(["probe", "net-throughput", "--platform", "cgroup"])
        .args(["--limits", "cpus=1,memory=256M,pids=64"])
        .args(["--set", "proto=tcp", "--set", "duration=1.5", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    let (server, agent) = loop {
        let found = descendants(child.id()).into_iter().find_map(|p| {
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let ppid = stat
                .rsplit(')')
                .next()?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            cmd.contains("serve tcp-sink").then_some((p, ppid))
        });
        if let Some(f) = found {
            break f;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "no server process");
        std::thread::sleep(Duration::from_millis(5));
    };
    let cgroup = |p: u32| std::fs::read_to_string(format!("/proc/{p}/cgroup")).unwrap();
    let (sc, ac) = (cgroup(server), cgroup(agent));
    let doc = json_of(&child.wait_with_output().unwrap());
    assert_eq!(sc, ac, "the server left the agent's cgroups");
    assert!(sc.contains(&run_prefix(&doc)), "not in the tenant: {sc}");
    assert!(doc["metrics"][0]["value"].as_f64().unwrap() > 0.0);
    let left = left_of(&run_prefix(&doc));
    assert!(left.is_empty(), "left behind: {left:?}");
}
