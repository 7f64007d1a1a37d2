//! Files and directories only their owner can read: the server's state (the queue, the
//! scenarios it was sent) and a token it generates. Each is created with its final mode
//! (`O_CREAT|O_EXCL` with 0600, `mkdir` with 0700), so there is no moment when another user
//! could open it (docs/security.md).

use std::fs::{DirBuilder, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::Path;

/// Creates `dir` and its missing parents with mode 0700; an existing one keeps its mode.
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Writes `bytes` to `path`, which must not exist, as a new file with mode 0600.
pub fn write_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

/// Replaces `path` with a new file of mode 0600 holding `bytes`: written beside it under
/// `tmp` (a stale one removed first), then renamed over it, so a crash leaves the old or the
/// new file, never a torn one.
pub fn replace(path: &Path, tmp: &Path, bytes: &[u8]) -> io::Result<()> {
    match std::fs::remove_file(tmp) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    write_new(tmp, bytes)?;
    std::fs::rename(tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn files_are_0600_and_directories_0700_even_over_a_wider_stale_file() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("a/b");
        create_dir_all(&state).unwrap();
        assert_eq!(mode(&state), 0o700);
        assert_eq!(mode(&dir.path().join("a")), 0o700);
        let (path, tmp) = (state.join("queue.json"), state.join("queue.json.tmp"));
        std::fs::write(&path, "old").unwrap();
        std::fs::write(&tmp, "stale").unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o666)).unwrap();
        replace(&path, &tmp, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(mode(&path), 0o600);
        assert!(!tmp.exists());
        assert_eq!(
            write_new(&path, b"x").unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
    }
}
