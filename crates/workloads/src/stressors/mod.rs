//! The stressor table: every misbehaviour, one file each.

use crate::Stressor;

mod cache;
mod cpu;
mod disk;
mod forkbomb;
mod membw;
mod memhog;
mod net_rx;
mod net_tx;

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
];
