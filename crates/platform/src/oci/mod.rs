//! The `oci` platform: one container per tenant, made by Docker or Podman.
//!
//! The engine applies the limits (`--cpus`, `--cpuset-cpus`, `--memory` with as much swap
//! as memory, so none, unless `swap` adds some, `--pids-limit`, `--device-*-bps` on the
//! workdir's disk, `--cpu-shares`, `--memory-reservation` for `memory_low`, `--blkio-weight`
//! for `io_weight`; the other v2 knobs have no engine flag and are refused)
//! and isobench reads them back from the container's own cgroups, found through its init
//! process; freezing and live CPU limits write those cgroups directly (no engine round trip
//! in the on/off design). The image is built offline from the static isobench binary and a
//! static busybox ([`image`]); the agent is `/isobench agent` started with `exec -i`, over
//! its standard streams. A tenant with `image` runs from the user's own image instead, with
//! those two binaries mounted read-only under `/.isobench` ([`crate::userimage`]). No image
//! is ever pulled (`--pull never`). A tenant with a network gets its own address on the run's bridge:
//! the container starts with `--network none` and its namespace receives the tenant's veth
//! end, the same layout as a `cgroup` tenant's.
//!
//! Every container carries the labels `isobench.run` and `isobench.tenant` and is named
//! `isobench-<run>-<tenant>`, so the sweep ([`sweep`]) finds what a killed run left.

mod engine;
pub(crate) mod exec;
pub mod image;
pub mod init;
mod sweep;
mod tenant;

pub use engine::{Engine, EngineKind, EngineUnavailable, DEFAULT_DOCKER_HOST};
pub use image::ImageSource;
pub use init::{Init, InitRequest};
pub use tenant::{RUN_LABEL, TENANT_LABEL};

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::agent::Transport;
use crate::blockdev::BlockDevice;
use crate::cgroup::{CgroupFs, TenantCgroup};
use crate::container::Container;
use crate::error::PlatformError;
use crate::hostinfo::HostInfo;
use crate::limits::Limits;
use crate::net::{self, RunNet};
use crate::run::RunContext;
use crate::tenant::{Role, Tenant, TenantInfo, TenantSpec};
use crate::userimage::{self, FoundImage, INJECTED_BUSYBOX, INJECTED_EXE};
use crate::{Capabilities, Platform, PlatformEntry, PlatformKind, PlatformOptions};

/// The variable that chooses the engine (`docker` or `podman`) when the options do not.
pub const ENV_ENGINE: &str = "ISOBENCH_OCI_ENGINE";

/// The platform's name.
pub const KIND: PlatformKind = PlatformKind::new("oci");

/// What containers can do here.
pub const CAPS: Capabilities = Capabilities {
    enforces_limits: true,
    contains_aggressors: true,
    pins_cpus: true,
    chooses_cpus: false,
    freezer: true,
    live_cpu_limit: true,
    live_knobs: crate::LiveKnobs {
        knobs: tenant::UPDATE_KNOBS,
        why_not: "`docker update` has flags only for the CPU quota, weight and cpuset, memory \
                  (with swap), --memory-reservation (memory_low), the pids limit and the blkio \
                  weight; use the `cgroup` platform for the others",
    },
    own_network: true,
    exec: true,
    agent: Transport::Stdio,
    runs_images: true,
};

/// The `oci` line of [`crate::PLATFORMS`].
pub(crate) static ENTRY: PlatformEntry = PlatformEntry {
    kind: KIND,
    aliases: &["container", "containers"],
    summary: "one container per tenant (Docker or Podman), limits set by the engine, the \
              agent started with exec",
    caps: CAPS,
    build,
    available,
    sweep: sweep::sweep,
};

fn unavailable(why: impl Into<String>, fix: impl Into<String>) -> PlatformError {
    PlatformError::Unavailable {
        kind: KIND.name().into(),
        why: why.into(),
        fix: fix.into(),
    }
}

