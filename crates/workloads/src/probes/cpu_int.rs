//! `cpu-int`: integer CPU throughput.
//!
//! Two kernels:
//! - `mix` (default): a Dhrystone-like integer mix. One operation is one pass of a loop that
//!   copies and updates records through a link, copies and compares 32-byte strings, does
//!   integer multiply, divide and add, indexes a 1-D and a 2-D array, branches on enums and
//!   characters, and calls small non-inlined procedures. Inputs come through
//!   `black_box` each pass and every result feeds a checksum, so the compiler cannot fold
//!   the work away. Reported as passes per second.
//! - `primes`: the event of `sysbench cpu`: count the primes below `max_prime` (default
//!   10000) by trial division of each candidate `c` by `2..=sqrt(c)`, in 64-bit integers with
//!   the bound compared as a double, exactly as sysbench does. Reported as events per second,
//!   so `cpu-int kernel=primes threads=N` compares with `sysbench cpu --threads=N` ("events
//!   per second").
//!
//! With `threads` > 1 the threads run together (pinned round-robin when the context pins) and
//! the total is measured over windows in which all of them were running.

use std::hint::black_box;
use std::time::Duration;

use serde::Deserialize;

use super::cm_common::{measure_passes, rate};
use crate::metric::{Metric, MetricSpec};
use crate::params::{ParamKind, ParamSpec, ParamValues};
use crate::{Class, Env, Probe, ProbeCtx, Unsupported};

/// The `cpu-int` probe.
pub struct CpuInt;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    kernel: String,
    threads: u32,
    max_prime: u64,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "kernel",
        help: "mix: Dhrystone-like integer mix (ops/s); primes: sysbench-cpu prime counting \
               (events/s)",
        kind: ParamKind::Choice {
            options: &["mix", "primes"],
        },
        default: "mix",
    },
    ParamSpec {
        name: "threads",
        help: "threads running the kernel at once; the rate reported is their total",
        kind: ParamKind::Int { min: 1, max: 256 },
        default: "1",
    },
    ParamSpec {
        name: "max_prime",
        help: "primes kernel: count primes below this per event (sysbench --cpu-max-prime)",
        kind: ParamKind::Int {
            min: 3,
            max: 10_000_000,
        },
        default: "10000",
    },
];

const METRICS: &[MetricSpec] = &[
    rate("ops_per_sec", "ops/s"),
    rate("ops_per_sec_per_thread", "ops/s"),
    rate("events_per_sec", "events/s"),
    rate("events_per_sec_per_thread", "events/s"),
];

/// Length of one timed chunk of work.
const CHUNK: Duration = Duration::from_millis(2);

impl Probe for CpuInt {
    fn name(&self) -> &'static str {
        "cpu-int"
    }
    fn help(&self) -> &'static str {
        "Integer CPU throughput. kernel=mix: a Dhrystone-like mix (record copies through a \
         link, 32-byte string copy and compare, integer multiply/divide/add, 1-D and 2-D array \
         indexing, enum and character branches, small procedure calls); ops_per_sec counts \
         passes of the mix per second. kernel=primes: the sysbench-cpu event (count primes \
         below max_prime by trial division up to sqrt, 64-bit); events_per_sec compares with \
         `sysbench cpu --cpu-max-prime=M --threads=N` events per second. Rates are totals over \
         `threads`; *_per_thread is the total divided by the threads. Rate = median of \
         ~20 wall-clock windows (time spent descheduled counts, as in sysbench) after a \
         warm-up tenth of the budget. With a window length, every rate also comes as a series \
         of wall-clock windows of that length over the measured interval."
    }
    fn class(&self) -> Class {
        Class::Cpu
    }
    fn windowed(&self) -> bool {
        true
    }
    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }
    fn metrics(&self) -> &'static [MetricSpec] {
        METRICS
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        Ok(())
    }
    fn run(&self, ctx: &ProbeCtx, params: &ParamValues) -> anyhow::Result<Vec<Metric>> {
        let o: Opts = params.decode(self.name())?;
        let threads = o.threads.max(1) as usize;
        let (total, specs) = if o.kernel == "primes" {
            let max_prime = o.max_prime;
            let work = || {
                move |n: u64| {
                    for _ in 0..n {
                        black_box(prime_event(black_box(max_prime)));
                    }
                }
            };
            (
                measure_passes(ctx, threads, CHUNK, 1, work)?,
                &METRICS[2..4],
            )
        } else {
            let work = || {
                let mut mix = Mix::new();
                move |n: u64| {
                    black_box(mix.run(n));
                }
            };
            (
                measure_passes(ctx, threads, CHUNK, 1, work)?,
                &METRICS[0..2],
            )
        };
        Ok(vec![
            total.metric(&specs[0], 1.0),
            total.metric(&specs[1], 1.0 / threads as f64),
        ])
    }
}

