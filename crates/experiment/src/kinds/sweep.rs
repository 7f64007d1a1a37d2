//! `sweep`: one stressor setting swept over a list (disk request size, datagram size,
//! threads, intensity), the victims' degradation at each point with its interval (paper
//! 000, figures 8 and 10).
//!
//! Each point is a condition of the matrix engine (the stressor with that one setting
//! changed, given to every aggressor), scheduled and analysed as the matrix does, with its
//! paired or on/off design; the kind adds the curve: one row per point, with what the
//! aggressors delivered there in physical units.

use isobench_results::Column;
use isobench_workloads::ParamValues;
use serde::{Deserialize, Serialize};

use super::curve::{analysis_with_curve, Curve, Point};
use super::kind::{ExperimentKind, NothingToRun};
use super::matrix::{stressor_conditions, Variant};
use crate::cells::{Analysis, Inputs};
use crate::fields::Fields;
use crate::plan::{Condition, Platform};
use crate::resolver::Resolver;
use crate::scenario::Scenario;
use crate::source::Span;

/// The `sweep` kind.
pub struct Sweep;

/// What a `[sweep]` table says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepSettings {
    /// The id (label or name) of the `[[stressor]]` swept.
    pub stressor: String,
    /// The parameter swept, or `intensity`.
    pub param: String,
    /// Its values, in order, as written.
    pub values: Vec<String>,
}

/// The pseudo-parameter that sweeps the stressor's intensity.
const INTENSITY: &str = "intensity";

impl SweepSettings {
    fn of(plan_or_scenario: &serde_json::Value) -> Option<SweepSettings> {
        serde_json::from_value(plan_or_scenario.clone()).ok()
    }

    /// The condition id of point `value`.
    fn condition_id(&self, stressor_id: &str, value: &str) -> String {
        if self.param == INTENSITY {
            format!("{stressor_id}@{value}")
        } else {
            format!("{stressor_id}:{}={value}", self.param)
        }
    }
}

