//! Bit-packed systematic encoding: column blocks as `u64` words, so a cyclic shift of a
//! Zc-bit block is a funnel shift of at most `ceil(Zc/64)` words instead of Zc byte
//! operations. Every block that later rows read (systematic and core parity) is kept
//! twice in a row (`2*Zc` bits), so a shifted copy is one unaligned bit-window read.
//! Follows the same solve plan as the byte-wise reference `Encoder::encode_full`
//! (tested equal for both base graphs and every lifting size).

/// One plan step, flattened: `p[(i + shift) % Zc] = XOR of rot(terms)[i]`.
#[derive(Clone, Debug)]
pub(crate) struct PackedStep {
    /// (column, shift) of every block summed into the accumulator.
    pub terms: Vec<(usize, usize)>,
    pub col: usize,
    pub shift: usize,
}

/// A plan step as the packed encoder runs it: the solved block's rotation folded into
/// the terms' shifts (`p[j] = XOR of x_t[(j - shift + s_t) mod Zc]`), so the sum is the
/// parity block itself and needs no rotation afterwards.
///
/// Each term is kept as where its shifted block starts in the doubled columns (`dw`
/// words per column): `(word, bit)`, so a sum does no address arithmetic.
#[derive(Clone, Debug)]
struct RotatedStep {
    terms: Vec<(usize, usize)>,
    /// The largest term word (the AVX2 sums check their reads once per step).
    last_word: usize,
    col: usize,
}

impl RotatedStep {
    fn new(step: PackedStep, zc: usize, dw: usize) -> RotatedStep {
        let terms: Vec<(usize, usize)> = step
            .terms
            .iter()
            .map(|&(col, s)| {
                let shift = (s + zc - step.shift) % zc;
                (col * dw + shift / 64, shift % 64)
            })
            .collect();
        RotatedStep {
            last_word: terms.iter().map(|t| t.0).max().unwrap_or(0),
            terms,
            col: step.col,
        }
    }
}

/// Scratch and tables of the packed encoder for one (base graph, Zc).
pub(crate) struct Packed {
    zc: usize,
    /// Words of one block (`ceil(Zc/64)`) and of one doubled block (with a spare word).
    nw: usize,
    dw: usize,
    kb: usize,
    steps: Vec<RotatedStep>,
    /// Packed payload, then zeros (fillers), with a spare word.
    payload: Vec<u64>,
    /// Doubled blocks of the columns other rows read: systematic and core parity.
    doubled: Vec<u64>,
    /// Every parity block, `nw` words each.
    parity: Vec<u64>,
    acc: Vec<u64>,
    /// Sum the terms with AVX2 (detected at construction; tests clear it to cover the
    /// portable sums).
    pub(crate) avx2: bool,
    /// Unpack the parity with AVX2's whole vectors (AVX2 without AVX-512BW, whose
    /// masked stores need no tail; tests clear it to cover the exact unpacking).
    pub(crate) avx2_unpack: bool,
}

/// Mask of the valid bits in the last word of a Zc-bit block.
fn last_mask(zc: usize) -> u64 {
    match zc % 64 {
        0 => u64::MAX,
        r => (1u64 << r) - 1,
    }
}

/// `dst[w] = bits [off + 64 w, off + 64 w + 64)` of `src` for every `w` (a funnel
/// shift; `src` needs one word beyond the last one read), or `dst[w] ^=` that.
#[inline(always)]
fn read_bits<const XOR: bool>(dst: &mut [u64], src: &[u64], off: usize) {
    let (w0, b) = (off / 64, off % 64);
    let src = &src[w0..w0 + dst.len() + 1];
    let put = |d: &mut u64, v: u64| *d = if XOR { *d ^ v } else { v };
    if b == 0 {
        for (d, &s) in dst.iter_mut().zip(src) {
            put(d, s);
        }
    } else {
        for (d, s) in dst.iter_mut().zip(src.windows(2)) {
            put(d, (s[0] >> b) | (s[1] << (64 - b)));
        }
    }
}

