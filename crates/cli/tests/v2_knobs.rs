//! The cgroup v2 knobs of tenant limits on a real cgroup v2 host under systemd: a Debian 12
//! guest (scripts/v2-guest) booted once for this whole binary. Inside it, the static
//! isobench sets each knob as a user would (`isobench stress NAME --platform cgroup
//! --limits KEY=VALUE`), the guest reads the knob back from the tenant's v2 files while the
//! tenant runs, and each test shows an effect only that knob explains: cpu.weight 20:80 on
//! one shared CPU splits it about 1:4; io.weight 100:1000 shifts the disk to the heavier
//! tenant, under io.cost (with its QoS capping vrate, as the emulated disk never counts as
//! saturated otherwise) and under bfq (io.bfq.weight); memory.high throttles a memory hog;
//! swap lets one swap; memory.low holds as the kernel's own selftest checks it (`isobench
//! check memory-low`); memory.min is read back; cpu.max.burst lets a tenant made bursty
//! (frozen most of the time) run past its quota after idle periods, as cpu.stat's bursts
//! show, and without it never does; io.max wiops holds direct writes to the rate; a cpuset
//! partition under a parent that is none, and io_latency where the kernel lacks it, are
//! refused with the reason (v2_plain.rs shows a partition under a parent that is one). The steps are in v2_knobs.sh. Two weighted tenants come from two `isobench
//! stress` commands run in one delegated cgroup (ISOBENCH_CGROUP_PARENT), so that they are
//! siblings: weights divide only among siblings, and two runs otherwise get sibling scopes
//! of equal weight.
//!
//! Needs QEMU, the guest image (`ISOBENCH_V2_GUEST=$(scripts/v2-guest build)`) and the
//! static isobench (`ISOBENCH_STATIC_EXE=$(scripts/build-static --debug)`); without one,
//! each test prints SKIP with the reason and passes, except under `CI=true`, where it
//! fails (common/guest.rs).

mod common;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use common::guest::{Cmd, Guest};

/// The line the guest prints after its last step.
const ALL_RAN: &str = "isobench-v2-knobs: every step ran";

/// What the steps left, read per tenant.
trait Looks {
    fn files(&self, step: &str) -> BTreeMap<String, BTreeMap<String, Vec<String>>>;
    fn tenant_with(
        &self,
        step: &str,
        file: &str,
        value: &str,
    ) -> (String, BTreeMap<String, Vec<String>>);
    fn shares(&self, step: &str) -> Vec<(String, f64, f64)>;
    fn both_looks(&self, step: &str) -> Vec<BTreeMap<String, (f64, f64)>>;
}

impl Looks for Guest {
    /// Each tenant's v2 files as the guest saw them during a step: tenant -> file -> the
    /// values seen.
    fn files(&self, step: &str) -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
        let mut m: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
        for line in self.file(&format!("{step}.files")).lines() {
            let Some((tenant, rest)) = line.split_once(' ') else {
                continue;
            };
            let Some((file, value)) = rest.split_once(": ") else {
                continue;
            };
            m.entry(tenant.into())
                .or_default()
                .entry(file.into())
                .or_default()
                .push(value.trim().into());
        }
        m
    }

    /// The one tenant of a step whose `file` held `value`, with all its files.
    fn tenant_with(
        &self,
        step: &str,
        file: &str,
        value: &str,
    ) -> (String, BTreeMap<String, Vec<String>>) {
        let all = self.files(step);
        all.iter()
            .find(|(_, f)| {
                f.get(file)
                    .is_some_and(|v| v.iter().any(|v| first_line(v) == value))
            })
            .map(|(t, f)| (t.clone(), f.clone()))
            .unwrap_or_else(|| {
                panic!(
                    "{step}: no tenant's {file} read `{value}`; the values seen: {all:#?}\n{}",
                    self.context()
                )
            })
    }

    /// What each of two tenants got over the time both ran: (tenant, CPU µs, I/O bytes)
    /// between the first and the last look that saw both.
    fn shares(&self, step: &str) -> Vec<(String, f64, f64)> {
        let both = self.both_looks(step);
        let (first, last) = (&both[0], &both[both.len() - 1]);
        first
            .iter()
            .map(|(t, (cpu, io))| {
                let (cpu1, io1) = last[t];
                (t.clone(), cpu1 - cpu, io1 - io)
            })
            .collect()
    }

    /// The watcher's looks that saw both tenants of a step, in time order: tenant -> (cpu
    /// usage µs, read + written bytes). At least two.
    fn both_looks(&self, step: &str) -> Vec<BTreeMap<String, (f64, f64)>> {
        // time -> tenant -> (cpu usage µs, read + written bytes)
        let mut looks: BTreeMap<String, BTreeMap<String, (f64, f64)>> = BTreeMap::new();
        for line in self.file(&format!("{step}.samples")).lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() != 5 {
                continue;
            }
            let n = |s: &str| s.parse::<f64>().unwrap_or(0.0);
            looks
                .entry(f[0].into())
                .or_default()
                .insert(f[1].into(), (n(f[2]), n(f[3]) + n(f[4])));
        }
        let both: Vec<_> = looks.values().filter(|t| t.len() == 2).cloned().collect();
        assert!(
            both.len() >= 2,
            "{step}: the two tenants were never seen running together: {looks:?}\n{}",
            self.context()
        );
        both
    }
}

