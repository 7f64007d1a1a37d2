//! The database holds what ran where (host facts, tenants, scenarios, and with the server its
//! jobs): a new one is created readable by its owner only, with its WAL and shared-memory
//! files; an existing one keeps the mode it has (docs/security.md).

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use isobench_store::{NewRun, Store, Timestamp};
use serde_json::json;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

/// This process's umask, from /proc/self/status (reading it with umask(2) would change it
/// for every test thread).
fn umask() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Umask:")).unwrap();
    u32::from_str_radix(line["Umask:".len()..].trim(), 8).unwrap()
}

fn a_run() -> NewRun {
    NewRun {
        scenario_name: "mode".into(),
        scenario_text: "[experiment]\nkind = \"matrix\"\n".into(),
        seed: 1,
        tool_version: "0.1.0".into(),
        started_at: Timestamp::from_unix_millis(1_767_225_600_000),
        host_facts: json!({"cores": 2}),
        platform: "host".into(),
        platform_version: "-".into(),
    }
}

#[test]
fn a_new_database_and_its_wal_files_are_private_to_their_owner() {
    // Under a umask that lets others read (the usual 022), a file created without an explicit
    // mode would be readable by them: the test would see it.
    assert_ne!(
        umask() & 0o044,
        0o044,
        "the umask alone hides files from others"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.db");
    let mut store = Store::open(&path).unwrap();
    store.create_run(&a_run()).unwrap();
    let mut seen = 0;
    for name in [
        "results.db",
        "results.db-wal",
        "results.db-shm",
        "results.db-journal",
    ] {
        let p = dir.path().join(name);
        if p.exists() {
            seen += 1;
            assert_eq!(mode(&p) & 0o077, 0, "{name} has mode {:o}", mode(&p));
        }
    }
    assert!(seen >= 2, "the database and its WAL were not both there");
    assert_eq!(mode(&path), 0o600);
}

#[test]
fn an_existing_database_keeps_its_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    drop(Store::open(&path).unwrap());
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let mut store = Store::open(&path).unwrap();
    store.create_run(&a_run()).unwrap();
    drop(store);
    assert_eq!(mode(&path), 0o640);
    // Its runs are still there: opening did not replace the file.
    assert_eq!(Store::open(&path).unwrap().list_runs().unwrap().len(), 1);
}

#[test]
fn a_missing_directory_is_still_sqlites_error() {
    let dir = tempfile::tempdir().unwrap();
    let e = Store::open(dir.path().join("no/such/dir.db")).unwrap_err();
    assert!(e.to_string().contains("no/such/dir.db"), "{e}");
}
