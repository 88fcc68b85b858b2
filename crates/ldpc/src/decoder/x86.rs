//! The AVX2 (32-lane) layer kernel for rows the register kernels of `x86_rows` do not
//! take, the mirror fix-ups after those kernels, and the AVX-512 check-node correction:
//! the scalar kernel's arithmetic, vector by vector. Padding lanes (>= Zc) compute
//! values that are never read back into real lanes (see the module docs of `decoder`).

use super::{Correction, Dims, Edge, LANE_PAD};
use std::arch::x86_64::*;

/// The bounds every kernel relies on before it uses raw pointers. `Decoder::new` builds
/// the layout so they hold and checks them once; debug builds re-check on every call.
pub(crate) fn check_bounds(
    app: &[i8],
    edges: &[Edge],
    c2v: &[i8],
    work: &[i8],
    dims: &Dims,
    w: usize,
) {
    assert!(dims.zpad.is_multiple_of(w) && dims.zpad >= dims.zc);
    assert!(c2v.len() >= edges.len() * dims.zpad);
    assert!(work.len() >= edges.len() * w);
    for ed in edges {
        assert!(ed.shift < dims.zc);
        // Single edges read their channel copy `chan` further on.
        let end = ed.base + if ed.single { dims.chan } else { 0 };
        assert!(end + ed.shift + dims.zpad <= app.len());
        assert!(ed.base >= w && end + 2 * dims.zc + w <= app.len());
    }
}

/// Direct mirror stores, so no fix-up pass is needed: each new APP vector written at
/// window offset `q` is also written where the same lanes are mirrored. Doubled layout
/// (Zc a multiple of the vector width, every lane real): `q + Zc` for the first copy,
/// `q - Zc` for the second, both for a vector straddling Zc. Wrapped layout (`mirrored`
/// = 64 lanes, `q < Zc`): `q + Zc` when the vector touches the first 64 lanes, `q - Zc`
/// when it wraps. The parts that land outside the mirrored ranges go to the column's
/// padding, which is never read; later vectors of the same block never load from the
/// ranges these stores rewrite.
#[inline(always)]
unsafe fn mirror_store(
    col: *mut i8,
    q: usize,
    zc: usize,
    w: usize,
    mirrored: usize,
    store: impl Fn(*mut i8),
) {
    if q < mirrored {
        store(col.add(q + zc));
    }
    if q + w > zc {
        // q + w > Zc, so q - Zc > -w >= -FRONT_PAD: inside the column's front pad.
        store(col.offset(q as isize - zc as isize));
    }
}

#[target_feature(enable = "avx2")]
pub(crate) fn correct256(m: __m256i, c: Correction) -> __m256i {
    match c {
        Correction::Offset(b) => _mm256_subs_epu8(m, _mm256_set1_epi8(b as i8)),
        Correction::Eighths(k) => {
            let mut r = _mm256_setzero_si256();
            if k & 8 != 0 {
                r = m;
            }
            if k & 4 != 0 {
                r = _mm256_add_epi8(
                    r,
                    _mm256_and_si256(_mm256_srli_epi16(m, 1), _mm256_set1_epi8(0x7f)),
                );
            }
            if k & 2 != 0 {
                r = _mm256_add_epi8(
                    r,
                    _mm256_and_si256(_mm256_srli_epi16(m, 2), _mm256_set1_epi8(0x3f)),
                );
            }
            if k & 1 != 0 {
                r = _mm256_add_epi8(
                    r,
                    _mm256_and_si256(_mm256_srli_epi16(m, 3), _mm256_set1_epi8(0x1f)),
                );
            }
            r
        }
    }
}

/// All-ones lanes where `abs_x` (`|x|` as u8) is saturated (>= 127, see
/// `scalar::saturated`).
#[inline(always)]
unsafe fn saturated256(abs_x: __m256i, max127: __m256i) -> __m256i {
    _mm256_cmpeq_epi8(_mm256_max_epu8(abs_x, max127), abs_x)
}

