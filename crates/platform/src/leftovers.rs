//! Leftovers: the objects runs leave behind as a sweep reports them (removed, or still
//! there and why), and which runs' leftovers a sweep takes ([`RunFilter`]). Below every
//! sweep (this crate's in `cleanup` and each platform's own), so that each can report
//! without knowing the others.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

/// The kind of a removed object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ObjectKind {
    /// A process (killed).
    Process,
    /// A cgroup directory.
    Cgroup,
    /// A network namespace.
    Netns,
    /// A network link (bridge or veth).
    Link,
    /// A tenant working directory.
    Workdir,
    /// A run's state directory.
    StateDir,
    /// A container.
    Container,
    /// A container image.
    Image,
    /// A virtual machine guest (its QEMU process).
    Guest,
    /// A TAP device.
    Tap,
    /// A file (a guest's disk image, a socket).
    File,
    /// A Kubernetes namespace (and the pods in it).
    Namespace,
    /// A host setting a run changed (io.cost), put back as it was.
    Setting,
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            ObjectKind::Process => "process",
            ObjectKind::Cgroup => "cgroup",
            ObjectKind::Netns => "netns",
            ObjectKind::Link => "link",
            ObjectKind::Workdir => "workdir",
            ObjectKind::StateDir => "state",
            ObjectKind::Container => "container",
            ObjectKind::Namespace => "k8s-ns",
            ObjectKind::Image => "image",
            ObjectKind::Guest => "guest",
            ObjectKind::Tap => "tap",
            ObjectKind::File => "file",
            ObjectKind::Setting => "setting",
        })
    }
}

impl ObjectKind {
    /// The kind's name for `n` objects.
    fn plural(self, n: usize) -> String {
        let one = self.to_string();
        match (n, self) {
            (1, _) => one,
            (_, ObjectKind::Process) => "processes".into(),
            (_, ObjectKind::StateDir) => "state directories".into(),
            _ => format!("{one}s"),
        }
    }
}

/// One removed object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Removed {
    /// What it was.
    pub kind: ObjectKind,
    /// Its name or path.
    pub name: String,
    /// The run it belonged to (`?<tag>` for a link whose run is unknown).
    pub run: String,
}

impl fmt::Display for Removed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:<8} {} (run {})", self.kind, self.name, self.run)
    }
}

/// An object that could not be removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// What it is.
    pub kind: ObjectKind,
    /// Its name or path.
    pub name: String,
    /// The run it belongs to.
    pub run: String,
    /// Why it could not be removed.
    pub error: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} (run {}): {}",
            self.kind, self.name, self.run, self.error
        )
    }
}

/// What a cleanup removed and what it could not.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CleanupReport {
    /// Removed objects, in the order they were removed.
    pub removed: Vec<Removed>,
    /// Objects that are still there, with the reason.
    pub failed: Vec<Failure>,
}

impl CleanupReport {
    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.failed.is_empty()
    }

    pub(crate) fn ok(&mut self, kind: ObjectKind, name: impl Into<String>, run: &str) {
        self.removed.push(Removed {
            kind,
            name: name.into(),
            run: run.to_string(),
        });
    }

    pub(crate) fn fail(
        &mut self,
        kind: ObjectKind,
        name: impl Into<String>,
        run: &str,
        e: impl fmt::Display,
    ) {
        self.failed.push(Failure {
            kind,
            name: name.into(),
            run: run.to_string(),
            error: format!("{e:#}"),
        });
    }

    /// What was removed, a line per run: `run 1a2b3c4d: 10 cgroups, 2 processes, 1 state`.
    pub fn summary(&self) -> Vec<String> {
        let mut by_run: BTreeMap<&str, BTreeMap<ObjectKind, usize>> = BTreeMap::new();
        for r in &self.removed {
            *by_run.entry(&r.run).or_default().entry(r.kind).or_default() += 1;
        }
        by_run
            .into_iter()
            .map(|(run, kinds)| {
                let counts: Vec<String> = kinds
                    .into_iter()
                    .map(|(k, n)| format!("{n} {}", k.plural(n)))
                    .collect();
                format!("run {run}: {}", counts.join(", "))
            })
            .collect()
    }

    /// Appends another report.
    pub fn extend(&mut self, other: CleanupReport) {
        self.removed.extend(other.removed);
        self.failed.extend(other.failed);
    }
}

impl fmt::Display for CleanupReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return writeln!(f, "nothing to clean up");
        }
        for r in &self.removed {
            writeln!(f, "removed {r}")?;
        }
        for r in &self.failed {
            writeln!(f, "FAILED  {r}")?;
        }
        Ok(())
    }
}

/// Which runs' objects a sweep removes; a platform's own sweep asks it for each object it
/// finds.
pub trait RunFilter {
    /// Whether the objects of run `run` (its id) are to be removed now.
    fn selected(&mut self, run: &str) -> bool;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_lists_what_was_removed() {
        let mut r = CleanupReport::default();
        assert_eq!(r.to_string(), "nothing to clean up\n");
        r.ok(
            ObjectKind::Cgroup,
            "/sys/fs/cgroup/pids/isobench-0badc0de-a",
            "0badc0de",
        );
        r.fail(ObjectKind::Link, "ib0badc0b", "0badc0de", "busy");
        let text = r.to_string();
        assert!(
            text.contains(
                "removed cgroup   /sys/fs/cgroup/pids/isobench-0badc0de-a (run 0badc0de)"
            ),
            "{text}"
        );
        assert!(
            text.contains("FAILED  link ib0badc0b (run 0badc0de): busy"),
            "{text}"
        );
        r.ok(ObjectKind::Process, "pid 7", "0badc0de");
        r.ok(ObjectKind::Process, "pid 8", "0badc0de");
        r.ok(ObjectKind::StateDir, "/run/isobench/1", "00000001");
        assert_eq!(
            r.summary(),
            [
                "run 00000001: 1 state",
                "run 0badc0de: 2 processes, 1 cgroup"
            ]
        );
    }
}
