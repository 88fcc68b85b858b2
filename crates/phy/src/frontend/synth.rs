//! The transmit side's batched path: one inverse [`BatchFft`] per group of 16
//! antennas, then a separate pass that scales, rounds and saturates each row of
//! 16 antennas to ci16 words and transposes the words back to per-antenna time
//! order, the cyclic prefix by second stores of the blocks it repeats.
//!
//! The quantisation runs on the FFT's rows (16 antennas of one sample), before the
//! transpose: one 16 x 16 transpose of 32-bit ci16 words per 16 samples instead
//! of one for re and one for im. (Quantising after transposes of float rows, fused
//! into the transform's last pass, measured 1.2x slower than rustfft per antenna:
//! that per-sample quantise did not vectorise.) The input side transposes the
//! precoder's interleaved `[antenna][subcarrier]` rows: 8 complex subcarriers of 16
//! antennas are one 16 x 16 block of floats whose transpose is the re and im rows
//! of those subcarriers, alternating. Where a sixteenth of the input (a block of
//! the transform's first pass) holds no data subcarrier, the transform takes it as
//! zero without reading it, so it is not zeroed either (6 of 16 blocks in the
//! 64x16 downlink: 768 of its 848 null rows; the ifft stage 4-8% faster,
//! docs/BENCHMARKS.md, PHY, session 40).

use radiohost_iq::{Cf32, Ci16};

use crate::config::FrameConfig;
use crate::fft::lanes::{each_lane, Lanes, Vector};
use crate::fft::{dispatch_lanes, BatchFft, Row, LANES};
use crate::ofdm::{bin_runs, ci16_level, data_bin, FULL_SCALE};
use crate::simd::Isa;

use super::{load, store};

/// The batched inverse of a power-of-two size and the row maps around it.
#[derive(Debug)]
pub(super) struct BatchedSynth {
    fft: BatchFft,
    /// Input row ([`BatchFft::input_row`]) of every data subcarrier's bin.
    data_rows: Vec<usize>,
    /// Input rows of the other bins (zero) outside the blocks of `zero_blocks`.
    null_rows: Vec<usize>,
    /// The transform's input blocks that hold no data subcarrier, which it takes
    /// as zero without reading ([`BatchFft::run_lanes_skipping`]).
    zero_blocks: u16,
    /// Result row ([`BatchFft::row`]) of every time sample.
    time_rows: Vec<usize>,
    cp_len: usize,
    /// Highest instruction set used (tests force each build).
    pub(super) isa: Isa,
}

impl BatchedSynth {
    /// `None` where the batched FFT cannot do the size (the per-antenna path runs).
    pub(super) fn new(cfg: &FrameConfig) -> Option<Self> {
        let n = cfg.fft_size;
        if n < LANES {
            return None;
        }
        let fft = BatchFft::new(n).ok()?;
        let (start, num) = (cfg.data_start, cfg.data_num);
        let data_bins: Vec<usize> = (0..num).map(|i| data_bin(n, start, i)).collect();
        // Bit `m`: input block `m` (bins `m b..(m + 1) b`) holds no data.
        let block = fft.skippable_block();
        let zero_blocks = block.map_or(0, |b| {
            !data_bins.iter().fold(0u16, |used, &k| used | 1 << (k / b))
        });
        let in_zero_block = |k: usize| block.is_some_and(|b| zero_blocks & 1 << (k / b) != 0);
        let null_rows = [(0, start), (start + num, n)]
            .into_iter()
            .flat_map(|(a, b)| bin_runs(n, a, b))
            .flatten()
            .filter(|&k| !in_zero_block(k))
            .map(|k| fft.input_row(k))
            .collect();
        Some(Self {
            data_rows: data_bins.iter().map(|&k| fft.input_row(k)).collect(),
            null_rows,
            zero_blocks,
            time_rows: (0..n).map(|t| fft.row(t)).collect(),
            cp_len: cfg.cp_len,
            fft,
            isa: Isa::Avx512,
        })
    }

