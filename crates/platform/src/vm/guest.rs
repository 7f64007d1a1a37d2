//! A running guest: QEMU started (by whatever puts it in its cgroup), its boot watched on
//! the console log, and the agent's socket connected once the guest's init says the agent
//! is starting.

use std::fs;
use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::qemu::{GuestConfig, QEMU};

/// The line the guest's init prints just before it starts the agent.
pub(crate) const READY_LINE: &str = "isobench-init: ready";

/// How long a guest may take to boot (TCG on a busy 2-CPU host is slow).
pub(crate) const BOOT_TIMEOUT: Duration = Duration::from_secs(180);

/// The QEMU command of `config`, with its standard output and error appended to `log`.
pub(crate) fn command(config: &GuestConfig, log: &Path) -> Result<Command> {
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("opening {}", log.display()))?;
    let mut cmd = Command::new(QEMU);
    cmd.args(config.args())
        .stdin(Stdio::null())
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log));
    Ok(cmd)
}

/// Copies what the guest writes to its console (`console`, from byte `offset` on) to `log`
/// as it comes, until QEMU (`pid`) has exited, in a thread of its own.
pub(crate) fn copy_console(console: &Path, offset: u64, log: &Path, pid: u32) {
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    if same(console, log) {
        return;
    }
    let (console, log) = (console.to_path_buf(), log.to_path_buf());
    let copy = move || {
        use std::io::{Seek, SeekFrom, Write};
        let Ok(mut out) = fs::OpenOptions::new().create(true).append(true).open(&log) else {
            return;
        };
        let mut at = offset;
        let mut buf = Vec::new();
        loop {
            let done = !crate::procs::alive(pid as i32);
            if let Ok(mut f) = fs::File::open(&console) {
                if f.seek(SeekFrom::Start(at)).is_ok() {
                    buf.clear();
                    if let Ok(n) = f.read_to_end(&mut buf) {
                        at += n as u64;
                        let _ = out.write_all(&buf);
                    }
                }
            }
            if done {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let _ = std::thread::Builder::new()
        .name("vm-console".into())
        .spawn(copy);
}

/// The last `n` lines of a console log, for error messages.
pub(crate) fn log_tail(path: &Path, n: usize) -> String {
    let mut text = String::new();
    if let Ok(mut f) = fs::File::open(path) {
        let _ = f.read_to_string(&mut text);
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Waits until the guest's init prints [`READY_LINE`] in the console log after byte
/// `offset` (what an earlier boot appended comes before), or QEMU exits, or `timeout`
/// passes; then connects to the agent's socket. Returns the stream and the boot time.
pub(crate) fn wait_ready(
    child: &mut Child,
    config: &GuestConfig,
    offset: u64,
    timeout: Duration,
) -> Result<(UnixStream, Duration)> {
    let t0 = Instant::now();
    loop {
        let console = fs::read(&config.console_log).unwrap_or_default();
        let new = console.get(offset as usize..).unwrap_or_default();
        if String::from_utf8_lossy(new).contains(READY_LINE) {
            break;
        }
        if let Some(status) = child.try_wait()? {
            bail!(
                "QEMU exited ({status}) before the guest was ready; the console ends with:\n{}",
                log_tail(&config.console_log, 15)
            );
        }
        if t0.elapsed() > timeout {
            bail!(
                "the guest was not ready within {timeout:?}; the console ends with:\n{}",
                log_tail(&config.console_log, 15)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let boot = t0.elapsed();
    let stream = UnixStream::connect(&config.agent_socket).with_context(|| {
        format!(
            "connecting to the agent's port {}",
            config.agent_socket.display()
        )
    })?;
    Ok((stream, boot))
}
