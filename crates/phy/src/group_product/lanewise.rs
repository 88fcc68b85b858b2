//! Group products when ZF groups are narrower than a slice.
//!
//! With `zf_block` below [`LANES`] (16x4 uses groups of 4 subcarriers) the
//! per-group product fills only a quarter of each vector. Here every lane of a
//! slice carries its own subcarrier's coefficients (spread once per frame by
//! [`spread_batch`]), so one pass over a slice serves all the groups in it with full
//! vectors. The sums run in the order of the per-group kernels, so each output is
//! bit for bit what [`super::GroupProduct::apply_planar`] gives.
//!
//! Adjacent lanes of one group share their coefficient, so a slice stores one value
//! per run of [`run_width`] lanes (4 for groups of 4) and the kernels widen runs to
//! lanes in registers. Each coefficient is read once per symbol; stored lane by
//! lane, 16x4's took four times the bytes of the samples they multiply.

use radiohost_iq::Cf32;

use super::{products, LaneWeights, Rows, LANES};
use crate::simd::{dispatch, Isa};
use crate::zf::{Lanes, BATCH};

/// Output rows accumulated together: 8 accumulators, which AVX2's 16 registers
/// hold beside the inputs.
const ROWS: usize = 2;

/// Lanes that share one stored coefficient for ZF groups of `zf_block`
/// subcarriers: the largest power of two dividing it, at most 8. Slices start at
/// multiples of 16, so no run of that many lanes crosses a group boundary.
pub fn run_width(zf_block: usize) -> usize {
    1 << zf_block.trailing_zeros().min(3)
}

/// Floats one stored coefficient takes at run width `width`: its runs' real parts,
/// then their imaginary parts.
pub fn entry_len(width: usize) -> usize {
    2 * LANES / width
}

fn check_width(width: usize) {
    assert!(
        matches!(width, 1 | 2 | 4 | 8),
        "lanewise: run width {width} is not 1, 2, 4 or 8"
    );
}

/// A `rows x cols` complex matrix per lane, times `gain`: `a(r, c)` is the stored
/// coefficient `r * row_step + c * col_step` of `values` ([`entry_len`] floats
/// each, lanes `width * i ..` sharing run `i`).
#[derive(Clone, Copy, Debug)]
pub struct LaneCoefficients<'a> {
    values: &'a [f32],
    width: usize,
    row_step: usize,
    col_step: usize,
    pub rows: usize,
    pub cols: usize,
    pub gain: f32,
}

impl<'a> LaneCoefficients<'a> {
    /// Equalisation: `W` (`K x M`) per lane, from coefficients in `W^T` order
    /// (`[antenna][user]`, what [`spread`] writes).
    ///
    /// # Panics
    /// If `width` is not 1, 2, 4 or 8, or `values` is not `users * antennas`
    /// coefficients long (caller bugs).
    pub fn detector(values: &'a [f32], width: usize, users: usize, antennas: usize) -> Self {
        Self::new(values, width, (users, antennas), (1, users), 1.0)
    }

    /// Reciprocity precoding: `gain * W^T` (`M x K`) per lane, from the same
    /// coefficients as [`Self::detector`].
    ///
    /// # Panics
    /// As [`Self::detector`].
    pub fn precoder(
        values: &'a [f32],
        width: usize,
        users: usize,
        antennas: usize,
        gain: f32,
    ) -> Self {
        Self::new(values, width, (antennas, users), (users, 1), gain)
    }

    fn new(
        values: &'a [f32],
        width: usize,
        (rows, cols): (usize, usize),
        (row_step, col_step): (usize, usize),
        gain: f32,
    ) -> Self {
        check_width(width);
        assert_eq!(
            values.len(),
            rows * cols * entry_len(width),
            "lanewise: coefficient table size"
        );
        Self {
            values,
            width,
            row_step,
            col_step,
            rows,
            cols,
            gain,
        }
    }

