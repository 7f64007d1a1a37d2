//! Durations as scenario files write them (`"250ms"`, `"2s"`, `"1.5s"`, `"1m"`).

use std::time::Duration;

use toml::Value;

pub(crate) const DURATION_ALLOWED: &str =
    "a duration: a string such as \"250ms\", \"2s\", \"1.5s\" or \"1m\", or a number of seconds";

/// The longest duration a scenario may write: a day.
const MAX: Duration = Duration::from_secs(86_400);

/// Parses `"250ms"`, `"2s"`, `"1.5s"`, `"1m"`, `"100us"` (humantime's units, with fractions
/// and sums such as `"1m 30s"`), or a bare number of seconds (`"2"`, `"0.5"`); at most a day.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let d = if !s.is_empty() && s.chars().all(|c| c.is_ascii_digit() || c == '.') {
        Duration::try_from_secs_f64(s.parse().ok()?).ok()?
    } else {
        humantime::parse_duration(s).ok()?
    };
    (d <= MAX).then_some(d)
}

/// A TOML value read as a duration: a string [`parse_duration`] reads, or a non-negative
/// number of seconds; `None` for anything else.
pub(crate) fn value_duration(v: &Value) -> Option<Duration> {
    match v {
        Value::String(s) => parse_duration(s),
        Value::Integer(i) if *i >= 0 => Some(Duration::from_secs(*i as u64)),
        Value::Float(f) if f.is_finite() && *f >= 0.0 => Some(Duration::from_secs_f64(*f)),
        _ => None,
    }
}

/// Formats a duration the way scenario files write it (`250ms`, `2s`, `1.5s`, `2m`).
pub fn fmt_duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 1000.0 {
        format!("{}ms", ms.round())
    } else if d.as_secs_f64() < 120.0 {
        let s = d.as_secs_f64();
        if (s - s.round()).abs() < 1e-9 {
            format!("{}s", s.round())
        } else {
            format!("{s:.1}s")
        }
    } else {
        let m = d.as_secs_f64() / 60.0;
        if (m - m.round()).abs() < 1e-9 {
            format!("{}m", m.round())
        } else {
            format!("{m:.1}m")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_forms_are_read() {
        for (text, ms) in [
            ("250ms", 250),
            ("2s", 2000),
            ("1.5s", 1500),
            ("1m", 60_000),
            ("2.5m", 150_000),
            ("100us", 0),
            ("2", 2000),
            ("0.5", 500),
            (" 2 s ", 2000),
            ("1440m", 86_400_000),
        ] {
            let d = parse_duration(text).unwrap_or_else(|| panic!("{text:?} is refused"));
            assert_eq!(d.as_millis(), ms, "{text:?}");
        }
        assert_eq!(parse_duration("100us"), Some(Duration::from_micros(100)));
        assert_eq!(parse_duration("100µs"), Some(Duration::from_micros(100)));
    }

    #[test]
    fn not_durations_are_refused() {
        for text in ["", "2x", "-1s", "s", "1e3", "inf", "1441m", "25h", "1.2.3"] {
            assert_eq!(parse_duration(text), None, "{text:?}");
        }
    }

    #[test]
    fn what_fmt_duration_writes_reads_back() {
        for ms in [
            0, 1, 250, 999, 1000, 1500, 2000, 90_000, 120_000, 150_000, 3_600_000,
        ] {
            let d = Duration::from_millis(ms);
            let text = fmt_duration(d);
            assert_eq!(parse_duration(&text), Some(d), "{text}");
        }
    }
}
