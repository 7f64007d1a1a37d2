//! The scenario's kind checks its own `[KIND]` table.

use toml::Spanned;

use super::checker::{span_of, Checker};
use super::Scenario;
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
