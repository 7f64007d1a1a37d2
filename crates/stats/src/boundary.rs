//! The loosest setting of a knob at which a service level objective still holds, found by a
//! noisy search over the knob's range, with an interval on that boundary.
//!
//! Method, in two parts. Far from the boundary: bisection in which every query is answered by
//! a sequential test instead of a single observation, the "repeated query" form of noisy
//! binary search (Karp & Kleinberg, *Noisy binary search and its applications*, SODA 2007,
//! section 2; the probabilistic bisection of Waeber, Frazier & Henderson, *Bisection search
//! with noisy responses*, SIAM J. Control Optim. 51(3), 2013, is its Bayesian relative), with
//! secant steps: once a point holds and another fails, the next goes a little inside
//! `FIT_SPAN` resolutions of where the mean figure crosses the bound between them, far
//! enough from the bound to be judged in few trials. Each point is measured in trials until a
//! Student t interval of the mean of its figures lies wholly on one side of the bound (the SLO
//! holds there, or fails), or until `max_trials` leaves it undecided: at the edge, within the
//! noise of the bound. The t interval takes the variance pooled over every point visited (the
//! noise is assumed about the same along the knob; `pool_variance` turns that off), so a
//! point far from the bound is judged at `min_trials`. It is looked at after `min_trials` and
//! then each time the count doubles.
//!
//! Near the boundary, once the points that hold and fail are at most `FIT_SPAN` resolutions
//! apart: a straight line through every figure between them, and the interval on where it
//! crosses the bound by Fieller's theorem (Fieller, *Some problems in interval estimation*,
//! J. R. Stat. Soc. B 16(2), 1954; the inverse prediction of Draper & Smith, *Applied
//! Regression Analysis*, 3rd ed., section 3.2): the positions at which the line's value is
//! within t standard errors of the bound. Points are aimed at the line's crossing, where
//! their figures narrow that interval most, one look each and `max_trials` over them all;
//! the search stops once the interval is as narrow as the resolution. The line is trusted
//! only with three positions or more and while the lack-of-fit F test finds no bend; a bend
//! sends the search back to its verdicts alone.
//!
//! Errors: a third of `1 - level` is split over every look of every point the search can
//! make (Bonferroni), the other two thirds over every fitted interval it can look at (most
//! searches end on one), so with
//! probability at least `level` no verdict is wrong and the boundary lies in the interval
//! returned (the fitted part while the figure is straight within `FIT_SPAN` resolutions).
//! On a simulated victim (the tests: a straight figure, 300 seeds) this takes 0.33 of the
//! trials of a grid at the same resolution whose every point is judged by the same pooled
//! test at the same level, at low noise, with an interval half as wide as the grid's (whose
//! points next to the bound end at the edge); at high noise, where neither reaches the
//! resolution, 0.81 of the grid's trials for an interval a little narrower. Of the 24 trials
//! at low noise, the ends take 6.5, the two or so points that bracket the crossing 11.5
//! (within `FIT_SPAN` resolutions of it, near enough to the bound to need a second look
//! often), and the points aimed by the fit 6. At high noise the bracket is what costs: its
//! points sit within a standard deviation of the bound.
//!
//! Positions run from 0 (the tightest setting) to 1 (the loosest: no limit at all, or the
//! range's loose end); the caller maps them to settings (linearly, or logarithmically for a
//! range spanning decades) and measures. The figure is assumed to worsen as the setting
//! loosens (it may stay flat); where it does not, the search finds a crossing of the bound,
//! not necessarily the loosest one. A SLO that holds even at the loose end, or fails even at
//! the tight end, is reported as exactly that: no boundary is invented. So is a search whose
//! every verdict is at the edge.
//!
//! A knob with whole settings only (a count of CPUs) is searched on a lattice
//! ([`SearchConfig::steps`]): every position visited is a multiple of `1/steps`, by plain
//! bisection (the fitted line and the secant steps are left out: their crossing falls
//! between settings no one can make, and a figure of whole settings is often a step), and
//! a search whose point that holds and point that fails are neighbours is done.
//!
//! The search does no measuring and keeps no clock: [`BoundarySearch::step`] says which
//! position to measure, [`BoundarySearch::record`] takes each trial's figure.

use serde::{Deserialize, Serialize};

use crate::degradation::Direction;
use crate::error::{invalid, StatsError};
use crate::normal::student_t_quantile;
use statrs::distribution::{ContinuousCDF, FisherSnedecor};

/// What a search looks for and how hard it tries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchConfig {
    /// The SLO's bound on the figure (a p99 in the figure's unit, a loss in percent, ...).
    pub bound: f64,
    /// Which way the figure is better: [`Direction::Lower`] for a latency or a loss (the SLO
    /// holds while the figure stays at or below `bound`), [`Direction::Higher`] for a rate.
    pub direction: Direction,
    /// The widest boundary interval, in positions (0..1), the search may stop at.
    pub resolution: f64,
    /// Trials every point gets before it is judged (at least 2).
    pub min_trials: usize,
    /// Trials after which a point still undecided is left at the edge; also the most trials
    /// the points aimed at a fitted crossing take together.
    pub max_trials: usize,
    /// The probability that every verdict is right, so that the boundary lies in its
    /// interval (such as 0.95).
    pub level: f64,
    /// Whether each point's t test takes the figures' variance pooled over every point
    /// visited (more degrees of freedom, so fewer trials per point) instead of its own
    /// figures alone. Right when the noise is about the same along the knob.
    #[serde(default = "pool_variance_default")]
    pub pool_variance: bool,
    /// For a knob of whole settings: the range's number of steps between them (a count of
    /// CPUs from 1 to N is N - 1 steps). Every position visited is then a multiple of
    /// `1/steps`, the search ends when the point that holds and the point that fails are
    /// neighbours, and `resolution` should be at least `1/steps`; the search bisects only.
    /// `None`: any position.
    #[serde(default)]
    pub steps: Option<usize>,
}

