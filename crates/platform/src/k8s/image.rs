//! The agent's image for pods: the `oci` platform's root filesystem ([`write_rootfs`]: the
//! static isobench binary and a static busybox), packed as a one-layer `docker save` archive
//! (what `k8s/mkimage` makes) and imported into the node's containerd with
//! `ctr -n k8s.io images import`. No registry is contacted; pods use `imagePullPolicy: Never`.
//!
//! The archive needs the SHA-256 of its layer and config (containerd checks the layer's
//! `diff_id` when it unpacks); they come from `sha256sum` (coreutils), as the workspace has
//! no SHA-256 crate.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::json;

use crate::cmd;
use crate::oci::image::{write_rootfs, IMAGE_LABEL};
use crate::oci::ImageSource;

/// The image repository in containerd (a domain, so containerd keeps the name as it is).
pub const IMAGE_REPO: &str = "isobench.local/isobench-agent";
/// containerd's namespace of the kubelet's images.
const CTR_NAMESPACE: &str = "k8s.io";
/// The variable naming the node's containerd socket explicitly.
pub const ENV_CONTAINERD: &str = "ISOBENCH_K8S_CONTAINERD";

/// The containerd socket of the node: `ISOBENCH_K8S_CONTAINERD`, else `scripts/k8s-up`'s.
pub fn containerd_socket() -> PathBuf {
    std::env::var_os(ENV_CONTAINERD)
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            super::kubectl::k8s_up_state()
                .join("containerd")
                .join("containerd.sock")
        })
}

/// `isobench.local/isobench-agent:<version>-<hash of both binaries>`.
pub fn tag(src: &ImageSource) -> Result<String> {
    let t = src.tag()?;
    let version = t.split_once(':').map(|(_, v)| v).unwrap_or(&t);
    Ok(format!("{IMAGE_REPO}:{version}"))
}

fn ctr(socket: &Path, args: &[&str], timeout: Duration) -> Result<String> {
    let sock = socket.to_string_lossy();
    let mut argv = vec!["--address", &sock, "-n", CTR_NAMESPACE];
    argv.extend_from_slice(args);
    let out = cmd::run_with_timeout("ctr", &argv, timeout)?;
    if !out.success {
        bail!("`ctr {}` failed: {}", argv.join(" "), out.stderr.trim());
    }
    Ok(out.stdout)
}

/// Whether the node's containerd has the image `tag`.
pub fn exists(socket: &Path, tag: &str) -> Result<bool> {
    let out = ctr(socket, &["images", "ls", "-q"], Duration::from_secs(20))?;
    Ok(out.lines().any(|l| l.trim() == tag))
}

/// The digest of the user's image `reference` in the node's containerd (under the name the
/// kubelet looks it up by, [`crate::userimage::normalized`]), or `None` when it is not there.
pub fn local_image(socket: &Path, reference: &str) -> Result<Option<String>> {
    let out = ctr(socket, &["images", "ls"], Duration::from_secs(20))?;
    Ok(find_in_listing(&out, reference))
}

/// The digest of `reference` in the output of `ctr images ls` (`REF TYPE DIGEST ...`).
fn find_in_listing(listing: &str, reference: &str) -> Option<String> {
    let full = crate::userimage::normalized(reference);
    listing.lines().skip(1).find_map(|l| {
        let mut f = l.split_whitespace();
        let r = f.next()?;
        let digest = f.nth(1)?;
        (r == reference || r == full).then(|| digest.to_string())
    })
}

