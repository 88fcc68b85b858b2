//! Waiting until an absolute time with microsecond accuracy.
//!
//! Emulated links emit packets at the times their model says. A plain `sleep` on
//! Linux overshoots by the thread's timer slack (50 us by default), which would
//! blur a 1 Gbit/s link (a 9000-byte frame lasts 72 us). We shrink the slack once
//! per thread and spin for the last few microseconds.

use std::time::{Duration, Instant};

/// Below this, spinning beats sleeping.
const SPIN_THRESHOLD: Duration = Duration::from_micros(60);

/// Ask the kernel for 1 us timer slack on the calling thread. Harmless if refused.
pub fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument and touches no memory.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong, 0, 0, 0);
    }
}

/// Block until `deadline`: sleep most of the way, spin the rest.
pub fn sleep_until(deadline: Instant) {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let left = deadline - now;
        if left > SPIN_THRESHOLD {
            std::thread::sleep(left - SPIN_THRESHOLD / 2);
        } else {
            std::hint::spin_loop();
            if left > Duration::from_micros(5) {
                std::thread::yield_now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_returns_early() {
        tighten_timer_slack();
        for us in [0u64, 3, 40, 200, 1500] {
            let deadline = Instant::now() + Duration::from_micros(us);
            sleep_until(deadline);
            assert!(Instant::now() >= deadline);
        }
    }
}
