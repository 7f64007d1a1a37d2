//! Degradation from time-adjacent paired units: a baseline and a contended trial run next to
//! each other, or one cycle of the on/off design (the mean of a probe's windows while the
//! aggressor is frozen, and while it runs).
//!
//! Why: this machine's speed drifts and its noise is correlated in time, so two independent
//! samples of baseline and contended trials mix the drift into the comparison and give wide
//! intervals. The ratio `contended / baseline` of two measurements taken close together cancels
//! a slow speed factor that multiplies both, so intervals are built on the log ratios of units.
//! Units are in time order; adjacent on/off cycles are correlated (they share an off-phase),
//! which [`PairedMethod::CycleT`] allows for.

use serde::{Deserialize, Serialize};

use crate::bootstrap::{CiMethod, DegradationCi};
use crate::degradation::{Direction, Estimator};
use crate::error::{check_level, invalid, StatsError};
use crate::normal::{student_t_quantile, student_t_two_sided_p};
use crate::rng;
use crate::sample::quantile_sorted;

/// Fewest units a paired estimate accepts.
const MIN_UNITS: usize = 2;

/// One time-adjacent comparison unit: a pair of trials, or one on/off cycle.
///
/// Both values must be finite and greater than 0 (they are compared through
/// `ln(contended / baseline)`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Pair {
    /// The metric without contention (the baseline trial, or the cycle's off-window mean).
    pub baseline: f64,
    /// The metric under contention (the contended trial, or the cycle's on-window mean).
    pub contended: f64,
}

impl Pair {
    /// A unit from its two values.
    pub fn new(baseline: f64, contended: f64) -> Self {
        Pair {
            baseline,
            contended,
        }
    }

    /// `ln(contended / baseline)`. The ratio is formed first, so units whose ratios are equal
    /// give equal log ratios; the difference of logarithms is used only if the ratio would
    /// overflow or underflow.
    pub fn log_ratio(&self) -> f64 {
        let r = self.contended / self.baseline;
        if r.is_finite() && r > 0.0 {
            r.ln()
        } else {
            self.contended.ln() - self.baseline.ln()
        }
    }
}

/// How the interval of a paired degradation is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum PairedMethod {
    /// Student t interval on the mean of `ln(contended / baseline)`, treating units as
    /// independent: the paired analysis of Kalibera & Jones, *Rigorous Benchmarking in
    /// Reasonable Time* (ISMM 2013), and of Bulej et al., *Duet Benchmarking: Improving
    /// Measurement Accuracy in the Cloud* (ICPE 2020), on log ratios so the effect is
    /// multiplicative. Right for pairs of trials whose pairs are far enough apart in time to be
    /// independent.
    LogT,
    /// Moving-block bootstrap (Kuensch 1989, *The Jackknife and the Bootstrap for General
    /// Stationary Observations*, Ann. Statist. 17) of the mean log ratio over the units in
    /// time order, with blocks of `block` consecutive units; `block = 0` chooses the length
    /// automatically (see [`auto_block_length`]). Right for on/off cycles, whose neighbours are
    /// correlated.
    BlockBootstrap {
        /// Block length in units; 0 chooses it from the data.
        block: usize,
    },
    /// Student t interval on the mean log ratio of on/off cycles, whose variance allows for
    /// the correlation of neighbouring cycles: `s^2 / n * (1 + 2 rho (n - 1) / n)`, the
    /// variance of the mean of an MA(1) series (Box & Jenkins 1976, section 3.3), with `rho`
    /// kept in `[0, 0.9]`. From 5 cycles on, `rho` is the sample lag-1 autocorrelation `r1`
    /// corrected for its bias, `E r1 ~ rho - (1 + 4 rho) / n` (Marriott & Pope 1954,
    /// Biometrika 41): a dozen cycles estimate `r1` about 0.1 too low. With fewer cycles
    /// `rho` is the correlation the design itself makes: a cycle compares its on-phase with
    /// the mean of the off-phases on either side, so each off-phase serves two neighbouring
    /// cycles and, with independent phase noise of variances `v_on` and `v_off` (log scale),
    /// neighbours correlate at `rho_s = (v_off / 4) / (v_on + v_off / 2)` (1/6 when the two
    /// are equal), `v_on` and `v_off` from the mean squared successive differences of the
    /// cycles' on and off values (von Neumann et al. 1941).
    ///
    /// Why not the larger of the two, as before: on this machine neighbouring phases are not
    /// independent (the speed drift they share cancels in the ratio), so `rho_s` overstates
    /// the correlation. On 504 cells of nine A/A runs the cycles' debiased lag-1
    /// autocorrelation averaged about 0.05, not 1/6, and `max(r1, rho_s)` covered 98.4%
    /// against 97.2% for the debiased `r1` (95.0% with `rho = 0`). On synthetic independent
    /// phases (`tests/paired_coverage.rs`) it covers near the nominal rate where the t
    /// interval that ignores the sharing covers about 92%.
    CycleT,
}

