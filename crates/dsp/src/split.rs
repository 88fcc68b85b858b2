//! Split-complex (separate re/im `f32` arrays) kernels for the frequency-domain MAC.
//!
//! Interleaved `Complex32` multiply needs lane shuffles; with the real and imaginary
//! parts in separate arrays one complex multiply-accumulate of 8 bins is 4 FMAs and no
//! shuffles. Spectra are converted once after the forward FFT and once before the
//! inverse. The AVX2+FMA path is chosen at run time; the scalar path is the reference
//! and the fallback for other CPUs.

use radiohost_iq::Cf32;

/// Which instruction set the kernels use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MacKernel {
    /// Portable Rust (the compiler may still vectorise it with the baseline ISA).
    Scalar,
    /// x86-64 AVX2 + FMA intrinsics.
    Avx2Fma,
}

impl MacKernel {
    /// The fastest kernel this CPU supports.
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                return MacKernel::Avx2Fma;
            }
        }
        MacKernel::Scalar
    }

    /// Short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            MacKernel::Scalar => "scalar",
            MacKernel::Avx2Fma => "avx2+fma",
        }
    }

    /// Whether this CPU can run the kernel (a forced `Avx2Fma` on a CPU without it
    /// falls back to scalar instead of faulting).
    fn usable(self) -> MacKernel {
        match self {
            MacKernel::Avx2Fma if MacKernel::detect() == MacKernel::Avx2Fma => self,
            _ => MacKernel::Scalar,
        }
    }

    /// Splits interleaved `src` into `re` and `im` (all the same length).
    pub fn deinterleave(self, src: &[Cf32], re: &mut [f32], im: &mut [f32]) {
        let n = src.len();
        assert!(re.len() == n && im.len() == n, "split lengths");
        match self.usable() {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: usable() verified AVX2 and FMA; lengths checked above.
            MacKernel::Avx2Fma => unsafe { avx2::deinterleave(src, re, im) },
            _ => scalar::deinterleave(src, re, im),
        }
    }

    /// Interleaves `re` and `im` into `dst` (all the same length).
    pub fn interleave(self, re: &[f32], im: &[f32], dst: &mut [Cf32]) {
        let n = dst.len();
        assert!(re.len() == n && im.len() == n, "split lengths");
        match self.usable() {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as in deinterleave.
            MacKernel::Avx2Fma => unsafe { avx2::interleave(re, im, dst) },
            _ => scalar::interleave(re, im, dst),
        }
    }

    /// `acc = x * h` bin by bin.
    pub fn mul(self, acc: SplitMut<'_>, x: Split<'_>, h: Split<'_>) {
        check_lens(&acc, x, h);
        match self.usable() {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as in deinterleave.
            MacKernel::Avx2Fma => unsafe { avx2::mul(acc, x, h) },
            _ => scalar::mul(acc, x, h),
        }
    }

    /// `acc += z * (a - b)` bin by bin (the swap-boundary correction).
    pub fn mac_diff(self, acc: SplitMut<'_>, z: Split<'_>, a: Split<'_>, b: Split<'_>) {
        check_lens(&acc, z, a);
        check_lens(&acc, z, b);
        match self.usable() {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as in deinterleave.
            MacKernel::Avx2Fma => unsafe { avx2::mac_diff(acc, z, a, b) },
            _ => scalar::mac_diff(acc, z, a, b),
        }
    }

    /// `acc += x * h` bin by bin.
    pub fn mac(self, acc: SplitMut<'_>, x: Split<'_>, h: Split<'_>) {
        check_lens(&acc, x, h);
        match self.usable() {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as in deinterleave.
            MacKernel::Avx2Fma => unsafe { avx2::mac(acc, x, h) },
            _ => scalar::mac(acc, x, h),
        }
    }
}

fn check_lens(acc: &SplitMut<'_>, x: Split<'_>, h: Split<'_>) {
    let n = acc.re.len();
    assert!(
        acc.im.len() == n
            && x.re.len() == n
            && x.im.len() == n
            && h.re.len() == n
            && h.im.len() == n,
        "split lengths"
    );
}

/// A read-only split-complex vector.
#[derive(Debug, Clone, Copy)]
pub struct Split<'a> {
    pub re: &'a [f32],
    pub im: &'a [f32],
}

/// A writable split-complex vector.
#[derive(Debug)]
pub struct SplitMut<'a> {
    pub re: &'a mut [f32],
    pub im: &'a mut [f32],
}

