//! The answers of a `tune` run as numbers ([`Boundary`]), and two tune runs set side by side
//! by them ([`compared`]).
//!
//! Why here: the answer table of a tune run words its outcome for a reader ("boundary",
//! "[0.30, 0.36]"); a comparison needs the numbers behind those words. The kind writes them
//! as the section [`BOUNDARIES`] through [`boundaries_section`], and `compare` reads them
//! back through [`boundaries`], so the columns are named in this file only.

use crate::compare::NotShared;
use crate::{Column, Results, Section, Value};

/// The id of the section holding each search's answer as numbers.
pub const BOUNDARIES: &str = "tune-boundaries";

/// The id prefixes of a tune run's sections that a comparison does not set side by side:
/// each run's searches visit settings of their own, so their points, frontiers and curves
/// rarely share a row; the answers are compared instead.
const PER_RUN: &[&str] = &["tune", "frontier-", "knob-"];

/// One search's answer as numbers: a knob against a stressor.
#[derive(Debug, Clone, PartialEq)]
pub struct Boundary {
    /// The stressor's condition (`cpu@100`).
    pub stressor: String,
    /// The knob (`batch.cpus`).
    pub knob: String,
    /// How the search ended, in words (`boundary`, `holds even at the loose end`, ...).
    pub outcome: String,
    /// The recommended setting, in the knob's number; `None` when the search recommends none.
    pub recommended: Option<f64>,
    /// The boundary interval's ends, in the knob's number (`low` the nearer the tight end).
    pub low: Option<f64>,
    /// See `low`.
    pub high: Option<f64>,
    /// The aggressor's throughput lost at the recommended setting against the loose end, %.
    pub cost: Option<f64>,
}

const COLUMNS: [&str; 7] = [
    "aggressor",
    "knob",
    "outcome",
    "recommended",
    "interval low",
    "interval high",
    "aggressor cost",
];

/// The section [`BOUNDARIES`] of `rows`.
pub fn boundaries_section(rows: &[Boundary]) -> Section {
    let mut columns: Vec<Column> = COLUMNS[..6].iter().map(|c| Column::text(c)).collect();
    columns.push(Column::unit(COLUMNS[6], "%"));
    let mut s = Section::new(BOUNDARIES, "Each search's answer as numbers", columns);
    let num = |v: Option<f64>| {
        v.map_or(Value::Empty, |v| {
            Value::number(v, if v.fract() == 0.0 { 0 } else { 2 })
        })
    };
    for b in rows {
        s.push(vec![
            Value::text_of(&b.stressor),
            Value::text_of(&b.knob),
            Value::text_of(&b.outcome),
            num(b.recommended),
            num(b.low),
            num(b.high),
            b.cost.map_or(Value::Empty, |c| Value::number(c, 1)),
        ]);
    }
    s.notes.push(
        "The knob's numbers as the search used them (CPUs, bytes, microseconds, the weight), \
         for `isobench compare` and exports; the answer table above words them."
            .into(),
    );
    s
}

/// The answers of a run as numbers, from its [`BOUNDARIES`] section (none in a run of
/// another kind, or stored before the section existed).
pub fn boundaries(r: &Results) -> Vec<Boundary> {
    r.sections
        .iter()
        .find(|s| s.id == BOUNDARIES)
        .map_or_else(Vec::new, boundaries_in)
}

/// The answers in a [`BOUNDARIES`] section.
fn boundaries_in(s: &Section) -> Vec<Boundary> {
    let at: Vec<Option<usize>> = COLUMNS.iter().map(|c| s.column(c)).collect();
    let (Some(st), Some(kn)) = (at[0], at[1]) else {
        return Vec::new();
    };
    s.rows
        .iter()
        .map(|row| {
            let get = |i: usize| at[i].and_then(|c| row.get(c));
            let number = |i: usize| get(i).and_then(Value::as_f64);
            Boundary {
                stressor: row[st].text(),
                knob: row[kn].text(),
                outcome: get(2).map(Value::text).unwrap_or_default(),
                recommended: number(3),
                low: number(4),
                high: number(5),
                cost: number(6),
            }
        })
        .collect()
}

/// Whether a section of a tune run is one [`compared`] stands for.
pub fn compared_instead(id: &str) -> bool {
    PER_RUN.iter().any(|p| id.starts_with(p))
}

/// Whether a section of a tune run holds the answers [`compared`] sets side by side (the
/// others it stands for hold the points each run visited).
pub fn holds_answers(id: &str) -> bool {
    id == "tune" || id == BOUNDARIES
}