    /// As [`super::Synthesizer::antennas_ci16`]: `data` is `antennas` rows of
    /// `data_num` subcarriers; antenna `m`'s symbol (prefix first) goes to
    /// `out[m * out_stride + offset..]`. The caller checked the lengths.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn antennas_ci16(
        &mut self,
        data: &[Cf32],
        antennas: usize,
        gain: f32,
        out: &mut [Ci16],
        out_stride: usize,
        offset: usize,
    ) {
        let scale = gain / (self.fft.size() as f32).sqrt() * FULL_SCALE;
        let job = &mut SynthJob {
            b: self,
            data,
            antennas,
            scale,
            out,
            out_stride,
            offset,
        };
        let isa = Isa::detect().min(job.b.isa);
        dispatch_lanes!(isa, fn run(job: &mut SynthJob<'_>) => synth_batch)
    }
}

/// One batched synthesis call.
struct SynthJob<'a> {
    b: &'a mut BatchedSynth,
    data: &'a [Cf32],
    antennas: usize,
    /// `gain / sqrt(N)` times ci16 full scale.
    scale: f32,
    out: &'a mut [Ci16],
    out_stride: usize,
    offset: usize,
}

/// Per group of 16 antennas: data subcarriers into the transform's rows, the
/// inverse transform, then [`Quantise::ci16_words`] per row and the words back
/// to each antenna's samples.
#[inline(always)]
fn synth_batch<V: Quantise>(job: &mut SynthJob<'_>) {
    for m0 in (0..job.antennas).step_by(LANES) {
        // A whole group with its lane count a constant: `synth_group`'s per-lane
        // tests fold away and its 16-row arrays stay in registers (before, they
        // went through the stack every 16 samples, each lane tested against the
        // count).
        if job.antennas - m0 >= LANES {
            synth_group::<V, true>(job, m0, LANES);
        } else {
            synth_group::<V, false>(job, m0, job.antennas - m0);
        }
    }
}

/// [`synth_batch`] for the group of antennas `m0..m0 + valid`; `WHOLE`: the
/// group has all [`LANES`] antennas (`valid` is then that constant).
#[inline(always)]
fn synth_group<V: Quantise, const WHOLE: bool>(job: &mut SynthJob<'_>, m0: usize, valid: usize) {
    let valid = if WHOLE { LANES } else { valid };
    let b = &mut *job.b;
    let n = b.fft.size();
    let d = b.data_rows.len();
    let cp = b.cp_len;
    let scale = V::splat(job.scale);
    let (xr, xi) = b.fft.input_mut();
    for &k in &b.null_rows {
        xr[k] = Row::default();
        xi[k] = Row::default();
    }
    // 8 subcarriers of 16 antennas (16 floats each) per transpose.
    for i0 in (0..d).step_by(LANES / 2) {
        let count = (LANES / 2).min(d - i0);
        let mut rows = each_lane!(|a| if a >= valid {
            V::zero()
        } else if count == LANES / 2 {
            let src = &job.data[(m0 + a) * d + i0..][..LANES / 2];
            // SAFETY: `src` holds 8 complex = 16 f32.
            unsafe { V::load(src.as_ptr().cast()) }
        } else {
            let mut pad = [Cf32::default(); LANES / 2];
            pad[..count].copy_from_slice(&job.data[(m0 + a) * d + i0..][..count]);
            // SAFETY: as above.
            unsafe { V::load(pad.as_ptr().cast()) }
        });
        V::transpose(&mut rows);
        for (l, &k) in b.data_rows[i0..i0 + count].iter().enumerate() {
            store(rows[2 * l], &mut xr[k]);
            store(rows[2 * l + 1], &mut xi[k]);
        }
    }
    let side = b.fft.run_lanes_skipping::<V>(true, b.zero_blocks);
    let (fr, fi) = b.fft.buffers(side);
    // Every antenna's symbol, prefix first, lies inside `out` when the last one's
    // does (the caller checked the lengths): the stores below need no checks.
    let first = |a: usize| (m0 + a) * job.out_stride + job.offset;
    assert!(
        first(valid - 1) + cp + n <= job.out.len(),
        "synthesiser output"
    );
    let out = job.out.as_mut_ptr();
    // Where each antenna's symbol body starts (lanes past `valid` are never used).
    let bodies: [*mut Ci16; LANES] = each_lane!(|a| out.wrapping_add(first(a) + cp));
    // The prefix repeats body samples `tail..n`; the blocks of 16 from `whole` on
    // lie wholly inside that run and are stored twice.
    let tail = n - cp;
    let whole = tail.next_multiple_of(LANES);
    for t0 in (0..n).step_by(LANES) {
        let rows: &[usize; LANES] = b.time_rows[t0..t0 + LANES]
            .try_into()
            .expect("whole rows of samples");
        let mut words = each_lane!(|i| {
            let k = rows[i];
            V::ci16_words(load::<V>(&fr[k]).mul(scale), load::<V>(&fi[k]).mul(scale))
        });
        V::transpose(&mut words);
        let in_prefix = t0 >= whole;
        each_lane!(|a| if a < valid {
            // SAFETY: samples `t0..t0 + 16` of antenna `a`'s body, inside `out`
            // (asserted above); 16 ci16 = 16 x 32 bits.
            unsafe { words[a].store(bodies[a].add(t0).cast()) };
            if in_prefix {
                // SAFETY: prefix samples `t0 - tail..t0 - tail + 16`, at most `cp`,
                // which precede the body.
                unsafe { words[a].store(bodies[a].sub(cp).add(t0 - tail).cast()) };
            }
        });
    }
    // Prefix samples before the first whole block (`cp` not a multiple of 16).
    if whole > tail {
        for a in 0..valid {
            let at = first(a);
            job.out.copy_within(at + cp + tail..at + cp + whole, at);
        }
    }
}

