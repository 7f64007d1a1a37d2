//! The HTML report of a run: one self-contained file (inline CSS and SVG, no script, no
//! request to anywhere) that shows everything the run found, in charts and in tables that
//! read the same with JavaScript off and on paper.
//!
//! The page, top to bottom: the verdict (per resource: what leaks, how much, how sure, and
//! which results not to trust, each linked to its cell), the matrix of degradations (a heat
//! map and bars with intervals per victim, the aggressors' own degradation when measured),
//! each of the kind's sections drawn as its [`Plot`] says, how far to trust the run, the
//! latency distributions, and last what ran and where (host, platform, tenants with their
//! limits and CPUs, the disk's interrupt affinity, seed, version, times). Every chart mark
//! carries its exact value as a tooltip.

mod charts;
mod compare;
mod svg;
mod verdict;

pub use compare::html_comparison;

use crate::names::{capitalised, tenant_noun, tenant_title};
use std::fmt::Write as _;

use isobench_results::latency::{LatencyView, Role as LatencyRole};
use isobench_results::{Cell, MatrixTable, Plot, Results, Section, Value};
use isobench_store::Timestamp;

use charts::{Axes, Bar, Below, HeatCell, Line, Log, Point, Shade};
use svg::{esc, exact};

use crate::table::{cell_text, notes, trust_line, Footnotes};

const CSS: &str = include_str!("report.css");

/// Rows of a section's table shown before the rest is folded away.
const TABLE_ROWS: usize = 60;

/// The HTML report of `r`.
pub fn html_report(r: &Results) -> String {
    let mut page = Page::default();
    page.verdict(r);
    page.matrix(r);
    page.sections(r);
    page.trust(r);
    page.latency(r);
    page.header(r);
    page.finish(r)
}

#[derive(Default)]
struct Page {
    body: String,
    toc: Vec<(String, String)>,
}

