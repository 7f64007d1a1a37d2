//! Curves as rows: the victims' degradation at each point of a swept stressor setting, with
//! what the aggressors delivered there, and the tolerated pressure read off such a curve.
//! Shared by the kinds that sweep a setting (`sweep`, `scale`, `sensitivity`).

use isobench_results::{Column, Plot, Section, Value};
use isobench_store::LoadedRun;

use super::matrix;
use crate::cells::{delivered_pressure, Analysis, Cell, Inputs};
use crate::plan::Plan;

/// One point of a curve: its label in the first column and the condition measured there.
pub(crate) struct Point {
    /// Shown in the first column (`4`, `50`).
    pub x: Value,
    /// The condition id (`disk:blocks=4`).
    pub condition: String,
}

/// A victim result's label: `probe metric`, with the tenant in front when there are several
/// victims.
fn series_label(c: &Cell, many_victims: bool) -> String {
    if many_victims {
        format!("{} {} {}", c.tenant, c.probe, c.metric)
    } else {
        format!("{} {}", c.probe, c.metric)
    }
}

/// The victims' results in first-seen order: (tenant, probe, metric).
pub(crate) fn series(cells: &[Cell]) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = Vec::new();
    for c in cells {
        let k = (c.tenant.clone(), c.probe.clone(), c.metric.clone());
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

/// A cell's degradation as a section value: the estimate with its interval, flagged when
/// the comparison is not trustworthy, DNR when it did not run, empty when not measured.
pub(crate) fn degradation(c: Option<&Cell>) -> Value {
    let Some(c) = c else {
        return Value::Empty;
    };
    if c.all_dnr() {
        return Value::Dnr {
            reason: c.dnr.as_ref().map(|d| d.reason.clone()).unwrap_or_default(),
        };
    }
    match &c.comparison {
        Some(cmp) => {
            let d = &cmp.degradation;
            let v = Value::estimate(d.estimate, d.lower, d.upper, 1);
            if cmp.trustworthy {
                v
            } else {
                v.flagged("untrustworthy: see the notes of the run")
            }
        }
        None => Value::Empty,
    }
}

/// The curve a kind adds to the matrix's analysis (`sweep`, `scale`): the section's id and
/// title, the column of the x values, and the points.
pub(crate) struct Curve {
    /// The section's id (`curve`).
    pub id: &'static str,
    /// The section's title.
    pub title: String,
    /// The first column: what the points are.
    pub x: Column,
    /// One per row, in order.
    pub points: Vec<Point>,
}

/// The matrix's analysis of a run with the kind's curve added as a section (see
/// [`curve_section`]): `curve` draws it from the plan and the kind's settings (read by `of`)
/// when both are there.
pub(crate) fn analysis_with_curve<S>(
    i: Inputs<'_>,
    of: impl FnOnce(&serde_json::Value) -> Option<S>,
    curve: impl FnOnce(&Plan, S) -> Curve,
) -> Analysis {
    let run = i.run;
    matrix::analysis_with(i, of, |a, plan, set| {
        let c = curve(plan, set);
        let section = curve_section(c.id, c.title, c.x, &c.points, &a.cells, run);
        a.sections.push(section);
    })
}

/// The curve: one row per point, a column with the first quantity the aggressors delivered
/// there (when they reported one), then the degradation of every victim result.
pub(crate) fn curve_section(
    id: &str,
    title: String,
    x: Column,
    points: &[Point],
    cells: &[Cell],
    run: &LoadedRun,
) -> Section {
    let series = series(cells);
    let many = series
        .iter()
        .map(|s| &s.0)
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        > 1;
    let delivered: Vec<Option<(String, String, f64)>> = points
        .iter()
        .map(|p| {
            delivered_pressure(run, &p.condition)
                .into_iter()
                .next()
                .map(|d| (d.name, d.unit, d.value))
        })
        .collect();
    let pressure_col = delivered.iter().flatten().next().cloned();
    let mut columns = vec![x];
    if let Some((name, unit, _)) = &pressure_col {
        columns.push(Column::unit(&format!("delivered {name}"), unit));
    }
    for s in &series {
        let label = cells
            .iter()
            .find(|c| (&c.tenant, &c.probe, &c.metric) == (&s.0, &s.1, &s.2))
            .map(|c| series_label(c, many))
            .unwrap_or_default();
        columns.push(Column::unit(&label, "%"));
    }
    let first = columns.len() - series.len();
    let mut section = Section::new(id, title, columns).with_plot(Plot::Curve {
        x: 0,
        y: (first..first + series.len()).collect(),
        by: Vec::new(),
        limit: None,
        marks: Vec::new(),
        y2: Vec::new(),
    });
    for (p, d) in points.iter().zip(&delivered) {
        let mut row = vec![p.x.clone()];
        if let Some((name, _, _)) = &pressure_col {
            row.push(match d {
                Some((n, _, v)) if n == name => Value::text_of(si(*v)),
                _ => Value::Empty,
            });
        }
        for s in &series {
            row.push(degradation(cells.iter().find(|c| {
                (&c.tenant, &c.probe, &c.metric) == (&s.0, &s.1, &s.2) && c.condition == p.condition
            })));
        }
        section.push(row);
    }
    section.notes.push(format!(
        "Degradation in % of the victim's result alone (positive = worse), with its confidence \
         interval; {} = untrustworthy (the run's notes say why).",
        isobench_results::UNTRUSTWORTHY_MARK
    ));
    if pressure_col.is_some() {
        section.notes.push(
            "delivered: what the aggressor's stressor did there, in physical units, median over \
             its blocks, per second it was not frozen."
                .into(),
        );
    }
    section
}

/// `x` with three significant digits and an SI prefix (`1.23 G`, `512 k`, `0.75`).
pub(crate) fn si(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let (v, p) = [(1e12, " T"), (1e9, " G"), (1e6, " M"), (1e3, " k")]
        .iter()
        .find(|(f, _)| x.abs() >= *f)
        .map_or((x, ""), |(f, p)| (x / f, *p));
    let digits = if v.abs() >= 100.0 {
        0
    } else if v.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$}{p}")
}

