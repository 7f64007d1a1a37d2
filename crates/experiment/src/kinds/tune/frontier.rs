//! Knobs against the same stressor compared at equal aggressor throughput: at the
//! throughput one knob's recommended setting leaves the aggressor, the victim's figure on
//! that knob beside its figure on another knob's frontier there (interpolated over the
//! points that knob's search visited, piecewise linear in throughput, never extrapolated).
//! A finding then reads "for the same cpu@100 throughput (12,300 ops/s), batch.weight keeps
//! lat_p99_ms 2.1x lower than batch.cpus".

use isobench_common::Direction;
use isobench_results::{Column, Section, Value};
use isobench_stats::BoundaryOutcome;

use super::{at_step, mean, recommended_step, Search, Seen, TuneSettings};

/// The prefix of a stressor's section of these comparisons (`tune-knobs-cpu@100`).
pub const PREFIX: &str = "tune-knobs-";

/// Figures closer than this ratio read as the same.
const SAME: f64 = 1.01;

/// Per stressor with two knobs or more, the section comparing them at equal aggressor
/// throughput.
pub(super) fn sections(set: &TuneSettings, searches: &[Search]) -> Vec<Section> {
    let mut stressors: Vec<&str> = Vec::new();
    for x in searches {
        if !stressors.contains(&x.stressor.as_str()) {
            stressors.push(&x.stressor);
        }
    }
    stressors
        .into_iter()
        .filter_map(|st| {
            let of: Vec<&Search> = searches.iter().filter(|x| x.stressor == st).collect();
            (of.len() > 1).then(|| section(set, st, &of))
        })
        .collect()
}

/// A knob's frontier: (aggressor throughput, the victim's mean figure) at each point its
/// search visited with both, in increasing throughput.
fn frontier(x: &Search) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = x
        .seen
        .iter()
        .filter_map(|p| Some((p.aggressor?, p.mean()?)))
        .filter(|(a, f)| a.is_finite() && f.is_finite())
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    pts
}

/// The figure on `frontier` at throughput `t`, linear between the two points around it;
/// `None` outside the throughputs it covers. Points of equal throughput are averaged.
pub(crate) fn interpolate(frontier: &[(f64, f64)], t: f64) -> Option<f64> {
    let (first, last) = (frontier.first()?, frontier.last()?);
    if !(first.0..=last.0).contains(&t) {
        return None;
    }
    let at: Vec<f64> = frontier.iter().filter(|p| p.0 == t).map(|p| p.1).collect();
    if let Some(m) = mean(&at) {
        return Some(m);
    }
    let (a, b) = frontier
        .windows(2)
        .map(|w| (w[0], w[1]))
        .find(|(a, b)| a.0 < t && t < b.0)?;
    Some(a.1 + (t - a.0) / (b.0 - a.0) * (b.1 - a.1))
}

/// `12,300`: a throughput rounded, its thousands separated.
fn thousands(v: f64) -> String {
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 {
        out.insert(0, '-');
    }
    out
}

/// What the two figures say, the better named first: "keeps lat_p99_ms 2.1x lower than",
/// or the difference when a ratio of them means nothing (a figure at or below zero).
fn finding(metric: &str, better: Direction, a: (&str, f64), b: (&str, f64)) -> String {
    let a_better = match better {
        Direction::Lower => a.1 <= b.1,
        Direction::Higher => a.1 >= b.1,
    };
    let ((good, g), (bad, w)) = if a_better { (a, b) } else { (b, a) };
    let way = match better {
        Direction::Lower => "lower",
        Direction::Higher => "higher",
    };
    if g > 0.0 && w > 0.0 {
        let ratio = (g / w).max(w / g);
        if ratio < SAME {
            return format!("{good} and {bad} keep {metric} the same (within 1%)");
        }
        format!("{good} keeps {metric} {ratio:.1}x {way} than {bad}")
    } else {
        format!(
            "{good} keeps {metric} {:.2} {way} than {bad}",
            (g - w).abs()
        )
    }
}

