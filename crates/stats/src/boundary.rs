//! The loosest setting of a knob at which a service level objective still holds, found by a
//! noisy bisection over the knob's range, with an interval on that boundary.
//!
//! Method: bisection in which every query is answered by a sequential test instead of a
//! single observation, the "repeated query" form of noisy binary search (Karp & Kleinberg,
//! *Noisy binary search and its applications*, SODA 2007, section 2; the probabilistic
//! bisection of Waeber, Frazier & Henderson, *Bisection search with noisy responses*, SIAM J.
//! Control Optim. 51(3), 2013, is its Bayesian relative). Each point visited is measured in
//! trials until a Student t interval of the mean of its figures lies wholly on one side of the
//! bound (the SLO holds there, or fails), or until `max_trials` leaves it undecided: at the
//! edge, within the noise of the bound. The interval is looked at after `min_trials` and then
//! each time the count doubles, and each look is tested at the family's level divided among
//! all looks of all points the search can make (Bonferroni), so with probability at least
//! `level` no verdict is wrong and the boundary lies in the interval returned.
//!
//! Positions run from 0 (the tightest setting) to 1 (the loosest: no limit at all, or the
//! range's loose end); the caller maps them to settings (linearly, or logarithmically for a
//! range spanning decades) and measures. The figure is assumed to worsen as the setting
//! loosens (it may stay flat); where it does not, the bisection finds a crossing of the
//! bound, not necessarily the loosest one. A SLO that holds even at the loose end, or fails
//! even at the tight end, is reported as exactly that: no boundary is invented. So is a
//! search whose every verdict is at the edge.
//!
//! The search does no measuring and keeps no clock: [`BoundarySearch::step`] says which
//! position to measure, [`BoundarySearch::record`] takes each trial's figure.

use serde::{Deserialize, Serialize};

use crate::degradation::Direction;
use crate::error::{invalid, StatsError};
use crate::normal::student_t_quantile;

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
    /// Trials after which a point still undecided is left at the edge.
    pub max_trials: usize,
    /// The probability that every verdict is right, so that the boundary lies in its
    /// interval (such as 0.95).
    pub level: f64,
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
    /// the bound (it is left as soon as its figures show that).
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
        /// only at the edge even there).
        low: f64,
        /// The interval's loose end: the tightest position where it fails (1 when it was
        /// only at the edge even there).
        high: f64,
        /// The loosest position at which the SLO was shown to hold: the setting to
        /// recommend. `None` when it held nowhere beyond doubt (the tight end was at the
        /// edge).
        recommended: Option<f64>,
        /// Where the mean figure crosses the bound, interpolated between the points beside
        /// it (within `[low, high]`).
        estimate: f64,
        /// Whether the interval is as narrow as the resolution asked. When not, the figure
        /// stays within the noise of the bound across the interval (more trials per point,
        /// not more points, would narrow it), or the search visited as many points as its
        /// error budget allows.
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
    judge: Judge,
}