/// The median over the watcher's intervals (both tenants seen at each end) of `heavy`'s CPU
/// time over `light`'s, with how many intervals: the split while both burned CPU, which the
/// ends of the window (one stressor still starting, or already stopping) do not move.
fn median_cpu_ratio(g: &Guest, step: &str, heavy: &str, light: &str) -> (f64, usize) {
    let both = g.both_looks(step);
    let mut ratios: Vec<f64> = both
        .windows(2)
        .filter_map(|w| {
            let d = |t: &str| w[1][t].0 - w[0][t].0;
            (d(light) > 0.0).then(|| d(heavy) / d(light))
        })
        .collect();
    assert!(
        ratios.len() >= 5,
        "{step}: only {} intervals with both tenants burning CPU: {both:?}",
        ratios.len()
    );
    ratios.sort_by(f64::total_cmp);
    (ratios[ratios.len() / 2], ratios.len())
}

/// A stressor's rate from its JSON report.
trait Rate {
    fn ops_per_sec(&self, guest: &Guest) -> f64;
}

impl Rate for Cmd {
    fn ops_per_sec(&self, guest: &Guest) -> f64 {
        let doc = self.json(guest);
        doc["report"]["ops_per_sec"]
            .as_f64()
            .unwrap_or_else(|| panic!("{}: no ops_per_sec in {doc}", self.name))
    }
}

/// The guest, booted once for this binary; `None` when the test skipped.
fn guest() -> Option<&'static Guest> {
    static GUEST: OnceLock<Result<Guest, String>> = OnceLock::new();
    common::guest::once(&GUEST, "v2-knobs", common::guest::missing, || {
        Guest::boot("v2-knobs", &["--timeout", "900"], "tests/v2_knobs.sh")
    })
}

/// The first line of a value seen (the guest joins a file's lines with spaces): `default
/// 100` of `default 100 259:0 100`.
fn first_line(v: &str) -> String {
    let w: Vec<&str> = v.split_whitespace().collect();
    match w.first() {
        Some(&"default") => w[..w.len().min(2)].join(" "),
        _ => v.to_string(),
    }
}

/// Asserts a tenant's file held `want` at some point of the step.
fn held(files: &BTreeMap<String, Vec<String>>, file: &str, want: &str, g: &Guest) {
    assert!(
        files.get(file).is_some_and(|v| v.iter().any(|v| v == want)),
        "{file} never read `{want}`: {files:#?}\n{}",
        g.context()
    );
}

#[test]
fn the_guest_ran_every_step_and_left_no_tenant() {
    let Some(g) = guest() else { return };
    assert_eq!(g.exit, 0, "{}", g.context());
    assert!(g.log.contains(ALL_RAN), "{}", g.context());
    assert_eq!(g.file("left.txt").trim(), "", "isobench cgroups left");
}

