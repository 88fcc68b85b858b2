//! Zero-forcing for one subcarrier: the detector `W = (H^H H)^-1 H^H` through a
//! Cholesky factorisation of the Gram matrix, equalisation `x = W y`, and the
//! reciprocity precoder `P = W^T`.
//!
//! Layouts (all `Cf32`, no allocation per call):
//! * channel `h`: `M x K`, column-major (user `k`'s antenna vector is `h[k*M..(k+1)*M]`),
//!   which is also how CSI estimation writes it;
//! * detector `w`: `K x M`, row-major (`w[k*M..(k+1)*M]` is user `k`'s combiner).
//!
//! Why Cholesky instead of a general solver: `H^H H` is Hermitian positive definite
//! whenever `H` has full column rank, so `G = L L^H` costs `K^3/6` and is stable
//! without pivoting; applying `L^-1` then `L^-H` to `H^H` row by row produces `W`
//! directly, and `diag((H^H H)^-1) = ||w_k||^2` comes for free (it scales each
//! user's post-equaliser noise).
//!
//! [`ZfBatch`] runs the same algorithm for 16 channels at once, one per f32 lane
//! (what the pipelines use at AVX-512, one channel per ZF group).

use radiohost_iq::Cf32;

use crate::simd::{dispatch, fmadd, Isa};

/// The Gram matrix was not positive definite: the users' channels are (numerically)
/// linearly dependent on this subcarrier.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("zero-forcing: Gram matrix not positive definite at user {user} (pivot {pivot:e}); channels are linearly dependent, too few antennas or a dead pilot")]
pub struct ZfError {
    pub user: usize,
    pub pivot: f32,
}

/// Caller-owned scratch for [`zf_detector`]: planar (split real/imaginary) copies
/// of the channel and the detector, and the `K x K` Cholesky factor.
#[derive(Debug, Clone)]
pub struct ZfScratch {
    hr: Vec<f32>,
    hi: Vec<f32>,
    wr: Vec<f32>,
    wi: Vec<f32>,
    lr: Vec<f32>,
    li: Vec<f32>,
    diag_inv: Vec<f32>,
    k: usize,
    m: usize,
}

impl ZfScratch {
    /// Scratch for `users` users; antenna buffers grow on first use (then stay).
    pub fn new(users: usize) -> Self {
        Self {
            hr: Vec::new(),
            hi: Vec::new(),
            wr: Vec::new(),
            wi: Vec::new(),
            lr: vec![0.0; users * users],
            li: vec![0.0; users * users],
            diag_inv: vec![0.0; users],
            k: users,
            m: 0,
        }
    }

    /// Scratch sized for `antennas x users` up front (no allocation on first use).
    pub fn with_antennas(antennas: usize, users: usize) -> Self {
        let mut s = Self::new(users);
        s.resize(antennas);
        s
    }

    fn resize(&mut self, m: usize) {
        if self.m != m {
            let n = m * self.k;
            for v in [&mut self.hr, &mut self.hi, &mut self.wr, &mut self.wi] {
                v.clear();
                v.resize(n, 0.0);
            }
            self.m = m;
        }
    }
}

/// Independent accumulator lanes: float addition is not associative, so a single
/// running sum would keep the compiler from vectorising the reductions.
const LANES: usize = 8;

/// Planar `sum conj(a) * b`.
#[inline(always)]
fn dot_conj_planar(ar: &[f32], ai: &[f32], br: &[f32], bi: &[f32]) -> (f32, f32) {
    let mut re = [0f32; LANES];
    let mut im = [0f32; LANES];
    let n = ar.len() / LANES * LANES;
    for c in (0..n).step_by(LANES) {
        let (xr, xi) = (&ar[c..c + LANES], &ai[c..c + LANES]);
        let (yr, yi) = (&br[c..c + LANES], &bi[c..c + LANES]);
        for j in 0..LANES {
            re[j] += xr[j] * yr[j] + xi[j] * yi[j];
            im[j] += xr[j] * yi[j] - xi[j] * yr[j];
        }
    }
    let (mut sr, mut si) = (re.iter().sum::<f32>(), im.iter().sum::<f32>());
    for j in n..ar.len() {
        sr += ar[j] * br[j] + ai[j] * bi[j];
        si += ar[j] * bi[j] - ai[j] * br[j];
    }
    (sr, si)
}

/// `z -= c * zp` on planar vectors.
#[inline(always)]
fn axpy_sub(zr: &mut [f32], zi: &mut [f32], cr: f32, ci: f32, pr: &[f32], pi: &[f32]) {
    for (((zr, zi), pr), pi) in zr.iter_mut().zip(zi.iter_mut()).zip(pr).zip(pi) {
        *zr -= cr * pr - ci * pi;
        *zi -= cr * pi + ci * pr;
    }
}

/// `sum a * b` on interleaved complex vectors, in independent lanes.
#[inline(always)]
fn dot(a: &[Cf32], b: &[Cf32]) -> Cf32 {
    let mut re = [0f32; LANES];
    let mut im = [0f32; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for j in 0..LANES {
            re[j] += x[j].re * y[j].re - x[j].im * y[j].im;
            im[j] += x[j].re * y[j].im + x[j].im * y[j].re;
        }
    }
    let mut acc = Cf32::new(re.iter().sum(), im.iter().sum());
    for (x, y) in ra.iter().zip(rb) {
        acc += x * y;
    }
    acc
}

/// Compute the ZF detector of one subcarrier.
///
/// `h`: `M*K` channel (column-major), `w`: `K*M` output (row-major),
/// `noise_gain`: `K` outputs, `[(H^H H)^-1]_kk` (post-equaliser noise per unit of
/// receiver noise variance). Runs the AVX-512 or AVX2+FMA build of the same code
/// when the CPU has it (the default target is baseline x86-64).
///
/// # Panics
/// If the slice lengths disagree with `m`, `k` or the scratch (caller bugs).
pub fn zf_detector(
    h: &[Cf32],
    m: usize,
    k: usize,
    scratch: &mut ZfScratch,
    w: &mut [Cf32],
    noise_gain: &mut [f32],
) -> Result<(), ZfError> {
    zf_detector_at(Isa::detect(), h, m, k, scratch, w, noise_gain)
}