/// Views `buf = [re (n) | im (n)]` as a split vector.
pub fn split_of(buf: &[f32]) -> Split<'_> {
    let (re, im) = buf.split_at(buf.len() / 2);
    Split { re, im }
}

/// Views `buf = [re (n) | im (n)]` as a writable split vector.
pub fn split_of_mut(buf: &mut [f32]) -> SplitMut<'_> {
    let half = buf.len() / 2;
    let (re, im) = buf.split_at_mut(half);
    SplitMut { re, im }
}

mod scalar {
    use super::{Split, SplitMut};
    use radiohost_iq::Cf32;

    pub fn deinterleave(src: &[Cf32], re: &mut [f32], im: &mut [f32]) {
        for ((s, r), i) in src.iter().zip(re.iter_mut()).zip(im.iter_mut()) {
            *r = s.re;
            *i = s.im;
        }
    }

    pub fn interleave(re: &[f32], im: &[f32], dst: &mut [Cf32]) {
        for ((d, r), i) in dst.iter_mut().zip(re).zip(im) {
            *d = Cf32::new(*r, *i);
        }
    }

    pub fn mul(acc: SplitMut<'_>, x: Split<'_>, h: Split<'_>) {
        for i in 0..acc.re.len() {
            acc.re[i] = x.re[i] * h.re[i] - x.im[i] * h.im[i];
            acc.im[i] = x.re[i] * h.im[i] + x.im[i] * h.re[i];
        }
    }

    pub fn mac(acc: SplitMut<'_>, x: Split<'_>, h: Split<'_>) {
        for i in 0..acc.re.len() {
            acc.re[i] += x.re[i] * h.re[i] - x.im[i] * h.im[i];
            acc.im[i] += x.re[i] * h.im[i] + x.im[i] * h.re[i];
        }
    }

