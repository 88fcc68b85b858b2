//! The sans-IO PMT receiver.
//!
//! It reassembles segments into a bounded ring of `buffer_segments` slots, hands
//! in-order bytes to the application ([`Receiver::read`]), hashes them as they become
//! contiguous and compares the SHA-256 with the sender's META. Flow control: each ACK
//! advertises `window_end = first unread segment + buffer_segments`, so the sender
//! never sends what the ring cannot hold; an application that stops reading stops the
//! sender. A segment is written only after its CRC32C (and HMAC, with a PSK) passed.
//!
//! ACK timing: one ACK per round, sent at once when the round's last segment arrives
//! (a valid RTT sample). If that segment is lost, the ACK goes out when the round's
//! remaining segments are overdue (twice the observed inter-segment gap per missing
//! segment, plus 2 ms), or when a newer round starts.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::wire::{self, Ack, Body, Psk, WireError, MAX_BITMAP};

#[derive(Clone, Debug)]
pub struct ReceiverConfig {
    /// Accept data only from this address; `None` locks onto the first valid sender.
    pub sender: Option<SocketAddr>,
    /// Accept only this session; `None` locks onto the first valid packet's session.
    pub session: Option<u32>,
    /// Reassembly ring size in segments (the flow-control window).
    pub buffer_segments: u32,
    /// Refuse objects larger than this.
    pub max_object_len: u64,
    pub psk: Option<Vec<u8>>,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        Self {
            sender: None,
            session: None,
            buffer_segments: 1024,
            max_object_len: 1 << 34,
            psk: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReceiverEvent {
    /// The first valid packet arrived: the object's length is known.
    Started { from: SocketAddr, object_len: u64 },
    /// Every byte arrived and was hashed; `intact` is the SHA-256 verdict.
    Complete { intact: bool },
}

/// Counters; every ignored packet lands in one of them.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReceiverStats {
    pub data: u64,
    pub meta: u64,
    pub duplicates: u64,
    pub out_of_window: u64,
    pub malformed: u64,
    pub auth_failures: u64,
    pub wrong_session: u64,
    pub non_member: u64,
    /// Packets whose object length, segment size or hash disagree with earlier ones.
    pub inconsistent: u64,
    pub acks_sent: u64,
}

#[derive(Clone, Copy, Debug)]
struct Geometry {
    object_len: u64,
    seg_size: u16,
    total: u32,
}

#[derive(Clone, Copy, Debug)]
struct AckDue {
    round: u32,
    rtt_sample: bool,
    partial: bool,
    trigger_at: Duration,
}

pub struct Receiver {
    cfg: ReceiverConfig,
    psk: Option<Psk>,
    sender: Option<SocketAddr>,
    session: Option<u32>,
    started: bool,
    geo: Option<Geometry>,
    sha256: Option<[u8; 32]>,
    ring: Vec<u8>,
    have: Vec<bool>,
    read_seq: u32,
    read_off: usize,
    cum: u32,
    hasher: Sha256,
    result: Option<bool>,
    /// ACK waiting for the rest of its round.
    pending: Option<(AckDue, Duration)>,
    /// ACK to send at the next poll.
    due: Option<AckDue>,
    round_seen: Option<u32>,
    last_arrival: Option<(u32, u16, Duration)>,
    gap: Duration,
    bitmap: [u8; MAX_BITMAP],
    events: VecDeque<ReceiverEvent>,
    stats: ReceiverStats,
}

impl Receiver {
    pub fn new(cfg: ReceiverConfig) -> Self {
        let psk = cfg.psk.as_deref().map(Psk::new);
        Self {
            psk,
            sender: cfg.sender,
            session: cfg.session,
            started: false,
            geo: None,
            sha256: None,
            ring: Vec::new(),
            have: Vec::new(),
            read_seq: 0,
            read_off: 0,
            cum: 0,
            hasher: Sha256::new(),
            result: None,
            pending: None,
            due: None,
            round_seen: None,
            last_arrival: None,
            gap: Duration::from_millis(10),
            bitmap: [0; MAX_BITMAP],
            events: VecDeque::new(),
            stats: ReceiverStats::default(),
            cfg: ReceiverConfig {
                buffer_segments: cfg.buffer_segments.max(1),
                ..cfg
            },
        }
    }

    pub fn stats(&self) -> &ReceiverStats {
        &self.stats
    }

    pub fn object_len(&self) -> Option<u64> {
        self.geo.map(|g| g.object_len)
    }

    /// Bytes received in order (hashed so far).
    pub fn received_bytes(&self) -> u64 {
        self.geo.map_or(0, |g| {
            (self.cum as u64 * g.seg_size as u64).min(g.object_len)
        })
    }

