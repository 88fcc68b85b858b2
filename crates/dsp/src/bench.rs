//! The UPOLS convolver benchmark: per-block timing (SISO, 2x2, 4x4) beside a
//! naive FIR, the FLOP floor at the measured FMA peak and GNU Radio's
//! fft_filter_ccc kernel (run under python3 when installed); and `chanemu file`
//! file to file beside GNU Radio's file_source -> fft_filter_ccc -> file_sink
//! flowgraph on the same recording and taps. All in one run.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use radiohost_iq::sigmf::{self, DataType, Meta, SampleWriter, SigMfError};
use radiohost_iq::Cf32;
use radiohost_rt::stats::LatencyHistogram;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::direct::NaiveFir;
use crate::gnuradio::{self, GnuRadioError};
use crate::offline::{filter_recording, FilterConfig, FilterError, OutputType, SwapKind};
use crate::spec::{write_taps, ChannelModel, ChannelSpec, ChannelSpecError};
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
    /// Samples pushed through GNU Radio's kernel flowgraph per run; `None` skips
    /// GNU Radio altogether.
    pub gnuradio_samples: Option<u64>,
    /// Samples of the recording filtered file to file by `chanemu file` and GNU
    /// Radio; `None` skips the file comparison.
    pub file_samples: Option<usize>,
    /// Runs of each file-to-file measurement, alternating (the best counts).
    pub file_runs: usize,
    /// Where the file comparison writes its recordings (removed after).
    pub dir: PathBuf,
}

/// The benchmark's result.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub rows: Vec<Row>,
    pub kernel: &'static str,
    /// Measured FMA peak of one core, FLOP/s.
    pub peak_flops: f64,
    /// Rows that could not be measured here, with why.
    pub skipped: Vec<Skipped>,
    /// `chanemu file` against GNU Radio file to file (when asked for).
    pub file: Option<FileComparison>,
}

/// A row not measured (printed as SKIPPED).
#[derive(Clone, Debug, Serialize)]
pub struct Skipped {
    pub name: String,
    pub why: String,
}

