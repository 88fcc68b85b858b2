//! `radiohost station bench`: offered load swept up to saturation, every policy in
//! the same run on the same CPU devices (`radiohost_station::bench`), printed with
//! LROC/baseline ratios and the floor.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use radiohost_station::bench::{run_bench, BenchConfig};
use radiohost_station::ru::TransportKind;
use radiohost_station::setup::{cpu_devices, load_config, parse_policies};
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
    /// CPU devices.
    #[arg(long, default_value_t = 2)]
    pub devices: usize,
    /// Workers per device.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Do not pin workers to cores.
    #[arg(long)]
    pub no_pin: bool,
    /// Offered loads as fractions of the measured floor capacity, comma separated.
    #[arg(long, default_value = "0.1,0.2,0.3,0.5,0.7,1.0", value_delimiter = ',')]
    pub loads: Vec<f64>,
    /// Frames per run (one run per configuration, load and policy).
    #[arg(long, default_value_t = 200)]
    pub frames: u64,
    /// Frame deadline with its unit (e.g. 4ms); by default max(4ms, 4 x the serial frame time).
    #[arg(long, value_parser = parse_positive_duration)]
    pub deadline: Option<Duration>,
    /// Subcarrier parts.
    #[arg(long, default_value_t = 4)]
    pub parts: usize,
    /// Fronthaul transport.
    #[arg(long, default_value = "ring")]
    pub transport: TransportKind,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Write the per-opcode calibration (`{"cpu": {opcode: ns}, "shape": {...}}`)
    /// of the first configuration here, for the scheduling simulator.
    #[arg(long)]
    pub calibration_out: Option<PathBuf>,
}

pub fn run(a: BenchArgs) -> Result<()> {
    let b = BenchConfig {
        configs: a
            .configs
            .iter()
            .map(|c| load_config(c))
            .collect::<Result<_, _>>()?,
        policies: parse_policies(&a.policies)?,
        devices: cpu_devices(a.devices, a.workers, !a.no_pin)?,
        loads: a.loads.clone(),
        frames: a.frames,
        deadline_ns: a.deadline.map(|d| d.as_nanos() as u64),
        parts: a.parts,
        transport: a.transport,
    };
    let runs = (b.configs.len() * b.loads.len() * b.policies.len()) as u64;
    let bar = if a.json {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(runs)
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let rep = run_bench(&b, |m| {
        bar.inc(1);
        bar.set_message(m.to_string());
    })?;
    bar.finish_and_clear();
    if let (Some(path), Some(c)) = (&a.calibration_out, rep.calibration.first()) {
        std::fs::write(path, serde_json::to_string_pretty(&c.simulator_json())?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rep)?);
        return Ok(());
    }
    let (rows, ratios, saturation, workers) =
        (&rep.rows, &rep.ratios, &rep.saturation, rep.workers);
    println!(
        "station bench: {} CPU devices x {} workers, {} frames per run, load average {}",
        a.devices, a.workers, a.frames, rep.loadavg
    );
    for c in &rep.calibration {
        println!(
            "{}: serial frame {:.0} us -> floor {:.0} frames/s on {workers} workers",
            c.config, c.serial_frame_us, c.floor_fps
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
    Ok(())
}
