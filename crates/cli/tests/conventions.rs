//! What users of hyperfine, fio and iperf3 expect of a command line: flags whose values are
//! listed (and refused by name), JSON for scripts from `runs` and `show`, exports written at
//! the end of a run, shell completions and man pages. On the fake platform (the hidden
//! `ISOBENCH_DEBUG_FAKE` mode), so every run is instant and exact.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use isobench_store::{RunStatus, Store};

mod common;
use common::{code, fake, isobench, json_of, text, write};

/// Runs the built-in scenario on the fake platform into `db` with `extra` flags.
fn fake_run(db: &Path, extra: &[&str]) -> Output {
    fake()
        .args(["run", "-q", "--db"])
        .arg(db)
        .args(extra)
        .output()
        .unwrap()
}

/// The id of the only run in `db`.
fn only_run(db: &Path) -> String {
    let runs = Store::open(db).unwrap().list_runs().unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0].id.to_string()
}

/// `isobench export RUN_ID --format FORMAT`'s bytes.
fn exported(db: &Path, id: &str, format: &str) -> Vec<u8> {
    let out = isobench()
        .args(["export", id, "--format", format, "--db"])
        .arg(db)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    out.stdout
}

#[test]
fn bad_values_of_value_flags_name_the_flag_and_list_the_possible_values() {
    let cases: [(&[&str], &str, &str); 4] = [
        (
            &["export", "x", "--format", "xml"],
            "--format",
            "[possible values: json, csv, md]",
        ),
        (
            &["run", "--dry-run", "--platform", "xen"],
            "--platform",
            "[possible values: auto, host, cgroup",
        ),
        (
            &["probe", "syscall", "--platform", "xen"],
            "--platform",
            "[possible values: host, cgroup",
        ),
        (
            &["stress", "cpu", "--platform", "auto"],
            "--platform",
            "[possible values: host, cgroup",
        ),
    ];
    for (args, flag, values) in cases {
        let out = fake().args(args).output().unwrap();
        assert_eq!(code(&out), 2, "{args:?}");
        let e = text(&out.stderr);
        assert!(e.contains(flag) && e.contains(values), "{args:?}: {e}");
    }
}

#[test]
fn help_lists_the_values_with_what_each_does() {
    let out = isobench().args(["run", "--help"]).output().unwrap();
    let help = text(&out.stdout);
    assert!(help.contains("auto:") && help.contains("isolates and works here"));
    let out = isobench().args(["export", "--help"]).output().unwrap();
    let help = text(&out.stdout);
    assert!(
        help.contains("md:") && help.contains("[default: json]"),
        "{help}"
    );
}

#[test]
fn the_spellings_accepted_before_are_still_accepted() {
    // `cgroups` and any case for the platform; the fake host has cgroups.
    for platform in ["cgroups", "CGROUP"] {
        let out = fake()
            .args(["run", "--dry-run", "--platform", platform])
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{platform}: {}", text(&out.stderr));
    }
    // `markdown` and `md` are the same export.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    assert!([0, 4].contains(&code(&fake_run(&db, &[]))));
    let id = only_run(&db);
    assert_eq!(exported(&db, &id, "markdown"), exported(&db, &id, "md"));
}

