//! Process helpers over procfs: start times (to tell a live pid from a reused one), the
//! isobench environment tags, signals.

use std::fs;
use std::thread;
use std::time::{Duration, Instant};

/// Environment variable naming the run of every process isobench starts in a tenant.
pub const ENV_RUN: &str = "ISOBENCH_RUN";
/// Environment variable naming the tenant (`isobench-<run>-<tenant>`).
pub const ENV_TENANT: &str = "ISOBENCH_TENANT";
/// Environment variable with the tenant's working directory.
pub const ENV_WORKDIR: &str = "ISOBENCH_WORKDIR";

/// The start time of `pid` in clock ticks since boot (field 22 of `/proc/<pid>/stat`), or
/// `None` when the process does not exist.
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_field(&stat, 22)
}

/// Field `n` (1-based, as in proc(5)) of a `/proc/<pid>/stat` line.
pub(crate) fn stat_field(stat: &str, n: usize) -> Option<u64> {
    // The command name (field 2) is in parentheses and may contain spaces.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n.checked_sub(3)?)?.parse().ok()
}

/// The process group of `pid`.
pub(crate) fn pgrp(pid: i32) -> Option<i32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_field(&stat, 5).map(|g| g as i32)
}

/// Whether the process `pid` exists and is not a zombie.
pub(crate) fn alive(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !matches!(stat_state(&stat), Some('Z') | Some('X') | None),
        Err(_) => false,
    }
}

/// The state letter (field 3 of a `/proc/<pid>/stat` line: `R`, `S`, `D`, ...).
pub(crate) fn stat_state(stat: &str) -> Option<char> {
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// The command name (field 2 of a `/proc/<pid>/stat` line, without its parentheses).
pub(crate) fn stat_comm(stat: &str) -> Option<&str> {
    Some(&stat[stat.find('(')? + 1..stat.rfind(')')?])
}

/// The command name and state letter of task (process or thread) `tid`, or `None` when it
/// is gone.
pub(crate) fn task_state(tid: i32) -> Option<(String, char)> {
    let stat = fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    Some((stat_comm(&stat)?.to_string(), stat_state(&stat)?))
}

/// All pids in /proc.
pub(crate) fn all_pids() -> Vec<i32> {
    let Ok(rd) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// The value of `key` in the environment of `pid`, if readable.
pub(crate) fn env_of(pid: i32, key: &str) -> Option<String> {
    let data = fs::read(format!("/proc/{pid}/environ")).ok()?;
    for item in data.split(|&b| b == 0) {
        if let Some(rest) = item.strip_prefix(key.as_bytes()) {
            if let Some(v) = rest.strip_prefix(b"=") {
                return Some(String::from_utf8_lossy(v).into_owned());
            }
        }
    }
    None
}

/// Processes (other than this one) whose environment has `key` set, with the value.
pub(crate) fn tagged(key: &str) -> Vec<(i32, String)> {
    let me = std::process::id() as i32;
    all_pids()
        .into_iter()
        .filter(|&p| p != me)
        .filter_map(|p| env_of(p, key).map(|v| (p, v)))
        .collect()
}

/// Sends SIGKILL to `pid`; true when the signal was delivered.
pub(crate) fn kill9(pid: i32) -> bool {
    if pid <= 1 {
        return false;
    }
    // SAFETY: kill(2) with a positive pid has no memory-safety preconditions.
    unsafe { libc::kill(pid, libc::SIGKILL) == 0 }
}

/// Sends SIGKILL to the process group `pgid`.
pub(crate) fn killpg9(pgid: i32) -> bool {
    if pgid <= 1 {
        return false;
    }
    // SAFETY: as above, for a process group.
    unsafe { libc::kill(-pgid, libc::SIGKILL) == 0 }
}

/// Waits until none of `pids` is alive, at most `timeout`; returns the ones still alive.
pub(crate) fn wait_gone(pids: &[i32], timeout: Duration) -> Vec<i32> {
    let end = Instant::now() + timeout;
    loop {
        let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        if left.is_empty() || Instant::now() >= end {
            return left;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// The effective uid of this process.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() }
}

/// Waits up to `timeout` for `child` to exit, then kills and reaps it.
pub fn wait_or_kill(child: &mut std::process::Child, timeout: Duration) {
    let t0 = Instant::now();
    while t0.elapsed() < timeout {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_skip_the_command_name() {
        let stat = "42 (a b) c) S 1 42 42 0 -1 4194560 1 0 0 0 7 3 0 0 20 0 1 0 12345 0";
        assert_eq!(stat_field(stat, 4), Some(1));
        assert_eq!(stat_field(stat, 14), Some(7));
        assert_eq!(stat_field(stat, 22), Some(12345));
        assert_eq!(stat_state(stat), Some('S'));
        assert_eq!(stat_comm(stat), Some("a b) c"));
    }

    #[test]
    fn this_process_is_alive() {
        let me = std::process::id() as i32;
        assert!(alive(me));
        assert!(start_time(me).is_some());
        // SAFETY: gettid cannot fail.
        let tid = unsafe { libc::gettid() };
        let (comm, state) = task_state(tid).expect("own stat");
        assert!(!comm.is_empty());
        assert_eq!(state, 'R', "a thread reading its own stat is running");
    }
}
