//! Timer probe: a configured thread sleeps to absolute deadlines every
//! `interval` (clock_nanosleep, TIMER_ABSTIME) and records how late it woke,
//! the measurement cyclictest makes.

use std::time::Duration;

use serde::Serialize;

use super::{ProbeControl, ProbeError, ProbeRun};
use crate::clock::ClockId;
use crate::config::ThreadConfig;
use crate::spawn::RtThreadBuilder;
use crate::stats::LatencyHistogram;

/// Parameters of a timer probe.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TimerProbe {
    /// Measurement thread setup.
    pub thread: ThreadConfig,
    /// Period between deadlines.
    pub interval: Duration,
    /// Number of wake-ups to measure.
    pub samples: u64,
    /// Clock the deadlines are on.
    pub clock: ClockId,
}

impl TimerProbe {
    /// A probe taking as many samples as fit in `duration`.
    pub fn for_duration(thread: ThreadConfig, interval: Duration, duration: Duration) -> Self {
        let per = interval.as_nanos().max(1);
        TimerProbe {
            thread,
            interval,
            samples: (duration.as_nanos() / per).max(1) as u64,
            clock: ClockId::Monotonic,
        }
    }

    /// Runs the probe to completion (or until `control.stop()`).
    pub fn run(&self, control: &ProbeControl) -> Result<ProbeRun, ProbeError> {
        let interval_ns = self.interval.as_nanos();
        if !(1_000..=10_000_000_000).contains(&interval_ns) {
            return Err(ProbeError::Invalid(format!(
                "interval {:?} outside 1 us ..= 10 s",
                self.interval
            )));
        }
        let interval_ns = interval_ns as u64;
        let samples = self.samples;
        let clock = self.clock;
        let ctl = control.clone();
        let thread = RtThreadBuilder::new("rt-probe-timer")
            .config(self.thread.clone())
            .spawn(move |_| measure(clock, interval_ns, samples, &ctl))?;
        let report = thread.report().clone();
        let (histogram, missed) = thread
            .join()
            .map_err(|e| ProbeError::Thread(e.to_string()))??;
        Ok(ProbeRun {
            histogram,
            report,
            missed,
        })
    }
}

/// The measurement loop. The histogram is allocated before the first
/// deadline; the loop itself does not allocate.
fn measure(
    clock: ClockId,
    interval_ns: u64,
    samples: u64,
    ctl: &ProbeControl,
) -> Result<(LatencyHistogram, u64), ProbeError> {
    let mut hist = LatencyHistogram::new();
    let mut missed = 0u64;
    let mut next = clock.now_ns() + interval_ns;
    for _ in 0..samples {
        if ctl.stopped() {
            break;
        }
        clock
            .sleep_until_ns(next)
            .map_err(|e| ProbeError::io("clock_nanosleep", e))?;
        let now = clock.now_ns();
        hist.record(now.saturating_sub(next));
        ctl.add_sample();
        next += interval_ns;
        // Woke after the following deadline too: skip the periods we missed,
        // as cyclictest does, and count them.
        while now > next {
            next += interval_ns;
            missed += 1;
        }
    }
    Ok((hist, missed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_the_requested_samples_and_reports_the_thread() {
        let probe = TimerProbe {
            thread: ThreadConfig::default(),
            interval: Duration::from_micros(200),
            samples: 50,
            clock: ClockId::Monotonic,
        };
        let run = probe.run(&ProbeControl::default()).unwrap();
        assert_eq!(run.histogram.len(), 50);
        assert!(run.report.fully_applied());
    }

    #[test]
    fn rejects_silly_intervals_and_honours_stop() {
        let mut probe = TimerProbe::for_duration(
            ThreadConfig::default(),
            Duration::from_nanos(10),
            Duration::from_secs(1),
        );
        assert!(matches!(
            probe.run(&ProbeControl::default()),
            Err(ProbeError::Invalid(_))
        ));
        probe.interval = Duration::from_millis(1);
        let ctl = ProbeControl::default();
        ctl.stop();
        assert_eq!(probe.run(&ctl).unwrap().histogram.len(), 0);
    }
}
