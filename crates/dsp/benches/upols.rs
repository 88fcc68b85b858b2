//! Criterion benchmarks of the UPOLS convolver and its parts (B = 256, L = 512 unless
//! named): one 512-point FFT, the split-complex MAC (AVX2 vs scalar), a full SISO block,
//! 2x2 and 4x4 MIMO blocks, and the naive per-sample FIR as the baseline.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use radiohost_dsp::direct::NaiveFir;
use radiohost_dsp::split::{Split, SplitMut};
use radiohost_dsp::{FftPair, MacKernel, MimoConvolver, MimoTaps};
use radiohost_iq::Cf32;
use std::hint::black_box;

const B: usize = 256;
const L: usize = 512;

fn signal(len: usize, seed: f32) -> Vec<Cf32> {
    (0..len)
        .map(|i| {
            Cf32::new(
                ((i as f32 + seed) * 0.37).sin(),
                ((i as f32 - seed) * 0.91).cos(),
            )
        })
        .collect()
}

fn parts(c: &mut Criterion) {
    let mut g = c.benchmark_group("parts");
    let fft = FftPair::new(2 * B);
    let mut scratch = fft.make_scratch();
    let mut buf = signal(2 * B, 1.0);
    g.bench_function("fft512_forward", |b| {
        b.iter(|| fft.forward(black_box(&mut buf), &mut scratch))
    });

    let (xr, xi, hr, hi) = (
        vec![0.5f32; 2 * B],
        vec![0.25f32; 2 * B],
        vec![0.1f32; 2 * B],
        vec![0.2f32; 2 * B],
    );
    for kernel in [MacKernel::Scalar, MacKernel::detect()] {
        let (mut ar, mut ai) = (vec![0.0f32; 2 * B], vec![0.0f32; 2 * B]);
        g.bench_function(format!("mac512_{}", kernel.name()), |b| {
            b.iter(|| {
                kernel.mac(
                    SplitMut {
                        re: &mut ar,
                        im: &mut ai,
                    },
                    Split {
                        re: black_box(&xr),
                        im: &xi,
                    },
                    Split { re: &hr, im: &hi },
                )
            })
        });
    }
    g.finish();
}

fn blocks(c: &mut Criterion) {
    let mut g = c.benchmark_group("block");
    g.throughput(Throughput::Elements(B as u64));
    for (m, n) in [(1usize, 1usize), (2, 2), (4, 4)] {
        let paths = (0..m * n).map(|p| signal(L, p as f32)).collect();
        let taps = MimoTaps::from_paths(m, n, paths).expect("valid taps");
        let mut conv = MimoConvolver::new(B, &taps).expect("valid convolver");
        let inputs: Vec<Vec<Cf32>> = (0..m).map(|i| signal(B, 10.0 + i as f32)).collect();
        let mut outputs = vec![vec![Cf32::new(0.0, 0.0); B]; n];
        g.bench_function(format!("upols_{m}x{n}_B{B}_L{L}"), |b| {
            b.iter(|| {
                let ins: Vec<&[Cf32]> = inputs.iter().map(Vec::as_slice).collect();
                let mut outs: Vec<&mut [Cf32]> =
                    outputs.iter_mut().map(Vec::as_mut_slice).collect();
                conv.process_block(black_box(&ins), &mut outs)
                    .expect("shapes match");
            })
        });
    }
    let taps = MimoTaps::siso(signal(L, 0.0)).expect("valid taps");
    let mut scalar = MimoConvolver::new(B, &taps).expect("valid convolver");
    scalar.set_kernel(MacKernel::Scalar);
    let x = signal(B, 3.0);
    let mut y = vec![Cf32::new(0.0, 0.0); B];
    g.bench_function(format!("upols_1x1_scalar_mac_B{B}_L{L}"), |b| {
        b.iter(|| scalar.process(black_box(&x), &mut y).expect("shapes match"))
    });
    let mut fir = NaiveFir::new(&signal(L, 0.0));
    g.bench_function(format!("naive_fir_B{B}_L{L}"), |b| {
        b.iter_batched_ref(
            || vec![Cf32::new(0.0, 0.0); B],
            |out| fir.process(black_box(&x), out),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, parts, blocks);
criterion_main!(benches);
