//! Terminal grids: a labelled table whose columns are split into groups that fit the
//! terminal's width, measured as shown (ANSI escapes take no room, wide characters two
//! columns), and the colours they may be painted in.

use std::fmt::Write as _;

use unicode_width::UnicodeWidthChar;

/// How to render.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// Terminal width; wide tables are split into column groups that fit.
    pub width: usize,
    /// ANSI colours (off when `NO_COLOR` is set or output is not a terminal).
    pub color: bool,
}

impl Default for Style {
    fn default() -> Self {
        Style {
            width: 100,
            color: false,
        }
    }
}

pub(crate) const RED: &str = "\x1b[31m";
pub(crate) const GREEN: &str = "\x1b[32m";
pub(crate) const YELLOW: &str = "\x1b[33m";
pub(crate) const BOLD: &str = "\x1b[1m";
pub(crate) const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";

pub(crate) fn paint(s: &str, code: &str, style: Style) -> String {
    if style.color && !code.is_empty() {
        format!("{code}{s}{RESET}")
    } else {
        s.to_string()
    }
}

/// Width of text as shown on a terminal: ANSI escapes take no room, wide characters
/// (CJK, most emoji) take two columns, combining marks none.
pub(crate) fn visible_width(s: &str) -> usize {
    let mut n = 0;
    let mut esc = false;
    for c in s.chars() {
        match (esc, c) {
            (false, '\x1b') => esc = true,
            (true, 'm') => esc = false,
            (true, _) => {}
            (false, _) => n += UnicodeWidthChar::width(c).unwrap_or(0),
        }
    }
    n
}

/// `s` after spaces that bring it to `w` columns as shown.
pub(crate) fn pad_left(s: &str, w: usize) -> String {
    format!("{}{s}", " ".repeat(w.saturating_sub(visible_width(s))))
}

/// `s` before spaces that bring it to `w` columns as shown.
pub(crate) fn pad_right(s: &str, w: usize) -> String {
    format!("{s}{}", " ".repeat(w.saturating_sub(visible_width(s))))
}

/// One row of a grid: its label and its cells' texts.
pub(crate) struct Row {
    pub(crate) label: String,
    pub(crate) cells: Vec<String>,
}

pub(crate) fn render_grid(
    out: &mut String,
    head: &str,
    columns: &[String],
    rows: &[Row],
    style: Style,
) {
    render_aligned(out, head, columns, rows, &[], style);
}

/// [`render_grid`] with the columns `left` marks (by index; those beyond it are not)
/// aligned to the left, as text reads, instead of to the right, as numbers do.
pub(crate) fn render_aligned(
    out: &mut String,
    head: &str,
    columns: &[String],
    rows: &[Row],
    left: &[bool],
    style: Style,
) {
    let pad = |i: usize, s: &str, w: usize| {
        if left.get(i).copied().unwrap_or(false) {
            pad_right(s, w)
        } else {
            pad_left(s, w)
        }
    };
    let label_w = rows
        .iter()
        .map(|r| visible_width(&r.label))
        .chain([visible_width(head)])
        .max()
        .unwrap_or(0);
    let col_w: Vec<usize> = (0..columns.len())
        .map(|i| {
            rows.iter()
                .map(|r| visible_width(&r.cells[i]))
                .chain([visible_width(&columns[i])])
                .max()
                .unwrap_or(0)
        })
        .collect();
    // Split the columns into groups that fit the width.
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut cur: Vec<usize> = Vec::new();
    let mut used = label_w;
    for (i, w) in col_w.iter().enumerate() {
        // A last column of text (a command, a note) runs on past the width rather than
        // into a group of its own, away from the columns it belongs with.
        let runs_on = i + 1 == col_w.len() && left.get(i).copied().unwrap_or(false);
        if !cur.is_empty() && used + 2 + w > style.width && !runs_on {
            groups.push(std::mem::take(&mut cur));
            used = label_w;
        }
        cur.push(i);
        used += 2 + w;
    }
    if !cur.is_empty() || groups.is_empty() {
        // A grid of labels only still shows its rows.
        groups.push(cur);
    }
    for (g, cols) in groups.iter().enumerate() {
        if g > 0 {
            out.push('\n');
        }
        let mut line = pad_right(head, label_w);
        for &i in cols {
            line.push_str("  ");
            line.push_str(&pad(i, &columns[i], col_w[i]));
        }
        let _ = writeln!(out, "{}", paint(line.trim_end(), BOLD, style));
        for r in rows {
            let mut line = pad_right(&r.label, label_w);
            for &i in cols {
                line.push_str("  ");
                line.push_str(&pad(i, &r.cells[i], col_w[i]));
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
}
