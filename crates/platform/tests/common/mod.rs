//! Shared helpers of the platform integration tests.
//!
//! Processes run inside tenants are this test binary re-invoked with
//! `ISOBENCH_TEST_HELPER=<mode>`: every test file has a `helper` test that runs the mode and
//! exits when the variable is set (and does nothing otherwise). So the tests need no tool
//! besides the kernel, `ip` and `tc`.
#![allow(dead_code)]

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use isobench_platform::{
    platform, NetSpec, PlatformKind, PlatformOptions, Role, RunGuard, RunId, TenantSpec,
};

pub const HELPER_ENV: &str = "ISOBENCH_TEST_HELPER";

#[path = "../../../../tests/skip.rs"]
mod skip_log;

/// Skips `test` for lack of `group` (root, iproute2, docker, vm, k8s, ...): prints the reason
/// past the test harness's output capture and records it for `scripts/test`'s list.
pub fn skip(group: &str, test: &str, why: &str) {
    skip_log::skip_test(group, test, why);
}

/// Whether the tests can do real work here; prints the reason when not.
pub fn root_or_skip(test: &str) -> bool {
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    if uid != 0 {
        skip("root", test, &format!("needs root (running as uid {uid})"));
        return false;
    }
    true
}

/// Whether `ip` works here; prints the reason when not.
pub fn net_or_skip(test: &str) -> bool {
    if !root_or_skip(test) {
        return false;
    }
    match Command::new("ip").arg("-V").output() {
        Ok(o) if o.status.success() => true,
        _ => {
            skip("iproute2", test, "the `ip` command (iproute2) is missing");
            false
        }
    }
}

/// A command that runs helper `mode` of this test binary.
pub fn helper_cmd(mode: &str) -> Command {
    let exe = std::env::current_exe().expect("current_exe");
    let mut c = Command::new(exe);
    c.args(["--exact", "helper", "--nocapture", "--test-threads=1"])
        .env(HELPER_ENV, mode)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    c
}

/// Waits for `child` at most `timeout`.
pub fn wait_timeout(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let end = Instant::now() + timeout;
    loop {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        if Instant::now() >= end {
            return None;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Whether a process exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            let state = s.rsplit(')').next().unwrap_or("").split_whitespace().next();
            !matches!(state, Some("Z") | Some("X") | None)
        }
        Err(_) => false,
    }
}

/// Every trace of run `id` still on the host, as readable lines (empty when clean).
pub fn leftovers(id: &RunId) -> Vec<String> {
    let prefix = id.prefix();
    let mut v = Vec::new();
    if let Ok(mounts) = fs::read_to_string("/proc/self/mounts") {
        for line in mounts.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 2 && (f[2] == "cgroup" || f[2] == "cgroup2") {
                if let Ok(rd) = fs::read_dir(f[1]) {
                    for e in rd.flatten() {
                        let n = e.file_name().to_string_lossy().into_owned();
                        if n.starts_with(&prefix) {
                            v.push(format!("cgroup {}/{n}", f[1]));
                        }
                    }
                }
            }
        }
    }
    if let Ok(rd) = fs::read_dir("/run/netns") {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with(&prefix) {
                v.push(format!("netns {n}"));
            }
        }
    }
    let link_prefix = format!("ib{}", id.tag());
    if let Ok(rd) = fs::read_dir("/sys/class/net") {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with(&link_prefix) {
                v.push(format!("link {n}"));
            }
        }
    }
    let tag = format!("ISOBENCH_RUN={id}");
    if let Ok(rd) = fs::read_dir("/proc") {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            let Ok(pid) = n.parse::<u32>() else { continue };
            if let Ok(env) = fs::read(format!("/proc/{pid}/environ")) {
                if env.split(|&b| b == 0).any(|kv| kv == tag.as_bytes()) && alive(pid) {
                    v.push(format!("process {pid}"));
                }
            }
        }
    }
    if Path::new("/run/isobench").join(id.as_str()).exists() {
        v.push(format!("state /run/isobench/{id}"));
    }
    if let Ok(rd) = fs::read_dir("/var/tmp") {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with(&prefix) {
                v.push(format!("workdir /var/tmp/{n}"));
            }
        }
    }
    v
}

/// Runs the helper named by `ISOBENCH_TEST_HELPER`, if any, and exits.
pub fn run_helper_if_requested() {
    let Ok(mode) = std::env::var(HELPER_ENV) else {
        return;
    };
    let code = match mode.as_str() {
        "idle" => loop {
            thread::sleep(Duration::from_secs(1));
        },
        "forkbomb" => forkbomb(),
        "spin" => spin(),
        "memhog" => memhog(),
        "tcp-server" => tcp_server(),
        "tcp-client" => tcp_client(),
        "crash-run" | "ctrlc-run" | "panic-run" => crash_run(&mode),
        other => {
            eprintln!("unknown helper mode {other}");
            2
        }
    };
    std::process::exit(code);
}

fn forkbomb() -> i32 {
    // Every process, parent and children alike, keeps forking; a failed fork waits a
    // millisecond and tries again. Only fork and usleep are called after the first fork.
    loop {
        // SAFETY: fork and usleep are async-signal-safe; nothing else runs in the children.
        unsafe {
            if libc::fork() < 0 {
                libc::usleep(1000);
            }
        }
    }
}

