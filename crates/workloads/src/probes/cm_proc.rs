//! Child processes and pipes for the process probes (`local-comm`, `context-switch`).
//!
//! A child is forked from a possibly multi-threaded process, so between `fork` and `_exit`
//! it only makes async-signal-safe calls (read, write, close, sched_setaffinity, prctl): no
//! allocation, no locks, no panics. Every child is owned by a [`Child`] guard that kills
//! and reaps it on drop, so no error path can leave one behind; a child also asks the kernel
//! to kill it if the parent dies.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A forked child, killed (SIGKILL) and reaped when dropped unless already reaped.
pub(super) struct Child {
    pid: libc::pid_t,
    reaped: bool,
}

impl Child {
    /// Forks; the child runs `body` and exits with its return value through `_exit`.
    ///
    /// `body` runs in the forked child of a possibly multi-threaded process: it must only
    /// make async-signal-safe calls (no allocation, no locking, no panicking).
    pub(super) fn fork(body: impl FnOnce() -> i32) -> io::Result<Child> {
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: fork has no preconditions; the child only runs async-signal-safe code.
        match unsafe { libc::fork() } {
            -1 => Err(io::Error::last_os_error()),
            0 => {
                // SAFETY: prctl/getppid/_exit are async-signal-safe.
                unsafe {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    if libc::getppid() != parent {
                        libc::_exit(1);
                    }
                    // A panic must never unwind into the parent's code paths.
                    let code =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or(101);
                    libc::_exit(code)
                }
            }
            pid => Ok(Child { pid, reaped: false }),
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if !self.reaped {
            // SAFETY: pid is our unreaped child, so the id cannot have been reused.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            let _ = wait_pid(self.pid);
        }
    }
}

/// `waitpid` retried on EINTR; returns the raw status.
pub(super) fn wait_pid(pid: libc::pid_t) -> io::Result<i32> {
    let mut status = 0;
    loop {
        // SAFETY: status is a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Ok(status);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// A pipe (read end, write end), close-on-exec.
pub(super) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds is a valid 2-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors are fresh and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A connected pair of unix stream sockets, close-on-exec.
pub(super) fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds is a valid 2-element array.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors are fresh and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// In a forked child: closes every descriptor in `fds` except those in `keep`.
/// Async-signal-safe.
pub(super) fn close_except(fds: &[RawFd], keep: &[RawFd]) {
    for &fd in fds {
        if !keep.contains(&fd) {
            // SAFETY: closing a descriptor is async-signal-safe; fd belonged to the parent.
            unsafe { libc::close(fd) };
        }
    }
}

/// In a forked child: pins the calling process to `cpu`, if given. Async-signal-safe.
pub(super) fn pin_raw(cpu: Option<usize>) -> bool {
    let Some(cpu) = cpu else { return true };
    // SAFETY: cpu_set_t is plain data; sched_setaffinity is a plain system call.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Writes all of `buf` (retrying partial writes and EINTR). Uses `send` with
/// `MSG_NOSIGNAL` on sockets so a dead peer is an error, not a SIGPIPE. Does not allocate,
/// so forked children may use it.
pub(super) fn write_all(fd: RawFd, buf: &[u8], socket: bool) -> io::Result<()> {
    let mut off = 0;
    while off < buf.len() {
        let rest = &buf[off..];
        // SAFETY: rest is a valid readable buffer of rest.len() bytes.
        let r = unsafe {
            if socket {
                libc::send(fd, rest.as_ptr().cast(), rest.len(), libc::MSG_NOSIGNAL)
            } else {
                libc::write(fd, rest.as_ptr().cast(), rest.len())
            }
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        off += r as usize;
    }
    Ok(())
}

/// Reads exactly `buf.len()` bytes; an early end of file (the peer closed its end or died)
/// is `UnexpectedEof`. Does not allocate, so forked children may use it.
pub(super) fn read_exact(fd: RawFd, buf: &mut [u8]) -> io::Result<()> {
    let mut off = 0;
    while off < buf.len() {
        let rest = &mut buf[off..];
        // SAFETY: rest is a valid writable buffer of rest.len() bytes.
        let r = unsafe { libc::read(fd, rest.as_mut_ptr().cast(), rest.len()) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if r == 0 {
            // From a kind, without allocating: this also runs in forked children.
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        off += r as usize;
    }
    Ok(())
}

/// Raw descriptor numbers of a list of owned descriptors.
pub(super) fn raw(fds: &[&OwnedFd]) -> Vec<RawFd> {
    fds.iter().map(|f| f.as_raw_fd()).collect()
}
