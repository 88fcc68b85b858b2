//! BLER over BPSK + AWGN versus Eb/N0 (the curve documented in docs/BENCHMARKS.md, LDPC section).
//!
//! `cargo run --release -p radiohost-ldpc --example ldpc_bler -- BG ZC RATE EBN0_FROM EBN0_TO STEP BLOCKS [MINSUM] [ITERS] [SCALE] [ET]`
//! MINSUM is a normalisation factor (`0.75`) or `o` and an offset in LLR units (`o0.5`);
//! ET 0 turns early termination off (every block runs ITERS iterations).
//! e.g. `... -- 1 384 0.3333 0 2.5 0.25 200`

use radiohost_ldpc::{BaseGraph, CodeParams, Decoder, DecoderConfig, Encoder, MinSum};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, d: f64| a.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let bg = if arg(0, 1.0) == 2.0 {
        BaseGraph::Bg2
    } else {
        BaseGraph::Bg1
    };
    let zc = arg(1, 384.0) as usize;
    let rate = arg(2, 1.0 / 3.0);
    let (from, to, step) = (arg(3, 0.0), arg(4, 2.5), arg(5, 0.25));
    let blocks = arg(6, 200.0) as usize;
    let min_sum = match a.get(7) {
        Some(x) if x.starts_with('o') => MinSum::Offset(x[1..].parse().unwrap_or(0.5)),
        _ => MinSum::Normalized(arg(7, 0.75) as f32),
    };
    let iters = arg(8, 10.0) as usize;
    let scale = arg(9, 4.0) as f32;
    let early_termination = arg(10, 1.0) != 0.0;
    let p = match CodeParams::for_rate(bg, zc, rate) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let cfg = DecoderConfig {
        max_iterations: iters,
        min_sum,
        early_termination,
        ..Default::default()
    };
    let mut enc = Encoder::new(p);
    let mut dec = Decoder::new(p, cfg);
    dec.set_llr_scale(scale).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(2024);
    println!("# {bg} Zc={zc} K={} E={} rate={:.4} min_sum={min_sum:?} iters={iters} scale={scale} early_termination={early_termination} blocks={blocks}", p.payload_bits, p.tx_bits, p.rate());
    println!("# Eb/N0[dB]  BLER      BER        avg_iters");
    let mut tx = vec![0u8; p.tx_bits];
    let mut out = vec![0u8; p.payload_bits];
    let mut ebn0 = from;
    while ebn0 <= to + 1e-9 {
        let sigma2 = 1.0 / (2.0 * p.rate() * 10f64.powf(ebn0 / 10.0));
        let noise = Normal::new(0.0, sigma2.sqrt()).unwrap();
        let (mut block_err, mut bit_err, mut it) = (0, 0, 0);
        for _ in 0..blocks {
            let payload: Vec<u8> = (0..p.payload_bits).map(|_| rng.gen_range(0..2)).collect();
            enc.encode(&payload, &mut tx).unwrap();
            let llr: Vec<f32> = tx
                .iter()
                .map(|&b| {
                    (2.0 * (if b == 0 { 1.0 } else { -1.0 } + noise.sample(&mut rng)) / sigma2)
                        as f32
                })
                .collect();
            let o = dec.decode(&llr, &mut out).unwrap();
            it += o.iterations;
            let e = out.iter().zip(&payload).filter(|(x, y)| x != y).count();
            bit_err += e;
            block_err += (e > 0) as usize;
        }
        println!(
            "{ebn0:10.2}  {:<8.4}  {:<9.2e}  {:.2}",
            block_err as f64 / blocks as f64,
            bit_err as f64 / (blocks * p.payload_bits) as f64,
            it as f64 / blocks as f64
        );
        ebn0 += step;
    }
}
