//! Writes a large stored run for `bench/toolspeed.py`: the trials of a real run, repeated in
//! new rounds until the run holds `SAMPLES` samples (metric values plus window values), into a
//! new database. The copy keeps the run's id, scenario, tenants and facts, so `isobench show`,
//! `report` and `export` read it as they read the original.
//!
//! Usage: `cargo run --release -p isobench-store --example bulk_run -- FROM.db RUN_ID TO.db
//! SAMPLES`

use isobench_store::{LoadedRun, RunId, Store, TrialRecord};

/// The samples a trial holds: its metric values and the values of its window series.
fn samples_of(t: &TrialRecord) -> usize {
    t.samples.len() + t.series.iter().map(|s| s.windows.len()).sum::<usize>()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [from, run, to, samples] = args.as_slice() else {
        return Err("usage: bulk_run FROM.db RUN_ID TO.db SAMPLES".into());
    };
    let wanted: usize = samples.parse()?;
    let source = Store::open_read_only(from)?;
    let loaded = source.load_run(&RunId::new(run.as_str()))?;
    let per_copy: usize = loaded.trials.iter().map(samples_of).sum();
    if per_copy == 0 {
        return Err(format!("run {run} has no samples to repeat").into());
    }
    let rounds = loaded.trials.iter().map(|t| t.key.round).max().unwrap_or(0) + 1;
    let copies = wanted.div_ceil(per_copy);
    let trials = (0..copies)
        .flat_map(|copy| {
            loaded.trials.iter().map(move |t| {
                let mut t = t.clone();
                t.key.round += copy as u32 * rounds;
                t.repetition += copy as u32 * rounds;
                t
            })
        })
        .collect();
    let bulk = LoadedRun { trials, ..loaded };
    let mut store = Store::open(to)?;
    store.import_run(&bulk)?;
    println!(
        "{}: run {run}, {} trials, {} samples",
        to,
        bulk.trials.len(),
        copies * per_copy
    );
    Ok(())
}
