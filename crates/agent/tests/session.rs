//! A controller and an agent joined in-process: the request/response behaviour of a session.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::Duration;

use common::*;
use isobench_agent::{
    AgentConfig, AgentError, Caps, ErrorCode, Params, ProbeOpts, ProtocolVersion, SessionEnd,
    StressOpts, PROTOCOL_VERSION,
};

fn remote_code(e: &AgentError) -> ErrorCode {
    e.code()
        .cloned()
        .unwrap_or_else(|| panic!("expected an error answered by the agent, got {e}"))
}

#[test]
fn hello_negotiates_and_describes_the_agent() {
    let p = pair_with(AgentConfig::default().with_catalog(test_catalog()));
    let h = p.client.hello().unwrap();
    assert_eq!(h.protocol_version, PROTOCOL_VERSION);
    assert_eq!(p.client.negotiated_version(), Some(PROTOCOL_VERSION));
    assert_eq!(h.tool_version, env!("CARGO_PKG_VERSION"));
    assert_eq!(h.schema_version, isobench_workloads::SCHEMA_VERSION);
    assert_eq!(h.pid, std::process::id());
    assert!(!h.env.cpus.is_empty());
    assert!(h.env.mem_usable > 0);
    assert!(h.host.cores >= 1);
    assert!(h.probes.iter().any(|n| n == "syscall"));
    assert!(h.probes.iter().any(|n| n == "wait"));
    assert!(h.stressors.iter().any(|n| n == "spin"));
    assert!(h.services.iter().any(|n| n == "tcp-echo"));
    p.client.bye().unwrap();
    assert_eq!(p.agent.join().unwrap(), SessionEnd::Bye);
}

#[test]
fn a_newer_minor_negotiates_down() {
    let newer = ProtocolVersion {
        major: PROTOCOL_VERSION.major,
        minor: PROTOCOL_VERSION.minor + 3,
    };
    let p = pair_with(AgentConfig::default());
    let c = p.client.with_protocol_version(newer);
    let h = c.hello().unwrap();
    assert_eq!(h.protocol_version, PROTOCOL_VERSION);
    assert_eq!(h.agent_protocol_version, PROTOCOL_VERSION);
    assert_eq!(c.negotiated_version(), Some(PROTOCOL_VERSION));
}

#[test]
fn another_major_is_refused_by_the_agent() {
    let p = pair_with(AgentConfig::default());
    let other = ProtocolVersion {
        major: PROTOCOL_VERSION.major + 1,
        minor: 0,
    };
    let c = p.client.with_protocol_version(other);
    let e = c.hello().unwrap_err();
    match &e {
        AgentError::VersionMismatch {
            agent,
            ours,
            theirs,
            ..
        } => {
            assert_eq!(agent, "tenant-a");
            assert_eq!(*ours, other);
            assert_eq!(theirs, &PROTOCOL_VERSION.to_string());
        }
        e => panic!("expected a version mismatch, got {e}"),
    }
    assert!(e.to_string().contains("major versions must match"), "{e}");
    match p.agent.join().unwrap() {
        SessionEnd::Refused(why) => assert!(why.contains("version"), "{why}"),
        end => panic!("the agent should refuse the session, ended {end:?}"),
    }
}

#[test]
fn an_agent_of_another_major_is_refused_by_the_client() {
    let config = AgentConfig {
        protocol_version: ProtocolVersion {
            major: PROTOCOL_VERSION.major + 1,
            minor: 2,
        },
        ..AgentConfig::default()
    };
    let p = pair_with(config);
    let e = p.client.hello().unwrap_err();
    assert!(
        matches!(e, AgentError::VersionMismatch { .. }),
        "expected a version mismatch, got {e}"
    );
}

#[test]
fn requests_before_hello_are_refused() {
    let p = pair_with(AgentConfig::default());
    let e = p.client.ping().unwrap_err();
    assert_eq!(remote_code(&e), ErrorCode::HelloRequired);
    // Without a token the session stays open: hello still works.
    p.client.hello().unwrap();
    p.client.ping().unwrap();
}

