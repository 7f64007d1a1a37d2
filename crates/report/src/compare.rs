//! `isobench compare`: a [`RunComparison`] in the terminal, as Markdown, CSV or JSON. Its
//! tables are [`isobench_results::Section`]s, drawn as every section is; only the header (one
//! line per run) and the words around the tables are the comparison's own.

use std::fmt::Write as _;

use isobench_results::compare::{ComparedRun, RunComparison};

use crate::grid::{render_grid, Row, Style};
use crate::sections::{csv_section, markdown_sections};

/// Sections shown in the header rather than as a table in the terminal.
const HEADER_SECTION: &str = "runs";

/// `2024-01-01T00:00:00.000Z` as `2024-01-01 00:00:00 UTC`; other text unchanged.
fn started(r: &ComparedRun) -> String {
    let t = &r.started_at;
    match (t.get(..19), t.ends_with('Z')) {
        (Some(s), true) => format!("{} UTC", s.replace('T', " ")),
        _ => t.clone(),
    }
}

/// One line per run (label, id, scenario, kind, platform, start, status when not complete)
/// with its host below.
fn header(c: &RunComparison) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Comparison of {} runs against the reference A",
        c.runs.len()
    );
    for r in &c.runs {
        let mut line = format!(
            "{}  run {} · scenario {} ({}) · platform {} · started {}",
            r.label,
            r.id,
            r.scenario,
            r.kind,
            r.platform,
            started(r)
        );
        if r.status != "complete" {
            let _ = write!(line, " · {}", r.status);
        }
        let _ = writeln!(out, "{line}");
        if !r.host.is_empty() {
            let _ = writeln!(out, "{}  host: {}", " ".repeat(r.label.len()), r.host);
        }
    }
    out
}

/// The comparison for the terminal: the runs, each table whole (a comparison has no export
/// to point a cut table to), the legend under the cell tables, then the settings that differ
/// and what the runs do not share.
pub fn render_comparison(c: &RunComparison, style: Style) -> String {
    let mut out = header(c);
    if c.cells.is_empty() && c.kind_sections().next().is_some() {
        let _ = writeln!(
            out,
            "\nno degradation cell to test: the kind's own tables are set side by side below, \
             each run's figures with their intervals"
        );
    } else if c.cells.is_empty() {
        let _ = writeln!(
            out,
            "\nno cell of A is measured in another run: nothing to test (see what is not shared)"
        );
    }
    for s in c.sections.iter().filter(|s| s.id != HEADER_SECTION) {
        let _ = writeln!(out, "\n{}", s.title);
        let headers = s.headers();
        let Some((head, columns)) = headers.split_first() else {
            continue;
        };
        let rows: Vec<Row> = s
            .text_rows()
            .into_iter()
            .map(|mut cells| Row {
                label: cells.remove(0),
                cells,
            })
            .collect();
        render_grid(&mut out, head, columns, &rows, style);
        for n in &s.notes {
            let _ = writeln!(out, "  {n}");
        }
    }
    if c.settings.is_empty() {
        let _ = writeln!(
            out,
            "\nSettings: the same in every run (scenario, platform, host, limits, plan)"
        );
    }
    out
}

/// The comparison as Markdown: a title, then every section (the runs first) as a table.
pub fn comparison_markdown(c: &RunComparison) -> String {
    let mut out = format!(
        "# Comparison of {} runs against the reference A\n\n",
        c.runs.len()
    );
    out.push_str(&markdown_sections(&c.sections));
    out
}

/// The comparison as CSV: one row per compared cell ([`RunComparison::table`]).
pub fn comparison_csv(c: &RunComparison) -> Vec<u8> {
    csv_section(&c.table())
}

/// The comparison as JSON: the document itself, with its schema version.
pub fn comparison_json(c: &RunComparison) -> Vec<u8> {
    let mut v = serde_json::to_vec_pretty(c).expect("a comparison serializes");
    v.push(b'\n');
    v
}
