//! Shared-secret tokens for transports that can be reached from other hosts.

use std::io::Read;

/// Compares two secrets in time that depends only on the expected secret's length, so a
/// remote peer cannot learn a prefix of the token by timing wrong guesses.
pub fn tokens_match(expected: &[u8], given: &[u8]) -> bool {
    let mut diff = (expected.len() ^ given.len()) as u64;
    for (i, &e) in expected.iter().enumerate() {
        let g = given.get(i).copied().unwrap_or(!e);
        diff |= u64::from(e ^ g);
    }
    std::hint::black_box(diff) == 0
}

/// A fresh random token: 32 hex digits (128 bits) from the kernel's random source.
pub fn generate_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Shortest token accepted on a non-loopback address.
pub const MIN_REMOTE_TOKEN_LEN: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_only_equal_tokens() {
        assert!(tokens_match(b"abcdef", b"abcdef"));
        assert!(!tokens_match(b"abcdef", b"abcdeg"));
        assert!(!tokens_match(b"abcdef", b"abcde"));
        assert!(!tokens_match(b"abcdef", b"abcdefg"));
        assert!(!tokens_match(b"abc", b""));
    }

    #[test]
    fn generated_tokens_are_long_and_differ() {
        let a = generate_token().unwrap();
        let b = generate_token().unwrap();
        assert_eq!(a.len(), 32);
        assert!(a.len() >= MIN_REMOTE_TOKEN_LEN);
        assert_ne!(a, b);
    }
}
