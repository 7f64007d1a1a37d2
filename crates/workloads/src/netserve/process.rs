//! A server in a process of its own: both ends of `isobench netserve`.
//!
//! Why: a probe that measures a path between two ends should not share its process with the
//! other end (an address space, a file table, the allocator, per-process scheduling), so that
//! what it measures is the path and not how the two ends share one process. The reference
//! tools (iperf3, qperf, sockperf) always run server and client as separate processes, so the
//! probes do too.
//!
//! The library cannot know where the isobench binary is, so the caller names it
//! ([`crate::ProbeCtx::server_exe`]). [`ServerProcess::spawn`] runs `EXE serve KIND --bind
//! ADDR [--pin CPU] --io-timeout-ms MS`; that command calls [`serve_until_stopped`] on its
//! standard input and output. The conversation is JSON lines on the child's stdout, one
//! [`ServeEvent`] each:
//!
//! ```text
//! << {"event":"ready","addr":"127.0.0.1:40321"}
//! >> stop                 (any line on stdin, or its end)
//! << {"event":"stopped","stats":{...},"last_conn_error":null,"failure":null}
//! ```
//!
//! The child is a child of the probe's process, so it is in the same tenant: the same cgroup
//! (a forked process inherits it), the same network namespace, the same process group and
//! environment (which is how `isobench cleanup` finds it). It never outlives the probe: it
//! stops at the end of its standard input (the probe's end closes when the probe's process
//! dies), the kernel kills it when the thread that started it ends (`PR_SET_PDEATHSIG`),
//! and dropping a [`ServerProcess`] that was not stopped kills and reaps it.

use std::io::{self, BufRead, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{start_server_with, wait_readable, ServerKind, ServerOptions, ServerStats};

/// Longest wait for a server process to report its address (exec plus bind).
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest wait, after asking a server process to stop, for its final report: a server's
/// threads see their stop flag within [`super::POLL`], but a connection thread blocked in a
/// write gives up only after the server's I/O timeout.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// Longest event line read from a server process (its events are a few hundred bytes); past
/// it, the process is not an isobench netserve and is given up on, with the memory held
/// bounded.
pub const MAX_EVENT_BYTES: usize = 64 << 10;

/// One line a server process writes on its standard output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ServeEvent {
    /// The server is bound and serving.
    Ready {
        /// The bound address (with the real port when bound to port 0).
        addr: SocketAddr,
    },
    /// The server was asked to stop and has stopped every thread.
    Stopped {
        /// Its final counters.
        stats: ServerStats,
        /// The error that ended the most recent failed connection, if any
        /// ([`super::ServerHandle::last_conn_error`]).
        #[serde(default)]
        last_conn_error: Option<String>,
        /// The error that ended the server early, if it failed
        /// ([`super::ServerHandle::stop`]).
        #[serde(default)]
        failure: Option<String>,
    },
}

/// Where one of a probe's own servers ran, kept with the probe's results
/// ([`crate::ProbeCtx::own_servers`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnServer {
    /// Server kind (`tcp-sink`, `udp-echo`, `http`).
    pub kind: String,
    /// The address it served on.
    pub addr: SocketAddr,
    /// True when it ran in a process of its own (`isobench netserve`); false when it ran as
    /// threads of the probe's process, because no server executable was given (library use).
    pub separate_process: bool,
    /// Id of the process it ran in (the probe's own when `separate_process` is false).
    pub pid: u32,
}

/// The serving end (`isobench netserve`): starts a `kind` server on `bind`, writes
/// [`ServeEvent::Ready`] to `out`, serves until a line or the end of `input`, stops the server
/// and writes [`ServeEvent::Stopped`]. A bind error is returned before anything is written.
pub fn serve_until_stopped(
    kind: ServerKind,
    bind: SocketAddr,
    opts: ServerOptions,
    input: impl Read,
    mut out: impl Write,
) -> io::Result<()> {
    let h = start_server_with(kind, bind, Arc::new(AtomicBool::new(false)), opts)?;
    write_event(
        &mut out,
        &ServeEvent::Ready {
            addr: h.local_addr(),
        },
    )?;
    // Any line, or the end of input, means stop. A read error means the probe's end is gone.
    let mut line = Vec::new();
    let _ = io::BufReader::new(input).read_until(b'\n', &mut line);
    let stats = h.stats();
    let last_conn_error = h.last_conn_error();
    let (stats, failure) = match h.stop() {
        Ok(s) => (s, None),
        Err(e) => (stats, Some(e.to_string())),
    };
    write_event(
        &mut out,
        &ServeEvent::Stopped {
            stats,
            last_conn_error,
            failure,
        },
    )
}

