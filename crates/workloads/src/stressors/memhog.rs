//! `memhog`: allocate memory and never free it (the memory-intensive test of Matthews et al.,
//! and the memory-consumption program of VITS section 4.3).
//!
//! The hog maps anonymous memory in chunks up to a target (intensity% of the memory the
//! tenant may use, never above `caps.max_bytes`). With `touch=true` (Matthews: "allocating and
//! touching memory without freeing it") each chunk is written before the next is mapped,
//! and once the target is held the hog keeps rewriting all of it, pass after pass, so the
//! pages stay hot and cannot be reclaimed quietly. With `touch=false` (VITS: "invokes malloc()
//! constantly, but does not initiate the memory") it only maps, and idles once the target is
//! mapped: virtual size and commit charge grow, resident memory does not.
//!
//! Inside a tenant with a memory limit, the hog may be OOM-killed: that is the point of the
//! test (the tenant contains it) and nothing here prevents it. A failed mapping stops the
//! growth and is reported in the notes; the run goes on holding what it has.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;

use super::mapping::Mapping;
use super::pool::{run_pool, Done, Shape};
use crate::params::{fmt_size, ParamKind, ParamSpec, ParamValues};
use crate::{Class, Env, StressCtx, StressReport, Stressor, Unsupported};

/// The `memhog` stressor.
pub struct Memhog;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    touch: bool,
    chunk: u64,
    write: String,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "touch",
        help: "write the memory (true) or only allocate it, as the VITS variant (false)",
        kind: ParamKind::Bool,
        default: "true",
    },
    ParamSpec {
        name: "chunk",
        help: "bytes allocated at a time",
        kind: ParamKind::Size {
            min: 4 << 10,
            max: 1 << 30,
        },
        default: "64M",
    },
    ParamSpec {
        name: "write",
        help: "what a touch writes in each page: line (one word in every cache line: the held \
               memory is also streamed, like a busy tenant) or page (one byte per page: just \
               enough to fault it in and keep it referenced)",
        kind: ParamKind::Choice {
            options: &["line", "page"],
        },
        default: "line",
    },
];

/// Bytes touched between two checks of the stop flag.
const SLICE: usize = 1 << 20;

struct Hog<'a> {
    maps: Vec<Mapping>,
    target: u64,
    chunk: u64,
    mapped: u64,
    touch: bool,
    stride: usize,
    page: usize,
    /// Touch cursor: mapping index and offset within it.
    cur: (usize, usize),
    /// Completed passes over all held memory (the first pass is the growth).
    passes: u64,
    growing: bool,
    held: &'a AtomicU64,
    touched: &'a AtomicU64,
    failure: &'a Mutex<Option<String>>,
}

impl Hog<'_> {
    /// Maps the next chunk; false when the target is reached or mapping failed.
    fn grow(&mut self) -> bool {
        if !self.growing || self.mapped >= self.target {
            self.growing = false;
            return false;
        }
        let len = self.chunk.min(self.target - self.mapped) as usize;
        match Mapping::new(len) {
            Ok(m) => {
                // Round down to whole pages so the mapped total never passes the target.
                self.mapped += m.len() as u64;
                self.maps.push(m);
                self.held.store(self.mapped, Ordering::Relaxed);
                true
            }
            Err(e) => {
                *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!(
                    "allocation failed at {} held: {e:#}",
                    fmt_size(self.mapped)
                ));
                self.growing = false;
                false
            }
        }
    }

    fn step(&mut self) -> Done {
        if !self.touch {
            let before = self.mapped;
            if self.grow() {
                return Done::new((self.mapped - before) / self.page as u64, 0);
            }
            std::thread::sleep(Duration::from_millis(10));
            return Done::NOTHING;
        }
        let (mi, off) = self.cur;
        if mi >= self.maps.len() {
            // End of what is held: grow, or start another pass over everything.
            if !self.grow() {
                if self.maps.is_empty() {
                    std::thread::sleep(Duration::from_millis(10));
                    return Done::NOTHING;
                }
                self.passes += 1;
                self.cur = (0, 0);
            }
            return Done::NOTHING;
        }
        let m = &self.maps[mi];
        let end = (off + SLICE).min(m.len());
        let value = self.passes.wrapping_add(1);
        let base = m.as_ptr();
        let mut at = off;
        while at < end {
            // SAFETY: `at` is inside the mapping, 8-byte aligned (offsets are multiples of
            // the stride, itself a multiple of 8 or the page size).
            unsafe { (base.add(at) as *mut u64).write_volatile(value) };
            at += self.stride;
        }
        let pages = ((end - off) / self.page) as u64;
        if self.passes == 0 {
            self.touched
                .fetch_add((end - off) as u64, Ordering::Relaxed);
        }
        self.cur = if end == m.len() {
            (mi + 1, 0)
        } else {
            (mi, end)
        };
        Done::new(pages, 0)
    }
}

