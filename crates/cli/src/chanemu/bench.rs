//! `radiohost chanemu bench`: prints radiohost_dsp::bench (UPOLS per-block
//! timing beside a naive FIR, GNU Radio's fft_filter_ccc kernel and the FLOP
//! floor; `chanemu file` beside GNU Radio's flowgraph, file to file).

use anyhow::Result;
use clap::builder::TypedValueParser as _;
use clap::Args;
use radiohost_dsp::bench::{run_bench as bench, BenchConfig, BenchReport, STEPS};

use crate::table::Table;
use crate::ui;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Blocks timed per UPOLS configuration (the naive FIR runs 1/500 of them).
    #[arg(long, default_value_t = 100_000,
          value_parser = clap::value_parser!(u32).range(1..=100_000_000).map(|v| v as usize))]
    pub blocks: usize,
    /// Block length B (samples; also `chanemu file`'s block in the file comparison).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=1_048_576).map(|v| v as usize))]
    pub block: usize,
    /// Filter length L (taps), for every row.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..=1_048_576).map(|v| v as usize))]
    pub taps: usize,
    /// Samples pushed through GNU Radio's kernel flowgraph per run (1 to 10^10;
    /// --no-gnuradio skips it).
    #[arg(long, default_value_t = 50_000_000, value_parser = crate::ui::count_in::<u64>(1, 10_000_000_000))]
    pub gnuradio_samples: u64,
    /// Samples of the cf32 recording filtered file to file by `chanemu file` and
    /// GNU Radio (written to --dir first: 8 bytes a sample; at most 10^9); 0 skips
    /// the comparison.
    #[arg(long, default_value_t = 10_000_000, value_parser = crate::ui::count_in::<usize>(0, 1_000_000_000))]
    pub file_samples: usize,
    /// Runs of each file-to-file measurement, alternating (the best counts), 1 to 100.
    #[arg(long, default_value_t = 3, value_parser = crate::ui::count_in::<usize>(1, 100))]
    pub file_runs: usize,
    /// Directory for the file comparison's recordings (removed after); default:
    /// the system temporary directory.
    #[arg(long)]
    pub dir: Option<std::path::PathBuf>,
    /// Skip the GNU Radio rows.
    #[arg(long)]
    pub no_gnuradio: bool,
    /// Print the report as JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

pub fn run_bench(a: BenchArgs) -> Result<()> {
    let bar = ui::Progress::new("chanemu bench", STEPS, !a.json);
    let config = BenchConfig {
        blocks: a.blocks,
        block: a.block,
        taps: a.taps,
        gnuradio_samples: (!a.no_gnuradio).then_some(a.gnuradio_samples),
        file_samples: (a.file_samples > 0).then_some(a.file_samples),
        file_runs: a.file_runs,
        dir: a.dir.unwrap_or_else(|| {
            std::env::temp_dir().join(format!("radiohost-chanemu-bench-{}", std::process::id()))
        }),
    };
    let report = bench(&config, &ui::stop_flag(), |m| bar.begin(m));
    drop(bar);
    let report = report?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_bench(&report);
    }
    ui::partial_if_interrupted(|| format!("{} rows measured", report.rows.len()))
}

fn print_bench(r: &BenchReport) {
    let (rows, peak) = (&r.rows, r.peak_flops);
    let fmt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    let siso = rows
        .iter()
        .find(|r| r.name == "upols" && r.ports == "1x1")
        .map_or(f64::NAN, |r| r.msps);
    println!("UPOLS channel emulation benchmark (one core, MAC kernel {}, FMA peak {:.1} GFLOP/s measured)", r.kernel, peak / 1e9);
    let t = Table::new("<44 >5 >5 >5 >10 >10 >10 >9 >9 >9");
    t.header("name|ports|block|taps|median_ns|p999_ns|max_ns|MSa/s|upols/it|b2b MSa/s");
    for r in rows.iter() {
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
    for s in &r.skipped {
        println!("{:<44} SKIPPED: {}", s.name, s.why);
    }
    println!("MSa/s: B / median block time, per port on one core (MIMO: each of the M inputs runs at this rate);");
    println!("  GNU Radio kernel: samples / CPU time of its flowgraph without file I/O (all threads), best of 3;");
    println!("  file to file: samples / wall time of the whole run, best of the runs (see below).");
    println!("b2b MSa/s: back to back, fastest tenth of the run (GNU Radio kernel: as MSa/s).");
    println!("upols/it: UPOLS throughput at the same ports over that row's (below 1x for the floor: how far from it).");
    if let Some(f) = &r.file {
        let secs = |v: &[f64]| {
            v.iter()
                .map(|s| format!("{s:.3}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        println!(
            "file to file, {} cf32 samples ({:.0} MB), {} taps, wall seconds per run:",
            f.samples,
            f.samples as f64 * 8.0 / 1e6,
            f.taps
        );
        println!(
            "  radiohost chanemu file  {}  (open to final rename: read + verify SHA-512, filter, SHA-512 + write + sync; {:.1} MB of chunk buffers)",
            secs(&f.radiohost_s),
            f.buffer_bytes as f64 / 1e6
        );
        match (f.gnuradio_msps, f.ratio) {
            (Some(g), Some(ratio)) => {
                println!(
                    "  gnuradio flowgraph      {}  (tb.run() to file_sink close: no checksums, no sync)",
                    secs(&f.gnuradio_s)
                );
                println!(
                    "  best: radiohost {:.1} MSa/s, GNU Radio {:.1} MSa/s: {:.2}x",
                    f.radiohost_msps, g, ratio
                );
            }
            _ => println!(
                "  best: radiohost {:.1} MSa/s; GNU Radio SKIPPED (see above)",
                f.radiohost_msps
            ),
        }
    }
}
