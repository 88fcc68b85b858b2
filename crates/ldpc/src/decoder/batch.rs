//! Several blocks of one code decoded at once, their lanes interleaved.
//!
//! Why: a row kernel works on whole 64-lane vectors, so a lifting size that is not a
//! multiple of 64 wastes lanes (Zc = 72 runs as three 32-lane halves: 96 lanes for 72
//! real ones) and pays the doubled layout's mirror fix-ups. `n = 64 / gcd(Zc, 64)`
//! blocks interleaved byte by byte (bit `i` of block `b` at lane `i * n + b`) are one
//! codeword of lifting size `n * Zc`, a multiple of 64, whose shifts are `n` times the
//! code's ([`Graph::interleaved`]): the wrapped layout's kernels decode it with every
//! lane real. Lanes never mix (every kernel operation is per lane), so each block's
//! lanes go through exactly the operations a decoder of that block alone performs:
//! same hard decisions, same iteration count (early termination is checked per block
//! and a block's decisions are taken at the iteration it converged), same parity
//! verdict.

use super::{all_blocks, DecodeOutcome, Decoder, DecoderConfig, FRONT_PAD};
use crate::encoder::check_len;
use crate::graph::Graph;
use crate::{CodeParams, LdpcError};

/// Decodes up to [`BatchDecoder::blocks`] blocks of one code per call.
pub struct BatchDecoder {
    /// The decoder of the interleaved code (every length `blocks` times the code's).
    inner: Decoder,
    p: CodeParams,
    blocks: usize,
    /// How lanes are interleaved and taken apart.
    transpose: Transpose,
    /// The blocks of a float [`BatchDecoder::decode`] call, quantised (`tx_bits` each).
    quantized: Vec<i8>,
}

