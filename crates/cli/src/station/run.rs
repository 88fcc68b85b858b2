//! `radiohost station run` and the demo's baseband stage (`radiohost_station::setup`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use radiohost_station::ru::TransportKind;
use radiohost_station::setup::{load_config, parse_policies, run_policies, RunConfig};
use radiohost_testbed::units::parse_positive_duration;

use super::common::{breakdown_svg, cdf_svg, print_breakdown, print_table};

#[derive(Args)]
pub struct RunArgs {
    /// Frame configuration: a JSON file, or a built-in name (8x2, 16x4, 32x8, 64x16).
    #[arg(long)]
    pub config: PathBuf,
    /// Scheduling policy: lroc, frame, symbol, task, a comma list, or `all` (each
    /// runs in turn on the same frames).
    #[arg(long, default_value = "lroc")]
    pub policy: String,
    /// CPU devices the cores are split into.
    #[arg(long, default_value_t = 2)]
    pub devices: usize,
    /// Worker threads per device (its capacity).
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Do not pin workers to cores.
    #[arg(long)]
    pub no_pin: bool,
    /// Radio units, each sending its own frames.
    #[arg(long, default_value_t = 1)]
    pub rus: usize,
    /// Frames each radio unit sends.
    #[arg(long, default_value_t = 500)]
    pub frames: u64,
    /// Fronthaul transport: udp (loopback) or ring (in-process).
    #[arg(long, default_value = "ring")]
    pub transport: TransportKind,
    /// Frame period, a duration with its unit (e.g. 1ms, 500us).
    #[arg(long, default_value = "1ms", value_parser = parse_positive_duration)]
    pub frame_period: Duration,
    /// Deadline after a frame's first packet, a duration with its unit (e.g. 4ms).
    #[arg(long, default_value = "4ms", value_parser = parse_positive_duration)]
    pub deadline: Duration,
    /// Subcarrier parts ZF, EqDemod and Precode are split into.
    #[arg(long, default_value_t = 4)]
    pub parts: usize,
    /// Remove the last device when this frame (global id) arrives.
    #[arg(long)]
    pub remove_device_at: Option<u64>,
    /// Distinct generated frames the radio units replay.
    #[arg(long, default_value_t = 8)]
    pub bank_frames: usize,
    /// Also verify every completed frame's downlink with emulated users.
    #[arg(long)]
    pub verify_downlink: bool,
    /// Print JSON (one report per policy) instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Write latency-CDF and stage-breakdown SVG plots into this folder.
    #[arg(long)]
    pub svg_dir: Option<PathBuf>,
}

fn run_config(a: &RunArgs) -> Result<RunConfig> {
    let (config, config_name) = load_config(&a.config)?;
    Ok(RunConfig {
        config,
        config_name,
        devices: a.devices,
        workers: a.workers,
        pin: !a.no_pin,
        rus: a.rus,
        frames: a.frames,
        transport: a.transport,
        frame_period_ns: a.frame_period.as_nanos() as u64,
        deadline_ns: a.deadline.as_nanos() as u64,
        parts: a.parts,
        remove_device_at: a.remove_device_at,
        bank_frames: a.bank_frames,
        verify_downlink: a.verify_downlink,
    })
}

pub fn run(a: RunArgs) -> Result<()> {
    let s = run_config(&a)?.setup()?;
    let reports = run_policies(&s, &parse_policies(&a.policy)?)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        println!(
            "station run: {} on {} CPU devices x {} workers, {} RU(s) x {} frames every {:?} over {:?}, deadline {:?}",
            s.config_name, a.devices, a.workers, a.rus, a.frames, a.frame_period, a.transport, a.deadline
        );
        print_table(&reports);
        println!();
        print_breakdown(&reports);
        for r in &reports {
            println!(
                "scheduler ({}): busy {:.0}% of the run, {:.1} us per dispatched instruction",
                r.policy,
                100.0 * r.scheduler_busy,
                r.scheduler_us_per_dispatch
            );
            for n in &r.notes {
                println!("note ({}): {n}", r.policy);
            }
        }
    }
    if let Some(dir) = &a.svg_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let title = format!("{}: frame latency, {} devices", s.config_name, a.devices);
        cdf_svg(&dir.join("station_latency_cdf.svg"), &title, &reports)?;
        let title = format!("{}: stage breakdown", s.config_name);
        breakdown_svg(&dir.join("station_breakdown.svg"), &title, &reports)?;
        if !a.json {
            println!("plots written to {}", dir.display());
        }
    }
    if reports.iter().any(|r| r.decode_errors > 0) {
        bail!("some frames decoded to bits that differ from the truth (see decoded_ok)");
    }
    Ok(())
}