/// Settings of [`paired_degradation`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PairedConfig {
    /// Interval construction (default: block bootstrap, automatic block length).
    pub method: PairedMethod,
    /// Two-sided confidence level, strictly between 0 and 1 (default: 0.95).
    pub level: f64,
    /// Bootstrap replicates, at least 100 when bootstrapping (default: 2000; unused by
    /// [`PairedMethod::LogT`]).
    pub resamples: usize,
    /// Seed of the ChaCha8 generator (default: 0; unused by [`PairedMethod::LogT`]).
    pub seed: u64,
}

impl Default for PairedConfig {
    fn default() -> Self {
        PairedConfig {
            method: PairedMethod::BlockBootstrap { block: 0 },
            level: 0.95,
            resamples: 2000,
            seed: 0,
        }
    }
}

impl PairedConfig {
    /// Checks the level and, for the bootstrap, the number of resamples.
    pub fn validate(&self) -> Result<(), StatsError> {
        check_level(self.level)?;
        if matches!(self.method, PairedMethod::BlockBootstrap { .. }) && self.resamples < 100 {
            return Err(invalid(
                "resamples",
                self.resamples,
                "at least 100 bootstrap replicates (2000 or more for a 95% interval)",
            ));
        }
        Ok(())
    }
}

/// A degradation estimated from paired, time-adjacent units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairedEstimate {
    /// Degradation (percent, positive = worse) of the geometric mean ratio
    /// `exp(mean ln(contended / baseline))`, with its interval. Its `estimator` is
    /// [`Estimator::Mean`] (the mean of the log ratios), its `method` is
    /// [`CiMethod::PairedLogT`] or [`CiMethod::BlockBootstrap`], and `resamples` is 0 for the
    /// t interval.
    pub degradation: DegradationCi,
    /// Two-sided p-value of H0 "no degradation" (mean log ratio = 0); see
    /// [`paired_degradation`] for how each method computes it.
    pub p_value: f64,
    /// Units used.
    pub n: usize,
    /// Block length used by the bootstrap; `None` for the t intervals.
    pub block: Option<usize>,
    /// Neighbour correlation the interval allowed for ([`PairedMethod::CycleT`]); `None` for
    /// the other methods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub neighbour_correlation: Option<f64>,
    /// Mean of the log ratios `ln(contended / baseline)`.
    pub log_ratio_mean: f64,
    /// Sample standard deviation (divisor `n - 1`) of the log ratios.
    pub log_ratio_sd: f64,
    /// Lag-1 autocorrelation of the log ratios in time order; `None` below 3 units or when
    /// the log ratios do not vary.
    pub lag1_autocorrelation: Option<f64>,
}

