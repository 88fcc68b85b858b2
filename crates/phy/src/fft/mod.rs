//! Power-of-two FFTs of 16 antennas at once: SIMD lanes are antennas.
//!
//! Why not rustfft (or FFTW): the uplink front end transforms every antenna's copy
//! of the same symbol, and the group equaliser after it reads 16 subcarriers of
//! every antenna as one contiguous planar block. rustfft transforms one antenna at
//! a time in interleaved complex (AVX2 at best), so the front end converted,
//! transformed, then gathered and transposed every bin through memory: 6.1 of the
//! 11.9 ms of a quiet 64x16 uplink frame on one AVX-512 core (docs/BENCHMARKS.md,
//! "PHY benchmarks"). Here the data is `[sample][antenna]` (one [`Row`] of 16
//! lanes per sample, re and im planar), so a Stockham pass is full-width vector
//! arithmetic on rows with broadcast twiddles, no shuffles inside the transform;
//! the ci16 conversion with CP removal and the gather into the equaliser's slices
//! are 16 x 16 transposes around it ([`crate::frontend::FrontEnd::frame_planar`]).
//! Measured on that core (load 4-5): 2.83 us per 2048-point transform against
//! 3.1-5.0 us for rustfft and 4.9 us for FFTW 3.3.10 (`FFTW_MEASURE`, Debian's
//! SSE2/AVX build); the uplink FFT stage went from 6.1 ms (quiet) to 4.6 ms
//! (loaded). Below AVX-512 the 16-lane vector is two or four registers and spills,
//! so the front end keeps rustfft there.
//!
//! Passes are radix 8 (a radix-4 or radix-2 last pass for other powers of two),
//! each reading one buffer and writing the other (natural order in, no bit
//! reversal). Above 128 points the transform runs as two levels of sub-transforms
//! that fit L1 (`TwoLevel`), its result rows in a permuted order that
//! `BatchFft::row` maps. Transforms are unnormalised, as rustfft's.

pub(crate) mod lanes;

pub use lanes::{Row, LANES};

use lanes::Lanes;

use crate::simd::Isa;

