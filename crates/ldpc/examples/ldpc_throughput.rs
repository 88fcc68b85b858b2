//! Decoder throughput for BG1 Zc=384 rate 1/3, exactly 5 iterations (no early
//! termination), at every SIMD level this CPU has, with the ratio to the scalar kernel
//! measured in the same run and the instruction-throughput floor beside it; then the
//! default configuration (early termination, up to 10 iterations) and the encoder.
//!
//! `cargo run --release -p radiohost-ldpc --example ldpc_throughput [scalar|avx2|avx512]`

use radiohost_ldpc::{BaseGraph, CodeParams, Decoder, DecoderConfig, Encoder, SimdLevel};
use std::time::Instant;

/// CPU time of this thread: on a shared, oversubscribed machine wall time also counts
/// the time other processes held the core; "per core" figures use CPU time.
fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer to a timespec; CLOCK_THREAD_CPUTIME_ID is always available on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn cpu_ghz() -> f64 {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("cpu MHz"))
                .and_then(|l| l.split(':').nth(1))
                .and_then(|v| v.trim().parse::<f64>().ok())
        })
        .map(|mhz| mhz / 1000.0)
        .unwrap_or(2.5)
}

/// (CPU seconds per block, wall seconds per block, mean iterations, payload correct)
fn measure(dec: &mut Decoder, llr: &[f32], payload: &[u8], reps: usize) -> (f64, f64, f64, bool) {
    let mut out = vec![0u8; payload.len()];
    for _ in 0..reps.div_ceil(10) {
        dec.decode(llr, &mut out).unwrap();
    }
    let (t, c) = (Instant::now(), thread_cpu_s());
    let mut iters = 0;
    for _ in 0..reps {
        iters += dec.decode(llr, &mut out).unwrap().iterations;
    }
    let cpu = (thread_cpu_s() - c) / reps as f64;
    let wall = t.elapsed().as_secs_f64() / reps as f64;
    (cpu, wall, iters as f64 / reps as f64, out == payload)
}

/// The uplink frame's code (BG1 Zc=72 rate 1/3, `phy/configs/64x16.json`): per-block
/// costs dominate at this size. Already-quantised LLRs (`decode_quantized`, as the
/// uplink decodes), the same pseudo-noise as above, best SIMD level.
fn uplink_code() {
    let p = CodeParams::for_rate(BaseGraph::Bg1, 72, 1.0 / 3.0).unwrap();
    let payload: Vec<u8> = (0..p.payload_bits)
        .map(|i| ((i * 7919) >> 3) as u8 & 1)
        .collect();
    let mut tx = vec![0u8; p.tx_bits];
    Encoder::new(p).encode(&payload, &mut tx).unwrap();
    let llr: Vec<i8> = tx
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            let n = ((i.wrapping_mul(2654435761) >> 7) % 1000) as f32 / 1000.0 - 0.5;
            ((if b == 0 { 1.0 } else { -1.0 } + 1.6 * n) * 12.0).round() as i8
        })
        .collect();
    for (what, early_termination, max_iterations) in [
        ("5 iterations, no early termination", false, 5),
        ("early termination, <= 10 it", true, 10),
    ] {
        let cfg = DecoderConfig {
            max_iterations,
            early_termination,
            ..Default::default()
        };
        let mut dec = Decoder::new(p, cfg);
        let mut out = vec![0u8; p.payload_bits];
        let reps = 5000;
        let mut iters = 0;
        let c = thread_cpu_s();
        for _ in 0..reps {
            iters += dec.decode_quantized(&llr, &mut out).unwrap().iterations;
        }
        let per = (thread_cpu_s() - c) / reps as f64;
        println!(
            "BG1 Zc=72 (uplink code, {}, {what}): {:.2} us/block CPU, {:.2} iterations, ok={}",
            dec.simd_level(),
            per * 1e6,
            iters as f64 / reps as f64,
            out == payload
        );
    }
}

