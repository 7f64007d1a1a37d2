//! `null`: the aggressor tenant runs nothing. It waits until told to stop and reports zero
//! operations (stress-ng's `null` stressor is the model).
//!
//! It exists for A/A runs (the `null` preset: baseline against baseline): the engine drives
//! it exactly as a real stressor (tenant created, agent started, stressor started, frozen and
//! thawed, stopped), so whatever "degradation" a run reports under it is the false-positive
//! rate of the method itself, including the cost of the machinery around a stressor.

use crate::params::{ParamSpec, ParamValues};
use crate::{Class, Env, StressCtx, StressReport, Stressor, Unsupported};

/// The `null` stressor.
pub struct Null;

impl Stressor for Null {
    fn name(&self) -> &'static str {
        "null"
    }
    fn help(&self) -> &'static str {
        "Runs nothing: the aggressor tenant sleeps until the stressor is stopped and reports 0 \
         operations and no pressure. For A/A (null) runs, baseline against baseline, which \
         measure the false-positive rate of the whole method. Its class (cpu) is nominal: it \
         contends for nothing."
    }
    fn class(&self) -> Class {
        Class::Cpu
    }
    fn intensity_knob(&self) -> &'static str {
        "none: every intensity runs nothing (0 = idle, and so is 100)"
    }
    fn params(&self) -> &'static [ParamSpec] {
        &[]
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        Ok(())
    }
    fn run(&self, ctx: &StressCtx, _params: &ParamValues) -> anyhow::Result<StressReport> {
        let mut r = super::pool::idle_report(ctx, "nothing (null stressor)");
        r.notes = vec!["null: ran nothing".into()];
        Ok(r)
    }
}
