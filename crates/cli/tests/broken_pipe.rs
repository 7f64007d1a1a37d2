//! Regression: `isobench runs --json | head -1` panicked with "failed printing to stdout:
//! Broken pipe" (exit 101). Output into a pipe whose reader has gone is a normal end: exit 0,
//! nothing on stderr (ripgrep's convention; docs/cli.md, "Exit codes").

mod common;

use std::os::fd::{FromRawFd as _, OwnedFd};
use std::process::Stdio;

use common::{code, spawnable, text};

/// A pipe whose read end is already closed: every write to the other end fails with EPIPE,
/// whenever the child makes it (no race with a reader closing early).
fn closed_pipe() -> OwnedFd {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors this function then owns.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors are fresh and owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    write
}

/// Runs `isobench args` with its standard output a pipe nobody reads; returns (code, stderr).
fn into_closed_pipe(args: &[&str], db: &std::path::Path) -> (i32, String) {
    let out = spawnable()
        .args(args)
        .env("ISOBENCH_DB", db)
        .stdin(Stdio::null())
        .stdout(Stdio::from(closed_pipe()))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (code(&out), text(&out.stderr))
}

#[test]
fn runs_json_into_a_closed_pipe_is_not_failed_printing_to_stdout_broken_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("none.sqlite");
    // `print!`/`println!` (runs, list), and whole documents written at once (completions,
    // man, export), on the two paths a closed pipe can take.
    for args in [
        &["runs", "--json"][..],
        &["runs"],
        &["list", "--json"],
        &["list"],
        &["completions", "bash"],
        &["man"],
    ] {
        let (code, stderr) = into_closed_pipe(args, &db);
        assert_eq!(code, 0, "isobench {args:?}: stderr: {stderr}");
        assert_eq!(stderr, "", "isobench {args:?} said something on stderr");
    }
}

#[test]
fn a_real_error_still_fails_when_stdout_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("none.sqlite");
    let (code, stderr) = into_closed_pipe(&["show", "no-such-run"], &db);
    assert_eq!(code, 2, "stderr: {stderr}");
    assert!(stderr.contains("isobench: error:"), "{stderr}");
}

/// Runs `isobench args` with both standard output and standard error a pipe nobody reads
/// (`isobench ... 2>&1 | head -c 100` once `head` has left); returns the exit code.
fn all_into_closed_pipes(args: &[&str], db: &std::path::Path) -> i32 {
    let out = spawnable()
        .args(args)
        .env("ISOBENCH_DB", db)
        .env("ISOBENCH_DEBUG_FAKE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::from(closed_pipe()))
        .stderr(Stdio::from(closed_pipe()))
        .output()
        .unwrap();
    code(&out)
}

/// Regression: `isobench run BAD.toml --dry-run 2>&1 | head -c 100` panicked (exit 101):
/// the error went to a standard error whose reader had gone, and `eprintln!` panics on
/// that. The error is lost (there is nowhere to say it), the exit code is still the
/// error's, and every other command ends as it would with a reader.
#[test]
fn dry_run_into_a_closed_pipe_does_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db");
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[[tenant]]\nname = \"v\"\nrole = \"victim\"\nbogus = 1\n",
    )
    .unwrap();
    let bad = bad.to_str().unwrap();
    assert_eq!(all_into_closed_pipes(&["run", bad, "--dry-run"], &db), 2);
    assert_eq!(all_into_closed_pipes(&["run", "--dry-run"], &db), 0);
    assert_eq!(
        all_into_closed_pipes(&["run", "--preset", "standard", "--dry-run"], &db),
        0
    );
    // Standard output alone closed: the same, and nothing on stderr for a good plan.
    let (c, stderr) = into_closed_pipe(&["run", bad, "--dry-run"], &db);
    assert_eq!(c, 2, "{stderr}");
    assert!(stderr.contains("unknown field `bogus`"), "{stderr}");
    // A run whose progress and report nobody reads is stored all the same.
    assert_eq!(all_into_closed_pipes(&["run", "--preset", "quick"], &db), 0);
    let (c, stderr) = into_closed_pipe(&["runs", "--json"], &db);
    assert_eq!((c, stderr.as_str()), (0, ""));
    for args in [
        &["show", "latest"][..],
        &["show", "latest", "--json"],
        &["export", "latest", "-f", "csv"],
        &["compare", "latest", "latest"],
        &["list", "--json"],
        &["presets"],
        &["run", "--help"],
    ] {
        let want = if args[0] == "compare" { 2 } else { 0 };
        assert_eq!(all_into_closed_pipes(args, &db), want, "isobench {args:?}");
    }
}

/// Standard output that fails for another reason than its reader leaving (a full disk) is
/// the command's error, exit code 1, not a panic.
#[test]
fn stdout_on_a_full_disk_is_an_error_not_a_panic() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        eprintln!("skipped: no /dev/full");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for args in [&["list"][..], &["completions", "bash"], &["runs"]] {
        let out = spawnable()
            .args(args)
            .env("ISOBENCH_DB", dir.path().join("none.db"))
            .stdout(Stdio::from(full.try_clone().unwrap()))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(code(&out), 1, "isobench {args:?}: {stderr}");
        assert!(
            stderr.contains("writing to standard output") && stderr.contains("No space left"),
            "{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
