//! Shared by the CPU and memory probes: metric declarations, CPU placement of worker
//! threads, and throughput measurement over one or more threads.
//!
//! Throughput (ops/s, bytes/s) is measured in chunks: a worker does a calibrated amount of
//! work (a chunk of a millisecond or more), notes the time and how many units it has done in
//! total, and repeats until the budget is spent. After a warm-up (the first tenth of the
//! budget), the interval in which every thread was working is cut into about 20 wall-clock
//! windows (each at least two chunks long); a window's rate is the sum over threads of the
//! units done in it, with a chunk that straddles a window edge counted in proportion to its
//! time. The result is the median window rate. Windows are wall-clock on purpose: time a
//! worker spends descheduled (a CPU hog sharing its CPU) is in them, so a tenant that gets
//! half a CPU measures half the rate, as `sysbench` and `mbw` would report it.

use std::sync::Barrier;
use std::time::Duration;

use isobench_common::median;

use super::series::{done_at, latency_series, rate_series, Event, Stat};
use crate::metric::{Aggregate, Direction, Metric, MetricSpec, Window};
use crate::timer::now_ns;
use crate::ProbeCtx;

/// A lower-is-better metric averaged across runs (latencies).
pub(super) const fn lower(name: &'static str, unit: &'static str) -> MetricSpec {
    MetricSpec {
        name,
        unit,
        direction: Direction::Lower,
        aggregate: Aggregate::Mean,
    }
}

/// A higher-is-better rate combined with the harmonic mean (ops/s, GB/s).
pub(super) const fn rate(name: &'static str, unit: &'static str) -> MetricSpec {
    MetricSpec {
        name,
        unit,
        direction: Direction::Higher,
        aggregate: Aggregate::HarmonicMean,
    }
}

/// A fact about the run recorded beside the measurements (sizes used, huge-page share).
/// It does not change between conditions, so its degradation is zero.
pub(super) const fn info(name: &'static str, unit: &'static str) -> MetricSpec {
    MetricSpec {
        name,
        unit,
        direction: Direction::Higher,
        aggregate: Aggregate::Max,
    }
}

/// The CPU each of `n` workers is pinned to: none unless the context asks for pinning; then
/// worker 0 on `ctx.pin`, worker 1 on `ctx.pin_peer` (when set) and the rest round-robin
/// over the allowed CPUs, in that order of preference.
pub(super) fn worker_cpus(ctx: &ProbeCtx, n: usize) -> Vec<Option<usize>> {
    if ctx.pin.is_none() && ctx.pin_peer.is_none() {
        return vec![None; n];
    }
    let mut order: Vec<usize> = ctx.pin.into_iter().chain(ctx.pin_peer).collect();
    for &c in &ctx.env.cpus {
        if !order.contains(&c) {
            order.push(c);
        }
    }
    (0..n).map(|i| Some(order[i % order.len()])).collect()
}

/// A unit of work for [`measure_rate`]: called repeatedly, does one chunk, returns the units
/// it did (operations, events, bytes).
pub(super) type Chunk<'a> = Box<dyn FnMut() -> f64 + Send + 'a>;

/// The outcome of [`measure_rate`].
#[derive(Debug, Clone)]
pub(super) struct Rate {
    /// Units per second, all threads together (median sample).
    pub total: f64,
    /// With a window length ([`ProbeCtx::window`]): units per second, all threads together,
    /// in windows of that length tiling the measured interval (warm-up excluded), with the
    /// same overhead correction as `total`.
    pub series: Option<Vec<Window>>,
}

impl Rate {
    /// The series with every value multiplied by `k` (a unit change), if any.
    pub fn series_scaled(&self, k: f64) -> Option<Vec<Window>> {
        self.series.as_ref().map(|s| {
            s.iter()
                .map(|w| Window {
                    value: w.value * k,
                    ..*w
                })
                .collect()
        })
    }

    /// `spec`'s metric of `total * k`, with the series scaled alike.
    pub fn metric(&self, spec: &MetricSpec, k: f64) -> Metric {
        let m = spec.value(self.total * k);
        match self.series_scaled(k) {
            Some(s) => m.with_series(s),
            None => m,
        }
    }
}

/// Windows a rate probe's median is taken over (fewer when chunks are long).
const RATE_WINDOWS: f64 = 20.0;

/// The share of a rate probe's budget skipped as warm-up (at most half the common interval).
const RATE_WARMUP_SHARE: u32 = 10;

/// The nominal length of the windows whose median a rate probe (cpu-int, cpu-float) reports
/// for a budget: the budget after its warm-up share, in [`RATE_WINDOWS`] windows. A window
/// shorter than a CPU quota's period can fall wholly in a throttled stretch.
pub fn nominal_rate_window(budget: Duration) -> Duration {
    (budget - budget / RATE_WARMUP_SHARE).div_f64(RATE_WINDOWS)
}

