//! Byte sizes as people write them in limits, parameters and sysfs: `4096`, `8K`, `64MiB`,
//! `1.5G`. Every unit is a power of 1024, whatever its spelling.
//!
//! The arithmetic (exact for whole numbers, truncating for fractions) is `bytesize`'s; this
//! module only fixes the spelling isobench has always accepted, in which `K` and `KB` mean
//! 1024 bytes, as they do for `free -h`, cgroup files and fio, not 1000 as `bytesize` reads
//! them.

use bytesize::{ByteSize, GIB, KIB, MIB, TIB};

/// What is wrong with a text that should have been a size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeProblem {
    /// No digits before the unit (`G`, `-1`, empty).
    #[error("a size starts with a number")]
    NoNumber,
    /// Digits and dots that do not make a number (`1.2.3`).
    #[error("`{0}` is not a number")]
    NotANumber(String),
    /// A unit other than `B`, `K`, `M`, `G`, `T` and their `KB`/`KiB` spellings.
    #[error("unknown size unit `{0}` (use K, M, G or T)")]
    UnknownUnit(String),
    /// 16 EiB or more: more than a `u64` holds.
    #[error("size is too large")]
    TooLarge,
}

/// A text that is not a byte size: the text as given and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{value}` is not a size: {problem}")]
pub struct SizeError {
    /// The text as given.
    pub value: String,
    /// What is wrong with it.
    pub problem: SizeProblem,
}

/// Parses a byte size: a whole or decimal number, then an optional unit `B`, `K`, `M`, `G`
/// or `T`, also written `KB` or `KiB` (any case, spaces allowed around it). All units are
/// binary: `8K` is 8192 bytes and `1.5G` is 1.5 GiB. A fraction of a byte is dropped.
///
/// ```
/// use isobench_common::parse_size;
/// assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
/// assert_eq!(parse_size("1.5g").unwrap(), 3 << 29);
/// assert_eq!(
///     parse_size("12Q").unwrap_err().to_string(),
///     "`12Q` is not a size: unknown size unit `q` (use K, M, G or T)"
/// );
/// ```
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let fail = |problem| SizeError {
        value: text.to_string(),
        problem,
    };
    let s = text.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    if num.is_empty() {
        return Err(fail(SizeProblem::NoNumber));
    }
    let unit = unit.trim().to_ascii_lowercase();
    let binary_unit = match unit.as_str() {
        "" | "b" => "B",
        "k" | "kb" | "kib" => "KiB",
        "m" | "mb" | "mib" => "MiB",
        "g" | "gb" | "gib" => "GiB",
        "t" | "tb" | "tib" => "TiB",
        _ => return Err(fail(SizeProblem::UnknownUnit(unit))),
    };
    if num.parse::<f64>().is_err() {
        return Err(fail(SizeProblem::NotANumber(num.to_string())));
    }
    let bytes = format!("{num} {binary_unit}")
        .parse::<ByteSize>()
        .map_err(|_| fail(SizeProblem::NotANumber(num.to_string())))?
        .as_u64();
    // `bytesize` saturates where the size does not fit.
    if bytes == u64::MAX {
        return Err(fail(SizeProblem::TooLarge));
    }
    Ok(bytes)
}

const UNITS: [(u64, &str); 4] = [(TIB, "T"), (GIB, "G"), (MIB, "M"), (KIB, "K")];

/// A byte count, short, for people: the largest binary unit it reaches, with one decimal
/// when it is not a whole number of them (`64M`, `1.5G`, `512`).
pub fn format_size(bytes: u64) -> String {
    for (m, u) in UNITS {
        if bytes >= m {
            let v = bytes as f64 / m as f64;
            return if (v - v.round()).abs() < 1e-9 {
                format!("{}{u}", v.round() as u64)
            } else {
                format!("{v:.1}{u}")
            };
        }
    }
    bytes.to_string()
}

