//! io.cost, the cgroup v2 controller that makes `io.weight` act on a disk: a setting of the
//! whole device, in the root cgroup's `io.cost.qos` (its QoS: when the device counts as
//! saturated, and how far io.cost may scale its rate) and `io.cost.model` (the device's cost
//! model: bytes and IOs per second), not of a tenant.
//!
//! A run that asks for it (`run --io-cost on|off|PARAMS`) sets the device's lines of the
//! workdir's disk when the platform starts, reads them back, and puts the previous lines back
//! when the platform is torn down. What was set is part of the platform's description, so
//! the run's record says under which io.cost the figures were measured.
//!
//! The setting is the host's, shared by every run on the device, so it is held through a
//! record in the state root (`io-cost/MAJ-MIN`, under a lock): the lines as they were before
//! the first run changed them, what was asked, and the runs holding it. A second run that
//! asks the same joins the holders and writes nothing; one that asks something else is
//! refused while the first holds it. The last holder to end puts the first lines back, so
//! runs that overlap never restore each other's setting. A run killed before it could
//! restore leaves its record: the next run on the device, or `isobench cleanup`, finds no
//! live holder and puts the lines back.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};

use crate::blockdev::DevNum;
use crate::cgroup::{CgroupFs, CgroupTree, CgroupVersion, RealTree};
use crate::leftovers::{CleanupReport, ObjectKind, RunFilter};
use crate::lockfile::LockFile;

/// The parameters `io.cost.qos` takes after the device.
const QOS_KEYS: &[&str] = &[
    "enable", "ctrl", "rpct", "rlat", "wpct", "wlat", "min", "max",
];

/// The parameters `io.cost.model` takes after the device (its `ctrl` is implied: `user`
/// when any is given, `auto` for `model=auto`).
const MODEL_KEYS: &[&str] = &[
    "model",
    "rbps",
    "rseqiops",
    "rrandiops",
    "wbps",
    "wseqiops",
    "wrandiops",
];

/// Where the records of io.cost settings live, under a state root.
const RECORDS: &str = "io-cost";

/// The two files of io.cost in the root cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum File {
    Qos,
    Model,
}

impl File {
    fn name(self) -> &'static str {
        match self {
            File::Qos => "io.cost.qos",
            File::Model => "io.cost.model",
        }
    }

    fn key(self) -> &'static str {
        match self {
            File::Qos => "qos",
            File::Model => "model",
        }
    }

    /// What puts a device's line back as it was: a line the kernel showed with `ctrl=auto`
    /// is written back as `ctrl=auto` (with the QoS's `enable=N`), so the kernel chooses the
    /// parameters again; a device without a line gets `enable=0 ctrl=auto` (the QoS: with
    /// `enable=0` alone the kernel would keep the parameters written since) or `ctrl=auto`
    /// (the model).
    fn restoring(self, previous: Option<&str>) -> String {
        let auto = |p: &str| p.split_whitespace().any(|w| w == "ctrl=auto");
        match (self, previous) {
            (File::Qos, None) => "enable=0 ctrl=auto".into(),
            (File::Model, None) => "ctrl=auto".into(),
            (File::Qos, Some(p)) if auto(p) => {
                let enable = p
                    .split_whitespace()
                    .find(|w| w.starts_with("enable="))
                    .unwrap_or("enable=0");
                format!("{enable} ctrl=auto")
            }
            (File::Model, Some(p)) if auto(p) => "ctrl=auto".into(),
            (_, Some(p)) => p.to_string(),
        }
    }
}

/// What a run asks of io.cost on its workdir's device: parameters of `io.cost.qos`, of
/// `io.cost.model`, or both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoCost {
    /// The words as given (`on`, `off` and `key=value`), for the record.
    words: String,
    /// What is written after the device in `io.cost.qos`, if anything.
    qos: Option<String>,
    /// What is written after the device in `io.cost.model`, if anything.
    model: Option<String>,
}

