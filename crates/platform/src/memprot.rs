//! An external check of memory protection: the kernel's own cgroup selftest for `memory.low`
//! and `memory.min` (`tools/testing/selftests/cgroup/test_memcontrol.c`,
//! `test_memcg_protection`), reproduced with isobench's cgroups.
//!
//! The hierarchy, under the run's cgroup parent:
//!
//! ```text
//! A        memory.max 200M, no swap
//! A/B      memory.low (or .min) 50M
//! A/B/c0   75M    holds 50M of page cache
//! A/B/c1   25M    holds 50M of page cache
//! A/B/c2   0      holds 50M of page cache
//! A/B/c3   500M   holds nothing
//! A/G      allocates 148M of anonymous memory once, then exits
//! ```
//!
//! After G's allocation, the kernel's test expects B near 50M (within 3%), c0 near 29M
//! (15%), c1 near 21M (20%) and c3 at 0: the split that the model in `memcg_protection.m`
//! beside the test gives for protection distributed in proportion to each child's protected
//! usage. c2 is expected near 0 but not checked there (with `memory_recursiveprot`, some of
//! B's protection may reach it). Closeness is the test's own: `|a - b| <= (a + b) * err%`.
//!
//! The page cache is written by [`fill_pagecache`] into an unlinked file on the workdir's
//! disk (a tmpfs page would be anonymous, and with no swap, unreclaimable), by a process that
//! then stays, as the kernel's test keeps one in each leaf. The allocation is
//! [`alloc_anon`]. Both run as processes of the isobench binary (hidden subcommands), each in
//! its cgroup before it starts.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

use crate::cgroup::{placement, CgroupFs, CgroupVersion, Controller, TenantCgroup};
use crate::limits::Limits;
use crate::run::RunContext;

const MIB: u64 = 1 << 20;

/// Which protection is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Protection {
    /// `memory.low`: best effort, reclaimed only when nothing unprotected is left.
    Low,
    /// `memory.min`: never reclaimed.
    Min,
}

impl Protection {
    /// The cgroup file.
    pub fn file(self) -> &'static str {
        match self {
            Protection::Low => "memory.low",
            Protection::Min => "memory.min",
        }
    }

    fn limits(self, bytes: u64) -> Limits {
        let mut l = Limits::default();
        match self {
            Protection::Low => l.memory_low = Some(bytes),
            Protection::Min => l.memory_min = Some(bytes),
        }
        l
    }
}

/// One cgroup's figure, measured beside the kernel test's expectation.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The cgroup, as the test names it (`A/B/c0`).
    pub cgroup: String,
    /// Its protection, bytes.
    pub protection_bytes: u64,
    /// Page cache it filled, bytes.
    pub filled_bytes: u64,
    /// `memory.current` at the end, bytes.
    pub measured_bytes: u64,
    /// What the kernel's test expects, bytes; `None` where it checks nothing.
    pub expected_bytes: Option<u64>,
    /// Its tolerance, percent (the test's `values_close` error); 0 means exactly.
    pub tolerance_percent: Option<u64>,
    /// Whether the measured figure is within the tolerance (`None`: not checked).
    pub within: Option<bool>,
    /// `low` (or `min`... the kernel counts both as `low`) events of `memory.events`.
    pub low_events: Option<u64>,
    /// `oom` events of `memory.events`.
    pub oom_events: Option<u64>,
}

/// The check's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// Which protection.
    pub protection: Protection,
    /// Where the hierarchy was made.
    pub parent: PathBuf,
    /// B's usage before the pressure, bytes (the test waits for it to near 150M).
    pub before_pressure_bytes: u64,
    /// How the pressure went: A/G's allocation, or why it failed.
    pub pressure: String,
    /// The rows: B, then its children.
    pub rows: Vec<Row>,
    /// Whether every checked row is within its tolerance.
    pub passed: bool,
    /// Where the expectations come from.
    pub reference: &'static str,
}

