//! The emulated hardware of a cooperative relay network, as one sans-IO core:
//!
//! - the **source radio** sends burst `b` at tick `start + b * period`;
//! - **links** (testbed's [`Link`] model, one per hop and relay) decide loss
//!   and arrival time of each burst;
//! - the source's bursts travel through the one emulated air
//!   ([`radiohost_testbed::air`]): one air path per relay (TX port `i` -> RX
//!   port `i`, identity and noiseless), on which the source emits each burst at
//!   the tick its link delivers it (nothing when the link loses it, twice when it
//!   duplicates it). The source is a timed transmitter: it emits a burst into the
//!   air [`SOURCE_LEAD_TICKS`] (or one period, if longer) ahead of its tick,
//!   because the air's past is final once any port has been read;
//! - each **relay radio** reads its air port and hands the received burst to its
//!   host as a CHDR packet stamped with the burst's RX time, once its last sample
//!   exists, and transmits what the host sends back through chdr's timed-TX core
//!   ([`TxCore`]): at the packet's timestamp if it arrived in time; a late
//!   packet is dropped ([`LatePolicy::Drop`], UHD's behaviour) or sent at once
//!   ([`LatePolicy::Send`], so the destination can see how late it was);
//! - the **destination radio** stamps each copy with its arrival tick, and the
//!   destination decodes it and feeds the [`Classifier`].
//!
//! Radio timing is ideal (hardware): a burst leaves at its tick whenever the
//! driver happens to call. Only the hosts' timing is what is measured. The
//! relay copies are kept apart at the destination (as if each relay used its
//! own preamble) rather than summed, so each can be checked.
//!
//! The relay -> destination hop stays on the links alone, not the air: a relay's
//! samples are only known once its host's packet reached the radio, often
//! microseconds before their TX tick, while the air's one processing horizon
//! has by then moved up to the present through the relays' own reads; emitting
//! them would land in the air's past and truncate copies by the emulator's own
//! lag, which is not what the relay run measures.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use radiohost_chdr::rx::test_signal;
use radiohost_chdr::tx::{TxAction, TxConfig, TxCore, TxCounters, TxPolicy};
use radiohost_chdr::wire::{ChdrHeader, StreamCommand, StreamCommandOp, WireError};
use radiohost_iq::Cf32;
use radiohost_iq::Ci16;
use radiohost_rt::{LatencyHistogram, ManualClock, Summary, Time};
use radiohost_testbed::air as medium;
use radiohost_testbed::{Fate, Link, LinkConfig, LinkStats};

use crate::classify::{BurstOutcome, Classifier, ClassifierConfig, CopyOutcome, Tally};
use crate::tag::{relay_packet_len, write_relay_packet, RelayPacket, RelayTag, TagKind};
use crate::MAX_RELAYS;

/// What a relay radio does with a packet whose TX time has passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum LatePolicy {
    /// Drop it (UHD: late packets are discarded): the copy is missing.
    Drop,
    /// Transmit it as soon as it arrived: the copy is late by that much.
    Send,
}

