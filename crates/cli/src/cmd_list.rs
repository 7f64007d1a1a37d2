//! `isobench list`: the catalogue, with parameters and whether each workload can run here.

use std::process::ExitCode;

use isobench_workloads::{Env, ParamSpec, PROBES, STRESSORS};
use serde_json::{json, Value};

use crate::args::ListArgs;
use crate::output::{envelope, print_json};

pub fn run(a: &ListArgs) -> anyhow::Result<ExitCode> {
    let env = Env::detect();
    let probes: Vec<Value> = PROBES
        .iter()
        .map(|p| {
            json!({
                "name": p.name(),
                "class": p.class(),
                "help": p.help(),
                "params": params_json(p.params()),
                "metrics": p.metrics(),
                "supported": support_json(p.supported(&env)),
            })
        })
        .collect();
    let stressors: Vec<Value> = STRESSORS
        .iter()
        .map(|s| {
            json!({
                "name": s.name(),
                "class": s.class(),
                "help": s.help(),
                "intensity": s.intensity_knob(),
                "aggressive": s.aggressive(),
                "params": params_json(s.params()),
                "supported": support_json(s.supported(&env)),
            })
        })
        .collect();
    let platforms: Vec<(Value, String)> = isobench_platform::PLATFORMS
        .iter()
        .map(|e| {
            let available = (e.available)();
            let caps = caps_text(&e.caps);
            (
                json!({
                    "name": e.kind.name(),
                    "aliases": e.aliases,
                    "help": e.summary,
                    "capabilities": e.caps,
                    "supported": match &available {
                        Ok(()) => json!({"ok": true}),
                        Err(why) => json!({"ok": false, "reason": why.to_string()}),
                    },
                }),
                format!(
                    "  {:<16} {}\n      {}\n      can: {caps}",
                    e.kind.name(),
                    match &available {
                        Ok(()) => String::new(),
                        Err(why) => format!("[not here: {why}]"),
                    },
                    e.summary,
                ),
            )
        })
        .collect();
    if a.json {
        let mut doc = envelope("list");
        doc.insert(
            "platforms".into(),
            Value::Array(platforms.into_iter().map(|(j, _)| j).collect()),
        );
        doc.insert("probes".into(), Value::Array(probes));
        doc.insert("stressors".into(), Value::Array(stressors));
        print_json(&Value::Object(doc));
        return Ok(ExitCode::SUCCESS);
    }
    println!("PROBES");
    for p in PROBES {
        print_entry(
            p.name(),
            p.class().as_str(),
            p.help(),
            p.params(),
            p.supported(&env),
        );
        let metrics: Vec<String> = p
            .metrics()
            .iter()
            .map(|m| format!("{} [{}]", m.name, m.unit))
            .collect();
        println!("      metrics: {}", metrics.join(", "));
    }
    println!("\nSTRESSORS");
    for s in STRESSORS {
        print_entry(
            s.name(),
            s.class().as_str(),
            s.help(),
            s.params(),
            s.supported(&env),
        );
        println!("      intensity: {}", s.intensity_knob());
    }
    println!("\nPLATFORMS");
    for (_, text) in platforms {
        println!("{}", text.trim_end());
    }
    Ok(ExitCode::SUCCESS)
}

/// What a platform can do, in words.
fn caps_text(c: &isobench_platform::Capabilities) -> String {
    let mut can: Vec<String> = [
        (c.enforces_limits, "enforce limits"),
        (c.contains_aggressors, "contain aggressors"),
        (c.pins_cpus, "pin CPUs"),
        (
            c.chooses_cpus,
            "give tenants CPUs of their own (it chooses which)",
        ),
        (c.freezer, "freeze tenants"),
        (c.live_cpu_limit, "change CPU limits live"),
        (c.own_network, "give tenants their own network"),
        (c.exec, "start extra processes in a tenant"),
        (c.runs_images, "run a tenant from your own image (`image`)"),
    ]
    .iter()
    .filter(|(yes, _)| *yes)
    .map(|(_, w)| w.to_string())
    .collect();
    if can.is_empty() {
        can.push("no isolation".into());
    }
    format!("{}; agent over {}", can.join(", "), c.agent)
}

fn params_json(specs: &[ParamSpec]) -> Value {
    Value::Array(
        specs
            .iter()
            .map(|s| {
                json!({
                    "name": s.name,
                    "help": s.help,
                    "kind": s.kind,
                    "range": s.range_text(),
                    "default": if s.default.is_empty() { "auto" } else { s.default },
                })
            })
            .collect(),
    )
}

fn support_json(r: Result<(), isobench_workloads::Unsupported>) -> Value {
    match r {
        Ok(()) => json!({"ok": true}),
        Err(e) => json!({"ok": false, "reason": e.reason}),
    }
}

fn print_entry(
    name: &str,
    class: &str,
    help: &str,
    params: &[ParamSpec],
    supported: Result<(), isobench_workloads::Unsupported>,
) {
    let status = match supported {
        Ok(()) => String::new(),
        Err(e) => format!("  [not here: {}]", e.reason),
    };
    println!("  {name:<16} {class:<8}{status}");
    println!("      {}", wrap(help, 88, "      "));
    for p in params {
        let d = if p.default.is_empty() {
            "auto"
        } else {
            p.default
        };
        println!(
            "      --set {}=<{}> (default {d}): {}",
            p.name,
            p.range_text(),
            p.help
        );
    }
}

fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = 0;
    for w in text.split_whitespace() {
        if line > 0 && line + w.len() + 1 > width {
            out.push('\n');
            out.push_str(indent);
            line = 0;
        } else if line > 0 {
            out.push(' ');
            line += 1;
        }
        out.push_str(w);
        line += w.len();
    }
    out
}

/// A preset's time budget, read from the scenario itself (`repetitions.max_time`), so the
/// bound `presets` prints is the one the run obeys.
fn preset_budget(name: &str, text: &str) -> Option<String> {
    use isobench_experiment::scenario::{fmt_duration, Scenario};
    use isobench_experiment::source::Source;
    let scenario = Scenario::parse(Source::new(format!("<builtin:{name}>"), text)).ok()?;
    let max = scenario.repetitions.max_time?;
    Some(format!(
        "no round starts that would end after {} (`run --max-time` changes it); the run then \
         stops, its results stored",
        fmt_duration(max)
    ))
}

/// `isobench presets`: every built-in preset with its one line, what it reproduces and how
/// long it takes here, as its header says.
pub fn presets() -> anyhow::Result<ExitCode> {
    use isobench_experiment::scenario::{preset_header, PRESETS};
    let width = PRESETS.iter().map(|p| p.0.len()).max().unwrap_or(0);
    for (name, what, text) in PRESETS {
        println!("{name:<width$}  {what}");
        let (reproduces, takes) = preset_header(text);
        let pad = " ".repeat(width + 2);
        if let Some(r) = reproduces {
            println!("{pad}reproduces: {r}");
        }
        if let Some(t) = takes {
            println!("{pad}takes: {t}");
        }
        if let Some(b) = preset_budget(name, text) {
            println!("{pad}budget: {b}");
        }
    }
    println!("\nrun one with `isobench run --preset NAME`");
    Ok(ExitCode::SUCCESS)
}
