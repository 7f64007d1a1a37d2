//! The checker every table of a scenario is read with: typed reads of loose TOML values
//! (durations, integers, numbers, words of a table) that report a located error with the
//! field, the allowed values and a fix, and fall back to the default.

use std::time::Duration;

use isobench_workloads::nearest_names;
use toml::{Spanned, Value};

use super::duration::{fmt_duration, value_duration, DURATION_ALLOWED};
use crate::source::{ScenarioError, Source, Span};

pub(super) fn span_of<T>(s: &Spanned<T>) -> Span {
    s.span().into()
}

/// Collects errors while a scenario is checked.
pub(crate) struct Checker<'a> {
    pub(crate) src: &'a Source,
    pub(super) errors: Vec<ScenarioError>,
}

impl<'a> Checker<'a> {
    pub(super) fn new(src: &'a Source) -> Checker<'a> {
        Checker {
            src,
            errors: Vec::new(),
        }
    }

    pub(crate) fn err(
        &mut self,
        span: Span,
        field: &str,
        problem: String,
        allowed: &str,
        fix: String,
    ) {
        self.errors
            .push(self.src.error(span, field, problem, allowed, fix));
    }
}

pub(super) fn value_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Integer(i) => Some(i.to_string()),
        Value::Float(f) => Some(f.to_string()),
        Value::Boolean(b) => Some(b.to_string()),
        Value::Array(a) => a
            .iter()
            .map(value_text)
            .collect::<Option<Vec<_>>>()
            .map(|v| v.join(",")),
        Value::Datetime(d) => Some(d.to_string()),
        Value::Table(_) => None,
    }
}

/// A value as it would be written in TOML: numbers and booleans bare, the rest quoted.
pub(super) fn toml_value(text: &str) -> String {
    if text.parse::<f64>().is_ok() || text == "true" || text == "false" {
        text.to_string()
    } else {
        format!("\"{text}\"")
    }
}

pub(crate) fn value_kind(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a number",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a date",
        Value::Array(_) => "an array",
        Value::Table(_) => "a table",
    }
}

impl Checker<'_> {
    pub(crate) fn duration(
        &mut self,
        v: &Option<Spanned<Value>>,
        field: &str,
        default: Duration,
    ) -> Duration {
        let Some(v) = v else { return default };
        let parsed = value_duration(v.get_ref());
        match parsed {
            Some(d) => d,
            None => {
                let key = field.rsplit('.').next().unwrap_or(field);
                self.err(
                    span_of(v),
                    field,
                    format!(
                        "{} is not a duration",
                        value_text(v.get_ref()).map_or_else(
                            || value_kind(v.get_ref()).to_string(),
                            |t| format!("`{t}`")
                        )
                    ),
                    DURATION_ALLOWED,
                    format!("write {key} = \"{}\"", fmt_duration(default)),
                );
                default
            }
        }
    }

    /// A duration or `"auto"` (`None`), within `range`.
    pub(super) fn auto_duration(
        &mut self,
        v: &Option<Spanned<Value>>,
        field: &str,
        range: (Duration, Duration),
    ) -> Option<Duration> {
        let v = v.as_ref()?;
        if matches!(v.get_ref(), Value::String(s) if s == "auto") {
            return None;
        }
        let d = self.duration(&Some(v.clone()), field, range.0);
        if d < range.0 || d > range.1 {
            let key = field.rsplit('.').next().unwrap_or(field);
            self.err(
                span_of(v),
                field,
                format!("{} is out of range", fmt_duration(d)),
                &format!(
                    "\"auto\" or a duration from {} to {}",
                    fmt_duration(range.0),
                    fmt_duration(range.1)
                ),
                format!("write {key} = \"auto\""),
            );
            return None;
        }
        Some(d)
    }

    pub(crate) fn int(
        &mut self,
        v: &Option<Spanned<Value>>,
        field: &str,
        range: (i64, i64),
        default: i64,
    ) -> i64 {
        let Some(v) = v else { return default };
        let key = field.rsplit('.').next().unwrap_or(field);
        match v.get_ref() {
            Value::Integer(i) if *i >= range.0 && *i <= range.1 => *i,
            other => {
                let problem = match other {
                    Value::Integer(i) => format!("{i} is out of range"),
                    o => format!("{} is not an integer", value_kind(o)),
                };
                self.err(
                    span_of(v),
                    field,
                    problem,
                    &format!("an integer in {}..={}", range.0, range.1),
                    format!("write {key} = {default}"),
                );
                default
            }
        }
    }

    pub(crate) fn float(
        &mut self,
        v: &Option<Spanned<Value>>,
        field: &str,
        ok: impl Fn(f64) -> bool,
        allowed: &str,
        default: f64,
    ) -> f64 {
        let Some(v) = v else { return default };
        let key = field.rsplit('.').next().unwrap_or(field);
        let x = match v.get_ref() {
            Value::Float(f) => Some(*f),
            Value::Integer(i) => Some(*i as f64),
            _ => None,
        };
        match x {
            Some(x) if x.is_finite() && ok(x) => x,
            _ => {
                let problem = match x {
                    Some(x) => format!("{x} is out of range"),
                    None => format!("{} is not a number", value_kind(v.get_ref())),
                };
                self.err(
                    span_of(v),
                    field,
                    problem,
                    allowed,
                    format!("write {key} = {default}"),
                );
                default
            }
        }
    }

    /// The word written at `v` (see [`Checker::word`]), or `default` when it is absent or
    /// wrong (after reporting it).
    pub(crate) fn word_or<T: Copy>(
        &mut self,
        v: &Option<Spanned<String>>,
        field: &str,
        table: &[(&str, T)],
        planned: &[&str],
        default: T,
    ) -> T {
        v.as_ref()
            .and_then(|v| self.word(v, field, table, planned))
            .unwrap_or(default)
    }

    pub(crate) fn word<T: Copy>(
        &mut self,
        v: &Spanned<String>,
        field: &str,
        table: &[(&str, T)],
        planned: &[&str],
    ) -> Option<T> {
        let s = v.get_ref().as_str();
        if let Some((_, t)) = table.iter().find(|(w, _)| *w == s) {
            return Some(*t);
        }
        let words: Vec<&str> = table.iter().map(|(w, _)| *w).collect();
        let allowed = words.join(", ");
        let key = field.rsplit('.').next().unwrap_or(field);
        if planned.contains(&s) {
            self.err(
                span_of(v),
                field,
                format!("`{s}` is not available in this version of isobench yet"),
                &allowed,
                format!("use one of: {allowed}"),
            );
        } else {
            let near = nearest_names(s, words.iter().copied());
            let fix = match near.first() {
                Some(n) => format!("did you mean {key} = \"{n}\"?"),
                None => format!("write {key} = \"{}\"", words[0]),
            };
            self.err(
                span_of(v),
                field,
                format!("unknown value `{s}`"),
                &allowed,
                fix,
            );
        }
        None
    }
}

/// Whether `s` is a valid probe, stressor or tenant id ([`ID_ALLOWED`]).
pub(crate) fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 32
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && s.starts_with(|c: char| c.is_ascii_lowercase())
}

pub(super) const ID_ALLOWED: &str =
    "1 to 32 characters: lower-case letters, digits and '-', starting with a letter";

pub(super) fn id_fix(s: &str) -> String {
    let mut out: String = s
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(32)
        .collect();
    if !out.starts_with(|c: char| c.is_ascii_lowercase()) {
        out.insert(0, 't');
        out.truncate(32);
    }
    format!("write \"{out}\"")
}
