//! The real-time driver end to end on loopback: threads, sockets, kernel
//! timestamps. Timing varies from machine to machine, so only the accounting
//! is checked: every burst gets exactly one verdict and nothing vanishes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use radiohost_relay::run::{run, RunConfig};
use radiohost_relay::{AirConfig, LatePolicy};
use radiohost_rt::ThreadConfig;
use radiohost_testbed::LinkConfig;

#[test]
fn every_burst_gets_one_verdict_in_a_real_run() {
    let bursts = 300;
    let link = LinkConfig {
        delay: Duration::from_micros(4),
        ..LinkConfig::default()
    };
    let cfg = RunConfig {
        air: AirConfig {
            rate_sps: 10_000_000,
            burst_samples: 100,
            period_ticks: 2_000,
            bursts,
            start_tick: 0,
            delta_ticks: 10_000, // 1 ms
            tolerance_ticks: 10,
            deadline_ticks: 20_000,
            late_policy: LatePolicy::Send,
            source_links: vec![link.clone(), link.clone()],
            dest_links: vec![link.clone(), link],
            tx_capacity_pkts: 64,
        },
        relay_thread: ThreadConfig::default(),
        air_thread: ThreadConfig::default(),
        lead: Duration::from_millis(30),
        busy_poll: false,
    };
    let progress = Arc::new(AtomicU64::new(0));
    let r = run(cfg, progress.clone()).unwrap();
    let t = &r.air.tally;
    assert_eq!(t.bursts, bursts);
    assert_eq!(progress.load(Ordering::Relaxed), bursts);
    assert_eq!(t.on_time + t.late + t.missing, bursts);
    assert_eq!(r.air.bursts_sent, bursts);
    for (i, h) in r.hosts.iter().enumerate() {
        let pr = &t.per_relay[i];
        assert_eq!(pr.on_time + pr.late + pr.early + pr.missing, bursts);
        assert_eq!(h.counters.received, bursts, "lossless links: host {i}");
        assert_eq!(h.counters.malformed + h.counters.duplicates, 0);
        assert_eq!(h.rx_to_tx.samples, h.counters.scheduled);
        let rr = &r.air.relays[i];
        assert_eq!(rr.malformed + rr.corrupt + rr.stage1_lost + rr.copy_lost, 0);
    }
    assert_eq!(r.air.untracked_samples, 0);
    assert_eq!(r.emit_lag.samples, 2 * bursts);
}
