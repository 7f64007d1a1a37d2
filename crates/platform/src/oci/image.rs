//! The agent's image, built offline by isobench itself: a root filesystem holding the static
//! isobench binary (`/isobench`) and a static busybox with its applet links (a shell and the
//! usual tools for tests and debugging), written as a tar archive and imported into the
//! engine (`docker import` / `podman import`). No registry is ever contacted.
//!
//! The tag names the isobench version and a hash of both binaries, so a rebuilt binary gets
//! a new image and an unchanged one is reused; the label [`IMAGE_LABEL`] lets the cleanup
//! find old ones.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use anyhow::{bail, Context, Result};

use super::engine::Engine;
use crate::staticexe;

/// The image repository (the tag is `<version>-<hash>`).
pub const IMAGE_REPO: &str = "isobench-agent";
/// Label carried by every agent image, with the value `agent`.
pub const IMAGE_LABEL: &str = "isobench.image";
/// Where the isobench binary is in the image.
pub const IMAGE_EXE: &str = "/isobench";
/// `PATH` inside the image.
const IMAGE_PATH: &str = "/bin:/usr/bin:/sbin:/usr/sbin";
/// Bumped when the layout of the root filesystem changes, so old images are not reused.
const LAYOUT: &str = "1";
/// Where a static busybox is looked for (Debian's `busybox-static` installs `/bin/busybox`).
const BUSYBOX: &[&str] = &["/bin/busybox", "/usr/bin/busybox", "/usr/local/bin/busybox"];

/// The files an image is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageSource {
    /// The static isobench binary.
    pub exe: PathBuf,
    /// The static busybox.
    pub busybox: PathBuf,
}

impl ImageSource {
    /// The static isobench binary ([`staticexe::find`]) and a static busybox, or why not.
    pub fn find() -> Result<ImageSource> {
        let exe = staticexe::find()?;
        let busybox = find_busybox()?;
        Ok(ImageSource { exe, busybox })
    }

    /// `isobench-agent:<version>-<hash of both binaries>`.
    pub fn tag(&self) -> Result<String> {
        let h = cached_hash(&self.exe, &self.busybox)?;
        Ok(format!(
            "{IMAGE_REPO}:{}-{:012x}",
            env!("CARGO_PKG_VERSION"),
            h >> 16
        ))
    }
}

/// A statically linked busybox, or why there is none.
pub fn find_busybox() -> Result<PathBuf> {
    let mut dynamic = None;
    for p in BUSYBOX {
        let p = Path::new(p);
        if !p.is_file() {
            continue;
        }
        if staticexe::is_static(p).unwrap_or(false) {
            return Ok(p.to_path_buf());
        }
        dynamic.get_or_insert(p);
    }
    match dynamic {
        Some(p) => bail!(
            "{} is dynamically linked and cannot run in the agent's image; install a static \
             busybox (Debian: `apt-get install busybox-static`)",
            p.display()
        ),
        None => bail!(
            "no busybox found (looked at {}); install a static one (Debian: `apt-get install \
             busybox-static`)",
            BUSYBOX.join(", ")
        ),
    }
}

/// FNV-1a, 64 bits: enough to tell builds apart (not a security measure).
fn fnv1a(mut h: u64, data: &[u8]) -> u64 {
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// FNV-1a over little-endian 64-bit words (and the bytes of a short tail): eight times fewer
/// steps than over bytes, for binaries of tens of megabytes.
fn fnv1a_words(mut h: u64, data: &[u8]) -> u64 {
    let mut words = data.chunks_exact(8);
    for w in words.by_ref() {
        h ^= u64::from_le_bytes(w.try_into().expect("8 bytes"));
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    fnv1a(h, words.remainder())
}

fn hash_files(files: &[&Path]) -> Result<u64> {
    let mut h: u64 = fnv1a(0xcbf2_9ce4_8422_2325, LAYOUT.as_bytes());
    let mut buf = vec![0u8; 1 << 20];
    for f in files {
        let mut r = File::open(f).with_context(|| format!("opening {}", f.display()))?;
        loop {
            let n = r
                .read(&mut buf)
                .with_context(|| format!("reading {}", f.display()))?;
            if n == 0 {
                break;
            }
            h = fnv1a_words(h, &buf[..n]);
        }
        // Separate the files, so moving bytes from one to the other changes the hash.
        h = fnv1a(h, &[0xff]);
    }
    Ok(h)
}

type Stamp = (PathBuf, u64, Option<SystemTime>);

fn stamp(p: &Path) -> Result<Stamp> {
    let m = p
        .metadata()
        .with_context(|| format!("reading {}", p.display()))?;
    Ok((p.to_path_buf(), m.len(), m.modified().ok()))
}

/// The hash of the two files, remembered while their sizes and times do not change.
fn cached_hash(exe: &Path, busybox: &Path) -> Result<u64> {
    static CACHE: Mutex<Option<(Stamp, Stamp, u64)>> = Mutex::new(None);
    let (a, b) = (stamp(exe)?, stamp(busybox)?);
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((ca, cb, h)) = cache.as_ref() {
        if *ca == a && *cb == b {
            return Ok(*h);
        }
    }
    let h = hash_files(&[exe, busybox])?;
    *cache = Some((a, b, h));
    Ok(h)
}

/// The applets busybox provides (`busybox --list`).
fn applets(busybox: &Path) -> Result<Vec<String>> {
    let out = std::process::Command::new(busybox)
        .arg("--list")
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("running `{} --list`", busybox.display()))?;
    if !out.status.success() {
        bail!("`{} --list` failed", busybox.display());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|a| !a.is_empty() && *a != "busybox" && !a.contains('/'))
        .map(str::to_string)
        .collect())
}

fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h.set_size(size);
    h
}

/// Writes the root filesystem as a tar archive to `out`.
pub fn write_rootfs(src: &ImageSource, out: impl Write) -> Result<()> {
    let mut b = tar::Builder::new(out);
    for (dir, mode) in [
        ("bin", 0o755),
        ("dev", 0o755),
        ("etc", 0o755),
        ("proc", 0o555),
        ("root", 0o700),
        ("sbin", 0o755),
        ("sys", 0o555),
        ("tmp", 0o1777),
        ("usr", 0o755),
        ("usr/bin", 0o755),
        ("var", 0o755),
        ("var/tmp", 0o1777),
    ] {
        let mut h = header(tar::EntryType::Directory, mode, 0);
        b.append_data(&mut h, format!("{dir}/"), std::io::empty())?;
    }
    for (name, text) in [
        ("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"),
        ("etc/group", "root:x:0:\n"),
    ] {
        let mut h = header(tar::EntryType::Regular, 0o644, text.len() as u64);
        b.append_data(&mut h, name, text.as_bytes())?;
    }
    for (name, file) in [
        (IMAGE_EXE.trim_start_matches('/'), &src.exe),
        ("bin/busybox", &src.busybox),
    ] {
        let f = File::open(file).with_context(|| format!("opening {}", file.display()))?;
        let len = f.metadata()?.len();
        let mut h = header(tar::EntryType::Regular, 0o755, len);
        b.append_data(&mut h, name, BufReader::new(f))
            .with_context(|| format!("adding {} to the image", file.display()))?;
    }
    for applet in applets(&src.busybox)? {
        let mut h = header(tar::EntryType::Symlink, 0o777, 0);
        b.append_link(&mut h, format!("bin/{applet}"), "busybox")?;
    }
    b.into_inner()?.flush()?;
    Ok(())
}

/// Whether the engine has an image tagged `tag`.
pub fn exists(engine: &Engine, tag: &str) -> bool {
    engine.image_exists(tag)
}

/// Builds and imports the image of `src` unless the engine has it; returns its tag.
pub fn ensure(engine: &Engine, src: &ImageSource) -> Result<String> {
    let tag = src.tag()?;
    if exists(engine, &tag) {
        return Ok(tag);
    }
    build(engine, src, &tag)?;
    Ok(tag)
}

/// Builds and imports the image of `src` as `tag`, replacing one of that name.
pub fn build(engine: &Engine, src: &ImageSource, tag: &str) -> Result<()> {
    let tmp = std::env::temp_dir().join(format!(
        "isobench-rootfs-{}-{}.tar",
        std::process::id(),
        tag.rsplit('-').next().unwrap_or("x")
    ));
    let result = (|| -> Result<()> {
        let f = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        write_rootfs(src, BufWriter::new(f))?;
        let tmp_s = tmp.to_string_lossy();
        let label = format!("LABEL {IMAGE_LABEL}=agent");
        let version = format!("LABEL isobench.version={}", env!("CARGO_PKG_VERSION"));
        let path = format!("ENV PATH={IMAGE_PATH}");
        engine
            .change(&[
                "import", "--change", &label, "--change", &version, "--change", &path, &tmp_s, tag,
            ])
            .with_context(|| format!("importing the agent image {tag}"))?;
        Ok(())
    })();
    let _ = std::fs::remove_file(&tmp);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_is_the_reference_function() {
        // Test vectors of FNV-1a 64.
        assert_eq!(fnv1a(0xcbf2_9ce4_8422_2325, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(0xcbf2_9ce4_8422_2325, b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn rootfs_holds_the_binaries_and_applet_links() {
        let Ok(busybox) = find_busybox() else {
            crate::test_skip::skip("busybox-static", "no static busybox here");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("isobench");
        std::fs::write(&exe, b"\x7fELF fake").unwrap();
        let src = ImageSource { exe, busybox };
        let mut bytes = Vec::new();
        write_rootfs(&src, &mut bytes).unwrap();
        let mut ar = tar::Archive::new(bytes.as_slice());
        let mut seen = std::collections::BTreeMap::new();
        for e in ar.entries().unwrap() {
            let e = e.unwrap();
            let path = e.path().unwrap().to_string_lossy().into_owned();
            let link = e
                .link_name()
                .unwrap()
                .map(|l| l.to_string_lossy().into_owned());
            seen.insert(path, (e.header().mode().unwrap(), link, e.size()));
        }
        assert_eq!(seen["isobench"], (0o755, None, 9));
        assert_eq!(seen["bin/sh"].1.as_deref(), Some("busybox"));
        assert_eq!(seen["tmp/"].0, 0o1777);
        let t1 = src.tag().unwrap();
        assert!(t1.starts_with("isobench-agent:"), "{t1}");
        std::fs::write(&src.exe, b"\x7fELF other").unwrap();
        assert_ne!(src.tag().unwrap(), t1, "a changed binary gets a new tag");
    }
}
