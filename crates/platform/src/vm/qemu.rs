//! QEMU: the command line of a guest (argument vectors only, never a shell), the choice of
//! accelerator (KVM when a tiny guest really boots with it, else TCG), and the vCPU threads.

use std::ffi::OsString;
use std::fs;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::initramfs::AGENT_PORT;

/// The QEMU binary.
pub const QEMU: &str = "qemu-system-x86_64";

/// How long the KVM check's guest may take to boot to its end (a working KVM needs about a
/// second; a broken one hangs).
const KVM_CHECK_TIMEOUT: Duration = Duration::from_secs(20);

/// TCG's translation cache, MiB (QEMU's default, 1 GiB, would count against the tenant's
/// memory).
pub const TCG_TB_SIZE_MIB: u64 = 64;

/// The accelerator guests run with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accel {
    /// Hardware virtualization.
    Kvm,
    /// Software emulation, with the reason KVM is not used.
    Tcg(String),
}

impl Accel {
    /// `kvm` or `tcg`.
    pub fn name(&self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg(_) => "tcg",
        }
    }
}

/// Everything a guest's command line is made of.
#[derive(Debug, Clone)]
pub struct GuestConfig {
    /// Object name (`isobench-<run>-<tenant>`), also QEMU's `-name`.
    pub name: String,
    /// Kernel image.
    pub kernel: PathBuf,
    /// Initramfs.
    pub initrd: PathBuf,
    /// vCPUs.
    pub cpus: u32,
    /// Guest memory, MiB.
    pub memory_mib: u64,
    /// The host end of the agent's virtio-serial port (a unix socket QEMU listens on).
    pub agent_socket: PathBuf,
    /// The guest console (serial port) is appended here.
    pub console_log: PathBuf,
    /// The guest's workdir (the disk is mounted there).
    pub guest_workdir: String,
    /// A raw disk image for the guest's workdir.
    pub disk: Option<PathBuf>,
    /// A TAP device and the guest's address (CIDR prefix length 24).
    pub net: Option<(String, Ipv4Addr)>,
    /// A pids limit inside the guest.
    pub pids: Option<u64>,
    /// The CPUs (vCPU numbers) the guest's agent may use, as a list (`1`, `0-1`).
    pub agent_cpus: Option<String>,
    /// Accelerator.
    pub accel: Accel,
}

/// A locally administered MAC address derived from the guest's IPv4 address.
pub fn mac_for(addr: Ipv4Addr) -> String {
    let o = addr.octets();
    format!("52:54:{:02x}:{:02x}:{:02x}:{:02x}", o[0], o[1], o[2], o[3])
}

/// `s` as a value inside a QEMU option string (`file,path=VALUE,append=on`): QEMU reads a
/// doubled comma as one comma of the value, so a path with a comma cannot end the value and
/// add an option of its own.
fn opt_value(s: &str) -> String {
    s.replace(',', ",,")
}

/// A path as a QEMU option value ([`opt_value`]).
fn opt_path(p: &std::path::Path) -> String {
    opt_value(&p.display().to_string())
}

impl GuestConfig {
    /// The kernel command line.
    pub fn append(&self) -> String {
        let mut a = vec![
            "console=ttyS0".to_string(),
            "panic=-1".into(),
            "loglevel=4".into(),
            "rdinit=/init".into(),
            // No 8250 probing beyond the console, no time lost on absent hardware.
            "8250.nr_uarts=1".into(),
            format!("isobench.workdir={}", self.guest_workdir),
        ];
        if let Some((_, ip)) = &self.net {
            a.push(format!("isobench.ip={ip}/24"));
        }
        if let Some(p) = self.pids {
            a.push(format!("isobench.pids={p}"));
        }
        if let Some(c) = &self.agent_cpus {
            a.push(format!("isobench.cpus={c}"));
        }
        a.join(" ")
    }

