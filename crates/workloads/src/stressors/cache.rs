//! `cache` stressor (being written).

use crate::params::{ParamSpec, ParamValues};
use crate::{Class, Env, StressCtx, StressReport, Stressor, Unsupported};

/// The `cache` stressor.
pub struct Cache;

impl Stressor for Cache {
    fn name(&self) -> &'static str {
        "cache"
    }
    fn help(&self) -> &'static str {
        "(being written)"
    }
    fn class(&self) -> Class {
        Class::Cache
    }
    fn intensity_knob(&self) -> &'static str {
        "(being written)"
    }
    fn params(&self) -> &'static [ParamSpec] {
        &[]
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        Err(Unsupported::new("not built yet"))
    }
    fn run(&self, _ctx: &StressCtx, _params: &ParamValues) -> anyhow::Result<StressReport> {
        anyhow::bail!("not built yet")
    }
}
