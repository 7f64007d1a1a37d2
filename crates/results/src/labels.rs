//! The words printed beside the figures (the statistic, its interval, the test behind the
//! significance mark), read from the fields that produced each figure, never from the plan's
//! settings: a run planned with the median whose cells were estimated from time-adjacent
//! units reports means of log ratios, and says so.

use std::collections::BTreeMap;

use isobench_stats::{CiMethod, Estimator};

use crate::{Cell, Results};

/// The statistic an interval method estimates, in words.
fn statistic(estimator: Estimator, method: CiMethod) -> String {
    match method {
        CiMethod::PairedLogT
        | CiMethod::BlockBootstrap
        | CiMethod::CycleT
        | CiMethod::TrialT
        | CiMethod::WelchLogT => "geometric mean ratio (mean of log ratios)".to_string(),
        CiMethod::Percentile | CiMethod::Bca => {
            format!(
                "{} of the values, contended against baseline",
                estimator.as_str()
            )
        }
    }
}

/// How an interval was built, in words.
pub fn method_words(method: CiMethod) -> &'static str {
    match method {
        CiMethod::CycleT => "t over on/off cycles, allowing for neighbouring cycles",
        CiMethod::PairedLogT => "t over paired trials",
        CiMethod::TrialT => "t over the trials' means (trials differed)",
        CiMethod::BlockBootstrap => "moving-block bootstrap over paired units",
        CiMethod::WelchLogT => "Welch t on the logarithms, independent samples",
        CiMethod::Percentile => "bootstrap percentile",
        CiMethod::Bca => "bootstrap BCa",
    }
}

/// `a` when every item is `a`, else `3 cell(s): a; 2 cell(s): b`, most frequent first.
fn counted(items: impl Iterator<Item = String>) -> String {
    counted_as(items, |k, n| format!("{n} cell(s): {k}"), "; ")
}

/// [`counted`] with each item and its count written by `each`, joined by `sep`.
fn counted_as(
    items: impl Iterator<Item = String>,
    each: impl Fn(&str, usize) -> String,
    sep: &str,
) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for i in items {
        *counts.entry(i).or_insert(0) += 1;
    }
    let mut v: Vec<(String, usize)> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    if v.len() == 1 {
        return v.remove(0).0;
    }
    v.into_iter()
        .map(|(k, n)| each(&k, n))
        .collect::<Vec<_>>()
        .join(sep)
}

impl Results {
    /// True when the run corrected its significance for multiple comparisons.
    pub fn corrected(&self) -> bool {
        !matches!(self.trust.correction.as_str(), "" | "none")
    }

    fn estimated(&self) -> impl Iterator<Item = &Cell> {
        self.cells
            .iter()
            .chain(&self.aggressor)
            .filter(|c| c.comparison.is_some())
    }

