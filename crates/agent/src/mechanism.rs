//! The mechanism behind one probe run: how long the agent's threads ran, how long they waited
//! on a run queue, how often they were switched out, and how much interrupt work the host's
//! CPUs did meanwhile.
//!
//! Why: a degradation says how much a probe lost, not how. A probe that loses time waiting
//! on a run queue after each I/O completion, one whose CPU is busy with someone else's
//! network softirqs, and one slowed by the hypervisor look the same in ops/s and very
//! different here. The agent reads its own process before and after each `run_probe` and
//! returns the difference as the result's [`ProbeContext`].
//!
//! Sources: `/proc/self/task/*/schedstat` (run time, run-queue wait, timeslices per thread)
//! and `/proc/self/task/*/stat` (the CPU each thread last ran on), `getrusage(RUSAGE_SELF)`
//! (context switches, exited threads included) and `/proc/stat` (per-CPU irq, softirq and
//! steal time, in clock ticks). Threads that exit during the run take their run and wait time
//! with them: only threads alive at the end are counted there.

use std::collections::BTreeSet;
use std::time::Instant;

use procfs::process::Process;
use procfs::{CurrentSI, KernelStats};

use crate::protocol::ProbeContext;

/// One thread's scheduler counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskSched {
    /// Thread id.
    pub tid: i32,
    /// Time on a CPU, ns.
    pub run_ns: u64,
    /// Time runnable but waiting on a run queue, ns.
    pub wait_ns: u64,
    /// Timeslices run.
    pub slices: u64,
    /// The CPU it last ran on.
    pub cpu: Option<u32>,
}

/// Interrupt and steal time of one CPU so far, seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuInterruptTime {
    /// Softirq.
    pub softirq_s: f64,
    /// Hard irq.
    pub irq_s: f64,
    /// Steal.
    pub steal_s: f64,
}

/// The counters at one instant.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// When it was read.
    pub at: Instant,
    /// The process's threads.
    pub tasks: Vec<TaskSched>,
    /// Voluntary context switches of the process so far.
    pub voluntary_switches: u64,
    /// Involuntary context switches (preemptions) of the process so far.
    pub involuntary_switches: u64,
    /// Per CPU, in CPU number order (empty when `/proc/stat` cannot be read).
    pub cpus: Vec<CpuInterruptTime>,
}

fn rusage_switches() -> (u64, u64) {
    // SAFETY: an all-zero rusage is a valid value; getrusage only writes to it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return (0, 0);
    }
    (ru.ru_nvcsw.max(0) as u64, ru.ru_nivcsw.max(0) as u64)
}

fn tasks() -> Vec<TaskSched> {
    let Ok(me) = Process::myself() else {
        return Vec::new();
    };
    let Ok(tasks) = me.tasks() else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| {
            let s = t.schedstat().ok()?;
            let cpu = t
                .stat()
                .ok()
                .and_then(|st| st.processor)
                .and_then(|c| u32::try_from(c).ok());
            Some(TaskSched {
                tid: t.tid,
                run_ns: s.sum_exec_runtime,
                wait_ns: s.run_delay,
                slices: s.pcount,
                cpu,
            })
        })
        .collect()
}

fn cpus() -> Vec<CpuInterruptTime> {
    let Ok(ks) = KernelStats::current() else {
        return Vec::new();
    };
    let tps = procfs::ticks_per_second().max(1) as f64;
    ks.cpu_time
        .iter()
        .map(|c| CpuInterruptTime {
            softirq_s: c.softirq.unwrap_or(0) as f64 / tps,
            irq_s: c.irq.unwrap_or(0) as f64 / tps,
            steal_s: c.steal.unwrap_or(0) as f64 / tps,
        })
        .collect()
}

impl Snapshot {
    /// Reads this process's and the host's counters now. Anything unreadable reads as
    /// empty: the context is for the record and never fails a probe.
    pub fn read() -> Snapshot {
        let (voluntary_switches, involuntary_switches) = rusage_switches();
        Snapshot {
            at: Instant::now(),
            tasks: tasks(),
            voluntary_switches,
            involuntary_switches,
            cpus: cpus(),
        }
    }
}

