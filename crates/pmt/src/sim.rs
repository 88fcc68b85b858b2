//! PMT and the multicast baseline over `testbed::simnet` in virtual time.
//!
//! One sender, R receivers, one link per direction per receiver (the reverse link is
//! the forward spec with its own seed, so ACKs are lost too). Runs take milliseconds
//! of wall time and replay exactly from the seed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use radiohost_testbed::link::LinkConfig;
use radiohost_testbed::simnet::SimNet;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::multicast::{McReceiver, McSender, McSenderConfig};
use crate::receiver::{Receiver, ReceiverConfig, ReceiverEvent, ReceiverStats};
use crate::sender::{Sender, SenderConfig, SenderEvent, SenderStats};
use crate::wire::IP_UDP_OVERHEAD;

pub const SENDER_ADDR: SocketAddr = SocketAddr::new(
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1)),
    7000,
);

pub fn receiver_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([10, 0, 1 + (i / 250) as u8, 1 + (i % 250) as u8], 7001))
}

/// Deterministic object bytes for a seed.
pub fn object_for(size: usize, seed: u64) -> Arc<[u8]> {
    let mut v = vec![0u8; size];
    ChaCha8Rng::seed_from_u64(seed ^ 0x000b_1ec7).fill_bytes(&mut v);
    v.into()
}

/// Physical floor: time for `size` bytes at the link's capacity (following its
/// schedule) times its delivery ratio (1 - loss).
pub fn floor_seconds(link: &LinkConfig, size: usize) -> f64 {
    let keep = (1.0 - link.loss) * (1.0 - link.burst.map_or(0.0, |b| b.mean_loss()));
    let mut bits = size as f64 * 8.0;
    let mut t = 0.0;
    let mut rate = link.rate_bps;
    for c in &link.capacity_schedule {
        let span = c.at.as_secs_f64() - t;
        if span > 0.0 {
            let can = rate * keep * span;
            if can >= bits {
                return t + bits / (rate * keep);
            }
            bits -= can;
            t = c.at.as_secs_f64();
        }
        rate = c.rate_bps;
    }
    t + bits / (rate * keep)
}

/// The forward link of receiver `i` in run `seed` (every protocol gets the same).
pub fn seeded(link: &LinkConfig, seed: u64, i: usize) -> LinkConfig {
    LinkConfig {
        seed: link.seed ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ i as u64,
        ..link.clone()
    }
}

/// The reverse (ACK) direction: same link, own seed.
pub fn reverse_of(link: &LinkConfig) -> LinkConfig {
    LinkConfig {
        seed: link.seed ^ 0x5eed_ac4b,
        ..link.clone()
    }
}

/// Per-receiver outcome of one run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ReceiverOutcome {
    pub bytes: u64,
    /// Completion time; `None` if it did not finish within the limit.
    pub seconds: Option<f64>,
    pub floor_seconds: f64,
    /// Byte-exact against the sent object and SHA-256 verdict positive.
    pub intact: bool,
    /// (seconds, bytes delivered in order) samples.
    pub timeline: Vec<(f64, u64)>,
}

/// Sampled sender state for plots: group periods and per-receiver smoothed RTT.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TraceRow {
    pub t: f64,
    pub periods: Vec<f64>,
    pub srtt: Vec<f64>,
    pub group: Vec<usize>,
}

#[derive(Clone, Debug)]
pub struct RunOutcome {
    pub receivers: Vec<ReceiverOutcome>,
    pub trace: Vec<TraceRow>,
    pub sender_events: Vec<(Duration, SenderEvent)>,
    pub sender_stats: Option<SenderStats>,
    pub receiver_stats: Vec<ReceiverStats>,
    /// TCP baseline only: (seconds, congestion window in segments) per receiver.
    pub cwnd: Vec<Vec<(f64, u32)>>,
}

/// A PMT run in progress: the network and every endpoint, exposed so tests can
/// inject packets, change links or drop receivers between steps.
pub struct PmtSim {
    pub net: SimNet,
    pub sender: Sender,
    pub receivers: Vec<Receiver>,
    /// Receivers that stopped processing (simulating a vanished host).
    pub dead: Vec<bool>,
    pub object: Arc<[u8]>,
    pub got: Vec<Vec<u8>>,
    pub done_at: Vec<Option<Duration>>,
    pub verdict: Vec<Option<bool>>,
    pub timeline: Vec<Vec<(f64, u64)>>,
    pub trace: Vec<TraceRow>,
    pub sender_events: Vec<(Duration, SenderEvent)>,
    floors: Vec<f64>,
    buf: Vec<u8>,
    next_trace: Duration,
    trace_every: Duration,
}

impl PmtSim {
    pub fn new(
        size: usize,
        links: &[LinkConfig],
        seed: u64,
        cfg: SenderConfig,
        rcfg: ReceiverConfig,
    ) -> Result<Self, crate::sender::SenderError> {
        Self::with_object(object_for(size, seed), links, seed, cfg, rcfg)
    }

