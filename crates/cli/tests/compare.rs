//! `isobench compare` as a user meets it, on runs made instantly on the fake platform: the
//! built-in scenario twice, a scenario file that shares part of its cells, and the null
//! preset, which shares none.

use std::path::{Path, PathBuf};

mod common;
use common::{code, fake, isobench, json_of, quota_fake_run, text, tune_scenario, write};

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
name = "web"
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

/// Runs `isobench run ARGS -q --db DB` on the fake platform and returns the new run's id.
fn run(db: &Path, args: &[&str]) -> String {
    let before = ids(db);
    let out = fake()
        .arg("run")
        .args(args)
        .args(["-q", "--db"])
        .arg(db)
        .output()
        .unwrap();
    assert!([0, 4].contains(&code(&out)), "{}", text(&out.stderr));
    let after = ids(db);
    let new: Vec<&String> = after.iter().filter(|id| !before.contains(id)).collect();
    assert_eq!(new.len(), 1, "{after:?}");
    new[0].clone()
}

/// The ids `isobench runs` lists.
fn ids(db: &Path) -> Vec<String> {
    if !db.exists() {
        return Vec::new();
    }
    let out = isobench().args(["runs", "--db"]).arg(db).output().unwrap();
    text(&out.stdout)
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

struct Runs {
    _dir: tempfile::TempDir,
    db: PathBuf,
    quick: String,
    quick_again: String,
    small: String,
    null: String,
}

fn runs() -> Runs {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let small = write(dir.path(), "small.toml", SMALL);
    Runs {
        quick: run(&db, &[]),
        quick_again: run(&db, &[]),
        small: run(&db, &[&small]),
        null: run(&db, &["--preset", "null"]),
        db,
        _dir: dir,
    }
}

fn compare(r: &Runs, args: &[&str]) -> std::process::Output {
    isobench()
        .arg("compare")
        .args(args)
        .arg("--db")
        .arg(&r.db)
        .output()
        .unwrap()
}

#[test]
fn compare_in_every_format_and_its_errors() {
    let r = runs();

    // A scenario that shares part of the built-in one's cells.
    let out = compare(&r, &[&r.quick, &r.small]);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let t = text(&out.stdout);
    assert!(
        t.starts_with("Comparison of 2 runs against the reference A\n"),
        "{t}"
    );
    assert!(
        t.contains(&format!("A  run {} · scenario quick (matrix)", r.quick)),
        "{t}"
    );
    assert!(
        t.contains(&format!("B  run {} · scenario small (matrix)", r.small)),
        "{t}"
    );
    assert!(t.contains("host: "), "{t}");
    assert!(t.contains("Victim degradation"), "{t}");
    let row = t
        .lines()
        .find(|l| l.starts_with("cpu-int ops_per_sec @ cpu@100"))
        .unwrap_or_else(|| panic!("{t}"));
    assert!(row.contains('['), "the difference has its interval: {row}");
    assert!(t.contains("Holm-corrected"), "{t}");
    assert!(t.contains("Settings that differ"), "{t}");
    assert!(t
        .lines()
        .any(|l| l.starts_with("victim tenants") && l.contains("victim") && l.contains("web")));
    assert!(t.contains("Not shared"), "{t}");
    assert!(t.contains("condition membw@100"), "{t}");
    assert!(t.contains("probe metric cache-latency llc_ns"), "{t}");
    // The built-in scenario measures no aggressor rate; the file does.
    assert!(t.contains("aggressor's own rate"), "{t}");

    // The same scenario twice: nothing differs.
    let out = compare(&r, &[&r.quick, &r.quick_again]);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let t = text(&out.stdout);
    assert!(t.contains("* significant (p adj < 0.05): 0 of 56"), "{t}");
    assert!(t.contains("Settings: the same in every run"), "{t}");
    assert!(!t.contains("Not shared"), "{t}");

    // Nothing shared at all.
    let out = compare(&r, &[&r.quick, &r.null]);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let t = text(&out.stdout);
    assert!(t.contains("nothing to test"), "{t}");
    assert!(t.contains("condition null1@100"), "{t}");

    // Three runs as JSON: the document with its schema version.
    let out = compare(&r, &[&r.quick, &r.small, &r.null, "--format", "json"]);
    let doc = json_of(&out);
    assert_eq!(doc["schema_version"], 1);
    let labels: Vec<&str> = doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["A", "B", "C"]);
    assert_eq!(doc["runs"][1]["id"], r.small.as_str());
    assert!(!doc["cells"].as_array().unwrap().is_empty());
    assert_eq!(doc["correction"], "holm");

    // Markdown and CSV, to a file and to standard output.
    let md = r.db.with_file_name("c.md");
    let out = isobench()
        .args(["compare", &r.quick, &r.small, "-f", "markdown", "-o"])
        .arg(&md)
        .arg("--db")
        .arg(&r.db)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    let m = std::fs::read_to_string(&md).unwrap();
    assert!(m.starts_with("# Comparison of 2 runs"), "{m}");
    assert!(m.contains("## Victim degradation"), "{m}");
    assert!(m.contains("| probe metric @ condition | A [%] | B [%] | B-A [points] |"));
    let out = compare(&r, &[&r.quick, &r.small, "-f", "csv"]);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let csv = text(&out.stdout);
    assert!(
        csv.starts_with("role,tenant,probe,metric,unit,condition,A [%],A [%] lower,A [%] upper,"),
        "{csv}"
    );
    assert!(
        csv.contains("\nvictim,victim/web,cpu-int,ops_per_sec,ops/s,cpu@100,"),
        "{csv}"
    );

    // Errors: one run that ran alone is a usage error; an unknown run is named, with where
    // to look.
    let out = compare(&r, &[&r.quick]);
    assert_eq!(code(&out), 2);
    assert!(
        text(&out.stderr).contains("compare needs two runs or more"),
        "{}",
        text(&out.stderr)
    );
    let out = compare(&r, &[&r.quick, "20990101-000000-000000"]);
    assert_eq!(code(&out), 2);
    let e = text(&out.stderr);
    assert!(e.contains("run 20990101-000000-000000 is not in"), "{e}");
    assert!(e.contains("`isobench runs`"), "{e}");
    let out = compare(&r, &[&r.quick, &r.small, "--format", "xml"]);
    assert_eq!(code(&out), 2);
}

