//! The one parser for the human units used on command lines and in link specs:
//! durations (`10ms`, `250us`, `2s`, `1.5min`), bit rates (`1G`, `250kbit`,
//! `10Gbit/s`, `inf`), sample rates (`30.72MS/s`, `1Msps`), sizes (`64KiB`, `1MB`,
//! `1500B`) and frequencies (`2.4GHz`, `100kHz`).
//!
//! **Units are required.** A bare number is refused with a message that names the
//! accepted units and shows the number with them (`"2" is missing its unit: write
//! 2s, 2ms or 2us ...`). The only unit-less spellings kept are the SI prefixes
//! alone on rates (`1G` is 1 Gbit/s, `10M` is 10 MS/s), which already say the
//! scale. Units are matched case-insensitively, and a space may separate the
//! number from its unit (`10 ms`).
//!
//! Numbers are decimal with an optional exponent (`1.5e3us`). Durations and sizes
//! are computed exactly in integers (no float rounding): durations round to the
//! nearest nanosecond, and a size must come out as a whole number of bytes.
//!
//! Zero: [`parse_duration`], [`parse_time`] and [`parse_size`] accept zero, because
//! "no delay" and "empty" are meaningful values; callers for which zero makes no
//! sense use [`parse_positive_duration`] or check themselves. Rates, sample rates
//! and frequencies must be positive. Negative values, NaN, infinities (except the
//! rate `inf`) and overflow are errors. No input panics.
//!
//! The `*_UNITS` constants are the unit lists that help texts print, so help and
//! errors use the same words.

use radiohost_rt::Time;
use std::fmt;
use std::time::Duration;
use thiserror::Error;

/// Units accepted by [`parse_duration`], [`parse_positive_duration`], [`parse_time`].
pub const DURATION_UNITS: &str = "ns, us (or µs), ms, s, min";
/// Units accepted by [`parse_rate`].
pub const RATE_UNITS: &str = "bit/s, kbit/s, Mbit/s, Gbit/s (also bps, kbit, k, M, G; inf)";
/// Units accepted by [`parse_sample_rate`].
pub const SAMPLE_RATE_UNITS: &str = "S/s, kS/s, MS/s, GS/s (also sps, ksps, Msps, k, M, G)";
/// Units accepted by [`parse_size`].
pub const SIZE_UNITS: &str = "B, KB, MB, GB, KiB, MiB, GiB";
/// Units accepted by [`parse_frequency`].
pub const FREQUENCY_UNITS: &str = "Hz, kHz, MHz, GHz";
/// Spellings accepted by [`parse_probability`].
pub const PROBABILITY_UNITS: &str = "% (0% to 100%), or a plain probability from 0 to 1";

/// Which kind of value was being read; names the quantity and its units in errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quantity {
    Duration,
    Rate,
    SampleRate,
    Size,
    Frequency,
    Probability,
}

impl Quantity {
    /// The accepted units, as help texts print them.
    pub fn units(self) -> &'static str {
        match self {
            Quantity::Duration => DURATION_UNITS,
            Quantity::Rate => RATE_UNITS,
            Quantity::SampleRate => SAMPLE_RATE_UNITS,
            Quantity::Size => SIZE_UNITS,
            Quantity::Frequency => FREQUENCY_UNITS,
            Quantity::Probability => PROBABILITY_UNITS,
        }
    }

    /// Typical values, for "e.g." in errors.
    pub fn examples(self) -> &'static str {
        match self {
            Quantity::Duration => "10ms, 250us, 2s",
            Quantity::Rate => "10Mbit/s, 250kbit, 1G",
            Quantity::SampleRate => "30.72MS/s, 1Msps, 250kS/s",
            Quantity::Size => "1500B, 64KiB, 1MB",
            Quantity::Frequency => "2.4GHz, 100kHz, 10MHz",
            Quantity::Probability => "1%, 0.5%, 0.2",
        }
    }

    /// Three spellings of `number` with units, for the missing-unit error.
    fn with_units(self, number: &str) -> String {
        let [a, b, c] = match self {
            Quantity::Duration => ["s", "ms", "us"],
            Quantity::Rate => ["bit/s", "kbit/s", "Mbit/s"],
            Quantity::SampleRate => ["S/s", "kS/s", "MS/s"],
            Quantity::Size => ["B", "KB", "KiB"],
            Quantity::Frequency => ["Hz", "kHz", "MHz"],
            // A bare probability is accepted: never missing its unit.
            Quantity::Probability => ["%", "%", "%"],
        };
        format!("{number}{a}, {number}{b} or {number}{c}")
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Quantity::Duration => "duration",
            Quantity::Rate => "bit rate",
            Quantity::SampleRate => "sample rate",
            Quantity::Size => "size",
            Quantity::Frequency => "frequency",
            Quantity::Probability => "probability",
        })
    }
}

