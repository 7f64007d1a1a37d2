//! The `[repetitions]` table: how many rounds, and when the run may stop.

use std::time::Duration;

use isobench_stats::{Correction, Estimator};
use toml::Spanned;

use super::checker::{span_of, Checker};
use super::{RawRepetitions, RepetitionPolicy};

pub(super) fn check_repetitions(
    c: &mut Checker<'_>,
    raw: &Option<Spanned<RawRepetitions>>,
) -> RepetitionPolicy {
    let dr = RepetitionPolicy::default();
    let Some(r) = raw else { return dr };
    let rs = span_of(r);
    let r = r.get_ref();
    let min = c.int(&r.min, "repetitions.min", (1, 1000), dr.min as i64) as u32;
    let max = c.int(&r.max, "repetitions.max", (1, 1000), dr.max.max(min) as i64) as u32;
    if max < min {
        let s = r.max.as_ref().map(span_of).unwrap_or(rs);
        c.err(
            s,
            "repetitions.max",
            format!("max ({max}) is smaller than min ({min})"),
            "an integer no smaller than min",
            format!("write max = {min} or more"),
        );
    }
    RepetitionPolicy {
        min,
        max: max.max(min),
        ci_half_width: c.float(
            &r.ci_half_width,
            "repetitions.ci_half_width",
            |x| x > 0.0 && x <= 100.0,
            "percentage points, greater than 0 and at most 100, such as 2.0",
            dr.ci_half_width,
        ),
        confidence: c.float(
            &r.confidence,
            "repetitions.confidence",
            |x| (0.5..1.0).contains(&x),
            "a level from 0.5 up to (not including) 1, such as 0.95",
            dr.confidence,
        ),
        estimator: c.word_or(
            &r.estimator,
            "repetitions.estimator",
            &[("median", Estimator::Median), ("mean", Estimator::Mean)],
            &[],
            Estimator::Median,
        ),
        correction: c.word_or(
            &r.correction,
            "repetitions.correction",
            &[
                ("holm", Correction::Holm),
                ("bh", Correction::BenjaminiHochberg),
                ("none", Correction::None),
            ],
            &[],
            Correction::Holm,
        ),
        max_time: r
            .max_time
            .as_ref()
            .map(|_| c.duration(&r.max_time, "repetitions.max_time", Duration::ZERO))
            .filter(|d| !d.is_zero()),
    }
}