impl Page {
    fn h2(&mut self, id: &str, title: &str) {
        self.toc.push((id.to_string(), title.to_string()));
        let _ = write!(self.body, r#"<h2 id="{}">{}</h2>"#, esc(id), esc(title));
    }

    fn header(&mut self, r: &Results) {
        let run = &r.run;
        self.h2("run", "What ran, where");
        let mut facts: Vec<(String, String)> = vec![
            ("scenario".into(), run.scenario.clone()),
            ("experiment kind".into(), r.kind.clone()),
            (
                "status".into(),
                match &run.status_reason {
                    Some(why) => format!("{}: {why}", run.status),
                    None => run.status.clone(),
                },
            ),
            (
                "platform".into(),
                format!("{} ({})", run.platform, run.platform_version),
            ),
        ];
        for c in &run.caveats {
            facts.push(("platform caveat".into(), c.clone()));
        }
        facts.extend([
            ("started".into(), run.started_at.clone()),
            (
                "ended".into(),
                run.ended_at.clone().unwrap_or_else(|| "-".into()),
            ),
            (
                "took".into(),
                took(&run.started_at, run.ended_at.as_deref()),
            ),
            ("seed".into(), run.seed.to_string()),
            ("isobench".into(), run.tool_version.clone()),
            (
                "confidence".into(),
                format!(
                    "{:.0}%, target +/-{} points",
                    r.confidence * 100.0,
                    r.target_half_width
                ),
            ),
            ("statistic".into(), r.estimator().to_string()),
        ]);
        if let Some(d) = r
            .plan
            .as_ref()
            .and_then(|p| p["description"].as_str())
            .filter(|d| !d.is_empty())
        {
            facts.insert(1, ("description".into(), d.to_string()));
        }
        self.body
            .push_str(r#"<div class="cols"><table class="facts"><caption>Run</caption><tbody>"#);
        for (k, v) in &facts {
            let _ = write!(self.body, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
        }
        self.body.push_str("</tbody></table>");
        self.body
            .push_str(r#"<table class="facts"><caption>Host</caption><tbody>"#);
        if let Some(host) = run.host.as_object() {
            for (k, v) in host
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "caches" | "device_irqs"))
            {
                let text = match v {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Null => "-".into(),
                    other => other.to_string(),
                };
                let text = if k == "mem_total" {
                    v.as_f64()
                        .map_or(text, |b| format!("{:.1} GiB", b / (1u64 << 30) as f64))
                } else {
                    text
                };
                let _ = write!(
                    self.body,
                    "<tr><th>{}</th><td>{}</td></tr>",
                    esc(&k.replace('_', " ")),
                    esc(&text)
                );
            }
        }
        self.body.push_str("</tbody></table></div>");
        self.tenants(r);
        self.irqs(r);
    }

    fn tenants(&mut self, r: &Results) {
        let planned = r.plan.as_ref().and_then(|p| p["tenants"].as_array());
        self.body.push_str(
            r#"<table><caption>Tenants</caption><thead><tr><th>tenant</th><th>role</th><th>limits</th><th>CPUs</th><th>probes pinned to</th></tr></thead><tbody>"#,
        );
        for t in &r.tenants {
            let plan = planned.and_then(|ts| {
                ts.iter()
                    .find(|p| p["name"].as_str() == Some(t.name.as_str()))
            });
            let cpus = plan.and_then(|p| p["cpus"].as_array()).map_or_else(
                || "-".to_string(),
                |c| {
                    c.iter()
                        .map(|v| v.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                },
            );
            let pin = plan.map_or_else(
                || "-".to_string(),
                |p| match (&p["pin"], &p["pin_peer"]) {
                    (serde_json::Value::Null, _) => "-".into(),
                    (a, serde_json::Value::Null) => format!("CPU {a}"),
                    (a, b) => format!("CPU {a} (peer {b})"),
                },
            );
            let limits = limits_text(&t.limits);
            let _ = write!(
                self.body,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&t.name),
                esc(&t.role),
                esc(&limits),
                esc(&cpus),
                esc(&pin)
            );
        }
        self.body.push_str("</tbody></table>");
    }

    /// The interrupts of the block devices and where they run (a disk's completions wait on
    /// the CPU its interrupt goes to).
    fn irqs(&mut self, r: &Results) {
        let Some(devices) = r.run.host["device_irqs"]
            .as_array()
            .filter(|d| !d.is_empty())
        else {
            return;
        };
        self.body.push_str(
            r#"<table><caption>Device interrupts (IRQ affinity)</caption><thead><tr><th>device</th><th>IRQ</th><th>description</th><th>allowed CPUs</th><th>effective CPUs</th><th>count per CPU</th></tr></thead><tbody>"#,
        );
        for d in devices {
            for irq in d["irqs"].as_array().into_iter().flatten() {
                let text = |k: &str| {
                    irq[k]
                        .as_str()
                        .map_or_else(|| irq[k].to_string(), str::to_string)
                };
                let _ = write!(
                    self.body,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    esc(d["device"].as_str().unwrap_or("?")),
                    esc(&text("irq")),
                    esc(&text("desc")),
                    esc(&text("affinity")),
                    esc(&text("effective_affinity")),
                    esc(&irq["per_cpu"].to_string())
                );
            }
        }
        self.body.push_str("</tbody></table>");
    }

    fn trust(&mut self, r: &Results) {
        self.h2("trust", "How far to trust it");
        let _ = write!(self.body, r#"<p class="trust">{}</p>"#, esc(&trust_line(r)));
        let t = &r.trust;
        if !t.designs.is_empty() {
            let d: Vec<String> = t
                .designs
                .iter()
                .map(|(k, v)| format!("{v} cells by {k}"))
                .collect();
            let _ = write!(
                self.body,
                "<p>Designs: {}. Significance: {}.</p>",
                esc(&d.join(", ")),
                esc(&r.significance_legend())
            );
        }
        let n = notes(r, usize::MAX);
        if !n.is_empty() {
            let _ = write!(
                self.body,
                "<details{}><summary>{} note(s) on single results</summary><ul>",
                if n.len() <= 8 { " open" } else { "" },
                n.len()
            );
            for line in n {
                let _ = write!(self.body, "<li>{}</li>", esc(&line));
            }
            self.body.push_str("</ul></details>");
        }
        if let Some(u) = isobench_results::usage::usage_section(&r.usage) {
            self.section(&u, r.sections.len());
        }
    }

    fn matrix(&mut self, r: &Results) {
        let tables = r.matrix();
        if tables.is_empty() {
            return;
        }
        self.h2("matrix", "Degradation under each misbehaviour");
        let level = (r.confidence * 100.0).round();
        let footnotes = Footnotes::of(r);
        let _ = write!(
            self.body,
            "<p>Percent, positive = worse; the {} of the contended values against the baseline, \
             with its {level}% confidence interval. Pale: untrustworthy (see the notes). \
             Hover for the exact figures.</p>",
            esc(r.estimator())
        );
        for (k, t) in tables.iter().enumerate() {
            let _ = write!(
                self.body,
                "<h3>{}</h3>",
                esc(&tenant_title(t.victim, "victim"))
            );
            self.body.push_str(&matrix_heat(t, k));
            self.body.push_str(&matrix_bars(r, t, k, level));
            self.body.push_str(&matrix_table(r, t, &footnotes));
        }
        let _ = write!(
            self.body,
            r#"<p class="legend">* {}; ? untrustworthy; v better under contention (kept, not clipped); ~ includes trials disturbed by outside load; DNR k/n: k of n trials did not respond.</p>"#,
            esc(&r.significance_legend())
        );
        if !footnotes.is_empty() {
            self.body.push_str("<p>[n] caused by placement, as measured (victim alone vs under the stressor):</p><ul>");
            for line in footnotes.lines() {
                let _ = write!(self.body, "<li>{}</li>", esc(&line));
            }
            self.body.push_str("</ul>");
        }
    }

    /// The latency distributions as the results crate pooled them ([`LatencyView`]): for
    /// each metric the run estimates, its percentiles and histogram per condition with a
    /// table; the metrics measured beside them as tables, folded away.
    fn latency(&mut self, r: &Results) {
        if r.latency.is_empty() {
            return;
        }
        self.h2("latency", "Latency distributions");
        self.body.push_str(
            "<p>Each distribution pools the trials its condition's estimate used. A paired \
             condition shows its trials and the baseline trials paired with them. An on/off \
             condition shows its trials whole, the aggressors running and frozen in turn: a \
             trial's histogram cannot tell the phases apart, so the table gives the off- and \
             on-phase figures the estimate itself compared, and the separate baseline trials \
             (which the on/off estimate does not use) are not drawn against it. Percentiles \
             (the x axis reads 1/(1-p), so the tail spreads out) describe the pooled values; \
             the degradation is the estimate's, over pairs or cycles.</p>",
        );
        let undecoded: u32 = r.latency.iter().map(|l| l.undecoded).sum();
        if undecoded > 0 {
            let _ = write!(
                self.body,
                "<p class=\"warn\">{undecoded} stored histogram(s) did not decode and are left out.</p>"
            );
        }
        let victims = r.tenants.iter().filter(|t| t.role == "victim").count();
        let title = |l: &LatencyView| {
            if victims > 1 {
                format!(
                    "{} {} in {}",
                    l.probe,
                    l.metric,
                    tenant_noun(&l.tenant, "victim")
                )
            } else {
                format!("{} {}", l.probe, l.metric)
            }
        };
        for (k, l) in r.latency.iter().filter(|l| l.estimated).enumerate() {
            let name = title(l);
            let _ = write!(self.body, "<h3>{}</h3>", esc(&name));
            self.body.push_str(&latency_percentiles(l, k, &name));
            self.body.push_str(&latency_histogram(l, k, &name));
            self.body.push_str(&latency_table(l));
            let mut pooling: Vec<String> = Vec::new();
            for d in &l.distributions {
                let line = format!("{}: {}.", d.label, d.pooling);
                if !pooling.contains(&line) {
                    pooling.push(line);
                }
            }
            self.body.push_str("<ul class=\"notes\">");
            for line in pooling {
                let _ = write!(self.body, "<li>{}</li>", esc(&line));
            }
            self.body.push_str("</ul>");
        }
        let beside: Vec<&LatencyView> = r.latency.iter().filter(|l| !l.estimated).collect();
        if !beside.is_empty() {
            let _ = write!(
                self.body,
                "<details><summary>{} more latency metric(s) measured beside the estimated ones, \
                 as tables (their trials chosen by the estimate of their probe)</summary>",
                beside.len()
            );
            for l in beside {
                let _ = write!(self.body, "<h4>{}</h4>", esc(&title(l)));
                self.body.push_str(&latency_table(l));
            }
            self.body.push_str("</details>");
        }
    }

    fn sections(&mut self, r: &Results) {
        if r.sections.is_empty() {
            return;
        }
        self.h2("kind", &format!("{} results", capitalised(&r.kind)));
        for (k, s) in r.sections.iter().enumerate() {
            self.section(s, k);
        }
    }

    /// A section under its title: its chart when it has a plot, its table (folded away
    /// when a chart stands for many rows), its notes.
    fn section(&mut self, s: &Section, k: usize) {
        let _ = write!(
            self.body,
            r#"<h3 id="section-{}">{}</h3>"#,
            esc(&s.id),
            esc(&s.title)
        );
        if let Some(p) = &s.plot {
            self.body.push_str(&section_plot(s, p, k));
        }
        if s.plot.is_some() && s.rows.len() > TABLE_ROWS {
            let _ = write!(
                self.body,
                "<details><summary>the {} rows behind the chart</summary>{}</details>",
                s.rows.len(),
                section_table(s)
            );
        } else {
            self.body.push_str(&section_table(s));
        }
        if !s.notes.is_empty() {
            self.body.push_str("<ul class=\"notes\">");
            for n in &s.notes {
                let _ = write!(self.body, "<li>{}</li>", esc(n));
            }
            self.body.push_str("</ul>");
        }
    }

    /// The verdict, first: per resource what leaks, how much, how sure, and which results
    /// not to trust, linked to the matrix.
    fn verdict(&mut self, r: &Results) {
        let v = verdict::verdict(r);
        if v.resources.is_empty() {
            return;
        }
        self.h2("verdict", "Verdict: isolation by resource");
        self.body.push_str(&verdict::render(r, &v));
    }

    fn finish(self, r: &Results) -> String {
        let sub = [
            r.run.scenario.as_str(),
            r.kind.as_str(),
            r.run.platform.as_str(),
            r.run.status.as_str(),
        ]
        .join(" · ");
        let footer = format!(
            "isobench {} · results schema {} · every figure from the run's stored trials; \
             `isobench export {} --format json` has the raw values.",
            r.run.tool_version, r.schema_version, r.run.id
        );
        self.wrap(
            &format!("isobench run {}", r.run.id),
            &sub,
            &r.run.tool_version,
            &footer,
        )
    }

    /// The whole document around the body: head with the style sheet, a header with the
    /// title, a subtitle and the contents, and a footer.
    fn wrap(self, title: &str, sub: &str, version: &str, footer: &str) -> String {
        let mut out = String::new();
        let _ = write!(
            out,
            r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><meta name="generator" content="isobench {}"><title>{}</title><style>{CSS}</style></head><body><header><h1>{}</h1><p class="sub">{}</p><nav><ul>"#,
            esc(version),
            esc(title),
            esc(title),
            esc(sub),
        );
        for (id, t) in &self.toc {
            let _ = write!(out, r##"<li><a href="#{}">{}</a></li>"##, esc(id), esc(t));
        }
        out.push_str("</ul></nav></header><main>");
        out.push_str(&self.body);
        let _ = writeln!(out, "</main><footer>{}</footer></body></html>", esc(footer));
        out
    }
}

/// A tenant's limits as recorded: the limits applied (and those asked for, when they
/// differ), with the platform's notes on them.
fn limits_text(v: &serde_json::Value) -> String {
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) if !s.is_empty() => s.clone(),
        serde_json::Value::String(_) | serde_json::Value::Null => "none".into(),
        other => other.to_string(),
    };
    let Some(o) = v.as_object() else {
        return text(v);
    };
    let applied = o.get("applied").map_or_else(|| text(v), text);
    let mut out = applied.clone();
    if let Some(req) = o.get("requested").map(text).filter(|r| *r != applied) {
        out.push_str(&format!(" (asked: {req})"));
    }
    for n in o
        .get("notes")
        .and_then(|n| n.as_array())
        .into_iter()
        .flatten()
    {
        out.push_str(&format!("; {}", n.as_str().unwrap_or_default()));
    }
    out
}

/// `1h 02m 03s` between two RFC 3339 times, `-` when either is missing or unreadable.
fn took(start: &str, end: Option<&str>) -> String {
    let (Ok(a), Some(Ok(b))) = (
        Timestamp::parse_rfc3339(start),
        end.map(Timestamp::parse_rfc3339),
    ) else {
        return "-".into();
    };
    let s = (b.unix_millis() - a.unix_millis()).max(0) / 1000;
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, sec) => format!("{m}m {sec:02}s"),
        (h, m, sec) => format!("{h}h {m:02}m {sec:02}s"),
    }
}

