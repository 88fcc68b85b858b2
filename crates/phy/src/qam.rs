//! Gray-mapped QAM of 3GPP TS 38.211 §5.1 (QPSK, 16-, 64- and 256-QAM): modulation
//! and max-log soft demodulation.
//!
//! The NR square constellations are separable: even bits `b0, b2, ..` choose the
//! in-phase level and odd bits `b1, b3, ..` the quadrature level, each through the
//! same Gray PAM recursion `(1-2b0)(2^(q-1) - (1-2b2)(2^(q-2) - ...))`. Demodulation
//! therefore works per axis. The max-log LLR of a bit is exact (not the usual
//! piecewise approximation): the squared distance to every PAM level is computed
//! and minimised separately over the levels carrying a 0 and a 1. At most 16 levels
//! per axis keeps that cheap, and the fixed-size inner loops vectorise.
//!
//! LLR sign convention: positive means bit 0 (what the LDPC decoder expects).
//!
//! Modulation maps whole 16-symbol slices with vector code where the CPU has it
//! (`levels_avx512`: `pext` and `vpermps`; `levels_avx2`: a byte shuffle and
//! `vpmovmskb` split the bits, `vpermps` looks up the levels) and the rest per
//! symbol. Measured on the Zen 3 AVX2-only VM (docs/BENCHMARKS.md, session 19): the
//! 64x16 downlink's modulate stage went from 1345-1444 to 316-419 us per frame with
//! the AVX2 mapper and scrambling.

use radiohost_iq::Cf32;
use serde::{Deserialize, Serialize};

use crate::simd::{dispatch, Isa};

/// Modulation order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Modulation {
    #[serde(rename = "QPSK")]
    Qpsk,
    #[serde(rename = "16QAM")]
    Qam16,
    #[serde(rename = "64QAM")]
    Qam64,
    #[serde(rename = "256QAM")]
    Qam256,
}

impl Modulation {
    /// Bits per symbol `Qm`.
    pub const fn bits_per_symbol(self) -> usize {
        match self {
            Modulation::Qpsk => 2,
            Modulation::Qam16 => 4,
            Modulation::Qam64 => 6,
            Modulation::Qam256 => 8,
        }
    }

    /// Bits per axis (`Qm / 2`).
    pub const fn bits_per_axis(self) -> usize {
        self.bits_per_symbol() / 2
    }

    /// Normalisation making the average symbol energy 1.
    pub fn scale(self) -> f32 {
        match self {
            Modulation::Qpsk => 1.0 / 2f32.sqrt(),
            Modulation::Qam16 => 1.0 / 10f32.sqrt(),
            Modulation::Qam64 => 1.0 / 42f32.sqrt(),
            Modulation::Qam256 => 1.0 / 170f32.sqrt(),
        }
    }

    /// Name as written in configuration files.
    pub const fn name(self) -> &'static str {
        match self {
            Modulation::Qpsk => "QPSK",
            Modulation::Qam16 => "16QAM",
            Modulation::Qam64 => "64QAM",
            Modulation::Qam256 => "256QAM",
        }
    }

    /// Parse a configuration name (case-insensitive).
    pub fn from_name(s: &str) -> Option<Self> {
        match s.to_ascii_uppercase().as_str() {
            "QPSK" => Some(Modulation::Qpsk),
            "16QAM" => Some(Modulation::Qam16),
            "64QAM" => Some(Modulation::Qam64),
            "256QAM" => Some(Modulation::Qam256),
            _ => None,
        }
    }
}

/// Unnormalised PAM level of one axis from its bits `(b0, b2, b4, ..)` in order.
fn pam_level(axis_bits: &[u8]) -> f32 {
    // Evaluate (1-2b0)(A0 - (1-2b1)(A1 - ... (1-2b_last))) from the inside out.
    let q = axis_bits.len();
    let mut v = 1.0f32;
    for i in (1..q).rev() {
        let s = 1.0 - 2.0 * axis_bits[i] as f32;
        v = (1u32 << (q - i)) as f32 - s * v;
    }
    let s0 = 1.0 - 2.0 * axis_bits[0] as f32;
    s0 * v
}

/// Levels (normalised) and their bit labels for one axis, indexed by the label
/// (axis bit 0 in the most significant position).
#[derive(Clone, Debug)]
struct AxisTable {
    levels: [f32; 16],
}

impl AxisTable {
    fn new(m: Modulation) -> Self {
        let q = m.bits_per_axis();
        let mut levels = [0.0; 16];
        let mut bits = [0u8; 4];
        for (label, level) in levels.iter_mut().enumerate().take(1 << q) {
            for (i, b) in bits.iter_mut().enumerate().take(q) {
                *b = ((label >> (q - 1 - i)) & 1) as u8;
            }
            *level = pam_level(&bits[..q]) * m.scale();
        }
        Self { levels }
    }
}

/// Modulator for one order: bits to unit-energy symbols.
#[derive(Clone, Debug)]
pub struct Modulator {
    modulation: Modulation,
    /// Level of each axis label with axis bit `j` in bit `j` (least significant
    /// first: the order the AVX-512 path extracts them in).
    by_index: [f32; 16],
}

