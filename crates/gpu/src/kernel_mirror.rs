//! Line-by-line Rust transcriptions of the FFT and zero-forcing kernels' algorithms
//! (thread loops become plain loops, in the kernels' order), checked against rustfft
//! and phy's ZF. Without a GPU this is how the kernels' index arithmetic is tested;
//! the GPU tests check the CUDA code itself.

// Index loops on purpose: they stand for the kernels' thread indices.
#![allow(clippy::needless_range_loop)]

use num_complex::Complex32 as C;

fn bit_reverse(v: usize, bits: u32) -> usize {
    ((v as u32).reverse_bits() >> (32 - bits)) as usize
}

/// `fft_shared` of ofdm.cu on input already in bit-reversed order.
fn fft_shared(s: &mut [C], sign: f32) {
    let n = s.len();
    let mut half = 1;
    while half < n {
        for t in 0..n / 2 {
            let j = t & (half - 1);
            let i0 = ((t - j) << 1) + j;
            let i1 = i0 + half;
            let angle = sign * std::f32::consts::PI * j as f32 / half as f32;
            let (sn, cs) = angle.sin_cos();
            let (a, b) = (s[i0], s[i1]);
            let w = C::new(b.re * cs - b.im * sn, b.re * sn + b.im * cs);
            s[i0] = a + w;
            s[i1] = a - w;
        }
        half <<= 1;
    }
}

/// `ofdm_rx` for one antenna: data subcarriers and null-bin energy.
fn ofdm_rx(time: &[C], data_start: usize, data_num: usize) -> (Vec<C>, f32) {
    let n = time.len();
    let logn = n.trailing_zeros();
    let mut s = vec![C::default(); n];
    for (t, x) in time.iter().enumerate() {
        s[bit_reverse(t, logn)] = *x;
    }
    fft_shared(&mut s, -1.0);
    let bin = |nat: usize| (nat + n / 2) & (n - 1);
    let data = (0..data_num).map(|i| s[bin(data_start + i)]).collect();
    let e = (0..n)
        .filter(|&nat| nat < data_start || nat >= data_start + data_num)
        .map(|nat| s[bin(nat)].norm_sqr())
        .sum();
    (data, e)
}

/// `ofdm_tx` for one antenna without the int16 step: the time samples with CP.
fn ofdm_tx(data: &[C], n: usize, data_start: usize, cp: usize, gain: f32) -> Vec<C> {
    let logn = n.trailing_zeros();
    let mut s = vec![C::default(); n];
    for (i, d) in data.iter().enumerate() {
        s[bit_reverse((data_start + i + n / 2) & (n - 1), logn)] = *d;
    }
    fft_shared(&mut s, 1.0);
    (0..n + cp)
        .map(|t| s[if t < cp { n - cp + t } else { t - cp }] * gain)
        .collect()
}

