//! Process helpers over procfs: start times (to tell a live pid from a reused one), the
//! isobench environment tags, signals.

use std::ffi::OsStr;
use std::thread;
use std::time::{Duration, Instant};

use procfs::process::{Process, Stat};

/// Environment variable naming the run of every process isobench starts in a tenant.
pub const ENV_RUN: &str = "ISOBENCH_RUN";
/// Environment variable naming the tenant (`isobench-<run>-<tenant>`).
pub const ENV_TENANT: &str = "ISOBENCH_TENANT";
/// Environment variable with the tenant's working directory.
pub const ENV_WORKDIR: &str = "ISOBENCH_WORKDIR";

/// `/proc/<pid>/stat` of `pid` (or of thread `pid`), or `None` when it does not exist.
pub(crate) fn stat(pid: i32) -> Option<Stat> {
    Process::new(pid).ok()?.stat().ok()
}

/// The start time of `pid` in clock ticks since boot (field 22 of `/proc/<pid>/stat`), or
/// `None` when the process does not exist.
pub fn start_time(pid: i32) -> Option<u64> {
    Some(stat(pid)?.starttime)
}

/// CPU time of a process in clock ticks: user and system, its own and its reaped children's.
pub(crate) fn cpu_ticks(stat: &Stat) -> u64 {
    let children = stat.cutime.max(0) + stat.cstime.max(0);
    stat.utime + stat.stime + children as u64
}

/// The process group of `pid`.
pub(crate) fn pgrp(pid: i32) -> Option<i32> {
    Some(stat(pid)?.pgrp)
}

/// Whether the process `pid` exists and is not a zombie.
pub(crate) fn alive(pid: i32) -> bool {
    stat(pid).is_some_and(|s| !matches!(s.state, 'Z' | 'X'))
}

/// The command name and state letter of task (process or thread) `tid`, or `None` when it
/// is gone.
pub(crate) fn task_state(tid: i32) -> Option<(String, char)> {
    let s = stat(tid)?;
    Some((s.comm, s.state))
}

/// All pids in /proc.
pub(crate) fn all_pids() -> Vec<i32> {
    procfs::process::all_processes()
        .map(|ps| ps.filter_map(|p| Some(p.ok()?.pid)).collect())
        .unwrap_or_default()
}

/// The value of `key` in the environment of `pid`, if readable.
pub(crate) fn env_of(pid: i32, key: &str) -> Option<String> {
    let env = Process::new(pid).ok()?.environ().ok()?;
    Some(env.get(OsStr::new(key))?.to_string_lossy().into_owned())
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
    fn this_process_is_alive() {
        let me = std::process::id() as i32;
        assert!(alive(me));
        assert!(start_time(me).is_some());
        // SAFETY: getpgrp cannot fail.
        assert_eq!(pgrp(me), Some(unsafe { libc::getpgrp() }));
        assert_eq!(
            env_of(me, "PATH"),
            std::env::var("PATH").ok(),
            "the environment this process started with"
        );
        assert!(all_pids().contains(&me));
        // SAFETY: gettid cannot fail.
        let tid = unsafe { libc::gettid() };
        let (comm, state) = task_state(tid).expect("own stat");
        assert!(!comm.is_empty());
        assert_eq!(state, 'R', "a thread reading its own stat is running");
    }
}