    /// A run that delivers `object` (any bytes) to one receiver per link.
    pub fn with_object(
        object: Arc<[u8]>,
        links: &[LinkConfig],
        seed: u64,
        cfg: SenderConfig,
        rcfg: ReceiverConfig,
    ) -> Result<Self, crate::sender::SenderError> {
        let size = object.len();
        let mut net = SimNet::with_overhead(IP_UDP_OVERHEAD);
        let addrs: Vec<SocketAddr> = (0..links.len()).map(receiver_addr).collect();
        for (i, l) in links.iter().enumerate() {
            let fwd = seeded(l, seed, i);
            let rev = reverse_of(&fwd);
            net.connect(SENDER_ADDR, addrs[i], fwd, rev);
        }
        let sender = Sender::new(cfg, object.clone(), &addrs, Duration::ZERO)?;
        let receivers = addrs
            .iter()
            .map(|_| {
                Receiver::new(ReceiverConfig {
                    sender: Some(SENDER_ADDR),
                    ..rcfg.clone()
                })
            })
            .collect();
        let n = links.len();
        Ok(Self {
            net,
            sender,
            receivers,
            dead: vec![false; n],
            object,
            got: vec![Vec::with_capacity(size); n],
            done_at: vec![None; n],
            verdict: vec![None; n],
            timeline: vec![vec![(0.0, 0)]; n],
            trace: Vec::new(),
            sender_events: Vec::new(),
            floors: links.iter().map(|l| floor_seconds(l, size)).collect(),
            buf: Vec::with_capacity(2048),
            next_trace: Duration::ZERO,
            trace_every: Duration::from_millis(50),
        })
    }

    pub fn now(&self) -> Duration {
        self.net.now()
    }

    fn flush(&mut self) {
        while let Some(to) = self.sender.poll_transmit(&mut self.buf) {
            self.net.send(SENDER_ADDR, to, &self.buf);
        }
        let now = self.net.now();
        for (i, r) in self.receivers.iter_mut().enumerate() {
            while let Some(to) = r.poll_transmit(now, &mut self.buf) {
                if !self.dead[i] {
                    self.net.send(receiver_addr(i), to, &self.buf);
                }
            }
        }
        while let Some(e) = self.sender.poll_event() {
            self.sender_events.push((now, e));
        }
        let mut chunk = [0u8; 4096];
        for (i, r) in self.receivers.iter_mut().enumerate() {
            let before = self.got[i].len();
            loop {
                let n = r.read(&mut chunk);
                if n == 0 {
                    break;
                }
                self.got[i].extend_from_slice(&chunk[..n]);
            }
            if self.got[i].len() != before {
                self.timeline[i].push((now.as_secs_f64(), self.got[i].len() as u64));
            }
            while let Some(e) = r.poll_event() {
                if let ReceiverEvent::Complete { intact } = e {
                    self.done_at[i] = Some(now);
                    self.verdict[i] = Some(intact);
                }
            }
        }
        if now >= self.next_trace {
            self.next_trace = now + self.trace_every;
            let n = self.receivers.len();
            self.trace.push(TraceRow {
                t: now.as_secs_f64(),
                periods: self
                    .sender
                    .group_periods()
                    .iter()
                    .map(Duration::as_secs_f64)
                    .collect(),
                srtt: (0..n)
                    .map(|i| self.sender.peer(i).srtt.as_secs_f64())
                    .collect(),
                group: (0..n).map(|i| self.sender.peer(i).group).collect(),
            });
        }
    }

    /// Advance to the next event and process it. Returns false when nothing is left
    /// to do (sender finished and the network drained) or `limit` is reached.
    pub fn step(&mut self, limit: Duration) -> bool {
        self.flush();
        let mut next = self.net.next_delivery();
        let mut consider = |t: Option<Duration>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n: Duration| n.min(t)));
            }
        };
        consider(self.sender.poll_timeout());
        for (i, r) in self.receivers.iter().enumerate() {
            if !self.dead[i] {
                consider(r.poll_timeout());
            }
        }
        let Some(t) = next else { return false };
        if t > limit {
            return false;
        }
        self.net.advance_to(t);
        let now = self.net.now();
        while let Some(d) = self.net.pop_due() {
            if d.to == SENDER_ADDR {
                self.sender.handle_datagram(now, d.from, &d.data);
            } else if let Some(i) = (0..self.receivers.len()).find(|&i| receiver_addr(i) == d.to) {
                if !self.dead[i] {
                    self.receivers[i].handle_datagram(now, d.from, &d.data);
                }
            }
        }
        if self.sender.poll_timeout().is_some_and(|t| t <= now) {
            self.sender.handle_timeout(now);
        }
        for (i, r) in self.receivers.iter_mut().enumerate() {
            if !self.dead[i] && r.poll_timeout().is_some_and(|t| t <= now) {
                r.handle_timeout(now);
            }
        }
        true
    }

    /// Run until the sender finishes (and its last packets drain) or `limit`.
    pub fn run(&mut self, limit: Duration) {
        while self.step(limit) {
            if self.sender.is_finished() && self.net.in_flight() == 0 {
                break;
            }
        }
        self.flush();
    }

    pub fn outcome(&self) -> RunOutcome {
        let receivers = (0..self.receivers.len())
            .map(|i| ReceiverOutcome {
                bytes: self.got[i].len() as u64,
                seconds: self.done_at[i].map(|d| d.as_secs_f64()),
                floor_seconds: self.floors[i],
                intact: self.verdict[i] == Some(true) && self.got[i][..] == self.object[..],
                timeline: self.timeline[i].clone(),
            })
            .collect();
        RunOutcome {
            receivers,
            trace: self.trace.clone(),
            sender_events: self.sender_events.clone(),
            sender_stats: Some(self.sender.stats().clone()),
            receiver_stats: self.receivers.iter().map(|r| r.stats().clone()).collect(),
            cwnd: Vec::new(),
        }
    }
}

