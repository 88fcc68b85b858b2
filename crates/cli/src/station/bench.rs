//! `radiohost station bench`: offered load swept up to saturation, every policy in
//! the same run on the same CPU devices (`radiohost_station::bench`), printed with
//! LROC/baseline ratios and the floor.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use radiohost_station::bench::{run_bench, BenchConfig};
use radiohost_station::ru::TransportKind;
use radiohost_station::setup::{load_config, parse_policies};

use super::common::device_pool;
use radiohost_testbed::units::parse_positive_duration;

use crate::table::Table;

#[derive(Args)]
pub struct BenchArgs {
    /// Configurations (files or built-in names), comma separated.
    #[arg(long, default_value = "16x4,32x8", value_delimiter = ',')]
    pub configs: Vec<PathBuf>,
    /// Policies, comma separated, or all.
    #[arg(long, default_value = "all")]
    pub policies: String,
    /// Devices, in order: cpu:WORKERS and gpu:ORDINAL, comma separated.
    #[arg(long, default_value = "cpu:1,cpu:1")]
    pub devices: String,
    /// Do not pin workers to cores (pinned workers that leave a core free spin 500 us when idle).
    #[arg(long)]
    pub no_pin: bool,
    /// Offered loads as fractions of the measured floor capacity, comma separated.
    #[arg(long, default_value = "0.1,0.2,0.3,0.5,0.7,1.0", value_delimiter = ',')]
    pub loads: Vec<f64>,
    /// Frames per run (one run per configuration, load and policy; 1 to 10000000).
    #[arg(long, default_value_t = 200, value_parser = crate::ui::count_in::<u64>(1, 10_000_000))]
    pub frames: u64,
    /// Frame deadline with its unit (e.g. 4ms); by default max(4ms, 4 x the serial frame time).
    #[arg(long, value_parser = parse_positive_duration)]
    pub deadline: Option<Duration>,
    /// Subcarrier parts (1 to 1200); by default per configuration, one per CPU worker
    /// down to 2^15 multiply-adds per symbol, at most one per ZF batch (16x4: 1).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1200))]
    pub parts: Option<u16>,
    /// Fronthaul transport.
    #[arg(long, default_value = "ring")]
    pub transport: TransportKind,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Write the calibration this sweep measured on the first configuration here
    /// (what `station calibrate --out` writes; `station simulate --calibration` reads it).
    #[arg(long)]
    pub calibration_out: Option<PathBuf>,
    /// Fail when a run at an offered load of at most the floor (load <= 1.0) leaves
    /// more than this share of frames undecoded in deadline (e.g. 1% or 0.01); unset: report only.
    #[arg(long, value_parser = radiohost_testbed::units::parse_probability)]
    pub max_miss: Option<f64>,
    /// With --max-miss: report the misses but exit 0.
    #[arg(long)]
    pub accept_misses: bool,
}

pub fn run(a: BenchArgs) -> Result<()> {
    let b = BenchConfig {
        configs: a
            .configs
            .iter()
            .map(|c| load_config(c))
            .collect::<Result<_, _>>()?,
        policies: parse_policies(&a.policies)?,
        devices: device_pool(&a.devices, !a.no_pin)?,
        loads: a.loads.clone(),
        frames: a.frames,
        deadline_ns: a.deadline.map(|d| d.as_nanos() as u64),
        parts: a.parts.map(usize::from),
        transport: a.transport,
    };
    let runs = (b.configs.len() * b.loads.len() * b.policies.len()) as u64;
    // One step per configuration's calibration, then one per run.
    let steps = b.configs.len() as u64 + runs;
    let bar = crate::ui::Progress::new("station bench", steps, !a.json);
    let rep = run_bench(&b, &crate::ui::stop_flag(), |m| bar.begin(m))?;
    drop(bar);
    let partial = || format!("{} of {runs} runs measured", rep.rows.len());
    if let (Some(path), Some(c)) = (&a.calibration_out, rep.calibration.first()) {
        c.calibration.save(path)?;
    }
    let misses = match a.max_miss {
        Some(max) if !a.accept_misses => rep.check_misses(max).err().map(|e| {
            anyhow::anyhow!("{e}, over --max-miss; pass --accept-misses to exit 0 anyway")
        }),
        _ => None,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rep)?);
        crate::ui::partial_if_interrupted(partial)?;
        return misses.map_or(Ok(()), Err);
    }
    let (rows, ratios, saturation, workers) =
        (&rep.rows, &rep.ratios, &rep.saturation, rep.workers);
    println!(
        "station bench: {}, {} frames per run, load average {}",
        a.devices, a.frames, rep.loadavg
    );
    for c in &rep.calibration {
        println!(
            "{}: serial frame {:.0} us -> floor {:.0} frames/s on {workers} CPU workers (costs calibrated in this run on {})",
            c.config,
            c.serial_frame_us,
            c.floor_fps,
            c.calibration
                .devices
                .iter()
                .map(|d| d.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    println!();
    let t = Table::new("<6 <7 >9.1 >9.1 >9.3 >9.3 >10.3 >7 >6 >6");
    t.header("config|policy|offered|achieved|mean ms|p99 ms|p99.99 ms|missed|ok|frames");
    for r in rows {
        t.row(&[
            &r.config,
            &r.policy,
            &r.offered_fps,
            &r.achieved_fps,
            &r.mean_ms,
            &r.p99_ms,
            &r.p9999_ms,
            &r.missed,
            &r.decoded_ok,
            &r.frames,
        ]);
    }
    println!();
    println!("LROC / baseline (P99.99 ratio < 1 and throughput ratio >= 1 favour LROC):");
    for r in ratios {
        let x =
            |v: Option<f64>| v.map_or("n/a (no frame done)".to_string(), |v| format!("x{v:.2}"));
        println!(
            "{:<6} {:>9.1} frames/s vs {:<7} P99.99 {}  throughput {}",
            r.config,
            r.offered_fps,
            r.baseline,
            x(r.p9999_ratio),
            x(r.throughput_ratio)
        );
    }
    println!();
    println!("saturation (best achieved frames/s over the sweep, and its share of the floor):");
    for s in saturation {
        println!(
            "{:<6} {:<7} {:>9.1} of {:>9.1} ({:.0}%)",
            s.config,
            s.policy,
            s.max_fps,
            s.floor_fps,
            100.0 * s.of_floor
        );
    }
    crate::ui::partial_if_interrupted(partial)?;
    misses.map_or(Ok(()), Err)
}
