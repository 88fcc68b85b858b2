//! AVX-512BW kernel for the wrapped layout (Zc a multiple of 64, see the module docs of
//! `decoder`): the scalar kernel's arithmetic, one 64-lane vector of a row block at a
//! time, with the row's extrinsic values held in registers (the row degree is a
//! compile-time constant, so the per-edge loops unroll and `t` is never stored and
//! reloaded). Each new APP vector costs one store, plus a mirror store for the (at most
//! two per edge) vectors that touch the first 64 lanes or wrap.

use super::x86::{correct512, mirror_store};
use super::{Correction, Dims, Edge, LANE_PAD};
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

/// Updates one row block; false (nothing done) when its degree has no register kernel
/// (NR rows have 3 to 19 blocks, so this never happens for TS 38.212 graphs).
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512BW, `dims.wrap` must hold, and the buffers
/// must pass `x86::check_bounds`.
pub(crate) unsafe fn layer(
    app: &mut [i8],
    edges: &[Edge],
    c2v: &mut [i8],
    dims: &Dims,
    corr: Correction,
) -> bool {
    debug_assert!(dims.wrap && dims.zpad == dims.zc);
    macro_rules! by_degree {
        ($($d:literal)*) => {
            match (edges.len(), dims.first) {
                $(
                    ($d, true) => row::<true, $d>(app, edges, c2v, dims.zc, corr),
                    ($d, false) => row::<false, $d>(app, edges, c2v, dims.zc, corr),
                )*
                _ => return false,
            }
        };
    }
    by_degree!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19);
    true
}

/// One row block of degree `D`; `FIRST`: every old message is zero (see `Dims::first`).
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn row<const FIRST: bool, const D: usize>(
    app: &mut [i8],
    edges: &[Edge],
    c2v: &mut [i8],
    zc: usize,
    corr: Correction,
) {
    const W: usize = 64;
    let edges: &[Edge; D] = edges.try_into().expect("caller dispatches on the degree");
    let appp = app.as_mut_ptr();
    let c2vp = c2v.as_mut_ptr();
    let zero = _mm512_setzero_si512();
    let max127 = _mm512_set1_epi8(127);
    let all = _mm512_set1_epi8(-1);
    let min128 = _mm512_set1_epi8(i8::MIN);
    let window = |e: usize, i0: usize| {
        let q = edges[e].shift + i0;
        if q >= zc {
            q - zc
        } else {
            q
        }
    };
    let mut i0 = 0;
    while i0 < zc {
        let mut t = [zero; D];
        let (mut min1, mut min2) = (all, all);
        unroll!(D, |e| {
            let a = _mm512_loadu_si512(appp.add(edges[e].base + window(e, i0)) as *const __m512i);
            t[e] = if FIRST {
                a
            } else {
                let c = _mm512_loadu_si512(c2vp.add(e * zc + i0) as *const __m512i);
                // Saturated APP: subtract nothing (`scalar::saturated`).
                let unsat = _mm512_mask_cmpneq_epi8_mask(_mm512_cmpneq_epi8_mask(a, max127), a, min128);
                _mm512_mask_subs_epi8(a, unsat, a, c)
            };
            let m = _mm512_abs_epi8(t[e]);
            min2 = _mm512_min_epu8(min2, _mm512_max_epu8(min1, m));
            min1 = _mm512_min_epu8(min1, m);
        });
        // Sign product: XOR of all t, three inputs per instruction.
        let mut sgn = zero;
        unroll!(D, |e| {
            if e % 2 == 1 {
                sgn = _mm512_ternarylogic_epi64(sgn, t[e - 1], t[e], 0x96);
            } else if e + 1 == D {
                sgn = _mm512_xor_si512(sgn, t[e]);
            }
        });
        let m1 = correct512(_mm512_min_epu8(min1, max127), corr);
        let m2 = correct512(_mm512_min_epu8(min2, max127), corr);
        unroll!(D, |e| {
            let t = t[e];
            let abs_t = _mm512_abs_epi8(t);
            let eq = _mm512_cmpeq_epi8_mask(abs_t, min1);
            let mag = _mm512_mask_blend_epi8(eq, m1, m2);
            let neg = _mm512_movepi8_mask(_mm512_xor_si512(t, sgn));
            let c = _mm512_mask_sub_epi8(mag, neg, zero, mag);
            _mm512_storeu_si512(c2vp.add(e * zc + i0) as *mut __m512i, c);
            // Saturated t is final: add nothing (`scalar::saturated`).
            let unsat = _mm512_mask_cmpneq_epi8_mask(_mm512_cmpneq_epi8_mask(t, max127), t, min128);
            let v = _mm512_mask_adds_epi8(t, unsat, t, c);
            let (col, q) = (appp.add(edges[e].base), window(e, i0));
            _mm512_storeu_si512(col.add(q) as *mut __m512i, v);
            mirror_store(col, q, zc, W, LANE_PAD, |p| {
                _mm512_storeu_si512(p as *mut __m512i, v)
            });
        });
        i0 += W;
    }
}
