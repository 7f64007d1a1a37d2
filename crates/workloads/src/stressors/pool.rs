//! The one run loop every thread-based stressor shares.
//!
//! Workers set themselves up (pin, allocate, open files, bind sockets), wait at a start gate,
//! then loop `while ctx.running() { work(); ctx.add_ops(n) }` until the stop flag is set or
//! any worker fails. Wall time runs from the gate opening to the moment the last worker left
//! its loop, so neither setup nor cleanup (freeing memory, closing files) counts as work time. A worker that fails (or panics) stops all the others and
//! the pool returns its error, after every thread has been joined: nothing is left running.
//!
//! Stressors whose intensity is a share of CPU time use [`cpu_share`] for their shape, and
//! the pool enforces the duty cycle: a worker busy for `duty` of each period sleeps for the
//! rest, the sleep sized from the busy time actually spent so overshoot does not skew it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::timer::now_ns;
use crate::util::pin_to_cpu;
use crate::{Pressure, StressCtx, StressReport};

/// What one call of a worker's work function did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Done {
    /// Operations completed.
    pub ops: u64,
    /// Bytes moved.
    pub bytes: u64,
}

impl Done {
    /// Nothing done (a paced worker waiting, a receive that timed out).
    pub const NOTHING: Done = Done { ops: 0, bytes: 0 };

    /// `ops` operations moving `bytes` bytes.
    pub fn new(ops: u64, bytes: u64) -> Self {
        Done { ops, bytes }
    }
}

/// How many workers, and the share of each duty period they are busy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Shape {
    /// Worker threads.
    pub workers: u32,
    /// Busy share of each period, `0 < duty <= 1`.
    pub duty: f64,
}

impl Shape {
    /// `workers` threads, always busy.
    pub fn busy(workers: u32) -> Self {
        Shape { workers, duty: 1.0 }
    }
}

/// Length of one duty-cycle period. Short enough that a half-duty worker looks like a
/// steady half load to a victim's timed region, long enough that a sleep is never shorter
/// than the scheduler's wake-up granularity.
const DUTY_PERIOD_NS: u64 = 20_000_000;

/// Threads [`cpu_share`] starts at `intensity` on `cpus` CPUs, as a planner estimates it
/// before the run: `threads` when given, else `ceil(cpus * intensity / 100)`; at least one.
pub(crate) fn planned_workers(threads: Option<u32>, cpus: usize, intensity: u8) -> u64 {
    threads
        .map_or_else(
            || (cpus.max(1) as u64 * u64::from(intensity)).div_ceil(100),
            u64::from,
        )
        .max(1)
}

/// The shape that asks for `intensity`% of the CPUs the stressor may use (its pin list, or
/// its affinity mask): `ceil(cpus * intensity / 100)` threads, each busy for the share that
/// makes the total exactly `cpus * intensity / 100` CPUs. On 2 CPUs: 25 -> one thread at
/// 50%, 50 -> one thread flat out, 75 -> two threads at 75%, 100 -> two threads flat out.
///
/// `threads` overrides the thread count (each thread then busy `intensity`% of the time);
/// `duty_pct` overrides the busy share. Intensity 0 gives zero workers.
pub(crate) fn cpu_share(ctx: &StressCtx, threads: Option<u32>, duty_pct: Option<u32>) -> Shape {
    if ctx.intensity == 0 {
        return Shape {
            workers: 0,
            duty: 1.0,
        };
    }
    let cpus = allowed_cpus(ctx) as f64;
    let demand = cpus * f64::from(ctx.intensity) / 100.0;
    let (workers, duty) = match threads {
        Some(t) => (t.max(1), f64::from(ctx.intensity) / 100.0),
        None => {
            let w = demand.ceil().max(1.0);
            (w as u32, demand / w)
        }
    };
    let duty = match duty_pct {
        Some(p) => f64::from(p.clamp(1, 100)) / 100.0,
        None => duty,
    };
    Shape {
        workers,
        duty: duty.clamp(0.01, 1.0),
    }
}

/// CPUs the stressor's workers may run on: the distinct CPUs of its pin list when one is
/// given, else its affinity mask.
pub(crate) fn allowed_cpus(ctx: &StressCtx) -> usize {
    match ctx.pin.as_ref().filter(|p| !p.is_empty()) {
        Some(p) => {
            let mut v = p.clone();
            v.sort_unstable();
            v.dedup();
            v.len()
        }
        None => ctx.env.cpus.len().max(1),
    }
}

