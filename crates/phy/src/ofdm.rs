//! OFDM: batched FFT/IFFT planned once, cyclic-prefix removal and insertion, and the
//! mapping between FFT bins and data subcarriers.
//!
//! Transforms are unnormalised (rustfft's convention); the transmitter applies
//! `1/sqrt(N)` once so that a unit-energy subcarrier gives unit-energy time samples
//! per subcarrier and white noise keeps its variance through the receiver's FFT up
//! to the known factor `N`.

use std::sync::Arc;

use radiohost_iq::{Cf32, Ci16};
use rustfft::{Fft, FftPlanner};

use crate::simd::{dispatch, Isa};

/// Forward and inverse transforms of one size with their scratch, planned once.
pub struct OfdmFft {
    size: usize,
    forward: Arc<dyn Fft<f32>>,
    inverse: Arc<dyn Fft<f32>>,
    scratch: Vec<Cf32>,
}

impl std::fmt::Debug for OfdmFft {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OfdmFft").field("size", &self.size).finish()
    }
}

impl OfdmFft {
    /// Plan both directions for `size`-point transforms (any size > 0).
    pub fn new(size: usize) -> Self {
        let mut planner = FftPlanner::<f32>::new();
        let forward = planner.plan_fft_forward(size);
        let inverse = planner.plan_fft_inverse(size);
        let scratch_len = forward
            .get_inplace_scratch_len()
            .max(inverse.get_inplace_scratch_len())
            .max(inverse.get_immutable_scratch_len());
        Self {
            size,
            forward,
            inverse,
            scratch: vec![Cf32::default(); scratch_len],
        }
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// In-place forward transform of every `size`-long chunk of `data`.
    ///
    /// # Panics
    /// If `data.len()` is not a multiple of the size (a caller bug).
    pub fn forward_batch(&mut self, data: &mut [Cf32]) {
        assert_eq!(
            data.len() % self.size,
            0,
            "forward_batch: partial transform"
        );
        self.forward.process_with_scratch(data, &mut self.scratch);
    }

    /// In-place inverse transform (unnormalised) of every `size`-long chunk of `data`.
    ///
    /// # Panics
    /// If `data.len()` is not a multiple of the size (a caller bug).
    pub fn inverse_batch(&mut self, data: &mut [Cf32]) {
        assert_eq!(
            data.len() % self.size,
            0,
            "inverse_batch: partial transform"
        );
        self.inverse.process_with_scratch(data, &mut self.scratch);
    }

    /// Inverse transform (unnormalised) of `input` into `output`, one transform of
    /// the size each; `input` is left as it was, so a spectrum whose unused bins
    /// are zero stays ready for the next symbol.
    ///
    /// # Panics
    /// If either is not `size` long (a caller bug).
    pub fn inverse_into(&mut self, input: &[Cf32], output: &mut [Cf32]) {
        assert!(
            input.len() == self.size && output.len() == self.size,
            "inverse_into: one transform of {} points",
            self.size
        );
        self.inverse
            .process_immutable_with_scratch(input, output, &mut self.scratch);
    }
}

/// Drop the cyclic prefix of one received symbol (`cp_len + N` ci16 samples) and
/// convert the remaining `N` samples into `out`.
///
/// # Panics
/// If `symbol.len() != cp_len + out.len()` (a caller bug).
pub fn remove_cp_ci16(symbol: &[Ci16], cp_len: usize, out: &mut [Cf32]) {
    assert_eq!(
        symbol.len(),
        cp_len + out.len(),
        "remove_cp: length mismatch"
    );
    let src = &symbol[cp_len..];
    dispatch!(Isa::detect(), fn run(src: &[Ci16], out: &mut [Cf32]) => ci16_to_cf32)
}

#[inline(always)]
fn ci16_to_cf32<const FMA: bool>(src: &[Ci16], out: &mut [Cf32]) {
    const SCALE: f32 = 1.0 / i16::MAX as f32;
    for (o, s) in out.iter_mut().zip(src) {
        *o = Cf32::new(s.re as f32 * SCALE, s.im as f32 * SCALE);
    }
}

/// ci16 full scale: the transmit quantiser maps 1.0 to this many steps.
pub(crate) const FULL_SCALE: f32 = i16::MAX as f32;

/// The transmit quantiser's rule for one value in ci16 steps: round to nearest,
/// ties to even (what the vector conversion does under the default rounding
/// mode), then saturate to i16; NaN gives `i16::MAX` (a vector minimum returns
/// its bound for NaN). `Ci16::from_cf32` differs only at ties and NaN.
#[inline(always)]
pub(crate) fn ci16_level(v: f32) -> i16 {
    // `x + 1.5 * 2^23 - 1.5 * 2^23` rounds to nearest even for |x| < 2^22 without
    // a library call (a baseline x86-64 build lacks SSE4.1's `roundps`).
    const MAGIC: f32 = 12_582_912.0;
    let c = v.min(FULL_SCALE).max(i16::MIN as f32);
    ((c + MAGIC) - MAGIC) as i16
}

/// [`add_cp`] and the quantiser in one pass: `out` (`cp_len + body.len()`) is
/// `body` with its last `cp_len` samples in front, each part
/// [`ci16_level`]`(v * (gain * FULL_SCALE))`: one multiplication per value.
///
/// # Panics
/// If the lengths do not match (a caller bug).
pub fn add_cp_ci16(body: &[Cf32], cp_len: usize, gain: f32, out: &mut [Ci16]) {
    let n = body.len();
    assert_eq!(out.len(), cp_len + n, "add_cp_ci16: length mismatch");
    assert!(cp_len <= n, "add_cp_ci16: prefix longer than the symbol");
    let scale = gain * FULL_SCALE;
    let dst = &mut out[cp_len..];
    dispatch!(Isa::detect(), fn run(body: &[Cf32], scale: f32, dst: &mut [Ci16]) => scale_quantise_body);
    // The prefix's samples are the same products, so the same words.
    out.copy_within(n..n + cp_len, 0);
}

#[inline(always)]
fn scale_quantise_body<const FMA: bool>(src: &[Cf32], scale: f32, dst: &mut [Ci16]) {
    // `dispatch!` builds the FMA body only with AVX2 or AVX-512 enabled. LLVM
    // turns the saturating float -> i16 casts into one scalar conversion per
    // sample (measured: 5% of a 16x4 station run), so those builds take AVX2
    // intrinsics.
    #[cfg(target_arch = "x86_64")]
    if FMA {
        // SAFETY: FMA builds run only where the CPU has AVX2 (above).
        let done = unsafe { scale_quantise_avx2(src, scale, dst) };
        return scale_quantise_portable(&src[done..], scale, &mut dst[done..]);
    }
    scale_quantise_portable(src, scale, dst)
}

/// [`ci16_level`]`(v * scale)` of every value.
#[inline(always)]
fn scale_quantise_portable(src: &[Cf32], scale: f32, dst: &mut [Ci16]) {
    for (o, s) in dst.iter_mut().zip(src) {
        *o = Ci16::new(ci16_level(s.re * scale), ci16_level(s.im * scale));
    }
}

/// [`scale_quantise_portable`] of the first multiple of 8 samples, bit for bit:
/// the conversion rounds to nearest even; the minimum saturates the top (and
/// turns NaN into its bound), the packing to i16 the bottom. Returns the samples
/// done.
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn scale_quantise_avx2(src: &[Cf32], scale: f32, dst: &mut [Ci16]) -> usize {
    use std::arch::x86_64::*;
    let done = src.len().min(dst.len()) / 8 * 8;
    let (k, hi) = (_mm256_set1_ps(scale), _mm256_set1_ps(FULL_SCALE));
    let q = |v: __m256| _mm256_cvtps_epi32(_mm256_min_ps(_mm256_mul_ps(v, k), hi));
    for i in (0..done).step_by(8) {
        // SAFETY: samples `i .. i + 8` lie in both slices (`done` is within both),
        // 16 floats of input and 16 i16 of output.
        unsafe {
            let p = src.as_ptr().add(i).cast::<f32>();
            let (a, b) = (_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)));
            // packs interleaves 128-bit halves; the permute restores sample order.
            let words = _mm256_permute4x64_epi64::<0xD8>(_mm256_packs_epi32(q(a), q(b)));
            _mm256_storeu_si256(dst.as_mut_ptr().add(i).cast(), words);
        }
    }
    done
}

