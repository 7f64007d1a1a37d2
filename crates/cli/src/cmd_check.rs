//! `isobench check memory-low|memory-min`: the kernel's own cgroup selftest of memory
//! protection, reproduced with isobench's cgroups, each figure printed beside the kernel's
//! expected one (the platform's `memprot` module does the work).

use std::process::ExitCode;

use isobench_platform::memprot::{self, Helper, Protection};
use isobench_platform::{run, RunGuard};
use serde_json::Value;

use crate::args::{CheckArgs, CheckWhat, MemprotHelperArgs, MemprotJob};
use crate::exit;
use crate::output::{envelope, print_json};

const MIB: f64 = (1u64 << 20) as f64;

pub fn run(a: &CheckArgs) -> anyhow::Result<ExitCode> {
    let protection = match a.what {
        CheckWhat::MemoryLow => Protection::Low,
        CheckWhat::MemoryMin => Protection::Min,
    };
    let guard = RunGuard::start()?;
    let helper = Helper {
        program: std::env::current_exe()?,
        args: vec!["memprot-helper".into()],
    };
    let dir = run::default_workdir_root();
    let outcome = memprot::check(&guard.context(), protection, &helper, &dir);
    let swept = guard.finish();
    if !swept.failed.is_empty() {
        tracing::warn!("could not remove: {}", swept.to_string().trim());
    }
    let outcome = outcome.map_err(|e| exit::unsupported(format!("{e:#}")))?;
    if a.json {
        let mut doc = envelope("check");
        doc.insert("check".into(), serde_json::to_value(&outcome)?);
        print_json(&Value::Object(doc));
    } else {
        println!(
            "{} protection, as the kernel's selftest checks it ({})",
            protection.file(),
            outcome.reference
        );
        println!("hierarchy under {}", outcome.parent.display());
        println!(
            "A/B held {:.1} MiB before the pressure; {}",
            outcome.before_pressure_bytes as f64 / MIB,
            outcome.pressure
        );
        println!(
            "{:<7} {:>10} {:>8} {:>12} {:>12} {:>9} {:>5} {:>4}  {}",
            "cgroup",
            protection.file(),
            "filled",
            "measured",
            "expected",
            "tolerance",
            "low",
            "oom",
            "verdict"
        );
        for r in &outcome.rows {
            let (expected, tolerance) = match (r.expected_bytes, r.tolerance_percent) {
                (Some(e), Some(0)) => (format!("{:.1} MiB", e as f64 / MIB), "exact".to_string()),
                (Some(e), Some(t)) => (format!("{:.1} MiB", e as f64 / MIB), format!("{t}%")),
                (Some(e), None) => (format!("~{:.0} MiB", e as f64 / MIB), "unchecked".into()),
                (None, _) => ("-".into(), "-".into()),
            };
            let verdict = match r.within {
                Some(true) => "ok",
                Some(false) => "OUTSIDE",
                None => "-",
            };
            let n = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
            println!(
                "{:<7} {:>6} MiB {:>4} MiB {:>8.1} MiB {:>12} {:>9} {:>5} {:>4}  {verdict}",
                r.cgroup,
                r.protection_bytes >> 20,
                r.filled_bytes >> 20,
                r.measured_bytes as f64 / MIB,
                expected,
                tolerance,
                n(r.low_events),
                n(r.oom_events),
            );
        }
        println!(
            "{}",
            if outcome.passed {
                "every checked figure is within the kernel test's tolerance"
            } else {
                "some figures are outside the kernel test's tolerance"
            }
        );
    }
    Ok(if outcome.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(exit::FAILURE)
    })
}

/// The check's helper processes, started inside their cgroups.
pub fn helper(a: &MemprotHelperArgs) -> anyhow::Result<ExitCode> {
    match &a.job {
        MemprotJob::FillPagecache { bytes, dir, cgroup } => {
            let _cache = memprot::fill_pagecache(*bytes, dir, cgroup)?;
            use std::io::Write as _;
            println!("ready");
            std::io::stdout().flush()?;
            loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
        }
        MemprotJob::AllocAnon { bytes, cgroup } => memprot::alloc_anon(*bytes, cgroup)?,
    }
    Ok(ExitCode::SUCCESS)
}