    /// The stored runs of `a(r, c)`: real parts, then imaginary parts; `n` is
    /// [`entry_len`] of the table's width (a constant in the kernels).
    #[inline(always)]
    fn at(&self, r: usize, c: usize, n: usize) -> &'a [f32] {
        debug_assert_eq!(n, entry_len(self.width));
        let i = (r * self.row_step + c * self.col_step) * n;
        debug_assert!(i + n <= self.values.len());
        // SAFETY: the constructor checked `values` holds `rows * cols` entries, and
        // with either step pair the largest entry index, at (rows - 1, cols - 1), is
        // `rows * cols - 1`; callers pass r < rows, c < cols.
        unsafe { self.values.get_unchecked(i..i + n) }
    }
}

/// One slice's coefficients from one batch of ZF detectors, as the batched solver
/// writes them (`w_re[e][l]`, `w_im[e][l]`: coefficient `e` of group `first + l`):
/// run `i` (lanes `width * i ..`) of coefficient `e` takes group `g =
/// group_of_lane(width * i)`'s value when `g` is in the batch; other runs are left
/// as they are (another batch writes them). Runs of consecutive groups are copied
/// together (a whole slice at once when groups are `width` wide), not one float
/// at a time. `out` holds `w_re.len()` coefficients ([`entry_len`] floats each).
///
/// # Panics
/// If `width` is not 1, 2, 4 or 8, or the sizes disagree (caller bugs).
pub fn spread_batch(
    w_re: &[Lanes],
    w_im: &[Lanes],
    first: usize,
    width: usize,
    group_of_lane: impl Fn(usize) -> usize,
    out: &mut [f32],
) {
    check_width(width);
    let n = entry_len(width);
    let runs = n / 2;
    assert_eq!(w_re.len(), w_im.len(), "lanewise: batch sizes");
    assert_eq!(out.len(), w_re.len() * n, "lanewise: spread output size");
    let batch = first..first + BATCH;
    let mut i = 0;
    while i < runs {
        let g = group_of_lane(i * width);
        if !batch.contains(&g) {
            i += 1;
            continue;
        }
        // Runs i .. i + c take lanes l .. l + c.
        let l = g - first;
        let mut c = 1;
        while i + c < runs && l + c < BATCH && group_of_lane((i + c) * width) == g + c {
            c += 1;
        }
        // The stretch's length as a constant where it is a whole slice's runs (the
        // common case), so each copy is a fixed-size move, not a `memcpy` call.
        let at = (i, l);
        match c {
            16 => copy_stretch::<16>(w_re, w_im, at, runs, out),
            8 => copy_stretch::<8>(w_re, w_im, at, runs, out),
            4 => copy_stretch::<4>(w_re, w_im, at, runs, out),
            2 => copy_stretch::<2>(w_re, w_im, at, runs, out),
            _ => (0..c).for_each(|j| copy_stretch::<1>(w_re, w_im, (i + j, l + j), runs, out)),
        }
        i += c;
    }
}

/// Runs `i .. i + C` of every coefficient from lanes `l .. l + C` (`at = (i, l)`).
#[inline(always)]
fn copy_stretch<const C: usize>(
    w_re: &[Lanes],
    w_im: &[Lanes],
    (i, l): (usize, usize),
    runs: usize,
    out: &mut [f32],
) {
    for ((o, re), im) in out.chunks_exact_mut(2 * runs).zip(w_re).zip(w_im) {
        o[i..i + C].copy_from_slice(&re[l..l + C]);
        o[runs + i..runs + i + C].copy_from_slice(&im[l..l + C]);
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
    if a.rows > 0 && !lanes.is_empty() {
        assert!(
            (a.rows - 1) * out_stride + lanes.len() <= out.len(),
            "lanewise: output too short"
        );
    }
    run(isa, a, re, im, lanes, Out::Interleaved { out, out_stride });
}

/// [`apply`] with a planar output: `out_re[r][l]`, `out_im[r][l]` for every
/// output row `r` and `l` in `lanes` (other lanes untouched), the layout the soft
/// demodulator reads ([`crate::soft`]). The same values, bit for bit.
///
/// # Panics
/// If a slice is too short for the shapes given (caller bugs).
pub fn apply_planar(
    isa: Isa,
    a: &LaneCoefficients<'_>,
    re: &[[f32; LANES]],
    im: &[[f32; LANES]],
    lanes: std::ops::Range<usize>,
    out_re: &mut [[f32; LANES]],
    out_im: &mut [[f32; LANES]],
) {
    if super::planar_operands(a.rows, a.cols, (re, im), &lanes, (out_re, out_im)) {
        run(isa, a, re, im, lanes, Out::Planar { out_re, out_im });
    }
}

fn run(
    isa: Isa,
    a: &LaneCoefficients<'_>,
    re: &[[f32; LANES]],
    im: &[[f32; LANES]],
    lanes: std::ops::Range<usize>,
    out: Out<'_>,
) {
    assert!(
        re.len() >= a.cols && im.len() >= a.cols,
        "lanewise: input too short"
    );
    assert!(lanes.end <= LANES, "lanewise: lanes");
    if a.rows == 0 || lanes.is_empty() {
        return;
    }
    let ops = &mut Operands {
        re: &re[..a.cols],
        im: &im[..a.cols],
        lanes,
        out,
    };
    dispatch!(isa, fn run(a: &LaneCoefficients<'_>, ops: &mut Operands<'_>) => body)
}

/// What [`apply`] and [`apply_planar`] multiply and where the rows go (checked by
/// them).
struct Operands<'o> {
    re: &'o [[f32; LANES]],
    im: &'o [[f32; LANES]],
    lanes: std::ops::Range<usize>,
    out: Out<'o>,
}