impl Modulator {
    pub fn new(modulation: Modulation) -> Self {
        let q = modulation.bits_per_axis();
        let mut by_index = [0.0; 16];
        for (idx, level) in by_index.iter_mut().enumerate().take(1 << q) {
            let bits: Vec<u8> = (0..q).map(|j| ((idx >> j) & 1) as u8).collect();
            *level = pam_level(&bits) * modulation.scale();
        }
        Self {
            modulation,
            by_index,
        }
    }

    pub fn modulation(&self) -> Modulation {
        self.modulation
    }

    /// Map `bits` (0/1 each, `symbols.len() * Qm` of them) onto `symbols`.
    ///
    /// # Panics
    /// If the lengths do not match (a caller bug).
    pub fn modulate(&self, bits: &[u8], symbols: &mut [Cf32]) {
        self.modulate_at(Isa::detect(), bits, symbols);
    }

    /// [`Self::modulate`] built for `isa` (clamped to what the CPU has).
    pub fn modulate_at(&self, isa: Isa, bits: &[u8], symbols: &mut [Cf32]) {
        let qm = self.modulation.bits_per_symbol();
        assert_eq!(bits.len(), symbols.len() * qm, "modulate: length mismatch");
        #[cfg(target_arch = "x86_64")]
        let done = {
            let out = &mut *symbols;
            let emit = |s: usize, re: &[f32; LANES], im: &[f32; LANES]| {
                for (l, o) in out[s * LANES..(s + 1) * LANES].iter_mut().enumerate() {
                    *o = Cf32::new(re[l], im[l]);
                }
            };
            self.simd_levels(isa, bits, emit) * LANES
        };
        #[cfg(not(target_arch = "x86_64"))]
        let done = 0;
        let (this, bits, symbols) = (self, &bits[done * qm..], &mut symbols[done..]);
        dispatch!(isa, fn run(this: &Modulator, bits: &[u8], symbols: &mut [Cf32]) => modulate_body)
    }

    /// [`Self::modulate`] into planar slices of 16 symbols: symbol `i` goes to lane
    /// `i % 16` of `re[(i / 16) * stride]` / `im[..]` (the layout the downlink
    /// precoder reads: `[slice][user]` with `stride` users). Lanes past the last
    /// symbol are zeroed.
    ///
    /// # Panics
    /// If `bits` is not a whole number of symbols or the outputs are too short.
    pub fn modulate_planar(
        &self,
        bits: &[u8],
        re: &mut [[f32; LANES]],
        im: &mut [[f32; LANES]],
        stride: usize,
    ) {
        self.modulate_planar_at(Isa::detect(), bits, re, im, stride);
    }

