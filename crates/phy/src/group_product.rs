//! Zero-forcing equalisation and precoding of a whole subcarrier group as one small
//! complex matrix product, vectorised across the group's subcarriers.
//!
//! Every subcarrier of a ZF group shares one detector `W` (`K x M`). Equalising the
//! group is `X = W Y` with `Y` the `M x n` received block (antenna-major, the layout
//! the front end writes) and precoding is `X = beta W^T S` with `S` the `K x n` user
//! symbols (user-major, the layout the transmit chains write). Both are
//! `out[r][s] = gain * sum_c a(r, c) v[c][s]`: each coefficient `a(r, c)` is
//! broadcast and multiplied into a vector of 16 subcarriers (planar re/im), four
//! output rows at a time, so the inner loop is nothing but fused multiply-adds and no
//! buffer is ever transposed.

use radiohost_iq::Cf32;

use crate::simd::{dispatch, fmadd, Isa};

pub mod lanewise;

/// Subcarriers per vector (one AVX-512 register of f32, two AVX2 registers).
pub const LANES: usize = 16;
/// Output rows computed together (8 accumulators: enough independent FMA chains).
const ROWS: usize = 4;

/// A `rows x cols` complex coefficient matrix times `gain`, read in place from an
/// interleaved [`Cf32`] matrix in either order: `a(r, c)` is
/// `(re[r * row_step + c * col_step], im[..same..])` of its flat `f32` view.
#[derive(Clone, Copy, Debug)]
pub struct Coefficients<'a> {
    re: &'a [f32],
    im: &'a [f32],
    row_step: usize,
    col_step: usize,
    pub rows: usize,
    pub cols: usize,
    pub gain: f32,
}

impl<'a> Coefficients<'a> {
    /// Checked constructor: every `a(r, c)` lies inside both slices.
    fn new(
        re: &'a [f32],
        im: &'a [f32],
        (rows, cols): (usize, usize),
        (row_step, col_step): (usize, usize),
        gain: f32,
    ) -> Self {
        if rows > 0 && cols > 0 {
            let last = (rows - 1) * row_step + (cols - 1) * col_step;
            assert!(
                last < re.len() && last < im.len(),
                "group product: coefficient matrix size"
            );
        }
        Self {
            re,
            im,
            row_step,
            col_step,
            rows,
            cols,
            gain,
        }
    }

    /// Equalisation: `W` (`K x M`) given as its transpose `W^T` (`M x K` row-major).
    ///
    /// # Panics
    /// If `w_transposed` is not `users * antennas` long (a caller bug).
    pub fn detector(w_transposed: &'a [Cf32], users: usize, antennas: usize) -> Self {
        assert_eq!(
            w_transposed.len(),
            users * antennas,
            "group product: detector size"
        );
        let flat: &[f32] = bytemuck::cast_slice(w_transposed);
        let im = flat.get(1..).unwrap_or_default();
        Self::new(flat, im, (users, antennas), (2, 2 * users), 1.0)
    }

    /// Reciprocity precoding: `gain * W^T` (`M x K`) from `W` (`K x M` row-major).
    ///
    /// # Panics
    /// If `w` is not `users * antennas` long (a caller bug).
    pub fn precoder(w: &'a [Cf32], users: usize, antennas: usize, gain: f32) -> Self {
        assert_eq!(w.len(), users * antennas, "group product: detector size");
        let flat: &[f32] = bytemuck::cast_slice(w);
        let im = flat.get(1..).unwrap_or_default();
        Self::new(flat, im, (antennas, users), (2, 2 * antennas), gain)
    }

    /// Reciprocity precoding `gain * W^T` (`M x K`) from `W^T` (`M x K` row-major),
    /// the layout equalisation reads too.
    ///
    /// # Panics
    /// If `w_transposed` is not `users * antennas` long (a caller bug).
    pub fn precoder_transposed(
        w_transposed: &'a [Cf32],
        users: usize,
        antennas: usize,
        gain: f32,
    ) -> Self {
        assert_eq!(
            w_transposed.len(),
            users * antennas,
            "group product: detector size"
        );
        let flat: &[f32] = bytemuck::cast_slice(w_transposed);
        let im = flat.get(1..).unwrap_or_default();
        Self::new(flat, im, (antennas, users), (2 * users, 2), gain)
    }

    /// Every `a(r, c)` without the gain into `wr`/`wi[r * cols + c]`. Where a row of
    /// the interleaved matrix is consecutive pairs (the precoder's layout), each row
    /// is split as pairs, which the compiler vectorises (one `at` per entry with
    /// run-time steps it did not: `GaussCoefficients::fill` 1.0-1.4% -> 0.65-0.84% of
    /// a 64x16 downlink run's samples); other layouts entry by entry (the detector's
    /// columns as pairs, with strided stores, measured no faster).
    fn split_into(&self, wr: &mut [f32], wi: &mut [f32]) {
        let (rows, cols) = (self.rows, self.cols);
        assert!(wr.len() >= rows * cols && wi.len() >= rows * cols);
        // `im` is `re` one float on (the interleaved constructors), not a plane.
        let pairs = self
            .re
            .get(1..)
            .is_some_and(|r| std::ptr::eq(r.as_ptr(), self.im.as_ptr()));
        for r in 0..rows {
            let (wr, wi) = (&mut wr[r * cols..][..cols], &mut wi[r * cols..][..cols]);
            if pairs && self.col_step == 2 {
                let row = self.re[r * self.row_step..][..2 * cols].chunks_exact(2);
                for ((wr, wi), p) in wr.iter_mut().zip(wi.iter_mut()).zip(row) {
                    (*wr, *wi) = (p[0], p[1]);
                }
            } else {
                for (c, (wr, wi)) in wr.iter_mut().zip(wi.iter_mut()).enumerate() {
                    (*wr, *wi) = self.at(r, c);
                }
            }
        }
    }

    /// `a(r, c)` without the gain.
    #[inline(always)]
    fn at(&self, r: usize, c: usize) -> (f32, f32) {
        let i = r * self.row_step + c * self.col_step;
        debug_assert!(i < self.re.len() && i < self.im.len());
        // SAFETY: `Coefficients::new` checked that the largest index, at
        // (rows - 1, cols - 1), is inside both slices; callers pass r < rows, c < cols.
        unsafe { (*self.re.get_unchecked(i), *self.im.get_unchecked(i)) }
    }
}

/// Transpose a `rows x cols` row-major matrix into `out` (`cols x rows` row-major).
pub fn transpose(m: &[Cf32], rows: usize, cols: usize, out: &mut [Cf32]) {
    assert_eq!(m.len(), rows * cols, "transpose: input size");
    assert_eq!(out.len(), rows * cols, "transpose: output size");
    for (r, row) in m.chunks_exact(cols).enumerate() {
        for (c, v) in row.iter().enumerate() {
            out[c * rows + r] = *v;
        }
    }
}

