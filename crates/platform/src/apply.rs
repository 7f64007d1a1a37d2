//! How to apply a tenant's limits outside isobench: the `systemctl set-property`, `docker
//! update`/`docker run`, Kubernetes `resources` and raw cgroup v2 and v1 writes that give a
//! unit, container, pod or cgroup the same limits, so that a setting isobench found can be
//! carried to the user's own systems.
//!
//! The mappings are the platforms' own where one exists: the engine flags of the `oci`
//! platform, the pod resources of the `k8s` platform and the cgroup files of the `cgroup`
//! platform, with the reasons they give for what they cannot express. A knob with no
//! equivalent on a target is named in that target's [`Recipe::missing`] with why, never
//! printed as a line the tool would reject. Placeholders stand for what only the user knows:
//! [`UNIT`], [`CONTAINER`], [`IMAGE`], [`GROUP`], and the disk when it is not given
//! ([`DEVICE`], [`DEVNUM`]).

use std::fmt;

use isobench_common::format_size_exact;
use serde::Serialize;
use serde_json::Value;

use crate::blockdev::BlockDevice;
use crate::cgroup::group::knobs::{CFQ_PER_WEIGHT, V1_ABSENT, V1_SWAP_NEEDS_MEMORY};
use crate::cgroup::group::{v1_limit_files, v2_limit_files};
use crate::cgroup::Controller;
use crate::limits::{format_micros, CpuWeight, Limits};
use crate::{k8s, oci};

/// The systemd unit of a recipe.
pub const UNIT: &str = "UNIT";
/// The container of a `docker update` recipe.
pub const CONTAINER: &str = "CONTAINER";
/// The image of a `docker run` recipe.
pub const IMAGE: &str = "IMAGE";
/// The cgroup of a raw cgroup recipe, below the controller's mount.
pub const GROUP: &str = "GROUP";
/// The disk's device node when none is given.
pub const DEVICE: &str = "/dev/DEVICE";
/// The disk's device number when none is given.
pub const DEVNUM: &str = "MAJ:MIN";

/// Where a recipe applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// A systemd unit's cgroup v2 properties (`systemctl set-property`).
    Systemd,
    /// A Docker container's flags (`docker update`, `docker run`).
    Docker,
    /// A Kubernetes container's `resources`.
    Kubernetes,
    /// The files of a cgroup v2 directory.
    CgroupV2,
    /// The files of cgroup v1 directories, one hierarchy per controller.
    CgroupV1,
}

impl Target {
    /// Every target, in the order [`recipes`] gives them.
    pub const ALL: [Target; 5] = [
        Target::Systemd,
        Target::Docker,
        Target::Kubernetes,
        Target::CgroupV2,
        Target::CgroupV1,
    ];

    /// The name printed before its lines.
    pub fn label(self) -> &'static str {
        match self {
            Target::Systemd => "systemd",
            Target::Docker => "docker",
            Target::Kubernetes => "kubernetes",
            Target::CgroupV2 => "cgroup v2",
            Target::CgroupV1 => "cgroup v1",
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.label())
    }
}

/// A limit key a target has no equivalent of, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Missing {
    /// The limit key (`memory_high`, `io_latency`, ...).
    pub key: &'static str,
    /// Why the target cannot express it, and what comes closest.
    pub why: String,
}

/// How to apply a tenant's limits on one target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Recipe {
    /// Where it applies.
    pub target: Target,
    /// The commands (or, for Kubernetes, the manifest fragment), in order; empty when no
    /// limit maps.
    pub lines: Vec<String>,
    /// The limits the target has no equivalent of.
    pub missing: Vec<Missing>,
    /// What the lines become on some hosts (a weight's scale, a feature a file needs).
    pub notes: Vec<String>,
}

impl Recipe {
    fn new(target: Target) -> Recipe {
        Recipe {
            target,
            lines: Vec::new(),
            missing: Vec::new(),
            notes: Vec::new(),
        }
    }

    fn missing(&mut self, key: &'static str, why: impl Into<String>) {
        self.missing.push(Missing {
            key,
            why: why.into(),
        });
    }

    /// Its text: the target's label before the first line, then the other lines, the
    /// missing limits and the notes, indented under it.
    pub fn render(&self) -> Vec<String> {
        const WIDTH: usize = 12;
        let mut body: Vec<String> = self.lines.clone();
        if self.lines.is_empty() {
            body.push("(no limit maps)".into());
        }
        body.extend(
            self.missing
                .iter()
                .map(|m| format!("cannot set {}: {}", m.key, m.why)),
        );
        body.extend(self.notes.iter().map(|n| format!("note: {n}")));
        body.iter()
            .enumerate()
            .map(|(i, line)| {
                let head = if i == 0 {
                    format!("{}:", self.target.label())
                } else {
                    String::new()
                };
                format!("{head:<WIDTH$}{line}")
            })
            .collect()
    }
}