/// One stressor's knobs compared: a row per knob with a recommended setting and per other
/// knob, at the throughput that setting leaves the aggressor.
fn section(set: &TuneSettings, stressor: &str, searches: &[&Search]) -> Section {
    let metric = &set.figure();
    let (_, better) = set.slo.bound();
    let mut s = Section::new(
        &format!("{PREFIX}{stressor}"),
        format!("Knobs at equal aggressor throughput against {stressor}"),
        vec![
            Column::text("knob"),
            Column::text("recommended"),
            Column::unit("aggressor throughput", "ops/s"),
            Column::text(metric),
            Column::text("other knob"),
            Column::text(&format!("{metric} on the other knob")),
        ],
    );
    for a in searches {
        let ka = &set.knobs[a.knob];
        let name = ka.name();
        let rec = match &a.outcome {
            Some(BoundaryOutcome::Boundary {
                recommended: Some(r),
                ..
            }) => Some(recommended_step(*r)),
            _ => None,
        };
        // At a fitted recommendation no point was measured: both figures are read between
        // the points beside it, as the answer table reads them.
        let here = rec.and_then(|g| {
            let t = at_step(&a.seen, g, |p| p.aggressor)?;
            let f = at_step(&a.seen, g, Seen::mean)?;
            Some((g, t, f))
        });
        for b in searches.iter().filter(|b| b.knob != a.knob) {
            let other = set.knobs[b.knob].name();
            let Some((g, t, fa)) = here else {
                s.notes.push(format!(
                    "{name} against {other}: not comparable: {name} has no recommended \
                     setting within the points its search measured"
                ));
                continue;
            };
            let fb = interpolate(&frontier(b), t);
            s.push(vec![
                Value::text_of(&name),
                Value::text_of(ka.value_text(g)),
                Value::number(t, 0),
                Value::number(fa, 2),
                Value::text_of(&other),
                fb.map_or(Value::Empty, |f| Value::number(f, 2)),
            ]);
            s.notes.push(match fb {
                Some(fb) => format!(
                    "for the same {stressor} throughput ({} ops/s, {name} at {}), {}",
                    thousands(t),
                    ka.value_text(g),
                    finding(metric, better, (&name, fa), (&other, fb))
                ),
                None => format!(
                    "{name} against {other}: not comparable: {other}'s frontier does not reach \
                     {} ops/s (its points span {}), and it is not extrapolated",
                    thousands(t),
                    span_text(&frontier(b))
                ),
            });
        }
    }
    s.notes.push(format!(
        "The victim's mean {metric} at a knob's recommended setting, beside the other knob's \
         at the same aggressor throughput: linear between the two points of its search around \
         that throughput. Point figures, without an interval."
    ));
    s
}

