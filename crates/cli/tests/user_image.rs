//! Tenants that run from the user's own image (`image = "name:tag"`): on Docker and on the
//! Kubernetes node, a victim's `command` probe and an aggressor's `command` stressor read a
//! file only the image holds (so they ran inside it), an image that is not there is
//! refused before any container or pod is made, and a platform that runs no images refuses
//! the field when the plan is made.
//!
//! The image is made here without any network: a tar of a tiny root filesystem (a static
//! busybox and a marker file; no shell links but `sh` and `cat`, no `/tmp`, no `/proc`, no C
//! library) given to `docker import`.
//!
//! Needs root, a Docker daemon at `DOCKER_HOST` (or the default socket), the static isobench
//! binary and busybox-static; `scripts/test` sets them up. Without them the Docker tests
//! print why and pass, except under `CI=true`, where they fail. The k8s test also needs the
//! cluster of `scripts/k8s-up` (skipped with the reason when there is none) and `ctr`; the
//! image goes to the node's containerd as a user would put it there (`docker save`, then
//! `ctr images import`).

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{code, isobench, text, write};
use isobench_platform::k8s;
use isobench_platform::oci::{self, Engine};
use isobench_store::{RunId, Store};

/// The tag of the image the tests build.
const USER_IMAGE: &str = "isobench-test-user:1";
/// The number the marker file holds, read by the probe.
const MARKER_NUMBER: u32 = 4217;
/// The marker file, in the image only.
const MARKER: &str = "/etc/isobench-test-marker";

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Docker, when the tests can use it; else prints why (and fails under CI).
fn docker_or_skip(test: &str) -> Option<Engine> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        common::skip_test("root", test, "needs root");
        return None;
    }
    let engine = Engine::docker().map_err(|e| e.to_string());
    let why = match &engine {
        Err(e) => Some(e.clone()),
        Ok(_) => oci::ImageSource::find().err().map(|e| format!("{e:#}")),
    };
    match why {
        None => engine.ok(),
        Some(why) if in_ci() => panic!("{test}: docker is required under CI=true: {why}"),
        Some(why) => {
            common::skip_test("docker", test, &why);
            None
        }
    }
}

/// The engine's CLI with its daemon.
fn docker(engine: &Engine) -> Command {
    let mut c = Command::new(engine.cli());
    if let Some(h) = engine.host() {
        c.args(["-H", h]);
    }
    c
}

/// Builds [`USER_IMAGE`] (again: an import of the same files is cheap): a static busybox at
/// `/bin/busybox` with `sh` and `cat` links, and the marker file.
fn build_user_image(engine: &Engine) {
    let busybox = oci::image::find_busybox().expect("a static busybox");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("rootfs");
    for d in ["bin", "etc"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::copy(&busybox, root.join("bin/busybox")).unwrap();
    for applet in ["sh", "cat"] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).unwrap();
    }
    std::fs::write(
        root.join(MARKER.trim_start_matches('/')),
        format!("isobench user image marker {MARKER_NUMBER}\n"),
    )
    .unwrap();
    let tar = dir.path().join("rootfs.tar");
    let st = Command::new("tar")
        .arg("-C")
        .arg(&root)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .unwrap();
    assert!(st.success(), "tar failed");
    let out = docker(engine)
        .arg("import")
        .arg(&tar)
        .arg(USER_IMAGE)
        .output()
        .unwrap();
    assert!(out.status.success(), "docker import: {}", text(&out.stderr));
}

/// Imports [`USER_IMAGE`] from Docker into the node's containerd.
fn import_into_the_node(engine: &Engine, dir: &Path) {
    let tar = dir.join("user.tar");
    let out = docker(engine)
        .args(["save", USER_IMAGE, "-o"])
        .arg(&tar)
        .output()
        .unwrap();
    assert!(out.status.success(), "docker save: {}", text(&out.stderr));
    let out = Command::new("ctr")
        .arg("--address")
        .arg(k8s::containerd_socket())
        .args(["-n", "k8s.io", "images", "import"])
        .arg(&tar)
        .output()
        .unwrap();
    assert!(out.status.success(), "ctr import: {}", text(&out.stderr));
}

/// The samples of metric `marker` of the one run in `db`, its tenant facts, and its id.
fn marker_run(db: &Path) -> (Vec<f64>, Vec<serde_json::Value>, Vec<f64>, String) {
    let store = Store::open(db).unwrap();
    let runs = store.list_runs().unwrap();
    assert_eq!(runs.len(), 1);
    let run = runs[0].id.as_str().to_string();
    let loaded = store.load_run(&RunId::new(&run)).unwrap();
    let values = loaded
        .trials
        .iter()
        .flat_map(|t| t.samples.iter().filter(|s| s.metric == "marker"))
        .map(|s| s.value)
        .collect();
    let rates = loaded
        .trials
        .iter()
        .flat_map(|t| t.stressor_reports.iter().map(|r| r.ops_per_sec))
        .collect();
    let facts = loaded
        .facts
        .iter()
        .filter(|f| f.key == "tenant")
        .map(|f| f.value.clone())
        .collect();
    (values, facts, rates, run)
}

