//! End-to-end checks of the public API: encoder parity for every graph and lifting size,
//! decoding, SIMD/scalar equivalence, a BLER point over AWGN, and error handling.

use radiohost_ldpc::{
    parity_check, BaseGraph, CodeParams, Decoder, DecoderConfig, Encoder, LdpcError, MinSum,
    SimdLevel, LIFTING_SIZES,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};

const GRAPHS: [BaseGraph; 2] = [BaseGraph::Bg1, BaseGraph::Bg2];

fn random_bits(rng: &mut impl Rng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.gen_range(0..2u8)).collect()
}

/// BPSK (0 -> +1) over AWGN at the given Eb/N0, as channel LLRs 2y/sigma^2.
fn awgn_llrs(rng: &mut impl Rng, bits: &[u8], rate: f64, ebn0_db: f64) -> Vec<f32> {
    let ebn0 = 10f64.powf(ebn0_db / 10.0);
    let sigma2 = 1.0 / (2.0 * rate * ebn0);
    let noise = Normal::new(0.0, sigma2.sqrt()).unwrap();
    bits.iter()
        .map(|&b| {
            let y = if b == 0 { 1.0 } else { -1.0 } + noise.sample(rng);
            (2.0 * y / sigma2) as f32
        })
        .collect()
}

#[test]
fn encoder_output_satisfies_every_parity_check_for_every_graph_and_lifting_size() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for bg in GRAPHS {
        for &zc in &LIFTING_SIZES {
            let k = CodeParams::for_rate(bg, zc, 0.5).unwrap().k();
            // Full payload and a shortened one (fillers).
            for payload_bits in [k, k - zc / 2 - 1] {
                let p = CodeParams::new(bg, zc, payload_bits, payload_bits.max(zc)).unwrap();
                let mut enc = Encoder::new(p);
                let payload = random_bits(&mut rng, payload_bits);
                let mut full = vec![0u8; p.full_len()];
                enc.encode_full(&payload, &mut full).unwrap();
                assert!(
                    parity_check(bg, zc, &full),
                    "{bg} Zc={zc} K'={payload_bits}"
                );
                assert_eq!(&full[..payload_bits], &payload[..], "systematic part");
                assert!(
                    full[payload_bits..k].iter().all(|&b| b == 0),
                    "fillers are zero"
                );
                // The check can fail: any single flipped bit violates some check.
                let flip = rng.gen_range(0..full.len());
                full[flip] ^= 1;
                assert!(
                    !parity_check(bg, zc, &full),
                    "{bg} Zc={zc}: flip at {flip} undetected"
                );
            }
        }
    }
}

/// The bit-packed `encode` against the byte-per-bit reference `encode_full` (its
/// transmitted positions), for every graph and lifting size, with and without fillers
/// (also more than Zc of them) and at the lowest, a middle and the highest rate.
#[test]
fn packed_encoder_matches_the_byte_reference_for_every_graph_and_lifting_size() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for bg in GRAPHS {
        for &zc in &LIFTING_SIZES {
            let k = bg.systematic_cols() * zc;
            // Full, shortened, and shorter than the 2*Zc punctured positions.
            for payload_bits in [k, k - zc / 2 - 1, zc + 1] {
                let n = (bg.cols() - 2) * zc - (k - payload_bits.max(2 * zc));
                let min = payload_bits.saturating_sub(2 * zc).max(1);
                for tx_bits in [n, (min + n) / 2 + 3, min] {
                    let p = CodeParams::new(bg, zc, payload_bits, tx_bits).unwrap();
                    let mut enc = Encoder::new(p);
                    let payload = random_bits(&mut rng, payload_bits);
                    let mut full = vec![0u8; p.full_len()];
                    enc.encode_full(&payload, &mut full).unwrap();
                    let expected: Vec<u8> = (2 * zc..payload_bits.max(2 * zc))
                        .chain(k..p.full_len())
                        .take(tx_bits)
                        .map(|i| full[i])
                        .collect();
                    let mut tx = vec![7u8; tx_bits];
                    enc.encode(&payload, &mut tx).unwrap();
                    assert_eq!(tx, expected, "{bg} Zc={zc} K'={payload_bits} E={tx_bits}");
                }
            }
        }
    }
}