impl ExperimentKind for Sweep {
    fn name(&self) -> &'static str {
        "sweep"
    }

    fn help(&self) -> &'static str {
        "one stressor setting swept over a list (request size, datagram size, threads): \
         the victims' degradation at each point"
    }

    fn settings(&self, f: &mut Fields<'_, '_>, sc: &Scenario) -> serde_json::Value {
        let ids: Vec<&str> = sc.stressors.iter().map(|s| s.id.as_str()).collect();
        let stressor = f.string("stressor");
        let param = f.string("param");
        let values = f.array("values");
        let Some(stressor) = stressor else {
            f.missing(
                "stressor",
                &format!("the id of a [[stressor]] of this file: {}", ids.join(", ")),
                &format!("\"{}\"", ids.first().copied().unwrap_or("disk")),
            );
            return serde_json::Value::Null;
        };
        let Some(spec) = sc.stressors.iter().find(|s| &s.id == stressor.get_ref()) else {
            f.error(
                stressor.span().into(),
                "stressor",
                format!("no [[stressor]] has the id `{}`", stressor.get_ref()),
                &ids.join(", "),
                format!(
                    "write stressor = \"{}\", or add a [[stressor]] with that name or label",
                    ids.first().copied().unwrap_or("disk")
                ),
            );
            return serde_json::Value::Null;
        };
        let st = isobench_workloads::stressor(&spec.name).expect("validated name");
        let mut names: Vec<&str> = vec![INTENSITY];
        names.extend(st.params().iter().map(|p| p.name));
        let Some(param) = param else {
            f.missing("param", &names.join(", "), "\"intensity\"");
            return serde_json::Value::Null;
        };
        let param_span: Span = param.span().into();
        let param = param.into_inner();
        let pspec = st.params().iter().find(|p| p.name == param);
        if param != INTENSITY && pspec.is_none() {
            let near = isobench_workloads::nearest_names(&param, names.iter().copied());
            f.error(
                param_span,
                "param",
                format!("{} has no parameter `{param}`", spec.name),
                &names.join(", "),
                match near.first() {
                    Some(n) => format!("did you mean param = \"{n}\"?"),
                    None => "pick one of the allowed parameters (`isobench list`)".into(),
                },
            );
            return serde_json::Value::Null;
        }
        let Some((vspan, values)) = values else {
            f.missing(
                "values",
                "a list of values of the parameter",
                "[1, 2, 4, 8]",
            );
            return serde_json::Value::Null;
        };
        let mut texts = Vec::new();
        for v in &values {
            let text = match v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(x) => x.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                _ => String::new(),
            };
            let ok = match pspec {
                None => text.parse::<u8>().is_ok_and(|i| (1..=100).contains(&i)),
                Some(p) => p.parse(&spec.name, &text).is_ok(),
            };
            if !ok {
                let allowed = pspec.map_or_else(|| "1..=100".to_string(), |p| p.range_text());
                f.error(
                    vspan,
                    "values",
                    format!("`{text}` is not a value of {} {param}", spec.name),
                    &allowed,
                    format!("write values of {param} in {allowed}"),
                );
                return serde_json::Value::Null;
            }
            if texts.contains(&text) {
                f.error(
                    vspan,
                    "values",
                    format!("`{text}` is listed twice"),
                    "distinct values",
                    "list each value once".into(),
                );
                return serde_json::Value::Null;
            }
            texts.push(text);
        }
        if texts.is_empty() {
            f.error(
                vspan,
                "values",
                "the list is empty".into(),
                "at least one value",
                "write values = [1, 2, 4, 8]".into(),
            );
            return serde_json::Value::Null;
        }
        serde_json::to_value(SweepSettings {
            stressor: spec.id.clone(),
            param,
            values: texts,
        })
        .expect("settings serialize")
    }

    /// The swept stressor once per value; the file's other stressors are not run.
    fn conditions(&self, r: &mut Resolver, platform: Platform) -> Vec<Condition> {
        let Some(set) = SweepSettings::of(&r.scenario().settings) else {
            return Vec::new();
        };
        stressor_conditions(r, platform, |s| {
            if s.id != set.stressor {
                return Vec::new();
            }
            let st = isobench_workloads::stressor(&s.name).expect("validated name");
            set.values
                .iter()
                .map(|v| {
                    let mut params: ParamValues = s.params.clone();
                    let mut intensity = s.intensities.first().copied().unwrap_or(100);
                    match st.params().iter().find(|p| p.name == set.param) {
                        Some(p) => params.set(
                            p.name,
                            p.parse(&s.name, v).expect("checked with the scenario"),
                        ),
                        None => intensity = v.parse().expect("checked with the scenario"),
                    }
                    Variant {
                        id: set.condition_id(&s.id, v),
                        intensity,
                        params,
                    }
                })
                .collect()
        })
    }

    fn nothing_to_run(&self) -> NothingToRun {
        NothingToRun {
            field: "sweep.stressor",
            problem: "the swept stressor cannot run on this platform",
            allowed: "a stressor this platform supports (`isobench list`)",
            fix: "sweep another stressor, or run as root for cgroup tenants",
        }
    }

    fn analyze(&self, i: Inputs<'_>) -> Analysis {
        analysis_with_curve(i, SweepSettings::of, |plan, set| {
            let v = &set.values;
            Curve {
                id: "curve",
                title: format!(
                    "Victims under {} as {} goes {}..{}",
                    set.stressor,
                    set.param,
                    v[0],
                    v[v.len() - 1]
                ),
                x: Column::text(&set.param),
                points: v
                    .iter()
                    .map(|v| Point {
                        x: isobench_results::Value::text_of(v.clone()),
                        condition: set.condition_id(&set.stressor, v),
                    })
                    .filter(|p| plan.conditions.iter().any(|c| c.id == p.condition))
                    .collect(),
            }
        })
    }
}
