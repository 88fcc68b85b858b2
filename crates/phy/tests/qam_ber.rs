//! Soft-demodulator BER over AWGN against the closed form.
//!
//! The sign of a max-log LLR is the nearest-point decision, so the BER of the LLR
//! signs must match the exact hard-decision BER of Gray PAM per axis, which is a sum
//! of Gaussian tail probabilities over the decision regions.

use radiohost_iq::Cf32;
use radiohost_phy::channel::complex_gaussian;
use radiohost_phy::qam::{Demodulator, Modulation, Modulator};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// erfc with relative error < 1.2e-7 (Chebyshev fit, Numerical Recipes' erfcc form).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.26551223
        + t * (1.00002368
            + t * (0.37409196
                + t * (0.09678418
                    + t * (-0.18628806
                        + t * (0.27886807
                            + t * (-1.13520398
                                + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// P(N(0, sigma^2) > x).
fn q(x: f64, sigma: f64) -> f64 {
    0.5 * erfc(x / (sigma * std::f64::consts::SQRT_2))
}

/// Exact hard-decision BER of the constellation at complex noise variance `nv`.
fn closed_form(m: Modulation, nv: f64) -> f64 {
    let qa = m.bits_per_axis();
    let levels_n = 1usize << qa;
    let md = Modulator::new(m);
    // Per-axis levels with their labels, from the modulator (I axis, Q bits zero).
    let mut levels: Vec<(f64, usize)> = (0..levels_n)
        .map(|label| {
            let mut bits = vec![0u8; 2 * qa];
            for i in 0..qa {
                bits[2 * i] = ((label >> (qa - 1 - i)) & 1) as u8;
            }
            let mut s = [Cf32::default()];
            md.modulate(&bits, &mut s);
            (s[0].re as f64, label)
        })
        .collect();
    levels.sort_by(|a, b| a.0.total_cmp(&b.0));
    let sigma = (nv / 2.0).sqrt();
    let mut errors = 0.0;
    for &(a, la) in &levels {
        for (j, &(_, lb)) in levels.iter().enumerate() {
            let lo = if j == 0 {
                f64::NEG_INFINITY
            } else {
                (levels[j - 1].0 + levels[j].0) / 2.0
            };
            let hi = if j + 1 == levels_n {
                f64::INFINITY
            } else {
                (levels[j].0 + levels[j + 1].0) / 2.0
            };
            let p = q(lo - a, sigma) - q(hi - a, sigma);
            errors += p * (la ^ lb).count_ones() as f64;
        }
    }
    errors / (levels_n * qa) as f64
}

#[test]
fn ber_over_awgn_matches_closed_form() {
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    for (m, snr_db) in [
        (Modulation::Qpsk, 7.0),
        (Modulation::Qam16, 13.0),
        (Modulation::Qam64, 19.0),
        (Modulation::Qam256, 25.0),
    ] {
        let qm = m.bits_per_symbol();
        let n = 60_000;
        let nv = 10f64.powf(-snr_db / 10.0);
        let bits: Vec<u8> = (0..n * qm).map(|_| rng.gen::<bool>() as u8).collect();
        let mut syms = vec![Cf32::default(); n];
        Modulator::new(m).modulate(&bits, &mut syms);
        for s in syms.iter_mut() {
            *s += complex_gaussian(&mut rng, nv);
        }
        let mut llrs = vec![0.0; n * qm];
        Demodulator::new(m).demodulate(&syms, &vec![nv as f32; n], &mut llrs);
        let errors = bits
            .iter()
            .zip(&llrs)
            .filter(|(&b, &l)| (l < 0.0) != (b == 1))
            .count();
        let ber = errors as f64 / bits.len() as f64;
        let expect = closed_form(m, nv);
        assert!(
            expect > 1e-3 && expect < 0.1,
            "{m:?}: pick an SNR with a measurable BER ({expect})"
        );
        let rel = (ber - expect).abs() / expect;
        assert!(
            rel < 0.1,
            "{m:?} at {snr_db} dB: BER {ber:.3e} vs closed form {expect:.3e}"
        );
    }
}

#[test]
fn closed_form_matches_textbook_qpsk() {
    // QPSK: BER = Q(sqrt(Es/N0)) per bit with Es = 1.
    let nv: f64 = 0.2;
    let expect = 0.5 * erfc((1.0 / nv).sqrt() / std::f64::consts::SQRT_2);
    assert!((closed_form(Modulation::Qpsk, nv) - expect).abs() < 1e-5 * expect);
}
