//! The scheduler's view of a tenant's threads and of the host's CPUs, read from outside the
//! tenant at chosen instants ([`SchedMark`]).
//!
//! Why: a contended result is explained by what the victim's threads waited for. Marks read
//! when the aggressors are switched on and off split a probe run into the time with and the
//! time without them, so the run-queue wait of the victim's threads, the softirq and irq time
//! of the CPUs and how long they idled can be compared phase by phase (the analysis names the
//! cause of a result from these). Reading from outside costs the victim nothing: no thread of
//! its own wakes up to sample.
//!
//! Sources: the tenant's thread ids from its cgroup (`tasks` on v1, `cgroup.threads` on v2) or
//! from `/proc/PID/task`, each thread's `/proc/TID/schedstat` (time on a CPU, time runnable
//! but waiting on a run queue, timeslices; nanoseconds) and `/proc/stat` per CPU. Threads that
//! exit between two marks take their times with them.

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;

use procfs::process::Process;
use serde::{Deserialize, Serialize};

use crate::noise::{cpu_times_from_text, CpuTimes};

/// One thread's scheduler counters (`/proc/TID/schedstat`), nanoseconds and timeslices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadSched {
    /// Time on a CPU.
    pub run_ns: u64,
    /// Time runnable but waiting on a run queue.
    pub wait_ns: u64,
    /// Timeslices run (each wake-up or preemption starts one).
    pub slices: u64,
}

impl From<procfs::process::Schedstat> for ThreadSched {
    fn from(s: procfs::process::Schedstat) -> ThreadSched {
        ThreadSched {
            run_ns: s.sum_exec_runtime,
            wait_ns: s.run_delay,
            slices: s.pcount,
        }
    }
}

/// Where a tenant's threads are found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskSource {
    /// Its cgroup directories (every thread of the tenant).
    pub cgroups: Vec<PathBuf>,
    /// Else the process whose threads are read (the agent).
    pub pid: Option<u32>,
}

