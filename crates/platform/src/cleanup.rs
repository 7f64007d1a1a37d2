//! Removing what runs left behind: `isobench cleanup`, the sweep of dead runs at the start
//! of every run, and the end of a run.
//!
//! Objects are found by name, not from memory, so this works after a SIGKILL: cgroups named
//! `isobench-<run>-*` in every cgroup mount, network namespaces of that name, links named
//! `ib<tag>...`, processes with `ISOBENCH_RUN=<run>` in their environment, workdirs
//! `isobench-<run>-*` and the state directory. A run is dead when its state directory is
//! missing or its controller (pid and start time) is gone.

pub use crate::leftovers::{CleanupReport, Failure, ObjectKind, Removed, RunFilter};

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cgroup::placement;
use crate::cgroup::{self, CgroupFs, CgroupTree, Controller, Hierarchy, RealTree, TenantCgroup};
use crate::cmd;
use crate::procs;
use crate::run::{self, RunId, LINK_PREFIX, PREFIX};

/// Which runs a sweep removes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scope<'a> {
    /// Runs whose controller is gone, and objects of unknown runs.
    Dead,
    /// Every run, live ones included.
    All,
    /// One run.
    Run(&'a RunId),
}

/// Removes what crashed or killed runs left behind (`all = false`), or every isobench object
/// on this host, including those of runs still going (`all = true`). Returns what was
/// removed, for `isobench cleanup` to list.
pub fn cleanup(all: bool) -> CleanupReport {
    sweep(if all { Scope::All } else { Scope::Dead })
}

/// Which runs are live. The snapshot taken when the sweep starts can miss a run that starts
/// during the sweep; since a run creates its state directory before any object, a run first
/// met through an object is looked up afresh, after the object was seen.
struct Runs {
    /// Run id -> live?
    live: BTreeMap<String, bool>,
    scope_all: bool,
    only: Option<String>,
}

impl RunFilter for Runs {
    fn selected(&mut self, run: &str) -> bool {
        Runs::selected(self, run)
    }
}

impl Runs {
    fn is_live(&mut self, run: &str) -> bool {
        if let Some(&l) = self.live.get(run) {
            return l;
        }
        let l = run::run_live(run);
        self.live.insert(run.to_string(), l);
        l
    }

    fn selected(&mut self, run: &str) -> bool {
        if let Some(only) = &self.only {
            return run == only;
        }
        self.scope_all || !self.is_live(run)
    }

    /// The run whose links carry `tag`.
    fn run_for_tag(&mut self, tag: &str) -> Option<String> {
        if let Some(id) = self.live.keys().find(|id| id.starts_with(tag)) {
            return Some(id.clone());
        }
        for root in run::state_roots() {
            let Ok(rd) = fs::read_dir(root) else { continue };
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with(tag) && RunId::parse(&name).is_ok() {
                    return Some(name);
                }
            }
        }
        None
    }
}

/// A link name `ib<6 hex><letter><digits>` -> the tag.
fn link_tag(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(LINK_PREFIX)?;
    if rest.len() < 7 || !rest.is_char_boundary(6) {
        return None;
    }
    let (tag, kind) = rest.split_at(6);
    let hex = tag
        .bytes()
        .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c));
    let mut k = kind.chars();
    let letter = k.next().is_some_and(|c| c.is_ascii_lowercase());
    let digits = k.all(|c| c.is_ascii_digit());
    (hex && letter && digits).then_some(tag)
}

/// The v1 hierarchies (as one view, each rooted at cgroup path `parent`) and the v2
/// directories (at a mount's root, `parent` empty) holding a cgroup `name`.
fn cgroup_leftovers(
    mounts: &[cgroup::CgroupMount],
    parent: &Path,
    name: &str,
) -> (Option<CgroupFs>, Vec<PathBuf>) {
    let mut v1 = Vec::new();
    let mut v2 = Vec::new();
    for m in mounts {
        if m.fstype != "cgroup" && !parent.as_os_str().is_empty() {
            continue;
        }
        let root = m.path.join(parent);
        let dir = root.join(name);
        if !dir.is_dir() {
            continue;
        }
        if m.fstype == "cgroup" {
            let controllers = Controller::ALL
                .into_iter()
                .filter(|c| m.controllers.iter().any(|n| n == c.v1_name()))
                .collect();
            v1.push(Hierarchy { root, controllers });
        } else {
            v2.push(dir);
        }
    }
    let v1 = (!v1.is_empty()).then(|| CgroupFs::v1(v1, std::sync::Arc::new(RealTree)));
    (v1, v2)
}