/// Drop the cyclic prefix of one cf32 symbol into `out`.
///
/// # Panics
/// If `symbol.len() != cp_len + out.len()` (a caller bug).
pub fn remove_cp(symbol: &[Cf32], cp_len: usize, out: &mut [Cf32]) {
    assert_eq!(
        symbol.len(),
        cp_len + out.len(),
        "remove_cp: length mismatch"
    );
    out.copy_from_slice(&symbol[cp_len..]);
}

/// Write `body` with its cyclic prefix (its last `cp_len` samples) in front into
/// `out` (`cp_len + body.len()`), multiplying by `gain`.
///
/// # Panics
/// If the lengths do not match (a caller bug).
pub fn add_cp(body: &[Cf32], cp_len: usize, gain: f32, out: &mut [Cf32]) {
    let n = body.len();
    assert_eq!(out.len(), cp_len + n, "add_cp: length mismatch");
    assert!(cp_len <= n, "add_cp: prefix longer than the symbol");
    let (prefix, rest) = out.split_at_mut(cp_len);
    scale_into(&body[n - cp_len..], gain, prefix);
    scale_into(body, gain, rest);
}

fn scale_into(src: &[Cf32], gain: f32, dst: &mut [Cf32]) {
    dispatch!(Isa::detect(), fn run(src: &[Cf32], gain: f32, dst: &mut [Cf32]) => scale_body)
}

