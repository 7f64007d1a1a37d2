//! `isobench tune`: runs a `kind = "tune"` scenario (a file, a preset, `tune-cpu` without
//! either), with the victim's probe, the SLO, the stressors and the knobs its flags give
//! written into the scenario first, so the run stores the scenario it ran.

use std::process::ExitCode;

use anyhow::Result;
use isobench_experiment::kinds::tune::compose::{compose, KnobFlag, SloFlag, TuneFlags};
use isobench_experiment::scenario::{preset, PRESETS};

use crate::args::TuneArgs;
use crate::exit::bad_input;

/// The preset a tune without a file or a preset starts from.
const DEFAULT_PRESET: &str = "tune-cpu";

/// `isobench tune`.
pub fn tune(mut a: TuneArgs) -> Result<ExitCode> {
    if a.run.resume.is_none() {
        let (name, text) = base(&a)?;
        let flags = flags(&a)?;
        let (name, text) =
            match compose(&text, &flags).map_err(|e| bad_input(format!("{name}: {e}")))? {
                Some(text) => (format!("{name} with the tune flags"), text),
                None => (name, text),
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

/// The flags, as what to write into the scenario.
fn flags(a: &TuneArgs) -> Result<TuneFlags> {
    Ok(TuneFlags {
        probe: a.probe.clone(),
        slo: a.slo.as_deref().map(parse_slo).transpose()?,
        stressors: a.stressor.clone(),
        knobs: a
            .knob
            .iter()
            .map(|k| parse_knob(k))
            .collect::<Result<_>>()?,
        resolution: a.resolution,
    })
}

/// `--slo`.
fn parse_slo(s: &str) -> Result<SloFlag> {
    SloFlag::parse(s).map_err(|e| bad_input(format!("--slo {s}: {e}")))
}

/// `--knob TENANT.KEY=A..B`.
fn parse_knob(s: &str) -> Result<KnobFlag> {
    KnobFlag::parse(s).map_err(|e| bad_input(format!("--knob {s}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slos_read_as_their_bound() {
        let read = |s: &str| {
            let slo = parse_slo(s).unwrap();
            (slo.metric.clone(), slo.key(), slo.bound())
        };
        assert_eq!(
            read("lat_p99_ms<=10"),
            ("lat_p99_ms".into(), "slo_max", 10.0)
        );
        assert_eq!(
            read("rate_rps >= 500"),
            ("rate_rps".into(), "slo_min", 500.0)
        );
        assert_eq!(
            read("ops_per_sec loss<=5%"),
            ("ops_per_sec".into(), "slo_loss", 5.0)
        );
        for bad in ["p99", "loss<=5", "x<=-1", "a b<=3", "<=4"] {
            assert!(parse_slo(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn knobs_read_as_tables() {
        let t = parse_knob("batch.io_write_bps=1M..200M").unwrap().table();
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
