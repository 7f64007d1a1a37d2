//! The protocol as bytes: raw JSON lines written to an agent and the lines it answers, as
//! `docs/agent-protocol.md` shows them.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use isobench_agent::{
    serve_connection, AgentConfig, SessionEnd, MAX_HELLO_LINE_BYTES, MAX_LINE_BYTES,
};
use serde_json::{json, Value};

struct Raw {
    w: UnixStream,
    r: BufReader<UnixStream>,
    agent: JoinHandle<SessionEnd>,
}

impl Raw {
    fn new(config: AgentConfig) -> Raw {
        let (a, b) = UnixStream::pair().unwrap();
        b.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let agent = thread::spawn(move || {
            let end = serve_connection(a.try_clone().unwrap(), a.try_clone().unwrap(), &config);
            let _ = a.shutdown(std::net::Shutdown::Both);
            end
        });
        Raw {
            w: b.try_clone().unwrap(),
            r: BufReader::new(b),
            agent,
        }
    }

    fn send(&mut self, line: &str) {
        self.w.write_all(line.as_bytes()).unwrap();
        self.w.write_all(b"\n").unwrap();
    }

    fn recv_line(&mut self) -> Option<String> {
        let mut s = String::new();
        match self.r.read_line(&mut s) {
            Ok(0) => None,
            Ok(_) => Some(s),
            Err(e) => panic!("reading the agent: {e}"),
        }
    }

    fn recv(&mut self) -> Value {
        let line = self.recv_line().expect("a line from the agent");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line:?}: {e}"))
    }

    fn hello(&mut self) -> Value {
        self.send(r#"{"id":1,"type":"hello","protocol_version":"1.0","tool_version":"0.1.0"}"#);
        self.recv()
    }
}

