//! Row kernels, AVX-512BW for the wrapped layout (Zc a multiple of 64, see the module
//! docs of `decoder`) and AVX2 for every Zc (on AVX-512 CPUs it runs the doubled layout,
//! compiled with AVX-512VL): the scalar kernel's arithmetic, one 64-lane
//! vector (AVX2: one 32-lane half) of a row block at a time, with the row's extrinsic
//! values held in registers (the row degree is a compile-time constant, so the per-edge
//! loops unroll and `t` is never stored and reloaded; BG1's degree-19 rows do spill
//! some). In the AVX-512 kernel each new APP vector costs one store, plus a mirror store
//! for the (at most two per edge) vectors that touch the mirrored lanes or wrap (the
//! same stores as `x86::mirror_store` makes, decided in advance by [`windows`]). The
//! AVX2 kernel stores each new APP vector once and the caller restores the mirror after
//! the row (`x86::fixup_wrap_avx2`, `x86::fixup_next_avx2`): on Zen 3 that measured faster
//! than mirror stores, whether behind per-window flag tests or unconditional (to the
//! window itself when no mirror is due). A row's single edge
//! (`decoder::Edge::single`) is its last one; whether a row has one is a compile-time
//! constant as well.
//!
//! The kernels are bound by vector instruction issue. On Zen 4 (which runs a 512-bit
//! operation as two 256-bit halves) saturating adds, absolute values, byte permutes and
//! compares into mask registers issue once per cycle, min/max/logic/blend twice
//! (measured), so per vector the check-node correction is one byte permute into a
//! 128-entry table (AVX-512 VBMI; shifts and adds otherwise) and the sign product is
//! applied to the two candidate magnitudes once instead of to every edge's message;
//! saturation tests are one compare each (on `|t|`, or on `a + 126`). On the Intel
//! AVX-512 cores measured (session 35), 512-bit min/max, `vpabsb`, saturating adds and
//! `vpmovb2m` share one port, compares into masks take the other, and additions, logic
//! and blends either; so the second pass takes the sign mask by a compare.

use super::x86::correct512;
use super::{scalar, Correction, Dims, Edge, LANE_PAD};
use std::arch::x86_64::*;

/// Straight-line code for `e` in `0..d`, `d` a constant up to 19: every index into the
/// register arrays is a constant, so they stay in registers (a `for` loop over a const
/// generic bound is not always fully unrolled, and then they are spilled).
macro_rules! unroll {
    ($d:expr, |$e:ident| $body:block) => {
        unroll!(@ $d, $e, $body, 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18)
    };
    (@ $d:expr, $e:ident, $body:block, $($n:literal)*) => {
        $(
            if $n < $d {
                let $e: usize = $n;
                $body
            }
        )*
    };
}

/// The check-node correction of a decoder: its parameters, and as a table of its value
/// for every magnitude 0..=127 (`table[m] == scalar::correct(m)`), used through a byte
/// permute when `vbmi` (the CPU has AVX-512 VBMI; tests clear it to cover the other
/// path).
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub(crate) struct Corrector {
    table: [i8; 128],
    /// The AVX2 kernel's form (see [`Corrector::nibbles`]): the high-nibble table, then
    /// the low-nibble one, then the floor subtracted at the end.
    nibbles: [i8; 32],
    floor: u8,
    pub correction: Correction,
    pub vbmi: bool,
    /// The CPU has AVX-512VL (the 32-lane row kernel's second build, `row_avx2_vl`).
    pub vl: bool,
}

impl Corrector {
    pub(crate) fn new(correction: Correction) -> Corrector {
        let mut table = [0i8; 128];
        for (m, v) in table.iter_mut().enumerate() {
            // correct(m) <= m <= 127 for every correction.
            *v = scalar::correct(m as u8, correction) as i8;
        }
        let (nibbles, floor) = Self::nibbles(correction);
        Corrector {
            table,
            nibbles,
            floor,
            correction,
            vbmi: std::is_x86_feature_detected!("avx512vbmi"),
            vl: std::is_x86_feature_detected!("avx512vl")
                && std::is_x86_feature_detected!("avx512bw"),
        }
    }

    /// `correct(min(m, 127))` for every byte `m` as `hi[m >> 4] + lo[m & 15]` (`lo`
    /// counting 0 for `m >= 128`, as a byte shuffle does), minus `floor` saturating at 0:
    /// two shuffles instead of a 128-entry lookup. Exact because the correction of
    /// `16 h + l` splits: `(16 h + l) >> s == 16 h >> s + l >> s` for the eighths'
    /// shifts `s <= 3`, and the offset is subtracted from `m` itself (`hi[h] = 16 h`,
    /// `lo[l] = l`, `floor` = beta). `hi[h >= 8]` holds `correct(127)`: the clamp.
    fn nibbles(correction: Correction) -> ([i8; 32], u8) {
        // An offset splits as the identity (eighths 8/8) followed by the floor.
        let (split, floor) = match correction {
            Correction::Offset(b) => (Correction::Eighths(8), b),
            Correction::Eighths(_) => (correction, 0),
        };
        let mut t = [0i8; 32];
        for n in 0..16u8 {
            let m = if n >= 8 { 127 } else { 16 * n };
            t[n as usize] = scalar::correct(m, split) as i8;
            t[16 + n as usize] = scalar::correct(n, split) as i8;
        }
        (t, floor)
    }

