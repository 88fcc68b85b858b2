//! The whole relay network in virtual time: the [`Air`] plus one
//! [`RelayScheduler`] per relay, with a host-latency model instead of threads
//! and sockets. Time is an [`rt::ManualClock`](radiohost_rt::ManualClock)
//! moved from event to event, so a run is exact and repeatable: tests check
//! every burst's classification against what the latencies imply.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use radiohost_rt::{Clock, ManualClock};

use crate::air::{radio_tx_epid, ticks_to_duration, Air, AirConfig, AirError, AirReport};
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
    let rate = cfg.rate_sps;
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
                clock.set_ns(ticks_to_duration(now, rate).as_nanos() as u64);
            }
            None => {
                air.finish(&mut |o| outcomes.push(*o));
                break;
            }
        }
    }
    Ok(SimReport {
        air: air.report(),
        hosts: schedulers.iter().map(|s| s.counters()).collect(),
        outcomes,
        end_ns: clock.now_ns(),
    })
}