/// The interleaving's implementation: batches of 8 in vectors at the SIMD levels
/// (`x86`), anything else byte by byte (the portable level's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transpose {
    Bytes,
    /// SSE2 unpacks and an SSSE3 byte shuffle (every AVX2 CPU has both).
    #[cfg(target_arch = "x86_64")]
    Sse,
    /// AVX-512 BW and VBMI.
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl BatchDecoder {
    /// Blocks per batch for lifting size `zc`: the fewest whose interleaved lanes fill
    /// whole 64-lane vectors (1 when Zc is a multiple of 64, 8 for Zc = 72).
    pub fn width(zc: usize) -> usize {
        64 >> zc.trailing_zeros().min(6)
    }

    /// Rejects what [`Decoder::try_new`] rejects.
    pub fn try_new(p: CodeParams, cfg: DecoderConfig) -> Result<Self, LdpcError> {
        let blocks = Self::width(p.zc);
        let graph =
            Graph::interleaved(p.bg, p.zc, blocks).expect("CodeParams holds a valid lifting size");
        let wide = CodeParams {
            bg: p.bg,
            zc: p.zc * blocks,
            payload_bits: p.payload_bits * blocks,
            tx_bits: p.tx_bits * blocks,
        };
        let inner = Decoder::over(wide, &graph, cfg);
        if let Some(e) = &inner.config_error {
            return Err(e.clone());
        }
        #[cfg(target_arch = "x86_64")]
        let transpose = match inner.level {
            _ if blocks != 8 => Transpose::Bytes,
            super::SimdLevel::Avx512 if std::is_x86_feature_detected!("avx512vbmi") => {
                Transpose::Avx512
            }
            super::SimdLevel::Avx512 | super::SimdLevel::Avx2 => Transpose::Sse,
            _ => Transpose::Bytes,
        };
        #[cfg(not(target_arch = "x86_64"))]
        let transpose = Transpose::Bytes;
        Ok(BatchDecoder {
            inner,
            p,
            blocks,
            transpose,
            quantized: vec![0; blocks * p.tx_bits],
        })
    }

    /// The most blocks one call decodes.
    pub fn blocks(&self) -> usize {
        self.blocks
    }

    /// One block's code parameters.
    pub fn params(&self) -> CodeParams {
        self.p
    }

    /// 1 to [`Self::blocks`] inputs of `tx_bits` LLRs each.
    fn check_inputs<T>(&self, llrs: &[&[T]]) -> Result<(), LdpcError> {
        if llrs.is_empty() || llrs.len() > self.blocks {
            return Err(LdpcError::LengthMismatch {
                what: "blocks of a batch",
                expected: self.blocks,
                got: llrs.len(),
            });
        }
        llrs.iter()
            .try_for_each(|l| check_len("LLR input", self.p.tx_bits, l.len()))
    }

    /// [`Self::decode_quantized`] of float LLRs, each block quantised as
    /// [`Decoder::decode`] quantises it (same results as that call per block). A NaN
    /// is rejected with [`LdpcError::NanLlr`], its index counted in the blocks laid
    /// end to end.
    pub fn decode(
        &mut self,
        llrs: &[&[f32]],
        payloads: &mut [u8],
        outcomes: &mut [DecodeOutcome],
    ) -> Result<(), LdpcError> {
        let tx = self.p.tx_bits;
        self.check_inputs(llrs)?;
        let (level, scale) = (self.inner.level, self.inner.llr_scale);
        let mut q = std::mem::take(&mut self.quantized);
        let nan = llrs
            .iter()
            .zip(q.chunks_exact_mut(tx))
            .position(|(l, dst)| super::quantize_at(level, l, scale, dst));
        if let Some(b) = nan {
            self.quantized = q;
            let at = llrs[b].iter().position(|x| x.is_nan()).unwrap_or(0);
            return Err(LdpcError::NanLlr { index: b * tx + at });
        }
        let mut views: [&[i8]; 64] = [&[]; 64];
        for (v, q) in views.iter_mut().zip(q.chunks_exact(tx)) {
            *v = q;
        }
        let result = self.decode_quantized(&views[..llrs.len()], payloads, outcomes);
        self.quantized = q;
        result
    }

    /// Decodes `llrs.len()` (1 to [`Self::blocks`]) blocks of quantised LLRs
    /// (`tx_bits` each, positive means bit 0, used as they are) into `payloads` (their
    /// `payload_bits` one after another, one bit per byte) and `outcomes`: for every
    /// block exactly what [`Decoder::decode_quantized`] gives for it alone. A call
    /// with fewer blocks fills the free lanes with copies of the first block, which
    /// converge with it.
    pub fn decode_quantized(
        &mut self,
        llrs: &[&[i8]],
        payloads: &mut [u8],
        outcomes: &mut [DecodeOutcome],
    ) -> Result<(), LdpcError> {
        let (n, nb, pb) = (llrs.len(), self.blocks, self.p.payload_bits);
        self.check_inputs(llrs)?;
        check_len("payload output", n * pb, payloads.len())?;
        check_len("outcomes", n, outcomes.len())?;
        let transpose = self.transpose;
        self.inner.place_channel(|s, dst| {
            let start = s / nb;
            if transpose == Transpose::Bytes {
                return interleave(llrs, nb, start, dst);
            }
            let mut src = [&[][..]; 8];
            for (b, src) in src.iter_mut().enumerate() {
                let lane = if b < llrs.len() { b } else { 0 };
                *src = &llrs[lane][start..start + dst.len() / 8];
            }
            match transpose {
                // SAFETY: chosen only where the CPU has AVX-512 BW and VBMI.
                #[cfg(target_arch = "x86_64")]
                Transpose::Avx512 => unsafe { x86::interleave8(&src, dst) },
                #[cfg(target_arch = "x86_64")]
                Transpose::Sse => x86::interleave8_sse(&src, dst),
                Transpose::Bytes => unreachable!("handled above"),
            }
        });
        let cfg = self.inner.cfg;
        let mut pending = all_blocks(n);
        let mut iterations = 0;
        while iterations < cfg.max_iterations {
            let last = iterations + 1 == cfg.max_iterations;
            self.inner
                .iterate(iterations == 0, last || cfg.early_termination);
            iterations += 1;
            if cfg.early_termination {
                let failed = self.inner.failing_blocks(nb);
                let done = DecodeOutcome {
                    iterations,
                    parity_ok: true,
                };
                self.finish(pending & !failed, done, payloads, outcomes);
                pending &= failed;
                if pending == 0 {
                    return Ok(());
                }
            }
        }
        // Early termination: what is left failed its last check (as the single
        // decoder reports it); otherwise one check at the end.
        let failed = if cfg.early_termination {
            pending
        } else {
            self.inner.failing_blocks(nb)
        };
        let fail = DecodeOutcome {
            iterations,
            parity_ok: false,
        };
        self.finish(pending & failed, fail, payloads, outcomes);
        let pass = DecodeOutcome {
            parity_ok: true,
            ..fail
        };
        self.finish(pending & !failed, pass, payloads, outcomes);
        Ok(())
    }

    /// Writes the hard decisions and the outcome of every block in `set`.
    fn finish(
        &self,
        set: u64,
        outcome: DecodeOutcome,
        payloads: &mut [u8],
        outcomes: &mut [DecodeOutcome],
    ) {
        if set == 0 {
            return;
        }
        let (zc, nb, pb) = (self.p.zc, self.blocks, self.p.payload_bits);
        if self.transpose != Transpose::Bytes {
            let mut outs: [&mut [u8]; 8] = Default::default();
            for ((b, bits), out) in payloads.chunks_exact_mut(pb).enumerate().zip(&mut outs) {
                if set >> b & 1 == 1 {
                    *out = bits;
                    outcomes[b] = outcome;
                }
            }
            for col in 0..pb.div_ceil(zc) {
                let base = col * self.inner.stride + FRONT_PAD;
                let n = zc.min(pb - col * zc);
                let mut cols: [&mut [u8]; 8] = Default::default();
                for (c, out) in cols.iter_mut().zip(&mut outs) {
                    if !out.is_empty() {
                        *c = &mut out[col * zc..col * zc + n];
                    }
                }
                let app = &self.inner.app[base..base + 8 * n];
                match self.transpose {
                    // SAFETY: chosen only where the CPU has AVX-512 BW and VBMI.
                    #[cfg(target_arch = "x86_64")]
                    Transpose::Avx512 => unsafe { x86::hard_decisions8(app, &mut cols) },
                    // SAFETY: chosen only at the AVX2 and AVX-512 levels (SSSE3).
                    #[cfg(target_arch = "x86_64")]
                    Transpose::Sse => unsafe { x86::hard_decisions8_sse(app, &mut cols) },
                    Transpose::Bytes => unreachable!("handled below"),
                }
            }
            return;
        }
        for (b, (bits, out)) in payloads
            .chunks_exact_mut(pb)
            .zip(outcomes.iter_mut())
            .enumerate()
        {
            if set >> b & 1 == 0 {
                continue;
            }
            *out = outcome;
            for (col, bits) in bits.chunks_mut(zc).enumerate() {
                let base = col * self.inner.stride + FRONT_PAD + b;
                let lanes = self.inner.app[base..].iter().step_by(nb);
                for (bit, &v) in bits.iter_mut().zip(lanes) {
                    *bit = (v < 0) as u8;
                }
            }
        }
    }
}

