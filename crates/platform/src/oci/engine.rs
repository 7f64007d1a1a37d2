//! The container engine, Docker or Podman, driven through its command-line tool with
//! argument vectors (never a shell string).
//!
//! Docker needs a daemon: it is found through `DOCKER_HOST`, else the default socket. Podman
//! has none; on this kind of host it needs `--runtime runc` (crun fails on hybrid cgroup v1
//! layouts), the cgroupfs manager (there is no systemd) and file events (no journald).

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Result};

use crate::cmd;

/// Time limit of an engine command that changes nothing (`version`, `inspect`, `ps`).
pub(crate) const QUERY_TIMEOUT: Duration = Duration::from_secs(20);
/// Time limit of an engine command that creates or removes something.
pub(crate) const CHANGE_TIMEOUT: Duration = Duration::from_secs(120);
/// Time limit of the check whether a Docker daemon answers.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The Docker daemon's socket when `DOCKER_HOST` is not set.
pub const DEFAULT_DOCKER_HOST: &str = "unix:///var/run/docker.sock";

/// Which engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EngineKind {
    /// Docker (`dockerd` + the `docker` CLI).
    Docker,
    /// Podman (no daemon).
    Podman,
}

impl EngineKind {
    /// `docker` or `podman`.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Docker => "docker",
            EngineKind::Podman => "podman",
        }
    }

    /// Parses `docker` or `podman`.
    pub fn parse(s: &str) -> Result<EngineKind, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "docker" => Ok(EngineKind::Docker),
            "podman" => Ok(EngineKind::Podman),
            other => Err(format!(
                "unknown container engine `{other}`; use `docker` or `podman`"
            )),
        }
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// Why an engine cannot be used, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineUnavailable {
    /// Why not.
    pub why: String,
    /// What to do.
    pub fix: String,
}

impl fmt::Display for EngineUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; {}", self.why, self.fix)
    }
}

/// A usable container engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Engine {
    kind: EngineKind,
    cli: PathBuf,
    /// Docker: the daemon's address (`unix:///...`), passed as `-H`.
    host: Option<String>,
}

/// The first of `names` found as an executable file (absolute paths as they are, bare
/// names on `PATH`).
fn find_program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    for name in names {
        let p = Path::new(name);
        if p.is_absolute() {
            if is_executable(p) {
                return Some(p.to_path_buf());
            }
            continue;
        }
        for dir in std::env::split_paths(&path) {
            let c = dir.join(name);
            if is_executable(&c) {
                return Some(c);
            }
        }
    }
    None
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

impl Engine {
    /// The Docker engine: the CLI (Debian's `/usr/bin/docker` first, it matches Debian's
    /// daemon) and a daemon that answers at `DOCKER_HOST` or the default socket.
    pub fn docker() -> Result<Engine, EngineUnavailable> {
        let Some(cli) = find_program(&["/usr/bin/docker", "docker"]) else {
            return Err(EngineUnavailable {
                why: "the `docker` command is not installed".into(),
                fix: "install Docker (Debian: `apt-get install docker.io`) and start dockerd, \
                      or use podman (`ISOBENCH_OCI_ENGINE=podman`)"
                    .into(),
            });
        };
        let host = std::env::var("DOCKER_HOST")
            .ok()
            .filter(|h| !h.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_DOCKER_HOST.to_string());
        let engine = Engine {
            kind: EngineKind::Docker,
            cli,
            host: Some(host.clone()),
        };
        let answer = engine.run_with(
            &["version", "--format", "{{.Server.Version}}"],
            PROBE_TIMEOUT,
        );
        match answer {
            Ok(v) if !v.trim().is_empty() => Ok(engine),
            Ok(_) | Err(_) => Err(EngineUnavailable {
                why: format!(
                    "no Docker daemon answers at {host}{}",
                    match &answer {
                        Err(e) => format!(" ({})", first_line(&format!("{e:#}"))),
                        Ok(_) => String::new(),
                    }
                ),
                fix: "start one (e.g. `dockerd -H unix:///run/isobench-docker.sock --data-root \
                      /var/lib/isobench-docker --exec-root /run/isobench-docker --bridge=none \
                      --iptables=false &`) and set DOCKER_HOST to its socket, or use podman \
                      (`ISOBENCH_OCI_ENGINE=podman`)"
                    .into(),
            }),
        }
    }

