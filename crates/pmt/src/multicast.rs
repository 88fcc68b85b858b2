//! Baseline: slowest-receiver reliable multicast with NORM-like NACK repair.
//!
//! The sender paces every packet at one rate for all receivers (on separate links each
//! receiver gets its own copy at the same instant, as a multicast tree would give).
//! After a pass over the data it sends a FLUSH (a META packet carrying the SHA-256);
//! receivers answer with NACKs listing what they miss, or with a COMPLETE ACK. After
//! `flush_wait` the union of NACKed segments is repaired — to everyone, as multicast
//! repairs are — and the cycle repeats until every receiver is complete.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::wire::{self, Ack, Body, Data, Meta, IP_UDP_OVERHEAD, MAX_NACK};

#[derive(Clone, Debug)]
pub struct McSenderConfig {
    pub session: u32,
    pub segment_size: u16,
    /// The one rate for all receivers.
    pub rate_bps: f64,
    /// How long after a FLUSH NACKs are collected before repairing.
    pub flush_wait: Duration,
}

impl Default for McSenderConfig {
    fn default() -> Self {
        Self {
            session: 1,
            segment_size: 1400,
            rate_bps: 1e6,
            flush_wait: Duration::from_millis(500),
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum McJob {
    Data(u32),
    Flush,
}

pub struct McSender {
    cfg: McSenderConfig,
    object: Arc<[u8]>,
    sha256: [u8; 32],
    total: u32,
    receivers: Vec<SocketAddr>,
    done: Vec<bool>,
    queue: VecDeque<u32>,
    queued: Vec<bool>,
    repair: Vec<bool>,
    /// Copies of the current packet still to hand out, one per receiver.
    copies: VecDeque<(usize, McJob)>,
    next_send: Duration,
    flush_at: Option<Duration>,
    finished: bool,
    pub nacks: u64,
    pub repairs: u64,
    pub ignored: u64,
}

impl McSender {
    pub fn new(cfg: McSenderConfig, object: Arc<[u8]>, receivers: &[SocketAddr]) -> Self {
        let seg = cfg.segment_size.max(1) as usize;
        let total = object.len().div_ceil(seg) as u32;
        let sha256: [u8; 32] = Sha256::digest(&object).into();
        Self {
            sha256,
            total,
            receivers: receivers.to_vec(),
            done: vec![false; receivers.len()],
            queue: (0..total).collect(),
            queued: vec![true; total as usize],
            repair: vec![false; total as usize],
            copies: VecDeque::new(),
            next_send: Duration::ZERO,
            flush_at: None,
            finished: receivers.is_empty(),
            nacks: 0,
            repairs: 0,
            ignored: 0,
            cfg,
            object,
        }
    }

    pub fn is_finished(&self) -> bool {
        self.finished
    }

    fn serialisation(&self, bytes: usize) -> Duration {
        if self.cfg.rate_bps.is_finite() {
            Duration::from_secs_f64((bytes + IP_UDP_OVERHEAD) as f64 * 8.0 / self.cfg.rate_bps)
        } else {
            Duration::ZERO
        }
    }

    pub fn poll_timeout(&self, now: Duration) -> Option<Duration> {
        if !self.copies.is_empty() {
            return Some(now);
        }
        if self.finished {
            return None;
        }
        if self.queue.is_empty() {
            if let Some(f) = self.flush_at {
                return Some(f.max(self.next_send));
            }
        }
        Some(self.next_send)
    }

    fn emit(&mut self, now: Duration, job: McJob, bytes: usize) {
        for (i, done) in self.done.iter().enumerate() {
            if !done {
                self.copies.push_back((i, job));
            }
        }
        self.next_send = self.next_send.max(now) + self.serialisation(bytes);
    }

    pub fn poll_transmit(&mut self, now: Duration, buf: &mut Vec<u8>) -> Option<SocketAddr> {
        if self.copies.is_empty() && !self.finished && now >= self.next_send {
            let seg = self.cfg.segment_size as usize;
            if self.queue.is_empty() {
                let flush_due = self.flush_at.is_none_or(|f| now >= f);
                if flush_due {
                    for seq in 0..self.total {
                        if std::mem::take(&mut self.repair[seq as usize]) {
                            self.queue.push_back(seq);
                            self.queued[seq as usize] = true;
                            self.repairs += 1;
                        }
                    }
                    self.flush_at = None;
                    if self.queue.is_empty() {
                        self.emit(now, McJob::Flush, 80);
                        self.flush_at = Some(now + self.cfg.flush_wait);
                    }
                }
            }
            if let Some(seq) = self.queue.pop_front() {
                self.queued[seq as usize] = false;
                self.emit(now, McJob::Data(seq), seg + 40);
            }
        }
        let (i, job) = self.copies.pop_front()?;
        let seg = self.cfg.segment_size as usize;
        match job {
            McJob::Data(seq) => {
                let start = seq as usize * seg;
                let end = (start + seg).min(self.object.len());
                let d = Data {
                    round: 0,
                    seq,
                    object_len: self.object.len() as u64,
                    seg_size: self.cfg.segment_size,
                    idx: 0,
                    count: 1,
                    last: false,
                    payload: &self.object[start..end],
                };
                wire::encode_data(buf, self.cfg.session, &d, None);
            }
            McJob::Flush => {
                let m = Meta {
                    round: 0,
                    object_len: self.object.len() as u64,
                    seg_size: self.cfg.segment_size,
                    sha256: self.sha256,
                };
                wire::encode_meta(buf, self.cfg.session, &m, None);
            }
        }
        Some(self.receivers[i])
    }

    pub fn handle_datagram(&mut self, _now: Duration, from: SocketAddr, bytes: &[u8]) {
        let Some(i) = self.receivers.iter().position(|&a| a == from) else {
            self.ignored += 1;
            return;
        };
        match wire::decode(bytes, None).map(|p| p.body) {
            Ok(Body::Nack(n)) => {
                self.nacks += 1;
                for seq in n.iter() {
                    if seq < self.total && !self.queued[seq as usize] {
                        self.repair[seq as usize] = true;
                    }
                }
            }
            Ok(Body::Ack(a)) if a.complete => {
                self.done[i] = true;
                self.finished = self.done.iter().all(|&d| d);
            }
            _ => self.ignored += 1,
        }
    }
}

/// Receiver of the multicast baseline: whole-object buffer, NACKs on FLUSH.
pub struct McReceiver {
    sender: SocketAddr,
    max_len: u64,
    session: u32,
    data: Vec<u8>,
    have: Vec<bool>,
    seg: usize,
    total: u32,
    cum: u32,
    sha256: Option<[u8; 32]>,
    result: Option<bool>,
    out: VecDeque<Vec<u32>>,
    send_complete: bool,
    pub ignored: u64,
}

impl McReceiver {
    pub fn new(sender: SocketAddr, max_len: u64) -> Self {
        Self {
            sender,
            max_len,
            session: 0,
            data: Vec::new(),
            have: Vec::new(),
            seg: 0,
            total: 0,
            cum: 0,
            sha256: None,
            result: None,
            out: VecDeque::new(),
            send_complete: false,
            ignored: 0,
        }
    }

    pub fn result(&self) -> Option<bool> {
        self.result
    }

    pub fn data(&self) -> &[u8] {
        &self.data
    }

    pub fn contiguous_bytes(&self) -> u64 {
        (self.cum as usize * self.seg).min(self.data.len()) as u64
    }

    fn geometry(&mut self, object_len: u64, seg: u16) -> bool {
        if self.seg == 0 {
            if object_len > self.max_len {
                return false;
            }
            self.seg = seg as usize;
            self.total = object_len.div_ceil(seg as u64) as u32;
            self.data = vec![0; object_len as usize];
            self.have = vec![false; self.total as usize];
        }
        self.seg == seg as usize && self.data.len() as u64 == object_len
    }

    pub fn handle_datagram(&mut self, from: SocketAddr, bytes: &[u8]) {
        if from != self.sender {
            self.ignored += 1;
            return;
        }
        let Ok(p) = wire::decode(bytes, None) else {
            self.ignored += 1;
            return;
        };
        self.session = p.session;
        match p.body {
            Body::Data(d) => {
                if !self.geometry(d.object_len, d.seg_size) || d.seq >= self.total {
                    self.ignored += 1;
                    return;
                }
                let start = d.seq as usize * self.seg;
                let end = (start + self.seg).min(self.data.len());
                if d.payload.len() != end - start || self.have[d.seq as usize] {
                    self.ignored += 1;
                    return;
                }
                self.data[start..end].copy_from_slice(d.payload);
                self.have[d.seq as usize] = true;
                while self.cum < self.total && self.have[self.cum as usize] {
                    self.cum += 1;
                }
            }
            Body::Meta(m) => {
                if !self.geometry(m.object_len, m.seg_size) {
                    self.ignored += 1;
                    return;
                }
                self.sha256 = Some(m.sha256);
                if self.cum == self.total {
                    if self.result.is_none() {
                        let got: [u8; 32] = Sha256::digest(&self.data).into();
                        self.result = Some(got == m.sha256);
                    }
                    self.send_complete = true;
                } else {
                    let missing: Vec<u32> = (self.cum..self.total)
                        .filter(|&s| !self.have[s as usize])
                        .take(4 * MAX_NACK)
                        .collect();
                    for chunk in missing.chunks(MAX_NACK) {
                        self.out.push_back(chunk.to_vec());
                    }
                }
            }
            _ => self.ignored += 1,
        }
    }

    pub fn poll_transmit(&mut self, buf: &mut Vec<u8>) -> Option<SocketAddr> {
        if let Some(seqs) = self.out.pop_front() {
            wire::encode_nack(buf, self.session, seqs, None);
            return Some(self.sender);
        }
        if std::mem::take(&mut self.send_complete) {
            let a = Ack {
                round: 0,
                cum: self.cum,
                window_end: self.total,
                ack_delay_us: 0,
                rtt_sample: false,
                partial_sample: false,
                have_meta: true,
                complete: true,
                intact: self.result == Some(true),
                bitmap: &[],
            };
            wire::encode_ack(buf, self.session, &a, None);
            return Some(self.sender);
        }
        None
    }
}
