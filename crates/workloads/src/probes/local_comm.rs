//! `local-comm` (being written).

use crate::metric::{Aggregate, Direction, Metric, MetricSpec};
use crate::params::{ParamSpec, ParamValues};
use crate::{Class, Env, Probe, ProbeCtx, Unsupported};

/// The `local-comm` probe.
pub struct LocalComm;

impl Probe for LocalComm {
    fn name(&self) -> &'static str {
        "local-comm"
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
