//! `radiohost station run` and the demo's baseband stage (`radiohost_station::setup`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use radiohost_station::calibration::Calibration;
use radiohost_station::report::{miss_split, write_frame_log};
use radiohost_station::ru::TransportKind;
use radiohost_station::setup::{
    load_config, parse_device_events, parse_policies, read_policy_params, run_policies, RunConfig,
};
use radiohost_station::sim::RefShape;
use radiohost_testbed::units::{parse_positive_duration, parse_probability};

use super::common::{
    breakdown_svg, cdf_svg, device_pool, print_breakdown, print_costs, print_table,
};

#[derive(Args)]
pub struct RunArgs {
    /// Frame configuration: a JSON file, or a built-in name (8x2, 16x4, 32x8, 64x16).
    #[arg(long)]
    pub config: PathBuf,
    /// Scheduling policy: lroc, frame, symbol, task, a comma list, or `all` (each
    /// runs in turn on the same frames).
    #[arg(long, default_value = "lroc")]
    pub policy: String,
    /// Devices, in order (their ids): cpu:WORKERS (a CPU device of that many worker
    /// threads) and gpu:ORDINAL (a CUDA GPU), comma separated.
    #[arg(long, default_value = "cpu:1,cpu:1")]
    pub devices: String,
    /// Do not pin workers to cores (pinned workers that leave a core free spin 500 us when idle).
    #[arg(long)]
    pub no_pin: bool,
    /// Radio units, each sending its own frames (1 to 64).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub rus: u16,
    /// Frames each radio unit sends (1 to 10000000).
    #[arg(long, default_value_t = 500, value_parser = crate::ui::count_in::<u64>(1, 10_000_000))]
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
    /// Subcarrier parts ZF, EqDemod and Precode are split into (1 to 1200); by
    /// default the calibration's, else one per CPU worker down to parts of 2^15
    /// multiply-adds per symbol, at most one per ZF batch (8x2, 16x4: 1; 64x16: <= 5).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1200))]
    pub parts: Option<u16>,
    /// Devices leaving and rejoining, times after the first frame: e.g.
    /// remove:1@200ms,add:1@500ms (device ids follow --devices).
    #[arg(long)]
    pub device_events: Option<String>,
    /// Measured per-opcode costs (`station calibrate --out`); without it the
    /// scheduler starts from modelled costs (the report says which).
    #[arg(long)]
    pub calibration: Option<PathBuf>,
    /// Policy parameters, as JSON or a JSON file (any subset of PolicyParams fields,
    /// e.g. '{"lookahead": 0}'); without it the defaults.
    #[arg(long)]
    pub policy_params: Option<PathBuf>,
    /// Largest share of frames allowed to miss their deadline (missed, rejected or
    /// failed) before the command fails: a percentage (1%) or a probability (0.01).
    #[arg(long, default_value = "1%", value_parser = parse_probability)]
    pub max_miss: f64,
    /// Exit 0 even when more than --max-miss of the frames missed their deadline.
    #[arg(long)]
    pub accept_misses: bool,
    /// Distinct generated frames the radio units replay (1 to 256).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub bank_frames: u16,
    /// Also verify every completed frame's downlink with emulated users.
    #[arg(long)]
    pub verify_downlink: bool,
    /// Print JSON (one report per policy) instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Write the latency-CDF and stage-breakdown SVG plots: into this folder (an
    /// existing directory or a path ending in `/`) as station_latency_cdf.svg and
    /// station_breakdown.svg, or beside FILE as FILE-latency_cdf.svg and FILE-breakdown.svg.
    #[arg(long, value_name = "FILE|DIR")]
    pub svg: Option<PathBuf>,
    /// Write every frame's fate here as CSV (policy, frame, ru, fate, decided_ms
    /// after the first packet, latency_ms, reason): which frames were lost, when,
    /// and whether the scheduler dropped them early (`missed_early`) or they ran
    /// past the deadline (`missed`).
    #[arg(long, value_name = "FILE")]
    pub frame_log: Option<PathBuf>,
}

