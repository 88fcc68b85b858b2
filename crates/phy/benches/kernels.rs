//! Criterion benches of the phy kernels, each beside a naive baseline measured in
//! the same run (ratios in docs/BENCHMARKS.md, PHY section).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use num_complex::Complex64;
use radiohost_iq::Cf32;
use radiohost_phy::bench::{naive_dft, naive_zf};
use radiohost_phy::crc::{crc_bits, CrcKind};
use radiohost_phy::fft::{BatchFft, Row, LANES};
use radiohost_phy::generator::Generator;
use radiohost_phy::ofdm::OfdmFft;
use radiohost_phy::qam::{Demodulator, Modulation, Modulator};
use radiohost_phy::scramble::GoldSequence;
use radiohost_phy::simd::Isa;
use radiohost_phy::uplink::{UplinkOutput, UplinkPipeline};
use radiohost_phy::zf::{zf_detector, ZfScratch};
use radiohost_phy::FrameConfig;

fn lcg(seed: &mut u64) -> f32 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
}

fn fft(c: &mut Criterion) {
    let mut g = c.benchmark_group("fft");
    for n in [256usize, 2048] {
        let batch = 64;
        let mut fft = OfdmFft::new(n);
        let mut data: Vec<Cf32> = (0..n * batch).map(|i| Cf32::new(i as f32, 1.0)).collect();
        g.throughput(Throughput::Elements((n * batch) as u64));
        g.bench_function(BenchmarkId::new("rustfft_batch64", n), |b| {
            b.iter(|| fft.forward_batch(black_box(&mut data)))
        });
    }
    // The front end's 16-antenna transform (natural order in and out, so the
    // copies in and out are timed too), per 16 transforms of rustfft above.
    let isa = Isa::detect();
    for n in [512usize, 1024, 2048, 4096] {
        let mut fft = BatchFft::new(n).expect("a power of two");
        let mut re: Vec<Row> = (0..n).map(|i| Row([(i % 7) as f32; LANES])).collect();
        let mut im: Vec<Row> = (0..n).map(|i| Row([(i % 5) as f32; LANES])).collect();
        g.throughput(Throughput::Elements((n * LANES) as u64));
        for inverse in [false, true] {
            let id = format!(
                "{}_{}",
                if inverse { "inverse" } else { "forward" },
                isa.name()
            );
            g.bench_function(BenchmarkId::new(format!("batch16_{id}"), n), |b| {
                b.iter(|| fft.transform(isa, inverse, black_box(&mut re), black_box(&mut im)))
            });
        }
    }
    let n = 256;
    let x: Vec<Cf32> = (0..n).map(|i| Cf32::new(i as f32, 1.0)).collect();
    let mut out = vec![Cf32::default(); n];
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function(BenchmarkId::new("naive_dft", n), |b| {
        b.iter(|| naive_dft(black_box(&x), &mut out))
    });
    g.finish();
}

fn zf(c: &mut Criterion) {
    let mut g = c.benchmark_group("zf");
    for (m, k) in [(16usize, 4usize), (64, 16)] {
        let mut s = 5u64;
        let h: Vec<Cf32> = (0..m * k)
            .map(|_| Cf32::new(lcg(&mut s), lcg(&mut s)))
            .collect();
        let mut w = vec![Cf32::default(); m * k];
        let mut ng = vec![0.0; k];
        let mut scratch = ZfScratch::new(k);
        let mut w64 = vec![Complex64::default(); m * k];
        let id = format!("{m}x{k}");
        g.bench_function(BenchmarkId::new("cholesky_f32", &id), |b| {
            b.iter(|| zf_detector(black_box(&h), m, k, &mut scratch, &mut w, &mut ng).ok())
        });
        g.bench_function(BenchmarkId::new("dense_inverse_f64", &id), |b| {
            b.iter(|| naive_zf(black_box(&h), m, k, &mut w64))
        });
    }
    g.finish();
}

