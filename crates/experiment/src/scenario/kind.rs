//! The scenario's kind: its name among the kinds of the table, and its own `[KIND]` table,
//! which the kind checks.

use toml::Spanned;

use super::checker::{span_of, Checker};
use super::{Kind, Scenario};
use crate::fields;

/// The scenario's kind checks its own `[KIND]` table; a table of another kind is an error.
pub(super) fn kind_settings(
    c: &mut Checker<'_>,
    sc: &Scenario,
    tables: Vec<(Spanned<String>, Spanned<fields::RawTable>)>,
) -> serde_json::Value {
    let kind = sc.kind.experiment();
    let mut own = None;
    for (name, table) in tables {
        if name.get_ref() == kind.name() && own.is_none() {
            own = Some((span_of(&name), table.into_inner()));
        } else {
            let e = fields::other_kinds_table(c.src, &name, kind.name());
            c.errors.push(e);
        }
    }
    let present = own.is_some();
    let (span, table) = own.unwrap_or_default();
    let mut f = fields::Fields::new(c, kind.name(), span, table, present);
    let settings = kind.settings(&mut f, sc);
    f.finish();
    settings
}

/// The words of `kind`: every kind of [`crate::kinds::KINDS`].
pub(super) fn kind_words() -> Vec<(&'static str, Kind)> {
    crate::kinds::KINDS
        .iter()
        .filter_map(|k| Some((k.name(), Kind::named(k.name())?)))
        .collect()
}

/// Kinds that exist in the design but are not implemented yet, for a helpful error.
pub(super) const PLANNED_KINDS: &[&str] = &[];