    /// [`Self::modulate_planar`] built for `isa` (clamped to what the CPU has).
    pub fn modulate_planar_at(
        &self,
        isa: Isa,
        bits: &[u8],
        re: &mut [[f32; LANES]],
        im: &mut [[f32; LANES]],
        stride: usize,
    ) {
        let qm = self.modulation.bits_per_symbol();
        assert_eq!(bits.len() % qm, 0, "modulate: partial symbol");
        let slices = (bits.len() / qm).div_ceil(LANES);
        let rows = if slices == 0 {
            0
        } else {
            (slices - 1) * stride + 1
        };
        assert!(
            re.len() >= rows && im.len() >= rows,
            "modulate: output too short"
        );
        #[cfg(target_arch = "x86_64")]
        let done = {
            let emit = |s: usize, r: &[f32; LANES], i: &[f32; LANES]| {
                re[s * stride] = *r;
                im[s * stride] = *i;
            };
            self.simd_levels(isa, bits, emit)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let done = 0;
        let this = self;
        let from = (done * stride).min(re.len()).min(im.len());
        let (bits, re, im) = (&bits[done * LANES * qm..], &mut re[from..], &mut im[from..]);
        dispatch!(isa, fn run(this: &Modulator, bits: &[u8], re: &mut [[f32; LANES]],
            im: &mut [[f32; LANES]], stride: usize) => modulate_planar_body)
    }

    /// The levels of every whole 16-symbol slice of `bits` through the vector mapper
    /// `isa` allows (see [`levels_avx512`], [`levels_avx2`]), handed to `emit(slice,
    /// re, im)`; returns the number of slices done (0 where no vector mapper runs).
    #[cfg(target_arch = "x86_64")]
    fn simd_levels(
        &self,
        isa: Isa,
        bits: &[u8],
        emit: impl FnMut(usize, &[f32; LANES], &[f32; LANES]),
    ) -> usize {
        let bytes = LANES * self.modulation.bits_per_symbol();
        let slices = bits.len() / bytes;
        let whole = &bits[..slices * bytes];
        let isa = isa.min(Isa::cpu());
        if isa == Isa::Avx512 && std::is_x86_feature_detected!("bmi2") {
            // SAFETY: the CPU has AVX-512 F/BW (`Isa::cpu`) and BMI2.
            unsafe { levels_avx512(self, whole, emit) };
        } else if isa >= Isa::Avx2 {
            // SAFETY: the CPU has AVX2 (`Isa::cpu`).
            unsafe { levels_avx2(self, whole, emit) };
        } else {
            return 0;
        }
        slices
    }
}

#[inline(always)]
fn modulate_body<const FMA: bool>(this: &Modulator, bits: &[u8], symbols: &mut [Cf32]) {
    let qm = this.modulation.bits_per_symbol();
    for (sym, b) in symbols.iter_mut().zip(bits.chunks_exact(qm)) {
        let (re, im) = symbol_levels(this, b);
        *sym = Cf32::new(re, im);
    }
}

#[inline(always)]
fn modulate_planar_body<const FMA: bool>(
    this: &Modulator,
    bits: &[u8],
    re: &mut [[f32; LANES]],
    im: &mut [[f32; LANES]],
    stride: usize,
) {
    let qm = this.modulation.bits_per_symbol();
    let n = bits.len() / qm;
    for s in 0..n.div_ceil(LANES) {
        let (r, i) = (&mut re[s * stride], &mut im[s * stride]);
        for l in 0..LANES {
            let sym = s * LANES + l;
            (r[l], i[l]) = if sym < n {
                symbol_levels(this, &bits[sym * qm..(sym + 1) * qm])
            } else {
                (0.0, 0.0)
            };
        }
    }
}

/// One symbol's levels from its `Qm` bits (even bits in-phase, odd quadrature).
#[inline(always)]
fn symbol_levels(this: &Modulator, b: &[u8]) -> (f32, f32) {
    let (mut i_idx, mut q_idx) = (0usize, 0usize);
    for (j, pair) in b.chunks_exact(2).enumerate() {
        i_idx |= ((pair[0] & 1) as usize) << j;
        q_idx |= ((pair[1] & 1) as usize) << j;
    }
    (this.by_index[i_idx], this.by_index[q_idx])
}

/// The levels of every 16 symbols of `bits` (a whole number of 16-symbol slices),
/// handed to `emit(slice, re, im)`: each slice's bytes are packed into bit masks,
/// split into in-phase and quadrature bit streams (`pext`), cut into one label per
/// lane (variable shifts) and looked up in the 16-entry level table held in one
/// register (`vpermps`).
///
/// # Safety
/// The CPU has AVX-512 F/BW and BMI2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,bmi2")]
unsafe fn levels_avx512(
    this: &Modulator,
    bits: &[u8],
    mut emit: impl FnMut(usize, &[f32; LANES], &[f32; LANES]),
) {
    use std::arch::x86_64::*;
    let qa = this.modulation.bits_per_axis();
    let qm = 2 * qa;
    let bytes = LANES * qm;
    debug_assert_eq!(bits.len() % bytes, 0);
    // SAFETY (whole body): every load below is masked to the slice's `bytes`.
    unsafe {
        let table = _mm512_loadu_ps(this.by_index.as_ptr());
        let ones = _mm512_set1_epi8(1);
        let q = qa as i64;
        let cnt_lo = _mm512_set_epi64(7 * q, 6 * q, 5 * q, 4 * q, 3 * q, 2 * q, q, 0);
        let cnt_hi = _mm512_add_epi64(cnt_lo, _mm512_set1_epi64(8 * q));
        let label = _mm512_set1_epi32((1 << qa) - 1);
        let lanes = |stream: u64| -> __m512 {
            let v = _mm512_set1_epi64(stream as i64);
            let lo = _mm512_cvtepi64_epi32(_mm512_srlv_epi64(v, cnt_lo));
            let hi = _mm512_cvtepi64_epi32(_mm512_srlv_epi64(v, cnt_hi));
            let idx = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi);
            _mm512_permutexvar_ps(_mm512_and_si512(idx, label), table)
        };
        let first = bytes.min(64);
        let (m0, m1) = (
            u64::MAX >> (64 - first),
            if bytes > 64 {
                u64::MAX >> (128 - bytes)
            } else {
                0
            },
        );
        const EVEN: u64 = 0x5555_5555_5555_5555;
        let (mut re, mut im) = ([0f32; LANES], [0f32; LANES]);
        for (s, chunk) in bits.chunks_exact(bytes).enumerate() {
            let p = chunk.as_ptr().cast::<i8>();
            let p0 = _mm512_mask_test_epi8_mask(m0, _mm512_maskz_loadu_epi8(m0, p), ones);
            let p1 = if m1 != 0 {
                _mm512_mask_test_epi8_mask(m1, _mm512_maskz_loadu_epi8(m1, p.add(64)), ones)
            } else {
                0
            };
            let i_bits = _pext_u64(p0, EVEN) | (_pext_u64(p1, EVEN) << 32);
            let q_bits = _pext_u64(p0, EVEN << 1) | (_pext_u64(p1, EVEN << 1) << 32);
            _mm512_storeu_ps(re.as_mut_ptr(), lanes(i_bits));
            _mm512_storeu_ps(im.as_mut_ptr(), lanes(q_bits));
            emit(s, &re, &im);
        }
    }
}

