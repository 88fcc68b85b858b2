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

/// Scratch and tables of the packed encoder for one (base graph, Zc).
pub(crate) struct Packed {
    zc: usize,
    /// Words of one block (`ceil(Zc/64)`) and of one doubled block (with a spare word).
    nw: usize,
    dw: usize,
    kb: usize,
    steps: Vec<PackedStep>,
    /// Packed payload, then zeros (fillers), with a spare word.
    payload: Vec<u64>,
    /// Doubled blocks of the columns other rows read: systematic and core parity.
    doubled: Vec<u64>,
    /// Every parity block, `nw` words each.
    parity: Vec<u64>,
    acc: Vec<u64>,
    acc2: Vec<u64>,
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

/// XOR of the shifted blocks `terms` (column, shift) of `doubled` (`dw` words per
/// column), `NW` words.
#[inline(always)]
fn sum_terms<const NW: usize>(terms: &[(usize, usize)], doubled: &[u64], dw: usize) -> [u64; NW] {
    let mut acc = [0u64; NW];
    for &(col, shift) in terms {
        let src: &[u64] = &doubled[col * dw + shift / 64..][..NW + 1];
        let b = shift % 64;
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

/// Packs bits stored one per byte (0/1) into `out`, bit `i` of the input at bit `i % 64`
/// of word `i / 64`. The input is known to hold only 0 and 1.
pub(crate) fn pack_bits(bits: &[u8], out: &mut [u64]) {
    let mut chunks = bits.chunks_exact(64);
    for (w, c) in out.iter_mut().zip(&mut chunks) {
        let mut v = 0u64;
        for (m, b) in c.chunks_exact(8).enumerate() {
            let x = u64::from_le_bytes(b.try_into().expect("chunks of 8"));
            // Gathers bit 0 of each of the 8 bytes into one byte (no carries: every
            // partial product lands on its own bit).
            v |= (x.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * m);
        }
        *w = v;
    }
    let done = bits.len() / 64;
    if let Some(w) = out.get_mut(done) {
        *w = chunks
            .remainder()
            .iter()
            .enumerate()
            .fold(0, |v, (i, &b)| v | (b as u64) << i);
    }
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
    unpack_bits_portable(words, out)
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
            steps,
            payload: vec![0; (kb * zc).div_ceil(64) + nw + 1],
            doubled: vec![0; (kb + 4) * dw],
            parity: vec![0; (cols - kb) * nw],
            acc: vec![0; nw],
            acc2: vec![0; dw],
        }
    }

    /// Stores the Zc-bit block `a` (high bits of its last word clear) doubled into `d`.
    fn double(a: &[u64], zc: usize, d: &mut [u64]) {
        d.fill(0);
        d[..a.len()].copy_from_slice(a);
        let (w0, b) = (zc / 64, zc % 64);
        for (i, &x) in a.iter().enumerate() {
            d[w0 + i] |= x << b;
            if b != 0 {
                d[w0 + i + 1] |= x >> (64 - b);
            }
        }
    }

    /// Encodes the payload (one bit per byte, validated by the caller); afterwards
    /// `parity_block(j)` holds parity column `kb + j`.
    pub fn encode(&mut self, payload: &[u8]) {
        let (zc, nw, dw, kb) = (self.zc, self.nw, self.dw, self.kb);
        self.payload.fill(0);
        pack_bits(payload, &mut self.payload);
        let mask = last_mask(zc);
        for col in 0..kb {
            read_bits::<false>(&mut self.acc, &self.payload, col * zc);
            self.acc[nw - 1] &= mask;
            Self::double(&self.acc, zc, &mut self.doubled[col * dw..(col + 1) * dw]);
        }
        for step in &self.steps {
            // The accumulator in registers for the common block sizes.
            match nw {
                1 => self
                    .acc
                    .copy_from_slice(&sum_terms::<1>(&step.terms, &self.doubled, dw)),
                2 => self
                    .acc
                    .copy_from_slice(&sum_terms::<2>(&step.terms, &self.doubled, dw)),
                3 => self
                    .acc
                    .copy_from_slice(&sum_terms::<3>(&step.terms, &self.doubled, dw)),
                4 => self
                    .acc
                    .copy_from_slice(&sum_terms::<4>(&step.terms, &self.doubled, dw)),
                5 => self
                    .acc
                    .copy_from_slice(&sum_terms::<5>(&step.terms, &self.doubled, dw)),
                6 => self
                    .acc
                    .copy_from_slice(&sum_terms::<6>(&step.terms, &self.doubled, dw)),
                _ => {
                    self.acc.fill(0);
                    for &(col, shift) in &step.terms {
                        let src = &self.doubled[col * dw..(col + 1) * dw];
                        read_bits::<true>(&mut self.acc, src, shift);
                    }
                }
            }
            self.acc[nw - 1] &= mask;
            // p[(i + shift) % Zc] = acc[i]: p is acc rotated by Zc - shift.
            Self::double(&self.acc, zc, &mut self.acc2);
            let j = step.col - kb;
            let p = &mut self.parity[j * nw..(j + 1) * nw];
            read_bits::<false>(p, &self.acc2, (zc - step.shift) % zc);
            p[nw - 1] &= mask;
            if j < 4 {
                let col = step.col;
                Self::double(p, zc, &mut self.doubled[col * dw..(col + 1) * dw]);
            }
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
        for n in [0, 1, 7, 8, 63, 64, 65, 200, 384, 448] {
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
            let mut packed = vec![0u64; n.div_ceil(64) + 1];
            pack_bits(&expected, &mut packed);
            let mut again = vec![9u8; n];
            unpack_bits_portable(&packed, &mut again);
            assert_eq!(again, expected, "pack then unpack, {n} bits");
        }
    }
}
