//! Invariants over the probe and stressor tables.

use std::collections::HashSet;

use isobench_workloads::{Env, ParamKind, ParamValues, PROBES, STRESSORS};

#[test]
fn names_are_unique_and_kebab_case() {
    let probe_names: HashSet<_> = PROBES.iter().map(|p| p.name()).collect();
    assert_eq!(probe_names.len(), PROBES.len(), "duplicate probe name");
    let stressor_names: HashSet<_> = STRESSORS.iter().map(|s| s.name()).collect();
    assert_eq!(
        stressor_names.len(),
        STRESSORS.len(),
        "duplicate stressor name"
    );
    for n in probe_names.iter().chain(stressor_names.iter()) {
        assert!(
            n.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{n} is not kebab-case"
        );
    }
}

#[test]
fn catalogue_is_complete() {
    let probes: HashSet<_> = PROBES.iter().map(|p| p.name()).collect();
    for want in [
        "cpu-int",
        "cpu-float",
        "cache-latency",
        "mem-latency",
        "mem-bandwidth",
        "local-comm",
        "disk-io",
        "net-throughput",
        "net-rtt",
        "http",
        "relay-ring",
        "syscall",
        "fork-latency",
        "context-switch",
    ] {
        assert!(probes.contains(want), "probe {want} missing");
    }
    let stressors: HashSet<_> = STRESSORS.iter().map(|s| s.name()).collect();
    for want in [
        "cpu", "cache", "membw", "memhog", "forkbomb", "disk", "net-tx", "net-rx", "null",
    ] {
        assert!(stressors.contains(want), "stressor {want} missing");
    }
}

#[test]
fn every_probe_has_help_and_metrics() {
    for p in PROBES {
        assert!(p.help().len() > 20, "{}: help too short", p.name());
        assert!(!p.metrics().is_empty(), "{}: no metric", p.name());
        let mut names = HashSet::new();
        for m in p.metrics() {
            assert!(
                names.insert(m.name),
                "{}: metric {} twice",
                p.name(),
                m.name
            );
            assert!(
                !m.unit.is_empty(),
                "{}: metric {} has no unit",
                p.name(),
                m.name
            );
        }
    }
}

#[test]
fn every_stressor_documents_its_intensity_knob() {
    for s in STRESSORS {
        assert!(s.help().len() > 20, "{}: help too short", s.name());
        assert!(
            s.intensity_knob().len() > 10,
            "{}: intensity knob undocumented",
            s.name()
        );
    }
    for name in ["forkbomb", "memhog", "disk"] {
        let s = isobench_workloads::stressor(name).unwrap();
        assert!(s.aggressive(), "{name} must be marked aggressive");
    }
}

#[test]
fn parameter_tables_are_well_formed_and_defaults_parse() {
    let all = PROBES
        .iter()
        .map(|p| (p.name(), p.params()))
        .chain(STRESSORS.iter().map(|s| (s.name(), s.params())));
    for (name, specs) in all {
        let mut seen = HashSet::new();
        for s in specs {
            assert!(seen.insert(s.name), "{name}: parameter {} twice", s.name);
            assert!(!s.help.is_empty(), "{name}.{}: no help", s.name);
            match s.kind {
                ParamKind::Int { min, max } => assert!(min <= max, "{name}.{}", s.name),
                ParamKind::Float { min, max } => assert!(min <= max, "{name}.{}", s.name),
                ParamKind::Size { min, max } => assert!(min <= max, "{name}.{}", s.name),
                ParamKind::Choice { options } => assert!(!options.is_empty(), "{name}.{}", s.name),
                ParamKind::Bool | ParamKind::Text => {}
            }
            // The default parses (panics naming the parameter otherwise).
            let _ = s.default_value(name);
        }
        assert_eq!(ParamValues::defaults(name, specs).0.len(), specs.len());
    }
}

#[test]
fn unsupported_always_carries_a_reason() {
    let env = Env::detect();
    for p in PROBES {
        if let Err(e) = p.supported(&env) {
            assert!(
                !e.reason.is_empty(),
                "{}: unsupported without a reason",
                p.name()
            );
        }
    }
    for s in STRESSORS {
        if let Err(e) = s.supported(&env) {
            assert!(
                !e.reason.is_empty(),
                "{}: unsupported without a reason",
                s.name()
            );
        }
    }
}

#[test]
fn unknown_names_get_suggestions() {
    let near = isobench_workloads::nearest_names("cache-latncy", PROBES.iter().map(|p| p.name()));
    assert_eq!(near.first(), Some(&"cache-latency"));
}