/// Text of a cell for a heat map: the rounded estimate and its marks.
fn short(c: &Cell) -> String {
    match (&c.comparison, &c.dnr) {
        (_, Some(d)) if c.all_dnr() => format!("DNR {}/{}", d.count, d.of),
        (Some(cmp), _) => format!("{:+.0}{}", cmp.degradation.estimate, crate::table::marks(c)),
        (None, _) => "n/a".into(),
    }
}

fn tip(c: &Cell, label: &str) -> String {
    let mut t = format!("{label} under {}: {}", c.condition, cell_text(c));
    if let Some(cmp) = &c.comparison {
        let _ = write!(
            t,
            "\nbaseline {} {u}, contended {} {u} ({} / {} values)",
            exact(cmp.baseline.median),
            exact(cmp.contended.median),
            c.baseline.len(),
            c.contended.len(),
            u = c.unit
        );
        if let Some(p) = c.p_adjusted {
            let _ = write!(t, "\np adjusted {p:.3}");
        }
        for r in cmp.untrustworthy_reasons() {
            let _ = write!(t, "\n? {r}");
        }
    }
    if let Some(d) = &c.dnr {
        let _ = write!(t, "\nDNR {}/{}: {}", d.count, d.of, d.reason);
    }
    for cause in &c.causes {
        let _ = write!(t, "\ncause: {}", cause.text);
    }
    t
}