/// What happened between two snapshots. `pin` is the CPU the probe's measuring thread was
/// pinned to, if any.
pub fn context_between(before: &Snapshot, after: &Snapshot, pin: Option<usize>) -> ProbeContext {
    let mut run_ns = 0u64;
    let mut wait_ns = 0u64;
    let mut slices = 0u64;
    let mut threads = 0u32;
    let mut cpus_used = BTreeSet::new();
    for a in &after.tasks {
        // A thread new since `before` counts from zero.
        let b = before.tasks.iter().find(|b| b.tid == a.tid);
        let ran = a.run_ns.saturating_sub(b.map_or(0, |b| b.run_ns));
        run_ns += ran;
        wait_ns += a.wait_ns.saturating_sub(b.map_or(0, |b| b.wait_ns));
        slices += a.slices.saturating_sub(b.map_or(0, |b| b.slices));
        if ran > 0 {
            threads += 1;
            if let Some(c) = a.cpu {
                cpus_used.insert(c);
            }
        }
    }
    let per_cpu = |f: fn(&CpuInterruptTime) -> f64| -> Vec<f64> {
        before
            .cpus
            .iter()
            .zip(&after.cpus)
            .map(|(b, a)| (f(a) - f(b)).max(0.0))
            .collect()
    };
    let softirq_s_per_cpu = per_cpu(|c| c.softirq_s);
    let softirq_s_on_pinned_cpu = pin.and_then(|p| softirq_s_per_cpu.get(p).copied());
    let softirq_s_on_cpus_used = cpus_used
        .iter()
        .filter_map(|&c| softirq_s_per_cpu.get(c as usize))
        .sum();
    ProbeContext {
        interval_s: after.at.saturating_duration_since(before.at).as_secs_f64(),
        run_s: run_ns as f64 * 1e-9,
        runq_wait_s: wait_ns as f64 * 1e-9,
        timeslices: slices,
        voluntary_switches: after
            .voluntary_switches
            .saturating_sub(before.voluntary_switches),
        involuntary_switches: after
            .involuntary_switches
            .saturating_sub(before.involuntary_switches),
        threads_ran: threads,
        cpus_used: cpus_used.into_iter().collect(),
        pinned_cpu: pin.and_then(|p| u32::try_from(p).ok()),
        softirq_s_on_pinned_cpu,
        softirq_s_on_cpus_used,
        irq_s_per_cpu: per_cpu(|c| c.irq_s),
        steal_s_per_cpu: per_cpu(|c| c.steal_s),
        softirq_s_per_cpu,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn task(tid: i32, run_ns: u64, wait_ns: u64, slices: u64, cpu: u32) -> TaskSched {
        TaskSched {
            tid,
            run_ns,
            wait_ns,
            slices,
            cpu: Some(cpu),
        }
    }

    fn cpu(softirq_s: f64) -> CpuInterruptTime {
        CpuInterruptTime {
            softirq_s,
            irq_s: 0.0,
            steal_s: 0.01,
        }
    }

    #[test]
    fn differences_of_live_new_and_idle_threads() {
        let t0 = Instant::now();
        let before = Snapshot {
            at: t0,
            tasks: vec![task(1, 100, 10, 1, 0), task(2, 5_000, 0, 3, 1)],
            voluntary_switches: 10,
            involuntary_switches: 2,
            cpus: vec![cpu(1.0), cpu(2.0)],
        };
        let after = Snapshot {
            at: t0 + Duration::from_millis(500),
            // tid 1 idle; tid 2 ran on cpu 1; tid 3 is new and ran on cpu 0.
            tasks: vec![
                task(1, 100, 10, 1, 0),
                task(2, 400_005_000, 100_000_000, 43, 1),
                task(3, 50_000_000, 1_000_000, 5, 0),
            ],
            voluntary_switches: 50,
            involuntary_switches: 7,
            cpus: vec![cpu(1.0), cpu(2.31)],
        };
        let c = context_between(&before, &after, Some(1));
        assert!((c.interval_s - 0.5).abs() < 1e-9);
        assert!((c.run_s - 0.45).abs() < 1e-12);
        assert!((c.runq_wait_s - 0.101).abs() < 1e-12);
        assert_eq!(c.timeslices, 45);
        assert_eq!((c.voluntary_switches, c.involuntary_switches), (40, 5));
        assert_eq!(c.threads_ran, 2);
        assert_eq!(c.cpus_used, vec![0, 1]);
        assert_eq!(c.pinned_cpu, Some(1));
        assert!((c.softirq_s_on_pinned_cpu.unwrap() - 0.31).abs() < 1e-9);
        assert!((c.softirq_s_on_cpus_used - 0.31).abs() < 1e-9);
        assert_eq!(c.steal_s_per_cpu, vec![0.0, 0.0]);
        // No pin: nothing "on the pinned CPU".
        assert_eq!(
            context_between(&before, &after, None).softirq_s_on_pinned_cpu,
            None
        );
    }

    #[test]
    fn a_real_snapshot_sees_this_thread_run() {
        let before = Snapshot::read();
        let mut x = 1u64;
        let end = Instant::now() + Duration::from_millis(30);
        while Instant::now() < end {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let after = Snapshot::read();
        let c = context_between(&before, &after, None);
        assert!(c.run_s > 0.0, "{c:?}");
        assert!(c.threads_ran >= 1);
        assert!(!c.cpus_used.is_empty());
        assert_eq!(c.softirq_s_per_cpu.len(), after.cpus.len());
    }
}
