//! Soft demodulation straight into the LDPC decoder's input: one planar slice of up
//! to 16 equalised symbols per user (the layout the equaliser writes, still in L1)
//! to descrambled, quantised `i8` LLRs.
//!
//! The LLRs are the max-log values of [`Demodulator::demodulate`] (the same float
//! operations in the same order), their signs flipped where the scrambling sequence
//! has a one (what [`crate::scramble::SequenceCache::descramble_llrs`] does), then
//! quantised as `radiohost_ldpc::Decoder::decode` quantises float LLRs: times
//! [`DEFAULT_LLR_SCALE`], clipped to ±[`CHANNEL_LLR_MAX`], rounded half to even. The
//! clip and the rounding are symmetric, so negating the quantised value equals
//! quantising the negated float: `Decoder::decode_quantized` on these bytes decodes
//! exactly what `decode` does on the float chain's LLRs, without the float LLR
//! buffer, the descrambling pass or the quantisation pass.

use radiohost_ldpc::{CHANNEL_LLR_MAX, DEFAULT_LLR_SCALE};

use crate::qam::{axis_llrs, Demodulator};
use crate::simd::{dispatch, Isa};

/// Symbols per slice (one AVX-512 register of `f32`).
pub const LANES: usize = 16;

/// One slice of up to [`LANES`] equalised symbols of every user, planar.
#[derive(Clone, Copy, Debug)]
pub struct SoftSlice<'a> {
    /// `[user]`: in-phase parts of the slice's symbols.
    pub re: &'a [[f32; LANES]],
    /// `[user]`: quadrature parts.
    pub im: &'a [[f32; LANES]],
    /// `[user]`: [`crate::qam::inverse_noise`] of each symbol's noise variance.
    pub inv_noise: &'a [[f32; LANES]],
    /// `[user]`: the scrambling sequence over the slice's LLRs, bit `i` for LLR `i`
    /// ([`crate::scramble::sequence_bits`]).
    pub flips: &'a [u128],
    /// Symbols in the slice: lanes `0 .. symbols` (the others are not read as data).
    pub symbols: usize,
}

impl Demodulator {
    /// The decoder's input bytes for `slice`: user `k`'s `symbols * Qm` LLRs go to
    /// `out[k * stride + offset ..]`, in the order [`Self::demodulate`] writes them.
    /// Returns false if an LLR was NaN (its byte is then meaningless; the float
    /// chain's decoder rejects such input).
    ///
    /// # Panics
    /// If the per-user slices differ in length, `symbols > 16`, or `out` is too
    /// short (caller bugs).
    pub fn slice_llrs_i8(
        &self,
        isa: Isa,
        slice: &SoftSlice<'_>,
        out: &mut [i8],
        stride: usize,
        offset: usize,
    ) -> bool {
        let users = slice.re.len();
        assert!(
            slice.im.len() == users && slice.inv_noise.len() == users && slice.flips.len() == users,
            "soft slice: per-user lengths"
        );
        assert!(slice.symbols <= LANES, "soft slice: symbols");
        let qm = self.modulation().bits_per_symbol();
        if users == 0 || slice.symbols == 0 {
            return true;
        }
        assert!(
            (users - 1) * stride + offset + slice.symbols * qm <= out.len(),
            "soft slice: output too short"
        );
        #[cfg(target_arch = "x86_64")]
        if isa.min(Isa::cpu()) == Isa::Avx512 && std::is_x86_feature_detected!("bmi2") {
            let (lv, s) = (self.levels(), slice);
            // SAFETY: AVX-512 F/BW/VL and BMI2 were detected; `out` covers every
            // user's bytes (asserted above).
            return unsafe {
                match qm / 2 {
                    1 => slice_avx512::<1>(lv, s, out, stride, offset),
                    2 => slice_avx512::<2>(lv, s, out, stride, offset),
                    3 => slice_avx512::<3>(lv, s, out, stride, offset),
                    _ => slice_avx512::<4>(lv, s, out, stride, offset),
                }
            };
        }
        #[cfg(target_arch = "x86_64")]
        if isa.min(Isa::cpu()) == Isa::Avx2 {
            let (lv, s) = (self.levels(), slice);
            // SAFETY: `Isa::cpu` found AVX2 and FMA; `out` covers every user's
            // bytes (asserted above).
            return unsafe {
                match qm / 2 {
                    1 => slice_avx2::<1>(lv, s, out, stride, offset),
                    2 => slice_avx2::<2>(lv, s, out, stride, offset),
                    3 => slice_avx2::<3>(lv, s, out, stride, offset),
                    _ => slice_avx2::<4>(lv, s, out, stride, offset),
                }
            };
        }
        let this = self;
        dispatch!(isa.min(Isa::Avx2), fn run(this: &Demodulator, slice: &SoftSlice<'_>,
            out: &mut [i8], stride: usize, offset: usize) -> bool => slice_body)
    }
}

