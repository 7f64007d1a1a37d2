//! The headline: a run's verdict in one line, computed here once from every resource its
//! victims were measured on, so that `isobench show`, the exports, the HTML report, the web
//! UI, the API and `/metrics` all show the same figures (they call [`Results::headline`] and
//! draw what it returns; none of them chooses a figure of its own).
//!
//! The rule, [`HEADLINE_RULE`], printed beside the figures wherever they are shown:
//!
//! - A **resource** is the class of the victim's probe: `cpu`, `cache`, `memory`, `disk`,
//!   `net`, `process` or `app` (`other` for a probe stored without one).
//! - A resource's headline is its **worst significant victim degradation**: the largest
//!   degradation among its victim cells (every probe metric under every condition) that is
//!   significant by the test behind the cell's `*` (after the run's correction for multiple
//!   comparisons). A significant degradation that is flagged untrustworthy is chosen as
//!   any other, and then marked [`Verdict::FlaggedLoss`] with the flag's reasons.
//! - A resource where a victim stopped answering (every trial of a cell DNR) is
//!   [`Verdict::Dnr`], worse than any degradation; its worst degradation among the cells
//!   that answered is kept beside it.
//! - A resource without a significant degradation is [`Verdict::NoSignificantLoss`]; the
//!   cell shown is its largest estimate, said to be not significant (or a significant
//!   improvement), never shown as a loss.
//! - The run's **worst** is the first resource in the order of [`Headline::resources`]: DNR
//!   first, then the significant degradations from the largest, flagged or not. A run whose
//!   resources have no significant degradation and no DNR has no worst.
//!
//! The interval given with a figure is the cell's own (its `level`, not adjusted for the
//! other comparisons of the run); the adjusted p-value is the one behind the significance.

use isobench_common::Class;
use isobench_stats::{CiMethod, Estimator};
use serde::{Deserialize, Serialize};

use crate::{Cell, Dnr, Results};

/// How the headline is chosen, in one sentence: printed beside it wherever it is shown.
pub const HEADLINE_RULE: &str = "headline: per resource (the victim probe's class), the worst \
     victim degradation that is significant after the run's correction for multiple \
     comparisons, over every probe metric and condition; DNR (a victim stopped answering) \
     ranks worst; a flagged figure is marked ?, one with values from disturbed trials ~, \
     one without a significant degradation says n.s.; the run's worst is the first resource \
     listed";

/// The mark of a figure flagged untrustworthy, the same in every table and headline.
pub const UNTRUSTWORTHY_MARK: char = '?';

/// A run's headline: the worst victim degradation of each resource, worst first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    /// One entry per resource measured in a victim, worst first: DNR, then significant
    /// degradations from the largest (flagged or not), then the resources without a
    /// significant degradation (largest estimate first), then those without a result.
    pub resources: Vec<ResourceHeadline>,
    /// How the figures were chosen ([`HEADLINE_RULE`]).
    pub rule: String,
    /// The correction for multiple comparisons behind the significance (`Holm`), empty when
    /// the run's cells were tested one by one.
    pub correction: String,
}

/// What a resource's headline says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// A victim stopped answering (every trial of a cell did not respond).
    Dnr,
    /// A significant degradation, trustworthy.
    Loss,
    /// A significant degradation flagged untrustworthy (see the cell's `flags`).
    FlaggedLoss,
    /// No significant degradation: the cell is the largest estimate, not significant, or a
    /// significant improvement.
    NoSignificantLoss,
    /// No cell of the resource has an estimate yet.
    NoResult,
}

impl Verdict {
    /// `dnr`, `loss`, `flagged_loss`, `no_significant_loss`, `no_result`, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Dnr => "dnr",
            Verdict::Loss => "loss",
            Verdict::FlaggedLoss => "flagged_loss",
            Verdict::NoSignificantLoss => "no_significant_loss",
            Verdict::NoResult => "no_result",
        }
    }

    fn rank(self) -> u8 {
        match self {
            Verdict::Dnr => 0,
            Verdict::Loss | Verdict::FlaggedLoss => 1,
            Verdict::NoSignificantLoss => 2,
            Verdict::NoResult => 3,
        }
    }
}

