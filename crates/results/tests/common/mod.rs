//! Hand-built runs for the tests: cells estimated as the engine estimates them.
#![allow(dead_code)]

use isobench_common::Direction;
use isobench_results::{Cell, Results, RunInfo, TenantInfo, Trust, RESULTS_SCHEMA_VERSION};
use isobench_stats::{
    compare, paired_degradation, CompareConfig, Pair, PairedConfig, PairedMethod, Sample,
};
use serde_json::json;

/// Units whose baseline is about `level` and whose contended value is `ratio` x baseline,
/// with a little alternating noise.
fn units(level: f64, ratio: f64, n: usize) -> Vec<Pair> {
    (0..n)
        .map(|i| {
            let wobble = if i % 2 == 0 { 1.004 } else { 0.996 };
            let base = level * (1.0 + i as f64 / 100.0);
            Pair::new(base, base * ratio * wobble)
        })
        .collect()
}

/// A cell estimated as the engine estimates a paired design: t on the log ratios.
pub fn cell(tenant: &str, probe: &str, metric: &str, condition: &str, ratio: f64) -> Cell {
    cell_at(tenant, probe, metric, condition, 100.0, ratio)
}

/// [`cell`] with its baseline about `level`.
pub fn cell_at(
    tenant: &str,
    probe: &str,
    metric: &str,
    condition: &str,
    level: f64,
    ratio: f64,
) -> Cell {
    let u = units(level, ratio, 8);
    let direction = Direction::Higher;
    let paired = paired_degradation(
        &u,
        direction,
        &PairedConfig {
            method: PairedMethod::LogT,
            ..Default::default()
        },
    )
    .unwrap();
    let baseline: Vec<f64> = u.iter().map(|p| p.baseline).collect();
    let contended: Vec<f64> = u.iter().map(|p| p.contended).collect();
    let mut comparison = compare(
        &Sample::from_slice(&baseline).unwrap(),
        &Sample::from_slice(&contended).unwrap(),
        direction,
        &CompareConfig::default(),
    )
    .unwrap();
    comparison.degradation = paired.degradation.clone();
    comparison.flags.clear();
    comparison.trustworthy = true;
    Cell {
        tenant: tenant.into(),
        probe: probe.into(),
        probe_class: None,
        metric: metric.into(),
        unit: "ops/s".into(),
        direction,
        condition: condition.into(),
        stressor_class: None,
        baseline,
        contended,
        comparison: Some(comparison),
        problem: None,
        dnr: None,
        settled: true,
        disturbed: 0,
        design: None,
        paired: Some(paired),
        p_adjusted: None,
        independent: None,
        independent_welch: None,
        causes: Vec::new(),
    }
}

pub fn run(id: &str, scenario: &str, victims: &[&str], cells: Vec<Cell>) -> Results {
    let mut tenants: Vec<TenantInfo> = victims
        .iter()
        .map(|v| TenantInfo {
            name: v.to_string(),
            role: "victim".into(),
            limits: json!({"applied": "cpuset=0,memory=1G"}),
        })
        .collect();
    tenants.push(TenantInfo {
        name: "aggressor".into(),
        role: "aggressor".into(),
        limits: json!({"applied": "cpuset=1,memory=1G"}),
    });
    Results {
        schema_version: RESULTS_SCHEMA_VERSION,
        run: RunInfo {
            id: id.into(),
            scenario: scenario.into(),
            status: "complete".into(),
            status_reason: None,
            seed: 1,
            tool_version: "0.1.0".into(),
            store_schema_version: 3,
            started_at: "2024-01-01T00:00:00.000Z".into(),
            ended_at: None,
            platform: "cgroup".into(),
            platform_version: "v2".into(),
            caveats: Vec::new(),
            host: json!({"hostname": "h1", "cores": 2}),
        },
        kind: "matrix".into(),
        plan: Some(json!({"trial": {"duration": 0.4}, "repetitions": {"confidence": 0.95}})),
        tenants,
        cells,
        aggressor: Vec::new(),
        classes: Vec::new(),
        sections: Vec::new(),
        latency: Vec::new(),
        usage: Vec::new(),
        trust: Trust::default(),
        target_half_width: 5.0,
        confidence: 0.95,
        trials: Vec::new(),
        facts: Vec::new(),
    }
}