/// [`levels_avx512`] with AVX2, in two 8-lane halves per slice: every 32 bytes of the
/// slice (a multiple of 32 for every order) are split into their in-phase (even) and
/// quadrature (odd) bytes by a byte shuffle and a quadword permute, and packed into 16
/// bits each by `vpmovmskb` (no `pext`: microcoded and slow on AMD CPUs before Zen
/// 3); each half's labels are then cut from the streams and looked up in the level
/// table (`vpermps` over 8 levels; 256-QAM's 16 take two lookups and a blend on the
/// label's top bit).
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn levels_avx2(
    this: &Modulator,
    bits: &[u8],
    mut emit: impl FnMut(usize, &[f32; LANES], &[f32; LANES]),
) {
    use std::arch::x86_64::*;
    let qa = this.modulation.bits_per_axis();
    let bytes = LANES * 2 * qa;
    debug_assert_eq!(bits.len() % bytes, 0);
    debug_assert_eq!(bytes % 32, 0);
    // Labels of one half: 8 symbols of `qa` bits.
    let half_mask = u64::MAX >> (64 - 8 * qa);
    let q = qa as i32;
    // SAFETY (whole body): every load is a whole 32-byte piece of the slice.
    unsafe {
        let lo = _mm256_loadu_ps(this.by_index.as_ptr());
        let hi = _mm256_loadu_ps(this.by_index.as_ptr().add(8));
        let counts = _mm256_setr_epi32(0, q, 2 * q, 3 * q, 4 * q, 5 * q, 6 * q, 7 * q);
        let label = _mm256_set1_epi32((1 << qa) - 1);
        // Per 128-bit lane: even bytes low, odd bytes high.
        let split = _mm256_setr_epi8(
            0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, //
            0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
        );
        let (mut re, mut im) = ([0f32; LANES], [0f32; LANES]);
        for (s, chunk) in bits.chunks_exact(bytes).enumerate() {
            let (mut i_bits, mut q_bits) = (0u64, 0u64);
            for (v, piece) in chunk.chunks_exact(32).enumerate() {
                let x = _mm256_loadu_si256(piece.as_ptr().cast());
                // Even bytes of both lanes, then odd ones (quadwords 0, 2, 1, 3).
                let x = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_shuffle_epi8(x, split));
                // Bit 0 of every byte (`vpmovmskb` reads bit 7: shift it there).
                let m = _mm256_movemask_epi8(_mm256_slli_epi16::<7>(x)) as u32;
                i_bits |= ((m & 0xffff) as u64) << (16 * v);
                q_bits |= ((m >> 16) as u64) << (16 * v);
            }
            for h in 0..2 {
                let shift = 8 * qa * h;
                let i_lv = axis_levels_avx2(i_bits >> shift & half_mask, counts, label, lo, hi, qa);
                let q_lv = axis_levels_avx2(q_bits >> shift & half_mask, counts, label, lo, hi, qa);
                _mm256_storeu_ps(re.as_mut_ptr().add(8 * h), i_lv);
                _mm256_storeu_ps(im.as_mut_ptr().add(8 * h), q_lv);
            }
            emit(s, &re, &im);
        }
    }
}

/// The levels of 8 symbols from one axis's label stream (`qa` bits per symbol,
/// first symbol lowest).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn axis_levels_avx2(
    stream: u64,
    counts: std::arch::x86_64::__m256i,
    label: std::arch::x86_64::__m256i,
    lo: std::arch::x86_64::__m256,
    hi: std::arch::x86_64::__m256,
    qa: usize,
) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    // SAFETY: the caller runs with AVX2.
    unsafe {
        let idx = _mm256_and_si256(
            _mm256_srlv_epi32(_mm256_set1_epi32(stream as u32 as i32), counts),
            label,
        );
        let level = _mm256_permutevar8x32_ps(lo, idx);
        if qa < 4 {
            return level;
        }
        // Labels 8..15: the upper table (the blend reads the sign bit: label bit 3).
        let upper = _mm256_castsi256_ps(_mm256_slli_epi32::<28>(idx));
        _mm256_blendv_ps(level, _mm256_permutevar8x32_ps(hi, idx), upper)
    }
}

/// Max-log soft demodulator for one order.
#[derive(Clone, Debug)]
pub struct Demodulator {
    modulation: Modulation,
    table: AxisTable,
}

/// Symbols processed together so the per-level loops run over a short array.
const LANES: usize = 16;

impl Demodulator {
    pub fn new(modulation: Modulation) -> Self {
        Self {
            modulation,
            table: AxisTable::new(modulation),
        }
    }

    pub fn modulation(&self) -> Modulation {
        self.modulation
    }

    /// Normalised PAM levels of one axis, indexed by label (axis bit 0 most
    /// significant); the first `2^(Qm/2)` are used.
    pub(crate) fn levels(&self) -> &[f32; 16] {
        &self.table.levels
    }

