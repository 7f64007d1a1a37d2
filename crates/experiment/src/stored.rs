//! Stored runs read back for reporting: one run analysed, and the runs of a cross-platform
//! set (`run --platform host,cgroup,...`) linked to each other. Every reader (`isobench show`,
//! `report`, `export`, `compare` and the web server) goes through here, so a run reads the same
//! wherever it is shown.
//!
//! The link is a fact of every run of the set (`run`/`linked`: the runs and their platforms),
//! so any run of the set carries the table across the platforms.

use isobench_results::cross::CrossTable;
use isobench_store::{Fact, RunId, Store, StoreError};
use serde_json::json;

use crate::analysis::{analyze, Results};

/// The fact that links the runs of one cross-platform set: scope and key.
const LINK: (&str, &str) = ("run", "linked");

/// A stored run's results alone, without the table of the runs linked with it.
pub fn analyzed(store: &Store, id: &str) -> Result<Results, StoreError> {
    let loaded = store.load_run(&RunId::new(id))?;
    Ok(analyze(&loaded))
}

/// A stored run's results as `isobench show` and `report` give them: with the table across
/// platforms first when the run is one of a linked set.
pub fn with_linked(store: &Store, id: &str) -> Result<Results, StoreError> {
    let mut r = analyzed(store, id)?;
    add_linked(store, &mut r);
    Ok(r)
}

/// Records the set (each run with its platform, and the platforms that could not run) in
/// every run of it.
pub fn link(
    store: &mut Store,
    runs: &[(String, RunId)],
    failed: &[String],
) -> Result<(), StoreError> {
    let value = json!({
        "runs": runs
            .iter()
            .map(|(p, r)| json!({"platform": p, "run": r.as_str()}))
            .collect::<Vec<_>>(),
        "not_run": failed,
    });
    for (_, run) in runs {
        store.record_fact(
            run,
            &Fact {
                scope: LINK.0.into(),
                key: LINK.1.into(),
                value: value.clone(),
            },
        )?;
    }
    Ok(())
}

/// The runs linked with `r`, in the order they ran, each with its platform (`r` itself
/// included); empty when `r` ran alone.
pub fn linked(r: &Results) -> Vec<(String, String)> {
    let Some(f) = r
        .facts
        .iter()
        .find(|f| f.scope == LINK.0 && f.key == LINK.1)
    else {
        return Vec::new();
    };
    f.value["runs"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| {
                    Some((
                        x["platform"].as_str()?.to_string(),
                        x["run"].as_str()?.to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Puts the table across platforms first among `r`'s sections when `r` is one of a linked
/// set (runs of the set no longer in the database are left out, and said so).
pub fn add_linked(store: &Store, r: &mut Results) {
    let set = linked(r);
    if set.is_empty() {
        return;
    }
    let mut loaded: Vec<(String, Results)> = Vec::new();
    let mut missing = Vec::new();
    for (platform, id) in &set {
        if *id == r.run.id {
            loaded.push((platform.clone(), r.clone()));
            continue;
        }
        match store.load_run(&RunId::new(id.clone())) {
            Ok(l) => loaded.push((platform.clone(), analyze(&l))),
            Err(e) => missing.push(format!("{platform} {id}: {e}")),
        }
    }
    let pairs: Vec<(&str, &Results)> = loaded.iter().map(|(p, x)| (p.as_str(), x)).collect();
    let mut section = CrossTable::new(&pairs).section();
    if let Some(f) = r
        .facts
        .iter()
        .find(|f| f.scope == LINK.0 && f.key == LINK.1)
    {
        for n in f.value["not_run"].as_array().into_iter().flatten() {
            if let Some(t) = n.as_str() {
                section.notes.push(format!("not run: {t}"));
            }
        }
    }
    for m in missing {
        section
            .notes
            .push(format!("left out (no longer stored): {m}"));
    }
    r.sections.insert(0, section);
}