    /// The scalar model of the AVX2 lookup (tests check it against `scalar::correct`).
    #[cfg(test)]
    fn nibble_lookup(&self, m: u8) -> u8 {
        let hi = self.nibbles[(m >> 4) as usize] as u8;
        let lo = if m >= 128 {
            0
        } else {
            self.nibbles[16 + (m & 15) as usize] as u8
        };
        (hi + lo).saturating_sub(self.floor)
    }
}

/// Updates one row block; false (nothing done) when its degree has no register kernel
/// (NR rows have 3 to 19 blocks, so this never happens for TS 38.212 graphs).
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512BW (and AVX-512 VBMI if `corr.vbmi`),
/// `dims.wrap` must hold, and the buffers must pass `x86::check_bounds`.
pub(crate) unsafe fn layer(
    app: &mut [i8],
    edges: &[Edge],
    windows: &[u32],
    c2v: &mut [i8],
    dims: &Dims,
    corr: &Corrector,
) -> bool {
    debug_assert!(dims.wrap && dims.zpad == dims.zc);
    debug_assert_eq!(windows.len(), edges.len() * dims.zc / 64);
    // Only the last edge of a row can be single (see `decoder::single_columns`).
    debug_assert!(edges.iter().rev().skip(1).all(|e| !e.single));
    let single = Single {
        write: dims.write_single,
        chan: dims.chan,
    };
    let last_single = edges.last().is_some_and(|e| e.single);
    // Every combination as constants: a run-time test in the unrolled code costs more
    // (measured) than the code size.
    macro_rules! by_degree {
        ($($d:literal)*) => {
            match (edges.len(), dims.first, last_single, corr.vbmi) {
                $(
                    ($d, true, false, true) => {
                        row_vbmi::<true, false, $d>(app, windows, c2v, dims.zc, corr, single)
                    }
                    ($d, false, false, true) => {
                        row_vbmi::<false, false, $d>(app, windows, c2v, dims.zc, corr, single)
                    }
                    ($d, true, true, true) => {
                        row_vbmi::<true, true, $d>(app, windows, c2v, dims.zc, corr, single)
                    }
                    ($d, false, true, true) => {
                        row_vbmi::<false, true, $d>(app, windows, c2v, dims.zc, corr, single)
                    }
                    ($d, true, false, false) => {
                        row_bw::<true, false, $d>(app, windows, c2v, dims.zc, corr, single)
                    }
                    ($d, false, false, false) => {
                        row_bw::<false, false, $d>(app, windows, c2v, dims.zc, corr, single)
                    }
                    ($d, true, true, false) => {
                        row_bw::<true, true, $d>(app, windows, c2v, dims.zc, corr, single)
                    }
                    ($d, false, true, false) => {
                        row_bw::<false, true, $d>(app, windows, c2v, dims.zc, corr, single)
                    }
                )*
                _ => return false,
            }
        };
    }
    by_degree!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19);
    true
}

/// [`layer`] for AVX2, for every Zc: the same row kernel on 32-lane halves (registers
/// hold one half of a row at a time), addressed through the row's [`halves`] table.
/// It writes each new APP vector once, at its window; the caller restores the mirror
/// after the row (`x86::fixup_wrap_avx2` or `x86::fixup_next_avx2`). False (nothing done)
/// when the degree has no kernel.
///
/// # Safety
/// The CPU must support AVX2 (and AVX-512F, BW and VL if `vl`), the buffers must pass
/// `x86::check_bounds`, and `halves` must be this row's table over `app` (built by
/// [`halves`], checked by [`check_halves`]).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn layer_avx2(
    app: &mut [i8],
    edges: &[Edge],
    halves: &[u32],
    c2v: &mut [i8],
    dims: &Dims,
    corr: &Corrector,
    vl: bool,
) -> bool {
    debug_assert_eq!(
        halves.len(),
        edges.len() * dims.zc.div_ceil(HALF),
        "one window per edge and half"
    );
    debug_assert!(edges.iter().rev().skip(1).all(|e| !e.single));
    let single = Single {
        write: dims.write_single,
        chan: dims.chan,
    };
    let last_single = edges.last().is_some_and(|e| e.single);
    macro_rules! by_degree {
        ($($d:literal)*) => {
            match (edges.len(), dims.first, last_single, vl) {
                $(
                    ($d, true, false, false) => row_avx2::<true, false, $d>(app, halves, c2v, corr, single),
                    ($d, false, false, false) => row_avx2::<false, false, $d>(app, halves, c2v, corr, single),
                    ($d, true, true, false) => row_avx2::<true, true, $d>(app, halves, c2v, corr, single),
                    ($d, false, true, false) => row_avx2::<false, true, $d>(app, halves, c2v, corr, single),
                    ($d, true, false, true) => row_avx2_vl::<true, false, $d>(app, halves, c2v, corr, single),
                    ($d, false, false, true) => row_avx2_vl::<false, false, $d>(app, halves, c2v, corr, single),
                    ($d, true, true, true) => row_avx2_vl::<true, true, $d>(app, halves, c2v, corr, single),
                    ($d, false, true, true) => row_avx2_vl::<false, true, $d>(app, halves, c2v, corr, single),
                )*
                _ => return false,
            }
        };
    }
    by_degree!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19);
    true
}

/// Lanes of an AVX2 vector: the row kernel's unit.
const HALF: usize = 32;

