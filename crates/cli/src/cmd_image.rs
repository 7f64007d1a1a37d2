//! `isobench image build`: the container image the `oci` platform's agents run in, built
//! offline from the static isobench binary and a static busybox. The platform builds it by
//! itself when it is missing; this command builds it ahead of a run (or again, `--force`).

use std::process::ExitCode;

use isobench_platform::oci::{image, Engine, ImageSource};

use crate::args::{EngineArg, ImageBuildArgs, ImageCommand};
use crate::exit;

pub fn run(c: &ImageCommand) -> anyhow::Result<ExitCode> {
    match c {
        ImageCommand::Build(a) => build(a),
    }
}

fn build(a: &ImageBuildArgs) -> anyhow::Result<ExitCode> {
    let choice = a.engine.map(|e| match e {
        EngineArg::Docker => "docker",
        EngineArg::Podman => "podman",
    });
    let engine = Engine::detect(choice)
        .map_err(|e| exit::unsupported(format!("no container engine: {e}")))?;
    let source = ImageSource::find()
        .map_err(|e| exit::unsupported(format!("the agent image cannot be built: {e:#}")))?;
    let tag = source.tag()?;
    if !a.force && image::exists(&engine, &tag) {
        eprintln!("{} already has {tag}", engine.kind());
    } else {
        image::build(&engine, &source, &tag)?;
        eprintln!(
            "built {tag} for {} from {} and {}",
            engine.kind(),
            source.exe.display(),
            source.busybox.display()
        );
    }
    println!("{tag}");
    Ok(ExitCode::SUCCESS)
}
