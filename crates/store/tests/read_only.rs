//! Reading a database that cannot be written: a read-only directory (a CI artifact), a
//! read-only file in a writable directory, a write-ahead log left beside it, an older schema.
//!
//! Tests run as root, for whom permission bits are not checked, so "read-only" here is the
//! kernel's: the directory or the file is bind-mounted read-only onto itself in a mount
//! namespace of the test's own thread (nothing outside the thread sees it, and it goes away
//! with the thread). Where this process cannot make one (no CAP_SYS_ADMIN), the test says
//! why and skips.

use std::path::{Path, PathBuf};

use isobench_store::{NewRun, RunId, Store, StoreError, Timestamp, Unusable, SCHEMA_VERSION};
use serde_json::json;

fn new_run(ms: i64) -> NewRun {
    NewRun {
        scenario_name: "quick".into(),
        scenario_text: String::new(),
        seed: 1,
        tool_version: "0.1.0".into(),
        started_at: Timestamp::from_unix_millis(1_767_225_600_000 + ms),
        host_facts: json!({}),
        platform: "cgroup".into(),
        platform_version: "v2".into(),
    }
}

/// A database at `dir/name` holding two runs, closed (no `-wal` or `-shm` left).
fn database(dir: &Path, name: &str) -> (PathBuf, Vec<RunId>) {
    let path = dir.join(name);
    let mut store = Store::open(&path).unwrap();
    let runs = vec![
        store.create_run(&new_run(0)).unwrap(),
        store.create_run(&new_run(1000)).unwrap(),
    ];
    drop(store);
    (path, runs)
}

/// Runs `f` on a thread of its own mount namespace in which `target` (a directory or a
/// file) is read-only. `Err`: why this process cannot make it so.
fn read_only<T: Send>(target: &Path, f: impl FnOnce() -> T + Send) -> Result<T, String> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt as _;
    let c = CString::new(target.as_os_str().as_bytes()).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let none = std::ptr::null();
            // SAFETY: plain system calls with valid NUL-terminated paths (or NULL where the
            // call takes none); they change only this thread's view of the mounts.
            unsafe {
                if libc::unshare(libc::CLONE_NEWNS) != 0 {
                    return Err(format!(
                        "cannot make a mount namespace: {}",
                        std::io::Error::last_os_error()
                    ));
                }
                let root = CString::new("/").unwrap();
                let steps = [
                    libc::mount(
                        none,
                        root.as_ptr(),
                        none,
                        libc::MS_REC | libc::MS_PRIVATE,
                        none.cast(),
                    ),
                    libc::mount(c.as_ptr(), c.as_ptr(), none, libc::MS_BIND, none.cast()),
                    libc::mount(
                        none,
                        c.as_ptr(),
                        none,
                        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY,
                        none.cast(),
                    ),
                ];
                if steps.iter().any(|&rc| rc != 0) {
                    return Err(format!(
                        "cannot bind-mount {} read-only: {}",
                        target.display(),
                        std::io::Error::last_os_error()
                    ));
                }
            }
            // The mount really refuses writes, to root too.
            let probe = if target.is_dir() {
                std::fs::write(target.join(".probe"), b"x").is_err()
            } else {
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(target)
                    .is_err()
            };
            assert!(probe, "{} is still writable", target.display());
            Ok(f())
        })
        .join()
        .unwrap()
    })
}

fn skip(why: &str) {
    eprintln!("skipped: {why}");
}

#[test]
fn read_only_directory_is_read_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let (path, runs) = database(dir.path(), "results.sqlite");
    let before = std::fs::read(&path).unwrap();
    let got = read_only(dir.path(), || {
        // What every writing open said before: "attempt to write a readonly database".
        let err = Store::open(&path).unwrap_err();
        assert!(matches!(err, StoreError::ReadOnly { .. }), "{err:?}");
        assert!(err.to_string().contains("read-only"), "{err}");
        let store = Store::open_read_only(&path).unwrap();
        assert!(store.is_read_only());
        assert!(!Store::is_writable(&path));
        let listed: Vec<RunId> = store
            .list_runs()
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(listed, runs);
        assert_eq!(store.load_run(&runs[1]).unwrap().run.id, runs[1]);
        assert_eq!(store.resolve_run("latest").unwrap(), runs[1]);
    });
    if let Err(why) = got {
        return skip(&why);
    }
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the file was not changed"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left.len(), 1, "nothing was created beside it: {left:?}");
}