fn pool_variance_default() -> bool {
    true
}

impl SearchConfig {
    /// A search for where the figure crosses `bound`, better in `direction`, to an interval
    /// at most `resolution` wide, with the other fields at their defaults.
    pub fn new(bound: f64, direction: Direction, resolution: f64) -> SearchConfig {
        SearchConfig {
            bound,
            direction,
            resolution,
            ..SearchConfig::default()
        }
    }
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            bound: 0.0,
            direction: Direction::Lower,
            resolution: 0.05,
            min_trials: 3,
            max_trials: 24,
            level: 0.95,
            pool_variance: pool_variance_default(),
            steps: None,
        }
    }
}

/// What the trials at one position say about the SLO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Not judged yet: it needs more trials.
    Measuring,
    /// The SLO holds here: the figure's interval lies wholly on the good side of the bound.
    Holds,
    /// The SLO fails here: the interval lies wholly on the bad side.
    Fails,
    /// Undecided, and `max_trials` would not decide it: the figure is within the noise of
    /// the bound (it is left as soon as its figures show that). Also a point aimed at a
    /// fitted crossing that its one look left undecided.
    Edge,
}

/// One position visited, with every figure measured there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Visited {
    /// Its position, 0 (tightest) to 1 (loosest).
    pub position: f64,
    /// One figure per trial, in the order measured.
    pub figures: Vec<f64>,
    /// What they say.
    pub verdict: Verdict,
}

impl Visited {
    /// The mean figure.
    pub fn mean(&self) -> f64 {
        self.figures.iter().sum::<f64>() / self.figures.len() as f64
    }
}

/// How a search ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// The boundary lies in `[low, high]`.
    Boundary {
        /// The interval's tight end: the loosest position where the SLO holds (0 when it was
        /// only at the edge even there), or the tight end of the fitted crossing's interval
        /// when that is looser.
        low: f64,
        /// The interval's loose end: the tightest position where it fails (1 when it was
        /// only at the edge even there), or the loose end of the fitted crossing's interval
        /// when that is tighter.
        high: f64,
        /// The loosest position at which the SLO was shown to hold, by a point's verdict or
        /// by the fitted line: the setting to recommend. `None` when it held nowhere beyond
        /// doubt (the tight end was at the edge, and no fit said more).
        recommended: Option<f64>,
        /// Where the fitted line crosses the bound, or else where the mean figure does,
        /// interpolated between the points beside it (within `[low, high]`).
        estimate: f64,
        /// Whether the interval is as narrow as the resolution asked. When not, the figure
        /// stays within the noise of the bound across the interval (more trials per point,
        /// not more points, would narrow it), or the search visited as many points as its
        /// error budget allows, or the points aimed at the fitted crossing took `max_trials`.
        resolved: bool,
    },
    /// The SLO holds even at the loose end: no limit in this range is needed.
    HoldsEverywhere,
    /// The SLO fails even at the tight end: no setting in this range protects the victim.
    FailsEverywhere,
}

/// What to do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Measure one more trial at this position and [`BoundarySearch::record`] its figure.
    Measure(f64),
    /// The search is over.
    Done(Outcome),
}

/// A noisy bisection in progress (module docs).
#[derive(Debug, Clone)]
pub struct BoundarySearch {
    config: SearchConfig,
    visited: Vec<Visited>,
    /// The point being measured (an index into `visited`).
    current: Option<usize>,
    /// The points aimed at the fitted crossing (indices into `visited`): each gets one look
    /// (the fit takes its figures whatever its verdict), and together at most `max_trials`.
    aimed: Vec<usize>,
    judge: Judge,
}

impl BoundarySearch {
    /// A search; refuses a configuration that cannot end or cannot be trusted.
    pub fn new(config: SearchConfig) -> Result<BoundarySearch, StatsError> {
        let c = &config;
        if !c.bound.is_finite() {
            return Err(invalid("bound", c.bound, "a finite number"));
        }
        // A lattice of one step has nothing between its ends: a resolution of the whole range.
        let widest = if c.steps == Some(1) { 1.0 } else { 0.0 };
        if !(c.resolution > 0.0 && (c.resolution < 1.0 || c.resolution <= widest)) {
            return Err(invalid(
                "resolution",
                c.resolution,
                "a fraction of the range between 0 and 1",
            ));
        }
        if c.steps == Some(0) {
            return Err(invalid(
                "steps",
                0,
                "at least 1 step between whole settings",
            ));
        }
        if c.min_trials < 2 {
            return Err(invalid("min_trials", c.min_trials, "at least 2"));
        }
        if c.max_trials < c.min_trials {
            return Err(invalid("max_trials", c.max_trials, "at least min_trials"));
        }
        if !(c.level > 0.0 && c.level < 1.0) {
            return Err(invalid("level", c.level, "between 0 and 1, such as 0.95"));
        }
        Ok(BoundarySearch {
            judge: Judge::new(
                &config,
                // Every look of every point, and the loose end's first look again when it
                // waited for the tight end's figures.
                max_points(config.resolution) * looks_per_point(&config) + 1,
                // The fit is looked at once after each point, and not before both ends.
                max_points(config.resolution),
                FIT_SHARE,
            ),
            config,
            visited: Vec::new(),
            current: None,
            aimed: Vec::new(),
        })
    }

    /// The positions visited so far, in the order first visited.
    pub fn visited(&self) -> &[Visited] {
        &self.visited
    }

    /// Trials measured so far.
    pub fn trials(&self) -> usize {
        self.visited.iter().map(|v| v.figures.len()).sum()
    }

