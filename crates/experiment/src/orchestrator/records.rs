//! A trial's records: one per victim measured and per aggressor, with the probe's values as
//! the store keeps them, and their commit.

use std::time::Duration;

use anyhow::{Context, Result};
use isobench_store::{
    Condition as StoreCondition, HistogramRecord, Modulation, SampleRecord, SeriesRecord,
    StoreError, StressorReport, Timestamp, TrialRecord, TrialStatus, WindowRecord,
};

use super::{Engine, Outcome};
use crate::analysis::SOLO_PROBE;
use crate::backend::{ProbeOutcome, TenantFailure};
use crate::schedule::TrialKey;

impl Engine<'_> {
    /// One record per victim measured; the first takes the aggressors' `reports`.
    pub(super) fn victim_records(
        &mut self,
        outcomes: &[Outcome],
        what: &str,
        common: &TrialCommon,
        reports: &mut Vec<StressorReport>,
    ) -> Vec<TrialRecord> {
        let mut records = Vec::new();
        for (v, outcome) in outcomes {
            let name = self.slots[*v].name.clone();
            let (status, samples, histograms, series) = match outcome {
                Ok(o) => {
                    let (samples, histograms, series) = probe_values(o);
                    (common.status(None), samples, histograms, series)
                }
                Err(e) => (common.status(Some(e)), Vec::new(), Vec::new(), Vec::new()),
            };
            let repetition = self.next_repetition(&name, what, &common.condition);
            records.push(TrialRecord {
                samples,
                histograms,
                stressor_reports: if records.is_empty() {
                    std::mem::take(reports)
                } else {
                    Vec::new()
                },
                series,
                mechanism: self.mechanism(*v, outcome, common.modulation.is_some()),
                timeline: self.timeline.take(),
                ..common.record(what.to_string(), name, repetition, status)
            });
        }
        records
    }

    /// One record per aggressor running a stressor in a solo trial (with its own rate), and
    /// one per aggressor that did not respond.
    pub(super) fn aggressor_records(
        &mut self,
        assigned: &[usize],
        solo: bool,
        what: &str,
        common: &TrialCommon,
        mut reports: Vec<StressorReport>,
        aggressor_dnr: &[(usize, String)],
    ) -> Vec<TrialRecord> {
        let mut records = Vec::new();
        for &i in assigned {
            let dnr = aggressor_dnr
                .iter()
                .find(|(a, _)| *a == i)
                .map(|(_, w)| w.clone());
            if !solo && dnr.is_none() {
                continue;
            }
            let name = self.slots[i].name.clone();
            let probe = if solo {
                SOLO_PROBE.to_string()
            } else {
                what.to_string()
            };
            let repetition = self.next_repetition(&name, &probe, &common.condition);
            let mine: Vec<StressorReport> = if solo {
                let (m, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut reports)
                    .into_iter()
                    .partition(|r| r.tenant == name);
                reports = rest;
                m
            } else {
                Vec::new()
            };
            let status = match dnr {
                Some(w) => TrialStatus::Dnr(w),
                None => common.status(None),
            };
            records.push(TrialRecord {
                stressor_reports: mine,
                ..common.record(probe, name, repetition, status)
            });
        }
        records
    }

    /// Stores a trial's records; returns the trial's status word and, when not ok, the
    /// first reason.
    pub(super) fn commit(
        &mut self,
        records: &[TrialRecord],
    ) -> Result<(&'static str, Option<String>)> {
        let mut status_word = "ok";
        let mut reason = None;
        for r in records {
            if r.status != TrialStatus::Ok && status_word == "ok" {
                status_word = r.status.as_str();
                reason = r.status.reason().map(|s| format!("{}: {s}", r.tenant));
            }
        }
        for r in records {
            self.store_trial(r).with_context(|| {
                format!(
                    "recording trial {} of run {} (`isobench run --resume {} --db {}` continues \
                     the run)",
                    r.key,
                    self.run,
                    self.run,
                    self.store.path().display()
                )
            })?;
            self.stored
                .insert((r.key, r.tenant.clone()), r.status.as_str());
        }
        Ok((status_word, reason))
    }

    /// Stores one record. A database another process holds locked (a backup, a `sqlite3`
    /// shell) is waited for, up to [`EngineOptions::lock_patience`] beyond the store's own
    /// busy timeout, rather than losing the trial just measured; the wait is announced.
    pub(super) fn store_trial(&mut self, r: &TrialRecord) -> Result<(), StoreError> {
        let start = std::time::Instant::now();
        let mut announced = false;
        loop {
            match self.store.record_trial(&self.run, r) {
                Err(StoreError::Locked { .. }) if start.elapsed() < self.options.lock_patience => {
                    if !announced {
                        announced = true;
                        self.progress.note(&format!(
                            "the database {} is locked by another process; trial {} waits up \
                             to {} s more to be stored",
                            self.store.path().display(),
                            r.key,
                            self.options.lock_patience.as_secs()
                        ));
                    }
                    // The store already waited its busy timeout; a short pause between tries.
                    std::thread::sleep(Duration::from_millis(100));
                }
                other => return other,
            }
        }
    }
}

