//! `syscall`: the cost of entering and leaving the kernel.
//!
//! Three paths, lmbench-style: a raw `getppid` system call (no glibc caching, the minimal
//! kernel round trip), a 1-byte `read` of `/dev/zero` and a 1-byte `write` to `/dev/null`
//! (the file-descriptor path). Each is timed in batches of at least 100 us, repeated over
//! the budget; the reported figure is the median ns per call. With a window length, each
//! path's figure also comes as a series: the median ns per call of the batches whose
//! midpoint falls in each window (see `series`), over that path's share of the budget.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::time::Duration;

use isobench_common::median;
use serde::Deserialize;

use super::cm_common::{batch_iters, batch_series, time_batches_at};
use crate::metric::{Aggregate, Direction, Metric, MetricSpec};
use crate::params::{ParamKind, ParamSpec, ParamValues};
use crate::{Class, Env, Probe, ProbeCtx, Unsupported};

/// The `syscall` probe.
pub struct Syscall;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    path: String,
}

const PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "path",
    help: "which call to time: all three, or only getppid, read or write",
    kind: ParamKind::Choice {
        options: &["all", "getppid", "read", "write"],
    },
    default: "all",
}];

const METRICS: &[MetricSpec] = &[
    MetricSpec {
        name: "getppid_ns",
        unit: "ns",
        direction: Direction::Lower,
        aggregate: Aggregate::Mean,
    },
    MetricSpec {
        name: "read_ns",
        unit: "ns",
        direction: Direction::Lower,
        aggregate: Aggregate::Mean,
    },
    MetricSpec {
        name: "write_ns",
        unit: "ns",
        direction: Direction::Lower,
        aggregate: Aggregate::Mean,
    },
];

impl Probe for Syscall {
    fn name(&self) -> &'static str {
        "syscall"
    }
    fn help(&self) -> &'static str {
        "Cost of one system call: raw getppid (kernel entry/exit), 1-byte read of /dev/zero and \
         1-byte write to /dev/null; median ns per call over batches of at least 100 us."
    }
    fn windowed(&self) -> bool {
        true
    }
    fn class(&self) -> Class {
        Class::Process
    }
    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }
    fn metrics(&self) -> &'static [MetricSpec] {
        METRICS
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        if !std::path::Path::new("/dev/zero").exists()
            || !std::path::Path::new("/dev/null").exists()
        {
            return Err(Unsupported::new("/dev/zero or /dev/null is missing"));
        }
        Ok(())
    }
    fn run(&self, ctx: &ProbeCtx, params: &ParamValues) -> anyhow::Result<Vec<Metric>> {
        let o: Opts = params.decode(self.name())?;
        ctx.pin_self()?;
        let which = |p: &str| o.path == "all" || o.path == p;
        let n_paths = ["getppid", "read", "write"]
            .iter()
            .filter(|p| which(p))
            .count()
            .max(1);
        let budget = ctx.budget / n_paths as u32;
        let min_batch = Duration::from_micros(100);
        let mut out = Vec::new();
        let mut run = |spec: &MetricSpec, f: &mut dyn FnMut(u64)| {
            // The first calibration is warm-up (as `batch_iters` does).
            let iters = batch_iters(min_batch, &mut *f);
            let batches = time_batches_at(ctx, iters, budget, 5, f);
            let per_op: Vec<f64> = batches.iter().map(|e| e.value).collect();
            let m = spec.value(median(&per_op));
            out.push(match batch_series(ctx, &batches, |v| v) {
                Some(s) => m.with_series(s),
                None => m,
            });
        };
        if which("getppid") {
            run(&METRICS[0], &mut |n| {
                for _ in 0..n {
                    // SAFETY: getppid has no arguments and cannot fail.
                    std::hint::black_box(unsafe { libc::syscall(libc::SYS_getppid) });
                }
            });
        }
        if which("read") {
            let f = File::open("/dev/zero")?;
            let fd = f.as_raw_fd();
            let mut b = [0u8; 1];
            run(&METRICS[1], &mut |n| {
                for _ in 0..n {
                    // SAFETY: fd is open, b is a valid 1-byte buffer.
                    std::hint::black_box(unsafe { libc::read(fd, b.as_mut_ptr().cast(), 1) });
                }
            });
        }
        if which("write") {
            let f = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
            let fd = f.as_raw_fd();
            let b = [0u8; 1];
            run(&METRICS[2], &mut |n| {
                for _ in 0..n {
                    // SAFETY: fd is open, b is a valid 1-byte buffer.
                    std::hint::black_box(unsafe { libc::write(fd, b.as_ptr().cast(), 1) });
                }
            });
        }
        Ok(out)
    }
}