/// Call `$body::<V>(args)` (an `#[inline(always)]` function generic over
/// [`lanes::Lanes`]) built for the given [`Isa`], clamped to what the CPU has.
macro_rules! dispatch_lanes {
    ($isa:expr, fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? => $body:ident) => {{
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,fma")]
        unsafe fn avx512($($arg: $ty),*) $(-> $ret)? {
            $body::<$crate::fft::lanes::Avx512>($($arg),*)
        }
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn avx2($($arg: $ty),*) $(-> $ret)? {
            $body::<$crate::fft::lanes::Portable<true>>($($arg),*)
        }
        match ($isa).min($crate::simd::Isa::cpu()) {
            // SAFETY: `Isa::cpu` established the CPU has these features.
            #[cfg(target_arch = "x86_64")]
            $crate::simd::Isa::Avx512 => unsafe { avx512($($arg),*) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            $crate::simd::Isa::Avx2 => unsafe { avx2($($arg),*) },
            _ => $body::<$crate::fft::lanes::Portable<false>>($($arg),*),
        }
    }};
}
pub(crate) use dispatch_lanes;

/// Why a [`BatchFft`] cannot be planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the batched FFT needs a power-of-two size from 4 to 2^24, got {0}")]
pub struct FftSizeError(pub usize);

/// One Stockham pass over sub-transforms of length `n` with stride `s`: radix 8,
/// or 4 or 2 for the last pass of a size that is not a power of 8. Its twiddles
/// start at `tw`.
#[derive(Clone, Copy, Debug)]
struct Pass {
    n: usize,
    s: usize,
    tw: usize,
}

/// The Stockham passes of one size.
#[derive(Debug)]
struct Plan {
    passes: Vec<Pass>,
    /// Per butterfly index `p` of a pass of radix `r`: `w^(kp)` for `k = 1..r`
    /// as (re, im) pairs, `w = exp(-2 pi i / n)` (the inverse conjugates them).
    twiddles: Vec<f32>,
}

impl Plan {
    fn new(n: usize) -> Self {
        let (mut passes, mut twiddles) = (Vec::new(), Vec::new());
        let (mut len, mut s) = (n, 1);
        while len > 1 {
            passes.push(Pass {
                n: len,
                s,
                tw: twiddles.len(),
            });
            let radix = len.min(8);
            for p in 0..len / radix {
                for k in 1..radix {
                    let (r, i) = root(k * p, len);
                    twiddles.extend([r, i]);
                }
            }
            len /= radix;
            s *= radix;
        }
        Self { passes, twiddles }
    }
}

/// `exp(-2 pi i k / n)`, computed in f64.
fn root(k: usize, n: usize) -> (f32, f32) {
    let a = -2.0 * std::f64::consts::PI * (k % n) as f64 / n as f64;
    (a.cos() as f32, a.sin() as f32)
}

/// A planned power-of-two transform of 16 lanes, with its work buffers.
#[derive(Debug)]
pub struct BatchFft {
    n: usize,
    /// The whole transform in one plan (sizes up to [`ONE_LEVEL_MAX`]).
    plan: Plan,
    /// Larger sizes: two levels of transforms that fit the L1 cache.
    two: Option<TwoLevel>,
    /// Ping-pong buffers: `re`, `im` of A (the input), then of B.
    work: [Vec<Row>; 4],
}

/// Sizes above this run as [`TwoLevel`] transforms: with 16 lanes a 2048-point
/// batch is 2 x 128 KiB, and streaming it through L2 once per pass made the
/// one-level transform slower than rustfft's one-antenna-at-a-time.
const ONE_LEVEL_MAX: usize = 128;

/// `n = n1 * n2` as `n2` transforms of `n1` points (input stride `n2`, copied
/// into L1 first), a twiddle, then `n1` transforms of `n2` contiguous points in
/// place. Bin `k = k1 + n1 k2` is left at row `k1 (n2 + 1) + k2`
/// ([`BatchFft::row`]): the front end reads bins through a table anyway, so no
/// pass puts them back in order. Rows of `n2` are padded by one: a power-of-two
/// stride between the rows a column reads would put them all in one L1 set
/// (4 KiB aliasing), which measured slower than the single-level transform.
#[derive(Debug)]
struct TwoLevel {
    n1: usize,
    n2: usize,
    first: Plan,
    second: Plan,
    /// `[j][k1]`: `exp(-2 pi i j k1 / n)`.
    middle: Vec<[f32; 2]>,
    /// Ping-pong buffers of one sub-transform: re, im of X, then of Y.
    small: [Vec<Row>; 4],
}

/// Which work buffer holds a result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    A,
    B,
}

impl BatchFft {
    /// Plan `n`-point transforms.
    ///
    /// # Errors
    /// `n` is not a power of two in `4..=2^24`.
    pub fn new(n: usize) -> Result<Self, FftSizeError> {
        if !n.is_power_of_two() || !(4..=1 << 24).contains(&n) {
            return Err(FftSizeError(n));
        }
        let two = (n > ONE_LEVEL_MAX).then(|| {
            let n1 = 1 << (n.trailing_zeros() / 2);
            let n2 = n / n1;
            TwoLevel {
                n1,
                n2,
                first: Plan::new(n1),
                second: Plan::new(n2),
                middle: (0..n2)
                    .flat_map(|j| (0..n1).map(move |k| root(j * k, n)))
                    .map(|(r, i)| [r, i])
                    .collect(),
                small: std::array::from_fn(|_| vec![Row::default(); n2]),
            }
        });
        Ok(Self {
            n,
            plan: Plan::new(if two.is_some() { 1 } else { n }),
            work: std::array::from_fn(|_| {
                vec![Row::default(); two.as_ref().map_or(n, |t| t.n1 * (t.n2 + 1))]
            }),
            two,
        })
    }

    pub fn size(&self) -> usize {
        self.n
    }

    /// The row of the result buffer that holds output `k` (bin or time sample).
    #[inline]
    pub(crate) fn row(&self, k: usize) -> usize {
        match &self.two {
            Some(t) => (k % t.n1) * (t.n2 + 1) + k / t.n1,
            None => k,
        }
    }

