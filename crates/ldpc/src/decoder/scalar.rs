//! Portable reference kernel for one row block (no intrinsics). This file defines the
//! per-lane arithmetic that the SIMD kernels reproduce exactly.

use super::{fixup_scalar, fixup_wrap, Correction, Dims, Edge};

/// Most blocks in one base-graph row (BG1 row 0 has 19).
const MAX_DEGREE: usize = 32;
/// Lanes processed together.
const BLOCK: usize = 64;

#[inline]
pub(crate) fn correct(m: u8, c: Correction) -> u8 {
    match c {
        Correction::Offset(b) => m.saturating_sub(b),
        Correction::Eighths(k) => {
            let mut r = 0u8;
            if k & 8 != 0 {
                r = m;
            }
            if k & 4 != 0 {
                r += m >> 1;
            }
            if k & 2 != 0 {
                r += m >> 2;
            }
            if k & 1 != 0 {
                r += m >> 3;
            }
            r
        }
    }
}

/// A saturated a-posteriori LLR no longer equals channel + sum of messages, so removing
/// this row's old message from it would under-estimate the extrinsic value and, row
/// after row, drag reliable bits to zero and past it. A saturated value is therefore
/// final (absorbing): it is passed on as it is (it is the most reliable value
/// representable), and a row whose extrinsic value `t` is saturated writes `t` back
/// unchanged instead of `t + c2v`. Without the second half, a saturated bit that gets a
/// weaker message drops below the limit while its stored messages still count the
/// clipped-off part; after convergence every iteration repeats this, the magnitudes
/// drift down and, from about the sixth iteration (BG1 Zc=384 rate 1/3, early
/// termination off), whole blocks flip.
///
/// Saturated means `|a| >= 127` (127, -127 and -128): symmetric, so that a kernel can
/// test `|t|`, which it computes anyway, with one unsigned compare.
///
/// Once saturated, an APP value never changes again during a decode, so the message a
/// row stores for a saturated `t` is never read (the next visit sees a saturated APP
/// and subtracts nothing): kernels may store any value there (the AVX2 row kernel
/// stores 0), and only the messages of unsaturated lanes must agree bit for bit.
#[inline]
pub(crate) fn saturated(a: i8) -> bool {
    a.unsigned_abs() >= 127
}

/// Layered min-sum update of one row block.
///
/// For each lane: `t_e = sat(app_e - c2v_e)` (or `app_e` if saturated, see
/// [`saturated`]); `min1`, `min2` of `|t_e|` (as u8, so -128 gives 128) and the XOR of
/// all `t_e` (its sign bit is the sign product); new
/// `c2v_e = ±correct(min(|t_e| == min1 ? min2 : min1, 127))` with the sign of
/// `t_e ^ product`; `app_e = sat(t_e + c2v_e)`, or `t_e` when `t_e` is saturated. A
/// single edge (`Edge::single`) has `t_e` = its channel LLR instead (its message is not
/// needed again; this kernel writes it and the APP value every time). An edge equal to
/// `min1` gets `min2`:
/// when the minimum is shared, `min2 == min1`, so no index is needed.
pub(crate) fn layer(app: &mut [i8], edges: &[Edge], c2v: &mut [i8], dims: &Dims, corr: Correction) {
    let (zc, zpad) = (dims.zc, dims.zpad);
    // Whole blocks of lanes (padding lanes included, as in the SIMD kernels; the fix-up
    // below repairs what they write) with lane-innermost loops of constant length: plain
    // per-lane code that the compiler can still vectorise for any target.
    let mut t = [[0i8; BLOCK]; MAX_DEGREE];
    let n = BLOCK;
    let mut i0 = 0;
    while i0 < zpad {
        let (mut min1, mut min2, mut sgn) = ([u8::MAX; BLOCK], [u8::MAX; BLOCK], [0i8; BLOCK]);
        for (e, ed) in edges.iter().enumerate() {
            let te = &mut t[e][..n];
            if ed.single {
                // The column's only message: t is its channel LLR.
                te.copy_from_slice(&app[ed.base + dims.chan + window(ed.shift, i0, dims)..][..n]);
            } else if dims.first {
                // Old messages are all zero: t = a, saturated or not.
                let a = &app[ed.base + window(ed.shift, i0, dims)..][..n];
                te.copy_from_slice(a);
            } else {
                let a = &app[ed.base + window(ed.shift, i0, dims)..][..n];
                let old = &c2v[e * zpad + i0..][..n];
                for i in 0..n {
                    te[i] = if saturated(a[i]) {
                        a[i]
                    } else {
                        a[i].saturating_sub(old[i])
                    };
                }
            }
            for i in 0..n {
                let m = te[i].unsigned_abs();
                min2[i] = min2[i].min(min1[i].max(m));
                min1[i] = min1[i].min(m);
                sgn[i] ^= te[i];
            }
        }
        let (mut m1, mut m2) = ([0i8; BLOCK], [0i8; BLOCK]);
        for i in 0..n {
            m1[i] = correct(min1[i].min(127), corr) as i8;
            m2[i] = correct(min2[i].min(127), corr) as i8;
        }
        for (e, ed) in edges.iter().enumerate() {
            let te = &t[e][..n];
            let new_c2v = &mut c2v[e * zpad + i0..][..n];
            let new_app = &mut app[ed.base + window(ed.shift, i0, dims)..][..n];
            for i in 0..n {
                let mag = if te[i].unsigned_abs() == min1[i] {
                    m2[i]
                } else {
                    m1[i]
                };
                let c = if (te[i] ^ sgn[i]) < 0 { -mag } else { mag };
                new_c2v[i] = c;
                // A saturated t adds nothing (a select, so the loop still vectorises).
                new_app[i] = te[i].saturating_add(if saturated(te[i]) { 0 } else { c });
            }
        }
        i0 += n;
    }
    for ed in edges {
        if dims.wrap {
            fixup_wrap(&mut app[ed.base..ed.base + zc + BLOCK], zc, ed.shift);
        } else {
            fixup_scalar(&mut app[ed.base..ed.base + 2 * zc], zc, ed.shift);
        }
    }
}

/// Start of the window for lanes `i0..` of an edge with this shift (see the layout in
/// the module docs of `decoder`).
#[inline]
pub(crate) fn window(shift: usize, i0: usize, dims: &Dims) -> usize {
    let q = shift + i0;
    if dims.wrap && q >= dims.zc {
        q - dims.zc
    } else {
        q
    }
}