/// XOR of the shifted blocks `terms` ([`RotatedStep`]'s `(word, bit)`) of `doubled`,
/// `NW` words.
#[inline(always)]
fn sum_terms<const NW: usize>(terms: &[(usize, usize)], doubled: &[u64]) -> [u64; NW] {
    let mut acc = [0u64; NW];
    for &(at, b) in terms {
        let src: &[u64] = &doubled[at..][..NW + 1];
        if b == 0 {
            for i in 0..NW {
                acc[i] ^= src[i];
            }
        } else {
            for i in 0..NW {
                acc[i] ^= (src[i] >> b) | (src[i + 1] << (64 - b));
            }
        }
    }
    acc
}

/// Spare words after the last doubled column, so that the AVX2 sums' whole-vector reads
/// stay inside the buffer: a term reads words `[at, at + 4 V]` with `at <= last column
/// + ceil(Zc / 64) - 1` and `4 V <= ceil(Zc / 64) + 3`, at most `2 ceil(Zc / 64) + 3`
/// words from the last column's start, which has `dw >= 2 ceil(Zc / 64)` words.
const AVX2_SPARE_WORDS: usize = 8;

/// `sum_terms` with the accumulator as `V` vectors of 4 words (`out.len() <= 4 V`): a
/// funnel shift per vector from two overlapping loads; a shift count of 64 gives 0 in
/// vector shifts, so a shift that is a multiple of 64 needs no branch. The words past
/// `out.len()` (bits of neighbouring data) are dropped.
///
/// # Safety
/// The CPU must support AVX2 (the reads are bounds-checked).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn sum_terms_avx2<const V: usize>(step: &RotatedStep, doubled: &[u64], out: &mut [u64]) {
    use std::arch::x86_64::*;
    let mut acc = [_mm256_setzero_si256(); V];
    // Every term's reads end below its word + 4 V + 1.
    assert!(
        step.last_word + 4 * V < doubled.len(),
        "spare words for whole vectors"
    );
    for &(at, b) in &step.terms {
        let p = doubled.as_ptr().add(at);
        let b = b as i64;
        let (right, left) = (_mm_cvtsi64_si128(b), _mm_cvtsi64_si128(64 - b));
        for (v, a) in acc.iter_mut().enumerate() {
            let lo = _mm256_loadu_si256(p.add(4 * v) as *const __m256i);
            let hi = _mm256_loadu_si256(p.add(4 * v + 1) as *const __m256i);
            let x = _mm256_or_si256(_mm256_srl_epi64(lo, right), _mm256_sll_epi64(hi, left));
            *a = _mm256_xor_si256(*a, x);
        }
    }
    let mut words = [0u64; 8];
    for (v, a) in acc.iter().enumerate() {
        _mm256_storeu_si256(words.as_mut_ptr().add(4 * v) as *mut __m256i, *a);
    }
    // A word loop, not `copy_from_slice` (a library call for two or three words).
    for (o, w) in out.iter_mut().zip(words) {
        *o = w;
    }
}

/// `sum_terms_avx2` for blocks of at most two words (Zc <= 128) in one 128-bit vector:
/// as many instructions as a 256-bit vector, but on CPUs that run 256-bit operations
/// as two halves (AMD Zen 1) half the work, about 10% of a Zc=36 or Zc=104 block there.
///
/// # Safety
/// The CPU must support AVX2 (the reads are bounds-checked).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn sum_terms_avx2_x128(step: &RotatedStep, doubled: &[u64], out: &mut [u64]) {
    use std::arch::x86_64::*;
    let mut acc = _mm_setzero_si128();
    // Every term's reads end below its word + 3.
    assert!(
        step.last_word + 2 < doubled.len(),
        "spare words for whole vectors"
    );
    for &(at, b) in &step.terms {
        let p = doubled.as_ptr().add(at);
        let b = b as i64;
        let (right, left) = (_mm_cvtsi64_si128(b), _mm_cvtsi64_si128(64 - b));
        let lo = _mm_loadu_si128(p as *const __m128i);
        let hi = _mm_loadu_si128(p.add(1) as *const __m128i);
        let x = _mm_or_si128(_mm_srl_epi64(lo, right), _mm_sll_epi64(hi, left));
        acc = _mm_xor_si128(acc, x);
    }
    let mut words = [0u64; 2];
    _mm_storeu_si128(words.as_mut_ptr() as *mut __m128i, acc);
    for (o, w) in out.iter_mut().zip(words) {
        *o = w;
    }
}