/// Runs each chunk function on its own thread (pinned as given) for `budget`, all starting
/// together, and returns the median total rate (and, with `ctx.window`, the window series).
/// Stops early when `ctx.stop` is set (after at least three chunks per thread). Timer
/// overhead is taken out of every chunk's time.
pub(super) fn measure_rate(
    ctx: &ProbeCtx,
    budget: Duration,
    workers: Vec<(Option<usize>, Chunk<'_>)>,
) -> anyhow::Result<Rate> {
    let n = workers.len();
    anyhow::ensure!(n > 0, "no workers");
    let barrier = Barrier::new(n);
    let budget_ns = budget.as_nanos() as u64;
    let logs: Vec<anyhow::Result<Vec<(u64, f64)>>> = std::thread::scope(|s| {
        let handles: Vec<_> = workers
            .into_iter()
            .map(|(cpu, mut chunk)| {
                let barrier = &barrier;
                s.spawn(move || -> anyhow::Result<Vec<(u64, f64)>> {
                    let pinned = cpu.map(crate::util::pin_to_cpu).transpose();
                    barrier.wait();
                    pinned.map_err(|e| anyhow::anyhow!("pinning to cpu {cpu:?}: {e}"))?;
                    let start = now_ns();
                    let deadline = start + budget_ns;
                    let mut log = vec![(start, 0.0)];
                    let mut done = 0.0;
                    loop {
                        done += chunk();
                        let t = now_ns();
                        log.push((t, done));
                        let enough = log.len() > 3;
                        if t >= deadline || (enough && ctx.stopped()) {
                            break;
                        }
                    }
                    Ok(log)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("worker panicked")))
            })
            .collect()
    });
    let logs = logs.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    let window_ns = ctx.window.map(|w| w.as_nanos() as u64);
    rate_from_logs(
        &logs,
        budget_ns / u64::from(RATE_WARMUP_SHARE),
        ctx.timer_overhead_ns,
        window_ns,
    )
}

/// Median rate from per-thread logs of (time ns, cumulative units), and with `window_ns` the
/// series of windows of about that length over the same interval. Pure, for tests.
pub(super) fn rate_from_logs(
    logs: &[Vec<(u64, f64)>],
    warmup_ns: u64,
    overhead_ns: f64,
    window_ns: Option<u64>,
) -> anyhow::Result<Rate> {
    let chunk_ns: Vec<f64> = logs
        .iter()
        .flat_map(|l| l.windows(2).map(|w| (w[1].0 - w[0].0) as f64))
        .collect();
    let med_chunk = median(&chunk_ns);
    anyhow::ensure!(med_chunk > 0.0, "no work was timed");
    let begin = logs.iter().map(|l| l[0].0).max().unwrap_or(0);
    let end = logs.iter().map(|l| l[l.len() - 1].0).min().unwrap_or(0);
    anyhow::ensure!(end > begin, "threads did not overlap in time");
    // Warm-up: skip the first tenth, but keep at least half the common interval.
    let begin = begin + warmup_ns.min((end - begin) / 2);
    let span = (end - begin) as f64;
    let windows = (span / (span / RATE_WINDOWS).max(2.0 * med_chunk)) as usize;
    let windows = windows.clamp(1, 50);
    let width = span / windows as f64;
    let correction = med_chunk / (med_chunk - overhead_ns).max(1.0);
    let samples: Vec<f64> = (0..windows)
        .map(|w| {
            let a = begin as f64 + w as f64 * width;
            let b = a + width;
            let units: f64 = logs.iter().map(|l| done_at(l, b) - done_at(l, a)).sum();
            units / width * 1e9 * correction
        })
        .collect();
    anyhow::ensure!(!samples.is_empty(), "no samples after warm-up");
    Ok(Rate {
        total: median(&samples),
        series: window_ns.map(|w| rate_series(logs, begin, end, w, correction)),
    })
}

/// [`measure_rate`] for `threads` workers that each run passes of a kernel: `new_work()`
/// makes one worker's kernel (and one more, run first to size the chunks to at least
/// `min`); `work(n)` runs `n` passes of `units` units each (operations, events). A chunk
/// calls its worker's `work` directly: the only dynamic call per chunk is the
/// [`Chunk`]'s own, as when each probe built its workers itself.
pub(super) fn measure_passes<'a, W>(
    ctx: &ProbeCtx,
    threads: usize,
    min: Duration,
    units: u64,
    new_work: impl Fn() -> W,
) -> anyhow::Result<Rate>
where
    W: FnMut(u64) + Send + 'a,
{
    let mut calibration = new_work();
    let per_chunk = chunk_size(min, &mut calibration);
    let workers = worker_cpus(ctx, threads)
        .into_iter()
        .map(|cpu| {
            let mut work = new_work();
            let chunk: Chunk<'a> = Box::new(move || {
                work(per_chunk);
                (per_chunk * units) as f64
            });
            (cpu, chunk)
        })
        .collect();
    measure_rate(ctx, ctx.budget, workers)
}