/// Where the output rows go.
enum Out<'o> {
    /// Row `r`'s lanes interleaved at `out[r * out_stride ..]`, from the first of
    /// `lanes` on.
    Interleaved {
        out: &'o mut [Cf32],
        out_stride: usize,
    },
    /// Row `r` in `out_re[r]` and `out_im[r]`, each lane in its place.
    Planar {
        out_re: &'o mut [[f32; LANES]],
        out_im: &'o mut [[f32; LANES]],
    },
}

#[inline(always)]
fn body<const FMA: bool>(a: &LaneCoefficients<'_>, ops: &mut Operands<'_>) {
    match a.width {
        1 => all_rows::<FMA, 1>(a, ops),
        2 => all_rows::<FMA, 2>(a, ops),
        4 => all_rows::<FMA, 4>(a, ops),
        _ => all_rows::<FMA, 8>(a, ops),
    }
}

#[inline(always)]
fn all_rows<const FMA: bool, const W: usize>(a: &LaneCoefficients<'_>, ops: &mut Operands<'_>) {
    let mut r0 = 0;
    while r0 + ROWS <= a.rows {
        block::<ROWS, FMA, W>(a, r0, ops);
        r0 += ROWS;
    }
    while r0 < a.rows {
        block::<1, FMA, W>(a, r0, ops);
        r0 += 1;
    }
}

/// Rows `r0 .. r0 + R`, summed in the per-group kernels' order.
#[inline(always)]
fn block<const R: usize, const FMA: bool, const W: usize>(
    a: &LaneCoefficients<'_>,
    r0: usize,
    ops: &mut Operands<'_>,
) {
    // `dispatch!` builds the FMA body only with AVX2 or AVX-512 enabled, and
    // LLVM leaves the per-lane sums scalar (measured), so those builds take the
    // AVX2 intrinsics (two 8-lane halves; AVX-512 CPUs run them too).
    #[cfg(target_arch = "x86_64")]
    if FMA {
        // SAFETY: FMA builds run only where the CPU has AVX2 and FMA (above); the
        // caller checked the input and output sizes.
        return unsafe { block_avx2::<R, W>(a, r0, ops) };
    }
    let (acc_re, acc_im) = products::<R, FMA, _>(a, r0, ops.re, ops.im);
    write_rows(a.gain, &acc_re, &acc_im, r0, ops)
}

impl<'a> LaneWeights for LaneCoefficients<'a> {
    type Entry = &'a [f32];

    #[inline(always)]
    fn cols(&self) -> usize {
        self.cols
    }

    #[inline(always)]
    fn entry(&self, r: usize, c: usize) -> &'a [f32] {
        self.at(r, c, entry_len(self.width))
    }

    #[inline(always)]
    fn lane(e: &'a [f32], l: usize) -> (f32, f32) {
        let runs = e.len() / 2;
        let i = l * runs / LANES;
        (e[i], e[runs + i])
    }
}