/// Packs bits stored one per byte into `out`, bit `i` of the input at bit `i % 64` of
/// word `i / 64`; any non-zero byte packs as 1. `out` should hold
/// `bits.len().div_ceil(64)` words (the last one zero-filled past the input); with
/// fewer, only what fits is packed.
///
/// Returns the OR of the bytes packed: at most 1 exactly when every one was a bit, so
/// that a caller validates its input in the same pass.
pub fn pack_bits(bits: &[u8], out: &mut [u64]) -> u8 {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512bw") {
        // SAFETY: AVX-512BW (and so AVX-512F) was detected.
        return unsafe { pack_bits_avx512(bits, out) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 was detected.
        return unsafe { pack_bits_avx2(bits, out) };
    }
    pack_bits_portable(bits, out)
}

/// The OR of a word's eight bytes.
fn or_bytes(w: u64) -> u8 {
    let w = w | w >> 32;
    let w = w | w >> 16;
    (w | w >> 8) as u8
}

/// `pack_bits` with one byte test per 64 bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) unsafe fn pack_bits_avx512(bits: &[u8], out: &mut [u64]) -> u8 {
    use std::arch::x86_64::*;
    let whole = (bits.len() / 64).min(out.len());
    let mut any = _mm512_setzero_si512();
    for (w, b) in out[..whole].iter_mut().zip(bits.chunks_exact(64)) {
        // SAFETY: a 64-byte chunk of `bits`, read unaligned.
        let v = _mm512_loadu_si512(b.as_ptr().cast());
        *w = _mm512_test_epi8_mask(v, v);
        any = _mm512_or_si512(any, v);
    }
    let lanes = std::mem::transmute::<__m512i, [u64; 8]>(any);
    let any = lanes.iter().fold(0, |a, &l| a | or_bytes(l));
    any | pack_bits_portable(&bits[whole * 64..], &mut out[whole..])
}

/// `pack_bits` 64 bits at a time: one `vpmovmskb` gathers the "is zero" flags of 32
/// bytes, and the word keeps their complement.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn pack_bits_avx2(bits: &[u8], out: &mut [u64]) -> u8 {
    use std::arch::x86_64::*;
    let whole = (bits.len() / 64).min(out.len());
    let zero = _mm256_setzero_si256();
    let mut any = zero;
    for (w, b) in out[..whole].iter_mut().zip(bits.chunks_exact(64)) {
        let p = b.as_ptr().cast::<__m256i>();
        // SAFETY: the two halves of a 64-byte chunk of `bits`, read unaligned.
        let (lo, hi) = (_mm256_loadu_si256(p), _mm256_loadu_si256(p.add(1)));
        any = _mm256_or_si256(any, _mm256_or_si256(lo, hi));
        let lo = _mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, zero)) as u32 as u64;
        let hi = _mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, zero)) as u32 as u64;
        *w = !(lo | hi << 32);
    }
    let lanes = std::mem::transmute::<__m256i, [u64; 4]>(any);
    let any = lanes.iter().fold(0, |a, &l| a | or_bytes(l));
    any | pack_bits_portable(&bits[whole * 64..], &mut out[whole..])
}