/// What every record of one trial shares.
pub(super) struct TrialCommon {
    pub(super) key: TrialKey,
    pub(super) condition: StoreCondition,
    pub(super) started_at: Timestamp,
    pub(super) ended_at: Timestamp,
    pub(super) load_note: Option<String>,
    /// Why the trial was disturbed, when load from outside the run exceeded the limit.
    pub(super) disturbed: Option<String>,
    pub(super) modulation: Option<Modulation>,
    pub(super) noise: Option<serde_json::Value>,
    /// Limits the condition set on tenants, and why one could not be set.
    pub(super) limits: Option<(serde_json::Value, Option<String>)>,
}

impl TrialCommon {
    /// Seconds of the trial its aggressors spent frozen (on/off), which are no time to work.
    pub(super) fn frozen_s(&self) -> f64 {
        self.modulation
            .as_ref()
            .map_or(0.0, |m| crate::onoff::frozen_time(m).as_secs_f64())
    }

    /// The status of a record: the tenant's failure, else failed when the condition's limits
    /// could not be set, else disturbed or ok.
    pub(super) fn status(&self, fail: Option<&TenantFailure>) -> TrialStatus {
        let unset = self.limits.as_ref().and_then(|(_, why)| why.clone());
        match (fail, unset) {
            (Some(TenantFailure::NoResponse(r)), _) => TrialStatus::Dnr(r.clone()),
            (Some(TenantFailure::Failed(r)), _) => TrialStatus::Failed(r.clone()),
            (None, Some(why)) => TrialStatus::Failed(why),
            (None, None) => match &self.disturbed {
                Some(d) => TrialStatus::Disturbed(d.clone()),
                None => TrialStatus::Ok,
            },
        }
    }

    /// A record of this trial with no values.
    pub(super) fn record(
        &self,
        probe: String,
        tenant: String,
        repetition: u32,
        status: TrialStatus,
    ) -> TrialRecord {
        TrialRecord {
            key: self.key,
            probe,
            tenant,
            condition: self.condition.clone(),
            repetition,
            status,
            started_at: self.started_at,
            ended_at: self.ended_at,
            load_note: self.load_note.clone(),
            samples: Vec::new(),
            histograms: Vec::new(),
            stressor_reports: Vec::new(),
            series: Vec::new(),
            modulation: self.modulation.clone(),
            noise: self.noise.clone(),
            mechanism: None,
            timeline: None,
            limits: self.limits.as_ref().map(|(l, _)| l.clone()),
            tenant_usage: Vec::new(),
        }
    }
}

/// A probe's metrics as the store records them: finite values (the first of each name),
/// their histograms, and their window series.
pub(super) fn probe_values(
    o: &ProbeOutcome,
) -> (Vec<SampleRecord>, Vec<HistogramRecord>, Vec<SeriesRecord>) {
    let mut samples: Vec<SampleRecord> = Vec::new();
    let mut hists = Vec::new();
    let series: Vec<SeriesRecord> = o
        .metrics
        .iter()
        .filter_map(|m| {
            m.series.as_ref().map(|ws| SeriesRecord {
                metric: m.name.clone(),
                windows: window_records(ws),
            })
        })
        .collect();
    for m in &o.metrics {
        if !m.value.is_finite() || samples.iter().any(|s| s.metric == m.name) {
            continue;
        }
        samples.push(SampleRecord {
            metric: m.name.clone(),
            unit: if m.unit.is_empty() {
                "-".into()
            } else {
                m.unit.clone()
            },
            direction: m.direction,
            value: m.value,
        });
        if let Some(h) = &m.histogram {
            hists.push(HistogramRecord {
                metric: m.name.clone(),
                base64: h.to_base64(),
            });
        }
    }
    (samples, hists, series)
}

/// A probe's window series as the store records it.
pub(super) fn window_records(ws: &[isobench_workloads::Window]) -> Vec<WindowRecord> {
    ws.iter()
        .map(|w| WindowRecord {
            start_ns: w.start_ns,
            end_ns: w.end_ns,
            value: w.value,
        })
        .collect()
}
