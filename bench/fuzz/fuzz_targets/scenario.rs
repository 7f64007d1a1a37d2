//! Scenario files: any text through the parser and validator, and every scenario that parses
//! through `Plan::resolve` on the two-CPU synthetic host the fake platform uses, as
//! `isobench run` and `isobench check` would. Problems must come back as located errors.
//! A plan that resolves must also survive the way a run stores it: serialized to JSON and
//! read back with `Plan::from_stored`, or the run could never be resumed or analysed.
#![no_main]

use isobench_experiment::scenario::Scenario;
use isobench_experiment::{HostView, Plan, PlanOptions, Source};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let sc = match Scenario::parse(Source::new("fuzz.toml", text)) {
        Ok(sc) => sc,
        Err(errors) => {
            // Rendering points into the text: line, column and the offending line.
            let _ = errors.to_string();
            return;
        }
    };
    let host = HostView::synthetic(2, 8 << 30, true);
    // First as a scenario file (unsupported workloads refused), then, if that refused, as
    // a built-in one (unsupported workloads skipped with a note).
    for skip_unsupported in [false, true] {
        let opts = PlanOptions {
            platform: None,
            seed: None,
            random_seed: 1,
            skip_unsupported,
        };
        match Plan::resolve(&sc, &host, &opts) {
            Ok(plan) => {
                let _ = plan.summary();
                let stored = serde_json::to_value(&plan).expect("plans serialize");
                if let Err(e) = Plan::from_stored(stored) {
                    panic!("a resolved plan does not read back from its stored form: {e}");
                }
                break;
            }
            Err(errors) => {
                let _ = errors.to_string();
            }
        }
    }
});
