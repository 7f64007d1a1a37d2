//! Per-tenant networking: a network namespace joined to a per-run bridge by a veth pair, with
//! its own address and optional rate limits.
//!
//! Layout for run tag `T` (link names must fit IFNAMSIZ, 15 bytes):
//!
//! ```text
//!  host netns                               tenant netns isobench-<run>-<tenant>
//!  ibTb  bridge 10.213.X.1/24
//!   └─ ibThN  veth ─────────────────────────  ibTpN  10.213.X.(N+2)/24
//!      (ingress rate: tbf on egress here)     (egress rate: tbf here)
//! ```
//!
//! The ingress limit of a tenant shapes the host end of its veth pair: everything the tenant
//! receives leaves that end, so this is exact without an ifb device. The subnet's third octet
//! is derived from the run id and checked against the host's addresses and routes. Tenants
//! get no default route: traffic only goes to addresses this run created.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::cmd;
use crate::limits::Limits;
use crate::procs;
use crate::run::{RunId, LINK_PREFIX};

/// Options of a tenant's own network namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetSpec {
    /// MTU of the tenant's veth pair (the kernel default, 1500, when `None`).
    pub mtu: Option<u32>,
}

/// First two octets of the private range tenant subnets are taken from.
const NET_A: u8 = 10;
const NET_B: u8 = 213;

/// Deletes the network namespace `name` after killing the processes in it; returns them.
pub(crate) fn delete_netns(name: &str) -> Result<Vec<i32>> {
    if !PathBuf::from("/run/netns").join(name).exists() {
        return Ok(Vec::new());
    }
    let pids: Vec<i32> = cmd::ip(&["netns", "pids", name])
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect();
    let mut killed = Vec::new();
    for &p in &pids {
        if procs::kill9(p) {
            killed.push(p);
        }
    }
    procs::wait_gone(&killed, Duration::from_secs(5));
    cmd::ip(&["netns", "del", name])?;
    Ok(killed)
}

/// The per-run bridge, shared by every tenant with a network in the run (whatever its
/// platform). Removed when the last of them lets go of it.
#[derive(Debug)]
pub(crate) struct Bridge {
    name: String,
    octet: u8,
    ifindex: Option<String>,
    lock: Arc<Mutex<()>>,
}

impl Bridge {
    fn address(&self, host: u8) -> Ipv4Addr {
        Ipv4Addr::new(NET_A, NET_B, self.octet, host)
    }
}

fn ifindex(name: &str) -> Option<String> {
    std::fs::read_to_string(PathBuf::from("/sys/class/net").join(name).join("ifindex"))
        .ok()
        .map(|s| s.trim().to_string())
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        // A new bridge of the same name may have replaced this one meanwhile: only delete
        // the link this value created.
        if self.ifindex.is_none() || ifindex(&self.name) != self.ifindex {
            return;
        }
        if let Err(e) = cmd::ip(&["link", "del", &self.name]) {
            if PathBuf::from("/sys/class/net").join(&self.name).exists() {
                tracing::warn!("removing bridge {}: {e:#}", self.name);
            }
        }
    }
}

/// An advisory lock shared by every isobench process of the host, held until dropped.
struct HostLock {
    _file: Option<crate::lockfile::LockFile>,
}

impl HostLock {
    fn acquire(name: &str) -> HostLock {
        let root = crate::run::state_root();
        let _ = std::fs::create_dir_all(&root);
        // Without a state directory there is no lock; choosing still checks addresses.
        HostLock {
            _file: crate::lockfile::LockFile::lock_blocking(&root.join(name)).ok(),
        }
    }
}

/// Network state of one run, shared by its platforms.
#[derive(Debug)]
pub(crate) struct RunNet {
    run: RunId,
    lock: Arc<Mutex<()>>,
    bridge: Mutex<Weak<Bridge>>,
    next: AtomicU32,
}

/// The network state of every run of this process.
static RUN_NETS: Mutex<BTreeMap<String, Weak<RunNet>>> = Mutex::new(BTreeMap::new());

/// Checks that network namespaces can be made here (root and `ip`).
pub(crate) fn check_available() -> Result<(), String> {
    if procs::euid() != 0 {
        return Err(format!(
            "network namespaces need root (running as uid {})",
            procs::euid()
        ));
    }
    match cmd::run_with_timeout("ip", &["-V"], cmd::CMD_TIMEOUT) {
        Ok(o) if o.success => Ok(()),
        Ok(o) => Err(format!("`ip -V` failed: {}", o.stderr.trim())),
        Err(e) => Err(format!("the `ip` command (iproute2) is not usable: {e:#}")),
    }
}

