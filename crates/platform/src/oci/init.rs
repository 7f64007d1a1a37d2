//! The container's first process: an init that reaps the orphans a tenant leaves (a killed
//! fork bomb's children, a dead agent's workloads) and runs the sleeper that keeps the
//! container up.
//!
//! Which one, in order:
//! 1. the engine's own `--init`, when it has one: Docker's `docker-init` (the daemon says
//!    whether it finds it); Podman's catatonit at its default path;
//! 2. else a static init binary found on the host (catatonit, tini or dumb-init): Podman
//!    gets it with `--init --init-path`; Docker, which has no such flag, gets it bind-mounted
//!    read-only at [`MOUNTED_INIT`] and run as the container's command;
//! 3. else isobench's own (`/isobench container-init -- sleep ...`, see [`run_own_init`]):
//!    the container starts without `--init`, and the static isobench binary of the image
//!    reaps.
//!
//! Only static binaries qualify: the image holds no C library. A host where Docker pulled in
//! tini (which satisfies Podman's `catatonit | tini | dumb-init` recommendation) has no
//! catatonit, and Podman's bare `--init` fails there; this choice is what keeps it working.
//! `ISOBENCH_OCI_INIT` (or [`crate::PlatformOptions::oci_init`]) overrides it.

use std::ffi::OsString;
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::engine::{Engine, EngineKind};
use super::image::IMAGE_EXE;
use crate::staticexe;

/// The variable that chooses the containers' init: `auto` (the default), `isobench`
/// (isobench's own), or the path of a static init binary.
pub const ENV_INIT: &str = "ISOBENCH_OCI_INIT";

/// Where a static init binary is looked for on the host, in order. Podman's default
/// (catatonit) comes first, then catatonit, tini and dumb-init where Debian and a manual
/// install put them.
pub const INIT_CANDIDATES: &[&str] = &[
    PODMAN_DEFAULT_INIT,
    "/usr/bin/catatonit",
    "/usr/local/bin/catatonit",
    "/usr/bin/tini-static",
    "/usr/local/bin/tini-static",
    "/usr/bin/tini",
    "/usr/local/bin/tini",
    "/usr/bin/docker-init",
    "/usr/bin/dumb-init",
    "/usr/local/bin/dumb-init",
];

/// Where Podman looks for its init when `--init` comes without `--init-path`.
pub const PODMAN_DEFAULT_INIT: &str = "/usr/libexec/podman/catatonit";

/// Where a host init is mounted in a Docker container that does not get Docker's own.
pub const MOUNTED_INIT: &str = "/.isobench-init";

/// The hidden subcommand of the image's isobench that runs as the container's init.
pub const OWN_INIT_COMMAND: &str = "container-init";

/// How the init is chosen.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum InitRequest {
    /// The engine's, else one found on the host, else isobench's own.
    #[default]
    Auto,
    /// This static init binary.
    Path(PathBuf),
    /// isobench's own, whatever the host has.
    Own,
}

impl InitRequest {
    /// Parses `auto`, `isobench` or an absolute path.
    pub fn parse(s: &str) -> Result<InitRequest> {
        match s.trim() {
            "" | "auto" => Ok(InitRequest::Auto),
            "isobench" | "own" => Ok(InitRequest::Own),
            p if Path::new(p).is_absolute() => Ok(InitRequest::Path(PathBuf::from(p))),
            other => bail!(
                "{ENV_INIT}=`{other}`: use `auto`, `isobench`, or the absolute path of a static \
                 init binary (catatonit, tini-static, dumb-init)"
            ),
        }
    }

    /// The request of `opt`, else of [`ENV_INIT`], else `auto`.
    pub fn from_option_or_env(opt: Option<&str>) -> Result<InitRequest> {
        match opt {
            Some(s) => InitRequest::parse(s),
            None => match std::env::var(ENV_INIT) {
                Ok(s) => InitRequest::parse(&s),
                Err(_) => Ok(InitRequest::Auto),
            },
        }
    }
}

/// The init a container starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Init {
    /// The engine's own `--init` (Docker: the daemon's `docker-init`).
    Engine {
        /// What it is, for the record (`docker-init`).
        what: String,
    },
    /// A static init binary of the host.
    Host {
        /// The file.
        path: PathBuf,
        /// catatonit, tini or dumb-init (or the file's name).
        name: String,
    },
    /// isobench's own, the image's `/isobench container-init`.
    Own {
        /// Why no other (nothing found, or asked for).
        why: String,
    },
}

impl fmt::Display for Init {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Init::Engine { what } => write!(f, "the engine's own init ({what}, `--init`)"),
            Init::Host { path, name } => write!(f, "{name} ({})", path.display()),
            Init::Own { why } => write!(
                f,
                "isobench's own init ({IMAGE_EXE} {OWN_INIT_COMMAND}, without `--init`): {why}"
            ),
        }
    }
}

