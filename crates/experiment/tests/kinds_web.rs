//! The `webapp` kind end to end on the fake platform, deterministic: the preset's plan, the
//! services and load generators it drives, DNR of a misbehaving tenant that stops answering,
//! and the paper's table, snapshot-tested.

use isobench_experiment::analysis::analyze;
use isobench_experiment::fake::{FakeBackend, FakeScript};
use isobench_experiment::kinds::webapp;
use isobench_experiment::orchestrator::{create_run, Engine, EngineIo, EngineOptions};
use isobench_experiment::progress::Transcript;
use isobench_experiment::{HostView, Plan, PlanOptions, Scenario, Source};
use isobench_store::Store;

const IBS: &str = include_str!("../../../examples/ibs.toml");

/// A section as the plain grid every renderer starts from: title, headers, rows, notes.
fn grid(s: &isobench_results::Section) -> String {
    let mut out = format!("{}\n{}\n", s.title, s.headers().join(" | "));
    for r in s.text_rows() {
        out.push_str(&r.join(" | "));
        out.push('\n');
    }
    for n in &s.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

fn resolve_err(text: &str) -> String {
    match Scenario::parse(Source::new("kind.toml", text)) {
        Err(e) => e.to_string(),
        Ok(sc) => Plan::resolve(
            &sc,
            &HostView::synthetic(2, 8 << 30, true),
            &PlanOptions::default(),
        )
        .expect_err("refused")
        .to_string(),
    }
}

#[test]
fn kind_fields_are_checked_with_their_place_and_fix() {
    let e = resolve_err(&IBS.replace("keep = \"block\"", "keep = \"forever\""));
    assert!(e.contains("webapp.keep"), "{e}");
    assert!(e.contains("block"), "{e}");
    let e = resolve_err(&IBS.replace("keep = \"block\"", "keep = \"block\"\nrate = 5"));
    assert!(e.contains("rate"), "{e}");
    let e = resolve_err(&ARTIFACTS.replace("\"one\", \"spread\"]", "\"one\", \"sideways\"]"));
    assert!(
        e.contains("`\"sideways\"` is not one of one, spread"),
        "{e}"
    );
    let e = resolve_err(&ARTIFACTS.replace("runs = 20 ", "hops = 5\nruns = 20 "));
    assert!(e.contains("artifacts.hops"), "{e}");
    assert!(e.contains("write hops = 3"), "{e}");
    let e = resolve_err(&ARTIFACTS.replace("iterations = 2000", "iterations = 0"));
    assert!(e.contains("artifacts.iterations"), "{e}");
}

fn plan_of(text: &str) -> Plan {
    let sc = Scenario::parse(Source::new("ibs.toml", text)).expect("valid scenario");
    let host = HostView::synthetic(2, 8 << 30, true);
    Plan::resolve(&sc, &host, &PlanOptions::default()).expect("plan resolves")
}

fn run(plan: &Plan, script: FakeScript) -> (Store, isobench_store::RunId, Vec<String>) {
    let mut store = Store::open_in_memory().unwrap();
    let (mut backend, clock) = FakeBackend::new(plan.seed, script);
    let run = create_run(&mut store, plan, IBS, "fake", serde_json::json!({}), 0).unwrap();
    let mut t = Transcript::default();
    Engine::new(
        plan,
        run.clone(),
        EngineIo::new(&mut store, &mut backend, &clock, &mut t),
        EngineOptions::default(),
    )
    .execute()
    .unwrap();
    (store, run, backend.log())
}

#[test]
fn ibs_preset_reproduces_the_papers_table_on_the_fake_platform() {
    let mut plan = plan_of(&IBS.replace("platform = \"cgroup\"", "seed = 5"));
    plan.seed = 5;
    let script = FakeScript {
        dnr_under: vec![
            ("bad".into(), "forkbomb".into()),
            ("bad".into(), "memhog".into()),
        ],
        ..FakeScript::default()
    };
    let (store, run, log) = run(&plan, script);
    // Every tenant serves, and is measured from beside it, never from inside.
    for t in ["web1", "web2", "web3", "bad"] {
        assert!(
            log.iter().any(|l| l == &format!("create beside-{t}")),
            "{t}"
        );
        assert!(log
            .iter()
            .any(|l| l.starts_with(&format!("service {t} http.{t} http:4096 -> "))));
    }
    assert!(!log
        .iter()
        .any(|l| l.starts_with("probe web") || l.starts_with("probe bad")));
    let results = analyze(&store.load_run(&run).unwrap());
    let rows = webapp::paper_rows(&plan, &results.cells);
    let fork = rows.iter().find(|r| r.condition == "fork@100").unwrap();
    assert!(fork.bad_dnr, "{fork:?}");
    assert_eq!(fork.good_dnr, (0, 3));
    let cpu = rows.iter().find(|r| r.condition == "cpu@100").unwrap();
    // The misbehaving tenant's own server suffers more than its neighbours'.
    assert!(cpu.bad.unwrap() > cpu.good.unwrap(), "{cpu:?}");
    // The section the report renders, as the kind's analysis made it.
    let section = results
        .sections
        .iter()
        .find(|s| s.id == "table2")
        .expect("the paper's table");
    // The beside-tenant load generators of a trial run on threads of their own, so which
    // draw of the fake's noise each gets varies: the layout is pinned, not the numbers.
    let layout: String = grid(section)
        .lines()
        .map(|l| {
            l.split(" | ")
                .map(|c| {
                    if c.trim_start_matches('-')
                        .starts_with(|ch: char| ch.is_ascii_digit())
                    {
                        "#"
                    } else {
                        c
                    }
                })
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!("ibs_table", layout);
    // A misbehaving tenant's estimate the analysis does not trust is marked in the table,
    // as everywhere else; the one it trusts is not.
    let bad_cpu = |cells: &[isobench_results::Cell]| {
        let s = webapp::paper_section(&plan, cells);
        let row = s
            .rows
            .iter()
            .find(|r| r[0].text().contains("cpu@100"))
            .expect("the CPU row")
            .clone();
        row[1].clone()
    };
    let mut cells = results.cells.clone();
    let cell = cells
        .iter_mut()
        .find(|c| c.tenant == "bad" && c.condition == "cpu@100" && c.metric == "good_pct")
        .expect("the misbehaving tenant's CPU cell");
    cell.comparison.as_mut().expect("compared").trustworthy = true;
    assert!(
        matches!(
            bad_cpu(&cells),
            isobench_results::Value::Estimate { flag: None, .. }
        ),
        "{:?}",
        bad_cpu(&cells)
    );
    let cell = cells
        .iter_mut()
        .find(|c| c.tenant == "bad" && c.condition == "cpu@100" && c.metric == "good_pct")
        .unwrap();
    cell.comparison.as_mut().unwrap().trustworthy = false;
    let flagged = bad_cpu(&cells);
    assert!(
        matches!(
            &flagged,
            isobench_results::Value::Estimate { flag: Some(_), .. }
        ),
        "{flagged:?}"
    );
    assert!(
        flagged
            .text()
            .ends_with(isobench_results::UNTRUSTWORTHY_MARK),
        "{}",
        flagged.text()
    );
}

#[test]
fn webapp_needs_exactly_one_http_probe() {
    let two = IBS.replace(
        "[[stressor]]\nname = \"memhog\"",
        "[[probe]]\nname = \"cpu-int\"\n\n[[stressor]]\nname = \"memhog\"",
    );
    let sc = Scenario::parse(Source::new("ibs.toml", &two)).expect("parses");
    let host = HostView::synthetic(2, 8 << 30, true);
    let e = Plan::resolve(&sc, &host, &PlanOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("probe cpu-int is not http"), "{e}");
    assert!(e.contains("kind = \"matrix\""), "{e}");
}

const ARTIFACTS: &str = include_str!("../../../examples/artifacts.toml");

#[test]
fn artifacts_preset_measures_every_placement_and_null_test_on_the_fake_platform() {
    let plan = plan_of(&ARTIFACTS.replace("platform = \"auto\"", "seed = 9"));
    assert_eq!(plan.probes[0].params.0["runs"], 20);
    assert_eq!(plan.probes[0].params.0["iterations"], 2000);
    let ids: Vec<&str> = plan.probes.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(
        ids,
        ["ring-one", "ring-spread", "ring-nosyscall", "ring-write"]
    );
    let (store, run, log) = run(&plan, FakeScript::default());
    // The spread ring: forwarders in ring3 then ring2, the master in ring1.
    let chain: Vec<&str> = log
        .iter()
        .map(String::as_str)
        .skip_while(|l| !l.starts_with("reserve "))
        .take(4)
        .collect();
    assert_eq!(
        chain,
        [
            "reserve 127.0.0.1:40001",
            "service ring3 ring-spread.f2 relay-forwarder:127.0.0.1:40001 -> 127.0.0.1:40002",
            "service ring2 ring-spread.f1 relay-forwarder:127.0.0.1:40002 -> 127.0.0.1:40003",
            "probe ring1 relay-ring first_hop=127.0.0.1:40003 listen=127.0.0.1:40001",
        ]
    );
    // Only the first victim runs the ring.
    assert!(log
        .iter()
        .filter(|l| l.starts_with("probe "))
        .all(|l| l.starts_with("probe ring1 relay-ring")));
    let results = analyze(&store.load_run(&run).unwrap());
    let section = results
        .sections
        .iter()
        .find(|s| s.id == "table1")
        .expect("the paper's table");
    assert_eq!(section.rows.len(), 8);
    insta::assert_snapshot!("artifacts_table", grid(section));
}

#[test]
fn artifacts_refuses_victims_with_their_own_network() {
    let ns = ARTIFACTS.replacen(
        "name = \"ring2\"\nrole = \"victim\"",
        "name = \"ring2\"\nrole = \"victim\"\nnetwork = { namespace = true }",
        1,
    );
    let sc = Scenario::parse(Source::new("artifacts.toml", &ns)).expect("parses");
    let host = HostView::synthetic(2, 8 << 30, true);
    let e = Plan::resolve(&sc, &host, &PlanOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("tenant ring2 has its own network namespace"),
        "{e}"
    );
    assert!(e.contains("loopback"), "{e}");
}
