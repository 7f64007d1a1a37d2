//! Starting a process inside a container while keeping the caller's `Command` as it is:
//! its standard streams, process group and exit status stay those the caller set up, and
//! only the program changes to `docker exec -i <container> ...`.
//!
//! `std::process::Command` cannot change its program once built, and its standard streams
//! cannot be read back. So the caller's command is spawned as it is, and between fork and
//! exec (after the streams are in place) the child replaces itself with the engine's CLI
//! through `execve(2)`, with every argument prepared beforehand: the child only makes that
//! one system call.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::raw::c_char;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

use anyhow::{Context, Result};

/// A prepared `execve(2)`: program, arguments and environment as C strings.
pub(crate) struct ExecImage {
    path: CString,
    _strings: Vec<CString>,
    argv: Vec<*const c_char>,
    envp: Vec<*const c_char>,
}

// SAFETY: the pointers point into the heap buffers of `_strings` and `path`, which the value
// owns and never changes; they are only read, by execve.
unsafe impl Send for ExecImage {}
// SAFETY: as above; nothing is ever written through the pointers.
unsafe impl Sync for ExecImage {}

fn cstring(s: impl Into<Vec<u8>>) -> Result<CString> {
    CString::new(s).context("an argument holds a NUL byte")
}

impl ExecImage {
    /// `program args...` with the environment `env` (`KEY=VALUE` each).
    pub(crate) fn new(
        program: &Path,
        args: &[OsString],
        env: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Result<ExecImage> {
        let path = cstring(program.as_os_str().as_bytes())?;
        let mut strings = vec![cstring(program.as_os_str().as_bytes())?];
        for a in args {
            strings.push(cstring(a.clone().into_vec())?);
        }
        let nargs = strings.len();
        for (k, v) in env {
            let mut kv = k.into_vec();
            kv.push(b'=');
            kv.extend(v.into_vec());
            strings.push(cstring(kv)?);
        }
        let mut argv: Vec<*const c_char> = strings[..nargs].iter().map(|s| s.as_ptr()).collect();
        argv.push(std::ptr::null());
        let mut envp: Vec<*const c_char> = strings[nargs..].iter().map(|s| s.as_ptr()).collect();
        envp.push(std::ptr::null());
        Ok(ExecImage {
            path,
            _strings: strings,
            argv,
            envp,
        })
    }

    /// Replaces the calling process. Only returns on error. Async-signal-safe: one system
    /// call, no allocation.
    pub(crate) fn exec(&self) -> io::Error {
        // SAFETY: every pointer is a NUL-terminated string owned by `self`, and both arrays
        // end with a null pointer.
        unsafe {
            libc::execve(self.path.as_ptr(), self.argv.as_ptr(), self.envp.as_ptr());
        }
        io::Error::last_os_error()
    }
}

/// Whether `program` names the isobench binary of the controller (the running binary, a
/// file named `isobench`, or the static build): inside a container it is `/isobench`.
pub(crate) fn is_isobench(program: &OsStr) -> bool {
    let p = Path::new(program);
    if p == Path::new("/proc/self/exe") || p.file_name() == Some(OsStr::new("isobench")) {
        return true;
    }
    let canon = |q: &Path| std::fs::canonicalize(q).ok();
    let Some(pc) = canon(p) else {
        return false;
    };
    let current = std::env::current_exe().ok().and_then(|e| canon(&e));
    let static_exe = crate::staticexe::find().ok().and_then(|e| canon(&e));
    current.as_ref() == Some(&pc) || static_exe.as_ref() == Some(&pc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};

    #[test]
    fn the_child_becomes_the_prepared_program_with_the_callers_streams() {
        let img = ExecImage::new(
            Path::new("/bin/sh"),
            &["-c".into(), "echo \"$X $0\"; exit 3".into()],
            [("X".into(), "from-envp".into())],
        )
        .unwrap();
        let mut cmd = Command::new("/bin/false");
        cmd.stdout(Stdio::piped()).env("X", "from-command");
        // SAFETY: the closure only calls execve.
        unsafe {
            cmd.pre_exec(move || Err(img.exec()));
        }
        let mut child = cmd.spawn().unwrap();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out, "from-envp /bin/sh\n");
        assert_eq!(child.wait().unwrap().code(), Some(3));
    }

    #[test]
    fn a_failed_exec_is_a_spawn_error() {
        let img = ExecImage::new(Path::new("/nonexistent/engine"), &[], []).unwrap();
        let mut cmd = Command::new("/bin/true");
        // SAFETY: the closure only calls execve.
        unsafe {
            cmd.pre_exec(move || Err(img.exec()));
        }
        let e = cmd.spawn().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
    }

    #[test]
    fn isobench_paths_map_to_the_image() {
        assert!(is_isobench(OsStr::new("/proc/self/exe")));
        assert!(is_isobench(OsStr::new("/work/target/debug/isobench")));
        assert!(!is_isobench(OsStr::new("sh")));
    }
}