    /// The row of the input buffer that input `t` goes to.
    #[inline]
    pub(crate) fn input_row(&self, t: usize) -> usize {
        match &self.two {
            Some(tw) => t / tw.n2 * (tw.n2 + 1) + t % tw.n2,
            None => t,
        }
    }

    /// In-place transform of 16 lanes: `re[t].0[l]`, `im[t].0[l]` is sample `t` of
    /// lane `l` (`n` rows each). `inverse`: the unnormalised inverse transform.
    ///
    /// # Panics
    /// If `re` or `im` does not hold exactly `n` rows (a caller bug).
    pub fn transform(&mut self, isa: Isa, inverse: bool, re: &mut [Row], im: &mut [Row]) {
        assert!(re.len() == self.n && im.len() == self.n, "transform: size");
        for t in 0..self.n {
            let at = self.input_row(t);
            self.work[0][at] = re[t];
            self.work[1][at] = im[t];
        }
        let side = self.run(isa, inverse);
        let (r, i) = self.buffers(side);
        for k in 0..self.n {
            re[k] = r[self.row(k)];
            im[k] = i[self.row(k)];
        }
    }

    /// The buffers a transform reads (`re`, `im`).
    pub(crate) fn input_mut(&mut self) -> (&mut [Row], &mut [Row]) {
        let [a_re, a_im, ..] = &mut self.work;
        (a_re, a_im)
    }

    /// The buffers of `side` (`re`, `im`).
    pub(crate) fn buffers(&self, side: Side) -> (&[Row], &[Row]) {
        match side {
            Side::A => (&self.work[0], &self.work[1]),
            Side::B => (&self.work[2], &self.work[3]),
        }
    }

    /// Transform what is in [`Self::input_mut`]; returns where the result is.
    pub(crate) fn run(&mut self, isa: Isa, inverse: bool) -> Side {
        let fft = self;
        dispatch_lanes!(isa, fn run(fft: &mut BatchFft, inverse: bool) -> Side => run_lanes)
    }

    /// [`Self::run`] with the lanes of the caller's build.
    #[inline(always)]
    pub(crate) fn run_lanes<V: Lanes>(&mut self, inverse: bool) -> Side {
        let [a_re, a_im, b_re, b_im] = &mut self.work;
        let a = (a_re.as_mut_ptr(), a_im.as_mut_ptr());
        let b = (b_re.as_mut_ptr(), b_im.as_mut_ptr());
        let Some(t) = self.two.as_mut() else {
            return run_passes::<V>(&self.plan, a, b, inverse);
        };
        let (n1, n2) = (t.n1, t.n2);
        let [x_re, x_im, y_re, y_im] = &mut t.small;
        let x = (x_re.as_mut_ptr(), x_im.as_mut_ptr());
        let y = (y_re.as_mut_ptr(), y_im.as_mut_ptr());
        let sign = if inverse { -1.0 } else { 1.0 };
        // SAFETY: A and B hold `n1 (n2 + 1)` rows, X and Y `n2 >= n1` rows;
        // every index below stays inside them.
        unsafe {
            // Columns: a[i n2 + j] over i, twiddled by w^(j k1), to b[k1 n2 + j].
            for j in 0..n2 {
                for i in 0..n1 {
                    copy_row(a, i * (n2 + 1) + j, x, i);
                }
                let r = pick(run_passes::<V>(&t.first, x, y, inverse), x, y);
                let mid = &t.middle[j * n1..(j + 1) * n1];
                for (k, w) in mid.iter().enumerate() {
                    let v = ld::<V>(r, k);
                    let tw = twiddle(V::splat(w[0]), V::splat(sign * w[1]), v);
                    st::<V>(b, k * (n2 + 1) + j, tw);
                }
            }
            // Rows: b[k1 n2 + j] over j, in place (ping-pong with X).
            for k in 0..n1 {
                let row = (b.0.add(k * (n2 + 1)), b.1.add(k * (n2 + 1)));
                if run_passes::<V>(&t.second, row, x, inverse) == Side::B {
                    for i in 0..n2 {
                        copy_row(x, i, row, i);
                    }
                }
            }
        }
        Side::B
    }
}

