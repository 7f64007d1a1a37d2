//! Typed workload parameters.
//!
//! Each workload declares its parameters once, as a table of [`ParamSpec`] (name, help, kind
//! with range, default). User input (`--set key=value` on the command line, a TOML table in a
//! scenario) is checked against that table, defaults are filled in, and the workload decodes
//! the result into its own `#[derive(Deserialize)]` options struct with
//! [`ParamValues::decode`]. The same table drives `isobench list`.

// Parameter errors carry everything the message needs (name, value, range, default); they
// occur once, on the input path, so their size does not matter.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;

use isobench_common::{format_size, parse_size};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// What values a parameter takes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ParamKind {
    /// Integer in `min..=max`.
    Int {
        /// Smallest allowed value.
        min: i64,
        /// Largest allowed value.
        max: i64,
    },
    /// Real number in `min..=max`.
    Float {
        /// Smallest allowed value.
        min: f64,
        /// Largest allowed value.
        max: f64,
    },
    /// A byte size with an optional K/M/G/T suffix (powers of 1024), in `min..=max` bytes.
    Size {
        /// Smallest allowed size in bytes.
        min: u64,
        /// Largest allowed size in bytes.
        max: u64,
    },
    /// `true` or `false`.
    Bool,
    /// One of a fixed set of words.
    Choice {
        /// The allowed words.
        options: &'static [&'static str],
    },
    /// Free text (addresses, paths).
    Text,
}

/// One declared parameter.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ParamSpec {
    /// snake_case name, as used in `--set name=value` and scenario files.
    pub name: &'static str,
    /// What the parameter does.
    pub help: &'static str,
    /// Allowed values.
    pub kind: ParamKind,
    /// Default, written as a user would write it. An empty default on a `Size` or `Int`
    /// means "derived at run time" (from caches or the tenant's limits) and decodes as null.
    pub default: &'static str,
}

/// The `threads` parameter of a stressor whose workers share out its CPUs (see
/// `stressors::pool::cpu_share`): 1..=1024, empty = from intensity. `help` says what a
/// thread does there.
pub(crate) const fn share_threads(help: &'static str) -> ParamSpec {
    ParamSpec {
        name: "threads",
        help,
        kind: ParamKind::Int { min: 1, max: 1024 },
        default: "",
    }
}

/// The `duty` parameter that goes with [`share_threads`]: percent of each period a thread is
/// busy, 1..=100, empty = from intensity.
pub(crate) const fn share_duty(help: &'static str) -> ParamSpec {
    ParamSpec {
        name: "duty",
        help,
        kind: ParamKind::Int { min: 1, max: 100 },
        default: "",
    }
}

/// The `addr` parameter of a probe that talks to a server: where the server is, default
/// loopback. `help` says which server and what happens there when `port` is 0.
pub(crate) const fn peer_addr(help: &'static str) -> ParamSpec {
    ParamSpec {
        name: "addr",
        help,
        kind: ParamKind::Text,
        default: "127.0.0.1",
    }
}

/// The `port` parameter that goes with [`peer_addr`]: an external server's port, or 0 (the
/// default) for isobench's own server. `help` names the server kinds.
pub(crate) const fn peer_port(help: &'static str) -> ParamSpec {
    ParamSpec {
        name: "port",
        help,
        kind: ParamKind::Int { min: 0, max: 65535 },
        default: "0",
    }
}

