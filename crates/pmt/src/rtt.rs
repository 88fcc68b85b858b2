//! Round-trip-time estimator (RFC 6298 constants: gain 1/8 for the mean, 1/4 for the
//! deviation). A sample is the time from sending a round's burst to receiving the ACK
//! that its last segment triggered, minus the receiver's reported hold time, so it
//! includes the burst's serialisation: the period that keeps the link just busy.

use std::time::Duration;

#[derive(Clone, Copy, Debug)]
pub struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    latest: Option<Duration>,
    initial: Duration,
}

impl RttEstimator {
    pub fn new(initial: Duration) -> Self {
        Self {
            srtt: None,
            rttvar: initial / 2,
            latest: None,
            initial,
        }
    }

    pub fn sample(&mut self, rtt: Duration) {
        self.latest = Some(rtt);
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(s) => {
                let dev = s.abs_diff(rtt);
                self.rttvar = (self.rttvar * 3 + dev) / 4;
                self.srtt = Some((s * 7 + rtt) / 8);
            }
        }
    }

    /// Smoothed RTT, or the configured initial guess before the first sample.
    pub fn srtt(&self) -> Duration {
        self.srtt.unwrap_or(self.initial)
    }

    pub fn has_sample(&self) -> bool {
        self.srtt.is_some()
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