impl Stressor for Memhog {
    fn name(&self) -> &'static str {
        "memhog"
    }
    fn help(&self) -> &'static str {
        "Allocates memory in chunks without ever freeing it, up to intensity% of the memory \
         the tenant may use (never above the caps). touch=true writes each chunk and then \
         keeps rewriting all held memory; touch=false only allocates (the VITS variant). One \
         operation is one page written (touch) or mapped (no touch); bytes counts the \
         memory written by touches; the held_bytes note gives the memory held at the end."
    }
    fn class(&self) -> Class {
        Class::Memory
    }
    fn intensity_knob(&self) -> &'static str {
        "bytes held: intensity% of the memory the tenant may use (its cgroup limit, else the \
         host's available memory), never above caps.max_bytes; 0 = idle"
    }
    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }
    fn aggressive(&self) -> bool {
        true
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        Ok(())
    }
    fn run(&self, ctx: &StressCtx, params: &ParamValues) -> anyhow::Result<StressReport> {
        let o: Opts = params.decode(self.name())?;
        let page = ctx.env.page_size.max(4096);
        let mut target = ctx.env.mem_usable / 100 * u64::from(ctx.intensity);
        if let Some(cap) = ctx.caps.max_bytes {
            target = target.min(cap);
        }
        // Whole pages only, so rounding never passes the target or the cap.
        target = target / page * page;
        let unit = if o.touch {
            "page written (first touch or rewrite)"
        } else {
            "page allocated without being touched"
        };
        if target == 0 {
            return Ok(super::pool::idle_report(ctx, unit));
        }
        let chunk = (o.chunk / page * page).max(page);
        let held = AtomicU64::new(0);
        let touched = AtomicU64::new(0);
        let failure = Mutex::new(None);
        let passes = AtomicU64::new(0);
        let stride = if o.write == "page" {
            page as usize
        } else {
            (ctx.env.line_size() as usize).clamp(8, page as usize)
        };
        let out = run_pool(
            ctx,
            self.name(),
            Shape::busy(1),
            |_| {
                Ok(Hog {
                    maps: Vec::new(),
                    target,
                    chunk,
                    mapped: 0,
                    touch: o.touch,
                    stride,
                    page: page as usize,
                    cur: (0, 0),
                    passes: 0,
                    growing: true,
                    held: &held,
                    touched: &touched,
                    failure: &failure,
                })
            },
            |h| {
                let d = h.step();
                passes.store(h.passes, Ordering::Relaxed);
                Ok(d)
            },
        )?;
        let held = held.load(Ordering::Relaxed);
        let touched = touched.load(Ordering::Relaxed);
        // Held: what is resident by the hog's doing (touched), or only mapped (no touch).
        let held_bytes = if o.touch { touched } else { held };
        let mut notes = vec![
            format!("held_bytes={held_bytes} target_bytes={target}"),
            format!("held={} target={}", fmt_size(held_bytes), fmt_size(target)),
            format!("mapped={}", fmt_size(held)),
        ];
        if o.touch {
            notes.push(format!("touched={}", fmt_size(touched)));
            notes.push(format!(
                "rewrite_passes={} write={}",
                passes.load(Ordering::Relaxed),
                o.write
            ));
        }
        if let Some(f) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
            notes.push(f);
        }
        let mut report = out.report(unit, notes);
        // Bytes of memory written by the touches: every line of a page, or one line of it.
        report.bytes = match (o.touch, o.write.as_str()) {
            (false, _) => 0,
            (true, "page") => report.ops * ctx.env.line_size().clamp(8, page),
            (true, _) => report.ops * page,
        };
        Ok(report)
    }
}
