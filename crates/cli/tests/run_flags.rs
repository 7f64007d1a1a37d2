//! Flags of `isobench run` that change a scenario (`--max-time`), and how a scenario's
//! errors reach the terminal.

mod common;

use common::{code, fake, json_of, text, write};

/// A scenario whose intervals never get narrow enough (+/-0.01 points): only its rounds cap
/// and its time budget end it.
/// The run settings of [`endless`], before the usual pair of tenants.
const ENDLESS_HEAD: &str = r#"
name = "endless"
kind = "matrix"
seed = 3

[trial]
duration = "1s"
warmup = "100ms"
solo = "0s"

[repetitions]
min = 2
max = 30
ci_half_width = 0.01
max_time = "10m"
"#;

fn endless() -> String {
    common::one_cpu_pair(ENDLESS_HEAD)
}

/// `run --max-time` replaces the scenario's `repetitions.max_time`: the plan says so, the
/// run stops at it (flagging the cells still wide), and a bad value is refused.
#[test]
fn max_time_overrides_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "endless.toml", &endless());
    let plan = |extra: &[&str]| {
        let out = fake()
            .args(["run", &f, "--dry-run"])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{}", text(&out.stderr));
        text(&out.stdout)
    };
    assert!(plan(&[]).contains("time budget: 10m"), "{}", plan(&[]));
    let short = plan(&["--max-time", "20s"]);
    assert!(
        short.contains("time budget: 20s") && !short.contains("10m"),
        "{short}"
    );

    // Runs on the fake platform's clock: the budget is simulated time.
    let db = dir.path().join("r.db");
    let run_with = |budget: &str| {
        let out = fake()
            .args(["run", &f, "-q", "--max-time", budget, "--db"])
            .arg(&db)
            .output()
            .unwrap();
        assert!([0, 4].contains(&code(&out)), "{}", text(&out.stderr));
        let shown = fake()
            .args(["show", "latest", "--json", "--db"])
            .arg(&db)
            .output()
            .unwrap();
        assert_eq!(code(&shown), 0, "{}", text(&shown.stderr));
        text(&out.stdout)
    };
    let report = run_with("20s");
    assert!(
        report.contains("time budget reached: no further round fits in 20s"),
        "{report}"
    );
    let runs = json_of(
        &fake()
            .args(["runs", "--json", "--db"])
            .arg(&db)
            .output()
            .unwrap(),
    );
    let short_trials = runs["runs"][0]["trials"].as_u64().unwrap();
    let report = run_with("5m");
    assert!(!report.contains("no further round fits in 20s"), "{report}");
    let runs = json_of(
        &fake()
            .args(["runs", "--json", "--db"])
            .arg(&db)
            .output()
            .unwrap(),
    );
    let long_trials = runs["runs"][1]["trials"].as_u64().unwrap();
    assert!(
        short_trials < long_trials,
        "20s ran {short_trials} trials, 5m ran {long_trials}"
    );

    for (bad, says) in [
        ("0s", "zero"),
        ("soon", "not a duration"),
        ("25h", "not a duration"),
    ] {
        let out = fake()
            .args(["run", &f, "--dry-run", "--max-time", bad])
            .output()
            .unwrap();
        assert_eq!(code(&out), 2, "{bad}");
        let e = text(&out.stderr);
        assert!(e.contains("--max-time") && e.contains(says), "{bad}: {e}");
    }
    let out = fake()
        .args(["run", "--resume", "latest", "--max-time", "1m", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
}

/// Regression: a scenario whose tenant name held terminal escape codes had them echoed raw
/// by the error refusing it, so printing the error could clear or recolour the terminal.
#[test]
fn scenario_errors_escape_control_characters() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "evil.toml",
        "[[tenant]]\nname = \"\\u001b[2J\\u001b[31mred\\u0007\"\nrole = \"victim\"\n",
    );
    let out = fake().args(["run", &f, "--dry-run"]).output().unwrap();
    assert_eq!(code(&out), 2);
    let e = text(&out.stderr);
    assert!(e.contains("\\u{1b}[2J\\u{1b}[31mred\\u{7}"), "{e}");
    assert!(
        !e.contains(|c: char| c.is_control() && c != '\n'),
        "no control character reaches the terminal: {e:?}"
    );
    // A run id echoed by another command's error is escaped the same way.
    let db = dir.path().join("empty.db");
    std::fs::write(&db, b"").unwrap();
    let out = fake()
        .args(["show", "\u{1b}]0;owned\u{7}", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    let e = text(&out.stderr);
    assert!(e.contains("run \\u{1b}]0;owned\\u{7} is not in"), "{e}");
    assert!(!e.contains(|c: char| c.is_control() && c != '\n'), "{e:?}");
}

/// `run --io-cost` takes `on`, `off` or io.cost.qos parameters, and names the keys when a
/// word is none of them.
#[test]
fn io_cost_words_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "endless.toml", &endless());
    for good in ["on", "off", "enable=1 ctrl=user rlat=5000"] {
        let out = fake()
            .args(["run", &f, "--dry-run", "--io-cost", good])
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{good}: {}", text(&out.stderr));
    }
    let out = fake()
        .args(["run", &f, "--dry-run", "--io-cost", "enable=1 latency=5"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    let e = text(&out.stderr);
    assert!(
        e.contains("--io-cost") && e.contains("`latency=5`") && e.contains("rlat"),
        "{e}"
    );
}
