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

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use std::time::Duration;

use crate::plan::{Design, Estimate, Plan};

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
    /// [`round_blocks`]); a condition not listed gets one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pairs: BTreeMap<usize, u32>,
}

/// Pairs of blocks in the first round of a condition measured with paired trials only: two
/// give a first spread (one degree of freedom is not enough to size the next round), three
/// a usable one.
pub const FIRST_PAIRS: u32 = 3;

/// Most pairs of blocks of one condition in one round.
pub const MAX_PAIRS: u32 = 8;

impl Needs {
    /// Everything: the first rounds measure every cell.
    pub fn all(plan: &Plan) -> Needs {
        let mut n = Needs::default();
        for p in 0..plan.probes.len() {
            for c in 0..plan.conditions.len() {
                n.cells.insert((p, c));
            }
        }
        if plan.trial.solo > std::time::Duration::ZERO {
            n.solo = (0..plan.conditions.len()).collect();
        }
        n.pairs = (0..plan.conditions.len())
            .filter(|&c| paired_only(plan, c))
            .map(|c| (c, FIRST_PAIRS))
            .collect();
        n
    }

    /// True when nothing needs more data.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty() && self.solo.is_empty()
    }
}

/// Fisher-Yates with indices drawn as `u64`, so a seed gives the same order on every platform.
fn shuffle<T>(rng: &mut ChaCha8Rng, xs: &mut [T]) {
    for i in (1..xs.len()).rev() {
        let j = rng.gen_range(0..=i as u64) as usize;
        xs.swap(i, j);
    }
}