/// [`zf_detector`] built for `isa` (clamped to what the CPU has): for tests and
/// benches comparing the builds.
pub fn zf_detector_at(
    isa: Isa,
    h: &[Cf32],
    m: usize,
    k: usize,
    scratch: &mut ZfScratch,
    w: &mut [Cf32],
    noise_gain: &mut [f32],
) -> Result<(), ZfError> {
    assert_eq!(h.len(), m * k, "zf: channel size");
    assert_eq!(w.len(), m * k, "zf: detector size");
    assert_eq!(noise_gain.len(), k, "zf: noise gain size");
    assert_eq!(scratch.k, k, "zf: scratch for another K");
    scratch.resize(m);
    let s = scratch;
    dispatch!(isa, fn run(h: &[Cf32], m: usize, k: usize, s: &mut ZfScratch, w: &mut [Cf32],
        noise_gain: &mut [f32]) -> Result<(), ZfError> => zf_body)
}

#[inline(always)]
fn zf_body<const FMA: bool>(
    h: &[Cf32],
    m: usize,
    k: usize,
    s: &mut ZfScratch,
    w: &mut [Cf32],
    noise_gain: &mut [f32],
) -> Result<(), ZfError> {
    for (i, v) in h.iter().enumerate() {
        s.hr[i] = v.re;
        s.hi[i] = v.im;
    }
    let (hr, hi) = (&s.hr, &s.hi);
    let (lr, li) = (&mut s.lr, &mut s.li);
    // Cholesky G = L L^H, column by column, Gram entries G[i][j] = h_i^H h_j on the fly.
    for j in 0..k {
        let (hjr, hji) = (&hr[j * m..(j + 1) * m], &hi[j * m..(j + 1) * m]);
        let energy = dot_conj_planar(hjr, hji, hjr, hji).0;
        let mut d = energy;
        for p in 0..j {
            d -= lr[j * k + p] * lr[j * k + p] + li[j * k + p] * li[j * k + p];
        }
        if d.is_nan() || d <= f32::EPSILON * 16.0 * energy.max(f32::MIN_POSITIVE) {
            return Err(ZfError { user: j, pivot: d });
        }
        let ljj = d.sqrt();
        lr[j * k + j] = ljj;
        li[j * k + j] = 0.0;
        let inv = 1.0 / ljj;
        s.diag_inv[j] = inv;
        for i in j + 1..k {
            let (mut gr, mut gi) =
                dot_conj_planar(&hr[i * m..(i + 1) * m], &hi[i * m..(i + 1) * m], hjr, hji);
            for p in 0..j {
                // G[i][j] - sum_p L[i][p] conj(L[j][p])
                let (ar, ai) = (lr[i * k + p], li[i * k + p]);
                let (br, bi) = (lr[j * k + p], li[j * k + p]);
                gr -= ar * br + ai * bi;
                gi -= ai * br - ar * bi;
            }
            lr[i * k + j] = gr * inv;
            li[i * k + j] = gi * inv;
        }
    }
    // Forward substitution L Z = H^H (row i of H^H is conj(h_i)); Z lives in (wr, wi).
    let (wr, wi) = (&mut s.wr, &mut s.wi);
    for i in 0..k {
        let (done_r, rest_r) = wr.split_at_mut(i * m);
        let (done_i, rest_i) = wi.split_at_mut(i * m);
        let (zr, zi) = (&mut rest_r[..m], &mut rest_i[..m]);
        zr.copy_from_slice(&hr[i * m..(i + 1) * m]);
        for (z, x) in zi.iter_mut().zip(&hi[i * m..(i + 1) * m]) {
            *z = -x;
        }
        for p in 0..i {
            let (pr, pi) = (&done_r[p * m..(p + 1) * m], &done_i[p * m..(p + 1) * m]);
            axpy_sub(zr, zi, lr[i * k + p], li[i * k + p], pr, pi);
        }
        let inv = s.diag_inv[i];
        zr.iter_mut().for_each(|v| *v *= inv);
        zi.iter_mut().for_each(|v| *v *= inv);
    }
    // Back substitution L^H W = Z, last row first; (L^H)[i][p] = conj(L[p][i]).
    for i in (0..k).rev() {
        let (head_r, tail_r) = wr.split_at_mut((i + 1) * m);
        let (head_i, tail_i) = wi.split_at_mut((i + 1) * m);
        let (xr, xi) = (&mut head_r[i * m..], &mut head_i[i * m..]);
        for p in i + 1..k {
            let off = (p - i - 1) * m;
            let (pr, pi) = (&tail_r[off..off + m], &tail_i[off..off + m]);
            axpy_sub(xr, xi, lr[p * k + i], -li[p * k + i], pr, pi);
        }
        let inv = s.diag_inv[i];
        let mut norm = 0.0;
        for (r, im) in xr.iter_mut().zip(xi.iter_mut()) {
            *r *= inv;
            *im *= inv;
            norm += *r * *r + *im * *im;
        }
        noise_gain[i] = norm;
    }
    for ((o, r), im) in w.iter_mut().zip(wr.iter()).zip(wi.iter()) {
        *o = Cf32::new(*r, *im);
    }
    Ok(())
}

/// Groups [`ZfBatch`] solves together: one per f32 lane of an AVX-512 register.
pub const BATCH: usize = 16;

/// One value of every group of a batch.
pub type Lanes = [f32; BATCH];

/// A group of a batch whose Gram matrix was not positive definite.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("{source} (batch lane {lane})")]
pub struct ZfLaneError {
    /// The lane (group within the batch) that failed.
    pub lane: usize,
    pub source: ZfError,
}

/// Zero-forcing of up to [`BATCH`] subcarrier groups at once, one group per lane.
///
/// The per-subcarrier [`zf_detector`] spends its time in horizontal reductions
/// (each Gram entry is a dot product of `M` values) and in scalar Cholesky steps; with
/// one group per lane every step of the same algorithm is a plain 16-wide vector
/// operation. Layouts (planar, lanes innermost): channel `h[k*M + m]` (user `k`'s
/// antenna vector, as [`crate::csi::CsiEstimator::estimate_groups`] writes it),
/// detector transposed `wt[m*K + k]` (what equalisation and precoding read), noise
/// gains `[(H^H H)^-1]_kk` as `noise_gain[k]`.
#[derive(Debug, Clone)]
pub struct ZfBatch {
    antennas: usize,
    users: usize,
    /// Cholesky factor, packed lower triangle (`L[i][j]` at `i*(i+1)/2 + j`).
    lr: Vec<Lanes>,
    li: Vec<Lanes>,
    diag_inv: Vec<Lanes>,
    /// One column of the Gram matrix (`G[i][j]` for `i >= j`, at `i - j`).
    g_re: Vec<Lanes>,
    g_im: Vec<Lanes>,
}

/// A batch's planar inputs and outputs (see [`ZfBatch`] for the layouts).
pub struct BatchIo<'a> {
    pub hr: &'a [Lanes],
    pub hi: &'a [Lanes],
    pub wtr: &'a mut [Lanes],
    pub wti: &'a mut [Lanes],
    pub noise_gain: &'a mut [Lanes],
}