fn demod(c: &mut Criterion) {
    let mut g = c.benchmark_group("demod");
    let n = 4096;
    for m in [
        Modulation::Qpsk,
        Modulation::Qam16,
        Modulation::Qam64,
        Modulation::Qam256,
    ] {
        let qm = m.bits_per_symbol();
        let bits: Vec<u8> = (0..n * qm).map(|i| ((i * 7 + i / 3) % 2) as u8).collect();
        let mut y = vec![Cf32::default(); n];
        let md = Modulator::new(m);
        md.modulate(&bits, &mut y);
        let nv = vec![0.05f32; n];
        let mut llrs = vec![0f32; n * qm];
        let dm = Demodulator::new(m);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(BenchmarkId::new("maxlog_per_axis", m.name()), |b| {
            b.iter(|| dm.demodulate(black_box(&y), &nv, &mut llrs))
        });
        let table: Vec<(Cf32, usize)> = (0..1usize << qm)
            .map(|label| {
                let b: Vec<u8> = (0..qm)
                    .map(|i| ((label >> (qm - 1 - i)) & 1) as u8)
                    .collect();
                let mut p = [Cf32::default()];
                md.modulate(&b, &mut p);
                (p[0], label)
            })
            .collect();
        g.bench_function(BenchmarkId::new("full_2d_search", m.name()), |b| {
            b.iter(|| {
                for (s, l) in black_box(&y).iter().zip(llrs.chunks_exact_mut(qm)) {
                    let mut best = [[f32::INFINITY; 2]; 8];
                    for &(p, label) in &table {
                        let d = (s - p).norm_sqr();
                        for (bit, slot) in best.iter_mut().enumerate().take(qm) {
                            let v = (label >> (qm - 1 - bit)) & 1;
                            slot[v] = slot[v].min(d);
                        }
                    }
                    for (bit, o) in l.iter_mut().enumerate() {
                        *o = (best[bit][1] - best[bit][0]) / 0.05;
                    }
                }
            })
        });
    }
    g.finish();
}

fn bits_kernels(c: &mut Criterion) {
    let mut g = c.benchmark_group("bits");
    let bits: Vec<u8> = (0..8448).map(|i| ((i * 13 + i / 5) % 2) as u8).collect();
    g.throughput(Throughput::Elements(bits.len() as u64));
    g.bench_function("crc24a_table", |b| {
        b.iter(|| crc_bits(CrcKind::Crc24A, black_box(&bits)))
    });
    g.bench_function("crc24a_bit_serial", |b| {
        b.iter(|| {
            black_box(&bits).iter().fold(0u32, |reg, &bit| {
                let fb = ((reg >> 23) & 1) ^ bit as u32;
                let s = (reg << 1) & 0xFF_FFFF;
                if fb != 0 {
                    s ^ CrcKind::Crc24A.poly()
                } else {
                    s
                }
            })
        })
    });
    let mut buf = bits.clone();
    g.bench_function("scramble_gold_word", |b| {
        b.iter(|| GoldSequence::new(0x1234).scramble_bits(black_box(&mut buf)))
    });
    g.bench_function("scramble_gold_bitwise", |b| {
        b.iter(|| {
            // Straight from 38.211: two shift registers advanced one bit at a time.
            let (mut x1, mut x2) = (1u32, 0x1234u32);
            for n in 0..1600 + buf.len() {
                let c = (x1 ^ x2) & 1;
                let n1 = ((x1 >> 3) ^ x1) & 1;
                let n2 = ((x2 >> 3) ^ (x2 >> 2) ^ (x2 >> 1) ^ x2) & 1;
                x1 = (x1 >> 1) | (n1 << 30);
                x2 = (x2 >> 1) | (n2 << 30);
                if n >= 1600 {
                    buf[n - 1600] ^= c as u8;
                }
            }
        })
    });
    g.finish();
}

fn uplink(c: &mut Criterion) {
    let mut g = c.benchmark_group("uplink_frame");
    g.sample_size(10);
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/16x4.json");
    let cfg = FrameConfig::load(std::path::Path::new(path)).expect("16x4 config");
    let frame = Generator::new(&cfg).frame(0).expect("frame");
    let mut ul = UplinkPipeline::new(&cfg).expect("pipeline");
    let mut out = UplinkOutput::for_config(&cfg);
    g.bench_function("16x4_1024fft", |b| {
        b.iter(|| ul.process_frame(black_box(&frame.samples), &mut out).ok())
    });
    g.finish();
}

criterion_group!(benches, fft, zf, demod, bits_kernels, uplink);
criterion_main!(benches);