/// One sysbench-cpu event: the number of primes below `max_prime`, found by trial division
/// with 64-bit integers and the square-root bound compared as a double.
#[inline(never)]
pub(crate) fn prime_event(max_prime: u64) -> u64 {
    let mut found = 0;
    let mut c: u64 = 3;
    while c < max_prime {
        let bound = (c as f64).sqrt();
        let mut d: u64 = 2;
        while d as f64 <= bound {
            if rem_u64(c, d) == 0 {
                break;
            }
            d += 1;
        }
        if d as f64 > bound {
            found += 1;
        }
        c += 1;
    }
    found
}

/// `a % b` with a full 64-bit divide, as sysbench's C build does it. Left to itself, LLVM
/// checks whether both operands fit in 32 bits and then uses the cheaper 32-bit divide,
/// which makes an event several percent cheaper than sysbench's and the comparison unfair.
#[inline(always)]
fn rem_u64(a: u64, b: u64) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let rem: u64;
        // SAFETY: b >= 2 here, so the divide cannot fault; it only touches rax and rdx.
        unsafe {
            std::arch::asm!(
                "div {b}",
                b = in(reg) b,
                inout("rax") a => _,
                inout("rdx") 0u64 => rem,
                options(pure, nomem, nostack),
            );
        }
        rem
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        a % b
    }
}

/// Kinds a record can have; branched on by the mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    North,
    East,
    South,
    West,
    Centre,
}

impl Kind {
    fn from_index(i: i32) -> Kind {
        match i.rem_euclid(5) {
            0 => Kind::North,
            1 => Kind::East,
            2 => Kind::South,
            3 => Kind::West,
            _ => Kind::Centre,
        }
    }
}

/// A record of the mix: copied whole, updated field by field, reached through a link.
#[derive(Debug, Clone, Copy)]
struct Rec {
    link: usize,
    kind: Kind,
    value: i32,
    label: [u8; 32],
}

const TEXT_A: &[u8; 32] = b"ISOBENCH INTEGER MIX, TEXT NO. 1";
const TEXT_B: &[u8; 32] = b"ISOBENCH INTEGER MIX, TEXT NO. 2";

/// State of the Dhrystone-like mix (one per thread).
struct Mix {
    recs: [Rec; 3],
    flag: bool,
    ch_a: u8,
    ch_b: u8,
    total: i32,
    row: [i32; 64],
    grid: Box<[[i32; 64]; 64]>,
    text_a: [u8; 32],
    text_b: [u8; 32],
    pass: u32,
}

impl Mix {
    fn new() -> Self {
        let rec = Rec {
            link: 1,
            kind: Kind::South,
            value: 40,
            label: *TEXT_A,
        };
        Mix {
            recs: [rec, rec, rec],
            flag: false,
            ch_a: b'A',
            ch_b: b'B',
            total: 0,
            row: [0; 64],
            grid: Box::new([[0; 64]; 64]),
            text_a: *TEXT_A,
            text_b: *TEXT_B,
            pass: 0,
        }
    }

    /// Runs `n` passes; returns a checksum that depends on all of them.
    fn run(&mut self, n: u64) -> i64 {
        let mut sum = 0i64;
        for _ in 0..n {
            sum = sum.wrapping_add(self.one_pass());
        }
        sum
    }