#[test]
fn rate_matching_punctures_two_zc_skips_fillers_and_truncates() {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let (bg, zc) = (BaseGraph::Bg2, 16);
    let (kp, e) = (150, 300);
    let p = CodeParams::new(bg, zc, kp, e).unwrap();
    let mut enc = Encoder::new(p);
    let payload = random_bits(&mut rng, kp);
    let mut full = vec![0u8; p.full_len()];
    enc.encode_full(&payload, &mut full).unwrap();
    let mut tx = vec![0u8; e];
    enc.encode(&payload, &mut tx).unwrap();
    let expected: Vec<u8> = (2 * zc..p.full_len())
        .filter(|&i| !(kp..p.k()).contains(&i))
        .take(e)
        .map(|i| full[i])
        .collect();
    assert_eq!(tx, expected);
}

fn levels() -> Vec<SimdLevel> {
    let mut v = vec![SimdLevel::Scalar];
    for l in [SimdLevel::Avx2, SimdLevel::Avx512] {
        if l.resolve() == l {
            v.push(l);
        }
    }
    v
}

#[test]
fn noiseless_codewords_decode_in_one_iteration_at_every_level() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for level in levels() {
        for (bg, zc, rate) in [
            (BaseGraph::Bg1, 384, 1.0 / 3.0),
            (BaseGraph::Bg1, 15, 0.9),
            (BaseGraph::Bg2, 2, 0.2),
            (BaseGraph::Bg2, 104, 2.0 / 3.0),
        ] {
            let p = CodeParams::for_rate(bg, zc, rate).unwrap();
            let payload = random_bits(&mut rng, p.payload_bits);
            let mut tx = vec![0u8; p.tx_bits];
            Encoder::new(p).encode(&payload, &mut tx).unwrap();
            let llr: Vec<f32> = tx
                .iter()
                .map(|&b| if b == 0 { 6.0 } else { -6.0 })
                .collect();
            let cfg = DecoderConfig {
                simd: level,
                ..Default::default()
            };
            let mut dec = Decoder::new(p, cfg);
            assert_eq!(dec.simd_level(), level);
            let mut out = vec![9u8; p.payload_bits];
            let o = dec.decode(&llr, &mut out).unwrap();
            assert_eq!(out, payload, "{level} {bg} Zc={zc}");
            assert!(o.parity_ok);
            assert_eq!(o.iterations, 1);
        }
    }
}

#[test]
fn saturated_llrs_stay_correct_over_many_iterations() {
    // Regression: without saturation-aware extrinsics, clipped a-posteriori LLRs collapse
    // after a few iterations and flip every bit of a perfectly received block.
    let mut rng = ChaCha8Rng::seed_from_u64(31);
    for level in levels() {
        for (bg, zc) in [(BaseGraph::Bg1, 384), (BaseGraph::Bg2, 64)] {
            let p = CodeParams::for_rate(bg, zc, 1.0 / 3.0).unwrap();
            let payload = random_bits(&mut rng, p.payload_bits);
            let mut tx = vec![0u8; p.tx_bits];
            Encoder::new(p).encode(&payload, &mut tx).unwrap();
            for amp in [3.0f32, 20.0, f32::INFINITY] {
                let llr: Vec<f32> = tx
                    .iter()
                    .map(|&b| if b == 0 { amp } else { -amp })
                    .collect();
                let cfg = DecoderConfig {
                    max_iterations: 12,
                    early_termination: false,
                    simd: level,
                    ..Default::default()
                };
                let mut out = vec![0u8; p.payload_bits];
                let o = Decoder::new(p, cfg).decode(&llr, &mut out).unwrap();
                assert!(o.parity_ok && o.iterations == 12, "{level} {bg} amp {amp}");
                assert_eq!(out, payload, "{level} {bg} amp {amp}");
            }
        }
    }
}