/// `pack_bits` without SIMD: one multiply per 8 bits.
pub(crate) fn pack_bits_portable(bits: &[u8], out: &mut [u64]) -> u8 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let mut any = 0u64;
    let mut chunks = bits.chunks_exact(64);
    for (w, c) in out.iter_mut().zip(&mut chunks) {
        let mut v = 0u64;
        for (m, b) in c.chunks_exact(8).enumerate() {
            let x = u64::from_le_bytes(b.try_into().expect("chunks of 8"));
            any |= x;
            // Each byte's "non-zero" flag in its bit 0 (its low seven bits plus 0x7f
            // carry into bit 7; the OR adds bit 7 itself) ...
            let flags = ((((x & LOW7) + LOW7) | x) >> 7) & 0x0101_0101_0101_0101;
            // ... then gathered into one byte (no carries: every partial product
            // lands on its own bit).
            v |= (flags.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * m);
        }
        *w = v;
    }
    let done = bits.len() / 64;
    let mut any = or_bytes(any);
    if let Some(w) = out.get_mut(done) {
        let rest = chunks.remainder();
        any |= rest.iter().fold(0, |a, &b| a | b);
        *w = rest
            .iter()
            .enumerate()
            .fold(0, |v, (i, &b)| v | ((b != 0) as u64) << i);
    }
    any
}

/// Byte `b` spread to 8 bytes, byte `j` holding bit `j` of `b` (0/1), little-endian.
const SPREAD: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut b = 0;
    while b < 256 {
        let mut j = 0;
        while j < 8 {
            t[b] |= (((b >> j) & 1) as u64) << (8 * j);
            j += 1;
        }
        b += 1;
    }
    t
};

/// Writes bits `[0, out.len())` of `words` to `out`, one per byte (0/1), with the
/// widest kernel this CPU has.
pub(crate) fn unpack_bits(words: &[u64], out: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512bw") {
        // SAFETY: AVX-512BW (and so AVX-512F) was detected.
        return unsafe { unpack_bits_avx512(words, out) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 was detected.
        return unsafe { unpack_bits_avx2(words, out) };
    }
    unpack_bits_portable(words, out)
}

/// `unpack_bits` 32 bits at a time: each byte of a broadcast 32-bit word is spread to
/// the 8 output bytes it fills (a byte shuffle), then every byte keeps its own bit
/// (an AND with 1, 2, .., 128) and is clamped to 0/1 (an unsigned minimum with 1).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn unpack_bits_avx2(words: &[u64], out: &mut [u8]) {
    use std::arch::x86_64::*;
    let n = out.len();
    assert!(words.len() * 64 >= n, "enough bits to unpack");
    // The shuffle works within 128-bit halves: the low one spreads bytes 0 and 1 of the
    // broadcast word, the high one bytes 2 and 3.
    let spread = _mm256_setr_epi8(
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3,
        3, 3,
    );
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let ones = _mm256_set1_epi8(1);
    let src = words.as_ptr() as *const u32;
    let dst = out.as_mut_ptr();
    let whole = n / 32;
    for i in 0..whole {
        // SAFETY: `i < n / 32 <= words.len() * 2`, so the u32 read is inside `words`,
        // and the 32 bytes written end at `32 * (i + 1) <= n`.
        let w = _mm256_set1_epi32(src.add(i).read_unaligned() as i32);
        let bytes = _mm256_and_si256(_mm256_shuffle_epi8(w, spread), bit);
        let v = _mm256_min_epu8(bytes, ones);
        _mm256_storeu_si256(dst.add(32 * i) as *mut __m256i, v);
    }
    for (j, o) in out[whole * 32..].iter_mut().enumerate() {
        let i = whole * 32 + j;
        *o = (words[i / 64] >> (i % 64)) as u8 & 1;
    }
}

