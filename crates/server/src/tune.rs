//! The tune of a job (`POST /api/v1/jobs` with `tune`, the web UI's tune form): the victim's
//! probe, the SLO, the aggressor's stressors and the knobs, written into a `kind = "tune"`
//! scenario (the job's scenario or preset, `tune-cpu` without either) by the composition
//! `isobench tune` uses for its flags. The job then queues as that scenario's text, checked
//! like any scenario, with the problems of the tune's parts answered at their field
//! (`tune.knobs[1]`).

use isobench_experiment::kinds::tune::compose::{compose, KnobFlag, SloFlag, TuneFlags};
use isobench_experiment::scenario::{preset, PRESETS};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::ApiError;

/// The preset a tune without a scenario or a preset starts from.
pub const DEFAULT_PRESET: &str = "tune-cpu";

/// A tune: what `isobench tune`'s flags say, each left out to keep the scenario's own.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTune {
    /// The victim's probe (`isobench list`), whose figure the SLO bounds (`--probe`).
    pub probe: Option<String>,
    /// The SLO on the victim's figure (`--slo`).
    pub slo: Option<TuneSlo>,
    /// The aggressor's stressors (`isobench list`), each at full intensity and searched on
    /// its own (`--stressor`).
    pub stressors: Option<Vec<String>>,
    /// The knobs to search, each on its own (`--knob`).
    pub knobs: Option<Vec<TuneKnob>>,
    /// The widest boundary interval to stop at, as a share of each knob's range
    /// (`--resolution`).
    #[schema(exclusive_minimum = 0.0, exclusive_maximum = 0.5)]
    pub resolution: Option<f64>,
}

/// An SLO: `metric op bound` (`lat_p99_ms <= 10`, `rate_rps >= 500`, `ops_per_sec loss<= 5`).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TuneSlo {
    /// The victim probe's metric.
    pub metric: String,
    /// How the metric compares with the bound.
    pub op: SloOp,
    /// The bound, in the metric's unit (`loss<=`: %).
    #[schema(exclusive_minimum = 0.0)]
    pub bound: f64,
}

/// How an SLO's metric compares with its bound.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
pub enum SloOp {
    /// At most the bound (a latency).
    #[serde(rename = "<=")]
    AtMost,
    /// At least the bound (a rate).
    #[serde(rename = ">=")]
    AtLeast,
    /// At most the bound % worse than alone.
    #[serde(rename = "loss<=")]
    LossAtMost,
}

impl SloOp {
    fn text(self) -> &'static str {
        match self {
            SloOp::AtMost => "<=",
            SloOp::AtLeast => ">=",
            SloOp::LossAtMost => "loss<=",
        }
    }
}

/// A knob: a tenant's live limit searched between two settings.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TuneKnob {
    /// The tenant (`batch`).
    pub tenant: String,
    /// The limit's key (`cpus`, `weight`, `io_write_bps`, `memory_low`).
    pub key: String,
    /// One end of the range, a value of the limit (`0.05`, `1M`); the ends go in either
    /// order (an aggressor's tight end is its lower setting, a victim's its higher).
    pub from: String,
    /// The other end (`1`, `200M`).
    pub to: String,
}

