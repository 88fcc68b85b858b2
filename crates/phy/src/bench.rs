//! Throughput of each baseband kernel and of a whole 64x16 uplink frame on one core,
//! with the physical floor (the best the core could do) and a baseline measured in
//! the same run: what `radiohost phy bench` runs.
//!
//! Floors are estimates written down before optimising, over rates measured in the
//! same run:
//! * compute-bound kernels: their arithmetic over the core's peak f32 FMA rate, or
//!   for LDPC its i8 vector operations over the peak i8 rate ([`peak`]), reported
//!   as the throughput that rate would give;
//! * memory-bound kernels (demodulation): bytes moved over the copy bandwidth
//!   measured in this run;
//! * a frame stage that both computes and streams (FFT, equalisation, precoding):
//!   the larger of the two.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use num_complex::Complex64;
use radiohost_iq::{Cf32, Ci16};
use radiohost_ldpc::{BaseGraph, CodeParams, Decoder, DecoderConfig, Encoder, MinSum, SimdLevel};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::config::SymbolKind;
use crate::downlink::{DownlinkPipeline, DownlinkUserOutput, UserEmulator};
use crate::generator::{frame_rng, Generator};
use crate::ofdm::OfdmFft;
use crate::qam::{Demodulator, Modulation, Modulator};
use crate::uplink::{ErrorCount, UplinkOutput, UplinkPipeline};
use crate::zf::{zf_detector, ZfScratch};
use crate::{FrameConfig, PhyError};

mod peak;
use peak::Peak;

const CONFIG_64X16: &str = include_str!("../configs/64x16.json");
const CONFIG_64X16_DOWNLINK: &str = include_str!("../configs/64x16_downlink.json");
/// Non-zero entries (edges) of base graph 1: every one is active at rate 1/3.
const BG1_EDGES: f64 = 316.0;

/// One kernel's measurement: its throughput beside the floor.
#[derive(Clone, Debug, Default, Serialize)]
pub struct BenchRow {
    pub name: String,
    pub value: f64,
    pub unit: &'static str,
    pub floor: f64,
    /// A reference implementation measured in the same run: (what, value in `unit`).
    #[serde(skip)]
    pub baseline: Option<(&'static str, f64)>,
    #[serde(skip)]
    pub note: String,
    /// Whole-frame rows: core-milliseconds per frame and the floor's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ms_per_frame: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_ms_per_frame: Option<f64>,
    /// Whole-frame rows: each stage's core time per frame beside its floor.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StageRow>,
}

/// One stage of a whole-frame row.
#[derive(Clone, Debug, Serialize)]
pub struct StageRow {
    pub stage: &'static str,
    pub us_per_frame: f64,
    pub floor_us_per_frame: f64,
    /// What bounds the floor: "compute" (flops at peak), "memory" (bytes at the
    /// measured copy bandwidth) or "ldpc" (the decoder/encoder floor).
    pub floor_basis: &'static str,
}

/// The whole benchmark: the measured peak, the measured copy bandwidth and the rows.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// The core's peak rates, measured in this run, in words.
    pub peak: String,
    /// Measured peak f32 rate, flops per second.
    pub peak_flops: f64,
    /// Measured copy bandwidth, bytes per second.
    pub copy_bandwidth: f64,
    pub rows: Vec<BenchRow>,
}

/// Seconds per call of `f`, measured over about `budget` seconds after one warm-up.
fn time_per_call(budget: f64, mut f: impl FnMut()) -> f64 {
    f();
    let start = Instant::now();
    let mut n = 0u64;
    let limit = Duration::from_secs_f64(budget.max(0.01));
    while start.elapsed() < limit || n < 3 {
        f();
        n += 1;
    }
    start.elapsed().as_secs_f64() / n as f64
}

/// Seconds of the fastest call of `f` in about `budget` seconds (at least five calls)
/// after one warm-up.
fn fastest_call(budget: f64, mut f: impl FnMut()) -> f64 {
    f();
    let start = Instant::now();
    let limit = Duration::from_secs_f64(budget.max(0.01));
    let mut best = f64::INFINITY;
    let mut n = 0;
    while start.elapsed() < limit || n < 5 {
        let t0 = Instant::now();
        f();
        best = best.min(t0.elapsed().as_secs_f64());
        n += 1;
    }
    best
}

/// The steps [`run`] announces to its `progress` callback.
pub const STEPS: u64 = 7;

