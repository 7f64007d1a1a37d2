//! `matrix`: every probe under every stressor at each intensity against a baseline; the
//! degradation of the victims and of the aggressors (papers 000 and 001).
//!
//! Planning makes one condition per stressor and intensity, assigning that stressor to every
//! aggressor; [`schedule`] orders the trials in blocks of one condition beside their paired
//! baseline blocks; [`analysis`] compares each victim metric under each condition with its
//! baseline, and each aggressor's own rate beside the probes with its rate alone.

pub mod analysis;
pub mod schedule;

use isobench_workloads::ParamValues;

use super::kind::ExperimentKind;
use crate::cells::{Analysis, Inputs};
use crate::plan::{Assignment, Condition, Design, Plan, Platform};
use crate::resolver::Resolver;
use crate::scenario::{DesignChoice, Role, StressorSpec, UnsafeOnHost};

/// The `matrix` kind.
pub struct Matrix;

impl ExperimentKind for Matrix {
    fn name(&self) -> &'static str {
        "matrix"
    }

    fn help(&self) -> &'static str {
        "every probe under every stressor vs baseline; degradation of victim and aggressor"
    }

    /// Each supported stressor at each of its intensities, with its design; stressors nothing
    /// would contain are refused, skipped or capped on the host.
    fn conditions(&self, r: &mut Resolver, platform: Platform) -> Vec<Condition> {
        stressor_conditions(r, platform, |s| {
            s.intensities.iter().map(|&i| Variant::at(s, i)).collect()
        })
    }
}

/// One condition a kind makes of a scenario stressor: its id, intensity and parameters.
pub(crate) struct Variant {
    /// Condition id (`cpu@100`, `disk:blocks=4`).
    pub id: String,
    /// Intensity 0..=100.
    pub intensity: u8,
    /// Parameters.
    pub params: ParamValues,
}

impl Variant {
    /// Stressor `s` at intensity `i`, with its parameters (`cpu@100`).
    pub(crate) fn at(s: &StressorSpec, i: u8) -> Variant {
        Variant {
            id: format!("{}@{i}", s.id),
            intensity: i,
            params: s.params.clone(),
        }
    }
}

/// The matrix's analysis of a run, to which `more` adds with the plan and the kind's
/// settings (read by `of`) when both are there: how a kind that adds to the matrix's cells
/// analyses.
pub(crate) fn analysis_with<S>(
    i: Inputs<'_>,
    of: impl FnOnce(&serde_json::Value) -> Option<S>,
    more: impl FnOnce(&mut Analysis, &Plan, S),
) -> Analysis {
    let mut a = analysis::analyze(i.run, i.plan, i.stored, i.settings);
    if let Some((plan, set)) = i.plan.and_then(|p| Some((p, of(&p.settings)?))) {
        more(&mut a, plan, set);
    }
    a
}

/// The conditions of the scenario's stressors, each given to every aggressor: `variants`
/// says which conditions a stressor makes (none leaves it out). Stressors that cannot run
/// here are reported to `r`; stressors nothing would contain are refused, skipped or capped
/// on the host, as the scenario says.
pub(crate) fn stressor_conditions(
    r: &mut Resolver,
    platform: Platform,
    variants: impl Fn(&StressorSpec) -> Vec<Variant>,
) -> Vec<Condition> {
    let (sc, host) = (r.scenario(), r.host());
    let src = &sc.source;
    let mut conditions = Vec::new();
    let mut skipped = Vec::new();
    let aggressors: Vec<&str> = sc
        .tenants
        .iter()
        .filter(|t| t.role == Role::Aggressor)
        .map(|t| t.name.as_str())
        .collect();
    for (si, s) in sc.stressors.iter().enumerate() {
        let made = variants(s);
        if made.is_empty() {
            continue;
        }
        let st = isobench_workloads::stressor(&s.name).expect("validated name");
        if let Err(u) = st.supported(&host.env) {
            r.unsupported("stressor", si, &s.id, &s.name, s.name_span, &u);
            continue;
        }
        let aggressive = st.aggressive();
        let mut capped = false;
        if aggressive && !platform.capabilities().contains_aggressors {
            match sc.unsafe_on_host {
                UnsafeOnHost::Skip => {
                    skipped.push(s.id.clone());
                    continue;
                }
                UnsafeOnHost::Refuse => {
                    r.error(src.error(
                        s.name_span,
                        format!("stressor[{si}].name"),
                        format!(
                            "{} can take the whole machine down, and on the host platform \
                                 nothing contains it",
                            s.name
                        ),
                        "on the host platform: stressors other than forkbomb, memhog and disk",
                        "run as root so tenants are cgroups, or set unsafe_on_host = \"skip\" \
                             (leave it out) or \"allow\" (run it capped)",
                    ));
                    continue;
                }
                UnsafeOnHost::Allow => capped = true,
            }
        }
        for v in made {
            let (design, design_reason) = choose_design(sc.trial.design, st, &v.params);
            let run = Assignment {
                stressor: s.name.clone(),
                intensity: v.intensity,
                params: v.params.clone(),
            };
            conditions.push(Condition {
                assignments: run.to_each(aggressors.iter().copied()),
                id: v.id,
                stressor_id: s.id.clone(),
                name: s.name.clone(),
                class: st.class(),
                intensity: v.intensity,
                params: v.params,
                aggressive,
                capped,
                design,
                design_reason,
                limits: Default::default(),
                candidate: false,
                window: None,
            });
        }
    }
    if !skipped.is_empty() {
        let why = if platform.capabilities().enforces_limits {
            format!(
                "left out on the {platform} platform (it cannot bound everything they exhaust): \
                 {}; the cgroup platform includes them",
                skipped.join(", ")
            )
        } else {
            format!(
                "left out on the host platform (nothing would contain them): {}; run as root \
                 for cgroup tenants to include them",
                skipped.join(", ")
            )
        };
        r.note(why);
    }
    conditions
}

/// The design of a stressor's conditions, and why: on/off when its effect stops while its
/// tenant is frozen, paired trials when something outlasts the freeze (memory held, dirty
/// pages being written back), unless the scenario forces one.
fn choose_design(
    choice: DesignChoice,
    st: &dyn isobench_workloads::Stressor,
    params: &ParamValues,
) -> (Design, String) {
    let lingering = st.lingering_effect(params);
    match (choice, lingering) {
        (DesignChoice::Paired, _) => (Design::Paired, "paired design asked for".into()),
        (DesignChoice::OnOff, Some(l)) => (
            Design::OnOff,
            format!("on/off asked for, although {l} while it is frozen"),
        ),
        (DesignChoice::OnOff, None) => (Design::OnOff, "on/off asked for".into()),
        (DesignChoice::Auto, Some(l)) => (
            Design::Paired,
            format!("paired: {l} while it is frozen, so on/off would miss it"),
        ),
        (DesignChoice::Auto, None) => (
            Design::OnOff,
            "on/off: its effect stops while its tenant is frozen".into(),
        ),
    }
}
