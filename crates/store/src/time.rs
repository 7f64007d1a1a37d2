//! [`Timestamp`]: a UTC instant with millisecond resolution, stored as RFC 3339 text so the
//! database stays readable with any SQLite client.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
        let (y, mo, d, h, mi, s, ms) = self.fields();
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
    }

    /// `YYYYMMDD-HHMMSS`, for run ids.
    pub(crate) fn compact(self) -> String {
        let (y, mo, d, h, mi, s, _) = self.fields();
        format!("{y:04}{mo:02}{d:02}-{h:02}{mi:02}{s:02}")
    }

    /// Parses the UTC form this type writes: `YYYY-MM-DDTHH:MM:SS[.fff]Z` (any number of
    /// fraction digits, truncated to milliseconds).
    pub fn parse_rfc3339(text: &str) -> Result<Self, String> {
        let bad = || format!("{text:?} is not a UTC timestamp like 2026-01-31T12:00:00.000Z");
        let rest = text.strip_suffix('Z').ok_or_else(bad)?;
        let (date, time) = rest.split_once('T').ok_or_else(bad)?;
        let mut dp = date.splitn(3, '-');
        let y: i64 = dp.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
        let mo: u32 = dp.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
        let d: u32 = dp.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
        let (hms, frac) = match time.split_once('.') {
            Some((hms, frac)) => (hms, frac),
            None => (time, ""),
        };
        let mut tp = hms.splitn(3, ':');
        let h: i64 = tp.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
        let mi: i64 = tp.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
        let s: i64 = tp.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
        if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
            return Err(bad());
        }
        if !frac.chars().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        let ms: i64 = format!("{frac:0<3}")[..3].parse().map_err(|_| bad())?;
        let days = days_from_civil(y, mo, d);
        Ok(Timestamp {
            unix_ms: ((days * 24 + h) * 60 + mi) * 60_000 + s * 1000 + ms,
        })
    }

    fn fields(self) -> (i64, u32, u32, i64, i64, i64, i64) {
        let days = self.unix_ms.div_euclid(86_400_000);
        let in_day = self.unix_ms.rem_euclid(86_400_000);
        let (y, mo, d) = civil_from_days(days);
        (
            y,
            mo,
            d,
            in_day / 3_600_000,
            in_day / 60_000 % 60,
            in_day / 1000 % 60,
            in_day % 1000,
        )
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

/// Days since 1970-01-01 of a proleptic Gregorian date, using 400-year eras of 146097 days
/// (the era/day-of-era method described by H. Hinnant, "chrono-Compatible Low-Level Date
/// Algorithms").
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m as i64 + 9) % 12; // March = 0
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Inverse of [`days_from_civil`].
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
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
