//! Exports of a run's results: pure functions from [`Results`] to bytes.
//!
//! - JSON: the whole analysis with its schema version, tool version, host facts and plan,
//!   every estimate with its interval and flags, and every stored trial with its raw samples.
//! - CSV: one row per degradation (victims and aggressors), for spreadsheets.
//! - Markdown: the terminal report's tables, for notes and pull requests.

use std::fmt::Write as _;

use isobench_results::{Cell, Results, RowSubject, SOLO_PROBE};
use serde_json::json;

use crate::table::{cell_text, notes, signed, trust_line, Footnotes};

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// JSON document.
    Json,
    /// Comma-separated values.
    Csv,
    /// Markdown.
    Markdown,
}

impl Format {
    /// Parses `json`, `csv`, `md`/`markdown`.
    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "json" => Some(Format::Json),
            "csv" => Some(Format::Csv),
            "md" | "markdown" => Some(Format::Markdown),
            _ => None,
        }
    }
}

/// Serializes results in a format.
pub fn serialize(r: &Results, f: Format) -> Vec<u8> {
    match f {
        Format::Json => json_bytes(r),
        Format::Csv => csv_bytes(r),
        Format::Markdown => markdown_bytes(r),
    }
}

/// The JSON document: `schema_version`, `tool`, `tool_version`, `kind`, then the results.
pub fn json_bytes(r: &Results) -> Vec<u8> {
    let doc = json!({
        "schema_version": r.schema_version,
        "tool": "isobench",
        "tool_version": r.run.tool_version,
        "kind": "results",
        "results": r,
    });
    let mut v = serde_json::to_vec_pretty(&doc).expect("results serialize");
    v.push(b'\n');
    v
}

fn num(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x}"),
        Some(x) if x > 0.0 => "inf".into(),
        Some(_) => "-inf".into(),
        None => String::new(),
    }
}

const CSV_HEADER: &[&str] = &[
    "run",
    "tenant",
    "role",
    "probe",
    "metric",
    "unit",
    "direction",
    "condition",
    "stressor_class",
    "n_baseline",
    "n_contended",
    "baseline_median",
    "contended_median",
    "degradation_pct",
    "ci_lower",
    "ci_upper",
    "ci_level",
    "significant",
    "p_value",
    "trustworthy",
    "flags",
    "dnr",
    "dnr_of",
    "dnr_reason",
    "causes",
];

