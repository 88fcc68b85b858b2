//! Clocks in integer nanoseconds, absolute-deadline sleeping, and a clock
//! trait so schedulers and protocols can run on simulated time as well.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Which kernel clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClockId {
    /// `CLOCK_MONOTONIC`: never jumps; the clock for deadlines and latency.
    Monotonic,
    /// `CLOCK_TAI`: international atomic time, for timestamps shared with
    /// radios and other hosts (PTP disciplines it). Equals `Realtime` unless
    /// the TAI offset has been set (chrony, ptp4l, `adjtimex`).
    Tai,
    /// `CLOCK_REALTIME`: wall clock (UTC), may jump.
    Realtime,
}

impl ClockId {
    fn raw(self) -> libc::clockid_t {
        match self {
            ClockId::Monotonic => libc::CLOCK_MONOTONIC,
            ClockId::Tai => libc::CLOCK_TAI,
            ClockId::Realtime => libc::CLOCK_REALTIME,
        }
    }

    /// Current time on this clock in ns since its epoch.
    pub fn now_ns(self) -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid out-pointer; these clocks always exist on Linux >= 3.10.
        unsafe { libc::clock_gettime(self.raw(), &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    /// Sleeps until this clock reads `deadline_ns` (absolute; resumes after
    /// signals). Returns immediately if the deadline has passed.
    pub fn sleep_until_ns(self, deadline_ns: u64) -> io::Result<()> {
        let ts = libc::timespec {
            tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
        };
        loop {
            // SAFETY: `ts` is valid; remain may be null for TIMER_ABSTIME.
            let rc = unsafe {
                libc::clock_nanosleep(self.raw(), libc::TIMER_ABSTIME, &ts, std::ptr::null_mut())
            };
            match rc {
                0 => return Ok(()),
                libc::EINTR => continue,
                e => return Err(io::Error::from_raw_os_error(e)),
            }
        }
    }
}

/// `CLOCK_MONOTONIC` in ns.
pub fn monotonic_ns() -> u64 {
    ClockId::Monotonic.now_ns()
}

/// `CLOCK_TAI` in ns since 1970-01-01 TAI.
pub fn tai_ns() -> u64 {
    ClockId::Tai.now_ns()
}

/// `CLOCK_REALTIME` in ns since the Unix epoch.
pub fn realtime_ns() -> u64 {
    ClockId::Realtime.now_ns()
}

/// TAI - UTC offset the kernel applies, in whole seconds (0 = not set, which
/// makes `CLOCK_TAI` silently equal to UTC).
pub fn tai_offset_s() -> i64 {
    // Sample both clocks back to back and round: they differ by whole seconds.
    let rt = realtime_ns() as i128;
    let tai = tai_ns() as i128;
    ((tai - rt + 500_000_000).div_euclid(1_000_000_000)) as i64
}

/// Median cost of reading `clock` (ns between back-to-back reads over
/// `reads` pairs): the floor of any latency measured with it.
pub fn clock_read_cost_ns(clock: ClockId, reads: usize) -> u64 {
    let mut d: Vec<u64> = (0..reads.max(1))
        .map(|_| {
            let a = clock.now_ns();
            clock.now_ns().saturating_sub(a)
        })
        .collect();
    d.sort_unstable();
    d[d.len() / 2]
}

/// A source of "now" in ns. Code that takes a `&dyn Clock` (or generic `C:
/// Clock`) runs unchanged under real time and under simulation.
pub trait Clock: Send + Sync {
    /// Current time in ns on this clock's timescale.
    fn now_ns(&self) -> u64;

    /// Current time as the one time type.
    fn now(&self) -> crate::Time {
        crate::Time::from_ns(self.now_ns())
    }
}

/// The real monotonic clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct MonotonicClock;

impl Clock for MonotonicClock {
    fn now_ns(&self) -> u64 {
        monotonic_ns()
    }
}

/// The real TAI clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct TaiClock;

impl Clock for TaiClock {
    fn now_ns(&self) -> u64 {
        tai_ns()
    }
}

/// A clock that moves only when told to; clones share the same time.
#[derive(Clone, Debug, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A manual clock reading `start_ns`.
    pub fn new(start_ns: u64) -> Self {
        ManualClock(Arc::new(AtomicU64::new(start_ns)))
    }

    /// Moves the clock forward by `delta_ns`.
    pub fn advance_ns(&self, delta_ns: u64) {
        self.0.fetch_add(delta_ns, Ordering::SeqCst);
    }

    /// Sets the clock; refuses to go backwards (returns false).
    pub fn set_ns(&self, now_ns: u64) -> bool {
        self.0.fetch_max(now_ns, Ordering::SeqCst) <= now_ns
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_never_goes_back_and_sleep_reaches_deadline() {
        let a = monotonic_ns();
        let deadline = a + 200_000;
        ClockId::Monotonic.sleep_until_ns(deadline).unwrap();
        assert!(monotonic_ns() >= deadline);
        // A past deadline returns at once, without error.
        ClockId::Monotonic.sleep_until_ns(a).unwrap();
    }

    #[test]
    fn tai_is_utc_plus_whole_seconds() {
        let off = tai_offset_s();
        assert!((0..=100).contains(&off), "TAI-UTC offset {off}");
        let diff = tai_ns() as i128 - realtime_ns() as i128 - off as i128 * 1_000_000_000;
        assert!(diff.abs() < 1_000_000_000);
    }

    #[test]
    fn manual_clock_is_shared_and_monotone() {
        let c = ManualClock::new(10);
        let d = c.clone();
        d.advance_ns(5);
        assert_eq!(c.now_ns(), 15);
        assert!(c.set_ns(20));
        assert!(!c.set_ns(19));
        assert_eq!(d.now_ns(), 20);
    }
}
