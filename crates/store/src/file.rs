//! The database file before SQLite opens it: created private, refused when it is a
//! directory or cut short, and named as a read-only `file:` URI. These checks run before a
//! connection exists, so they look at the file itself.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{is_busy, is_full, is_read_only, unusable, StoreError, Unusable};
use crate::model::RunId;
use crate::time::Timestamp;

/// Creates `path` empty with mode 0600 unless something is there already, so that SQLite
/// opens a file only its owner can read: results and the server's jobs name the host, its
/// tenants and their scenarios. SQLite gives the `-wal`, `-shm` and `-journal` files it makes
/// beside a database the database's own mode, so they are 0600 too. There is no moment with
/// a wider mode (`O_CREAT|O_EXCL` with the mode, never a chmod after), and an existing file
/// is neither opened here nor changed. Failures are left to SQLite's open, which reports them
/// with its own error (a missing directory, no permission).
pub(crate) fn create_private(path: &Path) {
    use std::os::unix::fs::OpenOptionsExt as _;
    let special = path.as_os_str() == ":memory:" || path.to_string_lossy().starts_with("file:");
    if special || path.as_os_str().is_empty() {
        return;
    }
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path);
}

/// Whether `path` names a file or a place for a new one (as opposed to a directory, or an
/// in-memory or URI name, which are left to SQLite).
pub(crate) fn check_not_directory(path: &Path) -> Result<(), StoreError> {
    if path.is_dir() {
        return Err(StoreError::NotADatabase {
            path: path.to_path_buf(),
            why: Unusable::Directory,
        });
    }
    Ok(())
}

/// Whether this process may write `path` and create files beside it (SQLite's `-wal`,
/// `-shm` and `-journal`). Asks the kernel (`access(2)` with the effective ids), so a
/// read-only file system and an immutable file say no even to root, whose permission bits
/// are not checked.
pub(crate) fn writable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt as _;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let may_write = |p: &Path| {
        let Ok(c) = std::ffi::CString::new(p.as_os_str().as_bytes()) else {
            return false;
        };
        // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
        unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::W_OK, libc::AT_EACCESS) == 0 }
    };
    (!path.exists() || may_write(path)) && may_write(dir)
}

/// The `file:` URI of `path` for SQLite, with `query` (`mode=ro`, `immutable=1`): every byte
/// but unreserved ones and `/` percent-encoded, so `?`, `#` and `%` in a name stay part of it.
pub(crate) fn sqlite_uri(path: &Path, query: &str) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let mut uri = String::from(if path.is_absolute() {
        "file://"
    } else {
        "file:"
    });
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push('?');
    uri.push_str(query);
    uri
}

/// Refuses a database file cut short (a copy that stopped, a full disk while it was
/// written): an SQLite file whose header gives its size (page size times page count, valid
/// when the header's change counter matches its version-valid-for number) but that holds
/// fewer bytes. SQLite itself would only notice at the first page it cannot read, maybe in
/// the middle of a command. A file that is not SQLite is left to SQLite to name.
///
/// A writer checkpointing its log into the file (another process's run) writes the header
/// before the pages that extend the file: a file that is short for a moment is read again,
/// and only one that stays short for [`SHORT_FILE_PATIENCE`] is refused. A file left short
/// by a checkpoint that could not extend it (the disk filled) is not damaged while its log
/// still holds changes: SQLite reads the pages from the log, and the next checkpoint
/// completes the file.
pub(crate) fn check_length(path: &Path) -> Result<(), StoreError> {
    let deadline = std::time::Instant::now() + SHORT_FILE_PATIENCE;
    loop {
        match short_file(path) {
            Ok(()) => return Ok(()),
            Err(e) if std::time::Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(50)),
        }
    }
}

/// How long a database file may look shorter than its header says before it is refused as
/// cut short: a checkpoint of a busy run takes a few milliseconds to tens of them.
const SHORT_FILE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(1);

/// One look of [`check_length`].
pub(crate) fn short_file(path: &Path) -> Result<(), StoreError> {
    let mut head = [0u8; 100];
    let Some((read, len)) = read_head(path, &mut head) else {
        return Ok(());
    };
    if read < 16 || &head[..16] != b"SQLite format 3\0" {
        return Ok(());
    }
    let damaged = |what: String| StoreError::NotADatabase {
        path: path.to_path_buf(),
        why: Unusable::Damaged { detail: what },
    };
    if read < head.len() {
        return Err(damaged(format!(
            "the file has {len} bytes, less than SQLite's 100-byte header"
        )));
    }
    let be32 = |at: usize| u32::from_be_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
    let page_size = match u16::from_be_bytes([head[16], head[17]]) {
        1 => 65_536,
        n => u64::from(n),
    };
    let pages = u64::from(be32(28));
    let expected = page_size * pages;
    if be32(24) == be32(92) && pages > 0 && len < expected && !log_has_changes(path) {
        return Err(damaged(format!(
            "the file has {len} bytes, its header says {expected} ({pages} pages of \
             {page_size})"
        )));
    }
    Ok(())
}

