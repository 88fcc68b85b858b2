//! Bit scrambling with the length-31 Gold sequence of 3GPP TS 38.211 §5.2.1.
//!
//! `c(n) = (x1(n + Nc) + x2(n + Nc)) mod 2` with `Nc = 1600`, `x1` seeded with a single
//! one and `x2` with `c_init`. The generator advances 32 bits per step: with the
//! taps at distance 31 and 28 (x1) or 31, 30, 29 and 28 (x2), every new bit of a 32-bit
//! word can be computed from bits of the previous register value, so the sequence costs
//! a handful of shifts per 32 output bits instead of a loop per bit.

use crate::simd::{dispatch, Isa};

/// The NR Gold sequence generator, positioned at some `n`.
#[derive(Clone, Debug)]
pub struct GoldSequence {
    x1: u32,
    x2: u32,
    /// Generated but not yet consumed sequence bits (LSB first), so callers can
    /// consume any number of bits and resume at any position.
    buf: u64,
    have: u32,
}

const NC: usize = 1600;

impl GoldSequence {
    /// Start the sequence for `c_init` (only the low 31 bits are used), positioned at
    /// `c(0)`.
    pub fn new(c_init: u32) -> Self {
        let mut g = Self {
            x1: 1,
            x2: c_init & 0x7FFF_FFFF,
            buf: 0,
            have: 0,
        };
        // 1600 = 50 * 32: skip Nc bits a word at a time.
        for _ in 0..NC / 32 {
            g.next_word();
        }
        g
    }

    /// Start for `c_init` positioned at `c(offset)`.
    pub fn new_at(c_init: u32, offset: usize) -> Self {
        let mut g = Self::new(c_init);
        g.skip(offset);
        g
    }

    /// Advance by `n` bits.
    pub fn skip(&mut self, n: usize) {
        for _ in 0..n / 32 {
            self.take_bits(32);
        }
        self.take_bits((n % 32) as u32);
    }

    /// The next `n <= 32` sequence bits, the first in bit 0.
    #[inline]
    pub fn take_bits(&mut self, n: u32) -> u32 {
        debug_assert!(n <= 32);
        if self.have < n {
            self.buf |= (self.next_word() as u64) << self.have;
            self.have += 32;
        }
        let out = (self.buf & ((1u64 << n) - 1)) as u32;
        self.buf >>= n;
        self.have -= n;
        out
    }

    /// The next 32 register outputs, `c(n)` in bit 0 up to `c(n+31)` in bit 31,
    /// ignoring the consumption buffer (callers use [`Self::take_bits`]).
    #[inline]
    fn next_word(&mut self) -> u32 {
        let out = self.x1 ^ self.x2;
        // Registers hold x(n)..x(n+30) in bits 0..30. New bits x(n+31..n+62):
        // x1(n+31) = x1(n+3) + x1(n); x2(n+31) = x2(n+3)+x2(n+2)+x2(n+1)+x2(n).
        // Computing 31 new bits needs x(n+3+30) = x(n+33), itself new, so step in two
        // halves of 16 bits (each uses only already-known bits).
        self.advance16();
        let lo = out & 0xFFFF;
        let out_hi = (self.x1 ^ self.x2) & 0xFFFF;
        self.advance16();
        lo | (out_hi << 16)
    }

    fn advance16(&mut self) {
        let x1 = self.x1;
        let n1 = ((x1 >> 3) ^ x1) & 0xFFFF;
        self.x1 = (x1 >> 16) | (n1 << 15);
        let x2 = self.x2;
        let n2 = ((x2 >> 3) ^ (x2 >> 2) ^ (x2 >> 1) ^ x2) & 0xFFFF;
        self.x2 = (x2 >> 16) | (n2 << 15);
    }

    /// XOR the sequence into `bits` (0/1 per element), continuing from the current
    /// position.
    pub fn scramble_bits(&mut self, bits: &mut [u8]) {
        for chunk in bits.chunks_mut(32) {
            let w = self.take_bits(chunk.len() as u32);
            for (i, b) in chunk.iter_mut().enumerate() {
                *b ^= ((w >> i) & 1) as u8;
            }
        }
    }

    /// Descramble soft bits: flip the sign of each LLR whose sequence bit is one.
    pub fn descramble_llrs(&mut self, llrs: &mut [f32]) {
        let this = self;
        dispatch!(Isa::detect(), fn run(this: &mut GoldSequence, llrs: &mut [f32]) => descramble_body)
    }
}

#[inline(always)]
fn descramble_body<const FMA: bool>(seq: &mut GoldSequence, llrs: &mut [f32]) {
    let mut chunks = llrs.chunks_exact_mut(32);
    for chunk in &mut chunks {
        let w = seq.take_bits(32);
        for (i, l) in chunk.iter_mut().enumerate() {
            // Move the sequence bit into the float sign bit: no branch.
            let flip = ((w >> i) & 1) << 31;
            *l = f32::from_bits(l.to_bits() ^ flip);
        }
    }
    let tail = chunks.into_remainder();
    let w = seq.take_bits(tail.len() as u32);
    for (i, l) in tail.iter_mut().enumerate() {
        let flip = ((w >> i) & 1) << 31;
        *l = f32::from_bits(l.to_bits() ^ flip);
    }
}

