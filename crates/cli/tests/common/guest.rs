//! The cgroup v2 guest of scripts/v2-guest, for tests that run isobench inside it: why it
//! cannot boot here, one boot per test binary (skipped with the reason, or failed under
//! `CI=true`), and the files a guest script leaves in /opt/out (`NAME.out`, `.err`, `.rc`
//! of each command it ran).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use super::text;

/// Why the guest cannot boot here, if it cannot: QEMU, the image
/// (`ISOBENCH_V2_GUEST=$(scripts/v2-guest build)`) and the static isobench
/// (`ISOBENCH_STATIC_EXE=$(scripts/build-static --debug)`).
pub fn missing() -> Option<String> {
    if Command::new("qemu-system-x86_64")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_or(true, |s| !s.success())
    {
        return Some(
            "qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)".into(),
        );
    }
    // Set by `scripts/test` to why it could not build the image.
    if let Some(why) = std::env::var_os("ISOBENCH_V2_GUEST_SKIP") {
        return Some(why.to_string_lossy().into_owned());
    }
    match std::env::var_os("ISOBENCH_V2_GUEST") {
        None => {
            return Some(
                "ISOBENCH_V2_GUEST is not set: build the guest image with \
                 `export ISOBENCH_V2_GUEST=$(scripts/v2-guest build)` (as root; scripts/test \
                 does it)"
                    .into(),
            )
        }
        Some(d) if !Path::new(&d).join("ready").exists() => {
            return Some(format!(
                "ISOBENCH_V2_GUEST={} is no finished guest image; run scripts/v2-guest build",
                Path::new(&d).display()
            ))
        }
        Some(_) => {}
    }
    match std::env::var_os("ISOBENCH_STATIC_EXE") {
        Some(p) if Path::new(&p).is_file() => None,
        _ => Some(
            "ISOBENCH_STATIC_EXE does not name the static isobench the guest runs: \
             `export ISOBENCH_STATIC_EXE=$(scripts/build-static --debug)`"
                .into(),
        ),
    }
}

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The guest of a test binary, booted by `boot` on first use; `None` (the test skipped, or
/// failed under CI) when `missing` says why it cannot boot here ([`missing`] itself, or
/// more).
pub fn once<T>(
    cell: &'static OnceLock<Result<T, String>>,
    group: &str,
    missing: impl FnOnce() -> Option<String>,
    boot: impl FnOnce() -> T,
) -> Option<&'static T> {
    match cell.get_or_init(|| match missing() {
        Some(why) => Err(why),
        None => Ok(boot()),
    }) {
        Ok(g) => Some(g),
        Err(why) => {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("the cgroup v2 guest is required under CI=true: {why}");
            }
            super::skip(group, why);
            None
        }
    }
}

/// What one boot of the guest gave.
pub struct Guest {
    /// Holds /opt/out as it came back (`out/`) and the console log, kept until the next
    /// boot.
    pub dir: PathBuf,
    /// `scripts/v2-guest run`'s exit code.
    pub exit: i32,
    /// Everything the guest's script printed, then the runner's own messages.
    pub log: String,
}

/// tests/guest_steps.sh, the `step` helper the guest scripts source from /opt/isobench.
pub fn steps_helper() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/guest_steps.sh")
}

/// One command's output, from the files the guest left in /opt/out.
pub struct Cmd {
    pub name: String,
    pub rc: Option<i32>,
    pub out: String,
    pub err: String,
}

impl Guest {
    /// Boots the guest once (`scripts/v2-guest run ARGS... --out --console SCRIPT
    /// ISOBENCH_STATIC_EXE guest_steps.sh`), its files in the test target's `name` directory.
    pub fn boot(name: &str, args: &[&str], script: &str) -> Guest {
        Guest::boot_with(name, args, script, &[])
    }

    /// As [`Guest::boot`], with more `files` copied into the guest's /opt/isobench.
    pub fn boot_with(name: &str, args: &[&str], script: &str, files: &[PathBuf]) -> Guest {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let out = Command::new(repo().join("scripts/v2-guest"))
            .arg("run")
            .args(args)
            .arg("--out")
            .arg(dir.join("out"))
            .arg("--console")
            .arg(dir.join("console.log"))
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(script))
            .arg(std::env::var_os("ISOBENCH_STATIC_EXE").unwrap())
            .arg(steps_helper())
            .args(files)
            .stdin(Stdio::null())
            .output()
            .expect("scripts/v2-guest run starts");
        Guest {
            dir,
            exit: out.status.code().unwrap_or(-1),
            log: text(&out.stdout) + &text(&out.stderr),
        }
    }

    /// A file the guest left in /opt/out, empty when it left none.
    pub fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join("out").join(name)).unwrap_or_default()
    }

    /// The command the guest ran as `name`.
    pub fn cmd(&self, name: &str) -> Cmd {
        Cmd {
            name: name.to_string(),
            rc: self.file(&format!("{name}.rc")).trim().parse().ok(),
            out: self.file(&format!("{name}.out")),
            err: self.file(&format!("{name}.err")),
        }
    }

    /// Everything the guest said, for a failure message.
    pub fn context(&self) -> String {
        format!(
            "scripts/v2-guest run exited {}; its files (and console.log) are in {}; the \
             guest's output:\n{}",
            self.exit,
            self.dir.display(),
            self.log
        )
    }
}

impl Cmd {
    /// Its stdout as JSON, after checking that it ended with exit code 0.
    pub fn json(&self, guest: &Guest) -> serde_json::Value {
        assert_eq!(
            self.rc,
            Some(0),
            "{} failed\nstderr: {}\nstdout: {}\n{}",
            self.name,
            self.err,
            self.out,
            guest.context()
        );
        serde_json::from_str(&self.out).unwrap_or_else(|e| {
            panic!(
                "{}: stdout is no JSON ({e}): {}\n{}",
                self.name,
                self.out,
                guest.context()
            )
        })
    }
}
