//! One scenario run on several platforms, side by side: the layout of paper 001's Table 2
//! (rows: the stress tests; for each platform, the degradation of the well-behaved tenants
//! and of the misbehaving one, DNR where a tenant stopped answering), with a score per
//! platform on that figure and each run's headline from every resource.
//!
//! Table 2 compares one figure per tenant, so the table compares one metric per run: the
//! first metric measured in its victims (`good_pct` for the `ibs` preset). That metric is
//! *not* the run's headline, and the table says so: its score row names the metric, and a
//! row of its own gives each run's headline ([`Results::headline`]), worst resource first,
//! from every victim metric. The well-behaved figure is the mean degradation of the victims
//! that answered; the misbehaving one is the aggressors' own, measured the same way when the
//! aggressors are measured like the victims (a web server in each), else the drop of the
//! stressor's own rate against running alone.

use crate::view::{Column, Plot, Section, Value};
use crate::{Cell, Headline, Results, UNTRUSTWORTHY_MARK};

/// One platform's figures for one stress test.
#[derive(Debug, Clone, PartialEq)]
pub struct CrossCell {
    /// The well-behaved tenants' mean degradation, percent, over those that answered.
    pub good: Option<f64>,
    /// Well-behaved tenants that stopped answering (DNR), and how many there are.
    pub good_dnr: (usize, usize),
    /// Some well-behaved figure is flagged untrustworthy in its run (or has no statistics).
    pub good_flagged: bool,
    /// The misbehaving tenants' degradation, percent.
    pub bad: Option<f64>,
    /// Every misbehaving tenant stopped answering.
    pub bad_dnr: bool,
    /// The run did not measure this stress test.
    pub missing: bool,
}

/// The table.
#[derive(Debug, Clone, PartialEq)]
pub struct CrossTable {
    /// Platform names, one per run, in the order given.
    pub platforms: Vec<String>,
    /// The runs' ids.
    pub runs: Vec<String>,
    /// The metric compared in each run: the first metric measured in its victims (not its
    /// headline).
    pub metrics: Vec<String>,
    /// One row per stress test (condition id), in first-seen order.
    pub rows: Vec<(String, Vec<CrossCell>)>,
    /// Isolation score per platform on the compared metric alone ([`CrossTable::score`]).
    pub scores: Vec<Option<f64>>,
    /// Each run's headline, from every resource ([`Results::headline`]).
    pub headlines: Vec<Headline>,
    /// Each platform's caveats about its figures (a guest under software emulation): its
    /// columns are marked and the caveats noted under the table.
    pub caveats: Vec<Vec<String>>,
}

/// Degradation counted for a well-behaved tenant that stopped answering: all of it.
const DNR_DEGRADATION: f64 = 100.0;

impl CrossTable {
    /// The table of `runs`, each with the platform it ran on.
    pub fn new(runs: &[(&str, &Results)]) -> CrossTable {
        // The order of the run that measured the most stress tests, then any others.
        let mut by_size: Vec<Vec<String>> = runs.iter().map(|(_, r)| r.conditions()).collect();
        by_size.sort_by_key(|c| std::cmp::Reverse(c.len()));
        let mut conditions: Vec<String> = Vec::new();
        for c in by_size.into_iter().flatten() {
            if !conditions.contains(&c) {
                conditions.push(c);
            }
        }
        let metrics: Vec<String> = runs.iter().map(|(_, r)| compared_metric(r)).collect();
        let rows: Vec<(String, Vec<CrossCell>)> = conditions
            .iter()
            .map(|cond| {
                let cells = runs
                    .iter()
                    .zip(&metrics)
                    .map(|((_, r), m)| cell(r, m, cond))
                    .collect();
                (cond.clone(), cells)
            })
            .collect();
        let scores = (0..runs.len())
            .map(|i| CrossTable::score(rows.iter().map(|(_, cells)| &cells[i])))
            .collect();
        CrossTable {
            platforms: runs.iter().map(|(p, _)| p.to_string()).collect(),
            runs: runs.iter().map(|(_, r)| r.run.id.clone()).collect(),
            metrics,
            rows,
            scores,
            headlines: runs.iter().map(|(_, r)| r.headline()).collect(),
            caveats: runs.iter().map(|(_, r)| r.run.caveats.clone()).collect(),
        }
    }

