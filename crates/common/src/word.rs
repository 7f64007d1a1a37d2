//! The error of parsing one of this crate's words from text.

/// A text that is not one of the words a type accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} = {value}: expected {expected}")]
pub struct UnknownWord {
    /// What was being parsed (`direction`, `role`).
    pub what: &'static str,
    /// The text given.
    pub value: String,
    /// The words that would have been valid.
    pub expected: &'static str,
}