#[test]
fn runs_json_without_a_database_is_an_empty_list() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("none.db");
    let out = isobench()
        .args(["runs", "--json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let doc = json_of(&out);
    assert_eq!(doc["tool"], "isobench");
    assert!(doc["schema_version"].is_u64() && doc["tool_version"].is_string());
    assert_eq!(doc["runs"], serde_json::json!([]));
    assert!(!db.exists(), "listing creates no database");
}

#[test]
fn runs_json_and_show_json_carry_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    assert!([0, 4].contains(&code(&fake_run(&db, &[]))));
    let id = only_run(&db);

    let out = isobench()
        .args(["runs", "--json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let doc = json_of(&out);
    assert_eq!(doc["kind"], "runs");
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["id"], id.as_str());
    assert_eq!(runs[0]["scenario_name"], "quick");
    assert_eq!(runs[0]["status"], "complete");
    assert!(runs[0]["trials_ok"].as_u64().unwrap() > 0);

    let out = isobench()
        .args(["show", &id, "--json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let doc = json_of(&out);
    assert_eq!(doc["results"]["run"]["id"], id.as_str());
    assert_eq!(
        out.stdout,
        exported(&db, &id, "json"),
        "show --json is export --format json"
    );
}

#[test]
fn run_exports_are_what_export_gives() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let file = |name: &str| dir.path().join(name);
    let out = fake_run(
        &db,
        &[
            "--export-json",
            file("r.json").to_str().unwrap(),
            "--export-csv",
            file("r.csv").to_str().unwrap(),
            "--export-markdown",
            file("r.md").to_str().unwrap(),
        ],
    );
    assert!([0, 4].contains(&code(&out)), "{}", text(&out.stderr));
    let id = only_run(&db);
    let e = text(&out.stderr);
    for (name, format) in [("r.json", "json"), ("r.csv", "csv"), ("r.md", "md")] {
        let written = std::fs::read(file(name)).unwrap();
        assert_eq!(written, exported(&db, &id, format), "{name}");
        let said = format!("wrote {}", file(name).display());
        assert_eq!(e.matches(&said).count(), 1, "{e}");
    }
}

#[test]
fn a_single_export_flag_writes_only_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let csv = dir.path().join("only.csv");
    let out = fake_run(&db, &["--export-csv", csv.to_str().unwrap()]);
    assert!([0, 4].contains(&code(&out)), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read(&csv).unwrap(),
        exported(&db, &only_run(&db), "csv")
    );
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.starts_with("r.db"))
        .collect();
    assert_eq!(names, ["only.csv"]);
}

#[test]
fn an_export_that_cannot_be_written_names_its_flag_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    // A directory where the file should go: it passes the check before the run and fails
    // at the write.
    let taken = dir.path().join("taken.json");
    std::fs::create_dir(&taken).unwrap();
    let csv = dir.path().join("r.csv");
    let out = fake_run(
        &db,
        &[
            "--export-json",
            taken.to_str().unwrap(),
            "--export-csv",
            csv.to_str().unwrap(),
        ],
    );
    assert_eq!(code(&out), 1, "{}", text(&out.stderr));
    let id = only_run(&db);
    let e = text(&out.stderr);
    assert!(
        e.contains(&format!("--export-json {}", taken.display())),
        "{e}"
    );
    assert!(
        e.contains(&format!("isobench export {id} --format json")),
        "{e}"
    );
    // The run is stored and complete, its report printed, the other file written.
    assert_eq!(
        Store::open(&db).unwrap().list_runs().unwrap()[0].status,
        RunStatus::Complete
    );
    assert!(text(&out.stdout).contains("Trust:"));
    assert_eq!(std::fs::read(&csv).unwrap(), exported(&db, &id, "csv"));
}

#[test]
fn an_export_into_a_missing_directory_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let json = dir.path().join("no-such-dir").join("r.json");
    let out = fake_run(&db, &["--export-json", json.to_str().unwrap()]);
    assert_eq!(code(&out), 2);
    let e = text(&out.stderr);
    assert!(
        e.contains("--export-json") && e.contains("no-such-dir"),
        "{e}"
    );
    assert!(!db.exists(), "nothing ran");
}

#[test]
fn a_dry_run_writes_no_export() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = fake()
        .args(["run", "--dry-run", "--export-json"])
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(!json.exists());
}

/// Short trials, so a run in the slow fake mode (real time passes) stores its first trials
/// soon and can be interrupted between them.
const SHORT: &str = r#"
name = "short"
kind = "matrix"
seed = 5

[trial]
duration = "100ms"
warmup = "50ms"
solo = "100ms"

[repetitions]
min = 3
max = 6

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

[[stressor]]
name = "cache"
"#;

