#![no_main]
//! Arbitrary datagrams at a relay host (stage-1 input) and at a relay radio
//! (host TX input), with arbitrary arrival times: no panic, and every burst
//! still gets exactly one verdict.
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use radiohost_relay::air::{Air, AirConfig, LatePolicy};
use radiohost_relay::schedule::{RelayScheduler, SchedulerConfig};
use radiohost_testbed::LinkConfig;

fuzz_target!(|data: &[u8]| {
    if data.len() < 9 {
        return;
    }
    let (head, body) = data.split_at(9);
    let now = u64::from_le_bytes(head[..8].try_into().unwrap()) % 1_000_000;
    let link = LinkConfig {
        delay: Duration::from_micros(1),
        ..LinkConfig::default()
    };
    let mut air = Air::new(AirConfig {
        rate_sps: 1_000_000,
        burst_samples: 16,
        period_ticks: 100,
        bursts: 4,
        start_tick: 0,
        delta_ticks: 50,
        tolerance_ticks: 1,
        deadline_ticks: 100,
        late_policy: if head[8] & 1 == 0 { LatePolicy::Send } else { LatePolicy::Drop },
        source_links: vec![link.clone(), link.clone()],
        dest_links: vec![link.clone(), link],
        tx_capacity_pkts: 4,
    })
    .unwrap();
    let mut sched = RelayScheduler::new(SchedulerConfig {
        relay: 1,
        delta_ticks: 50,
        tx_epid: 0x201,
        max_samples: 16,
    });
    let mut out = vec![0u8; RelayScheduler::out_len(16)];
    let _ = sched.on_stage1(body, now, &mut out);
    air.on_relay_tx((head[8] >> 1) as usize % 3, body, now);
    let mut verdicts = 0;
    air.advance(now, &mut |_| verdicts += 1);
    air.advance(2_000_000, &mut |_| verdicts += 1);
    air.finish(&mut |_| verdicts += 1);
    assert_eq!(verdicts, 4);
    assert_eq!(air.report().tally.bursts, 4);
});
