//! Services in tenants and probes beside them, on the fake platform: the services start
//! before the trials that need them and stop when they should, their addresses reach the
//! probe's parameters, every site runs in the same trial, and each result is stored against
//! its tenant.

use isobench_experiment::fake::{FakeBackend, FakeScript};
use isobench_experiment::orchestrator::{create_run, Engine, EngineIo, EngineOptions};
use isobench_experiment::progress::Transcript;
use isobench_experiment::serving::{Keep, ProbeSite, ServiceSpec, Serving, Site};
use isobench_experiment::{HostView, Plan, PlanOptions, Scenario, Source};
use isobench_store::{Store, TrialStatus};

const WEB: &str = r#"
name = "web"
kind = "matrix"
seed = 3

[trial]
duration = "200ms"
warmup = "100ms"
solo = "0s"

[repetitions]
min = 1
max = 1

[[tenant]]
name = "web1"
role = "victim"
limits = { memory = "512M", pids = 128 }

[[tenant]]
name = "web2"
role = "victim"
limits = { memory = "512M", pids = 128 }

[[tenant]]
name = "web3"
role = "aggressor"
limits = { memory = "512M", pids = 64 }

[[probe]]
name = "http"

[[stressor]]
name = "forkbomb"
"#;

fn plan_of(text: &str) -> Plan {
    let sc = Scenario::parse(Source::new("web.toml", text)).expect("valid scenario");
    let host = HostView::synthetic(2, 8 << 30, true);
    Plan::resolve(&sc, &host, &PlanOptions::default()).expect("plan resolves")
}

/// An http server in every tenant and a load generator beside each.
fn web_serving(keep: Keep) -> Serving {
    let tenants = ["web1", "web2", "web3"];
    Serving {
        services: tenants
            .iter()
            .map(|t| ServiceSpec {
                id: t.to_string(),
                tenant: t.to_string(),
                kind: "http:4K".into(),
            })
            .collect(),
        reserve: Vec::new(),
        sites: tenants
            .iter()
            .map(|t| ProbeSite {
                tenant: t.to_string(),
                at: Site::Beside,
                params: [
                    ("addr".to_string(), format!("{{ip:{t}}}")),
                    ("port".to_string(), format!("{{port:{t}}}")),
                ]
                .into_iter()
                .collect(),
            })
            .collect(),
        keep,
    }
}

struct Ran {
    store: Store,
    run: isobench_store::RunId,
    log: Vec<String>,
}

fn run(plan: &Plan, script: FakeScript) -> Ran {
    let mut store = Store::open_in_memory().unwrap();
    let (mut backend, clock) = FakeBackend::new(plan.seed, script);
    let run = create_run(&mut store, plan, WEB, "fake", serde_json::json!({}), 0).unwrap();
    let mut t = Transcript::default();
    Engine::new(
        plan,
        run.clone(),
        EngineIo::new(&mut store, &mut backend, &clock, &mut t),
        EngineOptions::default(),
    )
    .execute()
    .unwrap();
    Ran {
        store,
        run,
        log: backend.log(),
    }
}

#[test]
fn load_generators_beside_every_tenant_reach_its_own_server() {
    let mut plan = plan_of(WEB);
    plan.probes[0].serving = Some(web_serving(Keep::Block));
    let r = run(&plan, FakeScript::default());
    let log = r.log.join("\n");
    // Every tenant serves; the places beside them are made once.
    for t in ["web1", "web2", "web3"] {
        assert!(
            log.contains(&format!("service {t} http.{t} http:4K -> 127.0.0.1:")),
            "{log}"
        );
        assert_eq!(
            r.log
                .iter()
                .filter(|l| **l == format!("create beside-{t}"))
                .count(),
            1,
            "{log}"
        );
        assert!(log.contains(&format!("teardown beside-{t}")), "{log}");
    }
    // Each generator is pointed at the port its own tenant's server got.
    for (i, l) in r.log.iter().enumerate() {
        let Some(rest) = l.strip_prefix("service ") else {
            continue;
        };
        let tenant = rest.split(' ').next().unwrap();
        let port = rest.rsplit(':').next().unwrap();
        let next_probe = r.log[i..]
            .iter()
            .find(|l| l.starts_with(&format!("probe beside-{tenant} ")))
            .unwrap_or_else(|| panic!("no probe beside {tenant} after {l}\n{log}"));
        // (The log ends with the rate the generator holds.)
        assert_eq!(
            next_probe.split(" rate=").next(),
            Some(format!("probe beside-{tenant} http port={port}").as_str()),
            "{log}"
        );
    }
    // Nothing runs the probe inside a tenant.
    assert!(!r.log.iter().any(|l| l.starts_with("probe web")), "{log}");
    // Services are stopped at the end of every block that started them.
    let started = r.log.iter().filter(|l| l.starts_with("service ")).count();
    let stopped = r
        .log
        .iter()
        .filter(|l| l.starts_with("stop service "))
        .count();
    assert_eq!(started, stopped, "{log}");
    // Each trial stores one record per tenant, the misbehaving one included.
    let loaded = r.store.load_run(&r.run).unwrap();
    let mut keys = std::collections::BTreeMap::new();
    for t in &loaded.trials {
        keys.entry(t.key)
            .or_insert_with(Vec::new)
            .push(t.tenant.clone());
    }
    assert!(!keys.is_empty());
    for tenants in keys.values() {
        let mut tenants = tenants.clone();
        tenants.sort();
        assert_eq!(tenants, ["web1", "web2", "web3"]);
    }
}

