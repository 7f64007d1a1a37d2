//! The matrix's trial order: rounds of blocks, each condition's contended block beside its
//! paired baseline block, shuffled with the seed (see [`crate::schedule`] for blocks and
//! keys); what the first rounds measure; and the size and duration of a run.

use std::time::Duration;

use crate::plan::{Design, Estimate, Plan};
use crate::schedule::{
    baseline_first, round_rng, shuffle, Block, Needs, ScheduledTrial, TrialWhat, SETTLE_WINDOW,
};

/// Pairs of blocks in the first round of a condition measured with paired trials only: two
/// give a first spread (one degree of freedom is not enough to size the next round), three
/// a usable one.
pub const FIRST_PAIRS: u32 = 3;

/// Most pairs of blocks of one condition in one round.
pub const MAX_PAIRS: u32 = 8;

/// What the first rounds measure: every cell, every aggressor alone (unless the scenario
/// turned solo trials off), and [`FIRST_PAIRS`] pairs of blocks for conditions measured with
/// paired trials only.
pub fn first_needs(plan: &Plan) -> Needs {
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
/// [`crate::schedule::paired_baseline_block`] finds a contended block's partner. A condition whose probes are
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

/// Estimated seconds one probe trial takes beyond its budget (agent round trip, start-up,
/// bookkeeping).
pub const TRIAL_OVERHEAD_S: f64 = 0.15;

/// Size and duration of the run if it stops after the minimum rounds, and if it runs to
/// the cap.
pub fn estimate(plan: &Plan) -> Estimate {
    estimate_cells(plan, &|_, _| true)
}

/// [`estimate`] of a run that measures only the cells `(probe, condition)` for which
/// `measured` holds (a kind whose probes each belong to some of its conditions).
pub fn estimate_cells(plan: &Plan, measured: &dyn Fn(usize, usize) -> bool) -> Estimate {
    let p = plan.probes.len();
    let solo = plan.trial.solo > Duration::ZERO;
    let per_trial = plan.trial.duration.as_secs_f64() + TRIAL_OVERHEAD_S;
    let per_onoff = plan.trial.onoff_max.as_secs_f64() + TRIAL_OVERHEAD_S;
    let warm = plan.trial.warmup.as_secs_f64();
    let settle = SETTLE_WINDOW.as_secs_f64();
    let mut trials_per_round = 0u32;
    let mut round_secs = 0.0;
    for c in 0..plan.conditions.len() {
        let probes: Vec<usize> = (0..p).filter(|&q| measured(q, c)).collect();
        if probes.is_empty() {
            continue;
        }
        let paired = probes
            .iter()
            .filter(|&&q| plan.design(q, c) == Design::Paired)
            .count();
        let onoff = probes.len() - paired;
        // Contended block, and the paired baseline block next to it; a condition measured
        // only with paired trials repeats the pair ([`FIRST_PAIRS`] times while its spread is
        // unknown), as `round_blocks` does.
        let repeats = if paired > 0 && paired == probes.len() {
            FIRST_PAIRS
        } else {
            1
        };
        trials_per_round +=
            (probes.len() + paired) as u32 + (repeats - 1) * 2 * paired as u32 + u32::from(solo);
        round_secs += warm + onoff as f64 * per_onoff + paired as f64 * per_trial;
        if paired > 0 {
            round_secs += warm + settle + paired as f64 * per_trial;
            round_secs +=
                f64::from(repeats - 1) * 2.0 * (warm + settle + paired as f64 * per_trial);
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
