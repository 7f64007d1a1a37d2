//! Each tenant's pressure stalls and delivered I/O per condition: medians over the trials,
//! the victims' notable stalls, the report's table, and the document's round trip.

mod common;

use isobench_results::usage::{
    notable_stalls, pressure_measured, usage_rows, usage_section, UsageRow, NOTABLE_STALL,
};
use isobench_results::Results;
use isobench_store::{
    Condition, StallRecord, TenantUsageRecord, Timestamp, TrialKey, TrialRecord, TrialStatus,
};

fn stall(some: f64, full: Option<f64>) -> Option<StallRecord> {
    Some(StallRecord { some, full })
}

fn usage(tenant: &str, memory: Option<StallRecord>, write: Option<f64>) -> TenantUsageRecord {
    TenantUsageRecord {
        tenant: tenant.into(),
        interval_s: 1.0,
        cpu: stall(0.02, Some(0.0)),
        memory,
        io: None,
        read_bytes_per_s: Some(1e6),
        write_bytes_per_s: write,
        read_ops_per_s: Some(50.0),
        write_ops_per_s: write.map(|w| w / 1e5),
    }
}

fn trial(n: u32, condition: Condition, tenant_usage: Vec<TenantUsageRecord>) -> TrialRecord {
    TrialRecord {
        key: TrialKey {
            round: n,
            block: 0,
            slot: 0,
            attempt: 0,
        },
        probe: "cpu-int".into(),
        tenant: "victim".into(),
        condition,
        repetition: n,
        status: TrialStatus::Ok,
        started_at: Timestamp::from_unix_millis(1_704_067_200_000),
        ended_at: Timestamp::from_unix_millis(1_704_067_201_000),
        load_note: None,
        samples: Vec::new(),
        histograms: Vec::new(),
        stressor_reports: Vec::new(),
        series: Vec::new(),
        modulation: None,
        noise: None,
        mechanism: None,
        timeline: None,
        limits: None,
        tenant_usage,
    }
}

fn tenants() -> Vec<(String, String)> {
    vec![
        ("victim".into(), "victim".into()),
        ("aggressor".into(), "aggressor".into()),
    ]
}

/// Three memhog trials (the victim stalled 30%, 40% and 50% on memory; one trial without a
/// `full` share) and two baseline trials; the aggressor reports I/O but no pressure.
fn rows() -> Vec<UsageRow> {
    let hog = Condition::stressor("memhog", 80);
    let trials = [
        trial(
            0,
            Condition::Baseline,
            vec![usage("victim", stall(0.0, Some(0.0)), None)],
        ),
        trial(
            1,
            hog.clone(),
            vec![
                usage("victim", stall(0.5, Some(0.2)), None),
                TenantUsageRecord {
                    cpu: None,
                    ..usage("aggressor", None, Some(4e7))
                },
            ],
        ),
        trial(
            2,
            hog.clone(),
            vec![usage("victim", stall(0.3, None), None)],
        ),
        trial(
            3,
            Condition::Baseline,
            vec![usage("victim", stall(0.02, Some(0.0)), None)],
        ),
        trial(
            4,
            hog,
            vec![
                usage("victim", stall(0.4, Some(0.1)), None),
                TenantUsageRecord {
                    cpu: None,
                    ..usage("aggressor", None, Some(2e7))
                },
            ],
        ),
    ];
    let refs: Vec<&TrialRecord> = trials.iter().collect();
    usage_rows(&refs, &tenants(), &["baseline".into(), "memhog@80".into()])
}

#[test]
fn rows_are_medians_per_tenant_and_condition_with_not_available_kept_apart() {
    let rows = rows();
    let keys: Vec<(&str, &str, u32)> = rows
        .iter()
        .map(|r| (r.tenant.as_str(), r.condition.as_str(), r.trials))
        .collect();
    assert_eq!(
        keys,
        [
            ("victim", "baseline", 2),
            ("victim", "memhog@80", 3),
            ("aggressor", "memhog@80", 2)
        ]
    );
    let hog = &rows[1];
    let mem = hog.memory.unwrap();
    assert!((mem.some_median - 0.4).abs() < 1e-12);
    assert!((mem.some_max - 0.5).abs() < 1e-12);
    assert_eq!(
        mem.full_median, None,
        "one trial had no full share: no median over a different set of trials"
    );
    assert_eq!(hog.io, None);
    assert_eq!(hog.read_bytes_per_s, Some(1e6));
    assert_eq!(hog.write_bytes_per_s, None);
    let base = rows[0].memory.unwrap();
    assert!((base.some_median - 0.01).abs() < 1e-12);
    assert_eq!(base.full_median, Some(0.0));
    let agg = &rows[2];
    assert_eq!((agg.cpu, agg.memory, agg.io), (None, None, None));
    assert_eq!(agg.write_bytes_per_s, Some(3e7));
    assert_eq!(agg.write_ops_per_s, Some(300.0));
}