/// The kernel test's closeness: `|a - b| <= (a + b) / 100 * err`.
pub fn values_close(a: u64, b: u64, err: u64) -> bool {
    a.abs_diff(b) <= (a + b) / 100 * err
}

/// How a helper process of the check is started: the program and the arguments before the
/// job's own (the isobench binary and its hidden subcommand).
#[derive(Debug, Clone)]
pub struct Helper {
    /// The program.
    pub program: PathBuf,
    /// Arguments before `fill-pagecache TARGET DIR CGROUP` or `alloc-anon TARGET CGROUP`.
    pub args: Vec<String>,
}

/// Runs the check for `run` on this host's cgroup v2 tree. `dir` is a directory on a disk
/// (not tmpfs) for the page cache.
pub fn check(
    run: &RunContext,
    protection: Protection,
    helper: &Helper,
    dir: &Path,
) -> Result<Outcome> {
    let fs = crate::detect_cgroup_platform()?;
    if fs.version() != CgroupVersion::V2 {
        bail!(
            "this check needs cgroup v2 ({} here): {} has no v1 counterpart (v1's \
             memory.soft_limit_in_bytes does not protect)",
            fs.describe(),
            protection.file()
        );
    }
    let (fs, _delegation) = placement::for_run(fs, run)?;
    if !fs.has(Controller::Memory) {
        bail!(
            "the memory controller is not available in {}",
            fs.describe()
        );
    }
    let a_name = run.id().object_name("memprot");
    let a_limits = Limits {
        memory: Some(200 * MIB),
        ..Limits::default()
    };
    let a = TenantCgroup::create(&fs, &a_name, &a_limits, None)?;
    let result = within(&a, protection, helper, dir);
    let _ = a.kill_all(Duration::from_secs(10));
    let _ = a.remove(Duration::from_secs(10));
    result
}

fn child(parent: &TenantCgroup, name: &str, limits: &Limits) -> Result<TenantCgroup> {
    let dir = parent
        .dir_of(Controller::Memory)
        .ok_or_else(|| anyhow!("no memory cgroup"))?;
    let fs = CgroupFs::v2(dir, parent.tree())?;
    TenantCgroup::create(&fs, name, limits, None)
        .with_context(|| format!("creating {}/{name}", dir.display()))
}

/// The protections of A/B's children, as the kernel's test sets them.
const LOWS: [u64; 4] = [75 * MIB, 25 * MIB, 0, 500 * MIB];

/// The kernel's test inside A: B's children fill their page cache, take their
/// protections, then G's allocation presses on them and each one's memory is compared
/// with the model.
fn within(
    a: &TenantCgroup,
    protection: Protection,
    helper: &Helper,
    dir: &Path,
) -> Result<Outcome> {
    let b = child(a, "B", &Limits::default())?;
    let g = child(a, "G", &Limits::default())?;
    let mut kids = Vec::new();
    for i in 0..LOWS.len() {
        kids.push(child(&b, &format!("c{i}"), &Limits::default())?);
    }
    // The page cache first, as the kernel's test does; the protections after.
    let mut fillers: Vec<Child> = Vec::new();
    for kid in kids.iter().take(3) {
        fillers.push(spawn_in(
            kid,
            helper,
            &[
                "fill-pagecache".into(),
                (50 * MIB).to_string(),
                dir.display().to_string(),
                cgroup_dir(kid)?,
            ],
        )?);
    }
    let result = (|| -> Result<Outcome> {
        for f in fillers.iter_mut() {
            wait_ready(f)?;
        }
        protect(&b, &kids, protection)?;
        let end = Instant::now() + Duration::from_secs(6);
        while !values_close(current(&b), 150 * MIB, 3) && Instant::now() < end {
            thread::sleep(Duration::from_millis(200));
        }
        let before = current(&b);
        let (allocated, pressure) = press(a, &g, helper)?;
        let rows = rows(&b, &kids);
        let passed = allocated && rows.iter().all(|r| r.within != Some(false));
        Ok(Outcome {
            protection,
            parent: a.dir_of(Controller::Memory).map(Path::to_path_buf).unwrap_or_default(),
            before_pressure_bytes: before,
            pressure,
            rows,
            passed,
            reference: "Linux tools/testing/selftests/cgroup/test_memcontrol.c, test_memcg_protection (the model: memcg_protection.m)",
        })
    })();
    for mut f in fillers {
        let _ = f.kill();
        let _ = f.wait();
    }
    result
}