/// `correct(min(m, 127))` for every lane (see [`Corrector::nibbles`]): `hi` and `lo`
/// hold the nibble tables in both 128-bit lanes.
#[inline(always)]
unsafe fn correct_nibbles(m: __m256i, hi: __m256i, lo: __m256i, floor: __m256i) -> __m256i {
    // The 16-bit shift pulls the next byte's low bits into the high nibble: masked off.
    let h = _mm256_and_si256(_mm256_srli_epi16(m, 4), _mm256_set1_epi8(0x0f));
    // `lo` by `m` itself: a shuffle reads the low nibble and gives 0 for m >= 128.
    let sum = _mm256_add_epi8(_mm256_shuffle_epi8(hi, h), _mm256_shuffle_epi8(lo, m));
    _mm256_subs_epu8(sum, floor)
}

/// `x` unchanged, out of the optimiser's sight: LLVM turns a masked operand (`x &
/// !mask`, `x ^ (d & mask)`) back into a `vpblendvb`, which issues at half the rate of
/// the logic operations it replaces on Zen 3 (measured). Emits no instruction.
#[inline]
#[target_feature(enable = "avx")]
unsafe fn opaque(mut x: __m256i) -> __m256i {
    std::arch::asm!("/* {0} */", inout(ymm_reg) x, options(pure, nomem, nostack, preserves_flags));
    x
}

/// `x` unchanged, out of the optimiser's sight (see [`opaque`]): a zero passed
/// through it keeps a compare a compare and a masked subtraction a subtraction.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn opaque512(mut x: __m512i) -> __m512i {
    std::arch::asm!("/* {0} */", inout(zmm_reg) x, options(pure, nomem, nostack, preserves_flags));
    x
}

/// Constants and per-lane steps of the AVX2 row kernels (straight-line and looped),
/// every operation as in `scalar::layer`. Vector operation issue is what bounds them,
/// so each step is the cheapest exact form without `vpblendvb` (see [`opaque`]).
#[derive(Clone, Copy)]
struct Lanes {
    one: __m256i,
    k125n: __m256i,
    max127: __m256i,
    /// The correction's nibble tables in both 128-bit lanes and its floor (see
    /// [`Corrector::nibbles`]).
    hi: __m256i,
    lo: __m256i,
    floor: __m256i,
}

/// The two candidate messages of a half (the corrected magnitudes with the sign product
/// applied), their XOR, and the smallest `|t|`.
#[derive(Clone, Copy)]
struct Check {
    min1: __m256i,
    m1: __m256i,
    m1_m2: __m256i,
}

impl Lanes {
    #[inline(always)]
    unsafe fn new(corr: &Corrector) -> Lanes {
        let nib = corr.nibbles.as_ptr() as *const __m128i;
        Lanes {
            one: _mm256_set1_epi8(1),
            k125n: _mm256_set1_epi8(-125),
            max127: _mm256_set1_epi8(127),
            hi: _mm256_broadcastsi128_si256(_mm_loadu_si128(nib)),
            lo: _mm256_broadcastsi128_si256(_mm_loadu_si128(nib.add(1))),
            floor: _mm256_set1_epi8(corr.floor as i8),
        }
    }

    /// `t = a - c`, or `a` where `a` is saturated (127, -128, -127: subtract nothing,
    /// `scalar::saturated`). `a + 1` wraps those to -128..=-126, the only values below
    /// -125.
    #[inline(always)]
    unsafe fn extrinsic(&self, a: __m256i, c: __m256i) -> __m256i {
        let sat = _mm256_cmpgt_epi8(self.k125n, _mm256_add_epi8(a, self.one));
        _mm256_subs_epi8(a, opaque(_mm256_andnot_si256(sat, c)))
    }

    /// The half's [`Check`] from the two smallest `|t|` and the XOR of all `t`.
    #[inline(always)]
    unsafe fn check(&self, min1: __m256i, min2: __m256i, sgn: __m256i) -> Check {
        // The low bit set, so never 0.
        let sgn = _mm256_or_si256(sgn, self.one);
        let m1 = _mm256_sign_epi8(correct_nibbles(min1, self.hi, self.lo, self.floor), sgn);
        let m2 = _mm256_sign_epi8(correct_nibbles(min2, self.hi, self.lo, self.floor), sgn);
        Check {
            min1,
            m1,
            m1_m2: _mm256_xor_si256(m1, m2),
        }
    }

    /// An edge's new message and APP value from its `t`.
    #[inline(always)]
    unsafe fn update(&self, t: __m256i, ck: &Check) -> (__m256i, __m256i) {
        let abs_t = _mm256_abs_epi8(t);
        // m2 where |t| is the minimum, else m1.
        let eq = opaque(_mm256_cmpeq_epi8(abs_t, ck.min1));
        let mag = _mm256_xor_si256(ck.m1, _mm256_and_si256(eq, ck.m1_m2));
        // `127 - |t|` with the sign of t (t | 1 is never 0): zero exactly where t is
        // saturated (|t| >= 127, `scalar::saturated`), which is final and gets nothing
        // added. Its sign on top of the product's (|mag| <= 127: negating never
        // overflows) gives the message, zero there: the message stored for a saturated
        // t is never read (the APP value stays saturated, so the next extrinsic takes
        // it whole).
        let headroom = _mm256_subs_epu8(self.max127, abs_t);
        let c = _mm256_sign_epi8(
            mag,
            _mm256_sign_epi8(headroom, _mm256_or_si256(t, self.one)),
        );
        (c, _mm256_adds_epi8(t, c))
    }
}

