//! `radiohost chanemu bench`: per-block timing of the UPOLS convolver beside a naive
//! FIR, GNU Radio's fft_filter_ccc and the FLOP floor.

use std::process::Command as Process;
use std::time::Instant;

use anyhow::{bail, Result};
use clap::Args;
use hdrhistogram::Histogram;
use radiohost_dsp::direct::NaiveFir;
use radiohost_dsp::split::fma_probe;
use radiohost_dsp::{MacKernel, MimoConvolver, MimoTaps};
use radiohost_iq::Cf32;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::Ports;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Blocks timed per UPOLS configuration (the naive FIR runs 1/500 of them).
    #[arg(long, default_value_t = 100_000)]
    pub blocks: usize,
    /// Block length B.
    #[arg(long, default_value_t = 256)]
    pub block: usize,
    /// Filter length L.
    #[arg(long, default_value_t = 512)]
    pub taps: usize,
    /// Samples pushed through GNU Radio's flowgraph per run.
    #[arg(long, default_value_t = 50_000_000)]
    pub gnuradio_samples: u64,
    /// Skip the GNU Radio comparison.
    #[arg(long)]
    pub no_gnuradio: bool,
    /// Print a JSON array of rows instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// One benchmark row (the `--json` schema).
#[derive(Serialize, Debug, Clone)]
struct Row {
    name: String,
    ports: String,
    block: usize,
    taps: usize,
    median_ns: Option<f64>,
    p999_ns: Option<f64>,
    max_ns: Option<f64>,
    /// Samples per port per second at the median block time (one core).
    msps: f64,
    /// Back to back, fastest tenth of the run (tables only: on a shared machine this
    /// mostly measures how much of the core we were given).
    #[serde(skip)]
    b2b_msps: Option<f64>,
}

fn random_blocks(rng: &mut ChaCha8Rng, count: usize, len: usize) -> Vec<Vec<Cf32>> {
    (0..count)
        .map(|_| {
            (0..len)
                .map(|_| Cf32::new(rng.gen_range(-1.0..1.0), rng.gen_range(-1.0..1.0)))
                .collect()
        })
        .collect()
}

fn histogram() -> Histogram<u64> {
    // 1 ns .. 60 s at 3 significant digits; the bounds are constants, so this cannot fail.
    Histogram::new_with_bounds(1, 60_000_000_000, 3).unwrap_or_else(|_| unreachable!())
}

fn row_from(
    name: String,
    ports: Ports,
    block: usize,
    taps: usize,
    hist: &Histogram<u64>,
    b2b_ns: Option<f64>,
) -> Row {
    let median = hist.value_at_quantile(0.5) as f64;
    Row {
        name,
        ports: format!("{}x{}", ports.inputs, ports.outputs),
        block,
        taps,
        median_ns: Some(median),
        p999_ns: Some(hist.value_at_quantile(0.999) as f64),
        max_ns: Some(hist.max() as f64),
        msps: block as f64 / median * 1e3,
        b2b_msps: b2b_ns.map(|ns| block as f64 / ns * 1e3),
    }
}

/// Largest port count per side the benchmark runs (4x4).
const MAX_BENCH_PORTS: usize = 4;

/// Times `blocks` UPOLS blocks one by one (histogram) and then back to back (sustained).
fn bench_upols(
    ports: Ports,
    block: usize,
    taps: usize,
    blocks: usize,
    kernel: MacKernel,
) -> Result<Row> {
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let paths = random_blocks(&mut rng, ports.inputs * ports.outputs, taps);
    let response = MimoTaps::from_paths(ports.inputs, ports.outputs, paths)?;
    let mut conv = MimoConvolver::new(block, &response)?;
    conv.set_kernel(kernel);
    let inputs: Vec<Vec<Vec<Cf32>>> = (0..16)
        .map(|_| random_blocks(&mut rng, ports.inputs, block))
        .collect();
    let mut outputs = vec![vec![Cf32::new(0.0, 0.0); block]; ports.outputs];
    let step = |k: usize, conv: &mut MimoConvolver, outputs: &mut [Vec<Cf32>]| -> Result<()> {
        // Port slices on the stack, so the timed step allocates nothing.
        let block_in = &inputs[k % inputs.len()];
        let ins: [&[Cf32]; MAX_BENCH_PORTS] =
            std::array::from_fn(|i| block_in.get(i).map_or(&[][..], Vec::as_slice));
        let n = outputs.len();
        let mut it = outputs.iter_mut();
        let mut outs: [&mut [Cf32]; MAX_BENCH_PORTS] =
            std::array::from_fn(|_| it.next().map_or(&mut [][..], Vec::as_mut_slice));
        conv.process_block(&ins[..block_in.len()], &mut outs[..n])?;
        Ok(())
    };
    for k in 0..blocks.min(2000) {
        step(k, &mut conv, &mut outputs)?;
    }
    let mut hist = histogram();
    for k in 0..blocks {
        let t = Instant::now();
        step(k, &mut conv, &mut outputs)?;
        hist.saturating_record(t.elapsed().as_nanos() as u64);
    }
    let chunk = (blocks / 10).max(1);
    let mut best = f64::INFINITY;
    for c in 0..blocks / chunk {
        let t = Instant::now();
        for k in c * chunk..(c + 1) * chunk {
            step(k, &mut conv, &mut outputs)?;
        }
        best = best.min(t.elapsed().as_nanos() as f64 / chunk as f64);
    }
    std::hint::black_box(&outputs);
    let name = if kernel == MacKernel::Scalar {
        "upols scalar MAC"
    } else {
        "upols"
    };
    Ok(row_from(name.into(), ports, block, taps, &hist, Some(best)))
}

