//! The guest kernel: Debian's cloud kernel, fetched once with `apt-get download` and
//! unpacked with `dpkg-deb -x` into the cache (`isobench vm setup`), or a kernel the user
//! names. The choice is recorded in `<cache>/vm/kernel`, so every later run boots the same
//! one.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::cmd;

/// The Debian meta package whose dependency is the real, versioned kernel package.
pub const KERNEL_META_PACKAGE: &str = "linux-image-cloud-amd64";

/// How long a download may take.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(600);

/// The kernel guests boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    /// The kernel image (`vmlinuz`).
    pub image: PathBuf,
    /// Its modules directory (`lib/modules/<release>`), when the kernel came with one: the
    /// virtio drivers are loaded from there.
    pub modules: Option<PathBuf>,
    /// Where it came from: `debian <package> <version>` or `user`.
    pub source: String,
}

impl Kernel {
    /// A kernel the user names: used as it is, with the modules of its release when they sit
    /// beside it in the usual layout (`<root>/boot/vmlinuz-R` and `<root>/lib/modules/R`).
    pub fn user(image: &Path) -> Result<Kernel> {
        if !image.is_file() {
            bail!(
                "the kernel {} does not exist; pass the path of a bzImage/vmlinuz, or run \
                 `isobench vm setup` without --kernel to fetch Debian's cloud kernel",
                image.display()
            );
        }
        let image = image
            .canonicalize()
            .with_context(|| format!("resolving {}", image.display()))?;
        let modules = modules_beside(&image);
        Ok(Kernel {
            image,
            modules,
            source: "user".into(),
        })
    }

    fn to_record(&self) -> String {
        let mut s = format!("image={}\nsource={}\n", self.image.display(), self.source);
        if let Some(m) = &self.modules {
            s.push_str(&format!("modules={}\n", m.display()));
        }
        s
    }

    fn from_record(text: &str) -> Option<Kernel> {
        let get = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(k)?.strip_prefix('='))
                .map(str::to_string)
        };
        Some(Kernel {
            image: PathBuf::from(get("image")?),
            modules: get("modules").map(PathBuf::from),
            source: get("source").unwrap_or_default(),
        })
    }
}

/// `<root>/lib/modules/<release>` for `<root>/boot/vmlinuz-<release>`.
fn modules_beside(image: &Path) -> Option<PathBuf> {
    let release = image.file_name()?.to_str()?.strip_prefix("vmlinuz-")?;
    let root = image.parent()?.parent()?;
    let m = root.join("lib/modules").join(release);
    m.is_dir().then_some(m)
}

/// `<cache>/vm`: kernels, initramfs archives, the record of the chosen kernel.
pub fn vm_cache_dir() -> Result<PathBuf> {
    crate::run::cache_dir()
        .map(|d| d.join("vm"))
        .context("no cache directory: set HOME or XDG_CACHE_HOME")
}

fn record_path() -> Result<PathBuf> {
    Ok(vm_cache_dir()?.join("kernel"))
}

/// The kernel `isobench vm setup` recorded, if it is still there.
pub fn recorded() -> Result<Option<Kernel>> {
    let path = record_path()?;
    let Ok(text) = fs::read_to_string(&path) else {
        return Ok(None);
    };
    Ok(Kernel::from_record(&text).filter(|k| k.image.is_file()))
}

/// The kernel to boot: `explicit` when given, else the recorded one, else an error that
/// says to run `isobench vm setup`.
pub fn resolve(explicit: Option<&Path>) -> Result<Kernel> {
    if let Some(p) = explicit {
        return Kernel::user(p);
    }
    recorded()?.context(
        "no guest kernel: run `isobench vm setup` (fetches Debian's cloud kernel into the \
         cache) or pass one with --kernel",
    )
}

/// What `setup` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setup {
    /// The kernel now recorded.
    pub kernel: Kernel,
    /// Whether it was fetched now (false: it was already there).
    pub fetched: bool,
}

/// Records the kernel guests boot: `explicit` as it is, or Debian's cloud kernel, fetched
/// and unpacked into the cache unless it is there already. Idempotent.
pub fn setup(explicit: Option<&Path>) -> Result<Setup> {
    let dir = vm_cache_dir()?;
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    if let Some(p) = explicit {
        let kernel = Kernel::user(p)?;
        write_record(&kernel)?;
        return Ok(Setup {
            kernel,
            fetched: false,
        });
    }
    if let Some(k) = recorded()? {
        if k.source.starts_with("debian ") {
            return Ok(Setup {
                kernel: k,
                fetched: false,
            });
        }
    }
    let kernel = fetch_debian_kernel(&dir)?;
    write_record(&kernel)?;
    Ok(Setup {
        kernel,
        fetched: true,
    })
}

fn write_record(kernel: &Kernel) -> Result<()> {
    let path = record_path()?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    fs::write(&tmp, kernel.to_record()).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))
}

