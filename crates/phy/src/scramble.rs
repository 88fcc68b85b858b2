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
        self.scramble_bits_at(Isa::detect(), bits);
    }

    /// [`Self::scramble_bits`] built for `isa` (clamped to what the CPU has).
    pub fn scramble_bits_at(&mut self, isa: Isa, bits: &mut [u8]) {
        let mut bits = bits;
        #[cfg(target_arch = "x86_64")]
        if isa.min(Isa::cpu()) == Isa::Avx512 {
            let full = bits.len() / 64 * 64;
            let (head, tail) = std::mem::take(&mut bits).split_at_mut(full);
            // SAFETY: the CPU has AVX-512 F/BW (checked just above).
            unsafe { scramble_avx512(self, head) };
            bits = tail;
        }
        #[cfg(target_arch = "x86_64")]
        if isa.min(Isa::cpu()) == Isa::Avx2 {
            let full = bits.len() / 32 * 32;
            let (head, tail) = std::mem::take(&mut bits).split_at_mut(full);
            // SAFETY: the CPU has AVX2 (checked just above).
            unsafe { scramble_avx2(self, head) };
            bits = tail;
        }
        for chunk in bits.chunks_mut(32) {
            let w = self.take_bits(chunk.len() as u32);
            for (i, b) in chunk.iter_mut().enumerate() {
                *b ^= ((w >> i) & 1) as u8;
            }
        }
    }

    /// Descramble soft bits: flip the sign of each LLR whose sequence bit is one.
    pub fn descramble_llrs(&mut self, llrs: &mut [f32]) {
        self.descramble_llrs_at(Isa::detect(), llrs);
    }

    /// [`Self::descramble_llrs`] built for `isa` (clamped to what the CPU has).
    pub fn descramble_llrs_at(&mut self, isa: Isa, llrs: &mut [f32]) {
        let mut llrs = llrs;
        #[cfg(target_arch = "x86_64")]
        if isa.min(Isa::cpu()) >= Isa::Avx2 {
            let full = llrs.len() / 32 * 32;
            let (head, tail) = std::mem::take(&mut llrs).split_at_mut(full);
            // SAFETY: the CPU has AVX2 (checked just above).
            unsafe { descramble_avx2(self, head) };
            llrs = tail;
        }
        let this = self;
        dispatch!(isa, fn run(this: &mut GoldSequence, llrs: &mut [f32]) => descramble_body)
    }
}

/// 32 bits at a time (see [`xor_bits_avx2`]).
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn scramble_avx2(seq: &mut GoldSequence, bits: &mut [u8]) {
    for chunk in bits.chunks_exact_mut(32) {
        let w = seq.take_bits(32);
        // SAFETY: AVX2 (this function's features); `chunk` is 32 bytes.
        unsafe { xor_bits_avx2(chunk.try_into().expect("32 bytes"), w) };
    }
}

/// 32 LLRs at a time (see [`flip_signs_avx2`]).
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn descramble_avx2(seq: &mut GoldSequence, llrs: &mut [f32]) {
    for chunk in llrs.chunks_exact_mut(32) {
        let w = seq.take_bits(32);
        for (e, eighth) in chunk.chunks_exact_mut(8).enumerate() {
            // SAFETY: AVX2 (this function's features); `eighth` is 8 floats.
            unsafe { flip_signs_avx2(eighth.try_into().expect("8 floats"), (w >> (8 * e)) as u8) };
        }
    }
}

