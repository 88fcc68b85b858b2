//! `radiohost chanemu bench`: prints radiohost_dsp::bench (UPOLS per-block
//! timing beside a naive FIR, GNU Radio's fft_filter_ccc and the FLOP floor).

use anyhow::Result;
use clap::Args;
use radiohost_dsp::bench::{run_bench as bench, BenchConfig, BenchReport};

use crate::table::Table;

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

pub fn run_bench(a: BenchArgs) -> Result<()> {
    let report = bench(&BenchConfig {
        blocks: a.blocks,
        block: a.block,
        taps: a.taps,
        gnuradio_samples: (!a.no_gnuradio).then_some(a.gnuradio_samples),
    })?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report.rows)?);
    } else {
        print_bench(&report);
    }
    Ok(())
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
    println!("MSa/s: B / median block time, per port on one core (MIMO: each of the M inputs runs at this rate).");
    println!("b2b MSa/s: back to back, fastest tenth of the run (GNU Radio: CPU time of the whole run, best of 3).");
    println!("upols/it: UPOLS throughput at the same ports over that row's (below 1x for the floor: how far from it).");
    if let Some(why) = &r.gnuradio_skipped {
        println!("GNU Radio: not compared: {why}");
    }
}
