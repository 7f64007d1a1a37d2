//! `isobench stress NAME`: run one stressor until the duration ends or Ctrl-C.

use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use isobench_agent::{Caps, StressOpts};
use isobench_experiment::tenant_agent::{LoneTenant, TenantRequest};
use isobench_platform::sentinel::SentinelReport;
use isobench_platform::{Role, Sentinel, SentinelConfig};
use isobench_workloads::ctx::StressCaps;
use isobench_workloads::{Env, ParamValues, StressCtx, StressReport, Stressor};
use serde_json::{json, Value};

use crate::args::StressArgs;
use crate::exit::{bad_input, unsupported};
use crate::output::{envelope, find_stressor, fmt_value, parse_cpu_list, print_json};

pub fn run(a: &StressArgs) -> anyhow::Result<ExitCode> {
    let stressor = find_stressor(&a.name)?;
    if a.intensity > 100 {
        return Err(bad_input(format!(
            "--intensity {} is out of range: allowed 0..=100",
            a.intensity
        )));
    }
    let params = ParamValues::from_settings(stressor.name(), stressor.params(), &a.flags.set)?;
    let duration = match a.duration {
        Some(d) if !(d > 0.0 && d.is_finite()) => {
            return Err(bad_input(format!(
                "--duration {d} is not a positive number of seconds"
            )))
        }
        d => d.map(Duration::from_secs_f64),
    };
    let mut env = Env::detect();
    if let Some(d) = &a.dir {
        env.workdir = d.clone();
    }
    let mut ctx = StressCtx::new(env, a.intensity);
    ctx.workdir = ctx.env.workdir.clone();
    if let Some(p) = &a.pin {
        let cpus = parse_cpu_list(p)?;
        if let Some(c) = cpus.iter().find(|c| !ctx.env.cpus.contains(c)) {
            return Err(bad_input(format!(
                "--pin {p}: CPU {c} is not available to this process (allowed: {:?})",
                ctx.env.cpus
            )));
        }
        ctx.pin = Some(cpus);
    }
    if let Some(platform) = a.tenant.platform {
        let req = crate::tenant::parse_request(platform, a.tenant.limits.as_deref())?;
        return run_in_tenant(a, stressor, &params, duration, ctx, &req);
    }
    if stressor.aggressive() {
        if !a.allow_unsafe_host {
            return Err(bad_input(format!(
                "stressor {} can take the whole host down and is refused without a containing \
                 tenant: run it in a cgroup tenant (`--platform cgroup`), or pass \
                 --allow-unsafe-host to run it capped on the host",
                stressor.name()
            )));
        }
        ctx.caps = StressCaps::uncontained(ctx.env.mem_usable);
    }
    stressor.supported(&ctx.env).map_err(|e| {
        unsupported(format!(
            "stressor {} cannot run here: {}",
            stressor.name(),
            e.reason
        ))
    })?;

    let Some(_slot) = crate::slot::share(a.flags.wait, "a stressor")? else {
        return Ok(ExitCode::from(crate::exit::interrupted()));
    };
    crate::tenant::install_stop(ctx.stop.clone())?;
    if let Some(d) = duration {
        let stop = ctx.stop.clone();
        std::thread::spawn(move || {
            let t0 = Instant::now();
            while t0.elapsed() < d && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20).min(d));
            }
            stop.store(true, Ordering::SeqCst);
        });
    }
    if !a.flags.json {
        let until = duration.map_or("Ctrl-C".into(), |d| format!("{:.1} s", d.as_secs_f64()));
        eprintln!(
            "isobench: stressor {} at intensity {} ({}) until {until}",
            stressor.name(),
            a.intensity,
            stressor.intensity_knob()
        );
    }
    let report = stressor.run(&ctx, &params)?;
    render(a, stressor, &params, Some(&report), Value::Null)?;
    Ok(ExitCode::SUCCESS)
}

