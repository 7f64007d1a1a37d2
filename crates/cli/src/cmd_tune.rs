//! `isobench tune`: runs a `kind = "tune"` scenario (a file, a preset, `tune-cpu` without
//! either), with the victim's probe, the SLO, the stressors and the knobs its flags give
//! written into the scenario first, so the run stores the scenario it ran.

use std::process::ExitCode;

use anyhow::Result;
use isobench_experiment::scenario::{preset, PRESETS};
use toml::{Table, Value};

use crate::args::TuneArgs;
use crate::exit::bad_input;

/// The preset a tune without a file or a preset starts from.
const DEFAULT_PRESET: &str = "tune-cpu";

/// `isobench tune`.
pub fn tune(mut a: TuneArgs) -> Result<ExitCode> {
    if a.run.resume.is_none() {
        let (name, text) = base(&a)?;
        let mut doc: Table = text
            .parse()
            .map_err(|e| bad_input(format!("{name}: not TOML: {e}")))?;
        if doc.get("kind").and_then(Value::as_str) != Some("tune") {
            return Err(bad_input(format!(
                "{name}: kind is not \"tune\"; `isobench tune` runs tune scenarios (write \
                 kind = \"tune\" with a [tune] table, see examples/tune-cpu.toml), and \
                 `isobench run` every other kind"
            )));
        }
        let changed = apply_flags(&a, &mut doc)?;
        let text = if changed {
            toml::to_string(&doc).map_err(|e| bad_input(format!("{name}: {e}")))?
        } else {
            text
        };
        let name = if changed {
            format!("{name} with the tune flags")
        } else {
            name
        };
        a.run.scenario_text = Some((name, text));
    }
    crate::cmd_run::run(&a.run)
}

/// The scenario the flags change: the file, the preset, or [`DEFAULT_PRESET`].
fn base(a: &TuneArgs) -> Result<(String, String)> {
    if let Some(p) = &a.run.scenario {
        let text = std::fs::read_to_string(p)
            .map_err(|e| bad_input(format!("cannot read scenario {}: {e}", p.display())))?;
        return Ok((p.display().to_string(), text));
    }
    let name = a.run.preset.as_deref().unwrap_or(DEFAULT_PRESET);
    let text = preset(name).ok_or_else(|| {
        let names: Vec<&str> = PRESETS.iter().map(|p| p.0).collect();
        bad_input(format!(
            "--preset {name}: no such preset; the presets are {}",
            names.join(", ")
        ))
    })?;
    Ok((format!("<builtin:{name}>"), text.to_string()))
}

/// Writes the flags into the scenario; whether any was given.
fn apply_flags(a: &TuneArgs, doc: &mut Table) -> Result<bool> {
    let mut changed = false;
    let tune = doc
        .entry("tune")
        .or_insert_with(|| Value::Table(Table::new()))
        .as_table_mut()
        .ok_or_else(|| bad_input("the scenario's `tune` is not a table"))?;
    if let Some(p) = &a.probe {
        tune.insert("probe".into(), Value::String(p.clone()));
        changed = true;
    }
    if let Some(slo) = &a.slo {
        let (metric, key, bound) = parse_slo(slo)?;
        for k in ["slo_max", "slo_min", "slo_loss"] {
            tune.remove(k);
        }
        tune.insert("metric".into(), Value::String(metric));
        tune.insert(key.into(), Value::Float(bound));
        changed = true;
    }
    if let Some(r) = a.resolution {
        tune.insert("resolution".into(), Value::Float(r));
        changed = true;
    }
    if !a.knob.is_empty() {
        let knobs = a
            .knob
            .iter()
            .map(|k| parse_knob(k).map(Value::Table))
            .collect::<Result<Vec<_>>>()?;
        tune.insert("knob".into(), Value::Array(knobs));
        changed = true;
    }
    if let Some(p) = &a.probe {
        let mut t = Table::new();
        t.insert("name".into(), Value::String(p.clone()));
        doc.insert("probe".into(), Value::Array(vec![Value::Table(t)]));
    }
    if !a.stressor.is_empty() {
        let list = a
            .stressor
            .iter()
            .map(|s| {
                let mut t = Table::new();
                t.insert("name".into(), Value::String(s.clone()));
                t.insert("intensity".into(), Value::Integer(100));
                Value::Table(t)
            })
            .collect();
        doc.insert("stressor".into(), Value::Array(list));
        changed = true;
    }
    Ok(changed)
}