/// Calibrates how many units of `f(units)` make one chunk of at least `min`, with `f` doing
/// the work and returning nothing. One calibration is enough: a chunk that comes out too
/// short only adds timer reads to a window, it does not bias the window's rate.
pub(super) fn chunk_size(min: Duration, f: impl FnMut(u64)) -> u64 {
    crate::timer::calibrate_iterations(min, f).max(1)
}

/// Iterations of `f(iterations)` that last at least `min`: one calibration as warm-up, then
/// the largest of three more. A single calibration can be fooled by one slow first call (a
/// cold cache, a peer process not yet scheduled, a preemption) into batches far too short.
pub(super) fn batch_iters(min: Duration, mut f: impl FnMut(u64)) -> u64 {
    let _ = crate::timer::calibrate_iterations(min, &mut f);
    (0..3)
        .map(|_| crate::timer::calibrate_iterations(min, &mut f))
        .max()
        .unwrap_or(1)
        .max(1)
}

/// Times batches of `iters` iterations of `f` until `budget` is spent (at least `min_count`
/// batches, at most 10,000 unless a window length is set) or the context is stopped;
/// returns ns per iteration of each batch, timer overhead subtracted.
pub(super) fn time_batches(
    ctx: &ProbeCtx,
    iters: u64,
    budget: Duration,
    min_count: usize,
    f: impl FnMut(u64),
) -> Vec<f64> {
    time_batches_at(ctx, iters, budget, min_count, f)
        .into_iter()
        .map(|e| e.value)
        .collect()
}

/// [`time_batches`], with each batch stamped at its midpoint (for window series). With a
/// window length there is no cap on the count, so the batches cover the whole budget.
pub(super) fn time_batches_at(
    ctx: &ProbeCtx,
    iters: u64,
    budget: Duration,
    min_count: usize,
    mut f: impl FnMut(u64),
) -> Vec<Event> {
    let cap = if ctx.window.is_some() {
        usize::MAX
    } else {
        10_000
    };
    let deadline = now_ns() + budget.as_nanos() as u64;
    let mut out = Vec::new();
    while out.len() < cap {
        let t0 = now_ns();
        f(iters);
        let t1 = now_ns();
        let dt = ((t1 - t0) as f64 - ctx.timer_overhead_ns).max(0.0);
        out.push(Event {
            t_ns: t0 + (t1 - t0) / 2,
            value: dt / iters as f64,
        });
        if out.len() >= min_count && (t1 >= deadline || ctx.stopped()) {
            break;
        }
    }
    out
}

/// The median series of batch events over the interval they cover (first batch's midpoint
/// to the last one's), when `ctx.window` is set.
pub(super) fn batch_series(
    ctx: &ProbeCtx,
    events: &[Event],
    f: impl Fn(f64) -> f64,
) -> Option<Vec<Window>> {
    let w = ctx.window?;
    let begin = events.iter().map(|e| e.t_ns).min()?;
    let end = events.iter().map(|e| e.t_ns).max()?;
    let mapped: Vec<Event> = events
        .iter()
        .map(|e| Event {
            t_ns: e.t_ns,
            value: f(e.value),
        })
        .collect();
    latency_series(
        &mapped,
        begin,
        end.max(begin + 1),
        w.as_nanos() as u64,
        Stat::Median,
    )
}

/// Median ns per iteration of `f(iterations)` over batches of at least `min_batch` for
/// `budget` (see [`batch_iters`] and [`time_batches`]).
pub(super) fn per_op_median(
    ctx: &ProbeCtx,
    budget: Duration,
    min_batch: Duration,
    mut f: impl FnMut(u64),
) -> f64 {
    let iters = batch_iters(min_batch, &mut f);
    median(&time_batches(ctx, iters, budget, 5, f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_thread_rate_counts_wall_time() {
        // 100 chunks of 1 ms doing 1000 units each; every 10th chunk is descheduled for 1 ms
        // more, so the thread does 100 units per 1.1 ms of wall time.
        let mut log = vec![(0u64, 0.0)];
        for i in 1..=100u64 {
            let dt = if i % 10 == 0 { 2_000_000 } else { 1_000_000 };
            let t = log.last().unwrap().0 + dt;
            log.push((t, i as f64 * 1000.0));
        }
        let r = rate_from_logs(&[log], 0, 0.0, None).unwrap();
        let want = 1e6 / 1.1;
        assert!((r.total - want).abs() / want < 0.02, "{r:?}");
    }

    #[test]
    fn threads_add_up_over_windows() {
        // Two threads at 1000 units/ms with staggered chunk edges.
        let mk = |offset: u64| {
            let mut log = vec![(offset, 0.0)];
            for i in 1..=100u64 {
                log.push((offset + i * 1_000_000, i as f64 * 1000.0));
            }
            log
        };
        let r = rate_from_logs(&[mk(0), mk(400_000)], 0, 0.0, None).unwrap();
        assert!((r.total - 2e6).abs() / 2e6 < 1e-6, "{r:?}");
    }
}
