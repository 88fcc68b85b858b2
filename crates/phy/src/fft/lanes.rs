//! The 16-lane f32 vector the batched FFT is written in, one implementation per
//! instruction set: AVX-512 intrinsics (one register), AVX2 intrinsics (two
//! registers; its transform runs on each 8-lane half in turn, see [`Lanes::Part`]),
//! and a portable `[f32; 16]` whose loops the compiler vectorises.
//!
//! Each lane is one antenna, so the transform itself never shuffles: only the
//! 16 x 16 transposes on the way in and out do.

use radiohost_iq::Ci16;

/// Lanes per vector: antennas transformed together.
pub const LANES: usize = 16;

/// `[f(0), f(1), .., f(15)]` for a body `|i| f(i)`, with every call written out
/// in place (a macro, not a function taking a closure: a closure does not take on
/// the target features of the function it is written in, so its intrinsics
/// would not inline). A loop over 16 rows whose body reads through a table is
/// not always unrolled, and then its rows live on the stack: each stored,
/// reloaded for the transpose, and the loop's constants reloaded every pass (the
/// transmit synthesiser's output loop, docs/BENCHMARKS.md, PHY, session 41).
macro_rules! each_lane {
    (|$i:ident| $body:expr) => {
        each_lane!(@ $i, $body, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    };
    (@ $i:ident, $body:expr, $($n:literal)*) => {
        [$({
            let $i: usize = $n;
            $body
        }),*]
    };
}
pub(crate) use each_lane;

/// One row of the batched layout: the same sample of 16 antennas, aligned to a
/// cache line.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C, align(64))]
pub struct Row(pub [f32; LANES]);

/// The arithmetic the FFT's butterflies need, on `WIDTH` f32 lanes. Pointers
/// passed to `load`/`store` must be valid for `WIDTH` f32, alignment not
/// required.
pub(crate) trait Vector: Copy {
    /// Lanes per vector.
    const WIDTH: usize;
    /// # Safety
    /// `p` is valid for reading `WIDTH` f32.
    unsafe fn load(p: *const f32) -> Self;
    /// # Safety
    /// `p` is valid for writing `WIDTH` f32.
    unsafe fn store(self, p: *mut f32);
    fn splat(x: f32) -> Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    /// `self * b + c`.
    fn mul_add(self, b: Self, c: Self) -> Self;
    /// `self * b - c`.
    fn mul_sub(self, b: Self, c: Self) -> Self;
    /// `c - self * b`.
    fn neg_mul_add(self, b: Self, c: Self) -> Self;
    /// Lanes of `Ci16` bits (after [`Lanes::load_ci16`] and transposes) to
    /// `(re * scale, im * scale)`.
    fn ci16_to_f32(self, scale: f32) -> (Self, Self);

    #[inline(always)]
    fn zero() -> Self {
        Self::splat(0.0)
    }
}

/// 16 f32 lanes (a [`Row`]), with the shuffles around the transform.
pub(crate) trait Lanes: Vector {
    /// The vector the transform's passes run in: `Self`, or (where 16 lanes
    /// would not fit the registers a radix-16 butterfly needs) a part of it, the
    /// passes then running once per part of every row.
    type Part: Vector;
    /// Row `i` lane `j` becomes row `j` lane `i`.
    fn transpose(rows: &mut [Self; LANES]);
    /// 16 `Ci16` read as 32-bit words (their bits, not converted).
    ///
    /// # Safety
    /// `p` is valid for reading 16 `Ci16`.
    unsafe fn load_ci16(p: *const Ci16) -> Self;
    /// [`Vector::store`] that bypasses the caches (no read for ownership) where the
    /// build has such a store; a plain store otherwise.
    ///
    /// # Safety
    /// `p` is valid for writing 16 f32 and 64-byte aligned. The stores are weakly
    /// ordered: the writer calls [`Self::store_fence`] before anyone reads them.
    unsafe fn store_stream(self, p: *mut f32);
    /// Orders [`Self::store_stream`] stores before later stores.
    fn store_fence();
    /// 16 interleaved complex values (`lo`: values 0-7 as re, im pairs, `hi`: 8-15)
    /// split into their re and im parts.
    fn deinterleave(lo: Self, hi: Self) -> (Self, Self);
    /// The inverse of [`Self::deinterleave`]: 16 re and 16 im parts as 16
    /// interleaved complex values (`lo`: values 0-7, `hi`: 8-15).
    fn interleave(re: Self, im: Self) -> (Self, Self);

    #[inline(always)]
    fn to_array(self) -> [f32; LANES] {
        let mut out = Row::default();
        // SAFETY: `out` holds 16 f32.
        unsafe { self.store(out.0.as_mut_ptr()) };
        out.0
    }
}

/// Portable lanes; `FMA` fuses `mul_add` (only in builds with the FMA feature, where
/// it is an instruction rather than a library call).
#[derive(Clone, Copy)]
pub(crate) struct Portable<const FMA: bool>([f32; LANES]);

impl<const FMA: bool> Portable<FMA> {
    #[allow(clippy::needless_range_loop)]
    #[inline(always)]
    fn map2(self, o: Self, f: impl Fn(f32, f32) -> f32) -> Self {
        let mut r = [0.0; LANES];
        for l in 0..LANES {
            r[l] = f(self.0[l], o.0[l]);
        }
        Self(r)
    }
}

// Lane loops index several arrays at once; iterators would hide that they are
// the same 16 lanes.
#[allow(clippy::needless_range_loop)]
impl<const FMA: bool> Vector for Portable<FMA> {
    const WIDTH: usize = LANES;
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the caller guarantees 16 readable f32.
        Self(unsafe { p.cast::<[f32; LANES]>().read_unaligned() })
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: the caller guarantees 16 writable f32.
        unsafe { p.cast::<[f32; LANES]>().write_unaligned(self.0) }
    }
    #[inline(always)]
    fn splat(x: f32) -> Self {
        Self([x; LANES])
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        self.map2(o, |a, b| a + b)
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        self.map2(o, |a, b| a - b)
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        self.map2(o, |a, b| a * b)
    }
    #[inline(always)]
    fn mul_add(self, b: Self, c: Self) -> Self {
        let mut r = [0.0; LANES];
        for l in 0..LANES {
            r[l] = crate::simd::fmadd::<FMA>(self.0[l], b.0[l], c.0[l]);
        }
        Self(r)
    }
    #[inline(always)]
    fn mul_sub(self, b: Self, c: Self) -> Self {
        let mut r = [0.0; LANES];
        for l in 0..LANES {
            r[l] = crate::simd::fmadd::<FMA>(self.0[l], b.0[l], -c.0[l]);
        }
        Self(r)
    }
    #[inline(always)]
    fn neg_mul_add(self, b: Self, c: Self) -> Self {
        let mut r = [0.0; LANES];
        for l in 0..LANES {
            r[l] = crate::simd::fmadd::<FMA>(-self.0[l], b.0[l], c.0[l]);
        }
        Self(r)
    }
    #[inline(always)]
    fn ci16_to_f32(self, scale: f32) -> (Self, Self) {
        let (mut re, mut im) = ([0.0; LANES], [0.0; LANES]);
        for l in 0..LANES {
            // `Ci16` is `#[repr(C)]` with I first: the low half-word on little endian.
            let w = self.0[l].to_bits();
            let (i, q) = ((w as u16) as i16, ((w >> 16) as u16) as i16);
            re[l] = i as f32 * scale;
            im[l] = q as f32 * scale;
        }
        (Self(re), Self(im))
    }
}