/// The host sentinel's settings for a run in a tenant: the default threshold unless the
/// hidden `--sentinel-threshold` sets one; `--sentinel-drill` checked against the duration.
fn sentinel_plan(
    a: &StressArgs,
    duration: Option<Duration>,
) -> anyhow::Result<(SentinelConfig, Option<Duration>)> {
    let mut config = SentinelConfig::default();
    if let Some(ms) = a.tenant.sentinel_threshold {
        config.threshold = Duration::from_millis(ms);
    }
    let drill = match a.tenant.sentinel_drill {
        None => None,
        Some(s) if !(s >= 0.0 && s.is_finite()) => {
            return Err(bad_input(format!(
                "--sentinel-drill {s} is not a number of seconds (0 or more)"
            )))
        }
        Some(s) => Some(Duration::from_secs_f64(s)),
    };
    if let (Some(d), Some(end)) = (drill, duration) {
        if d >= end {
            return Err(bad_input(format!(
                "--sentinel-drill {} comes after the run ends (--duration {}): use a drill \
                 time under the duration",
                d.as_secs_f64(),
                end.as_secs_f64()
            )));
        }
    }
    Ok((config, drill))
}

/// What the sentinel's callback did when it fired: the tenant emptied (processes
/// signalled), or why not.
type KillOutcome = Arc<Mutex<Option<Result<usize, String>>>>;

/// Runs the stressor inside a fresh tenant through its agent, until the duration ends or
/// Ctrl-C; prints the live rate each second.
fn run_in_tenant(
    a: &StressArgs,
    stressor: &dyn Stressor,
    params: &ParamValues,
    duration: Option<Duration>,
    ctx: StressCtx,
    req: &TenantRequest,
) -> anyhow::Result<ExitCode> {
    let aggressive = stressor.aggressive();
    let contains = req.kind.capabilities().contains_aggressors;
    if aggressive && !contains && !a.allow_unsafe_host {
        return Err(bad_input(format!(
            "stressor {} can take the whole host down and the {} platform contains nothing: \
             use `--platform cgroup`, or pass --allow-unsafe-host to run it capped",
            stressor.name(),
            req.kind
        )));
    }
    let (sentinel_config, drill) = sentinel_plan(a, duration)?;
    // The watchdog kills the tenant a little after the planned end, whatever happens here.
    let deadline = duration.map(|d| d + Duration::from_secs(30));
    let Some(_slot) = crate::slot::share(a.flags.wait, "a stressor")? else {
        return Ok(ExitCode::from(crate::exit::interrupted()));
    };
    let session = crate::tenant::open(
        req,
        "stress",
        Role::Aggressor,
        aggressive,
        deadline,
        Some(ctx.stop.clone()),
    )?;
    if !session.filled.is_empty() && !a.flags.json {
        eprintln!(
            "isobench: containment limits filled in for {}: {}",
            stressor.name(),
            session.filled.join(", ")
        );
    }
    let contained = session.tenant().info().limits.pids.is_some() && contains;
    let opts = stress_opts(a, &ctx, aggressive, contained);
    let killed: KillOutcome = Arc::default();
    let sentinel = start_sentinel(&session, sentinel_config, drill.is_some(), &ctx, &killed)?;
    session
        .client()
        .start_stressor("s1", stressor.name(), a.intensity, params, &opts)?;
    if !a.flags.json {
        let until = duration.map_or("Ctrl-C".into(), |d| format!("{:.1} s", d.as_secs_f64()));
        eprintln!(
            "isobench: stressor {} at intensity {} in tenant {} ({}) until {until}",
            stressor.name(),
            a.intensity,
            session.tenant().info().object_name,
            req.kind
        );
    }
    let died = watch(a, &session, &ctx, duration, drill, &sentinel);
    let seen = sentinel.stop();
    let killed = killed.lock().unwrap_or_else(|p| p.into_inner()).take();
    // The stressor's report dies with a tenant the sentinel killed.
    let report = match killed {
        Some(_) => None,
        None => Some(session.client().stop_stressor("s1")),
    };
    let usage = session.tenant().usage().ok();
    let tenant_doc = json!({
        "platform": req.kind,
        "info": session.tenant().info(),
        "filled_limits": session.filled,
        "usage": usage,
        "stressor_exit": died,
    });
    let mut sentinel_doc = serde_json::to_value(seen)?;
    sentinel_doc["drill_after_s"] = json!(drill.map(|d| d.as_secs_f64()));
    sentinel_doc["killed_tenant"] = json!(matches!(killed, Some(Ok(_))));
    sentinel_doc["kill_error"] = json!(killed.as_ref().and_then(|k| k.as_ref().err()));
    session.close()?;
    let report = report.transpose()?;
    let extra = json!({ "tenant": tenant_doc, "sentinel": sentinel_doc });
    render(a, stressor, params, report.as_ref(), extra)?;
    if let Some(k) = &killed {
        return sentinel_verdict(a, stressor, k, drill, &seen);
    }
    if !a.flags.json {
        print_tenant_end(usage.as_ref(), &seen);
    }
    Ok(ExitCode::SUCCESS)
}

