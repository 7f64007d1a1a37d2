//! A kind's own sections ([`isobench_results::Section`]), drawn the same way for every kind:
//! a grid in the terminal, a table in Markdown, rows in CSV.

use std::fmt::Write as _;

use isobench_results::{Section, Value};

use crate::grid::{render_aligned, Row, Style};

/// Rows a terminal grid shows in full; a longer section (a window series) shows its first
/// [`HEAD_ROWS`] and last [`TAIL_ROWS`] rows and says where the rest is.
const MAX_ROWS: usize = 40;
const HEAD_ROWS: usize = 30;
const TAIL_ROWS: usize = 5;

/// The sections as terminal grids, each under its title, with its notes. A section longer
/// than [`MAX_ROWS`] rows is cut in the middle, with the export command that has every row
/// (`run` is the run's id).
pub fn render_sections(sections: &[Section], run: &str, style: Style) -> String {
    let mut out = String::new();
    for s in sections {
        let _ = writeln!(out, "\n{}", s.title);
        let headers = s.headers();
        let Some((head, columns)) = headers.split_first() else {
            continue;
        };
        let mut rows: Vec<Row> = s
            .text_rows()
            .into_iter()
            .map(|mut cells| {
                let label = if cells.is_empty() {
                    String::new()
                } else {
                    cells.remove(0)
                };
                Row { label, cells }
            })
            .collect();
        let total = rows.len();
        if total > MAX_ROWS {
            let tail = rows.split_off(total - TAIL_ROWS);
            rows.truncate(HEAD_ROWS);
            rows.push(Row {
                label: format!("... {} more", total - HEAD_ROWS - TAIL_ROWS),
                cells: vec![String::new(); columns.len()],
            });
            rows.extend(tail);
        }
        // A column of text (a setting, a command) reads from the left; numbers line up on
        // the right.
        let left: Vec<bool> = (1..headers.len())
            .map(|i| {
                let mut cells = s.rows.iter().filter_map(|r| r.get(i));
                cells.clone().any(|v| matches!(v, Value::Text { .. }))
                    && cells.all(|v| matches!(v, Value::Text { .. } | Value::Empty))
            })
            .collect();
        render_aligned(&mut out, head, columns, &rows, &left, style);
        for n in &s.notes {
            let _ = writeln!(out, "  {n}");
        }
        if total > MAX_ROWS {
            let _ = writeln!(
                out,
                "  {} of {total} rows shown; every row: isobench export {run} --format csv \
                 --section {}",
                HEAD_ROWS + TAIL_ROWS,
                s.id
            );
        }
    }
    out
}

/// The sections as Markdown tables, each under a `##` heading.
pub fn markdown_sections(sections: &[Section]) -> String {
    let esc = |s: &str| s.replace('|', "\\|");
    let mut out = String::new();
    for s in sections {
        let _ = writeln!(out, "## {}\n", esc(&s.title));
        let headers = s.headers();
        let _ = writeln!(
            out,
            "| {} |",
            headers
                .iter()
                .map(|h| esc(h))
                .collect::<Vec<_>>()
                .join(" | ")
        );
        let align: Vec<&str> = (0..headers.len())
            .map(|i| if i == 0 { "---" } else { "---:" })
            .collect();
        let _ = writeln!(out, "|{}|", align.join("|"));
        for row in s.text_rows() {
            let _ = writeln!(
                out,
                "| {} |",
                row.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" | ")
            );
        }
        out.push('\n');
        for n in &s.notes {
            let _ = writeln!(out, "{}\n", esc(n));
        }
    }
    out
}