/// The two 8-lane halves of one stored coefficient part (`runs` floats at `p`),
/// each run widened to its `W` lanes. Widths 2 and 4 load the runs a half needs
/// into both 128-bit lanes (a broadcast load, no ALU operation) and pick each
/// lane's run with one in-lane permute.
///
/// # Safety
/// The CPU has AVX2; `p` points at [`entry_len`]`(W) / 2` readable floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn widen<const W: usize>(p: *const f32) -> [std::arch::x86_64::__m256; 2] {
    use std::arch::x86_64::*;
    let pick = |x: __m256, c: [i32; 8]| {
        _mm256_permutevar_ps(
            x,
            _mm256_setr_epi32(c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]),
        )
    };
    // SAFETY (all arms): each reads within the `16 / W` floats at `p`.
    unsafe {
        let four = |q: *const f32| opaque(_mm256_broadcast_ps(&*q.cast::<__m128>()));
        match W {
            1 => [_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8))],
            2 => {
                let c = [0, 0, 1, 1, 2, 2, 3, 3];
                [pick(four(p), c), pick(four(p.add(4)), c)]
            }
            4 => {
                let runs = four(p);
                [
                    pick(runs, [0, 0, 0, 0, 1, 1, 1, 1]),
                    pick(runs, [2, 2, 2, 2, 3, 3, 3, 3]),
                ]
            }
            _ => [_mm256_broadcast_ss(&*p), _mm256_broadcast_ss(&*p.add(1))],
        }
    }
}

/// `x` unchanged, out of the optimiser's sight: LLVM rewrote a lane-crossing
/// permute of a 128-bit load as two shuffles per half (a `vshufps` and a
/// lane-crossing `vpermpd`), and an in-lane permute of a broadcast as two shuffles
/// too; behind this the broadcast stays a load and the permute one `vpermilps`.
/// Emits no instruction.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[inline]
unsafe fn opaque(mut x: std::arch::x86_64::__m256) -> std::arch::x86_64::__m256 {
    // SAFETY: an empty template; the register is left as it was.
    unsafe {
        std::arch::asm!("/* {0} */", inout(ymm_reg) x, options(pure, nomem, nostack, preserves_flags));
    }
    x
}

/// [`products`] in AVX2 registers (the same fused operations in the same order),
/// times `gain`, written as [`write_rows`] writes them.
///
/// # Safety
/// The CPU has AVX2 and FMA; `ops` as [`apply`] or [`apply_planar`] checked them
/// (`re`/`im` hold `a.cols` rows, the output every row `r0 + j`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn block_avx2<const R: usize, const W: usize>(
    a: &LaneCoefficients<'_>,
    r0: usize,
    ops: &mut Operands<'_>,
) {
    use std::arch::x86_64::*;
    let (re, im) = (ops.re, ops.im);
    const H: usize = LANES / 8;
    let runs = LANES / W;
    let mut ar = [[_mm256_setzero_ps(); H]; R];
    let mut ai = [[_mm256_setzero_ps(); H]; R];
    for c in 0..a.cols {
        // SAFETY: every row holds 16 floats.
        let (xr, xi) = unsafe {
            let (r, i) = (re[c].as_ptr(), im[c].as_ptr());
            (
                [_mm256_loadu_ps(r), _mm256_loadu_ps(r.add(8))],
                [_mm256_loadu_ps(i), _mm256_loadu_ps(i.add(8))],
            )
        };
        for j in 0..R {
            let w = a.at(r0 + j, c, 2 * runs).as_ptr();
            // SAFETY: `at` returns the coefficient's `2 * runs` floats.
            let (wr, wi) = unsafe { (widen::<W>(w), widen::<W>(w.add(runs))) };
            for h in 0..H {
                ar[j][h] = _mm256_fmadd_ps(wr[h], xr[h], ar[j][h]);
                ar[j][h] = _mm256_fnmadd_ps(wi[h], xi[h], ar[j][h]);
                ai[j][h] = _mm256_fmadd_ps(wr[h], xi[h], ai[j][h]);
                ai[j][h] = _mm256_fmadd_ps(wi[h], xr[h], ai[j][h]);
            }
        }
    }
    let gain = _mm256_set1_ps(a.gain);
    if ops.lanes.len() == LANES {
        match &mut ops.out {
            Out::Interleaved { out, out_stride } => {
                // Whole slice: interleave each half's re/im pairs and store them in order.
                for j in 0..R {
                    let row = out[(r0 + j) * *out_stride..][..LANES]
                        .as_mut_ptr()
                        .cast::<f32>();
                    for h in 0..H {
                        let (vr, vi) =
                            (_mm256_mul_ps(ar[j][h], gain), _mm256_mul_ps(ai[j][h], gain));
                        let (lo, hi) = (_mm256_unpacklo_ps(vr, vi), _mm256_unpackhi_ps(vr, vi));
                        // SAFETY: the row holds 16 `Cf32` (32 floats), `repr(C)` re then im.
                        unsafe {
                            _mm256_storeu_ps(row.add(16 * h), _mm256_permute2f128_ps(lo, hi, 0x20));
                            _mm256_storeu_ps(
                                row.add(16 * h + 8),
                                _mm256_permute2f128_ps(lo, hi, 0x31),
                            );
                        }
                    }
                }
            }
            Out::Planar { out_re, out_im } => {
                for j in 0..R {
                    let (row_re, row_im) =
                        (out_re[r0 + j].as_mut_ptr(), out_im[r0 + j].as_mut_ptr());
                    for h in 0..H {
                        // SAFETY: each row holds 16 floats; `h * 8 + 8 <= 16`.
                        unsafe {
                            _mm256_storeu_ps(row_re.add(8 * h), _mm256_mul_ps(ar[j][h], gain));
                            _mm256_storeu_ps(row_im.add(8 * h), _mm256_mul_ps(ai[j][h], gain));
                        }
                    }
                }
            }
        }
        return;
    }
    let mut rows: Rows<R> = ([[0.0; LANES]; R], [[0.0; LANES]; R]);
    for j in 0..R {
        for h in 0..H {
            // SAFETY: each row holds 16 floats; `h * 8 + 8 <= 16`.
            unsafe {
                _mm256_storeu_ps(rows.0[j].as_mut_ptr().add(h * 8), ar[j][h]);
                _mm256_storeu_ps(rows.1[j].as_mut_ptr().add(h * 8), ai[j][h]);
            }
        }
    }
    write_rows(a.gain, &rows.0, &rows.1, r0, ops)
}

