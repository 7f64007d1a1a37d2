//! How long freezing a busy tenant takes when the host's CPUs are saturated.
//!
//! The on/off design freezes and thaws the aggressor tenant every half period; a freeze that
//! does not finish in time fails the trial. This bench reproduces the worst case seen in
//! practice: a cgroup tenant running the `forkbomb` and `cpu` stressors (every process
//! runnable, new children all the time) while busy loops outside the tenant keep every CPU
//! saturated. It freezes and thaws the tenant `--freezes` times through
//! `Tenant::set_frozen` and prints the distribution of the freeze times, and how much of them
//! this (the controlling) thread spent waiting for a CPU (from its schedstat). `--raw` adds
//! one line per cycle: index, freeze ms, ok/failed, its CPU wait, thaw ms, its CPU wait.
//!
//! Run as root on a host with cgroups (take the machine's measurement lock):
//!
//! ```text
//! cargo build -p isobench-platform --example freeze_latency
//! flock -x /tmp/isobench-measure.lock target/debug/examples/freeze_latency --freezes 200
//! ```

use std::process::{Child, Command, ExitCode, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use isobench_platform::{platform, PlatformKind, PlatformOptions, Role, RunGuard, TenantSpec};
use isobench_workloads::{Env, ParamValues, StressCtx};

/// Set in the processes this bench starts, to the role they play.
const MODE_ENV: &str = "ISOBENCH_FREEZE_BENCH";

struct Opts {
    freezes: usize,
    hogs: usize,
    thawed: Duration,
    frozen: Duration,
    limits: String,
    raw: bool,
}

fn parse_args() -> Result<Opts> {
    let mut o = Opts {
        freezes: 200,
        hogs: thread::available_parallelism().map_or(2, |n| n.get()),
        thawed: Duration::from_millis(100),
        frozen: Duration::from_millis(20),
        limits: "pids=512".into(),
        raw: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--freezes" => o.freezes = val()?.parse()?,
            "--hogs" => o.hogs = val()?.parse()?,
            "--thawed-ms" => o.thawed = Duration::from_millis(val()?.parse()?),
            "--frozen-ms" => o.frozen = Duration::from_millis(val()?.parse()?),
            "--limits" => o.limits = val()?,
            "--raw" => o.raw = true,
            _ => bail!(
                "unknown argument {a}; usage: freeze_latency [--freezes N] [--hogs N] \
                 [--thawed-ms MS] [--frozen-ms MS] [--limits pids=512] [--raw]"
            ),
        }
    }
    Ok(o)
}

/// The aggressor: the fork bomb and the CPU hog of the stressor catalogue, until killed.
fn aggressor() -> ! {
    let run = |name: &'static str| {
        thread::spawn(move || {
            let s = isobench_workloads::stressor(name).expect("registered stressor");
            let params =
                ParamValues::from_settings::<&str>(s.name(), s.params(), &[]).expect("defaults");
            let ctx = StressCtx::new(Env::detect(), 100);
            if let Err(e) = s.run(&ctx, &params) {
                eprintln!("freeze_latency: stressor {name}: {e:#}");
            }
        })
    };
    let _bomb = run("forkbomb");
    let _cpu = run("cpu");
    loop {
        thread::sleep(Duration::from_secs(1));
    }
}

