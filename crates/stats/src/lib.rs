//! Pure statistics for isobench: sample summaries, outliers, degradation with bootstrap
//! confidence intervals, paired (time-adjacent) degradation estimates, rank and permutation
//! tests, multiple-comparison corrections, the difference between two runs' degradations of
//! the same cell, the stopping rule that decides how many repetitions a run needs, and the
//! noisy bisection that finds the loosest knob setting at which a SLO holds.
//!
//! Why a crate of its own: the numbers isobench prints are only as good as the statistics
//! behind them, so these live apart from measurement, storage and rendering, do no I/O, and are
//! tested on synthetic data whose true answer is known. Every method names its source in its
//! doc comment. Everything random takes an explicit seed (ChaCha8), so a result can be
//! reproduced bit for bit.
//!
//! Conventions used throughout:
//! - *degradation* is in percent and positive always means "worse under contention", whatever
//!   the metric's [`Direction`]; a negative degradation (contention helped) is reported as it
//!   is, never clipped;
//! - quantiles use linear interpolation between order statistics (Hyndman & Fan type 7);
//! - intervals are two-sided at a confidence `level` such as 0.95.
#![deny(missing_docs)]

mod between_runs;
mod bootstrap;
mod boundary;
mod compare;
mod degradation;
mod error;
mod float_serde;
mod multiple;
mod normal;
mod paired;
mod pooled;
mod rng;
mod sample;
mod service;
mod significance;
mod stopping;
mod summary;
mod transition;
mod welch;

pub use between_runs::{
    correct_differences, degradation_difference, degradation_to_log_ratio, interval_df,
    log_difference, DegradationDifference, LogScale, Untestable,
};
pub use bootstrap::{bootstrap_degradation, BootstrapConfig, CiMethod, DegradationCi};
pub use boundary::{
    BoundarySearch, Outcome as BoundaryOutcome, SearchConfig, Step as SearchStep, Verdict, Visited,
};
pub use compare::{compare, CompareConfig, Comparison, Flag, Side};
pub use degradation::{degradation_pct, Direction, Estimator};
pub use error::StatsError;
pub use multiple::{adjust_p_values, Correction};
pub use normal::{normal_cdf, normal_quantile, student_t_quantile};
pub use paired::{
    auto_block_length, between_groups_p, lag1_autocorrelation, log_ratio_to_degradation,
    paired_degradation, trial_level_degradation, Pair, PairedConfig, PairedEstimate, PairedMethod,
};
pub use pooled::{log_level, pool_random_effects, robust_log_level};
pub use sample::{Outliers, Sample, MODIFIED_Z_THRESHOLD};
pub use service::{
    episode_figures, episode_interval, isolation, EpisodeFigures, EpisodeInterval, EpisodeSpec,
    Isolation, ServiceWindow, FEW_EVENTS,
};
pub use significance::{mann_whitney_u, permutation_test, MannWhitney, PermutationTest};
pub use stopping::{ConditionSamples, ConditionStatus, Decision, StopReport, StoppingRule};
pub use summary::Summary;
pub use transition::{
    episode, phase_degradation, time_to_leave, time_to_return, Band, BandSide, Detected, Episode,
    TimedValue, TransitionConfig,
};
pub use welch::welch_log_degradation;
