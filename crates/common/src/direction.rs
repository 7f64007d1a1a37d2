//! Whether more of a metric is better or worse.

use serde::{Deserialize, Serialize};

/// Whether a larger value of a metric is better (throughput) or worse (latency).
///
/// Serialized, stored and parsed as `"higher"` / `"lower"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// More is better: ops/s, MB/s, Mbit/s.
    Higher,
    /// Less is better: ns/access, RTT, time to complete.
    Lower,
}

crate::word::words!(Direction, "direction", Higher => "higher", Lower => "lower");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_through_text_and_json() {
        crate::word::assert_round_trip(&[Direction::Higher, Direction::Lower]);
    }

    #[test]
    fn an_unknown_word_names_the_value_and_the_choices() {
        let e = "up".parse::<Direction>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid direction = up: expected \"higher\" or \"lower\""
        );
    }
}
