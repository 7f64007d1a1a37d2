//! Tenants of three platforms on one run's bridge: a cgroup tenant, a container and a VM
//! guest, each with its own address, serve HTTP and load each other's servers through their
//! agents. The bridge is per run, whatever the platform, so traffic between a guest, a
//! container and a cgroup tenant stays on it.
//!
//! Needs root, an OCI engine (Docker at `DOCKER_HOST` or Podman), QEMU with the guest kernel
//! (`isobench vm setup`) and the static isobench (`scripts/build-static --debug`);
//! `scripts/test` prepares them. Without them the test prints why and passes, except under
//! `CI=true`, where it fails.

mod common;

use std::net::IpAddr;
use std::time::Duration;

use isobench_agent::{AgentClient, Params, ProbeOpts};
use isobench_platform::{
    oci, platform, vm, AgentLaunch, AgentProcess, Limits, NetSpec, PlatformKind, PlatformOptions,
    Role, RunGuard, Tenant, TenantSpec,
};

/// Why a platform cannot run here, if it cannot.
fn unavailable(kind: PlatformKind) -> Option<String> {
    (kind.entry().available)().err().map(|e| e.to_string())
}

struct Live {
    client: AgentClient,
    _process: AgentProcess,
    tenant: Box<dyn Tenant>,
    /// `ip:port` of its http service.
    server: String,
}

fn start(tenant: Box<dyn Tenant>) -> Live {
    let launch = AgentLaunch {
        exe: isobench_platform::staticexe::find().unwrap(),
        log: tenant.workdir().join("agent.log"),
    };
    let (reader, writer, process) = tenant
        .start_agent(&launch)
        .unwrap_or_else(|e| panic!("starting the agent of {}: {e:#}", tenant.name()))
        .split();
    let client =
        AgentClient::new(tenant.name(), reader, writer).with_timeout(Duration::from_secs(60));
    client
        .hello()
        .unwrap_or_else(|e| panic!("hello to {}: {e:#}", tenant.name()));
    let ip: IpAddr = tenant
        .address()
        .expect("a tenant with a network has an address");
    let server = client
        .start_service("web", "http:1024", &format!("{ip}:0"), None)
        .unwrap_or_else(|e| panic!("http service in {}: {e:#}", tenant.name()));
    Live {
        client,
        _process: process,
        tenant,
        server,
    }
}

/// `from` loads `to`'s server for a moment: the share of good answers.
fn load(from: &Live, to: &Live) -> f64 {
    let (ip, port) = to.server.rsplit_once(':').unwrap();
    let params: Params = serde_json::from_value(serde_json::json!({
        "addr": ip, "port": port.parse::<u16>().unwrap(), "rate": 50, "connections": 1,
        "duration": 1.0, "good_ms": 1000, "body": 1024,
    }))
    .unwrap();
    let r = from
        .client
        .run_probe(
            "http",
            params,
            &ProbeOpts {
                budget: Some(Duration::from_secs(1)),
                ..ProbeOpts::default()
            },
        )
        .unwrap_or_else(|e| {
            panic!(
                "{} loading {}'s server {}: {e:#}",
                from.tenant.name(),
                to.tenant.name(),
                to.server
            )
        });
    r.metrics
        .iter()
        .find(|m| m.name == "good_pct")
        .map(|m| m.value)
        .expect("good_pct")
}

#[test]
fn a_guest_a_container_and_a_cgroup_tenant_talk_over_the_run_bridge() {
    const TEST: &str = "a_guest_a_container_and_a_cgroup_tenant_talk_over_the_run_bridge";
    if !common::root_or_skip(TEST) {
        return;
    }
    let missing: Vec<String> = [PlatformKind::CGROUP, oci::KIND, vm::KIND]
        .into_iter()
        .filter_map(|k| unavailable(k).map(|why| format!("{k}: {why}")))
        .chain(
            isobench_platform::staticexe::find()
                .err()
                .map(|e| format!("{e:#}")),
        )
        .collect();
    if !missing.is_empty() {
        let why = missing.join("; ");
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{TEST}: required under CI=true: {why}");
        }
        common::skip("mixed platforms", TEST, &why);
        return;
    }
    let guard = RunGuard::start().unwrap();
    let opts = || PlatformOptions::new(guard.context());
    let mut platforms = [
        platform(PlatformKind::CGROUP, opts()).unwrap(),
        platform(oci::KIND, opts()).unwrap(),
        platform(vm::KIND, opts()).unwrap(),
    ];
    let limits = Limits::parse("cpus=1,memory=256M,pids=128").unwrap();
    let mut live = Vec::new();
    for (p, name) in platforms.iter_mut().zip(["cg", "ctr", "guest"]) {
        let t = p
            .create_tenant(
                &TenantSpec::new(name, Role::Victim)
                    .with_limits(limits.clone())
                    .with_network(NetSpec::default()),
            )
            .unwrap_or_else(|e| panic!("creating {name} on {}: {e:#}", p.kind()));
        live.push(start(t));
    }
    // Every tenant's address is on the same subnet (the run's bridge).
    let subnets: Vec<String> = live
        .iter()
        .map(|l| {
            let ip = l.tenant.address().unwrap().to_string();
            ip.rsplit_once('.').unwrap().0.to_string()
        })
        .collect();
    assert!(subnets.windows(2).all(|w| w[0] == w[1]), "{subnets:?}");
    // Each one reaches the next one's server, round the triangle.
    for i in 0..live.len() {
        let (from, to) = (&live[i], &live[(i + 1) % live.len()]);
        let good = load(from, to);
        assert!(
            good > 50.0,
            "{} -> {}: {good}% good answers",
            from.tenant.name(),
            to.tenant.name()
        );
    }
    for l in live {
        let _ = l.client.bye();
        l.tenant.teardown().unwrap();
    }
    for p in &mut platforms {
        p.teardown().unwrap();
    }
    let report = guard.finish();
    assert!(report.failed.is_empty(), "{report}");
}