    #[inline(never)]
    fn one_pass(&mut self) -> i64 {
        self.pass = self.pass.wrapping_add(1);
        // Inputs through black_box: the compiler may not assume them.
        let (mut a, mut b) = black_box((2i32, 3i32));
        let digit = b'0' + (self.pass % 10) as u8;

        self.chars_and_flags();
        self.records();
        self.text_b = *TEXT_B;
        self.text_b[31] = digit;
        self.flag = !text_less(&self.text_a, &self.text_b);

        let mut c = 0;
        while a < b {
            c = 5 * a - b;
            c = add_seven(a, c);
            a += 1;
        }
        self.arrays(a, c);
        self.records();

        let mut kind = Kind::North;
        let mut ch = b'A';
        while ch <= self.ch_b {
            if kind_of(ch, b'C') == Kind::East {
                kind = choose(Kind::North, self.pass as i32);
                self.text_b = *TEXT_A;
                self.text_b[30] = ch;
                b = self.pass as i32 & 7;
                self.total = b;
            }
            ch += 1;
        }
        b = b.wrapping_mul(a);
        a = b / c.max(1);
        b = 7 * (b - c) - a;
        a = self.bump(a);
        i64::from(a) + i64::from(b) + i64::from(c) + kind as i64 + i64::from(self.flag)
    }

    /// Character and boolean globals.
    #[inline(never)]
    fn chars_and_flags(&mut self) {
        let is_a = self.ch_a == b'A';
        self.flag = is_a || self.flag;
        self.ch_b = b'B';
        self.ch_a = if self.pass % 3 == 0 { b'B' } else { b'A' };
    }

    /// Whole-record copy through the link, field updates, enum branches.
    #[inline(never)]
    fn records(&mut self) {
        let head = self.pass as usize % 2;
        let next = self.recs[head].link;
        self.recs[next] = self.recs[head];
        self.recs[head].value = 5;
        self.recs[next].value = self.recs[head].value;
        self.recs[next].link = self.recs[head].link;
        self.recs[next].label[0] = b'0' + (self.pass % 7) as u8;
        if self.recs[next].kind == Kind::North {
            self.recs[next].value = 6;
            self.recs[next].kind = choose(self.recs[head].kind, self.recs[next].value);
            self.recs[next].value = add_seven(self.recs[next].value, 10);
        } else {
            self.recs[head] = self.recs[next];
        }
        self.recs[2].value = self.recs[2].value.wrapping_add(self.recs[next].value) & 0xffff;
        self.recs[2].kind = Kind::from_index(self.recs[2].value);
    }

    /// 1-D and 2-D array indexing driven by the loop values.
    #[inline(never)]
    fn arrays(&mut self, a: i32, c: i32) {
        let i = (a as usize + 5) % 56;
        self.row[i] = c;
        self.row[i + 1] = self.row[i];
        self.row[i + 30 - 24] = i as i32;
        for j in i..i + 2 {
            self.grid[i][j] = i as i32;
        }
        self.grid[i][(i + 63) % 64] += 1;
        self.grid[(i + 20) % 64][i] = self.row[i];
        self.total = 5;
    }

    #[inline(never)]
    fn bump(&mut self, a: i32) -> i32 {
        if self.ch_a == b'A' {
            a.wrapping_add(9).wrapping_sub(self.total)
        } else {
            a
        }
    }
}

#[inline(never)]
fn add_seven(x: i32, y: i32) -> i32 {
    x.wrapping_add(7).wrapping_add(y) & 0xffff
}

#[inline(never)]
fn kind_of(ch: u8, reference: u8) -> Kind {
    if ch == reference {
        Kind::North
    } else {
        Kind::East
    }
}

#[inline(never)]
fn choose(k: Kind, v: i32) -> Kind {
    match k {
        Kind::North => Kind::from_index(v),
        Kind::East => {
            if v > 100 {
                Kind::North
            } else {
                Kind::West
            }
        }
        Kind::South => Kind::East,
        Kind::West => Kind::Centre,
        Kind::Centre => Kind::South,
    }
}

/// Byte-wise string comparison, as a C `strcmp` would do it.
#[inline(never)]
fn text_less(a: &[u8; 32], b: &[u8; 32]) -> bool {
    for i in 0..32 {
        if a[i] != b[i] {
            return a[i] < b[i];
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primes_below_ten_thousand() {
        // 1229 primes below 10000; the event starts at 3, so 2 is not counted.
        assert_eq!(prime_event(10_000), 1228);
        assert_eq!(prime_event(3), 0);
        assert_eq!(prime_event(12), 4);
    }

    #[test]
    fn mix_is_deterministic_and_advances() {
        let (mut a, mut b) = (Mix::new(), Mix::new());
        assert_eq!(a.run(1000), b.run(1000));
        assert_eq!(a.pass, 1000);
    }
}
