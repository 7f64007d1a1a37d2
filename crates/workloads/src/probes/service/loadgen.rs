//! The open-loop load generator of the `service` probe, and the request protocols it
//! speaks.
//!
//! Requests fall due on a fixed schedule: request `k` of connection `c` (of `n`) at
//! `start + (k * n + c) / rate` ([`due_ns`]). Each connection is one thread with one request
//! in flight (HTTP/1.1 without pipelining, a line protocol in turn), so a slow answer
//! delays the requests after it on that connection; every request's latency runs from its
//! *due* time to the end of its answer, never from when it was actually sent, so a stall
//! shows in every request it held up (no coordinated omission: Tene, "How NOT to measure
//! latency", 2015). The loop waits on a [`Clock`], so its accounting is tested on a fake one.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{bail, Context};

use crate::netserve::{header_end, header_value};

/// Time as the generator sees it, ns on one monotonic line.
pub trait Clock: Sync {
    /// Now.
    fn now_ns(&self) -> u64;
    /// Sleeps until `t` (returns at once when it has passed).
    fn sleep_until(&self, t: u64);
}

/// `CLOCK_MONOTONIC`.
pub struct Monotonic;

impl Clock for Monotonic {
    fn now_ns(&self) -> u64 {
        crate::timer::now_ns()
    }

    fn sleep_until(&self, t: u64) {
        if t <= self.now_ns() {
            return;
        }
        let ts = libc::timespec {
            tv_sec: (t / 1_000_000_000) as libc::time_t,
            tv_nsec: (t % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: a valid timespec; an interrupted sleep only ends early.
        unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
    }
}

/// Due time of request `k` of connection `c` of `n` at `rate` per second from `start`.
pub fn due_ns(start: u64, k: u64, c: u64, n: u64, rate: f64) -> u64 {
    start + (((k * n + c) as f64) * 1e9 / rate) as u64
}

/// One answered (or failed) request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Done {
    /// When its answer ended, ns.
    pub done_ns: u64,
    /// From its due time to then, ns.
    pub latency_ns: u64,
    /// Whether it was answered.
    pub ok: bool,
}

/// One request/answer exchange on one connection.
pub trait Exchange {
    /// Sends one request and reads its whole answer.
    fn exchange(&mut self) -> anyhow::Result<()>;
}

/// The part of the schedule one connection serves: its requests due in `[start, end)`,
/// connection `conn` of `conns` at `rate` per second in all.
#[derive(Debug, Clone, Copy)]
pub struct Slice {
    /// First due time, ns.
    pub start: u64,
    /// No request falls due at or after this, ns.
    pub end: u64,
    /// This connection.
    pub conn: u64,
    /// Connections in all.
    pub conns: u64,
    /// Requests per second over all connections.
    pub rate: f64,
}

/// Drives one connection through its slice of the schedule, each request exchanged in turn.
/// A failed exchange is recorded as not ok and the connection goes on (`reconnect` gives a
/// fresh one; `None` ends the connection's part).
pub fn drive(
    clock: &dyn Clock,
    sl: Slice,
    conn: &mut dyn Exchange,
    reconnect: &mut dyn FnMut() -> Option<Box<dyn Exchange>>,
    stop: &dyn Fn() -> bool,
) -> Vec<Done> {
    let mut out = Vec::new();
    let mut fresh: Option<Box<dyn Exchange>> = None;
    for k in 0.. {
        let due = due_ns(sl.start, k, sl.conn, sl.conns, sl.rate);
        if due >= sl.end || stop() {
            break;
        }
        clock.sleep_until(due);
        let r = match fresh.as_mut() {
            Some(f) => f.exchange(),
            None => conn.exchange(),
        };
        let now = clock.now_ns();
        out.push(Done {
            done_ns: now,
            latency_ns: now.saturating_sub(due),
            ok: r.is_ok(),
        });
        if r.is_err() {
            match reconnect() {
                Some(f) => fresh = Some(f),
                None => break,
            }
        }
    }
    out
}

/// How requests are written and answers read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1 keep-alive `GET path`; the answer's body by its Content-Length (or to the
    /// end, when the server closes the connection after it).
    Http {
        /// The path requested.
        path: String,
    },
    /// A line protocol: `request` and CRLF; the answer is one line, or a Redis bulk string
    /// (`$N` then N bytes and CRLF), or a Redis array of them (`*N`).
    Line {
        /// The request line.
        request: String,
    },
}