/// `dst[j * nb + b] = llrs[b][start + j]` (block 0 where `b` is past the last block).
fn interleave(llrs: &[&[i8]], nb: usize, start: usize, dst: &mut [i8]) {
    for (b, lane) in (0..nb).map(|b| (b, if b < llrs.len() { b } else { 0 })) {
        let src = &llrs[lane][start..start + dst.len() / nb];
        for (d, &s) in dst[b..].iter_mut().step_by(nb).zip(src) {
            *d = s;
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! Batches of 8 in vectors. AVX-512: 64 positions of 8 blocks (512 bytes) are a
    //! transpose of 8 x 8 qwords (`vpermt2q`, three butterfly stages) and, inside
    //! each qword row, of 8 x 8 bytes (one `vpermb`); the same two steps undo it.
    //! SSE: 16 positions (128 bytes) interleave through three stages of unpacks
    //! (bytes, words, dwords) and come apart through a byte shuffle and three more
    //! (words, dwords, qwords). Positions past the last whole 8 go byte by byte.

    use std::arch::x86_64::*;

    /// The 8 x 8 transpose of the qwords of `r` (`r[i]` qword `k` to `r[k]` qword `i`):
    /// at distance `d` = 4, 2, 1, rows `i` and `i + d` (`i & d == 0`) swap their
    /// off-diagonal `d x d` blocks. Written out, so every index is a constant.
    #[inline(always)]
    unsafe fn transpose_qwords(r: &mut [__m512i; 8]) {
        // lo[k] = k & d == 0 ? x[k] : y[k - d]; hi[k] = k & d == 0 ? x[k + d] : y[k].
        const LO4: [i64; 8] = [0, 1, 2, 3, 8, 9, 10, 11];
        const HI4: [i64; 8] = [4, 5, 6, 7, 12, 13, 14, 15];
        const LO2: [i64; 8] = [0, 1, 8, 9, 4, 5, 12, 13];
        const HI2: [i64; 8] = [2, 3, 10, 11, 6, 7, 14, 15];
        const LO1: [i64; 8] = [0, 8, 2, 10, 4, 12, 6, 14];
        const HI1: [i64; 8] = [1, 9, 3, 11, 5, 13, 7, 15];
        let idx = |t: &[i64; 8]| _mm512_loadu_si512(t.as_ptr() as *const __m512i);
        let swap = |r: &mut [__m512i; 8], i: usize, d: usize, lo: __m512i, hi: __m512i| {
            let (x, y) = (r[i], r[i + d]);
            r[i] = _mm512_permutex2var_epi64(x, lo, y);
            r[i + d] = _mm512_permutex2var_epi64(x, hi, y);
        };
        let (lo, hi) = (idx(&LO4), idx(&HI4));
        swap(r, 0, 4, lo, hi);
        swap(r, 1, 4, lo, hi);
        swap(r, 2, 4, lo, hi);
        swap(r, 3, 4, lo, hi);
        let (lo, hi) = (idx(&LO2), idx(&HI2));
        swap(r, 0, 2, lo, hi);
        swap(r, 1, 2, lo, hi);
        swap(r, 4, 2, lo, hi);
        swap(r, 5, 2, lo, hi);
        let (lo, hi) = (idx(&LO1), idx(&HI1));
        swap(r, 0, 1, lo, hi);
        swap(r, 2, 1, lo, hi);
        swap(r, 4, 1, lo, hi);
        swap(r, 6, 1, lo, hi);
    }

    /// Byte `8 p + b` from byte `8 b + p`: each qword's bytes spread one per qword.
    const BYTE_TRANSPOSE: [u8; 64] = {
        let mut idx = [0u8; 64];
        let mut i = 0;
        while i < 64 {
            idx[i] = (8 * (i % 8) + i / 8) as u8;
            i += 1;
        }
        idx
    };

    #[inline(always)]
    unsafe fn byte_transpose() -> __m512i {
        _mm512_loadu_si512(BYTE_TRANSPOSE.as_ptr() as *const __m512i)
    }

    /// Mask of the first `n` bytes (`n <= 64`).
    fn first(n: usize) -> u64 {
        if n >= 64 {
            u64::MAX
        } else {
            (1u64 << n) - 1
        }
    }

    /// `dst[8 j + b] = src[b][j]`, `dst.len() == 8 * src[b].len()` for every `b`.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VBMI.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(super) unsafe fn interleave8(src: &[&[i8]; 8], dst: &mut [i8]) {
        let len = src[0].len();
        assert!(src.iter().all(|s| s.len() == len) && dst.len() == 8 * len);
        let bytes = byte_transpose();
        for j0 in (0..len).step_by(64) {
            let n = (len - j0).min(64);
            let mut r = [_mm512_setzero_si512(); 8];
            for (r, s) in r.iter_mut().zip(src) {
                // SAFETY: the first `n` bytes from `j0` lie inside `s` (masked load).
                *r = unsafe { _mm512_maskz_loadu_epi8(first(n), s.as_ptr().add(j0)) };
            }
            transpose_qwords(&mut r);
            // Output vector `k` holds positions `j0 + 8 k ..`, all 8 blocks.
            for (k, r) in r.iter().enumerate().take(n.div_ceil(8)) {
                let out = _mm512_permutexvar_epi8(bytes, *r);
                let m = first(8 * (n - 8 * k).min(8));
                // SAFETY: `8 (j0 + 8 k) + 64 <= dst.len()` where the mask is full,
                // and the mask covers only bytes below `dst.len()` otherwise.
                unsafe { _mm512_mask_storeu_epi8(dst.as_mut_ptr().add(8 * (j0 + 8 * k)), m, out) };
            }
        }
    }

    /// `outs[b][j] = (app[8 j + b] < 0)` for every non-empty `outs[b]` (all of one
    /// length `n`, `app.len() == 8 n`).
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VBMI.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(super) unsafe fn hard_decisions8(app: &[i8], outs: &mut [&mut [u8]; 8]) {
        let n = app.len() / 8;
        assert!(app.len() == 8 * n && outs.iter().all(|o| o.is_empty() || o.len() == n));
        let bytes = byte_transpose();
        for j0 in (0..n).step_by(64) {
            let m = (n - j0).min(64);
            let mut r = [_mm512_setzero_si512(); 8];
            for (k, r) in r.iter_mut().enumerate().take(m.div_ceil(8)) {
                let valid = first(8 * (m - 8 * k).min(8));
                // SAFETY: the masked bytes lie inside `app`.
                let v =
                    unsafe { _mm512_maskz_loadu_epi8(valid, app.as_ptr().add(8 * (j0 + 8 * k))) };
                *r = _mm512_permutexvar_epi8(bytes, v);
            }
            transpose_qwords(&mut r);
            for (r, out) in r.iter().zip(outs.iter_mut()) {
                if out.is_empty() {
                    continue;
                }
                let bits = _mm512_maskz_set1_epi8(_mm512_movepi8_mask(*r), 1);
                // SAFETY: the first `m` bytes from `j0` lie inside `out`.
                unsafe {
                    _mm512_mask_storeu_epi8(out.as_mut_ptr().add(j0) as *mut i8, first(m), bits)
                };
            }
        }
    }

    /// [`interleave8`] in SSE2 (every x86-64 CPU): `dst[8 j + b] = src[b][j]`.
    pub(super) fn interleave8_sse(src: &[&[i8]; 8], dst: &mut [i8]) {
        let len = src[0].len();
        assert!(src.iter().all(|s| s.len() == len) && dst.len() == 8 * len);
        // Positions `j0..j0 + 16` (`half`: only `j0..j0 + 8`, the upper lanes zero).
        let chunk = |j0: usize, half: bool, dst: &mut [i8]| {
            // SAFETY: SSE2 is part of x86-64; 16 (or 8) bytes from `j0` lie inside
            // each source, 128 (or 64) from `8 j0` inside `dst`.
            unsafe {
                let l = |b: usize| {
                    let p = src[b].as_ptr().add(j0);
                    if half {
                        _mm_loadl_epi64(p as *const __m128i)
                    } else {
                        _mm_loadu_si128(p as *const __m128i)
                    }
                };
                let (x0, x1, x2, x3) = (l(0), l(1), l(2), l(3));
                let (x4, x5, x6, x7) = (l(4), l(5), l(6), l(7));
                // Pairs of blocks per position, then fours, then all eight.
                let pairs_lo = [
                    _mm_unpacklo_epi8(x0, x1),
                    _mm_unpacklo_epi8(x2, x3),
                    _mm_unpacklo_epi8(x4, x5),
                    _mm_unpacklo_epi8(x6, x7),
                ];
                let pairs_hi = [
                    _mm_unpackhi_epi8(x0, x1),
                    _mm_unpackhi_epi8(x2, x3),
                    _mm_unpackhi_epi8(x4, x5),
                    _mm_unpackhi_epi8(x6, x7),
                ];
                let halves: &[[__m128i; 4]] = if half {
                    &[pairs_lo]
                } else {
                    &[pairs_lo, pairs_hi]
                };
                let out = dst.as_mut_ptr() as *mut __m128i;
                for (h, p) in halves.iter().enumerate() {
                    // Positions `8 h + 4 q ..` of blocks 0-3 and of blocks 4-7.
                    for q in 0..2 {
                        let (a, b) = if q == 0 {
                            (
                                _mm_unpacklo_epi16(p[0], p[1]),
                                _mm_unpacklo_epi16(p[2], p[3]),
                            )
                        } else {
                            (
                                _mm_unpackhi_epi16(p[0], p[1]),
                                _mm_unpackhi_epi16(p[2], p[3]),
                            )
                        };
                        let at = 4 * h + 2 * q;
                        _mm_storeu_si128(out.add(at), _mm_unpacklo_epi32(a, b));
                        _mm_storeu_si128(out.add(at + 1), _mm_unpackhi_epi32(a, b));
                    }
                }
            }
        };
        let mut j0 = 0;
        while j0 + 16 <= len {
            chunk(j0, false, &mut dst[8 * j0..8 * j0 + 128]);
            j0 += 16;
        }
        if j0 + 8 <= len {
            chunk(j0, true, &mut dst[8 * j0..8 * j0 + 64]);
            j0 += 8;
        }
        for j in j0..len {
            for (b, s) in src.iter().enumerate() {
                dst[8 * j + b] = s[j];
            }
        }
    }

    /// [`hard_decisions8`] with SSE2 and SSSE3: `outs[b][j] = (app[8 j + b] < 0)`.
    ///
    /// # Safety
    /// The CPU must support SSSE3.
    #[target_feature(enable = "ssse3")]
    pub(super) unsafe fn hard_decisions8_sse(app: &[i8], outs: &mut [&mut [u8]; 8]) {
        let n = app.len() / 8;
        assert!(app.len() == 8 * n && outs.iter().all(|o| o.is_empty() || o.len() == n));
        // Each position pair's 16 bytes to block-major pairs: block `b`'s two bytes
        // at `2 b`.
        let pairs = _mm_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
        let (zero, one) = (_mm_setzero_si128(), _mm_set1_epi8(1));
        let bits = |v: __m128i| _mm_and_si128(_mm_cmplt_epi8(v, zero), one);
        // Blocks `0..8` of positions `j0..j0 + 8` as the low qword of `[b]`.
        let eight = |j0: usize| -> [__m128i; 8] {
            // SAFETY: the caller checked that 64 bytes from `8 j0` lie inside `app`.
            // (Plain calls, not `std::array::from_fn`, whose closures are compiled
            // without this function's target features.)
            let load = |i: usize| unsafe {
                let p = app.as_ptr().add(8 * j0 + 16 * i) as *const __m128i;
                _mm_shuffle_epi8(_mm_loadu_si128(p), pairs)
            };
            let s = [load(0), load(1), load(2), load(3)];
            // Blocks 0-3 / 4-7, positions 0-3 and 4-7, four bytes each.
            let (a0, a1) = (
                _mm_unpacklo_epi16(s[0], s[1]),
                _mm_unpackhi_epi16(s[0], s[1]),
            );
            let (b0, b1) = (
                _mm_unpacklo_epi16(s[2], s[3]),
                _mm_unpackhi_epi16(s[2], s[3]),
            );
            // Two blocks per vector, eight positions each.
            let v = [
                _mm_unpacklo_epi32(a0, b0),
                _mm_unpackhi_epi32(a0, b0),
                _mm_unpacklo_epi32(a1, b1),
                _mm_unpackhi_epi32(a1, b1),
            ];
            let high = |x: __m128i| _mm_unpackhi_epi64(x, x);
            [
                v[0],
                high(v[0]),
                v[1],
                high(v[1]),
                v[2],
                high(v[2]),
                v[3],
                high(v[3]),
            ]
        };
        let mut j0 = 0;
        while j0 + 16 <= n {
            let (lo, hi) = (eight(j0), eight(j0 + 8));
            for (b, out) in outs.iter_mut().enumerate() {
                if !out.is_empty() {
                    let v = bits(_mm_unpacklo_epi64(lo[b], hi[b]));
                    _mm_storeu_si128(out.as_mut_ptr().add(j0) as *mut __m128i, v);
                }
            }
            j0 += 16;
        }
        if j0 + 8 <= n {
            let lo = eight(j0);
            for (b, out) in outs.iter_mut().enumerate() {
                if !out.is_empty() {
                    _mm_storel_epi64(out.as_mut_ptr().add(j0) as *mut __m128i, bits(lo[b]));
                }
            }
            j0 += 8;
        }
        for j in j0..n {
            for (b, out) in outs.iter_mut().enumerate() {
                if !out.is_empty() {
                    out[j] = (app[8 * j + b] < 0) as u8;
                }
            }
        }
    }
}