/// A protection run on the fake platform: the service beside a CPU hog and a cache thrasher,
/// under the isolation settings SETTINGS, three episodes each so every figure has its
/// interval.
const PROTECTION: &str = r#"
name = "prot"
kind = "protection"
seed = SEED
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

SETTINGS

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

[[stressor]]
name = "cache"
"#;

const TWO_SETTINGS: &str = r#"
[[protection.setting]]
name = "none"

[[protection.setting]]
name = "capped"
limits = { batch = { cpus = 0.5 } }
"#;

/// The section `id` of run `id_`'s exported results document.
fn exported_section(db: &Path, run_id: &str, id: &str) -> isobench_results::Section {
    let out = isobench()
        .args(["export", run_id, "--format", "json", "--db"])
        .arg(db)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let doc = json_of(&out);
    let s = doc["results"]["sections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("run {run_id} exports no section {id}: {doc}"));
    serde_json::from_value(s.clone()).unwrap()
}

/// The row of `s` whose first cell reads `label`.
fn row_of<'a>(
    s: &'a isobench_results::Section,
    label: &str,
) -> Option<&'a [isobench_results::Value]> {
    s.rows
        .iter()
        .find(|r| r[0].text() == label)
        .map(Vec::as_slice)
}

#[test]
fn protection_runs_are_compared_side_by_side_by_setting_and_aggressor() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let a_file = write(
        dir.path(),
        "a.toml",
        &PROTECTION
            .replace("SEED", "5")
            .replace("SETTINGS", TWO_SETTINGS),
    );
    // B: another seed and platform, and a setting A does not have.
    let b_file = write(
        dir.path(),
        "b.toml",
        &PROTECTION.replace("SEED", "6").replace(
            "SETTINGS",
            &format!(
                "{TWO_SETTINGS}\n[[protection.setting]]\nname = \"tight\"\nlimits = {{ batch = \
                 {{ cpus = 0.2 }} }}\n"
            ),
        ),
    );
    let a = run(&db, &[&a_file, "--platform", "cgroup"]);
    let b = run(&db, &[&b_file, "--platform", "oci"]);
    let sa = exported_section(&db, &a, "protection");
    let sb = exported_section(&db, &b, "protection");
    let shared = [
        "none/cpu@100",
        "none/cache@100",
        "capped/cpu@100",
        "capped/cache@100",
    ];
    for label in shared {
        assert!(row_of(&sa, label).is_some(), "A has no row {label}: {sa:?}");
        assert!(row_of(&sb, label).is_some(), "B has no row {label}: {sb:?}");
    }
    assert!(row_of(&sb, "tight/cpu@100").is_some(), "{sb:?}");
    // Three episodes: the figures carry their intervals.
    let isol = sa
        .columns
        .iter()
        .position(|c| c.name == "isol mean")
        .unwrap();
    assert!(
        matches!(
            row_of(&sa, "none/cpu@100").unwrap()[isol],
            isobench_results::Value::Estimate { .. }
        ),
        "{sa:?}"
    );

    // JSON: each run's figure, as its results document has it, in its own column.
    let out = isobench()
        .args(["compare", &a, &b, "--format", "json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let doc = json_of(&out);
    let side: isobench_results::Section = serde_json::from_value(
        doc["sections"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == "kind-protection")
            .unwrap_or_else(|| panic!("no side-by-side protection table: {doc}"))
            .clone(),
    )
    .unwrap();
    let col = |name: &str| {
        side.columns
            .iter()
            .position(|c| c.name == name)
            .unwrap_or_else(|| panic!("no column {name}: {:?}", side.headers()))
    };
    let labels: Vec<String> = side.rows.iter().map(|r| r[0].text()).collect();
    for label in sa.rows.iter().chain(&sb.rows).map(|r| r[0].text()) {
        assert!(labels.contains(&label), "{label} missing from {labels:?}");
    }
    for (i, c) in sa.columns.iter().enumerate().skip(1) {
        for label in &labels {
            let got = row_of(&side, label).unwrap();
            for (run_label, exported) in [("A", &sa), ("B", &sb)] {
                let want = row_of(exported, label)
                    .map_or(isobench_results::Value::Empty, |r| r[i].clone());
                assert_eq!(
                    got[col(&format!("{} {run_label}", c.name))],
                    want,
                    "{label}, {} of {run_label}",
                    c.name
                );
            }
        }
    }
    let not_shared = doc["not_shared"].as_array().unwrap();
    assert!(
        not_shared.iter().any(|n| n["what"]
            == "rows `tight/cpu@100`, `tight/cache@100` of section protection"
            && n["runs"] == serde_json::json!(["B"])
            && n["why"] == "not in A"),
        "{not_shared:?}"
    );

    // The terminal: the table under its title, each shared row with A's and B's figures
    // (with their intervals) in that order.
    // Wide enough that no block of columns parts A's figure from B's.
    let out = isobench()
        .args(["compare", &a, &b, "--db"])
        .arg(&db)
        .env("COLUMNS", "2000")
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let t = text(&out.stdout);
    assert!(t.contains("kind's own tables are set side by side"), "{t}");
    let title = format!("{} (A | B)", sa.title);
    let table = &t[t.find(&title).unwrap_or_else(|| panic!("{t}"))..];
    // The table ends where the first timeline begins.
    let table = &table[..table
        .find("The service second by second")
        .unwrap_or(table.len())];
    for label in shared {
        let line: String = table
            .lines()
            .filter(|l| l.starts_with(&format!("{label} ")))
            .collect::<Vec<_>>()
            .join(" ");
        assert!(!line.is_empty(), "no row {label}: {table}");
        for c in ["isol mean", "lat-imp", "work conserved", "aggressor rate"] {
            let i = sa.columns.iter().position(|x| x.name == c).unwrap();
            let (va, vb) = (
                row_of(&sa, label).unwrap()[i].text(),
                row_of(&sb, label).unwrap()[i].text(),
            );
            let beside = line.match_indices(&format!("  {va}")).any(|(at, m)| {
                let rest = &line[at + m.len()..];
                rest.starts_with("  ") && rest.trim_start().starts_with(&vb)
            });
            assert!(beside, "{c}: B's {vb} right after A's {va}: {line}");
        }
    }
    assert!(t.contains("tight/cpu@100"), "{t}");

    // HTML: the same table, the same figures.
    let html = dir.path().join("c.html");
    let out = isobench()
        .args(["compare", &a, &b, "-f", "html", "-o"])
        .arg(&html)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("No degradation cell to test"), "html");
    for label in shared {
        let i = sa
            .columns
            .iter()
            .position(|x| x.name == "isol mean")
            .unwrap();
        for s in [&sa, &sb] {
            let v = row_of(s, label).unwrap()[i].text();
            assert!(page.contains(&v), "{label}: {v} not in the HTML");
        }
    }
}