fn run_config(a: &RunArgs) -> Result<RunConfig> {
    let (config, config_name) = load_config(&a.config)?;
    let devices = device_pool(&a.devices, !a.no_pin)?;
    let frame_period_ns = a.frame_period.as_nanos() as u64;
    let device_changes = parse_device_events(
        a.device_events.as_deref(),
        frame_period_ns,
        usize::from(a.rus),
        devices.len(),
    )?;
    let calibration = match &a.calibration {
        Some(p) => Some(Arc::new(Calibration::load(p)?)),
        None => None,
    };
    Ok(RunConfig {
        config,
        config_name,
        devices,
        rus: usize::from(a.rus),
        frames: a.frames,
        transport: a.transport,
        frame_period_ns,
        deadline_ns: a.deadline.as_nanos() as u64,
        parts: a.parts.map(usize::from),
        device_changes,
        bank_frames: usize::from(a.bank_frames),
        verify_downlink: a.verify_downlink,
        calibration,
    })
}

pub fn run(a: RunArgs) -> Result<()> {
    // Checked before the work starts, as every --svg is.
    let svg = a.svg.as_deref().map(crate::ui::SvgOut::new).transpose()?;
    // Created before the run too, so a path that cannot be written loses no run.
    let frame_log = a
        .frame_log
        .as_deref()
        .map(|p| {
            std::fs::File::create(p)
                .map(|f| (p, std::io::BufWriter::new(f)))
                .with_context(|| format!("creating the frame log {}", p.display()))
        })
        .transpose()?;
    let mut s = run_config(&a)?.setup()?;
    s.policy_params = read_policy_params(a.policy_params.as_deref())?;
    let policies = parse_policies(&a.policy)?;
    // Frames are due on a fixed schedule, so the run's length is known up front:
    // the bar follows the clock against frames x period per policy.
    let due_ms = (a.frame_period.as_secs_f64() * 1e3 * a.frames as f64 * policies.len() as f64)
        .ceil() as u64;
    let started = std::time::Instant::now();
    let reports = crate::ui::with_progress(
        "frames due (by the clock)",
        due_ms.max(1),
        !a.json,
        || (started.elapsed().as_millis() as u64).min(due_ms),
        || run_policies(&s, &policies),
    )?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        println!(
            "station run: {} ({}) on {}, {} RU(s) x {} frames every {:?} over {:?}, deadline {:?}",
            s.config_name,
            RefShape::of(&s.ctx.shape, s.ctx.cfg.fft_size),
            a.devices,
            a.rus,
            a.frames,
            a.frame_period,
            a.transport,
            a.deadline
        );
        if let Some(r) = reports.first() {
            print_costs(r);
        }
        print_table(&reports);
        println!();
        print_breakdown(&reports);
        for r in &reports {
            println!(
                "scheduling ({}): {:.0}% of the run (on the reporting threads), {:.1} us per dispatched instruction",
                r.policy,
                100.0 * r.scheduler_busy,
                r.scheduler_us_per_dispatch
            );
            if let Some(split) = miss_split(r.missed, r.missed_early) {
                println!("misses ({}): {split}", r.policy);
            }
            for n in &r.notes {
                println!("note ({}): {n}", r.policy);
            }
        }
    }
    if let Some((path, mut w)) = frame_log {
        write_frame_log(&reports, &mut w)
            .with_context(|| format!("writing the frame log {}", path.display()))?;
        if !a.json {
            println!("frame log written to {}", path.display());
        }
    }
    if let Some(svg) = &svg {
        let (cdf, breakdown) = if svg.is_dir() {
            ("station_latency_cdf", "station_breakdown")
        } else {
            ("latency_cdf", "breakdown")
        };
        let title = format!("{}: frame latency on {}", s.config_name, a.devices);
        let cdf = svg.path(cdf, true);
        cdf_svg(&cdf, &title, &reports)?;
        let title = format!("{}: stage breakdown", s.config_name);
        let breakdown = svg.path(breakdown, true);
        breakdown_svg(&breakdown, &title, &reports)?;
        if !a.json {
            println!(
                "plots written to {} and {}",
                cdf.display(),
                breakdown.display()
            );
        }
    }
    if reports.iter().any(|r| r.decode_errors > 0) {
        bail!("some frames decoded to bits that differ from the truth (see decoded_ok)");
    }
    if !a.accept_misses {
        for r in &reports {
            r.check_misses(a.max_miss)
                .map_err(|e| anyhow::anyhow!("{e} (pass --accept-misses to exit 0 anyway)"))?;
        }
    }
    Ok(())
}
