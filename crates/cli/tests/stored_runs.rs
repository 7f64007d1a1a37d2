//! The commands that read stored runs (`runs`, `show`, `export`, `report`, `compare`) on
//! databases as users hand them over: in a read-only directory (a CI artifact), as a
//! directory or a truncated copy by mistake; and runs named by `latest` or a short id.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{code, fake, isobench, json_of, text, write};

/// The run settings of [`tiny`] (a small scenario the fake platform runs in a moment), before
/// the usual pair of tenants.
const TINY_HEAD: &str = r#"
name = "tiny"
kind = "matrix"
seed = 5

[trial]
duration = "100ms"
warmup = "50ms"
solo = "100ms"

[repetitions]
min = 2
max = 2
"#;

fn tiny() -> String {
    common::one_cpu_pair(TINY_HEAD)
}

/// Two runs of [`tiny`] in `dir/results.db`, oldest first.
fn two_runs(dir: &Path) -> (PathBuf, [String; 2]) {
    let f = write(dir, "tiny.toml", &tiny());
    let db = dir.join("results.db");
    let a = common::fake_run_of(&db, &[&f]);
    let b = common::fake_run_of(&db, &[&f]);
    (db, [a, b])
}

/// Why `unshare -m` with a read-only bind mount cannot be used here, if it cannot.
fn read_only_missing() -> Option<String> {
    let ok = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "true"])
        .output()
        .map(|o| o.status.success());
    match ok {
        Ok(true) => None,
        Ok(false) => Some("`unshare -m` is refused here (needs CAP_SYS_ADMIN)".into()),
        Err(e) => Some(format!("`unshare` cannot run: {e}")),
    }
}

/// `isobench args` with `target` read-only ([`read_only_command`]), waited for.
fn isobench_read_only(target: &Path, args: &[&str]) -> Output {
    isobench_read_only_with(target, args, &[])
}

/// [`isobench_read_only`] with more environment variables.
fn isobench_read_only_with(target: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let out = read_only_command(target)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        ![98, 99].contains(&code(&out)),
        "making {} read-only: {}",
        target.display(),
        text(&out.stderr)
    );
    out
}

/// The names of the files in `dir`, sorted.
fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Regression: `runs`, `show`, `export` and `report` on a database in a read-only directory
/// (a CI artifact) failed with "attempt to write a readonly database".
#[test]
fn read_only_database_can_be_shown() {
    if let Some(why) = read_only_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let (db, [a, b]) = two_runs(dir.path());
    let before = std::fs::read(&db).unwrap();
    let files = files_in(dir.path());
    let dbs = db.display().to_string();
    let report = out_dir.path().join("r.html");
    let csv = out_dir.path().join("r.csv");
    let reads: Vec<Vec<&str>> = vec![
        vec!["runs", "--db", &dbs],
        vec!["runs", "--json", "--db", &dbs],
        vec!["show", "latest", "--db", &dbs],
        vec!["show", &a, "--json", "--db", &dbs],
        vec!["export", &b, "--format", "md", "--db", &dbs],
        vec![
            "export",
            "latest",
            "-f",
            "csv",
            "-o",
            csv.to_str().unwrap(),
            "--db",
            &dbs,
        ],
        vec!["report", &a, "-o", report.to_str().unwrap(), "--db", &dbs],
        vec!["compare", &a, &b, "--db", &dbs],
    ];
    for args in &reads {
        let out = isobench_read_only(dir.path(), args);
        assert_eq!(code(&out), 0, "{args:?}: {}", text(&out.stderr));
        assert!(
            !out.stdout.is_empty() || args.contains(&"-o"),
            "{args:?} printed nothing"
        );
    }
    let shown = isobench_read_only(dir.path(), &["show", "latest", "--json", "--db", &dbs]);
    assert_eq!(json_of(&shown)["results"]["run"]["id"], b.as_str());
    assert!(report.exists() && csv.exists());
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "the database was not changed"
    );
    assert_eq!(files_in(dir.path()), files, "nothing was created beside it");

    // A read-only file in a writable directory reads too.
    for args in &reads[..3] {
        let out = isobench_read_only(&db, args);
        assert_eq!(code(&out), 0, "{args:?}: {}", text(&out.stderr));
    }
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

