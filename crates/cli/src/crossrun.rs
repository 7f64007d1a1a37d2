//! `isobench run --platform host,cgroup,oci,vm`: the same scenario on each platform in turn,
//! stored as linked runs, and one table across them in the layout of paper 001's Table 2
//! with an isolation score per platform.
//!
//! The link is a fact of every run of the set (`run`/`linked`: the runs and their
//! platforms), so `isobench show`, `report` and `export` of any of them carry the table, and
//! `isobench compare` of one of them compares the whole set.

use std::process::ExitCode;

use isobench_experiment::analysis::analyze;
use isobench_report::render_sections;
use isobench_results::cross::CrossTable;
use isobench_results::Results;
use isobench_store::{Fact, RunId, Store};
use serde_json::json;

use crate::cmd_run::{open_store, run_one, store_error, style, RunArgs};
use crate::exit::{self, bad_input};

/// The fact that links the runs of one cross-platform set.
const SCOPE: &str = "run";
const KEY: &str = "linked";

/// Runs `a`'s scenario on each of its platforms.
pub fn run(a: &RunArgs) -> anyhow::Result<ExitCode> {
    let e = &a.export;
    if e.export_json.is_some() || e.export_csv.is_some() || e.export_markdown.is_some() {
        return Err(bad_input(
            "--export-json/--export-csv/--export-markdown take one run; with several platforms \
             each run is stored, and `isobench export RUN_ID` writes any of them (with the \
             table across platforms); --report writes the set's report",
        ));
    }
    let mut seen = Vec::new();
    for p in &a.platform {
        if seen.contains(p) {
            return Err(bad_input(format!(
                "--platform names {} twice; name each platform once",
                p.as_str()
            )));
        }
        seen.push(*p);
    }
    let n = a.platform.len();
    if a.dry_run {
        for (i, p) in a.platform.iter().enumerate() {
            println!("== platform {} ({}/{n})", p.as_str(), i + 1);
            crate::cmd_run::dry_run(a, Some(*p))?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut runs: Vec<(String, RunId)> = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    let mut worst = exit::OK;
    for (i, p) in a.platform.iter().enumerate() {
        eprintln!("isobench: platform {} ({}/{n})", p.as_str(), i + 1);
        match run_one(a, Some(*p), false) {
            Ok((code, run)) => {
                worst = worse(worst, code);
                if let Some(run) = run {
                    runs.push((p.as_str().to_string(), run));
                }
                if code == exit::INTERRUPTED {
                    eprintln!(
                        "isobench: interrupted: the platforms after {} are not run",
                        p.as_str()
                    );
                    break;
                }
            }
            Err(e) => {
                // One platform that cannot run here does not stop the others.
                eprintln!("isobench: platform {}: {e:#}", p.as_str());
                failed.push(format!("{}: {e:#}", p.as_str()));
                worst = worse(worst, exit::PARTIAL);
            }
        }
    }
    if runs.is_empty() {
        return Err(anyhow::anyhow!(
            "no platform could run the scenario: {}",
            failed.join("; ")
        ));
    }
    let mut store = open_store(&a.db.path)?;
    link(&mut store, &runs, &failed)?;
    let first = &runs[0].1;
    let loaded = store.load_run(first).map_err(store_error)?;
    let mut results = analyze(&loaded);
    add_linked(&store, &mut results);
    if let Some(section) = results.sections.first() {
        print!(
            "{}",
            render_sections(std::slice::from_ref(section), first.as_str(), style())
        );
    }
    if let Some(file) = &a.export.report {
        let path = file
            .clone()
            .unwrap_or_else(|| crate::cmd_report::default_path(first.as_str()));
        match crate::cmd_report::write_report(&results, &path) {
            Ok(()) => eprintln!("isobench: wrote the report {}", path.display()),
            Err(e) => {
                eprintln!("isobench: error: --report: {e:#}");
                worst = worse(worst, exit::FAILURE);
            }
        }
    }
    Ok(ExitCode::from(worst))
}

/// The more serious of two exit codes.
fn worse(a: u8, b: u8) -> u8 {
    let rank = |c: u8| match c {
        exit::OK => 0,
        exit::PARTIAL => 1,
        exit::INTERRUPTED => 2,
        _ => 3,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

/// Records the set in every run of it.
fn link(store: &mut Store, runs: &[(String, RunId)], failed: &[String]) -> anyhow::Result<()> {
    let value = json!({
        "runs": runs
            .iter()
            .map(|(p, r)| json!({"platform": p, "run": r.as_str()}))
            .collect::<Vec<_>>(),
        "not_run": failed,
    });
    for (_, run) in runs {
        store
            .record_fact(
                run,
                &Fact {
                    scope: SCOPE.into(),
                    key: KEY.into(),
                    value: value.clone(),
                },
            )
            .map_err(store_error)?;
    }
    Ok(())
}

/// The runs linked with `r`, in the order they ran, each with its platform (`r` itself
/// included); empty when `r` ran alone.
pub fn linked(r: &Results) -> Vec<(String, String)> {
    let Some(f) = r.facts.iter().find(|f| f.scope == SCOPE && f.key == KEY) else {
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
    if let Some(f) = r.facts.iter().find(|f| f.scope == SCOPE && f.key == KEY) {
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
