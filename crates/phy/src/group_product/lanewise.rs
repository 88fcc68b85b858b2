//! Group products when ZF groups are narrower than a slice.
//!
//! With `zf_block` below [`LANES`] (16x4 uses groups of 4 subcarriers) the
//! per-group product fills only a quarter of each vector. Here every lane of a
//! slice carries its own subcarrier's coefficients ([`LaneEntry`], spread once per
//! frame by [`spread`]), so one pass over a slice serves all the groups in it with
//! full vectors. The sums run in the order of the per-group kernels, so each
//! output is bit for bit what [`super::GroupProduct::apply_planar`] gives.

use radiohost_iq::Cf32;

use super::{products, LaneWeights, Rows, LANES};
use crate::simd::{dispatch, Isa};

/// Output rows accumulated together: 8 accumulators, which AVX2's 16 registers
/// hold beside the inputs.
const ROWS: usize = 2;

/// One coefficient of a slice, lane by lane: lane `l` holds the value for the
/// slice's subcarrier `l`.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
pub struct LaneEntry {
    pub re: [f32; LANES],
    pub im: [f32; LANES],
}

/// A `rows x cols` complex matrix per lane, times `gain`: `a(r, c)` is
/// `entries[r * row_step + c * col_step]`.
#[derive(Clone, Copy, Debug)]
pub struct LaneCoefficients<'a> {
    entries: &'a [LaneEntry],
    row_step: usize,
    col_step: usize,
    pub rows: usize,
    pub cols: usize,
    pub gain: f32,
}

impl<'a> LaneCoefficients<'a> {
    /// Equalisation: `W` (`K x M`) per lane, from entries in `W^T` order
    /// (`[antenna][user]`, what [`spread`] writes).
    ///
    /// # Panics
    /// If `entries` is not `users * antennas` long (a caller bug).
    pub fn detector(entries: &'a [LaneEntry], users: usize, antennas: usize) -> Self {
        assert_eq!(entries.len(), users * antennas, "lanewise: detector size");
        Self {
            entries,
            row_step: 1,
            col_step: users,
            rows: users,
            cols: antennas,
            gain: 1.0,
        }
    }

    /// Reciprocity precoding: `gain * W^T` (`M x K`) per lane, from the same
    /// entries as [`Self::detector`].
    ///
    /// # Panics
    /// If `entries` is not `users * antennas` long (a caller bug).
    pub fn precoder(entries: &'a [LaneEntry], users: usize, antennas: usize, gain: f32) -> Self {
        assert_eq!(entries.len(), users * antennas, "lanewise: precoder size");
        Self {
            entries,
            row_step: users,
            col_step: 1,
            rows: antennas,
            cols: users,
            gain,
        }
    }

    #[inline(always)]
    fn at(&self, r: usize, c: usize) -> &'a LaneEntry {
        let i = r * self.row_step + c * self.col_step;
        debug_assert!(i < self.entries.len());
        // SAFETY: the constructors checked `entries.len() == rows * cols`, and with
        // either step pair the largest index, at (rows - 1, cols - 1), is
        // `rows * cols - 1`; callers pass r < rows, c < cols.
        unsafe { self.entries.get_unchecked(i) }
    }
}

/// One slice's entries from per-group matrices: lane `l` of entry `e` takes
/// `w_transposed[g * mk + e]` where `g = group_of_lane(l)`; lanes mapped to `None`
/// are zeroed. `out` holds `mk` entries.
///
/// # Panics
/// If `out` is not `mk` long or a group's matrix lies outside `w_transposed`.
pub fn spread(
    w_transposed: &[Cf32],
    mk: usize,
    group_of_lane: impl Fn(usize) -> Option<usize>,
    out: &mut [LaneEntry],
) {
    assert_eq!(out.len(), mk, "lanewise: spread output size");
    for l in 0..LANES {
        match group_of_lane(l) {
            Some(g) => {
                let w = &w_transposed[g * mk..(g + 1) * mk];
                for (o, v) in out.iter_mut().zip(w) {
                    (o.re[l], o.im[l]) = (v.re, v.im);
                }
            }
            None => out.iter_mut().for_each(|o| (o.re[l], o.im[l]) = (0.0, 0.0)),
        }
    }
}

