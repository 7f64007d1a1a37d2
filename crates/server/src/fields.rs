//! The field names of a request body's type, read from its `Deserialize` implementation,
//! so an unknown field is answered with the list the type really has (it cannot drift from
//! the struct) and the nearest known name.
//!
//! How: serde's derived `Deserialize` of a struct calls `deserialize_struct(name, FIELDS,
//! visitor)`; [`of`] hands it a deserializer that only records `FIELDS` and stops.

use serde::de::{self, Deserialize, Visitor};

/// The fields of struct `T`; `None` when `T` is not a struct with named fields.
pub fn of<T: for<'de> Deserialize<'de>>() -> Option<&'static [&'static str]> {
    let mut fields = None;
    let _ = T::deserialize(Recorder(&mut fields));
    fields
}

struct Recorder<'a>(&'a mut Option<&'static [&'static str]>);

impl<'de> de::Deserializer<'de> for Recorder<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("only records a struct's fields"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = Some(fields);
        Err(de::Error::custom("only records a struct's fields"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// The known name nearest to `name` by edit distance (a typo: at most a third of the
/// longer name's characters differ, and at most 3), if there is one.
pub fn nearest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    let name = name.to_ascii_lowercase();
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(&name, k), *k))
        .filter(|(d, k)| *d <= 3 && *d * 3 <= k.len().max(name.len()))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct Body {
        preset: Option<String>,
        platform: Option<String>,
        #[serde(rename = "seed")]
        the_seed: Option<u64>,
    }

    #[test]
    fn a_structs_fields_are_read_from_its_deserialize() {
        assert_eq!(of::<Body>(), Some(&["preset", "platform", "seed"][..]));
        assert_eq!(of::<String>(), None);
        assert_eq!(of::<serde_json::Value>(), None);
    }

    #[test]
    fn typos_find_their_field_and_other_names_do_not() {
        let known = ["preset", "scenario", "name", "platform", "seed"];
        assert_eq!(nearest("platfrom", &known), Some("platform"));
        assert_eq!(nearest("Preset", &known), Some("preset"));
        assert_eq!(nearest("seeds", &known), Some("seed"));
        assert_eq!(nearest("senario", &known), Some("scenario"));
        assert_eq!(nearest("colour", &known), None);
        assert_eq!(nearest("x", &known), None);
    }
}
