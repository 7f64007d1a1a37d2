//! What the `oci` platform leaves behind when a run is killed: containers labelled with the
//! run (found in every engine that answers), and agent images of other builds that no
//! container uses.

use std::time::Duration;

use super::engine::{Engine, EngineKind};
use super::image::{ImageSource, IMAGE_LABEL};
use super::tenant::RUN_LABEL;
use crate::cgroup::{CgroupFs, TenantCgroup};
use crate::leftovers::{CleanupReport, ObjectKind, RunFilter};
use crate::run::RunId;

/// The engines present here (Docker only when a daemon answers).
fn engines() -> Vec<Engine> {
    [Engine::docker(), Engine::podman()]
        .into_iter()
        .filter_map(Result::ok)
        .collect()
}

/// Removes the containers of the runs `filter` selects, then stale agent images.
pub(crate) fn sweep(filter: &mut dyn RunFilter, report: &mut CleanupReport) {
    let fs = CgroupFs::detect().ok();
    for engine in engines() {
        let containers = match containers(&engine) {
            Ok(c) => c,
            Err(e) => {
                report.fail(ObjectKind::Container, engine.kind().name(), "?", e);
                continue;
            }
        };
        sweep_containers(&engine, &containers, fs.as_ref(), filter, report);
        sweep_images(&engine, &containers, report);
    }
}

/// One container: its name, its run (`None`: not isobench's) and its image.
struct Container {
    name: String,
    run: Option<String>,
    image: String,
}

/// Every container of the engine, in one query.
fn containers(engine: &Engine) -> anyhow::Result<Vec<Container>> {
    let label = match engine.kind() {
        EngineKind::Docker => format!("{{{{.Label \"{RUN_LABEL}\"}}}}"),
        EngineKind::Podman => format!("{{{{index .Labels \"{RUN_LABEL}\"}}}}"),
    };
    let fmt = format!("{{{{.Names}}}}\t{label}\t{{{{.Image}}}}");
    let out = engine.query(&["ps", "-a", "--format", &fmt])?;
    Ok(out
        .lines()
        .filter_map(|l| {
            let mut f = l.split('\t').map(str::trim);
            let (name, run, image) = (f.next()?, f.next().unwrap_or(""), f.next().unwrap_or(""));
            let run = if RunId::parse(run).is_ok() {
                Some(run.to_string())
            } else if !run.is_empty() && run != "<no value>" {
                Some(
                    RunId::from_object_name(name)
                        .map_or_else(|| "?".to_string(), |r| r.to_string()),
                )
            } else {
                None
            };
            Some(Container {
                name: name.to_string(),
                run,
                image: image.trim_start_matches("localhost/").to_string(),
            })
        })
        .collect())
}

fn sweep_containers(
    engine: &Engine,
    containers: &[Container],
    fs: Option<&CgroupFs>,
    filter: &mut dyn RunFilter,
    report: &mut CleanupReport,
) {
    for c in containers {
        let (name, Some(run)) = (&c.name, &c.run) else {
            continue;
        };
        if !filter.selected(run) {
            continue;
        }
        // A container left frozen (the on/off design) or throttled would not die: kill its
        // processes through its cgroups first.
        if let (Some(fs), Ok(pid)) = (
            fs,
            engine.query(&["inspect", "--format", "{{.State.Pid}}", name]),
        ) {
            if let Ok(pid) = pid.trim().parse::<i32>() {
                if pid > 0 {
                    if let Ok(cg) = TenantCgroup::of_process(fs, pid) {
                        let _ = cg.kill_all(Duration::from_secs(5));
                    }
                }
            }
        }
        let shown = format!("{name} ({})", engine.kind());
        match engine.remove_container(name) {
            Ok(_) => report.ok(ObjectKind::Container, shown, run),
            Err(e) => report.fail(ObjectKind::Container, shown, run, e),
        }
    }
}

/// Removes agent images other than the current build's that no container uses (the engine
/// refuses to remove an image in use, and that is left alone).
fn sweep_images(engine: &Engine, containers: &[Container], report: &mut CleanupReport) {
    let filter = format!("label={IMAGE_LABEL}=agent");
    let Ok(out) = engine.query(&[
        "images",
        "--filter",
        &filter,
        "--format",
        "{{.Repository}}:{{.Tag}}",
    ]) else {
        return;
    };
    if out.trim().is_empty() {
        return;
    }
    // Without the current build's tag, nothing is known to be stale.
    let Ok(current) = ImageSource::find().and_then(|s| s.tag()) else {
        return;
    };
    let used: Vec<&str> = containers.iter().map(|c| c.image.as_str()).collect();
    for tag in out.lines().map(str::trim).filter(|t| !t.is_empty()) {
        let bare = tag.trim_start_matches("localhost/");
        if bare == current || bare.ends_with(":<none>") || used.contains(&bare) {
            continue;
        }
        let shown = format!("{tag} ({})", engine.kind());
        match engine.change(&["rmi", tag]) {
            Ok(_) => report.ok(ObjectKind::Image, shown, "-"),
            Err(e) if format!("{e:#}").contains("in use") => {}
            Err(e) => report.fail(ObjectKind::Image, shown, "-", e),
        }
    }
}