impl Init {
    /// The engine's `run` arguments (before the image) and the command prefix (after it) that
    /// start `command` under this init; `exe` is where the static isobench is in the
    /// container (its own init's binary).
    pub(crate) fn wrap(
        &self,
        kind: EngineKind,
        exe: &str,
        command: &[&str],
    ) -> (Vec<String>, Vec<String>) {
        let cmd: Vec<String> = command.iter().map(|s| s.to_string()).collect();
        match (self, kind) {
            (Init::Engine { .. }, _) => (vec!["--init".into()], cmd),
            (Init::Host { path, .. }, EngineKind::Podman) => (
                vec![
                    "--init".into(),
                    "--init-path".into(),
                    path.display().to_string(),
                ],
                cmd,
            ),
            (Init::Host { path, .. }, EngineKind::Docker) => {
                let mut c = vec![MOUNTED_INIT.to_string(), "--".into()];
                c.extend(cmd);
                (
                    vec!["-v".into(), format!("{}:{MOUNTED_INIT}:ro", path.display())],
                    c,
                )
            }
            (Init::Own { .. }, _) => {
                let mut c = vec![exe.to_string(), OWN_INIT_COMMAND.into(), "--".into()];
                c.extend(cmd);
                (Vec::new(), c)
            }
        }
    }

    /// The file the init runs from on the host, when it is one of the host's.
    pub fn host_path(&self) -> Option<&Path> {
        match self {
            Init::Host { path, .. } => Some(path),
            _ => None,
        }
    }
}

/// The name of an init binary from its file (following links: Debian's `docker-init` is
/// tini-static).
fn init_name(path: &Path) -> String {
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let file = real
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    for known in ["catatonit", "dumb-init", "tini"] {
        if file.contains(known) {
            return known.into();
        }
    }
    file
}

/// The first static init among `candidates`, and a note for each one passed over (present
/// but dynamically linked, or unreadable).
pub fn find_static_init(candidates: &[PathBuf]) -> (Option<PathBuf>, Vec<String>) {
    let mut passed = Vec::new();
    for c in candidates {
        if !c.is_file() {
            continue;
        }
        match staticexe::is_static(c) {
            Ok(true) => return (Some(c.clone()), passed),
            Ok(false) => passed.push(format!(
                "{} is dynamically linked (the image has no C library)",
                c.display()
            )),
            Err(e) => passed.push(format!("{e:#}")),
        }
    }
    (None, passed)
}

/// The usual places ([`INIT_CANDIDATES`]).
pub fn default_candidates() -> Vec<PathBuf> {
    INIT_CANDIDATES.iter().map(PathBuf::from).collect()
}

/// Chooses the init for an engine of `kind`. `docker_init` is what the Docker daemon
/// reports of its own init (`Some(name)` when it finds it); `candidates` are the host files
/// to look at. Pure but for reading the candidates.
pub fn choose(
    kind: EngineKind,
    request: &InitRequest,
    docker_init: Option<&str>,
    candidates: &[PathBuf],
) -> Result<Init> {
    match request {
        InitRequest::Own => {
            return Ok(Init::Own {
                why: format!("{ENV_INIT}=isobench"),
            })
        }
        InitRequest::Path(p) => {
            if !p.is_file() {
                bail!(
                    "the init binary {} does not exist ({ENV_INIT})",
                    p.display()
                );
            }
            if !staticexe::is_static(p)? {
                bail!(
                    "the init binary {} is dynamically linked and cannot run in the agent's \
                     image, which has no C library; name a static one ({ENV_INIT})",
                    p.display()
                );
            }
            return Ok(Init::Host {
                path: p.clone(),
                name: init_name(p),
            });
        }
        InitRequest::Auto => {}
    }
    if kind == EngineKind::Docker {
        if let Some(what) = docker_init {
            return Ok(Init::Engine { what: what.into() });
        }
    }
    let (found, passed) = find_static_init(candidates);
    match found {
        Some(path) => Ok(Init::Host {
            name: init_name(&path),
            path,
        }),
        None => {
            let mut why = match kind {
                EngineKind::Docker => "the Docker daemon finds no docker-init, and ".to_string(),
                EngineKind::Podman => String::new(),
            };
            why.push_str("no static catatonit, tini or dumb-init is installed");
            for p in passed {
                why.push_str("; ");
                why.push_str(&p);
            }
            why.push_str(" (Debian: `apt-get install catatonit`)");
            Ok(Init::Own { why })
        }
    }
}

/// What the Docker daemon says of its init: `Some(binary name)` when it found it.
pub(crate) fn docker_daemon_init(engine: &Engine) -> Option<String> {
    let out = engine
        .query(&["info", "--format", "{{.InitBinary}}|{{.InitCommit.ID}}"])
        .ok()?;
    parse_docker_init(&out)
}