/// One resource's headline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceHeadline {
    /// The class of the victims' probes: `cpu`, `cache`, `memory`, `disk`, `net`, `process`,
    /// `app`, or `other`.
    pub resource: String,
    /// What the figure is.
    pub verdict: Verdict,
    /// For [`Verdict::Dnr`]: the first cell whose every trial did not respond.
    pub dnr_cell: Option<HeadlineCell>,
    /// The cell behind the figure: the worst significant degradation (flagged or not), else
    /// the largest estimate; for [`Verdict::Dnr`], the same among the cells that answered.
    /// `None` when no cell has an estimate.
    pub cell: Option<HeadlineCell>,
    /// Victim cells of the resource.
    pub cells: u32,
    /// Of which with a significant degradation (positive, after the correction).
    pub significant_losses: u32,
    /// Of which flagged untrustworthy (marked [`UNTRUSTWORTHY_MARK`]).
    pub flagged: u32,
    /// Of which every trial did not respond.
    pub dnr: u32,
}

/// The cell behind a resource's headline, with every figure shown beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeadlineCell {
    /// Victim tenant.
    pub tenant: String,
    /// Probe id.
    pub probe: String,
    /// Metric.
    pub metric: String,
    /// Condition (`stressor@intensity`).
    pub condition: String,
    /// Degradation, percent (positive = worse); `None` when every trial was DNR.
    pub estimate: Option<f64>,
    /// Lower bound of the cell's own interval, percent (not adjusted for the run's other
    /// comparisons).
    pub lower: Option<f64>,
    /// Upper bound of the same interval.
    pub upper: Option<f64>,
    /// Confidence level of that interval.
    pub level: Option<f64>,
    /// The statistic compared ([`Estimator`]).
    pub estimator: Option<Estimator>,
    /// How the interval was built ([`CiMethod`]).
    pub method: Option<CiMethod>,
    /// The test behind `significant` ([`CellTest::name`]).
    pub test: Option<String>,
    /// That test's p-value, before any correction.
    pub p_value: Option<f64>,
    /// The p-value after the run's correction, when one was applied: the one `significant`
    /// compares with `1 - level`.
    pub p_adjusted: Option<f64>,
    /// Significant.
    pub significant: bool,
    /// Why the figure is untrustworthy; empty when it is not.
    pub flags: Vec<String>,
    /// Trials that did not respond, when any.
    pub dnr: Option<Dnr>,
    /// Values (either side) from trials that load from outside the run disturbed, kept
    /// (marked `~` in the tables).
    #[serde(default)]
    pub disturbed: u32,
}

/// The test behind a cell's significance, with its p-values.
#[derive(Debug, Clone, PartialEq)]
pub struct CellTest {
    /// `cycle_t`, `paired_log_t`, `trial_t`, `block_bootstrap` (the time-adjacent estimate's
    /// method, whose p-value it is) or `mann_whitney` (independent samples).
    pub name: &'static str,
    /// The p-value of that test alone.
    pub p_value: f64,
    /// After the run's correction for multiple comparisons, when one was applied to the cell.
    pub p_adjusted: Option<f64>,
}

impl Cell {
    /// True when the cell is flagged untrustworthy: its mark is [`UNTRUSTWORTHY_MARK`]. The
    /// one predicate behind every `?` and every count of flagged results.
    pub fn untrustworthy(&self) -> bool {
        self.comparison.as_ref().is_some_and(|c| !c.trustworthy)
    }

    /// The test behind `comparison.significant`: the time-adjacent estimate's test (its
    /// p-value corrected when `p_adjusted` is set) or, for a cell without a design, the
    /// Mann-Whitney test.
    pub fn test(&self) -> Option<CellTest> {
        let cmp = self.comparison.as_ref()?;
        Some(match &self.paired {
            Some(p) => CellTest {
                name: p.degradation.method.as_str(),
                p_value: p.p_value,
                p_adjusted: self.p_adjusted,
            },
            None => CellTest {
                name: "mann_whitney",
                p_value: cmp.mann_whitney.p_value,
                p_adjusted: None,
            },
        })
    }