#[test]
fn syscall_probe_runs_through_the_agent() {
    let p = pair();
    let opts = ProbeOpts {
        budget: Some(Duration::from_millis(30)),
        ..ProbeOpts::default()
    };
    let r = p
        .client
        .run_probe("syscall", Params::new().set("path", "getppid"), &opts)
        .unwrap();
    assert_eq!(r.name, "syscall");
    assert_eq!(r.params.0["path"], serde_json::json!("getppid"));
    let m = r
        .metrics
        .iter()
        .find(|m| m.name == "getppid_ns")
        .expect("getppid_ns metric");
    assert_eq!(m.unit, "ns");
    assert!(m.value > 0.0 && m.value.is_finite(), "{m:?}");
    assert!(r.elapsed_s > 0.0);
    assert!(r.timer_overhead_ns >= 0.0);

    // The same probe with parameters given as a string map, every default filled in.
    let mut params = BTreeMap::new();
    params.insert("path".to_string(), "read".to_string());
    let r = p.client.run_probe("syscall", params, &opts).unwrap();
    assert!(r.metrics.iter().any(|m| m.name == "read_ns"));
}

#[test]
fn unknown_probe_gives_suggestions() {
    let p = pair();
    let e = p
        .client
        .run_probe("syscal", Params::new(), &ProbeOpts::default())
        .unwrap_err();
    assert_eq!(remote_code(&e), ErrorCode::UnknownWorkload);
    let AgentError::Remote { error, agent, .. } = &e else {
        unreachable!()
    };
    assert_eq!(agent, "tenant-a");
    assert_eq!(
        error.suggestions.first().map(String::as_str),
        Some("syscall")
    );
    assert!(error.message.contains("did you mean `syscall`"), "{e}");

    let e = p
        .client
        .start_stressor("s", "spinn", 10, Params::new(), &StressOpts::default())
        .unwrap_err();
    assert_eq!(remote_code(&e), ErrorCode::UnknownWorkload);
    let AgentError::Remote { error, .. } = &e else {
        unreachable!()
    };
    assert!(error.suggestions.iter().any(|s| s == "spin"), "{error:?}");
}

#[test]
fn a_stressor_name_given_to_run_probe_is_explained() {
    let p = pair();
    let e = p
        .client
        .run_probe("spin", Params::new(), &ProbeOpts::default())
        .unwrap_err();
    assert_eq!(remote_code(&e), ErrorCode::UnknownWorkload);
    assert!(e.to_string().contains("is a stressor"), "{e}");
}

