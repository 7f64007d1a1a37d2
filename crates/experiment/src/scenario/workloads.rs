//! What the `[[probe]]` and `[[stressor]]` tables share: a workload named from a catalogue,
//! a label no other table of the kind uses, and the workload's parameters.

use std::collections::BTreeSet;

use isobench_workloads::{nearest_names, ParamError, ParamSpec, ParamValues};
use toml::Spanned;

use super::checker::{id_fix, span_of, toml_value, valid_id, value_text, Checker, ID_ALLOWED};
use super::RawTable;
use crate::source::Span;

/// The fields every `[[probe]]` and `[[stressor]]` table has.
pub(super) trait RawWorkload {
    /// `name`: the workload.
    fn name(&self) -> &Option<Spanned<String>>;
    /// `label`: the id, when the name is not enough.
    fn label(&self) -> &Option<Spanned<String>>;
}

/// The workloads a table may name.
pub(super) struct Catalogue<W> {
    /// The table (`probe`).
    pub(super) table: &'static str,
    /// The other table (`stressor`), for a workload written in the wrong one.
    pub(super) other: &'static str,
    /// A workload to suggest (`cpu-int`).
    pub(super) example: &'static str,
    /// Every workload's name.
    pub(super) names: Vec<&'static str>,
    /// The workload of a name.
    pub(super) find: fn(&str) -> Option<W>,
    /// Whether a name is a workload of the other table.
    pub(super) in_other: fn(&str) -> bool,
}

/// One table whose workload is known.
pub(super) struct Entry<'r, R, W> {
    /// The field prefix (`probe[0]`).
    pub(super) field: String,
    /// Where the table is.
    pub(super) span: Span,
    /// The table as decoded.
    pub(super) raw: &'r R,
    /// Its `name`.
    pub(super) name: &'r Spanned<String>,
    /// The workload it names.
    pub(super) workload: W,
    /// Its unique id: the label, or the name.
    pub(super) id: String,
}

/// Checks the name and label of each table, then hands the rest to `each`; a table without
/// a known workload is reported and left out.
pub(super) fn check_workloads<'a, R: RawWorkload, W, S>(
    c: &mut Checker<'a>,
    raw: &[Spanned<R>],
    cat: &Catalogue<W>,
    mut each: impl FnMut(&mut Checker<'a>, Entry<'_, R, W>) -> S,
) -> Vec<S> {
    let what = cat.table;
    let all = cat.names.join(", ");
    let mut out = Vec::new();
    let mut ids = BTreeSet::new();
    for (i, r) in raw.iter().enumerate() {
        let span = span_of(r);
        let r = r.get_ref();
        let field = format!("{what}[{i}]");
        let Some(name) = r.name() else {
            c.err(
                span,
                &format!("{field}.name"),
                format!("the {what} has no name"),
                &all,
                format!(
                    "add name = \"{}\" (`isobench list` shows every {what})",
                    cat.example
                ),
            );
            continue;
        };
        let Some(workload) = (cat.find)(name.get_ref()) else {
            unknown_workload(c, cat, name, &field);
            continue;
        };
        let id = label(c, r.label(), name, &field, &mut ids, what);
        let entry = Entry {
            field,
            span,
            raw: r,
            name,
            workload,
            id,
        };
        out.push(each(c, entry));
    }
    if raw.is_empty() {
        c.err(
            Span::default(),
            what,
            format!("the scenario declares no {what}s"),
            &all,
            format!(
                "add a [[{what}]] table, e.g. [[{what}]] name = \"{}\"",
                cat.example
            ),
        );
    }
    out
}

fn unknown_workload<W>(
    c: &mut Checker<'_>,
    cat: &Catalogue<W>,
    name: &Spanned<String>,
    field: &str,
) {
    let (what, other) = (cat.table, cat.other);
    let n = name.get_ref();
    let near = nearest_names(n, cat.names.iter().copied());
    let fix = if (cat.in_other)(n) {
        format!("`{n}` is a {other}: move it to a [[{other}]] table")
    } else if let Some(s) = near.first() {
        format!("did you mean name = \"{s}\"?")
    } else {
        format!("pick a {what} from `isobench list`")
    };
    c.err(
        span_of(name),
        &format!("{field}.name"),
        format!("unknown {what} `{n}`"),
        &cat.names.join(", "),
        fix,
    );
}

/// The table's id: its `label`, or else its workload's name; no two tables of the kind may
/// share one.
fn label(
    c: &mut Checker<'_>,
    label: &Option<Spanned<String>>,
    name: &Spanned<String>,
    field: &str,
    ids: &mut BTreeSet<String>,
    what: &str,
) -> String {
    let (id, span) = match label {
        Some(l) => {
            if !valid_id(l.get_ref()) {
                c.err(
                    span_of(l),
                    &format!("{field}.label"),
                    format!("`{}` is not a valid label", l.get_ref()),
                    ID_ALLOWED,
                    id_fix(l.get_ref()),
                );
            }
            (l.get_ref().clone(), span_of(l))
        }
        None => (name.get_ref().clone(), span_of(name)),
    };
    if !ids.insert(id.clone()) {
        c.err(
            span,
            &format!("{field}.label"),
            format!("a second {what} is called `{id}`"),
            &format!("a label no other {what} uses"),
            format!("give one of them a label, e.g. label = \"{id}-2\""),
        );
    }
    id
}

/// A workload's `params` table, each parameter checked alone against the workload's own
/// table; the parameters in error fall back to their defaults.
pub(super) fn check_params(
    c: &mut Checker<'_>,
    workload: &str,
    specs: &[ParamSpec],
    table: &Option<RawTable>,
    field: &str,
) -> ParamValues {
    let Some(table) = table else {
        return ParamValues::defaults(workload, specs);
    };
    let mut ok_pairs = Vec::new();
    for (k, v) in table {
        let key = k.get_ref();
        let Some(text) = value_text(v.get_ref()) else {
            c.err(
                span_of(v),
                &format!("{field}.{key}"),
                "a table is not a parameter value".into(),
                "a number, a string, a boolean or an array of them",
                format!("write {key} = \"...\""),
            );
            continue;
        };
        // Check each parameter alone so each error points at its own line.
        match ParamValues::from_pairs(workload, specs, [(key.clone(), text.clone())]) {
            Ok(_) => ok_pairs.push((key.clone(), text)),
            Err(e) => {
                let (span, allowed, fix) = match &e {
                    ParamError::Unknown {
                        suggestions, known, ..
                    } => (
                        span_of(k),
                        if known.is_empty() {
                            format!("{workload} takes no parameters")
                        } else {
                            known.clone()
                        },
                        match suggestions.first() {
                            Some(s) => format!("did you mean `{s}`?"),
                            None => "remove it (`isobench list` shows every parameter)".into(),
                        },
                    ),
                    ParamError::Malformed { range, default, .. }
                    | ParamError::OutOfRange { range, default, .. } => (
                        span_of(v),
                        range.clone(),
                        format!(
                            "write {key} = {} (the default) or a value in {range}",
                            toml_value(default)
                        ),
                    ),
                    _ => (span_of(v), String::new(), "see `isobench list`".into()),
                };
                c.err(
                    span,
                    &format!("{field}.{key}"),
                    e.to_string(),
                    &allowed,
                    fix,
                );
            }
        }
    }
    ParamValues::from_pairs(workload, specs, ok_pairs)
        .unwrap_or_else(|_| ParamValues::defaults(workload, specs))
}
