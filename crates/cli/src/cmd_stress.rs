//! `isobench stress NAME`: run one stressor until the duration ends or Ctrl-C.

use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use isobench_workloads::ctx::StressCaps;
use isobench_workloads::{Env, ParamValues, StressCtx};
use serde_json::{json, Value};

use crate::args::StressArgs;
use crate::exit::{bad_input, unsupported};
use crate::output::{envelope, find_stressor, fmt_value, parse_cpu_list, print_json};

/// Caps for aggressive stressors on the unisolated host (`--allow-unsafe-host`).
pub fn host_caps(env: &Env) -> StressCaps {
    StressCaps { max_tasks: Some(64), max_bytes: Some((env.mem_usable / 4).min(1 << 30)) }
}

pub fn run(a: &StressArgs) -> anyhow::Result<ExitCode> {
    let stressor = find_stressor(&a.name)?;
    if a.intensity > 100 {
        return Err(bad_input(format!("--intensity {} is out of range: allowed 0..=100", a.intensity)));
    }
    let params = ParamValues::from_settings(stressor.name(), stressor.params(), &a.set)?;
    let duration = match a.duration {
        Some(d) if !(d > 0.0 && d.is_finite()) => {
            return Err(bad_input(format!("--duration {d} is not a positive number of seconds")))
        }
        d => d.map(Duration::from_secs_f64),
    };
    let mut env = Env::detect();
    if let Some(d) = &a.dir {
        env.workdir = d.clone();
    }
    let mut ctx = StressCtx::new(env, a.intensity);
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
    if stressor.aggressive() {
        if !a.allow_unsafe_host {
            return Err(bad_input(format!(
                "stressor {} can take the whole host down and is refused without a containing \
                 tenant: run it in a cgroup tenant (`--platform cgroup`), or pass \
                 --allow-unsafe-host to run it capped on the host",
                stressor.name()
            )));
        }
        ctx.caps = host_caps(&ctx.env);
    }
    stressor.supported(&ctx.env).map_err(|e| {
        unsupported(format!("stressor {} cannot run here: {}", stressor.name(), e.reason))
    })?;

    let stop = ctx.stop.clone();
    ctrlc::set_handler(move || stop.store(true, Ordering::SeqCst))?;
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
    if !a.json {
        let until = duration.map_or("Ctrl-C".into(), |d| format!("{:.1} s", d.as_secs_f64()));
        eprintln!(
            "isobench: stressor {} at intensity {} ({}) until {until}",
            stressor.name(),
            a.intensity,
            stressor.intensity_knob()
        );
    }
    let report = stressor.run(&ctx, &params)?;
    if a.json {
        let mut doc = envelope("stress");
        doc.insert("workload".into(), json!(stressor.name()));
        doc.insert("class".into(), json!(stressor.class()));
        doc.insert("intensity".into(), json!(a.intensity));
        doc.insert("params".into(), serde_json::to_value(&params)?);
        doc.insert("report".into(), serde_json::to_value(&report)?);
        print_json(&Value::Object(doc));
    } else {
        println!(
            "{}: {} ops/s ({} ops of {} in {:.2} s, {} workers{})",
            stressor.name(),
            fmt_value(report.ops_per_sec),
            report.ops,
            report.op_unit,
            report.elapsed_s,
            report.workers,
            if report.bytes > 0 {
                format!(", {:.1} MB/s", report.bytes as f64 / report.elapsed_s.max(1e-9) / 1e6)
            } else {
                String::new()
            }
        );
        for n in &report.notes {
            println!("  note: {n}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