/// Quantise one LLR as the decoder does: scale, clip, round half to even.
#[inline(always)]
fn quantize(x: f32) -> i8 {
    // Adding 1.5 * 2^23 rounds to an integer, ties to even (the default rounding
    // mode), and leaves it in the low mantissa bits: a conversion that vectorises,
    // where `as i32` does not (it must saturate). |x| <= 63 after the clip. NaN gives
    // a meaningless byte; the caller reports it.
    const MAGIC: f32 = 12_582_912.0;
    let max = CHANNEL_LLR_MAX as f32;
    let y = (x * DEFAULT_LLR_SCALE).clamp(-max, max) + MAGIC;
    (y.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32) as i8
}

#[inline(always)]
fn slice_body<const FMA: bool>(
    this: &Demodulator,
    s: &SoftSlice<'_>,
    out: &mut [i8],
    stride: usize,
    offset: usize,
) -> bool {
    // Bits per axis as a constant, so every per-level loop unrolls into registers.
    let lv = this.levels();
    match this.modulation().bits_per_axis() {
        1 => slice_axes::<1>(lv, s, out, stride, offset),
        2 => slice_axes::<2>(lv, s, out, stride, offset),
        3 => slice_axes::<3>(lv, s, out, stride, offset),
        _ => slice_axes::<4>(lv, s, out, stride, offset),
    }
}

/// The portable build (and the AVX2 one through `dispatch!` if the CPU lacks FMA):
/// each bit's 16 LLRs are scaled and quantised as one
/// lane-wise loop (it vectorises), then interleaved into symbol order with the
/// descrambling applied as a conditional negation, bit by bit.
#[inline(always)]
fn slice_axes<const QA: usize>(
    levels: &[f32; 16],
    s: &SoftSlice<'_>,
    out: &mut [i8],
    stride: usize,
    offset: usize,
) -> bool {
    let qm = 2 * QA;
    let mut nan = [false; LANES];
    for k in 0..s.re.len() {
        let axes = [
            axis_llrs::<QA>(levels, &s.re[k]),
            axis_llrs::<QA>(levels, &s.im[k]),
        ];
        let inv = &s.inv_noise[k];
        let mut planes = [[0i8; LANES]; 8];
        for (j, plane) in planes.iter_mut().enumerate().take(qm) {
            // Even bits come from the in-phase axis, odd bits from the quadrature.
            let a = &axes[j % 2][j / 2];
            for l in 0..LANES {
                let x = a[l] * inv[l];
                nan[l] |= x.is_nan();
                plane[l] = quantize(x);
            }
        }
        let dst = &mut out[k * stride + offset..][..s.symbols * qm];
        let mut flips = s.flips[k];
        for (l, chunk) in dst.chunks_exact_mut(qm).enumerate() {
            for (j, q) in chunk.iter_mut().enumerate() {
                // -q as (q ^ m) - m: m is all ones where the sequence bit is set.
                let m = -((flips & 1) as i8);
                *q = (planes[j][l] ^ m).wrapping_sub(m);
                flips >>= 1;
            }
        }
    }
    !nan[..s.symbols].contains(&true)
}