    /// At least how many trials a grid at the same resolution would have taken, to report
    /// beside [`trials`](Self::trials): `min_trials` at each of its `1/resolution + 1`
    /// points. A grid judges every point by the same sequential test, whose first look is at
    /// `min_trials`, so none of its points takes fewer; the points within the noise of the
    /// bound take more, but how many more depends on figures the grid never measured, so the
    /// bound leaves them out (on a simulated victim the tests measure such a grid: about 1.15
    /// times this at low noise, 1.6 at high). `None` before any point has a verdict.
    pub fn grid_trials_at_least(&self) -> Option<usize> {
        self.visited
            .iter()
            .any(|v| v.verdict != Verdict::Measuring)
            .then(|| grid_points(self.config.resolution) * self.config.min_trials)
    }

    /// What to measure next, or how the search ended.
    pub fn step(&mut self) -> Step {
        if let Some(i) = self.current {
            let v = &self.visited[i];
            // The loose end, undecided on its own figures at its first look, waits for the
            // tight end's: the variance pooled over both may decide it with no more trials.
            let waits = self.visited.len() == 1
                && self.config.pool_variance
                && v.figures.len() >= self.config.min_trials;
            if v.verdict == Verdict::Measuring && !waits {
                return Step::Measure(v.position);
            }
        }
        if self.visited.len() > 1 && self.visited[0].verdict == Verdict::Measuring {
            self.judge(0);
            if self.visited[0].verdict == Verdict::Measuring {
                self.current = Some(0);
                return Step::Measure(self.visited[0].position);
            }
        }
        self.current = None;
        match self.plan() {
            Ok((position, aimed)) => {
                if aimed {
                    self.aimed.push(self.visited.len());
                }
                self.visited.push(Visited {
                    position,
                    figures: Vec::new(),
                    verdict: Verdict::Measuring,
                });
                self.current = Some(self.visited.len() - 1);
                Step::Measure(position)
            }
            Err(outcome) => Step::Done(outcome),
        }
    }

    /// Records one trial's figure at the position [`step`](Self::step) asked for.
    pub fn record(&mut self, figure: f64) -> Result<(), StatsError> {
        let Some(i) = self.current else {
            return Err(invalid("record", figure, "a call to step() first"));
        };
        if !figure.is_finite() {
            return Err(invalid("figure", figure, "a finite number"));
        }
        self.visited[i].figures.push(figure);
        self.judge(i);
        Ok(())
    }

    /// Judges the `i`-th point on its figures, with the spread at the others.
    fn judge(&mut self, i: usize) {
        let others = self
            .visited
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .fold(Spread::default(), |s, (_, v)| {
                s.plus(Spread::of(&v.figures))
            });
        let figures = &self.visited[i].figures;
        self.visited[i].verdict = match self.judge.verdict(figures, others) {
            Verdict::Measuring
                if self.aimed.contains(&i) && figures.len() >= self.config.min_trials =>
            {
                Verdict::Edge
            }
            v => v,
        };
    }

    /// The next position to visit and whether it gets one look only, or the outcome when
    /// there is none; on a lattice ([`SearchConfig::steps`]) the free lattice point inside
    /// the bracket nearest the position planned, or the outcome when none is free.
    fn plan(&self) -> Result<(f64, bool), Outcome> {
        let (p, aimed) = self.plan_anywhere()?;
        let Some(n) = self.config.steps else {
            return Ok((p, aimed));
        };
        let at = |k: usize| k as f64 / n as f64;
        let holds = self.loosest(Verdict::Holds);
        let (lo, hi) = (
            holds.unwrap_or(0.0),
            self.tightest(Verdict::Fails).unwrap_or(1.0),
        );
        let visited = |k: usize| {
            self.visited
                .iter()
                .any(|v| (v.position * n as f64).round() as usize == k)
        };
        (0..=n)
            .filter(|&k| at(k) >= lo && at(k) <= hi && !visited(k))
            .min_by(|&a, &b| (at(a) - p).abs().total_cmp(&(at(b) - p).abs()))
            .map(|k| (at(k), false))
            .ok_or_else(|| self.boundary(lo, hi, holds, None))
    }

