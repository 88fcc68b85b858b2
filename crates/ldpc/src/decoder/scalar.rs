//! Reference kernel: one row block, lane by lane. This file defines the arithmetic that
//! the SIMD kernels reproduce exactly.

use super::{fixup_scalar, Correction, Dims, Edge};

/// Most blocks in one base-graph row (BG1 row 0 has 19).
const MAX_DEGREE: usize = 32;

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

/// Layered min-sum update of one row block.
///
/// For each lane: `t_e = sat(app_e - c2v_e)`; `min1`, `min2` of `|t_e|` (as u8, so -128
/// gives 128) and the XOR of all `t_e` (its sign bit is the sign product); new
/// `c2v_e = ±correct(min(|t_e| == min1 ? min2 : min1, 127))` with the sign of
/// `t_e ^ product`; `app_e = sat(t_e + c2v_e)`. An edge equal to `min1` gets `min2`:
/// when the minimum is shared, `min2 == min1`, so no index is needed.
pub(crate) fn layer(app: &mut [i8], edges: &[Edge], c2v: &mut [i8], dims: &Dims, corr: Correction) {
    let (zc, zpad) = (dims.zc, dims.zpad);
    let mut t = [0i8; MAX_DEGREE];
    for i in 0..zc {
        let (mut min1, mut min2, mut sgn) = (u8::MAX, u8::MAX, 0i8);
        for (e, ed) in edges.iter().enumerate() {
            let te = app[ed.base + ed.shift + i].saturating_sub(c2v[e * zpad + i]);
            t[e] = te;
            let m = te.unsigned_abs();
            min2 = min2.min(min1.max(m));
            min1 = min1.min(m);
            sgn ^= te;
        }
        let m1 = correct(min1.min(127), corr) as i8;
        let m2 = correct(min2.min(127), corr) as i8;
        for (e, ed) in edges.iter().enumerate() {
            let te = t[e];
            let mag = if te.unsigned_abs() == min1 { m2 } else { m1 };
            let c = if (te ^ sgn) < 0 { -mag } else { mag };
            c2v[e * zpad + i] = c;
            app[ed.base + ed.shift + i] = te.saturating_add(c);
        }
    }
    for ed in edges {
        fixup_scalar(&mut app[ed.base..ed.base + 2 * zc], zc, ed.shift);
    }
}
