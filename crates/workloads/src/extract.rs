//! Reading one number out of a program's output, for the `command` probe and stressor.
//!
//! A user's own program reports its figure in its own format: a line of text, a JSON
//! document (`fio --output-format=json`), a CSV table (`redis-benchmark --csv`). An
//! [`Extract`] is written once as text (`regex:...`, `json:...`, `csv:ROW/COLUMN`) and
//! applied to the output:
//!
//! - `regex:<pattern>`: the first match of a regular expression (the `regex` crate's syntax,
//!   compiled in multi-line mode, so `^` and `$` match at line boundaries); the number is the
//!   first capture group that took part in the match, or the whole match when the pattern
//!   has no group. `regex-last:<pattern>` takes the last match instead, for programs that
//!   print a running figure and the final one last.
//! - `json:<path>`: the value at a path of the JSON document the program printed. The path
//!   is RFC 9535 JSONPath (`$.jobs[0].read.iops`) or the shorter form most tools document,
//!   without the `$` (`jobs[0].read.clat_ns.percentile["99.000000"]`, as in fio's output, or
//!   jq's `.jobs[0].read.iops`): a dot-separated member name, `[N]` for an array index and
//!   `["key"]` (or `['key']`) for a member whose name has dots or other punctuation. The path
//!   must select exactly one value, a number or a string that reads as one. Text printed
//!   before the document (a warning line) is skipped.
//! - `csv:<row>/<column>`: a cell of a CSV table with a header row: the header is the first
//!   record that names `column`, the row the first record after it whose first field is
//!   `row` (split at the last `/`, so a row name may hold one). Fields are trimmed, quotes
//!   removed, and records may have different lengths.
//!
//! Every error says what was looked for, shows the end of the output it was looked for in,
//! and names the parameter to fix, so that a scenario's author can correct it from the
//! message alone.

use std::fmt;

use regex::Regex;
use serde_json::Value;
use serde_json_path::JsonPath;

/// How a number is read from a program's output.
#[derive(Debug, Clone)]
pub enum Extract {
    /// A regular expression: the first match, or the last one.
    Regex {
        /// The compiled pattern (multi-line mode).
        re: Regex,
        /// Take the last match instead of the first.
        last: bool,
    },
    /// A JSONPath into the JSON document of the output.
    Json {
        /// The parsed query.
        path: JsonPath,
        /// The query as RFC 9535 text (after translating the short form).
        rfc: String,
    },
    /// A cell of a CSV table with a header row.
    Csv {
        /// Value of the first field of the wanted row.
        row: String,
        /// Header of the wanted column.
        column: String,
    },
}

/// Why a spec does not parse or a number could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractError(pub String);

impl fmt::Display for ExtractError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ExtractError {}

/// Lines of output shown in an error.
const TAIL_LINES: usize = 10;

impl Extract {
    /// Parses `regex:`, `regex-last:`, `json:` or `csv:` text; `param` names the parameter
    /// it came from, for the error message.
    pub fn parse(param: &str, spec: &str) -> Result<Extract, ExtractError> {
        let bad = |why: String| ExtractError(format!("`{param}={spec}`: {why}"));
        if let Some(p) = spec.strip_prefix("regex-last:") {
            Self::regex(p, true).map_err(bad)
        } else if let Some(p) = spec.strip_prefix("regex:") {
            Self::regex(p, false).map_err(bad)
        } else if let Some(p) = spec.strip_prefix("json:") {
            let rfc = json_path_text(p).map_err(bad)?;
            let path = JsonPath::parse(&rfc)
                .map_err(|e| bad(format!("`{rfc}` is not a JSON path: {e}")))?;
            Ok(Extract::Json { path, rfc })
        } else if let Some(p) = spec.strip_prefix("csv:") {
            let (row, column) = p.rsplit_once('/').ok_or_else(|| {
                bad(
                    "write the cell as csv:ROW/COLUMN, e.g. csv:PING_INLINE/rps (ROW is the \
                     row's first field, COLUMN a header)"
                        .into(),
                )
            })?;
            let (row, column) = (row.trim(), column.trim());
            if row.is_empty() || column.is_empty() {
                return Err(bad(
                    "both ROW and COLUMN of csv:ROW/COLUMN must be given".into()
                ));
            }
            Ok(Extract::Csv {
                row: row.into(),
                column: column.into(),
            })
        } else {
            Err(bad(
                "expected regex:PATTERN, regex-last:PATTERN, json:PATH or csv:ROW/COLUMN".into(),
            ))
        }
    }

