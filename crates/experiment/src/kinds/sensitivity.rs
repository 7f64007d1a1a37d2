//! `sensitivity`: each stressor's intensity swept in steps, giving each victim result a
//! sensitivity curve and a tolerated pressure: the highest intensity, and what the stressor
//! delivered there in physical units, at which the victim loses less than a chosen share
//! (Bubble-Up's sensitivity curves; iBench's tolerated intensity).
//!
//! Each (stressor, intensity) is a condition of the matrix engine, scheduled and analysed as
//! the matrix does, with its design. The tolerated intensity is read off the curve
//! ([`super::curve::tolerated`]): the estimate from the point estimates, its interval from
//! the confidence bounds of the points, so the interval says which tested intensities are
//! known, at the run's confidence, to stay below the limit and which to exceed it.

use isobench_results::{Column, Guide, Plot, Section, Value};
use isobench_store::LoadedRun;
use serde::{Deserialize, Serialize};

use super::curve::{curve_section, series, si, tolerated, Point, Tolerated};
use super::kind::ExperimentKind;
use super::matrix::{self, stressor_conditions, Variant};
use crate::cells::{delivered_pressure, Analysis, Cell, Inputs};
use crate::fields::Fields;
use crate::plan::{Condition, Platform};
use crate::resolver::Resolver;
use crate::scenario::Scenario;

/// The `sensitivity` kind.
pub struct Sensitivity;

/// What a `[sensitivity]` table says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SensitivitySettings {
    /// Intensities every stressor runs at, increasing.
    pub intensities: Vec<u8>,
    /// Largest tolerated loss, % of the victim's result alone.
    pub limit: f64,
}

/// Intensities when the table gives none.
const DEFAULT_STEPS: &[u8] = &[10, 25, 50, 75, 100];

/// Tolerated loss when the table gives none, %.
const DEFAULT_LIMIT: f64 = 5.0;

impl Default for SensitivitySettings {
    fn default() -> Self {
        SensitivitySettings {
            intensities: DEFAULT_STEPS.to_vec(),
            limit: DEFAULT_LIMIT,
        }
    }
}

impl SensitivitySettings {
    fn of(v: &serde_json::Value) -> SensitivitySettings {
        serde_json::from_value(v.clone()).unwrap_or_default()
    }
}

impl ExperimentKind for Sensitivity {
    fn name(&self) -> &'static str {
        "sensitivity"
    }

    fn help(&self) -> &'static str {
        "each stressor's intensity swept in steps: a sensitivity curve per victim result and \
         the tolerated pressure (highest intensity with less than 5% loss)"
    }

    fn settings(&self, f: &mut Fields<'_, '_>, _sc: &Scenario) -> serde_json::Value {
        let mut set = SensitivitySettings::default();
        if let Some((span, steps)) = f.int_list("intensities", (1, 100)) {
            let sorted = f.increasing(
                span,
                "intensities",
                "the intensities",
                "distinct intensities in 1..=100, increasing",
                &steps,
            );
            set.intensities = sorted.into_iter().map(|i| i as u8).collect();
        }
        set.limit = f.float(
            "limit",
            |x| x > 0.0 && x < 100.0,
            "a loss in %, above 0 and below 100",
            DEFAULT_LIMIT,
        );
        serde_json::to_value(set).expect("settings serialize")
    }

    /// Every stressor at every step.
    fn conditions(&self, r: &mut Resolver, platform: Platform) -> Vec<Condition> {
        let set = SensitivitySettings::of(&r.scenario().settings);
        stressor_conditions(r, platform, |s| {
            set.intensities.iter().map(|&i| Variant::at(s, i)).collect()
        })
    }

    fn analyze(&self, i: Inputs<'_>) -> Analysis {
        let run = i.run;
        matrix::analysis_with(
            i,
            |v| Some(SensitivitySettings::of(v)),
            |a, plan, set| {
                let mut stressors: Vec<&str> = Vec::new();
                for c in &plan.conditions {
                    if !stressors.contains(&c.stressor_id.as_str()) {
                        stressors.push(&c.stressor_id);
                    }
                }
                let curves: Vec<(&str, Vec<(u8, String)>)> = stressors
                    .iter()
                    .map(|&s| {
                        let pts = plan
                            .conditions
                            .iter()
                            .filter(|c| c.stressor_id == s)
                            .map(|c| (c.intensity, c.id.clone()))
                            .collect();
                        (s, pts)
                    })
                    .collect();
                a.sections
                    .push(tolerated_section(run, &a.cells, &curves, set.limit));
                for (s, pts) in &curves {
                    let points: Vec<Point> = pts
                        .iter()
                        .map(|(i, id)| Point {
                            x: Value::number(f64::from(*i), 0),
                            condition: id.clone(),
                        })
                        .collect();
                    let mut section = curve_section(
                        &format!("curve-{s}"),
                        format!("Sensitivity curve under {s}"),
                        Column::unit("intensity", "%"),
                        &points,
                        &a.cells,
                        run,
                    );
                    if let Some(Plot::Curve { limit, marks, .. }) = &mut section.plot {
                        *limit = Some(Guide {
                            at: set.limit,
                            label: format!("{}% loss", set.limit),
                        });
                        for (tenant, probe, metric) in series(&a.cells) {
                            let t =
                                tolerated_of(&a.cells, (&tenant, &probe, &metric), pts, set.limit);
                            if let Some(Tolerated {
                                estimate: Some(e),
                                beyond: false,
                                ..
                            }) = t
                            {
                                marks.push(Guide {
                                    at: e,
                                    label: format!("{probe} tolerates {e:.0}%"),
                                });
                            }
                        }
                    }
                    a.sections.push(section);
                }
            },
        )
    }
}

