//! What a `[protection]` table says, as stored in the plan: read by the planning and by the
//! analysis alike.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::plan::Overrides;

/// What a `[protection]` table says, checked; stored in the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProtectionSettings {
    /// The `[[probe]]` id of the service (the scenario's only probe unless named).
    pub probe: String,
    /// The victim tenant it runs in (the first victim unless named).
    pub victim: String,
    /// Warm-up at the start of an episode, ignored by the analysis.
    #[serde(with = "crate::scenario::secs")]
    pub settle: Duration,
    /// The service alone at its load before the aggressor starts.
    #[serde(with = "crate::scenario::secs")]
    pub stable: Duration,
    /// How long the aggressor runs.
    #[serde(with = "crate::scenario::secs")]
    pub aggressor: Duration,
    /// The service after the aggressor stopped.
    #[serde(with = "crate::scenario::secs")]
    pub recover: Duration,
    /// Episodes per condition.
    pub episodes: u32,
    /// Window of the service's series.
    #[serde(with = "crate::scenario::secs")]
    pub window: Duration,
    /// The p99 bound, ms; `None`: the probe's own `slo_ms`.
    pub slo_ms: Option<f64>,
    /// Consecutive good windows that make a recovery.
    pub sustain: u32,
    /// isol% a window needs to count as recovered.
    pub recovered_isol: f64,
    /// Isolation settings to compare side by side (`[[protection.setting]]`); none: the
    /// tenants' planned limits alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<IsolationSetting>,
}

/// One isolation setting of `[[protection.setting]]`: knobs set on tenants while every
/// aggressor runs its episodes under it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IsolationSetting {
    /// Name, the prefix of its conditions' ids (`v1-limits/disk@100`).
    pub name: String,
    /// The knobs per tenant, over the planned limits.
    pub limits: Overrides,
    /// `v2`: the setting needs cgroup v2 and is left out (with a note) elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
}

impl ProtectionSettings {
    /// The settings stored in a plan or a scenario, when they read.
    pub fn of(v: &serde_json::Value) -> Option<ProtectionSettings> {
        serde_json::from_value(v.clone()).ok()
    }

    /// Length of one episode.
    pub fn length(&self) -> Duration {
        self.stable + self.aggressor + self.recover
    }
}

/// The probe parameter that holds the service's SLO.
pub const SLO_PARAM: &str = "slo_ms";
