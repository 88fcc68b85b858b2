//! GNU Radio 3.10's `fft_filter_ccc`, run under Debian's python3 as the baseline
//! of `chanemu bench`: its kernel in a flowgraph without file I/O
//! (vector_source -> head -> fft_filter_ccc -> null_sink, CPU time of all the
//! flowgraph's threads), and file to file (file_source -> fft_filter_ccc ->
//! file_sink, wall time), each with the taps and input we use.

use std::path::Path;
use std::process::Command as Process;

use radiohost_iq::Cf32;

/// The interpreter GNU Radio's Debian packages install their modules for.
pub const PYTHON: &str = "/usr/bin/python3";

/// Why GNU Radio could not be measured (printed as SKIPPED for its rows).
#[derive(Debug, thiserror::Error)]
pub enum GnuRadioError {
    #[error("{PYTHON} could not be started: {0}; GNU Radio runs under Debian's python3")]
    NoPython(std::io::Error),
    #[error("writing the taps for GNU Radio to {path}: {source}")]
    Taps {
        path: String,
        source: std::io::Error,
    },
    #[error("GNU Radio did not run ({0}); install it with `apt-get install -y --no-install-recommends gnuradio`")]
    Failed(String),
    #[error("GNU Radio printed no timings")]
    NoTimings,
}

const SCRIPT: &str = r#"
import sys, time
import numpy as np
from gnuradio import gr, blocks, filter
mode, taps_path, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = np.loadtxt(taps_path, ndmin=2)
taps = (t[:, 0] + 1j * t[:, 1]).astype(np.complex64).tolist()
def kernel(n):
    rng = np.random.default_rng(1)
    data = (rng.standard_normal(1 << 16) + 1j * rng.standard_normal(1 << 16)).astype(np.complex64).tolist()
    tb = gr.top_block()
    src = blocks.vector_source_c(data, True)
    head = blocks.head(gr.sizeof_gr_complex, n)
    tb.connect(src, head, filter.fft_filter_ccc(1, taps, 1), blocks.null_sink(gr.sizeof_gr_complex))
    c = time.process_time(); tb.run(); return time.process_time() - c
def file(src_path, dst_path):
    tb = gr.top_block()
    src = blocks.file_source(gr.sizeof_gr_complex, src_path, False)
    sink = blocks.file_sink(gr.sizeof_gr_complex, dst_path, False)
    sink.set_unbuffered(False)
    tb.connect(src, filter.fft_filter_ccc(1, taps, 1), sink)
    w = time.perf_counter(); tb.run(); sink.close(); return time.perf_counter() - w
for _ in range(runs):
    s = kernel(int(sys.argv[4])) if mode == "kernel" else file(sys.argv[4], sys.argv[5])
    print(s, flush=True)
"#;

/// Writes `taps` as "re im" lines for the script.
fn write_taps(path: &Path, taps: &[Cf32]) -> Result<(), GnuRadioError> {
    let text: String = taps
        .iter()
        .map(|t| format!("{:e} {:e}\n", t.re, t.im))
        .collect();
    std::fs::write(path, text).map_err(|source| GnuRadioError::Taps {
        path: path.display().to_string(),
        source,
    })
}

/// Runs the script; returns the seconds it printed, one per run.
fn run_script(args: &[&str]) -> Result<Vec<f64>, GnuRadioError> {
    let out = Process::new(PYTHON)
        .arg("-c")
        .arg(SCRIPT)
        .args(args)
        .output()
        .map_err(GnuRadioError::NoPython)?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().last().unwrap_or("no message");
        return Err(GnuRadioError::Failed(last.to_string()));
    }
    let secs: Vec<f64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    if secs.is_empty() {
        return Err(GnuRadioError::NoTimings);
    }
    Ok(secs)
}

/// CPU seconds (all threads) of `runs` flowgraphs pushing `samples` samples
/// through fft_filter_ccc with `taps`, file I/O excluded.
pub fn kernel_seconds(
    dir: &Path,
    taps: &[Cf32],
    samples: u64,
    runs: usize,
) -> Result<Vec<f64>, GnuRadioError> {
    let taps_path = dir.join("gnuradio-taps.txt");
    write_taps(&taps_path, taps)?;
    let runs = runs.to_string();
    let samples = samples.to_string();
    let path = taps_path.display().to_string();
    let r = run_script(&["kernel", &path, &runs, &samples]);
    let _ = std::fs::remove_file(&taps_path);
    r
}

/// Wall seconds of one file_source -> fft_filter_ccc -> file_sink run from the
/// raw cf32 file `input` into `output` (interpreter start-up excluded).
pub fn file_seconds(
    dir: &Path,
    taps: &[Cf32],
    input: &Path,
    output: &Path,
) -> Result<f64, GnuRadioError> {
    let taps_path = dir.join("gnuradio-taps.txt");
    write_taps(&taps_path, taps)?;
    let path = taps_path.display().to_string();
    let (src, dst) = (input.display().to_string(), output.display().to_string());
    let r = run_script(&["file", &path, "1", &src, &dst]);
    let _ = std::fs::remove_file(&taps_path);
    r.map(|s| s[0])
}