/// A knob's number as read: whole numbers as such, others to two decimals.
fn number_text(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// `[low, high]`, lowest number first.
fn interval_text(b: &Boundary) -> String {
    match (b.low, b.high) {
        (Some(l), Some(h)) => format!("[{}, {}]", number_text(l.min(h)), number_text(l.max(h))),
        _ => String::new(),
    }
}

/// Whether two boundary intervals share a setting.
fn overlap(a: &Boundary, b: &Boundary) -> Option<bool> {
    let (al, ah) = (a.low?, a.high?);
    let (bl, bh) = (b.low?, b.high?);
    Some(al.min(ah).max(bl.min(bh)) <= ah.max(al).min(bh.max(bl)))
}

/// Tune runs side by side by their answers (the first run the reference): per stressor and
/// knob of the reference that another run searched too, each run's recommended setting,
/// boundary interval and cost to the aggressor, and per other run the shift of the
/// recommendation and whether the intervals overlap; what only some runs searched. `None`
/// when a run is not a tune run or none carries its answers as numbers.
pub(crate) fn compared(runs: &[Results], labels: &[String]) -> Option<(Section, Vec<NotShared>)> {
    if runs.len() < 2 || runs.iter().any(|r| r.kind != "tune") {
        return None;
    }
    let all: Vec<Vec<Boundary>> = runs.iter().map(boundaries).collect();
    if all.iter().all(Vec::is_empty) {
        return None;
    }
    let reference = &labels[0];
    let mut columns = vec![Column::text("aggressor · knob")];
    for l in labels {
        columns.push(Column::text(&format!("{l} recommended")));
        columns.push(Column::text(&format!("{l} interval")));
        columns.push(Column::unit(&format!("{l} cost"), "%"));
    }
    for l in &labels[1..] {
        columns.push(Column::text(&format!("{l}-{reference} shift")));
        columns.push(Column::text(&format!("{l} vs {reference} intervals")));
    }
    let mut s = Section::new(
        &format!("{}tune", crate::compare::KIND_PREFIX),
        format!("Loosest settings keeping the SLO ({})", labels.join(" | ")),
        columns,
    );
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for b in all.iter().flatten() {
        if !keys.contains(&(b.stressor.as_str(), b.knob.as_str())) {
            keys.push((&b.stressor, &b.knob));
        }
    }
    let mut not_shared = Vec::new();
    for (stressor, knob) in keys {
        let found: Vec<Option<&Boundary>> = all
            .iter()
            .map(|bs| bs.iter().find(|b| b.stressor == stressor && b.knob == knob))
            .collect();
        let having: Vec<String> = labels
            .iter()
            .zip(&found)
            .filter(|(_, b)| b.is_some())
            .map(|(l, _)| l.clone())
            .collect();
        let Some(a) = found[0].filter(|_| having.len() > 1) else {
            not_shared.push(NotShared {
                what: format!("search of {knob} against {stressor}"),
                runs: having,
                why: format!("not searched in {reference} and another run"),
            });
            continue;
        };
        let mut row = vec![Value::text_of(format!("{stressor} · {knob}"))];
        for b in &found {
            match b {
                Some(b) => row.extend([
                    match b.recommended {
                        Some(r) => Value::text_of(number_text(r)),
                        None => Value::text_of(&b.outcome),
                    },
                    Value::text_of(interval_text(b)),
                    b.cost.map_or(Value::Empty, |c| Value::number(c, 1)),
                ]),
                None => row.extend([Value::text_of("not searched"), Value::Empty, Value::Empty]),
            }
        }
        for b in &found[1..] {
            let shift = b
                .and_then(|b| Some(b.recommended? - a.recommended?))
                .map_or(Value::Empty, |d| {
                    Value::text_of(format!(
                        "{}{}",
                        if d > 0.0 { "+" } else { "" },
                        number_text(d)
                    ))
                });
            let meet = b.and_then(|b| overlap(a, b)).map_or(Value::Empty, |o| {
                Value::text_of(if o { "overlap" } else { "disjoint" })
            });
            row.extend([shift, meet]);
        }
        s.push(row);
    }
    s.notes.push(format!(
        "Per run: the recommended setting (or how the search ended without one), its boundary \
         interval (from it to the tightest setting that fails) and what it costs the \
         aggressor's throughput against the loose end. Shift: the other run's recommendation \
         minus {reference}'s, in the knob's number. Each interval comes from sequential tests \
         of its own run, so the two are only said to overlap or to be disjoint (disjoint: the \
         boundary moved); no p-value is made up for the shift."
    ));
    Some((s, not_shared))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(knob: &str, rec: Option<f64>, low: f64, high: f64) -> Boundary {
        Boundary {
            stressor: "cpu@100".into(),
            knob: knob.into(),
            outcome: "boundary".into(),
            recommended: rec,
            low: Some(low),
            high: Some(high),
            cost: Some(40.0),
        }
    }

    #[test]
    fn intervals_overlap_whichever_way_their_ends_run() {
        let a = b("batch.cpus", Some(0.3), 0.3, 0.36);
        assert_eq!(overlap(&a, &b("batch.cpus", None, 0.36, 0.4)), Some(true));
        assert_eq!(overlap(&a, &b("batch.cpus", None, 0.4, 0.37)), Some(false));
        assert_eq!(overlap(&a, &b("batch.cpus", None, 0.1, 0.2)), Some(false));
        assert_eq!(interval_text(&b("m", None, 512.0, 256.0)), "[256, 512]");
    }

    #[test]
    fn boundaries_read_back_as_written() {
        let rows = vec![
            b("batch.cpus", Some(0.34), 0.34, 0.36),
            Boundary {
                outcome: "holds even at the loose end (10000)".into(),
                recommended: None,
                low: None,
                high: None,
                cost: None,
                ..b("batch.weight", None, 0.0, 0.0)
            },
        ];
        assert_eq!(boundaries_in(&boundaries_section(&rows)), rows);
    }
}
