//! `net-rx` stressor (being written).

use crate::params::{ParamSpec, ParamValues};
use crate::{Class, Env, StressCtx, StressReport, Stressor, Unsupported};

/// The `net-rx` stressor.
pub struct NetRx;

impl Stressor for NetRx {
    fn name(&self) -> &'static str {
        "net-rx"
    }
    fn help(&self) -> &'static str {
        "(being written)"
    }
    fn class(&self) -> Class {
        Class::Net
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