/// AVX2 version of `scalar::layer`.
///
/// # Safety
/// The CPU must support AVX2, and the buffers must pass `check_bounds`.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn layer_avx2(
    app: &mut [i8],
    edges: &[Edge],
    c2v: &mut [i8],
    work: &mut [i8],
    dims: &Dims,
    corr: Correction,
) {
    if cfg!(debug_assertions) {
        check_bounds(app, edges, c2v, work, dims, 32);
    }
    // Loop-invariant choices as constants, so the inner loops carry no tests for them.
    let mode = if dims.wrap {
        WRAPPED
    } else if dims.zc.is_multiple_of(32) {
        DOUBLED
    } else {
        FIXUP
    };
    match (dims.first, mode) {
        (true, WRAPPED) => layer_avx2_impl::<true, WRAPPED>(app, edges, c2v, work, dims, corr),
        (true, DOUBLED) => layer_avx2_impl::<true, DOUBLED>(app, edges, c2v, work, dims, corr),
        (true, _) => layer_avx2_impl::<true, FIXUP>(app, edges, c2v, work, dims, corr),
        (false, WRAPPED) => layer_avx2_impl::<false, WRAPPED>(app, edges, c2v, work, dims, corr),
        (false, DOUBLED) => layer_avx2_impl::<false, DOUBLED>(app, edges, c2v, work, dims, corr),
        (false, _) => layer_avx2_impl::<false, FIXUP>(app, edges, c2v, work, dims, corr),
    }
}

/// How the AVX2 kernel keeps the mirror: wrapped layout with direct stores, doubled
/// layout with direct stores (Zc a multiple of 32), or doubled with a fix-up copy.
const WRAPPED: u8 = 0;
const DOUBLED: u8 = 1;
const FIXUP: u8 = 2;

/// `layer_avx2` for one first-iteration / mirror-mode combination.
#[target_feature(enable = "avx2")]
unsafe fn layer_avx2_impl<const FIRST: bool, const MODE: u8>(
    app: &mut [i8],
    edges: &[Edge],
    c2v: &mut [i8],
    work: &mut [i8],
    dims: &Dims,
    corr: Correction,
) {
    const W: usize = 32;
    let (zc, zpad, first) = (dims.zc, dims.zpad, FIRST);
    let appp = app.as_mut_ptr();
    let c2vp = c2v.as_mut_ptr();
    let wp = work.as_mut_ptr();
    let one = _mm256_set1_epi8(1);
    let max127 = _mm256_set1_epi8(127);
    let all = _mm256_set1_epi8(-1);
    let window = |shift: usize, i0: usize| {
        let q = shift + i0;
        if MODE == WRAPPED && q >= zc {
            q - zc
        } else {
            q
        }
    };
    // Whole 32-lane vectors up to Zc, not up to the 64-lane padding: with direct mirror
    // stores a vector of padding lanes would write a second update of lanes it aliases.
    let lanes = zc.div_ceil(W) * W;
    let mut i0 = 0;
    while i0 < lanes {
        let (mut min1, mut min2, mut sgn) = (all, all, _mm256_setzero_si256());
        for (e, ed) in edges.iter().enumerate() {
            // A single edge reads its channel copy, its t (see `scalar::layer`).
            let src = ed.base + if ed.single { dims.chan } else { 0 };
            let a = _mm256_loadu_si256(appp.add(src + window(ed.shift, i0)) as *const __m256i);
            let t = if first || ed.single {
                a
            } else {
                let c = _mm256_loadu_si256(c2vp.add(e * zpad + i0) as *const __m256i);
                // Saturated APP: subtract nothing (see `scalar::saturated`).
                let sat = saturated256(_mm256_abs_epi8(a), max127);
                _mm256_subs_epi8(a, _mm256_andnot_si256(sat, c))
            };
            _mm256_storeu_si256(wp.add(e * W) as *mut __m256i, t);
            let m = _mm256_abs_epi8(t);
            min2 = _mm256_min_epu8(min2, _mm256_max_epu8(min1, m));
            min1 = _mm256_min_epu8(min1, m);
            sgn = _mm256_xor_si256(sgn, t);
        }
        // The magnitudes with the sign product applied (once per vector); an edge's
        // message is one of them with its own sign on top (the sign of t ^ product).
        let sgn = _mm256_or_si256(sgn, one);
        let m1 = _mm256_sign_epi8(correct256(_mm256_min_epu8(min1, max127), corr), sgn);
        let m2 = _mm256_sign_epi8(correct256(_mm256_min_epu8(min2, max127), corr), sgn);
        for (e, ed) in edges.iter().enumerate() {
            if ed.single && !dims.write_single {
                continue;
            }
            let t = _mm256_loadu_si256(wp.add(e * W) as *const __m256i);
            let abs_t = _mm256_abs_epi8(t);
            let eq = _mm256_cmpeq_epi8(abs_t, min1);
            let mag = _mm256_blendv_epi8(m1, m2, eq);
            // |mag| <= 127: negating never overflows.
            let c = _mm256_sign_epi8(mag, _mm256_or_si256(t, one));
            if !ed.single {
                _mm256_storeu_si256(c2vp.add(e * zpad + i0) as *mut __m256i, c);
            }
            // Saturated t (|t| >= 127) is final: add nothing (`scalar::saturated`).
            let tsat = saturated256(abs_t, max127);
            let v = _mm256_adds_epi8(t, _mm256_andnot_si256(tsat, c));
            let q = window(ed.shift, i0);
            _mm256_storeu_si256(appp.add(ed.base + q) as *mut __m256i, v);
            let mirrored = if MODE == WRAPPED { LANE_PAD } else { zc };
            if MODE != FIXUP {
                mirror_store(appp.add(ed.base), q, zc, W, mirrored, |p| {
                    _mm256_storeu_si256(p as *mut __m256i, v)
                });
            }
        }
        i0 += W;
    }
    if MODE == FIXUP {
        fixup_avx2(app, edges, dims);
    }
}