    /// The Podman engine: the CLI, run with the runc runtime.
    pub fn podman() -> Result<Engine, EngineUnavailable> {
        let Some(cli) = find_program(&["podman"]) else {
            return Err(EngineUnavailable {
                why: "the `podman` command is not installed".into(),
                fix: "install it (Debian: `apt-get install podman runc`), or use docker \
                      (`ISOBENCH_OCI_ENGINE=docker`)"
                    .into(),
            });
        };
        if find_program(&["runc", "/usr/sbin/runc", "/usr/bin/runc"]).is_none() {
            return Err(EngineUnavailable {
                why: "podman is installed but `runc` is not (crun, podman's default, fails on \
                      this host's cgroup layout)"
                    .into(),
                fix: "install runc (Debian: `apt-get install runc`)".into(),
            });
        }
        let engine = Engine {
            kind: EngineKind::Podman,
            cli,
            host: None,
        };
        match engine.run_with(
            &["version", "--format", "{{.Client.Version}}"],
            PROBE_TIMEOUT,
        ) {
            Ok(_) => Ok(engine),
            Err(e) => Err(EngineUnavailable {
                why: format!("`podman version` failed: {}", first_line(&format!("{e:#}"))),
                fix: "check the podman installation, or use docker (`ISOBENCH_OCI_ENGINE=docker`)"
                    .into(),
            }),
        }
    }

    /// The engine asked for (`docker` or `podman`), or with `None` Docker when a daemon
    /// answers and Podman otherwise.
    pub fn detect(choice: Option<&str>) -> Result<Engine, EngineUnavailable> {
        match choice {
            Some(c) => match EngineKind::parse(c) {
                Ok(EngineKind::Docker) => Engine::docker(),
                Ok(EngineKind::Podman) => Engine::podman(),
                Err(why) => Err(EngineUnavailable {
                    why,
                    fix: "set the engine to `docker` or `podman`".into(),
                }),
            },
            None => match Engine::docker() {
                Ok(e) => Ok(e),
                Err(docker) => Engine::podman().map_err(|podman| EngineUnavailable {
                    why: format!("docker: {}; podman: {}", docker.why, podman.why),
                    fix: format!("{}; or {}", docker.fix, podman.fix),
                }),
            },
        }
    }

    /// Which engine this is.
    pub fn kind(&self) -> EngineKind {
        self.kind
    }

    /// The CLI program.
    pub fn cli(&self) -> &Path {
        &self.cli
    }

    /// Docker: the daemon's address.
    pub fn host(&self) -> Option<&str> {
        self.host.as_deref()
    }

    /// The arguments that come before every subcommand.
    pub(crate) fn global_args(&self) -> Vec<String> {
        match self.kind {
            EngineKind::Docker => match &self.host {
                Some(h) => vec!["-H".into(), h.clone()],
                None => Vec::new(),
            },
            EngineKind::Podman => [
                "--runtime",
                "runc",
                "--cgroup-manager",
                "cgroupfs",
                "--events-backend",
                "file",
            ]
            .map(String::from)
            .to_vec(),
        }
    }

    /// The full argument vector (after the program) for `args`.
    pub(crate) fn argv(&self, args: &[&str]) -> Vec<String> {
        let mut v = self.global_args();
        v.extend(args.iter().map(|a| a.to_string()));
        v
    }

    /// Runs `engine args...`, which must succeed within `timeout`; returns its stdout.
    pub(crate) fn run_with(&self, args: &[&str], timeout: Duration) -> Result<String> {
        let argv = self.argv(args);
        let refs: Vec<&str> = argv.iter().map(String::as_str).collect();
        let prog = self.cli.to_string_lossy();
        let out = cmd::run_with_timeout(&prog, &refs, timeout)?;
        if !out.success {
            bail!(
                "`{} {}` failed: {}",
                self.kind,
                args.join(" "),
                out.stderr.trim()
            );
        }
        Ok(out.stdout)
    }

    /// Runs a query (`inspect`, `ps`, `version`).
    pub(crate) fn query(&self, args: &[&str]) -> Result<String> {
        self.run_with(args, QUERY_TIMEOUT)
    }

    /// Runs a command that creates or removes something.
    pub(crate) fn change(&self, args: &[&str]) -> Result<String> {
        self.run_with(args, CHANGE_TIMEOUT)
    }