#[test]
fn decoder_corrects_random_errors() {
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let p = CodeParams::for_rate(BaseGraph::Bg1, 64, 1.0 / 3.0).unwrap();
    let mut enc = Encoder::new(p);
    let mut dec = Decoder::new(p, DecoderConfig::default());
    for _ in 0..10 {
        let payload = random_bits(&mut rng, p.payload_bits);
        let mut tx = vec![0u8; p.tx_bits];
        enc.encode(&payload, &mut tx).unwrap();
        // 6% hard errors with equal confidence: far beyond what the hard bits can hide.
        let mut flips = 0;
        let llr: Vec<f32> = tx
            .iter()
            .map(|&b| {
                let wrong = rng.gen_bool(0.06);
                flips += wrong as usize;
                if (b == 0) != wrong {
                    2.0
                } else {
                    -2.0
                }
            })
            .collect();
        assert!(flips > 50);
        let mut out = vec![0u8; p.payload_bits];
        let o = dec.decode(&llr, &mut out).unwrap();
        assert!(o.parity_ok, "{flips} errors not corrected");
        assert_eq!(out, payload);
        assert!(o.iterations > 1);
    }
}

#[test]
fn simd_and_scalar_give_identical_results_on_random_inputs() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let levels = levels();
    // Zc a multiple of 64 (wrapped layout: the AVX-512 register kernel), of 32 only
    // and others (doubled layout: the 32-lane row kernel at both levels, compiled with
    // AVX-512VL at the AVX-512 level, and the fix-up copies).
    for (bg, zc, rate, ms) in [
        (BaseGraph::Bg1, 384, 1.0 / 3.0, MinSum::Normalized(0.75)),
        (BaseGraph::Bg1, 64, 1.0 / 3.0, MinSum::Offset(1.0)),
        (BaseGraph::Bg2, 128, 0.2, MinSum::Normalized(0.75)),
        (BaseGraph::Bg1, 320, 0.6, MinSum::Normalized(0.625)),
        (BaseGraph::Bg2, 256, 0.5, MinSum::Offset(0.25)),
        (BaseGraph::Bg1, 96, 0.5, MinSum::Normalized(0.75)),
        (BaseGraph::Bg2, 32, 0.3, MinSum::Normalized(0.75)),
        (BaseGraph::Bg2, 352, 0.4, MinSum::Offset(0.5)),
        (BaseGraph::Bg1, 36, 0.5, MinSum::Offset(0.5)),
        (BaseGraph::Bg1, 72, 1.0 / 3.0, MinSum::Normalized(0.75)),
        (BaseGraph::Bg2, 15, 0.25, MinSum::Normalized(0.875)),
        (BaseGraph::Bg2, 208, 0.4, MinSum::Normalized(1.0)),
        (BaseGraph::Bg2, 3, 0.3, MinSum::Normalized(0.5)),
    ] {
        let p = CodeParams::for_rate(bg, zc, rate).unwrap();
        for trial in 0..3 {
            let payload = random_bits(&mut rng, p.payload_bits);
            let mut tx = vec![0u8; p.tx_bits];
            Encoder::new(p).encode(&payload, &mut tx).unwrap();
            // Noisy LLRs spanning the whole i8 range, saturation included.
            let llr: Vec<i8> = tx
                .iter()
                .map(|&b| {
                    let v: i32 = if b == 0 { 20 } else { -20 } + rng.gen_range(-140..140);
                    v.clamp(-128, 127) as i8
                })
                .collect();
            let mut results = Vec::new();
            for &level in &levels {
                let cfg = DecoderConfig {
                    max_iterations: 6,
                    min_sum: ms,
                    early_termination: trial != 0,
                    simd: level,
                };
                let mut dec = Decoder::new(p, cfg);
                let mut out = vec![0u8; p.payload_bits];
                let o = dec.decode_quantized(&llr, &mut out).unwrap();
                results.push((level, o, out, dec.posterior()));
            }
            for r in &results[1..] {
                assert_eq!(r.1, results[0].1, "{bg} Zc={zc}: outcome {} vs scalar", r.0);
                assert_eq!(r.2, results[0].2, "{bg} Zc={zc}: payload {} vs scalar", r.0);
                assert!(
                    r.3 == results[0].3,
                    "{bg} Zc={zc}: posterior LLRs {} vs scalar",
                    r.0
                );
            }
        }
    }
}

