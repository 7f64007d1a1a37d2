//! `isobench probe NAME`: run one probe and print its metrics.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use isobench_agent::ProbeOpts;
use isobench_common::median_in_place;
use isobench_experiment::PlatformChoice;
use isobench_platform::Role;
use isobench_workloads::netserve::process::OwnServer;
use isobench_workloads::{Metric, ParamValues, Probe, ProbeCtx};
use serde_json::{json, Value};

use crate::args::ProbeArgs;
use crate::exit::unsupported;
use crate::output::{envelope, find_probe, fmt_value, print_json};

/// One run of the probe: its wall time and metrics.
type ProbeRunResult = (f64, Vec<Metric>);

pub fn run(a: &ProbeArgs) -> anyhow::Result<ExitCode> {
    // Parse and validate everything before measuring anything.
    let probe = find_probe(&a.name)?;
    let params = ParamValues::from_settings(probe.name(), probe.params(), &a.flags.set)?;
    let ctx = probe_ctx(a)?;
    probe.supported(&ctx.env).map_err(|e| {
        unsupported(format!(
            "probe {} cannot run here: {}",
            probe.name(),
            e.reason
        ))
    })?;

    let Some(_slot) = crate::slot::share(a.flags.wait, "a probe")? else {
        return Ok(ExitCode::from(crate::exit::interrupted()));
    };
    // Execute: here, or inside a fresh tenant through its agent.
    let mut tenant_doc = Value::Null;
    // Where each run's own network servers ran (empty through an agent, which does not say).
    let mut servers: Vec<Vec<OwnServer>> = Vec::new();
    let runs = if let Some(platform) = a.tenant.platform {
        let (runs, doc) = run_in_tenant(a, probe, &params, &ctx, platform)?;
        tenant_doc = doc;
        runs
    } else {
        let mut runs = Vec::new();
        for _ in 0..a.repeat.max(1) {
            let t0 = Instant::now();
            let metrics = probe.run(&ctx, &params)?;
            runs.push((t0.elapsed().as_secs_f64(), metrics));
            servers.push(ctx.take_own_servers());
        }
        runs
    };

    // Render.
    if a.flags.json {
        let mut doc = envelope("probe");
        doc.insert("workload".into(), json!(probe.name()));
        doc.insert("class".into(), json!(probe.class()));
        doc.insert("params".into(), serde_json::to_value(&params)?);
        doc.insert(
            "env".into(),
            json!({"cpus": ctx.env.cpus, "mem_usable": ctx.env.mem_usable,
                   "mem_limit": ctx.env.mem_limit, "workdir": ctx.workdir}),
        );
        doc.insert("pin".into(), json!({"cpu": a.pin, "peer": a.pin_peer}));
        doc.insert("timer_overhead_ns".into(), json!(ctx.timer_overhead_ns));
        if !tenant_doc.is_null() {
            doc.insert("tenant".into(), tenant_doc);
        }
        doc.insert("runs".into(), runs_json(&runs, &servers));
        doc.insert(
            "metrics".into(),
            serde_json::to_value(median_metrics(&runs))?,
        );
        print_json(&Value::Object(doc));
    } else {
        print_text(probe.name(), &runs, &servers);
    }
    Ok(ExitCode::SUCCESS)
}

/// The probe's context from the flags, each checked: budget, window, directory, CPUs.
fn probe_ctx(a: &ProbeArgs) -> anyhow::Result<ProbeCtx> {
    if !(a.budget > 0.0 && a.budget.is_finite()) {
        return Err(crate::exit::bad_input(format!(
            "--budget {} is not a positive number of seconds",
            a.budget
        )));
    }
    let mut ctx = ProbeCtx::detect();
    ctx.pin = a.pin;
    ctx.pin_peer = a.pin_peer;
    ctx.budget = Duration::from_secs_f64(a.budget);
    if let Some(ms) = a.window {
        if !(ms.is_finite() && ms > 0.0) {
            return Err(crate::exit::bad_input(format!(
                "--window {ms} is not a positive number of milliseconds"
            )));
        }
        ctx.window = Some(Duration::from_secs_f64(ms / 1e3));
    }
    if let Some(d) = &a.dir {
        ctx.workdir = d.clone();
        ctx.env.workdir = d.clone();
    }
    for cpu in a.pin.iter().chain(a.pin_peer.iter()) {
        if !ctx.env.cpus.contains(cpu) {
            return Err(crate::exit::bad_input(format!(
                "--pin {cpu}: CPU {cpu} is not available to this process (allowed: {:?})",
                ctx.env.cpus
            )));
        }
    }
    Ok(ctx)
}