#[allow(clippy::needless_range_loop)]
impl<const FMA: bool> Lanes for Portable<FMA> {
    type Part = Self;
    #[inline(always)]
    fn transpose(rows: &mut [Self; LANES]) {
        for i in 0..LANES {
            for j in i + 1..LANES {
                let t = rows[i].0[j];
                rows[i].0[j] = rows[j].0[i];
                rows[j].0[i] = t;
            }
        }
    }
    #[inline(always)]
    unsafe fn load_ci16(p: *const Ci16) -> Self {
        // SAFETY: the caller guarantees 16 readable Ci16 (4 bytes each).
        let words = unsafe { p.cast::<[u32; LANES]>().read_unaligned() };
        Self(words.map(f32::from_bits))
    }
    #[inline(always)]
    unsafe fn store_stream(self, p: *mut f32) {
        #[cfg(target_arch = "x86_64")]
        for q in 0..LANES / 4 {
            use std::arch::x86_64::{_mm_loadu_ps, _mm_stream_ps};
            // SAFETY: SSE is baseline on x86-64; `p` holds 16 f32 and is 64-byte
            // aligned (the caller's), so each quarter is 16-byte aligned.
            unsafe { _mm_stream_ps(p.add(4 * q), _mm_loadu_ps(self.0.as_ptr().add(4 * q))) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        // SAFETY: the caller's.
        unsafe {
            self.store(p)
        }
    }
    #[inline(always)]
    fn store_fence() {
        // SAFETY: SSE is baseline on x86-64.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            std::arch::x86_64::_mm_sfence()
        }
    }
    #[inline(always)]
    fn deinterleave(lo: Self, hi: Self) -> (Self, Self) {
        let (mut re, mut im) = ([0.0; LANES], [0.0; LANES]);
        for (l, pair) in lo.0.chunks_exact(2).chain(hi.0.chunks_exact(2)).enumerate() {
            re[l] = pair[0];
            im[l] = pair[1];
        }
        (Self(re), Self(im))
    }
    #[inline(always)]
    fn interleave(re: Self, im: Self) -> (Self, Self) {
        let mut pairs = [0.0; 2 * LANES];
        for (l, pair) in pairs.chunks_exact_mut(2).enumerate() {
            pair[0] = re.0[l];
            pair[1] = im.0[l];
        }
        let (lo, hi) = pairs.split_at(LANES);
        (
            Self(lo.try_into().expect("16 lanes")),
            Self(hi.try_into().expect("16 lanes")),
        )
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) use avx512::Avx512;

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::{Lanes, Vector, LANES};
    use radiohost_iq::Ci16;

    /// One AVX-512 register. Only constructed inside `#[target_feature(enable =
    /// "avx512f")]` functions, which run only where the CPU has AVX-512
    /// (`Isa::detect`), so the intrinsics below are sound to call.
    #[derive(Clone, Copy)]
    pub(crate) struct Avx512(__m512);

    /// Interleave float pairs of `a` and `b` (low or high halves of each 128-bit
    /// lane).
    #[inline(always)]
    fn unpack_pd<const HI: bool>(a: __m512, b: __m512) -> __m512 {
        // SAFETY: AVX-512F, as every intrinsic in this module (see below).
        unsafe {
            let (a, b) = (_mm512_castps_pd(a), _mm512_castps_pd(b));
            _mm512_castpd_ps(if HI {
                _mm512_unpackhi_pd(a, b)
            } else {
                _mm512_unpacklo_pd(a, b)
            })
        }
    }

    // SAFETY (every `unsafe` block below): the intrinsics need AVX-512F, which the
    // only callers (target-feature builds picked by `Isa`) have; loads and stores
    // have the validity their callers guarantee.
    impl Vector for Avx512 {
        const WIDTH: usize = LANES;
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            Self(unsafe { _mm512_loadu_ps(p) })
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f32) {
            unsafe { _mm512_storeu_ps(p, self.0) }
        }
        #[inline(always)]
        fn splat(x: f32) -> Self {
            Self(unsafe { _mm512_set1_ps(x) })
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            Self(unsafe { _mm512_add_ps(self.0, o.0) })
        }
        #[inline(always)]
        fn sub(self, o: Self) -> Self {
            Self(unsafe { _mm512_sub_ps(self.0, o.0) })
        }
        #[inline(always)]
        fn mul(self, o: Self) -> Self {
            Self(unsafe { _mm512_mul_ps(self.0, o.0) })
        }
        #[inline(always)]
        fn mul_add(self, b: Self, c: Self) -> Self {
            Self(unsafe { _mm512_fmadd_ps(self.0, b.0, c.0) })
        }
        #[inline(always)]
        fn mul_sub(self, b: Self, c: Self) -> Self {
            Self(unsafe { _mm512_fmsub_ps(self.0, b.0, c.0) })
        }
        #[inline(always)]
        fn neg_mul_add(self, b: Self, c: Self) -> Self {
            Self(unsafe { _mm512_fnmadd_ps(self.0, b.0, c.0) })
        }
        #[inline(always)]
        fn ci16_to_f32(self, scale: f32) -> (Self, Self) {
            unsafe {
                let w = _mm512_castps_si512(self.0);
                let i = _mm512_srai_epi32::<16>(_mm512_slli_epi32::<16>(w));
                let q = _mm512_srai_epi32::<16>(w);
                let s = _mm512_set1_ps(scale);
                (
                    Self(_mm512_mul_ps(_mm512_cvtepi32_ps(i), s)),
                    Self(_mm512_mul_ps(_mm512_cvtepi32_ps(q), s)),
                )
            }
        }
    }