/// The AVX-512 build: per user, the per-bit LLR vectors (16 symbols in lanes) are
/// quantised with the decoder's vector conversion, negated under a mask of their
/// sequence bits (`pext` of every `Qm`-th bit), packed into each symbol's `Qm`
/// bytes with shifts and stored whole.
///
/// # Safety
/// The CPU has AVX-512 F/BW/VL and BMI2; `out` holds every user's bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,bmi2")]
unsafe fn slice_avx512<const QA: usize>(
    levels: &[f32; 16],
    s: &SoftSlice<'_>,
    out: &mut [i8],
    stride: usize,
    offset: usize,
) -> bool {
    use std::arch::x86_64::*;
    let qm = 2 * QA;
    let n = s.symbols;
    let valid = ((1u32 << n) - 1) as __mmask16;
    let mut lv = [_mm512_setzero_ps(); 16];
    for (v, &a) in lv.iter_mut().zip(levels) {
        *v = _mm512_set1_ps(a);
    }
    let scale = _mm512_set1_ps(DEFAULT_LLR_SCALE);
    let max = _mm512_set1_ps(CHANNEL_LLR_MAX as f32);
    let min = _mm512_set1_ps(-(CHANNEL_LLR_MAX as f32));
    let inf = _mm512_set1_ps(f32::INFINITY);
    let zero = _mm512_setzero_si512();
    // Bit 0 of each of 8 symbols' Qm-bit groups: the sequence bits of one LLR
    // position across a half slice.
    let pattern = (0..8).fold(0u64, |p, l| p | 1 << (l * qm));
    let half = 8 * qm;
    let half_mask = u128::MAX >> (128 - half);
    let mut nan: __mmask16 = 0;
    let mut staged = [0i8; 8 * LANES];
    for k in 0..s.re.len() {
        // SAFETY (loads): every row is 16 floats.
        let inv = unsafe { _mm512_loadu_ps(s.inv_noise[k].as_ptr()) };
        let flips = s.flips[k];
        let (h0, h1) = (
            (flips & half_mask) as u64,
            ((flips >> half) & half_mask) as u64,
        );
        let mut q = [zero; 8];
        for axis in 0..2 {
            let row = if axis == 0 { &s.re[k] } else { &s.im[k] };
            let y = unsafe { _mm512_loadu_ps(row.as_ptr()) };
            let (mut b0, mut b1) = ([inf; 4], [inf; 4]);
            for (label, &a) in lv.iter().enumerate().take(1 << QA) {
                let e = _mm512_sub_ps(y, a);
                let d = _mm512_mul_ps(e, e);
                for bit in 0..QA {
                    let best = match (label >> (QA - 1 - bit)) & 1 {
                        0 => &mut b0[bit],
                        _ => &mut b1[bit],
                    };
                    *best = if first_of_its_side::<QA>(label, bit) {
                        d
                    } else {
                        // `min(d, best)` keeps `best` unless `d < best`, as the
                        // reference.
                        _mm512_min_ps(d, *best)
                    };
                }
            }
            for bit in 0..QA {
                let x = _mm512_mul_ps(_mm512_sub_ps(b1[bit], b0[bit]), inv);
                nan |= _mm512_mask_cmp_ps_mask::<_CMP_UNORD_Q>(valid, x, x);
                // The decoder's operations and operand order (`quantize_avx512`).
                let v = _mm512_min_ps(max, _mm512_max_ps(min, _mm512_mul_ps(x, scale)));
                let i = _mm512_cvt_roundps_epi32::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
                    v,
                );
                let j = 2 * bit + axis;
                let flip = _pext_u64(h0, pattern << j) | _pext_u64(h1, pattern << j) << 8;
                q[j] = _mm512_mask_sub_epi32(i, flip as __mmask16, zero, i);
            }
        }
        let dst = if n == LANES {
            // SAFETY: `slice_llrs_i8` asserted the user's bytes are inside `out`.
            unsafe { out.as_mut_ptr().add(k * stride + offset) }
        } else {
            staged.as_mut_ptr()
        };
        // SAFETY: `dst` has 16 * Qm bytes (a full slice in `out`, or `staged`).
        unsafe { store_symbols::<QA>(&q, dst) };
        if n < LANES {
            let at = k * stride + offset;
            out[at..at + n * qm].copy_from_slice(&staged[..n * qm]);
        }
    }
    nan == 0
}