/// What was wrong with the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnitProblem {
    /// Nothing but whitespace.
    Empty,
    /// A number with no unit; holds the number as written.
    MissingUnit(String),
    /// A unit this quantity does not know; holds the unit as written.
    UnknownUnit(String),
    /// The text does not start with a decimal number (also NaN, infinity).
    NotANumber,
    Negative,
    /// Zero where the quantity must be positive.
    Zero,
    /// Larger than the result type holds.
    TooLarge,
    /// A positive duration below one nanosecond.
    BelowResolution,
    /// A size that is not a whole number of bytes.
    NotWholeBytes,
    /// A bit rate below 1 bit/s (a link that slow never delivers a packet).
    BelowOneBit,
    /// A probability above 1 (100%).
    AboveOne,
}

/// A value that could not be read; the message names the quantity, the accepted
/// units and an example.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("{}", self.message())]
pub struct UnitError {
    pub quantity: Quantity,
    pub input: String,
    pub problem: UnitProblem,
}

impl UnitError {
    fn new(quantity: Quantity, input: &str, problem: UnitProblem) -> Self {
        Self {
            quantity,
            input: input.to_string(),
            problem,
        }
    }

    fn message(&self) -> String {
        let (q, input) = (self.quantity, &self.input);
        let (units, eg) = (q.units(), q.examples());
        match &self.problem {
            UnitProblem::Empty => {
                format!("{q} is empty: write a number and a unit, e.g. {eg} (units: {units})")
            }
            UnitProblem::MissingUnit(number) => format!(
                "{input:?} is missing its unit: write {} ({q} units: {units})",
                q.with_units(number)
            ),
            UnitProblem::UnknownUnit(unit) => {
                format!("{q} {input:?} has unknown unit {unit:?}: use {units}, e.g. {eg}")
            }
            UnitProblem::NotANumber => format!(
                "{q} {input:?} is not a number followed by a unit: write e.g. {eg} (units: {units})"
            ),
            UnitProblem::Negative => {
                format!("{q} {input:?} is negative: give a value of 0 or more, e.g. {eg}")
            }
            UnitProblem::Zero => format!("{q} {input:?} is zero: give a positive {q}, e.g. {eg}"),
            UnitProblem::TooLarge => {
                format!("{q} {input:?} is too large to represent: give a smaller {q}, e.g. {eg}")
            }
            UnitProblem::BelowResolution => {
                format!("{q} {input:?} is below the 1ns resolution: give 0 or at least 1ns")
            }
            UnitProblem::AboveOne => {
                format!("{q} {input:?} is above 100%: give 0% to 100%, or 0 to 1")
            }
            UnitProblem::BelowOneBit => {
                format!("{q} {input:?} is below 1 bit/s: give at least 1bit/s")
            }
            UnitProblem::NotWholeBytes => format!(
                "{q} {input:?} is not a whole number of bytes: give an exact size, e.g. {eg}"
            ),
        }
    }
}

/// A decimal number as written: `mantissa * 10^exp10`, exactly.
struct Decimal<'a> {
    /// The number's text (a valid Rust `f64` literal).
    text: &'a str,
    mantissa: u128,
    exp10: i32,
}