    impl Lanes for Avx512 {
        type Part = Self;
        #[inline(always)]
        fn transpose(rows: &mut [Self; LANES]) {
            unsafe {
                let mut r = [_mm512_setzero_ps(); 16];
                for i in 0..16 {
                    r[i] = rows[i].0;
                }
                // 2x2 blocks of single floats.
                let mut t = [_mm512_setzero_ps(); 16];
                for i in 0..8 {
                    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
                    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
                }
                // 2x2 blocks of float pairs.
                let mut u = [_mm512_setzero_ps(); 16];
                for i in 0..4 {
                    let b = 4 * i;
                    u[b] = unpack_pd::<false>(t[b], t[b + 2]);
                    u[b + 1] = unpack_pd::<true>(t[b], t[b + 2]);
                    u[b + 2] = unpack_pd::<false>(t[b + 1], t[b + 3]);
                    u[b + 3] = unpack_pd::<true>(t[b + 1], t[b + 3]);
                }
                // 128-bit lanes: first within groups of 8 rows, then across them.
                for h in 0..2 {
                    let b = 8 * h;
                    for i in 0..4 {
                        t[b + i] = _mm512_shuffle_f32x4::<0x88>(u[b + i], u[b + 4 + i]);
                        t[b + 4 + i] = _mm512_shuffle_f32x4::<0xdd>(u[b + i], u[b + 4 + i]);
                    }
                }
                for i in 0..8 {
                    rows[i] = Self(_mm512_shuffle_f32x4::<0x88>(t[i], t[8 + i]));
                    rows[8 + i] = Self(_mm512_shuffle_f32x4::<0xdd>(t[i], t[8 + i]));
                }
            }
        }
        #[inline(always)]
        unsafe fn load_ci16(p: *const Ci16) -> Self {
            Self(unsafe { _mm512_loadu_ps(p.cast::<f32>()) })
        }
        #[inline(always)]
        unsafe fn store_stream(self, p: *mut f32) {
            unsafe { _mm512_stream_ps(p, self.0) }
        }
        #[inline(always)]
        fn store_fence() {
            unsafe { _mm_sfence() }
        }
        #[inline(always)]
        fn deinterleave(lo: Self, hi: Self) -> (Self, Self) {
            // Lane `l` of the result is float `2 l` (re) or `2 l + 1` (im) of `lo`
            // then `hi` (indices 16-31 pick from `hi`).
            unsafe {
                let even =
                    _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
                let odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
                (
                    Self(_mm512_permutex2var_ps(lo.0, even, hi.0)),
                    Self(_mm512_permutex2var_ps(lo.0, odd, hi.0)),
                )
            }
        }
        #[inline(always)]
        fn interleave(re: Self, im: Self) -> (Self, Self) {
            // Float `2 l` of the result is re lane `l`, float `2 l + 1` im lane `l`
            // (indices 16-31 pick from `im`), from lane 8 on for `hi`.
            unsafe {
                let lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
                let hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
                (
                    Self(_mm512_permutex2var_ps(re.0, lo, im.0)),
                    Self(_mm512_permutex2var_ps(re.0, hi, im.0)),
                )
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) use avx2::Avx2;

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{Lanes, Vector, LANES};
    use radiohost_iq::Ci16;

    /// 16 lanes in two AVX2 registers (lanes 0-7, 8-15): two [`Avx2Half`]s, whose
    /// arithmetic it runs on each. Only constructed inside `#[target_feature(enable
    /// = "avx2,fma")]` functions, which run only where the CPU has both
    /// (`Isa::detect`), so the intrinsics below are sound to call.
    #[derive(Clone, Copy)]
    pub(crate) struct Avx2([Avx2Half; 2]);

    /// 8 lanes in one AVX2 register: the part of an [`Avx2`] row the transform
    /// runs in. A radix-16 butterfly holds 16 complex values, 32 registers at 8
    /// lanes (AVX2 has 16, so some spill to L1) but 64 at 16 lanes: whole rows
    /// (the portable 16-lane body built for AVX2, before) spilled every value and
    /// ran 2.4-2.9x slower than rustfft per antenna.
    /// Same invariant as [`Avx2`].
    #[derive(Clone, Copy)]
    pub(crate) struct Avx2Half(__m256);

    /// The 8 x 8 transpose of `r` (row `i` lane `j` to row `j` lane `i`). Loops,
    /// not closures: a closure that is not inlined loses the caller's target
    /// features, and every intrinsic in it becomes a call.
    #[inline(always)]
    fn transpose8(r: &[__m256; 8]) -> [__m256; 8] {
        // SAFETY: AVX, which every caller (an AVX2 build) has.
        unsafe {
            let mut t = [_mm256_setzero_ps(); 8];
            for i in 0..4 {
                t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
                t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
            }
            let mut u = [_mm256_setzero_ps(); 8];
            for b in [0, 4] {
                u[b] = _mm256_shuffle_ps::<0x44>(t[b], t[b + 2]);
                u[b + 1] = _mm256_shuffle_ps::<0xee>(t[b], t[b + 2]);
                u[b + 2] = _mm256_shuffle_ps::<0x44>(t[b + 1], t[b + 3]);
                u[b + 3] = _mm256_shuffle_ps::<0xee>(t[b + 1], t[b + 3]);
            }
            let mut out = [_mm256_setzero_ps(); 8];
            for i in 0..4 {
                out[i] = _mm256_permute2f128_ps::<0x20>(u[i], u[4 + i]);
                out[4 + i] = _mm256_permute2f128_ps::<0x31>(u[i], u[4 + i]);
            }
            out
        }
    }

    // SAFETY (every `unsafe` block below): the intrinsics need AVX2 and FMA, which
    // the only callers (target-feature builds picked by `Isa`) have; loads and
    // stores have the validity their callers guarantee.
    impl Vector for Avx2Half {
        const WIDTH: usize = 8;
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            Self(unsafe { _mm256_loadu_ps(p) })
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f32) {
            unsafe { _mm256_storeu_ps(p, self.0) }
        }
        #[inline(always)]
        fn splat(x: f32) -> Self {
            Self(unsafe { _mm256_set1_ps(x) })
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            Self(unsafe { _mm256_add_ps(self.0, o.0) })
        }
        #[inline(always)]
        fn sub(self, o: Self) -> Self {
            Self(unsafe { _mm256_sub_ps(self.0, o.0) })
        }
        #[inline(always)]
        fn mul(self, o: Self) -> Self {
            Self(unsafe { _mm256_mul_ps(self.0, o.0) })
        }
        #[inline(always)]
        fn mul_add(self, b: Self, c: Self) -> Self {
            Self(unsafe { _mm256_fmadd_ps(self.0, b.0, c.0) })
        }
        #[inline(always)]
        fn mul_sub(self, b: Self, c: Self) -> Self {
            Self(unsafe { _mm256_fmsub_ps(self.0, b.0, c.0) })
        }
        #[inline(always)]
        fn neg_mul_add(self, b: Self, c: Self) -> Self {
            Self(unsafe { _mm256_fnmadd_ps(self.0, b.0, c.0) })
        }
        #[inline(always)]
        fn ci16_to_f32(self, scale: f32) -> (Self, Self) {
            unsafe {
                let w = _mm256_castps_si256(self.0);
                let i = _mm256_srai_epi32::<16>(_mm256_slli_epi32::<16>(w));
                let q = _mm256_srai_epi32::<16>(w);
                let s = _mm256_set1_ps(scale);
                (
                    Self(_mm256_mul_ps(_mm256_cvtepi32_ps(i), s)),
                    Self(_mm256_mul_ps(_mm256_cvtepi32_ps(q), s)),
                )
            }
        }
    }

