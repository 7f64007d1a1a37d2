//! The verdict the report opens with: per resource, whether the victims lost anything through
//! it, how much, how sure, and which of its results not to trust, each linked to its cell in
//! the matrix below.
//!
//! [`verdict`] is the one place that says where the verdict comes from; [`render`] draws what
//! it returns and decides nothing. Both read figures the results crate computed: the page
//! never computes one.

use std::fmt::Write as _;

use isobench_results::{Cell, Results};

use super::svg::esc;
use crate::table::{marks, signed};

/// What the verdict says of a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A victim stopped answering.
    Dnr,
    /// A significant degradation.
    Loss,
    /// A significant degradation flagged untrustworthy.
    FlaggedLoss,
    /// No significant degradation: the figure is the largest estimate.
    NoSignificantLoss,
    /// No result.
    NoResult,
}

/// One resource's verdict.
#[derive(Debug, Clone)]
pub struct Resource<'a> {
    /// The resource (`cpu`, `disk`, ...).
    pub name: String,
    /// What its figure says.
    pub kind: Kind,
    /// The cell behind the figure.
    pub cell: Option<&'a Cell>,
    /// Victim results of the resource that did not respond.
    pub dnr_cells: u32,
    /// Its victim results not to trust as they stand: flagged, disturbed, did not respond,
    /// or without an estimate.
    pub distrust: Vec<&'a Cell>,
}

/// The run's verdict.
#[derive(Debug, Clone)]
pub struct Verdict<'a> {
    /// What a resource is here.
    pub by: &'static str,
    /// One line for the run as a whole, when the results give one.
    pub summary: Option<String>,
    /// Per resource, in the results' order.
    pub resources: Vec<Resource<'a>>,
}

/// The verdict of `r`: the worst victim degradation of each resource class the results
/// summarise ([`isobench_results::ClassSummary`], by the stressors' class), the cell behind
/// it, and the cells of that class not to trust.
pub fn verdict(r: &Results) -> Verdict<'_> {
    let resources = r
        .classes
        .iter()
        .map(|class| {
            let cell = class.worst.as_ref().and_then(|w| {
                r.cells.iter().find(|c| {
                    c.tenant == w.tenant
                        && c.probe == w.probe
                        && c.metric == w.metric
                        && c.condition == w.condition
                })
            });
            let kind = match (cell, &class.worst) {
                (_, None) if class.dnr_cells > 0 => Kind::Dnr,
                (_, None) => Kind::NoResult,
                (Some(c), Some(w)) if w.significant && w.estimate > 0.0 => {
                    if c.comparison.as_ref().is_some_and(|x| !x.trustworthy) {
                        Kind::FlaggedLoss
                    } else {
                        Kind::Loss
                    }
                }
                (_, Some(_)) => Kind::NoSignificantLoss,
            };
            let distrust = r
                .cells
                .iter()
                .filter(|c| class.conditions.contains(&c.condition))
                .filter(|c| !reasons(c).is_empty())
                .collect();
            Resource {
                name: class.class.as_str().to_string(),
                kind,
                cell,
                dnr_cells: class.dnr_cells,
                distrust,
            }
        })
        .collect();
    Verdict {
        by: "the class of resource the aggressor's stressor contends for",
        summary: None,
        resources,
    }
}

/// Why a cell's figure is not to be trusted as it stands; empty when it is.
pub fn reasons(c: &Cell) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(cmp) = &c.comparison {
        out.extend(cmp.untrustworthy_reasons());
    }
    if let Some(d) = &c.dnr {
        out.push(format!("DNR {}/{}: {}", d.count, d.of, d.reason));
    }
    if c.disturbed > 0 {
        out.push(format!(
            "{} value(s) from trials disturbed by load from outside the run",
            c.disturbed
        ));
    }
    if c.comparison.is_none() && c.dnr.is_none() {
        out.push(
            c.problem
                .clone()
                .unwrap_or_else(|| "no estimate".to_string()),
        );
    }
    out
}

/// The id of a cell's place in the matrix table (`cell-v3`, `cell-a0`), unique in the page.
pub fn cell_id(r: &Results, c: &Cell) -> Option<String> {
    let at = |cells: &[Cell]| cells.iter().position(|x| std::ptr::eq(x, c));
    at(&r.cells)
        .map(|i| format!("cell-v{i}"))
        .or_else(|| at(&r.aggressor).map(|i| format!("cell-a{i}")))
}