    /// The resource of a victim cell: its probe's class, or `other`.
    pub fn resource(&self) -> &'static str {
        self.probe_class.map_or("other", Class::as_str)
    }
}

impl HeadlineCell {
    fn of(c: &Cell) -> HeadlineCell {
        let cmp = c.comparison.as_ref();
        let d = cmp.map(|x| &x.degradation);
        let test = c.test();
        HeadlineCell {
            tenant: c.tenant.clone(),
            probe: c.probe.clone(),
            metric: c.metric.clone(),
            condition: c.condition.clone(),
            estimate: d.map(|d| d.estimate),
            lower: d.map(|d| d.lower),
            upper: d.map(|d| d.upper),
            level: d.map(|d| d.level),
            estimator: d.map(|d| d.estimator),
            method: d.map(|d| d.method),
            test: test.as_ref().map(|t| t.name.to_string()),
            p_value: test.as_ref().map(|t| t.p_value),
            p_adjusted: test.as_ref().and_then(|t| t.p_adjusted),
            significant: cmp.is_some_and(|x| x.significant),
            flags: cmp.map(|x| x.untrustworthy_reasons()).unwrap_or_default(),
            dnr: c.dnr.clone(),
            disturbed: c.disturbed,
        }
    }

    /// `probe metric under condition` (the tenant too when `with_tenant`).
    pub fn place(&self, with_tenant: bool) -> String {
        let what = if self.metric.is_empty() {
            self.probe.clone()
        } else {
            format!("{} {}", self.probe, self.metric)
        };
        if with_tenant {
            format!("{} {what} under {}", self.tenant, self.condition)
        } else {
            format!("{what} under {}", self.condition)
        }
    }
}

impl ResourceHeadline {
    /// The figure an alert compares, percent: the degradation for a significant one (flagged
    /// or not), 0 when the resource has none, 100 when a victim stopped answering; `None`
    /// without a result.
    pub fn loss_pct(&self) -> Option<f64> {
        match self.verdict {
            Verdict::Dnr => Some(100.0),
            Verdict::Loss | Verdict::FlaggedLoss => self.cell.as_ref().and_then(|c| c.estimate),
            Verdict::NoSignificantLoss => Some(0.0),
            Verdict::NoResult => None,
        }
    }

    /// The figure in a few characters: `+96.9%`, `+11.3%?` (flagged), `+5.0%~` (with values
    /// from disturbed trials, as the tables mark them), `n.s. (+1.2%)`, `DNR`, `no result`.
    pub fn figure(&self) -> String {
        let mut f = self.bare_figure();
        if matches!(self.verdict, Verdict::Loss | Verdict::FlaggedLoss)
            && self.cell.as_ref().is_some_and(|c| c.disturbed > 0)
        {
            f.push('~');
        }
        f
    }

    fn bare_figure(&self) -> String {
        let est = self.cell.as_ref().and_then(|c| c.estimate);
        match (self.verdict, est) {
            (Verdict::Dnr, _) => "DNR".into(),
            (Verdict::Loss, Some(e)) => format!("{}%", signed(e)),
            (Verdict::FlaggedLoss, Some(e)) => format!("{}%{UNTRUSTWORTHY_MARK}", signed(e)),
            (Verdict::NoSignificantLoss, Some(e))
                if self.cell.as_ref().is_some_and(|c| c.significant) =>
            {
                format!("none (better: {}%)", signed(e))
            }
            (Verdict::NoSignificantLoss, Some(e)) => format!("n.s. ({}%)", signed(e)),
            _ => "no result".into(),
        }
    }

    /// `disk +96.9%`: the resource and its figure.
    pub fn short(&self) -> String {
        format!("{} {}", self.resource, self.figure())
    }

