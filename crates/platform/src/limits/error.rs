//! What goes wrong in a limit list, naming the key, the value and the fix.

use thiserror::Error;

use super::keys::{key_names, key_spec};

/// A limit list that cannot be parsed or does not fit this host.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum LimitError {
    /// A key that is not in [`LIMIT_KEYS`].
    #[error(
        "unknown limit key `{key}`{}; valid keys: {}",
        match suggestion { Some(s) => format!(" (did you mean `{s}`?)"), None => String::new() },
        key_names()
    )]
    UnknownKey {
        /// The key as written.
        key: String,
        /// The nearest valid key.
        suggestion: Option<&'static str>,
    },
    /// An item without `=`.
    #[error("limit `{item}` is not of the form key=value; write e.g. `cpus=1.5,memory=1G`")]
    NotKeyValue {
        /// The item as written.
        item: String,
    },
    /// The same key twice.
    #[error("limit key `{key}` is given twice; keep only one `{key}=...`")]
    Duplicate {
        /// The key.
        key: String,
    },
    /// A value that does not parse or is out of range.
    #[error("limit `{key}={value}`: {problem}; write e.g. `{example}`")]
    BadValue {
        /// The key.
        key: &'static str,
        /// The value as written.
        value: String,
        /// What is wrong with it.
        problem: String,
        /// A valid example.
        example: &'static str,
    },
    /// Two keys that set the same thing.
    #[error("limits `{first}` and `{second}` both set {what}; keep only one of them")]
    Conflict {
        /// First key.
        first: &'static str,
        /// Second key.
        second: &'static str,
        /// What they both set.
        what: &'static str,
    },
    /// A limit that means something only with another one.
    #[error("limit `{key}` needs `{needs}` too: {why}; add e.g. `{example}`")]
    Requires {
        /// The key.
        key: &'static str,
        /// The key it needs.
        needs: &'static str,
        /// Why.
        why: &'static str,
        /// A valid pair.
        example: &'static str,
    },
    /// Two limits whose values are in the wrong order.
    #[error("limit `{lower}={lower_value}` is above `{upper}={upper_value}`: {rule}; lower `{lower}` or raise `{upper}`")]
    Order {
        /// The key that must be the smaller.
        lower: &'static str,
        /// Its value as written (canonical form).
        lower_value: String,
        /// The key that must be the larger.
        upper: &'static str,
        /// Its value.
        upper_value: String,
        /// The rule the values break.
        rule: String,
    },
    /// A valid value that does not fit this host.
    #[error("limit `{key}={value}`: {problem}; {fix}")]
    NotOnHost {
        /// The key.
        key: &'static str,
        /// The value as written (canonical form).
        value: String,
        /// What is wrong.
        problem: String,
        /// How to fix it.
        fix: String,
    },
}

pub(super) fn bad(key: &'static str, value: &str, problem: impl Into<String>) -> LimitError {
    LimitError::BadValue {
        key,
        value: value.to_string(),
        problem: problem.into(),
        example: key_spec(key).map_or("cpus=1", |k| k.example),
    }
}

pub(super) fn parse_int(
    key: &'static str,
    value: &str,
    min: u64,
    max: u64,
) -> Result<u64, LimitError> {
    let n: u64 = value
        .trim()
        .parse()
        .map_err(|_| bad(key, value, "not a whole number"))?;
    if n < min || n > max {
        return Err(bad(key, value, format!("must be between {min} and {max}")));
    }
    Ok(n)
}
