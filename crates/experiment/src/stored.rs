//! Stored runs read back for reporting: one run analysed, and the runs of a cross-platform
//! set (`run --platform host,cgroup,...`) linked to each other. Every reader (`isobench show`,
//! `report`, `export`, `compare` and the web server) goes through here, so a run reads the same
//! wherever it is shown.
//!
//! Each run's results are stored once, as a document beside its rows (where the run ends, or
//! by the first reader that had to compute them when the database takes writes), and read
//! back instead of analysing the run again while the document's key holds: the id of this
//! analysis code ([`ANALYSIS_CODE`]) and the fingerprint of the run's rows (see the store's
//! `documents.rs`). Whatever changes either, the run is analysed again.
//!
//! The link is a fact of every run of the set (`run`/`linked`: the runs and their platforms),
//! so any run of the set carries the table across the platforms. A fleet run (one scenario on
//! many hosts, `run --hosts`) is linked the same way (`fleet`/`hosts`: each host's run, name
//! and labels), and any of its runs carries the fleet table.

use std::collections::BTreeMap;
use std::time::Duration;

use isobench_results::cross::CrossTable;
use isobench_results::fleet::{Fleet, FleetHost};
use isobench_results::Section;
use isobench_store::{Fact, OpenOptions, RunId, RunStatus, Store, StoreError};
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
            None => match analyzed(store, &m.run, Trials::Left) {
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

/// The id of the code that analyses a run: a SHA-256 of the sources of the crates the
/// analysis is built from, with the workspace's `Cargo.toml` and `Cargo.lock` (build.rs). A
/// document stored by other code is never read.
pub const ANALYSIS_CODE: &str = env!("ISOBENCH_ANALYSIS_CODE");

/// How a results document is stored: MessagePack with field names (self-describing, so the
/// serde attributes of [`Results`] hold; floats stored bit for bit), in three parts: the
/// results without their trials, the trials without their window series, and the series.
/// The trials with their raw samples are most of a document's bytes, and the series most of
/// those; only the JSON export shows the trials, and only `export --series` the series
/// ([`Trials`]), so `show` and `report` decode the first part alone. Measured against JSON
/// on a quick run's document (bench/figures/10-ci-and-speed.json): smaller, and faster to
/// read.
pub const RESULTS_ENCODING: &str = "msgpack-parts";

/// How much of the results' trials ([`Results::trials`]) a reader wants: only the JSON
/// export shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trials {
    /// Left out: `trials` is empty.
    Left,
    /// Read, without their window series (`series` empty): what the JSON export shows.
    Read,
    /// Read whole, with their window series (`export --series`).
    WithSeries,
}

impl Trials {
    /// [`Trials::Read`] when `wanted`.
    pub fn read_if(wanted: bool) -> Trials {
        if wanted {
            Trials::Read
        } else {
            Trials::Left
        }
    }

    /// `r` as a reader of this much of its trials sees it.
    fn keep(self, r: &mut Results) {
        match self {
            Trials::Left => r.trials = Vec::new(),
            Trials::Read => r.trials.iter_mut().for_each(|t| t.series = Vec::new()),
            Trials::WithSeries => {}
        }
    }
}

/// How long a reader that computed a run's results waits for another writer before it
/// leaves the storing to the next reader.
const LAZY_WRITE_WAIT: Duration = Duration::from_millis(100);

/// `r` encoded as a stored document: the results without their trials, and the trials
/// without their series, each after its length (8 bytes, little-endian); then the series,
/// one list per trial.
fn encode(r: &mut Results) -> Vec<u8> {
    let mut trials = std::mem::take(&mut r.trials);
    let series: Vec<_> = trials
        .iter_mut()
        .map(|t| std::mem::take(&mut t.series))
        .collect();
    let mut data = Vec::new();
    let mut part = |bytes: Vec<u8>| {
        data.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        data.extend_from_slice(&bytes);
    };
    part(rmp_serde::to_vec_named(r).expect("results encode"));
    part(rmp_serde::to_vec_named(&trials).expect("trials encode"));
    rmp_serde::encode::write_named(&mut data, &series).expect("series encode");
    for (t, s) in trials.iter_mut().zip(series) {
        t.series = s;
    }
    r.trials = trials;
    data
}

