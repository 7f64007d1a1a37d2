//! Tenants that run from the user's own image (`image = "name:tag"`): on Docker, on Podman
//! and on the Kubernetes node, a victim's `command` probe and an aggressor's `command`
//! stressor read a file only the image holds (so they ran inside it), the `service` probe's
//! `server_cmd` starts the image's own web server (BusyBox's httpd) in the victim and drives
//! it under a `protection` run, answered with a file only the image holds, an image that is
//! not there is refused before any container or pod is made, and a platform that runs no
//! images refuses the field when the plan is made.
//!
//! The image is made here without any network: a tar of a tiny root filesystem (a static
//! busybox, a marker file and a page to serve; no shell links but `sh`, `cat` and `httpd`,
//! no `/tmp`, no `/proc`, no C library) given to `docker import` or `podman import`.
//!
//! Needs root, the engine (a Docker daemon at `DOCKER_HOST` or the default socket; Podman
//! with runc), the static isobench binary and busybox-static; `scripts/test` sets them up.
//! Without them the Docker and Podman tests print why and pass, except under `CI=true`,
//! where they fail. The k8s tests also need the cluster of `scripts/k8s-up` (skipped with
//! the reason when there is none) and `ctr`; the image goes to the node's containerd as a
//! user would put it there (`docker save`, then `ctr images import`).

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{code, isobench, json_of, text, write};
use isobench_platform::k8s;
use isobench_platform::oci::{self, Engine, EngineKind};
use isobench_store::{RunId, Store};

/// The tag of the image the tests build.
const USER_IMAGE: &str = "isobench-test-user:1";
/// The number the marker file holds, read by the probe.
const MARKER_NUMBER: u32 = 4217;
/// The marker file, in the image only.
const MARKER: &str = "/etc/isobench-test-marker";
/// The directory the image's web server serves, in the image only.
const WEB_ROOT: &str = "/isobench-test-www";
/// The page it serves, under [`WEB_ROOT`].
const PAGE: &str = "isobench-marker.html";

/// The service runs one at a time: each calibrates its rate on the machine as it is.
static SERVICE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Engine `kind`, when the tests can use it; else prints why (and fails under CI).
fn engine_or_skip(test: &str, kind: EngineKind) -> Option<Engine> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        common::skip_test("root", test, "needs root");
        return None;
    }
    let engine = match kind {
        EngineKind::Docker => Engine::docker(),
        EngineKind::Podman => Engine::podman(),
    }
    .map_err(|e| e.to_string());
    let why = match &engine {
        Err(e) => Some(e.clone()),
        Ok(_) => oci::ImageSource::find().err().map(|e| format!("{e:#}")),
    };
    match why {
        None => engine.ok(),
        Some(why) if in_ci() => panic!("{test}: {kind} is required under CI=true: {why}"),
        Some(why) => {
            common::skip_test(kind.name(), test, &why);
            None
        }
    }
}

/// The engine's CLI with the arguments isobench gives it (Docker: its daemon; Podman: runc
/// and cgroupfs, as on this kind of host it needs).
fn engine_cmd(engine: &Engine) -> Command {
    let mut c = Command::new(engine.cli());
    match engine.host() {
        Some(h) => {
            c.args(["-H", h]);
        }
        None => {
            c.args([
                "--runtime",
                "runc",
                "--cgroup-manager",
                "cgroupfs",
                "--events-backend",
                "file",
            ]);
        }
    }
    c
}