impl IoCost {
    /// `on`: `enable=1`, the kernel's automatic QoS parameters.
    pub fn on() -> IoCost {
        "on".parse().expect("`on` parses")
    }

    /// The parameters written after the device in each file it sets.
    fn lines(&self) -> Vec<(File, &str)> {
        let mut v = Vec::new();
        if let Some(q) = &self.qos {
            v.push((File::Qos, q.as_str()));
        }
        if let Some(m) = &self.model {
            v.push((File::Model, m.as_str()));
        }
        v
    }
}

impl fmt::Display for IoCost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.words)
    }
}

impl FromStr for IoCost {
    type Err = String;
    fn from_str(s: &str) -> Result<IoCost, String> {
        let words: Vec<&str> = s
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|w| !w.is_empty())
            .collect();
        if words.is_empty() {
            return Err(
                "io.cost: give `on`, `off` or parameters of io.cost.qos and \
                        io.cost.model, e.g. `enable=1 ctrl=user rpct=95 rlat=5000 wpct=95 \
                        wlat=5000` or `on rbps=200000000 rrandiops=20000`"
                    .into(),
            );
        }
        let (mut qos, mut model) = (Vec::new(), Vec::new());
        let mut model_auto = false;
        for w in &words {
            match w.to_ascii_lowercase().as_str() {
                "on" => {
                    qos.push("enable=1".to_string());
                    continue;
                }
                "off" => {
                    qos.push("enable=0".to_string());
                    continue;
                }
                _ => {}
            }
            let Some((k, v)) = w.split_once('=') else {
                return Err(format!(
                    "io.cost `{w}` is not key=value; write `on`, `off` or e.g. \
                     `enable=1 rlat=5000`"
                ));
            };
            if v.is_empty() {
                return Err(format!("io.cost parameter `{w}` has no value"));
            }
            if k == "model" && v == "auto" {
                model_auto = true;
            } else if QOS_KEYS.contains(&k) {
                qos.push(w.to_string());
            } else if MODEL_KEYS.contains(&k) {
                model.push(w.to_string());
            } else {
                return Err(format!(
                    "io.cost parameter `{w}`: the keys are those of io.cost.qos ({}) and of \
                     io.cost.model ({}, or model=auto)",
                    QOS_KEYS.join(", "),
                    MODEL_KEYS.join(", ")
                ));
            }
        }
        if model_auto && !model.is_empty() {
            return Err(format!(
                "io.cost: model=auto lets the kernel choose the cost model, so it takes no \
                 model parameters beside it ({})",
                model.join(" ")
            ));
        }
        let model = if model_auto {
            Some("ctrl=auto".to_string())
        } else if model.is_empty() {
            None
        } else {
            Some(format!("ctrl=user {}", model.join(" ")))
        };
        Ok(IoCost {
            words: words.join(" "),
            qos: (!qos.is_empty()).then(|| qos.join(" ")),
            model,
        })
    }
}

/// The parameters of `dev`'s line in an io.cost file's text.
fn line_of(text: &str, dev: DevNum) -> Option<String> {
    let want = dev.to_string();
    text.lines().find_map(|l| {
        let (d, rest) = l.trim().split_once(' ')?;
        (d == want).then(|| rest.trim().to_string())
    })
}

/// Whether run `id` is live: the production test of a holder.
pub(crate) type Live = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// A device's io.cost setting while runs hold it, as kept in its record file.
#[derive(Debug, Clone, PartialEq)]
struct Record {
    /// The root cgroup (where the files are).
    root: PathBuf,
    dev: DevNum,
    /// What the holders asked (the words).
    asked: String,
    /// Each file the setting changed, with the device's line before the first holder
    /// changed it (`None`: it had none).
    previous: Vec<(File, Option<String>)>,
    /// The ids of the runs holding it.
    holders: Vec<String>,
}