/// `isobench` (arguments to be appended) in a mount namespace of its own where `target` (a
/// directory or a file) is bind-mounted read-only onto itself: read-only for root too, whose
/// permission bits are not checked. The mount is gone with the process. Exit code 98 or 99:
/// the mount could not be made read-only.
fn read_only_command(target: &Path) -> std::process::Command {
    const SCRIPT: &str = r#"mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" || exit 98
if [ -w "$1" ]; then echo "$1 is still writable" >&2; exit 99; fi
shift
exec "$@""#;
    let mut cmd = std::process::Command::new("unshare");
    cmd.args([
        "-m",
        "--propagation",
        "private",
        "--",
        "sh",
        "-c",
        SCRIPT,
        "sh",
    ])
    .arg(target)
    .arg(assert_cmd::cargo::cargo_bin("isobench"))
    .env_remove("ISOBENCH_DB")
    .env("NO_COLOR", "1")
    .env("ISOBENCH_WAIT", "1");
    cmd
}

/// Regression (defect 6, the server's part): `serve` on a database in a read-only directory
/// lists, shows and exports its runs through the API and `/metrics`, and refuses a new job
/// with the reason instead of failing with "attempt to write a readonly database".
#[test]
fn read_only_database_can_be_served() {
    if let Some(why) = read_only_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let (db, [a, b]) = two_runs(dir.path());
    let before = std::fs::read(&db).unwrap();
    let server = common::served::Server::start_via(
        read_only_command(dir.path()),
        &db,
        "",
        &[
            "--listen",
            "127.0.0.1:0",
            "--state-dir",
            state.path().join("s").to_str().unwrap(),
        ],
    );
    let runs = server.get("/api/v1/runs", &[]);
    assert_eq!(runs.status, 200, "{}\n{}", runs.body, server.log());
    let listed = runs.body.matches("\"id\"").count();
    assert!(
        runs.body.contains(&a) && runs.body.contains(&b),
        "{}",
        runs.body
    );
    assert!(listed >= 2, "{}", runs.body);
    for path in [
        format!("/api/v1/runs/{a}"),
        format!("/api/v1/runs/{b}/export?format=csv"),
        "/metrics".to_string(),
    ] {
        let r = server.get(&path, &[]);
        assert_eq!(r.status, 200, "{path}: {}\n{}", r.body, server.log());
    }
    let csrf = server.csrf();
    let job = server.request(
        "POST",
        "/api/v1/jobs",
        &[
            ("content-type", "application/json"),
            ("x-isobench-csrf", &csrf),
        ],
        Some(r#"{"preset": "quick"}"#),
    );
    assert_eq!(job.status, 409, "{}", job.body);
    assert!(job.body.contains("read-only"), "{}", job.body);
    assert!(
        server.log().contains("is read-only here"),
        "{}",
        server.log()
    );
    drop(server);
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "the database was not changed"
    );
}