/// A coefficient matrix prepared for three real multiplications per complex one
/// (Gauss): with `T = sum_c wr (xr + xi)`, the product is
/// `re = T - sum_c (wr + wi) xi`, `im = T + sum_c (wi - wr) xr`, so a row block
/// costs three fused multiply-adds per coefficient instead of four. Preparing it
/// costs a pass over the matrix, repaid when one group's matrix multiplies many
/// slices (every symbol of a frame). Only the AVX-512 build uses the three-product
/// form (measured 13% faster per symbol there); the AVX2 and portable builds were
/// slower with it (one more broadcast per product) and run the four-product sum
/// on the `wr`/`wi` planes. Owned, refilled in place, no allocation once grown.
#[derive(Clone, Debug, Default)]
pub struct GaussCoefficients {
    /// `wr` and `wi` of every `a(r, c)`, row-major `[r][c]` (the four-product form).
    wr: Vec<f32>,
    wi: Vec<f32>,
    /// The three-product form in the AVX-512 kernel's reading order, so its inner
    /// loop walks one pointer per plane with no index arithmetic: row blocks of
    /// [`GAUSS_ROWS`] rows (the last may be shorter), and in a block of `h` rows,
    /// per column, the `h` values of `wr`, then of `wr + wi`, then of `wi - wr`.
    panels: Vec<f32>,
    rows: usize,
    cols: usize,
    gain: f32,
}

/// Rows per block of [`GaussCoefficients::panels`]: 8 rows of three accumulators
/// are 24 of the 32 AVX-512 registers, and each input vector loaded serves 8 rows
/// (4 rows reloaded the inputs twice as often).
const GAUSS_ROWS: usize = 8;

impl GaussCoefficients {
    /// Zeroed storage for a `rows` x `cols` matrix in the form [`Self::fill`] writes
    /// for `isa`, so that filling it allocates nothing: the station makes its
    /// detectors before a run, and a first `fill` would otherwise grow them (and take
    /// the page faults) on the real-time path.
    pub fn sized(isa: Isa, rows: usize, cols: usize) -> Self {
        let n = rows * cols;
        let mut g = Self::default();
        if Self::uses_panels(isa) {
            g.panels.resize(3 * n, 0.0);
        } else {
            g.wr.resize(n, 0.0);
            g.wi.resize(n, 0.0);
        }
        g
    }

    /// Whether `isa` on this CPU reads the three-product panels (the AVX-512 build),
    /// or else the `wr`/`wi` planes.
    fn uses_panels(isa: Isa) -> bool {
        isa.min(Isa::cpu()) == Isa::Avx512
    }

    /// Prepare `a` (its gain included) in the form the kernels of `isa` read: the
    /// three-product panels where the CPU runs AVX-512 (the applying calls then run
    /// that build whatever `isa` they are given), the `wr`/`wi` planes otherwise. Only
    /// one form is written: filling is a pass over every group's matrix per frame.
    pub fn fill(&mut self, isa: Isa, a: &Coefficients<'_>) {
        let n = a.rows * a.cols;
        (self.rows, self.cols, self.gain) = (a.rows, a.cols, a.gain);
        if !Self::uses_panels(isa) {
            self.panels.clear();
            self.wr.resize(n, 0.0);
            self.wi.resize(n, 0.0);
            a.split_into(&mut self.wr, &mut self.wi);
            return;
        }
        self.wr.clear();
        self.wi.clear();
        self.panels.resize(3 * n, 0.0);
        for r0 in (0..a.rows).step_by(GAUSS_ROWS) {
            let h = GAUSS_ROWS.min(a.rows - r0);
            let block = &mut self.panels[3 * r0 * a.cols..3 * (r0 + h) * a.cols];
            for (c, planes) in block.chunks_exact_mut(3 * h).enumerate() {
                let (wr, rest) = planes.split_at_mut(h);
                let (sum, diff) = rest.split_at_mut(h);
                for (j, ((wr, sum), diff)) in wr.iter_mut().zip(sum).zip(diff).enumerate() {
                    let (re, im) = a.at(r0 + j, c);
                    (*wr, *sum, *diff) = (re, re + im, im - re);
                }
            }
        }
    }

    /// The three-product panels are filled (only where the CPU has AVX-512).
    fn has_panels(&self) -> bool {
        !self.panels.is_empty()
    }

    /// Rows and columns of the prepared matrix.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }
}

/// Planar scratch for one 16-subcarrier slice of the input (allocated once).
#[derive(Clone, Debug, Default)]
pub struct GroupProduct {
    re: Vec<[f32; LANES]>,
    im: Vec<[f32; LANES]>,
}

impl GroupProduct {
    /// Scratch for products with up to `max_cols` input rows.
    pub fn new(max_cols: usize) -> Self {
        Self {
            re: vec![[0.0; LANES]; max_cols],
            im: vec![[0.0; LANES]; max_cols],
        }
    }

    /// `out[r * out_stride + s] = gain * sum_c a(r, c) * v[c * v_stride + s]` for
    /// `s < n` (`v` and `out` start at the group's first subcarrier).
    ///
    /// # Panics
    /// If a slice is too short for the shapes given, or `a` has more columns than
    /// the scratch was made for (caller bugs).
    #[allow(clippy::too_many_arguments)]
    pub fn apply(
        &mut self,
        isa: Isa,
        a: Coefficients<'_>,
        v: &[Cf32],
        v_stride: usize,
        n: usize,
        out: &mut [Cf32],
        out_stride: usize,
    ) {
        assert!(a.cols <= self.re.len(), "group product: scratch too small");
        if n == 0 || a.rows == 0 {
            return;
        }
        assert!(
            a.cols == 0 || (a.cols - 1) * v_stride + n <= v.len(),
            "group product: input too short"
        );
        assert!(
            (a.rows - 1) * out_stride + n <= out.len(),
            "group product: output too short"
        );
        let mut s0 = 0;
        while s0 < n {
            let len = LANES.min(n - s0);
            // Deinterleave this slice of every input row into planar lanes (zero tail).
            for c in 0..a.cols {
                let src = &v[c * v_stride + s0..][..len];
                let (r, i) = (&mut self.re[c], &mut self.im[c]);
                if len < LANES {
                    *r = [0.0; LANES];
                    *i = [0.0; LANES];
                }
                for (l, x) in src.iter().enumerate() {
                    r[l] = x.re;
                    i[l] = x.im;
                }
            }
            let (re, im) = (&self.re[..a.cols], &self.im[..a.cols]);
            product_slice(isa, &a, re, im, 0..len, out, out_stride, s0);
            s0 += len;
        }
    }