/// Builds and imports the image of `src` unless the node has it; returns its tag.
pub fn ensure(socket: &Path, src: &ImageSource) -> Result<String> {
    let tag = tag(src)?;
    if exists(socket, &tag)? {
        return Ok(tag);
    }
    let dir = tempdir()?;
    let result = (|| -> Result<()> {
        let archive = dir.join("image.tar");
        write_archive(src, &tag, &dir, &archive)?;
        let a = archive.to_string_lossy();
        ctr(socket, &["images", "import", &a], Duration::from_secs(300))
            .with_context(|| format!("importing the agent image {tag}"))?;
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result.map(|()| tag)
}

fn tempdir() -> Result<PathBuf> {
    let d = std::env::temp_dir().join(format!("isobench-k8s-image-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir(&d).with_context(|| format!("creating {}", d.display()))?;
    Ok(d)
}

/// The SHA-256 of a file, in hex, from `sha256sum`.
fn sha256(path: &Path) -> Result<String> {
    let p = path.to_string_lossy();
    let out = cmd::run_with_timeout("sha256sum", &[&p], Duration::from_secs(120))?;
    if !out.success {
        bail!("`sha256sum {p}` failed: {}", out.stderr.trim());
    }
    let h = out.stdout.split_whitespace().next().unwrap_or("");
    if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("`sha256sum {p}` printed `{}`", out.stdout.trim());
    }
    Ok(h.to_string())
}

/// The image config (the `docker save` / OCI config document) of a layer with `diff_id`.
fn config(diff_id: &str) -> serde_json::Value {
    json!({
        "architecture": "amd64",
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": {
            "Env": ["PATH=/bin:/usr/bin:/sbin:/usr/sbin"],
            "Labels": {
                IMAGE_LABEL: "agent",
                "isobench.version": env!("CARGO_PKG_VERSION"),
            },
        },
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{diff_id}")]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "isobench k8s image"}],
    })
}

/// Writes the `docker save` archive of the agent image as `tag` to `out`, using `dir` for
/// the layer and config.
pub fn write_archive(src: &ImageSource, tag: &str, dir: &Path, out: &Path) -> Result<()> {
    let layer = dir.join("layer.tar");
    let f = File::create(&layer).with_context(|| format!("creating {}", layer.display()))?;
    write_rootfs(src, BufWriter::new(f))?;
    let layer_sha = sha256(&layer)?;
    let cfg_path = dir.join("config.json");
    std::fs::write(&cfg_path, serde_json::to_vec(&config(&layer_sha))?)
        .with_context(|| format!("writing {}", cfg_path.display()))?;
    let cfg_sha = sha256(&cfg_path)?;
    let manifest = json!([{
        "Config": format!("{cfg_sha}.json"),
        "RepoTags": [tag],
        "Layers": [format!("{layer_sha}/layer.tar")],
    }]);
    let f = File::create(out).with_context(|| format!("creating {}", out.display()))?;
    let mut b = tar::Builder::new(BufWriter::new(f));
    b.mode(tar::HeaderMode::Deterministic);
    let mut add = |name: String, path: &Path| -> Result<()> {
        b.append_path_with_name(path, &name)
            .with_context(|| format!("adding {name} to the image archive"))
    };
    let m = dir.join("manifest.json");
    std::fs::write(&m, serde_json::to_vec(&manifest)?)?;
    add("manifest.json".into(), &m)?;
    add(format!("{cfg_sha}.json"), &cfg_path)?;
    add(format!("{layer_sha}/layer.tar"), &layer)?;
    b.into_inner()?.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_image_is_found_under_the_kubelets_name() {
        let listing = "REF TYPE DIGEST SIZE PLATFORMS LABELS\n\
            docker.io/library/isobench-test-user:1 application/vnd.docker.distribution.manifest.v2+json sha256:aa 1.2 MiB linux/amd64 io.cri-containerd.image=managed\n\
            isobench.local/pause:1 application/vnd.docker.distribution.manifest.v2+json sha256:bb 300 KiB linux/amd64 -\n";
        assert_eq!(
            find_in_listing(listing, "isobench-test-user:1").as_deref(),
            Some("sha256:aa")
        );
        assert_eq!(
            find_in_listing(listing, "isobench.local/pause:1").as_deref(),
            Some("sha256:bb")
        );
        assert_eq!(find_in_listing(listing, "isobench-test-user:2"), None);
        assert_eq!(find_in_listing(listing, "redis"), None);
    }

    #[test]
    fn the_archive_names_its_layer_and_config_by_digest() {
        let Ok(busybox) = crate::oci::image::find_busybox() else {
            crate::test_skip::skip("busybox-static", "no static busybox here");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("isobench");
        std::fs::write(&exe, b"\x7fELF fake").unwrap();
        let src = ImageSource { exe, busybox };
        let work = dir.path().join("work");
        std::fs::create_dir(&work).unwrap();
        let out = dir.path().join("image.tar");
        write_archive(&src, "isobench.local/x:1", &work, &out).unwrap();
        let mut ar = tar::Archive::new(File::open(&out).unwrap());
        let names: Vec<String> = ar
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
            .collect();
        let layer_sha = sha256(&work.join("layer.tar")).unwrap();
        assert_eq!(names[0], "manifest.json");
        assert!(
            names.contains(&format!("{layer_sha}/layer.tar")),
            "{names:?}"
        );
        let cfg: serde_json::Value =
            serde_json::from_slice(&std::fs::read(work.join("config.json")).unwrap()).unwrap();
        assert_eq!(
            cfg["rootfs"]["diff_ids"][0],
            format!("sha256:{layer_sha}").as_str()
        );
        assert!(tag(&src)
            .unwrap()
            .starts_with("isobench.local/isobench-agent:"));
    }
}
