//! The socket transports: a unix socket and TCP on loopback, with and without a token.

mod common;

use std::io::Read;
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::thread;
use std::time::Duration;

use isobench_agent::{
    AgentClient, AgentConfig, AgentError, AgentListener, ErrorCode, Params, ProbeOpts, SessionEnd,
};

const TOKEN: &str = "7f3a9c0e5b2d48a1b6c4e8f0a2d4c6e8";

fn quick() -> ProbeOpts {
    ProbeOpts {
        budget: Some(Duration::from_millis(10)),
        ..ProbeOpts::default()
    }
}

#[test]
fn unix_socket_serves_one_session() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.sock");
    let l = AgentListener::bind_unix(&path, AgentConfig::default()).unwrap();
    assert_eq!(l.local_addr(), path.display().to_string());
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let server = thread::spawn(move || l.serve());

    let c = AgentClient::connect_unix("unix-tenant", &path).unwrap();
    c.hello().unwrap();
    let r = c.run_probe("syscall", Params::new(), &quick()).unwrap();
    assert!(!r.metrics.is_empty());
    c.bye().unwrap();
    assert_eq!(server.join().unwrap().unwrap(), SessionEnd::Bye);
    assert!(
        !path.exists(),
        "the socket file is removed when the agent ends"
    );
}

#[test]
fn unix_socket_replaces_a_stale_file_and_refuses_a_live_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.sock");
    // A stale socket: bound, then its listener gone (the file stays).
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let live = AgentListener::bind_unix(&path, AgentConfig::default()).unwrap();
    let e = AgentListener::bind_unix(&path, AgentConfig::default())
        .err()
        .expect("a second agent on a live socket");
    assert!(e.to_string().contains("already listening"), "{e}");
    drop(live);

    let file = dir.path().join("plain");
    std::fs::write(&file, "x").unwrap();
    let e = AgentListener::bind_unix(&file, AgentConfig::default())
        .err()
        .expect("a regular file is not replaced");
    assert!(e.to_string().contains("not a socket"), "{e}");
}

#[test]
fn tcp_loopback_with_token() {
    let l =
        AgentListener::bind_tcp("127.0.0.1:0", AgentConfig::default().with_token(TOKEN)).unwrap();
    let addr = l.local_addr();
    let server = thread::spawn(move || l.serve());

    // Wrong token: refused, and the agent keeps listening.
    let c = AgentClient::connect_tcp("tcp-tenant", &addr, Some("not-the-token")).unwrap();
    let e = c.hello().unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::Unauthorized), "{e}");
    assert!(e.to_string().contains("tcp-tenant"), "{e}");

    // No token: refused too.
    let c = AgentClient::connect_tcp("tcp-tenant", &addr, None).unwrap();
    let e = c.hello().unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::Unauthorized), "{e}");

    // A request before hello: refused, connection closed.
    let c = AgentClient::connect_tcp("tcp-tenant", &addr, Some(TOKEN)).unwrap();
    let e = c.ping().unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::HelloRequired), "{e}");
    assert!(common::eventually(|| c.closed_reason().is_some()));

    // The right token.
    let c = AgentClient::connect_tcp("tcp-tenant", &addr, Some(TOKEN)).unwrap();
    c.hello().unwrap();
    let r = c.run_probe("syscall", Params::new(), &quick()).unwrap();
    assert!(!r.metrics.is_empty());

    // A second controller is refused while the first is connected.
    let other = AgentClient::connect_tcp("intruder", &addr, Some(TOKEN)).unwrap();
    let e = other.hello().unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::Busy), "{e}");

    c.bye().unwrap();
    assert_eq!(server.join().unwrap().unwrap(), SessionEnd::Bye);
}

#[test]
fn tcp_needs_a_token_of_16_characters_on_every_address_loopback_included() {
    for addr in ["127.0.0.1:0", "[::1]:0", "0.0.0.0:0"] {
        if addr.starts_with('[') && std::net::TcpListener::bind(addr).is_err() {
            continue; // no IPv6 here
        }
        let e = AgentListener::bind_tcp(addr, AgentConfig::default())
            .err()
            .expect("no token");
        assert!(e.to_string().contains("without a token"), "{addr}: {e}");
        let e = AgentListener::bind_tcp(addr, AgentConfig::default().with_token("sixchr"))
            .err()
            .expect("a six-character token");
        assert!(e.to_string().contains("too weak"), "{addr}: {e}");
        assert!(
            AgentListener::bind_tcp(addr, AgentConfig::default().with_token(TOKEN)).is_ok(),
            "{addr}"
        );
    }
    let e = isobench_agent::serve_tcp("127.0.0.1:0", None).unwrap_err();
    assert!(e.to_string().contains("without a token"), "{e}");
}

/// An agent with the test catalogue on loopback, serving in a thread.
fn tcp_agent() -> (String, thread::JoinHandle<anyhow::Result<SessionEnd>>) {
    let config = AgentConfig::default()
        .with_token(TOKEN)
        .with_catalog(common::test_catalog());
    let l = AgentListener::bind_tcp("127.0.0.1:0", config).unwrap();
    let addr = l.local_addr();
    (addr, thread::spawn(move || l.serve()))
}