fn subnet_in_use(octet: u8) -> bool {
    let needle = format!("{NET_A}.{NET_B}.{octet}.");
    let addrs = cmd::ip(&["-o", "-4", "addr", "show"]).unwrap_or_default();
    let routes = cmd::ip(&["-4", "route", "show", "table", "all"]).unwrap_or_default();
    addrs.contains(&needle) || routes.contains(&needle)
}

impl RunNet {
    /// The network state of `run`, shared with the other platforms of the run.
    pub(crate) fn for_run(run: &RunId) -> Arc<RunNet> {
        let mut map = RUN_NETS.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, w| w.strong_count() > 0);
        if let Some(n) = map.get(run.as_str()).and_then(Weak::upgrade) {
            return n;
        }
        let n = Arc::new(RunNet {
            run: run.clone(),
            lock: Arc::new(Mutex::new(())),
            bridge: Mutex::new(Weak::new()),
            next: AtomicU32::new(0),
        });
        map.insert(run.to_string(), Arc::downgrade(&n));
        n
    }

    fn bridge(&self) -> Result<Arc<Bridge>> {
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let mut slot = self.bridge.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = slot.upgrade() {
            return Ok(b);
        }
        let name = format!("{LINK_PREFIX}{}b", self.run.tag());
        // Concurrent runs choose their subnets one at a time.
        let _host_lock = HostLock::acquire("net.lock");
        // Third octet from the run id, skipping subnets the host already uses.
        let seed = u32::from_str_radix(self.run.as_str(), 16).unwrap_or(0);
        let octet = (0..254u32)
            .map(|i| ((seed + i) % 254 + 1) as u8)
            .find(|&o| !subnet_in_use(o))
            .context("every 10.213.x.0/24 subnet is in use on this host")?;
        let alias = self.run.prefix();
        cmd::ip(&["link", "add", "name", &name, "type", "bridge"])
            .with_context(|| format!("creating bridge {name}"))?;
        // From here on, dropping `bridge` removes the link.
        let bridge = Bridge {
            name: name.clone(),
            octet,
            ifindex: ifindex(&name),
            lock: self.lock.clone(),
        };
        let addr = format!("{}/24", bridge.address(1));
        let setup = (|| -> Result<()> {
            cmd::ip(&["link", "set", "dev", &name, "alias", &alias])?;
            cmd::ip(&["addr", "add", &addr, "dev", &name])?;
            cmd::ip(&["link", "set", "dev", &name, "up"])?;
            Ok(())
        })();
        if let Err(e) = setup {
            drop(_g);
            drop(bridge);
            return Err(e);
        }
        let b = Arc::new(bridge);
        *slot = Arc::downgrade(&b);
        Ok(b)
    }

    /// Creates the namespace, veth pair, address and shapers of a tenant. On error nothing
    /// is left behind (but the shared bridge, which goes with the platform).
    pub(crate) fn create_tenant(
        &self,
        netns: &str,
        spec: &NetSpec,
        limits: &Limits,
    ) -> Result<TenantNet> {
        self.create_tenant_in(netns, None, spec, limits)
    }

    /// Like [`RunNet::create_tenant`], but the namespace is that of process `pid` (a
    /// container's, made by its engine): it is named `netns` (`ip netns attach`) and gets
    /// the tenant's veth end. Teardown removes the name and the link; the namespace itself
    /// goes with its last process.
    pub(crate) fn attach_tenant(
        &self,
        netns: &str,
        pid: i32,
        spec: &NetSpec,
        limits: &Limits,
    ) -> Result<TenantNet> {
        self.create_tenant_in(netns, Some(pid), spec, limits)
    }

    fn create_tenant_in(
        &self,
        netns: &str,
        pid: Option<i32>,
        spec: &NetSpec,
        limits: &Limits,
    ) -> Result<TenantNet> {
        let bridge = self.bridge()?;
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        if n > 252 {
            bail!("a run can have at most 253 tenants with their own network");
        }
        let host_if = format!("{LINK_PREFIX}{}h{n}", self.run.tag());
        let peer_if = format!("{LINK_PREFIX}{}p{n}", self.run.tag());
        let addr = bridge.address(n as u8 + 2);
        let mut t = TenantNet {
            netns: netns.to_string(),
            host_if,
            peer_if,
            addr,
            bridge: Some(bridge),
            made_ns: false,
            made_link: false,
        };
        if let Err(e) = t.build(&self.run, pid, spec, limits) {
            let _ = t.teardown();
            return Err(e.context(format!("setting up the network of {netns}")));
        }
        Ok(t)
    }
}

/// One tenant's namespace and links.
#[derive(Debug)]
pub(crate) struct TenantNet {
    netns: String,
    host_if: String,
    peer_if: String,
    addr: Ipv4Addr,
    bridge: Option<Arc<Bridge>>,
    made_ns: bool,
    made_link: bool,
}

