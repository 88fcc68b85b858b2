//! The whole relay network in virtual time: the [`Air`] plus one
//! [`RelayScheduler`] per relay, with a host-latency model instead of threads
//! and sockets. Time is an [`rt::ManualClock`](radiohost_rt::ManualClock)
//! moved from event to event, so a run is exact and repeatable: tests check
//! every burst's classification against what the latencies imply.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use radiohost_rt::{Clock, ManualClock, Time};

use crate::air::{radio_tx_epid, Air, AirConfig, AirError, AirReport};
use crate::classify::BurstOutcome;
use crate::schedule::{RelayScheduler, SchedulerConfig, SchedulerCounters};

/// What a relay host does with a burst it received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostAction {
    /// Its TX packet reaches the radio this many ticks after the radio had
    /// the whole burst (radio -> host -> radio, host processing included).
    After(u64),
    /// The host loses it (e.g. a receive-buffer overflow).
    Drop,
}

/// A host TX packet on its way to the radio: (arrival tick, order, relay, bytes).
type InFlight = (u64, u64, usize, Vec<u8>);

pub struct SimReport {
    pub air: AirReport,
    /// Counters of the emulated air the source's bursts crossed.
    pub medium: radiohost_testbed::air::AirStats,
    pub hosts: Vec<SchedulerCounters>,
    /// Every burst's outcome, in classification order.
    pub outcomes: Vec<BurstOutcome>,
    /// Virtual time at the end, ns.
    pub end_ns: u64,
}

/// Run `cfg` to completion; `host(relay, burst)` says what each relay host does.
pub fn simulate(
    cfg: AirConfig,
    mut host: impl FnMut(usize, u64) -> HostAction,
) -> Result<SimReport, AirError> {
    let rate = cfg.rate_sps as f64;
    let n = cfg.burst_samples;
    let delta = cfg.delta_ticks;
    let mut air = Air::new(cfg)?;
    let mut schedulers: Vec<RelayScheduler> = (0..air.relays())
        .map(|i| {
            RelayScheduler::new(SchedulerConfig {
                relay: i as u8,
                delta_ticks: delta,
                tx_epid: radio_tx_epid(i),
                max_samples: n,
            })
        })
        .collect();
    let clock = ManualClock::new(0);
    let mut stage1 = vec![0u8; RelayScheduler::out_len(n)];
    let mut to_radio: BinaryHeap<Reverse<InFlight>> = BinaryHeap::new();
    let mut outcomes = Vec::new();
    let mut order = 0u64;
    let mut now = 0u64;
    loop {
        while let Some(s) = air.poll_stage1(now, &mut stage1)? {
            let HostAction::After(latency) = host(s.relay, s.burst) else {
                continue;
            };
            let mut out = vec![0u8; RelayScheduler::out_len(n)];
            if let Ok(sch) = schedulers[s.relay].on_stage1(&stage1[..s.len], now, &mut out) {
                out.truncate(sch.len);
                order += 1;
                to_radio.push(Reverse((now + latency, order, s.relay, out)));
            }
        }
        while to_radio.peek().is_some_and(|r| r.0 .0 <= now) {
            let Reverse((at, _, relay, bytes)) = to_radio.pop().expect("peeked");
            air.on_relay_tx(relay, &bytes, at);
        }
        air.advance(now, &mut |o| outcomes.push(*o));
        let next = [air.next_wake(), to_radio.peek().map(|r| r.0 .0)]
            .into_iter()
            .flatten()
            .min();
        // Run until nothing is in flight, so late copies are counted as stale
        // rather than left on the air.
        match next {
            Some(t) => {
                now = t.max(now + 1);
                clock.set_ns(Time::from_ticks(now, rate).ns());
            }
            None => {
                air.finish(&mut |o| outcomes.push(*o));
                break;
            }
        }
    }
    Ok(SimReport {
        air: air.report(),
        medium: air.medium_stats(),
        hosts: schedulers.iter().map(|s| s.counters()).collect(),
        outcomes,
        end_ns: clock.now_ns(),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use radiohost_testbed::LinkConfig;

    use super::*;
    use crate::air::LatePolicy;

    fn link(delay_us: u64, loss: f64, seed: u64) -> LinkConfig {
        LinkConfig {
            delay: Duration::from_micros(delay_us),
            loss,
            seed,
            ..LinkConfig::default()
        }
    }

    /// The relays hand over what their air port received: with prompt hosts every
    /// copy matches the source's burst, so every sample crossed the air intact.
    #[test]
    fn source_bursts_cross_the_air_to_the_relays() {
        let cfg = AirConfig {
            rate_sps: 10_000_000,
            burst_samples: 100,
            period_ticks: 1000,
            bursts: 20,
            start_tick: 500,
            delta_ticks: 1500,
            tolerance_ticks: 2,
            deadline_ticks: 400,
            late_policy: LatePolicy::Drop,
            source_links: vec![link(5, 0.2, 1), link(9, 0.0, 2)],
            dest_links: vec![link(3, 0.0, 3), link(2, 0.0, 4)],
            tx_capacity_pkts: 16,
        };
        let r = simulate(cfg, |_, _| HostAction::After(0)).unwrap();
        assert_eq!(r.outcomes.len(), 20);
        let lost0 = r.air.relays[0].stage1_lost;
        assert!(lost0 > 0, "the lossy link lost some bursts");
        for rep in &r.air.relays {
            assert_eq!(rep.corrupt, 0);
            assert_eq!(rep.stage1_late_emissions + rep.stage1_unreadable, 0);
        }
        // Every delivered burst was one emission of 100 samples on the air.
        assert_eq!(r.medium.emissions, 2 * 20 - lost0);
        assert_eq!(r.medium.late_emissions, 0);
        assert!(r.medium.samples_processed >= r.medium.emissions * 100);
        let on_time: u64 = r
            .outcomes
            .iter()
            .map(|o| o.copies().iter().filter(|c| c.offset() == Some(0)).count() as u64)
            .sum();
        assert_eq!(
            on_time,
            2 * 20 - lost0,
            "every copy that crossed the air is on time: {:?} {:?}",
            r.outcomes,
            r.air.relays
        );
    }
}
