//! The units of limit values that are not sizes: network rates and microseconds.

/// Parses a network rate in bits per second: `100mbit`, `1gbit`, `500kbit`, `64000bit` or a
/// plain number of bits/s. Units are decimal, as in `tc`.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    if num.is_empty() {
        return Err("a rate starts with a number".into());
    }
    let unit = unit.trim().to_ascii_lowercase();
    let mult: u64 = match unit.as_str() {
        "" | "bit" => 1,
        "k" | "kbit" => 1_000,
        "m" | "mbit" => 1_000_000,
        "g" | "gbit" => 1_000_000_000,
        u if u.ends_with("bps") || u.ends_with("b/s") => {
            return Err(format!(
                "`{u}` is ambiguous (bits or bytes?); write the rate in bits, e.g. `100mbit`"
            ))
        }
        other => {
            return Err(format!(
                "unknown rate unit `{other}` (use kbit, mbit or gbit)"
            ))
        }
    };
    let x: f64 = num
        .parse()
        .map_err(|_| format!("`{num}` is not a number"))?;
    let v = x * mult as f64;
    if !v.is_finite() || v >= 1e15 {
        return Err("rate is too large".into());
    }
    Ok(v as u64)
}

/// Parses a duration in microseconds: `20ms`, `1.5s`, `500us` or a plain number of
/// microseconds.
pub fn parse_micros(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    if num.is_empty() {
        return Err("a duration starts with a number".into());
    }
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "us" | "usec" => 1.0,
        "ms" | "msec" => 1e3,
        "s" | "sec" => 1e6,
        other => return Err(format!("unknown duration unit `{other}` (use us, ms or s)")),
    };
    let x: f64 = num
        .parse()
        .map_err(|_| format!("`{num}` is not a number"))?;
    let v = (x * mult).round();
    if !v.is_finite() || v >= 1e15 {
        return Err("duration is too large".into());
    }
    Ok(v as u64)
}

/// Formats microseconds in the largest unit that keeps the value whole (`20ms`, `1s`,
/// `1500us`).
pub fn format_micros(v: u64) -> String {
    if v > 0 && v % 1_000_000 == 0 {
        format!("{}s", v / 1_000_000)
    } else if v > 0 && v % 1_000 == 0 {
        format!("{}ms", v / 1_000)
    } else {
        format!("{v}us")
    }
}

/// Formats a rate in bits/s the way `tc` reads it.
pub fn format_rate(v: u64) -> String {
    for (unit, m) in [
        ("gbit", 1_000_000_000),
        ("mbit", 1_000_000),
        ("kbit", 1_000),
    ] {
        if v >= m && v % m == 0 {
            return format!("{}{unit}", v / m);
        }
    }
    format!("{v}bit")
}