impl ZfBatch {
    /// Scratch for `antennas x users` channels.
    pub fn new(antennas: usize, users: usize) -> Self {
        let tri = users * (users + 1) / 2;
        Self {
            antennas,
            users,
            lr: vec![[0.0; BATCH]; tri],
            li: vec![[0.0; BATCH]; tri],
            diag_inv: vec![[0.0; BATCH]; users],
            g_re: vec![[0.0; BATCH]; users],
            g_im: vec![[0.0; BATCH]; users],
        }
    }

    /// Solve every lane of `io.hr`/`io.hi` into `io.wtr`/`io.wti` and
    /// `io.noise_gain`. Only lanes `< valid` are checked for rank (the others may
    /// hold anything; their results are meaningless).
    ///
    /// # Errors
    /// The first valid lane whose channel is (numerically) rank deficient.
    ///
    /// # Panics
    /// If a buffer's size disagrees with the scratch's shape (caller bugs).
    pub fn solve(&mut self, io: BatchIo<'_>, valid: usize) -> Result<(), ZfLaneError> {
        self.solve_at(Isa::detect(), io, valid)
    }

    /// [`Self::solve`] built for `isa` (clamped to what the CPU has).
    ///
    /// # Errors
    /// As [`Self::solve`].
    pub fn solve_at(&mut self, isa: Isa, io: BatchIo<'_>, valid: usize) -> Result<(), ZfLaneError> {
        let mk = self.antennas * self.users;
        assert_eq!(io.hr.len(), mk, "zf batch: channel size");
        assert_eq!(io.hi.len(), mk, "zf batch: channel size");
        assert_eq!(io.wtr.len(), mk, "zf batch: detector size");
        assert_eq!(io.wti.len(), mk, "zf batch: detector size");
        assert_eq!(io.noise_gain.len(), self.users, "zf batch: noise gain size");
        let b = self;
        let valid = valid.min(BATCH);
        #[cfg(target_arch = "x86_64")]
        if isa.min(Isa::cpu()) == Isa::Avx512 {
            // SAFETY: the CPU has AVX-512 (checked just above).
            return unsafe { solve_avx512(b, io, valid) };
        }
        #[cfg(target_arch = "x86_64")]
        if isa.min(Isa::cpu()) == Isa::Avx2 {
            // SAFETY: the CPU has AVX2 and FMA (checked just above).
            return unsafe { solve_avx2(b, io, valid) };
        }
        dispatch!(isa.min(Isa::Avx2), fn run(b: &mut ZfBatch, io: BatchIo<'_>, valid: usize) -> Result<(), ZfLaneError> => batch_portable)
    }
}

/// Which hand-written kernels [`batch_body`] runs its hot loops on (a const
/// parameter, so each build keeps only its own).
const KERNEL_PORTABLE: u8 = 0;
/// AVX2 intrinsics, each 16-lane vector as two 8-lane halves.
const KERNEL_AVX2: u8 = 1;
/// AVX-512 intrinsics.
const KERNEL_AVX512: u8 = 2;

/// The AVX-512 build: the portable steps with the two hot loops (Gram rows and the
/// substitutions) in intrinsics. Left to itself, LLVM keeps the `[[f32; 16]; N]`
/// accumulators of the portable loops in memory and half-scalarises them.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,fma")]
unsafe fn solve_avx512(b: &mut ZfBatch, io: BatchIo<'_>, valid: usize) -> Result<(), ZfLaneError> {
    batch_body::<true, KERNEL_AVX512>(b, io, valid)
}

/// The AVX2 build: the portable steps with the Gram rows and the substitutions in
/// intrinsics, one 8-lane half of the batch at a time (the portable loops' 16-lane
/// accumulators are two registers each and spill).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn solve_avx2(b: &mut ZfBatch, io: BatchIo<'_>, valid: usize) -> Result<(), ZfLaneError> {
    batch_body::<true, KERNEL_AVX2>(b, io, valid)
}

#[inline(always)]
fn batch_portable<const FMA: bool>(
    b: &mut ZfBatch,
    io: BatchIo<'_>,
    valid: usize,
) -> Result<(), ZfLaneError> {
    batch_body::<FMA, KERNEL_PORTABLE>(b, io, valid)
}

#[inline(always)]
fn batch_body<const FMA: bool, const KERNEL: u8>(
    b: &mut ZfBatch,
    io: BatchIo<'_>,
    valid: usize,
) -> Result<(), ZfLaneError> {
    batch_cholesky::<FMA, KERNEL>(b, io.hr, io.hi, valid)?;
    batch_substitute::<FMA, KERNEL>(b, io);
    Ok(())
}

/// `acc += x * y`, lane by lane.
#[inline(always)]
fn lanes_fma<const FMA: bool>(acc: &mut Lanes, x: &Lanes, y: &Lanes) {
    for l in 0..BATCH {
        acc[l] = fmadd::<FMA>(x[l], y[l], acc[l]);
    }
}

/// `acc -= x * y`, lane by lane.
#[inline(always)]
fn lanes_fms<const FMA: bool>(acc: &mut Lanes, x: &Lanes, y: &Lanes) {
    for l in 0..BATCH {
        acc[l] = fmadd::<FMA>(-x[l], y[l], acc[l]);
    }
}

/// `x * y`, lane by lane.
#[inline(always)]
fn lanes_mul(x: &Lanes, y: &Lanes) -> Lanes {
    std::array::from_fn(|l| x[l] * y[l])
}

/// `g[r] = sum_a conj(x_r[a]) y[a]` for `r < R`, with `x_r = x[r*m..]`.
#[inline(always)]
fn gram<const R: usize, const FMA: bool, const KERNEL: u8>(
    yr: &[Lanes],
    yi: &[Lanes],
    xr: &[Lanes],
    xi: &[Lanes],
    m: usize,
    gr: &mut [Lanes],
    gi: &mut [Lanes],
) {
    let (yr, yi) = (&yr[..m], &yi[..m]);
    let (xr, xi) = (&xr[..R * m], &xi[..R * m]);
    let (gr, gi) = (&mut gr[..R], &mut gi[..R]);
    #[cfg(target_arch = "x86_64")]
    if KERNEL == KERNEL_AVX512 {
        // SAFETY: `KERNEL_AVX512` is only set inside `solve_avx512`, on CPUs with
        // AVX-512.
        unsafe { gram_avx512::<R>(yr, yi, xr, xi, m, gr, gi) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if KERNEL == KERNEL_AVX2 {
        // SAFETY: `KERNEL_AVX2` is only set inside `solve_avx2`, on CPUs with AVX2
        // and FMA.
        unsafe { gram_avx2::<R>(yr, yi, xr, xi, m, gr, gi) };
        return;
    }
    let mut ar = [[0f32; BATCH]; R];
    let mut ai = [[0f32; BATCH]; R];
    for a in 0..m {
        let (yr, yi) = (&yr[a], &yi[a]);
        for r in 0..R {
            let (xr, xi) = (&xr[r * m + a], &xi[r * m + a]);
            // conj(x) * y
            lanes_fma::<FMA>(&mut ar[r], xr, yr);
            lanes_fma::<FMA>(&mut ar[r], xi, yi);
            lanes_fma::<FMA>(&mut ai[r], xr, yi);
            lanes_fms::<FMA>(&mut ai[r], xi, yr);
        }
    }
    gr.copy_from_slice(&ar);
    gi.copy_from_slice(&ai);
}

/// [`gram`] in AVX-512 registers (slices already cut to `m`, `R*m` and `R`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn gram_avx512<const R: usize>(
    yr: &[Lanes],
    yi: &[Lanes],
    xr: &[Lanes],
    xi: &[Lanes],
    m: usize,
    gr: &mut [Lanes],
    gi: &mut [Lanes],
) {
    use std::arch::x86_64::*;
    let mut ar = [_mm512_setzero_ps(); R];
    let mut ai = [_mm512_setzero_ps(); R];
    for a in 0..m {
        // SAFETY (every load/store here): each `Lanes` is 16 floats.
        let (vr, vi) = unsafe {
            (
                _mm512_loadu_ps(yr[a].as_ptr()),
                _mm512_loadu_ps(yi[a].as_ptr()),
            )
        };
        for r in 0..R {
            let (ur, ui) = unsafe {
                (
                    _mm512_loadu_ps(xr[r * m + a].as_ptr()),
                    _mm512_loadu_ps(xi[r * m + a].as_ptr()),
                )
            };
            ar[r] = _mm512_fmadd_ps(ur, vr, ar[r]);
            ar[r] = _mm512_fmadd_ps(ui, vi, ar[r]);
            ai[r] = _mm512_fmadd_ps(ur, vi, ai[r]);
            ai[r] = _mm512_fnmadd_ps(ui, vr, ai[r]);
        }
    }
    for r in 0..R {
        unsafe {
            _mm512_storeu_ps(gr[r].as_mut_ptr(), ar[r]);
            _mm512_storeu_ps(gi[r].as_mut_ptr(), ai[r]);
        }
    }
}

/// Users whose Gram entries are accumulated together (8 accumulators).
const GRAM_ROWS: usize = 4;

/// Gram matrix and its Cholesky factor, column by column (as [`zf_detector`]).
#[inline(always)]
fn batch_cholesky<const FMA: bool, const KERNEL: u8>(
    b: &mut ZfBatch,
    hr: &[Lanes],
    hi: &[Lanes],
    valid: usize,
) -> Result<(), ZfLaneError> {
    let (m, k) = (b.antennas, b.users);
    let tri = |i: usize, j: usize| i * (i + 1) / 2 + j;
    let ZfBatch {
        lr,
        li,
        diag_inv,
        g_re,
        g_im,
        ..
    } = b;
    for j in 0..k {
        let (hjr, hji) = (&hr[j * m..(j + 1) * m], &hi[j * m..(j + 1) * m]);
        // G[i][j] = h_i^H h_j for i >= j, GRAM_ROWS users at a time and the rest
        // in one call: a call's accumulator chains are latency bound below four
        // rows, so one row at a time cost as much as four.
        let mut i0 = j;
        while i0 < k {
            let rows = GRAM_ROWS.min(k - i0);
            let (gr, gi) = (&mut g_re[i0 - j..], &mut g_im[i0 - j..]);
            let (xr, xi) = (&hr[i0 * m..], &hi[i0 * m..]);
            match rows {
                GRAM_ROWS => gram::<GRAM_ROWS, FMA, KERNEL>(hjr, hji, xr, xi, m, gr, gi),
                3 => gram::<3, FMA, KERNEL>(hjr, hji, xr, xi, m, gr, gi),
                2 => gram::<2, FMA, KERNEL>(hjr, hji, xr, xi, m, gr, gi),
                _ => gram::<1, FMA, KERNEL>(hjr, hji, xr, xi, m, gr, gi),
            }
            i0 += rows;
        }
        // Diagonal: d = G[j][j] - sum_p |L[j][p]|^2.
        let energy = g_re[0];
        let mut d = energy;
        for p in 0..j {
            let (r, i) = (&lr[tri(j, p)], &li[tri(j, p)]);
            lanes_fms::<FMA>(&mut d, r, r);
            lanes_fms::<FMA>(&mut d, i, i);
        }
        for (lane, (&dl, &el)) in d.iter().zip(&energy).enumerate().take(valid) {
            if dl.is_nan() || dl <= f32::EPSILON * 16.0 * el.max(f32::MIN_POSITIVE) {
                return Err(ZfLaneError {
                    lane,
                    source: ZfError { user: j, pivot: dl },
                });
            }
        }
        let ljj: Lanes = std::array::from_fn(|l| d[l].sqrt());
        lr[tri(j, j)] = ljj;
        li[tri(j, j)] = [0.0; BATCH];
        let inv: Lanes = std::array::from_fn(|l| 1.0 / ljj[l]);
        diag_inv[j] = inv;
        // L[i][j] = (G[i][j] - sum_p L[i][p] conj(L[j][p])) / L[j][j].
        for i in j + 1..k {
            let (mut gr, mut gi) = (g_re[i - j], g_im[i - j]);
            for p in 0..j {
                let (ar, ai) = (&lr[tri(i, p)], &li[tri(i, p)]);
                let (br, bi) = (&lr[tri(j, p)], &li[tri(j, p)]);
                lanes_fms::<FMA>(&mut gr, ar, br);
                lanes_fms::<FMA>(&mut gr, ai, bi);
                lanes_fms::<FMA>(&mut gi, ai, br);
                lanes_fma::<FMA>(&mut gi, ar, bi);
            }
            lr[tri(i, j)] = lanes_mul(&gr, &inv);
            li[tri(i, j)] = lanes_mul(&gi, &inv);
        }
    }
    Ok(())
}

/// Forward (`L Z = H^H`) and back (`L^H W = Z`) substitution, [`COLS`] antenna
/// columns at a time: the columns' `K` lane vectors stay in L1, `W^T` is written
/// row by row, and each `L` entry loaded feeds `COLS` independent FMA chains (one
/// column alone is bound by the latency of its two chains).
#[inline(always)]
fn batch_substitute<const FMA: bool, const KERNEL: u8>(b: &ZfBatch, io: BatchIo<'_>) {
    let m = b.antennas;
    io.noise_gain.iter_mut().for_each(|v| *v = [0.0; BATCH]);
    let mut a0 = 0;
    while a0 < m {
        let cols = if m - a0 >= COLS { COLS } else { 1 };
        #[cfg(target_arch = "x86_64")]
        if KERNEL == KERNEL_AVX512 {
            // SAFETY: `KERNEL_AVX512` is only set inside `solve_avx512`, on CPUs with
            // AVX-512.
            unsafe {
                if cols == COLS {
                    substitute_avx512::<COLS>(b, io.hr, io.hi, io.wtr, io.wti, io.noise_gain, a0)
                } else {
                    substitute_avx512::<1>(b, io.hr, io.hi, io.wtr, io.wti, io.noise_gain, a0)
                }
            }
            a0 += cols;
            continue;
        }
        #[cfg(target_arch = "x86_64")]
        if KERNEL == KERNEL_AVX2 {
            let cols = if m - a0 >= COLS_AVX2 { COLS_AVX2 } else { 1 };
            // SAFETY: `KERNEL_AVX2` is only set inside `solve_avx2`, on CPUs with
            // AVX2 and FMA.
            unsafe {
                if cols == COLS_AVX2 {
                    substitute_avx2::<COLS_AVX2>(b, io.hr, io.hi, io.wtr, io.wti, io.noise_gain, a0)
                } else {
                    substitute_avx2::<1>(b, io.hr, io.hi, io.wtr, io.wti, io.noise_gain, a0)
                }
            }
            a0 += cols;
            continue;
        }
        if cols == COLS {
            substitute_columns::<COLS, FMA>(b, io.hr, io.hi, io.wtr, io.wti, io.noise_gain, a0);
        } else {
            substitute_columns::<1, FMA>(b, io.hr, io.hi, io.wtr, io.wti, io.noise_gain, a0);
        }
        a0 += cols;
    }
}

/// [`substitute_columns`] in AVX-512 registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn substitute_avx512<const A: usize>(
    b: &ZfBatch,
    hr: &[Lanes],
    hi: &[Lanes],
    wtr: &mut [Lanes],
    wti: &mut [Lanes],
    noise_gain: &mut [Lanes],
    a0: usize,
) {
    use std::arch::x86_64::*;
    let (m, k) = (b.antennas, b.users);
    let tri = |i: usize, j: usize| i * (i + 1) / 2 + j;
    let (cr, ci) = (
        &mut wtr[a0 * k..(a0 + A) * k],
        &mut wti[a0 * k..(a0 + A) * k],
    );
    // SAFETY (every load/store here): each `Lanes` is 16 floats.
    let ld = |v: &Lanes| unsafe { _mm512_loadu_ps(v.as_ptr()) };
    let zero = _mm512_setzero_ps();
    for i in 0..k {
        let (mut r1, mut r2, mut i1, mut i2) = ([zero; A], [zero; A], [zero; A], [zero; A]);
        for c in 0..A {
            r1[c] = ld(&hr[i * m + a0 + c]);
            i1[c] = _mm512_sub_ps(zero, ld(&hi[i * m + a0 + c]));
        }
        for p in 0..i {
            let (lr, li) = (ld(&b.lr[tri(i, p)]), ld(&b.li[tri(i, p)]));
            for c in 0..A {
                let (zr, zi) = (ld(&cr[c * k + p]), ld(&ci[c * k + p]));
                r1[c] = _mm512_fnmadd_ps(lr, zr, r1[c]);
                r2[c] = _mm512_fmadd_ps(li, zi, r2[c]);
                i1[c] = _mm512_fnmadd_ps(lr, zi, i1[c]);
                i2[c] = _mm512_fnmadd_ps(li, zr, i2[c]);
            }
        }
        let inv = ld(&b.diag_inv[i]);
        for c in 0..A {
            let (r, im) = (
                _mm512_mul_ps(_mm512_add_ps(r1[c], r2[c]), inv),
                _mm512_mul_ps(_mm512_add_ps(i1[c], i2[c]), inv),
            );
            unsafe {
                _mm512_storeu_ps(cr[c * k + i].as_mut_ptr(), r);
                _mm512_storeu_ps(ci[c * k + i].as_mut_ptr(), im);
            }
        }
    }
    for i in (0..k).rev() {
        let (mut r1, mut r2, mut i1, mut i2) = ([zero; A], [zero; A], [zero; A], [zero; A]);
        for c in 0..A {
            r1[c] = ld(&cr[c * k + i]);
            i1[c] = ld(&ci[c * k + i]);
        }
        for p in i + 1..k {
            let (lr, li) = (ld(&b.lr[tri(p, i)]), ld(&b.li[tri(p, i)]));
            for c in 0..A {
                let (xr, xi) = (ld(&cr[c * k + p]), ld(&ci[c * k + p]));
                r1[c] = _mm512_fnmadd_ps(lr, xr, r1[c]);
                r2[c] = _mm512_fnmadd_ps(li, xi, r2[c]);
                i1[c] = _mm512_fnmadd_ps(lr, xi, i1[c]);
                i2[c] = _mm512_fmadd_ps(li, xr, i2[c]);
            }
        }
        let inv = ld(&b.diag_inv[i]);
        let mut ng = ld(&noise_gain[i]);
        for c in 0..A {
            let r = _mm512_mul_ps(_mm512_add_ps(r1[c], r2[c]), inv);
            let im = _mm512_mul_ps(_mm512_add_ps(i1[c], i2[c]), inv);
            ng = _mm512_fmadd_ps(r, r, ng);
            ng = _mm512_fmadd_ps(im, im, ng);
            unsafe {
                _mm512_storeu_ps(cr[c * k + i].as_mut_ptr(), r);
                _mm512_storeu_ps(ci[c * k + i].as_mut_ptr(), im);
            }
        }
        unsafe { _mm512_storeu_ps(noise_gain[i].as_mut_ptr(), ng) };
    }
}

/// [`gram`] in AVX2 registers, one 8-lane half at a time (`R` rows of 4
/// accumulators: 8 registers for `R = 4`); the portable sums' operations and order.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gram_avx2<const R: usize>(
    yr: &[Lanes],
    yi: &[Lanes],
    xr: &[Lanes],
    xi: &[Lanes],
    m: usize,
    gr: &mut [Lanes],
    gi: &mut [Lanes],
) {
    use std::arch::x86_64::*;
    for h in 0..2 {
        // SAFETY (every load/store here): each `Lanes` is 16 floats, `h` is 0 or 1.
        let ld = |v: &Lanes| unsafe { _mm256_loadu_ps(v.as_ptr().add(8 * h)) };
        let mut ar = [_mm256_setzero_ps(); R];
        let mut ai = [_mm256_setzero_ps(); R];
        for a in 0..m {
            let (vr, vi) = (ld(&yr[a]), ld(&yi[a]));
            for r in 0..R {
                let (ur, ui) = (ld(&xr[r * m + a]), ld(&xi[r * m + a]));
                ar[r] = _mm256_fmadd_ps(ur, vr, ar[r]);
                ar[r] = _mm256_fmadd_ps(ui, vi, ar[r]);
                ai[r] = _mm256_fmadd_ps(ur, vi, ai[r]);
                ai[r] = _mm256_fnmadd_ps(ui, vr, ai[r]);
            }
        }
        for r in 0..R {
            unsafe {
                _mm256_storeu_ps(gr[r].as_mut_ptr().add(8 * h), ar[r]);
                _mm256_storeu_ps(gi[r].as_mut_ptr().add(8 * h), ai[r]);
            }
        }
    }
}

