//! Real workloads through the agent: network services from the workloads crate, a real
//! stressor when one can run here, and an agent spawned as a child process on stdio.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use isobench_agent::{AgentClient, ErrorCode, Params, ProbeOpts, StressOpts};
use isobench_workloads::Env;

#[test]
fn tcp_echo_service_serves_and_reports() {
    let p = common::pair();
    let addr = p
        .client
        .start_service("echo", "tcp-echo", "127.0.0.1:0", None)
        .unwrap();
    assert!(!addr.ends_with(":0"), "the real port is returned: {addr}");

    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"isobench").unwrap();
    let mut back = [0u8; 8];
    s.read_exact(&mut back).unwrap();
    assert_eq!(&back, b"isobench");
    drop(s);

    let e = p
        .client
        .start_service("echo", "tcp-echo", "127.0.0.1:0", None)
        .unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::Busy), "{e}");

    let stats = p.client.stop_service("echo").unwrap();
    assert!(stats.connections >= 1);
    assert!(stats.bytes_in >= 8);
    let e = p.client.stop_service("echo").unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::NotFound), "{e}");
}

#[test]
fn service_arguments_are_checked() {
    let p = common::pair();
    let e = p
        .client
        .start_service("h", "http:lots", "127.0.0.1:0", None)
        .unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::BadParameter), "{e}");
    let e = p
        .client
        .start_service("h", "udp-echo", "localhost-ish", None)
        .unwrap_err();
    assert_eq!(e.code(), Some(&ErrorCode::BadParameter), "{e}");
    assert!(e.to_string().contains("ip:port"), "{e}");
    let addr = p
        .client
        .start_service("h", "http:1K", "127.0.0.1:0", None)
        .unwrap();
    assert!(addr.starts_with("127.0.0.1:"));
    // Left running: bye stops it.
    p.client.bye().unwrap();
}

#[test]
fn real_cpu_stressor_when_it_can_run_here() {
    let Some(cpu) = isobench_workloads::stressor("cpu") else {
        common::skip("cpu stressor", "no `cpu` stressor in the catalogue");
        return;
    };
    if let Err(u) = cpu.supported(&Env::detect()) {
        common::skip(
            "cpu stressor",
            &format!("the cpu stressor cannot run here: {}", u.reason),
        );
        return;
    }
    let p = common::pair();
    let opts = StressOpts {
        sample_interval: Some(Duration::from_millis(20)),
        pin: Some(Env::detect().cpus.into_iter().take(1).collect()),
        ..StressOpts::default()
    };
    p.client
        .start_stressor("cpu-hog", "cpu", 1, Params::new(), &opts)
        .unwrap();
    assert!(common::eventually(|| p
        .client
        .next_sample(Duration::from_secs(1))
        .is_some_and(|s| s.stressor_id == "cpu-hog" && s.ops > 0)));
    let report = p.client.stop_stressor("cpu-hog").unwrap();
    assert!(report.ops > 0);
    assert!(report.workers >= 1);
    assert!(p.client.take_exits().is_empty());
}

/// Entry point of the child agent (does nothing unless the parent test set the variable).
#[test]
fn stdio_child_entry() {
    if std::env::var_os("ISOBENCH_AGENT_TEST_CHILD").is_none() {
        return;
    }
    // Anything the test harness or a workload prints to standard output from here on goes
    // to standard error instead; the protocol has its own descriptor.
    let end = isobench_agent::serve_stdio().unwrap();
    println!("this line must not reach the controller ({end:?})");
}

#[test]
fn stdio_agent_in_a_child_process() {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "stdio_child_entry",
            "--test-threads=1",
            "--quiet",
        ])
        .env("ISOBENCH_AGENT_TEST_CHILD", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let c = AgentClient::from_child("child-tenant", &mut child)
        .unwrap()
        .with_timeout(Duration::from_secs(60));
    let h = c.hello().unwrap();
    assert_eq!(h.pid, child.id(), "the agent is the child");
    let r = c
        .run_probe(
            "syscall",
            Params::new().set("path", "write"),
            &ProbeOpts {
                budget: Some(Duration::from_millis(10)),
                ..ProbeOpts::default()
            },
        )
        .unwrap();
    assert!(r.metrics.iter().any(|m| m.name == "write_ns"));
    c.bye().unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "the child agent exits cleanly: {status}");
}

#[test]
fn from_child_needs_piped_stdio() {
    let mut child = Command::new("true").spawn().unwrap();
    let e = AgentClient::from_child("nopipes", &mut child).unwrap_err();
    assert!(e.to_string().contains("piped"), "{e}");
    let _ = child.wait();
}