#[inline(always)]
fn scale_body<const FMA: bool>(src: &[Cf32], gain: f32, dst: &mut [Cf32]) {
    for (o, s) in dst.iter_mut().zip(src) {
        *o = s * gain;
    }
}

/// The rustfft bins (DC at 0) of the natural-order subcarriers `start .. end` (DC at
/// `n / 2`): at most two contiguous runs, so loops over them need no modulo.
pub fn bin_runs(n: usize, start: usize, end: usize) -> [std::ops::Range<usize>; 2] {
    let (a, b) = (start + n / 2, end + n / 2);
    if b <= n {
        [a..b, 0..0]
    } else if a >= n {
        [a - n..b - n, 0..0]
    } else {
        [a..n, 0..b - n]
    }
}

/// FFT bin of data subcarrier `i` when data subcarriers occupy bins
/// `data_start .. data_start + data_num` counted in "natural" order with DC at
/// `fft_size / 2` (the Agora convention of `ofdm_data_start`). Returns the rustfft bin
/// (DC at 0).
pub fn data_bin(fft_size: usize, data_start: usize, i: usize) -> usize {
    (data_start + i + fft_size / 2) % fft_size
}

/// Gather the data subcarriers of one frequency-domain symbol.
pub fn gather_data(freq: &[Cf32], data_start: usize, out: &mut [Cf32]) {
    let mut o = 0;
    for run in bin_runs(freq.len(), data_start, data_start + out.len()) {
        let len = run.len();
        out[o..o + len].copy_from_slice(&freq[run]);
        o += len;
    }
}

