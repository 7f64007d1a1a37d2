//! Where a run's tenant cgroups go, and why.
//!
//! On v1 every tenant gets a directory under each hierarchy's root, or, when
//! `ISOBENCH_CGROUP_PARENT` names a cgroup path (`/shared`, as `/proc/self/cgroup` writes
//! it), under that cgroup in every hierarchy ([`v1_given`]): so a run's tenants can share a
//! parent's limits, as tenants share a machine. On v2 the answer depends on who owns the
//! tree:
//!
//! - **A subtree given to isobench**: the directory named by `ISOBENCH_CGROUP_PARENT`, or,
//!   under systemd, isobench's own cgroup when its unit has `Delegate=yes` (systemd marks a
//!   delegated cgroup with the `trusted.delegate` extended attribute).
//! - **Under systemd otherwise**: systemd owns every cgroup it made, so isobench never writes
//!   into them. Each run asks systemd for a transient scope with `Delegate=yes`
//!   (`isobench.slice/isobench-<run>.scope`, through `systemd-run --scope`) held by a small
//!   process, and creates its tenants inside it.
//! - **A plain cgroup2 mount without systemd**: the mount's root when isobench runs in it (the
//!   root cgroup is exempt from the "no internal processes" rule), else isobench's own cgroup.
//!
//! v2 allows controllers in a cgroup's `cgroup.subtree_control` only while the cgroup holds no
//! processes itself (the root excepted). So the processes already in a given or own cgroup
//! (isobench among them) move into a leaf, `isobench-supervisor`, and the scope's holder into
//! the leaf `isobench-<run>`, before the controllers are enabled along the path.
//!
//! [`decide`] is pure (tested on every combination of facts); [`Placement::establish`] makes
//! the choice real for one run and returns a [`Delegation`] that the platform keeps until the
//! run ends.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

use super::{CgroupFs, CgroupTree, Controller};
use crate::procs;
use crate::run::RunContext;

/// The environment variable that names a delegated cgroup for tenants.
pub const PARENT_ENV: &str = "ISOBENCH_CGROUP_PARENT";

/// The slice under which runs' transient scopes go.
pub const SLICE: &str = "isobench.slice";

/// The leaf into which the processes of a given cgroup move, so that its children can have
/// controllers. It carries no run id, so no cleanup sweep ever removes it.
pub const SUPERVISOR_LEAF: &str = "isobench-supervisor";

/// How long systemd may take to start a transient scope (a slow guest takes seconds).
const SCOPE_START_TIMEOUT: Duration = Duration::from_secs(30);

/// The facts the choice depends on, read from the host by [`V2Facts::detect`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct V2Facts {
    /// The cgroup2 mount point.
    pub mount: PathBuf,
    /// Whether systemd is the init (`/run/systemd/system` exists, as `sd_booted()` checks).
    pub systemd: bool,
    /// isobench's own cgroup, relative to the mount (`/user.slice/...`), from
    /// `/proc/self/cgroup`.
    pub own: Option<PathBuf>,
    /// Whether systemd marked isobench's own cgroup as delegated (`trusted.delegate` or
    /// `user.delegate` set to 1).
    pub own_delegated: bool,
    /// A cgroup named by the user (`ISOBENCH_CGROUP_PARENT`), absolute.
    pub explicit: Option<PathBuf>,
}

impl V2Facts {
    /// Reads the facts of this host for the cgroup2 mount at `mount`.
    pub fn detect(mount: &Path) -> V2Facts {
        // A second isobench started in a cgroup that a first one was given sits in that
        // cgroup's supervisor leaf by now: the given cgroup is still its own.
        let own = own_cgroup().map(|o| given_of(&o));
        let own_delegated = own
            .as_ref()
            .is_some_and(|o| is_delegated(&join_cgroup(mount, o)));
        V2Facts {
            mount: mount.to_path_buf(),
            systemd: Path::new("/run/systemd/system").is_dir(),
            own,
            own_delegated,
            explicit: std::env::var_os(PARENT_ENV)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
        }
    }
}

/// Why a given cgroup holds the tenants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Given {
    /// Named by `ISOBENCH_CGROUP_PARENT`.
    Named,
    /// isobench's own cgroup, delegated to its unit by systemd.
    Delegated,
    /// isobench's own cgroup on a mount no init manages.
    Own,
}