impl TaskSource {
    /// The thread ids of the tenant now (empty when none can be read).
    pub fn tids(&self) -> Vec<u32> {
        for dir in &self.cgroups {
            for f in ["cgroup.threads", "tasks"] {
                if let Ok(text) = fs::read_to_string(dir.join(f)) {
                    let v: Vec<u32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
                    if !v.is_empty() {
                        return v;
                    }
                }
            }
        }
        let Some(pid) = self.pid else {
            return Vec::new();
        };
        let tasks = i32::try_from(pid)
            .ok()
            .and_then(|p| Process::new(p).ok()?.tasks().ok());
        tasks
            .map(|t| {
                t.flatten()
                    .filter_map(|t| u32::try_from(t.tid).ok())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A tenant's threads and the host's CPUs at one instant.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SchedMark {
    /// `CLOCK_MONOTONIC`, nanoseconds.
    pub at_ns: u64,
    /// Each thread's counters, by thread id.
    pub threads: BTreeMap<u32, ThreadSched>,
    /// Each CPU's times (`/proc/stat`), in CPU number order; empty when unreadable.
    pub cpus: Vec<CpuTimes>,
}

impl SchedMark {
    /// Reads the threads of `source` and the host's CPUs now. Anything unreadable is left
    /// out: a mark is for the record and never fails a trial.
    pub fn read(source: &TaskSource) -> SchedMark {
        let threads = source
            .tids()
            .into_iter()
            .filter_map(|tid| {
                let stat = Process::new(i32::try_from(tid).ok()?)
                    .and_then(|p| p.schedstat())
                    .ok()?;
                Some((tid, ThreadSched::from(stat)))
            })
            .collect();
        let cpus = fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|s| cpu_times_from_text(&s, procfs::ticks_per_second()).ok())
            .map(|(_, per_cpu)| per_cpu)
            .unwrap_or_default();
        SchedMark {
            at_ns: crate::noise::monotonic_ns(),
            threads,
            cpus,
        }
    }
}

/// What the tenant's threads and the host's CPUs did between marks, added up over intervals.
/// Seconds throughout.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SchedTotals {
    /// Wall time covered.
    pub interval_s: f64,
    /// CPU time of the tenant's threads.
    pub run_s: f64,
    /// Time those threads waited on a run queue.
    pub runq_wait_s: f64,
    /// Timeslices they ran (wake-ups and preemptions).
    pub timeslices: u64,
    /// Per CPU: idle time (iowait included).
    pub idle_s: Vec<f64>,
    /// Per CPU: softirq time.
    pub softirq_s: Vec<f64>,
    /// Per CPU: hard-irq time.
    pub irq_s: Vec<f64>,
    /// Per CPU: steal time.
    pub steal_s: Vec<f64>,
}

fn add_into(v: &mut Vec<f64>, i: usize, x: f64) {
    if v.len() <= i {
        v.resize(i + 1, 0.0);
    }
    v[i] += x.max(0.0);
}

impl SchedTotals {
    /// Adds the interval from `a` to `b`. A thread new since `a` counts from zero.
    pub fn add(&mut self, a: &SchedMark, b: &SchedMark) {
        self.interval_s += b.at_ns.saturating_sub(a.at_ns) as f64 * 1e-9;
        for (tid, t) in &b.threads {
            let before = a.threads.get(tid).copied().unwrap_or_default();
            self.run_s += t.run_ns.saturating_sub(before.run_ns) as f64 * 1e-9;
            self.runq_wait_s += t.wait_ns.saturating_sub(before.wait_ns) as f64 * 1e-9;
            self.timeslices += t.slices.saturating_sub(before.slices);
        }
        for (i, (x, y)) in a.cpus.iter().zip(&b.cpus).enumerate() {
            add_into(
                &mut self.idle_s,
                i,
                y.idle_s + y.iowait_s - x.idle_s - x.iowait_s,
            );
            add_into(&mut self.softirq_s, i, y.softirq_s - x.softirq_s);
            add_into(&mut self.irq_s, i, y.irq_s - x.irq_s);
            add_into(&mut self.steal_s, i, y.steal_s - x.steal_s);
        }
    }

    /// Adds other totals.
    pub fn merge(&mut self, o: &SchedTotals) {
        self.interval_s += o.interval_s;
        self.run_s += o.run_s;
        self.runq_wait_s += o.runq_wait_s;
        self.timeslices += o.timeslices;
        for (dst, src) in [
            (&mut self.idle_s, &o.idle_s),
            (&mut self.softirq_s, &o.softirq_s),
            (&mut self.irq_s, &o.irq_s),
            (&mut self.steal_s, &o.steal_s),
        ] {
            for (i, x) in src.iter().enumerate() {
                add_into(dst, i, *x);
            }
        }
    }
}

/// Run time after which a thread that vanishes between two marks makes the interval unknown
/// (short-lived children, such as those of a fork probe, come and go without it).
pub const LONG_LIVED_NS: u64 = 10_000_000;

/// Marks taken while something was on or off, split into the two: each interval between
/// consecutive marks counts for the state of the mark that opens it (`true` = on). An
/// interval in which a thread that had run [`LONG_LIVED_NS`] vanished (the probe's thread
/// ending its run) is left out: its last part is unknown.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Phases {
    /// Time with the aggressors running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on: Option<SchedTotals>,
    /// Time with the aggressors idle or frozen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off: Option<SchedTotals>,
}

impl Phases {
    /// From marks in time order, each with the state that follows it.
    pub fn from_marks(marks: &[(bool, SchedMark)]) -> Phases {
        let mut p = Phases::default();
        for w in marks.windows(2) {
            let (on, a) = &w[0];
            let b = &w[1].1;
            let vanished = a
                .threads
                .iter()
                .any(|(tid, t)| t.run_ns >= LONG_LIVED_NS && !b.threads.contains_key(tid));
            if vanished {
                continue;
            }
            let slot = if *on { &mut p.on } else { &mut p.off };
            slot.get_or_insert_with(SchedTotals::default).add(a, b);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(idle: f64, softirq: f64) -> CpuTimes {
        CpuTimes {
            idle_s: idle,
            softirq_s: softirq,
            ..CpuTimes::default()
        }
    }

    fn mark(at_ms: u64, threads: &[(u32, u64, u64, u64)], cpus: Vec<CpuTimes>) -> SchedMark {
        SchedMark {
            at_ns: at_ms * 1_000_000,
            threads: threads
                .iter()
                .map(|&(tid, run_ns, wait_ns, slices)| {
                    (
                        tid,
                        ThreadSched {
                            run_ns,
                            wait_ns,
                            slices,
                        },
                    )
                })
                .collect(),
            cpus,
        }
    }

    #[test]
    fn schedstat_is_read() {
        use procfs::FromRead;
        let stat = procfs::process::Schedstat::from_read("123 45 6\n".as_bytes()).unwrap();
        assert_eq!(
            ThreadSched::from(stat),
            ThreadSched {
                run_ns: 123,
                wait_ns: 45,
                slices: 6
            }
        );
        assert!(procfs::process::Schedstat::from_read("1 2".as_bytes()).is_err());
    }

    #[test]
    fn the_threads_of_this_process_are_found_and_read() {
        let source = TaskSource {
            cgroups: Vec::new(),
            pid: Some(std::process::id()),
        };
        let tids = source.tids();
        assert!(tids.contains(&std::process::id()));
        let mark = SchedMark::read(&source);
        assert!(mark.threads.values().any(|t| t.run_ns > 0));
    }

    #[test]
    fn marks_split_into_on_and_off_time() {
        let marks = vec![
            (true, mark(0, &[(1, 0, 0, 0)], vec![cpu(0.0, 0.0)])),
            // 100 ms on: ran 40 ms, waited 50 ms over 10 slices; no idle, 20 ms softirq.
            (
                false,
                mark(
                    100,
                    &[(1, 40_000_000, 50_000_000, 10)],
                    vec![cpu(0.0, 0.02)],
                ),
            ),
            // 100 ms off: thread 2 new (ran 5 ms); 80 ms idle.
            (
                true,
                mark(
                    200,
                    &[(1, 80_000_000, 51_000_000, 20), (2, 5_000_000, 0, 1)],
                    vec![cpu(0.08, 0.02)],
                ),
            ),
            (
                false,
                mark(
                    300,
                    &[(1, 90_000_000, 101_000_000, 30)],
                    vec![cpu(0.08, 0.04)],
                ),
            ),
        ];
        let p = Phases::from_marks(&marks);
        let on = p.on.unwrap();
        let off = p.off.unwrap();
        assert!((on.interval_s - 0.2).abs() < 1e-9);
        assert!((on.runq_wait_s - 0.1).abs() < 1e-9);
        assert_eq!(on.timeslices, 20);
        assert!((on.softirq_s[0] - 0.04).abs() < 1e-9);
        assert!(on.idle_s[0].abs() < 1e-9);
        assert!((off.interval_s - 0.1).abs() < 1e-9);
        assert!((off.run_s - 0.045).abs() < 1e-9);
        assert!((off.runq_wait_s - 0.001).abs() < 1e-9);
        assert_eq!(off.timeslices, 11);
        assert!((off.idle_s[0] - 0.08).abs() < 1e-9);
        let mut both = on.clone();
        both.merge(&off);
        assert_eq!(both.timeslices, 31);
        // The probe's thread (90 ms run) ends before the closing mark: that interval is
        // unknown and left out.
        let ended = vec![
            marks[3].clone(),
            (false, mark(400, &[], vec![cpu(0.18, 0.04)])),
        ];
        assert_eq!(Phases::from_marks(&ended), Phases::default());
    }

    #[test]
    fn this_process_is_seen_from_outside() {
        let src = TaskSource {
            cgroups: Vec::new(),
            pid: Some(std::process::id()),
        };
        let a = SchedMark::read(&src);
        // Spin for 20 ms of this thread's own CPU time (on a loaded machine the wall clock
        // says nothing about how long it ran).
        let cpu_s = || {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: a valid out-pointer.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
        };
        let (start, wall) = (cpu_s(), std::time::Instant::now());
        let mut x = 1u64;
        while cpu_s() - start < 0.02 && wall.elapsed() < std::time::Duration::from_secs(30) {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let b = SchedMark::read(&src);
        let mut t = SchedTotals::default();
        t.add(&a, &b);
        assert!(!a.threads.is_empty());
        assert!(t.run_s > 0.005, "{t:?}");
        assert!(!t.idle_s.is_empty());
    }
}