/// Degradation of `contended` relative to `baseline` estimated from time-adjacent units, with
/// its confidence interval and p-value.
///
/// With `r_i = contended_i / baseline_i` and `m` the mean of `ln r_i`, the estimate is the
/// degradation of the geometric mean ratio `R = exp(m)`: `(1 - R) * 100` when higher is
/// better, `(R - 1) * 100` when lower is better (positive = worse, never clipped). The interval
/// is the interval of `m` mapped through the same monotone function, bounds swapped where it
/// is decreasing so that `lower <= upper`.
///
/// - [`PairedMethod::LogT`]: `m +/- t_(1 - alpha/2, n - 1) * s / sqrt(n)` (Student t on the
///   log ratios; Kalibera & Jones 2013, Bulej et al. 2020), with the t test's two-sided
///   p-value `P(|T_(n-1)| >= |m| sqrt(n) / s)`. Assumes independent units.
/// - [`PairedMethod::CycleT`]: the same t interval and p-value with the standard error
///   `s / sqrt(n) * sqrt(1 + 2 rho (n - 1) / n)`, `rho` the neighbour correlation of on/off
///   cycles (see the method).
/// - [`PairedMethod::BlockBootstrap`]: the moving-block bootstrap of Kuensch (1989). Each
///   replicate joins `ceil(n / b)` blocks of `b` consecutive log ratios, drawn uniformly from
///   the `n - b + 1` overlapping blocks, cut to `n` values, and takes their mean `m*`. The
///   replicates are centred on the exact bootstrap expectation `E*[m*]` (the moving-block
///   mean is biased toward the middle units; Lahiri 2003, *Resampling Methods for Dependent
///   Data*, section 2.7), giving `T* = m* - E*[m*]`, whose quantiles give the basic interval
///   `[m - q_(1 - alpha/2)(T*), m - q_(alpha/2)(T*)]` (Davison & Hinkley 1997, eq. 5.6). The
///   p-value is the share of replicates at least as far from 0 as the observed mean,
///   `(1 + #{|T*| >= |m|}) / (B + 1)` (Davison & Hinkley 1997, section 4.4), so it is
///   below `1 - level` about when the interval excludes 0. Like all block bootstraps it is a
///   large-sample method and its intervals are a little narrow: the block estimate of the
///   long-run variance is biased low by about `sum |k| gamma_k / (b sum gamma_k)`, and the
///   bootstrap has no t correction. Measured on synthetic data (`tests/paired_coverage.rs`),
///   a nominal 95% interval covers about 92% for 60 independent units and about 89% for 120
///   units with AR(1) log ratios at `phi = 0.5`, where an interval that treats the units as
///   independent (the t interval) covers about 74%.
///
/// When every log ratio is the same the interval has zero width (and the p-value is 0 or 1
/// for the t interval, `1 / (B + 1)` or 1 for the bootstrap), never NaN.
///
/// Errors with fewer than 2 units, a value that is not finite or not greater than 0, or an
/// invalid configuration.
pub fn paired_degradation(
    units: &[Pair],
    direction: Direction,
    config: &PairedConfig,
) -> Result<PairedEstimate, StatsError> {
    config.validate()?;
    let logs = log_ratios(units)?;
    let n = logs.len();
    let nf = n as f64;
    let mean = logs.iter().sum::<f64>() / nf;
    let sd = if is_constant(&logs) {
        0.0
    } else {
        (logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (nf - 1.0)).sqrt()
    };
    let lag1 = lag1_autocorrelation(&logs);
    let alpha = 1.0 - config.level;

    let t_interval = |se: f64| {
        if se > 0.0 {
            let t = student_t_quantile(1.0 - alpha / 2.0, nf - 1.0);
            (
                mean - t * se,
                mean + t * se,
                student_t_two_sided_p(mean / se, nf - 1.0),
            )
        } else {
            (mean, mean, if mean == 0.0 { 1.0 } else { 0.0 })
        }
    };
    let mut neighbour = None;
    let (lo, hi, p_value, block, method, resamples) = match config.method {
        PairedMethod::LogT => {
            let (lo, hi, p) = t_interval(sd / nf.sqrt());
            (lo, hi, p, None, CiMethod::PairedLogT, 0)
        }
        PairedMethod::CycleT => {
            let rho = match lag1 {
                Some(r1) if n > MIN_DEBIASED => debiased_lag1(r1, nf),
                _ => shared_phase_correlation(units),
            }
            .clamp(0.0, 0.9);
            neighbour = Some(rho);
            let factor = 1.0 + 2.0 * rho * (nf - 1.0) / nf;
            let (lo, hi, p) = t_interval(sd * (factor / nf).sqrt());
            (lo, hi, p, None, CiMethod::CycleT, 0)
        }
        PairedMethod::BlockBootstrap { block } => {
            let b = if block == 0 {
                auto_block_length(n, lag1)
            } else {
                block.min(n)
            };
            let mut centred = block_bootstrap_centred(&logs, b, config.resamples, config.seed);
            centred.sort_by(f64::total_cmp);
            let lo = mean - quantile_sorted(&centred, 1.0 - alpha / 2.0);
            let hi = mean - quantile_sorted(&centred, alpha / 2.0);
            let far = centred.iter().filter(|t| t.abs() >= mean.abs()).count();
            let p = ((1 + far) as f64 / (centred.len() + 1) as f64).min(1.0);
            (
                lo.min(mean),
                hi.max(mean),
                p,
                Some(b),
                CiMethod::BlockBootstrap,
                config.resamples,
            )
        }
    };

    let to_pct = |l: f64| log_ratio_to_degradation(l, direction);
    let (a, b) = (to_pct(lo), to_pct(hi));
    Ok(PairedEstimate {
        degradation: DegradationCi {
            estimate: to_pct(mean),
            lower: a.min(b),
            upper: a.max(b),
            level: config.level,
            estimator: Estimator::Mean,
            method,
            resamples,
            seed: config.seed,
        },
        p_value,
        n,
        block,
        neighbour_correlation: neighbour,
        log_ratio_mean: mean,
        log_ratio_sd: sd,
        lag1_autocorrelation: lag1,
    })
}

/// The block length [`PairedMethod::BlockBootstrap`] uses when given 0, for `n` units whose
/// log ratios have lag-1 autocorrelation `rho` (`None` when unknown).
///
/// Rule: the larger of `round(n^(1/3))` (the order that minimises the error of the
/// block-bootstrap variance, Hall, Horowitz & Jing 1995, Biometrika 82) and the AR(1) plug-in
/// of the optimal moving-block length for the variance of the mean,
/// `(3n/2)^(1/3) * (2|rho| / (1 - rho^2))^(2/3)` (Carlstein 1986, Ann. Statist. 14; Politis &
/// White 2004, Econometric Reviews 23, with `G / sigma^2 = 2 rho / (1 - rho^2)` for AR(1)),
/// rounded up, with `|rho|` capped at 0.9; the result is kept between 1 and `max(1, n / 3)` so
/// that a replicate is made of at least three blocks.
pub fn auto_block_length(n: usize, rho: Option<f64>) -> usize {
    if n < 2 {
        return 1;
    }
    let nf = n as f64;
    let floor = nf.cbrt().round();
    let plug_in = match rho {
        Some(r) if r.is_finite() => {
            let r = r.abs().min(0.9);
            ((1.5 * nf).cbrt() * (2.0 * r / (1.0 - r * r)).powf(2.0 / 3.0)).ceil()
        }
        _ => 0.0,
    };
    let cap = (n / 3).max(1);
    (floor.max(plug_in) as usize).clamp(1, cap)
}