    /// LLRs of `symbols` into `llrs` (`symbols.len() * Qm`), each symbol with its own
    /// noise variance (`noise_var[i]`, the post-equaliser error variance, complex).
    ///
    /// # Panics
    /// If the lengths do not match (a caller bug).
    pub fn demodulate(&self, symbols: &[Cf32], noise_var: &[f32], llrs: &mut [f32]) {
        self.demodulate_at(Isa::detect(), symbols, noise_var, llrs);
    }

    /// [`Self::demodulate`] built for `isa` (clamped to what the CPU has): for tests
    /// and benches comparing the builds.
    pub fn demodulate_at(&self, isa: Isa, symbols: &[Cf32], noise_var: &[f32], llrs: &mut [f32]) {
        let qm = self.modulation.bits_per_symbol();
        assert_eq!(llrs.len(), symbols.len() * qm, "demodulate: llr length");
        assert_eq!(noise_var.len(), symbols.len(), "demodulate: noise length");
        // AVX-512 CPUs run the AVX2 kernel too: it has no AVX-512 build, and the
        // compiler's AVX-512 build of the portable body demodulated 16-QAM at under half
        // its copy-bandwidth floor on a Xeon, where this kernel runs above it on Zen 3
        // (docs/BENCHMARKS.md, PHY session 29).
        #[cfg(target_arch = "x86_64")]
        if isa.min(Isa::cpu()) >= Isa::Avx2 {
            let lv = &self.table.levels;
            // SAFETY: the CPU has AVX2 and FMA (checked just above); the lengths
            // were asserted above.
            unsafe {
                match qm / 2 {
                    1 => demodulate_avx2::<1>(lv, symbols, noise_var, llrs),
                    2 => demodulate_avx2::<2>(lv, symbols, noise_var, llrs),
                    3 => demodulate_avx2::<3>(lv, symbols, noise_var, llrs),
                    _ => demodulate_avx2::<4>(lv, symbols, noise_var, llrs),
                }
            }
            return;
        }
        let this = self;
        dispatch!(isa, fn run(this: &Demodulator, symbols: &[Cf32], noise_var: &[f32],
            llrs: &mut [f32]) => demodulate_body)
    }
}

#[inline(always)]
fn demodulate_body<const FMA: bool>(
    this: &Demodulator,
    symbols: &[Cf32],
    noise_var: &[f32],
    llrs: &mut [f32],
) {
    // Bits per axis as a constant, so every per-level loop unrolls into registers.
    let levels = &this.table.levels;
    match this.modulation.bits_per_axis() {
        1 => demodulate_axes::<1>(levels, symbols, noise_var, llrs),
        2 => demodulate_axes::<2>(levels, symbols, noise_var, llrs),
        3 => demodulate_axes::<3>(levels, symbols, noise_var, llrs),
        _ => demodulate_axes::<4>(levels, symbols, noise_var, llrs),
    }
}

#[inline(always)]
fn demodulate_axes<const QA: usize>(
    levels: &[f32; 16],
    symbols: &[Cf32],
    noise_var: &[f32],
    llrs: &mut [f32],
) {
    let qm = 2 * QA;
    let mut start = 0;
    while start < symbols.len() {
        let n = LANES.min(symbols.len() - start);
        let (mut re, mut im, mut inv) = ([0f32; LANES], [0f32; LANES], [0f32; LANES]);
        let (syms, nv) = (&symbols[start..start + n], &noise_var[start..start + n]);
        if n == LANES {
            for l in 0..LANES {
                (re[l], im[l]) = (syms[l].re, syms[l].im);
                inv[l] = inverse_noise(nv[l]);
            }
        } else {
            for l in 0..n {
                (re[l], im[l]) = (syms[l].re, syms[l].im);
                inv[l] = inverse_noise(nv[l]);
            }
        }
        let out_re = axis_llrs::<QA>(levels, &re);
        let out_im = axis_llrs::<QA>(levels, &im);
        // Even bits come from the in-phase axis, odd bits from the quadrature axis.
        let dst = &mut llrs[start * qm..(start + n) * qm];
        for (l, chunk) in dst.chunks_exact_mut(qm).enumerate() {
            for bit in 0..QA {
                chunk[2 * bit] = out_re[bit][l] * inv[l];
                chunk[2 * bit + 1] = out_im[bit][l] * inv[l];
            }
        }
        start += n;
    }
}

