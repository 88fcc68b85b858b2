//! A simulated datagram network with virtual time.
//!
//! Endpoints are plain socket addresses; each ordered pair that may talk gets its own
//! [`Link`] (so loss, rate and delay differ per direction). Sending offers the
//! datagram to the link at the network's current time; the link's verdict becomes a
//! delivery event in a time-ordered queue. The caller advances time to the next
//! event it cares about (a delivery or one of its own timers) and pops what is due.
//! Everything is deterministic: same seeds, same calls, same deliveries — any failing
//! run can be replayed.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::net::SocketAddr;
use std::time::Duration;

use crate::link::{Fate, Link, LinkConfig, LinkStats};

/// A datagram arriving at `to`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Datagram {
    pub at: Duration,
    pub from: SocketAddr,
    pub to: SocketAddr,
    pub data: Vec<u8>,
}

/// Counters of the network itself (per-link counters live in [`LinkStats`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimNetStats {
    pub sent: u64,
    pub delivered: u64,
    /// Sends with no link between the two addresses.
    pub unroutable: u64,
    /// Datagrams injected by tests (forgeries, replays).
    pub injected: u64,
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    at: Duration,
    order: u64,
}

pub struct SimNet {
    now: Duration,
    links: HashMap<(SocketAddr, SocketAddr), Link>,
    queue: BinaryHeap<Reverse<(Key, usize)>>,
    slots: Vec<Option<Datagram>>,
    free: Vec<usize>,
    order: u64,
    overhead: usize,
    stats: SimNetStats,
}

impl Default for SimNet {
    fn default() -> Self {
        Self::new()
    }
}

impl SimNet {
    /// A network whose links charge each datagram 28 extra bytes (IPv4 + UDP headers).
    pub fn new() -> Self {
        Self::with_overhead(28)
    }

    /// A network whose links charge each datagram `overhead` extra bytes.
    pub fn with_overhead(overhead: usize) -> Self {
        Self {
            now: Duration::ZERO,
            links: HashMap::new(),
            queue: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            order: 0,
            overhead,
            stats: SimNetStats::default(),
        }
    }

    pub fn now(&self) -> Duration {
        self.now
    }

    pub fn stats(&self) -> &SimNetStats {
        &self.stats
    }

    /// Add (or replace) the link carrying datagrams from `from` to `to`.
    pub fn add_link(&mut self, from: SocketAddr, to: SocketAddr, cfg: LinkConfig) {
        self.links.insert((from, to), Link::new(cfg));
    }

    /// Connect `a` and `b` both ways.
    pub fn connect(
        &mut self,
        a: SocketAddr,
        b: SocketAddr,
        a_to_b: LinkConfig,
        b_to_a: LinkConfig,
    ) {
        self.add_link(a, b, a_to_b);
        self.add_link(b, a, b_to_a);
    }

    pub fn link(&self, from: SocketAddr, to: SocketAddr) -> Option<&Link> {
        self.links.get(&(from, to))
    }

    pub fn link_stats(&self, from: SocketAddr, to: SocketAddr) -> Option<&LinkStats> {
        self.link(from, to).map(Link::stats)
    }

    /// Send `data` from `from` to `to` at the current time. Returns whether the link
    /// accepted it (false: dropped or no link; both are counted).
    pub fn send(&mut self, from: SocketAddr, to: SocketAddr, data: &[u8]) -> bool {
        self.stats.sent += 1;
        let now = self.now;
        let Some(link) = self.links.get_mut(&(from, to)) else {
            self.stats.unroutable += 1;
            return false;
        };
        match link.offer(now, data.len() + self.overhead) {
            Fate::Dropped(_) => false,
            Fate::Deliver { at, duplicate_at } => {
                self.schedule(at, from, to, data);
                if let Some(d) = duplicate_at {
                    self.schedule(d, from, to, data);
                }
                true
            }
        }
    }

    /// Deliver `data` at `at` without any link (a forged or replayed packet).
    pub fn inject(&mut self, at: Duration, from: SocketAddr, to: SocketAddr, data: &[u8]) {
        self.stats.injected += 1;
        self.schedule(at.max(self.now), from, to, data);
    }

    fn schedule(&mut self, at: Duration, from: SocketAddr, to: SocketAddr, data: &[u8]) {
        let d = Datagram {
            at,
            from,
            to,
            data: data.to_vec(),
        };
        let idx = match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(d);
                i
            }
            None => {
                self.slots.push(Some(d));
                self.slots.len() - 1
            }
        };
        self.order += 1;
        self.queue.push(Reverse((
            Key {
                at,
                order: self.order,
            },
            idx,
        )));
    }

    /// Time of the next delivery, if any.
    pub fn next_delivery(&self) -> Option<Duration> {
        self.queue.peek().map(|Reverse((k, _))| k.at)
    }

    /// Move the clock forward to `t` (never backward).
    pub fn advance_to(&mut self, t: Duration) {
        self.now = self.now.max(t);
    }

    /// Pop the next datagram due at or before the current time.
    pub fn pop_due(&mut self) -> Option<Datagram> {
        let Reverse((k, _)) = self.queue.peek()?;
        if k.at > self.now {
            return None;
        }
        let Reverse((_, idx)) = self.queue.pop()?;
        self.free.push(idx);
        let d = self.slots[idx].take();
        if d.is_some() {
            self.stats.delivered += 1;
        }
        d
    }

    /// Datagrams waiting in flight.
    pub fn in_flight(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, 1], port))
    }

    #[test]
    fn delivers_in_time_order_per_link_rate() {
        let mut net = SimNet::with_overhead(0);
        let fast = LinkConfig {
            rate_bps: 8e6,
            delay: Duration::from_millis(1),
            ..Default::default()
        };
        let slow = LinkConfig {
            rate_bps: 8e5,
            ..Default::default()
        };
        net.connect(addr(1), addr(2), fast, LinkConfig::default());
        net.connect(addr(1), addr(3), slow, LinkConfig::default());
        assert!(net.send(addr(1), addr(3), &[0; 1000])); // 10 ms
        assert!(net.send(addr(1), addr(2), &[0; 1000])); // 1 ms + 1 ms
        assert!(!net.send(addr(2), addr(3), &[0; 10]));
        assert_eq!(net.stats().unroutable, 1);
        assert_eq!(net.next_delivery(), Some(Duration::from_millis(2)));
        assert_eq!(net.pop_due(), None, "nothing is due before time moves");
        net.advance_to(Duration::from_millis(20));
        let a = net.pop_due().unwrap();
        let b = net.pop_due().unwrap();
        assert_eq!((a.to, a.at), (addr(2), Duration::from_millis(2)));
        assert_eq!((b.to, b.at), (addr(3), Duration::from_millis(10)));
        assert_eq!(net.pop_due(), None);
    }

    #[test]
    fn same_seed_same_losses() {
        let run = |seed| {
            let mut net = SimNet::new();
            let cfg = LinkConfig {
                loss: 0.3,
                seed,
                ..Default::default()
            };
            net.connect(addr(1), addr(2), cfg.clone(), cfg);
            (0..200)
                .map(|_| net.send(addr(1), addr(2), &[1, 2, 3]))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }
}