    /// QEMU's arguments.
    pub fn args(&self) -> Vec<OsString> {
        let mut v: Vec<OsString> = Vec::new();
        let mut push = |s: &str| v.push(OsString::from(s));
        push("-name");
        push(&format!("{},debug-threads=on", opt_value(&self.name)));
        push("-M");
        push("q35");
        match &self.accel {
            Accel::Kvm => {
                push("-accel");
                push("kvm");
                push("-cpu");
                push("host");
            }
            Accel::Tcg(_) => {
                push("-accel");
                push(&format!("tcg,tb-size={TCG_TB_SIZE_MIB}"));
                push("-cpu");
                push("max");
            }
        }
        push("-smp");
        push(&self.cpus.to_string());
        push("-m");
        push(&format!("{}M", self.memory_mib));
        push("-nodefaults");
        push("-no-user-config");
        push("-display");
        push("none");
        push("-no-reboot");
        // The console is appended to the log (a `file:` serial port would truncate it).
        push("-chardev");
        push(&format!(
            "file,id=console,path={},append=on",
            opt_path(&self.console_log)
        ));
        push("-serial");
        push("chardev:console");
        push("-kernel");
        push(&self.kernel.display().to_string());
        push("-initrd");
        push(&self.initrd.display().to_string());
        push("-append");
        push(&self.append());
        push("-device");
        push("virtio-serial-pci,id=vser0");
        push("-chardev");
        push(&format!(
            "socket,id=agent,path={},server=on,wait=off",
            opt_path(&self.agent_socket)
        ));
        push("-device");
        push(&format!(
            "virtserialport,bus=vser0.0,chardev=agent,name={AGENT_PORT}"
        ));
        if let Some(disk) = &self.disk {
            push("-drive");
            // cache=none: O_DIRECT on the host, so the tenant's blkio throttle applies.
            push(&format!(
                "file={},if=none,id=disk0,format=raw,cache=none,aio=threads",
                opt_path(disk)
            ));
            push("-device");
            push("virtio-blk-pci,drive=disk0");
        }
        if let Some((tap, ip)) = &self.net {
            push("-netdev");
            push(&format!(
                "tap,id=net0,ifname={},script=no,downscript=no",
                opt_value(tap)
            ));
            push("-device");
            push(&format!("virtio-net-pci,netdev=net0,mac={}", mac_for(*ip)));
        }
        v
    }
}

/// Whether QEMU is installed: its version line.
pub fn qemu_version() -> Result<String> {
    let out = Command::new(QEMU)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .with_context(|| {
            format!("running `{QEMU} --version`; install QEMU (`apt-get install qemu-system-x86`)")
        })?;
    if !out.status.success() {
        bail!("`{QEMU} --version` failed");
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string())
}

