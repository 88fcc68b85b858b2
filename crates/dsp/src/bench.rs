//! The UPOLS convolver benchmark: per-block timing (SISO, 2x2, 4x4) beside a
//! naive FIR, the FLOP floor at the measured FMA peak, and GNU Radio's
//! fft_filter_ccc (run under python3 when installed), all in one run.

use std::process::Command as Process;
use std::time::Instant;

use radiohost_iq::Cf32;
use radiohost_rt::stats::LatencyHistogram;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::direct::NaiveFir;
use crate::split::fma_probe;
use crate::{DspError, MacKernel, MimoConvolver, MimoTaps};

/// What to measure.
#[derive(Clone, Debug, Serialize)]
pub struct BenchConfig {
    /// Blocks timed per UPOLS configuration (the naive FIR runs 1/500 of them).
    pub blocks: usize,
    /// Block length B.
    pub block: usize,
    /// Filter length L.
    pub taps: usize,
    /// Samples pushed through GNU Radio's flowgraph per run; `None` skips it.
    pub gnuradio_samples: Option<u64>,
}

/// The benchmark's result.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub rows: Vec<Row>,
    pub kernel: &'static str,
    /// Measured FMA peak of one core, FLOP/s.
    pub peak_flops: f64,
    /// Why GNU Radio was not compared, if it was not.
    pub gnuradio_skipped: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("block, taps and blocks must be at least 1")]
    Empty,
    #[error(transparent)]
    Dsp(#[from] DspError),
}

/// Why the GNU Radio comparison rows are missing (printed in the report).
#[derive(Debug, thiserror::Error)]
enum GnuRadioSkipped {
    #[error("skipped (--no-gnuradio)")]
    NotAsked,
    #[error("{python} could not be started: {source}; GNU Radio runs under Debian's python3")]
    NoPython {
        python: &'static str,
        source: std::io::Error,
    },
    #[error("GNU Radio did not run ({0}); install it with `apt-get install -y --no-install-recommends gnuradio`")]
    Failed(String),
    #[error("GNU Radio printed no timings")]
    NoTimings,
}

/// (inputs, outputs) of a benchmark configuration.
type Ports = (usize, usize);

/// One benchmark row (the `--json` schema).
#[derive(Serialize, Debug, Clone)]
pub struct Row {
    pub name: String,
    pub ports: String,
    pub block: usize,
    pub taps: usize,
    pub median_ns: Option<f64>,
    pub p999_ns: Option<f64>,
    pub max_ns: Option<f64>,
    /// Samples per port per second at the median block time (one core).
    pub msps: f64,
    /// Back to back, fastest tenth of the run (tables only: on a shared machine this
    /// mostly measures how much of the core we were given).
    #[serde(skip)]
    pub b2b_msps: Option<f64>,
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

fn row_from(
    name: String,
    ports: Ports,
    block: usize,
    taps: usize,
    hist: &LatencyHistogram,
    b2b_ns: Option<f64>,
) -> Row {
    let s = hist.summary();
    let median = s.median_ns as f64;
    Row {
        name,
        ports: format!("{}x{}", ports.0, ports.1),
        block,
        taps,
        median_ns: Some(median),
        p999_ns: Some(s.p999_ns as f64),
        max_ns: Some(s.max_ns as f64),
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
) -> Result<Row, DspError> {
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let paths = random_blocks(&mut rng, ports.0 * ports.1, taps);
    let response = MimoTaps::from_paths(ports.0, ports.1, paths)?;
    let mut conv = MimoConvolver::new(block, &response)?;
    conv.set_kernel(kernel);
    let inputs: Vec<Vec<Vec<Cf32>>> = (0..16)
        .map(|_| random_blocks(&mut rng, ports.0, block))
        .collect();
    let mut outputs = vec![vec![Cf32::new(0.0, 0.0); block]; ports.1];
    let step =
        |k: usize, conv: &mut MimoConvolver, outputs: &mut [Vec<Cf32>]| -> Result<(), DspError> {
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
    let mut hist = LatencyHistogram::new();
    for k in 0..blocks {
        let t = Instant::now();
        step(k, &mut conv, &mut outputs)?;
        hist.record(u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX));
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
    let mut hist = LatencyHistogram::new();
    for k in 0..blocks {
        let t = Instant::now();
        fir.process(&inputs[k % 16], &mut out);
        hist.record(u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX));
    }
    std::hint::black_box(&out);
    row_from(
        "naive FIR (per sample)".into(),
        (1, 1),
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
    let ffts = (ports.0 + ports.1) as f64 * 5.0 * n * n.log2();
    let macs = (ports.0 * ports.1 * taps.div_ceil(block)) as f64 * n * 8.0;
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
fn bench_gnuradio(samples: u64, taps: usize) -> Result<Vec<Row>, GnuRadioSkipped> {
    let python = "/usr/bin/python3";
    let out = Process::new(python)
        .arg("-c")
        .arg(GNURADIO_SCRIPT)
        .arg(samples.to_string())
        .arg(taps.to_string())
        .output()
        .map_err(|source| GnuRadioSkipped::NoPython { python, source })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().last().unwrap_or("no message");
        return Err(GnuRadioSkipped::Failed(last.to_string()));
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
        return Err(GnuRadioSkipped::NoTimings);
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

/// Runs every configuration and returns the rows (UPOLS at 1x1, 2x2, 4x4,
/// the scalar MAC kernel, the naive FIR, the floors, GNU Radio when it ran).
pub fn run_bench(a: &BenchConfig) -> Result<BenchReport, BenchError> {
    if a.block == 0 || a.taps == 0 || a.blocks == 0 {
        return Err(BenchError::Empty);
    }
    let (b, l) = (a.block, a.taps);
    let kernel = MacKernel::detect();
    let configs: [Ports; 3] = [(1, 1), (2, 2), (4, 4)];
    let mut rows = Vec::new();
    for &ports in &configs {
        let blocks = a.blocks / (ports.0 * ports.1).max(1);
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
            ports: format!("{}x{}", ports.0, ports.1),
            block: b,
            taps: l,
            median_ns: Some(ns),
            p999_ns: Some(ns),
            max_ns: Some(ns),
            msps: b as f64 / ns * 1e3,
            b2b_msps: None,
        });
    }
    let gnuradio = match a.gnuradio_samples {
        None => Err(GnuRadioSkipped::NotAsked),
        Some(samples) => bench_gnuradio(samples, l),
    };
    let gnuradio_skipped = match gnuradio {
        Ok(gr) => {
            rows.extend(gr);
            None
        }
        Err(why) => Some(why.to_string()),
    };
    Ok(BenchReport {
        rows,
        kernel: kernel.name(),
        peak_flops: peak,
        gnuradio_skipped,
    })
}
