//! io.cost, the cgroup v2 controller that makes `io.weight` act on a disk: a setting of the
//! whole device, in the root cgroup's `io.cost.qos` (and `io.cost.model`), not of a tenant.
//!
//! A run that asks for it (`run --io-cost on|off|QOS`) sets the line of the workdir's device
//! when the platform starts, reads it back, and puts the previous line back when the
//! platform is torn down. What was set is part of the platform's description, so the run's
//! record says under which io.cost the figures were measured.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use anyhow::{anyhow, bail, Result};

use crate::blockdev::DevNum;
use crate::cgroup::{CgroupFs, CgroupTree, CgroupVersion};

/// The parameters `io.cost.qos` takes after the device.
const QOS_KEYS: &[&str] = &[
    "enable", "ctrl", "rpct", "rlat", "wpct", "wlat", "min", "max",
];

/// What a run asks of io.cost on its workdir's device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IoCost {
    /// `enable=1`, the kernel's automatic QoS parameters.
    On,
    /// `enable=0`.
    Off,
    /// These `key=value` parameters, as `io.cost.qos` takes them (e.g.
    /// `enable=1 ctrl=user rpct=95 rlat=5000 wpct=95 wlat=5000`).
    Qos(String),
}

impl IoCost {
    /// The parameters written after the device.
    pub fn params(&self) -> String {
        match self {
            IoCost::On => "enable=1".into(),
            IoCost::Off => "enable=0".into(),
            IoCost::Qos(q) => q.clone(),
        }
    }
}

impl fmt::Display for IoCost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IoCost::On => f.write_str("on"),
            IoCost::Off => f.write_str("off"),
            IoCost::Qos(q) => f.write_str(q),
        }
    }
}

impl FromStr for IoCost {
    type Err = String;
    fn from_str(s: &str) -> Result<IoCost, String> {
        let s = s.trim();
        match s.to_ascii_lowercase().as_str() {
            "on" => return Ok(IoCost::On),
            "off" => return Ok(IoCost::Off),
            _ => {}
        }
        let words: Vec<&str> = s
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|w| !w.is_empty())
            .collect();
        if words.is_empty() {
            return Err("io.cost: give `on`, `off` or io.cost.qos parameters, e.g. \
                        `enable=1 ctrl=user rpct=95 rlat=5000 wpct=95 wlat=5000`"
                .into());
        }
        for w in &words {
            let Some((k, v)) = w.split_once('=') else {
                return Err(format!(
                    "io.cost `{w}` is not key=value; write `on`, `off` or e.g. \
                     `enable=1 rlat=5000`"
                ));
            };
            if !QOS_KEYS.contains(&k) || v.is_empty() {
                return Err(format!(
                    "io.cost parameter `{w}`: the keys of io.cost.qos are {}",
                    QOS_KEYS.join(", ")
                ));
            }
        }
        Ok(IoCost::Qos(words.join(" ")))
    }
}

/// io.cost as set for one device, put back as it was by [`IoCostSetting::restore`].
#[derive(Debug)]
pub struct IoCostSetting {
    tree: Arc<dyn CgroupTree>,
    file: PathBuf,
    dev: DevNum,
    /// The device's line before (its parameters), if it had one.
    previous: Option<String>,
    /// The device's line as the kernel holds it after the write.
    now: String,
    restored: bool,
}

/// The parameters of `dev`'s line in an `io.cost.qos` text.
fn line_of(text: &str, dev: DevNum) -> Option<String> {
    let want = dev.to_string();
    text.lines().find_map(|l| {
        let (d, rest) = l.trim().split_once(' ')?;
        (d == want).then(|| rest.trim().to_string())
    })
}