/// `unpack_bits` with one masked move per 64 bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) unsafe fn unpack_bits_avx512(words: &[u64], out: &mut [u8]) {
    use std::arch::x86_64::*;
    let ones = _mm512_set1_epi8(1);
    let n = out.len();
    assert!(words.len() * 64 >= n, "enough bits to unpack");
    let p = out.as_mut_ptr() as *mut i8;
    for (i, &w) in words.iter().enumerate().take(n.div_ceil(64)) {
        let bytes = _mm512_maskz_mov_epi8(w, ones);
        let rest = n - 64 * i;
        if rest >= 64 {
            _mm512_storeu_si512(p.add(64 * i) as *mut __m512i, bytes);
        } else {
            _mm512_mask_storeu_epi8(p.add(64 * i), (1u64 << rest) - 1, bytes);
        }
    }
}

/// `unpack_bits` without SIMD: one table look-up per 8 bits.
pub(crate) fn unpack_bits_portable(words: &[u64], out: &mut [u8]) {
    let start = out.len() / 8 * 8;
    let mut chunks = out.chunks_exact_mut(8);
    for (i, c) in (&mut chunks).enumerate() {
        let byte = (words[i / 8] >> (8 * (i % 8))) & 0xff;
        c.copy_from_slice(&SPREAD[byte as usize].to_le_bytes());
    }
    for (j, o) in chunks.into_remainder().iter_mut().enumerate() {
        let i = start + j;
        *o = (words[i / 64] >> (i % 64)) as u8 & 1;
    }
}

impl Packed {
    pub fn new(zc: usize, kb: usize, cols: usize, steps: Vec<PackedStep>) -> Packed {
        let nw = zc.div_ceil(64);
        let dw = (2 * zc).div_ceil(64) + 1;
        Packed {
            zc,
            nw,
            dw,
            kb,
            steps: steps
                .into_iter()
                .map(|s| RotatedStep::new(s, zc, dw))
                .collect(),
            payload: vec![0; (kb * zc).div_ceil(64) + nw + 1],
            // Spare words after the last column: the AVX2 sums read whole vectors.
            doubled: vec![0; (kb + 4) * dw + AVX2_SPARE_WORDS],
            parity: vec![0; (cols - kb) * nw],
            acc: vec![0; nw],
            #[cfg(target_arch = "x86_64")]
            avx2: std::is_x86_feature_detected!("avx2"),
            #[cfg(not(target_arch = "x86_64"))]
            avx2: false,
            #[cfg(target_arch = "x86_64")]
            avx2_unpack: std::is_x86_feature_detected!("avx2")
                && !std::is_x86_feature_detected!("avx512bw"),
            #[cfg(not(target_arch = "x86_64"))]
            avx2_unpack: false,
        }
    }

    /// Stores the Zc-bit block `a` (high bits of its last word clear) doubled into `d`.
    fn double(a: &[u64], zc: usize, d: &mut [u64]) {
        if zc.is_multiple_of(64) {
            // Whole words (every lifting size from 64 up to 384 that is a multiple of
            // 64): two copies and a zero word, no shifts (at Zc=384 on Zen 1 this
            // function went from 10% to 3% of an encode's `perf` samples).
            let nw = a.len();
            let (first, rest) = d.split_at_mut(nw);
            let (second, spare) = rest.split_at_mut(nw);
            for ((x, y), &w) in first.iter_mut().zip(second.iter_mut()).zip(a) {
                *x = w;
                *y = w;
            }
            for w in spare {
                *w = 0;
            }
            return;
        }
        // Word by word rather than `fill` + `copy_from_slice`: at the small Zc of a
        // frame's blocks those were two library calls of a few words each.
        for (i, w) in d.iter_mut().enumerate() {
            *w = a.get(i).copied().unwrap_or(0);
        }
        let (w0, b) = (zc / 64, zc % 64);
        for (i, &x) in a.iter().enumerate() {
            d[w0 + i] |= x << b;
            if b != 0 {
                d[w0 + i + 1] |= x >> (64 - b);
            }
        }
    }

