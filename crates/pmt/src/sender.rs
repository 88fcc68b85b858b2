//! The sans-IO PMT sender.
//!
//! Feed it datagrams ([`Sender::handle_datagram`]) and timeouts
//! ([`Sender::handle_timeout`]) with the current time; take datagrams
//! ([`Sender::poll_transmit`]), events ([`Sender::poll_event`]) and the next deadline
//! ([`Sender::poll_timeout`]). It owns no socket and no clock.
//!
//! Every delivery is unicast, so a group is a timer class: at each tick of group g,
//! every active member of g gets one *round* of up to W segments — first the segments
//! it is known to miss (old data), then new ones — and one ACK comes back per round.
//! A receiver moving from fast to slow is never resent what it acknowledged; one moving
//! from slow to fast keeps receiving its missing old data and new data.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::groups;
use crate::rtt::RttEstimator;
use crate::wire::{self, Body, Data, Meta, Psk, WireError, MAX_SEGMENT};

#[derive(Clone, Debug)]
pub struct SenderConfig {
    pub session: u32,
    /// Payload bytes per segment.
    pub segment_size: u16,
    /// W: segments per round (per receiver, per group period).
    pub window: u16,
    /// K: number of RTT groups (2 is the paper's fast/slow split).
    pub groups: usize,
    /// Added to an RTT to give a group period (room for the ACK to come back).
    pub eps: Duration,
    /// RTT assumed for a receiver before its first sample.
    pub initial_rtt: Duration,
    /// A receiver silent for this long is declared failed.
    pub fail_timeout: Duration,
    /// Segments tracked beyond a receiver's cumulative ACK; bounds sender memory.
    pub max_in_flight: u32,
    pub psk: Option<Vec<u8>>,
}

