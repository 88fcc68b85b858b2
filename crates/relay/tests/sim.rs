//! The relay's timing check under simulated time: every burst's verdict must
//! follow exactly from the host latencies, link losses and radio policy.

use std::collections::HashMap;
use std::time::Duration;

use radiohost_relay::sim::{simulate, HostAction};
use radiohost_relay::{AirConfig, Combined, CopyOutcome, LatePolicy};
use radiohost_testbed::LinkConfig;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const N: u64 = 200; // samples per burst
const DELTA: u64 = 2000; // ticks (200 us at 10 Msps)

fn link(delay_us: u64, loss: f64, seed: u64) -> LinkConfig {
    LinkConfig {
        delay: Duration::from_micros(delay_us),
        loss,
        seed,
        ..LinkConfig::default()
    }
}

fn config(bursts: u64, period: u64, policy: LatePolicy, loss: f64) -> AirConfig {
    AirConfig {
        rate_sps: 10_000_000,
        burst_samples: N as usize,
        period_ticks: period,
        bursts,
        start_tick: 1000,
        delta_ticks: DELTA,
        tolerance_ticks: 3,
        deadline_ticks: 500,
        late_policy: policy,
        source_links: vec![link(5, loss, 1), link(7, loss, 2)],
        dest_links: vec![link(3, loss, 3), link(2, loss, 4)],
        tx_capacity_pkts: 32,
    }
}

/// Relay 1's host for burst b: the latency that makes its copy `k` ticks late
/// at the radio (the burst exists `N` ticks after its RX timestamp).
fn pattern(b: u64) -> HostAction {
    let late_by = |k: u64| HostAction::After(DELTA - N + k);
    match b % 6 {
        0 => HostAction::After(0),
        1 => late_by(0), // reaches the radio exactly at its TX time
        2 => late_by(3), // within tolerance
        3 => late_by(4), // just past it
        4 => HostAction::Drop,
        _ => late_by(501), // past the deadline
    }
}

fn host(relay: usize, b: u64) -> HostAction {
    if relay == 0 {
        HostAction::After(0)
    } else {
        pattern(b)
    }
}

#[test]
fn every_burst_is_classified_exactly_when_late_copies_are_sent() {
    let r = simulate(config(60, 1000, LatePolicy::Send, 0.0), host).unwrap();
    assert_eq!(r.outcomes.len(), 60);
    for o in &r.outcomes {
        let expect1 = match o.burst % 6 {
            0 | 1 => CopyOutcome::OnTime { offset: 0 },
            2 => CopyOutcome::OnTime { offset: 3 },
            3 => CopyOutcome::Late { offset: 4 },
            4 => CopyOutcome::Missing {
                arrived_offset: None,
            },
            _ => CopyOutcome::Missing {
                arrived_offset: Some(501),
            },
        };
        let combined = match o.burst % 6 {
            0..=2 => Combined::OnTime,
            3 => Combined::Late,
            _ => Combined::Missing,
        };
        assert_eq!(
            o.copies(),
            &[CopyOutcome::OnTime { offset: 0 }, expect1],
            "burst {}",
            o.burst
        );
        assert_eq!(o.combined, combined, "burst {}", o.burst);
    }
    let t = &r.air.tally;
    assert_eq!((t.bursts, t.on_time, t.late, t.missing), (60, 30, 10, 20));
    assert_eq!(t.any_on_time, 60);
    assert_eq!(t.per_relay[1].after_deadline, 10);
    let r1 = &r.air.relays[1];
    assert_eq!((r1.radio_late, r1.retimed), (30, 30));
    assert_eq!(r.air.relays[0].radio_late, 0);
    assert_eq!(r.air.max_offset_ns, Some(50_100)); // 501 ticks of 100 ns
    assert_eq!(r.hosts[1].scheduled, 50);
    assert_eq!(r.air.untracked_samples, 0);
    assert!(r.air.relays.iter().all(|x| x.corrupt == 0));
}