/// A stored document decoded from its `len` bytes, which `read` gives range by range (only
/// the parts `trials` asks for are read), as much of its trials as `trials` asks for; `None`
/// when it does not decode (it is computed again).
fn decode(
    len: usize,
    read: impl Fn(std::ops::Range<usize>) -> Option<Vec<u8>>,
    trials: Trials,
) -> Option<Results> {
    // The part at `at` and where the next begins.
    let part = |at: usize| -> Option<(Vec<u8>, usize)> {
        let n = u64::from_le_bytes(read(at..at.checked_add(8)?)?.try_into().ok()?);
        let start = at + 8;
        let end = start.checked_add(usize::try_from(n).ok()?)?;
        Some((read(start..end)?, end))
    };
    let (head, next) = part(0)?;
    let mut r: Results = rmp_serde::from_slice(&head).ok()?;
    if trials == Trials::Left {
        return Some(r);
    }
    let (stored, next) = part(next)?;
    r.trials = rmp_serde::from_slice(&stored).ok()?;
    if trials == Trials::WithSeries {
        let series: Vec<Vec<_>> = rmp_serde::from_slice(&read(next..len)?).ok()?;
        if series.len() != r.trials.len() {
            return None;
        }
        for (t, s) in r.trials.iter_mut().zip(series) {
            t.series = s;
        }
    }
    Some(r)
}

/// A stored run's results alone, without the table of the runs linked with it: its stored
/// document when that still holds, else analysed from its rows (and stored, when the run
/// has ended and the database takes writes); with its trials when `trials` asks for them.
pub fn analyzed(store: &Store, id: &str, trials: Trials) -> Result<Results, StoreError> {
    let run = RunId::new(id);
    // A document that cannot be read is computed again, as a missing one.
    if let Some(r) = store
        .with_document(&run, ANALYSIS_CODE, RESULTS_ENCODING, |d| {
            decode(d.len(), |range| d.read(range), trials)
        })
        .ok()
        .flatten()
        .flatten()
    {
        return Ok(r);
    }
    let (loaded, fingerprint) = store.load_run_keyed(&run)?;
    let mut r = analyze(&loaded);
    if loaded.run.status != RunStatus::Running {
        store_lazily(store, &run, &fingerprint, &mut r);
    }
    trials.keep(&mut r);
    Ok(r)
}

/// Analyses run `run` of `store` and stores its results document (where a run ends: the
/// run session, so the CLI's, the server's and a fleet host's runs all store theirs).
pub fn store_results(store: &mut Store, run: &RunId) -> Result<Results, StoreError> {
    let (loaded, fingerprint) = store.load_run_keyed(run)?;
    let mut r = analyze(&loaded);
    let data = encode(&mut r);
    store.store_document(run, ANALYSIS_CODE, &fingerprint, RESULTS_ENCODING, &data)?;
    Ok(r)
}

/// Stores `r`, computed by a reader from the rows of `fingerprint`, as `run`'s document,
/// through a connection of its own: a reader's store is often opened read-only. A database
/// this process cannot write, one in memory, or one busy with another writer gets nothing,
/// and nothing is said: the next reader computes the results again.
fn store_lazily(store: &Store, run: &RunId, fingerprint: &str, r: &mut Results) {
    let path = store.path();
    if path.as_os_str() == ":memory:" || !Store::is_writable(path) {
        return;
    }
    let options = OpenOptions {
        busy_timeout: LAZY_WRITE_WAIT,
    };
    let stored = Store::open_with(path, &options).and_then(|mut w| {
        w.store_document(
            run,
            ANALYSIS_CODE,
            fingerprint,
            RESULTS_ENCODING,
            &encode(r),
        )
    });
    if let Err(e) = stored {
        tracing::debug!("run {run}: results document not stored: {e}");
    }
}

