//! The `vm` platform: each tenant is a QEMU guest (KVM when it really works here, else TCG)
//! booted from a kernel and an initramfs isobench builds, whose init runs the agent on a
//! virtio-serial port. The QEMU process itself runs in a cgroup tenant, so the host-side
//! limits (CPU quota, cpuset, memory, io) hold for the whole guest.

pub(crate) mod cpio;
pub(crate) mod guest;
pub mod initramfs;
pub mod kernel;
pub mod qemu;