/// What the agent is asked to run the stressor with: capped unless its tenant contains it.
fn stress_opts(a: &StressArgs, ctx: &StressCtx, aggressive: bool, contained: bool) -> StressOpts {
    StressOpts {
        pin: ctx.pin.clone(),
        caps: if contained || !aggressive {
            Caps::default()
        } else {
            let c = StressCaps::uncontained(ctx.env.mem_usable);
            Caps {
                max_tasks: c.max_tasks,
                max_bytes: c.max_bytes,
            }
        },
        contained,
        workdir: a.dir.clone(),
        sample_interval: Some(Duration::from_secs(1)),
    }
}

/// The host sentinel: when even a real-time heartbeat in this process wakes more than a
/// second late, the host has stopped responding and the aggressor tenant is killed (what
/// the kill did goes to `killed`, and the run stops). The kill returns once the tenant is
/// empty, so the sentinel's timing of this callback is its reaction time. `quiet`: a drill,
/// whose firing is not news.
fn start_sentinel(
    session: &LoneTenant,
    config: SentinelConfig,
    quiet: bool,
    ctx: &StressCtx,
    killed: &KillOutcome,
) -> anyhow::Result<Sentinel> {
    let killer = session.tenant().killer();
    let (killed, stop) = (killed.clone(), ctx.stop.clone());
    Sentinel::start(config, move |stall| {
        let mut k = killed.lock().unwrap_or_else(|p| p.into_inner());
        if k.is_none() {
            if !quiet {
                eprintln!(
                    "isobench: host stopped responding (heartbeat {} ms late): killing the \
                     aggressor",
                    stall.late_by.as_millis()
                );
            }
            *k = Some(killer.kill().map_err(|e| format!("{e:#}")));
            stop.store(true, Ordering::SeqCst);
        }
    })
}

/// Shows the stressor's rate each second until the duration ends, Ctrl-C, the tenant's
/// deadline or the stressor's exit (returned); a drill drops the sentinel's threshold to
/// zero at its time.
fn watch(
    a: &StressArgs,
    session: &LoneTenant,
    ctx: &StressCtx,
    duration: Option<Duration>,
    drill: Option<Duration>,
    sentinel: &Sentinel,
) -> Option<isobench_agent::StressorExit> {
    let t0 = Instant::now();
    let mut drill_due = drill;
    while !ctx.stop.load(Ordering::Relaxed) && duration.is_none_or(|d| t0.elapsed() < d) {
        if drill_due.is_some_and(|d| t0.elapsed() >= d) {
            sentinel.set_threshold(Duration::ZERO);
            drill_due = None;
        }
        if let Some(s) = session.client().next_sample(Duration::from_millis(100)) {
            if !a.flags.json {
                eprintln!(
                    "  {:6.1} s  {} ops/s",
                    s.elapsed_s,
                    fmt_value(s.ops_per_sec)
                );
            }
        }
        if let Some(exit) = session.client().take_exits().into_iter().next() {
            return Some(exit);
        }
        if session.tenant().expired() {
            break;
        }
    }
    None
}

