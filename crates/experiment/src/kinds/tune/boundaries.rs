//! Each search's answer as numbers ([`isobench_results::tune::Boundary`]): the recommended
//! setting, the boundary interval's ends and the cost to the aggressor, in the knob's own
//! number, so `compare` reads two runs' answers without reading their words.

use isobench_results::tune::{boundaries_section, Boundary};
use isobench_results::Section;
use isobench_stats::BoundaryOutcome;

use super::{cost_at, recommended_step, setting_at, Search, TuneSettings};

/// The section [`isobench_results::tune::BOUNDARIES`] of `searches`.
pub(super) fn section(set: &TuneSettings, searches: &[Search]) -> Section {
    let rows: Vec<Boundary> = searches.iter().map(|x| boundary(set, x)).collect();
    boundaries_section(&rows)
}

fn boundary(set: &TuneSettings, x: &Search) -> Boundary {
    let k = &set.knobs[x.knob];
    let mut b = Boundary {
        stressor: x.stressor.clone(),
        knob: k.name(),
        outcome: String::new(),
        recommended: None,
        low: None,
        high: None,
        cost: None,
    };
    b.outcome = match &x.outcome {
        None => match x.bracket() {
            Some((holds, fails)) => {
                b.low = Some(k.setting(holds));
                b.high = Some(k.setting(fails));
                b.recommended = Some(k.setting(holds));
                b.cost = cost_at(x, holds);
                "bracketed so far".into()
            }
            None => "still measuring".into(),
        },
        Some(BoundaryOutcome::HoldsEverywhere) => "holds even at the loose end".into(),
        Some(BoundaryOutcome::FailsEverywhere) => "fails even at the tight end".into(),
        Some(BoundaryOutcome::Boundary {
            low,
            high,
            recommended,
            resolved,
            ..
        }) => {
            b.low = Some(setting_at(k, *low));
            b.high = Some(setting_at(k, *high));
            if let Some(g) = recommended.map(recommended_step) {
                b.recommended = Some(k.setting(g));
                b.cost = cost_at(x, g);
            }
            match (recommended, resolved) {
                (None, _) => "held nowhere beyond doubt".into(),
                (Some(_), true) => "boundary".into(),
                (Some(_), false) => "boundary, wider than the resolution asked".into(),
            }
        }
    };
    b
}