/// Doubled layout: restores `app[c][j + Zc] == app[c][j]` for every column the row
/// block rewrote (see `decoder::fixup_scalar`): `[0, shift)` from `[Zc, Zc + shift)`,
/// `[shift + Zc, 2 Zc)` from `[shift, Zc)`, in whole 32-byte vectors (short copies are
/// the common case at small Zc, where a byte loop cost more than the row kernel).
///
/// # Safety
/// The CPU must support AVX2, and the buffers must pass `check_bounds` (front pad and
/// tail of at least 32 bytes).
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn fixup_avx2(app: &mut [i8], edges: &[Edge], dims: &Dims) {
    let appp = app.as_mut_ptr();
    for ed in edges.iter().filter(|ed| !ed.single || dims.write_single) {
        full_fixup(appp.add(ed.base), ed.shift, dims.zc);
    }
}

/// [`fixup_avx2`] only where the column's next reader needs it: `next[e]` is the shift
/// at which the next row of the iteration reads edge `e`'s column, [`FULL`] or
/// [`WINDOW`] (see [`next_readers`]). The row wrote the column's current values at
/// `[shift, shift + Zc)`; the reader needs them at `[next, next + Zc)`, so only the
/// `|next - shift|` lanes between the two windows are copied. The rest of the column
/// is stale until the column's last row in the iteration, which restores all of it
/// (the parity check reads every row's window, the output the first copy). A single
/// edge at shift 0 (every one of TS 38.212's: the extension columns are an identity)
/// is left as its row wrote it.
///
/// # Safety
/// As [`fixup_avx2`]; `next` holds one entry per edge, each [`FULL`], [`WINDOW`] or
/// below Zc.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn fixup_next_avx2(app: &mut [i8], edges: &[Edge], next: &[u32], dims: &Dims) {
    debug_assert_eq!(next.len(), edges.len());
    let appp = app.as_mut_ptr();
    for (ed, &to) in edges.iter().zip(next) {
        let col = appp.add(ed.base);
        match to {
            WINDOW => {}
            FULL => full_fixup(col, ed.shift, dims.zc),
            // `[to, shift)` from its copy Zc higher, which the row wrote.
            to if (to as usize) < ed.shift => copy_down(col, to as usize, ed.shift, dims.zc),
            // `[shift + Zc, to + Zc)`, which the row's padding lanes overwrote.
            to => copy_up(col, ed.shift, to as usize, dims.zc),
        }
    }
}

/// A [`fixup_next_avx2`] entry: the column's last row in the iteration restores all of
/// it.
pub(crate) const FULL: u32 = u32::MAX;

/// A [`fixup_next_avx2`] entry: a single edge at shift 0. No other row reads its
/// column (its extrinsic value is the channel copy), and its row's window is the
/// column's first copy, where the syndrome, the output and the posterior read it: its
/// mirror is never read.
pub(crate) const WINDOW: u32 = u32::MAX - 1;

/// For every edge (rows listed by `row_start`), the shift of the next row of the
/// iteration that reads its column, [`FULL`] when there is none (its last row, or a
/// single edge at another shift), or [`WINDOW`] for a single edge at shift 0.
pub(crate) fn next_readers(edges: &[Edge], row_start: &[usize]) -> Vec<u32> {
    let mut next = Vec::with_capacity(edges.len());
    for row in row_start.windows(2) {
        let later = &edges[row[1]..];
        next.extend(edges[row[0]..row[1]].iter().map(|ed| {
            if ed.single {
                return if ed.shift == 0 { WINDOW } else { FULL };
            }
            match later.iter().find(|o| o.base == ed.base) {
                Some(o) => u32::try_from(o.shift).expect("shift below Zc"),
                None => FULL,
            }
        }));
    }
    next
}

