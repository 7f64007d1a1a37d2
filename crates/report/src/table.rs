//! The terminal report of a run: degradation per probe metric and stressor with its
//! confidence interval and marks, the aggressor's own row, DNR, the isolation summary per
//! resource class and a line on how far to trust it all.

use std::fmt::Write as _;

use isobench_results::usage::NOTABLE_STALL;
use isobench_results::{Cell, ClassSummary, Headline, Results, UNTRUSTWORTHY_MARK};

pub use crate::grid::Style;
use crate::grid::{pad_left, pad_right, paint, visible_width, BOLD, DIM, GREEN, RED, YELLOW};
pub(crate) use crate::grid::{render_grid, Row};

/// `+12.3`, `-4.0`, `+0.0`.
pub fn signed(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 {
            "+inf".into()
        } else {
            "-inf".into()
        };
    }
    let r = (v * 10.0).round() / 10.0;
    if r == 0.0 {
        "+0.0".into()
    } else {
        format!("{r:+.1}")
    }
}

/// `2.3`, `inf`.
pub fn half(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.1}")
    } else {
        "inf".into()
    }
}

/// The marks of a cell: `*` significant, `?` untrustworthy ([`UNTRUSTWORTHY_MARK`], the
/// same in every table), `v` improved under contention.
pub fn marks(c: &Cell) -> String {
    let Some(cmp) = &c.comparison else {
        return String::new();
    };
    let mut m = String::new();
    if cmp.significant {
        m.push('*');
    }
    if cmp.significant && cmp.degradation.estimate < 0.0 {
        m.push('v');
    }
    if c.untrustworthy() {
        m.push(UNTRUSTWORTHY_MARK);
    }
    if c.disturbed > 0 {
        m.push('~');
    }
    m
}

/// One cell as text, plain: `+23.3±0.7*`, `DNR 3/3`, `+2.0±1.1 DNR 1/4`, `n/a`.
pub fn cell_text(c: &Cell) -> String {
    let dnr = c.dnr.as_ref().map(|d| format!("DNR {}/{}", d.count, d.of));
    match (&c.comparison, dnr) {
        (Some(cmp), None) => format!(
            "{}±{}{}",
            signed(cmp.degradation.estimate),
            half(cmp.degradation.half_width()),
            marks(c)
        ),
        (Some(cmp), Some(d)) => format!(
            "{}±{}{} {d}",
            signed(cmp.degradation.estimate),
            half(cmp.degradation.half_width()),
            marks(c)
        ),
        (None, Some(d)) => d,
        (None, None) => "n/a".into(),
    }
}

fn cell_painted(c: &Cell, style: Style) -> String {
    let text = cell_text(c);
    let code = if c.dnr.is_some() {
        YELLOW
    } else if let Some(cmp) = &c.comparison {
        if !cmp.trustworthy {
            DIM
        } else if cmp.significant && cmp.degradation.estimate < 0.0 {
            GREEN
        } else if cmp.significant && cmp.degradation.estimate >= 5.0 {
            RED
        } else {
            ""
        }
    } else {
        DIM
    };
    paint(&text, code, style)
}

/// The causes of the victim cells as numbered footnotes: each distinct set of causes once,
/// with the cells it explains (the metrics of one probe run under one stressor share their
/// trials' evidence, so usually their causes too).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Footnotes {
    /// Per footnote: the cells and the causes' text.
    entries: Vec<(Vec<CellKey>, String)>,
}

/// A cell by probe, metric and condition.
type CellKey = (String, String, String);

impl Footnotes {
    /// The footnotes of a run's victim cells.
    pub fn of(r: &Results) -> Footnotes {
        let mut f = Footnotes::default();
        for c in r.cells.iter().filter(|c| !c.causes.is_empty()) {
            let text = Self::text(c);
            let cell = (c.probe.clone(), c.metric.clone(), c.condition.clone());
            match f.entries.iter_mut().find(|(_, t)| *t == text) {
                Some((cells, _)) => cells.push(cell),
                None => f.entries.push((vec![cell], text)),
            }
        }
        f
    }

    fn text(c: &Cell) -> String {
        let kinds: Vec<&str> = c.causes.iter().map(|x| x.kind.as_str()).collect();
        let texts: Vec<&str> = c.causes.iter().map(|x| x.text.as_str()).collect();
        format!("({}) {}", kinds.join(", "), texts.join("; "))
    }

    /// The footnote number of a cell (from 1), when it has causes.
    pub fn number(&self, c: &Cell) -> Option<usize> {
        if c.causes.is_empty() {
            return None;
        }
        let text = Self::text(c);
        self.entries
            .iter()
            .position(|(_, t)| *t == text)
            .map(|i| i + 1)
    }