impl BoundarySearch {
    /// A search; refuses a configuration that cannot end or cannot be trusted.
    pub fn new(config: SearchConfig) -> Result<BoundarySearch, StatsError> {
        let c = &config;
        if !c.bound.is_finite() {
            return Err(invalid("bound", c.bound, "a finite number"));
        }
        if !(c.resolution > 0.0 && c.resolution < 1.0) {
            return Err(invalid(
                "resolution",
                c.resolution,
                "a fraction of the range between 0 and 1",
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
            judge: Judge::new(&config, max_points(config.resolution)),
            config,
            visited: Vec::new(),
            current: None,
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

    /// At least how many trials a grid at the same resolution would have taken: each of its
    /// points as many as the fewest any point here needed for its verdict (a grid judges
    /// each point by the same test, in a larger family, so never with fewer). `None` before
    /// any point has a verdict.
    pub fn grid_trials_at_least(&self) -> Option<usize> {
        let fewest = self
            .visited
            .iter()
            .filter(|v| !matches!(v.verdict, Verdict::Measuring))
            .map(|v| v.figures.len())
            .min()?;
        Some(grid_points(self.config.resolution) * fewest)
    }

    /// What to measure next, or how the search ended.
    pub fn step(&mut self) -> Step {
        if let Some(i) = self.current {
            if self.visited[i].verdict == Verdict::Measuring {
                return Step::Measure(self.visited[i].position);
            }
        }
        self.current = None;
        match self.plan() {
            Ok(position) => {
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
        self.visited[i].verdict = self.judge.verdict(&self.visited[i].figures);
        Ok(())
    }

    /// The next position to visit, or the outcome when there is none.
    fn plan(&self) -> Result<f64, Outcome> {
        let verdict_at = |p: f64| {
            self.visited
                .iter()
                .find(|v| v.position == p)
                .map(|v| v.verdict)
        };
        // The loose end first: a SLO that holds there needs no limit at all.
        match verdict_at(1.0) {
            None => return Ok(1.0),
            Some(Verdict::Holds) => return Err(Outcome::HoldsEverywhere),
            _ => {}
        }
        match verdict_at(0.0) {
            None => return Ok(0.0),
            Some(Verdict::Fails) => return Err(Outcome::FailsEverywhere),
            _ => {}
        }
        let holds = self.loosest(Verdict::Holds);
        let lo = holds.unwrap_or(0.0);
        let hi = self.tightest(Verdict::Fails).unwrap_or(1.0);
        if hi - lo <= self.config.resolution {
            return Err(self.boundary(lo, hi, holds, true));
        }
        if self.visited.len() >= max_points(self.config.resolution) {
            return Err(self.boundary(lo, hi, holds, false));
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
        if b - a <= self.config.resolution / 4.0 {
            return Err(self.boundary(lo, hi, holds, false));
        }
        Ok((a + b) / 2.0)
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

    /// The outcome for the interval `[lo, hi]`, with the crossing interpolated between the
    /// visited points nearest the bound on either side.
    fn boundary(&self, lo: f64, hi: f64, recommended: Option<f64>, resolved: bool) -> Outcome {
        let excess = |v: &Visited| self.excess(v.mean());
        let mut inside: Vec<&Visited> = self
            .visited
            .iter()
            .filter(|v| v.position >= lo && v.position <= hi)
            .collect();
        inside.sort_by(|a, b| a.position.total_cmp(&b.position));
        let crossing = inside.windows(2).find_map(|w| {
            let (e0, e1) = (excess(w[0]), excess(w[1]));
            (e0 <= 0.0 && e1 > 0.0)
                .then(|| w[0].position + (w[1].position - w[0].position) * (-e0 / (e1 - e0)))
        });
        Outcome::Boundary {
            low: lo,
            high: hi,
            recommended,
            estimate: crossing.unwrap_or((lo + hi) / 2.0).clamp(lo, hi),
            resolved,
        }
    }
}

/// How far `figure` is on the bad side of the bound (negative: on the good side).
fn excess(c: &SearchConfig, figure: f64) -> f64 {
    match c.direction {
        Direction::Lower => figure - c.bound,
        Direction::Higher => c.bound - figure,
    }
}

/// The sequential test each point's figures go through.
#[derive(Debug, Clone)]
struct Judge {
    config: SearchConfig,
    /// The one-sided tail probability each look is tested at: the family's error, split
    /// over both sides of the bound and over every look of every point (Bonferroni).
    look_alpha: f64,
}

impl Judge {
    /// A judge for a family of at most `points` points.
    fn new(config: &SearchConfig, points: usize) -> Judge {
        let looks = (points * looks_per_point(config)) as f64;
        Judge {
            config: config.clone(),
            look_alpha: (1.0 - config.level) / looks / 2.0,
        }
    }

    /// The verdict of `figures` at a look, or `Measuring` between looks.
    fn verdict(&self, figures: &[f64]) -> Verdict {
        let n = figures.len();
        if !is_look(n, &self.config) {
            return Verdict::Measuring;
        }
        let mean = figures.iter().sum::<f64>() / n as f64;
        let var = figures.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let half =
            student_t_quantile(1.0 - self.look_alpha, (n - 1) as f64) * (var / n as f64).sqrt();
        // The interval of the excess over the bound: above 0 is worse than the bound.
        let e = excess(&self.config, mean);
        if e + half <= 0.0 {
            Verdict::Holds
        } else if e - half > 0.0 {
            Verdict::Fails
        } else if n >= self.config.max_trials || e.abs() < self.half_at_max(var) {
            // Undecided, and (as far as its figures tell) `max_trials` would not decide it
            // either: more trials here are spent on a point that narrows nothing.
            Verdict::Edge
        } else {
            Verdict::Measuring
        }
    }

    /// The interval's half-width at `max_trials` for a figure of variance `var`.
    fn half_at_max(&self, var: f64) -> f64 {
        let m = self.config.max_trials;
        student_t_quantile(1.0 - self.look_alpha, (m - 1) as f64) * (var / m as f64).sqrt()
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

    /// A victim whose figure grows linearly with the position, crossing `bound` at
    /// `boundary`, with normal noise of `sd`.
    struct Victim {
        boundary: f64,
        slope: f64,
        sd: f64,
    }

    impl Victim {
        fn figure(&self, position: f64, bound: f64, rng: &mut impl Rng) -> f64 {
            // Box-Muller from two uniforms: a normal deviate without another dependency.
            let (u1, u2): (f64, f64) = (rng.gen::<f64>().max(1e-300), rng.gen());
            let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            bound + self.slope * (position - self.boundary) + self.sd * z
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
        SearchConfig {
            bound: 10.0,
            ..SearchConfig::default()
        }
    }

    #[test]
    fn the_boundary_lies_in_its_interval_for_at_least_95_percent_of_seeds_in_fewer_trials_than_a_grid(
    ) {
        for sd in [0.5, 2.0] {
            let c = config();
            let (mut covered, mut trials, mut grid_trials) = (0, 0, 0);
            let seeds: usize = 300;
            for seed in 0..seeds {
                let mut rng = seeded(1_000 + seed as u64);
                let victim = Victim {
                    boundary: rng.gen_range(0.1..0.9),
                    slope: 20.0,
                    sd,
                };
                let (outcome, n) = search(&victim, &c, seed as u64);
                trials += n;
                grid_trials += grid(&victim, &c, seed as u64 + 5_000);
                match outcome {
                    Outcome::Boundary { low, high, .. } => {
                        covered += usize::from(low <= victim.boundary && victim.boundary <= high)
                    }
                    other => panic!("sd {sd}, seed {seed}: {other:?}"),
                }
            }
            assert!(
                covered * 100 >= seeds * 95,
                "sd {sd}: covered {covered} of {seeds}"
            );
            assert!(
                trials < grid_trials,
                "sd {sd}: {trials} trials against a grid's {grid_trials}"
            );
        }
    }

    /// A grid at `c.resolution`, every point judged in a family of the grid's size: the
    /// trials it takes.
    fn grid(victim: &Victim, c: &SearchConfig, seed: u64) -> usize {
        let mut rng = seeded(seed);
        let points = grid_points(c.resolution);
        let judge = Judge::new(c, points);
        let mut trials = 0;
        for i in 0..points {
            let p = (i as f64 * c.resolution).min(1.0);
            let mut figures = Vec::new();
            loop {
                figures.push(victim.figure(p, c.bound, &mut rng));
                if judge.verdict(&figures) != Verdict::Measuring {
                    break;
                }
            }
            trials += figures.len();
        }
        trials
    }

    #[test]
    fn a_narrow_interval_is_resolved_and_the_estimate_lies_in_it() {
        let c = config();
        let victim = Victim {
            boundary: 0.37,
            slope: 40.0,
            sd: 0.2,
        };
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
        let victim = Victim {
            boundary: 1.8,
            slope: 20.0,
            sd: 1.0,
        };
        assert_eq!(search(&victim, &config(), 1).0, Outcome::HoldsEverywhere);
    }

    #[test]
    fn an_slo_that_fails_at_the_tight_end_is_said_to_and_no_boundary_is_invented() {
        let victim = Victim {
            boundary: -0.8,
            slope: 20.0,
            sd: 1.0,
        };
        assert_eq!(search(&victim, &config(), 1).0, Outcome::FailsEverywhere);
    }

    #[test]
    fn a_figure_within_noise_of_the_bound_ends_unresolved_at_the_edge() {
        let victim = Victim {
            boundary: 0.5,
            slope: 0.5,
            sd: 5.0,
        };
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
                    .record(20.0 - 20.0 * p + 0.1 * (s.trials() % 3) as f64)
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
}
