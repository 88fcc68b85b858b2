//! Parsing of the human units used on command lines and in link specs:
//! rates ("1G", "250kbit", "10Gbit/s"), durations ("10ms", "250us", "2s") and sizes
//! ("64KiB", "1MB", "1500").

use std::time::Duration;
use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
#[error("cannot parse {what} {input:?}: {why}")]
pub struct UnitError {
    pub what: &'static str,
    pub input: String,
    pub why: &'static str,
}

fn split_number(s: &str) -> Option<(f64, &str)> {
    let s = s.trim();
    let end = s
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.'))
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    let value: f64 = s[..end].parse().ok()?;
    Some((value, s[end..].trim()))
}

/// Parse a bit rate. Suffixes: k/M/G (decimal), optional "bit", "bps" or "bit/s";
/// "inf" or "unlimited" for no limit. A bare number is bit/s.
pub fn parse_rate(input: &str) -> Result<f64, UnitError> {
    let err = |why| UnitError {
        what: "rate",
        input: input.to_string(),
        why,
    };
    let lower = input.trim().to_ascii_lowercase();
    if lower == "inf" || lower == "unlimited" {
        return Ok(f64::INFINITY);
    }
    let (value, unit) = split_number(&lower).ok_or_else(|| err("expected a number first"))?;
    let unit = unit
        .trim_end_matches("/s")
        .trim_end_matches("ps")
        .trim_end_matches("bit")
        .trim_end_matches('b');
    let scale = match unit {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        _ => return Err(err("unit must be k, M or G (bit/s)")),
    };
    let rate = value * scale;
    if rate.is_nan() || rate <= 0.0 {
        return Err(err("rate must be positive"));
    }
    Ok(rate)
}

/// Parse a duration: ns, us, ms or s suffix (a bare number is milliseconds).
pub fn parse_duration(input: &str) -> Result<Duration, UnitError> {
    let err = |why| UnitError {
        what: "duration",
        input: input.to_string(),
        why,
    };
    let lower = input.trim().to_ascii_lowercase();
    let (value, unit) = split_number(&lower).ok_or_else(|| err("expected a number first"))?;
    let seconds = match unit {
        "ns" => value * 1e-9,
        "us" | "µs" => value * 1e-6,
        "ms" | "" => value * 1e-3,
        "s" => value,
        _ => return Err(err("unit must be ns, us, ms or s")),
    };
    if !(0.0..=1e9).contains(&seconds) {
        return Err(err("duration out of range"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Parse a size in bytes: B, KB/MB/GB (decimal) or KiB/MiB/GiB (binary).
pub fn parse_size(input: &str) -> Result<usize, UnitError> {
    let err = |why| UnitError {
        what: "size",
        input: input.to_string(),
        why,
    };
    let lower = input.trim().to_ascii_lowercase();
    let (value, unit) = split_number(&lower).ok_or_else(|| err("expected a number first"))?;
    let scale = match unit {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(err("unit must be B, KB, MB, GB, KiB, MiB or GiB")),
    };
    let bytes = value * scale;
    if !(0.0..=1e15).contains(&bytes) {
        return Err(err("size out of range"));
    }
    Ok(bytes.round() as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("1G").unwrap(), 1e9);
        assert_eq!(parse_rate("250kbit").unwrap(), 250e3);
        assert_eq!(parse_rate("1Mbit/s").unwrap(), 1e6);
        assert_eq!(parse_rate("10Gbps").unwrap(), 10e9);
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("0").is_err());
        assert!(parse_rate("3Tbit").is_err());
    }

    #[test]
    fn durations_and_sizes() {
        assert_eq!(parse_duration("10ms").unwrap(), Duration::from_millis(10));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert!(parse_duration("-1s").is_err());
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert_eq!(parse_size("1MB").unwrap(), 1_000_000);
        assert!(parse_size("1 parsec").is_err());
    }
}
