//! The lines `isobench_platform::apply` prints for applying a tuned setting, fed to a real
//! cgroup v2 host under systemd: the Debian 12 guest of scripts/v2-guest, booted once. For
//! one tenant's cpus, CPU weight, memory.high, memory.low, write bandwidth and I/O weight,
//! the guest runs the printed `systemctl set-property` on a running transient service and
//! the printed `echo ... > /sys/fs/cgroup/GROUP/...` lines on a cgroup of its own (the
//! placeholders replaced as a user would: the unit, the group, the disk of /var/tmp). The
//! tests check that systemd took every property (its parser and its D-Bus API, not only
//! the syntax), that it reads them back as meant (`systemctl show`), and that both the
//! unit's cgroup and the raw one hold exactly the values the cgroup v2 recipe writes: the
//! two recipes set the same kernel state. The steps are in v2_apply.sh.
//!
//! Needs QEMU, the guest image and the static isobench (common/guest.rs); without one, each
//! test prints SKIP with the reason and passes, except under `CI=true`, where it fails.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use common::guest::Guest;
use isobench_platform::apply::{recipes, Target, DEVNUM, GROUP};
use isobench_platform::Limits;

/// The line the guest prints after its last step.
const ALL_RAN: &str = "isobench-v2-apply: every step ran";

/// The knobs a tuned setting is made of.
const LIMITS: &str =
    "cpus=0.6,weight=50,memory_high=256M,memory_low=64M,io_write_bps=4M,io_weight=50";

/// The recipe's lines for a target, the disk unknown (placeholders).
fn lines(target: Target) -> Vec<String> {
    let l: Limits = LIMITS.parse().unwrap();
    let r = recipes(&l, None)
        .into_iter()
        .find(|r| r.target == target)
        .unwrap();
    assert!(r.missing.is_empty(), "{target}: {:?}", r.missing);
    r.lines
}

/// The guest, booted once for this binary with the lines to run; `None` when the test
/// skipped.
fn guest() -> Option<&'static Guest> {
    static GUEST: OnceLock<Result<Guest, String>> = OnceLock::new();
    common::guest::once(&GUEST, "v2-apply", common::guest::missing, || {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("v2-apply-in");
        std::fs::create_dir_all(&dir).unwrap();
        let mut files = Vec::new();
        for (name, target) in [
            ("systemd.lines", Target::Systemd),
            ("cgroupv2.lines", Target::CgroupV2),
        ] {
            let f = dir.join(name);
            std::fs::write(&f, lines(target).join("\n") + "\n").unwrap();
            files.push(f);
        }
        Guest::boot_with(
            "v2-apply",
            &["--timeout", "600"],
            "tests/v2_apply.sh",
            &files,
        )
    })
}

/// The guest's disk: (`/dev/NAME`, `MAJ:MIN`).
fn disk(g: &Guest) -> (String, String) {
    let t = g.file("disk.txt");
    let mut w = t.split_whitespace();
    match (w.next(), w.next()) {
        (Some(node), Some(num)) => (node.into(), num.into()),
        _ => panic!("no disk.txt\n{}", g.context()),
    }
}

/// The files the cgroup v2 recipe writes, with its values (the disk's number in place of
/// the placeholder).
fn recipe_files(devnum: &str) -> Vec<(String, String)> {
    lines(Target::CgroupV2)
        .iter()
        .map(|line| {
            let (value, path) = line
                .strip_prefix("echo ")
                .and_then(|l| l.split_once(" > "))
                .unwrap_or_else(|| panic!("not an echo line: {line}"));
            let file = path
                .strip_prefix(&format!("/sys/fs/cgroup/{GROUP}/"))
                .unwrap_or_else(|| panic!("not a file of GROUP: {line}"));
            let value = value.trim_matches('\'').replace(DEVNUM, devnum);
            (file.to_string(), value)
        })
        .collect()
}

/// A step's `FILE: VALUE` lines.
fn files(g: &Guest, step: &str) -> BTreeMap<String, String> {
    let c = g.cmd(step);
    assert_eq!(c.rc, Some(0), "{step}: {}\n{}", c.err, g.context());
    c.out
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(f, v)| (f.to_string(), v.to_string()))
        .collect()
}

/// Asserts that a cgroup's files hold what the recipe wrote: the same text, or for the
/// keyed files (`io.max`, `io.weight`) every word written on the line of its device.
fn holds(g: &Guest, step: &str) {
    let (_, devnum) = disk(g);
    let got = files(g, step);
    for (file, want) in recipe_files(&devnum) {
        let have = got
            .get(&file)
            .unwrap_or_else(|| panic!("{step}: no {file} in {got:?}"));
        let ok = match file.as_str() {
            "io.max" | "io.weight" => {
                let words: Vec<&str> = have.split_whitespace().collect();
                let first = want.split_whitespace().next().unwrap();
                let at = words.iter().position(|w| *w == first);
                at.is_some_and(|i| {
                    want.split_whitespace()
                        .skip(1)
                        .all(|w| words[i + 1..].contains(&w))
                })
            }
            _ => *have == want,
        };
        assert!(
            ok,
            "{step}: {file} holds `{have}`, the recipe writes `{want}`\n{}",
            g.context()
        );
    }
}

#[test]
fn the_guest_ran_every_step() {
    let Some(g) = guest() else { return };
    assert_eq!(g.exit, 0, "{}", g.context());
    assert!(g.log.contains(ALL_RAN), "{}", g.context());
}

#[test]
fn systemd_takes_every_printed_property_and_reads_it_back_as_meant() {
    let Some(g) = guest() else { return };
    let unit = g.cmd("unit");
    assert_eq!(unit.rc, Some(0), "{}\n{}", unit.err, g.context());
    let set = g.cmd("systemd-set");
    assert_eq!(
        set.rc,
        Some(0),
        "systemd refused `{}`: {}\n{}",
        lines(Target::Systemd)[0],
        set.err,
        g.context()
    );
    let (node, _) = disk(g);
    let show = g.cmd("systemd-show");
    assert_eq!(show.rc, Some(0), "{}", show.err);
    for want in [
        "CPUQuotaPerSecUSec=600ms".to_string(),
        "CPUWeight=50".into(),
        "MemoryHigh=268435456".into(),
        "MemoryLow=67108864".into(),
        "IOWeight=50".into(),
        format!("IOWriteBandwidthMax={node} 4194304"),
    ] {
        assert!(
            show.out.lines().any(|l| l.trim() == want),
            "systemctl show has no `{want}`:\n{}",
            show.out
        );
    }
}

#[test]
fn the_units_cgroup_holds_what_the_cgroup_v2_recipe_writes() {
    let Some(g) = guest() else { return };
    holds(g, "systemd-files");
}

#[test]
fn the_raw_cgroup_v2_lines_run_and_the_kernel_holds_them() {
    let Some(g) = guest() else { return };
    let set = g.cmd("raw-set");
    assert_eq!(set.rc, Some(0), "{}\n{}", set.err, g.context());
    holds(g, "raw-files");
}