/// The AVX2 build: per user and half slice (8 symbols in lanes), the per-bit LLR
/// vectors are quantised with the decoder's operations, packed into each symbol's
/// `Qm` bytes with shifts and byte shuffles (symbol order, in a staging block), then
/// descrambled 32 bytes at a time on the way to `out`: the sequence bits of those
/// bytes, spread to byte masks, negate them.
///
/// # Safety
/// The CPU has AVX2 and FMA; `out` holds every user's bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn slice_avx2<const QA: usize>(
    levels: &[f32; 16],
    s: &SoftSlice<'_>,
    out: &mut [i8],
    stride: usize,
    offset: usize,
) -> bool {
    use std::arch::x86_64::*;
    let qm = 2 * QA;
    let n = s.symbols;
    let mut lv = [_mm256_setzero_ps(); 16];
    for (v, &a) in lv.iter_mut().zip(levels) {
        *v = _mm256_set1_ps(a);
    }
    let scale = _mm256_set1_ps(DEFAULT_LLR_SCALE);
    let max = _mm256_set1_ps(CHANNEL_LLR_MAX as f32);
    let min = _mm256_set1_ps(-(CHANNEL_LLR_MAX as f32));
    // Lanes of each half that hold the slice's symbols (NaN elsewhere is not data).
    let valid = (1u32 << n) - 1;
    let mut nan = 0u32;
    let mut staged = Staging([0; STAGING]);
    for k in 0..s.re.len() {
        // SAFETY (loads): every row is 16 floats, `h` is 0 or 1.
        let ld = |row: &[f32; LANES], h: usize| unsafe { _mm256_loadu_ps(row.as_ptr().add(8 * h)) };
        for h in 0..2 {
            let inv = ld(&s.inv_noise[k], h);
            let mut q = [_mm256_setzero_si256(); 8];
            let mut unordered = _mm256_setzero_ps();
            for axis in 0..2 {
                let y = ld(if axis == 0 { &s.re[k] } else { &s.im[k] }, h);
                let (mut b0, mut b1) = (
                    [_mm256_set1_ps(f32::INFINITY); 4],
                    [_mm256_set1_ps(f32::INFINITY); 4],
                );
                for (label, &a) in lv.iter().enumerate().take(1 << QA) {
                    let e = _mm256_sub_ps(y, a);
                    let d = _mm256_mul_ps(e, e);
                    for bit in 0..QA {
                        let best = match (label >> (QA - 1 - bit)) & 1 {
                            0 => &mut b0[bit],
                            _ => &mut b1[bit],
                        };
                        *best = if first_of_its_side::<QA>(label, bit) {
                            d
                        } else {
                            // `min(d, best)` keeps `best` unless `d < best`, as the
                            // reference.
                            _mm256_min_ps(d, *best)
                        };
                    }
                }
                for bit in 0..QA {
                    let x = _mm256_mul_ps(_mm256_sub_ps(b1[bit], b0[bit]), inv);
                    unordered = _mm256_or_ps(unordered, _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x));
                    // The decoder's clip (`quantize_avx2`); the conversion rounds
                    // ties to even (the default rounding mode), as its round does.
                    let v = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(x, scale), min), max);
                    q[2 * bit + axis] = _mm256_cvtps_epi32(v);
                }
            }
            nan |= (_mm256_movemask_ps(unordered) as u32) << (8 * h);
            // SAFETY: the staging block has room for 16 symbols' records plus the
            // packer's overhang.
            unsafe { pack_symbols_avx2::<QA>(&q, staged.0.as_mut_ptr().add(8 * qm * h)) };
        }
        let dst = &mut out[k * stride + offset..][..n * qm];
        descramble_copy_avx2(&staged.0, s.flips[k], dst);
    }
    nan & valid == 0
}

/// Whether `label` is the first (lowest) label whose bit `bit` (of `QA`, most
/// significant first) has its value: its distance starts that side's minimum, where
/// the reference starts from infinity and takes `min(d, inf)`, which is `d` for
/// every `d` but NaN. A NaN `d` comes only from a NaN `y`, whose LLR is NaN (and
/// reported) either way; one vector minimum fewer per side and bit.
#[inline(always)]
const fn first_of_its_side<const QA: usize>(label: usize, bit: usize) -> bool {
    let shift = QA - 1 - bit;
    label == ((label >> shift) & 1) << shift
}

/// Bytes of the AVX2 build's staging block: 16 symbols of at most 8 bytes, plus the
/// 4 bytes the 64QAM packer writes past its last record, rounded up to whole
/// 32-byte blocks.
const STAGING: usize = 160;

/// The AVX2 build's staging block, aligned for whole-register loads.
#[repr(align(32))]
struct Staging([i8; STAGING]);