#[test]
fn late_copies_are_missing_when_the_radio_drops_them() {
    let r = simulate(config(60, 1000, LatePolicy::Drop, 0.0), host).unwrap();
    for o in &r.outcomes {
        let on_time = o.burst % 6 <= 1;
        assert_eq!(o.copies()[1].is_on_time(), on_time, "burst {}", o.burst);
        if !on_time {
            assert_eq!(
                o.copies()[1],
                CopyOutcome::Missing {
                    arrived_offset: None
                }
            );
        }
    }
    let t = &r.air.tally;
    assert_eq!((t.on_time, t.late, t.missing), (20, 0, 40));
    assert_eq!(r.air.relays[1].tx.late_packets, 30);
    assert_eq!(r.air.relays[1].retimed, 0);
}

#[test]
fn random_latencies_and_losses_are_accounted_exactly() {
    let bursts = 400;
    // Period 3 x delta: even the latest retimed copy ends before the next one.
    let cfg = config(bursts, 3 * DELTA, LatePolicy::Send, 0.1);
    let (tol, deadline) = (cfg.tolerance_ticks as i64, cfg.deadline_ticks as i64);
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut chosen: HashMap<(usize, u64), HostAction> = HashMap::new();
    let r = simulate(cfg, |relay, b| {
        let a = if rng.gen_bool(0.05) {
            HostAction::Drop
        } else {
            HostAction::After(rng.gen_range(0..2 * DELTA))
        };
        chosen.insert((relay, b), a);
        a
    })
    .unwrap();
    let t = &r.air.tally;
    assert_eq!(t.bursts, bursts);
    assert_eq!(t.on_time + t.late + t.missing, bursts);
    let mut host_drops = [0u64; 2];
    for o in &r.outcomes {
        for (relay, c) in o.copies().iter().enumerate() {
            let action = chosen.get(&(relay, o.burst));
            if action == Some(&HostAction::Drop) {
                host_drops[relay] += 1;
            }
            // Exact offset: how late the copy reached the radio, or 0.
            let expect = match action {
                Some(HostAction::After(l)) => (*l as i64 - (DELTA - N) as i64).max(0),
                _ => {
                    assert_eq!(
                        *c,
                        CopyOutcome::Missing {
                            arrived_offset: None
                        }
                    );
                    continue;
                }
            };
            let want = if expect > deadline {
                CopyOutcome::Missing {
                    arrived_offset: Some(expect),
                }
            } else if expect > tol {
                CopyOutcome::Late { offset: expect }
            } else {
                CopyOutcome::OnTime { offset: expect }
            };
            // A copy can still be lost on the relay -> destination link, and
            // one arriving after its burst was classified is stale.
            if *c != want {
                assert_eq!(
                    *c,
                    CopyOutcome::Missing {
                        arrived_offset: None
                    }
                );
            }
        }
    }
    for (relay, drops) in host_drops.into_iter().enumerate() {
        let pr = &t.per_relay[relay];
        let rr = &r.air.relays[relay];
        assert_eq!(pr.on_time + pr.late + pr.early + pr.missing, bursts);
        assert_eq!(pr.early, 0);
        assert!(rr.stage1_lost > 0 && rr.copy_lost > 0, "losses exercised");
        // Every missing copy has exactly one recorded cause.
        assert_eq!(
            pr.missing,
            rr.stage1_lost + drops + rr.copy_lost + pr.after_deadline + pr.stale,
            "relay {relay}"
        );
        assert_eq!(rr.tx.overlaps + rr.tx.overflows + rr.corrupt, 0);
    }
    assert_eq!(r.air.in_flight_copies, 0, "the run drained");
}

#[test]
fn impossible_configurations_are_refused_with_a_reason() {
    let mut c = config(10, 1000, LatePolicy::Send, 0.0);
    c.delta_ticks = 100;
    let e = simulate(c, host).err().unwrap().to_string();
    assert!(e.contains("delta"), "{e}");
    let mut c = config(10, 1000, LatePolicy::Send, 0.0);
    c.period_ticks = 10;
    assert!(simulate(c, host).is_err());
    let mut c = config(10, 1000, LatePolicy::Send, 0.0);
    c.dest_links.pop();
    assert!(simulate(c, host).is_err());
    let mut c = config(10, 1000, LatePolicy::Send, 0.0);
    c.burst_samples = 20_000;
    assert!(simulate(c, host).is_err());
}
