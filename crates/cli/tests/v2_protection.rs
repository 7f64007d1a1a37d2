//! The `protection` kind on a real cgroup v2 host under systemd: the Debian 12 guest of
//! scripts/v2-guest (2 vCPUs under TCG), booted once for this whole binary. Inside
//! it the static isobench runs two protection scenarios on platform cgroup, as a user
//! would (`isobench run`, then `isobench export latest --format json`); the steps are in
//! v2_protection.sh.
//!
//! - A CPU hog beside isobench's service, under the tenants' planned limits (`none`) and
//!   under a setting for cgroup v2 only (cpu.weight 1000 for the service and 10 for the
//!   hog, cpu.max a quarter of a CPU for the hog, memory.low for the service): the v2
//!   setting runs, its knobs are recorded as set and as read back from the v2 files, both
//!   settings have their summary rows, and under the setting the hog gets at most its
//!   quarter CPU and does less work while the service keeps its rate.
//! - A memory hog beside the service, both tenants in a cgroup of 288M: the hog allowed
//!   224M (it holds 201M) takes the service's page cache and memory; held to 48M
//!   (memory.max), it leaves them and the service keeps its rate. What the unlimited hog
//!   costs the service's rate depends on the host's load (isol p05 fell to 34-58% on a busy
//!   host, stayed at 93% on a quiet one), so it is printed, not asserted.
//!
//! Guest timings are function, not speed (TCG): the tests assert what a setting changes,
//! never how fast anything ran. Needs QEMU, the guest image and the static isobench
//! (common/guest.rs); without one, each test prints SKIP with the reason and passes, except
//! under `CI=true`, where it fails.

mod common;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use common::guest::Guest;
use serde_json::Value;

/// The line the guest prints after its last step.
const ALL_RAN: &str = "isobench-v2-protection: every step ran";

/// The guest, booted once for this binary; `None` when the test skipped.
fn guest() -> Option<&'static Guest> {
    static GUEST: OnceLock<Result<Guest, String>> = OnceLock::new();
    common::guest::once(&GUEST, "v2-protection", common::guest::missing, || {
        Guest::boot(
            "v2-protection",
            &["--timeout", "900"],
            "tests/v2_protection.sh",
        )
    })
}

/// One protection run as the guest exported it.
struct Run<'g> {
    name: &'static str,
    doc: Value,
    guest: &'g Guest,
}

/// What one episode showed.
#[derive(Debug)]
struct Episode {
    /// The limits in force, as set and as read back (`null`: the planned ones).
    limits: Value,
    /// Each tenant's CPU use (CPUs) while the aggressor ran.
    cpus: BTreeMap<String, f64>,
    /// When the trial ran, seconds since the epoch (the guest's clock).
    span: (f64, f64),
}

