//! One tenant of the `oci` platform: a container that lives as long as the tenant (the
//! tenant itself is [`ContainerTenant`], shared with `k8s`).
//!
//! The container's own process is the engine's init (`--init`: it reaps the orphans a fork
//! bomb leaves) with a sleeping child; the agent and every other process are started with
//! `exec`, so they land in the container's cgroups and namespaces. The container exists from
//! `create_tenant` on: its cgroups (read back, frozen, throttled by isobench directly) and
//! its network are known before the first process starts, and a restarted agent finds the
//! same tenant.

use std::ffi::OsString;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Mutex;

use anyhow::{bail, Context, Result};

use super::engine::Engine;
use crate::container::{Container, ContainerTenant, Runtime};
use crate::limits::Limits;
use crate::live::{Knob, KnobSet, LimitChanges};
use crate::net::TenantNet;
use crate::procs;
use crate::usage::Usage;

/// Label carrying the run id on every container.
pub const RUN_LABEL: &str = "isobench.run";
/// Label carrying the tenant name on every container.
pub const TENANT_LABEL: &str = "isobench.tenant";

/// The knobs `docker update` and `podman update` both have a flag for: `--cpus`,
/// `--cpu-shares`, `--cpuset-cpus`, `--memory` with `--memory-swap`, `--memory-reservation` (memory_low),
/// `--pids-limit` and `--blkio-weight`. (Only podman's has `--device-*-bps`.)
pub(crate) const UPDATE_KNOBS: KnobSet = KnobSet::of(&[
    Knob::Cpus,
    Knob::CpuWeight,
    Knob::Cpuset,
    Knob::Memory,
    Knob::MemoryLow,
    Knob::Swap,
    Knob::Pids,
    Knob::IoWeight,
]);

/// The flags of the engine's `update` for the knobs `changes` sets, on a container whose
/// limits are `now` (`--memory-swap` is memory plus swap, so it follows either).
pub(crate) fn update_args(changes: &LimitChanges, now: &Limits) -> Result<Vec<String>> {
    let target = changes.applied_to(now);
    let set = KnobSet::set_in(&changes.set);
    let mut a = Vec::new();
    let mut flag = |k: &str, v: String| {
        a.push(k.to_string());
        a.push(v);
    };
    if let Some(c) = changes.set.cpus {
        flag("--cpus", format!("{c}"));
    }
    if let Some(w) = changes.set.cpu_weight {
        flag("--cpu-shares", w.as_shares().to_string());
    }
    if let Some(s) = &changes.set.cpuset {
        flag("--cpuset-cpus", s.to_string());
    }
    if set.contains(Knob::Memory) || set.contains(Knob::Swap) {
        let Some(m) = target.memory else {
            bail!(
                "`swap` on the `oci` platform is --memory-swap, memory plus swap, so it needs a \
                 memory limit; set `memory` too"
            );
        };
        flag("--memory", m.to_string());
        flag("--memory-swap", (m + target.swap.unwrap_or(0)).to_string());
    }
    if let Some(r) = changes.set.memory_low {
        flag("--memory-reservation", r.to_string());
    }
    if let Some(p) = changes.set.pids {
        flag("--pids-limit", p.to_string());
    }
    if let Some(w) = changes.set.io_weight {
        if !(10..=1000).contains(&w) {
            bail!("io_weight={w} becomes --blkio-weight, which takes 10..1000; use a weight in that range");
        }
        flag("--blkio-weight", w.to_string());
    }
    Ok(a)
}

/// The `oci` side of a container tenant: the engine and the container it runs.
pub(crate) struct Oci {
    pub(crate) engine: Engine,
    /// The container's name (`isobench-<run>-<tenant>`).
    pub(crate) container: String,
    pub(crate) net: Mutex<Option<TenantNet>>,
}

/// A tenant of the `oci` platform; the container's own processes (its `keep`) are the
/// engine's init and its sleeping child.
pub(crate) type OciTenant = ContainerTenant<Oci>;

impl Runtime for Oci {
    fn describe(&self) -> String {
        format!("container {}", self.container)
    }

    fn cli(&self) -> &Path {
        self.engine.cli()
    }