/// `docker-init|<commit>`: the commit is `N/A` when the daemon could not run the binary.
fn parse_docker_init(out: &str) -> Option<String> {
    let (bin, commit) = out.trim().split_once('|')?;
    let bin = bin.trim();
    if bin.is_empty() || commit.trim() == "N/A" {
        return None;
    }
    Some(bin.to_string())
}

/// The init for `engine` as `request` asks.
pub fn for_engine(engine: &Engine, request: &InitRequest) -> Result<Init> {
    let docker_init = match (engine.kind(), request) {
        (EngineKind::Docker, InitRequest::Auto) => docker_daemon_init(engine),
        _ => None,
    };
    choose(
        engine.kind(),
        request,
        docker_init.as_deref(),
        &default_candidates(),
    )
}

/// Whether the process `pid` runs the host file `path` (the same file, seen through the
/// container's mount).
pub fn runs_file(pid: i32, path: &Path) -> Result<bool> {
    let exe = std::fs::metadata(format!("/proc/{pid}/exe"))
        .with_context(|| format!("reading the executable of process {pid}"))?;
    let file = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(exe.dev() == file.dev() && exe.ino() == file.ino())
}

/// isobench's own init: runs `command` as its child, reaps every process that ends below it
/// (orphans are re-parented to it: it is the namespace's first process, and a child
/// subreaper besides), passes SIGTERM, SIGINT,
/// SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 on to the child, and returns the child's exit code
/// (128 + signal when a signal ended it) once the child has ended.
pub fn run_own_init(command: &[OsString]) -> Result<i32> {
    let Some((program, args)) = command.split_first() else {
        bail!("container-init needs a command to run");
    };
    const PASSED: [libc::c_int; 6] = [
        libc::SIGTERM,
        libc::SIGINT,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
    ];
    // SAFETY: plain signal-set manipulation on a zeroed, owned sigset_t.
    let (set, old) = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        for s in PASSED {
            libc::sigaddset(&mut set, s);
        }
        // Blocked signals stay pending for sigwait; the first process of a PID namespace
        // would otherwise never see those it has no handler for.
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) != 0 {
            bail!("blocking signals: {}", std::io::Error::last_os_error());
        }
        (set, old)
    };
    // Orphans come to us also when we are not the namespace's first process.
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    // The child inherits the mask: it gets the one we started with back before exec, or the
    // signals passed on would stay blocked in it.
    let mut cmd = std::process::Command::new(program);
    cmd.args(args);
    // SAFETY: only sigprocmask, which is async-signal-safe, runs between fork and exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(move || {
            if libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .with_context(|| format!("starting {}", Path::new(program).display()))?;
    let child_pid = child.id() as libc::pid_t;
    // Reaped below with waitpid(-1), not through `child`.
    drop(child);
    loop {
        let mut sig: libc::c_int = 0;
        // SAFETY: `set` is a valid signal set, `sig` a valid out pointer.
        if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
            continue;
        }
        if sig != libc::SIGCHLD {
            // SAFETY: signalling our own child, which we have not reaped yet.
            unsafe { libc::kill(child_pid, sig) };
            continue;
        }
        loop {
            let mut status: libc::c_int = 0;
            // SAFETY: valid out pointer; WNOHANG never blocks.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                break;
            }
            if pid == child_pid {
                return Ok(if libc::WIFEXITED(status) {
                    libc::WEXITSTATUS(status)
                } else {
                    128 + libc::WTERMSIG(status)
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file the ELF check takes for a static binary: a 64-bit ELF header with no program
    /// headers (so no interpreter).
    fn fake_static(path: &Path) {
        let mut elf = vec![0u8; 64];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        std::fs::write(path, elf).unwrap();
    }

    /// A dynamically linked one: one program header, of type PT_INTERP.
    fn fake_dynamic(path: &Path) {
        let mut elf = vec![0u8; 64 + 56];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        elf[32..40].copy_from_slice(&64u64.to_le_bytes());
        elf[54..56].copy_from_slice(&56u16.to_le_bytes());
        elf[56..58].copy_from_slice(&1u16.to_le_bytes());
        elf[64..68].copy_from_slice(&3u32.to_le_bytes());
        std::fs::write(path, elf).unwrap();
    }

    #[test]
    fn podman_without_catatonit_uses_another_init() {
        // Docker pulled in tini; catatonit was never installed.
        let dir = tempfile::tempdir().unwrap();
        let catatonit = dir.path().join("libexec/podman/catatonit");
        let tini = dir.path().join("tini");
        let tini_static = dir.path().join("tini-static");
        fake_dynamic(&tini);
        fake_static(&tini_static);
        let candidates = vec![catatonit, tini.clone(), tini_static.clone()];
        let init = choose(EngineKind::Podman, &InitRequest::Auto, None, &candidates).unwrap();
        assert_eq!(
            init,
            Init::Host {
                path: tini_static.clone(),
                name: "tini".into()
            }
        );
        let (before, after) = init.wrap(EngineKind::Podman, IMAGE_EXE, &["sleep", "9"]);
        assert_eq!(
            before,
            ["--init", "--init-path", &tini_static.display().to_string()]
        );
        assert_eq!(after, ["sleep", "9"]);
        // Docker, whose daemon has no init, gets the same file bind-mounted as its command.
        let init = choose(EngineKind::Docker, &InitRequest::Auto, None, &candidates).unwrap();
        let (before, after) = init.wrap(EngineKind::Docker, IMAGE_EXE, &["sleep", "9"]);
        assert_eq!(
            before,
            [
                "-v".to_string(),
                format!("{}:{MOUNTED_INIT}:ro", tini_static.display())
            ]
        );
        assert_eq!(after, [MOUNTED_INIT, "--", "sleep", "9"]);
    }

    #[test]
    fn podman_with_catatonit_uses_it() {
        let dir = tempfile::tempdir().unwrap();
        let catatonit = dir.path().join("catatonit");
        let tini = dir.path().join("tini-static");
        fake_static(&catatonit);
        fake_static(&tini);
        let init = choose(
            EngineKind::Podman,
            &InitRequest::Auto,
            None,
            &[catatonit.clone(), tini],
        )
        .unwrap();
        assert_eq!(
            init,
            Init::Host {
                path: catatonit,
                name: "catatonit".into()
            }
        );
    }

    #[test]
    fn docker_prefers_its_daemons_init() {
        let dir = tempfile::tempdir().unwrap();
        let tini = dir.path().join("tini-static");
        fake_static(&tini);
        let init = choose(
            EngineKind::Docker,
            &InitRequest::Auto,
            Some("docker-init"),
            &[tini],
        )
        .unwrap();
        assert_eq!(
            init,
            Init::Engine {
                what: "docker-init".into()
            }
        );
        assert_eq!(
            init.wrap(EngineKind::Docker, IMAGE_EXE, &["sleep"]).0,
            ["--init"]
        );
        assert_eq!(
            parse_docker_init("docker-init|\n").as_deref(),
            Some("docker-init")
        );
        assert_eq!(parse_docker_init("docker-init|N/A\n"), None);
        assert_eq!(parse_docker_init(""), None);
    }

    #[test]
    fn no_static_init_on_the_host_starts_isobench_own_without_init_flag() {
        let dir = tempfile::tempdir().unwrap();
        let tini = dir.path().join("tini");
        fake_dynamic(&tini);
        for kind in [EngineKind::Podman, EngineKind::Docker] {
            let init = choose(kind, &InitRequest::Auto, None, std::slice::from_ref(&tini)).unwrap();
            let Init::Own { why } = &init else {
                panic!("{init:?}")
            };
            assert!(why.contains("dynamically linked"), "{why}");
            assert!(why.contains("apt-get install catatonit"), "{why}");
            let (before, after) = init.wrap(kind, IMAGE_EXE, &["sleep", "9"]);
            assert!(before.is_empty(), "{before:?}");
            assert_eq!(after, ["/isobench", "container-init", "--", "sleep", "9"]);
        }
    }

    #[test]
    fn the_request_overrides_the_search() {
        let dir = tempfile::tempdir().unwrap();
        let tini = dir.path().join("tini");
        let dynamic = dir.path().join("dyn");
        fake_static(&tini);
        fake_dynamic(&dynamic);
        assert!(matches!(
            choose(
                EngineKind::Docker,
                &InitRequest::Own,
                Some("docker-init"),
                std::slice::from_ref(&tini)
            )
            .unwrap(),
            Init::Own { .. }
        ));
        let asked = InitRequest::Path(tini.clone());
        assert!(matches!(
            choose(EngineKind::Docker, &asked, Some("docker-init"), &[]).unwrap(),
            Init::Host { .. }
        ));
        let e = choose(EngineKind::Podman, &InitRequest::Path(dynamic), None, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("dynamically linked"), "{e}");
        assert_eq!(InitRequest::parse("auto").unwrap(), InitRequest::Auto);
        assert_eq!(InitRequest::parse("isobench").unwrap(), InitRequest::Own);
        assert!(InitRequest::parse("tini").is_err());
    }

    #[test]
    fn init_names_follow_links() {
        let dir = tempfile::tempdir().unwrap();
        let tini = dir.path().join("tini-static");
        fake_static(&tini);
        let link = dir.path().join("docker-init");
        std::os::unix::fs::symlink(&tini, &link).unwrap();
        assert_eq!(init_name(&link), "tini");
        assert_eq!(init_name(Path::new("/x/dumb-init")), "dumb-init");
    }
}
