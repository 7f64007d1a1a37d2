//! [`Timestamp`]: a UTC instant with millisecond resolution, stored as RFC 3339 text so the
//! database stays readable with any SQLite client.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jiff::tz::Offset;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A UTC instant, milliseconds since the Unix epoch. Written as
/// `YYYY-MM-DDTHH:MM:SS.mmmZ`, which sorts as text in time order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    unix_ms: i64,
}

impl Timestamp {
    /// The current wall-clock time.
    pub fn now() -> Self {
        Self::from_system_time(SystemTime::now())
    }

    /// From a `SystemTime` (truncated to milliseconds).
    pub fn from_system_time(t: SystemTime) -> Self {
        let unix_ms = match t.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_millis() as i64,
            Err(e) => -(e.duration().as_millis() as i64),
        };
        Timestamp { unix_ms }
    }

    /// From milliseconds since the Unix epoch.
    pub fn from_unix_millis(unix_ms: i64) -> Self {
        Timestamp { unix_ms }
    }

    /// Milliseconds since the Unix epoch.
    pub fn unix_millis(self) -> i64 {
        self.unix_ms
    }

    /// As a `SystemTime`.
    pub fn to_system_time(self) -> SystemTime {
        if self.unix_ms >= 0 {
            UNIX_EPOCH + Duration::from_millis(self.unix_ms as u64)
        } else {
            UNIX_EPOCH - Duration::from_millis(self.unix_ms.unsigned_abs())
        }
    }

    /// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    pub fn to_rfc3339(self) -> String {
        let c = self.civil();
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            c.year(),
            c.month(),
            c.day(),
            c.hour(),
            c.minute(),
            c.second(),
            c.millisecond()
        )
    }

    /// `YYYYMMDD-HHMMSS`, for run ids.
    pub(crate) fn compact(self) -> String {
        let c = self.civil();
        format!(
            "{:04}{:02}{:02}-{:02}{:02}{:02}",
            c.year(),
            c.month(),
            c.day(),
            c.hour(),
            c.minute(),
            c.second()
        )
    }

    /// Parses the UTC form this type writes: `YYYY-MM-DDTHH:MM:SS[.fff]Z` (any number of
    /// fraction digits, truncated to milliseconds).
    pub fn parse_rfc3339(text: &str) -> Result<Self, String> {
        let bad = || format!("{text:?} is not a UTC timestamp like 2026-01-31T12:00:00.000Z");
        // jiff reads more than this type writes (offsets, a space for `T`, a date alone):
        // only the UTC form with a `T` is a stored timestamp.
        let civil = text
            .strip_suffix('Z')
            .filter(|c| c.contains('T'))
            .ok_or_else(bad)?;
        let dt: jiff::civil::DateTime = civil.parse().map_err(|_| bad())?;
        let t = Offset::UTC.to_timestamp(dt).map_err(|_| bad())?;
        Ok(Timestamp {
            unix_ms: t.as_millisecond(),
        })
    }

    /// The civil UTC date and time, clamped to the years jiff spans (-9999 to 9999).
    fn civil(self) -> jiff::civil::DateTime {
        let t = jiff::Timestamp::from_millisecond(self.unix_ms).unwrap_or(if self.unix_ms < 0 {
            jiff::Timestamp::MIN
        } else {
            jiff::Timestamp::MAX
        });
        Offset::UTC.to_datetime(t)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Timestamp::parse_rfc3339(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(
            Timestamp::from_unix_millis(0).to_rfc3339(),
            "1970-01-01T00:00:00.000Z"
        );
        // 2000-02-29 (leap day of a century leap year) 12:34:56.789
        let t = Timestamp::from_unix_millis(951_827_696_789);
        assert_eq!(t.to_rfc3339(), "2000-02-29T12:34:56.789Z");
        assert_eq!(t.compact(), "20000229-123456");
        assert_eq!(
            Timestamp::from_unix_millis(-1).to_rfc3339(),
            "1969-12-31T23:59:59.999Z"
        );
    }

    #[test]
    fn round_trips_through_text() {
        for ms in [
            0i64,
            1,
            999,
            86_399_999,
            1_700_000_000_123,
            4_102_444_800_000,
            -86_400_001,
        ] {
            let t = Timestamp::from_unix_millis(ms);
            assert_eq!(Timestamp::parse_rfc3339(&t.to_rfc3339()).unwrap(), t, "{t}");
        }
        // Every day over a few leap cycles.
        for day in -800..800 {
            let t = Timestamp::from_unix_millis(day * 86_400_000 + 17 * 86_400_000 * 365);
            assert_eq!(Timestamp::parse_rfc3339(&t.to_rfc3339()).unwrap(), t);
        }
    }

    #[test]
    fn parse_accepts_other_fraction_lengths_and_rejects_junk() {
        let t = Timestamp::parse_rfc3339("2024-03-01T00:00:00Z").unwrap();
        assert_eq!(t.to_rfc3339(), "2024-03-01T00:00:00.000Z");
        let t = Timestamp::parse_rfc3339("2024-03-01T00:00:00.5Z").unwrap();
        assert_eq!(t.unix_millis() % 1000, 500);
        let t = Timestamp::parse_rfc3339("2024-03-01T00:00:00.123456Z").unwrap();
        assert_eq!(t.unix_millis() % 1000, 123);
        for bad in [
            "",
            "2024-03-01",
            "2024-13-01T00:00:00Z",
            "2024-03-01T00:00:00+01:00",
            "2024-03-01Z",
            "2024-03-01 00:00:00Z",
            "2024-02-30T00:00:00Z",
            "x",
        ] {
            assert!(Timestamp::parse_rfc3339(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn system_time_round_trip() {
        let t = Timestamp::from_unix_millis(1_234_567);
        assert_eq!(Timestamp::from_system_time(t.to_system_time()), t);
    }
}