/// What the pool did.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Outcome {
    /// Operations over all workers.
    pub ops: u64,
    /// Bytes over all workers.
    pub bytes: u64,
    /// Wall time of the run loop, seconds.
    pub elapsed_s: f64,
    /// Workers that ran.
    pub workers: u32,
    /// CPU time the workers spent in their run loops (user + system), seconds.
    pub cpu_s: f64,
}

impl Outcome {
    /// The outcome of a pool that ran no worker for `elapsed_s` seconds.
    fn idle(elapsed_s: f64) -> Self {
        Outcome {
            ops: 0,
            bytes: 0,
            elapsed_s,
            workers: 0,
            cpu_s: 0.0,
        }
    }

    /// The report for this outcome, with no pressure yet (see [`Outcome::cpu_threads`] and
    /// [`Outcome::bytes_per_sec`]).
    pub fn report(self, op_unit: impl Into<String>, notes: Vec<String>) -> StressReport {
        StressReport {
            ops: self.ops,
            elapsed_s: self.elapsed_s,
            ops_per_sec: rate(self.ops, self.elapsed_s),
            op_unit: op_unit.into(),
            workers: self.workers,
            bytes: self.bytes,
            notes,
            pressure: Vec::new(),
        }
    }

    /// CPUs kept busy: the workers' CPU-seconds per second of wall time.
    pub fn cpu_threads(&self) -> Pressure {
        Pressure::rate("cpu_threads", "CPUs", self.cpu_s, self.elapsed_s)
    }

    /// Bytes moved per second over all workers.
    pub fn bytes_per_sec(&self) -> Pressure {
        Pressure::rate("bytes_per_sec", "B/s", self.bytes as f64, self.elapsed_s)
    }

    /// Operations per second over all workers, as the pressure `name` in `unit`.
    pub fn ops_rate(&self, name: &str, unit: &str) -> Pressure {
        Pressure::rate(name, unit, self.ops as f64, self.elapsed_s)
    }
}

/// CPU time of the calling thread (user + system), nanoseconds.
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills a valid timespec.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `ops / elapsed_s`, 0 when no time passed (never NaN or infinite).
pub(crate) fn rate(ops: u64, elapsed_s: f64) -> f64 {
    if elapsed_s > 0.0 && elapsed_s.is_finite() {
        ops as f64 / elapsed_s
    } else {
        0.0
    }
}

/// Blocks until `ctx` is stopped, checking every 10 ms (an idle stressor).
pub(crate) fn idle_until_stopped(ctx: &StressCtx) -> f64 {
    let t0 = Instant::now();
    while ctx.running() {
        std::thread::sleep(Duration::from_millis(10));
    }
    t0.elapsed().as_secs_f64()
}

/// The report of an idle run (intensity 0).
pub(crate) fn idle_report(ctx: &StressCtx, op_unit: impl Into<String>) -> StressReport {
    Outcome::idle(idle_until_stopped(ctx)).report(op_unit, vec!["intensity 0: idle".into()])
}

/// Start gate: workers arrive after setup, the pool opens it once all have arrived.
struct Gate {
    state: Mutex<(usize, bool)>,
    cv: Condvar,
}

impl Gate {
    fn new() -> Self {
        Gate {
            state: Mutex::new((0, false)),
            cv: Condvar::new(),
        }
    }