/// Float LLRs (quantised straight into the decoder's columns, or with AVX2 at a Zc
/// that is not a multiple of 32 in one pass before being placed) give every level the
/// scalar level's results: with fillers, a truncated rate-matched block and a full
/// one, values beyond the clip and infinities.
#[test]
fn float_llrs_give_identical_results_at_every_level() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let levels = levels();
    for (bg, zc, payload, tx) in [
        (BaseGraph::Bg1, 384, 8448, 25344),
        (BaseGraph::Bg1, 72, 1500, 2700),
        (BaseGraph::Bg2, 36, 300, 1000),
        (BaseGraph::Bg1, 128, 2816 - 100, 3000),
        (BaseGraph::Bg2, 5, 40, 77),
    ] {
        let p = CodeParams::new(bg, zc, payload, tx).unwrap();
        let bits = random_bits(&mut rng, p.payload_bits);
        let mut coded = vec![0u8; p.tx_bits];
        Encoder::new(p).encode(&bits, &mut coded).unwrap();
        let llr: Vec<f32> = coded
            .iter()
            .map(|&b| match rng.gen_range(0..50) {
                0 => f32::INFINITY,
                1 => f32::NEG_INFINITY,
                _ => (if b == 0 { 2.0 } else { -2.0 }) + rng.gen_range(-30.0..30.0),
            })
            .collect();
        let mut results = Vec::new();
        for &level in &levels {
            let cfg = DecoderConfig {
                max_iterations: 4,
                early_termination: false,
                simd: level,
                ..Default::default()
            };
            let mut dec = Decoder::new(p, cfg);
            let mut out = vec![0u8; p.payload_bits];
            // Twice, so the second decode overwrites every position the first wrote.
            dec.decode(&vec![-5.0; p.tx_bits], &mut out).unwrap();
            let o = dec.decode(&llr, &mut out).unwrap();
            results.push((level, o, out, dec.posterior()));
        }
        for r in &results[1..] {
            let what = format!("{bg} Zc={zc} K'={payload} E={tx}, {} vs scalar", r.0);
            assert_eq!(r.1, results[0].1, "{what}: outcome");
            assert_eq!(r.2, results[0].2, "{what}: payload");
            assert!(r.3 == results[0].3, "{what}: posterior LLRs");
        }
    }
}

fn bler(bg: BaseGraph, zc: usize, rate: f64, ebn0_db: f64, blocks: usize, seed: u64) -> f64 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let p = CodeParams::for_rate(bg, zc, rate).unwrap();
    let mut enc = Encoder::new(p);
    let mut dec = Decoder::new(p, DecoderConfig::default());
    let mut errors = 0;
    let mut tx = vec![0u8; p.tx_bits];
    let mut out = vec![0u8; p.payload_bits];
    for _ in 0..blocks {
        let payload = random_bits(&mut rng, p.payload_bits);
        enc.encode(&payload, &mut tx).unwrap();
        let llr = awgn_llrs(&mut rng, &tx, p.rate(), ebn0_db);
        dec.decode(&llr, &mut out).unwrap();
        errors += (out != payload) as usize;
    }
    errors as f64 / blocks as f64
}