/// The tolerated intensity of one victim result (tenant, probe, metric) on the curve of one
/// stressor (its intensities and conditions); `None` when the curve misses a step.
fn tolerated_of(
    cells: &[Cell],
    (tenant, probe, metric): (&str, &str, &str),
    pts: &[(u8, String)],
    limit: f64,
) -> Option<Tolerated> {
    let curve: Vec<(f64, f64, f64, f64)> = pts
        .iter()
        .filter_map(|(i, id)| {
            let c = cells.iter().find(|c| {
                c.tenant == tenant && c.probe == probe && c.metric == metric && &c.condition == id
            })?;
            let d = &c.comparison.as_ref()?.degradation;
            Some((f64::from(*i), d.estimate, d.lower, d.upper))
        })
        .collect();
    (curve.len() == pts.len()).then(|| tolerated(&curve, limit))
}

/// Per victim result, per stressor: the tolerated intensity with its interval, and what the
/// stressor delivered at that intensity.
fn tolerated_section(
    run: &LoadedRun,
    cells: &[Cell],
    curves: &[(&str, Vec<(u8, String)>)],
    limit: f64,
) -> Section {
    let mut columns = vec![Column::text("victim result")];
    for (s, _) in curves {
        columns.push(Column::unit(&format!("{s} tolerated"), "%"));
        columns.push(Column::text(&format!("{s} delivered there")));
    }
    let mut section = Section::new(
        "tolerated",
        format!("Tolerated pressure: the highest intensity with less than {limit}% loss"),
        columns,
    );
    for (tenant, probe, metric) in series(cells) {
        let mut row = vec![Value::text_of(format!("{probe} {metric}"))];
        if cells
            .iter()
            .map(|c| &c.tenant)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            > 1
        {
            row[0] = Value::text_of(format!("{tenant} {probe} {metric}"));
        }
        for (_, pts) in curves {
            let Some(t) = tolerated_of(cells, (&tenant, &probe, &metric), pts, limit) else {
                row.extend([Value::text_of("not measured at every step"), Value::Empty]);
                continue;
            };
            let text = match (t.estimate, t.beyond) {
                (None, _) => format!("< {}", pts[0].0),
                (Some(e), true) => format!(">= {e:.0}"),
                (Some(e), false) => format!(
                    "{e:.0} [{}, {}]",
                    t.lower
                        .map_or_else(|| format!("<{}", pts[0].0), |x| format!("{x:.0}")),
                    t.upper
                        .map_or_else(|| format!("<{}", pts[0].0), |x| format!("{x:.0}"))
                ),
            };
            row.push(Value::text_of(text));
            let at = t
                .estimate
                .and_then(|e| pts.iter().find(|(i, _)| f64::from(*i) == e))
                .and_then(|(_, id)| delivered_pressure(run, id).into_iter().next());
            row.push(match at {
                Some(d) => {
                    // `20.1 G` and `B/s` read as `20.1 GB/s`; `0.51` and `CPUs` as `0.51 CPUs`.
                    let v = si(d.value);
                    let sep = if v.ends_with(|c: char| c.is_ascii_alphabetic()) {
                        ""
                    } else {
                        " "
                    };
                    Value::text_of(format!("{v}{sep}{}", d.unit))
                }
                None => Value::Empty,
            });
        }
        section.push(row);
    }
    section.notes.push(format!(
        "Tolerated: the highest intensity tested before the victim's loss first reaches \
         {limit}%; in brackets, the same read off the confidence bounds (the highest intensity \
         known to stay below, and the last before one known to exceed). >= : never reached in \
         the range tested; < : reached at the first step."
    ));
    section
}