/// Every recipe's text, in order (see [`Recipe::render`]).
pub fn render(recipes: &[Recipe]) -> Vec<String> {
    recipes.iter().flat_map(Recipe::render).collect()
}

/// How to apply `limits` (one tenant's) on each [`Target`]. The io limits and the latency
/// target apply to `device`, the disk of the tenant's data; [`DEVICE`] and [`DEVNUM`] stand
/// for it when it is not known.
pub fn recipes(limits: &Limits, device: Option<&BlockDevice>) -> Vec<Recipe> {
    let node = device.map_or_else(|| DEVICE.to_string(), |d| format!("/dev/{}", d.name));
    let devnum = device.map_or_else(|| DEVNUM.to_string(), |d| d.dev.to_string());
    let mut all = vec![
        systemd(limits, &node),
        docker(limits, &node),
        kubernetes(limits),
        cgroup_v2(limits, &devnum),
        cgroup_v1(limits, &devnum),
    ];
    if device.is_none() && limits.needs_device() {
        for r in &mut all {
            if r.lines
                .iter()
                .any(|l| l.contains(DEVICE) || l.contains(DEVNUM))
            {
                r.notes.push(format!(
                    "{DEVICE} ({DEVNUM}) stands for the disk the tenant's data is on: `lsblk` \
                     names it and its MAJ:MIN"
                ));
            }
        }
    }
    all
}

/// A word as the shell reads it back, quoted only where it holds more than letters, digits
/// and `%+,-./:=@_` (`shell_words::quote` would quote `%`, `=` and `,` too, and
/// `CPUQuota=60%` is easier read bare).
fn quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "%+,-./:=@_".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        shell_words::quote(word).into_owned()
    }
}

/// One command line from its words, each quoted for the shell where it needs it.
fn command(words: &[String]) -> String {
    words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ")
}

/// `cpus` as systemd's `CPUQuota=`: percent of one CPU, in hundredths at most.
fn cpu_quota_percent(cpus: f64) -> String {
    let hundredths = (cpus * 10_000.0).round() as u64;
    let whole = hundredths / 100;
    match hundredths % 100 {
        0 => format!("{whole}%"),
        f if f % 10 == 0 => format!("{whole}.{}%", f / 10),
        f => format!("{whole}.{f:02}%"),
    }
}

/// Why a network rate has no equivalent on a target.
fn net_why(what: &str) -> String {
    format!(
        "{what} has no setting for a network rate; shape the traffic with tc (tbf) on the \
         interface, as isobench does on the tenant's veth pair"
    )
}

/// The keys of `net_egress` and `net_ingress` that `l` sets.
fn net_keys(l: &Limits) -> impl Iterator<Item = &'static str> {
    [
        (l.net_egress.is_some(), "net_egress"),
        (l.net_ingress.is_some(), "net_ingress"),
    ]
    .into_iter()
    .filter_map(|(set, k)| set.then_some(k))
}