    /// The marker appended to a cell: `[2]`, or nothing.
    pub fn marker(&self, c: &Cell) -> String {
        self.number(c)
            .map_or_else(String::new, |n| format!("[{n}]"))
    }

    /// True when no cell has a cause.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// One line per footnote: `[1] disk-io dioread_mbps, diowrite_mbps @ cpu@100: (kinds)
    /// sentences`.
    pub fn lines(&self) -> Vec<String> {
        self.entries
            .iter()
            .enumerate()
            .map(|(i, (cells, text))| {
                let mut groups: Vec<(String, Vec<String>)> = Vec::new();
                for (probe, metric, cond) in cells {
                    let key = format!("{probe} @ {cond}");
                    match groups.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, m)) => m.push(metric.clone()),
                        None => groups.push((key, vec![metric.clone()])),
                    }
                }
                let who: Vec<String> = groups
                    .iter()
                    .map(|(k, m)| {
                        let (probe, cond) = k.split_once(" @ ").unwrap_or((k, ""));
                        format!("{probe} {} @ {cond}", m.join(", "))
                    })
                    .collect();
                format!("[{}] {}: {text}", i + 1, who.join("; "))
            })
            .collect()
    }
}

/// True when the cell a class summary names is flagged untrustworthy.
pub(crate) fn class_worst_flagged(r: &Results, c: &ClassSummary) -> bool {
    c.worst.as_ref().is_some_and(|w| {
        r.cells.iter().any(|x| {
            x.tenant == w.tenant
                && x.probe == w.probe
                && x.metric == w.metric
                && x.condition == w.condition
                && x.untrustworthy()
        })
    })
}

/// `not significant after Holm correction`, or `not significant` for a run that tested each
/// cell alone: beside an interval that may exclude 0.
pub(crate) fn not_significant(r: &Results) -> String {
    if r.corrected() {
        format!("not significant after {} correction", r.trust.correction)
    } else {
        "not significant".to_string()
    }
}

fn class_line(r: &Results, c: &ClassSummary) -> String {
    let name = c.class.as_str();
    match &c.worst {
        Some(w) => {
            let flagged = class_worst_flagged(r, c);
            let mut s = format!(
                "  {name:<8} {:>7}%{}  [{}, {}]  {}/{} under {}{}",
                signed(w.estimate),
                if flagged {
                    UNTRUSTWORTHY_MARK.to_string()
                } else {
                    " ".to_string()
                },
                signed(w.lower),
                signed(w.upper),
                w.probe,
                w.metric,
                w.condition,
                if w.significant {
                    String::new()
                } else {
                    format!("  ({})", not_significant(r))
                }
            );
            if c.dnr_cells > 0 {
                let _ = write!(s, "; {} result(s) DNR", c.dnr_cells);
            }
            s
        }
        None if c.dnr_cells > 0 => format!("  {name:<8} DNR ({} result(s))", c.dnr_cells),
        None => format!("  {name:<8} no result"),
    }
}

/// The whole terminal report.
pub fn render(r: &Results, style: Style) -> String {
    let mut out = String::new();
    render_header(&mut out, r, style);
    let level = (r.interval_level() * 100.0).round();
    render_matrix(&mut out, r, style, level);

    out.push_str(&crate::sections::render_sections(
        &r.sections,
        r.run.id.as_str(),
        style,
    ));

    if !r.classes.is_empty() {
        let _ = writeln!(
            out,
            "\nBy the aggressor's resource (stressor class): worst victim degradation, \
             {level}% interval of the cell, unadjusted; {UNTRUSTWORTHY_MARK} flagged:"
        );
        for c in &r.classes {
            let _ = writeln!(out, "{}", class_line(r, c));
        }
    }

    let _ = writeln!(out, "\n{}", trust_line(r));
    let notes = notes(r, 8);
    if !notes.is_empty() {
        let _ = writeln!(out, "Notes:");
        for n in notes {
            let _ = writeln!(out, "  {n}");
        }
    }
    out
}

/// The run line, the host, why the run stopped, its caveats and the headline.
fn render_header(out: &mut String, r: &Results, style: Style) {
    let _ = writeln!(
        out,
        "{}",
        paint(
            &format!(
                "run {} · scenario {} · platform {} · seed {} · {}",
                r.run.id, r.run.scenario, r.run.platform, r.run.seed, r.run.status
            ),
            BOLD,
            style
        )
    );
    let host = r.run.host_summary();
    if !host.is_empty() {
        let _ = writeln!(out, "host: {host}");
    }
    if let Some(reason) = r.reason_line() {
        let _ = writeln!(out, "{reason}");
    }
    for c in &r.run.caveats {
        let _ = writeln!(out, "{}", paint(&format!("warning: {c}"), BOLD, style));
    }
    let headline = r.headline();
    if !headline.resources.is_empty() {
        let _ = writeln!(
            out,
            "\n{}",
            paint(
                "Headline: each resource's worst significant victim degradation, worst first",
                BOLD,
                style
            )
        );
        for line in headline_lines(&headline) {
            let _ = writeln!(out, "{line}");
        }
    }
}