    /// The same product for one slice of up to 16 subcarriers already planar:
    /// `re[c]`, `im[c]` hold input row `c` (the layout [`crate::frontend`] writes
    /// received symbols in), and only `lanes` of it are written, to
    /// `out[r * out_stride + s0 + l]`.
    ///
    /// # Panics
    /// If a slice is too short for the shapes given (caller bugs).
    #[allow(clippy::too_many_arguments)]
    pub fn apply_planar(
        isa: Isa,
        a: Coefficients<'_>,
        re: &[[f32; LANES]],
        im: &[[f32; LANES]],
        lanes: std::ops::Range<usize>,
        out: &mut [Cf32],
        out_stride: usize,
        s0: usize,
    ) {
        assert!(
            re.len() >= a.cols && im.len() >= a.cols,
            "group product: input too short"
        );
        assert!(lanes.end <= LANES, "group product: lanes");
        if a.rows == 0 || lanes.is_empty() {
            return;
        }
        assert!(
            (a.rows - 1) * out_stride + s0 + lanes.end <= out.len(),
            "group product: output too short"
        );
        let (re, im) = (&re[..a.cols], &im[..a.cols]);
        product_slice(isa, &a, re, im, lanes, out, out_stride, s0);
    }

    /// [`Self::apply_planar`] with a prepared matrix (three multiplications per
    /// complex one): `out[r * out_stride + s0 + l] = gain * sum_c a(r, c) v[c][l]`
    /// for `l` in `lanes`, `v[c]` = (`re[c]`, `im[c]`). A matrix filled for AVX-512
    /// runs that build; otherwise `isa` picks the four-product build.
    ///
    /// # Panics
    /// If a slice is too short for the shapes given (caller bugs).
    #[allow(clippy::too_many_arguments)]
    pub fn apply_gauss(
        isa: Isa,
        a: &GaussCoefficients,
        re: &[[f32; LANES]],
        im: &[[f32; LANES]],
        lanes: std::ops::Range<usize>,
        out: &mut [Cf32],
        out_stride: usize,
        s0: usize,
    ) {
        assert!(
            re.len() >= a.cols && im.len() >= a.cols,
            "group product: input too short"
        );
        assert!(lanes.end <= LANES, "group product: lanes");
        if a.rows == 0 || lanes.is_empty() {
            return;
        }
        assert!(
            (a.rows - 1) * out_stride + s0 + lanes.end <= out.len(),
            "group product: output too short"
        );
        let (re, im) = (&re[..a.cols], &im[..a.cols]);
        #[cfg(target_arch = "x86_64")]
        if a.has_panels() {
            // SAFETY: `fill` writes panels only where the CPU has AVX-512; the output
            // covers every row's lanes (asserted above).
            unsafe { gauss_avx512(a, re, im, lanes, out, out_stride, s0) };
            return;
        }
        // Below AVX-512: the four-product kernel on the `wr`/`wi` planes.
        let a = &Coefficients::new(&a.wr, &a.wi, (a.rows, a.cols), (a.cols, 1), a.gain);
        #[cfg(target_arch = "x86_64")]
        if isa.min(Isa::cpu()) == Isa::Avx2 {
            // SAFETY: the CPU has AVX2 and FMA (checked just above); the output
            // covers every row's lanes (asserted above).
            unsafe { slice_avx2(a, re, im, lanes, out, out_stride, s0) };
            return;
        }
        dispatch!(isa.min(Isa::Avx2), fn run(a: &Coefficients<'_>, re: &[[f32; LANES]], im: &[[f32; LANES]],
            lanes: std::ops::Range<usize>, out: &mut [Cf32], out_stride: usize, s0: usize) => slice_portable)
    }

    /// [`Self::apply_gauss`] with a planar output: `out_re[r][l]`, `out_im[r][l]`
    /// for every output row `r` and `l` in `lanes` (other lanes untouched), so the
    /// slice stays in the layout the soft demodulator reads ([`crate::soft`]).
    ///
    /// # Panics
    /// If a slice is too short for the shapes given (caller bugs).
    pub fn apply_gauss_planar(
        isa: Isa,
        a: &GaussCoefficients,
        re: &[[f32; LANES]],
        im: &[[f32; LANES]],
        lanes: std::ops::Range<usize>,
        out_re: &mut [[f32; LANES]],
        out_im: &mut [[f32; LANES]],
    ) {
        if !planar_operands(a.rows, a.cols, (re, im), &lanes, (out_re, out_im)) {
            return;
        }
        let (re, im) = (&re[..a.cols], &im[..a.cols]);
        #[cfg(target_arch = "x86_64")]
        if a.has_panels() {
            // SAFETY: `fill` writes panels only where the CPU has AVX-512; both
            // outputs have every row (asserted above).
            unsafe { gauss_planar_avx512(a, re, im, lanes, out_re, out_im) };
            return;
        }
        let a = Coefficients::new(&a.wr, &a.wi, (a.rows, a.cols), (a.cols, 1), a.gain);
        Self::apply_planar_rows(isa, a, re, im, lanes, out_re, out_im);
    }

    /// [`Self::apply_planar`] with a planar output, as [`Self::apply_gauss_planar`]
    /// writes it: `out_re[r][l]`, `out_im[r][l]` for every output row `r` and `l` in
    /// `lanes` (other lanes untouched). The same values, bit for bit (the AVX2
    /// build runs on AVX-512 CPUs too).
    ///
    /// # Panics
    /// If a slice is too short for the shapes given (caller bugs).
    pub fn apply_planar_rows(
        isa: Isa,
        a: Coefficients<'_>,
        re: &[[f32; LANES]],
        im: &[[f32; LANES]],
        lanes: std::ops::Range<usize>,
        out_re: &mut [[f32; LANES]],
        out_im: &mut [[f32; LANES]],
    ) {
        if !planar_operands(a.rows, a.cols, (re, im), &lanes, (out_re, out_im)) {
            return;
        }
        let (re, im, a) = (&re[..a.cols], &im[..a.cols], &a);
        #[cfg(target_arch = "x86_64")]
        if isa.min(Isa::cpu()) >= Isa::Avx2 {
            // SAFETY: the CPU has AVX2 and FMA (checked just above); both outputs
            // have every row (asserted above).
            unsafe { planar_avx2(a, re, im, lanes, out_re, out_im) };
            return;
        }
        dispatch!(isa.min(Isa::Avx2), fn run(a: &Coefficients<'_>, re: &[[f32; LANES]], im: &[[f32; LANES]],
            lanes: std::ops::Range<usize>, out_re: &mut [[f32; LANES]], out_im: &mut [[f32; LANES]]) => slice_planar_portable)
    }
}

/// Checks a product's planar operands (too short a slice is a caller bug: panics);
/// false when the product writes nothing.
pub(super) fn planar_operands(
    rows: usize,
    cols: usize,
    (re, im): (&[[f32; LANES]], &[[f32; LANES]]),
    lanes: &std::ops::Range<usize>,
    (out_re, out_im): (&[[f32; LANES]], &[[f32; LANES]]),
) -> bool {
    assert!(
        re.len() >= cols && im.len() >= cols,
        "group product: input too short"
    );
    assert!(lanes.end <= LANES, "group product: lanes");
    assert!(
        out_re.len() >= rows && out_im.len() >= rows,
        "group product: output too short"
    );
    rows > 0 && !lanes.is_empty()
}