/// Everything the agent sends on `s` until it closes the connection.
fn read_to_close(mut s: TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut out = Vec::new();
    // A reset (the agent closed with our bytes unread) ends the reply too.
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The agent still serves a controller that has the token: a probe runs, the session ends.
fn still_serves(addr: &str, agent: thread::JoinHandle<anyhow::Result<SessionEnd>>) {
    assert!(
        !agent.is_finished(),
        "the agent ended on a refused connection"
    );
    let c = AgentClient::connect_tcp("owner", addr, Some(TOKEN)).unwrap();
    c.hello().unwrap();
    let r = c.run_probe("syscall", Params::new(), &quick()).unwrap();
    assert!(!r.metrics.is_empty());
    c.bye().unwrap();
    assert_eq!(agent.join().unwrap().unwrap(), SessionEnd::Bye);
}

/// Defect: an HTTP `POST /` whose body held JSON lines (`hello`, then `run_probe`) was
/// answered line by line: `bad_request` to each header line, then `hello` and the probe's
/// result, and the agent exited when the request's connection closed.
#[test]
fn agent_refuses_an_http_request() {
    use std::io::Write;
    let (addr, agent) = tcp_agent();
    let tag = 7_340_001;
    let body = format!(
        "{{\"id\":1,\"type\":\"hello\",\"protocol_version\":\"1.1\",\"tool_version\":\"0.1.0\"}}\n\
         {{\"id\":2,\"type\":\"run_probe\",\"name\":\"wait\",\"params\":{{\"tag\":{tag}}}}}\n"
    );
    let request = format!(
        "POST / HTTP/1.1\r\nHost: {addr}\r\nOrigin: http://example.invalid\r\n\
         Content-Type: text/plain;charset=UTF-8\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let reply = read_to_close(s);
    // One answer, to the request line, then the connection is closed: no header line, no
    // line of the body was read as a request.
    let lines: Vec<&str> = reply.lines().collect();
    assert_eq!(lines.len(), 1, "{reply}");
    assert!(lines[0].contains("bad_request"), "{reply}");
    assert!(!reply.contains("\"type\":\"hello\""), "{reply}");
    assert!(!reply.contains("probe_result"), "{reply}");
    assert!(!common::wait_started(tag), "the probe ran");

    // The same lines without the HTTP around them, but without the token: refused at hello.
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    let reply = read_to_close(s);
    assert!(reply.contains("unauthorized"), "{reply}");
    assert!(!reply.contains("probe_result"), "{reply}");
    assert!(!common::wait_started(tag), "the probe ran");

    still_serves(&addr, agent);
}

#[test]
fn blank_lines_and_a_trickled_line_do_not_hold_an_agent_before_hello() {
    use std::io::Write;
    let config = AgentConfig {
        handshake_timeout: Duration::from_millis(300),
        ..AgentConfig::default().with_token(TOKEN)
    };
    let l = AgentListener::bind_tcp("127.0.0.1:0", config).unwrap();
    let addr = l.local_addr();
    let agent = thread::spawn(move || l.serve());

    // A blank line before hello closes the connection.
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(b"\r\n").unwrap();
    assert_eq!(read_to_close(s), "");

    // A line trickled one byte at a time, each within the timeout of a single read, is cut
    // off once the whole handshake has taken longer than the handshake timeout.
    let s = TcpStream::connect(&addr).unwrap();
    let mut w = s.try_clone().unwrap();
    let trickle = thread::spawn(move || {
        for _ in 0..200 {
            if w.write_all(b"{").is_err() {
                return true;
            }
            thread::sleep(Duration::from_millis(100));
        }
        false
    });
    assert_eq!(read_to_close(s), "", "closed without an answer");
    assert!(trickle.join().unwrap(), "the agent cut the trickle off");

    still_serves(&addr, agent);
}

#[test]
fn a_silent_connection_is_dropped_after_the_handshake_timeout() {
    let config = AgentConfig {
        handshake_timeout: Duration::from_millis(50),
        ..AgentConfig::default().with_token(TOKEN)
    };
    let l = AgentListener::bind_tcp("127.0.0.1:0", config).unwrap();
    let addr = l.local_addr();
    let server = thread::spawn(move || l.serve());

    let mut silent = TcpStream::connect(&addr).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(silent.read(&mut buf).unwrap(), 0, "the agent hangs up");

    // The agent still serves a real controller afterwards.
    let c = AgentClient::connect_tcp("after", &addr, Some(TOKEN)).unwrap();
    c.hello().unwrap();
    c.bye().unwrap();
    assert_eq!(server.join().unwrap().unwrap(), SessionEnd::Bye);
}

#[test]
fn unix_socket_session_ends_on_eof_and_stops_stressors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.sock");
    let config = AgentConfig::default().with_catalog(common::test_catalog());
    let l = AgentListener::bind_unix(&path, config).unwrap();
    let server = thread::spawn(move || l.serve());
    let s = UnixStream::connect(&path).unwrap();
    let c = AgentClient::from_unix_stream("u", s).unwrap();
    c.hello().unwrap();
    c.start_stressor(
        "s1",
        "spin",
        10,
        Params::new(),
        &isobench_agent::StressOpts::default(),
    )
    .unwrap();
    drop(c);
    assert_eq!(server.join().unwrap().unwrap(), SessionEnd::Eof);
}

#[test]
fn connecting_to_nothing_is_an_io_error_naming_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let e = AgentClient::connect_unix("ghost", dir.path().join("none.sock")).unwrap_err();
    assert!(matches!(e, AgentError::Io { .. }), "{e}");
    assert!(e.is_unresponsive());
    assert!(e.to_string().contains("ghost"), "{e}");
}
