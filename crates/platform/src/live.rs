//! Changing a tenant's isolation knobs while it lives: which knobs ([`Knob`], [`KnobSet`]),
//! the change asked for ([`LimitChanges`]: set some knobs, lift others back to the kernel's
//! default), and which knobs a platform can change at all ([`LiveKnobs`], one line of its
//! [`crate::Capabilities`]).
//!
//! An experiment puts the same tenants under several isolation settings one after the other
//! (no limits, a CPU quota, a memory protection, an I/O weight) and a tuning search moves one
//! knob between trials (a quota, or the split of the CPUs between tenants); neither restarts
//! a tenant, so the knobs change in place and are read back at once
//! ([`crate::Tenant::update_limits`]).

use std::fmt;

use serde::{Serialize, Serializer};

use crate::limits::{CpuWeight, Limits};

/// One isolation knob that can change while a tenant lives. Each is one field of
/// [`Limits`]; its key is the limit key (`cpus`, `memory_low`, ...). The memory nodes, the
/// cpuset partition and network rates are not knobs here: a partition is made with the
/// tenant, and its network shaper is set up with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Knob {
    /// CPU quota (`cpus`): v1 `cpu.cfs_quota_us`, v2 `cpu.max`.
    Cpus,
    /// CPU weight (`shares` on the v1 scale, `weight` on the v2 scale): `cpu.shares` /
    /// `cpu.weight`.
    CpuWeight,
    /// CPU burst (`cpu_burst`): v1 `cpu.cfs_burst_us`, v2 `cpu.max.burst`.
    CpuBurst,
    /// The CPUs the tenant may run on (`cpuset`, a CPU list such as `0-1`): `cpuset.cpus`.
    /// The kernel moves the tenant's tasks off the CPUs taken away at once (on v1 too); a
    /// thread that pinned itself may keep its own affinity within the new list (newer
    /// kernels keep what a thread asked for where the list allows).
    Cpuset,
    /// Memory limit (`memory`): v1 `memory.limit_in_bytes`, v2 `memory.max`.
    Memory,
    /// Hard reclaim protection (`memory_min`): v2 `memory.min`.
    MemoryMin,
    /// Best-effort reclaim protection (`memory_low`): v2 `memory.low`.
    MemoryLow,
    /// Throttling threshold (`memory_high`): v2 `memory.high`.
    MemoryHigh,
    /// Swap (`swap`): v2 `memory.swap.max`, v1 `memory.memsw.limit_in_bytes` less memory.
    Swap,
    /// Processes and threads (`pids`): `pids.max`.
    Pids,
    /// Read bandwidth on the workdir's disk (`io_read_bps`).
    IoReadBps,
    /// Write bandwidth on the workdir's disk (`io_write_bps`).
    IoWriteBps,
    /// Read operations per second on the workdir's disk (`io_read_iops`).
    IoReadIops,
    /// Write operations per second on the workdir's disk (`io_write_iops`).
    IoWriteIops,
    /// I/O weight (`io_weight`): v2 `io.weight` (with a line for the disk under io.cost),
    /// v1 `blkio.bfq.weight` or `blkio.weight`.
    IoWeight,
    /// I/O latency target on the workdir's disk (`io_latency`): v2 `io.latency`.
    IoLatency,
}

impl Knob {
    /// Every knob, in [`crate::limits::LIMIT_KEYS`] order.
    pub const ALL: [Knob; 16] = [
        Knob::Cpus,
        Knob::CpuBurst,
        Knob::CpuWeight,
        Knob::Cpuset,
        Knob::Memory,
        Knob::MemoryMin,
        Knob::MemoryLow,
        Knob::MemoryHigh,
        Knob::Swap,
        Knob::Pids,
        Knob::IoReadBps,
        Knob::IoWriteBps,
        Knob::IoReadIops,
        Knob::IoWriteIops,
        Knob::IoWeight,
        Knob::IoLatency,
    ];

