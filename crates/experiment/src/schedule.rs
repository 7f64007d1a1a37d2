//! The trial order: rounds of blocks of trials, interleaved and shuffled with the seed.
//!
//! A *round* gives every condition that still needs data one more trial per probe. A *block*
//! is a stretch of time with one condition: the aggressor idle (baseline) or running one
//! stressor at one intensity. A contended block starts the stressor, waits the warm-up,
//! measures the aggressor alone (the *solo* trial), then runs each probe once while the
//! stressor keeps running; a baseline block waits the warm-up (so the previous stressor's
//! effects fade) and runs each probe once with the aggressor idle.
//!
//! Baseline blocks are interleaved with contended ones (one before every `baseline_every`
//! contended blocks, ABAB when it is 1) so slow drift of the machine cancels out of the
//! degradations, and the order of conditions and of probes within a block is shuffled with a
//! ChaCha8 generator seeded from the plan's seed and the round number. The schedule is a
//! pure function of the plan, the round and what still needs data, so a resumed run derives
//! the very same trial keys and skips those already stored.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

pub use isobench_store::TrialKey;

/// Window in which the machine's quiet is checked before a baseline block.
pub const SETTLE_WINDOW: Duration = Duration::from_millis(100);

/// What a trial measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "index")]
pub enum TrialWhat {
    /// Probe `i` of the plan runs in every victim.
    Probe(usize),
    /// The block's stressor runs alone, victims idle: the aggressor's own rate.
    Solo,
    /// Probe `i` of the plan measures in windows for the whole of a schedule while the
    /// aggressors' stressors start and stop on it ([`crate::scheduled`]).
    Scheduled(usize),
    /// Probe `i` of the plan, a service, holds its load for one episode while the block
    /// condition's stressors start after a stable period and stop before the end
    /// ([`crate::kinds::protection`]).
    Episode(usize),
}

impl TrialWhat {
    /// True when the trial starts and stops the aggressors' stressors itself, so its block
    /// must not start them.
    pub fn switches_stressors(self) -> bool {
        matches!(self, TrialWhat::Scheduled(_) | TrialWhat::Episode(_))
    }

    /// The plan's probe the trial runs, if any.
    pub fn probe(self) -> Option<usize> {
        match self {
            TrialWhat::Probe(p) | TrialWhat::Scheduled(p) | TrialWhat::Episode(p) => Some(p),
            TrialWhat::Solo => None,
        }
    }
}

/// One scheduled trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduledTrial {
    /// Slot within the block.
    pub slot: u32,
    /// What it measures.
    pub what: TrialWhat,
}

/// One block: a condition and its trials, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    /// Round.
    pub round: u32,
    /// Index within the round.
    pub index: u32,
    /// Condition index in the plan, `None` for baseline.
    pub condition: Option<usize>,
    /// Trials in order.
    pub trials: Vec<ScheduledTrial>,
}

impl Block {
    /// The key of a trial of this block (first attempt).
    pub fn key(&self, t: &ScheduledTrial) -> TrialKey {
        TrialKey {
            round: self.round,
            block: self.index,
            slot: t.slot,
            attempt: 0,
        }
    }
}

/// What still needs data: contended cells (probe, condition) and aggressor measurements.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Needs {
    /// (probe index, condition index) pairs whose victim degradation needs more trials.
    pub cells: BTreeSet<(usize, usize)>,
    /// Conditions whose aggressor degradation needs more trials.
    pub solo: BTreeSet<usize>,
    /// Pairs of blocks this round for conditions measured with paired trials only (see
    /// [`crate::kinds::matrix::schedule::round_blocks`]); a condition not listed gets one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pairs: BTreeMap<usize, u32>,
}

impl Needs {
    /// True when nothing needs more data.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty() && self.solo.is_empty()
    }
}

/// Fisher-Yates with indices drawn as `u64`, so a seed gives the same order on every platform.
pub(crate) fn shuffle<T>(rng: &mut ChaCha8Rng, xs: &mut [T]) {
    for i in (1..xs.len()).rev() {
        let j = rng.gen_range(0..=i as u64) as usize;
        xs.swap(i, j);
    }
}

pub(crate) fn round_rng(seed: u64, round: u32) -> ChaCha8Rng {
    // SplitMix64 of (seed, round): nearby seeds and rounds give unrelated streams.
    let mut z = seed ^ (round as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ChaCha8Rng::seed_from_u64(z ^ (z >> 31))
}

/// The block holding the baseline trials paired with contended block `block` of round
/// `round`, the `pair`-th contended block of its condition in that round (from 0): the block
/// before it when `round + pair` is even, the block after it when odd (see [`crate::kinds::matrix::schedule::round_blocks`]).
/// The caller checks that block is a baseline block.
pub fn paired_baseline_block(round: u32, pair: u32, block: u32) -> Option<u32> {
    if baseline_first(round + pair) {
        block.checked_sub(1)
    } else {
        Some(block + 1)
    }
}

/// Whether a paired baseline block comes before its contended block, for the pair with this
/// parity: pairs alternate (ABBA), so a linear drift cancels within a round as well as across
/// rounds.
pub fn baseline_first(parity: u32) -> bool {
    parity % 2 == 0
}

/// Number of trials in a list of blocks.
pub fn trial_count(blocks: &[Block]) -> usize {
    blocks.iter().map(|b| b.trials.len()).sum()
}