/// `systemctl set-property UNIT ...` with the properties of systemd.resource-control(5).
/// Memory sizes are in binary units, as systemd reads them there; the io bandwidths in bytes,
/// as systemd reads `K`/`M`/`G` there as powers of 1000, unlike isobench.
fn systemd(l: &Limits, node: &str) -> Recipe {
    let mut r = Recipe::new(Target::Systemd);
    let mut props: Vec<String> = Vec::new();
    let mut prop = |k: &str, v: String| props.push(format!("{k}={v}"));
    if let Some(c) = l.cpus {
        prop("CPUQuota", cpu_quota_percent(c));
    }
    if let Some(w) = l.cpu_weight {
        prop("CPUWeight", w.as_weight().to_string());
    }
    if let Some(s) = &l.cpuset {
        prop("AllowedCPUs", s.to_string());
    }
    if let Some(m) = &l.mems {
        prop("AllowedMemoryNodes", m.to_string());
    }
    for (k, v) in [
        ("MemoryMin", l.memory_min),
        ("MemoryLow", l.memory_low),
        ("MemoryHigh", l.memory_high),
        ("MemoryMax", l.memory),
    ] {
        if let Some(v) = v {
            prop(k, format_size_exact(v));
        }
    }
    // `memory` alone keeps the tenant from swapping, as the cgroup platform does.
    match (l.memory, l.swap) {
        (_, Some(s)) => prop("MemorySwapMax", format_size_exact(s)),
        (Some(_), None) => prop("MemorySwapMax", "0".into()),
        (None, None) => {}
    }
    if let Some(p) = l.pids {
        prop("TasksMax", p.to_string());
    }
    if let Some(w) = l.io_weight {
        prop("IOWeight", w.to_string());
    }
    for (k, v) in [
        ("IOReadBandwidthMax", l.io_read_bps),
        ("IOWriteBandwidthMax", l.io_write_bps),
        ("IOReadIOPSMax", l.io_read_iops),
        ("IOWriteIOPSMax", l.io_write_iops),
    ] {
        if let Some(v) = v {
            prop(k, format!("{node} {v}"));
        }
    }
    if let Some(t) = l.io_latency {
        prop(
            "IODeviceLatencyTargetSec",
            format!("{node} {}", format_micros(t)),
        );
    }
    if !props.is_empty() {
        let mut words: Vec<String> = ["systemctl", "set-property", UNIT]
            .map(String::from)
            .to_vec();
        words.extend(props);
        r.lines.push(command(&words));
    }
    if l.cpu_burst.is_some() {
        r.missing(
            "cpu_burst",
            "systemd has no property for the CFS burst (cpu.max.burst); write it to the unit's \
             cgroup after systemd made it",
        );
    }
    if l.cpuset_partition.is_some() {
        r.missing(
            "cpuset_partition",
            "systemd has no property for cpuset.cpus.partition; write it to the unit's cgroup \
             after systemd made it",
        );
    }
    for k in net_keys(l) {
        r.missing(k, net_why("systemd"));
    }
    if let Some(c) = l.cpus {
        let pct = cpu_quota_percent(c);
        if pct.contains('.') {
            r.notes.push(format!(
                "CPUQuota={pct} is a fraction of a percent, which older systemd versions refuse \
                 (they take whole percents) and versions before 256 keep in the set-property \
                 drop-in rounded down to a whole percent, the value after a daemon-reload"
            ));
        }
    }
    if l.io_weight.is_some() {
        r.notes.push(
            "IOWeight becomes io.weight, which weighs only on a disk under io.cost, and \
             io.bfq.weight where bfq schedules the disk"
                .into(),
        );
    }
    r
}

/// The flags of `docker run` that `docker update` takes too (docker update --help).
const DOCKER_UPDATE_FLAGS: &[&str] = &[
    "--blkio-weight",
    "--cpus",
    "--cpu-shares",
    "--cpuset-cpus",
    "--cpuset-mems",
    "--memory",
    "--memory-reservation",
    "--memory-swap",
    "--pids-limit",
];

/// `docker update` with the `oci` platform's flags, and `docker run` with those only a new
/// container takes (the `--device-*` throttles).
fn docker(l: &Limits, node: &str) -> Recipe {
    let mut r = Recipe::new(Target::Docker);
    for &(key, why) in oci::UNMAPPED {
        if l.keys_set().contains(&key) {
            r.missing(key, why);
        }
    }
    if l.swap.is_some() && l.memory.is_none() {
        r.missing("swap", oci::SWAP_NEEDS_MEMORY);
    }
    let weight_unmapped = l.io_weight.and_then(oci::io_weight_unmapped);
    if let Some(why) = &weight_unmapped {
        r.missing("io_weight", why.clone());
    }
    for k in net_keys(l) {
        r.missing(k, net_why("docker"));
    }
    let node = l.has_io().then_some(node);
    let (mut update, mut run) = (Vec::new(), Vec::new());
    for (flag, value) in oci::limit_flags(l, node) {
        if flag == "--blkio-weight" && weight_unmapped.is_some() {
            continue;
        }
        let to = if DOCKER_UPDATE_FLAGS.contains(&flag) {
            &mut update
        } else {
            &mut run
        };
        to.extend([flag.to_string(), value]);
    }
    if !update.is_empty() {
        let mut words = vec!["docker".to_string(), "update".into()];
        words.extend(update);
        words.push(CONTAINER.into());
        r.lines.push(command(&words));
    }
    if !run.is_empty() {
        let mut words = vec!["docker".to_string(), "run".into()];
        words.extend(run);
        words.push(IMAGE.into());
        r.lines.push(command(&words));
        r.notes.push(
            "docker update cannot change the --device-* throttles: they are set when the \
             container is created (docker run takes the docker update flags too)"
                .into(),
        );
    }
    if l.cpu_weight.is_some() {
        r.notes.push(SHARES_ON_V2.into());
    }
    if let Some(m) = l.memory_low {
        r.notes.push(oci::memory_low_note(m));
    }
    if let (Some(w), None) = (l.io_weight, &weight_unmapped) {
        r.notes.push(oci::io_weight_note(w));
    }
    r
}