/// Folds `|t|` into the two smallest magnitudes so far.
#[inline(always)]
unsafe fn fold_min(t: __m256i, min1: &mut __m256i, min2: &mut __m256i) {
    let m = _mm256_abs_epi8(t);
    *min2 = _mm256_min_epu8(*min2, _mm256_max_epu8(*min1, m));
    *min1 = _mm256_min_epu8(*min1, m);
}

/// Rows above this degree keep their `t` in memory (16 registers).
const SPILL_DEGREE: usize = 10;

/// AVX2 row kernels (`row_avx2`, and `row_avx2_vl`: the same code compiled with
/// AVX-512VL, whose 32 vector registers hold more of a row's `t`): for each 32-lane
/// half (32 lanes of a 64-lane window in the wrapped layout), the steps of [`Lanes`]
/// with the row's `t` in registers (BG1's degree-19 rows spill some; a loop over their
/// edges, which shrinks the code, measured no faster). Messages keep the AVX-512
/// kernel's layout: half `j` of edge `e` at `c2v[((j / 2) * D + e) * 64 + (j % 2) *
/// 32]`.
macro_rules! half_row_kernel {
    ($name:ident, $features:literal) => {
        #[target_feature(enable = $features)]
        unsafe fn $name<const FIRST: bool, const LAST_SINGLE: bool, const D: usize>(
            app: &mut [i8],
            halves: &[u32],
            c2v: &mut [i8],
            corr: &Corrector,
            single: Single,
        ) {
            const W: usize = 64;
            let appp = app.as_mut_ptr();
            let c2vp = c2v.as_mut_ptr();
            let k = Lanes::new(corr);
            let (zero, all) = (_mm256_setzero_si256(), _mm256_set1_epi8(-1));
            for (j, win) in halves.chunks_exact(D).enumerate() {
                let win: &[u32; D] = win.try_into().expect("D windows per half");
                let c2vk = c2vp.add((j / 2) * D * W + (j % 2) * HALF);
                let mut t = [zero; D];
                let (mut min1, mut min2, mut sgn) = (all, all, zero);
                unroll!(D, |e| {
                    let is_single = LAST_SINGLE && e + 1 == D;
                    // A single edge reads its channel copy, its t (see `scalar::layer`).
                    let at = win[e] as usize + if is_single { single.chan } else { 0 };
                    let a = _mm256_loadu_si256(appp.add(at) as *const __m256i);
                    t[e] = if FIRST || is_single {
                        a
                    } else {
                        k.extrinsic(a, _mm256_load_si256(c2vk.add(e * W) as *const __m256i))
                    };
                    fold_min(t[e], &mut min1, &mut min2);
                    sgn = _mm256_xor_si256(sgn, t[e]);
                });
                let ck = k.check(min1, min2, sgn);
                unroll!(D, |e| {
                    let is_single = LAST_SINGLE && e + 1 == D;
                    // A single edge's value is only needed when someone reads it.
                    if !is_single || single.write {
                        // Large degrees spill: |t| recomputed costs an operation, kept it would
                        // cost a store and a load (stores are the scarcer resource).
                        let te = if D > SPILL_DEGREE { opaque(t[e]) } else { t[e] };
                        let (c, v) = k.update(te, &ck);
                        if !is_single {
                            _mm256_store_si256(c2vk.add(e * W) as *mut __m256i, c);
                        }
                        _mm256_storeu_si256(appp.add(win[e] as usize) as *mut __m256i, v);
                    }
                });
            }
        }
    };
}
half_row_kernel!(row_avx2, "avx2");
half_row_kernel!(row_avx2_vl, "avx2,avx512f,avx512bw,avx512vl");

/// Where vector `k` of every edge of a row starts, `windows[k * degree + e]`: the
/// offset of its window in `app`, with [`MIRROR_UP`] / [`MIRROR_DOWN`] set when the
/// vector also has to be stored `Zc` higher / lower (see `x86::mirror_store`).
/// Precomputed, so the kernel does no per-edge address arithmetic.
pub(crate) fn windows(edges: &[Edge], zc: usize) -> Vec<u32> {
    let mut w = Vec::with_capacity(edges.len() * zc / 64);
    for i0 in (0..zc).step_by(64) {
        for ed in edges {
            let q = (ed.shift + i0) % zc;
            let at = u32::try_from(ed.base + q).expect("APP buffer below 1 GiB");
            assert!(
                at & (MIRROR_UP | MIRROR_DOWN) == 0,
                "APP buffer below 1 GiB"
            );
            let up = if q < LANE_PAD { MIRROR_UP } else { 0 };
            let down = if q + 64 > zc { MIRROR_DOWN } else { 0 };
            w.push(at | up | down);
        }
    }
    w
}