/// Where a run's tenants go on cgroup v2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// The root of a cgroup2 mount that no init manages.
    MountRoot {
        /// The mount point.
        mount: PathBuf,
    },
    /// A cgroup given to isobench.
    Given {
        /// The cgroup directory.
        dir: PathBuf,
        /// Why this one.
        why: Given,
    },
    /// A transient systemd scope with `Delegate=yes`, one per run, under [`SLICE`].
    SystemdScope {
        /// The mount point.
        mount: PathBuf,
    },
}

/// Chooses where tenants go from the facts (see the module documentation).
pub fn decide(f: &V2Facts) -> Result<Placement> {
    if let Some(dir) = &f.explicit {
        if !dir.is_absolute() || !dir.starts_with(&f.mount) {
            bail!(
                "{PARENT_ENV}={} is not a cgroup directory under the cgroup2 mount {}; name \
                 one such as {}/my.slice/my-delegated.scope",
                dir.display(),
                f.mount.display(),
                f.mount.display()
            );
        }
        return Ok(Placement::Given {
            dir: dir.clone(),
            why: Given::Named,
        });
    }
    let own_dir = f
        .own
        .as_ref()
        .filter(|o| o.as_os_str() != "/")
        .map(|o| join_cgroup(&f.mount, o));
    if f.systemd {
        return Ok(match own_dir {
            Some(dir) if f.own_delegated => Placement::Given {
                dir,
                why: Given::Delegated,
            },
            _ => Placement::SystemdScope {
                mount: f.mount.clone(),
            },
        });
    }
    Ok(match own_dir {
        Some(dir) => Placement::Given {
            dir,
            why: Given::Own,
        },
        None => Placement::MountRoot {
            mount: f.mount.clone(),
        },
    })
}

impl Placement {
    /// One sentence: where the tenants of a run go and why (for `doctor` and the run's
    /// record); `run` names the scope when there is one.
    pub fn describe(&self, run: Option<&str>) -> String {
        match self {
            Placement::MountRoot { mount } => format!(
                "tenants go under the root of the cgroup2 mount {}: no init manages the tree \
                 and isobench runs in its root cgroup",
                mount.display()
            ),
            Placement::Given { dir, why } => {
                let reason = match why {
                    Given::Named => format!("{PARENT_ENV} names it"),
                    Given::Delegated => {
                        "it is isobench's own cgroup, which systemd delegated (Delegate=yes)".into()
                    }
                    Given::Own => {
                        "it is isobench's own cgroup and no init manages the tree".to_string()
                    }
                };
                format!(
                    "tenants go under {} because {reason}; the processes already there move to \
                     its leaf {SUPERVISOR_LEAF}",
                    dir.display()
                )
            }
            Placement::SystemdScope { mount } => format!(
                "systemd owns the cgroup tree, so each run gets a transient scope with \
                 Delegate=yes, {}, and its tenants go inside it; isobench writes no cgroup \
                 that systemd made",
                scope_dir(mount, run.unwrap_or("<run>")).display()
            ),
        }
    }

    /// Makes the placement real for `run`: starts the scope, moves processes into leaves and
    /// enables isobench's controllers in the parent. Returns the parent of the tenants, to
    /// be kept until the run ends.
    pub fn establish(&self, tree: Arc<dyn CgroupTree>, run: &RunContext) -> Result<Delegation> {
        let (dir, holder) = match self {
            Placement::MountRoot { mount } => (mount.clone(), None),
            Placement::Given { dir, .. } => {
                if !tree.exists(&dir.join("cgroup.procs")) {
                    bail!(
                        "{} is not a cgroup (it has no cgroup.procs); name an existing, \
                         delegated cgroup in {PARENT_ENV}",
                        dir.display()
                    );
                }
                move_procs_to_leaf(tree.as_ref(), dir, &dir.join(SUPERVISOR_LEAF))?;
                (dir.clone(), None)
            }
            Placement::SystemdScope { mount } => {
                let holder = start_scope(run)?;
                let dir = scope_dir(mount, run.id().as_str());
                let leaf = dir.join(run.id().prefix());
                let holder = Holder {
                    child: holder,
                    leaf: leaf.clone(),
                    unit: scope_unit(run.id().as_str()),
                    tree: tree.clone(),
                };
                move_procs_to_leaf(tree.as_ref(), &dir, &leaf)?;
                (dir, Some(holder))
            }
        };
        run.record_cgroup_parent(&dir)?;
        Ok(Delegation {
            dir,
            description: self.describe(Some(run.id().as_str())),
            _holder: holder,
        })
    }
}

