//! What `net-tx` and `net-rx` share: the datagram size an intensity asks for, and a paced
//! UDP sender worker.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;

use super::pool::Done;
use crate::params::{ParamKind, ParamSpec};
use crate::timer::now_ns;
use crate::StressCtx;

/// Largest UDP payload over IPv4.
pub(super) const MAX_DATAGRAM: u32 = 65_507;

/// Datagram size at intensity 100 (60 KiB, as Matthews et al.).
pub(super) const FULL_DATAGRAM: u64 = 61_440;

/// The `size` parameter.
pub(super) const SIZE_PARAM: ParamSpec = ParamSpec {
    name: "size",
    help: "datagram payload in bytes, overriding the intensity mapping",
    kind: ParamKind::Int {
        min: 0,
        max: MAX_DATAGRAM as i64,
    },
    default: "",
};

/// The `rate` parameter.
pub(super) const RATE_PARAM: ParamSpec = ParamSpec {
    name: "rate",
    help: "datagrams per second over all sender threads, paced evenly (0 = as fast as \
           possible)",
    kind: ParamKind::Int {
        min: 0,
        max: 100_000_000,
    },
    default: "0",
};

/// Text of the intensity knob shared by both stressors.
pub(super) const SIZE_KNOB: &str = "datagram size: ceil(61440 x intensity / 100) bytes (1 = 615 \
     B, 50 = 30 KiB, 100 = 60 KiB); the size parameter overrides it; 0 = idle";

/// Payload bytes for this run: the `size` parameter, else scaled from the intensity.
pub(super) fn datagram_size(ctx: &StressCtx, size: Option<u32>) -> usize {
    match size {
        Some(s) => s.min(MAX_DATAGRAM) as usize,
        None => (FULL_DATAGRAM * u64::from(ctx.intensity)).div_ceil(100) as usize,
    }
}

/// The loopback address of `addr`'s family when `addr` is unspecified (0.0.0.0, ::), else
/// `addr` itself: where a local sender reaches a socket bound to `addr`.
pub(super) fn reachable(addr: SocketAddr) -> SocketAddr {
    if addr.ip().is_unspecified() {
        let ip = match addr.ip() {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        };
        SocketAddr::new(ip, addr.port())
    } else {
        addr
    }
}

/// Errors a sender counts and survives: a receiver not there yet (ICMP port unreachable),
/// a full device queue, a send timeout, a signal.
fn transient(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | WouldBlock | TimedOut | Interrupted
    ) || e.raw_os_error() == Some(libc::ENOBUFS)
}

/// Most datagrams one `sendmmsg` call hands to the kernel.
pub(super) const MAX_BATCH: usize = 64;

/// One sender thread: a UDP socket connected to the target, one payload, optional pacing.
pub(super) struct Sender<'a> {
    sock: UdpSocket,
    buf: Vec<u8>,
    /// Datagrams per `sendmmsg` call when unpaced (1 = plain `send`).
    batch: usize,
    /// Nanoseconds between two datagrams of this thread (0 = unpaced).
    interval_ns: u64,
    next_ns: u64,
    sent: &'a AtomicU64,
    errors: &'a AtomicU64,
}

impl<'a> Sender<'a> {
    /// A sender of `size`-byte datagrams to `target` at `rate` datagrams/s (0 = unpaced).
    pub fn new(
        target: SocketAddr,
        size: usize,
        rate: f64,
        sent: &'a AtomicU64,
        errors: &'a AtomicU64,
    ) -> anyhow::Result<Self> {
        let any: SocketAddr = match target {
            SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let sock = UdpSocket::bind(any).context("binding a UDP sender socket")?;
        sock.connect(target)
            .with_context(|| format!("connecting a UDP socket to {target}"))?;
        sock.set_write_timeout(Some(Duration::from_millis(100)))?;
        let buf: Vec<u8> = (0..size).map(|i| (i as u8) ^ 0xa5).collect();
        let interval_ns = if rate > 0.0 {
            (1e9 / rate).max(1.0) as u64
        } else {
            0
        };
        Ok(Sender {
            sock,
            buf,
            batch: 1,
            interval_ns,
            next_ns: now_ns(),
            sent,
            errors,
        })
    }

    /// Sends `n` datagrams per system call (`sendmmsg`) when unpaced; paced senders keep
    /// sending one at a time.
    pub fn with_batch(mut self, n: usize) -> Self {
        self.batch = n.clamp(1, MAX_BATCH);
        self
    }

    /// Sends one datagram, or a batch (or waits for its slot when paced). Returns what was
    /// sent.
    pub fn step(&mut self) -> anyhow::Result<Done> {
        if self.interval_ns == 0 && self.batch > 1 {
            return self.send_batch();
        }
        if self.interval_ns > 0 {
            let now = now_ns();
            if now < self.next_ns {
                let wait = (self.next_ns - now).min(10_000_000);
                std::thread::sleep(Duration::from_nanos(wait));
                return Ok(Done::NOTHING);
            }
            // Never burst to catch up more than 100 ms of schedule.
            self.next_ns = (self.next_ns + self.interval_ns).max(now.saturating_sub(100_000_000));
        }
        match self.sock.send(&self.buf) {
            Ok(n) => {
                self.sent.fetch_add(1, Ordering::Relaxed);
                Ok(Done::new(1, n as u64))
            }
            Err(e) if transient(&e) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                Ok(Done::NOTHING)
            }
            Err(e) => Err(e).context("sending a UDP datagram"),
        }
    }

    /// One `sendmmsg` of `batch` copies of the payload.
    fn send_batch(&mut self) -> anyhow::Result<Done> {
        use std::os::fd::AsRawFd;
        let mut iov = libc::iovec {
            iov_base: self.buf.as_ptr() as *mut libc::c_void,
            iov_len: self.buf.len(),
        };
        // SAFETY: all-zero mmsghdr values are valid (null name, no control data).
        let mut msgs: [libc::mmsghdr; MAX_BATCH] = unsafe { std::mem::zeroed() };
        for m in &mut msgs[..self.batch] {
            m.msg_hdr.msg_iov = &mut iov;
            m.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: `batch` initialised headers, each pointing at `iov`, which points at `buf`;
        // all outlive the call. The socket is connected, so no address is needed.
        let r = unsafe {
            libc::sendmmsg(
                self.sock.as_raw_fd(),
                msgs.as_mut_ptr(),
                self.batch as libc::c_uint,
                0,
            )
        };
        if r >= 0 {
            let n = r as u64;
            self.sent.fetch_add(n, Ordering::Relaxed);
            return Ok(Done::new(n, n * self.buf.len() as u64));
        }
        let e = std::io::Error::last_os_error();
        if transient(&e) {
            self.errors.fetch_add(1, Ordering::Relaxed);
            Ok(Done::NOTHING)
        } else {
            Err(e).context("sending UDP datagrams (sendmmsg)")
        }
    }
}

/// Asks for a large socket buffer (best effort: the kernel caps it at rmem_max/wmem_max).
pub(super) fn set_buffer(sock: &UdpSocket, opt: libc::c_int, bytes: libc::c_int) {
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt with a valid int option value.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&bytes as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}