/// Sets B's protection and its children's ([`LOWS`]).
fn protect(b: &TenantCgroup, kids: &[TenantCgroup], protection: Protection) -> Result<()> {
    b.apply_limits(&protection.limits(50 * MIB))?;
    for (kid, low) in kids.iter().zip(LOWS) {
        if low > 0 {
            kid.apply_limits(&protection.limits(low))?;
        }
    }
    Ok(())
}

/// The memory a cgroup uses now.
fn current(cg: &TenantCgroup) -> u64 {
    cg.usage().memory_current.unwrap_or(0)
}

/// A count from a cgroup's `memory.events`.
fn events(cg: &TenantCgroup, key: &str) -> Option<u64> {
    cg.read_file(Controller::Memory, "memory.events")
        .and_then(|t| crate::flatkeyed::keyed(&t, key))
}

/// Runs G's allocation of 148 MiB in A; returns whether it succeeded, and says what
/// happened.
fn press(a: &TenantCgroup, g: &TenantCgroup, helper: &Helper) -> Result<(bool, String)> {
    let mut hog = spawn_in(
        g,
        helper,
        &["alloc-anon".into(), (148 * MIB).to_string(), cgroup_dir(g)?],
    )?;
    let status = hog.wait().context("waiting for the allocation in A/G")?;
    if status.success() {
        return Ok((true, "A/G allocated 148 MiB and exited".to_string()));
    }
    let stat = a
        .read_file(Controller::Memory, "memory.stat")
        .unwrap_or_default();
    let kib = |k: &str| crate::flatkeyed::keyed(&stat, k).map_or(0, |v| v >> 10);
    Ok((
        false,
        format!(
            "the 148 MiB allocation in A/G failed ({status}), which the kernel's test \
             requires to succeed; A then held {} KiB (anon {} KiB, file {} KiB, kernel {} KiB)",
            a.usage().memory_current.unwrap_or(0) >> 10,
            kib("anon"),
            kib("file"),
            kib("kernel")
        ),
    ))
}

/// B's and its children's memory against what the kernel's test expects.
fn rows(b: &TenantCgroup, kids: &[TenantCgroup]) -> Vec<Row> {
    let mut rows = vec![Row {
        cgroup: "A/B".into(),
        protection_bytes: 50 * MIB,
        filled_bytes: 150 * MIB,
        measured_bytes: current(b),
        expected_bytes: Some(50 * MIB),
        tolerance_percent: Some(3),
        within: None,
        low_events: events(b, "low"),
        oom_events: events(b, "oom"),
    }];
    let expected = [
        (Some(29 * MIB), Some(15)),
        (Some(21 * MIB), Some(20)),
        (Some(0), None),
        (Some(0), Some(0)),
    ];
    for (i, (kid, low)) in kids.iter().zip(LOWS).enumerate() {
        let (exp, tol) = expected[i];
        rows.push(Row {
            cgroup: format!("A/B/c{i}"),
            protection_bytes: low,
            filled_bytes: if i < 3 { 50 * MIB } else { 0 },
            measured_bytes: current(kid),
            expected_bytes: exp,
            tolerance_percent: tol,
            within: None,
            low_events: events(kid, "low"),
            oom_events: events(kid, "oom"),
        });
    }
    for r in &mut rows {
        r.within = match (r.expected_bytes, r.tolerance_percent) {
            (Some(e), Some(0)) => Some(r.measured_bytes == e),
            (Some(e), Some(t)) => Some(values_close(r.measured_bytes, e, t)),
            _ => None,
        };
    }
    rows
}