/// What the container runtime makes of CPU shares on cgroup v2.
const SHARES_ON_V2: &str = "on cgroup v2 the container runtime converts CPU shares to \
     cpu.weight: runc before 1.3.2 and crun before 1.23 as 1 + (shares - 2) * 9999 / 262142 \
     (1024 shares give 39), later ones on a log scale that gives 1024 shares weight 100";

/// The CPU request, in millicores, that gives a pod the CPU weight `w`: the kubelet writes
/// `cpu.shares` = millicores * 1024 / 1000.
fn weight_millicores(w: CpuWeight) -> u64 {
    ((w.as_shares() * 1000 + 512) / 1024).max(1)
}

/// The container's `resources` as the `k8s` platform makes them (requests = limits), with
/// the CPU request a CPU weight needs.
fn kubernetes(l: &Limits) -> Recipe {
    let mut r = Recipe::new(Target::Kubernetes);
    let mut resources = k8s::resources(l);
    let set = l.keys_set();
    if set.contains(&"mems") {
        r.missing("mems", k8s::MEMS_WHY);
    }
    if set.contains(&"cpuset") {
        r.missing(
            "cpuset",
            "a pod cannot choose its CPUs; under the kubelet's static CPU manager policy a \
             Guaranteed pod (requests = limits, with memory) whose cpu is a whole number N gets \
             N CPUs of its own, chosen by the kubelet",
        );
    }
    if set.contains(&"pids") {
        r.missing(
            "pids",
            "a pod spec has no pids field; the kubelet's podPidsLimit bounds every pod of the \
             node alike",
        );
    }
    for key in [
        "io_read_bps",
        "io_write_bps",
        "io_read_iops",
        "io_write_iops",
    ] {
        if set.contains(&key) {
            r.missing(key, k8s::IO_LIMITS_WHY);
        }
    }
    for &(key, why) in k8s::NO_POD_FIELD {
        if set.contains(&key) {
            r.missing(key, why);
        }
    }
    for k in net_keys(l) {
        r.missing(
            k,
            "a pod spec has no field for its network rate; where the bandwidth CNI plugin is \
             installed, the pod annotations kubernetes.io/egress-bandwidth and \
             kubernetes.io/ingress-bandwidth set one",
        );
    }
    if let Some(w) = l.cpu_weight {
        let key = match w {
            CpuWeight::Shares(_) => "shares",
            CpuWeight::Weight(_) => "weight",
        };
        let millis = weight_millicores(w);
        let limit = l.cpus.map(|c| (c * 1000.0).round() as u64);
        match limit {
            Some(limit) if millis > limit => r.missing(
                key,
                format!(
                    "{}; the weight needs a CPU request of {millis}m, above the CPU limit of \
                     {limit}m, and a request may not exceed its limit",
                    k8s::CPU_WEIGHT_WHY
                ),
            ),
            _ => {
                resources["requests"]["cpu"] = Value::String(format!("{millis}m"));
                r.notes.push(format!(
                    "the CPU request {millis}m sets the weight: the kubelet writes cpu.shares \
                     = millicores * 1024 / 1000 = {} (cgroup v1); {SHARES_ON_V2}; the request \
                     also reserves that much of the node's CPU for scheduling",
                    w.as_shares()
                ));
            }
        }
    }
    if let Some(m) = resources.as_object_mut() {
        m.retain(|_, v| v.as_object().is_some_and(|o| !o.is_empty()));
    }
    if resources.as_object().is_some_and(|m| !m.is_empty()) {
        r.lines.push(format!("resources: {resources}"));
        let q = k8s::expected_qos(l);
        if l.cpu_weight.is_none() || l.cpus.is_none() {
            r.notes.push(format!(
                "requests = limits, as isobench's k8s platform sets them: the pod's QoS class \
                 is {q} when its other containers are alike"
            ));
        }
    }
    r
}

/// `echo VALUE > FILE`, quoted for the shell.
fn echo(value: &str, file: &str) -> String {
    format!("echo {} > {}", quote(value), file)
}

