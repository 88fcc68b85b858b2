//! `radiohost station calibrate`: every opcode of a configuration run on every
//! device of the pool through its executor, latency distributions and resource
//! needs saved as JSON (`radiohost_station::calibration`) for `station run
//! --calibration` and `station simulate --calibration`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use clap::Args;
use radiohost_station::calibration::Calibration;
use radiohost_station::isa::Opcode;
use radiohost_station::kernels::KernelContext;
use radiohost_station::ru::FrameBank;
use radiohost_station::setup::load_config;
use radiohost_station::shape::FrameShape;

use super::common::device_pool;

#[derive(Args)]
pub struct CalibrateArgs {
    /// Frame configuration: a JSON file, or a built-in name (8x2, 16x4, 32x8, 64x16).
    #[arg(long, default_value = "16x4")]
    pub config: PathBuf,
    /// Devices to measure: cpu:WORKERS and gpu:ORDINAL, comma separated (a CPU
    /// device's figures are per worker: instructions run one at a time).
    #[arg(long, default_value = "cpu:1")]
    pub devices: String,
    /// Do not pin CPU workers to cores.
    #[arg(long)]
    pub no_pin: bool,
    /// Subcarrier parts ZF, EqDemod and Precode are split into (1 to 1200); by
    /// default what `station run` picks without one: one per CPU worker down to 2^15
    /// multiply-adds per symbol, at most one per ZF batch (16x4: 1).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1200))]
    pub parts: Option<u16>,
    /// Frames measured per device, after one warm-up frame (1 to 10000).
    #[arg(long, default_value_t = 20, value_parser = crate::ui::count_in::<u64>(1, 10_000))]
    pub frames: u64,
    /// Write the calibration JSON here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the calibration JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: CalibrateArgs) -> Result<()> {
    let t0 = Instant::now();
    let (cfg, name) = load_config(&a.config)?;
    let devices = device_pool(&a.devices, !a.no_pin)?;
    let parts = FrameShape::parts_or_default(&cfg, a.parts.map(usize::from), &devices);
    let ctx = Arc::new(KernelContext::new(&cfg, parts)?);
    let bank = FrameBank::generate(&cfg, 4)?;
    let cal = Calibration::measure(&devices, &ctx, &bank, &name, a.frames)?;
    if let Some(path) = &a.out {
        cal.save(path)?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&cal)?);
        return Ok(());
    }
    println!(
        "station calibrate: {name} ({}), {} frames per device after one warm-up, load average {}",
        cal.shape, a.frames, cal.loadavg
    );
    for d in &cal.devices {
        println!();
        println!(
            "{} ({} units): per instruction, one at a time",
            d.name, d.units
        );
        println!(
            "{:<10} {:>5} {:>8} {:>10} {:>10} {:>10} {:>10}",
            "opcode", "need", "samples", "min us", "median us", "p99 us", "max us"
        );
        for op in Opcode::ALL {
            if let Some(s) = d.opcodes.get(op.name()) {
                let us = |ns: u64| ns as f64 / 1e3;
                println!(
                    "{:<10} {:>5} {:>8} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
                    op.name(),
                    s.need,
                    s.samples,
                    us(s.min_ns),
                    us(s.median_ns),
                    us(s.p99_ns),
                    us(s.max_ns)
                );
            }
        }
        let serial: u64 = ctx
            .frame_program(0)
            .iter()
            .filter_map(|i| d.median_ns(i.opcode))
            .sum();
        println!(
            "one frame's instructions back to back: {:.0} us ({:.2} core-ms per frame on a CPU device)",
            serial as f64 / 1e3,
            serial as f64 / 1e6
        );
    }
    if let Some(path) = &a.out {
        println!("written to {}", path.display());
    }
    println!("whole command: {:.2} s", t0.elapsed().as_secs_f64());
    Ok(())
}
