//! A database opened again in a process keeps the locks the process's open connections hold
//! on it. SQLite's locks are POSIX locks, which a process drops all at once when it closes
//! any descriptor of the file: a check that opened and closed the file (its header, before
//! each open) silently unlocked every other connection of the process, and a writer in
//! another process could then recover or truncate the log under them (a server read a run
//! while its run wrote it, and the database ended damaged).

use isobench_store::Store;

/// The first byte of the range SQLite's shared lock holds (`SHARED_FIRST`: its pending byte
/// at 1 GiB, plus 2) and its length (`SHARED_SIZE`).
const SHARED_FIRST: i64 = 0x4000_0002;
const SHARED_SIZE: i64 = 510;

/// Whether another process can take a write lock on the shared-lock range of `path` now,
/// i.e. whether no connection holds SQLite's shared lock on it. Asked from a forked child
/// (a process's own locks never conflict with its own), which calls only async-signal-safe
/// functions.
fn another_process_could_lock(path: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt as _;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: the child calls only async-signal-safe functions (open, fcntl, _exit) on
    // memory prepared before the fork; the parent waits for it.
    unsafe {
        let mut lock: libc::flock = std::mem::zeroed();
        lock.l_type = libc::F_WRLCK as libc::c_short;
        lock.l_whence = libc::SEEK_SET as libc::c_short;
        lock.l_start = SHARED_FIRST;
        lock.l_len = SHARED_SIZE;
        match libc::fork() {
            0 => {
                let fd = libc::open(c.as_ptr(), libc::O_RDWR);
                let got = fd >= 0 && libc::fcntl(fd, libc::F_SETLK, &lock) == 0;
                libc::_exit(if got { 0 } else { 1 });
            }
            pid if pid > 0 => {
                let mut status = 0;
                assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
                assert!(libc::WIFEXITED(status));
                libc::WEXITSTATUS(status) == 0
            }
            _ => panic!("fork: {}", std::io::Error::last_os_error()),
        }
    }
}

#[test]
fn opening_a_database_again_keeps_the_locks_of_its_open_connections() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locks.db");
    let store = Store::open(&path).unwrap();
    store.list_runs().unwrap();
    assert!(
        !another_process_could_lock(&path),
        "an open WAL connection holds SQLite's shared lock on the file"
    );
    for _ in 0..3 {
        drop(Store::open_read_only(&path).unwrap());
        drop(Store::open(&path).unwrap());
        assert!(
            !another_process_could_lock(&path),
            "opening the database again dropped the shared lock of the open connection"
        );
    }
    drop(store);
}
