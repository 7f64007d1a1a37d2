//! The guest's initramfs, built by isobench: the static isobench binary, busybox-static with
//! its applet links, the virtio drivers the kernel has as modules, and an `/init` that
//! prepares the guest and runs `isobench agent --serial` (powering off when it ends).
//!
//! Archives are cached by content key (inputs' paths, sizes and times, and the init script),
//! so a rebuilt binary gives a new archive and an unchanged one is reused.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::cpio::CpioWriter;
use super::kernel::Kernel;

/// Where busybox-static installs its binary on Debian.
pub const BUSYBOX: &str = "/bin/busybox";

/// The name of the virtio-serial port the agent serves on.
pub const AGENT_PORT: &str = "isobench.agent";

/// The drivers a guest needs (with their dependencies): PCI transport, the agent's serial
/// port, the disk, the network.
const MODULES: &[&str] = &["virtio_pci", "virtio_console", "virtio_blk", "virtio_net"];

/// `/init`. Parameters come from the kernel command line: `isobench.workdir=` (the tenant's
/// workdir; the virtio disk, when there is one, is mounted there), `isobench.ip=` (the
/// address of `eth0`, CIDR; no default route), `isobench.pids=` (a pids limit for everything
/// the agent starts), `isobench.cpus=` (the CPUs the agent and its workloads may use: the
/// tenant's cpuset, numbered as on the host).
pub(crate) const INIT: &str = r#"#!/bin/sh
# isobench guest init: mounts, drivers, network, disk, then the agent; power off when it ends.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm /tmp /run
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /dev/shm
for m in $(cat /etc/isobench-modules); do insmod "/lib/modules/$m" || echo "isobench-init: insmod $m failed"; done
workdir=/work
ip=
pids=
cpus=
for w in $(cat /proc/cmdline); do
  case "$w" in
    isobench.workdir=*) workdir="${w#*=}" ;;
    isobench.ip=*) ip="${w#*=}" ;;
    isobench.pids=*) pids="${w#*=}" ;;
    isobench.cpus=*) cpus="${w#*=}" ;;
  esac
done
ip link set lo up
if [ -n "$ip" ]; then
  n=0
  while [ ! -e /sys/class/net/eth0 ] && [ $n -lt 50 ]; do sleep 0.1; n=$((n+1)); done
  ip addr add "$ip" dev eth0 && ip link set eth0 up || echo "isobench-init: eth0 $ip failed"
fi
mkdir -p "$workdir"
n=0
while [ ! -e /sys/class/virtio-ports ] && [ $n -lt 50 ]; do sleep 0.1; n=$((n+1)); done
if [ -b /dev/vda ]; then
  mount -t ext4 /dev/vda "$workdir" || echo "isobench-init: mounting /dev/vda failed"
fi
if [ -n "$pids" ]; then
  mkdir -p /sys/fs/cgroup
  mount -t cgroup2 cgroup2 /sys/fs/cgroup && echo +pids > /sys/fs/cgroup/cgroup.subtree_control \
    && mkdir /sys/fs/cgroup/agent && echo "$pids" > /sys/fs/cgroup/agent/pids.max \
    && echo $$ > /sys/fs/cgroup/agent/cgroup.procs || echo "isobench-init: pids limit failed"
fi
cd "$workdir"
export ISOBENCH_WORKDIR="$workdir" HOME="$workdir"
echo "isobench-init: ready in $(cut -d' ' -f1 /proc/uptime) s, starting the agent"
if [ -n "$cpus" ]; then
  taskset -c "$cpus" /bin/isobench agent --serial isobench.agent
else
  /bin/isobench agent --serial isobench.agent
fi
echo "isobench-init: agent exited ($?), powering off"
sync
poweroff -f
"#;

