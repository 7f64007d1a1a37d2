//! The verdict the report opens with: the run's headline ([`Results::headline`], the same
//! figures `isobench show`, the exports, the web UI, the API and `/metrics` give), and per
//! resource how sure it is and which of its results not to trust, each linked to its cell
//! in the matrix below.
//!
//! [`verdict`] is the one place that says where the verdict comes from; [`render`] draws what
//! it returns and decides nothing. Both read figures the results crate computed: the page
//! never computes one.

use std::fmt::Write as _;

use isobench_results::{Cell, Headline, ResourceHeadline, Results, Verdict as Said};

use super::svg::esc;
use crate::table::{marks, signed};

/// One resource's verdict.
#[derive(Debug, Clone)]
pub struct Resource<'a> {
    /// The resource's headline, as every other view shows it.
    pub head: ResourceHeadline,
    /// The cell behind the figure.
    pub cell: Option<&'a Cell>,
    /// Its victim results not to trust as they stand: flagged, disturbed, did not respond,
    /// or without an estimate.
    pub distrust: Vec<&'a Cell>,
}

/// The run's verdict.
#[derive(Debug, Clone)]
pub struct Verdict<'a> {
    /// The run's headline.
    pub headline: Headline,
    /// Per resource, in the headline's order (worst first).
    pub resources: Vec<Resource<'a>>,
}

/// The verdict of `r`: its headline, each resource's figure with the cell behind it, and
/// the victim cells of that resource not to trust.
pub fn verdict(r: &Results) -> Verdict<'_> {
    let headline = r.headline();
    let resources = headline
        .resources
        .iter()
        .map(|h| {
            let cell = h.cell.as_ref().and_then(|w| {
                r.cells.iter().find(|c| {
                    c.tenant == w.tenant
                        && c.probe == w.probe
                        && c.metric == w.metric
                        && c.condition == w.condition
                })
            });
            let distrust = r
                .cells
                .iter()
                .filter(|c| c.resource() == h.resource)
                .filter(|c| !reasons(c).is_empty())
                .collect();
            Resource {
                head: h.clone(),
                cell,
                distrust,
            }
        })
        .collect();
    Verdict {
        headline,
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

/// The words of a verdict.
fn words(k: Said) -> &'static str {
    match k {
        Said::Dnr => "a victim stopped answering",
        Said::Loss => "leaks: significant loss",
        Said::FlaggedLoss => "leaks, but the figure is flagged",
        Said::NoSignificantLoss => "holds: no significant loss",
        Said::NoResult => "no result",
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
    let _ = write!(
        s,
        r#"<p class="headline">{}</p>"#,
        esc(&v.headline.summary())
    );
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
        let ci = match res.head.cell.as_ref().map(|c| (c.lower, c.upper)) {
            Some((Some(lo), Some(hi))) => format!("[{}, {}]", signed(lo), signed(hi)),
            _ => String::new(),
        };
        let class = match res.head.verdict {
            Said::Loss => "loss",
            Said::FlaggedLoss => "flagged",
            Said::Dnr => "dnr",
            Said::NoSignificantLoss | Said::NoResult => "holds",
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
        if res.head.dnr > 0 {
            if !sure.is_empty() {
                sure.push_str("; ");
            }
            let _ = write!(sure, "{} result(s) DNR", res.head.dnr);
        }
        let _ = write!(
            s,
            r#"<tr class="{class}"><th>{}</th><td>{}</td><td class="num">{}</td><td class="num">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
            esc(&res.head.resource),
            esc(words(res.head.verdict)),
            esc(&res.head.figure()),
            esc(&ci),
            esc(&sure),
            res.cell.map(|c| place(r, c)).unwrap_or_default(),
            distrust
        );
    }
    s.push_str("</tbody></table>");
    let _ = write!(
        s,
        r##"<p class="legend">{}. Every figure is a cell of <a href="#matrix">the matrix below</a>; the run itself is described <a href="#run">at the end</a>.</p>"##,
        esc(&v.headline.rule)
    );
    s
}