/// The degradation matrices of the victims (`level`: the interval's level, percent), their
/// legend and the placement footnotes.
fn render_matrix(out: &mut String, r: &Results, style: Style, level: f64) {
    let footnotes = Footnotes::of(r);
    if r.cells.is_empty() && r.sections.is_empty() {
        let _ = writeln!(out, "\nno trial has produced a result yet");
    }
    for table in r.matrix() {
        let _ = writeln!(
            out,
            "\nDegradation of {}, % (positive = worse): estimate ± half-width of its \
             {level}% interval",
            crate::names::tenant_noun(table.victim, "victim"),
        );
        let rows: Vec<Row> = table
            .rows
            .iter()
            .map(|row| Row {
                label: row.label(),
                cells: row
                    .cells
                    .iter()
                    .map(|c| {
                        c.map_or_else(
                            || "-".to_string(),
                            |x| format!("{}{}", cell_painted(x, style), footnotes.marker(x)),
                        )
                    })
                    .collect(),
            })
            .collect();
        render_grid(out, "probe metric", &table.conditions, &rows, style);
    }
    if !r.cells.is_empty() || !r.aggressor.is_empty() {
        let _ = writeln!(
            out,
            "\nstatistic: {}; interval: {}",
            r.statistic_label(),
            r.interval_label()
        );
        let _ = writeln!(
            out,
            "* {}  {UNTRUSTWORTHY_MARK} untrustworthy (see below)  v better under contention \
             (kept, not clipped)  ~ includes trials disturbed by outside load  DNR k/n: k of n \
             trials did not respond",
            r.significance_legend()
        );
    }
    if !footnotes.is_empty() {
        let _ = writeln!(
            out,
            "[n] caused by placement, as measured (victim alone vs under the stressor):"
        );
        for line in footnotes.lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
}

/// The headline as terminal lines: a resource per line (its figure, then what stands
/// behind it), then the rule that chose them.
pub fn headline_lines(h: &Headline) -> Vec<String> {
    let name_w = h
        .resources
        .iter()
        .map(|x| visible_width(&x.resource))
        .max()
        .unwrap_or(0);
    let fig_w = h
        .resources
        .iter()
        .map(|x| visible_width(&x.figure()))
        .max()
        .unwrap_or(0);
    let mut out: Vec<String> = h
        .resources
        .iter()
        .map(|x| {
            format!(
                "  {}  {}  {}",
                pad_right(&x.resource, name_w),
                pad_left(&x.figure(), fig_w),
                x.detail()
            )
        })
        .collect();
    out.push(format!("  ({})", h.rule));
    out
}

/// One line on how far to trust the run: trials, noise seen, trials repeated.
pub fn trust_line(r: &Results) -> String {
    let t = &r.trust;
    let mut s = format!(
        "Trust: {} trials in {} rounds ({} ok, {} disturbed by load from outside the run: {} \
         repeated, {} kept and flagged; {} DNR, {} failed)",
        t.trials, t.rounds, t.ok, t.disturbed, t.repeated, t.disturbed_kept, t.dnr, t.failed
    );
    match (t.outside_load_max, t.outside_load_median) {
        (Some(max), Some(med)) => {
            let _ = write!(
                s,
                "; load from outside the run: median {med:.2}, max {max:.2} CPUs"
            );
        }
        _ => s.push_str("; load from outside the run: not measured"),
    }
    if let Some(cv) = t.baseline_cv_median {
        let _ = write!(s, "; baseline noise (median CV) {:.1}%", cv * 100.0);
    }
    if !t.designs.is_empty() {
        let d: Vec<String> = t.designs.iter().map(|(k, v)| format!("{v} {k}")).collect();
        let _ = write!(s, "; designs: {}", d.join(", "));
    }
    if let Some(st) = t.steal_max {
        let _ = write!(s, "; steal max {st:.2} CPUs");
    }
    if let Some(p) = t.cpu_pressure_median {
        let _ = write!(s, "; host-wide CPU pressure median {:.0}%", p * 100.0);
    }
    victim_pressure(&mut s, t);
    if let (Some(min), Some(med)) = (t.canary_speed_min, t.canary_speed_median) {
        let _ = write!(s, "; canary speed median {med:.2}, min {min:.2}");
    }
    if !t.noise_causes.is_empty() {
        let d: Vec<String> = t
            .noise_causes
            .iter()
            .map(|(k, v)| format!("{k} in {v}"))
            .collect();
        let _ = write!(s, "; host noise seen: {} trial(s)", d.join(", "));
    }
    let _ = write!(
        s,
        "; {} result(s) wider than +/-{} points, {} untrustworthy",
        t.wide,
        r.target_half_width,
        r.flagged_count()
    );
    if t.improved > 0 {
        let _ = write!(s, ", {} better under contention", t.improved);
    }
    if t.victim_cells > 0 {
        let _ = write!(
            s,
            "; {} of {} victim cells significant, {} intervals contain 0",
            t.significant, t.victim_cells, t.covering_zero
        );
    }
    s.push('.');
    s
}

/// What the trust says about the victims' own pressure stalls: the worst one at or above
/// [`NOTABLE_STALL`] with its condition, or that none reached it, or that the platform has
/// no per-tenant pressure; nothing when no tenant usage was recorded.
fn victim_pressure(s: &mut String, t: &isobench_results::Trust) {
    match (t.victim_pressure_measured, t.victim_stalls.first()) {
        (Some(true), Some(w)) => {
            let _ = write!(
                s,
                "; victim stalled: {} on {} {:.0}% of the time under {} (median of {} trial(s)",
                w.tenant,
                w.resource,
                w.stall.some_median * 100.0,
                w.condition,
                w.trials
            );
            if let Some(f) = w.stall.full_median {
                let _ = write!(s, ", all tasks {:.0}%", f * 100.0);
            }
            s.push(')');
            if t.victim_stalls.len() > 1 {
                let _ = write!(
                    s,
                    ", {} more at or over {:.0}%",
                    t.victim_stalls.len() - 1,
                    NOTABLE_STALL * 100.0
                );
            }
        }
        (Some(true), None) => {
            let _ = write!(
                s,
                "; victim pressure under {:.0}% of the time",
                NOTABLE_STALL * 100.0
            );
        }
        (Some(false), _) => {
            s.push_str("; victim pressure n/a (no per-cgroup PSI, as on cgroup v1)")
        }
        (None, _) => {}
    }
}

/// Reasons behind `?` and DNR marks, at most `max` lines.
pub fn notes(r: &Results, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut more = 0;
    for c in r.cells.iter().chain(&r.aggressor) {
        let who = if c.probe == isobench_results::SOLO_PROBE {
            format!("aggressor {} @ {}", c.tenant, c.condition)
        } else {
            format!("{} {} @ {}", c.probe, c.metric, c.condition)
        };
        let mut reasons: Vec<String> = Vec::new();
        if let Some(cmp) = &c.comparison {
            reasons.extend(cmp.untrustworthy_reasons());
        }
        if let Some(d) = &c.dnr {
            reasons.push(format!("DNR {}/{}: {}", d.count, d.of, d.reason));
        }
        if c.disturbed > 0 {
            reasons.push(format!(
                "{} value(s) from trials disturbed by load from outside the run",
                c.disturbed
            ));
        }
        if c.comparison.is_none() && c.dnr.is_none() {
            if let Some(p) = &c.problem {
                reasons.push(p.clone());
            }
        }
        if reasons.is_empty() {
            continue;
        }
        if out.len() < max {
            out.push(format!("{who}: {}", reasons.join("; ")));
        } else {
            more += 1;
        }
    }
    if more > 0 {
        out.push(format!(
            "... and {more} more (`isobench export {} --format json` has every flag)",
            r.run.id
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_characters_take_two_columns() {
        assert_eq!(visible_width("内存"), 4);
        assert_eq!(visible_width("🔥x"), 3);
        assert_eq!(visible_width("\x1b[1mab\x1b[0m"), 2);
    }

    /// A column with a CJK cell used to end a column early: each char counted as one.
    #[test]
    fn grid_columns_align_with_wide_characters() {
        let rows = [
            Row {
                label: "磁盘".into(),
                cells: vec!["+1.0".into(), "内存压力".into()],
            },
            Row {
                label: "cpu".into(),
                cells: vec!["+12.5".into(), "ok".into()],
            },
        ];
        let mut out = String::new();
        let columns = ["Δ".to_string(), "note".to_string()];
        render_grid(&mut out, "probe", &columns, &rows, Style::default());
        let widths: Vec<usize> = out.lines().map(visible_width).collect();
        assert_eq!(widths, [22, 22, 22], "{out}");
    }
}
