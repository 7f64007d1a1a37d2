//! Helpers shared by the network probes: where the peer is (our own server on loopback, or
//! a server another tenant started with [`crate::netserve::start_server`]), waiting for an
//! intended send time, and accepting with a timeout.
//!
//! Our own server runs in a process of its own ([`ServerProcess`], `isobench netserve`), as the
//! reference tools run theirs, when the context names the isobench binary
//! ([`ProbeCtx::server_exe`]); otherwise (the library without the binary, as in tests) as
//! threads of the probe's process. Which one ran is recorded in [`ProbeCtx::own_servers`].

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::{bail, Context};

use crate::metric::{Aggregate, Direction, LatencyHistogram, MetricSpec};
use crate::netserve::process::{OwnServer, ServerProcess};
use crate::netserve::{self, ServerHandle, ServerKind, ServerOptions};
use crate::timer::now_ns;
use crate::ProbeCtx;

/// A metric declaration in one line (for the probes' `METRICS` tables).
pub(crate) const fn spec(
    name: &'static str,
    unit: &'static str,
    direction: Direction,
    aggregate: Aggregate,
) -> MetricSpec {
    MetricSpec {
        name,
        unit,
        direction,
        aggregate,
    }
}

/// Builds a `&[MetricSpec]` table. Entries end with `;` and are either
/// `"name" "unit" Direction Aggregate` or `lat "prefix" "unit"`, the latter standing for
/// the five metrics [`crate::metric::latency_metrics`] returns (mean, p50, p99, p999, max).
macro_rules! metric_table {
    (@acc [$($done:expr,)*]) => { &[$($done,)*] };
    (@acc [$($done:expr,)*] lat $p:literal $u:literal; $($rest:tt)*) => {
        $crate::probes::io_net::metric_table!(@acc [$($done,)*
            $crate::probes::io_net::spec(concat!($p, "_mean_", $u), $u,
                $crate::metric::Direction::Lower, $crate::metric::Aggregate::Mean),
            $crate::probes::io_net::spec(concat!($p, "_p50_", $u), $u,
                $crate::metric::Direction::Lower, $crate::metric::Aggregate::Mean),
            $crate::probes::io_net::spec(concat!($p, "_p99_", $u), $u,
                $crate::metric::Direction::Lower, $crate::metric::Aggregate::Mean),
            $crate::probes::io_net::spec(concat!($p, "_p999_", $u), $u,
                $crate::metric::Direction::Lower, $crate::metric::Aggregate::Mean),
            $crate::probes::io_net::spec(concat!($p, "_max_", $u), $u,
                $crate::metric::Direction::Lower, $crate::metric::Aggregate::Max),
        ] $($rest)*)
    };
    (@acc [$($done:expr,)*] $name:literal $unit:literal $dir:ident $agg:ident; $($rest:tt)*) => {
        $crate::probes::io_net::metric_table!(@acc [$($done,)*
            $crate::probes::io_net::spec($name, $unit,
                $crate::metric::Direction::$dir, $crate::metric::Aggregate::$agg),
        ] $($rest)*)
    };
    ($($t:tt)*) => { $crate::probes::io_net::metric_table!(@acc [] $($t)*) };
}
pub(crate) use metric_table;

/// Records one duration (at least 1) into an auto-resizing histogram.
///
/// `LatencyHistogram::record` uses `saturating_record`, which clamps to the histogram's
/// *current* upper bound instead of growing it (a fresh `Histogram::new` tracks only 1..=2
/// at first), so large values would all read back as the old bound. `record` grows it.
#[inline]
pub(crate) fn hist_record(h: &mut LatencyHistogram, v: u64) {
    if h.0.record(v.max(1)).is_err() {
        h.0.saturating_record(v.max(1));
    }
}