    /// SHA-256 verdict once complete.
    pub fn result(&self) -> Option<bool> {
        self.result
    }

    pub fn sender(&self) -> Option<SocketAddr> {
        self.sender
    }

    pub fn poll_event(&mut self) -> Option<ReceiverEvent> {
        self.events.pop_front()
    }

    pub fn poll_timeout(&self) -> Option<Duration> {
        if self.due.is_some() {
            return Some(Duration::ZERO);
        }
        self.pending.map(|(_, deadline)| deadline)
    }

    pub fn handle_timeout(&mut self, now: Duration) {
        if let Some((ack, deadline)) = self.pending {
            if now >= deadline {
                self.pending = None;
                self.due = Some(ack);
            }
        }
    }

    /// Copy in-order bytes to `buf`; returns how many. Reading frees ring slots, which
    /// the next ACK advertises as window.
    pub fn read(&mut self, buf: &mut [u8]) -> usize {
        let Some(g) = self.geo else { return 0 };
        let seg = g.seg_size as usize;
        let b = self.cfg.buffer_segments;
        let mut n = 0;
        while n < buf.len() && self.read_seq < self.cum {
            let len = seg_len(g, self.read_seq);
            let slot = (self.read_seq % b) as usize;
            let avail = &self.ring[slot * seg + self.read_off..slot * seg + len];
            let k = avail.len().min(buf.len() - n);
            buf[n..n + k].copy_from_slice(&avail[..k]);
            n += k;
            self.read_off += k;
            if self.read_off == len {
                self.have[slot] = false;
                self.read_seq += 1;
                self.read_off = 0;
            }
        }
        n
    }

    /// Encode the next ACK into `buf`; returns the destination.
    pub fn poll_transmit(&mut self, now: Duration, buf: &mut Vec<u8>) -> Option<SocketAddr> {
        let due = self.due.take()?;
        let to = self.sender?;
        let session = self.session?;
        let b = self.cfg.buffer_segments;
        let (total, window_end) = match self.geo {
            Some(g) => (g.total, self.read_seq.saturating_add(b)),
            None => (0, b),
        };
        // Bitmap: seq cum+1+i received, up to the ring's end; trailing zeros trimmed.
        let span = window_end
            .min(total)
            .saturating_sub(self.cum.saturating_add(1));
        let bits = (span as usize).min(MAX_BITMAP * 8);
        self.bitmap = [0; MAX_BITMAP];
        let mut used = 0;
        for i in 0..bits {
            let seq = self.cum + 1 + i as u32;
            if self.have[(seq % b) as usize] {
                self.bitmap[i / 8] |= 1 << (i % 8);
                used = i / 8 + 1;
            }
        }
        let complete = self.result.is_some();
        let ack = Ack {
            round: due.round,
            cum: self.cum,
            window_end,
            ack_delay_us: now
                .saturating_sub(due.trigger_at)
                .as_micros()
                .min(u32::MAX as u128) as u32,
            rtt_sample: due.rtt_sample,
            partial_sample: due.partial,
            have_meta: self.sha256.is_some(),
            complete,
            intact: self.result == Some(true),
            bitmap: &self.bitmap[..used],
        };
        wire::encode_ack(buf, session, &ack, self.psk.as_ref());
        self.stats.acks_sent += 1;
        Some(to)
    }

    pub fn handle_datagram(&mut self, now: Duration, from: SocketAddr, bytes: &[u8]) {
        if self.sender.is_some_and(|s| s != from) {
            self.stats.non_member += 1;
            return;
        }
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
        if self.session.is_some_and(|s| s != pkt.session) {
            self.stats.wrong_session += 1;
            return;
        }
        let (object_len, seg_size, round) = match pkt.body {
            Body::Data(d) => (d.object_len, d.seg_size, d.round),
            Body::Meta(m) => (m.object_len, m.seg_size, m.round),
            Body::Ack(_) | Body::Nack(_) => {
                self.stats.malformed += 1;
                return;
            }
        };
        if !self.adopt_geometry(object_len, seg_size) {
            return;
        }
        if !self.started {
            self.started = true;
            self.sender = Some(from);
            self.session = Some(pkt.session);
            self.events
                .push_back(ReceiverEvent::Started { from, object_len });
        }
        match pkt.body {
            Body::Data(d) => {
                self.stats.data += 1;
                self.store(d.seq, d.payload);
                self.schedule_ack(now, round, d.idx, d.count, d.last);
            }
            Body::Meta(m) => {
                self.stats.meta += 1;
                match self.sha256 {
                    Some(h) if h != m.sha256 => {
                        self.stats.inconsistent += 1;
                        return;
                    }
                    _ => self.sha256 = Some(m.sha256),
                }
                self.finish_if_complete();
                self.ack_now(now, round, false);
            }
            _ => {}
        }
    }

