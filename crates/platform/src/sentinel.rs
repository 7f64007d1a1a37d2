//! The host sentinel: a high-priority heartbeat in the controller.
//!
//! A thread with the highest priority it can get (SCHED_FIFO, else nice -20) wakes every
//! tick and measures how late it woke. When the host is so loaded that even this thread is
//! late by more than a threshold, the host has stopped responding: the callback (typically
//! "kill the aggressor tenants") runs on the sentinel thread itself.
//!
//! The sentinel times its callback, so a caller whose callback kills the aggressors and
//! returns once they are gone learns the sentinel's reaction time from its
//! [`SentinelReport`]. The threshold can be lowered while it runs
//! ([`Sentinel::set_threshold`]): a drill that makes the next heartbeat a stall tests the
//! whole path, detection to tenants gone, on a host that is not stalled.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
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

impl std::fmt::Display for SentinelPriority {
    /// In words for `isobench doctor`: `real-time (SCHED_FIFO 50)`, `nice -20`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SentinelPriority::Fifo(p) => write!(f, "real-time (SCHED_FIFO {p})"),
            SentinelPriority::Nice(n) => write!(f, "nice {n} (real-time was refused)"),
            SentinelPriority::Normal => {
                f.write_str("normal (neither real-time nor a lower nice value was allowed)")
            }
        }
    }
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

/// The first stall a sentinel saw, and how its callback went.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FirstStall {
    /// Heartbeats before it, itself included.
    pub tick: u64,
    /// How late that heartbeat was, in milliseconds (the stall is detected at this wake-up).
    pub late_by_ms: f64,
    /// How long the callback ran, in milliseconds: with a callback that kills the aggressors
    /// and returns once they are gone, the reaction time from detection to tenants gone.
    pub callback_ms: f64,
}

/// What a sentinel saw: its own heartbeat and the stalls. Durations in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SentinelReport {
    /// The priority the heartbeat thread got.
    pub priority: SentinelPriority,
    /// Heartbeat period.
    pub tick_ms: f64,
    /// The stall threshold in force at the end.
    pub threshold_ms: f64,
    /// Heartbeats.
    pub ticks: u64,
    /// The latest heartbeat (max over the run; a heartbeat delayed by the callback itself
    /// is not counted).
    pub max_lateness_ms: f64,
    /// Late heartbeats (each ran the callback).
    pub stalls: u64,
    /// The first of them.
    pub first_stall: Option<FirstStall>,
}

#[derive(Debug, Default)]
struct Shared {
    stop: AtomicBool,
    threshold_ns: AtomicU64,
    ticks: AtomicU64,
    stalls: AtomicU64,
    max_late_ns: AtomicU64,
    first_stall: Mutex<Option<FirstStall>>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A running sentinel; stops on [`Sentinel::stop`] or drop.
#[derive(Debug)]
pub struct Sentinel {
    shared: Arc<Shared>,
    tick: Duration,
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
        shared
            .threshold_ns
            .store(nanos(config.threshold), Ordering::Relaxed);
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
                    let mut now = Instant::now();
                    let tick = s.ticks.fetch_add(1, Ordering::Relaxed) + 1;
                    let late = now.saturating_duration_since(due);
                    s.max_late_ns.fetch_max(nanos(late), Ordering::Relaxed);
                    let threshold = Duration::from_nanos(s.threshold_ns.load(Ordering::Relaxed));
                    if let Some(late_by) = stall_of(due, now, threshold) {
                        let first = s.stalls.fetch_add(1, Ordering::Relaxed) == 0;
                        on_stall(Stall { late_by, tick });
                        let done = Instant::now();
                        if first {
                            *s.first_stall.lock().unwrap_or_else(|p| p.into_inner()) =
                                Some(FirstStall {
                                    tick,
                                    late_by_ms: ms(late_by),
                                    callback_ms: ms(done - now),
                                });
                        }
                        // The time the callback took is not the host's lateness.
                        now = done;
                    }
                    // Resynchronise after a late tick instead of firing a burst.
                    due = (due + config.tick).max(now);
                }
            })
            .context("starting the sentinel thread")?;
        let priority = rx.recv().unwrap_or(SentinelPriority::Normal);
        Ok(Sentinel {
            shared,
            tick: config.tick,
            priority,
            thread: Some(thread),
        })
    }

    /// Changes the stall threshold from the next heartbeat on. Zero makes the next heartbeat
    /// a stall: a drill of the callback on a host that is not stalled.
    pub fn set_threshold(&self, threshold: Duration) {
        self.shared
            .threshold_ns
            .store(nanos(threshold), Ordering::Relaxed);
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

    /// What the sentinel saw so far (a callback still running is not in it yet).
    pub fn report(&self) -> SentinelReport {
        let sh = &self.shared;
        SentinelReport {
            priority: self.priority,
            tick_ms: ms(self.tick),
            threshold_ms: ms(Duration::from_nanos(
                sh.threshold_ns.load(Ordering::Relaxed),
            )),
            ticks: self.ticks(),
            max_lateness_ms: ms(self.max_lateness()),
            stalls: self.stalls(),
            first_stall: *sh.first_stall.lock().unwrap_or_else(|p| p.into_inner()),
        }
    }

    /// Stops the thread, waits for it (and for a callback in progress) and says what it saw.
    pub fn stop(mut self) -> SentinelReport {
        self.halt();
        self.report()
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

    #[test]
    fn a_drill_lowers_the_threshold_and_the_callback_is_timed() {
        let (tx, rx) = mpsc::channel();
        let s = Sentinel::start(
            SentinelConfig {
                tick: Duration::from_millis(1),
                threshold: Duration::from_secs(3600),
            },
            move |st| {
                thread::sleep(Duration::from_millis(20));
                let _ = tx.send(st);
            },
        )
        .unwrap();
        thread::sleep(Duration::from_millis(20));
        assert_eq!(
            s.report().first_stall,
            None,
            "a stall under a 1 h threshold"
        );
        s.set_threshold(Duration::ZERO);
        let st = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let seen = s.stop();
        assert_eq!(seen.threshold_ms, 0.0);
        let first = seen.first_stall.expect("the first stall is recorded");
        assert_eq!(first.tick, st.tick);
        assert!(first.callback_ms >= 20.0, "{first:?}");
        assert!(seen.stalls >= 1 && seen.ticks >= first.tick);
    }

    #[test]
    fn time_spent_in_the_callback_is_not_lateness() {
        let (tx, rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let s = Sentinel::start(
            SentinelConfig {
                tick: Duration::from_millis(1),
                threshold: Duration::ZERO,
            },
            move |_| {
                if tx.send(()).is_ok() {
                    // Held until the test has raised the threshold, then a second more.
                    let _ = done_rx.recv();
                    thread::sleep(Duration::from_secs(1));
                }
            },
        )
        .unwrap();
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
        s.set_threshold(Duration::from_secs(3600));
        drop(done_tx);
        // The callback returns after its second; a few heartbeats follow.
        let end = Instant::now() + Duration::from_secs(10);
        while s.report().first_stall.is_none() && Instant::now() < end {
            thread::sleep(Duration::from_millis(5));
        }
        thread::sleep(Duration::from_millis(20));
        let seen = s.stop();
        assert_eq!(seen.stalls, 1, "{seen:?}");
        assert!(seen.first_stall.unwrap().callback_ms >= 1000.0, "{seen:?}");
        assert!(seen.max_lateness_ms < 1000.0, "{seen:?}");
    }
}
