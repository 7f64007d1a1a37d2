//! The small parsers behind tenant limits and workload parameters, on any text: tenant
//! limits (`cpus=1,memory=1G`), CPU lists, byte sizes, network rates, durations, and a
//! `key=value` setting for every parameter of every probe and stressor.
//!
//! Besides "never panic", each parser that has a printed form must read that form back:
//! limits are stored and shown by their `Display`, CPU lists, sizes and rates are written to
//! cgroup and `tc` settings. A setting that validates must also be usable: the workload's
//! memory estimate is computed from it.
#![no_main]

use std::sync::OnceLock;

use isobench_common::{format_size, format_size_exact, parse_size};
use isobench_experiment::scenario::{fmt_duration, parse_duration};
use isobench_experiment::HostView;
use isobench_platform::limits::{format_rate, parse_rate};
use isobench_platform::{CpuList, HostInfo, Limits};
use isobench_workloads::{ParamSpec, ParamValues, PROBES, STRESSORS};
use libfuzzer_sys::fuzz_target;

fn limits(text: &str) {
    let Ok(l) = text.parse::<Limits>() else {
        return;
    };
    let shown = l.to_string();
    let back = shown
        .parse::<Limits>()
        .unwrap_or_else(|e| panic!("`{text}` parsed, but its form `{shown}` does not: {e}"));
    assert_eq!(
        back.to_string(),
        shown,
        "the printed form of `{text}` is not stable"
    );
    let host = HostInfo {
        cpus: CpuList::from_cpus(0..2),
        mems: CpuList::from_cpus([0]),
        memory_bytes: 8 << 30,
    };
    let _ = l.validate(&host);
    let (safe, _) = l.with_safe_defaults(&host);
    let _ = safe.resource_keys();
    let _ = serde_json::to_string(&safe).expect("limits serialize");
}

fn cpu_list(text: &str) {
    let Ok(list) = CpuList::parse(text) else {
        return;
    };
    let shown = list.to_string();
    let back = CpuList::parse(&shown)
        .unwrap_or_else(|e| panic!("`{text}` parsed, but its form `{shown}` does not: {e}"));
    assert_eq!(
        back, list,
        "`{text}` printed as `{shown}` reads back different"
    );
}

fn size(text: &str) {
    let Ok(n) = parse_size(text) else {
        return;
    };
    let _ = format_size(n);
    let exact = format_size_exact(n);
    assert_eq!(
        parse_size(&exact),
        Ok(n),
        "`{text}` = {n} printed as `{exact}`"
    );
}

fn rate(text: &str) {
    let Ok(r) = parse_rate(text) else {
        return;
    };
    let shown = format_rate(r);
    assert_eq!(
        parse_rate(&shown),
        Ok(r),
        "`{text}` = {r} printed as `{shown}`"
    );
}

fn duration(text: &str) {
    let Some(d) = parse_duration(text) else {
        return;
    };
    let shown = fmt_duration(d);
    assert!(
        parse_duration(&shown).is_some(),
        "`{text}` parsed, but its form `{shown}` does not"
    );
}

fn workload_params(text: &str, host: &HostView) {
    let env = &host.env;
    let llc = 32 << 20;
    let settings = [text];
    // The key as `from_settings` looks it up. A workload without it only refuses the
    // setting (with suggestions, an edit distance per name); that path is taken once per
    // table, not once per workload.
    let key = text
        .split_once('=')
        .map(|(k, _)| k.trim().replace('-', "_"));
    let knows = |specs: &[ParamSpec]| {
        key.as_deref()
            .is_some_and(|k| specs.iter().any(|s| s.name == k))
    };
    for (i, p) in PROBES.iter().enumerate() {
        for spec in p.params() {
            let _ = spec.parse(p.name(), text);
        }
        if i > 0 && !knows(p.params()) {
            continue;
        }
        if let Ok(mut values) = ParamValues::from_settings(p.name(), p.params(), &settings) {
            let _ = p.memory_need(&values, llc);
            let _ = p.fit_sizes(&mut values, 1 << 30, llc);
        }
    }
    for (i, s) in STRESSORS.iter().enumerate() {
        for spec in s.params() {
            let _ = spec.parse(s.name(), text);
        }
        if i > 0 && !knows(s.params()) {
            continue;
        }
        if let Ok(values) = ParamValues::from_settings(s.name(), s.params(), &settings) {
            for intensity in [1, 50, 100] {
                let _ = s.memory_need(&values, env, intensity, llc);
            }
            let _ = s.lingering_effect(&values);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    static HOST: OnceLock<HostView> = OnceLock::new();
    let host = HOST.get_or_init(|| HostView::synthetic(2, 8 << 30, true));
    let text = String::from_utf8_lossy(data);
    limits(&text);
    cpu_list(&text);
    size(&text);
    rate(&text);
    duration(&text);
    workload_params(&text, host);
});