fn faded(c: &Cell) -> bool {
    c.comparison.as_ref().is_some_and(|x| !x.trustworthy)
}

fn matrix_heat(t: &MatrixTable<'_>, k: usize) -> String {
    let rows: Vec<String> = t.rows.iter().map(|r| r.label()).collect();
    let cells: Vec<Vec<Option<HeatCell>>> = t
        .rows
        .iter()
        .map(|row| {
            row.cells
                .iter()
                .map(|c| {
                    c.map(|c| HeatCell {
                        value: if c.all_dnr() { None } else { c.estimate() },
                        text: short(c),
                        faded: faded(c),
                        tip: tip(c, &row.label()),
                    })
                })
                .collect()
        })
        .collect();
    charts::heat(
        &format!("matrix-{k}-heat"),
        &format!(
            "Degradation of {} per probe metric and condition, % (red worse, blue better)",
            tenant_noun(t.victim, "victim")
        ),
        &rows,
        &t.conditions,
        &cells,
        50.0,
    )
}

/// The bars of a victim's degradations, with the aggressors' own rate where the run measured
/// it; the title names only what the bars show, and a note says why the aggressors' rate is
/// missing when it is.
fn matrix_bars(r: &Results, t: &MatrixTable<'_>, k: usize, level: f64) -> String {
    let mut items = Vec::new();
    for (j, cond) in t.conditions.iter().enumerate() {
        for row in &t.rows {
            let Some(c) = row.cells[j] else { continue };
            let Some(cmp) = &c.comparison else { continue };
            items.push(Bar {
                label: format!("{} @ {cond}", row.label()),
                value: cmp.degradation.estimate,
                interval: Some((cmp.degradation.lower, cmp.degradation.upper)),
                series: usize::from(row.is_aggressor()),
                faded: faded(c),
                tip: tip(c, &row.label()),
            });
        }
    }
    if items.is_empty() {
        return String::new();
    }
    let victim = tenant_noun(t.victim, "victim");
    let with_aggressors = items.iter().any(|b| b.series == 1);
    let (title, series) = if with_aggressors {
        (
            format!("Degradation of {victim} and of the aggressors' own rate, % with {level}% CI"),
            vec![
                format!("{victim} (probe metrics)"),
                "aggressor (own rate)".to_string(),
            ],
        )
    } else {
        (
            format!("Degradation of {victim}, % with {level}% CI"),
            Vec::new(),
        )
    };
    let mut out = charts::bars(
        &format!("matrix-{k}-bars"),
        &title,
        "degradation, % (positive = worse)",
        &items,
        0.0,
        &series,
    );
    if !with_aggressors {
        // Each reason once, with the conditions it holds for.
        let mut reasons: Vec<(&str, Vec<&str>)> = Vec::new();
        for c in &r.aggressor {
            let Some(p) = c.problem.as_deref() else {
                continue;
            };
            match reasons.iter_mut().find(|(q, _)| *q == p) {
                Some((_, conds)) => conds.push(&c.condition),
                None => reasons.push((p, vec![&c.condition])),
            }
        }
        let why: Vec<String> = reasons
            .iter()
            .map(|(p, conds)| format!("under {}: {p}", conds.join(", ")))
            .collect();
        let _ = write!(
            out,
            r#"<p class="legend">The aggressors' own rate is not shown: {}.</p>"#,
            esc(&if r.aggressor.is_empty() {
                let solo_off =
                    r.plan.as_ref().and_then(|p| p["trial"]["solo"].as_f64()) == Some(0.0);
                if solo_off {
                    "this run did not measure it (it is measured in solo trials, which the \
                     scenario turned off: trial.solo = 0s)"
                        .to_string()
                } else {
                    "this run did not measure it".to_string()
                }
            } else if why.is_empty() {
                "no aggressor result has an estimate".to_string()
            } else {
                format!("no aggressor result has an estimate ({})", why.join("; "))
            })
        );
    }
    out
}

