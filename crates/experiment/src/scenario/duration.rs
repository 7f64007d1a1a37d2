//! Durations as scenario files write them (`"250ms"`, `"2s"`, `"1.5s"`, `"1m"`).

use std::time::Duration;

pub(super) const DURATION_ALLOWED: &str =
    "a duration: a string such as \"250ms\", \"2s\", \"1.5s\" or \"1m\", or a number of seconds";

/// Parses `"250ms"`, `"2s"`, `"1.5s"`, `"1m"`, `"100us"`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let idx = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(idx);
    let v: f64 = num.parse().ok()?;
    let secs = match unit.trim() {
        "" | "s" | "sec" | "secs" => v,
        "ms" => v / 1e3,
        "us" | "µs" => v / 1e6,
        "m" | "min" => v * 60.0,
        _ => return None,
    };
    if !secs.is_finite() || !(0.0..=86_400.0).contains(&secs) {
        return None;
    }
    Some(Duration::from_secs_f64(secs))
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