/// `980..1,000 ops/s`, or `no point with a throughput`.
fn span_text(frontier: &[(f64, f64)]) -> String {
    match (frontier.first(), frontier.last()) {
        (Some(a), Some(b)) => format!("{}..{} ops/s", thousands(a.0), thousands(b.0)),
        _ => "no point with a throughput".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{KnobRange, Seen, Slo, GRID};
    use super::*;
    use isobench_stats::Verdict;

    /// A search of knob `knob` that recommends the middle of its range, with a point at
    /// each (grid step, aggressor throughput, figure).
    fn search(knob: usize, points: &[(usize, f64, f64)]) -> Search {
        Search {
            stressor: "cpu@100".into(),
            knob,
            outcome: Some(BoundaryOutcome::Boundary {
                low: 0.5,
                high: 0.6,
                recommended: Some(0.5),
                estimate: 0.55,
                resolved: true,
            }),
            next: None,
            seen: points
                .iter()
                .map(|&(grid, a, f)| Seen {
                    grid,
                    figures: vec![f - 0.5, f + 0.5],
                    verdict: Verdict::Holds,
                    aggressor: Some(a),
                })
                .collect(),
            trials: 6,
            grid_trials: None,
            trial_secs: 12.0,
        }
    }

    #[test]
    fn knobs_are_compared_at_the_throughput_of_each_recommendation() {
        let knob = |key: &str, tight: f64, loose: f64| KnobRange {
            tenant: "batch".into(),
            key: key.into(),
            tight,
            loose,
            log: false,
        };
        let set = TuneSettings {
            probe: "service".into(),
            victim: "service".into(),
            metric: "lat_p99_ms".into(),
            slo: Slo::Max { bound: 10.0 },
            resolution: 0.1,
            min_trials: 3,
            max_trials: 12,
            level: 0.95,
            pool_variance: true,
            knobs: vec![knob("cpus", 0.05, 1.0), knob("weight", 1.0, 10000.0)],
        };
        let half = GRID / 2;
        let cpus = search(
            0,
            &[(0, 100.0, 5.0), (half, 500.0, 8.0), (GRID, 1000.0, 20.0)],
        );
        let weight = search(
            1,
            &[(0, 200.0, 2.0), (half, 600.0, 4.0), (GRID, 1000.0, 12.0)],
        );
        let s = &sections(&set, &[cpus.clone(), weight])[0];
        assert_eq!(s.id, "tune-knobs-cpu@100");
        // At the quota's 500 ops/s the weight's frontier reads 2 + 300/400 x 2 = 3.5 ms; at
        // the weight's 600 ops/s the quota's reads 8 + 100/500 x 12 = 10.4 ms.
        assert_eq!(
            s.text_rows(),
            [
                ["batch.cpus", "0.53", "500", "8.00", "batch.weight", "3.50"],
                ["batch.weight", "5001", "600", "4.00", "batch.cpus", "10.40"],
            ]
        );
        assert_eq!(
            s.notes[0],
            "for the same cpu@100 throughput (500 ops/s, batch.cpus at 0.53), batch.weight \
             keeps lat_p99_ms 2.3x lower than batch.cpus"
        );
        assert_eq!(
            s.notes[1],
            "for the same cpu@100 throughput (600 ops/s, batch.weight at 5001), batch.weight \
             keeps lat_p99_ms 2.6x lower than batch.cpus"
        );
        // A weight whose points stop short of the quota's throughput is not extrapolated.
        let short = search(1, &[(0, 700.0, 2.0), (GRID, 1000.0, 12.0)]);
        let s = &sections(&set, &[cpus.clone(), short])[0];
        assert!(
            s.notes[0].starts_with("batch.cpus against batch.weight: not comparable"),
            "{:?}",
            s.notes
        );
        assert!(
            sections(&set, &[cpus]).is_empty(),
            "one knob: nothing to compare"
        );
    }

    #[test]
    fn interpolation_is_linear_between_points_and_never_beyond() {
        let f = [(100.0, 10.0), (200.0, 30.0), (400.0, 40.0)];
        assert_eq!(interpolate(&f, 150.0), Some(20.0));
        assert_eq!(interpolate(&f, 300.0), Some(35.0));
        assert_eq!(interpolate(&f, 100.0), Some(10.0));
        assert_eq!(interpolate(&f, 400.0), Some(40.0));
        assert_eq!(interpolate(&f, 99.0), None);
        assert_eq!(interpolate(&f, 401.0), None);
        assert_eq!(interpolate(&[], 1.0), None);
        // Two points at one throughput: their mean there, and each segment beside it.
        let f = [(100.0, 10.0), (200.0, 20.0), (200.0, 40.0), (300.0, 60.0)];
        assert_eq!(interpolate(&f, 200.0), Some(30.0));
        assert_eq!(interpolate(&f, 250.0), Some(50.0));
    }

    #[test]
    fn a_finding_names_the_better_knob_first() {
        assert_eq!(
            finding("p99", Direction::Lower, ("a", 21.0), ("b", 10.0)),
            "b keeps p99 2.1x lower than a"
        );
        assert_eq!(
            finding("rps", Direction::Higher, ("a", 300.0), ("b", 100.0)),
            "a keeps rps 3.0x higher than b"
        );
        assert_eq!(
            finding("p99", Direction::Lower, ("a", 10.0), ("b", 10.05)),
            "a and b keep p99 the same (within 1%)"
        );
        assert_eq!(
            finding("loss", Direction::Lower, ("a", -1.0), ("b", 2.0)),
            "a keeps loss 3.00 lower than b"
        );
        assert_eq!(thousands(12_300.4), "12,300");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(1_234_567.0), "1,234,567");
    }
}