/// `--slo`: the metric, the `[tune]` key of the bound, and the bound.
fn parse_slo(s: &str) -> Result<(String, &'static str, f64)> {
    let bad = || {
        bad_input(format!(
            "--slo {s}: write METRIC<=BOUND (lat_p99_ms<=10), METRIC>=BOUND (rate_rps>=500) \
             or METRIC loss<=PCT (ops_per_sec loss<=5)"
        ))
    };
    let number = |t: &str| {
        t.trim()
            .trim_end_matches('%')
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x > 0.0)
    };
    if let Some((left, right)) = s.split_once("<=") {
        let left = left.trim();
        let bound = number(right).ok_or_else(bad)?;
        if let Some(metric) = left.strip_suffix("loss") {
            let metric = metric.trim();
            if metric.is_empty() {
                return Err(bad());
            }
            return Ok((metric.to_string(), "slo_loss", bound));
        }
        if left.is_empty() || left.contains(' ') {
            return Err(bad());
        }
        return Ok((left.to_string(), "slo_max", bound));
    }
    if let Some((left, right)) = s.split_once(">=") {
        let left = left.trim();
        if left.is_empty() || left.contains(' ') {
            return Err(bad());
        }
        return Ok((left.to_string(), "slo_min", number(right).ok_or_else(bad)?));
    }
    Err(bad())
}

/// `--knob TENANT.KEY=A..B` as a `[[tune.knob]]` table.
fn parse_knob(s: &str) -> Result<Table> {
    let bad = || {
        bad_input(format!(
            "--knob {s}: write TENANT.KEY=A..B, e.g. batch.cpus=0.05..1 or \
             batch.io_write_bps=1M..200M"
        ))
    };
    let (name, range) = s.split_once('=').ok_or_else(bad)?;
    let (tenant, key) = name.split_once('.').ok_or_else(bad)?;
    let (a, b) = range.split_once("..").ok_or_else(bad)?;
    if [tenant, key, a, b].iter().any(|x| x.trim().is_empty()) {
        return Err(bad());
    }
    let mut t = Table::new();
    t.insert("tenant".into(), Value::String(tenant.trim().into()));
    t.insert("key".into(), Value::String(key.trim().into()));
    t.insert(
        "range".into(),
        Value::Array(vec![
            Value::String(a.trim().into()),
            Value::String(b.trim().into()),
        ]),
    );
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slos_read_as_their_bound() {
        assert_eq!(
            parse_slo("lat_p99_ms<=10").unwrap(),
            ("lat_p99_ms".into(), "slo_max", 10.0)
        );
        assert_eq!(
            parse_slo("rate_rps >= 500").unwrap(),
            ("rate_rps".into(), "slo_min", 500.0)
        );
        assert_eq!(
            parse_slo("ops_per_sec loss<=5%").unwrap(),
            ("ops_per_sec".into(), "slo_loss", 5.0)
        );
        for bad in ["p99", "loss<=5", "x<=-1", "a b<=3", "<=4"] {
            assert!(parse_slo(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn knobs_read_as_tables() {
        let t = parse_knob("batch.io_write_bps=1M..200M").unwrap();
        assert_eq!(t["tenant"].as_str(), Some("batch"));
        assert_eq!(t["key"].as_str(), Some("io_write_bps"));
        assert_eq!(t["range"].as_array().unwrap().len(), 2);
        for bad in [
            "batch.cpus",
            "cpus=0.1..1",
            "batch.cpus=0.1",
            "batch.cpus=..1",
        ] {
            assert!(parse_knob(bad).is_err(), "{bad}");
        }
    }
}