/// The AVX2 kernel's table, for every Zc: where 32-lane half `j` (lanes `32 j..32 j +
/// 32`) of every edge of a row starts in `app`, `halves[j * degree + e]`. Wrapped
/// layout: [`windows`]' 64-lane window, plus 32 for the upper half. Otherwise (the
/// doubled layout) `shift + 32 j`; for Zc not a multiple of 32 the last half has
/// padding lanes, which rewrite only mirror bytes that the fix-up copy restores or
/// that the next reader reads in its own padding lanes. No mirror flags: the caller
/// restores the mirror after the row.
pub(crate) fn halves(edges: &[Edge], zc: usize) -> Vec<u32> {
    let wrap = super::wraps(zc);
    let mut w = Vec::with_capacity(edges.len() * zc.div_ceil(HALF));
    for i0 in (0..zc.div_ceil(HALF) * HALF).step_by(HALF) {
        for ed in edges {
            let q = if wrap {
                (ed.shift + i0 / LANE_PAD * LANE_PAD) % zc + i0 % LANE_PAD
            } else {
                ed.shift + i0
            };
            w.push(u32::try_from(ed.base + q).expect("APP buffer below 4 GiB"));
        }
    }
    w
}

/// The bounds [`row_avx2`] relies on for one row's [`halves`] table: every load (a
/// single edge's `chan` further on) and every store lies inside `app`.
pub(crate) fn check_halves(app: &[i8], edges: &[Edge], halves: &[u32], zc: usize, chan: usize) {
    assert_eq!(halves.len(), edges.len() * zc.div_ceil(HALF));
    for win in halves.chunks_exact(edges.len()) {
        for (ed, &w) in edges.iter().zip(win) {
            let at = w as usize;
            let load = at + if ed.single { chan } else { 0 };
            assert!(load + HALF <= app.len());
            assert!(at + HALF <= app.len());
        }
    }
}

/// Hard decisions satisfy every row listed by `row_start`, from the AVX2 kernel's
/// [`halves`] table: per row and half, the XOR of the edges' 32-lane windows must have
/// no sign bit set in a real lane (the last half of a Zc not a multiple of 32 has
/// padding lanes, masked off). Rows run through [`row_parity_ok`] built per degree,
/// so the loop over a row's windows unrolls.
///
/// # Safety
/// The CPU must support AVX2, and `halves` must be the table of these rows over `app`.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn syndrome_ok_halves_avx2(
    app: &[i8],
    halves: &[u32],
    row_start: &[usize],
    zc: usize,
) -> bool {
    let nh = zc.div_ceil(HALF);
    let last = match zc % HALF {
        0 => u32::MAX,
        r => (1u32 << r) - 1,
    };
    let p = app.as_ptr();
    for r in row_start.windows(2) {
        let win = &halves[r[0] * nh..r[1] * nh];
        // Each arm inlines `row_parity_ok` with a literal degree (no base-graph row
        // has more than 19 edges); any other runs the same body with the degree in a
        // register.
        macro_rules! by_degree {
            ($($d:literal)*) => {
                match r[1] - r[0] {
                    0 => true,
                    $($d => row_parity_ok(p, win, $d, last),)*
                    d => row_parity_ok(p, win, d, last),
                }
            };
        }
        // SAFETY: `win` is this row's part of the table over `app` (the caller's
        // guarantee); the CPU has AVX2.
        let ok = unsafe { by_degree!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19) };
        if !ok {
            return false;
        }
    }
    true
}

/// One row of [`syndrome_ok_halves_avx2`]: `win` holds `d` window offsets per half;
/// `last` masks the last half's real lanes. Inlined where `d` is a literal, so that
/// the loop over the windows unrolls.
///
/// # Safety
/// The CPU must support AVX2; every offset in `win` starts 32 readable bytes of `p`.
#[inline(always)]
unsafe fn row_parity_ok(p: *const i8, win: &[u32], d: usize, last: u32) -> bool {
    let nh = win.len() / d;
    for (j, w) in win.chunks_exact(d).enumerate() {
        let mut x = _mm256_setzero_si256();
        for &o in w {
            // SAFETY: as the caller guarantees.
            let a = unsafe { _mm256_loadu_si256(p.add(o as usize) as *const __m256i) };
            x = _mm256_xor_si256(x, a);
        }
        let real = if j + 1 == nh { last } else { u32::MAX };
        if _mm256_movemask_epi8(x) as u32 & real != 0 {
            return false;
        }
    }
    true
}

/// How the kernel treats a row's single edge (see `decoder::Edge::single`), when its
/// `LAST_SINGLE` says the row has one (as the last edge): its `t` is read `chan` bytes
/// further on, it has no message, and its second pass runs only when `write`.
#[derive(Clone, Copy)]
struct Single {
    write: bool,
    chan: usize,
}

/// Flags of a window offset (see [`windows`]).
pub(crate) const MIRROR_UP: u32 = 1 << 31;
pub(crate) const MIRROR_DOWN: u32 = 1 << 30;
const OFFSET: u32 = !(MIRROR_UP | MIRROR_DOWN);

/// The offset of window `w` (its flags masked off), read as a scalar: otherwise LLVM
/// loads a row's offsets as one vector and extracts each with `vpextrd`, two vector
/// operations on the ports the row kernel is short of (4% of a decode, session 35).
#[inline(always)]
fn window_at(w: &u32) -> usize {
    // SAFETY: a reference is valid and aligned for reads.
    (unsafe { std::ptr::read_volatile(w) } & OFFSET) as usize
}