/// A byte count, exact: the largest binary unit that divides it (`1G`, `1536M`, `4097`), so
/// [`parse_size`] reads back the same number.
pub fn format_size_exact(bytes: u64) -> String {
    for (m, u) in UNITS {
        if bytes >= m && bytes % m == 0 {
            return format!("{}{u}", bytes / m);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_every_unit_is_binary() {
        for bytes in ["3", "3b", "3B", " 3 B "] {
            assert_eq!(parse_size(bytes), Ok(3), "{bytes}");
        }
        for (k, m) in [("k", KIB), ("m", MIB), ("g", GIB), ("t", TIB)] {
            let u = k.to_uppercase();
            for spelling in [
                k.to_string(),
                u.clone(),
                format!("{k}b"),
                format!("{u}B"),
                format!("{k}ib"),
                format!("{u}iB"),
                format!("{u}IB"),
                format!(" {u}iB "),
            ] {
                assert_eq!(
                    parse_size(&format!("3{spelling}")),
                    Ok(3 * m),
                    "3{spelling}"
                );
            }
        }
    }

    #[test]
    fn plain_numbers_and_fractions() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size(" 12 "), Ok(12));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("0.5k"), Ok(512));
        assert_eq!(parse_size(".5K"), Ok(512));
        assert_eq!(parse_size("2.K"), Ok(2048));
        assert_eq!(parse_size("64 MiB"), Ok(64 * MIB));
        // Whole numbers stay exact beyond what an f64 holds.
        assert_eq!(parse_size("9007199254740993"), Ok(9_007_199_254_740_993));
        // A fraction of a byte is dropped.
        assert_eq!(parse_size("0.7K"), Ok(716));
    }

    #[test]
    fn errors_name_the_value_and_the_problem() {
        let problem = |s: &str| parse_size(s).unwrap_err().problem;
        assert_eq!(problem("G"), SizeProblem::NoNumber);
        assert_eq!(problem(""), SizeProblem::NoNumber);
        assert_eq!(problem("-1"), SizeProblem::NoNumber);
        assert_eq!(problem("1.2.3M"), SizeProblem::NotANumber("1.2.3".into()));
        assert_eq!(problem("."), SizeProblem::NotANumber(".".into()));
        assert_eq!(problem("1Q"), SizeProblem::UnknownUnit("q".into()));
        assert_eq!(problem("1KB5"), SizeProblem::UnknownUnit("kb5".into()));
        assert_eq!(problem("1e3"), SizeProblem::UnknownUnit("e3".into()));
        assert_eq!(problem("1P"), SizeProblem::UnknownUnit("p".into()));
        assert_eq!(problem("99999999999999999999"), SizeProblem::TooLarge);
        assert_eq!(problem("16777216T"), SizeProblem::TooLarge);
        assert_eq!(problem("1e30"), SizeProblem::UnknownUnit("e30".into()));
        assert_eq!(
            parse_size("12Q").unwrap_err().to_string(),
            "`12Q` is not a size: unknown size unit `q` (use K, M, G or T)"
        );
        assert_eq!(
            parse_size("1.2.3").unwrap_err().to_string(),
            "`1.2.3` is not a size: `1.2.3` is not a number"
        );
    }

    #[test]
    fn short_form() {
        assert_eq!(format_size(512), "512");
        assert_eq!(format_size(64 * MIB), "64M");
        assert_eq!(format_size(3 << 29), "1.5G");
        assert_eq!(format_size(1536 * MIB), "1.5G");
        assert_eq!(format_size(2 * TIB), "2T");
        assert_eq!(format_size(KIB + 1), "1.0K");
    }

    #[test]
    fn exact_form_reads_back() {
        assert_eq!(format_size_exact(1536 * MIB), "1536M");
        assert_eq!(format_size_exact(GIB), "1G");
        assert_eq!(format_size_exact(4097), "4097");
        for b in [
            0,
            1,
            4096,
            4097,
            1536 * MIB,
            3 * TIB,
            5 * GIB + KIB,
            u64::MAX - 1,
        ] {
            assert_eq!(parse_size(&format_size_exact(b)), Ok(b), "{b}");
        }
    }
}
