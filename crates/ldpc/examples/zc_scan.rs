//! Per-edge cost of the decoder across lifting sizes (BG1 rate 1/3, 5 iterations), for
//! every SIMD level this CPU has: shows whether the kernel is compute- or memory-bound
//! (working set grows with Zc) and which level's kernel is faster at each Zc.
//!
//! `cargo run --release -p radiohost-ldpc --example zc_scan [zc ...]`

use radiohost_ldpc::{BaseGraph, CodeParams, Decoder, DecoderConfig, Encoder, SimdLevel};

fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn main() {
    let mut sizes: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a lifting size"))
        .collect();
    if sizes.is_empty() {
        sizes = vec![64, 72, 128, 144, 192, 208, 256, 320, 384];
    }
    let levels: Vec<SimdLevel> = [SimdLevel::Avx2, SimdLevel::Avx512]
        .into_iter()
        .filter(|l| l.resolve() == *l)
        .collect();
    println!("level    Zc   us/block  ns per 64 edge-lane updates  Mbit/s/core");
    for zc in sizes {
        let p = CodeParams::for_rate(BaseGraph::Bg1, zc, 1.0 / 3.0).unwrap();
        let payload: Vec<u8> = (0..p.payload_bits).map(|i| (i * 7 / 3) as u8 & 1).collect();
        let mut tx = vec![0u8; p.tx_bits];
        Encoder::new(p).encode(&payload, &mut tx).unwrap();
        let llr: Vec<f32> = tx
            .iter()
            .enumerate()
            .map(|(i, &b)| (if b == 0 { 2.0 } else { -2.0 }) * (1.0 + (i % 7) as f32 / 7.0))
            .collect();
        for &simd in &levels {
            let cfg = DecoderConfig {
                max_iterations: 5,
                early_termination: false,
                simd,
                ..Default::default()
            };
            let mut dec = Decoder::new(p, cfg);
            let mut out = vec![0u8; p.payload_bits];
            let reps = 400 * 384 / zc;
            dec.decode(&llr, &mut out).unwrap();
            let c = thread_cpu_s();
            for _ in 0..reps {
                dec.decode(&llr, &mut out).unwrap();
            }
            let per = (thread_cpu_s() - c) / reps as f64;
            let updates = 316.0 * zc as f64 * 5.0;
            println!(
                "{:6} {zc:5} {:9.1}  {:10.2}  {:10.1}",
                simd.to_string(),
                per * 1e6,
                per * 1e9 / updates * 64.0,
                p.payload_bits as f64 / per / 1e6
            );
        }
    }
}