/// tbf burst for a rate: 10 ms worth of bytes, at least 8 KiB.
fn tbf_burst(rate_bits: u64) -> u64 {
    (rate_bits / 8 / 100).max(8 * 1024)
}

fn tbf_args(dev: &str, rate_bits: u64) -> Vec<String> {
    [
        "qdisc".to_string(),
        "add".into(),
        "dev".into(),
        dev.into(),
        "root".into(),
        "tbf".into(),
        "rate".into(),
        format!("{rate_bits}bit"),
        "burst".into(),
        tbf_burst(rate_bits).to_string(),
        "latency".into(),
        "50ms".into(),
    ]
    .into()
}

impl TenantNet {
    fn build(
        &mut self,
        run: &RunId,
        pid: Option<i32>,
        spec: &NetSpec,
        limits: &Limits,
    ) -> Result<()> {
        let ns = self.netns.clone();
        let (h, p) = (self.host_if.clone(), self.peer_if.clone());
        let bridge = self
            .bridge
            .as_ref()
            .map(|b| b.name.clone())
            .unwrap_or_default();
        let alias = run.prefix();
        match pid {
            None => cmd::ip(&["netns", "add", &ns])?,
            Some(pid) => cmd::ip(&["netns", "attach", &ns, &pid.to_string()])?,
        };
        self.made_ns = true;
        cmd::ip(&[
            "link", "add", "name", &h, "type", "veth", "peer", "name", &p,
        ])?;
        self.made_link = true;
        cmd::ip(&["link", "set", "dev", &h, "alias", &alias])?;
        cmd::ip(&["link", "set", "dev", &p, "alias", &alias])?;
        if let Some(mtu) = spec.mtu {
            let mtu = mtu.to_string();
            cmd::ip(&["link", "set", "dev", &h, "mtu", &mtu])?;
            cmd::ip(&["link", "set", "dev", &p, "mtu", &mtu])?;
        }
        cmd::ip(&["link", "set", "dev", &p, "netns", &ns])?;
        cmd::ip(&["link", "set", "dev", &h, "master", &bridge])?;
        cmd::ip(&["link", "set", "dev", &h, "up"])?;
        let addr = format!("{}/24", self.addr);
        cmd::ip(&["-n", &ns, "addr", "add", &addr, "dev", &p])?;
        cmd::ip(&["-n", &ns, "link", "set", "dev", &p, "up"])?;
        cmd::ip(&["-n", &ns, "link", "set", "dev", "lo", "up"])?;
        if let Some(rate) = limits.net_egress {
            let mut args = vec!["-n".to_string(), ns.clone()];
            args.extend(tbf_args(&p, rate));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            cmd::tc(&args).context("setting the egress rate")?;
        }
        if let Some(rate) = limits.net_ingress {
            let args = tbf_args(&h, rate);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            cmd::tc(&args).context("setting the ingress rate")?;
        }
        Ok(())
    }

    /// The tenant's address on the bridge.
    pub(crate) fn address(&self) -> Ipv4Addr {
        self.addr
    }

    /// The host end of the veth pair.
    pub(crate) fn host_link(&self) -> &str {
        &self.host_if
    }

    /// The tenant's end of the veth pair.
    pub(crate) fn netns_link(&self) -> &str {
        &self.peer_if
    }

    /// The namespace name.
    pub(crate) fn netns(&self) -> &str {
        &self.netns
    }