fn cgroup_dir(cg: &TenantCgroup) -> Result<String> {
    cg.dir_of(Controller::Memory)
        .map(|d| d.display().to_string())
        .ok_or_else(|| anyhow!("no memory cgroup"))
}

/// `memory.current` of the cgroup directory `dir`.
fn current_of(dir: &Path) -> Result<u64> {
    let file = dir.join("memory.current");
    let text = fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    text.trim()
        .parse()
        .with_context(|| format!("{} holds `{}`", file.display(), text.trim()))
}

/// Starts the helper with `job` inside `cg` (it joins the cgroup before it executes).
fn spawn_in(cg: &TenantCgroup, helper: &Helper, job: &[String]) -> Result<Child> {
    let fds = cg.join_fds()?;
    let mut cmd = Command::new(&helper.program);
    cmd.args(&helper.args)
        .args(job)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    // SAFETY: the closure only writes to descriptors it owns.
    unsafe {
        cmd.pre_exec(move || {
            for fd in &fds {
                if libc::write(fd.as_raw_fd(), b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    cmd.spawn()
        .with_context(|| format!("starting {} {}", helper.program.display(), job.join(" ")))
}

/// Waits for a filler's `ready` line.
fn wait_ready(child: &mut Child) -> Result<()> {
    let out = child.stdout.take().context("the filler has no stdout")?;
    let mut line = String::new();
    BufReader::new(out)
        .read_line(&mut line)
        .context("reading the filler's output")?;
    if line.trim() != "ready" {
        let status = child.try_wait().ok().flatten();
        bail!(
            "the page cache filler did not get ready (said `{}`, status {status:?})",
            line.trim()
        );
    }
    Ok(())
}

/// The filler: brings the usage of its cgroup `cgroup` to `target` bytes with page cache
/// written into an unlinked file in `dir` (charged to the cgroup), and returns the file: the
/// caller keeps it open, says `ready` and waits to be killed. The kernel's test fills 50M from a small forked process; this
/// one's own pages (the isobench binary's, its stack and heap) count in the usage too, so
/// the page cache is what is left to reach the usage the model assumes.
pub fn fill_pagecache(target: u64, dir: &Path, cgroup: &Path) -> Result<fs::File> {
    let bytes = target.saturating_sub(current_of(cgroup)?);
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_TMPFILE)
        .mode(0o600)
        .open(dir)
        .with_context(|| format!("opening an unlinked file in {}", dir.display()))?;
    let mut w = &f;
    // Small writes: the filler's own (unreclaimable, with no swap) memory stays small.
    const BLOCK: u64 = 64 << 10;
    let block = [0x5au8; BLOCK as usize];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(BLOCK);
        w.write_all(&block[..n as usize])
            .with_context(|| format!("writing page cache in {}", dir.display()))?;
        left -= n;
    }
    Ok(f)
}

/// The allocation: brings the usage of its cgroup `cgroup` to `target` bytes with anonymous
/// memory, written page by page, and returns (its own pages count, as for the filler).
pub fn alloc_anon(target: u64, cgroup: &Path) -> Result<()> {
    let bytes = target.saturating_sub(current_of(cgroup)?);
    let mut v: Vec<u8> = Vec::new();
    v.try_reserve_exact(bytes as usize)
        .map_err(|e| anyhow!("allocating {bytes} bytes: {e}"))?;
    // SAFETY: u8 has no invalid values; every byte is written below before any is read.
    unsafe { v.set_len(bytes as usize) };
    for i in (0..v.len()).step_by(4096) {
        v[i] = 1;
    }
    std::hint::black_box(&v);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closeness_is_the_kernel_tests() {
        // |a - b| <= (a + b) / 100 * err
        assert!(values_close(29 * MIB, 29 * MIB, 15));
        assert!(values_close(25 * MIB, 29 * MIB, 15));
        assert!(!values_close(20 * MIB, 29 * MIB, 15));
        assert!(values_close(51 * MIB, 50 * MIB, 3));
        assert!(!values_close(55 * MIB, 50 * MIB, 3));
    }
}
