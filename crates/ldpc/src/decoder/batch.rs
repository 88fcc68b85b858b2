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
    /// Batches of 8 at the AVX-512 level on a CPU with VBMI: the interleaving in
    /// vectors (`x86::interleave8`); otherwise byte by byte.
    vectors: bool,
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
        let vectors = blocks == 8
            && inner.level == super::SimdLevel::Avx512
            && std::is_x86_feature_detected!("avx512vbmi");
        #[cfg(not(target_arch = "x86_64"))]
        let vectors = false;
        Ok(BatchDecoder {
            inner,
            p,
            blocks,
            vectors,
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
        if n == 0 || n > nb {
            return Err(LdpcError::LengthMismatch {
                what: "blocks of a batch",
                expected: nb,
                got: n,
            });
        }
        for l in llrs {
            check_len("LLR input", self.p.tx_bits, l.len())?;
        }
        check_len("payload output", n * pb, payloads.len())?;
        check_len("outcomes", n, outcomes.len())?;
        if let Some(e) = &self.inner.config_error {
            return Err(e.clone());
        }
        let vectors = self.vectors;
        self.inner.place_channel(|s, dst| {
            let start = s / nb;
            #[cfg(target_arch = "x86_64")]
            if vectors {
                let mut src = [&[][..]; 8];
                for (b, src) in src.iter_mut().enumerate() {
                    let lane = if b < llrs.len() { b } else { 0 };
                    *src = &llrs[lane][start..start + dst.len() / 8];
                }
                // SAFETY: `vectors` is set only where the CPU has AVX-512 BW and VBMI.
                unsafe { x86::interleave8(&src, dst) };
                return;
            }
            interleave(llrs, nb, start, dst)
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
        #[cfg(target_arch = "x86_64")]
        if self.vectors {
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
                // SAFETY: `vectors` is set only where the CPU has AVX-512 BW and VBMI.
                unsafe { x86::hard_decisions8(&self.inner.app[base..base + 8 * n], &mut cols) };
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
    //! Batches of 8 in vectors: 64 positions of 8 blocks (512 bytes) are a transpose
    //! of 8 x 8 qwords (`vpermt2q`, three butterfly stages) and, inside each qword
    //! row, of 8 x 8 bytes (one `vpermb`); the same two steps undo it.

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
}