fn bench_naive(block: usize, taps: usize, blocks: usize) -> Row {
    let mut rng = ChaCha8Rng::seed_from_u64(43);
    let h = random_blocks(&mut rng, 1, taps).remove(0);
    let mut fir = NaiveFir::new(&h);
    let inputs = random_blocks(&mut rng, 16, block);
    let mut out = vec![Cf32::new(0.0, 0.0); block];
    let mut hist = histogram();
    for k in 0..blocks {
        let t = Instant::now();
        fir.process(&inputs[k % 16], &mut out);
        hist.saturating_record(t.elapsed().as_nanos() as u64);
    }
    std::hint::black_box(&out);
    row_from(
        "naive FIR (per sample)".into(),
        Ports {
            inputs: 1,
            outputs: 1,
        },
        block,
        taps,
        &hist,
        None,
    )
}

/// Measured FMA peak of one core in FLOP/s: the best of many short runs, so time slices
/// lost to other processes on a shared machine do not count.
fn measure_peak_flops() -> f64 {
    let iters = 100_000u64;
    let mut best = f64::INFINITY;
    for _ in 0..200 {
        let t = Instant::now();
        std::hint::black_box(fma_probe(iters));
        best = best.min(t.elapsed().as_secs_f64());
    }
    (iters * 160) as f64 / best
}

/// FLOPs of one UPOLS block: (M + N) FFTs of 2B points at 5 N log2 N, M*N*P complex MACs
/// of 2B bins at 8 FLOPs.
fn upols_flops(ports: Ports, block: usize, taps: usize) -> f64 {
    let n = (2 * block) as f64;
    let ffts = (ports.inputs + ports.outputs) as f64 * 5.0 * n * n.log2();
    let macs = (ports.inputs * ports.outputs * taps.div_ceil(block)) as f64 * n * 8.0;
    ffts + macs
}

const GNURADIO_SCRIPT: &str = r#"
import sys, time
import numpy as np
from gnuradio import gr, blocks, filter
n, ntaps = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(1)
taps = (rng.standard_normal(ntaps) + 1j * rng.standard_normal(ntaps)).astype(np.complex64).tolist()
data = (rng.standard_normal(1 << 16) + 1j * rng.standard_normal(1 << 16)).astype(np.complex64).tolist()
def run(with_filter):
    tb = gr.top_block()
    src = blocks.vector_source_c(data, True)
    head = blocks.head(gr.sizeof_gr_complex, n)
    sink = blocks.null_sink(gr.sizeof_gr_complex)
    if with_filter:
        f = filter.fft_filter_ccc(1, taps, 1)
        tb.connect(src, head, f, sink)
    else:
        tb.connect(src, head, sink)
    t = time.process_time(); tb.run(); return time.process_time() - t
for _ in range(3):
    print(run(True), run(False), flush=True)
"#;