/// The `proto` parameter of a network probe that speaks two protocols: one of `options`
/// (the two protocols and `both`, in the order `isobench list` shows them), default `both`,
/// which splits the run's budget between them.
pub(crate) const fn peer_proto(help: &'static str, options: &'static [&'static str]) -> ParamSpec {
    ParamSpec {
        name: "proto",
        help,
        kind: ParamKind::Choice { options },
        default: "both",
    }
}

impl ParamSpec {
    /// Human-readable range (`1..=64`, `4K..=1G`, `seq|rand`).
    pub fn range_text(&self) -> String {
        match self.kind {
            ParamKind::Int { min, max } => format!("{min}..={max}"),
            ParamKind::Float { min, max } => format!("{min}..={max}"),
            ParamKind::Size { min, max } => format!("{}..={}", format_size(min), format_size(max)),
            ParamKind::Bool => "true|false".into(),
            ParamKind::Choice { options } => options.join("|"),
            ParamKind::Text => "text".into(),
        }
    }

    fn default_text(&self) -> String {
        if self.default.is_empty() {
            "auto".into()
        } else {
            self.default.into()
        }
    }

    /// Parses and range-checks one value written as text.
    pub fn parse(&self, workload: &str, text: &str) -> Result<Value, ParamError> {
        let text = text.trim();
        let bad = |expected: &str| ParamError::Malformed {
            workload: workload.into(),
            name: self.name.into(),
            value: text.into(),
            expected: expected.into(),
            range: self.range_text(),
            default: self.default_text(),
        };
        let out_of_range = || ParamError::OutOfRange {
            workload: workload.into(),
            name: self.name.into(),
            value: text.into(),
            range: self.range_text(),
            default: self.default_text(),
        };
        match self.kind {
            ParamKind::Int { min, max } => {
                let v: i64 = parse_int(text).ok_or_else(|| bad("an integer"))?;
                if v < min || v > max {
                    return Err(out_of_range());
                }
                Ok(Value::from(v))
            }
            ParamKind::Float { min, max } => {
                let v: f64 = text.parse().map_err(|_| bad("a number"))?;
                if !v.is_finite() || v < min || v > max {
                    return Err(out_of_range());
                }
                Ok(Value::from(v))
            }
            ParamKind::Size { min, max } => {
                let v = parse_size(text).map_err(|_| bad("a size such as 8K, 64M or 1G"))?;
                if v < min || v > max {
                    return Err(out_of_range());
                }
                Ok(Value::from(v))
            }
            ParamKind::Bool => match text {
                "true" | "yes" | "on" | "1" => Ok(Value::Bool(true)),
                "false" | "no" | "off" | "0" => Ok(Value::Bool(false)),
                _ => Err(bad("true or false")),
            },
            ParamKind::Choice { options } => {
                if options.contains(&text) {
                    Ok(Value::from(text))
                } else {
                    Err(bad(&format!("one of {}", options.join(", "))))
                }
            }
            ParamKind::Text => Ok(Value::from(text)),
        }
    }

    /// The default as a JSON value (null for "derived at run time").
    pub fn default_value(&self, workload: &str) -> Value {
        if self.default.is_empty() {
            return Value::Null;
        }
        self.parse(workload, self.default)
            .unwrap_or_else(|e| panic!("default of {workload}.{} is invalid: {e}", self.name))
    }
}

/// A parameter error that names the parameter, its range and its default.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParamError {
    /// The workload has no such parameter.
    #[error("{workload} has no parameter `{name}`{}; its parameters are: {known}", suggest(.suggestions))]
    Unknown {
        /// Workload name.
        workload: String,
        /// The unknown name.
        name: String,
        /// Close names.
        suggestions: Vec<String>,
        /// All parameter names.
        known: String,
    },
    /// The value is not of the expected kind.
    #[error("{workload}: `{name}={value}` is not valid: expected {expected} in {range} (default {default})")]
    Malformed {
        /// Workload name.
        workload: String,
        /// Parameter name.
        name: String,
        /// The value given.
        value: String,
        /// What was expected.
        expected: String,
        /// Allowed range.
        range: String,
        /// Default value.
        default: String,
    },
    /// The value is outside the allowed range.
    #[error("{workload}: `{name}={value}` is out of range: allowed {range} (default {default})")]
    OutOfRange {
        /// Workload name.
        workload: String,
        /// Parameter name.
        name: String,
        /// The value given.
        value: String,
        /// Allowed range.
        range: String,
        /// Default value.
        default: String,
    },
    /// A `--set` argument without `=`.
    #[error("`{0}` is not a parameter setting: write it as key=value (for example size=64M)")]
    NoEquals(String),
    /// Decoding into the workload's options failed (a bug in the declaration).
    #[error("{workload}: parameters do not decode: {message}")]
    Decode {
        /// Workload name.
        workload: String,
        /// Decoder message.
        message: String,
    },
}

fn suggest(s: &[String]) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!(" (did you mean `{}`?)", s.join("`, `"))
    }
}

/// Validated parameter values with every default filled in.
#[derive(Debug, Clone, PartialEq, Default, Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct ParamValues(pub BTreeMap<String, Value>);

impl ParamValues {
    /// Every parameter at its default.
    pub fn defaults(workload: &str, specs: &[ParamSpec]) -> Self {
        ParamValues(
            specs
                .iter()
                .map(|s| (s.name.to_string(), s.default_value(workload)))
                .collect(),
        )
    }

    /// Checks `key=value` settings against `specs` and fills in defaults.
    pub fn from_settings<S: AsRef<str>>(
        workload: &str,
        specs: &[ParamSpec],
        settings: &[S],
    ) -> Result<Self, ParamError> {
        let mut pairs = Vec::with_capacity(settings.len());
        for s in settings {
            let s = s.as_ref();
            let (k, v) = s
                .split_once('=')
                .ok_or_else(|| ParamError::NoEquals(s.into()))?;
            pairs.push((k.trim().to_string(), v.to_string()));
        }
        Self::from_pairs(workload, specs, pairs)
    }