#[test]
fn cpu_weight_20_and_80_on_one_shared_cpu_split_it_about_1_to_4() {
    let Some(g) = guest() else { return };
    let (light, lf) = g.tenant_with("cpu-weight", "cpu.weight", "20");
    let (heavy, hf) = g.tenant_with("cpu-weight", "cpu.weight", "80");
    held(&lf, "cpuset.cpus", "0", g);
    held(&hf, "cpuset.cpus", "0", g);
    let shares = g.shares("cpu-weight");
    let cpu = |t: &str| shares.iter().find(|s| s.0 == t).unwrap().1;
    let (median, intervals) = median_cpu_ratio(g, "cpu-weight", &heavy, &light);
    let (a, b) = (
        g.cmd("cpu-weight-a").ops_per_sec(g),
        g.cmd("cpu-weight-b").ops_per_sec(g),
    );
    println!(
        "cpu.weight 20 vs 80 on CPU 0: CPU time while both ran {:.0} ms vs {:.0} ms, \
         ratio {:.2}; median ratio over {intervals} intervals of the watcher {median:.2}; \
         ops/s over each whole run (each also ran alone at its ends): {a:.0} (weight=20) \
         and {b:.0} (weight=80), ratio {:.2}",
        cpu(&light) / 1e3,
        cpu(&heavy) / 1e3,
        cpu(&heavy) / cpu(&light),
        b / a
    );
    assert!(
        (2.5..=6.0).contains(&median),
        "the weight-80 tenant got a median {median:.2} times the CPU of the weight-20 one \
         over {intervals} intervals; {shares:?}"
    );
}

/// The io.weight steps: the heavier tenant's share of the bytes moved while both ran.
fn io_split(g: &Guest, step: &str) -> f64 {
    let (light, lf) = g.tenant_with(step, "io.weight", "default 100");
    let (heavy, _) = g.tenant_with(step, "io.weight", "default 1000");
    let shares = g.shares(step);
    let io = |t: &str| shares.iter().find(|s| s.0 == t).unwrap().2;
    let (a, b) = (
        g.cmd(&format!("{step}-a")).ops_per_sec(g),
        g.cmd(&format!("{step}-b")).ops_per_sec(g),
    );
    println!(
        "{step}: io.weight {:?} vs {:?}: bytes while both ran {:.1} MiB vs {:.1} MiB, \
         ratio {:.2}; requests/s over each whole run {a:.0} (io_weight=100) and {b:.0} \
         (io_weight=1000)",
        lf.get("io.weight"),
        g.files(step)[&heavy].get("io.weight"),
        io(&light) / 1048576.0,
        io(&heavy) / 1048576.0,
        io(&heavy) / io(&light)
    );
    io(&heavy) / io(&light)
}

#[test]
fn io_weight_100_and_1000_under_io_cost_shift_the_disk_to_the_heavier_tenant() {
    let Some(g) = guest() else { return };
    let qos = g.file("io-cost-after.txt");
    println!(
        "root io.cost.qos after both runs: {}",
        g.file("io-cost-after.txt")
    );
    // Both runs held io.cost's user QoS at once; the last to end put back the kernel's own
    // (the device had no line before: `enable=0 ctrl=auto`), not the first run's QoS.
    let line = qos
        .lines()
        .find(|l| l.contains(" enable="))
        .unwrap_or_default();
    assert!(
        line.contains("enable=0") && line.contains("ctrl=auto"),
        "io.cost.qos after the runs: {qos}"
    );
    let (light, lf) = g.tenant_with("io-weight", "io.weight", "default 100");
    // io.cost was on for the workdir's disk: the tenant's weight has the device's line.
    assert!(
        lf["io.weight"]
            .iter()
            .any(|v| v.contains(" 100") && v.contains(':')),
        "{light}: no per-device io.weight line: {lf:?}\n{qos}"
    );
    let ratio = io_split(g, "io-weight");
    assert!(
        ratio >= 1.2,
        "under io.cost the weight-1000 tenant moved only {ratio:.2} times the bytes of the \
         weight-100 one"
    );
}