/// The highest setting a victim tolerates, read off a curve of `(setting, degradation
/// estimate, lower, upper)` points in increasing setting, with `limit` the largest tolerated
/// loss in points: the setting before the curve first reaches `limit`.
///
/// The estimate uses the point estimates; the interval uses the confidence bounds: the lower
/// end is where the *upper* bounds first reach `limit` (the highest setting known, at the
/// run's confidence, to stay below it), the upper end where the *lower* bounds first do (past
/// it, the loss is known to exceed the limit). A curve that never reaches `limit` is
/// tolerated over its whole range ([`Tolerated::beyond`]); one whose first point reaches it
/// gives `None` (nothing tested is tolerated).
pub fn tolerated(points: &[(f64, f64, f64, f64)], limit: f64) -> Tolerated {
    // The last setting before the values in column `i` first reach the limit.
    let last_below = |i: usize| -> Option<f64> {
        let mut best = None;
        for p in points {
            if [p.1, p.2, p.3][i] >= limit {
                break;
            }
            best = Some(p.0);
        }
        best
    };
    let estimate = last_below(0);
    Tolerated {
        estimate,
        lower: last_below(2),
        upper: last_below(1),
        beyond: points.last().is_some_and(|p| Some(p.0) == estimate),
    }
}

/// What [`tolerated`] finds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerated {
    /// The highest setting below the limit on the point estimates; `None` when the first
    /// setting already reaches it.
    pub estimate: Option<f64>,
    /// The highest setting whose confidence interval lies wholly below the limit, with all
    /// before it.
    pub lower: Option<f64>,
    /// The highest setting before one whose interval lies wholly above the limit.
    pub upper: Option<f64>,
    /// The curve stays below the limit up to its last setting: the tolerated setting is at
    /// least that.
    pub beyond: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn si_prefixes() {
        assert_eq!(si(1_234_000_000.0), "1.23 G");
        assert_eq!(si(512_000.0), "512 k");
        assert_eq!(si(0.75), "0.75");
        assert_eq!(si(42.0), "42.0");
    }

    #[test]
    fn tolerated_is_the_last_setting_below_the_limit_with_its_interval() {
        // (setting, estimate, lower, upper)
        let pts = [
            (10.0, 0.5, -0.5, 1.5),
            (25.0, 2.0, 0.5, 3.5),
            (50.0, 4.0, 2.0, 6.0),
            (75.0, 9.0, 7.0, 11.0),
            (100.0, 20.0, 18.0, 22.0),
        ];
        let t = tolerated(&pts, 5.0);
        assert_eq!(t.estimate, Some(50.0));
        assert_eq!(t.lower, Some(25.0), "50's upper bound reaches 5");
        assert_eq!(t.upper, Some(50.0), "75's lower bound is above 5");
        assert!(!t.beyond);
        assert!(t.lower <= t.estimate && t.estimate <= t.upper);
    }

    #[test]
    fn a_curve_that_never_reaches_the_limit_is_tolerated_beyond_its_range() {
        let pts = [(50.0, 1.0, 0.0, 2.0), (100.0, 2.0, 1.0, 3.0)];
        let t = tolerated(&pts, 5.0);
        assert_eq!(t.estimate, Some(100.0));
        assert!(t.beyond);
    }

    #[test]
    fn a_curve_above_the_limit_from_the_start_tolerates_nothing() {
        let pts = [(10.0, 30.0, 25.0, 35.0), (20.0, 40.0, 35.0, 45.0)];
        let t = tolerated(&pts, 5.0);
        assert_eq!(t.estimate, None);
        assert_eq!(t.lower, None);
        assert_eq!(t.upper, None);
        assert!(!t.beyond);
    }

    #[test]
    fn a_non_monotone_curve_stops_at_its_first_crossing() {
        let pts = [
            (10.0, 1.0, 0.0, 2.0),
            (20.0, 6.0, 5.5, 6.5),
            (30.0, 2.0, 1.0, 3.0),
        ];
        assert_eq!(tolerated(&pts, 5.0).estimate, Some(10.0));
    }
}