/// Whether the ELF file at `path` is statically linked (no program interpreter).
pub(crate) fn is_static_elf(path: &Path) -> Result<bool> {
    let head = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if head.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        bail!("{} is not a 64-bit little-endian ELF file", path.display());
    }
    let u16_at = |o: usize| head.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| {
        head.get(o..o + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |o: usize| {
        head.get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    };
    let (Some(phoff), Some(size), Some(count)) = (u64_at(32), u16_at(54), u16_at(56)) else {
        bail!("{} has a truncated ELF header", path.display());
    };
    for i in 0..count as usize {
        if u32_at(phoff as usize + i * size as usize) == Some(3) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Every `.ko` under `dir`, by module name (`-` read as `_`).
fn module_index(dir: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Some(n) = p.file_name().and_then(|n| n.to_str()) {
                if let Some(stem) = n.strip_suffix(".ko") {
                    out.insert(stem.replace('-', "_"), p);
                }
            }
        }
    }
    out
}

/// The `depends=` entry of a module's `.modinfo`.
fn module_depends(ko: &[u8]) -> Vec<String> {
    let key = b"depends=";
    let Some(at) = ko.windows(key.len()).position(|w| w == key) else {
        return Vec::new();
    };
    let rest = &ko[at + key.len()..];
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    String::from_utf8_lossy(&rest[..end])
        .split(',')
        .map(|s| s.trim().replace('-', "_"))
        .filter(|s| !s.is_empty())
        .collect()
}

/// The modules to load, dependencies first, as paths relative to `dir`. Modules the kernel
/// does not have as files are taken as built in.
pub(crate) fn module_order(dir: &Path, wanted: &[&str]) -> Result<Vec<PathBuf>> {
    let index = module_index(dir);
    let mut order = Vec::new();
    let mut seen = BTreeSet::new();
    fn visit(
        name: &str,
        index: &BTreeMap<String, PathBuf>,
        seen: &mut BTreeSet<String>,
        order: &mut Vec<PathBuf>,
        depth: usize,
    ) -> Result<()> {
        if depth > 32 {
            bail!("module dependencies of {name} loop");
        }
        if !seen.insert(name.to_string()) {
            return Ok(());
        }
        let Some(path) = index.get(name) else {
            return Ok(());
        };
        let bytes = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        for dep in module_depends(&bytes) {
            visit(&dep, index, seen, order, depth + 1)?;
        }
        order.push(path.clone());
        Ok(())
    }
    for w in wanted {
        visit(w, &index, &mut seen, &mut order, 0)?;
    }
    Ok(order
        .into_iter()
        .map(|p| p.strip_prefix(dir).map(Path::to_path_buf).unwrap_or(p))
        .collect())
}

/// The applets of a busybox binary (`busybox --list`).
fn busybox_applets(busybox: &Path) -> Result<Vec<String>> {
    let out = std::process::Command::new(busybox)
        .arg("--list")
        .output()
        .with_context(|| format!("running {} --list", busybox.display()))?;
    if !out.status.success() {
        bail!("{} --list failed", busybox.display());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|a| !a.is_empty() && !a.contains('/') && *a != "busybox")
        .map(str::to_string)
        .collect())
}

fn stamp(p: &Path) -> String {
    match fs::metadata(p) {
        Ok(m) => {
            use std::os::unix::fs::MetadataExt;
            format!(
                "{}:{}:{}.{}",
                p.display(),
                m.len(),
                m.mtime(),
                m.mtime_nsec()
            )
        }
        Err(_) => format!("{}:missing", p.display()),
    }
}

