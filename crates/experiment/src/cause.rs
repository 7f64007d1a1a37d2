//! The cause of a result, named from measured evidence: which placement made a victim lose
//! (or gain) under a stressor.
//!
//! Why: a degradation that comes from placement (CPUs the victim and the aggressor share, the
//! CPU the disk's interrupts are delivered to, idle states) is not a failure of the resource
//! the stressor targets, and a reader choosing isolation settings must see which it is. Each
//! trial records what the victim's threads and the host's CPUs did while the aggressors ran
//! and while they did not ([`isobench_platform::sched::Phases`]); [`attribute`] compares the
//! two and names a cause only when the numbers show it, with the numbers. No evidence, no
//! note.
//!
//! The rules (thresholds in [`Rules`]):
//! - `shared-cpus`: the victim's and the aggressor's CPUs overlap, the result got worse, and
//!   under the stressor the victim's threads waited on a run queue for `wait_share_rise` more
//!   of the time than alone, at least `wait_factor` times as much (of the time, or per
//!   timeslice), and enough to account for `wait_part` of the loss (time spent waiting is
//!   time not spent on the work: a degradation of 96% with 5 points more waiting is mostly
//!   something else, such as the disk itself).
//! - `irq-cpu`: a disk probe, the host's one interrupting disk delivers its interrupts to a
//!   CPU the aggressor uses, and the victim's waits rose as for `shared-cpus`.
//! - `softirq`: the result got worse, softirq time on the victim's CPUs rose by
//!   `softirq_rise` CPUs and at least `softirq_factor` times, and that rise (as a share of
//!   those CPUs) accounts for `wait_part` of the loss.
//! - `idle-states`: the metric improved and the victim's CPUs were idle `idle_drop` less of
//!   the time under the stressor: a busy neighbour kept them out of idle, so wake-ups were
//!   faster. The host's cpuidle driver is named when recorded.

use std::fmt::Write as _;

use isobench_platform::sched::SchedTotals;

pub use isobench_results::{Cause, CauseKind};

/// Thresholds of the rules.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rules {
    /// Run-queue wait per timeslice under the stressor over alone, at least.
    pub wait_factor: f64,
    /// Rise of the share of time the victim's threads waited on a run queue, at least.
    pub wait_share_rise: f64,
    /// That rise over the share of time the degradation lost, at least (a throughput that
    /// fell by 30% lost 30% of the time; a latency 100% worse, half of it).
    pub wait_part: f64,
    /// Rise of the softirq time on the victim's CPUs, CPUs, at least.
    pub softirq_rise: f64,
    /// Softirq time under the stressor over alone, at least.
    pub softirq_factor: f64,
    /// Drop of the victim's CPUs' idle share, at least.
    pub idle_drop: f64,
    /// Shortest phase (each side) the rules look at, seconds.
    pub min_phase_s: f64,
}

impl Default for Rules {
    fn default() -> Self {
        Rules {
            wait_factor: 2.0,
            wait_share_rise: 0.03,
            wait_part: 0.25,
            softirq_rise: 0.05,
            softirq_factor: 2.0,
            idle_drop: 0.2,
            min_phase_s: 0.2,
        }
    }
}

/// The interrupts of the host's disk, as recorded with the run.
#[derive(Debug, Clone, PartialEq)]
pub struct DiskIrq {
    /// `vda`.
    pub device: String,
    /// The handlers that raised them (`virtio1-req.0`).
    pub handlers: Vec<String>,
    /// CPUs they are delivered to.
    pub cpus: Vec<usize>,
}