#[test]
fn io_weight_100_and_1000_under_bfq_set_io_bfq_weight_and_shift_the_disk() {
    let Some(g) = guest() else { return };
    if g.file("bfq-scheduler.txt").is_empty() {
        common::skip("v2-knobs", "the guest's disk took no bfq scheduler");
        return;
    }
    println!("scheduler: {}", g.file("bfq-scheduler.txt").trim());
    let (_, lf) = g.tenant_with("io-weight-bfq", "io.bfq.weight", "default 100");
    let (_, hf) = g.tenant_with("io-weight-bfq", "io.bfq.weight", "default 1000");
    held(&lf, "io.weight", "default 100", g);
    held(&hf, "io.weight", "default 1000", g);
    let ratio = io_split(g, "io-weight-bfq");
    assert!(
        ratio >= 1.2,
        "under bfq the weight-1000 tenant moved only {ratio:.2} times the bytes of the \
         weight-100 one"
    );
}

#[test]
fn memory_high_throttles_a_memory_hog_above_it() {
    let Some(g) = guest() else { return };
    let doc = g.cmd("memory-high").json(g);
    let (_, f) = g.tenant_with("memory-high", "memory.high", "33554432");
    held(&f, "memory.max", "134217728", g);
    // memory.events `high`: the kernel throttled the tenant over memory.high (the hog's
    // ~51M is far below memory.max: nothing else explains it).
    held(&f, "memory.events", "high>0", g);
    println!(
        "memory_high=32M (memory=128M, swap=256M, a 51M hog): memory.events high > 0; peak {} bytes, notes {:?}",
        doc["tenant"]["usage"]["memory_peak"], doc["report"]["notes"]
    );
}

#[test]
fn swap_lets_a_memory_hog_at_its_limit_swap() {
    let Some(g) = guest() else { return };
    g.cmd("swap").json(g);
    let (_, f) = g.tenant_with("swap", "memory.swap.max", "134217728");
    held(&f, "memory.max", "67108864", g);
    held(&f, "memory.swap.current", ">0", g);
    println!("swap=128M (memory=64M): memory.swap.max 134217728, memory.swap.current > 0");
}

#[test]
fn memory_min_and_memory_low_are_set_and_read_back() {
    let Some(g) = guest() else { return };
    g.cmd("protect").json(g);
    let (_, f) = g.tenant_with("protect", "memory.min", "33554432");
    held(&f, "memory.low", "67108864", g);
    println!("memory_min=32M,memory_low=64M: memory.min 33554432, memory.low 67108864");
}

#[test]
fn memory_low_protects_as_the_kernels_selftest_checks() {
    let Some(g) = guest() else { return };
    let c = g.cmd("check-memory-low");
    println!("isobench check memory-low:\n{}{}", c.out, c.err);
    assert_eq!(c.rc, Some(0), "{}\n{}\n{}", c.out, c.err, g.context());
}

#[test]
fn cpu_burst_is_set_and_read_back() {
    let Some(g) = guest() else { return };
    g.cmd("burst").json(g);
    let (_, f) = g.tenant_with("burst", "cpu.max.burst", "20000");
    held(&f, "cpu.max", "50000 100000", g);
    println!("cpus=0.5,cpu_burst=20ms: cpu.max 50000 100000, cpu.max.burst 20000");
}

/// `KEY VALUE` lines of a cpu.stat the guest kept.
fn cpu_stat(g: &Guest, step: &str) -> BTreeMap<String, u64> {
    g.file(&format!("{step}.cpustat"))
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// The median CPU time (µs) a tenant got per freeze-thaw cycle.
fn per_cycle(g: &Guest, step: &str) -> f64 {
    let usage: Vec<f64> = g
        .file(&format!("{step}.cycles"))
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    let mut d: Vec<f64> = usage.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        d.len() >= 5,
        "{step}: {} freeze-thaw cycles seen\n{}",
        d.len(),
        g.context()
    );
    d.sort_by(f64::total_cmp);
    d[d.len() / 2]
}

