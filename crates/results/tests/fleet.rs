//! Fleet runs on hand-built hosts: pooled per host type, the noisy host found and named with
//! what differs, agreeing hosts left alone.

mod common;

use std::collections::BTreeMap;

use common::{cell_at, run};
use isobench_results::fleet::{Fleet, FleetHost, Measure, TYPE_LABEL, UNTYPED};
use isobench_results::{Cell, Results};

/// A host's run: the cpu-int probe beside two stress tests, with its baseline level and the
/// two contended/baseline ratios.
fn host_run(id: &str, level: f64, cpu: f64, membw: f64) -> Results {
    let cells: Vec<Cell> = vec![
        cell_at("victim", "cpu-int", "ops_per_sec", "cpu@100", level, cpu),
        cell_at(
            "victim",
            "cpu-int",
            "ops_per_sec",
            "membw@100",
            level,
            membw,
        ),
    ];
    run(id, "quick", &["victim"], cells)
}

fn host<'a>(name: &str, node_type: Option<&str>, results: &'a Results) -> FleetHost<'a> {
    let mut labels = BTreeMap::new();
    if let Some(t) = node_type {
        labels.insert(TYPE_LABEL.to_string(), t.to_string());
    }
    labels.insert("kernel".into(), "6.1".into());
    FleetHost {
        name: name.into(),
        labels,
        results,
    }
}

#[test]
fn the_host_that_degrades_more_than_its_type_is_flagged_with_what_differs() {
    let a = host_run("RA", 100.0, 0.90, 0.95);
    let b = host_run("RB", 100.0, 0.90, 0.95);
    let c = host_run("RC", 100.0, 0.60, 0.95); // 40% under cpu, the others 10%
    let fleet = Fleet::new(
        &[
            host("a", Some("m5"), &a),
            host("b", Some("m5"), &b),
            host("c", Some("m5"), &c),
        ],
        TYPE_LABEL,
    );
    assert_eq!(fleet.groups.len(), 1);
    let g = &fleet.groups[0];
    assert_eq!(g.hosts, ["a", "b", "c"]);
    assert_eq!(g.runs, ["RA", "RB", "RC"]);
    let noisy = fleet.noisy();
    assert_eq!(noisy.len(), 1, "{noisy:?}");
    let (t, n) = noisy[0];
    assert_eq!((t, n.host.as_str(), n.run.as_str()), ("m5", "c", "RC"));
    // The cpu stress test differs, by about 30 points; membw does not.
    assert_eq!(n.differs.len(), 1, "{:?}", n.differs);
    let d = &n.differs[0];
    assert_eq!(d.measure, Measure::Degradation);
    assert_eq!(d.condition.as_deref(), Some("cpu@100"));
    assert!((d.difference.estimate - 30.0).abs() < 2.0, "{d:?}");
    assert!(d.difference.significant);
    // The pool of three hosts that disagree is wide, and holds all three.
    let row = g.rows.iter().find(|r| r.condition == "cpu@100").unwrap();
    let p = row.pooled.as_ref().unwrap();
    assert_eq!(p.hosts, 3);
    assert!(p.tau_squared > 0.0);
    assert!(p.lower < 10.0 && p.upper > 40.0, "{p:?}");
    // The table has the type's column and names the noisy host under it.
    let s = fleet.section();
    assert_eq!(s.headers()[3], "m5 (3 hosts) [%]");
    assert!(
        s.notes
            .iter()
            .any(|n| n.starts_with("noisy host: c (m5, run RC) is worse than the others of its type: cpu-int ops_per_sec under cpu@100 +")),
        "{:?}",
        s.notes
    );
}

#[test]
fn of_two_hosts_only_the_worse_is_flagged_and_a_slow_baseline_counts() {
    // Same degradations, but host b's probe runs 20% slower alone.
    let a = host_run("RA", 100.0, 0.90, 0.95);
    let b = host_run("RB", 80.0, 0.90, 0.95);
    let fleet = Fleet::new(
        &[host("a", Some("m5"), &a), host("b", Some("m5"), &b)],
        TYPE_LABEL,
    );
    let noisy = fleet.noisy();
    assert_eq!(noisy.len(), 1, "{noisy:?}");
    let n = noisy[0].1;
    assert_eq!(n.host, "b");
    assert_eq!(n.differs[0].measure, Measure::Baseline);
    assert_eq!(n.differs[0].condition, None);
    assert!(
        (n.differs[0].difference.estimate - 20.0).abs() < 1.0,
        "{:?}",
        n.differs[0]
    );
    assert_eq!(n.differs[0].label(), "cpu-int ops_per_sec alone");
}

#[test]
fn agreeing_hosts_and_lone_types_are_not_flagged() {
    let a = host_run("RA", 100.0, 0.90, 0.95);
    let b = host_run("RB", 100.5, 0.905, 0.948);
    let c = host_run("RC", 100.0, 0.60, 0.95);
    let fleet = Fleet::new(
        &[
            host("a", Some("m5"), &a),
            host("b", Some("m5"), &b),
            host("c", None, &c),
        ],
        TYPE_LABEL,
    );
    assert!(fleet.noisy().is_empty(), "{:?}", fleet.noisy());
    let types: Vec<&str> = fleet.groups.iter().map(|g| g.host_type.as_str()).collect();
    assert_eq!(types, ["m5", UNTYPED]);
    // The lone host's row is its own estimate; the agreeing pair's pool lies between them.
    let lone = &fleet.groups[1].rows[0];
    let own = lone.hosts[0].as_ref().unwrap();
    let p = lone.pooled.as_ref().unwrap();
    assert!((p.estimate - own.estimate).abs() < 1e-9);
    let s = fleet.section();
    assert!(
        s.notes
            .iter()
            .any(|n| n == "no host differs significantly from the others of its type"),
        "{:?}",
        s.notes
    );
    assert_eq!(s.rows.len(), 2);
}

#[test]
fn a_slow_baseline_is_read_robustly_from_on_off_cycles_with_heavy_tails() {
    // Host b's probe runs 30% slower alone, and its cells were measured in on/off cycles:
    // among its baseline values are windows in which the probe hardly ran at all.
    let a = host_run("RA", 100.0, 0.90, 0.95);
    let mut b = host_run("RB", 70.0, 0.90, 0.95);
    for tailed in &mut b.cells {
        tailed.design = Some(isobench_results::Design::OnOff);
        let mut values = tailed.baseline.clone();
        values.extend(tailed.baseline.clone());
        values.extend([0.02, 0.0]);
        tailed.baseline = values;
    }
    let fleet = Fleet::new(
        &[host("a", Some("m5"), &a), host("b", Some("m5"), &b)],
        TYPE_LABEL,
    );
    let noisy = fleet.noisy();
    assert_eq!(noisy.len(), 1, "{noisy:?}");
    let d = &noisy[0].1.differs[0];
    assert_eq!(
        (noisy[0].1.host.as_str(), d.measure),
        ("b", Measure::Baseline)
    );
    // 30 points, not the 99.9 a mean of logarithms would make of the tail.
    assert!((d.difference.estimate - 30.0).abs() < 1.5, "{d:?}");
}
