//! What a tenant is for.

use serde::{Deserialize, Serialize};

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

crate::word::words!(Role, "role", Victim => "victim", Aggressor => "aggressor");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_through_text_and_json() {
        crate::word::assert_round_trip(&[Role::Victim, Role::Aggressor]);
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
