//! Sequence tracking with a small reorder window (sans-IO).
//!
//! Packets are delivered strictly in sequence order. A packet that arrives early
//! is held (copied into a preallocated slot) until the gap before it fills or the
//! window overflows; then the hole is delivered as [`Delivery::Missing`] so the
//! consumer can substitute zeros and stay sample-synchronous. A packet older
//! than the delivery point is dropped and counted: delivering it would duplicate
//! samples that were already replaced.

/// What the consumer receives, in sequence order.
#[derive(Debug, PartialEq, Eq)]
pub enum Delivery<'a> {
    Packet {
        seq: u16,
        bytes: &'a [u8],
    },
    /// The packet with this sequence number was given up on.
    Missing {
        seq: u16,
    },
}

/// Outcome of one [`Reorder::push`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PushOutcome {
    /// In order: delivered (with any held successors).
    InOrder,
    /// Ahead of a gap: held until the gap fills or the window overflows.
    Held { expected: u16 },
    /// Older than the delivery point (a duplicate or a packet we gave up on): dropped.
    Stale { expected: u16 },
    /// A long run of sequence numbers behind the delivery point: the sender restarted.
    Restart { expected: u16 },
    /// Larger than a slot: dropped (the sender ignores the negotiated packet size).
    Oversize { len: usize },
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReorderCounters {
    pub in_order: u64,
    pub held: u64,
    pub missing: u64,
    pub stale: u64,
    pub restarts: u64,
    pub oversize: u64,
}

pub struct Reorder {
    mask: usize,
    expected: Option<u16>,
    slots: Vec<Vec<u8>>,
    lens: Vec<Option<usize>>,
    max_len: usize,
    consecutive_stale: u32,
    counters: ReorderCounters,
}

impl Reorder {
    /// `window` is rounded up to a power of two (max 1024) so slots index by
    /// `seq & mask` across the 16-bit wrap; each slot holds `max_len` bytes.
    pub fn new(window: usize, max_len: usize) -> Self {
        let window = window.clamp(1, 1024).next_power_of_two();
        Reorder {
            mask: window - 1,
            expected: None,
            slots: (0..window).map(|_| vec![0u8; max_len]).collect(),
            lens: vec![None; window],
            max_len,
            consecutive_stale: 0,
            counters: ReorderCounters::default(),
        }
    }

    pub fn window(&self) -> usize {
        self.mask + 1
    }

    pub fn counters(&self) -> ReorderCounters {
        self.counters
    }

    pub fn expected(&self) -> Option<u16> {
        self.expected
    }

    /// Number of packets currently held.
    pub fn held(&self) -> usize {
        self.lens.iter().filter(|l| l.is_some()).count()
    }