/// Every output row of one planar slice, built for `isa`.
#[allow(clippy::too_many_arguments)]
fn product_slice(
    isa: Isa,
    a: &Coefficients<'_>,
    re: &[[f32; LANES]],
    im: &[[f32; LANES]],
    lanes: std::ops::Range<usize>,
    out: &mut [Cf32],
    out_stride: usize,
    s0: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if isa.min(Isa::cpu()) == Isa::Avx512 {
        // SAFETY: the CPU has AVX-512 (checked just above).
        unsafe { slice_avx512(a, re, im, lanes, out, out_stride, s0) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if isa.min(Isa::cpu()) == Isa::Avx2 {
        // SAFETY: the CPU has AVX2 and FMA (checked just above); the callers
        // checked the output covers every row's lanes.
        unsafe { slice_avx2(a, re, im, lanes, out, out_stride, s0) };
        return;
    }
    dispatch!(isa.min(Isa::Avx2), fn run(a: &Coefficients<'_>, re: &[[f32; LANES]], im: &[[f32; LANES]],
        lanes: std::ops::Range<usize>, out: &mut [Cf32], out_stride: usize, s0: usize) => slice_portable)
}

/// The AVX-512 build, in intrinsics: each block of rows is accumulated in registers
/// and written straight to the interleaved output (gain, re/im interleave and the
/// lane range in masked stores). (Left to itself, LLVM vectorises the coefficient
/// loop of the portable body with gathers and scatters at AVX-512, eight times
/// slower than its AVX2 build; and the portable output loop is scalar.)
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn slice_avx512(
    a: &Coefficients<'_>,
    re: &[[f32; LANES]],
    im: &[[f32; LANES]],
    lanes: std::ops::Range<usize>,
    out: &mut [Cf32],
    out_stride: usize,
    s0: usize,
) {
    let masks = interleaved_masks(&lanes);
    let mut r0 = 0;
    while r0 + ROWS <= a.rows {
        // SAFETY: `product_slice` checked the output covers every row's lanes.
        unsafe { block_avx512::<ROWS>(a, r0, re, im, out, out_stride, s0, masks) };
        r0 += ROWS;
    }
    while r0 < a.rows {
        // SAFETY: as above.
        unsafe { block_avx512::<1>(a, r0, re, im, out, out_stride, s0, masks) };
        r0 += 1;
    }
}

/// Rows `r0 .. r0 + R` of one slice, accumulated in AVX-512 registers and stored
/// interleaved to `out[(r0 + j) * out_stride + s0 ..]` under `masks` (low and high
/// eight subcarriers).
///
/// # Safety
/// The CPU has AVX-512F; `(r0 + R - 1) * out_stride + s0 + l < out.len()` for every
/// lane `l` the masks select.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn block_avx512<const R: usize>(
    a: &Coefficients<'_>,
    r0: usize,
    re: &[[f32; LANES]],
    im: &[[f32; LANES]],
    out: &mut [Cf32],
    out_stride: usize,
    s0: usize,
    masks: (u16, u16),
) {
    use std::arch::x86_64::*;
    let mut ar = [_mm512_setzero_ps(); R];
    let mut ai = [_mm512_setzero_ps(); R];
    for c in 0..a.cols {
        // SAFETY: `re[c]` and `im[c]` are 16 floats each.
        let (xr, xi) = unsafe {
            (
                _mm512_loadu_ps(re[c].as_ptr()),
                _mm512_loadu_ps(im[c].as_ptr()),
            )
        };
        for j in 0..R {
            let (cr, ci) = a.at(r0 + j, c);
            let (wr, wi) = (_mm512_set1_ps(cr), _mm512_set1_ps(ci));
            ar[j] = _mm512_fmadd_ps(wr, xr, ar[j]);
            ar[j] = _mm512_fnmadd_ps(wi, xi, ar[j]);
            ai[j] = _mm512_fmadd_ps(wr, xi, ai[j]);
            ai[j] = _mm512_fmadd_ps(wi, xr, ai[j]);
        }
    }
    let gain = _mm512_set1_ps(a.gain);
    for j in 0..R {
        let (vr, vi) = (_mm512_mul_ps(ar[j], gain), _mm512_mul_ps(ai[j], gain));
        // SAFETY: as the caller guarantees.
        unsafe { store_interleaved(out, (r0 + j) * out_stride + s0, masks, vr, vi) };
    }
}

#[inline(always)]
fn slice_portable<const FMA: bool>(
    a: &Coefficients<'_>,
    re: &[[f32; LANES]],
    im: &[[f32; LANES]],
    lanes: std::ops::Range<usize>,
    out: &mut [Cf32],
    out_stride: usize,
    s0: usize,
) {
    let mut r0 = 0;
    while r0 + ROWS <= a.rows {
        block::<ROWS, FMA>(a, r0, re, im, out, out_stride, s0, lanes.clone());
        r0 += ROWS;
    }
    while r0 < a.rows {
        block::<1, FMA>(a, r0, re, im, out, out_stride, s0, lanes.clone());
        r0 += 1;
    }
}

/// Rows `r0 .. r0 + R` of the product for one slice at `s0`, writing `lanes`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn block<const R: usize, const FMA: bool>(
    a: &Coefficients<'_>,
    r0: usize,
    re: &[[f32; LANES]],
    im: &[[f32; LANES]],
    out: &mut [Cf32],
    out_stride: usize,
    s0: usize,
    lanes: std::ops::Range<usize>,
) {
    let (acc_re, acc_im) = products::<R, FMA, _>(a, r0, re, im);
    for j in 0..R {
        let row = (r0 + j) * out_stride + s0;
        for l in lanes.clone() {
            out[row + l] = Cf32::new(acc_re[j][l] * a.gain, acc_im[j][l] * a.gain);
        }
    }
}

type Rows<const R: usize> = ([[f32; LANES]; R], [[f32; LANES]; R]);

/// Float masks of the two 8-subcarrier halves of `lanes` in an interleaved
/// output (two floats per subcarrier).
fn interleaved_masks(lanes: &std::ops::Range<usize>) -> (u16, u16) {
    let lane_mask = ((1u32 << lanes.end) - 1) & !((1u32 << lanes.start) - 1);
    let spread = |bits: u32| -> u16 {
        (0..8).fold(0u16, |m, l| {
            m | ((((bits >> l) & 1) as u16) * (3 << (2 * l)))
        })
    };
    (spread(lane_mask & 0xFF), spread(lane_mask >> 8))
}

