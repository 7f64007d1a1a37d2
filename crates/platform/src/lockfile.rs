//! Advisory file locks (`flock(2)`): what tells a live run from a dead one.
//!
//! A lock dies with the process that holds it, however it ends (SIGKILL included), so
//! "can I take the lock?" answers "is its holder gone?" without trusting pids. The files
//! are opened close-on-exec: a tenant's agent never inherits its controller's lock.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A `flock` on a file (exclusive unless taken with [`LockFile::try_lock_shared`]), held
/// until drop.
#[derive(Debug)]
pub struct LockFile {
    file: File,
    path: PathBuf,
}

impl LockFile {
    /// Takes the lock on `path` (created with mode 0600 when missing) without waiting:
    /// `None` when another process holds it.
    pub fn try_lock(path: &Path) -> io::Result<Option<LockFile>> {
        LockFile::lock(path, libc::LOCK_EX | libc::LOCK_NB)
    }

    /// Takes a shared lock on `path` without waiting: any number of shared holders at once,
    /// `None` while an exclusive holder has it.
    pub fn try_lock_shared(path: &Path) -> io::Result<Option<LockFile>> {
        LockFile::lock(path, libc::LOCK_SH | libc::LOCK_NB)
    }

    /// The processes holding a lock on `path` now, each with whether its lock is exclusive
    /// (from `/proc/locks`; empty when nobody holds one or the file is missing).
    pub fn holders(path: &Path) -> Vec<(i32, bool)> {
        use std::os::unix::fs::MetadataExt;
        let Ok(meta) = std::fs::metadata(path) else {
            return Vec::new();
        };
        let (major, minor) = (libc::major(meta.dev()), libc::minor(meta.dev()));
        procfs::locks()
            .unwrap_or_default()
            .into_iter()
            .filter(|l| {
                l.lock_type == procfs::LockType::FLock
                    && l.inode == meta.ino()
                    && (l.devmaj, l.devmin) == (major, minor)
            })
            .filter_map(|l| Some((l.pid?, matches!(l.kind, procfs::LockKind::Write))))
            .collect()
    }

    /// Takes the lock on `path`, waiting for its holder to release it.
    pub fn lock_blocking(path: &Path) -> io::Result<LockFile> {
        LockFile::lock(path, libc::LOCK_EX).map(|l| l.expect("a blocking flock is taken"))
    }

    fn lock(path: &Path, how: i32) -> io::Result<Option<LockFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)?;
        if flock(&file, how)? {
            Ok(Some(LockFile {
                file,
                path: path.to_path_buf(),
            }))
        } else {
            Ok(None)
        }
    }

    /// Whether some process holds the lock on `path` now; `None` when there is no such
    /// file. Only probes: a free lock is released again at once.
    pub fn is_held(path: &Path) -> Option<bool> {
        let file = File::open(path).ok()?;
        match flock(&file, libc::LOCK_EX | libc::LOCK_NB) {
            Ok(taken) => Some(!taken),
            // A lock that cannot even be probed is taken for held: never sweep what may live.
            Err(_) => Some(true),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replaces the file's content (what the holder says about itself, for whoever finds
    /// the lock taken).
    pub fn set_note(&mut self, text: &str) -> io::Result<()> {
        self.file.set_len(0)?;
        self.file.rewind()?;
        self.file.write_all(text.as_bytes())?;
        self.file.flush()
    }

    /// The content of the lock file at `path` (its holder's note), if readable.
    pub fn note_of(path: &Path) -> Option<String> {
        let mut s = String::new();
        File::open(path).ok()?.read_to_string(&mut s).ok()?;
        Some(s)
    }
}

/// `flock(file, how)`: `Ok(false)` when a non-blocking lock is held elsewhere.
fn flock(file: &File, how: i32) -> io::Result<bool> {
    loop {
        // SAFETY: flock on a descriptor this function borrows; the lock is released when
        // the file is closed.
        if unsafe { libc::flock(file.as_raw_fd(), how) } == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) => return Ok(false),
            _ => return Err(e),
        }
    }
}

/// Polls `f` until it gives a value (10 s at most). For tests: a lock dropped here stays held
/// while a child forked at that moment by another thread has not yet exec'd, since the child
/// shares the open file until then.
#[cfg(test)]
pub(crate) fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(std::time::Instant::now() < end, "never: {what}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_seen_held_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        assert_eq!(LockFile::is_held(&path), None);
        let mut held = LockFile::try_lock(&path).unwrap().unwrap();
        assert_eq!(LockFile::is_held(&path), Some(true));
        // flock locks belong to the open file: a second open in this process is refused too.
        assert!(LockFile::try_lock(&path).unwrap().is_none());
        held.set_note("run 0badc0de\n").unwrap();
        held.set_note("run 1\n").unwrap();
        assert_eq!(LockFile::note_of(&path).as_deref(), Some("run 1\n"));
        drop(held);
        eventually("the lock is free", || {
            (LockFile::is_held(&path) == Some(false)).then_some(())
        });
        eventually("the lock is taken again", || {
            LockFile::try_lock(&path).unwrap()
        });
    }

    #[test]
    fn a_lock_file_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let _l = LockFile::try_lock(&path).unwrap().unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{mode:o}");
    }

    #[test]
    fn a_lock_dies_with_its_holder() {
        // A child takes the lock and is killed: the lock is free at once.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        // `-o`: the lock's descriptor stays in flock(1) and is not passed to `sleep`.
        let mut child = std::process::Command::new("flock")
            .arg("-o")
            .arg(&path)
            .args(["sleep", "5"])
            .spawn()
            .expect("flock(1) from util-linux");
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while LockFile::is_held(&path) != Some(true) {
            assert!(
                std::time::Instant::now() < end,
                "the child never took the lock"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while LockFile::is_held(&path) != Some(false) {
            assert!(
                std::time::Instant::now() < end,
                "the lock outlived its holder"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}
