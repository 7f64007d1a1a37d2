//! The `service` probe's own request server, in the spirit of rd-hashd (resctl-bench's
//! simulated service): every request hashes pieces of a working set in anonymous memory
//! and, optionally, in a file read through the page cache, with a hot/cold skew, burns a
//! fixed amount of CPU time and optionally reads a few 4 KiB blocks from the disk directly.
//! So a neighbour that takes CPU, evicts its memory or page cache, or floods the disk slows
//! its answers, as it would a real service's.
//!
//! It speaks a line protocol on loopback (any request line; the answer is `+HASH` and CRLF)
//! with a thread per connection, all in the probe's process and so in its tenant.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::Context;

use crate::util::AlignedBuf;

/// What a request does.
#[derive(Debug, Clone)]
pub struct Work {
    /// Bytes of anonymous memory in the working set.
    pub mem: usize,
    /// Bytes of the file in the working set (0: none).
    pub file: u64,
    /// Bytes hashed per request from each of memory and file.
    pub touch: usize,
    /// Percent of accesses that go to the hot part.
    pub hot_pct: u32,
    /// Percent of the set that is hot.
    pub hot_share: u32,
    /// CPU time burnt per request, µs.
    pub cpu_us: u64,
    /// 4 KiB direct reads from the file per request.
    pub io_reads: u32,
    /// Where the file lives.
    pub dir: PathBuf,
}

const PAGE: usize = 4096;

/// The working set, shared by the connection threads.
struct Set {
    mem: Vec<u8>,
    file: Option<File>,
    direct: Option<File>,
    path: Option<PathBuf>,
    work: Work,
}

impl Drop for Set {
    fn drop(&mut self) {
        if let Some(p) = &self.path {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A small xorshift generator per connection (the choice of pages need not be seeded
/// across runs: it only spreads the accesses).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A page index of `pages`, hot or cold by the skew.
    fn page(&mut self, pages: usize, w: &Work) -> usize {
        let hot = (pages * w.hot_share as usize / 100).max(1);
        if (self.next() % 100) < w.hot_pct as u64 {
            (self.next() % hot as u64) as usize
        } else {
            (self.next() % pages as u64) as usize
        }
    }
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn hash(h: u64, bytes: &[u8]) -> u64 {
    // One word of every cache line: every line is touched, the hash stays cheap.
    bytes
        .chunks(64)
        .fold(h, |h, c| (h ^ c[0] as u64).wrapping_mul(0x0100_0000_01b3))
}

impl Set {
    fn new(work: Work) -> anyhow::Result<Set> {
        let mut mem = vec![0u8; work.mem.max(PAGE)];
        for (i, b) in mem.iter_mut().enumerate().step_by(PAGE) {
            *b = i as u8 | 1;
        }
        let (mut file, mut direct, mut path) = (None, None, None);
        if work.file > 0 {
            let p = work
                .dir
                .join(format!(".isobench-service-{}.dat", std::process::id()));
            let mut f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&p)
                .with_context(|| format!("service: creating its file {}", p.display()))?;
            path = Some(p.clone());
            let chunk = vec![0x5au8; 1 << 20];
            let mut left = work.file;
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                f.write_all(&chunk[..n])
                    .with_context(|| format!("service: writing {}", p.display()))?;
                left -= n as u64;
            }
            f.sync_data()?;
            if work.io_reads > 0 {
                direct = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_DIRECT)
                    .open(&p)
                    .ok();
            }
            file = Some(f);
        }
        Ok(Set {
            mem,
            file,
            direct,
            path,
            work,
        })
    }

    /// One request's work; its hash.
    fn serve(&self, rng: &mut Rng, buf: &mut [u8], dbuf: &mut AlignedBuf) -> u64 {
        let cpu0 = thread_cpu_ns();
        let w = &self.work;
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        let pages = self.mem.len() / PAGE;
        let mut left = w.touch;
        while left > 0 {
            let p = rng.page(pages, w);
            let n = left.min(PAGE);
            h = hash(h, &self.mem[p * PAGE..p * PAGE + n]);
            left -= n;
        }
        if let Some(f) = &self.file {
            let fpages = (w.file as usize / PAGE).max(1);
            let mut left = w.touch;
            while left > 0 {
                let p = rng.page(fpages, w);
                let n = left.min(PAGE);
                if let Ok(got) = f.read_at(&mut buf[..n], (p * PAGE) as u64) {
                    h = hash(h, &buf[..got.max(1).min(n)]);
                }
                left -= n;
            }
            for _ in 0..w.io_reads {
                let p = (rng.next() % fpages as u64) as usize;
                let r = match &self.direct {
                    Some(d) => d.read_at(dbuf.as_mut_slice(), (p * PAGE) as u64),
                    None => f.read_at(dbuf.as_mut_slice(), (p * PAGE) as u64),
                };
                if r.is_ok() {
                    h = hash(h, dbuf.as_slice());
                }
            }
        }
        let burn = w.cpu_us * 1000;
        while thread_cpu_ns().saturating_sub(cpu0) < burn {
            for _ in 0..64 {
                h = h.rotate_left(5).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            }
        }
        h
    }
}

/// The server: running until [`Server::stop`].
pub struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    /// Builds the working set and listens on loopback, port chosen by the kernel.
    pub fn start(work: Work) -> anyhow::Result<Server> {
        let set = Arc::new(Set::new(work)?);
        let l = TcpListener::bind("127.0.0.1:0").context("service: binding its server")?;
        let addr = l.local_addr()?;
        l.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let accept = std::thread::Builder::new()
            .name("service-accept".into())
            .spawn(move || {
                let mut conns: Vec<JoinHandle<()>> = Vec::new();
                let mut seed = 0x2545_f491_4f6c_dd1du64;
                while !st.load(Ordering::Relaxed) {
                    match l.accept() {
                        Ok((s, _)) => {
                            seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
                            let (set, st) = (set.clone(), st.clone());
                            if let Ok(h) = std::thread::Builder::new()
                                .name("service-conn".into())
                                .spawn(move || connection(s, &set, &st, seed | 1))
                            {
                                conns.push(h);
                            }
                        }
                        Err(_) => std::thread::sleep(std::time::Duration::from_millis(2)),
                    }
                }
                for h in conns {
                    let _ = h.join();
                }
            })?;
        Ok(Server {
            addr,
            stop,
            accept: Some(accept),
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops it and waits for its threads (connections close as their clients do, or within
    /// their read timeout).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

fn connection(s: TcpStream, set: &Set, stop: &AtomicBool, seed: u64) {
    let _ = s.set_nodelay(true);
    let _ = s.set_read_timeout(Some(std::time::Duration::from_millis(200)));
    let Ok(mut w) = s.try_clone() else { return };
    let mut r = BufReader::new(s);
    let mut rng = Rng(seed);
    let mut buf = vec![0u8; PAGE];
    let mut dbuf = AlignedBuf::new(PAGE, PAGE);
    let mut line = String::new();
    while !stop.load(Ordering::Relaxed) {
        line.clear();
        match r.read_line(&mut line) {
            Ok(0) => return,
            Ok(_) => {
                let h = set.serve(&mut rng, &mut buf, &mut dbuf);
                if w.write_all(format!("+{h:016x}\r\n").as_bytes()).is_err() {
                    return;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => return,
        }
    }
}