    /// Encodes the payload (one bit per byte); afterwards `parity_block(j)` holds parity
    /// column `kb + j`. Returns false, having encoded nothing, when a payload byte is
    /// not a bit (checked while packing: no pass of its own).
    #[must_use]
    pub fn encode(&mut self, payload: &[u8]) -> bool {
        let (zc, nw, dw, kb) = (self.zc, self.nw, self.dw, self.kb);
        self.payload.fill(0);
        if pack_bits(payload, &mut self.payload) > 1 {
            return false;
        }
        let mask = last_mask(zc);
        for col in 0..kb {
            let doubled = &mut self.doubled[col * dw..(col + 1) * dw];
            if zc.is_multiple_of(64) {
                // The column is whole payload words.
                Self::double(&self.payload[col * nw..(col + 1) * nw], zc, doubled);
                continue;
            }
            read_bits::<false>(&mut self.acc, &self.payload, col * zc);
            self.acc[nw - 1] &= mask;
            Self::double(&self.acc, zc, doubled);
        }
        for step in &self.steps {
            let j = step.col - kb;
            let parity = &mut self.parity[j * nw..(j + 1) * nw];
            // Summed straight into the parity column (no accumulator to copy out).
            Self::sum_step(step, &self.doubled, parity, self.avx2);
            parity[nw - 1] &= mask;
            if j < 4 {
                // A core parity column: the extension rows read it, doubled.
                Self::double(
                    parity,
                    zc,
                    &mut self.doubled[step.col * dw..(step.col + 1) * dw],
                );
            }
        }
        true
    }