/// The buffer `side` names.
#[inline(always)]
fn pick(side: Side, a: (*mut Row, *mut Row), b: (*mut Row, *mut Row)) -> (*mut Row, *mut Row) {
    match side {
        Side::A => a,
        Side::B => b,
    }
}

/// # Safety
/// Both rows exist.
#[inline(always)]
unsafe fn copy_row(src: (*mut Row, *mut Row), i: usize, dst: (*mut Row, *mut Row), j: usize) {
    // SAFETY: the caller's.
    unsafe {
        *dst.0.add(j) = *src.0.add(i);
        *dst.1.add(j) = *src.1.add(i);
    }
}

#[inline(always)]
fn run_lanes<V: Lanes>(fft: &mut BatchFft, inverse: bool) -> Side {
    fft.run_lanes::<V>(inverse)
}

/// Run `plan` on buffer `a`, ping-ponging with `b`; returns where the result is.
#[inline(always)]
fn run_passes<V: Lanes>(
    plan: &Plan,
    a: (*mut Row, *mut Row),
    b: (*mut Row, *mut Row),
    inverse: bool,
) -> Side {
    let tw = &plan.twiddles;
    let (mut x, mut y) = (a, b);
    let mut side = Side::A;
    for p in &plan.passes {
        // SAFETY: both buffers hold the plan's `n` rows (callers' contract) and
        // every pass indexes below `n = p.n * p.s` (`Plan::new` builds them so).
        unsafe {
            let tw = tw[p.tw..].as_ptr();
            match (p.n.min(8), inverse) {
                (8, false) => radix8::<V, false>(p.n, p.s, tw, x, y),
                (8, true) => radix8::<V, true>(p.n, p.s, tw, x, y),
                (4, false) => radix4::<V, false>(p.s, x, y),
                (4, true) => radix4::<V, true>(p.s, x, y),
                _ => radix2::<V>(p.s, x, y),
            }
        }
        std::mem::swap(&mut x, &mut y);
        side = match side {
            Side::A => Side::B,
            Side::B => Side::A,
        };
    }
    side
}

#[inline(always)]
unsafe fn ld<V: Lanes>(p: (*mut Row, *mut Row), i: usize) -> (V, V) {
    // SAFETY: the caller keeps `i` inside the buffers.
    unsafe { (V::load(p.0.add(i).cast()), V::load(p.1.add(i).cast())) }
}

#[inline(always)]
unsafe fn st<V: Lanes>(p: (*mut Row, *mut Row), i: usize, v: (V, V)) {
    // SAFETY: the caller keeps `i` inside the buffers.
    unsafe {
        v.0.store(p.0.add(i).cast());
        v.1.store(p.1.add(i).cast());
    }
}

/// `w * z` for a twiddle `(wr, wi)` (already conjugated for the inverse).
#[inline(always)]
fn twiddle<V: Lanes>(wr: V, wi: V, z: (V, V)) -> (V, V) {
    (wr.mul_sub(z.0, wi.mul(z.1)), wr.mul_add(z.1, wi.mul(z.0)))
}

type C<V> = (V, V);

#[inline(always)]
fn add<V: Lanes>(a: C<V>, b: C<V>) -> C<V> {
    (a.0.add(b.0), a.1.add(b.1))
}

#[inline(always)]
fn sub<V: Lanes>(a: C<V>, b: C<V>) -> C<V> {
    (a.0.sub(b.0), a.1.sub(b.1))
}

/// `z` times `-i` (forward) or `+i` (inverse).
#[inline(always)]
fn rot<V: Lanes, const INV: bool>(z: C<V>) -> C<V> {
    if INV {
        (V::zero().sub(z.1), z.0)
    } else {
        (z.1, V::zero().sub(z.0))
    }
}

/// `z` times `exp(-i pi / 4)` (forward) or `exp(i pi / 4)` (inverse).
#[inline(always)]
fn w8<V: Lanes, const INV: bool>(z: C<V>) -> C<V> {
    let c = V::splat(std::f32::consts::FRAC_1_SQRT_2);
    if INV {
        (z.0.sub(z.1).mul(c), z.0.add(z.1).mul(c))
    } else {
        (z.0.add(z.1).mul(c), z.1.sub(z.0).mul(c))
    }
}