    /// [`plan`](Self::plan) for a knob whose every position can be set.
    fn plan_anywhere(&self) -> Result<(f64, bool), Outcome> {
        let verdict_at = |p: f64| {
            self.visited
                .iter()
                .find(|v| v.position == p)
                .map(|v| v.verdict)
        };
        // The loose end first: a SLO that holds there needs no limit at all.
        match verdict_at(1.0) {
            None => return Ok((1.0, false)),
            Some(Verdict::Holds) => return Err(Outcome::HoldsEverywhere),
            _ => {}
        }
        match verdict_at(0.0) {
            None => return Ok((0.0, false)),
            Some(Verdict::Fails) => return Err(Outcome::FailsEverywhere),
            _ => {}
        }
        let holds = self.loosest(Verdict::Holds);
        let lo = holds.unwrap_or(0.0);
        let hi = self.tightest(Verdict::Fails).unwrap_or(1.0);
        let resolution = self.config.resolution;
        let fit = (hi - lo <= FIT_SPAN * resolution && self.config.steps.is_none())
            .then(|| self.crossing(lo, hi))
            .flatten();
        let outcome = || self.boundary(lo, hi, holds, fit);
        if hi - lo <= resolution
            || fit.is_some_and(|f| f.high - f.low <= resolution)
            || self.visited.len() >= max_points(resolution)
        {
            return Err(outcome());
        }
        // Near the crossing, the next point goes where the fitted line crosses the bound,
        // where its figures narrow the fitted interval most; before there is a line, where
        // the figure crosses it between the two points (a line needs a third position to be
        // tested for a bend).
        let third = || {
            let inside = self
                .visited
                .iter()
                .filter(|v| v.position >= lo && v.position <= hi);
            (hi - lo <= FIT_SPAN * resolution && inside.count() == 2)
                .then(|| self.interpolated(lo, hi))
                .flatten()
        };
        let aim = fit
            .map(|f| f.estimate)
            .or_else(third)
            .filter(|_| self.config.steps.is_none());
        if let Some(p) = aim.filter(|&p| p > lo && p < hi) {
            let spent: usize = self
                .aimed
                .iter()
                .map(|&i| self.visited[i].figures.len())
                .sum();
            if spent + self.config.min_trials > self.config.max_trials {
                return Err(outcome());
            }
            return Ok((p, true));
        }
        // Far from it, the next point goes a little inside the span the fit takes, on the
        // side of the crossing (interpolated between the points beside it) still wider than
        // that: far enough from the bound to be judged in few trials (secant steps).
        let free = |p: f64| {
            p > lo
                && p < hi
                && !self
                    .visited
                    .iter()
                    .any(|v| (v.position - p).abs() < resolution / 8.0)
        };
        let reach = 0.45 * FIT_SPAN * resolution;
        let secant = self
            .interpolated(lo, hi)
            .filter(|_| self.config.steps.is_none());
        if let Some(x) = secant {
            // The side that cuts more off [lo, hi] first: taking the same side each time
            // would creep towards a crossing the interpolation misplaces (regula falsi's
            // stall).
            let (tight, loose) = (x - reach, x + reach);
            let sides = if tight - lo >= hi - loose {
                [tight, loose]
            } else {
                [loose, tight]
            };
            if let Some(p) = sides.into_iter().find(|&p| free(p)) {
                return Ok((p, false));
            }
        }
        // The widest gap between points visited inside [lo, hi]: points at the edge split
        // the interval too, and the boundary may lie on either side of them.
        let mut inside: Vec<f64> = self
            .visited
            .iter()
            .map(|v| v.position)
            .filter(|&p| p >= lo && p <= hi)
            .collect();
        inside.sort_by(f64::total_cmp);
        let (a, b) = inside
            .windows(2)
            .map(|w| (w[0], w[1]))
            .max_by(|x, y| (x.1 - x.0).total_cmp(&(y.1 - y.0)))
            .unwrap_or((lo, hi));
        // Points at the edge can leave the interval wider than the resolution while every gap
        // is narrower: a point nearer one on either side may still hold or fail. Below a
        // quarter of the resolution the noise, not the spacing, sets the width.
        if b - a <= resolution / 4.0 {
            return Err(outcome());
        }
        Ok(((a + b) / 2.0, false))
    }

    fn loosest(&self, verdict: Verdict) -> Option<f64> {
        self.positions(verdict).max_by(f64::total_cmp)
    }

    fn tightest(&self, verdict: Verdict) -> Option<f64> {
        self.positions(verdict).min_by(f64::total_cmp)
    }

