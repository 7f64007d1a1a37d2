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

/// `as_str`, `Display` and `FromStr` (erring with [`UnknownWord`]) for a fieldless enum that
/// is written as one word per variant: `words!(Type, "what", Variant => "word", ...)`.
macro_rules! words {
    ($ty:ident, $what:literal, $v0:ident => $w0:literal $(, $v:ident => $w:literal)* $(,)?) => {
        impl $ty {
            /// The word this value is written as.
            pub fn as_str(self) -> &'static str {
                match self {
                    $ty::$v0 => $w0,
                    $($ty::$v => $w,)*
                }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $ty {
            type Err = $crate::UnknownWord;

            fn from_str(s: &str) -> Result<Self, $crate::UnknownWord> {
                match s {
                    $w0 => Ok($ty::$v0),
                    $($w => Ok($ty::$v),)*
                    other => Err($crate::UnknownWord {
                        what: $what,
                        value: other.to_string(),
                        expected: concat!("\"", $w0, "\"" $(, " or \"", $w, "\"")*),
                    }),
                }
            }
        }
    };
}
pub(crate) use words;

/// Asserts that each of `values` reads back from its word, as text and as JSON (a string).
#[cfg(test)]
pub(crate) fn assert_round_trip<T>(values: &[T])
where
    T: Copy
        + std::fmt::Debug
        + std::fmt::Display
        + PartialEq
        + std::str::FromStr<Err = UnknownWord>
        + serde::Serialize
        + serde::de::DeserializeOwned,
{
    for &v in values {
        assert_eq!(v.to_string().parse::<T>().unwrap(), v);
        let json = serde_json::to_string(&v).unwrap();
        assert_eq!(json, format!("\"{v}\""));
        assert_eq!(serde_json::from_str::<T>(&json).unwrap(), v);
    }
}