/// The 4-point DFT of `u` (sign by `INV`), in order.
#[inline(always)]
fn dft4<V: Lanes, const INV: bool>(u: [C<V>; 4]) -> [C<V>; 4] {
    let (s02, d02) = (add(u[0], u[2]), sub(u[0], u[2]));
    let (s13, d13) = (add(u[1], u[3]), sub(u[1], u[3]));
    let r = rot::<V, INV>(d13);
    [add(s02, s13), add(d02, r), sub(s02, s13), sub(d02, r)]
}

/// One radix-8 decimation-in-frequency Stockham pass:
/// `y[q + s(8p + k)] = w^(kp) sum_j x[q + s(p + j n/8)] exp(-+2 pi i jk / 8)`.
///
/// # Safety
/// `x` and `y` hold `n * s` rows; `tw` holds `14 n / 8` values.
#[inline(always)]
unsafe fn radix8<V: Lanes, const INV: bool>(
    n: usize,
    s: usize,
    tw: *const f32,
    x: (*mut Row, *mut Row),
    y: (*mut Row, *mut Row),
) {
    let m = n / 8;
    let sign = if INV { -1.0 } else { 1.0 };
    for p in 0..m {
        // SAFETY: `p < n / 8`, 14 values each.
        let w: [f32; 14] = unsafe { tw.add(14 * p).cast::<[f32; 14]>().read_unaligned() };
        for q in 0..s {
            let i0 = q + s * p;
            // SAFETY: every index is below `8 m s = n s`.
            unsafe {
                let sm = s * m;
                let v: [C<V>; 8] = [
                    ld::<V>(x, i0),
                    ld::<V>(x, i0 + sm),
                    ld::<V>(x, i0 + 2 * sm),
                    ld::<V>(x, i0 + 3 * sm),
                    ld::<V>(x, i0 + 4 * sm),
                    ld::<V>(x, i0 + 5 * sm),
                    ld::<V>(x, i0 + 6 * sm),
                    ld::<V>(x, i0 + 7 * sm),
                ];
                let a = [
                    add(v[0], v[4]),
                    add(v[1], v[5]),
                    add(v[2], v[6]),
                    add(v[3], v[7]),
                ];
                let d1 = w8::<V, INV>(sub(v[1], v[5]));
                let b = [
                    sub(v[0], v[4]),
                    d1,
                    rot::<V, INV>(sub(v[2], v[6])),
                    rot::<V, INV>(w8::<V, INV>(sub(v[3], v[7]))),
                ];
                let (e, o) = (dft4::<V, INV>(a), dft4::<V, INV>(b));
                let out = q + s * 8 * p;
                st::<V>(y, out, e[0]);
                for k in 1..8 {
                    let z = if k % 2 == 0 { e[k / 2] } else { o[k / 2] };
                    let (wr, wi) = (V::splat(w[2 * k - 2]), V::splat(sign * w[2 * k - 1]));
                    st::<V>(y, out + k * s, twiddle(wr, wi, z));
                }
            }
        }
    }
}

/// The last pass of a size `2 * 8^k` (`n = 4`, no twiddles): 4-point DFTs at
/// stride `s`.
///
/// # Safety
/// `x` and `y` hold `4 * s` rows.
#[inline(always)]
unsafe fn radix4<V: Lanes, const INV: bool>(
    s: usize,
    x: (*mut Row, *mut Row),
    y: (*mut Row, *mut Row),
) {
    for q in 0..s {
        // SAFETY: every index is below `4 s`.
        unsafe {
            let u: [C<V>; 4] = [
                ld::<V>(x, q),
                ld::<V>(x, q + s),
                ld::<V>(x, q + 2 * s),
                ld::<V>(x, q + 3 * s),
            ];
            for (k, z) in dft4::<V, INV>(u).into_iter().enumerate() {
                st::<V>(y, q + k * s, z);
            }
        }
    }
}