/// Measure every kernel for about `seconds` each (clamped to 0.01..=60) on this
/// thread; `progress` hears each of the [`STEPS`] steps before it runs. Once
/// `stop` is set (Ctrl-C) no further step starts and the rows so far return.
pub fn run(
    seconds: f64,
    stop: &AtomicBool,
    mut progress: impl FnMut(&str),
) -> Result<BenchReport, PhyError> {
    let t = seconds.clamp(0.01, 60.0);
    let pk = peak::measure(crate::simd::Isa::detect());
    let mut rows = Vec::new();
    let mut next = |what: &str| {
        let go = !stop.load(Ordering::Relaxed);
        if go {
            progress(what);
        }
        go
    };
    let bw = copy_bandwidth(t);
    if next("LDPC decode and encode") {
        rows.extend(ldpc_rows(t, &pk)?);
    }
    if next("FFT") {
        rows.push(fft_row(t, &pk));
        rows.push(batch_fft_row(t, &pk));
    }
    if next("ZF 64x16") {
        rows.push(zf_row(t, &pk));
        rows.push(zf_batch_row(t, &pk));
    }
    for m in [Modulation::Qam16, Modulation::Qam256] {
        if next(&format!("{m:?} demodulation")) {
            rows.push(demod_row(t, m, bw));
        }
    }
    if next("64x16 uplink frame") {
        rows.push(uplink_row(t, &pk, bw)?);
    }
    if next("64x16 downlink frame") {
        rows.push(downlink_row(t, &pk, bw)?);
    }
    Ok(BenchReport {
        peak_flops: pk.flops,
        peak: pk.what,
        copy_bandwidth: bw,
        rows,
    })
}

/// Copy bandwidth (bytes moved, read + write, per second) of a 64 MiB buffer: its
/// fastest copy in the budget, as the peak rates are the best of five tries, so that
/// a neighbour's burst or a preemption during the measurement cannot raise the floors.
fn copy_bandwidth(t: f64) -> f64 {
    let n = 8 << 20;
    let src = vec![1u64; n];
    let mut dst = vec![0u64; n];
    let s = fastest_call(t.min(0.3), || {
        dst.copy_from_slice(black_box(&src));
        black_box(&dst);
    });
    (2 * n * 8) as f64 / s
}

fn ldpc_rows(t: f64, pk: &Peak) -> Result<Vec<BenchRow>, PhyError> {
    let p = CodeParams::for_rate(BaseGraph::Bg1, 384, 1.0 / 3.0)?;
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let payload: Vec<u8> = (0..p.payload_bits)
        .map(|_| rng.gen::<bool>() as u8)
        .collect();
    let mut coded = vec![0u8; p.tx_bits];
    let mut enc = Encoder::new(p);
    enc.encode(&payload, &mut coded)?;
    // BPSK over AWGN at 1 dB Es/N0: realistic LLR magnitudes.
    let sigma2 = 10f64.powf(-0.1);
    let llrs: Vec<f32> = coded
        .iter()
        .map(|&b| {
            let x = 1.0 - 2.0 * b as f64;
            let n: f64 = rng.sample(rand_distr::StandardNormal);
            (2.0 * (x + n * sigma2.sqrt()) / sigma2) as f32
        })
        .collect();
    let mut out = vec![0u8; p.payload_bits];
    let config = |simd| DecoderConfig {
        max_iterations: 5,
        min_sum: MinSum::Normalized(0.75),
        early_termination: false,
        simd,
    };
    // The `--isa` ceiling applies to the decoder too.
    let mut fast = Decoder::try_new(p, config(crate::simd::Isa::ldpc_level()))?;
    let mut scalar = Decoder::try_new(p, config(SimdLevel::Scalar))?;
    let level = fast.simd_level();
    let dec_s = time_per_call(t, || {
        black_box(fast.decode(black_box(&llrs), &mut out).ok());
    });
    let scalar_s = time_per_call(t.min(0.5), || {
        black_box(scalar.decode(black_box(&llrs), &mut out).ok());
    });
    let info = p.payload_bits as f64;
    // Floor: every edge-lane update ~6 i8 vector lane-ops at the peak i8 rate.
    let dec_floor_s = BG1_EDGES * 384.0 * 5.0 * 6.0 / pk.i8_ops;
    let enc_s = time_per_call(t, || {
        black_box(enc.encode(black_box(&payload), &mut coded).ok());
    });
    // Encoder floor: one XOR-accumulate per edge-lane at the peak i8 rate.
    let enc_floor_s = BG1_EDGES * 384.0 / pk.i8_ops;
    Ok(vec![
        BenchRow {
            name: "ldpc_decode_bg1_z384_r1/3_5it".into(),
            value: info / dec_s / 1e6,
            unit: "Mbit/s/core",
            floor: info / dec_floor_s / 1e6,
            baseline: Some(("scalar kernel", info / scalar_s / 1e6)),
            note: format!(
                "{level} kernel, early termination off, {:.1} us/block",
                dec_s * 1e6
            ),
            ..Default::default()
        },
        BenchRow {
            name: "ldpc_encode_bg1_z384_r1/3".into(),
            value: info / enc_s / 1e6,
            unit: "Mbit/s/core",
            floor: info / enc_floor_s / 1e6,
            baseline: None,
            note: format!("{:.1} us/block", enc_s * 1e6),
            ..Default::default()
        },
    ])
}