#[test]
fn bler_over_awgn_falls_where_theory_says() {
    // BG2 K=520 rate 1/3: the BPSK capacity limit is -0.5 dB Eb/N0; a short LDPC code with
    // 10 min-sum iterations needs about 2 dB more for BLER 1e-1, so at 2.5 dB the BLER
    // must be well below 10 %, and 2 dB under the limit it must fail nearly always.
    let good = bler(BaseGraph::Bg2, 52, 1.0 / 3.0, 2.5, 100, 6);
    assert!(good < 0.1, "BLER {good} at 2.5 dB");
    let bad = bler(BaseGraph::Bg2, 52, 1.0 / 3.0, -2.5, 30, 7);
    assert!(bad > 0.9, "BLER {bad} at -2.5 dB (below capacity)");
}

#[test]
fn bad_inputs_give_typed_errors() {
    let p = CodeParams::for_rate(BaseGraph::Bg2, 8, 0.5).unwrap();
    let mut enc = Encoder::new(p);
    let mut out = vec![0u8; p.tx_bits];
    assert!(matches!(
        enc.encode(&[0u8; 3], &mut out),
        Err(LdpcError::LengthMismatch { .. })
    ));
    let mut bad = vec![0u8; p.payload_bits];
    bad[5] = 2;
    assert_eq!(
        enc.encode(&bad, &mut out),
        Err(LdpcError::NotABit {
            what: "payload",
            index: 5,
            value: 2
        })
    );
    // A large block (the payload is checked while it is packed, in vector code) and a
    // bad byte in its body, then in its last position: typed errors, output untouched.
    let big = CodeParams::for_rate(BaseGraph::Bg1, 384, 1.0 / 3.0).unwrap();
    let mut enc = Encoder::new(big);
    let mut out = vec![7u8; big.tx_bits];
    for (index, value) in [(4000, 0x80), (big.payload_bits - 1, 3)] {
        let mut bad = vec![1u8; big.payload_bits];
        bad[index] = value;
        assert_eq!(
            enc.encode(&bad, &mut out),
            Err(LdpcError::NotABit {
                what: "payload",
                index,
                value
            })
        );
        assert!(out.iter().all(|&b| b == 7), "output written on an error");
    }
    let mut dec = Decoder::new(p, DecoderConfig::default());
    let mut llr = vec![1.0f32; p.tx_bits];
    llr[7] = f32::NAN;
    let mut pay = vec![0u8; p.payload_bits];
    assert_eq!(
        dec.decode(&llr, &mut pay),
        Err(LdpcError::NanLlr { index: 7 })
    );
    assert!(matches!(
        dec.decode(&llr[1..], &mut pay),
        Err(LdpcError::LengthMismatch { .. })
    ));
    let cfg = DecoderConfig {
        max_iterations: 0,
        ..Default::default()
    };
    assert_eq!(
        Decoder::try_new(p, cfg).err(),
        Some(LdpcError::ZeroIterations)
    );
    let cfg = DecoderConfig {
        min_sum: MinSum::Normalized(f32::NAN),
        ..Default::default()
    };
    let mut d = Decoder::new(p, cfg);
    assert!(matches!(
        d.decode(&[0.0; 200][..p.tx_bits], &mut pay),
        Err(LdpcError::InvalidMinSum(_))
    ));
    assert!(!parity_check(BaseGraph::Bg1, 17, &[0; 68 * 17]));
    assert!(!parity_check(BaseGraph::Bg1, 16, &[0; 10]));
    assert!(parity_check(BaseGraph::Bg1, 16, &[0; 68 * 16]));
    let msg = CodeParams::new(BaseGraph::Bg1, 17, 10, 10)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("17"), "{msg}");
}

/// The decoder's single edges are BG1's extension parity columns of the active rows
/// (22 + r for row r >= 4), nothing else, at every rate.
#[test]
fn single_edge_columns_are_the_active_extension_columns() {
    for rate in [1.0 / 3.0, 0.5, 0.8] {
        let p = CodeParams::for_rate(BaseGraph::Bg1, 384, rate).unwrap();
        let rows = p.active_rows();
        let expect: Vec<bool> = (0..68).map(|c| c >= 26 && c < 22 + rows).collect();
        assert_eq!(
            radiohost_ldpc::single_edge_columns(&p),
            expect,
            "rate {rate}"
        );
    }
}
