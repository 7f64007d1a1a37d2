//! `mem-bandwidth` (being written).

use crate::metric::{Aggregate, Direction, Metric, MetricSpec};
use crate::params::{ParamSpec, ParamValues};
use crate::{Class, Env, Probe, ProbeCtx, Unsupported};

/// The `mem-bandwidth` probe.
pub struct MemBandwidth;

impl Probe for MemBandwidth {
    fn name(&self) -> &'static str {
        "mem-bandwidth"
    }
    fn help(&self) -> &'static str {
        "(being written)"
    }
    fn class(&self) -> Class {
        Class::Memory
    }
    fn params(&self) -> &'static [ParamSpec] {
        &[]
    }
    fn metrics(&self) -> &'static [MetricSpec] {
        &[MetricSpec {
            name: "value",
            unit: "ns",
            direction: Direction::Lower,
            aggregate: Aggregate::Mean,
        }]
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        Err(Unsupported::new("not built yet"))
    }
    fn run(&self, _ctx: &ProbeCtx, _params: &ParamValues) -> anyhow::Result<Vec<Metric>> {
        anyhow::bail!("not built yet")
    }
}