/// The last pass of a size `2 * 8^k`: length-2 transforms at stride `s`.
///
/// # Safety
/// `x` and `y` hold `2 * s` rows.
#[inline(always)]
unsafe fn radix2<V: Lanes>(s: usize, x: (*mut Row, *mut Row), y: (*mut Row, *mut Row)) {
    for q in 0..s {
        // SAFETY: `q + s < 2 s`.
        unsafe {
            let a = ld::<V>(x, q);
            let b = ld::<V>(x, q + s);
            st::<V>(y, q, (a.0.add(b.0), a.1.add(b.1)));
            st::<V>(y, q + s, (a.0.sub(b.0), a.1.sub(b.1)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use radiohost_iq::Cf32;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use rustfft::FftPlanner;

    fn naive(x: &[Cf32], sign: f64) -> Vec<Cf32> {
        let n = x.len();
        (0..n)
            .map(|k| {
                let (mut re, mut im) = (0f64, 0f64);
                for (t, v) in x.iter().enumerate() {
                    let a = sign * 2.0 * std::f64::consts::PI * ((k * t) % n) as f64 / n as f64;
                    re += v.re as f64 * a.cos() - v.im as f64 * a.sin();
                    im += v.re as f64 * a.sin() + v.im as f64 * a.cos();
                }
                Cf32::new(re as f32, im as f32)
            })
            .collect()
    }

    /// Largest error over all lanes and bins against `want(lane)`, relative to
    /// `sqrt(n) * eps * rms(input)`.
    fn check(n: usize, isa: Isa, inverse: bool, reference: &str) {
        let mut rng = ChaCha8Rng::seed_from_u64(n as u64 + inverse as u64);
        let mut re = vec![Row::default(); n];
        let mut im = vec![Row::default(); n];
        for t in 0..n {
            for l in 0..LANES {
                re[t].0[l] = rng.gen_range(-1.0..1.0);
                im[t].0[l] = rng.gen_range(-1.0..1.0);
            }
        }
        let lane =
            |l: usize| -> Vec<Cf32> { (0..n).map(|t| Cf32::new(re[t].0[l], im[t].0[l])).collect() };
        let want: Vec<Vec<Cf32>> = (0..LANES)
            .map(|l| {
                let x = lane(l);
                if reference == "naive" {
                    naive(&x, if inverse { 1.0 } else { -1.0 })
                } else {
                    let mut planner = FftPlanner::<f32>::new();
                    let f = if inverse {
                        planner.plan_fft_inverse(n)
                    } else {
                        planner.plan_fft_forward(n)
                    };
                    let mut y = x;
                    f.process(&mut y);
                    y
                }
            })
            .collect();
        let mut fft = BatchFft::new(n).unwrap();
        fft.transform(isa, inverse, &mut re, &mut im);
        // Random inputs in [-1, 1): rms 0.58 per component, output rms sqrt(n) * 0.82.
        let tol = 8.0 * (n as f32).sqrt() * (n as f32).log2() * f32::EPSILON;
        for (l, w) in want.iter().enumerate() {
            for (k, v) in w.iter().enumerate() {
                let got = Cf32::new(re[k].0[l], im[k].0[l]);
                assert!(
                    (got - v).norm() <= tol,
                    "n {n} {} inverse {inverse} vs {reference}: lane {l} bin {k}: {got} vs {v} (tol {tol})",
                    isa.name()
                );
            }
        }
    }

    #[test]
    fn matches_naive_dft_every_build() {
        for isa in Isa::available() {
            for n in [4usize, 8, 16, 64, 128, 512] {
                for inverse in [false, true] {
                    check(n, isa, inverse, "naive");
                }
            }
        }
    }

    #[test]
    fn matches_rustfft_every_build() {
        for isa in Isa::available() {
            for n in [256usize, 1024, 2048, 4096] {
                for inverse in [false, true] {
                    check(n, isa, inverse, "rustfft");
                }
            }
        }
        if Isa::cpu() < Isa::Avx512 {
            println!(
                "SKIPPED: AVX-512 build (this CPU has {})",
                Isa::cpu().name()
            );
        }
    }

    #[test]
    fn refuses_other_sizes() {
        for n in [0usize, 1, 2, 3, 12, 300, 1 << 25] {
            assert_eq!(BatchFft::new(n).unwrap_err(), FftSizeError(n));
        }
        let msg = BatchFft::new(300).unwrap_err().to_string();
        assert!(msg.contains("power-of-two") && msg.contains("300"), "{msg}");
    }
}