    /// `out` (one parity column, `ceil(Zc/64)` words, bits past Zc left for the caller
    /// to clear) = the XOR of `step`'s shifted blocks of `doubled`.
    fn sum_step(step: &RotatedStep, doubled: &[u64], out: &mut [u64], avx2: bool) {
        let nw = out.len();
        #[cfg(target_arch = "x86_64")]
        if avx2 && nw <= 8 {
            // SAFETY: AVX2 was detected (`avx2` is only set then).
            unsafe {
                if nw <= 2 {
                    sum_terms_avx2_x128(step, doubled, out)
                } else if nw <= 4 {
                    sum_terms_avx2::<1>(step, doubled, out)
                } else {
                    sum_terms_avx2::<2>(step, doubled, out)
                }
            }
            return;
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = avx2;
        // The accumulator in registers for the common block sizes.
        match nw {
            1 => out.copy_from_slice(&sum_terms::<1>(&step.terms, doubled)),
            2 => out.copy_from_slice(&sum_terms::<2>(&step.terms, doubled)),
            3 => out.copy_from_slice(&sum_terms::<3>(&step.terms, doubled)),
            4 => out.copy_from_slice(&sum_terms::<4>(&step.terms, doubled)),
            5 => out.copy_from_slice(&sum_terms::<5>(&step.terms, doubled)),
            6 => out.copy_from_slice(&sum_terms::<6>(&step.terms, doubled)),
            _ => {
                out.fill(0);
                for &(at, b) in &step.terms {
                    read_bits::<true>(out, &doubled[at..], b);
                }
            }
        }
    }

    /// Parity columns `kb, kb + 1, ..` after `encode`, one bit per byte, into the
    /// consecutive `Zc`-byte pieces of `out` (the last may be shorter).
    pub fn unpack_parity(&self, out: &mut [u8]) {
        let zc = self.zc;
        let n = out.len();
        for (j, start) in (0..n).step_by(zc).enumerate() {
            let len = zc.min(n - start);
            let words = self.parity_block(j);
            #[cfg(target_arch = "x86_64")]
            if self.avx2_unpack && start + len.next_multiple_of(32) <= n {
                // Whole vectors, no bit-by-bit tail (without it a Zc=72 block encodes in
                // 15% fewer instructions, callgrind): the bits past `len` (zeros, the
                // block's `ceil(Zc/64)` words hold them) land in the next piece, which
                // is written after this one.
                let whole = &mut out[start..start + len.next_multiple_of(32)];
                // SAFETY: AVX2 was detected (`avx2_unpack` is only set then).
                unsafe { unpack_bits_avx2(words, whole) };
                continue;
            }
            unpack_bits(words, &mut out[start..start + len]);
        }
    }

    /// Parity column `kb + j` after `encode`, `ceil(Zc/64)` words.
    pub fn parity_block(&self, j: usize) -> &[u64] {
        &self.parity[j * self.nw..(j + 1) * self.nw]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every unpack kernel this CPU has against the bit-by-bit definition, at lengths
    /// that end inside a byte and inside a word.
    #[test]
    fn unpack_kernels_match_the_definition() {
        let words: Vec<u64> = (0..7u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i << 61))
            .collect();
        for n in [0, 1, 7, 8, 31, 32, 33, 63, 64, 65, 95, 96, 200, 384, 448] {
            let expected: Vec<u8> = (0..n)
                .map(|i| (words[i / 64] >> (i % 64)) as u8 & 1)
                .collect();
            let mut out = vec![9u8; n];
            unpack_bits_portable(&words, &mut out);
            assert_eq!(out, expected, "portable, {n} bits");
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("avx512bw") {
                let mut out = vec![9u8; n];
                // SAFETY: detected just above.
                unsafe { unpack_bits_avx512(&words, &mut out) };
                assert_eq!(out, expected, "avx512, {n} bits");
            } else {
                println!("SKIPPED: avx512 unpack (CPU lacks AVX-512BW)");
            }
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("avx2") {
                let mut out = vec![9u8; n];
                // SAFETY: detected just above.
                unsafe { unpack_bits_avx2(&words, &mut out) };
                assert_eq!(out, expected, "avx2, {n} bits");
            } else {
                println!("SKIPPED: avx2 unpack (CPU lacks AVX2)");
            }
            let mut packed = vec![0u64; n.div_ceil(64) + 1];
            pack_bits_portable(&expected, &mut packed);
            let mut again = vec![9u8; n];
            unpack_bits_portable(&packed, &mut again);
            assert_eq!(again, expected, "pack then unpack, {n} bits");
        }
    }

    /// Every pack kernel this CPU has against the bit-by-bit definition, with bytes of
    /// every value (any non-zero one is a 1), at lengths that end inside a word.
    #[test]
    fn pack_kernels_match_the_definition() {
        let bytes: Vec<u8> = (0..520u32)
            .map(|i| match i % 5 {
                0 | 3 => 0,
                1 => 1,
                _ => (i.wrapping_mul(0x9e37_79b9) >> 24) as u8,
            })
            .collect();
        for n in [0, 1, 7, 8, 63, 64, 65, 127, 128, 200, 384, 520] {
            let bits = &bytes[..n];
            let mut expected = vec![0u64; n.div_ceil(64)];
            for (i, &b) in bits.iter().enumerate() {
                expected[i / 64] |= ((b != 0) as u64) << (i % 64);
            }
            type Pack = fn(&[u8], &mut [u64]) -> u8;
            let mut kernels: Vec<(&str, Pack)> = vec![("portable", pack_bits_portable)];
            #[cfg(target_arch = "x86_64")]
            {
                if std::is_x86_feature_detected!("avx2") {
                    // SAFETY: called only on this CPU, which has AVX2.
                    kernels.push(("avx2", |b, o| unsafe { pack_bits_avx2(b, o) }));
                } else {
                    println!("SKIPPED: avx2 pack (CPU lacks AVX2)");
                }
                if std::is_x86_feature_detected!("avx512bw") {
                    // SAFETY: called only on this CPU, which has AVX-512BW.
                    kernels.push(("avx512", |b, o| unsafe { pack_bits_avx512(b, o) }));
                } else {
                    println!("SKIPPED: avx512 pack (CPU lacks AVX-512BW)");
                }
            }
            let or = bits.iter().fold(0, |a, &b| a | b);
            for (name, pack) in kernels {
                let mut out = vec![!0u64; n.div_ceil(64)];
                assert_eq!(pack(bits, &mut out), or, "{name}, OR of {n} bytes");
                assert_eq!(out, expected, "{name}, {n} bits");
            }
        }
    }
}
