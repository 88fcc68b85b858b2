//! The in-register DFTs of the batched FFT: radix 4, 8 and 16 on vectors (a row
//! of 16 lanes, or one part of every row), each an in-place decimation-in-frequency
//! butterfly whose outputs are multiplied by the pass's twiddles on their way to
//! memory (no twiddle pass).
//!
//! On the AVX-512 core measured (AMD Zen 4: one 512-bit add pipe, one 512-bit
//! multiply/FMA pipe, one 512-bit store per two cycles) the transform is bound by
//! additions, so some butterflies compute their differences as `a - one * b` on
//! the FMA pipe (`F` masks below); `one` is a 1.0 the compiler cannot see, so it
//! does not fold the FMA back into a subtraction.

use super::lanes::Vector;

/// A complex vector: (re, im).
pub(super) type C<V> = (V, V);

/// Planar rows: row `i` is `re[16 i..16 i + 16]`, `im[16 i..16 i + 16]` (a
/// vector narrower than a row reads the start of each; see [`Buf::lanes_from`]).
#[derive(Clone, Copy)]
pub(super) struct Buf {
    pub re: *mut f32,
    pub im: *mut f32,
}

impl Buf {
    /// The same rows seen from lane `lane` on.
    pub(super) fn lanes_from(self, lane: usize) -> Self {
        Self {
            re: self.re.wrapping_add(lane),
            im: self.im.wrapping_add(lane),
        }
    }

    /// # Safety
    /// Row `i` exists.
    #[inline(always)]
    unsafe fn ld<V: Vector>(self, i: usize) -> C<V> {
        // SAFETY: the caller's.
        unsafe { (V::load(self.re.add(16 * i)), V::load(self.im.add(16 * i))) }
    }

    /// # Safety
    /// Row `i` exists.
    #[inline(always)]
    unsafe fn st<V: Vector>(self, i: usize, v: C<V>) {
        // SAFETY: the caller's.
        unsafe {
            v.0.store(self.re.add(16 * i));
            v.1.store(self.im.add(16 * i));
        }
    }
}

/// `z * w` (forward) or `z * conj(w)` (inverse).
#[inline(always)]
fn cmul<V: Vector, const INV: bool>(z: C<V>, wr: V, wi: V) -> C<V> {
    if INV {
        (z.0.mul_add(wr, z.1.mul(wi)), z.1.mul_sub(wr, z.0.mul(wi)))
    } else {
        (z.0.mul_sub(wr, z.1.mul(wi)), z.0.mul_add(wi, z.1.mul(wr)))
    }
}

/// An empty block that the compiler may not move memory accesses across and that
/// ends an instruction-scheduling region: it keeps a codelet's loads next to the
/// arithmetic that uses them, so that fewer values are live at once (fewer spills).
#[inline(always)]
fn fence() {
    // SAFETY: an empty instruction sequence; it only constrains ordering.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::asm!("", options(nostack, preserves_flags))
    }
}

/// `(a + b, a - b)`; with `F` the difference runs on the FMA pipe.
#[inline(always)]
fn bf<V: Vector, const F: bool>(a: V, b: V, one: V) -> (V, V) {
    (a.add(b), if F { one.neg_mul_add(b, a) } else { a.sub(b) })
}

/// The 4-point DFT (`exp(-2 pi i / 4)` forward, its conjugate inverse).
#[inline(always)]
fn dft4<V: Vector, const INV: bool, const F: bool>(x: [C<V>; 4], one: V) -> [C<V>; 4] {
    let (s02r, d02r) = bf::<V, F>(x[0].0, x[2].0, one);
    let (s02i, d02i) = bf::<V, F>(x[0].1, x[2].1, one);
    let (s13r, d13r) = bf::<V, F>(x[1].0, x[3].0, one);
    let (s13i, d13i) = bf::<V, F>(x[1].1, x[3].1, one);
    let (y0r, y2r) = bf::<V, F>(s02r, s13r, one);
    let (y0i, y2i) = bf::<V, F>(s02i, s13i, one);
    let (p, q) = bf::<V, F>(d02r, d13i, one);
    let (u, v) = bf::<V, F>(d02i, d13r, one);
    if INV {
        [(y0r, y0i), (q, u), (y2r, y2i), (p, v)]
    } else {
        [(y0r, y0i), (p, v), (y2r, y2i), (q, u)]
    }
}