#[test]
fn services_kept_for_a_trial_stop_after_each_trial() {
    let mut plan = plan_of(WEB);
    plan.probes[0].serving = Some(web_serving(Keep::Trial));
    let r = run(&plan, FakeScript::default());
    // Between two probe runs beside web1 its server is stopped and started again.
    let lines: Vec<&str> = r
        .log
        .iter()
        .map(String::as_str)
        .filter(|l| l.starts_with("probe beside-web1") || l.contains("http.web1"))
        .collect();
    for w in lines.windows(2) {
        if w[0].starts_with("probe") && w[1].starts_with("probe") {
            panic!("two trials on one server: {lines:?}");
        }
    }
    assert!(lines.len() >= 6, "{lines:?}");
}

#[test]
fn a_tenant_whose_server_stops_answering_is_dnr_and_serves_again_later() {
    let mut plan = plan_of(WEB);
    plan.probes[0].serving = Some(web_serving(Keep::Block));
    let script = FakeScript {
        dnr_under: vec![("web3".into(), "forkbomb".into())],
        ..FakeScript::default()
    };
    let r = run(&plan, script);
    let loaded = r.store.load_run(&r.run).unwrap();
    let contended: Vec<_> = loaded
        .trials
        .iter()
        .filter(|t| t.condition.to_string() != "baseline")
        .collect();
    assert!(!contended.is_empty());
    for t in &contended {
        match t.tenant.as_str() {
            "web3" => assert!(
                matches!(&t.status, TrialStatus::Dnr(why) if why.contains("forkbomb")),
                "{:?}",
                t.status
            ),
            _ => assert_eq!(t.status, TrialStatus::Ok, "{}", t.tenant),
        }
    }
    // Baseline trials of the misbehaving tenant still measure (its server restarted).
    assert!(loaded.trials.iter().any(|t| t.tenant == "web3"
        && t.condition.to_string() == "baseline"
        && t.status == TrialStatus::Ok));
}

#[test]
fn a_relay_ring_chains_forwarders_tenant_to_tenant_back_to_the_master() {
    let text = WEB.replace("name = \"http\"", "name = \"relay-ring\"");
    let mut plan = plan_of(&text);
    plan.probes[0].serving = Some(Serving {
        services: vec![
            ServiceSpec {
                id: "f2".into(),
                tenant: "web3".into(),
                kind: "relay-forwarder:{addr:master}".into(),
            },
            ServiceSpec {
                id: "f1".into(),
                tenant: "web2".into(),
                kind: "relay-forwarder:{addr:f2}".into(),
            },
        ],
        reserve: vec!["master".into()],
        sites: vec![ProbeSite {
            tenant: "web1".into(),
            at: Site::In,
            params: [
                ("first_hop".to_string(), "{addr:f1}".to_string()),
                ("listen".to_string(), "{addr:master}".to_string()),
            ]
            .into_iter()
            .collect(),
        }],
        keep: Keep::Block,
    });
    assert_eq!(
        plan.probes[0]
            .serving
            .as_ref()
            .unwrap()
            .check(&plan.tenants),
        Ok(())
    );
    let r = run(&plan, FakeScript::default());
    let first: Vec<&str> = r
        .log
        .iter()
        .map(String::as_str)
        .skip_while(|l| !l.starts_with("reserve "))
        .take(4)
        .collect();
    assert_eq!(
        first,
        [
            "reserve 127.0.0.1:40001",
            "service web3 relay-ring.f2 relay-forwarder:127.0.0.1:40001 -> 127.0.0.1:40002",
            "service web2 relay-ring.f1 relay-forwarder:127.0.0.1:40002 -> 127.0.0.1:40003",
            "probe web1 relay-ring first_hop=127.0.0.1:40003 listen=127.0.0.1:40001",
        ]
    );
}