/// Runs the probe `a.repeat` times inside a fresh tenant on `platform`, through its agent:
/// the runs, and the tenant as recorded.
fn run_in_tenant(
    a: &ProbeArgs,
    probe: &dyn Probe,
    params: &ParamValues,
    ctx: &ProbeCtx,
    platform: PlatformChoice,
) -> anyhow::Result<(Vec<ProbeRunResult>, Value)> {
    let req = crate::tenant::parse_request(platform, a.tenant.limits.as_deref())?;
    let session = crate::tenant::open(&req, "probe", Role::Victim, false, None, None)?;
    let opts = ProbeOpts {
        pin: a.pin,
        pin_peer: a.pin_peer,
        budget: Some(ctx.budget),
        workdir: a.dir.clone(),
        deadline: None,
        window: ctx.window,
    };
    let mut runs = Vec::new();
    for _ in 0..a.repeat.max(1) {
        let r = session.client().run_probe(probe.name(), params, &opts)?;
        runs.push((r.elapsed_s, r.metrics));
    }
    let tenant_doc = json!({
        "platform": req.kind,
        "info": session.tenant().info(),
        "usage": session.tenant().usage().ok(),
    });
    session.close()?;
    Ok((runs, tenant_doc))
}

/// The runs as JSON, each with the own servers it started when it says.
fn runs_json(runs: &[ProbeRunResult], servers: &[Vec<OwnServer>]) -> Value {
    Value::Array(
        runs.iter()
            .enumerate()
            .map(|(i, (el, m))| {
                let mut run = json!({"elapsed_s": el, "metrics": m});
                if let Some(s) = servers.get(i).filter(|s| !s.is_empty()) {
                    run["own_servers"] = json!(s);
                }
                run
            })
            .collect(),
    )
}

/// Prints the median metrics of the runs, with each run's values when there are several.
fn print_text(name: &str, runs: &[ProbeRunResult], servers: &[Vec<OwnServer>]) {
    let shown = median_metrics(runs);
    let title = if runs.len() > 1 {
        format!("{name} (median of {} runs)", runs.len())
    } else {
        name.to_string()
    };
    println!("{title}");
    for s in servers.first().into_iter().flatten() {
        let place = if s.separate_process {
            "a process of its own"
        } else {
            "threads of the probe's process"
        };
        println!(
            "  own {} server on {}: {place} (pid {})",
            s.kind, s.addr, s.pid
        );
    }
    let w = shown.iter().map(|m| m.name.len()).max().unwrap_or(0);
    for m in &shown {
        let better = match m.direction {
            isobench_workloads::Direction::Higher => "higher is better",
            isobench_workloads::Direction::Lower => "lower is better",
        };
        println!(
            "  {:<w$}  {:>14} {:<8} ({better})",
            m.name,
            fmt_value(m.value),
            m.unit
        );
    }
    if runs.len() > 1 {
        for m in &shown {
            let vals: Vec<String> = runs
                .iter()
                .filter_map(|(_, ms)| ms.iter().find(|x| x.name == m.name))
                .map(|x| fmt_value(x.value))
                .collect();
            println!("  {:<w$}  runs: {}", m.name, vals.join(" "));
        }
    }
}

/// One metric list whose values are the median over runs (first run's metadata).
fn median_metrics(runs: &[ProbeRunResult]) -> Vec<Metric> {
    let Some((_, first)) = runs.first() else {
        return Vec::new();
    };
    first
        .iter()
        .map(|m| {
            let mut vals: Vec<f64> = runs
                .iter()
                .filter_map(|(_, ms)| ms.iter().find(|x| x.name == m.name).map(|x| x.value))
                .collect();
            Metric {
                value: median_in_place(&mut vals),
                ..m.clone()
            }
        })
        .collect()
}