    fn regex(pattern: &str, last: bool) -> Result<Extract, String> {
        if pattern.is_empty() {
            return Err("the pattern is empty".into());
        }
        let re = regex::RegexBuilder::new(pattern)
            .multi_line(true)
            .build()
            .map_err(|e| format!("not a regular expression: {e}"))?;
        Ok(Extract::Regex { re, last })
    }

    /// Reads the number from `output`, the program's stream `stream` (`stdout`); `param`
    /// names the parameter the spec came from, for the error, which also shows the last lines
    /// of `output`.
    pub fn value(&self, param: &str, stream: &str, output: &str) -> Result<f64, ExtractError> {
        self.read(output).map_err(|why| {
            ExtractError(format!(
                "{param}={self}: {why} in the program's {stream}; fix `{param}` or the \
                 program's output{}",
                show_tail(stream, output)
            ))
        })
    }

    /// The number of the last match of a regular expression in one line, if it matches
    /// (`None` for a JSON or CSV extract, which need the whole output).
    pub fn in_line(&self, line: &str) -> Option<Result<f64, String>> {
        match self {
            Extract::Regex { re, .. } => re.captures_iter(line).last().map(|c| capture_number(&c)),
            _ => None,
        }
    }

    /// True for a regular expression, which reads one line at a time as well as the whole.
    pub fn is_regex(&self) -> bool {
        matches!(self, Extract::Regex { .. })
    }

    fn read(&self, output: &str) -> Result<f64, String> {
        match self {
            Extract::Regex { re, last } => {
                let caps = if *last {
                    re.captures_iter(output).last()
                } else {
                    re.captures(output)
                };
                let caps = caps.ok_or("the pattern matches nothing")?;
                capture_number(&caps)
            }
            Extract::Json { path, .. } => {
                let doc = json_document(output)?;
                let nodes = path.query(&doc).all();
                match nodes.as_slice() {
                    [] => Err("the path selects nothing in the document".into()),
                    [v] => json_number(v),
                    many => Err(format!(
                        "the path selects {} values, not one (use an index such as [0])",
                        many.len()
                    )),
                }
            }
            Extract::Csv { row, column } => csv_cell(output, row, column),
        }
    }
}

impl fmt::Display for Extract {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Extract::Regex { re, last: false } => write!(f, "regex:{}", re.as_str()),
            Extract::Regex { re, last: true } => write!(f, "regex-last:{}", re.as_str()),
            Extract::Json { rfc, .. } => write!(f, "json:{rfc}"),
            Extract::Csv { row, column } => write!(f, "csv:{row}/{column}"),
        }
    }
}

/// The number in the first capture group that took part in the match, or in the whole
/// match when there is none.
fn capture_number(caps: &regex::Captures<'_>) -> Result<f64, String> {
    let m = caps
        .iter()
        .skip(1)
        .flatten()
        .next()
        .or_else(|| caps.get(0))
        .ok_or("the pattern matched nothing")?;
    parse_number(m.as_str()).ok_or_else(|| format!("the match `{}` is not a number", m.as_str()))
}