    /// 8 complex values (`a`: 0-3, `b`: 4-7, as re, im pairs) to their re and im
    /// parts. The even floats of two registers (`0x88`), or the odd (`0xdd`), come
    /// out in 64-bit pairs [0 1 4 5 | 2 3 6 7]; a cross-lane permute of the pairs
    /// puts them in order. A function, not a closure (see [`transpose8`]).
    #[inline(always)]
    fn split_pairs(a: __m256, b: __m256) -> (__m256, __m256) {
        // SAFETY: AVX2, which every caller (an AVX2 build) has.
        unsafe {
            let re = _mm256_castps_pd(_mm256_shuffle_ps::<0x88>(a, b));
            let im = _mm256_castps_pd(_mm256_shuffle_ps::<0xdd>(a, b));
            (
                _mm256_castpd_ps(_mm256_permute4x64_pd::<0xd8>(re)),
                _mm256_castpd_ps(_mm256_permute4x64_pd::<0xd8>(im)),
            )
        }
    }

    /// 8 re and 8 im parts as 8 interleaved complex values (values 0-3, 4-7):
    /// the inverse of [`split_pairs`].
    #[inline(always)]
    fn join_pairs(re: __m256, im: __m256) -> (__m256, __m256) {
        // SAFETY: AVX2, which every caller (an AVX2 build) has.
        unsafe {
            // Values 0, 1, 4, 5 and 2, 3, 6, 7 (unpacks work within 128-bit halves).
            let (a, b) = (_mm256_unpacklo_ps(re, im), _mm256_unpackhi_ps(re, im));
            (
                _mm256_permute2f128_ps::<0x20>(a, b),
                _mm256_permute2f128_ps::<0x31>(a, b),
            )
        }
    }

