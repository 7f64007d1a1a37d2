//! `isobench vm setup`: prepares what the `vm` platform boots (the guest kernel in the cache,
//! the initramfs with the static isobench) and says which accelerator guests will get.

use std::process::ExitCode;

use isobench_platform::vm;

use crate::args::{VmArgs, VmCommand, VmSetupArgs};

pub fn run(a: &VmArgs) -> anyhow::Result<ExitCode> {
    match &a.command {
        VmCommand::Setup(s) => setup(s),
    }
}

fn setup(a: &VmSetupArgs) -> anyhow::Result<ExitCode> {
    let done = vm::kernel::setup(a.kernel.as_deref())?;
    let k = &done.kernel;
    println!(
        "kernel     {} ({}{})",
        k.image.display(),
        k.source,
        if done.fetched { ", fetched now" } else { "" }
    );
    match &k.modules {
        Some(m) => println!("modules    {}", m.display()),
        None => println!("modules    none (virtio drivers must be built into the kernel)"),
    }
    match isobench_platform::staticexe::find() {
        Ok(exe) => {
            let dir = vm::kernel::vm_cache_dir()?;
            let initrd = vm::initramfs::build(&dir, k, &exe)?;
            println!(
                "initramfs  {} (isobench from {})",
                initrd.display(),
                exe.display()
            );
        }
        Err(e) => {
            println!("initramfs  not built: {e:#}");
            println!("           (it is built at the first run once the static binary exists)");
        }
    }
    match vm::qemu::qemu_version() {
        Ok(v) => {
            println!("qemu       {v}");
            match vm::qemu::accel(&k.image) {
                vm::qemu::Accel::Kvm => println!("accel      kvm"),
                vm::qemu::Accel::Tcg(why) => println!(
                    "accel      tcg: {why}; guests run under software emulation, so their speed \
                     figures are not representative"
                ),
            }
        }
        Err(e) => println!("qemu       {e:#}"),
    }
    Ok(ExitCode::SUCCESS)
}