/// One section as CSV: a header row of the column names (units in brackets), then its
/// rows; an estimate takes three columns (value, lower, upper).
pub fn csv_section(s: &Section) -> Vec<u8> {
    use isobench_results::Value;
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header = Vec::new();
    for (i, c) in s.columns.iter().enumerate() {
        let h = c.header();
        if s.rows
            .iter()
            .any(|r| matches!(r.get(i), Some(Value::Estimate { .. })))
        {
            header.push(h.clone());
            header.push(format!("{h} lower"));
            header.push(format!("{h} upper"));
        } else {
            header.push(h);
        }
    }
    w.write_record(&header).expect("csv to memory");
    for r in &s.rows {
        let mut rec = Vec::new();
        for (i, v) in r.iter().enumerate() {
            let triple = s
                .rows
                .iter()
                .any(|r| matches!(r.get(i), Some(Value::Estimate { .. })));
            match v {
                Value::Estimate {
                    value,
                    lower,
                    upper,
                    ..
                } => {
                    rec.extend([value.to_string(), lower.to_string(), upper.to_string()]);
                }
                other => {
                    let text = match other {
                        Value::Empty => String::new(),
                        Value::Number { value, .. } => value.to_string(),
                        o => o.text(),
                    };
                    rec.push(text);
                    if triple {
                        rec.extend([String::new(), String::new()]);
                    }
                }
            }
        }
        w.write_record(&rec).expect("csv to memory");
    }
    w.into_inner().expect("csv to memory")
}

#[cfg(test)]
mod tests {
    use super::*;
    use isobench_results::{Column, Value};

    fn curve() -> Section {
        let mut s = Section::new(
            "curve",
            "cpu-int ops_per_sec under cpu",
            vec![Column::unit("intensity", "%"), Column::unit("loss", "%")],
        );
        s.push(vec![
            Value::number(25.0, 0),
            Value::estimate(1.5, 0.5, 2.5, 1),
        ]);
        s.push(vec![Value::number(50.0, 0), Value::Empty]);
        s.notes.push("loss: % of the rate alone".into());
        s
    }

    #[test]
    fn a_section_renders_in_every_format() {
        let s = vec![curve()];
        insta::assert_snapshot!(render_sections(&s, "R", Style::default()), @r"

        cpu-int ops_per_sec under cpu
        intensity [%]        loss [%]
        25             1.5 [0.5, 2.5]
        50                          -
          loss: % of the rate alone
        ");
        insta::assert_snapshot!(markdown_sections(&s), @r"
        ## cpu-int ops_per_sec under cpu

        | intensity [%] | loss [%] |
        |---|---:|
        | 25 | 1.5 [0.5, 2.5] |
        | 50 | - |

        loss: % of the rate alone
        ");
        insta::assert_snapshot!(String::from_utf8(csv_section(&s[0])).unwrap(), @r"
        intensity [%],loss [%],loss [%] lower,loss [%] upper
        25,1.5,0.5,2.5
        50,,,
        ");
    }

    /// Text columns (a setting, a command) read from the left, and a long last one runs on
    /// past the width instead of into a group of its own.
    #[test]
    fn text_columns_align_left_and_a_long_last_one_runs_on() {
        let mut s = Section::new(
            "apply",
            "How to apply",
            vec![
                Column::text("aggressor"),
                Column::text("setting"),
                Column::unit("cost", "%"),
                Column::text("how"),
            ],
        );
        for (setting, how) in [
            ("cpus=0.43", "docker update --cpus 0.43 CONTAINER"),
            ("weight=111", "x"),
        ] {
            s.push(vec![
                Value::text_of("cpu@100"),
                Value::text_of(setting),
                Value::number(52.5, 1),
                Value::text_of(how),
            ]);
        }
        let narrow = Style {
            width: 40,
            ..Style::default()
        };
        insta::assert_snapshot!(render_sections(&[s], "R", narrow), @r"

        How to apply
        aggressor  setting     cost [%]  how
        cpu@100    cpus=0.43       52.5  docker update --cpus 0.43 CONTAINER
        cpu@100    weight=111      52.5  x
        ");
    }

    #[test]
    fn a_long_section_shows_its_ends_and_where_the_rest_is() {
        let mut s = Section::new("series", "a series", vec![Column::unit("t", "s")]);
        for i in 0..100 {
            s.push(vec![Value::number(f64::from(i), 0)]);
        }
        let text = render_sections(&[s], "R1", Style::default());
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.contains(&"29"), "{text}");
        assert!(!lines.contains(&"30"), "{text}");
        assert!(lines.contains(&"... 65 more"), "{text}");
        assert!(lines.contains(&"95") && lines.contains(&"99"), "{text}");
        assert!(
            text.contains(
                "35 of 100 rows shown; every row: isobench export R1 --format csv --section series"
            ),
            "{text}"
        );
    }
}