fn main() {
    let p = CodeParams::for_rate(BaseGraph::Bg1, 384, 1.0 / 3.0).unwrap();
    let payload: Vec<u8> = (0..p.payload_bits)
        .map(|i| ((i * 7919) >> 3) as u8 & 1)
        .collect();
    let mut tx = vec![0u8; p.tx_bits];
    let mut enc = Encoder::new(p);
    enc.encode(&payload, &mut tx).unwrap();
    // Noisy but decodable LLRs (deterministic pseudo-noise, no sign errors).
    let llr: Vec<f32> = tx
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            let n = ((i.wrapping_mul(2654435761) >> 7) % 1000) as f32 / 1000.0 - 0.5;
            (if b == 0 { 1.0 } else { -1.0 } + 1.6 * n) * 3.0
        })
        .collect();
    let only = std::env::args().nth(1);
    let k = p.payload_bits as f64;
    let edges = 316.0 * 384.0; // edge-lane updates per iteration
    let ghz = cpu_ghz();
    println!(
        "BG1 Zc=384 K={} E={} (rate 1/3), 5 iterations, no early termination; CPU {ghz:.2} GHz",
        p.payload_bits, p.tx_bits
    );
    let mut base = None;
    for level in [SimdLevel::Scalar, SimdLevel::Avx2, SimdLevel::Avx512] {
        if only.as_ref().is_some_and(|o| *o != level.to_string()) {
            continue;
        }
        if level.resolve() != level {
            println!("{level:>7}: not supported by this CPU");
            continue;
        }
        let cfg = DecoderConfig {
            max_iterations: 5,
            early_termination: false,
            simd: level,
            ..Default::default()
        };
        let reps = if level == SimdLevel::Scalar { 30 } else { 500 };
        let (cpu, wall, _, ok) = measure(&mut Decoder::new(p, cfg), &llr, &payload, reps);
        let mbps = k / cpu / 1e6;
        let ratio = base.map(|b| mbps / b).unwrap_or(1.0);
        base.get_or_insert(mbps);
        // Floor: vector instructions per edge and vector (the row kernels' counts, the
        // extrinsic values held in registers: AVX-512 ~19: 2 loads, 14 ALU plus ~1
        // per-vector ALU share (correction lookup, signs), 2 stores plus a mirror store
        // for a third of the vectors; AVX2 ~24: the same loads and stores, ~19 ALU
        // without mask registers; single-edge savings not counted), 4 per cycle, lanes
        // per vector; scalar: ~12 instructions per edge-lane update.
        let (lanes, instr) = match level {
            SimdLevel::Avx512 => (64.0, 19.0),
            SimdLevel::Avx2 => (32.0, 24.0),
            _ => (1.0, 12.0),
        };
        let floor_s = edges * 5.0 * instr / (lanes * 4.0 * ghz * 1e9);
        println!(
            "{level:>7}: {:8.1} us/block CPU ({:7.1} wall)  {mbps:7.1} Mbit/s/core  x{ratio:5.1} vs scalar  floor {:6.1} us = {:7.1} Mbit/s  measured/floor {:.2}  ok={ok}",
            cpu * 1e6,
            wall * 1e6,
            floor_s * 1e6,
            k / floor_s / 1e6,
            cpu / floor_s,
        );
    }
    let mut dec = Decoder::new(p, DecoderConfig::default());
    let (cpu, _, it, ok) = measure(&mut dec, &llr, &payload, 500);
    println!(
        "default ({}, early termination, <= 10 it): {:.1} us/block CPU, {:.2} iterations, {:.1} Mbit/s/core, ok={ok}",
        dec.simd_level(),
        cpu * 1e6,
        it,
        k / cpu / 1e6
    );
    uplink_code();
    let reps = 2000;
    let c = thread_cpu_s();
    for _ in 0..reps {
        enc.encode(&payload, &mut tx).unwrap();
    }
    let per = (thread_cpu_s() - c) / reps as f64;
    println!(
        "encode: {:.1} us/block CPU, {:.1} Mbit/s/core",
        per * 1e6,
        k / per / 1e6
    );
}
