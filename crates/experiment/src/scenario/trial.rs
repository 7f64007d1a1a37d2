//! The `[trial]` table: the timing of one trial and its design.

use std::time::Duration;

use super::checker::{span_of, Checker};
use super::{DesignChoice, RawTrial, TrialSettings};

pub(super) fn check_trial(c: &mut Checker<'_>, raw: &Option<RawTrial>) -> TrialSettings {
    let d = TrialSettings::default();
    let Some(t) = raw else { return d };
    let duration = c.duration(&t.duration, "trial.duration", d.duration);
    if duration < Duration::from_millis(10) && t.duration.is_some() {
        let s = t.duration.as_ref().map(span_of).unwrap_or_default();
        c.err(
            s,
            "trial.duration",
            "a trial shorter than 10ms measures mostly start-up".into(),
            "10ms or more",
            "write duration = \"500ms\" or longer".into(),
        );
    }
    TrialSettings {
        duration,
        warmup: c.duration(&t.warmup, "trial.warmup", d.warmup),
        solo: c.duration(&t.solo, "trial.solo", d.solo),
        timeout: c.duration(&t.timeout, "trial.timeout", d.timeout),
        max_outside_load: c.float(
            &t.max_outside_load,
            "trial.max_outside_load",
            |x| x > 0.0,
            "a number of CPUs greater than 0, such as 0.25",
            d.max_outside_load,
        ),
        max_retries: c.int(&t.max_retries, "trial.max_retries", (0, 3), 2) as u32,
        baseline_every: c.int(&t.baseline_every, "trial.baseline_every", (1, 100), 1) as u32,
        design: c.word_or(
            &t.design,
            "trial.design",
            &[
                ("auto", DesignChoice::Auto),
                ("onoff", DesignChoice::OnOff),
                ("paired", DesignChoice::Paired),
            ],
            &[],
            DesignChoice::default(),
        ),
        period: c.auto_duration(
            &t.period,
            "trial.period",
            (Duration::from_millis(20), Duration::from_secs(10)),
        ),
        window: c.auto_duration(
            &t.window,
            "trial.window",
            (Duration::from_millis(1), Duration::from_secs(1)),
        ),
        pilot: c.duration(&t.pilot, "trial.pilot", d.pilot),
        onoff_max: c.duration(&t.onoff_max, "trial.onoff_max", d.onoff_max),
    }
}
