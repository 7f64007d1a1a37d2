//! The `vm` platform: each tenant is a QEMU guest (KVM when it really works here, else TCG)
//! booted from a kernel and an initramfs isobench builds, whose init runs the agent on a
//! virtio-serial port. The QEMU process itself runs in a cgroup tenant, so the host-side
//! limits (CPU quota, cpuset, memory, io) hold for the whole guest.
//!
//! - [`kernel`]: the guest kernel (`isobench vm setup`), cached.
//! - [`initramfs`]: the archive with the static isobench, busybox and the guest's `/init`.
//! - [`qemu`]: the command line, the KVM-or-TCG check, the vCPU threads.
//! - the platform and its tenants; [`sweep`] removes the guests of dead runs.

pub(crate) mod cpio;
pub(crate) mod guest;
pub mod initramfs;
pub mod kernel;
mod platform;
pub mod qemu;

use std::fs;
use std::path::Path;
use std::time::Duration;

use crate::agent::Transport;
use crate::leftovers::{CleanupReport, ObjectKind, RunFilter};
use crate::procs;
use crate::run::{RunId, LINK_PREFIX};
use crate::{Capabilities, PlatformEntry, PlatformKind};

pub use platform::{DEFAULT_GUEST_MEMORY, DISK_BYTES, QEMU_OVERHEAD};

/// The platform's name.
pub const KIND: PlatformKind = PlatformKind::new("vm");

/// The `vm` platform's line in [`crate::PLATFORMS`].
pub(crate) static ENTRY: PlatformEntry = PlatformEntry {
    kind: KIND,
    aliases: &["qemu"],
    summary: "one QEMU guest per tenant (KVM when it works, else TCG), in a cgroup",
    caps: Capabilities {
        enforces_limits: true,
        contains_aggressors: true,
        pins_cpus: true,
        chooses_cpus: false,
        freezer: true,
        live_cpu_limit: true,
        live_knobs: crate::LiveKnobs {
            knobs: crate::KnobSet::of(&[crate::Knob::Cpus, crate::Knob::CpuWeight]),
            why_not: "a guest's memory, processes and disk are its own kernel's; only the CPU \
                      time of its QEMU process (quota and weight) can change from the host",
        },
        own_network: true,
        exec: false,
        agent: Transport::VirtioSerial,
        runs_images: false,
    },
    build: platform::build,
    available: platform::available,
    sweep,
};

/// The run of a QEMU process this platform started: its `ISOBENCH_RUN`, else the run in its
/// `-name isobench-<run>-<tenant>`.
fn qemu_run(pid: i32) -> Option<String> {
    let process = procfs::process::Process::new(pid).ok()?;
    if !process.stat().ok()?.comm.starts_with("qemu-system") {
        return None;
    }
    if let Some(run) = procs::env_of(pid, procs::ENV_RUN) {
        return Some(run);
    }
    run_of_qemu_cmdline(&process.cmdline().ok()?)
}

/// The run in the `-name isobench-<run>-<tenant>,...` of a QEMU command line.
fn run_of_qemu_cmdline(args: &[String]) -> Option<String> {
    let name = args
        .iter()
        .position(|a| a == "-name")
        .and_then(|i| args.get(i + 1))?;
    let object = name.split(',').next()?;
    RunId::from_object_name(object).map(|r| r.to_string())
}

/// Removes what guests of the selected runs left: their QEMU processes (guests) and TAP
/// devices. Their disks and sockets live in the tenants' workdirs, which the shared sweep
/// removes.
pub(crate) fn sweep(runs: &mut dyn RunFilter, report: &mut CleanupReport) {
    let mut killed = Vec::new();
    for pid in procs::all_pids() {
        let Some(run) = qemu_run(pid) else { continue };
        if !runs.selected(&run) {
            continue;
        }
        if procs::kill9(pid) {
            killed.push(pid);
            report.ok(ObjectKind::Guest, format!("qemu pid {pid}"), &run);
        }
    }
    for pid in procs::wait_gone(&killed, Duration::from_secs(5)) {
        report.fail(
            ObjectKind::Guest,
            format!("qemu pid {pid}"),
            "?",
            "still alive after SIGKILL",
        );
    }
    let Ok(rd) = fs::read_dir("/sys/class/net") else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !is_tap_name(&name) || !e.path().join("tun_flags").exists() {
            continue;
        }
        let alias = fs::read_to_string(e.path().join("ifalias")).unwrap_or_default();
        let Some(run) = RunId::from_object_name(alias.trim()).map(|r| r.to_string()) else {
            continue;
        };
        if !runs.selected(&run) {
            continue;
        }
        match crate::cmd::ip(&["link", "del", &name]) {
            Ok(_) => report.ok(ObjectKind::Tap, name, &run),
            Err(_) if !Path::new("/sys/class/net").join(&name).exists() => {
                report.ok(ObjectKind::Tap, name, &run)
            }
            Err(err) => report.fail(ObjectKind::Tap, name, &run, err),
        }
    }
}

/// `ib<6 hex>t<digits>`: a guest's TAP device.
fn is_tap_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(LINK_PREFIX) else {
        return false;
    };
    rest.len() > 7
        && rest.is_char_boundary(6)
        && rest[..6]
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
        && rest.as_bytes()[6] == b't'
        && rest[7..].bytes().all(|c| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tap_names() {
        assert!(is_tap_name("ib0badc0t0"));
        assert!(is_tap_name("ib0badc0t12"));
        assert!(!is_tap_name("ib0badc0h0"));
        assert!(!is_tap_name("ib0badc0t"));
        assert!(!is_tap_name("ib0badc0b"));
        assert!(!is_tap_name("eth0"));
    }

    #[test]
    fn a_guest_is_found_by_the_name_on_its_command_line() {
        let args = |line: &str| -> Vec<String> { line.split(' ').map(String::from).collect() };
        let line =
            args("qemu-system-x86_64 -name isobench-0badc0de-victim,debug-threads=on -M q35");
        assert_eq!(run_of_qemu_cmdline(&line).as_deref(), Some("0badc0de"));
        assert_eq!(
            run_of_qemu_cmdline(&args("qemu-system-x86_64 -name other")),
            None
        );
        assert_eq!(
            run_of_qemu_cmdline(&args("qemu-system-x86_64 -M q35")),
            None
        );
    }

    #[test]
    fn the_vm_platform_cannot_exec() {
        assert!(!ENTRY.caps.exec);
        assert_eq!(ENTRY.caps.agent, Transport::VirtioSerial);
        assert_eq!(KIND.name(), "vm");
    }
}
