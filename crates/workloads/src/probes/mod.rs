//! The probe table: every victim micro-benchmark, one file each.

use crate::Probe;

mod cache_latency;
mod cm_common;
pub use cm_common::nominal_rate_window;
mod cm_proc;
mod command;
mod context_switch;
mod cpu_float;
mod cpu_int;
mod disk_io;
mod fork_latency;
mod http;
mod io_net;
mod local_comm;
mod mem_bandwidth;
mod mem_latency;
mod net_rtt;
mod net_throughput;
mod relay_ring;
mod series;
mod service;
mod syscall;

/// Every probe, in catalogue order.
pub const PROBES: &[&dyn Probe] = &[
    &cpu_int::CpuInt,
    &cpu_float::CpuFloat,
    &cache_latency::CacheLatency,
    &mem_latency::MemLatency,
    &mem_bandwidth::MemBandwidth,
    &local_comm::LocalComm,
    &disk_io::DiskIo,
    &net_throughput::NetThroughput,
    &net_rtt::NetRtt,
    &http::Http,
    &relay_ring::RelayRing,
    &syscall::Syscall,
    &fork_latency::ForkLatency,
    &context_switch::ContextSwitch,
    &service::Service,
    &command::Command,
];
