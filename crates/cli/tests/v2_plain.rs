//! isobench on a plain cgroup v2 host, without systemd: the Debian 12 guest of
//! scripts/v2-guest booted with `--init plain` (a shell script is PID 1 and mounts cgroup2
//! on /sys/fs/cgroup; nothing manages the tree). Inside it, the static isobench runs as a
//! user would: `doctor` says where tenants go and why; a stressor is held to its CPU limit;
//! the fork bomb, the memory hog and a disk flood stay in their tenants; a short matrix run
//! completes with every limit read back from the tenants' v2 files; a controller killed
//! with SIGKILL mid-run leaves tenants that `isobench cleanup` removes, processes and all;
//! a cpuset partition under a parent that is one takes its CPU from the parent. The steps
//! are in v2_plain.sh.
//!
//! Needs QEMU, the guest image and the static isobench (common/guest.rs); without one, each
//! test prints SKIP with the reason and passes, except under `CI=true`, where it fails.

mod common;

use std::sync::OnceLock;

use common::guest::Guest;
use common::isobench;

/// The line the guest prints after its last step.
const ALL_RAN: &str = "isobench-v2-plain: every step ran";

/// The guest, booted once for this binary; `None` when the test skipped. Three CPUs: the
/// root keeps CPU 0 when the partition step's parent takes CPUs 1-2.
fn guest() -> Option<&'static Guest> {
    static GUEST: OnceLock<Result<Guest, String>> = OnceLock::new();
    common::guest::once(&GUEST, "v2-plain", common::guest::missing, || {
        Guest::boot(
            "v2-plain",
            &["--init", "plain", "--cpus", "3", "--timeout", "900"],
            "tests/v2_plain.sh",
        )
    })
}

/// A check of `isobench doctor --json`.
fn check(doc: &serde_json::Value, name: &str) -> serde_json::Value {
    doc["checks"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("doctor has no check {name}: {doc}"))
        .clone()
}

#[test]
fn the_guest_is_a_plain_cgroup_v2_host_and_ran_every_step() {
    let Some(g) = guest() else { return };
    assert_eq!(g.exit, 0, "{}", g.context());
    assert!(g.log.contains(ALL_RAN), "{}", g.context());
    let host = g.cmd("host");
    assert_eq!(host.rc, Some(0), "{}", host.err);
    for line in [
        "pid1: /bin/bash /usr/local/sbin/guest-plain-init",
        "mount: cgroup2",
        "systemd: no",
        "own: 0::/",
    ] {
        assert!(
            host.out.lines().any(|l| l.trim_end().starts_with(line)),
            "no `{line}` in:\n{}",
            host.out
        );
    }
}

#[test]
fn doctor_says_tenants_go_under_the_mount_root_as_no_init_manages_the_tree() {
    let Some(g) = guest() else { return };
    let doc = g.cmd("doctor").json(g);
    let cgroup = check(&doc, "cgroup");
    assert_eq!(cgroup["ok"], true, "{cgroup}");
    assert!(
        cgroup["detail"].as_str().unwrap().starts_with("cgroup v2"),
        "{cgroup}"
    );
    assert_eq!(check(&doc, "platform cgroup")["ok"], true, "{doc}");
    let placement = check(&doc, "cgroup placement");
    assert_eq!(placement["ok"], true, "{placement}");
    let detail = placement["detail"].as_str().unwrap();
    assert!(
        detail.contains("under the root of the cgroup2 mount /sys/fs/cgroup")
            && detail.contains("no init manages the tree"),
        "{placement}"
    );
    for knob in ["cgroup cpu", "cgroup memory", "cgroup pids", "cgroup io"] {
        let c = check(&doc, knob);
        assert_eq!(c["ok"], true, "{c}");
    }
}

#[test]
fn a_stressor_runs_in_a_tenant_under_the_mount_root_held_to_its_cpu_limit() {
    let Some(g) = guest() else { return };
    let doc = g.cmd("stress").json(g);
    let dir = doc["tenant"]["info"]["cgroups"][0].as_str().unwrap();
    // /sys/fs/cgroup/isobench-<run>-stress: no scope, no slice.
    let rest = dir.strip_prefix("/sys/fs/cgroup/").unwrap_or("");
    assert!(
        rest.starts_with("isobench-") && rest.ends_with("-stress") && !rest.contains('/'),
        "{dir}"
    );
    let usage = &doc["tenant"]["usage"];
    assert!(
        usage["cpu_throttled_periods"].as_u64().unwrap() > 0,
        "{usage}"
    );
}