    pub fn mac_diff(acc: SplitMut<'_>, z: Split<'_>, a: Split<'_>, b: Split<'_>) {
        for i in 0..acc.re.len() {
            let (dr, di) = (a.re[i] - b.re[i], a.im[i] - b.im[i]);
            acc.re[i] += z.re[i] * dr - z.im[i] * di;
            acc.im[i] += z.re[i] * di + z.im[i] * dr;
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{Split, SplitMut};
    use radiohost_iq::Cf32;
    use std::arch::x86_64::*;

    const LANES: usize = 8;

    fn tail(s: Split<'_>, from: usize) -> Split<'_> {
        Split {
            re: &s.re[from..],
            im: &s.im[from..],
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn deinterleave(src: &[Cf32], re: &mut [f32], im: &mut [f32]) {
        let n = src.len();
        let body = n - n % LANES;
        let s = src.as_ptr() as *const f32;
        let mut i = 0;
        while i < body {
            // a = r0 i0 r1 i1 | r2 i2 r3 i3, b = r4 i4 r5 i5 | r6 i6 r7 i7
            let a = _mm256_loadu_ps(s.add(2 * i));
            let b = _mm256_loadu_ps(s.add(2 * i + LANES));
            // per 128-bit lane: evens / odds, then fix the 64-bit quarter order
            let r = _mm256_shuffle_ps::<0x88>(a, b);
            let m = _mm256_shuffle_ps::<0xDD>(a, b);
            let r = _mm256_castpd_ps(_mm256_permute4x64_pd::<0xD8>(_mm256_castps_pd(r)));
            let m = _mm256_castpd_ps(_mm256_permute4x64_pd::<0xD8>(_mm256_castps_pd(m)));
            _mm256_storeu_ps(re.as_mut_ptr().add(i), r);
            _mm256_storeu_ps(im.as_mut_ptr().add(i), m);
            i += LANES;
        }
        super::scalar::deinterleave(&src[body..], &mut re[body..], &mut im[body..]);
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn interleave(re: &[f32], im: &[f32], dst: &mut [Cf32]) {
        let n = dst.len();
        let body = n - n % LANES;
        let d = dst.as_mut_ptr() as *mut f32;
        let mut i = 0;
        while i < body {
            let r = _mm256_loadu_ps(re.as_ptr().add(i));
            let m = _mm256_loadu_ps(im.as_ptr().add(i));
            let lo = _mm256_unpacklo_ps(r, m); // r0 i0 r1 i1 | r4 i4 r5 i5
            let hi = _mm256_unpackhi_ps(r, m); // r2 i2 r3 i3 | r6 i6 r7 i7
            _mm256_storeu_ps(d.add(2 * i), _mm256_permute2f128_ps::<0x20>(lo, hi));
            _mm256_storeu_ps(d.add(2 * i + LANES), _mm256_permute2f128_ps::<0x31>(lo, hi));
            i += LANES;
        }
        super::scalar::interleave(&re[body..], &im[body..], &mut dst[body..]);
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn mul(acc: SplitMut<'_>, x: Split<'_>, h: Split<'_>) {
        let n = acc.re.len();
        let body = n - n % LANES;
        let mut i = 0;
        while i < body {
            let xr = _mm256_loadu_ps(x.re.as_ptr().add(i));
            let xi = _mm256_loadu_ps(x.im.as_ptr().add(i));
            let hr = _mm256_loadu_ps(h.re.as_ptr().add(i));
            let hi = _mm256_loadu_ps(h.im.as_ptr().add(i));
            let ar = _mm256_fmsub_ps(xr, hr, _mm256_mul_ps(xi, hi));
            let ai = _mm256_fmadd_ps(xr, hi, _mm256_mul_ps(xi, hr));
            _mm256_storeu_ps(acc.re.as_mut_ptr().add(i), ar);
            _mm256_storeu_ps(acc.im.as_mut_ptr().add(i), ai);
            i += LANES;
        }
        super::scalar::mul(
            SplitMut {
                re: &mut acc.re[body..],
                im: &mut acc.im[body..],
            },
            Split {
                re: &x.re[body..],
                im: &x.im[body..],
            },
            Split {
                re: &h.re[body..],
                im: &h.im[body..],
            },
        );
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn mac(acc: SplitMut<'_>, x: Split<'_>, h: Split<'_>) {
        let n = acc.re.len();
        let body = n - n % LANES;
        let mut i = 0;
        while i < body {
            let xr = _mm256_loadu_ps(x.re.as_ptr().add(i));
            let xi = _mm256_loadu_ps(x.im.as_ptr().add(i));
            let hr = _mm256_loadu_ps(h.re.as_ptr().add(i));
            let hi = _mm256_loadu_ps(h.im.as_ptr().add(i));
            let mut ar = _mm256_loadu_ps(acc.re.as_ptr().add(i));
            let mut ai = _mm256_loadu_ps(acc.im.as_ptr().add(i));
            ar = _mm256_fmadd_ps(xr, hr, ar);
            ar = _mm256_fnmadd_ps(xi, hi, ar);
            ai = _mm256_fmadd_ps(xr, hi, ai);
            ai = _mm256_fmadd_ps(xi, hr, ai);
            _mm256_storeu_ps(acc.re.as_mut_ptr().add(i), ar);
            _mm256_storeu_ps(acc.im.as_mut_ptr().add(i), ai);
            i += LANES;
        }
        super::scalar::mac(
            SplitMut {
                re: &mut acc.re[body..],
                im: &mut acc.im[body..],
            },
            Split {
                re: &x.re[body..],
                im: &x.im[body..],
            },
            Split {
                re: &h.re[body..],
                im: &h.im[body..],
            },
        );
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn mac_diff(acc: SplitMut<'_>, z: Split<'_>, a: Split<'_>, b: Split<'_>) {
        let n = acc.re.len();
        let body = n - n % LANES;
        let mut i = 0;
        while i < body {
            let zr = _mm256_loadu_ps(z.re.as_ptr().add(i));
            let zi = _mm256_loadu_ps(z.im.as_ptr().add(i));
            let dr = _mm256_sub_ps(
                _mm256_loadu_ps(a.re.as_ptr().add(i)),
                _mm256_loadu_ps(b.re.as_ptr().add(i)),
            );
            let di = _mm256_sub_ps(
                _mm256_loadu_ps(a.im.as_ptr().add(i)),
                _mm256_loadu_ps(b.im.as_ptr().add(i)),
            );
            let mut ar = _mm256_loadu_ps(acc.re.as_ptr().add(i));
            let mut ai = _mm256_loadu_ps(acc.im.as_ptr().add(i));
            ar = _mm256_fmadd_ps(zr, dr, ar);
            ar = _mm256_fnmadd_ps(zi, di, ar);
            ai = _mm256_fmadd_ps(zr, di, ai);
            ai = _mm256_fmadd_ps(zi, dr, ai);
            _mm256_storeu_ps(acc.re.as_mut_ptr().add(i), ar);
            _mm256_storeu_ps(acc.im.as_mut_ptr().add(i), ai);
            i += LANES;
        }
        super::scalar::mac_diff(
            SplitMut {
                re: &mut acc.re[body..],
                im: &mut acc.im[body..],
            },
            tail(z, body),
            tail(a, body),
            tail(b, body),
        );
    }
}

/// Runs `iters` rounds of 10 independent 8-lane FMA chains (AVX2+FMA when available,
/// else scalar `mul_add`) and returns a value depending on all of them. Performs
/// `iters * 160` floating-point operations; benchmarks time it to measure the core's peak.
pub fn fma_probe(iters: u64) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if MacKernel::detect() == MacKernel::Avx2Fma {
            // SAFETY: AVX2 and FMA were detected.
            return unsafe { avx2_probe(iters) };
        }
    }
    let mut acc = [1.0f32; 80];
    for _ in 0..iters {
        for a in acc.iter_mut() {
            *a = a.mul_add(0.999_999, 1e-7);
        }
    }
    acc.iter().sum()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_probe(iters: u64) -> f32 {
    use std::arch::x86_64::*;
    let m = _mm256_set1_ps(0.999_999);
    let c = _mm256_set1_ps(1e-7);
    let mut a = [_mm256_set1_ps(1.0); 10];
    for _ in 0..iters {
        for v in a.iter_mut() {
            *v = _mm256_fmadd_ps(*v, m, c);
        }
    }
    let mut sum = _mm256_setzero_ps();
    for v in a {
        sum = _mm256_add_ps(sum, v);
    }
    let mut out = [0.0f32; 8];
    _mm256_storeu_ps(out.as_mut_ptr(), sum);
    out.iter().sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, seed: f32) -> Vec<f32> {
        (0..n).map(|i| ((i as f32 + seed) * 0.731).sin()).collect()
    }

    #[test]
    fn kernels_agree_with_scalar_including_tails() {
        let fast = MacKernel::detect();
        for n in [0usize, 1, 7, 8, 9, 31, 512, 515] {
            let src: Vec<Cf32> = (0..n)
                .map(|i| Cf32::new((i as f32).sin(), (i as f32 * 0.5).cos()))
                .collect();
            let (mut r1, mut i1, mut r2, mut i2) =
                (vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n]);
            MacKernel::Scalar.deinterleave(&src, &mut r1, &mut i1);
            fast.deinterleave(&src, &mut r2, &mut i2);
            assert_eq!((&r1, &i1), (&r2, &i2));
            let mut back = vec![Cf32::new(0.0, 0.0); n];
            fast.interleave(&r2, &i2, &mut back);
            assert_eq!(back, src);

            let (xr, xi, hr, hi) = (data(n, 1.0), data(n, 2.0), data(n, 3.0), data(n, 4.0));
            let x = Split { re: &xr, im: &xi };
            let h = Split { re: &hr, im: &hi };
            for kernel in [MacKernel::Scalar, fast] {
                let (mut ar, mut ai) = (data(n, 5.0), data(n, 6.0));
                let (ar0, ai0) = (ar.clone(), ai.clone());
                kernel.mac(
                    SplitMut {
                        re: &mut ar,
                        im: &mut ai,
                    },
                    x,
                    h,
                );
                for j in 0..n {
                    let want = Cf32::new(ar0[j], ai0[j])
                        + Cf32::new(xr[j], xi[j]) * Cf32::new(hr[j], hi[j]);
                    assert!((Cf32::new(ar[j], ai[j]) - want).norm() < 1e-5);
                }
                let (ar1, ai1) = (ar.clone(), ai.clone());
                kernel.mac_diff(
                    SplitMut {
                        re: &mut ar,
                        im: &mut ai,
                    },
                    x,
                    h,
                    Split { re: &xr, im: &hi },
                );
                for j in 0..n {
                    let d = Cf32::new(hr[j], hi[j]) - Cf32::new(xr[j], hi[j]);
                    let want = Cf32::new(ar1[j], ai1[j]) + Cf32::new(xr[j], xi[j]) * d;
                    assert!((Cf32::new(ar[j], ai[j]) - want).norm() < 1e-5);
                }
                kernel.mul(
                    SplitMut {
                        re: &mut ar,
                        im: &mut ai,
                    },
                    x,
                    h,
                );
                for j in 0..n {
                    let want = Cf32::new(xr[j], xi[j]) * Cf32::new(hr[j], hi[j]);
                    assert!((Cf32::new(ar[j], ai[j]) - want).norm() < 1e-5);
                }
            }
        }
    }
}