/// The containers of run `run` (running or not).
fn containers_of_run(engine: &Engine, run: &str) -> Vec<String> {
    let out = docker(engine)
        .args([
            "ps",
            "-a",
            "--format",
            "{{.Names}}",
            "--filter",
            &format!("label={}={run}", oci::RUN_LABEL),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "docker ps: {}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(str::to_string)
        .filter(|l| !l.is_empty())
        .collect()
}

/// A matrix of one victim and one aggressor on `platform`; `victim_image` and
/// `aggressor_image` are the tenants' `image` lines (empty for none). The aggressor is
/// declared first, so a check made only when the victim is created would come after a
/// container was made.
fn scenario(platform: &str, victim_image: &str, aggressor_image: &str) -> String {
    format!(
        r#"
name = "user-image"
kind = "matrix"
seed = 3
platform = "{platform}"
# k8s bounds no block io, so it contains no aggressor: the command stressor runs there
# only when allowed.
unsafe_on_host = "allow"

[trial]
duration = "300ms"
warmup = "100ms"
solo = "300ms"
timeout = "30s"
max_retries = 0
design = "paired"

[repetitions]
min = 1
max = 1

[[tenant]]
name = "aggressor"
role = "aggressor"
limits = {{ memory = "256M", pids = 64 }}
{aggressor_image}

[[tenant]]
name = "victim"
role = "victim"
limits = {{ memory = "256M", pids = 64 }}
{victim_image}

[[probe]]
name = "command"
params = {{ cmd = "cat {MARKER}", metric = 'regex:marker (\d+)', name = "marker", unit = "count", direction = "higher" }}

[[stressor]]
name = "command"
label = "cat-marker"
params = {{ cmd = "cat {MARKER}" }}
"#
    )
}

#[test]
fn a_probe_and_a_stressor_run_inside_the_users_image_on_docker() {
    let test = "a_probe_and_a_stressor_run_inside_the_users_image_on_docker";
    let Some(engine) = docker_or_skip(test) else {
        return;
    };
    assert!(
        !Path::new(MARKER).exists(),
        "{MARKER} exists on this host, so reading it proves nothing"
    );
    build_user_image(&engine);
    let dir = tempfile::tempdir().unwrap();
    let image = format!("image = \"{USER_IMAGE}\"");
    let f = write(dir.path(), "s.toml", &scenario("oci", &image, &image));

    // The plan says what each tenant runs from.
    let dry = isobench()
        .args(["run", &f, "--dry-run"])
        .env("ISOBENCH_OCI_ENGINE", "docker")
        .output()
        .unwrap();
    assert_eq!(code(&dry), 0, "{}", text(&dry.stderr));
    let plan = text(&dry.stdout);
    assert!(
        plan.contains(&format!("tenant victim       image: {USER_IMAGE}")),
        "{plan}"
    );

    let db = dir.path().join("runs.db");
    let out = isobench()
        .args(["run", &f, "-q", "--db"])
        .arg(&db)
        .env("ISOBENCH_OCI_ENGINE", "docker")
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    // 4: ran, but some results are untrustworthy (one round on a shared machine).
    assert!(
        [0, 4].contains(&code(&out)),
        "exit {}: {}",
        code(&out),
        text(&out.stderr)
    );
    let run = assert_ran_in_the_image(&db);
    // Nothing is left of the run.
    assert_eq!(containers_of_run(&engine, &run), Vec::<String>::new());
}

/// Checks the one run in `db`: the probe read the image's marker, the stressor's runs of
/// `cat` in the aggressor's image succeeded, and both tenants' records name the image and
/// its id. The run's id.
fn assert_ran_in_the_image(db: &Path) -> String {
    let (values, facts, rates, run) = marker_run(db);
    assert!(!values.is_empty(), "no marker samples");
    assert!(
        values.iter().all(|v| *v == f64::from(MARKER_NUMBER)),
        "{values:?}"
    );
    assert!(
        !rates.is_empty() && rates.iter().all(|r| *r > 0.0),
        "{rates:?}"
    );
    assert_eq!(facts.len(), 2, "{facts:#?}");
    for v in &facts {
        assert_eq!(v["details"]["image"]["reference"], USER_IMAGE, "{v:#}");
        let id = v["details"]["image"]["id"].as_str().unwrap_or("");
        assert!(id.starts_with("sha256:"), "{v:#}");
        let notes = v["notes"].to_string();
        assert!(
            notes.contains(&format!("image: {USER_IMAGE} (sha256:")),
            "{notes}"
        );
    }
    run
}

#[test]
fn a_probe_and_a_stressor_run_inside_the_users_image_on_k8s() {
    let test = "a_probe_and_a_stressor_run_inside_the_users_image_on_k8s";
    let Some(engine) = docker_or_skip(test) else {
        return;
    };
    if let Some(why) = std::env::var_os("ISOBENCH_K8S_SKIP") {
        common::skip_test("k8s", test, &why.to_string_lossy());
        return;
    }
    if let Err(e) = k8s::available() {
        common::skip_test("k8s", test, &e.to_string());
        return;
    }
    build_user_image(&engine);
    let dir = tempfile::tempdir().unwrap();
    import_into_the_node(&engine, dir.path());
    let image = format!("image = \"{USER_IMAGE}\"");
    let f = write(dir.path(), "s.toml", &scenario("k8s", &image, &image));
    let db = dir.path().join("runs.db");
    let out = isobench()
        .args(["run", &f, "-q", "--db"])
        .arg(&db)
        .timeout(Duration::from_secs(600))
        .output()
        .unwrap();
    assert!(
        [0, 4].contains(&code(&out)),
        "exit {}: {}",
        code(&out),
        text(&out.stderr)
    );
    assert_ran_in_the_image(&db);

    // An image the node lacks: refused before any pod, naming the fix.
    let absent = "image = \"isobench-test-absent:404\"";
    let f = write(dir.path(), "absent.toml", &scenario("k8s", absent, ""));
    let out = isobench()
        .args(["run", &f, "-q", "--db"])
        .arg(dir.path().join("absent.db"))
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_ne!(code(&out), 0, "{err}");
    for want in [
        "tenant victim",
        "docker.io/library/isobench-test-absent:404",
        "images import",
    ] {
        assert!(err.contains(want), "`{want}` missing from: {err}");
    }
    assert!(!err.contains("creating tenant"), "{err}");
}

#[test]
fn an_absent_image_is_refused_before_any_container_is_made() {
    let test = "an_absent_image_is_refused_before_any_container_is_made";
    let Some(engine) = docker_or_skip(test) else {
        return;
    };
    let absent = "isobench-test-absent:404";
    // Gone, should an earlier run have made it (an error when there is none).
    let _ = docker(&engine).args(["image", "rm", absent]).output();
    let dir = tempfile::tempdir().unwrap();
    // The aggressor (declared first) runs the agent's own image: only a check of every
    // tenant before the first is created keeps its container from being made.
    let f = write(
        dir.path(),
        "s.toml",
        &scenario("oci", &format!("image = \"{absent}\""), ""),
    );
    let db = dir.path().join("runs.db");
    let out = isobench()
        .args(["run", &f, "-q", "--db"])
        .arg(&db)
        .env("ISOBENCH_OCI_ENGINE", "docker")
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_ne!(code(&out), 0, "{err}");
    for want in [
        "tenant victim",
        absent,
        "never pulls",
        "docker load",
        "docker build",
    ] {
        assert!(err.contains(want), "`{want}` missing from: {err}");
    }
    let runs = common::run_ids(&db);
    assert_eq!(runs.len(), 1, "{runs:?}: {err}");
    assert_eq!(
        containers_of_run(&engine, &runs[0]),
        Vec::<String>::new(),
        "{err}"
    );
}

#[test]
fn an_image_on_a_platform_without_containers_is_refused_when_planned() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "s.toml",
        &scenario("host", &format!("image = \"{USER_IMAGE}\""), ""),
    );
    let out = isobench().args(["run", &f, "--dry-run"]).output().unwrap();
    let err = text(&out.stderr);
    assert_ne!(code(&out), 0, "{err}");
    for want in [
        "tenant[1].image",
        "the host platform runs no container images",
        "platform = \"oci\"",
    ] {
        assert!(err.contains(want), "`{want}` missing from: {err}");
    }
    // A reference that would read as an option of the engine is refused as it is parsed.
    let f = write(
        dir.path(),
        "bad.toml",
        &scenario("oci", "image = \"--privileged\"", ""),
    );
    let out = isobench().args(["run", &f, "--dry-run"]).output().unwrap();
    let err = text(&out.stderr);
    assert_ne!(code(&out), 0, "{err}");
    assert!(
        err.contains("tenant[1].image") && err.contains("does not start with a letter or digit"),
        "{err}"
    );
}