/// The cgroup layout a run's tenants use: `fs` as it is on v1 or on a fake tree, else (v2)
/// the place [`decide`] chooses for this host, made real for `run`. Without systemd the
/// controllers are enabled along the path down to it first.
pub fn for_run(fs: CgroupFs, run: &RunContext) -> Result<(CgroupFs, Option<Delegation>)> {
    if !fs.is_real() {
        return Ok((fs, None));
    }
    if fs.version() == super::CgroupVersion::V1 {
        let Some(parent) = std::env::var_os(PARENT_ENV).filter(|v| !v.is_empty()) else {
            return Ok((fs, None));
        };
        let parent = PathBuf::from(parent);
        let given = v1_given(&fs, &parent)?;
        run.record_v1_cgroup_parent(&parent)?;
        return Ok((given, None));
    }
    let mount = fs.hierarchies()[0].root.clone();
    let facts = V2Facts::detect(&mount);
    let placement = decide(&facts)?;
    if !facts.systemd {
        if let Placement::Given { dir, .. } = &placement {
            enable_along(
                fs.tree().as_ref(),
                &mount,
                dir,
                &fs.hierarchies()[0].controllers,
            )?;
        }
    }
    let delegation = placement
        .establish(fs.tree().clone(), run)
        .with_context(|| {
            format!(
                "placing the run's tenants: {}",
                placement.describe(Some(run.id().as_str()))
            )
        })?;
    let fs = delegation.cgroup_fs(fs.tree().clone())?;
    Ok((fs, Some(delegation)))
}

/// The v1 layout whose tenants go under the cgroup path `parent` (`/shared`, relative to
/// each hierarchy's root) in every hierarchy of `fs`. The cgroup must exist in each, and in
/// the cpuset hierarchy have both lists set (a v1 cpuset admits no task otherwise): isobench
/// does not make or change a parent the user named.
pub fn v1_given(fs: &CgroupFs, parent: &Path) -> Result<CgroupFs> {
    let rel = parent
        .strip_prefix("/")
        .ok()
        .filter(|r| {
            !r.as_os_str().is_empty()
                && r.components()
                    .all(|c| matches!(c, std::path::Component::Normal(_)))
        })
        .ok_or_else(|| {
            anyhow!(
                "{PARENT_ENV}={}: on cgroup v1 it is a cgroup path as /proc/self/cgroup writes                  it, the same in every hierarchy, such as /shared (not a directory under                  /sys/fs/cgroup, and without `..`)",
                parent.display()
            )
        })?;
    let tree = fs.tree();
    let mut hierarchies = Vec::new();
    let mut missing = Vec::new();
    for h in fs.hierarchies() {
        let dir = h.root.join(rel);
        if !tree.exists(&dir.join("cgroup.procs")) {
            missing.push(dir.display().to_string());
        }
        hierarchies.push(super::Hierarchy {
            root: dir,
            controllers: h.controllers.clone(),
        });
    }
    if !missing.is_empty() {
        bail!(
            "{PARENT_ENV}={}: no such cgroup in {}; on cgroup v1 the tenants' parent must              exist in every hierarchy isobench uses: `mkdir -p {}` (and, in the cpuset              hierarchy, copy cpuset.cpus and cpuset.mems from its parent)",
            parent.display(),
            missing.join(", "),
            missing.join(" ")
        );
    }
    let given = CgroupFs::v1(hierarchies, tree.clone());
    if let Some(h) = given.hierarchy_of(Controller::Cpuset) {
        for file in ["cpuset.cpus", "cpuset.mems"] {
            let path = h.root.join(file);
            let value = tree
                .read(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            if value.trim().is_empty() {
                bail!(
                    "{PARENT_ENV}={}: {} is empty, so the cpuset cgroup admits no task; set                      it, e.g. `cat {} > {}`",
                    parent.display(),
                    path.display(),
                    h.root
                        .parent()
                        .unwrap_or(&h.root)
                        .join(file)
                        .display(),
                    path.display()
                );
            }
        }
    }
    Ok(given)
}

/// The parent of a run's tenants on cgroup v2, held for the run: dropping it lets the scope
/// (if any) go once its tenants are gone.
#[derive(Debug)]
pub struct Delegation {
    dir: PathBuf,
    description: String,
    /// Kept for its drop, which lets the scope go.
    _holder: Option<Holder>,
}

impl Delegation {
    /// The cgroup under which tenants are created.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where and why, in one sentence.
    pub fn describe(&self) -> &str {
        &self.description
    }

    /// The cgroup layout whose tenants go under [`Delegation::dir`].
    pub fn cgroup_fs(&self, tree: Arc<dyn CgroupTree>) -> Result<CgroupFs> {
        CgroupFs::v2(&self.dir, tree)
    }
}

/// The process that keeps a transient scope alive, in its own leaf.
#[derive(Debug)]
struct Holder {
    child: Child,
    leaf: PathBuf,
    unit: String,
    tree: Arc<dyn CgroupTree>,
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The leaf is ours; the scope is systemd's, which removes it once it is empty.
        if let Err(e) = super::remove_tree(self.tree.as_ref(), &self.leaf, Duration::from_secs(5)) {
            tracing::warn!(
                "the holder leaf of {} was not removed: {e:#}; `isobench cleanup` removes it",
                self.unit
            );
        }
    }
}

