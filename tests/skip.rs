//! Skipping a test that lacks a fixture (root, an engine, a cluster, a browser), with the
//! reason. Shared by the test crates' `common` modules (`#[path]`-included, so it is no
//! product code).
//!
//! The reason is printed past the test harness's output capture, and, when
//! `ISOBENCH_SKIP_LOG` names a file, appended to it as one line
//! `GROUP<TAB>REASON<TAB>TEST`. `scripts/test` sets the variable and, after the whole suite,
//! prints every skipped group with its reason and how many tests it held, as the run's last
//! lines, so a green run that skipped a fixture says so where it is seen.
#![allow(dead_code)]

use std::io::Write;

/// The variable naming the file skips are appended to.
pub const SKIP_LOG_ENV: &str = "ISOBENCH_SKIP_LOG";

/// The running test's name (the harness names each test's thread after it), else `unknown`.
pub fn current_test() -> String {
    std::thread::current()
        .name()
        .filter(|n| *n != "main")
        .unwrap_or("unknown")
        .to_string()
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Skips the running test: `group` names the fixture (`k8s`, `vm`, `docker`, `root`, ...),
/// `why` why it is missing here and what provides it.
pub fn skip(group: &str, why: &str) {
    skip_test(group, &current_test(), why);
}

/// As [`skip`], naming the test.
pub fn skip_test(group: &str, test: &str, why: &str) {
    let why = one_line(why);
    let _ = writeln!(std::io::stderr(), "SKIP {test} ({group}): {why}");
    let Some(path) = std::env::var_os(SKIP_LOG_ENV) else {
        return;
    };
    let line = format!("{}\t{why}\t{}\n", one_line(group), one_line(test));
    // One short write in append mode: lines from parallel tests do not interleave.
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        let _ = writeln!(
            std::io::stderr(),
            "could not record the skip in {}: {e}",
            std::path::Path::new(&path).display()
        );
    }
}
