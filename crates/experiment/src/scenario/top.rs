//! The top-level fields of a scenario: `name`, `kind`, `seed`, `platform`, `unsafe_on_host`
//! and `placement`.

use toml::{Spanned, Value};

use super::checker::{id_fix, span_of, valid_id, value_text, Checker, ID_ALLOWED};
use super::kind::{kind_words, PLANNED_KINDS};
use super::{Kind, Placement, PlatformChoice, UnsafeOnHost};
use super::{RawScenario, PLANNED_PLATFORMS};
use crate::source::Span;

/// The top-level fields, checked.
pub(super) struct Top {
    pub(super) name: String,
    pub(super) kind: Kind,
    pub(super) seed: Option<u64>,
    pub(super) platform: PlatformChoice,
    pub(super) unsafe_on_host: UnsafeOnHost,
    pub(super) placement: Placement,
}

pub(super) fn check_top(c: &mut Checker<'_>, raw: &RawScenario) -> Top {
    Top {
        name: check_name(c, &raw.name),
        kind: check_kind(c, &raw.kind),
        seed: check_seed(c, &raw.seed),
        platform: c.word_or(
            &raw.platform,
            "platform",
            &PlatformChoice::table(),
            PLANNED_PLATFORMS,
            PlatformChoice::Auto,
        ),
        unsafe_on_host: c.word_or(
            &raw.unsafe_on_host,
            "unsafe_on_host",
            &[
                ("refuse", UnsafeOnHost::Refuse),
                ("skip", UnsafeOnHost::Skip),
                ("allow", UnsafeOnHost::Allow),
            ],
            &[],
            UnsafeOnHost::Refuse,
        ),
        placement: c.word_or(
            &raw.placement,
            "placement",
            &[("shared", Placement::Shared), ("split", Placement::Split)],
            &[],
            Placement::Shared,
        ),
    }
}

/// `name`, or else the file's stem when it is a valid id, or else `scenario`.
fn check_name(c: &mut Checker<'_>, name: &Option<Spanned<String>>) -> String {
    match name {
        Some(n) if valid_id(n.get_ref()) => n.get_ref().clone(),
        Some(n) => {
            c.err(
                span_of(n),
                "name",
                format!("`{}` is not a valid scenario name", n.get_ref()),
                ID_ALLOWED,
                id_fix(n.get_ref()),
            );
            String::new()
        }
        None => {
            let stem = std::path::Path::new(&c.src.name)
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("scenario")
                .trim_start_matches("<builtin:")
                .trim_end_matches('>')
                .to_string();
            if valid_id(&stem) {
                stem
            } else {
                "scenario".into()
            }
        }
    }
}

/// `kind`, which every scenario must say.
fn check_kind(c: &mut Checker<'_>, kind: &Option<Spanned<String>>) -> Kind {
    match kind {
        Some(k) => c
            .word(k, "kind", &kind_words(), PLANNED_KINDS)
            .unwrap_or_default(),
        None => {
            c.err(
                Span { start: 0, end: 0 },
                "kind",
                "the scenario does not say what kind of experiment it is".into(),
                &kind_words()
                    .iter()
                    .map(|(w, _)| *w)
                    .collect::<Vec<_>>()
                    .join(", "),
                format!(
                    "add kind = \"{}\" at the top of the file",
                    Kind::default().as_str()
                ),
            );
            Kind::default()
        }
    }
}

/// `seed`: an integer, or `"random"` (`None`).
fn check_seed(c: &mut Checker<'_>, seed: &Option<Spanned<Value>>) -> Option<u64> {
    seed.as_ref().and_then(|s| match s.get_ref() {
        Value::Integer(i) if *i >= 0 => Some(*i as u64),
        Value::String(t) if t == "random" => None,
        other => {
            c.err(
                span_of(s),
                "seed",
                format!(
                    "{} is not a seed",
                    value_text(other).map_or("this".into(), |t| format!("`{t}`"))
                ),
                "a non-negative integer, or \"random\" (a seed is then chosen and recorded)",
                "write seed = 1".into(),
            );
            None
        }
    })
}
