//! Decoding at any iteration count (early termination off) and rate matching for every
//! redundancy version, repetition included (TS 38.212 §5.4.2.1).

use radiohost_ldpc::{
    k0, BaseGraph, CodeParams, Decoder, DecoderConfig, Encoder, LdpcError, RateMatch, SimdLevel,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};

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

fn levels() -> Vec<SimdLevel> {
    let mut v = vec![SimdLevel::Scalar];
    for l in [SimdLevel::Avx2, SimdLevel::Avx512] {
        if l.resolve() == l {
            v.push(l);
        } else {
            eprintln!("SKIPPED: {l} kernel (this CPU lacks it); scalar and others tested");
        }
    }
    v
}

#[test]
fn clean_and_noisy_blocks_decode_at_5_10_20_and_50_iterations_without_early_termination() {
    // The regression of issue 13: BG1 Zc=384 rate 1/3 at Eb/N0 2.76 dB decoded at 5
    // iterations and every block was wrong at 10. Noisy blocks at an Eb/N0 where 5
    // iterations suffice, and clean ones (no noise, moderate and strong LLRs).
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    for (bg, zc, rate, ebn0_db) in [
        (BaseGraph::Bg1, 384, 1.0 / 3.0, 2.76),
        (BaseGraph::Bg2, 52, 1.0 / 5.0, 2.5),
    ] {
        let p = CodeParams::for_rate(bg, zc, rate).unwrap();
        let mut enc = Encoder::new(p);
        let mut blocks = Vec::new();
        for kind in ["noisy", "noisy", "noisy", "clean 1.5", "clean 40"] {
            let payload = random_bits(&mut rng, p.payload_bits);
            let mut tx = vec![0u8; p.tx_bits];
            enc.encode(&payload, &mut tx).unwrap();
            let llr = match kind {
                "noisy" => awgn_llrs(&mut rng, &tx, rate, ebn0_db),
                "clean 1.5" => tx.iter().map(|&b| 1.5 - 3.0 * b as f32).collect(),
                _ => tx.iter().map(|&b| 40.0 - 80.0 * b as f32).collect(),
            };
            blocks.push((kind, payload, llr));
        }
        for level in levels() {
            for iterations in [5, 10, 20, 50] {
                let cfg = DecoderConfig {
                    max_iterations: iterations,
                    early_termination: false,
                    simd: level,
                    ..Default::default()
                };
                let mut dec = Decoder::new(p, cfg);
                for (kind, payload, llr) in &blocks {
                    let mut out = vec![0u8; p.payload_bits];
                    let o = dec.decode(llr, &mut out).unwrap();
                    let wrong = out.iter().zip(payload).filter(|(a, b)| a != b).count();
                    assert_eq!(
                        (wrong, o.parity_ok, o.iterations),
                        (0, true, iterations),
                        "{bg} Zc={zc} {level} {iterations} iterations, {kind} block"
                    );
                }
            }
        }
    }
}

/// TS 38.212 §5.4.2.1 bit selection written out as the spec states it: the buffer
/// `d_j = c_{j + 2Zc}` with filler bits as NULL, read circularly from k0.
fn spec_bit_selection(full: &[u8], p: &CodeParams, rv: u8, e: usize) -> Vec<u8> {
    let ncb = p.n();
    let d: Vec<Option<u8>> = (0..ncb)
        .map(|j| {
            let c = j + 2 * p.zc;
            if (p.payload_bits..p.k()).contains(&c) {
                None
            } else {
                Some(full[c])
            }
        })
        .collect();
    let k0 = k0(p.bg, p.zc, ncb, rv).unwrap();
    let (mut out, mut j) = (Vec::new(), 0);
    while out.len() < e {
        if let Some(b) = d[(k0 + j) % ncb] {
            out.push(b);
        }
        j += 1;
    }
    out
}

