//! bench/RESULTS.md is generated from the figure records in bench/figures/ by
//! bench/results.py; these tests keep the two from drifting apart (an edit of RESULTS.md by
//! hand, a record changed without regenerating it, a record that links a missing pass) and run
//! the Python tests of the bench scripts' record writing. Python 3 with its standard library
//! is all they need.

use std::path::PathBuf;
use std::process::Command;

mod common;

/// The repository's bench directory.
fn bench() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench")
}

/// `python3 ARGS` in the bench directory (no bytecode left in the tree): its exit code and
/// its output, or `None` (the test skipped) without a python3.
fn python(args: &[&str]) -> Option<(i32, String)> {
    let out = match Command::new("python3")
        .args(args)
        .current_dir(bench())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            common::skip("python3", &format!("python3 cannot run here: {e}"));
            return None;
        }
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some((out.status.code().unwrap_or(-1), text))
}

#[test]
fn results_md_is_what_the_records_give() {
    let Some((code, out)) = python(&["results.py", "--check"]) else {
        return;
    };
    assert_eq!(
        code, 0,
        "bench/results.py --check: {out}\n(edit bench/figures/*.json, then run `python3 bench/results.py`)"
    );
}

#[test]
fn the_bench_scripts_write_their_records() {
    let Some((code, out)) = python(&["test_results.py"]) else {
        return;
    };
    assert_eq!(code, 0, "bench/test_results.py: {out}");
}
