//! Serde for `f64` fields that may legitimately be infinite (an interval bound when resamples
//! hit a zero baseline). JSON has no infinity, and serde_json would write `null` and then fail
//! to read it back; these fields are written as numbers when finite and as the strings `"inf"`,
//! `"-inf"` or `"nan"` otherwise, and read back from either form.

use serde::{Deserialize, Deserializer, Serializer};

/// Serializes a float, non-finite values as strings.
pub(crate) fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.is_finite() {
        s.serialize_f64(*v)
    } else if v.is_nan() {
        s.serialize_str("nan")
    } else if *v > 0.0 {
        s.serialize_str("inf")
    } else {
        s.serialize_str("-inf")
    }
}

/// Reads a float written by [`serialize`].
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Repr {
        Num(f64),
        Text(String),
    }
    match Repr::deserialize(d)? {
        Repr::Num(v) => Ok(v),
        Repr::Text(t) => match t.as_str() {
            "inf" => Ok(f64::INFINITY),
            "-inf" => Ok(f64::NEG_INFINITY),
            "nan" => Ok(f64::NAN),
            other => Err(serde::de::Error::custom(format!(
                "expected a number, \"inf\", \"-inf\" or \"nan\", got {other:?}"
            ))),
        },
    }
}