/// A finite number written in plain decimal or exponent form, spaces around allowed.
pub fn parse_number(text: &str) -> Option<f64> {
    text.trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

fn json_number(v: &Value) -> Result<f64, String> {
    match v {
        Value::Number(n) => n
            .as_f64()
            .ok_or_else(|| format!("{n} does not fit a number")),
        Value::String(s) => {
            parse_number(s).ok_or_else(|| format!("the value \"{s}\" is not a number"))
        }
        other => {
            let mut text = other.to_string();
            if text.len() > 80 {
                text.truncate(77);
                text.push_str("...");
            }
            Err(format!("the value {text} is not a number"))
        }
    }
}

/// The JSON document in `output`: the whole of it, or else the first document that starts a
/// line (text such as a warning may come before it; anything after it is ignored).
fn json_document(output: &str) -> Result<Value, String> {
    let whole = serde_json::from_str::<Value>(output.trim());
    let first_err = match whole {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    let mut at = 0;
    for line in output.split_inclusive('\n') {
        let t = line.trim_start();
        if t.starts_with('{') || t.starts_with('[') {
            let start = at + (line.len() - t.len());
            let mut docs =
                serde_json::Deserializer::from_str(&output[start..]).into_iter::<Value>();
            if let Some(Ok(v)) = docs.next() {
                return Ok(v);
            }
        }
        at += line.len();
    }
    Err(if output.trim().is_empty() {
        "the output is empty, no JSON document".into()
    } else {
        format!("the output holds no JSON document ({first_err})")
    })
}

/// RFC 9535 text for a path in either form (see the module's documentation).
pub fn json_path_text(path: &str) -> Result<String, String> {
    let path = path.trim();
    if path.is_empty() {
        return Err("the JSON path is empty".into());
    }
    if path.starts_with('$') {
        return Ok(path.to_string());
    }
    let mut out = String::from("$");
    let mut chars = path.chars().peekable();
    // A leading dot, as jq writes it, is allowed.
    if chars.peek() == Some(&'.') {
        chars.next();
    }
    let mut expect_name = !path.starts_with('[') && !path.starts_with(".[");
    loop {
        if expect_name {
            let mut name = String::new();
            while let Some(&c) = chars.peek() {
                if c == '.' || c == '[' {
                    break;
                }
                name.push(c);
                chars.next();
            }
            if name.is_empty() {
                return Err(format!(
                    "`{path}` has an empty member name (two dots, or a dot before `[`)"
                ));
            }
            out.push_str(&member(&name));
        }
        match chars.next() {
            None => return Ok(out),
            Some('.') => expect_name = true,
            Some('[') => {
                out.push('[');
                bracket(&mut chars, &mut out).map_err(|why| format!("`{path}`: {why}"))?;
                expect_name = false;
                // After `]` comes the end, `.` or another `[`.
                match chars.peek() {
                    None | Some('.') | Some('[') => {}
                    Some(c) => {
                        return Err(format!("`{path}`: `{c}` after `]`; expected `.` or `[`"))
                    }
                }
                if chars.peek() == Some(&'.') {
                    chars.next();
                    expect_name = true;
                }
            }
            Some(c) => return Err(format!("`{path}`: unexpected `{c}`")),
        }
    }
}

/// `.name` when RFC 9535's shorthand allows it, else `['name']`.
fn member(name: &str) -> String {
    let mut cs = name.chars();
    let first_ok = cs
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || !c.is_ascii());
    if name == "*"
        || (first_ok && cs.all(|c| c.is_ascii_alphanumeric() || c == '_' || !c.is_ascii()))
    {
        format!(".{name}")
    } else {
        let escaped = name.replace('\\', "\\\\").replace('\'', "\\'");
        format!("['{escaped}']")
    }
}

/// Copies a bracket's content up to and including its `]`, keeping quoted text whole.
fn bracket(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    out: &mut String,
) -> Result<(), String> {
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        out.push(c);
        match (quote, c) {
            (Some(_), '\\') => {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            }
            (Some(q), c) if c == q => quote = None,
            (None, '"' | '\'') => quote = Some(c),
            (None, ']') => return Ok(()),
            _ => {}
        }
    }
    Err("a `[` is not closed".into())
}