/// The raw cgroup v2 writes of the `cgroup` platform, below `/sys/fs/cgroup/GROUP`.
fn cgroup_v2(l: &Limits, devnum: &str) -> Recipe {
    let mut r = Recipe::new(Target::CgroupV2);
    let dir = format!("/sys/fs/cgroup/{GROUP}");
    let mut write =
        |file: &str, value: String| r.lines.push(echo(&value, &format!("{dir}/{file}")));
    let dev = l.has_io().then_some(devnum);
    for (_, file, value) in v2_limit_files(l, dev) {
        write(file, value);
    }
    if let Some(b) = l.cpu_burst {
        write("cpu.max.burst", b.to_string());
    }
    if let Some(p) = l.cpuset_partition {
        write("cpuset.cpus.partition", p.to_string());
    }
    match (l.memory, l.swap) {
        (_, Some(s)) => write("memory.swap.max", s.to_string()),
        (Some(_), None) => write("memory.swap.max", "0".into()),
        (None, None) => {}
    }
    for (file, v) in [
        ("memory.high", l.memory_high),
        ("memory.low", l.memory_low),
        ("memory.min", l.memory_min),
    ] {
        if let Some(v) = v {
            write(file, v.to_string());
        }
    }
    if let Some(w) = l.io_weight {
        write("io.weight", format!("default {w}"));
    }
    if let Some(t) = l.io_latency {
        write("io.latency", format!("{devnum} target={t}"));
    }
    for k in net_keys(l) {
        r.missing(k, net_why("cgroup v2"));
    }
    if !r.lines.is_empty() {
        r.notes.push(format!(
            "the parent's cgroup.subtree_control must enable each controller first (echo \
             \"+cpu +cpuset +memory +io +pids\" > /sys/fs/cgroup/cgroup.subtree_control for a \
             {GROUP} below the root)"
        ));
    }
    if l.io_weight.is_some() {
        r.notes.push(
            "io.weight weighs only on a disk under io.cost (io.cost.qos with enable=1, then \
             also write \"MAJ:MIN WEIGHT\"); where bfq schedules the disk, io.bfq.weight \
             (1..1000) takes the same line"
                .into(),
        );
    }
    if l.io_latency.is_some() {
        r.notes
            .push("io.latency needs a kernel built with CONFIG_BLK_CGROUP_IOLATENCY".into());
    }
    r
}

