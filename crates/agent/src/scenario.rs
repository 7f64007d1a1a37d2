//! Whole scenarios on a host agent (`run_scenario`): the coordinator of a fleet run sends a
//! scenario, the host measures it as `isobench run` would there, streams its progress, and
//! sends back the stored run, which the coordinator imports.
//!
//! The agent crate does not know how to run a scenario: the command line gives a host agent a
//! [`ScenarioRunner`]. An agent without one (inside a tenant) answers `unsupported`.

use std::sync::atomic::AtomicBool;

use crate::protocol::{ErrorBody, RunScenario};

/// Longest piece of a stored run in one `run_data` event, in bytes: well under the line limit,
/// even with JSON escaping doubling it.
pub const RUN_DATA_CHUNK_BYTES: usize = 1 << 20;

/// What a host agent does with `run_scenario`.
pub trait ScenarioRunner: Send + Sync {
    /// Runs `req` to its end, calling `progress` with each line of progress. When `stop` is
    /// raised (the coordinator left), the run is interrupted as a signal would.
    fn run(
        &self,
        req: &RunScenario,
        progress: &mut dyn FnMut(&str),
        stop: &AtomicBool,
    ) -> Result<ScenarioOutput, Box<ErrorBody>>;
}

/// A finished scenario on the host.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioOutput {
    /// The run's id.
    pub run_id: String,
    /// Its final status.
    pub status: String,
    /// The exit code of the run.
    pub exit_code: i32,
    /// The stored run, as JSON.
    pub run: String,
}

/// Splits `text` into pieces of at most `max` bytes, on character boundaries.
pub fn chunks(text: &str, max: usize) -> Vec<&str> {
    let max = max.max(4);
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut end = rest.len().min(max);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let (piece, tail) = rest.split_at(end);
        out.push(piece);
        rest = tail;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_join_back_and_never_split_a_character() {
        let text = "ab\u{e9}cd\u{1f600}e".repeat(7);
        for max in [1, 4, 5, 6, 100] {
            let parts = chunks(&text, max);
            assert_eq!(parts.concat(), text);
            assert!(
                parts.iter().all(|p| p.len() <= max.max(4)),
                "{max}: {parts:?}"
            );
        }
        assert!(chunks("", 10).is_empty());
    }
}