/// The O(n^2) DFT in f64: the baseline the FFT is measured against (also by
/// the criterion benches).
pub fn naive_dft(x: &[Cf32], out: &mut [Cf32]) {
    let n = x.len();
    for (k, o) in out.iter_mut().enumerate() {
        let mut acc = Complex64::default();
        for (t, v) in x.iter().enumerate() {
            let a = -2.0 * std::f64::consts::PI * ((k * t) % n) as f64 / n as f64;
            acc += Complex64::new(v.re as f64, v.im as f64) * Complex64::new(a.cos(), a.sin());
        }
        *o = Cf32::new(acc.re as f32, acc.im as f32);
    }
}

/// The front end's transform ([`crate::fft::BatchFft`], 16 antennas per call) on
/// the same batch as [`fft_row`], against rustfft timed in the same run.
fn batch_fft_row(t: f64, pk: &Peak) -> BenchRow {
    use crate::fft::{BatchFft, Row, LANES};
    let n = 2048;
    let batch = 64 * 14;
    let isa = crate::simd::Isa::detect();
    let mut fft = BatchFft::new(n).expect("2048 is a power of two");
    let re: Vec<Row> = (0..n).map(|i| Row([(i % 7) as f32; LANES])).collect();
    let im: Vec<Row> = (0..n).map(|i| Row([(i % 5) as f32; LANES])).collect();
    // As in the front end: the input written (there by the ci16 conversion), the
    // transform in place, its bins left in `BatchFft::row` order.
    let rows: Vec<usize> = (0..n).map(|t| fft.input_row(t)).collect();
    let s = time_per_call(t, || {
        for _ in 0..batch / LANES {
            let (xr, xi) = fft.input_mut();
            for ((&at, r), i) in rows.iter().zip(&re).zip(&im) {
                xr[at] = *r;
                xi[at] = *i;
            }
            black_box(fft.run(isa, false));
        }
    });
    // rustfft on the same working set, as the front end's grouped path runs it: 16
    // antennas' symbols written into one buffer, then transformed in place, group by
    // group. (Transforming the whole 14.7 MB batch in place, as `fft_row` does, streams
    // it through the caches: the 1.3-1.9x this row once reported as the batched
    // transform's speed-up on Zen 3 was mostly that.)
    let mut rust = OfdmFft::new(n);
    let (mut source, mut work) = (CacheLines::new(n * LANES), CacheLines::new(n * LANES));
    for (i, x) in source.get_mut().iter_mut().enumerate() {
        *x = Cf32::new((i % 7) as f32, (i % 5) as f32);
    }
    let rust_s = time_per_call(t, || {
        for _ in 0..batch / LANES {
            let work = work.get_mut();
            work.copy_from_slice(black_box(source.get()));
            rust.forward_batch(work);
            black_box(&work);
        }
    });
    let samples = (n * batch) as f64;
    let flops = 5.0 * n as f64 * (n as f64).log2() * batch as f64;
    BenchRow {
        name: "fft16_2048_batch896".into(),
        value: samples / s / 1e6,
        unit: "Msample/s",
        floor: samples / (flops / pk.flops) / 1e6,
        baseline: Some(("rustfft", samples / rust_s / 1e6)),
        note: format!(
            "{} build, 16 antennas per transform: {:.2} us per 2048-point FFT (rustfft {:.2})",
            isa.name(),
            s / batch as f64 * 1e6,
            rust_s / batch as f64 * 1e6
        ),
        ..Default::default()
    }
}