    /// Accept packet `seq` and deliver everything that became deliverable.
    pub fn push(
        &mut self,
        seq: u16,
        bytes: &[u8],
        mut deliver: impl FnMut(Delivery<'_>),
    ) -> PushOutcome {
        if bytes.len() > self.max_len {
            self.counters.oversize += 1;
            return PushOutcome::Oversize { len: bytes.len() };
        }
        let expected = *self.expected.get_or_insert(seq);
        let ahead = seq.wrapping_sub(expected) as i16;
        let window = self.window() as i16;
        if ahead >= 0 {
            self.consecutive_stale = 0;
        }
        if ahead < 0 {
            self.consecutive_stale += 1;
            if self.consecutive_stale <= 2 * self.window() as u32 + 16 {
                self.counters.stale += 1;
                return PushOutcome::Stale { expected };
            }
            // A long run of old numbers: the sender restarted. Flush, follow it.
            self.consecutive_stale = 0;
            self.flush(&mut deliver);
            self.counters.restarts += 1;
            self.expected = Some(seq);
            self.deliver_now(seq, bytes, &mut deliver);
            return PushOutcome::Restart { expected };
        }
        // Too far ahead: give up on the oldest holes until `seq` fits the window.
        while seq.wrapping_sub(self.expected.unwrap_or(seq)) as i16 >= window {
            self.release_head(&mut deliver);
        }
        if Some(seq) == self.expected {
            self.deliver_now(seq, bytes, &mut deliver);
            return PushOutcome::InOrder;
        }
        let slot = seq as usize & self.mask;
        if self.lens[slot].is_some() {
            self.counters.stale += 1; // duplicate of a held packet
            return PushOutcome::Stale { expected };
        }
        self.slots[slot][..bytes.len()].copy_from_slice(bytes);
        self.lens[slot] = Some(bytes.len());
        self.counters.held += 1;
        PushOutcome::Held {
            expected: self.expected.unwrap_or(expected),
        }
    }

    /// Give up on every hole and deliver all held packets (end of stream).
    pub fn flush(&mut self, deliver: &mut impl FnMut(Delivery<'_>)) {
        while self.held() > 0 {
            self.release_head(deliver);
        }
    }

    fn deliver_now(&mut self, seq: u16, bytes: &[u8], deliver: &mut impl FnMut(Delivery<'_>)) {
        self.counters.in_order += 1;
        deliver(Delivery::Packet { seq, bytes });
        self.expected = Some(seq.wrapping_add(1));
        self.drain_ready(deliver);
    }

    /// Deliver held packets that are now in order.
    fn drain_ready(&mut self, deliver: &mut impl FnMut(Delivery<'_>)) {
        while let Some(exp) = self.expected {
            let slot = exp as usize & self.mask;
            let Some(len) = self.lens[slot].take() else {
                break;
            };
            deliver(Delivery::Packet {
                seq: exp,
                bytes: &self.slots[slot][..len],
            });
            self.expected = Some(exp.wrapping_add(1));
        }
    }

    /// Deliver the head position (held packet or a hole) and advance.
    fn release_head(&mut self, deliver: &mut impl FnMut(Delivery<'_>)) {
        let Some(exp) = self.expected else { return };
        let slot = exp as usize & self.mask;
        match self.lens[slot].take() {
            Some(len) => deliver(Delivery::Packet {
                seq: exp,
                bytes: &self.slots[slot][..len],
            }),
            None => {
                self.counters.missing += 1;
                deliver(Delivery::Missing { seq: exp });
            }
        }
        self.expected = Some(exp.wrapping_add(1));
        self.drain_ready(deliver);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run(r: &mut Reorder, seqs: &[u16]) -> Vec<(u16, bool)> {
        let mut out = Vec::new();
        for &s in seqs {
            r.push(s, &s.to_le_bytes(), |d| match d {
                Delivery::Packet { seq, bytes } => {
                    assert_eq!(bytes, seq.to_le_bytes());
                    out.push((seq, true))
                }
                Delivery::Missing { seq } => out.push((seq, false)),
            });
        }
        r.flush(&mut |d| match d {
            Delivery::Packet { seq, .. } => out.push((seq, true)),
            Delivery::Missing { seq } => out.push((seq, false)),
        });
        out
    }

    #[test]
    fn reordering_within_the_window_loses_nothing() {
        let mut r = Reorder::new(4, 2);
        let out = run(&mut r, &[10, 12, 11, 13, 15, 14]);
        assert_eq!(out, (10..16).map(|s| (s, true)).collect::<Vec<_>>());
        assert_eq!(r.counters().missing, 0);
        assert_eq!(r.counters().held, 2);
    }

    #[test]
    fn gaps_beyond_the_window_become_missing_and_late_arrivals_are_stale() {
        let mut r = Reorder::new(2, 2);
        let out = run(&mut r, &[0, 2, 3, 1, 4]);
        assert_eq!(
            out,
            vec![(0, true), (1, false), (2, true), (3, true), (4, true)]
        );
        assert_eq!(r.counters().stale, 1);
        assert_eq!(r.counters().missing, 1);
    }

    #[test]
    fn wraps_and_restarts() {
        let mut r = Reorder::new(4, 2);
        let out = run(&mut r, &[65534, 65535, 0, 1]);
        assert_eq!(out.len(), 4);
        assert!(out.iter().all(|&(_, ok)| ok));
        let mut r = Reorder::new(4, 2);
        let mut seqs = vec![1000, 1001];
        seqs.extend(5..60);
        let out = run(&mut r, &seqs);
        assert_eq!(&out[..2], &[(1000, true), (1001, true)]);
        assert_eq!(
            out[2],
            (5 + 2 * 4 + 16, true),
            "restart after a long run of old numbers"
        );
        assert_eq!(r.counters().restarts, 1);
    }

    #[test]
    fn oversize_packets_are_refused() {
        let mut r = Reorder::new(4, 1);
        assert_eq!(
            r.push(0, &[1, 2], |_| panic!()),
            PushOutcome::Oversize { len: 2 }
        );
    }

    proptest! {
        /// Any permutation of a run, with some packets lost, comes out in order
        /// with every sequence number exactly once (packet or hole).
        #[test]
        fn every_seq_delivered_once_in_order(
            start: u16, window in 1usize..16,
            jitter in proptest::collection::vec(0usize..8, 1..200),
            lose in proptest::collection::vec(1usize..200, 0..10),
        ) {
            // Each packet is displaced by fewer than 8 positions (bounded jitter).
            let mut order: Vec<(usize, u16)> = jitter.iter().enumerate()
                .map(|(i, &j)| (i + j, start.wrapping_add(i as u16))).collect();
            order.sort_by_key(|&(k, _)| k);
            let mut seqs: Vec<u16> = order.into_iter().map(|(_, s)| s).collect();
            // Keep the first packet first so the stream starts where we think it does.
            let p = seqs.iter().position(|&s| s == start).unwrap();
            let first = seqs.remove(p);
            seqs.insert(0, first);
            seqs.retain(|&s| s == start || !lose.iter().any(|&l| start.wrapping_add(l as u16) == s));
            let mut r = Reorder::new(window, 2);
            let out = run(&mut r, &seqs);
            // In order, no duplicates, contiguous from start.
            for (k, &(s, _)) in out.iter().enumerate() {
                prop_assert_eq!(s, start.wrapping_add(k as u16));
            }
            let delivered: usize = out.iter().filter(|&&(_, ok)| ok).count();
            prop_assert_eq!(delivered as u64 + r.counters().stale, seqs.len() as u64);
        }
    }
}