/// Store one row's 16 planar results interleaved to `out[row..]` under `masks`.
///
/// # Safety
/// The CPU has AVX-512F; every float the masks select lies inside `out` from `row`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn store_interleaved(
    out: &mut [Cf32],
    row: usize,
    (mask_lo, mask_hi): (u16, u16),
    vr: std::arch::x86_64::__m512,
    vi: std::arch::x86_64::__m512,
) {
    use std::arch::x86_64::*;
    let lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    let hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    debug_assert!(row <= out.len());
    // SAFETY: the caller guarantees every selected float is inside `out`; masked
    // floats are not touched, and the high half is only addressed when it has a
    // selected lane (so the pointer stays inside the slice).
    unsafe {
        let p = out.as_mut_ptr().add(row).cast::<f32>();
        if mask_lo != 0 {
            _mm512_mask_storeu_ps(p, mask_lo, _mm512_permutex2var_ps(vr, lo, vi));
        }
        if mask_hi != 0 {
            _mm512_mask_storeu_ps(p.add(16), mask_hi, _mm512_permutex2var_ps(vr, hi, vi));
        }
    }
}

/// The AVX-512 build of [`GroupProduct::apply_gauss`].
///
/// # Safety
/// The CPU has AVX-512F; the output covers every row's selected lanes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn gauss_avx512(
    a: &GaussCoefficients,
    re: &[[f32; LANES]],
    im: &[[f32; LANES]],
    lanes: std::ops::Range<usize>,
    out: &mut [Cf32],
    out_stride: usize,
    s0: usize,
) {
    let masks = interleaved_masks(&lanes);
    gauss_rows_avx512(a, re, im, |r, vr, vi| {
        // SAFETY: as the caller guarantees.
        unsafe { store_interleaved(out, r * out_stride + s0, masks, vr, vi) }
    });
}

/// Every output row of one slice (gain applied), handed to `store(row, re, im)`:
/// each panel of [`GaussCoefficients::panels`] in blocks of 8, 4 and 1 rows.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
#[inline]
fn gauss_rows_avx512(
    a: &GaussCoefficients,
    re: &[[f32; LANES]],
    im: &[[f32; LANES]],
    mut store: impl FnMut(usize, std::arch::x86_64::__m512, std::arch::x86_64::__m512),
) {
    for r0 in (0..a.rows).step_by(GAUSS_ROWS) {
        let h = GAUSS_ROWS.min(a.rows - r0);
        let panel = &a.panels[3 * r0 * a.cols..3 * (r0 + h) * a.cols];
        let mut j = 0;
        while j + 8 <= h {
            let (vr, vi) = gauss_panel_avx512::<8>(panel, h, j, re, im, a.gain);
            (0..8).for_each(|i| store(r0 + j + i, vr[i], vi[i]));
            j += 8;
        }
        while j + 4 <= h {
            let (vr, vi) = gauss_panel_avx512::<4>(panel, h, j, re, im, a.gain);
            (0..4).for_each(|i| store(r0 + j + i, vr[i], vi[i]));
            j += 4;
        }
        while j < h {
            let (vr, vi) = gauss_panel_avx512::<1>(panel, h, j, re, im, a.gain);
            store(r0 + j, vr[0], vi[0]);
            j += 1;
        }
    }
}

/// Rows `j0 .. j0 + R` of a panel of `h` rows (gain applied) in AVX-512 registers,
/// three accumulators per row (`T`, the `wr + wi` sum and the `wi - wr` sum).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
#[inline]
fn gauss_panel_avx512<const R: usize>(
    panel: &[f32],
    h: usize,
    j0: usize,
    re: &[[f32; LANES]],
    im: &[[f32; LANES]],
    gain: f32,
) -> (
    [std::arch::x86_64::__m512; R],
    [std::arch::x86_64::__m512; R],
) {
    use std::arch::x86_64::*;
    let cols = re.len().min(im.len());
    assert!(
        j0 + R <= h && panel.len() >= 3 * h * cols,
        "gauss panel: shape"
    );
    let mut t = [_mm512_setzero_ps(); R];
    let mut s = [_mm512_setzero_ps(); R];
    let mut d = [_mm512_setzero_ps(); R];
    let mut w = panel[j0..].as_ptr();
    for (xr, xi) in re[..cols].iter().zip(&im[..cols]) {
        // SAFETY: `xr` and `xi` are 16 floats each; column c's planes are
        // `panel[3 h c..3 h (c + 1)]` and `j0 + j < h` (asserted above), so every
        // coefficient read lies in the panel.
        unsafe {
            let (xr, xi) = (_mm512_loadu_ps(xr.as_ptr()), _mm512_loadu_ps(xi.as_ptr()));
            let xs = _mm512_add_ps(xr, xi);
            for j in 0..R {
                t[j] = _mm512_fmadd_ps(_mm512_set1_ps(*w.add(j)), xs, t[j]);
                s[j] = _mm512_fmadd_ps(_mm512_set1_ps(*w.add(h + j)), xi, s[j]);
                d[j] = _mm512_fmadd_ps(_mm512_set1_ps(*w.add(2 * h + j)), xr, d[j]);
            }
            w = w.add(3 * h);
        }
    }
    let gain = _mm512_set1_ps(gain);
    let mut vr = [_mm512_setzero_ps(); R];
    let mut vi = [_mm512_setzero_ps(); R];
    for j in 0..R {
        vr[j] = _mm512_mul_ps(_mm512_sub_ps(t[j], s[j]), gain);
        vi[j] = _mm512_mul_ps(_mm512_add_ps(t[j], d[j]), gain);
    }
    (vr, vi)
}

/// The AVX-512 build of [`GroupProduct::apply_gauss_planar`].
///
/// # Safety
/// The CPU has AVX-512F; the outputs have a row for every output row.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn gauss_planar_avx512(
    a: &GaussCoefficients,
    re: &[[f32; LANES]],
    im: &[[f32; LANES]],
    lanes: std::ops::Range<usize>,
    out_re: &mut [[f32; LANES]],
    out_im: &mut [[f32; LANES]],
) {
    use std::arch::x86_64::*;
    let mask = (((1u32 << lanes.end) - 1) & !((1u32 << lanes.start) - 1)) as __mmask16;
    gauss_rows_avx512(a, re, im, |r, vr, vi| {
        // SAFETY: the caller guarantees row `r` exists in both outputs (16 floats).
        unsafe {
            _mm512_mask_storeu_ps(out_re[r].as_mut_ptr(), mask, vr);
            _mm512_mask_storeu_ps(out_im[r].as_mut_ptr(), mask, vi);
        }
    });
}

/// Output rows accumulated together by the AVX2 build: two rows of 16 lanes are
/// 8 accumulators (two `ymm` halves each for re and im), which leaves registers for
/// the 4 input vectors and 2 broadcasts (14 of 16; the portable body's 4 rows
/// need 16 accumulators and spilled).
const ROWS_AVX2: usize = 2;