/// The end of a run whose sentinel fired: a drill that emptied the tenant succeeds; a real
/// stall, or a tenant that could not be emptied, is an error.
fn sentinel_verdict(
    a: &StressArgs,
    stressor: &dyn Stressor,
    killed: &Result<usize, String>,
    drill: Option<Duration>,
    seen: &SentinelReport,
) -> anyhow::Result<ExitCode> {
    let first = seen.first_stall.map_or(0.0, |f| f.callback_ms);
    match (killed, drill) {
        (Ok(_), Some(_)) => {
            if !a.flags.json {
                println!(
                    "  sentinel drill: the tenant was killed and empty {first:.1} ms after \
                     the stall was detected"
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        (Ok(_), None) => Err(anyhow::anyhow!(
            "the host stopped responding while {} ran (heartbeat {:.0} ms late); the \
             sentinel killed its tenant in {first:.1} ms",
            stressor.name(),
            seen.first_stall.map_or(0.0, |f| f.late_by_ms)
        )),
        (Err(e), _) => Err(anyhow::anyhow!(
            "the sentinel fired while {} ran but could not empty its tenant: {e}; run \
             `isobench cleanup` to remove what is left",
            stressor.name()
        )),
    }
}

/// The tenant's usage and the sentinel's worst lateness, after the stressor's report.
fn print_tenant_end(usage: Option<&isobench_platform::Usage>, seen: &SentinelReport) {
    if let Some(u) = usage {
        let oom = u.oom_kills.unwrap_or(0);
        let hits = u.pids_limit_hits.unwrap_or(0);
        println!(
            "  tenant: cpu {:.2} s, memory peak {} MiB, oom kills {oom}, pids limit hits {hits}",
            u.cpu_time_ns.unwrap_or(0) as f64 / 1e9,
            u.memory_peak.unwrap_or(0) >> 20
        );
    }
    println!(
        "  sentinel: heartbeat at most {:.1} ms late (threshold {:.0} ms)",
        seen.max_lateness_ms, seen.threshold_ms
    );
}

/// Prints the stressor's report (none when the sentinel killed its tenant) with `extra`
/// top-level JSON fields (the tenant, the sentinel).
fn render(
    a: &StressArgs,
    stressor: &dyn Stressor,
    params: &ParamValues,
    report: Option<&StressReport>,
    extra: Value,
) -> anyhow::Result<()> {
    if a.flags.json {
        let mut doc = envelope("stress");
        doc.insert("workload".into(), json!(stressor.name()));
        doc.insert("class".into(), json!(stressor.class()));
        doc.insert("intensity".into(), json!(a.intensity));
        doc.insert("params".into(), serde_json::to_value(params)?);
        doc.insert("report".into(), serde_json::to_value(report)?);
        if let Value::Object(m) = extra {
            doc.extend(m);
        }
        print_json(&Value::Object(doc));
        return Ok(());
    }
    let Some(report) = report else {
        return Ok(());
    };
    println!(
        "{}: {} ops/s ({} ops of {} in {:.2} s, {} workers{})",
        stressor.name(),
        fmt_value(report.ops_per_sec),
        report.ops,
        report.op_unit,
        report.elapsed_s,
        report.workers,
        if report.bytes > 0 {
            format!(
                ", {:.1} MB/s",
                report.bytes as f64 / report.elapsed_s.max(1e-9) / 1e6
            )
        } else {
            String::new()
        }
    );
    for n in &report.notes {
        println!("  note: {n}");
    }
    Ok(())
}