/// Whether containers can be made here: root, an engine (a Docker daemon that answers, or
/// Podman), the static isobench binary and a static busybox for the image. Creates nothing.
pub fn available() -> Result<(), PlatformError> {
    if crate::procs::euid() != 0 {
        return Err(unavailable(
            format!(
                "isobench runs as uid {} and containers' cgroups and namespaces need root",
                crate::procs::euid()
            ),
            "run it as root",
        ));
    }
    Engine::detect(engine_choice(None).as_deref()).map_err(|e| unavailable(e.why, e.fix))?;
    ImageSource::find().map_err(|e| {
        unavailable(
            format!("the agent's image cannot be built: {e:#}"),
            "see `isobench doctor`",
        )
    })?;
    Ok(())
}

/// The engine asked for: `option` (the platform's options), else [`ENV_ENGINE`]; `None`
/// lets [`Engine::detect`] choose (Docker when a daemon answers, else Podman).
pub fn engine_choice(option: Option<&str>) -> Option<String> {
    option.map(str::to_string).or_else(|| {
        std::env::var(ENV_ENGINE)
            .ok()
            .filter(|e| !e.trim().is_empty())
    })
}

fn build(opts: PlatformOptions, host: HostInfo) -> Result<Box<dyn Platform>> {
    Ok(Box::new(OciPlatform::new(opts, host)?))
}

/// What the checks of a tenant settled.
struct Checked {
    limits: Limits,
    notes: Vec<String>,
    parent: PathBuf,
    device: Option<BlockDevice>,
}

/// The `oci` platform.
pub struct OciPlatform {
    engine: Engine,
    run: RunContext,
    host: HostInfo,
    fs: CgroupFs,
    source: ImageSource,
    /// The containers' first process: the engine's init, the host's, or isobench's own.
    init: Init,
    image: Mutex<Option<String>>,
    /// The users' images found in the engine's store, by reference.
    user_images: Mutex<BTreeMap<String, FoundImage>>,
    net: Arc<RunNet>,
    names: BTreeSet<String>,
    workdir_root: PathBuf,
    /// A caveat for the record: the agents' binary is another version than this one.
    note: Option<String>,
}

impl OciPlatform {
    /// Finds the engine (`opts.oci_engine`, else [`ENV_ENGINE`], else Docker when a daemon
    /// answers, else Podman), the host's cgroups and what the image is made of. Creates nothing; the image
    /// is built with the first tenant when the engine lacks it.
    pub fn new(opts: PlatformOptions, host: HostInfo) -> Result<OciPlatform> {
        if crate::procs::euid() != 0 {
            return Err(unavailable(
                format!(
                    "isobench runs as uid {} and containers' cgroups and namespaces need root",
                    crate::procs::euid()
                ),
                "run it as root",
            )
            .into());
        }
        let choice = engine_choice(opts.oci_engine.as_deref());
        let engine = Engine::detect(choice.as_deref()).map_err(|e| unavailable(e.why, e.fix))?;
        let init = InitRequest::from_option_or_env(opts.oci_init.as_deref())
            .and_then(|r| init::for_engine(&engine, &r))
            .map_err(|e| unavailable(format!("{e:#}"), "see `isobench doctor`"))?;
        let fs = CgroupFs::detect().map_err(|e| {
            unavailable(format!("{e:#}"), "mount cgroupfs (the engine needs it too)")
        })?;
        let source = ImageSource::find().map_err(|e| {
            unavailable(
                format!("the agent's image cannot be built: {e:#}"),
                "build the static binary with `scripts/build-static` and install \
                 busybox-static",
            )
        })?;
        let note = version_note(&source.exe);
        Ok(OciPlatform {
            net: RunNet::for_run(opts.run.id()),
            engine,
            run: opts.run,
            host,
            fs,
            source,
            init,
            image: Mutex::new(None),
            user_images: Mutex::new(BTreeMap::new()),
            names: BTreeSet::new(),
            workdir_root: opts.workdir_root,
            note,
        })
    }

    /// The engine in use.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The containers' init.
    pub fn init(&self) -> &Init {
        &self.init
    }

    /// The agent image's tag, built and imported the first time it is missing.
    pub fn image(&self) -> Result<String> {
        let mut slot = self.image.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = slot.as_ref() {
            return Ok(t.clone());
        }
        let tag = image::ensure(&self.engine, &self.source)?;
        *slot = Some(tag.clone());
        Ok(tag)
    }