#[test]
fn tune_runs_are_compared_by_their_answers() {
    // The fake aggressor under a quota of q CPUs costs cpu-int a loss of 1 - 1 / (1 + 0.3 q):
    // a bound of 10% sits at q = 0.370, one of 15% at q = 0.588, each found to within 0.095
    // CPUs; the weight changes nothing, and the loose end loses 23%, so it fails everywhere.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let a = quota_fake_run(&db, &tune_scenario(10.0, 1));
    let b = quota_fake_run(&db, &tune_scenario(15.0, 2));
    let boundaries = |id: &str| {
        let out = isobench()
            .args(["export", id, "--format", "json", "--db"])
            .arg(&db)
            .output()
            .unwrap();
        let r: isobench_results::Results =
            serde_json::from_value(json_of(&out)["results"].clone()).unwrap();
        isobench_results::tune::boundaries(&r)
    };
    let (ba, bb) = (boundaries(&a), boundaries(&b));
    let cpus = |bs: &[isobench_results::tune::Boundary]| {
        bs.iter()
            .find(|b| b.knob == "aggressor.cpus")
            .cloned()
            .unwrap()
    };
    let (qa, qb) = (cpus(&ba), cpus(&bb));
    for (q, at) in [(&qa, 0.370), (&qb, 0.588)] {
        let (lo, hi) = (q.low.unwrap(), q.high.unwrap());
        assert!(lo <= at && at <= hi, "{q:?}");
        assert!(q.recommended.unwrap() <= at, "{q:?}");
        assert!(q.cost.is_some_and(|c| c > 0.0), "{q:?}");
    }

    let out = isobench()
        .args(["compare", &a, &b, "--format", "json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let doc = json_of(&out);
    let sections = doc["sections"].as_array().unwrap();
    let ids: Vec<&str> = sections.iter().filter_map(|s| s["id"].as_str()).collect();
    assert!(
        !ids.iter()
            .any(|i| i.starts_with("kind-tune-") || i.starts_with("kind-knob-")),
        "the points each run visited are not set side by side: {ids:?}"
    );
    let side: isobench_results::Section = serde_json::from_value(
        sections
            .iter()
            .find(|s| s["id"] == "kind-tune")
            .unwrap_or_else(|| panic!("no tune answers side by side: {ids:?}"))
            .clone(),
    )
    .unwrap();
    let col = |name: &str| {
        side.columns
            .iter()
            .position(|c| c.name == name)
            .unwrap_or_else(|| panic!("no column {name}: {:?}", side.headers()))
    };
    let row = row_of(&side, "cpu@100 · aggressor.cpus").expect("the quota's row");
    let rec = |r: &isobench_results::tune::Boundary| format!("{:.2}", r.recommended.unwrap());
    assert_eq!(row[col("A recommended")].text(), rec(&qa));
    assert_eq!(row[col("B recommended")].text(), rec(&qb));
    let shift: f64 = row[col("B-A shift")].text().parse().unwrap();
    assert!(
        (shift - (qb.recommended.unwrap() - qa.recommended.unwrap())).abs() < 1e-9,
        "{row:?}"
    );
    assert_eq!(row[col("B vs A intervals")].text(), "disjoint", "{row:?}");
    assert!(row[col("A cost")].as_f64().unwrap() > 0.0, "{row:?}");
    let weight = row_of(&side, "cpu@100 · aggressor.weight").expect("the weight's row");
    assert_eq!(
        weight[col("A recommended")].text(),
        "fails even at the tight end"
    );
    assert_eq!(weight[col("B vs A intervals")].text(), "-");

    // The terminal says the same, with why the points are not compared.
    let out = isobench()
        .args(["compare", &a, &b, "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let t = text(&out.stdout);
    assert!(
        t.contains("Loosest settings keeping the SLO (A | B)"),
        "{t}"
    );
    assert!(t.contains("disjoint"), "{t}");
    assert!(t.contains("compared by their answers"), "{t}");
}
