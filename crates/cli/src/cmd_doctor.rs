//! `isobench doctor` and `isobench cleanup`.

use std::process::ExitCode;

use serde_json::{json, Value};

use crate::args::{CleanupArgs, DoctorArgs};
use crate::output::{envelope, print_json};

pub fn doctor(a: &DoctorArgs) -> anyhow::Result<ExitCode> {
    let checks = isobench_platform::doctor();
    if a.json {
        let mut doc = envelope("doctor");
        doc.insert("checks".into(), serde_json::to_value(&checks)?);
        print_json(&Value::Object(doc));
    } else {
        let w = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
        for c in &checks {
            let mark = if c.ok { "ok  " } else { "NO  " };
            println!("{mark}{:<w$}  {}", c.name, c.detail);
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn cleanup(a: &CleanupArgs) -> anyhow::Result<ExitCode> {
    let report = isobench_platform::cleanup(a.all);
    if a.json {
        let mut doc = envelope("cleanup");
        doc.insert("report".into(), json!(report));
        print_json(&Value::Object(doc));
    } else if report.is_empty() {
        println!("nothing to remove");
    } else {
        for r in &report.removed {
            println!("removed {r}");
        }
        for f in &report.failed {
            eprintln!("could not remove {f}");
        }
    }
    Ok(if report.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