/// Pack 8 symbols' per-bit values `q[j]` (one `i32` per symbol, within ±63; bit `j`
/// of symbol `l` in lane `l` of `q[j]`) into each symbol's `2 * QA` consecutive
/// bytes at `dst`.
///
/// # Safety
/// The CPU has AVX2; `dst` is valid for `16 * QA + 4` bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn pack_symbols_avx2<const QA: usize>(q: &[std::arch::x86_64::__m256i; 8], dst: *mut i8) {
    use std::arch::x86_64::*;
    let byte = _mm256_set1_epi32(0xFF);
    // Four bytes per dword: b0 | b1 << 8 | b2 << 16 | b3 << 24.
    let dword = |a: __m256i, b: __m256i, c: __m256i, d: __m256i| {
        let ab = _mm256_or_si256(
            _mm256_and_si256(a, byte),
            _mm256_slli_epi32::<8>(_mm256_and_si256(b, byte)),
        );
        let cd = _mm256_or_si256(
            _mm256_slli_epi32::<16>(_mm256_and_si256(c, byte)),
            _mm256_slli_epi32::<24>(d),
        );
        _mm256_or_si256(ab, cd)
    };
    // SAFETY (stores): `dst` is valid for 16 * QA + 4 bytes, the caller guarantees.
    unsafe {
        match QA {
            1 => {
                // Sign-extended 16-bit pairs: `packs` keeps them, in lane order
                // 0-3 | 4-7 within each 128-bit half.
                let pairs =
                    _mm256_or_si256(_mm256_and_si256(q[0], byte), _mm256_slli_epi32::<8>(q[1]));
                let words = _mm256_packs_epi32(pairs, pairs);
                let packed = _mm256_permute4x64_epi64::<0b1000>(words);
                _mm_storeu_si128(dst.cast(), _mm256_castsi256_si128(packed));
            }
            2 => _mm256_storeu_si256(dst.cast(), dword(q[0], q[1], q[2], q[3])),
            3 => {
                let lo = dword(q[0], q[1], q[2], q[3]);
                let hi = _mm256_or_si256(
                    _mm256_and_si256(q[4], byte),
                    _mm256_slli_epi32::<8>(_mm256_and_si256(q[5], byte)),
                );
                // Records (lo, hi) of symbols 0 1 | 4 5 and 2 3 | 6 7; keep 6 bytes
                // of each: 12 bytes per 128-bit half, stored 12 bytes apart in
                // ascending order so each store's 4 trailing bytes are overwritten.
                let squeeze = _mm256_setr_epi8(
                    0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13, -1, -1, -1, -1, 0, 1, 2, 3, 4, 5, 8, 9,
                    10, 11, 12, 13, -1, -1, -1, -1,
                );
                let a = _mm256_shuffle_epi8(_mm256_unpacklo_epi32(lo, hi), squeeze);
                let b = _mm256_shuffle_epi8(_mm256_unpackhi_epi32(lo, hi), squeeze);
                _mm_storeu_si128(dst.cast(), _mm256_castsi256_si128(a));
                _mm_storeu_si128(dst.add(12).cast(), _mm256_castsi256_si128(b));
                _mm_storeu_si128(dst.add(24).cast(), _mm256_extracti128_si256::<1>(a));
                _mm_storeu_si128(dst.add(36).cast(), _mm256_extracti128_si256::<1>(b));
            }
            _ => {
                let lo = dword(q[0], q[1], q[2], q[3]);
                let hi = dword(q[4], q[5], q[6], q[7]);
                // Records of symbols 0 1 | 4 5 and 2 3 | 6 7.
                let a = _mm256_unpacklo_epi32(lo, hi);
                let b = _mm256_unpackhi_epi32(lo, hi);
                _mm256_storeu_si256(dst.cast(), _mm256_permute2x128_si256::<0x20>(a, b));
                _mm256_storeu_si256(dst.add(32).cast(), _mm256_permute2x128_si256::<0x31>(a, b));
            }
        }
    }
}

/// Copy `dst.len()` staged bytes to `dst`, negating byte `i` where bit `i` of
/// `flips` is set (whole 32-byte blocks through registers, the tail bytewise).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn descramble_copy_avx2(staged: &[i8; STAGING], flips: u128, dst: &mut [i8]) {
    use std::arch::x86_64::*;
    // Byte i of a block takes bit i of its 32 sequence bits: byte i / 8 of the
    // mask, broadcast, then the bit i % 8 of it.
    let spread = _mm256_setr_epi8(
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3,
        3, 3,
    );
    let select = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let blocks = dst.len() / 32;
    for b in 0..blocks {
        let bits = (flips >> (32 * b)) as u32;
        let m = _mm256_shuffle_epi8(_mm256_set1_epi32(bits as i32), spread);
        let m = _mm256_cmpeq_epi8(_mm256_and_si256(m, select), select);
        // SAFETY: block `b` lies inside both `staged` and `dst` (b < dst.len() / 32,
        // dst.len() <= 128 < STAGING).
        unsafe {
            let v = _mm256_loadu_si256(staged.as_ptr().add(32 * b).cast());
            // -v as (v ^ m) - m: m is all ones where the sequence bit is set.
            let v = _mm256_sub_epi8(_mm256_xor_si256(v, m), m);
            _mm256_storeu_si256(dst.as_mut_ptr().add(32 * b).cast(), v);
        }
    }
    for i in 32 * blocks..dst.len() {
        let m = -(((flips >> i) & 1) as i8);
        dst[i] = (staged[i] ^ m).wrapping_sub(m);
    }
}