    fn positions(&self, verdict: Verdict) -> impl Iterator<Item = f64> + '_ {
        self.visited
            .iter()
            .filter(move |v| v.verdict == verdict)
            .map(|v| v.position)
    }

    fn excess(&self, figure: f64) -> f64 {
        excess(&self.config, figure)
    }

    /// Where a straight line through the figures at the points in `[lo, hi]` crosses the
    /// bound, with its Fieller interval (module docs); `None` with fewer than three
    /// positions, while the line's slope is not shown to be positive (the interval would be
    /// unbounded), or when the figures bend away from the line.
    fn crossing(&self, lo: f64, hi: f64) -> Option<Crossing> {
        let inside = |v: &&Visited| v.position >= lo && v.position <= hi;
        let points: Vec<&Visited> = self.visited.iter().filter(inside).collect();
        let xy = || {
            points
                .iter()
                .flat_map(|v| v.figures.iter().map(|&f| (v.position, self.excess(f))))
        };
        let n = xy().count() as f64;
        let (mx, my) = xy().fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
        let sxx: f64 = xy().map(|(x, _)| (x - mx).powi(2)).sum();
        let sxy: f64 = xy().map(|(x, y)| (x - mx) * (y - my)).sum();
        // A line through two positions fits whatever the figure does: at least three.
        if points.len() < 3 || sxx <= 0.0 {
            return None;
        }
        let slope = sxy / sxx;
        let residual = Spread {
            ss: xy().map(|(x, y)| (y - my - slope * (x - mx)).powi(2)).sum(),
            df: (n as usize).saturating_sub(2),
        };
        // The noise: the line's residuals (which carry any curvature inside [lo, hi]), with
        // the spread at the points outside when the config pools.
        let outside = || self.visited.iter().filter(|v| !inside(v));
        let pool = |s: Spread| {
            if self.config.pool_variance {
                outside().fold(s, |s, v| s.plus(Spread::of(&v.figures)))
            } else {
                s
            }
        };
        let spread = pool(residual);
        let within = points
            .iter()
            .fold(Spread::default(), |s, v| s.plus(Spread::of(&v.figures)));
        if spread.df == 0 || Self::bends(residual, points.len(), within, pool(within)) {
            return None;
        }
        let t = student_t_quantile(1.0 - self.judge.fit_alpha, spread.df as f64);
        let t2s2 = t * t * spread.ss / spread.df as f64;
        // The positions x = mx + u at which the line's value is within t standard errors of
        // the bound: (my + slope u)^2 <= t2s2 (1/n + u^2/sxx), a quadratic in u.
        let a = slope * slope - t2s2 / sxx;
        if slope <= 0.0 || a <= 0.0 {
            return None;
        }
        let b = slope * my;
        let c = my * my - t2s2 / n;
        let root = (b * b - a * c).max(0.0).sqrt();
        Some(Crossing {
            low: mx + (-b - root) / a,
            estimate: mx - my / slope,
            high: mx + (-b + root) / a,
        })
    }

    /// Whether the figures at the `points` positions of a line's `residual` stray from it by
    /// more than their spread at each position explains (`within` those points; `pure`, the
    /// same pooled as the config pools): the lack-of-fit F test (Draper & Smith, *Applied
    /// Regression Analysis*, 3rd ed., section 2.1). At a lenient level, since a bend found
    /// only sends the search back to the verdicts alone.
    fn bends(residual: Spread, points: usize, within: Spread, pure: Spread) -> bool {
        let lack = Spread {
            ss: (residual.ss - within.ss).max(0.0),
            df: points - 2,
        };
        if pure.df == 0 || pure.ss <= 0.0 {
            return lack.ss > 0.0;
        }
        let f = (lack.ss / lack.df as f64) / (pure.ss / pure.df as f64);
        FisherSnedecor::new(lack.df as f64, pure.df as f64)
            .map(|d| d.sf(f) < BEND_LEVEL)
            .unwrap_or(false)
    }

    /// The outcome for the interval `[lo, hi]` between the loosest point that holds and the
    /// tightest that fails, narrowed by the fitted crossing's interval where there is one.
    fn boundary(&self, lo: f64, hi: f64, holds: Option<f64>, fit: Option<Crossing>) -> Outcome {
        // An interval of the fit that misses [lo, hi] altogether says the line is wrong there:
        // the verdicts alone stand.
        let fit = fit.filter(|f| f.low <= hi && f.high >= lo);
        let (low, high) = match fit {
            Some(f) => (f.low.max(lo), f.high.min(hi)),
            None => (lo, hi),
        };
        let estimate = match fit {
            Some(f) => f.estimate,
            None => self.interpolated(lo, hi).unwrap_or((lo + hi) / 2.0),
        };
        Outcome::Boundary {
            low,
            high,
            recommended: if fit.is_some() && low > lo {
                Some(low)
            } else {
                holds
            },
            estimate: estimate.clamp(low, high),
            // Lattice positions k/n differ by a hair from their exact spacing.
            resolved: high - low <= self.config.resolution * (1.0 + 1e-9),
        }
    }

    /// Where the mean figure crosses the bound, interpolated between the visited points
    /// nearest it on either side.
    fn interpolated(&self, lo: f64, hi: f64) -> Option<f64> {
        let excess = |v: &Visited| self.excess(v.mean());
        let mut inside: Vec<&Visited> = self
            .visited
            .iter()
            .filter(|v| v.position >= lo && v.position <= hi)
            .collect();
        inside.sort_by(|a, b| a.position.total_cmp(&b.position));
        inside.windows(2).find_map(|w| {
            let (e0, e1) = (excess(w[0]), excess(w[1]));
            (e0 <= 0.0 && e1 > 0.0)
                .then(|| w[0].position + (w[1].position - w[0].position) * (-e0 / (e1 - e0)))
        })
    }
}

/// Where a fitted line crosses the bound, with its interval.
#[derive(Debug, Clone, Copy)]
struct Crossing {
    low: f64,
    estimate: f64,
    high: f64,
}

/// The fit takes over from bisection once the points that hold and fail are at most this many
/// resolutions apart: close enough for a straight line to follow the figure. At 4 a figure
/// that doubles its slope across that span (the tests' sharpest bend) kept its boundary in
/// the interval for 95% of seeds only just; at 3.5, for 97%, for 2% more trials.
const FIT_SPAN: f64 = 3.5;

/// The level of the lack-of-fit test that keeps a bent figure from the fit.
const BEND_LEVEL: f64 = 0.1;

/// The share of the family's error spent on the fitted intervals; the rest goes to the
/// points' verdicts.
const FIT_SHARE: f64 = 2.0 / 3.0;

/// How far `figure` is on the bad side of the bound (negative: on the good side).
fn excess(c: &SearchConfig, figure: f64) -> f64 {
    match c.direction {
        Direction::Lower => figure - c.bound,
        Direction::Higher => c.bound - figure,
    }
}

/// The spread of figures around their own point's mean: the sum of squared deviations and its
/// degrees of freedom. Added over points, it is the pooled within-point spread.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Spread {
    ss: f64,
    df: usize,
}

impl Spread {
    fn of(figures: &[f64]) -> Spread {
        if figures.len() < 2 {
            return Spread::default();
        }
        let mean = figures.iter().sum::<f64>() / figures.len() as f64;
        Spread {
            ss: figures.iter().map(|x| (x - mean).powi(2)).sum(),
            df: figures.len() - 1,
        }
    }

    fn plus(self, other: Spread) -> Spread {
        Spread {
            ss: self.ss + other.ss,
            df: self.df + other.df,
        }
    }
}

/// The sequential test each point's figures go through.
#[derive(Debug, Clone)]
struct Judge {
    config: SearchConfig,
    /// The one-sided tail probability each look is tested at: the family's error, split
    /// over both sides of the bound and over every look of every point (Bonferroni).
    look_alpha: f64,
    /// The tail probability on each side of a fitted crossing's interval: the fit's share
    /// of the error, split over both sides and every point after which it is looked at.
    fit_alpha: f64,
}

impl Judge {
    /// A judge for a family of at most `looks` looks at points and `fits` fitted intervals,
    /// which spends `fit_share` of the family's error on the fits (0 for points judged
    /// alone).
    fn new(config: &SearchConfig, looks: usize, fits: usize, fit_share: f64) -> Judge {
        let alpha = 1.0 - config.level;
        Judge {
            config: config.clone(),
            look_alpha: alpha * (1.0 - fit_share) / looks as f64 / 2.0,
            fit_alpha: alpha * fit_share / fits.max(1) as f64 / 2.0,
        }
    }