/// Rows `r0 .. r0 + R` of one slice (gain applied) in AVX2 registers, as
/// `[row][half]`: exactly the portable four-product sums ([`products`]), the same
/// fused operations in the same order, 8 lanes per register.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
fn rows_avx2<const R: usize>(
    a: &Coefficients<'_>,
    r0: usize,
    re: &[[f32; LANES]],
    im: &[[f32; LANES]],
) -> (
    [[std::arch::x86_64::__m256; 2]; R],
    [[std::arch::x86_64::__m256; 2]; R],
) {
    use std::arch::x86_64::*;
    let zero = _mm256_setzero_ps();
    let mut ar = [[zero; 2]; R];
    let mut ai = [[zero; 2]; R];
    for c in 0..a.cols {
        // SAFETY: `re[c]` and `im[c]` are 16 floats each.
        let (xr, xi) = unsafe {
            let (r, i) = (re[c].as_ptr(), im[c].as_ptr());
            (
                [_mm256_loadu_ps(r), _mm256_loadu_ps(r.add(8))],
                [_mm256_loadu_ps(i), _mm256_loadu_ps(i.add(8))],
            )
        };
        for j in 0..R {
            let (cr, ci) = a.at(r0 + j, c);
            let (wr, wi) = (_mm256_set1_ps(cr), _mm256_set1_ps(ci));
            for h in 0..2 {
                // fnmadd(wi, xi, acc) is fma(-wi, xi, acc) exactly (negation is exact).
                ar[j][h] = _mm256_fmadd_ps(wr, xr[h], ar[j][h]);
                ar[j][h] = _mm256_fnmadd_ps(wi, xi[h], ar[j][h]);
                ai[j][h] = _mm256_fmadd_ps(wr, xi[h], ai[j][h]);
                ai[j][h] = _mm256_fmadd_ps(wi, xr[h], ai[j][h]);
            }
        }
    }
    let gain = _mm256_set1_ps(a.gain);
    for j in 0..R {
        for h in 0..2 {
            ar[j][h] = _mm256_mul_ps(ar[j][h], gain);
            ai[j][h] = _mm256_mul_ps(ai[j][h], gain);
        }
    }
    (ar, ai)
}

/// Call `emit(r0, re, im)` with every block of rows of one slice, computed by
/// [`rows_avx2`] ([`ROWS_AVX2`] rows at a time, then single rows).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
fn each_row_avx2(
    a: &Coefficients<'_>,
    re: &[[f32; LANES]],
    im: &[[f32; LANES]],
    mut emit: impl FnMut(usize, &[[std::arch::x86_64::__m256; 2]], &[[std::arch::x86_64::__m256; 2]]),
) {
    let mut r0 = 0;
    while r0 + ROWS_AVX2 <= a.rows {
        let (vr, vi) = rows_avx2::<ROWS_AVX2>(a, r0, re, im);
        emit(r0, &vr, &vi);
        r0 += ROWS_AVX2;
    }
    while r0 < a.rows {
        let (vr, vi) = rows_avx2::<1>(a, r0, re, im);
        emit(r0, &vr, &vi);
        r0 += 1;
    }
}

/// The AVX2 build of [`product_slice`]: rows in registers, stored interleaved.
///
/// # Safety
/// The CPU has AVX2 and FMA; `(a.rows - 1) * out_stride + s0 + lanes.end <= out.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn slice_avx2(
    a: &Coefficients<'_>,
    re: &[[f32; LANES]],
    im: &[[f32; LANES]],
    lanes: std::ops::Range<usize>,
    out: &mut [Cf32],
    out_stride: usize,
    s0: usize,
) {
    use std::arch::x86_64::*;
    let emit = |r0: usize, vr: &[[__m256; 2]], vi: &[[__m256; 2]]| {
        for (j, (vr, vi)) in vr.iter().zip(vi).enumerate() {
            let row = &mut out[(r0 + j) * out_stride + s0..][..lanes.end];
            if lanes.len() == LANES {
                for h in 0..2 {
                    // (re, im) pairs of lanes 0 1 | 4 5 and 2 3 | 6 7.
                    let lo = _mm256_unpacklo_ps(vr[h], vi[h]);
                    let hi = _mm256_unpackhi_ps(vr[h], vi[h]);
                    // SAFETY: `row` has 16 subcarriers (32 floats).
                    unsafe {
                        let p = row.as_mut_ptr().add(8 * h).cast::<f32>();
                        _mm256_storeu_ps(p, _mm256_permute2f128_ps::<0x20>(lo, hi));
                        _mm256_storeu_ps(p.add(8), _mm256_permute2f128_ps::<0x31>(lo, hi));
                    }
                }
            } else {
                let (r, i) = (spill_avx2(vr), spill_avx2(vi));
                for l in lanes.clone() {
                    row[l] = Cf32::new(r[l], i[l]);
                }
            }
        }
    };
    each_row_avx2(a, re, im, emit);
}

/// The AVX2 build of [`GroupProduct::apply_gauss_planar`] (four-product sums).
///
/// # Safety
/// The CPU has AVX2 and FMA; both outputs have a row for every output row.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn planar_avx2(
    a: &Coefficients<'_>,
    re: &[[f32; LANES]],
    im: &[[f32; LANES]],
    lanes: std::ops::Range<usize>,
    out_re: &mut [[f32; LANES]],
    out_im: &mut [[f32; LANES]],
) {
    use std::arch::x86_64::*;
    let emit = |r0: usize, vr: &[[__m256; 2]], vi: &[[__m256; 2]]| {
        for (j, (vr, vi)) in vr.iter().zip(vi).enumerate() {
            let (dr, di) = (&mut out_re[r0 + j], &mut out_im[r0 + j]);
            if lanes.len() == LANES {
                for h in 0..2 {
                    // SAFETY: each output row is 16 floats.
                    unsafe {
                        _mm256_storeu_ps(dr.as_mut_ptr().add(8 * h), vr[h]);
                        _mm256_storeu_ps(di.as_mut_ptr().add(8 * h), vi[h]);
                    }
                }
            } else {
                let (r, i) = (spill_avx2(vr), spill_avx2(vi));
                dr[lanes.clone()].copy_from_slice(&r[lanes.clone()]);
                di[lanes.clone()].copy_from_slice(&i[lanes.clone()]);
            }
        }
    };
    each_row_avx2(a, re, im, emit);
}

/// The 16 lanes of a `[half]` register pair, for partial slices.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[inline]
fn spill_avx2(v: &[std::arch::x86_64::__m256; 2]) -> [f32; LANES] {
    use std::arch::x86_64::*;
    let mut out = [0f32; LANES];
    // SAFETY: `out` is 16 floats.
    unsafe {
        _mm256_storeu_ps(out.as_mut_ptr(), v[0]);
        _mm256_storeu_ps(out.as_mut_ptr().add(8), v[1]);
    }
    out
}

