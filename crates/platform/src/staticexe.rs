//! The static isobench binary that container images and VM guests carry: one file with no
//! shared libraries, so it runs on any root filesystem.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// The variable that names the static binary explicitly.
pub const ENV_STATIC_EXE: &str = "ISOBENCH_STATIC_EXE";

/// Whether the ELF file at `path` is statically linked (it has no program interpreter).
pub fn is_static(path: &Path) -> Result<bool> {
    let mut head = Vec::new();
    File::open(path)
        .with_context(|| format!("opening {}", path.display()))?
        .take(64 * 1024)
        .read_to_end(&mut head)
        .with_context(|| format!("reading {}", path.display()))?;
    let u16_at = |o: usize| head.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| {
        head.get(o..o + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |o: usize| {
        head.get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    };
    // A 64-bit little-endian ELF file: e_phoff at 32, e_phentsize at 54, e_phnum at 56.
    if head.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        bail!("{} is not a 64-bit little-endian ELF file", path.display());
    }
    let (Some(phoff), Some(entsize), Some(count)) = (u64_at(32), u16_at(54), u16_at(56)) else {
        bail!("{} has a truncated ELF header", path.display());
    };
    const PT_INTERP: u32 = 3;
    for i in 0..count as usize {
        let at = phoff as usize + i * entsize as usize;
        match u32_at(at) {
            Some(PT_INTERP) => return Ok(false),
            Some(_) => {}
            None => bail!("{}: program headers past the first 64 KiB", path.display()),
        }
    }
    Ok(true)
}

/// Where the static binary is looked for, in order: `ISOBENCH_STATIC_EXE`, the running
/// binary when it is static itself, what `scripts/build-static` builds next to the running
/// binary's target directory (the newer of its release and debug builds first), and the
/// cache (`~/.cache/isobench/isobench-static`).
pub fn candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os(ENV_STATIC_EXE) {
        out.push(PathBuf::from(p));
        return out;
    }
    if let Ok(exe) = std::env::current_exe() {
        out.push(exe.clone());
        // target/{debug,release}/isobench (or target/{debug,release}/deps/test-binary)
        for dir in exe.ancestors().skip(1).take(3) {
            if dir.file_name().is_some_and(|n| n == "target") {
                let triple = "x86_64-unknown-linux-gnu";
                // The newer build first: an old release build must not shadow a fresh
                // debug one (or the other way round).
                let mut built: Vec<PathBuf> = ["release", "debug"]
                    .iter()
                    .map(|p| dir.join("static").join(triple).join(p).join("isobench"))
                    .collect();
                built.sort_by_key(|p| {
                    std::cmp::Reverse(std::fs::metadata(p).and_then(|m| m.modified()).ok())
                });
                out.extend(built);
            }
        }
    }
    if let Some(cache) = crate::run::cache_dir() {
        out.push(cache.join("isobench-static"));
    }
    out
}

/// The static isobench binary, or why there is none and how to make one.
pub fn find() -> Result<PathBuf> {
    let tried = candidates();
    for p in &tried {
        if p.is_file() && is_static(p).unwrap_or(false) {
            return Ok(p.clone());
        }
    }
    if let Some(p) = std::env::var_os(ENV_STATIC_EXE) {
        bail!(
            "{ENV_STATIC_EXE}={} is not a statically linked isobench binary; build one with \
             `scripts/build-static`",
            Path::new(&p).display()
        );
    }
    bail!(
        "no statically linked isobench binary (looked at {}); build one with \
         `scripts/build-static`, or set {ENV_STATIC_EXE}",
        tried
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dynamic_test_binary_is_not_static_and_garbage_is_an_error() {
        // Test binaries are linked like the host's programs; /bin/sh is dynamic on Debian.
        assert!(!is_static(Path::new("/bin/sh")).unwrap());
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x");
        std::fs::write(&f, b"#!/bin/sh\n").unwrap();
        let e = is_static(&f).unwrap_err().to_string();
        assert!(e.contains("not a 64-bit little-endian ELF"), "{e}");
    }
}