/// Scatter data subcarriers into a zeroed frequency-domain symbol.
pub fn scatter_data(data: &[Cf32], data_start: usize, freq: &mut [Cf32]) {
    let runs = bin_runs(freq.len(), data_start, data_start + data.len());
    // Zero only the bins between the runs: the data overwrites the rest, and each
    // store pass over a symbol's bins costs as much as the copy.
    let mut by_bin = runs.clone();
    by_bin.sort_by_key(|r| r.start);
    let mut at = 0;
    for r in by_bin.iter().filter(|r| !r.is_empty()) {
        freq[at..r.start].fill(Cf32::default());
        at = r.end;
    }
    freq[at..].fill(Cf32::default());
    let mut o = 0;
    for run in runs {
        let len = run.len();
        freq[run].copy_from_slice(&data[o..o + len]);
        o += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::f64::consts::PI;

    fn naive_dft(x: &[Cf32], sign: f64) -> Vec<Cf32> {
        let n = x.len();
        (0..n)
            .map(|k| {
                let (mut re, mut im) = (0f64, 0f64);
                for (t, v) in x.iter().enumerate() {
                    let a = sign * 2.0 * PI * ((k * t) % n) as f64 / n as f64;
                    re += v.re as f64 * a.cos() - v.im as f64 * a.sin();
                    im += v.re as f64 * a.sin() + v.im as f64 * a.cos();
                }
                Cf32::new(re as f32, im as f32)
            })
            .collect()
    }

    #[test]
    fn batches_match_naive_dft() {
        for n in [64usize, 256, 300] {
            let batch = 3;
            let x: Vec<Cf32> = (0..n * batch)
                .map(|i| Cf32::new(((i * 7) % 13) as f32 - 6.0, ((i * 5) % 11) as f32 - 5.0))
                .collect();
            let mut fft = OfdmFft::new(n);
            let mut f = x.clone();
            fft.forward_batch(&mut f);
            let mut inv = x.clone();
            fft.inverse_batch(&mut inv);
            for b in 0..batch {
                let chunk = &x[b * n..(b + 1) * n];
                for (sign, got) in [(-1.0, &f), (1.0, &inv)] {
                    let expect = naive_dft(chunk, sign);
                    let err: f32 = expect
                        .iter()
                        .zip(&got[b * n..(b + 1) * n])
                        .map(|(a, b)| (a - b).norm())
                        .fold(0.0, f32::max);
                    assert!(err < 1e-3 * n as f32, "n={n} err={err}");
                }
            }
        }
    }

    #[test]
    fn cp_roundtrip_and_bins() {
        let body: Vec<Cf32> = (0..16).map(|i| Cf32::new(i as f32, 0.0)).collect();
        let mut sym = vec![Cf32::default(); 20];
        add_cp(&body, 4, 2.0, &mut sym);
        assert_eq!(sym[0], Cf32::new(24.0, 0.0));
        let mut back = vec![Cf32::default(); 16];
        remove_cp(&sym, 4, &mut back);
        assert_eq!(back[3], Cf32::new(6.0, 0.0));
        let ci: Vec<Ci16> = sym.iter().map(|s| Ci16::new(s.re as i16, 1)).collect();
        remove_cp_ci16(&ci, 4, &mut back);
        assert!((back[1].re - 2.0 / 32767.0).abs() < 1e-9);
        assert_eq!(data_bin(16, 2, 0), 10);
        assert_eq!(data_bin(16, 2, 6), 0);
        // Into a dirty spectrum, one run and wrapping past the last bin (two runs):
        // the data lands where gather reads it, every other bin is cleared.
        for (num, start) in [(4, 0), (7, 5)] {
            let d: Vec<Cf32> = (1..=num).map(|i| Cf32::new(i as f32, 0.0)).collect();
            let mut freq = vec![Cf32::new(9.0, 9.0); 16];
            scatter_data(&d, start, &mut freq);
            let mut g = vec![Cf32::default(); num];
            gather_data(&freq, start, &mut g);
            assert_eq!(g, d);
            assert_eq!(freq.iter().filter(|v| v.norm() > 0.0).count(), num);
        }
        // Runs cover exactly the modulo mapping, wrapping or not.
        for (n, start, num) in [
            (16, 2, 6),
            (16, 6, 4),
            (16, 0, 16),
            (16, 9, 7),
            (2048, 424, 1200),
        ] {
            let got: Vec<usize> = bin_runs(n, start, start + num)
                .into_iter()
                .flatten()
                .collect();
            let want: Vec<usize> = (0..num).map(|i| data_bin(n, start, i)).collect();
            assert_eq!(got, want, "n {n} start {start} num {num}");
        }
    }

    #[test]
    fn quantiser_rounds_ties_to_even_and_saturates() {
        let cases = [
            (0.5, 0),
            (1.5, 2),
            (2.5, 2),
            (-0.5, 0),
            (-1.5, -2),
            (0.49, 0),
            (-2.51, -3),
            (32766.5, 32766),
            (32767.4, 32767),
            (32767.5, 32767),
            (1e12, 32767),
            (f32::INFINITY, 32767),
            (f32::NAN, 32767),
            (-32768.4, -32768),
            (-32768.6, -32768),
            (-1e12, -32768),
            (f32::NEG_INFINITY, -32768),
        ];
        for (v, want) in cases {
            assert_eq!(ci16_level(v), want, "{v}");
        }
    }

    #[test]
    fn quantiser_builds_agree() {
        let src: Vec<Cf32> = (0..301)
            .map(|i| Cf32::new(i as f32 * 0.0137 - 2.0, 1.5 - i as f32 * 0.011))
            .chain([
                Cf32::new(f32::NAN, 0.5 / 32767.0),
                Cf32::new(-0.5 / 32767.0, 1.5 / 32767.0),
                Cf32::new(f32::INFINITY, f32::NEG_INFINITY),
                Cf32::new(-1e12, 3e9),
            ])
            // Around both ends of the clamp (in ci16 steps, before the gain).
            .chain(
                [32766.5f32, 32767.4, 32767.5, 32768.0, 32768.6, 40000.0]
                    .into_iter()
                    .map(|u| Cf32::new(u / 32767.0, -(u + 1.0) / 32767.0)),
            )
            .chain((0..4000u32).map(|i| {
                // Values at and around every rounding tie.
                let v = (i as f32 - 2000.0) * 0.5 / 32767.0;
                Cf32::new(v, -v * 1.000_000_1)
            }))
            .collect();
        let gain = 0.731;
        let scale = gain * FULL_SCALE;
        let level = |v: f32| ci16_level(v * scale);
        let want: Vec<Ci16> = src
            .iter()
            .map(|s| Ci16::new(level(s.re), level(s.im)))
            .collect();
        let mut portable = vec![Ci16::default(); src.len()];
        scale_quantise_body::<false>(&src, scale, &mut portable);
        assert_eq!(portable, want);
        // The prefix is the body's last samples, the same words.
        let mut out = vec![Ci16::default(); src.len() + 7];
        add_cp_ci16(&src, 7, gain, &mut out);
        assert_eq!(out[7..], want[..]);
        assert_eq!(out[..7], want[want.len() - 7..]);
        #[cfg(target_arch = "x86_64")]
        if Isa::cpu() >= Isa::Avx2 {
            let mut simd = vec![Ci16::default(); src.len()];
            // SAFETY: the CPU has AVX2 (checked just above).
            let done = unsafe { scale_quantise_avx2(&src, scale, &mut simd) };
            assert_eq!(done, src.len() / 8 * 8);
            assert_eq!(simd[..done], want[..done]);
        } else {
            println!(
                "SKIPPED: AVX2 quantiser (this CPU has {})",
                Isa::cpu().name()
            );
        }
    }
}