/// The correlation of neighbouring on/off cycles that share an off-phase, from the cycles'
/// own values (see [`PairedMethod::CycleT`]); 0 below 3 units or without variation.
fn shared_phase_correlation(units: &[Pair]) -> f64 {
    if units.len() < 3 {
        return 0.0;
    }
    let mssd = |f: fn(&Pair) -> f64| {
        let d: f64 = units
            .windows(2)
            .map(|w| (f(&w[1]).ln() - f(&w[0]).ln()).powi(2))
            .sum();
        d / (units.len() - 1) as f64
    };
    let v_on = mssd(|u| u.contended) / 2.0;
    let v_off = 2.0 * mssd(|u| u.baseline);
    let den = v_on + v_off / 2.0;
    if den > 0.0 && den.is_finite() {
        v_off / 4.0 / den
    } else {
        0.0
    }
}

/// Fewest units from which [`debiased_lag1`] estimates the neighbour correlation; with fewer,
/// [`PairedMethod::CycleT`] takes the correlation the design makes ([`shared_phase_correlation`]).
const MIN_DEBIASED: usize = 5;

/// The lag-1 autocorrelation of an MA(1)-like series of `n` values, corrected for the bias of
/// the sample estimate `r1`: `E r1 ~ rho - (1 + 4 rho) / n` (Marriott & Pope 1954, Biometrika
/// 41), solved for `rho`. Only for `n > 4`.
fn debiased_lag1(r1: f64, n: f64) -> f64 {
    (r1 + 1.0 / n) / (1.0 - 4.0 / n)
}

/// The log ratios of `units`, checked.
fn log_ratios(units: &[Pair]) -> Result<Vec<f64>, StatsError> {
    if units.len() < MIN_UNITS {
        return Err(StatsError::TooFewUnits {
            n: units.len(),
            min: MIN_UNITS,
        });
    }
    units
        .iter()
        .enumerate()
        .map(|(index, u)| {
            for (side, value) in [("baseline", u.baseline), ("contended", u.contended)] {
                if !(value.is_finite() && value > 0.0) {
                    return Err(StatsError::NonPositivePair { index, side, value });
                }
            }
            Ok(u.log_ratio())
        })
        .collect()
}

/// True when the values differ by no more than rounding: ratios that are equal on paper, such
/// as 12/10 and 24/20, can differ in the last bits of their logarithms.
fn is_constant(xs: &[f64]) -> bool {
    let (lo, hi) = xs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
    hi - lo <= 8.0 * f64::EPSILON * lo.abs().max(hi.abs()).max(f64::MIN_POSITIVE)
}

/// Lag-1 autocorrelation `sum (x_t - m)(x_(t+1) - m) / sum (x_t - m)^2` (Box & Jenkins 1976,
/// eq. 2.1.12); `None` below 3 values or without variation.
pub fn lag1_autocorrelation(xs: &[f64]) -> Option<f64> {
    if xs.len() < 3 || is_constant(xs) {
        return None;
    }
    let m = xs.iter().sum::<f64>() / xs.len() as f64;
    let den: f64 = xs.iter().map(|x| (x - m).powi(2)).sum();
    if den <= 0.0 || !den.is_finite() {
        return None;
    }
    let num: f64 = xs.windows(2).map(|w| (w[0] - m) * (w[1] - m)).sum();
    Some(num / den)
}

/// `resamples` moving-block bootstrap replicates of the mean of `xs` (blocks of `b`),
/// each minus the exact bootstrap expectation of that mean.
fn block_bootstrap_centred(xs: &[f64], b: usize, resamples: usize, seed: u64) -> Vec<f64> {
    let n = xs.len();
    let b = b.clamp(1, n);
    let starts = n - b + 1;
    let blocks = n.div_ceil(b);
    let last_len = n - (blocks - 1) * b;
    // prefix[i] = sum of xs[..i], so a block sum is one subtraction.
    let mut prefix = Vec::with_capacity(n + 1);
    prefix.push(0.0);
    for x in xs {
        prefix.push(prefix.last().copied().unwrap_or(0.0) + x);
    }
    let block_sum = |s: usize, len: usize| prefix[s + len] - prefix[s];
    // E*[m*]: every block start is equally likely; the last block keeps `last_len` values.
    let full: f64 = (0..starts).map(|s| block_sum(s, b)).sum::<f64>() / starts as f64;
    let part: f64 = (0..starts).map(|s| block_sum(s, last_len)).sum::<f64>() / starts as f64;
    let expected = ((blocks - 1) as f64 * full + part) / n as f64;

    let mut rng = rng::seeded(seed);
    (0..resamples)
        .map(|_| {
            let mut sum = 0.0;
            for k in 0..blocks {
                let len = if k + 1 == blocks { last_len } else { b };
                sum += block_sum(rng::index(&mut rng, starts), len);
            }
            sum / n as f64 - expected
        })
        .collect()
}