impl Default for SenderConfig {
    fn default() -> Self {
        Self {
            session: 1,
            segment_size: 1400,
            window: 8,
            groups: 2,
            eps: Duration::from_millis(2),
            initial_rtt: Duration::from_millis(250),
            fail_timeout: Duration::from_secs(15),
            max_in_flight: 1024,
            psk: None,
        }
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum SenderError {
    #[error("no receivers given")]
    NoReceivers,
    #[error("receiver {0} is listed twice")]
    DuplicateReceiver(SocketAddr),
    #[error("segment size {0} must be within 1..={MAX_SEGMENT}")]
    SegmentSize(u16),
    #[error("window must be at least 1 segment")]
    Window,
    #[error("object of {0} bytes needs more than 2^32 segments: raise the segment size")]
    TooLarge(u64),
    #[error("max_in_flight must be within window..=65536")]
    InFlight,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerState {
    Active,
    Done { intact: bool },
    Failed,
}

#[derive(Clone, Debug, PartialEq)]
pub enum SenderEvent {
    /// A receiver changed group (0 = fastest).
    GroupChanged {
        receiver: usize,
        from: usize,
        to: usize,
        srtt: Duration,
    },
    /// A receiver has the whole object; `intact` is its SHA-256 verdict.
    ReceiverDone {
        receiver: usize,
        intact: bool,
        at: Duration,
    },
    /// A receiver was silent for `fail_timeout` and was dropped.
    ReceiverFailed { receiver: usize, at: Duration },
    /// Every receiver is done or failed.
    Finished,
}

/// Counters; every ignored packet lands in one of them.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SenderStats {
    pub rounds: u64,
    pub data_sent: u64,
    pub retransmits: u64,
    pub meta_sent: u64,
    pub acks: u64,
    pub rtt_samples: u64,
    pub malformed: u64,
    pub auth_failures: u64,
    pub wrong_session: u64,
    pub non_member: u64,
    /// ACKs claiming rounds or data never sent (forged or corrupt).
    pub invalid_acks: u64,
    pub duplicate_acks: u64,
    /// Group-change events dropped because the caller did not poll events.
    pub events_dropped: u64,
    /// Ticks skipped because the caller did not drain `poll_transmit`.
    pub skipped_ticks: u64,
}

/// Bound on queued datagrams: two full ticks' worth (W segments + META per receiver).
fn job_cap(cfg: &SenderConfig, receivers: usize) -> usize {
    2 * receivers * (cfg.window as usize + 1)
}

/// Bound on queued group-change events (done/failed/finished are never dropped:
/// at most one each per receiver).
fn event_cap(receivers: usize) -> usize {
    8 * receivers + 8
}

/// What the caller can see of one receiver.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PeerView {
    pub addr: SocketAddr,
    pub group: usize,
    pub srtt: Duration,
    pub acked_bytes: u64,
    pub state: PeerState,
}

const ROUND_HISTORY: usize = 64;

struct Peer {
    addr: SocketAddr,
    rtt: RttEstimator,
    group: usize,
    state: PeerState,
    /// All sequence numbers below are acknowledged.
    cum: u32,
    window_end: u32,
    next_new: u32,
    /// Ring over [cum, cum + max_in_flight): round last sent in, when, acked.
    sent_round: Vec<u32>,
    sent_at: Vec<Duration>,
    acked: Vec<bool>,
    next_round: u32,
    round_times: [(u32, Duration); ROUND_HISTORY],
    last_acked_round: Option<u32>,
    last_sampled_round: Option<u32>,
    have_meta: bool,
    last_heard: Duration,
    last_served: Option<Duration>,
}

#[derive(Clone, Copy, Debug)]
enum Job {
    Data {
        peer: u16,
        seq: u32,
        round: u32,
        idx: u16,
        count: u16,
    },
    Meta {
        peer: u16,
        round: u32,
    },
}

#[derive(Clone, Copy, Debug)]
struct Group {
    period: Duration,
    next_tick: Option<Duration>,
}

pub struct Sender {
    cfg: SenderConfig,
    psk: Option<Psk>,
    object: Arc<[u8]>,
    sha256: [u8; 32],
    total: u32,
    peers: Vec<Peer>,
    groups: Vec<Group>,
    jobs: VecDeque<Job>,
    events: VecDeque<SenderEvent>,
    scratch: Vec<u32>,
    stats: SenderStats,
    finished: bool,
}

impl Sender {
    /// Start sending `object` to `receivers` at time `now`.
    pub fn new(
        cfg: SenderConfig,
        object: Arc<[u8]>,
        receivers: &[SocketAddr],
        now: Duration,
    ) -> Result<Self, SenderError> {
        if receivers.is_empty() {
            return Err(SenderError::NoReceivers);
        }
        for (i, a) in receivers.iter().enumerate() {
            if receivers[..i].contains(a) {
                return Err(SenderError::DuplicateReceiver(*a));
            }
        }
        if cfg.segment_size == 0 || cfg.segment_size as usize > MAX_SEGMENT {
            return Err(SenderError::SegmentSize(cfg.segment_size));
        }
        if cfg.window == 0 {
            return Err(SenderError::Window);
        }
        if cfg.max_in_flight < cfg.window as u32 || cfg.max_in_flight > 65536 {
            return Err(SenderError::InFlight);
        }
        let total = (object.len() as u64).div_ceil(cfg.segment_size as u64);
        let total = u32::try_from(total).map_err(|_| SenderError::TooLarge(object.len() as u64))?;
        let sha256: [u8; 32] = Sha256::digest(&object).into();
        let m = cfg.max_in_flight as usize;
        let peers = receivers
            .iter()
            .map(|&addr| Peer {
                addr,
                rtt: RttEstimator::new(cfg.initial_rtt),
                group: 0,
                state: PeerState::Active,
                cum: 0,
                window_end: cfg.window as u32,
                next_new: 0,
                sent_round: vec![0; m],
                sent_at: vec![Duration::ZERO; m],
                acked: vec![false; m],
                next_round: 0,
                round_times: [(u32::MAX, Duration::ZERO); ROUND_HISTORY],
                last_acked_round: None,
                last_sampled_round: None,
                have_meta: false,
                last_heard: now,
                last_served: None,
            })
            .collect();
        let psk = cfg.psk.as_deref().map(Psk::new);
        let mut s = Self {
            psk,
            object,
            sha256,
            total,
            peers,
            groups: Vec::with_capacity(cfg.groups.clamp(1, receivers.len())),
            jobs: VecDeque::with_capacity(job_cap(&cfg, receivers.len())),
            events: VecDeque::with_capacity(event_cap(receivers.len())),
            scratch: Vec::with_capacity(cfg.window as usize),
            stats: SenderStats::default(),
            finished: false,
            cfg,
        };
        s.regroup(now);
        Ok(s)
    }