/// Runs GNU Radio 3.10's fft_filter_ccc in a flowgraph under Debian's python3. Returns the
/// flowgraph row and the filter-only estimate (flowgraph time minus the same flowgraph
/// without the filter), or why it could not run. Times are the process's CPU time (all
/// threads), so on a shared machine the time slices given to others do not count,
/// as with our per-block medians.
fn bench_gnuradio(samples: u64, taps: usize) -> Result<Vec<Row>, String> {
    let python = "/usr/bin/python3";
    let out = Process::new(python)
        .arg("-c")
        .arg(GNURADIO_SCRIPT)
        .arg(samples.to_string())
        .arg(taps.to_string())
        .output()
        .map_err(|e| format!("{python} could not be started: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().last().unwrap_or("no message");
        return Err(format!(
            "GNU Radio did not run ({last}); install it with `apt-get install -y --no-install-recommends gnuradio`"
        ));
    }
    let mut with = Vec::new();
    let mut without = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: Vec<f64> = line
            .split_whitespace()
            .filter_map(|s| s.parse().ok())
            .collect();
        if let [a, b] = v[..] {
            with.push(a);
            without.push(b);
        }
    }
    if with.is_empty() {
        return Err("GNU Radio printed no timings".into());
    }
    // Best of three, like the fastest tenth above: the least disturbed run.
    let best = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let (tw, to) = (best(&with), best(&without));
    // fft_filter_ccc uses an FFT of 2^ceil(log2(2 L)) points and keeps fft - L + 1 samples.
    let fft = (2 * taps).next_power_of_two();
    let gr_block = fft - taps + 1;
    let per_block = |secs: f64| secs / samples as f64 * gr_block as f64 * 1e9;
    let row = |name: &str, secs: f64| Row {
        name: name.into(),
        ports: "1x1".into(),
        block: gr_block,
        taps,
        median_ns: Some(per_block(secs)),
        p999_ns: None,
        max_ns: None,
        msps: samples as f64 / secs / 1e6,
        b2b_msps: Some(samples as f64 / secs / 1e6),
    };
    let mut rows = vec![row("gnuradio fft_filter_ccc flowgraph", tw)];
    if tw > to {
        rows.push(row("gnuradio fft_filter_ccc filter only (est.)", tw - to));
    }
    Ok(rows)
}

pub fn run_bench(a: BenchArgs) -> Result<()> {
    if a.block == 0 || a.taps == 0 || a.blocks == 0 {
        bail!("--block, --taps and --blocks must be at least 1");
    }
    let (b, l) = (a.block, a.taps);
    let kernel = MacKernel::detect();
    let configs = [(1, 1), (2, 2), (4, 4)].map(|(inputs, outputs)| Ports { inputs, outputs });
    let mut rows = Vec::new();
    for &ports in &configs {
        let blocks = a.blocks / (ports.inputs * ports.outputs).max(1);
        rows.push(bench_upols(ports, b, l, blocks.max(100), kernel)?);
    }
    rows.push(bench_upols(
        configs[0],
        b,
        l,
        (a.blocks / 4).max(100),
        MacKernel::Scalar,
    )?);
    rows.push(bench_naive(b, l, (a.blocks / 500).max(20)));
    let peak = measure_peak_flops();
    for &ports in &configs {
        let ns = upols_flops(ports, b, l) / peak * 1e9;
        rows.push(Row {
            name: "floor (FFTs + MACs at FMA peak)".into(),
            ports: format!("{}x{}", ports.inputs, ports.outputs),
            block: b,
            taps: l,
            median_ns: Some(ns),
            p999_ns: Some(ns),
            max_ns: Some(ns),
            msps: b as f64 / ns * 1e3,
            b2b_msps: None,
        });
    }
    let gnuradio = if a.no_gnuradio {
        Err("skipped (--no-gnuradio)".to_string())
    } else {
        bench_gnuradio(a.gnuradio_samples, l)
    };
    if let Ok(gr) = &gnuradio {
        rows.extend(gr.iter().cloned());
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    print_bench(&rows, kernel, peak, &gnuradio);
    Ok(())
}

fn print_bench(rows: &[Row], kernel: MacKernel, peak: f64, gnuradio: &Result<Vec<Row>, String>) {
    let fmt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    let siso = rows
        .iter()
        .find(|r| r.name == "upols" && r.ports == "1x1")
        .map_or(f64::NAN, |r| r.msps);
    println!("UPOLS channel emulation benchmark (one core, MAC kernel {}, FMA peak {:.1} GFLOP/s measured)", kernel.name(), peak / 1e9);
    println!(
        "{:<44} {:>5} {:>5} {:>5} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9}",
        "name",
        "ports",
        "block",
        "taps",
        "median_ns",
        "p999_ns",
        "max_ns",
        "MSa/s",
        "upols/it",
        "b2b MSa/s"
    );
    for r in rows {
        let same_ports = rows
            .iter()
            .find(|u| u.name == "upols" && u.ports == r.ports)
            .map_or(siso, |u| u.msps);
        println!(
            "{:<44} {:>5} {:>5} {:>5} {:>10} {:>10} {:>10} {:>9.1} {:>8.2}x {:>9}",
            r.name,
            r.ports,
            r.block,
            r.taps,
            fmt(r.median_ns),
            fmt(r.p999_ns),
            fmt(r.max_ns),
            r.msps,
            same_ports / r.msps,
            r.b2b_msps.map_or("-".to_string(), |v| format!("{v:.1}"))
        );
    }
    println!("MSa/s: B / median block time, per port on one core (MIMO: each of the M inputs runs at this rate).");
    println!("b2b MSa/s: back to back, fastest tenth of the run (GNU Radio: CPU time of the whole run, best of 3).");
    println!("upols/it: UPOLS throughput at the same ports over that row's (below 1x for the floor: how far from it).");
    if let Err(why) = gnuradio {
        println!("GNU Radio: not compared: {why}");
    }
}
