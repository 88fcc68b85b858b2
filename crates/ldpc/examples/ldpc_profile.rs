//! Decodes the throughput example's block (BG1 rate 1/3, Zc=384 unless given, 5
//! iterations, no early termination) `reps` times at one SIMD level and nothing else, so that an instruction
//! counter (`valgrind --tool=callgrind --toggle-collect='*Decoder::decode*'`) or a
//! profiler sees only the decoder. An optional noise factor makes the block harder
//! (fewer saturated LLRs in later iterations; 1.6 is the throughput example's block).
//!
//! A fifth argument `et` turns early termination on (up to 5 iterations), as the
//! station decodes.
//!
//! `cargo run --release -p radiohost-ldpc --example ldpc_profile [avx2|scalar|avx512] [reps] [noise] [zc] [et]`

use radiohost_ldpc::{BaseGraph, CodeParams, Decoder, DecoderConfig, Encoder, SimdLevel};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let level = match args.next().as_deref() {
        Some("scalar") => SimdLevel::Scalar,
        Some("avx512") => SimdLevel::Avx512,
        _ => SimdLevel::Avx2,
    };
    let reps: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100);
    let noise: f32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1.6);
    let zc: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(384);
    let early_termination = args.next().as_deref() == Some("et");
    let p = CodeParams::for_rate(BaseGraph::Bg1, zc, 1.0 / 3.0).unwrap();
    let payload: Vec<u8> = (0..p.payload_bits)
        .map(|i| ((i * 7919) >> 3) as u8 & 1)
        .collect();
    let mut tx = vec![0u8; p.tx_bits];
    Encoder::new(p).encode(&payload, &mut tx).unwrap();
    let llr: Vec<f32> = tx
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            let n = ((i.wrapping_mul(2654435761) >> 7) % 1000) as f32 / 1000.0 - 0.5;
            (if b == 0 { 1.0 } else { -1.0 } + noise * n) * 3.0
        })
        .collect();
    let cfg = DecoderConfig {
        max_iterations: 5,
        early_termination,
        simd: level,
        ..Default::default()
    };
    let mut dec = Decoder::new(p, cfg);
    let mut out = vec![0u8; p.payload_bits];
    let t = Instant::now();
    let mut errors = 0;
    for _ in 0..reps {
        dec.decode(&llr, &mut out).unwrap();
        errors += out.iter().zip(&payload).filter(|(a, b)| a != b).count();
    }
    let per = t.elapsed().as_secs_f64() / reps as f64;
    println!(
        "{}: {reps} blocks, {:.1} us/block wall, {:.1} Mbit/s, {errors} bit errors",
        dec.simd_level(),
        per * 1e6,
        p.payload_bits as f64 / per / 1e6
    );
}
