//! `isobench doctor` and `isobench cleanup`: what this host can do, and removing what
//! killed runs left (their objects on the host, their `running` status in the database).

use std::process::ExitCode;

use isobench_experiment::orphans;
use serde_json::{json, Value};

use crate::args::{CleanupArgs, DoctorArgs};
use crate::output::{envelope, print_json};
use crate::stores::mark_orphans_of;

pub fn doctor(a: &DoctorArgs) -> anyhow::Result<ExitCode> {
    let mut checks = isobench_platform::doctor();
    // The Kubernetes cluster, when a kubeconfig is found (KUBECONFIG, else scripts/k8s-up's),
    // or why none is usable.
    checks.extend(isobench_platform::k8s::cluster::report(None));
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
    let db = &a.db.path;
    let orphans = mark_orphans_of(db)?;
    if a.json {
        let mut doc = envelope("cleanup");
        doc.insert("report".into(), json!(report));
        let marked: Vec<Value> = orphans
            .iter()
            .map(|o| {
                json!({
                    "run": o.run.as_str(),
                    "pid": o.pid,
                    "resume": orphans::resume_command(&o.run, db),
                })
            })
            .collect();
        doc.insert("interrupted".into(), Value::Array(marked));
        print_json(&Value::Object(doc));
    } else {
        if report.is_empty() && orphans.is_empty() {
            println!("nothing to remove");
        }
        for r in &report.removed {
            println!("removed {r}");
        }
        for f in &report.failed {
            eprintln!("could not remove {f}");
        }
        for o in &orphans {
            println!(
                "{o}; resume it with `{}`",
                orphans::resume_command(&o.run, db)
            );
        }
    }
    Ok(if report.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