/// `out[r * out_stride + l - lanes.start] = gain * sum_c a_l(r, c) v[c][l]` for
/// every output row `r` and `l` in `lanes`, `v[c]` = (`re[c]`, `im[c]`) planar.
///
/// # Panics
/// If a slice is too short for the shapes given (caller bugs).
pub fn apply(
    isa: Isa,
    a: &LaneCoefficients<'_>,
    re: &[[f32; LANES]],
    im: &[[f32; LANES]],
    lanes: std::ops::Range<usize>,
    out: &mut [Cf32],
    out_stride: usize,
) {
    assert!(
        re.len() >= a.cols && im.len() >= a.cols,
        "lanewise: input too short"
    );
    assert!(lanes.end <= LANES, "lanewise: lanes");
    if a.rows == 0 || lanes.is_empty() {
        return;
    }
    assert!(
        (a.rows - 1) * out_stride + lanes.len() <= out.len(),
        "lanewise: output too short"
    );
    let (re, im) = (&re[..a.cols], &im[..a.cols]);
    dispatch!(isa, fn run(a: &LaneCoefficients<'_>, re: &[[f32; LANES]], im: &[[f32; LANES]],
        lanes: std::ops::Range<usize>, out: &mut [Cf32], out_stride: usize) => body)
}

#[inline(always)]
fn body<const FMA: bool>(
    a: &LaneCoefficients<'_>,
    re: &[[f32; LANES]],
    im: &[[f32; LANES]],
    lanes: std::ops::Range<usize>,
    out: &mut [Cf32],
    out_stride: usize,
) {
    let mut r0 = 0;
    while r0 + ROWS <= a.rows {
        block::<ROWS, FMA>(a, r0, re, im, lanes.clone(), out, out_stride);
        r0 += ROWS;
    }
    while r0 < a.rows {
        block::<1, FMA>(a, r0, re, im, lanes.clone(), out, out_stride);
        r0 += 1;
    }
}

/// Rows `r0 .. r0 + R`, summed in the per-group kernels' order.
#[inline(always)]
fn block<const R: usize, const FMA: bool>(
    a: &LaneCoefficients<'_>,
    r0: usize,
    re: &[[f32; LANES]],
    im: &[[f32; LANES]],
    lanes: std::ops::Range<usize>,
    out: &mut [Cf32],
    out_stride: usize,
) {
    // `dispatch!` builds the FMA body only with AVX2 or AVX-512 enabled, and
    // LLVM leaves the per-lane sums scalar (measured), so those builds take the
    // AVX2 intrinsics (two 8-lane halves; AVX-512 CPUs run them too).
    #[cfg(target_arch = "x86_64")]
    if FMA {
        // SAFETY: FMA builds run only where the CPU has AVX2 and FMA (above).
        let (acc_re, acc_im) = unsafe { sums_avx2::<R>(a, r0, re, im) };
        return write_rows(a.gain, &acc_re, &acc_im, r0, lanes, out, out_stride);
    }
    let (acc_re, acc_im) = products::<R, FMA, _>(a, r0, re, im);
    write_rows(a.gain, &acc_re, &acc_im, r0, lanes, out, out_stride)
}

impl<'a> LaneWeights for LaneCoefficients<'a> {
    type Entry = &'a LaneEntry;

    #[inline(always)]
    fn cols(&self) -> usize {
        self.cols
    }

    #[inline(always)]
    fn entry(&self, r: usize, c: usize) -> &'a LaneEntry {
        self.at(r, c)
    }

    #[inline(always)]
    fn lane(e: &'a LaneEntry, l: usize) -> (f32, f32) {
        (e.re[l], e.im[l])
    }
}

/// [`products`] in AVX2 registers, the same fused operations in the same order.
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn sums_avx2<const R: usize>(
    a: &LaneCoefficients<'_>,
    r0: usize,
    re: &[[f32; LANES]],
    im: &[[f32; LANES]],
) -> Rows<R> {
    use std::arch::x86_64::*;
    const H: usize = LANES / 8;
    let mut ar = [[_mm256_setzero_ps(); H]; R];
    let mut ai = [[_mm256_setzero_ps(); H]; R];
    for c in 0..a.cols {
        for h in 0..H {
            // SAFETY: every row holds 16 floats; `h * 8 + 8 <= 16`.
            let (xr, xi) = unsafe {
                (
                    _mm256_loadu_ps(re[c].as_ptr().add(h * 8)),
                    _mm256_loadu_ps(im[c].as_ptr().add(h * 8)),
                )
            };
            for j in 0..R {
                let w = a.at(r0 + j, c);
                // SAFETY: as above.
                let (wr, wi) = unsafe {
                    (
                        _mm256_loadu_ps(w.re.as_ptr().add(h * 8)),
                        _mm256_loadu_ps(w.im.as_ptr().add(h * 8)),
                    )
                };
                ar[j][h] = _mm256_fmadd_ps(wr, xr, ar[j][h]);
                ar[j][h] = _mm256_fnmadd_ps(wi, xi, ar[j][h]);
                ai[j][h] = _mm256_fmadd_ps(wr, xi, ai[j][h]);
                ai[j][h] = _mm256_fmadd_ps(wi, xr, ai[j][h]);
            }
        }
    }
    let mut rows: Rows<R> = ([[0.0; LANES]; R], [[0.0; LANES]; R]);
    for j in 0..R {
        for h in 0..H {
            // SAFETY: as above.
            unsafe {
                _mm256_storeu_ps(rows.0[j].as_mut_ptr().add(h * 8), ar[j][h]);
                _mm256_storeu_ps(rows.1[j].as_mut_ptr().add(h * 8), ai[j][h]);
            }
        }
    }
    rows
}

