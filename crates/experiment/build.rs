//! The id of the analysis code: a SHA-256 of the sources of this crate and of every crate of
//! the workspace it is built from (its `isobench-*` dependencies, followed through theirs),
//! with the workspace's `Cargo.toml` and `Cargo.lock`. A stored results document carries the
//! id it was computed under, and is read back only by a build of the same code: any change,
//! even in a dev build of the same version, makes the stored documents unreadable.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

fn main() {
    let here = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let crates = here.parent().expect("crates/experiment").to_path_buf();
    let root = crates.parent().expect("the workspace").to_path_buf();

    let mut dirs = BTreeSet::new();
    let mut todo = vec!["experiment".to_string()];
    while let Some(name) = todo.pop() {
        if dirs.insert(name.clone()) {
            todo.extend(workspace_deps(&crates.join(&name).join("Cargo.toml")));
        }
    }

    let mut files = vec![root.join("Cargo.toml"), root.join("Cargo.lock")];
    for name in &dirs {
        let dir = crates.join(name);
        files.push(dir.join("Cargo.toml"));
        if dir.join("build.rs").exists() {
            files.push(dir.join("build.rs"));
        }
        collect(&dir.join("src"), &mut files);
        cargo(&format!("rerun-if-changed={}", dir.join("src").display()));
        cargo(&format!(
            "rerun-if-changed={}",
            dir.join("Cargo.toml").display()
        ));
    }
    cargo(&format!(
        "rerun-if-changed={}",
        root.join("Cargo.toml").display()
    ));
    cargo(&format!(
        "rerun-if-changed={}",
        root.join("Cargo.lock").display()
    ));
    cargo("rerun-if-changed=build.rs");

    files.sort();
    let mut h = Sha256::new();
    for f in &files {
        let text = fs::read(f).unwrap_or_else(|e| panic!("reading {}: {e}", f.display()));
        let name = f.strip_prefix(&root).unwrap_or(f).to_string_lossy();
        h.update((name.len() as u64).to_le_bytes());
        h.update(name.as_bytes());
        h.update((text.len() as u64).to_le_bytes());
        h.update(&text);
    }
    cargo(&format!(
        "rustc-env=ISOBENCH_ANALYSIS_CODE={:x}",
        h.finalize()
    ));
}

/// Tells cargo `directive` (`cargo:DIRECTIVE` on stdout, the build script protocol).
fn cargo(directive: &str) {
    use std::io::Write as _;
    writeln!(std::io::stdout(), "cargo:{directive}")
        .expect("cargo reads the build script's stdout");
}

/// The workspace crates (`isobench-NAME`, in `crates/NAME`) among the `[dependencies]` of
/// the manifest at `path` (not the dev- or build-dependencies: they are not in the code).
fn workspace_deps(path: &Path) -> Vec<String> {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut in_deps = false;
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
        } else if let Some(rest) = line.strip_prefix("isobench-").filter(|_| in_deps) {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .collect();
            out.push(name);
        }
    }
    out
}

/// Every file under `dir`, recursively.
fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            collect(&path, out);
        } else {
            out.push(path);
        }
    }
}