#[derive(Clone, Debug)]
pub struct AirConfig {
    /// Sample clock shared by all radios (ticks per second).
    pub rate_sps: u64,
    /// Samples per burst (one CHDR packet).
    pub burst_samples: usize,
    pub period_ticks: u64,
    pub bursts: u64,
    /// Tick of the first burst.
    pub start_tick: u64,
    /// Relays retransmit at RX timestamp + delta.
    pub delta_ticks: u64,
    pub tolerance_ticks: u64,
    pub deadline_ticks: u64,
    pub late_policy: LatePolicy,
    /// Source -> relay i.
    pub source_links: Vec<LinkConfig>,
    /// Relay i -> destination.
    pub dest_links: Vec<LinkConfig>,
    /// Packets each relay radio's TX buffer holds.
    pub tx_capacity_pkts: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum AirError {
    #[error("invalid relay configuration: {0}")]
    Config(String),
    #[error("encoding a packet failed: {0}")]
    Wire(#[from] WireError),
    #[error("the emulated air refused: {0}")]
    Medium(#[from] medium::AirError),
}

/// How far ahead of its tick the source emits a burst into the air, at least
/// (one period when that is longer): the margin the driver may lag.
pub const SOURCE_LEAD_TICKS: u64 = 4096;

/// Air processing block, in samples: emissions are never more than this behind
/// what was read (small, as the identity air does no convolution).
const MEDIUM_BLOCK: usize = 16;

/// EPID of relay `i`'s host stream endpoint (stage-1 packets go there).
pub fn host_epid(relay: usize) -> u16 {
    0x100 + relay as u16
}

/// EPID of relay `i`'s radio TX endpoint (its host's copies go there).
pub fn radio_tx_epid(relay: usize) -> u16 {
    0x200 + relay as u16
}

/// Which relay a host TX packet is for, from its destination EPID.
pub fn relay_of_epid(epid: u16, relays: usize) -> Option<usize> {
    let i = epid.checked_sub(0x200)? as usize;
    (i < relays).then_some(i)
}

const DEST_EPID: u16 = 0x0300;

/// A stage-1 packet ready for relay `relay`'s host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stage1 {
    pub relay: usize,
    pub burst: u64,
    pub len: usize,
    /// Tick at which the radio had the whole burst (when it should be sent).
    pub due: u64,
}

/// Per-relay counters: where each copy went.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RelayRadioReport {
    /// Stage-1 bursts lost on the source -> relay link.
    pub stage1_lost: u64,
    pub stage1_duplicated: u64,
    /// Host packets that reached the radio after their TX time.
    pub radio_late: u64,
    /// Late packets sent at once (LatePolicy::Send).
    pub retimed: u64,
    /// Sequence gaps in the host's stream, healed by a RESYNC.
    pub seq_resyncs: u64,
    /// Host packets that were not relay copies from this relay.
    pub malformed: u64,
    /// Copies lost on the relay -> destination link.
    pub copy_lost: u64,
    pub copy_duplicated: u64,
    /// Copies whose samples differ from the source's burst.
    pub corrupt: u64,
    /// Source emissions into this relay's air path that started in the air's
    /// past (the driver lagged more than the source's lead): partly lost.
    pub stage1_late_emissions: u64,
    /// Bursts the relay radio could not read from the air (older than its history).
    pub stage1_unreadable: u64,
    pub tx: TxCounters,
    #[serde(skip)]
    pub source_link: LinkStats,
    #[serde(skip)]
    pub dest_link: LinkStats,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct AirReport {
    pub tally: Tally,
    pub relays: Vec<RelayRadioReport>,
    /// Arrival - intended time of copies that arrived by the deadline, ns
    /// (negative offsets recorded as 0).
    pub offset: Summary,
    pub min_offset_ns: Option<i64>,
    pub max_offset_ns: Option<i64>,
    /// Copies still queued, on the air or travelling when the report was
    /// taken (0 when a run drained completely).
    pub in_flight_copies: u64,
    /// Host packets for no known relay.
    pub unknown_relay: u64,
    /// Samples a relay radio transmitted that matched no accepted packet.
    pub untracked_samples: u64,
    pub bursts_sent: u64,
}

struct OnAir {
    tag: RelayTag,
    start: u64,
    n: usize,
    samples: Vec<Ci16>,
}

struct DestRx {
    relay: usize,
    arrival: u64,
    tag: RelayTag,
    samples: Vec<Ci16>,
}

/// (due tick, order, relay, burst, rx_ts, source_ts)
type RxEntry = Reverse<(u64, u64, usize, u64, u64, u64)>;

pub struct Air {
    cfg: AirConfig,
    /// The one emulated air: the source -> relay paths.
    medium: medium::Air,
    medium_clock: ManualClock,
    lead_ticks: u64,
    rx_scratch: Vec<Cf32>,
    tx_scratch: Vec<Cf32>,
    relays: usize,
    next_burst: u64,
    sr: Vec<Link>,
    rd: Vec<Link>,
    nominal_sr: Vec<u64>,
    nominal_rd: Vec<u64>,
    rx_pending: BinaryHeap<RxEntry>,
    rx_seq: Vec<u16>,
    tx: Vec<TxCore>,
    tx_expected_seq: Vec<Option<u16>>,
    /// Accepted copies per relay in TX-time order: (tick, samples, tag).
    scheduled: Vec<VecDeque<(u64, usize, RelayTag)>>,
    on_air: Vec<Option<OnAir>>,
    done_tx: Vec<(usize, OnAir)>,
    dest_pending: BinaryHeap<Reverse<(u64, u64, usize)>>,
    dest_slots: Vec<Option<DestRx>>,
    free_dest_slots: Vec<usize>,
    pool: Vec<Vec<Ci16>>,
    classifier: Classifier,
    ready: VecDeque<BurstOutcome>,
    scratch: Vec<u8>,
    source_samples: Vec<Ci16>,
    reports: Vec<RelayRadioReport>,
    offsets: LatencyHistogram,
    min_offset: Option<i64>,
    max_offset: Option<i64>,
    unknown_relay: u64,
    untracked: u64,
    dest_seq: u16,
    order: u64,
}

impl Air {
    pub fn new(cfg: AirConfig) -> Result<Self, AirError> {
        let relays = cfg.source_links.len();
        let bad = |s: String| Err(AirError::Config(s));
        if relays == 0 || relays > MAX_RELAYS || cfg.dest_links.len() != relays {
            return bad(format!(
                "{} source links and {} destination links: need the same number, 1..={MAX_RELAYS}",
                relays,
                cfg.dest_links.len()
            ));
        }
        if cfg.rate_sps == 0 || cfg.rate_sps > 1_000_000_000 {
            return bad(format!(
                "sample rate {} must be 1..=1e9 samples/s",
                cfg.rate_sps
            ));
        }
        if cfg.burst_samples == 0 || relay_packet_len(cfg.burst_samples) > 65_535 {
            return bad(format!(
                "a burst of {} samples does not fit one CHDR packet (1..=16000)",
                cfg.burst_samples
            ));
        }
        if cfg.period_ticks < cfg.burst_samples as u64 {
            return bad(format!(
                "period of {} ticks is shorter than a burst ({} samples): bursts would overlap",
                cfg.period_ticks, cfg.burst_samples
            ));
        }
        if cfg.delta_ticks < cfg.burst_samples as u64 {
            return bad(format!(
                "delta of {} ticks is shorter than the burst ({} samples): a relay cannot retransmit a burst before it has received it",
                cfg.delta_ticks, cfg.burst_samples
            ));
        }
        let n = cfg.burst_samples;
        let to_ticks = |d: Duration| Time::from(d).to_ticks(cfg.rate_sps as f64);
        // Bursts in flight at once, bounded by the time a burst can stay open.
        // The source emits (and announces) bursts this far ahead of their tick.
        let lead_ticks = SOURCE_LEAD_TICKS.max(cfg.period_ticks);
        let span = lead_ticks + cfg.delta_ticks + cfg.deadline_ticks + 2 * n as u64;
        let max_delay = cfg
            .source_links
            .iter()
            .chain(&cfg.dest_links)
            .map(|l| to_ticks(l.delay + l.reorder_delay))
            .max()
            .unwrap_or(0);
        let capacity = ((span + 2 * max_delay) / cfg.period_ticks.max(1) + 4) as usize;
        if capacity > 1 << 20 {
            return bad(format!(
                "{capacity} bursts would be in flight at once (delta, deadline and link delays are huge next to the period)"
            ));
        }
        let classifier = Classifier::new(ClassifierConfig {
            relays,
            tolerance_ticks: cfg.tolerance_ticks,
            deadline_ticks: cfg.deadline_ticks,
            capacity,
        })
        .map_err(|e| AirError::Config(e.to_string()))?;
        let tx = (0..relays)
            .map(|i| {
                TxCore::new(TxConfig {
                    epid: radio_tx_epid(i),
                    capacity_pkts: cfg.tx_capacity_pkts.max(1),
                    max_samples: n,
                    policy: TxPolicy::DropResync,
                })
            })
            .collect();
        // Reads may come out of order by the links' delay spread and reordering.
        let history = ((2 * max_delay + lead_ticks + 4 * n as u64) as usize)
            .next_power_of_two()
            .clamp(MEDIUM_BLOCK, medium::MAX_HISTORY);
        let medium_clock = ManualClock::new(0);
        let medium = medium::Air::new(medium::AirConfig {
            rate_hz: cfg.rate_sps as f64,
            tx_ports: relays,
            rx_ports: relays,
            channel: medium::AirChannel::Identity,
            snr_db: None,
            seed: 0,
            block: MEDIUM_BLOCK,
            history,
            max_pending: history,
            clock: medium::AirClock::Simulated(medium_clock.clone()),
        })?;
        Ok(Air {
            medium,
            medium_clock,
            lead_ticks,
            rx_scratch: vec![Cf32::default(); n],
            tx_scratch: vec![Cf32::default(); n],
            nominal_sr: cfg.source_links.iter().map(|l| to_ticks(l.delay)).collect(),
            nominal_rd: cfg.dest_links.iter().map(|l| to_ticks(l.delay)).collect(),
            sr: cfg.source_links.iter().cloned().map(Link::new).collect(),
            rd: cfg.dest_links.iter().cloned().map(Link::new).collect(),
            rx_pending: BinaryHeap::with_capacity(capacity * relays * 2),
            rx_seq: vec![0; relays],
            tx,
            tx_expected_seq: vec![None; relays],
            scheduled: (0..relays)
                .map(|_| VecDeque::with_capacity(cfg.tx_capacity_pkts as usize))
                .collect(),
            on_air: (0..relays).map(|_| None).collect(),
            done_tx: Vec::with_capacity(relays * 4),
            dest_pending: BinaryHeap::with_capacity(capacity * relays * 2),
            dest_slots: Vec::new(),
            free_dest_slots: Vec::new(),
            pool: (0..capacity * relays)
                .map(|_| Vec::with_capacity(n))
                .collect(),
            classifier,
            ready: VecDeque::new(),
            scratch: vec![0u8; relay_packet_len(n)],
            source_samples: vec![Ci16::default(); n],
            reports: vec![RelayRadioReport::default(); relays],
            offsets: LatencyHistogram::new(),
            min_offset: None,
            max_offset: None,
            unknown_relay: 0,
            untracked: 0,
            dest_seq: 0,
            order: 0,
            relays,
            next_burst: 0,
            cfg,
        })
    }

    pub fn config(&self) -> &AirConfig {
        &self.cfg
    }

    pub fn relays(&self) -> usize {
        self.relays
    }

    /// Bursts classified so far.
    pub fn classified(&self) -> u64 {
        self.classifier.tally().bursts
    }

    /// Tick at which burst `b` leaves the source.
    pub fn source_tick(&self, b: u64) -> u64 {
        self.cfg.start_tick + b * self.cfg.period_ticks
    }

    /// When relay `relay`'s copy of a burst sent at `source_tick` should reach
    /// the destination: nominal link delays plus delta.
    pub fn intended_arrival(&self, relay: usize, source_tick: u64) -> u64 {
        source_tick + self.nominal_sr[relay] + self.cfg.delta_ticks + self.nominal_rd[relay]
    }

    /// Tick `ticks` as the links' time.
    fn dur(&self, ticks: u64) -> Duration {
        self.medium.time_of(ticks).as_duration()
    }

    /// The nearest tick of the links' time `d`.
    fn ticks(&self, d: Duration) -> u64 {
        Time::from(d).to_ticks(self.medium.rate_hz())
    }

    fn take_buffer(&mut self) -> Vec<Ci16> {
        let mut v = self
            .pool
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(self.cfg.burst_samples));
        v.clear();
        v
    }

    /// The source sends every burst due by `now` plus its lead: each link decides
    /// whether and when the burst reaches its relay, and the burst is emitted on
    /// that relay's air path at that tick.
    fn emit_source(&mut self, now: u64) {
        self.medium_clock.set_ns(self.medium.time_of(now).ns());
        let bytes = relay_packet_len(self.cfg.burst_samples);
        let mut intended = [0u64; MAX_RELAYS];
        while self.next_burst < self.cfg.bursts
            && self.source_tick(self.next_burst) <= now.saturating_add(self.lead_ticks)
        {
            let b = self.next_burst;
            let s = self.source_tick(b);
            for (k, x) in self.tx_scratch.iter_mut().enumerate() {
                *x = test_signal(0, s + k as u64).to_cf32();
            }
            for (i, slot) in intended.iter_mut().enumerate().take(self.relays) {
                *slot = self.intended_arrival(i, s);
                let at_source = self.dur(s);
                match self.sr[i].offer(at_source, bytes) {
                    Fate::Dropped(_) => self.reports[i].stage1_lost += 1,
                    Fate::Deliver { at, duplicate_at } => {
                        for (k, t) in std::iter::once(at).chain(duplicate_at).enumerate() {
                            let rx_ts = self.ticks(t);
                            if self.medium.transmit(i, rx_ts, &self.tx_scratch).is_err() {
                                // Late (the part after the horizon still went out)
                                // or over the pending bound: the copy will not match.
                                self.reports[i].stage1_late_emissions += 1;
                            }
                            let due = rx_ts + self.cfg.burst_samples as u64;
                            self.order += 1;
                            self.rx_pending
                                .push(Reverse((due, self.order, i, b, rx_ts, s)));
                            self.reports[i].stage1_duplicated += (k > 0) as u64;
                        }
                    }
                }
            }
            // Cannot fail: bursts are announced in order with one time per relay.
            let r = self.classifier.expect(b, &intended[..self.relays]);
            debug_assert!(r.is_ok(), "{r:?}");
            if let Ok(Some(o)) = r {
                self.ready.push_back(o);
            }
            self.next_burst += 1;
        }
    }

    /// The next stage-1 packet a relay radio hands to its host by `now`,
    /// encoded into `out`. Call until it returns `None`.
    pub fn poll_stage1(&mut self, now: u64, out: &mut [u8]) -> Result<Option<Stage1>, AirError> {
        self.emit_source(now);
        let Some(&Reverse((due, _, relay, burst, rx_ts, source_ts))) = self.rx_pending.peek()
        else {
            return Ok(None);
        };
        if due > now {
            return Ok(None);
        }
        self.rx_pending.pop();
        // What the relay's antenna received over the burst: its air port.
        if self
            .medium
            .receive(relay, rx_ts, &mut self.rx_scratch)
            .is_err()
        {
            // Older than the air keeps (a reordering beyond its history): the
            // radio hands over silence, which the destination finds corrupt.
            self.reports[relay].stage1_unreadable += 1;
            self.rx_scratch.fill(Cf32::default());
        }
        for (s, x) in self.source_samples.iter_mut().zip(&self.rx_scratch) {
            *s = Ci16::from_cf32(*x);
        }
        let tag = RelayTag {
            kind: TagKind::Stage1,
            relay: relay as u8,
            burst,
            source_ts,
            rx_ts: 0,
        };
        let seq = self.rx_seq[relay];
        self.rx_seq[relay] = seq.wrapping_add(1);
        let len = write_relay_packet(
            out,
            seq,
            host_epid(relay),
            rx_ts,
            &tag,
            &self.source_samples,
        )?;
        Ok(Some(Stage1 {
            relay,
            burst,
            len,
            due,
        }))
    }

    /// A host TX packet reached relay `relay`'s radio at tick `arrival`.
    pub fn on_relay_tx(&mut self, relay: usize, bytes: &[u8], arrival: u64) {
        if relay >= self.relays {
            self.unknown_relay += 1;
            return;
        }
        let (seq, ts, n, tag) = match RelayPacket::parse(bytes) {
            Ok(p) if p.tag.kind == TagKind::RelayCopy && p.tag.relay as usize == relay => (
                p.data.header.seq_num,
                p.timestamp,
                p.data.num_samples(),
                p.tag,
            ),
            _ => {
                self.reports[relay].malformed += 1;
                return;
            }
        };
        let mut ignore = |_: TxAction| {};
        if self.tx_expected_seq[relay].is_some_and(|e| e != seq) {
            // The host skipped a number (a lost datagram): resynchronise so one
            // gap does not make the radio drop everything after it.
            let cmd = StreamCommand {
                src_epid: host_epid(relay),
                op: StreamCommandOp::Resync,
                op_data: 0,
                num_pkts: 0,
                num_bytes: 0,
            };
            if let Ok(len) = cmd.write(&mut self.scratch, 0, radio_tx_epid(relay)) {
                let _ = self.tx[relay].on_datagram(&self.scratch[..len], arrival, &mut ignore);
                self.reports[relay].seq_resyncs += 1;
            }
        }
        self.tx_expected_seq[relay] = Some(seq.wrapping_add(1));
        let cut = self.tx[relay].clock().map_or(arrival, |c| c.max(arrival));
        let mut play_at = ts;
        let accepted = if ts < cut {
            self.reports[relay].radio_late += 1;
            match self.cfg.late_policy {
                LatePolicy::Drop => self.tx[relay].on_datagram(bytes, arrival, &mut ignore),
                LatePolicy::Send => {
                    self.reports[relay].retimed += 1;
                    play_at = cut;
                    self.retimed_feed(relay, bytes, cut, arrival)
                }
            }
        } else {
            self.tx[relay].on_datagram(bytes, arrival, &mut ignore)
        };
        if let Ok(Some(_)) = accepted {
            let q = &mut self.scheduled[relay];
            let pos = q.partition_point(|&(t, _, _)| t < play_at);
            q.insert(pos, (play_at, n, tag));
        }
    }

    /// Feed `bytes` to the TX core with its timestamp moved to `at`.
    fn retimed_feed(
        &mut self,
        relay: usize,
        bytes: &[u8],
        at: u64,
        arrival: u64,
    ) -> Result<Option<radiohost_chdr::tx::TxArrival>, WireError> {
        let len = bytes.len().min(self.scratch.len());
        self.scratch[..len].copy_from_slice(&bytes[..len]);
        let h = ChdrHeader::parse(&self.scratch[..len])?;
        if !h.pkt_type.has_timestamp() || len < 16 {
            return Err(WireError::Truncated {
                need: 16,
                have: len,
            });
        }
        // Word 1 of a timestamped CHDR packet is the timestamp.
        self.scratch[8..16].copy_from_slice(&at.to_le_bytes());
        let mut ignore = |_: TxAction| {};
        let scratch = std::mem::take(&mut self.scratch);
        let r = self.tx[relay].on_datagram(&scratch[..len], arrival, &mut ignore);
        self.scratch = scratch;
        r
    }

    /// Play every radio up to `now`, deliver what reached the destination, and
    /// classify every burst whose deadline has passed (`on_outcome` each).
    pub fn advance(&mut self, now: u64, on_outcome: &mut impl FnMut(&BurstOutcome)) {
        self.emit_source(now);
        for i in 0..self.relays {
            self.play(i, now);
        }
        let done = std::mem::take(&mut self.done_tx);
        for (i, a) in &done {
            self.transmit(*i, a);
        }
        let mut done = done;
        for (_, a) in done.drain(..) {
            self.pool.push(a.samples);
        }
        self.done_tx = done;
        while let Some(&Reverse((due, _, slot))) = self.dest_pending.peek() {
            if due > now {
                break;
            }
            self.dest_pending.pop();
            if let Some(rx) = self.dest_slots[slot].take() {
                self.free_dest_slots.push(slot);
                self.receive(rx);
            }
        }
        while let Some(o) = self.ready.pop_front() {
            self.record(&o);
            on_outcome(&o);
        }
        // Every copy whose first sample arrived before this has been received.
        let watermark = now.saturating_sub(self.cfg.burst_samples as u64);
        while let Some(o) = self.classifier.poll(watermark) {
            self.record(&o);
            on_outcome(&o);
        }
    }

    /// End of run: classify what is still open (unseen copies are missing).
    pub fn finish(&mut self, on_outcome: &mut impl FnMut(&BurstOutcome)) {
        while let Some(o) = self.ready.pop_front().or_else(|| self.classifier.drain()) {
            self.record(&o);
            on_outcome(&o);
        }
    }

    fn play(&mut self, i: usize, now: u64) {
        let Air {
            tx,
            scheduled,
            on_air,
            done_tx,
            pool,
            untracked,
            cfg,
            ..
        } = self;
        let (sched, slot) = (&mut scheduled[i], &mut on_air[i]);
        let mut sink = |tick: u64, samples: &[Ci16]| {
            let mut off = 0;
            while off < samples.len() {
                if slot.is_none() {
                    let t = tick + off as u64;
                    match sched.front() {
                        Some(&(ts, n, tag)) if ts == t => {
                            sched.pop_front();
                            let mut buf = pool
                                .pop()
                                .unwrap_or_else(|| Vec::with_capacity(cfg.burst_samples));
                            buf.clear();
                            *slot = Some(OnAir {
                                tag,
                                start: ts,
                                n,
                                samples: buf,
                            });
                        }
                        _ => {
                            *untracked += (samples.len() - off) as u64;
                            return;
                        }
                    }
                }
                let a = slot.as_mut().expect("set above");
                let take = (a.n - a.samples.len()).min(samples.len() - off);
                a.samples.extend_from_slice(&samples[off..off + take]);
                off += take;
                if a.samples.len() == a.n {
                    done_tx.push((i, slot.take().expect("set above")));
                }
            }
        };
        tx[i].advance(now, &mut sink, &mut |_| {});
    }

    /// A relay finished transmitting a copy: it crosses the link to the destination.
    fn transmit(&mut self, i: usize, a: &OnAir) {
        let bytes = relay_packet_len(a.n);
        let start = self.dur(a.start);
        match self.rd[i].offer(start, bytes) {
            Fate::Dropped(_) => self.reports[i].copy_lost += 1,
            Fate::Deliver { at, duplicate_at } => {
                for (k, t) in std::iter::once(at).chain(duplicate_at).enumerate() {
                    self.reports[i].copy_duplicated += (k > 0) as u64;
                    let arrival = self.ticks(t);
                    let mut samples = self.take_buffer();
                    samples.extend_from_slice(&a.samples);
                    let rx = DestRx {
                        relay: i,
                        arrival,
                        tag: a.tag,
                        samples,
                    };
                    let slot = match self.free_dest_slots.pop() {
                        Some(s) => {
                            self.dest_slots[s] = Some(rx);
                            s
                        }
                        None => {
                            self.dest_slots.push(Some(rx));
                            self.dest_slots.len() - 1
                        }
                    };
                    self.order += 1;
                    self.dest_pending
                        .push(Reverse((arrival + a.n as u64, self.order, slot)));
                }
            }
        }
    }

    /// The destination radio received a copy: encode it as the radio would
    /// deliver it, then decode and check it as the destination host does.
    fn receive(&mut self, rx: DestRx) {
        let seq = self.dest_seq;
        self.dest_seq = seq.wrapping_add(1);
        let ok = match write_relay_packet(
            &mut self.scratch,
            seq,
            DEST_EPID,
            rx.arrival,
            &rx.tag,
            &rx.samples,
        ) {
            Ok(len) => match RelayPacket::parse(&self.scratch[..len]) {
                Ok(p) => {
                    let mut intact = p.data.num_samples() == self.cfg.burst_samples;
                    for (k, s) in rx.samples.iter().enumerate() {
                        intact &= *s == test_signal(0, p.tag.source_ts + k as u64);
                    }
                    intact.then_some((p.tag, p.timestamp))
                }
                Err(_) => None,
            },
            Err(_) => None,
        };
        match ok {
            Some((tag, arrival)) => {
                self.classifier
                    .on_copy(tag.burst, tag.relay as usize, arrival);
            }
            None => self.reports[rx.relay].corrupt += 1,
        }
        self.pool.push(rx.samples);
    }

    fn record(&mut self, o: &BurstOutcome) {
        for c in o.copies() {
            if let Some(off) = c.offset() {
                let ns = offset_ns(off, self.medium.rate_hz());
                self.offsets.record_signed(ns);
                self.min_offset = Some(self.min_offset.map_or(ns, |m| m.min(ns)));
                self.max_offset = Some(self.max_offset.map_or(ns, |m| m.max(ns)));
            }
            if let CopyOutcome::Missing {
                arrived_offset: Some(off),
            } = c
            {
                let ns = offset_ns(*off, self.medium.rate_hz());
                self.max_offset = Some(self.max_offset.map_or(ns, |m| m.max(ns)));
            }
        }
    }

    /// When the next stage-1 packet is due at a relay host.
    pub fn next_stage1_due(&self) -> Option<u64> {
        self.rx_pending.peek().map(|r| r.0 .0)
    }

    /// The next tick at which something is due (None: nothing left to do).
    pub fn next_wake(&self) -> Option<u64> {
        let n = self.cfg.burst_samples as u64;
        let source = (self.next_burst < self.cfg.bursts).then(|| {
            self.source_tick(self.next_burst)
                .saturating_sub(self.lead_ticks)
        });
        let rx = self.rx_pending.peek().map(|r| r.0 .0);
        let tx = (0..self.relays)
            .filter_map(|i| match &self.on_air[i] {
                Some(a) => Some(a.start + a.n as u64),
                None => self.scheduled[i].front().map(|&(t, k, _)| t + k as u64),
            })
            .min();
        let dest = self.dest_pending.peek().map(|r| r.0 .0);
        let deadline = self.classifier.next_deadline().map(|d| d + n + 1);
        [source, rx, tx, dest, deadline].into_iter().flatten().min()
    }

    /// Counters of the emulated air the source -> relay paths run over.
    pub fn medium_stats(&self) -> medium::AirStats {
        self.medium.stats()
    }

    /// Relay copies accepted by a radio and not yet received or lost.
    pub fn in_flight_copies(&self) -> u64 {
        let queued: usize = self.scheduled.iter().map(|q| q.len()).sum();
        let on_air = self.on_air.iter().filter(|a| a.is_some()).count();
        (queued + on_air + self.dest_pending.len()) as u64
    }

    /// All bursts sent, handed to the hosts and classified.
    pub fn finished(&self) -> bool {
        self.next_burst >= self.cfg.bursts
            && self.rx_pending.is_empty()
            && self.classifier.in_flight() == 0
            && self.ready.is_empty()
    }

    pub fn report(&self) -> AirReport {
        let mut relays = self.reports.clone();
        for (i, r) in relays.iter_mut().enumerate() {
            r.tx = self.tx[i].counters();
            r.source_link = self.sr[i].stats().clone();
            r.dest_link = self.rd[i].stats().clone();
        }
        AirReport {
            tally: self.classifier.tally().clone(),
            relays,
            offset: self.offsets.summary(),
            min_offset_ns: self.min_offset,
            max_offset_ns: self.max_offset,
            in_flight_copies: self.in_flight_copies(),
            unknown_relay: self.unknown_relay,
            untracked_samples: self.untracked,
            bursts_sent: self.next_burst,
        }
    }
}

/// A signed tick offset in ns, to the nearest ns ([`Time`] is unsigned: the sign is
/// kept apart); saturates.
fn offset_ns(ticks: i64, rate_hz: f64) -> i64 {
    let ns =
        i64::try_from(Time::from_ticks(ticks.unsigned_abs(), rate_hz).ns()).unwrap_or(i64::MAX);
    if ticks < 0 {
        -ns
    } else {
        ns
    }
}