/// The `i`-th 4-point DFT of a 16-point codelet, its differences on the FMA pipe
/// where bit `i` of `F` is set.
#[inline(always)]
fn d4<V: Vector, const INV: bool, const F: u8>(i: u8, u: [C<V>; 4], one: V) -> [C<V>; 4] {
    if F & (1 << i) != 0 {
        dft4::<V, INV, true>(u, one)
    } else {
        dft4::<V, INV, false>(u, one)
    }
}

/// `exp(-2 pi i e / 16)` as (re, im), `e` known at compile time.
#[inline(always)]
fn w16(e: usize) -> (f32, f32) {
    const C1: f32 = 0.923_879_5; // cos(pi / 8)
    const S1: f32 = 0.382_683_43; // sin(pi / 8)
    const R: f32 = std::f32::consts::FRAC_1_SQRT_2;
    match e {
        1 => (C1, -S1),
        2 => (R, -R),
        3 => (S1, -C1),
        6 => (-R, -R),
        9 => (-C1, S1),
        _ => unreachable!("w16({e}) is not used"),
    }
}

/// `z * exp(-+2 pi i e / 16)` for the exponents of a 4 x 4 split (`e = m1 k1`).
#[inline(always)]
fn times_w16<V: Vector, const INV: bool>(z: C<V>, e: usize) -> C<V> {
    match e {
        0 => z,
        // -i forward, +i inverse.
        4 if INV => (V::zero().sub(z.1), z.0),
        4 => (z.1, V::zero().sub(z.0)),
        _ => {
            let (wr, wi) = w16(e);
            cmul::<V, INV>(z, V::splat(wr), V::splat(wi))
        }
    }
}

/// Output `k` of a codelet: times `w^k` of its butterfly (`tw` holds `w^1..` as
/// (re, im) pairs) unless `TW` is off (the butterfly at offset 0), then stored.
///
/// # Safety
/// Row `at` exists; with `TW`, `tw` holds `2 k` values.
#[inline(always)]
unsafe fn put<V: Vector, const INV: bool, const TW: bool>(
    x: Buf,
    at: usize,
    k: usize,
    tw: *const f32,
    z: C<V>,
) {
    // SAFETY: the caller's.
    unsafe {
        let z = if TW && k > 0 {
            let w = tw.add(2 * (k - 1));
            cmul::<V, INV>(z, V::splat(*w), V::splat(*w.add(1)))
        } else {
            z
        };
        x.st::<V>(at, z);
    }
}

/// In place at rows `base + m stride`, `m < 16`: the 16-point DFT as 4 x 4
/// (`m = m1 + 4 m2`, `k = k1 + 4 k2`), output `k` times `tw`'s `w^k`.
/// `F` bit `i` moves the differences of the `i`-th 4-point DFT to the FMA pipe.
///
/// # Safety
/// The 16 rows exist; with `TW`, `tw` holds 30 values.
#[inline(always)]
pub(super) unsafe fn dft16<V: Vector, const INV: bool, const TW: bool, const F: u8>(
    x: Buf,
    base: usize,
    stride: usize,
    tw: *const f32,
    one: V,
) {
    let input = Strided { x, base, stride };
    // SAFETY: the caller's.
    unsafe { dft16_from::<V, INV, TW, F>(&input, x, base, stride, tw, one) }
}

/// Where a codelet reads its inputs (a trait, not a closure: closures are not
/// always inlined, and then lose the caller's target features).
pub(super) trait Input<V> {
    /// # Safety
    /// Input `m` exists.
    unsafe fn at(&self, m: usize) -> C<V>;
}

/// Inputs at rows `base + m stride`.
struct Strided {
    x: Buf,
    base: usize,
    stride: usize,
}

impl<V: Vector> Input<V> for Strided {
    #[inline(always)]
    unsafe fn at(&self, m: usize) -> C<V> {
        // SAFETY: the caller's.
        unsafe { self.x.ld::<V>(self.base + m * self.stride) }
    }
}