/// The raw cgroup v1 writes of the `cgroup` platform, below each controller's hierarchy.
fn cgroup_v1(l: &Limits, devnum: &str) -> Recipe {
    let mut r = Recipe::new(Target::CgroupV1);
    let dir = |c: Controller| format!("/sys/fs/cgroup/{}/{GROUP}", c.v1_name());
    let file =
        |c: Controller, file: &str, value: String| echo(&value, &format!("{}/{file}", dir(c)));
    if l.cpuset.is_some() || l.mems.is_some() {
        // A v1 cpuset admits no task until both lists are set; the parent's fill the gap.
        let parent = format!("/sys/fs/cgroup/{}", Controller::Cpuset.v1_name());
        for (name, list) in [("cpuset.cpus", &l.cpuset), ("cpuset.mems", &l.mems)] {
            r.lines.push(match list {
                Some(list) => file(Controller::Cpuset, name, list.to_string()),
                None => format!("cat {parent}/{name} > {}/{name}", dir(Controller::Cpuset)),
            });
        }
    }
    let dev = l.has_io().then_some(devnum);
    for (c, name, value) in v1_limit_files(l, dev) {
        r.lines.push(file(c, name, value));
    }
    if let Some(m) = l.memory {
        r.lines.push(file(
            Controller::Memory,
            "memory.memsw.limit_in_bytes",
            (m + l.swap.unwrap_or(0)).to_string(),
        ));
        r.notes.push(
            "memory.memsw.limit_in_bytes (memory + swap) needs swap accounting (swapaccount=1); \
             without it, write 0 to memory.swappiness instead"
                .into(),
        );
    }
    if let Some(b) = l.cpu_burst {
        r.lines
            .push(file(Controller::Cpu, "cpu.cfs_burst_us", b.to_string()));
    }
    match l.io_weight {
        Some(w) if w <= 1000 => {
            r.lines
                .push(file(Controller::Io, "blkio.bfq.weight", w.to_string()));
            r.notes.push(format!(
                "blkio.bfq.weight needs bfq as the disk's scheduler; under CFQ write {} to \
                 blkio.weight instead ({CFQ_PER_WEIGHT} times the scale, 10..1000)",
                w * CFQ_PER_WEIGHT
            ));
        }
        Some(w) => r.missing(
            "io_weight",
            format!("io_weight={w}: cgroup v1's blkio.bfq.weight takes 1..1000"),
        ),
        None => {}
    }
    let set = l.keys_set();
    for &(key, why, _) in V1_ABSENT {
        if set.contains(&key) {
            r.missing(key, why);
        }
    }
    if l.swap.is_some() && l.memory.is_none() {
        r.missing("swap", V1_SWAP_NEEDS_MEMORY);
    }
    for k in net_keys(l) {
        r.missing(k, net_why("cgroup v1"));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blockdev::DevNum;

    fn limits(s: &str) -> Limits {
        s.parse().unwrap()
    }

    fn vda() -> BlockDevice {
        BlockDevice {
            dev: DevNum {
                major: 254,
                minor: 0,
            },
            name: "vda".into(),
        }
    }

    fn recipe(s: &str, t: Target) -> Recipe {
        recipes(&limits(s), Some(&vda()))
            .into_iter()
            .find(|r| r.target == t)
            .unwrap()
    }

    fn missing(r: &Recipe) -> Vec<&'static str> {
        r.missing.iter().map(|m| m.key).collect()
    }

    #[test]
    fn cpu_quota_is_percent_of_one_cpu_in_hundredths() {
        for (cpus, want) in [
            (0.6, "60%"),
            (1.5, "150%"),
            (0.01, "1%"),
            (0.125, "12.5%"),
            (0.1234, "12.34%"),
            (0.12345, "12.35%"),
            (4.0, "400%"),
        ] {
            assert_eq!(cpu_quota_percent(cpus), want, "{cpus}");
        }
    }

    #[test]
    fn systemd_gets_one_set_property_with_every_knob_it_has() {
        let r = recipe(
            "cpus=0.6,weight=50,cpuset=0-1,mems=0,memory=1G,memory_min=64M,memory_low=128M,\
             memory_high=768M,pids=64,io_weight=50,io_read_bps=10M,io_write_bps=40M,\
             io_read_iops=100,io_write_iops=200,io_latency=10ms",
            Target::Systemd,
        );
        assert_eq!(
            r.lines,
            [
                "systemctl set-property UNIT CPUQuota=60% CPUWeight=50 AllowedCPUs=0-1 \
              AllowedMemoryNodes=0 MemoryMin=64M MemoryLow=128M MemoryHigh=768M MemoryMax=1G \
              MemorySwapMax=0 TasksMax=64 IOWeight=50 \
              'IOReadBandwidthMax=/dev/vda 10485760' 'IOWriteBandwidthMax=/dev/vda 41943040' \
              'IOReadIOPSMax=/dev/vda 100' 'IOWriteIOPSMax=/dev/vda 200' \
              'IODeviceLatencyTargetSec=/dev/vda 10ms'"
            ]
        );
        assert!(r.missing.is_empty(), "{:?}", r.missing);
        assert!(!r.notes.iter().any(|n| n.contains("CPUQuota")));
        let r = recipe("cpus=0.125", Target::Systemd);
        assert_eq!(r.lines, ["systemctl set-property UNIT CPUQuota=12.5%"]);
        assert!(r.notes[0].contains("CPUQuota=12.5% is a fraction of a percent"));
        // Shares are written on the v2 scale; swap is what the user allowed.
        let r = recipe("shares=512,memory=512M,swap=256M", Target::Systemd);
        assert_eq!(
            r.lines,
            ["systemctl set-property UNIT CPUWeight=50 MemoryMax=512M MemorySwapMax=256M"]
        );
        let r = recipe(
            "cpus=1,cpu_burst=20ms,cpuset=1,cpuset_partition=root,net_rate=10mbit",
            Target::Systemd,
        );
        assert_eq!(
            missing(&r),
            ["cpu_burst", "cpuset_partition", "net_egress", "net_ingress"]
        );
    }

    #[test]
    fn docker_updates_what_it_can_and_runs_with_the_device_throttles() {
        let r = recipe(
            "cpus=0.6,shares=512,cpuset=1,memory=256M,memory_low=64M,pids=64,io_weight=500,\
             io_write_bps=40M,io_read_iops=100",
            Target::Docker,
        );
        assert_eq!(
            r.lines,
            [
                "docker update --cpus 0.6 --cpu-shares 512 --cpuset-cpus 1 --memory 268435456 \
                 --memory-swap 268435456 --memory-reservation 67108864 --blkio-weight 500 \
                 --pids-limit 64 CONTAINER",
                "docker run --device-write-bps /dev/vda:41943040 --device-read-iops \
                 /dev/vda:100 IMAGE"
            ]
        );
        assert!(r.missing.is_empty());
        let notes = r.notes.join("\n");
        assert!(
            notes.contains("--memory-reservation")
                && notes.contains("--blkio-weight 500")
                && notes.contains("1024 shares give 39")
                && notes.contains("cannot change the --device-* throttles"),
            "{notes}"
        );
    }

    #[test]
    fn docker_names_what_it_has_no_flag_for() {
        let r = recipe(
            "cpus=1,cpu_burst=10ms,memory_min=8M,memory_high=64M,io_latency=5ms,io_weight=5,\
             swap=1G,net_egress=1mbit",
            Target::Docker,
        );
        assert_eq!(
            missing(&r),
            [
                "memory_min",
                "memory_high",
                "cpu_burst",
                "io_latency",
                "swap",
                "io_weight",
                "net_egress"
            ]
        );
        // The weight it cannot take is not printed.
        assert_eq!(r.lines, ["docker update --cpus 1 CONTAINER"]);
    }

    #[test]
    fn kubernetes_gets_requests_equal_to_limits_in_millicores() {
        let r = recipe("cpus=0.6,memory=256M", Target::Kubernetes);
        assert_eq!(
            r.lines,
            [
                r#"resources: {"limits":{"cpu":"600m","memory":"268435456"},"requests":{"cpu":"600m","memory":"268435456"}}"#
            ]
        );
        assert!(r.notes[0].contains("Guaranteed"), "{:?}", r.notes);
        let r = recipe(
            "cpuset=0,pids=10,io_write_bps=1M,memory_low=1M,net_rate=1mbit,mems=0",
            Target::Kubernetes,
        );
        assert!(r.lines.is_empty());
        assert_eq!(
            missing(&r),
            [
                "mems",
                "cpuset",
                "pids",
                "io_write_bps",
                "memory_low",
                "net_egress",
                "net_ingress"
            ]
        );
    }

    #[test]
    fn a_cpu_weight_becomes_the_cpu_request_that_gives_its_shares() {
        // weight 50 = 512 shares = 500m: the kubelet writes 500 * 1024 / 1000 = 512.
        let r = recipe("weight=50", Target::Kubernetes);
        assert_eq!(r.lines, [r#"resources: {"requests":{"cpu":"500m"}}"#]);
        assert!(r.notes[0].contains("cpu.shares = millicores * 1024 / 1000 = 512"));
        assert_eq!(weight_millicores(CpuWeight::Shares(1024)), 1000);
        assert_eq!(weight_millicores(CpuWeight::Shares(2)), 2);
        // Under a limit: the request is lower than the limit.
        let r = recipe("cpus=2,weight=50", Target::Kubernetes);
        assert_eq!(
            r.lines,
            [r#"resources: {"limits":{"cpu":"2000m"},"requests":{"cpu":"500m"}}"#]
        );
        // Above it: no request may exceed its limit.
        let r = recipe("cpus=0.2,shares=1024", Target::Kubernetes);
        assert_eq!(missing(&r), ["shares"]);
        assert!(r.missing[0]
            .why
            .contains("1000m, above the CPU limit of 200m"));
        assert_eq!(
            r.lines,
            [r#"resources: {"limits":{"cpu":"200m"},"requests":{"cpu":"200m"}}"#]
        );
    }

    #[test]
    fn cgroup_v2_writes_the_platforms_files() {
        let r = recipe(
            "cpus=0.6,weight=50,memory=1G,memory_low=128M,memory_high=512M,io_write_bps=40M,\
             io_weight=50,io_latency=2500us,cpu_burst=10ms,pids=64",
            Target::CgroupV2,
        );
        let d = "/sys/fs/cgroup/GROUP";
        assert_eq!(
            r.lines,
            [
                format!("echo '60000 100000' > {d}/cpu.max"),
                format!("echo 50 > {d}/cpu.weight"),
                format!("echo 1073741824 > {d}/memory.max"),
                format!("echo 64 > {d}/pids.max"),
                format!("echo '254:0 wbps=41943040' > {d}/io.max"),
                format!("echo 10000 > {d}/cpu.max.burst"),
                format!("echo 0 > {d}/memory.swap.max"),
                format!("echo 536870912 > {d}/memory.high"),
                format!("echo 134217728 > {d}/memory.low"),
                format!("echo 'default 50' > {d}/io.weight"),
                format!("echo '254:0 target=2500' > {d}/io.latency"),
            ]
        );
        assert!(r.missing.is_empty());
    }

    #[test]
    fn cgroup_v1_writes_each_controllers_files_and_names_the_v2_only_knobs() {
        let r = recipe(
            "cpus=0.6,shares=512,cpuset=1,memory=256M,swap=64M,io_write_bps=40M,io_weight=50,\
             memory_low=64M,memory_high=128M",
            Target::CgroupV1,
        );
        assert_eq!(
            r.lines,
            [
                "echo 1 > /sys/fs/cgroup/cpuset/GROUP/cpuset.cpus",
                "cat /sys/fs/cgroup/cpuset/cpuset.mems > /sys/fs/cgroup/cpuset/GROUP/cpuset.mems",
                "echo 100000 > /sys/fs/cgroup/cpu/GROUP/cpu.cfs_period_us",
                "echo 60000 > /sys/fs/cgroup/cpu/GROUP/cpu.cfs_quota_us",
                "echo 512 > /sys/fs/cgroup/cpu/GROUP/cpu.shares",
                "echo 268435456 > /sys/fs/cgroup/memory/GROUP/memory.limit_in_bytes",
                "echo '254:0 41943040' > \
                 /sys/fs/cgroup/blkio/GROUP/blkio.throttle.write_bps_device",
                "echo 335544320 > /sys/fs/cgroup/memory/GROUP/memory.memsw.limit_in_bytes",
                "echo 50 > /sys/fs/cgroup/blkio/GROUP/blkio.bfq.weight",
            ]
        );
        assert_eq!(missing(&r), ["memory_low", "memory_high"]);
        assert!(r
            .notes
            .iter()
            .any(|n| n.contains("write 250 to blkio.weight")));
        let r = recipe("swap=1G,io_latency=1ms", Target::CgroupV1);
        assert_eq!(missing(&r), ["io_latency", "swap"]);
        assert!(r.lines.is_empty());
    }

    #[test]
    fn an_unknown_disk_is_a_placeholder_with_a_note() {
        let all = recipes(&limits("io_write_bps=40M"), None);
        let text = render(&all).join("\n");
        assert!(
            text.contains("'IOWriteBandwidthMax=/dev/DEVICE 41943040'")
                && text.contains("--device-write-bps /dev/DEVICE:41943040")
                && text.contains("echo 'MAJ:MIN wbps=41943040' > /sys/fs/cgroup/GROUP/io.max")
                && text.contains("`lsblk` names it"),
            "{text}"
        );
        // Without io limits, no device and no note.
        let text = render(&recipes(&limits("cpus=1"), None)).join("\n");
        assert!(
            !text.contains("DEVICE") && !text.contains("lsblk"),
            "{text}"
        );
    }

    #[test]
    fn the_text_puts_each_target_before_its_lines() {
        let text = render(&recipes(&limits("cpus=0.6"), None));
        assert_eq!(
            text[..3],
            [
                "systemd:    systemctl set-property UNIT CPUQuota=60%",
                "docker:     docker update --cpus 0.6 CONTAINER",
                r#"kubernetes: resources: {"limits":{"cpu":"600m"},"requests":{"cpu":"600m"}}"#,
            ]
        );
        assert!(text.contains(
            &"cgroup v2:  echo '60000 100000' > /sys/fs/cgroup/GROUP/cpu.max".to_string()
        ));
        assert!(text.contains(
            &"cgroup v1:  echo 100000 > /sys/fs/cgroup/cpu/GROUP/cpu.cfs_period_us".to_string()
        ));
        let r = recipe("memory_high=1G", Target::Docker);
        assert_eq!(
            r.render(),
            [
                "docker:     (no limit maps)",
                "            cannot set memory_high: docker and podman have no flag for \
                 memory.high"
            ]
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["target"], "docker");
        assert_eq!(json["missing"][0]["key"], "memory_high");
    }

    #[test]
    fn with_every_key_set_each_target_names_exactly_what_it_lacks() {
        let l = limits(
            "cpus=1,cpu_burst=10ms,weight=50,cpuset=0,cpuset_partition=root,mems=0,\
             memory=1G,memory_min=64M,memory_low=128M,memory_high=512M,swap=64M,pids=64,\
             io_read_bps=1M,io_write_bps=1M,io_read_iops=10,io_write_iops=10,\
             io_weight=50,io_latency=1ms,net_rate=1mbit",
        );
        let net = ["net_egress", "net_ingress"];
        let v2_only = [
            "memory_min",
            "memory_low",
            "memory_high",
            "cpuset_partition",
            "io_latency",
        ];
        for r in recipes(&l, Some(&vda())) {
            let mut want: Vec<&str> = match r.target {
                Target::Systemd => vec!["cpu_burst", "cpuset_partition"],
                Target::Docker => vec![
                    "memory_min",
                    "memory_high",
                    "cpu_burst",
                    "cpuset_partition",
                    "io_latency",
                ],
                Target::Kubernetes => {
                    let mut k = vec!["mems", "cpuset", "pids"];
                    k.extend([
                        "io_read_bps",
                        "io_write_bps",
                        "io_read_iops",
                        "io_write_iops",
                    ]);
                    k.extend(k8s::NO_POD_FIELD.iter().map(|(key, _)| *key));
                    k
                }
                Target::CgroupV2 => vec![],
                Target::CgroupV1 => v2_only.to_vec(),
            };
            want.extend(net);
            let mut got = missing(&r);
            got.sort();
            want.sort();
            assert_eq!(got, want, "{}", r.target);
            assert!(!r.lines.is_empty(), "{}", r.target);
        }
    }
}