/// Antenna columns the AVX2 build substitutes together (4 split accumulators each:
/// 8 registers per half).
const COLS_AVX2: usize = 2;

/// [`substitute_columns`] in AVX2 registers, one 8-lane half at a time; the
/// portable sums' operations and order.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn substitute_avx2<const A: usize>(
    b: &ZfBatch,
    hr: &[Lanes],
    hi: &[Lanes],
    wtr: &mut [Lanes],
    wti: &mut [Lanes],
    noise_gain: &mut [Lanes],
    a0: usize,
) {
    use std::arch::x86_64::*;
    let (m, k) = (b.antennas, b.users);
    let tri = |i: usize, j: usize| i * (i + 1) / 2 + j;
    let (cr, ci) = (
        &mut wtr[a0 * k..(a0 + A) * k],
        &mut wti[a0 * k..(a0 + A) * k],
    );
    let zero = _mm256_setzero_ps();
    let sign = _mm256_set1_ps(-0.0);
    for h in 0..2 {
        // SAFETY (every load/store here): each `Lanes` is 16 floats, `h` is 0 or 1.
        let ld = |v: &Lanes| unsafe { _mm256_loadu_ps(v.as_ptr().add(8 * h)) };
        let st =
            |v: &mut Lanes, x: __m256| unsafe { _mm256_storeu_ps(v.as_mut_ptr().add(8 * h), x) };
        for i in 0..k {
            let (mut r1, mut r2, mut i1, mut i2) = ([zero; A], [zero; A], [zero; A], [zero; A]);
            for c in 0..A {
                r1[c] = ld(&hr[i * m + a0 + c]);
                // -h as the portable negation (a sign flip).
                i1[c] = _mm256_xor_ps(ld(&hi[i * m + a0 + c]), sign);
            }
            for p in 0..i {
                let (lr, li) = (ld(&b.lr[tri(i, p)]), ld(&b.li[tri(i, p)]));
                for c in 0..A {
                    let (zr, zi) = (ld(&cr[c * k + p]), ld(&ci[c * k + p]));
                    r1[c] = _mm256_fnmadd_ps(lr, zr, r1[c]);
                    r2[c] = _mm256_fmadd_ps(li, zi, r2[c]);
                    i1[c] = _mm256_fnmadd_ps(lr, zi, i1[c]);
                    i2[c] = _mm256_fnmadd_ps(li, zr, i2[c]);
                }
            }
            let inv = ld(&b.diag_inv[i]);
            for c in 0..A {
                st(
                    &mut cr[c * k + i],
                    _mm256_mul_ps(_mm256_add_ps(r1[c], r2[c]), inv),
                );
                st(
                    &mut ci[c * k + i],
                    _mm256_mul_ps(_mm256_add_ps(i1[c], i2[c]), inv),
                );
            }
        }
        for i in (0..k).rev() {
            let (mut r1, mut r2, mut i1, mut i2) = ([zero; A], [zero; A], [zero; A], [zero; A]);
            for c in 0..A {
                r1[c] = ld(&cr[c * k + i]);
                i1[c] = ld(&ci[c * k + i]);
            }
            for p in i + 1..k {
                let (lr, li) = (ld(&b.lr[tri(p, i)]), ld(&b.li[tri(p, i)]));
                for c in 0..A {
                    let (xr, xi) = (ld(&cr[c * k + p]), ld(&ci[c * k + p]));
                    r1[c] = _mm256_fnmadd_ps(lr, xr, r1[c]);
                    r2[c] = _mm256_fnmadd_ps(li, xi, r2[c]);
                    i1[c] = _mm256_fnmadd_ps(lr, xi, i1[c]);
                    i2[c] = _mm256_fmadd_ps(li, xr, i2[c]);
                }
            }
            let inv = ld(&b.diag_inv[i]);
            let mut ng = ld(&noise_gain[i]);
            for c in 0..A {
                let r = _mm256_mul_ps(_mm256_add_ps(r1[c], r2[c]), inv);
                let im = _mm256_mul_ps(_mm256_add_ps(i1[c], i2[c]), inv);
                ng = _mm256_fmadd_ps(r, r, ng);
                ng = _mm256_fmadd_ps(im, im, ng);
                st(&mut cr[c * k + i], r);
                st(&mut ci[c * k + i], im);
            }
            st(&mut noise_gain[i], ng);
        }
    }
}