/// Kills the tasks of a leftover v2 cgroup directory and removes it.
fn remove_v2_leftover(dir: &Path) -> anyhow::Result<Vec<i32>> {
    let tree = RealTree;
    let procs_of = |d: &Path| -> Vec<i32> {
        fs::read_to_string(d.join("cgroup.procs"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    };
    let before = procs_of(dir);
    // Lift the io throttle so killed tasks waiting on throttled I/O can exit.
    for line in fs::read_to_string(dir.join("io.max"))
        .unwrap_or_default()
        .lines()
    {
        if let Some(dev) = line.split_whitespace().next() {
            let _ = tree.write(
                &dir.join("io.max"),
                &format!("{dev} rbps=max wbps=max riops=max wiops=max"),
            );
        }
    }
    if dir.join("cgroup.kill").exists() {
        let _ = tree.write(&dir.join("cgroup.kill"), "1");
    } else {
        let _ = tree.write(&dir.join("cgroup.freeze"), "1");
        for p in &before {
            procs::kill9(*p);
        }
        let _ = tree.write(&dir.join("cgroup.freeze"), "0");
    }
    let end = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let left = procs_of(dir);
        if left.is_empty() {
            break;
        }
        if std::time::Instant::now() > end {
            anyhow::bail!("{} processes still in {}", left.len(), dir.display());
        }
        for p in left {
            procs::kill9(p);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    cgroup::remove_tree(&tree, dir, Duration::from_secs(5))?;
    Ok(before)
}

/// The cgroups below a v2 mount's root that can hold tenants: each run's systemd scope
/// (`isobench.slice/isobench-<run>.scope`, with its run), the cgroups the selected runs
/// recorded, and this process's own cgroup.
fn v2_parents(
    mounts: &[cgroup::CgroupMount],
    state_dirs: &BTreeMap<String, Vec<PathBuf>>,
    runs: &mut Runs,
) -> (Vec<(PathBuf, String)>, BTreeSet<PathBuf>) {
    let mut scopes = Vec::new();
    let mut parents = BTreeSet::new();
    for m in mounts.iter().filter(|m| m.fstype == "cgroup2") {
        let slice = m.path.join(placement::SLICE);
        for child in RealTree.children(&slice).unwrap_or_default() {
            if let Some(run) = placement::run_of_scope(&child) {
                scopes.push((slice.join(&child), run.to_string()));
            }
        }
        if let Some(own) = placement::own_cgroup() {
            let own = m.path.join(own.strip_prefix("/").unwrap_or(&own));
            if own != m.path {
                parents.insert(own);
            }
        }
    }
    parents.extend(recorded_paths(state_dirs, runs, run::CGROUP_PARENTS));
    (scopes, parents)
}

/// The paths the selected runs recorded, a line each, in their state directories' file
/// `name`.
fn recorded_paths(
    state_dirs: &BTreeMap<String, Vec<PathBuf>>,
    runs: &mut Runs,
    name: &str,
) -> BTreeSet<PathBuf> {
    state_dirs
        .iter()
        .filter(|(run, _)| runs.selected(run))
        .flat_map(|(_, dirs)| dirs)
        .flat_map(|dir| {
            fs::read_to_string(dir.join(name))
                .unwrap_or_default()
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(PathBuf::from)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Removes the tenants of selected runs found in [`v2_parents`], then stops the scopes of
/// selected runs (systemd removes a scope's cgroup itself; isobench never removes it).
fn sweep_v2_parents(
    mounts: &[cgroup::CgroupMount],
    state_dirs: &BTreeMap<String, Vec<PathBuf>>,
    runs: &mut Runs,
    report: &mut CleanupReport,
) {
    let (scopes, mut parents) = v2_parents(mounts, state_dirs, runs);
    parents.extend(scopes.iter().map(|(d, _)| d.clone()));
    for parent in &parents {
        for child in RealTree.children(parent).unwrap_or_default() {
            if !child.starts_with(PREFIX) {
                continue;
            }
            let Some(run) = selected_run_of(runs, &child) else {
                continue;
            };
            let dir = parent.join(&child);
            match remove_v2_leftover(&dir) {
                Ok(killed) => {
                    for p in killed {
                        report.ok(ObjectKind::Process, format!("pid {p}"), &run);
                    }
                    report.ok(ObjectKind::Cgroup, dir.display().to_string(), &run);
                }
                Err(e) => report.fail(ObjectKind::Cgroup, dir.display().to_string(), &run, e),
            }
        }
    }
    for (dir, run) in scopes {
        if !runs.selected(&run) || !dir.exists() {
            continue;
        }
        let unit = placement::scope_unit(&run);
        // Emptied of its holder, the scope may already be on its way out.
        let stopped = cmd::run_ok("systemctl", &["stop", &unit]);
        let name = format!("{} (systemd scope {unit})", dir.display());
        match stopped {
            Ok(_) => report.ok(ObjectKind::Cgroup, name, &run),
            Err(_) if !dir.exists() => report.ok(ObjectKind::Cgroup, name, &run),
            Err(e) => report.fail(ObjectKind::Cgroup, name, &run, e),
        }
    }
}

/// Removes the objects of the runs `scope` selects.
pub(crate) fn sweep(scope: Scope<'_>) -> CleanupReport {
    let mut report = CleanupReport::default();
    let (live, state_dirs) = known_runs();
    let mut runs = Runs {
        live,
        scope_all: matches!(scope, Scope::All),
        only: match scope {
            Scope::Run(id) => Some(id.to_string()),
            _ => None,
        },
    };
    // 0. What each platform owns (containers, guests): before the cgroups and namespaces
    // they sit in.
    for entry in crate::PLATFORMS {
        (entry.sweep)(&mut runs, &mut report);
    }
    // 1. cgroups: freeze and kill their tasks, remove.
    let mounts = cgroup::host_mounts().unwrap_or_default();
    sweep_named_cgroups(&mounts, &state_dirs, &mut runs, &mut report);
    // 1b. cgroup v2 tenants below the mount's root: in the runs' systemd scopes, in the
    // cgroups runs recorded as their tenants' parent, and in this process's own cgroup.
    sweep_v2_parents(&mounts, &state_dirs, &mut runs, &mut report);
    // 1c. Host settings runs changed and could not put back (io.cost).
    crate::iocost::sweep(&mut runs, &mut report);
    // 2. Processes tagged with a selected run (host-platform tenants, strays).
    sweep_tagged_processes(&mut runs, &mut report);
    // 3. Links: veth host ends first, bridges last.
    sweep_links(&mut runs, &mut report);
    // 4. Network namespaces: kill what runs inside, delete.
    sweep_netns(&mut runs, &mut report);
    // 5. Workdirs in the default parent and the parents the runs recorded.
    sweep_workdirs(&state_dirs, &mut runs, &mut report);
    // 6. State directories.
    sweep_state_dirs(state_dirs, &mut runs, &mut report);
    report
}

/// The runs with a state directory in any state root: whether each is live (a run is live
/// if any root says so), and its state directories. Removes the half-made state
/// directories of runs that died making them.
fn known_runs() -> (BTreeMap<String, bool>, BTreeMap<String, Vec<PathBuf>>) {
    let mut live: BTreeMap<String, bool> = BTreeMap::new();
    let mut state_dirs: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for root in run::state_roots() {
        let Ok(rd) = fs::read_dir(&root) else {
            continue;
        };
        for e in rd.filter_map(|e| e.ok()) {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Ok(id) = RunId::parse(&name) {
                let is_live = run::state_dir_live(&e.path());
                *live.entry(id.to_string()).or_insert(false) |= is_live;
                state_dirs.entry(id.to_string()).or_default().push(e.path());
            } else if let Some(rest) = name.strip_prefix(".new-") {
                // A run that died while creating its state directory.
                let pid = rest.rsplit('-').next().and_then(|p| p.parse::<i32>().ok());
                if pid.is_some_and(|p| !procs::alive(p)) {
                    let _ = fs::remove_dir_all(e.path());
                }
            }
        }
    }
    (live, state_dirs)
}

/// The run an object name carries, if the run is selected; `None` for a name that carries
/// no run id (not one of ours: never touched) or a run left alone.
fn selected_run_of(runs: &mut Runs, name: &str) -> Option<String> {
    let run = RunId::from_object_name(name)?.to_string();
    runs.selected(&run).then_some(run)
}

/// Removes the cgroups named after selected runs: on v1 below each hierarchy's root and
/// below the cgroup paths runs recorded as their tenants' parent, on v2 below the root.
fn sweep_named_cgroups(
    mounts: &[cgroup::CgroupMount],
    state_dirs: &BTreeMap<String, Vec<PathBuf>>,
    runs: &mut Runs,
    report: &mut CleanupReport,
) {
    let mut v1_parents: BTreeSet<PathBuf> = BTreeSet::from([PathBuf::new()]);
    v1_parents.extend(
        recorded_paths(state_dirs, runs, run::CGROUP_V1_PARENTS)
            .into_iter()
            .filter_map(|p| p.strip_prefix("/").ok().map(PathBuf::from))
            .filter(|p| {
                !p.as_os_str().is_empty()
                    && p.components()
                        .all(|c| matches!(c, std::path::Component::Normal(_)))
            }),
    );
    let mut names: BTreeSet<(PathBuf, String)> = BTreeSet::new();
    for m in mounts {
        for parent in &v1_parents {
            if m.fstype != "cgroup" && !parent.as_os_str().is_empty() {
                continue;
            }
            if let Ok(children) = RealTree.children(&m.path.join(parent)) {
                names.extend(
                    children
                        .into_iter()
                        .filter(|c| c.starts_with(PREFIX))
                        .map(|c| (parent.clone(), c)),
                );
            }
        }
    }
    for (parent, name) in &names {
        let Some(run) = selected_run_of(runs, name) else {
            continue;
        };
        let (v1, v2dirs) = cgroup_leftovers(mounts, parent, name);
        let mut results = Vec::new();
        if let Some(view) = v1 {
            let cg = TenantCgroup::open(&view, name);
            results.push(
                cg.kill_all(Duration::from_secs(5))
                    .and_then(|k| cg.remove(Duration::from_secs(5)).map(|_| (k, cg.dirs()))),
            );
        }
        for dir in v2dirs {
            results.push(remove_v2_leftover(&dir).map(|k| (k, vec![dir])));
        }
        for result in results {
            match result {
                Ok((killed, dirs)) => {
                    for p in killed {
                        report.ok(ObjectKind::Process, format!("pid {p}"), &run);
                    }
                    for d in dirs {
                        report.ok(ObjectKind::Cgroup, d.display().to_string(), &run);
                    }
                }
                Err(e) => report.fail(ObjectKind::Cgroup, name.clone(), &run, e),
            }
        }
    }
}

/// Kills the processes tagged with a selected run (host-platform tenants, strays).
fn sweep_tagged_processes(runs: &mut Runs, report: &mut CleanupReport) {
    let tagged: Vec<(i32, String)> = procs::tagged(procs::ENV_RUN)
        .into_iter()
        .filter(|(_, run)| runs.selected(run))
        .collect();
    let mut signalled = Vec::new();
    for (pid, run) in &tagged {
        if procs::kill9(*pid) {
            signalled.push(*pid);
            report.ok(ObjectKind::Process, format!("pid {pid}"), run);
        }
    }
    let left = procs::wait_gone(&signalled, Duration::from_secs(5));
    for pid in left {
        report.fail(
            ObjectKind::Process,
            format!("pid {pid}"),
            "?",
            "still alive after SIGKILL",
        );
    }
}

/// Deletes the links of selected runs: veth host ends first (deleting a pair is
/// synchronous, a deleted namespace takes its links down later), bridges last.
fn sweep_links(runs: &mut Runs, report: &mut CleanupReport) {
    let Ok(rd) = fs::read_dir("/sys/class/net") else {
        return;
    };
    let mut links: Vec<(String, String)> = Vec::new();
    for e in rd.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(tag) = link_tag(&name) else { continue };
        let alias = fs::read_to_string(e.path().join("ifalias")).unwrap_or_default();
        let run = RunId::from_object_name(alias.trim())
            .map(|r| r.to_string())
            .or_else(|| runs.run_for_tag(tag))
            .unwrap_or_else(|| format!("?{tag}"));
        if runs.selected(&run) {
            links.push((name, run));
        }
    }
    // Bridges (`b`) after the veths attached to them.
    links.sort_by_key(|(n, _)| (n.as_bytes().get(8) == Some(&b'b'), n.clone()));
    for (name, run) in links {
        if !Path::new("/sys/class/net").join(&name).exists() {
            // Went away with its peer.
            report.ok(ObjectKind::Link, name, &run);
            continue;
        }
        match cmd::ip(&["link", "del", &name]) {
            Ok(_) => report.ok(ObjectKind::Link, name, &run),
            Err(e) if !Path::new("/sys/class/net").join(&name).exists() => {
                let _ = e;
                report.ok(ObjectKind::Link, name, &run)
            }
            Err(e) => report.fail(ObjectKind::Link, name, &run, e),
        }
    }
}

/// Deletes the network namespaces of selected runs, killing what runs inside.
fn sweep_netns(runs: &mut Runs, report: &mut CleanupReport) {
    let Ok(rd) = fs::read_dir("/run/netns") else {
        return;
    };
    let mut ns: Vec<String> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(PREFIX))
        .collect();
    ns.sort();
    for name in ns {
        let Some(run) = selected_run_of(runs, &name) else {
            continue;
        };
        match crate::net::delete_netns(&name) {
            Ok(killed) => {
                for p in killed {
                    report.ok(ObjectKind::Process, format!("pid {p}"), &run);
                }
                report.ok(ObjectKind::Netns, name, &run);
            }
            Err(e) => report.fail(ObjectKind::Netns, name, &run, e),
        }
    }
}

/// Removes the workdirs of selected runs in the default parent and the parents the runs
/// recorded.
fn sweep_workdirs(
    state_dirs: &BTreeMap<String, Vec<PathBuf>>,
    runs: &mut Runs,
    report: &mut CleanupReport,
) {
    let mut parents = recorded_paths(state_dirs, runs, run::WORKDIRS);
    parents.insert(run::default_workdir_root());
    for parent in parents {
        let Ok(rd) = fs::read_dir(&parent) else {
            continue;
        };
        let mut entries: Vec<PathBuf> = rd
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(PREFIX))
            .map(|e| e.path())
            .collect();
        entries.sort();
        for path in entries {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let Some(run) = selected_run_of(runs, &name) else {
                continue;
            };
            match fs::remove_dir_all(&path) {
                Ok(()) => report.ok(ObjectKind::Workdir, path.display().to_string(), &run),
                Err(e) => report.fail(ObjectKind::Workdir, path.display().to_string(), &run, e),
            }
        }
    }
}

/// Removes the state directories of selected runs.
fn sweep_state_dirs(
    state_dirs: BTreeMap<String, Vec<PathBuf>>,
    runs: &mut Runs,
    report: &mut CleanupReport,
) {
    for (run, dir) in state_dirs
        .into_iter()
        .flat_map(|(run, dirs)| dirs.into_iter().map(move |d| (run.clone(), d)))
    {
        if !runs.selected(&run) {
            continue;
        }
        match fs::remove_dir_all(&dir) {
            Ok(()) => report.ok(ObjectKind::StateDir, dir.display().to_string(), &run),
            Err(e) => report.fail(ObjectKind::StateDir, dir.display().to_string(), &run, e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_tags() {
        assert_eq!(link_tag("ib1a2b3cb"), Some("1a2b3c"));
        assert_eq!(link_tag("ib1a2b3ch12"), Some("1a2b3c"));
        assert_eq!(link_tag("ib1a2b3c"), None);
        assert_eq!(link_tag("ibx a2b3ch1"), None);
        assert_eq!(link_tag("ib1A2b3ch1"), None);
        assert_eq!(link_tag("eth0"), None);
        assert_eq!(link_tag("ib1a2b3ch1x"), None);
    }
}
