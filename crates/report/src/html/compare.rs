//! The HTML page of a comparison of runs: the runs side by side (each cell's degradation in
//! every run, with its interval), each run's difference from the reference with its interval
//! (pale where it is not significant after the correction), then every table of the
//! comparison and what the runs do not share.

use std::fmt::Write as _;

use isobench_common::Role;
use isobench_results::compare::{ComparedCell, RunComparison};

use super::charts::{self, Bar};
use super::svg::{esc, exact};
use super::Page;

/// The comparison as one self-contained HTML file.
pub fn html_comparison(c: &RunComparison) -> String {
    let mut page = Page::default();
    let labels = c.labels();
    let level = (c.level * 100.0).round();
    page.h2("runs", "The runs");
    page.body.push_str(
        "<table><thead><tr><th>run</th><th>id</th><th>scenario</th><th>kind</th><th>platform</th><th>host</th><th>started</th><th>status</th></tr></thead><tbody>",
    );
    for r in &c.runs {
        let _ = write!(
            page.body,
            "<tr><th>{}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&r.label),
            esc(&r.id),
            esc(&r.scenario),
            esc(&r.kind),
            esc(&r.platform),
            esc(&r.host),
            esc(&r.started_at),
            esc(&r.status)
        );
    }
    page.body.push_str("</tbody></table>");
    let _ = write!(
        page.body,
        r#"<p class="trust">{} of {} differences are significant after {} correction ({level}% intervals). {} is the reference; each other run's difference is its degradation minus the reference's, in points.</p>"#,
        c.significant,
        c.tested,
        esc(c.correction.name()),
        esc(labels.first().copied().unwrap_or("A"))
    );
    if c.cells.is_empty() && c.kind_sections().next().is_some() {
        page.body.push_str(
            r#"<p class="trust">No degradation cell to test: the kind's own tables below set each run's figures side by side, with their intervals.</p>"#,
        );
    }
    for (role, id, title) in [
        (Role::Victim, "victims", "Victim degradation"),
        (
            Role::Aggressor,
            "aggressor",
            "The aggressors' own degradation",
        ),
    ] {
        let cells: Vec<&ComparedCell> = c.cells.iter().filter(|x| x.role == role).collect();
        if cells.is_empty() {
            continue;
        }
        page.h2(id, title);
        page.body.push_str(&side_by_side(c, &cells, id, level));
        page.body.push_str(&differences(c, &cells, id, level));
    }
    page.h2("tables", "Every table");
    for (k, s) in c.sections.iter().enumerate() {
        page.section(s, k);
    }
    let title = format!("isobench: {} runs compared", c.runs.len());
    let sub = c
        .runs
        .iter()
        .map(|r| format!("{} = {} ({}, {})", r.label, r.id, r.scenario, r.platform))
        .collect::<Vec<_>>()
        .join(" · ");
    let footer = format!(
        "isobench {} · comparison schema {} · `isobench compare {} --format json` has every figure.",
        c.tool_version,
        c.schema_version,
        c.runs.iter().map(|r| r.id.as_str()).collect::<Vec<_>>().join(" ")
    );
    page.wrap(&title, &sub, &c.tool_version, &footer)
}

fn label(c: &ComparedCell) -> String {
    let who = if c.role == Role::Aggressor {
        c.tenants
            .iter()
            .flatten()
            .next()
            .cloned()
            .unwrap_or_default()
    } else if c.metric.is_empty() {
        c.probe.clone()
    } else {
        format!("{} {}", c.probe, c.metric)
    };
    format!("{who} @ {}", c.condition)
}

/// Each cell's degradation in every run, a bar per run with its interval.
fn side_by_side(c: &RunComparison, cells: &[&ComparedCell], id: &str, level: f64) -> String {
    let mut items = Vec::new();
    for cell in cells {
        for (i, d) in cell.degradations.iter().enumerate() {
            let Some(d) = d else { continue };
            let run = &c.runs[i].label;
            items.push(Bar {
                label: label(cell),
                value: d.estimate,
                interval: Some((d.lower, d.upper)),
                series: i,
                faded: cell.untrustworthy[i],
                tip: format!(
                    "{} in {run}: {:+.1} [{:+.1}, {:+.1}] %{}",
                    label(cell),
                    d.estimate,
                    d.lower,
                    d.upper,
                    if cell.untrustworthy[i] {
                        " (untrustworthy in that run)"
                    } else {
                        ""
                    }
                ),
            });
        }
    }
    if items.is_empty() {
        return String::new();
    }
    let names: Vec<String> = c
        .runs
        .iter()
        .map(|r| format!("{} ({})", r.label, r.scenario))
        .collect();
    charts::bars(
        &format!("compare-{id}-runs"),
        &format!("Degradation in each run, % with {level}% CI (pale: untrustworthy in that run)"),
        "degradation, % (positive = worse)",
        &items,
        0.0,
        &names,
    )
}

/// Each other run's difference from the reference, with its interval; pale when not
/// significant after the correction.
fn differences(c: &RunComparison, cells: &[&ComparedCell], id: &str, level: f64) -> String {
    let reference = c.runs.first().map_or("A", |r| r.label.as_str());
    let mut items = Vec::new();
    let mut untested = 0;
    for cell in cells {
        for (k, v) in cell.versus.iter().enumerate() {
            let Some(d) = &v.difference else {
                untested += 1;
                continue;
            };
            items.push(Bar {
                label: label(cell),
                value: d.estimate,
                interval: Some((d.lower, d.upper)),
                series: k,
                faded: !d.significant,
                tip: format!(
                    "{}: {}-{reference} = {:+.1} [{:+.1}, {:+.1}] points, p adj {}{}",
                    label(cell),
                    v.run,
                    d.estimate,
                    d.lower,
                    d.upper,
                    exact(d.p_adjusted),
                    if d.significant {
                        ", significant"
                    } else {
                        ", not significant"
                    }
                ),
            });
        }
    }
    if items.is_empty() {
        return String::new();
    }
    let names: Vec<String> = c
        .runs
        .iter()
        .skip(1)
        .map(|r| format!("{}-{reference}", r.label))
        .collect();
    let mut out = charts::bars(
        &format!("compare-{id}-differences"),
        &format!(
            "Difference from {reference}, points with {level}% CI (solid: significant after {} correction)",
            c.correction.name()
        ),
        "difference, points (positive = worse than the reference)",
        &items,
        0.0,
        if names.len() > 1 { &names } else { &[] },
    );
    if untested > 0 {
        let _ = write!(out, "<p class=\"legend\">{untested} difference(s) could not be tested; the table below says why.</p>");
    }
    out
}
