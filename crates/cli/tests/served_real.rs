//! Services in real cgroup tenants, kept short: web servers in tenants (one with its own
//! network namespace) measured by load generators beside them, and a relay ring whose
//! forwarders live in other tenants. Needs root and the cpu, memory and pids controllers;
//! skips with the reason otherwise.

mod common;

use isobench_experiment::backend::SystemClock;
use isobench_experiment::orchestrator::{create_run, Engine, EngineIo, EngineOptions};
use isobench_experiment::progress::NoProgress;
use isobench_experiment::real::RealBackend;
use isobench_experiment::serving::{Keep, ProbeSite, ServiceSpec, Serving, Site};
use isobench_experiment::{HostView, Plan, PlanOptions, Scenario, Source};
use isobench_store::{Store, TrialStatus};

fn scenario(probe: &str, netns: bool) -> String {
    let ns = if netns {
        "network = { namespace = true }"
    } else {
        ""
    };
    format!(
        r#"
name = "served"
kind = "matrix"
seed = 1

[trial]
duration = "300ms"
warmup = "100ms"
solo = "0s"
pilot = "0s"

[repetitions]
min = 1
max = 1

[[tenant]]
name = "t1"
role = "victim"
limits = {{ memory = "256M", pids = 128 }}

[[tenant]]
name = "t2"
role = "victim"
limits = {{ memory = "256M", pids = 128 }}
{ns}

[[tenant]]
name = "t3"
role = "aggressor"
limits = {{ memory = "256M", pids = 64 }}

[[probe]]
name = "{probe}"
{params}

[[stressor]]
name = "cpu"
intensity = [50]
"#,
        params = if probe == "http" {
            "params = { rate = 200, connections = 2, good_ms = 50 }"
        } else {
            "params = { runs = 2, iterations = 200 }"
        }
    )
}

fn run_real(plan: &Plan, text: &str) -> (Store, isobench_store::RunId) {
    let mut store = Store::open_in_memory().unwrap();
    let guard = isobench_platform::RunGuard::start().expect("a run");
    let exe = assert_cmd::cargo::cargo_bin("isobench");
    let mut backend = RealBackend::new(plan, guard.context(), exe).expect("backend");
    let run = create_run(&mut store, plan, text, "cgroup", serde_json::json!({}), 0).unwrap();
    let clock = SystemClock::new();
    let mut progress = NoProgress;
    Engine::new(
        plan,
        run.clone(),
        EngineIo::new(&mut store, &mut backend, &clock, &mut progress),
        EngineOptions {
            skip_memcheck: true,
            ..EngineOptions::default()
        },
    )
    .execute()
    .expect("the run ends");
    drop(backend);
    guard.finish();
    (store, run)
}

/// Whether a trial measured: ok, or disturbed by load from outside the run (this machine is
/// shared; the flag is the engine's business, not this test's).
fn measured(s: &TrialStatus) -> bool {
    matches!(s, TrialStatus::Ok | TrialStatus::Disturbed(_))
}

fn plan_of(text: &str) -> Plan {
    let sc = Scenario::parse(Source::new("served.toml", text)).expect("valid scenario");
    let host = HostView::detect().expect("host");
    Plan::resolve(&sc, &host, &PlanOptions::default()).expect("plan resolves")
}

#[test]
fn load_generators_beside_cgroup_tenants_measure_their_servers_on_loopback() {
    if let Some(why) = common::cgroup_missing(&["cpu", "memory", "pids"]) {
        common::skip("cgroup", &why);
        return;
    }
    let text = scenario("http", true);
    let mut plan = plan_of(&text);
    let tenants = ["t1", "t2", "t3"];
    plan.probes[0].serving = Some(Serving {
        services: tenants
            .iter()
            .map(|t| ServiceSpec {
                id: t.to_string(),
                tenant: t.to_string(),
                kind: "http:1K".into(),
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
        keep: Keep::Block,
    });
    plan.probes[0]
        .serving
        .as_ref()
        .unwrap()
        .check(&plan.tenants)
        .unwrap();
    let (store, run) = run_real(&plan, &text);
    let loaded = store.load_run(&run).unwrap();
    for t in tenants {
        let mine: Vec<_> = loaded.trials.iter().filter(|r| r.tenant == t).collect();
        assert!(!mine.is_empty(), "no trial of {t}");
        for r in mine {
            assert!(measured(&r.status), "{t}: {:?}", r.status);
            let good = r.samples.iter().find(|s| s.metric == "good_pct");
            assert!(good.is_some_and(|g| g.value > 0.0), "{t}: {:?}", r.samples);
        }
    }
}

#[test]
fn a_relay_ring_runs_through_forwarders_in_other_cgroup_tenants() {
    if let Some(why) = common::cgroup_missing(&["cpu", "memory", "pids"]) {
        common::skip("cgroup", &why);
        return;
    }
    let text = scenario("relay-ring", false);
    let mut plan = plan_of(&text);
    plan.probes[0].serving = Some(Serving {
        services: vec![
            ServiceSpec {
                id: "f2".into(),
                tenant: "t3".into(),
                kind: "relay-forwarder:{addr:master}".into(),
            },
            ServiceSpec {
                id: "f1".into(),
                tenant: "t2".into(),
                kind: "relay-forwarder:{addr:f2}".into(),
            },
        ],
        reserve: vec!["master".into()],
        sites: vec![ProbeSite {
            tenant: "t1".into(),
            at: Site::In,
            params: [
                ("first_hop".to_string(), "{addr:f1}".to_string()),
                ("listen".to_string(), "{addr:master}".to_string()),
                ("hops".to_string(), "3".to_string()),
            ]
            .into_iter()
            .collect(),
        }],
        keep: Keep::Run,
    });
    let (store, run) = run_real(&plan, &text);
    let loaded = store.load_run(&run).unwrap();
    let mine: Vec<_> = loaded.trials.iter().filter(|r| r.tenant == "t1").collect();
    assert!(!mine.is_empty());
    for r in mine {
        assert!(measured(&r.status), "{:?}", r.status);
        let n = r.samples.iter().find(|s| s.metric == "iterations");
        assert!(n.is_some_and(|n| n.value >= 200.0), "{:?}", r.samples);
    }
}
