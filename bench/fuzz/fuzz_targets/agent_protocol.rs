//! The agent protocol, read from both ends, from bytes as they arrive on the wire.
//!
//! - Framing: `wire::read_line` over the bytes, at the real limits and at a tiny one with a
//!   tiny buffer (so lines straddle buffer refills and overflow the limit).
//! - Each complete line decoded as the agent decodes a request and as the controller decodes
//!   an answer or event (`wire::decode`). What decodes must encode again (`wire::encode`
//!   expects every message to serialize) and read back as a valid message.
//! - The agent's own loop (`serve_connection`) on the bytes as its whole input, with an
//!   empty catalogue (so nothing runs), once open and once guarded by a token.
//!
//! The controller's reader (`AgentClient`'s reader thread) is exactly `read_line` at
//! `MAX_LINE_BYTES` then `decode::<Reply>`, the first pass below; the client itself is left
//! out, as its thread outlives each input and would be reported as a leak.
#![no_main]

use std::io::{self, BufReader, Cursor};
use std::time::Duration;

use isobench_agent::wire::{self, Line};
use isobench_agent::{
    serve_connection, AgentConfig, Catalog, Reply, Request, MAX_HELLO_LINE_BYTES, MAX_LINE_BYTES,
};
use libfuzzer_sys::fuzz_target;

/// Reads every line of `data` with limit `max` through a buffer of `capacity` bytes, and
/// hands each complete one to `each`.
fn frame(data: &[u8], capacity: usize, max: usize, mut each: impl FnMut(&[u8])) {
    let mut r = BufReader::with_capacity(capacity, Cursor::new(data));
    let mut buf = Vec::new();
    // Each read consumes at least one byte or reports the end: a bound, so a reader that
    // stops making progress shows up as a failure, not as a hang.
    for _ in 0..=data.len() + 1 {
        match wire::read_line(&mut r, &mut buf, max).expect("reading from memory cannot fail") {
            Line::Eof => return,
            Line::TooLong(n) => assert!(n > max, "a line of {n} bytes reported over {max}"),
            Line::Line => {
                assert!(
                    buf.len() <= max,
                    "a line of {} bytes kept over {max}",
                    buf.len()
                );
                assert!(!buf.contains(&b'\n'), "a line kept its newline");
                each(&buf);
            }
        }
    }
    panic!("read_line did not reach the end of {} bytes", data.len());
}

/// Decodes `line` as a `T`; what decodes must encode and decode again to the same type.
fn decode_and_reencode<T>(line: &[u8])
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let d = wire::decode::<T>(line);
    if let Ok(msg) = d.body {
        let again = wire::encode(d.id, &msg);
        let back = wire::decode::<T>(&again[..again.len() - 1]);
        assert_eq!(back.id, d.id, "the id changed on the way back");
        if let Err(e) = back.body {
            panic!(
                "a decoded message does not read back once encoded: {e}\n{}",
                String::from_utf8_lossy(&again)
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    frame(data, 64 * 1024, MAX_LINE_BYTES, |line| {
        decode_and_reencode::<Request>(line);
        decode_and_reencode::<Reply>(line);
    });
    frame(data, 7, 16, |_| {});
    frame(data, 64 * 1024, MAX_HELLO_LINE_BYTES, |_| {});

    // The agent: answers go nowhere, nothing can run.
    let mut open = AgentConfig::default().with_catalog(Catalog::empty());
    open.stop_timeout = Duration::from_millis(100);
    let guarded = open.clone().with_token("0123456789abcdef");
    for config in [&open, &guarded] {
        let _ = serve_connection(Cursor::new(data.to_vec()), io::sink(), config);
    }
});