/// `isobench-<run>.scope`: the transient unit of a run.
pub fn scope_unit(run: &str) -> String {
    format!("{}{run}.scope", crate::run::PREFIX)
}

/// The cgroup of a run's scope under the mount.
pub fn scope_dir(mount: &Path, run: &str) -> PathBuf {
    mount.join(SLICE).join(scope_unit(run))
}

/// The run id of a scope's directory name (`isobench-<run>.scope`).
pub fn run_of_scope(name: &str) -> Option<crate::run::RunId> {
    let stem = name.strip_suffix(".scope")?;
    let id = stem.strip_prefix(crate::run::PREFIX)?;
    crate::run::RunId::parse(id).ok()
}

/// Starts `systemd-run --scope -p Delegate=yes` holding `sleep infinity`, and waits until
/// its process is in the scope.
fn start_scope(run: &RunContext) -> Result<Child> {
    let unit = scope_unit(run.id().as_str());
    let mut cmd = Command::new("systemd-run");
    cmd.args([
        "--scope",
        "--quiet",
        "--collect",
        &format!("--unit={unit}"),
        &format!("--slice={SLICE}"),
        "--property=Delegate=yes",
        "--description=isobench run tenants",
        "--",
        "sleep",
        "infinity",
    ])
    .env(procs::ENV_RUN, run.id().as_str())
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| {
        anyhow!(e).context(
            "starting `systemd-run --scope` (systemd's own tool, needed to get a delegated \
             cgroup from systemd); install systemd, or name a delegated cgroup in \
             ISOBENCH_CGROUP_PARENT",
        )
    })?;
    let pid = child.id() as i32;
    let want = format!("/{SLICE}/{unit}");
    let end = Instant::now() + SCOPE_START_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            bail!(
                "`systemd-run --scope --unit={unit} -p Delegate=yes` ended ({status}) before the \
                 scope held it: {}",
                err.trim()
            );
        }
        let cg = procfs::process::Process::new(pid)
            .and_then(|p| p.cgroups())
            .map(|c| c.0)
            .unwrap_or_default();
        if v2_path(&cg) == Some(want.as_str()) {
            // Its stderr is not read again: nothing more is written there.
            child.stderr.take();
            return Ok(child);
        }
        if Instant::now() >= end {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "systemd did not start the scope {unit} within {} s (the process is in {})",
                SCOPE_START_TIMEOUT.as_secs(),
                cg.iter()
                    .map(|c| format!("{}:{}:{}", c.hierarchy, c.controllers.join(","), c.pathname))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Moves every process of `dir` into the leaf `leaf` (made if missing), so that `dir` can
/// enable controllers for its children. The root cgroup is exempt and left as it is.
fn move_procs_to_leaf(tree: &dyn CgroupTree, dir: &Path, leaf: &Path) -> Result<()> {
    if is_root_cgroup(tree, dir) {
        return Ok(());
    }
    let procs_file = dir.join("cgroup.procs");
    // Processes can fork while they move: read again until none is left.
    for _ in 0..100 {
        let text = tree
            .read(&procs_file)
            .with_context(|| format!("reading {}", procs_file.display()))?;
        let pids: Vec<&str> = text.split_whitespace().collect();
        if pids.is_empty() {
            return Ok(());
        }
        if !tree.exists(leaf) {
            tree.mkdir(leaf)
                .with_context(|| format!("creating the leaf cgroup {}", leaf.display()))?;
        }
        for pid in pids {
            match tree.write(&leaf.join("cgroup.procs"), pid) {
                Ok(()) => {}
                // Gone meanwhile.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(e) => {
                    return Err(anyhow!(e).context(format!(
                        "moving process {pid} from {} into its leaf {}",
                        dir.display(),
                        leaf.display()
                    )))
                }
            }
        }
        if !tree.is_real() {
            // A fake tree's cgroup.procs does not empty itself.
            return tree
                .write(&procs_file, "")
                .with_context(|| format!("emptying {}", procs_file.display()));
        }
    }
    bail!(
        "the processes of {} kept forking while they were moved into {}",
        dir.display(),
        leaf.display()
    )
}