    /// The `exec` arguments (after the engine's global ones): `-w dir`, the tenant's tags
    /// and `env` with `-e`, then the container.
    fn exec_args(
        &self,
        c: &Container,
        program: OsString,
        args: Vec<OsString>,
        dir: &Path,
        env: Vec<(OsString, OsString)>,
    ) -> Result<Vec<OsString>> {
        let mut v: Vec<OsString> = self
            .engine
            .global_args()
            .into_iter()
            .map(OsString::from)
            .collect();
        v.extend(["exec", "-i", "-w"].map(OsString::from));
        v.push(dir.as_os_str().to_owned());
        let tags = [
            (procs::ENV_RUN, OsString::from(c.run.id().as_str())),
            (procs::ENV_TENANT, OsString::from(&c.info.object_name)),
            (procs::ENV_WORKDIR, c.info.workdir.as_os_str().to_owned()),
        ];
        for (k, val) in tags
            .into_iter()
            .map(|(k, v)| (OsString::from(k), v))
            .chain(env)
        {
            let mut kv = k;
            kv.push("=");
            kv.push(val);
            v.push("-e".into());
            v.push(kv);
        }
        v.push(OsString::from(&self.container));
        v.push(program);
        v.extend(args);
        Ok(v)
    }

    fn remove(&self) -> Result<()> {
        self.engine.remove_container(&self.container)
    }

    fn release(&self) -> Result<()> {
        match self.net.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some(mut net) => net.teardown(),
            None => Ok(()),
        }
    }

    fn usage(&self, c: &Container) -> Result<Usage> {
        Ok(c.cgroup.usage())
    }

    fn effective_limits(&self, c: &Container) -> Result<Limits> {
        let mut l = c
            .cgroup
            .read_limits(c.info.io_device.as_ref().map(|d| d.dev))
            .with_context(|| format!("reading the limits of container {}", self.container))?;
        l.net_egress = c.info.limits.net_egress;
        l.net_ingress = c.info.limits.net_ingress;
        Ok(l)
    }

    fn update_limits(&self, c: &Container, changes: &LimitChanges) -> Result<Limits> {
        let name = &c.info.name;
        super::CAPS
            .live_knobs
            .refuse("oci", changes)
            .with_context(|| format!("changing the limits of tenant {name}"))?;
        crate::tenant::check_cpus_in_cpuset(&c.info, changes)?;
        let now = self.effective_limits(c)?;
        let args = update_args(changes, &now)?;
        if !args.is_empty() {
            let mut argv: Vec<&str> = vec!["update"];
            argv.extend(args.iter().map(String::as_str));
            argv.push(&self.container);
            self.engine
                .change(&argv)
                .with_context(|| format!("changing the limits of tenant {name}"))?;
        }
        // The engine's update has no "unlimited" for most knobs: a lift goes to the
        // container's own cgroups, as freezing does.
        let lifts = LimitChanges {
            set: Limits::default(),
            lift: changes.lift,
        };
        if !lifts.is_empty() {
            c.cgroup
                .update_limits(&lifts, c.info.io_device.as_ref().map(|d| d.dev))
                .with_context(|| format!("lifting limits of tenant {name}"))?;
        }
        self.effective_limits(c)
    }

    fn address(&self, c: &Container) -> Option<IpAddr> {
        c.info.address.map(IpAddr::V4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(s: &str) -> Limits {
        s.parse().unwrap()
    }

    #[test]
    fn a_change_becomes_the_engines_update_flags() {
        let now = l("cpus=1,memory=1G,swap=64M,pids=64");
        let c = LimitChanges {
            set: l(
                "cpus=0.5,shares=512,cpuset=0-1,memory=512M,memory_low=256M,pids=32,\
                    io_weight=200",
            ),
            lift: KnobSet::NONE,
        };
        assert_eq!(
            update_args(&c, &now).unwrap().join(" "),
            "--cpus 0.5 --cpu-shares 512 --cpuset-cpus 0-1 --memory 536870912 --memory-swap 603979776 \
             --memory-reservation 268435456 --pids-limit 32 --blkio-weight 200"
        );
        // Swap alone follows the memory in force; a lift is no flag.
        let c = LimitChanges {
            set: l("swap=128M"),
            lift: KnobSet::of(&[Knob::Cpus]),
        };
        assert_eq!(
            update_args(&c, &now).unwrap().join(" "),
            "--memory 1073741824 --memory-swap 1207959552"
        );
        let e = update_args(&c, &l("cpus=1")).unwrap_err().to_string();
        assert!(e.contains("needs a memory limit"), "{e}");
    }

    #[test]
    fn the_knobs_without_an_update_flag_are_refused_with_the_reason() {
        for (set, key) in [
            ("memory_high=1G", "memory_high"),
            ("memory_min=1G", "memory_min"),
            ("io_read_bps=1M", "io_read_bps"),
            ("cpus=1,cpu_burst=1ms", "cpu_burst"),
        ] {
            let c = LimitChanges {
                set: l(set),
                lift: KnobSet::NONE,
            };
            let e = super::super::CAPS
                .live_knobs
                .refuse("oci", &c)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("cannot change `{key}` while a tenant lives"))
                    && e.contains("`docker update` has flags only for"),
                "{e}"
            );
        }
    }
}