/// A busy loop outside the tenant.
fn hog() -> ! {
    let mut x: u64 = 1;
    loop {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

/// Children killed and reaped on drop.
struct Hogs(Vec<Child>);

impl Drop for Hogs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn self_cmd(mode: &str) -> Result<Command> {
    let mut c = Command::new(std::env::current_exe()?);
    c.env(MODE_ENV, mode)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    Ok(c)
}

/// Nanoseconds this thread has waited for a CPU while runnable (field 2 of
/// `/proc/thread-self/schedstat`), 0 where the kernel has no schedstat.
fn run_delay_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|t| t.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() -> ExitCode {
    match std::env::var(MODE_ENV).as_deref() {
        Ok("aggressor") => aggressor(),
        Ok("hog") => hog(),
        _ => {}
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("freeze_latency: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let o = parse_args()?;
    let guard = RunGuard::start()?;
    let mut p = platform(PlatformKind::CGROUP, PlatformOptions::new(guard.context()))?;
    let t = p.create_tenant(
        &TenantSpec::new("frozen", Role::Aggressor).with_limits(o.limits.parse()?),
    )?;
    let mut agg = t.spawn(self_cmd("aggressor")?)?;
    let hogs = Hogs(
        (0..o.hogs)
            .map(|_| self_cmd("hog").and_then(|mut c| Ok(c.spawn()?)))
            .collect::<Result<_>>()?,
    );
    // Let the bomb fill its population limit first.
    thread::sleep(Duration::from_secs(2));

    let mut ok_ms = Vec::new();
    let mut failures = Vec::new();
    let mut thaw_failures = 0;
    let mut thaw_max: f64 = 0.0;
    let mut cpu_wait_ms = Vec::new();
    let t_all = Instant::now();
    for i in 0..o.freezes {
        thread::sleep(o.thawed);
        let t0 = Instant::now();
        let d0 = run_delay_ns();
        let r = t.set_frozen(true);
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        let waited_ms = run_delay_ns().saturating_sub(d0) as f64 / 1e6;
        cpu_wait_ms.push(waited_ms);
        let ok = r.is_ok();
        match r {
            Ok(()) => {
                ok_ms.push(ms);
                thread::sleep(o.frozen);
            }
            Err(e) => failures.push((ms, format!("{e:#}"))),
        }
        // Thaw after a failed freeze too, as the orchestrator does.
        let t1 = Instant::now();
        let d1 = run_delay_ns();
        if t.set_frozen(false).is_err() {
            thaw_failures += 1;
        }
        let thaw_ms = t1.elapsed().as_secs_f64() * 1e3;
        let thaw_wait_ms = run_delay_ns().saturating_sub(d1) as f64 / 1e6;
        thaw_max = thaw_max.max(thaw_ms);
        if o.raw {
            let what = if ok { "ok" } else { "failed" };
            println!("{i}\t{ms:.3}\t{what}\tcpu-wait {waited_ms:.3}\tthaw {thaw_ms:.3}\tcpu-wait {thaw_wait_ms:.3}");
        }
    }
    let wall = t_all.elapsed();
    drop(hogs);
    let _ = t.teardown();
    let _ = agg.wait();
    drop(p);
    let _ = guard.finish();

    let mut all: Vec<f64> = ok_ms
        .iter()
        .copied()
        .chain(failures.iter().map(|f| f.0))
        .collect();
    all.sort_by(f64::total_cmp);
    println!(
        "freezes {}  hogs {}  limits {}  wall {:.1} s",
        o.freezes,
        o.hogs,
        o.limits,
        wall.as_secs_f64()
    );
    println!(
        "freeze time (ms, failures included at the time they gave up): median {:.1}  p90 {:.1}  \
         p99 {:.1}  max {:.1}",
        percentile(&all, 50.0),
        percentile(&all, 90.0),
        percentile(&all, 99.0),
        all.last().copied().unwrap_or(f64::NAN)
    );
    let wait_total: f64 = cpu_wait_ms.iter().sum();
    cpu_wait_ms.sort_by(f64::total_cmp);
    println!(
        "of which this thread waited for a CPU: median {:.1}  max {:.1}  total {:.0}% of the \
         freeze time",
        percentile(&cpu_wait_ms, 50.0),
        cpu_wait_ms.last().copied().unwrap_or(f64::NAN),
        100.0 * wait_total / all.iter().sum::<f64>()
    );
    println!(
        "failed freezes {} of {}  failed thaws {}  slowest thaw {:.1} ms",
        failures.len(),
        o.freezes,
        thaw_failures,
        thaw_max
    );
    for (ms, e) in failures.iter().take(3) {
        println!("  after {ms:.0} ms: {e}");
    }
    Ok(())
}