#[test]
fn bad_parameter_names_range_and_default() {
    let p = pair();
    let e = p
        .client
        .run_probe(
            "syscall",
            Params::new().set("path", "mmap"),
            &ProbeOpts::default(),
        )
        .unwrap_err();
    assert_eq!(remote_code(&e), ErrorCode::BadParameter);
    let AgentError::Remote { error, .. } = &e else {
        unreachable!()
    };
    assert_eq!(error.param.as_deref(), Some("path"));
    assert_eq!(error.range.as_deref(), Some("all|getppid|read|write"));
    assert_eq!(error.default.as_deref(), Some("all"));

    // Out of range, with a number on the wire.
    let mut params = Params::new();
    params.0.insert("step".into(), serde_json::json!(5000));
    let e = p
        .client
        .start_stressor("s", "spin", 10, params, &StressOpts::default())
        .unwrap_err();
    let AgentError::Remote { error, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(error.code, ErrorCode::BadParameter);
    assert_eq!(error.range.as_deref(), Some("1..=1000"));
    assert_eq!(error.default.as_deref(), Some("1"));

    // Unknown parameter name, with a suggestion.
    let e = p
        .client
        .run_probe(
            "syscall",
            Params::new().set("pth", "read"),
            &ProbeOpts::default(),
        )
        .unwrap_err();
    let AgentError::Remote { error, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(error.code, ErrorCode::BadParameter);
    assert_eq!(error.suggestions, vec!["path".to_string()]);

    // A CPU the agent may not use.
    let e = p
        .client
        .run_probe(
            "syscall",
            Params::new(),
            &ProbeOpts {
                pin: Some(100_000),
                ..ProbeOpts::default()
            },
        )
        .unwrap_err();
    let AgentError::Remote { error, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(error.code, ErrorCode::BadParameter);
    assert_eq!(error.param.as_deref(), Some("pin"));
    let e = p
        .client
        .start_stressor(
            "s",
            "spin",
            10,
            Params::new(),
            &StressOpts {
                pin: Some(vec![100_000]),
                ..StressOpts::default()
            },
        )
        .unwrap_err();
    assert_eq!(remote_code(&e), ErrorCode::BadParameter);

    // Intensity above 100.
    let e = p
        .client
        .start_stressor("s", "spin", 101, Params::new(), &StressOpts::default())
        .unwrap_err();
    let AgentError::Remote { error, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(error.param.as_deref(), Some("intensity"));
}

#[test]
fn agent_answers_while_a_probe_runs_and_refuses_a_second_probe() {
    let p = pair();
    let client = &p.client;
    thread::scope(|s| {
        let running = s.spawn(|| {
            client.run_probe(
                "wait",
                Params::new().set("tag", "101"),
                &ProbeOpts::default(),
            )
        });
        assert!(eventually(|| wait_started(101)));
        let e = client
            .run_probe("syscall", Params::new(), &ProbeOpts::default())
            .unwrap_err();
        assert_eq!(remote_code(&e), ErrorCode::Busy);
        client.ping().expect("ping while a probe runs");
        assert!(client.cancel_probe().unwrap());
        let e = running.join().unwrap().unwrap_err();
        assert_eq!(remote_code(&e), ErrorCode::Cancelled);
    });
    // The slot is free again.
    assert!(!client.cancel_probe().unwrap());
    client
        .run_probe(
            "syscall",
            Params::new(),
            &ProbeOpts {
                budget: Some(Duration::from_millis(10)),
                ..ProbeOpts::default()
            },
        )
        .unwrap();
}

#[test]
fn a_deadline_gives_a_timeout_naming_the_agent_and_cancels_the_probe() {
    let p = pair();
    let opts = ProbeOpts {
        deadline: Some(Duration::from_millis(50)),
        ..ProbeOpts::default()
    };
    let e = p
        .client
        .run_probe("wait", Params::new(), &opts)
        .unwrap_err();
    assert!(matches!(e, AgentError::Timeout { .. }), "{e}");
    assert!(e.is_unresponsive());
    assert_eq!(e.agent(), "tenant-a");
    assert!(e.to_string().contains("tenant-a"), "{e}");
    // The client cancelled the probe on timeout, so the agent frees up.
    assert!(eventually(|| p
        .client
        .run_probe(
            "syscall",
            Params::new(),
            &ProbeOpts {
                budget: Some(Duration::from_millis(5)),
                ..ProbeOpts::default()
            }
        )
        .is_ok()));
}

#[test]
fn a_panicking_probe_is_an_internal_error_not_a_dead_agent() {
    let p = pair();
    let e = p
        .client
        .run_probe("panic", Params::new(), &ProbeOpts::default())
        .unwrap_err();
    assert_eq!(remote_code(&e), ErrorCode::Internal);
    assert!(e.to_string().contains("deliberate test panic"), "{e}");
    p.client.ping().unwrap();
}

#[test]
fn stressor_starts_streams_samples_and_stops_with_a_report() {
    let p = pair();
    let opts = StressOpts {
        sample_interval: Some(Duration::from_millis(5)),
        ..StressOpts::default()
    };
    let params = p
        .client
        .start_stressor("hog", "spin", 40, Params::new().set("step", "3"), &opts)
        .unwrap();
    assert_eq!(params.0["step"], serde_json::json!(3));

    let mut samples = Vec::new();
    while samples.len() < 3 {
        let s = p
            .client
            .next_sample(Duration::from_secs(30))
            .expect("a sample");
        samples.push(s);
    }
    for w in samples.windows(2) {
        assert_eq!(w[1].seq, w[0].seq + 1);
        assert!(w[1].ops >= w[0].ops);
        assert!(w[1].elapsed_s >= w[0].elapsed_s);
    }
    for s in &samples {
        assert_eq!(s.stressor_id, "hog");
        assert!(s.interval_s > 0.0);
        assert!(s.ops_per_sec >= 0.0);
        assert_eq!(s.ops % 3, 0);
    }
    assert!(eventually(|| p
        .client
        .next_sample(Duration::from_secs(1))
        .is_some_and(|s| s.ops > 0)));

    // The id is taken while it runs.
    let e = p
        .client
        .start_stressor("hog", "spin", 40, Params::new(), &opts)
        .unwrap_err();
    assert_eq!(remote_code(&e), ErrorCode::Busy);

    let report = p.client.stop_stressor("hog").unwrap();
    assert!(report.ops > 0);
    assert_eq!(report.notes, vec!["intensity=40".to_string()]);
    // The physical pressure crosses the wire unchanged.
    assert_eq!(
        report
            .pressure("bytes_per_sec")
            .map(|p| (p.unit.as_str(), p.value)),
        Some(("B/s", 1234.5))
    );
    // No sample of it follows the report.
    let after: Vec<_> = p.client.take_samples();
    let last_ops = after.last().map_or(0, |s| s.ops);
    assert!(last_ops <= report.ops);
    thread::sleep(Duration::from_millis(30));
    assert!(p.client.take_samples().is_empty());

    // Stopping again: not found.
    let e = p.client.stop_stressor("hog").unwrap_err();
    assert_eq!(remote_code(&e), ErrorCode::NotFound);
}

#[test]
fn a_stop_is_answered_while_the_stressor_is_still_stuck_in_its_run() {
    let p = pair();
    p.client
        .start_stressor("s", "stuck", 50, Params::new(), &StressOpts::default())
        .unwrap();
    assert!(eventually(|| p
        .client
        .next_sample(Duration::from_secs(1))
        .is_some_and(|s| s.ops > 0)));
    // The stressor never returns until released: the answer comes from the live counters.
    let report = p.client.stop_stressor("s").unwrap();
    assert!(report.ops > 0, "{report:?}");
    assert_eq!(
        report.bytes, 0,
        "bytes are not known before the stressor reports"
    );
    assert!(report.pressure.is_empty(), "{report:?}");
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.starts_with("stop_not_finished")),
        "{report:?}"
    );
    // The id is free again, and the session is still answering.
    p.client.ping().unwrap();
    STUCK_RELEASE.store(true, Ordering::SeqCst);
}

#[test]
fn sampling_can_be_turned_off() {
    let p = pair();
    let opts = StressOpts {
        sample_interval: Some(Duration::ZERO),
        ..StressOpts::default()
    };
    p.client
        .start_stressor("quiet", "spin", 10, Params::new(), &opts)
        .unwrap();
    thread::sleep(Duration::from_millis(50));
    p.client.stop_stressor("quiet").unwrap();
    assert!(p.client.take_samples().is_empty());
}

#[test]
fn a_failing_stressor_is_reported_as_an_exit_event_and_at_stop() {
    let p = pair();
    p.client
        .start_stressor("f", "fail", 50, Params::new(), &StressOpts::default())
        .unwrap();
    let mut exits = Vec::new();
    assert!(eventually(|| {
        exits.extend(p.client.take_exits());
        !exits.is_empty()
    }));
    assert_eq!(exits[0].stressor_id, "f");
    let err = exits[0].error.as_ref().expect("an error");
    assert_eq!(err.code, ErrorCode::WorkloadFailed);
    assert!(err.message.contains("out of test budget"), "{err:?}");
    let e = p.client.stop_stressor("f").unwrap_err();
    assert_eq!(remote_code(&e), ErrorCode::WorkloadFailed);
}

#[test]
fn aggressive_stressors_need_containment_or_caps() {
    let p = pair();
    let e = p
        .client
        .start_stressor("b", "bomb", 100, Params::new(), &StressOpts::default())
        .unwrap_err();
    assert_eq!(remote_code(&e), ErrorCode::Refused);
    assert!(e.to_string().contains("contained"), "{e}");

    let capped = StressOpts {
        caps: Caps {
            max_tasks: Some(7),
            max_bytes: None,
        },
        ..StressOpts::default()
    };
    p.client
        .start_stressor("b", "bomb", 100, Params::new(), &capped)
        .unwrap();
    let r = p.client.stop_stressor("b").unwrap();
    assert_eq!(r.workers, 7, "caps reach the stressor's context");

    let contained = StressOpts {
        contained: true,
        ..StressOpts::default()
    };
    p.client
        .start_stressor("b2", "bomb", 100, Params::new(), &contained)
        .unwrap();
    p.client.stop_stressor("b2").unwrap();
}

#[test]
fn bye_stops_running_stressors_and_reports_them() {
    let p = pair();
    p.client
        .start_stressor("x", "spin", 10, Params::new(), &StressOpts::default())
        .unwrap();
    p.client
        .start_stressor("y", "spin", 20, Params::new(), &StressOpts::default())
        .unwrap();
    let stopped = p.client.bye().unwrap();
    let ids: Vec<_> = stopped.iter().map(|s| s.stressor_id.as_str()).collect();
    assert_eq!(ids, ["x", "y"]);
    assert!(stopped
        .iter()
        .all(|s| s.report.is_some() && s.error.is_none()));
    assert_eq!(p.agent.join().unwrap(), SessionEnd::Bye);
}

#[test]
fn end_of_input_stops_stressors_and_ends_the_session() {
    let p = pair();
    SPIN_STOPPED.store(false, Ordering::SeqCst);
    p.client
        .start_stressor("z", "spin", 10, Params::new(), &StressOpts::default())
        .unwrap();
    drop(p.client);
    assert_eq!(p.agent.join().unwrap(), SessionEnd::Eof);
    assert!(SPIN_STOPPED.load(Ordering::SeqCst));
}

#[test]
fn a_dead_agent_is_reported_as_disconnected() {
    let p = pair();
    p.client.ping().unwrap();
    let Pair { client, agent } = p;
    // End the agent with a raw bye (the typed one consumes the client), then use the client.
    let stopped = client.request(&isobench_agent::Request::Bye {}, Duration::from_secs(30));
    assert!(stopped.is_ok());
    agent.join().unwrap();
    assert!(eventually(|| client.closed_reason().is_some()));
    let e = client.ping().unwrap_err();
    assert!(matches!(e, AgentError::Disconnected { .. }), "{e}");
    assert!(e.is_unresponsive());
}

#[test]
fn unknown_service_kind_gives_suggestions() {
    let p = pair();
    let e = p
        .client
        .start_service("svc", "tcp-ecko", "127.0.0.1:0", None)
        .unwrap_err();
    assert_eq!(remote_code(&e), ErrorCode::UnknownWorkload);
    let AgentError::Remote { error, .. } = &e else {
        unreachable!()
    };
    assert!(
        error.suggestions.iter().any(|s| s == "tcp-echo"),
        "{error:?}"
    );
}

#[test]
fn probe_result_carries_the_scheduler_and_interrupt_context_of_the_run() {
    let p = pair();
    // The first CPU this test may use, so the pin is valid under any affinity mask.
    let cpu = (0..1024)
        .find(|&c| {
            // SAFETY: an all-zero cpu_set_t is valid; sched_getaffinity only writes to it.
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            // SAFETY: valid pointer and size.
            let ok = unsafe {
                libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set)
            } == 0;
            // SAFETY: c < CPU_SETSIZE.
            ok && unsafe { libc::CPU_ISSET(c, &set) }
        })
        .unwrap();
    let opts = ProbeOpts {
        pin: Some(cpu),
        budget: Some(Duration::from_millis(50)),
        ..ProbeOpts::default()
    };
    let r = p
        .client
        .run_probe("syscall", Params::new().set("path", "getppid"), &opts)
        .unwrap();
    let c = r.context.expect("the agent fills the context");
    assert!(c.interval_s > 0.0, "{c:?}");
    assert!(c.run_s > 0.0, "the probe's thread ran: {c:?}");
    assert!(c.runq_wait_s >= 0.0);
    assert!(c.threads_ran >= 1);
    assert!(
        c.cpus_used.contains(&(cpu as u32)),
        "pinned to cpu{cpu}: {c:?}"
    );
    assert_eq!(c.pinned_cpu, Some(cpu as u32));
    assert!(c.softirq_s_on_pinned_cpu.is_some_and(|s| s >= 0.0));
    assert!(!c.softirq_s_per_cpu.is_empty());
    assert_eq!(c.softirq_s_per_cpu.len(), c.irq_s_per_cpu.len());
}
