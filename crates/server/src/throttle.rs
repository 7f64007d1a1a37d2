//! Slows down guessing the token. Each client address (an IPv6 address by its /64, which
//! one machine usually owns whole) has a count of wrong tokens; after
//! [`FREE_FAILURES`] of them, that address is refused (429, with `Retry-After`) for a wait
//! that doubles with each further wrong token, from [`FIRST_WAIT`] up to [`MAX_WAIT`]. While
//! it waits, even the right token is refused from that address: an answer that told a right
//! guess from a wrong one would let the guessing go on at full speed.
//!
//! Why this shape: a wrong token from one address never refuses another (an attacker cannot
//! lock the owner out from elsewhere), the wait is bounded (from a shared address, the owner
//! waits at most [`MAX_WAIT`] after the attacker's last wrong token), and an address that
//! has made no wrong guess for [`FORGET_AFTER`] starts over. At [`MAX_WAIT`] a single
//! address gets about 1,440 guesses a day against a 128-bit (or at least 16-character)
//! token. Requests that carry no token at all are not guesses and are not counted.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Wrong tokens an address may send before it has to wait (room for a browser tab that
/// still sends the cookie of an earlier token, and a few typos).
pub const FREE_FAILURES: u32 = 10;
/// The first wait, after [`FREE_FAILURES`] wrong tokens.
pub const FIRST_WAIT: Duration = Duration::from_secs(1);
/// The longest wait.
pub const MAX_WAIT: Duration = Duration::from_secs(60);
/// An address with no wrong token for this long starts over.
pub const FORGET_AFTER: Duration = Duration::from_secs(15 * 60);
/// Addresses remembered at most (the oldest is forgotten first), so a flood of addresses
/// cannot grow the table without bound.
pub const MAX_ADDRESSES: usize = 4096;

/// Where a request came from: its address (an IPv6 one cut to its /64), or `None` when the
/// server does not know (a request made in-process).
pub type Client = Option<IpAddr>;

/// The key of a client: IPv6 addresses by their /64.
fn key(client: Client) -> Client {
    client.map(|ip| match ip {
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_none() => {
            let s = v6.segments();
            IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        IpAddr::V6(v6) => IpAddr::V4(v6.to_ipv4_mapped().expect("checked")),
        v4 => v4,
    })
}

#[derive(Debug, Clone, Copy)]
struct Record {
    failures: u32,
    last: Instant,
    until: Option<Instant>,
}

/// The wrong tokens of each client address.
#[derive(Debug, Default)]
pub struct Throttle {
    clients: Mutex<HashMap<Client, Record>>,
}

impl Throttle {
    /// `Err(wait)` when `client` must wait before its token is looked at.
    pub fn check(&self, client: Client, now: Instant) -> Result<(), Duration> {
        let clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        match clients.get(&key(client)).and_then(|r| r.until) {
            Some(until) if until > now => Err(until - now),
            _ => Ok(()),
        }
    }

    /// Counts a wrong token from `client`; returns the wait it now has, if any.
    pub fn failed(&self, client: Client, now: Instant) -> Option<Duration> {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        let k = key(client);
        if !clients.contains_key(&k) && clients.len() >= MAX_ADDRESSES {
            forget_one(&mut clients, now);
        }
        let r = clients.entry(k).or_insert(Record {
            failures: 0,
            last: now,
            until: None,
        });
        if now.saturating_duration_since(r.last) >= FORGET_AFTER {
            r.failures = 0;
        }
        r.failures = r.failures.saturating_add(1);
        r.last = now;
        let over = r.failures.checked_sub(FREE_FAILURES)?;
        let wait = FIRST_WAIT
            .checked_mul(1u32 << over.min(16))
            .unwrap_or(MAX_WAIT)
            .min(MAX_WAIT);
        r.until = Some(now + wait);
        Some(wait)
    }
}

/// Makes room for one address: one forgotten already, else the one quiet the longest.
fn forget_one(clients: &mut HashMap<Client, Record>, now: Instant) {
    clients.retain(|_, r| now.saturating_duration_since(r.last) < FORGET_AFTER);
    if clients.len() >= MAX_ADDRESSES {
        if let Some(oldest) = clients.iter().min_by_key(|(_, r)| r.last).map(|(k, _)| *k) {
            clients.remove(&oldest);
        }
    }
}

/// `Retry-After` in whole seconds, rounded up (at least 1).
pub fn retry_after_secs(wait: Duration) -> u64 {
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Client {
        Some(s.parse().unwrap())
    }

    #[test]
    fn an_address_waits_after_five_wrong_tokens_longer_each_time_up_to_a_minute() {
        let t = Throttle::default();
        let now = Instant::now();
        let a = ip("192.0.2.7");
        for _ in 0..FREE_FAILURES - 1 {
            assert_eq!(t.failed(a, now), None);
            assert!(t.check(a, now).is_ok());
        }
        assert_eq!(t.failed(a, now), Some(FIRST_WAIT));
        assert_eq!(t.check(a, now), Err(FIRST_WAIT));
        // The wait ends on its own.
        assert!(t.check(a, now + FIRST_WAIT).is_ok());
        let mut waits = Vec::new();
        for i in 0..12 {
            let at = now + Duration::from_secs(i);
            waits.push(t.failed(a, at).unwrap());
        }
        assert_eq!(waits[0], FIRST_WAIT * 2);
        assert_eq!(waits[1], FIRST_WAIT * 4);
        assert!(waits.windows(2).all(|w| w[0] <= w[1]), "{waits:?}");
        assert_eq!(
            *waits.last().unwrap(),
            MAX_WAIT,
            "never longer than a minute"
        );
        // However many wrong tokens came, the address can try again after MAX_WAIT.
        let last = now + Duration::from_secs(11);
        assert!(t.check(a, last + MAX_WAIT).is_ok());
    }

    #[test]
    fn one_address_does_not_make_another_wait() {
        let t = Throttle::default();
        let now = Instant::now();
        for _ in 0..50 {
            t.failed(ip("198.51.100.1"), now);
        }
        assert!(t.check(ip("198.51.100.1"), now).is_err());
        assert!(t.check(ip("198.51.100.2"), now).is_ok());
        assert!(t.check(None, now).is_ok());
        // An IPv6 client is one /64: its neighbours in it share its record.
        for _ in 0..FREE_FAILURES {
            t.failed(ip("2001:db8:1:2::1"), now);
        }
        assert!(t.check(ip("2001:db8:1:2::ffff"), now).is_err());
        assert!(t.check(ip("2001:db8:1:3::1"), now).is_ok());
        // An IPv4 address written as IPv6 is the IPv4 address.
        assert!(t.check(ip("::ffff:198.51.100.1"), now).is_err());
    }

    #[test]
    fn a_quiet_address_starts_over_and_the_table_is_bounded() {
        let t = Throttle::default();
        let now = Instant::now();
        let a = ip("192.0.2.9");
        for _ in 0..FREE_FAILURES - 1 {
            t.failed(a, now);
        }
        assert_eq!(t.failed(a, now + FORGET_AFTER), None, "counted from zero");
        for i in 0..(MAX_ADDRESSES as u32 + 10) {
            t.failed(Some(IpAddr::V4(i.into())), now);
        }
        assert!(t.clients.lock().unwrap().len() <= MAX_ADDRESSES);
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(2)), 2);
        assert_eq!(retry_after_secs(Duration::from_millis(2500)), 3);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
    }
}
