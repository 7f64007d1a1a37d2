//! A user's program run as a child of the workload: the `command` probe and stressor.
//!
//! The program is started without a shell (its command line split into words with
//! `shell-words`; a user who wants a shell writes `sh -c '...'`), in the workload's working
//! directory, with stdin from `/dev/null`, in a process group of its own, so that everything
//! it starts and does not move elsewhere can be stopped at once. Being a child of the
//! workload's process, it is in the same tenant: the same cgroup, so frozen and thawed with
//! it, limited with it.
//!
//! Stopping: the group gets the stop signal (SIGTERM unless told otherwise), then, when the
//! program has not exited after a grace period, SIGKILL. A program that exits by itself may
//! leave processes behind in its group (a command ending in `&`): they are stopped the same
//! way before the run counts as over, so no run leaves anything running. A process that left
//! the group (a daemon calling `setsid`) is out of reach; it stays in the tenant, whose
//! teardown removes it. The program also gets SIGKILL should the thread that started it die
//! (`PR_SET_PDEATHSIG`), so a killed agent does not leave it running.
//!
//! Both output streams are always read to their end, so a chatty program never blocks on a
//! full pipe: the whole of a stream is kept when it is to be parsed (up to
//! [`MAX_KEPT`] bytes), else only its last lines, for error messages.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::extract::show_tail;

/// Most bytes of one stream kept for parsing; a longer output keeps its last bytes.
pub const MAX_KEPT: usize = 64 << 20;

/// Lines kept of a stream that is not parsed.
const TAIL_KEPT: usize = 20;

/// Longest line handed to a line callback; a longer one is cut in pieces of this size.
const MAX_LINE: u64 = 1 << 20;

/// How often a wait looks at the stop flag and the deadline.
const POLL: Duration = Duration::from_millis(20);

/// One of the program's output streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl Stream {
    /// From a parameter's word (`stdout`, `stderr`).
    pub fn from_word(w: &str) -> Stream {
        if w == "stderr" {
            Stream::Stderr
        } else {
            Stream::Stdout
        }
    }

    /// The stream's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// Called with each line of a stream as it arrives.
pub type LineFn = Box<dyn FnMut(&str) + Send>;

/// What to start and how.
pub struct Launch<'a> {
    /// Program and arguments.
    pub argv: &'a [String],
    /// Working directory.
    pub workdir: &'a Path,
    /// Pin the program (and what it starts) to this CPU.
    pub cpu: Option<usize>,
    /// Keep the whole of this stream (for parsing); the other keeps its last lines.
    pub keep_all: Option<Stream>,
    /// Hand every line of a stream to a callback as it arrives.
    pub on_line: Option<(Stream, LineFn)>,
}

/// Splits a command line into words as a POSIX shell would, without running one; `param`
/// names the parameter it came from.
pub fn split_command(param: &str, line: &str) -> anyhow::Result<Vec<String>> {
    let words = shell_words::split(line).map_err(|e| {
        anyhow::anyhow!("`{param}={line}` does not split into words ({e}): close its quotes")
    })?;
    if words.is_empty() {
        anyhow::bail!(
            "`{param}` is empty: give the command line to run, e.g. {param}=\"stress-ng --cpu 1\" \
             (no shell: write {param}=\"sh -c '...'\" for pipes or redirections)"
        );
    }
    Ok(words)
}

/// How the program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

impl Status {
    fn from_wait(raw: i32) -> Status {
        if libc::WIFSIGNALED(raw) {
            Status::Signal(libc::WTERMSIG(raw))
        } else {
            Status::Code(libc::WEXITSTATUS(raw))
        }
    }

    /// True for exit code 0.
    pub fn success(self) -> bool {
        self == Status::Code(0)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Status::Code(c) => write!(f, "exit code {c}"),
            Status::Signal(s) => write!(f, "signal {s} ({})", signal_name(*s)),
        }
    }
}

fn signal_name(s: i32) -> &'static str {
    match s {
        libc::SIGTERM => "SIGTERM",
        libc::SIGKILL => "SIGKILL",
        libc::SIGINT => "SIGINT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGBUS => "SIGBUS",
        _ => "a signal",
    }
}

/// Why a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The program exited by itself.
    Exited,
    /// It was stopped because the stop condition turned true.
    Stopped,
    /// It was stopped at its deadline.
    TimedOut,
}

/// A stream as read: all of it, or its last lines.
#[derive(Debug, Clone, Default)]
pub struct Output {
    /// The text (lossy UTF-8).
    pub text: String,
    /// True when the beginning was dropped (a tail, or more than [`MAX_KEPT`] bytes).
    pub truncated: bool,
}

/// A finished run of the program.
#[derive(Debug, Clone)]
pub struct Finished {
    /// Why it ended.
    pub end: End,
    /// Its exit status.
    pub status: Status,
    /// Wall time from just before it started to its exit.
    pub wall: Duration,
    /// CPU time (user + system) of the program and the children it waited for.
    pub cpu: Duration,
    /// Its standard output.
    pub stdout: Output,
    /// Its standard error.
    pub stderr: Output,
}