    impl Avx2 {
        /// The two registers (lanes 0-7, 8-15).
        #[inline(always)]
        pub(crate) fn halves(self) -> [__m256; 2] {
            [self.0[0].0, self.0[1].0]
        }

        #[inline(always)]
        pub(crate) fn from_halves(h: [__m256; 2]) -> Self {
            Self([Avx2Half(h[0]), Avx2Half(h[1])])
        }
    }

    /// `Avx2([a[0].op(b[0]..), a[1].op(b[1]..)])`, written out (see [`transpose8`]).
    macro_rules! halves {
        ($a:ident.$op:ident($($v:ident),*)) => {
            Self([$a.0[0].$op($($v.0[0]),*), $a.0[1].$op($($v.0[1]),*)])
        };
    }

    impl Vector for Avx2 {
        const WIDTH: usize = LANES;
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            unsafe { Self([Avx2Half::load(p), Avx2Half::load(p.add(8))]) }
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f32) {
            unsafe {
                self.0[0].store(p);
                self.0[1].store(p.add(8));
            }
        }
        #[inline(always)]
        fn splat(x: f32) -> Self {
            let v = Avx2Half::splat(x);
            Self([v, v])
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            halves!(self.add(o))
        }
        #[inline(always)]
        fn sub(self, o: Self) -> Self {
            halves!(self.sub(o))
        }
        #[inline(always)]
        fn mul(self, o: Self) -> Self {
            halves!(self.mul(o))
        }
        #[inline(always)]
        fn mul_add(self, b: Self, c: Self) -> Self {
            halves!(self.mul_add(b, c))
        }
        #[inline(always)]
        fn mul_sub(self, b: Self, c: Self) -> Self {
            halves!(self.mul_sub(b, c))
        }
        #[inline(always)]
        fn neg_mul_add(self, b: Self, c: Self) -> Self {
            halves!(self.neg_mul_add(b, c))
        }
        #[inline(always)]
        fn ci16_to_f32(self, scale: f32) -> (Self, Self) {
            let (r0, i0) = self.0[0].ci16_to_f32(scale);
            let (r1, i1) = self.0[1].ci16_to_f32(scale);
            (Self([r0, r1]), Self([i0, i1]))
        }
    }