/// Antenna columns substituted together.
const COLS: usize = 4;

/// Columns `a0 .. a0 + A` of [`batch_substitute`].
#[inline(always)]
fn substitute_columns<const A: usize, const FMA: bool>(
    b: &ZfBatch,
    hr: &[Lanes],
    hi: &[Lanes],
    wtr: &mut [Lanes],
    wti: &mut [Lanes],
    noise_gain: &mut [Lanes],
    a0: usize,
) {
    let (m, k) = (b.antennas, b.users);
    let tri = |i: usize, j: usize| i * (i + 1) / 2 + j;
    let (cr, ci) = (
        &mut wtr[a0 * k..(a0 + A) * k],
        &mut wti[a0 * k..(a0 + A) * k],
    );
    let zero = [[0f32; BATCH]; A];
    for i in 0..k {
        // z_i = (conj(h_i[a]) - sum_{p<i} L[i][p] z_p) / L[i][i], split accumulators.
        let (mut r1, mut r2, mut i1, mut i2) = (zero, zero, zero, zero);
        for c in 0..A {
            r1[c] = hr[i * m + a0 + c];
            i1[c] = hi[i * m + a0 + c].map(|v| -v);
        }
        for p in 0..i {
            let (lr, li) = (&b.lr[tri(i, p)], &b.li[tri(i, p)]);
            for c in 0..A {
                let (zr, zi) = (&cr[c * k + p], &ci[c * k + p]);
                lanes_fms::<FMA>(&mut r1[c], lr, zr);
                lanes_fma::<FMA>(&mut r2[c], li, zi);
                lanes_fms::<FMA>(&mut i1[c], lr, zi);
                lanes_fms::<FMA>(&mut i2[c], li, zr);
            }
        }
        let inv = &b.diag_inv[i];
        for c in 0..A {
            cr[c * k + i] = lanes_mul(&lanes_add(&r1[c], &r2[c]), inv);
            ci[c * k + i] = lanes_mul(&lanes_add(&i1[c], &i2[c]), inv);
        }
    }
    for i in (0..k).rev() {
        // w_i = (z_i - sum_{p>i} conj(L[p][i]) w_p) / L[i][i]
        let (mut r1, mut r2, mut i1, mut i2) = (zero, zero, zero, zero);
        for c in 0..A {
            r1[c] = cr[c * k + i];
            i1[c] = ci[c * k + i];
        }
        for p in i + 1..k {
            let (lr, li) = (&b.lr[tri(p, i)], &b.li[tri(p, i)]);
            for c in 0..A {
                let (xr, xi) = (&cr[c * k + p], &ci[c * k + p]);
                lanes_fms::<FMA>(&mut r1[c], lr, xr);
                lanes_fms::<FMA>(&mut r2[c], li, xi);
                lanes_fms::<FMA>(&mut i1[c], lr, xi);
                lanes_fma::<FMA>(&mut i2[c], li, xr);
            }
        }
        let inv = &b.diag_inv[i];
        let mut ng = noise_gain[i];
        for c in 0..A {
            let r = lanes_mul(&lanes_add(&r1[c], &r2[c]), inv);
            let im = lanes_mul(&lanes_add(&i1[c], &i2[c]), inv);
            lanes_fma::<FMA>(&mut ng, &r, &r);
            lanes_fma::<FMA>(&mut ng, &im, &im);
            cr[c * k + i] = r;
            ci[c * k + i] = im;
        }
        noise_gain[i] = ng;
    }
}

