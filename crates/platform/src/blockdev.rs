//! The block device behind a directory, for block I/O throttling.
//!
//! Throttling applies to whole disks: a partition resolves to its disk, a filesystem whose
//! `st_dev` is not a block device (btrfs) is looked up in mountinfo. Filesystems with no disk
//! at all (tmpfs, overlay) have no device, and the error says so.

use std::fmt;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use procfs::process::MountInfos;
use serde::Serialize;

/// A block device number, `major:minor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct DevNum {
    /// Major number.
    pub major: u32,
    /// Minor number.
    pub minor: u32,
}

impl DevNum {
    fn from_raw(dev: u64) -> DevNum {
        DevNum {
            major: libc::major(dev),
            minor: libc::minor(dev),
        }
    }

    pub(crate) fn parse(s: &str) -> Option<DevNum> {
        let (a, b) = s.trim().split_once(':')?;
        Some(DevNum {
            major: a.parse().ok()?,
            minor: b.parse().ok()?,
        })
    }
}

impl fmt::Display for DevNum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

/// The whole-disk block device holding a directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlockDevice {
    /// Device number of the whole disk.
    pub dev: DevNum,
    /// Kernel name of the disk (`vda`, `nvme0n1`).
    pub name: String,
}

impl fmt::Display for BlockDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.dev, self.name)
    }
}

/// Finds the whole-disk device holding `path`. The error is a sentence saying why there is
/// none.
pub fn device_for_path(path: &Path) -> Result<BlockDevice, String> {
    let meta = fs::metadata(path).map_err(|e| format!("cannot stat {}: {e}", path.display()))?;
    let dev = DevNum::from_raw(meta.dev());
    if let Some(d) = whole_disk(dev) {
        return Ok(d);
    }
    // Not a block device number (btrfs, overlay, tmpfs): ask mountinfo for the source.
    let mountinfo = procfs::process::Process::myself()
        .and_then(|p| p.mountinfo())
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let (fstype, source) =
        mount_source(&mountinfo, dev).ok_or_else(|| format!("no mount has device {dev}"))?;
    if source.starts_with("/dev/") {
        if let Ok(m) = fs::metadata(&source) {
            if let Some(d) = whole_disk(DevNum::from_raw(m.rdev())) {
                return Ok(d);
            }
        }
    }
    Err(format!(
        "it is on a {fstype} filesystem (source `{source}`) with no block device"
    ))
}

fn whole_disk(dev: DevNum) -> Option<BlockDevice> {
    let sys = PathBuf::from(format!("/sys/dev/block/{dev}"));
    let real = fs::canonicalize(&sys).ok()?;
    if real.join("partition").exists() {
        let parent = real.parent()?;
        let pdev = DevNum::parse(&fs::read_to_string(parent.join("dev")).ok()?)?;
        return Some(BlockDevice {
            dev: pdev,
            name: parent.file_name()?.to_string_lossy().into_owned(),
        });
    }
    Some(BlockDevice {
        dev,
        name: real.file_name()?.to_string_lossy().into_owned(),
    })
}

/// Filesystem type and source of the last mount with device `dev` in a mountinfo.
fn mount_source(mountinfo: &MountInfos, dev: DevNum) -> Option<(String, String)> {
    let want = dev.to_string();
    let m = mountinfo.iter().rev().find(|m| m.majmin == want)?;
    // procfs reads a source `none` as no source.
    let source = m.mount_source.clone().unwrap_or_else(|| "none".to_string());
    Some((m.fs_type.clone(), source))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_source() {
        use procfs::FromBufRead;
        let mi = "22 1 0:21 / /data rw,relatime shared:1 - btrfs /dev/sdb2 rw\n\
                  23 1 254:0 / / rw - ext4 /dev/vda rw\n";
        let mi = &MountInfos::from_buf_read(mi.as_bytes()).unwrap();
        assert_eq!(
            mount_source(
                mi,
                DevNum {
                    major: 0,
                    minor: 21
                }
            ),
            Some(("btrfs".into(), "/dev/sdb2".into()))
        );
        assert_eq!(mount_source(mi, DevNum { major: 9, minor: 9 }), None);
    }

    #[test]
    fn devnum_format() {
        assert_eq!(
            DevNum::parse("254:0\n"),
            Some(DevNum {
                major: 254,
                minor: 0
            })
        );
        assert_eq!(
            DevNum {
                major: 8,
                minor: 16
            }
            .to_string(),
            "8:16"
        );
    }
}
