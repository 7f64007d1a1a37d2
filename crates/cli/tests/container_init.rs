//! `isobench container-init`, the `oci` platform's init when the host has no static
//! catatonit, tini or dumb-init: it runs its command, passes signals on and exits with the
//! command's code. (That it reaps a killed fork bomb's processes is checked in real
//! containers, crates/platform/tests/oci.rs.)

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn isobench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_isobench"))
}

#[test]
fn the_own_init_exits_with_its_commands_code() {
    let out = isobench()
        .args(["container-init", "--", "sh", "-c", "sleep 0.1 & exit 3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
}

#[test]
fn the_own_init_passes_sigterm_to_its_command() {
    let mut child = isobench()
        .args(["container-init", "--", "sleep", "60"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    // Until the sleeper runs under it.
    let pid = child.id();
    let end = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .trim()
        .is_empty()
    {
        assert!(Instant::now() < end, "the init started no child");
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            // The sleeper died of SIGTERM: 128 + 15.
            assert_eq!(st.code(), Some(143), "{st:?}");
            break;
        }
        assert!(Instant::now() < end, "the init did not end after SIGTERM");
        std::thread::sleep(Duration::from_millis(10));
    }
}