    /// The statistic the degradations compare, from the cells' own estimates: `mean` (a mean
    /// of log ratios, the geometric mean ratio, for every time-adjacent design), `median`,
    /// or `median and mean` when the cells differ. Only a run without any estimate falls back
    /// on its plan's setting.
    pub fn estimator(&self) -> &'static str {
        let mut seen: Vec<Estimator> = Vec::new();
        for c in self.estimated() {
            let e = c.comparison.as_ref().map(|x| x.degradation.estimator);
            if let Some(e) = e.filter(|e| !seen.contains(e)) {
                seen.push(e);
            }
        }
        match seen.as_slice() {
            [Estimator::Mean] => "mean",
            [Estimator::Median] => "median",
            [_, _, ..] => "median and mean",
            [] => match self
                .plan
                .as_ref()
                .and_then(|p| p["repetitions"]["estimator"].as_str())
            {
                Some("mean") => "mean",
                _ => "median",
            },
        }
    }

    /// The statistic in words, from the cells: `geometric mean ratio (mean of log ratios)`,
    /// with counts when cells differ.
    pub fn statistic_label(&self) -> String {
        let s = counted(self.estimated().filter_map(|c| {
            c.comparison
                .as_ref()
                .map(|x| statistic(x.degradation.estimator, x.degradation.method))
        }));
        if s.is_empty() {
            format!("{} of the values", self.estimator())
        } else {
            s
        }
    }

    /// The confidence level of the cells' intervals (the run's level when no cell has one).
    pub fn interval_level(&self) -> f64 {
        self.estimated()
            .filter_map(|c| c.comparison.as_ref().map(|x| x.degradation.level))
            .next()
            .unwrap_or(self.confidence)
    }

    /// The intervals in words, from the cells: `95% interval of each cell alone (t over on/off
    /// cycles ... (40), t over paired trials (16)), not adjusted for the run's 56 comparisons`.
    pub fn interval_label(&self) -> String {
        let level = (self.interval_level() * 100.0).round();
        let methods = counted(self.estimated().filter_map(|c| {
            c.comparison
                .as_ref()
                .map(|x| method_words(x.degradation.method).to_string())
        }));
        let adjusted = if self.trust.victim_cells > 1 && self.corrected() {
            format!(
                ", not adjusted for the run's {} comparisons (the significance is)",
                self.trust.victim_cells
            )
        } else {
            String::new()
        };
        format!("{level}% interval of each cell alone ({methods}){adjusted}")
    }

    /// The legend of the significance mark `*`, from the tests that decided it: each test
    /// with its cells, the correction and the family it ran over, and why an interval that
    /// excludes 0 may sit beside a cell without `*`.
    pub fn significance_legend(&self) -> String {
        let alpha = 1.0 - self.confidence;
        let tests: Vec<(&'static str, bool)> = self
            .estimated()
            .filter_map(|c| c.test().map(|t| (t.name, t.p_adjusted.is_some())))
            .collect();
        if tests.is_empty() {
            return format!("significant (p < {alpha:.2})");
        }
        let names = counted_as(
            tests.iter().map(|(n, _)| n.to_string()),
            |k, n| format!("{k} on {n} cell(s)"),
            ", ",
        );
        let corrected = tests.iter().filter(|(_, a)| *a).count();
        if corrected == 0 || !self.corrected() {
            return format!("significant (test {names}; p < {alpha:.2}, each cell tested alone)");
        }
        let mut s = format!(
            "significant (test {names}; p adjusted < {alpha:.2} after {} correction across {} \
             victim cells",
            self.trust.correction, corrected
        );
        if corrected < tests.len() {
            s.push_str(&format!(
                "; {} cell(s) tested alone (p < {alpha:.2}): the aggressors' own rates",
                tests.len() - corrected
            ));
        }
        s.push_str(
            "; the intervals are not adjusted, so one that excludes 0 can sit beside a cell \
             without *)",
        );
        s
    }
}

/// The count earlier versions wrote into their budget reason: how many cells were still
/// open when the budget ran out, which is not how many the table marks.
const OPEN_COUNT: &str = " result(s) without an interval within +/-";

impl Results {
    /// Results flagged untrustworthy, victims' and aggressors': exactly the cells the tables
    /// mark [`crate::UNTRUSTWORTHY_MARK`].
    pub fn flagged_count(&self) -> usize {
        self.cells
            .iter()
            .chain(&self.aggressor)
            .filter(|c| c.untrustworthy())
            .count()
    }

    /// Why the run ended as it did, with the count of flagged results taken from the tables
    /// (a count stored in the reason by earlier versions is replaced); `None` when the run
    /// gave no reason.
    pub fn reason_line(&self) -> Option<String> {
        let reason = self.run.status_reason.as_deref()?;
        let mut reason = strip_open_count(reason);
        let flagged = self.flagged_count();
        if flagged > 0 {
            reason.push_str(&format!(
                "; {flagged} result(s) flagged untrustworthy ({} in the tables)",
                crate::UNTRUSTWORTHY_MARK
            ));
        }
        Some(reason)
    }
}

/// `... fits in 5m (4 result(s) without an interval within +/-2 points, flagged)` without the
/// parenthesis.
fn strip_open_count(reason: &str) -> String {
    let Some(at) = reason.find(OPEN_COUNT) else {
        return reason.to_string();
    };
    let Some(open) = reason[..at].rfind(" (") else {
        return reason.to_string();
    };
    let after = at + OPEN_COUNT.len();
    let close = reason[after..]
        .find(')')
        .map_or(reason.len(), |i| after + i + 1);
    format!("{}{}", &reason[..open], &reason[close..])
}

#[cfg(test)]
mod tests {
    use super::strip_open_count;

    #[test]
    fn an_old_open_count_is_taken_out_of_the_reason() {
        assert_eq!(
            strip_open_count(
                "time budget reached: no further round fits in 5m (4 result(s) without an \
                 interval within +/-2 points, flagged)"
            ),
            "time budget reached: no further round fits in 5m"
        );
        assert_eq!(strip_open_count("every cell settled"), "every cell settled");
    }
}