/// Everything the rules look at for one cell.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence<'a> {
    /// Degradation, percent (negative: improved).
    pub estimate: f64,
    /// Significant after correction.
    pub significant: bool,
    /// Whether the metric is better lower (a latency: 100% worse is twice the time).
    pub lower_is_better: bool,
    /// Whether the probe measures a disk.
    pub disk_probe: bool,
    /// The victim's CPUs.
    pub victim_cpus: &'a [usize],
    /// The aggressors' CPUs.
    pub aggressor_cpus: &'a [usize],
    /// The victim alone (aggressors idle or frozen).
    pub alone: &'a SchedTotals,
    /// The victim under the stressor.
    pub stressed: &'a SchedTotals,
    /// The host's cpuidle driver (`none` when there is none), when recorded.
    pub cpuidle_driver: Option<&'a str>,
    /// The interrupts of the host's only interrupting disk, when recorded.
    pub disk_irq: Option<&'a DiskIrq>,
}

/// `0-1`, `0,2-3`.
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut out = String::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        let _ = if j > i {
            write!(out, "{}-{}", v[i], v[j])
        } else {
            write!(out, "{}", v[i])
        };
        i = j + 1;
    }
    out
}

fn cpus_word(cpus: &[usize]) -> String {
    if cpus.len() == 1 {
        format!("cpu {}", cpus[0])
    } else {
        format!("cpus {}", cpu_list(cpus))
    }
}