    /// The user's image `reference` of tenant `tenant` as the engine's store has it (looked
    /// up once per run), or an error naming the tenant, the image and how to get it there.
    fn user_image(&self, tenant: &str, reference: &str) -> Result<FoundImage> {
        let mut found = self.user_images.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = found.get(reference) {
            return Ok(f.clone());
        }
        let engine = self.engine.kind();
        let Some((id, user)) = self.engine.local_image(reference)? else {
            return Err(userimage::missing(
                tenant,
                reference,
                &format!("{engine}'s image store ({})", self.engine.describe()),
                &format!(
                    "put it there first with `{engine} pull {reference}` (where a registry is \
                     reachable), `{engine} load -i IMAGE.tar` or `{engine} build -t {reference} \
                     .`"
                ),
            ));
        };
        let f = FoundImage {
            reference: reference.to_string(),
            id: Some(id).filter(|i| !i.is_empty()),
            user: userimage::non_root_user(&user),
        };
        found.insert(reference.to_string(), f.clone());
        Ok(f)
    }

    /// The engine's `run` arguments for a tenant (after `run`, before the image).
    fn run_args(
        &self,
        object: &str,
        spec: &TenantSpec,
        limits: &Limits,
        workdir: &std::path::Path,
        device: Option<&BlockDevice>,
    ) -> Result<Vec<String>> {
        let mut a: Vec<String> = ["-d", "--name", object, "--hostname", &spec.name]
            .map(String::from)
            .to_vec();
        let label = |k: &str, v: &str| ["--label".to_string(), format!("{k}={v}")];
        a.extend(label(RUN_LABEL, self.run.id().as_str()));
        a.extend(label(TENANT_LABEL, &spec.name));
        // Every image is local: the agent's own is imported, a user's must be there.
        a.extend(["--pull".into(), "never".into()]);
        if spec.image.is_some() {
            // The agent's binaries, read-only; root, as in the agent's own image; none of
            // the image's health checks (they would run its own programs).
            for (host, inside) in [
                (&self.source.exe, INJECTED_EXE),
                (&self.source.busybox, INJECTED_BUSYBOX),
            ] {
                a.push("-v".into());
                a.push(format!("{}:{inside}:ro", host.display()));
            }
            a.extend(["--user", "0:0", "--no-healthcheck"].map(String::from));
        }
        a.push("--network".into());
        a.push(
            if spec.network.is_some() {
                "none"
            } else {
                "host"
            }
            .into(),
        );
        a.extend(limit_args(limits, device)?);
        if self.engine.kind() == EngineKind::Podman {
            // Raising rlimits needs CAP_SYS_RESOURCE, which root lacks on some hosts: set
            // them explicitly to values the host allows.
            for u in ["nofile=4096:4096", "nproc=4096:4096"] {
                a.push("--ulimit".into());
                a.push(u.into());
            }
        }
        let w = workdir.to_string_lossy().into_owned();
        a.extend(["-v".into(), format!("{w}:{w}"), "-w".into(), w.clone()]);
        for (k, v) in [
            (crate::procs::ENV_RUN, self.run.id().as_str().to_string()),
            (crate::procs::ENV_TENANT, object.to_string()),
            (crate::procs::ENV_WORKDIR, w),
        ] {
            a.push("-e".into());
            a.push(format!("{k}={v}"));
        }
        Ok(a)
    }
    /// Every check of a tenant before anything is created: its name, its limits against the
    /// host and the controllers, its workdir's parent and disk, the network's tools. Fills in
    /// an aggressor's containment limits.
    fn check(&self, spec: &TenantSpec) -> Result<Checked> {
        crate::tenant::check_spec(spec, &self.names, &self.host, KIND)?;
        let mut limits = spec.limits.clone();
        let mut notes = Vec::new();
        if spec.role == Role::Aggressor {
            let (l, filled) = limits.with_safe_defaults(&self.host);
            notes.extend(filled.into_iter().map(|f| format!("safe default {f}")));
            limits = l;
        }
        refuse_unmapped(&limits)?;
        notes.extend(knob_notes(&self.fs, &limits)?);
        let (parent, device) =
            crate::tenant::workdir_device(spec, &self.workdir_root, &mut limits, &mut notes)?;
        TenantCgroup::check(&self.fs, &limits)?;
        if spec.network.is_some() {
            net::check_available().map_err(|why| PlatformError::Unavailable {
                kind: "network namespace".into(),
                why,
                fix: "run isobench as root with iproute2 installed, or give the tenant no network"
                    .into(),
            })?;
        }
        Ok(Checked {
            limits,
            notes,
            parent,
            device,
        })
    }

