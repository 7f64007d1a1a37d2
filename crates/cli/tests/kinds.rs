//! Every experiment kind for real, on cgroup tenants, kept short: the run lands in SQLite,
//! `isobench show` prints the kind's sections and `export --section` writes one as CSV.

use std::time::Duration;

mod common;
use common::{cgroup_missing, code, isobench, text, write};

/// Tenants, short trials and one probe; each kind adds its stressors and its table.
const TINY: &str = r#"
seed = 3
platform = "cgroup"

[trial]
duration = "150ms"
warmup = "100ms"
solo = "200ms"
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
name = "cpu-int"
label = "cpu"
metrics = ["ops_per_sec"]

[[stressor]]
name = "cpu"
"#;

/// Runs `kind` with its table on cgroup; returns what `show` printed and the CSV of
/// section `section`.
fn run_kind(kind: &str, table: &str, section: &str) -> Option<(String, String)> {
    if let Some(why) = cgroup_missing(&["cpu", "freezer"]) {
        common::skip("cgroup", &why);
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "tiny.toml",
        &format!("name = \"tiny-{kind}\"\nkind = \"{kind}\"\n{TINY}\n{table}"),
    );
    let db = dir.path().join("kind.db");
    let out = isobench()
        .args(["run", &f, "-q", "--db"])
        .arg(&db)
        .timeout(Duration::from_secs(180))
        .output()
        .unwrap();
    // 4 = ran, but some results are untrustworthy (a shared machine is noisy).
    assert!([0, 4].contains(&code(&out)), "{}", text(&out.stderr));
    let runs = isobench().args(["runs", "--db"]).arg(&db).output().unwrap();
    let id = text(&runs.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().next())
        .expect("one run")
        .to_string();
    let show = isobench()
        .args(["show", &id, "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(code(&show), 0, "{}", text(&show.stderr));
    let csv = isobench()
        .args([
            "export",
            &id,
            "--format",
            "csv",
            "--section",
            section,
            "--db",
        ])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(code(&csv), 0, "{}", text(&csv.stderr));
    Some((text(&show.stdout), text(&csv.stdout)))
}

#[test]
fn sweep_on_cgroup_shows_its_curve() {
    let Some((show, csv)) = run_kind(
        "sweep",
        "[sweep]\nstressor = \"cpu\"\nparam = \"intensity\"\nvalues = [50, 100]\n",
        "curve",
    ) else {
        return;
    };
    assert!(
        show.contains("Victims under cpu as intensity goes 50..100"),
        "{show}"
    );
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows.len(), 3, "{csv}");
    assert!(
        rows[0].starts_with("intensity,delivered cpu_threads [CPUs]"),
        "{csv}"
    );
    assert!(
        rows[1].starts_with("50,") && rows[2].starts_with("100,"),
        "{csv}"
    );
}

#[test]
fn sensitivity_on_cgroup_reports_a_tolerated_intensity() {
    let Some((show, csv)) = run_kind(
        "sensitivity",
        "[sensitivity]\nintensities = [50, 100]\nlimit = 5\n",
        "tolerated",
    ) else {
        return;
    };
    assert!(show.contains("Tolerated pressure"), "{show}");
    assert!(show.contains("Sensitivity curve under cpu"), "{show}");
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows.len(), 2, "{csv}");
    assert!(rows[1].starts_with("cpu ops_per_sec,"), "{csv}");
}

#[test]
fn pairwise_on_cgroup_reports_both_sides() {
    let Some((show, csv)) = run_kind("pairwise", "[pairwise]\nworkloads = [\"cpu\"]\n", "pairs")
    else {
        return;
    };
    assert!(
        show.contains("Time to complete beside each other"),
        "{show}"
    );
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows.len(), 2, "{csv}");
    assert!(rows[1].starts_with("cpu,cpu,"), "{csv}");
}