impl Record {
    fn text(&self) -> String {
        let mut s = format!(
            "root {}\ndev {}\nasked {}\n",
            self.root.display(),
            self.dev,
            self.asked
        );
        for (f, p) in &self.previous {
            match p {
                Some(p) => s.push_str(&format!("{} {p}\n", f.key())),
                None => s.push_str(&format!("{}\n", f.key())),
            }
        }
        for h in &self.holders {
            s.push_str(&format!("holder {h}\n"));
        }
        s
    }

    fn parse(text: &str) -> Option<Record> {
        let (mut root, mut dev, mut asked) = (None, None, None);
        let (mut previous, mut holders) = (Vec::new(), Vec::new());
        for line in text.lines() {
            let (k, v) = line.split_once(' ').unwrap_or((line, ""));
            let v = v.trim();
            let prev = (!v.is_empty()).then(|| v.to_string());
            match k {
                "root" => root = Some(PathBuf::from(v)),
                "dev" => dev = DevNum::parse(v),
                "asked" => asked = Some(v.to_string()),
                "qos" => previous.push((File::Qos, prev)),
                "model" => previous.push((File::Model, prev)),
                "holder" if !v.is_empty() => holders.push(v.to_string()),
                _ => {}
            }
        }
        Some(Record {
            root: root?,
            dev: dev?,
            asked: asked?,
            previous,
            holders,
        })
    }