/// What the tune asks to write, each part checked and an error naming its field.
fn flags(t: &NewTune) -> Result<TuneFlags, ApiError> {
    let slo = t
        .slo
        .as_ref()
        .map(|s| SloFlag::new(&s.metric, s.op.text(), s.bound))
        .transpose()
        .map_err(|e| ApiError::field("tune.slo", e))?;
    let knobs = t.knobs.as_deref().unwrap_or_default().iter().enumerate();
    let knobs = knobs
        .map(|(i, k)| {
            KnobFlag::new(&k.tenant, &k.key, &k.from, &k.to)
                .map_err(|e| ApiError::field(format!("tune.knobs[{i}]"), e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let stressors = t.stressors.clone().unwrap_or_default();
    if let Some(i) = stressors.iter().position(|s| s.trim().is_empty()) {
        return Err(ApiError::field(
            format!("tune.stressors[{i}]"),
            "is empty; name a stressor (isobench list), e.g. cpu",
        ));
    }
    if let Some(r) = t
        .resolution
        .filter(|r| !(r.is_finite() && *r > 0.0 && *r < 0.5))
    {
        return Err(ApiError::field(
            "tune.resolution",
            format!("{r} is not a share of the range above 0 and below 0.5, e.g. 0.05"),
        ));
    }
    let probe = t.probe.as_deref().map(str::trim).filter(|p| !p.is_empty());
    Ok(TuneFlags {
        probe: probe.map(str::to_string),
        slo,
        stressors: stressors.iter().map(|s| s.trim().to_string()).collect(),
        knobs,
        resolution: t.resolution,
    })
}

/// The scenario text of a tune job: the job's `scenario` text or its `preset`
/// ([`DEFAULT_PRESET`] without either) with the tune written in.
pub fn scenario(
    tune: &NewTune,
    preset_name: Option<&str>,
    text: Option<&str>,
) -> Result<String, ApiError> {
    let flags = flags(tune)?;
    let (field, base) = match (text, preset_name) {
        (Some(_), Some(_)) => {
            return Err(ApiError::unprocessable(
                "a tune starts from either \"preset\" or \"scenario\", not both",
            ))
        }
        (Some(text), None) => ("scenario", text),
        (None, name) => {
            let name = name.unwrap_or(DEFAULT_PRESET);
            let text = preset(name).ok_or_else(|| {
                let names: Vec<&str> = PRESETS.iter().map(|p| p.0).collect();
                ApiError::field(
                    "preset",
                    format!(
                        "{name}: no such preset; the presets are {}",
                        names.join(", ")
                    ),
                )
            })?;
            ("preset", text)
        }
    };
    let composed = compose(base, &flags).map_err(|e| ApiError::field(field, e))?;
    Ok(composed.unwrap_or_else(|| base.to_string()))
}

/// A tune's scenario problem answered at the tune's field it concerns: the first problem
/// of a knob, a stressor, the probe, the SLO or the resolution names its field in the
/// answer (`tune.knobs[1]: ...`); other problems are left as they are.
pub fn at_field(mut e: ApiError) -> ApiError {
    let found = e.body.problems.iter().flatten().find_map(|p| {
        let field = body_field(&p.field)?;
        Some((field, format!("{}{}", p.message, fix_of(&p.fix))))
    });
    if let Some((field, message)) = found {
        e.body.error = format!("{field}: {message}");
        e.body.field = Some(field);
    }
    e
}

fn fix_of(fix: &str) -> String {
    if fix.is_empty() {
        String::new()
    } else {
        format!(" ({fix})")
    }
}

/// The tune's field of a scenario field: `tune.knob[1].range` is `tune.knobs[1]`,
/// `stressor[0].name` is `tune.stressors[0]`.
fn body_field(scenario_field: &str) -> Option<String> {
    let indexed = |rest: &str, to: &str| {
        let i = rest.strip_prefix('[')?.split(']').next()?;
        i.parse::<usize>().ok().map(|i| format!("tune.{to}[{i}]"))
    };
    if let Some(rest) = scenario_field.strip_prefix("tune.knob") {
        return indexed(rest, "knobs").or_else(|| Some("tune.knobs".into()));
    }
    if let Some(rest) = scenario_field.strip_prefix("stressor") {
        return indexed(rest, "stressors");
    }
    match scenario_field {
        "tune.probe" => Some("tune.probe".into()),
        f if f.starts_with("probe") => Some("tune.probe".into()),
        "tune.metric" | "tune.slo_max" | "tune.slo_min" | "tune.slo_loss" => {
            Some("tune.slo".into())
        }
        "tune.resolution" => Some("tune.resolution".into()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knob(tenant: &str, key: &str, from: &str, to: &str) -> TuneKnob {
        TuneKnob {
            tenant: tenant.into(),
            key: key.into(),
            from: from.into(),
            to: to.into(),
        }
    }

    fn tune(knobs: Vec<TuneKnob>) -> NewTune {
        NewTune {
            probe: Some("service".into()),
            slo: Some(TuneSlo {
                metric: "lat_p99_ms".into(),
                op: SloOp::AtMost,
                bound: 20.0,
            }),
            stressors: Some(vec!["cpu".into()]),
            knobs: Some(knobs),
            resolution: Some(0.1),
        }
    }

    #[test]
    fn a_tune_is_written_into_the_tune_cpu_preset() {
        let text = scenario(&tune(vec![knob("batch", "cpus", "0.1", "1")]), None, None).unwrap();
        let doc: toml::Table = text.parse().unwrap();
        assert_eq!(doc["kind"].as_str(), Some("tune"));
        assert_eq!(doc["tune"]["slo_max"].as_float(), Some(20.0));
        assert_eq!(doc["tune"]["knob"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn each_bad_part_is_answered_at_its_field() {
        let field =
            |t: &NewTune, p: Option<&str>| scenario(t, p, None).unwrap_err().body.field.unwrap();
        let two = tune(vec![
            knob("batch", "cpus", "0.1", "1"),
            knob("batch", "", "1", "2"),
        ]);
        assert_eq!(field(&two, None), "tune.knobs[1]");
        let mut t = tune(vec![]);
        t.slo.as_mut().unwrap().bound = -1.0;
        assert_eq!(field(&t, None), "tune.slo");
        let mut t = tune(vec![]);
        t.resolution = Some(0.7);
        assert_eq!(field(&t, None), "tune.resolution");
        assert_eq!(field(&tune(vec![]), Some("quick")), "preset");
        assert_eq!(field(&tune(vec![]), Some("nope")), "preset");
    }

    #[test]
    fn scenario_fields_map_to_the_tunes() {
        assert_eq!(body_field("tune.knob[2]").as_deref(), Some("tune.knobs[2]"));
        assert_eq!(
            body_field("stressor[0].name").as_deref(),
            Some("tune.stressors[0]")
        );
        assert_eq!(body_field("tune.metric").as_deref(), Some("tune.slo"));
        assert_eq!(body_field("tenant[0].limits"), None);
    }
}
