//! `radiohost station bench`: offered load swept up to saturation, every policy in
//! the same run on the same CPU devices, with LROC/baseline ratios and the floor.
//!
//! The floor is the machine's ideal capacity: workers x 1 s / (serial execution time
//! of one frame), the serial time measured in this run by executing frames'
//! instructions in DAG order on one thread (median per opcode, which is also the
//! per-opcode calibration the simulator reads).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use radiohost_station::kernels::{execute, FrameSlot, KernelContext, Scratch};
use radiohost_station::policy::{make_policy, PolicyParams};
use radiohost_station::ru::TransportKind;
use radiohost_station::runtime::{run_station, StationSetup};

use super::common::{devices, load_config, parse_duration_ns, parse_policies};

#[derive(Args)]
pub struct BenchArgs {
    /// Configurations (files or built-in names), comma separated.
    #[arg(long, default_value = "16x4,32x8")]
    pub configs: String,
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
    #[arg(long, default_value = "0.1,0.2,0.3,0.5,0.7,1.0")]
    pub loads: String,
    /// Frames per run (one run per configuration, load and policy).
    #[arg(long, default_value_t = 200)]
    pub frames: u64,
    /// Frame deadline; by default max(4 ms, 4 x the serial frame time).
    #[arg(long, value_parser = parse_duration_ns)]
    pub deadline: Option<u64>,
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

/// One run's row (the `--json` schema of the issue, plus the configuration).
#[derive(Clone, Debug, serde::Serialize)]
pub struct BenchRow {
    pub config: String,
    pub policy: String,
    pub offered_fps: f64,
    pub achieved_fps: f64,
    pub mean_ms: f64,
    pub p99_ms: f64,
    pub p9999_ms: f64,
    pub missed: u64,
    pub decoded_ok: u64,
    pub frames: u64,
}

#[derive(Clone, Debug, serde::Serialize)]
struct Ratio {
    config: String,
    offered_fps: f64,
    baseline: String,
    /// LROC P99.99 / baseline P99.99 (below 1: LROC's tail is shorter); `None` when
    /// either completed no frame.
    p9999_ratio: Option<f64>,
    /// LROC achieved / baseline achieved frames/s; `None` when the baseline achieved 0.
    throughput_ratio: Option<f64>,
}

#[derive(Clone, Debug, serde::Serialize)]
struct Saturation {
    config: String,
    policy: String,
    /// Highest achieved frames/s with no wrong decode, over the sweep.
    max_fps: f64,
    floor_fps: f64,
    of_floor: f64,
}

#[derive(Clone, Debug, serde::Serialize)]
struct Calibration {
    config: String,
    serial_frame_us: f64,
    floor_fps: f64,
    cpu: BTreeMap<&'static str, u64>,
    shape: serde_json::Value,
}

/// Execute `frames` frames single-threaded in DAG order. Per opcode the median
/// time of its executions (robust to preemption on a shared machine), and the serial
/// time of one frame as the sum of those medians over the frame's instructions.
fn calibrate(s: &StationSetup, frames: u64) -> Result<(BTreeMap<&'static str, u64>, f64)> {
    let ctx: &KernelContext = &s.ctx;
    let slot = FrameSlot::new(ctx);
    let mut scratch = Scratch::new(ctx)?;
    let mut samples: BTreeMap<&'static str, Vec<u64>> = BTreeMap::new();
    // One warm-up frame, then the measured ones.
    for f in 0..=frames {
        let truth = s.bank.truth(0, f);
        for (rx, sym) in ctx.shape.received_symbols().into_iter().enumerate() {
            slot.stage_symbol_from_frame(ctx, rx, sym, &truth.frame.samples);
        }
        radiohost_station::kernels::slot::write(&slot.downlink_payload)
            .clone_from_slice(&truth.frame.downlink_payload);
        for i in ctx.frame_program(f) {
            let t = Instant::now();
            execute(ctx, &slot, i, &mut scratch)?;
            let ns = t.elapsed().as_nanos() as u64;
            if f > 0 {
                samples.entry(i.opcode.name()).or_default().push(ns);
            }
        }
    }
    let per_op: BTreeMap<&'static str, u64> = samples
        .into_iter()
        .map(|(k, mut v)| {
            v.sort_unstable();
            (k, v[v.len() / 2])
        })
        .collect();
    let serial: u64 = ctx
        .frame_program(0)
        .iter()
        .map(|i| per_op.get(i.opcode.name()).copied().unwrap_or(0))
        .sum();
    Ok((per_op, serial as f64))
}

pub fn run(a: BenchArgs) -> Result<()> {
    let policies = parse_policies(&a.policies).map_err(anyhow::Error::msg)?;
    let loads: Vec<f64> = a
        .loads
        .split(',')
        .map(|x| {
            x.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| *v > 0.0 && *v < 100.0)
        })
        .collect::<Option<_>>()
        .context("--loads must be positive fractions, e.g. 0.5,1.0,1.5")?;
    let devs = devices(a.devices, a.workers, !a.no_pin)?;
    let workers: usize = devs.iter().map(|d| d.workers).sum();
    let load_avg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut rows = Vec::new();
    let mut ratios = Vec::new();
    let mut saturation = Vec::new();
    let mut calibrations = Vec::new();
    let configs: Vec<&str> = a.configs.split(',').map(str::trim).collect();
    let runs = (configs.len() * loads.len() * policies.len()) as u64;
    let bar = if a.json {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(runs)
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    for c in &configs {
        let (cfg, name) = load_config(std::path::Path::new(c))?;
        let mut s =
            StationSetup::new(&cfg, &name, a.parts, 8, devs.clone()).map_err(anyhow::Error::msg)?;
        let (per_op, serial_ns) = calibrate(&s, 8)?;
        let floor_fps = workers as f64 * 1e9 / serial_ns;
        calibrations.push(Calibration {
            config: name.clone(),
            serial_frame_us: serial_ns / 1e3,
            floor_fps,
            cpu: per_op,
            shape: serde_json::json!({
                "antennas": cfg.antennas, "users": cfg.users, "fft_size": cfg.fft_size,
                "data_num": cfg.data_num, "parts": a.parts, "schedule": cfg.file.frame_schedule,
            }),
        });
        s.transport = a.transport;
        s.frames = a.frames;
        s.deadline_ns = a
            .deadline
            .unwrap_or((4.0 * serial_ns) as u64)
            .max(4_000_000);
        for &load in &loads {
            let offered = floor_fps * load;
            s.frame_period_ns = (1e9 / offered) as u64;
            let mut at_load = Vec::new();
            for p in &policies {
                bar.set_message(format!("{name} {p} {offered:.0} frames/s"));
                let policy = make_policy(p, &s.ctx.shape, &PolicyParams::default())?;
                let r = run_station(&s, policy)
                    .map_err(anyhow::Error::msg)
                    .with_context(|| format!("{name} {p} at {offered:.0} frames/s"))?;
                if r.decode_errors > 0 {
                    anyhow::bail!(
                        "{name} {p}: {} frames decoded to wrong bits",
                        r.decode_errors
                    );
                }
                let row = BenchRow {
                    config: name.clone(),
                    policy: p.clone(),
                    offered_fps: 1e9 / s.frame_period_ns as f64,
                    achieved_fps: r.achieved_fps,
                    mean_ms: r.mean_ms,
                    p99_ms: r.p99_ms,
                    p9999_ms: r.p9999_ms,
                    missed: r.missed + r.rejected + r.failed,
                    decoded_ok: r.decoded_ok,
                    frames: r.frames,
                };
                at_load.push(row.clone());
                rows.push(row);
                bar.inc(1);
            }
            if let Some(l) = at_load.iter().find(|r| r.policy == "lroc") {
                for b in at_load.iter().filter(|r| r.policy != "lroc") {
                    ratios.push(Ratio {
                        config: name.clone(),
                        offered_fps: l.offered_fps,
                        baseline: b.policy.clone(),
                        p9999_ratio: (l.p9999_ms > 0.0 && b.p9999_ms > 0.0)
                            .then(|| l.p9999_ms / b.p9999_ms),
                        throughput_ratio: (b.achieved_fps > 0.0)
                            .then(|| l.achieved_fps / b.achieved_fps),
                    });
                }
            }
        }
        for p in &policies {
            let max_fps = rows
                .iter()
                .filter(|r| r.config == name && &r.policy == p)
                .map(|r| r.achieved_fps)
                .fold(0.0, f64::max);
            saturation.push(Saturation {
                config: name.clone(),
                policy: p.clone(),
                max_fps,
                floor_fps,
                of_floor: max_fps / floor_fps,
            });
        }
    }
    bar.finish_and_clear();
    if let (Some(path), Some(c)) = (&a.calibration_out, calibrations.first()) {
        let j = serde_json::json!({ "cpu": c.cpu, "shape": c.shape, "config": c.config });
        std::fs::write(path, serde_json::to_string_pretty(&j)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if a.json {
        let out = serde_json::json!({
            "rows": rows, "ratios": ratios, "saturation": saturation,
            "calibration": calibrations, "loadavg": load_avg.trim(), "workers": workers,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "station bench: {} CPU devices x {} workers, {} frames per run, load average {}",
        a.devices,
        a.workers,
        a.frames,
        load_avg.trim()
    );
    for c in &calibrations {
        println!(
            "{}: serial frame {:.0} us -> floor {:.0} frames/s on {workers} workers",
            c.config, c.serial_frame_us, c.floor_fps
        );
    }
    println!();
    println!(
        "{:<6} {:<7} {:>9} {:>9} {:>9} {:>9} {:>10} {:>7} {:>6} {:>6}",
        "config",
        "policy",
        "offered",
        "achieved",
        "mean ms",
        "p99 ms",
        "p99.99 ms",
        "missed",
        "ok",
        "frames"
    );
    for r in &rows {
        println!(
            "{:<6} {:<7} {:>9.1} {:>9.1} {:>9.3} {:>9.3} {:>10.3} {:>7} {:>6} {:>6}",
            r.config,
            r.policy,
            r.offered_fps,
            r.achieved_fps,
            r.mean_ms,
            r.p99_ms,
            r.p9999_ms,
            r.missed,
            r.decoded_ok,
            r.frames
        );
    }
    println!();
    println!("LROC / baseline (P99.99 ratio < 1 and throughput ratio >= 1 favour LROC):");
    for r in &ratios {
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
    for s in &saturation {
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
