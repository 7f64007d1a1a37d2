//! The run's headline: one figure per resource, from every victim cell, chosen by one rule.

mod common;

use common::{cell, run};
use isobench_common::Class;
use isobench_results::{Cell, Dnr, Results, Verdict, HEADLINE_RULE};
use isobench_stats::{Flag, Side};

/// A victim cell of `class` degraded by `ratio`, significant (after the correction) or not.
fn victim(probe: &str, metric: &str, cond: &str, class: Class, ratio: f64, sig: bool) -> Cell {
    let mut c = cell("victim", probe, metric, cond, ratio);
    c.probe_class = Some(class);
    c.p_adjusted = Some(if sig { 0.001 } else { 0.4 });
    c.comparison.as_mut().unwrap().significant = sig;
    c
}

fn flag(mut c: Cell) -> Cell {
    let cmp = c.comparison.as_mut().unwrap();
    cmp.flags.push(Flag::HighVariation {
        side: Side::Contended,
        cv: 0.4,
        limit: 0.25,
    });
    cmp.trustworthy = false;
    c
}

/// The run of defect 1: the first metric (cpu-int) barely moves, direct I/O loses 96.9% and
/// copy bandwidth 26.5%.
fn quick_like() -> Results {
    let mut r = run(
        "R1",
        "quick",
        &["victim"],
        vec![
            victim("cpu-int", "", "cpu@100", Class::Cpu, 0.983, true),
            victim("cpu-int", "", "disk@100", Class::Cpu, 0.999, false),
            victim(
                "cache-latency",
                "l2_ns",
                "cache@100",
                Class::Cache,
                1.0,
                false,
            ),
            victim(
                "mem-bandwidth",
                "copy_gbps",
                "membw@100",
                Class::Memory,
                0.735,
                true,
            ),
            victim(
                "disk-io",
                "dioread_mbps",
                "disk@100",
                Class::Disk,
                0.031,
                true,
            ),
            victim("disk-io", "read_mbps", "disk@100", Class::Disk, 0.6, true),
        ],
    );
    r.trust.correction = "Holm".into();
    r
}

#[test]
fn headline_counts_every_resource() {
    let h = quick_like().headline();
    let names: Vec<&str> = h.resources.iter().map(|r| r.resource.as_str()).collect();
    // Worst first: the largest significant degradations, then the resources without one.
    assert_eq!(names, ["disk", "memory", "cpu", "cache"], "{h:#?}");
    let worst = h.worst().unwrap();
    assert_eq!(worst.verdict, Verdict::Loss);
    let c = worst.cell.as_ref().unwrap();
    assert_eq!(
        (c.probe.as_str(), c.metric.as_str()),
        ("disk-io", "dioread_mbps")
    );
    assert!((c.estimate.unwrap() - 96.9).abs() < 0.2, "{c:?}");
    assert_eq!(worst.loss_pct(), c.estimate);
    assert_eq!(worst.significant_losses, 2);
    assert_eq!(h.resources[1].short(), "memory +26.5%");
    assert_eq!(h.resources[3].verdict, Verdict::NoSignificantLoss);
    assert_eq!(h.resources[3].loss_pct(), Some(0.0));
    assert!(
        h.summary()
            .starts_with("worst: disk +96.9% (disk-io dioread_mbps under disk@100); memory +26.5%, cpu +1.7%, cache n.s. ("),
        "{}",
        h.summary()
    );
    assert_eq!(h.rule, HEADLINE_RULE);
    assert_eq!(h.correction, "Holm");
}

#[test]
fn a_not_significant_result_is_never_the_headline_without_saying_so() {
    // A larger estimate that is not significant loses to a smaller significant one.
    let r = run(
        "R2",
        "s",
        &["victim"],
        vec![
            victim("disk-io", "read_mbps", "disk@100", Class::Disk, 0.5, false),
            victim("disk-io", "write_mbps", "disk@100", Class::Disk, 0.95, true),
        ],
    );
    let h = r.headline();
    let disk = &h.resources[0];
    assert_eq!(disk.verdict, Verdict::Loss);
    assert_eq!(disk.cell.as_ref().unwrap().metric, "write_mbps");
    // Nothing significant: the largest estimate, said to be not significant, and no worst.
    let r = run(
        "R3",
        "s",
        &["victim"],
        vec![victim(
            "disk-io",
            "read_mbps",
            "disk@100",
            Class::Disk,
            0.5,
            false,
        )],
    );
    let h = r.headline();
    assert!(h.worst().is_none());
    assert_eq!(h.resources[0].figure(), "n.s. (+50.0%)");
    assert!(h
        .summary()
        .starts_with("no significant victim degradation (disk n.s."));
    assert!(
        h.resources[0].detail().contains("p adj 0.400"),
        "{}",
        h.resources[0].detail()
    );
}