    /// The verdict of `figures` at a look, or `Measuring` between looks. `others` is the
    /// spread at the other points, pooled with this one's when the config pools.
    fn verdict(&self, figures: &[f64], others: Spread) -> Verdict {
        let n = figures.len();
        if !is_look(n, &self.config) {
            return Verdict::Measuring;
        }
        let own = Spread::of(figures);
        let spread = if self.config.pool_variance {
            own.plus(others)
        } else {
            own
        };
        let var = spread.ss / spread.df as f64;
        let t = |n: usize| {
            student_t_quantile(
                1.0 - self.look_alpha,
                (spread.df + n - figures.len()) as f64,
            )
        };
        let half = |n: usize| t(n) * (var / n as f64).sqrt();
        // The interval of the excess over the bound: above 0 is worse than the bound.
        let mean = figures.iter().sum::<f64>() / n as f64;
        let e = excess(&self.config, mean);
        if e + half(n) <= 0.0 {
            Verdict::Holds
        } else if e - half(n) > 0.0 {
            Verdict::Fails
        } else if n >= self.config.max_trials || e.abs() < half(self.config.max_trials) {
            // Undecided, and (as far as its figures tell) `max_trials` would not decide it
            // either: more trials here are spent on a point that narrows nothing.
            Verdict::Edge
        } else {
            Verdict::Measuring
        }
    }
}

/// Points of a grid over 0..1 at `resolution` (both ends included).
fn grid_points(resolution: f64) -> usize {
    (1.0 / resolution).ceil() as usize + 1
}

/// The most points a search visits: both ends, then halvings until a gap is no wider than
/// `resolution`; each point at the edge can add a halving on its other side, so twice that.
fn max_points(resolution: f64) -> usize {
    2 + 2 * (1.0 / resolution).log2().ceil() as usize
}

/// Whether a point's `n`-th trial is a look: `min_trials`, each doubling of it, and
/// `max_trials`.
fn is_look(n: usize, c: &SearchConfig) -> bool {
    if n == c.max_trials {
        return true;
    }
    n >= c.min_trials && n % c.min_trials == 0 && (n / c.min_trials).is_power_of_two()
}