/// The descriptors [`read_head`] reads databases' headers through, one per file (device and
/// inode), kept open while the file exists.
static HEADS: std::sync::Mutex<Option<HashMap<(u64, u64), std::fs::File>>> =
    std::sync::Mutex::new(None);

/// Reads the start of the file at `path` into `head`: how many bytes were read, and the
/// file's length after that (a checkpoint that grew the file since is seen whole); `None`
/// when there is no file to read.
///
/// Closing any descriptor of a file drops every POSIX lock this process holds on it, and
/// SQLite's locks are POSIX locks: a header read through a file opened and closed here while
/// another connection of this process (another thread of the server) writes would silently
/// unlock that writer, and a writer of another process could then write at the same time and
/// damage the database (SQLite's "How To Corrupt An SQLite Database File", 2.2). So each
/// file is opened once and read with `pread` through the same descriptor for the process's
/// life; only the descriptors of files since removed (no link left) are closed, and no
/// connection can still need their locks.
fn read_head(path: &Path, head: &mut [u8]) -> Option<(usize, u64)> {
    use std::os::unix::fs::{FileExt as _, MetadataExt as _};
    let meta = std::fs::metadata(path).ok().filter(|m| m.is_file())?;
    let key = (meta.dev(), meta.ino());
    let mut heads = HEADS.lock().unwrap_or_else(|e| e.into_inner());
    let heads = heads.get_or_insert_with(HashMap::new);
    if !heads.contains_key(&key) {
        heads.retain(|_, f| f.metadata().is_ok_and(|m| m.nlink() > 0));
        let file = std::fs::File::open(path).ok()?;
        let opened = file.metadata().ok()?;
        let got = (opened.dev(), opened.ino());
        if heads.contains_key(&got) {
            // Never closed, as the one already kept.
            std::mem::forget(file);
            return None;
        }
        heads.insert(got, file);
        // Replaced between the look and the open: the file there now is read next time.
        if got != key {
            return None;
        }
    }
    let file = &heads[&key];
    let mut read = 0;
    while read < head.len() {
        match file.read_at(&mut head[read..], read as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n,
        }
    }
    let len = file.metadata().map_or(0, |m| m.len());
    Some((read, len))
}

/// Whether `path-wal` exists and holds something (changes not yet copied into the file).
pub(crate) fn log_has_changes(path: &Path) -> bool {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(wal).is_ok_and(|m| m.len() > 0)
}

/// The database file and how errors about it are phrased.
pub(crate) struct DbFile {
    pub(crate) path: PathBuf,
    pub(crate) busy_timeout: Duration,
}

impl DbFile {
    /// Wraps a SQLite error with the file name, recognising lock timeouts, a full disk, a
    /// read-only database and files that are not (or no longer) usable databases.
    pub(crate) fn err(&self, context: &'static str, e: rusqlite::Error) -> StoreError {
        if is_full(&e) {
            StoreError::Full {
                path: self.path.clone(),
                context,
            }
        } else if is_busy(&e) {
            StoreError::Locked {
                path: self.path.clone(),
                timeout: self.busy_timeout,
            }
        } else if let Some(why) = unusable(&e) {
            StoreError::NotADatabase {
                path: self.path.clone(),
                why,
            }
        } else if is_read_only(&e) {
            StoreError::ReadOnly {
                path: self.path.clone(),
                context,
            }
        } else {
            StoreError::Sqlite {
                path: self.path.clone(),
                context,
                sqlite: e,
            }
        }
    }

    /// Wraps an error of opening the file.
    pub(crate) fn open_err(&self, e: rusqlite::Error) -> StoreError {
        match unusable(&e) {
            Some(why) => StoreError::NotADatabase {
                path: self.path.clone(),
                why,
            },
            None => StoreError::Open {
                path: self.path.clone(),
                sqlite: e,
            },
        }
    }

    pub(crate) fn corrupt(&self, what: impl Into<String>) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            what: what.into(),
        }
    }

    pub(crate) fn unknown_run(&self, run: &RunId) -> StoreError {
        StoreError::UnknownRun {
            path: self.path.clone(),
            run: run.to_string(),
        }
    }

    /// Parses stored text as `T`; text that does not parse is [`StoreError::Corrupt`],
    /// naming `what`.
    pub(crate) fn parse<T: std::str::FromStr>(
        &self,
        text: &str,
        what: &str,
    ) -> Result<T, StoreError>
    where
        T::Err: std::fmt::Display,
    {
        text.parse()
            .map_err(|e| self.corrupt(format!("{what} {text:?}: {e}")))
    }

    /// Parses a stored RFC 3339 time.
    pub(crate) fn time(&self, text: &str) -> Result<Timestamp, StoreError> {
        Timestamp::parse_rfc3339(text).map_err(|e| self.corrupt(e))
    }

    /// Parses stored JSON text; text that does not parse is [`StoreError::Corrupt`], naming
    /// `what`.
    pub(crate) fn json(&self, text: &str, what: &str) -> Result<serde_json::Value, StoreError> {
        serde_json::from_str(text).map_err(|e| self.corrupt(format!("{what}: {e}")))
    }
}
