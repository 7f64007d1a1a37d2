//! The per-tenant deadline: a thread that kills the tenant when its time is up.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Kills something (a tenant) when a deadline passes, unless cancelled first.
#[derive(Debug)]
pub struct Watchdog {
    cancel: Arc<(Mutex<bool>, Condvar)>,
    fired: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// A tenant's watchdog, when it has a deadline (`deadline_s`): on expiry `kill` ends its
    /// processes (a failure is warned about). Also gives the flag that says it fired (a flag
    /// that stays false without a deadline).
    pub(crate) fn for_tenant(
        name: &str,
        deadline_s: Option<f64>,
        kill: impl FnOnce() -> anyhow::Result<usize> + Send + 'static,
    ) -> (Option<Watchdog>, Arc<AtomicBool>) {
        let Some(d) = deadline_s else {
            return (None, Arc::new(AtomicBool::new(false)));
        };
        let tenant = name.to_string();
        let w = Watchdog::start(name, Duration::from_secs_f64(d), move || {
            if let Err(e) = kill() {
                tracing::warn!("watchdog of tenant {tenant}: {e:#}");
            }
        });
        let fired = w.fired_flag();
        (Some(w), fired)
    }

    /// Starts a watchdog that calls `on_expiry` once `deadline` has passed.
    pub fn start(
        name: &str,
        deadline: Duration,
        on_expiry: impl FnOnce() + Send + 'static,
    ) -> Watchdog {
        let cancel = Arc::new((Mutex::new(false), Condvar::new()));
        let fired = Arc::new(AtomicBool::new(false));
        let (c, f) = (cancel.clone(), fired.clone());
        let end = Instant::now() + deadline;
        let thread = thread::Builder::new()
            .name(format!("watchdog-{name}"))
            .spawn(move || {
                let (lock, cv) = &*c;
                let mut cancelled = lock.lock().unwrap_or_else(|p| p.into_inner());
                loop {
                    if *cancelled {
                        return;
                    }
                    let now = Instant::now();
                    if now >= end {
                        break;
                    }
                    cancelled = cv
                        .wait_timeout(cancelled, end - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
                drop(cancelled);
                f.store(true, Ordering::SeqCst);
                on_expiry();
            })
            .ok();
        Watchdog {
            cancel,
            fired,
            thread,
        }
    }

    /// Whether the deadline passed (and `on_expiry` was called).
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    /// A flag that turns true when the deadline passes, to keep after the watchdog is gone.
    pub fn fired_flag(&self) -> Arc<AtomicBool> {
        self.fired.clone()
    }

    /// Stops the watchdog without firing (if it has not fired yet) and waits for its thread.
    pub fn cancel(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        {
            let (lock, cv) = &*self.cancel;
            *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
            cv.notify_all();
        }
        if let Some(t) = self.thread.take() {
            // The thread may be the one dropping us (a tenant torn down from on_expiry).
            if t.thread().id() != thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn fires_after_the_deadline() {
        let (tx, rx) = mpsc::channel();
        let w = Watchdog::start("t", Duration::from_millis(10), move || tx.send(()).unwrap());
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(w.fired());
    }

    #[test]
    fn cancel_prevents_firing() {
        let (tx, rx) = mpsc::channel::<()>();
        let w = Watchdog::start("t", Duration::from_secs(3600), move || tx.send(()).unwrap());
        w.cancel();
        assert!(rx.recv_timeout(Duration::from_millis(50)).is_err());
    }
}