/// Rows `r0 ..` of the sums, times `gain`, interleaved to `out` for `lanes`.
#[inline(always)]
fn write_rows<const R: usize>(
    gain: f32,
    acc_re: &[[f32; LANES]; R],
    acc_im: &[[f32; LANES]; R],
    r0: usize,
    lanes: std::ops::Range<usize>,
    out: &mut [Cf32],
    out_stride: usize,
) {
    for j in 0..R {
        let row = &mut out[(r0 + j) * out_stride..][..lanes.len()];
        let (ar, ai) = (&acc_re[j], &acc_im[j]);
        if lanes.len() == LANES {
            // Whole slice: a fixed-length loop, so it vectorises.
            for l in 0..LANES {
                row[l] = Cf32::new(ar[l] * gain, ai[l] * gain);
            }
        } else {
            for (o, l) in row.iter_mut().zip(lanes.clone()) {
                *o = Cf32::new(ar[l] * gain, ai[l] * gain);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group_product::{Coefficients, GroupProduct};

    fn values(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (s >> 8) as f32 / (1 << 24) as f32 - 0.5
            })
            .collect()
    }

    fn complex(n: usize, seed: u32) -> Vec<Cf32> {
        let v = values(2 * n, seed);
        v.chunks_exact(2).map(|p| Cf32::new(p[0], p[1])).collect()
    }

    /// Bit for bit the per-group planar product, for groups narrower than, as
    /// wide as, and straddling a slice, on every lane range and ISA build.
    #[test]
    fn matches_per_group_product() {
        for isa in Isa::available() {
            for (m, k, zb, lanes) in [
                (16, 4, 4, 0..16),
                (16, 4, 4, 12..16),
                (8, 2, 3, 1..14),
                (5, 3, 1, 0..16),
                (4, 4, 16, 3..9),
                (7, 1, 5, 0..11),
            ] {
                let mk = m * k;
                let groups = LANES.div_ceil(zb) + 1;
                let wt = complex(groups * mk, 3);
                let group_of = |l: usize| lanes.contains(&l).then_some(l / zb);
                let mut entries = vec![LaneEntry::default(); mk];
                spread(&wt, mk, group_of, &mut entries);
                let planar = |rows: usize, seed: u32| {
                    let v = values(rows * 2 * LANES, seed);
                    let mut it = v
                        .chunks_exact(LANES)
                        .map(|c| -> [f32; LANES] { c.try_into().unwrap() });
                    let re: Vec<_> = it.by_ref().take(rows).collect();
                    let im: Vec<_> = it.collect();
                    (re, im)
                };
                // Equalisation (K rows from M planar inputs), then precoding.
                for (rows, cols, gain) in [(k, m, 1.0), (m, k, 0.6)] {
                    let (re, im) = planar(cols, (rows * 31 + cols) as u32);
                    let a = match rows == k && cols == m {
                        true => LaneCoefficients::detector(&entries, k, m),
                        false => LaneCoefficients::precoder(&entries, k, m, gain),
                    };
                    let stride = LANES + 3;
                    let mut got = vec![Cf32::default(); rows * stride];
                    apply(isa, &a, &re, &im, lanes.clone(), &mut got, stride);
                    let mut want = vec![Cf32::default(); rows * stride + LANES];
                    for l in lanes.clone() {
                        let w = &wt[l / zb * mk..][..mk];
                        let c = match rows == k && cols == m {
                            true => Coefficients::detector(w, k, m),
                            false => Coefficients::precoder_transposed(w, k, m, gain),
                        };
                        GroupProduct::apply_planar(
                            isa,
                            c,
                            &re,
                            &im,
                            l..l + 1,
                            &mut want,
                            stride,
                            0,
                        );
                    }
                    for r in 0..rows {
                        for l in lanes.clone() {
                            let (g, w) = (got[r * stride + l - lanes.start], want[r * stride + l]);
                            assert_eq!(
                                (g.re.to_bits(), g.im.to_bits()),
                                (w.re.to_bits(), w.im.to_bits()),
                                "{isa:?} {m}x{k} zb {zb} row {r} lane {l}"
                            );
                        }
                    }
                }
            }
        }
    }
}
