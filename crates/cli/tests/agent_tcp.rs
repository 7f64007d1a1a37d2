//! `isobench agent --tcp` and `--listen`: a token of at least 16 characters on every address,
//! loopback included, and a web page of another origin cannot drive the agent or stop it.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::served::{browser_python, repo_root};
use common::{code, isobench, spawnable, text, write_private};
use isobench_agent::{AgentClient, Params, ProbeOpts};

const TOKEN: &str = "5d1c0f7e9a2b4c6d8e0f1a3b";

/// `isobench agent --tcp 127.0.0.1:0` with the token in its environment: the child and the
/// address it says it listens on.
fn tcp_agent() -> (Child, String) {
    let mut child = spawnable()
        .args(["agent", "--tcp", "127.0.0.1:0"])
        .env("ISOBENCH_AGENT_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("isobench agent starts");
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("listening on ")
        .nth(1)
        .unwrap_or_else(|| panic!("the agent said: {line}"))
        .trim()
        .to_string();
    (child, addr)
}

/// The agent is still there, and still serves a controller with the token: a probe runs,
/// and the agent ends with that session, as a `--tcp` agent does.
fn still_serves(mut agent: Child, addr: &str) {
    assert!(
        agent.try_wait().unwrap().is_none(),
        "the agent exited after the refused connection"
    );
    let c = AgentClient::connect_tcp("owner", addr, Some(TOKEN)).unwrap();
    c.hello().unwrap();
    let opts = ProbeOpts {
        budget: Some(Duration::from_millis(10)),
        ..ProbeOpts::default()
    };
    let r = c.run_probe("syscall", Params::new(), &opts).unwrap();
    assert!(!r.metrics.is_empty());
    c.bye().unwrap();
    assert!(agent.wait().unwrap().success());
}

/// What a page sends: `hello` (no token: the page does not know it) and a probe.
const LINES: &str = "{\"id\":1,\"type\":\"hello\",\"protocol_version\":\"1.1\",\
                     \"tool_version\":\"0.1.0\"}\n\
                     {\"id\":2,\"type\":\"run_probe\",\"name\":\"syscall\"}\n";

#[test]
fn agent_tcp_needs_a_token_of_16_characters_on_loopback_too() {
    let out = isobench()
        .args(["agent", "--tcp", "127.0.0.1:0"])
        .env_remove("ISOBENCH_AGENT_TOKEN")
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(code(&out), 2, "{err}");
    assert!(
        err.contains("--tcp 127.0.0.1:0") && err.contains("without a token"),
        "{err}"
    );
    assert!(err.contains("ISOBENCH_AGENT_TOKEN"), "{err}");

    let out = isobench()
        .args(["agent", "--tcp", "127.0.0.1:0", "--token", "sixchr"])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(code(&out), 2, "{err}");
    assert!(
        err.contains("--token") && err.contains("6 character"),
        "{err}"
    );
    assert!(!err.contains("sixchr"), "the token is not echoed: {err}");

    // A host agent's token file, on loopback (docs/cli.md said 16; 6 was accepted).
    let dir = tempfile::tempdir().unwrap();
    let file = write_private(dir.path(), "token", "abcdef\n");
    let out = isobench()
        .args(["agent", "--listen", "127.0.0.1:0", "--token-file", &file])
        .arg("--db")
        .arg(dir.path().join("a.db"))
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(code(&out), 2, "{err}");
    assert!(
        err.contains(&format!("--token-file {file}")) && err.contains("16"),
        "{err}"
    );
}

/// Defect: `isobench agent --tcp 127.0.0.1:PORT` took no token; an HTTP `POST /` whose body
/// held JSON lines got `hello` and `probe_result` back.
#[test]
fn agent_refuses_an_http_request() {
    let (agent, addr) = tcp_agent();
    let request = format!(
        "POST / HTTP/1.1\r\nHost: {addr}\r\nContent-Type: text/plain;charset=UTF-8\r\n\
         Content-Length: {}\r\n\r\n{LINES}",
        LINES.len()
    );
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut reply = Vec::new();
    let _ = s.read_to_end(&mut reply);
    let reply = text(&reply);
    assert_eq!(reply.lines().count(), 1, "one answer, then closed: {reply}");
    assert!(reply.contains("bad_request"), "{reply}");
    assert!(
        !reply.contains("\"hello\"") && !reply.contains("probe_result"),
        "{reply}"
    );
    still_serves(agent, &addr);
}

/// What went each way through a [`relay`].
#[derive(Default)]
struct Seen {
    connections: usize,
    to_agent: Vec<u8>,
    from_agent: Vec<u8>,
}

/// A TCP relay on loopback in front of `target` that records what passes: the page's
/// requests are sent here, so the test knows they reached the agent and what it answered.
fn relay(target: String) -> (String, Arc<Mutex<Seen>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let s2 = seen.clone();
    thread::spawn(move || {
        for client in l.incoming().map_while(Result::ok) {
            let Ok(upstream) = TcpStream::connect(&target) else {
                continue;
            };
            s2.lock().unwrap().connections += 1;
            for (mut from, mut to, up) in [
                (
                    client.try_clone().unwrap(),
                    upstream.try_clone().unwrap(),
                    true,
                ),
                (upstream, client, false),
            ] {
                let seen = s2.clone();
                thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = from.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        let mut s = seen.lock().unwrap();
                        if up {
                            s.to_agent.extend_from_slice(&buf[..n]);
                        } else {
                            s.from_agent.extend_from_slice(&buf[..n]);
                        }
                        drop(s);
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(std::net::Shutdown::Both);
                    let _ = from.shutdown(std::net::Shutdown::Both);
                });
            }
        }
    });
    (addr, seen)
}

/// Defect: a `fetch(..., {mode: 'no-cors'})` from a page of another origin reached the
/// agent on loopback, and the agent exited afterwards. Now the page's request reaches the
/// agent (through a recording relay), is refused at its first line, nothing runs, and the
/// agent goes on serving.
#[test]
fn agent_refuses_a_cross_origin_fetch() {
    let Some(python) = browser_python("the agent's cross-origin fetch test") else {
        return;
    };
    let (agent, addr) = tcp_agent();
    let (front, seen) = relay(addr.clone());
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body.txt");
    std::fs::write(&body, LINES).unwrap();
    let out = std::process::Command::new(python)
        .arg(repo_root().join("tests/browser/agent_fetch.py"))
        .arg(format!("http://{front}/"))
        .arg(&body)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the page did not run:\n{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    eprintln!("the page: {result}");
    assert!(
        result["fetch"].as_str().unwrap().starts_with("rejected"),
        "the fetch got an HTTP answer: {result}"
    );
    let seen = seen.lock().unwrap();
    let (up, down) = (text(&seen.to_agent), text(&seen.from_agent));
    assert!(seen.connections >= 1);
    assert!(
        up.starts_with("POST / HTTP/1.1\r\n") && up.contains("run_probe"),
        "the page's request reached the agent: {up}"
    );
    assert!(
        up.contains("Origin: http://localhost:"),
        "cross-origin: {up}"
    );
    assert!(down.contains("bad_request"), "{down}");
    assert!(
        !down.contains("\"hello\"") && !down.contains("probe_result"),
        "{down}"
    );
    assert_eq!(
        down.lines().count(),
        seen.connections,
        "one answer per connection, then closed: {down}"
    );
    drop(seen);
    still_serves(agent, &addr);
}