    fn arrive_and_wait(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.0 += 1;
        self.cv.notify_all();
        while !s.1 {
            s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn wait_for(&self, n: usize) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while s.0 < n {
            s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn open(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.1 = true;
        self.cv.notify_all();
    }
}

/// Runs `shape.workers` threads (capped by `ctx.caps.max_tasks`) named `isobench-<name>-<i>`.
///
/// Each worker pins itself to `ctx.cpu_for_worker(i)` when pinning was asked for, builds its
/// state with `setup(i)`, waits at the start gate, then calls `work(&mut state)` until the
/// stop flag is set. With zero workers the pool idles until stopped.
pub(crate) fn run_pool<S>(
    ctx: &StressCtx,
    name: &str,
    shape: Shape,
    setup: impl Fn(usize) -> anyhow::Result<S> + Sync,
    work: impl Fn(&mut S) -> anyhow::Result<Done> + Sync,
) -> anyhow::Result<Outcome> {
    let workers = shape.workers.min(ctx.caps.max_tasks.unwrap_or(u32::MAX));
    if workers == 0 {
        return Ok(Outcome::idle(idle_until_stopped(ctx)));
    }
    let duty = if shape.duty.is_finite() {
        shape.duty.clamp(0.01, 1.0)
    } else {
        1.0
    };
    let gate = Gate::new();
    let abort = AtomicBool::new(false);
    let first_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let fail = |e: anyhow::Error| {
        abort.store(true, Ordering::SeqCst);
        let mut slot = first_error.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(e);
        }
    };
    let keep_going = || ctx.running() && !abort.load(Ordering::Relaxed);

    let worker = |i: usize| -> WorkerDone {
        let state = match set_up_worker(ctx, name, i, &setup) {
            Ok(s) => Some(s),
            Err(e) => {
                fail(e);
                None
            }
        };
        gate.arrive_and_wait();
        let Some(mut state) = state else {
            return (0, 0, 0, None);
        };
        let (mut ops, mut bytes) = (0u64, 0u64);
        let cpu0 = thread_cpu_ns();
        let looped = catch_unwind(AssertUnwindSafe(|| -> anyhow::Result<()> {
            let mut period_start = now_ns();
            let busy_ns = (duty * DUTY_PERIOD_NS as f64) as u64;
            while keep_going() {
                let d = work(&mut state)?;
                if d.ops > 0 {
                    ctx.add_ops(d.ops);
                    ops += d.ops;
                }
                bytes += d.bytes;
                if duty < 1.0 {
                    let busy = now_ns().saturating_sub(period_start);
                    if busy >= busy_ns {
                        let rest = (busy as f64 * (1.0 - duty) / duty) as u64;
                        sleep_unless_stopped(Duration::from_nanos(rest), &keep_going);
                        period_start = now_ns();
                    }
                }
            }
            Ok(())
        }));
        let loop_end = Instant::now();
        let cpu_ns = thread_cpu_ns().saturating_sub(cpu0);
        match looped {
            Ok(Ok(())) => {}
            Ok(Err(e)) => fail(e),
            Err(_) => fail(anyhow::anyhow!("{name}: worker {i} panicked")),
        }
        // Dropping the state here (buffers, files, sockets) happens on the worker thread,
        // before the pool returns.
        drop(state);
        (ops, bytes, cpu_ns, Some(loop_end))
    };

    let (t_start, totals) = std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(workers as usize);
        for i in 0..workers as usize {
            let spawned = std::thread::Builder::new()
                .name(format!("isobench-{name}-{i}"))
                .spawn_scoped(scope, move || worker(i));
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    fail(anyhow::Error::new(e).context(format!(
                        "{name}: cannot start worker thread {i} of {workers} (a pids limit?)"
                    )));
                    break;
                }
            }
        }
        gate.wait_for(handles.len());
        let t_start = Instant::now();
        gate.open();
        (t_start, join_workers(handles, t_start, name, &fail))
    });
    let elapsed_s = totals.3.saturating_duration_since(t_start).as_secs_f64();
    if let Some(e) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    Ok(Outcome {
        ops: totals.0,
        bytes: totals.1,
        elapsed_s,
        workers,
        cpu_s: totals.2 as f64 / 1e9,
    })
}

/// What a worker did: operations, bytes, CPU ns of its run loop and when that loop ended
/// (None when its setup failed).
type WorkerDone = (u64, u64, u64, Option<Instant>);

/// A worker's setup: pins it to its CPU when pinning was asked for, then `setup(i)`; a panic
/// is an error.
fn set_up_worker<S>(
    ctx: &StressCtx,
    name: &str,
    i: usize,
    setup: &impl Fn(usize) -> anyhow::Result<S>,
) -> anyhow::Result<S> {
    catch_unwind(AssertUnwindSafe(|| {
        if let Some(cpu) = ctx.cpu_for_worker(i) {
            pin_to_cpu(cpu).with_context(|| format!("{name}: pinning worker {i} to CPU {cpu}"))?;
        }
        setup(i)
    }))
    .unwrap_or_else(|_| Err(anyhow::anyhow!("{name}: worker {i} panicked during setup")))
}