/// The AVX2 build of [`Demodulator::demodulate`], 8 symbols per register: the
/// symbols are split into re/im lanes in the order 0 1 4 5 2 3 6 7 (what one
/// in-lane shuffle gives; the noise variances are permuted to match), every bit's
/// LLRs come out of [`axis_llrs`]'s operations in that order, and an 8 x 8 transpose
/// (whose in-lane steps undo the permutation) writes each symbol's `Qm` LLRs. The
/// last partial group of 8 runs the portable body.
///
/// # Safety
/// The CPU has AVX2 and FMA; `llrs.len() == symbols.len() * 2 * QA` and
/// `noise_var.len() == symbols.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn demodulate_avx2<const QA: usize>(
    levels: &[f32; 16],
    symbols: &[Cf32],
    noise_var: &[f32],
    llrs: &mut [f32],
) {
    use std::arch::x86_64::*;
    let qm = 2 * QA;
    let mut lv = [_mm256_setzero_ps(); 16];
    for (v, &a) in lv.iter_mut().zip(levels) {
        *v = _mm256_set1_ps(a);
    }
    let floor = _mm256_set1_ps(1e-12);
    let one = _mm256_set1_ps(1.0);
    let groups = symbols.len() / 8;
    for g in 0..groups {
        // SAFETY (loads): symbols and variances 8g .. 8g + 8 exist.
        let (a, b, nv) = unsafe {
            let p = symbols.as_ptr().add(8 * g).cast::<f32>();
            (
                _mm256_loadu_ps(p),
                _mm256_loadu_ps(p.add(8)),
                _mm256_loadu_ps(noise_var.as_ptr().add(8 * g)),
            )
        };
        // Lanes in symbol order 0 1 4 5 2 3 6 7.
        let re = _mm256_shuffle_ps::<0b10_00_10_00>(a, b);
        let im = _mm256_shuffle_ps::<0b11_01_11_01>(a, b);
        let nv = _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(nv)));
        // `inverse_noise`: max keeps the floor for NaN, as `f32::max` does.
        let inv = _mm256_div_ps(one, _mm256_max_ps(nv, floor));
        let mut planes = [_mm256_setzero_ps(); 8];
        for (axis, y) in [re, im].into_iter().enumerate() {
            let inf = _mm256_set1_ps(f32::INFINITY);
            let (mut b0, mut b1) = ([inf; 4], [inf; 4]);
            for (label, &a) in lv.iter().enumerate().take(1 << QA) {
                let e = _mm256_sub_ps(y, a);
                let d = _mm256_mul_ps(e, e);
                for bit in 0..QA {
                    // `min(d, best)` keeps `best` unless `d < best`, as the reference.
                    if (label >> (QA - 1 - bit)) & 1 == 1 {
                        b1[bit] = _mm256_min_ps(d, b1[bit]);
                    } else {
                        b0[bit] = _mm256_min_ps(d, b0[bit]);
                    }
                }
            }
            for bit in 0..QA {
                planes[2 * bit + axis] = _mm256_mul_ps(_mm256_sub_ps(b1[bit], b0[bit]), inv);
            }
        }
        let rows = transpose8_avx2(&planes);
        let dst = &mut llrs[8 * g * qm..8 * (g + 1) * qm];
        if qm == 8 {
            for (l, row) in rows.iter().enumerate() {
                // SAFETY: symbol `l`'s 8 LLRs are inside `dst`.
                unsafe { _mm256_storeu_ps(dst.as_mut_ptr().add(8 * l), *row) };
            }
        } else {
            let mut row = [0f32; 8];
            for (l, v) in rows.iter().enumerate() {
                // SAFETY: `row` is 8 floats.
                unsafe { _mm256_storeu_ps(row.as_mut_ptr(), *v) };
                dst[l * qm..(l + 1) * qm].copy_from_slice(&row[..qm]);
            }
        }
    }
    let done = 8 * groups;
    demodulate_axes::<QA>(
        levels,
        &symbols[done..],
        &noise_var[done..],
        &mut llrs[done * qm..],
    );
}

/// Transpose 8 planes whose lanes hold symbols 0 1 4 5 2 3 6 7 into one row per
/// symbol, in symbol order (row `l`, element `j` = lane of symbol `l` in plane `j`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[inline]
fn transpose8_avx2(p: &[std::arch::x86_64::__m256; 8]) -> [std::arch::x86_64::__m256; 8] {
    use std::arch::x86_64::*;
    let t: [__m256; 8] = std::array::from_fn(|i| {
        let (a, b) = (p[2 * (i / 2)], p[2 * (i / 2) + 1]);
        if i % 2 == 0 {
            _mm256_unpacklo_ps(a, b)
        } else {
            _mm256_unpackhi_ps(a, b)
        }
    });
    // u[4 * q + s]: planes 4q .. 4q + 3 of lane positions s and s + 4.
    let u: [__m256; 8] = std::array::from_fn(|i| {
        let (q, s) = (i / 4, i % 4);
        let (a, b) = (t[4 * q + s / 2], t[4 * q + 2 + s / 2]);
        if s % 2 == 0 {
            _mm256_shuffle_ps::<0b01_00_01_00>(a, b)
        } else {
            _mm256_shuffle_ps::<0b11_10_11_10>(a, b)
        }
    });
    // Lane position s holds symbol [0, 1, 4, 5][s] in the low half and
    // [2, 3, 6, 7][s] in the high half.
    let mut rows = [_mm256_setzero_ps(); 8];
    for s in 0..4 {
        rows[[0, 1, 4, 5][s]] = _mm256_permute2f128_ps::<0x20>(u[s], u[4 + s]);
        rows[[2, 3, 6, 7][s]] = _mm256_permute2f128_ps::<0x31>(u[s], u[4 + s]);
    }
    rows
}

