//! A running `isobench serve` for the web tests: started on a free port with its own database,
//! its address read from the `listening on http://ADDR/` line, HTTP requests (ureq) and its
//! event stream, and torn down (with every process it started) when dropped. Also the browser
//! venv that `scripts/test` sets up, or why a test that needs it skips.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
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
    agent: ureq::Agent,
}

impl Server {
    /// Starts `isobench serve --db DB ARGS...` with `ISOBENCH_DEBUG_FAKE=fake` (unless
    /// `fake` is empty) and waits for its `listening on` line. Its stderr goes to
    /// `DB.server.log` (shown by [`Server::log`]).
    pub fn start(db: &Path, fake: &str, args: &[&str]) -> Server {
        Server::start_via(super::spawnable(), db, fake, args)
    }

    /// [`Server::start`] with `cmd` as the program: `isobench` itself ([`super::spawnable`]),
    /// or a wrapper whose arguments end with it (the rest are appended).
    pub fn start_via(
        mut cmd: std::process::Command,
        db: &Path,
        fake: &str,
        args: &[&str],
    ) -> Server {
        let log = db.with_extension("server.log");
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
        let agent = ureq::Agent::new_with_config(
            ureq::config::Config::builder()
                .http_status_as_error(false)
                .timeout_global(Some(Duration::from_secs(120)))
                .build(),
        );
        let mut server = Server {
            child,
            url: String::new(),
            addr: String::new(),
            log,
            agent,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(addr) => {
                    // A server listening on every address is reached on loopback.
                    let to = addr
                        .replace("0.0.0.0:", "127.0.0.1:")
                        .replace("[::]:", "[::1]:");
                    server.url = format!("http://{to}");
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

    /// One HTTP request: the status, the headers (lower-case names) and the body as text.
    /// A GET is repeated once when a kept-alive connection was closed meanwhile, as browsers
    /// do; a server that is gone fails both.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> Response {
        let send = || {
            let mut req = ureq::http::Request::builder()
                .method(method)
                .uri(format!("{}{path}", self.url));
            for (k, v) in headers {
                req = req.header(*k, *v);
            }
            let req = req
                .body(body.unwrap_or_default().to_string())
                .expect("a valid request");
            self.agent.run(req)
        };
        let resp = match send() {
            Err(_) if method == "GET" => send(),
            r => r,
        };
        let mut resp =
            resp.unwrap_or_else(|e| panic!("{method} {path}: {e}\nserver log:\n{}", self.log()));
        let headers = resp
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_ascii_lowercase(),
                    v.to_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        Response {
            status: resp.status().as_u16(),
            headers,
            body: resp.body_mut().read_to_string().unwrap_or_default(),
        }
    }

    /// `GET path` as [`Server::request`].
    pub fn get(&self, path: &str, headers: &[(&str, &str)]) -> Response {
        self.request("GET", path, headers, None)
    }

    /// The CSRF value state-changing requests carry (`X-Isobench-Csrf`).
    pub fn csrf(&self) -> String {
        self.get("/api/v1/session", &[]).json()["csrf"]
            .as_str()
            .expect("the session has a csrf value")
            .to_string()
    }

    /// The server-sent events of `/api/v1/events`, one `(event, data)` per message, read on
    /// a thread until the stream or the receiver ends.
    pub fn events(&self) -> mpsc::Receiver<(String, serde_json::Value)> {
        let resp = self
            .agent
            .get(format!("{}/api/v1/events", self.url))
            .call()
            .expect("the event stream opens");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let reader = BufReader::new(resp.into_body().into_reader());
            let mut event = String::new();
            for line in reader.lines().map_while(Result::ok) {
                if let Some(e) = line.strip_prefix("event: ") {
                    event = e.to_string();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    let data = serde_json::from_str(d).unwrap_or(serde_json::Value::Null);
                    if tx.send((event.clone(), data)).is_err() {
                        return;
                    }
                }
            }
        });
        rx
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `kill -9` of the server alone (its run, in a group of its own, is left to the
    /// server's parent-death signal), reaped.
    pub fn kill_hard(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The server's exit status, once it has exited.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("waiting for the server")
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
            super::skip(
                "browser",
                &format!("{what}: ISOBENCH_BROWSER_PYTHON is not set (scripts/test sets it up)"),
            );
            None
        }
    }
}

/// The repository's root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Host agents (`isobench agent --listen`) in a fake mode on free loopback ports, one token
/// for all: the hosts of a fleet run launched from the web. Stopped when dropped.
pub struct FakeAgents {
    children: Vec<Child>,
    /// Each agent's `ADDR:PORT`.
    pub addrs: Vec<String>,
    /// The token every agent wants.
    pub token: String,
}

impl FakeAgents {
    /// `n` agents with `ISOBENCH_DEBUG_FAKE=fake`, their databases, token file and logs in
    /// `dir`; returns once each says it listens.
    pub fn start(dir: &Path, n: usize, fake: &str) -> FakeAgents {
        let token = "fleet-agent-token-0123456789".to_string();
        let token_file = super::write_private(dir, "agent-token", &format!("{token}\n"));
        let mut agents = FakeAgents {
            children: Vec::new(),
            addrs: Vec::new(),
            token,
        };
        for i in 0..n {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let addr = format!("127.0.0.1:{port}");
            let log = dir.join(format!("agent{i}.log"));
            let child = super::spawnable()
                .env("ISOBENCH_DEBUG_FAKE", fake)
                .args(["agent", "--listen", &addr, "--token-file", &token_file])
                .arg("--db")
                .arg(dir.join(format!("agent{i}.db")))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .expect("isobench agent starts");
            agents.children.push(child);
            let deadline = Instant::now() + START_TIMEOUT;
            while !std::fs::read_to_string(&log).is_ok_and(|l| l.contains("listening")) {
                assert!(
                    Instant::now() < deadline,
                    "the agent on {addr} never listened:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            agents.addrs.push(addr);
        }
        agents
    }
}

impl Drop for FakeAgents {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