/// Each user's sequence kept where its last use ended, so that consecutive symbols
/// continue it instead of regenerating it from `c(0)` (which costs a step per 32
/// bits of offset: most of the descrambling time late in a frame).
#[derive(Clone, Debug)]
pub struct SequenceCache {
    /// `(c_init, position, generator at that position)`.
    entries: Vec<(u32, usize, GoldSequence)>,
}

/// Sequences a cache keeps (more users than this only cost regeneration).
const CACHE_ENTRIES: usize = 64;

impl Default for SequenceCache {
    fn default() -> Self {
        Self {
            entries: Vec::with_capacity(CACHE_ENTRIES),
        }
    }
}

impl SequenceCache {
    /// The sequence for `c_init` positioned at `c(offset)`; `f` uses it and returns
    /// how many bits it consumed.
    pub fn with<R>(
        &mut self,
        c_init: u32,
        offset: usize,
        f: impl FnOnce(&mut GoldSequence) -> (usize, R),
    ) -> R {
        let i = match self.entries.iter().position(|e| e.0 == c_init) {
            Some(i) => {
                let e = &mut self.entries[i];
                if e.1 <= offset {
                    e.2.skip(offset - e.1);
                } else {
                    e.2 = GoldSequence::new_at(c_init, offset);
                }
                i
            }
            None => {
                if self.entries.len() == CACHE_ENTRIES {
                    self.entries.remove(0);
                }
                self.entries
                    .push((c_init, offset, GoldSequence::new_at(c_init, offset)));
                self.entries.len() - 1
            }
        };
        let e = &mut self.entries[i];
        let (used, r) = f(&mut e.2);
        e.1 = offset + used;
        r
    }
}

/// `c_init` for PUSCH/PDSCH data scrambling (38.211 §6.3.1.1 / §7.3.1.1, one codeword):
/// `n_RNTI * 2^15 + n_ID`.
pub fn data_c_init(rnti: u16, n_id: u16) -> u32 {
    ((rnti as u32) << 15) + (n_id as u32 & 0x3FF)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Bit-by-bit recursion exactly as written in 38.211.
    fn naive(c_init: u32, len: usize) -> Vec<u8> {
        let total = NC + len + 31;
        let mut x1 = vec![0u8; total];
        let mut x2 = vec![0u8; total];
        x1[0] = 1;
        for (i, x) in x2.iter_mut().enumerate().take(31) {
            *x = ((c_init >> i) & 1) as u8;
        }
        for n in 0..total - 31 {
            x1[n + 31] = (x1[n + 3] + x1[n]) % 2;
            x2[n + 31] = (x2[n + 3] + x2[n + 2] + x2[n + 1] + x2[n]) % 2;
        }
        (0..len).map(|n| (x1[n + NC] + x2[n + NC]) % 2).collect()
    }

    proptest! {
        #[test]
        fn word_generator_matches_recursion(c_init in 0u32..(1 << 31), len in 1usize..400) {
            let mut bits = vec![0u8; len];
            GoldSequence::new(c_init).scramble_bits(&mut bits);
            prop_assert_eq!(bits, naive(c_init, len));
        }
    }

    proptest! {
        #[test]
        fn resumes_at_any_position(c_init in 0u32..(1 << 31), a in 0usize..100, b in 1usize..100, off in 0usize..200) {
            let whole = naive(c_init, off + a + b);
            let mut g = GoldSequence::new_at(c_init, off);
            let mut first = vec![0u8; a];
            let mut second = vec![0u8; b];
            g.scramble_bits(&mut first);
            g.scramble_bits(&mut second);
            prop_assert_eq!(&first[..], &whole[off..off + a]);
            prop_assert_eq!(&second[..], &whole[off + a..]);
        }
    }

    #[test]
    fn cache_continues_sequences_exactly() {
        let mut cache = SequenceCache::default();
        // Forward, repeated, backward and interleaved positions of two users.
        for (c_init, offset, n) in [
            (5u32, 0usize, 40usize),
            (9, 10, 7),
            (5, 40, 33),
            (5, 100, 64),
            (9, 3, 5),
            (5, 100, 1),
        ] {
            let got = cache.with(c_init, offset, |g| {
                let first = g.take_bits(n.min(32) as u32);
                g.skip(n.saturating_sub(32));
                (n, first)
            });
            let want = GoldSequence::new_at(c_init, offset).take_bits(n.min(32) as u32);
            assert_eq!(got, want, "c_init {c_init} offset {offset}");
        }
    }

    #[test]
    fn descramble_llrs_inverts_scramble() {
        let mut bits: Vec<u8> = (0..100).map(|i| (i % 3 == 0) as u8).collect();
        let orig = bits.clone();
        GoldSequence::new(1234).scramble_bits(&mut bits);
        assert_ne!(bits, orig);
        let mut llrs: Vec<f32> = bits
            .iter()
            .map(|&b| if b == 0 { 1.0 } else { -1.0 })
            .collect();
        GoldSequence::new(1234).descramble_llrs(&mut llrs);
        let back: Vec<u8> = llrs.iter().map(|&l| (l < 0.0) as u8).collect();
        assert_eq!(back, orig);
    }
}
