//! The host sentinel: a high-priority heartbeat in the controller.
//!
//! A thread with the highest priority it can get (SCHED_FIFO, else nice -20) wakes every
//! tick and measures how late it woke. When the host is so loaded that even this thread is
//! late by more than a threshold, the host has stopped responding: the callback (typically
//! "kill the aggressor tenants") runs on the sentinel thread itself.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;

/// Sentinel settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentinelConfig {
    /// Heartbeat period.
    pub tick: Duration,
    /// A heartbeat later than this is a stall.
    pub threshold: Duration,
}

impl Default for SentinelConfig {
    /// 10 ms ticks, 1 s threshold.
    fn default() -> Self {
        SentinelConfig {
            tick: Duration::from_millis(10),
            threshold: Duration::from_secs(1),
        }
    }
}

/// The scheduling priority the sentinel thread got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SentinelPriority {
    /// Real-time FIFO at this priority.
    Fifo(i32),
    /// Normal scheduling at this nice value.
    Nice(i32),
    /// Neither could be raised.
    Normal,
}

/// A late heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    /// How late the heartbeat was.
    pub late_by: Duration,
    /// Heartbeats so far.
    pub tick: u64,
}

/// How late a heartbeat due at `due` is at `now`, if later than `threshold`.
pub fn stall_of(due: Instant, now: Instant, threshold: Duration) -> Option<Duration> {
    let late = now.saturating_duration_since(due);
    (late > threshold).then_some(late)
}

#[derive(Debug, Default)]
struct Shared {
    stop: AtomicBool,
    ticks: AtomicU64,
    stalls: AtomicU64,
    max_late_ns: AtomicU64,
}

/// A running sentinel; stops on [`Sentinel::stop`] or drop.
#[derive(Debug)]
pub struct Sentinel {
    shared: Arc<Shared>,
    priority: SentinelPriority,
    thread: Option<JoinHandle<()>>,
}

fn raise_priority() -> SentinelPriority {
    const FIFO: i32 = 50;
    let param = libc::sched_param {
        sched_priority: FIFO,
    };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0 {
        return SentinelPriority::Fifo(FIFO);
    }
    // SAFETY: gettid has no preconditions; setpriority on our own thread id.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::id_t;
    for nice in [-20, -10, -5] {
        // SAFETY: as above.
        if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) } == 0 {
            return SentinelPriority::Nice(nice);
        }
    }
    SentinelPriority::Normal
}

impl Sentinel {
    /// Starts the heartbeat thread; `on_stall` runs on it for every late heartbeat.
    pub fn start(
        config: SentinelConfig,
        mut on_stall: impl FnMut(Stall) + Send + 'static,
    ) -> Result<Sentinel> {
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let (tx, rx) = mpsc::channel();
        let thread = thread::Builder::new()
            .name("isobench-sentinel".into())
            .spawn(move || {
                let _ = tx.send(raise_priority());
                let mut due = Instant::now() + config.tick;
                while !s.stop.load(Ordering::Relaxed) {
                    let now = Instant::now();
                    if due > now {
                        thread::sleep(due - now);
                    }
                    let now = Instant::now();
                    let tick = s.ticks.fetch_add(1, Ordering::Relaxed) + 1;
                    let late = now.saturating_duration_since(due);
                    s.max_late_ns
                        .fetch_max(late.as_nanos() as u64, Ordering::Relaxed);
                    if let Some(late_by) = stall_of(due, now, config.threshold) {
                        s.stalls.fetch_add(1, Ordering::Relaxed);
                        on_stall(Stall { late_by, tick });
                    }
                    // Resynchronise after a late tick instead of firing a burst.
                    due = (due + config.tick).max(now);
                }
            })
            .context("starting the sentinel thread")?;
        let priority = rx.recv().unwrap_or(SentinelPriority::Normal);
        Ok(Sentinel {
            shared,
            priority,
            thread: Some(thread),
        })
    }

    /// The priority the thread got.
    pub fn priority(&self) -> SentinelPriority {
        self.priority
    }

    /// Heartbeats so far.
    pub fn ticks(&self) -> u64 {
        self.shared.ticks.load(Ordering::Relaxed)
    }

    /// Late heartbeats so far.
    pub fn stalls(&self) -> u64 {
        self.shared.stalls.load(Ordering::Relaxed)
    }

    /// The latest heartbeat seen.
    pub fn max_lateness(&self) -> Duration {
        Duration::from_nanos(self.shared.max_late_ns.load(Ordering::Relaxed))
    }

    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.halt();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stall_detection_is_a_threshold_on_lateness() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(stall_of(t0, t0 + ms(5), ms(10)), None);
        assert_eq!(stall_of(t0, t0 + ms(11), ms(10)), Some(ms(11)));
        // Early wake-ups are never stalls.
        assert_eq!(stall_of(t0 + ms(5), t0, Duration::ZERO), None);
    }

    #[test]
    fn zero_threshold_fires_the_callback() {
        let (tx, rx) = mpsc::channel();
        let s = Sentinel::start(
            SentinelConfig {
                tick: Duration::from_millis(1),
                threshold: Duration::ZERO,
            },
            move |st| {
                let _ = tx.send(st);
            },
        )
        .unwrap();
        let st = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(st.late_by > Duration::ZERO);
        assert!(s.stalls() >= 1 && s.ticks() >= 1);
        if crate::procs::euid() == 0 {
            assert_ne!(s.priority(), SentinelPriority::Normal);
        }
        s.stop();
    }
}