#[test]
fn bit_selection_matches_the_spec_for_every_rv_with_fillers_and_repetition() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for (bg, zc, kp) in [
        (BaseGraph::Bg1, 8, 176),
        (BaseGraph::Bg1, 15, 300),
        (BaseGraph::Bg2, 16, 150),
        (BaseGraph::Bg2, 52, 520),
    ] {
        let p = CodeParams::new(bg, zc, kp, kp).unwrap();
        let mut enc = Encoder::new(p);
        let payload = random_bits(&mut rng, kp);
        let mut full = vec![0u8; p.full_len()];
        enc.encode_full(&payload, &mut full).unwrap();
        let nf = p.n() - p.fillers();
        for rv in 0..4 {
            for e in [zc + 3, nf / 2, nf - 1, nf, nf + 1, 3 * nf + 7] {
                let rm = RateMatch::new(bg, zc, kp, rv, e);
                let rm = match rm {
                    Ok(rm) => rm,
                    // Only a too-short rv 0 block may be refused (systematic bits unsent).
                    Err(LdpcError::InvalidTxBits { .. }) if e < kp => continue,
                    Err(err) => panic!("{bg} Zc={zc} rv {rv} E {e}: {err}"),
                };
                let mut out = vec![9u8; e];
                rm.select(&full, &mut out).unwrap();
                assert_eq!(
                    out,
                    spec_bit_selection(&full, &p, rv, e),
                    "{bg} Zc={zc} K'={kp} rv {rv} E {e}"
                );
                if rv == 0 && e <= nf {
                    // rv 0 without repetition is the encoder's own output.
                    let mut enc0 = Encoder::new(CodeParams::new(bg, zc, kp, e).unwrap());
                    let mut tx = vec![0u8; e];
                    enc0.encode(&payload, &mut tx).unwrap();
                    assert_eq!(tx, out, "{bg} Zc={zc} rv 0 E {e}");
                    assert_eq!(rm.code_params().tx_bits, e);
                }
            }
        }
    }
    // Hand-computed starts (Table 5.4.2.1-2, Ncb = N): BG1 Zc=8 rv 1..3 start at 17, 33
    // and 56 Zc; the first bit sent for rv 2 is codeword bit 2Zc + 33Zc = 280.
    let rm = RateMatch::new(BaseGraph::Bg1, 8, 176, 2, 10).unwrap();
    assert_eq!(rm.k0(), 264);
    let p = CodeParams::new(BaseGraph::Bg1, 8, 176, 176).unwrap();
    let mut full = vec![0u8; p.full_len()];
    let payload = random_bits(&mut rng, 176);
    Encoder::new(p).encode_full(&payload, &mut full).unwrap();
    let mut out = vec![0u8; 10];
    rm.select(&full, &mut out).unwrap();
    assert_eq!(out, full[280..290]);
    assert_eq!(
        RateMatch::new(BaseGraph::Bg2, 16, 150, 4, 100),
        Err(LdpcError::InvalidRv(4))
    );
    assert!(matches!(
        RateMatch::new(BaseGraph::Bg2, 16, 150, 1, 0),
        Err(LdpcError::RateMatchedLength { .. })
    ));
}

#[test]
fn every_rv_round_trips_through_the_decoder_including_repetition() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for (bg, zc, kp) in [(BaseGraph::Bg1, 64, 1300), (BaseGraph::Bg2, 52, 480)] {
        let code = CodeParams::new(bg, zc, kp, kp).unwrap();
        let nf = code.n() - code.fillers();
        let mut enc = Encoder::new(code);
        let mut full = vec![0u8; code.full_len()];
        for rv in 0..4 {
            // The whole buffer from k0, repetition (1.5x and 2.5x the buffer), and for
            // the self-decodable rv 0 and rv 3 a punctured block at rate ~1/2.
            let mut lengths = vec![nf, nf * 3 / 2, nf * 5 / 2];
            if rv == 0 || rv == 3 {
                lengths.push(2 * kp);
            }
            for e in lengths {
                let rm = RateMatch::new(bg, zc, kp, rv, e).unwrap();
                let payload = random_bits(&mut rng, kp);
                enc.encode_full(&payload, &mut full).unwrap();
                let mut tx = vec![0u8; e];
                rm.select(&full, &mut tx).unwrap();
                // Eb/N0 per transmitted rate; repetition gains on top of it.
                let rate = kp as f64 / e.min(nf) as f64;
                let llr = awgn_llrs(&mut rng, &tx, rate, 3.0);
                let mut combined = vec![0f32; rm.code_params().tx_bits];
                rm.combine(&llr, &mut combined).unwrap();
                let cfg = DecoderConfig {
                    max_iterations: 20,
                    ..Default::default()
                };
                let mut dec = Decoder::new(rm.code_params(), cfg);
                let mut out = vec![0u8; kp];
                let o = dec.decode(&combined, &mut out).unwrap();
                assert!(o.parity_ok, "{bg} rv {rv} E {e}");
                assert_eq!(out, payload, "{bg} rv {rv} E {e}");
            }
        }
    }
}

