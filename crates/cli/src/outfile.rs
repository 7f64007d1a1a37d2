//! Files isobench writes for the user (reports, exports, comparisons, `run --export-*` and
//! `--report`) hold results, so they are created private to their owner, as the database is
//! (docs/security.md, section 2): a new file is created with mode 0600 (`O_CREAT|O_EXCL`),
//! never wider and narrowed afterwards, whatever the umask.
//!
//! A regular file already at the path is replaced by a new 0600 file (written beside it,
//! then renamed over it, so a reader sees the old or the new file, never half of one); its
//! old mode is not kept. Through a symbolic link, the file it points to is replaced. A path
//! that is not a regular file (`/dev/stdout`, a pipe) is written as it is.

use std::fs::OpenOptions;
use std::io::{self, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` as described in the module's header.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Err(io::Error::other("it is a directory")),
        Ok(meta) if meta.is_file() => replace(&std::fs::canonicalize(path)?, bytes),
        Ok(_) => {
            let mut f = OpenOptions::new().write(true).open(path)?;
            f.write_all(bytes)?;
            f.flush()
        }
        Err(_) => match create_new(path, bytes) {
            // Created by someone else since: replace it as above.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && path.is_file() => {
                replace(&std::fs::canonicalize(path)?, bytes)
            }
            r => r,
        },
    }
}

/// A new file of mode 0600 at `path` holding `bytes`; fails if `path` exists (also as a
/// dangling symbolic link, which is never followed).
fn create_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)?;
    f.flush()
}

/// Replaces the regular file `target` with a new 0600 file holding `bytes`.
fn replace(target: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = temporary_beside(target);
    let written = create_new(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, target));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// `.NAME.PID.isobench-tmp` in the directory of `target`.
fn temporary_beside(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    target.with_file_name(format!(".{name}.{}.isobench-tmp", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn new_and_replaced_files_are_0600_and_links_and_devices_are_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("report.html");
        write(&new, b"one").unwrap();
        assert_eq!(mode(&new), 0o600);
        assert_eq!(std::fs::read(&new).unwrap(), b"one");

        // An existing world-readable file is replaced by a private one.
        std::fs::set_permissions(&new, std::fs::Permissions::from_mode(0o644)).unwrap();
        write(&new, b"two").unwrap();
        assert_eq!(mode(&new), 0o600);
        assert_eq!(std::fs::read(&new).unwrap(), b"two");

        // Through a link, the linked file is replaced and the link stays.
        let link = dir.path().join("latest.html");
        std::os::unix::fs::symlink(&new, &link).unwrap();
        write(&link, b"three").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&new).unwrap(), b"three");
        assert_eq!(mode(&new), 0o600);

        // A device is written as it is.
        write(Path::new("/dev/null"), b"gone").unwrap();
        assert_eq!(mode(Path::new("/dev/null")), 0o666);

        // Nothing is left beside the files.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");

        // A directory is an error, as it was.
        assert!(write(dir.path(), b"x").is_err());
    }
}