/// `len` complex values starting on a 64-byte boundary. Copies between two of these
/// run at full speed: glibc's `memcpy` (`rep movsb` from 2 KiB up) on the Zen 3 VM
/// moved 2 GB/s instead of 60-70 when the destination lay 4-28 bytes past the
/// source modulo 64 (docs/BENCHMARKS.md, PHY, session 36), which made this row's
/// baseline 3x slower in some runs and not others.
struct CacheLines {
    buf: Vec<Cf32>,
    at: usize,
    len: usize,
}

impl CacheLines {
    fn new(len: usize) -> Self {
        // 8 values of 8 bytes are one line: some start in the first 8 is aligned.
        let buf = vec![Cf32::default(); len + 8];
        let at = buf.as_ptr().align_offset(64);
        assert!(
            at < 8,
            "a Cf32 buffer has a 64-byte boundary in its first line"
        );
        Self { buf, at, len }
    }

    fn get(&self) -> &[Cf32] {
        &self.buf[self.at..self.at + self.len]
    }

    fn get_mut(&mut self) -> &mut [Cf32] {
        &mut self.buf[self.at..self.at + self.len]
    }
}

fn fft_row(t: f64, pk: &Peak) -> BenchRow {
    let n = 2048;
    let batch = 64 * 14; // every antenna and symbol of a 64-antenna frame
    let mut fft = OfdmFft::new(n);
    let mut data: Vec<Cf32> = (0..n * batch)
        .map(|i| Cf32::new((i % 7) as f32, (i % 5) as f32))
        .collect();
    let s = time_per_call(t, || {
        fft.forward_batch(black_box(&mut data));
        black_box(&data);
    });
    let samples = (n * batch) as f64;
    let flops = 5.0 * n as f64 * (n as f64).log2() * batch as f64;
    let mut out = vec![Cf32::default(); n];
    let naive_s = time_per_call(0.05, || {
        naive_dft(black_box(&data[..n]), &mut out);
        black_box(&out);
    });
    BenchRow {
        name: "fft_2048_batch896".into(),
        value: samples / s / 1e6,
        unit: "Msample/s",
        floor: samples / (flops / pk.flops) / 1e6,
        baseline: Some(("naive DFT", n as f64 / naive_s / 1e6)),
        note: format!("{:.2} us per 2048-point FFT", s / batch as f64 * 1e6),
        ..Default::default()
    }
}

fn random_channel(m: usize, k: usize, rng: &mut ChaCha8Rng) -> Vec<Cf32> {
    (0..m * k)
        .map(|_| Cf32::new(rng.gen::<f32>() - 0.5, rng.gen::<f32>() - 0.5))
        .collect()
}

/// Dense f64 pseudo-inverse: Gauss-Jordan inverse of H^H H, then times H^H. The
/// baseline zero-forcing is measured against (also by the criterion benches).
pub fn naive_zf(h: &[Cf32], m: usize, k: usize, w: &mut [Complex64]) {
    let h64: Vec<Complex64> = h
        .iter()
        .map(|c| Complex64::new(c.re as f64, c.im as f64))
        .collect();
    let mut aug = vec![Complex64::default(); k * 2 * k];
    for i in 0..k {
        for j in 0..k {
            aug[i * 2 * k + j] = (0..m).map(|r| h64[i * m + r].conj() * h64[j * m + r]).sum();
        }
        aug[i * 2 * k + k + i] = Complex64::new(1.0, 0.0);
    }
    for c in 0..k {
        let p = aug[c * 2 * k + c];
        for j in 0..2 * k {
            aug[c * 2 * k + j] /= p;
        }
        for r in 0..k {
            if r != c {
                let f = aug[r * 2 * k + c];
                for j in 0..2 * k {
                    let v = aug[c * 2 * k + j];
                    aug[r * 2 * k + j] -= f * v;
                }
            }
        }
    }
    for i in 0..k {
        for r in 0..m {
            w[i * m + r] = (0..k)
                .map(|j| aug[i * 2 * k + k + j] * h64[j * m + r].conj())
                .sum();
        }
    }
}