#[test]
fn combining_adds_repeated_llrs_and_rejects_nan() {
    // BG2 Zc=2, K'=20: buffer of 100 bits; E = 250 sends each bit 2 or 3 times.
    let rm = RateMatch::new(BaseGraph::Bg2, 2, 20, 1, 250).unwrap();
    let n = rm.code_params().tx_bits;
    assert_eq!(n, 100);
    let mut out = vec![0f32; n];
    rm.combine(&[1.0; 250], &mut out).unwrap();
    let (twice, thrice) = (
        out.iter().filter(|&&v| v == 2.0).count(),
        out.iter().filter(|&&v| v == 3.0).count(),
    );
    assert_eq!((twice, thrice), (50, 50));
    let mut llr = vec![1.0f32; 250];
    llr[17] = f32::NAN;
    assert_eq!(
        rm.combine(&llr, &mut out),
        Err(LdpcError::NanLlr { index: 17 })
    );
    // A bit received as both certain values is erased, not NaN.
    let mut llr = vec![1.0f32; 250];
    llr[0] = f32::INFINITY;
    llr[100] = f32::NEG_INFINITY;
    rm.combine(&llr, &mut out).unwrap();
    assert!(out.iter().all(|v| !v.is_nan()));
}

/// Cross-check against py3gpp's `nrRateMatchLDPC` (an independent implementation of
/// TS 38.212 §5.4.2, BPSK so without bit interleaving) when it is importable: by the
/// interpreter in `RADIOHOST_PYTHON`, else `python3` (`pip install py3gpp`, listed in
/// tests/python/requirements.txt).
#[test]
fn bit_selection_matches_py3gpp_when_available() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let python = std::env::var("RADIOHOST_PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = Command::new(&python)
        .args(["-c", "import py3gpp, numpy"])
        .output();
    if !probe.map(|o| o.status.success()).unwrap_or(false) {
        eprintln!(
            "SKIPPED: py3gpp is not importable by {python} (pip install py3gpp, or set RADIOHOST_PYTHON)"
        );
        return;
    }
    // One line per case: "rv E d_0 d_1 ... d_{N-1}" with fillers as -1; py3gpp prints
    // the E selected bits as a string of 0/1.
    const SCRIPT: &str = r#"
import sys, numpy as np
from py3gpp import nrRateMatchLDPC
for line in sys.stdin:
    v = [int(x) for x in line.split()]
    rv, e, d = v[0], v[1], np.array(v[2:]).reshape(-1, 1)
    print(''.join(str(int(b)) for b in nrRateMatchLDPC(d, e, rv, 'BPSK', 1)))
"#;
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let mut input = String::new();
    let mut expected = Vec::new();
    for (bg, zc, kp) in [
        (BaseGraph::Bg1, 8, 170),
        (BaseGraph::Bg2, 16, 150),
        (BaseGraph::Bg1, 384, 8448),
    ] {
        let p = CodeParams::new(bg, zc, kp, kp).unwrap();
        let payload = random_bits(&mut rng, kp);
        let mut full = vec![0u8; p.full_len()];
        Encoder::new(p).encode_full(&payload, &mut full).unwrap();
        let d: Vec<String> = (2 * zc..p.full_len())
            .map(|c| {
                if (kp..p.k()).contains(&c) {
                    "-1".to_string()
                } else {
                    full[c].to_string()
                }
            })
            .collect();
        let d = d.join(" ");
        let nf = p.n() - p.fillers();
        for rv in 0..4u8 {
            for e in [nf / 3, nf, 2 * nf + 5] {
                let rm = RateMatch::new(bg, zc, kp, rv, e);
                let Ok(rm) = rm else { continue };
                let mut out = vec![0u8; e];
                rm.select(&full, &mut out).unwrap();
                input.push_str(&format!("{rv} {e} {d}\n"));
                expected.push((format!("{bg} Zc={zc} rv {rv} E {e}"), out));
            }
        }
    }
    let mut child = Command::new(&python)
        .args(["-c", SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Written from another thread: the script answers while it reads.
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "py3gpp script failed");
    let lines: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    assert_eq!(lines.len(), expected.len());
    for (line, (what, bits)) in lines.iter().zip(&expected) {
        let ours: String = bits.iter().map(|b| char::from(b'0' + b)).collect();
        assert_eq!(*line, ours, "{what}: radiohost vs py3gpp");
    }
    eprintln!("py3gpp agrees on {} rate-matched blocks", expected.len());
}