    /// The engine's version (the daemon's for Docker).
    pub fn version(&self) -> Result<String> {
        let fmt = match self.kind {
            EngineKind::Docker => "{{.Server.Version}}",
            EngineKind::Podman => "{{.Client.Version}}",
        };
        Ok(self
            .query(&["version", "--format", fmt])?
            .trim()
            .to_string())
    }

    /// One line for the record of a run.
    pub fn describe(&self) -> String {
        let version = self.version().unwrap_or_else(|_| "?".into());
        match (self.kind, &self.host) {
            (EngineKind::Docker, Some(h)) => format!("docker {version} at {h}"),
            (EngineKind::Podman, _) => format!("podman {version} (runtime runc, cgroupfs)"),
            (k, None) => format!("{k} {version}"),
        }
    }

    /// Removes container `name` at once (SIGKILL), with the anonymous volumes a user's
    /// image declares (`VOLUME`); one that is already gone is no error.
    pub(crate) fn remove_container(&self, name: &str) -> Result<()> {
        let mut args = vec!["rm", "-f", "-v"];
        if self.kind == EngineKind::Podman {
            // Podman would first wait for a stop timeout.
            args.extend(["-t", "0"]);
        }
        args.push(name);
        match self.change(&args) {
            Ok(_) => Ok(()),
            Err(e)
                if format!("{e:#}")
                    .to_ascii_lowercase()
                    .contains("no such container") =>
            {
                Ok(())
            }
            Err(e) => Err(e.context(format!("removing container {name}"))),
        }
    }

    /// Whether an image of this name exists.
    pub(crate) fn image_exists(&self, tag: &str) -> bool {
        self.query(&["image", "inspect", "--format", "{{.Id}}", tag])
            .is_ok()
    }

    /// The id and `USER` of the local image `reference`, or `None` when the engine has no
    /// such image (never pulled). Other failures of the engine are errors.
    pub(crate) fn local_image(&self, reference: &str) -> Result<Option<(String, String)>> {
        match self.query(&[
            "image",
            "inspect",
            "--format",
            "{{.Id}}|{{.Config.User}}",
            reference,
        ]) {
            Ok(out) => {
                let line = out.lines().next().unwrap_or("").trim();
                let (id, user) = line.split_once('|').unwrap_or((line, ""));
                Ok(Some((full_id(id), user.to_string())))
            }
            Err(e) => {
                let msg = format!("{e:#}").to_ascii_lowercase();
                if msg.contains("no such image") || msg.contains("image not known") {
                    Ok(None)
                } else {
                    Err(e.context(format!("looking for the image {reference}")))
                }
            }
        }
    }
}

/// An image id as Docker writes it, `sha256:` and the hex digits: Podman gives the same
/// digits without the prefix.
fn full_id(id: &str) -> String {
    let id = id.trim();
    if !id.is_empty() && !id.contains(':') && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        format!("sha256:{id}")
    } else {
        id.to_string()
    }
}

fn first_line(s: &str) -> &str {
    s.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_names() {
        assert_eq!(EngineKind::parse("Docker").unwrap(), EngineKind::Docker);
        assert_eq!(EngineKind::parse("podman").unwrap(), EngineKind::Podman);
        let e = EngineKind::parse("lxc").unwrap_err();
        assert!(e.contains("use `docker` or `podman`"), "{e}");
    }

    #[test]
    fn image_ids_read_alike_from_both_engines() {
        let hex = "1ca2b8bf".repeat(8);
        assert_eq!(full_id(&hex), format!("sha256:{hex}"));
        assert_eq!(full_id(&format!("sha256:{hex}")), format!("sha256:{hex}"));
        assert_eq!(full_id(""), "");
    }

    #[test]
    fn podman_runs_with_runc_and_cgroupfs() {
        let e = Engine {
            kind: EngineKind::Podman,
            cli: "/usr/bin/podman".into(),
            host: None,
        };
        assert_eq!(
            e.argv(&["ps"]).join(" "),
            "--runtime runc --cgroup-manager cgroupfs --events-backend file ps"
        );
        let d = Engine {
            kind: EngineKind::Docker,
            cli: "/usr/bin/docker".into(),
            host: Some("unix:///tmp/d.sock".into()),
        };
        assert_eq!(d.argv(&["ps"]).join(" "), "-H unix:///tmp/d.sock ps");
    }
}