fn zf_row(t: f64, pk: &Peak) -> BenchRow {
    let (m, k, sc) = (64, 16, 1200);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let h: Vec<Cf32> = (0..sc)
        .flat_map(|_| random_channel(m, k, &mut rng))
        .collect();
    let mut w = vec![Cf32::default(); sc * m * k];
    let mut ng = vec![0.0f32; sc * k];
    let mut scratch = ZfScratch::new(k);
    let s = time_per_call(t, || {
        for i in 0..sc {
            let r = zf_detector(
                &h[i * m * k..(i + 1) * m * k],
                m,
                k,
                &mut scratch,
                &mut w[i * m * k..(i + 1) * m * k],
                &mut ng[i * k..(i + 1) * k],
            );
            black_box(r.ok());
        }
        black_box(&w);
    }) / sc as f64;
    let mut w64 = vec![Complex64::default(); m * k];
    let naive_s = time_per_call(0.1, || {
        naive_zf(black_box(&h[..m * k]), m, k, &mut w64);
        black_box(&w64);
    });
    // Gram (K(K+1)/2 dot products of length M) + two triangular solves on K x M,
    // 8 flops per complex multiply-add.
    let (mf, kf) = (m as f64, k as f64);
    let flops = 8.0 * (kf * (kf + 1.0) / 2.0 * mf + kf * kf * mf);
    BenchRow {
        name: "zf_64x16_per_subcarrier".into(),
        value: 1.0 / s / 1e3,
        unit: "ksubcarrier/s",
        floor: pk.flops / flops / 1e3,
        baseline: Some(("dense f64 inverse", 1.0 / naive_s / 1e3)),
        note: format!("{:.2} us per subcarrier (Cholesky of H^H H, f32)", s * 1e6),
        ..Default::default()
    }
}

/// [`crate::zf::ZfBatch`]: 16 groups' 64x16 ZF per call (one per lane), against
/// the per-subcarrier solver on the same channels in the same run.
fn zf_batch_row(t: f64, pk: &Peak) -> BenchRow {
    use crate::zf::{BatchIo, ZfBatch, BATCH};
    let (m, k) = (64, 16);
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let chans: Vec<Vec<Cf32>> = (0..BATCH).map(|_| random_channel(m, k, &mut rng)).collect();
    let lanes = |f: fn(&Cf32) -> f32| -> Vec<[f32; BATCH]> {
        (0..m * k)
            .map(|e| std::array::from_fn(|l| f(&chans[l][e])))
            .collect()
    };
    let (hr, hi) = (lanes(|c| c.re), lanes(|c| c.im));
    let (mut wtr, mut wti) = (vec![[0.0; BATCH]; m * k], vec![[0.0; BATCH]; m * k]);
    let mut ng = vec![[0.0; BATCH]; k];
    let mut batch = ZfBatch::new(m, k);
    let s = time_per_call(t, || {
        let io = BatchIo {
            hr: black_box(&hr),
            hi: black_box(&hi),
            wtr: &mut wtr,
            wti: &mut wti,
            noise_gain: &mut ng,
        };
        black_box(batch.solve(io, BATCH).ok());
    }) / BATCH as f64;
    let mut scratch = ZfScratch::new(k);
    let (mut w, mut g) = (vec![Cf32::default(); m * k], vec![0.0; k]);
    let single_s = time_per_call(t, || {
        for h in &chans {
            black_box(zf_detector(black_box(h), m, k, &mut scratch, &mut w, &mut g).ok());
        }
    }) / BATCH as f64;
    let (mf, kf) = (m as f64, k as f64);
    let flops = 8.0 * (kf * (kf + 1.0) / 2.0 * mf + kf * kf * mf);
    BenchRow {
        name: "zf_64x16_batch16".into(),
        value: 1.0 / s / 1e3,
        unit: "kgroup/s",
        floor: pk.flops / flops / 1e3,
        baseline: Some(("per-subcarrier solver", 1.0 / single_s / 1e3)),
        note: format!(
            "{:.2} us per group, 16 groups in the lanes ({:.2} us one at a time)",
            s * 1e6,
            single_s * 1e6
        ),
        ..Default::default()
    }
}

/// Full 2-D search over the constellation (the definition of max-log).
fn naive_demod(m: Modulation, table: &[(Cf32, usize)], y: &[Cf32], nv: f32, llrs: &mut [f32]) {
    let qm = m.bits_per_symbol();
    for (s, l) in y.iter().zip(llrs.chunks_exact_mut(qm)) {
        let mut best = [[f32::INFINITY; 2]; 8];
        for &(p, label) in table {
            let d = (s - p).norm_sqr();
            for (b, slot) in best.iter_mut().enumerate().take(qm) {
                let v = (label >> (qm - 1 - b)) & 1;
                slot[v] = slot[v].min(d);
            }
        }
        for (b, o) in l.iter_mut().enumerate() {
            *o = (best[b][1] - best[b][0]) / nv;
        }
    }
}