fn csv_cell(output: &str, row: &str, column: &str) -> Result<f64, String> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(output.as_bytes());
    let mut col: Option<usize> = None;
    let mut rows_seen: Vec<String> = Vec::new();
    for record in reader.records() {
        let Ok(record) = record else { continue };
        let Some(c) = col else {
            col = record.iter().position(|f| f == column);
            continue;
        };
        let first = record.get(0).unwrap_or("");
        if first != row {
            if rows_seen.len() < 8 {
                rows_seen.push(first.to_string());
            }
            continue;
        }
        let cell = record
            .get(c)
            .ok_or_else(|| format!("row `{row}` has no field in column `{column}`"))?;
        return parse_number(cell).ok_or_else(|| {
            format!("the cell `{cell}` (row `{row}`, column `{column}`) is not a number")
        });
    }
    if col.is_none() {
        return Err(format!("no header row names a column `{column}`"));
    }
    Err(if rows_seen.is_empty() {
        format!("no row after the header starts with `{row}`")
    } else {
        format!(
            "no row starts with `{row}` (rows start with: {})",
            rows_seen.join(", ")
        )
    })
}

/// The last `TAIL_LINES` lines of `text`, indented, after a heading naming `what`, or an
/// empty string when `text` is blank.
pub fn show_tail(what: &str, text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(TAIL_LINES);
    let shown: Vec<&str> = lines[start..]
        .iter()
        .copied()
        .filter(|l| !l.trim().is_empty())
        .collect();
    if shown.is_empty() {
        return format!("\n  (the program's {what} was empty)");
    }
    let mut s = format!(
        "\n  {} of the program's {what}:",
        if start > 0 { "last lines" } else { "lines" }
    );
    for l in shown {
        let mut l = l.to_string();
        if l.len() > 300 {
            let mut cut = 297;
            while !l.is_char_boundary(cut) {
                cut -= 1;
            }
            l.truncate(cut);
            l.push_str("...");
        }
        s.push_str("\n    ");
        s.push_str(&l);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(spec: &str, output: &str) -> Result<f64, ExtractError> {
        Extract::parse("metric", spec)?.value("metric", "stdout", output)
    }

    #[test]
    fn regex_takes_the_first_group_or_the_whole_match() {
        let out = "warming up\nlatency: 12.5 ms\nlatency: 14.0 ms\n";
        assert_eq!(value(r"regex:latency: ([0-9.]+)", out).unwrap(), 12.5);
        assert_eq!(value(r"regex-last:latency: ([0-9.]+)", out).unwrap(), 14.0);
        assert_eq!(value(r"regex:[0-9]+\.[0-9]+", out).unwrap(), 12.5);
        // Multi-line mode: `^` and `$` hold at every line.
        assert_eq!(value(r"regex:^latency: (\S+) ms$", out).unwrap(), 12.5);
        // An optional group that did not take part is skipped for the next one.
        assert_eq!(value(r"regex:(x)?latency: (\S+)", out).unwrap(), 12.5);
        assert_eq!(
            value(r"regex:took (\d+e\d+)", "took 3e2 ns").unwrap(),
            300.0
        );
    }

    #[test]
    fn regex_errors_name_the_pattern_and_show_the_output() {
        let e = value(r"regex:rps=(\d+)", "hello\nworld\n").unwrap_err().0;
        assert!(e.contains("matches nothing"), "{e}");
        assert!(e.contains(r"metric=regex:rps=(\d+)"), "{e}");
        assert!(e.contains("fix `metric`"), "{e}");
        assert!(e.contains("    world"), "{e}");
        let e = value(r"regex:(\w+)", "hello").unwrap_err().0;
        assert!(e.contains("`hello` is not a number"), "{e}");
        let e = Extract::parse("metric", "regex:(").unwrap_err().0;
        assert!(e.contains("not a regular expression"), "{e}");
        let e = Extract::parse("metric", "rgx:1").unwrap_err().0;
        assert!(e.contains("expected regex:PATTERN"), "{e}");
    }

    /// The shape of `fio --output-format=json`: the percentiles are keyed by text with dots.
    const FIO: &str = r#"note: both iodepth >= 1 and synchronous I/O engine are selected
{
  "fio version" : "fio-3.33",
  "jobs" : [
    {
      "jobname" : "t",
      "read" : {
        "iops" : 18962.962963,
        "clat_ns" : {
          "mean" : 48000.5,
          "percentile" : {
            "1.000000" : 30000,
            "99.000000" : 96768,
            "99.900000" : 140288
          }
        }
      }
    }
  ]
}
"#;

    #[test]
    fn json_paths_in_the_short_and_the_rfc_form() {
        let p99 = r#"json:jobs[0].read.clat_ns.percentile["99.000000"]"#;
        assert_eq!(value(p99, FIO).unwrap(), 96768.0);
        assert_eq!(
            value(r#"json:jobs[0].read.clat_ns.percentile['99.900000']"#, FIO).unwrap(),
            140288.0
        );
        assert_eq!(value("json:.jobs[0].read.iops", FIO).unwrap(), 18962.962963);
        assert_eq!(
            value("json:$.jobs[0].read.iops", FIO).unwrap(),
            18962.962963
        );
        assert_eq!(value("json:$..iops", FIO).unwrap(), 18962.962963);
        // A member name with a space (not RFC shorthand) is bracketed for the query.
        assert_eq!(
            json_path_text("fio version").unwrap(),
            "$['fio version']".to_string()
        );
        let e = value("json:fio version", FIO).unwrap_err().0;
        assert!(e.contains("\"fio-3.33\" is not a number"), "{e}");
        // A number written as a string is read.
        assert_eq!(value("json:a", r#"{"a": " 2.5 "}"#).unwrap(), 2.5);
        assert_eq!(value("json:[1]", "[1, 2]").unwrap(), 2.0);
    }

    #[test]
    fn the_short_form_translates_to_rfc_9535() {
        for (short, rfc) in [
            ("a.b", "$.a.b"),
            (".a.b", "$.a.b"),
            ("a[0].b", "$.a[0].b"),
            ("[0]", "$[0]"),
            (r#"a["x.y"]"#, r#"$.a["x.y"]"#),
            (r#"a["x]y"][1]"#, r#"$.a["x]y"][1]"#),
            ("a.clat-ns", "$.a['clat-ns']"),
            ("a.0", "$.a['0']"),
            ("a.*", "$.a.*"),
            ("$.x[?@.y > 1]", "$.x[?@.y > 1]"),
        ] {
            assert_eq!(json_path_text(short).unwrap(), rfc, "{short}");
        }
        for bad in ["", "a..b", "a.", "a[0", "a[0]b"] {
            assert!(json_path_text(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn json_errors_say_what_went_wrong() {
        let e = value("json:jobs[0].write.iops", FIO).unwrap_err().0;
        assert!(e.contains("selects nothing"), "{e}");
        let e = value("json:jobs[*].read.clat_ns.percentile.*", FIO)
            .unwrap_err()
            .0;
        assert!(e.contains("selects 3 values"), "{e}");
        let e = value("json:a", "no json here").unwrap_err().0;
        assert!(e.contains("no JSON document"), "{e}");
        assert!(e.contains("no json here"), "{e}");
        let e = value("json:a", "").unwrap_err().0;
        assert!(e.contains("output is empty"), "{e}");
        let e = Extract::parse("metric", "json:a[?").unwrap_err().0;
        assert!(e.contains("metric=json:a[?"), "{e}");
    }

    /// `redis-benchmark --csv` (Redis 6.2 and later): a quoted header row, then one row a test.
    const REDIS: &str = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"
\"PING_INLINE\",\"99009.90\",\"0.271\",\"0.088\",\"0.263\",\"0.375\",\"0.519\",\"1.047\"
\"PING_MBULK\",\"102040.82\",\"0.264\",\"0.080\",\"0.255\",\"0.367\",\"0.495\",\"0.935\"
\"LRANGE_100 (first 100 elements)\",\"41666.67\",\"0.616\",\"0.160\",\"0.599\",\"0.807\",\"1.015\",\"1.567\"
";

    #[test]
    fn csv_reads_a_cell_of_redis_benchmark_output() {
        assert_eq!(value("csv:PING_INLINE/rps", REDIS).unwrap(), 99009.90);
        assert_eq!(
            value("csv:PING_MBULK/p99_latency_ms", REDIS).unwrap(),
            0.495
        );
        assert_eq!(
            value("csv:LRANGE_100 (first 100 elements)/rps", REDIS).unwrap(),
            41666.67
        );
        // Lines before the header are skipped; the split is at the last `/`.
        let out = "starting\nname,a/b\nx/y, 7\n";
        let e = value("csv:x/y/a/b", out).unwrap_err().0;
        assert!(e.contains("column `b`"), "{e}");
        assert_eq!(value("csv:x/y/a", "name,a\nx/y,7\n").unwrap(), 7.0);
        assert_eq!(
            value("csv:x/a", "starting up\nname,a\nx, 7 \n").unwrap(),
            7.0
        );
    }

    #[test]
    fn csv_errors_name_the_missing_row_or_column() {
        let e = value("csv:SET/rps", REDIS).unwrap_err().0;
        assert!(e.contains("no row starts with `SET`"), "{e}");
        assert!(e.contains("PING_INLINE"), "{e}");
        let e = value("csv:PING_INLINE/qps", REDIS).unwrap_err().0;
        assert!(e.contains("no header row names a column `qps`"), "{e}");
        let e = value("csv:x/a", "name,a\nx,fast\n").unwrap_err().0;
        assert!(e.contains("`fast`"), "{e}");
        let e = Extract::parse("metric", "csv:PING_INLINE").unwrap_err().0;
        assert!(e.contains("csv:ROW/COLUMN"), "{e}");
    }

    #[test]
    fn one_line_takes_its_last_match() {
        let x = Extract::parse("progress", r"regex:done (\d+)").unwrap();
        assert_eq!(x.in_line("done 3, done 5"), Some(Ok(5.0)));
        assert_eq!(x.in_line("nothing"), None);
        let j = Extract::parse("progress", "json:a").unwrap();
        assert_eq!(j.in_line(r#"{"a": 1}"#), None);
    }

    #[test]
    fn the_tail_shows_the_last_ten_lines() {
        let text: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        let t = show_tail("stderr", &text);
        assert!(t.contains("last lines of the program's stderr"), "{t}");
        assert!(t.contains("line 30") && t.contains("line 21"), "{t}");
        assert!(!t.contains("line 20\n"), "{t}");
        assert!(show_tail("stderr", "  \n").contains("was empty"));
    }

    mod prop {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            /// Whatever number a line carries, the regex reads it back exactly.
            #[test]
            fn regex_reads_back_any_number(v in -1e12f64..1e12, pre in "[a-z ]{0,12}") {
                let out = format!("{pre}value={v}\n");
                let x = Extract::parse("metric", r"regex:value=(\S+)").unwrap();
                prop_assert_eq!(x.value("metric", "stdout", &out).unwrap(), v);
            }

            /// Any member name, however punctuated, can be reached with the short form.
            #[test]
            fn any_member_name_is_reachable(name in "[ -~]{1,16}", v in 0u32..1_000_000) {
                let doc = serde_json::json!({ "outer": { name.clone(): v } }).to_string();
                let quoted = serde_json::to_string(&name).unwrap();
                let x = Extract::parse("metric", &format!("json:outer[{quoted}]")).unwrap();
                prop_assert_eq!(x.value("metric", "stdout", &doc).unwrap(), v as f64);
            }

            /// The extractors never panic on arbitrary output.
            #[test]
            fn arbitrary_output_never_panics(out in "\\PC{0,200}") {
                for spec in [r"regex:(\d+)", "json:a.b[0]", "csv:x/y"] {
                    let _ = Extract::parse("metric", spec).unwrap().value("metric", "stdout", &out);
                }
            }
        }
    }
}