/// Deliver `size` bytes to one receiver per link with PMT; stop at `limit`.
pub fn run_pmt(
    size: usize,
    links: &[LinkConfig],
    seed: u64,
    cfg: SenderConfig,
    limit: Duration,
) -> Result<RunOutcome, crate::sender::SenderError> {
    let mut sim = PmtSim::new(size, links, seed, cfg, ReceiverConfig::default())?;
    sim.run(limit);
    Ok(sim.outcome())
}

/// Deliver `size` bytes with the slowest-receiver multicast baseline; stop at `limit`.
pub fn run_multicast(size: usize, links: &[LinkConfig], seed: u64, limit: Duration) -> RunOutcome {
    let mut net = SimNet::with_overhead(IP_UDP_OVERHEAD);
    let addrs: Vec<SocketAddr> = (0..links.len()).map(receiver_addr).collect();
    for (i, l) in links.iter().enumerate() {
        let fwd = seeded(l, seed, i);
        let rev = reverse_of(&fwd);
        net.connect(SENDER_ADDR, addrs[i], fwd, rev);
    }
    // One rate for all: the slowest link's capacity (an oracle; the baseline's best case).
    let rate = links
        .iter()
        .map(|l| l.rate_bps)
        .fold(f64::INFINITY, f64::min);
    let object = object_for(size, seed);
    let mut sender = McSender::new(
        McSenderConfig {
            rate_bps: rate,
            ..Default::default()
        },
        object.clone(),
        &addrs,
    );
    let mut rx: Vec<McReceiver> = addrs
        .iter()
        .map(|_| McReceiver::new(SENDER_ADDR, 1 << 32))
        .collect();
    let mut done_at = vec![None; addrs.len()];
    let mut timeline = vec![vec![(0.0, 0u64)]; addrs.len()];
    let mut buf = Vec::with_capacity(2048);
    loop {
        let now = net.now();
        while let Some(to) = sender.poll_transmit(now, &mut buf) {
            net.send(SENDER_ADDR, to, &buf);
        }
        for (i, r) in rx.iter_mut().enumerate() {
            while let Some(to) = r.poll_transmit(&mut buf) {
                net.send(addrs[i], to, &buf);
            }
            let b = r.contiguous_bytes();
            if timeline[i].last().is_some_and(|&(_, last)| last != b) {
                timeline[i].push((now.as_secs_f64(), b));
            }
            if done_at[i].is_none() && r.result().is_some() {
                done_at[i] = Some(now);
            }
        }
        if sender.is_finished() && net.in_flight() == 0 {
            break;
        }
        let next = [net.next_delivery(), sender.poll_timeout(now)]
            .into_iter()
            .flatten()
            .min();
        let Some(t) = next else { break };
        if t > limit {
            break;
        }
        net.advance_to(t);
        let now = net.now();
        while let Some(d) = net.pop_due() {
            if d.to == SENDER_ADDR {
                sender.handle_datagram(now, d.from, &d.data);
            } else if let Some(i) = addrs.iter().position(|&a| a == d.to) {
                rx[i].handle_datagram(d.from, &d.data);
            }
        }
    }
    let receivers = (0..addrs.len())
        .map(|i| ReceiverOutcome {
            bytes: rx[i].contiguous_bytes(),
            seconds: done_at[i].map(|d: Duration| d.as_secs_f64()),
            floor_seconds: floor_seconds(&links[i], size),
            intact: rx[i].result() == Some(true) && rx[i].data() == &object[..],
            timeline: timeline[i].clone(),
        })
        .collect();
    RunOutcome {
        receivers,
        trace: Vec::new(),
        sender_events: Vec::new(),
        sender_stats: None,
        receiver_stats: Vec::new(),
        cwnd: Vec::new(),
    }
}