/// Splits `s` (trimmed) into a non-negative decimal number and the unit after it.
fn split_number(q: Quantity, input: &str) -> Result<(Decimal<'_>, String), UnitError> {
    let err = |p| UnitError::new(q, input, p);
    let s = input.trim();
    if s.is_empty() {
        return Err(err(UnitProblem::Empty));
    }
    let body = match s.strip_prefix('-') {
        Some(rest) if rest.starts_with(|c: char| c.is_ascii_digit() || c == '.') => {
            return Err(err(UnitProblem::Negative))
        }
        Some(_) => return Err(err(UnitProblem::NotANumber)),
        None => s.strip_prefix('+').unwrap_or(s),
    };
    let bytes = body.as_bytes();
    let mut i = 0;
    let mut mantissa: u128 = 0;
    let mut digits = 0usize;
    let mut frac_digits: i64 = 0;
    let mut overflowed_int_digits: i64 = 0;
    let mut seen_point = false;
    while i < bytes.len() {
        match bytes[i] {
            b'0'..=b'9' => {
                digits += 1;
                let d = u128::from(bytes[i] - b'0');
                match mantissa.checked_mul(10).and_then(|m| m.checked_add(d)) {
                    Some(m) => {
                        mantissa = m;
                        if seen_point {
                            frac_digits += 1;
                        }
                    }
                    // Beyond ~38 significant digits: drop the digit, keep the scale.
                    None if !seen_point => overflowed_int_digits += 1,
                    None => {}
                }
            }
            b'.' if !seen_point => seen_point = true,
            _ => break,
        }
        i += 1;
    }
    if digits == 0 {
        return Err(err(UnitProblem::NotANumber));
    }
    let mut exp: i64 = 0;
    if i < bytes.len() && (bytes[i] == b'e' || bytes[i] == b'E') {
        let mut j = i + 1;
        let negative = match bytes.get(j) {
            Some(b'-') => {
                j += 1;
                true
            }
            Some(b'+') => {
                j += 1;
                false
            }
            _ => false,
        };
        let start = j;
        let mut value: i64 = 0;
        while j < bytes.len() && bytes[j].is_ascii_digit() {
            value = value
                .saturating_mul(10)
                .saturating_add(i64::from(bytes[j] - b'0'));
            j += 1;
        }
        // Only an exponent if digits follow; otherwise the `e` starts the unit.
        if j > start {
            exp = if negative { -value } else { value };
            i = j;
        }
    }
    let exp10 = exp
        .saturating_add(overflowed_int_digits)
        .saturating_sub(frac_digits)
        .clamp(-10_000, 10_000) as i32;
    let text = &body[..i];
    let unit = body[i..].trim().to_lowercase();
    Ok((
        Decimal {
            text,
            mantissa,
            exp10,
        },
        unit,
    ))
}

/// `d * scale` rounded to an integer: exact, `None` on overflow. `exact` refuses
/// a fractional result (returns `Err(())`) instead of rounding to nearest.
fn scaled_integer(d: &Decimal, scale: u128, exact: bool) -> Result<Option<u128>, ()> {
    let Some(product) = d.mantissa.checked_mul(scale) else {
        return Ok(None);
    };
    if product == 0 {
        return Ok(Some(0));
    }
    if d.exp10 >= 0 {
        let Some(pow) = 10u128.checked_pow(d.exp10 as u32) else {
            return Ok(None);
        };
        return Ok(product.checked_mul(pow));
    }
    let (quotient, remainder, divisor) = match 10u128.checked_pow(d.exp10.unsigned_abs()) {
        Some(div) => (product / div, product % div, Some(div)),
        None => (0, product, None),
    };
    if remainder == 0 {
        return Ok(Some(quotient));
    }
    if exact {
        return Err(());
    }
    // Round half up; a divisor beyond u128 means the value is far below 0.5.
    let round_up = divisor.is_some_and(|div| remainder >= div - remainder);
    Ok(Some(quotient + u128::from(round_up)))
}

/// Parse a duration with its unit ([`DURATION_UNITS`]); zero is accepted.
/// Rounds to the nearest nanosecond; at most `u64::MAX` ns (about 584 years).
pub fn parse_duration(input: &str) -> Result<Duration, UnitError> {
    parse_duration_ns(input).map(Duration::from_nanos)
}

/// Like [`parse_duration`], but zero is an error (for periods, timeouts, intervals).
pub fn parse_positive_duration(input: &str) -> Result<Duration, UnitError> {
    let ns = parse_duration_ns(input)?;
    if ns == 0 {
        return Err(UnitError::new(Quantity::Duration, input, UnitProblem::Zero));
    }
    Ok(Duration::from_nanos(ns))
}

/// A duration as the project's [`Time`] (a span or an instant after time zero).
pub fn parse_time(input: &str) -> Result<Time, UnitError> {
    parse_duration_ns(input).map(Time::from_ns)
}

