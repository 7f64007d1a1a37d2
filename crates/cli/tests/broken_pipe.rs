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