    /// The container's init, the processes the killer spares (the init and its sleeper) and
    /// its cgroups, once the engine has started it.
    fn started(&self, object: &str) -> Result<(i32, Vec<i32>, TenantCgroup)> {
        let pid: i32 = self
            .engine
            .query(&["inspect", "--format", "{{.State.Pid}}", object])?
            .trim()
            .parse()
            .context("the engine reported no process id")?;
        if pid <= 0 {
            bail!("container {object} is not running");
        }
        let cgroup = TenantCgroup::of_process(&self.fs, pid)?;
        // The init forks the sleeper right after it starts.
        let end = Instant::now() + Duration::from_secs(5);
        let mut keep = vec![pid];
        loop {
            let c = children(pid);
            if !c.is_empty() {
                keep.extend(c);
                return Ok((pid, keep, cgroup));
            }
            if Instant::now() > end {
                bail!("the init of container {object} started no process");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// The knobs no engine flag sets, and why.
pub(crate) const UNMAPPED: &[(&str, &str)] = &[
    (
        "memory_min",
        "docker and podman have no flag for memory.min (only --memory-reservation, which is \
         memory.low)",
    ),
    (
        "memory_high",
        "docker and podman have no flag for memory.high",
    ),
    (
        "cpu_burst",
        "docker and podman have no flag for the CFS burst",
    ),
    (
        "cpuset_partition",
        "docker and podman cannot make a container's cpuset a partition",
    ),
    (
        "io_latency",
        "docker and podman have no flag for io.latency",
    ),
];

/// Why `swap` without `memory` has no engine flag.
pub(crate) const SWAP_NEEDS_MEMORY: &str =
    "the engine's --memory-swap is memory plus swap, so it needs a memory limit";

/// Why an `io_weight` outside 10..=1000 has no engine flag, if it is.
pub(crate) fn io_weight_unmapped(w: u64) -> Option<String> {
    (!(10..=1000).contains(&w))
        .then(|| format!("io_weight={w} becomes --blkio-weight, which takes 10..1000"))
}

/// Refuses the knobs no engine flag sets, naming the reason.
fn refuse_unmapped(l: &Limits) -> Result<(), PlatformError> {
    PlatformError::refuse_set(l, "oci", "the `cgroup` platform", UNMAPPED)?;
    if l.swap.is_some() && l.memory.is_none() {
        return Err(PlatformError::Refused {
            key: "swap",
            platform: "oci",
            why: SWAP_NEEDS_MEMORY.into(),
            fix: "add `memory`, or remove `swap`".into(),
        });
    }
    if let Some(why) = l.io_weight.and_then(io_weight_unmapped) {
        return Err(PlatformError::Refused {
            key: "io_weight",
            platform: "oci",
            why,
            fix: "use io_weight between 10 and 1000, or the `cgroup` platform".into(),
        });
    }
    Ok(())
}

/// What the engine makes of the knobs it maps, for the tenant's notes; refuses a weight the
/// engine would discard.
fn knob_notes(fs: &CgroupFs, l: &Limits) -> Result<Vec<String>, PlatformError> {
    let mut notes = Vec::new();
    if let Some(m) = l.memory_low {
        notes.push(memory_low_note(m));
    }
    if let Some(w) = l.io_weight {
        if fs.version() == crate::CgroupVersion::V1 {
            let root = fs
                .hierarchy_of(crate::cgroup::Controller::Io)
                .map(|h| &h.root);
            if !root.is_some_and(|r| fs.tree().exists(&r.join("blkio.weight"))) {
                return Err(PlatformError::Refused {
                    key: "io_weight",
                    platform: "oci",
                    why: "the blkio hierarchy has no blkio.weight (no CFQ scheduler), and the \
                          engine discards --blkio-weight then"
                        .into(),
                    fix: "remove `io_weight`, or use the `cgroup` platform (which writes \
                          blkio.bfq.weight)"
                        .into(),
                });
            }
        }
        notes.push(io_weight_note(w));
    }
    Ok(notes)
}

/// What the engine makes of `memory_low` (`--memory-reservation`) on each cgroup version.
pub(crate) fn memory_low_note(m: u64) -> String {
    format!(
        "memory_low={} is --memory-reservation: the engine writes it to memory.low on cgroup \
         v2, and to memory.soft_limit_in_bytes on v1, which is a reclaim target, not a \
         protection",
        isobench_common::format_size_exact(m)
    )
}

/// What the engine makes of `io_weight` (`--blkio-weight`, 10..=1000) on each cgroup
/// version.
pub(crate) fn io_weight_note(w: u64) -> String {
    format!(
        "io_weight={w} is --blkio-weight {w}: blkio.weight on cgroup v1; on v2 runc writes \
         io.bfq.weight {w} when bfq is there, else io.weight {}",
        1 + (w.max(10) - 10) * 9999 / 990
    )
}

/// The engine's flags for `limits`; io limits apply to `device`.
fn limit_args(l: &Limits, device: Option<&BlockDevice>) -> Result<Vec<String>> {
    let node = match (l.has_io(), device) {
        (false, _) => None,
        (true, None) => {
            bail!("io limits need the block device of the tenant's workdir, and none was found")
        }
        (true, Some(d)) => {
            let node = PathBuf::from("/dev").join(&d.name);
            if !node.exists() {
                bail!(
                    "io limits: the device node {} of the workdir's disk {d} does not exist",
                    node.display()
                );
            }
            Some(node.display().to_string())
        }
    };
    Ok(limit_flags(l, node.as_deref())
        .into_iter()
        .flat_map(|(k, v)| [k.to_string(), v])
        .collect())
}

/// The engine's flags for `limits`, each with its value; the io limits (`--device-*`, on
/// the device node `node`) only with a node.
pub(crate) fn limit_flags(l: &Limits, node: Option<&str>) -> Vec<(&'static str, String)> {
    let mut a = Vec::new();
    let mut flag = |k: &'static str, v: String| a.push((k, v));
    if let Some(c) = l.cpus {
        flag("--cpus", format!("{c}"));
    }
    if let Some(w) = l.cpu_weight {
        flag("--cpu-shares", w.as_shares().to_string());
    }
    if let Some(s) = &l.cpuset {
        flag("--cpuset-cpus", s.to_string());
    }
    if let Some(m) = &l.mems {
        flag("--cpuset-mems", m.to_string());
    }
    if let Some(m) = l.memory {
        flag("--memory", m.to_string());
        // --memory-swap is memory plus swap.
        flag("--memory-swap", (m + l.swap.unwrap_or(0)).to_string());
    }
    if let Some(r) = l.memory_low {
        flag("--memory-reservation", r.to_string());
    }
    if let Some(w) = l.io_weight {
        flag("--blkio-weight", w.to_string());
    }
    if let Some(p) = l.pids {
        flag("--pids-limit", p.to_string());
    }
    if let Some(node) = node {
        for (k, v) in [
            ("--device-read-bps", l.io_read_bps),
            ("--device-write-bps", l.io_write_bps),
            ("--device-read-iops", l.io_read_iops),
            ("--device-write-iops", l.io_write_iops),
        ] {
            if let Some(v) = v {
                flag(k, format!("{node}:{v}"));
            }
        }
    }
    a
}

/// A note when the static binary the agents run (`exe --version`) is not this isobench's
/// version.
fn version_note(exe: &std::path::Path) -> Option<String> {
    let out = std::process::Command::new(exe)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let theirs = String::from_utf8_lossy(&out.stdout);
    let theirs = theirs.split_whitespace().nth(1).unwrap_or("?");
    let ours = env!("CARGO_PKG_VERSION");
    (theirs != ours).then(|| {
        format!(
            "the agents run isobench {theirs} (the static binary {} in the image), not this \
             isobench {ours}; rebuild it with `scripts/build-static`",
            exe.display()
        )
    })
}

/// The children of process `pid` (from `/proc/<pid>/task/<pid>/children`).
fn children(pid: i32) -> Vec<i32> {
    let children = procfs::process::Process::new(pid)
        .and_then(|p| p.task_main_thread()?.children())
        .unwrap_or_default();
    children
        .into_iter()
        .filter_map(|c| i32::try_from(c).ok())
        .collect()
}

impl Platform for OciPlatform {
    fn kind(&self) -> PlatformKind {
        KIND
    }

    fn describe(&self) -> String {
        format!(
            "oci: {}, init {}, image {}; {}",
            self.engine.describe(),
            self.init,
            self.image
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
                .unwrap_or_else(|| "not built yet".into()),
            self.fs.describe()
        )
    }

    fn capabilities(&self) -> Capabilities {
        CAPS
    }

    fn notes(&self) -> Vec<String> {
        self.note.iter().cloned().collect()
    }

    fn host(&self) -> &HostInfo {
        &self.host
    }

    /// Every tenant's image is in the engine's store: all missing ones in one error.
    fn preflight(&mut self, specs: &[TenantSpec]) -> Result<()> {
        crate::tenant::preflight_images(specs, KIND, |t, r| self.user_image(t, r))
    }

    fn create_tenant(&mut self, spec: &TenantSpec) -> Result<Box<dyn Tenant>> {
        // ---- Checks: nothing is created before all of them pass. ----
        let Checked {
            limits,
            mut notes,
            parent,
            device,
        } = self.check(spec)?;
        let (image, exe, found) = match &spec.image {
            Some(r) => {
                let found = self.user_image(&spec.name, r)?;
                notes.extend(found.notes());
                (r.clone(), INJECTED_EXE, Some(found))
            }
            None => (self.image()?, image::IMAGE_EXE, None),
        };
        let object = self.run.id().object_name(&spec.name);
        let workdir = parent.join(&object);
        let mut args = vec!["run".to_string()];
        args.extend(self.run_args(&object, spec, &limits, &workdir, device.as_ref())?);
        // The container's own process: an init (reaping orphans) over a sleeper.
        let sleeper: &[&str] = if found.is_some() {
            &[INJECTED_BUSYBOX, "sleep", "2147483647"]
        } else {
            &["sleep", "2147483647"]
        };
        let (init_args, mut command) = self.init.wrap(self.engine.kind(), exe, sleeper);
        args.extend(init_args);
        if found.is_some() && !command.is_empty() {
            // A user's image has its own entrypoint, which would run the command as its
            // arguments.
            args.push("--entrypoint".into());
            args.push(command.remove(0));
        }
        args.push(image.clone());
        args.extend(command);
        let from = match &found {
            Some(_) => format!(" from the image {image}"),
            None => String::new(),
        };

        // ---- Creation, undone step by step on error. ----
        self.run.record_workdir_parent(&parent)?;
        fs::create_dir(&workdir)
            .with_context(|| format!("creating the workdir {}", workdir.display()))?;
        let undo = |engine: &Engine| {
            let _ = engine.remove_container(&object);
            let _ = fs::remove_dir_all(&workdir);
        };
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        if let Err(e) = self.engine.change(&refs) {
            undo(&self.engine);
            return Err(e.context(format!(
                "starting the container of tenant {}{from}",
                spec.name
            )));
        }
        let started = self.started(&object);
        let (pid, keep, cgroup) = match started {
            Ok(s) => s,
            Err(e) => {
                undo(&self.engine);
                return Err(e.context(format!(
                    "inspecting the container of tenant {}{from}",
                    spec.name
                )));
            }
        };
        let tenant_net = match &spec.network {
            Some(ns) => match self.net.attach_tenant(&object, pid, ns, &limits) {
                Ok(n) => Some(n),
                Err(e) => {
                    undo(&self.engine);
                    return Err(e);
                }
            },
            None => None,
        };
        let info = TenantInfo {
            name: spec.name.clone(),
            role: spec.role,
            platform: KIND,
            object_name: object.clone(),
            limits,
            notes,
            cgroups: cgroup.dirs(),
            netns: tenant_net.as_ref().map(|n| n.netns().to_string()),
            address: tenant_net.as_ref().map(|n| n.address()),
            host_link: tenant_net.as_ref().map(|n| n.host_link().to_string()),
            netns_link: tenant_net.as_ref().map(|n| n.netns_link().to_string()),
            workdir,
            io_device: device,
            deadline_s: spec.deadline.map(|d| d.as_secs_f64()),
            image: found,
        };
        self.names.insert(spec.name.clone());
        let container = Container {
            info,
            exe,
            keep,
            cgroup,
            run: self.run.clone(),
        };
        let runtime = tenant::Oci {
            engine: self.engine.clone(),
            container: object,
            net: Mutex::new(tenant_net),
        };
        Ok(Box::new(tenant::OciTenant::new(container, runtime)))
    }

    fn teardown(&mut self) -> Result<()> {
        // Containers go with their tenants; the bridge with the last tenant using it.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::CpuList;

    #[test]
    fn limits_become_engine_flags() {
        let l = Limits::parse("cpus=1.5,cpuset=0-1,memory=256M,pids=64,shares=512").unwrap();
        assert_eq!(
            limit_args(&l, None).unwrap().join(" "),
            "--cpus 1.5 --cpu-shares 512 --cpuset-cpus 0-1 --memory 268435456 \
             --memory-swap 268435456 --pids-limit 64"
        );
        let l = Limits {
            io_write_bps: Some(1 << 20),
            ..Limits::default()
        };
        let e = limit_args(&l, None).unwrap_err().to_string();
        assert!(e.contains("block device"), "{e}");
        let none = Limits {
            cpuset: Some(CpuList::from_cpus([1])),
            ..Limits::default()
        };
        assert_eq!(limit_args(&none, None).unwrap(), ["--cpuset-cpus", "1"]);
    }

    #[test]
    fn the_knobs_docker_has_become_its_flags() {
        let l = Limits::parse("memory=256M,swap=64M,memory_low=128M,io_weight=500").unwrap();
        refuse_unmapped(&l).unwrap();
        assert_eq!(
            limit_args(&l, None).unwrap().join(" "),
            "--memory 268435456 --memory-swap 335544320 --memory-reservation 134217728 \
             --blkio-weight 500"
        );
    }

    #[test]
    fn the_knobs_docker_lacks_are_refused_with_the_reason() {
        for (s, key, why) in [
            ("memory_min=64M", "memory_min", "no flag for memory.min"),
            ("memory_high=64M", "memory_high", "no flag for memory.high"),
            ("cpus=1,cpu_burst=10ms", "cpu_burst", "CFS burst"),
            (
                "cpuset=1,cpuset_partition=root",
                "cpuset_partition",
                "partition",
            ),
            ("io_latency=5ms", "io_latency", "io.latency"),
            ("io_weight=5", "io_weight", "10..1000"),
            ("swap=1G", "swap", "`memory`"),
        ] {
            let e = refuse_unmapped(&Limits::parse(s).unwrap()).unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.contains(&format!("`{key}`")) && msg.contains(why),
                "{s}: {msg}"
            );
        }
    }

    #[test]
    fn memory_low_and_io_weight_are_noted_and_a_discarded_weight_refused() {
        let dir = tempfile::tempdir().unwrap();
        let v2 = CgroupFs::fake_v2(dir.path()).unwrap();
        let l = Limits::parse("memory_low=64M,io_weight=100").unwrap();
        let notes = knob_notes(&v2, &l).unwrap().join("\n");
        assert!(
            notes.contains("memory.low on cgroup v2")
                && notes.contains("memory.soft_limit_in_bytes on v1")
                && notes.contains("io.weight 910"),
            "{notes}"
        );
        // v1 without CFQ: the engine would discard the weight.
        let dir = tempfile::tempdir().unwrap();
        let v1 = CgroupFs::fake_v1(dir.path()).unwrap();
        let e = knob_notes(&v1, &l).unwrap_err().to_string();
        assert!(
            e.contains("no blkio.weight") && e.contains("discards"),
            "{e}"
        );
        std::fs::write(dir.path().join("blkio/blkio.weight"), "500\n").unwrap();
        knob_notes(&v1, &l).unwrap();
    }
}
