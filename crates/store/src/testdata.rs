//! Records the store's unit tests share.

use isobench_common::Direction;

use crate::model::{Condition, SampleRecord, TrialKey, TrialRecord, TrialStatus};
use crate::time::Timestamp;

/// A trial of the baseline, stored ok, with one sample.
pub(crate) fn trial(round: u32) -> TrialRecord {
    TrialRecord {
        key: TrialKey {
            round,
            block: 0,
            slot: 0,
            attempt: 0,
        },
        probe: "cpu-int".into(),
        tenant: "victim".into(),
        condition: Condition::Baseline,
        repetition: round,
        status: TrialStatus::Ok,
        started_at: Timestamp::from_unix_millis(1_767_225_600_000),
        ended_at: Timestamp::from_unix_millis(1_767_225_601_000),
        load_note: None,
        samples: vec![SampleRecord {
            metric: "ops_per_sec".into(),
            unit: "ops/s".into(),
            direction: Direction::Higher,
            value: 1e9,
        }],
        histograms: Vec::new(),
        stressor_reports: Vec::new(),
        series: Vec::new(),
        modulation: None,
        noise: None,
        mechanism: None,
        timeline: None,
        limits: None,
        tenant_usage: Vec::new(),
    }
}