#[test]
fn a_victims_stall_is_notable_from_the_threshold_worst_first() {
    let rows = rows();
    assert_eq!(pressure_measured(&rows), Some(true));
    let n = notable_stalls(&rows, NOTABLE_STALL);
    let found: Vec<(&str, &str, &str)> = n
        .iter()
        .map(|s| (s.tenant.as_str(), s.condition.as_str(), s.resource.as_str()))
        .collect();
    assert_eq!(found, [("victim", "memhog@80", "memory")]);
    assert_eq!(n[0].trials, 3);
    // Just under the threshold: nothing to name; the aggressor is never named.
    assert!(notable_stalls(&rows, 0.41).is_empty());
    // No rows: not measured at all; rows without pressure: measured as not available.
    assert_eq!(pressure_measured(&[]), None);
    let v1: Vec<UsageRow> = rows
        .iter()
        .map(|r| UsageRow {
            cpu: None,
            memory: None,
            io: None,
            ..r.clone()
        })
        .collect();
    assert_eq!(pressure_measured(&v1), Some(false));
    assert!(notable_stalls(&v1, 0.0).is_empty());
}

#[test]
fn the_table_shows_percent_and_mb_per_second_and_n_a_where_not_available() {
    let s = usage_section(&rows()).unwrap();
    assert_eq!(s.id, "usage");
    let headers = s.headers();
    assert_eq!(headers[4], "cpu stall some [%]");
    assert_eq!(headers[7], "memory stall full [%]");
    assert_eq!(headers[11], "write [MB/s]");
    let text = s.text_rows();
    let hog = &text[1];
    assert_eq!(&hog[..4], ["victim", "victim", "memhog@80", "3"]);
    assert_eq!(hog[4], "2.0");
    assert_eq!(hog[6], "40.0");
    assert_eq!(hog[7], "n/a");
    assert_eq!(hog[8], "n/a", "no io.pressure");
    assert_eq!(hog[10], "1.00");
    let agg = &text[2];
    assert_eq!(agg[4], "n/a");
    assert_eq!(agg[11], "30.00");
    assert_eq!(agg[13], "300");
    assert!(usage_section(&[]).is_none());
}

#[test]
fn usage_and_the_victims_stalls_survive_the_documents_round_trip() {
    let mut r = common::run("20240101-000000-aaaaaa", "quick", &["victim"], Vec::new());
    let rows = rows();
    r.trust.victim_pressure_measured = pressure_measured(&rows);
    r.trust.victim_stalls = notable_stalls(&rows, NOTABLE_STALL);
    r.usage = rows;
    r.trials = vec![trial(
        1,
        Condition::stressor("memhog", 80),
        vec![usage("victim", stall(0.5, Some(0.2)), Some(0.0))],
    )];
    let json = serde_json::to_string(&r).unwrap();
    assert!(json.contains("\"tenant_usage\""), "{json}");
    let back: Results = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
    // A document without these fields (schema 5) still reads, with none.
    let mut old: serde_json::Value = serde_json::from_str(&json).unwrap();
    old.as_object_mut().unwrap().remove("usage");
    old["trust"]
        .as_object_mut()
        .unwrap()
        .retain(|k, _| !k.starts_with("victim_"));
    old["trials"][0]
        .as_object_mut()
        .unwrap()
        .remove("tenant_usage");
    let back: Results = serde_json::from_value(old).unwrap();
    assert!(back.usage.is_empty());
    assert!(back.trials[0].tenant_usage.is_empty());
    assert_eq!(back.trust.victim_pressure_measured, None);
}