/// Rows `r0 ..` of the sums, times `gain`, to `ops.out` for `lanes`.
#[inline(always)]
fn write_rows<const R: usize>(
    gain: f32,
    acc_re: &[[f32; LANES]; R],
    acc_im: &[[f32; LANES]; R],
    r0: usize,
    ops: &mut Operands<'_>,
) {
    let lanes = ops.lanes.clone();
    for j in 0..R {
        let (ar, ai) = (&acc_re[j], &acc_im[j]);
        match &mut ops.out {
            Out::Interleaved { out, out_stride } => {
                let row = &mut out[(r0 + j) * *out_stride..][..lanes.len()];
                for (o, l) in row.iter_mut().zip(lanes.clone()) {
                    *o = Cf32::new(ar[l] * gain, ai[l] * gain);
                }
            }
            Out::Planar { out_re, out_im } => {
                for l in lanes.clone() {
                    out_re[r0 + j][l] = ar[l] * gain;
                    out_im[r0 + j][l] = ai[l] * gain;
                }
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
            let cases = [
                (16, 4, 4, 0..16),
                (16, 4, 4, 12..16),
                (8, 2, 2, 2..16),
                (32, 8, 8, 0..16),
                (8, 2, 3, 1..14),
                (5, 3, 1, 0..16),
                (4, 4, 16, 3..9),
                (7, 1, 5, 0..11),
            ];
            // Every run width the group size allows, up to `run_width`'s.
            let widths = |zb: usize| {
                [1, 2, 4, 8]
                    .into_iter()
                    .filter(move |w| zb.is_multiple_of(*w))
            };
            for (m, k, zb, lanes) in cases {
                for width in widths(zb) {
                    let mk = m * k;
                    let groups = LANES.div_ceil(zb) + 1;
                    let wt = complex(groups * mk, 3);
                    // Lanes outside `lanes` take their nearest lane's group, as the
                    // station spreads a part's edge slices.
                    let group_of = |l: usize| l.clamp(lanes.start, lanes.end - 1) / zb;
                    let mut entries = vec![f32::NAN; mk * entry_len(width)];
                    for first in (0..groups).step_by(BATCH) {
                        // The batch as the solver writes it: `[coefficient][lane]`.
                        let (mut w_re, mut w_im) = (vec![[0.0; BATCH]; mk], vec![[0.0; BATCH]; mk]);
                        for (l, g) in (first..groups.min(first + BATCH)).enumerate() {
                            for e in 0..mk {
                                (w_re[e][l], w_im[e][l]) = (wt[g * mk + e].re, wt[g * mk + e].im);
                            }
                        }
                        spread_batch(&w_re, &w_im, first, width, group_of, &mut entries);
                    }
                    assert!(entries.iter().all(|v| !v.is_nan()), "every run written");
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
                            true => LaneCoefficients::detector(&entries, width, k, m),
                            false => LaneCoefficients::precoder(&entries, width, k, m, gain),
                        };
                        let stride = LANES + 3;
                        let mut got = vec![Cf32::default(); rows * stride];
                        apply(isa, &a, &re, &im, lanes.clone(), &mut got, stride);
                        let nan_rows = || vec![[f32::NAN; LANES]; rows];
                        let (mut planar_re, mut planar_im) = (nan_rows(), nan_rows());
                        let out = (&mut planar_re[..], &mut planar_im[..]);
                        apply_planar(isa, &a, &re, &im, lanes.clone(), out.0, out.1);
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
                                let (g, w) =
                                    (got[r * stride + l - lanes.start], want[r * stride + l]);
                                assert_eq!(
                                    (g.re.to_bits(), g.im.to_bits()),
                                    (w.re.to_bits(), w.im.to_bits()),
                                    "{isa:?} {m}x{k} zb {zb} width {width} row {r} lane {l}"
                                );
                                assert_eq!(
                                    (planar_re[r][l].to_bits(), planar_im[r][l].to_bits()),
                                    (w.re.to_bits(), w.im.to_bits()),
                                    "planar: {isa:?} {m}x{k} zb {zb} width {width} row {r} lane {l}"
                                );
                            }
                            let outside = (0..LANES).filter(|l| !lanes.contains(l));
                            assert!(
                                outside
                                    .into_iter()
                                    .all(|l| planar_re[r][l].is_nan() && planar_im[r][l].is_nan()),
                                "planar: {isa:?} lanes outside {lanes:?} untouched"
                            );
                        }
                    }
                }
            }
        }
    }

    /// Each run takes its group's lane when the group is in the batch and is left
    /// alone otherwise, also where the batch ends inside a slice and where runs
    /// share a group.
    #[test]
    fn spread_batch_writes_its_own_runs() {
        let mk = 3;
        let v = values(2 * mk * BATCH, 7);
        let lanes = |h: usize| -> Vec<Lanes> {
            (0..mk)
                .map(|e| v[(h * mk + e) * BATCH..][..BATCH].try_into().unwrap())
                .collect()
        };
        let (w_re, w_im) = (lanes(0), lanes(1));
        let maps: [&dyn Fn(usize) -> usize; 3] = [&|l| 20 + l, &|l| 25 + l / 3, &|_| 30];
        for width in [1, 2, 4, 8] {
            for (first, group_of) in [(14, maps[0]), (20, maps[0]), (23, maps[1]), (30, maps[2])] {
                let (n, runs) = (entry_len(width), entry_len(width) / 2);
                let mut out = vec![f32::NAN; mk * n];
                spread_batch(&w_re, &w_im, first, width, group_of, &mut out);
                for e in 0..mk {
                    for i in 0..runs {
                        let g = group_of(i * width);
                        let (re, im) = (out[e * n + i], out[e * n + runs + i]);
                        if (first..first + BATCH).contains(&g) {
                            assert_eq!((re, im), (w_re[e][g - first], w_im[e][g - first]));
                        } else {
                            assert!(
                                re.is_nan() && im.is_nan(),
                                "width {width} first {first} run {i}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn run_width_is_the_largest_power_of_two_dividing_the_group() {
        let got: Vec<_> = [1, 2, 3, 4, 6, 8, 12, 16, 24].map(run_width).into();
        assert_eq!(got, [1, 2, 1, 4, 2, 8, 4, 8, 8]);
    }
}