    /// Everything said about the figure, after it: the interval, the test, where it was
    /// measured, the flags and the DNR.
    pub fn detail(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some(c) = &self.dnr_cell {
            let d = c.dnr.as_ref();
            parts.push(format!(
                "{} stopped answering ({})",
                c.place(true),
                d.map_or_else(String::new, |d| format!(
                    "DNR {}/{}: {}",
                    d.count, d.of, d.reason
                ))
            ));
        }
        match &self.cell {
            None if self.dnr_cell.is_none() => {
                return format!("{} cell(s), none with an estimate yet", self.cells);
            }
            None => {}
            Some(c) => parts.push(self.cell_detail(c)),
        }
        let mut counts = format!(
            "{} of {} cell(s) significantly worse",
            self.significant_losses, self.cells
        );
        if self.flagged > 0 {
            counts.push_str(&format!(", {} flagged", self.flagged));
        }
        if self.dnr > 0 {
            counts.push_str(&format!(", {} DNR", self.dnr));
        }
        parts.push(counts);
        parts.join("; ")
    }

    /// The figures of `c` after its estimate: interval, test, place, flags; prefixed with
    /// the estimate when the verdict's figure is not it (a DNR).
    fn cell_detail(&self, c: &HeadlineCell) -> String {
        let mut parts: Vec<String> = Vec::new();
        if self.verdict == Verdict::Dnr {
            let what = match c.estimate {
                Some(e) if c.significant && e > 0.0 => {
                    let mark = if c.flags.is_empty() { "" } else { "?" };
                    format!("otherwise worst {}%{mark}", signed(e))
                }
                Some(e) => format!(
                    "otherwise no significant degradation, largest {}%",
                    signed(e)
                ),
                None => "otherwise no estimate".to_string(),
            };
            parts.push(what);
        }
        {
            if let (Some(lo), Some(hi), Some(level)) = (c.lower, c.upper, c.level) {
                parts.push(format!(
                    "[{}, {}] {:.0}% CI of this cell, unadjusted",
                    signed(lo),
                    signed(hi),
                    level * 100.0
                ));
            }
            if let (Some(test), Some(p)) = (&c.test, c.p_value) {
                parts.push(match c.p_adjusted {
                    Some(adj) => format!("{test} p adj {} (raw {})", p_text(adj), p_text(p)),
                    None => format!("{test} p {} (not adjusted)", p_text(p)),
                });
            }
            parts.push(c.place(true));
        }
        if !c.flags.is_empty() {
            parts.push(format!("flagged: {}", c.flags.join("; ")));
        }
        if c.disturbed > 0 {
            parts.push(format!(
                "~ {} value(s) from trials disturbed by load from outside the run",
                c.disturbed
            ));
        }
        parts.join("; ")
    }
}

impl Headline {
    /// The worst resource: the first, when it has a significant degradation or a DNR.
    pub fn worst(&self) -> Option<&ResourceHeadline> {
        self.resources.first().filter(|r| {
            matches!(
                r.verdict,
                Verdict::Dnr | Verdict::Loss | Verdict::FlaggedLoss
            )
        })
    }

