//! A tenant that runs from the user's own container image (`image = "name:tag"` on the `oci`
//! and `k8s` platforms), so the `command` probe and stressor and a service's `server_cmd`
//! run the user's programs inside their own image's filesystem.
//!
//! The image is never pulled: it must already be in the engine's store (Docker, Podman) or
//! the node's containerd, and a tenant whose image is missing is refused before any tenant
//! is created ([`crate::Platform::preflight`]). The agent is not in such an image, so the
//! static isobench binary and the static busybox the agent's own image is made of are
//! mounted read-only under [`INJECTED_DIR`]: isobench runs as the agent, busybox gives the
//! container's sleeper (`busybox sleep`) and, on `k8s`, the `env` that passes a process its
//! variables. Neither needs anything from the image (no shell, no C library); the engine
//! provides `/proc`, `/sys` and `/dev`, and the tenant's workdir is mounted as for every
//! tenant. The container runs as root, as the agent's own image does, whatever `USER` the
//! image names (the tenant's notes say so).

/// Where the agent's files are mounted in a user's image.
pub const INJECTED_DIR: &str = "/.isobench";
/// The static isobench binary in a user's image.
pub const INJECTED_EXE: &str = "/.isobench/isobench";
/// The static busybox in a user's image.
pub const INJECTED_BUSYBOX: &str = "/.isobench/busybox";

/// Longest image reference accepted.
const MAX_LEN: usize = 255;

/// Checks an image reference (`name`, `name:tag`, `registry/name:tag`, `name@sha256:...`):
/// it starts with a letter or digit and holds only letters, digits and `._-/:@`. What is
/// wrong, when something is.
pub fn check_reference(r: &str) -> Result<(), String> {
    if r.is_empty() {
        return Err("the image reference is empty".into());
    }
    if r.len() > MAX_LEN {
        return Err(format!(
            "the image reference is {} characters long, more than {MAX_LEN}",
            r.len()
        ));
    }
    if !r.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(format!(
            "`{r}` does not start with a letter or digit, as an image reference does"
        ));
    }
    if let Some(c) = r
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | ':' | '@')))
    {
        return Err(format!(
            "`{r}` holds `{c}`, which no image reference holds (letters, digits and `._-/:@`)"
        ));
    }
    if r.ends_with([':', '/', '@']) {
        return Err(format!(
            "`{r}` ends with `{}`",
            r.chars().last().unwrap_or(' ')
        ));
    }
    Ok(())
}

/// The name containerd and the kubelet know an image by: Docker's short names in full
/// (`redis:7` is `docker.io/library/redis:7`, `me/app` is `docker.io/me/app:latest`); a
/// name whose first part is a registry (it has a `.` or `:`, or is `localhost`) as it is,
/// with `:latest` when it has no tag or digest.
pub fn normalized(r: &str) -> String {
    let (path, digest) = match r.split_once('@') {
        Some((p, d)) => (p, Some(d)),
        None => (r, None),
    };
    let last = path.rsplit('/').next().unwrap_or(path);
    let tagged = last.contains(':');
    let full = match path.split_once('/') {
        None => format!("docker.io/library/{path}"),
        Some((first, _)) if first.contains(['.', ':']) || first == "localhost" => path.to_string(),
        Some(_) => format!("docker.io/{path}"),
    };
    match digest {
        Some(d) => format!("{full}@{d}"),
        None if tagged => full,
        None => format!("{full}:latest"),
    }
}

/// A user's image found in the store of the engine or node: what the run records of it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FoundImage {
    /// The reference as the scenario wrote it.
    pub reference: String,
    /// Its id or digest in the store (`sha256:...`), when the store says.
    pub id: Option<String>,
    /// The `USER` the image names, when it names one other than root.
    pub user: Option<String>,
}

impl FoundImage {
    /// `image: name:tag (sha256:0123456789ab)` for the tenant's notes.
    pub fn note(&self) -> String {
        match &self.id {
            Some(id) => format!("image: {} ({})", self.reference, short_id(id)),
            None => format!("image: {}", self.reference),
        }
    }

    /// Every note of the tenant about its image: the image, how the agent gets in, and the
    /// `USER` it does not run as.
    pub fn notes(&self) -> Vec<String> {
        let mut n = vec![
            self.note(),
            format!(
                "the agent is the static isobench mounted read-only at {INJECTED_EXE} \
                 (with busybox at {INJECTED_BUSYBOX}); the image's entrypoint and command \
                 are not run"
            ),
        ];
        if let Some(u) = &self.user {
            n.push(format!(
                "runs as root (uid 0), not as the image's USER `{u}`, as the agent's own image \
                 does"
            ));
        }
        n
    }
}

/// `sha256:` and the first 12 hex digits of an id.
fn short_id(id: &str) -> String {
    let (algo, hex) = id.split_once(':').unwrap_or(("sha256", id));
    format!("{algo}:{}", &hex[..hex.len().min(12)])
}

/// The `USER` of an image, unless it is empty or root.
pub(crate) fn non_root_user(user: &str) -> Option<String> {
    let u = user.trim();
    let name = u.split(':').next().unwrap_or("");
    (!u.is_empty() && name != "0" && name != "root").then(|| u.to_string())
}

/// The error of a tenant whose image is not in the store, naming the tenant, the image,
/// where it was looked for, and the fix.
pub(crate) fn missing(tenant: &str, reference: &str, store: &str, fix: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "tenant {tenant}: the image `{reference}` is not in {store}, and isobench never pulls \
         images; {fix}, then run again"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_checked() {
        for ok in [
            "redis",
            "redis:7",
            "isobench-test-user:1",
            "registry.local:5000/team/app:v1.2",
            "app@sha256:0123abcd",
        ] {
            check_reference(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for (bad, why) in [
            ("", "empty"),
            ("--privileged", "does not start"),
            ("redis 7", "holds ` `"),
            ("redis:", "ends with"),
            ("a$b", "holds `$`"),
        ] {
            let e = check_reference(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn short_names_are_completed_as_docker_does() {
        for (short, full) in [
            ("redis", "docker.io/library/redis:latest"),
            ("redis:7", "docker.io/library/redis:7"),
            ("me/app", "docker.io/me/app:latest"),
            ("isobench.local/x:1", "isobench.local/x:1"),
            ("localhost/x", "localhost/x:latest"),
            ("reg:5000/x", "reg:5000/x:latest"),
            ("app@sha256:ab", "docker.io/library/app@sha256:ab"),
        ] {
            assert_eq!(normalized(short), full, "{short}");
        }
    }

    #[test]
    fn the_notes_name_the_image_and_its_id() {
        let f = FoundImage {
            reference: "nginx:1".into(),
            id: Some(format!("sha256:{}", "ab".repeat(32))),
            user: non_root_user("nginx"),
        };
        let n = f.notes();
        assert_eq!(n[0], "image: nginx:1 (sha256:abababababab)");
        assert!(n[1].contains(INJECTED_EXE), "{}", n[1]);
        assert!(n[2].contains("USER `nginx`"), "{}", n[2]);
        assert_eq!(non_root_user("0:0"), None);
        assert_eq!(non_root_user("root"), None);
        assert_eq!(non_root_user(""), None);
    }
}
