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

/// Shortest token a TCP agent accepts, on every address (loopback included: any local user
/// and any web page the machine's browser opens can reach a loopback port).
pub const MIN_TOKEN_LEN: usize = 16;

/// Checks that `token` is long enough to be a secret: at least [`MIN_TOKEN_LEN`]
/// characters, not counting surrounding white space. The error says how long it is (never
/// what it is) and how to make a good one.
pub fn check_token_strength(token: &str) -> Result<(), String> {
    let n = token.trim().chars().count();
    if n == 0 {
        return Err(format!(
            "the token is empty: use at least {MIN_TOKEN_LEN} random characters, e.g. \
             `head -c 24 /dev/urandom | base64`"
        ));
    }
    if n < MIN_TOKEN_LEN {
        return Err(format!(
            "the token has {n} character(s), fewer than the {MIN_TOKEN_LEN} required: use a \
             random one, e.g. `head -c 24 /dev/urandom | base64`"
        ));
    }
    Ok(())
}

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
        assert!(check_token_strength(&a).is_ok());
        assert_ne!(a, b);
    }

    #[test]
    fn short_and_empty_tokens_are_weak() {
        assert!(check_token_strength("0123456789abcdef").is_ok());
        let e = check_token_strength("abcdef").unwrap_err();
        assert!(e.contains("6 character") && e.contains("16"), "{e}");
        assert!(!e.contains("abcdef"), "the token is not echoed: {e}");
        assert!(check_token_strength("   ").unwrap_err().contains("empty"));
        // White space around a token does not count.
        assert!(check_token_strength("  0123456789abcde  ").is_err());
    }
}