#[test]
fn a_flagged_headline_says_it_is_flagged() {
    let r = run(
        "R4",
        "s",
        &["victim"],
        vec![
            flag(victim("cpu-int", "", "memhog@100", Class::Cpu, 0.8, true)),
            victim("cpu-int", "", "cpu@100", Class::Cpu, 0.97, true),
        ],
    );
    let h = r.headline();
    let cpu = &h.resources[0];
    assert_eq!(cpu.verdict, Verdict::FlaggedLoss);
    assert_eq!(cpu.figure(), "+20.0%?");
    assert_eq!(cpu.flagged, 1);
    assert!(
        cpu.detail()
            .contains("flagged: contended values vary by 40.0%"),
        "{}",
        cpu.detail()
    );
    assert!(
        h.summary().starts_with("worst: cpu +20.0%? ("),
        "{}",
        h.summary()
    );
}

#[test]
fn a_victim_that_stopped_answering_ranks_worst() {
    let mut silent = victim(
        "fork-latency",
        "",
        "forkbomb@100",
        Class::Process,
        1.0,
        false,
    );
    silent.comparison = None;
    silent.dnr = Some(Dnr {
        count: 3,
        of: 3,
        reason: "timed out".into(),
    });
    let r = run(
        "R5",
        "s",
        &["victim"],
        vec![
            victim("disk-io", "read_mbps", "disk@100", Class::Disk, 0.1, true),
            silent,
        ],
    );
    let h = r.headline();
    let w = h.worst().unwrap();
    assert_eq!((w.resource.as_str(), w.verdict), ("process", Verdict::Dnr));
    assert_eq!(w.loss_pct(), Some(100.0));
    assert!(
        w.detail()
            .contains("stopped answering (DNR 3/3: timed out)"),
        "{}",
        w.detail()
    );
    assert_eq!(h.resources[1].short(), "disk +90.0%");
}

#[test]
fn the_headline_serializes_with_its_rule() {
    let h = quick_like().headline();
    let j = serde_json::to_value(&h).unwrap();
    assert_eq!(j["resources"][0]["resource"], "disk");
    assert_eq!(j["resources"][0]["verdict"], "loss");
    assert_eq!(j["resources"][0]["cell"]["test"], "paired_log_t");
    assert_eq!(j["resources"][0]["cell"]["p_adjusted"], 0.001);
    assert_eq!(j["rule"], HEADLINE_RULE);
}

/// Defect: the table across platforms called the first victim metric each run's headline,
/// and its score came from that metric alone without saying so.
#[test]
fn the_table_across_platforms_names_its_metric_and_gives_each_runs_headline() {
    use isobench_results::cross::CrossTable;
    let r = quick_like();
    let t = CrossTable::new(&[("cgroup", &r)]);
    assert_eq!(t.metrics, [""]);
    assert_eq!(t.headlines[0], r.headline());
    let s = t.section();
    let rows = s.text_rows();
    let score = rows
        .iter()
        .find(|row| row[0].starts_with("isolation score"))
        .unwrap();
    assert!(score[0].contains("alone"), "{score:?}");
    let headline = rows
        .iter()
        .find(|row| row[0].starts_with("headline"))
        .unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(headline[1], "disk +96.9%");
    assert!(
        s.notes
            .iter()
            .any(|n| n.contains("not the headline") && n.contains("first metric")),
        "{:?}",
        s.notes
    );
    assert!(s
        .notes
        .iter()
        .any(|n| n.contains("it says nothing of the other resources")));
}

#[test]
fn a_headline_from_disturbed_trials_is_marked_as_the_table_marks_it() {
    let mut c = victim(
        "disk-io",
        "dioread_mbps",
        "disk@100",
        Class::Disk,
        0.5,
        true,
    );
    c.disturbed = 7;
    let h = run("R6", "s", &["victim"], vec![c]).headline();
    assert_eq!(h.resources[0].figure(), "+50.0%~");
    assert!(h.resources[0]
        .detail()
        .contains("~ 7 value(s) from trials disturbed by load from outside the run"));
}