fn matrix_table(r: &Results, t: &MatrixTable<'_>, footnotes: &Footnotes) -> String {
    let mut s = String::from("<table class=\"matrix\"><thead><tr><th>probe metric</th>");
    for c in &t.conditions {
        let _ = write!(s, "<th>{}</th>", esc(c));
    }
    s.push_str("</tr></thead><tbody>");
    for row in &t.rows {
        let _ = write!(s, "<tr><th>{}</th>", esc(&row.label()));
        for c in &row.cells {
            match c {
                Some(c) => {
                    let class = if c.dnr.is_some() {
                        "dnr"
                    } else if faded(c) {
                        "untrusted"
                    } else if c
                        .comparison
                        .as_ref()
                        .is_some_and(|x| x.significant && x.degradation.estimate >= 5.0)
                    {
                        "worse"
                    } else {
                        ""
                    };
                    let id = verdict::cell_id(r, c)
                        .map_or_else(String::new, |id| format!(r#" id="{}""#, esc(&id)));
                    let _ = write!(
                        s,
                        r#"<td{id} class="num {class}" title="{}">{}{}</td>"#,
                        esc(&tip(c, &row.label())),
                        esc(&cell_text(c)),
                        esc(&footnotes.marker(c))
                    );
                }
                None => s.push_str("<td class=\"num\">-</td>"),
            }
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    s
}

/// The percentile plot of a latency view: a line per distribution.
fn latency_percentiles(l: &LatencyView, k: usize, name: &str) -> String {
    let lines: Vec<Line> = l
        .distributions
        .iter()
        .map(|d| Line {
            name: d.label.clone(),
            points: l
                .percentiles
                .iter()
                .zip(&d.quantiles)
                .map(|(&p, &v)| Point {
                    x: 100.0 / (100.0 - p),
                    y: v,
                    interval: None,
                    tip: format!(
                        "{}: p{p} = {} {} ({} values, {} trials)",
                        d.label,
                        exact(v),
                        l.unit,
                        d.values,
                        d.trials
                    ),
                })
                .collect(),
        })
        .collect();
    let marks: Vec<(f64, String)> = [50.0, 90.0, 99.0, 99.9]
        .iter()
        .map(|&p| (100.0 / (100.0 - p), format!("p{p}")))
        .collect();
    charts::curve(
        &format!("latency-{k}-percentiles"),
        &format!("{name}: percentiles"),
        Axes {
            x: "percentile (as 1/(1-p))",
            y: &with_unit(&l.metric, &l.unit),
            log: Log { x: true, y: true },
        },
        &lines,
        None,
        &marks,
    )
}

/// The histogram plot of a latency view: the share of values per logarithmic bin.
fn latency_histogram(l: &LatencyView, k: usize, name: &str) -> String {
    let lines: Vec<Line> = l
        .distributions
        .iter()
        .map(|d| Line {
            name: d.label.clone(),
            points: d
                .bins
                .iter()
                .map(|b| Point {
                    x: (b.from * b.to).sqrt(),
                    y: b.share * 100.0,
                    interval: None,
                    tip: format!(
                        "{}: {:.1}% of values in {}..{} {}",
                        d.label,
                        b.share * 100.0,
                        exact(b.from),
                        exact(b.to),
                        l.unit
                    ),
                })
                .collect(),
        })
        .collect();
    charts::curve(
        &format!("latency-{k}-histogram"),
        &format!("{name}: histogram"),
        Axes {
            x: &with_unit(&l.metric, &l.unit),
            y: "% of values",
            log: Log { x: true, y: false },
        },
        &lines,
        None,
        &[],
    )
}

/// A latency view's table: per distribution, what it pools, its percentiles with their
/// unit, and what the condition's estimate compared.
fn latency_table(l: &LatencyView) -> String {
    let mut s = String::from(
        "<table class=\"latency\"><thead><tr><th>distribution</th><th>trials</th><th>values</th>",
    );
    for p in &l.percentiles {
        let _ = write!(s, "<th>p{p} [{}]</th>", esc(&l.unit));
    }
    let _ = write!(
        s,
        "<th>the estimate compared: median of its units [{}]</th><th>degradation [%]</th></tr></thead><tbody>",
        esc(&l.unit)
    );
    for d in &l.distributions {
        let _ = write!(
            s,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>",
            esc(&d.label),
            d.trials,
            d.values
        );
        for v in &d.quantiles {
            let _ = write!(s, "<td class=\"num\">{}</td>", esc(&value_text(*v)));
        }
        match &d.estimate {
            Some(e) => {
                let (off, on, units) = match d.design {
                    Some(isobench_results::Design::OnOff) => ("off-phases", "on-phases", "cycles"),
                    _ => ("baseline", "contended", "pairs"),
                };
                let _ = write!(
                    s,
                    "<td>{off} {} &rarr; {on} {} ({} {units})</td><td class=\"num\">{} [{}, {}]{}</td>",
                    esc(&value_text(e.reference_median)),
                    esc(&value_text(e.contended_median)),
                    e.units,
                    esc(&crate::table::signed(e.degradation)),
                    esc(&crate::table::signed(e.lower)),
                    esc(&crate::table::signed(e.upper)),
                    if e.significant { "*" } else { "" }
                );
            }
            None if d.role == LatencyRole::Reference => {
                s.push_str("<td>the reference of the row below</td><td></td>");
            }
            None => s.push_str("<td>-</td><td></td>"),
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    s
}

/// A latency value as read: whole numbers as such (a histogram's values are), others with
/// the decimals [`exact`] gives.
fn value_text(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        exact(v)
    }
}

/// An axis label with its unit: `fork_p50_ns, ns`.
fn with_unit(name: &str, unit: &str) -> String {
    if unit.is_empty() {
        name.to_string()
    } else {
        format!("{name}, {unit}")
    }
}

/// A number read from a value: a number, an estimate, or text that reads as one.
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Text { text } => text.trim().trim_end_matches('%').parse().ok(),
        other => other.as_f64(),
    }
}

fn interval(v: &Value) -> Option<(f64, f64)> {
    match v {
        Value::Estimate { lower, upper, .. } => Some((*lower, *upper)),
        _ => None,
    }
}

fn row_label(row: &[Value], cols: &[usize]) -> String {
    cols.iter()
        .filter_map(|&i| row.get(i))
        .map(Value::text)
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join(" · ")
        .trim()
        .to_string()
}

fn value_tip(s: &Section, row: &[Value]) -> String {
    s.columns
        .iter()
        .zip(row)
        .map(|(c, v)| format!("{}: {}", c.header(), v.text()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn section_plot(s: &Section, plot: &Plot, k: usize) -> String {
    let id = format!("section-{k}-{}", s.id);
    let unit = |cols: &[usize]| {
        cols.iter()
            .filter_map(|&i| s.columns.get(i)?.unit.clone())
            .next()
            .unwrap_or_default()
    };
    let x_label = |x: usize| s.columns.get(x).map(|c| c.header()).unwrap_or_default();
    // A curve's value axis: the unit, or the one column's name when it has none.
    let value_label = |cols: &[usize]| match (unit(cols), cols) {
        (u, [one]) if u.is_empty() => s.columns.get(*one).map(|c| c.name.clone()).unwrap_or(u),
        (u, _) => u,
    };
    match plot {
        Plot::Curve {
            x,
            y,
            by,
            limit,
            marks,
            y2,
        } => {
            let lines = curve_lines(s, *x, y, by);
            let below = curve_lines(s, *x, y2, by);
            let marks: Vec<(f64, String)> = marks.iter().map(|g| (g.at, g.label.clone())).collect();
            let both: Vec<Line> = lines.iter().chain(&below).cloned().collect();
            let y2_label = value_label(y2);
            charts::curve_over(
                &id,
                &s.title,
                Axes {
                    x: &x_label(*x),
                    y: &value_label(y),
                    log: Log {
                        x: spans_decades(&both),
                        y: false,
                    },
                },
                &lines,
                limit.as_ref().map(|g| (g.at, g.label.as_str())),
                &marks,
                Some(Below {
                    y: &y2_label,
                    lines: &below,
                }),
            )
        }
        Plot::Bars {
            label,
            y,
            reference,
        } => {
            let items = bar_items(s, label, y);
            if items.is_empty() {
                return String::new();
            }
            let names: Vec<String> = y.iter().map(|&i| s.columns[i].header()).collect();
            let series = if names.len() > 1 { names } else { Vec::new() };
            charts::bars(
                &id,
                &s.title,
                &unit(y),
                &items,
                reference.unwrap_or(0.0),
                &series,
            )
        }
        Plot::Series { x, y, spans } => {
            let shades: Vec<Shade> = spans
                .iter()
                .map(|sp| Shade {
                    from: sp.from,
                    to: sp.to,
                    label: sp.label.clone(),
                })
                .collect();
            charts::series(
                &id,
                &s.title,
                &x_label(*x),
                &series_panels(s, *x, y),
                &shades,
            )
        }
        Plot::Heat { row, col, value } => section_heat(s, &id, *row, *col, *value),
    }
}

/// The lines of a [`Plot::Curve`]: a line per `y` column and per distinct text of the `by`
/// columns, each point at the number of column `x`, in order of it.
fn curve_lines(s: &Section, x: usize, y: &[usize], by: &[usize]) -> Vec<Line> {
    let mut lines: Vec<Line> = Vec::new();
    for &yi in y {
        for row in &s.rows {
            let (Some(xv), Some(yv)) = (
                row.get(x).and_then(number),
                row.get(yi).and_then(Value::as_f64),
            ) else {
                continue;
            };
            let group = row_label(row, by);
            let name = match (y.len(), group.is_empty()) {
                (1, false) => group,
                (_, false) => format!("{} · {group}", s.columns[yi].name),
                _ => s.columns[yi].name.clone(),
            };
            let point = Point {
                x: xv,
                y: yv,
                interval: row.get(yi).and_then(interval),
                tip: format!("{name}\n{}", value_tip(s, row)),
            };
            match lines.iter_mut().find(|l| l.name == name) {
                Some(l) => l.points.push(point),
                None => lines.push(Line {
                    name,
                    points: vec![point],
                }),
            }
        }
    }
    for l in &mut lines {
        l.points.sort_by(|a, b| a.x.total_cmp(&b.x));
    }
    lines
}

/// Whether the lines' positive settings span enough (more than two, 50 times apart) for a
/// logarithmic axis.
fn spans_decades(lines: &[Line]) -> bool {
    let xs: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.x))
        .filter(|v| *v > 0.0)
        .collect();
    xs.len() > 2
        && xs.iter().copied().fold(0.0, f64::max) / xs.iter().copied().fold(f64::INFINITY, f64::min)
            >= 50.0
}

/// The bars of a [`Plot::Bars`]: a group per row, labelled by the `label` columns, a bar per
/// `y` column.
fn bar_items(s: &Section, label: &[usize], y: &[usize]) -> Vec<Bar> {
    s.rows
        .iter()
        .flat_map(|row| {
            y.iter().enumerate().filter_map(move |(n, &yi)| {
                let v = row.get(yi)?;
                Some(Bar {
                    label: row_label(row, label),
                    value: v.as_f64()?,
                    interval: interval(v),
                    series: n,
                    faded: matches!(v, Value::Estimate { flag: Some(_), .. }),
                    tip: value_tip(s, row),
                })
            })
        })
        .collect()
}

/// The panels of a [`Plot::Series`]: each `y` column against the time in column `x`, a
/// panel per unit.
fn series_panels(s: &Section, x: usize, y: &[usize]) -> Vec<(String, Vec<Line>)> {
    let mut panels: Vec<(String, Vec<Line>)> = Vec::new();
    for &yi in y {
        let u = s.columns[yi].unit.clone().unwrap_or_default();
        let line = Line {
            name: s.columns[yi].name.clone(),
            points: s
                .rows
                .iter()
                .filter_map(|row| {
                    let (xv, yv) = (row.get(x)?.as_f64()?, row.get(yi)?.as_f64()?);
                    Some(Point {
                        x: xv,
                        y: yv,
                        interval: None,
                        tip: format!("{} at {} s: {}", s.columns[yi].name, exact(xv), exact(yv)),
                    })
                })
                .collect(),
        };
        match panels.iter_mut().find(|(pu, _)| *pu == u) {
            Some((_, ls)) => ls.push(line),
            None => panels.push((u, vec![line])),
        }
    }
    panels
}

/// A [`Plot::Heat`]: a cell per row at the text of columns `row` and `col`, coloured by how
/// far column `value` lies from the median the section carries (red above, blue below).
fn section_heat(s: &Section, id: &str, row: usize, col: usize, value: usize) -> String {
    let mut rows: Vec<String> = Vec::new();
    let mut cols: Vec<String> = Vec::new();
    for r in &s.rows {
        let (a, b) = (r[row].text(), r[col].text());
        if !rows.contains(&a) {
            rows.push(a);
        }
        if !cols.contains(&b) {
            cols.push(b);
        }
    }
    let mut cells = vec![vec![None; cols.len()]; rows.len()];
    for r in &s.rows {
        let i = rows.iter().position(|x| *x == r[row].text()).unwrap_or(0);
        let j = cols.iter().position(|x| *x == r[col].text()).unwrap_or(0);
        let v = r[value].as_f64();
        cells[i][j] = Some(HeatCell {
            value: v,
            text: v.map_or_else(|| r[value].text(), |v| format!("{v:.3}")),
            faded: false,
            tip: value_tip(s, r),
        });
    }
    // Sequential colouring around the median the analysis computed: red above, blue below.
    let mid = s.heat_median.unwrap_or(0.0);
    for row in &mut cells {
        for c in row.iter_mut().flatten() {
            c.value = c.value.map(|v| {
                if mid.abs() > 0.0 {
                    (v / mid - 1.0) * 100.0
                } else {
                    v
                }
            });
        }
    }
    charts::heat(
        id,
        &format!("{} (colour: % from the median {})", s.title, exact(mid)),
        &rows,
        &cols,
        &cells,
        20.0,
    )
}

/// A section's rows as a table; nothing for a section without rows (its notes say why).
fn section_table(s: &Section) -> String {
    if s.rows.is_empty() {
        return String::new();
    }
    let mut out = String::from("<table><thead><tr>");
    for h in s.headers() {
        let _ = write!(out, "<th>{}</th>", esc(&h));
    }
    out.push_str("</tr></thead><tbody>");
    let rows = s.text_rows();
    let long = rows.len() > TABLE_ROWS;
    for (i, row) in rows.iter().enumerate() {
        if long && i == TABLE_ROWS {
            let _ = write!(
                out,
                "</tbody></table><details><summary>{} more rows</summary><table><tbody>",
                rows.len() - TABLE_ROWS
            );
        }
        out.push_str("<tr>");
        for (j, cell) in row.iter().enumerate() {
            let num = matches!(
                s.rows[i].get(j),
                Some(Value::Number { .. } | Value::Estimate { .. })
            );
            let _ = write!(
                out,
                "<td{}>{}</td>",
                if num { " class=\"num\"" } else { "" },
                esc(cell)
            );
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    if long {
        out.push_str("</details>");
    }
    out
}