/// Builds [`USER_IMAGE`] in `engine`'s store (again: an import of the same files is cheap):
/// a static busybox at `/bin/busybox` with `sh`, `cat` and `httpd` links, the marker file,
/// and the page under [`WEB_ROOT`].
fn build_user_image(engine: &Engine) {
    let busybox = oci::image::find_busybox().expect("a static busybox");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("rootfs");
    let web = root.join(WEB_ROOT.trim_start_matches('/'));
    for d in [root.join("bin"), root.join("etc"), web.clone()] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::copy(&busybox, root.join("bin/busybox")).unwrap();
    for applet in ["sh", "cat", "httpd"] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).unwrap();
    }
    std::fs::write(
        root.join(MARKER.trim_start_matches('/')),
        format!("isobench user image marker {MARKER_NUMBER}\n"),
    )
    .unwrap();
    std::fs::write(
        web.join(PAGE),
        format!("<p>isobench user image marker {MARKER_NUMBER}</p>\n"),
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
    let out = engine_cmd(engine)
        .arg("import")
        .arg(&tar)
        .arg(USER_IMAGE)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} import: {}",
        engine.kind(),
        text(&out.stderr)
    );
}

/// Imports [`USER_IMAGE`] from Docker into the node's containerd.
fn import_into_the_node(engine: &Engine, dir: &Path) {
    let tar = dir.join("user.tar");
    let out = engine_cmd(engine)
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
    let out = engine_cmd(engine)
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
    assert!(
        out.status.success(),
        "{} ps: {}",
        engine.kind(),
        text(&out.stderr)
    );
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

/// A victim's probe and an aggressor's stressor run from [`USER_IMAGE`] in `engine`'s
/// store, and nothing is left of the run.
fn a_probe_and_a_stressor_run_inside_the_users_image(test: &str, kind: EngineKind) {
    let Some(engine) = engine_or_skip(test, kind) else {
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
        .env(oci::ENV_ENGINE, kind.name())
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
        .env(oci::ENV_ENGINE, kind.name())
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

#[test]
fn a_probe_and_a_stressor_run_inside_the_users_image_on_docker() {
    a_probe_and_a_stressor_run_inside_the_users_image(
        "a_probe_and_a_stressor_run_inside_the_users_image_on_docker",
        EngineKind::Docker,
    );
}

#[test]
fn a_probe_and_a_stressor_run_inside_the_users_image_on_podman() {
    a_probe_and_a_stressor_run_inside_the_users_image(
        "a_probe_and_a_stressor_run_inside_the_users_image_on_podman",
        EngineKind::Podman,
    );
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

/// The port the image's web server listens on in the victim.
const SERVICE_PORT: u16 = 18431;

/// A `protection` run on `platform`: the victim `web` runs from [`USER_IMAGE`], and its
/// service is the image's own BusyBox httpd (`server_cmd`, resolved on the image's `PATH`),
/// serving [`WEB_ROOT`]; the load generator asks for [`PAGE`], and only an answer with status
/// 200 counts, so every answered request is the image's page. The rate is calibrated first;
/// one short episode beside a CPU hog in the agent's own image.
fn service_scenario(platform: &str) -> String {
    format!(
        r#"
name = "user-image-service"
kind = "protection"
seed = 5
platform = "{platform}"
placement = "shared"

[trial]
warmup = "500ms"
solo = "2s"
timeout = "30s"
max_retries = 0

[repetitions]
min = 1
max = 1

[protection]
settle = "1s"
stable = "3s"
aggressor = "3s"
recover = "2s"
episodes = 1

[[tenant]]
name = "web"
role = "victim"
limits = {{ memory = "256M", pids = 256 }}
image = "{USER_IMAGE}"

[[tenant]]
name = "batch"
role = "aggressor"
limits = {{ memory = "256M", pids = 64 }}

[[probe]]
name = "service"
params = {{ port = {SERVICE_PORT}, protocol = "http", request = "/{PAGE}", rate = 0, calibrate_s = 4, share = 0.5, slo_ms = 50, connections = 4, server_cmd = "httpd -f -p 127.0.0.1:{SERVICE_PORT} -h {WEB_ROOT}" }}

[[stressor]]
name = "cpu"
intensity = 100
"#
    )
}

/// Runs [`service_scenario`] on `platform` (`engine`: the oci platform's engine, if any)
/// into `dir` and checks what the image's server did. The run's id.
fn run_the_images_server(dir: &Path, platform: &str, engine: Option<EngineKind>) -> String {
    assert!(
        !Path::new(WEB_ROOT).exists(),
        "{WEB_ROOT} exists on this host, so serving it proves nothing"
    );
    let f = write(dir, "service.toml", &service_scenario(platform));
    let db = dir.join("service.db");
    let mut cmd = isobench();
    cmd.args(["run", &f, "--wait", "-q", "--db"])
        .arg(&db)
        .timeout(Duration::from_secs(600));
    if let Some(k) = engine {
        cmd.env(oci::ENV_ENGINE, k.name());
    }
    let out = cmd.output().unwrap();
    let shown = text(&out.stdout);
    // 4: ran, but some results are untrustworthy (one episode on a shared machine).
    assert!(
        [0, 4].contains(&code(&out)),
        "exit {}\nstdout: {shown}\nstderr: {}",
        code(&out),
        text(&out.stderr)
    );
    assert!(shown.contains("Protection of the service"), "{shown}");
    assert!(!shown.contains("left out"), "{shown}");

    let store = Store::open(&db).unwrap();
    let runs = store.list_runs().unwrap();
    assert_eq!(runs.len(), 1);
    let run = runs[0].id.as_str().to_string();
    let loaded = store.load_run(&RunId::new(&run)).unwrap();

    // The calibration found a rate at which the image's server met its SLO.
    let cal = loaded
        .facts
        .iter()
        .find(|f| f.key == "service_calibration")
        .unwrap_or_else(|| panic!("no calibration recorded\n{shown}"));
    let max = cal.value[0]["max_rps"].as_f64().unwrap_or(0.0);
    let target = cal.value[0]["target_rps"].as_f64().unwrap_or(0.0);
    assert!(max > 0.0 && target > 0.0, "{:#}\n{shown}", cal.value);

    // The episode: the service answered at its rate with a tail. Only a 200 counts as an
    // answer, and the page is in the image only: every answer was the image's page.
    let episodes: Vec<_> = loaded
        .trials
        .iter()
        .filter(|t| t.probe == "service" && t.tenant == "web" && t.timeline.is_some())
        .collect();
    assert_eq!(episodes.len(), 1, "{shown}");
    let value = |name: &str| {
        episodes[0]
            .samples
            .iter()
            .find(|s| s.metric == name)
            .map(|s| s.value)
            .unwrap_or_else(|| panic!("no {name} in the episode\n{shown}"))
    };
    let (rate, p99, errors) = (value("rate_rps"), value("lat_p99_ms"), value("errors"));
    assert!(rate > 0.0, "rate {rate}/s\n{shown}");
    assert!(p99 > 0.0 && p99.is_finite(), "p99 {p99} ms\n{shown}");
    // Beside the hog a request may time out, but fewer fail over the whole episode than
    // are answered in one second of it (a page the server lacked would fail every one).
    assert!(
        errors < rate,
        "{errors} errors beside {rate}/s answered\n{shown}"
    );

    // The export shows the service's isol% beside the hog.
    let export = isobench()
        .args(["export", "latest", "--format", "json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let doc = json_of(&export);
    let section = doc["results"]["sections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "protection")
        .unwrap_or_else(|| panic!("no protection section\n{shown}"));
    let isol_col = section["columns"]
        .as_array()
        .unwrap()
        .iter()
        .position(|c| c["name"] == "isol mean")
        .unwrap();
    let row = section["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r[0]["text"] == "cpu@100")
        .unwrap_or_else(|| panic!("no cpu@100 row\n{shown}"));
    let isol = row[isol_col]["value"].as_f64().unwrap_or(0.0);
    assert!(isol > 0.0, "isol {isol}%\n{shown}");

    // The victim is recorded as running from the image, with its id.
    let web = loaded
        .facts
        .iter()
        .find(|f| f.key == "tenant" && f.scope == "web")
        .unwrap_or_else(|| panic!("no facts of tenant web"));
    assert_eq!(web.value["details"]["image"]["reference"], USER_IMAGE);
    let id = web.value["details"]["image"]["id"].as_str().unwrap_or("");
    assert!(id.starts_with("sha256:"), "{:#}", web.value);
    run
}

/// The image's own server as the service on engine `kind`; nothing is left of the run.
fn the_images_server_is_a_service(test: &str, kind: EngineKind) {
    let _serial = SERVICE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(engine) = engine_or_skip(test, kind) else {
        return;
    };
    build_user_image(&engine);
    let dir = tempfile::tempdir().unwrap();
    let run = run_the_images_server(dir.path(), "oci", Some(kind));
    assert_eq!(containers_of_run(&engine, &run), Vec::<String>::new());
}

#[test]
fn the_images_own_server_is_a_service_on_docker() {
    the_images_server_is_a_service(
        "the_images_own_server_is_a_service_on_docker",
        EngineKind::Docker,
    );
}

#[test]
fn the_images_own_server_is_a_service_on_podman() {
    the_images_server_is_a_service(
        "the_images_own_server_is_a_service_on_podman",
        EngineKind::Podman,
    );
}

/// The test image built with Docker and imported into the one-node cluster's containerd,
/// and a directory for the test; `None` when the test skipped (no Docker, no cluster).
fn image_in_the_node_or_skip(test: &str) -> Option<tempfile::TempDir> {
    let engine = engine_or_skip(test, EngineKind::Docker)?;
    if let Some(why) = std::env::var_os("ISOBENCH_K8S_SKIP") {
        common::skip_test("k8s", test, &why.to_string_lossy());
        return None;
    }
    if let Err(e) = k8s::available() {
        common::skip_test("k8s", test, &e.to_string());
        return None;
    }
    build_user_image(&engine);
    let dir = tempfile::tempdir().unwrap();
    import_into_the_node(&engine, dir.path());
    Some(dir)
}

#[test]
fn a_probe_and_a_stressor_run_inside_the_users_image_on_k8s() {
    let test = "a_probe_and_a_stressor_run_inside_the_users_image_on_k8s";
    let Some(dir) = image_in_the_node_or_skip(test) else {
        return;
    };
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
fn the_images_own_server_is_a_service_on_k8s() {
    let test = "the_images_own_server_is_a_service_on_k8s";
    let _serial = SERVICE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(dir) = image_in_the_node_or_skip(test) else {
        return;
    };
    run_the_images_server(dir.path(), "k8s", None);
}

/// An image `engine` lacks is refused before any container is made, naming the fix.
fn an_absent_image_is_refused_before_any_container_is_made(test: &str, kind: EngineKind) {
    let Some(engine) = engine_or_skip(test, kind) else {
        return;
    };
    let absent = "isobench-test-absent:404";
    // Gone, should an earlier run have made it (an error when there is none).
    let _ = engine_cmd(&engine).args(["image", "rm", absent]).output();
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
        .env(oci::ENV_ENGINE, kind.name())
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_ne!(code(&out), 0, "{err}");
    let (load, build) = (format!("{kind} load"), format!("{kind} build"));
    for want in ["tenant victim", absent, "never pulls", &load, &build] {
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
fn an_absent_image_is_refused_before_any_container_is_made_on_docker() {
    an_absent_image_is_refused_before_any_container_is_made(
        "an_absent_image_is_refused_before_any_container_is_made_on_docker",
        EngineKind::Docker,
    );
}

#[test]
fn an_absent_image_is_refused_before_any_container_is_made_on_podman() {
    an_absent_image_is_refused_before_any_container_is_made(
        "an_absent_image_is_refused_before_any_container_is_made_on_podman",
        EngineKind::Podman,
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