/// A connection speaking a [`Protocol`]. An HTTP server that closes the connection after
/// its answer (`Connection: close`, or HTTP/1.0 without keep-alive, as BusyBox's httpd
/// does) is connected to again before the next request, within that request's latency.
pub struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    request: Vec<u8>,
    http: bool,
    line: String,
    addr: SocketAddr,
    timeout: Duration,
    /// The server said it closes the connection after the last answer.
    closing: bool,
}

/// A connected stream with its timeouts, and a second handle for reading.
fn connect(addr: SocketAddr, timeout: Duration) -> anyhow::Result<(TcpStream, TcpStream)> {
    let s = TcpStream::connect_timeout(&addr, timeout)
        .with_context(|| format!("service: cannot connect to {addr}"))?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    Ok((s.try_clone()?, s))
}

/// Whether the HTTP answer whose header block is `head` ends its connection: `Connection:
/// close`, or an HTTP/1.0 answer without `Connection: keep-alive`.
pub(crate) fn closes_after(head: &str) -> bool {
    let connection = header_value(head, "connection").unwrap_or("");
    let has = |token: &str| {
        connection
            .split(',')
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    };
    has("close") || (head.starts_with("HTTP/1.0") && !has("keep-alive"))
}

impl Conn {
    /// Connects to `addr` with answers awaited for at most `timeout`.
    pub fn open(addr: SocketAddr, proto: &Protocol, timeout: Duration) -> anyhow::Result<Conn> {
        let (r, w) = connect(addr, timeout)?;
        let (request, http) = match proto {
            Protocol::Http { path } => (
                format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").into_bytes(),
                true,
            ),
            Protocol::Line { request } => (format!("{request}\r\n").into_bytes(), false),
        };
        Ok(Conn {
            reader: BufReader::new(r),
            writer: w,
            request,
            http,
            line: String::new(),
            addr,
            timeout,
            closing: false,
        })
    }

    /// Connects again, after an answer that closed the connection.
    fn reopen(&mut self) -> anyhow::Result<()> {
        let (r, w) = connect(self.addr, self.timeout)?;
        self.reader = BufReader::new(r);
        self.writer = w;
        self.closing = false;
        Ok(())
    }

    fn read_line(&mut self) -> anyhow::Result<()> {
        self.line.clear();
        if self.reader.read_line(&mut self.line)? == 0 {
            bail!("the server closed the connection");
        }
        Ok(())
    }

    /// One Redis-style reply whose first line is in `self.line`.
    fn read_reply(&mut self) -> anyhow::Result<()> {
        let first = self.line.trim_end().to_string();
        if let Some(n) = first.strip_prefix('$') {
            let n: i64 = n.parse().context("a bulk length")?;
            if n >= 0 {
                let mut body = vec![0u8; n as usize + 2];
                self.reader.read_exact(&mut body)?;
            }
        } else if let Some(n) = first.strip_prefix('*') {
            let n: i64 = n.parse().context("an array length")?;
            for _ in 0..n.max(0) {
                self.read_line()?;
                self.read_reply()?;
            }
        } else if first.starts_with('-') {
            bail!("the server answered an error: {first}");
        }
        Ok(())
    }

    fn read_http(&mut self) -> anyhow::Result<()> {
        let mut head = Vec::new();
        loop {
            let n = self.reader.read_until(b'\n', &mut head)?;
            if n == 0 {
                bail!("the server closed the connection");
            }
            if header_end(&head).is_some() {
                break;
            }
        }
        let head = String::from_utf8_lossy(&head).to_string();
        let status = head.split_whitespace().nth(1).unwrap_or("");
        self.closing = closes_after(&head);
        match header_value(&head, "content-length").and_then(|v| v.trim().parse().ok()) {
            Some(len) => {
                let mut body = vec![0u8; len];
                self.reader.read_exact(&mut body)?;
            }
            // Without a length, the body of an answer that closes runs to the end.
            None if self.closing => {
                std::io::copy(&mut self.reader, &mut std::io::sink())?;
            }
            None => {}
        }
        if status != "200" {
            bail!("HTTP status {status}");
        }
        Ok(())
    }
}