/// A stored run's results as `isobench show` and `report` give them: with the table across
/// platforms first when the run is one of a linked set; with its trials when `trials` asks
/// for them.
pub fn with_linked(store: &Store, id: &str, trials: Trials) -> Result<Results, StoreError> {
    let mut r = analyzed(store, id, trials)?;
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
        match analyzed(store, id, Trials::Left) {
            Ok(x) => loaded.push((platform.clone(), x)),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// [`decode`] of a document held whole.
    fn decode_all(data: &[u8], trials: Trials) -> Option<Results> {
        decode(data.len(), |r| data.get(r).map(<[u8]>::to_vec), trials)
    }
    use crate::fake::{run_fake, FakeScript};
    use crate::progress::NoProgress;
    use crate::{HostView, Plan, PlanOptions, Scenario, Source};
    use isobench_store::Timestamp;

    const QUICK: &str = include_str!("../../../examples/quick.toml");

    /// The quick example run to its end on the fake platform, in a database file in `dir`.
    fn quick_run(dir: &std::path::Path) -> (std::path::PathBuf, RunId) {
        let sc = Scenario::parse(Source::new("quick.toml", QUICK)).unwrap();
        let plan = Plan::resolve(
            &sc,
            &HostView::synthetic(4, 8 << 30, true),
            &PlanOptions::default(),
        )
        .unwrap();
        let path = dir.join("quick.db");
        let mut store = Store::open(&path).unwrap();
        let script = FakeScript {
            usage: true,
            ..FakeScript::default()
        };
        let out = run_fake(&mut store, &plan, QUICK, script, &mut NoProgress).unwrap();
        (path, out.run)
    }

    fn documents(path: &std::path::Path) -> i64 {
        rusqlite::Connection::open(path)
            .unwrap()
            .query_row("SELECT count(*) FROM run_documents", [], |r| r.get(0))
            .unwrap()
    }

    /// The encoding keeps every field of a real run's results (on/off window series, latency
    /// views, facts) exactly: decode(encode(r)) == r.
    #[test]
    fn a_quick_runs_results_survive_their_encoding() {
        let dir = tempfile::tempdir().unwrap();
        let (path, run) = quick_run(dir.path());
        let r = analyze(&Store::open(&path).unwrap().load_run(&run).unwrap());
        assert!(
            r.trials.iter().any(|t| !t.series.is_empty()),
            "window series"
        );
        let mut encoded = r.clone();
        let data = encode(&mut encoded);
        assert_eq!(encoded, r, "encoding gives the trials back");
        let mut without = r.clone();
        without.trials = Vec::new();
        assert_eq!(decode_all(&data, Trials::Left), Some(without));
        let mut no_series = r.clone();
        no_series
            .trials
            .iter_mut()
            .for_each(|t| t.series = Vec::new());
        assert_eq!(decode_all(&data, Trials::Read), Some(no_series));
        assert_eq!(decode_all(&data, Trials::WithSeries), Some(r));
    }

    /// A reader that computed a run's results stores them when the file takes writes (its
    /// own store opened read-only, as `show` opens it), and the next reader reads them back;
    /// a run still running is not stored, nor is anything in memory.
    #[test]
    fn a_reader_stores_what_it_computed_and_the_next_one_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let (path, run) = quick_run(dir.path());
        let expected = analyze(&Store::open(&path).unwrap().load_run(&run).unwrap());
        assert_eq!(documents(&path), 0);
        let reader = Store::open_read_only(&path).unwrap();
        assert_eq!(
            analyzed(&reader, run.as_str(), Trials::WithSeries).unwrap(),
            expected
        );
        assert_eq!(documents(&path), 1);
        let data = reader
            .document(&run, ANALYSIS_CODE, RESULTS_ENCODING)
            .unwrap()
            .expect("stored");
        assert_eq!(
            decode_all(&data, Trials::WithSeries).as_ref(),
            Some(&expected)
        );
        assert_eq!(
            analyzed(&reader, run.as_str(), Trials::WithSeries).unwrap(),
            expected
        );
        // Without the trials: the same results, stored or computed.
        let mut without = expected.clone();
        without.trials = Vec::new();
        assert_eq!(
            analyzed(&reader, run.as_str(), Trials::Left).unwrap(),
            without
        );

        // Resumed (running again): computed, not stored.
        let mut w = Store::open(&path).unwrap();
        w.finish_run(&run, RunStatus::Interrupted, Some("x"), Timestamp::now())
            .unwrap();
        w.resume_run(&run).unwrap();
        assert_eq!(documents(&path), 0);
        assert_eq!(
            analyzed(&reader, run.as_str(), Trials::Left)
                .unwrap()
                .trials,
            Vec::new()
        );
        assert_eq!(documents(&path), 0);
    }

    /// A document that no longer decodes (another encoder's bytes under the same key) is
    /// computed again, not an error.
    #[test]
    fn a_document_that_does_not_decode_is_computed_again() {
        let dir = tempfile::tempdir().unwrap();
        let (path, run) = quick_run(dir.path());
        let mut store = Store::open(&path).unwrap();
        let (loaded, fp) = store.load_run_keyed(&run).unwrap();
        store
            .store_document(&run, ANALYSIS_CODE, &fp, RESULTS_ENCODING, b"\xc1junk")
            .unwrap();
        assert_eq!(
            analyzed(&store, run.as_str(), Trials::WithSeries).unwrap(),
            analyze(&loaded)
        );
    }
}
