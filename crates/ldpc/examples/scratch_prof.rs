// TEMPORARY profiling harness (to be deleted).
use radiohost_ldpc::{BaseGraph, CodeParams, Decoder, DecoderConfig, Encoder, SimdLevel};
use std::time::Instant;
fn cpu() -> f64 { let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 }; unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) }; ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9 }
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let level = match a.get(1).map(|s| s.as_str()) { Some("avx2") => SimdLevel::Avx2, Some("scalar") => SimdLevel::Scalar, _ => SimdLevel::Avx512 };
    let iters: usize = a.get(2).map(|s| s.parse().unwrap()).unwrap_or(5);
    let secs: f64 = a.get(3).map(|s| s.parse().unwrap()).unwrap_or(2.0);
    let p = CodeParams::for_rate(BaseGraph::Bg1, 384, 1.0 / 3.0).unwrap();
    let payload: Vec<u8> = (0..p.payload_bits).map(|i| ((i * 7919) >> 3) as u8 & 1).collect();
    let mut tx = vec![0u8; p.tx_bits];
    let mut enc = Encoder::new(p);
    enc.encode(&payload, &mut tx).unwrap();
    let llr: Vec<f32> = tx.iter().enumerate().map(|(i, &b)| {
        let n = ((i.wrapping_mul(2654435761) >> 7) % 1000) as f32 / 1000.0 - 0.5;
        (if b == 0 { 1.0 } else { -1.0 } + 1.6 * n) * 3.0 }).collect();
    let cfg = DecoderConfig { max_iterations: iters, early_termination: false, simd: level, ..Default::default() };
    let mut dec = Decoder::new(p, cfg);
    let mut out = vec![0u8; p.payload_bits];
    let t = Instant::now(); let mut n = 0; let mut best = f64::MAX;
    while t.elapsed().as_secs_f64() < secs { let c = cpu(); for _ in 0..100 { dec.decode(&llr, &mut out).unwrap(); } n += 100; best = best.min((cpu() - c) / 100.0); }
    let el = best; let _ = n;
    println!("{level} {iters}it: {:.2} us/block cpu-best {:.1} Mbit/s ok={}", el*1e6, p.payload_bits as f64/el/1e6, out == payload);
    if a.get(4).is_some() {
        let t = Instant::now(); let mut best = f64::MAX;
        while t.elapsed().as_secs_f64() < secs { let c = cpu(); for _ in 0..100 { enc.encode(&payload, &mut tx).unwrap(); } best = best.min((cpu() - c) / 100.0); }
        let el = best;
        println!("encode {:.2} us/block {:.1} Mbit/s", el*1e6, p.payload_bits as f64/el/1e6);
    }
}