/// Below AVX-512: [`GroupProduct::apply_gauss_planar`] with the four-product sums.
#[inline(always)]
fn slice_planar_portable<const FMA: bool>(
    a: &Coefficients<'_>,
    re: &[[f32; LANES]],
    im: &[[f32; LANES]],
    lanes: std::ops::Range<usize>,
    out_re: &mut [[f32; LANES]],
    out_im: &mut [[f32; LANES]],
) {
    let mut emit = |r0: usize, (acc_re, acc_im): (&[[f32; LANES]], &[[f32; LANES]])| {
        for (j, (ar, ai)) in acc_re.iter().zip(acc_im).enumerate() {
            for l in lanes.clone() {
                out_re[r0 + j][l] = ar[l] * a.gain;
                out_im[r0 + j][l] = ai[l] * a.gain;
            }
        }
    };
    let mut r0 = 0;
    while r0 + ROWS <= a.rows {
        let (acc_re, acc_im) = products::<ROWS, FMA, _>(a, r0, re, im);
        emit(r0, (&acc_re, &acc_im));
        r0 += ROWS;
    }
    while r0 < a.rows {
        let (acc_re, acc_im) = products::<1, FMA, _>(a, r0, re, im);
        emit(r0, (&acc_re, &acc_im));
        r0 += 1;
    }
}

/// A coefficient matrix as [`products`] reads it: one complex value per entry,
/// shared by every lane ([`Coefficients`]: a group's matrix) or one per lane
/// ([`lanewise::LaneCoefficients`]: each lane its own subcarrier's group).
trait LaneWeights {
    /// What one entry `a(r, c)` is.
    type Entry: Copy;
    fn cols(&self) -> usize;
    fn entry(&self, r: usize, c: usize) -> Self::Entry;
    /// Lane `l` of an entry: (re, im).
    fn lane(e: Self::Entry, l: usize) -> (f32, f32);
}

impl LaneWeights for Coefficients<'_> {
    type Entry = (f32, f32);

    #[inline(always)]
    fn cols(&self) -> usize {
        self.cols
    }

    #[inline(always)]
    fn entry(&self, r: usize, c: usize) -> (f32, f32) {
        self.at(r, c)
    }

    #[inline(always)]
    fn lane(e: (f32, f32), _: usize) -> (f32, f32) {
        e
    }
}

