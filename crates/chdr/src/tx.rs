//! The transmit side of an emulated streaming radio, as a sans-IO core.
//!
//! Packets carry tick timestamps; the radio plays samples out against its own
//! sample clock (`now` in ticks, passed in). What it would have put on the air
//! goes to a sink as `(tick, samples)`. Missing data is an underrun (UHD `U`),
//! a packet whose time has passed is late (`L`), a sequence discontinuity is a
//! sequence error (`S`). The [`TxPolicy`] says what happens next.

use std::collections::VecDeque;

use radiohost_iq::Ci16;

use crate::flow::CreditReceiver;
use crate::wire::{DataPacket, Packet, StreamStatus, StreamStatusCode, WireError};

/// Recovery policy for underruns, late packets and sequence errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum TxPolicy {
    /// Output stays sample-synchronous: holes are zeros, the on-time part of a
    /// late packet is kept, sequence errors are only reported.
    ZeroFill,
    /// Classic radio behaviour: transmission stops on underrun and resumes at
    /// the next packet's time, late packets are dropped whole, and after a
    /// sequence error everything is dropped until the host sends RESYNC.
    DropResync,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum TxEvent {
    /// Data ran out while playing (`U`).
    Underrun {
        tick: u64,
    },
    /// A packet arrived after its time (`L`); `dropped` samples were discarded.
    Late {
        timestamp: u64,
        now: u64,
        dropped: usize,
    },
    /// Sequence discontinuity (`S`).
    SequenceError {
        expected: u16,
        got: u16,
    },
    /// The buffer was full: the host ignored flow control. Packet dropped.
    Overflow {
        seq: u16,
    },
    /// A packet overlapping samples already queued: dropped.
    Overlap {
        timestamp: u64,
    },
    /// A data packet dropped while waiting for RESYNC after a sequence error.
    DroppedAwaitingResync {
        seq: u16,
    },
    Resynced,
}

impl TxEvent {
    /// The letter UHD prints for this event, if it has one.
    pub fn letter(&self) -> Option<char> {
        match self {
            TxEvent::Underrun { .. } => Some('U'),
            TxEvent::Late { .. } => Some('L'),
            TxEvent::SequenceError { .. } => Some('S'),
            TxEvent::Overflow { .. } => Some('O'),
            _ => None,
        }
    }
}

/// What the driver must do after feeding the core.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TxAction {
    Event(TxEvent),
    /// Send this stream status to the host.
    Status(StreamStatus),
}