#[test]
fn read_only_file_in_a_writable_directory_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let (path, runs) = database(dir.path(), "results.sqlite");
    let got = read_only(&path, || {
        let mut store = Store::open_read_only(&path).unwrap();
        assert_eq!(store.list_runs().unwrap().len(), 2);
        assert_eq!(store.resolve_run("latest").unwrap(), runs[1]);
        // A write is refused with the reason, not "attempt to write a readonly database".
        let err = store.create_run(&new_run(2000)).unwrap_err();
        assert!(matches!(err, StoreError::ReadOnly { .. }), "{err:?}");
    });
    if let Err(why) = got {
        skip(&why);
    }
}

#[test]
fn a_write_ahead_log_in_a_read_only_directory_is_read_or_named() {
    let dir = tempfile::tempdir().unwrap();
    let copy = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.sqlite");
    // A writer that is still open: its last run is only in the `-wal` file.
    let mut store = Store::open(&path).unwrap();
    store.create_run(&new_run(0)).unwrap();
    let last = store.create_run(&new_run(1000)).unwrap();
    for suffix in ["", "-wal", "-shm"] {
        let from = format!("{}{suffix}", path.display());
        std::fs::copy(&from, copy.path().join(format!("live.sqlite{suffix}"))).unwrap();
    }
    drop(store);
    let copied = copy.path().join("live.sqlite");
    // With its `-shm`: read, log included.
    let got = read_only(copy.path(), || {
        let store = Store::open_read_only(&copied).unwrap();
        assert_eq!(store.resolve_run("latest").unwrap(), last);
    });
    if let Err(why) = got {
        return skip(&why);
    }
    // Without it, SQLite cannot read the log here: said, with what to do.
    std::fs::remove_file(copy.path().join("live.sqlite-shm")).unwrap();
    read_only(copy.path(), || {
        let err = Store::open_read_only(&copied).unwrap_err();
        assert!(matches!(err, StoreError::UnreadableLog { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(
            msg.contains("live.sqlite-wal") && msg.contains("copy"),
            "{msg}"
        );
    })
    .unwrap();
}

#[test]
fn an_older_schema_in_a_read_only_directory_says_it_needs_a_migration() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = database(dir.path(), "old.sqlite");
    {
        let c = rusqlite_user_version(&path, SCHEMA_VERSION - 1);
        drop(c);
    }
    let got = read_only(dir.path(), || {
        let err = Store::open_read_only(&path).unwrap_err();
        assert!(
            matches!(err, StoreError::NeedsMigration { found, .. } if found == SCHEMA_VERSION - 1),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(msg.contains("migration") && msg.contains("copy"), "{msg}");
    });
    if let Err(why) = got {
        skip(&why);
    }
}

/// Sets the file's schema version (as an older isobench left it), through a store-free
/// SQLite connection: the file is a plain SQLite database.
fn rusqlite_user_version(path: &Path, v: u32) -> std::process::Output {
    std::process::Command::new("sqlite3")
        .arg(path)
        .arg(format!("PRAGMA user_version = {v};"))
        .output()
        .expect("sqlite3 runs")
}

#[test]
fn a_directory_is_not_a_usable_database() {
    let dir = tempfile::tempdir().unwrap();
    for err in [
        Store::open(dir.path()).unwrap_err(),
        Store::open_read_only(dir.path()).unwrap_err(),
    ] {
        assert!(
            matches!(
                err,
                StoreError::NotADatabase {
                    why: Unusable::Directory,
                    ..
                }
            ),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("is a directory") && msg.contains("isobench.db"),
            "{msg}"
        );
    }
}

#[test]
fn a_truncated_database_is_not_a_usable_database() {
    let dir = tempfile::tempdir().unwrap();
    let (path, runs) = database(dir.path(), "full.sqlite");
    // Enough runs to span many pages, then the file cut short as a failed copy leaves it.
    let mut store = Store::open(&path).unwrap();
    for i in 0..200 {
        let mut r = new_run(10_000 + i);
        r.scenario_text = "x".repeat(4000);
        store.create_run(&r).unwrap();
    }
    drop(store);
    let bytes = std::fs::read(&path).unwrap();
    for cut in [4096, bytes.len() / 2, 50] {
        let cut_path = dir.path().join(format!("cut-{cut}.sqlite"));
        std::fs::write(&cut_path, &bytes[..cut]).unwrap();
        let err = Store::open_read_only(&cut_path)
            .and_then(|s| s.list_runs().map(|_| s))
            .and_then(|s| s.load_run(&runs[0]).map(|_| s))
            .unwrap_err();
        assert!(
            matches!(err, StoreError::NotADatabase { .. }),
            "cut at {cut}: {err:?}"
        );
        let msg = err.to_string();
        assert!(msg.contains("not a usable isobench database"), "{msg}");
        assert!(msg.contains(&cut_path.display().to_string()), "{msg}");
    }
}

/// Regression: the server reads a database while a run writes it. A reader that looked at
/// the file while the run's checkpoint had written the header but not yet the pages that
/// extend the file answered 500 "damaged or truncated" (seen by the HTTP API check). A file
/// that is short only for a moment opens; one that stays short is still refused (above).
#[test]
fn a_database_growing_under_a_checkpoint_is_not_taken_for_a_truncated_one() {
    let dir = tempfile::tempdir().unwrap();
    let (path, runs) = database(dir.path(), "growing.sqlite");
    let mut store = Store::open(&path).unwrap();
    for i in 0..50 {
        let mut r = new_run(10_000 + i);
        r.scenario_text = "x".repeat(4000);
        store.create_run(&r).unwrap();
    }
    drop(store);
    let bytes = std::fs::read(&path).unwrap();
    // The header of the whole file, the rest still to come, as a checkpoint leaves it.
    let short = dir.path().join("short.sqlite");
    std::fs::write(&short, &bytes[..bytes.len() / 2]).unwrap();
    let rest = bytes[bytes.len() / 2..].to_vec();
    let grower = {
        let short = short.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            use std::io::Write as _;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&short)
                .unwrap();
            f.write_all(&rest).unwrap();
        })
    };
    let store = Store::open_read_only(&short).expect("opens once the file has grown");
    grower.join().unwrap();
    assert_eq!(store.load_run(&runs[0]).unwrap().run.id, runs[0]);
}