    /// The namespace file to `setns` into.
    pub(crate) fn netns_path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.netns)
    }

    /// Kills what runs in the namespace, removes the veth pair and the namespace.
    /// Idempotent.
    pub(crate) fn teardown(&mut self) -> Result<()> {
        let mut err = None;
        // The pair first: deleting it is synchronous, while a deleted namespace takes its
        // links down later, in the background.
        if self.made_link {
            let gone = |n: &str| !PathBuf::from("/sys/class/net").join(n).exists();
            if !gone(&self.host_if) {
                if let Err(e) = cmd::ip(&["link", "del", &self.host_if]) {
                    if !gone(&self.host_if) {
                        err.get_or_insert(e);
                    }
                }
            }
            self.made_link = false;
        }
        if self.made_ns {
            match delete_netns(&self.netns) {
                Ok(_) => self.made_ns = false,
                Err(e) => {
                    err.get_or_insert(e);
                }
            }
        }
        self.bridge.take();
        match err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// A VM guest's TAP device on the run's bridge: `ib<tag>t<n>` (found by `isobench cleanup`
/// like every link of a run), with the address the guest takes from its kernel command line.
/// The tenant's ingress rate shapes the TAP (what the host sends the guest leaves through
/// it); its egress rate shapes an ifb device `ib<tag>i<n>` the TAP's incoming traffic (what
/// the guest sends) is redirected through.
#[derive(Debug)]
pub(crate) struct TenantTap {
    name: String,
    ifb: String,
    addr: Ipv4Addr,
    bridge: Option<Arc<Bridge>>,
    made: bool,
    made_ifb: bool,
}

impl RunNet {
    /// Creates a TAP device for a guest, attached to the run's bridge, with the next
    /// address of the run's subnet. On error nothing is left behind (but the bridge).
    pub(crate) fn create_tap(&self, limits: &Limits) -> Result<TenantTap> {
        let bridge = self.bridge()?;
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        if n > 252 {
            bail!("a run can have at most 253 tenants with their own network");
        }
        let mut t = TenantTap {
            name: format!("{LINK_PREFIX}{}t{n}", self.run.tag()),
            ifb: format!("{LINK_PREFIX}{}i{n}", self.run.tag()),
            addr: bridge.address(n as u8 + 2),
            bridge: Some(bridge),
            made: false,
            made_ifb: false,
        };
        if let Err(e) = t.build(&self.run, limits) {
            let _ = t.teardown();
            return Err(e.context(format!("setting up the TAP device {}", t.name)));
        }
        Ok(t)
    }
}

impl TenantTap {
    fn build(&mut self, run: &RunId, limits: &Limits) -> Result<()> {
        let name = self.name.clone();
        let bridge = self
            .bridge
            .as_ref()
            .map(|b| b.name.clone())
            .unwrap_or_default();
        cmd::ip(&["tuntap", "add", "dev", &name, "mode", "tap"])?;
        self.made = true;
        cmd::ip(&["link", "set", "dev", &name, "alias", &run.prefix()])?;
        cmd::ip(&["link", "set", "dev", &name, "master", &bridge])?;
        cmd::ip(&["link", "set", "dev", &name, "up"])?;
        if let Some(rate) = limits.net_ingress {
            let args = tbf_args(&name, rate);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            cmd::tc(&args).context("setting the ingress rate")?;
        }
        if let Some(rate) = limits.net_egress {
            let ifb = self.ifb.clone();
            cmd::ip(&["link", "add", "name", &ifb, "type", "ifb"])
                .context("creating an ifb device for the egress rate")?;
            self.made_ifb = true;
            cmd::ip(&["link", "set", "dev", &ifb, "alias", &run.prefix()])?;
            cmd::ip(&["link", "set", "dev", &ifb, "up"])?;
            let args = tbf_args(&ifb, rate);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            cmd::tc(&args).context("setting the egress rate")?;
            cmd::tc(&["qdisc", "add", "dev", &name, "handle", "ffff:", "ingress"])?;
            cmd::tc(&[
                "filter", "add", "dev", &name, "parent", "ffff:", "protocol", "all", "u32",
                "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", &ifb,
            ])
            .context("redirecting the guest's traffic through the egress shaper")?;
        }
        Ok(())
    }

    /// The TAP device's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The guest's address on the bridge.
    pub(crate) fn address(&self) -> Ipv4Addr {
        self.addr
    }

    /// Removes the devices. Idempotent.
    pub(crate) fn teardown(&mut self) -> Result<()> {
        let mut result = Ok(());
        let del = |name: &str| -> Result<()> {
            let gone = || !PathBuf::from("/sys/class/net").join(name).exists();
            if !gone() {
                if let Err(e) = cmd::ip(&["link", "del", name]) {
                    if !gone() {
                        return Err(e);
                    }
                }
            }
            Ok(())
        };
        if self.made {
            if let Err(e) = del(&self.name) {
                result = Err(e);
            }
            self.made = false;
        }
        if self.made_ifb {
            if let Err(e) = del(&self.ifb) {
                result = result.and(Err(e));
            }
            self.made_ifb = false;
        }
        self.bridge.take();
        result
    }
}

impl Drop for TenantTap {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tbf_parameters() {
        assert_eq!(tbf_burst(100_000_000), 125_000);
        assert_eq!(tbf_burst(64_000), 8192);
        let a = tbf_args("ib123456p0", 10_000_000);
        assert_eq!(
            a.join(" "),
            "qdisc add dev ib123456p0 root tbf rate 10000000bit burst 12500 latency 50ms"
        );
    }

    #[test]
    fn link_names_fit_ifnamsiz() {
        let run = RunId::parse("0123abcd").unwrap();
        let longest = format!("{LINK_PREFIX}{}h252", run.tag());
        assert!(longest.len() <= 15, "{longest}");
        let tap = format!("{LINK_PREFIX}{}t252", run.tag());
        assert!(tap.len() <= 15, "{tap}");
    }
}