/// `probe metric under condition`, linked to the cell in the matrix.
fn place(r: &Results, c: &Cell) -> String {
    let what = if c.metric.is_empty() {
        c.probe.clone()
    } else {
        format!("{} {}", c.probe, c.metric)
    };
    let text = format!("{what} under {}", c.condition);
    match cell_id(r, c) {
        Some(id) => format!(r##"<a href="#{}">{}</a>"##, esc(&id), esc(&text)),
        None => esc(&text),
    }
}

/// The figure of a resource: `+23.1%`, `+11.3%?`, `n.s. (+1.2%)`, `DNR`, `no result`.
fn figure(res: &Resource<'_>) -> String {
    let est = res
        .cell
        .and_then(|c| c.comparison.as_ref())
        .map(|x| x.degradation.estimate);
    match (res.kind, est) {
        (Kind::Dnr, _) => "DNR".into(),
        (Kind::Loss, Some(e)) => format!("{}%", signed(e)),
        (Kind::FlaggedLoss, Some(e)) => format!("{}%?", signed(e)),
        (Kind::NoSignificantLoss, Some(e))
            if res
                .cell
                .and_then(|c| c.comparison.as_ref())
                .is_some_and(|x| x.significant) =>
        {
            format!("none (better: {}%)", signed(e))
        }
        (Kind::NoSignificantLoss, Some(e)) => format!("n.s. ({}%)", signed(e)),
        _ => "no result".into(),
    }
}

/// The words of a verdict.
fn words(k: Kind) -> &'static str {
    match k {
        Kind::Dnr => "a victim stopped answering",
        Kind::Loss => "leaks: significant loss",
        Kind::FlaggedLoss => "leaks, but the figure is flagged",
        Kind::NoSignificantLoss => "holds: no significant loss",
        Kind::NoResult => "no result",
    }
}

/// How sure: the test behind the significance and its p-value, the design, the flags.
fn how_sure(c: &Cell) -> String {
    let Some(cmp) = &c.comparison else {
        return c
            .problem
            .clone()
            .unwrap_or_else(|| "no estimate".to_string());
    };
    let mut parts = Vec::new();
    parts.push(match (cmp.significant, c.p_adjusted) {
        (true, Some(p)) => format!("significant, adjusted p {}", p_text(p)),
        (false, Some(p)) => format!("not significant, adjusted p {}", p_text(p)),
        (true, None) => "significant".to_string(),
        (false, None) => "not significant".to_string(),
    });
    if let Some(d) = c.design {
        parts.push(
            match d {
                isobench_results::Design::OnOff => "on/off cycles",
                isobench_results::Design::Paired => "paired trials",
            }
            .to_string(),
        );
    }
    parts.extend(reasons(c).into_iter().map(|r| format!("? {r}")));
    parts.join("; ")
}

fn p_text(p: f64) -> String {
    if p < 0.001 {
        "<0.001".into()
    } else {
        format!("{p:.3}")
    }
}

/// The verdict section: a table with a row per resource, and what its columns mean.
pub fn render(r: &Results, v: &Verdict<'_>) -> String {
    let mut s = String::new();
    if let Some(line) = &v.summary {
        let _ = write!(s, r#"<p class="headline">{}</p>"#, esc(line));
    }
    if v.resources.is_empty() {
        s.push_str("<p>This run has no victim results per resource.</p>");
        return s;
    }
    let level = (r.confidence * 100.0).round();
    let _ = write!(
        s,
        r#"<table class="verdict"><thead><tr><th>resource</th><th>verdict</th><th>victim loss</th><th>{level}% CI of that result (not adjusted)</th><th>how sure</th><th>where (in the matrix)</th><th>results of this resource not to trust</th></tr></thead><tbody>"#
    );
    for res in &v.resources {
        let ci = res
            .cell
            .and_then(|c| c.comparison.as_ref())
            .map(|x| {
                format!(
                    "[{}, {}]",
                    signed(x.degradation.lower),
                    signed(x.degradation.upper)
                )
            })
            .unwrap_or_default();
        let class = match res.kind {
            Kind::Loss => "loss",
            Kind::FlaggedLoss => "flagged",
            Kind::Dnr => "dnr",
            Kind::NoSignificantLoss | Kind::NoResult => "holds",
        };
        let distrust = if res.distrust.is_empty() {
            "none".to_string()
        } else {
            let items: Vec<String> = res
                .distrust
                .iter()
                .map(|c| {
                    format!(
                        "<li>{}{}: {}</li>",
                        place(r, c),
                        esc(&marks(c)),
                        esc(&reasons(c).join("; "))
                    )
                })
                .collect();
            format!("<ul>{}</ul>", items.join(""))
        };
        let mut sure = res.cell.map(how_sure).unwrap_or_default();
        if res.dnr_cells > 0 {
            if !sure.is_empty() {
                sure.push_str("; ");
            }
            let _ = write!(sure, "{} result(s) DNR", res.dnr_cells);
        }
        let _ = write!(
            s,
            r#"<tr class="{class}"><th>{}</th><td>{}</td><td class="num">{}</td><td class="num">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
            esc(&res.name),
            esc(words(res.kind)),
            esc(&figure(res)),
            esc(&ci),
            esc(&sure),
            res.cell.map(|c| place(r, c)).unwrap_or_default(),
            distrust
        );
    }
    s.push_str("</tbody></table>");
    let _ = write!(
        s,
        r##"<p class="legend">A resource is {}. Its figure is the victims' worst significant degradation through it (percent, positive = worse); without one, the largest estimate, marked n.s. ? marks a result flagged untrustworthy. Every figure is a cell of <a href="#matrix">the matrix below</a>; the run itself is described <a href="#run">at the end</a>.</p>"##,
        esc(v.by)
    );
    s
}