impl<'g> Run<'g> {
    fn of(guest: &'g Guest, name: &'static str) -> Run<'g> {
        let run = guest.cmd(name);
        assert_eq!(
            run.rc,
            Some(0),
            "isobench run {name}.toml failed\nstderr: {}\nstdout: {}\n{}",
            run.err,
            run.out,
            guest.context()
        );
        let doc = guest.cmd(&format!("{name}-export")).json(guest);
        assert_eq!(doc["results"]["run"]["status"], "complete", "{name}: {doc}");
        Run { name, doc, guest }
    }

    /// The run's terminal report, for failure messages.
    fn shown(&self) -> String {
        self.guest.cmd(self.name).out
    }

    /// The protection summary: the number in column `col` of condition `row`, `None` when
    /// the cell is empty (lat-imp without a baseline p99: the service's set-up took the
    /// stable period).
    fn figure(&self, row: &str, col: &str) -> Option<f64> {
        let s = self.doc["results"]["sections"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["id"] == "protection"))
            .unwrap_or_else(|| panic!("{}: no protection section\n{}", self.name, self.shown()));
        let c = s["columns"]
            .as_array()
            .and_then(|c| c.iter().position(|c| c["name"] == col))
            .unwrap_or_else(|| panic!("no column {col}: {}", s["columns"]));
        let r = s["rows"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r[0]["text"] == row))
            .unwrap_or_else(|| panic!("{}: no row {row}\n{}", self.name, self.shown()));
        r[c]["value"].as_f64()
    }

    /// The number in column `col` of condition `row`, which must have one.
    fn cell(&self, row: &str, col: &str) -> f64 {
        self.figure(row, col)
            .unwrap_or_else(|| panic!("{}: {row} has no {col}\n{}", self.name, self.shown()))
    }

    /// The plan's condition ids.
    fn conditions(&self) -> Vec<String> {
        self.doc["results"]["plan"]["conditions"]
            .as_array()
            .map(|cs| {
                cs.iter()
                    .filter_map(|c| c["id"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The episode (the service's trial) of condition `cond`.
    fn episode(&self, cond: &str) -> Episode {
        let t = self.doc["results"]["trials"]
            .as_array()
            .and_then(|ts| {
                ts.iter()
                    .find(|t| t["condition"] == cond && t["probe"] == "service")
            })
            .unwrap_or_else(|| panic!("{}: no episode of {cond}", self.name));
        let tl = &t["timeline"];
        let switch = |on: bool| {
            tl["switches"]
                .as_array()
                .and_then(|s| s.iter().find(|s| s["on"] == on))
                .and_then(|s| s[if on { "done_ns" } else { "requested_ns" }].as_f64())
                .unwrap_or_else(|| panic!("{cond}: no switch on={on} in {tl}"))
        };
        let (on, off) = (switch(true), switch(false));
        let mut cpus = BTreeMap::new();
        for c in tl["cpu"].as_array().into_iter().flatten() {
            let inside: Vec<(f64, f64)> = c["samples"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| Some((s["at_ns"].as_f64()?, s["cpu_ns"].as_f64()?)))
                .filter(|(at, _)| (on..=off).contains(at))
                .collect();
            if let (Some(a), Some(b)) = (inside.first(), inside.last()) {
                if b.0 > a.0 {
                    cpus.insert(
                        c["tenant"].as_str().unwrap_or_default().to_string(),
                        (b.1 - a.1) / (b.0 - a.0),
                    );
                }
            }
        }
        let at = |k: &str| {
            t[k].as_str()
                .and_then(epoch_s)
                .unwrap_or_else(|| panic!("{cond}: {k} is no time: {}", t[k]))
        };
        Episode {
            limits: t["limits"].clone(),
            cpus,
            span: (at("started_at"), at("ended_at")),
        }
    }

    /// The largest value of `field` (anon, file or swap, bytes) the guest saw in tenant
    /// `tenant`'s memory during `span`, and the last one.
    fn memory(&self, tenant: &str, field: usize, span: (f64, f64)) -> (f64, f64) {
        let seen: Vec<f64> = self
            .guest
            .file(&format!("{}.memory", self.name))
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let at: f64 = f.first()?.parse().ok()?;
                (f.len() == 5 && f[1] == tenant && (span.0..=span.1).contains(&at))
                    .then(|| f[2 + field].parse().ok())?
            })
            .collect();
        assert!(
            !seen.is_empty(),
            "{}: the guest never saw tenant {tenant} between {span:?}",
            self.name
        );
        (
            seen.iter().copied().fold(0.0, f64::max),
            *seen.last().unwrap(),
        )
    }
}

/// Seconds since the epoch of an RFC 3339 time in UTC (`2026-11-29T01:45:53.123Z`).
fn epoch_s(t: &str) -> Option<f64> {
    let (date, time) = t.trim_end_matches('Z').split_once('T')?;
    let d: Vec<i64> = date
        .split('-')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let h: Vec<f64> = time
        .split(':')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let [y, m, day] = d[..] else { return None };
    let [hh, mm, ss] = h[..] else { return None };
    // Days from 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days as f64 * 86_400.0 + hh * 3600.0 + mm * 60.0 + ss)
}

const MIB: f64 = 1048576.0;

#[test]
fn the_guest_ran_every_step_and_left_no_tenant() {
    let Some(g) = guest() else { return };
    assert_eq!(g.exit, 0, "{}", g.context());
    assert!(g.log.contains(ALL_RAN), "{}", g.context());
    let left = g.cmd("left");
    assert_eq!(left.rc, Some(0), "{}", left.err);
    assert_eq!(left.out.trim(), "", "isobench cgroups left");
}

/// The v2 setting runs beside `none`, with its knobs read back; under it the hog is held
/// to its quarter CPU and does less work, and the service keeps its rate.
#[test]
fn a_cgroup_v2_setting_runs_beside_none_with_its_knobs_read_back_and_holds_the_cpu_hog() {
    let Some(g) = guest() else { return };
    let run = Run::of(g, "cpu");
    let (none, v2) = ("none/cpu@100", "v2-knobs/cpu@100");
    let conds = run.conditions();
    assert!(
        conds.iter().any(|c| c == none) && conds.iter().any(|c| c == v2),
        "the plan's conditions: {conds:?}"
    );
    // The knobs, as set and as read back from the tenants' v2 files.
    let (n, w) = (run.episode(none), run.episode(v2));
    assert!(n.limits.is_null(), "none changed limits: {}", n.limits);
    let (svc, batch) = (&w.limits["svc"], &w.limits["batch"]);
    assert_eq!(svc["weight"], 1000, "{}", w.limits);
    assert_eq!(svc["read_back"]["weight"], 1000, "{}", w.limits);
    assert_eq!(svc["read_back"]["memory_low"], "32M", "{}", w.limits);
    assert_eq!(batch["read_back"]["weight"], 10, "{}", w.limits);
    assert_eq!(batch["read_back"]["cpus"], 0.25, "{}", w.limits);
    // Both settings have their figures.
    let cols = [
        "isol p01",
        "isol p05",
        "isol p50",
        "isol mean",
        "lat-imp",
        "SLO seconds",
        "aggressor rate",
    ];
    let figures = |row: &str| -> Vec<f64> {
        cols.iter()
            .map(|c| run.figure(row, c).unwrap_or(f64::NAN))
            .collect()
    };
    let (fn_, fw) = (figures(none), figures(v2));
    let cpu = |e: &Episode, t: &str| {
        *e.cpus
            .get(t)
            .unwrap_or_else(|| panic!("no CPU use of {t} while the hog ran: {e:?}"))
    };
    println!(
        "CPU hog beside the service (40 requests/s), one episode each:\n  {cols:?}\n  \
         none:     {fn_:.1?}; CPUs while the hog ran: service {:.2}, hog {:.2}\n  \
         v2-knobs: {fw:.1?}; CPUs while the hog ran: service {:.2}, hog {:.2}",
        cpu(&n, "svc"),
        cpu(&n, "batch"),
        cpu(&w, "svc"),
        cpu(&w, "batch"),
    );
    // Under the setting the service keeps its rate...
    let isol = run.cell(v2, "isol mean");
    assert!(isol >= 90.0, "v2-knobs: isol mean {isol}%\n{}", run.shown());
    // ... and the hog gets its quarter CPU (sampled each second: a little over it), where
    // with equal weights and no cap it had what the service left.
    let (hog_v2, hog_none) = (cpu(&w, "batch"), cpu(&n, "batch"));
    assert!(
        hog_v2 <= 0.35 && hog_v2 < 0.6 * hog_none,
        "the hog's CPUs: {hog_v2:.2} under cpu.max 25000 100000, {hog_none:.2} without"
    );
    let (rn, rw) = (
        run.cell(none, "aggressor rate"),
        run.cell(v2, "aggressor rate"),
    );
    assert!(
        rw < 0.6 * rn,
        "the hog's rate: {rw} under the setting, {rn} without\n{}",
        run.shown()
    );
}

/// memory.max on the hog leaves the service its page cache and memory and its rate; without
/// it the hog takes the memory the two share and the service falls behind.
#[test]
fn a_memory_hog_beside_the_service_takes_its_page_cache_unless_held_to_48m() {
    let Some(g) = guest() else { return };
    let run = Run::of(g, "memory");
    let (none, held) = ("none/memhog@90", "limited/memhog@90");
    let (n, h) = (run.episode(none), run.episode(held));
    assert!(n.limits.is_null(), "none changed limits: {}", n.limits);
    assert_eq!(
        h.limits["batch"]["read_back"]["memory"], "48M",
        "{}",
        h.limits
    );
    // What the hog held, and what the service kept of its file in the page cache and what
    // it had in swap.
    let (hog_none, _) = run.memory("batch", 0, n.span);
    let (hog_held, _) = run.memory("batch", 0, h.span);
    let file = |e: &Episode| {
        let f = run.memory("svc", 1, e.span);
        let swap = run.memory("svc", 2, e.span).0;
        (f.0 / MIB, f.1 / MIB, swap / MIB)
    };
    let fig = |row: &str| -> [f64; 5] {
        [
            "isol p05",
            "isol p50",
            "isol mean",
            "lat-imp",
            "SLO seconds",
        ]
        .map(|c| run.figure(row, c).unwrap_or(f64::NAN))
    };
    let (fn_, fh) = (fig(none), fig(held));
    println!(
        "memory hog beside the service (20 requests/s), one episode each (isol p05, p50, \
         mean, lat-imp, SLO seconds):\n  none:    {fn_:.1?}; the hog held up to {:.0} MiB; \
         the service's file cache (most, last) and swap (most), MiB: {:.0?}\n  limited: \
         {fh:.1?}; the hog held up to {:.0} MiB; the service's file cache and swap: {:.0?}",
        hog_none / MIB,
        file(&n),
        hog_held / MIB,
        file(&h),
    );
    assert!(hog_held <= 48.0 * MIB, "the held hog had {hog_held} bytes");
    assert!(
        hog_none > 100.0 * MIB,
        "unlimited, the hog held only {:.0} MiB",
        hog_none / MIB
    );
    // Without its limit the hog takes the service's page cache (and some of its memory, to
    // swap); held to 48M it leaves it. What that costs the service's rate depends on how
    // loaded the host is: its worst seconds (isol p05) fell to 58% and 34% against 99% and
    // 84% held on a busy host, but stayed at 93% against 99% on a quiet one, where only its
    // latency showed the loss. So the rate is asserted only where protection holds it.
    let (cache_none, cache_held) = (file(&n).1, file(&h).1);
    assert!(
        cache_none <= cache_held - 16.0,
        "the service's file cache at the end: {cache_none:.0} MiB beside the unlimited hog, \
         {cache_held:.0} MiB beside the held one"
    );
    let p05_held = run.cell(held, "isol p05");
    let isol_held = run.cell(held, "isol mean");
    assert!(
        isol_held >= 85.0 && p05_held >= 75.0,
        "beside the hog held to 48M the service kept only {isol_held}% (p05 {p05_held}%)\n{}",
        run.shown()
    );
}
