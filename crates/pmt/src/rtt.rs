//! Round-trip-time estimator: exponentially weighted mean with gain 1/2 and deviation
//! with gain 1/4. The mean reacts faster than RFC 6298's 1/8 on purpose: the RTT sets
//! the group period, and a period that lags a capacity drop builds a queue whose delay
//! then inflates the period (under a 1 -> 0.7 -> 0.5 Mbit/s schedule the fast receiver
//! finished at 1.10x its floor with 1/2, 1.13x with 1/8).
//!
//! A sample is the time from sending a round's burst to receiving the ACK that its
//! last segment triggered, minus the receiver's reported hold time, so it includes the
//! burst's serialisation: the period that keeps the link just busy.

use std::time::Duration;

#[derive(Clone, Copy, Debug)]
pub struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    latest: Option<Duration>,
    initial: Duration,
    provisional: bool,
}

impl RttEstimator {
    pub fn new(initial: Duration) -> Self {
        Self {
            srtt: None,
            rttvar: initial / 2,
            latest: None,
            initial,
            provisional: false,
        }
    }

    /// A lower-bound sample (the round's tail was lost): used only until the first
    /// full sample, which then replaces it.
    pub fn provisional_sample(&mut self, rtt: Duration) {
        if self.srtt.is_none() || self.provisional {
            self.srtt = None;
            self.sample(rtt);
            self.provisional = true;
        }
    }

    pub fn sample(&mut self, rtt: Duration) {
        self.latest = Some(rtt);
        if std::mem::take(&mut self.provisional) {
            self.srtt = None;
        }
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(s) => {
                let dev = s.abs_diff(rtt);
                self.rttvar = (self.rttvar * 3 + dev) / 4;
                self.srtt = Some((s + rtt) / 2);
            }
        }
    }

    /// Smoothed RTT, or the configured initial guess before the first sample.
    pub fn srtt(&self) -> Duration {
        self.srtt.unwrap_or(self.initial)
    }

    /// Whether a full (non-provisional) sample has arrived.
    pub fn has_sample(&self) -> bool {
        self.srtt.is_some() && !self.provisional
    }

    pub fn latest(&self) -> Option<Duration> {
        self.latest
    }

    /// Retransmission timeout for segments no ACK has reported on.
    pub fn rto(&self) -> Duration {
        (self.srtt() + self.rttvar * 4).max(self.srtt() * 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converges_and_tracks_changes() {
        let mut r = RttEstimator::new(Duration::from_secs(1));
        assert_eq!(r.srtt(), Duration::from_secs(1));
        for _ in 0..50 {
            r.sample(Duration::from_millis(100));
        }
        assert!(r.srtt().abs_diff(Duration::from_millis(100)) < Duration::from_millis(1));
        for _ in 0..50 {
            r.sample(Duration::from_millis(300));
        }
        assert!(r.srtt().abs_diff(Duration::from_millis(300)) < Duration::from_millis(1));
        assert!(r.rto() >= r.srtt() * 2);
    }
}
