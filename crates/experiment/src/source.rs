//! Scenario source text and the errors that point into it.
//!
//! Every configuration error isobench reports names the file, the line and column, the field,
//! what is wrong, the values that are allowed and the fix, and shows the offending line. The
//! byte spans come from the TOML parser; this module turns them into positions people read.

use std::fmt;
use std::ops::Range;

use isobench_common::escape_controls;
use serde::{Deserialize, Serialize};

/// A byte range in a scenario file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Span {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

impl From<Range<usize>> for Span {
    fn from(r: Range<usize>) -> Self {
        Span {
            start: r.start,
            end: r.end,
        }
    }
}

/// A scenario file: its name as the user gave it and its text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// Path as given on the command line, or `<builtin:quick>` for embedded scenarios.
    pub name: String,
    /// The whole text.
    pub text: String,
}

impl Source {
    /// A source named `name` holding `text`.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        Source {
            name: name.into(),
            text: text.into(),
        }
    }

    /// 1-based line and column (in characters) of a byte offset, and the text of that line.
    pub fn locate(&self, offset: usize) -> (usize, usize, &str) {
        let offset = offset.min(self.text.len());
        let before = &self.text[..floor_char_boundary(&self.text, offset)];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let line_no = before.matches('\n').count() + 1;
        let line_end = self.text[line_start..]
            .find('\n')
            .map_or(self.text.len(), |i| line_start + i);
        let col = before[line_start..].chars().count() + 1;
        (
            line_no,
            col,
            self.text[line_start..line_end].trim_end_matches('\r'),
        )
    }

    /// The dotted name of the field at `offset`, from the nearest table header above it and
    /// the key on its line (`tenant.limits.memory`). Used for errors the TOML decoder raises,
    /// which carry a span but no path.
    pub fn field_at(&self, offset: usize) -> String {
        let offset = floor_char_boundary(&self.text, offset.min(self.text.len()));
        let before = &self.text[..offset];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let line_end = self.text[line_start..]
            .find('\n')
            .map_or(self.text.len(), |i| line_start + i);
        let line = self.text[line_start..line_end].trim();
        let mut table = String::new();
        for l in self.text[..line_start].lines() {
            let t = l.trim();
            if t.starts_with('[') {
                table = t
                    .trim_start_matches('[')
                    .split(']')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_string();
            }
        }
        if line.starts_with('[') {
            return line
                .trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or("")
                .trim()
                .to_string();
        }
        let key = line
            .split_once('=')
            .map(|(k, _)| k.trim().trim_matches('"').to_string())
            .unwrap_or_default();
        match (table.is_empty(), key.is_empty()) {
            (true, _) => key,
            (false, true) => table,
            (false, false) => format!("{table}.{key}"),
        }
    }

    /// An error at `span`.
    pub fn error(
        &self,
        span: Span,
        field: impl Into<String>,
        problem: impl Into<String>,
        allowed: impl Into<String>,
        fix: impl Into<String>,
    ) -> ScenarioError {
        let (line, column, text) = self.locate(span.start);
        let width = if span.end > span.start {
            let end = floor_char_boundary(&self.text, span.end.min(self.text.len()));
            let start = floor_char_boundary(&self.text, span.start);
            self.text[start..end]
                .lines()
                .next()
                .map_or(1, |s| s.chars().count().max(1))
        } else {
            1
        };
        ScenarioError {
            file: self.name.clone(),
            line,
            column,
            field: field.into(),
            problem: problem.into(),
            allowed: allowed.into(),
            fix: fix.into(),
            snippet: text.to_string(),
            width,
        }
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// One problem in a scenario file, located and explained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScenarioError {
    /// File name as given.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column (characters).
    pub column: usize,
    /// Dotted field name (`tenant[1].limits.memory`).
    pub field: String,
    /// What is wrong.
    pub problem: String,
    /// The values that are allowed.
    pub allowed: String,
    /// How to fix it.
    pub fix: String,
    /// The source line.
    pub snippet: String,
    /// Width of the underline, in characters.
    pub width: usize,
}