/// Sets io.cost for `dev` in the root cgroup of `fs` and reads it back.
pub fn apply(fs: &CgroupFs, dev: DevNum, cost: &IoCost) -> Result<IoCostSetting> {
    if fs.version() != CgroupVersion::V2 {
        bail!(
            "--io-cost: io.cost is a cgroup v2 controller, and this host's resource \
             controllers are cgroup v1 ({}); remove --io-cost, or run on a cgroup v2 host",
            fs.describe()
        );
    }
    let root = crate::cgroup::v2_mount_root(fs)
        .ok_or_else(|| anyhow!("--io-cost: no cgroup v2 root found ({})", fs.describe()))?;
    let file = root.join("io.cost.qos");
    let tree = fs.tree().clone();
    if !tree.exists(&file) {
        bail!(
            "--io-cost: {} does not exist: this kernel has no io.cost controller (built \
             without CONFIG_BLK_CGROUP_IOCOST); remove --io-cost, or use `io_weight` with the \
             bfq scheduler instead",
            file.display()
        );
    }
    let before = tree
        .read(&file)
        .map_err(|e| anyhow!(e).context(format!("reading {}", file.display())))?;
    let previous = line_of(&before, dev);
    let params = cost.params();
    let line = format!("{dev} {params}");
    tree.write(&file, &line).map_err(|e| {
        anyhow!(e).context(format!(
            "--io-cost: writing `{line}` to {} (the kernel refused the parameters; check \
             them against the kernel's cgroup-v2 documentation, io.cost.qos)",
            file.display()
        ))
    })?;
    let after = tree
        .read(&file)
        .map_err(|e| anyhow!(e).context(format!("reading back {}", file.display())))?;
    let now = line_of(&after, dev).unwrap_or_default();
    let held: Vec<&str> = now.split_whitespace().collect();
    // `ctrl` and the numbers are shown in the kernel's own format; `enable` must be as asked.
    let want_enable = params.split_whitespace().find(|w| w.starts_with("enable="));
    if want_enable.is_some_and(|w| !held.contains(&w)) || now.is_empty() {
        let mut s = IoCostSetting {
            tree,
            file: file.clone(),
            dev,
            previous,
            now: now.clone(),
            restored: false,
        };
        let _ = s.restore();
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
    Ok(IoCostSetting {
        tree,
        file,
        dev,
        previous,
        now,
        restored: false,
    })
}

impl IoCostSetting {
    /// For the run's record: what was set and what it replaced.
    pub fn describe(&self) -> String {
        format!(
            "io.cost for device {}: `{}` in {} (was `{}`, restored when the run ends)",
            self.dev,
            self.now,
            self.file.display(),
            self.previous.as_deref().unwrap_or("not set")
        )
    }

    /// Puts the device's previous line back (once). A line the kernel showed with
    /// `ctrl=auto` is written back as `enable=N ctrl=auto`, so the kernel keeps choosing the
    /// parameters; a device without a line gets `enable=0`.
    pub fn restore(&mut self) -> Result<()> {
        if self.restored {
            return Ok(());
        }
        self.restored = true;
        let params = match &self.previous {
            None => "enable=0".to_string(),
            Some(p) if p.split_whitespace().any(|w| w == "ctrl=auto") => {
                let enable = p
                    .split_whitespace()
                    .find(|w| w.starts_with("enable="))
                    .unwrap_or("enable=0");
                format!("{enable} ctrl=auto")
            }
            Some(p) => p.clone(),
        };
        let line = format!("{} {params}", self.dev);
        self.tree.write(&self.file, &line).map_err(|e| {
            anyhow!(e).context(format!(
                "restoring io.cost: writing `{line}` to {}",
                self.file.display()
            ))
        })
    }
}

impl Drop for IoCostSetting {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            log::warn!("{e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev() -> DevNum {
        DevNum { major: 8, minor: 0 }
    }

    #[test]
    fn words_parse_and_bad_ones_name_the_keys() {
        assert_eq!("on".parse::<IoCost>().unwrap(), IoCost::On);
        assert_eq!("OFF".parse::<IoCost>().unwrap(), IoCost::Off);
        assert_eq!(
            "enable=1,ctrl=user rlat=5000"
                .parse::<IoCost>()
                .unwrap()
                .params(),
            "enable=1 ctrl=user rlat=5000"
        );
        let e = "enable=1 latency=5".parse::<IoCost>().unwrap_err();
        assert!(e.contains("`latency=5`") && e.contains("rlat"), "{e}");
        assert!("yes".parse::<IoCost>().unwrap_err().contains("key=value"));
    }

    #[test]
    fn on_is_written_read_back_described_and_restored() {
        let dir = tempfile::tempdir().unwrap();
        let fs = CgroupFs::fake_v2(dir.path()).unwrap();
        let qos = dir.path().join("io.cost.qos");
        std::fs::write(
            &qos,
            "8:0 enable=0 ctrl=auto rpct=0.00 rlat=250000 wpct=0.00 wlat=250000 min=1.00 \
             max=10000.00\n",
        )
        .unwrap();
        let mut s = apply(&fs, dev(), &IoCost::On).unwrap();
        assert_eq!(
            std::fs::read_to_string(&qos).unwrap().trim(),
            "8:0 enable=1"
        );
        let d = s.describe();
        assert!(
            d.contains("device 8:0: `enable=1`") && d.contains("was `enable=0 ctrl=auto"),
            "{d}"
        );
        s.restore().unwrap();
        assert_eq!(
            std::fs::read_to_string(&qos).unwrap().trim(),
            "8:0 enable=0 ctrl=auto"
        );
    }

    #[test]
    fn a_device_without_a_line_is_switched_off_again() {
        let dir = tempfile::tempdir().unwrap();
        let fs = CgroupFs::fake_v2(dir.path()).unwrap();
        let qos = dir.path().join("io.cost.qos");
        drop(apply(&fs, dev(), &"enable=1 ctrl=user rlat=5000".parse().unwrap()).unwrap());
        assert_eq!(
            std::fs::read_to_string(&qos).unwrap().trim(),
            "8:0 enable=0"
        );
    }

    #[test]
    fn a_missing_file_and_v1_are_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let fs = CgroupFs::fake_v2(dir.path()).unwrap();
        std::fs::remove_file(dir.path().join("io.cost.qos")).unwrap();
        let e = apply(&fs, dev(), &IoCost::On).unwrap_err().to_string();
        assert!(
            e.contains("io.cost.qos does not exist") && e.contains("CONFIG_BLK_CGROUP_IOCOST"),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        let v1 = CgroupFs::fake_v1(dir.path()).unwrap();
        let e = apply(&v1, dev(), &IoCost::On).unwrap_err().to_string();
        assert!(e.contains("cgroup v2 controller"), "{e}");
    }
}
