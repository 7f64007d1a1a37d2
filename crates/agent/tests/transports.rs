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
fn tcp_loopback_may_go_without_a_token_but_other_addresses_may_not() {
    let l = AgentListener::bind_tcp("127.0.0.1:0", AgentConfig::default()).unwrap();
    let addr = l.local_addr();
    let server = thread::spawn(move || l.serve());
    let c = AgentClient::connect_tcp("lo", &addr, None).unwrap();
    c.hello().unwrap();
    drop(c);
    assert_eq!(server.join().unwrap().unwrap(), SessionEnd::Eof);

    let e = AgentListener::bind_tcp("0.0.0.0:0", AgentConfig::default())
        .err()
        .expect("no token on a non-loopback address");
    assert!(e.to_string().contains("without a token"), "{e}");
    let e = isobench_agent::serve_tcp("0.0.0.0:0", None).unwrap_err();
    assert!(e.to_string().contains("without a token"), "{e}");
    let e = AgentListener::bind_tcp("0.0.0.0:0", AgentConfig::default().with_token("short"))
        .err()
        .expect("a short token on a non-loopback address");
    assert!(e.to_string().contains("too short"), "{e}");
    assert!(AgentListener::bind_tcp("0.0.0.0:0", AgentConfig::default().with_token(TOKEN)).is_ok());
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