/// Inputs at rows `base + m stride`, except that input `m` is zero where bit `m`
/// of `zero` is set (its row is not read).
pub(super) struct Masked {
    pub x: Buf,
    pub base: usize,
    pub stride: usize,
    pub zero: u16,
}

impl<V: Vector> Input<V> for Masked {
    #[inline(always)]
    unsafe fn at(&self, m: usize) -> C<V> {
        if self.zero & (1 << m) != 0 {
            return (V::zero(), V::zero());
        }
        // SAFETY: the caller's.
        unsafe { self.x.ld::<V>(self.base + m * self.stride) }
    }
}

/// [`dft16`] with input `m` from `input.at(m)` instead of row `base + m stride`
/// (the outputs still go to those rows): the front end's first pass, which
/// converts its input from ci16 on the way in.
///
/// # Safety
/// As [`dft16`], and `input` has inputs 0 to 15.
#[inline(always)]
pub(super) unsafe fn dft16_from<V: Vector, const INV: bool, const TW: bool, const F: u8>(
    input: &impl Input<V>,
    x: Buf,
    base: usize,
    stride: usize,
    tw: *const f32,
    one: V,
) {
    // SAFETY: every row below is `base + m stride` with `m < 16`.
    unsafe {
        // A function, not a closure, for the reason `Input` is a trait.
        #[inline(always)]
        unsafe fn ld4<V: Vector>(input: &impl Input<V>, m1: usize) -> [C<V>; 4] {
            // SAFETY: the caller's.
            unsafe {
                [
                    input.at(m1),
                    input.at(m1 + 4),
                    input.at(m1 + 8),
                    input.at(m1 + 12),
                ]
            }
        }
        // The first level's outputs `y[m1][k1]` for `m1` = 2 and 3 wait in output
        // rows `m1 + 4 k1` (in place, the rows of their own inputs, already read):
        // all 32 values do not fit the 32 registers beside the second level's
        // temporaries, and the compiler's own spills were more than twice these 16
        // stores, on the store port that bounds the codelet (docs/BENCHMARKS.md,
        // PHY, session 42).
        for m1 in [3, 2] {
            let y = d4::<V, INV, F>(m1 as u8, ld4(input, m1), one);
            for (k1, &v) in y.iter().enumerate() {
                x.st::<V>(base + (m1 + 4 * k1) * stride, v);
            }
        }
        fence();
        let y0 = d4::<V, INV, F>(0, ld4(input, 0), one);
        let y1 = d4::<V, INV, F>(1, ld4(input, 1), one);
        let held = |m1: usize, k1: usize| base + (m1 + 4 * k1) * stride;
        macro_rules! column {
            ($k1:literal, $y2:expr, $y3:expr) => {
                let y = [y0[$k1], y1[$k1], $y2, $y3];
                column::<V, INV, TW, F>(x, base, stride, tw, one, $k1, y)
            };
        }
        column!(0, x.ld(held(2, 0)), x.ld(held(3, 0)));
        column!(1, x.ld(held(2, 1)), x.ld(held(3, 1)));
        // Column 2 stores over `y[2]`'s rows: column 3's value is read first.
        let y23 = x.ld(held(2, 3));
        column!(2, x.ld(held(2, 2)), x.ld(held(3, 2)));
        column!(3, y23, x.ld(held(3, 3)));
    }
}

/// Column `k1` of [`dft16_from`]'s second level: `y[m1][k1]` for `m1 < 4` times
/// `w16^(m1 k1)`, their 4-point DFT, outputs `k1 + 4 k2` to their rows.
///
/// # Safety
/// As [`dft16_from`].
#[inline(always)]
unsafe fn column<V: Vector, const INV: bool, const TW: bool, const F: u8>(
    x: Buf,
    base: usize,
    stride: usize,
    tw: *const f32,
    one: V,
    k1: usize,
    y: [C<V>; 4],
) {
    let col = [
        y[0],
        times_w16::<V, INV>(y[1], k1),
        times_w16::<V, INV>(y[2], 2 * k1),
        times_w16::<V, INV>(y[3], 3 * k1),
    ];
    let z = d4::<V, INV, F>(4 + k1 as u8, col, one);
    for (k2, &z) in z.iter().enumerate() {
        let k = k1 + 4 * k2;
        // SAFETY: the caller's; `k < 16`.
        unsafe { put::<V, INV, TW>(x, base + k * stride, k, tw, z) };
    }
    fence();
}