fn parse_duration_ns(input: &str) -> Result<u64, UnitError> {
    let q = Quantity::Duration;
    let err = |p| UnitError::new(q, input, p);
    let (number, unit) = split_number(q, input)?;
    let ns_per_unit: u128 = match unit.as_str() {
        "" => return Err(err(UnitProblem::MissingUnit(number.text.to_string()))),
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "min" => 60_000_000_000,
        _ => return Err(err(UnitProblem::UnknownUnit(unit))),
    };
    let ns = scaled_integer(&number, ns_per_unit, false)
        .ok()
        .flatten()
        .and_then(|ns| u64::try_from(ns).ok())
        .ok_or_else(|| err(UnitProblem::TooLarge))?;
    if ns == 0 && number.mantissa != 0 {
        return Err(err(UnitProblem::BelowResolution));
    }
    Ok(ns)
}

/// Parse a size in bytes ([`SIZE_UNITS`]): KB/MB/GB are decimal, KiB/MiB/GiB
/// binary. Zero is accepted; the result must be a whole number of bytes.
pub fn parse_size(input: &str) -> Result<usize, UnitError> {
    let q = Quantity::Size;
    let err = |p| UnitError::new(q, input, p);
    let (number, unit) = split_number(q, input)?;
    let bytes_per_unit: u128 = match unit.as_str() {
        "" => return Err(err(UnitProblem::MissingUnit(number.text.to_string()))),
        "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        _ => return Err(err(UnitProblem::UnknownUnit(unit))),
    };
    scaled_integer(&number, bytes_per_unit, true)
        .map_err(|()| err(UnitProblem::NotWholeBytes))?
        .and_then(|b| usize::try_from(b).ok())
        .ok_or_else(|| err(UnitProblem::TooLarge))
}

/// Reads `number * scale` as a positive, finite f64.
fn positive_f64(q: Quantity, input: &str, number: &Decimal, scale: f64) -> Result<f64, UnitError> {
    let err = |p| UnitError::new(q, input, p);
    let value = number
        .text
        .parse::<f64>()
        .map_err(|_| err(UnitProblem::NotANumber))?
        * scale;
    if value == 0.0 {
        Err(err(UnitProblem::Zero))
    } else if !value.is_finite() {
        Err(err(UnitProblem::TooLarge))
    } else {
        Ok(value)
    }
}

/// Parse a probability: a percentage with its unit (`1%`, `0.5%`) or a plain
/// probability from 0 to 1 (`0.2`), as a fraction in 0..=1. The one parser
/// for shares: link loss and duplication, deadline-miss thresholds.
pub fn parse_probability(input: &str) -> Result<f64, UnitError> {
    let q = Quantity::Probability;
    let err = |p| UnitError::new(q, input, p);
    let (number, unit) = split_number(q, input)?;
    let scale = match unit.as_str() {
        "" => 1.0,
        "%" => 0.01,
        _ => return Err(err(UnitProblem::UnknownUnit(unit))),
    };
    let p = number
        .text
        .parse::<f64>()
        .map_err(|_| err(UnitProblem::NotANumber))?
        * scale;
    if !p.is_finite() || p > 1.0 {
        return Err(err(UnitProblem::AboveOne));
    }
    Ok(p)
}

/// The decimal SI prefix of `unit` (after lowercasing) and the rest.
fn si_prefix(unit: &str) -> (f64, &str) {
    for (prefix, scale) in [("k", 1e3), ("m", 1e6), ("g", 1e9)] {
        if let Some(rest) = unit.strip_prefix(prefix) {
            return (scale, rest);
        }
    }
    (1.0, unit)
}

/// Parse a bit rate in bit/s ([`RATE_UNITS`]). `inf` or `unlimited` gives
/// `f64::INFINITY` (no rate limit). Must be positive.
pub fn parse_rate(input: &str) -> Result<f64, UnitError> {
    let q = Quantity::Rate;
    let lower = input.trim().to_lowercase();
    if lower == "inf" || lower == "unlimited" {
        return Ok(f64::INFINITY);
    }
    let (number, unit) = split_number(q, input)?;
    let (scale, rest) = si_prefix(&unit);
    if unit.is_empty() {
        return Err(UnitError::new(
            q,
            input,
            UnitProblem::MissingUnit(number.text.to_string()),
        ));
    }
    // `1G` alone is a rate: the prefix already says the scale.
    if !matches!(rest, "" | "bit" | "bit/s" | "bps" | "b/s") || (rest.is_empty() && scale == 1.0) {
        return Err(UnitError::new(q, input, UnitProblem::UnknownUnit(unit)));
    }
    let rate = positive_f64(q, input, &number, scale)?;
    if rate < 1.0 {
        return Err(UnitError::new(q, input, UnitProblem::BelowOneBit));
    }
    Ok(rate)
}