    /// Check the object's geometry against earlier packets; size the ring on first use.
    fn adopt_geometry(&mut self, object_len: u64, seg_size: u16) -> bool {
        if let Some(g) = self.geo {
            if g.object_len != object_len || g.seg_size != seg_size {
                self.stats.inconsistent += 1;
                return false;
            }
            return true;
        }
        let total = object_len.div_ceil(seg_size as u64);
        let Ok(total) = u32::try_from(total) else {
            self.stats.malformed += 1;
            return false;
        };
        if object_len > self.cfg.max_object_len {
            self.stats.out_of_window += 1;
            return false;
        }
        // seg_size <= MAX_SEGMENT (checked by the parser) and buffer_segments is ours:
        // the ring's size never comes from the wire alone.
        let slots = self.cfg.buffer_segments.min(total.max(1)) as usize;
        self.cfg.buffer_segments = slots as u32;
        self.ring = vec![0; slots * seg_size as usize];
        self.have = vec![false; slots];
        self.geo = Some(Geometry {
            object_len,
            seg_size,
            total,
        });
        true
    }

    fn store(&mut self, seq: u32, payload: &[u8]) {
        let Some(g) = self.geo else { return };
        let b = self.cfg.buffer_segments;
        if seq >= g.total || payload.len() != seg_len(g, seq) {
            self.stats.malformed += 1;
            return;
        }
        if seq >= self.read_seq.saturating_add(b) {
            self.stats.out_of_window += 1;
            return;
        }
        let slot = (seq % b) as usize;
        if seq < self.cum || self.have[slot] {
            self.stats.duplicates += 1;
            return;
        }
        let seg = g.seg_size as usize;
        self.ring[slot * seg..slot * seg + payload.len()].copy_from_slice(payload);
        self.have[slot] = true;
        // A slot is this sequence number's only while within [read_seq, read_seq + b).
        while self.cum < g.total
            && self.cum < self.read_seq.saturating_add(b)
            && self.have[(self.cum % b) as usize]
        {
            let s = (self.cum % b) as usize;
            let len = seg_len(g, self.cum);
            self.hasher.update(&self.ring[s * seg..s * seg + len]);
            self.cum += 1;
        }
        self.finish_if_complete();
    }

    fn finish_if_complete(&mut self) {
        let (Some(g), Some(h)) = (self.geo, self.sha256) else {
            return;
        };
        if self.result.is_none() && self.cum == g.total {
            let got: [u8; 32] = self.hasher.finalize_reset().into();
            let intact = got == h;
            self.result = Some(intact);
            self.events.push_back(ReceiverEvent::Complete { intact });
        }
    }

    fn ack_now(&mut self, now: Duration, round: u32, rtt_sample: bool) {
        self.due = Some(AckDue {
            round,
            rtt_sample,
            partial: false,
            trigger_at: now,
        });
    }

    fn schedule_ack(&mut self, now: Duration, round: u32, idx: u16, count: u16, last: bool) {
        if self.round_seen.is_some_and(|r| round < r) {
            // A straggler from an old round: its data is stored, the ACK of the
            // current round will report it.
            return;
        }
        if self.round_seen.is_some_and(|r| round > r) {
            if let Some((ack, _)) = self.pending.take() {
                // The old round's tail is lost: report it now.
                self.due = Some(ack);
            }
        }
        self.round_seen = Some(round);
        if let Some((r, prev_idx, at)) = self.last_arrival {
            if r == round && idx > prev_idx {
                let g = (now - at.min(now)) / u32::from(idx - prev_idx);
                self.gap = (self.gap * 3 + g) / 4;
            }
        }
        self.last_arrival = Some((round, idx, now));
        if last || self.result.is_some() {
            self.pending = None;
            self.ack_now(now, round, last);
        } else {
            let missing = u32::from(count - idx);
            let wait =
                (self.gap * 2 * missing + Duration::from_millis(2)).min(Duration::from_secs(2));
            self.pending = Some((
                AckDue {
                    round,
                    rtt_sample: false,
                    partial: true,
                    trigger_at: now,
                },
                now + wait,
            ));
        }
    }
}

fn seg_len(g: Geometry, seq: u32) -> usize {
    let seg = g.seg_size as u64;
    let start = seq as u64 * seg;
    (g.object_len - start).min(seg) as usize
}