    /// The limit key (`weight` for the CPU weight, whichever scale it was written in).
    pub fn key(self) -> &'static str {
        match self {
            Knob::Cpus => "cpus",
            Knob::CpuWeight => "weight",
            Knob::CpuBurst => "cpu_burst",
            Knob::Cpuset => "cpuset",
            Knob::Memory => "memory",
            Knob::MemoryMin => "memory_min",
            Knob::MemoryLow => "memory_low",
            Knob::MemoryHigh => "memory_high",
            Knob::Swap => "swap",
            Knob::Pids => "pids",
            Knob::IoReadBps => "io_read_bps",
            Knob::IoWriteBps => "io_write_bps",
            Knob::IoReadIops => "io_read_iops",
            Knob::IoWriteIops => "io_write_iops",
            Knob::IoWeight => "io_weight",
            Knob::IoLatency => "io_latency",
        }
    }

    /// The knob of limit key `key` (`shares` and `weight` are both the CPU weight); `None`
    /// for a key that is not a live knob (`mems`, `net_rate`, ...) or no key at all.
    pub fn from_key(key: &str) -> Option<Knob> {
        match key {
            "shares" => Some(Knob::CpuWeight),
            k => Knob::ALL.into_iter().find(|n| n.key() == k),
        }
    }

    const fn bit(self) -> u32 {
        1 << self as u32
    }

    /// Whether `l` sets this knob.
    pub fn is_set(self, l: &Limits) -> bool {
        match self {
            Knob::Cpus => l.cpus.is_some(),
            Knob::CpuWeight => l.cpu_weight.is_some(),
            Knob::CpuBurst => l.cpu_burst.is_some(),
            Knob::Cpuset => l.cpuset.is_some(),
            Knob::Memory => l.memory.is_some(),
            Knob::MemoryMin => l.memory_min.is_some(),
            Knob::MemoryLow => l.memory_low.is_some(),
            Knob::MemoryHigh => l.memory_high.is_some(),
            Knob::Swap => l.swap.is_some(),
            Knob::Pids => l.pids.is_some(),
            Knob::IoReadBps => l.io_read_bps.is_some(),
            Knob::IoWriteBps => l.io_write_bps.is_some(),
            Knob::IoReadIops => l.io_read_iops.is_some(),
            Knob::IoWriteIops => l.io_write_iops.is_some(),
            Knob::IoWeight => l.io_weight.is_some(),
            Knob::IoLatency => l.io_latency.is_some(),
        }
    }

    /// Copies this knob's value (set or not) from `from` into `to`.
    pub fn copy(self, from: &Limits, to: &mut Limits) {
        match self {
            Knob::Cpus => to.cpus = from.cpus,
            Knob::CpuWeight => to.cpu_weight = from.cpu_weight,
            Knob::CpuBurst => to.cpu_burst = from.cpu_burst,
            Knob::Cpuset => to.cpuset = from.cpuset.clone(),
            Knob::Memory => to.memory = from.memory,
            Knob::MemoryMin => to.memory_min = from.memory_min,
            Knob::MemoryLow => to.memory_low = from.memory_low,
            Knob::MemoryHigh => to.memory_high = from.memory_high,
            Knob::Swap => to.swap = from.swap,
            Knob::Pids => to.pids = from.pids,
            Knob::IoReadBps => to.io_read_bps = from.io_read_bps,
            Knob::IoWriteBps => to.io_write_bps = from.io_write_bps,
            Knob::IoReadIops => to.io_read_iops = from.io_read_iops,
            Knob::IoWriteIops => to.io_write_iops = from.io_write_iops,
            Knob::IoWeight => to.io_weight = from.io_weight,
            Knob::IoLatency => to.io_latency = from.io_latency,
        }
    }

    /// Unsets this knob in `l`.
    pub fn clear(self, l: &mut Limits) {
        self.copy(&Limits::default(), l);
    }

    /// This knob's value in `l` as a JSON value, in the limit syntax (`"512M"`, `0.5`,
    /// `"weight=50"` written as `50`, a CPU list as a string: `"1"`, `"0-1"`), or `null`
    /// when `l` does not set it.
    pub fn json(self, l: &Limits) -> serde_json::Value {
        use serde_json::Value;
        if !self.is_set(l) {
            return Value::Null;
        }
        if let (Knob::Cpus, Some(c)) = (self, l.cpus) {
            return serde_json::json!(c);
        }
        if let (Knob::Cpuset, Some(s)) = (self, &l.cpuset) {
            return Value::String(s.to_string());
        }
        if let (Knob::CpuWeight, Some(w)) = (self, l.cpu_weight) {
            return serde_json::json!(match w {
                CpuWeight::Shares(s) => s,
                CpuWeight::Weight(w) => w,
            });
        }
        let mut only = Limits::default();
        self.copy(l, &mut only);
        let text = only.to_string();
        let v = text.split_once('=').map_or(text.as_str(), |(_, v)| v);
        match v.parse::<u64>() {
            Ok(n) => serde_json::json!(n),
            Err(_) => Value::String(v.to_string()),
        }
    }

    /// The key under which [`Knob::json`] is written: `shares` for a weight on the v1
    /// scale, else [`Knob::key`].
    pub fn json_key(self, l: &Limits) -> &'static str {
        match (self, l.cpu_weight) {
            (Knob::CpuWeight, Some(CpuWeight::Shares(_))) => "shares",
            _ => self.key(),
        }
    }
}