/// FNV-1a, 64 bits: a content key for file names, not a security measure.
fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// Builds (or reuses) the initramfs for `kernel` carrying the static isobench `exe`, in
/// `dir`; returns its path.
pub fn build(dir: &Path, kernel: &Kernel, exe: &Path) -> Result<PathBuf> {
    let busybox = Path::new(BUSYBOX);
    if !busybox.is_file() || !is_static_elf(busybox).unwrap_or(false) {
        bail!(
            "{BUSYBOX} is missing or not statically linked; install busybox-static \
             (`apt-get install busybox-static`)"
        );
    }
    if !is_static_elf(exe)? {
        bail!(
            "{} is not statically linked, so it cannot run in a guest; build one with \
             `scripts/build-static`",
            exe.display()
        );
    }
    let modules = match &kernel.modules {
        Some(m) => module_order(m, MODULES)?,
        None => Vec::new(),
    };
    let mut key = format!("{}\n{}\n{}\n", stamp(exe), stamp(busybox), INIT);
    for m in &modules {
        key.push_str(&m.display().to_string());
        key.push('\n');
    }
    if let Some(m) = &kernel.modules {
        key.push_str(&stamp(m));
    }
    let path = dir.join(format!("initramfs-{:016x}.cpio.gz", fnv1a(&key)));
    if path.is_file() {
        return Ok(path);
    }
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = dir.join(format!(".initramfs.{}.tmp", std::process::id()));
    let write = || -> Result<()> {
        let file = fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let gz = flate2::write::GzEncoder::new(
            std::io::BufWriter::new(file),
            flate2::Compression::fast(),
        );
        let mut w = CpioWriter::new(gz);
        for d in [
            "bin",
            "dev",
            "etc",
            "proc",
            "sys",
            "tmp",
            "run",
            "mnt",
            "root",
            "lib",
            "lib/modules",
        ] {
            w.dir(d, 0o755)?;
        }
        w.char_device("dev/console", 0o600, 5, 1)?;
        w.char_device("dev/null", 0o666, 1, 3)?;
        w.file("init", 0o755, INIT.as_bytes())?;
        let bb = fs::read(busybox).with_context(|| format!("reading {BUSYBOX}"))?;
        w.file("bin/busybox", 0o755, &bb)?;
        for a in busybox_applets(busybox)? {
            w.symlink(&format!("bin/{a}"), "busybox")?;
        }
        let me = fs::read(exe).with_context(|| format!("reading {}", exe.display()))?;
        w.file("bin/isobench", 0o755, &me)?;
        let mut list = String::new();
        let mut made: BTreeSet<PathBuf> = BTreeSet::new();
        if let Some(root) = &kernel.modules {
            for m in &modules {
                let mut parents: Vec<&Path> = m.ancestors().skip(1).collect();
                parents.reverse();
                for p in parents {
                    if !p.as_os_str().is_empty() && made.insert(p.to_path_buf()) {
                        w.dir(&format!("lib/modules/{}", p.display()), 0o755)?;
                    }
                }
                let bytes = fs::read(root.join(m))?;
                w.file(&format!("lib/modules/{}", m.display()), 0o644, &bytes)?;
                list.push_str(&format!("{}\n", m.display()));
            }
        }
        w.file("etc/isobench-modules", 0o644, list.as_bytes())?;
        let mut gz = w.finish()?;
        gz.flush()?;
        gz.finish()?.flush()?;
        Ok(())
    };
    if let Err(e) = write() {
        let _ = fs::remove_file(&tmp);
        return Err(e.context(format!("writing the initramfs {}", path.display())));
    }
    fs::rename(&tmp, &path)
        .with_context(|| format!("moving the initramfs to {}", path.display()))?;
    // Older archives of the same kernel are superseded.
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with("initramfs-") && e.path() != path {
                let age = e.metadata().and_then(|m| m.modified()).ok();
                let old = age
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|a| a > std::time::Duration::from_secs(3600));
                if old {
                    let _ = fs::remove_file(e.path());
                }
            }
        }
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_ko(deps: &str) -> Vec<u8> {
        let mut v = b"\x7fELF junk\0license=GPL\0".to_vec();
        v.extend_from_slice(format!("depends={deps}\0").as_bytes());
        v.extend_from_slice(b"name=x\0");
        v
    }

    #[test]
    fn modules_load_after_their_dependencies() {
        let d = tempfile::tempdir().unwrap();
        let k = d.path().join("kernel/drivers");
        fs::create_dir_all(k.join("virtio")).unwrap();
        fs::create_dir_all(k.join("char")).unwrap();
        fs::write(k.join("virtio/virtio.ko"), fake_ko("")).unwrap();
        fs::write(k.join("virtio/virtio_ring.ko"), fake_ko("")).unwrap();
        fs::write(
            k.join("virtio/virtio_pci.ko"),
            fake_ko("virtio_ring,virtio"),
        )
        .unwrap();
        fs::write(
            k.join("char/virtio_console.ko"),
            fake_ko("virtio_ring,virtio"),
        )
        .unwrap();
        let order =
            module_order(d.path(), &["virtio_pci", "virtio_console", "virtio_blk"]).unwrap();
        let names: Vec<String> = order.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            names,
            [
                "kernel/drivers/virtio/virtio_ring.ko",
                "kernel/drivers/virtio/virtio.ko",
                "kernel/drivers/virtio/virtio_pci.ko",
                "kernel/drivers/char/virtio_console.ko",
            ]
        );
    }

    /// The test suite is built with a static C library by scripts/test (one build makes the
    /// static isobench too) and dynamically by a plain `cargo test`: either way the check
    /// reads what the build was.
    #[test]
    fn the_test_binary_is_static_exactly_when_built_so() {
        let me = std::env::current_exe().unwrap();
        assert_eq!(
            is_static_elf(&me).unwrap(),
            cfg!(target_feature = "crt-static")
        );
        assert!(is_static_elf(Path::new("/etc/hostname")).is_err());
    }
}