impl Finished {
    /// The stream `s`.
    pub fn stream(&self, s: Stream) -> &Output {
        match s {
            Stream::Stdout => &self.stdout,
            Stream::Stderr => &self.stderr,
        }
    }

    /// The last lines of its standard error, for an error message.
    pub fn stderr_tail(&self) -> String {
        show_tail("stderr", &self.stderr.text)
    }
}

struct Exit {
    raw: i32,
    at: Instant,
    cpu: Duration,
}

/// A started program.
pub struct Running {
    pid: i32,
    started: Instant,
    exit: Receiver<Exit>,
    stdout: Receiver<Output>,
    stderr: Receiver<Output>,
}

impl Running {
    /// Starts the program. A program that is not found or may not be run is an error that
    /// says so and names `param`, the parameter holding the command.
    pub fn start(param: &str, mut launch: Launch<'_>) -> anyhow::Result<Running> {
        let program = &launch.argv[0];
        if !launch.workdir.is_dir() {
            anyhow::bail!(
                "the working directory {} does not exist",
                launch.workdir.display()
            );
        }
        let mut cmd = Command::new(program);
        cmd.args(&launch.argv[1..])
            .current_dir(launch.workdir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let cpu = launch.cpu;
        // SAFETY: between fork and exec the closure makes only async-signal-safe system
        // calls (prctl, signal, sched_setaffinity) on stack data; it allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                );
                // A workload started with these ignored (from a shell's background) would
                // hand that on, and the program could not be stopped politely.
                libc::signal(libc::SIGTERM, libc::SIG_DFL);
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                if let Some(c) = cpu {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(c, &mut set);
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                }
                Ok(())
            });
        }
        let started = Instant::now();
        let mut child = cmd.spawn().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => anyhow::anyhow!(
                "command `{program}` not found: fix `{param}` (give a program on the PATH of the \
                 workload's process, or its full path; there is no shell unless you write \
                 `sh -c '...'`)"
            ),
            std::io::ErrorKind::PermissionDenied => anyhow::anyhow!(
                "command `{program}` may not be run (permission denied): fix `{param}` or the \
                 file's mode"
            ),
            _ => anyhow::anyhow!("command `{program}` did not start: {e}; check `{param}`"),
        })?;
        let pid = child.id() as i32;
        let mut watch = launch.on_line.take();
        let mut reader = |s: Stream, r: Box<dyn Read + Send>| {
            let on_line = match &watch {
                Some((ws, _)) if *ws == s => watch.take().map(|(_, f)| f),
                _ => None,
            };
            spawn_reader(s, r, launch.keep_all == Some(s), on_line)
        };
        let stdout = match child.stdout.take() {
            Some(o) => reader(Stream::Stdout, Box::new(o)),
            None => closed(),
        };
        let stderr = match child.stderr.take() {
            Some(e) => reader(Stream::Stderr, Box::new(e)),
            None => closed(),
        };
        // The child is reaped with wait4 below (for its CPU time), not through `child`.
        drop(child);
        let (tx, exit) = mpsc::channel();
        let waiter = std::thread::Builder::new()
            .name("command-wait".into())
            .spawn(move || {
                let mut raw = 0;
                // SAFETY: rusage is plain data that wait4 fills in.
                let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
                loop {
                    // SAFETY: waits for our own child; raw and ru are valid for writes.
                    let r = unsafe { libc::wait4(pid, &mut raw, 0, &mut ru) };
                    if r == pid {
                        break;
                    }
                    if r < 0
                        && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
                    {
                        // Not our child any more (reaped elsewhere): report it gone.
                        raw = 0;
                        break;
                    }
                }
                let at = Instant::now();
                let tv = |t: libc::timeval| {
                    Duration::from_secs(t.tv_sec.max(0) as u64)
                        + Duration::from_micros(t.tv_usec.max(0) as u64)
                };
                let _ = tx.send(Exit {
                    raw,
                    at,
                    cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
                });
            });
        if let Err(e) = waiter {
            kill_group(pid, libc::SIGKILL);
            anyhow::bail!("cannot watch command `{program}`: {e}");
        }
        Ok(Running {
            pid,
            started,
            exit,
            stdout,
            stderr,
        })
    }

    /// The program's process id, which is also its process group's.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Waits until the program exits, or `stop()` turns true, or `deadline` passes; in the
    /// two latter cases stops it (`signal` to its group, SIGKILL after `grace`). Whatever the
    /// program left running in its group is stopped the same way before this returns.
    pub fn finish(
        self,
        stop: &dyn Fn() -> bool,
        deadline: Option<Instant>,
        signal: i32,
        grace: Duration,
    ) -> Finished {
        let mut end = End::Exited;
        let exit = loop {
            match self.exit.recv_timeout(POLL) {
                Ok(e) => break e,
                Err(RecvTimeoutError::Timeout) => {
                    if stop() {
                        end = End::Stopped;
                    } else if deadline.is_some_and(|d| Instant::now() >= d) {
                        end = End::TimedOut;
                    } else {
                        continue;
                    }
                    break self.stop(signal, grace);
                }
                Err(RecvTimeoutError::Disconnected) => break self.lost(),
            }
        };
        sweep_group(self.pid, signal, grace);
        // The streams end once every process holding them is gone; one that escaped the
        // group may hold them longer, and is not waited for past the grace period.
        let read = |rx: &Receiver<Output>| {
            rx.recv_timeout(grace.max(Duration::from_millis(500)))
                .unwrap_or_else(|_| Output {
                    text: "(output not read to its end: a process that left the program's \
                           group still holds it)"
                        .into(),
                    truncated: true,
                })
        };
        let stdout = read(&self.stdout);
        let stderr = read(&self.stderr);
        Finished {
            end,
            status: Status::from_wait(exit.raw),
            wall: exit.at.saturating_duration_since(self.started),
            cpu: exit.cpu,
            stdout,
            stderr,
        }
    }

    fn stop(&self, signal: i32, grace: Duration) -> Exit {
        kill_group(self.pid, signal);
        if let Ok(e) = self.exit.recv_timeout(grace) {
            return e;
        }
        kill_group(self.pid, libc::SIGKILL);
        // SIGKILL cannot be caught; only a frozen or uninterruptible process takes long.
        match self.exit.recv_timeout(Duration::from_secs(60)) {
            Ok(e) => e,
            Err(_) => self.lost(),
        }
    }

    fn lost(&self) -> Exit {
        Exit {
            raw: libc::SIGKILL,
            at: Instant::now(),
            cpu: Duration::ZERO,
        }
    }
}

