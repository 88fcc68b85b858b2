//! Criterion benches: decode BG1 Zc=384 rate 1/3, exactly 5 iterations (no early
//! termination), at every SIMD level the CPU has (the scalar kernel is the baseline in
//! the same run), and encode. Throughput is in information bits (K = 8448).

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use radiohost_ldpc::{BaseGraph, CodeParams, Decoder, DecoderConfig, Encoder, SimdLevel};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};

fn setup() -> (CodeParams, Vec<u8>, Vec<f32>) {
    let p = CodeParams::for_rate(BaseGraph::Bg1, 384, 1.0 / 3.0).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let payload: Vec<u8> = (0..p.payload_bits).map(|_| rng.gen_range(0..2)).collect();
    let mut tx = vec![0u8; p.tx_bits];
    Encoder::new(p).encode(&payload, &mut tx).unwrap();
    // BPSK over AWGN at Eb/N0 = 1 dB: realistic LLR statistics.
    let sigma2 = 1.0 / (2.0 * p.rate() * 10f64.powf(0.1));
    let noise = Normal::new(0.0, sigma2.sqrt()).unwrap();
    let llr = tx
        .iter()
        .map(|&b| {
            (2.0 * (if b == 0 { 1.0 } else { -1.0 } + noise.sample(&mut rng)) / sigma2) as f32
        })
        .collect();
    (p, payload, llr)
}

fn decode(c: &mut Criterion) {
    let (p, _, llr) = setup();
    let mut g = c.benchmark_group("ldpc_decode_bg1_z384_r1_3_5it");
    g.throughput(Throughput::Elements(p.payload_bits as u64));
    for level in [SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512] {
        if level.resolve() != level {
            continue;
        }
        let cfg = DecoderConfig {
            max_iterations: 5,
            early_termination: false,
            simd: level,
            ..Default::default()
        };
        let mut dec = Decoder::new(p, cfg);
        let mut out = vec![0u8; p.payload_bits];
        g.bench_function(level.to_string(), |b| {
            b.iter(|| dec.decode(black_box(&llr), &mut out).unwrap())
        });
    }
    g.finish();
}

fn encode(c: &mut Criterion) {
    let (p, payload, _) = setup();
    let mut g = c.benchmark_group("ldpc_encode_bg1_z384_r1_3");
    g.throughput(Throughput::Elements(p.payload_bits as u64));
    let mut enc = Encoder::new(p);
    let mut tx = vec![0u8; p.tx_bits];
    g.bench_function("encode", |b| {
        b.iter(|| enc.encode(black_box(&payload), &mut tx).unwrap())
    });
    g.finish();
}

criterion_group!(benches, decode, encode);
criterion_main!(benches);