#[test]
fn the_aggressors_stay_in_their_tenants() {
    let Some(g) = guest() else { return };
    let bomb = g.cmd("forkbomb").json(g);
    assert!(
        bomb["tenant"]["usage"]["pids_limit_hits"].as_u64().unwrap() > 0,
        "{bomb}"
    );
    let hog = g.cmd("memhog").json(g);
    let usage = &hog["tenant"]["usage"];
    assert!(usage["oom_kills"].as_u64().unwrap() >= 1, "{usage}");
    assert!(
        usage["memory_peak"].as_u64().unwrap() <= 64 << 20,
        "{usage}"
    );
    let disk = g.cmd("disk").json(g);
    let written = disk["tenant"]["usage"]["io_write_bytes"].as_f64().unwrap();
    let elapsed = disk["report"]["elapsed_s"].as_f64().unwrap();
    assert!(written > 0.0, "{disk}");
    assert!(
        written <= 4.0 * 1048576.0 * (elapsed + 1.0),
        "{written} bytes in {elapsed} s under io.max wbps=4M"
    );
}

#[test]
fn a_matrix_run_completes_with_every_limit_read_back_from_the_v2_files() {
    let Some(g) = guest() else { return };
    let m = g.cmd("matrix");
    assert!(
        matches!(m.rc, Some(0 | 4)),
        "isobench run exited {:?}\n{}\n{}",
        m.rc,
        m.err,
        g.context()
    );
    let db = g.dir.join("out/guest.db");
    let ids = common::run_ids(&db);
    assert_eq!(ids.len(), 1, "{ids:?}");
    let shown = common::json_of(
        &isobench()
            .args(["show", &ids[0], "--json", "--db"])
            .arg(&db)
            .output()
            .unwrap(),
    );
    let results = &shown["results"];
    assert_eq!(results["run"]["status"], "complete", "{}", results["run"]);
    assert_eq!(results["run"]["host"]["cgroup_version"], "2");
    assert_eq!(results["trust"]["victim_pressure_measured"], true);
    for t in results["tenants"].as_array().unwrap() {
        assert_eq!(t["limits"]["applied"], t["limits"]["requested"], "{t}");
    }
    let back = g.file("readback.txt");
    for want in [
        "victim cpu.max: 100000 100000",
        "victim memory.max: 268435456",
        "victim pids.max: 128",
        "aggressor cpu.max: 50000 100000",
        "aggressor memory.max: 134217728",
        "aggressor pids.max: 64",
    ] {
        assert!(
            back.lines().any(|l| l == want),
            "never read `{want}`:\n{back}"
        );
    }
    assert!(
        back.lines()
            .any(|l| l.starts_with("aggressor io.max: ") && l.contains("wbps=20971520")),
        "the aggressor's io.max never read wbps=20971520:\n{back}"
    );
}

#[test]
fn a_killed_controllers_tenants_are_removed_by_cleanup_processes_and_all() {
    let Some(g) = guest() else { return };
    let before = g.file("before-kill.txt");
    assert!(
        !before.trim().is_empty(),
        "the killed run made no tenant\n{}",
        g.context()
    );
    assert!(!g.file("procs-before-kill.txt").trim().is_empty());
    // Killed with SIGKILL, the controller could tear nothing down.
    assert_eq!(g.file("after-kill.txt").trim(), before.trim());
    let cleanup = g.cmd("cleanup");
    assert_eq!(cleanup.rc, Some(0), "{}\n{}", cleanup.err, cleanup.out);
    assert_eq!(
        g.file("after-cleanup.txt").trim(),
        "",
        "cgroups left after cleanup:\n{}",
        cleanup.err
    );
    assert_eq!(
        g.file("procs-after-cleanup.txt").trim(),
        "",
        "the killed run's processes outlived cleanup"
    );
    let left = g.cmd("left");
    assert_eq!(left.out.trim(), "", "isobench cgroups left in the guest");
}

#[test]
fn a_cpuset_partition_under_a_partition_root_takes_its_cpu_from_the_parent() {
    let Some(g) = guest() else { return };
    let doc = g.cmd("partition").json(g);
    assert!(doc["report"]["ops"].as_u64().unwrap() > 0, "{doc}");
    let seen = g.file("partition.txt");
    let has = |l: &str| seen.lines().any(|s| s.trim_end() == l);
    assert!(has("part partition: root"), "{seen}");
    assert!(has("part effective before: 1-2"), "{seen}");
    // While the tenant ran it was a valid partition root of CPU 2, and the parent kept
    // CPU 1 only; afterwards the parent had both again.
    assert!(has("tenant root 2"), "{seen}");
    assert!(has("part effective during: 1"), "{seen}");
    assert!(has("part effective after: 1-2"), "{seen}");
    println!("cpuset partition in the plain guest:\n{seen}");
}
