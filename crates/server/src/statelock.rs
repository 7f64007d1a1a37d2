//! One server per state directory. Two servers on one state directory (the default one of
//! one `--db`) would hand out the same job ids, run two measurements at once and overwrite
//! each other's queue file. So a server holds `serve.lock` in its state directory locked
//! (`flock`, exclusive) for as long as it lives, with its process id and address written in
//! it; a second server finds the lock taken and is refused, naming the first.
//!
//! The kernel drops a `flock` when its holder exits, however it exits, so a crashed server
//! leaves no stale lock behind (the file stays, unlocked, and the next server takes it). The
//! descriptor is close-on-exec, so the runs a server starts do not hold its lock.

use std::fs::File;
use std::io::{self, Read as _, Seek as _, Write as _};
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

/// The lock file's name in the state directory.
pub const LOCK_FILE: &str = "serve.lock";

/// Why a state directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another server holds it.
    #[error(
        "another isobench serve ({holder}) is using the state directory {dir}: two servers on \
         one state directory would hand out the same job ids and run at once. Use that server, \
         stop it first, or give this one its own --db (or --state-dir)"
    )]
    Held {
        /// The state directory.
        dir: String,
        /// What the holder wrote: its process id and address.
        holder: String,
    },
    /// The lock file could not be opened or locked.
    #[error("locking {path}: {source}")]
    Io {
        /// The lock file.
        path: String,
        /// The error.
        source: io::Error,
    },
}

/// A state directory's lock, held until this is dropped.
#[derive(Debug)]
pub struct StateLock {
    file: File,
    path: PathBuf,
}

impl StateLock {
    /// Takes the lock of state directory `dir` (which must exist), recording this process.
    pub fn acquire(dir: &Path) -> Result<StateLock, LockError> {
        let path = dir.join(LOCK_FILE);
        let io_err = |source| LockError::Io {
            path: path.display().to_string(),
            source,
        };
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(io_err)?;
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(io_err(e));
            }
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            let holder = text.split_whitespace().collect::<Vec<_>>().join(" ");
            return Err(LockError::Held {
                dir: dir.display().to_string(),
                holder: if holder.is_empty() {
                    "starting".into()
                } else {
                    holder
                },
            });
        }
        let mut lock = StateLock { file, path };
        if let Err(source) = lock.record(None) {
            return Err(LockError::Io {
                path: lock.path.display().to_string(),
                source,
            });
        }
        Ok(lock)
    }

    /// Writes this process's id, and the address it serves on once known, into the lock file.
    pub fn record(&mut self, listen: Option<std::net::SocketAddr>) -> io::Result<()> {
        let mut text = format!("pid {}", std::process::id());
        if let Some(a) = listen {
            text.push_str(&format!(", http://{a}/"));
        }
        self.file.set_len(0)?;
        self.file.rewind()?;
        self.file.write_all(format!("{text}\n").as_bytes())?;
        self.file.flush()
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_naming_the_first_and_free_once_it_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = StateLock::acquire(dir.path()).unwrap();
        first
            .record(Some("127.0.0.1:8080".parse().unwrap()))
            .unwrap();
        let e = StateLock::acquire(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains(&format!("pid {}", std::process::id()))
                && e.contains("http://127.0.0.1:8080/")
                && e.contains("--db"),
            "{e}"
        );
        drop(first);
        // A child another test of this process forks shares the lock's descriptor until its
        // `exec` closes it, so the lock may stay taken for a moment after the drop.
        let t0 = std::time::Instant::now();
        let again = loop {
            match StateLock::acquire(dir.path()) {
                Ok(l) => break l,
                Err(LockError::Held { .. }) if t0.elapsed().as_secs() < 30 => {
                    std::thread::sleep(std::time::Duration::from_millis(10))
                }
                Err(e) => panic!("{e}"),
            }
        };
        let text = std::fs::read_to_string(again.path()).unwrap();
        assert_eq!(text, format!("pid {}\n", std::process::id()));
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(again.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