    impl Lanes for Avx2 {
        type Part = Avx2Half;
        // Indices into several arrays at once (see `Portable`).
        #[allow(clippy::needless_range_loop)]
        #[inline(always)]
        fn transpose(rows: &mut [Self; LANES]) {
            // Quadrant (row block `rb`, lane half `h`) of 8 x 8, transposed, is
            // quadrant (`h`, `rb`) of the result.
            let mut t = [[[unsafe { _mm256_setzero_ps() }; 8]; 2]; 2];
            for rb in 0..2 {
                for h in 0..2 {
                    let mut q = [unsafe { _mm256_setzero_ps() }; 8];
                    for i in 0..8 {
                        q[i] = rows[8 * rb + i].0[h].0;
                    }
                    t[rb][h] = transpose8(&q);
                }
            }
            for h in 0..2 {
                for i in 0..8 {
                    rows[8 * h + i] = Self([Avx2Half(t[0][h][i]), Avx2Half(t[1][h][i])]);
                }
            }
        }
        #[inline(always)]
        unsafe fn load_ci16(p: *const Ci16) -> Self {
            unsafe { Self::load(p.cast::<f32>()) }
        }
        #[inline(always)]
        unsafe fn store_stream(self, p: *mut f32) {
            // A 64-byte aligned row: both halves are 32-byte aligned.
            unsafe {
                _mm256_stream_ps(p, self.0[0].0);
                _mm256_stream_ps(p.add(8), self.0[1].0);
            }
        }
        #[inline(always)]
        fn store_fence() {
            unsafe { _mm_sfence() }
        }
        #[inline(always)]
        fn deinterleave(lo: Self, hi: Self) -> (Self, Self) {
            let (r0, i0) = split_pairs(lo.0[0].0, lo.0[1].0);
            let (r1, i1) = split_pairs(hi.0[0].0, hi.0[1].0);
            (
                Self([Avx2Half(r0), Avx2Half(r1)]),
                Self([Avx2Half(i0), Avx2Half(i1)]),
            )
        }
        #[inline(always)]
        fn interleave(re: Self, im: Self) -> (Self, Self) {
            let (a0, a1) = join_pairs(re.0[0].0, im.0[0].0);
            let (b0, b1) = join_pairs(re.0[1].0, im.0[1].0);
            (
                Self([Avx2Half(a0), Avx2Half(a1)]),
                Self([Avx2Half(b0), Avx2Half(b1)]),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::Isa;

    fn check<V: Lanes>() {
        let mut rows: [V; LANES] = std::array::from_fn(|i| {
            let r: [f32; LANES] = std::array::from_fn(|j| (i * LANES + j) as f32);
            // SAFETY: `r` holds 16 f32.
            unsafe { V::load(r.as_ptr()) }
        });
        V::transpose(&mut rows);
        for (i, row) in rows.iter().enumerate() {
            let got = row.to_array();
            for (j, &v) in got.iter().enumerate() {
                assert_eq!(v, (j * LANES + i) as f32, "row {i} lane {j}");
            }
        }
        let s: Vec<Ci16> = (0..LANES as i16)
            .map(|i| Ci16::new(i * 1000 - 7000, -i * 2047 + 3))
            .chain([Ci16::new(i16::MIN, i16::MAX)])
            .collect();
        for at in [0, 1] {
            // SAFETY: `s` holds 17 samples.
            let (re, im) = unsafe { V::load_ci16(s[at..].as_ptr()) }.ci16_to_f32(0.5);
            for (l, x) in s[at..at + LANES].iter().enumerate() {
                assert_eq!(re.to_array()[l], x.re as f32 * 0.5);
                assert_eq!(im.to_array()[l], x.im as f32 * 0.5);
            }
        }
        let pairs: [f32; 2 * LANES] = std::array::from_fn(|i| i as f32);
        // SAFETY: `pairs` holds 32 f32.
        let (lo, hi) = unsafe { (V::load(pairs.as_ptr()), V::load(pairs[LANES..].as_ptr())) };
        let (re, im) = V::deinterleave(lo, hi);
        let want = |odd: usize| -> [f32; LANES] { std::array::from_fn(|l| (2 * l + odd) as f32) };
        assert_eq!((re.to_array(), im.to_array()), (want(0), want(1)));
        let (lo2, hi2) = V::interleave(re, im);
        assert_eq!(
            [lo2.to_array(), hi2.to_array()].concat(),
            pairs,
            "interleave undoes deinterleave"
        );
        let a = V::splat(3.0);
        let b = V::splat(2.0);
        assert_eq!(a.mul_sub(b, V::splat(1.0)).to_array(), [5.0; LANES]);
        assert_eq!(a.mul_add(b, V::splat(1.0)).to_array(), [7.0; LANES]);
        assert_eq!(a.neg_mul_add(b, V::splat(1.0)).to_array(), [-5.0; LANES]);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,fma")]
    unsafe fn check_avx512() {
        check::<Avx512>();
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn check_avx2() {
        check::<Portable<true>>();
        check::<Avx2>();
    }

    #[test]
    fn every_build_transposes_and_converts() {
        check::<Portable<false>>();
        for isa in Isa::available() {
            match isa {
                // SAFETY: `available` lists only what the CPU has.
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 => unsafe { check_avx512() },
                // SAFETY: as above.
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2 => unsafe { check_avx2() },
                _ => {}
            }
        }
        if Isa::cpu() < Isa::Avx512 {
            println!(
                "SKIPPED: AVX-512 lanes (this CPU has {})",
                Isa::cpu().name()
            );
        }
    }
}