/// Whether groups of units (the cycles of separate trials) differ in their mean log ratio by
/// more than their spread within groups allows: the p-value of the one-way analysis of
/// variance F test (Fisher 1925, *Statistical Methods for Research Workers*) on the log ratios
/// `ln(contended / baseline)`, with `k - 1` and `N - k` degrees of freedom. Neighbouring units
/// that correlate at `neighbour_correlation` (on/off cycles sharing an off-phase, or drift;
/// the `rho` of [`PairedMethod::CycleT`]) make each group's mean vary more than the spread
/// within groups says, by the design effect `1 + 2 rho` of an MA(1) series (Kish 1965,
/// *Survey Sampling*; Box & Jenkins 1976): the within-group mean square is scaled by it, so
/// the test is not fooled by the correlation the interval already allows for. `None` with
/// fewer than two groups of at least two units (smaller groups are left out), or with a unit
/// that is not positive. Groups that differ while nothing varies within them give 0; no
/// variation at all gives 1.
pub fn between_groups_p(groups: &[&[Pair]], neighbour_correlation: f64) -> Option<f64> {
    use statrs::distribution::{ContinuousCDF, FisherSnedecor};
    let logs: Vec<Vec<f64>> = groups
        .iter()
        .filter(|g| g.len() >= 2)
        .map(|g| log_ratios(g).ok())
        .collect::<Option<_>>()?;
    let k = logs.len();
    if k < 2 {
        return None;
    }
    let n: usize = logs.iter().map(Vec::len).sum();
    let grand = logs.iter().flatten().sum::<f64>() / n as f64;
    let (mut between, mut within) = (0.0, 0.0);
    for g in &logs {
        let m = g.iter().sum::<f64>() / g.len() as f64;
        between += g.len() as f64 * (m - grand).powi(2);
        within += g.iter().map(|x| (x - m).powi(2)).sum::<f64>();
    }
    let (df1, df2) = ((k - 1) as f64, (n - k) as f64);
    if within <= 0.0 || df2 <= 0.0 {
        return Some(if between > 0.0 { 0.0 } else { 1.0 });
    }
    let design_effect = 1.0 + 2.0 * neighbour_correlation.clamp(0.0, 0.9);
    let f = (between / df1) / (within / df2 * design_effect);
    let dist = FisherSnedecor::new(df1, df2).ok()?;
    Some(dist.sf(f).clamp(0.0, 1.0))
}

/// Degradation from the trials' own means, for a result whose trials differ by more than the
/// noise within them allows ([`between_groups_p`]): each group (the cycles of one trial) is
/// reduced to its mean log ratio `m_j`, and the interval is the Student t interval on those
/// `k` means with `k - 1` degrees of freedom, as [`PairedMethod::LogT`] on `k` units. The
/// trial, not the cycle, is then the level at which the result varies, so it is the unit of
/// replication (Kalibera & Jones, *Rigorous Benchmarking in Reasonable Time*, ISMM 2013: the
/// interval comes from the highest level that shows variation). With two or three trials it is
/// wide, and says so; more trials narrow it. Groups with no units are left out; the method is
/// [`CiMethod::TrialT`] and `n` counts the trials.
pub fn trial_level_degradation(
    groups: &[&[Pair]],
    direction: Direction,
    level: f64,
) -> Result<PairedEstimate, StatsError> {
    let means = groups
        .iter()
        .filter(|g| !g.is_empty())
        .map(|g| Ok(log_ratios(g)?.iter().sum::<f64>() / g.len() as f64))
        .collect::<Result<Vec<f64>, StatsError>>()?;
    let units: Vec<Pair> = means.iter().map(|m| Pair::new(1.0, m.exp())).collect();
    let config = PairedConfig {
        method: PairedMethod::LogT,
        level,
        ..PairedConfig::default()
    };
    let mut est = paired_degradation(&units, direction, &config)?;
    est.degradation.method = CiMethod::TrialT;
    Ok(est)
}

