//! Every line the agent protocol reads is bounded, on both ends (docs/agent-protocol.md,
//! docs/security.md): the reader keeps at most the limit of a line in memory however long the
//! line is, the agent answers an oversized line with `bad_request` (and closes the
//! connection before `hello` when it has a token: wire_format.rs), and the controller closes
//! a session whose agent sends one.

use std::io::{self, BufReader, Read};
use std::time::Duration;

use isobench_agent::wire::{read_line, Line};
use isobench_agent::{AgentClient, MAX_LINE_BYTES};

/// `len` bytes of `x`, then a newline, then `rest`, made up as they are read (a line of
/// gigabytes costs no memory here).
struct Endless {
    left: u64,
    rest: io::Cursor<Vec<u8>>,
}

impl Endless {
    fn new(len: u64, rest: &[u8]) -> Endless {
        let mut r = b"\n".to_vec();
        r.extend_from_slice(rest);
        Endless {
            left: len,
            rest: io::Cursor::new(r),
        }
    }
}

impl Read for Endless {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            return self.rest.read(out);
        }
        let n = out.len().min(self.left as usize);
        out[..n].fill(b'x');
        self.left -= n as u64;
        Ok(n)
    }
}

#[test]
fn an_oversized_line_is_skipped_holding_at_most_the_limit_in_memory() {
    let max = 1 << 20;
    let len: u64 = 256 << 20;
    let mut r = BufReader::with_capacity(64 << 10, Endless::new(len, b"{\"id\":1}\n"));
    let mut buf = Vec::new();
    assert_eq!(
        read_line(&mut r, &mut buf, max).unwrap(),
        Line::TooLong(len as usize)
    );
    // The buffer grew to the limit at most (a Vec doubles: twice the limit bounds it),
    // never toward the 256 MiB of the line.
    assert!(
        buf.capacity() <= 2 * max,
        "held {} bytes for a limit of {max}",
        buf.capacity()
    );
    // The next line is read whole: the oversized one ended at its newline.
    assert_eq!(read_line(&mut r, &mut buf, max).unwrap(), Line::Line);
    assert_eq!(buf, b"{\"id\":1}");
    assert_eq!(read_line(&mut r, &mut buf, max).unwrap(), Line::Eof);
}

#[test]
fn a_line_of_exactly_the_limit_is_read_and_one_more_byte_is_not() {
    for (len, fits) in [(MAX_LINE_BYTES, true), (MAX_LINE_BYTES + 1, false)] {
        let mut r = BufReader::new(Endless::new(len as u64, b""));
        let mut buf = Vec::new();
        let got = read_line(&mut r, &mut buf, MAX_LINE_BYTES).unwrap();
        if fits {
            assert_eq!(got, Line::Line);
            assert_eq!(buf.len(), MAX_LINE_BYTES);
        } else {
            assert_eq!(got, Line::TooLong(len));
            assert!(buf.capacity() <= 2 * MAX_LINE_BYTES);
        }
    }
}

#[test]
fn the_controller_closes_the_session_of_an_agent_that_sends_an_oversized_line() {
    let agent = Endless::new(MAX_LINE_BYTES as u64 + 1, b"{\"type\":\"pong\"}\n");
    let c = AgentClient::new("big-talker", agent, io::sink()).with_timeout(Duration::from_secs(30));
    let mut reason = None;
    for _ in 0..3000 {
        reason = c.closed_reason();
        if reason.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let reason = reason.expect("the session was closed");
    assert!(reason.contains("over the limit"), "{reason}");
    // Nothing more is read from it: a request fails at once, naming the agent.
    let e = c.ping().unwrap_err().to_string();
    assert!(e.contains("big-talker"), "{e}");
}
