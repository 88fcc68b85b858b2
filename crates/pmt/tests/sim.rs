//! PMT over the simulated network in virtual time: every run replays from its seed.

use std::time::Duration;

use radiohost_pmt::receiver::ReceiverConfig;
use radiohost_pmt::sender::{PeerState, SenderConfig, SenderEvent};
use radiohost_pmt::sim::{receiver_addr, run_multicast, run_pmt, PmtSim, SENDER_ADDR};
use radiohost_pmt::wire::{self, Ack, Data};
use radiohost_testbed::link::{CapacityChange, GilbertElliott, LinkConfig};

fn link(spec: &str) -> LinkConfig {
    LinkConfig::parse(spec).expect("valid link spec")
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn byte_exact_over_many_seeds_with_loss_bursts_reordering_duplication() {
    let links = [
        link("2Mbit,2%,delay=5ms,reorder=5%/20ms,dup=2%"),
        LinkConfig {
            burst: Some(GilbertElliott {
                p_good_to_bad: 0.05,
                p_bad_to_good: 0.3,
                loss_good: 0.01,
                loss_bad: 0.7,
            }),
            ..link("500kbit,5%,delay=20ms,dup=1%")
        },
        link("300kbit,20%,delay=40ms,reorder=10%/30ms"),
    ];
    for seed in 0..24 {
        let out = run_pmt(60_000, &links, seed, SenderConfig::default(), secs(300)).unwrap();
        for (i, r) in out.receivers.iter().enumerate() {
            assert!(r.intact, "seed {seed} receiver {i} not byte-exact: {r:?}");
            assert!(r.seconds.is_some(), "seed {seed} receiver {i} unfinished");
        }
    }
}

#[test]
fn same_seed_replays_identically() {
    let links = [link("1Mbit,10%"), link("200kbit,20%,reorder=5%/10ms")];
    let a = run_pmt(40_000, &links, 9, SenderConfig::default(), secs(100)).unwrap();
    let b = run_pmt(40_000, &links, 9, SenderConfig::default(), secs(100)).unwrap();
    let times = |o: &radiohost_pmt::sim::RunOutcome| {
        o.receivers.iter().map(|r| r.seconds).collect::<Vec<_>>()
    };
    assert_eq!(times(&a), times(&b));
    assert_eq!(a.sender_stats, b.sender_stats);
}

#[test]
fn fast_receiver_is_not_held_back_by_slow_one() {
    let links = [link("1Mbit,1%"), link("250kbit,20%")];
    let out = run_pmt(200_000, &links, 3, SenderConfig::default(), secs(100)).unwrap();
    let fast = out.receivers[0].seconds.unwrap();
    let slow = out.receivers[1].seconds.unwrap();
    assert!(fast * 3.0 < slow, "fast {fast} slow {slow}");
    // The two receivers end in different groups.
    let last = out.trace.last().unwrap();
    assert!(!last.periods.is_empty());
    let groups_seen: std::collections::HashSet<(usize, usize)> = out
        .trace
        .iter()
        .filter(|r| r.group.len() == 2)
        .map(|r| (r.group[0], r.group[1]))
        .collect();
    assert!(
        groups_seen.contains(&(0, 1)),
        "never split: {groups_seen:?}"
    );
}

#[test]
fn group_assignment_follows_rtt_changes() {
    // Receiver 0 starts fast and drops to 100 kbit/s at t = 2 s; receiver 1 stays at
    // 400 kbit/s. Receiver 0 must move from the fast group to the slow one and
    // receiver 1 must take its place.
    let mut r0 = link("1Mbit,1%");
    r0.capacity_schedule = vec![CapacityChange {
        at: secs(2),
        rate_bps: 100e3,
    }];
    let links = [r0, link("400kbit,1%")];
    let out = run_pmt(400_000, &links, 5, SenderConfig::default(), secs(200)).unwrap();
    let moved = |rx: usize, from: usize, to: usize| {
        out.sender_events.iter().any(|(t, e)| {
            matches!(e, SenderEvent::GroupChanged { receiver, from: f, to: tt, .. }
                if *receiver == rx && *f == from && *tt == to && *t > secs(2))
        })
    };
    assert!(
        moved(0, 0, 1),
        "receiver 0 never demoted: {:?}",
        out.sender_events
    );
    assert!(
        moved(1, 1, 0),
        "receiver 1 never promoted: {:?}",
        out.sender_events
    );
    assert!(out.receivers.iter().all(|r| r.intact));
}

#[test]
fn bad_packets_are_ignored_and_counted() {
    let psk = b"shared secret".to_vec();
    let links = [link("1Mbit,5%"), link("300kbit,10%")];
    let cfg = SenderConfig {
        psk: Some(psk.clone()),
        ..Default::default()
    };
    let rcfg = ReceiverConfig {
        psk: Some(psk.clone()),
        ..Default::default()
    };
    let mut sim = PmtSim::new(50_000, &links, 11, cfg, rcfg).unwrap();
    let key = wire::Psk::new(&psk);
    let wrong = wire::Psk::new(b"guess");
    let evil = "10.9.9.9:7000".parse().unwrap();
    let rx0 = receiver_addr(0);
    let payload = [0xEEu8; 1400];
    let forged = |seq: u32, k: &wire::Psk| {
        let mut b = Vec::new();
        let d = Data {
            round: 0,
            seq,
            object_len: 50_000,
            seg_size: 1400,
            idx: 0,
            count: 1,
            last: true,
            payload: &payload,
        };
        wire::encode_data(&mut b, 1, &d, Some(k));
        b
    };
    let t = Duration::from_millis(1);
    // Garbage, truncated and bit-flipped packets.
    sim.net.inject(t, SENDER_ADDR, rx0, b"\x01\x01garbage");
    let mut flipped = forged(3, &key);
    flipped[30] ^= 0x40;
    sim.net.inject(t, SENDER_ADDR, rx0, &flipped);
    // Forged data from the sender's address with a wrong key, and without a key.
    sim.net.inject(t, SENDER_ADDR, rx0, &forged(0, &wrong));
    let mut unsigned = Vec::new();
    wire::encode_data(
        &mut unsigned,
        1,
        &Data {
            round: 0,
            seq: 1,
            object_len: 50_000,
            seg_size: 1400,
            idx: 0,
            count: 1,
            last: true,
            payload: &payload,
        },
        None,
    );
    sim.net.inject(t, SENDER_ADDR, rx0, &unsigned);
    // A correctly keyed packet from a non-member host.
    sim.net.inject(t, evil, rx0, &forged(2, &key));
    // Forged ACKs to the sender: from a non-member, and one claiming unsent data.
    let mut ack = Vec::new();
    let a = Ack {
        round: 0,
        cum: 35,
        window_end: 100,
        ack_delay_us: 0,
        rtt_sample: true,
        partial_sample: false,
        have_meta: true,
        complete: true,
        intact: true,
        bitmap: &[],
    };
    wire::encode_ack(&mut ack, 1, &a, Some(&key));
    sim.net.inject(t, evil, SENDER_ADDR, &ack);
    sim.net.inject(Duration::ZERO, rx0, SENDER_ADDR, &ack);
    // Replays of genuine traffic later on: duplicates.
    sim.run(secs(100));
    let out = sim.outcome();
    assert!(
        out.receivers.iter().all(|r| r.intact),
        "{:?}",
        out.receivers
    );
    let rs = &out.receiver_stats[0];
    assert_eq!(rs.malformed, 2, "{rs:?}");
    assert_eq!(rs.auth_failures, 2, "{rs:?}");
    assert_eq!(rs.non_member, 1, "{rs:?}");
    let ss = out.sender_stats.unwrap();
    assert_eq!(ss.non_member, 1, "{ss:?}");
    assert_eq!(ss.invalid_acks, 1, "{ss:?}");
}

#[test]
fn duplicated_and_out_of_window_data_is_counted() {
    let links = [link("1Mbit,0%,dup=30%")];
    let rcfg = ReceiverConfig {
        buffer_segments: 8,
        ..Default::default()
    };
    let mut sim = PmtSim::new(100_000, &links, 2, SenderConfig::default(), rcfg).unwrap();
    let payload = [0u8; 1400];
    let mut far = Vec::new();
    wire::encode_data(
        &mut far,
        1,
        &Data {
            round: 0,
            seq: 60,
            object_len: 100_000,
            seg_size: 1400,
            idx: 0,
            count: 8,
            last: false,
            payload: &payload,
        },
        None,
    );
    sim.net.inject(
        Duration::from_millis(1),
        SENDER_ADDR,
        receiver_addr(0),
        &far,
    );
    sim.run(secs(100));
    let out = sim.outcome();
    assert!(out.receivers[0].intact);
    let rs = &out.receiver_stats[0];
    assert!(rs.duplicates > 5, "{rs:?}");
    assert_eq!(rs.out_of_window, 1, "{rs:?}");
}

#[test]
fn vanished_receiver_fails_after_timeout_without_stalling_others() {
    let links = [link("1Mbit,1%"), link("500kbit,5%"), link("250kbit,10%")];
    let cfg = SenderConfig {
        fail_timeout: secs(5),
        ..Default::default()
    };
    let mut sim = PmtSim::new(300_000, &links, 4, cfg, ReceiverConfig::default()).unwrap();
    while sim.now() < secs(1) && sim.step(secs(1)) {}
    sim.dead[1] = true;
    sim.run(secs(200));
    let out = sim.outcome();
    assert!(out.receivers[0].intact && out.receivers[2].intact);
    assert!(!out.receivers[1].intact);
    let failed_at = out
        .sender_events
        .iter()
        .find_map(|(t, e)| {
            matches!(e, SenderEvent::ReceiverFailed { receiver: 1, .. }).then_some(*t)
        })
        .expect("receiver 1 declared failed");
    assert!(
        failed_at >= secs(5) && failed_at <= secs(7),
        "failed at {failed_at:?}"
    );
    assert_eq!(sim.sender.peer(1).state, PeerState::Failed);
    assert!(sim.sender.is_finished());
    // The others were not held up by the silent one: the fast one finished long
    // before the failure was even declared.
    assert!(out.receivers[0].seconds.unwrap() < failed_at.as_secs_f64());
}

#[test]
fn sender_state_is_bounded() {
    let links = [link("1Mbit,20%"), link("100kbit,30%")];
    let small = PmtSim::new(
        10_000,
        &links,
        1,
        SenderConfig::default(),
        ReceiverConfig::default(),
    )
    .unwrap();
    let mut big = PmtSim::new(
        2_000_000,
        &links,
        1,
        SenderConfig::default(),
        ReceiverConfig::default(),
    )
    .unwrap();
    let before = big.sender.state_bytes();
    assert_eq!(
        before,
        small.sender.state_bytes(),
        "state must not scale with object size"
    );
    big.run(secs(20));
    assert!(!big.sender.is_finished());
    assert_eq!(big.sender.state_bytes(), before, "state grew while running");
}

#[test]
fn flow_control_stops_at_the_receivers_buffer() {
    // A receiver whose application never reads: the sender must stop at its window.
    use radiohost_pmt::{Receiver, Sender};
    let rx = receiver_addr(0);
    let object: std::sync::Arc<[u8]> = vec![7u8; 200 * 1400].into();
    let mut s = Sender::new(SenderConfig::default(), object, &[rx], Duration::ZERO).unwrap();
    let mut r = Receiver::new(ReceiverConfig {
        buffer_segments: 16,
        ..Default::default()
    });
    let mut buf = Vec::new();
    let mut now = Duration::ZERO;
    for _ in 0..2000 {
        if s.poll_timeout().is_some_and(|t| t <= now) {
            s.handle_timeout(now);
        }
        while let Some(to) = s.poll_transmit(&mut buf) {
            r.handle_datagram(now, SENDER_ADDR, &buf.clone());
            assert_eq!(to, rx);
        }
        r.handle_timeout(now);
        while let Some(_to) = r.poll_transmit(now, &mut buf) {
            s.handle_datagram(now, rx, &buf.clone());
        }
        now += Duration::from_millis(5);
    }
    assert_eq!(r.received_bytes(), 16 * 1400);
    assert_eq!(r.stats().out_of_window, 0, "sender overran the window");
    // Reading frees the ring and the transfer resumes.
    let mut sink = vec![0u8; 1 << 20];
    let mut total = 0;
    for _ in 0..20000 {
        total += r.read(&mut sink);
        if s.poll_timeout().is_some_and(|t| t <= now) {
            s.handle_timeout(now);
        }
        while s.poll_transmit(&mut buf).is_some() {
            r.handle_datagram(now, SENDER_ADDR, &buf.clone());
        }
        r.handle_timeout(now);
        while r.poll_transmit(now, &mut buf).is_some() {
            s.handle_datagram(now, rx, &buf.clone());
        }
        now += Duration::from_millis(5);
        if s.is_finished() {
            break;
        }
    }
    total += r.read(&mut sink);
    assert_eq!(total, 200 * 1400);
    assert_eq!(r.result(), Some(true));
}

#[test]
fn k_groups_and_per_receiver_settings_all_deliver() {
    let links = [
        link("2Mbit,1%"),
        link("1Mbit,5%"),
        link("500kbit,5%"),
        link("250kbit,20%"),
    ];
    for k in 1..=4 {
        let cfg = SenderConfig {
            groups: k,
            ..Default::default()
        };
        let out = run_pmt(80_000, &links, 7, cfg, secs(200)).unwrap();
        assert!(out.receivers.iter().all(|r| r.intact), "k={k}");
        assert!(out.trace.iter().all(|row| row.periods.len() <= k));
    }
}

#[test]
fn multicast_baseline_delivers_at_the_slowest_rate() {
    let links = [link("1Mbit,1%"), link("250kbit,20%")];
    let out = run_multicast(100_000, &links, 1, secs(200));
    assert!(
        out.receivers.iter().all(|r| r.intact),
        "{:?}",
        out.receivers
    );
    // One rate for all: the fast receiver is paced by the slow link's capacity.
    let fast = out.receivers[0].seconds.unwrap();
    assert!(
        fast > 100_000.0 * 8.0 / 250e3,
        "fast receiver {fast}s beat the slow rate"
    );
}

#[test]
fn empty_object_completes() {
    let out = run_pmt(
        0,
        &[link("1Mbit,10%")],
        1,
        SenderConfig::default(),
        secs(60),
    )
    .unwrap();
    assert!(out.receivers[0].intact);
}

#[test]
fn sender_state_stays_bounded_when_the_driver_stops_draining() {
    use radiohost_pmt::Sender;
    let rx = [receiver_addr(0), receiver_addr(1)];
    let object: std::sync::Arc<[u8]> = vec![1u8; 500_000].into();
    let mut s = Sender::new(SenderConfig::default(), object, &rx, Duration::ZERO).unwrap();
    let before = s.state_bytes();
    let mut now = Duration::ZERO;
    for _ in 0..10_000 {
        now += Duration::from_millis(10);
        s.handle_timeout(now); // never polls transmits or events
    }
    assert_eq!(s.state_bytes(), before);
    assert!(s.stats().skipped_ticks > 0);
}