fn boot_id() -> String {
    procfs::sys::kernel::random::boot_id()
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The file the KVM check's result is kept in for this boot of the host.
fn accel_cache_file() -> PathBuf {
    crate::run::state_root().join("vm-accel")
}

/// The accelerator to use, checked once per process and cached for this boot of the host:
/// KVM when a guest really boots with it (a kernel without root file system, run to its
/// panic; `/dev/kvm` existing is not enough), else TCG with the reason.
pub fn accel(kernel: &Path) -> Accel {
    static ACCEL: OnceLock<Accel> = OnceLock::new();
    ACCEL.get_or_init(|| accel_uncached(kernel)).clone()
}

fn accel_uncached(kernel: &Path) -> Accel {
    if !Path::new("/dev/kvm").exists() {
        return Accel::Tcg("there is no /dev/kvm".into());
    }
    let id = boot_id();
    if let Ok(text) = fs::read_to_string(accel_cache_file()) {
        let mut parts = text.splitn(3, ' ');
        if parts.next() == Some(id.as_str()) {
            match (parts.next(), parts.next()) {
                (Some("kvm"), _) => return Accel::Kvm,
                (Some("tcg"), Some(why)) => return Accel::Tcg(why.trim().to_string()),
                _ => {}
            }
        }
    }
    let result = match kvm_boots(kernel, KVM_CHECK_TIMEOUT) {
        Ok(()) => Accel::Kvm,
        Err(e) => Accel::Tcg(format!("KVM does not boot a guest here: {e:#}")),
    };
    let line = match &result {
        Accel::Kvm => format!("{id} kvm\n"),
        Accel::Tcg(why) => format!("{id} tcg {}\n", why.replace('\n', " ")),
    };
    let _ = fs::create_dir_all(crate::run::state_root());
    let _ = fs::write(accel_cache_file(), line);
    result
}

/// Boots `kernel` with KVM and no root file system: it must reach its panic (and QEMU exit,
/// with `-no-reboot`) within `timeout`.
pub fn kvm_boots(kernel: &Path, timeout: Duration) -> Result<()> {
    let dir = tempfile_dir()?;
    let log = dir.join("console.log");
    let mut child = Command::new(QEMU)
        .args(["-accel", "kvm", "-M", "q35", "-cpu", "host", "-m", "128"])
        .args([
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-no-reboot",
        ])
        .arg("-serial")
        .arg(format!("file:{}", log.display()))
        .arg("-kernel")
        .arg(kernel)
        .args(["-append", "console=ttyS0 panic=-1 loglevel=4"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {QEMU}"))?;
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        if t0.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let console = fs::read_to_string(&log).unwrap_or_default();
    let _ = fs::remove_dir_all(&dir);
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut stderr);
    }
    match status {
        None => bail!("the guest hung (no end within {timeout:?})"),
        Some(s) if !s.success() => bail!(
            "QEMU failed ({s}): {}",
            stderr.lines().last().unwrap_or("").trim()
        ),
        Some(_) if !console.contains("Kernel panic") => {
            bail!("the guest stopped before the end of its boot")
        }
        Some(_) => Ok(()),
    }
}

fn tempfile_dir() -> Result<PathBuf> {
    let d = std::env::temp_dir().join(format!(
        "isobench-kvmcheck-{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    ));
    fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
    Ok(d)
}

/// The vCPU threads of QEMU process `pid` (named `CPU n/TCG` or `CPU n/KVM` with
/// `debug-threads=on`; one `ALL CPUs/TCG` thread without multi-threaded TCG), as
/// (thread id, vCPU index or `None` for all).
pub fn vcpu_threads(pid: u32) -> Vec<(i32, Option<u32>)> {
    let tasks = i32::try_from(pid)
        .ok()
        .and_then(|p| procfs::process::Process::new(p).ok()?.tasks().ok());
    let mut out = Vec::new();
    for task in tasks.into_iter().flatten().flatten() {
        let comm = task.stat().map(|s| s.comm).unwrap_or_default();
        if let Some(v) = parse_vcpu_comm(&comm) {
            out.push((task.tid, v));
        }
    }
    out.sort();
    out
}

/// `CPU 3/TCG` -> Some(Some(3)); `ALL CPUs/TCG` -> Some(None).
pub(crate) fn parse_vcpu_comm(comm: &str) -> Option<Option<u32>> {
    let (who, accel) = comm.split_once('/')?;
    if !matches!(accel, "TCG" | "KVM") {
        return None;
    }
    if who == "ALL CPUs" {
        return Some(None);
    }
    who.strip_prefix("CPU ")?.trim().parse().ok().map(Some)
}

/// Pins thread `tid` to `cpus`.
pub fn pin_thread(tid: i32, cpus: &[u32]) -> Result<()> {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: c is below CPU_SETSIZE for any cpuset this host has.
        unsafe { libc::CPU_SET(c as usize, &mut set) };
    }
    // SAFETY: the set is initialised and its size is passed.
    let r = unsafe { libc::sched_setaffinity(tid, std::mem::size_of_val(&set), &set) };
    if r != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("pinning thread {tid} to CPUs {cpus:?}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> GuestConfig {
        GuestConfig {
            name: "isobench-0badc0de-victim".into(),
            kernel: "/k/vmlinuz".into(),
            initrd: "/k/initrd.gz".into(),
            cpus: 2,
            memory_mib: 256,
            agent_socket: "/w/agent.sock".into(),
            console_log: "/w/console.log".into(),
            guest_workdir: "/var/tmp/isobench-0badc0de-victim".into(),
            disk: Some("/w/disk.img".into()),
            net: Some(("ib0badc0t0".into(), Ipv4Addr::new(10, 213, 7, 2))),
            pids: Some(256),
            agent_cpus: Some("1".into()),
            accel: Accel::Tcg("test".into()),
        }
    }

    #[test]
    fn the_command_line_has_every_part() {
        let args: Vec<String> = config()
            .args()
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        let joined = args.join(" ");
        for part in [
            "-name isobench-0badc0de-victim,debug-threads=on",
            "-accel tcg,tb-size=64 -cpu max",
            "-smp 2 -m 256M",
            "-chardev file,id=console,path=/w/console.log,append=on -serial chardev:console",
            "-kernel /k/vmlinuz -initrd /k/initrd.gz",
            "-chardev socket,id=agent,path=/w/agent.sock,server=on,wait=off",
            "virtserialport,bus=vser0.0,chardev=agent,name=isobench.agent",
            "file=/w/disk.img,if=none,id=disk0,format=raw,cache=none",
            "tap,id=net0,ifname=ib0badc0t0,script=no,downscript=no",
            "virtio-net-pci,netdev=net0,mac=52:54:0a:d5:07:02",
        ] {
            assert!(joined.contains(part), "{part} missing from {joined}");
        }
        // The command line is one argument.
        let append = &args[args.iter().position(|a| a == "-append").unwrap() + 1];
        assert!(append.contains("isobench.ip=10.213.7.2/24"), "{append}");
        assert!(append.contains("isobench.workdir=/var/tmp/isobench-0badc0de-victim"));
        assert!(append.contains("isobench.pids=256"));
        assert!(append.contains("isobench.cpus=1"));
        let mut kvm = config();
        kvm.accel = Accel::Kvm;
        kvm.net = None;
        kvm.disk = None;
        let joined: Vec<String> = kvm
            .args()
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        let joined = joined.join(" ");
        assert!(joined.contains("-accel kvm -cpu host"), "{joined}");
        assert!(
            !joined.contains("netdev") && !joined.contains("-drive"),
            "{joined}"
        );
    }

    #[test]
    fn a_comma_in_a_path_stays_in_its_value() {
        let mut c = config();
        c.console_log = "/w,script=/tmp/x/console.log".into();
        c.agent_socket = "/a,b/agent.sock".into();
        c.disk = Some("/d,format=qcow2/disk.img".into());
        let args: Vec<String> = c
            .args()
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        for want in [
            "file,id=console,path=/w,,script=/tmp/x/console.log,append=on",
            "socket,id=agent,path=/a,,b/agent.sock,server=on,wait=off",
            "file=/d,,format=qcow2/disk.img,if=none,id=disk0,format=raw,cache=none,aio=threads",
        ] {
            assert!(args.iter().any(|a| a == want), "{want} not in {args:?}");
        }
    }

    #[test]
    fn vcpu_thread_names() {
        assert_eq!(parse_vcpu_comm("CPU 0/TCG"), Some(Some(0)));
        assert_eq!(parse_vcpu_comm("CPU 12/KVM"), Some(Some(12)));
        assert_eq!(parse_vcpu_comm("ALL CPUs/TCG"), Some(None));
        assert_eq!(parse_vcpu_comm("qemu-system-x86"), None);
        assert_eq!(parse_vcpu_comm("worker/TCG"), None);
    }
}