    /// The isolation score of one platform on the compared metric (one metric, not every
    /// resource): 100 minus the well-behaved tenants' mean degradation over the stress tests it
    /// measured (each test's figure clamped to 0-100,
    /// a well-behaved tenant that stopped answering counting as 100). 100 is perfect
    /// isolation; `None` when it measured none.
    pub fn score<'a>(cells: impl Iterator<Item = &'a CrossCell>) -> Option<f64> {
        let per_test: Vec<f64> = cells
            .filter(|c| !c.missing)
            .filter_map(|c| {
                let (dnr, n) = c.good_dnr;
                let answered = n.saturating_sub(dnr);
                if n == 0 {
                    return None;
                }
                let mean_answered = c.good.map(|g| g.clamp(0.0, 100.0));
                let total = match mean_answered {
                    Some(g) => g * answered as f64 + DNR_DEGRADATION * dnr as f64,
                    None if dnr > 0 => DNR_DEGRADATION * dnr as f64,
                    None => return None,
                };
                Some(total / n as f64)
            })
            .collect();
        (!per_test.is_empty()).then(|| 100.0 - per_test.iter().sum::<f64>() / per_test.len() as f64)
    }

    /// The table as a section: the terminal, Markdown and HTML renderers draw it.
    pub fn section(&self) -> Section {
        let mut columns = vec![Column::text("stress test")];
        for (p, caveats) in self.platforms.iter().zip(&self.caveats) {
            // A platform with caveats is marked in its own columns, not only in the notes.
            let p = if caveats.is_empty() {
                p.clone()
            } else {
                format!("{p}(!)")
            };
            columns.push(Column::unit(&format!("{p} good"), "%"));
            columns.push(Column::unit(&format!("{p} bad"), "%"));
        }
        let n = self.platforms.len();
        let mut s = Section::new(
            "platforms",
            "Degradation across platforms (well-behaved = good, misbehaving = bad), as Table 2 \
             of paper 001",
            columns,
        )
        .with_plot(Plot::Bars {
            label: vec![0],
            y: (1..=2 * n).step_by(2).collect(),
            reference: Some(0.0),
        });
        for (cond, cells) in &self.rows {
            let mut row = vec![Value::text_of(cond.clone())];
            for c in cells {
                row.push(good_value(c));
                row.push(bad_value(c));
            }
            s.push(row);
        }
        let mut names = self.metrics.clone();
        names.dedup();
        let mut score = vec![Value::text_of(format!(
            "isolation score on {} alone (100 = perfect)",
            names.join(" / ")
        ))];
        for (i, sc) in self.scores.iter().enumerate() {
            let measured = self.rows.iter().filter(|(_, c)| !c[i].missing).count();
            score.push(match sc {
                None => Value::Empty,
                Some(v) if measured == self.rows.len() => Value::number(*v, 1),
                Some(v) => {
                    Value::text_of(format!("{v:.1} ({measured} of {} tests)", self.rows.len()))
                }
            });
            score.push(Value::Empty);
        }
        s.push(score);
        let mut worst = vec![Value::text_of("headline: worst resource, every metric")];
        for h in &self.headlines {
            worst.push(Value::text_of(
                h.worst()
                    .map_or_else(|| "none significant".to_string(), |w| w.short()),
            ));
            worst.push(Value::Empty);
        }
        s.push(worst);
        s.notes.push(format!(
            "runs: {}",
            self.platforms
                .iter()
                .zip(&self.runs)
                .map(|(p, r)| format!("{p} {r}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        let mut metrics = self.metrics.clone();
        metrics.dedup();
        s.notes.push(format!(
            "figure: degradation of {} (the first metric measured in the victims, not the \
             headline) against the baseline, percent (positive = worse); good: \
             the mean over the well-behaved tenants that answered, with `k DNR` when k of them \
             did not; bad: the misbehaving tenant; `{UNTRUSTWORTHY_MARK}` marks a figure its run \
             flags as untrustworthy; - : not measured on that platform",
            metrics.join(" / ")
        ));
        for (p, caveats) in self.platforms.iter().zip(&self.caveats) {
            for c in caveats {
                let c = c.strip_prefix(&format!("{p}: ")).unwrap_or(c);
                s.notes.push(format!("(!) {p}: {c}"));
            }
        }
        s.notes.push(format!(
            "isolation score on {}: 100 minus the well-behaved tenants' mean degradation of \
             that metric alone over the stress tests (each clamped to 0-100, a tenant that \
             stopped answering counting as 100); it says nothing of the other resources",
            names.join(" / ")
        ));
        s.notes.push(format!(
            "headline: each run's worst resource over every victim metric ({})",
            crate::HEADLINE_RULE
        ));
        s
    }
}

/// The first metric measured in a victim: the figure the table compares (not the headline).
fn compared_metric(r: &Results) -> String {
    let victims = names(r, "victim");
    r.cells
        .iter()
        .find(|c| victims.contains(&c.tenant.as_str()))
        .or(r.cells.first())
        .map(|c| c.metric.clone())
        .unwrap_or_default()
}

fn names<'a>(r: &'a Results, role: &str) -> Vec<&'a str> {
    r.tenants
        .iter()
        .filter(|t| t.role == role)
        .map(|t| t.name.as_str())
        .collect()
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn cell(r: &Results, metric: &str, cond: &str) -> CrossCell {
    let (victims, aggressors) = (names(r, "victim"), names(r, "aggressor"));
    let of = |names: &[&str]| -> Vec<&Cell> {
        r.cells
            .iter()
            .filter(|c| {
                c.metric == metric && c.condition == cond && names.contains(&c.tenant.as_str())
            })
            .collect()
    };
    let good = of(&victims);
    let mut bad = of(&aggressors);
    if bad.is_empty() {
        // The aggressors are not measured like the victims: their stressor's own rate.
        bad = r.aggressor.iter().filter(|c| c.condition == cond).collect();
    }
    let answered = |cs: &[&Cell]| -> Vec<f64> {
        cs.iter()
            .filter(|c| c.dnr.is_none())
            .filter_map(|c| c.estimate())
            .collect()
    };
    CrossCell {
        good: mean(&answered(&good)),
        good_dnr: (good.iter().filter(|c| c.dnr.is_some()).count(), good.len()),
        good_flagged: good
            .iter()
            .any(|c| c.problem.is_some() || c.untrustworthy()),
        bad: mean(&answered(&bad)),
        bad_dnr: !bad.is_empty() && bad.iter().all(|c| c.dnr.is_some()),
        missing: good.is_empty() && bad.is_empty(),
    }
}

fn good_value(c: &CrossCell) -> Value {
    let (k, n) = c.good_dnr;
    if c.missing {
        return Value::text_of("-");
    }
    if n > 0 && k == n {
        return Value::Dnr {
            reason: "every well-behaved tenant stopped answering".into(),
        };
    }
    match c.good {
        None => Value::Empty,
        Some(g) => {
            let mut t = format!("{g:.2}");
            if c.good_flagged {
                t.push(UNTRUSTWORTHY_MARK);
            }
            if k > 0 {
                t.push_str(&format!(" ({k} DNR)"));
            }
            if c.good_flagged || k > 0 {
                Value::text_of(t)
            } else {
                Value::number(g, 2)
            }
        }
    }
}

fn bad_value(c: &CrossCell) -> Value {
    if c.missing {
        return Value::text_of("-");
    }
    if c.bad_dnr {
        return Value::Dnr {
            reason: "the misbehaving tenant stopped answering".into(),
        };
    }
    c.bad.map_or(Value::Empty, |b| Value::number(b, 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(good: Option<f64>, dnr: (usize, usize)) -> CrossCell {
        CrossCell {
            good,
            good_dnr: dnr,
            good_flagged: false,
            bad: None,
            bad_dnr: false,
            missing: false,
        }
    }

    #[test]
    fn the_score_counts_a_silent_tenant_as_fully_degraded_and_skips_missing_tests() {
        // Two tests: 2% over 3 tenants; one of 3 silent with the others at 10%.
        let cells = [c(Some(2.0), (0, 3)), c(Some(10.0), (1, 3))];
        let s = CrossTable::score(cells.iter()).unwrap();
        let second = (10.0 * 2.0 + 100.0) / 3.0;
        assert!((s - (100.0 - (2.0 + second) / 2.0)).abs() < 1e-9, "{s}");
        // All silent: that test counts 100.
        let s = CrossTable::score([c(None, (3, 3))].iter()).unwrap();
        assert_eq!(s, 0.0);
        // Negative degradation (faster) is clamped: never above 100.
        let s = CrossTable::score([c(Some(-5.0), (0, 2))].iter()).unwrap();
        assert_eq!(s, 100.0);
        let mut m = c(None, (0, 0));
        m.missing = true;
        assert_eq!(CrossTable::score([m].iter()), None);
    }
}
