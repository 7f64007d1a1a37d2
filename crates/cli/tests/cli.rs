//! The command line as a user meets it.

use predicates::prelude::*;

mod common;
use common::{children_of, cmdline, code, isobench, text};

#[test]
fn list_json_lists_every_workload_with_host_facts() {
    let out = isobench().args(["list", "--json"]).output().unwrap();
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema_version"], 1);
    assert!(doc["tool_version"].is_string());
    assert!(doc["host"]["cores"].as_u64().unwrap() >= 1);
    assert!(doc["host"]["kernel"].is_string());
    let probes = doc["probes"].as_array().unwrap();
    let stressors = doc["stressors"].as_array().unwrap();
    assert!(probes.len() >= 14);
    assert!(stressors.len() >= 8);
    for p in probes.iter().chain(stressors) {
        assert!(p["name"].is_string());
        assert!(p["class"].is_string());
        assert!(p["supported"]["ok"].is_boolean());
        if p["supported"]["ok"] == false {
            assert!(p["supported"]["reason"].is_string());
        }
        for param in p["params"].as_array().unwrap() {
            assert!(param["default"].is_string(), "{param}");
            assert!(param["range"].is_string(), "{param}");
        }
    }
}

#[test]
fn probe_runs_and_prints_json_metrics() {
    let out = isobench()
        .args(["probe", "syscall", "--budget", "0.1", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["kind"], "probe");
    assert_eq!(doc["workload"], "syscall");
    let metrics = doc["metrics"].as_array().unwrap();
    assert_eq!(metrics.len(), 3);
    for m in metrics {
        let v = m["value"].as_f64().unwrap();
        assert!(v > 0.0 && v.is_finite(), "{m}");
        assert_eq!(m["unit"], "ns");
        assert_eq!(m["direction"], "lower");
    }
}

#[test]
fn unknown_probe_suggests_the_nearest_names() {
    isobench()
        .args(["probe", "cache-latncy"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("did you mean `cache-latency`"));
}

#[test]
fn a_stressor_name_given_to_probe_says_which_command() {
    isobench()
        .args(["probe", "forkbomb"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("isobench stress forkbomb"));
}

#[test]
fn bad_parameter_names_range_and_default() {
    isobench()
        .args(["probe", "syscall", "--set", "path=everything"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("path=everything"))
        .stderr(predicate::str::contains("default all"));
    isobench()
        .args(["probe", "syscall", "--set", "pth=read"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("did you mean `path`"));
}

#[test]
fn aggressive_stressors_are_refused_on_the_host_without_the_flag() {
    for name in ["forkbomb", "memhog", "disk"] {
        isobench()
            .args(["stress", name, "--duration", "0.2"])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("--allow-unsafe-host"));
    }
}

#[test]
fn stress_intensity_out_of_range_is_bad_input() {
    isobench()
        .args(["stress", "cpu", "--intensity", "101", "--duration", "0.1"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("0..=100"));
}

/// Runs `isobench ARGS`, returning its pid and output.
fn run_with_pid(args: &[&str]) -> (u32, std::process::Output) {
    let child = common::spawnable()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    (pid, child.wait_with_output().unwrap())
}

#[test]
fn a_net_probe_runs_its_own_server_in_a_process_of_its_own() {
    for (probe, proto, kinds) in [
        ("net-throughput", "tcp", &["tcp-sink"][..]),
        ("net-rtt", "both", &["udp-echo", "tcp-echo"][..]),
    ] {
        let (pid, out) = run_with_pid(&[
            "probe",
            probe,
            "--set",
            &format!("proto={proto}"),
            "--set",
            "duration=0.2",
            "--json",
        ]);
        assert!(
            out.status.success(),
            "{probe}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let servers = doc["runs"][0]["own_servers"].as_array().unwrap();
        let got: Vec<&str> = servers
            .iter()
            .map(|s| s["kind"].as_str().unwrap())
            .collect();
        assert_eq!(got, kinds, "{probe}");
        for s in servers {
            assert_eq!(s["separate_process"], true, "{probe}: {s}");
            let server_pid = s["pid"].as_u64().unwrap() as u32;
            assert_ne!(
                server_pid, pid,
                "{probe}: the server ran in the probe's process"
            );
        }
    }
}

#[test]
fn a_server_that_cannot_start_fails_the_probe_with_its_reason() {
    // Binding an address this host does not have fails at once; nothing is sent.
    let out = isobench()
        .args([
            "probe",
            "net-rtt",
            "--set",
            "proto=udp",
            "--set",
            "addr=192.0.2.1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("udp-echo server process"), "{err}");
    assert!(err.contains("bind udp 192.0.2.1:0"), "{err}");
}

#[test]
fn serve_reports_its_address_and_stops_at_the_end_of_stdin() {
    use std::io::{BufRead, Read, Write};
    let mut child = common::spawnable()
        .args(["netserve", "tcp-echo", "--bind", "127.0.0.1:0"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let ready: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(ready["event"], "ready");
    let addr = ready["addr"].as_str().unwrap();
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    c.write_all(b"echo").unwrap();
    let mut b = [0u8; 4];
    c.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"echo");
    drop(c);
    drop(child.stdin.take());
    let stopped: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(stopped["event"], "stopped", "{stopped}");
    assert_eq!(stopped["stats"]["bytes_in"], 4, "{stopped}");
    assert!(stopped["failure"].is_null(), "{stopped}");
    assert!(child.wait().unwrap().success());
}

#[test]
fn an_agent_has_no_server_process_left_after_a_net_probe() {
    use std::io::{BufRead, Write};
    use std::time::{Duration, Instant};
    let mut agent = common::spawnable()
        .arg("agent")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = agent.id();
    let mut to = agent.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<serde_json::Value>();
    let stdout = agent.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if let Ok(v) = serde_json::from_str(&l) {
                let _ = tx.send(v);
            }
        }
    });
    let wait_for = |id: u64| loop {
        let v = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("agent answers");
        if v["id"] == id {
            break v;
        }
    };
    writeln!(
        to,
        r#"{{"id":1,"type":"hello","protocol_version":"1.0","tool_version":"test"}}"#
    )
    .unwrap();
    assert_eq!(wait_for(1)["type"], "hello");
    writeln!(
        to,
        r#"{{"id":2,"type":"run_probe","name":"net-rtt","params":{{"proto":"tcp","duration":"1"}}}}"#
    )
    .unwrap();
    // While the probe runs, its server is a child of the agent, in the agent's cgroup.
    let t0 = Instant::now();
    let server = loop {
        if let Some(c) = children_of(pid)
            .into_iter()
            .find(|&c| cmdline(c).contains("serve tcp-echo"))
        {
            break c;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no server process");
        std::thread::sleep(Duration::from_millis(5));
    };
    let cgroup = |p: u32| std::fs::read_to_string(format!("/proc/{p}/cgroup")).unwrap();
    assert_eq!(cgroup(server), cgroup(pid));
    let r = wait_for(2);
    assert_eq!(r["type"], "probe_result", "{r}");
    // Answered means finished: the server was stopped and reaped before the answer.
    assert_eq!(children_of(pid), Vec::<u32>::new());
    writeln!(to, r#"{{"id":3,"type":"bye"}}"#).unwrap();
    wait_for(3);
    drop(to);
    assert!(agent.wait().unwrap().success());
}

/// `presets` said the null preset takes about 1.5 minutes while it took 4m07s, and the quick
/// one "about 3 minutes" while its 5-minute budget ended it: each preset now states its
/// budget, read from the scenario the run obeys, beside the measured range.
#[test]
fn presets_state_each_budget_from_the_scenario() {
    let out = isobench().arg("presets").output().unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let block = |name: &str| -> String {
        stdout
            .split('\n')
            .skip_while(|l| !l.starts_with(&format!("{name} ")))
            .take_while(|l| l.starts_with(name) || l.starts_with(' '))
            .collect::<Vec<_>>()
            .join("\n")
    };
    for (name, budget) in [("quick", "5m"), ("null", "5m"), ("standard", "14m")] {
        let b = block(name);
        assert!(
            b.contains(&format!(
                "budget: no round starts that would end after {budget}"
            )),
            "{name}: {b}"
        );
        assert!(b.contains("takes: "), "{name}: {b}");
    }
    assert!(
        !block("null").contains("about 1.5 minutes"),
        "{}",
        block("null")
    );
}

/// `-q` silences the messages of the default level, `-vv` shows the debug lines, and
/// `RUST_LOG` wins over both (docs/cli.md, "Messages on stderr").
#[test]
fn quiet_verbose_and_rust_log_choose_the_messages_on_stderr() {
    let debug_line = "isobench: debug: probes start their own servers from ";
    let stderr = |flags: &[&str], rust_log: Option<&str>| {
        let mut c = isobench();
        c.args(flags).arg("presets");
        if let Some(v) = rust_log {
            c.env("RUST_LOG", v);
        }
        let out = c.output().unwrap();
        assert_eq!(code(&out), 0, "{}", text(&out.stderr));
        text(&out.stderr)
    };
    assert_eq!(stderr(&[], None), "");
    assert_eq!(stderr(&["-q"], None), "");
    assert!(stderr(&["-vv"], None).contains(debug_line));
    assert!(!stderr(&["-v"], None).contains(debug_line));
    assert!(stderr(&["-q"], Some("debug")).contains(debug_line));
    assert_eq!(stderr(&["-vv"], Some("error")), "");
}
