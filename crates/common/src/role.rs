//! What a tenant is for.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::UnknownWord;

/// What a tenant does in an experiment.
///
/// Serialized, stored and parsed as `"victim"` / `"aggressor"` (the words of scenario files,
/// of the results database's `tenants.role` column and of every JSON document).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Well-behaved: runs the probes; its slowdown is measured.
    Victim,
    /// Misbehaving: runs the stressors. On a platform that enforces limits an aggressor always
    /// runs under pids, memory and io limits.
    Aggressor,
}

impl Role {
    /// `"victim"` or `"aggressor"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Victim => "victim",
            Role::Aggressor => "aggressor",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = UnknownWord;

    fn from_str(s: &str) -> Result<Self, UnknownWord> {
        match s {
            "victim" => Ok(Role::Victim),
            "aggressor" => Ok(Role::Aggressor),
            other => Err(UnknownWord {
                what: "role",
                value: other.to_string(),
                expected: "\"victim\" or \"aggressor\"",
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_through_text_and_json() {
        for r in [Role::Victim, Role::Aggressor] {
            assert_eq!(r.to_string().parse::<Role>().unwrap(), r);
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(json, format!("\"{}\"", r.as_str()));
            assert_eq!(serde_json::from_str::<Role>(&json).unwrap(), r);
        }
        assert_eq!(Role::Aggressor.to_string(), "aggressor");
    }

    #[test]
    fn an_unknown_word_names_the_value_and_the_choices() {
        let e = "bully".parse::<Role>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid role = bully: expected \"victim\" or \"aggressor\""
        );
    }
}
