//! Times the uplink front end of the 64x16 frame (`configs/64x16.json`) alone, as
//! `UplinkPipeline::process_frame` calls it (its `fft` stage): the pilot symbol
//! through `FrontEnd::frame_rows`, each uplink symbol through its own
//! `FrontEnd::frame_planar` call (the pipeline equalises each symbol in between,
//! which is not timed here). Prints the batched path beside the per-antenna
//! (rustfft) path measured in the same run, and the floor: ci16 samples in once
//! and the data subcarriers out once, at the measured copy bandwidth. For
//! profiling (`perf record`) and A/B runs of the front end on a shared machine:
//! times are on-CPU time of the thread (`/proc/thread-self/schedstat`) beside
//! wall time.
//!
//! `cargo run --release -p radiohost-phy --example front_end_frame [frames]`

use std::hint::black_box;
use std::time::Instant;

use radiohost_iq::Cf32;
use radiohost_phy::config::SymbolKind;
use radiohost_phy::frontend::{FrontEnd, PlanarBuf, SLICE};
use radiohost_phy::generator::Generator;
use radiohost_phy::simd::Isa;
use radiohost_phy::FrameConfig;

/// Frames per timed batch (one timer read per batch).
const BATCH: usize = 10;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let frames: usize = match std::env::args().nth(1) {
        Some(a) => a.parse().map_err(|e| format!("frames `{a}`: {e}"))?,
        None => 300,
    };
    let cfg = FrameConfig::from_json(include_str!("../configs/64x16.json"))?;
    let frame = Generator::new(&cfg).frame(0)?;
    let (m, d, n) = (cfg.antennas, cfg.data_num, cfg.fft_size);
    let pilots = cfg.symbols_of(SymbolKind::Pilot);
    let uplink = cfg.symbols_of(SymbolKind::Uplink);
    let mut front = FrontEnd::new(&cfg);
    let mut rows = vec![Cf32::default(); pilots.len() * m * d];
    let planar = d.div_ceil(SLICE) * m;
    let (mut re, mut im) = (PlanarBuf::zeroed(planar), PlanarBuf::zeroed(planar));
    let mut run = |frames: usize| -> (f64, Option<f64>) {
        let (t, c) = (Instant::now(), cpu_ns());
        for _ in 0..frames {
            black_box(front.frame_rows(black_box(&frame.samples), m, &pilots, &mut rows));
            for sym in uplink.chunks(1) {
                black_box(front.frame_planar(black_box(&frame.samples), m, sym, &mut re, &mut im));
            }
        }
        let wall = t.elapsed().as_secs_f64() * 1e6 / frames as f64;
        let cpu = c
            .zip(cpu_ns())
            .map(|(c0, c1)| (c1 - c0) / 1e3 / frames as f64);
        (wall, cpu)
    };
    let started = Instant::now();
    let batched = measure(&mut run, frames);
    Isa::limit(Isa::Avx2);
    let baseline = measure(&mut run, (frames / 5).max(BATCH));
    let symbols = pilots.len() + uplink.len();
    let bytes = (m * symbols * (4 * n + 8 * d)) as f64;
    let bw = copy_bandwidth();
    let floor = bytes / bw * 1e6;
    println!(
        "front end 64x16 ({symbols} symbols), us per frame (min / median of batches of {BATCH}):"
    );
    println!("  batched      on-CPU {} wall {}", batched.0, batched.1);
    println!(
        "  per-antenna  on-CPU {} wall {} (rustfft, same run)",
        baseline.0, baseline.1
    );
    println!(
        "  batched/per-antenna median on-CPU {:.2}x faster; floor {floor:.0} us ({:.1} MB at {:.1} GB/s copy bandwidth): {:.1}x floor",
        baseline.2 / batched.2,
        bytes / 1e6,
        bw / 1e9,
        batched.2 / floor,
    );
    println!("  whole command {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// (on-CPU "min / median", wall "min / median", median on-CPU or wall us).
fn measure(
    run: &mut impl FnMut(usize) -> (f64, Option<f64>),
    frames: usize,
) -> (String, String, f64) {
    run(BATCH);
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    for _ in 0..frames.div_ceil(BATCH) {
        let (w, c) = run(BATCH);
        wall.push(w);
        cpu.extend(c);
    }
    let stats = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2)
            .map(|&med| (format!("{:.0} / {med:.0}", v[0]), med))
    };
    let (w, wmed) = stats(&mut wall).expect("at least one batch");
    match stats(&mut cpu) {
        Some((c, cmed)) => (c, w, cmed),
        None => ("n/a".into(), w, wmed),
    }
}

/// On-CPU time of this thread, ns: the machine is shared, and time spent
/// descheduled is not the front end's.
fn cpu_ns() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Copy bandwidth (bytes read + written per second) of a 64 MiB buffer, best of 5.
fn copy_bandwidth() -> f64 {
    let n = 8 << 20;
    let src = vec![1u64; n];
    let mut dst = vec![0u64; n];
    (0..5)
        .map(|_| {
            let t = Instant::now();
            dst.copy_from_slice(black_box(&src));
            black_box(&dst);
            (2 * n * 8) as f64 / t.elapsed().as_secs_f64()
        })
        .fold(0.0, f64::max)
}