/// One row block of degree `D` (`row_vbmi` / `row_bw`, the same code compiled with and
/// without VBMI); `FIRST`: every old message is zero (see `Dims::first`). Messages are
/// laid out vector by vector (`c2v[(k * D + e) * 64..]`), so each is an aligned access
/// at a constant offset.
macro_rules! row_kernel {
    ($name:ident, $features:literal, $vbmi:literal) => {
        #[target_feature(enable = $features)]
        unsafe fn $name<const FIRST: bool, const LAST_SINGLE: bool, const D: usize>(
            app: &mut [i8],
            windows: &[u32],
            c2v: &mut [i8],
            zc: usize,
            corr: &Corrector,
            single: Single,
        ) {
            const W: usize = 64;
            let appp = app.as_mut_ptr();
            let zero = _mm512_setzero_si512();
            let zo = opaque512(zero);
            let max127 = _mm512_set1_epi8(127);
            let all = _mm512_set1_epi8(-1);
            let (k126, k253) = (_mm512_set1_epi8(126), _mm512_set1_epi8(-3));
            let table = corr.table.as_ptr();
            let (lo, hi) = (
                _mm512_loadu_si512(table as *const __m512i),
                _mm512_loadu_si512(table.add(64) as *const __m512i),
            );
            let nvec = zc / W;
            // The D windows and the messages of vector k.
            let win = |k: usize| -> &[u32; D] {
                windows[k * D..(k + 1) * D]
                    .try_into()
                    .expect("D windows per vector")
            };
            let c2vp = c2v.as_mut_ptr();
            // Edge e's extrinsic value t in vector k.
            macro_rules! edge_t {
                ($k:expr, $e:expr) => {{
                    let e: usize = $e;
                    let is_single = LAST_SINGLE && e + 1 == D;
                    let at = window_at(&win($k)[e]) + if is_single { single.chan } else { 0 };
                    let a = _mm512_loadu_si512(appp.add(at) as *const __m512i);
                    if FIRST || is_single {
                        a
                    } else {
                        let c = _mm512_load_si512(c2vp.add(($k * D + e) * W) as *const __m512i);
                        // Saturated APP: subtract nothing (`scalar::saturated`).
                        _mm512_mask_subs_epi8(a, unsaturated(a, k126, k253), a, c)
                    }
                }};
            }
            // Folds t into the two smallest |t| so far, and (`$e` odd, or the last) the
            // sign product: XOR of all t, three inputs per instruction.
            macro_rules! fold {
                ($t:expr, $e:expr, $min1:expr, $min2:expr, $sgn:expr) => {{
                    let e: usize = $e;
                    let m = _mm512_abs_epi8($t[e]);
                    $min2 = _mm512_min_epu8($min2, _mm512_max_epu8($min1, m));
                    $min1 = _mm512_min_epu8($min1, m);
                    if e % 2 == 1 {
                        $sgn = _mm512_ternarylogic_epi64($sgn, $t[e - 1], $t[e], 0x96);
                    } else if e + 1 == D {
                        $sgn = _mm512_xor_si512($sgn, $t[e]);
                    }
                }};
            }
            // The two candidate messages: corrected magnitudes with the sign product
            // applied; an edge's message is one of them with its own sign on top (the
            // sign of t ^ product).
            macro_rules! candidates {
                ($min1:expr, $min2:expr, $sgn:expr) => {{
                    let (m1, m2) = (_mm512_min_epu8($min1, max127), _mm512_min_epu8($min2, max127));
                    let (m1, m2) = if $vbmi {
                        (
                            _mm512_permutex2var_epi8(lo, m1, hi),
                            _mm512_permutex2var_epi8(lo, m2, hi),
                        )
                    } else {
                        (
                            correct512(m1, corr.correction),
                            correct512(m2, corr.correction),
                        )
                    };
                    let neg = _mm512_cmpgt_epi8_mask(zo, $sgn);
                    (
                        _mm512_mask_sub_epi8(m1, neg, zo, m1),
                        _mm512_mask_sub_epi8(m2, neg, zo, m2),
                    )
                }};
            }
            // First pass over vector k: every edge's t, the smallest |t| and the two
            // candidate messages.
            macro_rules! pass1 {
                ($k:expr) => {{
                    let mut t = [zero; D];
                    let (mut min1, mut min2, mut sgn) = (all, all, zero);
                    unroll!(D, |e| {
                        t[e] = edge_t!($k, e);
                        fold!(t, e, min1, min2, sgn);
                    });
                    let (m1, m2) = candidates!(min1, min2, sgn);
                    (t, min1, m1, m2)
                }};
            }
            // Second pass over edge e of vector k: its new message and APP value.
            macro_rules! edge_out {
                ($k:expr, $e:expr, $t:expr, $min1:expr, $m1:expr, $m2:expr) => {{
                    let e: usize = $e;
                    let is_single = LAST_SINGLE && e + 1 == D;
                    // A single edge's value is only needed when someone reads it.
                    if !is_single || single.write {
                        let t = $t;
                        // |t| and the message's sign both from the sign mask of t, a
                        // compare against a zero the optimiser cannot see: with a
                        // known zero LLVM emits `vpmovb2m` and folds the masked
                        // subtraction back into `vpabsb`. On Intel cores both of those
                        // issue only on the port that also takes every min, max,
                        // `vpabsb` and saturating add here, while a compare into a
                        // mask goes to the other port and a masked subtraction to
                        // either (measured: 2.8% less per block, session 35). On Zen 4
                        // a masked subtraction issues twice as fast as `vpabsb`.
                        // -(-128) wraps to 128 as u8 just as `vpabsb` does.
                        let neg = _mm512_cmpgt_epi8_mask(zo, t);
                        let abs_t = _mm512_mask_sub_epi8(t, neg, zo, t);
                        let eq = _mm512_cmpeq_epi8_mask(abs_t, $min1);
                        let mag = _mm512_mask_blend_epi8(eq, $m1, $m2);
                        // |mag| <= 127: negating never overflows.
                        let c = _mm512_mask_sub_epi8(mag, neg, zo, mag);
                        if !is_single {
                            _mm512_store_si512(c2vp.add(($k * D + e) * W) as *mut __m512i, c);
                        }
                        // Saturated t (|t| >= 127) is final: add nothing
                        // (`scalar::saturated`).
                        let unsat = _mm512_cmplt_epu8_mask(abs_t, max127);
                        let v = _mm512_mask_adds_epi8(t, unsat, t, c);
                        let w = win($k)[e];
                        let p = appp.add((w & OFFSET) as usize);
                        _mm512_storeu_si512(p as *mut __m512i, v);
                        if w & MIRROR_UP != 0 {
                            _mm512_storeu_si512(p.add(zc) as *mut __m512i, v);
                        }
                        if w & MIRROR_DOWN != 0 {
                            _mm512_storeu_si512(p.sub(zc) as *mut __m512i, v);
                        }
                    }
                }};
            }
            macro_rules! pass2 {
                ($k:expr, $state:expr) => {{
                    let (t, min1, m1, m2) = $state;
                    unroll!(D, |e| { edge_out!($k, e, t[e], min1, m1, m2) });
                }};
            }
            if D <= PIPELINE_MAX_DEGREE {
                // Software pipelined: the first pass of vector k + 1 (a long dependency
                // chain through min1) is issued before the second pass of vector k, so the
                // two overlap. Vector k + 1 reads none of the lanes vector k writes (each
                // lane has one window per row block), so the order is free.
                let mut cur = pass1!(0);
                for k in 0..nvec - 1 {
                    let next = pass1!(k + 1);
                    pass2!(k, cur);
                    cur = next;
                }
                pass2!(nvec - 1, cur);
            } else {
                // Too many edges for two vectors' t in registers: the passes interleave
                // edge by edge, each new t taking the register its edge's old t leaves.
                let (mut t, mut min1, mut m1, mut m2) = pass1!(0);
                for k in 0..nvec - 1 {
                    let (mut n1, mut n2, mut sgn) = (all, all, zero);
                    unroll!(D, |e| {
                        edge_out!(k, e, t[e], min1, m1, m2);
                        t[e] = edge_t!(k + 1, e);
                        fold!(t, e, n1, n2, sgn);
                    });
                    (m1, m2) = candidates!(n1, n2, sgn);
                    min1 = n1;
                }
                pass2!(nvec - 1, (t, min1, m1, m2));
            }
        }
    };
}