    /// Checks `(name, text value)` pairs against `specs` and fills in defaults.
    pub fn from_pairs(
        workload: &str,
        specs: &[ParamSpec],
        pairs: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ParamError> {
        let mut values = Self::defaults(workload, specs);
        for (k, v) in pairs {
            let key = k.replace('-', "_");
            let spec = specs.iter().find(|s| s.name == key).ok_or_else(|| {
                let names = specs.iter().map(|s| s.name);
                ParamError::Unknown {
                    workload: workload.into(),
                    name: k.clone(),
                    suggestions: crate::nearest_names(&key, names)
                        .into_iter()
                        .map(String::from)
                        .collect(),
                    known: specs.iter().map(|s| s.name).collect::<Vec<_>>().join(", "),
                }
            })?;
            values.0.insert(key, spec.parse(workload, &v)?);
        }
        Ok(values)
    }

    /// Decodes into the workload's options struct.
    pub fn decode<T: DeserializeOwned>(&self, workload: &str) -> Result<T, ParamError> {
        let map: serde_json::Map<String, Value> = self.0.clone().into_iter().collect();
        serde_json::from_value(Value::Object(map)).map_err(|e| ParamError::Decode {
            workload: workload.into(),
            message: e.to_string(),
        })
    }

    /// Sets one value without checking (for callers that resolved it themselves, such as a
    /// plan deriving a size from the tenant's memory limit).
    pub fn set(&mut self, name: &str, v: Value) {
        self.0.insert(name.to_string(), v);
    }
}

/// Parses `123`, `0x40`, `1_000`.
pub fn parse_int(s: &str) -> Option<i64> {
    let s = s.replace('_', "");
    if let Some(h) = s.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[ParamSpec] = &[
        ParamSpec {
            name: "size",
            help: "buffer size",
            kind: ParamKind::Size {
                min: 4096,
                max: 1 << 30,
            },
            default: "64M",
        },
        ParamSpec {
            name: "mode",
            help: "order",
            kind: ParamKind::Choice {
                options: &["seq", "rand"],
            },
            default: "rand",
        },
        ParamSpec {
            name: "threads",
            help: "threads",
            kind: ParamKind::Int { min: 1, max: 64 },
            default: "1",
        },
    ];

    #[test]
    fn size_parameters_take_every_size_spelling() {
        for (text, bytes) in [
            ("8K", 8192),
            ("8kb", 8192),
            ("64MiB", 64 << 20),
            ("0.5G", 1 << 29),
            ("4096", 4096),
        ] {
            let v = ParamValues::from_settings("t", SPECS, &[format!("size={text}")]).unwrap();
            assert_eq!(v.0["size"], Value::from(bytes as u64), "{text}");
        }
        let e = ParamValues::from_settings("t", SPECS, &["size=12Q"]).unwrap_err();
        assert!(e.to_string().contains("12Q"), "{e}");
        assert!(e.to_string().contains("a size such as 8K"), "{e}");
    }

    #[test]
    fn defaults_fill_in_and_settings_override() {
        let v = ParamValues::from_settings("t", SPECS, &["threads=4"]).unwrap();
        assert_eq!(v.0["threads"], Value::from(4));
        assert_eq!(v.0["size"], Value::from(64u64 << 20));
        assert_eq!(v.0["mode"], Value::from("rand"));
    }

    #[test]
    fn out_of_range_names_range_and_default() {
        let e = ParamValues::from_settings("t", SPECS, &["threads=100"]).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("threads=100"), "{msg}");
        assert!(msg.contains("1..=64"), "{msg}");
        assert!(msg.contains("default 1"), "{msg}");
    }

    #[test]
    fn unknown_parameter_suggests() {
        let e = ParamValues::from_settings("t", SPECS, &["thread=2"]).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("did you mean `threads`"), "{msg}");
    }

    #[test]
    fn bad_choice_lists_options() {
        let e = ParamValues::from_settings("t", SPECS, &["mode=zigzag"]).unwrap_err();
        assert!(e.to_string().contains("one of seq, rand"), "{e}");
    }

    #[test]
    fn missing_equals_is_explained() {
        let e = ParamValues::from_settings("t", SPECS, &["threads"]).unwrap_err();
        assert!(e.to_string().contains("key=value"), "{e}");
    }
}