#[test]
fn read_only_database_refuses_a_run_with_the_reason() {
    if let Some(why) = read_only_missing() {
        eprintln!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = two_runs(dir.path());
    let f = write(dir.path(), "tiny.toml", &tiny());
    let dbs = db.display().to_string();
    let out = isobench_read_only_with(
        dir.path(),
        &["run", &f, "-q", "--db", &dbs],
        &[("ISOBENCH_DEBUG_FAKE", "1")],
    );
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
    let e = text(&out.stderr);
    assert!(e.contains(&dbs) && e.contains("read-only"), "{e}");
    assert!(e.contains("pass --db a writable file"), "{e}");
    assert!(!e.contains("attempt to write a readonly database"), "{e}");
}

/// Every command that takes `--db`, each refusing `db` the same way: exit code 2 and
/// `needle` in the error. Returns the errors.
fn refused_by_every_command(db: &Path, needles: &[&str]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "tiny.toml", &tiny());
    let dbs = db.display().to_string();
    let commands: [&[&str]; 7] = [
        &["runs"],
        &["runs", "--json"],
        &["show", "latest"],
        &["export", "latest"],
        &["report", "latest", "-o", "/dev/null"],
        &["compare", "a", "b"],
        &["run", &f, "-q"],
    ];
    let mut errors = Vec::new();
    for args in commands {
        let out = fake().args(args).args(["--db", &dbs]).output().unwrap();
        let e = text(&out.stderr);
        assert_eq!(code(&out), 2, "{args:?}: {e}");
        assert!(e.contains(&dbs), "{args:?} names the file: {e}");
        for n in needles {
            assert!(e.contains(n), "{args:?}: {n:?} in {e}");
        }
        errors.push(e);
    }
    errors
}

/// Regression: `--db` naming a directory gave "unable to open database file" three times
/// over, with no cause or fix, and exit code 1 where a file that is not SQLite gave 2.
#[test]
fn db_that_is_a_directory_names_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let errors = refused_by_every_command(
        dir.path(),
        &[
            "not a usable isobench database",
            "is a directory",
            "isobench.db",
        ],
    );
    for e in errors {
        assert!(!e.contains("unable to open database file"), "{e}");
    }
}

#[test]
fn db_in_a_missing_directory_names_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "tiny.toml", &tiny());
    let db = dir.path().join("no-such-dir").join("r.db");
    let out = fake()
        .args(["run", &f, "-q", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    let e = text(&out.stderr);
    assert!(
        e.contains("there is no directory") && e.contains("no-such-dir") && e.contains("create it"),
        "{e}"
    );
}

/// Regression: a truncated database gave "database disk image is malformed" twice, with no
/// fix, and exit code 1 where a file that is not SQLite gave 2.
#[test]
fn truncated_db_names_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = two_runs(dir.path());
    let bytes = std::fs::read(&db).unwrap();
    assert!(bytes.len() > 8192, "a database of several pages");
    for cut in [60, 4096, bytes.len() / 2] {
        let cut_db = dir.path().join(format!("cut-{cut}.db"));
        std::fs::write(&cut_db, &bytes[..cut]).unwrap();
        let errors = refused_by_every_command(
            &cut_db,
            &[
                "not a usable isobench database",
                "damaged or truncated",
                "restore it from a complete copy",
            ],
        );
        for e in errors {
            assert!(e.matches("malformed").count() <= 1, "said once: {e}");
        }
        assert_eq!(
            std::fs::read(&cut_db).unwrap(),
            &bytes[..cut],
            "left as it was"
        );
    }
    // A file that is not SQLite at all: the same exit code, its own cause.
    let junk = dir.path().join("notes.txt");
    std::fs::write(&junk, "not a database\n".repeat(400)).unwrap();
    refused_by_every_command(
        &junk,
        &["not a usable isobench database", "not an SQLite database"],
    );
}