fn spin() -> i32 {
    let mut x: u64 = 1;
    loop {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

/// Busy loops outside any tenant, one per CPU, killed and reaped on drop.
pub struct Spinners(Vec<Child>);

impl Spinners {
    /// Starts one busy loop per CPU this process may use.
    pub fn per_cpu() -> Spinners {
        let n = thread::available_parallelism().map_or(2, |n| n.get());
        Spinners(
            (0..n)
                .map(|_| helper_cmd("spin").spawn().expect("spawning a busy loop"))
                .collect(),
        )
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn memhog() -> i32 {
    let total: usize = std::env::var("ISOBENCH_TEST_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256 << 20);
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    let mut done = 0;
    while done < total {
        let mut c = vec![0u8; 1 << 20];
        for i in (0..c.len()).step_by(4096) {
            c[i] = 1;
        }
        chunks.push(c);
        done += 1 << 20;
    }
    // Still alive: the limit did not hold.
    println!("allocated {done} bytes");
    0
}

fn tcp_server() -> i32 {
    let addr = std::env::var("ISOBENCH_TEST_ADDR").expect("ISOBENCH_TEST_ADDR");
    let conns: usize = std::env::var("ISOBENCH_TEST_CONNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let l = TcpListener::bind(&addr).expect("bind");
    for _ in 0..conns {
        let (mut s, _) = l.accept().expect("accept");
        let mut buf = vec![0u8; 64 << 10];
        let mut n: u64 = 0;
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => n += k as u64,
                Err(e) => {
                    eprintln!("read: {e}");
                    return 1;
                }
            }
        }
        s.write_all(n.to_string().as_bytes()).expect("reply");
    }
    0
}

fn tcp_client() -> i32 {
    let addr = std::env::var("ISOBENCH_TEST_ADDR").expect("ISOBENCH_TEST_ADDR");
    let bytes: usize = std::env::var("ISOBENCH_TEST_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1 << 20);
    let end = Instant::now() + Duration::from_secs(20);
    let mut s = loop {
        match TcpStream::connect(&addr) {
            Ok(s) => break s,
            Err(e) if Instant::now() < end => {
                let _ = e;
                thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                eprintln!("connect {addr}: {e}");
                return 1;
            }
        }
    };
    let chunk = vec![7u8; 64 << 10];
    let mut sent = 0;
    while sent < bytes {
        let k = chunk.len().min(bytes - sent);
        s.write_all(&chunk[..k]).expect("send");
        sent += k;
    }
    s.shutdown(std::net::Shutdown::Write).expect("shutdown");
    let mut reply = String::new();
    s.read_to_string(&mut reply).expect("reply");
    if reply.trim() == bytes.to_string() {
        0
    } else {
        eprintln!("server counted {reply}, sent {bytes}");
        1
    }
}

/// Creates a run with a cgroup tenant and a host tenant, each in its own network namespace
/// and running a process, reports the run id in `ISOBENCH_TEST_OUT`, then waits to be
/// killed (`crash-run`), interrupted (`ctrlc-run`) or panics (`panic-run`).
// The children are never waited for: this process is killed, interrupted or panics.
#[allow(clippy::zombie_processes)]
fn crash_run(mode: &str) -> i32 {
    let out = PathBuf::from(std::env::var("ISOBENCH_TEST_OUT").expect("ISOBENCH_TEST_OUT"));
    let guard = RunGuard::start().expect("run");
    let ctx = guard.context();
    if mode == "ctrlc-run" {
        let c = ctx.clone();
        ctrlc::set_handler(move || {
            let r = c.cleanup_now();
            eprint!("{r}");
            std::process::exit(130);
        })
        .expect("ctrlc handler");
    }
    let mut cg = platform(PlatformKind::CGROUP, PlatformOptions::new(ctx.clone())).expect("cgroup");
    let mut host = platform(PlatformKind::HOST, PlatformOptions::new(ctx)).expect("host");
    let a = cg
        .create_tenant(
            &TenantSpec::new("a", Role::Aggressor)
                .with_limits("pids=32,net_rate=10mbit".parse().unwrap())
                .with_network(NetSpec::default()),
        )
        .expect("tenant a");
    let b = host
        .create_tenant(&TenantSpec::new("b", Role::Victim).with_network(NetSpec::default()))
        .expect("tenant b");
    let _ca = a.spawn(helper_cmd("idle")).expect("spawn a");
    let _cb = b.spawn(helper_cmd("idle")).expect("spawn b");
    // A grandchild in the host tenant: killed by its tag although nobody waits for it.
    let mut sh = Command::new("sh");
    sh.args(["-c", "sleep 1000 & sleep 1000"]);
    let _cc = b.spawn(sh).expect("spawn sh");
    thread::sleep(Duration::from_millis(200));
    fs::write(&out, guard.id().as_str()).expect("write run id");
    if mode == "panic-run" {
        let go = out.with_extension("go");
        while !go.exists() {
            thread::sleep(Duration::from_millis(10));
        }
        panic!("deliberate panic with live tenants");
    }
    loop {
        thread::sleep(Duration::from_secs(1));
    }
}

/// Starts a crash helper and waits until it reports its run id.
pub fn start_crash_helper(mode: &str, out: &Path) -> (Child, RunId) {
    let mut cmd = helper_cmd(mode);
    cmd.env("ISOBENCH_TEST_OUT", out).stderr(Stdio::inherit());
    let mut child = cmd.spawn().expect("spawn helper");
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(t) = fs::read_to_string(out) {
            if t.len() == 8 {
                return (child, RunId::parse(&t).expect("run id"));
            }
        }
        if let Ok(Some(s)) = child.try_wait() {
            panic!("helper {mode} exited early: {s}");
        }
        assert!(
            Instant::now() < end,
            "helper {mode} did not report its run id"
        );
        thread::sleep(Duration::from_millis(20));
    }
}
