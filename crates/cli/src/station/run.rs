//! `radiohost station run` and the demo's baseband stage.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use radiohost_station::policy::{make_policy, PolicyParams};
use radiohost_station::report::RunReport;
use radiohost_station::ru::TransportKind;
use radiohost_station::runtime::{run_station, DeviceAction, DeviceChange, StationSetup};

use super::common::{
    breakdown_svg, cdf_svg, devices, load_config, parse_duration_ns, parse_policies,
    print_breakdown, print_table,
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
    /// Frame period, e.g. 1ms.
    #[arg(long, default_value = "1ms", value_parser = parse_duration_ns)]
    pub frame_period: u64,
    /// Deadline after a frame's first packet, e.g. 4ms.
    #[arg(long, default_value = "4ms", value_parser = parse_duration_ns)]
    pub deadline: u64,
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

/// Build the setup of `a`.
fn setup(a: &RunArgs) -> Result<StationSetup> {
    if a.rus == 0 || a.frames == 0 {
        bail!("--rus and --frames must be at least 1");
    }
    let (cfg, name) = load_config(&a.config)?;
    let devs = devices(a.devices, a.workers, !a.no_pin)?;
    let mut s =
        StationSetup::new(&cfg, &name, a.parts, a.bank_frames, devs).map_err(anyhow::Error::msg)?;
    s.rus = a.rus;
    s.frames = a.frames;
    s.transport = a.transport;
    s.frame_period_ns = a.frame_period;
    s.deadline_ns = a.deadline;
    s.verify_downlink = a.verify_downlink;
    if let Some(f) = a.remove_device_at {
        if a.devices < 2 {
            bail!("--remove-device-at needs at least 2 devices (one must remain)");
        }
        s.changes.push(DeviceChange {
            at_frame: f,
            action: DeviceAction::Remove((a.devices - 1) as u32),
        });
    }
    Ok(s)
}

/// Run each policy of `policies` on `s`.
pub fn run_policies(s: &StationSetup, policies: &[String]) -> Result<Vec<RunReport>> {
    policies
        .iter()
        .map(|p| {
            let policy = make_policy(p, &s.ctx.shape, &PolicyParams::default())?;
            run_station(s, policy)
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("policy {p}"))
        })
        .collect()
}

pub fn run(a: RunArgs) -> Result<()> {
    let s = setup(&a)?;
    let policies = parse_policies(&a.policy).map_err(anyhow::Error::msg)?;
    let reports = run_policies(&s, &policies)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        println!(
            "station run: {} on {} CPU devices x {} workers, {} RU(s) x {} frames every {:.3} ms over {:?}, deadline {:.3} ms",
            s.config_name,
            a.devices,
            a.workers,
            a.rus,
            a.frames,
            a.frame_period as f64 / 1e6,
            a.transport,
            a.deadline as f64 / 1e6
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
        }
        for r in &reports {
            for n in &r.notes {
                println!("note ({}): {n}", r.policy);
            }
        }
    }
    if let Some(dir) = &a.svg_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let title = format!("{}: frame latency, {} devices", s.config_name, a.devices);
        cdf_svg(&dir.join("station_latency_cdf.svg"), &title, &reports)?;
        breakdown_svg(
            &dir.join("station_breakdown.svg"),
            &format!("{}: stage breakdown", s.config_name),
            &reports,
        )?;
        if !a.json {
            println!("plots written to {}", dir.display());
        }
    }
    if reports.iter().any(|r| r.decode_errors > 0) {
        bail!("some frames decoded to bits that differ from the truth (see decoded_ok)");
    }
    Ok(())
}

/// The baseband stage of `radiohost demo`.
pub fn demo_stage() -> Result<()> {
    let a = RunArgs {
        config: PathBuf::from("8x2"),
        policy: "lroc".into(),
        devices: 2,
        workers: 1,
        no_pin: false,
        rus: 1,
        frames: 50,
        transport: TransportKind::Ring,
        frame_period: 2_000_000,
        deadline: 20_000_000,
        parts: 4,
        remove_device_at: None,
        bank_frames: 4,
        verify_downlink: true,
        json: false,
        svg_dir: None,
    };
    let s = setup(&a)?;
    let r = run_policies(&s, &["lroc".to_string()])?.remove(0);
    println!(
        "== massive-MIMO baseband: 8x2, 1 RU over the in-process ring, {} frames every 2 ms, LROC on 2 CPU devices ==",
        r.frames
    );
    println!(
        "  decoded {} (bits and emulated users match the truth: {}), missed {}, rejected/failed {}",
        r.completed,
        r.decoded_ok,
        r.missed,
        r.rejected + r.failed
    );
    println!(
        "  frame latency mean {:.3} ms, P99 {:.3} ms, max {:.3} ms; {:.2} Mbit/s decoded",
        r.mean_ms, r.p99_ms, r.max_ms, r.decoded_mbps
    );
    if r.decode_errors > 0 {
        bail!("{} frames decoded to wrong bits", r.decode_errors);
    }
    if r.completed == 0 {
        bail!("no frame completed: {:?}", r.notes);
    }
    Ok(())
}
