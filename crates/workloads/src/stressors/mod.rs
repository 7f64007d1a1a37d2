//! The stressor table: every misbehaviour, one file each.
//!
//! Thread-based stressors share one run loop ([`pool`]): start gate, `while ctx.running()
//! { work(); ctx.add_ops(n) }`, join, report ops/s. The fork bomb manages processes itself.

use crate::Stressor;

mod cache;
mod command;
mod cpu;
mod disk;
mod forkbomb;
mod mapping;
mod membw;
mod memhog;
mod net_rx;
mod net_tx;
mod null;
mod pool;
mod udp;

/// Every stressor, in catalogue order.
pub const STRESSORS: &[&dyn Stressor] = &[
    &cpu::Cpu,
    &cache::Cache,
    &membw::Membw,
    &memhog::Memhog,
    &forkbomb::Forkbomb,
    &disk::Disk,
    &net_tx::NetTx,
    &net_rx::NetRx,
    &null::Null,
    &command::Command,
];
