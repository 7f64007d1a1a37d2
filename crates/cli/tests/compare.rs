//! `isobench compare` as a user meets it, on runs made instantly on the fake platform: the
//! built-in scenario twice, a scenario file that shares part of its cells, and the null
//! preset, which shares none.

use std::path::{Path, PathBuf};

mod common;
use common::{code, fake, isobench, json_of, text, write};

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