impl fmt::Display for Knob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// A set of [`Knob`]s (a bit per knob, so it fits a `const` capability table).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct KnobSet(u32);

impl KnobSet {
    /// No knob.
    pub const NONE: KnobSet = KnobSet(0);

    /// Every knob.
    pub const ALL: KnobSet = KnobSet::of(&Knob::ALL);

    /// The set of `knobs`.
    pub const fn of(knobs: &[Knob]) -> KnobSet {
        let mut bits = 0;
        let mut i = 0;
        while i < knobs.len() {
            bits |= knobs[i].bit();
            i += 1;
        }
        KnobSet(bits)
    }

    /// The knobs `l` sets.
    pub fn set_in(l: &Limits) -> KnobSet {
        KnobSet::of(
            &Knob::ALL
                .into_iter()
                .filter(|k| k.is_set(l))
                .collect::<Vec<_>>(),
        )
    }

    /// Whether `k` is in the set.
    pub fn contains(self, k: Knob) -> bool {
        self.0 & k.bit() != 0
    }

    /// Adds `k`.
    pub fn insert(&mut self, k: Knob) {
        self.0 |= k.bit();
    }

    /// Removes `k`.
    pub fn remove(&mut self, k: Knob) {
        self.0 &= !k.bit();
    }

    /// Both sets' knobs.
    pub fn union(self, other: KnobSet) -> KnobSet {
        KnobSet(self.0 | other.0)
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The knobs, in [`Knob::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Knob> {
        Knob::ALL.into_iter().filter(move |k| self.contains(*k))
    }

    /// The keys, comma-separated (`cpus, memory`), or `none`.
    pub fn keys(self) -> String {
        if self.is_empty() {
            return "none".into();
        }
        self.iter().map(Knob::key).collect::<Vec<_>>().join(", ")
    }
}

impl fmt::Debug for KnobSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter().map(Knob::key)).finish()
    }
}

impl Serialize for KnobSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter().map(Knob::key))
    }
}

/// The knobs a platform can change while a tenant lives, and why it cannot change the
/// others. A line of [`crate::Capabilities`], so the engine can refuse a condition before
/// any tenant exists.
///
/// A knob in the set can still be refused when it is set, for a reason only the host knows
/// (cgroup v1 has no `memory.low`; a kernel without `io.latency`): the refusal names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LiveKnobs {
    /// The knobs that can change.
    pub knobs: KnobSet,
    /// Why the others cannot, and what to use instead.
    pub why_not: &'static str,
}

impl LiveKnobs {
    /// Why `platform` cannot change `knob` while a tenant lives, when it cannot.
    pub fn refusal(&self, platform: &str, knob: Knob) -> Option<String> {
        (!self.knobs.contains(knob)).then(|| {
            format!(
                "the `{platform}` platform cannot change `{knob}` while a tenant lives: {} \
                 (it can change: {})",
                self.why_not,
                self.knobs.keys()
            )
        })
    }
}

impl LiveKnobs {
    /// Refuses `changes` when `platform` cannot change one of its knobs live, naming the
    /// first such knob and why.
    pub fn refuse(&self, platform: &str, changes: &LimitChanges) -> anyhow::Result<()> {
        changes.check().map_err(|e| anyhow::anyhow!(e))?;
        match changes
            .knobs()
            .iter()
            .find_map(|k| self.refusal(platform, k))
        {
            Some(why) => Err(anyhow::anyhow!(why)),
            None => Ok(()),
        }
    }
}

/// A change of some of a tenant's knobs: each knob [`LimitChanges::set`] sets takes that
/// value, each knob in [`LimitChanges::lift`] goes back to the kernel's default (no limit,
/// the default weight, no protection), and every other knob stays as it is.
///
/// Lifting `swap` gives the default of a tenant with a memory limit, no swap; without one,
/// unlimited swap.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LimitChanges {
    /// The knobs set to a value: every live knob these limits set.
    pub set: Limits,
    /// The knobs lifted.
    pub lift: KnobSet,
}

impl LimitChanges {
    /// Sets the CPU quota to `cpus` CPUs, or lifts it (`None`).
    pub fn cpus(cpus: Option<f64>) -> LimitChanges {
        match cpus {
            Some(c) => LimitChanges {
                set: Limits {
                    cpus: Some(c),
                    ..Limits::default()
                },
                lift: KnobSet::NONE,
            },
            None => LimitChanges {
                set: Limits::default(),
                lift: KnobSet::of(&[Knob::Cpus]),
            },
        }
    }

    /// Every knob the change touches (set or lifted).
    pub fn knobs(&self) -> KnobSet {
        KnobSet::set_in(&self.set).union(self.lift)
    }

    /// Whether the change touches no knob.
    pub fn is_empty(&self) -> bool {
        self.knobs().is_empty() && self.set.is_empty()
    }

    /// Refuses a change of what is not a live knob (memory nodes, the cpuset partition,
    /// network rates) or a knob both set and lifted.
    pub fn check(&self) -> Result<(), String> {
        let mut rest = self.set.clone();
        for k in Knob::ALL {
            k.clear(&mut rest);
        }
        if !rest.is_empty() {
            return Err(format!(
                "`{rest}` cannot change while a tenant lives (its memory nodes and cpuset \
                 partition are made with it and its network is shaped then); the knobs \
                 that can: {}",
                KnobSet::ALL.keys()
            ));
        }
        if let Some(k) = KnobSet::set_in(&self.set)
            .iter()
            .find(|k| self.lift.contains(*k))
        {
            return Err(format!("`{k}` is both set and lifted; keep one"));
        }
        Ok(())
    }

    /// `limits` with this change made.
    pub fn applied_to(&self, limits: &Limits) -> Limits {
        let mut l = limits.clone();
        for k in self.lift.iter() {
            k.clear(&mut l);
        }
        for k in KnobSet::set_in(&self.set).iter() {
            k.copy(&self.set, &mut l);
        }
        l
    }

    /// The change that puts back `planned` for every knob this change touches: its planned
    /// value, or lifted where the plan leaves it unset.
    pub fn restoring(&self, planned: &Limits) -> LimitChanges {
        let mut back = LimitChanges::default();
        for k in self.knobs().iter() {
            if k.is_set(planned) {
                k.copy(planned, &mut back.set);
            } else {
                back.lift.insert(k);
            }
        }
        back
    }

    /// The change as JSON, in the form a condition stores it: each knob set, with its
    /// value, and each lifted, with `null` (`{"cpus": 0.5, "memory_low": "256M",
    /// "io_weight": null}`).
    pub fn to_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        for k in self.knobs().iter() {
            m.insert(k.json_key(&self.set).to_string(), k.json(&self.set));
        }
        serde_json::Value::Object(m)
    }
}

impl fmt::Display for LimitChanges {
    /// `cpus=0.5,memory_low=256M,io_weight=default`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        let set = self.set.to_string();
        if !set.is_empty() {
            parts.push(set);
        }
        for k in self.lift.iter() {
            parts.push(format!("{k}=default"));
        }
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(s: &str) -> Limits {
        s.parse().unwrap()
    }

    #[test]
    fn every_knob_key_is_a_limit_key_and_round_trips() {
        for k in Knob::ALL {
            assert!(
                crate::limits::LIMIT_KEYS.iter().any(|lk| lk.key == k.key()),
                "{k}"
            );
            assert_eq!(Knob::from_key(k.key()), Some(k));
        }
        assert_eq!(Knob::from_key("shares"), Some(Knob::CpuWeight));
        assert_eq!(Knob::from_key("cpuset"), Some(Knob::Cpuset));
        assert_eq!(Knob::from_key("mems"), None);
        assert_eq!(KnobSet::ALL.iter().count(), Knob::ALL.len());
    }

    #[test]
    fn a_set_knob_copies_and_clears_only_itself() {
        let all = l(
            "cpus=1,shares=512,memory=1G,memory_low=64M,io_weight=50,pids=64,\
             io_read_bps=10M,cpuset=0",
        );
        assert_eq!(
            KnobSet::set_in(&all).keys(),
            "cpus, weight, cpuset, memory, memory_low, pids, io_read_bps, io_weight"
        );
        let mut x = Limits::default();
        Knob::MemoryLow.copy(&all, &mut x);
        assert_eq!(x, l("memory_low=64M"));
        let mut y = all.clone();
        Knob::Memory.clear(&mut y);
        assert_eq!(y.memory, None);
        assert_eq!(y.memory_low, all.memory_low);
    }

    #[test]
    fn a_change_applies_sets_and_lifts_and_restores_the_plan() {
        let planned = l("cpus=1,memory=1G,io_weight=50");
        let change = LimitChanges {
            set: l("cpus=0.5,memory_low=256M,weight=50"),
            lift: KnobSet::of(&[Knob::Memory, Knob::IoWeight]),
        };
        change.check().unwrap();
        assert_eq!(
            change.applied_to(&planned),
            l("cpus=0.5,weight=50,memory_low=256M")
        );
        let back = change.restoring(&planned);
        assert_eq!(back.set, l("cpus=1,memory=1G,io_weight=50"));
        assert_eq!(back.lift.keys(), "weight, memory_low");
        assert_eq!(back.applied_to(&change.applied_to(&planned)), planned);
        assert_eq!(
            change.to_json(),
            serde_json::json!({"cpus": 0.5, "weight": 50, "memory": null,
                               "memory_low": "256M", "io_weight": null})
        );
        assert_eq!(
            change.to_string(),
            "cpus=0.5,weight=50,memory_low=256M,memory=default,io_weight=default"
        );
    }

    #[test]
    fn a_cpuset_is_a_live_knob_written_as_its_list_and_restored_or_lifted() {
        let planned = l("cpuset=0,memory=1G");
        let change = LimitChanges {
            set: l("cpuset=1"),
            lift: KnobSet::NONE,
        };
        change.check().unwrap();
        assert_eq!(change.applied_to(&planned), l("cpuset=1,memory=1G"));
        assert_eq!(change.to_json(), serde_json::json!({"cpuset": "1"}));
        assert_eq!(
            LimitChanges {
                set: l("cpuset=0-1"),
                lift: KnobSet::NONE
            }
            .to_json(),
            serde_json::json!({"cpuset": "0-1"})
        );
        assert_eq!(change.restoring(&planned).set, l("cpuset=0"));
        // Without a planned cpuset, the restore lifts it (the parent's CPUs).
        let back = change.restoring(&l("memory=1G"));
        assert_eq!(back.lift.keys(), "cpuset");
        assert_eq!(back.to_string(), "cpuset=default");
    }

    #[test]
    fn what_is_not_a_live_knob_is_refused_with_the_reason() {
        let e = LimitChanges {
            set: l("mems=0,cpus=1"),
            lift: KnobSet::NONE,
        }
        .check()
        .unwrap_err();
        assert!(
            e.contains("`mems=0` cannot change while a tenant lives"),
            "{e}"
        );
        let e = LimitChanges {
            set: l("pids=10"),
            lift: KnobSet::of(&[Knob::Pids]),
        }
        .check()
        .unwrap_err();
        assert!(e.contains("`pids` is both set and lifted"), "{e}");
    }

    #[test]
    fn a_platform_names_what_it_cannot_change_and_what_it_can() {
        let live = LiveKnobs {
            knobs: KnobSet::of(&[Knob::Cpus, Knob::Memory]),
            why_not: "the engine's update command has no flag for it",
        };
        assert_eq!(live.refusal("oci", Knob::Cpus), None);
        let e = live.refusal("oci", Knob::MemoryHigh).unwrap();
        assert_eq!(
            e,
            "the `oci` platform cannot change `memory_high` while a tenant lives: the \
             engine's update command has no flag for it (it can change: cpus, memory)"
        );
        assert_eq!(
            serde_json::to_value(live).unwrap()["knobs"],
            serde_json::json!(["cpus", "memory"])
        );
    }
}