impl fmt::Display for ScenarioError {
    /// The located message. Every part that may echo the file (its name, the line, a value
    /// quoted in the problem or the fix) shows control characters escaped (`\u{1b}`), so a
    /// scenario cannot drive the terminal that prints its errors.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let safe = |s: &str| escape_controls(s, "").into_owned();
        writeln!(
            f,
            "{}:{}:{}: `{}`: {}",
            safe(&self.file),
            self.line,
            self.column,
            safe(&self.field),
            safe(&self.problem)
        )?;
        let num = self.line.to_string();
        let pad = " ".repeat(num.len());
        writeln!(f, "{pad} |")?;
        writeln!(f, "{num} | {}", escape_controls(&self.snippet, "\t"))?;
        // Under the column, whatever an escape made of the characters before it.
        let lead: String = self
            .snippet
            .chars()
            .take(self.column.saturating_sub(1))
            .map(|c| match c {
                '\t' => "\t".to_string(),
                c => " ".repeat(
                    escape_controls(c.encode_utf8(&mut [0; 4]), "")
                        .chars()
                        .count(),
                ),
            })
            .collect();
        writeln!(f, "{pad} | {lead}{}", "^".repeat(self.width.min(80)))?;
        if !self.allowed.is_empty() {
            writeln!(f, "  allowed: {}", safe(&self.allowed))?;
        }
        if !self.fix.is_empty() {
            write!(f, "  fix: {}", safe(&self.fix))?;
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioError {}

/// Every problem found in one scenario file (validation reports them all at once).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScenarioErrors(pub Vec<ScenarioError>);

impl ScenarioErrors {
    /// The errors, in file order.
    pub fn errors(&self) -> &[ScenarioError] {
        &self.0
    }
}

impl fmt::Display for ScenarioErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = self
            .0
            .first()
            .map_or("scenario".into(), |e| escape_controls(&e.file, ""));
        let n = self.0.len();
        writeln!(
            f,
            "{file}: {n} problem{} found; nothing was run",
            if n == 1 { "" } else { "s" }
        )?;
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            writeln!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioErrors {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locates_lines_and_columns() {
        let s = Source::new("f.toml", "a = 1\n[trial]\nwarmup = \"x\"\n");
        let off = s.text.find("\"x\"").unwrap();
        let (l, c, t) = s.locate(off);
        assert_eq!((l, c, t), (3, 10, "warmup = \"x\""));
        assert_eq!(s.field_at(off), "trial.warmup");
        assert_eq!(s.field_at(0), "a");
    }

    /// Regression: a tenant named with terminal escape codes (`"\u001b[2J"` in TOML) had
    /// them echoed raw by the error that refused it, clearing or recolouring the terminal.
    #[test]
    fn scenario_errors_escape_control_characters() {
        let s = Source::new(
            "f\u{1b}.toml",
            "[[tenant]]\nname = \"\u{1b}[2J\u{202e}x\"\n",
        );
        let off = s.text.find('x').unwrap();
        let e = s.error(
            Span {
                start: off,
                end: off + 3,
            },
            "tenant[0].name",
            "`\u{1b}[2J\u{202e}x` is not a valid tenant name",
            "lowercase letters",
            "write name = \"\u{9b}x\"",
        );
        let text = ScenarioErrors(vec![e]).to_string();
        assert!(
            !text.contains(|c: char| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert!(!text.contains('\u{202e}'), "{text:?}");
        assert!(
            text.contains("`\\u{1b}[2J\\u{202e}x` is not a valid"),
            "{text}"
        );
        assert!(text.contains("f\\u{1b}.toml:2:14"), "{text}");
        assert!(text.contains("fix: write name = \"\\u{9b}x\""), "{text}");
        // The caret stays under the `x`, past the escaped characters before it.
        let lines: Vec<&str> = text.lines().collect();
        let line = lines.iter().position(|l| l.starts_with("2 | ")).unwrap();
        let x = lines[line].rfind('x').unwrap();
        assert_eq!(lines[line + 1].find('^'), Some(x), "{text}");
    }

    #[test]
    fn error_renders_with_caret() {
        let s = Source::new("f.toml", "[trial]\nwarmup = \"x\"\n");
        let off = s.text.find("\"x\"").unwrap();
        let e = s.error(
            Span {
                start: off,
                end: off + 3,
            },
            "trial.warmup",
            "`x` is not a duration",
            "a duration such as \"500ms\" or \"2s\"",
            "write warmup = \"300ms\"",
        );
        let text = e.to_string();
        assert!(text.starts_with("f.toml:2:10: `trial.warmup`"), "{text}");
        assert!(text.contains("  |          ^^^"), "{text}");
        assert!(text.contains("allowed: a duration"), "{text}");
        assert!(text.contains("fix: write warmup"), "{text}");
    }
}