/// The versioned package a meta package's `Depends` names (`linux-image-6.1.0-56-cloud-amd64
/// (= 6.1.192-2)` -> name and version).
pub(crate) fn versioned_dependency(depends: &str) -> Option<(String, Option<String>)> {
    depends.split(',').map(str::trim).find_map(|d| {
        let d = d.split('|').next()?.trim();
        let (name, rest) = match d.find(' ') {
            Some(i) => (&d[..i], d[i..].trim()),
            None => (d, ""),
        };
        if !name.starts_with("linux-image-") || name == KERNEL_META_PACKAGE {
            return None;
        }
        let version = rest
            .strip_prefix("(=")
            .and_then(|v| v.strip_suffix(')'))
            .map(|v| v.trim().to_string());
        Some((name.to_string(), version))
    })
}

fn apt_download(dir: &Path, what: &str) -> Result<PathBuf> {
    let before: Vec<_> = debs_in(dir);
    let out = std::process::Command::new("apt-get")
        .args(["download", "-q", what])
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("running `apt-get download {what}` (is this Debian?)"))?;
    if !out.status.success() {
        bail!(
            "`apt-get download {what}` failed: {}; run `apt-get update` first, or pass a \
             kernel with --kernel",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let base = what.split('=').next().unwrap_or(what);
    debs_in(dir)
        .into_iter()
        .find(|p| {
            !before.contains(p)
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&format!("{base}_")))
        })
        .or_else(|| {
            debs_in(dir).into_iter().find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&format!("{base}_")))
            })
        })
        .with_context(|| {
            format!(
                "`apt-get download {what}` left no .deb in {}",
                dir.display()
            )
        })
}

fn debs_in(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "deb"))
                .collect()
        })
        .unwrap_or_default()
}

fn fetch_debian_kernel(dir: &Path) -> Result<Kernel> {
    let work = dir.join(format!("download.{}", std::process::id()));
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let result = (|| -> Result<Kernel> {
        let meta = apt_download(&work, KERNEL_META_PACKAGE)?;
        let meta_s = meta.display().to_string();
        let depends =
            cmd::run_with_timeout("dpkg-deb", &["-f", &meta_s, "Depends"], DOWNLOAD_TIMEOUT)
                .context("running dpkg-deb (is dpkg installed?)")?;
        if !depends.success {
            bail!(
                "`dpkg-deb -f {meta_s} Depends` failed: {}",
                depends.stderr.trim()
            );
        }
        let (package, version) = versioned_dependency(&depends.stdout).with_context(|| {
            format!(
                "{KERNEL_META_PACKAGE} depends on no linux-image package ({})",
                depends.stdout.trim()
            )
        })?;
        let what = match &version {
            Some(v) => format!("{package}={v}"),
            None => package.clone(),
        };
        let deb = apt_download(&work, &what)?;
        let unpack = work.join("root");
        let deb_s = deb.display().to_string();
        let unpack_s = unpack.display().to_string();
        let o = cmd::run_with_timeout("dpkg-deb", &["-x", &deb_s, &unpack_s], DOWNLOAD_TIMEOUT)?;
        if !o.success {
            bail!("`dpkg-deb -x {deb_s}` failed: {}", o.stderr.trim());
        }
        let version = version.unwrap_or_else(|| "?".into());
        let final_dir = dir.join(format!("{package}_{version}"));
        let _ = fs::remove_dir_all(&final_dir);
        fs::rename(&unpack, &final_dir)
            .with_context(|| format!("moving the kernel to {}", final_dir.display()))?;
        let image = fs::read_dir(final_dir.join("boot"))
            .with_context(|| format!("{} has no boot/", final_dir.display()))?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("vmlinuz-"))
            })
            .with_context(|| format!("{} has no boot/vmlinuz-*", final_dir.display()))?;
        Ok(Kernel {
            modules: modules_beside(&image),
            image,
            source: format!("debian {package} {version}"),
        })
    })();
    let _ = fs::remove_dir_all(&work);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_meta_package_names_the_real_kernel() {
        assert_eq!(
            versioned_dependency("linux-image-6.1.0-56-cloud-amd64 (= 6.1.192-2)\n"),
            Some((
                "linux-image-6.1.0-56-cloud-amd64".into(),
                Some("6.1.192-2".into())
            ))
        );
        assert_eq!(
            versioned_dependency("linux-image-6.12.9-cloud-amd64"),
            Some(("linux-image-6.12.9-cloud-amd64".into(), None))
        );
        assert_eq!(versioned_dependency("libc6 (>= 2.3)"), None);
    }

    #[test]
    fn records_read_back_and_user_kernels_find_their_modules() {
        let d = tempfile::tempdir().unwrap();
        let boot = d.path().join("boot");
        fs::create_dir_all(&boot).unwrap();
        fs::create_dir_all(d.path().join("lib/modules/6.1.0-x")).unwrap();
        let image = boot.join("vmlinuz-6.1.0-x");
        fs::write(&image, b"kernel").unwrap();
        let k = Kernel::user(&image).unwrap();
        assert_eq!(
            k.modules,
            Some(d.path().canonicalize().unwrap().join("lib/modules/6.1.0-x"))
        );
        assert_eq!(Kernel::from_record(&k.to_record()), Some(k));
        let e = Kernel::user(&d.path().join("nope"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("isobench vm setup"), "{e}");
    }
}