/// `zf_detect` for one subcarrier: (W row-major K x M, noise gain) or the failing user.
fn zf_detect(h: &[C], m: usize, k: usize) -> Result<(Vec<C>, Vec<f32>), usize> {
    let mut a = vec![C::default(); k * k];
    let mut x = vec![C::default(); k * k];
    let mut energy = vec![0f32; k];
    for idx in 0..k * k {
        let (r, c) = (idx / k, idx % k);
        if c > r {
            continue;
        }
        let g: C = (0..m).map(|mm| h[r * m + mm].conj() * h[c * m + mm]).sum();
        a[idx] = g;
        if r == c {
            energy[r] = g.re;
        }
    }
    for j in 0..k {
        let d = a[j * k + j].re;
        if d.is_nan() || d <= f32::EPSILON * 16.0 * energy[j].max(f32::MIN_POSITIVE) {
            return Err(j);
        }
        a[j * k + j] = C::new(d.sqrt(), 0.0);
        let inv = 1.0 / a[j * k + j].re;
        for r in j + 1..k {
            a[r * k + j] *= inv;
        }
        let rest = k - j - 1;
        for idx in 0..rest * rest {
            let (r, c) = (j + 1 + idx / rest, j + 1 + idx % rest);
            if c > r {
                continue;
            }
            let (lr, lc) = (a[r * k + j], a[c * k + j]);
            a[r * k + c] -= lr * lc.conj();
        }
    }
    for c in 0..k {
        x[c * k + c] = C::new(1.0 / a[c * k + c].re, 0.0);
        for r in c + 1..k {
            let s: C = (c..r).map(|p| a[r * k + p] * x[p * k + c]).sum();
            x[r * k + c] = s * (-1.0 / a[r * k + r].re);
        }
    }
    for idx in 0..k * k {
        let (ra, cb) = (idx / k, idx % k);
        a[idx] = (ra.max(cb)..k)
            .map(|p| x[p * k + ra].conj() * x[p * k + cb])
            .sum();
    }
    let w = (0..k * m)
        .map(|idx| {
            let (kk, mm) = (idx / m, idx % m);
            (0..k).map(|j| a[kk * k + j] * h[j * m + mm].conj()).sum()
        })
        .collect();
    Ok((w, (0..k).map(|kk| a[kk * k + kk].re).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use radiohost_phy::csi::null_bin_energy;
    use radiohost_phy::ofdm::{gather_data, OfdmFft};
    use radiohost_phy::zf::{zf_detector, ZfScratch};
    use rand::{Rng, SeedableRng};

    fn max_rel(a: &[C], b: &[C]) -> f32 {
        let scale = b.iter().map(|v| v.norm()).fold(0.0, f32::max);
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).norm())
            .fold(0.0, f32::max)
            / scale
    }

    #[test]
    fn fft_kernels_match_rustfft_and_phy() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        for (n, start, num) in [
            (64usize, 6usize, 52usize),
            (512, 106, 300),
            (2048, 424, 1200),
        ] {
            let time: Vec<C> = (0..n)
                .map(|_| C::new(rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0)))
                .collect();
            let mut freq = time.clone();
            OfdmFft::new(n).forward_batch(&mut freq);
            let mut want = vec![C::default(); num];
            gather_data(&freq, start, &mut want);
            let (got, e) = ofdm_rx(&time, start, num);
            assert!(max_rel(&got, &want) < 1e-4, "n {n}");
            let (e_cpu, _) = null_bin_energy(&freq, start, num);
            assert!(((e as f64 - e_cpu) / e_cpu).abs() < 1e-4);
            // Inverse: scatter + IFFT + CP + gain as phy's Synthesizer.
            let cp = n / 8;
            let mut synth_in = vec![C::default(); n];
            radiohost_phy::ofdm::scatter_data(&got, start, &mut synth_in);
            OfdmFft::new(n).inverse_batch(&mut synth_in);
            let mut want_t = vec![C::default(); n + cp];
            radiohost_phy::ofdm::add_cp(&synth_in, cp, 0.5, &mut want_t);
            assert!(
                max_rel(&ofdm_tx(&got, n, start, cp, 0.5), &want_t) < 1e-4,
                "n {n}"
            );
        }
    }

    #[test]
    fn zf_kernel_matches_phy() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        for (m, k) in [(8usize, 2usize), (64, 16), (64, 32), (128, 64), (4, 4)] {
            let h: Vec<C> = (0..m * k)
                .map(|_| C::new(rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0)))
                .collect();
            let mut w = vec![C::default(); m * k];
            let mut ng = vec![0f32; k];
            zf_detector(&h, m, k, &mut ZfScratch::new(k), &mut w, &mut ng).unwrap();
            let (wg, ngg) = zf_detect(&h, m, k).unwrap();
            assert!(max_rel(&wg, &w) < 1e-3, "{m}x{k}");
            for (a, b) in ngg.iter().zip(&ng) {
                assert!((a - b).abs() < 1e-3 * b.abs(), "{m}x{k}");
            }
        }
        // Two identical users: the pivot test fails at the second one, as phy's.
        let col: Vec<C> = (0..8).map(|i| C::new(i as f32, 1.0)).collect();
        let h: Vec<C> = col.iter().chain(&col).copied().collect();
        assert_eq!(zf_detect(&h, 8, 2), Err(1));
    }
}
