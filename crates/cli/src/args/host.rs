//! The commands that check and prepare this host: `doctor`, `cleanup`, `check`, `image` and
//! `vm`.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use super::DbArgs;

/// `isobench doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `isobench cleanup`.
#[derive(Debug, Args)]
pub struct CleanupArgs {
    /// Also remove objects of runs that are still alive.
    #[arg(long)]
    pub all: bool,
    /// The results database whose runs left `running` by a dead process are marked
    /// interrupted (nothing is created when the file does not exist).
    #[command(flatten)]
    pub db: DbArgs,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `isobench check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// What to check.
    #[arg(value_enum)]
    pub what: CheckWhat,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// The checks of `isobench check`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum CheckWhat {
    /// memory.low (test_memcg_low).
    MemoryLow,
    /// memory.min (test_memcg_min).
    MemoryMin,
}

/// `isobench image ...`
#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// Build the agent image unless the engine has it, and print its tag
    /// (`isobench-agent:<version>-<hash of the binaries>`).
    Build(ImageBuildArgs),
}

/// The container engine to build for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// Docker: a daemon at DOCKER_HOST (or the default socket)
    Docker,
    /// Podman (run with runc)
    Podman,
}

/// `isobench image build`.
#[derive(Debug, Args)]
pub struct ImageBuildArgs {
    /// Container engine (also `ISOBENCH_OCI_ENGINE`, which `run`, `probe` and `stress` read);
    /// by default docker when a daemon answers, else podman.
    #[arg(long, value_enum, env = "ISOBENCH_OCI_ENGINE")]
    pub engine: Option<EngineArg>,
    /// Build and import again even if the engine has the image.
    #[arg(long)]
    pub force: bool,
}

/// `isobench vm`.
#[derive(Debug, Args)]
pub struct VmArgs {
    #[command(subcommand)]
    pub command: VmCommand,
}

/// `isobench vm` subcommands.
#[derive(Debug, Subcommand)]
pub enum VmCommand {
    /// Fetch the guest kernel (Debian's linux-image-cloud-amd64, with `apt-get download`)
    /// into the cache, or record the one given with --kernel; build the initramfs (static
    /// isobench, busybox-static, an init that runs the agent); check KVM by booting a guest.
    /// Idempotent: what is already there is kept.
    Setup(VmSetupArgs),
}

/// `isobench vm setup`.
#[derive(Debug, Args)]
pub struct VmSetupArgs {
    /// Boot this kernel (a bzImage/vmlinuz with virtio built in, or with its modules in
    /// ../lib/modules/RELEASE) instead of Debian's cloud kernel.
    #[arg(long, value_name = "PATH")]
    pub kernel: Option<PathBuf>,
}