/// Rounding to ci16 on top of [`Lanes`].
pub(crate) trait Quantise: Lanes {
    /// `re` and `im` (ci16 steps) quantised by [`ci16_level`], as `Ci16` bit
    /// patterns (re in the low half-word).
    fn ci16_words(re: Self, im: Self) -> Self;
}

impl<const FMA: bool> Quantise for crate::fft::lanes::Portable<FMA> {
    #[inline(always)]
    fn ci16_words(re: Self, im: Self) -> Self {
        let (re, im) = (re.to_array(), im.to_array());
        let q = |v: f32| ci16_level(v) as u16 as u32;
        let words: [f32; LANES] =
            std::array::from_fn(|l| f32::from_bits(q(re[l]) | q(im[l]) << 16));
        // SAFETY: `words` holds 16 f32.
        unsafe { Self::load(words.as_ptr()) }
    }
}

#[cfg(target_arch = "x86_64")]
impl Quantise for crate::fft::lanes::Avx2 {
    #[inline(always)]
    fn ci16_words(re: Self, im: Self) -> Self {
        use std::arch::x86_64::*;
        let (re, im) = (re.halves(), im.halves());
        let mut words = re;
        // SAFETY: `Avx2` values exist only in AVX2 builds (see its type).
        unsafe {
            let (lo, hi) = (_mm256_set1_ps(i16::MIN as f32), _mm256_set1_ps(FULL_SCALE));
            for h in 0..2 {
                // Minimum first: NaN becomes the top (as `ci16_level`).
                let re = _mm256_max_ps(_mm256_min_ps(re[h], hi), lo);
                let im = _mm256_max_ps(_mm256_min_ps(im[h], hi), lo);
                // Rounds by MXCSR: to nearest, ties to even.
                let (r, i) = (_mm256_cvtps_epi32(re), _mm256_cvtps_epi32(im));
                let w = _mm256_blend_epi16::<0xaa>(r, _mm256_slli_epi32::<16>(i));
                words[h] = _mm256_castsi256_ps(w);
            }
        }
        Self::from_halves(words)
    }
}

#[cfg(target_arch = "x86_64")]
impl Quantise for crate::fft::lanes::Avx512 {
    #[inline(always)]
    fn ci16_words(re: Self, im: Self) -> Self {
        use std::arch::x86_64::*;
        let (re, im) = (re.to_array(), im.to_array());
        // SAFETY: `Avx512` values exist only in AVX-512 builds (see its type); the
        // arrays hold 16 f32. The round trip through them compiles away.
        unsafe {
            let (lo, hi) = (_mm512_set1_ps(i16::MIN as f32), _mm512_set1_ps(FULL_SCALE));
            // Minimum first: NaN becomes the top (as `ci16_level`).
            let re = _mm512_max_ps(_mm512_min_ps(_mm512_loadu_ps(re.as_ptr()), hi), lo);
            let im = _mm512_max_ps(_mm512_min_ps(_mm512_loadu_ps(im.as_ptr()), hi), lo);
            // Rounds by MXCSR: to nearest, ties to even.
            let (r, i) = (_mm512_cvtps_epi32(re), _mm512_cvtps_epi32(im));
            let w = _mm512_mask_blend_epi16(0xaaaa_aaaa, r, _mm512_slli_epi32::<16>(i));
            let mut out = Row::default();
            _mm512_storeu_ps(out.0.as_mut_ptr(), _mm512_castsi512_ps(w));
            Self::load(out.0.as_ptr())
        }
    }
}
