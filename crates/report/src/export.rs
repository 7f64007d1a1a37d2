//! Exports of a run's results: pure functions from [`Results`] to bytes.
//!
//! - JSON: the whole analysis with its schema version, tool version, host facts and plan,
//!   every estimate with its interval and flags, and every stored trial with its raw samples.
//! - CSV: one row per degradation (victims and aggressors), for spreadsheets: the estimate
//!   with its statistic, its own interval (`ci_adjusted` false: not adjusted for the run's
//!   other comparisons) and how it was built, and the test behind `significant` with its
//!   p-value before (`p_unadjusted`) and after (`p_adjusted`) the run's `correction`.
//! - Markdown: the terminal report's tables, for notes and pull requests.

use std::fmt::Write as _;

use isobench_results::{Cell, Results, RowSubject, SOLO_PROBE, UNTRUSTWORTHY_MARK};
use serde_json::json;

use crate::table::{
    cell_text, class_worst_flagged, not_significant, notes, signed, trust_line, Footnotes,
};

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

/// The JSON document: `schema_version`, `tool`, `tool_version`, `kind`, the run's
/// `headline` ([`Results::headline`], every figure it names), then the results, every trial
/// with its samples but without its window series ([`json_document`] with `series`).
pub fn json_bytes(r: &Results) -> Vec<u8> {
    json_document(r, false)
}