/// Both copies of [`fixup_avx2`] for one column at `col`.
///
/// # Safety
/// As [`fixup_avx2`].
#[inline(always)]
unsafe fn full_fixup(col: *mut i8, shift: usize, zc: usize) {
    copy_down(col, 0, shift, zc);
    copy_up(col, shift, zc, zc);
}

/// `[lo, hi)` from `[lo + Zc, hi + Zc)` in 32-byte vectors running down from `hi`: the
/// last one spills below `lo` (into the front pad when `lo` is 0), with bytes from
/// below `lo + Zc`, so no lane at or above `lo` gets a stale value.
///
/// # Safety
/// As [`fixup_avx2`]; `hi - lo <= Zc`.
#[inline(always)]
unsafe fn copy_down(col: *mut i8, lo: usize, hi: usize, zc: usize) {
    const W: isize = 32;
    let mut end = hi as isize;
    while end > lo as isize {
        copy32(col.offset(end - W), col.offset(zc as isize + end - W));
        end -= W;
    }
}

/// `[lo + Zc, hi + Zc)` from `[lo, hi)` in 32-byte vectors running up from `lo`: the
/// last one spills past `hi + Zc` (past `2 Zc` into the tail when `hi` is Zc), into
/// lanes that only padding lanes of the next reader read.
///
/// # Safety
/// As [`fixup_avx2`]; `hi - lo <= Zc`.
#[inline(always)]
unsafe fn copy_up(col: *mut i8, lo: usize, hi: usize, zc: usize) {
    let mut o = lo;
    while o < hi {
        copy32(col.add(o + zc), col.add(o));
        o += 32;
    }
}

#[inline(always)]
unsafe fn copy32(dst: *mut i8, src: *const i8) {
    _mm256_storeu_si256(
        dst as *mut __m256i,
        _mm256_loadu_si256(src as *const __m256i),
    );
}

/// Wrapped layout: `decoder::fixup_wrap` for every column the row block rewrote (each
/// APP lane written once, at its window): with `r = shift % 64`, lanes `[0, r)` were
/// written into the mirror and `[r, 64)` directly, so both copies of the 64 mirrored
/// lanes become `mirror < r ? mirror : direct`, one byte blend per 32 lanes (`r = 0`:
/// the direct lanes copied up).
///
/// # Safety
/// The CPU must support AVX2, Zc must be a multiple of 64 and the buffers must pass
/// `check_bounds`.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn fixup_wrap_avx2(app: &mut [i8], edges: &[Edge], dims: &Dims) {
    const W: usize = 32;
    // Lane i of the mask loaded at `64 - r + o` is all-ones exactly when `o + i < r`.
    static FROM_MIRROR: [i8; 2 * LANE_PAD] = {
        let mut m = [0i8; 2 * LANE_PAD];
        let mut i = 0;
        while i < LANE_PAD {
            m[i] = -1;
            i += 1;
        }
        m
    };
    let (appp, zc) = (app.as_mut_ptr(), dims.zc);
    for ed in edges.iter().filter(|ed| !ed.single || dims.write_single) {
        let r = ed.shift % LANE_PAD;
        let col = appp.add(ed.base);
        for o in [0, W] {
            let mask = _mm256_loadu_si256(FROM_MIRROR.as_ptr().add(LANE_PAD - r + o) as *const _);
            let direct = _mm256_loadu_si256(col.add(o) as *const __m256i);
            let mirror = _mm256_loadu_si256(col.add(zc + o) as *const __m256i);
            let v = _mm256_blendv_epi8(direct, mirror, mask);
            _mm256_storeu_si256(col.add(o) as *mut __m256i, v);
            _mm256_storeu_si256(col.add(zc + o) as *mut __m256i, v);
        }
    }
}

#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) fn correct512(m: __m512i, c: Correction) -> __m512i {
    match c {
        Correction::Offset(b) => _mm512_subs_epu8(m, _mm512_set1_epi8(b as i8)),
        Correction::Eighths(k) => {
            let mut r = _mm512_setzero_si512();
            if k & 8 != 0 {
                r = m;
            }
            if k & 4 != 0 {
                r = _mm512_add_epi8(
                    r,
                    _mm512_and_si512(_mm512_srli_epi16(m, 1), _mm512_set1_epi8(0x7f)),
                );
            }
            if k & 2 != 0 {
                r = _mm512_add_epi8(
                    r,
                    _mm512_and_si512(_mm512_srli_epi16(m, 2), _mm512_set1_epi8(0x3f)),
                );
            }
            if k & 1 != 0 {
                r = _mm512_add_epi8(
                    r,
                    _mm512_and_si512(_mm512_srli_epi16(m, 3), _mm512_set1_epi8(0x1f)),
                );
            }
            r
        }
    }
}