    pub fn stats(&self) -> &SenderStats {
        &self.stats
    }

    pub fn total_segments(&self) -> u32 {
        self.total
    }

    pub fn object_len(&self) -> u64 {
        self.object.len() as u64
    }

    pub fn receivers(&self) -> usize {
        self.peers.len()
    }

    pub fn peer(&self, i: usize) -> PeerView {
        let p = &self.peers[i];
        PeerView {
            addr: p.addr,
            group: p.group,
            srtt: p.rtt.srtt(),
            acked_bytes: (p.cum as u64 * self.cfg.segment_size as u64)
                .min(self.object.len() as u64),
            state: p.state,
        }
    }

    /// Current period of each group (fastest first).
    pub fn group_periods(&self) -> Vec<Duration> {
        self.groups.iter().map(|g| g.period).collect()
    }

    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Bytes of protocol state (excluding the caller's object): bounded by
    /// receivers x max_in_flight, whatever arrives.
    pub fn state_bytes(&self) -> usize {
        let per_peer = std::mem::size_of::<Peer>()
            + self.cfg.max_in_flight as usize
                * (std::mem::size_of::<u32>() + std::mem::size_of::<Duration>() + 1);
        self.peers.len() * per_peer
            + self.jobs.capacity() * std::mem::size_of::<Job>()
            + self.events.capacity() * std::mem::size_of::<SenderEvent>()
            + self.groups.capacity() * std::mem::size_of::<Group>()
    }

    pub fn poll_event(&mut self) -> Option<SenderEvent> {
        self.events.pop_front()
    }

    /// Earliest time [`Sender::handle_timeout`] must be called.
    pub fn poll_timeout(&self) -> Option<Duration> {
        if self.finished {
            return None;
        }
        let ticks = self.groups.iter().filter_map(|g| g.next_tick);
        let fails = self
            .peers
            .iter()
            .filter(|p| p.state == PeerState::Active)
            .map(|p| p.last_heard + self.cfg.fail_timeout);
        ticks.chain(fails).min()
    }

    pub fn handle_timeout(&mut self, now: Duration) {
        let mut lost_any = false;
        for i in 0..self.peers.len() {
            let p = &mut self.peers[i];
            if p.state == PeerState::Active && now >= p.last_heard + self.cfg.fail_timeout {
                p.state = PeerState::Failed;
                tracing::warn!(receiver = %p.addr, "receiver silent for {:?}: declared failed", self.cfg.fail_timeout);
                self.events.push_back(SenderEvent::ReceiverFailed {
                    receiver: i,
                    at: now,
                });
                lost_any = true;
            }
        }
        if lost_any {
            self.regroup(now);
            self.check_finished();
        }
        for g in 0..self.groups.len() {
            if let Some(t) = self.groups[g].next_tick {
                if t <= now {
                    self.tick(g, now);
                }
            }
        }
    }

    /// Encode the next datagram into `buf`; returns its destination.
    pub fn poll_transmit(&mut self, buf: &mut Vec<u8>) -> Option<SocketAddr> {
        let job = self.jobs.pop_front()?;
        let seg = self.cfg.segment_size as usize;
        match job {
            Job::Data {
                peer,
                seq,
                round,
                idx,
                count,
            } => {
                let start = seq as usize * seg;
                let end = (start + seg).min(self.object.len());
                let d = Data {
                    round,
                    seq,
                    object_len: self.object.len() as u64,
                    seg_size: self.cfg.segment_size,
                    idx,
                    count,
                    last: idx + 1 == count,
                    payload: &self.object[start..end],
                };
                wire::encode_data(buf, self.cfg.session, &d, self.psk.as_ref());
                Some(self.peers[peer as usize].addr)
            }
            Job::Meta { peer, round } => {
                let m = Meta {
                    round,
                    object_len: self.object.len() as u64,
                    seg_size: self.cfg.segment_size,
                    sha256: self.sha256,
                };
                wire::encode_meta(buf, self.cfg.session, &m, self.psk.as_ref());
                Some(self.peers[peer as usize].addr)
            }
        }
    }

    pub fn handle_datagram(&mut self, now: Duration, from: SocketAddr, bytes: &[u8]) {
        let Some(pi) = self.peers.iter().position(|p| p.addr == from) else {
            self.stats.non_member += 1;
            return;
        };
        let pkt = match wire::decode(bytes, self.psk.as_ref()) {
            Ok(p) => p,
            Err(WireError::Unauthenticated | WireError::BadTag | WireError::UnexpectedAuth) => {
                self.stats.auth_failures += 1;
                return;
            }
            Err(_) => {
                self.stats.malformed += 1;
                return;
            }
        };
        if pkt.session != self.cfg.session {
            self.stats.wrong_session += 1;
            return;
        }
        let Body::Ack(ack) = pkt.body else {
            self.stats.malformed += 1;
            return;
        };
        let total = self.total;
        let m = self.cfg.max_in_flight;
        let p = &mut self.peers[pi];
        if p.state != PeerState::Active {
            // Late ACKs after completion or failure change nothing.
            self.stats.duplicate_acks += 1;
            return;
        }
        if ack.round >= p.next_round
            || ack.cum > p.next_new
            || ack.window_end < ack.cum
            || (ack.complete && ack.cum != total)
        {
            self.stats.invalid_acks += 1;
            return;
        }
        self.stats.acks += 1;
        p.last_heard = now;
        let newer = p.last_acked_round.is_none_or(|r| ack.round > r);
        let before = p.cum;
        let mut news = false;
        // Cumulative part: free the ring slots below the new cumulative point.
        while p.cum < ack.cum {
            let slot = (p.cum % m) as usize;
            p.acked[slot] = false;
            p.cum += 1;
        }
        // Selective part, only for data actually sent.
        let limit = p
            .next_new
            .min(ack.cum.saturating_add(1 + 8 * ack.bitmap.len() as u32));
        let mut seq = ack.cum.saturating_add(1);
        while seq < limit {
            if ack.has(seq) {
                let slot = (seq % m) as usize;
                if !p.acked[slot] {
                    p.acked[slot] = true;
                    news = true;
                }
            }
            seq += 1;
        }
        while p.cum < p.next_new && p.acked[(p.cum % m) as usize] {
            p.acked[(p.cum % m) as usize] = false;
            p.cum += 1;
        }
        news |= p.cum != before || (ack.have_meta && !p.have_meta);
        if newer {
            p.last_acked_round = Some(ack.round);
            p.window_end = ack.window_end;
        }
        p.have_meta |= ack.have_meta;
        if !news && !newer && !ack.complete {
            self.stats.duplicate_acks += 1;
        }
        let mut regroup = false;
        let (r, at) = p.round_times[ack.round as usize % ROUND_HISTORY];
        let fresh = r == ack.round && p.last_sampled_round.is_none_or(|r| ack.round > r);
        if fresh && (ack.rtt_sample || ack.partial_sample) {
            let sample = now
                .saturating_sub(at)
                .saturating_sub(Duration::from_micros(ack.ack_delay_us as u64))
                .max(Duration::from_micros(100));
            if ack.rtt_sample {
                p.rtt.sample(sample);
                p.last_sampled_round = Some(ack.round);
                self.stats.rtt_samples += 1;
                regroup = true;
            } else if !p.rtt.has_sample() {
                p.rtt.provisional_sample(sample);
                regroup = true;
            }
        }
        if ack.complete {
            p.state = PeerState::Done { intact: ack.intact };
            self.events.push_back(SenderEvent::ReceiverDone {
                receiver: pi,
                intact: ack.intact,
                at: now,
            });
            regroup = true;
        }
        if regroup {
            self.regroup(now);
        }
        self.check_finished();
    }

    fn check_finished(&mut self) {
        if !self.finished && self.peers.iter().all(|p| p.state != PeerState::Active) {
            self.finished = true;
            self.events.push_back(SenderEvent::Finished);
        }
    }

    /// Recompute groups from the active receivers' smoothed RTTs.
    fn regroup(&mut self, now: Duration) {
        let active: Vec<usize> = (0..self.peers.len())
            .filter(|&i| self.peers[i].state == PeerState::Active)
            .collect();
        let taus: Vec<Duration> = active.iter().map(|&i| self.peers[i].rtt.srtt()).collect();
        let a = groups::assign(&taus, self.cfg.groups, self.cfg.eps);
        self.groups.clear();
        self.groups.extend(a.periods.iter().map(|&period| Group {
            period,
            next_tick: None,
        }));
        let ecap = event_cap(self.peers.len());
        for (k, &i) in active.iter().enumerate() {
            let g = a.group_of[k];
            let p = &mut self.peers[i];
            if p.group != g {
                if self.events.len() < ecap {
                    self.events.push_back(SenderEvent::GroupChanged {
                        receiver: i,
                        from: p.group,
                        to: g,
                        srtt: p.rtt.srtt(),
                    });
                } else {
                    self.stats.events_dropped += 1;
                }
            }
            // A member is due one period after it was last served (now if never);
            // the group ticks when its earliest member is due.
            let due = p.last_served.map_or(now, |t| (t + a.periods[g]).max(now));
            p.group = g;
            let grp = &mut self.groups[g];
            grp.next_tick = Some(grp.next_tick.map_or(due, |t: Duration| t.min(due)));
        }
    }

    /// Serve every active member of group `g` one round.
    fn tick(&mut self, g: usize, now: Duration) {
        let period = self.groups[g].period;
        self.groups[g].next_tick = Some(now + period);
        if self.jobs.len() > job_cap(&self.cfg, self.peers.len()) / 2 {
            // The driver is not draining poll_transmit: do not pile up more rounds.
            self.stats.skipped_ticks += 1;
            return;
        }
        for i in 0..self.peers.len() {
            if self.peers[i].state == PeerState::Active && self.peers[i].group == g {
                self.serve(i, now);
            }
        }
    }

    fn serve(&mut self, i: usize, now: Duration) {
        let w = self.cfg.window as usize;
        let m = self.cfg.max_in_flight;
        let total = self.total;
        let p = &mut self.peers[i];
        p.last_served = Some(now);
        let rto = p.rtt.rto() + self.groups[p.group].period;
        self.scratch.clear();
        // Old data first: sent before the newest acknowledged round and still missing,
        // or unreported for longer than the RTO (its ACKs were lost).
        let mut seq = p.cum;
        while seq < p.next_new && self.scratch.len() < w {
            let slot = (seq % m) as usize;
            if !p.acked[slot] {
                let reported_lost = p.last_acked_round.is_some_and(|r| p.sent_round[slot] <= r);
                if reported_lost || now >= p.sent_at[slot] + rto {
                    self.scratch.push(seq);
                }
            }
            seq += 1;
        }
        let retransmits = self.scratch.len();
        while self.scratch.len() < w
            && p.next_new < total
            && p.next_new < p.window_end
            && p.next_new < p.cum.saturating_add(m)
        {
            self.scratch.push(p.next_new);
            p.next_new += 1;
        }
        // META also serves as a probe: after the last ACK was lost (everything acked,
        // no COMPLETE yet) and while the receiver's window is closed (its next ACK
        // reopens it).
        let window_closed = p.next_new < total && p.next_new >= p.window_end;
        let need_meta =
            !p.have_meta || (self.scratch.is_empty() && (p.cum == total || window_closed));
        if self.scratch.is_empty() && !need_meta {
            return; // everything is in flight: wait for ACKs or the RTO
        }
        let round = p.next_round;
        p.next_round += 1;
        p.round_times[round as usize % ROUND_HISTORY] = (round, now);
        self.stats.rounds += 1;
        self.stats.retransmits += retransmits as u64;
        self.stats.data_sent += self.scratch.len() as u64;
        let peer = i as u16;
        if need_meta {
            self.stats.meta_sent += 1;
            self.jobs.push_back(Job::Meta { peer, round });
        }
        let count = self.scratch.len() as u16;
        for (idx, &seq) in self.scratch.iter().enumerate() {
            let slot = (seq % m) as usize;
            p.sent_round[slot] = round;
            p.sent_at[slot] = now;
            self.jobs.push_back(Job::Data {
                peer,
                seq,
                round,
                idx: idx as u16,
                count,
            });
        }
    }
}