/// Resolves `addr` (an IP address or a host name) and `port` to one socket address.
pub(crate) fn resolve(addr: &str, port: u16) -> anyhow::Result<SocketAddr> {
    let addr = addr.trim();
    let addr = addr
        .strip_prefix('[')
        .and_then(|a| a.strip_suffix(']'))
        .unwrap_or(addr);
    if let Ok(ip) = addr.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    (addr, port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve addr `{addr}`: give an IP address"))?
        .next()
        .with_context(|| format!("addr `{addr}` resolves to no address"))
}

/// Parses `ip:port` (for parameters that carry both).
pub(crate) fn parse_socket_addr(name: &str, text: &str) -> anyhow::Result<SocketAddr> {
    text.trim().parse().with_context(|| {
        format!("{name}=`{text}` is not an address: write it as ip:port, e.g. 127.0.0.1:7000")
    })
}

/// The other end of a network probe: a server this probe started (port 0), or an external
/// one (port != 0). Dropping it stops our own server.
pub(crate) struct Peer {
    pub addr: SocketAddr,
    own: Option<OwnHandle>,
}

/// Our own server: a process of its own, or threads of this one.
enum OwnHandle {
    Process(ServerProcess),
    Threads(ServerHandle),
}

impl Peer {
    /// Starts our own `kind` server on `addr` port 0 (pinned to `ctx.pin_peer`) when `port`
    /// is 0, else points at `addr:port`. Our own server is a process of its own when
    /// `ctx.server_exe` is set, else threads of this process; `ctx.own_servers` records which.
    /// Start and finish it on the same thread (a server process is killed when the thread
    /// that started it ends).
    pub fn new(ctx: &ProbeCtx, kind: ServerKind, addr: &str, port: u16) -> anyhow::Result<Peer> {
        let target = resolve(addr, port)?;
        if port != 0 {
            return Ok(Peer {
                addr: target,
                own: None,
            });
        }
        let opts = ServerOptions {
            pin: ctx.pin_peer,
            ..ServerOptions::default()
        };
        let name = kind.name();
        let (own, addr, pid) = match &ctx.server_exe {
            Some(exe) => {
                let p = ServerProcess::spawn(exe, &kind, target, opts).with_context(|| {
                    format!("starting our own {name} server process on {target}")
                })?;
                let (addr, pid) = (p.local_addr(), p.pid());
                (OwnHandle::Process(p), addr, pid)
            }
            None => {
                let h = netserve::start_server_with(kind, target, ctx.stop.clone(), opts)
                    .with_context(|| format!("starting our own {name} server on {target}"))?;
                let addr = h.local_addr();
                (OwnHandle::Threads(h), addr, std::process::id())
            }
        };
        let separate_process = matches!(own, OwnHandle::Process(_));
        ctx.own_servers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(OwnServer {
                kind: name.to_string(),
                addr,
                separate_process,
                pid,
            });
        Ok(Peer {
            addr,
            own: Some(own),
        })
    }

    /// Stops our own server and reports a failure it had (or, for a server process, that it
    /// died or would not stop).
    pub fn finish(mut self) -> anyhow::Result<()> {
        match self.own.take() {
            Some(OwnHandle::Process(p)) => {
                p.stop()?;
            }
            Some(OwnHandle::Threads(h)) => {
                h.stop()?;
            }
            None => {}
        }
        Ok(())
    }
}

/// Connects with a timeout and sets read/write timeouts (and TCP_NODELAY when asked).
pub(crate) fn connect_tcp(
    addr: SocketAddr,
    timeout: Duration,
    nodelay: bool,
) -> anyhow::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, timeout).with_context(|| {
        format!(
            "cannot connect to {addr} (is the matching isobench server running there? start one \
             with the agent's start-service, or use port=0 for a local one)"
        )
    })?;
    s.set_nodelay(nodelay)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    Ok(s)
}

/// Accepts one connection within `timeout` (or until `stop`).
pub(crate) fn accept_timeout(
    l: &TcpListener,
    timeout: Duration,
    stop: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<TcpStream> {
    l.set_nonblocking(true)?;
    let deadline = now_ns() + timeout.as_nanos() as u64;
    loop {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                return Ok(s);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e.into()),
        }
        let now = now_ns();
        if now >= deadline {
            bail!(
                "nothing connected to {} within {} ms",
                l.local_addr()?,
                timeout.as_millis()
            );
        }
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            bail!("stopped");
        }
        let left = Duration::from_nanos(deadline - now).min(netserve::POLL);
        netserve::wait_readable(l, left)?;
    }
}

/// Run time of one part of a probe: the `duration` parameter if given, else the context's
/// budget split over `parts`.
pub(crate) fn part_duration(duration_s: Option<f64>, ctx: &ProbeCtx, parts: usize) -> Duration {
    match duration_s {
        Some(s) => Duration::from_secs_f64(s),
        None => ctx.budget / parts.max(1) as u32,
    }
}

/// Waits until `CLOCK_MONOTONIC` reaches `t_ns`: sleeps until 50 us before, then spins, so
/// an open-loop sender leaves close to its intended time without burning a CPU between
/// sends. Returns at once when `t_ns` has passed.
pub(crate) fn wait_until(t_ns: u64) {
    const SPIN_NS: u64 = 50_000;
    let now = now_ns();
    if t_ns > now + SPIN_NS {
        let wake = t_ns - SPIN_NS;
        let ts = libc::timespec {
            tv_sec: (wake / 1_000_000_000) as libc::time_t,
            tv_nsec: (wake % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: ts is valid; an interrupted sleep just ends early, the spin below finishes.
        unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
    }
    while now_ns() < t_ns {
        std::hint::spin_loop();
    }
}

/// Sets the calling thread's timer slack to 1 ns while alive (the default 50 us slack
/// would make open-loop senders late), restoring the old slack on drop.
pub(crate) struct TightTimerSlack(libc::c_int);

impl TightTimerSlack {
    pub fn new() -> Self {
        // SAFETY: PR_GET/SET_TIMERSLACK take plain integers and affect only this thread.
        let old = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
        TightTimerSlack(old)
    }
}

impl Drop for TightTimerSlack {
    fn drop(&mut self) {
        if self.0 > 0 {
            // SAFETY: as above.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, self.0 as libc::c_ulong, 0, 0, 0) };
        }
    }
}

/// A seed that differs between runs and threads (session ids, not measurement order).
pub(crate) fn fresh_seed(salt: u64) -> u64 {
    let mut r = crate::util::SplitMix64(now_ns() ^ ((std::process::id() as u64) << 32) ^ salt);
    r.next_u64() | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_ips_and_brackets() {
        assert_eq!(
            resolve("127.0.0.1", 80).unwrap(),
            "127.0.0.1:80".parse().unwrap()
        );
        assert_eq!(resolve("[::1]", 80).unwrap(), "[::1]:80".parse().unwrap());
        assert!(resolve("localhost", 80).is_ok());
    }

    #[test]
    fn hist_record_keeps_large_values() {
        let mut h = LatencyHistogram::new();
        hist_record(&mut h, 10);
        hist_record(&mut h, 1_000_000);
        assert!(h.0.max() >= 999_000, "max {}", h.0.max());
        assert!(h.percentile(10.0) <= 10);
    }

    #[test]
    fn wait_until_does_not_return_early() {
        let t = now_ns() + 300_000;
        wait_until(t);
        assert!(now_ns() >= t);
    }
}
