//! The matrix view-model: a run's degradations as one table per victim, a row per probe
//! metric and per aggressor (its own rate), a column per condition. The terminal, Markdown
//! and HTML renderers all draw these tables, so they group the cells the same way.

use crate::{Cell, Results};

/// One victim's degradations.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixTable<'a> {
    /// The victim tenant.
    pub victim: &'a str,
    /// Conditions, in plan order: one column each.
    pub conditions: Vec<String>,
    /// The victim's probe metrics, in the order first measured, then the aggressors' rows.
    pub rows: Vec<MatrixRow<'a>>,
}

/// A row of a [`MatrixTable`]: a victim's probe metric or an aggressor's own rate.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixRow<'a> {
    /// What the row measures.
    pub subject: RowSubject<'a>,
    /// One cell per condition; `None` where the row has no result under it.
    pub cells: Vec<Option<&'a Cell>>,
}

/// What a [`MatrixRow`] measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowSubject<'a> {
    /// A probe's metric in the victim.
    Probe {
        /// Probe id.
        probe: &'a str,
        /// Metric (empty for a probe's only metric).
        metric: &'a str,
    },
    /// An aggressor's own rate beside the probes against its rate alone.
    Aggressor {
        /// The aggressor tenant.
        tenant: &'a str,
    },
}

impl MatrixRow<'_> {
    /// `probe metric`, `aggressor (own rate)` for the only aggressor named `aggressor`, else
    /// `aggressor NAME (own rate)`.
    pub fn label(&self) -> String {
        match self.subject {
            RowSubject::Probe { probe, metric: "" } => probe.to_string(),
            RowSubject::Probe { probe, metric } => format!("{probe} {metric}"),
            RowSubject::Aggressor {
                tenant: "aggressor",
            } => "aggressor (own rate)".to_string(),
            RowSubject::Aggressor { tenant } => format!("aggressor {tenant} (own rate)"),
        }
    }

    /// True for an aggressor's own-rate row.
    pub fn is_aggressor(&self) -> bool {
        matches!(self.subject, RowSubject::Aggressor { .. })
    }
}

impl Results {
    /// The matrix tables: one per victim with results, in the order first measured. Each
    /// table ends with every aggressor's own-rate row.
    pub fn matrix(&self) -> Vec<MatrixTable<'_>> {
        let conditions = self.conditions();
        let aggressors = first_seen(self.aggressor.iter().map(|c| c.tenant.as_str()));
        first_seen(self.cells.iter().map(|c| c.tenant.as_str()))
            .into_iter()
            .map(|victim| {
                let mine: Vec<&Cell> = self.cells.iter().filter(|c| c.tenant == victim).collect();
                let metrics =
                    first_seen(mine.iter().map(|c| (c.probe.as_str(), c.metric.as_str())));
                let mut rows: Vec<MatrixRow<'_>> = metrics
                    .into_iter()
                    .map(|(probe, metric)| MatrixRow {
                        subject: RowSubject::Probe { probe, metric },
                        cells: conditions
                            .iter()
                            .map(|cond| {
                                mine.iter()
                                    .find(|x| {
                                        x.probe == probe
                                            && x.metric == metric
                                            && &x.condition == cond
                                    })
                                    .copied()
                            })
                            .collect(),
                    })
                    .collect();
                rows.extend(aggressors.iter().map(|&tenant| {
                    MatrixRow {
                        subject: RowSubject::Aggressor { tenant },
                        cells: conditions
                            .iter()
                            .map(|cond| {
                                self.aggressor
                                    .iter()
                                    .find(|x| x.tenant == tenant && &x.condition == cond)
                            })
                            .collect(),
                    }
                }));
                MatrixTable {
                    victim,
                    conditions: conditions.clone(),
                    rows,
                }
            })
            .collect()
    }
}

/// The distinct items in the order first seen.
fn first_seen<T: PartialEq>(items: impl Iterator<Item = T>) -> Vec<T> {
    let mut seen = Vec::new();
    for x in items {
        if !seen.contains(&x) {
            seen.push(x);
        }
    }
    seen
}