/// Parse a sample rate in samples per second ([`SAMPLE_RATE_UNITS`]). Must be positive.
pub fn parse_sample_rate(input: &str) -> Result<f64, UnitError> {
    let q = Quantity::SampleRate;
    let (number, unit) = split_number(q, input)?;
    if unit.is_empty() {
        return Err(UnitError::new(
            q,
            input,
            UnitProblem::MissingUnit(number.text.to_string()),
        ));
    }
    let (scale, rest) = si_prefix(&unit);
    if !matches!(rest, "" | "s/s" | "sps") || (rest.is_empty() && scale == 1.0) {
        return Err(UnitError::new(q, input, UnitProblem::UnknownUnit(unit)));
    }
    positive_f64(q, input, &number, scale)
}

/// Parse a frequency in Hz ([`FREQUENCY_UNITS`]). Must be positive.
pub fn parse_frequency(input: &str) -> Result<f64, UnitError> {
    let q = Quantity::Frequency;
    let (number, unit) = split_number(q, input)?;
    let scale = match unit.as_str() {
        "" => {
            return Err(UnitError::new(
                q,
                input,
                UnitProblem::MissingUnit(number.text.to_string()),
            ))
        }
        "hz" => 1.0,
        "khz" => 1e3,
        "mhz" => 1e6,
        "ghz" => 1e9,
        _ => return Err(UnitError::new(q, input, UnitProblem::UnknownUnit(unit))),
    };
    positive_f64(q, input, &number, scale)
}

/// `value / 10^decimals` written exactly, trailing zeros trimmed.
fn exact_decimal(value: u64, decimals: u32) -> String {
    let div = 10u64.pow(decimals);
    let (whole, frac) = (value / div, value % div);
    if frac == 0 {
        return whole.to_string();
    }
    let frac = format!("{frac:0width$}", width = decimals as usize);
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

/// A duration in the largest unit that keeps it >= 1, written exactly, so
/// [`parse_duration`] reads back the same nanoseconds: `2.5ms`, `1.000001s`, `0s`.
pub fn format_duration(d: Duration) -> String {
    let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    match ns {
        0 => "0s".to_string(),
        n if n >= 1_000_000_000 => format!("{}s", exact_decimal(n, 9)),
        n if n >= 1_000_000 => format!("{}ms", exact_decimal(n, 6)),
        n if n >= 1_000 => format!("{}us", exact_decimal(n, 3)),
        n => format!("{n}ns"),
    }
}

/// A size in the largest binary unit that divides it exactly: `64KiB`, `1500B`.
pub fn format_size(bytes: usize) -> String {
    for (unit, scale) in [("GiB", 1usize << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if bytes != 0 && bytes.is_multiple_of(scale) {
            return format!("{}{unit}", bytes / scale);
        }
    }
    format!("{bytes}B")
}

/// A bit rate with a decimal prefix: `10Mbit/s`, `250kbit/s`, `inf`.
pub fn format_rate(bps: f64) -> String {
    if bps.is_infinite() {
        return "inf".to_string();
    }
    let (scale, unit) = decimal_scale(bps);
    format!("{}{unit}bit/s", bps / scale)
}

/// A sample rate with a decimal prefix: `30.72MS/s`.
pub fn format_sample_rate(sps: f64) -> String {
    let (scale, unit) = decimal_scale(sps);
    format!("{}{unit}S/s", sps / scale)
}

/// A frequency with a decimal prefix: `2.4GHz`.
pub fn format_frequency(hz: f64) -> String {
    let (scale, unit) = decimal_scale(hz);
    format!("{}{unit}Hz", hz / scale)
}

fn decimal_scale(value: f64) -> (f64, &'static str) {
    match value.abs() {
        v if v >= 1e9 => (1e9, "G"),
        v if v >= 1e6 => (1e6, "M"),
        v if v >= 1e3 => (1e3, "k"),
        _ => (1.0, ""),
    }
}

#[cfg(test)]
mod tests;