/// Rows of at most this degree are software pipelined (two vectors' `t` fit the 32
/// registers); larger ones interleave the passes edge by edge. On the Intel AVX-512
/// VM (session 35) interleaving took 2% off a BG1 block for the degree-19 rows, and
/// added 1-2% when it also ran the rows of degree 9 and 10, or every row.
const PIPELINE_MAX_DEGREE: usize = 10;

/// Lanes of `x` that are not saturated (|x| < 127, see `scalar::saturated`) without
/// `|x|`: `x + 126` wraps 127, -128 and -127 to 253, 254 and 255, every other value
/// below 253.
#[inline(always)]
unsafe fn unsaturated(x: __m512i, k126: __m512i, k253: __m512i) -> __mmask64 {
    _mm512_cmplt_epu8_mask(_mm512_add_epi8(x, k126), k253)
}

row_kernel!(row_vbmi, "avx512f,avx512bw,avx512vbmi", true);
row_kernel!(row_bw, "avx512f,avx512bw", false);

/// The interleaved blocks (bit `b` of `blocks`, see `decoder::failing_blocks`) whose
/// hard decisions fail a row listed by `row_start` (`decoder::syndrome_failures`),
/// reading the windows from the kernel's table: per row and 64-lane vector, the XOR of
/// the edges' windows must have no sign bit set. The table saves the per-edge window
/// arithmetic and the accumulator's round trips through memory of the portable loop;
/// rows run through [`row_parity_lanes_avx512`] built per degree, so the loop over a
/// row's windows unrolls. Stops once every block has failed.
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512BW, and `windows` must be the table of these
/// rows (as built by [`windows`]) over `app`.
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) unsafe fn syndrome_failures_avx512(
    app: &[i8],
    windows: &[u32],
    row_start: &[usize],
    zc: usize,
    blocks: usize,
) -> u64 {
    let nvec = zc / LANE_PAD;
    let p = app.as_ptr();
    let all = super::all_blocks(blocks);
    let mut failed = 0;
    for r in row_start.windows(2) {
        let win = &windows[r[0] * nvec..r[1] * nvec];
        // As in `syndrome_ok_halves_avx2`: a literal degree per arm, any other in a
        // register.
        macro_rules! by_degree {
            ($($d:literal)*) => {
                match r[1] - r[0] {
                    0 => 0,
                    $($d => row_parity_lanes_avx512(p, win, $d),)*
                    d => row_parity_lanes_avx512(p, win, d),
                }
            };
        }
        // SAFETY: `win` is this row's part of the table over `app` (the caller's
        // guarantee); the CPU has AVX-512F and BW.
        let lanes = unsafe { by_degree!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19) };
        failed |= super::failing_blocks(lanes, blocks);
        if failed == all {
            break;
        }
    }
    failed
}

