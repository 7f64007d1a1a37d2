//! `scale`: the number of misbehaving neighbours grown from 1 to N, the victims' degradation
//! at each N with its interval (paper 000, figure 9).
//!
//! Each N is a condition of the matrix engine in which the first N aggressors of the plan
//! (in file order, a `count` pool's `NAME-1..NAME-N` first to last) run the same stressor and
//! the others stay idle. Every count is measured with paired trials: the on/off design would
//! freeze and thaw all N aggressors at every switch, which takes longer the more there are,
//! so the windows at large N would not compare with those at small N. The kind adds the
//! curve: one row per N.

use isobench_results::{Column, Value};
use serde::{Deserialize, Serialize};

use super::curve::{analysis_with_curve, Curve, Point};
use super::kind::{ExperimentKind, NothingToRun};
use super::matrix::{stressor_conditions, Variant};
use crate::cells::{Analysis, Inputs};
use crate::fields::Fields;
use crate::plan::{Condition, Design, Platform};
use crate::resolver::Resolver;
use crate::scenario::{Role, Scenario};

/// The `scale` kind.
pub struct Scale;

/// What a `[scale]` table says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScaleSettings {
    /// The id (label or name) of the `[[stressor]]` the active aggressors run.
    pub stressor: String,
    /// How many aggressors run it, one condition each, increasing.
    pub counts: Vec<u32>,
}

impl ScaleSettings {
    fn of(v: &serde_json::Value) -> Option<ScaleSettings> {
        serde_json::from_value(v.clone()).ok()
    }

    /// How many aggressors condition `c` runs, when it is one of these settings'.
    fn count_of(&self, c: &Condition) -> Option<u32> {
        self.counts
            .iter()
            .copied()
            .find(|&n| Self::condition_id(&c.stressor_id, c.intensity, n) == c.id)
    }

    /// The condition id of `n` aggressors running stressor `id` at `intensity`.
    fn condition_id(id: &str, intensity: u8, n: u32) -> String {
        format!("{id}@{intensity}:aggressors={n}")
    }
}

/// 1, 2, 4, ... up to `n`, and `n` itself.
fn doubling(n: u32) -> Vec<u32> {
    let mut out: Vec<u32> = std::iter::successors(Some(1u32), |k| k.checked_mul(2))
        .take_while(|&k| k < n)
        .collect();
    out.push(n);
    out
}

impl ExperimentKind for Scale {
    fn name(&self) -> &'static str {
        "scale"
    }

    fn help(&self) -> &'static str {
        "1..N aggressor tenants running the same stressor: the victims' degradation at each N"
    }

    fn settings(&self, f: &mut Fields<'_, '_>, sc: &Scenario) -> serde_json::Value {
        let ids: Vec<&str> = sc.stressors.iter().map(|s| s.id.as_str()).collect();
        let aggressors = sc.tenants_with(Role::Aggressor).count() as u32;
        // Every key is read first, so a problem with one leaves none of the others unknown.
        let stressor = f.string("stressor");
        let counts = f.int_list("counts", (1, i64::from(u32::MAX)));
        let stressor = match stressor {
            Some(s) => {
                if !ids.contains(&s.get_ref().as_str()) {
                    f.error(
                        s.span().into(),
                        "stressor",
                        format!("no [[stressor]] has the id `{}`", s.get_ref()),
                        &ids.join(", "),
                        format!(
                            "write stressor = \"{}\", or add a [[stressor]] with that name or label",
                            ids.first().copied().unwrap_or("cpu")
                        ),
                    );
                    None
                } else {
                    Some(s.into_inner())
                }
            }
            None if ids.len() == 1 => Some(ids[0].to_string()),
            None => {
                f.missing(
                    "stressor",
                    &format!("the id of a [[stressor]] of this file: {}", ids.join(", ")),
                    &format!("\"{}\"", ids.first().copied().unwrap_or("cpu")),
                );
                None
            }
        };
        let counts = match counts {
            None => doubling(aggressors.max(1)),
            Some((span, counts)) => {
                let sorted = f.increasing(
                    span,
                    "counts",
                    "the counts",
                    "distinct numbers of aggressors, increasing",
                    &counts,
                );
                if let Some(&too_many) = sorted.iter().find(|&&n| n > i64::from(aggressors)) {
                    f.error(
                        span,
                        "counts",
                        format!(
                            "{too_many} aggressors asked for, but the scenario declares {aggressors}"
                        ),
                        &format!("1..={aggressors}"),
                        format!(
                            "declare more aggressors (e.g. a [[tenant]] with role = \"aggressor\" \
                             and count = {too_many}), or leave out counts above {aggressors}"
                        ),
                    );
                }
                sorted.into_iter().map(|n| n as u32).collect()
            }
        };
        let Some(stressor) = stressor else {
            return serde_json::Value::Null;
        };
        serde_json::to_value(ScaleSettings { stressor, counts }).expect("settings serialize")
    }

    /// The chosen stressor once per count, run by that many aggressors; paired trials.
    fn conditions(&self, r: &mut Resolver, platform: Platform) -> Vec<Condition> {
        let Some(set) = ScaleSettings::of(&r.scenario().settings) else {
            return Vec::new();
        };
        let order: Vec<String> = r
            .scenario()
            .tenants_with(Role::Aggressor)
            .map(|t| t.name.clone())
            .collect();
        let mut conditions = stressor_conditions(r, platform, |s| {
            if s.id != set.stressor {
                return Vec::new();
            }
            let intensity = s.intensities.first().copied().unwrap_or(100);
            set.counts
                .iter()
                .map(|&n| Variant {
                    id: ScaleSettings::condition_id(&s.id, intensity, n),
                    intensity,
                    params: s.params.clone(),
                })
                .collect()
        });
        for c in &mut conditions {
            let n = set.count_of(c).unwrap_or(0) as usize;
            let active: Vec<&String> = order.iter().take(n).collect();
            c.assignments.retain(|t, _| active.contains(&t));
            c.design = Design::Paired;
            c.design_reason = format!(
                "paired: {n} aggressor(s) run; freezing and thawing them all at every switch \
                 takes longer the more there are, so on/off windows would not compare across \
                 counts"
            );
        }
        conditions
    }

    fn nothing_to_run(&self) -> NothingToRun {
        NothingToRun {
            field: "scale.stressor",
            problem: "the stressor of [scale] cannot run on this platform",
            allowed: "a stressor this platform supports (`isobench list`)",
            fix: "choose another stressor, or run as root for cgroup tenants",
        }
    }

    fn analyze(&self, i: Inputs<'_>) -> Analysis {
        analysis_with_curve(i, ScaleSettings::of, |plan, set| {
            let (first, last) = (
                set.counts.first().copied().unwrap_or(1),
                set.counts.last().copied().unwrap_or(1),
            );
            Curve {
                id: "scale",
                title: format!(
                    "Victims with {first}..{last} aggressor tenants running {}",
                    set.stressor
                ),
                x: Column::text("aggressors"),
                points: plan
                    .conditions
                    .iter()
                    .filter_map(|c| {
                        Some(Point {
                            x: Value::number(f64::from(set.count_of(c)?), 0),
                            condition: c.id.clone(),
                        })
                    })
                    .collect(),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_double_up_to_the_pool() {
        assert_eq!(doubling(1), vec![1]);
        assert_eq!(doubling(6), vec![1, 2, 4, 6]);
        assert_eq!(doubling(64), vec![1, 2, 4, 8, 16, 32, 64]);
    }
}
