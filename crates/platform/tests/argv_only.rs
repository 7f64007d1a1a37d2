//! Every external command isobench runs (`ip`, `tc`, `docker`, `podman`, `qemu`, `dpkg-deb`,
//! ...) is started with an argument vector, never as a string a shell parses: a tenant name,
//! a path or an address then stays one argument whatever it holds. This test holds the whole
//! workspace to it: it reads the non-test sources of every crate and fails naming file:line
//! where a shell could be started (docs/security.md).
//!
//! A shell cannot be started without naming it, so the test looks for the names: a string
//! literal that is exactly a shell (`"sh"`, `"/bin/bash"`, ...) or `/usr/bin/env`, or a read of
//! the `SHELL` variable. Comments and `#[cfg(test)]` items are not product code and are skipped
//! (tests may use a shell to build their fixtures).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Literals that name a program which interprets its argument as a script, and the reads of
/// the user's shell.
const SHELLS: &[&str] = &[
    "\"sh\"",
    "\"bash\"",
    "\"dash\"",
    "\"ash\"",
    "\"zsh\"",
    "\"ksh\"",
    "\"fish\"",
    "\"/bin/sh\"",
    "\"/bin/bash\"",
    "\"/bin/dash\"",
    "\"/usr/bin/sh\"",
    "\"/usr/bin/bash\"",
    "\"/usr/bin/env\"",
    "var(\"SHELL\")",
    "var_os(\"SHELL\")",
];

/// The workspace's `crates/` directory.
fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crates/")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The product code of one file: (line number, line) outside comments and `#[cfg(test)]`
/// items, and the files of `#[cfg(test)] mod name;` declarations (test-only modules).
///
/// An item's end is found as rustfmt lays it out (the workspace is kept `cargo fmt` clean):
/// the first line after its start that is `}` at the item's own indentation.
fn product_lines(path: &Path, text: &str) -> (Vec<(usize, String)>, Vec<PathBuf>) {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut test_modules = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            let indent = &line[..line.len() - trimmed.len()];
            // The item the attribute applies to, past any further attributes.
            let mut j = i + 1;
            while j < lines.len() && lines[j].trim_start().starts_with("#[") {
                j += 1;
            }
            let item = lines.get(j).map_or("", |l| l.trim());
            if item.ends_with(';') {
                if let Some(name) = item
                    .strip_prefix("mod ")
                    .or_else(|| item.split_once(" mod ").map(|(_, n)| n))
                {
                    test_modules.push(module_file(path, name.trim_end_matches(';')));
                }
            }
            if item.ends_with(';') || item.ends_with(',') || item.ends_with('}') {
                // A one-line item: `use`, `mod name;`, a field, `fn f() {}`.
                i = j + 1;
                continue;
            }
            let close = format!("{indent}}}");
            let mut k = j;
            while k < lines.len() && lines[k] != close {
                k += 1;
            }
            assert!(
                k < lines.len(),
                "{}:{}: no closing `}}` for the #[cfg(test)] item at this indentation",
                path.display(),
                i + 1
            );
            i = k + 1;
            continue;
        }
        if !trimmed.starts_with("//") {
            out.push((i + 1, line.to_string()));
        }
        i += 1;
    }
    (out, test_modules)
}

/// The file of module `name` declared in `parent`.
fn module_file(parent: &Path, name: &str) -> PathBuf {
    let dir = parent.parent().expect("a directory");
    let stem = parent.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let base = if matches!(stem, "lib" | "main" | "mod") {
        dir.to_path_buf()
    } else {
        dir.join(stem)
    };
    let flat = base.join(format!("{name}.rs"));
    if flat.exists() {
        flat
    } else {
        base.join(name).join("mod.rs")
    }
}

/// The shell names on a line of product code.
fn shells_on(line: &str) -> Vec<&'static str> {
    SHELLS
        .iter()
        .copied()
        .filter(|s| line.contains(s))
        .collect()
}

#[test]
fn no_product_code_starts_a_shell() {
    let crates = crates_dir();
    let mut files = Vec::new();
    for krate in std::fs::read_dir(&crates).unwrap() {
        let src = krate.unwrap().path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    let mut test_only = BTreeSet::new();
    let mut scanned = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let (lines, modules) = product_lines(f, &text);
        test_only.extend(modules);
        scanned.push((f.clone(), lines));
    }
    let mut found = Vec::new();
    let mut commands = 0;
    let mut runner_seen = false;
    for (f, lines) in scanned.iter().filter(|(f, _)| !test_only.contains(f)) {
        for (n, line) in lines {
            commands += line.matches("Command::new(").count();
            if f.ends_with("platform/src/cmd.rs") && line.contains("Command::new(prog)") {
                runner_seen = true;
            }
            for s in shells_on(line) {
                found.push(format!(
                    "{}:{n}: {s} in `{}`",
                    f.strip_prefix(&crates).unwrap_or(f).display(),
                    line.trim()
                ));
            }
        }
    }
    // Not vacuous: the scan read the workspace's sources, where its commands are built.
    assert!(
        files.len() >= 150,
        "only {} source files found",
        files.len()
    );
    assert!(
        !test_only.is_empty(),
        "the test-only module files were not recognised"
    );
    assert!(runner_seen, "platform/src/cmd.rs's runner was not read");
    assert!(commands >= 10, "only {commands} Command::new seen");
    assert!(
        found.is_empty(),
        "product code names a shell; run the program with an argument vector instead \
         (platform/src/cmd.rs), docs/security.md:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_sees_a_shell_and_skips_tests_and_comments() {
    let src = r#"
fn run(name: &str) {
    // Command::new("sh") in a comment is not code.
    let mut c = Command::new("sh");
    c.args(["-c", &format!("ip link del {name}")]);
    Command::new("/bin/bash");
    Command::new("shellcheck");
}

#[cfg(test)]
#[allow(dead_code)]
fn helper() {
    Command::new("sh");
}

#[cfg(test)]
const FOR_TESTS: &str = "sh";

#[cfg(test)]
fn wrapped(
    a: u32,
) {
    Command::new("bash");
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod more_tests {
    fn inner() {
        Command::new("bash");
    }
}
"#;
    let path = Path::new("/nonexistent/src/lib.rs");
    let (lines, modules) = product_lines(path, src);
    let hits: Vec<(usize, &str)> = lines
        .iter()
        .flat_map(|(n, l)| shells_on(l).into_iter().map(move |s| (*n, s)))
        .collect();
    assert_eq!(hits, [(4, "\"sh\""), (6, "\"/bin/bash\"")]);
    assert_eq!(
        modules,
        [PathBuf::from("/nonexistent/src/tests/mod.rs")],
        "a missing flat file is looked for as name/mod.rs"
    );
    assert!(lines.iter().all(|(_, l)| !l.contains("inner")));
}