/// Whether `dir` is the root of its hierarchy (the root has no `cgroup.type`).
fn is_root_cgroup(tree: &dyn CgroupTree, dir: &Path) -> bool {
    !tree.exists(&dir.join("cgroup.type"))
}

/// Enables `controllers` (v2 names) along the path from `mount` down to `dir`, in each
/// cgroup whose `cgroup.controllers` offers them. Only for trees no init manages.
pub(crate) fn enable_along(
    tree: &dyn CgroupTree,
    mount: &Path,
    dir: &Path,
    controllers: &[Controller],
) -> Result<()> {
    let Ok(rel) = dir.strip_prefix(mount) else {
        return Ok(());
    };
    let mut at = mount.to_path_buf();
    let mut levels = vec![at.clone()];
    for part in rel.components() {
        at.push(part);
        levels.push(at.clone());
    }
    // The parents of `dir`: `dir`'s own subtree_control is enabled when tenants are made.
    levels.pop();
    for level in levels {
        let offered = tree
            .read(&level.join("cgroup.controllers"))
            .unwrap_or_default();
        let on = tree
            .read(&level.join("cgroup.subtree_control"))
            .unwrap_or_default();
        let want: Vec<String> = controllers
            .iter()
            .filter_map(|c| c.v2_name())
            .filter(|n| offered.split_whitespace().any(|o| o == *n))
            .filter(|n| !on.split_whitespace().any(|o| o == *n))
            .map(|n| format!("+{n}"))
            .collect();
        if want.is_empty() {
            continue;
        }
        let file = level.join("cgroup.subtree_control");
        tree.write(&file, &want.join(" ")).map_err(|e| {
            let hint = if e.raw_os_error() == Some(libc::EBUSY) {
                " (that cgroup holds processes; v2 enables controllers only in cgroups without \
                 processes of their own, so move them into a leaf or name a delegated cgroup in \
                 ISOBENCH_CGROUP_PARENT)"
            } else {
                ""
            };
            anyhow!(e).context(format!(
                "writing `{}` to {}{hint}",
                want.join(" "),
                file.display()
            ))
        })?;
    }
    Ok(())
}

/// The cgroup given to isobench that `own` stands for: its parent when `own` is a
/// [`SUPERVISOR_LEAF`], into which an earlier isobench moved the given cgroup's processes.
fn given_of(own: &Path) -> PathBuf {
    match own.file_name() {
        Some(n) if n == SUPERVISOR_LEAF => own.parent().unwrap_or(own).to_path_buf(),
        _ => own.to_path_buf(),
    }
}

/// `mount` joined with a cgroup path from `/proc/self/cgroup` (`/a/b`).
fn join_cgroup(mount: &Path, rel: &Path) -> PathBuf {
    mount.join(rel.strip_prefix("/").unwrap_or(rel))
}

/// isobench's own v2 cgroup, from `/proc/self/cgroup`.
pub(crate) fn own_cgroup() -> Option<PathBuf> {
    let cgroups = procfs::process::Process::myself().ok()?.cgroups().ok()?;
    v2_path(&cgroups.0).map(PathBuf::from)
}