/// Degradation in percent (positive = worse) of a mean log ratio `l`: `(1 - e^l) * 100` when
/// higher is better, `(e^l - 1) * 100` when lower is better.
pub fn log_ratio_to_degradation(l: f64, direction: Direction) -> f64 {
    match direction {
        Direction::Higher => -l.exp_m1() * 100.0,
        Direction::Lower => l.exp_m1() * 100.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[(f64, f64)]) -> Vec<Pair> {
        v.iter().map(|&(b, c)| Pair::new(b, c)).collect()
    }

    fn log_t() -> PairedConfig {
        PairedConfig {
            method: PairedMethod::LogT,
            ..Default::default()
        }
    }

    #[test]
    fn sign_convention_follows_direction() {
        // Contended is 80% of baseline in every pair, whatever the speed.
        let u = pairs(&[(100.0, 80.0), (50.0, 40.0), (200.0, 160.0)]);
        let higher = paired_degradation(&u, Direction::Higher, &log_t()).unwrap();
        assert!(
            (higher.degradation.estimate - 20.0).abs() < 1e-9,
            "{higher:?}"
        );
        let lower = paired_degradation(&u, Direction::Lower, &log_t()).unwrap();
        assert!(
            (lower.degradation.estimate + 20.0).abs() < 1e-9,
            "{lower:?}"
        );
    }

    #[test]
    fn all_equal_ratios_give_zero_width_not_nan() {
        let u = pairs(&[(10.0, 12.0), (20.0, 24.0), (5.0, 6.0), (1.0, 1.2)]);
        for config in [log_t(), PairedConfig::default()] {
            let e = paired_degradation(&u, Direction::Lower, &config).unwrap();
            let d = &e.degradation;
            assert!((d.estimate - 20.0).abs() < 1e-9, "{e:?}");
            assert!((d.upper - d.lower).abs() < 1e-9, "{e:?}");
            assert!(d.lower.is_finite() && d.upper.is_finite(), "{e:?}");
            assert!(e.p_value < 0.01, "{e:?}");
            assert_eq!(e.lag1_autocorrelation, None);
        }
        let same = pairs(&[(3.0, 3.0), (4.0, 4.0)]);
        let e = paired_degradation(&same, Direction::Higher, &log_t()).unwrap();
        assert_eq!((e.degradation.lower, e.degradation.upper), (0.0, 0.0));
        assert_eq!(e.p_value, 1.0);
    }

    #[test]
    fn rejects_non_positive_values_and_single_unit() {
        let cfg = log_t();
        let err = paired_degradation(&pairs(&[(1.0, 2.0)]), Direction::Higher, &cfg);
        assert_eq!(err.unwrap_err(), StatsError::TooFewUnits { n: 1, min: 2 });
        let err = paired_degradation(&[], Direction::Higher, &cfg).unwrap_err();
        assert!(err.to_string().contains("at least 2 units"), "{err}");
        let zero = pairs(&[(1.0, 2.0), (0.0, 2.0)]);
        let err = paired_degradation(&zero, Direction::Higher, &cfg).unwrap_err();
        assert_eq!(
            err,
            StatsError::NonPositivePair {
                index: 1,
                side: "baseline",
                value: 0.0
            }
        );
        assert!(err.to_string().contains("greater than 0"), "{err}");
        let neg = pairs(&[(1.0, -2.0), (1.0, 2.0)]);
        assert!(matches!(
            paired_degradation(&neg, Direction::Lower, &PairedConfig::default()),
            Err(StatsError::NonPositivePair {
                index: 0,
                side: "contended",
                ..
            })
        ));
        let nan = pairs(&[(1.0, 2.0), (f64::NAN, 2.0)]);
        assert!(paired_degradation(&nan, Direction::Lower, &cfg).is_err());
        let few = PairedConfig {
            resamples: 10,
            ..Default::default()
        };
        let ok = pairs(&[(1.0, 2.0), (1.0, 2.1)]);
        assert!(paired_degradation(&ok, Direction::Lower, &few).is_err());
    }

    #[test]
    fn log_t_matches_hand_computation() {
        // Log ratios ln 1.1, ln 1.2, ln 1.3: mean and sd by hand, t_(0.975, 2) = 4.302653.
        let u = pairs(&[(1.0, 1.1), (1.0, 1.2), (1.0, 1.3)]);
        let e = paired_degradation(&u, Direction::Lower, &log_t()).unwrap();
        let l = [1.1f64.ln(), 1.2f64.ln(), 1.3f64.ln()];
        let m = l.iter().sum::<f64>() / 3.0;
        let sd = (l.iter().map(|x| (x - m).powi(2)).sum::<f64>() / 2.0).sqrt();
        assert!((e.log_ratio_mean - m).abs() < 1e-12);
        assert!((e.log_ratio_sd - sd).abs() < 1e-12);
        let half = 4.302_653 * sd / 3f64.sqrt();
        assert!((e.degradation.lower - ((m - half).exp() - 1.0) * 100.0).abs() < 1e-4);
        assert!((e.degradation.upper - ((m + half).exp() - 1.0) * 100.0).abs() < 1e-4);
        assert_eq!(e.degradation.method, CiMethod::PairedLogT);
        assert_eq!(e.block, None);
        // The interval just includes 0, so the t test is just not significant at 5%.
        assert!(
            e.degradation.lower < 0.0 && e.p_value > 0.05 && e.p_value < 0.1,
            "{e:?}"
        );
    }

    #[test]
    fn cycle_t_widens_the_t_interval_by_the_neighbour_correlation() {
        // Alternating on values with constant off values: no shared-phase correlation (the off
        // means do not move), lag-1 autocorrelation negative, so rho is 0 and the interval is
        // the plain t interval.
        let u = pairs(&[(1.0, 1.1), (1.0, 1.2), (1.0, 1.1), (1.0, 1.2), (1.0, 1.1)]);
        let plain = paired_degradation(&u, Direction::Lower, &log_t()).unwrap();
        let cfg = PairedConfig {
            method: PairedMethod::CycleT,
            ..Default::default()
        };
        let c = paired_degradation(&u, Direction::Lower, &cfg).unwrap();
        assert_eq!(c.degradation.method, CiMethod::CycleT);
        assert_eq!(c.neighbour_correlation, Some(0.0));
        assert!((c.degradation.lower - plain.degradation.lower).abs() < 1e-9);
        assert!((c.p_value - plain.p_value).abs() < 1e-12);
        assert_eq!(plain.neighbour_correlation, None);

        // Six cycles: rho is the lag-1 autocorrelation debiased by hand,
        // (r1 + 1/n) / (1 - 4/n), and the standard error grows by sqrt(1 + 2 rho (n - 1) / n).
        let on = [1.00f64, 1.02, 1.04, 1.05, 1.03, 1.01];
        let off = [1.01f64, 0.99, 1.02, 1.00, 0.98, 1.01];
        let u: Vec<Pair> = on.iter().zip(off).map(|(&c, b)| Pair::new(b, c)).collect();
        let c = paired_degradation(&u, Direction::Lower, &cfg).unwrap();
        let n = 6.0f64;
        let r1 = c.lag1_autocorrelation.unwrap();
        let rho = ((r1 + 1.0 / n) / (1.0 - 4.0 / n)).clamp(0.0, 0.9);
        assert!(rho > 0.0, "{c:?}");
        assert!(
            (c.neighbour_correlation.unwrap() - rho).abs() < 1e-12,
            "{c:?}"
        );
        let se = c.log_ratio_sd / n.sqrt() * (1.0 + 2.0 * rho * (n - 1.0) / n).sqrt();
        let t = student_t_quantile(0.975, n - 1.0);
        let want_upper = ((c.log_ratio_mean + t * se).exp() - 1.0) * 100.0;
        assert!((c.degradation.upper - want_upper).abs() < 1e-9, "{c:?}");

        // Four cycles are too few to debias r1: rho is the correlation the shared off-phases
        // make, rho_s = (v_off / 4) / (v_on + v_off / 2), by hand.
        let (on, off) = (&on[..4], &off[..4]);
        let u: Vec<Pair> = on.iter().zip(off).map(|(&c, &b)| Pair::new(b, c)).collect();
        let mssd = |x: &[f64]| {
            x.windows(2)
                .map(|w| (w[1].ln() - w[0].ln()).powi(2))
                .sum::<f64>()
                / (x.len() - 1) as f64
        };
        let (v_on, v_off) = (mssd(on) / 2.0, 2.0 * mssd(off));
        let rho_s = v_off / 4.0 / (v_on + v_off / 2.0);
        let c = paired_degradation(&u, Direction::Lower, &cfg).unwrap();
        assert!(
            (c.neighbour_correlation.unwrap() - rho_s.clamp(0.0, 0.9)).abs() < 1e-12,
            "{c:?}"
        );
    }

    #[test]
    fn trial_level_interval_is_the_t_interval_on_the_trials_means() {
        // Three trials of cycles whose mean log ratios are ln 0.9, ln 0.8 and ln 0.85.
        let trial = |r: f64| pairs(&[(1.0, r * 1.01), (1.0, r / 1.01)]);
        let (a, b, c) = (trial(0.9), trial(0.8), trial(0.85));
        let est = trial_level_degradation(&[&a, &b, &c, &[]], Direction::Higher, 0.95).unwrap();
        assert_eq!(est.n, 3);
        assert_eq!(est.degradation.method, CiMethod::TrialT);
        let m = [0.9f64, 0.8, 0.85].map(f64::ln);
        let mean = m.iter().sum::<f64>() / 3.0;
        let sd = (m.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 2.0).sqrt();
        let t = student_t_quantile(0.975, 2.0);
        let want_lower = (1.0 - (mean + t * sd / 3f64.sqrt()).exp()) * 100.0;
        let want_upper = (1.0 - (mean - t * sd / 3f64.sqrt()).exp()) * 100.0;
        assert!((est.degradation.lower - want_lower).abs() < 1e-9, "{est:?}");
        assert!((est.degradation.upper - want_upper).abs() < 1e-9, "{est:?}");
        assert!(trial_level_degradation(&[&a], Direction::Higher, 0.95).is_err());
    }

    #[test]
    fn between_groups_p_tells_trials_that_differ_from_noise() {
        // Two trials with the same effect and some noise: no evidence of a difference.
        let a = pairs(&[(1.0, 1.10), (1.0, 1.12), (1.0, 1.09), (1.0, 1.11)]);
        let b = pairs(&[(1.0, 1.11), (1.0, 1.09), (1.0, 1.12), (1.0, 1.10)]);
        assert!(between_groups_p(&[&a, &b], 0.0).unwrap() > 0.5);
        // One trial slowed by 10%, the next not at all.
        let c = pairs(&[(1.0, 1.00), (1.0, 1.01), (1.0, 0.99), (1.0, 1.00)]);
        let p = between_groups_p(&[&a, &c], 0.0).unwrap();
        assert!(p < 1e-4, "{p}");
        // By hand for two groups of two: F = between / within with 1 and 2 df.
        let g1 = pairs(&[(1.0, 1.0), (1.0, std::f64::consts::E)]);
        let g2 = pairs(&[
            (1.0, std::f64::consts::E.powi(2)),
            (1.0, std::f64::consts::E.powi(3)),
        ]);
        // Log ratios 0, 1 | 2, 3: means 0.5, 2.5, grand 1.5; between = 4, within = 1, F = 8.
        // P(F(1, 2) > 8) = P(|T_2| > sqrt 8) = 1 - sqrt(8 / 10) = 0.105573.
        let p = between_groups_p(&[&g1, &g2], 0.0).unwrap();
        assert!((p - 0.105_573).abs() < 1e-5, "{p}");
        // Too few groups, or groups too small: nothing to test.
        assert_eq!(between_groups_p(&[&a], 0.0), None);
        assert_eq!(between_groups_p(&[&a, &a[..1]], 0.0), None);
        // The same trial twice: no difference at all between them.
        assert!((between_groups_p(&[&a, &a], 0.0).unwrap() - 1.0).abs() < 1e-12);
        // Correlated neighbours: the within-group mean square counts 1 + 2 rho times, so the
        // hand example's F = 8 becomes 8 / 1.5 at rho = 0.25:
        // P(F(1, 2) > 16/3) = 1 - sqrt((16/3) / (16/3 + 2)) = 0.147197.
        let p = between_groups_p(&[&g1, &g2], 0.25).unwrap();
        assert!((p - 0.147_197).abs() < 1e-5, "{p}");
    }

    #[test]
    fn block_bootstrap_is_seeded_and_reports_its_block() {
        let u: Vec<Pair> = (0..40)
            .map(|i| Pair::new(100.0, 110.0 + (i as f64 * 0.7).sin() * 3.0))
            .collect();
        let cfg = PairedConfig {
            seed: 7,
            ..Default::default()
        };
        let a = paired_degradation(&u, Direction::Lower, &cfg).unwrap();
        let b = paired_degradation(&u, Direction::Lower, &cfg).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.degradation.method, CiMethod::BlockBootstrap);
        assert!(a.block.unwrap() >= 3, "{a:?}");
        assert!(a.degradation.lower <= a.degradation.estimate);
        assert!(a.degradation.estimate <= a.degradation.upper);
        assert!(a.p_value < 0.01);
        let fixed = PairedConfig {
            method: PairedMethod::BlockBootstrap { block: 5 },
            ..cfg
        };
        assert_eq!(
            paired_degradation(&u, Direction::Lower, &fixed)
                .unwrap()
                .block,
            Some(5)
        );
    }

    #[test]
    fn centring_uses_the_exact_bootstrap_expectation() {
        // With one block start (b = n) every replicate is the sample itself.
        let xs = [0.1, 0.5, -0.2, 0.3];
        let c = block_bootstrap_centred(&xs, 4, 50, 1);
        assert!(c.iter().all(|t| t.abs() < 1e-12), "{c:?}");
        // Averaged over many replicates, the centred mean is close to 0.
        let ys: Vec<f64> = (0..23).map(|i| (i as f64).sqrt()).collect();
        let c = block_bootstrap_centred(&ys, 4, 20_000, 2);
        let avg = c.iter().sum::<f64>() / c.len() as f64;
        assert!(avg.abs() < 0.01, "{avg}");
    }

    #[test]
    fn auto_block_length_rule() {
        assert_eq!(auto_block_length(1, None), 1);
        assert_eq!(auto_block_length(2, Some(0.5)), 1);
        assert_eq!(auto_block_length(125, None), 5);
        assert_eq!(auto_block_length(125, Some(0.0)), 5);
        // rho = 0.5: (187.5)^(1/3) * (4/3)^(2/3) = 6.92 -> 7.
        assert_eq!(auto_block_length(125, Some(0.5)), 7);
        assert_eq!(auto_block_length(125, Some(-0.5)), 7);
        // Capped at n / 3.
        assert_eq!(auto_block_length(30, Some(0.99)), 10);
    }

    #[test]
    fn method_and_config_json() {
        let cfg = PairedConfig {
            method: PairedMethod::BlockBootstrap { block: 4 },
            ..Default::default()
        };
        let json = serde_json::to_string(&cfg).unwrap();
        assert!(
            json.contains(r#""method":{"kind":"block_bootstrap","block":4}"#),
            "{json}"
        );
        let back: PairedConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back, cfg);
        let t: PairedMethod = serde_json::from_str(r#"{"kind":"log_t"}"#).unwrap();
        assert_eq!(t, PairedMethod::LogT);
        let partial: PairedConfig = serde_json::from_str(r#"{"level":0.9}"#).unwrap();
        assert_eq!(partial.resamples, 2000);
    }

    #[test]
    fn ci_method_json_keeps_old_names_and_adds_new() {
        for (m, text) in [
            (CiMethod::Percentile, "\"percentile\""),
            (CiMethod::Bca, "\"bca\""),
            (CiMethod::PairedLogT, "\"paired_log_t\""),
            (CiMethod::BlockBootstrap, "\"block_bootstrap\""),
        ] {
            assert_eq!(serde_json::to_string(&m).unwrap(), text);
            assert_eq!(serde_json::from_str::<CiMethod>(text).unwrap(), m);
            assert_eq!(format!("\"{}\"", m.as_str()), text);
        }
    }
}
