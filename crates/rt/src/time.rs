//! The one time type of radiohost: [`Time`], integer nanoseconds on some
//! clock's timescale.
//!
//! The same type carries host-clock instants (a [`Clock`](crate::Clock)'s
//! `now()`), radio sample-clock time (UHD's `time_spec`: ns since the radio's
//! time zero) and spans between them. Sample-clock conversions round to the
//! nearest tick, so `Time::from_ticks(t, r).to_ticks(r) == t` for every rate
//! up to 1 GS/s
//! (while the time fits: about 584 years).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::time::Duration;

const NS_PER_S: u64 = 1_000_000_000;

/// An instant or a span, in integer nanoseconds.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Time(u64);

impl Time {
    /// Time zero (a clock's epoch, or an empty span).
    pub const ZERO: Time = Time(0);
    /// The latest representable time (about 584 years).
    pub const MAX: Time = Time(u64::MAX);

    pub const fn from_ns(ns: u64) -> Self {
        Time(ns)
    }

    pub const fn from_us(us: u64) -> Self {
        Time(us.saturating_mul(1_000))
    }

    pub const fn from_ms(ms: u64) -> Self {
        Time(ms.saturating_mul(1_000_000))
    }

    pub const fn from_secs(s: u64) -> Self {
        Time(s.saturating_mul(NS_PER_S))
    }

    /// Seconds, rounded to the nearest ns; negative or NaN gives zero,
    /// too large saturates.
    pub fn from_secs_f64(s: f64) -> Self {
        if s.is_nan() || s <= 0.0 {
            Time(0)
        } else {
            Time((s * 1e9).round().min(u64::MAX as f64) as u64)
        }
    }

    pub const fn ns(self) -> u64 {
        self.0
    }

    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 * 1e-9
    }

    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 * 1e-3
    }

    pub fn as_ms_f64(self) -> f64 {
        self.0 as f64 * 1e-6
    }

    pub fn as_duration(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// The time of sample-clock tick `ticks` at `rate_hz` samples per second.
    pub fn from_ticks(ticks: u64, rate_hz: f64) -> Self {
        debug_assert!(rate_hz > 0.0, "sample rate must be positive");
        if rate_hz.fract() == 0.0 && rate_hz >= 1.0 {
            // Exact integer arithmetic for integer rates (the common case).
            let rate = rate_hz as u64;
            let (s, rem) = (ticks / rate, ticks % rate);
            let frac = (rem as u128 * NS_PER_S as u128 + rate as u128 / 2) / rate as u128;
            return Time(s.saturating_mul(NS_PER_S).saturating_add(frac as u64));
        }
        Time::from_secs_f64(ticks as f64 / rate_hz)
    }

    /// The nearest sample-clock tick at `rate_hz`.
    pub fn to_ticks(self, rate_hz: f64) -> u64 {
        if rate_hz.fract() == 0.0 && rate_hz >= 1.0 {
            let rate = rate_hz as u128;
            return ((self.0 as u128 * rate + NS_PER_S as u128 / 2) / NS_PER_S as u128)
                .min(u64::MAX as u128) as u64;
        }
        (self.as_secs_f64() * rate_hz).round().max(0.0) as u64
    }

    pub fn saturating_sub(self, other: Time) -> Time {
        Time(self.0.saturating_sub(other.0))
    }

    pub fn saturating_add(self, other: Time) -> Time {
        Time(self.0.saturating_add(other.0))
    }

    pub fn checked_add(self, other: Time) -> Option<Time> {
        self.0.checked_add(other.0).map(Time)
    }

    pub fn checked_sub(self, other: Time) -> Option<Time> {
        self.0.checked_sub(other.0).map(Time)
    }
}

impl From<Duration> for Time {
    /// Saturates at [`Time::MAX`].
    fn from(d: Duration) -> Self {
        Time(d.as_nanos().min(u64::MAX as u128) as u64)
    }
}

impl From<Time> for Duration {
    fn from(t: Time) -> Self {
        t.as_duration()
    }
}

/// Saturating, like the rest of the type: time does not wrap.
impl Add for Time {
    type Output = Time;
    fn add(self, rhs: Time) -> Time {
        self.saturating_add(rhs)
    }
}

impl AddAssign for Time {
    fn add_assign(&mut self, rhs: Time) {
        *self = *self + rhs;
    }
}

/// Saturating at zero: "how long since" never underflows.
impl Sub for Time {
    type Output = Time;
    fn sub(self, rhs: Time) -> Time {
        self.saturating_sub(rhs)
    }
}

impl SubAssign for Time {
    fn sub_assign(&mut self, rhs: Time) {
        *self = *self - rhs;
    }
}

/// Human form with the largest unit that keeps the value >= 1: `1.5 ms`.
impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        if ns >= NS_PER_S {
            write!(f, "{:.3} s", self.as_secs_f64())
        } else if ns >= 1_000_000 {
            write!(f, "{:.3} ms", self.as_ms_f64())
        } else if ns >= 1_000 {
            write!(f, "{:.3} us", self.as_us_f64())
        } else {
            write!(f, "{ns} ns")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_round_trip_at_integer_and_fractional_rates() {
        for rate in [1.0, 7.68e6, 30.72e6, 245.76e6, 1e9, 3.3333e6] {
            // Up to 2^40 ticks, as long as the time fits in u64 ns (584 years).
            for t in [0u64, 1, 2, 999, 12_345_678, 1 << 40] {
                if t as f64 / rate > 1.8e10 {
                    continue;
                }
                let back = Time::from_ticks(t, rate).to_ticks(rate);
                assert_eq!(back, t, "rate {rate} tick {t}");
            }
        }
    }

    #[test]
    fn arithmetic_saturates_instead_of_wrapping() {
        assert_eq!(Time::from_ns(3) - Time::from_ns(5), Time::ZERO);
        assert_eq!(Time::MAX + Time::from_ns(1), Time::MAX);
        assert_eq!(Time::from_ns(3).checked_sub(Time::from_ns(5)), None);
        assert_eq!(Time::from_secs_f64(-1.0), Time::ZERO);
        assert_eq!(Time::from_secs_f64(f64::NAN), Time::ZERO);
    }

    #[test]
    fn display_picks_a_readable_unit() {
        assert_eq!(Time::from_ns(12).to_string(), "12 ns");
        assert_eq!(Time::from_us(250).to_string(), "250.000 us");
        assert_eq!(Time::from_ms(1500).to_string(), "1.500 s");
    }

    #[test]
    fn duration_conversion_is_exact() {
        let d = Duration::new(3, 141_592_653);
        assert_eq!(Duration::from(Time::from(d)), d);
    }
}