/// XOR bit `i` of `w` into byte `i` of `bits` as 0 or 1: the word's byte `i / 8`
/// spread over 8 byte lanes, masked to bit `i % 8` and clamped to 1 (as the LDPC
/// encoder's `unpack_bits_avx2`).
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn xor_bits_avx2(bits: &mut [u8; 32], w: u32) {
    use std::arch::x86_64::*;
    // SAFETY: the caller runs with AVX2; `bits` is one 32-byte vector.
    unsafe {
        let spread = _mm256_setr_epi8(
            0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, //
            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3,
        );
        let select = _mm256_set1_epi64x(i64::from_le_bytes([1, 2, 4, 8, 16, 32, 64, 128]));
        let picked = _mm256_and_si256(
            _mm256_shuffle_epi8(_mm256_set1_epi32(w as i32), spread),
            select,
        );
        let ones = _mm256_min_epu8(picked, _mm256_set1_epi8(1));
        let p = bits.as_mut_ptr().cast::<__m256i>();
        _mm256_storeu_si256(p, _mm256_xor_si256(_mm256_loadu_si256(p), ones));
    }
}

/// Flip the sign of LLR `i` where bit `i` of `byte` is set.
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn flip_signs_avx2(llrs: &mut [f32; 8], byte: u8) {
    use std::arch::x86_64::*;
    // SAFETY: the caller runs with AVX2; `llrs` is one 8-float vector.
    unsafe {
        let select = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
        let picked = _mm256_and_si256(_mm256_set1_epi32(byte as i32), select);
        let flip = _mm256_and_si256(
            _mm256_cmpeq_epi32(picked, select),
            _mm256_set1_epi32(i32::MIN),
        );
        let p = llrs.as_mut_ptr().cast::<__m256i>();
        _mm256_storeu_si256(p, _mm256_xor_si256(_mm256_loadu_si256(p), flip));
    }
}

