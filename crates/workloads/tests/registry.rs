//! Invariants over the probe and stressor tables.

use std::collections::HashSet;

use isobench_workloads::cachesize::{CacheSizes, HostCaches};
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
fn every_probe_declares_metrics_at_its_default_params() {
    for p in PROBES {
        let params = ParamValues::defaults(p.name(), p.params());
        let declared = p.metrics_for(&params);
        assert!(!declared.is_empty(), "{}: no metric at defaults", p.name());
        for m in &declared {
            assert!(!m.unit.is_empty(), "{}: {} has no unit", p.name(), m.name);
        }
        if p.name() != "command" {
            let listed: Vec<&str> = p.metrics().iter().map(|m| m.name).collect();
            let got: Vec<&str> = declared.iter().map(|m| m.name.as_str()).collect();
            assert_eq!(got, listed, "{}: params-free metrics differ", p.name());
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

#[test]
fn workloads_state_their_own_memory_need_at_defaults() {
    const MIB: u64 = 1 << 20;
    let llc = 32 * MIB;
    let env = Env {
        cpus: vec![0, 1],
        host_cpus: 2,
        mem_usable: 1 << 30,
        mem_limit: Some(1 << 30),
        caches: Vec::new(),
        page_size: 4096,
        is_root: false,
        workdir: std::env::temp_dir(),
    };
    let probe_need = |name: &str| {
        let p = isobench_workloads::probe(name).unwrap();
        p.memory_need(&ParamValues::defaults(name, p.params()), llc)
    };
    assert_eq!(probe_need("mem-bandwidth"), 128 * MIB);
    assert_eq!(probe_need("mem-latency"), 64 * MIB);
    assert_eq!(probe_need("cache-latency"), 2 * llc);
    assert_eq!(probe_need("local-comm"), 256 << 10);
    assert_eq!(probe_need("context-switch"), 0);
    assert_eq!(probe_need("cpu-int"), 0);
    let stressor_need = |name: &str, intensity| {
        let s = isobench_workloads::stressor(name).unwrap();
        let params = ParamValues::defaults(name, s.params());
        s.memory_need(&params, &env, intensity, llc)
    };
    // One copying thread at 50% of two CPUs, two at 100%; never over a quarter of memory.
    assert_eq!(stressor_need("membw", 50), 128 * MIB);
    assert_eq!(stressor_need("membw", 100), 256 * MIB);
    assert_eq!(stressor_need("cache", 100), 2 * (llc as f64 * 1.25) as u64);
    assert_eq!(stressor_need("memhog", 100), 0);
}

/// Caches of 32K L1 and 512K L2 and an LLC of `llc` bytes, which the sweep confirmed.
fn caches(llc: u64) -> HostCaches {
    let sizes = CacheSizes {
        l1: 32 << 10,
        l2: 512 << 10,
        llc,
        llc_sysfs: Some(llc),
        llc_measured: Some(llc),
    };
    HostCaches {
        measured: sizes,
        sysfs: sizes,
    }
}

#[test]
fn probes_fit_their_derived_sizes_into_the_budget() {
    const MIB: u64 = 1 << 20;
    let fit = |name: &str, budget, llc| {
        let p = isobench_workloads::probe(name).unwrap();
        let mut params = ParamValues::defaults(name, p.params());
        let said = p.fit_sizes(&mut params, budget, &caches(llc));
        (said, params.0.get("size").and_then(|v| v.as_u64()))
    };
    // Two 32M blocks fit in a quarter of 256M; 64M ones do not.
    assert_eq!(
        fit("mem-bandwidth", 256 * MIB, 32 * MIB),
        (Some("block size 32M".to_string()), Some(32 * MIB))
    );
    assert_eq!(
        fit("mem-latency", 1 << 30, 32 * MIB),
        (Some("buffer 256M".to_string()), Some(256 * MIB))
    );
    assert_eq!(fit("cpu-int", 1 << 30, 32 * MIB), (None, None));
}

/// The cache-latency rings are sized in the plan from the controller's caches, so no tenant's
/// process runs a sweep of its own: one there took longer than the probe's deadline under an
/// emulated CPU (every cache-latency trial of the cgroup v2 guest's quick run was DNR), and
/// one in a busy tenant finds a smaller cache than a quiet one.
#[test]
fn cache_latency_rings_come_from_the_plan_and_a_given_size_is_kept() {
    let p = isobench_workloads::probe("cache-latency").unwrap();
    let caches = caches(32 << 20);
    let size = |params: &ParamValues, name: &str| params.0.get(name).and_then(|v| v.as_u64());
    let mut params = ParamValues::defaults("cache-latency", p.params());
    let said = p
        .fit_sizes(&mut params, 1 << 30, &caches)
        .expect("sizes chosen");
    assert_eq!(
        ["l1_size", "l2_size", "llc_size"].map(|n| size(&params, n)),
        [Some(16 << 10), Some(128 << 10), Some(2 << 20)]
    );
    assert!(said.contains("llc_size 2M"), "{said}");
    // A size the scenario gives is left alone; only the others are filled in.
    let mut params = ParamValues::defaults("cache-latency", p.params());
    params.set("llc_size", (8u64 << 20).into());
    let said = p
        .fit_sizes(&mut params, 1 << 30, &caches)
        .expect("sizes chosen");
    assert_eq!(size(&params, "llc_size"), Some(8 << 20));
    assert!(!said.contains("llc_size"), "{said}");
    // All three given: nothing to derive.
    params.set("l1_size", (16u64 << 10).into());
    params.set("l2_size", (128u64 << 10).into());
    assert_eq!(p.fit_sizes(&mut params, 1 << 30, &caches), None);
}