/// Microseconds as text: one decimal below 10.
fn us(v: f64) -> String {
    if v < 9.95 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// Run-queue wait per timeslice (us) and share of the time waiting.
fn waits(t: &SchedTotals) -> Option<(f64, f64)> {
    (t.timeslices > 0 && t.interval_s > 0.0).then(|| {
        (
            t.runq_wait_s / t.timeslices as f64 * 1e6,
            t.runq_wait_s / t.interval_s,
        )
    })
}

/// Per-CPU quantity over `cpus` (all CPUs when empty), in CPUs (seconds per second).
fn over_cpus(v: &[f64], cpus: &[usize], interval_s: f64) -> Option<f64> {
    if v.is_empty() || interval_s <= 0.0 {
        return None;
    }
    let sum: f64 = if cpus.is_empty() {
        v.iter().sum()
    } else {
        cpus.iter().filter_map(|&c| v.get(c)).sum()
    };
    Some(sum / interval_s)
}

/// The share of the time the degradation stands for.
fn lost_time(e: &Evidence) -> f64 {
    let d = e.estimate.max(0.0) / 100.0;
    if e.lower_is_better {
        d / (1.0 + d)
    } else {
        d
    }
}

/// The causes the evidence shows, in [`CauseKind`] order; empty when it shows none.
pub fn attribute(e: &Evidence, rules: &Rules) -> Vec<Cause> {
    let mut out = Vec::new();
    if !e.significant
        || e.alone.interval_s < rules.min_phase_s
        || e.stressed.interval_s < rules.min_phase_s
    {
        return out;
    }
    let victim_cpus: Vec<usize> = if e.victim_cpus.is_empty() {
        (0..e.alone.idle_s.len()).collect()
    } else {
        e.victim_cpus.to_vec()
    };
    if e.estimate > 0.0 {
        if let Some(w) = waited(e, rules) {
            out.extend(shared_cpus(e, &victim_cpus, &w));
            out.extend(irq_cpu(e, &w));
        }
        out.extend(softirq(e, rules, &victim_cpus));
    } else {
        out.extend(idle_states(e, rules, &victim_cpus));
    }
    out
}

/// The victim's run-queue waits alone and under the stressor: per timeslice (us) and share
/// of the time.
struct Waits {
    alone_us: f64,
    alone_share: f64,
    stressed_us: f64,
    stressed_share: f64,
}

/// The waits, when they rose under the stressor enough to explain part of the loss.
fn waited(e: &Evidence, rules: &Rules) -> Option<Waits> {
    let ((a_us, a_share), (s_us, s_share)) = (waits(e.alone)?, waits(e.stressed)?);
    ((s_us >= rules.wait_factor * a_us || s_share >= rules.wait_factor * a_share)
        && s_share - a_share >= rules.wait_share_rise
        && s_share - a_share >= rules.wait_part * lost_time(e))
    .then_some(Waits {
        alone_us: a_us,
        alone_share: a_share,
        stressed_us: s_us,
        stressed_share: s_share,
    })
}

/// The CPUs of `cpus` the aggressor uses (all of them when its CPUs are not known).
fn on_aggressor(e: &Evidence, cpus: &[usize]) -> Vec<usize> {
    cpus.iter()
        .copied()
        .filter(|c| e.aggressor_cpus.is_empty() || e.aggressor_cpus.contains(c))
        .collect()
}

/// Shared CPUs: the victim waited longer on run queues it shares with the aggressor.
fn shared_cpus(e: &Evidence, victim_cpus: &[usize], w: &Waits) -> Option<Cause> {
    let shared = on_aggressor(e, victim_cpus);
    if shared.is_empty() {
        return None;
    }
    let both = if shared.len() == victim_cpus.len() {
        format!("victim and aggressor both on {}", cpus_word(&shared))
    } else {
        format!("victim and aggressor share {}", cpus_word(&shared))
    };
    Some(Cause {
        kind: CauseKind::SharedCpus,
        text: format!(
            "shared CPUs: run-queue wait {} us per timeslice under the stressor vs \
             {} us alone ({:.0}% vs {:.0}% of the time); {both}",
            us(w.stressed_us),
            us(w.alone_us),
            w.stressed_share * 100.0,
            w.alone_share * 100.0
        ),
    })
}

/// Disk IRQ CPU: a disk probe's completions are delivered to a CPU the aggressor uses.
fn irq_cpu(e: &Evidence, w: &Waits) -> Option<Cause> {
    let irq = e.disk_irq.filter(|_| e.disk_probe)?;
    if on_aggressor(e, &irq.cpus).is_empty() {
        return None;
    }
    Some(Cause {
        kind: CauseKind::IrqCpu,
        text: format!(
            "disk IRQ CPU: {}'s interrupts ({}) are delivered to {}, which the \
             aggressor uses; each I/O completion wakes the probe, which then \
             waited {} us per timeslice on the run queue under the stressor \
             vs {} us alone",
            irq.device,
            irq.handlers.join(", "),
            cpus_word(&irq.cpus),
            us(w.stressed_us),
            us(w.alone_us)
        ),
    })
}

/// Softirq: more softirq work on the victim's CPUs under the stressor.
fn softirq(e: &Evidence, rules: &Rules, victim_cpus: &[usize]) -> Option<Cause> {
    let a = over_cpus(&e.alone.softirq_s, victim_cpus, e.alone.interval_s)?;
    let s = over_cpus(&e.stressed.softirq_s, victim_cpus, e.stressed.interval_s)?;
    let share_rise = (s - a) / victim_cpus.len().max(1) as f64;
    (s - a >= rules.softirq_rise
        && s >= rules.softirq_factor * a
        && share_rise >= rules.wait_part * lost_time(e))
    .then(|| Cause {
        kind: CauseKind::Softirq,
        text: format!(
            "softirq: {s:.2} CPUs of softirq work on {} under the stressor vs \
             {a:.2} alone",
            cpus_word(victim_cpus)
        ),
    })
}

/// Idle states: the victim's CPUs idled less under the stressor, so its wake-ups were
/// cheaper (an improvement).
fn idle_states(e: &Evidence, rules: &Rules, victim_cpus: &[usize]) -> Option<Cause> {
    let n = victim_cpus.len().max(1) as f64;
    let a = over_cpus(&e.alone.idle_s, victim_cpus, e.alone.interval_s)? / n;
    let s = over_cpus(&e.stressed.idle_s, victim_cpus, e.stressed.interval_s)? / n;
    (a - s >= rules.idle_drop).then(|| {
        let driver = match e.cpuidle_driver {
            Some("none") => {
                "; no cpuidle driver here: an idle vCPU halts and is woken through the \
                 hypervisor"
                    .to_string()
            }
            Some(d) => format!("; cpuidle driver {d}"),
            None => String::new(),
        };
        Cause {
            kind: CauseKind::IdleStates,
            text: format!(
                "idle states: {} idle {:.0}% of the time under the stressor vs {:.0}% \
                 alone, so the probe's wake-ups found them awake{driver}",
                cpus_word(victim_cpus),
                s * 100.0,
                a * 100.0
            ),
        }
    })
}

/// The interrupts of the host's disk from the run's recorded `device_irqs` (the platform's
/// `irq_affinity`): `None` unless exactly one disk raised interrupts (with several, which
/// one a probe used is not recorded). A CPU counts when it took at least 5% of them.
pub fn disk_irq(device_irqs: &serde_json::Value) -> Option<DiskIrq> {
    let mut found = Vec::new();
    for d in device_irqs.as_array()? {
        if d.get("kind").and_then(|k| k.as_str()) != Some("disk") {
            continue;
        }
        let lines: Vec<(String, Vec<u64>)> = d
            .get("irqs")
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
            .map(|irq| {
                let handler = irq
                    .get("desc")
                    .and_then(|v| v.as_str())
                    .and_then(|s| s.split_whitespace().last())
                    .unwrap_or("")
                    .to_string();
                let counts = irq
                    .get("per_cpu")
                    .and_then(|v| v.as_array())
                    .into_iter()
                    .flatten()
                    .filter_map(|x| x.as_u64())
                    .collect();
                (handler, counts)
            })
            .collect();
        let mut per_cpu: Vec<u64> = Vec::new();
        for (_, counts) in &lines {
            if per_cpu.len() < counts.len() {
                per_cpu.resize(counts.len(), 0);
            }
            for (i, c) in counts.iter().enumerate() {
                per_cpu[i] += c;
            }
        }
        let total: u64 = per_cpu.iter().sum();
        if total == 0 {
            continue;
        }
        let major = |n: u64| n as f64 >= 0.05 * total as f64;
        found.push(DiskIrq {
            device: d.get("device")?.as_str()?.to_string(),
            handlers: lines
                .iter()
                .filter(|(_, c)| major(c.iter().sum()))
                .map(|(h, _)| h.clone())
                .collect(),
            cpus: (0..per_cpu.len()).filter(|&i| major(per_cpu[i])).collect(),
        });
    }
    (found.len() == 1).then(|| found.remove(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A victim over `secs` seconds: run-queue wait, timeslices, softirq and idle per CPU.
    fn totals(
        secs: f64,
        wait_s: f64,
        slices: u64,
        softirq: [f64; 2],
        idle: [f64; 2],
    ) -> SchedTotals {
        SchedTotals {
            interval_s: secs,
            run_s: secs * 0.5,
            runq_wait_s: wait_s,
            timeslices: slices,
            idle_s: idle.to_vec(),
            softirq_s: softirq.to_vec(),
            irq_s: vec![0.0; 2],
            steal_s: vec![0.0; 2],
        }
    }

    fn vda() -> DiskIrq {
        DiskIrq {
            device: "vda".into(),
            handlers: vec!["virtio1-req.0".into()],
            cpus: vec![1],
        }
    }

    fn evidence<'a>(
        estimate: f64,
        alone: &'a SchedTotals,
        stressed: &'a SchedTotals,
        irq: Option<&'a DiskIrq>,
    ) -> Evidence<'a> {
        Evidence {
            estimate,
            significant: true,
            lower_is_better: false,
            disk_probe: irq.is_some(),
            victim_cpus: &[0, 1],
            aggressor_cpus: &[0, 1],
            alone,
            stressed,
            cpuidle_driver: Some("none"),
            disk_irq: irq,
        }
    }

    fn kinds(c: &[Cause]) -> Vec<CauseKind> {
        c.iter().map(|c| c.kind).collect()
    }

    #[test]
    fn direct_io_waiting_on_shared_cpus_and_the_disk_irq_cpu() {
        // 2 s each side, 10,000 I/Os: 4 us of run-queue wait per I/O alone, 85 us under the
        // stressor.
        let alone = totals(2.0, 0.04, 10_000, [0.0, 0.01], [1.2, 1.0]);
        let stressed = totals(2.0, 0.85, 10_000, [0.0, 0.012], [0.0, 0.0]);
        let irq = vda();
        let c = attribute(
            &evidence(30.0, &alone, &stressed, Some(&irq)),
            &Rules::default(),
        );
        assert_eq!(kinds(&c), vec![CauseKind::SharedCpus, CauseKind::IrqCpu]);
        assert_eq!(
            c[0].text,
            "shared CPUs: run-queue wait 85 us per timeslice under the stressor vs 4.0 us alone \
             (42% vs 2% of the time); victim and aggressor both on cpus 0-1"
        );
        assert!(c[1].text.starts_with(
            "disk IRQ CPU: vda's interrupts (virtio1-req.0) are delivered to cpu 1, which the \
             aggressor uses"
        ));
        // Disjoint CPUs: neither shared CPUs nor the IRQ CPU.
        let mut e = evidence(30.0, &alone, &stressed, Some(&irq));
        e.victim_cpus = &[0];
        e.aggressor_cpus = &[1];
        assert_eq!(
            kinds(&attribute(&e, &Rules::default())),
            vec![CauseKind::IrqCpu]
        );
        e.aggressor_cpus = &[2, 3];
        assert!(attribute(&e, &Rules::default()).is_empty());
    }

    #[test]
    fn a_cpu_bound_victim_waits_more_of_the_time_not_longer_per_slice() {
        // The same 1.1 ms per timeslice, but 36% of the time instead of 11%.
        let alone = totals(1.85, 0.2, 175, [0.0; 2], [0.0; 2]);
        let stressed = totals(2.14, 0.76, 648, [0.0; 2], [0.0; 2]);
        let c = attribute(&evidence(33.0, &alone, &stressed, None), &Rules::default());
        assert_eq!(kinds(&c), vec![CauseKind::SharedCpus]);
    }

    #[test]
    fn waits_too_small_for_the_loss_name_nothing() {
        // The disk itself: 96% lost, 5 points more waiting (6 -> 204 us per timeslice).
        let alone = totals(1.97, 0.14, 23_892, [0.0; 2], [0.0; 2]);
        let stressed = totals(2.28, 0.28, 1_367, [0.0; 2], [0.0; 2]);
        let irq = vda();
        let e = evidence(96.6, &alone, &stressed, Some(&irq));
        assert!(attribute(&e, &Rules::default()).is_empty());
        // The same waits behind a 20% loss do account for it.
        let e = evidence(20.0, &alone, &stressed, Some(&irq));
        assert_eq!(
            kinds(&attribute(&e, &Rules::default())),
            vec![CauseKind::SharedCpus, CauseKind::IrqCpu]
        );
        // A latency 157% worse lost 61% of the time: 36 points more waiting is enough.
        let alone = totals(2.0, 0.06, 10_000, [0.0; 2], [0.0; 2]);
        let stressed = totals(2.0, 0.78, 10_000, [0.0; 2], [0.0; 2]);
        let mut e = evidence(157.0, &alone, &stressed, None);
        assert!(attribute(&e, &Rules::default()).is_empty());
        e.lower_is_better = true;
        assert_eq!(
            kinds(&attribute(&e, &Rules::default())),
            vec![CauseKind::SharedCpus]
        );
    }

    #[test]
    fn waits_that_barely_rise_name_nothing() {
        let alone = totals(2.0, 0.04, 10_000, [0.0; 2], [1.0; 2]);
        // 1.5x per timeslice and of the time: below the factor.
        let stressed = totals(2.0, 0.06, 10_000, [0.0; 2], [0.5; 2]);
        assert!(attribute(&evidence(20.0, &alone, &stressed, None), &Rules::default()).is_empty());
        // Not significant: nothing, whatever the evidence.
        let stressed = totals(2.0, 0.85, 10_000, [0.0; 2], [0.0; 2]);
        let mut e = evidence(20.0, &alone, &stressed, None);
        e.significant = false;
        assert!(attribute(&e, &Rules::default()).is_empty());
        // Phases too short to tell.
        let short = totals(0.1, 0.85, 100, [0.0; 2], [0.0; 2]);
        assert!(attribute(&evidence(20.0, &alone, &short, None), &Rules::default()).is_empty());
    }

    #[test]
    fn softirq_under_network_receive() {
        let alone = totals(1.0, 0.001, 100, [0.0, 0.01], [0.9, 0.9]);
        let stressed = totals(1.0, 0.45, 300, [0.3, 0.4], [0.0, 0.0]);
        let c = attribute(&evidence(95.0, &alone, &stressed, None), &Rules::default());
        assert_eq!(kinds(&c), vec![CauseKind::SharedCpus, CauseKind::Softirq]);
        assert_eq!(
            c[1].text,
            "softirq: 0.70 CPUs of softirq work on cpus 0-1 under the stressor vs 0.01 alone"
        );
    }

    #[test]
    fn faster_wakeups_of_busy_cpus_are_idle_states() {
        let alone = totals(2.0, 0.002, 20_000, [0.0; 2], [1.6, 1.5]);
        let stressed = totals(2.0, 0.004, 20_000, [0.0; 2], [0.1, 0.1]);
        let c = attribute(&evidence(-35.0, &alone, &stressed, None), &Rules::default());
        assert_eq!(kinds(&c), vec![CauseKind::IdleStates]);
        assert_eq!(
            c[0].text,
            "idle states: cpus 0-1 idle 5% of the time under the stressor vs 78% alone, so the \
             probe's wake-ups found them awake; no cpuidle driver here: an idle vCPU halts and \
             is woken through the hypervisor"
        );
        // CPUs that stayed idle: an improvement without this evidence gets no note.
        let stressed = totals(2.0, 0.004, 20_000, [0.0; 2], [1.5, 1.5]);
        assert!(attribute(&evidence(-35.0, &alone, &stressed, None), &Rules::default()).is_empty());
    }

    #[test]
    fn the_disk_irq_is_the_one_interrupting_disk() {
        let irqs = serde_json::json!([
            {"device": "vda", "kind": "disk", "irqs": [
                {"irq": "35", "per_cpu": [0, 1], "desc": "PCI-MSIX-0000:00:02.0 0-edge virtio1-config"},
                {"irq": "36", "per_cpu": [3, 9865996], "desc": "PCI-MSIX-0000:00:02.0 1-edge virtio1-req.0"}
            ]},
            {"device": "eth0", "kind": "net", "irqs": [
                {"irq": "38", "per_cpu": [0, 5370], "desc": "PCI-MSIX virtio2-input.0"}
            ]},
            {"device": "sr0", "kind": "disk", "irqs": []}
        ]);
        let d = disk_irq(&irqs).unwrap();
        assert_eq!(d.device, "vda");
        assert_eq!(d.cpus, vec![1]);
        assert_eq!(d.handlers, vec!["virtio1-req.0"]);
        // Two interrupting disks: which one the probe used is unknown, so none.
        let two = serde_json::json!([
            {"device": "vda", "kind": "disk", "irqs": [{"per_cpu": [0, 9], "desc": "a"}]},
            {"device": "vdb", "kind": "disk", "irqs": [{"per_cpu": [9, 0], "desc": "b"}]}
        ]);
        assert_eq!(disk_irq(&two), None);
        assert_eq!(cpu_list(&[3, 0, 1, 5, 6, 7]), "0-1,3,5-7");
    }
}