    fn read(path: &Path) -> Result<Option<Record>> {
        match fs::read_to_string(path) {
            Ok(t) => Ok(Some(Record::parse(&t).ok_or_else(|| {
                anyhow!(
                    "{} is no record of an io.cost setting; remove it once io.cost.qos and \
                     io.cost.model in the root cgroup are as they should be",
                    path.display()
                )
            })?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(anyhow!(e).context(format!("reading {}", path.display()))),
        }
    }

    fn write(&self, path: &Path) -> Result<()> {
        let tmp = path.with_extension("new");
        fs::write(&tmp, self.text())
            .and_then(|()| fs::rename(&tmp, path))
            .with_context(|| format!("writing {}", path.display()))
    }

    /// Writes each changed file's previous line back.
    fn put_back(&self, tree: &dyn CgroupTree) -> Result<()> {
        let mut first_err = None;
        for (f, p) in &self.previous {
            let file = self.root.join(f.name());
            let line = format!("{} {}", self.dev, f.restoring(p.as_deref()));
            if let Err(e) = tree.write(&file, &line) {
                first_err.get_or_insert_with(|| {
                    anyhow!(e).context(format!(
                        "restoring io.cost: writing `{line}` to {}",
                        file.display()
                    ))
                });
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    fn describe_previous(&self) -> String {
        self.previous
            .iter()
            .map(|(f, p)| format!("{} `{}`", f.name(), p.as_deref().unwrap_or("not set")))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The record and lock files of `dev` in `records`.
fn record_paths(records: &Path, dev: DevNum) -> (PathBuf, PathBuf) {
    let key = format!("{}-{}", dev.major, dev.minor);
    (records.join(&key), records.join(format!("{key}.lock")))
}

/// io.cost as set for one device, held by one run, put back by [`IoCostSetting::restore`]
/// once no run holds it.
pub struct IoCostSetting {
    tree: Arc<dyn CgroupTree>,
    records: PathBuf,
    run: String,
    live: Live,
    /// The record as this run left it after joining.
    record: Record,
    /// Each file's line for the device as the kernel held it after the setting.
    now: Vec<(File, String)>,
    /// Whether this run joined a setting another run made.
    joined: Vec<String>,
    restored: bool,
}

impl fmt::Debug for IoCostSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IoCostSetting")
            .field("record", &self.record)
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

/// Sets io.cost for `dev` in the root cgroup of `fs` for run `run`, or joins the same
/// setting another live run holds, and reads it back.
pub fn apply(fs: &CgroupFs, dev: DevNum, cost: &IoCost, run: &str) -> Result<IoCostSetting> {
    apply_at(
        fs,
        dev,
        cost,
        run,
        &crate::run::state_root().join(RECORDS),
        Arc::new(crate::run::run_live),
    )
}

fn apply_at(
    fs: &CgroupFs,
    dev: DevNum,
    cost: &IoCost,
    run: &str,
    records: &Path,
    live: Live,
) -> Result<IoCostSetting> {
    let root = iocost_root(fs, cost)?;
    fs::create_dir_all(records).with_context(|| format!("creating {}", records.display()))?;
    let (path, lock) = record_paths(records, dev);
    let _lock =
        LockFile::lock_blocking(&lock).with_context(|| format!("locking {}", lock.display()))?;
    let found = Record::read(&path)?;
    let mut setting = IoCostSetting {
        tree: fs.tree().clone(),
        records: records.to_path_buf(),
        run: run.to_string(),
        live: live.clone(),
        record: Record {
            root,
            dev,
            asked: cost.words.clone(),
            previous: Vec::new(),
            holders: vec![run.to_string()],
        },
        now: Vec::new(),
        joined: Vec::new(),
        // Nothing to leave until the setting holds (and `_lock` is ours until then: a
        // restore on drop would wait for it).
        restored: true,
    };
    let live_holders: Vec<String> = found
        .as_ref()
        .map(|r| {
            r.holders
                .iter()
                .filter(|h| *h != run && live(h))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    if let (Some(r), false) = (&found, live_holders.is_empty()) {
        setting.join(r, live_holders, cost, &path)?;
        return Ok(setting);
    }
    setting.record.previous = setting.lines_to_put_back(found.as_ref(), cost)?;
    // The record first: a run killed between the write and the record would leave a
    // setting nobody puts back.
    setting.record.write(&path)?;
    setting.write_lines(cost, &path)?;
    setting.restored = false;
    Ok(setting)
}

/// The v2 root cgroup of `fs` where `cost`'s files are, refusing a host without them.
fn iocost_root(fs: &CgroupFs, cost: &IoCost) -> Result<PathBuf> {
    if fs.version() != CgroupVersion::V2 {
        bail!(
            "--io-cost: io.cost is a cgroup v2 controller, and this host's resource \
             controllers are cgroup v1 ({}); remove --io-cost, or run on a cgroup v2 host",
            fs.describe()
        );
    }
    let root = crate::cgroup::v2_mount_root(fs)
        .ok_or_else(|| anyhow!("--io-cost: no cgroup v2 root found ({})", fs.describe()))?;
    for (f, _) in cost.lines() {
        let file = root.join(f.name());
        if !fs.tree().exists(&file) {
            bail!(
                "--io-cost: {} does not exist: this kernel has no io.cost controller (built \
                 without CONFIG_BLK_CGROUP_IOCOST); remove --io-cost, or use `io_weight` with \
                 the bfq scheduler instead",
                file.display()
            );
        }
    }
    Ok(root)
}

/// The steps of [`apply_at`].
impl IoCostSetting {
    /// The device's line in file `f` of the root cgroup, as the kernel holds it now.
    fn read_line(&self, f: File) -> Result<Option<String>> {
        let file = self.record.root.join(f.name());
        let text = self
            .tree
            .read(&file)
            .map_err(|e| anyhow!(e).context(format!("reading {}", file.display())))?;
        Ok(line_of(&text, self.record.dev))
    }

    /// Joins the same setting the runs `live_holders` hold (record `r`, at `path`), or
    /// refuses a different one.
    fn join(
        &mut self,
        r: &Record,
        live_holders: Vec<String>,
        cost: &IoCost,
        path: &Path,
    ) -> Result<()> {
        let dev = self.record.dev;
        if r.asked != cost.words {
            bail!(
                "--io-cost {cost}: io.cost on device {dev} is held at `{}` by run {} now; one \
                 device has one io.cost setting at a time: ask the same --io-cost, or wait \
                 for that run to end",
                r.asked,
                live_holders.join(", ")
            );
        }
        let mut r = r.clone();
        r.holders = live_holders.clone();
        r.holders.push(self.run.clone());
        r.write(path)?;
        for (f, _) in cost.lines() {
            let now = self.read_line(f)?.unwrap_or_default();
            self.now.push((f, now));
        }
        self.record = r;
        self.joined = live_holders;
        self.restored = false;
        Ok(())
    }

    /// The lines to put back when this setting ends, with no live holder. A record left by
    /// a run killed while holding it (`found`) keeps the lines from before that run: those
    /// this setting does not change are put back now, the others' are kept.
    fn lines_to_put_back(
        &self,
        found: Option<&Record>,
        cost: &IoCost,
    ) -> Result<Vec<(File, Option<String>)>> {
        let mut previous = Vec::new();
        if let Some(stale) = found {
            let others = Record {
                previous: stale
                    .previous
                    .iter()
                    .filter(|(f, _)| !cost.lines().iter().any(|(g, _)| g == f))
                    .cloned()
                    .collect(),
                ..stale.clone()
            };
            others.put_back(self.tree.as_ref())?;
            previous = stale
                .previous
                .iter()
                .filter(|(f, _)| cost.lines().iter().any(|(g, _)| g == f))
                .cloned()
                .collect();
        }
        for (f, _) in cost.lines() {
            if !previous.iter().any(|(g, _)| *g == f) {
                previous.push((f, self.read_line(f)?));
            }
        }
        Ok(previous)
    }

    /// Writes `cost`'s lines for the device and checks the kernel holds them; on an error,
    /// leaves the setting (recorded at `path`).
    fn write_lines(&mut self, cost: &IoCost, path: &Path) -> Result<()> {
        for (f, params) in cost.lines() {
            match self.write_line(f, params) {
                Ok(now) => self.now.push((f, now)),
                Err(e) => {
                    let _ = self.leave(path);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Writes `params` for the device to file `f` and returns the line the kernel then
    /// holds, refusing one without the `enable` and `ctrl=user` asked.
    fn write_line(&self, f: File, params: &str) -> Result<String> {
        let dev = self.record.dev;
        let file = self.record.root.join(f.name());
        let line = format!("{dev} {params}");
        if let Err(e) = self.tree.write(&file, &line) {
            return Err(anyhow!(e).context(format!(
                "--io-cost: writing `{line}` to {} (the kernel refused the parameters; check \
                 them against the kernel's cgroup-v2 documentation, {})",
                file.display(),
                f.name()
            )));
        }
        let now = self.read_line(f)?.unwrap_or_default();
        let held: Vec<&str> = now.split_whitespace().collect();
        // The numbers are shown in the kernel's own format; `enable` and `ctrl=user` must be
        // as asked.
        let want: Vec<&str> = params
            .split_whitespace()
            .filter(|w| w.starts_with("enable=") || *w == "ctrl=user")
            .collect();
        if now.is_empty() || want.iter().any(|w| !held.contains(w)) {
            bail!(
                "--io-cost: {}: wrote `{line}`, but the kernel holds `{}`",
                file.display(),
                if now.is_empty() {
                    "no line for the device".to_string()
                } else {
                    format!("{dev} {now}")
                }
            );
        }
        Ok(now)
    }
}

impl IoCostSetting {
    /// For the run's record: what was set and what it replaced.
    pub fn describe(&self) -> String {
        let now = self
            .now
            .iter()
            .map(|(f, l)| format!("{} `{l}`", f.name()))
            .collect::<Vec<_>>()
            .join(", ");
        let shared = if self.joined.is_empty() {
            String::new()
        } else {
            format!(", set by run {} and shared with it", self.joined.join(", "))
        };
        format!(
            "io.cost for device {} in {}: {now}{shared} (was {}; put back when the last run \
             holding it ends)",
            self.record.dev,
            self.record.root.display(),
            self.record.describe_previous()
        )
    }

    /// Leaves the setting (once): the last live holder puts the previous lines back.
    pub fn restore(&mut self) -> Result<()> {
        if self.restored {
            return Ok(());
        }
        self.restored = true;
        let (path, lock) = record_paths(&self.records, self.record.dev);
        let _lock = LockFile::lock_blocking(&lock)
            .with_context(|| format!("locking {}", lock.display()))?;
        self.leave(&path)
    }

    /// [`IoCostSetting::restore`] with the record's lock held.
    fn leave(&self, path: &Path) -> Result<()> {
        let Some(mut r) = Record::read(path)? else {
            // Swept by a cleanup that took this run for dead: nothing left to put back.
            return Ok(());
        };
        let live = &self.live;
        r.holders.retain(|h| *h != self.run && live(h));
        if !r.holders.is_empty() {
            return r.write(path);
        }
        r.put_back(self.tree.as_ref())?;
        fs::remove_file(path).with_context(|| format!("removing {}", path.display()))
    }
}

impl Drop for IoCostSetting {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            tracing::warn!("{e:#}");
        }
    }
}

/// The cleanup sweep: every record of an io.cost setting whose holders are all selected
/// (dead, or taken by `cleanup --all`) has its previous lines put back and goes.
pub(crate) fn sweep(runs: &mut dyn RunFilter, report: &mut CleanupReport) {
    for root in crate::run::state_roots() {
        sweep_in(&root.join(RECORDS), &RealTree, runs, report);
    }
}

fn sweep_in(
    records: &Path,
    tree: &dyn CgroupTree,
    runs: &mut dyn RunFilter,
    report: &mut CleanupReport,
) {
    let Ok(rd) = fs::read_dir(records) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.contains('.') {
            continue;
        }
        let path = e.path();
        let Ok(_lock) = LockFile::lock_blocking(&records.join(format!("{name}.lock"))) else {
            continue;
        };
        let r = match Record::read(&path) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(err) => {
                report.fail(ObjectKind::Setting, path.display().to_string(), "-", err);
                continue;
            }
        };
        let (gone, kept): (Vec<String>, Vec<String>) =
            r.holders.iter().cloned().partition(|h| runs.selected(h));
        let run = gone.first().cloned().unwrap_or_else(|| "-".into());
        if !kept.is_empty() {
            if !gone.is_empty() {
                let _ = Record {
                    holders: kept,
                    ..r.clone()
                }
                .write(&path);
            }
            continue;
        }
        let what = format!(
            "io.cost of device {} (put back: {})",
            r.dev,
            r.describe_previous()
        );
        match r.put_back(tree).and_then(|()| {
            fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))
        }) {
            Ok(()) => report.ok(ObjectKind::Setting, what, &run),
            Err(err) => report.fail(ObjectKind::Setting, what, &run, err),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Mutex;

    use super::*;

    fn dev() -> DevNum {
        DevNum { major: 8, minor: 0 }
    }

    const AUTO: &str = "8:0 enable=0 ctrl=auto rpct=0.00 rlat=250000 wpct=0.00 wlat=250000 \
                        min=1.00 max=10000.00";

    /// A fake v2 root with io.cost files, a records directory, and the live runs.
    struct Host {
        dir: tempfile::TempDir,
        fs: CgroupFs,
        live: Arc<Mutex<BTreeSet<String>>>,
    }

    impl Host {
        fn new() -> Host {
            let dir = tempfile::tempdir().unwrap();
            let fs = CgroupFs::fake_v2(dir.path()).unwrap();
            Host {
                dir,
                fs,
                live: Arc::default(),
            }
        }

        fn file(&self, name: &str) -> PathBuf {
            self.dir.path().join(name)
        }

        fn qos(&self) -> String {
            fs::read_to_string(self.file("io.cost.qos"))
                .unwrap()
                .trim()
                .to_string()
        }

        fn records(&self) -> PathBuf {
            self.dir.path().join("state").join(RECORDS)
        }

        /// Run `run` (live from now on) asks for `cost`.
        fn apply(&self, run: &str, cost: &str) -> Result<IoCostSetting> {
            self.live.lock().unwrap().insert(run.to_string());
            let live = self.live.clone();
            apply_at(
                &self.fs,
                dev(),
                &cost.parse().unwrap(),
                run,
                &self.records(),
                Arc::new(move |r: &str| live.lock().unwrap().contains(r)),
            )
        }

        /// Run `run` dies without restoring (SIGKILL).
        fn kill(&self, run: &str, s: IoCostSetting) {
            self.live.lock().unwrap().remove(run);
            std::mem::forget(s);
        }
    }

    #[test]
    fn words_parse_into_the_lines_of_each_file_and_bad_ones_name_the_keys() {
        let on: IoCost = "on".parse().unwrap();
        assert_eq!(on, IoCost::on());
        assert_eq!(on.lines(), vec![(File::Qos, "enable=1")]);
        let off: IoCost = "OFF".parse().unwrap();
        assert_eq!(off.lines(), vec![(File::Qos, "enable=0")]);
        let q: IoCost = "enable=1,ctrl=user rlat=5000".parse().unwrap();
        assert_eq!(q.lines(), vec![(File::Qos, "enable=1 ctrl=user rlat=5000")]);
        assert_eq!(q.to_string(), "enable=1 ctrl=user rlat=5000");
        let m: IoCost = "on rbps=200000000 rrandiops=20000".parse().unwrap();
        assert_eq!(
            m.lines(),
            vec![
                (File::Qos, "enable=1"),
                (File::Model, "ctrl=user rbps=200000000 rrandiops=20000")
            ]
        );
        let a: IoCost = "model=auto".parse().unwrap();
        assert_eq!(a.lines(), vec![(File::Model, "ctrl=auto")]);
        let e = "model=auto rbps=1".parse::<IoCost>().unwrap_err();
        assert!(e.contains("model=auto") && e.contains("rbps=1"), "{e}");
        let e = "enable=1 latency=5".parse::<IoCost>().unwrap_err();
        assert!(
            e.contains("`latency=5`") && e.contains("rlat") && e.contains("rrandiops"),
            "{e}"
        );
        assert!("yes".parse::<IoCost>().unwrap_err().contains("key=value"));
        assert!("".parse::<IoCost>().is_err());
    }

    #[test]
    fn on_is_written_read_back_described_and_restored() {
        let h = Host::new();
        fs::write(h.file("io.cost.qos"), format!("{AUTO}\n")).unwrap();
        let mut s = h.apply("run-a", "on").unwrap();
        assert_eq!(h.qos(), "8:0 enable=1");
        let d = s.describe();
        assert!(
            d.contains("device 8:0") && d.contains("io.cost.qos `enable=1`"),
            "{d}"
        );
        assert!(d.contains("was io.cost.qos `enable=0 ctrl=auto"), "{d}");
        s.restore().unwrap();
        assert_eq!(h.qos(), "8:0 enable=0 ctrl=auto");
        assert!(!h.records().join("8-0").exists(), "the record stayed");
    }

    #[test]
    fn a_device_without_a_line_is_switched_off_again() {
        let h = Host::new();
        drop(h.apply("run-a", "enable=1 ctrl=user rlat=5000").unwrap());
        assert_eq!(h.qos(), "8:0 enable=0 ctrl=auto");
    }

    #[test]
    fn a_model_is_set_and_put_back_to_the_kernels_own() {
        let h = Host::new();
        fs::write(
            h.file("io.cost.model"),
            "8:0 ctrl=auto model=linear rbps=1 rseqiops=2 rrandiops=3 wbps=4 wseqiops=5 \
             wrandiops=6\n",
        )
        .unwrap();
        let s = h.apply("run-a", "on rbps=200000000").unwrap();
        assert_eq!(
            fs::read_to_string(h.file("io.cost.model")).unwrap().trim(),
            "8:0 ctrl=user rbps=200000000"
        );
        assert!(s
            .describe()
            .contains("io.cost.model `ctrl=user rbps=200000000`"));
        drop(s);
        assert_eq!(
            fs::read_to_string(h.file("io.cost.model")).unwrap().trim(),
            "8:0 ctrl=auto"
        );
        assert_eq!(h.qos(), "8:0 enable=0 ctrl=auto");
    }

    #[test]
    fn overlapping_runs_share_one_setting_and_the_last_one_puts_it_back() {
        let h = Host::new();
        fs::write(h.file("io.cost.qos"), format!("{AUTO}\n")).unwrap();
        let q = "enable=1 ctrl=user rpct=95 rlat=5000 wpct=95 wlat=5000 min=1 max=20";
        let a = h.apply("run-a", q).unwrap();
        // b joins: nothing written (a marker shows it), and it says whose setting it is.
        fs::write(h.file("io.cost.qos"), format!("8:0 {q} (as a set it)")).unwrap();
        let b = h.apply("run-b", q).unwrap();
        assert!(h.qos().ends_with("(as a set it)"));
        assert!(
            b.describe().contains("set by run run-a"),
            "{}",
            b.describe()
        );
        // a ends first: b still holds it.
        drop(a);
        assert!(h.qos().ends_with("(as a set it)"), "{}", h.qos());
        // b ends: the line from before a, not a's.
        drop(b);
        assert_eq!(h.qos(), "8:0 enable=0 ctrl=auto");
    }

    #[test]
    fn another_setting_is_refused_while_a_run_holds_one() {
        let h = Host::new();
        let a = h.apply("run-a", "on").unwrap();
        let e = h.apply("run-b", "off").unwrap_err().to_string();
        assert!(
            e.contains("held at `on` by run run-a") && e.contains("ask the same --io-cost"),
            "{e}"
        );
        assert_eq!(h.qos(), "8:0 enable=1", "the refused run wrote");
        drop(a);
        assert_eq!(h.qos(), "8:0 enable=0 ctrl=auto");
        drop(h.apply("run-b", "off").unwrap());
    }

    #[test]
    fn a_killed_holders_setting_is_put_back_by_the_next_run_or_the_sweep() {
        let h = Host::new();
        fs::write(h.file("io.cost.qos"), format!("{AUTO}\n")).unwrap();
        let a = h.apply("run-a", "enable=1 ctrl=user rlat=5000").unwrap();
        h.kill("run-a", a);
        assert_eq!(h.qos(), "8:0 enable=1 ctrl=user rlat=5000");
        // The next run takes the lines from before the killed one as the previous ones.
        let b = h.apply("run-b", "off").unwrap();
        assert!(b.describe().contains("was io.cost.qos `enable=0 ctrl=auto"));
        drop(b);
        assert_eq!(h.qos(), "8:0 enable=0 ctrl=auto");

        // Killed again, and swept.
        let c = h.apply("run-c", "on").unwrap();
        h.kill("run-c", c);
        struct Dead;
        impl RunFilter for Dead {
            fn selected(&mut self, run: &str) -> bool {
                run == "run-c"
            }
        }
        let mut report = CleanupReport::default();
        sweep_in(&h.records(), &RealTree, &mut Dead, &mut report);
        assert_eq!(h.qos(), "8:0 enable=0 ctrl=auto");
        assert!(!h.records().join("8-0").exists());
        let text = format!("{report:?}");
        assert!(text.contains("io.cost of device 8:0"), "{text}");
    }

    #[test]
    fn a_missing_file_and_v1_are_refused_with_the_reason() {
        let h = Host::new();
        fs::remove_file(h.file("io.cost.qos")).unwrap();
        let e = h.apply("run-a", "on").unwrap_err().to_string();
        assert!(
            e.contains("io.cost.qos does not exist") && e.contains("CONFIG_BLK_CGROUP_IOCOST"),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        let v1 = CgroupFs::fake_v1(dir.path()).unwrap();
        let e = apply_at(
            &v1,
            dev(),
            &IoCost::on(),
            "run-a",
            dir.path(),
            Arc::new(|_: &str| true),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("cgroup v2 controller"), "{e}");
    }
}
