//! `kubectl`, driven with argument vectors only (never a shell string), always with an
//! explicit `--kubeconfig` and a time limit.
//!
//! The kubeconfig is the platform option, else `KUBECONFIG`, else the admin kubeconfig
//! `scripts/k8s-up` writes (`$ISOBENCH_K8S_STATE/admin.kubeconfig`) when it exists. kubectl
//! is `ISOBENCH_KUBECTL`, else the one `scripts/k8s-up` builds
//! (`$ISOBENCH_K8S_CACHE/bin/v1.37.2/kubectl`), else `kubectl` on `PATH`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::cmd;

/// The variable naming the kubectl binary explicitly.
pub const ENV_KUBECTL: &str = "ISOBENCH_KUBECTL";
/// The Kubernetes version `scripts/k8s-up` builds.
const K8S_VERSION: &str = "v1.37.2";

/// `scripts/k8s-up`'s state directory (`ISOBENCH_K8S_STATE`, default `/run/isobench-k8s`).
pub fn k8s_up_state() -> PathBuf {
    std::env::var_os("ISOBENCH_K8S_STATE")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/isobench-k8s"))
}

/// `scripts/k8s-up`'s build cache (`ISOBENCH_K8S_CACHE`, default `/var/cache/isobench-k8s`).
fn k8s_up_cache() -> PathBuf {
    std::env::var_os("ISOBENCH_K8S_CACHE")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/isobench-k8s"))
}

/// The kubeconfig to use: `explicit`, else `KUBECONFIG`, else `scripts/k8s-up`'s when it
/// exists. `None`: no cluster is configured.
pub fn kubeconfig(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("KUBECONFIG").filter(|s| !s.is_empty()) {
        // kubectl merges a colon-separated list; the platform uses the first file.
        let first = p
            .to_string_lossy()
            .split(':')
            .next()
            .unwrap_or("")
            .to_string();
        if !first.is_empty() {
            return Some(PathBuf::from(first));
        }
    }
    let up = k8s_up_state().join("admin.kubeconfig");
    up.is_file().then_some(up)
}

/// The kubectl binary: `ISOBENCH_KUBECTL`, else `scripts/k8s-up`'s, else `kubectl` on `PATH`.
pub fn find_kubectl() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(ENV_KUBECTL).filter(|s| !s.is_empty()) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!("{ENV_KUBECTL}={} is not a file", p.display());
        }
        return Ok(p);
    }
    let built = k8s_up_cache().join("bin").join(K8S_VERSION).join("kubectl");
    if built.is_file() {
        return Ok(built);
    }
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        let p = dir.join("kubectl");
        if p.is_file() {
            return Ok(p);
        }
    }
    bail!(
        "no kubectl found (looked at {ENV_KUBECTL}, {} and PATH); `scripts/k8s-up --build-only` \
         builds one",
        built.display()
    )
}

/// kubectl with its kubeconfig.
#[derive(Debug, Clone)]
pub struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    /// kubectl ([`find_kubectl`]) with the kubeconfig [`kubeconfig`] resolves.
    pub fn new(explicit: Option<&Path>) -> Result<Kubectl> {
        let Some(kubeconfig) = kubeconfig(explicit) else {
            bail!("no kubeconfig: neither the option, KUBECONFIG nor scripts/k8s-up's is set");
        };
        if !kubeconfig.is_file() {
            bail!("the kubeconfig {} does not exist", kubeconfig.display());
        }
        Ok(Kubectl {
            bin: find_kubectl()?,
            kubeconfig,
        })
    }

    /// kubectl at `bin` with `kubeconfig`, neither checked.
    pub fn with_paths(bin: PathBuf, kubeconfig: PathBuf) -> Kubectl {
        Kubectl { bin, kubeconfig }
    }

    /// The kubectl binary.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// The kubeconfig.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The global arguments that come before every command.
    pub fn global_args(&self) -> Vec<String> {
        vec![
            "--kubeconfig".into(),
            self.kubeconfig.to_string_lossy().into_owned(),
        ]
    }

    fn argv<'a>(&'a self, g: &'a [String], args: &'a [&'a str]) -> Vec<&'a str> {
        g.iter()
            .map(String::as_str)
            .chain(args.iter().copied())
            .collect()
    }

    /// Runs `kubectl args...` with `input` on stdin, within `timeout`; its stdout, or an
    /// error carrying the command and its stderr.
    pub fn run(&self, args: &[&str], input: Option<&[u8]>, timeout: Duration) -> Result<String> {
        let g = self.global_args();
        let argv = self.argv(&g, args);
        let bin = self.bin.to_string_lossy();
        let out = cmd::run_with_input(&bin, &argv, input, timeout)?;
        if !out.success {
            bail!("`kubectl {}` failed: {}", args.join(" "), out.stderr.trim());
        }
        Ok(out.stdout)
    }

    /// A read-only query, with a short time limit.
    pub fn query(&self, args: &[&str]) -> Result<String> {
        self.run(args, None, Duration::from_secs(20))
    }

    /// A query parsed as JSON (`-o json` is added).
    pub fn json(&self, args: &[&str]) -> Result<serde_json::Value> {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        let out = self.query(&a)?;
        serde_json::from_str(&out)
            .with_context(|| format!("parsing the JSON of `kubectl {}`", a.join(" ")))
    }

    /// `kubectl apply -f -` of a manifest.
    pub fn apply(&self, manifest: &serde_json::Value) -> Result<()> {
        let text = serde_json::to_vec(manifest)?;
        self.run(&["apply", "-f", "-"], Some(&text), Duration::from_secs(30))
            .context("applying the manifest")?;
        Ok(())
    }

    /// Whether the API server answers `/readyz` within `timeout`; why not otherwise.
    pub fn ready(&self, timeout: Duration) -> Result<()> {
        let t = format!("--request-timeout={}s", timeout.as_secs().max(1));
        let out = self.run(
            &[&t, "get", "--raw", "/readyz"],
            None,
            timeout + Duration::from_secs(1),
        )?;
        if out.trim() != "ok" {
            bail!("the API server's /readyz says `{}`", out.trim());
        }
        Ok(())
    }
}
