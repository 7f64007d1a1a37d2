//! What the `oci` platform leaves behind when a run is killed: containers labelled with the
//! run (found in every engine that answers), and agent images of other builds that no
//! container uses.

use std::time::Duration;

use super::engine::{Engine, EngineKind};
use super::image::{ImageSource, IMAGE_LABEL};
use super::tenant::RUN_LABEL;
use crate::cgroup::{CgroupFs, TenantCgroup};
use crate::cleanup::{CleanupReport, ObjectKind, RunFilter};
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
        sweep_containers(&engine, fs.as_ref(), filter, report);
        sweep_images(&engine, report);
    }
}

/// `(name, run)` of every container with the run label.
fn labelled(engine: &Engine) -> anyhow::Result<Vec<(String, String)>> {
    let fmt = match engine.kind() {
        EngineKind::Docker => format!("{{{{.Names}}}}\t{{{{.Label \"{RUN_LABEL}\"}}}}"),
        EngineKind::Podman => format!("{{{{.Names}}}}\t{{{{index .Labels \"{RUN_LABEL}\"}}}}"),
    };
    let filter = format!("label={RUN_LABEL}");
    let out = engine.query(&["ps", "-a", "--filter", &filter, "--format", &fmt])?;
    Ok(out
        .lines()
        .filter_map(|l| {
            let (name, run) = l.split_once('\t')?;
            let run = if RunId::parse(run.trim()).is_ok() {
                run.trim().to_string()
            } else {
                RunId::from_object_name(name.trim())
                    .map_or_else(|| "?".to_string(), |r| r.to_string())
            };
            Some((name.trim().to_string(), run))
        })
        .collect())
}

fn sweep_containers(
    engine: &Engine,
    fs: Option<&CgroupFs>,
    filter: &mut dyn RunFilter,
    report: &mut CleanupReport,
) {
    let list = match labelled(engine) {
        Ok(l) => l,
        Err(e) => {
            report.fail(ObjectKind::Container, engine.kind().name(), "?", e);
            return;
        }
    };
    for (name, run) in list {
        if !filter.selected(&run) {
            continue;
        }
        // A container left frozen (the on/off design) or throttled would not die: kill its
        // processes through its cgroups first.
        if let (Some(fs), Ok(pid)) = (
            fs,
            engine.query(&["inspect", "--format", "{{.State.Pid}}", &name]),
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
        match engine.remove_container(&name) {
            Ok(_) => report.ok(ObjectKind::Container, shown, &run),
            Err(e) => report.fail(ObjectKind::Container, shown, &run, e),
        }
    }
}

/// Removes agent images other than the current build's that no container uses (the engine
/// refuses to remove an image in use, and that is left alone).
fn sweep_images(engine: &Engine, report: &mut CleanupReport) {
    // Without the current build's tag, nothing is known to be stale.
    let Ok(current) = ImageSource::find().and_then(|s| s.tag()) else {
        return;
    };
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
    let used: Vec<String> = engine
        .query(&["ps", "-a", "--format", "{{.Image}}"])
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().trim_start_matches("localhost/").to_string())
        .collect();
    for tag in out.lines().map(str::trim).filter(|t| !t.is_empty()) {
        let bare = tag.trim_start_matches("localhost/");
        if bare == current || bare.ends_with(":<none>") || used.iter().any(|u| u == bare) {
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