fn write_event(out: &mut impl Write, e: &ServeEvent) -> io::Result<()> {
    let mut line = serde_json::to_vec(e).map_err(io::Error::other)?;
    line.push(b'\n');
    out.write_all(&line)?;
    out.flush()
}

/// A server running in a child process (`EXE serve ...`). Dropping it without
/// [`ServerProcess::stop`] kills and reaps the child.
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: LineReader,
    addr: SocketAddr,
    kind: ServerKind,
    reaped: bool,
}

impl ServerProcess {
    /// Runs `exe serve KIND --bind BIND ...` and waits (at most [`READY_TIMEOUT`]) until it
    /// reports its address. `exe` must be the isobench binary. The child is killed when the
    /// calling thread ends, so start and stop it on a thread that outlives it.
    pub fn spawn(
        exe: &Path,
        kind: &ServerKind,
        bind: SocketAddr,
        opts: ServerOptions,
    ) -> io::Result<ServerProcess> {
        let mut cmd = Command::new(exe);
        cmd.arg0("isobench")
            .arg("netserve")
            .arg(kind.to_string())
            .arg("--bind")
            .arg(bind.to_string())
            .arg("--io-timeout-ms")
            .arg(opts.io_timeout.as_millis().to_string());
        if let Some(cpu) = opts.pin {
            cmd.arg("--pin").arg(cpu.to_string());
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: the closure only calls prctl(2), which is async-signal-safe. The signal is
        // sent when the thread that forked ends; that thread is blocked in spawn until the
        // exec, so it cannot end before the prctl.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("starting `{} serve {kind}`: {e}", exe.display()),
            )
        })?;
        let stdin = child.stdin.take();
        let stdout = LineReader::new(child.stdout.take().expect("piped stdout"));
        let mut p = ServerProcess {
            child,
            stdin,
            stdout,
            addr: bind,
            kind: kind.clone(),
            reaped: false,
        };
        match p.stdout.next_event(Instant::now() + READY_TIMEOUT) {
            Ok(Some(ServeEvent::Ready { addr })) => {
                p.addr = addr;
                Ok(p)
            }
            Ok(Some(other)) => Err(p.fail(format!("reported {other:?} instead of its address"))),
            Ok(None) => Err(p.fail("ended before it reported its address".into())),
            Err(e) => Err(p.fail(format!("did not report its address: {e}"))),
        }
    }

    /// The address the server is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Asks the server to stop, waits for its final report and reaps the process. Returns
    /// the final counters, or the error that ended the server early (the same message
    /// [`super::ServerHandle::stop`] gives), or why the process did not stop cleanly (it
    /// died, it did not answer within a grace period and was killed).
    pub fn stop(mut self) -> io::Result<ServerStats> {
        if let Some(mut stdin) = self.stdin.take() {
            // A dead child makes this fail; its exit status says more, below.
            let _ = stdin.write_all(b"stop\n");
        }
        let deadline = Instant::now() + STOP_GRACE;
        match self.stdout.next_event(deadline) {
            Ok(Some(ServeEvent::Stopped { stats, failure, .. })) => {
                self.reap(deadline);
                match failure {
                    Some(f) => Err(io::Error::other(f)),
                    None => Ok(stats),
                }
            }
            Ok(Some(other)) => Err(self.fail(format!("answered stop with {other:?}"))),
            Ok(None) => Err(self.fail("ended before it was stopped".into())),
            Err(e) => Err(self.fail(format!("did not stop: {e}"))),
        }
    }

    /// Waits for the child until `deadline`, then kills it; reaps it either way.
    fn reap(&mut self, deadline: Instant) -> Option<std::process::ExitStatus> {
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(st)) => {
                    self.reaped = true;
                    return Some(st);
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(2)),
                Err(_) => break,
            }
        }
        let _ = self.child.kill();
        let st = self.child.wait().ok();
        self.reaped = true;
        st
    }

    /// Ends the child (it is given a moment to exit on its own), reaps it and builds an error
    /// that says what happened, with whatever it wrote on its standard error.
    fn fail(&mut self, what: String) -> io::Error {
        self.stdin.take();
        let status = self.reap(Instant::now() + Duration::from_millis(200));
        let mut err = Vec::new();
        if let Some(mut e) = self.child.stderr.take() {
            // What the child wrote before it ended is in the pipe; a process it left behind
            // could keep the pipe open, so read without waiting for its end.
            // SAFETY: fcntl on a descriptor we own.
            unsafe { libc::fcntl(e.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
            let _ = (&mut e).take(4096).read_to_end(&mut err);
        }
        let status = status.map_or_else(|| "unknown status".into(), |s| s.to_string());
        let err = String::from_utf8_lossy(&err);
        let err = err.trim();
        io::Error::other(format!(
            "the {} server process (pid {}) {what} ({status}){}{err}",
            self.kind.name(),
            self.child.id(),
            if err.is_empty() { "" } else { ": " },
        ))
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Reads JSON lines from a child's stdout with a deadline.
#[derive(Debug)]
struct LineReader {
    out: ChildStdout,
    buf: Vec<u8>,
}

impl LineReader {
    fn new(out: ChildStdout) -> Self {
        LineReader {
            out,
            buf: Vec::new(),
        }
    }

    /// The next event, `None` at the end of output, an error at the deadline or on a line
    /// that is not an event.
    fn next_event(&mut self, deadline: Instant) -> io::Result<Option<ServeEvent>> {
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(nl) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=nl).collect();
                return serde_json::from_slice(&line).map(Some).map_err(|e| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "it wrote `{}`, not an isobench netserve event ({e}): is the \
                             executable the isobench binary?",
                            String::from_utf8_lossy(&line).trim()
                        ),
                    )
                });
            }
            if self.buf.len() > MAX_EVENT_BYTES {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "it wrote more than {} KiB without a newline, not an isobench netserve \
                         event: is the executable the isobench binary?",
                        MAX_EVENT_BYTES >> 10
                    ),
                ));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "no answer in time"));
            }
            if !wait_readable(&self.out.as_raw_fd(), left)? {
                continue;
            }
            match self.out.read(&mut chunk) {
                Ok(0) => return Ok(None),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::net::UnixStream;

    fn lo() -> SocketAddr {
        "127.0.0.1:0".parse().unwrap()
    }

    /// An executable shell script standing in for `isobench netserve`.
    fn fake_exe(dir: &Path, body: &str) -> std::path::PathBuf {
        let p = dir.join("fake-isobench");
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// [`ServerProcess::spawn`], retried while the script is still open for writing in a
    /// process another test thread forked meanwhile (exec then fails with "Text file busy").
    fn spawn(exe: &Path, kind: ServerKind) -> io::Result<ServerProcess> {
        for _ in 0..100 {
            match ServerProcess::spawn(exe, &kind, lo(), ServerOptions::default()) {
                Err(e) if e.to_string().contains("busy") => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                r => return r,
            }
        }
        ServerProcess::spawn(exe, &kind, lo(), ServerOptions::default())
    }

    const READY: &str = r#"echo '{"event":"ready","addr":"127.0.0.1:9"}'"#;

    fn gone(pid: u32) -> bool {
        // SAFETY: signal 0 only checks that the process exists.
        unsafe { libc::kill(pid as libc::pid_t, 0) != 0 }
    }

    #[test]
    fn serve_reports_ready_serves_and_stops_on_a_line() {
        let (mut ctl, input) = UnixStream::pair().unwrap();
        let (output, events) = UnixStream::pair().unwrap();
        let t = std::thread::spawn(move || {
            serve_until_stopped(
                ServerKind::TcpEcho,
                lo(),
                ServerOptions::default(),
                input,
                output,
            )
        });
        let mut lines = io::BufReader::new(events).lines();
        let ready: ServeEvent = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        let ServeEvent::Ready { addr } = ready else {
            panic!("{ready:?}")
        };
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.write_all(b"ping").unwrap();
        let mut b = [0u8; 4];
        c.read_exact(&mut b).unwrap();
        drop(c);
        ctl.write_all(b"stop\n").unwrap();
        let stopped: ServeEvent = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        match stopped {
            ServeEvent::Stopped { stats, failure, .. } => {
                assert_eq!(stats.bytes_in, 4);
                assert_eq!(failure, None);
            }
            e => panic!("{e:?}"),
        }
        t.join().unwrap().unwrap();
    }

    #[test]
    fn serve_returns_a_bind_error_before_writing() {
        let mut out = Vec::new();
        let taken = std::net::UdpSocket::bind(lo()).unwrap();
        let e = serve_until_stopped(
            ServerKind::UdpEcho,
            taken.local_addr().unwrap(),
            ServerOptions::default(),
            io::empty(),
            &mut out,
        )
        .unwrap_err();
        assert!(e.to_string().contains("bind udp"), "{e}");
        assert!(out.is_empty());
    }

    #[test]
    fn a_stopped_process_is_reaped_and_its_counters_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let exe = fake_exe(
            dir.path(),
            &format!(
                "{READY}\nread line\necho '{}'",
                r#"{"event":"stopped","stats":{"connections":1,"refused":0,"conn_errors":0,"datagrams":0,"requests":0,"bytes_in":7,"bytes_out":0}}"#
            ),
        );
        let p = spawn(&exe, ServerKind::TcpSink).unwrap();
        assert_eq!(p.local_addr(), "127.0.0.1:9".parse().unwrap());
        let pid = p.pid();
        assert_ne!(pid, std::process::id());
        assert_eq!(p.stop().unwrap().bytes_in, 7);
        assert!(gone(pid), "the server process {pid} is left behind");
    }

    #[test]
    fn a_server_failure_is_reported_at_stop() {
        let dir = tempfile::tempdir().unwrap();
        let exe = fake_exe(
            dir.path(),
            &format!(
                "{READY}\nread line\necho '{}'",
                r#"{"event":"stopped","stats":{"connections":0,"refused":0,"conn_errors":0,"datagrams":0,"requests":0,"bytes_in":0,"bytes_out":0},"failure":"udp-echo server on 127.0.0.1:9 failed: injected"}"#
            ),
        );
        let p = spawn(&exe, ServerKind::UdpEcho).unwrap();
        let e = p.stop().unwrap_err();
        assert!(e.to_string().contains("failed: injected"), "{e}");
    }

    #[test]
    fn an_endless_line_from_a_server_process_is_refused_at_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        // Four times the limit, no newline, then it would wait for half a minute.
        let exe = fake_exe(
            dir.path(),
            &format!(
                "head -c {} /dev/zero | tr '\\0' x\nexec sleep 30",
                4 * MAX_EVENT_BYTES
            ),
        );
        let e = spawn(&exe, ServerKind::TcpEcho).unwrap_err().to_string();
        // Refused for its length, not for the deadline it would have reached.
        assert!(e.contains("without a newline"), "{e}");
    }

    #[test]
    fn a_server_process_that_dies_is_reported_at_stop() {
        let dir = tempfile::tempdir().unwrap();
        let exe = fake_exe(dir.path(), &format!("{READY}\nexec sleep 30"));
        let p = spawn(&exe, ServerKind::TcpEcho).unwrap();
        let pid = p.pid();
        // SAFETY: pid is our unreaped child.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        let e = p.stop().unwrap_err().to_string();
        assert!(e.contains("ended before it was stopped"), "{e}");
        assert!(e.contains("signal: 9"), "{e}");
        assert!(gone(pid));
    }

    #[test]
    fn a_server_process_that_cannot_start_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let exe = fake_exe(
            dir.path(),
            "echo 'bind tcp 192.0.2.1:0: no such address' >&2\nexit 1",
        );
        let e = spawn(&exe, ServerKind::TcpEcho).unwrap_err().to_string();
        assert!(e.contains("ended before it reported its address"), "{e}");
        assert!(e.contains("no such address"), "{e}");
        let e = ServerProcess::spawn(
            &dir.path().join("missing"),
            &ServerKind::TcpEcho,
            lo(),
            ServerOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("missing serve tcp-echo"), "{e}");
    }

    #[test]
    fn a_process_that_is_not_a_server_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let exe = fake_exe(dir.path(), "echo hello\nexec sleep 30");
        let e = spawn(&exe, ServerKind::TcpEcho).unwrap_err().to_string();
        assert!(e.contains("not an isobench netserve event"), "{e}");
    }

    #[test]
    fn dropping_a_running_server_process_kills_it() {
        let dir = tempfile::tempdir().unwrap();
        let exe = fake_exe(dir.path(), &format!("{READY}\nexec sleep 30"));
        let p = spawn(&exe, ServerKind::TcpEcho).unwrap();
        let pid = p.pid();
        drop(p);
        assert!(gone(pid));
    }
}