/// The file-to-file comparison: the same cf32 recording (with its core:sha512)
/// and the same taps through `chanemu file` and GNU Radio's flowgraph.
#[derive(Clone, Debug, Serialize)]
pub struct FileComparison {
    pub samples: usize,
    pub taps: usize,
    /// Wall seconds of each run: `chanemu file` from opening the input to the
    /// output's final rename (reading and verifying the input's SHA-512,
    /// filtering, hashing, writing and syncing the output).
    pub radiohost_s: Vec<f64>,
    /// Wall seconds of each GNU Radio run, tb.run() to file_sink.close()
    /// (no checksums, no sync; interpreter start-up excluded).
    pub gnuradio_s: Vec<f64>,
    /// Best runs, MSa/s.
    pub radiohost_msps: f64,
    pub gnuradio_msps: Option<f64>,
    /// radiohost over GNU Radio (above 1: radiohost faster).
    pub ratio: Option<f64>,
    /// Chunk buffers `chanemu file` held.
    pub buffer_bytes: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("block, taps and blocks must be at least 1")]
    Empty,
    #[error(transparent)]
    Dsp(#[from] DspError),
    #[error("file comparison: {0}")]
    Filter(#[from] FilterError),
    #[error("file comparison: {0}")]
    Spec(#[from] ChannelSpecError),
    #[error("file comparison: writing the input recording: {0}")]
    Input(#[from] SigMfError),
    #[error("file comparison: {path}: {source}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
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

/// Names of GNU Radio's rows.
const GR_KERNEL: &str = "gnuradio fft_filter_ccc kernel (no file I/O)";
const GR_FILE: &str = "gnuradio file_source->fft_filter->file_sink";
const OURS_FILE: &str = "radiohost chanemu file (file to file)";

/// GNU Radio's fft_filter_ccc kernel: vector_source -> head -> fft_filter_ccc ->
/// null_sink, best of three, in CPU seconds of the whole flowgraph (all its
/// threads), so time slices given to other processes do not count, as with our
/// per-block medians.
fn bench_gnuradio_kernel(dir: &Path, taps: &[Cf32], samples: u64) -> Result<Row, GnuRadioError> {
    let secs = gnuradio::kernel_seconds(dir, taps, samples, 3)?;
    let best = secs.iter().copied().fold(f64::INFINITY, f64::min);
    // fft_filter_ccc uses an FFT of 2^ceil(log2(2 L)) points and keeps fft - L + 1 samples.
    let l = taps.len();
    let gr_block = (2 * l).next_power_of_two() - l + 1;
    Ok(Row {
        name: GR_KERNEL.into(),
        ports: "1x1".into(),
        block: gr_block,
        taps: l,
        median_ns: Some(best / samples as f64 * gr_block as f64 * 1e9),
        p999_ns: None,
        max_ns: None,
        msps: samples as f64 / best / 1e6,
        b2b_msps: Some(samples as f64 / best / 1e6),
    })
}

/// Writes a cf32 recording of `samples` random samples (with its core:sha512),
/// streaming, so the benchmark holds no more than one chunk of it.
fn write_input(base: &Path, samples: usize) -> Result<(), SigMfError> {
    let meta = Meta::new(DataType::Cf32Le, 1e6).description("radiohost chanemu bench input");
    let mut w = SampleWriter::create(base, &meta)?;
    let mut rng = ChaCha8Rng::seed_from_u64(44);
    let mut chunk = Vec::with_capacity(1 << 16);
    let mut left = samples;
    while left > 0 {
        let n = left.min(1 << 16);
        chunk.clear();
        chunk.extend((0..n).map(|_| Cf32::new(rng.gen_range(-0.5..0.5), rng.gen_range(-0.5..0.5))));
        w.write_cf32(&chunk)?;
        left -= n;
    }
    w.finish()?;
    Ok(())
}

/// `chanemu file` and GNU Radio's flowgraph, file to file on the same recording
/// and taps, alternating run by run so both see the same machine load.
fn bench_file(
    a: &BenchConfig,
    samples: usize,
    taps: &[Cf32],
    rows: &mut Vec<Row>,
    skipped: &mut Vec<Skipped>,
) -> Result<FileComparison, BenchError> {
    let dir = &a.dir;
    std::fs::create_dir_all(dir).map_err(|source| BenchError::Dir {
        path: dir.clone(),
        source,
    })?;
    let input = dir.join("chanemu-bench-in");
    write_input(&input, samples)?;
    let taps_file = dir.join("chanemu-bench-taps.json");
    write_taps(
        &taps_file,
        &MimoTaps::siso(taps.to_vec())?,
        Some(1e6),
        "bench",
    )?;
    let cfg = FilterConfig {
        channel: ChannelSpec {
            taps_file: Some(taps_file.clone()),
            model: ChannelModel::Identity,
            ports: None,
            default_ports: (1, 1),
            model_taps: 1,
            spacing: 1,
            decay_db_per_tap: 0.0,
            seed: 0,
            doppler_hz: 0.0,
            update_blocks: 1,
            sinusoids: 1,
        },
        input: input.clone(),
        output: dir.join("chanemu-bench-out"),
        block: a.block,
        swap: SwapKind::Staggered,
        output_type: OutputType::Cf32,
        flush: false,
        sample_rate: None,
        write_taps: None,
        checksum: true,
    };
    let gr_out = dir.join("chanemu-bench-gnuradio.cf32");
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let mut buffer_bytes = 0;
    let mut gr_error = a
        .gnuradio_samples
        .is_none()
        .then(|| "skipped (--no-gnuradio)".to_string());
    for _ in 0..a.file_runs.max(1) {
        let r = filter_recording(&cfg)?;
        ours.push(r.seconds);
        buffer_bytes = r.buffer_bytes;
        for f in [sigmf::data_path(&cfg.output), sigmf::meta_path(&cfg.output)] {
            let _ = std::fs::remove_file(f);
        }
        if gr_error.is_none() {
            match gnuradio::file_seconds(dir, taps, &sigmf::data_path(&input), &gr_out) {
                Ok(s) => theirs.push(s),
                Err(e) => gr_error = Some(e.to_string()),
            }
            let _ = std::fs::remove_file(&gr_out);
        }
    }
    for f in [
        sigmf::data_path(&input),
        sigmf::meta_path(&input),
        taps_file,
    ] {
        let _ = std::fs::remove_file(f);
    }
    let best = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let msps = |secs: f64| samples as f64 / secs / 1e6;
    let row = |name: &str, block: usize, secs: f64| Row {
        name: name.into(),
        ports: "1x1".into(),
        block,
        taps: taps.len(),
        median_ns: None,
        p999_ns: None,
        max_ns: None,
        msps: msps(secs),
        b2b_msps: None,
    };
    let radiohost_msps = msps(best(&ours));
    rows.push(row(OURS_FILE, a.block, best(&ours)));
    let gnuradio_msps = (!theirs.is_empty()).then(|| msps(best(&theirs)));
    match &gr_error {
        Some(why) if theirs.is_empty() => skipped.push(Skipped {
            name: GR_FILE.into(),
            why: why.clone(),
        }),
        _ => {
            let gr_block = (2 * taps.len()).next_power_of_two() - taps.len() + 1;
            rows.push(row(GR_FILE, gr_block, best(&theirs)));
        }
    }
    Ok(FileComparison {
        samples,
        taps: taps.len(),
        radiohost_s: ours,
        gnuradio_s: theirs,
        radiohost_msps,
        gnuradio_msps,
        ratio: gnuradio_msps.map(|g| radiohost_msps / g),
        buffer_bytes,
    })
}

/// The steps [`run_bench`] announces to its `progress` callback.
pub const STEPS: u64 = 7;

/// Runs every configuration and returns the rows (UPOLS at 1x1, 2x2, 4x4,
/// the scalar MAC kernel, the naive FIR, the floors, GNU Radio when it ran);
/// `progress` hears each of the [`STEPS`] steps before it runs. Once `stop` is
/// set (Ctrl-C) no further step starts and the rows so far return.
/// A `dir` the run had to create is removed afterwards (when empty: the
/// recordings in it are removed as each comparison ends).
pub fn run_bench(
    a: &BenchConfig,
    stop: &AtomicBool,
    progress: impl FnMut(&str),
) -> Result<BenchReport, BenchError> {
    let made_dir = !a.dir.exists();
    let report = run_steps(a, stop, progress);
    if made_dir {
        let _ = std::fs::remove_dir(&a.dir);
    }
    report
}

fn run_steps(
    a: &BenchConfig,
    stop: &AtomicBool,
    mut progress: impl FnMut(&str),
) -> Result<BenchReport, BenchError> {
    if a.block == 0 || a.taps == 0 || a.blocks == 0 {
        return Err(BenchError::Empty);
    }
    let mut next = |what: &str| {
        let go = !stop.load(Ordering::Relaxed);
        if go {
            progress(what);
        }
        go
    };
    let (b, l) = (a.block, a.taps);
    let kernel = MacKernel::detect();
    let configs: [Ports; 3] = [(1, 1), (2, 2), (4, 4)];
    let mut rows = Vec::new();
    for &ports in &configs {
        if next(&format!("UPOLS {}x{}", ports.0, ports.1)) {
            let blocks = a.blocks / (ports.0 * ports.1).max(1);
            rows.push(bench_upols(ports, b, l, blocks.max(100), kernel)?);
        }
    }
    if next("UPOLS, scalar MAC kernel") {
        rows.push(bench_upols(
            configs[0],
            b,
            l,
            (a.blocks / 4).max(100),
            MacKernel::Scalar,
        )?);
    }
    if next("naive FIR") {
        rows.push(bench_naive(b, l, (a.blocks / 500).max(20)));
    }
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
    let mut skipped = Vec::new();
    // The taps GNU Radio and the file comparison use (seeded: the same every run).
    let gr_taps = random_blocks(&mut ChaCha8Rng::seed_from_u64(45), 1, l).remove(0);
    match a.gnuradio_samples {
        _ if !next(GR_KERNEL) => {}
        None => skipped.push(Skipped {
            name: GR_KERNEL.into(),
            why: "skipped (--no-gnuradio)".into(),
        }),
        Some(samples) => {
            std::fs::create_dir_all(&a.dir).map_err(|source| BenchError::Dir {
                path: a.dir.clone(),
                source,
            })?;
            match bench_gnuradio_kernel(&a.dir, &gr_taps, samples) {
                Ok(row) => rows.push(row),
                Err(e) => skipped.push(Skipped {
                    name: GR_KERNEL.into(),
                    why: e.to_string(),
                }),
            }
        }
    }
    let file = match a.file_samples {
        Some(samples) if samples > 0 && next("file to file") => {
            Some(bench_file(a, samples, &gr_taps, &mut rows, &mut skipped)?)
        }
        _ => None,
    };
    Ok(BenchReport {
        rows,
        kernel: kernel.name(),
        peak_flops: peak,
        skipped,
        file,
    })
}
