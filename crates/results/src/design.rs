//! How a degradation was measured ([`Design`]) and what placement caused it ([`Cause`]).

use serde::{Deserialize, Serialize};

/// How one degradation is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Design {
    /// The probe measures in short windows while the aggressors are frozen and thawed with a
    /// fixed period; on-windows are compared with the neighbouring off-windows, cycle by
    /// cycle.
    OnOff,
    /// Each contended trial is compared with the baseline trial next to it in time.
    Paired,
}

impl Design {
    /// `onoff` or `paired`.
    pub fn as_str(self) -> &'static str {
        match self {
            Design::OnOff => "onoff",
            Design::Paired => "paired",
        }
    }
}

/// What kind of placement caused a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CauseKind {
    /// The victim waited for CPUs it shares with the aggressor.
    SharedCpus,
    /// A device's interrupts go to a CPU the aggressor uses, and the victim's completions
    /// waited there.
    IrqCpu,
    /// Softirq work took CPU time from the victim.
    Softirq,
    /// Idle states: a busy neighbour kept the CPUs awake (faster wake-ups).
    IdleStates,
}

impl CauseKind {
    /// `shared-cpus`, `irq-cpu`, `softirq`, `idle-states`.
    pub fn as_str(self) -> &'static str {
        match self {
            CauseKind::SharedCpus => "shared-cpus",
            CauseKind::IrqCpu => "irq-cpu",
            CauseKind::Softirq => "softirq",
            CauseKind::IdleStates => "idle-states",
        }
    }
}

/// A named cause with the measured numbers behind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cause {
    /// Machine-readable kind.
    pub kind: CauseKind,
    /// One sentence with the numbers.
    pub text: String,
}
