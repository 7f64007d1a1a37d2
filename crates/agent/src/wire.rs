//! Framing: one JSON object per line, UTF-8, at most [`MAX_LINE_BYTES`] bytes.
//!
//! Requests and responses carry an `id`; it is written first so a person reading a trace sees
//! it at once (`{"id":3,"type":"ping"}`). The reader never holds more than one line in memory:
//! a line that is too long is skipped up to its newline and reported, so one bad message does
//! not end the session.

use std::io::{self, BufRead, Write};

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

pub use crate::protocol::MAX_LINE_BYTES;

/// What one read from the stream gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A complete line (newline removed) is in the buffer.
    Line,
    /// The line was longer than the limit; it was skipped. Carries its length.
    TooLong(usize),
    /// End of stream (a final unterminated line counts as a line first).
    Eof,
}

/// Reads one line into `buf` (cleared first), holding at most `max` bytes of it.
pub fn read_line<R: BufRead + ?Sized>(
    r: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> io::Result<Line> {
    buf.clear();
    let mut total = 0usize;
    let mut any = false;
    loop {
        let chunk = match r.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(if !any {
                Line::Eof
            } else if total > max {
                Line::TooLong(total)
            } else {
                Line::Line
            });
        }
        any = true;
        let (part, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..i], Some(i + 1)),
            None => (chunk, None),
        };
        if total + part.len() <= max {
            buf.extend_from_slice(part);
        } else {
            buf.clear();
        }
        total += part.len();
        let used = done.unwrap_or(part.len());
        r.consume(used);
        if done.is_some() {
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return Ok(if total > max {
                Line::TooLong(total)
            } else {
                Line::Line
            });
        }
    }
}

/// Encodes one message as a line: `{"id":N,` + the body's fields, newline-terminated. The
/// body must serialize to a JSON object (every message type does).
pub fn encode<T: Serialize>(id: Option<u64>, body: &T) -> Vec<u8> {
    let mut out = serde_json::to_vec(body).expect("protocol messages always serialize");
    debug_assert!(out.first() == Some(&b'{'));
    if let Some(id) = id {
        let prefix = if out.len() > 2 {
            format!("{{\"id\":{id},")
        } else {
            format!("{{\"id\":{id}")
        };
        out.splice(0..1, prefix.into_bytes());
    }
    out.push(b'\n');
    out
}

/// Writes one encoded message and flushes.
pub fn write_message<W: Write + ?Sized, T: Serialize>(
    w: &mut W,
    id: Option<u64>,
    body: &T,
) -> io::Result<()> {
    w.write_all(&encode(id, body))?;
    w.flush()
}

/// A decoded line: the `id` (when present and a non-negative integer) and the body, or why it
/// did not decode.
pub struct Decoded<T> {
    /// The request id, when the line carried one.
    pub id: Option<u64>,
    /// The `type` field, when the line carried one.
    pub kind: Option<String>,
    /// The message, or the reason it is not a valid one.
    pub body: Result<T, String>,
}

/// Decodes one line: a JSON object with an optional `id` and a `type`.
pub fn decode<T: DeserializeOwned>(line: &[u8]) -> Decoded<T> {
    let mut value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            return Decoded {
                id: None,
                kind: None,
                body: Err(format!("not a JSON object: {e}")),
            }
        }
    };
    let Some(obj) = value.as_object_mut() else {
        return Decoded {
            id: None,
            kind: None,
            body: Err("not a JSON object".into()),
        };
    };
    let id = obj.remove("id").and_then(|v| v.as_u64());
    let kind = obj.get("type").and_then(|v| v.as_str()).map(String::from);
    let body = if kind.is_none() {
        Err("the message has no `type` field".into())
    } else {
        serde_json::from_value(value).map_err(|e| e.to_string())
    };
    Decoded { id, kind, body }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Request;

    #[test]
    fn id_comes_first() {
        let line = encode(Some(7), &Request::Ping {});
        assert_eq!(line, b"{\"id\":7,\"type\":\"ping\"}\n");
        let line = encode(None, &Request::Ping {});
        assert_eq!(line, b"{\"type\":\"ping\"}\n");
        let d = decode::<Request>(&line[..line.len() - 1]);
        assert_eq!(d.body.unwrap(), Request::Ping {});
    }

    #[test]
    fn long_lines_are_skipped_not_fatal() {
        let mut input = Vec::new();
        input.extend(std::iter::repeat_n(b'x', 100));
        input.extend_from_slice(b"\nshort\r\nlast");
        let mut r = io::BufReader::with_capacity(8, &input[..]);
        let mut buf = Vec::new();
        assert_eq!(read_line(&mut r, &mut buf, 10).unwrap(), Line::TooLong(100));
        assert_eq!(read_line(&mut r, &mut buf, 10).unwrap(), Line::Line);
        assert_eq!(buf, b"short");
        assert_eq!(read_line(&mut r, &mut buf, 10).unwrap(), Line::Line);
        assert_eq!(buf, b"last");
        assert_eq!(read_line(&mut r, &mut buf, 10).unwrap(), Line::Eof);
    }

    #[test]
    fn decode_reports_missing_type_and_keeps_id() {
        let d = decode::<Request>(br#"{"id":4,"name":"x"}"#);
        assert_eq!(d.id, Some(4));
        assert!(d.body.unwrap_err().contains("type"));
        let d = decode::<Request>(br#"{"id":5,"type":"dance"}"#);
        assert_eq!(d.kind.as_deref(), Some("dance"));
        assert!(d.body.is_err());
        let d = decode::<Request>(b"[1,2]");
        assert!(d.body.is_err());
    }
}
