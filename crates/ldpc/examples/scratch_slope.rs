use radiohost_ldpc::{BaseGraph, CodeParams, Decoder, DecoderConfig, Encoder, SimdLevel};
use std::time::Instant;
fn main() {
    let p = CodeParams::for_rate(BaseGraph::Bg1, 384, 1.0 / 3.0).unwrap();
    let payload: Vec<u8> = (0..p.payload_bits).map(|i| ((i * 7919) >> 3) as u8 & 1).collect();
    let mut tx = vec![0u8; p.tx_bits];
    Encoder::new(p).encode(&payload, &mut tx).unwrap();
    let llr: Vec<f32> = tx.iter().enumerate().map(|(i, &b)| {
        let n = ((i.wrapping_mul(2654435761) >> 7) % 1000) as f32 / 1000.0 - 0.5;
        (if b == 0 { 1.0 } else { -1.0 } + 1.6 * n) * 3.0 }).collect();
    let lvl = match std::env::args().nth(1).as_deref() { Some("avx2") => SimdLevel::Avx2, _ => SimdLevel::Avx512 };
    let mut out = vec![0u8; p.payload_bits];
    let its: Vec<usize> = std::env::var("ITS").map(|s| s.split(",").map(|x| x.parse().unwrap()).collect()).unwrap_or(vec![1, 5, 9]);
    for it in its {
        let cfg = DecoderConfig { max_iterations: it, early_termination: false, simd: lvl, ..Default::default() };
        let mut d = Decoder::new(p, cfg);
        let mut best = f64::MAX;
        for _ in 0..15 {
            let t = Instant::now();
            for _ in 0..200 { d.decode(&llr, &mut out).unwrap(); }
            best = best.min(t.elapsed().as_secs_f64() / 200.0);
        }
        println!("{lvl} it={it}: {:.2} us  ok={}", best * 1e6, out == payload);
    }
}