impl Exchange for Conn {
    fn exchange(&mut self) -> anyhow::Result<()> {
        if self.closing {
            self.reopen()?;
        }
        self.writer.write_all(&self.request)?;
        if self.http {
            self.read_http()
        } else {
            self.read_line()?;
            self.read_reply()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    /// Time moves only when the generator sleeps or a request is answered.
    struct Fake(AtomicU64);

    impl Clock for Fake {
        fn now_ns(&self) -> u64 {
            self.0.load(Ordering::SeqCst)
        }
        fn sleep_until(&self, t: u64) {
            self.0.fetch_max(t, Ordering::SeqCst);
        }
    }

    /// Answers in 1 ms, except the request sent at or after `stall_at`, which takes 200 ms.
    struct Stalling<'a> {
        clock: &'a Fake,
        stall_at: u64,
        stalled: bool,
    }

    impl Exchange for Stalling<'_> {
        fn exchange(&mut self) -> anyhow::Result<()> {
            let now = self.clock.now_ns();
            let took = if !self.stalled && now >= self.stall_at {
                self.stalled = true;
                200_000_000
            } else {
                1_000_000
            };
            self.clock.0.fetch_add(took, Ordering::SeqCst);
            Ok(())
        }
    }

    #[test]
    fn requests_fall_due_on_the_schedule_across_connections() {
        // 1000/s over 4 connections: connection 1's requests at 1, 5, 9 ms ...
        assert_eq!(due_ns(0, 0, 1, 4, 1000.0), 1_000_000);
        assert_eq!(due_ns(0, 2, 1, 4, 1000.0), 9_000_000);
        assert_eq!(due_ns(100, 0, 0, 1, 10.0), 100);
    }

    #[test]
    fn a_stall_shows_in_every_request_it_held_up() {
        let clock = Fake(AtomicU64::new(0));
        let mut conn = Stalling {
            clock: &clock,
            stall_at: 100_000_000,
            stalled: false,
        };
        // 100/s on one connection for 1 s: due every 10 ms.
        let done = drive(
            &clock,
            Slice {
                start: 0,
                end: 1_000_000_000,
                conn: 0,
                conns: 1,
                rate: 100.0,
            },
            &mut conn,
            &mut || None,
            &|| false,
        );
        assert_eq!(done.len(), 100);
        let ms: Vec<f64> = done.iter().map(|d| d.latency_ns as f64 / 1e6).collect();
        assert_eq!(ms[5], 1.0);
        // The request due at 100 ms took 200 ms; those due during the stall waited for it,
        // each 10 ms less than the one before.
        assert_eq!(ms[10], 200.0);
        assert_eq!(ms[11], 191.0);
        assert_eq!(ms[12], 182.0);
        assert_eq!(ms[29], 29.0);
        assert_eq!(ms[40], 1.0);
        // Counted from their sending time instead, all but one would look fast.
        assert!(ms.iter().filter(|&&m| m > 10.0).count() >= 18);
    }

    #[test]
    fn a_failed_exchange_is_counted_and_the_connection_replaced() {
        struct Broken;
        impl Exchange for Broken {
            fn exchange(&mut self) -> anyhow::Result<()> {
                bail!("reset")
            }
        }
        struct Fine;
        impl Exchange for Fine {
            fn exchange(&mut self) -> anyhow::Result<()> {
                Ok(())
            }
        }
        let clock = Fake(AtomicU64::new(0));
        let done = drive(
            &clock,
            Slice {
                start: 0,
                end: 100_000_000,
                conn: 0,
                conns: 1,
                rate: 100.0,
            },
            &mut Broken,
            &mut || Some(Box::new(Fine)),
            &|| false,
        );
        assert_eq!(done.len(), 10);
        assert!(!done[0].ok);
        assert!(done[1..].iter().all(|d| d.ok));
    }
}