/// Pack the per-bit byte values `q[j]` (one `i32` per symbol, within ±63) into
/// each symbol's `2 * QA` consecutive bytes and store the 16 symbols at `dst`.
///
/// # Safety
/// The CPU has AVX-512 F/BW; `dst` is valid for `32 * QA` bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
unsafe fn store_symbols<const QA: usize>(q: &[std::arch::x86_64::__m512i; 8], dst: *mut i8) {
    use std::arch::x86_64::*;
    let byte = _mm512_set1_epi32(0xFF);
    // Four bytes per dword: b0 | b1 << 8 | b2 << 16 | b3 << 24.
    let dword = |a: __m512i, b: __m512i, c: __m512i, d: __m512i| {
        let ab = _mm512_or_si512(
            _mm512_and_si512(a, byte),
            _mm512_slli_epi32::<8>(_mm512_and_si512(b, byte)),
        );
        let cd = _mm512_or_si512(
            _mm512_slli_epi32::<16>(_mm512_and_si512(c, byte)),
            _mm512_slli_epi32::<24>(d),
        );
        _mm512_or_si512(ab, cd)
    };
    // Symbols 0-7 and 8-15 as (low dword, high dword) qwords.
    let first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    let second = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    // SAFETY (stores): `dst` is valid for 32 * QA bytes, the caller guarantees.
    unsafe {
        match QA {
            1 => {
                let pairs =
                    _mm512_or_si512(_mm512_and_si512(q[0], byte), _mm512_slli_epi32::<8>(q[1]));
                _mm256_storeu_si256(dst.cast(), _mm512_cvtepi32_epi16(pairs));
            }
            2 => _mm512_storeu_si512(dst.cast(), dword(q[0], q[1], q[2], q[3])),
            3 => {
                let lo = dword(q[0], q[1], q[2], q[3]);
                let hi = _mm512_or_si512(
                    _mm512_and_si512(q[4], byte),
                    _mm512_slli_epi32::<8>(_mm512_and_si512(q[5], byte)),
                );
                // Each 128-bit lane holds two 8-byte records: keep 6 bytes of each,
                // then close the 4-byte gaps between lanes.
                let squeeze = _mm512_set4_epi32(-1, 0x0d0c_0b0a, 0x0908_0504, 0x0302_0100);
                let close = _mm512_setr_epi32(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 3, 7, 11, 15);
                for (h, idx) in [first, second].into_iter().enumerate() {
                    let rec = _mm512_permutex2var_epi32(lo, idx, hi);
                    let packed = _mm512_permutexvar_epi32(close, _mm512_shuffle_epi8(rec, squeeze));
                    _mm512_mask_storeu_epi32(dst.add(48 * h).cast(), 0x0FFF, packed);
                }
            }
            _ => {
                let lo = dword(q[0], q[1], q[2], q[3]);
                let hi = dword(q[4], q[5], q[6], q[7]);
                _mm512_storeu_si512(dst.cast(), _mm512_permutex2var_epi32(lo, first, hi));
                _mm512_storeu_si512(
                    dst.add(64).cast(),
                    _mm512_permutex2var_epi32(lo, second, hi),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qam::{inverse_noise, Modulation};
    use crate::scramble::{sequence_bits, sequence_words, GoldSequence};
    use radiohost_iq::Cf32;

    const ALL: [Modulation; 4] = [
        Modulation::Qpsk,
        Modulation::Qam16,
        Modulation::Qam64,
        Modulation::Qam256,
    ];

    /// The float chain: reference demodulation, descrambling, then the decoder's
    /// quantisation written out (`radiohost_ldpc` decoder, `quantize`).
    fn float_chain(m: Modulation, syms: &[Cf32], nv: &[f32], c_init: u32, pos: usize) -> Vec<i8> {
        let mut llrs = vec![0.0; syms.len() * m.bits_per_symbol()];
        Demodulator::new(m).demodulate_at(Isa::Portable, syms, nv, &mut llrs);
        GoldSequence::new_at(c_init, pos).descramble_llrs(&mut llrs);
        let max = CHANNEL_LLR_MAX as f32;
        llrs.iter()
            .map(|x| (x * DEFAULT_LLR_SCALE).clamp(-max, max).round_ties_even() as i32 as i8)
            .collect()
    }

    /// Every ISA build gives the float chain's bytes, for every order, full and
    /// partial slices, noise variances that saturate some LLRs and values on
    /// rounding boundaries; nothing outside a user's bytes is written.
    #[test]
    fn every_isa_matches_the_float_chain() {
        let mut state = 99u64;
        let mut rnd = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 40) as f32 / (1u64 << 24) as f32
        };
        for m in ALL {
            let qm = m.bits_per_symbol();
            let dm = Demodulator::new(m);
            let users = 3;
            let c_init = [11u32, 4711, 0x4_0001];
            let words: Vec<Vec<u32>> = c_init.iter().map(|&c| sequence_words(c, 4096)).collect();
            for n in [16, 13, 1] {
                let mut re = vec![[0f32; LANES]; users];
                let mut im = vec![[0f32; LANES]; users];
                let mut inv = vec![[0f32; LANES]; users];
                let mut syms = vec![vec![Cf32::default(); n]; users];
                let mut nv = vec![vec![0f32; n]; users];
                for k in 0..users {
                    for l in 0..LANES {
                        (re[k][l], im[k][l]) = (rnd() * 3.0 - 1.5, rnd() * 3.0 - 1.5);
                        // Exactly half a quantum at unit variance: a rounding tie.
                        if l == 3 {
                            re[k][l] = 0.0;
                        }
                        let v = [0.001, 0.05, 0.3, 2.0][(l + k) % 4] * (1.0 + rnd());
                        inv[k][l] = inverse_noise(v);
                        if l < n {
                            syms[k][l] = Cf32::new(re[k][l], im[k][l]);
                            nv[k][l] = v;
                        }
                    }
                }
                let pos = 131;
                let flips: Vec<u128> = words
                    .iter()
                    .map(|w| sequence_bits(w, pos, LANES * qm))
                    .collect();
                let slice = SoftSlice {
                    re: &re,
                    im: &im,
                    inv_noise: &inv,
                    flips: &flips,
                    symbols: n,
                };
                let (stride, offset) = (200, 7);
                for isa in Isa::available() {
                    let mut out = vec![100i8; users * stride];
                    assert!(dm.slice_llrs_i8(isa, &slice, &mut out, stride, offset));
                    for k in 0..users {
                        let want = float_chain(m, &syms[k], &nv[k], c_init[k], pos);
                        let row = &out[k * stride..(k + 1) * stride];
                        assert_eq!(
                            &row[offset..offset + n * qm],
                            &want[..],
                            "{m:?} {isa:?} n {n} user {k}"
                        );
                        assert!(
                            row[..offset].iter().all(|&b| b == 100),
                            "{m:?} {isa:?} before"
                        );
                        assert!(
                            row[offset + n * qm..].iter().all(|&b| b == 100),
                            "{m:?} {isa:?} n {n} after"
                        );
                    }
                }
            }
        }
    }

    /// A NaN symbol is reported by every build, but NaN in lanes past the slice's
    /// symbols is not data.
    #[test]
    fn nan_is_reported_only_inside_the_slice() {
        let dm = Demodulator::new(Modulation::Qam16);
        let mut re = [[0.25f32; LANES]];
        let im = [[-0.5f32; LANES]];
        let inv = [[2.0f32; LANES]];
        re[0][10] = f32::NAN;
        for isa in Isa::available() {
            let mut out = vec![0i8; LANES * 4];
            for (n, finite) in [(16, false), (11, false), (10, true)] {
                let slice = SoftSlice {
                    re: &re,
                    im: &im,
                    inv_noise: &inv,
                    flips: &[0],
                    symbols: n,
                };
                assert_eq!(
                    dm.slice_llrs_i8(isa, &slice, &mut out, 0, 0),
                    finite,
                    "{isa:?} {n}"
                );
            }
        }
    }
}
