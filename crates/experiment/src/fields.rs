//! A kind's own scenario table (`[sweep]`, `[timeline]`, ...), read with located errors.
//!
//! The top level of a scenario has the shared fields (`name`, `kind`, `trial`, `tenant`, ...)
//! and at most one table named after an experiment kind. The kind checks that table itself
//! ([`crate::kinds::ExperimentKind::settings`]) through [`Fields`]: typed getters that report
//! a wrong value at its file, line and column with the allowed values and a fix, as every
//! other field does, and that report the table's unknown keys when the kind is done. The
//! shared fields are never passed to a kind, so adding a kind adds no field here.

use std::collections::BTreeMap;
use std::time::Duration;

use isobench_workloads::nearest_names;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use toml::{Spanned, Value};

use crate::scenario::checker::{value_kind, Checker};
use crate::source::{ScenarioError, Source, Span};

/// A table as written, each key and value with its place in the file.
pub type RawTable = BTreeMap<Spanned<String>, Spanned<Value>>;

/// What the top level of a scenario holds besides its shared fields: the tables named after
/// an experiment kind, and keys that are neither.
pub(crate) struct TopLevel {
    /// `[NAME]` tables whose name is a kind (or a planned kind), in file order.
    pub kind_tables: Vec<(Spanned<String>, Spanned<RawTable>)>,
    /// Keys that are neither a shared field nor a kind.
    pub unknown: Vec<Spanned<String>>,
}

/// Reads the top level of `text`, keeping the tables whose name is in `kinds` and the keys
/// that are in neither `shared` nor `kinds`.
pub(crate) fn top_level(
    text: &str,
    shared: &'static [&'static str],
    kinds: &[&str],
) -> Result<TopLevel, toml::de::Error> {
    struct V<'k> {
        shared: &'static [&'static str],
        kinds: &'k [&'k str],
    }
    impl<'de> Visitor<'de> for V<'_> {
        type Value = TopLevel;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a scenario table")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<TopLevel, A::Error> {
            let mut top = TopLevel {
                kind_tables: Vec::new(),
                unknown: Vec::new(),
            };
            while let Some(key) = m.next_key::<Spanned<String>>()? {
                if self.kinds.contains(&key.get_ref().as_str()) {
                    top.kind_tables.push((key, m.next_value()?));
                } else {
                    m.next_value::<IgnoredAny>()?;
                    if !self.shared.contains(&key.get_ref().as_str()) {
                        top.unknown.push(key);
                    }
                }
            }
            Ok(top)
        }
    }
    struct Top<'k>(V<'k>);
    impl<'de> serde::de::DeserializeSeed<'de> for Top<'_> {
        type Value = TopLevel;
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<TopLevel, D::Error> {
            d.deserialize_map(self.0)
        }
    }
    use serde::de::DeserializeSeed;
    Top(V { shared, kinds }).deserialize(toml::Deserializer::new(text))
}