/// 64 bits at a time: the sequence word is a byte mask, XORed in as ones.
///
/// # Safety
/// The CPU has AVX-512 F/BW.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn scramble_avx512(seq: &mut GoldSequence, bits: &mut [u8]) {
    use std::arch::x86_64::*;
    let ones = _mm512_set1_epi8(1);
    for chunk in bits.chunks_exact_mut(64) {
        let w = seq.take_bits(32) as u64 | ((seq.take_bits(32) as u64) << 32);
        let p = chunk.as_mut_ptr().cast::<i8>();
        // SAFETY: `chunk` is 64 bytes.
        unsafe {
            let v = _mm512_loadu_si512(p.cast());
            let x = _mm512_xor_si512(v, _mm512_maskz_mov_epi8(w, ones));
            _mm512_storeu_si512(p.cast(), x);
        }
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

/// Each user's sequence kept as words from `c(0)` and grown on demand, so that
/// every later frame scrambles with a table read (the sequence of a `c_init` never
/// changes) instead of running the generator (32 bits per two register steps: most
/// of the scrambling time).
#[derive(Clone, Debug)]
pub struct SequenceCache {
    /// `(c_init, words from c(0), generator positioned after the last word)`.
    entries: Vec<(u32, Vec<u32>, GoldSequence)>,
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
    /// The words of `c_init`'s sequence covering bits `0 .. end` plus three spare
    /// words (so any 64 bits from a position below `end` can be read whole).
    fn words(&mut self, c_init: u32, end: usize) -> &[u32] {
        let i = match self.entries.iter().position(|e| e.0 == c_init) {
            Some(i) => i,
            None => {
                if self.entries.len() == CACHE_ENTRIES {
                    self.entries.remove(0);
                }
                self.entries
                    .push((c_init, Vec::new(), GoldSequence::new(c_init)));
                self.entries.len() - 1
            }
        };
        let (_, words, g) = &mut self.entries[i];
        let need = end.div_ceil(32) + 3;
        while words.len() < need {
            words.push(g.take_bits(32));
        }
        words
    }

    /// XOR `c_init`'s sequence from `c(offset)` into `bits` (0/1 each).
    pub fn scramble_bits(&mut self, c_init: u32, offset: usize, bits: &mut [u8]) {
        self.scramble_bits_at(Isa::detect(), c_init, offset, bits);
    }

    /// [`Self::scramble_bits`] built for `isa` (clamped to what the CPU has).
    pub fn scramble_bits_at(&mut self, isa: Isa, c_init: u32, offset: usize, bits: &mut [u8]) {
        let isa = isa.min(Isa::cpu());
        let words = self.words(c_init, offset + bits.len());
        #[cfg(target_arch = "x86_64")]
        if isa >= Isa::Avx2 {
            // SAFETY: `isa` is clamped to `Isa::cpu()`, which found AVX2.
            unsafe { scramble_table_avx2(words, offset, bits) };
            return;
        }
        let this = (words, offset);
        dispatch!(isa, fn run(this: (&[u32], usize), bits: &mut [u8]) => scramble_table_body)
    }

    /// Flip the sign of each LLR whose bit of `c_init`'s sequence from `c(offset)` is
    /// one.
    pub fn descramble_llrs(&mut self, c_init: u32, offset: usize, llrs: &mut [f32]) {
        self.descramble_llrs_at(Isa::detect(), c_init, offset, llrs);
    }

    /// [`Self::descramble_llrs`] built for `isa` (clamped to what the CPU has).
    pub fn descramble_llrs_at(&mut self, isa: Isa, c_init: u32, offset: usize, llrs: &mut [f32]) {
        let isa = isa.min(Isa::cpu());
        let words = self.words(c_init, offset + llrs.len());
        #[cfg(target_arch = "x86_64")]
        if isa == Isa::Avx512 {
            // SAFETY: `Isa::detect` found AVX-512 F/BW.
            unsafe { descramble_table_avx512(words, offset, llrs) };
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if isa == Isa::Avx2 {
            // SAFETY: `isa` is clamped to `Isa::cpu()`, which found AVX2.
            unsafe { descramble_table_avx2(words, offset, llrs) };
            return;
        }
        let this = (words, offset);
        dispatch!(isa, fn run(this: (&[u32], usize), llrs: &mut [f32]) => descramble_table_body)
    }
}

/// `c_init`'s sequence from `c(0)` as words (bit `i` of word `j` is `c(32 j + i)`),
/// covering bits `0 .. bits` plus three spare words, for [`sequence_bits`].
pub fn sequence_words(c_init: u32, bits: usize) -> Vec<u32> {
    let mut g = GoldSequence::new(c_init);
    (0..bits.div_ceil(32) + 3)
        .map(|_| g.take_bits(32))
        .collect()
}

/// The `n <= 128` sequence bits from bit `pos` of `words` ([`sequence_words`] covering
/// `pos + n`), `c(pos)` in bit 0; the bits above `n` are zero.
#[inline(always)]
pub fn sequence_bits(words: &[u32], pos: usize, n: usize) -> u128 {
    debug_assert!(n <= 128);
    if n == 0 {
        return 0;
    }
    let lo = seq64(words, pos) as u128;
    let all = if n > 64 {
        lo | (seq64(words, pos + 64) as u128) << 64
    } else {
        lo
    };
    all & (u128::MAX >> (128 - n))
}

/// 64 sequence bits from bit `pos` of `words` (which holds three words past it).
#[inline(always)]
fn seq64(words: &[u32], pos: usize) -> u64 {
    let j = pos / 32;
    let w = words[j] as u128 | (words[j + 1] as u128) << 32 | (words[j + 2] as u128) << 64;
    (w >> (pos % 32)) as u64
}

#[inline(always)]
fn scramble_table_body<const FMA: bool>((words, offset): (&[u32], usize), bits: &mut [u8]) {
    for (c, chunk) in bits.chunks_mut(64).enumerate() {
        let w = seq64(words, offset + 64 * c);
        for (i, b) in chunk.iter_mut().enumerate() {
            *b ^= ((w >> i) & 1) as u8;
        }
    }
}

#[inline(always)]
fn descramble_table_body<const FMA: bool>((words, offset): (&[u32], usize), llrs: &mut [f32]) {
    for (c, chunk) in llrs.chunks_mut(64).enumerate() {
        let w = seq64(words, offset + 64 * c);
        for (i, l) in chunk.iter_mut().enumerate() {
            // Move the sequence bit into the float sign bit: no branch.
            let flip = (((w >> i) & 1) as u32) << 31;
            *l = f32::from_bits(l.to_bits() ^ flip);
        }
    }
}

/// 16 LLRs per step: the sequence bits are the mask of a sign-bit XOR.
///
/// # Safety
/// The CPU has AVX-512 F/BW.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn descramble_table_avx512(words: &[u32], offset: usize, llrs: &mut [f32]) {
    use std::arch::x86_64::*;
    let sign = _mm512_set1_epi32(i32::MIN);
    let mut chunks = llrs.chunks_exact_mut(64);
    for (c, chunk) in (&mut chunks).enumerate() {
        let w = seq64(words, offset + 64 * c);
        for q in 0..4 {
            // SAFETY: `chunk` is 64 floats, so each quarter is 16.
            unsafe {
                let p = chunk.as_mut_ptr().add(16 * q).cast::<i32>();
                let v = _mm512_loadu_si512(p.cast());
                let x = _mm512_mask_xor_epi32(v, (w >> (16 * q)) as u16, v, sign);
                _mm512_storeu_si512(p.cast(), x);
            }
        }
    }
    let done = llrs.len() / 64 * 64;
    descramble_table_body::<true>((words, offset + done), &mut llrs[done..]);
}

/// [`SequenceCache::scramble_bits`] 32 bits at a time (see [`xor_bits_avx2`]).
/// AVX-512 CPUs run this too (there is no wider table version).
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn scramble_table_avx2(words: &[u32], offset: usize, bits: &mut [u8]) {
    // Chunk `c`'s 32 bits start at bit `offset % 32` of word `offset / 32 + c`.
    let (first, shift) = (offset / 32, offset % 32);
    assert!(
        words.len() > first + bits.len() / 32,
        "scramble: sequence table too short"
    );
    let mut chunks = bits.chunks_exact_mut(32);
    for (pair, chunk) in words[first..].windows(2).zip(&mut chunks) {
        let w = ((pair[0] as u64 | (pair[1] as u64) << 32) >> shift) as u32;
        // SAFETY: AVX2 (this function's features); `chunk` is 32 bytes.
        unsafe { xor_bits_avx2(chunk.try_into().expect("32 bytes"), w) };
    }
    let done = bits.len() / 32 * 32;
    scramble_table_body::<true>((words, offset + done), &mut bits[done..]);
}

/// [`SequenceCache::descramble_llrs`] 64 LLRs at a time (see [`flip_signs_avx2`]).
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn descramble_table_avx2(words: &[u32], offset: usize, llrs: &mut [f32]) {
    let mut chunks = llrs.chunks_exact_mut(64);
    for (c, chunk) in (&mut chunks).enumerate() {
        let w = seq64(words, offset + 64 * c);
        for (e, eighth) in chunk.chunks_exact_mut(8).enumerate() {
            // SAFETY: AVX2 (this function's features); `eighth` is 8 floats.
            unsafe { flip_signs_avx2(eighth.try_into().expect("8 floats"), (w >> (8 * e)) as u8) };
        }
    }
    let done = llrs.len() / 64 * 64;
    descramble_table_body::<true>((words, offset + done), &mut llrs[done..]);
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
            // Every ISA build (the AVX-512 one takes 64 bits per step, then the tail).
            for isa in Isa::available() {
                let mut bits = vec![0u8; len];
                GoldSequence::new(c_init).scramble_bits_at(isa, &mut bits);
                prop_assert_eq!(bits, naive(c_init, len), "{:?}", isa);
            }
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

    /// The cached table gives the generator's bits at any offset, for users in any
    /// order, and descrambling through it inverts scrambling through it.
    #[test]
    fn cache_matches_generator() {
        let mut cache = SequenceCache::default();
        for (c_init, offset, n) in [
            (5u32, 0usize, 40usize),
            (9, 10, 7),
            (5, 40, 333),
            (5, 100, 64),
            (9, 3, 5),
            (5, 100, 1),
            (7, 4800 * 3, 4800),
        ] {
            let orig: Vec<u8> = (0..n).map(|i| (i % 3 == 0) as u8).collect();
            let mut want = orig.clone();
            GoldSequence::new_at(c_init, offset).scramble_bits_at(Isa::Portable, &mut want);
            for isa in Isa::available() {
                let mut got = orig.clone();
                cache.scramble_bits_at(isa, c_init, offset, &mut got);
                assert_eq!(got, want, "c_init {c_init} offset {offset} {isa:?}");
                let signs: Vec<f32> = got.iter().map(|&b| 1.0 - 2.0 * b as f32).collect();
                // Magnitudes other than 1 and a zero of each sign keep their bits.
                let mut llrs: Vec<f32> = signs
                    .iter()
                    .zip(0..)
                    .map(|(s, i)| s * i as f32 * 0.5)
                    .collect();
                let expect: Vec<u32> = llrs
                    .iter()
                    .zip(&got)
                    .zip(&orig)
                    .map(|((l, g), o)| l.to_bits() ^ (((g ^ o) as u32) << 31))
                    .collect();
                cache.descramble_llrs_at(isa, c_init, offset, &mut llrs);
                let back: Vec<u32> = llrs.iter().map(|l| l.to_bits()).collect();
                assert_eq!(back, expect, "c_init {c_init} offset {offset} {isa:?}");
            }
        }
    }

    /// Sequence words read at any position and length give the generator's bits.
    #[test]
    fn sequence_bits_match_generator() {
        let c_init = 0x1234_5678 & 0x7FFF_FFFF;
        let words = sequence_words(c_init, 1000);
        let want = naive(c_init, 1000);
        for (pos, n) in [
            (0, 1),
            (0, 64),
            (5, 128),
            (31, 96),
            (600, 32),
            (872, 128),
            (999, 1),
        ] {
            let got = sequence_bits(&words, pos, n);
            for i in 0..128 {
                let expect = if i < n { want[pos + i] } else { 0 };
                assert_eq!(((got >> i) & 1) as u8, expect, "pos {pos} n {n} bit {i}");
            }
        }
    }

    /// Every build, in two calls that continue one sequence (so a call can start
    /// mid-word), scrambles as the 38.211 recursion and descrambles its own output
    /// back, keeping every LLR's magnitude.
    #[test]
    fn generator_scrambles_as_the_recursion_in_every_build() {
        let c_init = 1234;
        for (n, split) in [(0, 0), (7, 3), (32, 32), (100, 37), (333, 64), (4800, 1000)] {
            let seq = naive(c_init, n);
            let orig: Vec<u8> = (0..n).map(|i| (i % 3 == 0) as u8).collect();
            let want: Vec<u8> = orig.iter().zip(&seq).map(|(b, c)| b ^ c).collect();
            for isa in Isa::available() {
                let mut bits = orig.clone();
                let mut g = GoldSequence::new(c_init);
                let (head, tail) = bits.split_at_mut(split);
                g.scramble_bits_at(isa, head);
                g.scramble_bits_at(isa, tail);
                assert_eq!(bits, want, "n {n} {isa:?}");
                let llrs: Vec<f32> = (0..n).map(|i| (i as f32 - 50.0) * 0.25).collect();
                let mut got = llrs.clone();
                let mut g = GoldSequence::new(c_init);
                let (head, tail) = got.split_at_mut(split);
                g.descramble_llrs_at(isa, head);
                g.descramble_llrs_at(isa, tail);
                for i in 0..n {
                    let flipped = llrs[i].to_bits() ^ ((seq[i] as u32) << 31);
                    assert_eq!(got[i].to_bits(), flipped, "n {n} {isa:?} llr {i}");
                }
            }
        }
    }
}
