//! Files that hold results or a token are created readable by their owner only, whatever the
//! umask (docs/security.md). Each command runs with umask 0, under which a file created
//! without an explicit mode would be readable and writable by everyone (0666).

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Stdio;

use common::{code, spawnable, text};

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o777
}

/// `isobench` with umask 0.
fn under_umask_0() -> std::process::Command {
    let mut c = spawnable();
    // SAFETY: umask(2) is async-signal-safe and touches no memory.
    unsafe {
        c.pre_exec(|| {
            libc::umask(0);
            Ok(())
        });
    }
    c
}

#[test]
fn a_run_creates_its_database_private_even_under_umask_0() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let out = under_umask_0()
        .env("ISOBENCH_DEBUG_FAKE", "1")
        .args(["run", "-q", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert_eq!(mode(&db), 0o600);
    for side in ["runs.db-wal", "runs.db-shm", "runs.db-journal"] {
        let p = dir.path().join(side);
        if p.exists() {
            assert_eq!(mode(&p) & 0o077, 0, "{side}: {:o}", mode(&p));
        }
    }
}

#[test]
fn serve_creates_its_token_and_state_private_even_under_umask_0() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("served.db");
    let token = dir.path().join("token");
    let log = dir.path().join("serve.log");
    let mut child = under_umask_0()
        .env("ISOBENCH_DEBUG_FAKE", "1")
        .args(["serve", "--listen", "127.0.0.1:0", "--token-file"])
        .arg(&token)
        .arg("--db")
        .arg(&db)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let listening = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .any(|l| l.starts_with("listening on http://"));
    let state = dir.path().join("served.db.serve");
    // Read before the server is stopped; a missing file is None, not a panic that would
    // leave the server running.
    let m = |p: &Path| {
        std::fs::metadata(p)
            .ok()
            .map(|m| m.permissions().mode() & 0o777)
    };
    let seen = (
        m(&token),
        m(&state),
        m(&state.join("jobs")),
        m(&state.join("queue.json")),
    );
    // SAFETY: kill(2) of the server's own process group, which this test started.
    unsafe {
        libc::kill(-(child.id() as libc::pid_t), libc::SIGTERM);
    }
    let _ = child.wait();
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(listening, "{stderr}");
    assert_eq!(
        seen,
        (Some(0o600), Some(0o700), Some(0o700), Some(0o600)),
        "{stderr}"
    );
    assert!(stderr.contains("wrote a new token"), "{stderr}");
    let written = std::fs::read_to_string(&token).unwrap();
    assert_eq!(written.trim().len(), 32, "{written:?}");
}

#[test]
fn serve_refuses_a_token_file_other_users_can_read() {
    let dir = tempfile::tempdir().unwrap();
    let token = common::write(dir.path(), "token", "a-token-others-can-read\n");
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = common::isobench()
        .args(["serve", "--listen", "0.0.0.0:0", "--token-file", &token])
        .arg("--db")
        .arg(dir.path().join("x.db"))
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("mode 644"), "{stderr}");
    assert!(stderr.contains("chmod 600"), "{stderr}");
}

/// Defect: reports and exports were written 0644 (the umask's mode), while the database
/// beside them is 0600.
#[test]
fn reports_are_written_0600() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let db = d.join("runs.db");
    // `run --export-*` and `--report`, under umask 0.
    let out = under_umask_0()
        .env("ISOBENCH_DEBUG_FAKE", "1")
        .current_dir(d)
        .args(["run", "-q", "--db"])
        .arg(&db)
        .args([
            "--export-json=run.json",
            "--export-csv=run.csv",
            "--export-markdown=run.md",
            "--report=run.html",
        ])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let out = under_umask_0()
        .env("ISOBENCH_DEBUG_FAKE", "1")
        .args(["run", "-q", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let ids = common::run_ids(&db);
    assert_eq!(ids.len(), 2, "{ids:?}");
    // A file already there, readable by everyone, is replaced by a private one.
    std::fs::write(d.join("old.html"), "old").unwrap();
    std::fs::set_permissions(d.join("old.html"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let commands: Vec<Vec<String>> = vec![
        vec![
            "report".into(),
            ids[0].clone(),
            "-o".into(),
            "report.html".into(),
        ],
        vec![
            "report".into(),
            ids[0].clone(),
            "-o".into(),
            "old.html".into(),
        ],
        vec![
            "export".into(),
            ids[0].clone(),
            "--format".into(),
            "json".into(),
            "-o".into(),
            "export.json".into(),
        ],
        vec![
            "export".into(),
            ids[0].clone(),
            "--format".into(),
            "csv".into(),
            "-o".into(),
            "export.csv".into(),
        ],
        vec![
            "compare".into(),
            ids[0].clone(),
            ids[1].clone(),
            "-o".into(),
            "compare.txt".into(),
        ],
    ];
    for args in &commands {
        let out = under_umask_0()
            .current_dir(d)
            .args(args)
            .arg("--db")
            .arg(&db)
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{args:?}: {}", text(&out.stderr));
    }
    for f in [
        "run.json",
        "run.csv",
        "run.md",
        "run.html",
        "report.html",
        "old.html",
        "export.json",
        "export.csv",
        "compare.txt",
    ] {
        assert_eq!(mode(&d.join(f)), 0o600, "{f}");
    }
    assert_ne!(std::fs::read_to_string(d.join("old.html")).unwrap(), "old");
}

/// Defect: two `isobench serve` on one `--db` both started, handed out the same job ids, ran
/// jobs at once, and their queue file kept only one server's jobs.
#[test]
fn second_server_on_one_state_dir_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("one.db");
    let log = dir.path().join("first.log");
    let mut first = spawnable()
        .env("ISOBENCH_DEBUG_FAKE", "1")
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(&db)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let addr = BufReader::new(first.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("listening on ").map(str::to_string));
    let second = common::isobench()
        .env("ISOBENCH_DEBUG_FAKE", "1")
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(&db)
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    // SAFETY: kill(2) of the first server's process group, which this test started.
    unsafe {
        libc::kill(-(first.id() as libc::pid_t), libc::SIGTERM);
    }
    let _ = first.wait();
    let addr = addr.unwrap_or_else(|| panic!("{}", std::fs::read_to_string(&log).unwrap()));
    let stderr = text(&second.stderr);
    assert_eq!(code(&second), 2, "{stderr}");
    assert!(
        stderr.contains("another isobench serve")
            && stderr.contains(&format!("pid {}", first.id()))
            && stderr.contains(addr.trim()),
        "{stderr}"
    );
    assert!(stderr.contains("--db"), "the fix is named: {stderr}");
    // The lock file says who holds the directory, and only to its owner.
    let state = dir.path().join("one.db.serve");
    assert!(state.join("serve.lock").exists());
    assert_eq!(mode(&state.join("serve.lock")), 0o600);
}

/// Defect: `serve --listen 0.0.0.0:PORT --token-file F` started with a one-character token.
#[test]
fn serve_refuses_a_short_token() {
    let dir = tempfile::tempdir().unwrap();
    let token = common::write_private(dir.path(), "token", "x\n");
    for listen in ["0.0.0.0:0", "127.0.0.1:0"] {
        let out = common::isobench()
            .args(["serve", "--listen", listen, "--token-file", &token])
            .arg("--db")
            .arg(dir.path().join("x.db"))
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(code(&out), 2, "{stderr}");
        assert!(
            stderr.contains(&format!("--token-file {token}"))
                && stderr.contains("1 character(s), fewer than the 16 required"),
            "{stderr}"
        );
    }
}