#[test]
fn documented_session_round_trip() {
    let mut a = Raw::new(AgentConfig::default().with_catalog(common::test_catalog()));
    let hello = a.hello();
    assert_eq!(hello["id"], 1);
    assert_eq!(hello["type"], "hello");
    assert_eq!(hello["protocol_version"], "1.0");
    assert!(hello["env"]["cpus"].is_array());
    assert!(hello["host"]["kernel"].is_string());

    a.send(r#"{"id":2,"type":"ping"}"#);
    let line = a.recv_line().unwrap();
    assert_eq!(line, "{\"id\":2,\"type\":\"pong\"}\n");

    a.send(
        r#"{"id":3,"type":"run_probe","name":"syscall","params":{"path":"getppid"},"budget_ms":20}"#,
    );
    let r = a.recv();
    assert_eq!(r["id"], 3);
    assert_eq!(r["type"], "probe_result");
    assert_eq!(r["metrics"][0]["name"], "getppid_ns");
    assert_eq!(r["metrics"][0]["unit"], "ns");
    assert_eq!(r["metrics"][0]["direction"], "lower");
    assert_eq!(r["params"]["path"], "getppid");

    a.send(r#"{"id":4,"type":"start_stressor","stressor_id":"hog","name":"spin","intensity":50,"sample_ms":5}"#);
    let r = a.recv();
    assert_eq!(
        r,
        json!({"id":4,"type":"stressor_started","stressor_id":"hog","params":{"step":1}})
    );
    let s = a.recv();
    assert_eq!(s["type"], "sample");
    assert!(s.get("id").is_none(), "events carry no id: {s}");
    assert_eq!(s["stressor_id"], "hog");
    assert_eq!(s["seq"], 0);
    for k in ["elapsed_s", "ops", "interval_s", "ops_per_sec", "cpu_s"] {
        assert!(s[k].is_number(), "{k} in {s}");
    }

    a.send(r#"{"id":5,"type":"stop_stressor","stressor_id":"hog"}"#);
    let r = loop {
        let v = a.recv();
        if v["type"] != "sample" {
            break v;
        }
    };
    assert_eq!(r["id"], 5);
    assert_eq!(r["type"], "stressor_stopped");
    assert!(r["report"]["ops"].is_u64());
    assert_eq!(
        r["report"]["pressure"],
        json!([{"name": "bytes_per_sec", "unit": "B/s", "value": 1234.5}])
    );

    a.send(r#"{"id":6,"type":"bye"}"#);
    assert_eq!(a.recv(), json!({"id":6,"type":"bye","stopped":[]}));
    assert_eq!(a.recv_line(), None, "the agent closes after bye");
    assert_eq!(a.agent.join().unwrap(), SessionEnd::Bye);
}

#[test]
fn malformed_lines_are_answered_and_the_session_goes_on() {
    let mut a = Raw::new(AgentConfig::default());
    a.hello();

    a.send("this is not json");
    let e = a.recv();
    assert_eq!(e["type"], "error");
    assert_eq!(e["code"], "bad_request");
    assert!(e.get("id").is_none());

    a.send(r#"{"id":7,"type":"dance"}"#);
    let e = a.recv();
    assert_eq!(e["id"], 7);
    assert_eq!(e["code"], "unknown_request");

    a.send(r#"{"type":"ping"}"#);
    let e = a.recv();
    assert_eq!(e["code"], "bad_request");
    assert!(e["message"].as_str().unwrap().contains("id"));

    a.send(r#"{"id":8,"type":"run_probe"}"#);
    let e = a.recv();
    assert_eq!(e["id"], 8);
    assert_eq!(e["code"], "bad_request");
    assert!(e["message"].as_str().unwrap().contains("name"), "{e}");

    a.send(r#"{"id":9,"type":"start_stressor","stressor_id":"s","name":"cpu","intensity":300}"#);
    let e = a.recv();
    assert_eq!(e["id"], 9);
    assert_eq!(e["code"], "bad_request");

    let mut long = String::from(r#"{"id":10,"type":"ping","pad":""#);
    long.push_str(&"x".repeat(MAX_LINE_BYTES));
    long.push_str("\"}");
    a.send(&long);
    let e = a.recv();
    assert_eq!(e["code"], "bad_request");
    assert!(
        e["message"].as_str().unwrap().contains("longer than"),
        "{e}"
    );

    // Unknown fields are ignored (a newer minor may add them); blank lines too.
    a.send("");
    a.send(r#"{"id":11,"type":"ping","from_the_future":true}"#);
    assert_eq!(a.recv(), json!({"id":11,"type":"pong"}));

    a.send(r#"{"id":12,"type":"hello","protocol_version":"1.0","tool_version":"x"}"#);
    assert_eq!(a.recv()["code"], "bad_request");
}

#[test]
fn a_token_protected_agent_closes_on_anything_but_a_good_hello() {
    let token = "0123456789abcdef0123";
    // Not hello first.
    let mut a = Raw::new(AgentConfig::default().with_token(token));
    a.send(r#"{"id":1,"type":"ping"}"#);
    assert_eq!(a.recv()["code"], "hello_required");
    assert_eq!(a.recv_line(), None);
    assert!(matches!(a.agent.join().unwrap(), SessionEnd::Refused(_)));

    // No token.
    let mut a = Raw::new(AgentConfig::default().with_token(token));
    let e = a.hello();
    assert_eq!(e["code"], "unauthorized");
    assert!(e["message"].as_str().unwrap().contains("missing"));
    assert_eq!(a.recv_line(), None);

    // Wrong token; the message does not echo it.
    let mut a = Raw::new(AgentConfig::default().with_token(token));
    a.send(r#"{"id":1,"type":"hello","protocol_version":"1.0","tool_version":"0.1.0","token":"guess-guess-guess"}"#);
    let line = a.recv_line().unwrap();
    assert!(
        line.contains("unauthorized") && !line.contains("guess-guess"),
        "{line}"
    );
    assert_eq!(a.recv_line(), None);

    // An oversized first line (the limit before hello is 64 KiB).
    let mut a = Raw::new(AgentConfig::default().with_token(token));
    a.send(&"x".repeat(MAX_HELLO_LINE_BYTES + 1));
    let e = a.recv();
    assert_eq!(e["code"], "bad_request");
    assert_eq!(a.recv_line(), None);

    // Right token.
    let mut a = Raw::new(AgentConfig::default().with_token(token));
    a.send(&format!(
        r#"{{"id":1,"type":"hello","protocol_version":"1.0","tool_version":"0.1.0","token":"{token}"}}"#
    ));
    assert_eq!(a.recv()["type"], "hello");
    a.send(r#"{"id":2,"type":"ping"}"#);
    assert_eq!(a.recv()["type"], "pong");
}

#[test]
fn version_mismatch_is_answered_with_the_agent_version_then_closed() {
    let mut a = Raw::new(AgentConfig::default());
    a.send(r#"{"id":1,"type":"hello","protocol_version":"2.0","tool_version":"9.0.0"}"#);
    let e = a.recv();
    assert_eq!(e["code"], "version_mismatch");
    assert_eq!(e["protocol_version"], "1.1");
    assert_eq!(a.recv_line(), None);
}

#[test]
fn probe_context_is_optional_on_the_wire() {
    use isobench_agent::{ProbeContext, ProbeResult};
    // A result from an agent that predates the context still reads.
    let old = r#"{"name":"syscall","metrics":[],"params":{"path":"getppid"},"elapsed_s":0.2,"timer_overhead_ns":22.0}"#;
    let r: ProbeResult = serde_json::from_str(old).unwrap();
    assert_eq!(r.context, None);
    // And without a context none is written.
    let back = serde_json::to_value(&r).unwrap();
    assert!(back.get("context").is_none(), "{back}");

    let ctx = ProbeContext {
        interval_s: 0.5,
        run_s: 0.25,
        runq_wait_s: 0.125,
        timeslices: 40,
        voluntary_switches: 12,
        involuntary_switches: 3,
        threads_ran: 1,
        cpus_used: vec![1],
        pinned_cpu: Some(1),
        softirq_s_on_pinned_cpu: Some(0.25),
        softirq_s_on_cpus_used: 0.25,
        softirq_s_per_cpu: vec![0.0, 0.25],
        irq_s_per_cpu: vec![0.0, 0.0],
        steal_s_per_cpu: vec![0.0, 0.0],
    };
    let with = ProbeResult {
        context: Some(ctx),
        ..r
    };
    let text = serde_json::to_string(&with).unwrap();
    assert!(text.contains(r#""runq_wait_s":0.125"#), "{text}");
    assert_eq!(serde_json::from_str::<ProbeResult>(&text).unwrap(), with);
}