/// A data packet accepted for playout, for latency accounting by the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxArrival {
    pub timestamp: u64,
    pub samples: usize,
    /// Tick of the first sample queued for playout (after `timestamp` when the packet's
    /// late part was dropped); [`TxCore::queued_at`] gives the queued samples.
    pub queued_tick: u64,
    /// Samples queued for playout (`samples` less a dropped late part).
    pub queued: usize,
    /// Metadata word 0, where the host streamer puts the RX timestamp.
    pub rx_timestamp: Option<u64>,
    /// `timestamp - now` at arrival, in ticks (negative: late).
    pub margin_ticks: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TxConfig {
    pub epid: u16,
    /// Buffer capacity in packets, advertised for flow control.
    pub capacity_pkts: u32,
    /// Largest packet payload in samples.
    pub max_samples: usize,
    pub policy: TxPolicy,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TxCounters {
    pub packets: u64,
    pub samples_played: u64,
    pub zeros_played: u64,
    pub underruns: u64,
    pub late_packets: u64,
    pub late_samples_dropped: u64,
    pub seq_errors: u64,
    pub overflows: u64,
    pub overlaps: u64,
    pub dropped_awaiting_resync: u64,
    pub malformed: u64,
    pub commands: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Nothing to play and not expected to be (before the first packet, after EOB).
    Idle,
    Playing,
    /// Ran dry mid-burst (underrun reported).
    Starved,
}

#[derive(Clone, Copy, Debug)]
struct Queued {
    slot: usize,
    ts: u64,
    len: usize,
    bytes: usize,
    eob: bool,
}

pub struct TxCore {
    cfg: TxConfig,
    slots: Vec<Vec<Ci16>>,
    free: Vec<usize>,
    queue: VecDeque<Queued>,
    zeros: Vec<Ci16>,
    clock: Option<u64>,
    state: State,
    expected_seq: Option<u16>,
    awaiting_resync: bool,
    /// End tick of a burst whose EOB packet was dropped (late): stop there.
    burst_end: Option<u64>,
    flow: CreditReceiver,
    counters: TxCounters,
}

impl TxCore {
    pub fn new(cfg: TxConfig) -> Self {
        let cap = cfg.capacity_pkts.max(1) as usize;
        let max_bytes = crate::wire::data_packet_len(true, 31, cfg.max_samples) as u64;
        TxCore {
            cfg,
            slots: (0..cap)
                .map(|_| vec![Ci16::default(); cfg.max_samples])
                .collect(),
            free: (0..cap).rev().collect(),
            queue: VecDeque::with_capacity(cap),
            zeros: vec![Ci16::default(); cfg.max_samples.max(256)],
            clock: None,
            state: State::Idle,
            expected_seq: None,
            awaiting_resync: false,
            burst_end: None,
            flow: CreditReceiver::new(cfg.epid, cap as u32, max_bytes * cap as u64),
            counters: TxCounters::default(),
        }
    }

    pub fn counters(&self) -> TxCounters {
        self.counters
    }

    pub fn config(&self) -> TxConfig {
        self.cfg
    }

    /// The tick of the next sample to play (None before the first packet).
    pub fn clock(&self) -> Option<u64> {
        self.clock
    }

    pub fn queued_packets(&self) -> usize {
        self.queue.len()
    }

    /// The samples of the packet queued to play from `tick` (e.g.
    /// [`TxArrival::queued_tick`] right after `on_datagram`), whole even once
    /// [`Self::advance`] has begun playing it. Every queued sample is played at exactly
    /// its own tick, so a driver may put these on the air as soon as they arrive.
    pub fn queued_at(&self, tick: u64) -> Option<&[Ci16]> {
        let pos = self.queue.partition_point(|q| q.ts < tick);
        let q = self.queue.get(pos).filter(|q| q.ts == tick)?;
        self.slots.get(q.slot).and_then(|s| s.get(..q.len))
    }

    /// The EPID statuses should be addressed to (learned from INIT).
    pub fn peer_epid(&self) -> u16 {
        self.flow.peer_epid
    }

    /// Feed one datagram received at radio time `now`. Data packets return
    /// their arrival record when accepted; commands are answered via `actions`.
    pub fn on_datagram(
        &mut self,
        buf: &[u8],
        now: u64,
        actions: &mut impl FnMut(TxAction),
    ) -> Result<Option<TxArrival>, WireError> {
        let packet = Packet::parse(buf).inspect_err(|_| self.counters.malformed += 1)?;
        match packet {
            Packet::Data(p) => Ok(self.on_data(&p, now, actions)),
            Packet::Command(_, c) => {
                self.counters.commands += 1;
                if c.op == crate::wire::StreamCommandOp::Resync
                    || c.op == crate::wire::StreamCommandOp::Init
                {
                    if self.awaiting_resync {
                        actions(TxAction::Event(TxEvent::Resynced));
                    }
                    self.awaiting_resync = false;
                    self.expected_seq = None;
                }
                actions(TxAction::Status(self.flow.on_command(&c)));
                Ok(None)
            }
            Packet::Status(..) | Packet::Other(..) => {
                self.counters.malformed += 1;
                Err(WireError::UnexpectedType {
                    expected: "data or stream command",
                    got: match packet {
                        Packet::Status(h, _) | Packet::Other(h, _) => h.pkt_type,
                        _ => unreachable!("matched above"),
                    },
                })
            }
        }
    }

    fn consume(&mut self, bytes: usize, actions: &mut impl FnMut(TxAction)) {
        if let Some(s) = self.flow.on_consumed(bytes) {
            actions(TxAction::Status(s));
        }
    }

    fn on_data(
        &mut self,
        p: &DataPacket<'_>,
        now: u64,
        actions: &mut impl FnMut(TxAction),
    ) -> Option<TxArrival> {
        let seq = p.header.seq_num;
        let bytes = p.header.length as usize;
        self.counters.packets += 1;
        if let Some(expected) = self.expected_seq {
            if expected != seq && !self.awaiting_resync {
                self.counters.seq_errors += 1;
                actions(TxAction::Event(TxEvent::SequenceError {
                    expected,
                    got: seq,
                }));
                if self.cfg.policy == TxPolicy::DropResync {
                    self.awaiting_resync = true;
                    let st = self.flow.status(StreamStatusCode::SeqErr, expected as u64);
                    actions(TxAction::Status(st));
                }
            }
        }
        self.expected_seq = Some(seq.wrapping_add(1));
        if self.awaiting_resync {
            self.counters.dropped_awaiting_resync += 1;
            actions(TxAction::Event(TxEvent::DroppedAwaitingResync { seq }));
            self.consume(bytes, actions);
            return None;
        }
        // A timestamp this close to the end of time would overflow the clock.
        if p.timestamp
            .is_some_and(|t| t.checked_add(2 * self.cfg.max_samples as u64 + 1).is_none())
        {
            self.counters.malformed += 1;
            self.consume(bytes, actions);
            return None;
        }
        // Without a timestamp the packet continues the previous one.
        let last_end = self
            .queue
            .back()
            .map(|q| q.ts + q.len as u64)
            .or(self.clock);
        let Some(ts) = p.timestamp.or(last_end) else {
            // An untimed first packet starts "now".
            return self.enqueue(p, now, 0, 0, actions);
        };
        let cut = self.clock.map_or(now, |c| c.max(now));
        let n = p.num_samples();
        let arrival_margin = ts.wrapping_sub(now) as i64;
        if ts < cut {
            let late = (cut - ts).min(n as u64) as usize;
            let dropped = match self.cfg.policy {
                TxPolicy::ZeroFill => late,
                TxPolicy::DropResync => n,
            };
            self.counters.late_packets += 1;
            self.counters.late_samples_dropped += dropped as u64;
            actions(TxAction::Event(TxEvent::Late {
                timestamp: ts,
                now,
                dropped,
            }));
            if dropped == n {
                if p.header.eob {
                    self.burst_end = Some(ts + n as u64);
                }
                if self.clock.is_none() && self.cfg.policy == TxPolicy::ZeroFill {
                    self.clock = Some(ts); // output origin stays at the first packet's time
                }
                self.consume(bytes, actions);
                return None;
            }
            if self.clock.is_none() {
                self.clock = Some(ts);
            }
            return self.enqueue(p, ts + late as u64, arrival_margin, late, actions);
        }
        self.enqueue(p, ts, arrival_margin, 0, actions)
    }

    fn enqueue(
        &mut self,
        p: &DataPacket<'_>,
        ts: u64,
        margin: i64,
        skip: usize,
        actions: &mut impl FnMut(TxAction),
    ) -> Option<TxArrival> {
        let bytes = p.header.length as usize;
        let n = p.num_samples();
        if n > self.cfg.max_samples {
            self.counters.malformed += 1;
            self.consume(bytes, actions);
            return None;
        }
        let len = n - skip;
        // Sorted by time: arrivals out of order still play in the right place.
        let pos = self.queue.partition_point(|q| q.ts < ts);
        let overlaps_prev = pos > 0 && {
            let q = self.queue[pos - 1];
            q.ts + q.len as u64 > ts
        };
        let overlaps_next = self.queue.get(pos).is_some_and(|q| q.ts < ts + len as u64);
        if overlaps_prev || overlaps_next {
            self.counters.overlaps += 1;
            actions(TxAction::Event(TxEvent::Overlap { timestamp: ts }));
            self.consume(bytes, actions);
            return None;
        }
        let Some(slot) = self.free.pop() else {
            self.counters.overflows += 1;
            actions(TxAction::Event(TxEvent::Overflow {
                seq: p.header.seq_num,
            }));
            self.consume(bytes, actions);
            return None;
        };
        let buf = &mut self.slots[slot];
        p.read_samples(buf)
            .expect("slot holds max_samples, checked above");
        buf.copy_within(skip..n, 0);
        self.queue.insert(
            pos,
            Queued {
                slot,
                ts,
                len,
                bytes,
                eob: p.header.eob,
            },
        );
        if self.clock.is_none() {
            self.clock = Some(ts);
        }
        Some(TxArrival {
            timestamp: p.timestamp.unwrap_or(ts),
            samples: n,
            queued_tick: ts,
            queued: len,
            rx_timestamp: p.metadata_words().next(),
            margin_ticks: margin,
        })
    }

    /// Play out every sample due before `now`, handing them to `sink(tick, samples)`.
    pub fn advance(
        &mut self,
        now: u64,
        sink: &mut impl FnMut(u64, &[Ci16]),
        actions: &mut impl FnMut(TxAction),
    ) {
        let Some(mut clock) = self.clock else { return };
        while clock < now {
            match self.queue.front().copied() {
                Some(h) if h.ts <= clock => {
                    let off = (clock - h.ts) as usize;
                    let end = (h.len as u64).min(now - h.ts) as usize;
                    sink(clock, &self.slots[h.slot][off..end]);
                    self.counters.samples_played += (end - off) as u64;
                    clock = h.ts + end as u64;
                    self.state = State::Playing;
                    if end == h.len {
                        self.queue.pop_front();
                        self.free.push(h.slot);
                        if h.eob {
                            self.state = State::Idle;
                        }
                        self.consume(h.bytes, actions);
                    }
                }
                head => {
                    if self.state == State::Playing {
                        self.counters.underruns += 1;
                        actions(TxAction::Event(TxEvent::Underrun { tick: clock }));
                        self.state = State::Starved;
                    }
                    let mut gap_end = head.map_or(now, |h| h.ts.min(now));
                    if let Some(e) = self.burst_end {
                        if head.is_none_or(|h| h.ts >= e) {
                            gap_end = gap_end.min(e.max(clock));
                        }
                    }
                    match (self.cfg.policy, self.state, head.is_some()) {
                        // Idle with nothing queued: the gap length is unknown yet.
                        (TxPolicy::ZeroFill, State::Idle, false) => break,
                        (TxPolicy::ZeroFill, _, _) => {
                            while clock < gap_end {
                                let k = (gap_end - clock).min(self.zeros.len() as u64) as usize;
                                sink(clock, &self.zeros[..k]);
                                self.counters.zeros_played += k as u64;
                                clock += k as u64;
                            }
                        }
                        // Transmission stopped: time passes, nothing is played.
                        (TxPolicy::DropResync, _, _) => clock = gap_end,
                    }
                    if self.burst_end.is_some_and(|e| clock >= e) {
                        self.burst_end = None;
                        self.state = State::Idle;
                    }
                }
            }
        }
        self.clock = Some(clock);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{write_data_packet, DataPacketSpec, StreamCommand, StreamCommandOp};

    const SPP: usize = 8;

    fn core(policy: TxPolicy) -> TxCore {
        TxCore::new(TxConfig {
            epid: 5,
            capacity_pkts: 4,
            max_samples: SPP,
            policy,
        })
    }

    fn samples(ts: u64) -> Vec<Ci16> {
        (0..SPP)
            .map(|i| Ci16::new(ts.wrapping_add(i as u64) as i16, 1))
            .collect()
    }

    fn packet(seq: u16, ts: u64) -> Vec<u8> {
        let mut buf = vec![0u8; 128];
        let spec = DataPacketSpec {
            seq_num: seq,
            timestamp: Some(ts),
            ..Default::default()
        };
        let n = write_data_packet(&mut buf, &spec, &[ts], &samples(ts)).unwrap();
        buf.truncate(n);
        buf
    }

    /// Drive the core: (arrival time, packet) pairs, then play out to `until`.
    fn play(
        tx: &mut TxCore,
        arrivals: &[(u64, Vec<u8>)],
        until: u64,
    ) -> (Vec<(u64, Ci16)>, Vec<TxEvent>, Vec<StreamStatus>) {
        let mut out = Vec::new();
        let mut events = Vec::new();
        let mut statuses = Vec::new();
        let mut sink =
            |t: u64, s: &[Ci16]| out.extend(s.iter().enumerate().map(|(i, &x)| (t + i as u64, x)));
        let mut act = |a: TxAction| match a {
            TxAction::Event(e) => events.push(e),
            TxAction::Status(s) => statuses.push(s),
        };
        for (t, p) in arrivals {
            tx.advance(*t, &mut sink, &mut act);
            let _ = tx.on_datagram(p, *t, &mut act).unwrap();
        }
        tx.advance(until, &mut sink, &mut act);
        (out, events, statuses)
    }

    fn check_sync(out: &[(u64, Ci16)], origin: u64) {
        for (i, &(t, _)) in out.iter().enumerate() {
            assert_eq!(t, origin + i as u64, "output must be sample-synchronous");
        }
    }

    #[test]
    fn on_time_packets_play_exactly() {
        let mut tx = core(TxPolicy::ZeroFill);
        let arr: Vec<_> = (0..4)
            .map(|k| (k * SPP as u64, packet(k as u16, 100 + k * 8)))
            .collect();
        let (out, ev, _) = play(&mut tx, &arr, 100 + 32);
        assert!(ev.is_empty(), "{ev:?}");
        check_sync(&out, 100);
        assert_eq!(out.len(), 32);
        assert!(out.iter().all(|&(t, s)| s == Ci16::new(t as i16, 1)));
    }

    #[test]
    fn missing_packet_is_underrun_filled_with_zeros() {
        let mut tx = core(TxPolicy::ZeroFill);
        let arr = vec![(0, packet(0, 100)), (1, packet(2, 116))];
        let (out, ev, _) = play(&mut tx, &arr, 124);
        assert_eq!(
            ev,
            vec![
                TxEvent::SequenceError {
                    expected: 1,
                    got: 2
                },
                TxEvent::Underrun { tick: 108 }
            ]
        );
        check_sync(&out, 100);
        assert_eq!(out.len(), 24);
        assert!(out[8..16].iter().all(|&(_, s)| s == Ci16::default()));
        assert_eq!(out[16].1, Ci16::new(116, 1));
        assert_eq!(tx.counters().zeros_played, 8);
    }

    #[test]
    fn late_packet_keeps_its_on_time_part_under_zero_fill() {
        let mut tx = core(TxPolicy::ZeroFill);
        // Second packet (ticks 108..116) arrives at tick 111: 3 samples late.
        let arr = vec![(0, packet(0, 100)), (111, packet(1, 108))];
        let (out, ev, _) = play(&mut tx, &arr, 116);
        assert_eq!(
            ev,
            vec![
                TxEvent::Underrun { tick: 108 },
                TxEvent::Late {
                    timestamp: 108,
                    now: 111,
                    dropped: 3
                }
            ]
        );
        check_sync(&out, 100);
        assert_eq!(out.len(), 16);
        assert!(out[8..11].iter().all(|&(_, s)| s == Ci16::default()));
        assert!(out[11..].iter().all(|&(t, s)| s == Ci16::new(t as i16, 1)));
    }

    #[test]
    fn arrival_names_the_queued_part_and_queued_at_gives_it() {
        let mut tx = core(TxPolicy::ZeroFill);
        let mut act = |_: TxAction| {};
        let a = tx
            .on_datagram(&packet(0, 100), 0, &mut act)
            .unwrap()
            .unwrap();
        assert_eq!((a.timestamp, a.queued_tick, a.queued), (100, 100, SPP));
        assert_eq!(tx.queued_at(100), Some(&samples(100)[..]));
        // 3 samples late: only the on-time part is queued, from tick 111.
        let a = tx
            .on_datagram(&packet(1, 108), 111, &mut act)
            .unwrap()
            .unwrap();
        assert_eq!((a.timestamp, a.queued_tick, a.queued), (108, 111, SPP - 3));
        assert_eq!(tx.queued_at(111), Some(&samples(108)[3..]));
        assert_eq!(tx.queued_at(108), None);
        assert_eq!(tx.queued_at(101), None);
        // What advance plays is exactly what queued_at gave.
        let mut out = Vec::new();
        tx.advance(
            116,
            &mut |t, s: &[Ci16]| out.push((t, s.to_vec())),
            &mut act,
        );
        let played: Vec<Ci16> = out
            .iter()
            .filter(|(t, _)| *t >= 111)
            .flat_map(|(_, s)| s.clone())
            .collect();
        assert_eq!(played, samples(108)[3..]);
        assert_eq!(tx.queued_at(111), None, "played and freed");
    }

    #[test]
    fn drop_resync_drops_late_packets_and_waits_for_resync() {
        let mut tx = core(TxPolicy::DropResync);
        let arr = vec![
            (0, packet(0, 100)),
            (111, packet(1, 108)),
            (112, packet(2, 116)),
        ];
        let (out, ev, _) = play(&mut tx, &arr, 124);
        assert!(ev.contains(&TxEvent::Late {
            timestamp: 108,
            now: 111,
            dropped: 8
        }));
        // Transmission stopped at 108 and resumed at 116: 16 samples, none zero.
        assert_eq!(out.len(), 16);
        assert_eq!(out[8].0, 116);
        // Now a sequence error: everything dropped until RESYNC.
        let (_, ev, st) = play(
            &mut tx,
            &[(124, packet(5, 124)), (125, packet(6, 132))],
            140,
        );
        assert_eq!(
            ev[0],
            TxEvent::SequenceError {
                expected: 3,
                got: 5
            }
        );
        assert!(ev.contains(&TxEvent::DroppedAwaitingResync { seq: 6 }));
        assert_eq!(st[0].status, StreamStatusCode::SeqErr);
        let mut cmd = vec![0u8; 64];
        let c = StreamCommand {
            src_epid: 1,
            op: StreamCommandOp::Resync,
            op_data: 0,
            num_pkts: 7,
            num_bytes: 0,
        };
        let n = c.write(&mut cmd, 0, 5).unwrap();
        let (out, ev, st) = play(
            &mut tx,
            &[(141, cmd[..n].to_vec()), (142, packet(9, 150))],
            158,
        );
        assert_eq!(ev, vec![TxEvent::Resynced]);
        assert_eq!(st[0].xfer_count_pkts, 7);
        assert_eq!(out.len(), 8);
        assert_eq!(out[0], (150, Ci16::new(150, 1)));
    }

    #[test]
    fn reordered_packets_play_in_time_order() {
        let mut tx = core(TxPolicy::ZeroFill);
        let arr = vec![
            (0, packet(0, 100)),
            (1, packet(2, 116)),
            (2, packet(1, 108)),
        ];
        let (out, ev, _) = play(&mut tx, &arr, 124);
        assert_eq!(ev.len(), 2, "two sequence errors, no underrun: {ev:?}");
        check_sync(&out, 100);
        assert!(out.iter().all(|&(t, s)| s == Ci16::new(t as i16, 1)));
    }

    #[test]
    fn full_buffer_overflows_and_credit_is_returned() {
        let mut tx = core(TxPolicy::ZeroFill);
        let mut cmd = vec![0u8; 64];
        let init = StreamCommand {
            src_epid: 1,
            op: StreamCommandOp::Init,
            op_data: 0,
            num_pkts: 1,
            num_bytes: 0,
        };
        let n = init.write(&mut cmd, 0, 5).unwrap();
        let mut arr = vec![(0, cmd[..n].to_vec())];
        arr.extend((0..5).map(|k| (0, packet(k, 100 + 8 * k as u64))));
        let (_, ev, st) = play(&mut tx, &arr, 0);
        assert_eq!(ev, vec![TxEvent::Overflow { seq: 4 }]);
        assert_eq!(st[0].capacity_pkts, 4);
        assert_eq!(
            st.last().unwrap().xfer_count_pkts,
            1,
            "overflowed packet is accounted"
        );
        let (out, _, st) = play(&mut tx, &[], 132);
        assert_eq!(out.len(), 32);
        assert_eq!(st.last().unwrap().xfer_count_pkts, 5);
    }

    #[test]
    fn timestamps_at_the_end_of_time_are_refused_not_overflowed() {
        // Found by the tx_core fuzz target: ts + len overflowed u64.
        let mut tx = core(TxPolicy::ZeroFill);
        let (out, ev, _) = play(
            &mut tx,
            &[(0, packet(0, u64::MAX - 3)), (1, packet(1, 100))],
            108,
        );
        assert!(ev.is_empty(), "{ev:?}");
        assert_eq!(tx.counters().malformed, 1);
        assert_eq!(out.len(), 8);
    }

    #[test]
    fn eob_ends_a_burst_without_underrun() {
        let mut tx = core(TxPolicy::ZeroFill);
        let mut buf = vec![0u8; 128];
        let spec = DataPacketSpec {
            eob: true,
            timestamp: Some(100),
            ..Default::default()
        };
        let n = write_data_packet(&mut buf, &spec, &[], &samples(100)).unwrap();
        let (out, ev, _) = play(&mut tx, &[(0, buf[..n].to_vec())], 200);
        assert!(ev.is_empty());
        assert_eq!(out.len(), 8);
        // The next burst's gap is filled, so the output stays on the clock.
        let (out, ev, _) = play(&mut tx, &[(210, packet(1, 220))], 228);
        assert!(ev.is_empty(), "{ev:?}");
        assert_eq!(out.len(), 120);
        assert_eq!(out[0].0, 108);
    }
}