/// The field names of a struct that serde derives `Deserialize` for, as serde sees them.
pub(crate) fn struct_fields<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    struct Capture(&'static [&'static str]);
    impl<'de> Deserializer<'de> for &mut Capture {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            self.0 = fields;
            Err(de::Error::custom("fields captured"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }
    let mut c = Capture(&[]);
    let _ = T::deserialize(&mut c);
    c.0
}

/// Typed reading of one kind's table. Every getter removes the key it reads; [`Fields::finish`]
/// reports what is left as unknown.
pub struct Fields<'c, 'a> {
    c: &'c mut Checker<'a>,
    kind: &'static str,
    span: Span,
    table: RawTable,
    known: Vec<&'static str>,
    present: bool,
}

impl<'c, 'a> Fields<'c, 'a> {
    pub(crate) fn new(
        c: &'c mut Checker<'a>,
        kind: &'static str,
        span: Span,
        table: RawTable,
        present: bool,
    ) -> Fields<'c, 'a> {
        Fields {
            c,
            kind,
            span,
            table,
            known: Vec::new(),
            present,
        }
    }

    /// Whether the scenario has the table at all.
    pub fn present(&self) -> bool {
        self.present
    }

    /// Whether the table sets `key` (and it has not been read yet).
    pub fn has(&self, key: &str) -> bool {
        self.table.keys().any(|k| k.get_ref() == key)
    }

    /// The scenario file.
    pub fn source(&self) -> &Source {
        self.c.src
    }

    /// Where the table is (its name), or the start of the file when it has none, for
    /// errors about a missing key.
    pub fn span(&self) -> Span {
        self.span
    }

    /// `kind.key`, the field name errors give.
    pub fn field(&self, key: &str) -> String {
        format!("{}.{key}", self.kind)
    }

    /// The value of `key`, as written, when present.
    pub fn get(&mut self, key: &'static str) -> Option<Spanned<Value>> {
        self.known.push(key);
        let found = self.table.keys().find(|k| k.get_ref() == key).cloned()?;
        self.table.remove(&found)
    }

    /// Reports a problem with this table.
    pub fn error(&mut self, span: Span, key: &str, problem: String, allowed: &str, fix: String) {
        let field = self.field(key);
        self.c.err(span, &field, problem, allowed, fix);
    }

    /// Reports that `key` is required and missing.
    pub fn missing(&mut self, key: &str, allowed: &str, example: &str) {
        let span = self.span;
        let problem = if self.present {
            format!("[{}] needs `{key}`", self.kind)
        } else {
            format!(
                "kind = \"{}\" needs a [{}] table with `{key}`",
                self.kind, self.kind
            )
        };
        self.error(
            span,
            key,
            problem,
            allowed,
            format!("add {key} = {example} to [{}]", self.kind),
        );
    }

    /// An integer in `range` (inclusive), or `default` (absent or wrong, reported).
    pub fn int(&mut self, key: &'static str, range: (i64, i64), default: i64) -> i64 {
        let v = self.get(key);
        let field = self.field(key);
        self.c.int(&v, &field, range, default)
    }

    /// A number accepted by `ok`, or `default`.
    pub fn float(
        &mut self,
        key: &'static str,
        ok: impl Fn(f64) -> bool,
        allowed: &str,
        default: f64,
    ) -> f64 {
        let v = self.get(key);
        let field = self.field(key);
        self.c.float(&v, &field, ok, allowed, default)
    }

    /// A duration (`"50s"`, `"1m"`, or seconds), or `default`.
    pub fn duration(&mut self, key: &'static str, default: Duration) -> Duration {
        let v = self.get(key);
        let field = self.field(key);
        self.c.duration(&v, &field, default)
    }

    /// A string, with its place; a value of another type is reported.
    pub fn string(&mut self, key: &'static str) -> Option<Spanned<String>> {
        let v = self.get(key)?;
        match v.get_ref() {
            Value::String(s) => Some(Spanned::new(v.span(), s.clone())),
            other => {
                let problem = format!("{} is not a string", value_kind(other));
                self.error(
                    v.span().into(),
                    key,
                    problem,
                    "a string",
                    format!("write {key} = \"...\""),
                );
                None
            }
        }
    }

    /// One of `words` (with the value each stands for), or `default`.
    pub fn word<T: Copy>(&mut self, key: &'static str, words: &[(&str, T)], default: T) -> T {
        let Some(s) = self.string(key) else {
            return default;
        };
        let field = self.field(key);
        self.c.word(&s, &field, words, &[]).unwrap_or(default)
    }

    /// An array, each element as written, with the array's place; `None` when absent or
    /// not an array (reported).
    pub fn array(&mut self, key: &'static str) -> Option<(Span, Vec<Value>)> {
        let v = self.get(key)?;
        let span: Span = v.span().into();
        match v.into_inner() {
            Value::Array(a) => Some((span, a)),
            other => {
                let problem = format!("{} is not an array", value_kind(&other));
                self.error(
                    span,
                    key,
                    problem,
                    "an array",
                    format!("write {key} = [ ... ]"),
                );
                None
            }
        }
    }

    /// A non-empty array of integers in `range`, in the order written, with the array's
    /// place; `None` when absent or wrong (reported).
    pub fn int_list(&mut self, key: &'static str, range: (i64, i64)) -> Option<(Span, Vec<i64>)> {
        let (span, a) = self.array(key)?;
        let ints: Option<Vec<i64>> = a
            .iter()
            .map(|v| match v {
                Value::Integer(i) if *i >= range.0 && *i <= range.1 => Some(*i),
                _ => None,
            })
            .collect();
        match ints {
            Some(v) if !v.is_empty() => Some((span, v)),
            _ => {
                self.error(
                    span,
                    key,
                    "not a non-empty list of integers in range".into(),
                    &format!("integers in {}..={}", range.0, range.1),
                    format!("write {key} = [{}, {}]", range.0, range.1),
                );
                None
            }
        }
    }

    /// `list`, as read from `key` at `span`, sorted and without repeats; a list written
    /// otherwise is reported (`what`: the items, as in "{what} are not increasing"; `allowed`:
    /// what may be written) and its sorted form used.
    pub fn increasing(
        &mut self,
        span: Span,
        key: &str,
        what: &str,
        allowed: &str,
        list: &[i64],
    ) -> Vec<i64> {
        let mut sorted = list.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted != list {
            let written: Vec<String> = sorted.iter().map(|i| i.to_string()).collect();
            self.error(
                span,
                key,
                format!("{what} are not increasing"),
                allowed,
                format!("write {key} = [{}]", written.join(", ")),
            );
        }
        sorted
    }

    /// Reports the keys no getter asked for. Call last.
    pub fn finish(self) {
        let known = self.known;
        for (k, _) in self.table {
            let near = nearest_names(k.get_ref(), known.iter().copied());
            let fix = match near.first() {
                Some(n) => format!("did you mean `{n}`? (see docs/scenario.md)"),
                None => "remove it, or see docs/scenario.md for the fields of this table".into(),
            };
            let field = format!("{}.{}", self.kind, k.get_ref());
            let allowed = if known.is_empty() {
                format!(
                    "none: kind = \"{}\" takes no settings of its own",
                    self.kind
                )
            } else {
                format!("the fields {}", known.join(", "))
            };
            self.c.err(
                k.span().into(),
                &field,
                format!("unknown field `{}` in [{}]", k.get_ref(), self.kind),
                &allowed,
                fix,
            );
        }
    }
}

/// The error for a `[NAME]` table of a kind other than the scenario's.
pub(crate) fn other_kinds_table(src: &Source, name: &Spanned<String>, kind: &str) -> ScenarioError {
    src.error(
        name.span().into(),
        name.get_ref().clone(),
        format!(
            "[{}] holds the settings of kind = \"{}\", and this scenario is kind = \"{kind}\"",
            name.get_ref(),
            name.get_ref()
        ),
        format!("a [{kind}] table, or none"),
        format!(
            "remove [{}], or set kind = \"{}\"",
            name.get_ref(),
            name.get_ref()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct Two {
        alpha: u32,
        #[serde(rename = "beta-x")]
        beta: String,
    }

    #[test]
    fn struct_fields_are_what_serde_reads() {
        assert_eq!(struct_fields::<Two>(), &["alpha", "beta-x"]);
    }

    #[test]
    fn the_top_level_keeps_kind_tables_and_finds_unknown_keys() {
        let text = "name = \"x\"\nkindd = 1\n[sweep]\nvalues = [1, 2]\n[trial]\nduration = 1\n";
        let top = top_level(text, &["name", "trial"], &["sweep", "matrix"]).unwrap();
        assert_eq!(top.kind_tables.len(), 1);
        let (name, table) = &top.kind_tables[0];
        assert_eq!(name.get_ref(), "sweep");
        let key = table.get_ref().keys().next().unwrap();
        assert_eq!(key.get_ref(), "values");
        assert_eq!(&text[key.span()], "values");
        assert_eq!(top.unknown.len(), 1);
        assert_eq!(&text[top.unknown[0].span()], "kindd");
    }
}
