//! Reading a scenario file: the shared tables checked by the modules beside this one, then
//! the kind's own table checked by the kind ([`super::kind`]).

use isobench_workloads::nearest_names;
use toml::Spanned;

use super::checker::{span_of, Checker};
use super::kind::{kind_settings, kind_words, PLANNED_KINDS};
use super::{probes, repetitions, stressors, tenants, top, trial};
use super::{RawScenario, Scenario, QUICK_NAME, QUICK_TOML};
use crate::fields;
use crate::source::{ScenarioError, ScenarioErrors, Source, Span};

impl Scenario {
    /// The built-in `quick` scenario.
    pub fn quick() -> Scenario {
        Scenario::parse(Source::new(QUICK_NAME, QUICK_TOML))
            .expect("the built-in quick scenario is valid")
    }

    /// Reads and checks a scenario file's text. Returns every problem found.
    pub fn parse(source: Source) -> Result<Scenario, ScenarioErrors> {
        let shared = fields::struct_fields::<RawScenario>();
        let kinds: Vec<&str> = kind_words()
            .iter()
            .map(|(w, _)| *w)
            .chain(PLANNED_KINDS.iter().copied())
            .collect();
        let decoded = fields::top_level(&source.text, shared, &kinds)
            .and_then(|top| Ok((top, toml::from_str::<RawScenario>(&source.text)?)));
        let (top, raw) = match decoded {
            Ok(r) => r,
            Err(e) => return Err(ScenarioErrors(vec![decode_error(&source, &e)])),
        };
        let mut c = Checker::new(&source);
        for key in &top.unknown {
            unknown_top_level(&mut c, key, shared, &kinds);
        }
        let mut sc = check(&mut c, raw);
        sc.settings = kind_settings(&mut c, &sc, top.kind_tables);
        let mut errors = c.errors;
        if errors.is_empty() {
            Ok(Scenario { source, ..sc })
        } else {
            errors.sort_by_key(|e| (e.line, e.column));
            Err(ScenarioErrors(errors))
        }
    }
}

/// Reports a top-level key that is neither a shared field nor a kind's table.
fn unknown_top_level(c: &mut Checker<'_>, key: &Spanned<String>, shared: &[&str], kinds: &[&str]) {
    let name = key.get_ref();
    let near = nearest_names(name, shared.iter().chain(kinds).copied());
    let fix = match near.first() {
        Some(n) => format!("did you mean `{n}`? (see docs/scenario.md)"),
        None => "remove it, or see docs/scenario.md for the fields of a scenario".into(),
    };
    c.err(
        span_of(key),
        name,
        format!("unknown field `{name}`"),
        &format!(
            "the fields {}, or a table named after the kind",
            shared.join(", ")
        ),
        fix,
    );
}

/// Turns a TOML decoding error (syntax, wrong type, unknown field) into a located error.
fn decode_error(src: &Source, e: &toml::de::Error) -> ScenarioError {
    let span: Span = e.span().unwrap_or(0..0).into();
    let msg = e.message().trim().to_string();
    let field = src.field_at(span.start);
    let (allowed, fix) = if let Some(rest) = msg.strip_prefix("unknown field ") {
        let (name, expected) = rest.split_once(", expected ").unwrap_or((rest, ""));
        let name = name.trim_matches('`');
        let words: Vec<&str> = expected
            .split(['`', ','])
            .map(|w| w.trim().trim_start_matches("one of").trim())
            .map(|w| w.trim_start_matches("or ").trim())
            .filter(|w| !w.is_empty() && *w != "or")
            .collect();
        let near = nearest_names(name, words.iter().copied());
        let fix = match near.first() {
            Some(n) => format!("did you mean `{n}`? (see docs/scenario.md)"),
            None => "remove it, or see docs/scenario.md for the fields of this table".into(),
        };
        (format!("the fields {}", words.join(", ")), fix)
    } else if msg.starts_with("invalid type") {
        let expected = msg.split("expected ").nth(1).unwrap_or("").to_string();
        (
            expected.clone(),
            format!("write the value as {expected} (see docs/scenario.md)"),
        )
    } else if msg.starts_with("missing field") {
        (
            String::new(),
            "add the field (see docs/scenario.md)".to_string(),
        )
    } else {
        (
            "TOML syntax (https://toml.io)".to_string(),
            "fix the syntax at the marked position: check quotes, brackets and `key = value`"
                .to_string(),
        )
    };
    let problem = if msg.starts_with("unknown field") || msg.starts_with("invalid type") {
        msg.clone()
    } else {
        format!("the file is not valid TOML: {msg}")
    };
    src.error(span, field, problem, allowed, fix)
}

/// Checks every table but the kind's own.
fn check(c: &mut Checker<'_>, raw: RawScenario) -> Scenario {
    let top = top::check_top(c, &raw);
    let trial = trial::check_trial(c, &raw.trial);
    let repetitions = repetitions::check_repetitions(c, &raw.repetitions);
    let tenants = tenants::check_tenants(c, &raw.tenant);
    let probes = probes::check_probes(c, &raw.probe);
    let stressors = stressors::check_stressors(c, &raw.stressor);
    Scenario {
        source: c.src.clone(),
        name: top.name,
        description: raw
            .description
            .as_ref()
            .map(|d| d.get_ref().clone())
            .unwrap_or_default(),
        kind: top.kind,
        seed: top.seed,
        platform: top.platform,
        unsafe_on_host: top.unsafe_on_host,
        placement: top.placement,
        trial,
        repetitions,
        tenants,
        probes,
        stressors,
        settings: serde_json::Value::Null,
    }
}