/// The factor every LLR of a symbol with post-equaliser noise variance `nv` is
/// scaled by (`1 / nv`, with `nv` floored so a zero variance stays finite).
#[inline(always)]
pub fn inverse_noise(nv: f32) -> f32 {
    1.0 / nv.max(1e-12)
}

/// Unscaled max-log LLRs (`min d^2 over bit 1 - min d^2 over bit 0`) of one axis
/// for `LANES` symbols: the distance to every PAM level, minimised per bit value.
#[inline(always)]
pub(crate) fn axis_llrs<const QA: usize>(
    levels: &[f32; 16],
    y: &[f32; LANES],
) -> [[f32; LANES]; QA] {
    let mut best = [[[f32::INFINITY; LANES]; 2]; QA];
    for (label, &a) in levels.iter().enumerate().take(1 << QA) {
        let mut d = [0f32; LANES];
        for l in 0..LANES {
            let e = y[l] - a;
            d[l] = e * e;
        }
        for (bit, b) in best.iter_mut().enumerate() {
            let slot = &mut b[(label >> (QA - 1 - bit)) & 1];
            for l in 0..LANES {
                // A plain comparison is one vector min (f32::min also orders NaN).
                slot[l] = if d[l] < slot[l] { d[l] } else { slot[l] };
            }
        }
    }
    let mut out = [[0f32; LANES]; QA];
    for (o, b) in out.iter_mut().zip(&best) {
        for l in 0..LANES {
            o[l] = b[1][l] - b[0][l];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Modulation; 4] = [
        Modulation::Qpsk,
        Modulation::Qam16,
        Modulation::Qam64,
        Modulation::Qam256,
    ];

    fn bits_of(v: usize, n: usize) -> Vec<u8> {
        (0..n).map(|i| ((v >> (n - 1 - i)) & 1) as u8).collect()
    }

    #[test]
    fn matches_38211_formulas_and_unit_energy() {
        for m in ALL {
            let qm = m.bits_per_symbol();
            let md = Modulator::new(m);
            let mut energy = 0.0;
            for v in 0..(1usize << qm) {
                let b: Vec<f32> = bits_of(v, qm)
                    .iter()
                    .map(|&x| 1.0 - 2.0 * x as f32)
                    .collect();
                // 38.211 §5.1.3-5.1.5 written out literally.
                let (re, im) = match m {
                    Modulation::Qpsk => (b[0], b[1]),
                    Modulation::Qam16 => (b[0] * (2.0 - b[2]), b[1] * (2.0 - b[3])),
                    Modulation::Qam64 => (
                        b[0] * (4.0 - b[2] * (2.0 - b[4])),
                        b[1] * (4.0 - b[3] * (2.0 - b[5])),
                    ),
                    Modulation::Qam256 => (
                        b[0] * (8.0 - b[2] * (4.0 - b[4] * (2.0 - b[6]))),
                        b[1] * (8.0 - b[3] * (4.0 - b[5] * (2.0 - b[7]))),
                    ),
                };
                let mut sym = [Cf32::default()];
                md.modulate(&bits_of(v, qm), &mut sym);
                let expect = Cf32::new(re, im) * m.scale();
                assert!((sym[0] - expect).norm() < 1e-6, "{m:?} {v}");
                energy += sym[0].norm_sqr();
            }
            let avg = energy / (1usize << qm) as f32;
            assert!((avg - 1.0).abs() < 1e-5, "{m:?} energy {avg}");
        }
    }

    /// Every ISA build, interleaved and planar, maps every bit pattern as the
    /// 38.211 formulas (first test) do, including a partial last slice.
    #[test]
    fn every_isa_and_planar_layout_match() {
        for m in ALL {
            let qm = m.bits_per_symbol();
            let n = 16 * 5 + 7;
            let bits: Vec<u8> = (0..n * qm)
                .map(|i| ((i * 7 + i / 5) % 3 == 1) as u8)
                .collect();
            // The reference: each symbol alone through the literal recursion.
            let want: Vec<Cf32> = bits
                .chunks_exact(qm)
                .map(|b| {
                    let ib: Vec<u8> = b.iter().step_by(2).copied().collect();
                    let qb: Vec<u8> = b.iter().skip(1).step_by(2).copied().collect();
                    Cf32::new(pam_level(&ib), pam_level(&qb)) * m.scale()
                })
                .collect();
            let md = Modulator::new(m);
            for isa in Isa::available() {
                let mut got = vec![Cf32::default(); n];
                md.modulate_at(isa, &bits, &mut got);
                assert_eq!(got, want, "{m:?} {isa:?}");
                let stride = 3;
                let rows = (n.div_ceil(LANES) - 1) * stride + 1;
                let mut re = vec![[9.0; LANES]; rows];
                let mut im = vec![[9.0; LANES]; rows];
                md.modulate_planar_at(isa, &bits, &mut re, &mut im, stride);
                for s in 0..n.div_ceil(LANES) {
                    for l in 0..LANES {
                        let (r, i) = (re[s * stride][l], im[s * stride][l]);
                        match want.get(s * LANES + l) {
                            Some(w) => assert_eq!(Cf32::new(r, i), *w, "{m:?} {isa:?} planar"),
                            None => assert_eq!((r, i), (0.0, 0.0), "{m:?} {isa:?} tail"),
                        }
                    }
                }
            }
        }
    }

    /// Every label of every order, in whole 16-symbol slices (so the vector mappers
    /// see each one, at every lane), gives the portable build's symbol.
    #[test]
    fn every_label_through_every_isa() {
        for m in ALL {
            let qm = m.bits_per_symbol();
            // Slice r holds labels 17 r + lane: every label reaches every lane (17 is
            // odd, so 17 r runs through every residue of 2^Qm).
            let labels = 1usize << qm;
            let n = 16 * labels;
            let bits: Vec<u8> = (0..n)
                .flat_map(|i| bits_of((i + i / 16) % labels, qm))
                .collect();
            let md = Modulator::new(m);
            let mut want = vec![Cf32::default(); n];
            md.modulate_at(Isa::Portable, &bits, &mut want);
            for isa in Isa::available() {
                let mut got = vec![Cf32::default(); n];
                md.modulate_at(isa, &bits, &mut got);
                assert_eq!(got, want, "{m:?} {isa:?}");
            }
        }
    }

    /// Max-log over the full 2-D constellation, in f64.
    fn naive_llrs(m: Modulation, y: Cf32, nv: f32) -> Vec<f32> {
        let qm = m.bits_per_symbol();
        let md = Modulator::new(m);
        let mut best = vec![[f64::INFINITY; 2]; qm];
        for v in 0..(1usize << qm) {
            let bits = bits_of(v, qm);
            let mut s = [Cf32::default()];
            md.modulate(&bits, &mut s);
            let d = ((y.re - s[0].re) as f64).powi(2) + ((y.im - s[0].im) as f64).powi(2);
            for (i, &b) in bits.iter().enumerate() {
                best[i][b as usize] = best[i][b as usize].min(d);
            }
        }
        best.iter()
            .map(|b| ((b[1] - b[0]) / nv as f64) as f32)
            .collect()
    }

    #[test]
    fn demod_matches_full_search() {
        let mut state = 12345u64;
        let mut rnd = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 3.0 - 1.5
        };
        for m in ALL {
            let qm = m.bits_per_symbol();
            let n = 37;
            let syms: Vec<Cf32> = (0..n).map(|_| Cf32::new(rnd(), rnd())).collect();
            let nv: Vec<f32> = (0..n).map(|i| 0.01 + 0.1 * (i % 5) as f32).collect();
            let mut llrs = vec![0.0; n * qm];
            Demodulator::new(m).demodulate(&syms, &nv, &mut llrs);
            for i in 0..n {
                let expect = naive_llrs(m, syms[i], nv[i]);
                for b in 0..qm {
                    let got = llrs[i * qm + b];
                    let tol = 1e-3 * (1.0 + expect[b].abs());
                    assert!(
                        (got - expect[b]).abs() < tol,
                        "{m:?} sym {i} bit {b}: {got} vs {}",
                        expect[b]
                    );
                }
            }
        }
    }

    /// Every ISA build gives the portable build's LLRs.
    #[test]
    fn every_isa_matches_portable() {
        for m in ALL {
            let n = 203;
            let syms: Vec<Cf32> = (0..n)
                .map(|i| Cf32::new((i % 17) as f32 * 0.11 - 0.9, (i % 13) as f32 * 0.13 - 0.8))
                .collect();
            let nv: Vec<f32> = (0..n).map(|i| 0.02 + 0.01 * (i % 3) as f32).collect();
            let d = Demodulator::new(m);
            let mut want = vec![0.0; n * m.bits_per_symbol()];
            d.demodulate_at(Isa::Portable, &syms, &nv, &mut want);
            for isa in Isa::available() {
                let mut got = vec![0.0; want.len()];
                d.demodulate_at(isa, &syms, &nv, &mut got);
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                        "{m:?} {isa:?}: {g} vs {w}"
                    );
                }
            }
        }
    }

    #[test]
    fn noiseless_hard_decisions_roundtrip() {
        for m in ALL {
            let qm = m.bits_per_symbol();
            let bits: Vec<u8> = (0..qm * 300)
                .map(|i| ((i * 37 + i / 7) % 3 == 0) as u8)
                .collect();
            let mut syms = vec![Cf32::default(); 300];
            Modulator::new(m).modulate(&bits, &mut syms);
            let mut llrs = vec![0.0; bits.len()];
            Demodulator::new(m).demodulate(&syms, &vec![0.1; 300], &mut llrs);
            let hard: Vec<u8> = llrs.iter().map(|&l| (l < 0.0) as u8).collect();
            assert_eq!(hard, bits, "{m:?}");
        }
    }
}