/// Regression: a run whose disk filled in the middle of a checkpoint left the file's header
/// saying more pages than the file holds, every page still in the log. `runs`, `show` and
/// `--resume` refused it as "damaged or truncated" though SQLite read it whole (seen by
/// bench/chaos's full-disk case in the cgroup v2 guest).
#[test]
fn a_file_a_full_disk_cut_short_in_a_checkpoint_opens_from_its_log() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = database(dir.path(), "full-disk.sqlite");
    let mut store = Store::open(&path).unwrap();
    let mut ids = Vec::new();
    for i in 0..50 {
        let mut r = new_run(20_000 + i);
        r.scenario_text = "x".repeat(4000);
        ids.push(store.create_run(&r).unwrap());
    }
    // Not closed: the runs are in the log only, as when the process met the full disk.
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let copy = dir.path().join("copy.sqlite");
    let mut copy_wal = copy.as_os_str().to_owned();
    copy_wal.push("-wal");
    std::fs::copy(&wal, &copy_wal).unwrap();
    let mut main = std::fs::read(&path).unwrap();
    std::mem::forget(store);
    // The checkpoint wrote the header of the grown file, then could not write its pages.
    let pages = u32::from_be_bytes(main[28..32].try_into().unwrap()) + 30;
    main[28..32].copy_from_slice(&pages.to_be_bytes());
    let page_size = u64::from(u16::from_be_bytes([main[16], main[17]]));
    assert!((main.len() as u64) < u64::from(pages) * page_size);
    std::fs::write(&copy, &main).unwrap();
    let store = Store::open(&copy).expect("opens from its log");
    assert_eq!(store.load_run(&ids[49]).unwrap().run.id, ids[49]);
}