#[test]
fn show_latest_and_prefixes() {
    let dir = tempfile::tempdir().unwrap();
    let (db, [a, b]) = two_runs(dir.path());
    let dbs = db.display().to_string();
    let id_of = |wanted: &str| {
        let out = isobench()
            .args(["show", wanted, "--json", "--db", &dbs])
            .output()
            .unwrap();
        json_of(&out)["results"]["run"]["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // `latest` is the run started last: the last line of `runs`.
    assert_eq!(id_of("latest"), b);
    assert_eq!(id_of(&a), a);
    // The shortest prefix of each random part that only it has, and the id's own prefix.
    let tail = |id: &str| id.rsplit('-').next().unwrap().to_string();
    let (ta, tb) = (tail(&a), tail(&b));
    // (Nor the start of a whole id: a random part "2a..." starts as every id's date does.)
    let n = (1..=ta.len())
        .find(|&n| {
            ta[..n] != tb[..n]
                && [&a, &b]
                    .iter()
                    .all(|id| !id.starts_with(&ta[..n]) && !id.starts_with(&tb[..n]))
        })
        .unwrap();
    assert_eq!(id_of(&ta[..n]), a);
    assert_eq!(id_of(&tb[..n]), b);
    let full_prefix = &a[..a.len() - ta.len() + n];
    assert_eq!(id_of(full_prefix), a);
    // export, report and compare take them too.
    let out = isobench()
        .args(["export", &tb[..n], "-f", "json", "--db", &dbs])
        .output()
        .unwrap();
    assert_eq!(json_of(&out)["results"]["run"]["id"], b.as_str());
    let html = dir.path().join("latest.html");
    let out = isobench()
        .args(["report", "latest", "-o"])
        .arg(&html)
        .args(["--db", &dbs])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(std::fs::read_to_string(&html).unwrap().contains(&b));
    let out = isobench()
        .args(["compare", &ta[..n], "latest", "-f", "json", "--db", &dbs])
        .output()
        .unwrap();
    let doc = json_of(&out).to_string();
    assert!(doc.contains(&a) && doc.contains(&b), "{doc}");
    // `run --resume` too: the complete run is named in full.
    let out = fake()
        .args(["run", "--resume", &tb[..n], "--db", &dbs])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    let e = text(&out.stderr);
    assert!(e.contains(&format!("run {b} is complete")), "{e}");

    // A prefix both share names both, newest first, and runs nothing.
    let shared = &a[..8];
    for args in [
        vec!["show", shared],
        vec!["export", shared],
        vec!["compare", shared, &a],
    ] {
        let out = isobench()
            .args(&args)
            .args(["--db", &dbs])
            .output()
            .unwrap();
        assert_eq!(code(&out), 2, "{args:?}");
        let e = text(&out.stderr);
        assert!(
            e.contains(&format!("`{shared}` could be any of 2 runs")),
            "{e}"
        );
        let (pa, pb) = (e.find(&a).unwrap(), e.find(&b).unwrap());
        assert!(pb < pa, "newest first: {e}");
    }
    // Nothing matching, and `latest` of an empty database.
    let out = isobench()
        .args(["show", "zz", "--db", &dbs])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    assert!(text(&out.stderr).contains("run zz is not in the isobench database"));
    let empty = dir.path().join("empty.db");
    rusqlite::Connection::open(&empty)
        .unwrap()
        .execute_batch("PRAGMA user_version = 0;")
        .unwrap();
    // An empty file of an older schema: the first read migrates it.
    let out = isobench()
        .args(["runs", "--db"])
        .arg(&empty)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let out = isobench()
        .args(["show", "latest", "--db"])
        .arg(&empty)
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    assert!(
        text(&out.stderr).contains("holds no run yet"),
        "{}",
        text(&out.stderr)
    );
}

/// Regression: `compare X X` compared a run with itself and printed a table of zeros.
#[test]
fn compare_refuses_the_same_run_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (db, [a, b]) = two_runs(dir.path());
    let dbs = db.display().to_string();
    let out = isobench()
        .args(["compare", &a, &a, "--db", &dbs])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    let e = text(&out.stderr);
    assert!(e.contains(&format!("`{a}` is given twice")), "{e}");
    assert!(out.stdout.is_empty());
    // The same run by two names.
    let out = isobench()
        .args(["compare", &a, &b, "latest", "--db", &dbs])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    let e = text(&out.stderr);
    assert!(
        e.contains(&format!("`{b}` and `latest` are the same run ({b})")),
        "{e}"
    );
    // Two different runs still compare.
    let out = isobench()
        .args(["compare", &a, &b, "--db", &dbs])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
}