fn round_rng(seed: u64, round: u32) -> ChaCha8Rng {
    // SplitMix64 of (seed, round): nearby seeds and rounds give unrelated streams.
    let mut z = seed ^ (round as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ChaCha8Rng::seed_from_u64(z ^ (z >> 31))
}

/// Whether every probe under condition `c` is measured with paired trials (a stressor whose
/// effect outlasts a freeze), so its blocks can repeat in pairs within a round.
pub fn paired_only(plan: &Plan, c: usize) -> bool {
    !plan.probes.is_empty() && (0..plan.probes.len()).all(|p| plan.design(p, c) == Design::Paired)
}

/// The blocks of round `round`, given what still needs data.
///
/// Every condition that needs data gets one contended block (the aggressor alone first, when
/// its own rate needs data, then each probe once). Probes measured with the on/off design need
/// nothing more: their baseline is the off-windows of the same trial. Probes measured with
/// paired trials get a baseline block right next to the contended one, with the same probes in
/// the same order, so each pair is one block apart; the order of the two blocks alternates
/// (baseline first in even rounds, contended first in odd ones) so a linear drift cancels, and
/// [`paired_baseline_block`] finds a contended block's partner. A condition whose probes are
/// all paired repeats its pair `needs.pairs` times in the round (ABBA order: the pair's order
/// alternates within the round too); its pairs are cheap next to on/off trials, and one pair
/// per round would leave it with a handful of pairs when the run's time is spent.
pub fn round_blocks(plan: &Plan, round: u32, needs: &Needs) -> Vec<Block> {
    let mut rng = round_rng(plan.seed, round);
    let mut conds: Vec<usize> = (0..plan.conditions.len())
        .filter(|c| needs.solo.contains(c) || needs.cells.iter().any(|&(_, cc)| cc == *c))
        .collect();
    shuffle(&mut rng, &mut conds);
    let mut blocks = Vec::new();
    let push = |condition: Option<usize>, trials: Vec<TrialWhat>, blocks: &mut Vec<Block>| {
        let index = blocks.len() as u32;
        blocks.push(Block {
            round,
            index,
            condition,
            trials: trials
                .into_iter()
                .enumerate()
                .map(|(i, what)| ScheduledTrial {
                    slot: i as u32,
                    what,
                })
                .collect(),
        });
    };
    for &c in &conds {
        let mut ps: Vec<usize> = needs
            .cells
            .iter()
            .filter(|&&(_, cc)| cc == c)
            .map(|&(p, _)| p)
            .collect();
        shuffle(&mut rng, &mut ps);
        let paired: Vec<TrialWhat> = ps
            .iter()
            .filter(|&&p| plan.design(p, c) == Design::Paired)
            .map(|&p| TrialWhat::Probe(p))
            .collect();
        let mut trials = Vec::new();
        if needs.solo.contains(&c) {
            trials.push(TrialWhat::Solo);
        }
        trials.extend(ps.into_iter().map(TrialWhat::Probe));
        if paired.is_empty() {
            push(Some(c), trials, &mut blocks);
            continue;
        }
        let pairs = if paired.len() + usize::from(needs.solo.contains(&c)) == trials.len() {
            needs
                .pairs
                .get(&c)
                .copied()
                .unwrap_or(1)
                .clamp(1, MAX_PAIRS)
        } else {
            1
        };
        for pair in 0..pairs {
            // The aggressor's own rate is measured once per round.
            let contended = if pair == 0 {
                trials.clone()
            } else {
                paired.clone()
            };
            if baseline_first(round + pair) {
                push(None, paired.clone(), &mut blocks);
                push(Some(c), contended, &mut blocks);
            } else {
                push(Some(c), contended, &mut blocks);
                push(None, paired.clone(), &mut blocks);
            }
        }
    }
    blocks
}

/// The block holding the baseline trials paired with contended block `block` of round
/// `round`, the `pair`-th contended block of its condition in that round (from 0): the block
/// before it when `round + pair` is even, the block after it when odd (see [`round_blocks`]).
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

/// Estimated seconds one probe trial takes beyond its budget (agent round trip, start-up,
/// bookkeeping).
pub const TRIAL_OVERHEAD_S: f64 = 0.15;

/// Size and duration of the run if it stops after the minimum rounds, and if it runs to
/// the cap.
pub fn estimate(plan: &Plan) -> Estimate {
    let p = plan.probes.len();
    let solo = plan.trial.solo > Duration::ZERO;
    let per_trial = plan.trial.duration.as_secs_f64() + TRIAL_OVERHEAD_S;
    let per_onoff = plan.trial.onoff_max.as_secs_f64() + TRIAL_OVERHEAD_S;
    let warm = plan.trial.warmup.as_secs_f64();
    let settle = SETTLE_WINDOW.as_secs_f64();
    let mut trials_per_round = 0u32;
    let mut round_secs = 0.0;
    for c in 0..plan.conditions.len() {
        let paired = (0..p)
            .filter(|&q| plan.design(q, c) == Design::Paired)
            .count();
        let onoff = p - paired;
        // Contended block, and the paired baseline block next to it.
        trials_per_round += (p + 2 * paired) as u32 + u32::from(solo);
        round_secs += warm + onoff as f64 * per_onoff + paired as f64 * per_trial;
        if paired > 0 {
            round_secs += warm + settle + paired as f64 * per_trial;
        }
        if solo {
            round_secs += plan.trial.solo.as_secs_f64() + TRIAL_OVERHEAD_S;
        }
    }
    // Tenants, agents, the memory check, one discarded run and a pilot of every probe.
    let setup = 5.0 + p as f64 * (per_trial + plan.trial.pilot.as_secs_f64() + TRIAL_OVERHEAD_S);
    Estimate {
        trials_per_round,
        trials_min: trials_per_round * plan.repetitions.min,
        trials_max: trials_per_round * plan.repetitions.max,
        // Whole tenths of a second: an estimate, and one that reads back from JSON exactly.
        secs_min: ((setup + round_secs * plan.repetitions.min as f64) * 10.0).round() / 10.0,
        secs_max: ((setup + round_secs * plan.repetitions.max as f64) * 10.0).round() / 10.0,
    }
}