/// `x + y`, lane by lane.
#[inline(always)]
fn lanes_add(x: &Lanes, y: &Lanes) -> Lanes {
    std::array::from_fn(|l| x[l] + y[l])
}

/// Equalise one subcarrier: `x[k] = sum_m w[k][m] y[m]`.
///
/// # Panics
/// If the slice lengths disagree (caller bugs).
#[inline]
pub fn equalize(w: &[Cf32], y: &[Cf32], x: &mut [Cf32]) {
    let m = y.len();
    assert_eq!(w.len(), m * x.len(), "equalize: detector size");
    dispatch!(Isa::detect(), fn run(w: &[Cf32], y: &[Cf32], x: &mut [Cf32]) => equalize_body)
}

#[inline(always)]
fn equalize_body<const FMA: bool>(w: &[Cf32], y: &[Cf32], x: &mut [Cf32]) {
    for (xk, wk) in x.iter_mut().zip(w.chunks_exact(y.len())) {
        *xk = dot(wk, y);
    }
}

/// Precode one subcarrier with the transposed detector: `out[m] = g * sum_k w[k][m] s[k]`,
/// so that a user seeing the reciprocal channel `H^T` receives `g * s[k]` alone.
///
/// # Panics
/// If the slice lengths disagree (caller bugs).
#[inline]
pub fn precode(w: &[Cf32], s: &[Cf32], gain: f32, out: &mut [Cf32]) {
    let m = out.len();
    assert_eq!(w.len(), m * s.len(), "precode: detector size");
    out.fill(Cf32::default());
    for (sk, wk) in s.iter().zip(w.chunks_exact(m)) {
        let c = sk * gain;
        for (o, a) in out.iter_mut().zip(wk) {
            *o += a * c;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use num_complex::Complex64;

    /// Dense Gauss-Jordan inverse with partial pivoting, in f64.
    pub fn inverse_f64(a: &[Complex64], n: usize) -> Vec<Complex64> {
        let mut aug = vec![Complex64::default(); n * 2 * n];
        for i in 0..n {
            for j in 0..n {
                aug[i * 2 * n + j] = a[i * n + j];
            }
            aug[i * 2 * n + n + i] = Complex64::new(1.0, 0.0);
        }
        for c in 0..n {
            let piv = (c..n)
                .max_by(|&x, &y| {
                    aug[x * 2 * n + c]
                        .norm()
                        .total_cmp(&aug[y * 2 * n + c].norm())
                })
                .unwrap();
            for j in 0..2 * n {
                aug.swap(c * 2 * n + j, piv * 2 * n + j);
            }
            let p = aug[c * 2 * n + c];
            for j in 0..2 * n {
                aug[c * 2 * n + j] /= p;
            }
            for r in 0..n {
                if r != c {
                    let f = aug[r * 2 * n + c];
                    for j in 0..2 * n {
                        let v = aug[c * 2 * n + j];
                        aug[r * 2 * n + j] -= f * v;
                    }
                }
            }
        }
        (0..n * n)
            .map(|i| aug[(i / n) * 2 * n + n + i % n])
            .collect()
    }

    fn random_channel(m: usize, k: usize, seed: u64) -> Vec<Cf32> {
        let mut s = seed;
        (0..m * k)
            .map(|_| {
                let mut next = || {
                    s = s
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                };
                Cf32::new(next(), next())
            })
            .collect()
    }

    #[test]
    fn matches_dense_pseudo_inverse() {
        for (m, k) in [(8usize, 2usize), (16, 4), (64, 16), (4, 4), (1, 1)] {
            let h = random_channel(m, k, (m * 31 + k) as u64);
            let mut w = vec![Cf32::default(); m * k];
            let mut ng = vec![0.0; k];
            zf_detector(&h, m, k, &mut ZfScratch::new(k), &mut w, &mut ng).unwrap();
            // Reference: (H^H H)^-1 H^H in f64.
            let h64: Vec<Complex64> = h
                .iter()
                .map(|c| Complex64::new(c.re as f64, c.im as f64))
                .collect();
            let mut g = vec![Complex64::default(); k * k];
            for i in 0..k {
                for j in 0..k {
                    g[i * k + j] = (0..m).map(|r| h64[i * m + r].conj() * h64[j * m + r]).sum();
                }
            }
            let gi = inverse_f64(&g, k);
            let mut max_err = 0f64;
            let scale: f64 = gi.iter().map(|v| v.norm()).fold(0.0, f64::max);
            for i in 0..k {
                for r in 0..m {
                    let expect: Complex64 =
                        (0..k).map(|j| gi[i * k + j] * h64[j * m + r].conj()).sum();
                    let got = w[i * m + r];
                    max_err =
                        max_err.max((expect - Complex64::new(got.re as f64, got.im as f64)).norm());
                }
                assert!(
                    (ng[i] as f64 - gi[i * k + i].re).abs() < 1e-3 * scale,
                    "noise gain {m}x{k}"
                );
            }
            assert!(max_err < 1e-4 * scale.max(1.0), "{m}x{k}: err {max_err}");
            // W H = I and precoding through H^T reaches each user alone.
            let s: Vec<Cf32> = (0..k)
                .map(|i| Cf32::new(i as f32 + 1.0, -(i as f32)))
                .collect();
            let mut y = vec![Cf32::default(); m];
            for r in 0..m {
                y[r] = (0..k).map(|j| h[j * m + r] * s[j]).sum();
            }
            let mut x = vec![Cf32::default(); k];
            equalize(&w, &y, &mut x);
            let mut tx = vec![Cf32::default(); m];
            precode(&w, &s, 0.5, &mut tx);
            for i in 0..k {
                assert!(
                    (x[i] - s[i]).norm() < 1e-3 * (1.0 + scale as f32),
                    "equalize {m}x{k}"
                );
                let rx: Cf32 = (0..m).map(|r| h[i * m + r] * tx[r]).sum();
                assert!(
                    (rx - s[i] * 0.5).norm() < 1e-3 * (1.0 + scale as f32),
                    "precode {m}x{k}"
                );
            }
        }
    }

    #[test]
    fn dependent_channels_are_an_error() {
        let mut h = random_channel(8, 2, 5);
        let (a, b) = h.split_at_mut(8);
        b.copy_from_slice(a);
        let mut w = vec![Cf32::default(); 16];
        let err = zf_detector(&h, 8, 2, &mut ZfScratch::new(2), &mut w, &mut [0.0; 2]).unwrap_err();
        assert_eq!(err.user, 1);
        assert!(err.to_string().contains("linearly dependent"));
    }

    struct TestIo {
        hr: Vec<Lanes>,
        hi: Vec<Lanes>,
        wtr: Vec<Lanes>,
        wti: Vec<Lanes>,
        ng: Vec<Lanes>,
    }

    impl TestIo {
        fn new(m: usize, k: usize) -> Self {
            let z = vec![[0.0; BATCH]; m * k];
            Self {
                hr: z.clone(),
                hi: z.clone(),
                wtr: z.clone(),
                wti: z,
                ng: vec![[0.0; BATCH]; k],
            }
        }

        fn io(&mut self) -> BatchIo<'_> {
            BatchIo {
                hr: &self.hr,
                hi: &self.hi,
                wtr: &mut self.wtr,
                wti: &mut self.wti,
                noise_gain: &mut self.ng,
            }
        }
    }

    /// Every lane of the batched solver (every ISA build) equals the per-subcarrier
    /// solver on that lane's channel; a dependent lane is reported, unused lanes are
    /// not checked.
    #[test]
    fn batch_matches_per_group_solver() {
        for (m, k, valid) in [
            (64usize, 16usize, 16usize),
            (8, 2, 5),
            (5, 5, 16),
            (4, 1, 1),
        ] {
            let chans: Vec<Vec<Cf32>> = (0..valid)
                .map(|l| random_channel(m, k, (l * 7 + m + k) as u64))
                .collect();
            let mut scratch = ZfScratch::new(k);
            for isa in Isa::available() {
                let mut b = ZfBatch::new(m, k);
                let mut io = TestIo::new(m, k);
                for (l, h) in chans.iter().enumerate() {
                    for (e, v) in h.iter().enumerate() {
                        io.hr[e][l] = v.re;
                        io.hi[e][l] = v.im;
                    }
                }
                b.solve_at(isa, io.io(), valid).unwrap();
                for (l, h) in chans.iter().enumerate() {
                    let mut w = vec![Cf32::default(); m * k];
                    let mut ng = vec![0.0; k];
                    zf_detector_at(Isa::Portable, h, m, k, &mut scratch, &mut w, &mut ng).unwrap();
                    let scale = w.iter().map(|v| v.norm()).fold(0.0, f32::max);
                    for u in 0..k {
                        for a in 0..m {
                            let got = Cf32::new(io.wtr[a * k + u][l], io.wti[a * k + u][l]);
                            let want = w[u * m + a];
                            assert!(
                                (got - want).norm() <= 1e-4 * scale,
                                "{isa:?} {m}x{k} lane {l}: {got} vs {want}"
                            );
                        }
                        let (g, want) = (io.ng[u][l], ng[u]);
                        assert!((g - want).abs() <= 1e-4 * want.abs(), "{isa:?} noise gain");
                    }
                }
            }
        }
        // Lane 3 of 4 dependent: reported as lane 3, user 1.
        let mut b = ZfBatch::new(8, 2);
        let mut io = TestIo::new(8, 2);
        for l in 0..4 {
            let mut h = random_channel(8, 2, 40 + l as u64);
            if l == 3 {
                let (x, y) = h.split_at_mut(8);
                y.copy_from_slice(x);
            }
            for (e, v) in h.iter().enumerate() {
                io.hr[e][l] = v.re;
                io.hi[e][l] = v.im;
            }
        }
        for isa in Isa::available() {
            let err = b.solve_at(isa, io.io(), 4).unwrap_err();
            assert_eq!((err.lane, err.source.user), (3, 1), "{isa:?}");
            assert!(err.to_string().contains("linearly dependent"));
            b.solve_at(isa, io.io(), 3).unwrap();
        }
    }

    /// The AVX2 and AVX-512 builds agree with the portable one.
    #[test]
    fn every_isa_matches_portable() {
        let (m, k) = (64, 16);
        let h = random_channel(m, k, 99);
        let mut want = vec![Cf32::default(); m * k];
        let mut want_ng = vec![0.0; k];
        let mut scratch = ZfScratch::new(k);
        zf_detector_at(
            Isa::Portable,
            &h,
            m,
            k,
            &mut scratch,
            &mut want,
            &mut want_ng,
        )
        .unwrap();
        for isa in Isa::available() {
            let mut w = vec![Cf32::default(); m * k];
            let mut ng = vec![0.0; k];
            zf_detector_at(isa, &h, m, k, &mut scratch, &mut w, &mut ng).unwrap();
            let scale = want.iter().map(|v| v.norm()).fold(0.0, f32::max);
            for (a, b) in w.iter().zip(&want) {
                assert!((a - b).norm() <= 1e-4 * scale, "{isa:?}: {a} vs {b}");
            }
            for (a, b) in ng.iter().zip(&want_ng) {
                assert!((a - b).abs() <= 1e-4 * b.abs(), "{isa:?} noise gain");
            }
        }
    }
}