/// One row of [`syndrome_failures_avx512`]: `win` holds `d` window offsets (with
/// their mirror flags) per 64-lane vector. The vectors' XORs are ORed together; bit
/// `l` of the result is set when a lane `l mod 64` fails the row. Three windows per
/// `vpternlogq`.
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512BW; every offset in `win` starts 64
/// readable bytes of `p`.
#[inline(always)]
unsafe fn row_parity_lanes_avx512(p: *const i8, win: &[u32], d: usize) -> u64 {
    let load = |w: &u32| {
        // SAFETY: as the caller guarantees.
        unsafe { _mm512_loadu_si512(p.add(window_at(w)) as *const __m512i) }
    };
    let mut any = _mm512_setzero_si512();
    for w in win.chunks_exact(d) {
        let mut x = load(&w[0]);
        let mut pairs = w[1..].chunks_exact(2);
        for pair in &mut pairs {
            x = _mm512_ternarylogic_epi64(x, load(&pair[0]), load(&pair[1]), 0x96);
        }
        if let [last] = pairs.remainder() {
            x = _mm512_xor_si512(x, load(last));
        }
        any = _mm512_or_si512(any, x);
    }
    _mm512_movepi8_mask(any)
}

/// [`syndrome_failures_avx512`] with two 32-lane halves per window.
///
/// # Safety
/// The CPU must support AVX2; `windows` as for [`syndrome_failures_avx512`].
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn syndrome_failures_avx2(
    app: &[i8],
    windows: &[u32],
    row_start: &[usize],
    zc: usize,
    blocks: usize,
) -> u64 {
    let nvec = zc / LANE_PAD;
    let p = app.as_ptr();
    let all = super::all_blocks(blocks);
    let mut failed = 0;
    for r in row_start.windows(2) {
        let d = r[1] - r[0];
        let (mut lo_any, mut hi_any) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        for win in windows[r[0] * nvec..r[1] * nvec].chunks_exact(d) {
            let (mut lo, mut hi) = (_mm256_setzero_si256(), _mm256_setzero_si256());
            for &w in win {
                let a = p.add((w & OFFSET) as usize);
                lo = _mm256_xor_si256(lo, _mm256_loadu_si256(a as *const __m256i));
                hi = _mm256_xor_si256(hi, _mm256_loadu_si256(a.add(32) as *const __m256i));
            }
            lo_any = _mm256_or_si256(lo_any, lo);
            hi_any = _mm256_or_si256(hi_any, hi);
        }
        let lanes = _mm256_movemask_epi8(lo_any) as u32 as u64
            | (_mm256_movemask_epi8(hi_any) as u32 as u64) << 32;
        failed |= super::failing_blocks(lanes, blocks);
        if failed == all {
            break;
        }
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX2 kernel's nibble form of every correction (its scalar model and, where
    /// the CPU has AVX2, the vector code) gives `scalar::correct` of the clamped
    /// magnitude for every byte (min2 is 255 in a degree-1 row).
    #[test]
    fn nibble_correction_matches_scalar_for_every_byte() {
        let avx2 = std::is_x86_feature_detected!("avx2");
        if !avx2 {
            println!("SKIPPED: AVX2 nibble correction (CPU lacks AVX2)");
        }
        let corrections = (1..=8)
            .map(Correction::Eighths)
            .chain((0..=127).map(Correction::Offset));
        for c in corrections {
            let corr = Corrector::new(c);
            let expected: Vec<u8> = (0..=255u8)
                .map(|m| scalar::correct(m.min(127), c))
                .collect();
            let model: Vec<u8> = (0..=255u8).map(|m| corr.nibble_lookup(m)).collect();
            assert_eq!(model, expected, "{c:?}: scalar model");
            if avx2 {
                let input: Vec<u8> = (0..=255u8).collect();
                let mut got = vec![0u8; 256];
                // SAFETY: AVX2 detected; 8 whole vectors inside both 256-byte buffers.
                unsafe { correct_all_avx2(&corr, &input, &mut got) };
                assert_eq!(got, expected, "{c:?}: AVX2");
            }
        }
    }

    /// [`correct_nibbles`] over whole vectors of `input`.
    #[target_feature(enable = "avx2")]
    unsafe fn correct_all_avx2(corr: &Corrector, input: &[u8], out: &mut [u8]) {
        let nib = corr.nibbles.as_ptr() as *const __m128i;
        let hi = _mm256_broadcastsi128_si256(_mm_loadu_si128(nib));
        let lo = _mm256_broadcastsi128_si256(_mm_loadu_si128(nib.add(1)));
        let floor = _mm256_set1_epi8(corr.floor as i8);
        for (i, o) in input.chunks_exact(HALF).zip(out.chunks_exact_mut(HALF)) {
            let m = _mm256_loadu_si256(i.as_ptr() as *const __m256i);
            let v = correct_nibbles(m, hi, lo, floor);
            _mm256_storeu_si256(o.as_mut_ptr() as *mut __m256i, v);
        }
    }
}