/// A hog thawed 60 ms of every 460 ms under cpu.max 20000 100000: with cpu.max.burst 20000
/// the kernel lets it run past the quota after the frozen periods (cpu.stat counts those
/// bursts); without, it never does.
#[test]
fn cpu_burst_lets_a_bursty_tenant_run_past_its_quota_after_idle_periods() {
    let Some(g) = guest() else { return };
    g.cmd("burst-on").json(g);
    g.cmd("burst-off").json(g);
    let on = cpu_stat(g, "burst-on");
    let off = cpu_stat(g, "burst-off");
    assert!(
        on.get("nr_bursts").is_some_and(|&n| n > 0) && on["burst_usec"] > 0,
        "with cpu.max.burst no period ran past the quota: {on:?}\n{}",
        g.context()
    );
    assert_eq!(
        (off.get("nr_bursts"), off.get("burst_usec")),
        (Some(&0), Some(&0)),
        "without cpu.max.burst: {off:?}"
    );
    assert!(off["nr_throttled"] > 0, "{off:?}");
    let (with, without) = (per_cycle(g, "burst-on"), per_cycle(g, "burst-off"));
    println!(
        "cpu.max 20000 100000, thawed 60 of every 460 ms: {:.1} ms of CPU per thaw with \
         cpu.max.burst 20000 ({} bursts, {:.1} ms past the quota), {:.1} ms without ({} \
         throttled periods)",
        with / 1000.0,
        on["nr_bursts"],
        on["burst_usec"] as f64 / 1000.0,
        without / 1000.0,
        off["nr_throttled"]
    );
    // (The CPU time per thaw is printed, not asserted: under TCG the freezer's timing
    // drifts by tens of ms; cpu.stat's counts are the kernel's own.)
}

#[test]
fn io_max_write_iops_holds_direct_writes_to_the_limit() {
    let Some(g) = guest() else { return };
    let doc = g.cmd("iops").json(g);
    let files = g.files("iops");
    assert!(
        files.values().any(|f| f
            .get("io.max")
            .is_some_and(|v| v.iter().any(|v| v.contains("wiops=50")))),
        "no tenant's io.max read wiops=50: {files:?}\n{}",
        g.context()
    );
    let usage = &doc["tenant"]["usage"];
    let ops = usage["io_write_ops"].as_f64().unwrap();
    let elapsed = doc["report"]["elapsed_s"].as_f64().unwrap();
    assert!(ops > 0.0, "{usage}");
    // The kernel's allowance: about one second's worth beyond the rate.
    assert!(
        ops <= 50.0 * (elapsed + 1.0),
        "{ops} writes in {elapsed} s under io.max wiops=50: {usage}"
    );
    println!(
        "io.max wiops=50: {:.1} writes/s over {elapsed:.1} s",
        ops / elapsed
    );
}

/// A partition needs a parent that is one: the tenant's parent (the run's scope under
/// isobench.slice) is not, so the kernel holds `root invalid`, and isobench refuses with
/// the kernel's reason and the fix instead of running a tenant that is no partition.
#[test]
fn a_cpuset_partition_under_a_parent_that_is_none_is_refused_with_the_kernels_reason() {
    let Some(g) = guest() else { return };
    let c = g.cmd("partition");
    println!("cpuset=1,cpuset_partition=root: exit {:?}\n{}", c.rc, c.err);
    assert_ne!(c.rc, Some(0), "{}", c.out);
    assert!(
        c.err.contains("cpuset.cpus.partition")
            && c.err.contains("root invalid")
            && c.err.contains("Parent is not a partition root"),
        "{}",
        c.err
    );
    assert!(g.files("partition").is_empty(), "a tenant ran");
}

#[test]
fn io_latency_is_refused_with_the_reason_and_nothing_is_created() {
    let Some(g) = guest() else { return };
    let c = g.cmd("io-latency");
    println!("io_latency=10ms: exit {:?}\n{}", c.rc, c.err);
    assert_ne!(c.rc, Some(0), "{}", c.out);
    assert!(
        c.err.contains("io_latency") && c.err.contains("CONFIG_BLK_CGROUP_IOLATENCY"),
        "{}",
        c.err
    );
    assert!(g.files("io-latency").is_empty(), "a tenant ran");
    assert_eq!(
        g.file("before-latency.txt"),
        g.file("after-latency.txt"),
        "isobench.slice changed"
    );
}