    /// The headline in one line, as the runs list shows it: `worst: disk +96.9% (disk-io
    /// dioread_mbps under disk@100); memory +26.5%, cpu n.s. (+1.2%)`, or `no significant
    /// victim degradation (cpu n.s. (+1.2%), ...)`, or `no victim result`.
    pub fn summary(&self) -> String {
        if self.resources.is_empty() {
            return "no victim result".into();
        }
        match self.worst() {
            Some(w) => {
                let place = w
                    .dnr_cell
                    .as_ref()
                    .or(w.cell.as_ref())
                    .map_or_else(String::new, |c| format!(" ({})", c.place(false)));
                let rest: Vec<String> = self.resources[1..].iter().map(|r| r.short()).collect();
                if rest.is_empty() {
                    format!("worst: {}{place}", w.short())
                } else {
                    format!("worst: {}{place}; {}", w.short(), rest.join(", "))
                }
            }
            None => format!(
                "no significant victim degradation ({})",
                self.resources
                    .iter()
                    .map(|r| r.short())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

impl Results {
    /// The run's headline ([`Headline`]; the rule is in the module documentation and in
    /// [`HEADLINE_RULE`]), from every victim cell.
    pub fn headline(&self) -> Headline {
        let aggressors: Vec<&str> = self
            .tenants
            .iter()
            .filter(|t| t.role == "aggressor")
            .map(|t| t.name.as_str())
            .collect();
        let victims: Vec<&Cell> = self
            .cells
            .iter()
            .filter(|c| !aggressors.contains(&c.tenant.as_str()))
            .collect();
        let mut classes: Vec<Option<Class>> = Vec::new();
        for c in &victims {
            if !classes.contains(&c.probe_class) {
                classes.push(c.probe_class);
            }
        }
        // Class order, `other` last, so that ties keep a stable order.
        classes.sort_by_key(|k| (k.is_none(), *k));
        let mut resources: Vec<ResourceHeadline> = classes
            .into_iter()
            .map(|k| {
                let mine: Vec<&Cell> = victims
                    .iter()
                    .copied()
                    .filter(|c| c.probe_class == k)
                    .collect();
                resource_headline(k.map_or("other", Class::as_str), &mine)
            })
            .collect();
        resources.sort_by(|a, b| {
            a.verdict.rank().cmp(&b.verdict.rank()).then_with(|| {
                let e = |r: &ResourceHeadline| {
                    r.cell
                        .as_ref()
                        .and_then(|c| c.estimate)
                        .unwrap_or(f64::NEG_INFINITY)
                };
                e(b).total_cmp(&e(a))
            })
        });
        Headline {
            resources,
            rule: HEADLINE_RULE.to_string(),
            correction: self.trust.correction.clone(),
        }
    }
}

/// One resource's headline from its victim cells.
fn resource_headline(resource: &str, cells: &[&Cell]) -> ResourceHeadline {
    fn largest(pool: Vec<&Cell>) -> Option<&Cell> {
        let estimate = |c: &Cell| c.estimate().unwrap_or(f64::NEG_INFINITY);
        pool.into_iter()
            .max_by(|a, b| estimate(a).total_cmp(&estimate(b)))
    }
    let significant_loss = |c: &Cell| {
        c.comparison
            .as_ref()
            .is_some_and(|x| x.significant && x.degradation.estimate > 0.0)
    };
    let dnr: Vec<&Cell> = cells.iter().copied().filter(|c| c.all_dnr()).collect();
    let losses: Vec<&Cell> = cells
        .iter()
        .copied()
        .filter(|c| significant_loss(c))
        .collect();
    let with_estimate: Vec<&Cell> = cells
        .iter()
        .copied()
        .filter(|c| c.comparison.is_some())
        .collect();
    let significant_losses = losses.len() as u32;
    let (verdict, cell) = if let Some(worst) = largest(losses) {
        let v = if worst.untrustworthy() {
            Verdict::FlaggedLoss
        } else {
            Verdict::Loss
        };
        (v, Some(worst))
    } else if let Some(top) = largest(with_estimate) {
        (Verdict::NoSignificantLoss, Some(top))
    } else {
        (Verdict::NoResult, None)
    };
    let verdict = if dnr.is_empty() {
        verdict
    } else {
        Verdict::Dnr
    };
    ResourceHeadline {
        resource: resource.to_string(),
        verdict,
        dnr_cell: dnr.first().map(|c| HeadlineCell::of(c)),
        cell: cell.map(HeadlineCell::of),
        cells: cells.len() as u32,
        significant_losses,
        flagged: cells.iter().filter(|c| c.untrustworthy()).count() as u32,
        dnr: dnr.len() as u32,
    }
}

/// `+12.3`, `-4.0`, `+0.0`, `+inf`.
fn signed(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "+inf" } else { "-inf" }.into();
    }
    let r = (v * 10.0).round() / 10.0;
    if r == 0.0 {
        "+0.0".into()
    } else {
        format!("{r:+.1}")
    }
}

/// A p-value in a few characters: `0.003`, `<0.001`, `1.000`.
pub fn p_text(p: f64) -> String {
    if !p.is_finite() {
        "-".into()
    } else if p < 0.001 {
        "<0.001".into()
    } else {
        format!("{p:.3}")
    }
}
