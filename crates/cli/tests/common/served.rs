//! A running `isobench serve` for the web tests: started on a free port with its own database,
//! its address read from the `listening on http://ADDR/` line, small HTTP requests to it, and
//! torn down (with every process it started) when dropped. Also the browser venv that
//! `scripts/test` sets up, or why a test that needs it skips.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a server may take to say where it listens (the machine is shared and busy).
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// An `isobench serve` child, in a process group of its own, killed with it on drop.
pub struct Server {
    child: Child,
    /// `http://ADDR` without a trailing slash.
    pub url: String,
    /// `ADDR`, e.g. `127.0.0.1:41234`.
    pub addr: String,
    log: PathBuf,
}

impl Server {
    /// Starts `isobench serve --db DB ARGS...` with `ISOBENCH_DEBUG_FAKE=fake` (unless
    /// `fake` is empty) and waits for its `listening on` line. Its stderr goes to
    /// `DB.server.log` (shown by [`Server::log`]).
    pub fn start(db: &Path, fake: &str, args: &[&str]) -> Server {
        let log = db.with_extension("server.log");
        let mut cmd = super::spawnable();
        cmd.arg("serve")
            .args(args)
            .arg("--db")
            .arg(db)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .process_group(0);
        if fake.is_empty() {
            cmd.env_remove("ISOBENCH_DEBUG_FAKE");
        } else {
            cmd.env("ISOBENCH_DEBUG_FAKE", fake);
        }
        let mut child = cmd.spawn().expect("isobench serve starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        // Reads stdout to its end, so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if !sent {
                    if let Some(rest) = line.split("listening on http://").nth(1) {
                        let addr = rest.trim().trim_end_matches('/').to_string();
                        let _ = tx.send(addr);
                        sent = true;
                    }
                }
            }
        });
        let mut server = Server {
            child,
            url: String::new(),
            addr: String::new(),
            log,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(addr) => {
                    server.url = format!("http://{addr}");
                    server.addr = addr;
                    return server;
                }
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {
                    if let Ok(Some(status)) = server.child.try_wait() {
                        panic!(
                            "isobench serve exited ({status}) before listening:\n{}",
                            server.log()
                        );
                    }
                }
                Err(_) => panic!(
                    "isobench serve did not print `listening on http://ADDR/` in {}s:\n{}",
                    START_TIMEOUT.as_secs(),
                    server.log()
                ),
            }
        }
    }

    /// What the server wrote on stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// One HTTP/1.1 request (`Connection: close`): the status, the headers (lower-case
    /// names) and the body as text.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> Response {
        http(&self.addr, method, path, headers, body)
    }

    /// `GET path` as [`Server::request`].
    pub fn get(&self, path: &str, headers: &[(&str, &str)]) -> Response {
        self.request("GET", path, headers, None)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // A graceful stop first (it stops its runs), then the whole group, runs included.
        let pid = self.child.id() as i32;
        // SAFETY: kill has no memory preconditions; the group is the one this child leads.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // SAFETY: as above.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP response, read whole.
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Header names in lower case, values as sent.
    pub headers: Vec<(String, String)>,
    /// The body as text (chunked bodies decoded).
    pub body: String,
}

impl Response {
    /// The first header of that (lower-case) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// A minimal HTTP/1.1 client for tests: one request per connection.
pub fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Response {
    // A server listening on every address is reached on loopback.
    let to = addr
        .replace("0.0.0.0:", "127.0.0.1:")
        .replace("[::]:", "[::1]:");
    let mut s = TcpStream::connect(&to).unwrap_or_else(|e| panic!("connect {to}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        req.push_str(&format!("Content-Length: {}\r\n", b.len()));
    }
    req.push_str("\r\n");
    if let Some(b) = body {
        req.push_str(b);
    }
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head in {:?}", String::from_utf8_lossy(&raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut rest = raw[split + 4..].to_vec();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad status line in {head}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    if headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"))
    {
        rest = dechunk(&rest);
    }
    Response {
        status,
        headers,
        body: String::from_utf8_lossy(&rest).into_owned(),
    }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&b[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next()?.trim(), 16).ok())
            .unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = eol + 2;
        out.extend_from_slice(&b[start..(start + size).min(b.len())]);
        b = &b[(start + size + 2).min(b.len())..];
    }
    out
}

/// The venv's python that `scripts/test` sets up (`ISOBENCH_BROWSER_PYTHON`), or `None` after
/// printing why the test skips. Under CI (CI set, not "false") its absence is a failure.
pub fn browser_python(what: &str) -> Option<PathBuf> {
    match std::env::var_os("ISOBENCH_BROWSER_PYTHON") {
        Some(p) => Some(PathBuf::from(p)),
        None => {
            assert!(
                std::env::var("CI").map_or(true, |v| v.is_empty() || v == "false"),
                "CI must run {what}: scripts/test sets ISOBENCH_BROWSER_PYTHON"
            );
            eprintln!(
                "skipping {what}: ISOBENCH_BROWSER_PYTHON is not set (scripts/test sets it up)"
            );
            None
        }
    }
}

/// The repository's root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}