/// Joins the workers: their summed (ops, bytes, CPU ns) and the latest end of a run loop
/// (`t_start` at the least); a panicked thread is reported to `fail`.
fn join_workers(
    handles: Vec<std::thread::ScopedJoinHandle<'_, WorkerDone>>,
    t_start: Instant,
    name: &str,
    fail: &dyn Fn(anyhow::Error),
) -> (u64, u64, u64, Instant) {
    let mut totals = (0u64, 0u64, 0u64, t_start);
    for h in handles {
        match h.join() {
            Ok((o, b, c, end)) => {
                totals.0 += o;
                totals.1 += b;
                totals.2 += c;
                totals.3 = totals.3.max(end.unwrap_or(t_start));
            }
            Err(_) => fail(anyhow::anyhow!("{name}: a worker thread panicked")),
        }
    }
    totals
}

/// Sleeps for `d` in slices of at most 10 ms, returning early once `keep_going` is false.
pub(crate) fn sleep_unless_stopped(d: Duration, keep_going: &dyn Fn() -> bool) {
    let end = Instant::now() + d;
    loop {
        let now = Instant::now();
        if now >= end || !keep_going() {
            return;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(10)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Env;
    use std::sync::Arc;

    fn ctx(intensity: u8, cpus: usize) -> StressCtx {
        let mut env = Env::detect();
        env.cpus = (0..cpus).collect();
        StressCtx::new(env, intensity)
    }

    #[test]
    fn cpu_share_covers_the_asked_share_of_cpus() {
        let s = cpu_share(&ctx(25, 2), None, None);
        assert_eq!((s.workers, s.duty), (1, 0.5));
        let s = cpu_share(&ctx(50, 2), None, None);
        assert_eq!((s.workers, s.duty), (1, 1.0));
        let s = cpu_share(&ctx(75, 2), None, None);
        assert_eq!((s.workers, s.duty), (2, 0.75));
        let s = cpu_share(&ctx(100, 2), None, None);
        assert_eq!((s.workers, s.duty), (2, 1.0));
        assert_eq!(cpu_share(&ctx(0, 2), None, None).workers, 0);
        let s = cpu_share(&ctx(30, 2), Some(4), None);
        assert_eq!((s.workers, s.duty), (4, 0.3));
        let s = cpu_share(&ctx(100, 2), None, Some(40));
        assert_eq!((s.workers, s.duty), (2, 0.4));
    }

    #[test]
    fn pool_errors_stop_everyone_and_are_returned() {
        let c = ctx(100, 2);
        let r = run_pool(&c, "t", Shape::busy(3), Ok, |i| {
            if *i == 1 {
                anyhow::bail!("worker one fails")
            }
            std::thread::sleep(Duration::from_millis(1));
            Ok(Done::new(1, 0))
        });
        assert!(r.unwrap_err().to_string().contains("worker one fails"));
    }

    #[test]
    fn pool_setup_errors_are_returned_without_running() {
        let c = ctx(100, 2);
        let ran = AtomicBool::new(false);
        let r = run_pool(
            &c,
            "t",
            Shape::busy(2),
            |i| if i == 0 { anyhow::bail!("no") } else { Ok(()) },
            |_| {
                ran.store(true, Ordering::SeqCst);
                Ok(Done::NOTHING)
            },
        );
        assert!(r.is_err());
        assert!(!ran.load(Ordering::SeqCst));
    }

    #[test]
    fn pool_counts_and_honours_duty() {
        let c = ctx(100, 2);
        let stop = c.stop.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            stop.store(true, Ordering::SeqCst);
        });
        let busy = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let b = busy.clone();
        let out = run_pool(
            &c,
            "t",
            Shape {
                workers: 1,
                duty: 0.25,
            },
            |_| Ok(()),
            move |_| {
                let t0 = now_ns();
                while now_ns() - t0 < 100_000 {}
                b.fetch_add(now_ns() - t0, Ordering::Relaxed);
                Ok(Done::new(1, 10))
            },
        )
        .unwrap();
        t.join().unwrap();
        assert!(out.ops > 0);
        assert_eq!(out.bytes, out.ops * 10);
        assert_eq!(c.ops(), out.ops);
        let share = busy.load(Ordering::Relaxed) as f64 / 1e9 / out.elapsed_s;
        // Behaviour, not speed: a quarter duty must be far from flat out.
        assert!(share < 0.6, "busy share {share}");
    }
}