fn demod_row(t: f64, m: Modulation, bw: f64) -> BenchRow {
    let qm = m.bits_per_symbol();
    let n = 1200 * 16; // one symbol of a 64x16 frame, every user
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let bits: Vec<u8> = (0..n * qm).map(|_| rng.gen::<bool>() as u8).collect();
    let mut y = vec![Cf32::default(); n];
    let md = Modulator::new(m);
    md.modulate(&bits, &mut y);
    for v in y.iter_mut() {
        *v += Cf32::new(rng.gen::<f32>() * 0.05, rng.gen::<f32>() * 0.05);
    }
    let nv = vec![0.01f32; n];
    let mut llrs = vec![0f32; n * qm];
    let dm = Demodulator::new(m);
    let s = time_per_call(t, || {
        dm.demodulate(black_box(&y), &nv, &mut llrs);
        black_box(&llrs);
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
    let naive_n = 512;
    let naive_s = time_per_call(0.1, || {
        naive_demod(
            m,
            &table,
            black_box(&y[..naive_n]),
            0.01,
            &mut llrs[..naive_n * qm],
        )
    }) / naive_n as f64;
    // Memory floor: symbol (8 B) + noise variance (4 B) in, Qm LLRs (4 B each) out.
    let bytes = (8 + 4 + 4 * qm) as f64;
    BenchRow {
        name: format!("demod_{}_maxlog", m.name().to_lowercase()),
        value: n as f64 / s / 1e6,
        unit: "Msymbol/s",
        floor: bw / bytes / 1e6,
        baseline: Some(("full 2-D search", 1.0 / naive_s / 1e6)),
        note: "floor: bytes moved at the measured copy bandwidth".into(),
        ..Default::default()
    }
}

/// `(name, seconds)` of every stage.
type StageSeconds<const S: usize> = [(&'static str, f64); S];

/// Core time per stage and per frame over about `budget` seconds of frames.
fn time_frames<const S: usize>(
    budget: f64,
    mut frame: impl FnMut() -> Result<[(&'static str, Duration); S], PhyError>,
) -> Result<(f64, StageSeconds<S>), PhyError> {
    frame()?;
    let mut sums = [("", 0f64); S];
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed().as_secs_f64() < budget || n < 3 {
        for (sum, (name, d)) in sums.iter_mut().zip(frame()?) {
            *sum = (name, sum.1 + d.as_secs_f64());
        }
        n += 1;
    }
    let per_frame = start.elapsed().as_secs_f64() / n as f64;
    Ok((per_frame, sums.map(|(name, t)| (name, t / n as f64))))
}

/// A whole-frame row from the measured frame and stage times and each stage's floor
/// (`(seconds, basis)`, in the same order as the stages).
fn frame_row<const S: usize>(
    name: &str,
    bits: f64,
    per_frame: f64,
    stages: [(&'static str, f64); S],
    floors: [(f64, &'static str); S],
    note: String,
) -> BenchRow {
    let floor_s: f64 = floors.iter().map(|f| f.0).sum();
    BenchRow {
        name: name.into(),
        value: bits / per_frame / 1e6,
        unit: "Mbit/s/core",
        floor: bits / floor_s / 1e6,
        note,
        ms_per_frame: Some(per_frame * 1e3),
        floor_ms_per_frame: Some(floor_s * 1e3),
        stages: stages
            .iter()
            .zip(floors)
            .map(|(&(stage, t), (f, basis))| StageRow {
                stage,
                us_per_frame: t * 1e6,
                floor_us_per_frame: f * 1e6,
                floor_basis: basis,
            })
            .collect(),
        ..Default::default()
    }
}

/// Floors shared by both directions, in seconds.
struct FrameFloors<'a> {
    cfg: &'a FrameConfig,
    pk: &'a Peak,
    bw: f64,
}

impl FrameFloors<'_> {
    fn compute(&self, flops: f64) -> (f64, &'static str) {
        (flops / self.pk.flops, "compute")
    }
    fn memory(&self, bytes: f64) -> (f64, &'static str) {
        (bytes / self.bw, "memory")
    }
    /// The larger of a stage's compute and memory floors.
    fn bound(&self, flops: f64, bytes: f64) -> (f64, &'static str) {
        let (c, m) = (self.compute(flops), self.memory(bytes));
        if m.0 > c.0 {
            m
        } else {
            c
        }
    }
    /// `symbols` FFTs per antenna (5 N log2 N flops each), each reading its N ci16
    /// time samples (the cyclic prefix skipped) and writing its data subcarriers.
    fn fft(&self, symbols: usize) -> (f64, &'static str) {
        let c = self.cfg;
        let n = c.fft_size as f64;
        let count = c.antennas as f64 * symbols as f64;
        self.bound(
            count * 5.0 * n * n.log2(),
            count * (4.0 * n + 8.0 * c.data_num as f64),
        )
    }
    /// `symbols` IFFTs per antenna, each reading its data subcarriers and writing
    /// the ci16 symbol with its cyclic prefix.
    fn ifft(&self, symbols: usize) -> (f64, &'static str) {
        let c = self.cfg;
        let n = c.fft_size as f64;
        let count = c.antennas as f64 * symbols as f64;
        self.bound(
            count * 5.0 * n * n.log2(),
            count * (8.0 * c.data_num as f64 + 4.0 * (n + c.cp_len as f64)),
        )
    }
    /// Group-centre CSI: per pilot symbol two pilots read per group, user and
    /// antenna, one channel entry written (8 B each).
    fn csi(&self) -> (f64, &'static str) {
        let c = self.cfg;
        let pilots = c.count_of(SymbolKind::Pilot) as f64;
        let entries = (c.zf_groups() * c.users * c.antennas) as f64;
        self.memory(entries * 8.0 * (2.0 * pilots + 1.0))
    }
    /// One Cholesky ZF per group: Gram (K(K+1)/2 dot products of length M) and two
    /// triangular solves on K x M, 8 flops per complex multiply-add.
    fn zf(&self) -> (f64, &'static str) {
        let (m, k) = (self.cfg.antennas as f64, self.cfg.users as f64);
        let per_group = 8.0 * (k * (k + 1.0) / 2.0 * m + k * k * m);
        self.compute(self.cfg.zf_groups() as f64 * per_group)
    }
    /// Equalisation or precoding of `symbols` data symbols: K x M complex MACs per
    /// subcarrier, M antenna and K user symbols (8 B each) moved per subcarrier.
    fn product(&self, symbols: usize) -> (f64, &'static str) {
        let c = self.cfg;
        let per_symbol = c.data_num as f64;
        self.bound(
            symbols as f64 * per_symbol * (c.users * c.antennas) as f64 * 8.0,
            symbols as f64 * per_symbol * (c.users + c.antennas) as f64 * 8.0,
        )
    }
    /// LDPC: every edge-lane update of `iterations` (mean) iterations of `blocks`
    /// blocks at ~6 i8 vector lane-ops, at the peak i8 rate.
    fn decode(&self, blocks: f64, iterations: f64) -> (f64, &'static str) {
        let ops = blocks * BG1_EDGES * self.cfg.code.zc as f64 * iterations * 6.0;
        (ops / self.pk.i8_ops, "ldpc")
    }
    /// LDPC encoding: one XOR-accumulate per edge-lane.
    fn encode(&self, blocks: f64) -> (f64, &'static str) {
        let ops = blocks * BG1_EDGES * self.cfg.code.zc as f64;
        (ops / self.pk.i8_ops, "ldpc")
    }
}

/// The whole 64x16 uplink frame, stage by stage, checked bit-exact against the
/// generator's truth before it is timed.
fn uplink_row(t: f64, pk: &Peak, bw: f64) -> Result<BenchRow, PhyError> {
    let cfg = FrameConfig::from_json(CONFIG_64X16)?;
    let frame = Generator::new(&cfg).frame(0)?;
    let mut ul = UplinkPipeline::new(&cfg)?;
    let mut out = UplinkOutput::for_config(&cfg);
    ul.process_frame(&frame.samples, &mut out)?;
    let errors = ErrorCount::compare(
        &frame.uplink_payload,
        &out.payload,
        &out.blocks,
        cfg.block_payload_bits(),
    );
    if errors.bit_errors > 0 || errors.crc_failures > 0 {
        return Err(PhyError::NotBitExact {
            what: "uplink 64x16",
            bit_errors: errors.bit_errors,
            crc_failures: errors.crc_failures,
        });
    }
    let iterations = out
        .blocks
        .iter()
        .flatten()
        .map(|b| b.iterations as f64)
        .sum::<f64>()
        / errors.blocks.max(1) as f64;
    let (per_frame, stages) = time_frames(t.max(1.0), || {
        ul.process_frame(black_box(&frame.samples), &mut out)?;
        Ok(ul.stages().named())
    })?;
    let f = FrameFloors { cfg: &cfg, pk, bw };
    let ul_syms = cfg.count_of(SymbolKind::Uplink);
    let users_syms = (ul_syms * cfg.users * cfg.data_num) as f64;
    let qm = cfg.modulation.bits_per_symbol() as f64;
    let floors = [
        f.fft(cfg.count_of(SymbolKind::Pilot) + ul_syms),
        f.csi(),
        f.zf(),
        f.product(ul_syms),
        // Equalised symbol (8 B) in, Qm i8 LLRs (the decoder's input) out.
        f.memory(users_syms * (8.0 + qm)),
        f.decode(errors.blocks as f64, iterations),
    ];
    let bits = (cfg.uplink_blocks() * cfg.block_payload_bits() * cfg.users) as f64;
    let note = format!(
        "{:.2} ms per frame, floor {:.2} ms; bit-exact against the generator ({} blocks, {:.2} decoder iterations on average); ZF per {} subcarriers",
        per_frame * 1e3,
        floors.iter().map(|x| x.0).sum::<f64>() * 1e3,
        errors.blocks,
        iterations,
        cfg.zf_block
    );
    Ok(frame_row(
        "uplink_frame_64x16",
        bits,
        per_frame,
        stages,
        floors,
        note,
    ))
}

/// The whole 64x16 downlink frame (precoders from the frame's pilots, encoding,
/// modulation, precoding, IFFT), checked by the emulated users before it is timed.
fn downlink_row(t: f64, pk: &Peak, bw: f64) -> Result<BenchRow, PhyError> {
    let cfg = FrameConfig::from_json(CONFIG_64X16_DOWNLINK)?;
    let frame = Generator::new(&cfg).frame(0)?;
    let mut dl = DownlinkPipeline::new(&cfg);
    let mut tx = vec![Ci16::default(); cfg.antennas * cfg.frame_len()];
    let info = dl.process_frame(&frame.samples, &frame.downlink_payload, &mut tx)?;
    let mut users = UserEmulator::new(&cfg)?;
    let mut got = DownlinkUserOutput::for_config(&cfg);
    let mut rng = frame_rng(cfg.seed, 0, 1);
    users.receive(&tx, &info, &frame.channel, &mut rng, &mut got)?;
    let errors = ErrorCount::compare(
        &frame.downlink_payload,
        &got.payload,
        &got.blocks,
        cfg.block_payload_bits(),
    );
    if errors.bit_errors > 0 || errors.crc_failures > 0 {
        return Err(PhyError::NotBitExact {
            what: "downlink 64x16 (emulated users)",
            bit_errors: errors.bit_errors,
            crc_failures: errors.crc_failures,
        });
    }
    let (per_frame, stages) = time_frames(t.max(1.0), || {
        dl.process_frame(black_box(&frame.samples), &frame.downlink_payload, &mut tx)?;
        Ok(dl.stages().named())
    })?;
    let f = FrameFloors { cfg: &cfg, pk, bw };
    let pilots = cfg.count_of(SymbolKind::Pilot);
    let dl_syms = cfg.count_of(SymbolKind::Downlink);
    let data_syms = dl_syms.saturating_sub(1);
    let (fft, csi, zf) = (f.fft(pilots), f.csi(), f.zf());
    let detector_basis = [fft, csi, zf]
        .into_iter()
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map_or("compute", |b| b.1);
    let users_syms = (data_syms * cfg.users * cfg.data_num) as f64;
    let qm = cfg.modulation.bits_per_symbol() as f64;
    let floors = [
        (fft.0 + csi.0 + zf.0, detector_basis),
        f.encode(errors.blocks as f64),
        // Coded bits in (1 B each), symbols out (8 B).
        f.memory(users_syms * (qm + 8.0)),
        f.product(dl_syms),
        f.ifft(dl_syms),
    ];
    let bits = (cfg.downlink_blocks() * cfg.block_payload_bits() * cfg.users) as f64;
    let note = format!(
        "{:.2} ms per frame, floor {:.2} ms; the emulated users decode it bit-exact ({} blocks); ZF per {} subcarriers",
        per_frame * 1e3,
        floors.iter().map(|x| x.0).sum::<f64>() * 1e3,
        errors.blocks,
        cfg.zf_block
    );
    Ok(frame_row(
        "downlink_frame_64x16",
        bits,
        per_frame,
        stages,
        floors,
        note,
    ))
}
