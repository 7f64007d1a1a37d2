//! Tenants in their own network namespaces reach each other over the run's bridge, and
//! their rate limits shape the traffic.

mod common;

use std::net::IpAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use isobench_platform::{
    platform, NetSpec, PlatformKind, PlatformOptions, Role, RunGuard, TenantSpec,
};

#[test]
fn helper() {
    run_helper_if_requested();
}

/// `tc -s qdisc show` of a device, in a namespace or on the host.
fn qdisc(netns: Option<&str>, dev: &str) -> String {
    let mut c = Command::new("tc");
    if let Some(ns) = netns {
        c.args(["-n", ns]);
    }
    let out = c
        .args(["-s", "qdisc", "show", "dev", dev])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `overlimits` counter of the tbf qdisc in a `tc -s qdisc show` output.
fn overlimits(text: &str) -> u64 {
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .windows(2)
        .find(|w| w[0] == "overlimits")
        .and_then(|w| {
            w[1].trim_end_matches(',')
                .trim_end_matches(')')
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

fn send(from: &dyn isobench_platform::Tenant, to: IpAddr, bytes: usize) {
    let mut cmd = helper_cmd("tcp-client");
    cmd.env("ISOBENCH_TEST_ADDR", format!("{to}:5001"))
        .env("ISOBENCH_TEST_BYTES", bytes.to_string())
        .stderr(Stdio::inherit());
    let mut c = from.spawn(cmd).unwrap();
    let status = wait_timeout(&mut c, Duration::from_secs(120)).expect("client finishes");
    assert!(
        status.success(),
        "transfer from {} to {to} failed",
        from.name()
    );
}

#[test]
fn tenants_reach_each_other_over_the_bridge_and_rates_are_applied() {
    if !net_or_skip("bridge") {
        return;
    }
    let guard = RunGuard::start().unwrap();
    let mut p = platform(PlatformKind::CGROUP, PlatformOptions::new(guard.context())).unwrap();
    let net = NetSpec::default();
    let shaped = p
        .create_tenant(
            &TenantSpec::new("shaped", Role::Aggressor)
                .with_limits("net_egress=8mbit".parse().unwrap())
                .with_network(net.clone()),
        )
        .unwrap();
    let server = p
        .create_tenant(
            &TenantSpec::new("server", Role::Victim)
                .with_limits("net_ingress=8mbit".parse().unwrap())
                .with_network(net.clone()),
        )
        .unwrap();
    let free = p
        .create_tenant(&TenantSpec::new("free", Role::Victim).with_network(net))
        .unwrap();
    let no_net = p
        .create_tenant(&TenantSpec::new("hostnet", Role::Victim))
        .unwrap();
    assert_eq!(no_net.address(), None);

    let (a, s, f) = (
        shaped.address().unwrap(),
        server.address().unwrap(),
        free.address().unwrap(),
    );
    for addr in [a, s, f] {
        assert!(addr.to_string().starts_with("10.213."), "{addr}");
    }
    assert!(a != s && s != f && a != f);

    // No default route: a tenant only reaches addresses of its run.
    let ns = shaped.info().netns.clone().unwrap();
    let routes = Command::new("ip")
        .args(["-n", &ns, "route"])
        .output()
        .unwrap();
    let routes = String::from_utf8_lossy(&routes.stdout);
    assert!(!routes.contains("default"), "{routes}");

    let mut srv = helper_cmd("tcp-server");
    srv.env("ISOBENCH_TEST_ADDR", format!("{s}:5001"))
        .env("ISOBENCH_TEST_CONNS", "2")
        .stderr(Stdio::inherit());
    let mut srv = server.spawn(srv).unwrap();

    // shaped -> server: the shaper on shaped's side of its veth pair holds the traffic back.
    send(shaped.as_ref(), s, 1 << 20);
    let egress = qdisc(Some(&ns), shaped.info().netns_link.as_deref().unwrap());
    assert!(
        egress.contains("tbf") && egress.contains("rate 8Mbit"),
        "{egress}"
    );
    assert!(
        overlimits(&egress) > 0,
        "the egress shaper never held a packet back:\n{egress}"
    );

    // free -> server: the server's ingress shaper (host end of its pair) does.
    let ingress_dev = server.info().host_link.clone().unwrap();
    let before = overlimits(&qdisc(None, &ingress_dev));
    send(free.as_ref(), s, 1 << 20);
    let ingress = qdisc(None, &ingress_dev);
    assert!(
        ingress.contains("tbf") && ingress.contains("rate 8Mbit"),
        "{ingress}"
    );
    assert!(
        overlimits(&ingress) > before,
        "the ingress shaper never held a packet back:\n{ingress}"
    );

    let status = wait_timeout(&mut srv, Duration::from_secs(30)).expect("server ends");
    assert!(status.success());

    // Teardown removes namespaces and links, the bridge with the last tenant.
    let id = guard.id().clone();
    drop(shaped);
    drop(server);
    drop(free);
    drop(no_net);
    drop(p);
    let left = leftovers(&id);
    assert!(
        left.iter().all(|l| l.starts_with("state ")),
        "left behind: {left:#?}"
    );
}

#[test]
fn host_tenants_can_have_a_network_too() {
    if !net_or_skip("host net") {
        return;
    }
    let guard = RunGuard::start().unwrap();
    let mut p = platform(PlatformKind::HOST, PlatformOptions::new(guard.context())).unwrap();
    let a = p
        .create_tenant(&TenantSpec::new("a", Role::Victim).with_network(NetSpec::default()))
        .unwrap();
    let b = p
        .create_tenant(
            &TenantSpec::new("b", Role::Victim).with_network(NetSpec { mtu: Some(1400) }),
        )
        .unwrap();
    let mut srv = helper_cmd("tcp-server");
    srv.env(
        "ISOBENCH_TEST_ADDR",
        format!("{}:5001", b.address().unwrap()),
    );
    let mut srv = b.spawn(srv).unwrap();
    send(a.as_ref(), b.address().unwrap(), 64 << 10);
    assert!(wait_timeout(&mut srv, Duration::from_secs(30))
        .unwrap()
        .success());
    let out = Command::new("ip")
        .args([
            "-n",
            b.info().netns.as_deref().unwrap(),
            "link",
            "show",
            b.info().netns_link.as_deref().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("mtu 1400"));
}