/// The JSON document of [`json_bytes`], with every trial's window series (`series`: the
/// per-window values of an on/off trial) when `series` is true. The series are the raw data
/// behind the on/off estimates and most of a run's bytes (about 80% of a quick run's
/// export), so only an export that asks for them carries them.
pub fn json_document(r: &Results, series: bool) -> Vec<u8> {
    // The series are dropped before the document is built (a trial without series has no
    // `series` field), not from the built document: building a JSON value of every window
    // took most of an export's time.
    let without;
    let results = if series || r.trials.iter().all(|t| t.series.is_empty()) {
        r
    } else {
        let mut copy = r.clone();
        for t in &mut copy.trials {
            t.series = Vec::new();
        }
        without = copy;
        &without
    };
    let doc = json!({
        "schema_version": r.schema_version,
        "tool": "isobench",
        "tool_version": r.run.tool_version,
        "kind": "results",
        "headline": r.headline(),
        "results": results,
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
    "degradation_pct",
    "estimator",
    "ci_lower",
    "ci_upper",
    "ci_level",
    "ci_method",
    "ci_adjusted",
    "test",
    "p_unadjusted",
    "p_adjusted",
    "correction",
    "significant",
    "trustworthy",
    "flags",
    "dnr",
    "dnr_of",
    "dnr_reason",
    "causes",
];

fn csv_row(r: &Results, c: &Cell, role: &str) -> Vec<String> {
    let cmp = c.comparison.as_ref();
    let test = c.test();
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
        num(cmp.map(|x| x.degradation.estimate)),
        cmp.map(|x| x.degradation.estimator.as_str().to_string())
            .unwrap_or_default(),
        num(cmp.map(|x| x.degradation.lower)),
        num(cmp.map(|x| x.degradation.upper)),
        num(cmp.map(|x| x.degradation.level)),
        cmp.map(|x| x.degradation.method.as_str().to_string())
            .unwrap_or_default(),
        // Every interval is the cell's own; the significance may be corrected.
        cmp.map(|_| "false".to_string()).unwrap_or_default(),
        test.as_ref()
            .map(|t| t.name.to_string())
            .unwrap_or_default(),
        num(test.as_ref().map(|t| t.p_value)),
        num(test.as_ref().and_then(|t| t.p_adjusted)),
        match &test {
            Some(t) if t.p_adjusted.is_some() => r.trust.correction.clone(),
            Some(_) => "none".to_string(),
            None => String::new(),
        },
        cmp.map(|x| x.significant.to_string()).unwrap_or_default(),
        cmp.map(|_| (!c.untrustworthy()).to_string())
            .unwrap_or_default(),
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

/// Markdown: header, the headline, one table per victim with the aggressor rows, the worst
/// degradation per stressor class, each tenant's pressure stalls and delivered I/O, the trust
/// line and the notes.
pub fn markdown_bytes(r: &Results) -> Vec<u8> {
    let mut s = String::new();
    md_header(&mut s, r);
    md_matrix(&mut s, r);
    s.push_str(&crate::sections::markdown_sections(&r.sections));
    md_classes(&mut s, r);
    if let Some(u) = isobench_results::usage::usage_section(&r.usage) {
        s.push_str(&crate::sections::markdown_sections(&[u]));
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

/// The Markdown title, the run's line, why it ended so, and the headline table.
fn md_header(s: &mut String, r: &Results) {
    let _ = writeln!(s, "# isobench run {}\n", r.run.id);
    let _ = writeln!(
        s,
        "Scenario `{}`, platform `{}`, seed {}, status **{}** (isobench {}).\n",
        r.run.scenario, r.run.platform, r.run.seed, r.run.status, r.run.tool_version
    );
    if let Some(reason) = r.reason_line() {
        let _ = writeln!(s, "{}\n", md_escape(&reason));
    }
    let headline = r.headline();
    if !headline.resources.is_empty() {
        let _ = writeln!(
            s,
            "## Headline\n\nEach resource's worst significant victim degradation, worst \
             first.\n\n| resource | degradation | what stands behind it |\n|---|---:|---|"
        );
        for x in &headline.resources {
            let _ = writeln!(
                s,
                "| {} | {} | {} |",
                x.resource,
                md_escape(&x.figure()),
                md_escape(&x.detail())
            );
        }
        let _ = writeln!(s, "\n{}\n", md_escape(&headline.rule));
    }
}

/// One degradation table per victim, the statistic and legend lines, and the placement
/// footnotes.
fn md_matrix(s: &mut String, r: &Results) {
    let level = (r.interval_level() * 100.0).round();
    let footnotes = Footnotes::of(r);
    for table in r.matrix() {
        let _ = writeln!(
            s,
            "## Degradation of {}\n\nPercent, positive = worse: estimate ± half-width \
             of its {level}% interval.\n",
            crate::names::tenant_noun(table.victim, "victim"),
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
        "Statistic: {}. Interval: {}.\n",
        md_escape(&r.statistic_label()),
        md_escape(&r.interval_label())
    );
    let _ = writeln!(
        s,
        "`*` {}, `{UNTRUSTWORTHY_MARK}` untrustworthy, `v` better under contention (kept, not \
         clipped), `~` includes trials disturbed by outside load, `DNR k/n` k of n trials did \
         not respond.\n",
        md_escape(&r.significance_legend())
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
}

/// The worst victim degradation under each stressor class.
fn md_classes(s: &mut String, r: &Results) {
    let level = (r.interval_level() * 100.0).round();
    if !r.classes.is_empty() {
        let _ = writeln!(
            s,
            "## By the aggressor's resource\n\nThe worst victim degradation under each stressor \
             class, with the cell's own {level}% interval (unadjusted); \
             `{UNTRUSTWORTHY_MARK}` flagged.\n\n| stressor class | worst victim degradation | \
             {level}% CI | where |\n|---|---:|---|---|"
        );
        for c in &r.classes {
            match &c.worst {
                Some(w) => {
                    let _ = writeln!(
                        s,
                        "| {} | {}%{}{} | [{}, {}] | {} {} under {}{} |",
                        c.class.as_str(),
                        signed(w.estimate),
                        if class_worst_flagged(r, c) {
                            UNTRUSTWORTHY_MARK.to_string()
                        } else {
                            String::new()
                        },
                        if w.significant {
                            String::new()
                        } else {
                            format!(" ({})", not_significant(r))
                        },
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
}
