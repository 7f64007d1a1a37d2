//! Stored runs read back for reporting: one run analysed, and the runs of a cross-platform
//! set (`run --platform host,cgroup,...`) linked to each other. Every reader (`isobench show`,
//! `report`, `export`, `compare` and the web server) goes through here, so a run reads the same
//! wherever it is shown.
//!
//! The link is a fact of every run of the set (`run`/`linked`: the runs and their platforms),
//! so any run of the set carries the table across the platforms. A fleet run (one scenario on
//! many hosts, `run --hosts`) is linked the same way (`fleet`/`hosts`: each host's run, name
//! and labels), and any of its runs carries the fleet table.

use std::collections::BTreeMap;

use isobench_results::cross::CrossTable;
use isobench_results::fleet::{Fleet, FleetHost};
use isobench_results::Section;
use isobench_store::{Fact, RunId, Store, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::analysis::{analyze, Results};

/// The fact that links the runs of one cross-platform set: scope and key.
const LINK: (&str, &str) = ("run", "linked");

/// The fact that holds a fleet run's link, in its first host's run: scope and key.
const FLEET: (&str, &str) = ("fleet", "hosts");

/// The fact that points the other hosts' runs to the first one, which holds the link (the
/// link names every host, so a copy in every run would grow with the square of the fleet).
const FLEET_MEMBER: (&str, &str) = ("fleet", "member_of");

/// One host's part of a fleet run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetMember {
    /// The host's name.
    pub host: String,
    /// Its labels (instance type, kernel, kubelet version, ...).
    pub labels: BTreeMap<String, String>,
    /// Its run.
    pub run: String,
}

/// A fleet run as stored: the label hosts are grouped by, the hosts that ran, and the hosts
/// that could not (each with why).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetLink {
    /// The label that names a host's type.
    pub type_label: String,
    /// The hosts' runs, in the order the hosts were given.
    pub hosts: Vec<FleetMember>,
    /// Hosts that did not run, as `host: why`.
    #[serde(default)]
    pub not_run: Vec<String>,
}

/// Records the fleet run `link`: whole in its first host's run, and in every other host's
/// run as a pointer to that one.
pub fn link_fleet(store: &mut Store, link: &FleetLink) -> Result<(), StoreError> {
    let Some(first) = link.hosts.first() else {
        return Ok(());
    };
    store.record_fact(
        &RunId::new(first.run.clone()),
        &Fact {
            scope: FLEET.0.into(),
            key: FLEET.1.into(),
            value: serde_json::to_value(link).expect("a fleet link serializes"),
        },
    )?;
    for m in &link.hosts[1..] {
        store.record_fact(
            &RunId::new(m.run.clone()),
            &Fact {
                scope: FLEET_MEMBER.0.into(),
                key: FLEET_MEMBER.1.into(),
                value: json!(first.run),
            },
        )?;
    }
    Ok(())
}

/// The fleet run `r` is part of, if any (read from its first host's run in `store` when `r`
/// is another host's).
pub fn fleet_link(store: &Store, r: &Results) -> Option<FleetLink> {
    let fact = |r: &Results, (scope, key): (&str, &str)| {
        r.facts
            .iter()
            .find(|f| f.scope == scope && f.key == key)
            .map(|f| f.value.clone())
    };
    if let Some(v) = fact(r, FLEET) {
        return serde_json::from_value(v).ok();
    }
    let first = fact(r, FLEET_MEMBER)?;
    let first = store.load_run(&RunId::new(first.as_str()?)).ok()?;
    let f = first
        .facts
        .iter()
        .find(|f| f.scope == FLEET.0 && f.key == FLEET.1)?;
    serde_json::from_value(f.value.clone()).ok()
}

/// The fleet's figures for `link`, from its runs in `store` (`r` stands for its own run);
/// with the hosts whose runs are no longer stored, each with why.
pub fn fleet(store: &Store, link: &FleetLink, r: Option<&Results>) -> (Fleet, Vec<String>) {
    let mut loaded: Vec<(&FleetMember, Results)> = Vec::new();
    let mut missing = Vec::new();
    for m in &link.hosts {
        match r.filter(|r| r.run.id == m.run) {
            Some(r) => loaded.push((m, for_fleet(r.clone()))),
            None => match analyzed(store, &m.run) {
                Ok(x) => loaded.push((m, for_fleet(x))),
                Err(e) => missing.push(format!("{} {}: {e}", m.host, m.run)),
            },
        }
    }
    let hosts: Vec<FleetHost<'_>> = loaded
        .iter()
        .map(|(m, x)| FleetHost {
            name: m.host.clone(),
            labels: m.labels.clone(),
            results: x,
        })
        .collect();
    (Fleet::new(&hosts, &link.type_label), missing)
}

/// What the fleet table needs of a host's results: its run, cells and target. The rest (the
/// trials with their raw samples, the facts, among them the fleet link that names every
/// host) is dropped as each run is read, so the memory of a fleet's table grows with its
/// hosts' cells, not with their runs (at 1,000 hosts the runs kept whole took 2.2 GB here;
/// bench/fleet-sim).
fn for_fleet(mut r: Results) -> Results {
    r.trials = Vec::new();
    r.facts = Vec::new();
    r.sections = Vec::new();
    r.aggressor = Vec::new();
    r.classes = Vec::new();
    r.plan = None;
    r
}

/// The fleet table of `link`, with its notes (hosts not run, runs no longer stored).
pub fn fleet_section(store: &Store, link: &FleetLink, r: Option<&Results>) -> Section {
    let (f, missing) = fleet(store, link, r);
    let mut section = f.section();
    for n in &link.not_run {
        section.notes.push(format!("not run: {n}"));
    }
    for m in missing {
        section
            .notes
            .push(format!("left out (no longer stored): {m}"));
    }
    section
}

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
    if let Some(link) = fleet_link(store, r) {
        let section = fleet_section(store, &link, Some(r));
        r.sections.insert(0, section);
    }
    if let Some(section) = cross_section(store, r) {
        r.sections.insert(0, section);
    }
}

/// The table across the platforms of the linked set `r` is one of (runs of the set no
/// longer in the database are left out, and said so); `None` when `r` ran alone.
pub fn cross_section(store: &Store, r: &Results) -> Option<Section> {
    let set = linked(r);
    if set.is_empty() {
        return None;
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
    Some(section)
}
