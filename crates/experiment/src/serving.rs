//! Services in tenants for a probe's trials, and where the probe runs against them.
//!
//! Some experiments measure a tenant from the outside: paper 001 runs a web server in every
//! tenant and one load generator per tenant on other machines; paper 004 relays a message
//! through forwarders placed in several tenants. A probe of the plan can carry a [`Serving`]:
//! the services to start in tenants (in order, each one's kind may name the address of an
//! earlier one), loopback ports to reserve for endpoints the probe binds itself, and the
//! [`ProbeSite`]s where the probe runs, inside a tenant or beside it (on the host, in no
//! tenant, in the tenant's network), with parameters filled from those addresses. Every
//! service binds to loopback (`127.0.0.1`) of its tenant's network and nothing else: a probe
//! beside a tenant with its own network namespace runs inside that namespace, and a chain of
//! services across tenants needs tenants that share the host's network ([`Serving::check`]).
//!
//! The executor ([`crate::orchestrator`]) starts the services before a trial that needs them
//! and stops them after the trial, at the end of the block, or at the end of the run
//! ([`Keep`]); each site's result is stored against its tenant.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// The only address services bind to.
pub const LOOPBACK: &str = "127.0.0.1";

/// Services a probe's trials need, and where the probe runs against them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Serving {
    /// Services to start, in order.
    pub services: Vec<ServiceSpec>,
    /// Loopback ports reserved before the services start, by name: endpoints that a probe
    /// binds itself (a relay ring's master) but a service must know in advance.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reserve: Vec<String>,
    /// Where the probe runs, one result per site.
    pub sites: Vec<ProbeSite>,
    /// How long the services live.
    #[serde(default)]
    pub keep: Keep,
}

/// One service in one tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceSpec {
    /// Name, unique within the [`Serving`] (`web1`, `fwd2`).
    pub id: String,
    /// Tenant it runs in.
    pub tenant: String,
    /// Kind as the agent takes it (`http:4K`, `relay-forwarder:{addr:fwd3}`); placeholders
    /// as in [`fill`].
    pub kind: String,
}

/// Where a probe runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Site {
    /// Inside the tenant, as a victim's probe.
    In,
    /// On the host beside the tenant: in no tenant's cgroups, in the tenant's network.
    Beside,
}

/// One run of the probe in a trial.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeSite {
    /// The tenant the result is stored against (the one measured).
    pub tenant: String,
    /// Inside it or beside it.
    pub at: Site,
    /// Parameters to set, each a template with placeholders ([`fill`]).
    #[serde(default)]
    pub params: BTreeMap<String, String>,
}

/// How long services live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Keep {
    /// Started before each trial, stopped after it.
    Trial,
    /// Started before the first trial of a block that needs them, stopped when the block
    /// ends (a stressor's damage does not outlive its block).
    #[default]
    Block,
    /// Started once, stopped when the run ends (restarted when their tenant is).
    Run,
}

/// Replaces the placeholders of `template` with addresses from `endpoints` (name ->
/// `ip:port`): `{addr:NAME}` the whole address, `{ip:NAME}` its IP, `{port:NAME}` its port.
/// Errors name the first placeholder it cannot fill.
pub fn fill(template: &str, endpoints: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after
            .find('}')
            .ok_or_else(|| format!("`{template}`: a `{{` is not closed"))?;
        let inner = &after[..close];
        let (what, name) = inner
            .split_once(':')
            .ok_or_else(|| format!("`{template}`: `{{{inner}}}` is not {{addr|ip|port:NAME}}"))?;
        let addr = endpoints
            .get(name)
            .ok_or_else(|| format!("`{template}`: no address for `{name}` (not started?)"))?;
        let (ip, port) = addr
            .rsplit_once(':')
            .ok_or_else(|| format!("`{template}`: `{addr}` is not ip:port"))?;
        out.push_str(match what {
            "addr" => addr,
            "ip" => ip,
            "port" => port,
            _ => return Err(format!("`{template}`: `{what}` is not addr, ip or port")),
        });
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The endpoint names a template refers to.
pub fn references(template: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        if let Some((_, name)) = after[..close].split_once(':') {
            out.insert(name.to_string());
        }
        rest = &after[close + 1..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::PlannedTenant;

    fn eps() -> BTreeMap<String, String> {
        [("web1".to_string(), "127.0.0.1:40001".to_string())]
            .into_iter()
            .collect()
    }

    #[test]
    fn placeholders_fill_from_addresses() {
        assert_eq!(fill("{ip:web1}", &eps()).unwrap(), "127.0.0.1");
        assert_eq!(fill("{port:web1}", &eps()).unwrap(), "40001");
        assert_eq!(
            fill("relay-forwarder:{addr:web1}", &eps()).unwrap(),
            "relay-forwarder:127.0.0.1:40001"
        );
        assert_eq!(fill("plain", &eps()).unwrap(), "plain");
        let e = fill("{addr:web2}", &eps()).unwrap_err();
        assert!(e.contains("no address for `web2`"), "{e}");
        assert!(fill("{host:web1}", &eps()).is_err());
        assert!(fill("{addr:web1", &eps()).is_err());
    }

    fn tenant(name: &str, netns: bool) -> PlannedTenant {
        PlannedTenant {
            name: name.into(),
            role: crate::scenario::Role::Victim,
            limits: isobench_platform::Limits::none(),
            netns,
            cpus: vec![0],
            memory: 1 << 30,
            mem_need: 0,
            pin: None,
            pin_peer: None,
            image: None,
        }
    }

    fn ring() -> Serving {
        Serving {
            services: vec![
                ServiceSpec {
                    id: "f2".into(),
                    tenant: "c".into(),
                    kind: "relay-forwarder:{addr:master}".into(),
                },
                ServiceSpec {
                    id: "f1".into(),
                    tenant: "b".into(),
                    kind: "relay-forwarder:{addr:f2}".into(),
                },
            ],
            reserve: vec!["master".into()],
            sites: vec![ProbeSite {
                tenant: "a".into(),
                at: Site::In,
                params: [
                    ("first_hop".to_string(), "{addr:f1}".to_string()),
                    ("listen".to_string(), "{addr:master}".to_string()),
                ]
                .into_iter()
                .collect(),
            }],
            keep: Keep::Block,
        }
    }

    #[test]
    fn a_chain_across_tenants_needs_the_host_network() {
        let shared = [tenant("a", false), tenant("b", false), tenant("c", false)];
        assert_eq!(ring().check(&shared), Ok(()));
        let own = [tenant("a", false), tenant("b", true), tenant("c", false)];
        let e = ring().check(&own).unwrap_err();
        assert!(e.contains("used from tenant b"), "{e}");
        assert!(e.contains("namespace = true"), "{e}");
    }

    #[test]
    fn a_site_beside_its_own_server_may_have_a_namespace() {
        let s = Serving {
            services: vec![ServiceSpec {
                id: "web".into(),
                tenant: "a".into(),
                kind: "http:4K".into(),
            }],
            reserve: Vec::new(),
            sites: vec![ProbeSite {
                tenant: "a".into(),
                at: Site::Beside,
                params: [("port".to_string(), "{port:web}".to_string())]
                    .into_iter()
                    .collect(),
            }],
            keep: Keep::Trial,
        };
        assert_eq!(s.check(&[tenant("a", true)]), Ok(()));
        let mut wrong = s.clone();
        wrong.sites[0]
            .params
            .insert("addr".into(), "{ip:nothing}".into());
        assert!(wrong
            .check(&[tenant("a", true)])
            .unwrap_err()
            .contains("`nothing`"));
    }
}