/// The v2 line's path (`0::path`) among a process's cgroups.
fn v2_path(cgroups: &[procfs::ProcessCGroup]) -> Option<&str> {
    cgroups
        .iter()
        .find(|c| c.hierarchy == 0 && c.controllers.is_empty())
        .map(|c| c.pathname.as_str())
}

/// Whether systemd marked `dir` as delegated.
fn is_delegated(dir: &Path) -> bool {
    ["trusted.delegate", "user.delegate"]
        .iter()
        .any(|name| xattr(dir, name).is_some_and(|v| v.trim_end_matches('\0') == "1"))
}

fn xattr(path: &Path, name: &str) -> Option<String> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let p = CString::new(path.as_os_str().as_bytes()).ok()?;
    let n = CString::new(name).ok()?;
    let mut buf = [0u8; 64];
    // SAFETY: both strings are NUL-terminated and `buf` is writable for its length.
    let len = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if len < 0 {
        return None;
    }
    Some(String::from_utf8_lossy(&buf[..len as usize]).into_owned())
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe(None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::{CgroupVersion, FakeTree};

    fn facts() -> V2Facts {
        V2Facts {
            mount: "/sys/fs/cgroup".into(),
            systemd: true,
            own: Some("/user.slice/user-0.slice/session-1.scope".into()),
            own_delegated: false,
            explicit: None,
        }
    }

    #[test]
    fn on_v1_a_named_parent_must_exist_in_every_hierarchy_with_its_cpusets_set() {
        let tmp = tempfile::tempdir().unwrap();
        let fs = CgroupFs::fake_v1(tmp.path()).unwrap();
        for bad in ["shared", "/", "/a/../b"] {
            let e = v1_given(&fs, Path::new(bad)).unwrap_err().to_string();
            assert!(
                e.contains(PARENT_ENV) && e.contains("such as /shared"),
                "{e}"
            );
        }
        let e = v1_given(&fs, Path::new("/shared")).unwrap_err().to_string();
        assert!(e.contains("memory/shared") && e.contains("mkdir -p"), "{e}");
        for h in fs.hierarchies() {
            fs.tree().mkdir(&h.root.join("shared")).unwrap();
        }
        let cpuset = fs
            .hierarchy_of(Controller::Cpuset)
            .unwrap()
            .root
            .join("shared");
        fs.tree().write(&cpuset.join("cpuset.cpus"), "").unwrap();
        let e = v1_given(&fs, Path::new("/shared")).unwrap_err().to_string();
        assert!(e.contains("cpuset.cpus is empty"), "{e}");
        fs.tree().write(&cpuset.join("cpuset.cpus"), "0-1").unwrap();
        fs.tree().write(&cpuset.join("cpuset.mems"), "0").unwrap();
        let given = v1_given(&fs, Path::new("/shared")).unwrap();
        assert_eq!(given.version(), CgroupVersion::V1);
        for (g, h) in given.hierarchies().iter().zip(fs.hierarchies()) {
            assert_eq!(g.root, h.root.join("shared"));
            assert_eq!(g.controllers, h.controllers);
        }
    }

    #[test]
    fn under_systemd_a_run_gets_its_own_delegated_scope() {
        let p = decide(&facts()).unwrap();
        assert_eq!(
            p,
            Placement::SystemdScope {
                mount: "/sys/fs/cgroup".into()
            }
        );
        let d = p.describe(Some("0badc0de"));
        assert!(
            d.contains("/sys/fs/cgroup/isobench.slice/isobench-0badc0de.scope")
                && d.contains("Delegate=yes")
                && d.contains("writes no cgroup that systemd made"),
            "{d}"
        );
    }

    #[test]
    fn a_delegated_own_cgroup_is_used_as_given() {
        let f = V2Facts {
            own: Some("/system.slice/bench.service".into()),
            own_delegated: true,
            ..facts()
        };
        assert_eq!(
            decide(&f).unwrap(),
            Placement::Given {
                dir: "/sys/fs/cgroup/system.slice/bench.service".into(),
                why: Given::Delegated
            }
        );
    }

    #[test]
    fn a_named_parent_wins_and_must_be_under_the_mount() {
        let f = V2Facts {
            explicit: Some("/sys/fs/cgroup/my.slice/x.scope".into()),
            ..facts()
        };
        assert!(matches!(
            decide(&f).unwrap(),
            Placement::Given {
                why: Given::Named,
                ..
            }
        ));
        let f = V2Facts {
            explicit: Some("my.slice".into()),
            ..facts()
        };
        let e = decide(&f).unwrap_err().to_string();
        assert!(
            e.contains("ISOBENCH_CGROUP_PARENT=my.slice") && e.contains("under"),
            "{e}"
        );
    }

    #[test]
    fn without_systemd_the_root_or_the_own_cgroup() {
        let f = V2Facts {
            systemd: false,
            own: Some("/".into()),
            ..facts()
        };
        assert_eq!(
            decide(&f).unwrap(),
            Placement::MountRoot {
                mount: "/sys/fs/cgroup".into()
            }
        );
        let f = V2Facts {
            systemd: false,
            own: Some("/bench".into()),
            ..facts()
        };
        assert_eq!(
            decide(&f).unwrap(),
            Placement::Given {
                dir: "/sys/fs/cgroup/bench".into(),
                why: Given::Own
            }
        );
    }

    #[test]
    fn processes_of_a_given_cgroup_move_into_its_leaf() {
        let dir = tempfile::tempdir().unwrap();
        let tree = FakeTree::new(CgroupVersion::V2);
        tree.populate_root(dir.path(), &["cpu", "memory", "pids"])
            .unwrap();
        let given = dir.path().join("bench");
        tree.mkdir(&given).unwrap();
        std::fs::write(given.join("cgroup.procs"), "41\n42\n").unwrap();
        let leaf = given.join(SUPERVISOR_LEAF);
        move_procs_to_leaf(&tree, &given, &leaf).unwrap();
        assert_eq!(
            std::fs::read_to_string(leaf.join("cgroup.procs")).unwrap(),
            "41\n42\n"
        );
        assert_eq!(
            std::fs::read_to_string(given.join("cgroup.procs")).unwrap(),
            ""
        );
        // The root is exempt from the rule: its processes stay.
        std::fs::remove_file(dir.path().join("cgroup.type")).unwrap();
        std::fs::write(dir.path().join("cgroup.procs"), "1\n").unwrap();
        move_procs_to_leaf(&tree, dir.path(), &dir.path().join(SUPERVISOR_LEAF)).unwrap();
        assert!(!dir.path().join(SUPERVISOR_LEAF).exists());
    }

    #[test]
    fn controllers_are_enabled_along_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let tree = FakeTree::new(CgroupVersion::V2);
        tree.populate_root(dir.path(), &["cpu", "io", "memory", "pids"])
            .unwrap();
        tree.write(&dir.path().join("cgroup.subtree_control"), "+memory")
            .unwrap();
        let a = dir.path().join("a");
        tree.mkdir(&a).unwrap();
        let b = a.join("b");
        tree.mkdir(&b).unwrap();
        enable_along(
            &tree,
            dir.path(),
            &b,
            &[Controller::Cpu, Controller::Memory, Controller::Io],
        )
        .unwrap();
        let read = |p: &Path| std::fs::read_to_string(p.join("cgroup.subtree_control")).unwrap();
        assert_eq!(read(dir.path()).trim(), "cpu io memory");
        // `a` got what the root now offers it; `b` itself is left to the tenants' creation.
        assert_eq!(read(&a).trim(), "cpu io memory");
        assert_eq!(read(&b).trim(), "");
    }

    #[test]
    fn a_second_isobench_in_a_given_cgroup_uses_that_cgroup_not_the_leaf() {
        // The bug: two isobench started in one delegated scope raced; the second, moved
        // into the first's supervisor leaf (not delegated), asked systemd for a scope of
        // its own, so its tenants were no siblings of the first's and weights between them
        // did nothing.
        assert_eq!(
            given_of(Path::new("/system.slice/x.scope/isobench-supervisor")),
            Path::new("/system.slice/x.scope")
        );
        assert_eq!(
            given_of(Path::new("/system.slice/x.scope")),
            Path::new("/system.slice/x.scope")
        );
    }

    #[test]
    fn scope_names_carry_the_run() {
        assert_eq!(scope_unit("0badc0de"), "isobench-0badc0de.scope");
        assert_eq!(
            run_of_scope("isobench-0badc0de.scope").map(|r| r.to_string()),
            Some("0badc0de".into())
        );
        assert!(run_of_scope("isobench-0badc0de-a").is_none());
        assert!(run_of_scope("user.slice").is_none());
    }
}