fn csv_row(r: &Results, c: &Cell, role: &str) -> Vec<String> {
    let cmp = c.comparison.as_ref();
    let flags = cmp
        .map(|x| {
            x.flags
                .iter()
                .map(|f| f.describe())
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_else(|| c.problem.clone().unwrap_or_default());
    let fields = [
        r.run.id.clone(),
        c.tenant.clone(),
        role.to_string(),
        if c.probe == SOLO_PROBE {
            String::new()
        } else {
            c.probe.clone()
        },
        c.metric.clone(),
        c.unit.clone(),
        c.direction.as_str().to_string(),
        c.condition.clone(),
        c.stressor_class
            .map(|k| k.as_str().to_string())
            .unwrap_or_default(),
        c.baseline.len().to_string(),
        c.contended.len().to_string(),
        num(cmp.map(|x| x.baseline.median)),
        num(cmp.map(|x| x.contended.median)),
        num(cmp.map(|x| x.degradation.estimate)),
        num(cmp.map(|x| x.degradation.lower)),
        num(cmp.map(|x| x.degradation.upper)),
        num(cmp.map(|x| x.degradation.level)),
        cmp.map(|x| x.significant.to_string()).unwrap_or_default(),
        num(cmp.map(|x| x.mann_whitney.p_value)),
        cmp.map(|x| x.trustworthy.to_string()).unwrap_or_default(),
        flags,
        c.dnr
            .as_ref()
            .map(|d| d.count.to_string())
            .unwrap_or_default(),
        c.dnr.as_ref().map(|d| d.of.to_string()).unwrap_or_default(),
        c.dnr.as_ref().map(|d| d.reason.clone()).unwrap_or_default(),
        c.causes
            .iter()
            .map(|x| format!("{}: {}", x.kind.as_str(), x.text))
            .collect::<Vec<_>>()
            .join("; "),
    ];
    fields.to_vec()
}

/// One row per degradation; the aggressor's rows have role `aggressor` and no probe.
pub fn csv_bytes(r: &Results) -> Vec<u8> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(CSV_HEADER).expect("csv to memory");
    for c in &r.cells {
        w.write_record(csv_row(r, c, "victim"))
            .expect("csv to memory");
    }
    for c in &r.aggressor {
        w.write_record(csv_row(r, c, "aggressor"))
            .expect("csv to memory");
    }
    w.into_inner().expect("csv to memory")
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
}

/// Markdown: header, one table per victim with the aggressor rows, the isolation summary,
/// the trust line and the notes.
pub fn markdown_bytes(r: &Results) -> Vec<u8> {
    let mut s = String::new();
    let level = (r.confidence * 100.0).round();
    let _ = writeln!(s, "# isobench run {}\n", r.run.id);
    let _ = writeln!(
        s,
        "Scenario `{}`, platform `{}`, seed {}, status **{}** (isobench {}).\n",
        r.run.scenario, r.run.platform, r.run.seed, r.run.status, r.run.tool_version
    );
    if let Some(reason) = &r.run.status_reason {
        let _ = writeln!(s, "{}\n", md_escape(reason));
    }
    let footnotes = Footnotes::of(r);
    for table in r.matrix() {
        let _ = writeln!(
            s,
            "## Degradation of victim `{}`\n\nPercent, positive = worse; {} with {level}% \
             confidence-interval half-width.\n",
            table.victim,
            r.estimator()
        );
        let _ = writeln!(s, "| probe | metric | {} |", table.conditions.join(" | "));
        let _ = writeln!(
            s,
            "|---|---|{}|",
            table
                .conditions
                .iter()
                .map(|_| "---:")
                .collect::<Vec<_>>()
                .join("|")
        );
        for row in &table.rows {
            let cells: Vec<String> = row
                .cells
                .iter()
                .map(|c| {
                    c.map_or_else(
                        || "-".to_string(),
                        |x| md_escape(&format!("{}{}", cell_text(x), footnotes.marker(x))),
                    )
                })
                .collect();
            let (first, second) = match row.subject {
                RowSubject::Probe { probe, metric } => (md_escape(probe), md_escape(metric)),
                RowSubject::Aggressor { tenant } => {
                    (format!("aggressor `{tenant}`"), "own rate".to_string())
                }
            };
            let _ = writeln!(s, "| {first} | {second} | {} |", cells.join(" | "));
        }
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "`*` {}, `?` untrustworthy, `v` better under contention (kept, not clipped), `~` \
         includes trials disturbed by outside load, `DNR k/n` k of n trials did not respond.\n",
        r.significance_legend()
    );
    if !footnotes.is_empty() {
        let _ = writeln!(
            s,
            "`[n]` caused by placement, as measured (victim alone vs under the stressor):\n"
        );
        for line in footnotes.lines() {
            let _ = writeln!(s, "- {}", md_escape(&line));
        }
        s.push('\n');
    }
    s.push_str(&crate::sections::markdown_sections(&r.sections));
    if !r.classes.is_empty() {
        let _ = writeln!(
            s,
            "## Isolation by resource\n\n| resource | worst victim degradation | {level}% CI | where |\n|---|---:|---|---|"
        );
        for c in &r.classes {
            match &c.worst {
                Some(w) => {
                    let _ = writeln!(
                        s,
                        "| {} | {}%{} | [{}, {}] | {} {} under {}{} |",
                        c.class.as_str(),
                        signed(w.estimate),
                        if w.significant { "" } else { " (n.s.)" },
                        signed(w.lower),
                        signed(w.upper),
                        md_escape(&w.probe),
                        md_escape(&w.metric),
                        w.condition,
                        if c.dnr_cells > 0 {
                            format!("; {} DNR", c.dnr_cells)
                        } else {
                            String::new()
                        }
                    );
                }
                None => {
                    let _ = writeln!(
                        s,
                        "| {} | {} | | |",
                        c.class.as_str(),
                        if c.dnr_cells > 0 { "DNR" } else { "no result" }
                    );
                }
            }
        }
        s.push('\n');
    }
    let _ = writeln!(s, "{}\n", md_escape(&trust_line(r)));
    let n = notes(r, usize::MAX);
    if !n.is_empty() {
        let _ = writeln!(s, "### Notes\n");
        for line in n {
            let _ = writeln!(s, "- {}", md_escape(&line));
        }
    }
    s.into_bytes()
}