/// `sum_c a(r0 + j, c) * v[c]` for `j < R`, portable: the order of operations every
/// SIMD build repeats, so all give the same bits.
#[inline(always)]
fn products<const R: usize, const FMA: bool, W: LaneWeights>(
    a: &W,
    r0: usize,
    re: &[[f32; LANES]],
    im: &[[f32; LANES]],
) -> Rows<R> {
    let mut acc_re = [[0f32; LANES]; R];
    let mut acc_im = [[0f32; LANES]; R];
    let cols = a.cols();
    let (re, im) = (&re[..cols], &im[..cols]);
    for c in 0..cols {
        let (xr, xi) = (&re[c], &im[c]);
        for j in 0..R {
            let w = a.entry(r0 + j, c);
            let (ar, ai) = (&mut acc_re[j], &mut acc_im[j]);
            for l in 0..LANES {
                let (wr, wi) = W::lane(w, l);
                ar[l] = fmadd::<FMA>(wr, xr[l], ar[l]);
                ar[l] = fmadd::<FMA>(-wi, xi[l], ar[l]);
                ai[l] = fmadd::<FMA>(wr, xi[l], ai[l]);
                ai[l] = fmadd::<FMA>(wi, xr[l], ai[l]);
            }
        }
    }
    (acc_re, acc_im)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zf::{equalize, precode};

    fn values(n: usize, seed: u32) -> Vec<Cf32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                let mut next = || {
                    s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    (s >> 8) as f32 / (1 << 24) as f32 - 0.5
                };
                Cf32::new(next(), next())
            })
            .collect()
    }

    /// Every ISA level matches the per-subcarrier reference kernels
    /// ([`equalize`], [`precode`]) on odd shapes and group lengths.
    #[test]
    fn matches_per_subcarrier_reference() {
        for isa in Isa::available() {
            for (m, k, d, i0, n) in [
                (64, 16, 40, 3, 16),
                (8, 2, 50, 0, 37),
                (5, 5, 9, 2, 7),
                (4, 1, 20, 1, 1),
            ] {
                let w = values(k * m, 7);
                let y = values(m * d, 9);
                let s = values(k * d, 11);
                let mut gp = GroupProduct::new(m.max(k));
                let mut eq = vec![Cf32::default(); k * d];
                let mut wt = vec![Cf32::default(); k * m];
                transpose(&w, k, m, &mut wt);
                gp.apply(
                    isa,
                    Coefficients::detector(&wt, k, m),
                    &y[i0..],
                    d,
                    n,
                    &mut eq[i0..],
                    d,
                );
                let mut tx = vec![Cf32::default(); m * d];
                gp.apply(
                    isa,
                    Coefficients::precoder(&w, k, m, 0.7),
                    &s[i0..],
                    d,
                    n,
                    &mut tx[i0..],
                    d,
                );
                // The same precoder read from W^T (the layout the pipelines keep).
                let mut tx_t = vec![Cf32::default(); m * d];
                gp.apply(
                    isa,
                    Coefficients::precoder_transposed(&wt, k, m, 0.7),
                    &s[i0..],
                    d,
                    n,
                    &mut tx_t[i0..],
                    d,
                );
                assert_eq!(tx_t, tx, "{isa:?} precoder from W^T {m}x{k}");
                for i in i0..i0 + n {
                    let yi: Vec<Cf32> = (0..m).map(|a| y[a * d + i]).collect();
                    let mut x = vec![Cf32::default(); k];
                    equalize(&w, &yi, &mut x);
                    for u in 0..k {
                        assert!(
                            (eq[u * d + i] - x[u]).norm() < 1e-4,
                            "{isa:?} eq {m}x{k} sc {i}"
                        );
                    }
                    let si: Vec<Cf32> = (0..k).map(|u| s[u * d + i]).collect();
                    let mut xm = vec![Cf32::default(); m];
                    precode(&w, &si, 0.7, &mut xm);
                    for a in 0..m {
                        assert!(
                            (tx[a * d + i] - xm[a]).norm() < 1e-4,
                            "{isa:?} precode {m}x{k} sc {i}"
                        );
                    }
                }
                // Outside the group nothing is written.
                assert!(eq[..i0].iter().all(|v| *v == Cf32::default()));
                assert!(tx[i0 + n..d].iter().all(|v| *v == Cf32::default()));
            }
        }
    }

    /// Splitting into planes reads every entry where `at` does, for each layout a
    /// matrix comes in (rows of pairs, columns of pairs, and planes).
    #[test]
    fn split_into_planes_matches_each_entry() {
        for (m, k) in [(64, 16), (6, 3), (5, 1), (1, 2)] {
            let w = values(k * m, 29);
            let (wr, wi): (Vec<f32>, Vec<f32>) = w.iter().map(|v| (v.re, v.im)).unzip();
            for a in [
                Coefficients::detector(&w, k, m),
                Coefficients::precoder(&w, k, m, 0.5),
                Coefficients::precoder_transposed(&w, k, m, 0.7),
                Coefficients::new(&wr, &wi, (k, m), (m, 1), 1.0),
                Coefficients::new(&wr, &wi, (m, k), (1, m), 1.0),
            ] {
                let (mut pr, mut pi) = (vec![0.0; k * m], vec![0.0; k * m]);
                a.split_into(&mut pr, &mut pi);
                for r in 0..a.rows {
                    for c in 0..a.cols {
                        let i = r * a.cols + c;
                        assert_eq!((pr[i], pi[i]), a.at(r, c), "{m}x{k} ({r}, {c})");
                    }
                }
            }
        }
    }

    /// `GaussCoefficients::sized` makes the storage `fill` writes on this CPU.
    #[test]
    fn sized_coefficients_are_filled_in_place() {
        let (k, m) = (16, 64);
        let w = values(k * m, 5);
        for isa in Isa::available() {
            let mut g = GaussCoefficients::sized(isa, k, m);
            let at = (g.wr.as_ptr(), g.wi.as_ptr(), g.panels.as_ptr());
            assert!(g.wr.len() + g.panels.len() > 0, "{isa:?}: nothing sized");
            g.fill(isa, &Coefficients::detector(&w, k, m));
            assert_eq!(
                at,
                (g.wr.as_ptr(), g.wi.as_ptr(), g.panels.as_ptr()),
                "{isa:?}"
            );
        }
    }

    /// The prepared (three-multiplication) product equals the plain one for every
    /// ISA, lane range and shape, within float rounding.
    #[test]
    fn gauss_matches_plain_product() {
        for (m, k) in [(64, 16), (6, 3), (5, 1)] {
            let w = values(k * m, 21);
            let y = values(m * LANES, 23);
            let re: Vec<[f32; LANES]> = (0..m)
                .map(|c| std::array::from_fn(|l| y[c * LANES + l].re))
                .collect();
            let im: Vec<[f32; LANES]> = (0..m)
                .map(|c| std::array::from_fn(|l| y[c * LANES + l].im))
                .collect();
            // Both directions: W (k x m) equalising, W^T (m x k) precoding with gain.
            for a in [
                Coefficients::detector(&w, k, m),
                Coefficients::precoder_transposed(&w, k, m, 0.7),
            ] {
                let mut g = GaussCoefficients::default();
                for isa in Isa::available() {
                    g.fill(isa, &a);
                    assert_eq!(g.shape(), (a.rows, a.cols));
                    for lanes in [0..16, 3..9, 15..16, 5..5] {
                        let mut want = vec![Cf32::default(); a.rows * LANES];
                        let mut got = vec![Cf32::default(); a.rows * LANES];
                        GroupProduct::apply_planar(
                            isa,
                            a,
                            &re,
                            &im,
                            lanes.clone(),
                            &mut want,
                            LANES,
                            0,
                        );
                        GroupProduct::apply_gauss(
                            isa,
                            &g,
                            &re,
                            &im,
                            lanes.clone(),
                            &mut got,
                            LANES,
                            0,
                        );
                        // The planar output holds exactly the interleaved one's values.
                        let mut pr = vec![[7.0; LANES]; a.rows];
                        let mut pi = vec![[7.0; LANES]; a.rows];
                        GroupProduct::apply_gauss_planar(
                            isa,
                            &g,
                            &re,
                            &im,
                            lanes.clone(),
                            &mut pr,
                            &mut pi,
                        );
                        for r in 0..a.rows {
                            for l in 0..LANES {
                                let p = (pr[r][l], pi[r][l]);
                                if lanes.contains(&l) {
                                    let v = got[r * LANES + l];
                                    assert_eq!(p, (v.re, v.im), "{isa:?} planar row {r} lane {l}");
                                } else {
                                    assert_eq!(p, (7.0, 7.0), "{isa:?} planar wrote lane {l}");
                                }
                            }
                        }
                        let scale = want.iter().map(|v| v.norm()).fold(1e-6, f32::max);
                        for (i, (x, y)) in got.iter().zip(&want).enumerate() {
                            assert!(
                                (x - y).norm() <= 1e-5 * scale,
                                "{isa:?} {m}x{k} {lanes:?} entry {i}: {x} vs {y}"
                            );
                            if !lanes.contains(&(i % LANES)) {
                                assert_eq!(*x, Cf32::default(), "{isa:?} wrote outside lanes");
                            }
                        }
                    }
                }
            }
        }
    }

    /// The planar entry points write exactly their lanes, equal to the interleaved
    /// one (the planar output bit for bit the planar input's interleaved product).
    #[test]
    fn planar_slices_match_interleaved() {
        let (m, k, d) = (6, 3, 16);
        let w = values(k * m, 3);
        let y = values(m * d, 5);
        let mut want = vec![Cf32::default(); k * d];
        GroupProduct::new(m).apply(
            Isa::Portable,
            Coefficients::precoder(&w, m, k, 1.0),
            &y,
            d,
            d,
            &mut want,
            d,
        );
        let re: Vec<[f32; LANES]> = (0..m)
            .map(|c| std::array::from_fn(|l| y[c * d + l].re))
            .collect();
        let im: Vec<[f32; LANES]> = (0..m)
            .map(|c| std::array::from_fn(|l| y[c * d + l].im))
            .collect();
        for isa in Isa::available() {
            for lanes in [0..16, 3..9, 15..16, 5..5] {
                let mut got = vec![Cf32::default(); k * d];
                GroupProduct::apply_planar(
                    isa,
                    Coefficients::precoder(&w, m, k, 1.0),
                    &re,
                    &im,
                    lanes.clone(),
                    &mut got,
                    d,
                    0,
                );
                let nan_rows = || vec![[f32::NAN; LANES]; k];
                let (mut rows_re, mut rows_im) = (nan_rows(), nan_rows());
                GroupProduct::apply_planar_rows(
                    isa,
                    Coefficients::precoder(&w, m, k, 1.0),
                    &re,
                    &im,
                    lanes.clone(),
                    &mut rows_re,
                    &mut rows_im,
                );
                for r in 0..k {
                    for l in 0..d {
                        let g = got[r * d + l];
                        let planar = (rows_re[r][l].to_bits(), rows_im[r][l].to_bits());
                        if lanes.contains(&l) {
                            assert!(
                                (g - want[r * d + l]).norm() < 1e-4,
                                "{isa:?} {lanes:?} row {r} lane {l}"
                            );
                            assert_eq!(
                                planar,
                                (g.re.to_bits(), g.im.to_bits()),
                                "planar rows: {isa:?} {lanes:?} row {r} lane {l}"
                            );
                        } else {
                            assert_eq!(g, Cf32::default(), "{isa:?} {lanes:?} wrote lane {l}");
                            assert!(rows_re[r][l].is_nan() && rows_im[r][l].is_nan());
                        }
                    }
                }
            }
        }
    }
}