/// Sends `signal` to process group `pgid`.
fn kill_group(pgid: i32, signal: i32) {
    if pgid > 1 {
        // SAFETY: plain system call; a negative pid addresses the group.
        unsafe {
            libc::kill(-pgid, signal);
        }
    }
}

/// True while process group `pgid` has a member that is not a zombie. A killed member is a
/// zombie until its parent reaps it, and an orphan's new parent (the tenant's init) may take
/// its time: a zombie holds nothing, so it is not waited for.
fn group_alive(pgid: i32) -> bool {
    // SAFETY: signal 0 only checks.
    if pgid <= 1 || unsafe { libc::kill(-pgid, 0) } != 0 {
        return false;
    }
    let Some(states) = crate::util::group_states(pgid) else {
        return true;
    };
    states.iter().any(|s| !matches!(s, 'Z' | 'X'))
}

/// Stops what is left in group `pgid`: `signal`, then SIGKILL after `grace`.
fn sweep_group(pgid: i32, signal: i32, grace: Duration) {
    if !group_alive(pgid) {
        return;
    }
    kill_group(pgid, signal);
    let until = Instant::now() + grace;
    while group_alive(pgid) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    if group_alive(pgid) {
        kill_group(pgid, libc::SIGKILL);
        let until = Instant::now() + Duration::from_secs(2);
        while group_alive(pgid) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn closed() -> Receiver<Output> {
    let (tx, rx) = mpsc::channel();
    let _ = tx.send(Output::default());
    rx
}

/// Reads a stream to its end on a thread of its own.
fn spawn_reader(
    s: Stream,
    r: Box<dyn Read + Send>,
    keep_all: bool,
    mut on_line: Option<LineFn>,
) -> Receiver<Output> {
    let (tx, rx) = mpsc::channel();
    let body = move || {
        let mut r = BufReader::new(r);
        let mut all: Vec<u8> = Vec::new();
        let mut dropped = false;
        let mut tail: VecDeque<String> = VecDeque::new();
        let mut line = Vec::new();
        loop {
            line.clear();
            match r.by_ref().take(MAX_LINE).read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let text = String::from_utf8_lossy(&line);
            if let Some(f) = on_line.as_mut() {
                f(text.trim_end_matches(['\n', '\r']));
            }
            if keep_all {
                all.extend_from_slice(&line);
                if all.len() > MAX_KEPT {
                    let cut = all.len() - MAX_KEPT;
                    all.drain(..cut);
                    dropped = true;
                }
            } else {
                tail.push_back(text.into_owned());
                if tail.len() > TAIL_KEPT {
                    tail.pop_front();
                    dropped = true;
                }
            }
        }
        let text = if keep_all {
            String::from_utf8_lossy(&all).into_owned()
        } else {
            tail.into_iter().collect()
        };
        let _ = tx.send(Output {
            text,
            truncated: dropped,
        });
    };
    let name = format!("command-{}", s.as_str());
    if let Err(e) = std::thread::Builder::new().name(name).spawn(body) {
        let (tx, rx) = mpsc::channel();
        let _ = tx.send(Output {
            text: format!("(output not read: {e})"),
            truncated: true,
        });
        return rx;
    }
    rx
}