/// In place at rows `base + m stride`, `m < 8`: the 8-point DFT (radix 2, then
/// two 4-point DFTs), output `k` times `tw`'s `w^k`.
///
/// # Safety
/// The 8 rows exist; with `TW`, `tw` holds 14 values.
#[inline(always)]
pub(super) unsafe fn dft8<V: Vector, const INV: bool, const TW: bool, const F: u8>(
    x: Buf,
    base: usize,
    stride: usize,
    tw: *const f32,
    one: V,
) {
    const R: f32 = std::f32::consts::FRAC_1_SQRT_2;
    // SAFETY: every row below is `base + m stride` with `m < 8`.
    unsafe {
        let v = [
            x.ld::<V>(base),
            x.ld::<V>(base + stride),
            x.ld::<V>(base + 2 * stride),
            x.ld::<V>(base + 3 * stride),
            x.ld::<V>(base + 4 * stride),
            x.ld::<V>(base + 5 * stride),
            x.ld::<V>(base + 6 * stride),
            x.ld::<V>(base + 7 * stride),
        ];
        let r = V::splat(R);
        let (a0r, b0r) = bf::<V, false>(v[0].0, v[4].0, one);
        let (a0i, b0i) = bf::<V, false>(v[0].1, v[4].1, one);
        let (a1r, d1r) = bf::<V, false>(v[1].0, v[5].0, one);
        let (a1i, d1i) = bf::<V, false>(v[1].1, v[5].1, one);
        let (a3r, d3r) = bf::<V, false>(v[3].0, v[7].0, one);
        let (a3i, d3i) = bf::<V, false>(v[3].1, v[7].1, one);
        let a2 = (v[2].0.add(v[6].0), v[2].1.add(v[6].1));
        // (x2 - x6) times -i (forward) or +i (inverse), by operand order.
        let b2 = if INV {
            (v[6].1.sub(v[2].1), v[2].0.sub(v[6].0))
        } else {
            (v[2].1.sub(v[6].1), v[6].0.sub(v[2].0))
        };
        // Times w8 and w8^3 (or their conjugates).
        let (s1, t1) = (d1r.add(d1i), d1i.sub(d1r));
        let (s3, t3) = (d3r.add(d3i), d3i.sub(d3r));
        let neg_r = V::splat(-R);
        let (b1, b3) = if INV {
            ((neg_r.mul(t1), r.mul(s1)), (neg_r.mul(s3), neg_r.mul(t3)))
        } else {
            ((r.mul(s1), r.mul(t1)), (r.mul(t3), neg_r.mul(s3)))
        };
        let e = dft4::<V, INV, false>([(a0r, a0i), (a1r, a1i), a2, (a3r, a3i)], one);
        let o = if F != 0 {
            dft4::<V, INV, true>([(b0r, b0i), b1, b2, b3], one)
        } else {
            dft4::<V, INV, false>([(b0r, b0i), b1, b2, b3], one)
        };
        for k in 0..4 {
            put::<V, INV, TW>(x, base + 2 * k * stride, 2 * k, tw, e[k]);
            put::<V, INV, TW>(x, base + (2 * k + 1) * stride, 2 * k + 1, tw, o[k]);
        }
    }
}

/// In place at rows `base + m stride`, `m < 4`: the 4-point DFT, output `k`
/// times `tw`'s `w^k`.
///
/// # Safety
/// The 4 rows exist; with `TW`, `tw` holds 6 values.
#[inline(always)]
pub(super) unsafe fn dft4_at<V: Vector, const INV: bool, const TW: bool>(
    x: Buf,
    base: usize,
    stride: usize,
    tw: *const f32,
    one: V,
) {
    // SAFETY: every row below is `base + m stride` with `m < 4`.
    unsafe {
        let u = [
            x.ld::<V>(base),
            x.ld::<V>(base + stride),
            x.ld::<V>(base + 2 * stride),
            x.ld::<V>(base + 3 * stride),
        ];
        for (k, &z) in dft4::<V, INV, false>(u, one).iter().enumerate() {
            put::<V, INV, TW>(x, base + k * stride, k, tw, z);
        }
    }
}
