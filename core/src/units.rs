//! Units as people write them in config files and scenarios: durations (`"30s"`, `"1h30m"`)
//! and sizes (`"64GiB"`), with errors that say how to write one; and the nearest-rank
//! percentile that the status and the experiments report. A leaf: it imports nothing of the
//! crate.

use std::time::Duration;

/// The `q`-quantile of `sorted` by nearest rank (the smallest value with at least a `q` share
/// of the values at or below it); None when there are none.
pub fn nearest_rank<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len().max(1));
    sorted.get(rank - 1).copied()
}

use serde::{Deserialize, Deserializer};

const GIB: f64 = (1u64 << 30) as f64;

/// Parses a duration such as `"30s"`, `"2m"`, `"1h30m"`, `"1.5h"`, `"500ms"` or `"0"` into
/// seconds. Units: `ms`, `s`, `m`, `h`, `d`.
pub fn parse_duration_s(text: &str) -> Result<f64, String> {
    let s = text.trim();
    let example = "write a duration such as \"30s\", \"2m\", \"1h30m\"";
    if s.starts_with('-') {
        return Err(format!("\"{text}\" is negative: {example} (zero or more)"));
    }
    if s.is_empty() {
        return Err(format!("the duration is empty: {example}"));
    }
    if s == "0" {
        return Ok(0.0);
    }
    let mut total_s = 0.0;
    let mut rest = s;
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let number: f64 = rest[..number_len].parse().map_err(|_| format!("\"{text}\" is not a duration: {example}"))?;
        rest = rest[number_len..].trim_start();
        let unit_len = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
        let unit_s = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86_400.0,
            "" => return Err(format!("\"{text}\" lacks a unit: {example} (units ms, s, m, h, d)")),
            other => return Err(format!("\"{text}\" has unknown unit `{other}`: use ms, s, m, h or d")),
        };
        total_s += number * unit_s;
        rest = rest[unit_len..].trim_start();
    }
    if total_s.is_finite() { Ok(total_s) } else { Err(format!("\"{text}\" is too long: {example}")) }
}

/// Parses a memory size such as `"64GiB"`, `"512 MiB"`, `"1.5TiB"` or `"64GB"` into bytes.
/// Binary units `KiB MiB GiB TiB`, decimal `kB MB GB TB`, and `B`; case-insensitive.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let s = text.trim();
    let example = "write a size such as \"64GiB\" or \"512MiB\"";
    if s.starts_with('-') {
        return Err(format!("\"{text}\" is negative: {example}"));
    }
    let number_len = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let number: f64 = s[..number_len].parse().map_err(|_| format!("\"{text}\" is not a size: {example}"))?;
    let unit = s[number_len..].trim().to_ascii_lowercase();
    let scale: f64 = match unit.as_str() {
        "b" => 1.0,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => GIB,
        "tib" => GIB * 1024.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "" => return Err(format!("\"{text}\" lacks a unit: {example}")),
        other => {
            return Err(format!("\"{text}\" has unknown unit `{other}`: use B, KiB, MiB, GiB, TiB, kB, MB, GB or TB"));
        }
    };
    let bytes = (number * scale).round();
    if bytes.is_finite() && bytes < u64::MAX as f64 {
        Ok(bytes as u64)
    } else {
        Err(format!("\"{text}\" is too large"))
    }
}

/// Serde: a duration written as text (`"30s"`, `"50ms"`), through humantime.
pub fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    humantime::parse_duration(&text).map_err(|e| {
        serde::de::Error::custom(format!("\"{text}\" is not a duration ({e}): write e.g. \"30s\" or \"50ms\""))
    })
}

/// Serde: an optional duration ([`duration`]), for a key whose absence means "never".
pub fn duration_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    duration(d).map(Some)
}

/// Serde: a size written as text (`"64MiB"`), through [`parse_bytes`].
pub fn bytes<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let text = String::deserialize(d)?;
    parse_bytes(&text).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_refuse_negative_or_non_numeric_values() {
        assert_eq!(parse_duration_s("30s"), Ok(30.0));
        assert_eq!(parse_duration_s("2m"), Ok(120.0));
        assert_eq!(parse_duration_s("1h"), Ok(3600.0));
        assert_eq!(parse_duration_s("1h30m"), Ok(5400.0));
        assert_eq!(parse_duration_s(" 1.5 h "), Ok(5400.0));
        assert_eq!(parse_duration_s("250ms"), Ok(0.25));
        assert_eq!(parse_duration_s("0"), Ok(0.0));
        for bad in ["-5s", "", "soon", "30", "5y", "1..2s"] {
            assert!(parse_duration_s(bad).is_err(), "{bad:?}");
        }
        assert!(parse_duration_s("-5s").is_err_and(|m| m.contains("negative")));
    }

    #[test]
    fn memory_sizes_parse_with_binary_and_decimal_units() {
        assert_eq!(parse_bytes("64GiB"), Ok(64 << 30));
        assert_eq!(parse_bytes("512 MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes("1.5gib"), Ok(3 << 29));
        assert_eq!(parse_bytes("2GB"), Ok(2_000_000_000));
        for bad in ["64", "-1GiB", "lots", "3 parsecs"] {
            assert!(parse_bytes(bad).is_err(), "{bad:?}");
        }
    }
}
