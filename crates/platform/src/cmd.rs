//! Running external tools (`ip`, `tc`, `docker`, ...) with a timeout and their stderr kept
//! for the error message.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use anyhow::{bail, Context, Result};

/// Default time limit for an administrative command.
pub(crate) const CMD_TIMEOUT: Duration = Duration::from_secs(20);

/// What a finished command printed.
#[derive(Debug)]
pub(crate) struct Output {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `prog args...`, waiting at most `timeout`; a command that overruns is killed.
pub(crate) fn run_with_timeout(prog: &str, args: &[&str], timeout: Duration) -> Result<Output> {
    run_with_input(prog, args, None, timeout)
}

/// Runs `prog args...` with `input` (if any) on its standard input, waiting at most
/// `timeout`; a command that overruns is killed.
pub(crate) fn run_with_input(
    prog: &str,
    args: &[&str],
    input: Option<&[u8]>,
    timeout: Duration,
) -> Result<Output> {
    let mut child = Command::new(prog)
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting `{prog}`"))?;
    let in_t = match (input, child.stdin.take()) {
        (Some(data), Some(mut w)) => {
            let data = data.to_vec();
            Some(thread::spawn(move || {
                use std::io::Write;
                // A command that exits early closes the pipe: its exit status tells why.
                let _ = w.write_all(&data);
            }))
        }
        _ => None,
    };
    let mut out = child.stdout.take().context("stdout pipe")?;
    let mut err = child.stderr.take().context("stderr pipe")?;
    let out_t = thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_t = thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = mpsc::channel();
    let waiter = thread::spawn(move || {
        let status = child.wait();
        let _ = tx.send(());
        status
    });
    let timed_out = rx.recv_timeout(timeout).is_err();
    if timed_out {
        // SAFETY: plain kill(2) of our own child, which has not been reaped yet (the waiter
        // thread is still blocked in wait).
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    let status = waiter
        .join()
        .map_err(|_| anyhow::anyhow!("waiter thread panicked"))?
        .with_context(|| format!("waiting for `{prog}`"))?;
    if let Some(t) = in_t {
        let _ = t.join();
    }
    let stdout = out_t.join().unwrap_or_default();
    let stderr = err_t.join().unwrap_or_default();
    if timed_out {
        bail!(
            "`{prog} {}` did not finish within {}s",
            args.join(" "),
            timeout.as_secs()
        );
    }
    Ok(Output {
        success: status.success(),
        stdout,
        stderr,
    })
}

/// Runs a command that must succeed; the error carries the command line and its stderr.
pub(crate) fn run_ok(prog: &str, args: &[&str]) -> Result<String> {
    let out = run_with_timeout(prog, args, CMD_TIMEOUT)?;
    if !out.success {
        bail!("`{prog} {}` failed: {}", args.join(" "), out.stderr.trim());
    }
    Ok(out.stdout)
}

/// `ip args...`
pub(crate) fn ip(args: &[&str]) -> Result<String> {
    run_ok("ip", args)
}

/// `tc args...`
pub(crate) fn tc(args: &[&str]) -> Result<String> {
    run_ok("tc", args)
}