#[test]
fn an_interrupted_run_still_writes_its_exports() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "short.toml", SHORT);
    let db = dir.path().join("r.db");
    let json: PathBuf = dir.path().join("r.json");
    let md: PathBuf = dir.path().join("r.md");
    let child = common::spawnable()
        .args(["run", &f, "-q", "--db"])
        .arg(&db)
        .arg("--export-json")
        .arg(&json)
        .arg("--export-markdown")
        .arg(&md)
        .env("ISOBENCH_DEBUG_FAKE", "slow")
        .env_remove("ISOBENCH_DB")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Ctrl-C once the first trials are stored.
    let t0 = Instant::now();
    loop {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no trials stored in time"
        );
        std::thread::sleep(Duration::from_millis(100));
        let stored = Store::open(&db)
            .and_then(|s| s.list_runs())
            .ok()
            .and_then(|r| r.first().map(|r| r.trials));
        if stored.is_some_and(|n| n >= 2) {
            break;
        }
    }
    // SAFETY: kill has no preconditions; the pid is our child's.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 130, "{}", text(&out.stderr));
    let id = only_run(&db);
    assert_eq!(
        Store::open(&db).unwrap().list_runs().unwrap()[0].status,
        RunStatus::Interrupted
    );
    assert_eq!(std::fs::read(&json).unwrap(), exported(&db, &id, "json"));
    assert_eq!(std::fs::read(&md).unwrap(), exported(&db, &id, "md"));
    let e = text(&out.stderr);
    assert!(e.contains(&format!("wrote {}", json.display())), "{e}");
}

#[test]
fn completions_for_each_shell_know_the_commands_and_flags() {
    for shell in ["bash", "zsh", "fish"] {
        let out = isobench().args(["completions", shell]).output().unwrap();
        assert_eq!(code(&out), 0, "{shell}: {}", text(&out.stderr));
        let script = text(&out.stdout);
        assert!(!script.is_empty(), "{shell}");
        assert!(script.contains("run"), "{shell}");
        assert!(script.contains("preset"), "{shell}: --preset");
        assert!(script.contains("export-markdown"), "{shell}");
    }
    let out = isobench().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(code(&out), 2);
    assert!(text(&out.stderr).contains("possible values"));
}

#[test]
fn completions_offer_the_values_of_value_flags() {
    let out = isobench().args(["completions", "bash"]).output().unwrap();
    let script = text(&out.stdout);
    // The platforms are those of the table, more of them as they are added.
    for values in ["\"auto host cgroup", "\"host cgroup", "\"json csv md\""] {
        assert!(script.contains(&format!("compgen -W {values}")), "{values}");
    }
    // A positional value: offered among the options of `completions`.
    assert!(script.contains("bash elvish fish powershell zsh"));
}

#[test]
fn man_prints_a_roff_page_of_isobench() {
    let out = isobench().arg("man").output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let page = text(&out.stdout);
    assert!(page.starts_with(".ie \\n(.g .ds Aq"), "{page}");
    assert!(page.contains(".TH isobench 1"), "{page}");
    assert!(page.contains("isobench\\-run(1)"), "{page}");
}

#[test]
fn man_output_writes_a_page_per_command_but_not_the_hidden_ones() {
    let dir = tempfile::tempdir().unwrap();
    let into = dir.path().join("man1");
    let out = isobench()
        .args(["man", "--output"])
        .arg(&into)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    for page in [
        "isobench.1",
        "isobench-run.1",
        "isobench-export.1",
        "isobench-serve.1",
    ] {
        let text_ = std::fs::read_to_string(into.join(page)).unwrap();
        assert!(text_.starts_with(".ie"), "{page}");
    }
    assert!(text(&std::fs::read(into.join("isobench-run.1")).unwrap()).contains("export\\-json"));
    for hidden in [
        "isobench-memcheck.1",
        "isobench-netserve.1",
        "isobench-help.1",
    ] {
        assert!(!into.join(hidden).exists(), "{hidden}");
    }
}