fn looks_per_point(c: &SearchConfig) -> usize {
    (c.min_trials..=c.max_trials)
        .filter(|&n| is_look(n, c))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::seeded;
    use rand::Rng;

    /// A victim whose figure grows with the position, crossing `bound` at `boundary` with
    /// `slope`, with normal noise of `sd`. `curve` bends it: the figure is
    /// `slope (e^(curve d) - 1) / curve` past the bound at a distance `d` from the boundary
    /// (convex above 0, a hockey stick; concave below; straight at 0).
    struct Victim {
        boundary: f64,
        slope: f64,
        sd: f64,
        curve: f64,
    }

    impl Victim {
        fn line(boundary: f64, slope: f64, sd: f64) -> Victim {
            Victim {
                boundary,
                slope,
                sd,
                curve: 0.0,
            }
        }

        fn figure(&self, position: f64, bound: f64, rng: &mut impl Rng) -> f64 {
            // Box-Muller from two uniforms: a normal deviate without another dependency.
            let (u1, u2): (f64, f64) = (rng.gen::<f64>().max(1e-300), rng.gen());
            let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            let d = position - self.boundary;
            let rise = if self.curve == 0.0 {
                d
            } else {
                (self.curve * d).exp_m1() / self.curve
            };
            bound + self.slope * rise + self.sd * z
        }
    }

    fn search(victim: &Victim, config: &SearchConfig, seed: u64) -> (Outcome, usize) {
        let mut rng = seeded(seed);
        let mut s = BoundarySearch::new(config.clone()).unwrap();
        loop {
            match s.step() {
                Step::Measure(p) => s.record(victim.figure(p, config.bound, &mut rng)).unwrap(),
                Step::Done(outcome) => return (outcome, s.trials()),
            }
        }
    }

    fn config() -> SearchConfig {
        SearchConfig::new(10.0, Direction::Lower, 0.05)
    }

    /// The search and a grid on victims with boundaries drawn from `boundaries`, one per
    /// seed: how often each interval holds the boundary, how wide it is, and the trials.
    #[derive(Debug, Default)]
    struct Survey {
        seeds: usize,
        covered: usize,
        resolved: usize,
        width: f64,
        trials: usize,
        grid_covered: usize,
        grid_width: f64,
        grid_trials: usize,
    }

    impl Survey {
        fn of(sd: f64, curve: f64, boundaries: std::ops::Range<f64>) -> Survey {
            Survey::with(&config(), sd, curve, boundaries)
        }

        fn with(c: &SearchConfig, sd: f64, curve: f64, boundaries: std::ops::Range<f64>) -> Survey {
            let mut s = Survey {
                seeds: 300,
                ..Survey::default()
            };
            for seed in 0..s.seeds as u64 {
                let mut rng = seeded(1_000 + seed);
                let victim = Victim {
                    boundary: rng.gen_range(boundaries.clone()),
                    slope: 20.0,
                    sd,
                    curve,
                };
                let within =
                    |low: f64, high: f64| low <= victim.boundary && victim.boundary <= high;
                let (outcome, n) = search(&victim, c, seed);
                // Holding or failing everywhere puts the boundary at the end it passed.
                let (low, high, resolved) = match outcome {
                    Outcome::Boundary {
                        low,
                        high,
                        resolved,
                        ..
                    } => (low, high, resolved),
                    Outcome::HoldsEverywhere => (1.0, 1.0, true),
                    Outcome::FailsEverywhere => (0.0, 0.0, true),
                };
                s.covered += usize::from(within(low, high));
                s.resolved += usize::from(resolved);
                s.width += (high - low) / s.seeds as f64;
                s.trials += n;
                let g = grid(&victim, c, seed + 5_000);
                s.grid_covered += usize::from(within(g.low, g.high));
                s.grid_width += (g.high - g.low) / s.seeds as f64;
                s.grid_trials += g.trials;
            }
            eprintln!(
                "sd {sd}, curve {curve}, boundaries {boundaries:?}: covered {} of {}, {} resolved, \
                 width {:.3}, {} trials; grid: covered {}, width {:.3}, {} trials; \
                 trials search/grid {:.2}",
                s.covered,
                s.seeds,
                s.resolved,
                s.width,
                s.trials,
                s.grid_covered,
                s.grid_width,
                s.grid_trials,
                s.ratio()
            );
            s
        }

        fn ratio(&self) -> f64 {
            self.trials as f64 / self.grid_trials as f64
        }

        /// The boundary in its interval for at least 95% of seeds, in fewer trials than the
        /// grid, with an interval on average no wider than the grid's.
        fn assert_covered_in_fewer_trials(&self, case: &str) {
            assert!(
                self.covered * 100 >= self.seeds * 95,
                "{case}: covered {} of {}",
                self.covered,
                self.seeds
            );
            assert!(self.ratio() < 1.0, "{case}: {self:?}");
            assert!(self.width <= self.grid_width, "{case}: {self:?}");
        }
    }

    #[test]
    fn the_boundary_lies_in_its_interval_for_at_least_95_percent_of_seeds_in_fewer_trials_than_a_grid(
    ) {
        for sd in [0.5, 2.0] {
            for (case, boundaries) in [
                ("inside", 0.1..0.9),
                ("near the tight end", 0.0..0.05),
                ("near the loose end", 0.95..1.0),
            ] {
                Survey::of(sd, 0.0, boundaries)
                    .assert_covered_in_fewer_trials(&format!("sd {sd}, boundary {case}"));
            }
        }
    }

    #[test]
    fn a_curved_figure_keeps_its_boundary_in_the_interval_for_at_least_95_percent_of_seeds() {
        for sd in [0.5, 2.0] {
            for curve in [-4.0, 4.0, 8.0] {
                let s = Survey::of(sd, curve, 0.1..0.9);
                let case = format!("sd {sd}, curve {curve}");
                assert!(s.covered * 100 >= s.seeds * 95, "{case}: {s:?}");
                assert!(s.ratio() < 1.0, "{case}: {s:?}");
            }
        }
    }

    #[test]
    fn without_pooling_the_boundary_still_lies_in_its_interval_in_fewer_trials_than_a_grid() {
        let c = SearchConfig {
            pool_variance: false,
            ..config()
        };
        for sd in [0.5, 2.0] {
            let s = Survey::with(&c, sd, 0.0, 0.1..0.9);
            assert!(s.covered * 100 >= s.seeds * 95, "sd {sd}: {s:?}");
            assert!(s.ratio() < 1.0, "sd {sd}: {s:?}");
        }
    }

    #[test]
    fn the_search_takes_at_most_a_third_of_a_grids_trials_at_low_noise_and_five_sixths_at_high() {
        // Measured: 0.331 and 0.807.
        assert!(Survey::of(0.5, 0.0, 0.1..0.9).ratio() <= 1.0 / 3.0);
        assert!(Survey::of(2.0, 0.0, 0.1..0.9).ratio() <= 5.0 / 6.0);
    }

    /// A grid at `c.resolution`, every point judged by the same test in a family of the
    /// grid's size: the trials it takes and its interval, between the loosest point that
    /// holds and the tightest that fails. As a grid that knows its points can do, it measures
    /// `min_trials` at every point before judging any, so each is judged with the variance
    /// pooled over them all from the first look.
    fn grid(victim: &Victim, c: &SearchConfig, seed: u64) -> Grid {
        let mut rng = seeded(seed);
        let judge = Judge::new(c, grid_points(c.resolution) * looks_per_point(c), 0, 0.0);
        let positions: Vec<f64> = (0..grid_points(c.resolution))
            .map(|i| (i as f64 * c.resolution).min(1.0))
            .collect();
        let mut figures: Vec<Vec<f64>> = positions
            .iter()
            .map(|&p| {
                (0..c.min_trials)
                    .map(|_| victim.figure(p, c.bound, &mut rng))
                    .collect()
            })
            .collect();
        let mut g = Grid {
            trials: 0,
            low: 0.0,
            high: 1.0,
        };
        for (i, &p) in positions.iter().enumerate() {
            let others = figures
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .fold(Spread::default(), |s, (_, f)| s.plus(Spread::of(f)));
            let verdict = loop {
                match judge.verdict(&figures[i], others) {
                    Verdict::Measuring => figures[i].push(victim.figure(p, c.bound, &mut rng)),
                    v => break v,
                }
            };
            g.trials += figures[i].len();
            match verdict {
                Verdict::Holds => g.low = g.low.max(p),
                Verdict::Fails => g.high = g.high.min(p),
                _ => {}
            }
        }
        g
    }

    struct Grid {
        trials: usize,
        low: f64,
        high: f64,
    }

    #[test]
    fn a_boundary_beyond_either_end_is_not_invented_inside_the_range() {
        let c = config();
        for sd in [0.5, 2.0] {
            for boundary in [1.05, 1.3, 2.0, -0.05, -0.3, -1.0] {
                let invented = (0..300)
                    .filter(|&seed| {
                        let victim = Victim::line(boundary, 20.0, sd);
                        match search(&victim, &c, seed).0 {
                            // The loose end never shown to fail, or the tight end to hold.
                            Outcome::Boundary { low, high, .. } => {
                                if boundary > 1.0 {
                                    high < 1.0
                                } else {
                                    low > 0.0
                                }
                            }
                            Outcome::HoldsEverywhere => boundary < 0.0,
                            Outcome::FailsEverywhere => boundary > 1.0,
                        }
                    })
                    .count();
                // Within 0.1 of an end, its verdict may be at the edge and the fit may place
                // the crossing inside, wrongly at most as often as the level allows; further
                // out, never.
                let allowed = if (boundary - 0.5_f64).abs() < 0.6 {
                    15
                } else {
                    0
                };
                assert!(
                    invented <= allowed,
                    "sd {sd}, boundary {boundary}: invented in {invented} of 300"
                );
            }
        }
    }

    #[test]
    fn a_narrow_interval_is_resolved_and_the_estimate_lies_in_it() {
        let c = config();
        let victim = Victim::line(0.37, 40.0, 0.2);
        match search(&victim, &c, 7).0 {
            Outcome::Boundary {
                low,
                high,
                recommended,
                estimate,
                resolved,
            } => {
                assert!(resolved);
                assert!(high - low <= c.resolution);
                assert_eq!(recommended, Some(low));
                assert!(low <= estimate && estimate <= high);
                assert!((estimate - 0.37).abs() < 0.05, "{estimate}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_slo_that_holds_at_the_loose_end_needs_no_limit() {
        let victim = Victim::line(1.8, 20.0, 1.0);
        assert_eq!(search(&victim, &config(), 1).0, Outcome::HoldsEverywhere);
    }

    #[test]
    fn an_slo_that_fails_at_the_tight_end_is_said_to_and_no_boundary_is_invented() {
        let victim = Victim::line(-0.8, 20.0, 1.0);
        assert_eq!(search(&victim, &config(), 1).0, Outcome::FailsEverywhere);
    }

    #[test]
    fn a_figure_within_noise_of_the_bound_ends_unresolved_at_the_edge() {
        let victim = Victim::line(0.5, 0.5, 5.0);
        match search(&victim, &config(), 3).0 {
            Outcome::Boundary { resolved, .. } => assert!(!resolved),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_higher_is_better_figure_holds_above_its_bound() {
        let c = SearchConfig {
            direction: Direction::Higher,
            ..config()
        };
        let mut s = BoundarySearch::new(c).unwrap();
        // A rate that falls from 20 to 0 as the setting loosens: crosses 10 at 0.5.
        let outcome = loop {
            match s.step() {
                Step::Measure(p) => s
                    .record(20.0 - 20.0 * p + 0.1 * (s.trials() % 3) as f64 - 0.1)
                    .unwrap(),
                Step::Done(o) => break o,
            }
        };
        match outcome {
            Outcome::Boundary { low, high, .. } => assert!(low <= 0.5 && 0.5 <= high),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_configurations_are_refused_with_the_field() {
        for (c, field) in [
            (
                SearchConfig {
                    resolution: 0.0,
                    ..config()
                },
                "resolution",
            ),
            (
                SearchConfig {
                    min_trials: 1,
                    ..config()
                },
                "min_trials",
            ),
            (
                SearchConfig {
                    level: 1.0,
                    ..config()
                },
                "level",
            ),
            (
                SearchConfig {
                    bound: f64::NAN,
                    ..config()
                },
                "bound",
            ),
        ] {
            let e = BoundarySearch::new(c).unwrap_err().to_string();
            assert!(e.contains(field), "{e}");
        }
        let mut s = BoundarySearch::new(config()).unwrap();
        assert!(s.record(1.0).is_err(), "record before step");
        s.step();
        assert!(s.record(f64::INFINITY).is_err());
    }

    /// A search on a lattice of `steps` against a figure of 5 up to `holds_to` and 15 past
    /// it (bound 10): the outcome and every position visited.
    fn lattice_search(steps: usize, holds_to: f64) -> (Outcome, Vec<f64>) {
        let c = SearchConfig {
            steps: Some(steps),
            ..SearchConfig::new(10.0, Direction::Lower, 1.0 / steps as f64)
        };
        let mut s = BoundarySearch::new(c).unwrap();
        let mut n = 0;
        loop {
            match s.step() {
                Step::Measure(p) => {
                    n += 1;
                    let wobble = if n % 2 == 0 { 0.1 } else { -0.1 };
                    let f = if p <= holds_to + 1e-9 { 5.0 } else { 15.0 };
                    s.record(f + wobble).unwrap();
                }
                Step::Done(o) => {
                    return (o, s.visited().iter().map(|v| v.position).collect());
                }
            }
        }
    }

    #[test]
    fn a_lattice_search_visits_whole_steps_and_ends_between_neighbours() {
        for (steps, holds_to) in [(3, 1.0 / 3.0), (7, 4.0 / 7.0), (7, 0.0), (1, 0.0)] {
            let (o, seen) = lattice_search(steps, holds_to);
            let case = format!("{steps} steps, holds to {holds_to}: {o:?} {seen:?}");
            for p in &seen {
                let k = p * steps as f64;
                assert!((k - k.round()).abs() < 1e-9, "{case}");
            }
            match o {
                Outcome::Boundary {
                    low,
                    high,
                    recommended,
                    resolved,
                    ..
                } => {
                    assert!((low - holds_to).abs() < 1e-9, "{case}");
                    assert!(
                        (high - holds_to - 1.0 / steps as f64).abs() < 1e-9,
                        "{case}"
                    );
                    assert_eq!(recommended, Some(low), "{case}");
                    assert!(resolved, "{case}");
                }
                _ => panic!("{case}"),
            }
            // No position twice, and no more than a bisection needs.
            let mut sorted = seen.clone();
            sorted.sort_by(f64::total_cmp);
            sorted.dedup();
            assert_eq!(sorted.len(), seen.len(), "{case}");
            assert!(
                seen.len() <= 2 + (steps as f64).log2().ceil() as usize,
                "{case}"
            );
        }
    }
}
